"""After warm_up, a training job's controller calls compile nothing (in any numba-cache state).

A fresh interpreter runs ``warm_up`` and lists the signatures of every numba
dispatcher of spare-opt's modules; then it drives controllers of another layout
through what a training job does (``fail``, ``set_failed``, ``recover``, state
transfer, agreed plans, the plans' arrays) at ``m = 1`` and ``m > 1`` and lists them
again.  A kernel compiled or loaded from the cache after warm_up would add a
signature.  Nothing is timed.
"""

import json
import subprocess
import sys

_SCRIPT = r'''
import json, sys
import numpy as np
import spare_opt

def signatures():
    found = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("spare_opt"):
            continue
        for attribute, value in list(vars(module).items()):
            if type(value).__name__ == "CPUDispatcher":
                found[f"{name}.{attribute}"] = len(value.signatures)
    return found

spare_opt.warm_up(micro_batches=(1, 16))
before = signatures()
layout = spare_opt.Layout((np.arange(13)[:, None] + np.array([0, 1, 3, 9])) % 13, offsets=[0, 1, 3, 9])
for m in (1, 4, 16):
    controller = spare_opt.ReorderController(layout, micro_batches=m)
    plans = [controller.fail(5), controller.fail([2, 8], mid_step=True), controller.recover(5),
             controller.set_failed([0, 4], mid_step=True), controller.set_failed(np.array([3, 7, 11]))]
    twin = spare_opt.ReorderController(layout, micro_batches=m)
    twin.load_state_dict(controller.state_dict())
    plans += [twin.fail(6), twin.recover([3]), spare_opt.agreed_plan(layout, [1, 12], micro_batches=m)]
    for plan in plans:
        plan.split, plan.order, plan.assignment, plan.failed, plan.work_by_group(), plan.fingerprint()
print(json.dumps({"before": before, "after": signatures()}))
'''


def test_no_kernel_compiles_after_warm_up():
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    before, after = report["before"], report["after"]
    # warm_up did compile (or load) the controllers' entry kernels at m = 1 and m > 1 ...
    assert before.get("spare_opt.planning._kernels.fail_packed", 0) >= 1
    assert before.get("spare_opt.planning._split_kernels.fail_split", 0) >= 1
    # ... and nothing gained a signature afterwards.
    grown = {name: (before.get(name, 0), count) for name, count in after.items() if count > before.get(name, 0)}
    assert grown == {}

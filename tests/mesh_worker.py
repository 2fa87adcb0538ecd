"""``examples/launch/llama.py`` with what ``tests/test_group_meshes.py`` checks: a record of every step, repairs awaited.

``--record``: every rank appends one JSON line per applied step to
``OUT/record-g{group}.r{rank}.jsonl``: the step, when it was applied (``time.time()``) and the
process's CPU time then (``time.process_time()``),
``step.computed`` (the micro-batch keys
whose gradients this group added to it), and the dataset rows its pipeline received for
each micro-batch (the first stage's inputs as ``x{key}``, the last stage's targets as
``y{key}``; without a pipeline, the model's inputs).

``--await-repairs S``: before the last step but one, wait up to ``S`` seconds until every
group is live or a repaired one asked to rejoin, so that a restarted group takes part
before the end (rank 0 of each group decides, and its ranks follow).

The rank of the group's progress is written to the store as ``progress`` by the lowest
live group's rank 0 after each step (where a test waits for a step).
"""

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location(
    "launch_llama", Path(__file__).resolve().parent.parent / "examples" / "launch" / "llama.py")
llama = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llama)


class Recorder:
    """What this rank computed in every step (see the module's docstring)."""

    def __init__(self, path, group, dataset, model_parts, stages):
        self.step, self.group, self.path = None, group, path
        self.rows = {}
        inputs, targets = dataset.tensors
        self.index = {("x", bytes(row.numpy())): i for i, row in enumerate(inputs)}
        self.index.update({("y", bytes(row.numpy())): i for i, row in enumerate(targets)})
        for stage, module in zip(stages or [None], model_parts):
            if stage is None or stage.is_first:
                module.register_forward_pre_hook(self._inputs)

    def wrap(self, loss):
        """The pipeline's loss, recording the targets that reach the last stage."""
        def recorded(output, target):
            self._seen("y", target)
            return loss(output, target)

        return recorded

    def _inputs(self, module, args):
        if args and torch.is_tensor(args[0]) and args[0].dtype == torch.int64:
            self._seen("x", args[0])

    def _seen(self, kind, rows):
        if self.step is None or self.step.current is None:  # a schedule's shape inference, not a micro-batch
            return
        _, t, j = self.step.current
        key = t * self.group.micro_batches + j
        found = [self.index.get((kind, bytes(row.numpy()))) for row in rows]
        self.rows.setdefault(f"{kind}{key}", []).append(found)

    def step_done(self):
        line = {"step": self.step.step - 1, "time": time.time(), "cpu": time.process_time(),
                "computed": self.step.computed, "rows": self.rows,
                "epoch": self.group.epoch, "members": self.group.members, "data_part": self.group.data_part,
                "caught_up": any(name == "caught-up" and extra.get("step") == self.step.step - 1
                                 for name, _, extra in self.group.timeline)}
        self.rows = {}
        with open(self.path, "a") as handle:
            handle.write(json.dumps(line) + "\n")


def parse(argv):
    await_repairs = 0.0
    if "--await-repairs" in argv:
        at = argv.index("--await-repairs")
        await_repairs = float(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    record = "--record" in argv
    argv = [a for a in argv if a != "--record"]
    args = llama.parse(argv)
    args.await_repairs, args.record = await_repairs, record
    return args


def train(args):
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    job = llama.join_job()
    run = llama.build(args, job)
    group = run.group
    recorder = None
    if args.record:
        parts = run.model if isinstance(run.model, list) else [run.model]
        recorder = Recorder(os.path.join(args.out, f"record-g{job.group}.r{job.group_rank}.jsonl"), group,
                            run.dataset, parts, run.stages)
        if run.stages:
            run.loss = recorder.wrap(run.loss)
    step = llama.spare_step(args, run)
    if recorder is not None:
        recorder.step = step
    while step.step < args.steps:
        if step.step == args.steps - 2 and args.await_repairs:
            # Rank 0 decides for its group (the group's ranks must take the same steps together).
            wait = torch.tensor([0.0])
            if job.group_rank == 0:
                deadline = time.monotonic() + args.await_repairs
                while group.world_size < group.groups and not group.rejoin_pending() and \
                        time.monotonic() < deadline:
                    time.sleep(0.01)
            group.all_reduce_in_group(wait)
        step()
        run.scheduler.step()
        if recorder is not None:
            recorder.step_done()
        if group.group == group.members[0] and job.group_rank == 0:
            job.store.set("progress", str(step.step))
    llama.end_job(job.store)
    group.close()
    llama.save_result(args, job, run)


if __name__ == "__main__":
    llama.run_worker(train, parse(sys.argv[1:]))

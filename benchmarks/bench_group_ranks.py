"""Benchmark: recovery of DP groups of one rank and of K ranks (FSDP2 inside), side by side in one run.

Each job is ``examples/launch/train.py`` as a user launches it: the store of
``python -m spare_opt.torch.store``, one ``torchrun --nproc-per-node K --max-restarts 1``
per DP group (``N = 3``, ``r = 2``), gloo on CPU, float64.  Once the job has made four
steps, the last rank of group 1 is SIGKILLed (with ``K > 1``: not the rank that speaks
for the group, so the group's other rank must notice and leave); torchrun restarts the
group as a whole, which rejoins.  From the survivors' timelines
(:func:`spare_opt.torch.recovery_phases`): detection, agreement, rebuild and patch, and
the whole recovery, on the survivor that recovered last; then every group's final
parameters against the fault-free single-process run.

Usage::

    python benchmarks/bench_group_ranks.py                    # K = 1 and 2, two jobs each
    python benchmarks/bench_group_ranks.py --ranks 1,2,4 --reps 3 --json
"""

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "launch" / "train.py"
sys.path.append(str(REPO / "examples"))


def _job(ranks, steps, timeout):
    """One job of 3 groups of ``ranks`` ranks with a SIGKILL; its recovery phases and largest difference."""
    from spare_opt.torch import recovery_phases
    from training_job import reference_run

    import importlib.util

    spec = importlib.util.spec_from_file_location("launch_train", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as out:
        args = ["--groups", "3", "--steps", str(steps), "--step-sleep", "0.05", "--await-repairs", "120"]
        store = subprocess.Popen([sys.executable, "-m", "spare_opt.torch.store", "--host", "127.0.0.1", "--port", "0"],
                                 stdout=subprocess.PIPE, text=True)
        processes = []
        try:
            port = int(store.stdout.readline().rsplit(":", 1)[1])
            client = dist.TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False,
                                   timeout=datetime.timedelta(seconds=30))
            env = {**os.environ, "SPARE_STORE": f"127.0.0.1:{port}", "OMP_NUM_THREADS": "1",
                   "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
            for g in range(3):
                log = open(os.path.join(out, f"g{g}.log"), "w")
                processes.append(subprocess.Popen(
                    [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
                     "--max-restarts", "1", "--monitor-interval", "0.1", str(SCRIPT), "--out", out, *args],
                    env={**env, "SPARE_GROUP": str(g)}, stdout=log, stderr=subprocess.STDOUT))
            deadline = time.monotonic() + timeout
            while not client.check(["gen/0/progress"]) or int(client.get("gen/0/progress")) < 4:
                if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                    raise RuntimeError(f"the job did not reach step 4 (see {out})")
                time.sleep(0.05)
            victim = ranks - 1
            key = "gen/0/started/1" + (f"/{victim}" if victim else "")
            killed = time.time()
            os.kill(int(client.get(key)), signal.SIGKILL)
            codes = [p.wait(max(1.0, deadline - time.monotonic())) for p in processes]
            if codes != [0, 0, 0]:
                raise RuntimeError(f"torchrun exit codes {codes}")
            results = {g: torch.load(os.path.join(out, f"g{g}.pt"), weights_only=False) for g in range(3)}
        finally:
            for process in processes:
                process.kill()
            store.terminate()
            store.wait()
    reference = reference_run(module.config_of(module.parse(["--out", "-", *args])))
    difference = max(float((a - b).abs().max()) for r in results.values() for a, b in zip(r["params"], reference))
    phases = recovery_phases({g: r["timeline"] for g, r in results.items() if g != 1}, [(killed, 1)])[0]
    return {"ranks": ranks, "victim_rank": victim, "source": phases["source"], "detection": phases["detection"],
            "agreement": phases["agreement"], "rebuild": phases["rebuild"], "patch": phases["patch"],
            "total": phases["total"], "rejoined": bool(results[1]["rejoined"]), "max_difference": difference}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="1,2", help="K values, comma-separated (default 1,2)")
    parser.add_argument("--reps", type=int, default=2, help="jobs per K, interleaved (default 2)")
    parser.add_argument("--steps", type=int, default=14)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per job")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    options = parser.parse_args(argv)
    ranks = [int(k) for k in options.ranks.split(",")]
    rows = [_job(k, options.steps, options.timeout) for _ in range(options.reps) for k in ranks]
    summary = {k: {phase: statistics.median(r[phase] for r in rows if r["ranks"] == k)
                   for phase in ("detection", "agreement", "rebuild", "patch", "total")} for k in ranks}
    if options.json:
        print(json.dumps({"rows": rows, "median_seconds": summary}, indent=2))
        return
    print(f"{'K':>2} {'killed':>6} {'detected by':<16} {'detect':>7} {'agree':>7} {'rebuild':>8} {'patch':>7} "
          f"{'total':>7} {'rejoined':>8} {'max diff':>9}")
    for r in rows:
        print(f"{r['ranks']:>2} {'rank ' + str(r['victim_rank']):>6} {r['source']:<16} {r['detection']:7.3f} "
              f"{r['agreement']:7.3f} {r['rebuild']:8.3f} {r['patch']:7.3f} {r['total']:7.3f} "
              f"{str(r['rejoined']):>8} {r['max_difference']:9.1e}")
    base = summary[ranks[0]]["total"]
    for k in ranks:
        print(f"K = {k}: median recovery {summary[k]['total']:.3f} s ({summary[k]['total'] / base:.2f}x K = {ranks[0]})")


if __name__ == "__main__":
    main()

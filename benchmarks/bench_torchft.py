"""Benchmark: SPARe's TorchFT adapter beside plain TorchFT and the fault-free run, on real processes.

A TorchFT job (lighthouse in this process, one process per replica group, ``Manager``
with a synchronous quorum, reconfigurable ``ProcessGroupGloo``, ``OptimizerWrapper``)
trains the small model of ``examples/training_job.py`` on CPU with N = 4 replica groups
(consecutive layout, r = 2), in two modes:

* ``spare``: ``spare_opt.torch.TorchFTPlan`` - the plan of each quorum, gradients summed
  over the quorum and divided by ``N m``;
* ``plain``: plain TorchFT - replica ``g`` computes block ``g`` of the global batch, the
  manager averages over the live replicas.

Scenarios: fault-free; ``--seeds`` runs with one replica SIGKILLed at a random moment
(random replica, random step, random delay: compute, all-reduce or quorum); one run
whose dying replica is SIGKILLed while its peers are inside the all-reduce.  For each
run: the largest difference of the survivors' final parameters from a single-process
fault-free run (relative to the parameter scale), and the recovery (seconds from the
kill to the survivors' first commit of a step without the dead replica, median over
the survivors).

With ``--ranks-per-group 2`` each replica group is two processes with FSDP2 inside
(``fully_shard`` over the group, micro-batches split by samples between the ranks,
local gradient shards reduced over the quorum); a kill SIGKILLs every rank of the group.
The header names the torchft installed and its process-group API.

Usage::

    python benchmarks/bench_torchft.py              # table on stdout
    python benchmarks/bench_torchft.py --json       # JSON document
"""

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("RUST_LOG", "warn")  # torchft logs every quorum at "info"

import numpy as np

import spare_opt

sys.path.append(str(Path(__file__).resolve().parent.parent / "examples"))  # the example jobs
from torchft_job import run_torchft_job  # noqa: E402
from training_job import reference_run  # noqa: E402


def _layout(groups):
    stacks = (np.arange(groups)[:, None] + np.arange(2)[None, :]) % groups
    return spare_opt.Layout(stacks, method="consecutive", offsets=[0, 1])


def _measure(job, reference, scale, killed_at, groups):
    results = job["results"]
    worst = max(max(float((a - b).abs().max()) for a, b in zip(r["params"], reference)) for r in results.values())
    recovery = None
    if killed_at is not None:
        # The first step committed without the dead replica (a step already past its
        # all-reduce when the kill came may still commit with it).
        firsts = [min((end for _, committed, members, _, end in r["records"]
                       if committed and end > killed_at and len(members) < groups), default=None)
                  for r in results.values()]
        firsts = [t for t in firsts if t is not None]
        recovery = statistics.median(firsts) - killed_at if firsts else None
    steps = [end - start for r in results.values() for _, committed, _, start, end in r["records"] if committed]
    failed = sum(1 for r in results.values() for _, committed, _, _, _ in r["records"] if not committed)
    return {"survivors": sorted(results), "relative_difference": worst / scale, "recovery_s": recovery,
            "median_step_ms": statistics.median(steps) * 1e3, "failed_attempts": failed, "wall_s": job["seconds"]}


def _kill_time(job):
    for name, moment, _ in job["events"]:
        if name in ("kill", "death"):
            return moment
    return None


def run(args):
    groups = 4
    base = {"layout": _layout(groups), "micro_batches": args.micro_batches, "steps": args.steps,
            "global_batch_size": 8 * groups * args.micro_batches, "dataset_size": 40 * groups * args.micro_batches,
            "dtype": args.dtype, "ranks_per_group": args.ranks_per_group, "fsdp": args.ranks_per_group > 1}
    reference = reference_run(base)
    scale = max(float(p.abs().max()) for p in reference)
    rng = random.Random(args.seed)
    kills = [(rng.randrange(groups), rng.randrange(3, args.steps - 4)) for _ in range(args.seeds)]
    rows = []
    for mode in ("spare", "plain"):
        config = {**base, "mode": mode}
        job = run_torchft_job(config, seed=args.seed)
        rows.append({"mode": mode, "scenario": "fault-free", **_measure(job, reference, scale, None, groups)})
        for i, (group, progress) in enumerate(kills):
            job = run_torchft_job(config, [("kill", group, progress)], seed=args.seed + i)
            rows.append({"mode": mode, "scenario": f"kill {group} after step {progress}",
                         **_measure(job, reference, scale, _kill_time(job), groups)})
        die = {"group": 2, "step": args.steps // 2}
        job = run_torchft_job({**config, "die": die})
        rows.append({"mode": mode, "scenario": f"2 dies in the all-reduce of step {die['step']}",
                     **_measure(job, reference, scale, _kill_time(job), groups)})
    return rows


def _torchft_version():
    """The installed torchft distribution, its version and process-group API."""
    import importlib.metadata

    from spare_opt.torch.torchft_adapter import torchft_api

    import torchft

    for name in ("torchft-nightly", "torchft"):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        # The distribution whose files include the torchft package actually imported.
        if any(os.path.abspath(str(dist.locate_file(f))) == os.path.abspath(torchft.__file__)
               for f in dist.files or ()):
            return {"distribution": name, "version": dist.version, "api": torchft_api()}
    return {"distribution": "torchft", "version": "unknown", "api": torchft_api()}


def _summary(rows, mode):
    killed = [r for r in rows if r["mode"] == mode and r["scenario"] != "fault-free"]
    differences = [r["relative_difference"] for r in killed]
    recoveries = [r["recovery_s"] for r in killed if r["recovery_s"] is not None]
    return {"mode": mode, "runs": len(killed), "median_difference": statistics.median(differences),
            "worst_difference": max(differences), "median_recovery_s": statistics.median(recoveries),
            "worst_recovery_s": max(recoveries)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="runs with a random kill per mode (default 5)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--micro-batches", type=int, default=2)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--ranks-per-group", type=int, choices=[1, 2, 4, 8], default=1,
                        help="processes per replica group, FSDP2 inside when more than 1 (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of the table")
    args = parser.parse_args(argv)
    began = time.time()
    rows = run(args)
    summaries = [_summary(rows, mode) for mode in ("spare", "plain")]
    torchft = _torchft_version()
    document = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count()}, "torchft": torchft,
                "settings": vars(args), "runs": rows, "summary": summaries, "seconds": time.time() - began}
    if args.json:
        json.dump(document, sys.stdout, indent=2)
        print()
        return
    print(f"{torchft['distribution']} {torchft['version']} ({torchft['api']} API); N = 4, consecutive r = 2, "
          f"m = {args.micro_batches}, {args.ranks_per_group} rank(s) per group"
          f"{' (FSDP2)' if args.ranks_per_group > 1 else ''}, {args.steps} steps, {args.dtype}; "
          "difference = max |p - p_fault_free| / max |p_fault_free| over the survivors")
    print(f"{'mode':6} {'scenario':36} {'survivors':12} {'difference':>11} {'recovery s':>11} {'step ms':>8} "
          f"{'failed':>6}")
    for r in rows:
        recovery = "-" if r["recovery_s"] is None else f"{r['recovery_s']:.3f}"
        print(f"{r['mode']:6} {r['scenario']:36} {r['survivors']!s:12} {r['relative_difference']:11.2e} "
              f"{recovery:>11} {r['median_step_ms']:8.1f} {r['failed_attempts']:6d}")
    for s in summaries:
        print(f"{s['mode']}: {s['runs']} runs with a kill: difference median {s['median_difference']:.2e}, worst "
              f"{s['worst_difference']:.2e}; recovery median {s['median_recovery_s']:.3f} s, worst "
              f"{s['worst_recovery_s']:.3f} s")
    print(f"({document['seconds']:.0f} s)")


if __name__ == "__main__":
    main()

"""Benchmark: the time from a SIGKILL to the survivors' next step, under the documented torchrun recipe.

Each run is one job as docs/launch.md launches it: the store of
``python -m spare_opt.torch.store``, one ``torchrun --nproc-per-node K --max-restarts 1``
per DP group, ``examples/launch/train.py --model gpt`` (the GPT-style model with AdamW,
clipping, a warmup + cosine schedule and dropout; gloo on CPU, float64).  Once the job
has made four steps, the last rank of group 1 is SIGKILLed; its death watcher (forked by
``run_worker``) posts the group's death notice at once (torchrun has no hook for it), the
survivors' alarm threads hear of it, and they agree, rebuild and make their next step;
torchrun restarts the group, which rejoins.  For each run: the kill to the survivors'
next step (the ``recovered`` event on the survivor that recovered last,
:func:`spare_opt.torch.recovery_phases`), its phases (detection, agreement, plan,
rebuild, patch: the step's patch work and all-reduce), how many torch ``waitForInput ...
likely a timeout`` warnings the survivors' logs hold, and whether every group's final
parameters equal the fault-free run's (within ten times that run's own sensitivity to
one ulp of rounding, as the launcher tests check).  The summary gives, per ``K``, the
median and the largest of the total and of each phase.

``--load P`` runs ``P`` busy-loop processes during every job: a loaded machine.

Usage::

    python benchmarks/bench_recovery.py                       # 20 kills of K = 1 groups, 10 of K = 2 groups
    python benchmarks/bench_recovery.py --single 4 --pairs 2 --load 2 --json
"""

import argparse
import datetime
import importlib.util
import json
import os
import re
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

#: torch's log line for a TCPStore wait that timed out on the client.
WAIT_TIMEOUT_WARNING = re.compile(r"waitForInput.*likely a timeout")


def _module():
    spec = importlib.util.spec_from_file_location("launch_train", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference(args, ranks):
    """The fault-free run's final parameters (DP groups of ``ranks`` ranks) and the tolerance of an exact result."""
    import training_job

    config = {**_module().config_of(_module().parse(["--out", "-", *args])), "group_ranks": ranks}
    reference = training_job.reference_run(config)
    original = training_job.lm_loss_fn
    # One ulp more in every micro-batch's loss: any other order of the same sums moves the
    # final parameters by about this much (AdamW amplifies rounding), a wrong gradient by
    # orders of magnitude more.
    training_job.lm_loss_fn = lambda model, batch: original(model, batch) * (1 + 2 ** -52)
    try:
        moved = training_job.reference_run(config)
    finally:
        training_job.lm_loss_fn = original
    scale = max(float(p.abs().max()) for p in reference)
    sensitivity = max(float((a - b).abs().max()) for a, b in zip(moved, reference))
    return reference, max(1e-12 * scale, 10 * sensitivity)


def _run(ranks, args, timeout, load, heartbeat_timeout):
    """One job with one SIGKILL: the kill to the next step, its phases, the warnings, the final parameters."""
    from spare_opt.torch import recovery_phases

    groups = int(args[args.index("--groups") + 1])
    with tempfile.TemporaryDirectory() as out:
        store = subprocess.Popen([sys.executable, "-m", "spare_opt.torch.store", "--host", "127.0.0.1", "--port", "0"],
                                 stdout=subprocess.PIPE, text=True)
        processes = []
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
        try:
            port = int(store.stdout.readline().rsplit(":", 1)[1])
            client = dist.TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False,
                                   timeout=datetime.timedelta(seconds=30))
            env = {**os.environ, "SPARE_STORE": f"127.0.0.1:{port}", "OMP_NUM_THREADS": "1",
                   "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
            for g in range(groups):
                log = open(os.path.join(out, f"g{g}.log"), "w")
                processes.append(subprocess.Popen(
                    [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
                     "--max-restarts", "1", "--monitor-interval", "0.1", str(SCRIPT), "--out", out,
                     "--heartbeat-timeout", str(heartbeat_timeout), *args],
                    env={**env, "SPARE_GROUP": str(g)}, stdout=log, stderr=subprocess.STDOUT))
            deadline = time.monotonic() + timeout
            while not client.check(["gen/0/progress"]) or int(client.get("gen/0/progress")) < 4:
                if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                    return {"ranks": ranks, "lost": True, "why": "the job did not reach step 4"}
                time.sleep(0.05)
            victim = ranks - 1
            key = "gen/0/started/1" + (f"/{victim}" if victim else "")
            killed = time.time()
            os.kill(int(client.get(key)), signal.SIGKILL)
            codes = []
            for process in processes:
                try:
                    codes.append(process.wait(max(1.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    codes.append(None)
            if codes != [0] * groups:
                return {"ranks": ranks, "lost": True, "why": f"torchrun exit codes {codes}"}
            results = {g: torch.load(os.path.join(out, f"g{g}.pt"), weights_only=False) for g in range(groups)}
            warnings = {}
            for g in range(groups):
                if g != 1:
                    with open(os.path.join(out, f"g{g}.log")) as handle:
                        warnings[g] = len(WAIT_TIMEOUT_WARNING.findall(handle.read()))
        finally:
            for process in processes + burners:
                process.kill()
                process.wait()
            store.terminate()
            store.wait()
    phases = recovery_phases({g: r["timeline"] for g, r in results.items() if g != 1}, [(killed, 1)])
    row = {"ranks": ranks, "lost": False, "rejoined": bool(results[1]["rejoined"]),
           "members": results[0]["members"], "survivor_warnings": sum(warnings.values()), "params": results}
    if phases:
        row.update({k: phases[0][k] for k in ("source", "detection", "agreement", "plan", "rebuild", "patch",
                                              "total")})
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", type=int, default=20, help="runs that kill a DP group of one rank (default 20)")
    parser.add_argument("--pairs", type=int, default=10,
                        help="runs that kill a rank of a DP group of K = 2 ranks, FSDP2 inside (default 10)")
    parser.add_argument("--groups", type=int, default=3, help="N, DP groups of each job (default 3, r = 2)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--heartbeat-timeout", type=float, default=2.0)
    parser.add_argument("--load", type=int, default=0, help="busy-loop processes during every job (default 0)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per job before it counts as lost")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    options = parser.parse_args(argv)
    args = ["--model", "gpt", "--groups", str(options.groups), "--steps", str(options.steps), "--step-sleep", "0.05",
            "--await-repairs", "120"]
    plan = [1] * options.single + [2] * options.pairs
    # Interleaved, so that a change of the machine's load during the benchmark hits both kinds.
    order = sorted(range(len(plan)), key=lambda i: (i if plan[i] == 1 else i - options.single) /
                   max(1, options.single if plan[i] == 1 else options.pairs))
    references = {k: _reference(args, k) for k in sorted(set(plan))}
    rows = []
    for i in order:
        row = _run(plan[i], args, options.timeout, options.load, options.heartbeat_timeout)
        if not row["lost"]:
            results = row.pop("params")
            reference, tolerance = references[row["ranks"]]
            row["max_difference"] = max(float((a - b).abs().max()) for r in results.values()
                                        for a, b in zip(r["params"], reference))
            row["exact"] = row["max_difference"] <= tolerance
            row["tolerance"] = tolerance
        rows.append(row)
        # Each run as it ends (on stderr with --json): a benchmark stopped early keeps its runs.
        print(json.dumps(row), file=sys.stderr if options.json else sys.stdout, flush=True)
    summary = {}
    for k in (1, 2):
        mine = [r for r in rows if r["ranks"] == k]
        totals = [r["total"] for r in mine if "total" in r]
        if not mine:
            continue
        summary[f"K={k}"] = {
            "runs": len(mine), "lost": sum(r["lost"] for r in mine),
            "exact": sum(bool(r.get("exact")) for r in mine),
            "kill_to_next_step_median": statistics.median(totals) if totals else None,
            "kill_to_next_step_max": max(totals) if totals else None,
            "over_bound": sum(t > options.heartbeat_timeout + 1.0 for t in totals),
            "survivor_wait_warnings": sum(r.get("survivor_warnings", 0) for r in mine),
            "phases": {phase: {"median": statistics.median(values), "max": max(values)}
                       for phase in ("detection", "agreement", "plan", "rebuild", "patch")
                       for values in [[r[phase] for r in mine if phase in r]] if values},
            "sources": sorted({r["source"] for r in mine if "source" in r})}
    document = {"heartbeat_timeout": options.heartbeat_timeout, "load": options.load, "cpus": os.cpu_count(),
                "summary": summary, "rows": rows}
    if options.json:
        print(json.dumps(document, indent=2))
        return
    for kind, s in summary.items():
        if s["kill_to_next_step_max"] is None:
            print(f"{kind}: {s['runs']} runs, {s['lost']} lost: no recovery measured")
            continue
        print(f"{kind}: {s['runs']} runs, {s['lost']} lost, {s['exact']} exact; kill to next step median "
              f"{s['kill_to_next_step_median']:.3f} s, max {s['kill_to_next_step_max']:.3f} s "
              f"({s['over_bound']} over heartbeat_timeout + 1 s); {s['survivor_wait_warnings']} waitForInput warnings")
        print("    phases (median / max, s): " + ", ".join(f"{phase} {v['median']:.3f} / {v['max']:.3f}"
                                                         for phase, v in s["phases"].items())
              + f"; detected by {', '.join(s['sources'])}")


if __name__ == "__main__":
    main()

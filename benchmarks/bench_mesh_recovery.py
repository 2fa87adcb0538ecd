"""Benchmark: DP groups of PP 2 x TP 2 under SIGKILL: the recovery, and the step time while a group is down.

Each job is ``examples/launch/llama.py`` (through ``tests/mesh_worker.py``, which records
when every rank applied every step) as a user launches it: the store of
``python -m spare_opt.torch.store``, one ``torchrun --nproc-per-node 4`` per DP group,
``N = 3`` groups of a pipeline of 2 stages x 2 tensor-parallel ranks (1F1B), ``r = 2``,
``m`` micro-batches per shard type, gloo on CPU, float64, the Llama-style model (4 blocks,
``--dim`` wide).

* **Recovery** (``--reps`` jobs): once the job made four steps, a random rank of group 1
  is SIGKILLed; its torchrun stops the group and restarts it, and it rejoins.  The kill to
  the survivors' next applied step (the slower survivor), and the phases of
  :func:`spare_opt.torch.recovery_phases` on the survivors' timelines, the agreement split
  where the survivor joined it (``in_flight``: its rank 0 finished the pipeline schedule
  step it was in, which is not interrupted; ``store_agreement``: the agreement itself).
* **Step time while a group is down** (one job): group 1's torchrun has no restart, so the
  survivors go on without it to the end.  The survivors' median step time before the
  kill and after the recovery step, their ratio, and the physical bound of that ratio:
  each survivor runs ``n1`` pipeline micro-batches a step instead of ``n0`` (the plan's
  work with and without group 1), and a pipeline of ``p`` stages takes ``n + p - 1``
  micro-batch slots for ``n`` micro-batches (1F1B and GPipe: the bubble), so the bound is
  ``(n1 + p - 1) / (n0 + p - 1)``; the step's fixed costs (the all-reduce, clipping, the
  optimizer) bring the measured ratio below it.  Beside the wall time, the CPU time the
  group's four ranks spend per step (their work, whatever else runs): on a machine with
  fewer cores than processes, the dead group's processes free CPU for the survivors,
  which hides their extra work from the wall-clock ratio.

Usage::

    python benchmarks/bench_mesh_recovery.py                     # m = 4, two recoveries, one long outage
    python benchmarks/bench_mesh_recovery.py --micro-batches 2 --reps 3 --json
"""

import argparse
import datetime
import json
import os
import random
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
WORKER = REPO / "tests" / "mesh_worker.py"
RANKS = 4
GROUPS = 3


def _launch(out, args, restarts):
    """The store and one torchrun of 4 ranks per group; ``(store, client, processes)``."""
    store = subprocess.Popen([sys.executable, "-m", "spare_opt.torch.store", "--host", "127.0.0.1", "--port", "0"],
                             stdout=subprocess.PIPE, text=True)
    port = int(store.stdout.readline().rsplit(":", 1)[1])
    client = dist.TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=30))
    env = {**os.environ, "SPARE_STORE": f"127.0.0.1:{port}", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    processes = []
    for g in range(GROUPS):
        log = open(os.path.join(out, f"torchrun-g{g}.log"), "w")
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(RANKS),
             "--max-restarts", str(restarts[g]), "--monitor-interval", "0.1", str(WORKER), "--out", out, *args],
            env={**env, "SPARE_GROUP": str(g)}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    return store, client, processes


def _stop(store, processes):
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    store.terminate()
    store.wait()


def _kill_after(client, processes, step, out, timeout, rng):
    deadline = time.monotonic() + timeout
    while not client.check(["gen/0/progress"]) or int(client.get("gen/0/progress")) < step:
        if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
            raise RuntimeError(f"the job did not reach step {step} (see {out})")
        time.sleep(0.02)
    rank = rng.randrange(RANKS)
    key = "gen/0/started/1" + (f"/{rank}" if rank else "")
    killed = time.time()
    os.kill(int(client.get(key)), signal.SIGKILL)
    return killed, rank


def _records(out, group, rank=0):
    with open(os.path.join(out, f"record-g{group}.r{rank}.jsonl")) as handle:
        return [json.loads(line) for line in handle]


def _recovery(args, timeout, rng):
    from spare_opt.torch import recovery_phases

    with tempfile.TemporaryDirectory() as out:
        store, client, processes = _launch(out, [*args, "--await-repairs", "120"], [1, 1, 1])
        try:
            killed, rank = _kill_after(client, processes, 4, out, timeout, rng)
            codes = [p.wait(timeout) for p in processes]
        finally:
            _stop(store, processes)
        if codes != [0, 0, 0]:
            raise RuntimeError(f"torchrun exit codes {codes} (see {out})")
        next_step = max(min(r["time"] for r in _records(out, g) if r["time"] > killed) for g in (0, 2)) - killed
        timelines = {g: torch.load(os.path.join(out, f"g{g}.r0.pt"), weights_only=False)["timeline"] for g in (0, 2)}
        phases = recovery_phases(timelines, [(killed, 1)])
        row = {"killed_rank": rank, "next_step": next_step}
        if phases:
            row.update({k: phases[0][k] for k in ("source", "detection", "agreement", "rebuild", "patch", "total")})
            # The agreement phase split where the survivor joined it: before, its rank 0 finished the
            # pipeline schedule step in flight (a schedule step is not interrupted); after, the store.
            split = []
            for g in (0, 2):
                times = {}
                for name, at, _ in timelines[g]:
                    if at > killed and name in ("detect", "joined", "agree") and name not in times:
                        times[name] = at
                if len(times) == 3:
                    split.append((times["joined"] - times["detect"], times["agree"] - times["joined"]))
            if split:
                row["in_flight"], row["store_agreement"] = max(split)
        return row


def _outage(args, micro_batches, timeout, rng):
    import spare_opt
    from spare_opt.torch import PlanBook

    book = PlanBook(spare_opt.consecutive(GROUPS, 2), micro_batches)
    before = book.work(book.plan([]))
    after = book.work(book.plan([1]))
    with tempfile.TemporaryDirectory() as out:
        store, client, processes = _launch(out, args, [1, 0, 1])
        try:
            killed, rank = _kill_after(client, processes, 6, out, timeout, rng)
            codes = [processes[g].wait(timeout) for g in (0, 2)]
        finally:
            _stop(store, processes)
        if codes != [0, 0]:
            raise RuntimeError(f"the survivors' torchrun exit codes {codes} (see {out})")
        rows = []
        for g in (0, 2):
            records = {k: _records(out, g, k) for k in range(RANKS)}
            times = [(r["step"], r["time"]) for r in records[0]]
            recovered = min(s for s, t in times if t > killed)
            healthy = [s for s, t in times[1:] if s >= 2 and t < killed]
            down = [s for s, _ in times if s > recovered + 1]

            def median_delta(field, steps, rank=0):
                by_step = {r["step"]: r[field] for r in records[rank]}
                return statistics.median(by_step[s] - by_step[s - 1] for s in steps)

            wall = (median_delta("time", healthy), median_delta("time", down))
            # the work of the group's ranks per step: CPU seconds, summed over its 4 ranks
            cpu = tuple(sum(median_delta("cpu", steps, k) for k in range(RANKS)) for steps in (healthy, down))
            n0, n1 = len(before[g]), len(after[g])
            p = 2
            rows.append({"group": g, "n0": n0, "n1": n1, "fault_free_step": wall[0], "down_step": wall[1],
                         "ratio": wall[1] / wall[0], "fault_free_cpu": cpu[0], "down_cpu": cpu[1],
                         "cpu_ratio": cpu[1] / cpu[0], "bound": (n1 + p - 1) / (n0 + p - 1), "compute_only": n1 / n0,
                         "steps": (len(healthy), len(down))})
        return {"killed_rank": rank, "survivors": rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--micro-batches", type=int, default=4, help="m (default 4)")
    parser.add_argument("--reps", type=int, default=2, help="recovery jobs (default 2)")
    parser.add_argument("--steps", type=int, default=12, help="steps of a recovery job (default 12)")
    parser.add_argument("--outage-steps", type=int, default=30, help="steps of the outage job (default 30)")
    parser.add_argument("--dim", type=int, default=128, help="the model's width (default 128)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the killed ranks")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per job")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    options = parser.parse_args(argv)
    rng = random.Random(options.seed)
    common = ["--groups", str(GROUPS), "--pp", "2", "--tp", "2", "--schedule", "1F1B", "--micro-batches",
              str(options.micro_batches), "--dim", str(options.dim), "--heartbeat-timeout", "10", "--record"]
    recoveries = [_recovery([*common, "--steps", str(options.steps)], options.timeout, rng)
                  for _ in range(options.reps)]
    outage = _outage([*common, "--steps", str(options.outage_steps)], options.micro_batches, options.timeout, rng)
    load = os.getloadavg()[0]
    if options.json:
        print(json.dumps({"micro_batches": options.micro_batches, "recoveries": recoveries, "outage": outage,
                          "load_average": load}, indent=2))
        return
    print(f"PP 2 x TP 2, N = {GROUPS}, r = 2, m = {options.micro_batches}; load average {load:.1f}")
    print(f"{'killed':>6} {'next step (s)':>13} {'detected by':<16} {'detect':>7} {'agree':>7} {'(in flight':>10} "
          f"{'store)':>7} {'rebuild':>8} {'patch':>7}")
    nan = float("nan")
    for r in recoveries:
        print(f"{'rank ' + str(r['killed_rank']):>6} {r['next_step']:13.3f} {r.get('source', '-'):<16} "
              f"{r.get('detection', nan):7.3f} {r.get('agreement', nan):7.3f} {r.get('in_flight', nan):10.3f} "
              f"{r.get('store_agreement', nan):7.3f} {r.get('rebuild', nan):8.3f} {r.get('patch', nan):7.3f}")
    print(f"group 1 down (rank {outage['killed_rank']} killed, no restart):")
    print(f"{'group':>5} {'n0':>3} {'n1':>3} {'step before (s)':>15} {'step down (s)':>13} {'ratio':>6} "
          f"{'CPU before (s)':>14} {'CPU down (s)':>12} {'ratio':>6} {'bound':>6} {'compute only':>12}")
    for r in outage["survivors"]:
        print(f"{r['group']:>5} {r['n0']:>3} {r['n1']:>3} {r['fault_free_step']:15.3f} {r['down_step']:13.3f} "
              f"{r['ratio']:6.2f} {r['fault_free_cpu']:14.3f} {r['down_cpu']:12.3f} {r['cpu_ratio']:6.2f} "
              f"{r['bound']:6.2f} {r['compute_only']:12.2f}")


if __name__ == "__main__":
    main()

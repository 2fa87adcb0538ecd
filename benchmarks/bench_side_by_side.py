"""Benchmark: the fault-free step of spare-opt, plain DDP and TorchFT side by side, on the same job under torchrun.

The job: ``N = 3`` DP groups (replicas) of one process, the two-layer perceptron of
``examples/training_job.py`` (8 -> 16 -> 1, float64, SGD with momentum), a global batch
of ``B = 48`` samples per step drawn by :func:`spare_opt.torch.global_batch_indices`
(the same samples in every framework: each process computes 16 of them), gloo on CPU,
one thread per process.  Every framework runs under ``torchrun`` as its users launch it:

* ``spare``: the store of ``python -m spare_opt.torch.store`` and one ``torchrun
  --standalone --nproc-per-node 1`` per DP group (docs/launch.md), the worker wrapped in
  ``run_worker``: ``join_job``, ``SpareGroup`` (``heartbeat_interval`` as given),
  ``SpareStep`` on a consecutive layout with ``r = 2`` (fault-free, each group computes
  its own 16 samples, as DDP's ranks do);
* ``ddp``: one ``torchrun --standalone --nproc-per-node 3``, ``init_process_group("gloo")``
  and ``torch.nn.parallel.DistributedDataParallel``;
* ``torchft``: a lighthouse (``torchft.coordination.LighthouseServer``, in this
  process) and one ``torchrun --standalone --nproc-per-node 1`` per replica group, each
  with its ``Manager`` (torchft's defaults: asynchronous quorum), ``ProcessGroupGloo``,
  torchft's ``DistributedDataParallel`` and ``OptimizerWrapper``, as torchft's own
  ``train_ddp.py`` example.

A step is timed in each process from the data fetch to the optimizer's step (the whole
``SpareStep()`` call for spare-opt); the first ``--skip`` steps are left out (start-up,
first quorums).  Jobs of every kind are interleaved, ``--rounds`` times, so a change of
the machine's load hits all of them; the table gives the median and 90th percentile
over every step of every process of every round, each median's ratio to DDP's, and
spare-opt's own work per step (median): the step less what DDP does too (the
micro-batch's data, forward and backward, the all-reduce and its wait, the optimizer's
step), so the bound "within 10% of DDP's step plus the plan's own cost" reads
``1.1 DDP + own``.

Usage::

    python benchmarks/bench_side_by_side.py                       # 3 rounds, 300 steps each
    python benchmarks/bench_side_by_side.py --rounds 1 --steps 100 --json
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

os.environ.setdefault("RUST_LOG", "warn")  # torchft's lighthouse (in this process) logs every quorum at "info"

REPO = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve()
GROUPS = 3
BATCH = 48


def _config(steps):
    sys.path.insert(0, str(REPO / "examples"))
    from training_job import DEFAULTS

    return {**DEFAULTS, "global_batch_size": BATCH, "dataset_size": 960, "steps": steps, "micro_batches": 1}


def _data(config):
    import torch
    from torch.utils.data import default_collate

    from training_job import loss_fn, make_dataset, make_model

    torch.manual_seed(0)
    dataset = make_dataset(config)
    model, optimizer = make_model(config)
    return dataset, model, optimizer, loss_fn, default_collate


def _write(out, name, times):
    path = os.path.join(out, name)
    with open(path + ".tmp", "w") as handle:
        json.dump(times, handle)
    os.replace(path + ".tmp", path)


def _exit():
    """Leave at once, as ``run_worker`` does: a gloo or torchft thread must not keep a finished worker alive."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ---------------------------------------------------------------- the workers (run by torchrun)
def _spare_worker(options):
    import spare_opt
    from spare_opt.torch import SpareBatchSampler, SpareGroup, SpareStep
    from spare_opt.torch.launchers import end_job, join_job, run_worker

    def main():
        import torch

        torch.set_num_threads(1)
        config = _config(options.steps)
        dataset, model, optimizer, loss_fn, _ = _data(config)
        job = join_job()
        group = SpareGroup(spare_opt.consecutive(GROUPS, 2), job.group, job.store, micro_batches=1,
                           heartbeat_interval=options.interval, rejoin=job.rejoin)
        sampler = SpareBatchSampler(group, len(dataset), BATCH, steps=options.steps, seed=0)
        step = SpareStep(group, model, optimizer, loss_fn, sampler, dataset)
        # The time in the work DDP does too (the micro-batch's data, forward and backward, the
        # all-reduce and its wait, the optimizer): the rest of the step is spare-opt's own.
        spent = [0.0]

        def timed(function):
            def run(*args, **kwargs):
                began = time.perf_counter()
                try:
                    return function(*args, **kwargs)
                finally:
                    spent[0] += time.perf_counter() - began
            return run

        step._compute = timed(step._compute)
        group.all_reduce = timed(group.all_reduce)
        optimizer.step = timed(optimizer.step)
        times = []
        while step.step < options.steps:
            spent[0] = 0.0
            began = time.perf_counter()
            step()
            total = time.perf_counter() - began
            times.append([total, group.world_size, total - spent[0]])
        end_job(job.store)
        group.close()
        _write(options.out, f"spare-{job.group}.json", times)

    run_worker(main)


def _ddp_worker(options):
    import torch
    import torch.distributed as dist

    from spare_opt.torch import global_batch_indices

    torch.set_num_threads(1)
    config = _config(options.steps)
    dataset, model, optimizer, loss_fn, collate = _data(config)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    model = torch.nn.parallel.DistributedDataParallel(model)
    times = []
    for step in range(options.steps):
        began = time.perf_counter()
        index = global_batch_indices(len(dataset), BATCH, step, seed=0)
        block = index[rank * BATCH // size:(rank + 1) * BATCH // size]
        optimizer.zero_grad()
        loss_fn(model, collate([dataset[int(i)] for i in block])).backward()
        optimizer.step()
        times.append([time.perf_counter() - began, size])
    _write(options.out, f"ddp-{rank}.json", times)
    _exit()


def _torchft_worker(options):
    import torch
    from torchft.ddp import DistributedDataParallel
    from torchft.manager import Manager
    from torchft.optim import OptimizerWrapper
    from torchft.process_group import ProcessGroupGloo

    from spare_opt.torch import global_batch_indices

    torch.set_num_threads(1)
    group = int(os.environ["REPLICA_GROUP_ID"])
    config = _config(options.steps)
    dataset, model, inner, loss_fn, collate = _data(config)

    def state_dict():
        return {"model": model.state_dict(), "optim": inner.state_dict()}

    def load_state_dict(state):
        model.load_state_dict(state["model"])
        inner.load_state_dict(state["optim"])

    manager = Manager(pg=ProcessGroupGloo(timeout=datetime.timedelta(seconds=60)), min_replica_size=1,
                      load_state_dict=load_state_dict, state_dict=state_dict, replica_id=f"bench_{group}",
                      timeout=datetime.timedelta(seconds=60))
    wrapped = DistributedDataParallel(manager, model)
    optimizer = OptimizerWrapper(manager, inner)
    times = []
    while manager.current_step() < options.steps:
        began = time.perf_counter()
        optimizer.zero_grad()  # the quorum of this step
        step = manager.current_step()
        index = global_batch_indices(len(dataset), BATCH, step, seed=0)
        block = index[group * BATCH // GROUPS:(group + 1) * BATCH // GROUPS]
        loss_fn(wrapped, collate([dataset[int(i)] for i in block])).backward()
        optimizer.step()  # commits when every replica succeeded
        # Only the steps of the whole job count: a replica that starts late (or finishes
        # early) leaves steps with fewer participants, a smaller all-reduce.
        times.append([time.perf_counter() - began, manager.num_participants()])
    _write(options.out, f"torchft-{group}.json", times)
    manager.shutdown(wait=False)
    _exit()


# ---------------------------------------------------------------- the jobs
def _torchrun(nproc, args, env, log):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
               "--max-restarts", "0", "--monitor-interval", "0.1", str(SCRIPT), *args]
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _run_job(kind, options, interval=None):
    """One job of ``kind``; the step times of every process (seconds, the first ``skip`` steps left out)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RUST_LOG": "warn",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as out:
        args = ["--worker", kind, "--out", out, "--steps", str(options.steps)]
        if interval is not None:
            args += ["--interval", str(interval)]
        log = open(os.path.join(out, "log"), "w")
        processes, store, lighthouse = [], None, None
        try:
            if kind == "spare":
                store = subprocess.Popen([sys.executable, "-m", "spare_opt.torch.store", "--host", "127.0.0.1",
                                          "--port", "0"], stdout=subprocess.PIPE, text=True)
                port = int(store.stdout.readline().rsplit(":", 1)[1])
                processes = [_torchrun(1, args, {**env, "SPARE_STORE": f"127.0.0.1:{port}", "SPARE_GROUP": str(g)},
                                       log) for g in range(GROUPS)]
            elif kind == "ddp":
                processes = [_torchrun(GROUPS, args, env, log)]
            else:
                from torchft.coordination import LighthouseServer

                # Every replica in the first quorum: with min_replicas=1 each replica that starts
                # first trains alone, and the later ones heal and jump ahead.
                lighthouse = LighthouseServer(bind="[::]:0", min_replicas=GROUPS, join_timeout_ms=10000)
                processes = [_torchrun(1, args, {**env, "TORCHFT_LIGHTHOUSE": lighthouse.address(),
                                                 "REPLICA_GROUP_ID": str(g)}, log) for g in range(GROUPS)]
            deadline = time.monotonic() + options.timeout
            codes = []
            for process in processes:
                try:
                    codes.append(process.wait(max(1.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    codes.append(None)
            log.close()
            if codes != [0] * len(processes):
                with open(os.path.join(out, "log")) as handle:
                    tail = handle.read()[-3000:]
                raise RuntimeError(f"{kind} job failed (exit codes {codes}):\n{tail}")
            times, own = [], []
            for name in sorted(os.listdir(out)):
                if name.endswith(".json"):
                    with open(os.path.join(out, name)) as handle:
                        rows = [row for row in json.load(handle)[options.skip:] if row[1] == GROUPS]
                    times.append([row[0] for row in rows])
                    own.extend(row[2] for row in rows if len(row) > 2)
            return times, own
        finally:
            for process in processes:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            for name in os.listdir(out):
                if name.startswith("pid-"):
                    _kill_worker(int(name[4:]), out)
            if store is not None:
                store.terminate()
                store.wait()
            if lighthouse is not None:
                lighthouse.shutdown()


def _kill_worker(pid, out):
    """SIGKILL worker ``pid`` of the job writing to ``out`` if it still runs (its command line names ``out``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            if out.encode() not in handle.read():
                return
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of every job (default 3)")
    parser.add_argument("--steps", type=int, default=300, help="steps per job (default 300)")
    parser.add_argument("--skip", type=int, default=20, help="first steps of each job left out (default 20)")
    parser.add_argument("--intervals", default="0.05,0.005",
                        help="spare-opt's heartbeat_interval values, comma-separated seconds (default 0.05,0.005)")
    parser.add_argument("--kinds", default="ddp,torchft,spare", help="the frameworks, comma-separated")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per job")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--worker", choices=("spare", "ddp", "torchft"), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--interval", type=float, default=0.05, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker is not None:
        # Where the benchmark finds the workers to kill if the job fails (torchrun's are in their own session).
        open(os.path.join(options.out, f"pid-{os.getpid()}"), "w").close()
        {"spare": _spare_worker, "ddp": _ddp_worker, "torchft": _torchft_worker}[options.worker](options)
        return 0
    intervals = [float(v) for v in options.intervals.split(",") if v]
    kinds = [k for k in options.kinds.split(",") if k]
    jobs = [(k, None) for k in kinds if k != "spare"] + [("spare", h) for h in intervals if "spare" in kinds]
    load = [os.getloadavg()[0]]
    steps = {job: [] for job in jobs}
    owns = {job: [] for job in jobs}
    for round_ in range(options.rounds):
        for job in jobs:
            times, own = _run_job(job[0], options, job[1])
            for values in times:
                steps[job].extend(values)
            owns[job].extend(own)
            load.append(os.getloadavg()[0])
            print(f"round {round_ + 1}: {job[0]}{'' if job[1] is None else f' (heartbeat {job[1]:g} s)'} done, "
                  f"load average {load[-1]:.2f}", file=sys.stderr, flush=True)
    rows = []
    baseline = statistics.median(steps[("ddp", None)]) if ("ddp", None) in steps else None
    for (kind, interval), values in steps.items():
        median = statistics.median(values)
        own = statistics.median(owns[(kind, interval)]) if owns[(kind, interval)] else None
        rows.append({"kind": kind, "heartbeat_interval": interval, "steps": len(values), "median_ms": median * 1e3,
                     "p90_ms": _percentile(values, 0.9) * 1e3, "max_ms": max(values) * 1e3,
                     "ratio_to_ddp": None if baseline is None else median / baseline,
                     # spare-opt's own work per step (the step less its data, passes, all-reduce, optimizer)
                     "own_ms": None if own is None else own * 1e3,
                     "bound_ms": None if baseline is None or own is None else (1.1 * baseline + own) * 1e3})
    document = {"cpus": os.cpu_count(), "rounds": options.rounds, "steps_per_job": options.steps,
                "skipped": options.skip, "load_average": {"min": min(load), "max": max(load)}, "rows": rows}
    if options.json:
        print(json.dumps(document, indent=2))
        return 0
    print(f"N = {GROUPS}, B = {BATCH}, float64 MLP, gloo on CPU, {options.rounds} rounds x {options.steps} steps "
          f"(first {options.skip} left out); load average {min(load):.2f} to {max(load):.2f}")
    print(f"{'framework':28} {'steps':>6} {'median ms':>10} {'p90 ms':>8} {'max ms':>8} {'/ DDP':>6} "
          f"{'own ms':>7} {'1.1 DDP + own':>13}")
    for r in rows:
        name = r["kind"] + ("" if r["heartbeat_interval"] is None else f" (heartbeat {r['heartbeat_interval']:g} s)")
        ratio = "-" if r["ratio_to_ddp"] is None else f"{r['ratio_to_ddp']:.2f}"
        own = "-" if r["own_ms"] is None else f"{r['own_ms']:.2f}"
        bound = "-" if r["bound_ms"] is None else f"{r['bound_ms']:.2f}"
        print(f"{name:28} {r['steps']:>6} {r['median_ms']:>10.2f} {r['p90_ms']:>8.2f} {r['max_ms']:>8.1f} {ratio:>6} "
              f"{own:>7} {bound:>13}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

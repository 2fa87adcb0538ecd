"""Benchmark of the time-to-train simulation: numba event loop against a minimal SimPy model.

Both simulate the same scenario - replication r = 3 with checkpointing on the
paper-600k setting at N = 600 (10,000 steps), system-renewal Weibull failures whose
rate follows the live groups, failures during a restart absorbed - over the same
seeds, and report the time per run side by side, plus the mean TTT/T0 of each (they
model the same process with different random streams, so the means must agree within
their confidence intervals).  Also times one SPARe run of the default preset and,
optionally, the full reproduction (``--full``).

Usage::

    python benchmarks/bench_simulate.py [--seeds 10] [--json] [--full]

SimPy is not a dependency of spare-opt: install it to run the comparison
(``pip install simpy``); without it only the numba figures are printed.
"""

import argparse
import json
import math
import sys
import time

import numpy as np

from spare_opt import preset_parameters, simulate
from spare_opt.simulation._runs import FailurePool, run_synthetic


def scenario():
    return preset_parameters("paper-600k", 600, failure_model="system-renewal", restart_failures="absorb",
                             rate_follows_live=True)


def simpy_run(params, redundancy, period, seed, pool):
    """Rep+CKPT in SimPy: a trainer process interrupted by a failure process."""
    import simpy

    rng = np.random.default_rng(seed)
    sd = params.jitter_sd
    shape = params.weibull_shape
    scale = params.system_mtbf_seconds / math.gamma(1 + 1 / shape)
    n = params.groups
    env = simpy.Environment()
    state = {"k": 0, "epoch": 0, "restarting": False, "restarts": 0}

    def jitter():
        return max(0.0, rng.normal(1.0, sd))

    def failures(trainer):
        while True:
            live = (n - state["k"]) / n
            yield env.timeout(scale * rng.weibull(shape) / live)
            if state["restarting"]:
                continue  # absorbed by the restart
            state["k"] += 1
            wipe = pool.wipe[state["epoch"]] == state["k"]
            if wipe:
                state["k"] = 0
                state["epoch"] += 1
                if state["epoch"] >= pool.wipe.size:
                    pool.extend(pool.wipe.size)
            trainer.interrupt(wipe)

    def train():
        progress = committed = 0
        since = 0.0
        while progress < params.steps:
            remaining = redundancy * params.layer_compute_seconds * jitter() + params.allreduce_seconds * jitter()
            start = env.now
            wiped = False
            while remaining > 0:
                began = env.now
                try:
                    yield env.timeout(remaining)
                    remaining = 0.0
                except simpy.Interrupt as failure:
                    remaining -= env.now - began
                    if failure.cause:
                        wiped = True
                        break
                    remaining += params.shrink_seconds * jitter()
            if not wiped:
                progress += 1
                since += env.now - start
                if progress >= params.steps or since < period:
                    continue
                remaining = params.save_seconds * jitter()
                while remaining > 0:
                    began = env.now
                    try:
                        yield env.timeout(remaining)
                        remaining = 0.0
                    except simpy.Interrupt as failure:
                        remaining -= env.now - began
                        if failure.cause:
                            wiped = True
                            break
                        remaining += params.shrink_seconds * jitter()
                if not wiped:
                    committed, since = progress, 0.0
                    continue
            state["restarting"] = True
            state["restarts"] += 1
            yield env.timeout(params.restart_seconds * jitter())
            state["restarting"] = False
            progress, since = committed, 0.0

    trainer = env.process(train())
    env.process(failures(trainer))
    env.run(until=trainer)
    return env.now / (params.steps * (params.layer_compute_seconds + params.allreduce_seconds))


def mean_ci(values):
    values = np.asarray(values, dtype=float)
    half = 1.96 * values.std(ddof=1) / math.sqrt(values.size) if values.size > 1 else 0.0
    return float(values.mean()), float(half)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--full", action="store_true", help="also time the full paper-600k reproduction")
    args = parser.parse_args(argv)
    params = scenario()
    period = 1500.0
    report = {"scenario": "rep r=3, N=600, paper-600k timings, system-renewal, absorb, 10,000 steps",
              "seeds": args.seeds}

    t = time.perf_counter()
    simulate(params, "rep", 3, checkpoint_period_seconds=period, seed=0)
    report["numba_first_call_seconds"] = time.perf_counter() - t  # compile or cache load

    numba_ratios, numba_times = [], []
    for seed in range(args.seeds):
        pool = FailurePool("rep", params.groups, 3, seed)
        pool.extend(64)
        t = time.perf_counter()
        result = run_synthetic(params, "rep", 3, period, seed, pool)
        numba_times.append(time.perf_counter() - t)
        numba_ratios.append(result.ttt_ratio)
    report["numba_seconds_per_run"] = float(np.median(numba_times))
    report["numba_ttt_ratio"] = mean_ci(numba_ratios)

    try:
        import simpy  # noqa: F401
    except ImportError:
        report["simpy"] = "not installed (pip install simpy)"
    else:
        simpy_ratios, simpy_times = [], []
        for seed in range(args.seeds):
            pool = FailurePool("rep", params.groups, 3, seed)
            pool.extend(64)
            t = time.perf_counter()
            simpy_ratios.append(simpy_run(params, 3, period, seed, pool))
            simpy_times.append(time.perf_counter() - t)
        report["simpy_seconds_per_run"] = float(np.median(simpy_times))
        report["simpy_ttt_ratio"] = mean_ci(simpy_ratios)
        report["speedup"] = report["simpy_seconds_per_run"] / report["numba_seconds_per_run"]

    spare_params = preset_parameters("paper-600k", 600)
    simulate(spare_params, "spare", 9, checkpoint_period_seconds=3000.0, seed=0)  # layout, trajectories, kernels warm
    times = []
    for seed in range(args.seeds):
        t = time.perf_counter()
        simulate(spare_params, "spare", 9, checkpoint_period_seconds=3000.0, seed=seed)
        times.append(time.perf_counter() - t)
    report["spare_run_seconds_including_trajectories"] = float(np.median(times))

    if args.full:
        from spare_opt.simulation.tuning import tune_preset

        t = time.perf_counter()
        tune_preset("paper-600k", seeds=10, workers=2)
        report["full_reproduction_seconds_2_workers"] = time.perf_counter() - t

    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return
    for key, value in report.items():
        print(f"{key:<45} {value}")


if __name__ == "__main__":
    main()

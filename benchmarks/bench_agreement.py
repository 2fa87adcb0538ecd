"""Benchmark: agreed plans (set_failed / agreed_plan) beside the exact planner, and a plan's per-group work.

For each (N, r) (circulant Sidon layouts, offsets of optimal Golomb rulers) and each
``m``, random failure sets of ``k`` groups (``k = 1``, ``N/100``, ``N/10``) are planned

* by ``ReorderController.set_failed(groups)`` on one long-lived controller (what a
  training rank calls), alone and with the plan's ``split`` materialised and its
  fingerprint taken;
* by ``agreed_plan(layout, groups, method="exact")`` (the exact planner from the
  fault-free plan: the min-cost moves) on fewer samples, up to ``--exact-max-groups``;

reporting medians, the two plans' loads (they must agree) and the ratio of the
controller's moves to the min-cost optimum.  Then, at ``--work-groups`` (N = 10,000)
and ``m = 16``: ``Plan.work_by_group()`` against ``[plan.work(g) for g in groups]``
(the loop is timed on ``--loop-sample`` groups and scaled to N), and
``sample_indices_by_group``.  Kernels are warmed up first (``spare_opt.warm_up``).

Usage::

    python benchmarks/bench_agreement.py            # table on stdout
    python benchmarks/bench_agreement.py --json     # JSON document
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from spare_opt import Layout, ReorderController, agreed_plan, sample_indices_by_group, warm_up

GOLOMB_RULERS = {
    10: (0, 1, 6, 10, 23, 26, 34, 41, 53, 55),
    14: (0, 4, 6, 20, 35, 52, 59, 77, 78, 86, 89, 99, 122, 127),
    17: (0, 5, 7, 17, 52, 56, 67, 80, 81, 100, 122, 138, 159, 165, 168, 191, 199),
}
DEFAULT_SIZES = "1000:10,10000:14,100000:17"


def sidon_layout(n, r):
    offsets = np.asarray(GOLOMB_RULERS[r])
    return Layout((np.arange(n)[:, None] + offsets[None, :]) % n, method="sidon", offsets=offsets.tolist())


def _median_ms(samples):
    return float(np.median(samples)) * 1e3


def _timed(function):
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def plan_rows(sizes, micro_batches, samples, exact_samples, exact_max_groups, seed):
    rows = []
    rng = np.random.default_rng(seed)
    for n, r in sizes:
        layout = sidon_layout(n, r)
        for m in micro_batches:
            controller = ReorderController(layout, micro_batches=m)
            controller.set_failed([])  # builds the fault-free template once, as a rank does at start
            for k in sorted({1, max(1, n // 100), n // 10}):
                sets = [rng.choice(n, size=k, replace=False) for _ in range(samples)]
                alone, full, loads, moves = [], [], [], []
                for groups in sets:
                    seconds, plan = _timed(lambda: controller.set_failed(groups))
                    alone.append(seconds)
                    seconds, plan = _timed(lambda: controller.set_failed(groups))
                    seconds_more, _ = _timed(lambda: (plan.split, plan.fingerprint()))
                    full.append(seconds + seconds_more)
                    loads.append(plan.load)
                    moves.append(plan.moves)
                row = {"N": n, "r": r, "m": m, "k": k, "set_failed_ms": _median_ms(alone),
                       "set_failed_split_fingerprint_ms": _median_ms(full), "samples": samples,
                       "masked": int(sum(load is not None for load in loads))}
                if n <= exact_max_groups:
                    exact_times, ratios, agree = [], [], True
                    for groups, load, move in list(zip(sets, loads, moves))[:exact_samples]:
                        seconds, exact = _timed(lambda: agreed_plan(layout, groups, micro_batches=m, method="exact"))
                        exact_times.append(seconds)
                        agree &= exact.load == load
                        if exact.moves:
                            ratios.append(move / exact.moves)
                    row.update({"exact_ms": _median_ms(exact_times), "exact_samples": len(exact_times),
                                "loads_agree": bool(agree),
                                "moves_ratio_mean": float(np.mean(ratios)) if ratios else 1.0,
                                "moves_ratio_max": float(np.max(ratios)) if ratios else 1.0})
                rows.append(row)
    return rows


def work_rows(n, r, m, loop_sample, repeats, seed):
    layout = sidon_layout(n, r)
    rng = np.random.default_rng(seed)
    plan = agreed_plan(layout, rng.choice(n, size=n // 100, replace=False), micro_batches=m)
    plan.split  # materialised: the timings below are of the work lists alone
    live = np.flatnonzero(plan.order[:, 0] >= 0)
    per_call = []
    for g in live[:loop_sample]:
        seconds, _ = _timed(lambda: plan.work(int(g)))
        per_call.append(seconds)
    loop_ms = float(np.mean(per_call)) * live.size * 1e3
    by_group = [_timed(plan.work_by_group)[0] for _ in range(repeats)]
    samples = [_timed(lambda: sample_indices_by_group(plan, n * m * 4))[0] for _ in range(repeats)]
    work = plan.work_by_group()
    equal = all(list(zip(work.shard_types[work.indptr[g]:work.indptr[g + 1]].tolist(),
                         work.micro_batches[work.indptr[g]:work.indptr[g + 1]].tolist())) == plan.work(int(g))
                for g in live[:loop_sample])
    return {"N": n, "r": r, "m": m, "work_by_group_ms": _median_ms(by_group),
            "work_loop_ms_extrapolated": loop_ms, "loop_sample": int(min(loop_sample, live.size)),
            "ratio": loop_ms / _median_ms(by_group), "equal_on_sample": bool(equal),
            "sample_indices_by_group_ms_B_4Nm": _median_ms(samples)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="N:r pairs, comma separated")
    parser.add_argument("--micro-batches", default="1,16", help="m values, comma separated")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--exact-samples", type=int, default=5)
    parser.add_argument("--exact-max-groups", type=int, default=10000)
    parser.add_argument("--work-groups", type=int, default=10000)
    parser.add_argument("--loop-sample", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sizes = [tuple(int(v) for v in pair.split(":")) for pair in args.sizes.split(",")]
    micro_batches = [int(v) for v in args.micro_batches.split(",")]
    warm_seconds = warm_up(tuple(micro_batches))
    document = {
        "benchmark": "agreement", "python": sys.version.split()[0], "machine": platform.machine(),
        "cpus": os.cpu_count(), "warm_up_seconds": warm_seconds,
        "plans": plan_rows(sizes, micro_batches, args.samples, args.exact_samples, args.exact_max_groups, args.seed),
        "work": work_rows(args.work_groups, 14, 16, args.loop_sample, 20, args.seed),
    }
    if args.json:
        print(json.dumps(document, indent=2))
        return
    print(f"warm_up: {warm_seconds:.2f} s")
    print(f"{'N':>7} {'r':>3} {'m':>3} {'k':>6} {'set_failed':>11} {'+split+fp':>10} {'exact':>10} "
          f"{'loads agree':>11} {'moves/min':>14}")
    for row in document["plans"]:
        exact = f"{row['exact_ms']:8.2f}ms" if "exact_ms" in row else f"{'-':>10}"
        agree = str(row.get("loads_agree", "-"))
        ratio = f"{row['moves_ratio_mean']:.3f} (<={row['moves_ratio_max']:.2f})" if "moves_ratio_mean" in row else "-"
        print(f"{row['N']:>7} {row['r']:>3} {row['m']:>3} {row['k']:>6} {row['set_failed_ms']:9.3f}ms "
              f"{row['set_failed_split_fingerprint_ms']:8.3f}ms {exact} {agree:>11} {ratio:>14}")
    work = document["work"]
    print(f"\nwork at N = {work['N']:,}, m = {work['m']}: work_by_group {work['work_by_group_ms']:.3f} ms, "
          f"[work(g) for g] {work['work_loop_ms_extrapolated']:.0f} ms (from {work['loop_sample']} groups), "
          f"ratio {work['ratio']:.0f}x, equal: {work['equal_on_sample']}; "
          f"sample_indices_by_group (B = 4 N m) {work['sample_indices_by_group_ms_B_4Nm']:.3f} ms")


if __name__ == "__main__":
    main()

"""Benchmark: ``recover()`` from wipe-out depth at large N, the depth reached in one batch.

``bench_controller.py`` reaches the depth by timing every ``fail()`` one by one, which at
``N = 100,000``, ``m = 16`` takes longer than the rejoins it is there to measure (the
tails of ``fail()`` at tight levels).  Here the controller takes the failure sequence
(a random permutation, ``--seed``, on a circulant Sidon layout) up to its last masked
failure in one ``fail(groups)`` call (the status and the least load ``L*`` depend only
on the failed set), then the failed groups come back one by one in a random order
(``--seed + 1``), every ``recover()`` timed with its Python call.  The exact planner is
timed beside it at ``--exact-samples`` evenly spread rejoins of the first ``--exact-upto``
and must give the same status and ``L*``.

    python benchmarks/bench_recover_deep.py --size 100000:17 --micro-batches 16 --rejoins 20000
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_controller import _exact, _state, _trajectory, percentiles, sidon_layout  # noqa: E402

from spare_opt import ReorderController  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="100000:17", help="N:r")
    parser.add_argument("--micro-batches", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rejoins", type=int, default=None, help="rejoins timed (default: every failed group)")
    parser.add_argument("--exact-samples", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    n, r = (int(x) for x in args.size.split(":"))
    m = args.micro_batches
    layout = sidon_layout(n, r)
    sequence = np.random.default_rng(args.seed).permutation(n)
    started = time.perf_counter()
    masked = _trajectory(layout, sequence.tolist(), m)[1] - 1
    trajectory_s = time.perf_counter() - started
    controller = ReorderController(layout, micro_batches=m)
    controller.fail(int(sequence[0]))  # warm-up (loads the compiled kernels)
    controller.recover(int(sequence[0]))
    started = time.perf_counter()
    plan = controller.fail(sequence[:masked])
    batch_s = time.perf_counter() - started
    assert plan.status == "masked"
    depth_load = controller.load
    back = np.random.default_rng(args.seed + 1).permutation(sequence[:masked]).tolist()
    if args.rejoins is not None:
        back = back[:args.rejoins]
    exact_at = set(np.linspace(0, len(back) - 1, num=min(args.exact_samples, len(back))).astype(int).tolist())
    still = set(sequence[:masked].tolist())
    recover_us, level_falls, compared, exact_us = [], 0, 0, []
    for step, group in enumerate(back):
        if step in exact_at:
            state = _state(controller)
        load = controller.load
        start = time.perf_counter_ns()
        plan = controller.recover(group)
        recover_us.append((time.perf_counter_ns() - start) / 1e3)
        still.discard(group)
        level_falls += plan.load < load
        if step in exact_at:
            start = time.perf_counter_ns()
            exact = _exact(layout, sorted(still), m, *state)
            exact_us.append((time.perf_counter_ns() - start) / 1e3)
            assert (exact.status, exact.load) == (plan.status, plan.load), "controller and exact planner disagree"
            compared += 1
    times = np.asarray(recover_us)
    order = np.sort(times)[::-1]
    row = {"N": n, "r": r, "micro_batches": m, "seed": args.seed, "masked_failures": int(masked),
           "load_at_depth": int(depth_load), "load_after": int(controller.load), "rejoins": len(back),
           "level_falls": int(level_falls), "recover": percentiles(recover_us),
           "slowest_1pct_share": float(order[:max(1, len(order) // 100)].sum() / times.sum()),
           "exact": percentiles(exact_us) if exact_us else None, "exact_compared": compared,
           "trajectory_seconds": trajectory_s, "batch_fail_seconds": batch_s}
    if args.json:
        print(json.dumps(row, indent=2))
        return
    rec = row["recover"]
    print(f"N = {n:,}, r = {r}, m = {m}: {masked:,} masked failures (load_trajectory {trajectory_s:.1f} s), "
          f"reached in one fail() of {batch_s:.1f} s at L = {depth_load}")
    print(f"{len(back):,} rejoins ({level_falls} level falls, L {depth_load} -> {controller.load}): recover() "
          f"median / mean / p99 {rec['median_us']:.1f} / {rec['mean_us']:.1f} / {rec['p99_us']:.1f} us; "
          f"slowest 1% = {100 * row['slowest_1pct_share']:.0f}% of the time")
    if exact_us:
        print(f"exact planner on {compared} sampled states: median {row['exact']['median_us']:,.0f} us, same status "
              "and L*")


if __name__ == "__main__":
    main()

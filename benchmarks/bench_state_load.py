"""Benchmark: the cost of checking a controller state in ``ReorderController.load_state_dict``.

A heal adopts a peer's state (``state_dict()`` / ``load_state_dict()``); the state is
checked before any kernel sees it (checksum, ranges and counts, the least level by one
``set_failed``; :mod:`spare_opt.planning._state_check`).  For each ``(N, m)`` a Sidon
layout (``r = 3``) has ``k = N / 100`` random groups fail one at a time, then, side by
side in one run:

* ``load_state_dict`` with the checks (what users get);
* the same adoption without them (shape/dtype checks and the copy only, as before the
  checks existed), called ``unchecked``;
* one ``fail()`` of a further live group on a copy of the state (the median of
  ``--repeat`` calls on fresh copies), the unit the ratio is given in;
* one ``set_failed`` of the same failed set (the part of the check that re-plans).

Medians of ``--repeat`` timings, in microseconds, and the ratios to ``fail()``.

Usage::

    python benchmarks/bench_state_load.py
    python benchmarks/bench_state_load.py --sizes 1000,100000 --micro-batches 1,16 --json
"""

import argparse
import json
import statistics
import time

import numpy as np

import spare_opt as so
from spare_opt import ReorderController


def _unchecked_load(controller, state):
    """The adoption without the checks: copy the arrays into the kernels' dtypes."""
    names = ("tables", "rows", "scalars") if controller.micro_batches == 1 else ("tables", "micro", "rows", "scalars")
    template = controller._fault_free_copy()
    loaded = [np.asarray(state["arrays"][name]).astype(expected.dtype, copy=True)
              for name, expected in zip(names, template)]
    if controller.micro_batches == 1:
        controller._load_state(*loaded)
    else:
        controller._load_split_state(*loaded)


def _median_us(function, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return 1e6 * statistics.median(times)


def measure(n, m, repeat, seed):
    layout = so.generate("sidon", n, 3)
    rng = np.random.default_rng(seed)
    source = ReorderController(layout, micro_batches=m)
    order = rng.permutation(n)
    k = max(1, n // 100)
    for g in order[:k]:
        source.fail(int(g))
    state = source.state_dict()
    target = ReorderController(layout, micro_batches=m)
    target.load_state_dict(state)  # compile and warm everything once
    checked = _median_us(lambda: target.load_state_dict(state), repeat)
    unchecked = _median_us(lambda: _unchecked_load(target, state), repeat)
    failed = np.sort(order[:k])
    set_failed = _median_us(lambda: target.set_failed(failed), repeat)
    fails = []
    for i in range(repeat):
        target.load_state_dict(state)
        start = time.perf_counter()
        target.fail(int(order[k + i]))
        fails.append(time.perf_counter() - start)
    fail = 1e6 * statistics.median(fails)
    return {"groups": n, "micro_batches": m, "failed": k, "state_bytes": sum(a.nbytes for a in state["arrays"].values()),
            "load_checked_us": checked, "load_unchecked_us": unchecked, "set_failed_us": set_failed,
            "fail_us": fail, "checked_over_fail": checked / fail, "unchecked_over_fail": unchecked / fail}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated N")
    parser.add_argument("--micro-batches", default="1,16", help="comma-separated m")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(int(n), int(m), args.repeat, args.seed)
            for n in args.sizes.split(",") for m in args.micro_batches.split(",")]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| N | m | k | state | load, checked | load, unchecked | set_failed | fail() | checked / fail | unchecked / fail |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['groups']:,} | {row['micro_batches']} | {row['failed']:,} | {row['state_bytes'] / 1e6:.1f} MB "
              f"| {row['load_checked_us']:,.0f} us | {row['load_unchecked_us']:,.0f} us | {row['set_failed_us']:,.0f} us "
              f"| {row['fail_us']:,.1f} us | {row['checked_over_fail']:,.0f} | {row['unchecked_over_fail']:,.0f} |")


if __name__ == "__main__":
    main()

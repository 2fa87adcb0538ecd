"""Benchmark: where the slow ``fail()`` calls of the micro-batch controller are, and how
much of their work the optimum itself needs.

For each (N, r), the failure sequence of ``bench_controller.py`` (circulant Sidon layout,
random order, seed ``--seed``) runs to wipe-out through
``ReorderController(layout, micro_batches=M)``, every ``fail()`` timed with the Python
call.  Reported:

* how many calls take longer than ``--threshold-us`` and their share of the time;
* the total room left at the load level, ``L (N - k) - M N`` micro-batches, at those calls
  and at all calls (a slow call is not only the last one of its level);
* for the ``--slowest`` slowest calls, and for every call where the load rose above
  both the previous load and ``ceil(M N / (N - k))`` (a rise found by a search that
  reached no room), a second run of the same sequence (the controller
  is deterministic) records the split before each of them, and the exact planner
  (``plan_reorder(..., micro_batches=M, split=previous)``, a min-cost flow) gives the
  least number of moves from that split: the controller's moves beside the optimum's,
  the failed group's load ``L`` (the micro-batches it displaces) and the time per move;
* before every ``--search-every``-th call of that second run, the time of one
  breadth-first search from the failed group's types until the rooms reached hold its
  ``L`` micro-batches (warm, least of 3): the least work of a method that finds its
  rooms by searching the residual graph, whatever it does next;
* with ``--labels-every K``, every K-th call: how many live groups' exact residual
  distances to the nearest room change in the call, the least work of a method that
  keeps those distances from call to call instead of searching.

When the optimum itself moves many times ``L`` micro-batches, the displaced work must
travel along long augmenting paths to rooms far away: the call's cost is in finding
those paths, not in a detour of the controller.

Usage::

    python benchmarks/bench_fail_tails.py                          # N = 1,000 and 10,000
    python benchmarks/bench_fail_tails.py --sizes 100000:17 --slowest 10
    python benchmarks/bench_fail_tails.py --json
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_controller import GOLOMB_RULERS, sidon_layout  # noqa: E402

from numba import njit  # noqa: E402

from spare_opt import plan_reorder  # noqa: E402
from spare_opt.planning import _split_kernels as split_kernels  # noqa: E402
from spare_opt.planning.controller import ReorderController  # noqa: E402


@njit(cache=True)
def _one_search(failed, stacks, holder_groups, count, alive, load, bound, displaced, mark, visit, type_visit,
                queue):
    """One breadth-first search of the residual graph from the live holders of the failed
    group's types, stopped once the groups with load below ``bound`` it reached have room
    for the ``displaced`` micro-batches: the least search a shortest-path method makes
    for the call (the controller's first search, without the routing; like it, each type
    is handed on once, by the first group reached that computes part of it).  Returns the
    number of groups reached, or -1 when the rooms reachable hold fewer.  ``visit`` and
    ``type_visit`` mark with ``mark`` (new for each search) what the search reached, as
    the controller's stamps do, so that no O(N) reset is timed."""
    n, r = stacks.shape
    tail = 0
    room = 0
    for layer in range(r):
        t = stacks[failed, layer]
        type_visit[t] = mark
        for i in range(r):
            g = holder_groups[t, i]
            if g != failed and alive[g] != 0 and visit[g] != mark:
                visit[g] = mark
                queue[tail] = g
                tail += 1
                if load[g] < bound:
                    room += bound - load[g]
    head = 0
    while head < tail and room < displaced:
        g = queue[head]
        head += 1
        if load[g] < bound:
            continue
        for layer in range(r):
            if count[g, layer] == 0:
                continue
            u = stacks[g, layer]
            if type_visit[u] == mark:
                continue
            type_visit[u] = mark
            for i in range(r):
                h = holder_groups[u, i]
                if h == failed or alive[h] == 0 or visit[h] == mark:
                    continue
                visit[h] = mark
                queue[tail] = h
                tail += 1
                if load[h] < bound:
                    room += bound - load[h]
    return tail if room >= displaced else -1


_SEARCH_SCRATCH = {}  # N -> [last mark, visit, type_visit, queue]


def _time_one_search(controller, failed, bound):
    """(least of 3 warm runs in us, groups reached) of :func:`_one_search` on the
    controller's state before ``fail(failed)``."""
    tables, rows = controller._tables, controller._rows
    stacks, holder_groups = tables[split_kernels.STACKS], tables[split_kernels.HOLDER_GROUPS]
    count = tables[split_kernels.COUNT]
    alive, load = rows[split_kernels.ALIVE], rows[split_kernels.LOAD]
    displaced = int(load[failed])
    scratch = _SEARCH_SCRATCH.get(stacks.shape[0])
    if scratch is None:
        scratch = _SEARCH_SCRATCH[stacks.shape[0]] = [0] + [np.zeros(stacks.shape[0], dtype=np.int32)
                                                            for _ in range(3)]
    best = float("inf")
    for _ in range(3):
        scratch[0] += 1
        start = time.perf_counter_ns()
        reached = _one_search(failed, stacks, holder_groups, count, alive, load, bound, displaced, scratch[0],
                              *scratch[1:])
        best = min(best, (time.perf_counter_ns() - start) / 1e3)
    return best, reached


def _run(layout, sequence, m, record=frozenset(), loads=None, search_every=0, labels_every=0):
    """Run ``sequence`` to wipe-out; return ``(steps, microseconds, loads, moves)`` of the
    masked failures, the split before each step in ``record``, and, every
    ``search_every``-th step (given ``loads``, step -> load after it), the time and reach
    of one search (:func:`_time_one_search`) before the step, and every
    ``labels_every``-th step how many live groups' distances to the nearest room change in
    the step (:func:`_distances` before and after, at the load after it)."""
    searches, changed = {}, {}
    controller = ReorderController(layout, micro_batches=m)
    controller.fail(sequence[-1])  # loads the compiled kernels
    controller.restart()
    rows, splits = [], {}
    for step, group in enumerate(sequence, start=1):
        if step in record:
            splits[step] = controller.split.copy()
        if search_every and step % search_every == 0 and step in loads:
            searches[step] = _time_one_search(controller, group, loads[step])
        labelled = labels_every and step % labels_every == 0 and step in loads
        if labelled:
            before, _ = _distances(controller, loads[step])
        start = time.perf_counter_ns()
        plan = controller.fail(group)
        elapsed_us = (time.perf_counter_ns() - start) / 1e3
        if plan.status != "masked":
            break
        if labelled:
            after, alive = _distances(controller, loads[step])
            changed[step] = int(np.count_nonzero((before != after) & alive))
        rows.append((step, elapsed_us, plan.load, plan.moves))
    return np.asarray(rows, dtype=float), splits, searches, changed


def _distances(controller, bound):
    """Exact residual distances of every group to the nearest live group with load below
    ``bound`` (the controller's ``_global_relabel``, on copies of its state)."""
    rows, scalars = controller._rows.copy(), controller._scalars.copy()
    split_kernels._global_relabel(controller._tables, rows, scalars, bound)
    return rows[split_kernels.DISTANCE].copy(), rows[split_kernels.ALIVE] != 0


def _run_warm(layout, m, sequence):
    controller = ReorderController(layout, micro_batches=m)
    controller.fail(sequence[-1])
    return controller


def _quantiles(values):
    return [float(v) for v in np.percentile(values, [5, 50, 95])]


def bench_size(n, r, m, seed, slowest, threshold_us, search_every, labels_every=0):
    layout = sidon_layout(n, r)
    sequence = np.random.default_rng(seed).permutation(n).tolist()
    first, _, _, _ = _run(layout, sequence, m)
    steps, elapsed_us, loads = first[:, 0].astype(int), first[:, 1], first[:, 2]
    room_left = loads * (n - steps) - m * n
    slow = elapsed_us > threshold_us
    # The warm-up compiles _one_search before any timing.
    _time_one_search(_run_warm(layout, m, sequence), sequence[0], 1)
    slowest_steps = frozenset(int(steps[i]) for i in np.argsort(-elapsed_us)[:slowest])
    # Calls where the load rose and the counting bound ceil(m N / (N - k)) did not give it:
    # the rise was found by a search that reached no room.
    previous_load = np.concatenate([[m], loads[:-1]])
    counting_bound = -(-m * n // (n - steps))
    rise_steps = frozenset(int(k) for k, load, before, low in zip(steps, loads, previous_load, counting_bound)
                           if load > max(before, low))
    record = slowest_steps | rise_steps
    load_after = {int(step): int(load) for step, load in zip(steps, loads)}
    second, splits, searches, changed = _run(layout, sequence, m, record, load_after, search_every, labels_every)
    by_step = {int(row[0]): row for row in second}
    calls = []
    rises = []
    for step in sorted(splits):
        split = splits[step]
        exact = plan_reorder(layout, sequence[:step], micro_batches=m, split=split)
        _, call_us, load, moves = by_step[step]
        assert exact.load == load, "controller and exact planner disagree on L*"
        if step in slowest_steps:
            calls.append((call_us, load, moves, exact.moves))
        if step in rise_steps:
            rises.append((moves, exact.moves))
    calls = np.asarray(calls, dtype=float)
    rises = np.asarray(rises, dtype=float).reshape(-1, 2)
    timed = np.asarray([searches[step] for step in sorted(searches)], dtype=float).reshape(-1, 2)
    search_us, search_reached = timed[:, 0], timed[:, 1]
    if not len(timed):  # --search-every 0
        search_us = search_reached = np.full(1, np.nan)
    return {
        "N": n, "r": r, "micro_batches": m, "seed": seed, "calls": int(len(first)),
        "threshold_us": threshold_us,
        "over_threshold": int(slow.sum()),
        "over_threshold_time_share": float(elapsed_us[slow].sum() / elapsed_us.sum()),
        "median_us": float(np.median(elapsed_us)), "mean_us": float(elapsed_us.mean()),
        "p99_us": float(np.percentile(elapsed_us, 99)),
        "room_left_slow_q": _quantiles(room_left[slow]) if slow.any() else None,
        "room_left_all_q": _quantiles(room_left),
        "room_at_level_start": float(room_left.max()),
        "slowest": int(len(calls)),
        "slowest_us_q": _quantiles(calls[:, 0]),
        "slowest_load_q": _quantiles(calls[:, 1]),
        "slowest_moves_q": _quantiles(calls[:, 2]),
        "slowest_optimum_q": _quantiles(calls[:, 3]),
        "slowest_moves_sum": int(calls[:, 2].sum()), "slowest_optimum_sum": int(calls[:, 3].sum()),
        "slowest_us_per_move_median": float(np.median(calls[:, 0] / np.maximum(calls[:, 2], 1))),
        "search_every": search_every,
        "search_median_us": float(np.median(search_us)), "search_mean_us": float(search_us.mean()),
        "search_p99_us": float(np.percentile(search_us, 99)),
        "search_over_threshold_share": float((search_us > threshold_us).mean()),
        "search_reached_q": _quantiles(search_reached),
        "search_reached_p99": float(np.percentile(search_reached, 99)),
        "labels_every": labels_every,
        "labels_changed_q": _quantiles(list(changed.values())) if changed else None,
        "labels_changed_slowest_q": (_quantiles([changed[s] for s in record if s in changed])
                                     if any(s in changed for s in record) else None),
        "moves_all_q": _quantiles(first[:, 3]),
        "rises_by_search": int(len(rises)),
        "rises_moves_sum": int(rises[:, 0].sum()), "rises_optimum_sum": int(rises[:, 1].sum()),
        "rises_worst_ratio": float((rises[:, 0] / np.maximum(rises[:, 1], 1)).max()) if len(rises) else None,
    }


def _q(values, digits=0):
    return " / ".join(f"{v:,.{digits}f}" for v in values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000:10,10000:14",
                        help=f"N:r pairs (default 1000:10,10000:14); r in {sorted(GOLOMB_RULERS)}")
    parser.add_argument("--micro-batches", type=int, default=16, help="micro-batches per shard type (default 16)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the failure sequence (default 0)")
    parser.add_argument("--slowest", type=int, default=40, help="slowest calls given to the exact planner (default 40)")
    parser.add_argument("--threshold-us", type=float, default=100.0, help="a slow call's time (default 100 us)")
    parser.add_argument("--search-every", type=int, default=1,
                        help="time one search before every k-th call (default 1: all; 0: none)")
    parser.add_argument("--labels-every", type=int, default=0,
                        help="count the distance labels a call changes every k-th call (default 0: off)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in pair.split(":")) for pair in args.sizes.split(",")]
    results = [bench_size(n, r, args.micro_batches, args.seed, args.slowest, args.threshold_us, args.search_every,
                          args.labels_every)
               for n, r in sizes]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"micro-batches m = {args.micro_batches}, seed {args.seed}; quantiles are 5% / 50% / 95%")
    print("| N | r | calls | median / mean / p99 (us) | calls over threshold (share of time) "
          "| room left: slow calls; all calls |")
    print("|---|---|---|---|---|---|")
    for row in results:
        slow_room = _q(row["room_left_slow_q"]) if row["room_left_slow_q"] else "-"
        print(f"| {row['N']:,} | {row['r']} | {row['calls']:,} | {row['median_us']:.1f} / {row['mean_us']:.1f} / "
              f"{row['p99_us']:,.0f} | {row['over_threshold']:,} over {row['threshold_us']:g} us "
              f"({100 * row['over_threshold_time_share']:.0f}%) | {slow_room}; {_q(row['room_left_all_q'])} |")
    print()
    print("| N | slowest calls | time (us) | failed group's L | controller moves | optimum moves "
          "| moves / optimum (sum) | us per move (median) |")
    print("|---|---|---|---|---|---|---|---|")
    for row in results:
        print(f"| {row['N']:,} | {row['slowest']} | {_q(row['slowest_us_q'])} | {_q(row['slowest_load_q'])} "
              f"| {_q(row['slowest_moves_q'])} | {_q(row['slowest_optimum_q'])} "
              f"| {row['slowest_moves_sum']:,} / {row['slowest_optimum_sum']:,} = "
              f"{row['slowest_moves_sum'] / max(row['slowest_optimum_sum'], 1):.3f} "
              f"| {row['slowest_us_per_move_median']:.2f} |")
    print()
    print("One search per call (the least a method that searches for its rooms does; warm, least of 3):")
    print("| N | calls searched | median / mean / p99 (us) | share over threshold | groups reached (5% / 50% / 95%; 99%) |")
    print("|---|---|---|---|---|")
    for row in results:
        every = f"every {row['search_every']}" if row["search_every"] > 1 else "all"
        print(f"| {row['N']:,} | {every} | {row['search_median_us']:.1f} / {row['search_mean_us']:.1f} / "
              f"{row['search_p99_us']:,.0f} | {100 * row['search_over_threshold_share']:.1f}% "
              f"| {_q(row['search_reached_q'])}; {row['search_reached_p99']:,.0f} |")
    print()
    for row in results:
        if row["labels_changed_q"]:
            slowest = (f"; at the slowest calls {_q(row['labels_changed_slowest_q'])}"
                       if row["labels_changed_slowest_q"] else "")
            print(f"N={row['N']:,}: live groups whose distance to the nearest room changes in a call "
                  f"(every {row['labels_every']}): {_q(row['labels_changed_q'])}{slowest}")
        if row["rises_by_search"]:
            print(f"N={row['N']:,}: {row['rises_by_search']} rises of the load found by search: moves "
                  f"{row['rises_moves_sum']:,} / optimum {row['rises_optimum_sum']:,} = "
                  f"{row['rises_moves_sum'] / max(row['rises_optimum_sum'], 1):.3f}, "
                  f"the worst call {row['rises_worst_ratio']:.2f}x")
        print(f"N={row['N']:,}: moves per call over all calls {_q(row['moves_all_q'])}; "
              f"room at a level's start up to {row['room_at_level_start']:,.0f} micro-batches")


if __name__ == "__main__":
    main()

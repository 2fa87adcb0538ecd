"""Benchmark: online reorder controller vs the exact planner, per failure.

For each (N, r), one random failure sequence on a circulant Sidon layout (offsets from
an optimal Golomb ruler, so every pair of groups shares at most one shard type) is run
to wipe-out through :class:`spare_opt.ReorderController`, timing every ``fail()`` call
including the Python call.  At up to ``--exact-samples`` evenly spread steps of the
same sequence, the exact planner :func:`spare_opt.plan_reorder` is timed on the same
state (the controller's previous order and stack number) and both plans' moves are
compared.  Also reported: the throughput of the compiled whole-sequence loop
(:func:`spare_opt.planning.controller.stack_number_trajectory`), peak traced memory of the
controller at the largest N, and the numba compile time of the first call (cold cache)
and of loading the cached kernels.

Rejoins (:meth:`~spare_opt.ReorderController.recover`): the same failure sequence up to
its last masked failure, then the groups come back one by one in a random order, each
call timed, beside the exact planner on sampled states (``bench_recover``); the table
puts the ``fail()`` figures of the same run beside them.

With ``--micro-batches M`` (fractional stacking, docs/model.md) the same measurements run
with ``M`` micro-batches per shard type: ``ReorderController(layout, micro_batches=M)``
against ``plan_reorder(..., micro_batches=M, split=previous)``, comparing the loads
``L*``; the whole-sequence loop is :func:`spare_opt.load_trajectory`.

Full redistribution (``bench_redistribution``): the same failure sequence, then the
same rejoins, through :class:`spare_opt.RedistributionController` (the ``r = N`` layout
that every survivor may take any micro-batch from, never built) beside the stacked
controller, every call timed, with the ratio of their times, their mean step costs
``L*/m`` over the same failed sets, and their peak traced memory.

Usage::

    python benchmarks/bench_controller.py                      # table on stdout
    python benchmarks/bench_controller.py --json               # JSON document on stdout
    python benchmarks/bench_controller.py --micro-batches 16   # the m = 16 rows
    python benchmarks/bench_controller.py --redistribution-only  # only the r = N fast path beside the stacked one
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import tracemalloc

import numpy as np

from spare_opt import Layout, RedistributionController, load_trajectory, plan_reorder
from spare_opt.planning.controller import ReorderController, _trajectory_state, stack_number_trajectory

# Optimal Golomb rulers (all differences distinct); with max offset < N/2 they are also
# Sidon sets mod N.
GOLOMB_RULERS = {
    10: (0, 1, 6, 10, 23, 26, 34, 41, 53, 55),
    14: (0, 4, 6, 20, 35, 52, 59, 77, 78, 86, 89, 99, 122, 127),
    17: (0, 5, 7, 17, 52, 56, 67, 80, 81, 100, 122, 138, 159, 165, 168, 191, 199),
}
DEFAULT_SIZES = "1000:10,10000:14,100000:17"


def sidon_layout(n, r):
    offsets = np.asarray(GOLOMB_RULERS[r])
    stacks = (np.arange(n)[:, None] + offsets[None, :]) % n
    layout = Layout(stacks, method="sidon", offsets=offsets.tolist())
    assert layout.overlap() <= 1, "offsets are not a Sidon set mod N"
    return layout


def percentiles(samples_us):
    array = np.asarray(samples_us, dtype=float)
    return {"median_us": float(np.median(array)), "mean_us": float(array.mean()),
            "p99_us": float(np.percentile(array, 99)), "samples": int(array.size)}


def _exact(layout, failed, m, previous_order, previous_stack, previous_split):
    """The exact planner on the controller's previous state."""
    if m == 1:
        return plan_reorder(layout, failed, order=previous_order, stack_number=previous_stack)
    return plan_reorder(layout, failed, micro_batches=m, split=previous_split)


def _state(controller):
    """What the exact planner needs of the controller's current plan (copies)."""
    if controller.micro_batches == 1:
        return controller.order.copy(), controller.stack_number, None
    return None, None, controller.split.copy()


def _trajectory(layout, sequence, m):
    if m == 1:
        return stack_number_trajectory(layout, sequence, return_moves=True)
    return load_trajectory(layout, sequence, micro_batches=m, return_moves=True)


def bench_size(n, r, seed, exact_samples, m=1):
    layout = sidon_layout(n, r)
    rng = np.random.default_rng(seed)
    sequence = rng.permutation(n).tolist()
    controller = ReorderController(layout, micro_batches=m)
    controller.fail(sequence[-1])  # warm-up (loads the compiled kernels), then restart
    controller.restart()

    # Steps (1-based) at which the exact planner is also run; chosen before the run from
    # the expected number of masked failures so they spread over the whole sequence.
    masked = _trajectory(layout, sequence, m)[1] - 1
    exact_steps = set(np.unique(np.linspace(1, masked, num=min(exact_samples, masked)).astype(int)).tolist())

    # The controller runs the whole sequence first (nothing else allocates in between, so
    # garbage-collector pauses are the controller's own); the exact planner then replays
    # the sampled steps from the recorded states.
    controller_us, samples, step_moves = [], [], []
    for step, group in enumerate(sequence, start=1):
        if step in exact_steps:
            state = (step,) + _state(controller)
        start = time.perf_counter_ns()
        plan = controller.fail(group)
        controller_us.append((time.perf_counter_ns() - start) / 1e3)
        if plan.status != "masked":
            break
        step_moves.append(plan.moves)
        if step in exact_steps:
            samples.append(state + (plan.load, plan.moves))
    exact_us, ratios = [], []
    moves_controller = moves_exact = 0
    for step, previous_order, previous_stack, previous_split, load, moves in samples:
        start = time.perf_counter_ns()
        exact = _exact(layout, sequence[:step], m, previous_order, previous_stack, previous_split)
        exact_us.append((time.perf_counter_ns() - start) / 1e3)
        assert exact.load == load, "controller and exact planner disagree on S* or L*"
        moves_controller += moves
        moves_exact += exact.moves
        if exact.moves:
            ratios.append(moves / exact.moves)
    start = time.perf_counter()
    loads, wipeout_index, trajectory_moves = _trajectory(layout, sequence, m)
    trajectory_s = time.perf_counter() - start  # includes the O(N (r + m)) set-up of the state arrays
    # The compiled loop alone, without the set-up.
    state = _trajectory_state(layout, m)
    orders = np.asarray(sequence, dtype=np.int32)[None, :]
    start = time.perf_counter()
    state.run(orders)
    loop_s = time.perf_counter() - start
    # The paper's fixed check passes when nothing moves and S stays (it reports > 90%);
    # with micro-batches: when the load does not rise.
    same_load = np.diff(loads) == 0
    unchanged = (trajectory_moves == 0) & same_load
    row = {
        "N": n,
        "r": r,
        "micro_batches": m,
        "masked_failures": int(wipeout_index - 1),
        "final_stack_number": int(loads[-1]) if m == 1 else None,
        "final_load": int(loads[-1]),
        "mean_step_cost": float(np.mean(loads / m)),
        "controller": percentiles(controller_us),
        "trajectory_us_per_failure": trajectory_s / wipeout_index * 1e6,
        "trajectory_loop_us_per_failure": loop_s / wipeout_index * 1e6,
        "fixed_check_fraction": float(unchanged.mean()),
        "load_unchanged_fraction": float(same_load.mean()),
        "slowest": _slowest(controller_us[:len(step_moves)], step_moves),
    }
    if exact_us:
        row["exact"] = percentiles(exact_us)
        row["speedup_median"] = row["exact"]["median_us"] / row["controller"]["median_us"]
        row["speedup_mean"] = row["exact"]["mean_us"] / row["controller"]["mean_us"]
        row["moves"] = {
            "controller": moves_controller,
            "exact": moves_exact,
            "total_ratio": moves_controller / moves_exact if moves_exact else None,
            "mean_step_ratio": float(np.mean(ratios)) if ratios else None,
            "steps_compared": len(exact_us),
        }
    return row


def bench_recover(n, r, seed, exact_samples, m=1):
    """``recover()`` of one group at a time, against the exact planner.

    The failure sequence of :func:`bench_size` (same seed) runs up to the last masked
    failure, then the failed groups come back one by one in a random order (seed
    ``seed + 1``), each ``recover()`` timed including the Python call.  At up to
    ``exact_samples`` evenly spread rejoins the exact planner is timed on the same state
    (the controller's plan before the rejoin as the previous one, the returning group
    with its layout order at ``m = 1``) and must give the same status, ``S*`` (``m =
    1``) and ``L*``; the moves of both are summed.
    """
    layout = sidon_layout(n, r)
    sequence = np.random.default_rng(seed).permutation(n).tolist()
    masked = _trajectory(layout, sequence, m)[1] - 1
    controller = ReorderController(layout, micro_batches=m)
    controller.fail(sequence[0])  # warm-up (loads the compiled kernels)
    controller.recover(sequence[0])
    for group in sequence[:masked]:
        controller.fail(group)
    back = np.random.default_rng(seed + 1).permutation(sequence[:masked]).tolist()
    exact_steps = set(np.unique(np.linspace(1, masked, num=min(exact_samples, masked)).astype(int)).tolist())
    recover_us, samples, level_falls = [], [], 0
    still = set(sequence[:masked])
    for step, group in enumerate(back, start=1):
        if step in exact_steps:
            state = _state(controller)
        load = controller.load
        start = time.perf_counter_ns()
        plan = controller.recover(group)
        recover_us.append((time.perf_counter_ns() - start) / 1e3)
        still.discard(group)
        level_falls += plan.load < load
        if step in exact_steps:
            samples.append((sorted(still), group, *state, plan.status, plan.stack_number, plan.load, plan.moves))
    exact_us = []
    moves_controller = moves_exact = 0
    for failed, group, previous_order, previous_stack, previous_split, status, stack, load, moves in samples:
        if m == 1:
            previous_order[group] = layout.stacks[group]  # a returning group resumes with its layout order
        start = time.perf_counter_ns()
        exact = _exact(layout, failed, m, previous_order, previous_stack, previous_split)
        exact_us.append((time.perf_counter_ns() - start) / 1e3)
        assert (exact.status, exact.load) == (status, load), "controller and exact planner disagree on L*"
        assert m > 1 or exact.stack_number == stack, "controller and exact planner disagree on S*"
        moves_controller += moves
        moves_exact += exact.moves
    row = {"N": n, "r": r, "micro_batches": m, "rejoins": len(recover_us), "level_falls": int(level_falls),
           "recover": percentiles(recover_us)}
    if exact_us:
        row["exact"] = percentiles(exact_us)
        row["speedup_median"] = row["exact"]["median_us"] / row["recover"]["median_us"]
        row["moves"] = {"controller": moves_controller, "exact": moves_exact,
                        "total_ratio": moves_controller / moves_exact if moves_exact else None,
                        "steps_compared": len(exact_us)}
    return row


def bench_redistribution(n, r, seed, m=1, max_failures=5000):
    """The r = N fast path beside the stacked controller: the same failures (to the stacked
    controller's wipe-out, at most ``max_failures``), then the same rejoins."""
    layout = sidon_layout(n, r)
    rng = np.random.default_rng(seed)
    sequence = rng.permutation(n).tolist()
    for make in (lambda: ReorderController(layout, micro_batches=m),
                 lambda: RedistributionController(n, micro_batches=m)):
        make().fail(sequence[-1])  # warm-up: load the compiled kernels
    result = {"N": n, "r": r, "micro_batches": m}
    stacked_loads, back = [], []
    for name, make in (("stacked", lambda: ReorderController(layout, micro_batches=m)),
                       ("redistribution", lambda: RedistributionController(n, micro_batches=m))):
        controller = make()
        fail_us, loads, moves = [], [], 0
        # The stacked controller runs to its first wipe-out; the fast path takes the same
        # failures (it would wipe out only when every group is down).
        limit = len(stacked_loads) if name == "redistribution" else min(n, max_failures)
        for group in sequence[:limit]:
            start = time.perf_counter_ns()
            plan = controller.fail(group)
            fail_us.append((time.perf_counter_ns() - start) / 1e3)
            if plan.status != "masked":
                fail_us.pop()
                break
            loads.append(plan.load)
            moves += plan.moves
        if name == "stacked":
            stacked_loads = loads
            if controller.wiped_out:  # rejoins need a live state: replay the masked failures
                controller.restart()
                controller.fail(sequence[:len(loads)])
            back = rng.permutation(np.asarray(sequence[:len(loads)])).tolist()  # the same rejoins for both
        recover_us = []
        for group in back:
            start = time.perf_counter_ns()
            controller.recover(group)
            recover_us.append((time.perf_counter_ns() - start) / 1e3)
        # Memory in a second, untimed pass (tracing allocations slows every Python call).
        tracemalloc.start()
        traced = make()
        for group in sequence[:len(loads)]:
            traced.fail(group)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del traced
        result[name] = {"fail": percentiles(fail_us), "recover": percentiles(recover_us), "failures": len(loads),
                        "rejoins": len(recover_us), "moves": moves,
                        "mean_step_cost": float(np.mean(loads)) / m if loads else None,
                        "peak_mib": peak / 2**20}
    stacked, fast = result["stacked"], result["redistribution"]
    result["ratio_fail_median"] = fast["fail"]["median_us"] / stacked["fail"]["median_us"]
    result["ratio_fail_mean"] = fast["fail"]["mean_us"] / stacked["fail"]["mean_us"]
    result["ratio_recover_median"] = fast["recover"]["median_us"] / stacked["recover"]["median_us"]
    result["full_layout_mib"] = 4 * n * n / 2**20  # int32 stacks of the r = N layout, never built
    return result


def _slowest(times_us, moves):
    """Share of the controller's total time spent in its slowest 1% and 5% of failures, and
    the mean moves of those failures beside the mean over all (where the mean goes)."""
    times, moves = np.asarray(times_us), np.asarray(moves)
    order = np.argsort(times)[::-1]
    result = {"mean_moves": float(moves.mean())}
    for percent in (1, 5):
        top = order[:max(1, len(order) * percent // 100)]
        result[f"top{percent}_time_share"] = float(times[top].sum() / times.sum())
        result[f"top{percent}_mean_moves"] = float(moves[top].mean())
    return result


def moves_by_layout(n, r, seed, m=1):
    """Controller moves vs the min-cost-flow optimum at every step of one failure sequence
    run to wipe-out, for the other layout families (``spare_opt.layouts.generators``)."""
    from spare_opt.layouts import generators

    result = {}
    for method, layout in (("consecutive", generators.consecutive(n, r)), ("block", generators.block(n, r)),
                           ("random", generators.random_latin(n, r, seed=seed))):
        sequence = np.random.default_rng(seed).permutation(n).tolist()
        controller = ReorderController(layout, micro_batches=m)
        moves_controller = moves_exact = steps = 0
        for step, group in enumerate(sequence, start=1):
            previous = _state(controller)
            plan = controller.fail(group)
            if plan.status != "masked":
                break
            exact = _exact(layout, sequence[:step], m, *previous)
            assert exact.load == plan.load, "controller and exact planner disagree on S* or L*"
            moves_controller += plan.moves
            moves_exact += exact.moves
            steps += 1
        result[method] = {"steps": steps, "controller": moves_controller, "exact": moves_exact,
                          "total_ratio": moves_controller / moves_exact if moves_exact else None}
    return result


def call_breakdown(n, r, seed, m=1):
    """Where the time of one ``fail()`` goes: medians over one failure sequence of (a) a
    do-nothing numba function taking the same arguments (the dispatcher's cost of
    unboxing them: six at m = 1, seven at m > 1), (b) the kernel called directly, (c) the
    full ``fail()``."""
    from numba import njit

    from spare_opt.planning import _kernels as _controller_kernels
    from spare_opt.planning import _split_kernels

    kernels = _controller_kernels if m == 1 else _split_kernels
    kernel = _controller_kernels.fail_packed if m == 1 else _split_kernels.fail_split

    @njit
    def do_nothing_packed(tables, rows, scalars, failing, mid_step, journal):
        return scalars[0]

    @njit
    def do_nothing_split(tables, micro, rows, scalars, failing, mid_step, journal):
        return scalars[0]

    do_nothing = do_nothing_packed if m == 1 else do_nothing_split

    layout = sidon_layout(n, r)
    sequence = np.random.default_rng(seed).permutation(n).tolist()
    result = {}
    for label in ("dispatch_only", "kernel_direct", "fail_call"):
        controller = ReorderController(layout, micro_batches=m)
        controller.fail(sequence[0])
        if m == 1:
            state = (controller._tables, controller._rows, controller._scalars)
        else:
            state = (controller._tables, controller._micro, controller._rows, controller._scalars)
        journal = controller._history.journal
        failing = np.zeros(1, dtype=np.int32)
        do_nothing(*state, failing, False, journal)
        times = []
        for group in sequence[1:]:
            start = time.perf_counter_ns()
            if label == "dispatch_only":
                failing[0] = group
                do_nothing(*state, failing, False, journal)
            elif label == "kernel_direct":
                failing[0] = group
                status = kernel(*state, failing, False, journal)[0]
            else:
                status = controller.fail(group).status
            times.append((time.perf_counter_ns() - start) / 1e3)
            if label == "kernel_direct" and status != kernels.STATUS_MASKED:
                break
            if label == "fail_call" and status != "masked":
                break
            if label == "dispatch_only" and len(times) >= 1000:
                break
        result[label + "_median_us"] = float(np.median(times))
    return result


def peak_memory(n, r, seed, m=1):
    """Peak traced allocations (tracemalloc) of a controller run to wipe-out at (N, r, m)."""
    layout = sidon_layout(n, r)
    sequence = np.random.default_rng(seed).permutation(n).tolist()
    ReorderController(layout, micro_batches=m).fail(0)  # compile/load outside the traced region
    tracemalloc.start()
    controller = ReorderController(layout, micro_batches=m)
    _, built = tracemalloc.get_traced_memory()
    failures = 0
    for group in sequence:
        failures += 1
        if controller.fail(group).status != "masked":
            break
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    entries = n * r if m == 1 else n * (r + m)
    return {"N": n, "r": r, "micro_batches": m, "failures": failures, "peak_mib": peak / 2**20,
            "built_mib": built / 2**20, "bytes_per_entry": peak / entries,
            "entries": "N r" if m == 1 else "N (r + m)"}


_COMPILE_SNIPPET = """
import sys, time, numpy as np
from spare_opt import Layout
from spare_opt.planning.controller import ReorderController, load_trajectory
m = int(sys.argv[1])
layout = Layout((np.arange(7)[:, None] + np.array([0, 1, 3])) % 7)
start = time.perf_counter(); ReorderController(layout, micro_batches=m).fail(0); first = time.perf_counter() - start
start = time.perf_counter(); load_trajectory(layout, [0, 1], micro_batches=m); trajectory = time.perf_counter() - start
print(first, trajectory)
"""


def compile_times(m=1):
    """First-call time of ``fail`` and of the trajectory kernel, cold and from numba's cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        result = {}
        for label in ("cold", "cached"):
            out = subprocess.run([sys.executable, "-c", _COMPILE_SNIPPET, str(m)], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            result[label] = {"fail_s": float(out[0]), "trajectory_s": float(out[1])}
    return result


def machine():
    model = platform.processor() or "unknown"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    import numba

    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "numba": numba.__version__}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    parser.add_argument("--sizes", default=DEFAULT_SIZES,
                        help=f"N:r pairs (default {DEFAULT_SIZES}); r in {sorted(GOLOMB_RULERS)}")
    parser.add_argument("--seed", type=int, default=0, help="seed of the failure sequences (default 0)")
    parser.add_argument("--exact-samples", type=int, default=500,
                        help="exact-planner calls per size below N = 50,000 (default 500)")
    parser.add_argument("--exact-max-n", type=int, default=100_000, help="skip the exact planner above this N")
    parser.add_argument("--exact-samples-large", type=int, default=5,
                        help="exact-planner calls per size at N >= 50,000 (default 5)")
    parser.add_argument("--moves-n", type=int, default=1000, help="N of the moves comparison on other layouts")
    parser.add_argument("--moves-r", type=int, default=10, help="r of the moves comparison on other layouts")
    parser.add_argument("--micro-batches", type=int, default=1,
                        help="micro-batches per shard type m (default 1, the paper's model)")
    parser.add_argument("--skip-compile", action="store_true", help="skip the first-call (compile) timings")
    parser.add_argument("--redistribution-only", action="store_true",
                        help="only the full-redistribution (r = N) fast path beside the stacked controller")
    parser.add_argument("--redistribution-failures", type=int, default=5000,
                        help="failures of the r = N comparison: to the stacked wipe-out, at most this (default 5000)")
    args = parser.parse_args(argv)
    sizes = [tuple(int(v) for v in pair.split(":")) for pair in args.sizes.split(",")]
    m = args.micro_batches
    command = "python benchmarks/bench_controller.py " + " ".join(argv if argv is not None else sys.argv[1:])

    redistribution = [bench_redistribution(n, r, args.seed, m, args.redistribution_failures) for n, r in sizes]
    if args.redistribution_only:
        if args.json:
            print(json.dumps({"command": command, "machine": machine(), "redistribution": redistribution}, indent=1))
        else:
            print_redistribution(redistribution, machine(), m)
        return

    rows, recover_rows = [], []
    for n, r in sizes:
        samples = 0 if n > args.exact_max_n else (args.exact_samples if n < 50_000 else args.exact_samples_large)
        rows.append(bench_size(n, r, args.seed, samples, m))
        recover_rows.append(bench_recover(n, r, args.seed, samples, m))
        print(f"done N={n}", file=sys.stderr)
    largest = max(sizes)
    report = {
        "command": command,
        "machine": machine(),
        "micro_batches": m,
        "rows": rows,
        "recover_rows": recover_rows,
        "memory": peak_memory(*largest, args.seed, m),
        "moves_by_layout": dict(moves_by_layout(args.moves_n, args.moves_r, args.seed, m), N=args.moves_n,
                                r=args.moves_r),
        "call_breakdown": dict(call_breakdown(*min(sizes), args.seed, m), N=min(sizes)[0], r=min(sizes)[1]),
        "compile": {} if args.skip_compile else compile_times(m),
        "redistribution": redistribution,
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"machine: {report['machine']['cpu']}, {report['machine']['cores']} cores; micro-batches m = {m}")
    print("| N | r | masked failures | controller median / mean / p99 (us) | exact median / mean / p99 (us), calls "
          "| speedup (median, mean) | moves / optimum |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        exact, moves, ctl = row.get("exact"), row.get("moves"), row["controller"]
        cells = [f"{row['N']:,}", str(row["r"]), f"{row['masked_failures']:,}",
                 f"{ctl['median_us']:.1f} / {ctl['mean_us']:.1f} / {ctl['p99_us']:.0f}"]
        if exact:
            cells += [f"{exact['median_us']:,.0f} / {exact['mean_us']:,.0f} / {exact['p99_us']:,.0f}, "
                      f"{exact['samples']}",
                      f"{row['speedup_median']:,.0f}x, {row['speedup_mean']:,.0f}x",
                      f"{moves['controller']} / {moves['exact']} = {moves['total_ratio']:.3f}"]
        else:
            cells += ["-", "-", "-"]
        print("| " + " | ".join(cells) + " |")
    print()
    print("| N | r | rejoins (level falls) | recover() median / mean / p99 (us) | fail() median / mean / p99 (us) "
          "| exact median (us), calls | speedup (median) | moves / optimum |")
    print("|---|---|---|---|---|---|---|---|")
    for row, failures in zip(recover_rows, rows):
        rec, ctl, exact, moves = row["recover"], failures["controller"], row.get("exact"), row.get("moves")
        cells = [f"{row['N']:,}", str(row["r"]), f"{row['rejoins']:,} ({row['level_falls']:,})",
                 f"{rec['median_us']:.1f} / {rec['mean_us']:.1f} / {rec['p99_us']:.0f}",
                 f"{ctl['median_us']:.1f} / {ctl['mean_us']:.1f} / {ctl['p99_us']:.0f}"]
        if exact:
            ratio = f"{moves['total_ratio']:.3f}" if moves["total_ratio"] is not None else "-"
            cells += [f"{exact['median_us']:,.0f}, {exact['samples']}", f"{row['speedup_median']:,.0f}x",
                      f"{moves['controller']} / {moves['exact']} = {ratio}"]
        else:
            cells += ["-", "-", "-"]
        print("| " + " | ".join(cells) + " |")
    print()
    for row in rows:
        if m == 1:
            print(f"N={row['N']:,}: stack_number_trajectory {row['trajectory_us_per_failure']:.2f} us per failure "
                  f"({row['trajectory_loop_us_per_failure']:.2f} us in the compiled loop); fixed check passed "
                  f"(no move, same S) on {100 * row['fixed_check_fraction']:.1f}% of masked failures")
        else:
            print(f"N={row['N']:,}: load_trajectory {row['trajectory_us_per_failure']:.2f} us per failure "
                  f"({row['trajectory_loop_us_per_failure']:.2f} us in the compiled loop); load unchanged on "
                  f"{100 * row['load_unchanged_fraction']:.1f}% of masked failures; mean step cost L*/m to "
                  f"wipe-out {row['mean_step_cost']:.4f}")
        slow = row["slowest"]
        print(f"N={row['N']:,}: the slowest 1% / 5% of fail() calls take {100 * slow['top1_time_share']:.0f}% / "
              f"{100 * slow['top5_time_share']:.0f}% of the time, with {slow['top1_mean_moves']:.0f} / "
              f"{slow['top5_mean_moves']:.0f} moves on average (all calls: {slow['mean_moves']:.1f})")
    memory = report["memory"]
    print(f"peak memory at N={memory['N']:,}, r={memory['r']}, m={memory['micro_batches']} "
          f"({memory['failures']:,} failures): {memory['peak_mib']:.1f} MiB, {memory['built_mib']:.1f} MiB "
          f"after construction ({memory['bytes_per_entry']:.1f} bytes per entry of {memory['entries']})")
    by_layout = report["moves_by_layout"]
    print(f"moves / optimum at every step to wipe-out, N={by_layout['N']:,}, r={by_layout['r']}: " + ", ".join(
        f"{method} {v['controller']} / {v['exact']} = {v['total_ratio']:.3f} ({v['steps']} steps)"
        for method, v in by_layout.items() if isinstance(v, dict) and v["total_ratio"] is not None))
    breakdown = report["call_breakdown"]
    print(f"one fail() at N={breakdown['N']:,} (medians): numba dispatch of the arguments "
          f"{breakdown['dispatch_only_median_us']:.2f} us, kernel called directly "
          f"{breakdown['kernel_direct_median_us']:.2f} us, "
          f"fail() {breakdown['fail_call_median_us']:.2f} us")
    for label, times in report["compile"].items():
        print(f"first call, {label} numba cache: fail {times['fail_s']:.2f} s, "
              f"trajectory {times['trajectory_s']:.2f} s")
    print()
    print_redistribution(redistribution, report["machine"], m)


def print_redistribution(rows, machine_info, m):
    """The table of :func:`bench_redistribution`."""
    print(f"full redistribution (r = N, never built) beside the stacked controller; {machine_info['cpu']}, "
          f"m = {m}")
    print("| N | stacked r | failures (to the stacked wipe-out, at most 5,000) | fail() stacked / r = N, median (mean) us "
          "| ratio median (mean) | recover() stacked / r = N, median us | ratio | mean step cost stacked / r = N "
          "| moves stacked / r = N | peak MiB stacked / r = N (r = N layout) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        s, f = row["stacked"], row["redistribution"]
        print(f"| {row['N']:,} | {row['r']} | {s['failures']:,} "
              f"| {s['fail']['median_us']:.1f} ({s['fail']['mean_us']:.1f}) / {f['fail']['median_us']:.1f} "
              f"({f['fail']['mean_us']:.1f}) | {row['ratio_fail_median']:.2f} ({row['ratio_fail_mean']:.2f}) "
              f"| {s['recover']['median_us']:.1f} / {f['recover']['median_us']:.1f} "
              f"| {row['ratio_recover_median']:.2f} "
              f"| {s['mean_step_cost']:.4f} / {f['mean_step_cost']:.4f} | {s['moves']:,} / {f['moves']:,} "
              f"| {s['peak_mib']:.1f} / {f['peak_mib']:.1f} ({row['full_layout_mib']:,.0f}) |")


if __name__ == "__main__":
    main()

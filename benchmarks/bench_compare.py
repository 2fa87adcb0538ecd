"""Benchmark of the verdict on a fitted failure model at N = 2,048: the old runs against the new, side by side.

``compare(fault_model=...)`` used to call :func:`spare_opt.simulate` once per checkpoint
period of every (setting, seed): each call drew the model's events again and ran the
online reorder controller on every failure and rejoin.  It now draws one source of
events per (setting, seed), shared by the periods, and re-plans the groups still down
(the trace walk's route; ``tests/test_verdict_model.py`` checks every run against
``simulate``).  This script times both on the same settings, seeds and periods in one
process (``old`` is the previous code path, kept here) and checks that they give the
same ``TTT/T0``; ``--full`` also times the whole default ``compare`` (every strategy,
the default grid, 3 seeds) with ``--workers``.

Usage::

    python benchmarks/bench_compare.py [--groups 2048] [--seeds 1] [--settings ckpt:1:1,spare:5:4]
        [--factors 0.5,0.7,1,1.4,2] [--workers 2] [--full] [--json]

The failure model is fitted to the shipped InfiniteHBD trace (``spare-opt fit``
defaults), scaled per node to ``--groups``.
"""

import argparse
import json
import time

import numpy as np

from spare_opt import compare, compare_parameters, default_layout, fit_trace, read_fault_trace, simulate
from spare_opt.demo import packaged_trace_path
from spare_opt.simulation.time_to_train import _period
from spare_opt.simulation.verdict import DEFAULT_COMPARE_FACTORS, _model_runs_task


def old_runs(params, strategy, redundancy, micro_batches, periods, seed, layout, model):
    """The previous ``_model_runs_task``: one simulate() per period."""
    return [simulate(params, strategy, None if strategy == "ckpt" else redundancy, checkpoint_period_seconds=period,
                     seed=seed, layout=layout, micro_batches=micro_batches, semantics="repair",
                     fault_model=model).ttt_ratio for period in periods]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=2048)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--settings", default="ckpt:1:1,rep:2:1,spare:5:4,spare:9:16",
                        help="STRATEGY:R:M,... timed side by side")
    parser.add_argument("--factors", default=",".join(map(str, DEFAULT_COMPARE_FACTORS)),
                        help="checkpoint periods as multiples of T_c* (default: compare's five)")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = fit_trace(read_fault_trace(packaged_trace_path())).model
    params = compare_parameters("trace-400", args.groups, max_wall_factor=2.0)  # as compare() runs it (cycles 2)
    settings = [(s, int(r), int(m)) for s, r, m in (item.split(":") for item in args.settings.split(","))]
    factors = tuple(float(f) for f in args.factors.split(","))
    rows = []
    for strategy, r, m in settings:
        layout = default_layout(args.groups, r, time_limit=2.0) if strategy == "spare" else None
        centre = _period(params, strategy, r, layout, None, model, m, None)
        periods = tuple(centre * f for f in factors)
        for seed in range(args.seeds):
            started = time.perf_counter()
            old = old_runs(params, strategy, r, m, periods, seed, layout, model)
            old_seconds = time.perf_counter() - started
            started = time.perf_counter()
            new = [d["ttt_ratio"] for d in _model_runs_task(params, strategy, r, m, periods, seed, layout, "repair",
                                                             model)]
            new_seconds = time.perf_counter() - started
            rows.append({"setting": f"{strategy} r={r} m={m}", "seed": seed, "old_seconds": old_seconds,
                         "new_seconds": new_seconds, "ratio": old_seconds / new_seconds,
                         "same_ttt": bool(np.allclose(old, new, rtol=1e-12, atol=0.0))})
            print(f"{rows[-1]['setting']:<18} seed {seed}: old {old_seconds:8.1f} s  new {new_seconds:7.1f} s  "
                  f"x{rows[-1]['ratio']:.1f}  same TTT/T0: {rows[-1]['same_ttt']}", flush=True)
    total_old = sum(row["old_seconds"] for row in rows)
    total_new = sum(row["new_seconds"] for row in rows)
    print(f"{'all':<18}        : old {total_old:8.1f} s  new {total_new:7.1f} s  x{total_old / total_new:.1f}")
    out = {"groups": args.groups, "rows": rows, "old_seconds": total_old, "new_seconds": total_new}
    if args.full:
        started = time.perf_counter()
        result = compare(compare_parameters("trace-400", args.groups), fault_model=model, workers=args.workers)
        out["full_seconds"] = time.perf_counter() - started
        print(f"full default compare at N = {args.groups}, --workers {args.workers}: {out['full_seconds']:.1f} s")
        print(result.format_text())
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

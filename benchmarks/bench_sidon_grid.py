"""Benchmark: the Sidon generator on every (N, r) with r <= R and N <= 3 r(r-1).

Runs :func:`spare_opt.sidon` with its default time limit on the whole grid and
reports, per ``r``, how each case was settled (a known construction, the exhaustive
search finding a set or proving there is none, the counting bound, the lambda
minimisation), how many ended ``feasible`` or without a proof of the least
``lambda``, and the slowest cases.  The search kernel is compiled (or loaded from
numba's cache) before the clock starts.

Usage::

    python benchmarks/bench_sidon_grid.py                  # r = 2..11, table on stdout
    python benchmarks/bench_sidon_grid.py --r-max 8 --json # JSON document
"""

import argparse
import collections
import json
import platform
import time

from spare_opt.layouts import _exhaustive
from spare_opt.layouts.generators import DEFAULT_TIME_LIMIT, sidon


def how(meta):
    """A short name of what settled the case."""
    construction = meta.get("construction") or ""
    reason = meta.get("reason") or ""
    if meta["solver_status"] == "optimal":
        if construction:
            return construction.split(",")[0].split(" (")[0]
        if "exhaustive" in reason:
            return "exhaustive search: found"
        return "CP-SAT / local search: found"
    if "exhaustive search proved" in reason:
        return "exhaustive search: none exists"
    if "r(r-1)" in reason:
        return "counting bound: none exists"
    return "no proof" if meta["solver_status"] == "feasible" else "CP-SAT: none exists"


def run(r_min, r_max, time_limit, n_max_factor):
    _exhaustive.warm_up()
    rows = []
    for r in range(r_min, r_max + 1):
        for groups in range(r, n_max_factor * r * (r - 1) + 1):
            start = time.perf_counter()
            layout = sidon(groups, r, time_limit=time_limit)
            seconds = time.perf_counter() - start
            meta = layout.metadata
            rows.append({"N": groups, "r": r, "seconds": round(seconds, 4), "lambda": meta["lambda"],
                         "lower_bound": meta["lambda_lower_bound"], "proved": meta["lambda_proved_optimal"],
                         "status": meta["solver_status"], "how": how(meta)})
    return {"time_limit": time_limit, "python": platform.python_version(), "machine": platform.machine(),
            "cases": rows}


def summary(rows):
    """Per r: counts by how, feasible count, unproved count, slowest case."""
    table = []
    for r in sorted({row["r"] for row in rows}):
        mine = [row for row in rows if row["r"] == r]
        kinds = collections.Counter(row["how"] for row in mine)
        slowest = max(mine, key=lambda row: row["seconds"])
        table.append({
            "r": r, "cases": len(mine), "how": dict(kinds),
            "feasible": sum(row["status"] == "feasible" for row in mine),
            "unproved": sum(not row["proved"] for row in mine),
            "slowest": f"{slowest['seconds']:.2f} s (N = {slowest['N']}, {slowest['how']})",
            "total_seconds": round(sum(row["seconds"] for row in mine), 2),
        })
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--r-min", type=int, default=2)
    parser.add_argument("--r-max", type=int, default=11)
    parser.add_argument("--n-max-factor", type=int, default=3, help="N runs up to this times r(r-1)")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, help="sidon time limit, seconds")
    parser.add_argument("--json", action="store_true", help="print a JSON document (every case)")
    args = parser.parse_args()
    report = run(args.r_min, args.r_max, args.time_limit, args.n_max_factor)
    report["summary"] = summary(report["cases"])
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print("| r | cases | how settled | feasible | lambda not proved | slowest | total s |")
    print("|---|---|---|---|---|---|---|")
    for row in report["summary"]:
        kinds = "; ".join(f"{name} {count}" for name, count in sorted(row["how"].items()))
        print(f"| {row['r']} | {row['cases']} | {kinds} | {row['feasible']} | {row['unproved']} | "
              f"{row['slowest']} | {row['total_seconds']} |")
    unproved = [row for row in report["cases"] if not row["proved"]]
    if unproved:
        print()
        print("Cases without a proof of the least lambda:")
        for row in unproved:
            print(f"  N = {row['N']}, r = {row['r']}: lambda {row['lambda']} >= {row['lower_bound']}, "
                  f"{row['status']}, {row['seconds']} s")


if __name__ == "__main__":
    main()

"""Benchmark: layout generation times, and known constructions vs plain CP-SAT search.

Times every generator on the sizes of the targets in issue 2 (Sidon N = 1,000 r = 10
in <= 5 s, Sidon N = 100,000 r = 17 in <= 30 s, consecutive N = 100,000 r = 17 in
<= 0.1 s), the two instances at the density limit (N = 600 r = 20, N = 381 r = 20)
and a few fallback cases, best of ``--repeat`` runs, including Layout validation.
Side by side it times the plain CP-SAT Sidon model (no construction) on the same
sizes with the same time limit, so the table shows what the constructions buy.

Usage::

    python benchmarks/bench_generators.py                 # table on stdout
    python benchmarks/bench_generators.py --json          # JSON document
    python benchmarks/bench_generators.py --time-limit 10 --repeat 3
"""

import argparse
import json
import platform
import time

from spare_opt.layouts.generators import _solve_difference_model, consecutive, random_latin, sidon

CASES = [
    ("sidon", 1_000, 10),
    ("sidon", 100_000, 17),
    ("sidon", 600, 20),
    ("sidon", 381, 20),
    ("sidon", 200, 14),
    ("sidon", 60, 20),
    ("consecutive", 100_000, 17),
    ("random", 100_000, 17),
]
PLAIN_CP_SAT = [(1_000, 10), (100_000, 17), (600, 20), (381, 20)]


def _time(function, repeat):
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def run(time_limit, repeat):
    rows = []
    consecutive(10, 3)  # warm numpy/Layout code paths once
    for method, groups, redundancy in CASES:
        if method == "sidon":
            seconds, layout = _time(lambda: sidon(groups, redundancy, time_limit=time_limit), repeat)
        elif method == "consecutive":
            seconds, layout = _time(lambda: consecutive(groups, redundancy), repeat)
        else:
            seconds, layout = _time(lambda: random_latin(groups, redundancy, seed=0), repeat)
        meta = layout.metadata
        rows.append(
            {
                "method": method,
                "N": groups,
                "r": redundancy,
                "seconds": round(seconds, 4),
                "lambda": meta.get("lambda"),
                "status": meta.get("solver_status", "-"),
                "how": meta.get("construction") or meta.get("reason") or "-",
            }
        )
    plain = []
    for groups, redundancy in PLAIN_CP_SAT:
        start = time.perf_counter()
        result = _solve_difference_model(groups, redundancy, start + time_limit, 0, 1, sidon_only=True)
        plain.append(
            {
                "N": groups,
                "r": redundancy,
                "seconds": round(time.perf_counter() - start, 3),
                "cp_sat_status": result.status,
                "lambda": result.overlap,
            }
        )
    return {
        "time_limit": time_limit,
        "repeat": repeat,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "generators": rows,
        "plain_cp_sat": plain,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=10.0, help="CP-SAT limit per sidon call, seconds")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (best time reported)")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    args = parser.parse_args()
    report = run(args.time_limit, args.repeat)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"| method | N | r | seconds (best of {args.repeat}) | lambda | status | construction / reason |")
    print("|---|---|---|---|---|---|---|")
    for row in report["generators"]:
        print(f"| {row['method']} | {row['N']:,} | {row['r']} | {row['seconds']} | {row['lambda']} | "
              f"{row['status']} | {row['how']} |")
    print()
    print(f"Plain CP-SAT Sidon model, no construction (time limit {args.time_limit} s, 1 worker):")
    print("| N | r | seconds | CP-SAT status | lambda |")
    print("|---|---|---|---|---|")
    for row in report["plain_cp_sat"]:
        print(f"| {row['N']:,} | {row['r']} | {row['seconds']} | {row['cp_sat_status']} | {row['lambda']} |")


if __name__ == "__main__":
    main()

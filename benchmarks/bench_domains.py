"""Benchmark and figures of docs/domains.md: domain-safe layouts against plain Sidon and consecutive ones.

Four parts, each printed as a Markdown table (``--json`` for a JSON document):

* ``generate`` - time of :func:`spare_opt.domain_safe` on the targets of issue 11
  (N = 600 racks of 8 r = 8 within 10 s; N = 10,000 racks of 16 r = 14 within 60 s;
  N = 100,000 contiguous racks of 32 r = 17 within 30 s), contiguous and shuffled racks,
  each route, median of ``--repeat`` runs, and the time of :func:`spare_opt.domain_report`;
* ``table`` - per N: domain-safe, plain Sidon and consecutive layouts: safe or not, the
  worst single rack failure, ``mu`` and ``Sbar`` under correlated failures
  (:func:`spare_opt.domain_comparison`, common random numbers);
* ``figure`` - N = 600, r = 8, racks of 8: ``mu`` and ``Sbar`` against ``p``
  (docs/domains-600.png);
* ``replay`` - the real InfiniteHBD trace on its derived topology (nodes that failed at
  the same instant), in-sample and derived on the first half only.

Usage::

    python benchmarks/bench_domains.py generate --repeat 3
    python benchmarks/bench_domains.py table
    python benchmarks/bench_domains.py figure --out docs/domains-600.png --force
    python benchmarks/bench_domains.py replay --trace ../shared/data/infinitehbd-trace/fault_trace.json
"""

import argparse
import json
import platform
import statistics
import time

import numpy as np

import spare_opt as so
from spare_opt.guarantees._plots import plot_domain_probability

#: The fraction of failure events that hit several nodes at the same instant on the InfiniteHBD trace.
TRACE_P = 0.057


def crossing(n, rack, stripes):
    """Racks of consecutive groups and power feeds striped across racks (levels that cross)."""
    g = np.arange(n)
    return so.Topology(n, {"rack": [f"rack-{x}" for x in g // rack], "power": [f"power-{x}" for x in g % stripes]})


GENERATE = [
    # (label, N, r, topology builder, levels, method)
    ("racks of 8", 600, 8, lambda: so.Topology.blocks(600, {"rack": 8}), None, "auto"),
    ("racks of 8, shuffled", 600, 8, lambda: so.Topology.blocks(600, {"rack": 8}, shuffle=True, seed=1), None, "auto"),
    ("racks of 8, shuffled", 600, 8, lambda: so.Topology.blocks(600, {"rack": 8}, shuffle=True, seed=1), None,
     "assignment"),
    ("racks of 8 x 25 power stripes", 600, 8, lambda: crossing(600, 8, 25), ["rack", "power"], "auto"),
    ("racks of 16", 10_000, 14, lambda: so.Topology.blocks(10_000, {"rack": 16}), None, "auto"),
    ("racks of 16, shuffled", 10_000, 14, lambda: so.Topology.blocks(10_000, {"rack": 16}, shuffle=True, seed=1),
     None, "auto"),
    ("racks of 16, shuffled", 10_000, 14, lambda: so.Topology.blocks(10_000, {"rack": 16}, shuffle=True, seed=1),
     None, "assignment"),
    ("racks of 32", 100_000, 17, lambda: so.Topology.blocks(100_000, {"rack": 32}), None, "auto"),
]


def run_generate(repeat, time_limit):
    rows = []
    so.domain_safe(24, 3, so.Topology.blocks(24, {"rack": 4}))  # warm imports
    for label, n, r, build, levels, method in GENERATE:
        topology = build()
        times, layout = [], None
        for _ in range(repeat):
            start = time.perf_counter()
            layout = so.domain_safe(n, r, topology, levels=levels, method=method, time_limit=time_limit)
            times.append(time.perf_counter() - start)
        start = time.perf_counter()
        report = so.domain_report(layout, topology, levels=levels or topology.levels[0])
        report_seconds = time.perf_counter() - start
        meta = layout.metadata
        rows.append({
            "topology": label, "N": n, "r": r, "method": method, "route": meta["domain_route"],
            "seconds_median": statistics.median(times), "seconds_max": max(times),
            "status": meta["domain_status"], "multiplicity": meta["domain_multiplicity"],
            "lambda": layout.overlap(), "report_seconds": report_seconds,
            "worst_single": next(iter(report.levels.values()))["worst_status"],
            "search": meta.get("search"),
        })
    return rows


TABLE = [(600, 8, 8, 200, (TRACE_P, 0.2)), (10_000, 14, 16, 40, (TRACE_P, 0.2)), (100_000, 17, 32, 8, (TRACE_P,))]


def run_table(seed, table=TABLE):
    rows = []
    for n, r, rack, trials, probabilities in table:
        topology = so.Topology.blocks(n, {"rack": rack})
        start = time.perf_counter()
        safe = so.domain_safe(n, r, topology, seed=seed)
        seconds = time.perf_counter() - start
        reports = {}
        for name, layout in (("domain-safe", safe), ("sidon", so.sidon(n, r, seed=seed)),
                             ("consecutive", so.consecutive(n, r))):
            info = so.domain_report(layout, topology, max_pairs=500).levels["rack"]
            reports[name] = info
        for p in probabilities:
            comparison = so.domain_comparison(safe, topology, domain_probability=p, trials=trials, seed=seed)
            for row in comparison:
                name = "domain-safe" if row["name"] == "layout" else row["name"]
                info = reports[name]
                rows.append({
                    "N": n, "r": r, "rack": rack, "layout": name, "generate_seconds": seconds if name == "domain-safe" else None,
                    "safe": row["safe"], "multiplicity": row["multiplicity"],
                    "worst_single": info["worst_status"], "wipe_out_racks": info["wipe_out_domains"],
                    "p": p, "trials": trials, "mu": row["mu"], "mu_ci95": row["mu_ci95"], "mu_events": row["mu_events"],
                    "sbar": row["sbar"], "sbar_ci95": row["sbar_ci95"],
                })
    return rows


def run_figure(out, force, seed, trials=200, probabilities=(0.0, 0.02, 0.057, 0.1, 0.2, 0.35, 0.5)):
    n, r = 600, 8
    topology = so.Topology.blocks(n, {"rack": 8})
    layouts = {"domain-safe": so.domain_safe(n, r, topology, seed=seed), "sidon": so.sidon(n, r, seed=seed),
               "consecutive": so.consecutive(n, r)}
    curves = {name: [so.domain_monte_carlo(layout, topology, domain_probability=p, trials=trials, seed=seed)
                     for p in probabilities] for name, layout in layouts.items()}
    title = (f"N = {n}, r = {r}, racks of 8 consecutive groups, {trials} trials per point (seed {seed}), 95% CIs\n"
             f"a failure event takes its whole rack with probability p, else one group")
    plot_domain_probability(curves, out, title=title, force=force)
    return [{"layout": name, "p": res.domain_probability, "mu": res.mu, "sbar": res.sbar}
            for name, results in curves.items() for res in results]


def run_replay(trace_path, seed):
    trace = so.read_fault_trace(trace_path)
    n, r = 400, 9
    first, last = trace.span_days
    half = first + (last - first) / 2
    rows = []
    for label, until in (("derived on the whole trace (in-sample)", None),
                         (f"derived on days < {half:.1f}, wipe-outs counted after", half)):
        topology = so.derived_topology(trace, n, until_days=until)
        sizes = [m.size for m in topology.domains("incident").values()]
        safe = so.domain_safe(n, r, topology, seed=seed)
        for name, layout in (("domain-safe", safe), ("sidon", so.sidon(n, r, seed=seed)),
                             ("consecutive", so.consecutive(n, r))):
            result = so.replay_trace(layout, trace)
            days = result["wipe_out_days"]
            counted = [d for d in days if until is None or d >= until]
            rows.append({
                "topology": label, "domains": len(sizes), "largest": max(sizes), "layout": name,
                "placement": "first fault",
                "safe": so.is_domain_safe(layout, topology), "wipe_outs": len(counted), "wipe_out_days": counted,
                "masked": result["masked"], "mean_stack_number": result["mean_stack_number"],
            })
        # The plain Sidon layout with nodes placed at random (seeds 0-9): no first-appearance artefact.
        layout = so.sidon(n, r, seed=seed)
        results = [so.replay_trace(layout, trace, placement_seed=s) for s in range(10)]
        counted = [len([d for d in res["wipe_out_days"] if until is None or d >= until]) for res in results]
        rows.append({
            "topology": label, "domains": len(sizes), "largest": max(sizes), "layout": "sidon",
            "placement": "random, seeds 0-9 (mean)", "safe": None, "wipe_outs": float(np.mean(counted)),
            "wipe_out_days": counted, "masked": float(np.mean([res["masked"] for res in results])),
            "mean_stack_number": float(np.mean([res["mean_stack_number"] for res in results])),
        })
    return rows


def _markdown(rows, keys):
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        cells = []
        for key in keys:
            value = row[key]
            if isinstance(value, float):
                value = f"{value:.4g}"
            elif isinstance(value, list) and value and isinstance(value[0], float):
                value = "[" + ", ".join(f"{v:.4g}" for v in value) + "]"
            cells.append(str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=["generate", "table", "figure", "replay"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="docs/domains-600.png")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--trace", default="../shared/data/infinitehbd-trace/fault_trace.json")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    machine = f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}"
    if args.part == "generate":
        rows = run_generate(args.repeat, args.time_limit)
        keys = ["topology", "N", "r", "method", "route", "seconds_median", "seconds_max", "status", "multiplicity",
                "lambda", "worst_single", "report_seconds"]
    elif args.part == "table":
        rows = run_table(args.seed)
        keys = ["N", "r", "layout", "generate_seconds", "safe", "multiplicity", "worst_single", "wipe_out_racks", "p",
                "trials", "mu", "mu_ci95", "mu_events", "sbar", "sbar_ci95"]
    elif args.part == "figure":
        rows = run_figure(args.out, args.force, args.seed)
        keys = ["layout", "p", "mu", "sbar"]
    else:
        rows = run_replay(args.trace, args.seed)
        keys = ["topology", "domains", "largest", "layout", "placement", "safe", "wipe_outs", "wipe_out_days",
                "masked", "mean_stack_number"]
    if args.json:
        print(json.dumps({"machine": machine, "rows": rows}, indent=1))
    else:
        print(f"machine: {machine}\n")
        print(_markdown(rows, keys))


if __name__ == "__main__":
    main()

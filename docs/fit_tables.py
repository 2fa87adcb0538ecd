"""Print the tables of docs/fit.md: the fit at several windows, and fits of traces sampled from the fitted model.

Run from the repository root after installing the project::

    python docs/fit_tables.py [TRACE]      # default: the InfiniteHBD trace shipped with the package

Takes about a minute: 8 fits of the real trace and 2 x 10 fits of sampled traces.
"""

import dataclasses
import sys

import numpy as np

from spare_opt import fit_trace, parse_fault_events, read_fault_trace
from spare_opt.demo import packaged_trace_path

NODES = 400
SEEDS = range(10)


def main(path):
    trace = read_fault_trace(path)
    print("| window | events | several nodes | largest | Weibull shape [95% CI] | event MTBF | lag-1 rank corr. |")
    print("|---|---|---|---|---|---|---|")
    for minutes in (0, 1, 5, 15, 60):
        r = fit_trace(trace, nodes=NODES, window_minutes=minutes)
        i, c, m = r.interarrival, r.correlation["within_window"], r.mtbf
        shape = i["weibull_shape"]
        print(f"| {minutes} min | {c['events']} | {100 * c['multi_node_event_fraction']:.1f}% | "
              f"{c['largest_nodes']} | {shape.value:.3f} [{shape.low:.3f}, {shape.high:.3f}] | "
              f"{m['event_mtbf_hours'].value:.1f} h | {i['lag1_rank_correlation']:.3f} |")
    print()
    real = fit_trace(trace, nodes=NODES)
    rows = [("real trace", [real])]
    days = real.observation["observation_days"]
    for distribution in ("empirical", "lognormal"):
        model = dataclasses.replace(real.model, repair_distribution=distribution)
        fits = [fit_trace(parse_fault_events(model.sample_trace(days, seed=seed)), resamples=99) for seed in SEEDS]
        rows.append((f"sampled, {distribution} repairs", fits))
    print("| trace | mean nodes down | peak down | Weibull shape | several nodes (5 min) | "
          "repair median | repair mean |")
    print("|---|---|---|---|---|---|---|")
    for name, fits in rows:
        def column(get, fmt):
            values = np.array([get(f) for f in fits])
            if values.size == 1:
                return fmt.format(values[0])
            return f"{fmt.format(values.mean())} ({fmt.format(values.min())}-{fmt.format(values.max())})"

        print(f"| {name} | {column(lambda f: f.nodes_down['mean'], '{:.1f}')} | "
              f"{column(lambda f: f.nodes_down['peak'], '{:.0f}')} | "
              f"{column(lambda f: f.interarrival['weibull_shape'].value, '{:.2f}')} | "
              f"{column(lambda f: 100 * f.correlation['within_window']['multi_node_event_fraction'], '{:.1f}%')} | "
              f"{column(lambda f: f.repairs['median_hours'].value, '{:.1f} h')} | "
              f"{column(lambda f: f.repairs['mean_hours'].value / 24, '{:.1f} d')} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else packaged_trace_path())

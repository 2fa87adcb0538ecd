"""The text report of a fit (:meth:`spare_opt.traces.fit.FitResult.format_text`) and its number formats.

Private to :mod:`spare_opt.traces.fit`, which re-exports what others import from it.
"""

import math

from .._core.durations import huge_duration
from .failure_model import SECONDS_PER_DAY, SECONDS_PER_HOUR


def _duration(seconds):
    """A duration in a readable unit: ``"8.64 s"``, ``"12 min"``, ``"14.4 h"``, ``"239 days"``."""
    if not math.isfinite(seconds):
        return "-" if math.isnan(seconds) else "inf"
    huge = huge_duration(seconds)
    if huge is not None:
        return huge
    unit, scale = _unit(seconds)
    return f"{seconds / scale:.3g} {unit}"


def _unit(seconds):
    if abs(seconds) < 120:
        return "s", 1.0
    if abs(seconds) < 2 * SECONDS_PER_HOUR:
        return "min", 60.0
    if abs(seconds) < 2 * SECONDS_PER_DAY:
        return "h", SECONDS_PER_HOUR
    return "days", SECONDS_PER_DAY


def _interval(estimate, to_seconds=None):
    """``"14.4 h [12.1, 17.0]"``: value and bounds in the value's unit (``to_seconds``) or as numbers."""
    def number(value, scale):
        if math.isnan(value):
            return "-"
        return "inf" if math.isinf(value) else f"{value / scale:.3g}"

    if math.isnan(estimate.value):
        return "-"
    if to_seconds is None:
        text, unit, scale = f"{estimate.value:.3g}", "", 1.0
    else:
        unit, scale = _unit(estimate.value * to_seconds)
        scale /= to_seconds
        text, unit = f"{estimate.value / scale:.3g}", f" {unit}"
    if math.isnan(estimate.low) and math.isnan(estimate.high):
        return text + unit
    return f"{text}{unit} [{number(estimate.low, scale)}, {number(estimate.high, scale)}]"


def _percent(value):
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.1f}%"


def _p_value(value):
    """``"p = 0.012"``, ``"p < 1e-4"`` or ``"p = -"``."""
    if not math.isfinite(value):
        return "p = -"
    return f"p = {value:.2g}" if value >= 1e-4 else "p < 1e-4"


def _report_lines(result):
    t, o, c, m = result.trace, result.observation, result.cluster, result.mtbf
    level = f"{100 * result.confidence:g}%"
    day, hour = SECONDS_PER_DAY, SECONDS_PER_HOUR
    lines = [
        f"Fit of {result.source} ({t['format']}, {t['events']} events, {t['nodes_named']} nodes named)",
        f"Window: days {o['start_day']:g} to {o['end_day']:g} ({o['observation_days']:.2f} days): {o['rule']}",
        f"Cluster: {c['assumption']}",
        f"Used: {t['node_faults']} node faults in {m['failure_events']} failure events; ignored (irregular): "
        f"{t['ignored_starts']} fault_start, {t['ignored_ends']} fault_end; open at the end: {t['open_at_end']}",
        "",
        f"Failure rates ({level} intervals, widened for bursts: dispersion {m['dispersion_node_faults']:.3g} for "
        f"node faults, {m['dispersion_events']:.3g} for events)",
    ]
    if "reason" in m:
        lines.append(f"  - ({m['reason']})")
    else:
        lines += [
            f"  per-node MTBF  {_interval(m['node_mtbf_days'], day):<22} up-time / node faults "
            f"(calendar: {_interval(m['node_mtbf_calendar_days'], day)})",
            f"  system MTBF    {_interval(m['system_mtbf_hours'], hour):<22} between node faults in the "
            f"{c['nodes']}-node cluster",
            f"  event MTBF     {_interval(m['event_mtbf_hours'], hour):<22} between failure events "
            f"({result.correlation['window_minutes']:g}-min window)",
        ]
    i = result.interarrival
    lines += ["", f"Gaps between failure events ({i['gaps']} gaps)"]
    if "reason" in i:
        lines.append(f"  - ({i['reason']})")
    else:
        verdict = ("shape < 1 (bursty) is significant" if i["bursty"] else
                   "shape < 1 (bursty) is not significant" if i["weibull_shape"].value < 1 else
                   "shape >= 1: not bursty")
        lines += [
            f"  Weibull shape {_interval(i['weibull_shape'])}, scale {_duration(i['weibull_scale_hours'].value * hour)}"
            f" (mean gap {_duration(i['weibull_mean_gap_hours'] * hour)}; observed "
            f"{_duration(i['mean_gap_hours'] * hour)})",
            f"  {verdict}: one-sided {_p_value(i['p_value_shape_below_1'])} (likelihood ratio, against shape 1)",
        ]
        if math.isfinite(i["lag1_rank_correlation"]):
            lines.append(f"  lag-1 rank correlation of the gaps {i['lag1_rank_correlation']:.3f} "
                         f"({_p_value(i['lag1_p_value'])}; a renewal process has 0)")
    r = result.repairs
    lines += ["", f"Repairs ({r['completed']} completed, {r['open']} open at the end, {r['below_resolution']} of "
                  "length 0)"]
    if "reason" in r and math.isnan(r["median_hours"].value):
        lines.append(f"  - ({r['reason']})")
    else:
        bound = " (a lower bound: open faults counted to the end)" if r["mean_is_lower_bound"] else ""
        lines.append(f"  median {_interval(r['median_hours'], hour)}, mean {_interval(r['mean_hours'], hour)}"
                     f"{bound}, max {_duration(r['max_hours'] * hour)}")
        if r["open"]:
            lines.append(f"  longest still open: {_duration(r['longest_open_hours'] * hour)}")
        if math.isnan(r["lognormal_sigma"].value):
            lines.append(f"  lognormal fit: - ({r.get('reason')})")
        else:
            lines.append(f"  lognormal fit: median {_interval(r['lognormal_median_hours'], hour)}, "
                         f"sigma {_interval(r['lognormal_sigma'])}, mean {_duration(r['lognormal_mean_hours'] * hour)}")
            fit_p = r["lognormal_fit_p_value"]
            if math.isfinite(fit_p):
                verdict = "rejected" if fit_p < 1 - result.confidence else "not rejected"
                lines.append(f"  Anderson-Darling {_p_value(fit_p)}: the lognormal is {verdict}")
    k = result.correlation
    lines += ["", "Failure events that take several nodes"]
    for name, part in (("same instant", k["same_instant"]),
                       (f"within {k['window_minutes']:g} min", k["within_window"])):
        lines.append(
            f"  {name:<13} {part['multi_node_events']}/{part['events']} events "
            f"({_percent(part['multi_node_event_fraction'])}), {part['node_faults_in_multi_node_events']}/"
            f"{part['node_faults']} node faults ({_percent(part['node_fault_fraction_in_multi_node_events'])}), "
            f"largest {part['largest_nodes']} nodes (day {part['largest_day']:g})")
    d = result.nodes_down
    lines += ["", (f"Nodes down: mean {d['mean']:.2f} of {c['nodes']} ({_percent(d['mean_fraction'])}), "
                   f"peak {d['peak']} (day {d['peak_day']:g}); some node down "
                   f"{_percent(d['fraction_of_time_any_down'])} of the time") if math.isfinite(d["mean"]) else
              f"Nodes down: peak {d['peak']} (day {d['peak_day']:g}); no mean ({d.get('reason')})"]
    n = result.node_counts
    lines.append(f"Faults per node: {n['nodes_failed']} of {c['nodes']} nodes failed, at most "
                 f"{n['max_faults_one_node']} times; equal rates would leave "
                 f"{n['expected_never_failed_if_uniform']:.0f} never failing, not {n['nodes_never_failed']} "
                 + (f"(dispersion index {n['dispersion_index']:.2f}, {_p_value(n['p_value'])})"
                    if math.isfinite(n["dispersion_index"]) else ""))
    lines += _model_lines(result)
    if result.notes:
        lines += ["", "Notes"] + [f"  - {note}" for note in result.notes]
    return lines


def _model_lines(result):
    """The report's lines on the fitted failure model (or why there is none)."""
    lines = ["", "Failure model" + ("" if result.model is None else " (for a simulation: -o FILE writes it)")]
    if result.model is None:
        lines.append(f"  - ({result.model_error})")
    else:
        f = result.model
        lines += [
            f"  events every {_duration(f.event_mtbf_seconds)}, Weibull shape {f.weibull_shape:.3g}; "
            f"{f.mean_event_size:.3g} nodes per event, several with probability {_percent(f.multi_node_probability)}",
            f"  system MTBF {_duration(f.system_mtbf_seconds)}, per-node MTBF {_duration(f.node_mtbf_seconds)}, "
            f"cluster of {f.cluster_nodes} nodes",
            f"  repairs: {f.repair_distribution}"
            + (f" ({len(f.repair_empirical_seconds)} observed durations, mean {_duration(f.repair_mean_seconds)})"
               if f.repair_distribution == "empirical" else
               f" (median {_duration(f.repair_median_seconds)}, sigma {f.repair_sigma:.3g}, "
               f"mean {_duration(f.repair_mean_seconds)})"),
        ]
    return lines

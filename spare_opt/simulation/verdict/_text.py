"""The verdict in words: the table, the grid of settings tried, the verdict line and the lines beside them.

Each function reads a :class:`~._result.CompareResult` (whose methods of the same
names call them) and writes nothing: the command line prints what they return.
"""

import math

from ..._core.durations import duration_in
from ..parameters import fault_free_seconds
from ._labels import STRATEGY_LABELS, _name, _setting, _verdict_key


def format_text(result):
    """The verdict as a table, one row per strategy, and a one-line conclusion.

    The columns ``steps``, ``patch``, ``lost``, ``restart`` and ``saves`` add up to
    ``TTT/T0`` (to the rounding of the digits shown) for a finished row.
    """
    p = result.params
    failures = _failures_phrase(result)
    allreduce = result.allreduce.get("text") or f"all-reduce {p.allreduce_seconds:g} s"
    lines = [
        f"Verdict: N = {p.groups:,}, {failures}, {result.semantics} semantics",
        f"T_r = {p.restart_seconds / 60:g} min, T_s = {p.save_seconds:g} s, step {p.layer_compute_seconds:g} s "
        f"+ {allreduce}, {p.steps:,} steps (T0 = {duration_in(fault_free_seconds(p), 86400, 'days', '.2f')}); "
        f"{result.seeds} seeds (node placements), best checkpoint period per setting",
        "",
        f"{'strategy':<12} {'setting':<13} {'TTT/T0':>7} {'95% CI':>15} {'= steps':>7} {'+ patch':>7} "
        f"{'+ lost':>7} {'+ restart':>9} {'+ saves':>7} {'restarts':>8} {'step cost':>9} {'T_c':>8}  price",
    ]
    for row in result.strategies:
        parts = row.get("ttt_parts") or {}
        lines.append(
            f"{STRATEGY_LABELS[row['strategy']]:<12} {_setting(row, p.groups):<13} "
            f"{_ratio(row['ttt_ratio'], p):>7} {_interval(row['ttt_ci']):>15} "
            + " ".join(f"{_part(parts.get(key)):>{width}}" for key, width in _PART_WIDTHS)
            + f" {row['restarts']:>8.1f} {row['mean_step_cost']:>9.3f} "
            f"{_duration(row['checkpoint_period_seconds']):>8}  {_price_text(row)}"
        )
    lines.append("TTT/T0 = steps (committed steps at their step cost; elastic: more steps for the same "
                 "samples) + patch (patch compute, shrink, controller) + lost (work redone after wipe-outs) "
                 "+ restart + saves, each over T0; step cost: compute of a step in layers (elastic: 1, a "
                 "step takes a fault-free step's time)")
    inputs = input_line(result)
    if inputs:
        lines.append(inputs)
    grid = format_grid(result)
    if len(grid) > 1:  # a strategy with a grid ran (not checkpointing alone only)
        lines += [""] + grid
    lines.append("")
    lines.append(conclusion(result))
    held = held_line(result)
    if held:
        lines.append(held)
    if result.sensitivity is not None and result.sensitivity.get("runs"):
        lines.append(sensitivity_line(result))
    lines += [f"Note: {note}" for note in result.notes]
    return "\n".join(lines)


def _failures_phrase(result):
    """The header's words for the failures: a trace replayed, a trace fitted and scaled, a model or a preset."""
    p = result.params
    kind = result.failures.get("kind")
    if result.scaling is not None:
        failures = result.scaling
    elif result.trace_info is not None:
        scale = p.trace_time_scale
        rate = "real rate" if scale == 1.0 else f"compressed {1 / scale:g}x" if scale < 1 else f"stretched {scale:g}x"
        failures = f"trace {result.source} ({rate}, replayed {result.cycles}x end to end)"
    elif kind == "failure model":
        model = result.failures["model"]
        repairs = model.get("repairs")
        per = "" if result.failures["nodes_per_group"] == 1 else \
            f", {result.failures['nodes_per_group']} nodes per group (node MTBF " \
            f"{result.failures['node_mtbf_seconds'] / 86400:.3g} days)"
        what = "failures and repairs" if repairs else "failures"
        origin = f"the {result.source}" if result.failures.get("path") else result.failures.get("description") or \
            result.source
        fixed = "" if not repairs else \
            f", repairs {repairs['distribution']}, median {repairs['median_seconds'] / 3600:.3g} h"
        failures = (f"{what} drawn from {origin} (group MTBF "
                    f"{result.failures['group_mtbf_seconds'] / 86400:.3g} days{per}, Weibull k = "
                    f"{model['weibull_shape']:g}{fixed})")
    elif result.source != "preset":
        failures = f"failures and repairs drawn from the {result.source}"
    else:
        failures = f"{p.failure_model} failures, system MTBF {p.system_mtbf_seconds / 60:g} min"
    return failures


def input_line(result):
    """str or None: the input each group must read per step, stacked SPARe against redistribution."""
    n = result.params.groups
    rows = [row for row in result.strategies if row["strategy"] in ("spare", "redistribute")
            and not row.get("paper_row")]
    if not rows:
        return None
    batch = result.global_batch
    parts = []
    for row in rows:
        r = row["redundancy"]
        share = f"{r:,} of {n:,} shard types" if r < n else f"all {n:,} shard types"
        if batch is not None:
            share += f", {r * (batch // n):,} of {batch:,} sequences"
        label = f"SPARe r = {r}" if row["strategy"] == "spare" else "redistribution (r = N)"
        parts.append(f"{label}: {share}")
    return "Input each group reads per step (the data it keeps at hand to take a failed group's " \
           "micro-batches): " + "; ".join(parts)


def held_line(result):
    """str or None: when the best strategy is not SPARe, what a recommendation file holds instead."""
    best = _verdict_key(result.strategies)
    try:
        spare = result.best("spare")
    except KeyError:
        return None
    if best is None or best == _name(spare):
        return None
    return (f"SPARe is not the verdict's choice ({best} is); a recommendation file (-o) holds the best exact "
            f"SPARe setting, {_name(spare)} (TTT/T0 {_ratio(spare['ttt_ratio'], result.params)}), for a job "
            "that deploys SPARe")


def sensitivity_line(result):
    """str: whether the verdict changes at half and at double the all-reduce time."""
    runs = result.sensitivity["runs"]
    parts = [f"{run['allreduce_seconds']:.3g} s: best exact {run['best_exact'] or 'none finished'}"
             + ("" if run["best_overall"] == run["best_exact"] else f", best overall {run['best_overall']}")
             for run in runs]
    verdict = "the verdict changes" if result.sensitivity["changes"] else "the verdict holds"
    return (f"Sensitivity to the all-reduce ({result.params.allreduce_seconds:.3g} s): at half and double, "
            f"{'; '.join(parts)}: {verdict}.")


def format_grid(result):
    """list of str: every setting tried, one small table per strategy (``*``: the setting chosen)."""
    lines = ["Settings tried: TTT/T0 at each setting's best T_c, 95% CI; * = chosen, the smallest r "
             "(then m) whose mean lies in the 95% CI of the least TTT/T0"]
    p = result.params

    def cell(row):
        chosen = result.best(row["strategy"])
        mark = "*" if (row["redundancy"], row["micro_batches"]) == (chosen["redundancy"],
                                                                  chosen["micro_batches"]) else " "
        interval = _interval(row["ttt_ci"])
        return f"{_ratio(row['ttt_ratio'], p)} {interval if interval != '-' else ''}".rstrip() + mark

    rep = [row for row in result.settings if row["strategy"] == "rep"]
    if rep:
        lines.append(f"  {STRATEGY_LABELS['rep']:<11} " + "   ".join(
            f"r = {row['redundancy']}: {cell(row)}" for row in rep))
    spread = [row for row in result.settings if row["strategy"] == "redistribute"]
    if spread:
        lines.append(f"  {STRATEGY_LABELS['redistribute']:<11} " + "   ".join(
            f"r = N, m = {row['micro_batches']}: {cell(row)}" for row in spread))
    spare = [row for row in result.settings if row["strategy"] == "spare"]
    if spare:
        ms = sorted({row["micro_batches"] for row in spare})
        rs = sorted({row["redundancy"] for row in spare})
        width = max(len(cell(row)) for row in spare) + 2
        corner = "r \\ m"
        lines.append(f"  {STRATEGY_LABELS['spare']:<11} {corner:>6}" + "".join(f"{m:>{width}}" for m in ms))
        by = {(row["redundancy"], row["micro_batches"]): row for row in spare}
        for r in rs:
            lines.append(f"  {'':<11} {r:>6}" + "".join(
                f"{cell(by[r, m]) if (r, m) in by else '-':>{width}}" for m in ms))
    return [line.rstrip() for line in lines]


def conclusion(result):
    """str: the verdict line: the best exact strategy and its gain, then the best overall and what it buys.

    *Exact* strategies train on the fault-free gradient (all but elastic, whose
    global batch shrinks while groups are out).  When the best overall is not
    exact, the line says how much time it saves over the best exact one and at
    which price in samples.
    """
    cap = result.params.max_wall_factor
    finished = [row for row in result.strategies if math.isfinite(row["ttt_ratio"]) and not row.get("paper_row")]
    if not finished:
        return f"No strategy finished within {cap:g} x T0."
    exact = [row for row in finished if row.get("exact", True)]
    best = min(finished, key=lambda row: row["ttt_ratio"])
    if not exact:
        return f"Best overall: {_name(best)}, TTT/T0 {best['ttt_ratio']:.3f}; no exact strategy finished " \
               f"within {cap:g} x T0."
    best_exact = min(exact, key=lambda row: row["ttt_ratio"])
    parts = []
    for row in result.strategies:
        if row is best_exact or not row.get("exact", True):
            continue
        if math.isfinite(row["ttt_ratio"]):
            parts.append(f"{1 - best_exact['ttt_ratio'] / row['ttt_ratio']:.1%} less time than {_name(row)}")
        else:
            parts.append(f"{_name(row)} does not finish within {cap:g} x T0")
    line = f"Best exact: {_name(best_exact)}, TTT/T0 {best_exact['ttt_ratio']:.3f}" + (
        ": " + "; ".join(parts) if parts else "")
    if best is best_exact:
        return line + ". Best overall: the same (exact gradient, nothing given up)."
    missing = 1.0 - best["mean_batch_fraction"]
    return (line + f". Best overall: {_name(best)}, TTT/T0 {best['ttt_ratio']:.3f}, "
            f"{1 - best['ttt_ratio'] / best_exact['ttt_ratio']:.1%} less time than {_name(best_exact)}, "
            f"bought with {missing:.2%} of the samples missing ({best['short_batch_share']:.1%} of steps "
            "with a short batch): its gradient is not the fault-free one.")


def _price_text(row):
    """The price column: step cost (SPARe, Rep, redistribution), steps for the same samples (elastic), restarts."""
    price = row.get("price")
    if price is None:
        return "-"
    if price["kind"] == "steps for the same samples":
        return (f"x{price['value']:.3f} steps for the same samples (batch -{price['missing_batch']:.2%}, short "
                f"on {price['short_batch_share']:.1%} of steps)")
    if price["kind"] == "restarts":
        return f"{price['value']:.1f} restarts"
    extra = " (paper's m = 1)" if row.get("paper_row") else ""
    return f"step cost x{price['value']:.3f}{extra}"


#: The parts of TTT/T0 in the verdict's table, and their widths.
_PART_WIDTHS = (("steps", 7), ("patch", 7), ("lost", 7), ("restart", 9), ("saves", 7))


def _part(value):
    """One ``TTT/T0`` column: three decimals, or three digits of scientific notation from
    10^5 on (a restart of 10^300 s is 10^302 T0, not a line of 300 digits)."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.3f}" if abs(value) < 1e5 else f"{value:.3g}"


def _ratio(value, params):
    """``TTT/T0``, or ``> cap`` for a run stopped at the wall-time cap."""
    if math.isfinite(value):
        return f"{value:.3f}"
    return f"> {params.max_wall_factor:g}"


def _interval(ci):
    low, high = ci
    if not (math.isfinite(low) and math.isfinite(high)):
        return "-"
    return f"[{low:.3f}, {high:.3f}]"


def _duration(seconds):
    if not math.isfinite(seconds):
        return "-"
    if seconds >= 86400:
        return duration_in(seconds, 86400, "d", ".1f")
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"

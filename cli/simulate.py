"""`spare-opt simulate`: time-to-train of one strategy, r and checkpoint period over several seeds."""


import click

from spare_opt.parameters import PRESETS, STRATEGIES, parse_overrides, preset_parameters
from spare_opt.simulation import default_redundancy, simulate_seeds, summarise

from spare_opt._stats import finite_or_none

from .options import (
    echo_json,
    executor_for,
    json_option,
    progress_bar,
    quiet_option,
    scheduler_option,
    workers_option,
)

__all__ = ["command"]


def _positive_period(ctx, param, value):
    if value is not None and not value > 0:
        raise click.BadParameter(f"must be > 0 seconds, got {value}")
    return value


@click.command("simulate")
@click.option("--preset", default="paper-600k", show_default=True, type=click.Choice(sorted(PRESETS)),
              help="Built-in setting (timings, MTBF, Weibull shape, steps).")
@click.option("--groups", "-N", type=int, default=None,
              help="Number of DP groups N; one of the preset's (default: its first).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="spare", show_default=True,
              help="ckpt: checkpointing alone; rep: replication of degree r; spare: SPARe with a Sidon layout.")
@click.option("--redundancy", "-r", type=click.IntRange(min=1), default=None,
              help="Redundancy r (default: r* = floor(log2 N + 0.833) for spare, 3 for rep).")
@click.option("--ckpt-period", type=float, default=None, callback=_positive_period, metavar="SEC",
              help="Seconds of progress between checkpoints (default: the Young/Daly T_c*).")
@click.option("--seeds", type=click.IntRange(min=1), default=10, show_default=True, help="Runs (seeds 0..K-1).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Replay this fault trace (InfiniteHBD JSON) instead of Weibull failures.")
@click.option("--trace-time-scale", type=float, default=1.0, show_default=True,
              help="With --trace: multiply trace times by this factor (< 1 compresses the trace).")
@click.option("--placement-seed", type=int, default=None, metavar="SEED",
              help="With --trace: place nodes on random distinct groups (default: order of first appearance).")
@click.option("--layout", "layout_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="SPARe layout file (default: a Sidon layout for N and r).")
@click.option("--set", "settings", multiple=True, metavar="FIELD=VALUE",
              help="Change a simulation parameter, e.g. --set steps=20000 (repeatable).")
@workers_option
@scheduler_option
@json_option
@quiet_option
def command(preset, groups, strategy, redundancy, ckpt_period, seeds, trace_path, trace_time_scale,
            placement_seed, layout_path, settings, workers, scheduler, as_json, quiet):
    """Simulate training runs and report the time-to-train.

    Discrete-event simulation of the preset's training run under failures: checkpointing
    alone, replication of degree r, or SPARe with the online reorder controller
    (docs/reproduction.md).  Prints the mean and 95% confidence interval over the
    seeds of TTT/T0 (T0: the fault-free time), availability, restarts, masked
    failures, mean stack number S, rework and checkpoint time.
    """
    from spare_opt.layout import Layout

    if groups is None:
        groups = PRESETS[preset].groups[0]
    overrides = parse_overrides(settings)
    if trace_path is not None:
        if not trace_time_scale > 0:
            raise click.BadParameter(f"must be > 0, got {trace_time_scale}", param_hint="--trace-time-scale")
        overrides["trace_time_scale"] = trace_time_scale
    params = preset_parameters(preset, groups, **overrides)
    if redundancy is None:
        redundancy = default_redundancy(strategy, groups)
    layout = Layout.load(layout_path) if layout_path is not None else None
    trace = None
    if trace_path is not None:
        from spare_opt.trace import read_fault_trace

        trace = read_fault_trace(trace_path)
    with executor_for(scheduler, workers) as executor, progress_bar(quiet, "simulating") as progress:
        runs = simulate_seeds(params, strategy, redundancy, seeds=seeds, checkpoint_period_seconds=ckpt_period,
                              layout=layout, trace=trace, placement_seed=placement_seed, workers=workers,
                              executor=executor, progress=progress)
    summary = summarise(runs)
    if as_json:
        echo_json({
            "preset": preset,
            "strategy": strategy,
            "groups": groups,
            "redundancy": runs[0].redundancy,
            "checkpoint_period_seconds": runs[0].checkpoint_period_seconds,
            "fault_free_seconds": runs[0].fault_free_seconds,
            "summary": finite_or_none(summary),
            "trace": runs[0].trace,
            "parameters": params.to_dict(),
            "runs": [run.to_dict() for run in runs],
        })
        return
    click.echo(_format(preset, strategy, groups, runs, summary))


def _format(preset, strategy, groups, runs, summary):
    first = runs[0]
    name = {"ckpt": "CKPT only", "rep": f"Rep+CKPT r={first.redundancy}",
            "spare": f"SPARe+CKPT r={first.redundancy}"}[strategy]
    lines = [
        f"{name}, N={groups}, preset {preset}, T_c={first.checkpoint_period_seconds:.0f} s, "
        f"{summary['runs']} seeds",
        f"T0 (fault-free) = {first.fault_free_seconds / 86400:.2f} days",
    ]
    if summary["unfinished"]:
        lines.append(f"{summary['unfinished']} of {summary['runs']} runs did not finish within the wall-time cap "
                     f"(TTT/T0 > {first.wall_seconds / first.fault_free_seconds:.0f})")

    def row(label, key, fmt):
        stat = summary[key]
        low, high = stat["ci95"]
        if low != low:  # NaN: one seed, or unfinished runs
            return f"  {label:<22}{fmt.format(stat['mean'])}   (no 95% CI: needs 2 or more finished runs)"
        return f"  {label:<22}{fmt.format(stat['mean'])}   (95% CI {fmt.format(low)} .. {fmt.format(high)})"

    lines += [
        row("TTT/T0", "ttt_ratio", "{:.3f}"),
        row("availability", "availability", "{:.2%}"),
        row("restarts", "restarts", "{:.1f}"),
        row("masked failures", "masked_failures", "{:.1f}"),
        row("mean stack number S", "mean_stack_number", "{:.3f}"),
        f"  {'rework':<22}{summary['rework_seconds']['mean'] / 3600:.1f} h",
        f"  {'checkpoint time':<22}{summary['checkpoint_seconds']['mean'] / 3600:.1f} h",
    ]
    if first.trace is not None:
        t = first.trace
        lines.append(
            f"trace {t['source']} (nodes placed by {t['placement']}): {t['fault_starts']} fault starts, {t['used']} group failures applied in "
            f"{t['failure_events']} events; skipped: {t['ignored_by_reader']} irregular, {t['already_down']} "
            f"already down, {t['outside_cluster']} nodes beyond N; {t['beyond_run']} events after the run ended"
        )
    return "\n".join(lines)

"""`spare-opt compare`: the operator's verdict, checkpointing alone, replication and SPARe on the same failures."""

import click

from spare_opt._core import validation as check
from spare_opt._core.plotting import require_matplotlib
from spare_opt._core.errors import SpareError
from spare_opt.simulation.parameters import PRESETS, parse_overrides
from spare_opt.simulation.events import SEMANTICS
from spare_opt.simulation.verdict import (
    DEFAULT_COMPARE_MICRO_BATCHES,
    DEFAULT_COMPARE_REP,
    DEFAULT_COMPARE_SPARE,
    DEFAULT_CYCLES,
    MAX_CYCLES,
    compare,
    compare_parameters,
    plot_compare,
)

from .options import (
    FloatRange,
    IntegerRange,
    check_output_path,
    echo_json,
    executor_for,
    force_option,
    given,
    json_option,
    progress_bar,
    quiet_option,
    refuse_unused,
    scheduler_option,
    time_unit_option,
    trace_format_option,
    workers_option,
)

__all__ = ["command"]


#: Simulation fields that have their own option here (or that compare sets itself).
_OWN_OPTIONS = {
    "steps": "--steps",
    "restart_seconds": "--restart-minutes",
    "save_seconds": "--ckpt-save-seconds",
    "layer_compute_seconds": "--step-seconds",
    "trace_time_scale": "--time-scale",
    "max_wall_factor": "--cycles",
}


def _integer_list(ctx, param, value):
    """``"2,3,9"`` as a tuple of integers (the strict parser reads each)."""
    if value is None:
        return None
    if not value.strip():
        return ()
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise click.BadParameter(f"expected integers separated by commas, got {value!r}")
    try:
        return tuple(check.parse_int(item, None) for item in items)
    except SpareError as exc:
        raise click.BadParameter(str(exc)) from None


def _shown(values):
    return ",".join(str(v) for v in values)


@click.command("compare")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="The failure log: InfiniteHBD or spare-failure-trace JSON, or a CSV fault log "
                   "(docs/formats.md).  Without it, the failures of --preset (Weibull).")
@trace_format_option
@time_unit_option
@click.option("--failure-model", "model_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Without --trace: draw failures and repairs from this fitted model (spare-opt fit TRACE -o FILE).")
@click.option("--preset", default=None, type=click.Choice(sorted(PRESETS)),
              help="Built-in setting whose timings are the defaults (default: trace-400 with --trace, "
                   "paper-600k without).")
@click.option("--groups", "-N", type=IntegerRange(min=1), default=None,
              help="DP groups N, one node of the trace per group (default: the trace file's cluster size, "
                   "else the larger of the preset's first N and the nodes the trace names).")
@click.option("--restart-minutes", type=FloatRange(min=0), default=None, metavar="MIN",
              help="Global restart time T_r (default: the preset's, 60 min).")
@click.option("--ckpt-save-seconds", type=FloatRange(min=0, min_open=True), default=None, metavar="SEC",
              help="Checkpoint save time T_s (default: the preset's, 60 s).")
@click.option("--step-seconds", type=FloatRange(min=0, min_open=True), default=None, metavar="SEC",
              help="Compute of one fault-free step, one stack layer (default: the preset's, 64 s); the "
                   "all-reduce is added (--set allreduce_seconds=...).")
@click.option("--time-scale", type=FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              metavar="X", help="With --trace: multiply trace times by X; X < 1 compresses the trace "
                                "(0.1: ten times the failure rate).")
@click.option("--steps", type=IntegerRange(min=1), default=None,
              help="Training steps (default with --trace: one trace span of fault-free steps, T0 = the span).")
@click.option("--semantics", type=click.Choice(SEMANTICS), default="repair", show_default=True,
              help="repair: repaired groups rejoin; paper: failed groups stay out until a global restart.")
@click.option("--rep-r", "rep_redundancies", callback=_integer_list, default=_shown(DEFAULT_COMPARE_REP),
              show_default=True, metavar="R,R", help="Replication degrees (empty list: none).")
@click.option("--spare-r", "spare_redundancies", callback=_integer_list, default=_shown(DEFAULT_COMPARE_SPARE),
              show_default=True, metavar="R,R", help="SPARe redundancies of the grid.")
@click.option("--micro-batches", "micro_batches", callback=_integer_list,
              default=_shown(DEFAULT_COMPARE_MICRO_BATCHES), show_default=True, metavar="M,M",
              help="SPARe micro-batches per shard type of the grid (1: the paper's whole shards).")
@click.option("--seeds", type=IntegerRange(min=1), default=3, show_default=True,
              help="Seeds per setting: placements of the traced nodes on the groups, and the jitter.")
@click.option("--cycles", type=IntegerRange(min=1, max=MAX_CYCLES), default=DEFAULT_CYCLES, show_default=True,
              help="Copies of the trace end to end (with --trace); a run not finished within cycles x T0 is "
                   "unfinished (TTT/T0 > cycles).")
@click.option("--set", "settings", multiple=True, metavar="FIELD=VALUE",
              help="Change another simulation parameter, e.g. --set jitter_sd=0 (repeatable).")
@workers_option
@scheduler_option
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None, metavar="FILE.png",
              help="Write the figure: TTT/T0 of every setting tried (needs matplotlib).")
@json_option
@force_option
@quiet_option
@click.pass_context
def command(ctx, trace_path, trace_format, time_unit, model_path, preset, groups, restart_minutes, ckpt_save_seconds,
            step_seconds, time_scale, steps, semantics, rep_redundancies, spare_redundancies, micro_batches, seeds,
            cycles, settings, workers, scheduler, plot_path, as_json, force, quiet):
    """The verdict: checkpointing alone, replication and SPARe on the same failures.

    Runs checkpointing alone, replication with r in --rep-r and SPARe over the grid
    --spare-r x --micro-batches on the failures of --trace (replayed --cycles times end
    to end, so every strategy meets the trace's failure rate for its whole run), of
    --failure-model, or of --preset (Weibull, paper semantics only), each setting with its own tuned checkpoint period (the Young/Daly T_c* of
    its measured wipe-out rate, times 0.5 .. 2), over --seeds placements of the traced
    nodes on the groups.  Prints one row per strategy at its best setting: TTT/T0 with
    a 95% interval, availability, restarts, mean step cost, the setting and its
    checkpoint period.  --json prints the rows as "strategies" (keys strategy,
    redundancy, micro_batches, ttt_ratio, ttt_ci, availability, restarts,
    mean_step_cost...) and every setting tried as "settings".  See docs/repair.md.
    """
    if trace_path is None:
        for name, option in (("trace_format", "--format"), ("time_unit", "--time-unit"),
                             ("time_scale", "--time-scale")):
            if given(ctx, name):
                refuse_unused(option, "needs --trace")
    elif model_path is not None:
        refuse_unused("--failure-model", "and --trace are two sources of failures: give one")
    if plot_path is not None:
        check_output_path(plot_path, force)
        require_matplotlib()  # before the long work, not after it
    overrides = parse_overrides(settings)
    for field, option in _OWN_OPTIONS.items():
        if field in overrides:
            raise click.UsageError(f"use {option} instead of --set {field}")
    if not spare_redundancies and given(ctx, "micro_batches"):
        refuse_unused("--micro-batches", "needs SPARe settings (--spare-r is empty)")
    trace = None
    if trace_path is not None:
        from spare_opt.traces.json_format import read_fault_trace

        trace = read_fault_trace(trace_path, format=trace_format, time_unit=time_unit)
    fault_model = None
    if model_path is not None:
        from spare_opt.traces.failure_model import FailureModel

        fault_model = FailureModel.load(model_path)
    if preset is None:
        preset = "trace-400" if trace is not None or fault_model is not None else "paper-600k"
    params = compare_parameters(
        preset, groups, trace=trace, restart_seconds=None if restart_minutes is None else restart_minutes * 60.0,
        save_seconds=ckpt_save_seconds, step_seconds=step_seconds, time_scale=time_scale, steps=steps, **overrides)
    with executor_for(scheduler, workers) as executor, progress_bar(quiet, "comparing") as progress:
        result = compare(params, trace=trace, fault_model=fault_model, semantics=semantics, rep_redundancies=rep_redundancies,
                         spare_redundancies=spare_redundancies, micro_batches=micro_batches, seeds=seeds,
                         cycles=cycles, workers=workers, executor=executor, progress=progress)
    written = None
    if plot_path is not None:
        written = plot_compare(result, plot_path, force=force)
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(result.format_text())
        click.echo(f"Elapsed: {result.elapsed_seconds:.1f} s")
    if written is not None:
        click.echo(f"figure written to {written}", err=as_json)

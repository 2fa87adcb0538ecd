"""`spare-opt simulate`: time-to-train of one strategy, r and checkpoint period over several seeds."""


import warnings

import click
import numpy as np

from spare_opt.simulation.events import SEMANTICS
from spare_opt.simulation.parameters import PRESETS, STRATEGIES, parse_overrides, preset_parameters
from spare_opt.simulation.time_to_train import default_redundancy, simulate_seeds, summarise

from spare_opt._core.durations import duration_in
from spare_opt._core.stats import finite_or_none

from .options import (
    allreduce_option,
    global_batch_option,
    micro_batch_overhead_option,
    window_option,
    FloatRange,
    IntegerRange,
    cluster_failure_sources,
    cluster_option,
    cluster_overrides,
    deprecated_alias,
    echo_json,
    executor_for,
    given,
    json_option,
    layout_micro_batches,
    progress_bar,
    quiet_option,
    refuse_inputs,
    input_spelling,
    named_as_given,
    refuse_overflowing_time,
    refuse_unused,
    scheduler_option,
    time_unit_option,
    trace_format_option,
    warn_ignored,
    workers_option,
    warn_unused_trace_keys,
)

__all__ = ["command"]

#: Simulation parameters that a fault trace replaces (the trace gives the failures).
TRACE_REPLACES = ("system_mtbf_seconds", "weibull_shape", "failure_model", "rate_follows_live", "restart_failures")
#: Simulation fields that have an option of their own here: a message about the field names the option.
_OWN_OPTIONS = {"layer_compute_seconds": "--step-seconds", "allreduce_seconds": "--allreduce-seconds",
                "restart_seconds": "--restart-seconds", "save_seconds": "--save-seconds",
                "heal_seconds": "--heal-seconds"}
#: Simulation parameters of SPARe's masking only.
SPARE_ONLY = ("controller_seconds", "patch_layers")


@click.command("simulate")
@click.option("--preset", default="paper-600k", show_default=True, type=click.Choice(sorted(PRESETS)),
              help="Built-in setting (timings, MTBF, Weibull shape, steps).")
@click.option("--groups", "-N", type=IntegerRange(min=1), default=None,
              help="Number of DP groups N, any (default: the --layout's N, else the preset's first); the preset's system MTBF "
                   "is kept, a --failure-model is scaled per node.")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="spare", show_default=True,
              help="ckpt: checkpointing alone; rep: replication of degree r; spare: SPARe with a Sidon layout; "
                   "elastic: TorchFT's rule, live replicas go on with a smaller batch (--trace or --failure-model).")
@click.option("--redundancy", "-r", type=IntegerRange(min=1), default=None,
              help="Redundancy r (default: the --layout's r, else r* = floor(log2 N + 0.833) for spare, at least "
                   "2, and 3 for rep, both at most N; not for ckpt).")
@click.option("--checkpoint-period-seconds", type=FloatRange(min=0, min_open=True), default=None, metavar="SEC",
              help="Seconds of progress between checkpoints (default: the Young/Daly T_c*).")
@click.option("--seeds", type=IntegerRange(min=1), default=10, show_default=True, help="Runs (seeds 0..K-1).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Replay this fault trace (InfiniteHBD or spare-failure-trace JSON, or a CSV fault log) "
                   "instead of Weibull failures.")
@trace_format_option
@time_unit_option
@window_option
@click.option("--time-scale", type=FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="With --trace: multiply trace times by this factor (< 1 compresses the trace).")
@click.option("--placement-seed", type=IntegerRange(min=0), default=None, metavar="SEED",
              help="With --trace: place nodes on random distinct groups with this seed (default: 0).")
@click.option("--first-fault-order", is_flag=True,
              help="With --trace: the paper's placement, node i in order of first effective fault on group i "
                   "(it puts nodes that fail one after another on neighbouring groups).")
@click.option("--placement", "placement_path", default=None, metavar="FILE",
              help="With --trace: place nodes as this spare-placement file says (docs/formats.md); domain entries "
                   "use its embedded topology, else the layout's.")
@click.option("--layout", "layout_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="SPARe layout file (--strategy spare; default: a Sidon layout for N and r).")
@click.option("--micro-batches", "micro_batches", type=IntegerRange(min=1), default=None,
              show_default="the --layout file's metadata.micro_batches, else 1",
              metavar="M", help="SPARe: micro-batches per shard type; a step computes L*/M layers of work "
                                "(docs/fractional.md).  1 is the paper's model.  An M other than the --layout "
                                "file's recommended m is used, with a warning.")
@global_batch_option
@micro_batch_overhead_option
@allreduce_option
@click.option("--semantics", type=click.Choice(SEMANTICS), default="paper", show_default=True,
              help="paper: a failed group stays out until a global restart; repair: it is back after its "
                   "node's fault_end and a heal (needs --trace or --failure-model, which give the repairs).")
@click.option("--heal-seconds", type=FloatRange(min=0), default=None, metavar="SEC",
              help="With --semantics repair: seconds a repaired group heals (loads state from a live peer) "
                   "before it rejoins (default: 60, the heal_seconds parameter).")
@click.option("--restart-seconds", type=FloatRange(min=0), default=None, metavar="SEC",
              help="Global restart time T_r (default: the preset's).")
@click.option("--save-seconds", type=FloatRange(min=0, min_open=True), default=None, metavar="SEC",
              help="Checkpoint save time T_s (default: the preset's).")
@click.option("--step-seconds", type=FloatRange(min=0, min_open=True), default=None, metavar="SEC",
              help="Compute of one fault-free step, one stack layer (default: the preset's).")
@click.option("--failure-model", "fault_model_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Draw failures and repairs from this failure-model file (spare-opt fit TRACE -o FILE) instead "
                   "of the preset's Weibull clocks (--set failure_model chooses between those); not with --trace.")
@click.option("--set", "settings", multiple=True, metavar="FIELD=VALUE",
              help="Change a simulation parameter, e.g. --set steps=20000 (repeatable, once per field).")
@workers_option
@scheduler_option
@cluster_option
@json_option
@quiet_option
@click.pass_context
@deprecated_alias("--ckpt-period", "--checkpoint-period-seconds", "checkpoint_period_seconds",
                  type=FloatRange(min=0, min_open=True))
@deprecated_alias("--trace-time-scale", "--time-scale", "time_scale", type=FloatRange(min=0, min_open=True))
def command(ctx, preset, groups, strategy, redundancy, checkpoint_period_seconds, seeds, trace_path, trace_format,
            time_unit, window, time_scale, placement_seed, first_fault_order, placement_path, layout_path,
            micro_batches, global_batch, micro_batch_overhead_seconds, allreduce_seconds, semantics,
            heal_seconds, restart_seconds, save_seconds, step_seconds, fault_model_path, settings, workers,
            scheduler, as_json, quiet):
    """Simulate training runs and report the time-to-train.

    Discrete-event simulation of the preset's training run under failures: checkpointing
    alone, replication of degree r, or SPARe with the online reorder controller
    (docs/reproduction.md).  Prints the mean and 95% confidence interval over the
    seeds of TTT/T0 (T0: the fault-free time), availability, restarts, masked
    failures, mean stack number S and mean step cost (layers of compute per executed
    step: S at --micro-batches 1, L*/M with micro-batches), rework and checkpoint time.
    --semantics repair brings repaired groups back (docs/fractional.md, "Repairs").

    Options that would do nothing are refused: the trace options (--format,
    --time-unit, --time-scale, --placement-seed, --placement) without --trace, --layout and
    --redundancy with a strategy that does not use them, and --set of a field the
    run does not use (trace_time_scale without a trace; the failure model's fields
    with a trace, which gives the failures; controller_seconds and patch_layers
    without SPARe).  --workers with a --scheduler address only warns.
    """
    from spare_opt.layouts.layout import Layout

    overrides = parse_overrides(settings)
    trace_path, fault_model_path, trace_format, time_unit, time_scale, window = cluster_failure_sources(
        ctx, trace_path=trace_path, fault_model_path=fault_model_path, trace_format=trace_format,
        time_unit=time_unit, time_scale=time_scale, window=window)
    _refuse_unused_options(ctx, strategy, trace_path, overrides)
    warn_unused_trace_keys(ctx, trace_path, trace_format=trace_format, time_unit=time_unit, time_scale=time_scale)
    if window is not None and trace_path is None:
        refuse_inputs(ctx, "{} cuts a trace: it needs {}", "--window", "--trace")
    _refuse_unused_repair_options(ctx, strategy, semantics, trace_path, fault_model_path, overrides)
    overrides = cluster_overrides(ctx, overrides)
    if semantics != "repair" and not given(ctx, "heal_seconds"):
        overrides.pop("heal_seconds", None)  # a cluster file's heal time: not used without repairs
        heal_seconds = None
    layout = Layout.load(layout_path) if layout_path is not None else None
    micro_batches = layout_micro_batches(layout, micro_batches)
    if groups is None:
        groups = layout.groups if layout is not None else PRESETS[preset].groups[0]
    if trace_path is not None:
        overrides["trace_time_scale"] = time_scale
    for field, value, option in (("heal_seconds", heal_seconds, "--heal-seconds"),
                                 ("restart_seconds", restart_seconds, "--restart-seconds"),
                                 ("save_seconds", save_seconds, "--save-seconds"),
                                 ("layer_compute_seconds", step_seconds, "--step-seconds"),
                                 ("allreduce_seconds", allreduce_seconds, "--allreduce-seconds")):
        if value is not None:
            if field in parse_overrides(settings):
                if input_spelling(ctx, option)[1] is not None:
                    continue  # the cluster file's value: a --set on the command line wins over the file
                refuse_unused(f"--set {field}", f"and {option} give the same setting; use {option}")
            overrides[field] = value
    # The all-reduce the runs use, as the parameters printed say: the option's, a --set's or the file's.
    allreduce_seconds = overrides.get("allreduce_seconds")
    set_here = parse_overrides(settings)
    refuse_overflowing_time(ctx, preset, steps=overrides.get("steps"), step_seconds=None
                            if "layer_compute_seconds" in set_here else step_seconds,
                            allreduce_seconds=allreduce_seconds, wall_factor=overrides.get("max_wall_factor"),
                            steps_option="--set steps", allreduce_options=("--set allreduce_seconds",)
                            if "allreduce_seconds" in set_here else ("--allreduce-seconds",))
    fault_model = None
    if fault_model_path is not None:
        from spare_opt.traces.failure_model import FailureModel

        fault_model = FailureModel.load(fault_model_path)
    params = preset_parameters(preset, groups, **overrides)
    if redundancy is None:
        redundancy = layout.redundancy if layout is not None else default_redundancy(strategy, groups)
    trace = None
    if trace_path is not None:
        from spare_opt.traces.json_format import read_fault_trace

        trace = read_fault_trace(trace_path, format=trace_format, time_unit=time_unit)
        from spare_opt.simulation.verdict import trace_cluster_size

        traced = trace_cluster_size(trace, preset)
        if traced != groups:
            # Say when the size is not the file's own but the verdict's assumption.
            size = (f"{traced} nodes" if trace.cluster_nodes else
                    f"taken as {traced} nodes: the file gives no cluster size and names {trace.n_nodes} nodes")
            click.echo(f"Warning: the trace's cluster ({size}) is replayed on N = {groups} groups at its own "
                       "failure rate, not scaled per node; to scale it, fit it (spare-opt fit TRACE -o model.json) "
                       "and pass --failure-model", err=True)
    placement = None
    if first_fault_order and (placement_path is not None or placement_seed is not None):
        refuse_unused("--first-fault-order", "and --placement / --placement-seed are two placements: give one")
    if trace is not None and placement_path is None and placement_seed is None and not first_fault_order:
        placement_seed = 0  # a random placement: the first-fault order invents wipe-outs (docs/repair.md)
    if placement_path is not None:
        if placement_seed is not None:
            refuse_unused("--placement", "and --placement-seed are two placements: give one")
        from spare_opt.traces.placement import Placement

        placement = Placement.load(placement_path).prepared(layout=layout)
    with executor_for(scheduler, workers) as executor, progress_bar(quiet, "simulating") as progress, \
            warnings.catch_warnings(record=True) as caught, named_as_given(ctx, _OWN_OPTIONS, keep=set_here):
        warnings.simplefilter("always", UserWarning)
        runs = simulate_seeds(params, strategy, redundancy, seeds=seeds, checkpoint_period_seconds=checkpoint_period_seconds,
                              layout=layout, trace=trace, placement_seed=placement_seed, placement=placement,
                              micro_batches=micro_batches, semantics=semantics, fault_model=fault_model,
                              workers=workers, executor=executor, progress=progress, global_batch=global_batch,
                              micro_batch_overhead_seconds=micro_batch_overhead_seconds,
                              allreduce_seconds=allreduce_seconds, window=window)
    for warning in caught:  # the library's warnings (an extrapolated all-reduce time...) as one line each
        click.echo(f"Warning: {warning.message}", err=True)
    summary = summarise(runs)
    if as_json:
        echo_json({
            "preset": preset,
            "strategy": strategy,
            "groups": groups,
            "redundancy": runs[0].redundancy,
            "micro_batches": micro_batches,
            "semantics": semantics,
            "mean_step_cost": summary["mean_step_cost"]["mean"],
            "checkpoint_period_seconds": runs[0].checkpoint_period_seconds,
            "fault_free_seconds": runs[0].fault_free_seconds,
            "summary": finite_or_none(summary),
            "trace": runs[0].trace,
            "parameters": params.to_dict(),
            "runs": [run.to_dict() for run in runs],
        })
        return
    click.echo(_format(preset, strategy, groups, runs, summary, params.max_wall_factor))


def _refuse_unused_options(ctx, strategy, trace_path, overrides):
    """Options that would do nothing: errors for the experiment's options, a warning for --workers.

    An option that describes *what* is simulated (the trace's time scale, the
    placement, the layout, a simulation parameter) and would be ignored is a usage
    error: the numbers printed would be taken for a run with that setting.  An option
    that only says *how* the runs are executed (--workers beside a Dask scheduler
    address) changes no number: a warning on stderr says it is ignored.
    """
    if trace_path is None:
        for name, option in (("trace_format", "--format"), ("time_unit", "--time-unit"),
                             ("time_scale", "--time-scale"), ("placement_seed", "--placement-seed"),
                             ("first_fault_order", "--first-fault-order"), ("placement_path", "--placement")):
            if given(ctx, name):
                refuse_unused(option, "applies to --trace runs only (without a trace it would do nothing)")
        if "trace_time_scale" in overrides:
            refuse_unused("--set trace_time_scale", "applies to --trace runs only (without a trace it would do "
                                                     "nothing)")
    else:
        if "trace_time_scale" in overrides:
            refuse_unused("--set trace_time_scale", "and --time-scale give the same setting; use "
                                                     "--time-scale")
        replaced = [name for name in TRACE_REPLACES if name in overrides]
        if replaced:
            refuse_unused(f"--set {replaced[0]}", "does nothing with --trace: the trace gives the failure times "
                                                  "(and failures during a restart always carry)")
    if strategy != "spare":
        if given(ctx, "layout_path"):
            refuse_unused("--layout", f"is a SPARe layout; --strategy {strategy} does not use one")
        unused = [name for name in SPARE_ONLY if name in overrides]
        if unused:
            refuse_unused(f"--set {unused[0]}", f"is a cost of SPARe's masking; --strategy {strategy} does not "
                                                "use it")
    if strategy in ("ckpt", "elastic") and given(ctx, "redundancy"):
        refuse_unused("--redundancy", f"does nothing with --strategy {strategy} (it has r = 1)")
    if given(ctx, "workers") and ctx.params.get("scheduler") not in (None, "local"):
        warn_ignored("--workers", "the Dask scheduler's workers run the seeds (--workers sizes only "
                                  "--scheduler local)")


def _refuse_unused_repair_options(ctx, strategy, semantics, trace_path, fault_model_path, overrides):
    """The options of micro-batches, semantics and fault models that would do nothing: usage errors."""
    if given(ctx, "micro_batches") and strategy != "spare":
        refuse_unused("--micro-batches", f"splits SPARe's shard types; --strategy {strategy} does not use it")
    if semantics != "repair":
        if given(ctx, "heal_seconds") or "heal_seconds" in overrides:
            refuse_unused("--heal-seconds", "applies to --semantics repair only (paper semantics has no rejoin)")
    elif trace_path is None and fault_model_path is None:
        refuse_unused("--semantics repair", "needs the repair times of a --trace or a --failure-model")
    if fault_model_path is not None:
        if trace_path is not None:
            refuse_unused("--failure-model", "and --trace are two sources of failures: give one")
        replaced = [name for name in TRACE_REPLACES if name in overrides]
        if replaced:
            refuse_unused(f"--set {replaced[0]}", "does nothing with --failure-model: the model gives the failure "
                                                  "times")


#: Simulation fields that have an option of their own here: a message about the field names the option.
_OWN_OPTIONS = {"layer_compute_seconds": "--step-seconds", "allreduce_seconds": "--allreduce-seconds",
                "restart_seconds": "--restart-seconds", "save_seconds": "--save-seconds",
                "heal_seconds": "--heal-seconds"}


def _format(preset, strategy, groups, runs, summary, max_wall_factor):
    first = runs[0]
    name = {"ckpt": "CKPT only", "rep": f"Rep+CKPT r={first.redundancy}",
            "spare": f"SPARe+CKPT r={first.redundancy}", "elastic": "Elastic+CKPT"}[strategy]
    period = first.checkpoint_period_seconds
    lines = [
        f"{name}, N={groups}, preset {preset}, T_c={period:.0f} s, " if period < 1e15 else
        f"{name}, N={groups}, preset {preset}, T_c={period:.3g} s, ",
        f"T0 (fault-free) = {duration_in(first.fault_free_seconds, 86400, 'days', '.2f')}",
    ]
    lines[0] += f"{summary['runs']} seeds"
    if first.micro_batches > 1 or first.semantics != "paper":
        lines[0] += f", m = {first.micro_batches} micro-batches per shard type, {first.semantics} semantics"
    if summary["unfinished"]:
        # The cap, not wall / T0: a restart under way when the cap passes overshoots it.
        lines.append(f"{summary['unfinished']} of {summary['runs']} runs did not finish within the wall-time cap "
                     f"(TTT/T0 > {max_wall_factor:g})")

    def row(label, key, fmt):
        stat = summary[key]
        low, high = stat["ci95"]
        if not np.isfinite(stat["mean"]):  # unfinished runs: an infinite time-to-train
            return f"  {label:<22}{'unfinished':>6}   ({stat['ci_note']})"
        if stat["ci_note"] is not None:  # one seed, unfinished runs, too few seeds for the bounds
            return f"  {label:<22}{fmt.format(stat['mean'])}   ({stat['ci_note']})"
        how = " bootstrap" if stat["ci_method"] == "bootstrap" else ""
        return f"  {label:<22}{fmt.format(stat['mean'])}   (95% CI{how} {fmt.format(low)} .. {fmt.format(high)})"

    lines += [
        row("TTT/T0", "ttt_ratio", "{:.3f}"),
        row("availability", "availability", "{:.2%}"),
        row("restarts", "restarts", "{:.1f}"),
        row("masked failures", "masked_failures", "{:.1f}"),
        row("mean stack number S", "mean_stack_number", "{:.3f}") + (
            "  shard types a group computes part of" if first.micro_batches > 1 else ""),
        row("mean step cost", "mean_step_cost", "{:.3f}") + "  per executed step, in layers",
        f"  {'rework':<22}{duration_in(summary['rework_seconds']['mean'], 3600, 'h', '.1f')}",
        f"  {'checkpoint time':<22}{duration_in(summary['checkpoint_seconds']['mean'], 3600, 'h', '.1f')}",
    ]
    if first.semantics == "repair":
        lines.insert(-2, row("rejoins", "rejoins", "{:.1f}"))
    if first.trace is not None and "outside_cluster" not in first.trace:  # a fault model's events
        t = first.trace
        lines.append(f"fault model (fitted to {t['source']}), seed 0 only: {t['used']} group failures in "
                     f"{t['failure_events']} failure events drawn; {t['beyond_run']} events (failures and repairs) fell "
                     "after the run's end (drawn, unused); 'masked failures' above counts failure events (a "
                     "multi-group event once), mean over the seeds")
    elif first.trace is not None:
        t = first.trace
        lines.append(
            f"trace {t['source']} (nodes placed by {t['placement']}): {t['fault_starts']} fault starts, {t['used']} group failures applied in "
            f"{t['failure_events']} events; skipped: {t['ignored_by_reader']} irregular, {t['already_down']} "
            f"already down, {t['outside_cluster']} nodes beyond N; {t['beyond_run']} events after the run ended"
        )
    if first.semantics == "repair" and first.trace is not None:
        t = first.trace
        lines.append(f"repairs: {t['rejoined']} groups rejoined in {t['rejoin_events']} events, "
                     f"{t['ends_after_restart']} fault ends after a restart ignored, {t['heals_cut_by_restart']} "
                     f"heals cut by a restart, {t['failed_while_healing']} failures while healing")
    return "\n".join(lines)

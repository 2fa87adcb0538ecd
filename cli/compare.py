"""`spare-opt compare`: the operator's verdict, checkpointing alone, replication and SPARe on the same failures."""

import math
import sys

import click

from spare_opt._core import validation as check
from spare_opt._core.plotting import require_matplotlib
from spare_opt._core.errors import SpareError
from spare_opt.simulation.parameters import PRESETS, parse_overrides
from spare_opt.simulation.events import SEMANTICS
from spare_opt.simulation.recommend import write_recommendation
from spare_opt.simulation.verdict import (
    DEFAULT_COMPARE_MICRO_BATCHES,
    DEFAULT_COMPARE_REP,
    DEFAULT_COMPARE_SPARE,
    DEFAULT_CYCLES,
    MAX_CYCLES,
    QUICK_COMPARE,
    STRATEGY_LABELS,
    compare,
    compare_parameters,
    plot_compare,
    trace_cluster_size,
)

from .options import (
    FloatRange,
    allreduce_option,
    global_batch_option,
    micro_batch_overhead_option,
    IntegerRange,
    check_output_path,
    cluster_failure_sources,
    cluster_option,
    cluster_overrides,
    deprecated_alias,
    echo_json,
    executor_for,
    force_option,
    given,
    json_option,
    progress_bar,
    quiet_option,
    input_spelling,
    in_input_terms,
    refuse_inputs,
    refuse_overflowing_time,
    refuse_unused,
    scheduler_option,
    time_unit_option,
    trace_format_option,
    window_option,
    workers_option,
    warn_unused_trace_keys,
)

__all__ = ["command"]


#: Simulation fields that have their own option here (or that compare sets itself).
_OWN_OPTIONS = {
    "steps": "--steps",
    "restart_seconds": "--restart-seconds",
    "save_seconds": "--save-seconds",
    "heal_seconds": "--heal-seconds",
    "layer_compute_seconds": "--step-seconds",
    "trace_time_scale": "--time-scale",
    "max_wall_factor": "--cycles",
    "allreduce_seconds": "--allreduce-seconds",
}


def _in_input_terms(ctx, message):
    """``message`` with the simulation fields of :data:`_OWN_OPTIONS` named as the user gave them
    (:func:`~spare_opt_cli.options.in_input_terms`)."""
    return in_input_terms(ctx, message, _OWN_OPTIONS)


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
@window_option
@click.option("--failure-model", "model_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Without --trace: draw failures and repairs from this fitted model (spare-opt fit TRACE -o FILE).")
@click.option("--preset", default=None, type=click.Choice(sorted(PRESETS)),
              help="Built-in setting whose timings are the defaults (default: trace-400 with --trace, "
                   "paper-600k without).")
@click.option("--groups", "-N", type=IntegerRange(min=1), default=None,
              help="DP groups N (default: the trace's cluster size: the file's, else the larger of the preset's "
                   "first N and the nodes the trace names).  At another N a --trace is fitted and scaled per "
                   "node (each group fails like one traced node); the header says so.")
@click.option("--nodes", type=IntegerRange(min=1), default=None, metavar="N",
              help="With --trace: the size of the cluster it was recorded on, at least the nodes it names "
                   "(default: the file's, else the larger of the preset's first N and the nodes the trace "
                   "names).  A CSV fault log lists only the nodes that failed: give the cluster's size here.")
@click.option("--restart-seconds", type=FloatRange(min=0), default=None, metavar="SEC",
              help="Global restart time T_r (default: the preset's, 3600 s).")
@click.option("--save-seconds", type=FloatRange(min=0, min_open=True), default=None, metavar="SEC",
              help="Checkpoint save time T_s (default: the preset's, 60 s).")
@click.option("--heal-seconds", type=FloatRange(min=0), default=None, metavar="SEC",
              help="Seconds a repaired group heals (loads state from a live peer) before it rejoins "
                   "(default: 60).")
@click.option("--step-seconds", type=FloatRange(min=0, min_open=True), default=None, metavar="SEC",
              help="Compute of one fault-free step, one stack layer (default: the preset's, 64 s); the "
                   "all-reduce is added (--allreduce-seconds).")
@click.option("--time-scale", type=FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              metavar="X", help="With --trace: multiply trace times by X; X < 1 compresses the trace "
                                "(0.1: ten times the failure rate).")
@click.option("--steps", type=IntegerRange(min=1), default=None,
              help="Training steps (default with --trace: one trace span of fault-free steps, T0 = the span).")
@click.option("--semantics", type=click.Choice(SEMANTICS), default=None,
              help="repair: repaired groups rejoin; paper: failed groups stay out until a global restart "
                   "(default: repair with --trace or --failure-model, which give the repair times; paper without).")
@click.option("--rep-r", "rep_redundancies", callback=_integer_list, default=_shown(DEFAULT_COMPARE_REP),
              show_default=True, metavar="R,R", help="Replication degrees (empty list: none).")
@click.option("--spare-r", "spare_redundancies", callback=_integer_list, default=_shown(DEFAULT_COMPARE_SPARE),
              show_default=True, metavar="R,R", help="SPARe redundancies of the grid.")
@click.option("--micro-batches", "micro_batches", callback=_integer_list, default=None, metavar="M,M",
              help="SPARe micro-batches per shard type of the grid (1: the paper's whole shards).  Default: with "
                   "--global-batch, the largest m it allows, floor(B / N), and the powers of two below it; without, "
                   f"{_shown(DEFAULT_COMPARE_MICRO_BATCHES)}.  A list given gets 1 and floor(B / N) added; the notes "
                   "say which m were tried and why.")
@global_batch_option
@micro_batch_overhead_option
@allreduce_option
@click.option("--gradient-bytes", "gradient_bytes", type=FloatRange(min=0, min_open=True), default=None,
              metavar="BYTES", help="Gradient bytes each group all-reduces per step: with "
                                    "--bandwidth-bytes-per-second, the all-reduce is the ring model "
                                    "2 (N-1)/N x BYTES / BANDWIDTH + --allreduce-latency-seconds.")
@click.option("--bandwidth-bytes-per-second", "bandwidth_bytes_per_second", type=FloatRange(min=0, min_open=True),
              default=None, metavar="B/S", help="Bus bandwidth of one ring link, bytes per second (with "
                                                "--gradient-bytes).")
@click.option("--allreduce-latency-seconds", "allreduce_latency_seconds", type=FloatRange(min=0), default=None,
              metavar="SEC", help="Fixed latency of the ring model's all-reduce (default: 0).")
@click.option("--nodes-per-group", "nodes_per_group", type=IntegerRange(min=1), default=None, metavar="G",
              help="Nodes of one DP group (default: 1): a group fails when any of its nodes fails, its repair ends "
                   "when that node's does; a --trace is then fitted and scaled.")
@click.option("--failures-per-1000-node-days", "failures_per_1000_node_days",
              type=FloatRange(min=0, min_open=True), default=None, metavar="RATE",
              help="Failures as a rate: failures per 1,000 node-days (Meta's RSC-1: 6.50), instead of --trace or "
                   "--failure-model (docs/cluster.md).")
@click.option("--node-mtbf-hours", "node_mtbf_hours", type=FloatRange(min=0, min_open=True), default=None,
              metavar="H", help="Failures as a rate: one node's MTBF, hours.")
@click.option("--job-mttf-hours", "job_mttf_hours", type=FloatRange(min=0, min_open=True), default=None,
              metavar="H", help="Failures as a rate: a job's mean time to failure, hours, on --job-nodes nodes.")
@click.option("--job-nodes", "job_nodes", type=IntegerRange(min=1), default=None, metavar="NODES",
              help="The nodes of the job whose MTTF --job-mttf-hours gives.")
@click.option("--repair-hours", "repair_hours", type=FloatRange(min=0, min_open=True), default=None, metavar="H",
              help="With a failure rate: the median repair time, hours (repair semantics; without it, paper "
                   "semantics).  The rate's Weibull shape is --set weibull_shape=K (default 1, exponential).")
@click.option("--no-elastic", "no_elastic", is_flag=True, default=False,
              help="Leave out the elastic strategy (TorchFT / FT-HSDP: live replicas go on with a smaller batch).")
@click.option("--no-redistribution", "no_redistribution", is_flag=True, default=False,
              help="Leave out redistribution (SPARe r = N: every survivor may take any micro-batch).")
@click.option("--no-sensitivity", "no_sensitivity", is_flag=True, default=False,
              help="Skip the runs at half and double the all-reduce time (the sensitivity line).")
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
@click.option("--quick", is_flag=True,
              help="A first look: a small grid (--rep-r 2, --spare-r 3,5, the m of --global-batch or else "
                   "--micro-batches 1,16), 2 seeds and 3 checkpoint periods; options given explicitly still win.")
@click.option("--output", "-o", "output_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write the recommendation: a layout file of SPARe's chosen setting (plan and validate read "
                   "it) whose metadata holds m, the checkpoint period, the chosen strategy, the inputs assumed, "
                   "the verdict table and the layout's fingerprint.")
@click.option("--verbose", is_flag=True, help="A line on stderr as each setting finishes.")
@cluster_option
@json_option
@force_option
@quiet_option
@click.pass_context
@deprecated_alias("--restart-minutes", "--restart-seconds", "restart_seconds", type=FloatRange(min=0),
                  convert=lambda minutes: minutes * 60.0)
@deprecated_alias("--ckpt-save-seconds", "--save-seconds", "save_seconds", type=FloatRange(min=0, min_open=True))
def command(ctx, trace_path, trace_format, time_unit, window, model_path, preset, groups, nodes, restart_seconds, save_seconds,
            heal_seconds, step_seconds, time_scale, steps, semantics, rep_redundancies, spare_redundancies, micro_batches,
            global_batch, micro_batch_overhead_seconds, allreduce_seconds, gradient_bytes, bandwidth_bytes_per_second,
            allreduce_latency_seconds, nodes_per_group, failures_per_1000_node_days, node_mtbf_hours, job_mttf_hours,
            job_nodes, repair_hours, no_elastic, no_redistribution, no_sensitivity, seeds,
            cycles, settings, workers, scheduler, plot_path, quick, output_path, verbose, as_json, force, quiet):
    """The verdict: checkpointing alone, replication, SPARe, redistribution and elastic on the same failures.

    Runs checkpointing alone, replication with r in --rep-r, SPARe over the grid
    --spare-r x --micro-batches (m = 1 always; with --global-batch, the largest m it
    allows and the powers of two below it), redistribution (SPARe with every survivor
    allowed to take any micro-batch, r = N) and the elastic rule of TorchFT (these two
    with a trace, a failure model or a failure rate) on the failures of --trace
    (replayed --cycles times end to end), of --failure-model, of a rate
    (--failures-per-1000-node-days, --node-mtbf-hours, --job-mttf-hours with
    --job-nodes), or of --preset (Weibull, paper semantics only), each setting with its
    own tuned checkpoint period (the Young/Daly T_c* of its measured wipe-out rate,
    times 0.5 .. 2), over --seeds placements of the traced nodes on the groups.

    Prints one row per strategy at its best setting (and SPARe's m = 1 beside its
    best): TTT/T0 with a 95% interval and its parts, which add up to it (steps at their
    step cost, patch compute, work lost, restarts, saves), restarts, the step cost, the
    checkpoint period and the price (step cost; more steps for the same samples for
    elastic; restarts for checkpointing), the input each group reads per step (r shard
    types against all N), every (r, m) tried and the verdict line: the best exact
    strategy (the fault-free gradient) and the best overall, then whether the verdict
    changes at half and double the all-reduce time.  The header says where the
    all-reduce came from: --allreduce-seconds, the ring model (--gradient-bytes,
    --bandwidth-bytes-per-second), or the paper's line, which is not extrapolated past
    N = 1000.  A strategy's best setting is the smallest r (then m) whose mean lies in
    the 95% interval of the least TTT/T0.  At an N other than the trace's cluster size,
    or with --nodes-per-group, the trace is fitted and scaled per node (the header says
    so).  -o FILE writes the recommendation, a layout file of the best exact SPARe
    setting whose metadata names the strategy chosen and everything the run used
    (docs/cluster.md).  --json prints the rows as "strategies" and every setting tried
    as "settings".  See docs/repair.md.
    """
    (trace_path, model_path, trace_format, time_unit, time_scale, window, nodes, failures_per_1000_node_days,
     node_mtbf_hours, job_mttf_hours, job_nodes, repair_hours) = cluster_failure_sources(
        ctx, trace_path=trace_path, model_path=model_path, trace_format=trace_format, time_unit=time_unit,
        time_scale=time_scale, window=window, nodes=nodes, failures_per_1000_node_days=failures_per_1000_node_days,
        node_mtbf_hours=node_mtbf_hours, job_mttf_hours=job_mttf_hours, job_nodes=job_nodes,
        repair_hours=repair_hours)
    rates = {name: value for name, value in (("failures_per_1000_node_days", failures_per_1000_node_days),
                                             ("node_mtbf_hours", node_mtbf_hours),
                                             ("job_mttf_hours", job_mttf_hours)) if value is not None}
    if len(rates) > 1:
        refuse_inputs(ctx, "{} and {} are two failure rates: give one",
                      *("--" + name.replace("_", "-") for name in sorted(rates)[1::-1]))
    if rates and (trace_path is not None or model_path is not None):
        refuse_inputs(ctx, "{} is a source of failures, as {} and {} are: give one",
                      "--" + next(iter(rates)).replace("_", "-"), "--trace", "--failure-model")
    if (job_nodes is None) != (job_mttf_hours is None):
        refuse_inputs(ctx, "{} needs {}", *(("--job-nodes", "--job-mttf-hours") if job_mttf_hours is None
                                            else ("--job-mttf-hours", "--job-nodes")))
    if repair_hours is not None and not rates:
        refuse_inputs(ctx, "{} goes with a failure rate ({}, {}, {}); a trace or a failure model has its own "
                      "repairs", "--repair-hours", "--failures-per-1000-node-days", "--node-mtbf-hours",
                      "--job-mttf-hours")
    (allreduce_seconds, gradient_bytes, bandwidth_bytes_per_second,
     allreduce_latency_seconds) = _one_allreduce_source(ctx, allreduce_seconds, gradient_bytes,
                                                        bandwidth_bytes_per_second, allreduce_latency_seconds)
    if (gradient_bytes is None) != (bandwidth_bytes_per_second is None):
        refuse_inputs(ctx, "{} needs {}", *(("--gradient-bytes", "--bandwidth-bytes-per-second")
                                            if bandwidth_bytes_per_second is None
                                            else ("--bandwidth-bytes-per-second", "--gradient-bytes")))
    if allreduce_latency_seconds is not None and gradient_bytes is None:
        refuse_inputs(ctx, "{} is part of the ring model: give {} and {}", "--allreduce-latency-seconds",
                      "--gradient-bytes", "--bandwidth-bytes-per-second")
    _refuse_overflowing_rates(ctx, failures_per_1000_node_days, node_mtbf_hours, job_mttf_hours, job_nodes,
                              repair_hours)
    if gradient_bytes is not None and bandwidth_bytes_per_second is not None:
        _refuse_overflow(ctx, 2.0 * (gradient_bytes / bandwidth_bytes_per_second) + (allreduce_latency_seconds or 0.0),
                         "{} / {}: the ring model's all-reduce time overflows (%g B / %g B/s)"
                         % (gradient_bytes, bandwidth_bytes_per_second), "--gradient-bytes",
                         "--bandwidth-bytes-per-second")
    if trace_path is None:
        for name, option in (("trace_format", "--format"), ("time_unit", "--time-unit"),
                             ("time_scale", "--time-scale"), ("window", "--window"), ("nodes", "--nodes")):
            if given(ctx, name):
                refuse_unused(option, "needs --trace")
        warn_unused_trace_keys(ctx, trace_path, trace_format=trace_format, time_unit=time_unit,
                               time_scale=time_scale, window=window)
    elif model_path is not None:
        refuse_unused("--failure-model", "and --trace are two sources of failures: give one")
    if plot_path is not None:
        check_output_path(plot_path, force)
        require_matplotlib()  # before the long work, not after it
    if output_path is not None:
        if not spare_redundancies:
            refuse_unused("--output", "writes SPARe's layout: it needs SPARe settings (--spare-r is empty)")
        check_output_path(output_path, force)
    grid = {}
    if quick:
        for name in ("rep_redundancies", "spare_redundancies", "micro_batches", "seeds"):
            if not given(ctx, name):
                grid[name] = QUICK_COMPARE[name]
        if global_batch is not None and not given(ctx, "micro_batches"):
            grid["micro_batches"] = None  # the m the batch allows, as without --quick
        grid["period_factors"] = QUICK_COMPARE["period_factors"]
    rep_redundancies = grid.get("rep_redundancies", rep_redundancies)
    spare_redundancies = grid.get("spare_redundancies", spare_redundancies)
    micro_batches = grid.get("micro_batches", micro_batches)
    seeds = grid.get("seeds", seeds)
    overrides = parse_overrides(settings)
    for field, option in _OWN_OPTIONS.items():
        if field in overrides:
            raise click.UsageError(f"use {option} instead of --set {field}")
    overrides = cluster_overrides(ctx, overrides)
    if heal_seconds is not None:
        overrides["heal_seconds"] = heal_seconds
    if not spare_redundancies and given(ctx, "micro_batches"):
        refuse_unused("--micro-batches", "needs SPARe settings (--spare-r is empty)")
    trace = whole = None
    if trace_path is not None:
        from spare_opt.traces.json_format import read_fault_trace

        trace = whole = read_fault_trace(trace_path, format=trace_format, time_unit=time_unit)
        if window is not None:  # before the steps of one window are counted
            from spare_opt.traces.window import window_trace

            trace = window_trace(trace, *window)
    fault_model = None
    if model_path is not None:
        from spare_opt.traces.failure_model import FailureModel

        fault_model = FailureModel.load(model_path)
    if preset is None:
        preset = "trace-400" if trace is not None or fault_model is not None or rates else "paper-600k"
    if semantics is None:
        semantics = "repair" if trace is not None or fault_model is not None or repair_hours is not None \
            else "paper"
    if rates and semantics == "repair" and repair_hours is None:
        refuse_unused("--semantics repair", "with a failure rate needs --repair-hours")
    elif semantics == "repair" and trace is None and fault_model is None and not rates:
        refuse_unused("--semantics repair", "needs the repair times of a --trace or a --failure-model")
    if semantics == "paper" and given(ctx, "heal_seconds"):
        refuse_unused("--heal-seconds", "applies to --semantics repair only (paper semantics has no rejoin)")
    if no_elastic and trace is None and fault_model is None and not rates:
        refuse_unused("--no-elastic", "does nothing without --trace or --failure-model (elastic needs them)")
    if allreduce_seconds is not None:  # before the steps of one trace span are counted
        overrides["allreduce_seconds"] = allreduce_seconds
    elif gradient_bytes is not None:  # the ring model's time counts the steps too (compare records the model)
        from spare_opt.simulation.parameters import ring_allreduce_seconds

        if groups is not None:  # else N comes from the trace: set below, once it is known
            overrides["allreduce_seconds"] = ring_allreduce_seconds(groups, gradient_bytes, bandwidth_bytes_per_second,
                                                                    allreduce_latency_seconds or 0.0)
    given_allreduce = overrides.get("allreduce_seconds") if gradient_bytes is None else None
    rate_shape = overrides.pop("weibull_shape", None) if rates else None
    if nodes is not None and trace is None:  # from a --cluster file (on the command line it needs --trace)
        click.echo("Warning: --cluster: [failures] nodes is the size of a trace's cluster and there is no trace "
                   "(ignored)", err=True)
    # The whole file's cluster: a --window names fewer nodes.
    traced = None if trace is None else trace_cluster_size(whole, preset, nodes)
    if trace is None or steps is not None:  # else the steps are one trace span: T0 cannot overflow
        refuse_overflowing_time(ctx, preset, steps=steps, step_seconds=step_seconds,
                                allreduce_seconds=overrides.get("allreduce_seconds"), wall_factor=cycles,
                                allreduce_options=("--gradient-bytes", "--bandwidth-bytes-per-second")
                                if gradient_bytes is not None else ("--allreduce-seconds",))
    params = compare_parameters(
        preset, groups, trace=trace, trace_nodes=traced, restart_seconds=restart_seconds,
        save_seconds=save_seconds, step_seconds=step_seconds, time_scale=time_scale, steps=steps, **overrides)
    if gradient_bytes is not None and groups is None:  # N came from the trace: the ring at that N counts the steps
        from spare_opt.simulation.parameters import ring_allreduce_seconds

        overrides["allreduce_seconds"] = ring_allreduce_seconds(params.groups, gradient_bytes,
                                                                bandwidth_bytes_per_second,
                                                                allreduce_latency_seconds or 0.0)
        params = compare_parameters(
            preset, groups, trace=trace, trace_nodes=traced, restart_seconds=restart_seconds,
            save_seconds=save_seconds, step_seconds=step_seconds, time_scale=time_scale, steps=steps, **overrides)
    if rates:
        from spare_opt.traces.rates import failure_model_from_rates

        fault_model = failure_model_from_rates(
            params.groups, failures_per_1000_node_days=failures_per_1000_node_days,
            node_mtbf_seconds=None if node_mtbf_hours is None else node_mtbf_hours * 3600.0,
            job_mttf_seconds=None if job_mttf_hours is None else job_mttf_hours * 3600.0, job_nodes=job_nodes,
            weibull_shape=1.0 if rate_shape is None else rate_shape,
            repair_median_seconds=None if repair_hours is None else repair_hours * 3600.0)
    # The default (or --quick) grids were chosen for large N: leave out what this N cannot hold, and say so;
    # values given on the command line are the user's, and the library refuses those above N.
    if not given(ctx, "rep_redundancies"):
        rep_redundancies = _within_groups(rep_redundancies, params.groups, "--rep-r")
    if not given(ctx, "spare_redundancies"):
        spare_redundancies = _within_groups(spare_redundancies, params.groups, "--spare-r")
    try:
        with executor_for(scheduler, workers) as executor, progress_bar(quiet, "comparing") as progress:
            result = compare(params, trace=trace, fault_model=fault_model, semantics=semantics,
                             trace_nodes=traced,
                             rep_redundancies=rep_redundancies,
                             spare_redundancies=spare_redundancies, micro_batches=micro_batches, seeds=seeds,
                             cycles=cycles, workers=workers, executor=executor, progress=progress,
                             include_elastic=not no_elastic, global_batch=global_batch,
                             micro_batch_overhead_seconds=micro_batch_overhead_seconds,
                             on_setting=_announce if verbose else None, allreduce_seconds=given_allreduce,
                             gradient_bytes=gradient_bytes, bandwidth_bytes_per_second=bandwidth_bytes_per_second,
                             allreduce_latency_seconds=allreduce_latency_seconds or 0.0,
                             include_redistribution=not no_redistribution, allreduce_sensitivity=not no_sensitivity,
                             nodes_per_group=nodes_per_group or 1, failures_path=model_path,
                             **({"period_factors": grid["period_factors"]} if quick else {}))
    except SpareError as exc:
        # The library names its parameters (max_wall_factor); the operator gave options or a file's keys.
        message = _in_input_terms(ctx, str(exc))
        if rates or model_path is not None:  # the model's failures came from the rate or the file given
            name, value = next(iter(rates.items())) if rates else ("failure_model", model_path)
            spelled, path = input_spelling(ctx, "--" + name.replace("_", "-"))
            named = message.replace("the failure model's failures", f"the failures of {spelled} = {value:g}"
                                    if rates else f"the failures of {spelled} {value}")
            if path is not None and named != message and not named.startswith(str(path)):
                named = f"{path}: {named}"
            message = named
        raise click.ClickException(message) from None
    result.grid["quick"] = bool(quick)
    # The library's note on m names its argument and cannot know that --quick chose the grid.
    own_grid = "(--quick's grid;" if quick and not given(ctx, "micro_batches") else "(the grid given;"
    result.notes = [note.replace("(the grid given;", own_grid).replace("give global_batch for", "give --global-batch for")
                    for note in result.notes]
    if trace is None and model_path is None and not rates:
        result.notes.append(f"no failure source given (--trace, --failure-model, or a rate such as --node-mtbf-hours): "
                            f"the failures are the preset {preset}'s, Weibull clocks per group (see the first line)")
    if trace is not None and nodes is None and not trace.cluster_nodes:
        # The verdict's own notes say what it did; what the command line assumed is said here.
        result.notes.append(f"the trace's cluster is taken as {traced:,} nodes: the file gives no cluster size and "
                            f"names {whole.n_nodes:,} nodes (give --nodes)")
    written = None
    if plot_path is not None:
        written = plot_compare(result, plot_path, force=force)
    recommended = None
    if output_path is not None:
        recommended = write_recommendation(result, output_path, force=force)
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(result.format_text())
        click.echo(f"Elapsed: {result.elapsed_seconds:.1f} s")
    if written is not None:
        click.echo(f"figure written to {written}", err=as_json)
    if recommended is not None:
        spare = result.best("spare")
        setting = f"r = {spare['redundancy']}, m = {spare['micro_batches']}"
        held = result.held_line()
        if held is None:
            click.echo(f"recommendation written to {recommended}: SPARe {setting}, the verdict's choice (a layout "
                       "file: plan and validate read it)", err=as_json)
        else:
            click.echo(f"recommendation written to {recommended}: SPARe was NOT chosen; the file holds the best "
                       f"exact SPARe setting, {setting}, for a job that deploys SPARe (recommendation.chosen_strategy "
                       "names the verdict's choice)", err=as_json)


#: The all-reduce's two sources: a measured time, and the ring model's inputs.
_RING_OPTIONS = ("--gradient-bytes", "--bandwidth-bytes-per-second", "--allreduce-latency-seconds")


def _one_allreduce_source(ctx, allreduce_seconds, gradient_bytes, bandwidth, latency):
    """The all-reduce given once: a measured ``--allreduce-seconds`` or the ring model, never both.

    Both from the command line, or both from the cluster file: refused (the one would be
    silently dropped).  One from each: the command line wins, and a warning names the
    file's keys that give way.  Returns the four values, those that gave way as None.
    """
    ring = [option for option, value in zip(_RING_OPTIONS, (gradient_bytes, bandwidth, latency)) if value is not None]
    if allreduce_seconds is None or not ring:
        return allreduce_seconds, gradient_bytes, bandwidth, latency
    measured_path = input_spelling(ctx, "--allreduce-seconds")[1]
    ring_paths = {option: input_spelling(ctx, option)[1] for option in ring}
    from_line = [option for option in ring if ring_paths[option] is None]
    if (measured_path is None) == bool(from_line):  # both sources on one side
        refuse_inputs(ctx, "{} and {} are two sources of the all-reduce time (a measured time and the ring model): "
                      "give one", "--allreduce-seconds", (from_line or ring)[0])
    if measured_path is None:  # a measured time on the command line: the file's ring model gives way
        dropped = ", ".join(input_spelling(ctx, option)[0] for option in ring)
        click.echo(f"Warning: {measured_path or ring_paths[ring[0]]}: --allreduce-seconds on the command line "
                   f"replaces the file's {dropped} (ignored)", err=True)
        return allreduce_seconds, None, None, None
    click.echo(f"Warning: {measured_path}: {' and '.join(from_line)} on the command line "
               f"{'replace' if len(from_line) > 1 else 'replaces'} the file's allreduce_seconds (ignored)", err=True)
    return None, gradient_bytes, bandwidth, latency


_LARGEST = sys.float_info.max


def _refuse_overflow(ctx, value, message, *options):
    """Refuse a value derived from the user's ``options`` that overflowed, naming them as given."""
    if not math.isfinite(value):
        refuse_inputs(ctx, message, *options)


def _refuse_overflowing_rates(ctx, failures_per_1000_node_days, node_mtbf_hours, job_mttf_hours, job_nodes,
                              repair_hours):
    """A failure rate or repair time whose seconds overflow: refused under the user's option or file key."""
    if node_mtbf_hours is not None:
        _refuse_overflow(ctx, node_mtbf_hours * 3600.0, "{}: %g hours does not fit in seconds (at most %.4g hours)"
                         % (node_mtbf_hours, _LARGEST / 3600.0), "--node-mtbf-hours")
    if repair_hours is not None:
        _refuse_overflow(ctx, repair_hours * 3600.0, "{}: %g hours does not fit in seconds (at most %.4g hours)"
                         % (repair_hours, _LARGEST / 3600.0), "--repair-hours")
    if failures_per_1000_node_days is not None:
        _refuse_overflow(ctx, 1000.0 / failures_per_1000_node_days * 86400.0,
                         "{}: %g is a node MTBF too long to fit in seconds (at least %.4g failures per 1,000 "
                         "node-days)" % (failures_per_1000_node_days, 1000.0 * 86400.0 / _LARGEST),
                         "--failures-per-1000-node-days")
    if job_mttf_hours is not None and job_nodes is not None:
        _refuse_overflow(ctx, job_mttf_hours * 3600.0 * job_nodes,
                         "{} x {}: a node MTBF of %g hours x %d nodes does not fit in seconds"
                         % (job_mttf_hours, job_nodes), "--job-mttf-hours", "--job-nodes")


def _within_groups(values, groups, option):
    """The default redundancies ``values`` that ``groups`` DP groups can hold (``r <= N``), the rest named on stderr."""
    kept = tuple(r for r in values if r <= groups)
    if len(kept) < len(values):
        left_out = ", ".join(str(r) for r in values if r > groups)
        click.echo(f"Note: {option} {left_out} left out of the default grid: above N = {groups} (r <= N)", err=True)
    return kept


def _announce(row):
    """``--verbose``: one line on stderr per finished setting."""
    setting = STRATEGY_LABELS[row["strategy"]] + ("" if row["strategy"] == "ckpt" else f" r = {row['redundancy']}") \
        + (f", m = {row['micro_batches']}" if row["strategy"] == "spare" else "")
    low, high = row["ttt_ci"]
    interval = f" [{low:.3f}, {high:.3f}]" if low == low and high == high else ""
    ratio = f"{row['ttt_ratio']:.3f}" if row["ttt_ratio"] != float("inf") else "unfinished"
    click.echo(f"done: {setting}: TTT/T0 {ratio}{interval}, best T_c {row['checkpoint_period_seconds']:.0f} s",
               err=True)

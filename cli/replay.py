"""`spare-opt replay`: replay a node fault trace on a layout (paper or repair semantics)."""

import click

from spare_opt._core.io import dumps_json
from spare_opt._core.stats import finite_or_none
from spare_opt.traces.placement import Placement
from spare_opt.simulation.events import SEMANTICS
from spare_opt.simulation.replay import DEFAULT_PLACEMENTS, MAX_PLACEMENTS, first_fault_warning, replay_placements, replay_trace
from spare_opt.traces.json_format import read_fault_trace

from .options import (
    IntegerRange,
    echo_json,
    executor_for,
    given,
    json_option,
    LAYOUT_M_DEFAULT,
    layout_argument,
    layout_micro_batches,
    progress_bar,
    quiet_option,
    refuse_unused,
    time_unit_option,
    topology_option,
    trace_format_option,
    warn_ignored,
    window_option,
    workers_option,
    scheduler_option,
)

__all__ = ["command"]


@click.command("replay")
@layout_argument
@click.option("--trace", "trace_path", required=True, metavar="FILE",
              help="Fault trace: InfiniteHBD JSON (a list of events), a spare-failure-trace file, or a CSV "
                   "fault log (node,start,end[,domain][,kind]; docs/formats.md).")
@trace_format_option
@time_unit_option
@window_option
@click.option("--exact", is_flag=True, help="Use the exact planner instead of the online controller.")
@click.option("--placement-seed", type=IntegerRange(min=0), default=None, metavar="SEED",
              help="Place nodes on random distinct groups with this one seed, an integer >= 0 (default: --seeds "
                   "random placements).")
@click.option("--seeds", type=IntegerRange(min=1, max=MAX_PLACEMENTS), default=DEFAULT_PLACEMENTS, show_default=True,
              help="Random placements replayed (seeds 0..K-1) when no placement is given: the first is shown, the "
                   "wipe-outs of all with their mean and 95% interval.")
@click.option("--first-fault-order", is_flag=True,
              help="The paper's rule: node i, in order of first effective fault, on group i (warns when it changes "
                   "the wipe-outs against --seeds random placements).")
@click.option("--placement", "placement_path", default=None, metavar="FILE",
              help="Place nodes as this spare-placement file says: a node on a group, on several groups, or on a "
                   "whole domain of a topology (docs/formats.md); unlisted nodes are skipped.")
@topology_option("With --placement: the topology of its domain entries (default: the one embedded in the "
                 "placement file, else the one the layout records).")
@click.option("--semantics", type=click.Choice(SEMANTICS), default="paper", show_default=True,
              help="What a fault_end does: paper - nothing before a global restart (the paper's model); "
                   "repair - the node's group comes back and the plan is recomputed (docs/repair.md).")
@click.option("--micro-batches", "micro_batches", type=IntegerRange(min=1), default=None,
              show_default=LAYOUT_M_DEFAULT, metavar="M",
              help="Micro-batches per shard type (fractional stacking): the summary adds the load L* "
                   "and the time-weighted step cost L/M.  1 is the paper's model.  An M other than the layout's "
                   "recommended m is used, with a warning.")
@click.option("--rows", "show_rows", is_flag=True, help="Also print one line per trace event.")
@workers_option
@scheduler_option
@json_option
@quiet_option
def command(layout, trace_path, trace_format, time_unit, window, exact, placement_seed, seeds, first_fault_order,
            placement_path, topology, semantics, micro_batches, show_rows, workers, scheduler, as_json, quiet):
    """Replay the fault trace FILE on the layout LAYOUT.

    Each fault_start fails the DP group of its node (nodes are mapped to groups at
    random, over --seeds placements by default or with one --placement-seed, in order
    of first effective fault with --first-fault-order, or as --placement
    says, where a node placed on a domain fails all its groups; nodes beyond N or
    not in the placement are skipped), starts at the same
    instant fail together, S follows the reorder plans, and a wipe-out is a global
    restart (all groups back, S = 1).  With --semantics paper (the default) fault_end
    events are counted but do not bring a group back before a restart; with
    --semantics repair a fault_end brings its group back (events at one instant in
    file order), and the end of a node that was down at a restart (spares replaced
    it) is counted and ignored.  Irregular events (a start for a node already
    down, an end with no start, events out of time order) are handled and reported.

    Prints the summary: faults, masked failures, wipe-outs, most groups out at once,
    max and time-weighted mean S.  --json prints the summary and the per-event rows as JSON.
    --workers replays the random placements on several processes (one placement each).
    See docs/replay.md.
    """
    if show_rows and as_json:
        warn_ignored("--rows", "--json always holds the per-event rows")
    given_rules = [name for name, on in (("--placement", placement_path is not None),
                                         ("--placement-seed", placement_seed is not None),
                                         ("--first-fault-order", first_fault_order)) if on]
    if len(given_rules) > 1:
        refuse_unused(given_rules[0], f"and {given_rules[1]} are two placements: give one")
    if topology is not None and placement_path is None:
        refuse_unused("--topology", "needs --placement (it resolves the placement's domain entries)")
    random_placements = placement_path is None and placement_seed is None
    if not random_placements and given(click.get_current_context(), "seeds"):
        warn_ignored("--seeds", "one placement is replayed (--placement-seed or --placement)")
    if not random_placements and (workers != 1 or scheduler is not None):
        warn_ignored("--workers" if workers != 1 else "--scheduler", "one placement is replayed (they run the "
                     "--seeds random placements in parallel)")
    placement = None
    if placement_path is not None:
        placement = Placement.load(placement_path).prepared(topology=topology, layout=layout)
    trace = read_fault_trace(trace_path, format=trace_format, time_unit=time_unit)
    if window is not None:
        from spare_opt.traces.window import window_text, window_trace

        trace = window_trace(trace, *window)
        click.echo(window_text(trace), err=as_json)
    micro_batches = layout_micro_batches(layout, micro_batches)
    options = dict(planner="exact" if exact else "controller", semantics=semantics, micro_batches=micro_batches)
    placements = warning = None
    with executor_for(scheduler if random_placements else None, workers) as executor, \
            progress_bar(quiet, "replaying") as progress:
        # one bar over every replay: the random placements, then the first-fault one
        before = seeds * trace.n_events if random_placements else 0
        after = trace.n_events if first_fault_order else 0
        if random_placements:
            placements = replay_placements(
                layout, trace, seeds=seeds, workers=workers, executor=executor,
                progress=None if progress is None else lambda done, total: progress(done, total + after), **options)
        if placement_path is not None or placement_seed is not None or first_fault_order:
            result = replay_trace(
                layout, trace, placement_seed=placement_seed, placement=placement,
                progress=None if progress is None else lambda done, total: progress(before + done, before + total),
                **options)
        else:
            result = placements["first"]
    if first_fault_order:
        warning = first_fault_warning(result["wipe_outs"], placements)
    if as_json:
        doc = result.to_dict(rows=True)
        if placements is not None:
            doc["placements"] = finite_or_none({key: value for key, value in placements.items() if key != "first"})
        click.echo(dumps_json(doc, flat_records=True))  # one line per event row
    else:
        click.echo(result.format_text(rows=show_rows))
        if placements is not None:
            low, high = placements["wipe_outs_ci95"]
            click.echo(f"Over {len(placements['seeds'])} random placements (seeds {placements['seeds'][0]}-"
                       f"{placements['seeds'][-1]}): wipe-outs {placements['mean_wipe_outs']:.1f} on average"
                       + (f", 95% CI [{low:.1f}, {high:.1f}]" if low == low and high == high else "")
                       + f" (per placement: {', '.join(map(str, placements['wipe_outs']))})")
    if warning is not None:
        click.echo(f"Warning: {warning}", err=True)


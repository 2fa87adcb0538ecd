"""`spare-opt replay`: replay a node fault trace on a layout (paper or repair semantics)."""

import click

from spare_opt.traces.placement import Placement
from spare_opt.simulation.events import SEMANTICS
from spare_opt.simulation.replay import replay_trace
from spare_opt.traces.json_format import read_fault_trace

from .options import (
    IntegerRange,
    echo_json,
    json_option,
    layout_argument,
    progress_bar,
    quiet_option,
    refuse_unused,
    time_unit_option,
    topology_option,
    trace_format_option,
    warn_ignored,
)

__all__ = ["command"]


@click.command("replay")
@layout_argument
@click.option("--trace", "trace_path", required=True, metavar="FILE",
              help="Fault trace: InfiniteHBD JSON (a list of events), a spare-failure-trace file, or a CSV "
                   "fault log (node,start,end[,domain][,kind]; docs/formats.md).")
@trace_format_option
@time_unit_option
@click.option("--exact", is_flag=True, help="Use the exact planner instead of the online controller.")
@click.option("--placement-seed", type=IntegerRange(min=0), default=None, metavar="SEED",
              help="Place nodes on random distinct groups with this seed, an integer >= 0 "
                   "(default: order of first effective fault).")
@click.option("--placement", "placement_path", default=None, metavar="FILE",
              help="Place nodes as this spare-placement file says: a node on a group, on several groups, or on a "
                   "whole domain of a topology (docs/formats.md); unlisted nodes are skipped.")
@topology_option("With --placement: the topology of its domain entries (default: the one embedded in the "
                 "placement file, else the one the layout records).")
@click.option("--semantics", type=click.Choice(SEMANTICS), default="paper", show_default=True,
              help="What a fault_end does: paper - nothing before a global restart (the paper's model); "
                   "repair - the node's group comes back and the plan is recomputed (docs/repair.md).")
@click.option("--micro-batches", "micro_batches", type=IntegerRange(min=1), default=1, show_default=True,
              metavar="M", help="Micro-batches per shard type (fractional stacking): the summary adds the load L* "
                                "and the time-weighted step cost L/M.  1 is the paper's model.")
@click.option("--rows", "show_rows", is_flag=True, help="Also print one line per trace event.")
@json_option
@quiet_option
def command(layout, trace_path, trace_format, time_unit, exact, placement_seed, placement_path, topology, semantics,
            micro_batches, show_rows, as_json, quiet):
    """Replay the fault trace FILE on the layout LAYOUT.

    Each fault_start fails the DP group of its node (nodes are mapped to groups in
    order of first effective fault, at random with --placement-seed, or as --placement
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
    See docs/replay.md.
    """
    if show_rows and as_json:
        warn_ignored("--rows", "--json always holds the per-event rows")
    if placement_path is not None and placement_seed is not None:
        refuse_unused("--placement", "and --placement-seed are two placements: give one")
    if topology is not None and placement_path is None:
        refuse_unused("--topology", "needs --placement (it resolves the placement's domain entries)")
    placement = None
    if placement_path is not None:
        placement = Placement.load(placement_path).prepared(topology=topology, layout=layout)
    trace = read_fault_trace(trace_path, format=trace_format, time_unit=time_unit)
    with progress_bar(quiet, "replaying") as progress:
        result = replay_trace(layout, trace, planner="exact" if exact else "controller", progress=progress,
                              placement_seed=placement_seed, placement=placement, semantics=semantics,
                              micro_batches=micro_batches)
    if as_json:
        echo_json(result.to_dict(rows=True))
    else:
        click.echo(result.format_text(rows=show_rows))


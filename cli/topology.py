"""``spare-opt topology``: write a topology file (failure domains of the DP groups)."""

import click

from spare_opt.guarantees.domains import derived_topology
from spare_opt.layouts.topology import Topology
from spare_opt.traces.json_format import read_fault_trace

from spare_opt._core import validation as check
from spare_opt._core.errors import SpareError

from .options import (
    FLOAT,
    INTEGER,
    FloatRange,
    IntegerRange,
    check_output_path,
    echo_json,
    force_option,
    given,
    json_option,
    refuse_unused,
    time_unit_option,
    trace_format_option,
    warn_ignored,
)

__all__ = ["command"]

SHOWN_DOMAINS = 8


def _parse_level(ctx, param, values):
    """``rack=8`` -> ``("rack", 8)``; a usage error on anything else."""
    levels = {}
    for text in values:
        name, sep, size = text.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME=SIZE (e.g. rack=8), got {text!r}")
        try:
            size = check.parse_int(size, None)
        except SpareError:
            raise click.BadParameter(f"the size in {text!r} is not an integer") from None
        if name.strip() in levels:
            raise click.BadParameter(f"level {name.strip()!r} given twice")
        levels[name.strip()] = size
    return levels


@click.command("topology")
@click.option("--groups", "-n", "groups", type=INTEGER, required=True, metavar="N", help="Number of DP groups N (>= 1).")
@click.option("--level", "levels", multiple=True, callback=_parse_level, metavar="NAME=SIZE",
              help="A level of blocks of SIZE consecutive groups, e.g. rack=8 (repeatable: --level rack=8 "
                   "--level pod=96).  The first level is the default of 'layout --topology'.")
@click.option("--shuffle", is_flag=True, help="Place the groups at random in the blocks (seeded by --seed).")
@click.option("--seed", type=IntegerRange(min=0), default=0, show_default=True, help="Seed of --shuffle.")
@click.option("--from-trace", "trace_path", type=click.Path(dir_okay=False), default=None, metavar="TRACE",
              help="Instead of blocks: one level from a fault trace (nodes placed on groups in order of first "
                   "fault): the nodes' domains when it names them (a CSV log's domain column), else derived by "
                   "grouping nodes that failed at the same instant.")
@trace_format_option
@time_unit_option
@click.option("--window-days", type=FloatRange(min=0), default=0.0, show_default=True, metavar="DAYS",
              help="With --from-trace: starts at most this far apart count as failing together.")
@click.option("--until-days", type=FLOAT, default=None, metavar="DAYS",
              help="With --from-trace: use only events before this day.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), required=True, metavar="FILE",
              help="Topology file to write (JSON, spare-topology format).")
@force_option
@json_option
@click.pass_context
def command(ctx, groups, levels, shuffle, seed, trace_path, trace_format, time_unit, window_days, until_days, output,
            force, as_json):
    """Write a topology file: the failure domain of every DP group at each level.

    Blocks of consecutive groups (--level rack=8 ...), optionally placed at random
    (--shuffle), or one level from a fault trace (--from-trace): the domains a CSV
    fault log names, or else the trace's nodes that failed at the same instant form
    one domain (a derived topology, not a physical one).  Edit the file for any other topology: each level lists one entry
    per group, a label or a list of labels (docs/formats.md).

    \b
    Examples:
      spare-opt topology --groups 600 --level rack=8 --level pod=96 -o racks.json
      spare-opt topology --groups 400 --from-trace fault_trace.json -o derived.json
    """
    if trace_path is None and not levels:
        raise click.UsageError("give at least one --level NAME=SIZE, or --from-trace TRACE")
    if trace_path is not None and (levels or shuffle):
        refuse_unused("--from-trace", "derives its own level: do not combine it with --level or --shuffle")
    if trace_path is None:
        for name, option in (("trace_format", "--format"), ("time_unit", "--time-unit"),
                             ("window_days", "--window-days"), ("until_days", "--until-days")):
            if given(ctx, name):
                refuse_unused(option, "applies to --from-trace only (without it it would do nothing)")
    if given(ctx, "seed") and not shuffle:
        warn_ignored("--seed", "it seeds --shuffle only")
    check_output_path(output, force)
    if trace_path is not None:
        trace = read_fault_trace(trace_path, format=trace_format, time_unit=time_unit)
        topology = derived_topology(trace, groups, window_days=window_days, until_days=until_days)
        if topology.levels == ("domain",):
            origin = f"the node domains of {trace_path} (its domain column)"
        else:
            origin = (f"derived from {trace_path} (nodes that failed together; a derived topology, not a "
                      "physical one)")
    else:
        topology = Topology.blocks(groups, levels, shuffle=shuffle, seed=seed)
        origin = "blocks of consecutive groups" + (f", shuffled with seed {seed}" if shuffle else "")
    topology.save(output, force=force)
    summary = {}
    for level in topology.levels:
        sizes = [members.size for members in topology.domains(level).values()]
        summary[level] = {"domains": len(sizes), "largest": max(sizes, default=0), "smallest": min(sizes, default=0),
                          "groups_in_none": sum(1 for labels in topology.entries(level) if not labels)}
    if as_json:
        echo_json({"path": str(output), "groups": topology.groups, "origin": origin, "levels": summary})
        return
    click.echo(f"groups N:  {topology.groups}")
    click.echo(f"origin:    {origin}")
    for level, info in summary.items():
        extra = f", {info['groups_in_none']} groups in none" if info["groups_in_none"] else ""
        click.echo(f"level {level}: {info['domains']} domains of {info['smallest']} to {info['largest']} groups{extra}")
    click.echo(f"wrote {output}")

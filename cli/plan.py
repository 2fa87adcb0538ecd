"""``spare-opt plan``: the exact reorder plan for a failure set, from a fault-free state."""

import click

from spare_opt._core.errors import FailureSetError, SpareError
from spare_opt._core.io import dumps_json
from spare_opt.layouts.layout import layout_file_size
from spare_opt.planning.failure_sets import read_failure_set
from spare_opt.planning.plan import check_micro_batches, lower_bound
from spare_opt.planning.exact import plan_reorder

from .options import _load_layout, json_option, layout_micro_batches, micro_batches_option, parse_group_list

__all__ = ["command"]

SHOWN_GROUPS = 10
SHOWN_IDS = 20


def _fail_option_ids(ctx, param, values):
    ids = []
    for text in values:
        ids.extend(parse_group_list(text))
    return ids


def _fail_file_ids(ctx, param, value):
    if value is None:
        return []
    try:
        return read_failure_set(value)
    except FailureSetError as exc:
        raise click.BadParameter(str(exc)) from None


def _ids_text(ids, shown=SHOWN_IDS):
    ids = [int(i) for i in ids]
    text = ", ".join(str(i) for i in ids[:shown])
    if len(ids) > shown:
        text += f", ... ({len(ids) - shown} more)"
    return text


def _row_text(row, top):
    values = [str(int(v)) for v in row]
    return " ".join(values[:top]) + " | " + " ".join(values[top:])


def _plannable_layout(ctx, param, value):
    """The LAYOUT argument, refused from its header (before loading) when N is above the planner's limit."""
    size = layout_file_size(value)
    if size is not None:
        try:
            check_micro_batches(1, size[0])
        except SpareError as exc:
            raise click.ClickException(f"{value}: {exc}") from None
    return _load_layout(ctx, param, value)


@click.command("plan")
@click.argument("layout", metavar="LAYOUT", callback=_plannable_layout)
@click.option(
    "--fail",
    "fail_lists",
    multiple=True,
    metavar="IDS",
    callback=_fail_option_ids,
    help="Failed DP groups, comma or space separated (for example 3,17,42). May be repeated; "
    "leave it out to plan with no failure.",
)
@click.option(
    "--fail-file",
    metavar="FILE",
    callback=_fail_file_ids,
    help="A file of failed group ids: a JSON list, or ids separated by commas and/or white space.",
)
@micro_batches_option
@json_option
def command(layout, fail_lists, fail_file, micro_batches, as_json):
    """Plan the reorder after the given DP groups fail, starting from a fault-free state.

    Every live group computes the top S = 1 layer of the LAYOUT's stacks before the
    failures.  The plan is exact: the least stack number S* that covers every shard type
    with the live groups, the assignment of shard types to live groups, the new stack
    orders, and the fewest moves into the top S* layers.  --fail and --fail-file are
    combined; a group listed twice is an error.

    With --micro-batches M, each shard type is M micro-batches and the plan spreads them
    over the live holders: the load L* (the most micro-batches one group computes) is
    the least possible, the step cost is L*/M layers, and the fewest micro-batches
    change group (moves).  --json then adds the split: for each shard type, the group
    computing each of its micro-batches.

    Without --micro-batches, M is the layout's recommended m (the file that compare -o
    writes carries one), else 1.

    Example: spare-opt plan layout.json --fail 3,17,42 --micro-batches 8
    """
    micro_batches = layout_micro_batches(layout, micro_batches)
    plan = plan_reorder(layout, list(fail_lists) + list(fail_file), micro_batches=micro_batches)
    if as_json:
        click.echo(dumps_json(plan.to_dict(), flat_lists=True))  # arrays on one line each
        return
    n, r = layout.groups, layout.redundancy
    click.echo(f"layout: N = {n} DP groups, redundancy r = {r}, method {layout.method}")
    click.echo(f"failed groups: {plan.failed.size}" + (f" ({_ids_text(plan.failed)})" if plan.failed.size else ""))
    if not plan.masked:
        click.echo("status: wipe-out (a shard type has no live holder: global restart from the last checkpoint)")
        click.echo(f"lost shard types: {plan.lost_shards.size} ({_ids_text(plan.lost_shards)})")
        bound = "none (every group failed)" if plan.lower_bound is None else str(plan.lower_bound)
        click.echo(f"lower bound c(k): {bound}")
        return
    top = plan.stack_number
    m = plan.micro_batches
    live = n - plan.failed.size
    click.echo("status: masked")
    if m == 1:
        click.echo(f"stack number S*: {top} (lower bound c(k) = {plan.lower_bound})")
    else:
        click.echo(f"stack number: {top} (the most shard types one group computes part of; "
                   f"c(k) = {plan.lower_bound})")
    click.echo(f"load L*: {plan.load} of M = {m} micro-batches per group "
               f"(lower bound ceil(M N / (N - k)) = {lower_bound(n, plan.failed.size, m)})")
    click.echo(f"step cost L*/M: {plan.step_cost:.4g} layers (physical limit N / (N - k) = {n / live:.4g})")
    if m == 1:
        click.echo(f"moves: {plan.moves} shard types brought into their group's top {top} layers")
    else:
        click.echo(f"moves: {plan.moves} micro-batches given to another group")
    patched = sum(len(types) for types in plan.patch.values())
    if patched:
        unit = "shard types" if m == 1 else "micro-batches"
        click.echo(f"patch compute: {patched} {unit} on {len(plan.patch)} groups")
    else:
        click.echo("patch compute: none (the failures are applied between steps)")
    alive = plan.order[:, 0] >= 0
    changed = [int(g) for g in alive.nonzero()[0] if (plan.order[g] != layout.stacks[g]).any()]
    click.echo(f"groups whose order changed: {len(changed)}")
    if changed:
        click.echo(f"  {'group':>6}  new order (top {top} | rest)  <-  previous order")
        for g in changed[:SHOWN_GROUPS]:
            click.echo(f"  {g:>6}  {_row_text(plan.order[g], top)}  <-  {_row_text(layout.stacks[g], top)}")
        if len(changed) > SHOWN_GROUPS:
            click.echo(f"  ... and {len(changed) - SHOWN_GROUPS} more (use --json for all)")

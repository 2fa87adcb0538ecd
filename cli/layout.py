"""``spare-opt layout``: generate a stack layout and write it to a file."""

import click

from spare_opt.layouts.domain_layouts import DOMAIN_METHODS, domain_safe
from spare_opt.layouts.generators import DEFAULT_TIME_LIMIT, METHODS, generate
from spare_opt.planning.plan import MAX_SPLIT_ENTRIES

from .options import (
    IntegerRange,
    deprecated_alias,
    INTEGER,
    FloatRange,
    check_output_path,
    echo_json,
    force_option,
    given,
    json_option,
    refuse_unused,
    seed_option,
    topology_option,
    warn_ignored,
)

__all__ = ["command"]

SHOWN_OFFSETS = 30


def _offsets_text(offsets):
    if offsets is None:
        return "none (not circulant)"
    text = ", ".join(str(o) for o in offsets[:SHOWN_OFFSETS])
    if len(offsets) > SHOWN_OFFSETS:
        text += f", ... ({len(offsets) - SHOWN_OFFSETS} more)"
    return text


@click.command("layout")
@click.option("--groups", "-N", "groups", type=INTEGER, default=None, metavar="N",
              help="Number of DP groups N (>= 1)  [required].")
@click.option("--redundancy", "-r", "redundancy", type=INTEGER, required=True, metavar="R",
              help="Redundancy r: shard types held by each group (1 <= r <= N).")
@click.option("--method", "-m", type=click.Choice(list(METHODS)), default="sidon", show_default=True,
              help="Layout generator: Sidon offsets (any two groups share at most one shard type when possible), "
                   "consecutive offsets 0..r-1, blocks of r groups (r must divide N), or random Latin layers.")
@seed_option
@click.option("--time-limit", type=FloatRange(min=0, min_open=True), default=DEFAULT_TIME_LIMIT,
              show_default=True, metavar="SEC", help="Search time budget in seconds (sidon only): exhaustive search and CP-SAT.")
@topology_option("Make the layout domain-safe for this topology file (spare-opt topology): in every domain the "
                  "groups hold pairwise disjoint shard types.  Needs --method sidon.")
@click.option("--domain-level", "domain_levels", multiple=True, metavar="LEVEL",
              help="With --topology: a level to be safe at (repeatable)  [default: the topology's first level].")
@click.option("--domain-method", type=click.Choice(list(DOMAIN_METHODS)), default="auto", show_default=True,
              help="With --topology: circulant offsets spaced by the domains, assignment of Sidon rows to groups "
                   "(colouring + CP-SAT), or auto (circulant when the domains allow it).")
@click.option("--micro-batches", "micro_batches", type=IntegerRange(min=1), default=None, metavar="M",
              help="Record in the file the micro-batches per shard type M the layout is meant to run with "
                   "(metadata micro_batches; the layout itself does not depend on M).")
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=False), required=True, metavar="FILE",
              help="Layout file to write: JSON, or compressed NumPy when FILE ends in .npz (large N).")
@force_option
@json_option
@click.pass_context
@deprecated_alias("-n", "--groups/-N", "groups", type=INTEGER, required=True)
def command(ctx, groups, redundancy, method, seed, time_limit, topology, domain_levels, domain_method, micro_batches,
            output, force, as_json):
    """Generate a stack layout of N DP groups with redundancy R and write it to FILE.

    Prints the method, N, r, the overlap lambda (the most shard types two groups
    share), its proven lower bound, the solver status and the time.  Sidon layouts
    come from known constructions (Singer, Bose, Ruzsa, optimal Golomb rulers), an
    exhaustive search that also proves when no Sidon set exists, or CP-SAT; see
    docs/layouts.md.  Results are reproducible for a given --seed (runs that stop at
    --time-limit excepted).

    With --topology the layout is domain-safe when possible (docs/domains.md): one
    domain failure (a rack, a switch) then removes at most one holder of each shard
    type.  The status says whether it is safe, impossible (a domain too large for r),
    or not found in the time limit, and the file records the topology.

    \b
    Examples:
      spare-opt layout --groups 600 --redundancy 20 -o layout.json
      spare-opt layout --groups 600 --redundancy 8 --topology racks.json -o safe.json
    """
    if topology is None and (domain_levels or given(ctx, "domain_method")):
        refuse_unused("--domain-level and --domain-method", "need --topology")
    if topology is not None and method != "sidon":
        refuse_unused("--topology", "makes a domain-safe Sidon layout: use --method sidon (the default)")
    # Refuse an existing file before any long solve.
    check_output_path(output, force)
    # Options of the search only: the layout asked for is made all the same (a warning).
    if method in ("consecutive", "block") and given(ctx, "seed"):
        warn_ignored("--seed", f"the {method} layout is a fixed construction (it draws no random numbers)")
    if method != "sidon" and given(ctx, "time_limit"):
        warn_ignored("--time-limit", f"only the sidon search has a time budget; {method} is built directly")
    if topology is None:
        layout = generate(method, groups, redundancy, seed=seed, time_limit=time_limit)
    else:
        layout = domain_safe(groups, redundancy, topology, levels=list(domain_levels) or None, method=domain_method,
                             time_limit=time_limit, seed=seed)
    if micro_batches is not None:
        from spare_opt.planning.plan import check_micro_batches

        layout.metadata["micro_batches"] = check_micro_batches(micro_batches, groups)
    layout.save(output, force=force)
    if groups > MAX_SPLIT_ENTRIES:
        click.echo(f"Warning: spare-opt plan cannot take this layout: N = {groups:,} is above its limit of "
                   f"{MAX_SPLIT_ENTRIES:,} groups", err=True)
    metadata = layout.metadata
    overlap = metadata.get("lambda")
    if overlap is None:
        overlap = layout.overlap()
    # Only the Sidon search involves a solver; the other methods are direct constructions.
    status = metadata.get("solver_status", "n/a (direct construction)")
    seconds = metadata.get("solve_seconds")
    if as_json:
        doc = {
            "path": str(output),
            "method": layout.method,
            "groups": layout.groups,
            "redundancy": layout.redundancy,
            "lambda": int(overlap),
            "solver_status": status,
            "solve_seconds": seconds,
            "offsets": None if layout.offsets is None else list(layout.offsets),
            "metadata": metadata,
        }
        if topology is not None:
            doc["domain_status"] = metadata["domain_status"]
            doc["domain_multiplicity"] = metadata["domain_multiplicity"]
        echo_json(doc)
        return
    click.echo(f"method:        {layout.method}")
    click.echo(f"groups N:      {layout.groups}")
    click.echo(f"redundancy r:  {layout.redundancy}")
    click.echo(f"lambda:        {overlap} (most shard types two groups share)")
    click.echo(f"solver status: {status}")
    if metadata.get("lambda_lower_bound") is not None:
        proof = "proved least" if metadata.get("lambda_proved_optimal") else "not proved least"
        click.echo(f"lambda bound:  >= {metadata['lambda_lower_bound']} (lambda {proof})")
    if metadata.get("reason"):
        click.echo(f"reason:        {metadata['reason']}")
    if seconds is not None:
        click.echo(f"time:          {seconds:.4f} s")
    if layout.offsets is not None:
        click.echo(f"offsets:       {_offsets_text(layout.offsets)}")
    if topology is not None:
        click.echo(f"domains:       {metadata['domain_status']} at level(s) {', '.join(metadata['domain_levels'])} "
                   f"(route {metadata['domain_route']}): at most {metadata['domain_multiplicity']} holder(s) of a "
                   f"shard type in one domain, lower bound {metadata['domain_multiplicity_lower_bound']}")
        click.echo(f"               {metadata['domain_reason']}")
    click.echo(f"wrote {output}")

"""`spare-opt demo`: the main job on a built-in default (N = 400, r = r*, Sidon layout, trace replay)."""

import click

from spare_opt.demo import DEFAULT_OUT, run_demo

from .options import (
    IntegerRange,
    echo_json,
    force_option,
    json_option,
    progress_enabled,
    time_unit_option,
    trace_format_option,
    workers_option,
)

__all__ = ["command"]


@click.command("demo")
@click.option("--out", "out_dir", default=DEFAULT_OUT, show_default=True, metavar="DIR",
              help="Output folder (created if needed).")
@click.option("--trace", "trace_path", default=None, metavar="FILE",
              help="Replay this fault trace instead of the real one shipped with spare-opt.")
@trace_format_option
@time_unit_option
@click.option("--generated", is_flag=True,
              help="Replay a generated failure sequence of the same cluster (seed 0) instead of the real trace.")
@click.option("--exact", is_flag=True, help="Replay with the exact planner instead of the online controller.")
@click.option("--micro-batches", "micro_batches", type=IntegerRange(min=1), default=1, show_default=True,
              metavar="M", help="Above 1: also replay with repairs at m = 1 and m = M side by side, and add m = M "
                                "to the verdict's SPARe grid.")
@click.option("--no-verdict", is_flag=True, help="Skip the verdict (checkpointing, replication and SPARe on the "
                                                 "trace, at its rate and compressed 100x).")
@workers_option
@force_option
@json_option
def command(out_dir, trace_path, trace_format, time_unit, generated, exact, micro_batches, no_verdict, workers, force,
            as_json):
    """Generate a Sidon layout for the traced cluster and replay a fault trace on it.

    N = 400 DP groups (the 400 servers of the InfiniteHBD trace), r = r* =
    floor(log2 N + 0.833) = 9.  The trace is $SPARE_TRACE when set, else the real
    InfiniteHBD trace shipped with spare-opt (Apache-2.0, arXiv:2502.03885).  Writes the layout and a JSON replay report into --out (never
    overwriting without --force) and prints a summary.

    Ends with the verdict on that trace: checkpointing alone, replication and SPARe
    on the same failures, at the trace's rate and compressed 100x, on a reduced grid
    (spare-opt compare runs the full one; docs/repair.md).
    """
    if trace_path is not None and generated:
        raise click.UsageError("--trace and --generated exclude each other")
    if generated and (trace_format is not None or time_unit is not None):
        raise click.UsageError("--format and --time-unit describe a trace file; --generated reads none")
    result = run_demo(out_dir, trace_path=trace_path, force=force, planner="exact" if exact else "controller",
                      generated=generated, format=trace_format, time_unit=time_unit, micro_batches=micro_batches,
                      verdict=not no_verdict, workers=workers,
                      stage=(lambda text: click.echo(text, err=True)) if progress_enabled(False) else None)
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(result.format_text())

"""`spare-opt data`: where the fault trace shipped with spare-opt is (and its license and source)."""

import click

from spare_opt.demo import packaged_trace_info

from .options import echo_json, json_option

__all__ = ["command"]


@click.command("data")
@json_option
def command(as_json):
    """Print the path of the real fault trace shipped with spare-opt.

    The InfiniteHBD node fault trace (400 GPU servers, 349 days, 584 faults on
    231 nodes; Apache-2.0, arXiv:2502.03885) is installed with the package, so
    examples work from any folder:

        T=$(spare-opt data); spare-opt fit "$T"

    --json adds the paths of its LICENSE and of the SOURCE.md note naming where it
    comes from, and its size.  The format and provenance: docs/model.md ("The
    shipped trace") and docs/formats.md.
    """
    info = packaged_trace_info()
    if as_json:
        echo_json(info)
    else:
        click.echo(info["trace"])

"""The ``spare-opt`` click group: registers the commands and turns library errors into one-line messages."""

import click

from spare_opt import __version__
from spare_opt._core.errors import SpareError


class SpareGroup(click.Group):
    """A click group that reports :class:`spare_opt.SpareError` (and ``MemoryError``) as ``Error: <message>``, exit code 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except SpareError as exc:
            raise click.ClickException(str(exc)) from None
        except MemoryError:
            # Sizes are checked before the work, but a huge request can still exhaust RAM.
            raise click.ClickException(
                "out of memory: the request is too large for this machine (try a smaller N or r)"
            ) from None


@click.group(cls=SpareGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="spare-opt")
def main():
    """Plan fault tolerance for data-parallel LLM pretraining with SPARe.

    Generate stack layouts, plan reorders after DP-group failures, validate coverage
    guarantees, replay real fault traces, simulate time-to-train and compare
    checkpointing, replication and SPARe on a failure log.  Run
    'spare-opt demo' for a tour on a built-in instance.
    """


def _register():
    from . import compare, demo, fit, layout, plan, replay, simulate, sweep, topology, tune, validate

    for module in (layout, topology, plan, validate, replay, fit, sweep, simulate, tune, compare, demo):
        main.add_command(module.command)


_register()

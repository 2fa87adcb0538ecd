"""`spare-opt replay` (STUB)."""

import click


@click.command("replay")
def command():
    """(not yet implemented)"""
    raise click.ClickException("not implemented yet")

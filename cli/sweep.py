"""`spare-opt sweep` (STUB)."""

import click


@click.command("sweep")
def command():
    """(not yet implemented)"""
    raise click.ClickException("not implemented yet")

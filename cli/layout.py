"""`spare-opt layout` (STUB)."""

import click


@click.command("layout")
def command():
    """(not yet implemented)"""
    raise click.ClickException("not implemented yet")

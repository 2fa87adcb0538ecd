"""`spare-opt simulate` (STUB)."""

import click


@click.command("simulate")
def command():
    """(not yet implemented)"""
    raise click.ClickException("not implemented yet")

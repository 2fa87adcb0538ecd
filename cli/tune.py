"""`spare-opt tune` (STUB)."""

import click


@click.command("tune")
def command():
    """(not yet implemented)"""
    raise click.ClickException("not implemented yet")

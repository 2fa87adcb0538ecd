"""`spare-opt plan` (STUB)."""

import click


@click.command("plan")
def command():
    """(not yet implemented)"""
    raise click.ClickException("not implemented yet")

"""`spare-opt validate` (STUB)."""

import click


@click.command("validate")
def command():
    """(not yet implemented)"""
    raise click.ClickException("not implemented yet")

"""`spare-opt demo` (STUB)."""

import click


@click.command("demo")
def command():
    """(not yet implemented)"""
    raise click.ClickException("not implemented yet")

"""Options, parameter types and helpers shared by the ``spare-opt`` commands."""

import json

import click

from spare_opt import Layout
from spare_opt.errors import OutputExistsError

__all__ = [
    "json_option",
    "force_option",
    "seed_option",
    "quiet_option",
    "layout_argument",
    "OutputExists",
    "echo_json",
    "parse_group_list",
    "check_output_path",
]


class OutputExists(click.FileError):
    """Refusal to overwrite an existing output file (exit code 1, message from click)."""

    def __init__(self, filename):
        super().__init__(filename, hint="exists already; pass --force to overwrite")


def check_output_path(path, force):
    """Fail early, before long work, when ``path`` exists and ``force`` is not set."""
    import os

    if path is not None and os.path.exists(path) and not force:
        raise OutputExists(str(path))


def _load_layout(ctx, param, value):
    if value is None:
        return None
    # Library errors (LayoutFileError, LayoutError) are turned into one-line messages
    # by the group in main.py; BadParameter names the argument too.
    from spare_opt.errors import SpareError

    try:
        return Layout.load(value)
    except SpareError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def layout_argument(func):
    """``LAYOUT`` positional argument: a layout file, loaded and validated into a :class:`Layout`."""
    return click.argument("layout", metavar="LAYOUT", callback=_load_layout)(func)


json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout instead of text.")
force_option = click.option("--force", is_flag=True, help="Overwrite existing output files.")
seed_option = click.option("--seed", type=int, default=0, show_default=True, help="Random seed; equal seeds give equal results.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")


def echo_json(obj):
    """Print ``obj`` as indented JSON (numpy scalars and arrays converted)."""
    click.echo(json.dumps(obj, indent=2, default=_json_default))


def _json_default(value):
    import numpy as np

    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def parse_group_list(text):
    """Parse ``"3,17,42"`` (commas and/or white space) into a list of ints.

    Raises
    ------
    click.BadParameter
        A token is not an integer.
    """
    tokens = [tok for tok in text.replace(",", " ").split() if tok]
    values = []
    for tok in tokens:
        try:
            values.append(int(tok))
        except ValueError:
            raise click.BadParameter(f"{tok!r} is not an integer group id") from None
    return values


def progress_enabled(quiet):
    """Progress bars go to stderr, only on a terminal and without ``--quiet``."""
    import sys

    return not quiet and sys.stderr.isatty()



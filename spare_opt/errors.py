"""Exception hierarchy of spare-opt.

Every error the library raises on bad input is a :class:`SpareError`; the CLI turns
these into one-line messages and a non-zero exit.  Subclasses also derive from the
closest built-in type (``ValueError``, ``FileExistsError``...) so that generic handlers
keep working.
"""

__all__ = [
    "SpareError",
    "ParameterError",
    "LayoutError",
    "LayoutFileError",
    "FailureSetError",
    "TraceError",
    "OutputExistsError",
    "OutputWriteError",
    "SolverError",
]


class SpareError(Exception):
    """Base class of every error raised by spare-opt on bad input or failed work."""


class ParameterError(SpareError, ValueError):
    """A numeric argument is out of range (for example ``N < 1`` or ``r > N``)."""


class LayoutError(SpareError, ValueError):
    """A stack layout breaks one of the invariants of the SPARe model.

    The message names the first violation found (group, layer, shard type).
    """


class LayoutFileError(SpareError):
    """A layout file is missing, unreadable, or not in the ``spare-layout`` format."""


class FailureSetError(SpareError, ValueError):
    """A failure set names a group id that is out of range, repeated or not an integer."""


class TraceError(SpareError):
    """A fault-trace file is missing, unreadable or malformed beyond repair."""


class OutputExistsError(SpareError, FileExistsError):
    """An output file exists already and overwriting was not asked for (``force``)."""


class OutputWriteError(SpareError, OSError):
    """An output file cannot be written: its folder is missing, it is a folder, or no permission."""


class SolverError(SpareError):
    """A solver (CP-SAT, flow) ended without a usable answer."""

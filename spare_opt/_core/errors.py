"""Exception hierarchy of spare-opt.

Every error the library raises on bad input or failed work is a :class:`SpareError`;
the CLI turns these into one-line messages and a non-zero exit.  Subclasses also derive
from the closest built-in type so that generic handlers keep working:

* an argument of the wrong *type* (a float where an integer is needed, a path where a
  :class:`~spare_opt.Layout` is needed) raises :class:`ParameterTypeError`, a
  ``TypeError``;
* a *value* out of range raises :class:`ParameterError` or a more specific
  ``ValueError`` subclass (:class:`LayoutError`, :class:`FailureSetError`,
  :class:`PlanError`);
* files that cannot be read or written raise :class:`LayoutFileError`,
  :class:`TraceError`, :class:`OutputExistsError` or :class:`OutputWriteError`;
* a solver that ends without a usable answer raises :class:`SolverError`;
* a topology (failure domains) or a node placement that is malformed, in a file or in
  memory, raises :class:`TopologyError` or :class:`PlacementError`;
* a failure-model file or document that cannot be read or holds bad values raises
  :class:`FailureModelError`;
* parallel work that cannot be run where it was sent (a Dask scheduler that cannot be
  reached, Dask missing, a worker process that died) raises :class:`ExecutorError`.
"""

__all__ = [
    "SpareError",
    "ParameterTypeError",
    "ParameterError",
    "LayoutError",
    "LayoutFileError",
    "FailureSetError",
    "PlanError",
    "TraceError",
    "OutputExistsError",
    "OutputWriteError",
    "SolverError",
    "TopologyError",
    "PlacementError",
    "FailureModelError",
    "ExecutorError",
    "RecommendationWarning",
]


class SpareError(Exception):
    """Base class of every error raised by spare-opt on bad input or failed work."""


class RecommendationWarning(UserWarning):
    """A layout that carries a recommended ``m`` (``metadata.micro_batches``) is run with another ``m``.

    The explicit value is used; the warning is given once per layout object and value
    (``docs/formats.md``, "Recommendation").
    """


class ParameterTypeError(SpareError, TypeError):
    """An argument has the wrong type (for example ``trials=1.5`` or a path where a Layout is needed)."""


class ParameterError(SpareError, ValueError):
    """A numeric or named argument is out of range (for example ``N < 1`` or ``r > N``)."""


class LayoutError(SpareError, ValueError):
    """A stack layout breaks one of the invariants of the SPARe model.

    The message names the first violation found (group, layer, shard type).
    """


class LayoutFileError(SpareError):
    """A layout file is missing, unreadable, or not in the ``spare-layout`` format."""


class FailureSetError(SpareError, ValueError):
    """A failure set names a group id that is out of range, repeated or not an integer."""


class PlanError(SpareError, ValueError):
    """A reorder plan breaks a rule of a valid plan (:func:`spare_opt.check_plan` names the first)."""


class TraceError(SpareError):
    """A fault-trace file is missing, unreadable or malformed beyond repair."""


class OutputExistsError(SpareError, FileExistsError):
    """An output file exists already and overwriting was not asked for (``force``)."""


class OutputWriteError(SpareError, OSError):
    """An output file cannot be written: its folder is missing, it is a folder, or no permission."""


class SolverError(SpareError):
    """A solver (CP-SAT, flow) ended without a usable answer, or was given an invalid model."""


class TopologyError(SpareError, ValueError):
    """A topology (failure domains of DP groups) is malformed, in memory or in a ``spare-topology`` file."""


class PlacementError(SpareError, ValueError):
    """A node placement (trace nodes to DP groups or domains) is malformed, in memory or in a file."""


class FailureModelError(SpareError, ValueError):
    """A failure-model file or document (:class:`spare_opt.FailureModel`) is missing, unreadable, malformed or out of range."""


class ExecutorError(SpareError, RuntimeError):
    """Parallel work could not be run where it was sent.

    A Dask scheduler that cannot be reached, Dask not installed, a worker process that
    died, a task that could not be sent or returned, or a task that failed on another
    process with an error that is not a :class:`SpareError` (the original exception is
    chained as ``__cause__``).  A :class:`SpareError` raised inside a task is re-raised
    as it is, whatever ran the task.
    """

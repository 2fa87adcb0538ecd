"""The cluster file: one description of an operator's cluster, read by every command that needs it.

A cluster file is TOML (read with the standard library's :mod:`tomllib`): the
cluster's timings at the top level and the source of its failures in a
``[failures]`` table.  Every key is the name of the command-line option that sets the
same thing, with ``_`` for ``-`` (``restart_seconds`` is ``--restart-seconds``), so a
file and the equivalent options give the same run; an option given on the command
line overrides the file.  Example::

    groups = 2048
    step_seconds = 30
    allreduce_seconds = 8
    restart_seconds = 2700
    save_seconds = 90
    heal_seconds = 60
    global_batch = 4096

    [failures]
    failure_model = "model.json"   # or trace = "fault_trace.json", or preset = "trace-400",
                                   # or a rate: failures_per_1000_node_days = 6.5 (node_mtbf_hours,
                                   # job_mttf_hours with job_nodes), with repair_hours

Relative paths in ``[failures]`` are read from the cluster file's folder.  An unknown
key, or a value of the wrong type or out of range, is refused with the key named.
"""

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from .._core import validation as check
from .._core.errors import ParameterError
from .._core.io import as_path, reading

__all__ = ["CLUSTER_KEYS", "FAILURE_KEYS", "ClusterFile", "load_cluster"]

#: Top-level keys of a cluster file: ``key -> (kind, meaning)``.  ``kind`` is ``"count"``
#: (an integer >= 1), ``"positive"`` (a number > 0) or ``"seconds"`` (a number >= 0).
CLUSTER_KEYS = {
    "groups": ("count", "DP groups N"),
    "step_seconds": ("positive", "compute of one fault-free step (one stack layer), seconds"),
    "allreduce_seconds": ("seconds", "gradient all-reduce per step, seconds"),
    "restart_seconds": ("seconds", "one global restart T_r, seconds"),
    "save_seconds": ("positive", "one checkpoint save T_s, seconds"),
    "heal_seconds": ("seconds", "a repaired group's heal before it rejoins, seconds"),
    "global_batch": ("count", "sequences per global batch"),
    "micro_batch_overhead_seconds": ("seconds", "fixed cost of one micro-batch, seconds"),
    "steps": ("count", "training steps"),
    "nodes_per_group": ("count", "nodes of one DP group: a group fails when any of its nodes fails"),
    "gradient_bytes": ("positive", "gradient bytes each group all-reduces per step (ring all-reduce model)"),
    "bandwidth_bytes_per_second": ("positive", "bus bandwidth of one ring link, bytes per second (ring model)"),
    "allreduce_latency_seconds": ("seconds", "fixed latency of the ring model's all-reduce, seconds"),
}
#: Keys of the ``[failures]`` table: ``key -> (kind, meaning)``; ``"path"`` values are
#: read relative to the cluster file's folder.
FAILURE_KEYS = {
    "trace": ("path", "fault trace file (InfiniteHBD or spare-failure-trace JSON, or a CSV fault log)"),
    "failure_model": ("path", "fitted failure model (spare-opt fit TRACE -o FILE)"),
    "preset": ("text", "built-in setting whose timings and Weibull failures are the defaults"),
    "window": ("window", "[START, END] days of the trace to use"),
    "format": ("text", "format of the trace file (json or csv)"),
    "time_unit": ("text", "unit of a CSV fault log's numeric times"),
    "time_scale": ("positive", "multiply trace times by this factor"),
    "nodes": ("count", "size of the cluster the trace was recorded on (a CSV log names only the nodes that failed)"),
    "failures_per_1000_node_days": ("positive", "failures as a rate: failures per 1,000 node-days"),
    "node_mtbf_hours": ("positive", "failures as a rate: one node's MTBF, hours"),
    "job_mttf_hours": ("positive", "failures as a rate: a job's mean time to failure, hours (with job_nodes)"),
    "job_nodes": ("count", "the nodes of the job whose MTTF job_mttf_hours gives"),
    "repair_hours": ("positive", "with a failure rate: the median repair time, hours"),
}
#: The failure sources of ``[failures]``: at most one may be given.
_SOURCES = ("trace", "failure_model", "preset")


@dataclass(frozen=True)
class ClusterFile:
    """A cluster file, read and checked (:func:`load_cluster`).

    Attributes
    ----------
    path : pathlib.Path
        The file.
    values : dict
        The top-level keys given (:data:`CLUSTER_KEYS`), ``int`` for counts and
        ``float`` for times.
    failures : dict
        The ``[failures]`` keys given (:data:`FAILURE_KEYS`), paths made absolute
        against the file's folder, ``window`` as a tuple of two floats.
    """

    path: Path
    values: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)

    def options(self):
        """dict: every key given, top level and ``[failures]``, as ``{option name with '_': value}``."""
        return {**self.values, **self.failures}

    def to_dict(self):
        """dict: JSON-ready, as read (``path`` as text, a window as a list)."""
        failures = {key: list(value) if key == "window" else value for key, value in self.failures.items()}
        return {"path": str(self.path), **self.values, "failures": failures}


def load_cluster(path):
    """Read a cluster file (TOML) and check every key.

    Parameters
    ----------
    path : str or os.PathLike
        The file; its keys are described in this module's docstring,
        :data:`CLUSTER_KEYS` and :data:`FAILURE_KEYS`.

    Returns
    -------
    ClusterFile

    Raises
    ------
    ParameterError
        The file is missing or unreadable, is not TOML (one that begins with a UTF-8
        byte-order mark is refused naming it), has a key that is not one of
        the known ones (the message names it and lists the known ones), a value of
        the wrong type or out of range (named), or two failure sources.

    Notes
    -----
    TOML is read by :func:`tomllib.loads` (Python 3.11 standard library, TOML 1.0).
    """
    import tomllib

    path = as_path(path, ParameterError, "cluster file")
    with reading(path, ParameterError, "cluster file", "a TOML cluster file"):
        text = path.read_text(encoding="utf-8")
    if text.startswith("\ufeff"):
        # tomllib's message for it is "Invalid statement (at line 1, column 1)": name the mark, as the layout reader does.
        raise ParameterError(f"{path}: not a valid TOML cluster file: it begins with a UTF-8 byte-order mark (BOM, "
                             "bytes EF BB BF), which TOML does not allow; save it as UTF-8 without a BOM")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ParameterError(f"{path}: not a valid TOML cluster file: {exc}") from None
    values, failures = {}, {}
    for key, value in doc.items():
        if key == "failures":
            if not isinstance(value, dict):
                raise ParameterError(f"{path}: 'failures' must be a table ([failures]), got {_kind(value)}")
            for name, item in value.items():
                if name not in FAILURE_KEYS:
                    raise ParameterError(f"{path}: unknown key {name!r} in [failures]; known: "
                                         f"{', '.join(FAILURE_KEYS)}")
                failures[name] = _checked(path, f"failures.{name}", FAILURE_KEYS[name][0], item)
            continue
        if key not in CLUSTER_KEYS:
            raise ParameterError(f"{path}: unknown key {key!r}; known: {', '.join(CLUSTER_KEYS)}, [failures]")
        values[key] = _checked(path, key, CLUSTER_KEYS[key][0], value)
    given = [name for name in _SOURCES if name in failures]
    if len(given) > 1 and not (set(given) == {"trace", "preset"} or set(given) == {"failure_model", "preset"}):
        raise ParameterError(f"{path}: [failures] gives both {given[0]} and {given[1]}: two sources of failures, "
                             "give one")
    return ClusterFile(path=path, values=values, failures=failures)


def _kind(value):
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean"}.get(type(value),
                                                                                        type(value).__name__)


def _checked(path, key, kind, value):
    """``value`` of ``key`` checked for ``kind`` (one ParameterError naming the key)."""
    where = f"{path}: {key}"
    if kind in ("text", "path"):
        if not isinstance(value, str) or not value.strip():
            raise ParameterError(f"{where} must be a non-empty string, got {_kind(value)}")
        if kind == "path":
            return str(value) if os.path.isabs(value) else str(path.parent / value)
        return value
    if kind == "window":
        if not isinstance(value, list) or len(value) != 2:
            raise ParameterError(f"{where} must be an array [START, END] of two numbers of days")
        start, end = (_number(where, item) for item in value)
        if not start < end:
            raise ParameterError(f"{where}: START {start:g} must be before END {end:g}")
        return (start, end)
    if kind == "count":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParameterError(f"{where} must be an integer, got {_kind(value)}")
        return check.integer(where, value, minimum=1)
    number = _number(where, value)
    if kind == "positive" and not number > 0:
        raise ParameterError(f"{where} must be > 0, got {number:g}")
    if number < 0:
        raise ParameterError(f"{where} must be >= 0, got {number:g}")
    return number


def _number(where, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParameterError(f"{where} must be a number, got {_kind(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise ParameterError(f"{where} must be a finite number, got {value!r}")
    return number

"""JSON fault traces (InfiniteHBD and ``spare-failure-trace``), and the reader of every format.

* the InfiniteHBD format (Shou et al., arXiv:2502.03885; public repository
  ``stepfun-ai/InfiniteHBD-Trace``): a JSON list of events
  ``{"node_id": str, "event_time": days, "event_type": "fault_start" | "fault_end",
  "fault_type": {"Level": str, "Class": str, "Desc": str}}``;
* the project's own ``spare-failure-trace`` format, written by
  :func:`write_fault_trace`: a JSON object ``{"format": "spare-failure-trace",
  "version": 1, "nodes": int, "metadata": {...}, "events": [...]}`` whose events have
  the same shape as above.

:func:`read_fault_trace` reads a file of any format (these two, or a CSV log through
:mod:`spare_opt.traces.csv_format`), chosen by :func:`trace_file_format`.
"""

import json
import math


from .._core import validation as check
from .._core.io import as_path, check_version, read_json_file, reading, write_atomic
from .._core.errors import ParameterError, TraceError
from .csv_format import TIME_UNITS, parse_fault_csv
from .trace import END, START, TRACE_FORMAT, TRACE_VERSION, _Events, _build_trace, _shown, _shown_text

__all__ = [
    "TRACE_FILE_FORMATS",
    "read_fault_trace",
    "parse_fault_events",
    "trace_file_format",
    "write_fault_trace",
]


# ----------------------------------------------------------------------------- reading
#: Trace file formats :func:`read_fault_trace` reads, chosen by ``format=`` or the file name.
TRACE_FILE_FORMATS = ("json", "csv")


def read_fault_trace(path, *, format=None, time_unit=None):
    """Read a node fault trace: InfiniteHBD JSON, ``spare-failure-trace`` JSON or a CSV fault log.

    Parameters
    ----------
    path : str or os.PathLike
        The trace file.
    format : {"json", "csv"}, optional
        The file format; default: ``"csv"`` for a name ending in ``.csv`` (any case),
        ``"json"`` otherwise.  JSON covers both JSON formats (a list of events is
        InfiniteHBD, an object is ``spare-failure-trace``).
    time_unit : {"seconds", "minutes", "hours", "days"}, optional
        CSV only, and needed there exactly when the times are numbers: their unit.
        ISO-8601 timestamps carry their own unit; JSON event times are days.

    Returns
    -------
    FaultTrace
        Events sorted by time, nodes numbered in order of their first effective
        fault (:class:`FaultTrace`), irregular events recorded in ``irregular`` and
        flagged in ``ignored``.

    Raises
    ------
    TraceError
        ``path`` is not a path or is empty; the file is missing or unreadable; JSON:
        not JSON (a duplicated key, an integer too long to convert included), neither
        a list of events nor a ``spare-failure-trace`` document, an unsupported
        version (``1.0`` and ``true`` are not the version ``1``), more distinct nodes
        than the document's ``nodes``, or an event with a missing key, a value of the
        wrong type, a non-finite time or an unknown ``event_type``; CSV: a bad header
        or row (:func:`parse_fault_csv`); or the times span more than a float can
        hold.  The message is one line naming the file and the first bad event
        (0-based index) or line (1-based).
    ParameterTypeError
        ``format`` or ``time_unit`` is not a string.
    ParameterError
        ``format`` or ``time_unit`` is not one of the values above, or ``time_unit``
        is given for a JSON trace (where it would do nothing).

    Notes
    -----
    Irregular events are never fatal; see :data:`IRREGULAR_KINDS` for what is done
    with each kind.  The node state used to detect them is a simple up/down state per
    node, replayed in time order: a ``fault_start`` while the node is down, or a
    ``fault_end`` while it is up, is irregular.

    References
    ----------
    Shou et al., "InfiniteHBD: Building Datacenter-Scale High-Bandwidth Domain for
    LLM with Optical Circuit Switching Transceivers", arXiv:2502.03885 (the format
    and the public trace).
    """
    path = as_path(path, TraceError, "fault trace path")
    format = trace_file_format(path, format)
    if time_unit is not None:
        time_unit = check.choice("time_unit", time_unit, tuple(TIME_UNITS))
    if format == "csv":
        with reading(path, TraceError, "fault trace", "a CSV fault log"):
            text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (spreadsheets) is dropped
        return parse_fault_csv(text, source=str(path), time_unit=time_unit)
    if time_unit is not None:
        raise ParameterError(f"time_unit applies to CSV fault logs only; {path} is read as JSON, "
                             "whose event times are days")
    doc = read_json_file(path, TraceError, "fault trace", expected="a JSON fault trace", malformed="not valid JSON")
    return parse_fault_events(doc, source=str(path))


def trace_file_format(path, format=None):
    """The format a trace file is read in: ``format`` when given, else from the file name.

    Parameters
    ----------
    path : str or os.PathLike
    format : {"json", "csv"} or None

    Returns
    -------
    str
        ``"csv"`` for a name ending in ``.csv`` (any case), ``"json"`` otherwise, or
        ``format`` itself.

    Raises
    ------
    ParameterTypeError, ParameterError
        ``format`` is not one of :data:`TRACE_FILE_FORMATS`.
    """
    if format is not None:
        return check.choice("format", format, TRACE_FILE_FORMATS)
    return "csv" if str(path).lower().endswith(".csv") else "json"


def parse_fault_events(doc, source="<memory>"):
    """Build a :class:`FaultTrace` from an already parsed JSON document.

    Parameters
    ----------
    doc : list or dict
        A list of InfiniteHBD events, or a ``spare-failure-trace`` document.
    source : str
        Name used in error messages and kept in :attr:`FaultTrace.source`.

    Returns
    -------
    FaultTrace

    Raises
    ------
    TraceError
        As :func:`read_fault_trace`.
    """
    metadata = {}
    cluster_nodes = None
    if isinstance(doc, list):
        events, fmt = doc, "infinitehbd"
    elif isinstance(doc, dict):
        if doc.get("format") != TRACE_FORMAT:
            shown = doc.get("format")
            shown = _shown_text(shown) if isinstance(shown, str) else repr(shown)[:60]
            raise TraceError(
                f"{source}: expected a JSON list of fault events (InfiniteHBD format) or a "
                f"{TRACE_FORMAT!r} document, got an object with format {shown}"
            )
        check_version(doc, TRACE_VERSION, source, TraceError, TRACE_FORMAT)
        events = doc.get("events")
        if not isinstance(events, list):
            raise TraceError(f"{source}: 'events' must be a list of fault events")
        cluster_nodes = doc.get("nodes")
        # type() is int: true is an int to isinstance().
        if cluster_nodes is not None and (type(cluster_nodes) is not int or cluster_nodes < 1):
            shown = check.int_text(cluster_nodes) if type(cluster_nodes) is int else repr(cluster_nodes)[:60]
            raise TraceError(f"{source}: 'nodes' must be a positive integer or null, got {shown}")
        metadata = doc.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise TraceError(f"{source}: 'metadata' must be an object")
        fmt = TRACE_FORMAT
    else:
        raise TraceError(f"{source}: expected a JSON list of fault events, got {type(doc).__name__}")

    raw = _Events()
    for i, event in enumerate(events):
        time, is_start, node_id, fault_class = _check_event(event, i, source)
        raw.times.append(time)
        raw.starts.append(is_start)
        raw.ids.append(node_id)
        raw.classes.append(fault_class)
    raw.where = None  # JSON events are named by their position: "event 12" (made when needed)
    raw.partner = [-1] * len(raw.times)
    if cluster_nodes is not None:
        distinct = len(set(raw.ids))
        if distinct > cluster_nodes:
            raise TraceError(f"{source}: 'nodes' says the cluster has {cluster_nodes} nodes, but the events "
                             f"name {distinct} distinct nodes")
    return _build_trace(raw, source=source, fmt=fmt, cluster_nodes=cluster_nodes, metadata=metadata)


def _check_event(event, i, source):
    """Validate event ``i``; return ``(time, is_start, node_id, fault_class)`` or raise TraceError."""
    where = f"{source}: event {i}"
    if not isinstance(event, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type(event).__name__}")
    for key in ("node_id", "event_time", "event_type", "fault_type"):
        if key not in event:
            raise TraceError(f"{where}: missing key {key!r}")
    node_id = event["node_id"]
    if not isinstance(node_id, str) or not node_id:
        raise TraceError(f"{where}: 'node_id' must be a non-empty string, got {_shown(node_id)}")
    time = event["event_time"]
    if isinstance(time, bool) or not isinstance(time, (int, float)):
        raise TraceError(f"{where}: 'event_time' must be a number of days, got {_shown(time)}")
    try:
        finite = math.isfinite(time)
    except OverflowError:  # an integer beyond the float range
        finite = False
    if not finite:
        shown = time if isinstance(time, float) else check.int_text(time)
        raise TraceError(f"{where}: 'event_time' must be finite, got {shown}")
    kind = event["event_type"]
    if kind not in (START, END):
        raise TraceError(f"{where}: unknown 'event_type' {_shown(kind)} (expected {START!r} or {END!r})")
    fault_type = event["fault_type"]
    if not isinstance(fault_type, dict):
        raise TraceError(f"{where}: 'fault_type' must be an object with Level, Class, Desc")
    fault_class = fault_type.get("Class")
    if not isinstance(fault_class, str):
        raise TraceError(f"{where}: 'fault_type.Class' must be a string, got {_shown(fault_class)}")
    for key in ("Level", "Desc"):
        if key in fault_type and not isinstance(fault_type[key], str):
            raise TraceError(f"{where}: 'fault_type.{key}' must be a string, got {_shown(fault_type[key])}")
    return float(time), kind == START, node_id, fault_class


def write_fault_trace(doc, path, force=False):
    """Write a ``spare-failure-trace`` document atomically, one event per line.

    Parameters
    ----------
    doc : dict
        As returned by :func:`synthetic_fault_trace`; it is checked by
        :func:`parse_fault_events` before anything is written.
    path : str or os.PathLike
    force : bool, default False
        Overwrite an existing file.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    TraceError
        ``doc`` is not a valid ``spare-failure-trace`` document, or its metadata holds
        a value JSON cannot hold (NaN, infinity, an object that is not JSON).
    OutputExistsError
        ``path`` exists and ``force`` is false.
    OutputWriteError
        ``path`` cannot be written (a folder, a missing folder, no permission...).
    """
    if not isinstance(doc, dict):
        raise TraceError(f"trace document: expected a {TRACE_FORMAT!r} object, got {type(doc).__name__}")
    parse_fault_events(doc, source="trace document")
    head = {k: v for k, v in doc.items() if k != "events"}
    try:
        # allow_nan=False: JSON has no NaN or infinity (the metadata is free).
        lines = ",\n  ".join(json.dumps(event, sort_keys=True, allow_nan=False) for event in doc["events"])
        text = json.dumps(head, indent=1, sort_keys=True, allow_nan=False)[:-2] + f',\n "events": [\n  {lines}\n ]\n}}\n'
    except (TypeError, ValueError) as exc:
        reason = "a NaN or infinite number" if "JSON compliant" in str(exc) else str(exc)
        raise TraceError(f"trace document: cannot be written as JSON ({reason})") from None
    return write_atomic(path, text, force=force)

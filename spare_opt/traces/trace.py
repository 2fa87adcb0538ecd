"""Node fault traces: the InfiniteHBD JSON format, the project's generated traces, CSV fault logs.

A fault trace is a list of node fault events: a node (server) goes down
(``fault_start``) and comes back (``fault_end``) at times measured in days.  Three file
formats are read (``docs/formats.md``, ``docs/replay.md``):

* the InfiniteHBD format (Shou et al., arXiv:2502.03885; public repository
  ``stepfun-ai/InfiniteHBD-Trace``): a JSON list of events
  ``{"node_id": str, "event_time": days, "event_type": "fault_start" | "fault_end",
  "fault_type": {"Level": str, "Class": str, "Desc": str}}``;
* the project's own ``spare-failure-trace`` format, written by
  :func:`synthetic_fault_trace` / :func:`write_fault_trace`: a JSON object
  ``{"format": "spare-failure-trace", "version": 1, "nodes": int, "metadata": {...},
  "events": [...]}`` whose events have the same shape as above;
* a plain CSV fault log (:func:`parse_fault_csv`): a header ``node,start,end`` with
  optional ``domain`` and ``kind`` columns, one row per fault, times as ISO-8601
  timestamps or as numbers in a given unit, ``end`` empty while a fault is open.

Real data is irregular: a node may get a second ``fault_start`` while it is already
down (overlapping faults of different classes) or a ``fault_end`` with no open fault,
and a file may not be sorted by time.  :func:`read_fault_trace` handles each of these,
records what it did in :attr:`FaultTrace.irregular`, and never fails on them; it fails
(:class:`~spare_opt.errors.TraceError`) only on a file it cannot read at all.
"""

import csv
import datetime
import io
import json
import math
import re
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import _validation as check
from ._io import as_path, check_version, read_json_file, reading, write_atomic
from ._stats import weibull_renewals
from .errors import ParameterError, TraceError
from .placement import Placement

__all__ = [
    "FaultTrace",
    "Instant",
    "IrregularEvent",
    "IRREGULAR_KINDS",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "TRACE_FILE_FORMATS",
    "TIME_UNITS",
    "CSV_COLUMNS",
    "CSV_OPTIONAL_COLUMNS",
    "read_fault_trace",
    "parse_fault_events",
    "parse_fault_csv",
    "trace_file_format",
    "trace_instants",
    "instant_batches",
    "synthetic_fault_trace",
    "write_fault_trace",
]

TRACE_FORMAT = "spare-failure-trace"
TRACE_VERSION = 1

START = "fault_start"
END = "fault_end"

#: Kinds of irregular events, and what the reader does with each.
IRREGULAR_KINDS = {
    "start-while-down": "fault_start for a node that is already down: ignored (the node stays down from its "
                        "earlier start); in a CSV log the whole row (its end too) is ignored",
    "end-without-start": "fault_end for a node that is not down: ignored",
    "out-of-order": "event earlier than an event before it in the file: sorted into place (stable sort by time; "
                    "JSON only, the rows of a CSV log need not be in time order)",
}


class IrregularEvent(NamedTuple):
    """One irregular event found by :func:`read_fault_trace`.

    Attributes
    ----------
    index : int
        Position of the event in the time-sorted arrays of the :class:`FaultTrace`.
    file_index : int
        Position of the event in the file (0-based).
    kind : str
        One of :data:`IRREGULAR_KINDS`.
    message : str
        One line saying what was irregular and what was done.
    """

    index: int
    file_index: int
    kind: str
    message: str


@dataclass(frozen=True)
class FaultTrace:
    """A node fault trace, sorted by time.

    All per-event arrays have length ``E`` (number of events) and are sorted by
    ``times_days`` with a stable sort, so events at the same instant keep their
    file order (CSV logs: at one instant the end of a fault comes before the start of
    another, and a zero-length fault's end after its start; ``parse_fault_csv``).

    Nodes are numbered ``0, 1, ...`` in order of their first *effective* fault: the
    first ``fault_start`` of the node that the reader did not ignore, in the sorted
    trace; nodes with no effective fault come last, in order of first appearance.
    An ignored event therefore changes no node's number, hence no node's group
    (:meth:`node_groups`).

    Attributes
    ----------
    times_days : numpy.ndarray of float64, shape (E,)
        Event times in days.
    is_start : numpy.ndarray of bool, shape (E,)
        True for ``fault_start``, False for ``fault_end``.
    node : numpy.ndarray of int32, shape (E,)
        Node index of each event (numbered as above).
    node_ids : tuple of str
        ``node_ids[i]`` is the identifier of node index ``i`` in the file.
    fault_class : tuple of str, length E
        The ``fault_type.Class`` of each event (``"GPU"``, ``"NIC"``...); for a CSV
        log the ``kind`` column (``"unspecified"`` when empty or absent).
    file_index : numpy.ndarray of int64, shape (E,)
        Position of each event in the file (CSV: in the file's list of events, a
        row's start then its end).
    ignored : numpy.ndarray of bool, shape (E,)
        True for the events the reader ignores (``start-while-down`` and
        ``end-without-start``); replay skips them.
    irregular : tuple of IrregularEvent
        Every irregular event with what was done, in time order.
    source : str
        Where the trace came from (a path or ``"<memory>"``).
    format : str
        ``"infinitehbd"``, ``"spare-failure-trace"`` or ``"csv"``.
    cluster_nodes : int or None
        Number of nodes of the traced cluster when the file says so (the
        ``spare-failure-trace`` format does; InfiniteHBD files list only nodes that
        failed, so this is ``None`` for them).
    metadata : dict
        Free information from a ``spare-failure-trace`` file (generator, seed...); for
        a CSV log ``time_origin`` (ISO timestamps: the time of day 0) or ``time_unit``.
    open_at_end : int
        Nodes still down after the last event (a fault with no ``fault_end`` yet).
    node_domains : tuple of (str or None)
        CSV logs: the failure domain of each node index (``None`` when the log does
        not give one); ``()`` for formats that have no domains.
    """

    times_days: np.ndarray
    is_start: np.ndarray
    node: np.ndarray
    node_ids: tuple
    fault_class: tuple
    file_index: np.ndarray
    ignored: np.ndarray
    irregular: tuple = ()
    source: str = "<memory>"
    format: str = "infinitehbd"
    cluster_nodes: int | None = None
    metadata: dict = field(default_factory=dict)
    open_at_end: int = 0
    node_domains: tuple = ()

    @property
    def n_events(self):
        """int: number of events ``E``."""
        return int(self.times_days.size)

    @property
    def n_nodes(self):
        """int: number of distinct nodes in the trace."""
        return len(self.node_ids)

    @property
    def n_starts(self):
        """int: number of ``fault_start`` events (irregular ones included)."""
        return int(self.is_start.sum())

    @property
    def n_ends(self):
        """int: number of ``fault_end`` events (irregular ones included)."""
        return int(self.n_events - self.n_starts)

    @property
    def span_days(self):
        """tuple of float: time of the first and the last event (days); ``(0, 0)`` when empty."""
        if self.n_events == 0:
            return (0.0, 0.0)
        return (float(self.times_days[0]), float(self.times_days[-1]))

    def irregular_counts(self):
        """dict of str to int: number of irregular events of each kind (every kind listed)."""
        counts = {kind: 0 for kind in IRREGULAR_KINDS}
        for event in self.irregular:
            counts[event.kind] += 1
        return counts

    def node_groups(self, groups, *, seed=None, placement=None, members=False):
        """Map nodes to DP groups for a cluster of ``groups`` groups.

        By default node index ``i`` (order of first effective fault, see
        :class:`FaultTrace`) becomes group ``i``, the rule of the paper's replay.  With
        ``seed``, the nodes (still taken in that order) get distinct groups drawn at
        random instead:
        ``numpy.random.default_rng(seed).permutation(groups)[i]``.  Either way nodes
        beyond the cluster (``i >= groups``) get ``-1`` and are skipped by replay.
        With ``placement`` (a :class:`~spare_opt.placement.Placement`), each node takes
        the groups the placement gives it by node id (a group, several groups, or every
        group of a domain); nodes it does not list get none.

        Parameters
        ----------
        groups : int
            Number of DP groups ``N >= 1``.
        seed : int, optional
            Seed of a random placement; ``None`` for order of first effective fault.
        placement : Placement, optional
            An explicit placement (not together with ``seed``).
        members : bool, default False
            Return every group of every node (CSR) instead of one group per node.

        Returns
        -------
        numpy.ndarray of int32, shape (n_nodes,)
            Without ``members``: the group of each node (the lowest, when a placement
            gives it several), or ``-1``.
        (indptr, group_ids) : tuple of numpy.ndarray
            With ``members``: the groups of node ``i`` are
            ``group_ids[indptr[i]:indptr[i + 1]]`` (int64 ``indptr``, int32 ids, sorted).

        Raises
        ------
        ParameterTypeError
            ``groups`` or ``seed`` is not an integer, ``placement`` not a Placement.
        ParameterError
            ``groups < 1``, ``seed < 0``, or both ``seed`` and ``placement``.
        PlacementError
            The placement does not fit ``N`` (see :meth:`Placement.resolve`).

        Notes
        -----
        Order of first fault puts nodes that fail together at the same instant
        on neighbouring group ids, and every traced node on the lowest ids; a
        circulant layout whose holder sets are narrow windows of ids then sees
        failures bunched on the same windows (``docs/replay.md`` shows the effect on
        the InfiniteHBD trace).  A random placement removes that artefact; an explicit
        placement replaces it by the cluster's real one.
        """
        groups = check.count("groups N", groups)
        members = check.flag("members", members)
        if seed is not None:
            seed = check.seed(seed, "placement seed")
        if placement is not None:
            check.instance("placement", placement, Placement, " (spare_opt.Placement.load)")
            if seed is not None:
                raise ParameterError("give a placement or a placement seed, not both")
            indptr, group_ids = placement.resolve(self.node_ids, int(groups))
            if members:
                return indptr, group_ids
            mapping = np.full(self.n_nodes, -1, dtype=np.int32)
            placed = np.diff(indptr) > 0
            mapping[placed] = group_ids[indptr[:-1][placed]]
            return mapping
        mapping = np.full(self.n_nodes, -1, dtype=np.int32)
        placed = min(self.n_nodes, int(groups))
        if seed is None:
            mapping[:placed] = np.arange(placed, dtype=np.int32)
        else:
            mapping[:placed] = np.random.default_rng(seed).permutation(int(groups))[:placed]
        if not members:
            return mapping
        indptr = np.concatenate(([0], np.cumsum(mapping >= 0))).astype(np.int64)
        return indptr, mapping[mapping >= 0]

    def summary(self):
        """dict: a JSON-ready description (counts, span, irregular events)."""
        first, last = self.span_days
        return {
            "source": self.source,
            "format": self.format,
            "events": self.n_events,
            "fault_starts": self.n_starts,
            "fault_ends": self.n_ends,
            "nodes": self.n_nodes,
            "cluster_nodes": self.cluster_nodes,
            "span_days": [first, last],
            "open_at_end": self.open_at_end,
            "irregular": self.irregular_counts(),
            "irregular_events": [
                {"file_index": e.file_index, "kind": e.kind, "message": e.message} for e in self.irregular
            ],
        }


# ----------------------------------------------------------------------------- instants
class Instant(NamedTuple):
    """The events of a trace at one instant, mapped to DP groups (see :func:`trace_instants`).

    Attributes
    ----------
    time_days : float
        The instant (days).
    start, stop : int
        The events of the instant are ``start .. stop - 1`` in the time-sorted trace.
    failing : numpy.ndarray of int32
        The groups that the instant's usable ``fault_start`` events fail, each once, in
        event order.
    failing_events : numpy.ndarray of int64
        For each group of ``failing``, the index of the event that fails it.
    recovering : numpy.ndarray of int32
        The groups whose node's usable ``fault_end`` happens at this instant, each once,
        in event order (``repair`` semantics bring them back; ``paper`` semantics ignore
        them).
    recovering_events : numpy.ndarray of int64
        For each group of ``recovering``, the index of its ``fault_end`` event.
    """

    time_days: float
    start: int
    stop: int
    failing: np.ndarray
    failing_events: np.ndarray
    recovering: np.ndarray
    recovering_events: np.ndarray


def trace_instants(trace, groups, *, placement_seed=None, placement=None):
    """A trace as a sequence of instants, each with the DP groups its fault starts fail.

    The one trace-to-failure-batches step shared by :func:`spare_opt.replay_trace` and
    the trace-driven simulation (:func:`spare_opt.simulation.trace_failures`): nodes map
    to groups by :meth:`FaultTrace.node_groups`; events at the same time form one
    instant (one reorder decision); a ``fault_start`` or ``fault_end`` is *usable* when
    the reader did not ignore it and its node maps to a group; several usable starts on
    one group at one instant fail it once (likewise for ends), and an event whose node
    maps to several groups (a placement on a domain) takes all of them.  Whether a
    group is already down, and what an end does (nothing under the paper's semantics,
    a recovery under ``repair`` semantics), is the caller's state.

    Parameters
    ----------
    trace : FaultTrace
    groups : int
        Number of DP groups ``N``.
    placement_seed : int, optional
        Random node placement (:meth:`FaultTrace.node_groups`).
    placement : Placement, optional
        Explicit node placement (:meth:`FaultTrace.node_groups`).

    Returns
    -------
    instants : list of Instant
        Every distinct event time, in time order (instants with no usable start
        included, with empty ``failing``).
    node_group : numpy.ndarray of int32, shape (n_nodes,)
        The group of each node (the lowest of its groups), ``-1`` for nodes with none.

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a :class:`FaultTrace`, ``groups`` or ``placement_seed`` is not
        an integer, ``placement`` not a Placement.
    ParameterError
        ``groups < 1``, a negative ``placement_seed``, or both placements.
    PlacementError
        The placement does not fit ``N``.
    """
    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    members = trace.node_groups(groups, seed=placement_seed, placement=placement, members=True)
    return _instants(trace, members)


def _instants(trace, members):
    """:func:`trace_instants` given the groups of every node (``(indptr, group_ids)``, from
    :meth:`FaultTrace.node_groups` with ``members=True``), for callers that need them too."""
    indptr, group_ids = members
    sizes = np.diff(indptr)
    node_group = np.full(trace.n_nodes, -1, dtype=np.int32)
    node_group[sizes > 0] = group_ids[indptr[:-1][sizes > 0]]
    count = trace.n_events
    times = trace.times_days
    if count == 0:
        return [], node_group
    node_sizes = sizes[trace.node]
    usable = ~trace.ignored & (node_sizes > 0)
    usable_start = usable & trace.is_start
    usable_end = usable & ~trace.is_start
    bounds = np.concatenate(([0], np.flatnonzero(np.diff(times)) + 1, [count]))
    instants = []
    for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        starts = start + np.flatnonzero(usable_start[start:stop])
        ends = start + np.flatnonzero(usable_end[start:stop])
        failing, failing_events = _groups_once(trace, indptr, group_ids, starts)
        recovering, recovering_events = _groups_once(trace, indptr, group_ids, ends)
        instants.append(Instant(float(times[start]), start, stop, failing, failing_events, recovering,
                                recovering_events))
    return instants, node_group


def instant_batches(trace, instant, members):
    """The usable events of one instant as batches in file order, for ``repair`` semantics.

    Under ``repair`` semantics events are taken in time order and, at one instant, in
    file order; the order of a ``fault_start`` and a ``fault_end`` of one instant then
    matters (a fault that starts and ends at the same instant takes its group out and
    brings it back).  A *batch* is a maximal run of consecutive usable events of one
    kind (usable as in :func:`trace_instants`; events that are not usable neither
    belong to a batch nor end one): the starts of a batch fail together (one reorder
    decision), the ends of a batch recover together.

    Parameters
    ----------
    trace : FaultTrace
    instant : Instant
        One instant of ``trace_instants(trace, ...)``.
    members : tuple of numpy.ndarray
        ``(indptr, group_ids)``, the groups of every node
        (:meth:`FaultTrace.node_groups` with ``members=True``, the same placement as
        the instants).

    Returns
    -------
    list of tuple
        ``(is_start, events)`` per batch, in file order: ``is_start`` is True for a
        batch of ``fault_start`` events; ``events`` (int64) the indices of its events.

    Examples
    --------
    >>> from spare_opt.trace import instant_batches, parse_fault_events, trace_instants
    >>> def ev(node, kind):
    ...     return {"node_id": node, "event_time": 1.0, "event_type": kind, "fault_type": {"Class": "GPU"}}
    >>> trace = parse_fault_events([ev("a", "fault_start"), ev("b", "fault_start"), ev("a", "fault_end")])
    >>> instants, _ = trace_instants(trace, 4)
    >>> members = trace.node_groups(4, members=True)
    >>> [(is_start, events.tolist()) for is_start, events in instant_batches(trace, instants[0], members)]
    [(True, [0, 1]), (False, [2])]
    """
    indptr = members[0]
    window = slice(instant.start, instant.stop)
    usable = np.flatnonzero(~trace.ignored[window] & (np.diff(indptr)[trace.node[window]] > 0))
    batches = []
    if usable.size == 0:
        return batches
    kinds = trace.is_start[window][usable]
    cuts = np.concatenate(([0], np.flatnonzero(kinds[1:] != kinds[:-1]) + 1, [usable.size]))
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        batches.append((bool(kinds[a]), (instant.start + usable[a:b]).astype(np.int64)))
    return batches


def _groups_once(trace, indptr, group_ids, events):
    """The groups of ``events`` (indices), each once, in event order, with the event of each.

    A node may have several groups (``indptr``/``group_ids``: CSR by node, from
    :meth:`FaultTrace.node_groups` with ``members``): its event takes all of them.
    """
    nodes = trace.node[events]
    per_event = np.diff(indptr)[nodes]
    event_of = np.repeat(events, per_event)
    within = np.arange(event_of.size) - np.repeat(np.cumsum(per_event) - per_event, per_event)
    event_groups = group_ids[np.repeat(indptr[nodes], per_event) + within]
    _, first = np.unique(event_groups, return_index=True)
    keep = np.sort(first)  # event order, each group once
    return event_groups[keep].astype(np.int32), event_of[keep].astype(np.int64)


def _placement_text(placement_seed, placement):
    """How nodes were placed on groups, in words (the ``placement`` key of replay and simulation summaries)."""
    if placement is not None:
        where = "" if placement.source == "placement" else f" {placement.source}"
        return f"placement{where} ({len(placement.nodes)} nodes listed)"
    return "first fault" if placement_seed is None else f"random, seed {placement_seed}"


# ----------------------------------------------------------------------------- reading
#: Trace file formats :func:`read_fault_trace` reads, chosen by ``format=`` or the file name.
TRACE_FILE_FORMATS = ("json", "csv")
#: Units of the numeric times of a CSV fault log, in days.
TIME_UNITS = {"seconds": 1.0 / 86400.0, "minutes": 1.0 / 1440.0, "hours": 1.0 / 24.0, "days": 1.0}
#: Columns of a CSV fault log: the required ones, then the optional ones.
CSV_COLUMNS = ("node", "start", "end")
CSV_OPTIONAL_COLUMNS = ("domain", "kind")
#: Fault class of a CSV row whose ``kind`` is empty or absent.
UNSPECIFIED_KIND = "unspecified"


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


class _Events:
    """Raw events in file order, before sorting (the common input of :func:`_build_trace`)."""

    def __init__(self):
        self.times = []
        self.starts = []
        self.ids = []
        self.classes = []
        self.where = []      # "event 12", "line 5": how messages name the event's place in the file
        self.partner = []    # CSV: index of the other event of the row (-1 for none)


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


def _build_trace(raw, *, source, fmt, cluster_nodes=None, metadata=None, node_domains=None, csv_rows=False):
    """Sort events, find irregular ones, number nodes: the common back end of every reader.

    ``csv_rows``: the events come in (start, end) pairs of one row (``raw.partner``);
    ties at one instant put ends of earlier faults before starts (back-to-back faults)
    and the end of a zero-length fault after its start; a row whose start is ignored
    is ignored whole; rows need not be in time order (no ``out-of-order``).
    """
    count = len(raw.times)
    times = np.asarray(raw.times, dtype=np.float64).reshape(count)
    starts = np.asarray(raw.starts, dtype=bool).reshape(count)
    partner = np.asarray(raw.partner, dtype=np.int64).reshape(count)
    ids, classes = raw.ids, raw.classes

    def where(i):
        return f"event {i}" if raw.where is None else raw.where[i]

    with np.errstate(over="ignore"):
        span_finite = count == 0 or np.isfinite(times.max() - times.min())
    if not span_finite:
        # The span and the time-weighted means of replay would be inf or NaN.
        raise TraceError(
            f"{source}: event times from day {times.min()} to day {times.max()} span more than a float can hold"
        )
    if count and times.min() < 0:
        # Times are days from the start of the job's clock: the simulation places events at
        # them and a trace's T0 is its last day, so an event before day 0 has no meaning.
        first = int(np.argmax(times < 0))
        raise TraceError(f"{source}: {where(first)}: time {times[first]:g} days is before day 0 "
                         "(times are days from the start of the trace)")
    if csv_rows:
        # rank 0: an end that closes a fault of positive length; 1: a start; 2: the end
        # of a zero-length fault (it must follow its own start).
        rank = np.where(starts, 1, 0)
        has_partner = partner >= 0
        zero = ~starts & has_partner
        zero[zero] = times[partner[zero]] == times[zero]
        rank[zero] = 2
        order = np.lexsort((np.arange(count), rank, times))
    else:
        order = np.argsort(times, kind="stable")
    times_sorted = times[order]
    starts_sorted = starts[order]
    classes_sorted = tuple(classes[i] for i in order)
    position = np.empty(count, dtype=np.int64)
    position[order] = np.arange(count)

    # Provisional node numbers (first appearance in time order), for the state below.
    first_seen = {}
    provisional = np.empty(count, dtype=np.int64)
    for k, i in enumerate(order.tolist()):
        provisional[k] = first_seen.setdefault(ids[i], len(first_seen))
    names = tuple(first_seen)

    irregular = []
    # Out of order: earlier than something before it in the file (JSON events only).
    if count and not csv_rows:
        running_max = np.maximum.accumulate(times)
        late = np.flatnonzero(times[1:] < running_max[:-1]) + 1
        for i in late.tolist():
            irregular.append(
                IrregularEvent(
                    int(position[i]), int(i), "out-of-order",
                    f"{where(i)}: {'fault_start' if starts[i] else 'fault_end'} at day {float(times[i])} for node "
                    f"{_shown_text(ids[i])} comes after an event at day {float(running_max[i - 1])} in the file: "
                    "sorted into place",
                )
            )

    # Up/down state per node, in time order.
    ignored = np.zeros(count, dtype=bool)
    down_since = {}
    last_end = {}
    for k in range(count):
        if ignored[k]:
            continue  # the end of a CSV row whose start was ignored
        node = int(provisional[k])
        file_i = int(order[k])
        if starts_sorted[k]:
            if node in down_since:
                since_k = down_since[node]
                ignored[k] = True
                what = "ignored"
                if partner[file_i] >= 0:
                    ignored[position[partner[file_i]]] = True
                    what = "the whole row is ignored (its end too)"
                irregular.append(
                    IrregularEvent(
                        k, file_i, "start-while-down",
                        f"{where(file_i)}: fault_start ({classes_sorted[k]}) at day {float(times_sorted[k])} for node "
                        f"{_shown_text(names[node])}, already down since day {float(times_sorted[since_k])} ({classes_sorted[since_k]}): "
                        f"{what}",
                    )
                )
            else:
                down_since[node] = k
        else:
            if node in down_since:
                del down_since[node]
                last_end[node] = k
            else:
                ignored[k] = True
                previous = last_end.get(node)
                context = "it never went down" if previous is None else (
                    f"its last fault ended at day {float(times_sorted[previous])}"
                )
                irregular.append(
                    IrregularEvent(
                        k, file_i, "end-without-start",
                        f"{where(file_i)}: fault_end ({classes_sorted[k]}) at day {float(times_sorted[k])} for node "
                        f"{_shown_text(names[node])}, which is not down ({context}): ignored",
                    )
                )
    irregular.sort(key=lambda e: (e.index, e.kind))

    # Final node numbers: order of the first *effective* fault (a fault_start the reader
    # did not ignore), then nodes with none, in order of first appearance.  An ignored
    # event therefore changes no node's group (docs/replay.md).
    renumber = np.full(len(names), -1, dtype=np.int64)
    next_id = 0
    for k in np.flatnonzero(starts_sorted & ~ignored).tolist():
        node = provisional[k]
        if renumber[node] < 0:
            renumber[node] = next_id
            next_id += 1
    for node in range(len(names)):
        if renumber[node] < 0:
            renumber[node] = next_id
            next_id += 1
    nodes = renumber[provisional].astype(np.int32) if count else np.zeros(0, dtype=np.int32)
    node_ids = [None] * len(names)
    for old, new in enumerate(renumber.tolist()):
        node_ids[new] = names[old]
    domains = ()
    if node_domains is not None:
        domains = [None] * len(names)
        for old, new in enumerate(renumber.tolist()):
            domains[new] = node_domains.get(names[old])
        domains = tuple(domains)

    for array in (times_sorted, starts_sorted, nodes, ignored):
        array.setflags(write=False)
    file_index = order.astype(np.int64)
    file_index.setflags(write=False)
    return FaultTrace(
        times_days=times_sorted,
        is_start=starts_sorted,
        node=nodes,
        node_ids=tuple(node_ids),
        fault_class=classes_sorted,
        file_index=file_index,
        ignored=ignored,
        irregular=tuple(irregular),
        source=source,
        format=fmt,
        cluster_nodes=cluster_nodes,
        metadata=dict(metadata or {}),
        open_at_end=len(down_since),
        node_domains=domains,
    )


def _shown_text(text, limit=60):
    """A string from a file, for a message: as is when short, else cut with its length."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


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


def _shown(value):
    """A JSON value for a message, never failing and never thousands of characters long."""
    if type(value) is int:
        return check.int_text(value)
    if isinstance(value, str):
        return repr(_shown_text(value))
    text = repr(value)
    return text if len(text) <= 60 else f"a JSON {type(value).__name__}"


# ------------------------------------------------------------------------- CSV fault logs
_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?",
    re.ASCII | re.IGNORECASE,
)


def parse_fault_csv(text, source="<memory>", *, time_unit=None):
    """Build a :class:`FaultTrace` from the text of a CSV fault log.

    The format (``docs/formats.md``): a header line naming the columns ``node``,
    ``start``, ``end`` (required) and ``domain``, ``kind`` (optional), in any order,
    then one row per fault: the node, when the fault started and when it ended
    (empty while the fault is still open), the node's failure domain (a rack, a
    switch...; may be empty) and the fault class.  Times are either all ISO-8601
    timestamps (``2024-03-01T12:30:00Z``; converted to days since the earliest time
    of the file, kept in ``metadata["time_origin"]``) or all numbers in ``time_unit``.
    Blank lines are skipped.  Each row is a ``fault_start`` event and, when ``end`` is
    given, a ``fault_end`` event.

    Parameters
    ----------
    text : str
        The file's text.
    source : str
        The file named in messages and kept in :attr:`FaultTrace.source`.
    time_unit : {"seconds", "minutes", "hours", "days"}, optional
        The unit of numeric times; needed when the times are numbers, refused when
        they are timestamps (it would do nothing).

    Returns
    -------
    FaultTrace
        ``format`` is ``"csv"``; ``node_domains`` holds each node's domain (``None``
        when not given); ``fault_class`` the ``kind`` column (``"unspecified"`` when
        empty or absent).

    Raises
    ------
    TraceError
        One line naming ``source``, the line number and the problem: no header; a
        column missing, unknown or given twice; a row with the wrong number of fields;
        an empty node; a time that is neither a timestamp nor a number, a number
        that is not finite or overflows, numbers without ``time_unit``, timestamps with
        ``time_unit``, timestamps mixed with numbers or with and without a UTC offset;
        an end before its start; a node given two different domains.

    Notes
    -----
    Rows need not be in time order.  At one instant, the end of a fault comes before
    the start of another (back-to-back faults), and the end of a zero-length fault
    after its own start.  A row whose fault starts while its node is already down is
    irregular (``start-while-down``): the whole row (its start and its end) is
    ignored and the node stays down until the end of the fault that holds it.
    """
    if time_unit is not None:
        time_unit = check.choice("time_unit", time_unit, tuple(TIME_UNITS))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    raw = _Events()
    domains = {}
    domain_line = {}
    columns = None
    style = None         # "iso" or "number", fixed by the first time read
    style_line = None
    aware = None         # ISO: whether times carry a UTC offset
    iso_times = []       # ISO: (event index, datetime), converted to days at the end
    try:
        for fields in reader:
            line = reader.line_num
            if not fields or all(not f.strip() for f in fields):
                continue  # a blank line
            if columns is None:
                columns = _csv_header(fields, source, line)
                continue
            if len(fields) != len(columns):
                raise TraceError(f"{source}, line {line}: expected {len(columns)} fields "
                                 f"({','.join(columns)}), got {len(fields)}")
            row = dict(zip(columns, (f.strip() for f in fields)))
            node = row["node"]
            if not node:
                raise TraceError(f"{source}, line {line}: empty node")
            values = {}
            for key in ("start", "end"):
                value = row[key]
                if not value:
                    if key == "start":
                        raise TraceError(f"{source}, line {line}: empty start (every fault has a start; "
                                         "leave only end empty for a fault still open)")
                    continue
                kind, parsed = _csv_time(value, key, source, line)
                if style is None:
                    style, style_line = kind, line
                    if kind == "number" and time_unit is None:
                        raise TraceError(f"{source}, line {line}: times are numbers; give their unit "
                                         f"(--time-unit / time_unit: {', '.join(TIME_UNITS)})")
                    if kind == "iso" and time_unit is not None:
                        raise TraceError(f"{source}, line {line}: times are ISO-8601 timestamps, which carry "
                                         f"their unit; --time-unit / time_unit ({time_unit}) would do nothing")
                elif kind != style:
                    said = "an ISO-8601 timestamp" if kind == "iso" else "a number"
                    other = "ISO-8601 timestamps" if style == "iso" else "numbers"
                    raise TraceError(f"{source}, line {line}: {key} is {said}, but line {style_line} "
                                     f"uses {other}; use one kind of time in a file")
                if kind == "iso":
                    has_offset = parsed.tzinfo is not None
                    if aware is None:
                        aware = has_offset
                    elif has_offset != aware:
                        raise TraceError(f"{source}, line {line}: {key} {'has' if has_offset else 'has no'} UTC "
                                         f"offset, but line {style_line} {'has none' if has_offset else 'has one'}; "
                                         "times with and without an offset cannot be compared")
                values[key] = parsed
            if "end" in values and values["end"] < values["start"]:
                raise TraceError(f"{source}, line {line}: end {row['end']} is before start {row['start']}")
            domain = row.get("domain") or None
            if domain is not None:
                known = domains.get(node)
                if known is not None and known != domain:
                    raise TraceError(f"{source}, line {line}: node {_shown_text(node)} is in domain "
                                     f"{_shown_text(domain)}, but line {domain_line[node]} puts it in "
                                     f"{_shown_text(known)}; a node has one failure domain")
                domains[node] = domain
                domain_line.setdefault(node, line)
            fault_class = row.get("kind") or UNSPECIFIED_KIND
            start_index = len(raw.times)
            has_end = "end" in values
            for key in ("start", "end") if has_end else ("start",):
                index = len(raw.times)
                if style == "iso":
                    iso_times.append((index, values[key]))
                    raw.times.append(0.0)
                else:
                    raw.times.append(values[key] * TIME_UNITS[time_unit])
                raw.starts.append(key == "start")
                raw.ids.append(node)
                raw.classes.append(fault_class)
                raw.where.append(f"line {line}")
                raw.partner.append(-1)
            if has_end:
                raw.partner[start_index] = start_index + 1
                raw.partner[start_index + 1] = start_index
    except csv.Error as exc:
        raise TraceError(f"{source}, line {reader.line_num}: not a valid CSV row ({exc})") from None
    if columns is None:
        raise TraceError(f"{source}: empty file (expected a header line {','.join(CSV_COLUMNS)}"
                         f"[,{'][,'.join(CSV_OPTIONAL_COLUMNS)}])")
    metadata = {}
    if iso_times:
        origin = min(value for _, value in iso_times)
        for index, value in iso_times:
            raw.times[index] = (value - origin).total_seconds() / 86400.0
        metadata["time_origin"] = origin.isoformat()
    elif style == "number":
        metadata["time_unit"] = time_unit
    return _build_trace(raw, source=source, fmt="csv", metadata=metadata, node_domains=domains, csv_rows=True)


def _csv_header(fields, source, line):
    """The column names of a CSV fault log's header line, checked."""
    names = [f.strip() for f in fields]
    known = CSV_COLUMNS + CSV_OPTIONAL_COLUMNS
    seen = set()
    for name in names:
        if name in seen:
            raise TraceError(f"{source}, line {line}: column {_shown_text(name)!r} is given twice")
        seen.add(name)
        if name not in known:
            raise TraceError(f"{source}, line {line}: unknown column {_shown_text(name)!r} (the header names "
                             f"the columns {', '.join(CSV_COLUMNS)} and optionally {', '.join(CSV_OPTIONAL_COLUMNS)})")
    missing = [name for name in CSV_COLUMNS if name not in seen]
    if missing:
        raise TraceError(f"{source}, line {line}: the header has no column {', '.join(missing)} "
                         f"(expected {','.join(CSV_COLUMNS)}[,{'][,'.join(CSV_OPTIONAL_COLUMNS)}])")
    return names


def _csv_time(value, key, source, line):
    """``("iso", datetime)`` or ``("number", float)`` for one time field, or TraceError."""
    match = _ISO.fullmatch(value)
    if match:
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        try:
            tz = None
            if zone is not None:
                if zone.upper() == "Z":
                    tz = datetime.timezone.utc
                else:
                    sign = -1 if zone[0] == "-" else 1
                    digits = zone[1:].replace(":", "")
                    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
                    tz = datetime.timezone(sign * datetime.timedelta(hours=hours, minutes=minutes))
            micro = int((fraction or "0")[:6].ljust(6, "0"))
            stamp = datetime.datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0),
                                      int(second or 0), micro, tzinfo=tz)
        except ValueError as exc:
            raise TraceError(f"{source}, line {line}: {key} {_shown_text(value)!r} is not a valid timestamp "
                             f"({exc})") from None
        return "iso", stamp
    try:
        return "number", check.parse_float(value, key, error=TraceError)
    except TraceError as exc:
        reason = str(exc).split(": ", 1)[1]
        if "not a finite decimal number" in reason:
            reason = f"{_shown_text(value)!r} is neither an ISO-8601 timestamp nor a finite number"
        raise TraceError(f"{source}, line {line}: {key} {reason}") from None


# -------------------------------------------------------------------- generated traces
#: Most incidents a generated trace may expect (:func:`synthetic_fault_trace`).
MAX_SYNTHETIC_INCIDENTS = 10**6
#: Most nodes of a generated trace.
MAX_SYNTHETIC_NODES = 10**6
#: Most node-incident pairs of a generated trace (each incident looks at every node).
MAX_SYNTHETIC_WORK = 2 * 10**9
#: Sound range of the gamma frailty shape: below it some weights underflow to 0 (a node
#: that can never fail: P = exp(-744 a) per node, 7e-17 at the bound); above it every
#: node has the same weight to 0.1% and the sum of weights could overflow.
FRAILTY_SHAPE_RANGE = (0.05, 1e6)
#: Log-normal repair draws must stay inside the float range: ``|ln median| + 9 sigma <= 709``.
_LOG_FLOAT_MAX = 709.0


def synthetic_fault_trace(nodes=400, days=349.0, seed=0, incidents_per_day=1.45,
                          weibull_shape=0.78, burst_probability=0.08, burst_mean=3.0,
                          repair_median_days=1.0, repair_sigma=1.5, frailty_shape=0.6):
    """Generate a node fault trace that looks like the InfiniteHBD one.

    Incidents arrive as a renewal process with Weibull inter-arrival times (shape
    ``weibull_shape`` < 1 gives bursts, as in the paper's simulation); an incident
    strikes one node, or with probability ``burst_probability`` a correlated burst of
    ``1 + Poisson(burst_mean)`` nodes at the same instant.  Only nodes that are up
    can fail; each fault lasts a log-normal repair time, and a repair that would end
    after ``days`` is left out (the fault is still open at the end of the trace).
    Times are rounded to 1e-4 days like the real trace.  The result is regular (no
    irregular events).

    Parameters
    ----------
    nodes : int, default 400
        Cluster size (number of nodes), ``1 <= nodes <= 10**6``.
    days : float, default 349.0
        Length of the trace in days, finite and ``> 0``.
    seed : int, default 0
        Seed of ``numpy.random.default_rng``; equal arguments give equal traces.
    incidents_per_day : float, default 1.45
        Mean incident rate (1/day), finite and ``> 0``.
    weibull_shape : float, default 0.78
        Shape of the Weibull inter-arrival times (paper, Sec. 6: 0.78), finite and
        ``> 0``.
    burst_probability : float, default 0.08
        Probability that an incident is a correlated burst, in ``[0, 1]``.
    burst_mean : float, default 3.0
        Mean of the Poisson number of extra nodes in a burst, in ``[0, nodes]`` (a
        burst is cut to the nodes that are up).
    repair_median_days, repair_sigma : float
        Log-normal repair time: median (days, ``> 0``) and sigma of the log
        (``>= 0``), with ``|ln(repair_median_days)| + 9 * repair_sigma <= 709``.
    frailty_shape : float, default 0.6
        Shape of the gamma-distributed per-node failure weight (smaller: a few
        nodes take most faults), in ``[0.05, 1e6]``.

    Returns
    -------
    dict
        A ``spare-failure-trace`` document (see ``docs/replay.md``), ready for
        :func:`write_fault_trace` or :func:`parse_fault_events`.

    Raises
    ------
    ParameterTypeError
        ``nodes`` or ``seed`` is not an integer, or another argument is not a number.
    ParameterError
        An argument is outside the range where sampling is sound and finishes (the
        ranges above), or the expected number of incidents (a Weibull renewal count,
        :func:`spare_opt._stats.weibull_renewals`) exceeds ``10**6``, or
        ``incidents * nodes`` exceeds ``2 * 10**9`` node visits, or the loop still
        draws more than ten times the incident budget.

    Notes
    -----
    The defaults are fitted by eye to the InfiniteHBD trace (584 faults on 400
    nodes in 349 days, some at the same instant on up to 8 nodes, repairs from
    hours to months); they are not a statistical model of it.

    Sound ranges.  A Weibull shape ``k`` well below 1 puts the mean of the
    inter-arrival times into rare, huge draws: the loop then makes far more than
    ``days * incidents_per_day`` draws (``k = 0.01`` with the defaults: about 10^17),
    so the budget is checked on the renewal count up to ``days``, not on the mean.  A
    gamma frailty of shape ``a`` gives a weight that underflows to 0 with probability
    about ``exp(-744 a)`` (``a = 1e-5``: 99% of the nodes, and NumPy then fails on
    the weights); ``a >= 0.05`` keeps that below ``1e-16`` per node.
    """
    nodes = check.integer("nodes", nodes, minimum=1, maximum=MAX_SYNTHETIC_NODES)
    seed = check.seed(seed)
    days = check.number("days", days, above=0.0)
    incidents_per_day = check.number("incidents_per_day", incidents_per_day, above=0.0)
    weibull_shape = check.number("weibull_shape", weibull_shape, above=0.0)
    burst_probability = check.probability("burst_probability", burst_probability)
    burst_mean = check.number("burst_mean", burst_mean, minimum=0.0, maximum=float(nodes))
    repair_median_days = check.number("repair_median_days", repair_median_days, above=0.0)
    repair_sigma = check.number("repair_sigma", repair_sigma, minimum=0.0)
    frailty_shape = check.number("frailty_shape", frailty_shape, minimum=FRAILTY_SHAPE_RANGE[0],
                                 maximum=FRAILTY_SHAPE_RANGE[1])
    if abs(math.log(repair_median_days)) + 9.0 * repair_sigma > _LOG_FLOAT_MAX:
        raise ParameterError(
            f"repair_median_days {repair_median_days:g} with repair_sigma {repair_sigma:g} gives log-normal "
            f"repair times beyond the float range (|ln median| + 9 sigma must be <= {_LOG_FLOAT_MAX:g})"
        )
    # Weibull with mean 1/rate: scale = mean / Gamma(1 + 1/k).
    try:
        scale = (1.0 / incidents_per_day) / math.gamma(1.0 + 1.0 / weibull_shape)
    except OverflowError:
        raise ParameterError(f"weibull_shape must be at least about 0.0059 (Gamma(1 + 1/k) overflows), "
                             f"got {weibull_shape:g}") from None
    expected = weibull_renewals(days, 1.0 / incidents_per_day, weibull_shape)
    if not expected <= MAX_SYNTHETIC_INCIDENTS:
        raise ParameterError(
            f"about {expected:.3g} incidents expected in {days:g} days with incidents_per_day "
            f"{incidents_per_day:g} and weibull_shape {weibull_shape:g} (at most {MAX_SYNTHETIC_INCIDENTS:.0e}"
            + ("; a shape well below 1 makes most gaps tiny" if weibull_shape < 1 else "")
            + "): lower days or incidents_per_day, or raise weibull_shape"
        )
    if expected * nodes > MAX_SYNTHETIC_WORK:
        raise ParameterError(
            f"about {expected:.3g} incidents on {nodes} nodes is too much work (incidents * nodes at most "
            f"{MAX_SYNTHETIC_WORK:.0e}): lower nodes, days or incidents_per_day"
        )
    rng = np.random.default_rng(seed)
    width = len(str(nodes - 1))
    names = [f"node-{i:0{width}d}" for i in range(nodes)]
    # Some servers fail far more often than others (231 of 400 nodes carry the 584
    # real faults): a gamma-distributed frailty per node weights the draw.
    frailty = rng.gamma(frailty_shape, size=nodes)
    up_again = np.zeros(nodes)  # time at which each node is repaired
    events = []
    t = 0.0
    for _ in range(10 * MAX_SYNTHETIC_INCIDENTS):  # a bound on the loop; the budget above is 10x smaller
        t += scale * rng.weibull(weibull_shape)
        now = round(t, 4)
        if now > days:
            break
        alive = np.flatnonzero(up_again <= now)
        if alive.size == 0:
            continue
        size = 1
        if rng.random() < burst_probability:
            size += int(rng.poisson(burst_mean))
        weights = frailty[alive]
        total = weights.sum()
        if not total > 0.0:  # every live node's weight underflowed (not expected in the sound range)
            continue
        weights = weights / total
        hit = rng.choice(alive, size=min(size, int(np.count_nonzero(weights))), replace=False, p=weights)
        for node in hit:
            repair = float(rng.lognormal(math.log(repair_median_days), repair_sigma))
            end = round(now + max(repair, 1e-3), 4)
            up_again[node] = end
            desc = {"Level": "Synthetic", "Class": "Synthetic", "Desc": "generated fault"}
            events.append((now, 0, names[node], START, desc))
            if end <= days:  # repairs after the horizon are not observed, as in a real trace
                events.append((end, 1, names[node], END, desc))
    else:
        raise ParameterError(
            f"the trace drew more than {10 * MAX_SYNTHETIC_INCIDENTS:.0e} incidents before day {days:g}: "
            "lower days or incidents_per_day, or raise weibull_shape"
        )
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    return {
        "format": TRACE_FORMAT,
        "version": TRACE_VERSION,
        "nodes": int(nodes),
        "metadata": {
            "generator": "spare_opt.trace.synthetic_fault_trace",
            "parameters": {
                "nodes": int(nodes), "days": days, "seed": seed, "incidents_per_day": incidents_per_day,
                "weibull_shape": weibull_shape, "burst_probability": burst_probability,
                "burst_mean": burst_mean, "repair_median_days": repair_median_days,
                "repair_sigma": repair_sigma, "frailty_shape": frailty_shape,
            },
        },
        "events": [
            {"node_id": node_id, "event_time": time, "event_type": kind, "fault_type": desc}
            for time, _, node_id, kind, desc in events
        ],
    }


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

"""Node fault traces: the InfiniteHBD JSON format and the project's generated traces.

A fault trace is a list of node fault events: a node (server) goes down
(``fault_start``) and comes back (``fault_end``) at times measured in days.  Two file
formats are read (``docs/replay.md``):

* the InfiniteHBD format (Shou et al., arXiv:2502.03885; public repository
  ``stepfun-ai/InfiniteHBD-Trace``): a JSON list of events
  ``{"node_id": str, "event_time": days, "event_type": "fault_start" | "fault_end",
  "fault_type": {"Level": str, "Class": str, "Desc": str}}``;
* the project's own ``spare-failure-trace`` format, written by
  :func:`synthetic_fault_trace` / :func:`write_fault_trace`: a JSON object
  ``{"format": "spare-failure-trace", "version": 1, "nodes": int, "metadata": {...},
  "events": [...]}`` whose events have the same shape as above.

Real data is irregular: a node may get a second ``fault_start`` while it is already
down (overlapping faults of different classes) or a ``fault_end`` with no open fault,
and a file may not be sorted by time.  :func:`read_fault_trace` handles each of these,
records what it did in :attr:`FaultTrace.irregular`, and never fails on them; it fails
(:class:`~spare_opt.errors.TraceError`) only on a file it cannot read at all.
"""

import json
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import _validation as check
from ._io import as_path, read_json_file, write_atomic
from .errors import ParameterError, TraceError

__all__ = [
    "FaultTrace",
    "Instant",
    "IrregularEvent",
    "IRREGULAR_KINDS",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "read_fault_trace",
    "parse_fault_events",
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
    "start-while-down": "fault_start for a node that is already down: ignored (the node stays down from its earlier start)",
    "end-without-start": "fault_end for a node that is not down: ignored",
    "out-of-order": "event earlier than an event before it in the file: sorted into place (stable sort by time)",
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
    file order.

    Attributes
    ----------
    times_days : numpy.ndarray of float64, shape (E,)
        Event times in days.
    is_start : numpy.ndarray of bool, shape (E,)
        True for ``fault_start``, False for ``fault_end``.
    node : numpy.ndarray of int32, shape (E,)
        Node index of each event: nodes are numbered ``0, 1, ...`` in order of first
        appearance in the time-sorted trace (any event type).
    node_ids : tuple of str
        ``node_ids[i]`` is the identifier of node index ``i`` in the file.
    fault_class : tuple of str, length E
        The ``fault_type.Class`` of each event (``"GPU"``, ``"NIC"``...).
    file_index : numpy.ndarray of int64, shape (E,)
        Position of each event in the file.
    ignored : numpy.ndarray of bool, shape (E,)
        True for the events the reader ignores (``start-while-down`` and
        ``end-without-start``); replay skips them.
    irregular : tuple of IrregularEvent
        Every irregular event with what was done, in time order.
    source : str
        Where the trace came from (a path or ``"<memory>"``).
    format : str
        ``"infinitehbd"`` or ``"spare-failure-trace"``.
    cluster_nodes : int or None
        Number of nodes of the traced cluster when the file says so (the
        ``spare-failure-trace`` format does; InfiniteHBD files list only nodes that
        failed, so this is ``None`` for them).
    metadata : dict
        Free information from a ``spare-failure-trace`` file (generator, seed...).
    open_at_end : int
        Nodes still down after the last event (a fault with no ``fault_end`` yet).
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

    def node_groups(self, groups, *, seed=None):
        """Map nodes to DP groups for a cluster of ``groups`` groups.

        By default node index ``i`` (order of first appearance) becomes group ``i``,
        the rule of the paper's replay.  With ``seed``, the nodes (still taken in order
        of first appearance) get distinct groups drawn at random instead:
        ``numpy.random.default_rng(seed).permutation(groups)[i]``.  Either way nodes
        beyond the cluster (``i >= groups``) get ``-1`` and are skipped by replay.

        Parameters
        ----------
        groups : int
            Number of DP groups ``N >= 1``.
        seed : int, optional
            Seed of a random placement; ``None`` for order of first appearance.

        Returns
        -------
        numpy.ndarray of int32, shape (n_nodes,)
            Group of each node, or ``-1``.

        Raises
        ------
        ParameterTypeError
            ``groups`` or ``seed`` is not an integer.
        ParameterError
            ``groups < 1`` or ``seed < 0``.

        Notes
        -----
        Order of first appearance puts nodes that fail together at the same instant
        on neighbouring group ids, and every traced node on the lowest ids; a
        circulant layout whose holder sets are narrow windows of ids then sees
        failures bunched on the same windows (``docs/replay.md`` shows the effect on
        the InfiniteHBD trace).  A random placement removes that artefact.
        """
        groups = check.count("groups N", groups)
        if seed is not None:
            seed = check.seed(seed, "placement seed")
        mapping = np.full(self.n_nodes, -1, dtype=np.int32)
        placed = min(self.n_nodes, int(groups))
        if seed is None:
            mapping[:placed] = np.arange(placed, dtype=np.int32)
        else:
            mapping[:placed] = np.random.default_rng(seed).permutation(int(groups))[:placed]
        return mapping

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


def trace_instants(trace, groups, *, placement_seed=None):
    """A trace as a sequence of instants, each with the DP groups its fault starts fail.

    The one trace-to-failure-batches step shared by :func:`spare_opt.replay_trace` and
    the trace-driven simulation (:func:`spare_opt.simulation.trace_failures`): nodes map
    to groups by :meth:`FaultTrace.node_groups`; events at the same time form one
    instant (one reorder decision); a ``fault_start`` or ``fault_end`` is *usable* when
    the reader did not ignore it and its node maps to a group; several usable starts on
    one group at one instant fail it once (likewise for ends).  Whether a group is
    already down, and what an end does (nothing under the paper's semantics, a
    recovery under ``repair`` semantics), is the caller's state.

    Parameters
    ----------
    trace : FaultTrace
    groups : int
        Number of DP groups ``N``.
    placement_seed : int, optional
        Random node placement (:meth:`FaultTrace.node_groups`).

    Returns
    -------
    instants : list of Instant
        Every distinct event time, in time order (instants with no usable start
        included, with empty ``failing``).
    node_group : numpy.ndarray of int32, shape (n_nodes,)
        The group of each node, ``-1`` for nodes beyond ``N``.

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a :class:`FaultTrace`, ``groups`` or ``placement_seed`` is not
        an integer.
    ParameterError
        ``groups < 1`` or a negative ``placement_seed``.
    """
    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    node_group = trace.node_groups(groups, seed=placement_seed)
    count = trace.n_events
    times = trace.times_days
    if count == 0:
        return [], node_group
    event_group = node_group[trace.node]
    usable = ~trace.ignored & (event_group >= 0)
    usable_start = usable & trace.is_start
    usable_end = usable & ~trace.is_start
    bounds = np.concatenate(([0], np.flatnonzero(np.diff(times)) + 1, [count]))
    instants = []
    for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        failing, failing_events = _groups_once(event_group, start + np.flatnonzero(usable_start[start:stop]))
        recovering, recovering_events = _groups_once(event_group, start + np.flatnonzero(usable_end[start:stop]))
        instants.append(Instant(float(times[start]), start, stop, failing, failing_events, recovering,
                                recovering_events))
    return instants, node_group


def instant_batches(trace, instant, node_group):
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
    node_group : numpy.ndarray of int32
        The ``node_group`` returned with it.

    Returns
    -------
    list of tuple
        ``(is_start, groups, events)`` per batch, in file order: ``is_start`` is True
        for a batch of ``fault_start`` events; ``groups`` (int32) the batch's groups,
        each once, in event order; ``events`` (int64) the index of the event of each.

    Examples
    --------
    >>> from spare_opt.trace import instant_batches, parse_fault_events, trace_instants
    >>> def ev(node, kind):
    ...     return {"node_id": node, "event_time": 1.0, "event_type": kind, "fault_type": {"Class": "GPU"}}
    >>> trace = parse_fault_events([ev("a", "fault_start"), ev("b", "fault_start"), ev("a", "fault_end")])
    >>> instants, node_group = trace_instants(trace, 4)
    >>> [(is_start, groups.tolist()) for is_start, groups, _ in instant_batches(trace, instants[0], node_group)]
    [(True, [0, 1]), (False, [0])]
    """
    event_group = node_group[trace.node[instant.start:instant.stop]]
    usable = np.flatnonzero(~trace.ignored[instant.start:instant.stop] & (event_group >= 0))
    batches = []
    if usable.size == 0:
        return batches
    kinds = trace.is_start[instant.start:instant.stop][usable]
    cuts = np.concatenate(([0], np.flatnonzero(kinds[1:] != kinds[:-1]) + 1, [usable.size]))
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        groups, events = _groups_once(event_group, usable[a:b])
        batches.append((bool(kinds[a]), groups, events + instant.start))
    return batches


def _groups_once(event_group, events):
    """The groups of ``events`` (indices), each once, in event order, with the event of each."""
    _, first = np.unique(event_group[events], return_index=True)
    keep = events[np.sort(first)]
    return event_group[keep].astype(np.int32), keep.astype(np.int64)


# ----------------------------------------------------------------------------- reading
def read_fault_trace(path):
    """Read a node fault trace (InfiniteHBD JSON or ``spare-failure-trace`` JSON).

    Parameters
    ----------
    path : str or os.PathLike
        The trace file.

    Returns
    -------
    FaultTrace
        Events sorted by time (stable), nodes numbered in order of first appearance,
        irregular events recorded in ``irregular`` and flagged in ``ignored``.

    Raises
    ------
    TraceError
        ``path`` is not a path or is empty; the file is missing, unreadable, not JSON,
        neither a list of events nor a ``spare-failure-trace`` document, or an event
        has a missing key, a value of the wrong type, a non-finite time or an unknown
        ``event_type``; or the times span more than a float can hold.  The message
        is one line naming the first bad event index (0-based position in the file).

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
    doc = read_json_file(path, TraceError, "fault trace", expected="a JSON fault trace", malformed="not valid JSON")
    return parse_fault_events(doc, source=str(path))


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
            raise TraceError(
                f"{source}: expected a JSON list of fault events (InfiniteHBD format) or a "
                f"{TRACE_FORMAT!r} document, got an object with format {doc.get('format')!r}"
            )
        if doc.get("version") != TRACE_VERSION:
            raise TraceError(f"{source}: {TRACE_FORMAT} version {doc.get('version')!r} is not supported (expected {TRACE_VERSION})")
        events = doc.get("events")
        if not isinstance(events, list):
            raise TraceError(f"{source}: 'events' must be a list of fault events")
        cluster_nodes = doc.get("nodes")
        if cluster_nodes is not None and (
            isinstance(cluster_nodes, bool) or not isinstance(cluster_nodes, int) or cluster_nodes < 1
        ):
            raise TraceError(f"{source}: 'nodes' must be a positive integer or null, got {cluster_nodes!r}")
        metadata = doc.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise TraceError(f"{source}: 'metadata' must be an object")
        fmt = TRACE_FORMAT
    else:
        raise TraceError(f"{source}: expected a JSON list of fault events, got {type(doc).__name__}")

    count = len(events)
    times = np.empty(count, dtype=np.float64)
    starts = np.empty(count, dtype=bool)
    ids = []
    classes = []
    for i, event in enumerate(events):
        time, is_start, node_id, fault_class = _check_event(event, i, source)
        times[i] = time
        starts[i] = is_start
        ids.append(node_id)
        classes.append(fault_class)

    with np.errstate(over="ignore"):
        span_finite = count == 0 or np.isfinite(times.max() - times.min())
    if not span_finite:
        # The span and the time-weighted means of replay would be inf or NaN.
        raise TraceError(
            f"{source}: event times from day {times.min()} to day {times.max()} span more than a float can hold"
        )
    order = np.argsort(times, kind="stable")
    times_sorted = times[order]
    starts_sorted = starts[order]
    classes_sorted = tuple(classes[i] for i in order)
    node_index = {}
    nodes = np.empty(count, dtype=np.int32)
    for k, i in enumerate(order):
        nodes[k] = node_index.setdefault(ids[i], len(node_index))
    node_ids = tuple(node_index)

    irregular = []
    # Out of order: earlier than something before it in the file.
    if count:
        running_max = np.maximum.accumulate(times)
        late = np.flatnonzero(times[1:] < running_max[:-1]) + 1
        position = np.empty(count, dtype=np.int64)
        position[order] = np.arange(count)
        for i in late:
            irregular.append(
                IrregularEvent(
                    int(position[i]), int(i), "out-of-order",
                    f"event {i}: {'fault_start' if starts[i] else 'fault_end'} at day {float(times[i])} for node "
                    f"{ids[i]} comes after an event at day {float(running_max[i - 1])} in the file: sorted into place",
                )
            )

    # Up/down state per node, in time order.
    ignored = np.zeros(count, dtype=bool)
    down_since = {}
    last_end = {}
    for k in range(count):
        node = int(nodes[k])
        file_i = int(order[k])
        name = node_ids[node]
        if starts_sorted[k]:
            if node in down_since:
                since_k = down_since[node]
                ignored[k] = True
                irregular.append(
                    IrregularEvent(
                        k, file_i, "start-while-down",
                        f"event {file_i}: fault_start ({classes_sorted[k]}) at day {float(times_sorted[k])} for node "
                        f"{name}, already down since day {float(times_sorted[since_k])} ({classes_sorted[since_k]}): ignored",
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
                        f"event {file_i}: fault_end ({classes_sorted[k]}) at day {float(times_sorted[k])} for node "
                        f"{name}, which is not down ({context}): ignored",
                    )
                )
    irregular.sort(key=lambda e: (e.index, e.kind))

    for array in (times_sorted, starts_sorted, nodes, ignored):
        array.setflags(write=False)
    file_index = order.astype(np.int64)
    file_index.setflags(write=False)
    return FaultTrace(
        times_days=times_sorted,
        is_start=starts_sorted,
        node=nodes,
        node_ids=node_ids,
        fault_class=classes_sorted,
        file_index=file_index,
        ignored=ignored,
        irregular=tuple(irregular),
        source=source,
        format=fmt,
        cluster_nodes=cluster_nodes,
        metadata=dict(metadata),
        open_at_end=len(down_since),
    )


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
        raise TraceError(f"{where}: 'node_id' must be a non-empty string, got {node_id!r}")
    time = event["event_time"]
    if isinstance(time, bool) or not isinstance(time, (int, float)):
        raise TraceError(f"{where}: 'event_time' must be a number of days, got {time!r}")
    try:
        finite = math.isfinite(time)
    except OverflowError:  # an integer beyond the float range
        finite = False
    if not finite:
        raise TraceError(f"{where}: 'event_time' must be finite, got {time if isinstance(time, float) else 'a ' + str(len(str(time))) + '-digit integer'}")
    kind = event["event_type"]
    if kind not in (START, END):
        raise TraceError(f"{where}: unknown 'event_type' {kind!r} (expected {START!r} or {END!r})")
    fault_type = event["fault_type"]
    if not isinstance(fault_type, dict):
        raise TraceError(f"{where}: 'fault_type' must be an object with Level, Class, Desc")
    fault_class = fault_type.get("Class")
    if not isinstance(fault_class, str):
        raise TraceError(f"{where}: 'fault_type.Class' must be a string, got {fault_class!r}")
    for key in ("Level", "Desc"):
        if key in fault_type and not isinstance(fault_type[key], str):
            raise TraceError(f"{where}: 'fault_type.{key}' must be a string, got {fault_type[key]!r}")
    return float(time), kind == START, node_id, fault_class


# -------------------------------------------------------------------- generated traces
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
        Cluster size (number of nodes).
    days : float, default 349.0
        Length of the trace in days.
    seed : int, default 0
        Seed of ``numpy.random.default_rng``; equal arguments give equal traces.
    incidents_per_day : float, default 1.45
        Mean incident rate (1/day).
    weibull_shape : float, default 0.78
        Shape of the Weibull inter-arrival times (paper, Sec. 6: 0.78).
    burst_probability : float, default 0.08
        Probability that an incident is a correlated burst.
    burst_mean : float, default 3.0
        Mean of the Poisson number of extra nodes in a burst.
    repair_median_days, repair_sigma : float
        Log-normal repair time: median (days) and sigma of the log.
    frailty_shape : float, default 0.6
        Shape of the gamma-distributed per-node failure weight (smaller: a few
        nodes take most faults).

    Returns
    -------
    dict
        A ``spare-failure-trace`` document (see ``docs/replay.md``), ready for
        :func:`write_fault_trace` or :func:`parse_fault_events`.

    Raises
    ------
    ParameterError
        A size, rate or shape is not a positive finite number,
        ``burst_probability`` is outside ``[0, 1]``, ``burst_mean`` or
        ``repair_sigma`` is negative, ``seed`` is not a non-negative integer, or
        ``weibull_shape`` is so small that the Weibull scale overflows.

    Notes
    -----
    The defaults are fitted by eye to the InfiniteHBD trace (584 faults on 400
    nodes in 349 days, some at the same instant on up to 8 nodes, repairs from
    hours to months); they are not a statistical model of it.
    """
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 1:
        raise ParameterError(f"nodes must be a positive integer, got {nodes!r}")
    for name, value in (("days", days), ("incidents_per_day", incidents_per_day),
                        ("weibull_shape", weibull_shape), ("repair_median_days", repair_median_days),
                        ("frailty_shape", frailty_shape)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ParameterError(f"{name} must be a positive number, got {value!r}")
    for name, value, high in (("burst_probability", burst_probability, 1.0), ("burst_mean", burst_mean, math.inf),
                              ("repair_sigma", repair_sigma, math.inf)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and 0 <= value <= high
        ):
            bounds = "in [0, 1]" if high == 1.0 else "finite and >= 0"
            raise ParameterError(f"{name} must be a number {bounds}, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng(seed)
    # Weibull with mean 1/rate: scale = mean / Gamma(1 + 1/k).
    try:
        scale = (1.0 / incidents_per_day) / math.gamma(1.0 + 1.0 / weibull_shape)
    except OverflowError:
        raise ParameterError(f"weibull_shape {weibull_shape!r} is too small (Gamma(1 + 1/k) overflows)") from None
    width = len(str(nodes - 1))
    names = [f"node-{i:0{width}d}" for i in range(nodes)]
    # Some servers fail far more often than others (231 of 400 nodes carry the 584
    # real faults): a gamma-distributed frailty per node weights the draw.
    frailty = rng.gamma(frailty_shape, size=nodes)
    up_again = np.zeros(nodes)  # time at which each node is repaired
    events = []
    t = 0.0
    while True:
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
        weights = frailty[alive] / frailty[alive].sum()
        hit = rng.choice(alive, size=min(size, alive.size), replace=False, p=weights)
        for node in hit:
            repair = float(rng.lognormal(math.log(repair_median_days), repair_sigma))
            end = round(now + max(repair, 1e-3), 4)
            up_again[node] = end
            desc = {"Level": "Synthetic", "Class": "Synthetic", "Desc": "generated fault"}
            events.append((now, 0, names[node], START, desc))
            if end <= days:  # repairs after the horizon are not observed, as in a real trace
                events.append((end, 1, names[node], END, desc))
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
        ``doc`` is not a valid ``spare-failure-trace`` document.
    OutputExistsError
        ``path`` exists and ``force`` is false.
    OutputWriteError
        ``path`` cannot be written (a folder, a missing folder, no permission...).
    """
    if not isinstance(doc, dict):
        raise TraceError(f"trace document: expected a {TRACE_FORMAT!r} object, got {type(doc).__name__}")
    parse_fault_events(doc, source="trace document")
    head = {k: v for k, v in doc.items() if k != "events"}
    lines = ",\n  ".join(json.dumps(event, sort_keys=True) for event in doc["events"])
    text = json.dumps(head, indent=1, sort_keys=True)[:-2] + f',\n "events": [\n  {lines}\n ]\n}}\n'
    return write_atomic(path, text, force=force)

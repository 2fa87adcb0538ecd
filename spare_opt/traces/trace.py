"""The fault trace model: :class:`FaultTrace`, and the failure instants it gives on DP groups.

A fault trace is a list of node fault events: a node (server) goes down
(``fault_start``) and comes back (``fault_end``) at times measured in days.  The file
formats live beside this module: :mod:`spare_opt.traces.json_format` (InfiniteHBD and
``spare-failure-trace`` JSON, and :func:`~spare_opt.read_fault_trace` for every format)
and :mod:`spare_opt.traces.csv_format` (plain CSV fault logs); every reader builds its
:class:`FaultTrace` with :func:`_build_trace` here.

Real data is irregular: a node may get a second ``fault_start`` while it is already
down (overlapping faults of different classes) or a ``fault_end`` with no open fault,
and a file may not be sorted by time.  :func:`_build_trace` handles each of these,
records what it did in :attr:`FaultTrace.irregular`, and never fails on them; a reader
fails (:class:`~spare_opt.TraceError`) only on a file it cannot read at all.

:func:`trace_instants` and :func:`instant_batches` turn a trace into the failure and
repair instants of DP groups, once nodes are placed on groups (``docs/replay.md``).
"""

import weakref
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .._core import validation as check
from .._core.errors import ParameterError, TraceError
from .placement import Placement

__all__ = [
    "FaultTrace",
    "Instant",
    "IrregularEvent",
    "IRREGULAR_KINDS",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "trace_instants",
    "instant_batches",
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
    window : dict or None
        A trace cut to an observation window (:func:`spare_opt.window_trace`): the
        window's bounds in days of the original trace and what was open at each end;
        ``None`` for a whole trace.
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
    window: dict | None = None

    @property
    def observed_days(self):
        """float: the end of the observation, in days: the window's length for a windowed trace, else the last event."""
        if self.window is not None:
            return float(self.window["length_days"])
        return self.span_days[1]

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
        With ``placement`` (a :class:`~spare_opt.traces.placement.Placement`), each node takes
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
    the trace-driven simulation (:func:`spare_opt.simulation.time_to_train.trace_failures`): nodes map
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
    :meth:`FaultTrace.node_groups` with ``members=True``), for callers that need them too.

    The instants come from :func:`_cuts` (cut once per trace and placement, then reused);
    their arrays are read-only views."""
    cuts = _cuts(trace, members)
    return cuts.instants, cuts.node_group


class _Cuts:
    """A trace cut into instants and repair batches for one placement, all arrays computed at once.

    ``bounds`` (n_instants + 1): instant ``i`` is events ``bounds[i] .. bounds[i + 1] - 1``.
    Per instant (CSR ``fail_ptr``/``rec_ptr``): the groups of its usable starts (ends),
    each once, in event order, with the event of each (:class:`Instant`). Batches
    (:func:`instant_batches`): batch ``j`` is ``batch_events[batch_ptr[j]:batch_ptr[j + 1]]``,
    of kind ``batch_start[j]``; the batches of instant ``i`` are
    ``instant_batch[i] .. instant_batch[i + 1] - 1``; ``batch_groups`` (CSR
    ``batch_group_ptr``) the groups of each batch's events, each once, in event order.
    Every array is read-only (the cuts are shared by every caller of the same trace and
    placement).
    """

    def __init__(self, trace, members):
        indptr, group_ids = members
        sizes = np.diff(indptr)
        node_group = np.full(trace.n_nodes, -1, dtype=np.int32)
        node_group[sizes > 0] = group_ids[indptr[:-1][sizes > 0]]
        self.node_group = node_group
        count = trace.n_events
        times = trace.times_days
        bounds = np.concatenate(([0], np.flatnonzero(np.diff(times)) + 1, [count])).astype(np.int64)
        if count == 0:
            bounds = np.zeros(1, dtype=np.int64)
        n_instants = bounds.size - 1
        instant_of = np.repeat(np.arange(n_instants, dtype=np.int64), np.diff(bounds))
        usable = ~trace.ignored & (sizes[trace.node] > 0)
        width = int(group_ids.max()) + 1 if group_ids.size else 1
        starts = np.flatnonzero(usable & trace.is_start)
        ends = np.flatnonzero(usable & ~trace.is_start)
        fail = _groups_once_by(trace, indptr, group_ids, starts, instant_of[starts], n_instants, width)
        rec = _groups_once_by(trace, indptr, group_ids, ends, instant_of[ends], n_instants, width)
        used = np.flatnonzero(usable)
        kinds = trace.is_start[used]
        owner = instant_of[used]
        new = np.ones(used.size, dtype=bool)
        new[1:] = (owner[1:] != owner[:-1]) | (kinds[1:] != kinds[:-1])
        first = np.flatnonzero(new)
        batch_of = np.cumsum(new) - 1
        n_batches = first.size
        self.bounds = bounds
        self.fail_ptr, self.fail_groups, self.fail_events = fail
        self.rec_ptr, self.rec_groups, self.rec_events = rec
        self.batch_ptr = np.concatenate((first, [used.size])).astype(np.int64)
        self.batch_events = used.astype(np.int64)
        self.batch_start = kinds[first]
        self.instant_batch = np.searchsorted(owner[first], np.arange(n_instants + 1)).astype(np.int64)
        self.batch_group_ptr, self.batch_groups, _ = _groups_once_by(
            trace, indptr, group_ids, used, batch_of, n_batches, width)
        for name, value in vars(self).items():
            value.flags.writeable = False
        bounds_list, fail_ptr, rec_ptr = bounds.tolist(), self.fail_ptr.tolist(), self.rec_ptr.tolist()
        instant_times = times[bounds[:-1]].tolist()
        fg, fe, rg, re_ = self.fail_groups, self.fail_events, self.rec_groups, self.rec_events
        self.instants = [
            Instant(instant_times[i], bounds_list[i], bounds_list[i + 1], fg[fail_ptr[i]:fail_ptr[i + 1]],
                    fe[fail_ptr[i]:fail_ptr[i + 1]], rg[rec_ptr[i]:rec_ptr[i + 1]], re_[rec_ptr[i]:rec_ptr[i + 1]])
            for i in range(n_instants)
        ]
        self._batch_lists = None

    def batch_lists(self):
        """The :func:`instant_batches` answer of every instant (a list per instant), built once."""
        if self._batch_lists is None:
            ptr, events, kinds = self.batch_ptr.tolist(), self.batch_events, self.batch_start.tolist()
            per_batch = [(kinds[j], events[ptr[j]:ptr[j + 1]]) for j in range(len(kinds))]
            edges = self.instant_batch.tolist()
            self._batch_lists = [per_batch[edges[i]:edges[i + 1]] for i in range(len(edges) - 1)]
        return self._batch_lists


#: Cuts kept per trace (placements): the replay's default placements, the seeds of a comparison.
_CUTS_KEPT = 5
_CUTS = {}  # id(trace) -> {members key: _Cuts}, dropped with the trace


def _cuts(trace, members):
    """The :class:`_Cuts` of ``trace`` for ``members`` (CSR groups of every node), cached.

    The cache is keyed by the trace object and the bytes of ``members`` (so a placement
    gives the same cuts whichever way it was obtained); it lives as long as the trace.
    A trace is immutable (a frozen dataclass; its arrays are never written after reading).
    """
    indptr, group_ids = members
    key = (np.asarray(indptr, dtype=np.int64).tobytes(), np.asarray(group_ids, dtype=np.int32).tobytes())
    per_trace = _CUTS.get(id(trace))
    if per_trace is None:
        per_trace = _CUTS[id(trace)] = {}
        weakref.finalize(trace, _CUTS.pop, id(trace), None)
    cuts = per_trace.get(key)
    if cuts is None:
        if len(per_trace) >= _CUTS_KEPT:
            per_trace.pop(next(iter(per_trace)))
        cuts = per_trace[key] = _Cuts(trace, members)
    return cuts


def _groups_once_by(trace, indptr, group_ids, events, owner, owners, width):
    """:func:`_groups_once` of many event sets at once: ``events`` (sorted indices) with the
    set of each (``owner``, non-decreasing, ``< owners``); returns the CSR pointers by set
    (``owners + 1``), the groups (int32) and their events (int64). ``width`` bounds the group ids."""
    nodes = trace.node[events]
    per_event = indptr[nodes + 1] - indptr[nodes]
    event_of = np.repeat(events, per_event)
    owner_of = np.repeat(owner, per_event)
    within = np.arange(event_of.size) - np.repeat(np.cumsum(per_event) - per_event, per_event)
    event_groups = group_ids[np.repeat(indptr[nodes], per_event) + within]
    _, first = np.unique(owner_of.astype(np.int64) * width + event_groups, return_index=True)
    keep = np.sort(first)  # event order, each group once per set
    ptr = np.searchsorted(owner_of[keep], np.arange(owners + 1)).astype(np.int64)
    return ptr, event_groups[keep].astype(np.int32), event_of[keep].astype(np.int64)


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
    >>> from spare_opt import instant_batches, parse_fault_events, trace_instants
    >>> def ev(node, kind):
    ...     return {"node_id": node, "event_time": 1.0, "event_type": kind, "fault_type": {"Class": "GPU"}}
    >>> trace = parse_fault_events([ev("a", "fault_start"), ev("b", "fault_start"), ev("a", "fault_end")])
    >>> instants, _ = trace_instants(trace, 4)
    >>> members = trace.node_groups(4, members=True)
    >>> [(is_start, events.tolist()) for is_start, events in instant_batches(trace, instants[0], members)]
    [(True, [0, 1]), (False, [2])]
    """
    cuts = _cuts(trace, members)
    i = int(np.searchsorted(cuts.bounds, instant.start, side="right")) - 1
    if i < 0 or i >= len(cuts.instants) or int(cuts.bounds[i]) != instant.start or int(cuts.bounds[i + 1]) != instant.stop:
        return _instant_batches(trace, instant, members)  # not one of the trace's instants: cut it alone
    return [(kind, events.copy()) for kind, events in cuts.batch_lists()[i]]


def _instant_batches(trace, instant, members):
    """:func:`instant_batches` of one window ``instant.start .. instant.stop - 1``, computed directly."""
    indptr = members[0]
    window = slice(instant.start, instant.stop)
    nodes = trace.node[window]
    usable = np.flatnonzero(~trace.ignored[window] & (indptr[nodes + 1] > indptr[nodes]))
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
    if len(events) == 1:  # the common case, without the general path's array calls
        event = events[0]
        node = trace.node[event]
        groups = group_ids[indptr[node]:indptr[node + 1]]
        if groups.size <= 1:
            return groups.astype(np.int32), np.full(groups.size, event, dtype=np.int64)
    nodes = trace.node[events]
    per_event = indptr[nodes + 1] - indptr[nodes]
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


class _Events:
    """Raw events in file order, before sorting (the common input of :func:`_build_trace`)."""

    def __init__(self):
        self.times = []
        self.starts = []
        self.ids = []
        self.classes = []
        self.where = []      # "event 12", "line 5": how messages name the event's place in the file
        self.partner = []    # CSV: index of the other event of the row (-1 for none)


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

    _check_event_times(times, count, source, where)
    order = _time_order(times, starts, partner, count, csv_rows)
    times_sorted = times[order]
    starts_sorted = starts[order]
    classes_sorted = tuple(classes[i] for i in order)
    position = np.empty(count, dtype=np.int64)
    position[order] = np.arange(count)
    provisional, names = _provisional_nodes(order, ids, count)

    irregular = []
    if count and not csv_rows:
        irregular.extend(_out_of_order_events(times, starts, ids, position, where))
    ignored, down_since = _node_states(order, position, partner, times_sorted, starts_sorted, classes_sorted,
                                       provisional, names, where, irregular)
    irregular.sort(key=lambda e: (e.index, e.kind))
    nodes, node_ids, domains = _final_nodes(provisional, starts_sorted, ignored, names, node_domains, count)

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


def _check_event_times(times, count, source, where):
    """Raise TraceError when the times span more than a float holds or one is before day 0."""
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


def _time_order(times, starts, partner, count, csv_rows):
    """The file indices of the events in time order (stable; CSV rows: ends, starts, zero-length ends)."""
    if csv_rows:
        # rank 0: an end that closes a fault of positive length; 1: a start; 2: the end
        # of a zero-length fault (it must follow its own start).
        rank = np.where(starts, 1, 0)
        has_partner = partner >= 0
        zero = ~starts & has_partner
        zero[zero] = times[partner[zero]] == times[zero]
        rank[zero] = 2
        return np.lexsort((np.arange(count), rank, times))
    return np.argsort(times, kind="stable")


def _provisional_nodes(order, ids, count):
    """Provisional node numbers (first appearance in time order) of the sorted events, and the node names."""
    first_seen = {}
    provisional = np.empty(count, dtype=np.int64)
    for k, i in enumerate(order.tolist()):
        provisional[k] = first_seen.setdefault(ids[i], len(first_seen))
    return provisional, tuple(first_seen)


def _out_of_order_events(times, starts, ids, position, where):
    """The JSON events earlier than something before them in the file (``out-of-order``)."""
    running_max = np.maximum.accumulate(times)
    late = np.flatnonzero(times[1:] < running_max[:-1]) + 1
    return [
        IrregularEvent(
            int(position[i]), int(i), "out-of-order",
            f"{where(i)}: {'fault_start' if starts[i] else 'fault_end'} at day {float(times[i])} for node "
            f"{_shown_text(ids[i])} comes after an event at day {float(running_max[i - 1])} in the file: "
            "sorted into place",
        )
        for i in late.tolist()
    ]


def _node_states(order, position, partner, times_sorted, starts_sorted, classes_sorted, provisional, names, where,
                 irregular):
    """Up/down state per node, in time order: the ignored events (appended to ``irregular``) and the open faults.

    Returns ``(ignored, down_since)``: a mask of the sorted events, and node -> sorted index of
    the start of its fault still open at the end.
    """
    count = len(order)
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
    return ignored, down_since


def _final_nodes(provisional, starts_sorted, ignored, names, node_domains, count):
    """Final node numbers of the sorted events, the node names and domains in that numbering.

    The order of the first *effective* fault (a fault_start the reader did not ignore),
    then nodes with none, in order of first appearance.  An ignored event therefore
    changes no node's group (docs/replay.md).
    """
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
    return nodes, node_ids, domains


def _shown_text(text, limit=60):
    """A string from a file, for a message: as is when short, else cut with its length."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _shown(value):
    """A JSON value for a message, never failing and never thousands of characters long."""
    if type(value) is int:
        return check.int_text(value)
    if isinstance(value, str):
        return repr(_shown_text(value))
    text = repr(value)
    return text if len(text) <= 60 else f"a JSON {type(value).__name__}"

"""Guarantees of a layout under failure domains, and topologies derived from fault traces.

* :func:`domain_report` - per level of a topology: is the layout domain-safe, the worst
  single domain failure (exact stack number ``S*``), and the worst pair of domains;
* :func:`derived_topology` - for traces without rack ids: a topology whose domains
  are the groups of nodes that failed at the same instant (``docs/domains.md``).

References
----------
.. [1] Lee et al., "SPARe: Stacked Parallelism with Adaptive Reordering for
   Fault-Tolerant LLM Pretraining Systems with 100k+ GPUs", ICML 2026,
   arXiv:2603.00357, Sec. 4 (``S*`` and ``c(k)``).
.. [2] P. Hall, "On representatives of subsets", J. London Math. Soc. 10 (1935).
"""

import time
from dataclasses import dataclass, field

import numpy as np

from .._core import validation as check
from .._core.results import Result
from ..layouts.domain_layouts import _checked_domains
from ..layouts.generators import DEFAULT_TIME_LIMIT, MAX_LAYOUT_ENTRIES, METHODS, generate
from .montecarlo import MAX_TRIALS, domain_monte_carlo
from .._core.errors import ParameterError, ParameterTypeError
from ..traces.failure_model import FailureModel
from ..layouts.layout import check_layout
from ..planning.plan import MASKED, WIPE_OUT, check_micro_batches, lower_bound
from ..planning.exact import least_stack_number, plan_reorder
from ..layouts.topology import Topology, check_topology
from ..traces.trace import FaultTrace

__all__ = ["DOMAIN_REPORT_MAX_PAIRS", "DomainReport", "cover_domains", "derived_topology", "domain_report",
           "domain_comparison"]

#: Default number of domain pairs :func:`domain_report` evaluates (all of them when there are fewer).
DOMAIN_REPORT_MAX_PAIRS = 5_000


@dataclass(eq=False)
class DomainReport(Result):
    """What :func:`domain_report` found, per level.

    Attributes
    ----------
    groups, redundancy : int
        ``N`` and ``r``.
    levels : dict of str to dict
        For each level, the keys of ``docs/domains.md``: ``safe``, ``multiplicity``,
        ``domains``, ``worst_status``, ``worst_stack_number``, ``worst_lower_bound``,
        ``worst_domain``, ``micro_batches``, ``worst_load``, ``worst_load_domain``,
        ``worst_step_cost``, ``wipe_out_domains``, ``planner_calls``,
        ``worst_pair``, ``wipe_out_pairs``, ``pairs_total``, ``pairs_evaluated``,
        ``pair_search``.
    seconds : float
        Wall-clock time (not compared by ``==``).
    """

    groups: int
    redundancy: int
    levels: dict
    seconds: float = field(default=0.0, compare=False)

    def to_dict(self):
        """JSON-ready dict: ``groups``, ``redundancy``, ``levels`` (per level as above), ``seconds``."""
        return {"groups": self.groups, "redundancy": self.redundancy, "levels": self.levels,
                "seconds": round(self.seconds, 4)}


def domain_report(layout, topology, *, levels=None, max_pairs=DOMAIN_REPORT_MAX_PAIRS, micro_batches=1,
                  progress=None):
    """Domain safety and the worst single and paired domain failures of a layout.

    Parameters
    ----------
    layout : Layout
    topology : Topology
        Of the same ``N``.
    levels : str, sequence of str or None
        Levels to report on; ``None`` for every level of the topology.
    max_pairs : int, default 5000
        Pairs of domains evaluated per level for the worst pair: all of them when a
        level has at most this many pairs, else the ``max_pairs`` pairs that share the
        most shard types (``pair_search`` says which).  Wipe-outs by a pair are found
        over all pairs whatever this is.
    micro_batches : int, default 1
        ``m``, micro-batches per shard type, for ``worst_load``.
    progress : callable, optional
        ``progress(done, total)`` in failure sets evaluated.

    Returns
    -------
    DomainReport
        Per level: ``safe`` (bool) and ``multiplicity`` (the most holders of one shard
        type in one domain); ``domains`` (their number); the worst single domain
        failure: ``worst_status`` (``"masked"`` or ``"wipe-out"``),
        ``worst_stack_number`` (``S*``, ``None`` on a wipe-out), ``worst_lower_bound``
        (``c(k)`` of that failure), ``worst_domain`` (its label); ``micro_batches``
        (``m``), ``worst_load`` (the largest least load ``L*`` over the single domain
        failures, in micro-batches: ``worst_stack_number`` at ``m = 1``; ``None`` when
        a domain wipes out), ``worst_load_domain`` (the label of a domain attaining it),
        ``worst_step_cost`` (``worst_load / m``); ``wipe_out_domains``
        (how many single domains wipe out); the worst pair: ``worst_pair``
        (``domains``, ``status``, ``stack_number``, ``lower_bound``,
        ``failed_groups``; ``None`` with fewer than two domains), ``wipe_out_pairs``,
        ``pairs_total``, ``pairs_evaluated``, ``pair_search``.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout, ``topology`` not a Topology, ``max_pairs`` not an
        integer, ``micro_batches`` not an integer, ``progress`` not callable.
    ParameterError
        The sizes differ, an unknown level, ``max_pairs < 1``, ``m < 1`` or ``N m``
        above :data:`~spare_opt.planning.plan.MAX_SPLIT_ENTRIES`.

    Notes
    -----
    Every ``S*`` is exact.  For a failure set ``F`` of ``k`` groups, ``S* >= c(k)``;
    the stack number ``c(k)`` is certified when the ``k`` shard types whose top-layer
    holder failed can be handed to live holders with at most ``c(k) - 1`` extra per
    group (a bipartite matching, ``scipy``), since every live group keeps its own top
    layer; otherwise the exact planner's free search
    (:func:`spare_opt.least_stack_number`, Hall's theorem by maximum flow) decides.
    ``planner_calls`` counts those.  A domain or pair wipes out exactly when some
    shard type has all its holders in it: found from the holders' domains, over all
    pairs.  For a domain-safe layout with ``r >= 2`` no single domain wipes out, and
    with ``r >= 3`` no pair does.  At ``m > 1`` each masked domain failure's ``L*``
    comes from the exact planner (:func:`spare_opt.plan_reorder` with
    ``micro_batches=m``, one call per domain, counted in ``planner_calls``).

    Examples
    --------
    >>> from spare_opt import Topology, consecutive, domain_report, domain_safe
    >>> racks = Topology.blocks(600, {"rack": 8})
    >>> safe = domain_report(domain_safe(600, 8, racks), racks).levels["rack"]
    >>> safe["safe"], safe["worst_status"], safe["worst_stack_number"], safe["wipe_out_pairs"]
    (True, 'masked', 2, 0)
    >>> rotation = domain_report(consecutive(600, 8), racks).levels["rack"]
    >>> rotation["safe"], rotation["worst_status"], rotation["wipe_out_domains"]
    (False, 'wipe-out', 75)
    """
    started = time.perf_counter()
    n, r = check_layout(layout).stacks.shape
    check_topology(topology)
    chosen = topology.levels if levels is None else topology.select_levels(levels)
    max_pairs = check.count("max_pairs", max_pairs)
    micro_batches = check_micro_batches(micro_batches, n)
    check.callback("progress", progress)
    per_level = {}
    work = []
    for level in chosen:
        domains = _checked_domains(layout, topology, level)
        k = domains.count
        pairs_total = k * (k - 1) // 2
        work.append((level, domains, k + min(pairs_total, max_pairs)))
    total = sum(item[2] for item in work)
    done = 0
    for level, domains, units in work:
        relay = None if progress is None else (lambda d, _t, base=done: progress(base + d, total))
        per_level[level] = _level_report(layout, domains, max_pairs, relay, micro_batches)
        done += units
    if progress is not None:
        progress(total, total)
    return DomainReport(groups=n, redundancy=r, levels=per_level, seconds=time.perf_counter() - started)


def _level_report(layout, domains, max_pairs, progress, micro_batches=1):
    """The report of one level (see :func:`domain_report`)."""
    n, r = layout.stacks.shape
    multiplicity, _domain, _shard = domains.worst(layout.stacks)
    members, bounds = domains._members()
    count = domains.count
    labels = [label for _level, label in domains.labels]
    checker = _StackNumber(layout)
    total = count + min(count * (count - 1) // 2, max_pairs)

    # Single domains.
    worst = None
    worst_load = None  # (L*, domain) at m > 1
    load_calls = 0
    wipe_out_domains = 0
    for k in range(count):
        failed = members[bounds[k]:bounds[k + 1]]
        stack = checker(failed)
        status = WIPE_OUT if stack is None else MASKED
        wipe_out_domains += status == WIPE_OUT
        key = (status == WIPE_OUT, -1 if stack is None else stack)
        if worst is None or key > worst[0]:
            worst = (key, k, stack, status, failed.size)
        if micro_batches > 1 and stack is not None and not wipe_out_domains:
            load = plan_reorder(layout, failed, micro_batches=micro_batches).load
            load_calls += 1
            if worst_load is None or load > worst_load[0]:
                worst_load = (load, k)
        if progress is not None and (k + 1) % 64 == 0:
            progress(k + 1, total)
    if micro_batches == 1 and worst is not None and worst[2] is not None:
        worst_load = (worst[2], worst[1])  # L* = S* at m = 1
    if wipe_out_domains:
        worst_load = None
    report = {
        "safe": bool(multiplicity <= 1),
        "multiplicity": int(multiplicity),
        "domains": int(count),
        "worst_status": None if worst is None else worst[3],
        "worst_stack_number": None if worst is None else worst[2],
        "worst_lower_bound": None if worst is None else lower_bound(n, worst[4]),
        "worst_domain": None if worst is None else labels[worst[1]],
        "micro_batches": micro_batches,
        "worst_load": None if worst_load is None else int(worst_load[0]),
        "worst_load_domain": None if worst_load is None else labels[worst_load[1]],
        "worst_step_cost": None if worst_load is None else worst_load[0] / micro_batches,
        "wipe_out_domains": int(wipe_out_domains),
    }

    # Pairs: wipe-outs exactly over all pairs, stack numbers over all or the most-sharing pairs.
    pairs_total = count * (count - 1) // 2
    wipe_pairs = _wipe_out_pairs(layout, domains)
    candidates, search = _pair_candidates(layout, domains, max_pairs)
    worst_pair = None
    for index, (a, b) in enumerate(candidates):
        failed = np.union1d(members[bounds[a]:bounds[a + 1]], members[bounds[b]:bounds[b + 1]])
        stack = checker(failed)
        key = (stack is None, -1 if stack is None else stack)
        if worst_pair is None or key > worst_pair[0]:
            worst_pair = (key, a, b, stack, failed.size)
        if progress is not None and (index + 1) % 64 == 0:
            progress(count + index + 1, total)
    if wipe_pairs and (worst_pair is None or worst_pair[3] is not None):
        a, b = wipe_pairs[0]
        failed = np.union1d(members[bounds[a]:bounds[a + 1]], members[bounds[b]:bounds[b + 1]])
        worst_pair = ((True, -1), a, b, None, failed.size)
    report.update({
        "worst_pair": None if worst_pair is None else {
            "domains": [labels[worst_pair[1]], labels[worst_pair[2]]],
            "status": WIPE_OUT if worst_pair[3] is None else MASKED,
            "stack_number": worst_pair[3],
            "lower_bound": lower_bound(n, worst_pair[4]),
            "failed_groups": int(worst_pair[4]),
        },
        "wipe_out_pairs": len(wipe_pairs),
        "pairs_total": int(pairs_total),
        "pairs_evaluated": len(candidates),
        "pair_search": search,
        "planner_calls": checker.planner_calls + load_calls,
    })
    return report


class _StackNumber:
    """Exact ``S*`` of failure sets: the ``c(k)`` certificate, else the exact planner (private)."""

    def __init__(self, layout):
        self.layout = layout
        n, r = layout.stacks.shape
        self.n, self.r = n, r
        self.holders = layout.holders()[1].reshape(n, r)
        self.alive = np.ones(n, dtype=bool)
        self.planner_calls = 0

    def __call__(self, failed):
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import maximum_bipartite_matching

        n = self.n
        k = int(failed.size)
        if k == 0:
            return 1
        alive = self.alive
        alive[failed] = False
        try:
            # Only the types of failed groups can lose every holder.
            touched = np.unique(self.layout.stacks[failed])
            if not np.all(alive[self.holders[touched]].any(axis=1)):
                return None
            bound = lower_bound(n, k)
            # Orphans: types whose top-layer holder failed; every live group keeps its top type.
            candidates = self.holders[self.layout.stacks[failed, 0]]
            live = alive[candidates]
        finally:
            alive[failed] = True
        rows = np.repeat(np.arange(k), live.sum(axis=1))
        groups = candidates[live].astype(np.int64)
        extra = bound - 1
        if extra >= 1:
            columns = (groups[:, None] * extra + np.arange(extra)[None, :]).ravel()
            graph = csr_matrix((np.ones(columns.size, dtype=np.int8), (np.repeat(rows, extra), columns)),
                               shape=(k, n * extra))
            matched = maximum_bipartite_matching(graph, perm_type="column")
            if np.all(matched >= 0):
                return bound
        self.planner_calls += 1
        return least_stack_number(self.layout, failed)


def _domain_type_counts(layout, domains):
    """Sparse (domains x shard types) matrix of holder counts."""
    import scipy.sparse as sp

    n = layout.groups
    r = layout.redundancy
    rows = np.repeat(domains.entry_domain, r)
    columns = layout.stacks[domains.entry_group].ravel()
    return sp.csr_matrix((np.ones(rows.size, dtype=np.int64), (rows, columns)), shape=(max(1, domains.count), n))


def _wipe_out_pairs(layout, domains):
    """Every pair ``(a, b)``, ``a < b``, of domains whose joint failure loses a shard type that no single one loses."""
    n, r = layout.stacks.shape
    if r >= 3 and domains.worst(layout.stacks)[0] <= 1:
        return []  # at most one holder per domain: a pair loses at most 2 < r holders
    holders = layout.holders()[1].reshape(n, r)
    indptr = domains.indptr
    found = set()
    for t in range(n):
        options = [set(domains.entry_domain[indptr[g]:indptr[g + 1]].tolist()) for g in holders[t].tolist()]
        if any(not o for o in options):
            continue  # a holder in no domain survives every domain failure
        # The type is lost by {a, b} when every holder is in a or in b, and by neither
        # alone (a domain holding every holder loses it alone: a single-domain wipe-out).
        alone = set.intersection(*options)
        for a in options[0] - alone:
            rest = [o for o in options if a not in o]
            for b in set.intersection(*rest) - alone:
                if b != a:
                    found.add((min(a, b), max(a, b)))
    return sorted(found)


def _pair_candidates(layout, domains, max_pairs):
    """Pairs of domains to evaluate: all, or the ``max_pairs`` sharing the most shard types."""
    count = domains.count
    total = count * (count - 1) // 2
    if total <= max_pairs:
        first, second = np.triu_indices(count, 1)
        return list(zip(first.tolist(), second.tolist())), "exhaustive"
    counts = _domain_type_counts(layout, domains)
    shared = (counts @ counts.T).tocoo()
    keep = shared.row < shared.col
    rows, cols, values = shared.row[keep], shared.col[keep], shared.data[keep]
    order = np.lexsort((cols, rows, -values))[:max_pairs]
    pairs = list(zip(rows[order].tolist(), cols[order].tolist()))
    return pairs, (f"the {len(pairs)} pairs of {total} that share the most shard types "
                   f"(every pair checked for wipe-outs)")


# ============================================================ side by side
def domain_comparison(layout, topology, *, domain_probability, level=None, baselines=("sidon", "consecutive"),
                      trials=200, seed=0, micro_batches=1, workers=1, executor=None, progress=None,
                      time_limit=DEFAULT_TIME_LIMIT):
    """A layout beside plain layouts of the same ``N`` and ``r`` under correlated failures.

    Each layout gets its domain multiplicity at ``level`` and a
    :func:`spare_opt.domain_monte_carlo` run with the same trials and seed (common
    random numbers: the same failure orders and domain draws).

    Parameters
    ----------
    layout : Layout
        The layout to judge (typically :func:`spare_opt.domain_safe`).
    topology : Topology
    domain_probability : float or FailureModel
        ``p`` of the correlated model, in ``[0, 1]``, or a failure model fitted to a
        trace (:func:`spare_opt.fit_trace`), whose probability that a failure event
        takes several nodes is used.
    level : str, optional
        Default: the first level of the topology.
    baselines : sequence of str, default ("sidon", "consecutive")
        Methods of :func:`spare_opt.generate` built for comparison (``block`` only
        where ``r`` divides ``N``; skipped otherwise); may be empty.
    trials, seed, micro_batches, workers, executor
        As in :func:`spare_opt.domain_monte_carlo`; ``seed`` also seeds the baselines.
    progress : callable, optional
        ``progress(done, total)`` in trials over every layout.
    time_limit : float, default 10.0
        Seconds for the Sidon baseline.

    Returns
    -------
    list of dict
        One row per layout (the given one first, named ``"layout"``): ``name``,
        ``method``, ``safe``, ``multiplicity``, and the figures of
        :meth:`~spare_opt.DomainMonteCarloResult.to_dict` (``mu``, ``mu_events``,
        ``sbar`` with intervals, ``micro_batches``, ``mean_step_cost``...).

    Raises
    ------
    ParameterTypeError, ParameterError
        As :func:`spare_opt.domain_monte_carlo`; an unknown baseline method.
    """
    check_layout(layout)
    check_topology(topology)
    domains = _checked_domains(layout, topology, level)
    if isinstance(domain_probability, FailureModel):
        domain_probability = domain_probability.multi_node_probability
    domain_probability = check.probability("domain_probability", domain_probability)
    trials = check.count("trials", trials, maximum=MAX_TRIALS)
    micro_batches = check_micro_batches(micro_batches, layout.groups)
    check.callback("progress", progress)
    if isinstance(baselines, str):
        baselines = [b for b in baselines.split(",") if b]
    baselines = list(dict.fromkeys(check.choice("baseline method", b, METHODS) for b in baselines))
    n, r = layout.stacks.shape
    layouts = [("layout", layout)]
    for method in baselines:
        if method == "block" and n % r:
            continue
        layouts.append((method, generate(method, n, r, seed=seed, time_limit=time_limit)))
    total = trials * len(layouts)
    rows = []
    for index, (name, candidate) in enumerate(layouts):
        relay = None if progress is None else (lambda d, _t, base=index * trials: progress(base + d, total))
        result = domain_monte_carlo(candidate, topology, domain_probability=domain_probability,
                                    level=domains.levels[0], trials=trials, seed=seed,
                                    micro_batches=micro_batches, workers=workers, executor=executor,
                                    progress=relay)
        multiplicity = domains.worst(candidate.stacks)[0]
        rows.append({"name": name, "method": candidate.method, "safe": bool(multiplicity <= 1),
                     "multiplicity": int(multiplicity), **result.to_dict()})
    return rows


# ============================================================ derived topology
def derived_topology(trace, groups, *, level=None, window_days=0.0, until_days=None, placement_seed=None,
                     placement=None, use_domains="auto"):
    """The topology a fault trace gives: its nodes' domains, or else the nodes that failed together.

    A CSV fault log may name each node's failure domain (its ``domain`` column,
    :attr:`FaultTrace.node_domains`): then each group is in the domains of its nodes
    (level ``"domain"``), a physical topology read from the trace.  For traces without
    rack ids (the InfiniteHBD trace is anonymised) the topology is *derived*: usable
    ``fault_start`` events are taken in time order; events at most ``window_days``
    apart (the same instant when 0) form one co-failure; groups that co-fail, directly
    or through a chain of co-failures, are one domain (level ``"incident"``).  Groups
    that never co-fail are in no domain.  A derived topology is not a physical one: it
    says which groups the trace saw fail together.

    Parameters
    ----------
    trace : FaultTrace
    groups : int
        ``N``.
    level : str, optional
        The level name (default ``"domain"`` or ``"incident"``); derived domains are
        labelled ``"<level>-0"``, ``"<level>-1"``... in order of first co-failure.
    window_days : float, default 0.0
        Events at most this far apart (days) co-fail; ``0`` means the same instant.
    until_days : float, optional
        Only events before this time are used (derive on a prefix, replay the rest);
        with the trace's node domains, only the nodes with a fault before it.
    placement_seed, placement
        Node-to-group mapping, as in :func:`spare_opt.traces.trace.trace_instants`.
    use_domains : {"auto", True, False}, default "auto"
        Take the trace's node domains when it has any (``"auto"``), always (an error
        when it has none), or never (derive from co-failures).

    Returns
    -------
    Topology
        One level, ``N`` groups.

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a FaultTrace, a number or name has the wrong type.
    ParameterError
        ``groups < 1``, a negative window, an empty level name, a window with the
        trace's node domains (which do not come from co-failures).

    Examples
    --------
    >>> from spare_opt import derived_topology, parse_fault_events
    >>> events = [{"node_id": node, "event_time": time, "event_type": "fault_start",
    ...            "fault_type": {"Level": "L1", "Class": "GPU", "Desc": ""}}
    ...           for node, time in [("a", 1.0), ("b", 1.0), ("c", 2.0), ("d", 3.0), ("e", 3.0)]]
    >>> topology = derived_topology(parse_fault_events(events), 6)
    >>> {label: members.tolist() for label, members in topology.domains("incident").items()}
    {'incident-0': [0, 1], 'incident-1': [3, 4]}
    """
    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    groups = check.count("groups N", groups, maximum=MAX_LAYOUT_ENTRIES)  # no layout holds more groups
    if use_domains != "auto":
        use_domains = check.flag("use_domains", use_domains)
    has_domains = any(domain is not None for domain in trace.node_domains)
    if use_domains is True and not has_domains:
        raise ParameterError(f"{trace.source}: the trace names no failure domain (only CSV fault logs with a "
                             "'domain' column do)")
    from_domains = has_domains and use_domains in ("auto", True)
    if level is None:
        level = "domain" if from_domains else "incident"
    if not isinstance(level, str):
        raise ParameterTypeError(f"level must be a level name (str), got {type(level).__name__}")
    if not level.strip():
        raise ParameterError("level must be a non-empty name")
    window_days = check.number("window_days", window_days, minimum=0.0)
    if until_days is not None:
        until_days = check.number("until_days", until_days)
    node_members = trace.node_groups(groups, seed=placement_seed, placement=placement, members=True)
    indptr, node_group_ids = node_members
    usable = trace.is_start & ~trace.ignored
    if until_days is not None:
        usable &= trace.times_days < until_days
    if from_domains:
        if window_days > 0:
            raise ParameterError(f"window_days groups co-failures, but the domains of {trace.source} come from its "
                                 "domain column (use_domains=False derives them from co-failures)")
        seen = None if until_days is None else np.unique(trace.node[usable])
        return _topology_of_node_domains(trace, groups, level, indptr, node_group_ids, seen)
    events = np.flatnonzero(usable)
    parent = np.arange(groups)

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    times = trace.times_days[events]
    breaks = np.flatnonzero(np.diff(times) > window_days) + 1 if events.size else np.zeros(0, dtype=np.int64)
    first_seen = {}
    for cluster in np.split(events, breaks) if events.size else []:
        members = np.unique(np.concatenate([node_group_ids[indptr[node]:indptr[node + 1]]
                                            for node in trace.node[cluster].tolist()] or [np.zeros(0, np.int32)]))
        if members.size < 2:
            continue
        root = find(int(members[0]))
        for g in members[1:].tolist():
            other = find(g)
            if other != root:
                parent[other] = root
        for g in members.tolist():
            first_seen.setdefault(g, float(trace.times_days[cluster[0]]))
    roots = np.array([find(g) for g in range(groups)])
    sizes = np.bincount(roots, minlength=groups)
    in_domain = sizes[roots] >= 2
    # Label domains in order of their first co-failure (then lowest group).
    order = sorted({int(roots[g]) for g in np.flatnonzero(in_domain).tolist()},
                   key=lambda root: min((first_seen.get(g, np.inf), g) for g in np.flatnonzero(roots == root)))
    label_of = {root: f"{level}-{index}" for index, root in enumerate(order)}
    entries = [label_of[int(roots[g])] if in_domain[g] else [] for g in range(groups)]
    return Topology(groups, {level: entries})


def _topology_of_node_domains(trace, groups, level, indptr, node_group_ids, seen=None):
    """Each group in the domains of its nodes (the trace's ``domain`` column), in order of first appearance of the domain.

    ``seen`` (node indices), when given, keeps only those nodes: the ones with a fault
    before ``until_days``.
    """
    labels = [[] for _ in range(groups)]
    keep = None if seen is None else set(seen.tolist())
    for node, domain in enumerate(trace.node_domains):
        if domain is None or (keep is not None and node not in keep):
            continue
        for g in node_group_ids[indptr[node]:indptr[node + 1]].tolist():
            if domain not in labels[g]:
                labels[g].append(domain)
    entries = [found[0] if len(found) == 1 else found for found in labels]
    return Topology(groups, {level: entries})


def cover_domains(topology, *, level=None, domain_size=None):
    """A derived topology completed to cover every group: the groups in no domain placed by inference.

    A trace sees only the nodes that failed, so :func:`derived_topology` leaves the
    other groups in no domain and its domains hold only the groups that failed.  Here
    every domain smaller than the domain size is topped up with groups in no domain
    (lowest group ids first), then the rest form new domains of that size
    (``"<level>-inferred-0"``, ...; the last may be smaller).  Which physical domain a
    node that never failed sits in is not in the trace: these placements are an
    inference, and the count says how many groups it placed.

    Parameters
    ----------
    topology : Topology
        From :func:`derived_topology` (or any topology; groups with a list of labels
        are left as they are).
    level : str, optional
        The level to complete (default: the topology's only level).
    domain_size : int, optional
        Groups per domain; default: the largest domain observed (the trace's domains
        are parts of physical ones), at least 2.

    Returns
    -------
    (Topology, dict)
        The completed topology, and ``{"domain_size", "inferred_size",
        "placed_by_inference", "observed_domains", "new_domains"}``.

    Raises
    ------
    ParameterTypeError
        ``topology`` is not a Topology, ``domain_size`` not an integer.
    ParameterError
        ``domain_size < 1``, or ``level`` missing and the topology has several levels.
    TopologyError
        ``level`` is not a level of the topology.
    """
    check.instance("topology", topology, Topology)
    if level is None:
        if len(topology.levels) != 1:
            raise ParameterError(f"the topology has levels {', '.join(topology.levels)}: name the one to complete")
        level = topology.levels[0]
    topology.check_level(level)
    domains = topology.domains(level)
    observed = max((members.size for members in domains.values()), default=0)
    inferred = domain_size is None
    size = max(2, observed) if inferred else check.count("domain_size", domain_size)
    def as_entries(name):
        return [labels[0] if len(labels) == 1 else list(labels) for labels in topology.entries(name)]

    entries = as_entries(level)
    free = [g for g, entry in enumerate(entries) if entry == []]
    free.reverse()  # pop() takes the lowest group first
    placed = 0
    for label, members in domains.items():
        room = size - members.size
        while room > 0 and free:
            entries[free.pop()] = label
            room -= 1
            placed += 1
    new = 0
    free.reverse()
    for start in range(0, len(free), size):
        label = f"{level}-inferred-{new}"
        for g in free[start:start + size]:
            entries[g] = label
            placed += 1
        new += 1
    levels = {name: (entries if name == level else as_entries(name)) for name in topology.levels}
    info = {"domain_size": size, "inferred_size": inferred, "placed_by_inference": placed,
            "observed_domains": len(domains), "new_domains": new}
    return Topology(topology.groups, levels), info

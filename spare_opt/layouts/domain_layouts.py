"""Domain-safe stack layouts: in every failure domain, the groups hold pairwise disjoint shard types.

A failure domain (a rack, a switch, a power feed: :class:`~spare_opt.layouts.topology.Topology`)
takes all its groups at once.  A layout is *domain-safe* at a level when, in every
domain of that level, no shard type has two holders; then one domain failure removes
at most one holder of each shard type: it never wipes out when ``r >= 2`` and moves
load the way scattered failures do (``docs/domains.md``).  The *domain multiplicity*
of a layout is the largest number of holders of one shard type inside one domain: 1
exactly when the layout is domain-safe.

:func:`domain_safe` builds such layouts by two routes:

* **circulant** - when the domains (of every chosen level) can be laid out as
  intervals of one cyclic order of the groups (blocks of consecutive groups, nested
  levels such as racks inside pods, or any single level where each group is in one
  domain), a circulant layout on that order is domain-safe exactly when every two
  offsets are at least ``d`` apart around the cycle (``d``: the largest domain).
  Sidon offsets with that spacing come from known constructions or from the CP-SAT
  difference model of :func:`spare_opt.sidon` with a spacing constraint;
* **assignment** - for any other topology (levels that cross, groups spanning several
  domains), the rows of a Sidon layout are assigned to physical groups so that no
  domain contains two rows sharing a shard type (an edge of the conflict graph):
  a graph colouring (networkx) gives the start, CP-SAT repairs and improves it.

When no domain-safe layout exists (a domain of ``s`` groups needs ``s r <= N``), or
none is found in the time limit, the domain multiplicity is minimised instead and the
layout's metadata says which case occurred (``domain_status``).
"""

import time

import numpy as np

from .._core import validation as check
from ._constructions import candidate_sets, canonical_offsets, modular_lambda
from ._domain_assignment import (  # noqa: F401 - _Assignment, _Cells, _improve: re-exported for the tests
    _MAX_COUNT_ENTRIES,
    _Assignment,
    _Cells,
    _assignment_route,
    _improve,
    conflict_graph,
)
from .._core.parallel import resolve_workers
from .._core.errors import ParameterError, SolverError
from .generators import (
    DEFAULT_TIME_LIMIT,
    MAX_MODEL_DIFFERENCES,
    _check_layout_size,
    _cp_sat_import_seconds,
    _solve_difference_model,
)
from .layout import Layout, check_layout
from .topology import check_topology

__all__ = [
    "DOMAIN_METHODS",
    "DOMAIN_STATUSES",
    "conflict_graph",
    "domain_multiplicity",
    "domain_safe",
    "is_domain_safe",
]

#: Routes of :func:`domain_safe`: ``"auto"`` takes the circulant route when the domains
#: allow it and the assignment route otherwise.
DOMAIN_METHODS = ("auto", "circulant", "assignment")

#: Values of ``metadata["domain_status"]`` of a :func:`domain_safe` layout.
DOMAIN_STATUSES = {
    "safe": "every domain holds pairwise disjoint shard types (domain multiplicity 1)",
    "impossible": "no layout can be domain-safe: a domain of s groups holds s r > N shard slots; "
                  "the domain multiplicity was minimised instead",
    "not-found": "a domain-safe layout may exist but none was found in the time limit; "
                 "the domain multiplicity was minimised instead",
}

# Unit multipliers tried on each Sidon construction to space its offsets.
_MAX_UNITS = 4096
# Random spaced offset sets drawn as starts of the lambda minimisation.
_RANDOM_SPACED_SETS = 256


# =================================================================== domains
class _Domains:
    """The domains of the chosen levels of a topology, flattened (private).

    Domain ``k`` has label ``labels[k] = (level, label)`` and ``sizes[k]`` groups.
    ``entry_group[i]`` is in ``entry_domain[i]``, entries sorted by group, so that
    ``indptr`` (length ``N + 1``) gives every group's domains in CSR form.
    """

    def __init__(self, topology, levels):
        self.groups = topology.groups
        self.levels = levels
        self.labels = []
        self.level_ranges = []
        groups_parts, domain_parts = [], []
        offset = 0
        for level in levels:
            indptr, ids = topology.membership(level)
            groups_parts.append(np.repeat(np.arange(self.groups, dtype=np.int64), np.diff(indptr)))
            domain_parts.append(ids.astype(np.int64) + offset)
            self.labels += [(level, label) for label in topology.labels(level)]
            self.level_ranges.append((offset, offset + topology.domain_count(level)))
            offset += topology.domain_count(level)
        self.count = offset
        entry_group = np.concatenate(groups_parts)
        entry_domain = np.concatenate(domain_parts)
        order = np.lexsort((entry_domain, entry_group))
        self.entry_group = entry_group[order]
        self.entry_domain = entry_domain[order]
        self.indptr = np.searchsorted(self.entry_group, np.arange(self.groups + 1))
        self.sizes = np.bincount(self.entry_domain, minlength=self.count)

    def lower_bound(self, redundancy):
        """Least possible domain multiplicity: ``max(1, ceil(s r / N))`` over domain sizes ``s``."""
        if self.count == 0:
            return 1
        return max(1, -(-int(self.sizes.max()) * redundancy // self.groups))

    def counts(self, stacks):
        """Holders of every shard type in every domain, as (domain * N + type) -> count."""
        n = self.groups
        keys = (self.entry_domain[:, None] * n + stacks[self.entry_group]).ravel()
        if self.count * n <= _MAX_COUNT_ENTRIES:
            return np.bincount(keys, minlength=self.count * n)
        return np.unique(keys, return_counts=True)

    def worst(self, stacks):
        """``(multiplicity, domain, shard type)`` of the largest count; ``(0, None, None)`` without domains."""
        if self.count == 0 or self.entry_group.size == 0:
            return 0, None, None
        counts = self.counts(stacks)
        if isinstance(counts, tuple):
            keys, values = counts
            best = int(np.argmax(values))
            key, value = int(keys[best]), int(values[best])
        else:
            key = int(np.argmax(counts))
            value = int(counts[key])
        return value, key // self.groups, key % self.groups

    def interval_order(self):
        """A cyclic order of the groups in which every domain is an interval, or ``None``.

        Returns ``(position, identity)``: ``position[g]`` is the place of group ``g``;
        ``identity`` is true when the natural order already works (domains are cyclic
        intervals of group ids).  Otherwise, when every group is in at most one domain
        per level, the groups are sorted by their domains, coarsest level first; the
        order is kept if every domain is then an interval.
        """
        n = self.groups
        if self.count == 0:
            return np.arange(n), True
        members, bounds = self._members()
        if self._all_intervals(members, bounds, np.arange(n), cyclic=True):
            return np.arange(n), True
        keys = []
        for first, last in self.level_ranges:
            level_ids = np.full(n, -1, dtype=np.int64)
            in_level = (self.entry_domain >= first) & (self.entry_domain < last)
            if np.any(np.bincount(self.entry_group[in_level], minlength=n) > 1):
                return None  # a group spans several domains of this level
            level_ids[self.entry_group[in_level]] = self.entry_domain[in_level]
            keys.append((last - first, level_ids))
        # Coarsest level (fewest domains) first; np.lexsort takes its primary key last.
        keys.sort(key=lambda item: -item[0])
        order = np.lexsort([ids for _count, ids in keys])
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
        if self._all_intervals(members, bounds, position, cyclic=False):
            return position, False
        return None

    def _members(self):
        order = np.lexsort((self.entry_group, self.entry_domain))
        members = self.entry_group[order]
        bounds = np.searchsorted(self.entry_domain[order], np.arange(self.count + 1))
        return members, bounds

    def _all_intervals(self, members, bounds, position, cyclic):
        """Whether every domain's groups occupy consecutive places of ``position``."""
        n = self.groups
        places = position[members]
        starts = bounds[:-1]
        if not cyclic:
            low = np.minimum.reduceat(places, starts)
            high = np.maximum.reduceat(places, starts)
            return bool(np.all(high - low + 1 == self.sizes))
        # Cyclic: sorted places of a domain have at most one jump > 1, wrap-around included.
        domain_of = np.repeat(np.arange(self.count), self.sizes)
        order = np.lexsort((places, domain_of))
        sorted_places = places[order]
        step = np.diff(sorted_places)
        same = domain_of[1:] == domain_of[:-1]
        jumps = np.bincount(domain_of[1:][same & (step > 1)], minlength=self.count)
        first = sorted_places[starts]
        last = sorted_places[bounds[1:] - 1]
        wrap = (first + n - last > 1) & (self.sizes < n)
        return bool(np.all(jumps + wrap <= 1))


def _domains_of(topology, levels):
    check_topology(topology)
    return _Domains(topology, topology.select_levels(levels))


# ================================================================== checks
def domain_multiplicity(layout, topology, *, levels=None):
    """The largest number of holders of one shard type inside one failure domain.

    Parameters
    ----------
    layout : Layout
    topology : Topology
        Of the same ``N``.
    levels : str, sequence of str or None
        The levels whose domains count; ``None`` for the first level of the topology.

    Returns
    -------
    int
        1 exactly when the layout is domain-safe at these levels (0 when no group is
        in a domain).  A domain failure then removes at most this many holders of
        any shard type.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout or ``topology`` not a Topology.
    ParameterError
        The sizes differ, or a level is unknown.

    Examples
    --------
    >>> from spare_opt import Topology, consecutive, domain_multiplicity, sidon
    >>> racks = Topology.blocks(600, {"rack": 8})
    >>> domain_multiplicity(consecutive(600, 8), racks)  # a rack holds 8 copies of a shard type
    8
    >>> domain_multiplicity(sidon(600, 8), racks)  # its offsets 0, 6, 7, ... are closer than a rack
    3

    Notes
    -----
    Counts holders per (domain, shard type) pair with one ``numpy.bincount``:
    ``O(N r * levels)`` time.
    """
    domains = _checked_domains(layout, topology, levels)
    return domains.worst(layout.stacks)[0]


def is_domain_safe(layout, topology, *, levels=None):
    """Whether, in every domain of ``levels``, the groups hold pairwise disjoint shard types.

    See :func:`domain_multiplicity` (safe exactly when it is at most 1); same
    parameters and errors.

    Returns
    -------
    bool
    """
    return domain_multiplicity(layout, topology, levels=levels) <= 1


def _checked_domains(layout, topology, levels):
    check_layout(layout)
    domains = _domains_of(topology, levels)
    if domains.groups != layout.groups:
        raise ParameterError(f"the topology has N = {domains.groups} groups but the layout N = {layout.groups}")
    return domains


# ================================================================ generator
def domain_safe(groups, redundancy, topology, *, levels=None, method="auto", time_limit=DEFAULT_TIME_LIMIT,
                seed=0, workers=1):
    """A stack layout that is domain-safe at the chosen levels of a topology, when one exists.

    In every domain the groups hold pairwise disjoint shard types, so one domain
    failure removes at most one holder of each shard type: with ``r >= 2`` it never
    wipes out.  Among such layouts, one whose overlap ``lambda`` is least is sought
    (1, a Sidon layout, when possible).

    Parameters
    ----------
    groups : int
        ``N``, equal to ``topology.groups``.
    redundancy : int
        ``r``, ``1 <= r <= N``.
    topology : Topology
    levels : str, sequence of str or None
        Levels to be safe at; ``None`` for the first level of the topology.
    method : {"auto", "circulant", "assignment"}, default "auto"
        ``"circulant"``: offsets spaced by the largest domain, on an order of the
        groups in which every domain is an interval, or, when there is no such
        order, offsets whose differences avoid every difference of two groups of a
        common domain (refused when none is found); ``"assignment"``: rows of a
        Sidon layout assigned to groups by colouring, swaps and CP-SAT; ``"auto"``:
        circulant when possible (a third of the time for the second kind), else
        assignment.
    time_limit : float, default 10.0
        Seconds for the searches (constructions are not limited); model building can
        overrun it by a fraction of a second.
    seed : int, default 0
        Seed of CP-SAT, of the random starts and of the neighbourhood choice.
    workers : int, default 1
        CP-SAT threads (``-1``: every CPU), as in :func:`spare_opt.sidon`.

    Returns
    -------
    Layout
        Method ``"domain-safe"``; circulant (with ``offsets``) when the route is
        circulant and the domains are cyclic intervals of group ids.  ``metadata``:

        ``domain_status``
            One of :data:`DOMAIN_STATUSES`: ``"safe"``, ``"impossible"`` (some
            domain of ``s`` groups has ``s r > N``) or ``"not-found"``.
        ``domain_multiplicity``, ``domain_multiplicity_lower_bound``
            The largest number of holders of one shard type in one domain (checked
            against :func:`domain_multiplicity`), and ``max(1, ceil(s r / N))``.
        ``domain_route``, ``domain_levels``, ``domain_reason``
            ``"circulant"`` or ``"assignment"``, the levels, why this status.
        ``topology``
            The topology's document (:meth:`~spare_opt.Topology.to_dict`): the layout
            records what it was made for; :meth:`~spare_opt.Topology.from_layout`
            reads it back.
        ``lambda``, ``solver_status``, ...
            The overlap and the Sidon search's keys as in :func:`spare_opt.sidon`;
            ``solve_seconds``, ``seed``, ``time_limit``, ``workers``, ``search``.

    Raises
    ------
    ParameterTypeError
        A size, seed or worker count is not an integer, ``topology`` is not a
        Topology, the time limit is not a number.
    ParameterError
        Bad sizes, ``N`` different from the topology's, an unknown level or method,
        ``method="circulant"`` when no circulant layout meets the domains.
    SolverError
        CP-SAT rejected a model, or the result failed its verification (a bug).

    Notes
    -----
    *The rule* (``docs/domains.md``).  Groups ``g`` and ``h`` share a shard type when
    an edge of the conflict graph joins them; a domain failure removes two holders of
    a type exactly when the domain contains such an edge.  Domain-safe layouts keep
    every domain an independent set.  A domain of ``s`` groups holds ``s r`` shard
    slots, so it needs ``s r <= N`` (pigeonhole); more generally its multiplicity is at
    least ``ceil(s r / N)``.

    *Circulant route.*  In a circulant layout groups ``g`` and ``h`` share a type
    exactly when ``g - h`` is a difference of offsets mod ``N``.  If every domain is an
    interval of at most ``d`` places of a cyclic order, differences inside a domain
    lie in ``[-(d-1), d-1]``, so the layout on that order is domain-safe when every two
    offsets are at least ``d`` apart around the cycle, and more generally has
    multiplicity at most ``m`` when any ``d`` consecutive places hold at most ``m``
    offsets.  Evenly spaced offsets reach ``m = ceil(d r / N)``, the pigeonhole bound,
    so the circulant route always attains the least multiplicity; what remains is
    ``lambda``.  Sidon offsets with that spacing are sought among unit multiples of
    known Sidon sets (Singer, Bose, Golomb rulers: a unit multiple of a Sidon set is
    Sidon, its spacing changes), spaced sets mod ``N / d`` scaled by ``d`` when ``d``
    divides ``N``, then by CP-SAT: the difference model of :func:`spare_opt.sidon`
    with ``o_{i+m} - o_i >= d`` around the cycle.  Failing that, ``lambda`` is minimised
    under the spacing (CP-SAT from the best spaced start).  For domains that are not
    intervals (crossing levels, groups in two domains) the same search looks for Sidon
    offsets whose differences avoid the set ``F`` of differences of two groups of a
    common domain (the model's difference variables take values outside ``F``).

    *Assignment route.*  A Sidon layout (:func:`spare_opt.sidon`) gives the rows; the
    groups are split into *cells* of groups with the same domains (interchangeable);
    rows are assigned to cells, as many as each cell has groups.  The start is an
    equitable colouring of the conflict graph (networkx, Kierstead-Kostochka) when the
    domains are ``K`` equal-sized cells and the graph's maximum degree is below ``K``
    (then each colour class is a domain-safe cell), else a greedy placement of each
    row in the cell where it meets the fewest holders of its shard types.
    Min-conflicts swaps of two rows' cells follow, then CP-SAT minimises the excess
    ``sum max(0, holders of t in D - m)`` over (domain, type) pairs, ``m`` the lower
    bound: on the whole model when small, else on neighbourhoods (large neighbourhood
    search: the cells of conflicting rows plus random cells, the other rows fixed).
    Row permutations keep ``lambda``.

    Determinism: as for :func:`spare_opt.sidon`, runs that end before the time limit
    are reproducible for a given ``seed`` and ``workers``.

    References
    ----------
    S. A. Weil et al., "CRUSH: controlled, scalable, decentralized placement of
    replicated data", SC 2006 (failure domains); A. Cidon et al., "Copysets: reducing
    the frequency of data loss in cloud storage", USENIX ATC 2013.  H. A. Kierstead and
    A. V. Kostochka, "A short proof of the Hajnal-Szemeredi theorem on equitable
    colouring", Combin. Probab. Comput. 17 (2008).  CSPLib problem 006 (Golomb rulers).

    Examples
    --------
    >>> from spare_opt import Topology, domain_multiplicity, domain_safe
    >>> racks = Topology.blocks(600, {"rack": 8})
    >>> layout = domain_safe(600, 8, racks)
    >>> layout.metadata["domain_status"], layout.overlap(), domain_multiplicity(layout, racks)
    ('safe', 1, 1)
    >>> shuffled = Topology.blocks(600, {"rack": 8}, shuffle=True, seed=1)
    >>> domain_multiplicity(domain_safe(600, 8, shuffled), shuffled)
    1
    """
    started = time.perf_counter()
    groups, redundancy = _check_layout_size(groups, redundancy)
    domains = _domains_of(topology, levels)
    if domains.groups != groups:
        raise ParameterError(f"the topology has N = {domains.groups} groups, not N = {groups}")
    check.choice("method", method, DOMAIN_METHODS)
    time_limit = check.seconds("time limit", time_limit)
    seed = check.seed(seed)
    workers = resolve_workers(workers)
    deadline = started + time_limit
    lower = domains.lower_bound(redundancy)
    metadata = {
        "domain_levels": list(domains.levels),
        "domain_multiplicity_lower_bound": lower,
        "seed": seed,
        "time_limit": time_limit,
        "workers": workers,
    }
    layout = None
    order = domains.interval_order() if method in ("auto", "circulant") else None
    if order is not None:
        layout = _interval_route(groups, redundancy, domains, order, lower, deadline, seed, workers, metadata)
    elif method in ("auto", "circulant") and lower == 1:
        # Not intervals: a circulant layout is safe when no offset difference is a
        # difference of two groups of a common domain.  "auto" spends a third of the time.
        share = deadline if method == "circulant" else started + time_limit / 3
        layout = _difference_route(groups, redundancy, domains, share, seed, workers, metadata,
                                   minimise=method == "circulant")
    if layout is None and method == "circulant":
        raise ParameterError("no circulant layout meets these domains (they are not intervals of any order of the "
                             "groups, and no offsets avoiding their differences were found): use method "
                             "'assignment'")
    if layout is None:
        layout = _assignment_route(groups, redundancy, domains, lower, deadline, seed, workers, metadata)
    return _finish(layout, domains, lower, topology, started)


def _finish(layout, domains, lower, topology, started):
    """Measure the multiplicity, set the status, record the topology; verify the claims."""
    metadata = layout.metadata
    measured = domains.worst(layout.stacks)[0]
    claimed = metadata.pop("_claimed_multiplicity", measured)
    if measured != claimed or (domains.count and measured < lower):
        raise SolverError(f"domain_safe: internal check failed: claimed multiplicity {claimed}, measured {measured}, "
                          f"lower bound {lower}")
    if domains.count == 0:  # no group in any domain: multiplicity 0, and 0 is its least value
        metadata["domain_multiplicity_lower_bound"] = 0
        status, reason = "safe", "no group is in a domain at these levels: no two holders can fail together"
    elif measured <= 1:
        status, reason = "safe", "every domain holds pairwise disjoint shard types"
    elif lower > 1:
        size = int(domains.sizes.max())
        status = "impossible"
        reason = (f"a domain of {size} groups holds {size} x r = {size * layout.redundancy} shard slots > "
                  f"N = {layout.groups}: some shard type has {lower} holders in it in any layout")
    else:
        status = "not-found"
        reason = "no domain-safe layout found in the time limit"
    metadata.update(domain_status=status, domain_multiplicity=int(measured), domain_reason=reason,
                    topology=topology.to_dict())
    metadata["solve_seconds"] = round(time.perf_counter() - started, 4)
    return layout


# =========================================================== circulant route
class _OffsetRule:
    """What circulant offsets must satisfy for a topology (private).

    ``window = (width, count)``: at most ``count`` offsets in any ``width`` consecutive
    residues (domains that are intervals of at most ``width`` places).  ``forbidden``:
    a boolean mask of the residues no difference of offsets may take (differences of
    two groups in a common domain, for domains that are not intervals).
    """

    def __init__(self, groups, window=None, forbidden=None):
        self.groups = groups
        self.window = window
        self.forbidden = forbidden

    def holds(self, sets):
        """Per row of ``sets`` (sorted residues, shape (k, r)): whether the rule holds."""
        k, r = sets.shape
        ok = np.ones(k, dtype=bool)
        if self.window is not None:
            width, count = self.window
            if count < r and width > 1:
                extended = np.concatenate((sets, sets + self.groups), axis=1)
                ok &= np.all(extended[:, count:count + r] - extended[:, :r] >= width, axis=1)
        if self.forbidden is not None and r >= 2:
            diffs = (sets[:, :, None] - sets[:, None, :]) % self.groups
            ok &= ~np.any(self.forbidden[diffs], axis=(1, 2))
        return ok

    def free_residues(self):
        """Non-zero residues a difference may take (the counting bound of a Sidon set)."""
        free = self.groups - 1
        if self.forbidden is not None:
            free -= int(self.forbidden[1:].sum())
        elif self.window is not None and self.window[1] == 1:
            free -= min(self.groups - 1, 2 * (self.window[0] - 1))
        return free


def _forbidden_differences(domains):
    """Mask of residues ``(g - h) mod N`` over pairs of groups in a common domain, or ``None`` when too many pairs."""
    n = domains.groups
    members, bounds = domains._members()
    sizes = np.diff(bounds)
    if int((sizes.astype(np.int64) ** 2).sum()) > 50_000_000:
        return None
    mask = np.zeros(n, dtype=bool)
    for size in np.unique(sizes[sizes >= 2]).tolist():
        starts = bounds[:-1][sizes == size]
        block = members[starts[:, None] + np.arange(size)[None, :]]
        mask[((block[:, :, None] - block[:, None, :]) % n).ravel()] = True
    mask[0] = False
    return mask


def _unit_multiples(base, rule, rng):
    """A unit multiple of ``base`` mod ``N`` that meets ``rule``, or ``None`` (vectorised search)."""
    groups = rule.groups
    base = np.asarray(base, dtype=np.int64) % groups
    candidates = np.arange(1, groups, dtype=np.int64)
    candidates = candidates[np.gcd(candidates, groups) == 1]
    if candidates.size > _MAX_UNITS:
        candidates = rng.choice(candidates, size=_MAX_UNITS, replace=False)
    chunk = max(1, 2_000_000 // max(1, base.size ** 2))
    for start in range(0, candidates.size, chunk):
        units = candidates[start:start + chunk]
        sets = np.sort((units[:, None] * base[None, :]) % groups, axis=1)
        ok = np.flatnonzero(rule.holds(sets))
        if ok.size:
            return sets[ok[0]], int(units[ok[0]])
    return None


def _random_starts(groups, redundancy, rule, rng, sets=_RANDOM_SPACED_SETS):
    """Offset sets meeting ``rule``: for a window, even spacing and random gaps of at least
    ``ceil(width / count)``; for forbidden differences, greedy least-collision sets that
    count a forbidden difference as a collision."""
    found = []
    if rule.window is not None:
        width, count = rule.window
        found.append(np.floor(np.arange(redundancy) * groups / redundancy).astype(np.int64))
        step = -(-width // count)
        slack = groups - redundancy * step
        if slack >= 0 and redundancy >= 2:
            for _ in range(sets):
                gaps = step + rng.multinomial(slack, np.full(redundancy, 1.0 / redundancy))
                found.append(np.concatenate(([0], np.cumsum(gaps[:-1]))))
    else:
        residues = np.arange(groups, dtype=np.int64)
        blocked = rule.forbidden.astype(np.int64) * redundancy * redundancy
        for _ in range(max(1, sets // 16)):
            counts = blocked.copy()
            chosen = [0]
            for _step in range(redundancy - 1):
                current = np.asarray(chosen, dtype=np.int64)
                forward = (residues[:, None] - current[None, :]) % groups
                score = counts[forward].sum(axis=1) + counts[(-forward) % groups].sum(axis=1)
                score = score + rng.random(groups) * 0.5
                score[current] = np.inf
                value = int(np.argmin(score))
                np.add.at(counts, (value - current) % groups, 1)
                np.add.at(counts, (current - value) % groups, 1)
                chosen.append(value)
            found.append(np.sort(np.asarray(chosen, dtype=np.int64)))
    found = [s for s in found if rule.holds(np.sort(s)[None, :])[0]]
    return found


def _rule_offsets(groups, redundancy, rule, deadline, seed, workers, minimise=True, spacing=None):
    """Offsets that meet ``rule``, Sidon when possible, else with ``lambda`` minimised.

    Returns ``(offsets or None, lambda, metadata)`` with the Sidon search's keys
    (``None`` when no offsets meeting the rule were found, or, without ``minimise``,
    no Sidon ones).
    """
    rng = np.random.default_rng(seed)
    metadata = {"construction": None, "cp_sat_status": None}
    steps = []
    pairs = redundancy * (redundancy - 1)
    if redundancy <= 1:
        return (0,), 0, dict(metadata, solver_status="optimal", reason="r = 1", lambda_lower_bound=0,
                             lambda_proved_optimal=True, search="none needed")
    lambda_bound = -(-pairs // (groups - 1))

    # 1. Sidon constructions: unit multiples mod N that meet the rule and, with a spacing
    #    d dividing N, Sidon sets mod N / d scaled by d (differences: non-zero multiples of d).
    sources = [(description, candidate, 1) for description, candidate in candidate_sets(groups, redundancy)]
    if spacing and spacing > 1 and groups % spacing == 0 and groups // spacing > 1:
        sources += [(f"{description}, scaled by {spacing}", candidate, spacing)
                    for description, candidate in candidate_sets(groups // spacing, redundancy)]
    for description, candidate, scale in sources:
        if modular_lambda(candidate, groups // scale) > 1:
            continue
        if scale > 1:
            spaced = np.sort(np.asarray(candidate, dtype=np.int64) * scale % groups)
            if rule.holds(spaced[None, :])[0]:
                return _sidon_found(spaced, groups, metadata, description, steps)
            continue
        found = _unit_multiples(candidate, rule, rng)
        if found is not None:
            return _sidon_found(found[0], groups, metadata, f"{description}, times {found[1]}", steps)
    steps.append("constructions: none meets the rule")

    # 2. Random starts meeting the rule; CP-SAT for a Sidon set meeting it.  As in
    # spare_opt.sidon, the one-off import of CP-SAT is not charged to the time limit.
    deadline += _cp_sat_import_seconds()
    starts = _random_starts(groups, redundancy, rule, rng)
    best, best_overlap = None, None
    if starts:
        lambdas = [modular_lambda(s, groups) for s in starts]
        index = int(np.argmin(lambdas))
        best, best_overlap = canonical_offsets(starts[index], groups), lambdas[index]
        steps.append(f"random starts: lambda {best_overlap}")
        if best_overlap <= 1:
            return _sidon_found(np.asarray(best), groups, metadata, None, steps,
                                reason="a random start met the rule and is a Sidon set")
    sidon_possible = pairs <= rule.free_residues()
    proved_none = not sidon_possible
    window, forbidden = rule.window, rule.forbidden
    if sidon_possible and pairs <= MAX_MODEL_DIFFERENCES:
        share = (deadline - time.perf_counter()) / (2 if minimise else 1)
        result = _solve_difference_model(groups, redundancy, time.perf_counter() + share, seed, workers,
                                         sidon_only=True, hint=best, window=window, forbidden=forbidden)
        metadata["cp_sat_status"] = result.status
        steps.append(f"CP-SAT Sidon {result.status}")
        if result.offsets is not None:
            return _sidon_found(np.asarray(result.offsets), groups, metadata, None, steps,
                                reason="CP-SAT found Sidon offsets meeting the rule")
        proved_none = result.proved
    if not minimise or best is None:
        metadata["search"] = ", ".join(steps)
        return None, None, metadata

    # 3. Minimise lambda under the rule, from the best start.
    lower = max(lambda_bound, 2 if proved_none else 1)
    proved = best_overlap <= lower
    if not proved and pairs <= MAX_MODEL_DIFFERENCES and deadline - time.perf_counter() > 0.05:
        result = _solve_difference_model(groups, redundancy, deadline, seed, workers, sidon_only=False, hint=best,
                                         upper=best_overlap, lower=lower, window=window, forbidden=forbidden)
        metadata["cp_sat_status"] = result.status
        if result.offsets is not None and result.overlap <= best_overlap:
            best, best_overlap, proved = result.offsets, result.overlap, result.proved
        steps.append(f"CP-SAT lambda {result.status} {best_overlap}")
    if proved_none:
        status, reason = "fallback", ("no Sidon set meets the rule (counting bound or CP-SAT proof); "
                                      "lambda minimised under it")
    else:
        status, reason = "feasible", "no Sidon offsets meeting the rule found in the time limit; lambda minimised"
    metadata.update(solver_status=status, reason=reason, lambda_lower_bound=int(min(lower, best_overlap)),
                    lambda_proved_optimal=bool(proved or best_overlap <= lower), search=", ".join(steps))
    return best, best_overlap, metadata


def _sidon_found(offsets, groups, metadata, construction, steps, reason=None):
    offsets = canonical_offsets(offsets, groups)
    metadata.update(construction=construction, solver_status="optimal",
                    reason=reason or f"known construction: {construction}", lambda_lower_bound=1,
                    lambda_proved_optimal=True, search=", ".join(steps) or "none needed")
    return offsets, modular_lambda(offsets, groups), metadata


def _circulant_layout(groups, offsets, position, metadata):
    """The circulant layout of ``offsets``, its row for group ``g`` taken at place ``position[g]``."""
    o = np.asarray(offsets, dtype=np.int64)
    circulant = (np.arange(groups, dtype=np.int64)[:, None] + o[None, :]) % groups
    if position is None:
        return Layout(circulant.astype(np.int32), method="domain-safe", offsets=list(offsets), metadata=metadata)
    metadata["domain_order"] = "groups reordered so that every domain is an interval"
    return Layout(circulant[position].astype(np.int32), method="domain-safe", metadata=metadata)


def _interval_route(groups, redundancy, domains, order, lower, deadline, seed, workers, metadata):
    """Circulant route for domains that are intervals: spacing = the largest domain, count = the bound."""
    position, identity = order
    width = int(domains.sizes.max()) if domains.count else 1
    rule = _OffsetRule(groups, window=(width, lower))
    offsets, overlap, search = _rule_offsets(groups, redundancy, rule, deadline, seed, workers, spacing=width)
    metadata.update(search)
    metadata.update(domain_route="circulant", domain_spacing=width)
    metadata["lambda"] = int(overlap)
    # The spacing theorem (docs/domains.md): the multiplicity is the window count, the bound.
    metadata["_claimed_multiplicity"] = lower if domains.count else 0
    return _circulant_layout(groups, offsets, None if identity else position, metadata)


def _difference_route(groups, redundancy, domains, deadline, seed, workers, metadata, minimise):
    """Circulant route for other domains: Sidon offsets avoiding every in-domain difference, or ``None``."""
    forbidden = _forbidden_differences(domains)
    if forbidden is None or redundancy * (redundancy - 1) > groups - 1 - int(forbidden.sum()):
        return None
    rule = _OffsetRule(groups, forbidden=forbidden)
    offsets, overlap, search = _rule_offsets(groups, redundancy, rule, deadline, seed, workers, minimise=minimise)
    if offsets is None:
        metadata["circulant_search"] = search.get("search")
        return None
    metadata.update(search)
    metadata.update(domain_route="circulant", domain_forbidden_differences=int(forbidden.sum()))
    metadata["lambda"] = int(overlap)
    metadata["_claimed_multiplicity"] = 1  # no offset difference is a difference inside a domain
    return _circulant_layout(groups, offsets, None, metadata)

"""Worst-case guarantees of a stack layout: what no failure set of a given size can break.

* Every set of up to ``r - 1`` failed DP groups is masked; the smallest failure sets
  that wipe out are the holder sets of the shard types (:func:`min_wipe_out_set`).
* After one failure the stack number is ``c(1) = 2`` for every layout and every failed
  group (:func:`worst_case_after_one_failure`); with ``m`` micro-batches per shard
  type the worst load is ``ceil(m s / (s - 1))``, ``s`` the size of the layout's
  smallest connected component (:func:`worst_case_load_after_one_failure`).
* After ``k`` failures, the worst case over every failure set of size ``k`` is found
  exactly with CP-SAT for ``N <= 64`` and bounded from below by a seeded local search
  beyond (:func:`worst_case_stack_number`), each with a Hall's-condition certificate
  (:func:`spare_opt.stack_number_certificate`).

References
----------
.. [1] Lee et al., "SPARe: Stacked Parallelism with Adaptive Reordering for
   Fault-Tolerant LLM Pretraining Systems with 100k+ GPUs", ICML 2026,
   arXiv:2603.00357, Sec. 4.
.. [2] P. Hall, "On representatives of subsets", J. London Math. Soc. 10, 1935
   (the deficiency form for b-matchings: ``S* = max_T ceil(|T| / |N(T)|)``).
"""

import time
from dataclasses import dataclass, field

import numpy as np

from .._core import validation as check
from .._core.results import Result
from .._core.errors import SolverError
from ..planning.plan import check_micro_batches, lower_bound
from ..planning.exact import _certified_stack_number
from ..layouts.layout import check_layout

__all__ = [
    "EXACT_WORST_CASE_MAX_GROUPS",
    "WORST_CASE_METHODS",
    "WorstCase",
    "min_wipe_out_set",
    "worst_case_after_one_failure",
    "worst_case_load_after_one_failure",
    "worst_case_stack_number",
    "worst_case_profile",
]

#: Largest ``N`` for which :func:`worst_case_stack_number` uses the exact CP-SAT model by default.
EXACT_WORST_CASE_MAX_GROUPS = 64
#: Search methods of :func:`worst_case_stack_number`.
WORST_CASE_METHODS = ("auto", "cp-sat", "local-search")


# ====================================================================== guarantees
def min_wipe_out_set(layout):
    """One smallest failure set that wipes out: the ``r`` holders of shard type 0.

    Parameters
    ----------
    layout : Layout

    Returns
    -------
    shard_type : int
        The shard type that the set wipes out (0).
    groups : numpy.ndarray of int32, shape (r,)
        Its holders, sorted.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a :class:`~spare_opt.layouts.layout.Layout`.

    Notes
    -----
    A wipe-out means some shard type ``t`` has no live holder, so every wipe-out set
    contains all ``r`` holders of some ``t``; since every shard type has exactly ``r``
    holders (a layout invariant), the smallest wipe-out sets are exactly the holder
    sets, all of size ``r``.  Hence the guaranteed tolerance: every set of up to
    ``r - 1`` failed groups is masked, and no layout can guarantee more.
    """
    indptr, groups = check_layout(layout).holders()
    return 0, np.sort(groups[indptr[0]:indptr[1]]).astype(np.int32)


def worst_case_after_one_failure(layout):
    """The worst-case stack number after one failed group.

    Parameters
    ----------
    layout : Layout

    Returns
    -------
    dict
        ``stack_number`` (``S*``, or ``None`` when one failure wipes out, i.e. ``r = 1``),
        ``group`` (a failed group attaining it: 0), ``status`` (``"masked"`` /
        ``"wipe-out"``) and ``proof`` (one sentence).

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a :class:`~spare_opt.layouts.layout.Layout`.

    Notes
    -----
    For ``r >= 2`` and ``N >= 2`` every single failure gives exactly ``S* = c(1) = 2``.
    Lower bound: ``N`` types on ``N - 1`` live groups.  Upper bound by Hall's condition:
    for a set ``T`` of shard types, count the ``r |T|`` holder slots of ``T``; at most
    ``min(|T|, r)`` of them belong to the failed group, and each live holder has at most
    ``r`` slots, so ``|L(T)| >= |T| - min(|T|, r) / r >= |T| - 1 >= |T| / 2`` for
    ``|T| >= 2`` (and ``|L(T)| >= r - 1 >= 1`` for ``|T| = 1``).  So the maximum over
    groups is the same for every layout, and every group attains it.
    """
    n, r = check_layout(layout).stacks.shape
    if r == 1:
        return {"stack_number": None, "group": 0, "status": "wipe-out",
                "proof": "r = 1: each shard type has one holder, so any failure loses its types"}
    return {"stack_number": 2, "group": 0, "status": "masked",
            "proof": "c(1) = 2 is a lower bound, and Hall's condition |L(T)| >= |T| / 2 holds for every set T "
                     "of shard types after one failure, so S* = 2 for every failed group"}


def worst_case_load_after_one_failure(layout, *, micro_batches=1):
    """The worst-case least load ``L*`` after one failed group, with ``m`` micro-batches per shard type.

    Parameters
    ----------
    layout : Layout
    micro_batches : int, default 1
        ``m >= 1``, micro-batches per shard type (``docs/planner.md``, "Micro-batches").

    Returns
    -------
    dict
        ``micro_batches`` (``m``); ``load`` (the largest ``L*`` over every single failed
        group, in micro-batches; ``None`` when one failure wipes out, i.e. ``r = 1``);
        ``step_cost`` (``load / m``); ``lower_bound`` (``ceil(m N / (N - 1))``, what an
        even share would cost); ``group`` (a failed group attaining ``load``: the
        smallest id in a smallest component); ``component_groups`` (``s``, the number
        of groups of the smallest connected component of the layout); ``components``
        (their number); ``status``; ``proof`` (one sentence).

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a :class:`~spare_opt.layouts.layout.Layout`, ``micro_batches`` not an
        integer.
    ParameterError
        ``m < 1`` or ``N m`` above :data:`~spare_opt.planning.plan.MAX_SPLIT_ENTRIES`.

    Notes
    -----
    Call the *holder graph* the bipartite graph of groups and shard types, ``g -- t``
    when ``g`` holds ``t``; it is ``r``-regular on both sides, so each connected
    component holds as many shard types as groups, and at least ``r`` of each.
    Theorem: for ``r >= 2``, failing group ``g`` gives ``L* = ceil(m s / (s - 1))``,
    ``s`` the number of groups in the component of ``g``.  So the worst case is
    ``ceil(m s_min / (s_min - 1))`` (``s_min`` the smallest component), attained by every
    group of a smallest component, and it is the lower bound ``ceil(m N / (N - 1))``
    exactly when the layout is connected (Sidon, consecutive, random layouts); a block
    layout has ``s = r``.  At ``m = 1`` it is ``2`` for every layout
    (:func:`worst_case_after_one_failure`).

    Proof.  By Hall's theorem for the micro-batch flow, ``L* = max_T ceil(m |T| /
    |H(T)|)`` over non-empty sets ``T`` of shard types, ``H(T)`` their live holders
    (``docs/planner.md``).  Let ``H0(T)`` be all their holders.  The ``r |T|`` holder
    slots of ``T`` lie in ``H0(T)``, whose groups have ``r`` slots each, so
    ``|H0(T)| >= |T|``, with equality only when every slot of ``H0(T)`` holds a type
    of ``T``: then ``T`` and ``H0(T)`` are closed under the graph's edges, a union of
    components.  (i) If ``g`` is not in ``H0(T)``, ``|H(T)| = |H0(T)| >= |T|``: the
    term is at most ``m``.  (ii) If ``g`` is in ``H0(T)`` and ``T`` is not a union of
    components, ``|H(T)| = |H0(T)| - 1 >= |T|``: at most ``m``.  (iii) If ``T`` is a
    union of components of ``u`` groups including that of ``g``, ``|H(T)| = u - 1``
    and the term ``ceil(m u / (u - 1))`` is largest for the smallest such union, the
    component of ``g`` itself: ``ceil(m s / (s - 1)) >= m + 1`` (``s >= r >= 2``),
    above every term of (i) and (ii).  The maximum over ``T`` is therefore
    ``ceil(m s / (s - 1))``.  For ``r = 1`` the failed group's shard type has no
    other holder: a wipe-out.

    References
    ----------
    P. Hall, "On representatives of subsets", J. London Math. Soc. 10, 1935; Lee et al.,
    ICML 2026, Sec. 4 (``c(1) = 2``); ``docs/beyond-the-paper.md``, section 1.

    Examples
    --------
    >>> from spare_opt import block, sidon
    >>> worst = worst_case_load_after_one_failure(sidon(600, 8), micro_batches=8)
    >>> worst["load"], worst["step_cost"], worst["component_groups"]
    (9, 1.125, 600)
    >>> worst_case_load_after_one_failure(block(600, 8), micro_batches=8)["load"]  # 8 types on 7 groups
    10
    """
    n, r = check_layout(layout).stacks.shape
    m = check_micro_batches(micro_batches, n)
    sizes, labels = _components(layout.stacks)
    smallest = int(np.argmin(sizes))
    s = int(sizes[smallest])
    group = int(np.flatnonzero(labels == smallest)[0])
    base = {"micro_batches": m, "lower_bound": lower_bound(n, 1, m) if n > 1 else None,
            "group": group, "component_groups": s, "components": int(sizes.size)}
    if r == 1:
        return dict(base, load=None, step_cost=None, status="wipe-out",
                    proof="r = 1: each shard type has one holder, so any failure loses its types")
    load = -(-m * s // (s - 1))
    return dict(base, load=load, step_cost=load / m, status="masked",
                proof=f"Hall's formula L* = max_T ceil(m|T| / |H(T)|) is at most m unless T is a union of "
                      f"components of the holder graph; the smallest one holding the failed group has "
                      f"s = {s} groups, so L* = ceil(m s / (s - 1)) = {load}")


def _components(stacks):
    """Connected components of the holder graph, by group: ``(sizes, labels)``.

    Groups ``g`` and ``h`` are in one component when a chain of shared shard types links
    them; linking every group to the layer-0 holder of each type it holds suffices (two
    holders of ``t`` are both linked to that one).
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n, r = stacks.shape
    owner = np.empty(n, dtype=np.int64)
    owner[stacks[:, 0]] = np.arange(n)
    rows = np.repeat(np.arange(n), r)
    cols = owner[stacks.ravel()]
    graph = coo_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(n, n))
    count, labels = connected_components(graph, directed=False)
    return np.bincount(labels, minlength=count), labels


@dataclass(eq=False)
class WorstCase(Result):
    """Worst-case stack number over every failure set of one size ``k``.

    Attributes
    ----------
    failed_count : int
        ``k``.
    stack_number : int or None
        Largest ``S*`` over the *masked* failure sets of size ``k`` (``None`` when every
        set of size ``k`` wipes out).  Exact when ``exact``; a lower bound otherwise.
    lower_bound : int or None
        ``c(k)``.
    upper_bound : int or None
        Proven upper bound on the worst case (equal to ``stack_number`` when exact; from
        the CP-SAT bound or ``r`` otherwise).
    failure_set : numpy.ndarray of int32
        A failure set of size ``k`` attaining ``stack_number``.
    hall_types, hall_holders : numpy.ndarray of int32
        Certificate: shard types ``T`` and their live holders ``L(T)`` after
        ``failure_set`` with ``|T| > (stack_number - 1) |L(T)|``.
    exact : bool
        Whether ``stack_number`` is proved to be the worst case.
    method : str
        ``"cp-sat"``, ``"local-search"`` or ``"trivial"``.
    status : str
        ``"optimal"``, ``"feasible"`` (CP-SAT time limit; lower bound), ``"lower-bound"``
        (local search), ``"no-masked-set"``.
    wipe_out_reachable : bool
        Whether some failure set of size ``k`` wipes out (``k >= r``); such sets are
        excluded from the worst case above.
    seconds : float
        Wall-clock time of the search (not compared by ``==``).
    """

    failed_count: int
    stack_number: int | None
    lower_bound: int | None
    upper_bound: int | None
    failure_set: np.ndarray
    hall_types: np.ndarray
    hall_holders: np.ndarray
    exact: bool
    method: str
    status: str
    wipe_out_reachable: bool
    seconds: float = field(default=0.0, compare=False)

    def to_dict(self):
        """A JSON-ready dict of the attributes."""
        return {
            "failed_count": self.failed_count,
            "stack_number": self.stack_number,
            "lower_bound": self.lower_bound,
            "upper_bound": self.upper_bound,
            "failure_set": [int(g) for g in self.failure_set],
            "hall_types": [int(t) for t in self.hall_types],
            "hall_holders": [int(g) for g in self.hall_holders],
            "exact": self.exact,
            "method": self.method,
            "status": self.status,
            "wipe_out_reachable": self.wipe_out_reachable,
            "seconds": round(self.seconds, 4),
        }


def worst_case_stack_number(layout, failed_count, *, method="auto", time_limit=10.0, seed=0,
                            iterations=300, search_workers=8):
    """Worst-case ``S*`` over every masked failure set of size ``k``.

    The adversary picks ``k`` failed groups to maximise the least stack number.

    Parameters
    ----------
    layout : Layout
    failed_count : int
        ``k``, ``0 <= k <= N``.
    method : {"auto", "cp-sat", "local-search"}, default "auto"
        ``"auto"`` is ``"cp-sat"`` for ``N <= 64`` (:data:`EXACT_WORST_CASE_MAX_GROUPS`)
        and ``"local-search"`` beyond.
    time_limit : float, default 10.0
        Time budget in seconds.  CP-SAT: when hit, the result is a lower bound
        (``status = "feasible"``, ``upper_bound = r``).  Local search: it stops after
        ``iterations`` moves or this budget, whichever comes first (so results at very
        large ``N`` can depend on machine speed).
    seed : int, default 0
        Seed of the CP-SAT search and of the local search.
    iterations : int, default 300
        Local-search moves (each costs one maximum flow with binary search).
    search_workers : int, default 8
        Size of the CP-SAT portfolio (``num_workers`` with ``interleave_search``: the
        subsolvers take turns, so the search is deterministic for a given ``seed``).  A
        solver setting, not parallelism: the portfolio proves these infeasibilities
        orders of magnitude faster than one search even on one core.

    Returns
    -------
    WorstCase

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout; ``k``, ``seed``, ``iterations`` or
        ``search_workers`` is not an integer; ``time_limit`` is not a number.
    ParameterError
        ``k`` out of ``[0, N]``, unknown ``method``, a ``time_limit`` that is not
        positive, ``iterations`` or ``search_workers`` below 1, a negative ``seed``
        (seeds beyond 32 bits are folded for CP-SAT).
    SolverError
        CP-SAT rejected the model (``MODEL_INVALID``: a bug, not bad input), or found
        no masked failure set of size ``k`` within the time limit.

    Notes
    -----
    By Hall's theorem ``S*(F) >= s`` iff some set ``T`` of shard types has
    ``|T| >= (s - 1) |L(T)| + 1`` with ``L(T)`` the live holders of ``T``.  The exact
    method decides this level by level with CP-SAT, from ``S*`` of some masked set of
    size ``k`` upwards: Booleans ``fail[g]``, ``in_T[t]`` and ``live[g]`` (forced to 1 when
    ``g`` is live and holds a type of ``T``), the masking constraint (each type keeps a
    live holder), the violation ``|T| - (s-1) sum live >= 1`` and redundant counting cuts
    (``|T| <= |L(T)| + |F|``).  Only failed holders of ``T`` are modelled (``|F| <= k``), which
    removes the symmetry of irrelevant failures; a witness is completed to a masked set
    of size ``k`` and re-evaluated exactly with :func:`spare_opt.stack_number_certificate`, which
    supplies the certificate.  The first infeasible level proves the worst case.  For
    circulant layouts, rotation symmetry lets ``T`` contain shard type 0.

    The local search starts from random masked sets and repeatedly fails a live holder of
    the current Hall certificate ``T`` (which raises ``|T| / |L(T)|``) while bringing back a
    failed group outside ``L(T)``; it keeps the best set found (a lower bound).
    """
    n, r = check_layout(layout).stacks.shape
    k = check.integer("failed count k", failed_count, minimum=0, maximum=n)
    method = check.choice("method", method, WORST_CASE_METHODS)
    time_limit = check.seconds("time_limit", time_limit)
    seed = check.seed(seed)
    search_workers = check.count("search_workers", search_workers, maximum=1024)
    iterations = check.count("iterations", iterations, maximum=10**12)
    if method == "auto":
        method = "cp-sat" if n <= EXACT_WORST_CASE_MAX_GROUPS else "local-search"
    start = time.perf_counter()
    reachable = k >= r
    c = lower_bound(n, k)
    empty = np.zeros(0, dtype=np.int32)
    if k == n:  # nothing left alive: every set wipes out
        return WorstCase(k, None, None, None, empty, empty, empty, True, "trivial", "no-masked-set",
                         True, time.perf_counter() - start)
    if k == 0:
        s, types, holders = _certified_stack_number(layout.stacks, np.ones(n, dtype=bool))
        return WorstCase(0, s, c, s, empty, types, holders, True, "trivial", "optimal", False,
                         time.perf_counter() - start)
    if method == "cp-sat":
        result = _worst_case_cp_sat(layout, k, time_limit, seed, search_workers)
    else:
        result = _worst_case_local_search(layout, k, seed, iterations, time_limit)
    if k == 1 and r >= 2 and result.stack_number == c and not result.exact:
        # One failure never needs more than c(1) = 2 layers (worst_case_after_one_failure),
        # so the local search's value is the exact worst case here.
        result.exact, result.status, result.upper_bound = True, "optimal", c
    result.seconds = time.perf_counter() - start
    result.wipe_out_reachable = reachable
    return result


def worst_case_profile(layout, *, max_failed=None, **kwargs):
    """:func:`worst_case_stack_number` for ``k = 1 .. max_failed`` (default ``r - 1``).

    Parameters
    ----------
    layout : Layout
    max_failed : int, optional
        Largest ``k``; default ``r - 1``, the sizes guaranteed to be masked.
    **kwargs
        Passed to :func:`worst_case_stack_number`.

    Returns
    -------
    list of WorstCase
        One per ``k = 1 .. max_failed``, in order.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a :class:`~spare_opt.layouts.layout.Layout`, or ``max_failed`` is not
        an integer.
    ParameterError
        ``max_failed`` is not in ``[0, N]``, or any error of
        :func:`worst_case_stack_number`.
    """
    n, r = check_layout(layout).stacks.shape
    max_failed = r - 1 if max_failed is None else check.integer("max_failed", max_failed, minimum=0, maximum=n)
    return [worst_case_stack_number(layout, k, **kwargs) for k in range(1, max_failed + 1)]


def _worst_case_cp_sat(layout, k, time_limit, seed, workers):
    stacks = layout.stacks
    n, r = stacks.shape
    c = lower_bound(n, k)
    empty = np.zeros(0, dtype=np.int32)
    # The time limit is search time: the one-off import of the solver (loaded on first
    # use) is not charged to it, as in spare_opt.sidon.
    from ortools.sat.python import cp_model  # noqa: F401

    deadline = time.perf_counter() + time_limit
    rng = np.random.default_rng(np.random.SeedSequence(seed))

    # Start from any masked set of size k (its S* >= c(k)).
    alive = _extend_masked(stacks, np.zeros(0, dtype=np.int64), k, rng)
    if alive is None:
        status, failed = _hall_violation_search(layout, k, None, True, deadline, seed, workers)
        if status == "infeasible":
            return WorstCase(k, None, c, None, empty, empty, empty, True, "cp-sat", "no-masked-set", True)
        if status == "unknown":
            raise SolverError(f"CP-SAT found no masked failure set of size {k} within {time_limit} s; "
                              "raise the time limit")
        alive = _alive_from(n, failed)
    best = _evaluate_failure_set(stacks, alive)
    exact = True
    level = best[0] + 1
    while level <= r:
        status, failed = _hall_violation_search(layout, k, level, False, deadline, seed, workers)
        if status == "found":
            alive = _extend_masked(stacks, failed, k, rng)
            if alive is None:
                # The relaxed witness cannot be completed to a masked set of size k here:
                # decide the level on the exact-count model instead.
                status, failed = _hall_violation_search(layout, k, level, True, deadline, seed, workers)
                alive = _alive_from(n, failed) if status == "found" else None
        if status == "infeasible":
            break
        if status == "unknown":
            exact = False
            break
        best = _evaluate_failure_set(stacks, alive)
        if best[0] < level:
            raise SolverError("internal error: the CP-SAT witness does not reach its Hall level")
        level = best[0] + 1
    s, failure_set, types, holders = best
    return WorstCase(k, s, c, s if exact else r, failure_set, types, holders, exact, "cp-sat",
                     "optimal" if exact else "feasible", True)


def _alive_from(n, failed):
    alive = np.ones(n, dtype=bool)
    alive[np.asarray(failed, dtype=np.int64)] = False
    return alive


def _evaluate_failure_set(stacks, alive):
    s, types, holders = _certified_stack_number(stacks, alive)
    if s is None:
        raise SolverError("internal error: a failure set expected to be masked wipes out")
    return s, np.flatnonzero(~alive).astype(np.int32), types, holders


def _extend_masked(stacks, failed, k, rng, attempts=8):
    """Add failures to ``failed`` until there are ``k``, keeping every shard type covered.

    One pass over a random order is maximal (a rejected group stays rejected as more
    groups fail), so a few seeded orders are tried.  ``None`` when none reaches ``k``.
    """
    n, r = stacks.shape
    failed = np.asarray(failed, dtype=np.int64)
    for _ in range(attempts):
        failed_holders = np.zeros(n, dtype=np.int64)
        alive = np.ones(n, dtype=bool)
        alive[failed] = False
        np.add.at(failed_holders, stacks[failed].ravel(), 1)
        if failed_holders.max(initial=0) >= r:
            return None
        count = failed.size
        for g in rng.permutation(np.flatnonzero(alive)):
            if count >= k:
                break
            if failed_holders[stacks[g]].max() <= r - 2:
                alive[g] = False
                failed_holders[stacks[g]] += 1
                count += 1
        if count == k:
            return alive
    return None


def _hall_violation_search(layout, k, level, exact_count, deadline, seed, workers):
    """CP-SAT: is there a masked failure set and shard types ``T`` with ``|T| >= (level-1)|L(T)| + 1``?

    Returns ``("found", failed_groups)``, ``("infeasible", None)`` or ``("unknown", None)``.
    With ``exact_count`` false only failed holders of ``T`` are modelled (``|F| <= k``):
    failures elsewhere do not change ``L(T)``, so infeasibility there is a proof for
    every masked set of size ``k``; a witness still has to be completed to size ``k``.
    ``level = None`` asks only for a masked set of size ``k`` (``exact_count`` true).
    """
    from ortools.sat.python import cp_model

    remaining = deadline - time.perf_counter()
    if remaining <= 0:
        return "unknown", None
    stacks = layout.stacks
    n, r = stacks.shape
    indptr, holder_groups = layout.holders()
    holders_of = holder_groups.reshape(n, r)

    model = cp_model.CpModel()
    fail = [model.new_bool_var(f"fail_{g}") for g in range(n)]
    in_t = [model.new_bool_var(f"in_T_{t}") for t in range(n)]
    live = [model.new_bool_var(f"live_holder_{g}") for g in range(n)]
    if exact_count:
        model.add(sum(fail) == k)
    else:
        model.add(sum(fail) <= k)
    for t in range(n):
        # Masked: every shard type keeps a live holder.
        model.add(sum(fail[int(h)] for h in holders_of[t]) <= r - 1)
    if level is not None:
        for t in range(n):
            for h in holders_of[t]:
                # A holder of a type in T is failed or counted among the live holders L(T).
                model.add_bool_or([in_t[t].Not(), fail[int(h)], live[int(h)]])
        for g in range(n):
            model.add_implication(live[g], fail[g].Not())
            touches_t = [in_t[int(t)] for t in stacks[g]]
            model.add_bool_or(touches_t).only_enforce_if(live[g])
            if not exact_count:
                model.add_bool_or(touches_t).only_enforce_if(fail[g])
        # Hall violation at level - 1 layers.
        model.add(sum(in_t) - (level - 1) * sum(live) >= 1)
        # Redundant counting cuts: T's r|T| holder slots fit in L(T) and F, so
        # |T| <= |L(T)| + |F|; with the violation, (level - 2)|L(T)| <= k - 1.
        model.add(sum(in_t) <= sum(live) + sum(fail))
        if level >= 3:
            model.add(sum(live) <= (k - 1) // (level - 2))
            model.add(sum(in_t) <= k + (k - 1) // (level - 2))
        # Symmetry breaking: rotations map a circulant layout onto itself, so T may be
        # assumed to contain shard type 0.
        if layout.offsets is not None:
            model.add(in_t[0] == 1)

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(remaining)
    # A portfolio of workers proves these infeasibilities orders of magnitude faster
    # than a single search; interleaving keeps the result deterministic.
    solver.parameters.num_workers = int(workers)
    solver.parameters.interleave_search = True
    # CP-SAT takes a 32-bit seed; larger seeds are folded into its range.
    solver.parameters.random_seed = int(seed) % (2**31 - 1)
    status = solver.solve(model)
    if status == cp_model.MODEL_INVALID:
        raise SolverError(f"CP-SAT rejected the Hall-violation model: {model.validate()}")
    if status == cp_model.INFEASIBLE:
        return "infeasible", None
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return "found", np.array([g for g in range(n) if solver.boolean_value(fail[g])], dtype=np.int64)
    return "unknown", None


def _worst_case_local_search(layout, k, seed, iterations, time_limit):
    stacks = layout.stacks
    n, r = stacks.shape
    indptr, holder_groups = layout.holders()
    holders_of = holder_groups.reshape(n, r)
    c = lower_bound(n, k)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    empty = np.zeros(0, dtype=np.int32)

    def evaluate(alive):
        s, types, holders = _certified_stack_number(stacks, alive)
        if s is None:
            return None
        # Secondary key: how far the certificate is from the next level.
        return (s, types.size / max(1, holders.size)), types, holders

    def start_set():
        # Fail up to r - 1 holders of a random type, then its neighbourhood, then random
        # groups: concentrated failures are the ones that force extra layers.
        alive = np.ones(n, dtype=bool)
        t = rng.integers(n)
        picks = list(rng.permutation(holders_of[t])[:min(k, r - 1)])
        for g in picks:
            alive[g] = False
        while (~alive).sum() < k:
            candidates = np.unique(holders_of[stacks[~alive].ravel()].ravel()) if (~alive).any() else np.arange(n)
            candidates = candidates[alive[candidates]]
            if candidates.size == 0 or rng.random() < 0.2:
                candidates = np.flatnonzero(alive)
            g = rng.choice(candidates)
            alive[g] = False
            if _has_lost_type(stacks, alive):
                alive[g] = True
                alive[rng.choice(np.flatnonzero(alive))] = False
                if _has_lost_type(stacks, alive):
                    return None
        return alive

    deadline = time.perf_counter() + time_limit
    best = None
    restarts = max(1, iterations // 50)
    per_restart = max(1, iterations // restarts)
    for _ in range(restarts):
        if best is not None and time.perf_counter() > deadline:
            break
        alive = None
        for _attempt in range(20):
            alive = start_set()
            if alive is not None:
                break
        if alive is None:
            continue
        current = evaluate(alive)
        if current is None:
            continue
        for _step in range(per_restart):
            key, types, holders = current
            if best is None or key > best[0]:
                best = (key, np.flatnonzero(~alive).astype(np.int32), types, holders)
            if time.perf_counter() > deadline:
                break
            live_holders = holders[alive[holders]]
            failed = np.flatnonzero(~alive)
            outside = np.setdiff1d(failed, holders_of[types].ravel()) if types.size < n else failed
            if live_holders.size == 0 or failed.size == 0:
                break
            add = rng.choice(live_holders) if rng.random() < 0.8 else rng.choice(np.flatnonzero(alive))
            drop = rng.choice(outside) if outside.size and rng.random() < 0.8 else rng.choice(failed)
            trial = alive.copy()
            trial[add] = False
            trial[drop] = True
            if (~trial).sum() != k:
                continue
            candidate = evaluate(trial)
            if candidate is not None and candidate[0] >= key:
                alive, current = trial, candidate
    if best is None:
        return WorstCase(k, None, c, None, empty, empty, empty, False, "local-search", "no-masked-set", True)
    (s, _ratio), failure_set, types, holders = best
    return WorstCase(k, s, c, r, failure_set, types, holders, False, "local-search", "lower-bound", True)


def _has_lost_type(stacks, alive):
    covered = np.zeros(stacks.shape[0], dtype=bool)
    covered[stacks[alive].ravel()] = True
    return not covered.all()



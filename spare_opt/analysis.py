"""Offline analysis of a stack layout: worst-case guarantees, Monte-Carlo endurance and overhead.

Three questions an engineer asks before a job starts, answered for a given
:class:`~spare_opt.Layout`:

* *What is guaranteed?*  Every set of up to ``r - 1`` failed DP groups is masked; the
  smallest failure sets that wipe out are the holder sets of the shard types
  (:func:`min_wipeout_set`).  After one failure the stack number is ``c(1) = 2``
  (:func:`worst_case_after_one_failure`); after ``k`` failures the worst case over every
  failure set of size ``k`` is found exactly with CP-SAT for ``N <= 64`` and bounded
  from below by a seeded local search beyond (:func:`worst_case_stack_number`), each
  with a Hall's-condition certificate.
* *What happens on average?*  :func:`monte_carlo` runs uniformly random failure orders
  through the online controller (:func:`spare_opt.stack_number_trajectory`) until the
  first wipe-out and estimates ``mu`` (failures masked) and ``Sbar`` (mean stack number)
  with 95% confidence intervals, beside the closed forms of :mod:`spare_opt.theory`.
* *Which ``r`` and which layout method?*  :func:`sweep` repeats the Monte-Carlo over a
  range of ``r`` and methods and adds the normalised time-to-train ``J``.

References
----------
.. [1] Lee et al., "SPARe: Stacked Parallelism with Adaptive Reordering for
   Fault-Tolerant LLM Pretraining Systems with 100k+ GPUs", ICML 2026,
   arXiv:2603.00357, Sec. 4-5.
.. [2] P. Hall, "On representatives of subsets", J. London Math. Soc. 10, 1935
   (the deficiency form for b-matchings: ``S* = max_T ceil(|T| / |N(T)|)``).
"""

import math
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

import numpy as np

from . import theory
from .errors import ParameterError, SolverError, SpareError
from .plan import lower_bound, normalise_groups
from ._stats import finite_or_none, mean_ci95
from .planner import _certified_stack_number as _least_stack_number

__all__ = [
    "EXACT_WORST_CASE_MAX_GROUPS",
    "MAX_TRIALS",
    "MonteCarloResult",
    "WorstCase",
    "SweepResult",
    "stack_number_certificate",
    "min_wipeout_set",
    "worst_case_after_one_failure",
    "worst_case_stack_number",
    "worst_case_profile",
    "monte_carlo",
    "sweep",
]

#: Largest ``N`` for which :func:`worst_case_stack_number` uses the exact CP-SAT model by default.
EXACT_WORST_CASE_MAX_GROUPS = 64
#: Most Monte-Carlo trials :func:`monte_carlo` accepts (the per-trial results stay in memory).
MAX_TRIALS = 10_000_000


# ====================================================================== S* with a certificate
def stack_number_certificate(layout, failed):
    """The least stack number ``S*`` after a failure set, with a Hall's-condition certificate.

    Parameters
    ----------
    layout : Layout
        The stack layout (``N`` groups, redundancy ``r``).
    failed : iterable of int
        Failed group ids in ``[0, N)``, no repeats.

    Returns
    -------
    stack_number : int or None
        ``S*``: the least number of layers such that every shard type can be given to one
        live holder with no live group given more than ``S*`` types; ``None`` on a
        wipe-out (some shard type has no live holder).
    hall_types : numpy.ndarray of int32
        On a masked set, a set ``T`` of shard types with ``|T| > (S* - 1) * |L(T)|``
        where ``L(T)`` are the live holders of ``T``: the proof that ``S* - 1`` layers do
        not suffice (when ``S* = 1``, all shard types and all live groups).  On a
        wipe-out, the lost shard types.
    hall_holders : numpy.ndarray of int32
        ``L(T)``, the live holders of ``hall_types`` (empty on a wipe-out).

    Raises
    ------
    FailureSetError
        A group id is out of range, repeated or not an integer.
    ParameterError
        ``layout`` is not a :class:`~spare_opt.layout.Layout`.

    Notes
    -----
    A b-matching problem solved as a maximum flow (source -> shard type, capacity 1;
    shard type -> live holder, capacity 1; group -> sink, capacity ``S``) with
    ``scipy.sparse.csgraph.maximum_flow`` (Dinic), and binary search on ``S`` between
    ``c(k)`` and ``r``: the free search of :func:`spare_opt.plan_reorder`, same network.
    The certificate is the source side of a minimum cut at ``S* - 1``: by max-flow/min-cut, ``|T| > (S* - 1) |L(T)|`` (Hall's theorem in its
    deficiency form).  This is the reference used by the analysis tools; the online
    controller and the exact planner are tested against the same definition.
    """
    stacks = _check_layout(layout).stacks
    n, r = stacks.shape
    failed = normalise_groups(failed, n)
    alive = np.ones(n, dtype=bool)
    alive[failed] = False
    return _least_stack_number(stacks, alive)


# ====================================================================== guarantees
def min_wipeout_set(layout):
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
    ParameterError
        ``layout`` is not a :class:`~spare_opt.layout.Layout`.

    Notes
    -----
    A wipe-out means some shard type ``t`` has no live holder, so every wipe-out set
    contains all ``r`` holders of some ``t``; since every shard type has exactly ``r``
    holders (a layout invariant), the smallest wipe-out sets are exactly the holder
    sets, all of size ``r``.  Hence the guaranteed tolerance: every set of up to
    ``r - 1`` failed groups is masked, and no layout can guarantee more.
    """
    indptr, groups = _check_layout(layout).holders()
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
    ParameterError
        ``layout`` is not a :class:`~spare_opt.layout.Layout`.

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
    n, r = _check_layout(layout).stacks.shape
    if r == 1:
        return {"stack_number": None, "group": 0, "status": "wipe-out",
                "proof": "r = 1: each shard type has one holder, so any failure loses its types"}
    return {"stack_number": 2, "group": 0, "status": "masked",
            "proof": "c(1) = 2 is a lower bound, and Hall's condition |L(T)| >= |T| / 2 holds for every set T "
                     "of shard types after one failure, so S* = 2 for every failed group"}


@dataclass
class WorstCase:
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
    wipeout_reachable : bool
        Whether some failure set of size ``k`` wipes out (``k >= r``); such sets are
        excluded from the worst case above.
    seconds : float
        Wall-clock time of the search.
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
    wipeout_reachable: bool
    seconds: float = 0.0

    def to_json(self):
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
            "wipeout_reachable": self.wipeout_reachable,
            "seconds": round(self.seconds, 4),
        }


def worst_case_stack_number(layout, failed_count, method="auto", time_limit=10.0, seed=0,
                            iterations=300, workers=8):
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
    workers : int, default 8
        CP-SAT portfolio workers (interleaved: deterministic for a given ``seed``).

    Returns
    -------
    WorstCase

    Raises
    ------
    ParameterError
        ``layout`` is not a Layout, ``k`` out of range, unknown ``method``, a ``time_limit``
        that is not a positive number, ``iterations`` or ``workers`` not a positive integer,
        ``seed`` not a non-negative integer (seeds beyond 32 bits are folded for CP-SAT).

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
    of size ``k`` and re-evaluated exactly with :func:`stack_number_certificate`, which
    supplies the certificate.  The first infeasible level proves the worst case.  For
    circulant layouts, rotation symmetry lets ``T`` contain shard type 0.

    The local search starts from random masked sets and repeatedly fails a live holder of
    the current Hall certificate ``T`` (which raises ``|T| / |L(T)|``) while bringing back a
    failed group outside ``L(T)``; it keeps the best set found (a lower bound).
    """
    n, r = _check_layout(layout).stacks.shape
    if isinstance(failed_count, bool) or not isinstance(failed_count, (int, np.integer)):
        raise ParameterError(f"failed count k must be an integer, got {failed_count!r}")
    k = int(failed_count)
    if not 0 <= k <= n:
        raise ParameterError(f"failed count k must be in [0, N] = [0, {n}], got {k}")
    if method not in ("auto", "cp-sat", "local-search"):
        raise ParameterError(f"method must be 'auto', 'cp-sat' or 'local-search', got {method!r}")
    time_limit = _check_seconds("time_limit", time_limit)
    seed = _check_seed(seed)
    workers = _count("workers", workers)
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise ParameterError(f"iterations must be a positive integer, got {iterations!r}")
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
        s, types, holders = _least_stack_number(layout.stacks, np.ones(n, dtype=bool))
        return WorstCase(0, s, c, s, empty, types, holders, True, "trivial", "optimal", False,
                         time.perf_counter() - start)
    if method == "cp-sat":
        result = _worst_case_cp_sat(layout, k, time_limit, seed, workers)
    else:
        result = _worst_case_local_search(layout, k, seed, iterations, time_limit)
    if k == 1 and r >= 2 and result.stack_number == c and not result.exact:
        # One failure never needs more than c(1) = 2 layers (worst_case_after_one_failure),
        # so the local search's value is the exact worst case here.
        result.exact, result.status, result.upper_bound = True, "optimal", c
    result.seconds = time.perf_counter() - start
    result.wipeout_reachable = reachable
    return result


def worst_case_profile(layout, max_failed=None, **kwargs):
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
    ParameterError
        ``layout`` is not a :class:`~spare_opt.layout.Layout`, ``max_failed`` is not an
        integer in ``[0, N]``, or any error of :func:`worst_case_stack_number`.
    """
    n, r = _check_layout(layout).stacks.shape
    if max_failed is None:
        max_failed = r - 1
    if isinstance(max_failed, bool) or not isinstance(max_failed, (int, np.integer)) or not 0 <= max_failed <= n:
        raise ParameterError(f"max_failed must be an integer in [0, N] = [0, {n}], got {max_failed!r}")
    return [worst_case_stack_number(layout, k, **kwargs) for k in range(1, int(max_failed) + 1)]


def _worst_case_cp_sat(layout, k, time_limit, seed, workers):
    stacks = layout.stacks
    n, r = stacks.shape
    c = lower_bound(n, k)
    empty = np.zeros(0, dtype=np.int32)
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
    s, types, holders = _least_stack_number(stacks, alive)
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
        s, types, holders = _least_stack_number(stacks, alive)
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


# ====================================================================== Monte-Carlo
@dataclass
class MonteCarloResult:
    """Monte-Carlo endurance and overhead of a layout under uniformly random failures.

    Attributes
    ----------
    groups, redundancy : int
        ``N`` and ``r``.
    method : str
        The layout's method.
    trials : int
        Number of independent failure orders.
    seed : int
        Root seed: trial ``i`` uses ``numpy.random.SeedSequence(seed, spawn_key=(i,))``.
    workers : int
        Processes used (results do not depend on it).
    masked : numpy.ndarray of int64, shape (trials,)
        Failures masked before the first wipe-out, per trial.
    sbar_per_trial : numpy.ndarray of float64, shape (trials,)
        Mean stack number over ``k = 0 .. masked`` (``S = 1`` at ``k = 0``), per trial.
    mu, sbar : float
        Means over trials.
    mu_ci95, sbar_ci95 : tuple of float
        95% confidence intervals (Student t); ``(nan, nan)`` for one trial.
    closed_form_mu, closed_form_sbar : float
        :func:`spare_opt.theory.mu` and :func:`spare_opt.theory.sbar_lower_bound`.
    stack_mean_by_k : numpy.ndarray of float64
        Mean ``S*`` after ``k`` failures over the trials still masked at ``k``
        (``nan`` where none is).
    survivors_by_k : numpy.ndarray of int64
        Trials still masked after ``k`` failures.
    seconds : float
        Wall-clock time.
    """

    groups: int
    redundancy: int
    method: str
    trials: int
    seed: int
    workers: int
    masked: np.ndarray
    sbar_per_trial: np.ndarray
    mu: float
    mu_ci95: tuple
    sbar: float
    sbar_ci95: tuple
    closed_form_mu: float
    closed_form_sbar: float
    stack_mean_by_k: np.ndarray = field(repr=False)
    survivors_by_k: np.ndarray = field(repr=False)
    seconds: float = 0.0

    @property
    def mu_relative_error(self):
        """float: ``(closed form - Monte-Carlo) / Monte-Carlo`` for ``mu``."""
        return _relative(self.closed_form_mu, self.mu)

    @property
    def sbar_relative_error(self):
        """float: ``(closed form - Monte-Carlo) / Monte-Carlo`` for ``Sbar``."""
        return _relative(self.closed_form_sbar, self.sbar)

    def to_json(self, per_trial=False):
        """JSON-ready nested dict: ``monte_carlo`` and ``closed_form`` objects.

        Parameters
        ----------
        per_trial : bool, default False
            Include the per-trial arrays.
        """
        monte = {
            "trials": self.trials,
            "seed": self.seed,
            "workers": self.workers,
            "mu": finite_or_none(self.mu),
            "mu_ci95": [finite_or_none(v) for v in self.mu_ci95],
            "sbar": finite_or_none(self.sbar),
            "sbar_ci95": [finite_or_none(v) for v in self.sbar_ci95],
            "seconds": round(self.seconds, 4),
        }
        if per_trial:
            monte["masked"] = [int(v) for v in self.masked]
            monte["sbar_per_trial"] = [float(v) for v in self.sbar_per_trial]
        closed = {
            "mu": self.closed_form_mu,
            "sbar": self.closed_form_sbar,
            "mu_relative_error": finite_or_none(self.mu_relative_error),
            "sbar_relative_error": finite_or_none(self.sbar_relative_error),
        }
        return {"monte_carlo": monte, "closed_form": closed}


def monte_carlo(layout, trials=200, seed=0, workers=1, progress=None, chunk_size=None):
    """Estimate ``mu`` and ``Sbar`` by running random failure orders through the controller.

    Each trial draws a uniformly random order of the ``N`` groups (failures without
    replacement) and feeds it to the online controller until the first wipe-out
    (:func:`spare_opt.controller.stack_number_trajectories`, one compiled call per chunk
    of trials).  ``mu`` is the number of failures masked before it; ``Sbar`` is the
    mean stack number over ``k = 0 .. mu`` failures (``S = 1`` at ``k = 0``), i.e. the
    time-weighted mean when failures arrive at a constant rate.

    Parameters
    ----------
    layout : Layout
    trials : int, default 200
        Number of failure orders, ``1 <= trials <= MAX_TRIALS`` (ten million).
    seed : int, default 0
        Root seed (``>= 0``).  Trial ``i`` draws its order from
        ``SeedSequence(seed, spawn_key=(i,))``, so results are identical for any
        ``workers`` and ``chunk_size``.
    workers : int, default 1
        Processes (``concurrent.futures.ProcessPoolExecutor``); 1 runs in this process.
    progress : callable, optional
        Called with the number of trials just finished (for a progress bar).
    chunk_size : int, optional
        Trials per task; default splits the work into about 8 chunks per worker.

    Returns
    -------
    MonteCarloResult

    Raises
    ------
    ParameterError
        ``layout`` is not a Layout, or ``trials``, ``seed``, ``workers`` or
        ``chunk_size`` out of range.

    Notes
    -----
    The 95% intervals are ``mean +- t(0.975, n-1) s / sqrt(n)`` (``scipy.stats.t``);
    trials are independent, so the central limit theorem applies to both means.
    """
    n, r = _check_layout(layout).stacks.shape
    # The per-trial results are kept in memory (16 bytes a trial): refuse absurd counts
    # before allocating anything rather than exhausting memory.
    trials = _count("trials", trials, MAX_TRIALS)
    workers = _count("workers", workers)
    seed = _check_seed(seed)
    if chunk_size is None:
        # About 8 chunks per worker, each at most ~4 million order entries.
        chunk_size = max(1, min(250, 4_000_000 // n, math.ceil(trials / (8 * workers))))
    chunk_size = _count("chunk_size", chunk_size)
    bounds = [(lo, min(trials, lo + chunk_size)) for lo in range(0, trials, chunk_size)]

    started = time.perf_counter()
    parts = [None] * len(bounds)
    if workers == 1 or len(bounds) == 1:
        for index, (lo, hi) in enumerate(bounds):
            parts[index] = _run_chunk(layout, seed, lo, hi)
            if progress is not None:
                progress(hi - lo)
    else:
        # Compile the controller's kernels before forking so that workers inherit them.
        _run_chunk(layout, seed, 0, 1)
        with ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
            futures = {pool.submit(_run_chunk, layout, seed, lo, hi): index for index, (lo, hi) in enumerate(bounds)}
            for future in as_completed(futures):
                index = futures[future]
                parts[index] = future.result()
                if progress is not None:
                    lo, hi = bounds[index]
                    progress(hi - lo)
    masked = np.concatenate([p[0] for p in parts])
    sbar_per_trial = np.concatenate([p[1] for p in parts])
    stack_sum = np.sum([p[2] for p in parts], axis=0)
    survivors = np.sum([p[3] for p in parts], axis=0)
    last = int(np.flatnonzero(survivors)[-1]) + 1 if survivors.any() else 1
    with np.errstate(invalid="ignore", divide="ignore"):
        stack_mean = stack_sum[:last] / survivors[:last]
    mu_mean, mu_ci = mean_ci95(masked.astype(np.float64))
    sbar_mean, sbar_ci = mean_ci95(sbar_per_trial)
    return MonteCarloResult(
        groups=n, redundancy=r, method=layout.method, trials=trials, seed=seed, workers=workers,
        masked=masked, sbar_per_trial=sbar_per_trial,
        mu=mu_mean, mu_ci95=mu_ci, sbar=sbar_mean, sbar_ci95=sbar_ci,
        closed_form_mu=theory.mu(n, r), closed_form_sbar=theory.sbar_lower_bound(n, r),
        stack_mean_by_k=stack_mean, survivors_by_k=survivors[:last].astype(np.int64),
        seconds=time.perf_counter() - started,
    )


def _pool_context():
    # fork keeps the parent's compiled numba kernels; elsewhere fall back to the default.
    if "fork" in multiprocessing.get_all_start_methods() and os.name == "posix":
        return multiprocessing.get_context("fork")
    return None


def _run_chunk(layout, seed, lo, hi):
    """Trials ``lo .. hi-1``: masked counts, per-trial Sbar, and S sums / counts by ``k``."""
    from .controller import stack_number_trajectories, stack_number_trajectory

    n, r = layout.stacks.shape
    # Wipe-outs come after about mu failures: run a prefix of each random order in one
    # compiled call, and rerun the rare trial that outlives it on its whole order.
    prefix = min(n, int(3 * theory.mu(n, r)) + 10 * r + 100)
    orders = np.empty((hi - lo, n), dtype=np.int32)
    for i in range(lo, hi):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(i,)))
        orders[i - lo] = rng.permutation(n)
    trajectories, wipeout, _moves = stack_number_trajectories(layout, orders[:, :prefix])
    masked = np.empty(hi - lo, dtype=np.int64)
    sbar = np.empty(hi - lo, dtype=np.float64)
    stack_sum = np.zeros(n + 1, dtype=np.int64)
    survivors = np.zeros(n + 1, dtype=np.int64)
    for row in range(hi - lo):
        if wipeout[row] > 0:
            stack_numbers = trajectories[row, :wipeout[row]]
        else:
            stack_numbers, _index = stack_number_trajectory(layout, orders[row])
        # stack_numbers[k] = S* after k failures for the masked states k = 0 .. j-1;
        # failure j wipes out, so j - 1 failures were masked.
        states = stack_numbers.size
        masked[row] = states - 1
        sbar[row] = stack_numbers.mean()
        stack_sum[:states] += stack_numbers
        survivors[:states] += 1
    return masked, sbar, stack_sum, survivors


def _relative(estimate, reference):
    if reference == 0 or not math.isfinite(reference):
        return math.nan
    return (estimate - reference) / reference


def _count(name, value, maximum=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name} must be a positive integer, got {value!r}")
    if maximum is not None and value > maximum:
        raise ParameterError(f"{name} must be at most {maximum:,}, got {value!r}")
    return int(value)


def _check_layout(layout):
    from .layout import Layout

    if not isinstance(layout, Layout):
        raise ParameterError(f"expected a Layout, got {type(layout).__name__}")
    return layout


def _check_seed(seed):
    # SeedSequence rejects negative seeds with a bare ValueError: refuse them up front.
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _check_seconds(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or math.isnan(value) or value <= 0:
        raise ParameterError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)


# ====================================================================== sweep
@dataclass
class SweepResult:
    """Monte-Carlo and closed forms over a range of ``r`` and layout methods.

    Attributes
    ----------
    groups : int
        ``N``.
    rows : list of dict
        One per (method, r) evaluated, keys ``method``, ``redundancy``, ``overlap``
        (lambda), ``layout_status``, ``mu``, ``mu_ci95``, ``sbar``, ``sbar_ci95``,
        ``closed_form_mu``, ``closed_form_sbar``, ``mu_relative_error``,
        ``sbar_relative_error``, ``j_closed_form``, ``j_monte_carlo``, ``seconds``.
    skipped : list of dict
        ``method``, ``redundancy``, ``reason`` for each (method, r) not evaluated.
    parameters : dict
        The arguments (trials, seed, times in seconds...).
    """

    groups: int
    rows: list
    skipped: list
    parameters: dict

    def to_json(self):
        """JSON-ready dict."""
        return {"groups": self.groups, "parameters": self.parameters, "rows": self.rows, "skipped": self.skipped}


def sweep(groups, r_min=2, r_max=20, methods=("sidon", "consecutive", "block"), trials=200, seed=0,
          workers=1, mtbf_seconds=theory.PAPER_MTBF_SECONDS, save_seconds=theory.PAPER_SAVE_SECONDS,
          restart_seconds=theory.PAPER_RESTART_SECONDS, time_limit=10.0, progress=None):
    """Compare layout methods over a range of redundancies by Monte-Carlo and closed forms.

    Parameters
    ----------
    groups : int
        ``N``.
    r_min, r_max : int, default 2, 20
        Redundancies ``r_min .. r_max`` (inclusive), ``1 <= r_min <= r_max <= N``.
    methods : sequence of str
        Layout methods of :func:`spare_opt.generators.generate`.  ``block`` is skipped
        where ``r`` does not divide ``N``; every skip is listed with its reason.
    trials, seed, workers
        As in :func:`monte_carlo`; every (method, r) uses the same ``seed``, so methods
        are compared on the same failure orders (common random numbers).
    mtbf_seconds : float, default 300
        System MTBF ``m`` for ``J`` (paper: 5 min).
    save_seconds : float, default 60
        Checkpoint save time ``T_s`` (paper: 60 s).
    restart_seconds : float, default 3600
        Global restart time ``T_r`` (paper: 60 min).
    time_limit : float, default 10.0
        Seconds per layout for the Sidon generator.
    progress : callable, optional
        Called with the number of trials just finished.

    Returns
    -------
    SweepResult

    Raises
    ------
    ParameterError
        A size, method or time is out of range.

    Notes
    -----
    ``j_closed_form`` is :func:`spare_opt.theory.normalised_ttt`; ``j_monte_carlo`` puts
    the Monte-Carlo ``Sbar`` and ``mu`` in the same formula:
    ``Sbar_MC / A*(mu_MC * m)``.
    """
    from .generators import METHODS, generate

    for name, value in (("r_min", r_min), ("r_max", r_max)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ParameterError(f"{name} must be an integer, got {value!r}")
    theory.mu(groups, r_max)  # validates N and r_max
    groups = int(groups)
    if not 1 <= r_min <= r_max:
        raise ParameterError(f"need 1 <= r_min <= r_max, got r_min={r_min}, r_max={r_max}")
    if isinstance(methods, str):  # "sidon,block": a single string would otherwise be split into letters
        methods = methods.split(",")
    try:
        methods = [m.strip() if isinstance(m, str) else m for m in methods]
    except TypeError:
        raise ParameterError(f"methods must be a sequence of layout method names, got {methods!r}") from None
    for method in methods:
        if not isinstance(method, str) or method not in METHODS:
            raise ParameterError(f"unknown layout method {method!r}; choose from {', '.join(METHODS)}")
    methods = list(dict.fromkeys(methods))  # a repeated method would only repeat its rows
    if not methods:
        raise ParameterError("methods must name at least one layout method")
    mtbf_seconds = theory._time("mtbf_seconds", mtbf_seconds, positive=True)
    save_seconds = theory._time("save_seconds", save_seconds, positive=True)
    restart_seconds = theory._time("restart_seconds", restart_seconds)
    time_limit = theory._time("time_limit", time_limit, positive=True)
    # Checked here too so that a sweep whose every combination is skipped still refuses them.
    trials = _count("trials", trials, MAX_TRIALS)
    workers = _count("workers", workers)
    seed = _check_seed(seed)
    rows, skipped = [], []
    for method in methods:
        for r in range(int(r_min), int(r_max) + 1):
            if method == "block" and groups % r:
                skipped.append({"method": method, "redundancy": r, "reason": f"r = {r} does not divide N = {groups}"})
                continue
            try:
                layout = generate(method, groups, r, seed=seed, time_limit=time_limit)
            except SpareError as exc:
                skipped.append({"method": method, "redundancy": r, "reason": str(exc)})
                continue
            result = monte_carlo(layout, trials=trials, seed=seed, workers=workers, progress=progress)
            a_mc = theory.availability(result.mu * mtbf_seconds, save_seconds, restart_seconds) if result.mu > 0 else 0.0
            rows.append({
                "method": method,
                "redundancy": r,
                "overlap": layout.overlap(),
                "layout_status": layout.metadata.get("solver_status", layout.metadata.get("status")),
                "mu": result.mu,
                "mu_ci95": [finite_or_none(v) for v in result.mu_ci95],
                "sbar": result.sbar,
                "sbar_ci95": [finite_or_none(v) for v in result.sbar_ci95],
                "closed_form_mu": result.closed_form_mu,
                "closed_form_sbar": result.closed_form_sbar,
                "mu_relative_error": finite_or_none(result.mu_relative_error),
                "sbar_relative_error": finite_or_none(result.sbar_relative_error),
                "j_closed_form": finite_or_none(theory.normalised_ttt(groups, r, mtbf_seconds, save_seconds, restart_seconds)),
                "j_monte_carlo": finite_or_none(result.sbar / a_mc) if a_mc > 0 else None,
                "seconds": round(result.seconds, 3),
            })
    parameters = {
        "r_min": int(r_min), "r_max": int(r_max), "methods": methods, "trials": trials, "seed": seed,
        "mtbf_seconds": float(mtbf_seconds), "save_seconds": float(save_seconds),
        "restart_seconds": float(restart_seconds), "time_limit": float(time_limit),
    }
    return SweepResult(groups=groups, rows=rows, skipped=skipped, parameters=parameters)

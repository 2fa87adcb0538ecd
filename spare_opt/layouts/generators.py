"""Stack-layout generators: Sidon (modular Golomb ruler), consecutive, block and random Latin layouts.

Every generator returns a validated :class:`~spare_opt.layouts.layout.Layout` of ``N`` DP groups
with redundancy ``r``: each row holds ``r`` distinct shard types and every layer is a
permutation of ``0..N-1`` (a Latin rectangle), so every shard type has ``r`` holders
(Lee et al., ICML 2026, Sec. 3; ``docs/layouts.md``).

* :func:`sidon` - circulant layout whose offsets are a Sidon set mod ``N`` (two groups
  share at most one shard type: the paper's independence condition), found from known
  constructions, by an exhaustive search (which also proves when none exists) or by
  CP-SAT; when none exists or none is found, the overlap ``lambda`` is minimised instead;
* :func:`consecutive` - offsets ``0..r-1`` (cyclic rotation);
* :func:`block` - blocks of ``r`` groups holding the same ``r`` shard types
  (fractional repetition, Tandon et al., ICML 2017);
* :func:`random_latin` - ``r`` random permutation layers with distinct entries per row.
"""

import time
from dataclasses import dataclass

import numpy as np

from . import _exhaustive
from ._constructions import candidate_sets, canonical_offsets, modular_lambda
from .._core import validation as check
from .._core.parallel import resolve_workers
from .._core.errors import ParameterError, SolverError
from .layout import Layout, check_size

__all__ = ["consecutive", "sidon", "block", "random_latin", "generate", "METHODS", "DEFAULT_TIME_LIMIT"]

METHODS = ("sidon", "consecutive", "block", "random")

#: Default wall-clock budget of the Sidon search, in seconds.
DEFAULT_TIME_LIMIT = 10.0
# Largest layout built, N * r stack entries (512 MiB as int32): beyond it the stacks,
# the holder index and the lambda computation would not fit a usual machine's memory.
MAX_LAYOUT_ENTRIES = 1 << 27
# Largest N * r^2 for random_latin: its repair and the lambda count are O(N r^2),
# about 25 s per 10^9 on one core (measured at N = 100,000, r = 60 and 120).
MAX_RANDOM_WORK = 5_000_000_000
# Largest number of ordered differences r(r-1) given to CP-SAT; beyond it only
# constructions and the greedy heuristic run (the model would take seconds to build).
MAX_MODEL_DIFFERENCES = 20_000
# Largest N for the exhaustive search (its arrays are O(r N); the Sidon search finds a
# set in milliseconds at large N when the lexicographically first one fits).
MAX_EXHAUSTIVE_GROUPS = 20_000
# Largest number of marks for which the lambda minimisation runs the exhaustive search
# (beyond it the tree is hopeless and CP-SAT makes better use of the time).
MAX_EXHAUSTIVE_MARKS = 16
# Share of the time limit the exhaustive Sidon search may use; CP-SAT then searches up
# to SIDON_SHARE_AFTER_EXHAUSTIVE of it, and the lambda minimisation gets the rest.  In
# the lambda minimisation, the exhaustive search gets this share of what is left.
EXHAUSTIVE_SHARE = 0.9
SIDON_SHARE_AFTER_EXHAUSTIVE = 0.95
# Share of its time the lambda minimisation gives the exhaustive search before the local search.
EXHAUSTIVE_FIRST_SHARE = 0.25
# Largest N * r^2 for the greedy heuristic (numpy work per call).
_MAX_GREEDY_WORK = 200_000_000
# Random partners tried per conflicting row, and repair rounds, in random_latin.
_PARTNERS_PER_TRY = 64
# Moves per target of the lambda local search.
_LOCAL_SEARCH_ITERATIONS = 3000
_REPAIR_ROUNDS = 50

STATUS_OPTIMAL = "optimal"
STATUS_FEASIBLE = "feasible"
STATUS_FALLBACK = "fallback"


# ------------------------------------------------------------ argument checks
def _check_layout_size(groups, redundancy):
    """``check_size``, plus a refusal of layouts too large to hold in memory."""
    n, r = check_size(groups, redundancy)
    if n * r > MAX_LAYOUT_ENTRIES:
        raise ParameterError(
            f"a layout of N = {n} groups with r = {r} has N r = {n * r:,} stack entries, "
            f"above the limit of {MAX_LAYOUT_ENTRIES:,} (512 MiB); choose a smaller N or r"
        )
    return n, r


def _circulant(groups, offsets, method, metadata):
    """The circulant layout ``stacks[g, l] = (g + offsets[l]) mod N``."""
    o = np.asarray(offsets, dtype=np.int32)
    stacks = np.arange(groups, dtype=np.int32)[:, None] + o[None, :]
    # Offsets lie in [0, N): one conditional subtraction is the mod, cheaper than %.
    stacks[stacks >= groups] -= groups
    return Layout(stacks, method=method, offsets=o.tolist(), metadata=metadata)


# ------------------------------------------------------------------ simple ones
def consecutive(groups, redundancy):
    """Consecutive (cyclic-rotation) layout: group ``g`` holds ``g, g+1, ..., g+r-1`` mod ``N``.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N`` (= number of shard types), ``N >= 1``.
    redundancy : int
        Stack depth ``r``, ``1 <= r <= N``.

    Returns
    -------
    Layout
        Method ``"consecutive"``, offsets ``(0, 1, ..., r-1)``; ``metadata["lambda"]``
        is its overlap (``r - 1`` when ``r <= N/2``: neighbours share ``r - 1`` shard
        types), ``metadata["solve_seconds"]`` the time taken.

    Raises
    ------
    ParameterTypeError
        ``N`` or ``r`` is not an integer (the same for every generator).
    ParameterError
        ``N < 1``, ``r < 1``, ``r > N``, or
        ``N r > MAX_LAYOUT_ENTRIES`` (``2^27``: the layout would not fit in memory;
        the same for every generator).

    Notes
    -----
    ``O(N r)`` time, vectorised; holder sets of consecutive shard types overlap
    heavily (correlated holders, Lee et al. Sec. 3).
    """
    start = time.perf_counter()
    groups, redundancy = _check_layout_size(groups, redundancy)
    offsets = range(redundancy)
    metadata = {"lambda": modular_lambda(offsets, groups)}
    layout = _circulant(groups, offsets, "consecutive", metadata)
    layout.metadata["solve_seconds"] = round(time.perf_counter() - start, 4)
    return layout


def block(groups, redundancy):
    """Block layout: blocks of ``r`` groups that hold the same ``r`` shard types.

    Group ``b r + i`` holds shard type ``b r + ((i + l) mod r)`` at layer ``l``, so every
    layer is still a permutation (each block is an ``r x r`` Latin square).

    Parameters
    ----------
    groups : int
        ``N >= 1``, a multiple of ``redundancy``.
    redundancy : int
        ``1 <= r <= N``.

    Returns
    -------
    Layout
        Method ``"block"``, no offsets; ``metadata["lambda"]`` is ``r`` for ``r >= 2``
        (two groups of a block share all ``r`` shard types) and 0 for ``r = 1``;
        ``metadata["solve_seconds"]``.

    Raises
    ------
    ParameterError
        Bad sizes (see :func:`~spare_opt.layouts.layout.check_size`) or ``r`` does not divide ``N``.

    References
    ----------
    R. Tandon, Q. Lei, A. G. Dimakis, N. Karampatziakis, "Gradient coding: avoiding
    stragglers in distributed learning", ICML 2017 (fractional repetition scheme).
    """
    start = time.perf_counter()
    groups, redundancy = _check_layout_size(groups, redundancy)
    if groups % redundancy:
        raise ParameterError(
            f"block layout needs r to divide N: N = {groups} is not a multiple of r = {redundancy} "
            f"(remainder {groups % redundancy}); choose N or r so that N mod r = 0"
        )
    group_ids = np.arange(groups, dtype=np.int64)
    block_start = (group_ids // redundancy) * redundancy
    position = group_ids % redundancy
    stacks = block_start[:, None] + (position[:, None] + np.arange(redundancy)[None, :]) % redundancy
    overlap = redundancy if redundancy >= 2 else 0
    layout = Layout(stacks.astype(np.int32), method="block", metadata={"lambda": overlap})
    layout.metadata["solve_seconds"] = round(time.perf_counter() - start, 4)
    return layout


def random_latin(groups, redundancy, *, seed=0):
    """Random Latin-rectangle layout: ``r`` random permutation layers, distinct entries per row.

    Parameters
    ----------
    groups : int
        ``N >= 1``.
    redundancy : int
        ``1 <= r <= N``.
    seed : int, default 0
        Seed (``>= 0``) of :func:`numpy.random.default_rng`; equal seeds give equal layouts.

    Returns
    -------
    Layout
        Method ``"random"``, no offsets, ``metadata["seed"]`` and ``["solve_seconds"]``.

    Raises
    ------
    ParameterTypeError
        ``N``, ``r`` or ``seed`` is not an integer.
    ParameterError
        Bad sizes, a negative seed, or ``N r^2`` above
        ``MAX_RANDOM_WORK`` (``5e9``, a few minutes of work: use :func:`sidon`).
    SolverError
        Only if the repair below fails on an instance too large for the exact
        fallback (``N^2 > 4e7`` with ``r`` close to ``N``); not observed in practice.

    Notes
    -----
    Layer 0 is a uniform random permutation.  Each further layer starts as a uniform
    random permutation; the rows where it repeats a shard type already in the row
    (about ``l`` rows at layer ``l``) are repaired by swapping entries with random
    partner rows where the swap creates no repeat (a swap keeps the layer a
    permutation).  If that does not converge (``r`` close to ``N``), the layer is
    completed exactly by a bipartite perfect matching between rows and shard types
    (one exists by Hall's theorem: the allowed graph is ``(N - l)``-regular),
    on randomly permuted columns.  Expected time ``O(N r^2)`` vectorised; the
    result is random but not exactly uniform over Latin rectangles.
    """
    start = time.perf_counter()
    groups, redundancy = _check_layout_size(groups, redundancy)
    seed = check.seed(seed)
    if groups * redundancy ** 2 > MAX_RANDOM_WORK:
        raise ParameterError(
            f"random layout: N r^2 = {groups * redundancy ** 2:.3g} is above the work limit "
            f"{MAX_RANDOM_WORK:.0e} (minutes of work); use a smaller r or the sidon method"
        )
    rng = np.random.default_rng(seed)
    stacks = np.empty((groups, redundancy), dtype=np.int64)
    stacks[:, 0] = rng.permutation(groups)
    for layer in range(1, redundancy):
        stacks[:, layer] = _random_layer(stacks[:, :layer], rng)
    layout = Layout(stacks.astype(np.int32), method="random", metadata={"seed": seed})
    layout.metadata["solve_seconds"] = round(time.perf_counter() - start, 4)
    return layout


def _random_layer(previous, rng):
    """A random permutation column that repeats no entry of its row in ``previous`` (shape (N, l))."""
    groups, layers = previous.shape
    column = rng.permutation(groups)
    # Random swaps rarely fit once most shard types are taken in a row: go exact.
    rounds = _REPAIR_ROUNDS if 2 * layers <= groups else 2
    for _ in range(rounds):
        bad = np.flatnonzero(np.any(previous == column[:, None], axis=1))
        if bad.size == 0:
            return column
        for row in bad:
            if not np.any(previous[row] == column[row]):
                continue  # fixed by an earlier swap this round
            partners = rng.integers(0, groups, size=_PARTNERS_PER_TRY)
            # Swap column[row] <-> column[partner]: both rows must stay free of repeats.
            fits_row = ~np.any(previous[row][None, :] == column[partners][:, None], axis=1)
            fits_partner = ~np.any(previous[partners] == column[row], axis=1)
            ok = np.flatnonzero(fits_row & fits_partner)
            if ok.size:
                partner = partners[ok[0]]
                column[row], column[partner] = column[partner], column[row]
    return _matching_layer(previous, rng)


def _matching_layer(previous, rng):
    """Exact completion of a Latin rectangle by one more row-to-shard perfect matching."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    groups, layers = previous.shape
    if groups * (groups - layers) > 40_000_000:
        raise SolverError(
            f"random_latin: cannot complete layer {layers} for N = {groups} (r too close to N for the "
            "random repair, too large for exact matching); use a smaller r"
        )
    relabel = rng.permutation(groups)  # random column order: a random perfect matching
    allowed = np.ones((groups, groups), dtype=bool)
    allowed[np.arange(groups)[:, None], relabel[previous]] = False
    rows, cols = np.nonzero(allowed)
    graph = csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(groups, groups))
    match = maximum_bipartite_matching(graph, perm_type="column")
    if np.any(match < 0):  # pragma: no cover - impossible by Hall's theorem
        raise SolverError("random_latin: no perfect matching found (internal error)")
    inverse = np.empty(groups, dtype=np.int64)
    inverse[relabel] = np.arange(groups)
    return inverse[match]


# ----------------------------------------------------------------------- Sidon
@dataclass
class _SolveResult:
    """What one CP-SAT solve of the difference model gave."""

    offsets: tuple | None
    overlap: int | None
    status: str
    proved: bool
    wall_seconds: float


def sidon(groups, redundancy, *, time_limit=DEFAULT_TIME_LIMIT, seed=0, workers=1):
    """Circulant layout whose offsets form a Sidon set (modular Golomb ruler) mod ``N``.

    Finds offsets ``0 = o_0 < ... < o_{r-1} < N`` with all differences ``o_i - o_j``
    (``i != j``) distinct mod ``N``; then any two groups share at most one shard type
    (``lambda <= 1``).  Known constructions are tried first (Singer, Bose and Ruzsa
    sets mod a divisor of ``N``, optimal Golomb rulers, rulers cut from Singer sets),
    then an exhaustive search that finds a Sidon set or proves there is none
    (:mod:`spare_opt.layouts._exhaustive`), then, if that was cut short, a CP-SAT
    search.  When no Sidon set exists (``r (r-1) > N - 1``, or a search proves it) or
    none is found in time, the largest difference multiplicity ``lambda`` is
    minimised instead: greedy start, exhaustive search, tabu local search, exhaustive
    search again, then CP-SAT.

    Parameters
    ----------
    groups : int
        ``N >= 1``.
    redundancy : int
        ``1 <= r <= N``.
    time_limit : float, default 10.0
        Wall-clock budget in seconds for the searches (constructions take
        milliseconds and are not limited).  When a Sidon set may exist and no
        construction gives one, the exhaustive search may use 90% of it and CP-SAT
        (only if the exhaustive search was cut short) up to 95% (half when ``N >
        20,000``: no exhaustive search); the lambda minimisation gets the rest
        (exhaustive search a quarter of what is left, local search at most half,
        exhaustive search 90%, then CP-SAT).  The one-off import of CP-SAT and the
        compilation (or cache load) of the search kernel are not charged to it.
        Model building can overrun the budget by a fraction of a second.
    seed : int, default 0
        Non-negative.  CP-SAT ``random_seed`` (taken mod ``2^31``) and seed of the
        greedy heuristic and the local search.
    workers : int, default 1
        CP-SAT ``num_workers`` (threads); ``-1`` for every CPU (``docs/api.md``).  With
        more than one worker ``interleave_search`` is switched on, which keeps the
        search deterministic.

    Returns
    -------
    Layout
        Method ``"sidon"`` with offsets, and ``metadata``:

        ``solver_status``
            ``"optimal"``: a Sidon set, ``lambda <= 1`` (the least possible);
            ``"feasible"``: a Sidon set may exist but none was found in the time
            limit, the layout has the smallest ``lambda`` found;
            ``"fallback"``: no Sidon set exists (counting bound, exhaustive search
            or CP-SAT proof), ``lambda`` was minimised.
        ``lambda``, ``lambda_lower_bound``, ``lambda_proved_optimal``
            The overlap (checked equal to :meth:`~spare_opt.layouts.layout.Layout.overlap`), a proven lower
            bound (``ceil(r(r-1)/(N-1))``, 2 when no Sidon set exists), and whether
            ``lambda`` is proved minimal over all circulant layouts with these ``N``
            and ``r`` (the bound then equals ``lambda``).
        ``reason``, ``construction``, ``search``, ``exhaustive_search``
            Why this status; the known construction used (or ``None``); for the
            lambda minimisation, lambda after each stage; the outcome of the
            exhaustive Sidon search (``found``, ``none`` or ``unknown``, nodes,
            seconds) when it ran.
        ``solve_seconds``, ``cp_sat_status``, ``seed``, ``time_limit``, ``workers``.

    Raises
    ------
    ParameterTypeError
        ``N``, ``r``, ``seed`` or ``workers`` is not an integer, or the time limit is
        not a number.
    ParameterError
        Bad sizes, a non-positive or non-finite time limit, a negative seed, or
        ``workers`` below 1 other than -1.
    SolverError
        CP-SAT rejected the model, or a result failed verification (internal error).

    Notes
    -----
    The CP-SAT model (after CSPLib prob006 and OR-Tools' ``golomb_sat.py``) has
    ``O(r^2)`` variables: ``r`` offsets and ``r(r-1)/2`` differences
    ``d_ij = o_j - o_i`` in ``[1, N-1]``; the ``r(r-1)`` residues ``d_ij`` and
    ``N - d_ij`` are exactly the nonzero differences mod ``N``, and one
    ``AllDifferent`` over them is the Sidon condition.  To bound multiplicities by
    ``lambda`` instead, each residue gets a copy index ``c_k in [0, lambda)`` and the
    keys ``residue_k * U + c_k`` must be all different (``U`` an upper bound on
    ``lambda`` from the hint).  Symmetry breaking: ``o_0 = 0``, increasing offsets,
    the wrap-around gap ``N - o_{r-1}`` is a largest gap (rotation), first gap at most
    last gap (reflection).  When ``r > N/2`` the complement ``B`` (``|B| = N - r``) is
    optimised instead: ``lambda(A) = 2r - N + lambda(B)``.

    Determinism: constructions, the greedy start and the local search (an iteration
    budget, not a time budget) depend only on ``seed``; CP-SAT runs with explicit
    ``random_seed``, ``num_workers`` and, for several workers, ``interleave_search``.
    CP-SAT stops on wall-clock time, though, so a run that reaches the time limit
    may return a different (equally valid) answer on a slower or busier machine.
    Runs that end before the limit (constructions, proofs, bound reached) are
    reproducible for a given ``seed`` and ``workers``.

    The exhaustive search (numba) enumerates the lexicographically least tuple of each
    orbit under ``x -> u x + c`` with forward checking (``docs/layouts.md``); it
    settles every ``r <= 10``, ``N <= 3 r(r-1)`` in about a second, ``r = 11`` in
    seconds (measured figures in ``docs/layouts.md``).

    References
    ----------
    J. Singer (1938); R. C. Bose (1942); I. Z. Ruzsa (1993); see
    :mod:`spare_opt.layouts._constructions`.  P. Kaski and P. R. J. Östergård,
    *Classification Algorithms for Codes and Designs* (2006), Ch. 4 (isomorph
    rejection).  CSPLib problem 006 (Golomb rulers).  Lee et al., ICML 2026, Sec. 3.

    Examples
    --------
    >>> from spare_opt import sidon
    >>> layout = sidon(600, 8, seed=0)
    >>> layout.offsets, layout.overlap(), layout.metadata["solver_status"]
    ((0, 6, 7, 9, 26, 37, 41, 51), 1, 'optimal')
    >>> layout.metadata["construction"]
    'Bose set, q = 11, mod 120, a divisor of N'
    """
    groups, redundancy = _check_layout_size(groups, redundancy)
    time_limit = check.seconds("time limit", time_limit)
    seed = check.seed(seed)
    workers = resolve_workers(workers)
    start = time.perf_counter()
    metadata = {
        "seed": seed,
        "time_limit": time_limit,
        "workers": workers,
        "construction": None,
        "cp_sat_status": None,
    }
    pairs = redundancy * (redundancy - 1)
    lower_bound = -(-pairs // (groups - 1)) if groups > 1 else 0

    if pairs > groups - 1:
        metadata.update(solver_status=STATUS_FALLBACK,
                        reason=f"r(r-1) = {pairs} > N-1 = {groups - 1}: no Sidon set exists")
        deadline = start + _cp_sat_import_seconds() + time_limit
        return _fallback(groups, redundancy, [], max(lower_bound, 2), start, deadline, metadata)

    # 1. Known constructions: verified mod N, the first Sidon one wins.
    hints = []
    for description, candidate in candidate_sets(groups, redundancy):
        overlap = modular_lambda(candidate, groups)
        if overlap <= 1:
            metadata.update(solver_status=STATUS_OPTIMAL, construction=description,
                            reason=f"known construction: {description}")
            return _finish(groups, candidate, overlap, lower_bound, True, start, metadata)
        hints.append((overlap, description, candidate))
    hints.sort(key=lambda item: item[0])

    # 2. Exhaustive search: finds a Sidon set or proves there is none.  The time limit
    # is search time: the one-off import of the solver and the compilation (or cache
    # load) of the search kernel are not charged to it, or the first call in a process
    # would search less than the next ones.
    budget_start = start + _cp_sat_import_seconds()
    if groups <= MAX_EXHAUSTIVE_GROUPS:
        budget_start += _exhaustive.warm_up()
        search = _exhaustive.exhaustive_search(groups, redundancy, 1,
                                               deadline=budget_start + EXHAUSTIVE_SHARE * time_limit)
        metadata["exhaustive_search"] = f"{search.status} ({search.nodes} nodes, {search.seconds:.2f} s)"
        if search.status == _exhaustive.FOUND:
            metadata.update(solver_status=STATUS_OPTIMAL, reason="the exhaustive search found a Sidon set")
            return _finish(groups, search.offsets, modular_lambda(search.offsets, groups), lower_bound, True,
                           start, metadata)
        if search.status == _exhaustive.NONE:
            metadata.update(solver_status=STATUS_FALLBACK,
                            reason=f"the exhaustive search proved that no Sidon set of {redundancy} residues "
                                   f"mod {groups} exists")
            return _fallback(groups, redundancy, hints, max(lower_bound, 2), start, budget_start + time_limit,
                             metadata)

    # 3. CP-SAT search for a Sidon set, hinted with the best construction.
    if pairs > MAX_MODEL_DIFFERENCES:
        metadata.update(solver_status=STATUS_FEASIBLE,
                        reason=f"r(r-1) = {pairs} differences is beyond the CP-SAT model limit "
                               f"({MAX_MODEL_DIFFERENCES}) and no known construction applies")
        return _fallback(groups, redundancy, hints, lower_bound, start, budget_start + time_limit, metadata)
    hint = canonical_offsets(hints[0][2], groups) if hints else None
    sidon_deadline = budget_start + (SIDON_SHARE_AFTER_EXHAUSTIVE if groups <= MAX_EXHAUSTIVE_GROUPS else 0.5) * time_limit
    search = _solve_difference_model(groups, redundancy, sidon_deadline, seed, workers, sidon_only=True, hint=hint)
    metadata["cp_sat_status"] = search.status
    if search.offsets is not None:
        metadata.update(solver_status=STATUS_OPTIMAL, reason="CP-SAT found a modular Golomb ruler")
        return _finish(groups, search.offsets, search.overlap, lower_bound, True, start, metadata)
    if search.proved:
        metadata.update(solver_status=STATUS_FALLBACK,
                        reason=f"CP-SAT proved that no Sidon set of {redundancy} residues mod {groups} exists")
        lower_bound = max(lower_bound, 2)
    else:
        metadata.update(solver_status=STATUS_FEASIBLE,
                        reason=f"time limit: no Sidon set found in {search.wall_seconds:.1f} s")
    return _fallback(groups, redundancy, hints, lower_bound, start, budget_start + time_limit, metadata)


def _cp_sat_import_seconds():
    """Import CP-SAT (ortools, loaded on first use) and return the seconds it took (0 once loaded)."""
    before = time.perf_counter()
    from ortools.sat.python import cp_model  # noqa: F401

    return time.perf_counter() - before


def _fallback(groups, redundancy, hints, lower_bound, start, deadline, metadata):
    """Minimise lambda: greedy start or construction hint, local search, then CP-SAT; finish the layout.

    ``metadata["search"]`` records the lambda after each stage.
    """
    complement = 2 * redundancy > groups
    marks = groups - redundancy if complement else redundancy
    # lambda(A) = 2r - N + lambda(complement of A): the same problem on fewer marks.
    shift = 2 * redundancy - groups if complement else 0
    seed = metadata["seed"]
    steps = []
    if marks >= 2:
        # The counting bound applied to the smaller set.
        lower_bound = max(lower_bound, shift + -(-marks * (marks - 1) // (groups - 1)))

    if marks <= 1:
        best = tuple(range(marks))
        best_overlap = 0
    else:
        best = canonical_offsets(_heuristic_offsets(groups, marks, seed), groups)
        best_overlap = modular_lambda(best, groups)
        steps.append(f"greedy {best_overlap + shift}")
        for overlap, description, candidate in hints if not complement else []:
            if overlap < best_overlap:
                best, best_overlap = canonical_offsets(candidate, groups), overlap
                metadata["construction"] = f"{description} (lambda {overlap} mod N, used as a start)"
                steps.append(f"construction {overlap}")
    proved = best_overlap + shift <= lower_bound or marks <= 1
    exhaustive = marks <= MAX_EXHAUSTIVE_MARKS and groups <= MAX_EXHAUSTIVE_GROUPS

    def lower_exhaustively(share):
        """Exhaustive search for a set with lambda one lower: found, try lower still; none
        exists, the lambda at hand is proved minimal.  Uses ``share`` of the time left."""
        nonlocal best, best_overlap
        search_deadline = time.perf_counter() + share * (deadline - time.perf_counter())
        while time.perf_counter() < search_deadline:
            search = _exhaustive.exhaustive_search(groups, marks, best_overlap - 1, deadline=search_deadline)
            if search.status != _exhaustive.FOUND:
                return search.status == _exhaustive.NONE
            best = canonical_offsets(search.offsets, groups)
            best_overlap = modular_lambda(best, groups)
            if best_overlap + shift <= lower_bound:
                return True
        return False

    # Small cases: a short exhaustive search first often settles them at once (the
    # local search spends its whole iteration budget on a target that does not exist).
    if not proved and exhaustive:
        proved = lower_exhaustively(EXHAUSTIVE_FIRST_SHARE)
        steps.append(f"exhaustive search {best_overlap + shift}{' proved' if proved else ''}")

    # Local search: lower the target one step at a time while it succeeds; it may use
    # half of the remaining time, the rest is for the exhaustive search and CP-SAT.
    if not proved and marks * (marks - 1) <= MAX_MODEL_DIFFERENCES:
        search_deadline = time.perf_counter() + (deadline - time.perf_counter()) / 2
        while best_overlap + shift > lower_bound and time.perf_counter() < search_deadline:
            found = _local_search(groups, marks, best_overlap - 1, best, seed, search_deadline)
            if found is None:
                break
            best, best_overlap = canonical_offsets(found, groups), modular_lambda(found, groups)
        steps.append(f"local search {best_overlap + shift}")
        proved = best_overlap + shift <= lower_bound

    # Then the exhaustive search again, with most of what is left; CP-SAT keeps the rest.
    if not proved and exhaustive:
        proved = lower_exhaustively(EXHAUSTIVE_SHARE)
        steps.append(f"exhaustive search {best_overlap + shift}{' proved' if proved else ''}")

    remaining = deadline - time.perf_counter()
    if not proved and marks * (marks - 1) <= MAX_MODEL_DIFFERENCES and remaining > 0.05:
        result = _solve_difference_model(groups, marks, deadline, seed, metadata["workers"], sidon_only=False,
                                         hint=best, upper=best_overlap,
                                         lower=max(1, lower_bound - shift))
        metadata["cp_sat_status"] = result.status
        if result.offsets is not None and result.overlap <= best_overlap:
            best, best_overlap, proved = result.offsets, result.overlap, result.proved
        steps.append(f"CP-SAT {result.status} {best_overlap + shift}")
    elif not proved:
        metadata["reason"] += "; CP-SAT skipped (no time left or model too large)"
    metadata["search"] = ", ".join(steps) or "none needed"
    if best_overlap + shift <= 1 and metadata["solver_status"] == STATUS_FEASIBLE:
        # The heuristics found a Sidon set that the CP-SAT search missed in its time.
        metadata["solver_status"] = STATUS_OPTIMAL
        metadata["reason"] += "; the greedy start / local search then found a Sidon set"
    offsets = best
    if complement:
        chosen = np.ones(groups, dtype=bool)
        chosen[list(best)] = False
        offsets = canonical_offsets(np.flatnonzero(chosen), groups)
    return _finish(groups, offsets, best_overlap + shift, lower_bound, proved, start, metadata)


def _local_search(groups, marks, target, start, seed, deadline, iterations=None):
    """Tabu min-conflicts search for ``marks`` residues mod ``groups`` with multiplicities <= ``target``.

    Returns the residues (sorted array) or ``None`` if the iteration budget (default
    ``_LOCAL_SEARCH_ITERATIONS``) or the wall-clock ``deadline`` ran out first.

    Notes
    -----
    State: a residue set ``A`` and the multiplicity of every difference.  Cost: the
    excess ``sum_d max(0, mult(d) - target)``, zero exactly at a solution.  Move:
    remove a random element that takes part in an over-full difference, add the
    residue whose new differences land least often on full differences (ties at
    random), and forbid the removed residue for ``marks / 2 + U{0,2}`` iterations
    (tabu tenure).  ``O(N marks)`` numpy work per move.  The budget is counted in
    iterations, so the result depends only on ``seed`` unless ``deadline`` binds.
    """
    rng = np.random.default_rng([seed % (2 ** 63), target])
    members = np.asarray(sorted(start), dtype=np.int64)
    counts = _difference_counts(members, groups)
    excess = int(np.maximum(counts - target, 0).sum())
    in_set = np.zeros(groups, dtype=bool)
    in_set[members] = True
    tabu_until = np.zeros(groups, dtype=np.int64)
    tenure = max(2, marks // 2)
    residues = np.arange(groups, dtype=np.int64)
    for iteration in range(iterations or _LOCAL_SEARCH_ITERATIONS):
        if excess == 0:
            return np.sort(members)
        if iteration % 64 == 0 and time.perf_counter() > deadline:
            return None
        over = counts > target
        pair_diffs = (members[:, None] - members[None, :]) % groups
        involved = np.flatnonzero(over[pair_diffs].any(axis=1))
        index = involved[rng.integers(involved.size)]
        removed = members[index]
        rest = np.delete(members, index)
        np.subtract.at(counts, (removed - rest) % groups, 1)
        np.subtract.at(counts, (rest - removed) % groups, 1)
        in_set[removed] = False
        full = counts >= target
        forward = (residues[:, None] - rest[None, :]) % groups
        landing = full[forward].sum(axis=1) + full[(-forward) % groups].sum(axis=1)
        score = landing + rng.random(groups) * 0.5
        score[in_set | (tabu_until > iteration)] = np.inf
        score[removed] = np.inf
        added = int(np.argmin(score))
        if not np.isfinite(score[added]):  # everything tabu: undo and try again
            added = int(removed)
        np.add.at(counts, (added - rest) % groups, 1)
        np.add.at(counts, (rest - added) % groups, 1)
        in_set[added] = True
        members = np.append(rest, added)
        tabu_until[removed] = iteration + tenure + rng.integers(0, 3)
        excess = int(np.maximum(counts - target, 0).sum())
    return np.sort(members) if excess == 0 else None


def _difference_counts(members, groups):
    """Multiplicity of every nonzero difference of ``members`` mod ``groups`` (index 0 unused, 0)."""
    diffs = (members[:, None] - members[None, :]) % groups
    counts = np.bincount(diffs[~np.eye(members.size, dtype=bool)], minlength=groups)
    counts[0] = 0
    return counts


def _finish(groups, offsets, overlap, lower_bound, proved, start, metadata):
    """Build the circulant layout and verify it against the claims in ``metadata``."""
    offsets = canonical_offsets(offsets, groups)
    if proved:
        lower_bound = overlap  # a proof of optimality is the tightest bound
    metadata.update(
        {
            "lambda": int(overlap),
            "lambda_lower_bound": int(lower_bound),
            "lambda_proved_optimal": bool(proved),
        }
    )
    layout = _circulant(groups, offsets, "sidon", metadata)
    measured = layout.overlap()
    if measured != overlap or (metadata["solver_status"] == STATUS_OPTIMAL and measured > 1) or measured < lower_bound:
        raise SolverError(
            f"sidon: internal check failed for N = {groups}: claimed lambda {overlap}, "
            f"layout overlap {measured}, lower bound {lower_bound}, status {metadata['solver_status']}"
        )
    layout.metadata["solve_seconds"] = round(time.perf_counter() - start, 4)
    return layout


def _heuristic_offsets(groups, marks, seed):
    """A start for the lambda minimisation: greedy least-collision insertion, or random sets when large.

    Greedy: starting from ``{0}``, repeatedly add the residue whose new differences
    collide least with the differences already present (ties broken at random with
    ``seed``).  ``O(N marks^2)`` vectorised work.
    """
    rng = np.random.default_rng(seed)
    if groups * marks * marks > _MAX_GREEDY_WORK:
        sets = [np.sort(rng.choice(groups, size=marks, replace=False)) for _ in range(8)]
        return min(sets, key=lambda s: modular_lambda(s, groups)).tolist()
    counts = np.zeros(groups, dtype=np.int64)
    taken = np.zeros(groups, dtype=bool)
    taken[0] = True
    chosen = [0]
    residues = np.arange(groups, dtype=np.int64)
    for _ in range(marks - 1):
        current = np.asarray(chosen, dtype=np.int64)
        forward = (residues[:, None] - current[None, :]) % groups
        collisions = counts[forward].sum(axis=1) + counts[(-forward) % groups].sum(axis=1)
        score = collisions + rng.random(groups) * 0.5
        score[taken] = np.inf
        value = int(np.argmin(score))
        np.add.at(counts, (value - current) % groups, 1)
        np.add.at(counts, (current - value) % groups, 1)
        taken[value] = True
        chosen.append(value)
    return chosen


def _solve_difference_model(groups, marks, deadline, seed, workers, sidon_only, hint=None, upper=None, lower=1,
                            window=None, forbidden=None):
    """Build and solve the difference model (:func:`_difference_model`) with CP-SAT.

    ``deadline`` is a :func:`time.perf_counter` value; the solver gets what is left of
    it once the model is built.
    """
    model, offsets = _difference_model(groups, marks, sidon_only, hint=hint, upper=upper, lower=lower,
                                       window=window, forbidden=forbidden)
    return _solve_model(model, offsets, groups, deadline, seed, workers)


def _difference_model(groups, marks, sidon_only, hint=None, upper=None, lower=1, window=None, forbidden=None):
    """CP-SAT model of ``marks`` residues mod ``groups`` with bounded difference multiplicity.

    ``sidon_only``: feasibility of a Sidon set (all residues distinct).  Otherwise
    minimise ``lambda`` in ``[lower, upper]``; ``hint`` (canonical offsets) must then
    have ``lambda <= upper``.  ``window = (width, count)``, for failure domains of
    ``width`` consecutive groups (:mod:`spare_opt.layouts.domain_safe`): at most ``count``
    offsets in any cyclic window of ``width`` consecutive residues; ``forbidden``, a
    boolean mask over residues closed under ``x -> N - x``: residues no difference may
    take.  The hint must then meet them too.  ``O(marks^2)`` variables and
    constraints, whatever ``groups`` is.  Returns ``(model, offset_variables)``.
    """
    from ortools.sat.python import cp_model

    # Data
    pairs = [(i, j) for i in range(marks) for j in range(i + 1, marks)]
    bound = 1 if sidon_only else int(upper)

    # Model
    model = cp_model.CpModel()

    # Variables: offsets and differences d_ij = o_j - o_i.  The domain [1, N-1] of the
    # differences also orders the offsets (see symmetry breaking).
    offsets = [model.new_int_var(0, groups - 1, f"offset_{i}") for i in range(marks)]
    if forbidden is None:
        diffs = {(i, j): model.new_int_var(1, groups - 1, f"diff_{i}_{j}") for i, j in pairs}
    else:
        # Failure domains: differences of two groups in a common domain are excluded.
        allowed = cp_model.Domain.from_values(np.flatnonzero(~forbidden[1:]) + 1)
        diffs = {(i, j): model.new_int_var_from_domain(allowed, f"diff_{i}_{j}") for i, j in pairs}
    overlap = None if sidon_only else model.new_int_var(lower, bound, "lambda")
    residues = [diffs[p] for p in pairs] + [groups - diffs[p] for p in pairs]
    copies = [] if sidon_only else [model.new_int_var(0, bound - 1, f"copy_{k}") for k in range(len(residues))]

    # Constraints: the residues d_ij and N - d_ij are the nonzero differences mod N.
    for (i, j), diff in diffs.items():
        model.add(diff == offsets[j] - offsets[i])
    if sidon_only:
        model.add_all_different(residues)
    else:
        # A value taken by at most lambda residues <=> copies numbered 0..lambda-1 make keys distinct.
        model.add_all_different([residue * bound + copy for residue, copy in zip(residues, copies)])
        for copy in copies:
            model.add(copy <= overlap - 1)

    # Failure domains: at most `count` offsets in any cyclic window of `width` residues,
    # i.e. o_{i+count} - o_i >= width around the cycle (count = 1: every two offsets at
    # least `width` apart).  Rotations and reflections keep it: the symmetry breaking
    # below stays valid.
    if window is not None:
        width, count = window
        for i in range(marks):
            if i + count < marks:
                model.add(diffs[i, i + count] >= width)
            elif count < marks:
                # o_j + N - o_i >= width with j = i + count - r < i.
                model.add(diffs[i + count - marks, i] <= groups - width)

    # Symmetry breaking.  Translation: o_0 = 0.  Relabelling: offsets increase
    # (differences >= 1).  Rotation: the wrap-around gap N - o_{r-1} is a largest gap,
    # hence at least ceil(N / r).  Reflection x -> -x: first gap <= last gap.
    model.add(offsets[0] == 0)
    wrap_gap = groups - offsets[-1]
    model.add(wrap_gap >= -(-groups // marks))
    for i in range(marks - 1):
        model.add(wrap_gap >= diffs[i, i + 1])
    if marks >= 3:
        model.add(diffs[0, 1] <= diffs[marks - 2, marks - 1])

    # Objective
    if not sidon_only:
        model.minimize(overlap)

    # Hint (canonical offsets satisfy the symmetry breaking).
    if hint is not None:
        hint_values = np.asarray(hint, dtype=np.int64)
        for var, value in zip(offsets, hint_values):
            model.add_hint(var, int(value))
        for (i, j), diff in diffs.items():
            model.add_hint(diff, int(hint_values[j] - hint_values[i]))
        if not sidon_only:
            hint_residues = [int(hint_values[j] - hint_values[i]) for i, j in pairs]
            hint_residues += [groups - value for value in hint_residues]
            seen = {}
            for copy, value in zip(copies, hint_residues):
                model.add_hint(copy, seen.get(value, 0))
                seen[value] = seen.get(value, 0) + 1
            model.add_hint(overlap, max(seen.values()))
    return model, offsets


def _solve_model(model, offsets, groups, deadline, seed, workers):
    """Solve with explicit parameters; check the status before reading values."""
    from ortools.sat.python import cp_model

    # Solver parameters, explicit: wall-clock limit, workers, seed, deterministic interleaving.
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, deadline - time.perf_counter())
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = int(seed) % (2 ** 31)
    solver.parameters.interleave_search = workers > 1
    # Probing the expanded AllDifferent costs seconds of presolve on dense instances
    # and found fewer solutions in short runs (measured, docs/layouts.md).
    solver.parameters.cp_model_probing_level = 0
    solver.parameters.log_search_progress = False

    # Solve, then check the status before reading any value.
    started = time.perf_counter()
    status = solver.solve(model)
    wall = time.perf_counter() - started
    name = solver.status_name(status)
    if status == cp_model.MODEL_INVALID:
        raise SolverError(f"CP-SAT rejected the difference model: {model.validate()}")
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = tuple(int(solver.value(var)) for var in offsets)
        found_overlap = modular_lambda(found, groups)
        proved = status == cp_model.OPTIMAL
        return _SolveResult(found, found_overlap, name, proved, wall)
    return _SolveResult(None, None, name, status == cp_model.INFEASIBLE, wall)


# -------------------------------------------------------------------- dispatch
def generate(method, groups, redundancy, *, seed=0, time_limit=DEFAULT_TIME_LIMIT):
    """Generate a layout by method name.

    Parameters
    ----------
    method : {"sidon", "consecutive", "block", "random"}
        One of :data:`METHODS`.
    groups, redundancy : int
        ``N`` and ``r``.
    seed : int, default 0
        Used by ``"sidon"`` and ``"random"`` (ignored, unchecked, by the others).
    time_limit : float, default 10.0
        Seconds, used by ``"sidon"`` (ignored, unchecked, by the others).

    Returns
    -------
    Layout

    Raises
    ------
    ParameterTypeError, ParameterError
        Unknown method, or the errors of the chosen generator.
    SolverError
        From :func:`sidon` or :func:`random_latin` (internal errors).
    """
    check.choice("layout method", method, METHODS)
    if method == "sidon":
        return sidon(groups, redundancy, time_limit=time_limit, seed=seed)
    if method == "consecutive":
        return consecutive(groups, redundancy)
    if method == "block":
        return block(groups, redundancy)
    return random_latin(groups, redundancy, seed=seed)

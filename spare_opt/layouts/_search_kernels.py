"""Numba kernel of the exhaustive difference-set search (private; see :mod:`spare_opt.layouts._exhaustive`).

One kernel, :func:`difference_search`: a depth-first search over sorted residue sets
``0 = a_0 < a_1 < ... < a_{r-1} < N`` in which no nonzero difference ``a_i - a_j mod N``
occurs more than ``bound`` times (``bound = 1``: a Sidon set).  The search is
resumable: every piece of its state lives in the arrays the caller passes, so the
caller can run it in slices of ``node_budget`` nodes and check a wall-clock deadline
between slices (numba code cannot read the clock).

State arrays (``r`` marks, modulus ``N``):

``elements`` (r,) int64
    The current prefix ``a_0..a_level``.
``candidates`` (r, N) int64 and ``candidate_count``, ``position`` (r,) int64
    Row ``l``: the residues still allowed at level ``l`` given ``a_0..a_{l-1}``, in
    increasing order; how many there are, and the index of the next one to try.
``counts`` (N,) int64
    Multiplicity of every nonzero difference of the prefix.
``state`` (4,) int64
    The level being chosen, a started flag (0 on the first call), the stamp of
    ``marked`` and the number of nodes (residues tried) so far.

Nothing is compiled at import time (:func:`spare_opt._core.jit.kernel`).
"""

import numpy as np

from .._core.jit import kernel

#: Prefixes up to this many elements get the coverage bound of :func:`_uncoverable`.
COVERAGE_DEPTH = 8
#: Return codes of :func:`difference_search`.
BUDGET = 0
FOUND = 1
EXHAUSTED = 2


@kernel
def _full(groups, bound, counts, d):
    """Whether the difference ``d`` can take no more pairs: ``N/2`` is its own negative, a pair adds it twice."""
    if 2 * d == groups:
        return counts[d] + 2 > bound
    return counts[d] >= bound


@kernel
def _first_level(groups, bound, marks, counts, candidates):
    """Fill ``candidates[1]`` with every ``x`` in ``[1, N - 1]`` that fits with ``a_0 = 0``; return how many.

    Every list keeps its residues up to ``N - 1``: a list of level ``l`` seeds the lists
    of all deeper levels, so it may not be cut at the last place of ``a_l``.
    """
    n = 0
    for x in range(1, groups):
        if not _full(groups, bound, counts, x):
            candidates[1, n] = x
            n += 1
    return n


@kernel
def _mark_progression(groups, start, step, first, last, marked, stamp):
    """Mark ``start + k step mod N`` for ``k = first..last``."""
    x = (start + first * step) % groups
    for _ in range(first, last + 1):
        marked[x] = stamp
        x += step
        if x >= groups:
            x -= groups


@kernel
def _contains(elements, size, value):
    """Whether ``value`` is one of ``elements[:size]``."""
    for k in range(size):
        if elements[k] == value:
            return True
    return False


@kernel
def _mark_second_order(groups, elements, level, is_unit, marked, stamp):
    """Second-order rule of :func:`_filter`, for the triples ``(x, y, x + s (y - x))`` that ``a_level`` completes."""
    s = elements[2]
    t = elements[3]
    if t <= s + 1:
        return
    size = level + 1
    value = elements[level]
    for i in range(size):
        for j in range(size):
            if i == j or (level > 3 and i != level and j != level):
                continue
            x = elements[i]
            d = elements[j] - x
            if d < 0:
                d += groups
            if not is_unit[d]:
                continue
            if _contains(elements, size, (x + s * d) % groups):
                _mark_progression(groups, x, d, s + 1, t - 1, marked, stamp)
    if level > 3:
        # Triples whose third element is a_level: x + s (y - x) = a_level for old x, y.
        for i in range(level):
            for j in range(level):
                if i == j:
                    continue
                x = elements[i]
                d = elements[j] - x
                if d < 0:
                    d += groups
                if is_unit[d] and (x + s * d) % groups == value:
                    _mark_progression(groups, x, d, s + 1, t - 1, marked, stamp)


@kernel
def _filter(groups, bound, elements, level, counts, candidates, candidate_count, position, is_unit, marked, stamp,
            canonical_depth):
    """Fill ``candidates[level + 1]`` from the untried candidates of ``level`` after ``a_level`` was added.

    ``x`` fits when no difference ``x - a_i`` is full.  Candidates of ``level`` fitted
    ``a_0..a_{level-1}`` under the counts before ``a_level``; only differences of
    ``a_level`` that became full can exclude them now: those ``x = a_i + d`` are
    marked first (``marked[x] == stamp``), then each candidate is checked against
    ``a_level`` itself.

    With ``a_0 = 0, a_1 = 1, a_2 = s``, the least tuple of an orbit has no affine image
    ``(0, 1, b_2, ...)`` with ``b_2 < s``: for every ordered pair ``(x, y)`` of the set
    with a unit difference ``delta = y - x``, no element is ``x + k delta`` with
    ``2 <= k < s`` (the map ``z -> (z - x)/delta`` would send it to ``k``).  The new
    pairs of ``a_level`` (and, at level 2, the pairs of ``0`` and ``1``) mark those
    residues too.  Second order, with ``a_3 = t``: a pair whose map sends an element
    to ``s`` (``x + s delta`` in the set) must send none into ``(s, t)``: the
    residues ``x + k delta``, ``s < k < t``, are marked as well, for prefixes of at
    most ``canonical_depth`` elements (deeper, the rule costs more than it prunes:
    measured on N = 119 and 126, r = 11).
    """
    value = elements[level]
    for i in range(level):
        d = value - elements[i]
        for e in (d, groups - d):
            if _full(groups, bound, counts, e):
                for k in range(level):
                    x = elements[k] + e
                    if x >= groups:
                        x -= groups
                    marked[x] = stamp
    if level >= 2 and elements[1] == 1 and elements[2] >= 3:
        last = elements[2] - 1
        if level == 2:  # the pair (1, 0); (0, 1) maps to the least elements already
            _mark_progression(groups, 1, groups - 1, 2, last, marked, stamp)
        for i in range(level):
            d = value - elements[i]
            if is_unit[d]:
                _mark_progression(groups, elements[i], d, 2, last, marked, stamp)
                _mark_progression(groups, value, groups - d, 2, last, marked, stamp)
        if level >= 3 and level + 1 <= canonical_depth:
            _mark_second_order(groups, elements, level, is_unit, marked, stamp)
    following = level + 1
    n = 0
    for p in range(position[level], candidate_count[level]):
        x = candidates[level, p]
        if marked[x] == stamp or _full(groups, bound, counts, x - value):
            continue
        candidates[following, n] = x
        n += 1
    return n


@kernel
def _uncoverable(groups, marks, elements, size, counts, candidates, n, marked, stamp):
    """Whether more residues must stay non-differences than a Sidon set of ``r`` marks leaves (``bound = 1``).

    A Sidon set of ``r`` residues mod ``N`` leaves exactly ``N - 1 - r(r-1)`` nonzero
    residues that are no difference.  A residue unused by the prefix ``a_0..a_{size-1}``
    can still become a difference only between a candidate and the prefix, or between
    two candidates (``candidates[size, :n]``); the others stay unused.  More of those
    than the slack: no completion.
    """
    slack = groups - 1 - marks * (marks - 1)
    # Differences with the prefix first (cheap); the pairs of candidates only when those
    # leave more than the slack unused.
    for p in range(n):
        x = candidates[size, p]
        for i in range(size):
            d = x - elements[i]
            marked[d] = stamp
            marked[groups - d] = stamp
    lost = 0
    for d in range(1, groups):
        if counts[d] == 0 and marked[d] != stamp:
            lost += 1
    if lost <= slack:
        return False
    for p in range(n):
        x = candidates[size, p]
        for q in range(p + 1, n):
            d = candidates[size, q] - x
            marked[d] = stamp
            marked[groups - d] = stamp
    lost = 0
    for d in range(1, groups):
        if counts[d] == 0 and marked[d] != stamp:
            lost += 1
            if lost > slack:
                return True
    return False


@kernel
def _change(groups, elements, level, value, step, counts):
    """Add ``step`` (+1 or -1) to the multiplicities of the differences of ``value`` with ``a_0..a_{level-1}``."""
    for i in range(level):
        d = value - elements[i]
        counts[d] += step
        counts[groups - d] += step


@kernel
def _fits(groups, bound, elements, level, value, counts):
    """Whether every difference of ``value`` with ``a_0..a_{level-1}`` is at most ``bound`` (after :func:`_change`)."""
    for i in range(level):
        d = value - elements[i]
        if counts[d] > bound or counts[groups - d] > bound:
            return False
    return True


@kernel
def _lexicographically_least(groups, elements, size, is_unit, inverse, image):
    """False when an affine image ``x -> u (x - a_i)`` of the prefix, sorted, is lexicographically smaller.

    Only the maps sending an ordered pair ``(a_i, a_j)`` with a unit difference to
    ``(0, 1)`` are tried (``u = (a_j - a_i)^-1``).  A prefix with a smaller image
    cannot start the lexicographically least set of its orbit under the affine group
    (every order statistic of the image of a superset is at most that of the image of
    the prefix), so pruning it keeps that least set.
    """
    for i in range(size):
        for j in range(size):
            if i == j:
                continue
            d = elements[j] - elements[i]
            if d < 0:
                d += groups
            if not is_unit[d]:
                continue
            u = inverse[d]
            if size >= 3 and elements[1] == 1:
                # The image starts 0, 1 like the prefix: its third element decides
                # unless it ties with a_2 (the usual case is a quick "larger").
                least = groups
                for k in range(size):
                    if k != i and k != j:
                        value = (u * (elements[k] - elements[i])) % groups
                        if value < least:
                            least = value
                if least > elements[2]:
                    continue
                if least < elements[2]:
                    return False
            for k in range(size):
                value = (u * (elements[k] - elements[i])) % groups
                # Insertion sort: the prefix has at most a few dozen elements.
                position = k
                while position > 0 and image[position - 1] > value:
                    image[position] = image[position - 1]
                    position -= 1
                image[position] = value
            for k in range(size):
                if image[k] < elements[k]:
                    return False
                if image[k] > elements[k]:
                    break
    return True


@kernel
def difference_search(groups, marks, bound, first_is_one, canonical_depth, last_place, is_unit, inverse, elements,
                      candidates,
                      candidate_count, position, counts, image, marked, state, node_budget):
    """Run the depth-first search for at most ``node_budget`` nodes.

    Parameters
    ----------
    groups, marks, bound : int
        ``N``, ``r`` (``2 <= r <= N``) and the largest multiplicity allowed.
    first_is_one : bool
        Fix ``a_1 = 1``: valid when every set of the kind searched has a difference
        that is a unit mod ``N`` (the caller decides).
    canonical_depth : int
        Prefixes of at most this many elements are compared with their images under
        every pair map (and get the second-order rule of :func:`_filter`).
    last_place : (r,) int64
        Largest value ``a_l`` may take (candidates beyond it end the level).
    is_unit, inverse : (N,) arrays
        Units mod ``N`` and their inverses.
    elements, candidates, candidate_count, position, counts, image, marked, state : arrays
        The search state (module docstring); ``image`` (r,) int64 and ``marked``
        (N,) int64 are scratch (a residue is marked when ``marked[x]`` equals the
        stamp ``state[2]``, raised before each use).
    node_budget : int
        Nodes (tried residues) to spend in this call.

    Returns
    -------
    int
        :data:`FOUND` (``elements`` holds a set), :data:`EXHAUSTED` (none exists in
        the search space) or :data:`BUDGET` (call again to continue).
    """
    if state[1] == 0:
        state[1] = 1
        counts[:] = 0
        elements[0] = 0
        state[0] = 1
        candidate_count[1] = _first_level(groups, bound, marks, counts, candidates)
        position[1] = 0
    level = state[0]
    nodes = 0
    while True:
        if nodes >= node_budget:
            state[0] = level
            return BUDGET
        p = position[level]
        # With a_1 = 1 fixed, level 1 tries its first candidate (1) only; the whole list
        # still counts towards the forward check.
        open_level = not (first_is_one and level == 1 and p >= 1)
        if open_level and p < candidate_count[level] and candidate_count[level] - p >= marks - level and \
                candidates[level, p] <= last_place[level]:
            value = candidates[level, p]
            position[level] = p + 1
            nodes += 1
            state[3] += 1
            _change(groups, elements, level, value, 1, counts)
            if not _fits(groups, bound, elements, level, value, counts):
                _change(groups, elements, level, value, -1, counts)
                continue
            elements[level] = value
            if level == marks - 1:
                state[0] = level
                return FOUND
            if level + 1 <= canonical_depth and not _lexicographically_least(groups, elements, level + 1, is_unit,
                                                                              inverse, image):
                _change(groups, elements, level, value, -1, counts)
                continue
            following = level + 1
            state[2] += 1
            n = _filter(groups, bound, elements, level, counts, candidates, candidate_count, position, is_unit,
                        marked, state[2], canonical_depth)
            if n < marks - following:
                _change(groups, elements, level, value, -1, counts)
                continue
            if bound == 1 and following <= COVERAGE_DEPTH:
                state[2] += 1
                if _uncoverable(groups, marks, elements, following, counts, candidates, n, marked, state[2]):
                    _change(groups, elements, level, value, -1, counts)
                    continue
            candidate_count[following] = n
            position[following] = 0
            level = following
        else:
            level -= 1
            if level == 0:
                state[0] = 0
                return EXHAUSTED
            _change(groups, elements, level, elements[level], -1, counts)


def new_state(groups, marks):
    """Fresh state arrays for :func:`difference_search` (a dict of NumPy arrays)."""
    return {
        "elements": np.zeros(marks, dtype=np.int64),
        "candidates": np.zeros((marks, groups), dtype=np.int64),
        "candidate_count": np.zeros(marks, dtype=np.int64),
        "position": np.zeros(marks, dtype=np.int64),
        "counts": np.zeros(groups, dtype=np.int64),
        "image": np.zeros(marks, dtype=np.int64),
        "marked": np.zeros(groups, dtype=np.int64),
        "state": np.zeros(4, dtype=np.int64),
    }

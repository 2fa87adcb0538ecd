"""Exhaustive search for residue sets with bounded difference multiplicity, with proof of non-existence.

:func:`exhaustive_search` decides whether ``r`` residues mod ``N`` exist whose nonzero
differences ``a_i - a_j mod N`` each occur at most ``bound`` times (``bound = 1``: a
Sidon set, a modular Golomb ruler), by a depth-first search that is complete: when it
runs to the end without a set, none exists.

Symmetry breaking.  A translate ``A + c`` and a unit multiple ``u A`` (``gcd(u, N) =
1``) of a set have the same difference multiplicities (``x -> u x`` permutes the nonzero
residues), so the search looks only for the lexicographically least sorted tuple of
each orbit of the affine group ``x -> u x + c``:

* ``a_0 = 0`` and the tuple is increasing;
* a prefix is pruned when the sorted image of the prefix under a map sending an ordered
  pair of its elements with a unit difference to ``(0, 1)`` is lexicographically
  smaller (the least tuple of an orbit is never pruned: the order statistics of the
  image of a superset are at most those of the image of the prefix); the reflection
  ``x -> -x`` is one of these maps;
* ``a_1 = 1`` when every such set has a difference that is a unit: there are at least
  ``ceil(r(r-1)/bound)`` distinct nonzero differences, so this holds when that exceeds
  the number of non-units in ``[1, N-1]``.

Forward checking: at each level the residues that still fit with the prefix are listed,
and a prefix is abandoned when fewer remain than marks are missing.  For Sidon sets two
bounds more: the marks from ``a_l`` on, with ``N``, form an integer Golomb ruler
(``N - a_l >= G(r - l + 1)``), and a Sidon set leaves exactly ``N - 1 - r(r-1)``
residues that are no difference, so a prefix that can no longer reach more of the
unused residues is abandoned.

The kernel (:mod:`._search_kernels`, numba) runs in slices of nodes so that a
wall-clock deadline is checked between slices; the result says ``"unknown"`` when the
deadline came first.

References
----------
Isomorph rejection by lexicographically least representatives ("orderly generation"):
P. Kaski and P. R. J. Östergård, *Classification Algorithms for Codes and Designs*,
Springer 2006, Ch. 4.  Modular Golomb rulers: H. Haanpää, A. Huima, P. R. J. Östergård,
"Sets in Z_n with distinct sums of pairs", Discrete Appl. Math. 138 (2004) 99-106.
"""

import math
import time
from dataclasses import dataclass

import numpy as np

from .._core import validation as check
from .._core.errors import ParameterError
from ._constructions import GOLOMB_RULERS

__all__ = ["SearchResult", "exhaustive_search", "warm_up", "MAX_SEARCH_GROUPS", "FOUND", "NONE", "UNKNOWN"]

#: Largest modulus searched (the kernel's arrays are O(r N); beyond it the tree is hopeless anyway).
MAX_SEARCH_GROUPS = 100_000
FOUND = "found"
NONE = "none"
UNKNOWN = "unknown"
# Nodes per kernel call between two reads of the clock (about 10-50 ms of work).
_NODES_PER_SLICE = 20_000
# Prefixes up to this many elements are checked against their affine images (deeper, the
# check costs more than it prunes: measured on N = 92, r = 10 and N = 111, r = 11).
_CANONICAL_DEPTH = 6


@dataclass(frozen=True)
class SearchResult:
    """Outcome of :func:`exhaustive_search`.

    ``status`` is ``"found"`` (``offsets`` holds a set, sorted, starting at 0),
    ``"none"`` (proved: no such set exists) or ``"unknown"`` (the deadline came
    first); ``nodes`` counts the residues tried, ``seconds`` the wall time.
    """

    status: str
    offsets: tuple | None
    nodes: int
    seconds: float


def _units(groups):
    """``(is_unit, inverse)`` mod ``groups``: boolean mask and inverses (0 for non-units)."""
    is_unit = np.zeros(groups, dtype=np.bool_)
    inverse = np.zeros(groups, dtype=np.int64)
    for u in range(1, groups):
        if math.gcd(u, groups) == 1:
            is_unit[u] = True
            inverse[u] = pow(u, -1, groups)
    if groups == 1:
        is_unit[0] = True
    return is_unit, inverse


def exhaustive_search(groups, marks, bound=1, *, deadline=None):
    """Find ``marks`` residues mod ``groups`` with every difference multiplicity at most ``bound``, or prove none exists.

    Parameters
    ----------
    groups : int
        The modulus ``N``, ``2 <= N <= MAX_SEARCH_GROUPS``.
    marks : int
        ``r``, ``1 <= r <= N``.
    bound : int, default 1
        Largest multiplicity allowed, ``>= 1`` (1: a Sidon set).
    deadline : float or None
        A :func:`time.perf_counter` value after which the search stops with
        ``"unknown"``; ``None``: run to the end.

    Returns
    -------
    SearchResult
        ``"found"`` with offsets verified by recount, ``"none"`` (a proof, up to the
        correctness of the search), or ``"unknown"``.

    Raises
    ------
    ParameterTypeError
        A size or the bound is not an integer.
    ParameterError
        ``N`` outside ``[2, MAX_SEARCH_GROUPS]``, ``r`` outside ``[1, N]``, ``bound < 1``.

    Notes
    -----
    Complete depth-first search with isomorph rejection under the affine group and
    forward checking (module docstring).  Time is exponential in ``r``; measured
    figures are in ``docs/layouts.md``.  The kernel compiles on first use (a few
    seconds with an empty numba cache, then loaded from the cache).
    """
    groups = check.integer("N", groups)
    marks = check.integer("r", marks)
    bound = check.integer("bound", bound)
    if not 2 <= groups <= MAX_SEARCH_GROUPS:
        raise ParameterError(f"exhaustive search: N = {groups} is outside [2, {MAX_SEARCH_GROUPS}]")
    if not 1 <= marks <= groups:
        raise ParameterError(f"exhaustive search: r = {marks} is outside [1, N = {groups}]")
    if bound < 1:
        raise ParameterError(f"exhaustive search: the multiplicity bound must be >= 1, got {bound}")
    start = time.perf_counter()
    if marks == 1:
        return SearchResult(FOUND, (0,), 0, 0.0)
    if marks * (marks - 1) > bound * (groups - 1):
        # Counting bound: r(r-1) differences on N-1 residues, each at most `bound` times.
        return SearchResult(NONE, None, 0, time.perf_counter() - start)
    from . import _search_kernels as kernels

    is_unit, inverse = _units(groups)
    distinct_differences = -(-marks * (marks - 1) // bound)
    first_is_one = distinct_differences > (groups - 1) - int(is_unit.sum())
    # a_l, ..., a_{r-1} and N (= a_0 + N) are r - l + 1 marks of an integer Golomb ruler when
    # bound = 1 (differences distinct mod N are distinct integers): N - a_l >= G(r - l + 1).
    last_place = np.full(marks, groups - 1, dtype=np.int64)
    for level in range(1, marks):
        last_place[level] = groups - (marks - level)
        if bound == 1 and marks - level + 1 in GOLOMB_RULERS:
            last_place[level] = min(last_place[level], groups - GOLOMB_RULERS[marks - level + 1][-1])
    arrays = kernels.new_state(groups, marks)
    nodes = 0
    while True:
        code = kernels.difference_search(groups, marks, bound, first_is_one, _CANONICAL_DEPTH, last_place, is_unit,
                                         inverse,
                                         arrays["elements"], arrays["candidates"], arrays["candidate_count"],
                                         arrays["position"], arrays["counts"], arrays["image"], arrays["marked"], arrays["state"],
                                         _NODES_PER_SLICE)
        nodes = int(arrays["state"][3])
        if code == kernels.FOUND:
            offsets = tuple(int(x) for x in arrays["elements"])
            _verify(offsets, groups, bound)
            return SearchResult(FOUND, offsets, nodes, time.perf_counter() - start)
        if code == kernels.EXHAUSTED:
            return SearchResult(NONE, None, nodes, time.perf_counter() - start)
        if deadline is not None and time.perf_counter() > deadline:
            return SearchResult(UNKNOWN, None, nodes, time.perf_counter() - start)


def warm_up():
    """Compile the search kernel, or load it from numba's cache; return the seconds it took (0 once loaded)."""
    global _WARM
    if _WARM:
        return 0.0
    before = time.perf_counter()
    exhaustive_search(7, 3)
    _WARM = True
    return time.perf_counter() - before


_WARM = False


def _verify(offsets, groups, bound):
    """Recount the multiplicities of a found set (guards the kernel)."""
    from ._constructions import modular_lambda

    if len(set(offsets)) != len(offsets) or modular_lambda(offsets, groups) > bound:
        from .._core.errors import SolverError

        raise SolverError(f"exhaustive search: internal check failed for N = {groups}: {offsets}")

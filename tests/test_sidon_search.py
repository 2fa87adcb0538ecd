"""Sidon layouts that exist are found, and every lambda is proved: Ruzsa sets, the exhaustive search.

The references here are written apart from the library: a plain depth-first
enumeration of residue sets containing 0 (translation is the only symmetry used) and
a plain recount of difference multiplicities.
"""

import math

import pytest

from spare_opt import ParameterError, ParameterTypeError
from spare_opt.layouts import _exhaustive
from spare_opt.layouts._constructions import candidate_sets, ruzsa_set
from spare_opt.layouts.generators import sidon

PRIMES_TO_31 = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31]


# ------------------------------------------------------------------ references
def recount_lambda(offsets, groups):
    """Largest multiplicity of a nonzero difference mod ``groups`` (all ordered pairs)."""
    counts = {}
    for a in offsets:
        for b in offsets:
            if a != b:
                d = (a - b) % groups
                counts[d] = counts.get(d, 0) + 1
    return max(counts.values(), default=0)


def least_lambda(groups, marks):
    """Least lambda over all sets of ``marks`` residues mod ``groups``: plain branch and bound.

    Sets are enumerated as increasing tuples starting at 0 (every set has a translate
    that does); a branch stops once its largest multiplicity reaches the best found.
    The counting bound ``ceil(r(r-1)/(N-1))`` only ends the search early when met.
    """
    if marks <= 1:
        return 0
    floor = -(-marks * (marks - 1) // (groups - 1))
    best = [marks]  # lambda <= r always (two rows share at most r types)
    counts = [0] * groups
    chosen = [0]

    def extend(start, worst):
        if len(chosen) == marks:
            best[0] = min(best[0], worst)
            return best[0] <= floor
        for x in range(start, groups - (marks - len(chosen)) + 1):
            new_worst = worst
            touched = []
            for a in chosen:
                for d in ((x - a) % groups, (a - x) % groups):
                    counts[d] += 1
                    touched.append(d)
                    new_worst = max(new_worst, counts[d])
            chosen.append(x)
            if new_worst < best[0] and extend(x + 1, new_worst):
                return True
            chosen.pop()
            for d in touched:
                counts[d] -= 1
        return False

    extend(1, 0)
    return best[0]


# ------------------------------------------------------------------ Ruzsa sets
@pytest.mark.parametrize("p", PRIMES_TO_31 + [37, 101])
def test_ruzsa_set_is_a_sidon_set_of_p_minus_1_residues_mod_p_p_minus_1(p):
    members = ruzsa_set(p)
    assert len(members) == len(set(members)) == p - 1
    assert all(0 <= x < p * (p - 1) for x in members)
    assert recount_lambda(members, p * (p - 1)) <= 1


def test_ruzsa_set_needs_a_prime():
    with pytest.raises(ValueError, match="prime"):
        ruzsa_set(12)


@pytest.mark.parametrize("p", [p for p in PRIMES_TO_31 if p >= 3])
def test_sidon_uses_the_ruzsa_set_at_n_p_p_minus_1(p):
    groups, marks = p * (p - 1), p - 1
    layout = sidon(groups, marks)
    meta = layout.metadata
    # A construction: milliseconds, no search (the exhaustive search is not even compiled).
    assert meta["solver_status"] == "optimal" and meta["construction"] is not None
    assert meta["lambda"] == layout.overlap() == recount_lambda(layout.offsets, groups) == 1
    if marks >= 4:  # smaller sizes are also optimal Golomb rulers or Singer/Bose sets
        assert any(description.startswith("Ruzsa set") for description, _ in candidate_sets(groups, marks))


def test_ruzsa_sets_of_a_divisor_give_fewer_marks_mod_a_multiple():
    # 7 * 6 = 42 divides 84: six marks of the Ruzsa set mod 42 are Sidon mod 84.
    found = [offsets for description, offsets in candidate_sets(84, 5) if "Ruzsa set, p = 7, mod 42" in description]
    assert found and recount_lambda(found[0], 84) <= 1 and len(found[0]) == 5


# ------------------------------------------------------------ exhaustive search
def test_a_sidon_set_mod_107_with_10_marks_is_found():
    layout = sidon(107, 10, time_limit=60)
    meta = layout.metadata
    assert meta["solver_status"] == "optimal" and meta["lambda_proved_optimal"]
    assert meta["lambda"] == layout.overlap() == recount_lambda(layout.offsets, 107) == 1


@pytest.mark.parametrize("groups,marks", [(59, 8), (92, 10), pytest.param(119, 11, marks=pytest.mark.slow)])
def test_no_sidon_set_is_proved_and_lambda_2_is_optimal(groups, marks):
    assert marks * (marks - 1) <= groups - 1  # the counting bound does not decide these
    layout = sidon(groups, marks, time_limit=120)
    meta = layout.metadata
    assert meta["solver_status"] == "fallback" and "exhaustive search proved" in meta["reason"]
    assert meta["lambda"] == meta["lambda_lower_bound"] == 2 and meta["lambda_proved_optimal"]
    assert layout.overlap() == recount_lambda(layout.offsets, groups) == 2


@pytest.mark.parametrize("marks", [2, 3, 4, 5, 6])
def test_status_agrees_with_brute_force_up_to_three_times_the_counting_bound(marks):
    for groups in range(marks, 3 * marks * (marks - 1) + 1):
        layout = sidon(groups, marks, time_limit=60)
        meta = layout.metadata
        least = least_lambda(groups, marks)
        where = f"N = {groups}, r = {marks}: {meta}"
        assert meta["lambda"] == layout.overlap() == least, where
        assert meta["lambda_proved_optimal"] and meta["lambda_lower_bound"] == least, where
        assert meta["solver_status"] == ("optimal" if least <= 1 else "fallback"), where


@pytest.mark.parametrize("groups,marks", [(22, 5), (33, 6), (34, 6), (31, 6), (45, 7), (48, 7), (57, 8)])
def test_exhaustive_search_decides_sidon_existence_like_the_brute_force(groups, marks):
    result = _exhaustive.exhaustive_search(groups, marks)
    exists = least_lambda(groups, marks) <= 1 if groups <= 40 else None
    if exists is not None:
        assert (result.status == _exhaustive.FOUND) == exists
    if result.status == _exhaustive.FOUND:
        assert result.offsets[0] == 0 and recount_lambda(result.offsets, groups) <= 1


@pytest.mark.parametrize("groups,marks,bound", [(16, 6, 2), (16, 6, 3), (20, 8, 3), (13, 5, 2), (24, 9, 4)])
def test_exhaustive_search_with_a_bound_above_1_agrees_with_brute_force(groups, marks, bound):
    result = _exhaustive.exhaustive_search(groups, marks, bound)
    assert result.status in (_exhaustive.FOUND, _exhaustive.NONE)
    if groups <= 20:
        assert (result.status == _exhaustive.FOUND) == (least_lambda(groups, marks) <= bound)
    if result.status == _exhaustive.FOUND:
        assert len(set(result.offsets)) == marks and recount_lambda(result.offsets, groups) <= bound


def test_exhaustive_search_stops_at_its_deadline_without_a_claim():
    # r = 13 near its density limit: far beyond a deadline already passed.
    result = _exhaustive.exhaustive_search(160, 13, deadline=0.0)
    assert result.status in (_exhaustive.UNKNOWN, _exhaustive.FOUND)
    if result.status == _exhaustive.FOUND:
        assert recount_lambda(result.offsets, 160) <= 1


@pytest.mark.parametrize("groups,marks,bound,error", [
    (1, 1, 1, ParameterError), (10, 11, 1, ParameterError), (10, 0, 1, ParameterError), (10, 3, 0, ParameterError),
    (10.5, 3, 1, ParameterTypeError), (10, "3", 1, ParameterTypeError),
])
def test_exhaustive_search_rejects_bad_sizes(groups, marks, bound, error):
    with pytest.raises(error):
        _exhaustive.exhaustive_search(groups, marks, bound)


def test_counting_bound_settles_without_search():
    result = _exhaustive.exhaustive_search(20, 6)  # 30 differences on 19 residues
    assert result.status == _exhaustive.NONE and result.nodes == 0
    assert math.ceil(6 * 5 / 19) == 2

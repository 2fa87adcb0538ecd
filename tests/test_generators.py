"""Tests of the layout generators: invariants, Sidon property, lambda, determinism, constructions.

Every claim a generator makes is checked against a plain-Python reference here:
layer permutations and row distinctness by sets, lambda by comparing all pairs of
groups, Sidon existence and the least lambda by enumerating all offset sets.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spare_opt import ParameterError, ParameterTypeError
from spare_opt.layouts._constructions import (
    GOLOMB_RULERS,
    bose_set,
    candidate_sets,
    canonical_offsets,
    modular_lambda,
    singer_set,
)
from spare_opt.layouts import generators
from spare_opt.layouts.generators import METHODS, block, consecutive, generate, random_latin, sidon

# Optimal Golomb ruler lengths, OEIS A003022 (independent of the table's last marks).
OPTIMAL_LENGTHS = [0, 1, 3, 6, 11, 17, 25, 34, 44, 55, 72, 85, 106, 127, 151, 177, 199, 216, 246, 283,
                   333, 356, 372, 425, 480, 492, 553, 585]
SMALL_PRIME_POWERS = [2, 3, 4, 5, 7, 8, 9, 11, 13, 16, 17, 19, 23, 25, 27, 29, 31, 32]


# ------------------------------------------------------------------ references
def check_invariants(layout, groups, redundancy):
    """The SPARe invariants, checked by plain sets (not by Layout.validate)."""
    stacks = layout.stacks
    assert stacks.shape == (groups, redundancy)
    assert stacks.dtype == np.int32
    for row in stacks.tolist():
        assert len(set(row)) == redundancy
    for layer in range(redundancy):
        assert sorted(stacks[:, layer].tolist()) == list(range(groups))
    if layout.offsets is not None:
        for g in range(groups):
            assert stacks[g].tolist() == [(g + o) % groups for o in layout.offsets]


def brute_overlap(stacks):
    sets = [set(row) for row in stacks.tolist()]
    return max((len(a & b) for i, a in enumerate(sets) for b in sets[i + 1:]), default=0)


def brute_lambda(offsets, groups):
    counts = {}
    for a in offsets:
        for b in offsets:
            if a != b:
                d = (a - b) % groups
                counts[d] = counts.get(d, 0) + 1
    return max(counts.values(), default=0)


def brute_min_lambda(groups, redundancy):
    """Least lambda over all offset sets containing 0 (translation invariance)."""
    return min(brute_lambda((0,) + rest, groups) for rest in itertools.combinations(range(1, groups), redundancy - 1))


sizes = st.integers(1, 24).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n)))


# ------------------------------------------------------------- simple layouts
@given(sizes)
def test_consecutive_invariants_and_lambda(size):
    n, r = size
    layout = consecutive(n, r)
    check_invariants(layout, n, r)
    assert layout.method == "consecutive"
    assert layout.offsets == tuple(range(r))
    assert layout.metadata["lambda"] == layout.overlap() == (brute_overlap(layout.stacks) if n > 1 else 0)


@given(sizes)
def test_block_invariants_and_lambda(size):
    n, r = size
    if n % r:
        with pytest.raises(ParameterError, match="r to divide N"):
            block(n, r)
        return
    layout = block(n, r)
    check_invariants(layout, n, r)
    for g in range(n):
        # The whole block holds the same r shard types.
        assert set(layout.stacks[g].tolist()) == set(range((g // r) * r, (g // r + 1) * r))
    assert layout.metadata["lambda"] == layout.overlap() == (brute_overlap(layout.stacks) if n > 1 else 0)


@given(sizes, st.integers(0, 2**32))
def test_random_latin_invariants(size, seed):
    n, r = size
    layout = random_latin(n, r, seed=seed)
    check_invariants(layout, n, r)
    assert layout.method == "random" and layout.offsets is None


@pytest.mark.parametrize("n,r", [(6, 6), (7, 6), (9, 8), (12, 11), (40, 39)])
def test_random_latin_near_full_uses_exact_completion(n, r):
    for seed in range(5):
        check_invariants(random_latin(n, r, seed=seed), n, r)


def test_random_latin_is_deterministic_for_a_seed():
    a, b, c = random_latin(60, 7, seed=11), random_latin(60, 7, seed=11), random_latin(60, 7, seed=12)
    assert np.array_equal(a.stacks, b.stacks)
    assert not np.array_equal(a.stacks, c.stacks)


def test_random_latin_large_n():
    layout = random_latin(100_000, 17, seed=0)
    assert layout.stacks.shape == (100_000, 17)  # the constructor validated the invariants


# ----------------------------------------------------------------- arguments
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "n,r,error,needle",
    [(0, 1, ParameterError, "N must be >= 1"), (5, 0, ParameterError, "r must be >= 1"),
     (3, 4, ParameterError, "r must be <= N"), (2.5, 1, ParameterTypeError, "integer"),
     (5, "2", ParameterTypeError, "integer"), (True, 1, ParameterTypeError, "integer")],
)
def test_bad_sizes_raise_parameter_error(method, n, r, error, needle):
    with pytest.raises(error, match=needle):
        generate(method, n, r, time_limit=1)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("n,r", [(1, 1), (5, 1), (5, 5), (8, 8)])
def test_edge_sizes(method, n, r):
    layout = generate(method, n, r, time_limit=1)
    check_invariants(layout, n, r)
    assert layout.overlap() == (brute_overlap(layout.stacks) if n > 1 else 0)


def test_unknown_method():
    with pytest.raises(ParameterError, match="layout method must be one of .*got 'golomb'"):
        generate("golomb", 10, 3)
    with pytest.raises(ParameterTypeError, match="layout method"):
        generate(None, 10, 3)


@pytest.mark.parametrize(
    "kwargs,error,needle",
    [({"time_limit": 0}, ParameterError, "time limit must be > 0"),
     ({"time_limit": float("nan")}, ParameterError, "time limit must be finite"),
     ({"time_limit": "1"}, ParameterTypeError, "number"),
     ({"seed": 1.5}, ParameterTypeError, "seed"), ({"seed": -1}, ParameterError, "seed"),
     ({"workers": 0}, ParameterError, "workers"), ({"workers": -2}, ParameterError, "workers"),
     ({"workers": 1.0}, ParameterTypeError, "workers")],
)
def test_bad_sidon_arguments(kwargs, error, needle):
    with pytest.raises(error, match=needle):
        sidon(20, 4, **kwargs)


def test_random_latin_rejects_negative_seed():
    with pytest.raises(ParameterError, match="seed must be >= 0"):
        random_latin(10, 3, seed=-5)


def test_block_error_names_the_problem():
    with pytest.raises(ParameterError, match="N = 10 is not a multiple of r = 4"):
        block(10, 4)


# ----------------------------------------------------------------------- Sidon
@pytest.mark.parametrize("n", range(2, 23))
@pytest.mark.parametrize("r", [2, 3, 4, 5])
def test_sidon_matches_brute_force(n, r):
    if r > n:
        return
    layout = sidon(n, r, time_limit=2)
    check_invariants(layout, n, r)
    meta = layout.metadata
    overlap = brute_overlap(layout.stacks)
    assert meta["lambda"] == overlap == layout.overlap() == brute_lambda(layout.offsets, n)
    least = brute_min_lambda(n, r)
    if least <= 1:
        # A Sidon set exists: it must be found (constructions or CP-SAT, well within 2 s here).
        assert meta["solver_status"] == "optimal" and overlap <= 1
    else:
        assert meta["solver_status"] == "fallback" and overlap >= least
        assert meta["lambda_lower_bound"] <= least
    if meta["lambda_proved_optimal"]:
        assert overlap == least


# (16, 6), (17, 6): CP-SAT proves lambda = 3 above the counting bound 2.
@pytest.mark.parametrize(
    "n,r", [(10, 7), (11, 8), (12, 9), (9, 6), (12, 6), (14, 6), (11, 5), (15, 7), (16, 6), (17, 6)]
)
def test_fallback_lambda_is_least_on_small_cases(n, r):
    layout = sidon(n, r, time_limit=3)
    meta = layout.metadata
    assert meta["solver_status"] == "fallback"
    assert "no Sidon set exists" in meta["reason"]
    assert meta["lambda"] == layout.overlap() == brute_overlap(layout.stacks)
    assert meta["lambda_lower_bound"] <= meta["lambda"]
    least = brute_min_lambda(n, r)
    assert meta["lambda"] >= least
    if meta["lambda_proved_optimal"]:
        assert meta["lambda"] == least == meta["lambda_lower_bound"]


def test_exhaustive_search_proves_lambda_above_the_counting_bound():
    meta = sidon(16, 6, time_limit=5).metadata
    assert "exhaustive search 3 proved" in meta["search"] and meta["lambda_proved_optimal"]
    assert meta["lambda"] == 3 == meta["lambda_lower_bound"] == brute_min_lambda(16, 6) > math.ceil(6 * 5 / 15)


def _without_exhaustive_search(monkeypatch):
    """Send sidon down its CP-SAT path (the one large N and r take)."""
    monkeypatch.setattr(generators, "MAX_EXHAUSTIVE_GROUPS", 0)
    monkeypatch.setattr(generators, "MAX_EXHAUSTIVE_MARKS", 0)


def test_cp_sat_proves_lambda_above_the_counting_bound(monkeypatch):
    _without_exhaustive_search(monkeypatch)
    meta = sidon(16, 6, time_limit=5).metadata
    assert meta["cp_sat_status"] == "OPTIMAL" and meta["lambda_proved_optimal"]
    assert meta["lambda"] == 3 == brute_min_lambda(16, 6) > math.ceil(6 * 5 / 15)


def test_fallback_without_time_for_the_solver_keeps_a_valid_heuristic():
    layout = sidon(60, 20, time_limit=0.01)
    meta = layout.metadata
    assert meta["solver_status"] == "fallback"
    assert meta["lambda"] == layout.overlap()
    assert meta["lambda"] >= meta["lambda_lower_bound"] == math.ceil(20 * 19 / 59)


def test_sidon_is_deterministic_for_a_seed():
    def strip(layout):
        return {k: v for k, v in layout.metadata.items() if k != "solve_seconds"}

    # All end before the time limit (bound, Singer, Golomb ruler, CP-SAT proof): reproducible.
    for n, r in [(12, 6), (31, 6), (45, 6), (16, 6)]:
        first, second = sidon(n, r, time_limit=5, seed=3), sidon(n, r, time_limit=5, seed=3)
        assert first.offsets == second.offsets and strip(first) == strip(second)


def test_sidon_with_several_workers_is_deterministic(monkeypatch):
    # Without the exhaustive search, (16, 6) needs CP-SAT (interleaved search with 2
    # workers) to prove lambda = 3.
    _without_exhaustive_search(monkeypatch)
    first, second = sidon(16, 6, time_limit=5, workers=2), sidon(16, 6, time_limit=5, workers=2)
    assert first.metadata["workers"] == 2 and first.metadata["cp_sat_status"] == "OPTIMAL"
    assert first.overlap() == first.metadata["lambda"] == 3
    assert first.offsets == second.offsets


@pytest.mark.parametrize(
    "n,r,source",
    [(381, 20, "Singer"), (762, 20, "Singer"), (600, 20, "Golomb"), (1000, 10, "Golomb"), (100_000, 17, "Golomb"),
     (168, 13, "Bose"), (5000, 40, "Singer set q = 41"), (273, 17, "Singer difference set, q = 16"),
     (80, 9, "Bose set, q = 9"), (546, 16, "Singer difference set, q = 16, mod 273")],
)
def test_known_constructions_give_sidon_layouts(n, r, source):
    layout = sidon(n, r, time_limit=1)
    meta = layout.metadata
    assert meta["solver_status"] == "optimal"
    assert source in meta["construction"]
    assert layout.overlap() == meta["lambda"] == 1
    assert modular_lambda(layout.offsets, n) == brute_lambda(layout.offsets, n) == 1


# ---------------------------------------------------------------- constructions
def test_golomb_table_rulers_are_optimal_length_golomb_rulers():
    for marks, ruler in GOLOMB_RULERS.items():
        assert len(ruler) == marks and ruler[0] == 0 and list(ruler) == sorted(set(ruler))
        diffs = [b - a for a, b in itertools.combinations(ruler, 2)]
        assert len(diffs) == len(set(diffs))
        assert ruler[-1] == OPTIMAL_LENGTHS[marks - 1]


@pytest.mark.parametrize("marks", sorted(GOLOMB_RULERS))
def test_golomb_ruler_is_sidon_mod_every_n_above_twice_its_length(marks):
    ruler = GOLOMB_RULERS[marks]
    for n in range(2 * ruler[-1] + 1, 2 * ruler[-1] + 40):
        assert brute_lambda(ruler, n) <= 1


@pytest.mark.parametrize("q", SMALL_PRIME_POWERS)
def test_singer_sets_are_perfect_difference_sets(q):
    members = singer_set(q)
    modulus = q * q + q + 1
    assert len(members) == q + 1 and all(0 <= m < modulus for m in members)
    diffs = sorted((a - b) % modulus for a in members for b in members if a != b)
    assert diffs == list(range(1, modulus))  # every nonzero residue exactly once


@pytest.mark.parametrize("q", SMALL_PRIME_POWERS)
def test_bose_sets_are_sidon(q):
    members = bose_set(q)
    assert len(members) == q
    assert brute_lambda(members, q * q - 1) == 1


def test_constructions_reject_non_prime_powers():
    with pytest.raises(ValueError):
        singer_set(6)
    with pytest.raises(ValueError):
        bose_set(12)


def test_sidon_mod_a_divisor_is_sidon_mod_the_multiple():
    members = singer_set(5)  # mod 31
    for multiple in (31, 62, 93, 310):
        assert brute_lambda(members, multiple) == 1


def test_a_sidon_set_mod_m_is_not_sidon_mod_an_unrelated_n():
    # Why candidates are verified: Singer mod 31 read mod 32 has repeated differences.
    assert brute_lambda(singer_set(5), 32) > 1


@pytest.mark.parametrize("n,r", [(31, 6), (62, 6), (48, 7), (381, 20), (200, 14), (5000, 40)])
def test_candidates_are_well_formed(n, r):
    for description, offsets in candidate_sets(n, r):
        assert isinstance(description, str)
        assert len(offsets) == r == len(set(offsets)) and offsets[0] == 0
        assert modular_lambda(offsets, n) == brute_lambda(offsets, n)


@given(st.integers(2, 40).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1), min_size=1))))
def test_canonical_offsets_keep_lambda_and_symmetry_breaking(case):
    n, members = case
    canon = canonical_offsets(sorted(members), n)
    assert len(canon) == len(members) and canon[0] == 0 and list(canon) == sorted(canon)
    assert brute_lambda(canon, n) == brute_lambda(sorted(members), n)
    if len(canon) >= 2:
        gaps = np.diff(list(canon) + [n])
        assert gaps[-1] == gaps.max()  # the wrap-around gap is a largest gap
    if len(canon) >= 3:
        assert canon[1] - canon[0] <= canon[-1] - canon[-2]


@settings(max_examples=30)
@given(st.integers(2, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))), st.integers(0, 3))
def test_sidon_layout_is_valid_and_lambda_is_honest(size, seed):
    n, r = size
    layout = sidon(n, r, time_limit=0.3, seed=seed)
    check_invariants(layout, n, r)
    meta = layout.metadata
    assert meta["lambda"] == layout.overlap() == (brute_overlap(layout.stacks) if n > 1 else 0)
    assert meta["solver_status"] in ("optimal", "feasible", "fallback")
    assert (meta["solver_status"] == "optimal") == (meta["lambda"] <= 1)
    assert meta["lambda_lower_bound"] <= meta["lambda"]
    assert meta["seed"] == seed and meta["solve_seconds"] >= 0


@settings(max_examples=25)
@given(st.integers(8, 60), st.integers(0, 10**6), st.data())
def test_local_search_meets_its_target_when_it_succeeds(groups, seed, data):
    from spare_opt.layouts.generators import _local_search

    marks = data.draw(st.integers(3, max(3, groups // 2)))
    start = sorted(data.draw(st.sets(st.integers(0, groups - 1), min_size=marks, max_size=marks)))
    target = max(1, brute_lambda(start, groups) - 1)
    found = _local_search(groups, marks, target, start, seed, deadline=float("inf"), iterations=300)
    again = _local_search(groups, marks, target, start, seed, deadline=float("inf"), iterations=300)
    if found is None:
        assert again is None
        return
    assert np.array_equal(found, again)  # deterministic for a seed
    assert len(set(found.tolist())) == marks and brute_lambda(found.tolist(), groups) <= target


def test_a_sidon_set_found_by_local_search_is_reported_optimal(monkeypatch):
    # N = 86, r = 9: no construction applies; when the CP-SAT search for a Sidon set is
    # cut short, the local search reaches lambda 1 and the status must still be optimal.
    # (This used to cut CP-SAT short with time_limit=0.05, which left the local search
    # no time at all on a loaded machine; the cut is now simulated, the budget ample.)
    from spare_opt.layouts import generators

    real = generators._solve_difference_model

    def cut_short(groups, marks, deadline, seed, workers, sidon_only, **kwargs):
        if sidon_only:
            return generators._SolveResult(None, None, "UNKNOWN", False, 0.0)
        return real(groups, marks, deadline, seed, workers, sidon_only, **kwargs)

    monkeypatch.setattr(generators, "_solve_difference_model", cut_short)
    _without_exhaustive_search(monkeypatch)  # it would find the set first
    layout = sidon(86, 9, time_limit=30)
    meta = layout.metadata
    assert meta["search"] == "greedy 2, local search 1" and "local search then found a Sidon set" in meta["reason"]
    assert meta["solver_status"] == "optimal" and meta["lambda"] == layout.overlap() == 1
    assert brute_lambda(layout.offsets, 86) == 1


@pytest.mark.parametrize("sidon_only", [True, False])
def test_cp_sat_model_size_does_not_grow_with_n(sidon_only):
    from spare_opt.layouts.generators import _difference_model

    marks = 7
    sizes = []
    for groups in (50, 100_000):
        hint = canonical_offsets(GOLOMB_RULERS[marks], groups)
        upper = max(2, modular_lambda(hint, groups))
        model, offsets = _difference_model(groups, marks, sidon_only, hint=hint, upper=upper, lower=1)
        proto = model.proto
        sizes.append((len(proto.variables), len(proto.constraints)))
        assert len(offsets) == marks
    assert sizes[0] == sizes[1]
    variables = sizes[0][0]
    pairs = marks * (marks - 1) // 2
    # offsets + differences (+ lambda and one copy index per residue when minimising)
    assert variables == marks + pairs + (0 if sidon_only else 1 + 2 * pairs)

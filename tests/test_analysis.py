"""Worst-case tools (spare_opt.guarantees.worst_case) and Monte-Carlo (spare_opt.guarantees.montecarlo) against brute force.

The reference here is an independent bitmask brute force of Hall's condition:
``S*(F) = max over non-empty sets T of shard types of ceil(|T| / |live holders of T|)``,
evaluated over every subset ``T`` (``N <= 12``), and the worst case is the maximum of it
over every failure set of a given size.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spare_opt import Layout, block, consecutive, random_latin, sidon, theory
from spare_opt import (
    stack_number_certificate,
    min_wipe_out_set,
    monte_carlo,
    sweep,
    worst_case_after_one_failure,
    worst_case_profile,
    worst_case_stack_number,
)
from spare_opt._core.errors import FailureSetError, ParameterError, ParameterTypeError


# ---------------------------------------------------------------- brute force
class BruteForce:
    """All subsets ``T`` of shard types as bitmasks, with the holder mask of each."""

    def __init__(self, layout):
        stacks = layout.stacks
        self.n, self.r = stacks.shape
        n = self.n
        holder_mask = np.zeros(n, dtype=np.int64)
        for g in range(n):
            for t in stacks[g]:
                holder_mask[t] |= 1 << g
        subsets = np.arange(1 << n, dtype=np.int64)
        # union[T] = holders of T, by dynamic programming over the lowest bit of T.
        union = np.zeros(1 << n, dtype=np.int64)
        for mask in range(1, 1 << n):
            low = mask & -mask
            union[mask] = union[mask ^ low] | holder_mask[low.bit_length() - 1]
        self.union = union[1:]
        self.size = np.bitwise_count(subsets[1:]).astype(np.int64)

    def stack_number(self, failed):
        """``S*`` after ``failed`` (an iterable of groups), ``None`` on a wipe-out."""
        fail_mask = 0
        for g in failed:
            fail_mask |= 1 << int(g)
        live = np.bitwise_count(self.union & ~fail_mask).astype(np.int64)
        if (live == 0).any():
            return None
        return int((-(-self.size // live)).max())

    def worst_case(self, k):
        """Largest ``S*`` over masked failure sets of size ``k`` (``None`` if none is masked)."""
        values = [self.stack_number(f) for f in itertools.combinations(range(self.n), k)]
        values = [v for v in values if v is not None]
        return max(values) if values else None


def small_layouts():
    return [
        sidon(10, 3, time_limit=5, seed=0),
        consecutive(10, 3),
        block(10, 2),
        random_latin(10, 3, seed=1),
        consecutive(9, 4),
        Layout(np.array([[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [5, 3]]), method="custom"),
    ]


# ---------------------------------------------------------------- S* and its certificate
def _check_certificate(layout, failed, s, types, holders):
    n = layout.groups
    alive = np.ones(n, dtype=bool)
    alive[list(failed)] = False
    expected = {int(g) for g in np.flatnonzero(alive) if set(layout.stacks[g]) & set(types.tolist())}
    assert set(holders.tolist()) == expected, "hall_holders are not the live holders of hall_types"
    assert types.size > (s - 1) * holders.size, "the certificate does not violate Hall at S* - 1"


@given(st.integers(4, 10), st.integers(1, 4), st.integers(0, 10_000), st.data())
def test_least_stack_number_matches_brute_force(n, r, seed, data):
    r = min(r, n)
    layout = random_latin(n, r, seed=seed)
    brute = BruteForce(layout)
    k = data.draw(st.integers(0, n))
    failed = data.draw(st.permutations(range(n)))[:k]
    s, types, holders = stack_number_certificate(layout, failed)
    assert s == brute.stack_number(failed)
    if s is None:
        lost = [t for t in range(n) if all(g in failed for g in np.flatnonzero((layout.stacks == t).any(axis=1)))]
        assert types.tolist() == lost
    else:
        assert theory.stack_lower_bound(n, k) <= s <= r
        _check_certificate(layout, failed, s, types, holders)


def test_least_stack_number_rejects_bad_failure_sets():
    layout = consecutive(8, 2)
    with pytest.raises(FailureSetError):
        stack_number_certificate(layout, [1, 1])
    with pytest.raises(FailureSetError):
        stack_number_certificate(layout, [8])


# ---------------------------------------------------------------- guarantees
@pytest.mark.parametrize("layout", small_layouts(), ids=lambda lay: f"{lay.method}-{lay.groups}-{lay.redundancy}")
def test_min_wipe_out_set_is_smallest(layout):
    brute = BruteForce(layout)
    shard, groups = min_wipe_out_set(layout)
    assert groups.size == layout.redundancy
    assert brute.stack_number(groups) is None
    assert all((layout.stacks[g] == shard).any() for g in groups)
    # No set of r - 1 failures wipes out: the guaranteed tolerance.
    for failed in itertools.combinations(range(layout.groups), layout.redundancy - 1):
        assert brute.stack_number(failed) is not None


@pytest.mark.parametrize("layout", small_layouts() + [consecutive(5, 1)],
                         ids=lambda lay: f"{lay.method}-{lay.groups}-{lay.redundancy}")
def test_worst_case_after_one_failure_matches_brute_force(layout):
    brute = BruteForce(layout)
    values = [brute.stack_number([g]) for g in range(layout.groups)]
    result = worst_case_after_one_failure(layout)
    if any(v is None for v in values):
        assert result["stack_number"] is None and result["status"] == "wipe-out"
    else:
        assert result["stack_number"] == max(values)
        assert brute.stack_number([result["group"]]) == result["stack_number"]


@pytest.mark.parametrize("layout", small_layouts(), ids=lambda lay: f"{lay.method}-{lay.groups}-{lay.redundancy}")
def test_exact_worst_case_matches_brute_force(layout):
    brute = BruteForce(layout)
    n, r = layout.groups, layout.redundancy
    for k in range(0, n + 1):
        result = worst_case_stack_number(layout, k, method="cp-sat", time_limit=20)
        expected = brute.worst_case(k)
        assert result.exact
        assert result.stack_number == expected, f"k={k}"
        assert result.wipe_out_reachable == (k >= r)
        if expected is None:
            assert result.status == "no-masked-set"
            continue
        assert result.failure_set.size == k
        assert brute.stack_number(result.failure_set) == expected
        _check_certificate(layout, result.failure_set, expected, result.hall_types, result.hall_holders)


def test_exact_worst_case_on_twelve_groups():
    layout = consecutive(12, 3)
    brute = BruteForce(layout)
    for k in (2, 3, 4, 5):
        result = worst_case_stack_number(layout, k)
        assert result.method == "cp-sat" and result.exact
        assert result.stack_number == brute.worst_case(k)


@pytest.mark.parametrize("layout", small_layouts()[:4], ids=lambda lay: f"{lay.method}-{lay.groups}-{lay.redundancy}")
def test_local_search_is_a_valid_lower_bound(layout):
    brute = BruteForce(layout)
    for k in range(1, layout.groups - 2):
        result = worst_case_stack_number(layout, k, method="local-search", seed=3, iterations=60)
        expected = brute.worst_case(k)
        assert result.method == "local-search"
        # Local search only gives lower bounds, except k = 1 where S* = c(1) is proved.
        assert result.exact == (k == 1 and result.stack_number == expected == 2)
        if result.stack_number is None:
            continue
        assert theory.stack_lower_bound(layout.groups, k) <= result.stack_number <= expected
        assert result.failure_set.size == k
        assert brute.stack_number(result.failure_set) == result.stack_number
        _check_certificate(layout, result.failure_set, result.stack_number, result.hall_types, result.hall_holders)


def test_local_search_finds_the_consecutive_worst_case():
    # Consecutive r = 4 on 40 groups: failing 5 consecutive groups leaves one live holder
    # for two types; the adversary forces S* = 3 (checked exactly on the same layout).
    layout = consecutive(40, 4)
    exact = worst_case_stack_number(layout, 6, method="cp-sat")
    found = worst_case_stack_number(layout, 6, method="local-search", seed=0)
    assert exact.exact and exact.stack_number >= 3
    assert found.stack_number == exact.stack_number


def test_worst_case_profile_and_arguments():
    layout = sidon(13, 4, time_limit=5)
    profile = worst_case_profile(layout)
    assert [w.failed_count for w in profile] == [1, 2, 3]
    assert all(w.exact and not w.wipe_out_reachable for w in profile)
    with pytest.raises(ParameterError):
        worst_case_stack_number(layout, 14)
    with pytest.raises(ParameterError):
        worst_case_stack_number(layout, 2, method="magic")
    with pytest.raises(ParameterError):
        worst_case_profile(layout, max_failed=-1)


# ---------------------------------------------------------------- Monte-Carlo
def _reference_trial(layout, seed, trial):
    """Masked count and mean S of one trial, recomputed with the max-flow reference."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(trial,)))
    order = rng.permutation(layout.groups)
    values = [1]
    for k in range(1, layout.groups + 1):
        s, _types, _holders = stack_number_certificate(layout, order[:k].tolist())
        if s is None:
            return k - 1, float(np.mean(values))
        values.append(s)
    raise AssertionError("no wipe-out after every group failed")


@pytest.mark.parametrize("make", [lambda: sidon(31, 4, time_limit=5), lambda: consecutive(30, 3), lambda: block(30, 3)])
def test_monte_carlo_trials_match_reference(make):
    layout = make()
    result = monte_carlo(layout, trials=12, seed=5)
    for trial in range(12):
        masked, sbar = _reference_trial(layout, 5, trial)
        assert result.masked[trial] == masked
        assert result.sbar_per_trial[trial] == pytest.approx(sbar)
    assert result.mu == pytest.approx(result.masked.mean())
    assert result.survivors_by_k[0] == 12
    assert result.stack_mean_by_k[0] == 1.0


def test_monte_carlo_same_for_any_workers_and_chunks():
    layout = sidon(31, 4, time_limit=5)
    one = monte_carlo(layout, trials=40, seed=11, workers=1)
    two = monte_carlo(layout, trials=40, seed=11, workers=2, chunk_size=7)
    assert np.array_equal(one.masked, two.masked)
    assert np.array_equal(one.sbar_per_trial, two.sbar_per_trial)
    assert np.array_equal(one.survivors_by_k, two.survivors_by_k)
    assert one.mu_ci95 == two.mu_ci95 and one.sbar_ci95 == two.sbar_ci95
    other = monte_carlo(layout, trials=40, seed=12)
    assert not np.array_equal(one.masked, other.masked)


def test_monte_carlo_confidence_intervals_and_json():
    layout = sidon(61, 5, time_limit=5)
    calls = []
    result = monte_carlo(layout, trials=60, seed=0, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (60, 60) and all(total == 60 for _done, total in calls)
    assert [done for done, _total in calls] == sorted({done for done, _total in calls})  # cumulative, increasing
    low, high = result.mu_ci95
    assert low < result.mu < high
    half = (high - low) / 2
    assert half == pytest.approx(2.0 * result.masked.std(ddof=1) / math.sqrt(60), rel=0.03)
    assert result.sbar_ci95[0] < result.sbar < result.sbar_ci95[1]
    assert result.closed_form_mu == pytest.approx(theory.mu(61, 5))
    assert result.mu_relative_error == pytest.approx((result.closed_form_mu - result.mu) / result.mu)
    doc = result.to_dict()
    for key in ("mu", "mu_ci95", "sbar", "sbar_ci95"):
        assert key in doc["monte_carlo"]
    assert doc["closed_form"]["sbar"] == pytest.approx(theory.sbar_lower_bound(61, 5))
    single = monte_carlo(layout, trials=1, seed=0)
    assert math.isnan(single.mu_ci95[0]) and single.to_dict()["monte_carlo"]["mu_ci95"] == [None, None]


@pytest.mark.parametrize("kwargs, error", [
    ({"trials": 0}, ParameterError),
    ({"seed": -1}, ParameterError),
    ({"workers": 0}, ParameterError),
    ({"workers": -2}, ParameterError),
    ({"chunk_size": 0}, ParameterError),
    ({"trials": 2.5}, ParameterTypeError),
    ({"seed": "x"}, ParameterTypeError),
])
def test_monte_carlo_bad_arguments(kwargs, error):
    with pytest.raises(error) as info:
        monte_carlo(consecutive(10, 2), **kwargs)
    assert type(info.value) is error


# ---------------------------------------------------------------- sweep
def test_sweep_rows_skips_and_common_orders():
    result = sweep(10, r_min=2, r_max=4, methods=("consecutive", "block"), trials=8, seed=2, time_limit=2,
                   system_mtbf_seconds=1e6)
    got = {(row["method"], row["redundancy"]) for row in result.rows}
    assert got == {("consecutive", 2), ("consecutive", 3), ("consecutive", 4), ("block", 2)}
    assert {(s["method"], s["redundancy"]) for s in result.skipped} == {("block", 3), ("block", 4)}
    assert all("does not divide" in s["reason"] for s in result.skipped)
    row = result.rows[0]
    assert row["j_closed_form"] == pytest.approx(theory.normalised_ttt(10, 2, system_mtbf_seconds=1e6))
    a_mc = theory.availability(60, 3600, row["mu"] * 1e6)
    assert row["j_monte_carlo"] == pytest.approx(row["sbar"] / a_mc)
    direct = monte_carlo(consecutive(10, 3), trials=8, seed=2)
    again = next(r for r in result.rows if (r["method"], r["redundancy"]) == ("consecutive", 3))
    assert again["mu"] == pytest.approx(direct.mu) and again["sbar"] == pytest.approx(direct.sbar)
    assert result.parameters["system_mtbf_seconds"] == 1e6 and "mtbf_seconds" not in result.parameters


def test_sweep_progress_is_cumulative_over_the_whole_sweep():
    calls = []
    sweep(10, r_min=2, r_max=3, methods=("consecutive", "block"), trials=5, seed=1,
          progress=lambda done, total: calls.append((done, total)))
    # 4 combinations of 5 trials (block r = 3 is skipped but counted in the total)
    assert {total for _done, total in calls} == {20} and calls[-1] == (20, 20)
    done = [d for d, _total in calls]
    assert done == sorted(done) and done[0] >= 1


def test_sweep_default_r_max_stops_at_the_cluster_size():
    """The default range is the paper's r = 2 .. 20 cut at r = N; an explicit r_max > N is still refused."""
    result = sweep(5, methods=("consecutive",), trials=2, seed=0)
    assert sorted(row["redundancy"] for row in result.rows) == [2, 3, 4, 5]
    assert result.parameters["r_max"] == 5
    # was: "need r_min <= r_max, got r_min=2, r_max=1" for an r_max never given
    with pytest.raises(ParameterError, match="r_min=2 is above N = 1: a group holds r <= N shard types"):
        sweep(1, trials=2)
    with pytest.raises(ParameterError, match="r_min=25 is above the default r_max = 20: give r_max"):
        sweep(30, r_min=25, trials=2)


@pytest.mark.parametrize("kwargs", [{"r_min": 5, "r_max": 4}, {"r_max": 11}, {"methods": ("nope",)}, {"methods": ()},
                                    {"system_mtbf_seconds": 0}])
def test_sweep_bad_arguments(kwargs):
    with pytest.raises(ParameterError):
        sweep(10, **{"r_min": 2, "r_max": 3, "trials": 2, **kwargs})

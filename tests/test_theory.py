"""Closed forms of spare_opt.guarantees.theory against values computed by hand."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spare_opt import theory
from spare_opt.simulation import parameters
from spare_opt._core.errors import ParameterError, ParameterTypeError
from spare_opt.simulation.parameters import PAPER


def test_stack_lower_bound_by_hand():
    # 600 / (600 - 300) = 2 exactly; one more failure needs a third layer somewhere.
    assert theory.stack_lower_bound(600, 0) == 1
    assert theory.stack_lower_bound(600, 1) == 2
    assert theory.stack_lower_bound(600, 300) == 2
    assert theory.stack_lower_bound(600, 301) == 3
    assert theory.stack_lower_bound(600, 599) == 600


@given(st.integers(1, 500), st.data())
def test_stack_lower_bound_is_pigeonhole(n, data):
    k = data.draw(st.integers(0, n - 1))
    c = theory.stack_lower_bound(n, k)
    assert c * (n - k) >= n > (c - 1) * (n - k)


def test_mu_by_hand():
    # Gamma(1/20) = 19.4700853; /20 = 0.97350; 600^0.95 = 435.75
    assert theory.mu(600, 20) == pytest.approx(424.21, abs=0.01)
    # r = 2: Gamma(1/2)/2 * sqrt(N) = sqrt(pi N)/2  (birthday problem)
    assert theory.mu(400, 2) == pytest.approx(math.sqrt(math.pi * 400) / 2)
    # r = 1: Gamma(1) * N^0 = 1
    assert theory.mu(50, 1) == pytest.approx(1.0)


def test_mu_increases_with_r_and_n():
    values = [theory.mu(600, r) for r in range(1, 21)]
    assert all(b > a for a, b in zip(values, values[1:]))
    assert theory.mu(1000, 10) > theory.mu(600, 10)


def test_sbar_lower_bound_by_hand():
    # N = 600, r = 2: floor(mu) = floor(21.7) = 21 terms; c(0) = 1, c(1..20) = 2.
    assert theory.sbar_lower_bound(600, 2) == pytest.approx((1 + 20 * 2) / 21)
    # N = 600, r = 20: floor(mu) = 424 terms; c = 1 (k=0), 2 (k=1..300), 3 (k=301..400),
    # 4 (k=401..423: 600/(600-k) <= 4 for k <= 450).
    expected = (1 + 300 * 2 + 100 * 3 + 23 * 4) / 424
    assert theory.sbar_lower_bound(600, 20) == pytest.approx(expected)


def test_r_star_by_hand():
    assert theory.r_star(200) == 8
    assert theory.r_star(600) == 10
    assert theory.r_star(1000) == 10
    assert theory.r_star(1) == 1
    assert theory.r_star(2) == 1  # floor(1.833)


def test_checkpoint_period_by_hand():
    # T_s = 60, T_r = 3600, T_f = 7200: 60 + sqrt(3600 + 120 * 10800) = 60 + 1140
    assert theory.checkpoint_period(60, 3600, 7200) == pytest.approx(60 + math.sqrt(3600 + 120 * 10800))
    assert theory.checkpoint_period(60, 3600, 7200) == pytest.approx(1200.0, abs=0.5)


def test_availability_by_hand():
    t_c = theory.checkpoint_period(60, 3600, 76_000)
    expected = 1 - 60 / t_c - (t_c / 2 + 3600) / 76_000
    # The times come in the same order as for checkpoint_period: T_s, T_r, then the MTBF.
    assert theory.availability(60, 3600, 76_000) == pytest.approx(expected)
    assert 0.9 < expected < 0.92
    assert theory.availability(60, 3600, math.inf) == 1.0
    # Wipe-outs faster than restarts: the first-order waste exceeds 1, clipped to 0.
    assert theory.availability(60, 3600, 600) == 0.0


def test_availability_increases_with_mtbf():
    values = [theory.availability(60, 3600, m) for m in (1e4, 1e5, 1e6, 1e7)]
    assert all(0 <= a <= 1 for a in values)
    assert all(b > a for a, b in zip(values, values[1:]))


def test_normalised_ttt_matches_its_parts_and_is_least_near_r_star():
    n = 600
    j = {r: theory.normalised_ttt(n, r) for r in range(2, 21)}
    for r in (3, 10, 20):
        a = theory.availability(60, 3600, theory.mu(n, r) * 300)
        assert j[r] == pytest.approx(theory.sbar_lower_bound(n, r) / a)
    best = min(j, key=j.get)
    assert abs(best - theory.r_star(n)) <= 1
    # Wipe-outs every 5 min with 60 min restarts: no progress at all.
    assert theory.normalised_ttt(n, 1) == math.inf
    # The defaults are the paper's times (spare_opt.simulation.parameters, re-exported by theory).
    assert theory.normalised_ttt(n, 10) == theory.normalised_ttt(
        n, 10, system_mtbf_seconds=PAPER["system_mtbf_seconds"], save_seconds=PAPER["save_seconds"],
        restart_seconds=PAPER["restart_seconds"])
    with pytest.raises(TypeError):  # the times are keyword-only
        theory.normalised_ttt(n, 10, 300)


def test_paper_constants_come_from_the_parameters_module():
    assert theory.PAPER_MTBF_SECONDS == parameters.PAPER_MTBF_SECONDS == 300.0
    assert theory.PAPER_RESTART_SECONDS == parameters.PAPER_RESTART_SECONDS == 3600.0
    assert theory.PAPER_SAVE_SECONDS == parameters.PAPER_SAVE_SECONDS == 60.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: theory.mu(0, 1),
        lambda: theory.mu(10, 11),
        lambda: theory.sbar_lower_bound(10, 0),
        lambda: theory.stack_lower_bound(10, 10),
        lambda: theory.stack_lower_bound(10, -1),
        lambda: theory.r_star(0),
        lambda: theory.checkpoint_period(0, 3600, 100),
        lambda: theory.checkpoint_period(60, -1, 100),
        lambda: theory.checkpoint_period(60, 3600, float("nan")),
        lambda: theory.availability(60, 3600, -5),
        lambda: theory.availability(-5, 3600, 100),
        lambda: theory.availability(60, 3600, float("nan")),
        lambda: theory.normalised_ttt(600, 10, system_mtbf_seconds=0),
    ],
)
def test_bad_arguments_raise_parameter_error(call):
    with pytest.raises(ParameterError):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: theory.mu(10, 2.5),
        lambda: theory.mu(True, 1),
        lambda: theory.r_star(600.0),
        lambda: theory.stack_lower_bound(10, 1.0),
        lambda: theory.checkpoint_period(60, None, 100),
        lambda: theory.availability("60", 3600, 100),
        lambda: theory.availability(60, 3600, "100"),
        lambda: theory.normalised_ttt(600, 10, system_mtbf_seconds="300"),
    ],
)
def test_wrong_types_raise_parameter_type_error(call):
    with pytest.raises(ParameterTypeError):
        call()

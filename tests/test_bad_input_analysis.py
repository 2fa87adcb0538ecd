"""Regression tests: bad and edge input to the controller, theory, analysis, simulation and tuning.

Each test is named after a defect found by adversarial testing: the input, and what it
used to do (a bare exception, a traceback, a hang, invalid JSON).  The contract checked
is the project's: the API raises a specific :class:`spare_opt.SpareError` subclass; the
CLI prints one ``Error: ...`` line on stderr, exits non-zero and shows no traceback.
"""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import spare_opt
from spare_opt import ReorderController, consecutive, stack_number_trajectory, theory
from spare_opt.simulation import _runs
from spare_opt._core.errors import FailureSetError, ParameterError, ParameterTypeError
from spare_opt.simulation.parameters import SimulationParameters, parse_overrides, preset_parameters
from spare_opt.simulation.time_to_train import (
    default_layout,
    simulate,
    summarise,
    trace_failures,
    trace_system_mtbf_seconds,
)
from spare_opt.simulation.tuning import mean_failures_to_wipe_out, plot_tune, tune
from spare_opt_cli.main import main


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _assert_one_line_error(result, needle=None):
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.stderr
    if needle is not None:
        assert needle in errors[0]


def _strict_json(text):
    def refuse(token):
        raise ValueError(f"non-finite JSON token {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def small():
    return consecutive(7, 3)


@pytest.fixture
def small_path(tmp_path, small):
    return str(small.save(tmp_path / "layout.json"))


# ---------------------------------------------------------------- controller
def test_controller_zero_d_integer_array_is_a_group_id(small):
    controller = ReorderController(small)
    assert controller.fail(np.array(2)).stack_number == controller.fail(np.int64(4)).stack_number


@pytest.mark.parametrize("groups,needle", [
    (3.0, "3.0 is not an integer"),
    (np.float64(2.0), "not an integer"),
    (np.array([[3, 4]]), "1-D array"),
    ([2**70], "out of range"),
    ([1, 2**64], "out of range"),
])
def test_controller_float_2d_and_huge_ids_are_failure_set_errors(small, groups, needle):
    controller = ReorderController(small)
    controller.fail(0)
    before = controller.order.copy()
    with pytest.raises(FailureSetError, match=needle):
        controller.fail(groups)
    assert np.array_equal(controller.order, before) and list(controller.failed) == [0]


def test_trajectory_huge_unsigned_id_is_named_not_wrapped(small):
    # uint64 2**63 + 1 used to be cast to int64 first and reported as a negative group.
    with pytest.raises(FailureSetError, match=str(2**63 + 1)):
        stack_number_trajectory(small, np.array([2**63 + 1], dtype=np.uint64))


# ---------------------------------------------------------------- theory
def test_sbar_lower_bound_huge_groups_does_not_allocate():
    # It used to build an array of floor(mu) terms: MemoryError at N = 2**70.
    assert theory.sbar_lower_bound(2**70, 2) == pytest.approx(2.0, abs=1e-9)
    with pytest.raises(ParameterError):
        theory.sbar_lower_bound(10**30, 10**29)


def test_mu_beyond_float_range_is_parameter_error_not_overflow():
    # N ** (1 - 1/r) used to raise a bare OverflowError once N no longer fits a float.
    assert theory.mu(10**400, 2) == pytest.approx(math.gamma(0.5) / 2 * 10.0**200)
    assert theory.normalised_ttt(10**400, 2) > 1
    for args in ((10**700, 2), (10**400, 10**400)):
        with pytest.raises(ParameterError, match="overflows"):
            theory.mu(*args)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 13, 64, 97, 600, 1001])
def test_sbar_lower_bound_block_sum_matches_the_term_by_term_mean(n):
    for r in sorted({1, min(2, n), min(3, n), max(1, n // 2), n}):
        terms = int(math.floor(theory.mu(n, r)))
        terms = max(1, min(terms, n - 1)) if n > 1 else 1
        k = np.arange(terms)
        assert theory.sbar_lower_bound(n, r) == pytest.approx(float((-(-n // (n - k))).mean()), rel=1e-12)


def test_checkpoint_period_overflow_is_parameter_error():
    with pytest.raises(ParameterError, match="overflows"):
        theory.checkpoint_period(1e308, 1e308, 1e308)
    # A huge but finite MTBF used to overflow to T_c = inf and availability 0.
    assert theory.availability(60, 3600, 1e308) == pytest.approx(1.0)


# ---------------------------------------------------------------- worst case and Monte-Carlo
@pytest.mark.parametrize("call", [
    lambda: spare_opt.monte_carlo(None, trials=1),
    lambda: spare_opt.min_wipe_out_set("layout.json"),
    lambda: spare_opt.worst_case_after_one_failure(np.zeros((3, 2), dtype=int)),
    lambda: spare_opt.worst_case_stack_number(None, 1),
    lambda: spare_opt.worst_case_profile(None),
    lambda: spare_opt.stack_number_certificate(None, [0]),
])
def test_analysis_non_layout_is_parameter_type_error(call):
    with pytest.raises(ParameterTypeError, match="Layout"):
        call()


@pytest.mark.parametrize("kwargs,error,needle", [
    ({"seed": -1}, ParameterError, "seed"),
    ({"seed": 1.5}, ParameterTypeError, "seed"),
    ({"time_limit": "1"}, ParameterTypeError, "time_limit"),
    ({"search_workers": 0}, ParameterError, "search_workers"),
    ({"search_workers": -1}, ParameterError, "search_workers"),
    ({"search_workers": 2.0}, ParameterTypeError, "search_workers"),
])
def test_worst_case_bad_seed_time_limit_workers_are_parameter_errors(small, kwargs, error, needle):
    with pytest.raises(error, match=needle):
        spare_opt.worst_case_stack_number(small, 2, **kwargs)


def test_worst_case_seed_beyond_32_bits_is_folded_for_cp_sat(small):
    # CP-SAT's random_seed is 32-bit: seed 2**40 used to raise a bare TypeError.
    first = spare_opt.worst_case_stack_number(small, 2, method="cp-sat", seed=2**40, time_limit=5)
    assert first.stack_number == spare_opt.worst_case_stack_number(small, 2, method="cp-sat", seed=0).stack_number


def test_validate_negative_or_huge_seed_is_one_line_error_or_works(small_path):
    _assert_one_line_error(_run("validate", small_path, "--seed", -1, "--trials", 3), "seed")
    result = _run("validate", small_path, "--seed", 99999999999, "--trials", 3, "--json")
    assert result.exit_code == 0, result.output
    assert _strict_json(result.stdout)["monte_carlo"]["seed"] == 99999999999


def test_monte_carlo_absurd_trial_count_is_refused_before_allocating(small, small_path):
    # 10**20 trials used to build the chunk list up front and exhaust memory.
    with pytest.raises(ParameterError, match="trials must be <= 10,000,000"):
        spare_opt.monte_carlo(small, trials=10**20)
    for command in (("validate", small_path), ("sweep", "-n", 7)):
        _assert_one_line_error(_run(*command, "--trials", 10**14), "--trials")


def test_sweep_methods_string_is_split_not_spelled_and_duplicates_dropped():
    # "sidon" used to be iterated letter by letter; ["consecutive"] * 2 gave duplicate rows.
    result = spare_opt.sweep(7, r_min=2, r_max=2, methods="consecutive", trials=2)
    assert [row["method"] for row in result.rows] == ["consecutive"]
    result = spare_opt.sweep(7, r_min=2, r_max=2, methods=["consecutive", "consecutive"], trials=2)
    assert [row["method"] for row in result.rows] == ["consecutive"]
    assert result.parameters["methods"] == ["consecutive"]


@pytest.mark.parametrize("kwargs,error,needle", [
    ({"time_limit": float("nan")}, ParameterError, "time_limit"),
    ({"time_limit": float("inf")}, ParameterError, "time_limit"),
    ({"system_mtbf_seconds": "300"}, ParameterTypeError, "system_mtbf_seconds"),
    ({"restart_seconds": None}, ParameterTypeError, "restart_seconds"),
    ({"methods": [["sidon"]]}, ParameterTypeError, "layout method"),
    ({"methods": ["nope"]}, ParameterError, "layout method"),
    ({"methods": 3}, ParameterTypeError, "methods"),
    ({"methods": ["block"], "trials": 0}, ParameterError, "trials"),
])
def test_sweep_nan_time_limit_and_non_numbers_are_parameter_errors(kwargs, error, needle):
    # time_limit = nan used to run and print NaN into the --json parameters.
    kwargs = {"r_min": 3, "r_max": 3, "trials": 2, **kwargs}
    with pytest.raises(error, match=needle):
        spare_opt.sweep(7, **kwargs)


def test_sweep_cli_nan_time_limit_and_empty_method_are_one_line_errors():
    _assert_one_line_error(_run("sweep", "-n", 7, "--r-min", 2, "--r-max", 2, "--trials", 2,
                                "--time-limit", "nan"), "finite")
    _assert_one_line_error(_run("sweep", "-n", 7, "--r-min", 2, "--r-max", 2, "--trials", 2,
                                "--mtbf", "inf"), "--mtbf")
    _assert_one_line_error(_run("sweep", "-n", 7, "--r-min", 2, "--r-max", 2, "--trials", 2,
                                "--methods", "sidon,,block"), "empty method name")


def test_plot_without_matplotlib_fails_before_the_work(monkeypatch, tmp_path, small_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError

    def no_work(*args, **kwargs):
        raise AssertionError("the Monte-Carlo ran although the plot cannot be drawn")

    # It used to fail only after the whole Monte-Carlo / sweep.
    monkeypatch.setattr("spare_opt_cli.validate.monte_carlo", no_work)
    monkeypatch.setattr("spare_opt_cli.sweep.sweep", no_work)
    monkeypatch.setattr("spare_opt_cli.tune.tune_preset", no_work)
    for args in (("validate", small_path, "--trials", 5), ("sweep", "-n", 7, "--r-min", 2, "--r-max", 2,
                                                          "--trials", 2), ("tune", "-N", 200, "--seeds", 1)):
        plot = tmp_path / f"{args[0]}.png"
        result = _run(*args, "--plot", plot)
        _assert_one_line_error(result, "matplotlib")
        assert result.stdout == "" and not plot.exists()
    existing = tmp_path / "kept.png"
    existing.write_bytes(b"keep me")
    _assert_one_line_error(_run("validate", small_path, "--trials", 5, "--plot", existing))
    assert existing.read_bytes() == b"keep me"


def test_json_of_degenerate_layouts_has_no_nan_tokens(tmp_path):
    # One trial (no confidence interval) and r = 1 (mu = 0: relative error undefined).
    path = consecutive(5, 1).save(tmp_path / "r1.json")
    result = _run("validate", path, "--trials", 1, "--json")
    assert result.exit_code == 0, result.output
    doc = _strict_json(result.stdout)
    assert doc["monte_carlo"]["mu_ci95"] == [None, None]
    result = _run("sweep", "-n", 5, "--r-min", 1, "--r-max", 2, "--trials", 1, "--methods", "consecutive", "--json")
    assert result.exit_code == 0, result.output
    assert len(_strict_json(result.stdout)["rows"]) == 2


# ---------------------------------------------------------------- simulation
@pytest.mark.parametrize("fields,error,needle", [
    ({"steps": 10**20}, ParameterError, "steps must be <="),
    ({"layer_compute_seconds": 1e308}, ParameterError, "overflows"),
    ({"rate_follows_live": "no"}, ParameterTypeError, "rate_follows_live"),
    ({"rate_follows_live": 1}, ParameterTypeError, "rate_follows_live"),
    # Weibull scale m / Gamma(1001) = 0: 2 failures in a run
    ({"weibull_shape": 1e-3}, ParameterError, "weibull_shape"),
])
def test_simulation_parameters_huge_steps_infinite_cap_and_truthy_strings(fields, error, needle):
    # steps = 10**20 used to overflow in the kernel (OverflowError traceback); an
    # infinite T0 made the wall-time cap infinite and the run never stopped; "no" was truthy;
    # a tiny Weibull shape made the failure scale 0 and the run nonsense.
    with pytest.raises(error, match=needle):
        SimulationParameters(groups=5, **fields)


def test_simulation_parameters_numpy_ints_become_json_ready():
    params = SimulationParameters(groups=np.int64(5), steps=np.int32(20))
    assert type(params.groups) is int and type(params.steps) is int
    json.dumps(params.to_dict())


def test_simulate_hopeless_run_is_refused_instead_of_exhausting_memory():
    # 200 steps of 1e6 s with a failure every 300 s: ~1.3e8 failures before the wall cap
    # used to grow the trajectory pool until the process was killed.
    params = preset_parameters("paper-600k", 200, steps=200, layer_compute_seconds=1e6)
    with pytest.raises(ParameterError, match="failures before its wall-time cap"):
        simulate(params, "rep", 3)
    with pytest.raises(ParameterError, match="failures before its wall-time cap"):
        tune(params, seeds=1, rep_redundancies=[2], spare_redundancies=[2], workers=1)
    _assert_one_line_error(_run("simulate", "--set", "steps=200", "--set", "layer_compute_seconds=1e6"),
                           "wall-time cap")


def test_simulate_cli_huge_steps_is_one_line_error():
    _assert_one_line_error(_run("simulate", "--set", "steps=99999999999999999999"), "steps")
    _assert_one_line_error(_run("tune", "-N", 200, "--set", "steps=99999999999999999999"), "steps")


@pytest.mark.parametrize("seed,error", [(-1, ParameterError), (None, ParameterTypeError),
                                        (1.5, ParameterTypeError), (True, ParameterTypeError)])
def test_simulate_bad_seed_is_parameter_error(seed, error):
    # -1 used to raise a bare ValueError, None a TypeError, and 1.5 ran as seed 1.
    with pytest.raises(error, match="seed"):
        simulate(SimulationParameters(groups=5, steps=20), "rep", 2, seed=seed)


def test_simulate_non_trace_is_parameter_type_error_before_use():
    # The default period read trace attributes before the type check: AttributeError.
    with pytest.raises(ParameterTypeError, match="FaultTrace"):
        simulate(SimulationParameters(groups=5, steps=20), "rep", 2, trace="trace.json")


INSTANCE_TRACE = Path(__file__).resolve().parent.parent / "instances" / "failures-N400-seed0.json"


@pytest.mark.parametrize("args,kwargs,error,needle", [
    ((400, "foo", 3), {}, ParameterError, "strategy"),  # used to be an AttributeError
    ((400, 3, 3), {}, ParameterTypeError, "strategy"),
    ((400, "rep", 2.0), {}, ParameterTypeError, "r must be an integer"),
    ((400, "spare", 3), {"layout": "layout.json"}, ParameterTypeError, "layout must be a Layout"),
    ((400, "ckpt", 1), {"time_scale": "1"}, ParameterTypeError, "time_scale"),
    ((400, "rep", 0), {}, ParameterError, "r must be"),  # used to run as r = 1
    ((400, "rep", 500), {}, ParameterError, "r must be"),  # used to run as r = N
    ((400, "spare", 3), {"layout": consecutive(7, 3)}, ParameterError, "layout has N=7"),  # "group 7 out of range"
    ((400, "ckpt", 1), {"time_scale": -1.0}, ParameterError, "time_scale"),  # negative times
    ((400, "ckpt", 1), {"time_scale": float("nan")}, ParameterError, "time_scale"),  # NaN times
])
def test_trace_failures_bad_strategy_r_layout_and_scale(args, kwargs, error, needle):
    from spare_opt.traces.json_format import read_fault_trace

    if not INSTANCE_TRACE.is_file():
        pytest.skip("instances/failures-N400-seed0.json is absent")
    with pytest.raises(error, match=needle) as info:
        trace_failures(read_fault_trace(INSTANCE_TRACE), *args, **kwargs)
    assert type(info.value) is error


def test_trace_helpers_non_trace_is_parameter_type_error():
    with pytest.raises(ParameterTypeError, match="FaultTrace"):
        trace_failures("trace.json", 400, "ckpt", 1)
    with pytest.raises(ParameterTypeError, match="FaultTrace"):
        trace_system_mtbf_seconds(None)


def test_summarise_empty_is_parameter_error():
    with pytest.raises(ParameterError):
        summarise([])


def test_preset_lookup_unhashable_name_and_float_groups():
    with pytest.raises(ParameterError, match="unknown preset"):
        preset_parameters(["paper-600k"], 200)
    with pytest.raises(ParameterTypeError, match="groups N must be an integer"):
        preset_parameters("paper-600k", 200.0)
    with pytest.raises(ParameterError, match="defines N"):
        preset_parameters("paper-600k", 201)


def test_parse_overrides_single_string_and_none():
    # A bare string used to be parsed character by character; None raised TypeError.
    assert parse_overrides("steps=5") == {"steps": 5}
    with pytest.raises(ParameterTypeError):
        parse_overrides(None)


def test_default_layout_bad_sizes_are_parameter_errors():
    with pytest.raises(ParameterTypeError):
        default_layout("a", 2)
    for args in ((5, 6), (5, 0)):
        with pytest.raises(ParameterError):
            default_layout(*args)


def test_trajectory_pool_blocks_do_not_change_the_draw():
    # The pool now draws permutations in bounded blocks; the stream must be unchanged.
    whole = _runs.FailurePool("rep", 200, 3, seed=5)
    whole._extend(6000)
    blocked = _runs.FailurePool("rep", 200, 3, seed=5)
    blocked.extend(6000)  # 2**20 // 200 = 5242 rows a block: two blocks
    assert np.array_equal(whole.wipe, blocked.wipe)


# ---------------------------------------------------------------- tuning
@pytest.mark.parametrize("kwargs,error,needle", [
    ({"period_factors": ["a"]}, ParameterTypeError, "period factors"),
    ({"period_factors": [None]}, ParameterTypeError, "period factors"),
    ({"period_factors": 1.0}, ParameterTypeError, "period factors"),
    ({"period_factors": [0.0]}, ParameterError, "period factors"),
    ({"period_factors": []}, ParameterError, "period factors"),
    ({"spare_redundancies": 3}, ParameterTypeError, "spare redundancies"),
    ({"spare_redundancies": [1]}, ParameterError, "spare redundancies"),
    ({"include_ckpt": "no"}, ParameterTypeError, "include_ckpt"),
    ({"workers": 0}, ParameterError, "workers"),
    ({"executor": "tcp://localhost:8786"}, ParameterTypeError, "Executor"),
])
def test_tune_bad_factors_redundancies_and_flags_are_parameter_errors(kwargs, error, needle):
    params = SimulationParameters(groups=7, steps=30)
    kwargs = {"seeds": 1, "rep_redundancies": [2], "spare_redundancies": [2], "workers": 1, **kwargs}
    with pytest.raises(error, match=needle) as info:
        tune(params, **kwargs)
    assert type(info.value) is error


def test_tune_duplicate_redundancies_give_one_curve_point():
    params = SimulationParameters(groups=7, steps=30)
    result = tune(params, seeds=1, rep_redundancies=[2, 2], spare_redundancies=[2], period_factors=[1.0],
                         include_ckpt=False, workers=1)
    assert [row["r"] for row in result.strategies["rep"]["curve"]] == [2]


@pytest.mark.parametrize("args,kwargs,error", [
    (("foo", 2), {}, ParameterError),
    (("rep", 0), {}, ParameterError),
    (("rep", 2), {"samples": 0}, ParameterError),
    (("rep", 2), {"samples": 2.5}, ParameterTypeError),
    (("rep", 2), {"seed": -1}, ParameterError),
])
def test_mean_failures_to_wipe_out_bad_strategy_r_samples(args, kwargs, error):
    # r = 0 used to raise ZeroDivisionError; "foo" a misleading "expected a Layout".
    with pytest.raises(error) as info:
        mean_failures_to_wipe_out(SimulationParameters(groups=7, steps=30), *args, **kwargs)
    assert type(info.value) is error


def test_plot_tune_empty_results_is_parameter_error(tmp_path):
    with pytest.raises(ParameterError):
        plot_tune([], tmp_path / "tune.png")
    assert not (tmp_path / "tune.png").exists()

"""The one validation layer (spare_opt._core.validation) and the checkers that must never pass silently."""

import math
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import spare_opt
from spare_opt._core import validation as check
from spare_opt._core.parallel import resolve_workers, run_tasks
from spare_opt._core.errors import ParameterError, ParameterTypeError, PlanError, SpareError

# ------------------------------------------------------------------ the error classes


def test_type_and_value_errors_are_distinct_builtin_families():
    assert issubclass(ParameterTypeError, TypeError) and not issubclass(ParameterTypeError, ValueError)
    assert issubclass(ParameterError, ValueError) and not issubclass(ParameterError, TypeError)
    assert issubclass(PlanError, ValueError)
    for error in (ParameterTypeError, ParameterError, PlanError):
        assert issubclass(error, SpareError)


# ------------------------------------------------------------------ integers
@pytest.mark.parametrize("value", [1.0, 1.5, True, np.bool_(True), "3", None, [3], 3 + 0j, float("nan")])
def test_integer_refuses_other_types_with_a_type_error(value):
    with pytest.raises(ParameterTypeError, match="trials must be an integer"):
        check.integer("trials", value)


@pytest.mark.parametrize("value, expected", [(3, 3), (np.int8(3), 3), (np.uint64(7), 7), (10**30, 10**30)])
def test_integer_returns_a_plain_int(value, expected):
    result = check.integer("x", value)
    assert result == expected and type(result) is int


@pytest.mark.parametrize("value, kwargs, message", [
    (0, {"minimum": 1}, "must be >= 1"),
    (11, {"maximum": 10}, "must be <= 10"),
    (-1, {"minimum": 0}, "must be >= 0"),
])
def test_integer_out_of_range_is_a_value_error(value, kwargs, message):
    with pytest.raises(ParameterError, match=message):
        check.integer("x", value, **kwargs)


def test_integer_value_error_class_can_be_chosen():
    with pytest.raises(spare_opt.FailureSetError):
        check.integer("group", 9, maximum=3, error=spare_opt.FailureSetError)


def test_count_and_seed():
    assert check.count("trials", 5) == 5
    with pytest.raises(ParameterError):
        check.count("trials", 0)
    assert check.seed(0) == 0
    with pytest.raises(ParameterError, match="seed must be >= 0"):
        check.seed(-1)
    with pytest.raises(ParameterTypeError):
        check.seed(0.0)


def test_a_huge_integer_is_named_in_the_message_without_failing_to_print_it():
    # repr() of a 5,000-digit int raises in Python >= 3.11: the message must still come out.
    with pytest.raises(ParameterTypeError, match="must be a number"):
        check.number("x", "1" * 5000)
    with pytest.raises(ParameterError, match="too large for a float"):
        check.number("x", int("9" * 400))


# ------------------------------------------------------------------ numbers
@pytest.mark.parametrize("value", ["1", None, True, 1j, [1.0]])
def test_number_refuses_other_types(value):
    with pytest.raises(ParameterTypeError, match="x must be a number"):
        check.number("x", value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_number_refuses_non_finite_values(value):
    with pytest.raises(ParameterError, match="finite"):
        check.number("x", value)


def test_number_bounds_and_infinity():
    assert check.number("x", np.float32(0.5), minimum=0.0, maximum=1.0) == 0.5
    assert check.number("x", math.inf, allow_inf=True) == math.inf
    with pytest.raises(ParameterError):
        check.number("x", -math.inf, allow_inf=True)
    with pytest.raises(ParameterError, match="> 0"):
        check.number("x", 0.0, above=0.0)
    with pytest.raises(ParameterError, match=">= 0"):
        check.number("x", -0.1, minimum=0.0)
    with pytest.raises(ParameterError, match="<= 1"):
        check.probability("p", 1.5)
    assert check.seconds("t", 0.0, positive=False) == 0.0
    with pytest.raises(ParameterError):
        check.seconds("t", 0.0)


# ------------------------------------------------------------------ the rest
def test_flag_accepts_only_booleans():
    assert check.flag("f", np.bool_(True)) is True
    for value in (1, 0, "true", None):
        with pytest.raises(ParameterTypeError, match="True or False"):
            check.flag("f", value)


def test_choice_names_the_options():
    assert check.choice("planner", "exact", ("controller", "exact")) == "exact"
    with pytest.raises(ParameterError, match="'controller', 'exact'"):
        check.choice("planner", "fast", ("controller", "exact"))
    with pytest.raises(ParameterTypeError):
        check.choice("planner", 1, ("controller", "exact"))


def test_sequences():
    assert check.integers("r", [2, 3, 2]) == (2, 3)
    assert check.numbers_("f", (0.5, 1)) == (0.5, 1.0)
    with pytest.raises(ParameterTypeError):
        check.integers("r", "23")
    with pytest.raises(ParameterError, match="empty"):
        check.integers("r", [])
    with pytest.raises(ParameterTypeError):
        check.integers("r", [2, 2.5])
    with pytest.raises(ParameterError):
        check.numbers_("f", [1.0, -1.0], above=0.0)


def test_instance_and_callback():
    with pytest.raises(ParameterTypeError, match="layout must be a Layout"):
        spare_opt.check_layout("layout.json")
    assert check.callback("progress", None) is None
    with pytest.raises(ParameterTypeError):
        check.callback("progress", 3)


# ------------------------------------------------------------------ workers and executors
@pytest.mark.parametrize("workers", [0, -2])
def test_workers_follow_the_scipy_convention(workers):
    with pytest.raises(ParameterError, match="-1"):
        resolve_workers(workers)
    assert resolve_workers(-1) >= 1
    assert resolve_workers(2) == 2


def test_run_tasks_keeps_task_order_and_reports_progress_on_any_executor():
    calls = []
    with ThreadPoolExecutor(max_workers=3) as pool:
        out = run_tasks(pow, [(2, k) for k in range(10)], executor=pool, weights=[2] * 10,
                        progress=lambda done, total: calls.append((done, total)))
    assert out == [2**k for k in range(10)]
    assert calls[-1] == (20, 20) and [c[0] for c in calls] == sorted(c[0] for c in calls)
    with pytest.raises(ParameterTypeError, match="Executor"):
        run_tasks(pow, [(2, 1)], executor="tcp://localhost:8786")


# ------------------------------------------------------------------ checkers never pass silently
def _bad_plan():
    layout = spare_opt.sidon(13, 4)
    plan = spare_opt.plan_reorder(layout, [0, 5])
    return layout, plan


def test_check_plan_raises_plan_error_on_a_wrong_stack_number():
    layout, plan = _bad_plan()
    spare_opt.check_plan(layout, plan)
    assert spare_opt.is_valid_plan(layout, plan)
    plan.stack_number = 99
    with pytest.raises(PlanError, match="S\\* = 99"):
        spare_opt.check_plan(layout, plan)
    assert not spare_opt.is_valid_plan(layout, plan)


@pytest.mark.parametrize("breaker, message", [
    (lambda p: setattr(p, "status", "wipe-out"), "status"),
    (lambda p: p.assignment.__setitem__(0, p.failed[0]), "failed group"),
    (lambda p: setattr(p, "moves", p.moves + 1), "moves"),
    (lambda p: setattr(p, "lower_bound", 7), "c\\(k\\)"),
    (lambda p: p.order.__setitem__((p.assignment[3], slice(None)), p.order[p.assignment[3], ::-1]), "top S"),
])
def test_check_plan_names_the_first_violation(breaker, message):
    layout, plan = _bad_plan()
    breaker(plan)
    with pytest.raises(PlanError, match=message):
        spare_opt.check_plan(layout, plan, previous_order=layout.stacks)


def test_check_plan_is_not_an_assert_so_python_O_still_checks():
    script = textwrap.dedent("""
        import spare_opt
        layout = spare_opt.sidon(13, 4)
        plan = spare_opt.plan_reorder(layout, [0, 5])
        plan.stack_number = 99
        try:
            spare_opt.check_plan(layout, plan)
        except spare_opt.PlanError as exc:
            print("refused:", exc)
        else:
            print("accepted")
    """)
    out = subprocess.run([sys.executable, "-O", "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("refused:"), out.stdout + out.stderr


def test_plans_and_results_compare_by_value_without_raising():
    layout = spare_opt.sidon(13, 4)
    exact = spare_opt.plan_reorder(layout, [2])
    again = spare_opt.plan_reorder(layout, [2])
    assert exact == again and not (exact != again)
    lazy = spare_opt.ReorderController(layout).fail(2)
    assert (lazy == exact) in (True, False)  # compares, whatever the moves
    assert lazy.stack_number == exact.stack_number
    other = spare_opt.plan_reorder(layout, [3])
    assert exact != other
    first = spare_opt.monte_carlo(layout, trials=5, seed=1)
    second = spare_opt.monte_carlo(layout, trials=5, seed=1)
    assert first == second  # wall-clock fields are not part of the value
    assert first != spare_opt.monte_carlo(layout, trials=5, seed=2)


def test_model_invalid_from_cp_sat_is_a_solver_error(monkeypatch):
    from ortools.sat.python import cp_model

    from spare_opt.guarantees import worst_case

    real_solve = cp_model.CpSolver.solve

    def invalid(self, model, *args, **kwargs):
        real_solve(self, model, *args, **kwargs)
        return cp_model.MODEL_INVALID

    monkeypatch.setattr(cp_model.CpSolver, "solve", invalid)
    with pytest.raises(spare_opt.SolverError, match="rejected"):
        worst_case.worst_case_stack_number(spare_opt.consecutive(12, 3), 3, method="cp-sat", time_limit=5)

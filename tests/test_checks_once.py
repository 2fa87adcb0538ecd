"""Arguments are checked once, at the public boundary (``spare_opt/_core/validation.py``).

A public function checks its arguments; the private helpers it calls trust them.  These
tests count the calls into the argument checks from outside that module (a check that
calls another check counts once) during one public call, so that a helper that checks
again what its caller checked shows up here.
"""

import collections
import functools
import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

from spare_opt import (Layout, load_trajectories, parse_fault_events, preset_parameters, simulate_seeds,
                       synthetic_fault_trace, tune)
from spare_opt._core import validation

#: Most entries into the checks of one ``simulate_seeds`` call on the Weibull failures:
#: ``params``, the options (overhead), ``strategy``, ``seeds``, ``first_seed``, ``r``
#: (two integers), ``m``, ``semantics``, ``workers`` and ``executor``/``progress`` (three,
#: in ``run_tasks``), and the three times of the Young/Daly period computed from them
#: (``theory.checkpoint_period``).  Before the checks were moved to the boundary: 35.
MOST_CHECKS_PER_CALL = 15


def _count_checks(monkeypatch):
    """Wrap every check of ``validation``; return the counter of outer entries by caller."""
    entries = collections.Counter()
    depth = [0]

    def counted(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if depth[0] == 0:
                caller = sys._getframe(1)
                entries[f"{Path(caller.f_code.co_filename).name}:{caller.f_code.co_name} -> {function.__name__}"] += 1
            depth[0] += 1
            try:
                return function(*args, **kwargs)
            finally:
                depth[0] -= 1
        return wrapper

    for name, value in list(vars(validation).items()):
        if inspect.isfunction(value) and value.__module__ == validation.__name__:
            monkeypatch.setattr(validation, name, counted(value))
    return entries


@pytest.fixture(scope="module")
def params():
    params = preset_parameters("paper-600k", 200, steps=300)
    simulate_seeds(params, "spare", 3, seeds=1)  # the default layout built and the kernels compiled, uncounted
    simulate_seeds(params, "rep", None, seeds=1)
    return params


def test_the_counter_sees_a_check_once_per_public_call(monkeypatch):
    # The count below would pass vacuously if the wrappers missed the checks.
    entries = _count_checks(monkeypatch)
    with pytest.raises(validation.ParameterTypeError):
        validation.count("seeds", 1.5)
    assert entries == {f"{Path(__file__).name}:test_the_counter_sees_a_check_once_per_public_call -> count": 1}


@pytest.mark.parametrize("strategy,redundancy", [("spare", 3), ("rep", None)])
def test_simulate_seeds_checks_its_arguments_once_whatever_the_seeds(monkeypatch, params, strategy, redundancy):
    entries = _count_checks(monkeypatch)
    simulate_seeds(params, strategy, redundancy, seeds=2)
    two_seeds = dict(entries)
    entries.clear()
    simulate_seeds(params, strategy, redundancy, seeds=5)
    # No check per seed: the runs and the failure pools work on checked values.
    assert dict(entries) == two_seeds
    assert sum(two_seeds.values()) <= MOST_CHECKS_PER_CALL, two_seeds
    # Each argument once: the strategy and the redundancy are not checked again below.
    assert sum(n for key, n in two_seeds.items() if key.endswith("-> choice")) == 2, two_seeds  # strategy, semantics


def test_load_trajectories_checks_its_layout_and_m_once(monkeypatch):
    layout = Layout((np.arange(7)[:, None] + [0, 1, 3]) % 7, offsets=[0, 1, 3])
    entries = _count_checks(monkeypatch)
    load_trajectories(layout, [[0, 1, 2], [3, 4, 5]], micro_batches=2)
    # check_layout (an instance check) and check_micro_batches (an integer): nothing else.
    assert sum(entries.values()) == 2, dict(entries)


def test_a_trace_run_checks_its_setting_once_and_the_parameters_not_again(monkeypatch):
    params = preset_parameters("trace-400", 100, steps=2000)
    trace = parse_fault_events(synthetic_fault_trace(nodes=100, days=10.0, seed=1))
    simulate_seeds(params, "spare", 3, seeds=1, trace=trace)  # uncounted: the layout and the kernels
    entries = _count_checks(monkeypatch)
    simulate_seeds(params, "spare", 3, seeds=2, trace=trace)
    two_seeds = dict(entries)
    entries.clear()
    simulate_seeds(params, "spare", 3, seeds=4, trace=trace)
    assert dict(entries) == two_seeds  # the trace's events are computed once, on checked values
    # simulate checked the strategy and the semantics: the trace's events do not check them again,
    assert sum(n for key, n in two_seeds.items() if key.endswith("-> choice")) == 2, two_seeds
    # and the trace's MTBF replaces one field of the checked parameters without checking the others.
    assert not [key for key in two_seeds if "__post_init__" in key], two_seeds


def test_tune_checks_its_arguments_not_its_own_runs(monkeypatch):
    params = preset_parameters("paper-600k", 100, steps=300)
    sweep = dict(rep_redundancies=(2,), spare_redundancies=(3,), period_factors=(1.0, 2.0))
    tune(params, seeds=1, **sweep)  # uncounted: the layouts and the kernels
    entries = _count_checks(monkeypatch)
    tune(params, seeds=2, **sweep)
    two_seeds = dict(entries)
    entries.clear()
    tune(params, seeds=4, **sweep)
    # The summaries of its runs and the wipe-out means of its settings work on checked values.
    assert dict(entries) == two_seeds
    assert not [key for key in two_seeds if key.startswith(("time_to_train.py:summarise",
                                                           "_runs.py:mean_failures_to_wipe_out"))], two_seeds

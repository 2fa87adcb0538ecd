"""Micro-batches in the time-to-train: the failure pool, the events' step costs against the exact planner, tune."""

import math

import numpy as np
import pytest

import spare_opt

from spare_opt import (
    FailureModel,
    ParameterError,
    least_stack_number,
    parse_fault_events,
    plan_reorder,
    preset_parameters,
    random_latin,
    simulate_seeds,
    stack_number_trajectories,
    trace_events,
    tune,
)
from spare_opt.simulation._runs import FailurePool, patch_layers
from spare_opt.simulation.time_to_train import default_layout

LAYOUT = random_latin(24, 4, seed=2)


@pytest.mark.parametrize("m", [1, 3, 8])
def test_failure_pool_holds_the_controllers_loads_over_m(m):
    pool = FailurePool("spare", 24, 4, seed=5, layout=LAYOUT, micro_batches=m)
    pool.extend(20)
    # the same permutations as the pool drew: SeedSequence([seed, 1])
    perms = np.argsort(np.random.default_rng(np.random.SeedSequence([5, 1])).random((20, 24)), axis=1)
    loads, wipes, _ = spare_opt.load_trajectories(LAYOUT, perms, micro_batches=m)
    stacks, wipes_s, _ = stack_number_trajectories(LAYOUT, perms, micro_batches=m)
    _, wipes_1, _ = stack_number_trajectories(LAYOUT, perms)
    assert np.array_equal(pool.wipe, wipes) and np.array_equal(wipes, wipes_1)  # wipe-outs do not depend on m
    for e in range(20):
        k = pool.wipe[e] if pool.wipe[e] > 0 else 25
        assert np.array_equal(pool.cost[e, :k], loads[e, :k] / m)
        assert np.array_equal(pool.stack[e, :k], stacks[e, :k])
        # the bound ceil(m N / (N - k)) / m <= cost <= r, and the costs never fall
        bound = np.array([math.ceil(m * 24 / (24 - j)) / m for j in range(k)])
        assert np.all(pool.cost[e, :k] >= bound) and np.all(pool.cost[e, :k] <= 4)
        assert np.all(np.diff(pool.cost[e, :k]) >= 0)


def test_patch_compute_in_micro_batches():
    params = preset_parameters("paper-600k", 600)
    assert patch_layers(params, "spare", 8, 1) == params.patch_layers
    assert patch_layers(params, "spare", 9, 8) == params.patch_layers / 8
    assert patch_layers(params, "spare", 3, 8) == params.patch_layers * 4 / 8
    assert patch_layers(params, "rep", 3, 1) == params.patch_layers


def _model_trace(days, seed):
    model = FailureModel(cluster_nodes=24, event_mtbf_seconds=3 * 3600.0, weibull_shape=0.8,
                         repair_median_seconds=10 * 3600.0, repair_sigma=1.2, event_size_probabilities=(0.7, 0.3))
    return parse_fault_events(model.sample_trace(days, seed=seed))


@pytest.mark.parametrize("m", [1, 4])
def test_event_step_costs_equal_the_exact_planner(m):
    # Replay the repair events by hand and ask the exact planner for the least load of
    # every failed set: failures (the controller's fail) and rejoins (its recover) must
    # both give it.
    tr = _model_trace(20.0, seed=3)
    events = trace_events(tr, 24, "spare", 4, semantics="repair", layout=LAYOUT, micro_batches=m,
                          heal_seconds=600.0)
    assert (events.kinds == 1).sum() > 10 and (events.kinds == 0).sum() > 10
    failed = set()
    for kind, groups, wiped, cost, stack in zip(events.kinds, events.event_groups, events.wipe_outs,
                                                events.step_costs, events.stack_numbers):
        if kind == 0:
            failed |= set(groups.tolist())
        else:
            failed -= set(groups.tolist())
        if wiped:
            assert least_stack_number(LAYOUT, sorted(failed)) is None
            failed = set()
            continue
        plan = plan_reorder(LAYOUT, sorted(failed), micro_batches=m)
        assert plan.masked and cost == plan.load / m
        if m == 1:
            assert stack == plan.stack_number


def test_micro_batches_lower_the_time_to_train():
    params = preset_parameters("paper-600k", 200, steps=600)
    layout = default_layout(200, 8)
    whole = simulate_seeds(params, "spare", 8, seeds=3, layout=layout)
    split = simulate_seeds(params, "spare", 8, seeds=3, layout=layout, micro_batches=8)
    assert all(run.micro_batches == 8 for run in split) and all(run.micro_batches == 1 for run in whole)
    assert np.mean([r.mean_step_cost for r in split]) < np.mean([r.mean_step_cost for r in whole]) - 0.3
    assert np.mean([r.ttt_ratio for r in split]) < np.mean([r.ttt_ratio for r in whole])
    # at m = 1 the step cost is the stack number
    assert all(r.mean_step_cost == r.mean_stack_number for r in whole)


def test_tune_at_several_m_runs_replication_once():
    from spare_opt import tune_preset

    results = tune_preset("paper-600k", 200, seeds=2, micro_batches=[1, 4], steps=150)
    assert [r.micro_batches for r in results] == [1, 4]
    assert results[0].strategies["rep"] == results[1].strategies["rep"]
    assert results[0].strategies["spare"]["best_ttt_ratio"] != results[1].strategies["spare"]["best_ttt_ratio"]
    assert results[1].to_dict()["micro_batches"] == 4
    with pytest.raises(ParameterError):
        tune(preset_parameters("paper-600k", 200, steps=150), micro_batches=0)

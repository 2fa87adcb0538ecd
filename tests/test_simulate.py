"""Tests of the time-to-train simulation: event-loop invariants, failure models, determinism."""

import json
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from spare_opt import consecutive
from spare_opt.simulation import _kernels as K
from spare_opt.simulation._runs import _rep_wipe_out_indices
from spare_opt._core.errors import FailureSetError, ParameterError, ParameterTypeError
from spare_opt.simulation.parameters import (
    PAPER,
    PRESETS,
    SimulationParameters,
    allreduce_seconds,
    fault_free_seconds,
    parse_overrides,
    preset_parameters,
)
from spare_opt.simulation.time_to_train import (
    default_layout,
    rep_wipe_out_index,
    simulate,
    simulate_seeds,
    summarise,
    trace_failures,
    trace_system_mtbf_seconds,
)
from spare_opt.simulation.tuning import mean_failures_to_wipe_out
from spare_opt.traces.json_format import parse_fault_events, read_fault_trace

QUIET = dict(system_mtbf_seconds=1e18)  # no failure in any reasonable run


def small(**fields):
    base = dict(groups=24, steps=300, layer_compute_seconds=10.0, allreduce_seconds=1.0, restart_seconds=200.0,
                save_seconds=5.0, system_mtbf_seconds=40.0, weibull_shape=0.78, jitter_sd=0.05)
    base.update(fields)
    return SimulationParameters(**base)


def accounted(result):
    return (result.useful_seconds + result.overhead_seconds + result.rework_seconds + result.restart_seconds
            + result.checkpoint_seconds)


# ----------------------------------------------------------------------------- no failures
@pytest.mark.parametrize("strategy, r", [("ckpt", 1), ("rep", 3), ("spare", 3)])
def test_no_failures_time_is_fault_free_plus_checkpoints(strategy, r):
    params = small(jitter_sd=0.0, **QUIET)
    result = simulate(params, strategy, r, checkpoint_period_seconds=500.0, seed=1)
    per_step = (r if strategy == "rep" else 1) * params.layer_compute_seconds + params.allreduce_seconds
    assert result.finished and result.restarts == 0 and result.masked_failures == 0
    assert result.useful_seconds == pytest.approx(params.steps * per_step)
    expected = params.steps * per_step + result.checkpoints * params.save_seconds
    assert result.ttt_seconds == pytest.approx(expected)
    # a checkpoint after every 500 s of progress, none after the last step
    assert result.checkpoints == math.ceil(params.steps / math.ceil(500.0 / per_step)) - 1
    if strategy != "rep":
        assert result.ttt_seconds - result.checkpoint_seconds == pytest.approx(fault_free_seconds(params))


def test_ckpt_only_with_huge_mtbf_and_jitter_is_close_to_t0():
    params = small(steps=2000, **QUIET)
    result = simulate(params, "ckpt", checkpoint_period_seconds=1e12, seed=3)
    assert result.checkpoints == 0 and result.restarts == 0
    # jitter has mean 1: the total over 2000 steps is within a few 0.1% of T0
    assert result.ttt_ratio == pytest.approx(1.0, rel=0.01)
    assert result.availability == pytest.approx(1.0)


# ----------------------------------------------------------------------------- accounting
@settings(max_examples=40)
@given(
    strategy=st.sampled_from(["ckpt", "rep", "spare"]),
    r=st.integers(2, 4),
    model=st.sampled_from(["group-clocks", "system-renewal"]),
    policy=st.sampled_from(["carry", "absorb"]),
    live=st.booleans(),
    mtbf=st.sampled_from([5.0, 30.0, 200.0]),
    period=st.sampled_from([15.0, 100.0, 1000.0]),
    seed=st.integers(0, 2**31),
)
def test_wall_time_accounting_identity(strategy, r, model, policy, live, mtbf, period, seed):
    params = small(system_mtbf_seconds=mtbf, failure_model=model, restart_failures=policy, rate_follows_live=live,
                   max_wall_factor=30.0)
    # checkpointing alone takes no r (passing one draws a warning that it is ignored)
    result = simulate(params, strategy, None if strategy == "ckpt" else r, checkpoint_period_seconds=period,
                      seed=seed)
    assert accounted(result) == pytest.approx(result.wall_seconds, rel=1e-9, abs=1e-6)
    assert 0.0 <= result.availability <= 1.0
    assert result.failures >= result.masked_failures + result.absorbed_failures
    if strategy == "ckpt":
        assert result.masked_failures == 0
    if result.finished:
        assert result.ttt_seconds == result.wall_seconds and result.ttt_seconds >= fault_free_seconds(params) * 0.8
        # every kept step is counted once in useful time
        assert result.steps_executed >= params.steps
    else:
        assert math.isinf(result.ttt_ratio)


def test_useful_time_counts_exactly_the_kept_steps_without_jitter():
    params = small(jitter_sd=0.0, system_mtbf_seconds=60.0)
    result = simulate(params, "rep", 3, checkpoint_period_seconds=200.0, seed=5)
    assert result.restarts > 0 and result.rework_seconds > 0
    per_step = 3 * params.layer_compute_seconds + params.allreduce_seconds
    assert result.useful_seconds == pytest.approx(params.steps * per_step)


# ----------------------------------------------------------------------------- determinism
def test_same_seed_same_result_other_seed_differs():
    params = small()
    a = simulate(params, "spare", 3, checkpoint_period_seconds=150.0, seed=11)
    b = simulate(params, "spare", 3, checkpoint_period_seconds=150.0, seed=11)
    c = simulate(params, "spare", 3, checkpoint_period_seconds=150.0, seed=12)
    assert a == b
    assert a.ttt_seconds != c.ttt_seconds


def test_simulate_seeds_is_simulate_per_seed_whatever_runs_it():
    params = small(steps=100)
    expected = [simulate(params, "spare", 3, checkpoint_period_seconds=150.0, seed=s) for s in range(5, 9)]
    calls = []
    serial = simulate_seeds(params, "spare", 3, seeds=4, first_seed=5, checkpoint_period_seconds=150.0,
                            progress=lambda done, total: calls.append((done, total)))
    assert serial == expected
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        assert simulate_seeds(params, "spare", 3, seeds=4, first_seed=5, checkpoint_period_seconds=150.0,
                              executor=pool) == expected
    assert simulate_seeds(params, "spare", 3, seeds=4, first_seed=5, checkpoint_period_seconds=150.0,
                          workers=2) == expected
    # The defaults (redundancy, closed-form period) are those of simulate.
    assert simulate_seeds(params, "rep", seeds=1) == [simulate(params, "rep", seed=0)]
    for kwargs, error in (({"seeds": 0}, ParameterError), ({"seeds": 1.5}, ParameterTypeError),
                          ({"first_seed": -1}, ParameterError), ({"workers": 0}, ParameterError),
                          ({"executor": "local"}, ParameterTypeError), ({"progress": 3}, ParameterTypeError)):
        with pytest.raises(error):
            simulate_seeds(params, "rep", 2, **kwargs)


def test_result_json_round_trip_and_summary():
    params = small(max_wall_factor=2.0, system_mtbf_seconds=1.0)
    runs = [simulate(params, "ckpt", 1, checkpoint_period_seconds=50.0, seed=s) for s in range(3)]
    assert all(not run.finished for run in runs)
    doc = json.loads(json.dumps(runs[0].to_dict(), allow_nan=False))
    assert doc["ttt_seconds"] is None and doc["finished"] is False
    summary = summarise(runs)
    assert summary["unfinished"] == 3 and math.isinf(summary["ttt_ratio"]["mean"])
    finished = [simulate(small(), "rep", 2, checkpoint_period_seconds=100.0, seed=s) for s in range(4)]
    stat = summarise(finished)["ttt_ratio"]
    assert stat["ci95"][0] <= stat["mean"] <= stat["ci95"][1]


# ----------------------------------------------------------------------------- replication
def _brute_rep_wipe(order, n, r):
    n_sets = n // r
    dead = set()
    for i, g in enumerate(order):
        dead.add(int(g))
        for s in range(n_sets):
            if all(m in dead for m in range(n) if m % n_sets == s):
                return i + 1
    return -1


@given(n=st.integers(2, 30), r=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_rep_wipe_out_index_matches_brute_force(n, r, seed):
    r = min(r, n)
    rng = np.random.default_rng(seed)
    perms = np.argsort(rng.random((3, n)), axis=1)
    vectorised = _rep_wipe_out_indices(perms, n, r)
    for row, order in enumerate(perms):
        expected = _brute_rep_wipe(order, n, r)
        assert rep_wipe_out_index(order, n, r) == expected
        assert vectorised[row] == expected
    assert rep_wipe_out_index([0], max(n, 2) * 2, 2) == -1
    with pytest.raises(FailureSetError):
        rep_wipe_out_index([0, 0], n + 1, 1)
    with pytest.raises(FailureSetError):
        rep_wipe_out_index([n], n, 1)


def test_rep_masks_and_ckpt_restarts_on_every_failure():
    params = small(system_mtbf_seconds=50.0)
    rep = simulate(params, "rep", 4, checkpoint_period_seconds=200.0, seed=2)
    ckpt = simulate(small(system_mtbf_seconds=300.0, restart_failures="absorb", failure_model="system-renewal"),
                    "ckpt", 1, checkpoint_period_seconds=30.0, seed=2)
    assert rep.masked_failures > 0 and rep.mean_stack_number == 4
    assert ckpt.finished and ckpt.restarts > 0 and ckpt.absorbed_failures > 0
    assert ckpt.masked_failures == 0 and ckpt.restarts == ckpt.failures - ckpt.absorbed_failures


# ----------------------------------------------------------------------------- failure models
@njit
def _draw_weibull(seed, scale, shape, count):
    rng = K._stream(seed)
    out = np.empty(count)
    for i in range(count):
        out[i] = K._weibull(rng, scale, shape)
    return out


@pytest.mark.parametrize("shape", [0.78, 1.0, 2.5])
def test_weibull_scale_gives_mean_mtbf(shape):
    mtbf = 300.0
    samples = _draw_weibull(7, mtbf / math.gamma(1 + 1 / shape), shape, 200_000)
    # standard error of the mean is under 0.3% here; 2% is a loose bound
    assert samples.mean() == pytest.approx(mtbf, rel=0.02)


@njit
def _group_clock_times(seed, groups, scale, shape):
    rng = K._stream(seed)
    out = np.empty(groups)
    cum = 0.0
    for k in range(groups):
        out[k], cum = K._next_failure(rng, K.MODEL_GROUP_CLOCKS, 0.0, k, groups, True, 0.0, shape, scale, 0.0, cum)
    return out


def test_group_clocks_are_sorted_weibull_samples():
    groups, shape, mtbf = 50, 0.78, 300.0
    scale = groups * mtbf / math.gamma(1 + 1 / shape)
    runs = np.array([_group_clock_times(s, groups, scale, shape) for s in range(2000)])
    assert np.all(np.diff(runs, axis=1) > 0)
    # the N times are the order statistics of N Weibull lifetimes of mean N * m
    assert runs.mean() == pytest.approx(groups * mtbf, rel=0.05)
    reference = np.sort(np.random.default_rng(0).weibull(shape, (2000, groups)) * scale, axis=1)
    assert np.median(runs[:, 0]) == pytest.approx(np.median(reference[:, 0]), rel=0.15)
    assert np.median(runs[:, groups // 2]) == pytest.approx(np.median(reference[:, groups // 2]), rel=0.1)


def test_rate_following_live_groups_lengthens_the_time_between_failures():
    common = dict(failure_model="system-renewal", restart_failures="absorb", system_mtbf_seconds=20.0, steps=600)
    follow = [simulate(small(rate_follows_live=True, **common), "spare", 4, checkpoint_period_seconds=200.0, seed=s)
              for s in range(6)]
    fixed = [simulate(small(rate_follows_live=False, **common), "spare", 4, checkpoint_period_seconds=200.0, seed=s)
             for s in range(6)]
    rate = lambda runs: sum(r.failures for r in runs) / sum(r.wall_seconds for r in runs)  # noqa: E731
    assert rate(follow) < rate(fixed)


# ----------------------------------------------------------------------------- traces
def _trace(events):
    doc = [{"node_id": f"n{node}", "event_time": day, "event_type": kind,
            "fault_type": {"Level": "x", "Class": "GPU", "Desc": "x"}} for node, day, kind in events]
    return parse_fault_events(doc)


def test_trace_patch_and_allreduce_redo_are_exact_without_jitter():
    params = small(groups=8, steps=10, jitter_sd=0.0, layer_compute_seconds=10.0, allreduce_seconds=2.0,
                   shrink_seconds=0.1, controller_seconds=0.1)
    day = 1 / 86400.0
    # step 0 runs [0, 12): a failure at 5 s (compute phase) adds a patch layer, the
    # controller and the shrink -> ends at 22.2 s; S = 2 from then on (22 s per step);
    # step 2 runs [44.2, 66.2) with its all-reduce from 64.2 s: a failure at 65.2 s
    # loses 1 s of all-reduce, then patch + controller + shrink, then the all-reduce again
    trace = _trace([(0, 5 * day, "fault_start"), (1, 65.2 * day, "fault_start")])
    layout = consecutive(8, 3)
    result = simulate(params, "spare", 3, checkpoint_period_seconds=1e9, seed=0, layout=layout, trace=trace)
    assert result.masked_failures == 2 and result.restarts == 0
    cost = 10.0 + 0.1 + 0.1
    assert result.overhead_seconds == pytest.approx(cost + (cost + 1.0))
    assert result.trace["used"] == 2 and result.trace["failure_events"] == 2


def test_trace_failures_batches_simultaneous_starts_and_skips_what_it_cannot_use():
    trace = _trace([(0, 1.0, "fault_start"), (1, 1.0, "fault_start"), (0, 2.0, "fault_start"),
                    (2, 2.5, "fault_start"), (9, 3.0, "fault_start"), (1, 4.0, "fault_end")])
    times, stacks, wipes, counts = trace_failures(trace, 3, "rep", 3)
    # nodes 0 and 1 fail together; node 0 again is ignored by the reader (still down);
    # node 2 completes the only replica set: wipe-out; node 9 is the 4th node: beyond N = 3
    assert counts["used"] == 3 and counts["failure_events"] == 2
    assert counts["outside_cluster"] == 1 and counts["ignored_by_reader"] == 1
    assert times.tolist() == [86400.0, 2.5 * 86400.0] and wipes.tolist() == [0, 1]
    assert stacks.tolist() == [3, 3]


def test_trace_system_mtbf_is_the_mean_time_between_usable_starts():
    trace = _trace([(0, 1.0, "fault_start"), (1, 2.0, "fault_start"), (0, 2.5, "fault_start"),
                    (2, 4.0, "fault_start"), (1, 5.0, "fault_end")])
    # 3 usable starts (node 0's second start is irregular) over days 0 .. 5
    assert trace_system_mtbf_seconds(trace) == pytest.approx(5.0 * 86400 / 3)
    assert trace_system_mtbf_seconds(trace, 0.5) == pytest.approx(5.0 * 86400 / 3 / 2)
    with pytest.raises(ParameterError):
        trace_system_mtbf_seconds(trace, 0.0)


def test_default_layout_is_cached_by_every_argument():
    first = default_layout(13, 4)
    assert default_layout(13, 4) is first and default_layout(13, 4, time_limit=10.0, seed=0) is first
    assert default_layout(13, 4, seed=1) is not first and default_layout(13, 4, time_limit=3.0) is not first
    assert first.method == "sidon" and (first.groups, first.redundancy) == (13, 4)
    with pytest.raises(TypeError):  # time_limit and seed are keyword-only
        default_layout(13, 4, 10.0)
    with pytest.raises(ParameterTypeError):
        default_layout(13, 4, seed=0.5)


def test_mean_failures_to_wipe_out_is_seeded_and_keyword_only():
    params = small()
    first = mean_failures_to_wipe_out(params, "rep", 3, samples=16, seed=4)
    assert first == mean_failures_to_wipe_out(params, "rep", 3, samples=16, seed=4)
    assert first != mean_failures_to_wipe_out(params, "rep", 3, samples=16, seed=5)
    with pytest.raises(TypeError):
        mean_failures_to_wipe_out(params, "rep", 3, None, 16)


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["block", "consecutive", "random_latin", "sidon"]), groups=st.integers(2, 40),
       redundancy=st.integers(2, 6), m=st.sampled_from([1, 3]), seed=st.integers(0, 2**16))
def test_spare_wipe_out_indices_equal_the_controllers_trajectories(kind, groups, redundancy, m, seed):
    # mean_failures_to_wipe_out reads SPARe's wipe-outs straight from the layout; the
    # controller's trajectories along the same failure orders are the reference.
    from spare_opt import block, random_latin
    from spare_opt.simulation._runs import _spare_wipe_out_indices, _trajectories

    redundancy = min(redundancy, groups)
    if kind == "block":
        groups = max(redundancy, groups - groups % redundancy)
        layout = block(groups, redundancy)
    elif kind == "consecutive":
        layout = consecutive(groups, redundancy)
    elif kind == "random_latin":
        layout = random_latin(groups, redundancy, seed=seed)
    else:
        layout = default_layout(groups, redundancy)
    perms = np.argsort(np.random.default_rng(seed).random((8, groups)), axis=1)
    assert np.array_equal(_spare_wipe_out_indices(perms, layout.stacks), _trajectories(layout, perms, m)[2])


def test_mean_failures_to_wipe_out_of_spare_is_the_pools():
    from spare_opt.simulation._runs import FailurePool

    params = small(groups=24)
    layout = default_layout(24, 4)
    pool = FailurePool("spare", 24, 4, 3, layout)
    pool.extend(50)  # the trajectories, whose wipe-outs the direct count must give
    assert mean_failures_to_wipe_out(params, "spare", 4, layout, samples=50, seed=3) == pool.mean_failures_to_wipe_out()


def test_real_trace_run(real_trace_path):
    trace = read_fault_trace(real_trace_path)
    params = preset_parameters("trace-400", 400, steps=20_000, trace_time_scale=0.05)
    result = simulate(params, "spare", 9, checkpoint_period_seconds=3000.0, seed=0, trace=trace)
    assert result.finished and result.masked_failures > 0
    assert result.trace["used"] + result.trace["already_down"] + result.trace["ignored_by_reader"] \
        + result.trace["outside_cluster"] == result.trace["fault_starts"]
    assert accounted(result) == pytest.approx(result.wall_seconds)
    with pytest.raises(ParameterTypeError, match="FaultTrace"):
        simulate(params, "ckpt", 1, checkpoint_period_seconds=3000.0, trace="not a trace")


# ----------------------------------------------------------------------------- parameters
def test_presets_and_parameter_errors():
    for n in PRESETS["paper-600k"].groups:
        params = preset_parameters("paper-600k", n)
        assert params.allreduce_seconds == pytest.approx(allreduce_seconds(n))
    assert [allreduce_seconds(n) for n in (200, 600, 1000)] == [2.0, 6.0, 10.0]
    with pytest.raises(ParameterError, match="unknown preset"):
        preset_parameters("nope", 200)
    assert preset_parameters("paper-600k", 500).groups == 500  # any N: the preset's timings at that N
    with pytest.raises(ParameterError):
        preset_parameters("paper-600k", 0)
    with pytest.raises(ParameterError):
        small(system_mtbf_seconds=-1.0)
    with pytest.raises(ParameterError):
        small(failure_model="poisson")
    with pytest.raises(ParameterError):
        simulate(small(), "spare", 1, checkpoint_period_seconds=100.0)
    with pytest.raises(ParameterError):
        simulate(small(), "rep", 0, checkpoint_period_seconds=100.0)
    with pytest.raises(ParameterError):
        simulate(small(), "rep", 2, checkpoint_period_seconds=-5.0)
    with pytest.raises(ParameterError):
        simulate(small(), "magic", 2, checkpoint_period_seconds=5.0)
    with pytest.raises(ParameterError, match="layout has"):
        simulate(small(), "spare", 3, checkpoint_period_seconds=100.0, layout=consecutive(10, 3))
    # Wrong types are ParameterTypeError (a TypeError), not ParameterError.
    for call in (lambda: simulate("params", "rep", 2), lambda: simulate(small(), "rep", 2.0),
                 lambda: simulate(small(), 3, 2), lambda: simulate(small(), "spare", 3, layout="layout.json"),
                 lambda: simulate(small(), "rep", 2, checkpoint_period_seconds="100"),
                 lambda: small(steps=1.5), lambda: small(rate_follows_live=1)):
        with pytest.raises(ParameterTypeError):
            call()
    with pytest.raises(TypeError):  # the checkpoint period and the rest are keyword-only
        simulate(small(), "rep", 2, 100.0)
    # allreduce_seconds defaults to the paper's line at N; a given value is kept.
    assert SimulationParameters(groups=600).allreduce_seconds == allreduce_seconds(600) == 6.0
    assert SimulationParameters(groups=600, allreduce_seconds=None).allreduce_seconds == 6.0
    assert SimulationParameters(groups=600, allreduce_seconds=0.5).allreduce_seconds == 0.5
    assert SimulationParameters(groups=600).system_mtbf_seconds == PAPER["system_mtbf_seconds"]
    assert parse_overrides(["rate_follows_live=no", "steps=7"]) == {"rate_follows_live": False, "steps": 7}
    for bad in (["steps"], ["groups=3"], ["steps=x"], ["colour=red"]):
        with pytest.raises(ParameterError):
            parse_overrides(bad)


def test_mtbf_seconds_is_now_system_mtbf_seconds():
    # The old field name is accepted (with a warning) where parameters are given by name.
    with pytest.warns(DeprecationWarning, match="system_mtbf_seconds"):
        assert parse_overrides(["mtbf_seconds=120"]) == {"system_mtbf_seconds": 120.0}
    with pytest.warns(DeprecationWarning, match="system_mtbf_seconds"):
        params = preset_parameters("paper-600k", 200, mtbf_seconds=120.0)
    assert params == preset_parameters("paper-600k", 200, system_mtbf_seconds=120.0)
    assert "mtbf_seconds" not in params.to_dict() and params.to_dict()["system_mtbf_seconds"] == 120.0
    with pytest.raises(TypeError):
        SimulationParameters(groups=5, mtbf_seconds=120.0)

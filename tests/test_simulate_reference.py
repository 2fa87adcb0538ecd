"""The numba event loop against its plain-Python reference (``naive_simulate``).

Trace mode with zero jitter uses no random number: the kernel must return exactly the
reference's ``R_*`` array (``==`` on floats); with jitter too when the reference draws
the jitters from the kernel's stream (``kernel_stream=True``).  With synthetic failures the two draw from
different random streams, so their means over seeds must agree within a two-sample test.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from naive_simulate import naive_run_kernel
from spare_opt.simulation import _kernels as K
from spare_opt import block, consecutive, random_latin
from spare_opt.simulation._runs import FailurePool
from spare_opt.simulation.time_to_train import default_layout, trace_failures
from spare_opt.traces.json_format import read_fault_trace

STRATEGY = {"ckpt": K.STRATEGY_CKPT, "rep": K.STRATEGY_REP, "spare": K.STRATEGY_SPARE}

# Timings without jitter.  "dyadic": every sum is exact in binary floating point, so
# these runs compare the semantics alone; "decimal" and "paper": sums round, so they also
# compare the order of the arithmetic.
TIMINGS = {
    "dyadic": dict(layer=8.0, allreduce=2.0, shrink=0.25, controller=0.125, restart=64.0, save=4.0, patch=1.0),
    "decimal": dict(layer=10.0, allreduce=1.0, shrink=0.1, controller=0.1, restart=200.0, save=5.0, patch=1.0),
    "paper": dict(layer=64.0, allreduce=6.0, shrink=0.1, controller=0.1, restart=3600.0, save=60.0, patch=1.0),
    "no-masking-cost": dict(layer=10.0, allreduce=3.0, shrink=0.0, controller=0.0, restart=30.0, save=2.5,
                            patch=0.0),
    "instant-restart": dict(layer=4.0, allreduce=0.0, shrink=0.5, controller=0.0, restart=0.0, save=0.5, patch=2.0),
}


def packed(strategy, timing, steps, period, groups=8, carry=True, trace=True, jitter=0.0, max_wall_factor=200.0,
           mtbf=40.0, shape=0.78, model=K.MODEL_GROUP_CLOCKS, follow_live=True, seed=0):
    """``fparams, iparams`` laid out by the kernel's ``F_*`` / ``I_*`` indices."""
    tm = TIMINGS[timing] if isinstance(timing, str) else timing
    f = np.zeros(K.N_FPARAMS)
    f[K.F_LAYER_COMPUTE] = tm["layer"]
    f[K.F_ALLREDUCE] = tm["allreduce"]
    f[K.F_SHRINK] = tm["shrink"]
    f[K.F_CONTROLLER] = tm["controller"]
    f[K.F_RESTART] = tm["restart"]
    f[K.F_SAVE] = tm["save"]
    f[K.F_PERIOD] = period
    f[K.F_MTBF] = mtbf
    f[K.F_SHAPE] = shape
    f[K.F_JITTER] = jitter
    f[K.F_MAX_WALL] = max_wall_factor * steps * (tm["layer"] + tm["allreduce"])
    f[K.F_PATCH_LAYERS] = tm["patch"]
    f[K.F_MAX_FAILURES] = np.inf  # no bound on the event loop here (the library packs MAX_RUN_FAILURES)
    i = np.zeros(K.N_IPARAMS, dtype=np.int64)
    i[K.I_STEPS] = steps
    i[K.I_GROUPS] = groups
    i[K.I_STRATEGY] = STRATEGY[strategy]
    i[K.I_RATE_FOLLOWS_LIVE] = int(follow_live)
    i[K.I_CARRY] = int(carry)
    i[K.I_SEED] = seed
    i[K.I_TRACE] = int(trace)
    i[K.I_FAILURE_MODEL] = model
    return f, i


def trace_arrays(strategy, r, times, wipes, stacks=None, costs=None, kinds=None):
    """Kernel arguments of an events run: ``(stack_traj, cost_traj, wipe_index, events)``.

    ``costs`` defaults to the stack numbers (``m = 1``), ``kinds`` to failures only.
    """
    times = np.asarray(times, dtype=np.float64)
    if stacks is None:
        stacks = np.full(times.size, r if strategy == "rep" else 1)
    base = np.full((1, 1), r if strategy == "rep" else 1, dtype=np.int16)
    events = np.zeros((times.size, K.N_EV))
    events[:, K.EV_TIME] = times
    events[:, K.EV_KIND] = K.KIND_FAILURE if kinds is None else kinds
    events[:, K.EV_WIPE] = wipes
    events[:, K.EV_STACK] = stacks
    events[:, K.EV_COST] = stacks if costs is None else costs
    return base, base.astype(np.float64), np.zeros(0, dtype=np.int32), events


def assert_same(f, i, arrays, log=None):
    """Run both; assert bit-identical ``R_*`` arrays; return the result."""
    kernel = K.run_kernel(f, i, *arrays)
    reference = naive_run_kernel(f, i, *arrays, log=log)
    differ = np.nonzero(kernel != reference)[0]
    assert differ.size == 0, {int(d): (kernel[d], reference[d]) for d in differ}
    return kernel


def random_trace(rng, strategy, r, count, mean_gap, wipe_rate, grid=None, rejoin_rate=0.0, micro_batches=1):
    """A trace of ``count`` events: exponential gaps (on ``grid`` when given), bursts at one instant.

    With ``rejoin_rate``, that share of the events are rejoins (never wipe-outs); with
    ``micro_batches`` the step costs are loads over ``m`` (not whole numbers).
    """
    gaps = rng.exponential(mean_gap, count)
    if grid:
        gaps = np.round(gaps / grid) * grid  # many failures exactly on step and phase boundaries
    gaps[rng.random(count) < 0.15] = 0.0  # several failures at one instant
    times = np.cumsum(gaps)
    kinds = np.where(rng.random(count) < rejoin_rate, K.KIND_REJOIN, K.KIND_FAILURE)
    wipes = (rng.random(count) < wipe_rate).astype(np.int8)
    if strategy == "ckpt":
        wipes[:] = 1
    wipes[kinds == K.KIND_REJOIN] = 0
    stacks = rng.integers(1, r + 1, count) if strategy == "spare" else None
    costs = None
    if strategy == "spare" and micro_batches > 1:
        costs = rng.integers(micro_batches, r * micro_batches + 1, count) / micro_batches
    return trace_arrays(strategy, r, times, wipes, stacks, costs, kinds)


# ----------------------------------------------------------------------------- hand-checked
def test_reference_hand_computed_masking_costs():
    # dyadic timings, SPARe, stack 1: step 0 is [0, 10) with its all-reduce in [8, 10).
    # A failure at 10.0 (exactly the end of step 0) belongs to step 1 [10, 20): it lands
    # in the compute, costs 0.25 + (0.125 + 8) and S = 2 from step 2 on: step 1 ends at
    # 28.375.  Step 2 (S = 2) is [28.375, 46.375); a failure at 45.375 lands in its
    # all-reduce [44.375, 46.375): 1 s of it is lost, then the masking cost, then the whole
    # all-reduce: step 2 ends at 45.375 + 8.375 + 2 = 55.75.
    f, i = packed("spare", "dyadic", steps=3, period=1e9)
    arrays = trace_arrays("spare", 3, [10.0, 45.375], [0, 0], [2, 2])
    log = []
    out = naive_run_kernel(f, i, *arrays, log=log)
    assert log == [("step", "compute"), ("step", "all-reduce")]
    assert out[K.R_WALL] == 55.75
    assert out[K.R_OVERHEAD] == 8.375 + (1.0 + 8.375)
    assert out[K.R_USEFUL] == 10.0 + 10.0 + 18.0
    assert out[K.R_STACK_STEPS] == 1 + 1 + 2 and out[K.R_MASKED] == 2 and out[K.R_FINISHED] == 1.0
    assert_same(f, i, arrays)


def test_reference_hand_computed_wipe_outs_and_restarts():
    # ckpt, dyadic: steps of 10 s, a save of 4 s after every 20 s of progress.  Steps 0, 1
    # then the save [20, 24), steps 2 [24, 34) and 3; a failure at 30 wipes step 2 out:
    # rework 6 s, restart [30, 94).  A failure at 50 during the restart (carry) wipes the
    # resumed job out again: a second restart [94, 158).  Then steps 2..4 and a save
    # after step 3: 158 + 20 + 4 + 10 = 192.  The failure at 500 is beyond the run.
    f, i = packed("ckpt", "dyadic", steps=5, period=20.0)
    arrays = trace_arrays("ckpt", 1, [30.0, 50.0, 500.0], [1, 1, 1])
    log = []
    out = naive_run_kernel(f, i, *arrays, log=log)
    assert log == [("step", "wipe-out"), ("restart", "wipe-out")]
    assert out[K.R_WALL] == 192.0 and out[K.R_RESTARTS] == 2 and out[K.R_RESTART] == 128.0
    assert out[K.R_REWORK] == 6.0 and out[K.R_CHECKPOINTS] == 2 and out[K.R_CHECKPOINT] == 8.0
    assert out[K.R_USEFUL] == 50.0 and out[K.R_FAILURES] == 2 and out[K.R_EPOCHS_USED] == 3
    assert_same(f, i, arrays)
    # the same failures absorbed by the restart: one restart, the failure at 50 only counted
    f, i = packed("ckpt", "dyadic", steps=5, period=20.0, carry=False)
    out = assert_same(f, i, arrays)
    assert out[K.R_RESTARTS] == 1 and out[K.R_ABSORBED] == 1 and out[K.R_WALL] == 128.0


def test_reference_failures_during_a_save():
    # rep r = 2, dyadic: steps of 2 * 8 + 2 = 18 s, a save after each.  Save 0 is [18, 22):
    # a masked failure at 19 lengthens it by the shrink only (replication has no controller);
    # save 1 starts at 22.25 + 18 = 40.25 and a wipe-out at 41 loses it and the step before,
    # which is redone after the restart and saved again (4 s; none after the last step).
    f, i = packed("rep", "dyadic", steps=3, period=1.0)
    arrays = trace_arrays("rep", 2, [19.0, 41.0], [0, 1])
    log = []
    out = naive_run_kernel(f, i, *arrays, log=log)
    assert log == [("save", "masked"), ("save", "wipe-out")]
    assert out[K.R_CHECKPOINT] == 4.25 + 0.75 + 4.0 and out[K.R_REWORK] == 18.0
    assert out[K.R_WALL] == 41.0 + 64.0 + 18.0 + 4.0 + 18.0
    assert_same(f, i, arrays)


# ----------------------------------------------------------------------------- trace mode, exact
def _scenarios():
    """Deterministic trace scenarios: every strategy, timing, period and restart policy."""
    out = []
    rng = np.random.default_rng(2026)
    for strategy, r in (("ckpt", 1), ("rep", 2), ("rep", 3), ("spare", 3)):
        for timing in TIMINGS:
            tm = TIMINGS[timing]
            step = tm["layer"] + tm["allreduce"]
            for period_steps in (0.5, 3, 1e6):  # a save after every step, every few, never
                for carry in (True, False):
                    for mean_gap in (0.3 * step, 2 * step, 0.5 * tm["restart"]):
                        grid = {"dyadic": 2.0, "no-masking-cost": 3.0, "instant-restart": 0.5}.get(timing)
                        wipe_rate = 0.05 if mean_gap < step else 0.3
                        arrays = random_trace(rng, strategy, r, 80, mean_gap, wipe_rate, grid)
                        f, i = packed(strategy, timing, steps=25, period=period_steps * step, carry=carry,
                                      max_wall_factor=8.0)
                        name = f"{strategy}{r}-{timing}-p{period_steps}-{'carry' if carry else 'absorb'}-g{mean_gap:g}"
                        out.append((name, f, i, arrays))
    return out


def _repair_scenarios():
    """Event scenarios with rejoins and step costs that are not whole numbers (micro-batches)."""
    out = []
    rng = np.random.default_rng(2027)
    for strategy, r in (("rep", 3), ("spare", 3), ("spare", 5)):
        for timing in ("dyadic", "decimal", "paper", "instant-restart"):
            tm = TIMINGS[timing]
            step = tm["layer"] + tm["allreduce"]
            for period_steps in (0.5, 3):
                for mean_gap in (0.3 * step, 2 * step, 0.5 * tm["restart"]):
                    for m in ((1, 3) if strategy == "rep" else (1, 8)):
                        grid = {"dyadic": 2.0, "instant-restart": 0.5}.get(timing)
                        arrays = random_trace(rng, strategy, r, 80, mean_gap, 0.05 if mean_gap < step else 0.2,
                                              grid, rejoin_rate=0.4, micro_batches=m)
                        f, i = packed(strategy, timing, steps=25, period=period_steps * step, max_wall_factor=8.0)
                        f[K.F_PATCH_LAYERS] = tm["patch"] * np.ceil(m / (r - 1)) / m
                        name = f"{strategy}{r}-{timing}-p{period_steps}-g{mean_gap:g}-m{m}"
                        out.append((name, f, i, arrays))
    return out


SCENARIOS = _scenarios()
REPAIR_SCENARIOS = _repair_scenarios()


@pytest.mark.parametrize("name, f, i, arrays", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_trace_mode_kernel_equals_reference(name, f, i, arrays):
    assert_same(f, i, arrays)


@pytest.mark.parametrize("name, f, i, arrays", REPAIR_SCENARIOS, ids=[s[0] for s in REPAIR_SCENARIOS])
def test_events_with_rejoins_and_step_costs_kernel_equals_reference(name, f, i, arrays):
    assert_same(f, i, arrays)


def test_repair_scenarios_cover_every_situation():
    seen = set()
    for _name, f, i, arrays in REPAIR_SCENARIOS:
        log = []
        naive_run_kernel(f, i, *arrays, log=log)
        seen.update(log)
    assert {("step", "rejoin"), ("save", "rejoin"), ("restart", "rejoin"), ("step", "all-reduce"),
            ("save", "masked"), ("restart", "wipe-out")} <= seen


def test_trace_scenarios_cover_every_situation():
    # The equality above is only as good as the situations it meets: check they all occur.
    seen = set()
    beyond = unfinished = simultaneous = 0
    for _name, f, i, arrays in SCENARIOS:
        log = []
        out = naive_run_kernel(f, i, *arrays, log=log)
        seen.update(log)
        times = arrays[3][:, K.EV_TIME]
        beyond += int(times[-1] > out[K.R_WALL])
        unfinished += int(out[K.R_FINISHED] == 0.0)
        simultaneous += int(np.any(np.diff(times[times < out[K.R_WALL]]) == 0.0))
    assert seen == {("step", "compute"), ("step", "all-reduce"), ("step", "wipe-out"), ("save", "masked"),
                    ("save", "wipe-out"), ("restart", "masked"), ("restart", "wipe-out"),
                    ("restart", "absorbed"), ("restart", "wall-time cap")}
    assert beyond > 20 and unfinished > 5 and simultaneous > 20


@settings(max_examples=150)
@given(
    strategy=st.sampled_from(["ckpt", "rep", "spare"]),
    timing=st.sampled_from(sorted(TIMINGS)),
    steps=st.integers(1, 30),
    period=st.sampled_from([1.0, 25.0, 90.0, 1e9]),
    carry=st.booleans(),
    cap=st.sampled_from([1.5, 4.0, 200.0]),
    events=st.lists(st.tuples(st.sampled_from([0.0, 0.125, 1.0, 2.0, 6.0, 8.0, 10.0, 64.0]) | st.floats(0.0, 400.0),
                              st.integers(0, 4), st.integers(1, 3)), max_size=60),
)
def test_trace_mode_kernel_equals_reference_hypothesis(strategy, timing, steps, period, carry, cap, events):
    r = 3
    times = np.cumsum([gap for gap, _, _ in events])
    wipes = [1 if strategy == "ckpt" or kind == 0 else 0 for _, kind, _ in events]
    stacks = [stack if strategy == "spare" else (r if strategy == "rep" else 1) for _, _, stack in events]
    f, i = packed(strategy, timing, steps=steps, period=period, carry=carry, max_wall_factor=cap)
    assert_same(f, i, trace_arrays(strategy, r, times, wipes, stacks))


@settings(max_examples=150)
@given(
    strategy=st.sampled_from(["rep", "spare"]),
    timing=st.sampled_from(sorted(TIMINGS)),
    steps=st.integers(1, 30),
    period=st.sampled_from([1.0, 25.0, 90.0, 1e9]),
    carry=st.booleans(),
    cap=st.sampled_from([1.5, 4.0, 200.0]),
    m=st.sampled_from([1, 2, 3, 8]),
    events=st.lists(st.tuples(st.sampled_from([0.0, 0.125, 1.0, 2.0, 6.0, 8.0, 10.0, 64.0]) | st.floats(0.0, 400.0),
                              st.integers(0, 5), st.integers(1, 24)), max_size=60),
)
def test_events_with_rejoins_kernel_equals_reference_hypothesis(strategy, timing, steps, period, carry, cap, m,
                                                                events):
    # kind 0: a wipe-out, 1-2: a masked failure, 3-5: a rejoin; the load (1..24) over m is the step cost
    r = 3
    times = np.cumsum([gap for gap, _, _ in events])
    kinds = [K.KIND_REJOIN if kind >= 3 else K.KIND_FAILURE for _, kind, _ in events]
    wipes = [1 if kind == 0 else 0 for _, kind, _ in events]
    stacks = [min(r, -(-load // m)) if strategy == "spare" else r for _, _, load in events]
    costs = [load / m if strategy == "spare" else float(r) for _, _, load in events]
    f, i = packed(strategy, timing, steps=steps, period=period, carry=carry, max_wall_factor=cap)
    assert_same(f, i, trace_arrays(strategy, r, times, wipes, stacks, costs, kinds))


@settings(max_examples=120)
@given(
    strategy=st.sampled_from(["ckpt", "rep", "spare"]),
    timing=st.sampled_from(sorted(TIMINGS)),
    steps=st.integers(1, 400),
    period=st.sampled_from([1.0, 25.0, 90.0, 1e9]),
    carry=st.booleans(),
    jitter=st.sampled_from([0.05, 0.3, 1.5]),
    seed=st.integers(0, 2**32 - 1) | st.sampled_from([0, 1, 2**31 - 1, 2**31, 2**32 - 1]),
    events=st.lists(st.tuples(st.sampled_from([0.0, 0.125, 1.0, 2.0, 6.0, 8.0, 10.0, 64.0]) | st.floats(0.0, 400.0),
                              st.integers(0, 5), st.integers(1, 24)), max_size=60),
)
def test_events_with_jitter_kernel_equals_reference_on_the_kernel_stream(strategy, timing, steps, period, carry,
                                                                         jitter, seed, events):
    # With jitter the events mode draws nothing but the jitters; the reference takes them
    # one by one from numpy's legacy stream (numba's np.random), so the kernel, which draws
    # the steps' jitters inline from its blocks and skips the event handler on steps that
    # no event reaches, must agree to the last bit.  400 steps cross many blocks of 312
    # doubles; sd 1.5 makes many jitters 0 (a negative normal).
    r = 3
    times = np.cumsum([gap for gap, _, _ in events])
    kinds = [K.KIND_REJOIN if kind >= 4 and strategy != "ckpt" else K.KIND_FAILURE for _, kind, _ in events]
    wipes = [1 if strategy == "ckpt" or kind == 0 else 0 for _, kind, _ in events]
    stacks = [min(r, -(-load // 4)) if strategy == "spare" else (r if strategy == "rep" else 1) for _, _, load in events]
    costs = [load / 4 if strategy == "spare" else float(stack) for (_, _, load), stack in zip(events, stacks)]
    f, i = packed(strategy, timing, steps=steps, period=period, carry=carry, jitter=jitter, seed=seed)
    arrays = trace_arrays(strategy, r, times, wipes, stacks, costs, kinds)
    kernel = K.run_kernel(f, i, *arrays)
    reference = naive_run_kernel(f, i, *arrays, kernel_stream=True)
    differ = np.nonzero(kernel != reference)[0]
    assert differ.size == 0, {int(d): (kernel[d], reference[d]) for d in differ}


@settings(max_examples=60)
@given(
    strategy=st.sampled_from(["rep", "spare"]),
    steps=st.integers(1, 700),
    ahead=st.integers(0, 1500) | st.sampled_from([0, 1, 2, 311, 312, 313, 624]),
    seed=st.integers(0, 2**32 - 1),
    other_seed=st.booleans(),
    events=st.lists(st.tuples(st.floats(0.0, 300.0), st.integers(0, 5), st.integers(1, 12)), max_size=40),
)
def test_runs_on_normals_drawn_ahead_equal_the_plain_kernel(strategy, steps, ahead, seed, other_seed, events):
    # run_kernel_from reads the normals drawn ahead for the seed, then goes on with the
    # stream after them: any count (odd, shorter or longer than the run needs) gives the
    # plain kernel's numbers, and a stream of another seed is not used.
    r = 3
    times = np.cumsum([gap for gap, _, _ in events])
    kinds = [K.KIND_REJOIN if kind >= 4 else K.KIND_FAILURE for _, kind, _ in events]
    wipes = [1 if kind == 0 else 0 for _, kind, _ in events]
    stacks = [min(r, -(-load // 4)) if strategy == "spare" else r for _, _, load in events]
    costs = [load / 4 if strategy == "spare" else float(r) for _, _, load in events]
    f, i = packed(strategy, "decimal", steps=steps, period=50.0, jitter=0.3, seed=seed)
    arrays = trace_arrays(strategy, r, times, wipes, stacks, costs, kinds)
    stream = K.normals_ahead(seed + 1 if other_seed else seed, ahead)
    kept = [a.copy() for a in stream]
    assert np.array_equal(K.run_kernel_from(f, i, *arrays, *stream), K.run_kernel(f, i, *arrays))
    assert all(np.array_equal(a, b) for a, b in zip(stream, kept))  # the kept stream is not changed


def test_normals_drawn_ahead_are_the_streams_normals():
    rs = np.random.RandomState(11)
    ahead = K.normals_ahead(11, 1001)[0]
    assert ahead.size == 1002
    assert np.array_equal(ahead, [rs.normal(0.0, 1.0) for _ in range(1002)])


def test_open_ended_events_need_more_exactly_when_the_run_reaches_the_horizon():
    # Events up to a horizon H with "more may come": a run that gets to H stops with
    # R_NEED_MORE; one that ends before H gives what the whole event list gives.
    rng = np.random.default_rng(7)
    reached = ended = 0
    for trial in range(40):
        strategy = ("rep", "spare")[trial % 2]
        arrays = random_trace(rng, strategy, 3, 120, 25.0, 0.1, 2.0, rejoin_rate=0.3, micro_batches=4)
        f, i = packed(strategy, "dyadic", steps=int(rng.integers(5, 60)), period=30.0)
        whole = assert_same(f, i, arrays)
        horizon = float(rng.uniform(50.0, 1500.0))
        events = arrays[3]
        given = events[events[:, K.EV_TIME] <= horizon]
        f[K.F_EVENTS_HORIZON] = horizon
        i[K.I_EVENTS_OPEN] = 1
        cut = K.run_kernel(f, i, *arrays[:3], given)
        # with R_NEED_MORE the other entries are meaningless (the run is redone with more)
        assert naive_run_kernel(f, i, *arrays[:3], given)[K.R_NEED_MORE] == cut[K.R_NEED_MORE]
        if cut[K.R_NEED_MORE] == 1.0:
            reached += 1
            assert whole[K.R_WALL] >= horizon
        else:
            ended += 1
            assert np.array_equal(cut, whole)
    assert reached >= 5 and ended >= 5


def test_reference_hand_computed_rejoin_in_a_step():
    # SPARe, dyadic.  Step 0 is [0, 10); a failure at 4 (compute) leaves step cost 1.25
    # (stack number 2) and costs 0.25 + (0.125 + 8): step 0 ends at 18.375.  Step 1 has
    # 1.25 * 8 = 10 s of compute: [18.375, 30.375).  A healed group is ready at 20: it
    # joins at the end of step 1, which the communicator change (0.25 + 0.125) makes
    # 30.75; the step cost falls back to 1 from step 2 on: [30.75, 40.75).
    f, i = packed("spare", "dyadic", steps=3, period=1e9)
    arrays = trace_arrays("spare", 3, [4.0, 20.0], [0, 0], stacks=[2, 1], costs=[1.25, 1.0],
                          kinds=[K.KIND_FAILURE, K.KIND_REJOIN])
    log = []
    out = naive_run_kernel(f, i, *arrays, log=log)
    assert log == [("step", "compute"), ("step", "rejoin")]
    assert out[K.R_WALL] == 40.75
    assert out[K.R_USEFUL] == 10.0 + 12.0 + 10.0 and out[K.R_OVERHEAD] == 8.375 + 0.375
    assert out[K.R_COST_STEPS] == 1.0 + 1.25 + 1.0 and out[K.R_STACK_STEPS] == 1 + 2 + 1
    assert out[K.R_REJOINS] == 1 and out[K.R_MASKED] == 1 and out[K.R_FAILURES] == 1
    assert_same(f, i, arrays)


def test_reference_hand_computed_rejoins_in_a_save_and_a_restart():
    # rep r = 2, dyadic: steps of 2 * 8 + 2 = 18 s, a save (4 s) after each.  A masked
    # failure at 5 costs the shrink: step 0 ends at 18.25.  A rejoin at 20 lengthens
    # save 0 [18.25, 22.25) by the shrink: 22.5.  Step 1 [22.5, 40.5), save 1 from 40.5
    # is wiped out at 42: restart [42, 106), in which a rejoin at 50 is free.  Step 1
    # again [106, 124), save [124, 128), step 2 [128, 146).
    f, i = packed("rep", "dyadic", steps=3, period=1.0)
    arrays = trace_arrays("rep", 2, [5.0, 20.0, 42.0, 50.0], [0, 0, 1, 0],
                          kinds=[K.KIND_FAILURE, K.KIND_REJOIN, K.KIND_FAILURE, K.KIND_REJOIN])
    log = []
    out = naive_run_kernel(f, i, *arrays, log=log)
    assert log == [("step", "compute"), ("save", "rejoin"), ("save", "wipe-out"), ("restart", "rejoin")]
    assert out[K.R_WALL] == 146.0
    assert out[K.R_CHECKPOINT] == 4.25 + 1.5 + 4.0 and out[K.R_REWORK] == 18.0 and out[K.R_RESTART] == 64.0
    assert out[K.R_USEFUL] == 54.0 and out[K.R_OVERHEAD] == 0.25
    assert out[K.R_REJOINS] == 2 and out[K.R_FAILURES] == 2 and out[K.R_RESTARTS] == 1
    assert_same(f, i, arrays)


def test_trace_mode_empty_trace_and_single_step():
    for strategy in STRATEGY:
        f, i = packed(strategy, "paper", steps=1, period=1.0)
        out = assert_same(f, i, trace_arrays(strategy, 3, [], []))
        assert out[K.R_CHECKPOINTS] == 0 and out[K.R_FINISHED] == 1.0


@pytest.mark.parametrize("strategy, r", [("ckpt", 1), ("rep", 3), ("spare", 4)])
def test_trace_mode_real_trace(real_trace_path, strategy, r):
    trace = read_fault_trace(real_trace_path)
    layout = default_layout(400, r) if strategy == "spare" else None
    for scale, period in ((0.02, 500.0), (0.2, 5000.0)):
        times, stacks, wipes, _ = trace_failures(trace, 400, strategy, r, layout=layout, time_scale=scale)
        f, i = packed(strategy, "paper", steps=20_000, period=period, groups=400)
        out = assert_same(f, i, trace_arrays(strategy, r, times, wipes, stacks))
        assert out[K.R_FINISHED] == 1.0 and out[K.R_FAILURES] > 50


# ----------------------------------------------------------------------------- random mode, in law
RANDOM_TIMING = dict(layer=10.0, allreduce=1.0, shrink=0.5, controller=0.5, restart=200.0, save=5.0, patch=1.0)
LAYOUTS = {"consecutive": consecutive(24, 3), "block": block(24, 4), "latin": random_latin(24, 4, seed=3)}
# (strategy, r, layout, failure model, carry, rate follows live, MTBF).  Checkpointing
# alone with carried group clocks is where restarts chain (any failure inside a restart
# wipes out again): the config that sees whether a second restart restarts the clocks.
RANDOM_CONFIGS = [
    ("spare", 3, "consecutive", K.MODEL_GROUP_CLOCKS, True, True, 60.0),
    ("spare", 4, "latin", K.MODEL_GROUP_CLOCKS, False, True, 35.0),
    ("spare", 4, "block", K.MODEL_SYSTEM_RENEWAL, True, True, 40.0),
    ("spare", 3, "consecutive", K.MODEL_SYSTEM_RENEWAL, False, False, 40.0),
    ("rep", 3, None, K.MODEL_GROUP_CLOCKS, True, True, 50.0),
    ("rep", 2, None, K.MODEL_SYSTEM_RENEWAL, False, True, 40.0),
    ("ckpt", 1, None, K.MODEL_GROUP_CLOCKS, True, True, 300.0),
    ("ckpt", 1, None, K.MODEL_SYSTEM_RENEWAL, False, True, 200.0),
]
SEEDS = 200
ALPHA = 1e-3
METRICS = ("ttt_ratio", "restarts", "availability", "masked")


def _synthetic_run(run, f, i, pool):
    """One run of ``run`` (kernel or reference), growing ``pool`` until it suffices."""
    if pool.strategy != "ckpt" and pool.wipe.size == 0:
        pool.extend(16)
    while True:
        out = run(f, i, pool.stack, pool.cost, pool.wipe, np.zeros((0, K.N_EV)))
        if out[K.R_NEED_MORE] == 0.0:
            return out
        pool.extend(max(16, pool.wipe.size))


def _metrics(run, config, seeds):
    strategy, r, layout, model, carry, live, mtbf = config
    steps = 200
    rows = []
    for seed in seeds:
        f, i = packed(strategy, RANDOM_TIMING, steps=steps, period=60.0, groups=24, carry=carry, trace=False,
                      jitter=0.05, mtbf=mtbf, model=model, follow_live=live, seed=seed)
        pool = FailurePool(strategy, 24, r, seed, LAYOUTS.get(layout))
        out = _synthetic_run(run, f, i, pool)
        assert out[K.R_FINISHED] == 1.0
        wall = out[K.R_WALL]
        t0 = steps * (RANDOM_TIMING["layer"] + RANDOM_TIMING["allreduce"])
        rows.append((wall / t0, out[K.R_RESTARTS], (out[K.R_USEFUL] + out[K.R_OVERHEAD]) / wall,
                     out[K.R_MASKED]))
    return np.array(rows)


@pytest.mark.parametrize("config", RANDOM_CONFIGS, ids=lambda c: "-".join(map(str, c)))
def test_random_mode_statistics_agree(config):
    # Independent samples: the kernel runs seeds 0..S-1, the reference seeds from 10**6,
    # each with its own trajectory pool.  Welch's t at ALPHA per metric; with 8 configs x
    # 4 metrics the family-wise false-alarm rate is at most 32 * ALPHA (Bonferroni).
    # The seeds are fixed, so the test is deterministic: this is the rate at which a
    # correct change of random streams would break it.
    kernel = _metrics(K.run_kernel, config, range(SEEDS))
    reference = _metrics(naive_run_kernel, config, range(10**6, 10**6 + SEEDS))
    for column, name in enumerate(METRICS):
        a, b = kernel[:, column], reference[:, column]
        if np.all(a == a[0]) and np.all(b == b[0]):
            assert a[0] == b[0], name  # e.g. no masked failure at all with checkpointing alone
            continue
        p = stats.ttest_ind(a, b, equal_var=False).pvalue
        assert p > ALPHA, f"{name}: kernel {a.mean():.4g} +- {a.std(ddof=1):.2g}, " \
                          f"reference {b.mean():.4g} +- {b.std(ddof=1):.2g}, p = {p:.2g}"


def test_random_mode_reference_is_deterministic_per_seed():
    config = RANDOM_CONFIGS[0]
    assert np.array_equal(_metrics(naive_run_kernel, config, [5, 6]), _metrics(naive_run_kernel, config, [5, 6]))
    assert not np.array_equal(_metrics(naive_run_kernel, config, [5]), _metrics(naive_run_kernel, config, [6]))


def test_random_mode_jitter_law():
    # No failure: the wall time is the sum of jittered step compute, all-reduce and saves
    # (a save after every step), each about a third of the variance, so a duration left
    # unjittered lowers the spread by a fifth or more, which Brown-Forsythe's test sees at
    # 1000 runs; the mean is checked too.
    timing = dict(layer=10.0, allreduce=10.0, shrink=0.0, controller=0.0, restart=0.0, save=10.0, patch=0.0)
    walls = []
    for run, first in ((K.run_kernel, 0), (naive_run_kernel, 10**6)):
        pool = FailurePool("ckpt", 24, 1, 0)
        walls.append(np.array([
            _synthetic_run(run, *packed("ckpt", timing, steps=40, period=1.0, trace=False, jitter=0.2, mtbf=1e18,
                                        seed=seed), pool)[K.R_WALL]
            for seed in range(first, first + 1000)]))
    kernel, reference = walls
    assert stats.ttest_ind(kernel, reference, equal_var=False).pvalue > ALPHA
    assert stats.levene(kernel, reference, center="median").pvalue > ALPHA
    # 40 steps of 10 + 10 s and 39 saves of 10 s: mean 1190 s, sd 0.2 * sqrt(80 * 100 + 39 * 100) = 21.8 s
    assert abs(reference.mean() - 1190.0) < 3.0 and 20.0 < reference.std() < 24.0

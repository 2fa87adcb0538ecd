"""Tests of the online reorder controller against the exact planner and brute force."""

import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import block_stacks, circulant_stacks, naive_least_stack_number

from spare_opt.layouts import generators
from spare_opt import (
    MASKED,
    WIPE_OUT,
    FailureSetError,
    Layout,
    ParameterTypeError,
    Plan,
    SpareError,
    check_plan,
    plan_reorder,
)
from spare_opt.planning.controller import (
    ReorderController,
    stack_number_trajectories,
    stack_number_trajectory,
)

KINDS = ("consecutive", "sidon", "block", "random")


def make_layout(kind, n, r, seed):
    """A layout from ``spare_opt.layouts.generators`` (``sidon`` minimises the overlap when no Sidon set exists)."""
    if kind == "consecutive":
        return generators.consecutive(n, r)
    if kind == "sidon":
        return generators.sidon(n, r, time_limit=1.0, seed=seed)
    if kind == "block":
        return generators.block(n, r)
    return generators.random_latin(n, r, seed=seed)


@st.composite
def scenarios(draw, batched=True):
    kind = draw(st.sampled_from(KINDS))
    r = draw(st.integers(1, 4))
    if kind == "block":
        n = r * draw(st.integers(max(1, -(-2 // r)), max(1, 14 // r)))
    else:
        n = draw(st.integers(max(r, 2), 14))
    layout = make_layout(kind, n, r, draw(st.integers(0, 2**16)))
    permutation = draw(st.permutations(range(n)))
    batches = []
    start = 0
    while start < n:
        size = draw(st.integers(1, 3)) if batched else 1
        batches.append((permutation[start:start + size], draw(st.booleans()) if batched else False))
        start += size
    return layout, batches


def _run_against_planner(layout, batches):
    """Fail every batch; compare each plan with plan_reorder given the controller's previous state."""
    controller = ReorderController(layout)
    previous_order = layout.stacks.copy()
    previous_stack = 1
    failed = []
    plans = []
    for groups, mid_step in batches:
        failed.extend(groups)
        argument = groups[0] if len(groups) == 1 and not mid_step else groups
        plan = controller.fail(argument, mid_step=mid_step)
        exact = plan_reorder(layout, failed, order=previous_order, stack_number=previous_stack,
                             mid_step=groups if mid_step else ())
        assert isinstance(plan, Plan)
        assert plan.status == exact.status
        assert plan.stack_number == exact.stack_number
        assert plan.lower_bound == exact.lower_bound
        assert np.array_equal(plan.failed, np.sort(failed))
        assert np.array_equal(plan.lost_shards, exact.lost_shards)
        check_plan(layout, plan, previous_order)
        if plan.status == WIPE_OUT:
            assert controller.stack_number is None and controller.wiped_out
            return controller, plans
        # The planner's move count is the min-cost-flow optimum.
        assert plan.moves >= exact.moves
        patch_items = sorted(item for items in plan.patch.values() for item in items)
        assert patch_items == sorted(item for items in exact.patch.values() for item in items)
        assert all(j == 0 for _, j in patch_items)
        assert controller.stack_number == plan.stack_number
        assert np.array_equal(controller.assignment, plan.assignment)
        assert np.array_equal(controller.order, plan.order)
        plans.append((plan, plan.assignment.copy(), plan.order.copy()))
        previous_order = plan.order.copy()
        previous_stack = plan.stack_number
    raise AssertionError("failing every group must wipe out")


@given(scenarios(batched=False))
def test_single_failures_agree_with_exact_planner(scenario):
    _run_against_planner(*scenario)


@given(scenarios(batched=True))
def test_batched_and_mid_step_failures_agree_with_exact_planner(scenario):
    _run_against_planner(*scenario)


@pytest.mark.parametrize("kind", KINDS)
def test_stack_numbers_match_hall_brute_force(kind):
    # Independent of the planner: S* from Hall's condition over all subsets (N <= 10).
    layout = make_layout(kind, 8, 2 if kind == "block" else 3, seed=5)
    rng = np.random.default_rng(11)
    for _ in range(4):
        controller = ReorderController(layout)
        sequence = rng.permutation(8).tolist()
        for k, group in enumerate(sequence, start=1):
            plan = controller.fail(group)
            assert plan.stack_number == naive_least_stack_number(layout.stacks, sequence[:k])
            if plan.status == WIPE_OUT:
                break


@given(scenarios(batched=False))
def test_trajectory_equals_step_by_step_controller(scenario):
    layout, batches = scenario
    sequence = [groups[0] for groups, _ in batches]
    controller = ReorderController(layout)
    expected_stacks, expected_moves, expected_wipe_out = [1], [], -1
    for j, group in enumerate(sequence, start=1):
        plan = controller.fail(group)
        if plan.status == WIPE_OUT:
            expected_wipe_out = j
            break
        expected_stacks.append(plan.stack_number)
        expected_moves.append(plan.moves)
    stack_numbers, wipe_out_index, moves = stack_number_trajectory(layout, np.array(sequence), return_moves=True)
    assert stack_numbers.dtype == np.int32
    assert stack_numbers.tolist() == expected_stacks
    assert wipe_out_index == expected_wipe_out
    assert moves.tolist() == expected_moves
    # The batched variant runs several trials through the same compiled loop.
    rng = np.random.default_rng(len(sequence))
    orders = np.array([sequence, rng.permutation(layout.groups).tolist(), sequence])
    many, wipe_outs, many_moves = stack_number_trajectories(layout, orders)
    for row, order in enumerate(orders):
        single, index, single_moves = stack_number_trajectory(layout, order, return_moves=True)
        assert wipe_outs[row] == index
        assert many[row, :len(single)].tolist() == single.tolist()
        assert np.all(many[row, len(single):] == -1)
        assert many_moves[row, :len(single_moves)].tolist() == single_moves.tolist()


def test_trajectory_without_wipe_out_has_every_prefix():
    layout = Layout(circulant_stacks(13, [0, 1, 3, 9]), offsets=[0, 1, 3, 9])
    stack_numbers, wipe_out_index = stack_number_trajectory(layout, [4, 7])
    assert wipe_out_index == -1
    assert stack_numbers.tolist() == [1, 2, 2]
    stack_numbers, wipe_out_index = stack_number_trajectory(layout, [])
    assert stack_numbers.tolist() == [1] and wipe_out_index == -1


# ---------------------------------------------------------------- adversarial
def test_all_holders_of_one_shard_failing_at_once_wipes_out():
    layout = Layout(circulant_stacks(13, [0, 1, 3, 9]), offsets=[0, 1, 3, 9])
    holders = [g for g in range(13) if 5 in layout.stacks[g]]
    controller = ReorderController(layout)
    plan = controller.fail(holders)
    assert plan.status == WIPE_OUT and plan.stack_number is None
    assert plan.lost_shards.tolist() == [5]
    assert plan.assignment is None and plan.order is None and plan.moves == 0
    check_plan(layout, plan)
    with pytest.raises(FailureSetError, match="restart"):
        controller.fail(0)


def test_failing_a_whole_block_loses_its_shard_types():
    layout = Layout(block_stacks(12, 3))
    controller = ReorderController(layout)
    assert controller.fail([0, 1]).stack_number == 3  # the third member computes all three types
    plan = controller.fail(2)
    assert plan.status == WIPE_OUT and plan.lost_shards.tolist() == [0, 1, 2]


def test_augmenting_path_keeps_the_stack_number():
    """Greedy alone would raise S here: every live holder of the displaced type is full.

    Found by search on small circulant layouts and pinned: after groups 3 and 4 fail
    (S = 2), group 0 fails and the type it contributes can only be placed by moving
    another type from a full holder to a group with room (a path of two groups).
    """
    layout = Layout(circulant_stacks(6, [0, 2, 5]), offsets=[0, 2, 5])
    controller = ReorderController(layout)
    controller.fail(3)
    before = controller.fail(4)
    stack = before.stack_number
    assignment = before.assignment.copy()
    load = np.bincount(assignment, minlength=6)
    displaced = np.flatnonzero(assignment == 0)
    live_holders = [[g for g in range(6) if t in layout.stacks[g] and g not in (0, 3, 4)] for t in displaced]
    assert any(all(load[g] >= stack for g in holders) for holders in live_holders), "greedy would place it"
    plan = controller.fail(0)
    exact = plan_reorder(layout, [0, 3, 4], order=before.order, stack_number=stack)
    assert plan.stack_number == exact.stack_number == stack
    check_plan(layout, plan, before.order)
    reassigned_live = [t for t in range(6) if assignment[t] != 0 and plan.assignment[t] != assignment[t]]
    assert reassigned_live, "an augmenting path moves a type between two live groups"


def test_forced_raise_matches_lower_bound():
    layout = Layout(circulant_stacks(7, [0, 1, 3]), offsets=[0, 1, 3])
    controller = ReorderController(layout)
    plan = controller.fail(0)
    assert plan.stack_number == plan.lower_bound == 2
    assert plan.moves == 0  # group 6 has type 0 at layer 1: the fixed check at S = 2 passes


# ------------------------------------------------------------------ state
def test_restart_resets_everything():
    layout = make_layout("sidon", 11, 3, seed=1)
    controller = ReorderController(layout)
    plans = [controller.fail(g) for g in (0, 5)]
    assert controller.stack_number == 2
    for g in range(11):
        if controller.alive[g] and controller.fail(g).status == WIPE_OUT:
            break
    assert controller.wiped_out and controller.assignment is None and controller.order is None
    controller.restart()
    assert controller.stack_number == 1 and not controller.wiped_out
    assert controller.alive.all() and controller.failed.size == 0
    assert np.array_equal(controller.order, layout.stacks)
    assert np.array_equal(controller.assignment[layout.stacks[:, 0]], np.arange(11))
    assert controller.fail(0).stack_number == 2
    # Plans from before the restart keep their values.
    assert plans[0].failed.tolist() == [0] and plans[1].failed.tolist() == [0, 5]
    check_plan(layout, plans[0], layout.stacks)


def test_lazy_plans_keep_the_state_of_their_call():
    # Plans are materialised on first access, here only after every later failure.
    layout = make_layout("random", 14, 4, seed=3)
    controller = ReorderController(layout)
    # Start from a journal with room for one record only, so that it must grow.
    history = controller._history
    history.journal = np.zeros(history.record_room, dtype=np.int32)
    snapshots, plans = [], []
    for group in np.random.default_rng(2).permutation(14).tolist():
        plan = controller.fail(group)
        if plan.status == WIPE_OUT:
            break
        snapshots.append((controller.failed, controller.assignment.copy(), controller.order.copy()))
        plans.append(plan)
        if len(plans) == 2:
            plans.append(controller.fail([]))  # an empty failure set changes nothing
            snapshots.append(snapshots[-1])
            assert plans[-1].moves == 0 and plans[-1].stack_number == plan.stack_number
    assert len(plans) > 3
    assert history.journal.size > history.record_room
    for (failed, assignment, order), plan in zip(snapshots, plans):
        assert np.array_equal(plan.failed, failed)
        assert np.array_equal(plan.assignment, assignment)
        assert np.array_equal(plan.order, order)
        assert plan.to_dict()["order"] is not None
    copied = pickle.loads(pickle.dumps(plans[0]))
    assert type(copied) is Plan and repr(plans[0]).startswith("Plan(")
    assert copied.to_dict() == plans[0].to_dict()


def test_views_are_read_only():
    controller = ReorderController(make_layout("consecutive", 6, 2, seed=0))
    with pytest.raises(ValueError):
        controller.order[0, 0] = 1
    with pytest.raises(ValueError):
        controller.assignment[0] = 1
    alive = controller.alive
    alive[0] = False
    assert controller.alive[0]


def test_importing_compiles_nothing():
    code = (
        "import spare_opt, spare_opt.planning._kernels as k, sys;"
        "assert not k.fail_packed.signatures and not k.fail_groups.signatures and not k.run_trajectories.signatures;"
        "assert 'matplotlib' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "groups,needle",
    [
        (13, "out of range"),
        (-1, "out of range"),
        ([1, 1], "more than once"),
        ([2.0], "not an integer"),
        (True, "not an integer"),
        (3.5, "not an integer"),
        (None, "iterable"),
        ([0], "failed already"),
        (0, "failed already"),
    ],
)
def test_bad_failure_sets_are_named(groups, needle):
    controller = ReorderController(Layout(circulant_stacks(13, [0, 1, 3, 9])))
    controller.fail(0)
    before = controller.order.copy()
    with pytest.raises(FailureSetError, match=needle):
        controller.fail(groups)
    assert np.array_equal(controller.order, before)


def test_bad_arguments():
    layout = Layout(circulant_stacks(7, [0, 1, 3]))
    with pytest.raises(ParameterTypeError, match="Layout"):
        ReorderController(layout.stacks)
    with pytest.raises(ParameterTypeError, match="Layout"):
        stack_number_trajectory(layout.stacks, [0])
    with pytest.raises(ParameterTypeError, match="Layout"):
        stack_number_trajectories(None, [[0]])
    with pytest.raises(ParameterTypeError, match="mid_step"):
        ReorderController(layout).fail(1, mid_step="yes")
    with pytest.raises(ParameterTypeError, match="mid_step"):
        ReorderController(layout).fail(1, mid_step=1)
    with pytest.raises(ParameterTypeError, match="return_moves"):
        stack_number_trajectory(layout, [0], return_moves=1)
    with pytest.raises(TypeError):  # return_moves is keyword-only
        stack_number_trajectory(layout, [0], True)
    for bad, needle in [([[0, 1]], "1-D"), ([0, 0], "more than once"), ([9], "out of range"), ([0.5], "integer")]:
        with pytest.raises(FailureSetError, match=needle):
            stack_number_trajectory(layout, bad)
    with pytest.raises(FailureSetError, match="2-D"):
        stack_number_trajectories(layout, [0, 1])
    assert issubclass(FailureSetError, SpareError) and MASKED == "masked"

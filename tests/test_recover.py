"""Repairs (issue 10): ReorderController.recover against the exact planner on random fail/recover sequences."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import block_stacks, circulant_stacks, naive_least_load, naive_least_stack_number

from spare_opt import (
    WIPE_OUT,
    FailureSetError,
    Layout,
    ReorderController,
    check_plan,
    plan_reorder,
)
from test_controller import KINDS, make_layout


def _previous(controller):
    """The controller's current plan as the exact planner's previous-plan arguments."""
    if controller.micro_batches == 1:
        return {"order": controller.order.copy(), "stack_number": controller.stack_number}
    return {"split": controller.split.copy()}


@given(st.data())
def test_random_fail_and_recover_sequences_agree_with_exact_planner(data):
    kind = data.draw(st.sampled_from(KINDS), label="kind")
    r = data.draw(st.integers(1, 4), label="r")
    n = r * data.draw(st.integers(max(1, -(-2 // r)), max(1, 12 // r))) if kind == "block" else \
        data.draw(st.integers(max(r, 2), 12), label="n")
    layout = make_layout(kind, n, r, data.draw(st.integers(0, 2**16), label="seed"))
    m = data.draw(st.sampled_from([1, 2, 3]), label="m")
    controller = ReorderController(layout, micro_batches=m)
    failed = []  # in failure order
    recoveries = 0
    for _ in range(data.draw(st.integers(4, 18), label="events")):
        if controller.wiped_out:
            controller.restart()
            failed = []
            assert controller.load == m and controller.failed.size == 0
        live = [g for g in range(n) if g not in failed]
        if failed and (not live or data.draw(st.booleans(), label="recover?")):
            back = data.draw(st.lists(st.sampled_from(failed), min_size=1, max_size=3, unique=True), label="back")
            previous = _previous(controller)
            plan = controller.recover(back[0] if len(back) == 1 else back)
            recoveries += 1
            failed = [g for g in failed if g not in back]
            if m == 1:  # a returning group resumes with its layout order
                previous["order"][back] = layout.stacks[back]
            exact = plan_reorder(layout, failed, micro_batches=m, **previous)
            # The incremental rejoin gives the exact planner's status, S* and L* (not its
            # plan: among plans of the least load the min-cost flow picks one, the
            # augmenting paths another); its moves are counted as the exact planner counts
            # them, so never below the optimum.  At m > 1, when the optimum is no move,
            # nothing moves and the plan is the exact planner's to the entry.  Not at m = 1:
            # when S* falls the swaps into the new top S* layers may move types that the
            # min-cost flow keeps (consecutive, N = 5, r = 4: fail 1, 2, 0, then recover
            # 2, 1, 0 moves 3 types where the optimum moves none).
            assert (plan.status, plan.stack_number if m == 1 else None, plan.load, plan.lower_bound) == \
                (exact.status, exact.stack_number if m == 1 else None, exact.load, exact.lower_bound)
            assert plan.failed.tolist() == exact.failed.tolist() and plan.patch == exact.patch == {}
            assert plan.moves >= exact.moves
            if exact.moves == 0 and m > 1:
                assert plan.moves == 0 and plan == exact
            fresh = plan_reorder(layout, failed, micro_batches=m)  # no previous plan
            assert plan.status == fresh.status == "masked" and plan.load == fresh.load
            assert plan.load == naive_least_load(layout.stacks, failed, m)
            if m == 1:
                assert plan.stack_number == fresh.stack_number == naive_least_stack_number(layout.stacks, failed)
                check_plan(layout, plan, previous_order=previous["order"])
            else:
                check_plan(layout, plan, previous_split=previous["split"])
            assert controller.failed.tolist() == sorted(failed) and controller.load == plan.load
            assert controller.stack_number == plan.stack_number and np.array_equal(controller.split, plan.split)
            assert np.array_equal(controller.order, plan.order)
            if not failed:
                assert plan.load == m  # everyone back: the fault-free load
            continue
        groups = data.draw(st.lists(st.sampled_from(live), min_size=1, max_size=min(3, len(live)), unique=True),
                           label="fail")
        mid_step = data.draw(st.booleans(), label="mid_step")
        previous = _previous(controller)
        plan = controller.fail(groups, mid_step=mid_step)
        failed.extend(groups)
        exact = plan_reorder(layout, failed, micro_batches=m, mid_step=groups if mid_step else (), **previous)
        assert plan.status == exact.status and plan.load == exact.load and plan.failed.tolist() == sorted(failed)
        if m == 1:
            assert plan.stack_number == exact.stack_number
        check_plan(layout, plan, previous.get("order"), previous.get("split"))
        if plan.status == WIPE_OUT:
            continue
        patched = sorted(item for items in plan.patch.values() for item in items)
        assert patched == sorted(item for items in exact.patch.values() for item in items)


@pytest.mark.parametrize("m", [1, 8])
def test_a_returning_group_takes_work_back(m):
    layout = Layout(circulant_stacks(13, [0, 1, 3, 9]), offsets=[0, 1, 3, 9])
    controller = ReorderController(layout, micro_batches=m)
    controller.fail([2, 7])
    before = controller.split.copy()
    plan = controller.recover(7)
    assert plan.load == plan_reorder(layout, [2], micro_batches=m).load
    if m > 1:  # ceil(8 * 13 / 12) = 9 < ceil(8 * 13 / 11) = 10
        assert plan.load < plan_reorder(layout, [2, 7], micro_batches=m).load
    assert (plan.split == 7).sum() > 0  # group 7 computes again
    if m > 1:
        # Only what the load bound forces moves: the fewest micro-batches change contributor.
        assert plan.moves == plan_reorder(layout, [2], micro_batches=m, split=before).moves
    # The controller continues from the recovered state.
    again = controller.fail(7)
    assert again.load == plan_reorder(layout, [2, 7], micro_batches=m).load


def test_recover_refuses_live_groups_and_wiped_controllers():
    layout = Layout(block_stacks(6, 3))
    controller = ReorderController(layout, micro_batches=2)
    controller.fail(0)
    with pytest.raises(FailureSetError, match="has not failed"):
        controller.recover(1)
    with pytest.raises(FailureSetError, match="out of range"):
        controller.recover([9])
    with pytest.raises(FailureSetError, match="not an integer"):
        controller.recover(0.0)
    before = controller.split.copy()
    assert controller.recover([]).moves == 0 and np.array_equal(controller.split, before)
    controller.fail([1, 2])
    with pytest.raises(FailureSetError, match="restart"):
        controller.recover(0)


def test_plans_from_before_a_recovery_keep_their_values():
    layout = Layout(circulant_stacks(11, [0, 1, 3]))
    for m in (1, 3):
        controller = ReorderController(layout, micro_batches=m)
        first = controller.fail(4)
        split, order = controller.split.copy(), controller.order.copy()
        controller.recover(4)
        controller.fail([5, 6])
        assert np.array_equal(first.split, split) and np.array_equal(first.order, order)
        assert first.failed.tolist() == [4]

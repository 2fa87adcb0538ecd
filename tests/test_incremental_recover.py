"""The incremental ReorderController.recover against the exact planner: random fail / recover /
restart sequences on every layout kind (hand-made ones too), and adversarial rejoins."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import block_stacks, circulant_stacks, naive_least_load, random_latin_stacks

from spare_opt import WIPE_OUT, Layout, ReorderController, check_plan, plan_reorder
from spare_opt.layouts import generators
from spare_opt.planning.controller import WIDEST_LEVEL_FALL
from test_controller import KINDS, make_layout

HAND_MADE = ("circulant", "relabelled", "latin")


def hand_made_layout(kind, n, r, seed):
    """Layouts built from stacks directly: a circulant with random offsets, the same with
    groups and types relabelled (no ring order left), a random Latin rectangle."""
    rng = np.random.default_rng(seed)
    offsets = [0] + sorted(int(o) for o in rng.choice(np.arange(1, n), r - 1, replace=False))
    if kind == "circulant":
        return Layout(circulant_stacks(n, offsets), offsets=offsets)
    if kind == "relabelled":
        stacks = circulant_stacks(n, offsets)
        return Layout(rng.permutation(n)[stacks[rng.permutation(n)]].astype(np.int32))
    return Layout(random_latin_stacks(n, r, rng))


def _previous(controller):
    """The controller's current plan as the exact planner's previous-plan arguments."""
    if controller.micro_batches == 1:
        return {"order": controller.order.copy(), "stack_number": controller.stack_number}
    return {"split": controller.split.copy()}


def _agree(plan, exact, m):
    assert plan.status == exact.status and plan.load == exact.load and plan.lower_bound == exact.lower_bound
    assert plan.failed.tolist() == exact.failed.tolist()
    if m == 1:
        assert plan.stack_number == exact.stack_number


def _recover(layout, controller, failed, back):
    """recover(back) checked against the exact planner given the controller's plan before it."""
    m = controller.micro_batches
    previous = _previous(controller)
    plan = controller.recover(back)
    still = [g for g in failed if g not in back]
    if m == 1:  # a returning group resumes with its layout order
        previous["order"][back] = layout.stacks[back]
    exact = plan_reorder(layout, still, micro_batches=m, **previous)
    _agree(plan, exact, m)
    assert plan.moves >= exact.moves and plan.patch == {}
    assert plan.load == naive_least_load(layout.stacks, still, m)
    check_plan(layout, plan, previous.get("order"), previous.get("split"))
    return plan, still


def _fail(layout, controller, failed, groups, mid_step):
    """fail(groups) checked against the exact planner given the controller's plan before it."""
    m = controller.micro_batches
    previous = _previous(controller)
    plan = controller.fail(groups, mid_step=mid_step)
    failed = failed + list(groups)
    exact = plan_reorder(layout, failed, micro_batches=m, mid_step=groups if mid_step else (), **previous)
    _agree(plan, exact, m)
    check_plan(layout, plan, previous.get("order"), previous.get("split"))
    if plan.status != WIPE_OUT:  # the patch reads the plan recover() left behind
        patched = sorted(item for items in plan.patch.values() for item in items)
        assert patched == sorted(item for items in exact.patch.values() for item in items)
    return plan, failed


@given(st.data())
def test_random_fail_recover_restart_sequences_equal_the_exact_planner(data):
    kind = data.draw(st.sampled_from(KINDS + HAND_MADE), label="kind")
    r = data.draw(st.integers(1, 4), label="r")
    if kind == "block":
        n = r * data.draw(st.integers(max(1, -(-2 // r)), max(1, 12 // r)), label="blocks")
    else:
        n = data.draw(st.integers(max(r, 2), 12), label="n")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    layout = make_layout(kind, n, r, seed) if kind in KINDS else hand_made_layout(kind, n, r, seed)
    m = data.draw(st.sampled_from([1, 2, 3, 8]), label="m")
    controller = ReorderController(layout, micro_batches=m)
    # at m > 1 a level fall wider than this goes through one maximum flow (and the exact
    # planner when it succeeds): 0 sends every level fall there, as at N = 100,000
    controller._widest_level_fall = data.draw(st.sampled_from([WIDEST_LEVEL_FALL, 0, 1]), label="widest fall")
    failed = []
    kept = []  # (plan, split, failed) as they were when the call returned
    for _ in range(data.draw(st.integers(4, 16), label="calls")):
        live = [g for g in range(n) if g not in failed]
        action = data.draw(st.sampled_from(["fail", "recover", "restart"]), label="action")
        if controller.wiped_out or action == "restart" or (action == "fail" and not live):
            controller.restart()
            failed = []
            assert controller.load == m and controller.stack_number == 1 and controller.failed.size == 0
            continue
        if action == "recover" and failed:
            back = data.draw(st.lists(st.sampled_from(failed), min_size=1, max_size=3, unique=True), label="back")
            plan, failed = _recover(layout, controller, failed, back)
        else:
            groups = data.draw(st.lists(st.sampled_from(live), min_size=1, max_size=min(3, len(live)), unique=True),
                               label="fail")
            plan, failed = _fail(layout, controller, failed, groups, data.draw(st.booleans(), label="mid_step"))
        assert controller.failed.tolist() == sorted(failed)
        if plan.status != WIPE_OUT:
            assert controller.load == plan.load and controller.stack_number == plan.stack_number
            kept.append((plan, controller.split.copy(), sorted(failed)))
    # Plans are lazy: read now, each still holds what the controller held when it returned.
    for plan, split, was_failed in kept:
        assert np.array_equal(plan.split, split) and plan.failed.tolist() == was_failed


# ------------------------------------------------------------------ adversarial rejoins
@pytest.mark.parametrize("m", [1, 8])
def test_the_only_free_room_is_far_along_the_ring(m):
    # Consecutive ring, r = 2: group g holds types g and g + 1, so work moves one hop per
    # group.  With group 0 down the ring is a path of 15 groups for 16 types; when 0
    # rejoins it is the only group with room, and the level falls only if groups up to
    # half the ring away hand work on towards it.
    layout = generators.consecutive(16, 2)
    controller = ReorderController(layout, micro_batches=m)
    down, failed = _fail(layout, controller, [], [0], False)
    assert down.load == -(-16 * m // 15)
    back, _ = _recover(layout, controller, failed, [0])
    assert back.load == m  # the fault-free level again
    if m > 1:  # each of the 8 groups at load 9 handed at least one micro-batch on
        assert np.bincount(down.split.ravel(), minlength=16).tolist().count(9) == 8
        assert back.moves >= 8

def test_the_free_room_is_behind_another_failure():
    # Two holes split the ring of 12 into two paths of 5 groups (6 types each: load 10 at
    # m = 8); group 0's rejoin joins them into one path of 11 groups for 12 types (load 9),
    # and the groups at load 10 on the far path reach the room only around the ring.
    layout = generators.consecutive(12, 2)
    controller = ReorderController(layout, micro_batches=8)
    _, failed = _fail(layout, controller, [], [0, 6], False)
    assert controller.load == 10
    _, failed = _recover(layout, controller, failed, [0])
    assert controller.load == 9
    _, failed = _fail(layout, controller, failed, [3], True)  # the recovered state patches right
    _recover(layout, controller, failed, [3, 6])
    assert controller.load == 8


@pytest.mark.parametrize("m, stacks, down, back, levels", [
    # Ring of 6, r = 2, m = 8, groups 0 and 3 down: two paths of 2 groups for 3 types each
    # (load 12); 0's rejoin makes a path of 5 groups for 6 types (load 10).
    (8, None, [0, 3], [0], 2),
    # Ring of 6, groups 0 and 2 down: group 1 computes types 1 and 2 alone (load 16).
    (8, None, [0, 2], [0], 6),
    # Blocks of 3 (r = 3): with 0 and 1 down group 2 computes all 3 types (S = 3); both
    # back at once, S = 1.
    (1, "block", [0, 1], [0, 1], 2),
    (8, "block", [0, 1], [0, 1], 16),
])
def test_a_rejoin_lowers_the_level_several_steps_at_once(m, stacks, down, back, levels):
    layout = Layout(block_stacks(6, 3)) if stacks == "block" else generators.consecutive(6, 2)
    controller = ReorderController(layout, micro_batches=m)
    before, failed = _fail(layout, controller, [], down, False)
    after, failed = _recover(layout, controller, failed, back)
    assert before.load - after.load == levels
    again, _ = _fail(layout, controller, failed, back, True)  # and back up: the level is the first one
    assert again.load == before.load


@pytest.mark.parametrize("m", [1, 3, 8])
def test_rejoins_during_a_mid_step_failure(m):
    # A group fails mid-step while others are down: its work of the step is patched; the
    # repaired groups rejoin before the next step, then another mid-step failure patches
    # from the plan of that rejoin.
    layout = generators.consecutive(13, 3)
    controller = ReorderController(layout, micro_batches=m)
    _, failed = _fail(layout, controller, [], [2, 7], False)
    patched, failed = _fail(layout, controller, failed, [8], True)
    assert patched.patch  # the failed group's work went somewhere
    _, failed = _recover(layout, controller, failed, [7])
    _, failed = _recover(layout, controller, failed, [8])
    _, failed = _fail(layout, controller, failed, [3, 9], True)
    _, failed = _recover(layout, controller, failed, [2, 3])
    _, failed = _fail(layout, controller, failed, [7], True)
    assert controller.failed.tolist() == sorted(failed) == [7, 9]


def test_wide_level_falls_decided_by_one_maximum_flow(monkeypatch):
    """With every level fall routed through the maximum flow first (as with thousands of
    groups above the level at large N), both outcomes occur: a shortfall whose reached
    types become the kept Hall certificate, and a feasible level reached by augmenting
    paths; the controller still equals the exact planner after every call."""
    from spare_opt import consecutive
    from spare_opt.planning import exact

    outcomes = []
    deficient_types = exact._CoverNetwork.deficient_types

    def counted(network, s):
        types = deficient_types(network, s)
        outcomes.append("violation" if types is not None else "feasible")
        return types

    monkeypatch.setattr(exact._CoverNetwork, "deficient_types", counted)
    layout = consecutive(40, 3)
    rng = np.random.default_rng(0)
    for _ in range(12):
        controller = ReorderController(layout, micro_batches=4)
        controller._widest_level_fall = 0
        failed = []
        for _ in range(30):
            live = [g for g in range(40) if g not in failed]
            previous = controller.split.copy()
            if failed and rng.random() < 0.5:  # (the brute-force reference of _recover is too slow here)
                group = int(rng.choice(failed))
                plan = controller.recover(group)
                failed.remove(group)
            else:
                group = int(rng.choice(live))
                plan = controller.fail(group)
                failed.append(group)
            exact = plan_reorder(layout, failed, micro_batches=4, split=previous)
            _agree(plan, exact, 4)
            check_plan(layout, plan, None, previous)
            if plan.status == WIPE_OUT:
                controller.restart()
                failed = []
    assert "violation" in outcomes and "feasible" in outcomes

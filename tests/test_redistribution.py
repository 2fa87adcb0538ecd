"""The full-redistribution fast path (r = N, never built) against the exact planner on the built r = N layout."""

import pickle
import tracemalloc

import numpy as np
import pytest

from spare_opt import (
    FailureSetError,
    Layout,
    ParameterError,
    RedistributionController,
    ReorderController,
    plan_reorder,
)


def full_layout(n):
    """The r = N layout ``stacks[g, l] = (g + l) mod N``: every group holds every shard type."""
    return Layout((np.arange(n)[:, None] + np.arange(n)[None, :]) % n, method="consecutive", offsets=list(range(n)))


def check_against_exact(layout, plan, failed, m, previous_split=None):
    """status, L* (and S* at m = 1) as the exact planner's; a valid split with loads at most L*."""
    n = layout.groups
    exact = plan_reorder(layout, sorted(failed), micro_batches=m)
    assert plan.status == exact.status
    assert plan.load == exact.load and plan.lower_bound == exact.lower_bound
    assert plan.failed.tolist() == sorted(failed)
    if plan.status == "wipe-out":
        assert len(failed) == n and plan.split is None and plan.stack_number is None
        return
    assert plan.load == -(-(m * n) // (n - len(failed)))  # the counting bound, always
    if m == 1:
        assert plan.stack_number == exact.stack_number == plan.load
    split = plan.split
    assert split.shape == (n, m) and split.dtype == np.int32 and plan.order is None
    live = np.ones(n, dtype=bool)
    live[list(failed)] = False
    assert live[split].all()  # every micro-batch on a live group (any live group holds every type)
    loads = np.bincount(split.ravel(), minlength=n)
    assert loads.max() == plan.load and loads[live].min() >= plan.load - 1 and not loads[~live].any()
    widest = max(len(set(np.nonzero(split == g)[0].tolist())) for g in np.flatnonzero(live))
    assert plan.stack_number == widest
    assert np.array_equal(plan.assignment, split[:, 0])
    if previous_split is not None:
        assert plan.moves == int((split != previous_split).sum())
    assert plan.step_cost == plan.load / m


@pytest.mark.parametrize("n, m", [(1, 1), (2, 3), (3, 1), (5, 2), (7, 1), (8, 4), (9, 3)])
def test_random_fail_and_recover_sequences_match_the_exact_planner(n, m):
    layout = full_layout(n)
    rng = np.random.default_rng(n * 100 + m)
    for _ in range(3):
        controller = RedistributionController(n, micro_batches=m)
        failed = set()
        previous = controller.split.copy()
        kept = []
        for _ in range(3 * n):
            live = sorted(set(range(n)) - failed)
            if failed and (not live or rng.random() < 0.35):
                back = rng.choice(sorted(failed), size=rng.integers(1, len(failed) + 1), replace=False).tolist()
                plan = controller.recover(back)
                failed -= set(back)
            else:
                out = rng.choice(live, size=rng.integers(1, min(3, len(live)) + 1), replace=False).tolist()
                mid_step = bool(rng.random() < 0.5)
                plan = controller.fail(out, mid_step=mid_step)
                failed |= set(out)
                if mid_step and plan.status == "masked":  # each micro-batch of a failed group, at its new group
                    patched = sorted((t, j) for pairs in plan.patch.values() for t, j in pairs)
                    assert patched == sorted((t, j) for t in range(n) for j in range(m) if previous[t, j] in out)
                    assert all(plan.split[t, j] == g for g, pairs in plan.patch.items() for t, j in pairs)
            check_against_exact(layout, plan, failed, m, None if plan.status == "wipe-out" else previous)
            kept.append((plan, sorted(failed), None if plan.split is None else plan.split.copy()))
            if plan.status == "wipe-out":
                with pytest.raises(FailureSetError, match="restart"):
                    controller.fail(0)
                controller.restart()
                failed = set()
            previous = controller.split.copy()
        # plans read later keep the values of their call (lazy, from the journal)
        for plan, failed_then, split_then in kept:
            assert plan.failed.tolist() == failed_then
            assert (plan.split is None and split_then is None) or np.array_equal(plan.split, split_then)
        assert pickle.loads(pickle.dumps(kept[-1][0])) == kept[-1][0]


@pytest.mark.parametrize("m", [1, 3])
def test_adversarial_sets_match_the_exact_planner(m):
    """All but one group, every group, the groups of one end, a fail of everything then recoveries."""
    n = 9
    layout = full_layout(n)
    for failed in ([], list(range(n - 1)), list(range(1, n)), list(range(n)), [0, 1, 2, 3], [8, 6, 4, 2, 0]):
        controller = ReorderController.full_redistribution(n, micro_batches=m)
        plan = controller.fail(failed) if failed else controller.set_failed([])
        check_against_exact(layout, plan, set(failed), m)
        assert (plan.status == "wipe-out") == (len(failed) == n)  # a wipe-out only when every group is down
    controller = RedistributionController(n, micro_batches=m)
    for g in range(n - 1):
        check_against_exact(layout, controller.fail(g), set(range(g + 1)), m)
    for g in range(n - 1):
        check_against_exact(layout, controller.recover(g), set(range(g + 1, n - 1)), m)
    assert controller.load == m and controller.failed.tolist() == []


def test_set_failed_is_a_pure_function_of_the_set():
    one, two = RedistributionController(12, micro_batches=2), RedistributionController(12, micro_batches=2)
    one.fail([3, 7]); one.recover(3); one.fail([1, 11])
    a = one.set_failed([11, 1, 7])
    b = two.set_failed([1, 7, 11])
    assert a.fingerprint() == b.fingerprint() and a == b
    check_against_exact(full_layout(12), a, {1, 7, 11}, 2)
    assert one.fail(0).load == two.fail(0).load  # it adopted the set


def test_bad_calls_raise_one_specific_error():
    controller = RedistributionController(6)
    controller.fail(2)
    for call, args in ((controller.fail, (2,)), (controller.recover, (3,)), (controller.fail, (6,)),
                       (controller.fail, ([1, 1],)), (controller.fail, (1.0,)), (controller.recover, ("x",))):
        with pytest.raises(FailureSetError):
            call(*args)
    with pytest.raises(ParameterError):
        RedistributionController(2**24, micro_batches=2)
    with pytest.raises(ParameterError):
        RedistributionController(0)
    assert controller.failed.tolist() == [2] and controller.load == 2  # nothing changed by the refused calls


def test_a_hundred_thousand_groups_without_n_squared_memory():
    n, m = 100_000, 4
    RedistributionController(8, micro_batches=m).fail(1)  # compiled or loaded from the cache outside the trace
    tracemalloc.start()
    try:
        controller = ReorderController.full_redistribution(n, micro_batches=m)
        rng = np.random.default_rng(1)
        order = rng.permutation(n)[:2000]
        for g in order[:1500]:
            plan = controller.fail(int(g))
        plan = controller.fail(order[1500:].tolist(), mid_step=True)
        plan = controller.recover(order[:700].tolist())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * n * m + 32 * n + (1 << 24)  # O(N m): the N x N layout would be 40 GB
    failed = np.sort(order[700:])
    assert plan.status == "masked" and plan.failed.tolist() == failed.tolist()
    assert plan.load == -(-(m * n) // (n - failed.size))
    loads = np.bincount(plan.split.ravel(), minlength=n)
    assert loads.max() == plan.load and not loads[failed].any() and loads.sum() == n * m

"""The exact reorder planner against brute force (small N) and independent flow codes (N up to 1,000)."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy.sparse.csgraph import min_weight_full_bipartite_matching

from naive import (
    block_stacks,
    circulant_stacks,
    naive_least_stack_number,
    naive_least_stack_number_by_assignment,
    naive_lost_shards,
    naive_min_moves,
    naive_patch_types,
    random_latin_stacks,
)
from spare_opt._core.errors import FailureSetError, LayoutError, ParameterError, ParameterTypeError
from spare_opt.layouts.layout import Layout
from spare_opt.planning.plan import MASKED, WIPE_OUT, check_plan, lower_bound
from spare_opt.planning.exact import least_stack_number, plan_reorder


# ----------------------------------------------------------------- strategies
def _stacks(kind, n, r, rng):
    if kind == "block" and n % r == 0:
        return block_stacks(n, r)
    if kind == "latin":
        return random_latin_stacks(n, r, rng)
    offsets = [0] + sorted(int(o) for o in rng.choice(np.arange(1, n), r - 1, replace=False))
    return circulant_stacks(n, offsets)


@st.composite
def cases(draw, max_n=8, max_r=3):
    """(layout, failed, order or None, S, mid_step) with every kind of failure set."""
    # Biased towards the largest sizes and moderate failure sets, where reorders are non-trivial.
    n = draw(st.integers(max(1, max_n - 3), max_n) | st.integers(1, max_n))
    r = draw(st.integers(min(2, n), min(n, max_r)) | st.integers(1, min(n, max_r)))
    kind = draw(st.sampled_from(["circulant", "block", "latin"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    stacks = _stacks(kind, n, r, rng)
    k = draw(st.integers(1, max(1, min(n // 2, r + 1))) | st.sampled_from([0, 1, n - 1, n]) | st.integers(0, n))
    failed = [int(g) for g in draw(st.permutations(range(n)))[:k]]
    mid_step = [g for g in failed if draw(st.booleans())] if draw(st.booleans()) else []
    s = draw(st.integers(1, r))
    order = None
    if draw(st.booleans()):
        order = np.array([rng.permutation(row) for row in stacks], dtype=np.int32)
        if failed and draw(st.booleans()):
            order[failed] = -1
    return Layout(stacks), failed, order, s, mid_step


def _alive(n, failed):
    alive = np.ones(n, dtype=bool)
    alive[list(failed)] = False
    return alive


# ------------------------------------------------------------- brute force
@given(cases())
def test_plan_is_valid_and_optimal_against_brute_force(case):
    layout, failed, order, s, mid_step = case
    stacks = layout.stacks
    previous = stacks if order is None else order
    plan = plan_reorder(layout, failed, order=order, stack_number=s, mid_step=mid_step)

    assert plan.lower_bound == lower_bound(layout.groups, len(failed))
    assert plan.failed.tolist() == sorted(failed)
    assert plan.lost_shards.tolist() == naive_lost_shards(stacks, failed)
    if plan.lost_shards.size:
        assert plan.status == WIPE_OUT and plan.stack_number is None and plan.assignment is None
        assert plan.patch == {} and plan.moves == 0
        return
    check_plan(layout, plan, previous_order=np.where(_alive(layout.groups, failed)[:, None], previous, -1))
    assert plan.status == MASKED
    assert plan.stack_number == naive_least_stack_number(stacks, failed)
    assert plan.stack_number == naive_least_stack_number_by_assignment(stacks, failed)
    assert plan.moves == naive_min_moves(stacks, failed, previous, plan.stack_number)
    patched = sorted(t for items in plan.patch.values() for t, j in items)
    assert patched == naive_patch_types(stacks, failed, mid_step, previous, s)
    for g, items in plan.patch.items():  # (shard type, micro-batch) pairs at every m
        assert items == sorted(items) and all(j == 0 and plan.assignment[t] == g for t, j in items)
        assert plan.patch_shard_types[g] == [t for t, _ in items]


def test_seeded_masked_cases_against_brute_force():
    """Non-trivial cases on purpose: masked, random orders and S, mid-step failures, correlated layouts."""
    seen = {"moves": 0, "above_bound": 0, "patch": 0, "below_current": 0}
    rng = np.random.default_rng(2026)
    checked = 0
    while checked < 120:
        n = int(rng.integers(5, 9))
        r = int(rng.integers(2, 4))
        kind = ["circulant", "block", "latin", "consecutive"][checked % 4]
        stacks = circulant_stacks(n, range(r)) if kind == "consecutive" else _stacks(kind, n, r, rng)
        failed = rng.choice(n, int(rng.integers(1, n // 2 + 1)), replace=False).tolist()
        if naive_lost_shards(stacks, failed):
            continue
        checked += 1
        layout = Layout(stacks)
        order = np.array([rng.permutation(row) for row in stacks], dtype=np.int32)
        s = int(rng.integers(1, r + 1))
        mid_step = [g for g in failed if rng.random() < 0.5]
        plan = plan_reorder(layout, failed, order=order, stack_number=s, mid_step=mid_step)
        check_plan(layout, plan, previous_order=order)
        assert plan.stack_number == naive_least_stack_number(stacks, failed)
        assert plan.moves == naive_min_moves(stacks, failed, order, plan.stack_number)
        patched = sorted(t for items in plan.patch.values() for t, _ in items)
        assert patched == naive_patch_types(stacks, failed, mid_step, order, s)
        seen["moves"] += plan.moves > 0
        seen["above_bound"] += plan.stack_number > plan.lower_bound
        seen["patch"] += bool(plan.patch)
        seen["below_current"] += plan.stack_number < s
    assert all(count > 0 for count in seen.values()), seen


@given(cases(max_n=12, max_r=4))
def test_least_stack_number_is_halls_bound(case):
    layout, failed, _, _, _ = case
    expected = naive_least_stack_number(layout.stacks, failed)
    assert least_stack_number(layout, failed) == expected
    assert plan_reorder(layout, failed).stack_number == expected


@given(cases())
def test_new_orders_keep_what_they_can(case):
    """Assigned types already in the top S* keep their layer; rows without arrivals do not change;
    the layers below S* keep the previous relative order."""
    layout, failed, order, s, mid_step = case
    plan = plan_reorder(layout, failed, order=order, stack_number=s, mid_step=mid_step)
    if not plan.masked:
        return
    previous = layout.stacks if order is None else order
    top = plan.stack_number
    for g in np.flatnonzero(_alive(layout.groups, failed)):
        old, new = previous[g].tolist(), plan.order[g].tolist()
        mine = [plan.assignment[t] == g for t in old]
        if not any(mine[top:]):
            assert new == old
        for p in range(top):
            if mine[p]:
                assert new[p] == old[p]
        rest = new[top:]
        assert rest == [t for t in old if t in rest]


@given(cases(max_n=8, max_r=3), st.data())
def test_successive_plans_fixed_check(case, data):
    """Apply a plan, fail more groups: when the old top S still covers and S is optimal, nothing moves."""
    layout, failed, _, _, _ = case
    first = plan_reorder(layout, failed)
    if not first.masked:
        return
    live = [g for g in range(layout.groups) if g not in failed]
    more = data.draw(st.lists(st.sampled_from(live), unique=True, max_size=len(live))) if live else []
    second = plan_reorder(layout, failed + more, order=first.order, stack_number=first.stack_number, mid_step=more)
    if not second.masked:
        return
    check_plan(layout, second, previous_order=first.order)
    assert second.stack_number >= first.stack_number  # failures accumulate: S* never decreases
    alive = _alive(layout.groups, failed + more)
    covered = set(first.order[alive, : first.stack_number].ravel().tolist())
    if len(covered) == layout.groups and second.stack_number == first.stack_number:
        assert second.moves == 0
        assert np.array_equal(second.order[alive], first.order[alive])
        assert second.patch == {}  # every type was also computed by a survivor


# ------------------------------------------------------------- edge cases
def test_fault_free_plan_is_the_top_layer():
    stacks = circulant_stacks(7, [0, 1, 3])
    layout = Layout(stacks)
    plan = plan_reorder(layout, [])
    assert plan.status == MASKED and plan.stack_number == 1 and plan.lower_bound == 1 and plan.moves == 0
    assert np.array_equal(plan.order, stacks)
    assert np.array_equal(plan.assignment[stacks[:, 0]], np.arange(7))


def test_oversized_stack_number_comes_down():
    layout = Layout(circulant_stacks(7, [0, 1, 3]))
    plan = plan_reorder(layout, [], stack_number=3)
    assert plan.stack_number == 1 and plan.moves == 0


def test_all_but_one_failed():
    full = Layout(circulant_stacks(4, [0, 1, 2, 3]))
    plan = plan_reorder(full, [0, 1, 3])
    check_plan(full, plan, previous_order=np.where(np.arange(4)[:, None] == 2, full.stacks, -1))
    assert plan.status == MASKED and plan.stack_number == 4 and plan.assignment.tolist() == [2] * 4
    assert plan.moves == 0  # moves count against the new top S* = r: the whole stack
    partial = Layout(circulant_stacks(5, [0, 2]))
    wiped = plan_reorder(partial, [0, 1, 2, 4])
    assert wiped.status == WIPE_OUT and wiped.lost_shards.tolist() == [1, 2, 4]  # group 3 holds types 3 and 0


def test_every_group_failed():
    layout = Layout(circulant_stacks(3, [0, 1]))
    plan = plan_reorder(layout, [0, 1, 2])
    assert plan.status == WIPE_OUT and plan.lower_bound is None and plan.lost_shards.tolist() == [0, 1, 2]
    assert least_stack_number(layout, [2, 0, 1]) is None


def test_block_wipe_out_loses_the_block():
    layout = Layout(block_stacks(6, 3))
    plan = plan_reorder(layout, [3, 4, 5])
    assert plan.status == WIPE_OUT and plan.lost_shards.tolist() == [3, 4, 5]
    assert plan.to_dict()["order"] is None


def test_mid_step_patch_goes_to_the_new_holder():
    # Consecutive r = 2: group g holds (g, g+1).  Group 2 fails after computing type 2.
    layout = Layout(circulant_stacks(5, [0, 1]))
    plan = plan_reorder(layout, [2], mid_step=[2])
    assert plan.stack_number == 2
    assert plan.assignment[2] == 1 and plan.patch == {1: [(2, 0)]} and plan.patch_shard_types == {1: [2]}
    assert plan.order[1].tolist() == [1, 2]
    between_steps = plan_reorder(layout, [2])
    assert between_steps.patch == {} and np.array_equal(between_steps.assignment, plan.assignment)


def test_plans_are_deterministic():
    rng = np.random.default_rng(5)
    layout = Layout(random_latin_stacks(40, 4, rng))
    failed = rng.choice(40, 12, replace=False).tolist()
    first, second = plan_reorder(layout, failed), plan_reorder(layout, failed)
    assert first.to_dict() == second.to_dict()


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"failed": [7]}, FailureSetError, "out of range"),
        ({"failed": [-1]}, FailureSetError, "out of range"),
        ({"failed": [1, 1]}, FailureSetError, "more than once"),
        ({"failed": [1.5]}, FailureSetError, "not an integer"),
        ({"failed": [True]}, FailureSetError, "not an integer"),
        ({"failed": [1], "mid_step": [2]}, FailureSetError, "not in the failure set"),
        ({"failed": [1], "mid_step": [1, 1]}, FailureSetError, "more than once"),
        ({"failed": [], "stack_number": 0}, ParameterError, "stack number S must be >= 1"),
        ({"failed": [], "stack_number": 4}, ParameterError, "stack number S must be <= 3"),
        ({"failed": [], "stack_number": 1.0}, ParameterTypeError, "integer"),
        ({"failed": [], "stack_number": True}, ParameterTypeError, "integer"),
        ({"failed": [], "order": np.zeros((7, 2), dtype=int)}, LayoutError, "shape"),
        ({"failed": [], "order": np.zeros((7, 3))}, LayoutError, "integer"),
        ({"failed": [], "order": [[0, 1, 3]] * 7}, LayoutError, "live group 1"),
    ],
)
def test_bad_input_raises_named_errors(kwargs, error, words):
    layout = Layout(circulant_stacks(7, [0, 1, 3]))
    with pytest.raises(error) as info:
        plan_reorder(layout, **kwargs)
    assert type(info.value) is error
    assert words in str(info.value)


def test_failed_rows_of_order_are_ignored():
    layout = Layout(circulant_stacks(7, [0, 1, 3]))
    order = np.array(layout.stacks)
    order[4] = [9, 9, -5]
    plan = plan_reorder(layout, [4], order=order)
    assert plan.order[4].tolist() == [-1, -1, -1]


def test_naive_is_importable_from_tests_directory():
    import naive

    assert naive.__file__.endswith("tests/naive.py")


# ------------------------------------------------- large random cases
def _networkx_covers(stacks, alive, s):
    """Independent feasibility: networkx preflow-push max flow on the b-matching network."""
    n = len(stacks)
    graph = nx.DiGraph()
    for t in range(n):
        graph.add_edge("source", ("type", t), capacity=1)
    for g in np.flatnonzero(alive):
        graph.add_edge(("group", int(g)), "sink", capacity=s)
        for t in stacks[g]:
            graph.add_edge(("type", int(t)), ("group", int(g)), capacity=1)
    return nx.maximum_flow_value(graph, "source", "sink") == n


def _matching_min_moves(previous, alive, s):
    """Independent min moves: LAPJVsp min-weight matching of types to S copies of each live group."""
    n, r = previous.shape
    live = np.flatnonzero(alive)
    rows, cols, weights = [], [], []
    for column, g in enumerate(live):
        for layer, t in enumerate(previous[g]):
            for copy in range(s):
                rows.append(int(t))
                cols.append(column * s + copy)
                weights.append(1.0 + (layer >= s))  # shift by 1: zero weights are not edges
    graph = sp.csr_array((weights, (rows, cols)), shape=(n, live.size * s))
    row_ind, col_ind = min_weight_full_bipartite_matching(graph)
    return int(round(graph[row_ind, col_ind].sum())) - n


@pytest.mark.parametrize(
    "kind, n, r, fraction, seed",
    [
        ("circulant", 1000, 10, 0.1, 1),
        ("latin", 600, 6, 0.2, 2),
        ("circulant", 300, 4, 0.15, 3),
        ("block", 400, 8, 0.2, 4),
        ("block-run", 480, 8, 0.1, 7),  # r - 2 groups of one block fail: S* >= r / 2, above c(k)
        ("latin", 800, 5, 0.45, 6),  # a wipe-out
    ],
)
def test_large_random_plans_agree_with_independent_codes(kind, n, r, fraction, seed):
    rng = np.random.default_rng(seed)
    if kind == "latin":  # isotopic circulant: quick at this size
        offsets = [0] + sorted(int(o) for o in rng.choice(np.arange(1, n), r - 1, replace=False))
        stacks = rng.permutation(n)[circulant_stacks(n, offsets)[rng.permutation(n)]].astype(np.int32)
    elif kind == "block-run":
        stacks = block_stacks(n, r)
    else:
        stacks = _stacks(kind, n, r, rng)
    layout = Layout(stacks)
    failed = rng.choice(n, int(fraction * n), replace=False).tolist()
    if kind == "block-run":
        failed = sorted(set(failed) - set(range(r)) | set(range(r - 2)))
    alive = _alive(n, failed)
    order = np.array([rng.permutation(row) for row in stacks], dtype=np.int32)
    s = int(rng.integers(1, r + 1))
    plan = plan_reorder(layout, failed, order=order, stack_number=s)
    if kind == "block-run":
        assert plan.masked and plan.stack_number > plan.lower_bound
    if not plan.masked:
        assert plan.lost_shards.tolist() == [t for t in range(n) if not alive[np.flatnonzero((stacks == t).any(axis=1))].any()]
        assert plan.lost_shards.size
        return
    check_plan(layout, plan, previous_order=np.where(alive[:, None], order, -1))
    best = plan.stack_number
    assert _networkx_covers(stacks, alive, best)
    assert best == 1 or not _networkx_covers(stacks, alive, best - 1)
    assert plan.moves == _matching_min_moves(order, alive, best)


def test_arrivals_replace_the_deepest_unassigned_top_layers():
    from spare_opt.planning.exact import _rewrite_orders

    # One group holding types 0..4 in this order, S* = 3; it is given types 0 and 3.
    current = np.array([[0, 1, 2, 3, 4]], dtype=np.int32)
    assignment = np.array([0, 7, 7, 0, 7], dtype=np.int32)  # 7: some other group
    new_order, moves = _rewrite_orders(current, np.array([0], dtype=np.int32), assignment, 3)
    assert moves == 1
    assert new_order[0].tolist() == [0, 1, 3, 2, 4]

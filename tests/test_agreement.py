"""Plans every process agrees on: set_failed, agreed_plan, fingerprints, binary forms, controller state."""

import json
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spare_opt import (
    FailureSetError,
    Layout,
    ParameterError,
    Plan,
    PlanError,
    ReorderController,
    agreed_plan,
    check_plan,
    patch_work,
    plan_reorder,
)
from spare_opt import block, random_latin


def _layout(kind, n, r, seed):
    rng = np.random.default_rng(seed)
    if kind == "block":
        return block(n, r)
    if kind == "latin":
        return random_latin(n, r, seed=seed)
    offsets = [0] + sorted(rng.choice(np.arange(1, n), size=r - 1, replace=False).tolist())
    return Layout((np.arange(n)[:, None] + np.asarray(offsets)[None, :]) % n, offsets=offsets)


@st.composite
def layouts(draw):
    kind = draw(st.sampled_from(["circulant", "block", "latin"]))
    r = draw(st.integers(2, 4))
    n = r * draw(st.integers(2, 4)) if kind == "block" else draw(st.integers(r + 1, 13))
    return _layout(kind, n, r, draw(st.integers(0, 10**6)))


@st.composite
def histories(draw, n):
    """A list of controller calls: ("fail", groups, mid_step), ("recover", groups), ("set", groups), ("restart",)."""
    calls = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["fail", "recover", "set", "restart"]))
        groups = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n // 2))
        calls.append((kind, groups, draw(st.booleans())))
    return calls


def _run(controller, calls):
    """Apply ``calls``, skipping those that do not apply to the current state (a failed group failing...)."""
    for kind, groups, mid_step in calls:
        failed = set(controller.failed.tolist())
        if kind == "restart" or controller.wiped_out:
            controller.restart()
        elif kind == "fail":
            live = [g for g in groups if g not in failed]
            if live:
                controller.fail(live, mid_step=mid_step)
        elif kind == "recover":
            back = [g for g in groups if g in failed]
            if back:
                controller.recover(back)
        else:
            controller.set_failed(groups, mid_step=mid_step)


@settings(max_examples=40)
@given(data=st.data(), layout=layouts(), m=st.sampled_from([1, 1, 3]))
def test_two_histories_reach_the_same_plan_for_the_same_failed_set(data, layout, m):
    n = layout.groups
    one, two = ReorderController(layout, micro_batches=m), ReorderController(layout, micro_batches=m)
    _run(one, data.draw(histories(n), label="history one"))
    _run(two, data.draw(histories(n), label="history two"))
    target = data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n - 1), label="failed set")
    first, second = one.set_failed(target), two.set_failed(list(reversed(target)))
    fresh = ReorderController(layout, micro_batches=m).fail(sorted(target)) if target else None
    assert first.fingerprint() == second.fingerprint()
    assert first.to_bytes() == second.to_bytes()  # moves too: both count against the fault-free plan
    assert first.to_bytes() == agreed_plan(layout, target, micro_batches=m).to_bytes()
    if fresh is not None:
        assert fresh.to_bytes() == first.to_bytes()
    assert np.array_equal(first.failed, np.sort(target)) and np.array_equal(one.failed, np.sort(target))
    exact = agreed_plan(layout, target, micro_batches=m, method="exact")
    assert first.status == exact.status and first.load == exact.load
    assert np.array_equal(first.lost_shards, exact.lost_shards)
    if m == 1:
        assert first.stack_number == exact.stack_number
    fault_free = ReorderController(layout, micro_batches=m)
    check_plan(layout, first, previous_order=layout.stacks, previous_split=fault_free.split)
    if not first.masked:
        assert one.wiped_out and two.wiped_out
        return
    assert first.moves >= exact.moves  # the exact planner's moves are the min-cost optimum
    # The controllers adopted the plan: what follows agrees too.
    live = np.flatnonzero(one.alive)
    more = [int(live[data.draw(st.integers(0, live.size - 1), label="next failure")])]
    assert one.fail(more).to_bytes() == two.fail(more).to_bytes()


def test_set_failed_is_idempotent_and_brings_groups_back():
    layout = _layout("circulant", 11, 3, 4)
    for m in (1, 4):
        controller = ReorderController(layout, micro_batches=m)
        controller.fail([1, 2])
        plan = controller.set_failed([2, 7])
        again = controller.set_failed([7, 2])
        assert plan.to_bytes() == again.to_bytes()
        assert controller.failed.tolist() == [2, 7] and bool(controller.alive[1])
        assert controller.set_failed([]).to_bytes() == ReorderController(layout, micro_batches=m).fail([]).to_bytes()
        wiped = controller.set_failed(list(range(11)))
        assert not wiped.masked and controller.wiped_out and wiped.failed.tolist() == list(range(11))
        assert controller.set_failed([3]).masked  # a smaller set continues after a wipe-out
        with pytest.raises(FailureSetError, match="more than once"):
            controller.set_failed([3, 3])
        with pytest.raises(FailureSetError, match="out of range"):
            controller.set_failed([11])


def test_a_plan_keeps_its_values_after_later_calls():
    layout = _layout("circulant", 10, 3, 1)
    for m in (1, 3):
        controller = ReorderController(layout, micro_batches=m)
        plan = controller.set_failed([4])
        expected = agreed_plan(layout, [4], micro_batches=m, method="controller").to_bytes()
        controller.fail(5)
        controller.set_failed([1, 2])
        assert plan.to_bytes() == expected


@pytest.mark.parametrize("m", [1, 3])
def test_set_failed_mid_step_patches_exactly_the_lost_work(m):
    rng = np.random.default_rng(m)
    layout = _layout("circulant", 12, 3, 7)
    controller = ReorderController(layout, micro_batches=m)
    seen_patch = 0
    failed = []
    for _ in range(4):
        previous = controller.set_failed(failed)
        live = np.flatnonzero(controller.alive)
        failed = sorted(failed + rng.choice(live, size=1).tolist())
        plan = controller.set_failed(failed, mid_step=True)
        if not plan.masked:
            break
        assert plan.patch == patch_work(previous, plan)
        # Survivors computed their previous work; with the patch, every micro-batch once.
        computed = [item for g in range(12) if g not in failed for item in previous.work(g)]
        computed += [item for g, items in plan.patch.items() for item in items]
        assert sorted(computed) == [(t, j) for t in range(12) for j in range(m)]
        for g, items in plan.patch.items():
            assert all(plan.split[t, j] == g for t, j in items)
        seen_patch += bool(plan.patch)
        check_plan(layout, plan)
    assert seen_patch


def test_agreed_plan_refuses_bad_arguments():
    layout = _layout("circulant", 9, 3, 2)
    with pytest.raises(ParameterError, match="method"):
        agreed_plan(layout, [1], method="fast")
    with pytest.raises(FailureSetError):
        agreed_plan(layout, [1, 1])
    with pytest.raises(PlanError, match="masked"):
        patch_work(agreed_plan(layout, []), agreed_plan(layout, list(range(9))))


def _plans():
    layout = _layout("circulant", 9, 3, 3)
    controller = ReorderController(layout, micro_batches=4)
    controller.fail(2)
    return [
        plan_reorder(layout, [2], mid_step=[2]),
        plan_reorder(layout, [2, 5], micro_batches=3, mid_step=[5]),
        plan_reorder(layout, list(range(6))),
        controller.fail([6], mid_step=True),
        agreed_plan(layout, [1, 4], micro_batches=4),
        plan_reorder(layout, []),
    ]


@pytest.mark.parametrize("index", range(6))
def test_binary_and_dict_forms_round_trip(index):
    plan = _plans()[index]
    back = Plan.from_bytes(plan.to_bytes())
    assert back == plan and back.to_bytes() == plan.to_bytes() and back.fingerprint() == plan.fingerprint()
    document = json.loads(json.dumps(plan.to_dict()))
    assert Plan.from_dict(document) == plan
    assert pickle.loads(pickle.dumps(plan)) == plan
    work = [] if not plan.masked else [plan.work(g) for g in range(9) if g not in plan.failed]
    assert work == ([] if not back.masked else [back.work(g) for g in range(9) if g not in back.failed])


def test_fingerprint_covers_the_work_and_not_the_array_dtypes():
    plan = _plans()[1]
    wide = Plan(**{**vars_of(plan), "split": plan.split.astype(np.int64), "failed": plan.failed.astype(np.int64)})
    assert wide.fingerprint() == plan.fingerprint()
    assert Plan(**{**vars_of(plan), "moves": plan.moves + 5}).fingerprint() == plan.fingerprint()
    split = plan.split.copy()
    t = int(np.flatnonzero(split[:, 0] != split[:, 1])[0])
    split[t, 0], split[t, 1] = split[t, 1], split[t, 0]
    assert Plan(**{**vars_of(plan), "split": split}).fingerprint() != plan.fingerprint()
    assert plan.fingerprint(patch=True) != plan.fingerprint()  # this plan has patch work
    assert len(plan.fingerprint()) == 16 and int(plan.fingerprint(), 16) >= 0


def vars_of(plan):
    return {name: getattr(plan, name) for name in ("status", "stack_number", "lower_bound", "failed", "lost_shards",
                                                   "assignment", "order", "moves", "patch", "micro_batches", "load",
                                                   "step_cost", "split")}


def test_fingerprints_are_equal_in_another_process():
    code = ("import numpy as np; from spare_opt import Layout, agreed_plan; "
            "layout = Layout((np.arange(9)[:, None] + np.array([0, 1, 5])) % 9); "
            "print(layout.fingerprint(), agreed_plan(layout, [4, 2], micro_batches=4).fingerprint())")
    layout = Layout((np.arange(9)[:, None] + np.array([0, 1, 5])) % 9)
    here = f"{layout.fingerprint()} {agreed_plan(layout, [2, 4], micro_batches=4).fingerprint()}"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={"PYTHONHASHSEED": "12345", "PATH": ""}, check=True).stdout.strip()
    assert there == here


def test_layout_fingerprint_covers_the_stacks_only():
    stacks = (np.arange(8)[:, None] + np.array([0, 1, 3])) % 8
    layout = Layout(stacks, offsets=[0, 1, 3])
    assert Layout(stacks.astype(np.int64), method="other").fingerprint() == layout.fingerprint()
    assert Layout(stacks[[1, 0, *range(2, 8)]]).fingerprint() != layout.fingerprint()
    assert Layout(stacks[:, [1, 0, 2]]).fingerprint() != layout.fingerprint()


@pytest.mark.parametrize("data", [b"", b"SPAREPLAN1" + b"\0" * 10, b"NOTAPLAN" * 20])
def test_from_bytes_refuses_what_is_not_a_plan(data):
    with pytest.raises(PlanError):
        Plan.from_bytes(data)


def test_from_bytes_refuses_a_truncated_plan():
    data = _plans()[1].to_bytes()
    with pytest.raises(PlanError, match="length"):
        Plan.from_bytes(data[:-4])


@pytest.mark.parametrize("document", [[], {"status": "masked"}, {**_plans()[0].to_dict(), "split": "x"},
                                      # was: taken as they are, a Plan with status 'x' or stack_number 'x'
                                      {**_plans()[0].to_dict(), "status": "x"},
                                      {**_plans()[0].to_dict(), "stack_number": "x"},
                                      {**_plans()[0].to_dict(), "lower_bound": 1.5},
                                      {**_plans()[0].to_dict(), "load": True},
                                      {**_plans()[0].to_dict(), "step_cost": "x"}])
def test_from_dict_refuses_what_is_not_a_plan(document):
    with pytest.raises(PlanError):
        Plan.from_dict(document)


def test_the_old_patch_form_converts_with_a_deprecation_warning():
    plan = _plans()[0]
    with pytest.warns(DeprecationWarning, match="patch_shard_types"):
        old = Plan(**{**vars_of(plan), "patch": plan.patch_shard_types})
    assert old == plan and all(isinstance(item, tuple) for items in old.patch.values() for item in items)
    document = plan.to_dict()
    document["patch"] = {g: [t for t, _ in items] for g, items in document["patch"].items()}
    with pytest.warns(DeprecationWarning):
        assert Plan.from_dict(document) == plan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Plan.from_dict(plan.to_dict())  # the current form does not warn
    with pytest.raises(PlanError, match="pairs"):
        Plan(**{**vars_of(_plans()[1]), "patch": {0: [1]}})


@settings(max_examples=25)
@given(data=st.data(), layout=layouts(), m=st.sampled_from([1, 2]))
def test_a_controller_loaded_from_a_state_behaves_as_its_source(data, layout, m):
    n = layout.groups
    source = ReorderController(layout, micro_batches=m)
    _run(source, data.draw(histories(n), label="history"))
    state = pickle.loads(pickle.dumps(source.state_dict()))
    copy = ReorderController(layout, micro_batches=m)
    _run(copy, data.draw(histories(n), label="the copy's own history"))
    copy.load_state_dict(state)
    assert copy.wiped_out == source.wiped_out and np.array_equal(copy.failed, source.failed)
    if source.wiped_out:
        source.restart()
        copy.restart()
    for kind, groups, mid_step in data.draw(histories(n), label="what follows"):
        failed = set(source.failed.tolist())
        if kind == "fail" and [g for g in groups if g not in failed] and not source.wiped_out:
            live = [g for g in groups if g not in failed]
            a, b = source.fail(live, mid_step=mid_step), copy.fail(live, mid_step=mid_step)
        elif kind == "recover" and [g for g in groups if g in failed] and not source.wiped_out:
            back = [g for g in groups if g in failed]
            a, b = source.recover(back), copy.recover(back)
        else:
            source.restart()
            copy.restart()
            continue
        assert a.to_bytes() == b.to_bytes()


def test_load_state_dict_refuses_another_layout_or_m():
    layout = _layout("circulant", 9, 3, 2)
    state = ReorderController(layout, micro_batches=2).state_dict()
    with pytest.raises(ParameterError, match="layout"):
        ReorderController(_layout("circulant", 9, 3, 5), micro_batches=2).load_state_dict(state)
    with pytest.raises(ParameterError, match="micro_batches"):
        ReorderController(layout).load_state_dict(state)
    with pytest.raises(ParameterError, match="not a controller state"):
        ReorderController(layout).load_state_dict({"format": "x"})


@settings(max_examples=30)
@given(layout=layouts(), m=st.sampled_from([1, 2, 5]), seed=st.integers(0, 10**6))
def test_work_by_group_equals_the_work_of_every_group(layout, m, seed):
    rng = np.random.default_rng(seed)
    n = layout.groups
    failed = rng.choice(n, size=int(rng.integers(0, n // 2 + 1)), replace=False)
    for plan in (agreed_plan(layout, failed, micro_batches=m),
                 agreed_plan(layout, failed, micro_batches=m, method="exact")):
        if not plan.masked:
            with pytest.raises(PlanError):
                plan.work_by_group()
            return
        work = plan.work_by_group()
        assert work.indptr.dtype == np.int64 and work.indptr.shape == (n + 1,) and work.indptr[-1] == n * m
        for g in range(n):
            part = list(zip(work.shard_types[work.indptr[g]:work.indptr[g + 1]].tolist(),
                            work.micro_batches[work.indptr[g]:work.indptr[g + 1]].tolist()))
            assert part == ([] if g in failed else plan.work(g))

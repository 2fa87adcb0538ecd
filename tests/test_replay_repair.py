"""Replay under ``repair`` semantics (issue 10, scope 2) against an independent step-by-step reference.

The reference below re-reads the events with plain Python sets (the reader's rules for
irregular events included), applies the repair rules batch by batch and computes the
least load ``L*`` after every batch from scratch with a maximum flow (scipy's
``maximum_flow`` on a network built here: source -> shard type ``m``, shard type ->
live holder ``m``, live group -> sink ``L``), never through spare_opt's planner.
"""

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import maximum_flow

from spare_opt import Layout, Placement, read_fault_trace, replay_trace
from spare_opt._core.errors import ParameterError
from spare_opt.simulation.replay import ROW_STATUSES
from spare_opt.traces.json_format import parse_fault_events


#: The engines that replay with repairs, and the micro-batch counts to test.
PLANNERS = ("exact", "controller")
MICRO = (1, 3)


def circulant(n, offsets):
    return Layout((np.arange(n)[:, None] + np.asarray(offsets)[None, :]) % n, method="circulant", offsets=offsets)


def ev(node, day, kind="fault_start"):
    return {"node_id": node, "event_time": day, "event_type": kind, "fault_type": {"Class": "GPU"}}


def flow_feasible(stacks, dead, m, load):
    """True when a maximum flow carries all ``N m`` micro-batches with no live group above ``load``."""
    n, r = len(stacks), len(stacks[0])
    source, sink = 2 * n, 2 * n + 1
    rows, cols, caps = [], [], []
    for t in range(n):
        rows.append(source), cols.append(t), caps.append(m)
    for g in range(n):
        if g in dead:
            continue
        for t in stacks[g]:
            rows.append(t), cols.append(n + g), caps.append(m)
        rows.append(n + g), cols.append(sink), caps.append(load)
    graph = sp.csr_matrix((np.array(caps, dtype=np.int32), (rows, cols)), shape=(2 * n + 2, 2 * n + 2))
    return maximum_flow(graph, source, sink).flow_value == n * m


def least_load(stacks, dead, m):
    """``L*`` by trying ``L = ceil(m N / (N - k)), ...`` until a flow saturates; None on a wipe-out."""
    n, r = len(stacks), len(stacks[0])
    held = set()
    for g in range(n):
        if g not in dead:
            held.update(stacks[g])
    if len(held) < n:
        return None
    load = math.ceil(m * n / (n - len(dead)))
    while not flow_feasible(stacks, dead, m, load):
        load += 1
        assert load <= m * r
    return load


def reference_repair(stacks, events, m=1, placement=None, groups_of=None):
    """The repair rules written out step by step; returns per-event statuses and a summary.

    ``placement`` (a permutation) places the i-th node to fail on ``placement[i]``;
    ``groups_of`` (node id -> list of groups) places nodes explicitly, a node on several
    groups, several nodes on one group (a group is out while any of its nodes is down).
    """
    stacks = [[int(x) for x in row] for row in stacks]
    n = len(stacks)
    order = sorted(range(len(events)), key=lambda i: events[i]["event_time"])
    times = [events[i]["event_time"] for i in order]
    index_of, trace_down = {}, set()
    dead, replaced, open_nodes, node_groups = set(), set(), set(), {}
    load = m
    status = [None] * len(order)
    summary = {"wipe_outs": 0, "max_out": 0, "max_load": m, "recoveries": 0, "ends_after_restart": 0,
               "masked": 0}
    area = 0.0
    t_prev = times[0] if times else 0.0
    k = 0
    while k < len(order):
        j = k
        while j < len(order) and times[j] == times[k]:
            j += 1
        area += load / m * (times[k] - t_prev)
        t_prev = times[k]
        # usable events of the instant, in file order, as (position, is_start, group)
        usable = []
        for pos in range(k, j):
            e = events[order[pos]]
            node, start = e["node_id"], e["event_type"] == "fault_start"
            if start == (node in trace_down):  # a start while down, or an end while up
                status[pos] = "irregular"
                continue
            # nodes are numbered at their first effective fault (an ignored event moves no node)
            index = index_of.setdefault(node, len(index_of))
            (trace_down.add if start else trace_down.discard)(node)
            if groups_of is not None:
                mine = set(groups_of.get(node, []))
            else:
                mine = set() if index >= n else {index if placement is None else int(placement[index])}
            if not mine:
                status[pos] = "skipped" if start else "end"
                continue
            node_groups[node] = mine
            usable.append((pos, start, node, mine))
        b = 0
        while b < len(usable):  # one batch: a run of usable events of one kind
            c = b
            while c < len(usable) and usable[c][1] == usable[b][1]:
                c += 1
            batch = usable[b:c]
            b = c
            if batch[0][1]:
                fresh, newly = [], set()
                for pos, _, node, mine in batch:
                    open_nodes.add(node)
                    new = mine - dead
                    status[pos] = "already-out" if not new else None
                    if new:
                        fresh.append(pos)
                    dead |= new
                    newly |= new
                summary["max_out"] = max(summary["max_out"], len(dead))
                if not fresh:
                    continue
                new_load = least_load(stacks, dead, m)
                if new_load is None:
                    summary["wipe_outs"] += 1
                    replaced |= open_nodes
                    open_nodes, dead, load, outcome = set(), set(), m, "wipe-out"
                else:
                    load, outcome = new_load, "masked"
                    summary["max_load"] = max(summary["max_load"], load)
                    summary["masked"] += len(newly)
                for pos in fresh:
                    status[pos] = outcome
            else:
                back = set()
                for pos, _, node, mine in batch:
                    if node in replaced:
                        replaced.discard(node)
                        status[pos] = "replaced"
                        summary["ends_after_restart"] += 1
                        continue
                    open_nodes.discard(node)
                    still = set()
                    for other in open_nodes:
                        still |= node_groups[other]
                    returning = (mine & dead) - still
                    status[pos] = "recovered" if returning else "end"
                    back |= returning
                if back:
                    dead -= back
                    summary["recoveries"] += len(back)
                    load = least_load(stacks, dead, m)
        for pos in range(k, j):
            status[pos] = (status[pos], len(dead))
        k = j
    span = times[-1] - times[0] if times else 0.0
    summary["mean_step_cost"] = area / span if span > 0 else load / m
    return status, summary


def rows_of(result):
    return [(row.status, row.failed_groups) for row in result.rows]


def check_against_reference(layout, events, placement_seed=None, m=1, planners=PLANNERS, groups_of=None):
    placement = None if placement_seed is None else np.random.default_rng(placement_seed).permutation(layout.groups)
    expected, ref = reference_repair(layout.stacks, events, m=m, placement=placement, groups_of=groups_of)
    trace = parse_fault_events(events)
    explicit = None if groups_of is None else Placement(groups_of)
    for planner in planners:
        result = replay_trace(layout, trace, planner=planner, semantics="repair", micro_batches=m,
                              check_plans=True, placement_seed=placement_seed, placement=explicit)
        assert rows_of(result) == expected
        s = result.summary
        assert s["semantics"] == "repair" and s["micro_batches"] == m
        # regression: a local name once overwrote the span's end with a dict, so the text crashed
        assert s["span_days"] == [float(t) for t in trace.span_days]
        assert f"days {round(trace.span_days[0], 4)} to {round(trace.span_days[1], 4)}" in result.format_text()
        for key in ("wipe_outs", "max_out", "max_load", "recoveries", "ends_after_restart", "masked"):
            assert s[key] == ref[key], key
        assert s["mean_step_cost"] == pytest.approx(ref["mean_step_cost"])
        if m == 1:  # S* = L* at m = 1
            assert s["max_stack_number"] == ref["max_load"]
            assert s["mean_stack_number"] == pytest.approx(ref["mean_step_cost"])
        assert set(row.status for row in result.rows) <= set(ROW_STATUSES)
    return result


# --------------------------------------------------------------- hand-built cases
def test_a_repaired_group_comes_back_and_the_stack_number_falls():
    layout = circulant(5, [0, 1])
    events = [ev("a", 1), ev("a", 3, "fault_end"), ev("b", 4)]
    result = check_against_reference(layout, events)
    assert [row.status for row in result.rows] == ["masked", "recovered", "masked"]
    assert [row.stack_number for row in result.rows] == [2, 1, 2]
    # S = 1 on [0, 1], 2 on [1, 3], 1 on [3, 4]: mean over the span [1, 4] is (2 * 2 + 1) / 3
    assert result["mean_stack_number"] == pytest.approx(5 / 3)
    # under the paper's semantics group 0 is still out when group 1 fails: shard type 1 has no live holder
    paper = replay_trace(layout, parse_fault_events(events))
    assert paper["semantics"] == "paper" and [row.status for row in paper.rows] == ["masked", "end", "wipe-out"]


def test_wipe_out_restart_replaces_down_nodes_and_their_end_is_ignored():
    layout = circulant(4, [0, 1])  # group g holds g, g + 1: groups 0 and 1 both hold shard type 1
    events = [ev("a", 1), ev("b", 2), ev("a", 3, "fault_end"), ev("b", 3, "fault_end"), ev("a", 4)]
    result = check_against_reference(layout, events)
    assert [row.status for row in result.rows] == ["masked", "wipe-out", "replaced", "replaced", "masked"]
    s = result.summary
    assert s["wipe_outs"] == 1 and s["ends_after_restart"] == 2 and s["recoveries"] == 0 and s["max_out"] == 2


def test_a_fault_that_starts_and_ends_at_one_instant_fails_then_recovers():
    layout = circulant(5, [0, 1])
    events = [ev("a", 1), ev("a", 1, "fault_end"), ev("b", 2)]
    result = check_against_reference(layout, events)
    assert [row.status for row in result.rows] == ["masked", "recovered", "masked"]
    assert result["max_out"] == 1


def test_starts_in_one_run_are_one_batch_and_a_wipe_out_brings_all_back():
    layout = circulant(4, [0, 1])
    events = [ev("a", 1), ev("b", 1), ev("c", 1), ev("c", 2, "fault_end")]
    result = check_against_reference(layout, events)
    assert [row.status for row in result.rows] == ["wipe-out"] * 3 + ["replaced"]
    assert len({row.batch for row in result.rows[:3]}) == 1 and result["max_out"] == 3


def test_paper_semantics_results_are_unchanged_by_the_new_keys(real_trace_path):
    layout = circulant(400, [0, 1, 5, 12, 25, 27, 35, 41, 44])
    trace = read_fault_trace(real_trace_path)
    default = replay_trace(layout, trace)
    paper = replay_trace(layout, trace, semantics="paper")
    assert default == paper and default["semantics"] == "paper"
    assert default["max_out"] == default["max_failed_groups"]
    assert default["mean_step_cost"] == pytest.approx(default["mean_stack_number"])
    assert default["max_load"] == default["max_stack_number"]


def test_bad_semantics_and_micro_batches():
    layout = circulant(5, [0, 1])
    trace = parse_fault_events([ev("a", 1)])
    with pytest.raises(ParameterError, match="semantics"):
        replay_trace(layout, trace, semantics="repairs")
    with pytest.raises(ParameterError, match="micro_batches"):
        replay_trace(layout, trace, micro_batches=0)


# ------------------------------------------------------------ random agreement
@st.composite
def repair_cases(draw):
    m = draw(st.sampled_from(MICRO))
    n = draw(st.integers(3, 8))
    r = draw(st.integers(1, min(3, n)))
    rest = draw(st.lists(st.integers(1, n - 1), min_size=r - 1, max_size=r - 1, unique=True))
    nodes = draw(st.integers(1, n + 2))
    spec = draw(st.lists(st.tuples(st.integers(0, nodes - 1), st.integers(0, 8), st.booleans()), max_size=24))
    events = [ev(f"n{node}", day / 4, "fault_start" if start else "fault_end") for node, day, start in spec]
    seed = draw(st.none() | st.integers(0, 3))
    return circulant(n, [0] + rest), events, seed, m


@settings(max_examples=150, deadline=None)
@given(repair_cases())
def test_repair_replay_matches_the_step_by_step_reference(case):
    layout, events, seed, m = case
    check_against_reference(layout, events, placement_seed=seed, m=m)


@st.composite
def placed_cases(draw):
    """Explicit placements: a node on several groups, several nodes on one group, unplaced nodes."""
    layout, events, _, m = draw(repair_cases())
    nodes = sorted({e["node_id"] for e in events})
    groups_of = {}
    for node in nodes:  # an unlisted node is skipped
        mine = draw(st.lists(st.integers(0, layout.groups - 1), max_size=3, unique=True))
        if mine:
            groups_of[node] = mine
    return layout, events, groups_of, m


@settings(max_examples=100, deadline=None)
@given(placed_cases())
def test_repair_replay_with_placements_matches_the_reference(case):
    layout, events, groups_of, m = case
    check_against_reference(layout, events, groups_of=groups_of, m=m)


def test_a_group_of_two_nodes_comes_back_when_both_are_repaired():
    layout = circulant(5, [0, 1])
    events = [ev("a", 1), ev("b", 2), ev("a", 3, "fault_end"), ev("b", 4, "fault_end")]
    result = check_against_reference(layout, events, groups_of={"a": [2], "b": [2]})
    assert [row.status for row in result.rows] == ["masked", "already-out", "end", "recovered"]
    assert [row.failed_groups for row in result.rows] == [1, 1, 1, 0]


# ------------------------------------------------------------------ real trace
@pytest.mark.parametrize("m", [1])
def test_real_trace_under_repair_matches_the_reference(real_trace_path, m):
    # r = 2 and a random placement: the real trace wipes this layout out 14 times
    layout = circulant(400, [0, 1])
    raw = json.loads(real_trace_path.read_text())
    result = check_against_reference(layout, raw, placement_seed=1, m=m)
    s = result.summary
    assert s["wipe_outs"] >= 2 and s["ends_after_restart"] >= 2
    assert s["recoveries"] + s["ends_after_restart"] == 583  # every usable end: the trace has none open
    assert 1.0 <= s["mean_stack_number"] <= s["max_stack_number"]

"""Tests of trace replay (spare_opt.simulation.replay) against an independent plain-Python reference."""

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spare_opt import Layout, read_fault_trace, replay_trace
from spare_opt._core.errors import ParameterError, ParameterTypeError
from spare_opt.simulation.replay import ROW_STATUSES
from spare_opt.traces.json_format import parse_fault_events

# The optimal 9-mark Golomb ruler (length 44 < 400 / 2): a Sidon set mod 400.
GOLOMB_9 = [0, 1, 5, 12, 25, 27, 35, 41, 44]


def circulant(n, offsets, method="circulant"):
    return Layout((np.arange(n)[:, None] + np.asarray(offsets)[None, :]) % n, method=method, offsets=offsets)


def ev(node, day, kind="fault_start"):
    return {"node_id": node, "event_time": day, "event_type": kind, "fault_type": {"Class": "GPU"}}


def brute_force_stack_number(stacks, dead):
    """``max over shard sets T of ceil(|T| / |live holders of T|)`` (Hall); None on a wipe-out."""
    n = len(stacks)
    holders = [{g for g in range(n) if g not in dead and t in stacks[g]} for t in range(n)]
    if any(not h for h in holders):
        return None
    best = 1
    for size in range(1, n + 1):
        for subset in itertools.combinations(range(n), size):
            live = set().union(*(holders[t] for t in subset))
            best = max(best, math.ceil(size / len(live)))
    return best


def holder_sets(stacks):
    n = len(stacks)
    return [{g for g in range(n) if t in stacks[g]} for t in range(n)]


def lost_any(holders, dead):
    return any(h <= dead for h in holders)


def reference_replay(stacks, events, exact_s=True, placement=None):
    """The paper's replay rules written out with sets and dicts, independently of spare_opt.

    Returns per-event (status, S) in time order (stable), and a summary dict.
    """
    stacks = [[int(x) for x in row] for row in stacks]
    n = len(stacks)
    holders = holder_sets(stacks)
    order = sorted(range(len(events)), key=lambda i: events[i]["event_time"])
    group_of, trace_down = {}, set()
    dead, s = set(), 1
    out = [None] * len(order)
    wipe_outs = masked = 0
    max_s, area = 1, 0.0
    times = [events[i]["event_time"] for i in order]
    t_prev = times[0] if times else 0.0
    k = 0
    while k < len(order):
        j = k
        while j < len(order) and times[j] == times[k]:
            j += 1
        area += (s or 0) * (times[k] - t_prev)
        t_prev = times[k]
        pending = []
        for pos in range(k, j):
            e = events[order[pos]]
            node = e["node_id"]
            if e["event_type"] == "fault_start":
                if node in trace_down:
                    out[pos] = "irregular"
                    continue
                # Nodes are numbered at their first effective fault (an ignored event moves no node).
                index = group_of.setdefault(node, len(group_of))
                group = index if placement is None or index >= n else int(placement[index])
                trace_down.add(node)
                if index >= n:
                    out[pos] = "skipped"
                elif group in dead:
                    out[pos] = "already-out"
                else:
                    dead.add(group)
                    pending.append(pos)
            else:
                out[pos] = "end" if node in trace_down else "irregular"
                trace_down.discard(node)
        if pending:
            if lost_any(holders, dead):
                status, dead, s = "wipe-out", set(), 1
                wipe_outs += 1
            else:
                status = "masked"
                masked += len(pending)
                s = brute_force_stack_number(stacks, dead) if exact_s else None
                max_s = max(max_s, s or 1)
            for pos in pending:
                out[pos] = status
        for pos in range(k, j):
            out[pos] = (out[pos], s)
        k = j
    span = times[-1] - times[0] if times else 0.0
    mean_s = area / span if span > 0 else s
    return out, {"wipe_outs": wipe_outs, "masked": masked, "max_stack_number": max_s, "mean_stack_number": mean_s}


def replay_both(layout, events, placement_seed=None):
    trace = parse_fault_events(events)
    return (replay_trace(layout, trace, placement_seed=placement_seed),
            replay_trace(layout, trace, planner="exact", check_plans=True, placement_seed=placement_seed))


def statuses(result):
    return [(row.status, row.stack_number) for row in result.rows]


# --------------------------------------------------------------- hand-built cases
def test_wipe_out_exactly_when_all_holders_of_a_shard_are_down():
    layout = circulant(6, [0, 2])  # shard t is held by groups t and t - 2
    events = [ev("a", 1), ev("b", 2), ev("c", 3), ev("a", 3.5, "fault_end"), ev("a", 4)]
    expected, ref = reference_replay(layout.stacks, events)
    for result in replay_both(layout, events):
        assert statuses(result) == expected
        # a -> group 0 and b -> group 1 share no shard type: masked; c -> group 2 leaves
        # shard 2 (holders 0, 2) with no live holder: wipe-out, restart; a's next fault
        # fails group 0 again.
        assert [row.status for row in result.rows] == ["masked", "masked", "wipe-out", "end", "masked"]
        assert [row.failed_groups for row in result.rows] == [1, 2, 0, 0, 1]
        assert result["wipe_outs"] == ref["wipe_outs"] == 1
        assert result["wipe_out_days"] == [3.0]
        assert result["masked_before_wipe_out"] == [2] and result["masked_since_last_restart"] == 1
        assert result.rows[2].stack_number == 1  # S = 1 after the restart


def test_failures_at_one_instant_form_one_batch():
    layout = circulant(6, [0, 1], "consecutive")
    together = [ev("a", 1), ev("b", 1)]  # groups 0 and 1 hold shard 1 together
    apart = [ev("a", 1), ev("b", 2)]
    for result in replay_both(layout, together):
        assert [row.status for row in result.rows] == ["wipe-out", "wipe-out"]
        assert [row.batch for row in result.rows] == [0, 0]
        assert result["batches"] == 1 and result["group_failures"] == 2
    for result in replay_both(layout, apart):
        assert [row.status for row in result.rows] == ["masked", "wipe-out"]
        assert result["batches"] == 2 and result["masked_batches"] == 1


def test_fault_end_does_not_bring_a_group_back():
    layout = circulant(8, [0, 1, 3])
    events = [ev("a", 1), ev("a", 2, "fault_end"), ev("a", 3), ev("b", 4)]
    expected, _ = reference_replay(layout.stacks, events)
    for result in replay_both(layout, events):
        assert statuses(result) == expected
        assert [row.status for row in result.rows] == ["masked", "end", "already-out", "masked"]
        assert result["already_out"] == 1 and result["fault_ends"] == 1
        assert result.rows[3].failed_groups == 2


def test_irregular_events_do_nothing_and_are_reported():
    layout = circulant(8, [0, 1, 3])
    events = [ev("a", 1), ev("a", 2), ev("z", 2.5, "fault_end"), ev("a", 3, "fault_end"), ev("b", 0.5)]
    for result in replay_both(layout, events):
        assert [row.status for row in result.rows] == ["masked", "masked", "irregular", "irregular", "end"]
        assert result["irregular"] == {"start-while-down": 1, "end-without-start": 1, "out-of-order": 1}
        assert len(result["irregular_events"]) == 3
        assert result["group_failures"] == 2


def test_nodes_beyond_the_cluster_are_skipped():
    layout = circulant(3, [0, 1])
    events = [ev(name, day) for day, name in enumerate("abcde")] + [ev("e", 9, "fault_end")]
    expected, _ = reference_replay(layout.stacks, events)
    for result in replay_both(layout, events):
        assert statuses(result) == expected
        assert result["skipped"] == {"nodes": 2, "fault_starts": 2, "events": 3}
        assert [row.group for row in result.rows] == [0, 1, 2, -1, -1, -1]


def test_time_weighted_mean_stack_number():
    layout = circulant(8, [0, 1, 3])
    # S = 1 on [0, 2), S* after one failure on [2, 10]: mean = (2 + 8 S*) / 10.
    events = [ev("x", 0, "fault_end"), ev("a", 2), ev("a", 10, "fault_end")]
    for result in replay_both(layout, events):
        s_star = result.rows[1].stack_number
        assert s_star == brute_force_stack_number(layout.stacks.tolist(), {0}) == 2
        assert result["mean_stack_number"] == pytest.approx((2 + 8 * s_star) / 10)
        assert result["max_stack_number"] == s_star


def test_empty_trace_and_zero_span():
    layout = circulant(5, [0, 2])
    result = replay_trace(layout, parse_fault_events([]))
    assert result["faults"] == 0 and result["mean_stack_number"] == 1.0 and result.rows == ()
    result = replay_trace(layout, parse_fault_events([ev("a", 3), ev("b", 3)]))
    assert result["mean_stack_number"] == result["final_stack_number"]


# ------------------------------------------------------------ random agreement
@st.composite
def layouts_and_events(draw):
    n = draw(st.integers(3, 8))
    r = draw(st.integers(1, min(3, n)))
    rest = draw(st.lists(st.integers(1, n - 1), min_size=r - 1, max_size=r - 1, unique=True))
    nodes = draw(st.integers(1, n + 2))
    spec = draw(st.lists(st.tuples(st.integers(0, nodes - 1), st.integers(0, 8), st.booleans()), max_size=18))
    events = [ev(f"n{node}", day / 4, "fault_start" if start else "fault_end") for node, day, start in spec]
    seed = draw(st.none() | st.integers(0, 3))
    return circulant(n, [0] + rest), events, seed


@given(layouts_and_events())
def test_replay_matches_reference_controller_and_exact(case):
    layout, events, seed = case
    placement = None if seed is None else np.random.default_rng(seed).permutation(layout.groups)
    expected, ref = reference_replay(layout.stacks, events, placement=placement)
    controller, exact = replay_both(layout, events, placement_seed=seed)
    for result in (controller, exact):
        assert statuses(result) == expected
        for key in ("wipe_outs", "masked", "max_stack_number"):
            assert result[key] == ref[key]
        assert result["mean_stack_number"] == pytest.approx(ref["mean_stack_number"])
        s = result.summary
        starts = sum(e["event_type"] == "fault_start" for e in events)
        assert s["faults"] == starts
        assert s["group_failures"] + s["already_out"] + s["irregular"]["start-while-down"] + s["skipped"]["fault_starts"] == starts
        assert set(row.status for row in result.rows) <= set(ROW_STATUSES)


# ------------------------------------------------------------------ real trace
def test_real_trace_controller_and_exact_agree(real_trace_path):
    layout = circulant(400, GOLOMB_9, "sidon")
    assert layout.overlap() == 1
    trace = read_fault_trace(real_trace_path)
    controller = replay_trace(layout, trace, check_plans=True)
    exact = replay_trace(layout, trace, planner="exact", check_plans=True)
    assert statuses(controller) == statuses(exact)
    raw = json.loads(real_trace_path.read_text())
    expected, ref = reference_replay(layout.stacks, raw, exact_s=False)
    assert [row.status for row in controller.rows] == [status for status, _ in expected]
    s = controller.summary
    assert s["faults"] == 584 and s["fault_ends"] == 584 and s["nodes"] == 231
    assert s["wipe_outs"] == ref["wipe_outs"] and s["masked"] == ref["masked"]
    assert s["skipped"]["nodes"] == 0
    assert s["group_failures"] + s["already_out"] + s["irregular"]["start-while-down"] == 584
    assert 1 <= s["mean_stack_number"] <= s["max_stack_number"] <= 9
    assert exact.summary["planner"] == "exact" and s["planner"] == "controller"
    small = replay_trace(circulant(100, [0, 1, 5, 12]), trace)
    assert small["skipped"]["nodes"] == 131 and small["skipped"]["events"] > 0


# ---------------------------------------------------------------------- output
def test_to_dict_progress_and_bad_arguments():
    layout = circulant(8, [0, 1, 3])
    trace = parse_fault_events([ev("a", 1), ev("b", 1), ev("a", 2, "fault_end"), ev("c", 5)])
    seen = []
    result = replay_trace(layout, trace, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(2, 4), (3, 4), (4, 4)]  # one call per instant, cumulative events
    doc = json.loads(json.dumps(result.to_dict()))
    assert "rows" not in doc and doc["faults"] == 3
    doc = json.loads(json.dumps(result.to_dict(rows=True)))
    assert len(doc["rows"]) == 4
    with pytest.warns(DeprecationWarning, match="to_dict"):
        assert result.to_json(rows=True) == result.to_dict(rows=True)  # the old name still answers
    assert set(doc["rows"][0]) == {"index", "time_days", "node", "node_id", "group", "kind", "fault_class",
                                   "status", "stack_number", "failed_groups", "batch", "moves"}
    text = result.format_text(rows=True)
    assert "masked" in text and "time-weighted mean S" in text and len(text.splitlines()) > 12
    with pytest.raises(ParameterTypeError, match="Layout"):
        replay_trace("layout.json", trace)
    with pytest.raises(ParameterTypeError, match="FaultTrace"):
        replay_trace(layout, [ev("a", 1)])
    with pytest.raises(ParameterError, match="planner"):
        replay_trace(layout, trace, planner="magic")
    with pytest.raises(ParameterTypeError, match="check_plans"):
        replay_trace(layout, trace, check_plans=1)
    with pytest.raises(TypeError):  # options are keyword-only
        replay_trace(layout, trace, "exact")


def test_exact_keyword_is_deprecated_for_planner():
    layout = circulant(8, [0, 1, 3])
    trace = parse_fault_events([ev("a", 1), ev("b", 1), ev("c", 5)])
    with pytest.warns(DeprecationWarning, match="planner='exact'"):
        old = replay_trace(layout, trace, exact=True)
    new = replay_trace(layout, trace, planner="exact")
    assert old["planner"] == new["planner"] == "exact" and old.rows == new.rows
    with pytest.warns(DeprecationWarning):
        assert replay_trace(layout, trace, exact=False)["planner"] == "controller"

"""The walk of a trace (``trace_events``) against the plain reference of the event rules (``naive_events``).

Random traces with bursts at one instant, starts and ends at the same instant, repeated
starts and stray ends (the reader flags them), nodes outside the cluster, under both
semantics, every strategy and heal times of zero and more: the events, their outcomes
and the counts must be the reference's exactly.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from naive_events import naive_trace_events
from spare_opt import parse_fault_events, trace_events
from spare_opt.simulation.time_to_train import default_layout

STRATEGIES = [("ckpt", 1, 1), ("rep", 2, 1), ("rep", 3, 1), ("elastic", 1, 1), ("spare", 2, 1), ("spare", 3, 1),
              ("spare", 3, 4)]


def _trace(rows):
    return parse_fault_events([
        {"node_id": f"n{node}", "event_time": day, "event_type": "fault_start" if start else "fault_end",
         "fault_type": {"Class": "GPU"}}
        for node, day, start in rows])


def _same(a, b):
    assert np.array_equal(a.times_seconds, b.times_seconds)
    assert np.array_equal(a.kinds, b.kinds)
    assert len(a.event_groups) == len(b.event_groups)
    assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a.event_groups, b.event_groups))
    assert np.array_equal(a.wipe_outs, b.wipe_outs)
    assert np.array_equal(a.step_costs, b.step_costs)
    assert np.array_equal(a.stack_numbers, b.stack_numbers)
    assert a.counts == b.counts


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 14) | st.integers(0, 2), st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0]) | st.floats(0.0, 6.0),
                            st.booleans()), min_size=1, max_size=80),
    setting=st.sampled_from(STRATEGIES),
    semantics=st.sampled_from(["paper", "repair"]),
    heal=st.sampled_from([0.0, 60.0, 43200.0]),
    groups=st.integers(15, 24),
    placement_seed=st.none() | st.integers(0, 3),
)
def test_trace_events_equal_the_reference(rows, setting, semantics, heal, groups, placement_seed):
    strategy, r, m = setting
    rows = sorted(rows, key=lambda row: row[1])  # a trace is in time order; ties keep their file order
    trace = _trace(rows)
    layout = default_layout(groups, r) if strategy == "spare" else None
    kwargs = dict(semantics=semantics, layout=layout, micro_batches=m, heal_seconds=heal,
                  placement_seed=placement_seed)
    _same(trace_events(trace, groups, strategy, r, **kwargs), naive_trace_events(trace, groups, strategy, r, **kwargs))


def test_the_shipped_trace_walks_equal_the_reference(real_trace_path):
    from spare_opt import read_fault_trace

    trace = read_fault_trace(real_trace_path)
    for strategy, r, m in [("rep", 3, 1), ("elastic", 1, 1), ("spare", 3, 4)]:
        layout = default_layout(400, r) if strategy == "spare" else None
        kwargs = dict(semantics="repair", layout=layout, micro_batches=m, heal_seconds=60.0, placement_seed=1)
        _same(trace_events(trace, 400, strategy, r, **kwargs), naive_trace_events(trace, 400, strategy, r, **kwargs))


def test_a_heal_cancelled_and_begun_again_at_one_instant_rejoins_once():
    # At day 1 node a's end starts a heal, its new start cancels it, its next end starts
    # it again: two heap entries for one heal end, one rejoin (the walk once listed the
    # group twice and the controller refused it).
    trace = _trace([(0, 0.0, True), (0, 1.0, False), (0, 1.0, True), (0, 1.0, False)])
    for strategy, r, m in STRATEGIES:
        layout = default_layout(4, r) if strategy == "spare" else None
        kwargs = dict(semantics="repair", layout=layout, micro_batches=m, heal_seconds=60.0)
        events = trace_events(trace, 4, strategy, r, **kwargs)
        _same(events, naive_trace_events(trace, 4, strategy, r, **kwargs))
        if strategy != "ckpt":
            assert events.kinds.tolist() == [0, 1] and events.times_seconds[1] == 86460.0
            assert events.counts["rejoined"] == 1 and events.counts["failed_while_healing"] == 1

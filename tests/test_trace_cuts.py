"""The trace cut once into instants and repair batches (vectorised, cached) against a plain-Python reference."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spare_opt import instant_batches, parse_fault_events, trace_instants
from spare_opt.traces.trace import _cuts, _instants


def _reference(trace, indptr, group_ids):
    """Instants (failing / recovering groups once, event order) and batches, event by event."""
    usable = [not trace.ignored[k] and indptr[trace.node[k] + 1] > indptr[trace.node[k]] for k in range(trace.n_events)]
    times = trace.times_days.tolist()
    instants, batches = [], []
    k = 0
    while k < trace.n_events:
        stop = k
        while stop < trace.n_events and times[stop] == times[k]:
            stop += 1
        fail, rec, runs = {}, {}, []
        for e in range(k, stop):
            if not usable[e]:
                continue
            node = int(trace.node[e])
            start = bool(trace.is_start[e])
            for g in group_ids[indptr[node]:indptr[node + 1]].tolist():
                (fail if start else rec).setdefault(g, e)
            if runs and runs[-1][0] == start:
                runs[-1][1].append(e)
            else:
                runs.append((start, [e]))
        instants.append((times[k], k, stop, list(fail.items()), list(rec.items())))
        batch_groups = []
        for start, events in runs:
            seen = {}
            for e in events:
                node = int(trace.node[e])
                for g in group_ids[indptr[node]:indptr[node + 1]].tolist():
                    seen.setdefault(g, e)
            batch_groups.append((start, events, list(seen)))
        batches.append(batch_groups)
        k = stop
    return instants, batches


@st.composite
def _traces(draw):
    nodes = draw(st.integers(1, 6))
    count = draw(st.integers(0, 30))
    events = []
    for _ in range(count):
        events.append({"node_id": f"n{draw(st.integers(0, nodes - 1))}", "event_time": float(draw(st.integers(0, 5))),
                       "event_type": draw(st.sampled_from(["fault_start", "fault_end"])),
                       "fault_type": {"Class": "GPU"}})
    trace = parse_fault_events(events)
    groups = draw(st.integers(1, 5))
    sizes = [draw(st.integers(0, groups)) for _ in range(trace.n_nodes)]
    ids = [sorted(draw(st.permutations(range(groups)))[:s]) for s in sizes]
    indptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    group_ids = np.array([g for row in ids for g in row], dtype=np.int32)
    return trace, indptr, group_ids


@settings(max_examples=150, deadline=None)
@given(_traces())
def test_cuts_equal_the_reference(case):
    trace, indptr, group_ids = case
    members = (indptr, group_ids)
    want_instants, want_batches = _reference(trace, indptr, group_ids)
    instants, node_group = _instants(trace, members)
    cuts = _cuts(trace, members)
    assert len(instants) == len(want_instants)
    j = 0
    for got, want, want_b in zip(instants, want_instants, want_batches):
        assert (got.time_days, got.start, got.stop) == want[:3]
        assert list(zip(got.failing.tolist(), got.failing_events.tolist())) == want[3]
        assert list(zip(got.recovering.tolist(), got.recovering_events.tolist())) == want[4]
        assert got.failing.dtype == np.int32 and got.failing_events.dtype == np.int64
        batches = instant_batches(trace, got, members)
        assert [(s, e.tolist()) for s, e in batches] == [(s, e) for s, e, _ in want_b]
        for start, events, groups in want_b:
            assert cuts.batch_groups[cuts.batch_group_ptr[j]:cuts.batch_group_ptr[j + 1]].tolist() == groups
            j += 1
    assert j == cuts.batch_start.size
    sizes = np.diff(indptr)
    assert node_group.tolist() == [int(group_ids[indptr[i]]) if sizes[i] else -1 for i in range(trace.n_nodes)]


def test_cuts_are_cached_per_placement_and_read_only():
    events = [{"node_id": f"n{i % 7}", "event_time": float(i // 3), "event_type": "fault_start" if i % 2 == 0 else "fault_end",
               "fault_type": {"Class": "GPU"}} for i in range(40)]
    trace = parse_fault_events(events)
    a = _cuts(trace, trace.node_groups(8, seed=1, members=True))
    assert _cuts(trace, trace.node_groups(8, seed=1, members=True)) is a  # the same placement, the same cuts
    b = _cuts(trace, trace.node_groups(8, seed=2, members=True))
    assert b is not a
    assert trace_instants(trace, 8, placement_seed=2)[0] is b.instants
    assert not a.fail_groups.flags.writeable and not a.batch_events.flags.writeable
    # a batch list handed out is the caller's own copy
    batches = instant_batches(trace, a.instants[0], trace.node_groups(8, seed=1, members=True))
    batches[0][1][:] = -1
    again = instant_batches(trace, a.instants[0], trace.node_groups(8, seed=1, members=True))
    assert (again[0][1] >= 0).all()

"""Tests of the fault-trace reader (spare_opt.traces.trace): real data, irregular events, bad files."""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spare_opt._core.errors import OutputExistsError, ParameterError, ParameterTypeError, TraceError
from spare_opt.traces.trace import IRREGULAR_KINDS, TRACE_FORMAT
from spare_opt.traces.json_format import parse_fault_events, read_fault_trace, write_fault_trace
from spare_opt.traces.synthetic import synthetic_fault_trace

REPO = Path(__file__).resolve().parent.parent


def ev(node, day, kind="fault_start", cls="GPU"):
    return {"node_id": node, "event_time": day, "event_type": kind,
            "fault_type": {"Level": "Hardware Failure", "Class": cls, "Desc": "test"}}


def naive_read(events):
    """Reference: sort by time (Python's sort is stable), replay an up/down set, number nodes.

    Nodes are numbered in order of their first effective fault (a start that is not
    ignored), then the nodes with none in order of first appearance.
    """
    order = sorted(range(len(events)), key=lambda i: events[i]["event_time"])
    appearance = {}
    effective = {}
    down = set()
    ignored = []
    kinds = {kind: 0 for kind in IRREGULAR_KINDS}
    for i in order:
        e = events[i]
        appearance.setdefault(e["node_id"], len(appearance))
        if e["event_type"] == "fault_start" and e["node_id"] not in down:
            effective.setdefault(e["node_id"], len(effective))
        if e["event_type"] == "fault_start":
            ignored.append(e["node_id"] in down)
            kinds["start-while-down"] += e["node_id"] in down
            down.add(e["node_id"])
        else:
            ignored.append(e["node_id"] not in down)
            kinds["end-without-start"] += e["node_id"] not in down
            down.discard(e["node_id"])
    latest = -np.inf
    for e in events:
        kinds["out-of-order"] += e["event_time"] < latest
        latest = max(latest, e["event_time"])
    naive_read.open_at_end = len(down)
    nodes = dict(effective)
    for node in appearance:
        nodes.setdefault(node, len(nodes))
    return order, nodes, ignored, kinds


def write(tmp_path, doc, name="trace.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


# ------------------------------------------------------------------ real trace
def test_real_trace_counts_and_irregular_events(real_trace_path):
    raw = json.loads(Path(real_trace_path).read_text())
    trace = read_fault_trace(real_trace_path)
    assert trace.format == "infinitehbd"
    assert trace.n_events == len(raw)
    assert trace.n_starts == 584 == sum(e["event_type"] == "fault_start" for e in raw)
    assert trace.n_ends == 584
    assert trace.n_nodes == 231 == len({e["node_id"] for e in raw})
    assert np.all(np.diff(trace.times_days) >= 0)
    order, nodes, ignored, kinds = naive_read(raw)
    assert trace.irregular_counts() == kinds
    assert trace.open_at_end == naive_read.open_at_end
    assert sum(kinds.values()) >= 1  # the file is known to hold irregular sequences
    assert trace.ignored.tolist() == ignored
    assert list(trace.node_ids) == list(nodes)
    assert trace.file_index.tolist() == order
    assert list(trace.fault_class) == [raw[i]["fault_type"]["Class"] for i in order]
    for event in trace.irregular:
        assert raw[event.file_index]["node_id"] == trace.node_ids[trace.node[event.index]]
        assert f"event {event.file_index}" in event.message
    summary = json.loads(json.dumps(trace.summary()))
    assert summary["fault_starts"] == 584 and summary["irregular"] == kinds


# ----------------------------------------------------------- irregular events
def test_start_while_down_is_ignored_and_reported(tmp_path):
    trace = read_fault_trace(write(tmp_path, [ev("a", 1), ev("a", 2, cls="Fan"), ev("a", 3, "fault_end")]))
    assert trace.ignored.tolist() == [False, True, False]
    assert trace.irregular_counts()["start-while-down"] == 1
    (event,) = trace.irregular
    assert (event.index, event.file_index, event.kind) == (1, 1, "start-while-down")
    assert "already down since day 1" in event.message and "Fan" in event.message and "GPU" in event.message


def test_end_without_start_never_down_and_after_end(tmp_path):
    events = [ev("x", 0.5, "fault_end"), ev("a", 1), ev("a", 2, "fault_end"), ev("a", 3, "fault_end")]
    trace = read_fault_trace(write(tmp_path, events))
    assert trace.ignored.tolist() == [True, False, False, True]
    kinds = [e.kind for e in trace.irregular]
    assert kinds == ["end-without-start", "end-without-start"]
    assert "never went down" in trace.irregular[0].message
    assert "last fault ended at day 2" in trace.irregular[1].message


def test_out_of_order_events_are_sorted_stably(tmp_path):
    events = [ev("a", 5), ev("b", 1), ev("c", 1), ev("a", 6, "fault_end"), ev("d", 0)]
    trace = read_fault_trace(write(tmp_path, events))
    assert trace.times_days.tolist() == [0, 1, 1, 5, 6]
    assert trace.file_index.tolist() == [4, 1, 2, 0, 3]  # b before c: file order kept at equal times
    assert trace.node_ids == ("d", "b", "c", "a")  # order of first fault in time
    assert trace.node.tolist() == [0, 1, 2, 3, 3]
    out = [e for e in trace.irregular if e.kind == "out-of-order"]
    assert [e.file_index for e in out] == [4, 1, 2]  # listed in time order
    assert [e.index for e in trace.irregular] == sorted(e.index for e in trace.irregular)
    assert not trace.ignored.any()


def test_equal_times_keep_file_order_for_start_and_end(tmp_path):
    # end then start at the same instant: the node was up again, the start is regular.
    trace = read_fault_trace(write(tmp_path, [ev("a", 1), ev("a", 2, "fault_end"), ev("a", 2)]))
    assert not trace.ignored.any() and trace.irregular == ()
    # start then end at one instant, then a start: regular as well.
    trace = read_fault_trace(write(tmp_path, [ev("a", 1), ev("a", 1, "fault_end"), ev("a", 1)], "t2.json"))
    assert not trace.ignored.any()


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6), st.booleans()), max_size=25))
def test_reader_matches_naive_reference(spec):
    events = [ev(f"n{node}", day / 2, "fault_start" if start else "fault_end") for node, day, start in spec]
    trace = parse_fault_events(events)
    order, nodes, ignored, kinds = naive_read(events)
    assert trace.file_index.tolist() == order
    assert trace.node_ids == tuple(nodes)
    assert [trace.node_ids[i] for i in trace.node] == [events[i]["node_id"] for i in order]
    assert trace.is_start.tolist() == [events[i]["event_type"] == "fault_start" for i in order]
    assert trace.ignored.tolist() == ignored
    assert trace.irregular_counts() == kinds
    assert trace.open_at_end == naive_read.open_at_end
    assert trace.n_starts + trace.n_ends == len(events)


def test_empty_trace():
    trace = parse_fault_events([])
    assert trace.n_events == 0 and trace.n_nodes == 0 and trace.span_days == (0.0, 0.0)
    assert trace.irregular_counts() == {kind: 0 for kind in IRREGULAR_KINDS}


def test_node_groups_maps_first_appearance_and_skips_extra_nodes():
    trace = parse_fault_events([ev("c", 0), ev("a", 1), ev("b", 2), ev("c", 3, "fault_end")])
    assert trace.node_groups(5).tolist() == [0, 1, 2]
    assert trace.node_groups(2).tolist() == [0, 1, -1]
    for bad in (0, -1):
        with pytest.raises(ParameterError):
            trace.node_groups(bad)
    for bad in (2.5, True, "3"):
        with pytest.raises(ParameterTypeError):
            trace.node_groups(bad)
    with pytest.raises(ParameterTypeError):
        trace.node_groups(5, seed=1.5)
    with pytest.raises(ParameterError):
        trace.node_groups(5, seed=-1)


@given(st.integers(1, 12), st.integers(0, 15), st.integers(0, 2**32))
def test_random_placement_is_injective_seeded_and_skips_extra_nodes(groups, nodes, seed):
    trace = parse_fault_events([ev(f"n{i}", i) for i in range(nodes)])
    placed = trace.node_groups(groups, seed=seed)
    assert placed.tolist() == trace.node_groups(groups, seed=seed).tolist()
    kept = placed[placed >= 0]
    assert kept.size == min(nodes, groups) and len(set(kept.tolist())) == kept.size
    assert np.all(kept < groups) and np.all(placed[groups:] == -1)
    assert kept.tolist() == np.random.default_rng(seed).permutation(groups)[:kept.size].tolist()


# -------------------------------------------------------------- malformed files
@pytest.mark.parametrize(
    "doc, fragment",
    [
        ("{not json", "not valid JSON"),
        ("42", "expected a JSON list"),
        ('{"a": 1}', "expected a JSON list of fault events (InfiniteHBD format)"),
        ([ev("a", 1), "oops"], "event 1: expected a JSON object"),
        ([ev("a", 1), {"node_id": "a", "event_time": 1, "event_type": "fault_start"}], "event 1: missing key 'fault_type'"),
        ([{"event_time": 1, "event_type": "fault_start", "fault_type": {}}], "event 0: missing key 'node_id'"),
        ([dict(ev("a", 1), node_id=7)], "event 0: 'node_id' must be a non-empty string"),
        ([dict(ev("a", 1), node_id="")], "event 0: 'node_id' must be a non-empty string"),
        ([ev("a", 1), dict(ev("a", 1), event_time="1.5")], "event 1: 'event_time' must be a number"),
        ([dict(ev("a", 1), event_time=True)], "event 0: 'event_time' must be a number"),
        ([ev("a", 1), ev("b", 2), dict(ev("a", 1), event_type="fault_pause")], "event 2: unknown 'event_type' 'fault_pause'"),
        ([dict(ev("a", 1), fault_type="GPU")], "event 0: 'fault_type' must be an object"),
        ([dict(ev("a", 1), fault_type={"Level": "x"})], "event 0: 'fault_type.Class' must be a string"),
        ([dict(ev("a", 1), fault_type={"Class": "GPU", "Desc": 3})], "event 0: 'fault_type.Desc' must be a string"),
        ({"format": TRACE_FORMAT, "version": 2, "events": []}, "version 2 is not supported"),
        ({"format": TRACE_FORMAT, "version": 1, "events": {}}, "'events' must be a list"),
        ({"format": TRACE_FORMAT, "version": 1, "nodes": 0, "events": []}, "'nodes' must be a positive integer"),
        ({"format": TRACE_FORMAT, "version": 1, "events": [ev("a", 1), {}]}, "event 1: missing key 'node_id'"),
    ],
)
def test_malformed_trace_raises_one_line_trace_error(tmp_path, doc, fragment):
    path = write(tmp_path, doc)
    with pytest.raises(TraceError) as info:
        read_fault_trace(path)
    message = str(info.value)
    assert fragment in message and "\n" not in message and str(path) in message


def test_non_finite_time_is_rejected(tmp_path):
    # NaN is not JSON: refused by the parser (it used to be read, then refused per event).
    path = tmp_path / "nan.json"
    path.write_text('[{"node_id": "a", "event_time": NaN, "event_type": "fault_start", "fault_type": {"Class": "GPU"}}]')
    with pytest.raises(TraceError, match="NaN is not a JSON number"):
        read_fault_trace(path)
    with pytest.raises(TraceError, match="event 0: 'event_time' must be finite"):
        parse_fault_events([ev("a", float("inf"))])


def test_missing_unreadable_and_binary_files(tmp_path):
    with pytest.raises(TraceError, match="does not exist"):
        read_fault_trace(tmp_path / "nope.json")
    with pytest.raises(TraceError, match="is a directory"):
        read_fault_trace(tmp_path)
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(TraceError, match="not a text file"):
        read_fault_trace(binary)


# ------------------------------------------------------------ generated traces
def test_synthetic_trace_is_deterministic_regular_and_round_trips(tmp_path):
    doc = synthetic_fault_trace(nodes=30, days=40.0, seed=3)
    assert doc == synthetic_fault_trace(nodes=30, days=40.0, seed=3)
    assert doc != synthetic_fault_trace(nodes=30, days=40.0, seed=4)
    path = write_fault_trace(doc, tmp_path / "g.json")
    trace = read_fault_trace(path)
    assert trace.format == TRACE_FORMAT and trace.cluster_nodes == 30
    assert trace.metadata["parameters"]["seed"] == 3
    assert trace.irregular == () and trace.n_starts >= trace.n_ends > 0
    assert trace.open_at_end == trace.n_starts - trace.n_ends  # repairs after the horizon are left out
    assert trace.n_nodes <= 30 and trace.span_days[1] <= 40.0
    assert json.loads(path.read_text()) == json.loads(json.dumps(doc))
    with pytest.raises(OutputExistsError):
        write_fault_trace(doc, path)
    write_fault_trace(doc, path, force=True)


def test_synthetic_trace_rejects_bad_parameters():
    with pytest.raises(ParameterError):
        synthetic_fault_trace(nodes=0)
    with pytest.raises(ParameterError):
        synthetic_fault_trace(days=-1.0)
    with pytest.raises(ParameterError):
        synthetic_fault_trace(weibull_shape=float("nan"))
    with pytest.raises(TraceError):
        write_fault_trace({"format": "other"}, "unused.json")


def test_generated_default_trace_matches_its_seed_and_the_instances_copy(tmp_path):
    # The package no longer ships the generated sequence: it rebuilds it from its seed,
    # and instances/ holds the one committed copy, which must be those same bytes.
    from spare_opt.demo import DEFAULT_TRACE_SEED, DEMO_GROUPS, default_trace_document

    instances_copy = REPO / "instances" / "failures-N400-seed0.json"
    document = default_trace_document()
    assert document == synthetic_fault_trace(nodes=DEMO_GROUPS, seed=DEFAULT_TRACE_SEED)
    assert json.loads(instances_copy.read_text()) == json.loads(json.dumps(document))
    written = write_fault_trace(document, tmp_path / "rebuilt.json")
    assert written.read_bytes() == instances_copy.read_bytes()
    trace = parse_fault_events(document)
    assert trace.cluster_nodes == 400 and trace.n_starts > 100 and trace.irregular == ()
    assert not (REPO / "spare_opt" / "data" / "failures-N400-seed0.json").exists()


def test_packaged_real_trace_is_the_shared_copy_with_its_license(real_trace_path):
    from spare_opt.demo import packaged_trace_path

    assert real_trace_path == packaged_trace_path()
    assert real_trace_path.parent.name == "infinitehbd"
    assert (real_trace_path.parent / "LICENSE").is_file() and (real_trace_path.parent / "SOURCE.md").is_file()
    shared = REPO.parent / "shared" / "data" / "infinitehbd-trace" / "fault_trace.json"
    if not shared.is_file():
        pytest.skip(f"no shared copy of the real trace at {shared} to compare with")
    assert real_trace_path.read_bytes() == shared.read_bytes()


def test_trace_instants_list_failing_and_recovering_groups_once_in_event_order():
    from spare_opt.traces.trace import trace_instants

    def event(node, day, kind):
        return {"node_id": node, "event_time": day, "event_type": kind, "fault_type": {"Class": "GPU"}}

    trace = parse_fault_events([
        event("a", 1.0, "fault_start"), event("b", 1.0, "fault_start"), event("c", 2.0, "fault_start"),
        event("b", 3.0, "fault_end"), event("a", 3.0, "fault_end"), event("z", 3.0, "fault_end"),  # z: never down
        event("c", 4.0, "fault_end"),
    ])
    instants, node_group = trace_instants(trace, 2)  # c is node 2: beyond N = 2
    assert [i.time_days for i in instants] == [1.0, 2.0, 3.0, 4.0]
    assert [i.failing.tolist() for i in instants] == [[0, 1], [], [], []]
    assert [i.recovering.tolist() for i in instants] == [[], [], [1, 0], []]  # z ignored, c skipped
    assert node_group.tolist() == [0, 1, -1, -1]
    third = instants[2]
    assert [trace.node_ids[trace.node[k]] for k in third.recovering_events] == ["b", "a"]


@pytest.mark.parametrize("text", [b"node,start,end\n", None, 5])
def test_csv_text_that_is_not_a_str_is_a_type_error(text):
    # was: bytes gave a bare TypeError from io.StringIO, None an "empty file" TraceError
    from spare_opt import parse_fault_csv

    with pytest.raises(ParameterTypeError, match="text must be a str"):
        parse_fault_csv(text)

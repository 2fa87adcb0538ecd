"""Placements of a trace's nodes on the groups: random by default, the first-fault rule explicit and warned about.

The log is built so that the paper's rule (node ``i`` in order of first fault on group
``i``) is at its worst: nodes fail one after another, three at a time overlapping, so
under that rule three neighbouring groups, which hold a shard type together in a
consecutive layout, are down at once.
"""

import json

from click.testing import CliRunner

from spare_opt import consecutive, first_fault_warning, parse_fault_events, replay_placements, replay_trace
from spare_opt.traces.json_format import write_fault_trace
from spare_opt_cli.main import main


def _neighbour_log(nodes=30):
    events = []
    for i in range(nodes):
        events.append({"node_id": f"n{i:02d}", "event_time": 1.0 + i, "event_type": "fault_start",
                       "fault_type": {"Class": "GPU"}})
        events.append({"node_id": f"n{i:02d}", "event_time": 3.5 + i, "event_type": "fault_end",
                       "fault_type": {"Class": "GPU"}})
    events.sort(key=lambda e: e["event_time"])
    return {"format": "spare-failure-trace", "version": 1, "nodes": nodes, "metadata": {}, "events": events}


def test_the_first_fault_rule_invents_wipe_outs_and_warns(tmp_path):
    doc = _neighbour_log()
    trace = parse_fault_events(doc)
    layout = consecutive(30, 3)
    first = replay_trace(layout, trace, semantics="repair")
    placements = replay_placements(layout, trace, seeds=8, semantics="repair")
    assert first["wipe_outs"] > max(placements["wipe_outs"])  # the paper's rule at its worst
    assert placements["wipe_outs"] == [replay_trace(layout, trace, semantics="repair", placement_seed=s)["wipe_outs"]
                                       for s in range(8)]
    warning = first_fault_warning(first["wipe_outs"], placements)
    assert warning is not None and f"gives {first['wipe_outs']} wipe-out(s)" in warning
    assert first_fault_warning(round(placements["mean_wipe_outs"]), placements) is None

    layout_path, trace_path = tmp_path / "layout.json", write_fault_trace(doc, tmp_path / "t.json")
    layout.save(layout_path)
    runner = CliRunner()
    default = runner.invoke(main, ["replay", str(layout_path), "--trace", str(trace_path), "--semantics", "repair",
                                   "--seeds", "8", "--json"])
    assert default.exit_code == 0, default.output
    report = json.loads(default.stdout)
    assert report["placements"]["wipe_outs"] == placements["wipe_outs"]
    assert report["placements"]["mean_wipe_outs"] == placements["mean_wipe_outs"]
    assert report["wipe_outs"] == placements["wipe_outs"][0] and "Warning" not in default.stderr
    paper = runner.invoke(main, ["replay", str(layout_path), "--trace", str(trace_path), "--semantics", "repair",
                                 "--seeds", "8", "--first-fault-order"])
    assert paper.exit_code == 0, paper.output
    assert f"{first['wipe_outs']} wipe-out" in paper.stdout
    assert "Warning: the first-fault placement gives" in paper.stderr
    both = runner.invoke(main, ["replay", str(layout_path), "--trace", str(trace_path), "--first-fault-order",
                                "--placement-seed", "1"])
    assert both.exit_code == 2 and "two placements" in both.output


def test_placements_on_a_process_pool_equal_the_serial_replay_and_report_progress(tmp_path):
    """Placements replayed by two processes give the serial results; the progress counts every event once."""
    trace = parse_fault_events(_neighbour_log())
    layout = consecutive(30, 3)
    calls = []
    serial = replay_placements(layout, trace, seeds=4, semantics="repair", micro_batches=2,
                               progress=lambda done, total: calls.append((done, total)))
    pooled = replay_placements(layout, trace, seeds=4, semantics="repair", micro_batches=2, workers=2)
    assert {k: v for k, v in serial.items() if k != "first"} == {k: v for k, v in pooled.items() if k != "first"}
    assert serial["first"].rows == pooled["first"].rows
    total = 4 * trace.n_events
    assert calls[-1] == (total, total) and all(t == total for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)

    layout_path, trace_path = tmp_path / "layout.json", write_fault_trace(_neighbour_log(), tmp_path / "t.json")
    layout.save(layout_path)
    runner = CliRunner()
    args = ["replay", str(layout_path), "--trace", str(trace_path), "--semantics", "repair", "--seeds", "4", "--json"]
    one, two = runner.invoke(main, args), runner.invoke(main, args + ["--workers", "2"])
    assert one.exit_code == 0 and two.exit_code == 0, (one.output, two.output)
    strip = lambda doc: {k: v for k, v in json.loads(doc).items() if k != "elapsed_seconds"}  # noqa: E731
    assert strip(one.stdout) == strip(two.stdout)
    single = runner.invoke(main, args + ["--placement-seed", "1", "--workers", "2"])
    assert single.exit_code == 0 and "Warning: --workers is ignored" in single.stderr
    bad = runner.invoke(main, args + ["--workers", "0"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_replay_placements_refuses_bad_arguments_before_any_work(tmp_path):
    """A wrong trace, too many seeds or an unknown option: the same specific error whatever the workers."""
    import pytest

    from spare_opt import MAX_PLACEMENTS, ParameterError, ParameterTypeError

    trace = parse_fault_events(_neighbour_log())
    layout = consecutive(30, 3)
    with pytest.raises(ParameterTypeError, match="FaultTrace"):
        replay_placements(layout, "t.json")
    with pytest.raises(ParameterError, match="seeds"):
        replay_placements(layout, trace, seeds=MAX_PLACEMENTS + 1)
    for workers in (1, 2):
        with pytest.raises(ParameterError, match="unknown option 'foo'"):
            replay_placements(layout, trace, seeds=2, workers=workers, foo=1)

    layout_path, trace_path = tmp_path / "layout.json", write_fault_trace(_neighbour_log(), tmp_path / "t.json")
    layout.save(layout_path)
    args = ["replay", str(layout_path), "--trace", str(trace_path)]
    runner = CliRunner()
    seeds_unused = runner.invoke(main, args + ["--placement-seed", "3", "--seeds", "7"])
    assert seeds_unused.exit_code == 0 and "Warning: --seeds is ignored" in seeds_unused.stderr
    too_many = runner.invoke(main, args + ["--seeds", str(MAX_PLACEMENTS + 1)])
    assert too_many.exit_code == 2 and "--seeds" in too_many.output and "Traceback" not in too_many.output

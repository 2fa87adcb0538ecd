"""`spare-opt replay` and `spare-opt demo` through click's CliRunner."""

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
from click.testing import CliRunner

import spare_opt.demo as demo
from spare_opt import Layout, read_fault_trace, replay_trace
from spare_opt.traces.json_format import parse_fault_events
from spare_opt.guarantees.theory import r_star
from spare_opt_cli.main import main

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "instances" / "small"
GOLOMB_9 = [0, 1, 5, 12, 25, 27, 35, 41, 44]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_error_line(result, code=1):
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


# ---------------------------------------------------------------------- replay
def test_replay_text_json_and_rows_agree_with_the_library():
    layout, trace_path = SMALL / "layout-N12-r3-sidon.json", SMALL / "failures-N12-seed1.json"
    expected = replay_trace(Layout.load(layout), read_fault_trace(trace_path), placement_seed=0)  # the first of --seeds
    text = run("replay", layout, "--trace", trace_path)
    assert text.exit_code == 0, text.output
    assert f"{expected['masked']} masked" in text.stdout and f"{expected['wipe_outs']} wipe-out" in text.stdout
    assert "time-weighted mean S" in text.stdout and "planner: controller" in text.stdout
    doc = json.loads(run("replay", layout, "--trace", trace_path, "--json").stdout)
    assert len(doc["rows"]) == expected.summary["events"]
    for key in ("faults", "masked", "wipe_outs", "max_stack_number", "mean_stack_number", "fault_ends", "irregular", "skipped"):
        assert doc[key] == expected[key]
    exact = json.loads(run("replay", layout, "--trace", trace_path, "--json", "--exact").stdout)
    assert exact["planner"] == "exact"
    assert [(r["status"], r["stack_number"]) for r in exact["rows"]] == [(r["status"], r["stack_number"]) for r in doc["rows"]]
    rows = run("replay", layout, "--trace", trace_path, "--rows")
    assert len(rows.stdout.splitlines()) > len(text.stdout.splitlines()) + expected.summary["events"] - 1


def test_replay_reports_irregular_events():
    result = run("replay", SMALL / "layout-N12-r3-consecutive.json", "--trace", SMALL / "irregular-N12.json")
    assert result.exit_code == 0, result.output
    assert "Irregular events: 4 (1 start-while-down, 2 end-without-start, 1 out-of-order)" in result.stdout
    assert result.stdout.count(": ignored") == 3 and "sorted into place" in result.stdout


def test_replay_of_the_real_trace(tmp_path, real_trace_path):
    layout_path = tmp_path / "sidon.json"
    Layout((np.arange(400)[:, None] + np.array(GOLOMB_9)) % 400, method="sidon", offsets=GOLOMB_9).save(layout_path)
    doc = json.loads(run("replay", layout_path, "--trace", real_trace_path, "--json").stdout)
    assert doc["faults"] == 584 and doc["fault_ends"] == 584 and doc["nodes"] == 231
    assert len(doc["rows"]) == 1168 and doc["groups"] == 400 and doc["redundancy"] == 9
    assert sum(doc["irregular"].values()) == len(read_fault_trace(real_trace_path).irregular)


def test_replay_bad_input(tmp_path):
    layout = SMALL / "layout-N12-r3-sidon.json"
    assert "does not exist" in one_error_line(run("replay", layout, "--trace", tmp_path / "none.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('[{"node_id": "a", "event_time": 1, "event_type": "fault_start", "fault_type": {"Class": "x"}},'
                   ' {"node_id": "a", "event_time": 2, "event_type": "oops", "fault_type": {"Class": "x"}}]')
    assert "event 1: unknown 'event_type'" in one_error_line(run("replay", layout, "--trace", bad))
    bad.write_text("not json")
    assert "not valid JSON" in one_error_line(run("replay", layout, "--trace", bad))
    assert "does not exist" in one_error_line(run("replay", tmp_path / "none.json", "--trace", bad), code=1)
    broken = tmp_path / "layout.json"
    broken.write_text('{"format": "spare-layout"}')
    one_error_line(run("replay", broken, "--trace", SMALL / "irregular-N12.json"), code=1)
    one_error_line(run("replay", layout), code=2)  # --trace is required


# ------------------------------------------------------------------------ demo
def test_demo_generated_replays_the_sequence_rebuilt_from_its_seed(tmp_path, monkeypatch, no_spare_trace):
    monkeypatch.chdir(tmp_path)
    result = run("demo", "--generated", "--json", "--no-verdict")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["layout"]["groups"] == 400 and doc["layout"]["redundancy"] == r_star(400) == 9
    assert doc["layout"]["method"] == "sidon" and doc["layout"]["lambda"] <= 1
    assert doc["trace"]["kind"] == "generated"
    assert doc["trace"]["path"] == f"<generated: seed {demo.DEFAULT_TRACE_SEED}>"
    assert doc["notes"] == []
    layout_file, report_file = Path(doc["files"]["layout"]), Path(doc["files"]["report"])
    assert layout_file.parent == Path(demo.DEFAULT_OUT) and (tmp_path / layout_file).is_file()
    layout = Layout.load(layout_file)
    expected = replay_trace(layout, parse_fault_events(demo.default_trace_document()))
    report = json.loads(report_file.read_text())
    assert report["format"] == "spare-replay-report"
    assert report["replay"]["wipe_outs"] == doc["replay"]["wipe_outs"] == expected["wipe_outs"]
    assert len(report["replay"]["rows"]) == expected.summary["events"]

    # No clobbering without --force; the files are left as they were.
    before = report_file.read_bytes()
    assert "exists already" in one_error_line(run("demo", "--generated", "--no-verdict"))
    assert report_file.read_bytes() == before
    again = run("demo", "--generated", "--force", "--no-verdict")
    assert again.exit_code == 0, again.output
    lines = again.stdout.splitlines()
    assert lines[0].startswith("Layout: sidon, N = 400, r = 9") and "lambda = 1" in lines[0]
    assert str(layout_file) in lines[-1] and str(report_file) in lines[-1]


def test_demo_replays_the_packaged_real_trace_by_default(tmp_path, no_spare_trace, real_trace_path):
    out = tmp_path / "out"
    result = run("demo", "--out", out, "--workers", "2")
    assert result.exit_code == 0, result.output
    assert "Trace: real" in result.stdout and str(real_trace_path) in result.stdout
    assert "584 fault_start" in result.stdout and "note:" not in result.stdout
    # it ends with the verdict, at the trace's rate and compressed, in a few lines each
    text = result.stdout.split("\n\nVerdict")
    assert len(text) == 3 and text[1].startswith(" at the trace's rate")
    assert text[2].startswith(" with the trace compressed 100x")
    for part in text[1:]:
        lines = part.strip().splitlines()
        assert len(lines) == 8 and "CKPT only" in lines[1] and "Rep+CKPT r=2" in lines[2]
        assert "SPARe+CKPT r=9 m=16" in lines[3] and "SPARe+CKPT r=9 m=1 " in lines[4]  # m = 1 beside m = 16
        assert "Redistribute r=N m=" in lines[5]  # every survivor may take any micro-batch
        assert "Elastic+CKPT" in lines[6] and "steps for the same samples" in lines[6]
        assert lines[7].strip().startswith(("Best exact:", "No strategy finished"))
        for line in lines[1:7]:  # the parts add up to TTT/T0 (to the rounding of the digits shown)
            total = re.search(r"TTT/T0\s+(.+?) = steps", line).group(1)
            parts = [float(x) for x in re.findall(r"(?:steps|patch|lost|restart|saves) (\d+\.\d{3})", line)]
            if total[0].isdigit():
                assert abs(sum(parts) - float(total)) <= 0.003
    assert "With repairs (a fault_end brings its group back), same layout: m = 1:" in result.stdout
    assert "; m = 16: mean step cost" in result.stdout
    assert "start-while-down" in result.stdout and (out / "replay-N400-r9.json").is_file()
    report = json.loads((out / "replay-N400-r9.json").read_text())
    assert report["trace"]["fault_starts"] == 584 and len(report["replay"]["rows"]) == 1168


def test_demo_takes_spare_trace_and_notes_a_missing_one(tmp_path, monkeypatch, real_trace_path):
    small_trace = SMALL / "failures-N12-seed1.json"
    monkeypatch.setenv("SPARE_TRACE", str(small_trace))
    doc = json.loads(run("demo", "--out", tmp_path / "a", "--json", "--no-verdict").stdout)
    assert doc["trace"]["kind"] == "generated" and Path(doc["trace"]["path"]) == small_trace.resolve()
    assert doc["notes"] == []
    monkeypatch.setenv("SPARE_TRACE", str(tmp_path / "missing.json"))
    result = run("demo", "--out", tmp_path / "b", "--json", "--no-verdict")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["trace"]["kind"] == "real" and Path(doc["trace"]["path"]) == real_trace_path
    assert len(doc["notes"]) == 1 and "SPARE_TRACE" in doc["notes"][0] and "missing.json" in doc["notes"][0]


def test_find_trace_prefers_spare_trace_then_the_packaged_trace(tmp_path):
    packaged = demo.packaged_trace_path()
    assert packaged.is_file()
    assert demo.find_trace(environ={}) == (packaged, [])
    assert demo.find_trace(environ={"SPARE_TRACE": ""}) == (packaged, [])
    given = tmp_path / "trace.json"
    given.write_text("[]")
    assert demo.find_trace(environ={"SPARE_TRACE": str(given)}) == (given.resolve(), [])
    found, notes = demo.find_trace(environ={"SPARE_TRACE": str(tmp_path / "x.json")})
    assert found == packaged and len(notes) == 1 and "SPARE_TRACE" in notes[0]


def test_demo_bad_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_error_line(run("demo", "--trace", "x.json", "--generated"), code=2)
    assert "does not exist" in one_error_line(run("demo", "--trace", tmp_path / "none.json"))
    (tmp_path / "file").write_text("")
    assert "not a folder" in one_error_line(run("demo", "--out", tmp_path / "file", "--generated"))
    assert "cannot write the demo output" in one_error_line(run("demo", "--out", tmp_path / "file" / "sub", "--generated", "--no-verdict"))


def test_default_trace_is_rebuilt_from_its_seed(tmp_path):
    # The package ships no generated data: --generated rebuilds the sequence from its seed,
    # the same events as the committed instances copy.
    rebuilt = parse_fault_events(demo.default_trace_document(), source=f"<generated: seed {demo.DEFAULT_TRACE_SEED}>")
    committed = read_fault_trace(REPO / "instances" / "failures-N400-seed0.json")
    assert np.array_equal(rebuilt.times_days, committed.times_days) and rebuilt.node_ids == committed.node_ids
    result = demo.run_demo(tmp_path / "out", generated=True, environ={}, verdict=False)
    assert result.trace_info["kind"] == "generated"
    again = replay_trace(result.layout, rebuilt)
    # Results compare by value; the wall-clock time of the replay is not part of the value.
    assert result.replay == again
    assert result.replay != dataclasses.replace(again, summary={**again.summary, "wipe_outs": -1})


def test_help_texts():
    for name in ("replay", "demo"):
        result = run(name, "--help")
        assert result.exit_code == 0 and "--json" in result.stdout

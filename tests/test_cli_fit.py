"""`spare-opt fit` through click's CliRunner."""

import json

from click.testing import CliRunner

from spare_opt import FailureModel, fit_trace, read_fault_trace
from spare_opt.demo import packaged_trace_path
from spare_opt_cli.main import main

REAL = packaged_trace_path()


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_error_line(result, code=1):
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def write_trace(path, rows):
    events = [{"node_id": n, "event_time": t, "event_type": k, "fault_type": {"Class": "GPU"}} for n, t, k in rows]
    path.write_text(json.dumps(events))
    return path


def test_fit_text_json_and_model_file(tmp_path):
    out = tmp_path / "model.json"
    text = run("fit", REAL, "--nodes", 400, "--resamples", 99, "-o", out)
    assert text.exit_code == 0, text.output
    for phrase in ("per-node MTBF", "system MTBF", "event MTBF", "Weibull shape", "shape < 1 (bursty) is significant",
                   "median 20.4 h", "max 131 days", "peak 35", "largest 8 nodes", "largest 14 nodes",
                   "400 nodes, as given", f"Wrote the failure model to {out}"):
        assert phrase in text.stdout, phrase
    assert max(len(line) for line in text.stdout.splitlines()) <= 100
    model = FailureModel.load(out)
    assert model.cluster_nodes == 400 and model.repair_distribution == "empirical"
    doc = json.loads(run("fit", REAL, "--nodes", 400, "--resamples", 99, "--json").stdout)
    library = fit_trace(read_fault_trace(REAL), nodes=400, resamples=99).to_dict()
    assert doc["model"] == library["model"] == model.to_dict() and doc["model_path"] is None
    assert doc["repairs"] == library["repairs"] and doc["correlation"] == library["correlation"]
    again = run("fit", REAL, "--nodes", 400, "-o", out)
    assert "exists already" in one_error_line(again)
    forced = run("fit", REAL, "--nodes", 400, "--resamples", 99, "--repair-distribution", "lognormal", "-o", out,
                 "--force", "--json")
    assert forced.exit_code == 0 and json.loads(forced.stdout)["model_path"] == str(out)
    assert FailureModel.load(out).repair_distribution == "lognormal"


def test_fit_states_the_cluster_size_assumption():
    result = run("fit", REAL, "--resamples", 99)
    assert result.exit_code == 0, result.output
    assert "231 nodes, assumed: the nodes named in the trace" in result.stdout and "--nodes" in result.stdout


def test_fit_bad_input(tmp_path):
    assert "does not exist" in one_error_line(run("fit", tmp_path / "missing.json"))
    assert "at least the 231 nodes" in one_error_line(run("fit", REAL, "--nodes", 100))
    assert "no usable fault_start" in one_error_line(run("fit", write_trace(tmp_path / "ends.json",
                                                                            [("a", 1.0, "fault_end")])))
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert "empty trace" in one_error_line(run("fit", empty))
    assert run("fit", REAL, "--window-minutes", -1).exit_code == 2
    assert run("fit", REAL, "--confidence", 1).exit_code == 2
    huge = run("fit", REAL, "--resamples", 10**11)  # was: accepted, then hours of bootstrap
    assert huge.exit_code == 2 and "99<=x<=100000" in huge.output
    # Named as the operator typed it (it read "start_day"), and the help says the window only widens.
    assert "--start-day must not be after the first event" in one_error_line(run("fit", REAL, "--start-day", 10))
    help_text = " ".join(run("fit", "--help").output.split())
    assert "it widens the window, it does not cut the trace" in help_text


def test_fit_without_a_model_reports_and_refuses_to_write_one(tmp_path):
    trace = write_trace(tmp_path / "open.json", [(f"n{i}", float(d), "fault_start") for i, d in enumerate([1, 2, 4, 8])])
    out = tmp_path / "model.json"
    result = run("fit", trace, "--resamples", 99, "-o", out)
    assert "no repair completed" in one_error_line(result) and not out.exists()
    assert "Repairs (0 completed, 4 open at the end" in result.stdout
    doc = json.loads(run("fit", trace, "--resamples", 99, "--json").stdout)
    assert doc["model"] is None and "no repair completed" in doc["model_error"]

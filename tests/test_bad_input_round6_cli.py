"""Input hardening, round 6 (the CLI): the all-reduce given twice, a recommendation edited, cluster-file
conflicts and overflowing derived values.

Same contract as ``tests/test_bad_input_round2.py``: the CLI prints one ``Error: ...``
line and exits non-zero (no traceback), the API raises the specific
:class:`spare_opt.SpareError` subclass.  Sections: 1 the all-reduce from two sources;
2 a recommendation whose ``m`` or contents were edited; 3 conflicts inside a cluster
file, named by the file and its keys; 4 derived values that overflow, named by the
option or key the user wrote.  Every refusal here comes before any simulation.
"""

import json

import pytest

import spare_opt as so
from spare_opt import Layout, LayoutFileError, ParameterError

#: A small verdict: N = 12, one setting per strategy, one seed, one cycle.
FAST = ["--rep-r", "2", "--spare-r", "3", "--micro-batches", "1", "--seeds", "1", "--no-elastic", "--cycles", "1",
        "-q", "--no-sensitivity", "--no-redistribution"]


def cli(*args):
    from click.testing import CliRunner
    from spare_opt_cli.main import main

    return CliRunner().invoke(main, [str(a) for a in args])


def error_line(result, code=None):
    """The one ``Error:`` line of a clean CLI failure (asserts there is no traceback)."""
    assert result.exit_code != 0, result.output
    if code is not None:
        assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("Warning:")
             and not line.startswith(("Usage:", "Try "))]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def cluster_file(tmp_path, text, name="k.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------ 1 the all-reduce from two sources
@pytest.mark.parametrize("ring", [["--gradient-bytes", "1e9", "--bandwidth-bytes-per-second", "1e9"],
                                  ["--bandwidth-bytes-per-second", "1e9", "--gradient-bytes", "1e9"],
                                  ["--allreduce-latency-seconds", "0.5"]])
def test_a_measured_all_reduce_and_the_ring_model_on_the_command_line_are_refused(ring):
    line = error_line(cli("compare", "-N", 12, "--failures-per-1000-node-days", 5, *FAST, "--allreduce-seconds", 3,
                          *ring), 2)
    assert "--allreduce-seconds and --" in line and "two sources of the all-reduce time" in line, line


@pytest.mark.parametrize("keys", ["gradient_bytes = 1e9\nbandwidth_bytes_per_second = 1e9\n",
                                  "allreduce_latency_seconds = 0.5\n"])
def test_both_all_reduce_sources_in_a_cluster_file_are_refused_with_its_keys(tmp_path, keys):
    path = cluster_file(tmp_path, f"groups = 12\nallreduce_seconds = 3\n{keys}[failures]\nnode_mtbf_hours = 100\n")
    line = error_line(cli("compare", "--cluster", path, *FAST), 1)
    assert line.startswith(f"Error: {path}: allreduce_seconds and "), line
    assert "--" not in line.split(": ", 2)[2]  # no option blamed


def test_the_command_line_all_reduce_wins_over_the_file_and_says_so(tmp_path):
    ring_file = cluster_file(tmp_path, "groups = 12\ngradient_bytes = 1e9\nbandwidth_bytes_per_second = 1e9\n"
                                       "[failures]\nnode_mtbf_hours = 100\n")
    result = cli("compare", "--cluster", ring_file, *FAST, "--allreduce-seconds", 3)
    assert result.exit_code == 0, result.output
    assert f"Warning: {ring_file}: --allreduce-seconds on the command line replaces the file's gradient_bytes, " \
           "bandwidth_bytes_per_second (ignored)" in result.stderr
    assert "all-reduce 3 s (given)" in result.stdout
    measured_file = cluster_file(tmp_path, "groups = 12\nallreduce_seconds = 3\n[failures]\nnode_mtbf_hours = 100\n",
                                 "m.toml")
    result = cli("compare", "--cluster", measured_file, *FAST, "--gradient-bytes", "1e9",
                 "--bandwidth-bytes-per-second", "1e9")
    assert result.exit_code == 0, result.output
    assert "replace the file's allreduce_seconds (ignored)" in result.stderr
    assert "(ring model:" in result.stdout


def test_the_library_refuses_a_latency_without_the_ring_model():
    params = so.compare_parameters("trace-400", 12, steps=1000)
    with pytest.raises(ParameterError, match="allreduce_latency_seconds is part of the ring"):
        so.compare(params, fault_model=so.failure_model_from_rates(12, node_mtbf_seconds=3.6e5), seeds=1,
                   rep_redundancies=[], spare_redundancies=[3], allreduce_latency_seconds=0.5)


# ------------------------------------------------------------------ 2 a recommendation edited
@pytest.fixture(scope="module")
def recommendation(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "rec.json"
    result = cli("compare", "-N", 12, "--failures-per-1000-node-days", 5, *FAST, "-o", path)
    assert result.exit_code == 0, result.output
    return path


def _edited(path, tmp_path, change, suffix=".json"):
    doc = json.loads(path.read_text())
    change(doc["metadata"])
    out = tmp_path / f"edited{suffix}"
    if suffix == ".npz":
        import numpy as np
        from spare_opt.layouts.layout import _npz_bytes

        stacks = np.asarray(doc.pop("stacks"), dtype=np.int32)
        out.write_bytes(_npz_bytes({"stacks": stacks, "header": np.array(json.dumps(doc))}))
    else:
        out.write_text(json.dumps(doc, indent=1))
    return out


def _set_m_both(metadata):
    metadata["micro_batches"] = 8
    metadata["recommendation"]["spare"]["micro_batches"] = 8


EDITS = {
    "m 1 -> 1024": (lambda md: md.update(micro_batches=1024), "metadata.micro_batches = 1024 is not the"),
    "m 1 -> 8 in both places": (_set_m_both, "contents_fingerprint"),
    "chosen strategy": (lambda md: md["recommendation"].update(chosen_strategy="ckpt"), "contents_fingerprint"),
    "a checkpoint period": (lambda md: md["recommendation"]["chosen"].update(checkpoint_period_seconds=60.0),
                            "contents_fingerprint"),
    "an assumption": (lambda md: md["recommendation"]["assumptions"].update(seeds=9), "contents_fingerprint"),
    "the spare r": (lambda md: md["recommendation"]["spare"].update(redundancy=5), "the layout's r = 3"),
    "contents fingerprint removed": (lambda md: md["recommendation"].pop("contents_fingerprint"),
                                     "no fingerprint of its contents"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_an_edited_recommendation_is_refused_on_load(recommendation, tmp_path, case):
    change, words = EDITS[case]
    for suffix in (".json", ".npz"):
        edited = _edited(recommendation, tmp_path, change, suffix)
        with pytest.raises(LayoutFileError, match="recommendation") as caught:
            Layout.load(edited)
        assert words in str(caught.value) and str(edited) in str(caught.value)
    line = error_line(cli("plan", edited, "--fail", "1,2"), 1)
    assert words in line


def test_an_unedited_recommendation_loads_and_rewrites_the_same(recommendation, tmp_path):
    layout = Layout.load(recommendation)
    assert layout.metadata["recommendation"]["version"] == so.RECOMMENDATION_VERSION == 2
    copy = tmp_path / "copy.npz"
    layout.save(copy)  # the .npz writer: the same contents fingerprint verifies
    assert Layout.load(copy).metadata == layout.metadata
    reindented = _edited(recommendation, tmp_path, lambda md: None)  # whitespace is not content
    assert Layout.load(reindented).micro_batches == layout.micro_batches == 1


# ------------------------------------------------------------------ 3 cluster-file conflicts
CONFLICTS = {
    "two rates": ("[failures]\nfailures_per_1000_node_days = 5\nnode_mtbf_hours = 100\n",
                  "[failures] node_mtbf_hours and [failures] failures_per_1000_node_days are two failure rates"),
    "a job MTTF without its nodes": ("[failures]\njob_mttf_hours = 3\n",
                                     "[failures] job_mttf_hours needs [failures] job_nodes"),
    "job nodes without a MTTF": ("[failures]\nnode_mtbf_hours = 100\njob_nodes = 3\n",
                                 "[failures] job_nodes needs [failures] job_mttf_hours"),
    "repairs without a rate": ('[failures]\npreset = "trace-400"\nrepair_hours = 4\n',
                               "[failures] repair_hours goes with a failure rate"),
    "half a ring model": ("gradient_bytes = 1e9\n[failures]\nnode_mtbf_hours = 100\n",
                          "gradient_bytes needs bandwidth_bytes_per_second"),
    "a latency alone": ("allreduce_latency_seconds = 1\n[failures]\nnode_mtbf_hours = 100\n",
                        "allreduce_latency_seconds is part of the ring model: give gradient_bytes and "
                        "bandwidth_bytes_per_second"),
    "a rate and a trace": ('[failures]\nnode_mtbf_hours = 100\ntrace = "t.json"\n',
                           "[failures] node_mtbf_hours is a source of failures"),
}


@pytest.mark.parametrize("case", sorted(CONFLICTS))
def test_a_conflict_inside_a_cluster_file_names_the_file_and_its_keys(tmp_path, case):
    text, words = CONFLICTS[case]
    path = cluster_file(tmp_path, "groups = 12\n" + text)
    line = error_line(cli("compare", "--cluster", path, *FAST), 1)
    assert line == f"Error: {path}: {words}" or line.startswith(f"Error: {path}: {words}"), line
    assert " --" not in line  # no option the user never typed


def test_the_same_conflicts_on_the_command_line_keep_their_words():
    line = error_line(cli("compare", "-N", 12, *FAST, "--failures-per-1000-node-days", 5, "--node-mtbf-hours", 100), 2)
    assert line == "Error: --node-mtbf-hours and --failures-per-1000-node-days are two failure rates: give one"
    line = error_line(cli("compare", "-N", 12, *FAST, "--job-mttf-hours", 3), 2)
    assert line == "Error: --job-mttf-hours needs --job-nodes"


def test_a_window_in_the_file_without_a_trace_names_the_key(tmp_path):
    model = tmp_path / "m.json"
    so.failure_model_from_rates(12, node_mtbf_seconds=3.6e5).save(model)
    path = cluster_file(tmp_path, f'groups = 12\n[failures]\nfailure_model = "{model.name}"\nwindow = [0, 10]\n')
    line = error_line(cli("simulate", "--cluster", path, "--seeds", 1, "-q"), 1)
    assert line == f"Error: {path}: [failures] window cuts a trace: it needs [failures] trace", line


# ------------------------------------------------------------------ 4 derived values that overflow
OVERFLOWS = {
    "--node-mtbf-hours": (["--node-mtbf-hours", "1e308"], "[failures]\nnode_mtbf_hours = 1e308\n"),
    "--repair-hours": (["--node-mtbf-hours", "5", "--repair-hours", "1e308"],
                       "[failures]\nnode_mtbf_hours = 5\nrepair_hours = 1e308\n"),
    "--failures-per-1000-node-days": (["--failures-per-1000-node-days", "1e-320"],
                                      "[failures]\nfailures_per_1000_node_days = 1e-320\n"),
    "--job-mttf-hours": (["--job-mttf-hours", "1e300", "--job-nodes", "100000000"],
                         "[failures]\njob_mttf_hours = 1e300\njob_nodes = 100000000\n"),
    "--gradient-bytes": (["--node-mtbf-hours", "5", "--gradient-bytes", "1e308", "--bandwidth-bytes-per-second",
                          "1e-300"], "gradient_bytes = 1e308\nbandwidth_bytes_per_second = 1e-300\n"
                                     "[failures]\nnode_mtbf_hours = 5\n"),
    "--step-seconds": (["--node-mtbf-hours", "5", "--step-seconds", "1e308"],
                       "step_seconds = 1e308\n[failures]\nnode_mtbf_hours = 5\n"),
    "--allreduce-seconds": (["--node-mtbf-hours", "5", "--allreduce-seconds", "1e306"],
                            "allreduce_seconds = 1e306\n[failures]\nnode_mtbf_hours = 5\n"),
}


@pytest.mark.parametrize("option", sorted(OVERFLOWS))
def test_an_overflowing_derived_value_names_the_option_or_the_files_key(tmp_path, option):
    arguments, text = OVERFLOWS[option]
    line = error_line(cli("compare", "-N", 12, *FAST, *arguments), 2)
    assert line.startswith(f"Error: {option}"), line
    assert "_seconds" not in line and "inf" not in line.split(":")[1], line  # no internal name, no value not given
    path = cluster_file(tmp_path, "groups = 12\n" + text)
    line = error_line(cli("compare", "--cluster", path, *FAST), 1)
    key = option[2:].replace("-", "_")
    assert line.startswith(f"Error: {path}: ") and key in line and " --" not in line, line


@pytest.mark.parametrize("command", ["simulate", "tune"])
def test_an_overflowing_step_time_names_the_option_in_simulate_and_tune(command):
    line = error_line(cli(command, "-N", 12, "--step-seconds", "1e308", "-q"), 2)
    assert line.startswith("Error: --step-seconds: the fault-free time"), line


def test_an_old_spelling_that_overflows_in_the_new_unit_is_named():
    line = error_line(cli("compare", "-N", 12, *FAST, "--node-mtbf-hours", 5, "--restart-minutes", "1e308"), 2)
    assert line.startswith("Error: --restart-minutes: 1e+308 does not fit"), line


def test_a_rate_far_too_high_is_refused_in_one_short_line():
    line = error_line(cli("compare", "-N", 12, *FAST, "--node-mtbf-hours", "1e-300"), 1)
    assert "failure events of the model" in line and "e+305" in line and len(line) < 300, line
    # The cause named (round 7): the rate, not the cycles or the steps.
    assert "the failures of --node-mtbf-hours = 1e-300, one every" in line and "rarer failures" in line, line
    assert "max_wall_factor" not in line and "--cycles" not in line, line


@pytest.mark.parametrize("command", ["compare", "simulate"])
def test_a_files_trace_keys_without_a_trace_are_named_as_ignored(tmp_path, command):
    """A cluster file describes the cluster for every command: trace keys without a trace warn, not refuse."""
    keys = 'format = "csv"\ntime_unit = "hours"\ntime_scale = 0.5\n'
    window = "window = [0, 10]\n" if command == "compare" else ""  # simulate refuses a window (above)
    if command == "compare":
        source, extra = "node_mtbf_hours = 500\n", FAST
    else:  # simulate takes its failures from a failure model or a trace, not a rate
        so.failure_model_from_rates(12, node_mtbf_seconds=3.6e5).save(tmp_path / "m.json")
        source, extra = 'failure_model = "m.json"\n', ["--seeds", 1, "-q", "--set", "steps=50"]
    path = cluster_file(tmp_path, f"groups = 12\n[failures]\n{source}{keys}{window}")
    result = cli(command, "--cluster", path, *extra)
    assert result.exit_code == 0, result.output
    named = "format, time_unit, time_scale" + (", window" if window else "")
    assert f"Warning: {path}: [failures] {named} describe a trace, and the run has no trace (ignored)" \
        in result.stderr, result.stderr
    # Without those keys: no such warning (the warning can tell the two apart).
    path = cluster_file(tmp_path, f"groups = 12\n[failures]\n{source}", name="plain.toml")
    result = cli(command, "--cluster", path, *extra)
    assert result.exit_code == 0 and "describe a trace" not in result.stderr, result.output


def test_simulate_takes_the_all_reduce_once_and_prints_the_one_it_ran(tmp_path):
    line = error_line(cli("simulate", "-N", 12, "--seeds", 1, "-q", "--allreduce-seconds", 3, "--set",
                          "allreduce_seconds=5"), 2)
    assert line == "Error: --set allreduce_seconds and --allreduce-seconds give the same setting; use " \
                   "--allreduce-seconds"
    path = cluster_file(tmp_path, "groups = 12\nallreduce_seconds = 7\n")
    for extra, expected in (([], 7.0), (["--allreduce-seconds", 3], 3.0), (["--set", "allreduce_seconds=4"], 4.0)):
        result = cli("simulate", "--cluster", path, "--seeds", 1, "-q", "--json", *extra)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["parameters"]["allreduce_seconds"] == expected, extra


def test_a_sweep_mtbf_that_overflows_in_seconds_is_named():
    line = error_line(cli("sweep", "--groups", 50, "--r-min", 2, "--r-max", 3, "--mtbf", "1e308"), 2)
    assert line.startswith("Error: --mtbf: 1e+308 minutes does not fit in seconds"), line


def test_the_library_refuses_parameters_with_a_given_all_reduce_beside_the_ring_model():
    params = so.compare_parameters("trace-400", 12, steps=1000, allreduce_seconds=3.0)
    with pytest.raises(ParameterError, match="give the all-reduce once"):
        so.compare(params, fault_model=so.failure_model_from_rates(12, node_mtbf_seconds=3.6e5), seeds=1,
                   rep_redundancies=[], spare_redundancies=[3], gradient_bytes=1e9, bandwidth_bytes_per_second=1e9)

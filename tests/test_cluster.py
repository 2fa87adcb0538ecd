"""The cluster file (--cluster FILE), one spelling per option, and any N (issue: the operator's own cluster).

A cluster file and the equivalent options give the same result, an option overrides
the file, unknown keys are refused with the key named; old spellings still work with a
warning; ``simulate``/``tune`` accept any N; ``compare --trace`` at another N scales the
trace per node (the fitted model's run) instead of replaying the traced cluster's rate.
"""

import json

import pytest
from click.testing import CliRunner

from spare_opt import (
    ParameterError,
    compare,
    compare_parameters,
    fit_trace,
    load_cluster,
    parse_fault_events,
    preset_parameters,
    synthetic_fault_trace,
)
from spare_opt.traces.json_format import write_fault_trace
from spare_opt_cli.main import main


def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    doc = synthetic_fault_trace(nodes=24, days=40.0, seed=3, incidents_per_day=2.0, repair_median_days=0.5)
    return write_fault_trace(doc, tmp_path_factory.mktemp("trace") / "t.json")


COMPARE = ["compare", "--semantics", "paper", "--rep-r", "2", "--spare-r", "3", "--micro-batches", "1",
           "--seeds", "2", "-q", "--json"]


def test_a_cluster_file_gives_the_run_of_the_equivalent_options(tmp_path, trace_file):
    cluster = tmp_path / "cluster.toml"
    cluster.write_text('groups = 24\nstep_seconds = 30\nrestart_seconds = 1800\nsave_seconds = 20\n'
                       'allreduce_seconds = 3\n\n[failures]\ntrace = "%s"\n' % trace_file.name)
    (tmp_path / trace_file.name).write_bytes(trace_file.read_bytes())  # relative to the file's folder
    runner = CliRunner()
    from_file = _json(runner.invoke(main, COMPARE + ["--cluster", str(cluster)]))
    from_options = _json(runner.invoke(main, COMPARE + [
        "--trace", str(trace_file), "--groups", "24", "--step-seconds", "30", "--restart-seconds", "1800",
        "--save-seconds", "20", "--allreduce-seconds", "3"]))
    assert from_file["strategies"] == from_options["strategies"]
    assert from_file["parameters"] == from_options["parameters"]
    assert from_file["parameters"]["allreduce_seconds"] == 3.0
    # an option on the command line wins over the file
    faster = _json(runner.invoke(main, COMPARE + ["--cluster", str(cluster), "--restart-seconds", "600"]))
    assert faster["parameters"]["restart_seconds"] == 600.0
    assert faster["parameters"]["save_seconds"] == 20.0


def test_unknown_or_bad_keys_are_refused_with_the_key_named(tmp_path):
    runner = CliRunner()
    for text, named in (("groups = 24\nrestart_minutes = 30\n", "restart_minutes"),
                        ("[failures]\ntrace_file = 'x.json'\n", "trace_file"),
                        ("groups = 'many'\n", "groups"),
                        ("save_seconds = -1\n", "save_seconds"),
                        ("groups = 24\n[failures]\ntrace = 'a.json'\nfailure_model = 'b.json'\n", "both"),
                        ("groups = \n", "TOML")):
        path = tmp_path / "bad.toml"
        path.write_text(text)
        with pytest.raises(ParameterError, match=named):
            load_cluster(path)
        out = runner.invoke(main, ["compare", "--cluster", str(path), "-q"])
        assert out.exit_code == 1 and out.output.startswith("Error:") and named in out.output
    with pytest.raises(ParameterError, match="does not exist"):
        load_cluster(tmp_path / "none.toml")


def test_keys_a_command_does_not_use_are_named_in_a_warning(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("groups = 64\nglobal_batch = 4096\nheal_seconds = 30\nrestart_seconds = 1200\n")
    result = CliRunner().invoke(main, ["simulate", "--cluster", str(path), "--strategy", "ckpt", "--seeds", "1",
                                       "--set", "steps=200", "-q", "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0, result.output
    assert doc["groups"] == 64 and doc["parameters"]["restart_seconds"] == 1200.0
    assert "global_batch" not in result.stderr  # simulate --global-batch takes it
    path.write_text("groups = 8\nglobal_batch = 4096\nrestart_seconds = 1200\n")
    tuned = CliRunner().invoke(main, ["tune", "--cluster", str(path), "--seeds", "1", "--set", "steps=200", "-q"])
    assert tuned.exit_code == 0, tuned.output
    assert "global_batch" in tuned.stderr  # not a tune option: said, not dropped silently


def test_old_spellings_still_work_with_a_warning(trace_file):
    runner = CliRunner()
    new = _json(runner.invoke(main, COMPARE + ["--trace", str(trace_file), "--restart-seconds", "1800",
                                               "--save-seconds", "20"]))
    old = runner.invoke(main, COMPARE + ["--trace", str(trace_file), "--restart-minutes", "30",
                                         "--ckpt-save-seconds", "20"])
    assert _json(old)["strategies"] == new["strategies"]
    assert "--restart-minutes is deprecated, use --restart-seconds" in old.stderr
    both = runner.invoke(main, COMPARE + ["--trace", str(trace_file), "--restart-minutes", "30",
                                          "--restart-seconds", "60"])
    assert both.exit_code == 2 and "old spelling" in both.output
    assert "--restart-minutes" not in runner.invoke(main, ["compare", "--help"]).output
    # -n is the old short flag of --groups (now -N everywhere)
    assert runner.invoke(main, ["sweep", "-N", "12", "--r-min", "3", "--r-max", "3", "--methods", "consecutive",
                                "--trials", "5", "-q", "--json"]).exit_code == 0
    gone = runner.invoke(main, ["simulate", "--trace-time-scale", "0.5", "--strategy", "ckpt"])
    assert gone.exit_code == 2 and "--time-scale" in gone.output  # refused without --trace, new name given


def test_simulate_and_tune_run_at_any_n():
    params = preset_parameters("paper-600k", 2048)
    assert params.groups == 2048 and params.system_mtbf_seconds == preset_parameters("paper-600k", 600) \
        .system_mtbf_seconds
    runner = CliRunner()
    doc = _json(runner.invoke(main, ["simulate", "-N", "37", "--strategy", "spare", "-r", "3", "--seeds", "2",
                                     "--set", "steps=300", "-q", "--json"]))
    assert doc["groups"] == 37 and doc["parameters"]["groups"] == 37
    tuned = runner.invoke(main, ["tune", "-N", "8", "--seeds", "2", "--set", "steps=200", "-q"])
    assert tuned.exit_code == 0, tuned.output
    assert "N = 8 is not one of preset paper-600k's sizes" in tuned.output


def test_compare_a_trace_at_another_n_is_scaled_per_node(trace_file):
    from spare_opt import read_fault_trace

    trace = read_fault_trace(trace_file)
    assert trace.cluster_nodes == 24
    params = compare_parameters("trace-400", 96, trace=trace, step_seconds=30.0)
    kwargs = dict(semantics="repair", rep_redundancies=(), spare_redundancies=(), seeds=2)
    scaled = compare(params, trace=trace, **kwargs)
    model = fit_trace(trace, nodes=24).model
    from dataclasses import replace

    fitted = compare(replace(params, trace_time_scale=1.0), fault_model=model, **kwargs)
    # the same runs as the fitted model's (the per-node rate of the trace kept at 96 groups)
    assert scaled.strategies == fitted.strategies
    assert scaled.scaling is not None and "scaled per node" in scaled.format_text()
    assert "real rate" not in scaled.format_text()
    replayed = compare(params, trace=trace, trace_scaling="replay", **kwargs)
    assert replayed.scaling is None
    # four times the groups, four times the failures: checkpointing alone loses more time
    assert scaled.best("ckpt")["ttt_ratio"] > replayed.best("ckpt")["ttt_ratio"]
    same = compare(compare_parameters("trace-400", 24, trace=trace, step_seconds=30.0), trace=trace, **kwargs)
    assert same.scaling is None and same.trace_info is not None  # at the trace's own size: replayed


def test_cli_compare_at_another_n_says_it_scales(trace_file):
    out = CliRunner().invoke(main, ["compare", "--trace", str(trace_file), "--groups", "96", "--rep-r", "",
                                    "--spare-r", "", "--seeds", "2", "-q"])
    assert out.exit_code == 0, out.output
    assert "scaled per node to 96 groups" in out.output and "real rate" not in out.output


def test_a_trace_without_its_cluster_size_keeps_the_old_default():
    many = parse_fault_events([{"node_id": f"n{i}", "event_time": 1.0 + i, "event_type": "fault_start",
                                "fault_type": {"Class": "GPU"}} for i in range(30)])
    assert compare_parameters("trace-400", trace=many).groups == 400


def test_a_cluster_file_gives_the_traced_cluster_size_as_nodes(tmp_path):
    """``[failures] nodes`` is ``compare --nodes``: a CSV log's cluster size, refused below the nodes it names."""
    from pathlib import Path

    log = Path(__file__).resolve().parents[1] / "instances" / "small" / "fault-log-N12.csv"
    (tmp_path / log.name).write_bytes(log.read_bytes())
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(f'[failures]\ntrace = "{log.name}"\nnodes = 12\n')
    args = ["--rep-r", "2", "--spare-r", "2", "--micro-batches", "1", "--seeds", "1", "--steps", "20", "-q", "--json"]
    runner = CliRunner()
    from_file = _json(runner.invoke(main, ["compare", "--cluster", str(cluster), *args]))
    from_option = _json(runner.invoke(main, ["compare", "--trace", str(log), "--nodes", "12", *args]))
    assert from_file["parameters"] == from_option["parameters"] and from_file["parameters"]["groups"] == 12
    assert from_file["strategies"] == from_option["strategies"]
    cluster.write_text(f'[failures]\ntrace = "{log.name}"\nnodes = 0\n')
    bad = runner.invoke(main, ["compare", "--cluster", str(cluster), *args])
    assert bad.exit_code != 0 and "failures.nodes" in bad.output and "Traceback" not in bad.output


_RATE_CLUSTER = """groups = 12
step_seconds = 6
allreduce_seconds = 2
restart_seconds = 600
save_seconds = 30
steps = 20000
[failures]
node_mtbf_hours = 200
repair_hours = 4
"""


def test_a_rate_on_the_command_line_keeps_the_files_repairs(tmp_path):
    """A rate given on the command line replaces the file's rate, not its repair time: the
    run stays under repair semantics with the file's 4 h repairs."""
    path = tmp_path / "rate.toml"
    path.write_text(_RATE_CLUSTER)
    result = CliRunner().invoke(main, ["compare", "--cluster", str(path), "--failures-per-1000-node-days", "10",
                                       "--quick", "--no-sensitivity", "--seeds", "1", "-q"])
    assert result.exit_code == 0, result.output
    header = result.output.splitlines()
    verdict = next(line for line in header if line.startswith("Verdict:"))
    assert "10 failures per 1,000 node-days" in verdict and "median 4 h" in verdict
    assert verdict.endswith("repair semantics")
    warning = next(line for line in header if line.startswith("Warning:"))
    assert "node_mtbf_hours" in warning and "repair_hours" not in warning


@pytest.mark.parametrize("command", [["simulate", "--strategy", "ckpt", "--seeds", "1"], ["tune", "--seeds", "1"]])
def test_simulate_and_tune_refuse_the_keys_only_compare_reads(tmp_path, command):
    """simulate and tune cannot read a failure rate or nodes_per_group: one line, exit 1,
    instead of a run of a preset's failures under the file's name."""
    path = tmp_path / "rate.toml"
    path.write_text(_RATE_CLUSTER.replace("[failures]", "nodes_per_group = 2\n[failures]"))
    result = CliRunner().invoke(main, [command[0], "--cluster", str(path), *command[1:]])
    assert result.exit_code == 1
    message = result.output.strip().splitlines()
    assert len(message) == 1 and message[0].startswith("Error: ")
    assert "nodes_per_group" in message[0] and "node_mtbf_hours" in message[0] and "repair_hours" in message[0]
    assert "Traceback" not in result.output

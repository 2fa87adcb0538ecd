"""CLI tests of `spare-opt simulate` and `spare-opt tune` (click's CliRunner)."""

import json

import pytest
from click.testing import CliRunner

from spare_opt_cli.main import main

FAST = ["--set", "steps=60"]


@pytest.fixture
def runner():
    return CliRunner()


def test_simulate_text_and_json(runner):
    result = runner.invoke(main, ["simulate", "--groups", "200", "--strategy", "rep", "-r", "3", "--seeds", "3",
                                  "--checkpoint-period-seconds", "1500"])
    assert result.exit_code == 0, result.output
    assert "Rep+CKPT r=3" in result.output and "TTT/T0" in result.output
    result = runner.invoke(main, ["simulate", "--groups", "200", "--strategy", "spare", "--seeds", "2", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["redundancy"] == 8 and len(doc["runs"]) == 2  # r* for N = 200
    assert doc["summary"]["ttt_ratio"]["mean"] > 1 and doc["checkpoint_period_seconds"] > 0


def test_simulate_trace(runner, real_trace_path):
    result = runner.invoke(main, ["simulate", "--preset", "trace-400", "--strategy", "spare", "-r", "9",
                                  "--seeds", "1", "--trace", str(real_trace_path), "--time-scale", "0.02",
                                  "--checkpoint-period-seconds", "3000"])
    assert result.exit_code == 0, result.output
    assert "fault starts" in result.output and "beyond N" in result.output


def test_simulate_trace_on_another_size_says_where_the_cluster_size_comes_from(runner, real_trace_path):
    # The shipped trace gives no cluster size: the warning must not pass the assumed 400 off as the file's.
    result = runner.invoke(main, ["simulate", "--preset", "trace-400", "--strategy", "spare", "-r", "9", "--groups",
                                  "300", "--seeds", "1", "--trace", str(real_trace_path), "--time-scale", "0.02",
                                  "--checkpoint-period-seconds", "3000"])
    assert result.exit_code == 0, result.output
    from spare_opt import read_fault_trace

    named = read_fault_trace(real_trace_path).n_nodes
    assert 0 < named < 400
    assert (f"the trace's cluster (taken as 400 nodes: the file gives no cluster size and names {named} nodes)"
            in result.output)


@pytest.mark.parametrize("args, message", [
    (["--preset", "nope"], "Invalid value for '--preset'"),
    (["--groups", "0"], "0 is not in the range x>=1"),
    (["-r", "0"], "Invalid value for '--redundancy'"),
    (["--checkpoint-period-seconds", "-5"], "-5 is not in the range x>0"),
    (["--strategy", "spare", "-r", "1"], "SPARe needs redundancy r >= 2"),
    (["--seeds", "0"], "Invalid value for '--seeds'"),
    (["--trace", "/nonexistent/trace.json"], "does not exist"),
])
def test_simulate_bad_input(runner, args, message):
    result = runner.invoke(main, ["simulate"] + args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_tune_json_plot_and_overwrite(runner, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "fig.png"
    args = ["tune", "--groups", "200", "--seeds", "2", "--workers", "1", "--quiet", *FAST]
    result = runner.invoke(main, args + ["--json", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    for key in ("best_ttt_ratio", "best_r", "availability"):
        assert key in doc["rep"] and key in doc["spare"]
    assert isinstance(doc["gain"], float) and png.stat().st_size > 0
    again = runner.invoke(main, args + ["--plot", str(png)])
    assert again.exit_code != 0 and "exists" in again.output
    text = runner.invoke(main, args)
    # the paper's rows are shown only for the unchanged preset (here --set steps=60)
    assert text.exit_code == 0 and "Rep+CKPT TTT/T0" in text.output and "paper " not in text.output


@pytest.mark.parametrize("args, message", [
    (["--preset", "nope"], "Invalid value for '--preset'"),
    (["--groups", "0"], "0 is not in the range x>=1"),
    (["--groups", "1"], "below every SPARe redundancy"),  # any N, but not below every r of the sweep
    (["--set", "colour=red"], "unknown simulation parameter"),
    (["--set", "steps"], "expected FIELD=VALUE"),
    (["--seeds", "0"], "Invalid value for '--seeds'"),
])
def test_tune_bad_input(runner, args, message):
    result = runner.invoke(main, ["tune", "--quiet"] + args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_simulate_with_a_layout_file(runner, tmp_path):
    from spare_opt import consecutive

    path = tmp_path / "layout.json"
    consecutive(200, 4).save(path)
    args = ["simulate", "--groups", "200", "--strategy", "spare", "-r", "4", "--seeds", "1", "--quiet", *FAST]
    result = runner.invoke(main, args + ["--layout", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["redundancy"] == 4
    wrong = runner.invoke(main, ["simulate", "--groups", "200", "--strategy", "spare", "-r", "5", "--seeds", "1",
                                 "--quiet", *FAST, "--layout", str(path)])
    assert wrong.exit_code != 0 and "layout has N=200, r=4" in wrong.output
    missing = runner.invoke(main, args + ["--layout", str(tmp_path / "nope.json")])
    assert missing.exit_code != 0 and "Traceback" not in missing.output


def test_simulate_takes_n_and_r_from_the_layout_file(runner, tmp_path):
    # was: N defaulted to the preset's first (200) and a 12-group layout was refused ("the run needs N=200")
    from spare_opt import consecutive

    path = tmp_path / "layout.json"
    consecutive(12, 3).save(path)
    result = runner.invoke(main, ["simulate", "--strategy", "spare", "--seeds", "1", "--quiet", *FAST,
                                  "--layout", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert (doc["groups"], doc["redundancy"]) == (12, 3)
    other = runner.invoke(main, ["simulate", "--strategy", "spare", "--seeds", "1", "--quiet", *FAST,
                                 "--layout", str(path), "--groups", "13"])
    assert other.exit_code == 1 and "layout has N=12, r=3; the run needs N=13" in other.output


@pytest.mark.parametrize("command", [["simulate"], ["tune"], ["sweep", "-N", "7"]])
@pytest.mark.parametrize("workers", ["0", "-2"])
def test_workers_option_follows_the_scipy_convention(runner, command, workers):
    result = runner.invoke(main, command + ["--quiet", "--workers", workers])
    assert result.exit_code == 2
    assert "-1 (every CPU)" in result.output and "Traceback" not in result.output


def test_workers_default_to_one_and_minus_one_gives_the_same_runs(runner):
    from spare_opt_cli import simulate, sweep, tune, validate

    for module in (simulate, sweep, tune, validate):
        option = next(param for param in module.command.params if param.name == "workers")
        assert option.default == 1, module.__name__
        assert any(param.name == "scheduler" for param in module.command.params), module.__name__
    args = ["simulate", "--groups", "200", "--strategy", "rep", "--seeds", "2", "--quiet", "--json", *FAST]
    one = json.loads(runner.invoke(main, args).output)
    every = json.loads(runner.invoke(main, args + ["--workers", "-1"]).output)
    assert one["runs"] == every["runs"]


def test_set_mtbf_seconds_is_the_old_name_of_system_mtbf_seconds(runner):
    args = ["simulate", "--groups", "200", "--strategy", "rep", "--seeds", "1", "--quiet", "--json", *FAST]
    with pytest.warns(DeprecationWarning, match="system_mtbf_seconds"):
        old = runner.invoke(main, args + ["--set", "mtbf_seconds=600"])
    new = runner.invoke(main, args + ["--set", "system_mtbf_seconds=600"])
    assert old.exit_code == new.exit_code == 0, old.output + new.output
    old_doc, new_doc = json.loads(old.stdout), json.loads(new.stdout)
    assert old_doc["parameters"]["system_mtbf_seconds"] == 600.0 and "mtbf_seconds" not in old_doc["parameters"]
    assert old_doc["runs"] == new_doc["runs"]


@pytest.mark.parametrize("groups, strategy, expected", [(2, "spare", 2), (2, "rep", 2), (3, "rep", 3), (200, "rep", 3),
                                                        (3, "spare", 2), (200, "spare", 8)])
def test_simulate_default_redundancy_runs_on_every_size_it_allows(runner, groups, strategy, expected):
    """The default r is the paper's (r* for SPARe, 3 for replication), at least 2 for SPARe and cut at N."""
    result = runner.invoke(main, ["simulate", "--groups", str(groups), "--strategy", strategy, "--seeds", "1",
                                  "--json", *FAST])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["redundancy"] == expected


def test_simulate_spare_on_one_group_says_why_it_cannot_run(runner):
    result = runner.invoke(main, ["simulate", "--groups", "1", "--strategy", "spare", "--seeds", "1"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert result.output.startswith("Error:") and "N = 1 allows only r = 1" in result.output


def test_default_redundancy_checks_n_for_every_strategy():
    # was: ckpt and elastic returned 1 for any groups (0, -1, None, 2**31) unchecked; spare took N > 2**31 - 1
    from spare_opt import ParameterError, ParameterTypeError, default_redundancy

    assert [default_redundancy(s, 2) for s in ("ckpt", "elastic", "rep", "spare")] == [1, 1, 2, 2]
    for strategy in ("ckpt", "elastic", "rep", "spare"):
        for bad, error in ((0, ParameterError), (2**31, ParameterError), (None, ParameterTypeError),
                           (2.0, ParameterTypeError)):
            with pytest.raises(error):
                default_redundancy(strategy, bad)

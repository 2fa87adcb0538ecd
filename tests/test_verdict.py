"""Tests of the verdict (spare_opt.simulation.verdict.compare, spare-opt compare): grid, tuned periods, rows, JSON, figure.

The runs of ``compare`` are checked against the public :func:`spare_opt.simulate` on the
same cyclic trace and placement, and its choices (best period, best setting) against the
per-period figures it reports.
"""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from spare_opt import (
    DEFAULT_CYCLES,
    CompareResult,
    compare,
    compare_parameters,
    cyclic_trace,
    parse_fault_events,
    plot_compare,
    simulate,
    synthetic_fault_trace,
    theory,
)
from spare_opt._core.io import dumps_json
from spare_opt._core.errors import OutputExistsError, ParameterError, ParameterTypeError, TraceError
from spare_opt_cli.main import main

ROW_KEYS = {"strategy", "redundancy", "micro_batches", "ttt_ratio", "ttt_ci", "availability", "restarts",
            "mean_step_cost"}


@pytest.fixture(scope="module")
def small_trace():
    """A generated trace of 24 nodes over 40 days, bursty enough to wipe out small r."""
    doc = synthetic_fault_trace(nodes=24, days=40.0, seed=3, incidents_per_day=2.0, repair_median_days=0.5)
    return parse_fault_events(doc, source="<small>")


@pytest.fixture(scope="module")
def small_params(small_trace):
    return compare_parameters("trace-400", 24, trace=small_trace, step_seconds=30.0, jitter_sd=0.02)


@pytest.fixture(scope="module")
def verdict(small_trace, small_params):
    return compare(small_params, trace=small_trace, semantics="paper", rep_redundancies=(2, 3),
                   spare_redundancies=(2, 4), seeds=3, cycles=3, period_factors=(0.5, 1.0, 2.0),
                   micro_batches=(1,))


# ------------------------------------------------------------------ parameters and trace
def test_compare_parameters_take_the_operator_figures_and_one_trace_span_of_steps(small_trace):
    params = compare_parameters("trace-400", 24, trace=small_trace, restart_seconds=600.0, save_seconds=20.0,
                                step_seconds=30.0, time_scale=0.1)
    assert (params.groups, params.restart_seconds, params.save_seconds, params.layer_compute_seconds) == \
        (24, 600.0, 20.0, 30.0)
    step = 30.0 + params.allreduce_seconds
    assert params.steps == round(small_trace.span_days[1] * 86400 * 0.1 / step)
    assert compare_parameters("trace-400", 24, trace=small_trace, steps=77).steps == 77
    assert compare_parameters("trace-400").groups == 400  # the preset's N without a trace
    many = parse_fault_events([{"node_id": f"n{i}", "event_time": 1.0 + i, "event_type": "fault_start",
                                "fault_type": {"Class": "GPU"}} for i in range(450)])
    assert compare_parameters("trace-400", trace=many).groups == 450  # every named node gets a group
    with pytest.raises(TraceError, match="no event after day 0"):
        compare_parameters("trace-400", 4, trace=parse_fault_events([]))


def test_a_trace_too_thin_to_fit_is_refused_when_it_must_be_scaled():
    # was: AttributeError ('NoneType' object has no attribute 'node_mtbf_seconds') from the missing model
    one = parse_fault_events([{"node_id": "a", "event_time": t, "event_type": kind, "fault_type": {"Class": "GPU"}}
                              for t, kind in ((1.0, "fault_start"), (2.0, "fault_end"))])
    params = compare_parameters("trace-400", 12, trace=one, steps=20)
    with pytest.raises(TraceError, match="cannot scale the trace to 12 groups: no failure model"):
        compare(params, trace=one, trace_scaling="fit", rep_redundancies=(), spare_redundancies=(2,),
                micro_batches=(1,), seeds=1)


def test_cyclic_trace_repeats_every_event_shifted_by_the_span(small_trace):
    tiled = cyclic_trace(small_trace, 3)
    period = small_trace.span_days[1]
    count = small_trace.n_events
    assert tiled.n_events == 3 * count and tiled.source == small_trace.source
    for c in range(3):
        part = slice(c * count, (c + 1) * count)
        assert np.allclose(tiled.times_days[part], small_trace.times_days + c * period)
        assert [tiled.node_ids[i] for i in tiled.node[part]] == [small_trace.node_ids[i] for i in small_trace.node]
    # a fault still open at the end of a copy keeps its node down into the next copy, whose
    # first start of that node is then irregular (a start while down)
    assert small_trace.open_at_end == 1 and tiled.open_at_end == 1
    assert tiled.irregular_counts()["start-while-down"] == 3 * small_trace.irregular_counts()["start-while-down"] + 2
    assert cyclic_trace(small_trace, 1) is small_trace
    with pytest.raises(ParameterError):
        cyclic_trace(small_trace, 0)
    with pytest.raises(ParameterError, match="cycles must be <= 100"):  # was: 10**9 copies built until out of memory
        cyclic_trace(small_trace, 10**9)


# ------------------------------------------------------------------ the runs and the choices
def test_every_setting_is_run_on_the_same_failures_as_simulate(verdict, small_trace, small_params):
    tiled = cyclic_trace(small_trace, 3)
    params = verdict.params
    assert params.max_wall_factor == 3.0 and params.steps == small_params.steps
    for row in verdict.settings:
        if row["strategy"] == "redistribute":  # no layout to simulate: its own tests (test_verdict_deploy.py)
            continue
        runs = [simulate(params, row["strategy"], None if row["strategy"] in ("ckpt", "elastic") else row["redundancy"],
                         checkpoint_period_seconds=row["checkpoint_period_seconds"], seed=seed, trace=tiled,
                         placement_seed=seed) for seed in range(verdict.seeds)]
        ratios = [run.ttt_ratio for run in runs]
        assert row["ttt_ratio"] == pytest.approx(np.mean(ratios))
        assert row["availability"] == pytest.approx(np.mean([run.availability for run in runs]))
        assert row["restarts"] == pytest.approx(np.mean([run.restarts for run in runs]))
        if all(math.isfinite(x) for x in ratios):
            half = row["ttt_ci"][1] - row["ttt_ratio"]
            assert half >= 0 and row["ttt_ci"][0] == pytest.approx(row["ttt_ratio"] - half)


def test_repair_verdict_runs_equal_simulate_with_repairs(small_trace, small_params):
    result = compare(small_params, trace=small_trace, semantics="repair", rep_redundancies=(2,),
                     spare_redundancies=(3,), micro_batches=(1, 4), seeds=2, cycles=2, period_factors=(1.0, 2.0))
    tiled = cyclic_trace(small_trace, 2)
    assert result.semantics == "repair"
    assert [(row["strategy"], row["micro_batches"]) for row in result.settings] == \
        [("ckpt", 1), ("rep", 1), ("spare", 1), ("spare", 4), ("elastic", 1), ("redistribute", 1), ("redistribute", 4)]
    for row in result.settings:
        if row["strategy"] == "redistribute":  # no layout to simulate: its own tests (test_verdict_deploy.py)
            continue
        runs = [simulate(result.params, row["strategy"], None if row["strategy"] in ("ckpt", "elastic") else row["redundancy"],
                         checkpoint_period_seconds=row["checkpoint_period_seconds"], seed=seed, trace=tiled,
                         placement_seed=seed, micro_batches=row["micro_batches"], semantics="repair")
                for seed in range(2)]
        assert row["ttt_ratio"] == pytest.approx(np.mean([run.ttt_ratio for run in runs]))
        assert row["restarts"] == pytest.approx(np.mean([run.restarts for run in runs]))
        if row["strategy"] == "elastic":  # a step takes a fault-free step's time: its short batches cost steps
            assert row["mean_step_cost"] == 1.0
        else:
            assert row["mean_step_cost"] == pytest.approx(np.mean([run.mean_step_cost for run in runs]))


def test_each_setting_keeps_its_best_period_and_each_strategy_its_best_setting(verdict):
    labels = [(row["strategy"], row["redundancy"], row["micro_batches"]) for row in verdict.settings]
    assert labels == [("ckpt", 1, 1), ("rep", 2, 1), ("rep", 3, 1), ("spare", 2, 1), ("spare", 4, 1),
                      ("elastic", 1, 1), ("redistribute", 24, 1)]
    for row in verdict.settings:
        by_period = row["ttt_ratio_by_period"]
        assert len(row["periods"]) == 3 and row["ttt_ratio"] == min(by_period)
        assert row["checkpoint_period_seconds"] == row["periods"][by_period.index(min(by_period))]
        # the periods are 0.5, 1 and 2 times one Young/Daly period
        assert row["periods"][0] * 2 == pytest.approx(row["periods"][1]) == pytest.approx(row["periods"][2] / 2)
    for row in verdict.strategies:
        mine = [s for s in verdict.settings if s["strategy"] == row["strategy"]]
        assert row["ttt_ratio"] == min(s["ttt_ratio"] for s in mine)
        assert ROW_KEYS <= set(row)
    assert [row["strategy"] for row in verdict.strategies] == ["ckpt", "rep", "spare", "redistribute", "elastic"]
    assert verdict.best("rep")["strategy"] == "rep"


def test_the_young_daly_centre_follows_the_measured_wipe_outs(verdict, small_trace):
    # checkpointing alone restarts at every failure event: T_f = span of the cyclic trace / (events + 1)
    p = verdict.params
    events = verdict.trace_info["ckpt"]["failure_events"]
    span_seconds = 3 * small_trace.span_days[1] * 86400.0
    assert events > 10
    expected = theory.checkpoint_period(p.save_seconds, p.restart_seconds, span_seconds / (events + 1))
    assert verdict.settings[0]["periods"][1] == pytest.approx(expected)
    spare = [row for row in verdict.settings if row["strategy"] == "spare"]
    assert spare[0]["periods"][1] < spare[1]["periods"][1]  # r = 4 wipes out less often than r = 2


def test_workers_do_not_change_the_verdict(small_trace, small_params, verdict):
    again = compare(small_params, trace=small_trace, semantics="paper", rep_redundancies=(2, 3),
                    spare_redundancies=(2, 4), seeds=3, cycles=3, period_factors=(0.5, 1.0, 2.0), workers=2,
                    micro_batches=(1,))
    assert again == verdict


def test_json_table_and_figure(verdict, tmp_path):
    pytest.importorskip("matplotlib")
    doc = json.loads(dumps_json(verdict.to_dict()))
    assert [row["strategy"] for row in doc["strategies"]] == ["ckpt", "rep", "spare", "redistribute", "elastic"]
    for row in doc["strategies"]:
        assert ROW_KEYS <= set(row)
    assert doc["semantics"] == "paper" and doc["seeds"] == 3 and doc["cycles"] == 3
    text = verdict.format_text()
    assert text.count("\n") >= 6 and "CKPT only" in text and "SPARe+CKPT" in text and "Best exact:" in text
    path = plot_compare(verdict, tmp_path / "verdict.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(OutputExistsError):
        plot_compare(verdict, path)


def test_unfinished_runs_give_no_ratio_and_no_interval(small_trace):
    params = compare_parameters("trace-400", 24, trace=small_trace, step_seconds=30.0, restart_seconds=40000.0)
    result = compare(params, trace=small_trace, semantics="paper", rep_redundancies=(), spare_redundancies=(),
                     seeds=2, cycles=1, period_factors=(1.0,))
    row = result.best("ckpt")
    assert row["unfinished"] == 2 and math.isinf(row["ttt_ratio"])
    doc = result.to_dict()
    assert doc["strategies"][0]["ttt_ratio"] is None and doc["strategies"][0]["ttt_ci"] == [None, None]
    assert "  > 1 " in result.format_text() and "No strategy finished" in result.conclusion()


def test_synthetic_failures_of_a_preset():
    from spare_opt import preset_parameters

    params = preset_parameters("paper-600k", 200, steps=300)
    result = compare(params, semantics="paper", rep_redundancies=(3,), spare_redundancies=(8,), seeds=2,
                     period_factors=(1.0,), micro_batches=(1,))
    assert isinstance(result, CompareResult) and result.trace_info is None and result.source == "preset"
    assert result.params.max_wall_factor == float(DEFAULT_CYCLES)
    assert [row["strategy"] for row in result.strategies] == ["ckpt", "rep", "spare"]


def test_synthetic_failures_of_a_preset_take_micro_batches():
    # regression: the preset's failure pool was built without m, so every m ran as m = 1
    from spare_opt import preset_parameters

    params = preset_parameters("paper-600k", 200, steps=300)
    result = compare(params, semantics="paper", rep_redundancies=(), spare_redundancies=(8,), seeds=2,
                     period_factors=(1.0,), micro_batches=(1, 4), include_ckpt=False)
    for row in result.settings:
        runs = [simulate(result.params, "spare", 8, checkpoint_period_seconds=row["checkpoint_period_seconds"],
                         seed=seed, micro_batches=row["micro_batches"]) for seed in range(2)]
        assert row["ttt_ratio"] == pytest.approx(np.mean([run.ttt_ratio for run in runs]))
        if row["strategy"] == "elastic":  # a step takes a fault-free step's time: its short batches cost steps
            assert row["mean_step_cost"] == 1.0
        else:
            assert row["mean_step_cost"] == pytest.approx(np.mean([run.mean_step_cost for run in runs]))
    one, four = result.settings
    assert four["mean_step_cost"] < one["mean_step_cost"]


def test_bad_arguments(small_trace, small_params):
    with pytest.raises(ParameterError, match="nothing to compare"):
        compare(small_params, trace=small_trace, semantics="paper", include_ckpt=False, rep_redundancies=(),
                spare_redundancies=(), micro_batches=(1,), include_elastic=False)
    with pytest.raises(ParameterError):
        compare(small_params, trace=small_trace, semantics="paper", spare_redundancies=(1,), micro_batches=(1,))
    with pytest.raises(ParameterError):
        compare(small_params, trace=small_trace, semantics="paper", rep_redundancies=(25,), micro_batches=(1,))
    with pytest.raises(ParameterError, match="semantics"):
        compare(small_params, trace=small_trace, semantics="repairs", micro_batches=(1,))
    with pytest.raises(ParameterTypeError):
        compare(small_params, trace="trace.json", semantics="paper", micro_batches=(1,))
    with pytest.raises(ParameterTypeError):
        compare("params", semantics="paper", micro_batches=(1,))
    with pytest.raises(ParameterError):
        compare(small_params, trace=small_trace, semantics="paper", seeds=0, micro_batches=(1,))
    with pytest.raises(ParameterError, match="repair"):
        compare(small_params, semantics="repair", micro_batches=(1,))


# ------------------------------------------------------------------ CLI
def test_cli_compare_json_and_usage_errors(tmp_path):
    from spare_opt.traces.json_format import write_fault_trace

    path = write_fault_trace(synthetic_fault_trace(nodes=24, days=40.0, seed=3, incidents_per_day=2.0),
                             tmp_path / "t.json")
    runner = CliRunner()
    args = ["compare", "--trace", str(path), "--semantics", "paper", "--rep-r", "2", "--spare-r", "3", "--micro-batches", "1",
            "--seeds", "2", "--step-seconds", "30", "--restart-seconds", "1800", "--save-seconds", "20", "-q"]
    result = runner.invoke(main, args + ["--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [row["strategy"] for row in doc["strategies"]] == ["ckpt", "rep", "spare", "redistribute", "elastic"]
    assert doc["parameters"]["restart_seconds"] == 1800.0 and doc["parameters"]["save_seconds"] == 20.0
    assert doc["parameters"]["groups"] == 24  # the generated trace says its cluster size
    text = runner.invoke(main, args)
    assert text.exit_code == 0 and "Verdict: N = 24" in text.output
    for bad, message in ((["--time-scale", "0.1"], "needs --trace"), (["--spare-r", "2,x"], "not an integer"),
                         (["--seeds", "0"], "0")):
        out = runner.invoke(main, ["compare", "--semantics", "paper"] + bad)
        assert out.exit_code == 2 and message in out.output
    missing = runner.invoke(main, ["compare", "--trace", str(tmp_path / "none.json")])
    assert missing.exit_code == 1 and missing.output.startswith("Error:")



def test_cli_compare_semantics_default_follows_the_failures():
    # was: without a trace the default --semantics repair was refused ("use semantics='paper'")
    runner = CliRunner()
    base = ["compare", "--groups", "6", "--quick", "--seeds", "1", "--steps", "5", "-q"]
    result = runner.invoke(main, base + ["--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["semantics"] == "paper"
    for bad, message in ((["--semantics", "repair"], "--semantics repair needs the repair times"),
                         (["--heal-seconds", "5"], "--heal-seconds applies to --semantics repair only")):
        out = runner.invoke(main, base + bad)
        assert out.exit_code == 2 and message in out.output


def test_cli_compare_leaves_out_default_redundancies_above_n_and_says_so():
    # was: at a small N the default (or --quick) grid's r above N was refused, though the user never chose it
    runner = CliRunner()
    base = ["compare", "--groups", "4", "--quick", "--seeds", "1", "--steps", "5", "-q"]
    result = runner.invoke(main, base + ["--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert sorted({row["redundancy"] for row in doc["settings"] if row["strategy"] == "spare"}) == [3]
    assert "Note: --spare-r 5 left out of the default grid: above N = 4" in result.stderr
    explicit = runner.invoke(main, base + ["--spare-r", "2,5"])
    assert explicit.exit_code == 1 and "each value must be <= 4, got 5" in explicit.output


def test_cli_compare_notes_say_where_the_failures_and_the_m_grid_came_from():
    """Without a failure source the preset's failures are named; --quick's grid is not called "the grid given"."""
    runner = CliRunner()
    base = ["compare", "--groups", "6", "--quick", "--seeds", "1", "--steps", "5", "-q"]
    result = runner.invoke(main, base)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "no failure source given" in text and "the preset paper-600k's" in text
    assert "m tried: 1, 16 (--quick's grid;" in text and "give --global-batch for" in text
    given_grid = runner.invoke(main, base + ["--micro-batches", "1,4", "--node-mtbf-hours", "50000"])
    assert given_grid.exit_code == 0, given_grid.output
    text = " ".join(given_grid.output.split())
    assert "m tried: 1, 4 (the grid given;" in text and "no failure source given" not in text


def test_cli_compare_takes_the_traced_cluster_size_from_nodes():
    """A CSV fault log names only the nodes that failed: --nodes gives the cluster's size.

    Without it the size is the preset's 400 (and a note of the verdict says so); with it the default N
    is that size, and at another N the per-node rate is fitted on that many nodes.
    """
    from pathlib import Path

    log = str(Path(__file__).resolve().parents[1] / "instances" / "small" / "fault-log-N12.csv")
    runner = CliRunner()
    base = ["compare", "--trace", log, "--rep-r", "2", "--spare-r", "2", "--micro-batches", "1", "--seeds", "1",
            "--steps", "20", "-q", "--json"]
    assumed = runner.invoke(main, base)
    assert assumed.exit_code == 0, assumed.output
    doc = json.loads(assumed.stdout)
    assert doc["parameters"]["groups"] == 400
    assert "the trace's cluster is taken as 400 nodes: the file gives no cluster size and names 6 nodes " \
           "(give --nodes)" in doc["notes"]
    text = runner.invoke(main, [a for a in base if a != "--json"])
    assert "Note: the trace's cluster is taken as 400 nodes" in text.stdout
    given = runner.invoke(main, base + ["--nodes", "12"])
    assert given.exit_code == 0, given.output
    doc = json.loads(given.stdout)
    assert doc["parameters"]["groups"] == 12 and not any("taken as" in note for note in doc["notes"])
    scaled = {}
    for nodes in (12, 48):
        out = runner.invoke(main, base + ["--nodes", str(nodes), "-N", "24"])
        assert out.exit_code == 0, out.output
        scaled[nodes] = json.loads(out.stdout)["scaling"]
        assert f"fitted on its {nodes} nodes and scaled per node to 24 groups" in scaled[nodes]
    # The same faults on 4x the nodes: each node fails about 4x less often.
    mtbf = {n: float(text.split("MTBF ")[1].split(" days")[0]) for n, text in scaled.items()}
    assert mtbf[48] / mtbf[12] == pytest.approx(4.0, rel=0.05)
    for bad, message, code in ((["--nodes", "3"], "at least the 6 nodes the trace names", 1),):
        out = runner.invoke(main, base + bad)
        assert out.exit_code == code and out.output.startswith("Error:") and message in out.output
    alone = runner.invoke(main, ["compare", "--nodes", "12", "--quick"])
    assert alone.exit_code == 2 and "--nodes needs --trace" in alone.output


def test_trace_cluster_size_prefers_the_operator_then_the_file(small_trace):
    from spare_opt import trace_cluster_size

    named = parse_fault_events([{"node_id": f"n{i}", "event_time": 1.0 + i, "event_type": "fault_start",
                                 "fault_type": {"Class": "GPU"}} for i in range(5)])
    assert trace_cluster_size(named) == 400  # the preset's first N: the file gives no size
    assert trace_cluster_size(named, nodes=5) == 5
    assert trace_cluster_size(small_trace) == 24  # the file's
    assert trace_cluster_size(small_trace, nodes=30) == 30
    assert compare_parameters("trace-400", trace=named, trace_nodes=7, steps=5).groups == 7
    with pytest.raises(ParameterError, match="at least the 5 nodes"):
        trace_cluster_size(named, nodes=4)
    with pytest.raises(ParameterTypeError):
        trace_cluster_size(named, nodes=5.5)
    with pytest.raises(ParameterError, match="give the trace too"):
        compare_parameters("trace-400", trace_nodes=7)


def test_traced_cluster_size_counts_the_whole_trace_before_its_window_and_is_bounded():
    # was: a window's nodes (fewer than the file names) were the bound, so --nodes 3 passed on a file naming 6,
    # and a huge --nodes crashed in the fit (scipy TypeError) or was blamed on "groups N"
    from pathlib import Path

    from spare_opt import read_fault_trace, trace_cluster_size

    log = str(Path(__file__).resolve().parents[1] / "instances" / "small" / "fault-log-N12.csv")
    whole = read_fault_trace(log)
    assert whole.n_nodes == 6
    window = (6.5, 7.0)  # names 1 of the 6 nodes
    with pytest.raises(ParameterError, match="at least the 6 nodes"):
        compare_parameters("trace-400", trace=whole, trace_nodes=3, window=window)
    with pytest.raises(ParameterError, match="at least the 6 nodes"):
        compare(compare_parameters("trace-400", 12, trace=whole, steps=5), trace=whole, trace_nodes=3,
                window=window, rep_redundancies=(), spare_redundancies=(), include_elastic=False, seeds=1)
    with pytest.raises(ParameterError, match="give the trace too"):
        compare(compare_parameters("trace-400", 12, steps=5), trace_nodes=12, semantics="paper",
                rep_redundancies=(), spare_redundancies=(), include_elastic=False, seeds=1)
    for huge in (2**31, 10**20):
        with pytest.raises(ParameterError, match="nodes must be <= 2,147,483,647"):
            trace_cluster_size(whole, nodes=huge)
    runner = CliRunner()
    base = ["compare", "--trace", log, "--rep-r", "", "--spare-r", "", "--no-elastic", "--seeds", "1", "-q"]
    for bad, message in ((["--nodes", "3", "--window", "6.5", "7"], "at least the 6 nodes the trace names"),
                         (["--nodes", "99999999999999999999", "-N", "24"], "nodes must be <= 2,147,483,647")):
        out = runner.invoke(main, base + bad)
        assert out.exit_code == 1 and out.output.startswith("Error:") and message in out.output, out.output
    # Without --nodes the note names the whole file's 6 nodes, not the window's one.
    out = runner.invoke(main, base + ["--window", "6.5", "7", "--json"])
    assert out.exit_code == 0, out.output
    assert "the trace's cluster is taken as 400 nodes: the file gives no cluster size and names 6 nodes " \
           "(give --nodes)" in json.loads(out.stdout)["notes"]


def test_compare_notes_a_traced_cluster_size_other_than_the_files(small_trace):
    # was: trace_nodes (compare --nodes) silently replaced the size the file gives
    params = compare_parameters("trace-400", 24, trace=small_trace, steps=20)
    args = dict(trace=small_trace, rep_redundancies=(), spare_redundancies=(), include_elastic=False, seeds=1)
    other = compare(params, trace_nodes=30, **args)
    assert "the trace's cluster is taken as 30 nodes, as given; the file says 24" in other.notes
    same = compare(params, trace_nodes=24, **args)
    assert not any("as given" in note for note in same.notes)


def test_cli_compare_warns_of_a_cluster_files_nodes_without_a_trace(tmp_path):
    # was: [failures] nodes beside a failure model (or no failures at all) was silently ignored
    cluster = tmp_path / "cluster.toml"
    cluster.write_text("groups = 6\n[failures]\nnodes = 12\n")
    out = CliRunner().invoke(main, ["compare", "--cluster", str(cluster), "--semantics", "paper", "--rep-r", "",
                                    "--spare-r", "", "--seeds", "1", "--steps", "5", "-q", "--json"])
    assert out.exit_code == 0, out.output
    assert "[failures] nodes is the size of a trace's cluster and there is no trace (ignored)" in out.stderr

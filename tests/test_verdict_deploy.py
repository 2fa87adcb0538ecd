"""From the verdict to the deployment: the m grid, what the recommendation records, the all-reduce's source,
columns that add up, failures in the field's units, and redistribution (r = N) beside the stacked layout.
"""

import hashlib
import json
import math
import re

import numpy as np
import pytest
from click.testing import CliRunner

from spare_opt import (
    FailureModel,
    ParameterError,
    compare,
    compare_parameters,
    failure_model_from_rates,
    micro_batch_grid,
    node_mtbf_from_rates,
    parse_fault_events,
    per_group_model,
    recommendation_layout,
    redistribution_restart_threshold,
    ring_allreduce_seconds,
    scaled_trace_model,
    synthetic_fault_trace,
)
from spare_opt.simulation.events import model_events, trace_events
from spare_opt.simulation._runs import default_layout
from spare_opt.traces.json_format import write_fault_trace
from spare_opt_cli.main import main

#: A small, fast grid: SPARe r = 2 only, one period, two seeds.
FAST = dict(rep_redundancies=(), spare_redundancies=(2,), seeds=2, period_factors=(1.0,), cycles=3,
            include_elastic=False, include_redistribution=False)


@pytest.fixture(scope="module")
def small_doc():
    return synthetic_fault_trace(nodes=24, days=40.0, seed=3, incidents_per_day=2.0, repair_median_days=0.5)


@pytest.fixture(scope="module")
def small_trace(small_doc):
    return parse_fault_events(small_doc, source="<small>")


@pytest.fixture(scope="module")
def small_params(small_trace):
    return compare_parameters("trace-400", 24, trace=small_trace, step_seconds=30.0, jitter_sd=0.02)


@pytest.fixture(scope="module")
def trace_file(small_doc, tmp_path_factory):
    return write_fault_trace(small_doc, tmp_path_factory.mktemp("trace") / "t.json")


def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ------------------------------------------------------------------ the m grid
def test_the_grid_holds_the_largest_m_the_batch_allows_and_the_powers_of_two_below_it():
    assert micro_batch_grid(3072, 1536)[0] == [1, 2]
    assert micro_batch_grid(100, 10)[0] == [1, 2, 4, 8, 10]
    assert micro_batch_grid(10, 10)[0] == [1]
    ms, note = micro_batch_grid(3072, 1536, (1, 16))  # the old --quick grid: 16 cannot be held, 2 is added
    assert ms == [1, 2] and "16 left out" in note and "floor(B / N)" in note
    assert micro_batch_grid(None, 1536)[0] == [1, 4, 16]
    assert "no global batch" in micro_batch_grid(None, 1536)[1]
    with pytest.raises(ParameterError):
        micro_batch_grid(100, 1536)


def test_a_cluster_whose_batch_allows_m_2_gets_m_2_tried_and_recommended(small_trace, small_params):
    result = compare(small_params, trace=small_trace, semantics="repair", global_batch=48, **FAST)
    assert sorted({row["micro_batches"] for row in result.settings if row["strategy"] == "spare"}) == [1, 2]
    assert any(note.startswith("m tried: 1, 2 (2, the largest") for note in result.notes)
    assert result.best("spare")["micro_batches"] == 2
    layout = recommendation_layout(result)
    assert layout.metadata["micro_batches"] == 2
    assert layout.metadata["recommendation"]["assumptions"]["grid"]["micro_batches"] == [1, 2]


# ------------------------------------------------------------------ columns that add up
def _printed_rows(text):
    """(TTT/T0, [steps, patch, lost, restart, saves]) of every finished row of the printed table."""
    rows = []
    for line in text.splitlines():
        match = re.match(r"^\S.{25}\s+(\d+\.\d{3})\s+\[[^]]+\]\s+((?:\d+\.\d{3}\s+){5})", line)
        if match:
            rows.append((float(match.group(1)), [float(x) for x in match.group(2).split()]))
    return rows


@pytest.mark.parametrize("scale", [1.0, 0.01])
def test_ttt_recomputed_from_the_printed_columns_equals_the_total(small_trace, scale):
    params = compare_parameters("trace-400", 24, trace=small_trace, step_seconds=30.0, jitter_sd=0.02,
                                time_scale=scale, restart_seconds=3600.0 * scale ** 0.5)
    result = compare(params, trace=small_trace, semantics="repair", rep_redundancies=(2,), spare_redundancies=(2,),
                     micro_batches=(1, 4), seeds=2, period_factors=(1.0,), cycles=10)
    rows = _printed_rows(result.format_text())
    assert len(rows) >= 4  # ckpt, rep, spare (and its m = 1), redistribution, elastic where finished
    for total, parts in rows:
        assert sum(parts) == pytest.approx(total, abs=0.003)
    for row in result.strategies:  # the figures themselves, unrounded
        if math.isfinite(row["ttt_ratio"]):
            assert sum(row["ttt_parts"].values()) == pytest.approx(row["ttt_ratio"], rel=1e-9)
    elastic = result.best("elastic")  # a step takes a fault-free step's time; the short batches cost steps
    assert elastic["mean_step_cost"] == 1.0
    assert elastic["price"]["kind"] == "steps for the same samples"
    assert elastic["steps_per_sample"] >= 1.0


# ------------------------------------------------------------------ the recommendation records what was used
def _sha256(path):
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_assumptions_equal_the_inputs_of_a_trace_run(tmp_path, trace_file):
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(f'groups = 24\nstep_seconds = 30\nrestart_seconds = 1800\nsave_seconds = 20\n'
                       f'heal_seconds = 90\nglobal_batch = 48\nallreduce_seconds = 3\n\n'
                       f'[failures]\ntrace = "{trace_file}"\ntime_scale = 0.5\n')
    out = tmp_path / "rec.json"
    result = CliRunner().invoke(main, ["compare", "--cluster", str(cluster), "--quick", "--spare-r", "2",
                                       "--rep-r", "", "--no-elastic", "--no-sensitivity", "-q", "--json",
                                       "-o", str(out)])
    doc = _json(result)
    rec = json.loads(out.read_text())["metadata"]["recommendation"]
    a = rec["assumptions"]
    assert a["failures"]["kind"] == "trace"
    assert a["failures"]["path"] == str(trace_file)
    assert a["failures"]["fingerprint"] == _sha256(trace_file)
    assert a["failures"]["time_scale"] == 0.5
    p = a["parameters"]
    assert (p["groups"], p["layer_compute_seconds"], p["restart_seconds"], p["save_seconds"], p["heal_seconds"],
            p["allreduce_seconds"], p["trace_time_scale"]) == (24, 30.0, 1800.0, 20.0, 90.0, 3.0, 0.5)
    for unused in ("system_mtbf_seconds", "weibull_shape", "failure_model", "rate_follows_live"):
        assert unused not in p  # the preset's failures were not used
    assert a["allreduce"]["source"] == "given"
    assert a["global_batch"] == 48
    assert a["grid"]["quick"] is True and a["grid"]["micro_batches"] == [1, 2] and a["grid"]["seeds"] == 2
    assert a["notes"] == doc["notes"] and a["conclusion"] == doc["conclusion"]
    assert rec["chosen_strategy"] in ("ckpt", "rep", "spare", "elastic", "redistribute")
    assert json.loads(out.read_text())["metadata"]["micro_batches"] == rec["spare"]["micro_batches"]


def test_assumptions_equal_the_inputs_of_a_failure_model_run_and_the_header_names_the_file(tmp_path):
    model = FailureModel(cluster_nodes=24, event_mtbf_seconds=4 * 3600.0, weibull_shape=0.9,
                         repair_median_seconds=6 * 3600.0, repair_sigma=0.5, source="hand-written")
    path = model.save(tmp_path / "model.json")
    out = tmp_path / "rec.json"
    args = ["compare", "--failure-model", str(path), "--groups", "24", "--step-seconds", "30",
            "--allreduce-seconds", "2", "--steps", "20000", "--spare-r", "2", "--rep-r", "", "--micro-batches", "1",
            "--seeds", "2", "--no-elastic", "--no-redistribution", "--no-sensitivity", "-q"]
    text = CliRunner().invoke(main, args + ["--nodes-per-group", "2"])
    assert text.exit_code == 0, text.output
    header = text.output.splitlines()[0]
    assert str(path) in header and "group MTBF 2 days" in header and "2 nodes per group" in header
    CliRunner().invoke(main, args + ["--nodes-per-group", "2", "--json", "-o", str(out)])
    a = json.loads(out.read_text())["metadata"]["recommendation"]["assumptions"]
    f = a["failures"]
    assert (f["kind"], f["path"], f["fingerprint"], f["nodes_per_group"]) == \
        ("failure model", str(path), _sha256(path), 2)
    assert f["node_mtbf_seconds"] == pytest.approx(model.node_mtbf_seconds)
    assert f["group_mtbf_seconds"] == pytest.approx(model.node_mtbf_seconds / 2)
    assert f["model"]["weibull_shape"] == 0.9
    assert f["model"]["repairs"]["median_seconds"] == 6 * 3600.0 and f["model"]["repairs"]["sigma"] == 0.5
    assert a["grid"]["quick"] is False and a["global_batch"] is None
    assert a["parameters"]["steps"] == 20000 and "system_mtbf_seconds" not in a["parameters"]


def test_when_spare_is_not_chosen_the_file_and_the_cli_say_so(tmp_path, trace_file):
    out = tmp_path / "rec.json"
    # at the real rate with a cheap restart, checkpointing alone wins on this trace
    result = CliRunner().invoke(main, ["compare", "--trace", str(trace_file), "--groups", "24", "--semantics", "paper",
                                       "--restart-seconds", "60", "--step-seconds", "30", "--spare-r", "2",
                                       "--rep-r", "", "--micro-batches", "1", "--seeds", "2", "--no-sensitivity",
                                       "-q", "-o", str(out)])
    assert result.exit_code == 0, result.output
    rec = json.loads(out.read_text())["metadata"]["recommendation"]
    assert rec["chosen_strategy"] != "spare" and rec["spare_chosen"] is False
    assert rec["layout_held"] == "the best exact SPARe setting"
    assert "SPARe was NOT chosen" in result.output and "best exact SPARe setting" in result.output


# ------------------------------------------------------------------ the all-reduce
def test_the_paper_line_is_not_extrapolated_past_its_range(small_trace):
    params = compare_parameters("trace-400", 1536, steps=1000)
    with pytest.raises(ParameterError, match="past the range"):
        compare(params, semantics="paper", **dict(FAST, include_ckpt=True))
    ring = ring_allreduce_seconds(1536, 2e9, 5e10, 0.01)
    assert ring == pytest.approx(2 * 1535 / 1536 * 2e9 / 5e10 + 0.01)
    result = CliRunner().invoke(main, ["compare", "--groups", "1536", "--steps", "100", "-q"])
    assert result.exit_code != 0 and "Traceback" not in result.output and "--allreduce-seconds" in result.output


def test_the_header_names_the_all_reduce_source_and_the_sensitivity_line_says_if_it_matters(small_trace,
                                                                                          small_params):
    result = compare(small_params, trace=small_trace, semantics="repair", gradient_bytes=2e9,
                     bandwidth_bytes_per_second=1e9, allreduce_sensitivity=True, **dict(FAST, seeds=1))
    assert result.allreduce["source"] == "ring model"
    assert result.params.allreduce_seconds == pytest.approx(2 * 23 / 24 * 2.0)
    text = result.format_text()
    assert "ring model: 2 (N-1)/N x 2e+09 B / 1e+09 B/s" in text.splitlines()[1]
    assert [run["factor"] for run in result.sensitivity["runs"]] == [0.5, 2.0]
    assert "Sensitivity to the all-reduce" in text
    assert ("the verdict changes" in text) == result.sensitivity["changes"]


# ------------------------------------------------------------------ failures in the field's units
def test_nodes_per_group_2_doubles_the_group_failure_rate_of_a_scaled_trace(small_trace):
    one, _ = scaled_trace_model(small_trace, 24, 48)
    two, text = scaled_trace_model(small_trace, 24, 48, nodes_per_group=2)
    assert two.system_mtbf_seconds == pytest.approx(one.system_mtbf_seconds / 2)
    assert "each group of 2 nodes" in text
    # the groups' failures as the simulation draws them (checkpointing alone: every failure counted, paper semantics)
    counts = [model_events(model, 48, "ckpt", 1, horizon_seconds=120 * 86400.0, seed=5).counts["used"]
              for model in (one, two)]
    ratio, sigma = counts[1] / counts[0], 2.0 * math.sqrt(1 / counts[0] + 1 / counts[1])
    assert abs(ratio - 2.0) < 3 * sigma  # Poisson counts: within three standard errors
    assert per_group_model(one, 1) is one


def test_failures_per_1000_node_days_and_mtbf_give_the_same_run():
    rate = failure_model_from_rates(16, failures_per_1000_node_days=6.5, repair_median_seconds=7200.0)
    mtbf = failure_model_from_rates(16, node_mtbf_seconds=1000.0 / 6.5 * 86400.0, repair_median_seconds=7200.0)
    assert rate.event_mtbf_seconds == mtbf.event_mtbf_seconds
    params = compare_parameters("trace-400", 16, steps=20000, step_seconds=30.0, allreduce_seconds=2.0)
    runs = [compare(params, fault_model=model, semantics="repair", **FAST).strategies for model in (rate, mtbf)]
    assert runs[0] == runs[1]
    # Llama 3 405B: 419 unexpected interruptions in 54 days on 2,048 nodes
    llama, text = node_mtbf_from_rates(job_mttf_seconds=54 * 86400.0 / 419, job_nodes=2048)
    assert llama == pytest.approx(2048 * 54 * 86400.0 / 419) and "3.79 failures per 1,000 node-days" in text
    with pytest.raises(ParameterError):
        node_mtbf_from_rates(failures_per_1000_node_days=6.5, node_mtbf_seconds=1.0)
    with pytest.raises(ParameterError):
        node_mtbf_from_rates(job_mttf_seconds=3600.0)


def test_cli_rates_equal_a_node_mtbf_and_are_one_source(tmp_path):
    args = ["compare", "--groups", "16", "--steps", "20000", "--step-seconds", "30", "--allreduce-seconds", "2",
            "--repair-hours", "2", "--spare-r", "2", "--rep-r", "", "--micro-batches", "1", "--seeds", "2",
            "--no-elastic", "--no-redistribution", "--no-sensitivity", "-q", "--json"]
    runner = CliRunner()
    by_rate = _json(runner.invoke(main, args + ["--failures-per-1000-node-days", "6.5"]))
    by_mtbf = _json(runner.invoke(main, args + ["--node-mtbf-hours", str(1000 / 6.5 * 24)]))
    assert by_rate["semantics"] == "repair"
    for a, b in zip(by_rate["strategies"], by_mtbf["strategies"]):
        assert a["ttt_ratio"] == pytest.approx(b["ttt_ratio"], rel=1e-6)
    both = runner.invoke(main, args + ["--failures-per-1000-node-days", "6.5", "--node-mtbf-hours", "10"])
    assert both.exit_code != 0 and "two failure rates" in both.output


# ------------------------------------------------------------------ redistribution (r = N)
def test_redistribution_load_is_the_counting_bound_never_above_a_stacked_layout(small_trace):
    n, m = 24, 4
    layout = default_layout(n, 3, time_limit=1.0)
    for semantics in ("paper", "repair"):
        spread = trace_events(small_trace, n, "redistribute", n, semantics=semantics, micro_batches=m,
                              placement_seed=1)
        stacked = trace_events(small_trace, n, "spare", 3, semantics=semantics, layout=layout, micro_batches=m,
                               placement_seed=1)
        first_wipe = int(np.argmax(stacked.wipe_outs)) if stacked.wipe_outs.any() else len(stacked.wipe_outs)
        assert first_wipe > 0
        assert not spread.wipe_outs[:first_wipe].any()
        # the same failed sets up to the stacked layout's first wipe-out: never a larger load
        assert np.all(spread.step_costs[:first_wipe] <= stacked.step_costs[:first_wipe] + 1e-12)
        bounds = {-(-m * n // (n - k)) / m for k in range(n)}  # ceil(m N / (N - k)) / m
        assert set(spread.step_costs.tolist()) <= bounds | {1.0}


def test_the_closed_form_equals_the_exact_planner_on_the_full_layout():
    from itertools import combinations

    from spare_opt.layouts.generators import consecutive
    from spare_opt.planning.exact import plan_reorder

    n = 6
    full = consecutive(n, n)  # every group holds every shard type: r = N
    for m in (1, 2, 3):
        for k in range(n):
            for failed in combinations(range(n), k):
                plan = plan_reorder(full, list(failed), micro_batches=m)
                assert plan.masked and plan.load == -(-m * n // (n - k))


def test_the_redistribution_row_is_never_worse_than_a_stacked_rows_step_cost():
    # A sparse trace: the stacked layout never wipes out, so both see the same groups out at every instant (a
    # wipe-out restarts every group, repairs included, which can lower a stacked row's mean step cost).
    doc = synthetic_fault_trace(nodes=24, days=40.0, seed=4, incidents_per_day=0.3, repair_median_days=0.5)
    trace = parse_fault_events(doc, source="<sparse>")
    params = compare_parameters("trace-400", 24, trace=trace, step_seconds=30.0, jitter_sd=0.0)
    result = compare(params, trace=trace, semantics="repair", rep_redundancies=(), spare_redundancies=(6,),
                     micro_batches=(1, 4), seeds=2, period_factors=(1.0,), cycles=3, include_elastic=False,
                     include_ckpt=False)
    for m in (1, 4):
        spread = next(row for row in result.settings if row["strategy"] == "redistribute" and row["micro_batches"] == m)
        stacked = next(row for row in result.settings if row["strategy"] == "spare" and row["micro_batches"] == m)
        assert stacked["restarts"] == 0 and spread["restarts"] == 0
        assert spread["mean_step_cost"] <= stacked["mean_step_cost"] + 1e-9
    text = result.format_text()
    assert "Redistribute r = N" in text and "redistribution (r = N): all 24 shard types" in text


def test_the_restart_rule_restarts_when_a_restart_is_cheaper_than_going_on(small_params):
    free = small_params.__class__(**dict(small_params.to_dict(), restart_seconds=0.0, save_seconds=1e-3))
    assert redistribution_restart_threshold(free, 1, 86400.0) == 1  # a free restart: at the first failure
    dear = small_params.__class__(**dict(small_params.to_dict(), restart_seconds=1e9))
    assert redistribution_restart_threshold(dear, 1, 86400.0) == small_params.groups  # never: every group down
    middle = redistribution_restart_threshold(small_params, 16, 30 * 86400.0)
    assert 1 <= middle <= small_params.groups

"""The verdict's grid, its "best" rule, --quick, progress in work units, --verbose and the recommendation file."""

import json
import math

import pytest
from click.testing import CliRunner

from spare_opt import (
    Layout,
    QUICK_COMPARE,
    best_setting,
    compare,
    compare_parameters,
    layout_fingerprint,
    parse_fault_events,
    recommendation_layout,
    synthetic_fault_trace,
    task_weight,
)
from spare_opt.traces.json_format import write_fault_trace
from spare_opt_cli.main import main

NAN = math.nan


def _row(r, m, ratio, low, high):
    return {"strategy": "spare", "redundancy": r, "micro_batches": m, "ttt_ratio": ratio, "ttt_ci": [low, high]}


def test_best_is_the_smallest_r_then_m_among_means_within_the_least_means_interval():
    table = [_row(3, 1, 1.30, 1.25, 1.35), _row(5, 16, 1.10, 1.05, 1.15), _row(5, 4, 1.11, 1.06, 1.16),
             _row(11, 4, 1.08, 1.04, 1.12), _row(9, 1, 1.20, 1.13, 1.27)]
    assert (best_setting(table)["redundancy"], best_setting(table)["micro_batches"]) == (5, 4)
    # a plain minimum would take r = 11; without overlap the least mean wins
    apart = [_row(5, 4, 1.20, 1.18, 1.22), _row(11, 4, 1.08, 1.07, 1.09)]
    assert best_setting(apart)["redundancy"] == 11
    # a row without an interval (one seed) is the point of its mean
    point = table + [_row(2, 1, 1.12, NAN, NAN), _row(2, 4, 1.125, NAN, NAN)]
    assert (best_setting(point)["redundancy"], best_setting(point)["micro_batches"]) == (2, 1)
    # a wide interval of its own does not make a worse mean the choice (it overlaps the best's)
    wide = [_row(2, 16, 1.147, 1.034, 1.261), _row(5, 16, 1.062, 1.050, 1.075), _row(9, 16, 1.063, 1.048, 1.078)]
    assert best_setting(wide)["redundancy"] == 5
    unfinished = [_row(2, 1, math.inf, NAN, NAN), _row(3, 1, 1.5, 1.4, 1.6)]
    assert best_setting(unfinished)["redundancy"] == 3


@pytest.fixture(scope="module")
def small():
    doc = synthetic_fault_trace(nodes=24, days=40.0, seed=3, incidents_per_day=2.0, repair_median_days=0.5)
    trace = parse_fault_events(doc, source="<small>")
    return trace, compare_parameters("trace-400", 24, trace=trace, step_seconds=30.0)


def test_the_text_shows_every_setting_tried_and_progress_counts_work(small):
    trace, params = small
    calls, finished = [], []
    result = compare(params, trace=trace, rep_redundancies=(2, 3), spare_redundancies=(2, 4), micro_batches=(1, 4),
                     seeds=2, period_factors=(0.7, 1.4), progress=lambda done, total: calls.append((done, total)),
                     on_setting=finished.append)
    text = result.format_text()
    grid = text.split("Settings tried")[1]
    for row in result.settings:
        if row["strategy"] not in ("ckpt", "elastic"):  # one setting each: no grid
            assert f"{row['ttt_ratio']:.3f}" in grid or (not math.isfinite(row["ttt_ratio"]) and "> " in grid)
    for row in result.strategies:  # each strategy's row is its best_setting (the m = 1 row: of m = 1's)
        mine = [s for s in result.settings if s["strategy"] == row["strategy"]
                and (not row.get("paper_row") or s["micro_batches"] == 1)]
        chosen = best_setting(mine)
        assert (row["redundancy"], row["micro_batches"]) == (chosen["redundancy"], chosen["micro_batches"])
    assert grid.count("*") - 1 == sum(row["strategy"] in ("rep", "spare", "redistribute") and not row.get("paper_row")
                                      for row in result.strategies)  # 1: the legend
    # progress: monotone, in work units that weigh each setting's cost, ending at the total
    dones = [done for done, _ in calls]
    assert dones == sorted(dones) and calls[-1][0] == calls[-1][1] and len({t for _, t in calls}) == 1
    assert calls[-1][1] > 2 * len(result.settings) * 2  # not a plain count of tasks
    assert task_weight("spare", 9, 16, 5) > task_weight("spare", 3, 1, 5) > task_weight("ckpt", 1, 1, 5)
    assert sorted((r["strategy"], r["redundancy"], r["micro_batches"]) for r in finished) == \
        sorted((r["strategy"], r["redundancy"], r["micro_batches"]) for r in result.settings)


def test_recommendation_round_trips_and_plan_and_validate_accept_it(small, tmp_path):
    trace, params = small
    path = write_fault_trace(synthetic_fault_trace(nodes=24, days=40.0, seed=3, incidents_per_day=2.0,
                                                   repair_median_days=0.5), tmp_path / "t.json")
    out = tmp_path / "rec.json"
    runner = CliRunner()
    result = runner.invoke(main, ["compare", "--trace", str(path), "--step-seconds", "30", "--quick", "-q",
                                  "--json", "-o", str(out), "--verbose"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {(s["strategy"], s["redundancy"], s["micro_batches"]) for s in doc["settings"]} == \
        {("ckpt", 1, 1), ("elastic", 1, 1)} | {("rep", r, 1) for r in QUICK_COMPARE["rep_redundancies"]} | \
        {("spare", r, m) for r in QUICK_COMPARE["spare_redundancies"] for m in QUICK_COMPARE["micro_batches"]} | \
        {("redistribute", 24, m) for m in QUICK_COMPARE["micro_batches"]}
    assert doc["seeds"] == QUICK_COMPARE["seeds"] and len(doc["settings"][0]["periods"]) == 3
    assert result.stderr.count("done: ") == len(doc["settings"])
    layout = Layout.load(out)
    rec = layout.metadata["recommendation"]
    spare = next(row for row in doc["strategies"] if row["strategy"] == "spare")
    assert rec["fingerprint"] == layout_fingerprint(layout)
    assert layout.redundancy == spare["redundancy"] == rec["spare"]["redundancy"]
    assert layout.metadata["micro_batches"] == spare["micro_batches"]
    assert rec["spare"]["checkpoint_period_seconds"] == spare["checkpoint_period_seconds"]
    assert rec["assumptions"]["parameters"]["groups"] == 24 and rec["verdict"] == doc["strategies"]
    assert runner.invoke(main, ["plan", str(out), "--fail", "0,5"]).exit_code == 0
    assert runner.invoke(main, ["validate", str(out), "--trials", "0"]).exit_code == 0
    again = runner.invoke(main, ["compare", "--trace", str(path), "--quick", "-q", "-o", str(out)])
    assert again.exit_code == 1 and "exists" in again.output  # refused before the work
    none = runner.invoke(main, ["compare", "--trace", str(path), "--spare-r", "", "-o", str(tmp_path / "x.json")])
    assert none.exit_code == 2 and "needs SPARe" in none.output
    # the library: the same layout the SPARe row ran
    again = compare(params, trace=trace, rep_redundancies=(), spare_redundancies=(3,), micro_batches=(1,),
                    seeds=1, period_factors=(1.0,))
    assert layout_fingerprint(recommendation_layout(again)) == layout_fingerprint(again.layouts[3])


def test_layout_records_the_micro_batches(tmp_path):
    out = tmp_path / "l.json"
    result = CliRunner().invoke(main, ["layout", "-N", "40", "-r", "4", "--micro-batches", "8", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert Layout.load(out).metadata["micro_batches"] == 8
    too_many = CliRunner().invoke(main, ["layout", "-N", "40", "-r", "4", "--micro-batches", "10000000",
                                         "-o", str(tmp_path / "m.json")])
    assert too_many.exit_code != 0 and "Traceback" not in too_many.output

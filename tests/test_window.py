"""Observation windows (spare_opt.window_trace, --window): the rules, the fit of a cut log, and the commands.

A real log is an excerpt: cut at a date, it holds repairs that end long after the cut.
Fitted up to its last event, the observation is stretched and the MTBF inflated; with
the window, what is open at its end is right-censored and rates are per window length.
The synthetic logs here have known rates and a known repair median.
"""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from spare_opt import (
    OPEN_AT_START_CLASS,
    compare,
    compare_parameters,
    fit_trace,
    parse_fault_events,
    simulate,
    synthetic_fault_trace,
    window_trace,
)
from spare_opt._core.errors import ParameterError, TraceError
from spare_opt.traces.json_format import write_fault_trace
from spare_opt_cli.main import main


def _ev(node, time, kind):
    return {"node_id": node, "event_time": time, "event_type": kind, "fault_type": {"Class": "GPU"}}


def _cut_at(doc, day):
    """The log as an excerpt by fault start: the faults that start before ``day``, each with its end (even later)."""
    kept, opened = [], set()
    for event in sorted(doc["events"], key=lambda e: e["event_time"]):
        if event["event_type"] == "fault_start" and event["event_time"] < day:
            kept.append(event)
            opened.add(event["node_id"])
        elif event["event_type"] == "fault_end" and event["node_id"] in opened:
            kept.append(event)
            opened.discard(event["node_id"])
    return parse_fault_events(kept, source="<cut>")


def test_the_rules_at_each_end_of_the_window():
    trace = parse_fault_events([_ev("a", 1.0, "fault_start"), _ev("b", 1.5, "fault_start"), _ev("b", 2.5, "fault_end"),
                                _ev("a", 3.0, "fault_end"), _ev("c", 4.0, "fault_start"), _ev("c", 9.0, "fault_end"),
                                _ev("d", 7.0, "fault_start")])
    cut = window_trace(trace, 2.0, 6.0)
    # a and b were down at day 2: taken as down from the window's start; c is open at its end
    assert cut.times_days.tolist() == [0.0, 0.0, 0.5, 1.0, 2.0]
    assert [cut.fault_class[k] for k in range(2)] == [OPEN_AT_START_CLASS] * 2
    assert cut.window == {"start_day": 2.0, "end_day": 6.0, "length_days": 4.0, "open_at_start": 2, "open_at_end": 1,
                          "dropped_before": 2, "dropped_after": 2}
    assert cut.observed_days == 4.0 and trace.observed_days == 9.0
    assert cut.cluster_nodes == trace.cluster_nodes and cut.format == trace.format
    fit = fit_trace(cut, resamples=99)
    assert fit.observation["observation_days"] == 4.0
    assert fit.trace["node_faults"] == 1 and fit.repairs["completed"] == 0 and fit.repairs["open"] == 1
    assert any("open at the window's start taken as already down" in note for note in fit.notes)
    with pytest.raises(ParameterError, match="end after it starts"):
        window_trace(trace, 5.0, 5.0)
    with pytest.raises(TraceError, match="already a window"):
        window_trace(cut, 0.0, 1.0)
    with pytest.raises(ParameterError, match="time origin"):
        window_trace(trace, "2025-01-01", "2025-02-01")
    with pytest.raises(ParameterError, match="window, or start_day"):
        fit_trace(trace, window=(2.0, 6.0), end_day=9.0)


def test_a_log_cut_inside_long_repairs_gives_the_uncut_mtbf_with_its_window():
    doc = synthetic_fault_trace(nodes=200, days=120.0, seed=1, incidents_per_day=3.0, repair_median_days=4.0,
                                repair_sigma=1.0)
    uncut = fit_trace(parse_fault_events(doc), resamples=99).mtbf["system_mtbf_hours"]
    cut = _cut_at(doc, 60.0)
    stretched = fit_trace(cut, resamples=99)
    windowed = fit_trace(cut, resamples=99, window=(0.0, 60.0))
    assert stretched.observation["observation_days"] > 60.0  # up to the last repair's end
    assert not stretched.mtbf["system_mtbf_hours"].low <= uncut.value <= stretched.mtbf["system_mtbf_hours"].high
    est = windowed.mtbf["system_mtbf_hours"]
    assert windowed.observation["observation_days"] == 60.0 and est.low <= uncut.value <= est.high
    assert windowed.trace["open_at_end"] > 0  # repairs running past the cut are right-censored, not dropped


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_censored_repairs_are_fitted_without_bias(seed):
    median_days = 3.0
    doc = synthetic_fault_trace(nodes=150, days=80.0, seed=seed, incidents_per_day=3.0,
                                repair_median_days=median_days, repair_sigma=1.2)
    fit = fit_trace(_cut_at(doc, 25.0), resamples=99, window=(0.0, 25.0))
    median = fit.repairs["median_hours"]
    assert fit.repairs["open"] > 10  # a real share of the repairs is censored
    assert median.low <= median_days * 24 <= median.high
    # dropping the censored repairs instead biases the median low
    cut = window_trace(_cut_at(doc, 25.0), 0.0, 25.0)
    opened, completed = {}, []
    for k in range(cut.n_events):
        node = int(cut.node[k])
        if cut.is_start[k]:
            opened[node] = cut.times_days[k]
        elif node in opened:
            completed.append(cut.times_days[k] - opened.pop(node))
    assert np.median(completed) * 24 < median.value


def test_simulate_and_compare_replay_the_window(tmp_path):
    doc = synthetic_fault_trace(nodes=12, days=30.0, seed=5, incidents_per_day=1.5, repair_median_days=0.5)
    trace = parse_fault_events(doc, source="<t>")
    cut = window_trace(trace, 5.0, 20.0)
    params = compare_parameters("trace-400", 12, trace=trace, step_seconds=30.0, jitter_sd=0.0, window=(5.0, 20.0))
    step = 30.0 + params.allreduce_seconds
    assert params.steps == round(15.0 * 86400 / step)  # one window of fault-free steps
    run = simulate(params, "spare", 3, trace=trace, window=(5.0, 20.0), placement_seed=0, semantics="repair")
    same = simulate(params, "spare", 3, trace=cut, placement_seed=0, semantics="repair")
    assert run == same
    result = compare(params, trace=trace, window=(5.0, 20.0), rep_redundancies=(), spare_redundancies=(3,),
                     micro_batches=(1,), seeds=1, cycles=2, period_factors=(1.0,))
    assert any(note.startswith("window: days 5 to 20") for note in result.notes)
    with pytest.raises(ParameterError, match="give the trace too"):
        simulate(params, "ckpt", window=(0.0, 1.0))
    path = write_fault_trace(doc, tmp_path / "t.json")
    runner = CliRunner()
    fitted = runner.invoke(main, ["fit", str(path), "--window", "5", "20", "--resamples", "99", "--json"])
    assert fitted.exit_code == 0, fitted.output
    assert json.loads(fitted.output)["observation"]["observation_days"] == 15.0
    bad = runner.invoke(main, ["fit", str(path), "--window", "20", "5"])
    assert bad.exit_code != 0 and "Error: the window must end after it starts" in bad.output
    refused = runner.invoke(main, ["simulate", "--window", "0", "1", "--seeds", "1"])
    assert refused.exit_code != 0 and "--window" in refused.output


@pytest.mark.parametrize("window", [(1.0,), (0.0, 1.0, 2.0), 5, "ab", {0: 1, 2: 3}])
def test_a_window_that_is_not_a_pair_is_refused_by_each_function_that_takes_one(window):
    # was: a bare TypeError from unpacking (1,) or 5, and a str or dict unpacked into its characters or keys
    from spare_opt import SpareError, preset_parameters

    trace = parse_fault_events([_ev("a", 1.0, "fault_start"), _ev("a", 3.0, "fault_end")])
    params = preset_parameters("trace-400", 4, steps=10)
    calls = [lambda: fit_trace(trace, window=window, resamples=99),
             lambda: simulate(params, "ckpt", trace=trace, window=window),
             lambda: compare(params, trace=trace, window=window, rep_redundancies=(), spare_redundancies=(),
                             include_elastic=False, seeds=1)]
    for call in calls:
        with pytest.raises(SpareError, match="window must be a pair"):
            call()

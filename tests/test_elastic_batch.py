"""The peers' elastic strategy, micro-batches a global batch can hold, their cost, and the all-reduce warning.

Elastic (TorchFT / FT-HSDP): a step with ``k`` of ``N`` groups out takes a fault-free
step's time and makes ``(N - k) / N`` of its progress; checked against the closed form
on hand-made logs.  The micro-batch overhead is checked against the same run with the
overhead folded into the layer's compute time.
"""

import math
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from spare_opt import (
    SimulationParameters,
    allreduce_extrapolation,
    batch_figures,
    compare,
    compare_parameters,
    micro_batch_capacity,
    parse_fault_events,
    simulate,
    synthetic_fault_trace,
    trace_events,
)
from spare_opt._core.errors import ParameterError
from spare_opt_cli.main import main

DAY = 86400.0


def _fault(node, start, end):
    return [{"node_id": node, "event_time": start, "event_type": "fault_start", "fault_type": {"Class": "GPU"}},
            {"node_id": node, "event_time": end, "event_type": "fault_end", "fault_type": {"Class": "GPU"}}]


def _params(groups, days, **extra):
    step = 2.0  # 1 s of compute and 1 s of all-reduce
    fields = dict(steps=int(days * DAY / step), layer_compute_seconds=1.0, allreduce_seconds=1.0,
                  shrink_seconds=0.0, jitter_sd=0.0, heal_seconds=0.0)
    fields.update(extra)
    return SimulationParameters(groups=groups, **fields)


@pytest.mark.parametrize("groups, faults", [
    (4, [("a", 2.0, 3.0)]),                                  # one group out for a day
    (5, [("a", 1.0, 4.0), ("b", 2.0, 2.5), ("c", 6.0, 6.2)]),  # two out at once for half a day
])
def test_elastic_time_to_train_is_the_closed_form_of_the_samples_rule(groups, faults):
    events = [event for node, start, end in faults for event in _fault(node, start, end)]
    trace = parse_fault_events(sorted(events, key=lambda e: e["event_time"]))
    params = _params(groups, 10.0)
    run = simulate(params, "elastic", trace=trace, semantics="repair", placement_seed=0,
                   checkpoint_period_seconds=1e9)
    # progress = integral of (N - k(t)) / N over the wall time = T0, so W = T0 + integral of k(t) / N
    starts = sorted((s, +1) for _, s, _ in faults)
    ends = sorted((e, -1) for _, _, e in faults)
    edges = sorted(starts + ends)
    down_days, k, last = 0.0, 0, 0.0
    for time, change in edges:
        down_days += k * (time - last)
        k, last = k + change, time
    expected = run.fault_free_seconds + down_days * DAY / groups
    assert run.finished and run.restarts == 0
    assert run.ttt_seconds == pytest.approx(expected, abs=2 * 2.0 * len(faults) * groups)  # a step per event
    # the batch the run trained with: the same integral
    walk = trace_events(trace, groups, "elastic", 1, semantics="repair", heal_seconds=0.0, placement_seed=0)
    fraction, short = batch_figures(walk.kernel_rows(), run.wall_seconds)
    assert fraction == pytest.approx(1.0 - down_days * DAY / groups / run.wall_seconds, rel=1e-9)
    union = sum(max(0.0, e - s) for s, e in _union([(s, e) for _, s, e in faults]))
    assert short == pytest.approx(union * DAY / run.wall_seconds, rel=1e-9)


def _union(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def test_without_failures_elastic_is_fault_free_and_equals_checkpointing():
    trace = parse_fault_events([{"node_id": "a", "event_time": 5.0, "event_type": "fault_end",
                                 "fault_type": {"Class": "GPU"}}])  # an end with no start: no failure
    params = _params(6, 2.0)
    runs = {s: simulate(params, s, 2 if s in ("rep", "spare") else None, trace=trace, semantics="repair",
                        checkpoint_period_seconds=1e9) for s in ("ckpt", "spare", "elastic", "rep")}
    for strategy in ("ckpt", "spare", "elastic"):
        assert runs[strategy].ttt_ratio == 1.0
    assert runs["rep"].ttt_ratio == pytest.approx((2 * 1.0 + 1.0) / 2.0)  # r layers a step
    walk = trace_events(trace, 6, "elastic", 1, semantics="repair")
    assert batch_figures(walk.kernel_rows(), runs["elastic"].wall_seconds) == (1.0, 0.0)


def test_every_group_lost_is_elastic_s_only_restart():
    events = [e for i in range(3) for e in _fault(f"n{i}", 1.0 + 0.1 * i, 3.0)]
    trace = parse_fault_events(sorted(events, key=lambda e: e["event_time"]))
    walk = trace_events(trace, 3, "elastic", 1, semantics="repair", placement_seed=0)
    assert walk.wipe_outs.tolist() == [False, False, True]
    assert walk.step_costs[:2].tolist() == [3 / 2, 3 / 1]
    assert trace_events(trace, 4, "elastic", 1, semantics="repair", placement_seed=0).wipe_outs.sum() == 0


def test_micro_batch_overhead_is_the_layer_compute_plus_m_minus_one_overheads():
    doc = synthetic_fault_trace(nodes=12, days=20.0, seed=5, incidents_per_day=1.5, repair_median_days=0.3)
    trace = parse_fault_events(doc)
    base = compare_parameters("trace-400", 12, trace=trace, step_seconds=30.0, jitter_sd=0.0)
    overhead, m = 0.5, 4
    kwargs = dict(trace=trace, placement_seed=1, micro_batches=m, semantics="repair", checkpoint_period_seconds=3e4)
    with_overhead = simulate(base, "spare", 3, micro_batch_overhead_seconds=overhead, **kwargs)
    folded = simulate(replace_compute(base, 30.0 + (m - 1) * overhead), "spare", 3, **kwargs)
    assert with_overhead.wall_seconds == pytest.approx(folded.wall_seconds, rel=1e-12)
    assert with_overhead.fault_free_seconds == base.fault_free_seconds  # T0: the measured step at m = 1
    plain = simulate(base, "spare", 3, **kwargs)
    assert plain.ttt_seconds < with_overhead.ttt_seconds
    assert simulate(base, "spare", 3, micro_batch_overhead_seconds=0.0, **kwargs) == plain
    # m = 1 pays no overhead: its step is the measured one
    one = dict(kwargs, micro_batches=1)
    assert simulate(base, "spare", 3, micro_batch_overhead_seconds=overhead, **one) == simulate(base, "spare", 3, **one)


def replace_compute(params, seconds):
    from dataclasses import replace

    return replace(params, layer_compute_seconds=seconds)


def test_a_global_batch_bounds_m_and_the_verdict_shows_elastic_with_its_price():
    doc = synthetic_fault_trace(nodes=12, days=20.0, seed=5, incidents_per_day=1.5, repair_median_days=0.3)
    trace = parse_fault_events(doc, source="<t>")
    params = compare_parameters("trace-400", 12, trace=trace, step_seconds=30.0, jitter_sd=0.0)
    result = compare(params, trace=trace, rep_redundancies=(2,), spare_redundancies=(3,), micro_batches=(2, 3, 4, 16),
                     seeds=2, cycles=2, period_factors=(1.0,), global_batch=12 * 3 + 2)
    spare = [row for row in result.settings if row["strategy"] == "spare"]
    assert sorted(row["micro_batches"] for row in spare) == [1, 2, 3]  # m = 1 added, m > 3 left out
    assert any("m = 4, 16 left out" in note for note in result.notes)
    assert [row["strategy"] for row in result.strategies if not row.get("paper_row")] == \
        ["ckpt", "rep", "spare", "redistribute", "elastic"]
    assert result.best("spare")["micro_batches"] <= 3
    elastic = result.best("elastic")
    assert 0.0 < elastic["mean_batch_fraction"] < 1.0 and 0.0 < elastic["short_batch_share"] < 1.0
    # an elastic step takes a fault-free step's time: its price is more steps for the same samples
    assert elastic["price"] == {"kind": "steps for the same samples", "value": elastic["steps_per_sample"],
                                "missing_batch": 1.0 - elastic["mean_batch_fraction"],
                                "short_batch_share": elastic["short_batch_share"]}
    assert result.best("ckpt")["price"]["kind"] == "restarts"
    assert result.best("rep")["price"] == {"kind": "step cost", "value": result.best("rep")["mean_step_cost"]}
    if result.best("spare")["micro_batches"] != 1:
        paper = [row for row in result.strategies if row.get("paper_row")]
        assert len(paper) == 1 and paper[0]["micro_batches"] == 1
    text = result.format_text()
    assert "price" in text and "Elastic+CKPT" in text and "batch -" in text
    line = result.conclusion()
    exact = min((row for row in result.strategies if row["exact"] and not row.get("paper_row")),
                key=lambda row: row["ttt_ratio"])
    assert line.startswith("Best exact: ") and f"TTT/T0 {exact['ttt_ratio']:.3f}" in line.split(". Best overall")[0]
    assert "Best overall: " in line
    if elastic["ttt_ratio"] < exact["ttt_ratio"]:
        assert "samples missing" in line
    with pytest.raises(ParameterError, match="fewer than the N = 12 groups"):
        compare(params, trace=trace, global_batch=11)


def test_micro_batch_capacity_and_simulate_refuse_an_m_the_batch_cannot_hold():
    assert micro_batch_capacity(4096, 600) == 6
    assert micro_batch_capacity(600, 600) == 1
    with pytest.raises(ParameterError, match="fewer than"):
        micro_batch_capacity(599, 600)
    trace = parse_fault_events(_fault("a", 1.0, 2.0))
    params = _params(4, 3.0)
    with pytest.raises(ParameterError, match="holds 2 per group"):
        simulate(params, "spare", 2, trace=trace, micro_batches=3, global_batch=8)
    assert simulate(params, "spare", 2, trace=trace, micro_batches=2, global_batch=8).finished


def test_allreduce_time_warns_when_extrapolated_and_can_be_given():
    assert allreduce_extrapolation(1000) is None and allreduce_extrapolation(24) is None
    note = allreduce_extrapolation(4648)
    assert "46.5 s" in note and "N = 4,648" in note
    params = SimulationParameters(groups=2000, steps=100)
    trace = parse_fault_events(_fault("a", 0.001, 0.002))
    with pytest.warns(UserWarning, match="extrapolated to N = 2,000"):
        simulate(params, "ckpt", trace=trace, checkpoint_period_seconds=1e6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = simulate(params, "ckpt", trace=trace, checkpoint_period_seconds=1e6, allreduce_seconds=3.0)
    assert run.fault_free_seconds == 100 * (params.layer_compute_seconds + 3.0)


def test_cli_compare_elastic_and_batch_options(tmp_path):
    from spare_opt.traces.json_format import write_fault_trace

    path = write_fault_trace(synthetic_fault_trace(nodes=12, days=20.0, seed=5, incidents_per_day=1.5),
                             tmp_path / "t.json")
    args = ["compare", "--trace", str(path), "--rep-r", "", "--spare-r", "3", "--micro-batches", "1,4",
            "--seeds", "1", "--step-seconds", "30", "--global-batch", "36", "--micro-batch-overhead-seconds", "0.2",
            "--allreduce-seconds", "1.5", "-q"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "Elastic+CKPT" in result.output and "Best exact:" in result.output
    assert "m = 4 left out" in result.output and "+ all-reduce 1.5 s" in result.output
    bad = CliRunner().invoke(main, args[:-5] + ["--global-batch", "5"])
    assert bad.exit_code != 0 and "Error: " in bad.output and "Traceback" not in bad.output

"""Input hardening, round 3: what a newcomer's adversarial pass found after issues 9-12.

Same contract as ``tests/test_bad_input_round2.py`` (one ``Error:`` line and a non-zero
exit from the CLI, a :class:`spare_opt.SpareError` from the API, nothing silently
dropped).  Sections: times before day 0 (every trace reader); ``compare`` options that
collide or would do nothing; ``compare`` on fewer groups than traced nodes; bounds
checked before the work (``N m``, cycles); Python warnings leaking from ``fit``.  The
repair replay's text summary (a crash) is pinned in ``tests/test_replay_repair.py``.
"""

import json
import warnings

import pytest

from spare_opt import (
    MAX_CYCLES,
    MAX_MICRO_BATCHES,
    MAX_SPLIT_ENTRIES,
    ParameterError,
    TraceError,
    compare,
    compare_parameters,
    consecutive,
    fit_trace,
    parse_fault_csv,
    parse_fault_events,
    plan_reorder,
    sidon,
)
from test_bad_input_round2 import cli, error_line, ev, trace_doc, write


# ============================================================ times before day 0
@pytest.mark.parametrize("reader", ["infinitehbd", "spare-failure-trace", "csv", "cli"])
def test_event_times_before_day_0_are_refused_by_every_reader(tmp_path, reader):
    events = [ev("a", -5.0), ev("a", 2.0, "fault_end"), ev("b", 1.0)]
    if reader == "infinitehbd":
        with pytest.raises(TraceError, match=r"event 0: time -5 days is before day 0"):
            parse_fault_events(events)
    elif reader == "spare-failure-trace":
        with pytest.raises(TraceError, match="before day 0"):
            parse_fault_events(trace_doc(events))
    elif reader == "csv":
        with pytest.raises(TraceError, match=r"line 2: time -4.16667 days is before day 0"):
            parse_fault_csv("node,start,end\nn1,-100,5\nn2,1,8\n", time_unit="hours")
    else:
        path = write(tmp_path, "neg.csv", "node,start,end\nn1,-100,5\nn2,1,8\nn3,20,30\n")
        line = error_line(cli("compare", "--trace", path, "--time-unit", "hours"), 1)
        assert "before day 0" in line and "neg.csv" in line


def test_day_0_itself_is_still_read():
    trace = parse_fault_events([ev("a", 0.0), ev("a", 2.0, "fault_end")])
    assert trace.span_days == (0.0, 2.0)


# ===================================== compare: options that collide or do nothing
@pytest.fixture
def small_log(tmp_path):
    return write(tmp_path, "log.csv", "node,start,end\nn1,1,5\nn2,3,8\nn3,20,30\n")


@pytest.mark.parametrize("field, option", [
    ("steps", "--steps"), ("restart_seconds", "--restart-seconds"), ("save_seconds", "--save-seconds"),
    ("layer_compute_seconds", "--step-seconds"), ("trace_time_scale", "--time-scale"),
    ("max_wall_factor", "--cycles"),
])
def test_compare_set_of_a_field_with_its_own_option_names_the_option(small_log, field, option):
    result = cli("compare", "--trace", small_log, "--time-unit", "hours", "--set", f"{field}=5")
    assert error_line(result, 2) == f"Error: use {option} instead of --set {field}"


def test_compare_micro_batches_without_spare_settings_is_refused(small_log):
    result = cli("compare", "--trace", small_log, "--time-unit", "hours", "--spare-r", "", "--micro-batches", "4")
    assert "--micro-batches needs SPARe settings" in error_line(result, 2)


# ============================================ compare on fewer groups than nodes
def test_compare_refuses_fewer_groups_than_traced_nodes(small_log):
    trace = parse_fault_csv(small_log.read_text(), time_unit="hours")
    params = compare_parameters(groups=2, trace=trace)
    with pytest.raises(ParameterError, match="N = 2 groups is fewer than the 3 nodes the trace names"):
        compare(params, trace=trace, rep_redundancies=(2,), spare_redundancies=(2,), micro_batches=(1,), seeds=1)
    result = cli("compare", "--trace", small_log, "--time-unit", "hours", "--groups", 2, "--rep-r", "2",
                 "--spare-r", "2", "--micro-batches", "1")
    assert "fewer than the 3 nodes" in error_line(result, 1)


# ===================================================== bounds before the work
def test_compare_checks_n_times_m_before_any_run(small_log):
    trace = parse_fault_csv(small_log.read_text(), time_unit="hours")
    params = compare_parameters(groups=17_000, trace=trace)
    m = MAX_SPLIT_ENTRIES // 17_000 + 1  # within MAX_MICRO_BATCHES, N m beyond the bound
    assert m <= MAX_MICRO_BATCHES
    with pytest.raises(ParameterError, match="choose a smaller m"):
        compare(params, trace=trace, rep_redundancies=(), spare_redundancies=(2,), micro_batches=(m,), seeds=1)


def test_the_split_bound_keeps_the_exact_planner_in_memory():
    layout = consecutive(17_000, 3)
    with pytest.raises(ParameterError, match="about 80 bytes each"):
        plan_reorder(layout, [0], micro_batches=MAX_SPLIT_ENTRIES // 17_000 + 1)
    assert MAX_SPLIT_ENTRIES * 80 < 2 * 1024**3  # the bound's promise: the planner stays under 2 GB


def test_micro_batches_above_the_limit_are_refused_before_any_work(tmp_path):
    layout = sidon(12, 3, seed=0)
    with pytest.raises(ParameterError, match="above the limit of 1,024"):
        plan_reorder(layout, [0], micro_batches=MAX_MICRO_BATCHES + 1)
    assert plan_reorder(layout, [0], micro_batches=MAX_MICRO_BATCHES).load >= MAX_MICRO_BATCHES
    path = tmp_path / "l12.json"
    layout.save(path)
    for command in (["validate", path], ["plan", path, "--fail", "0"]):
        result = cli(*command, "--micro-batches", 100_000)
        assert "above the limit of 1,024" in error_line(result)


def test_cycles_are_bounded(small_log):
    trace = parse_fault_csv(small_log.read_text(), time_unit="hours")
    params = compare_parameters(groups=4, trace=trace)
    with pytest.raises(ParameterError, match="cycles"):
        compare(params, trace=trace, spare_redundancies=(2,), cycles=MAX_CYCLES + 1, seeds=1)
    result = cli("compare", "--trace", small_log, "--time-unit", "hours", "--spare-r", "2", "--cycles", MAX_CYCLES + 1)
    assert "--cycles" in error_line(result, 2)


# ============================================================ warnings from fit
def test_fit_of_a_node_down_for_the_whole_window_warns_nothing(tmp_path):
    trace = parse_fault_events([ev("a", 0.0), ev("a", 2.0, "fault_end")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = fit_trace(trace)
    doc = fit.to_dict()
    assert json.dumps(doc, allow_nan=False)
    path = write(tmp_path, "down.json", [ev("a", 0.0), ev("a", 2.0, "fault_end")])
    result = cli("fit", path)
    assert result.exit_code == 0 and "Warning" not in result.stderr and "RuntimeWarning" not in result.output

"""Input hardening, round 2 (issue 12): eight kinds of bad input, one section each.

Each kind is fixed in every reader it reaches (layouts, failure sets, traces, CSV fault
logs, simulation parameters, CLI options, the Python API); each section pins the kind
over those readers and checks the right value where there is one.  The contract is the
one of ``tests/test_bad_input.py``: the CLI prints one ``Error: ...`` line and exits
non-zero (2 for usage errors), the API raises a :class:`spare_opt.SpareError`
subclass, no command writes ``NaN`` or ``Infinity``.

Sections: 1 integers too long to convert; 2 values that overflow to infinity;
3 duplicated JSON keys; 4 version fields of the wrong type; 5 ignored events that
changed the result; 6 distribution parameters that hung; 7 options that did nothing;
8 self-contradictory files; then the other findings of the issue (intervals outside
the possible range, one parser of written numbers, errors that name what the user
gave, dangling symbolic links) and the CSV fault-log reader of issue 10.
"""

import json
import math
import os
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import spare_opt
from spare_opt import (
    FailureSetError,
    Layout,
    LayoutError,
    LayoutFileError,
    OutputExistsError,
    OutputWriteError,
    ParameterError,
    SpareError,
    TraceError,
    block,
    consecutive,
    normalise_groups,
    parse_fault_csv,
    parse_fault_events,
    preset_parameters,
    read_failure_set,
    read_fault_trace,
    replay_trace,
    simulate,
    synthetic_fault_trace,
    write_fault_trace,
)
from spare_opt._core import validation as check
from spare_opt._core.io import write_atomic
from spare_opt._core.stats import MIN_BOOTSTRAP_RUNS, interval95, weibull_renewals
from spare_opt.simulation.parameters import parse_overrides
from spare_opt_cli.main import main

BIG = "1" * 5000  # an integer beyond Python's 4300-digit conversion limit


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def error_line(result, code=None):
    """The one ``Error:`` line of a clean CLI failure (asserts there is no traceback)."""
    assert result.exit_code != 0, result.output
    if code is not None:
        assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("Warning:")]
    if lines[0].startswith("Usage:"):  # click's usage lines before a usage error
        lines = lines[2:]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert result.stdout == ""
    return lines[0]


def ev(node, day, kind="fault_start"):
    return {"node_id": node, "event_time": day, "event_type": kind, "fault_type": {"Class": "GPU"}}


def strict_json(text):
    """Parse JSON refusing NaN and Infinity (not JSON)."""
    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def l7(tmp_path):
    """The issue's setup: spare-opt layout --groups 7 --redundancy 3 -o l7.json."""
    path = tmp_path / "l7.json"
    assert cli("layout", "--groups", 7, "--redundancy", 3, "-o", path).exit_code == 0
    return path


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def trace_doc(events, **head):
    return {"format": "spare-failure-trace", "version": 1, **head, "events": events}


# ================================================== 1. integers too long to convert
def test_kind1_failure_file_with_a_5000_digit_integer_is_one_line(tmp_path, l7):
    path = write(tmp_path, "F.json", f"[{BIG}]")  # the input: a traceback before
    line = error_line(cli("plan", l7, "--fail-file", path), code=2)
    assert "more than 4300 digits" in line and str(path) in line


@pytest.mark.parametrize("reader, content, error", [
    ("failure set text", BIG, FailureSetError),
    ("layout", '{"format": "spare-layout", "version": 1, "groups": ' + BIG + "}", LayoutFileError),
    ("trace", "[" + json.dumps(ev("a", 1.0))[:-1].replace('"event_time": 1.0', '"event_time": ' + BIG) + "}]",
     TraceError),
    ("csv", f"node,start,end\na,{BIG},\n", TraceError),
])
def test_kind1_every_text_reader_refuses_a_too_long_integer(tmp_path, reader, content, error):
    name = {"csv": "t.csv", "failure set text": "f.txt"}.get(reader, "f.json")
    path = write(tmp_path, name, content)
    read = {"failure set text": read_failure_set, "layout": Layout.load, "trace": read_fault_trace,
            "csv": lambda p: read_fault_trace(p, time_unit="days")}[reader]
    with pytest.raises(error) as info:
        read(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and len(message) < 300
    assert "digit" in message or "too large" in message


def test_kind1_npz_header_with_a_too_long_integer_is_a_layout_file_error(tmp_path):
    path = tmp_path / "l.npz"
    consecutive(5, 2).save(path)
    with zipfile.ZipFile(path) as archive:
        stacks = archive.read("stacks.npy")
    header = np.array('{"format": "spare-layout", "version": 1, "groups": ' + BIG + "}")
    import io
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, header)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("stacks.npy", stacks)
        archive.writestr("header.npy", buffer.getvalue())
    with pytest.raises(LayoutFileError, match="more than 4300 digits"):
        Layout.load(path)


@pytest.mark.parametrize("args", [
    ["plan", "{l7}", "--fail", BIG],
    ["layout", "--groups", BIG, "--redundancy", 3, "-o", "{out}"],
    ["simulate", "--seeds", BIG],
    ["simulate", "--set", f"steps={BIG}"],
    ["replay", "{l7}", "--trace", "{trace}", "--placement-seed", BIG],
])
def test_kind1_cli_options_refuse_a_too_long_integer(tmp_path, l7, args):
    trace = write(tmp_path, "t.json", [ev("a", 1.0)])
    args = [str(a).format(l7=l7, out=tmp_path / "o.json", trace=trace) for a in args]
    line = error_line(cli(*args))
    assert "5000 digits" in line and "too long" in line and len(line) < 300


@pytest.mark.parametrize("call, error", [
    (lambda: consecutive(10**5000, 3), ParameterError),
    (lambda: normalise_groups([10**5000], 7), FailureSetError),
    (lambda: parse_fault_events([ev("a", 10**5000)]), TraceError),
    (lambda: Layout(np.zeros((1, 1), dtype=int), offsets=[10**5000]), LayoutError),
    (lambda: preset_parameters("paper-600k", 200, steps=10**5000), ParameterError),
    (lambda: check.number("x", 10**5000), ParameterError),
    (lambda: spare_opt.guarantees.theory.mu(10**5000, 2), ParameterError),
    (lambda: spare_opt.guarantees.theory.stack_lower_bound(10**5000, 10**5000), ParameterError),
    (lambda: spare_opt.sweep(7, r_min=10**5000, r_max=3, trials=1), ParameterError),
])
def test_kind1_api_messages_never_convert_a_huge_integer(call, error):
    # Formatting such an int into a message used to raise ValueError (the conversion limit).
    with pytest.raises(error) as info:
        call()
    assert "5001-digit integer" in str(info.value)


def test_kind1_int_text_and_parse_int_hold_the_right_values():
    assert check.int_text(10**38) == str(10**38)
    assert check.int_text(-(10**60)) == "a negative 61-digit integer"
    assert check.parse_int("9" * 4300, "x") == int("9" * 4300)  # the limit itself is accepted
    with pytest.raises(ParameterError, match="4301 digits"):
        check.parse_int("9" * 4301, "x")


# ================================================ 2. values that overflow to infinity
def test_kind2_replay_of_a_trace_spanning_1e308_days_is_finite_and_right(tmp_path, l7):
    path = write(tmp_path, "F.json", trace_doc([ev("a", 1.0), ev("b", 1.7e308)], nodes=7))
    result = cli("replay", l7, "--trace", path, "--json")
    assert result.exit_code == 0, result.output
    doc = strict_json(result.stdout)  # used to write Infinity
    # S = 2 from day 1 (first failure, c(1) = 2) to the end: the time-weighted mean is 2.
    assert doc["mean_stack_number"] == 2.0 and doc["max_stack_number"] == 2
    text = cli("replay", l7, "--trace", path).stdout
    assert "time-weighted mean S = 2.0000" in text and "inf" not in text


def test_kind2_replay_mean_keeps_its_value_on_ordinary_traces():
    # The overflow-safe sum is used only when the plain integral overflows.
    layout = consecutive(6, 2)
    events = [ev("a", 1.0), ev("b", 3.0), ev("a", 4.0, "fault_end"), ev("c", 11.0)]
    result = replay_trace(layout, parse_fault_events(events))
    s1 = result.rows[0].stack_number
    s2 = result.rows[1].stack_number
    assert result["mean_stack_number"] == (s1 * 2.0 + s2 * 8.0) / 10.0


def test_kind2_simulate_on_that_trace_names_the_trace_and_the_time_scale(tmp_path):
    path = write(tmp_path, "F.json", trace_doc([ev("a", 1.0), ev("b", 1.7e308)], nodes=7))
    line = error_line(cli("simulate", "--groups", 200, "--seeds", 1, "--trace", path), code=1)
    # It used to name mtbf_seconds, a parameter the user never set.
    assert "mtbf" not in line and "day 1.7e+308" in line and "time scale" in line and str(path) in line
    with pytest.raises(TraceError, match="overflows"):
        spare_opt.trace_seconds(read_fault_trace(path))
    assert spare_opt.trace_seconds(read_fault_trace(path), 1e-300)[1] == 1.7e308 * (86400.0 * 1e-300)
    assert spare_opt.trace_seconds(read_fault_trace(path), 1e-300)[0] == 1.0 * 86400.0 * 1e-300


@pytest.mark.parametrize("text", ["1e999", "-1e999", "inf", "nan", BIG])
def test_kind2_written_numbers_that_overflow_are_refused(text):
    with pytest.raises(ParameterError):
        parse_overrides([f"save_seconds={text}"])
    with pytest.raises(TraceError):
        parse_fault_csv(f"node,start,end\na,{text},\n", time_unit="days")


def test_kind2_underflow_to_zero_is_refused():
    with pytest.raises(ParameterError, match="underflows to 0"):
        parse_overrides(["save_seconds=1e-999"])
    assert parse_overrides(["save_seconds=0.0"]) == {"save_seconds": 0.0}


@pytest.mark.parametrize("reader, content, error", [
    ("layout", '{"format": "spare-layout", "version": 1, "groups": NaN}', LayoutFileError),
    ("trace", '[{"node_id": "a", "event_time": Infinity, "event_type": "fault_start", "fault_type": {"Class": "G"}}]',
     TraceError),
    ("failures", "[1, -Infinity]", FailureSetError),
])
def test_kind2_nan_and_infinity_literals_are_not_json(tmp_path, reader, content, error):
    path = write(tmp_path, "x.json", content)
    read = {"layout": Layout.load, "trace": read_fault_trace, "failures": read_failure_set}[reader]
    with pytest.raises(error, match="is not a JSON number"):
        read(path)


def test_kind2_writers_refuse_nan_and_write_nothing(tmp_path):
    layout = Layout(consecutive(5, 2).stacks, metadata={"x": float("nan")})
    for name in ("l.json", "l.npz"):
        with pytest.raises(LayoutError, match="NaN or infinite"):
            layout.save(tmp_path / name)
        assert not (tmp_path / name).exists()
    doc = synthetic_fault_trace(nodes=5, days=5.0)
    doc["metadata"]["bad"] = float("inf")
    with pytest.raises(TraceError, match="NaN or infinite"):
        write_fault_trace(doc, tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


# ===================================================== 3. duplicated JSON keys
def test_kind3_events_given_twice_is_refused_naming_the_key_and_file(tmp_path, l7):
    text = ('{"format": "spare-failure-trace", "version": 1, "events": [' + json.dumps(ev("a", 1.0))
            + '], "events": []}')  # used to replay as zero events
    path = write(tmp_path, "F.json", text)
    line = error_line(cli("replay", l7, "--trace", path))
    assert "duplicated key 'events'" in line and str(path) in line


def test_kind3_event_type_given_twice_is_refused(tmp_path):
    text = ('[{"node_id": "a", "event_time": 1.0, "event_type": "fault_start", "event_type": "fault_end", '
            '"fault_type": {"Class": "GPU"}}]')  # used to become an end
    with pytest.raises(TraceError, match="duplicated key 'event_type'"):
        read_fault_trace(write(tmp_path, "F.json", text))


@pytest.mark.parametrize("reader, text, error", [
    ("layout", '{"format": "spare-layout", "version": 1, "groups": 5, "groups": 6}', LayoutFileError),
    ("failures", '[1, {"a": 1, "a": 2}]', FailureSetError),
    ("trace", '[{"node_id": "a", "node_id": "b"}]', TraceError),
    ("trace", '{"format": "spare-failure-trace", "version": 1, "metadata": {"k": 1, "k": 2}, "events": []}',
     TraceError),
])
def test_kind3_every_json_reader_refuses_duplicated_keys(tmp_path, reader, text, error):
    read = {"layout": Layout.load, "trace": read_fault_trace, "failures": read_failure_set}[reader]
    with pytest.raises(error, match="duplicated key"):
        read(write(tmp_path, "x.json", text))


def test_kind3_csv_column_given_twice_and_set_field_given_twice(tmp_path):
    with pytest.raises(TraceError, match="line 1: column 'start' is given twice"):
        read_fault_trace(write(tmp_path, "x.csv", "node,start,end,start\n"))
    with pytest.raises(ParameterError, match="'steps' is set twice"):
        parse_overrides(["steps=10", "steps=20"])  # the first used to be dropped
    line = error_line(cli("simulate", "--set", "steps=10", "--set", "steps=20"))
    assert "set twice" in line


# ============================================ 4. version fields of the wrong type
LAYOUT_DOC = {"format": "spare-layout", "version": 1, "groups": 3, "redundancy": 1, "stacks": [[0], [1], [2]]}


@pytest.mark.parametrize("version", [True, 1.0, "1", None, [1], 2])
@pytest.mark.parametrize("reader", ["layout", "trace"])
def test_kind4_every_reader_refuses_a_version_that_is_not_the_integer_1(tmp_path, reader, version):
    doc = dict(LAYOUT_DOC) if reader == "layout" else trace_doc([ev("a", 1.0)])
    doc["version"] = version
    read = Layout.load if reader == "layout" else read_fault_trace
    with pytest.raises((LayoutFileError, TraceError)) as info:
        read(write(tmp_path, "x.json", doc))
    assert "version" in str(info.value) and "expected the integer 1" in str(info.value)


def test_kind4_the_integer_1_is_accepted_by_both(tmp_path):
    assert Layout.load(write(tmp_path, "l.json", LAYOUT_DOC)).groups == 3
    assert read_fault_trace(write(tmp_path, "t.json", trace_doc([ev("a", 1.0)]))).n_events == 1


def test_kind4_other_integer_fields_refuse_booleans(tmp_path):
    with pytest.raises(TraceError, match="'nodes' must be a positive integer"):
        read_fault_trace(write(tmp_path, "t.json", trace_doc([ev("a", 1.0)], nodes=True)))
    doc = {"format": "spare-layout", "version": 1, "groups": 3, "redundancy": 2,
           "offsets": [0, True], "stacks": [[0, 1], [1, 2], [2, 0]]}
    with pytest.raises(LayoutFileError, match="'offsets' must be a list of integers"):
        Layout.load(write(tmp_path, "l.json", doc))


# ========================================= 5. ignored events that changed the result
def test_kind5_a_leading_ignored_end_changes_nothing(tmp_path):
    layout = block(4, 2)  # groups {0, 1} and {2, 3} hold the same two shard types
    plain = [ev("x", 1.0), ev("y", 2.0)]
    with_end = [ev("z", 0.5, "fault_end")] + plain  # the input
    a = replay_trace(layout, parse_fault_events(plain))
    b = replay_trace(layout, parse_fault_events(with_end))
    assert a["wipe_outs"] == b["wipe_outs"] == 1  # x and y land on groups 0 and 1
    assert b["irregular"]["end-without-start"] == 1
    assert [(r.node_id, r.group, r.status) for r in a.rows] == [
        (r.node_id, r.group, r.status) for r in b.rows if r.node_id != "z"]
    trace = parse_fault_events(with_end)
    assert trace.node_ids == ("x", "y", "z")  # nodes numbered by their first effective fault


def test_kind5_the_trace_driven_simulation_sees_the_same_failures():
    params = preset_parameters("paper-600k", 200, steps=50, trace_time_scale=0.001)  # days 1-1.5: 86-130 s
    events = [ev(f"n{i}", 1.0 + i / 10) for i in range(6)]
    noisy = [ev("ghost", 0.5, "fault_end")] + events
    for seed in (None, 3):
        a = spare_opt.trace_failures(parse_fault_events(events), 200, "rep", 2, placement_seed=seed)
        b = spare_opt.trace_failures(parse_fault_events(noisy), 200, "rep", 2, placement_seed=seed)
        assert [x.tolist() for x in a[:3]] == [x.tolist() for x in b[:3]]
    assert simulate(params, "rep", 2, trace=parse_fault_events(noisy)).failures == 6


@st.composite
def trace_and_ghost(draw):
    n = draw(st.integers(3, 7))
    spec = draw(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 12), st.booleans()), min_size=1, max_size=14))
    events = [ev(f"n{node}", day / 2, "fault_start" if start else "fault_end") for node, day, start in spec]
    times = [e["event_time"] for e in events]
    kind = draw(st.sampled_from(["new-end", "old-end-first", "repeated-start"]))
    if kind == "new-end":  # the end of a node that never went down, anywhere in the span and the file
        position = draw(st.integers(0, len(events)))
        noisy = events[:position] + [ev("ghost", draw(st.sampled_from(times)), "fault_end")] + events[position:]
    elif kind == "old-end-first":  # an end of a traced node before anything else: it is up then
        node = draw(st.sampled_from([e["node_id"] for e in events]))
        noisy = [ev(node, min(times), "fault_end")] + events
    else:  # a second start right after a start of the same node: that node is down by then
        starts = [i for i, e in enumerate(events) if e["event_type"] == "fault_start"]
        if not starts:
            return n, events, list(events), draw(st.none() | st.integers(0, 3))
        i = draw(st.sampled_from(starts))
        noisy = events[:i + 1] + [dict(events[i])] + events[i + 1:]
    return n, events, noisy, draw(st.none() | st.integers(0, 3))


@given(trace_and_ghost())
def test_kind5_any_ignored_event_has_no_effect_on_the_replay(case):
    n, events, noisy, seed = case
    layout = consecutive(n, 2)
    a = replay_trace(layout, parse_fault_events(events), placement_seed=seed)
    trace = parse_fault_events(noisy)
    assert int(trace.ignored.sum()) >= int(parse_fault_events(events).ignored.sum()) + (len(noisy) - len(events))
    b = replay_trace(layout, trace, placement_seed=seed)
    for key in ("wipe_outs", "wipe_out_days", "masked", "max_stack_number", "mean_stack_number", "already_out",
                "group_failures", "max_failed_groups"):
        assert a[key] == b[key]
    # Every node that fails keeps its group (nodes whose events are all ignored never fail).
    groups_a = {r.node_id: r.group for r in a.rows if r.kind == "fault_start" and r.status != "irregular"}
    groups_b = {r.node_id: r.group for r in b.rows}
    assert all(groups_b[node] == group for node, group in groups_a.items())


# ================================== 6. distribution parameters that hung or failed
@pytest.mark.parametrize("kwargs, needle", [
    ({"weibull_shape": 0.01}, "weibull_shape must be >= 0.05"),  # used to spin for minutes
    ({"frailty_shape": 1e-5}, "frailty_shape must be >= 0.05"),  # used to be NumPy's bare ValueError
    ({"frailty_shape": 1e7}, "frailty_shape must be <="),
    ({"weibull_shape": 1e-3}, "weibull_shape must be >= 0.05"),
    ({"days": 1e308}, "incidents expected"),
    ({"incidents_per_day": 1e12}, "incidents expected"),
    ({"burst_mean": 51.0}, "burst_mean must be <= 50"),
    ({"burst_mean": 1e19}, "burst_mean must be <="),
    ({"repair_sigma": 100.0}, "float range"),
    ({"repair_median_days": 1e305}, "float range"),
    ({"nodes": 10**7}, "nodes must be <="),
    ({"nodes": 10**6, "days": 10**5, "incidents_per_day": 10.0}, "incidents"),
])
def test_kind6_synthetic_trace_refuses_unsound_parameters_with_parameter_error(kwargs, needle):
    arguments = {"nodes": 50, "days": 30.0, **kwargs}
    with pytest.raises(ParameterError, match=needle):
        synthetic_fault_trace(**arguments)


@pytest.mark.parametrize("kwargs", [{"weibull_shape": 0.05}, {"frailty_shape": 0.05}, {"frailty_shape": 1e6},
                                    {"burst_mean": 50.0, "burst_probability": 1.0}, {"repair_sigma": 0.0}])
def test_kind6_the_edges_of_the_sound_ranges_still_sample(kwargs):
    doc = synthetic_fault_trace(nodes=50, days=30.0, **kwargs)
    trace = parse_fault_events(doc)
    assert trace.irregular == () and trace.n_nodes <= 50 and np.all(np.isfinite(trace.times_days))


@pytest.mark.parametrize("shape, horizon", [(0.3, 50.0), (0.78, 200.0), (2.0, 100.0), (0.1, 5.0)])
def test_kind6_weibull_renewal_count_brackets_the_sampling_loop(shape, horizon):
    # Wald and Lorden: T / E[min(X, T)] <= E[N(T) + 1] <= 2 T / E[min(X, T)].
    rng = np.random.default_rng(0)
    scale = 1.0 / math.gamma(1.0 + 1.0 / shape)
    counts = []
    for _ in range(300):
        t, draws = 0.0, 0
        while t <= horizon:
            t += scale * rng.weibull(shape)
            draws += 1
        counts.append(draws)
    estimate = weibull_renewals(horizon, 1.0, shape)
    assert 0.9 * estimate <= np.mean(counts) <= 2.0 * estimate * 1.1


def test_kind6_simulation_budget_counts_renewals_not_the_mean():
    # Group clocks with the mean-based budget accepted shape 0.01 and then spun.
    with pytest.raises(ParameterError, match="weibull_shape"):
        simulate(preset_parameters("paper-600k", 200, steps=200, weibull_shape=0.01), "spare", 9)


def test_kind6_the_event_loop_has_a_bound(monkeypatch):
    from spare_opt.simulation import _runs

    # Failures that bunch at every restart and no restart time: the run never advances.
    params = preset_parameters("paper-600k", 200, steps=200, weibull_shape=0.05, restart_seconds=0.0, jitter_sd=0.0)
    monkeypatch.setattr(_runs, "MAX_RUN_EPOCHS", 64)
    with pytest.raises(ParameterError, match="restarts before finishing"):
        simulate(params, "spare", 9)
    monkeypatch.setattr(_runs, "MAX_RUN_FAILURES", 500)
    with pytest.raises(ParameterError, match="failures or"):
        simulate(params, "ckpt")


# ============================================== 7. options that did nothing
@pytest.mark.parametrize("args, needle", [
    (["--time-scale", "0.5"], "--time-scale applies to --trace runs only"),
    (["--time-scale", "0"], "--time-scale"),  # the input; 0 is out of range as well
    (["--placement-seed", "3"], "--placement-seed applies to --trace runs only"),
    (["--time-unit", "hours"], "--time-unit applies to --trace runs only"),
    (["--format", "csv"], "--format applies to --trace runs only"),
    (["--set", "trace_time_scale=0.5"], "--set trace_time_scale applies to --trace runs only"),
    (["--strategy", "ckpt", "--layout", "{l7}"], "--layout is a SPARe layout"),
    (["--strategy", "ckpt", "-r", "3"], "--redundancy does nothing with --strategy ckpt"),
    (["--strategy", "rep", "--set", "patch_layers=2"], "patch_layers is a cost of SPARe"),
    (["--trace", "{trace}", "--set", "weibull_shape=0.5"], "does nothing with --trace"),
    (["--trace", "{trace}", "--set", "trace_time_scale=2"], "use --time-scale"),
])
def test_kind7_simulate_refuses_options_that_would_do_nothing(tmp_path, l7, args, needle):
    trace = write(tmp_path, "t.json", [ev("a", 1.0)])
    args = [a.format(l7=l7, trace=trace) for a in args]
    assert needle in error_line(cli("simulate", "--seeds", 1, *args), code=2)


def test_kind7_api_refuses_arguments_the_run_would_ignore():
    params = preset_parameters("paper-600k", 200, steps=50)
    trace = parse_fault_events([ev("a", 1.0)])
    with pytest.raises(ParameterError, match="placement_seed"):
        simulate(params, "spare", 9, placement_seed=1)
    # What a loop over every strategy passes: the run is the one asked for, with a warning.
    with pytest.warns(UserWarning, match="layout is ignored"):
        assert simulate(params, "rep", 3, layout=consecutive(200, 3)) == simulate(params, "rep", 3)
    with pytest.warns(UserWarning, match="redundancy 3 is ignored"):
        assert simulate(params, "ckpt", 3) == simulate(params, "ckpt")
    with pytest.raises(ParameterError, match="trace_time_scale"):
        simulate(preset_parameters("paper-600k", 200, steps=50, trace_time_scale=0.5), "ckpt")
    with pytest.raises(ParameterError, match="trace_time_scale"):
        spare_opt.tune(preset_parameters("paper-600k", 200, steps=50, trace_time_scale=0.5), seeds=1)
    assert simulate(params, "ckpt", 1, trace=trace).strategy == "ckpt"  # r = 1 is what ckpt runs
    with pytest.raises(ParameterError, match="time_unit applies to CSV"):
        read_fault_trace(__file__.replace(".py", ".json"), time_unit="hours")


def test_kind7_the_redundancy_of_a_given_layout_is_used(tmp_path, l7):
    layout = tmp_path / "l200.json"
    consecutive(200, 4).save(layout)
    result = cli("simulate", "--seeds", 1, "--set", "steps=20", "--layout", layout, "--json")
    assert result.exit_code == 0, result.output
    assert strict_json(result.stdout)["redundancy"] == 4  # it used to default to r* and refuse the layout


def test_kind7_harmless_options_warn_on_stderr(tmp_path, l7, monkeypatch):
    out = tmp_path / "c.json"
    result = cli("layout", "--groups", 8, "--redundancy", 2, "--method", "consecutive", "--seed", 3,
                 "--time-limit", 1, "-o", out)
    assert result.exit_code == 0
    assert "Warning: --seed is ignored" in result.stderr and "Warning: --time-limit is ignored" in result.stderr
    result = cli("validate", l7, "--trials", 0, "--force", "--workers", 2)
    assert result.exit_code == 0
    assert "Warning: --force is ignored" in result.stderr and "Warning: --workers is ignored" in result.stderr
    result = cli("sweep", "--groups", 8, "--r-min", 2, "--r-max", 2, "--methods", "consecutive", "--trials", 3,
                 "--force", "--time-limit", 1, "--json")
    assert result.exit_code == 0 and strict_json(result.stdout)
    assert "Warning: --force is ignored" in result.stderr and "Warning: --time-limit is ignored" in result.stderr
    trace = write(tmp_path, "t.json", [ev("a", 1.0)])
    result = cli("replay", l7, "--trace", trace, "--rows", "--json")
    assert result.exit_code == 0 and strict_json(result.stdout)["rows"]
    assert "Warning: --rows is ignored" in result.stderr
    import spare_opt_cli.tune as tune_cli

    def stop(*args, **kwargs):
        raise SpareError("stopped before the work")
    monkeypatch.setattr(tune_cli, "tune_preset", stop)
    result = cli("tune", "--force")
    assert "Warning: --force is ignored" in result.stderr and "stopped before the work" in result.stderr
    assert "does nothing in tune" in error_line(cli("tune", "--set", "trace_time_scale=2"), code=2)


def test_kind7_demo_refuses_trace_options_with_the_generated_sequence(tmp_path):
    line = error_line(cli("demo", "--out", tmp_path / "d", "--generated", "--time-unit", "hours"), code=2)
    assert "--generated reads none" in line


# ============================================== 8. self-contradictory files
def test_kind8_nodes_fewer_than_the_distinct_node_ids_is_refused(tmp_path, l7):
    events = [ev(f"n{i}", 1.0 + i) for i in range(6)]
    path = write(tmp_path, "F.json", trace_doc(events, nodes=2))
    line = error_line(cli("replay", l7, "--trace", path))
    assert "the cluster has 2 nodes" in line and "6 distinct nodes" in line
    assert read_fault_trace(write(tmp_path, "ok.json", trace_doc(events, nodes=6))).cluster_nodes == 6
    assert read_fault_trace(write(tmp_path, "big.json", trace_doc(events, nodes=400))).n_nodes == 6


@pytest.mark.parametrize("text, unit, needle", [
    ("node,start,end\na,5,3\n", "days", "line 2: end 3 is before start 5"),
    ("node,start,end\na,2024-01-02,2024-01-01T12:00\n", None, "line 2: end 2024-01-01T12:00 is before start"),
    ("node,start,end,domain\na,1,2,r1\nb,1,2,r2\na,3,4,r2\n", "days",
     "line 4: node a is in domain r2, but line 2 puts it in r1"),
    ("node,start,end\na,2024-01-01,\nb,3,\n", None, "line 3: start is a number, but line 2 uses ISO-8601 timestamps"),
    ("node,start,end\na,2024-01-01T00:00Z,2024-01-02T00:00\n", None, "line 2: end has no UTC offset"),
])
def test_kind8_contradictory_csv_rows_are_refused(tmp_path, text, unit, needle):
    with pytest.raises(TraceError) as info:
        read_fault_trace(write(tmp_path, "x.csv", text), time_unit=unit)
    assert needle in str(info.value) and "x.csv" in str(info.value)


# ====================================================== also found in the issue
def test_intervals_of_two_seeds_stay_within_the_possible_range():
    from spare_opt.simulation.time_to_train import simulate_seeds, summarise

    params = preset_parameters("paper-600k", 200, steps=300)
    summary = summarise(simulate_seeds(params, "spare", 3, seeds=2))
    bounds = {"availability": (0.0, 1.0), "restarts": (0.0, math.inf), "masked_failures": (0.0, math.inf),
              "ttt_ratio": (0.0, math.inf), "mean_stack_number": (1.0, 3.0)}
    for key, (low, high) in bounds.items():
        stat = summary[key]
        if stat["ci_note"] is None:
            assert low <= stat["ci95"][0] <= stat["mean"] <= stat["ci95"][1] <= high
        else:
            assert math.isnan(stat["ci95"][0]) and "too few" in stat["ci_note"]


@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=30), st.integers(0, 1))
def test_interval95_never_leaves_the_bounds(values, pin):
    values = np.array(values)
    if pin:  # values at the bound, the case that left it
        values[: len(values) // 2] = 1.0
    result = interval95(values, lower=0.0, upper=1.0)
    if result.method is None:
        assert len(values) < MIN_BOOTSTRAP_RUNS and result.note
    else:
        assert 0.0 <= result.low <= result.high <= 1.0


def test_interval95_keeps_the_student_t_interval_inside_the_bounds():
    from scipy import stats

    values = np.array([2.0, 2.5, 3.0, 2.2])
    result = interval95(values, lower=0.0)
    half = stats.t.ppf(0.975, 3) * values.std(ddof=1) / 2.0
    assert (result.method, result.low, result.high) == ("t", values.mean() - half, values.mean() + half)
    assert interval95([0.0] * 11 + [5.0], lower=0.0).method == "bootstrap"
    assert interval95([3.0]).note == "no interval: one run (seed) gives none"


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 10, 31, 100, 1000])
def test_interval95_t_interval_is_scipy_stats_students_to_the_last_bit(n):
    # interval95 takes the quantile from scipy.special.stdtrit (not importing scipy.stats)
    from scipy import stats

    values = np.random.default_rng(n).normal(5.0, 1.0, n)
    result = interval95(values)
    half = float(stats.t.ppf(0.975, n - 1)) * float(values.std(ddof=1)) / math.sqrt(n)
    assert (result.method, result.low, result.high) == ("t", values.mean() - half, values.mean() + half)


def test_simulate_and_tune_text_say_why_there_is_no_interval():
    from spare_opt_cli.tune import format_table

    result = cli("simulate", "--seeds", 1, "--set", "steps=50")
    assert result.exit_code == 0 and "nan" not in result.stdout and "one run (seed) gives none" in result.stdout
    params = preset_parameters("paper-600k", 200, steps=40)
    tuned = spare_opt.tune(params, seeds=1, rep_redundancies=[2], spare_redundancies=[3], period_factors=[1.0])
    text = format_table([tuned], "paper-600k")
    assert "nan" not in text and "one run (seed) gives none" in text


@pytest.mark.parametrize("args", [
    ["layout", "--groups", "1_0", "--redundancy", 2, "-o", "{out}"],
    ["layout", "--groups", "\u0661\u0660", "--redundancy", 2, "-o", "{out}"],  # Arabic-Indic 10
    ["simulate", "--seeds", "1_0"],
    ["simulate", "--set", "steps=1_000", "--seeds", 1],  # accepted before, while --fail refused it
    ["simulate", "--checkpoint-period-seconds", "1_0"],
    ["validate", "{l7}", "--trials", "\uff11"],  # fullwidth 1
    ["sweep", "--groups", "12", "--r-min", "2_0"],
    ["tune", "--seeds", "1_0"],
    ["replay", "{l7}", "--trace", "{l7}", "--placement-seed", "1_0"],
    ["plan", "{l7}", "--fail", "1_0"],
    ["fit", "{l7}", "--nodes", "1_0"],
    ["fit", "{l7}", "--start-day", "nan"],
])
def test_one_integer_parser_for_every_option(tmp_path, l7, args):
    args = [str(a).format(l7=l7, out=tmp_path / "o.json") for a in args]
    line = error_line(cli(*args), code=1 if "--set" in args else 2)  # --set is read by the library
    assert "is not an integer" in line or "is not a finite decimal number" in line


def test_write_atomic_follows_a_dangling_link_and_keeps_it(tmp_path):
    link = tmp_path / "out.json"
    os.symlink("target.json", link)
    write_atomic(link, "one")  # nothing exists behind the link: no force needed
    assert link.is_symlink() and (tmp_path / "target.json").read_text() == "one"
    with pytest.raises(OutputExistsError):
        write_atomic(link, "two")
    write_atomic(link, "three", force=True)
    assert link.is_symlink() and (tmp_path / "target.json").read_text() == "three"
    os.symlink("missing/x.json", tmp_path / "far.json")
    with pytest.raises(OutputWriteError, match="does not exist"):
        write_atomic(tmp_path / "far.json", "x", force=True)
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    with pytest.raises(OutputWriteError, match="loop of symbolic links"):
        write_atomic(tmp_path / "a", "x", force=True)


# ========================================================= the CSV fault-log reader
EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "instances", "small", "fault-log-N12.csv")


def test_csv_example_reads_with_domains_kinds_and_an_irregular_row():
    trace = read_fault_trace(EXAMPLE)
    assert trace.format == "csv" and trace.metadata["time_origin"] == "2024-03-01T08:00:00+00:00"
    assert trace.n_starts == 9 and trace.n_ends == 8 and trace.open_at_end == 1
    assert trace.node_ids == ("gpu-node-03", "gpu-node-07", "gpu-node-08", "gpu-node-11", "gpu-node-01",
                              "gpu-node-05")
    assert trace.node_domains == ("rack-1", "rack-2", "rack-2", "rack-3", "rack-1", None)
    assert trace.irregular_counts() == {"start-while-down": 1, "end-without-start": 0, "out-of-order": 0}
    assert int(trace.ignored.sum()) == 2  # the overlapping row: its start and its end
    assert "line 6" in trace.irregular[0].message
    assert set(trace.fault_class) == {"GPU", "NIC", "Fan", "ECC", "PSU", "unspecified"}
    assert trace.times_days[0] == 0.0 and trace.span_days[1] == pytest.approx(6 + 1.5 / 24)


def test_csv_example_replays_from_the_cli_in_every_command(tmp_path):
    layout = os.path.join(os.path.dirname(EXAMPLE), "layout-N12-r3-sidon.json")
    result = cli("replay", layout, "--trace", EXAMPLE, "--json")
    assert result.exit_code == 0, result.output
    assert strict_json(result.stdout)["trace_format"] == "csv"
    result = cli("simulate", "--groups", 200, "--seeds", 1, "--set", "steps=20", "--trace", EXAMPLE, "--json")
    assert result.exit_code == 0, result.output
    assert strict_json(result.stdout)["trace"]["fault_starts"] == 9
    result = cli("fit", EXAMPLE, "--nodes", 12, "--resamples", 99, "--force", "--json")
    assert result.exit_code == 0, result.output
    assert strict_json(result.stdout) and "Warning: --force is ignored" in result.stderr


@pytest.mark.parametrize("unit, factor", [("seconds", 86400.0), ("minutes", 1440.0), ("hours", 24.0), ("days", 1.0)])
def test_csv_numeric_times_take_their_unit(tmp_path, unit, factor):
    text = f"node,start,end\na,{2 * factor},{3.5 * factor}\nb,{4 * factor},\n"
    trace = read_fault_trace(write(tmp_path, "t.csv", text), time_unit=unit)
    assert trace.times_days.tolist() == pytest.approx([2.0, 3.5, 4.0])
    assert trace.metadata == {"time_unit": unit}


def test_csv_format_is_chosen_by_extension_or_option(tmp_path):
    text = "node,start,end\na,1,2\n"
    assert read_fault_trace(write(tmp_path, "t.CSV", text), time_unit="days").format == "csv"
    assert read_fault_trace(write(tmp_path, "t.log", text), format="csv", time_unit="days").format == "csv"
    with pytest.raises(TraceError, match="not valid JSON"):
        read_fault_trace(write(tmp_path, "t.txt", text))
    with pytest.raises(TraceError, match="unknown column"):
        read_fault_trace(write(tmp_path, "t.csv", json.dumps([ev("a", 1.0)])))
    assert read_fault_trace(write(tmp_path, "t2.csv", json.dumps([ev("a", 1.0)])), format="json").n_events == 1


@pytest.mark.parametrize("text, needle", [
    ("", "empty file"),
    ("node,start\n", "line 1: the header has no column end"),
    ("node,start,end,comment\n", "line 1: unknown column 'comment'"),
    ("node,start,end\na,1\n", "line 2: expected 3 fields"),
    ("node,start,end\n,1,2\n", "line 2: empty node"),
    ("node,start,end\na,,2\n", "line 2: empty start"),
    ("node,start,end\na,yesterday,\n", "line 2: start 'yesterday' is neither an ISO-8601 timestamp nor"),
    ("node,start,end\na,2024-02-30,\n", "line 2: start '2024-02-30' is not a valid timestamp"),
    ("node,start,end\na,1,2\n", "times are numbers; give their unit"),
    ('node,start,end\na,"1,\n', "not a valid CSV row"),
    ("node,start,end\n\na,2024-01-01,\nb,1_0,\n", "line 4: start '1_0' is neither"),
])
def test_csv_bad_row_is_one_line_naming_file_line_and_problem(tmp_path, text, needle):
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(TraceError) as info:
        read_fault_trace(path)
    message = str(info.value)
    assert needle in message and str(path) in message and "\n" not in message
    assert needle in error_line(cli("replay", os.path.join(os.path.dirname(EXAMPLE), "layout-N12-r3-sidon.json"),
                                    "--trace", path), code=1)


def test_csv_timestamps_with_time_unit_are_refused():
    with pytest.raises(TraceError, match="would do nothing"):
        parse_fault_csv("node,start,end\na,2024-01-01T00:00:00Z,\n", time_unit="hours")


def reference_csv(rows):
    """The documented CSV rules written out with dicts: the ignored rows and each node's down time.

    Rows are (node, start, end or None).  In time order, at one instant the end of a
    fault of positive length first, then starts, then the end of a zero-length fault;
    a row whose start finds its node down is ignored whole.
    """
    events = []
    for i, (node, start, end) in enumerate(rows):
        events.append((start, 1, i, "start"))
        if end is not None:
            events.append((end, 2 if end == start else 0, i, "end"))
    events.sort()
    down_by = {}
    ignored_rows = set()
    for time, _, i, kind in events:
        node = rows[i][0]
        if i in ignored_rows:
            continue
        if kind == "start":
            if node in down_by:
                ignored_rows.add(i)
            else:
                down_by[node] = i
        else:
            assert down_by.get(node) == i  # an effective row's end closes that row
            del down_by[node]
    return ignored_rows, len(down_by)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10), st.none() | st.integers(0, 6)), max_size=15))
def test_csv_rows_match_a_reference_of_the_documented_rules(spec):
    rows = [(f"n{node}", start, None if length is None else start + length) for node, start, length in spec]
    text = "node,start,end\n" + "".join(f"{n},{s},{'' if e is None else e}\n" for n, s, e in rows)
    trace = parse_fault_csv(text, time_unit="days")
    ignored_rows, open_at_end = reference_csv(rows)
    assert trace.irregular_counts()["start-while-down"] == len(ignored_rows)
    assert trace.irregular_counts()["end-without-start"] == 0
    assert int(trace.ignored.sum()) == sum(1 + (rows[i][2] is not None) for i in ignored_rows)
    assert trace.open_at_end == open_at_end
    assert np.all(np.diff(trace.times_days) >= 0)

"""Regression tests of the defects found by adversarial bad-input testing.

Each test is named after the defect it pins: the input that used to give a Python
traceback, a bare built-in exception, invalid JSON or a silent wrong answer.  The
contract: the CLI prints one ``Error: ...`` line on stderr (click's usage lines may
come first for usage errors) and exits non-zero; the API raises a specific
:class:`spare_opt.SpareError` subclass.
"""

import json
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
    ParameterError,
    ParameterTypeError,
    SpareError,
    TraceError,
    consecutive,
    plan_reorder,
    read_fault_trace,
    replay_trace,
)
from spare_opt._core.io import write_atomic
from spare_opt.demo import run_demo
from spare_opt._core.errors import OutputWriteError
from spare_opt.layouts.generators import MAX_LAYOUT_ENTRIES, generate
from spare_opt.planning.exact import least_stack_number
from spare_opt.planning.failure_sets import normalise_groups
from spare_opt.simulation.replay import SHOWN_IRREGULAR
from spare_opt.traces.json_format import parse_fault_events, write_fault_trace
from spare_opt.traces.synthetic import synthetic_fault_trace
from spare_opt_cli.main import main

DEEP_JSON = "[" * 100_000 + "]" * 100_000


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def error_line(result, code=None):
    """The one ``Error:`` line of a clean CLI failure (asserts there is no traceback)."""
    assert result.exit_code != 0, result.output
    if code is not None:
        assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if lines[0].startswith("Usage:"):  # click's usage lines before a usage error
        lines = lines[2:]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert result.stdout == ""
    return lines[0]


def event(node="n0", time=1.0, kind="fault_start"):
    return {"node_id": node, "event_time": time, "event_type": kind, "fault_type": {"Class": "GPU"}}


@pytest.fixture
def layout_file(tmp_path):
    path = tmp_path / "layout.json"
    consecutive(10, 3).save(path)
    return path


# ------------------------------------------------------------- layout files
def test_deeply_nested_json_layout_is_a_layout_file_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(DEEP_JSON)
    with pytest.raises(LayoutFileError, match="nested too deeply"):
        Layout.load(path)
    assert "nested too deeply" in error_line(cli("plan", path), code=1)


def test_npz_header_that_is_not_an_object_is_a_layout_file_error(tmp_path):
    path = tmp_path / "header-list.npz"
    np.savez(path, stacks=consecutive(5, 2).stacks, header=np.array("[1, 2]"))
    with pytest.raises(LayoutFileError, match="'header' must be a JSON object"):
        Layout.load(path)


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"\x93NUMPY" + b"\x00" * 64, "single .npy array"),
        (b"\x00\x01garbage bytes" * 10, "not a NumPy .npz zip archive"),
    ],
)
def test_npz_that_is_not_an_archive_is_refused_without_pickle_advice(tmp_path, content, needle):
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    with pytest.raises(LayoutFileError, match=needle) as info:
        Layout.load(path)
    assert "pickle" not in str(info.value)


def test_real_npy_file_named_npz_is_a_layout_file_error(tmp_path):
    path = tmp_path / "array.npz"
    with open(path, "wb") as handle:
        np.save(handle, np.zeros(3))
    with pytest.raises(LayoutFileError, match="single .npy array"):
        Layout.load(path)


def test_npz_members_not_in_npy_format_are_a_layout_file_error(tmp_path):
    path = tmp_path / "members.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("stacks.npy", b"garbage")
        archive.writestr("header.npy", b"garbage")
    with pytest.raises(LayoutFileError, match="'header' is not one JSON string"):
        Layout.load(path)


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"version": 1.0}, "version 1.0 is not supported"),
        ({"version": True}, "version True is not supported"),
        ({"groups": "10"}, "'groups' must be an integer"),
        ({"method": None}, "'method' must be a string"),
        ({"offsets": [0, 1, 12]}, "offset 12 is outside"),
    ],
)
def test_layout_document_with_mistyped_header_is_refused(layout_file, change, needle):
    doc = json.loads(layout_file.read_text())
    doc.update(change)
    with pytest.raises(SpareError, match=needle):
        Layout.from_dict(doc)


@pytest.mark.parametrize("path", [None, 5, "", "   ", "a\0b"])
def test_layout_load_of_a_non_path_is_a_layout_file_error(path):
    with pytest.raises(LayoutFileError):
        Layout.load(path)


# ------------------------------------------------------------ Layout() args
@pytest.mark.parametrize(
    "stacks",
    [
        [["0", "1"], ["1", "0"]],  # used to be a bare TypeError from numpy
        [[True, False], [False, True]],  # used to be accepted as 1 and 0
        [[0j, 1], [1, 0]],  # used to be cast with a ComplexWarning
    ],
)
def test_layout_of_non_integer_dtype_is_a_layout_error(stacks):
    with pytest.raises(LayoutError, match="integer shard types"):
        Layout(stacks)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"offsets": ["a", "b"]}, "must be integers"),
        ({"offsets": 5}, "sequence of integers"),
        ({"offsets": [0, 1.5]}, "must be integers"),  # used to be truncated to 1
        ({"offsets": [0, -1]}, "outside"),
        ({"metadata": [1, 2]}, "metadata must be a dict"),
        ({"metadata": "abc"}, "metadata must be a dict"),
    ],
)
def test_layout_with_bad_offsets_or_metadata_is_a_layout_error(kwargs, needle):
    with pytest.raises(LayoutError, match=needle):
        Layout([[0, 1], [1, 0]], **kwargs)


def test_layout_with_numpy_offsets_still_works():
    layout = Layout([[0, 1], [1, 0]], offsets=np.array([0, 1]))
    assert layout.offsets == (0, 1)


# ------------------------------------------------------------- layout save
def test_save_to_a_folder_is_a_layout_file_error_even_with_force(tmp_path):
    layout = consecutive(4, 2)
    for force in (False, True):  # with force it used to be a bare OSError (EBUSY / EISDIR)
        with pytest.raises(LayoutFileError, match="it is a folder"):
            layout.save(tmp_path, force=force)


@pytest.mark.parametrize("path", [None, ""])
def test_save_to_a_non_path_is_a_layout_file_error(path):
    with pytest.raises(LayoutFileError):
        consecutive(4, 2).save(path, force=True)


def test_write_atomic_errors_are_spare_errors_and_os_errors(tmp_path):
    with pytest.raises(OutputWriteError, match="folder .* does not exist") as info:
        write_atomic(tmp_path / "missing" / "x.txt", "data")
    assert isinstance(info.value, OSError) and isinstance(info.value, SpareError)
    (tmp_path / "file").write_text("keep")
    with pytest.raises(OutputWriteError, match="is not a folder"):
        write_atomic(tmp_path / "file" / "x.txt", "data")
    with pytest.raises(OutputExistsError):
        write_atomic(tmp_path / "file", "data")
    assert (tmp_path / "file").read_text() == "keep"


def test_layout_output_in_a_missing_folder_is_refused_before_the_solve(tmp_path):
    # A 10 s CP-SAT solve used to run before the missing folder was noticed.
    result = cli("layout", "-N", 600, "-r", 20, "-o", tmp_path / "no" / "l.json")
    assert "folder" in error_line(result, code=1) and "does not exist" in result.stderr
    assert "Error: " in error_line(cli("layout", "-N", 10, "-r", 3, "-o", ""), code=1)


def test_layout_output_existing_file_is_untouched_without_force(tmp_path):
    path = tmp_path / "l.json"
    path.write_text("keep me")
    assert "--force" in error_line(cli("layout", "-N", 10, "-r", 3, "-o", path), code=1)
    assert path.read_text() == "keep me"


# -------------------------------------------------------------- generators
def test_layout_too_large_for_memory_is_a_parameter_error():
    # N = 100,000 with r = 50,000 used to die in a MemoryError (an 18.6 GiB array).
    for method in ("sidon", "random", "consecutive"):
        with pytest.raises(ParameterError, match="stack entries"):
            generate(method, 100_000, 50_000)
    assert MAX_LAYOUT_ENTRIES >= 100_000 * 1000  # N = 100,000 with r = 1000 stays allowed


def test_overlap_of_a_large_random_layout_uses_bounded_memory():
    # Used to build all N r (r - 1) / 2 holder pairs at once (7 GB at N = 100,000, r = 60).
    # Here: chunked result equals the brute force on a layout whose rows span chunks.
    layout = spare_opt.random_latin(700, 60, seed=5)  # 2 chunks of rows
    sets = [set(row) for row in layout.stacks.tolist()]
    exact = max(len(sets[a] & sets[b]) for a in range(700) for b in range(a + 1, 700))
    assert layout.overlap() == exact


# ------------------------------------------------------------ failure sets
@pytest.mark.parametrize("failed", [[10**30], [-(10**30)]])
def test_failed_group_id_beyond_int64_is_a_failure_set_error(failed):
    # Used to be an OverflowError from numpy.
    with pytest.raises(FailureSetError, match="out of range"):
        plan_reorder(consecutive(10, 3), failed)
    with pytest.raises(FailureSetError, match="out of range"):
        least_stack_number(consecutive(10, 3), failed)


@pytest.mark.parametrize("failed", [None, 3, "1,2", np.array(3), np.array([[1, 2]])])
def test_failed_groups_that_are_not_a_collection_are_a_failure_set_error(failed):
    # None and 3 used to be bare TypeErrors; "1,2" was read character by character.
    with pytest.raises(FailureSetError):
        plan_reorder(consecutive(10, 3), failed)


def test_mid_step_none_is_a_failure_set_error():
    with pytest.raises(FailureSetError):
        plan_reorder(consecutive(10, 3), [1], mid_step=None)


def test_normalise_groups_fast_path_matches_the_list_path():
    for values in ([3, 1, 2], [], [9]):
        assert np.array_equal(normalise_groups(np.array(values, dtype=np.int64), 10), normalise_groups(values, 10))
    with pytest.raises(FailureSetError, match="more than once"):
        normalise_groups(np.array([2, 2]), 10)
    with pytest.raises(FailureSetError, match="out of range"):
        normalise_groups(np.array([2**64 - 1], dtype=np.uint64), 10)


def test_a_mapping_of_groups_is_refused_not_read_as_its_keys():
    """{group: step} iterates as its keys: the values would be dropped without a word."""
    from spare_opt import ReorderController

    with pytest.raises(FailureSetError, match="got a mapping"):
        normalise_groups({1: 2}, 10)
    with pytest.raises(FailureSetError, match="got a mapping"):
        plan_reorder(consecutive(10, 3), {1: 2})
    controller = ReorderController(consecutive(10, 3))
    with pytest.raises(FailureSetError, match="got a mapping"):
        controller.fail({1: 2})
    assert len(controller.failed) == 0  # nothing was applied
    assert controller.fail(list({1: 2})).stack_number >= 1  # its keys, said so


@pytest.mark.parametrize("layout", [None, np.zeros((3, 3), dtype=int)])
def test_plan_reorder_of_a_non_layout_is_a_parameter_type_error(layout):
    # Used to be an AttributeError.
    with pytest.raises(ParameterTypeError, match="layout must be a Layout"):
        plan_reorder(layout, [1])


@pytest.mark.parametrize(
    "fail, needle",
    [
        ("", "no group ids given"),  # used to plan with no failure
        ("  ", "no group ids given"),
        ("1,,2", "empty group id"),  # used to be read as 1,2
        ("1,2,", "empty group id"),
        ("1_0", "not an integer"),  # int() used to read it as 10
        ("\u0663", "not an integer"),  # Arabic-Indic three, int() used to read it as 3
    ],
)
def test_plan_fail_option_typos_are_usage_errors(layout_file, fail, needle):
    assert needle in error_line(cli("plan", layout_file, "--fail", fail), code=2)


def test_plan_fail_option_huge_id_is_one_line(layout_file):
    assert "out of range" in error_line(cli("plan", layout_file, "--fail", "9" * 25), code=1)


@pytest.mark.parametrize(
    "content, needle",
    [
        (DEEP_JSON, "nested too deeply"),
        ('{"a": 1}', "expected a JSON list"),
        ("", "holds no group ids"),
        ("[" + "9" * 25 + "]", "out of range"),
    ],
)
def test_plan_fail_file_bad_content_is_one_line(tmp_path, layout_file, content, needle):
    path = tmp_path / "failed.txt"
    path.write_text(content)
    assert needle in error_line(cli("plan", layout_file, "--fail-file", path))


def test_plan_fail_file_empty_json_list_means_no_failure(tmp_path, layout_file):
    path = tmp_path / "failed.json"
    path.write_text("[]")
    result = cli("plan", layout_file, "--fail-file", path, "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["failed"] == []


# -------------------------------------------------------------- traces
def test_deeply_nested_json_trace_is_a_trace_error(tmp_path, layout_file):
    path = tmp_path / "deep.json"
    path.write_text(DEEP_JSON)
    with pytest.raises(TraceError, match="nested too deeply"):
        read_fault_trace(path)
    assert "nested too deeply" in error_line(cli("replay", layout_file, "--trace", path), code=1)


def test_event_time_integer_beyond_float_is_a_trace_error():
    # Used to be an OverflowError from math.isfinite.
    with pytest.raises(TraceError, match="'event_time' must be finite"):
        parse_fault_events([event(time=10**400)])


def test_event_times_whose_span_overflows_are_a_trace_error(tmp_path, layout_file):
    # Used to replay with span inf and print "mean_stack_number": NaN (invalid JSON).
    doc = [event("a", 1e308), event("b", -1e308)]
    with pytest.raises(TraceError, match="span more than a float can hold"):
        parse_fault_events(doc)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert "span" in error_line(cli("replay", layout_file, "--trace", path, "--json"), code=1)


@pytest.mark.parametrize("path", [None, 5, ""])
def test_read_fault_trace_of_a_non_path_is_a_trace_error(path):
    with pytest.raises(TraceError):
        read_fault_trace(path)


def test_negative_placement_seed_is_a_parameter_error(tmp_path, layout_file):
    # Used to be a ValueError traceback from numpy's SeedSequence.
    trace = parse_fault_events([event()])
    with pytest.raises(ParameterError, match="placement seed must be >= 0"):
        replay_trace(consecutive(10, 3), trace, placement_seed=-1)
    path = tmp_path / "t.json"
    path.write_text(json.dumps([event()]))
    assert ">=0" in error_line(cli("replay", layout_file, "--trace", path, "--placement-seed", -1), code=2)


def test_non_callable_progress_is_a_parameter_type_error():
    trace = parse_fault_events([event()])
    with pytest.raises(ParameterTypeError, match="progress"):
        replay_trace(consecutive(10, 3), trace, progress=5)


def test_text_summary_lists_only_the_first_irregular_events(tmp_path, layout_file):
    # Used to print one line per irregular event (50,000 lines for a noisy trace).
    doc = [event("n0", float(t)) for t in range(SHOWN_IRREGULAR + 30)]
    result = replay_trace(consecutive(10, 3), parse_fault_events(doc))
    assert len(result["irregular_events"]) == SHOWN_IRREGULAR + 29
    text = result.format_text()
    assert sum("already down" in line for line in text.splitlines()) == SHOWN_IRREGULAR
    assert "and 29 more irregular events" in text


@pytest.mark.parametrize(
    "kwargs",
    [
        {"burst_probability": -1.0},
        {"burst_probability": 2.0},
        {"burst_mean": -1.0},  # used to be numpy's ValueError
        {"repair_sigma": -1.0},  # idem
        {"seed": -1},  # idem
        {"weibull_shape": 1e-3},  # used to be an OverflowError from math.gamma
    ],
)
def test_synthetic_trace_bad_parameters_are_parameter_errors(kwargs):
    with pytest.raises(ParameterError):
        synthetic_fault_trace(nodes=5, days=5.0, **kwargs)


def test_synthetic_trace_seed_of_the_wrong_type_is_a_parameter_type_error():
    # It used to be a bare TypeError; the API's rule (docs/api.md) makes it ParameterTypeError.
    with pytest.raises(spare_opt.ParameterTypeError):
        synthetic_fault_trace(nodes=5, days=5.0, seed="a")


def test_write_fault_trace_errors_are_spare_errors(tmp_path):
    doc = synthetic_fault_trace(nodes=5, days=5.0)
    with pytest.raises(TraceError, match="expected a 'spare-failure-trace' object"):
        write_fault_trace([], tmp_path / "t.json")  # used to be an AttributeError
    with pytest.raises(OutputWriteError):
        write_fault_trace(doc, tmp_path / "missing" / "t.json")  # used to be FileNotFoundError
    with pytest.raises(OutputWriteError):
        write_fault_trace(doc, tmp_path, force=True)  # used to be IsADirectoryError


# -------------------------------------------------------------------- demo
def test_demo_with_an_empty_output_folder_is_refused(tmp_path, monkeypatch):
    # Used to write into the current folder.
    monkeypatch.chdir(tmp_path)
    assert "empty" in error_line(cli("demo", "--out", "", "--generated"), code=1)
    assert list(tmp_path.iterdir()) == []


def test_demo_output_folder_that_is_a_file_is_an_output_write_error(tmp_path):
    (tmp_path / "file").write_text("keep")
    with pytest.raises(OutputWriteError, match="not a folder"):
        run_demo(tmp_path / "file", generated=True)
    assert (tmp_path / "file").read_text() == "keep"


def test_layout_metadata_with_numpy_values_saves_and_odd_objects_are_a_layout_error(tmp_path):
    # numpy scalars used to be a bare TypeError from json.dumps.
    layout = Layout([[0, 1], [1, 0]], metadata={"seed": np.int64(3), "weights": np.arange(2)})
    for name in ("m.json", "m.npz"):
        layout.save(tmp_path / name)
        assert Layout.load(tmp_path / name).metadata == {"seed": 3, "weights": [0, 1]}
    with pytest.raises(LayoutError, match="JSON"):
        Layout([[0, 1], [1, 0]], metadata={"x": object()}).save(tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs os.mkfifo")
def test_output_to_a_special_file_writes_through_and_keeps_the_node(tmp_path):
    # `-o /dev/null --force` used to rename a regular file onto /dev/null (as root:
    # the device node was replaced).  A FIFO stands in for the device here.
    import os
    import stat
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = cli("layout", "-N", 10, "-r", 3, "-o", fifo)
    reader.join(timeout=10)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(received[0])["format"] == "spare-layout"


def test_output_through_a_symlink_replaces_the_target_and_keeps_the_link(tmp_path):
    target = tmp_path / "target.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(OutputExistsError):
        write_atomic(link, "new")
    write_atomic(link, "new", force=True)
    assert link.is_symlink() and target.read_text() == "new"


def test_permission_errors_are_spare_errors(tmp_path, monkeypatch):
    # chmod 000 does not bite when the tests run as root: simulate the refusal.
    import pathlib
    import tempfile

    layout_path = tmp_path / "l.json"
    consecutive(5, 2).save(layout_path)
    trace_path = tmp_path / "t.json"
    trace_path.write_text(json.dumps([event()]))

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(pathlib.Path, "read_text", refuse)
    with pytest.raises(LayoutFileError, match="permission denied"):
        Layout.load(layout_path)
    with pytest.raises(TraceError, match="permission denied"):
        read_fault_trace(trace_path)
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(OutputWriteError, match="Permission denied"):
        write_atomic(tmp_path / "new.txt", "data")
    with pytest.raises(LayoutFileError, match="Permission denied"):
        consecutive(5, 2).save(tmp_path / "new.json")


# ------------------------------------------------------------------ fuzzing
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
)
_JSON = st.recursive(
    _SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12,
)
_EVENT_VALUES = st.one_of(
    _SCALARS, st.sampled_from(["fault_start", "fault_end", "n1", "n2"]),
    st.dictionaries(st.sampled_from(["Class", "Level", "Desc"]), _SCALARS, max_size=3),
)
_EVENTS = st.lists(
    st.dictionaries(st.sampled_from(["node_id", "event_time", "event_type", "fault_type"]), _EVENT_VALUES, max_size=4)
    | _JSON,
    max_size=5,
)


@given(st.one_of(_JSON, _EVENTS, st.fixed_dictionaries(
    {"format": st.just("spare-failure-trace"), "version": st.sampled_from([1, 1.0, True, 2]), "events": _EVENTS},
    optional={"nodes": _SCALARS, "metadata": _JSON},
)))
def test_any_json_trace_document_parses_or_raises_a_trace_error(doc):
    try:
        parse_fault_events(doc)
    except TraceError:
        pass


@given(st.dictionaries(st.sampled_from(list(consecutive(6, 2).to_dict())), _JSON, max_size=8), st.booleans())
def test_any_json_layout_document_loads_or_raises_a_spare_error(changes, start_from_a_good_one):
    doc = consecutive(6, 2).to_dict() if start_from_a_good_one else {}
    doc.update(changes)
    try:
        Layout.from_dict(doc)
    except (LayoutFileError, LayoutError):
        pass


@given(st.one_of(_JSON, st.text(max_size=12)))
def test_any_failure_set_plans_or_raises_a_failure_set_error(failed):
    try:
        plan_reorder(consecutive(6, 2), failed)
    except FailureSetError:
        pass


# ----------------------------------------------------------- --json output
def _strict_json(text):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


_TIMINGS = {"solve_seconds", "elapsed_seconds", "path"}


def _without_timings(doc):
    if isinstance(doc, dict):
        return {k: _without_timings(v) for k, v in doc.items() if k not in _TIMINGS}
    if isinstance(doc, list):
        return [_without_timings(v) for v in doc]
    return doc


@pytest.mark.parametrize("method", ["random", "sidon"])
def test_json_outputs_are_strict_json_and_deterministic_for_a_seed(tmp_path, method):
    runs = [
        _strict_json(cli("layout", "-N", 40, "-r", 5, "-m", method, "--seed", 7, "-o", tmp_path / f"{i}.json",
                         "--json").stdout)
        for i in range(2)
    ]
    assert _without_timings(runs[0]) == _without_timings(runs[1])
    layout = tmp_path / "0.json"
    plans = [_strict_json(cli("plan", layout, "--fail", fail, "--json").stdout) for fail in ("3,1,2", "1 2 3")]
    assert plans[0] == plans[1]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps([event(f"n{i}", float(i % 3)) for i in range(12)]))
    replays = [_strict_json(cli("replay", layout, "--trace", trace, "--placement-seed", 5, "--json").stdout)
               for _ in range(2)]
    assert _without_timings(replays[0]) == _without_timings(replays[1])


def test_text_summary_shortens_long_wipe_out_lists():
    # One node failing and coming back 100 times on N = 1: 100 wipe-outs, whose days
    # used to be printed on one line each time (5,000 wipe-outs: a 60 kB line).
    doc = []
    for i in range(100):
        doc += [event("a", 2.0 * i), event("a", 2.0 * i + 1, "fault_end")]
    result = replay_trace(consecutive(1, 1), parse_fault_events(doc))
    assert result["wipe_outs"] == 100 and len(result["wipe_out_days"]) == 100
    text = result.format_text()
    assert text.count("(80 more; --json lists all)") == 2  # the days and the masked counts
    assert max(len(line) for line in text.splitlines()) < 300


def test_random_layout_beyond_the_work_limit_is_a_parameter_error():
    # N = 100,000 with r = 1000 used to run for hours (O(N r^2) repair and lambda count).
    from spare_opt.layouts.generators import MAX_RANDOM_WORK

    with pytest.raises(ParameterError, match="work limit"):
        spare_opt.random_latin(100_000, 1000)
    assert 100_000 * 200**2 <= MAX_RANDOM_WORK  # r = 200 at N = 100,000 stays allowed

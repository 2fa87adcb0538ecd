"""`spare-opt plan` through click's CliRunner: output agrees with the library, bad input gets one line."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from naive import circulant_stacks
from spare_opt.layouts.layout import Layout
from spare_opt.planning.plan import Plan
from spare_opt.planning.exact import plan_reorder
from spare_opt_cli.main import main

OFFSETS = [0, 1, 3, 7]


@pytest.fixture
def layout():
    return Layout(circulant_stacks(40, OFFSETS), method="custom", offsets=OFFSETS)


@pytest.fixture
def layout_path(tmp_path, layout):
    return str(layout.save(tmp_path / "layout.json"))


def _run(*args):
    return CliRunner().invoke(main, ["plan", *args])


def _error_lines(result):
    return [line for line in result.stderr.splitlines() if line.startswith("Error")]


def test_text_output_reports_the_plan(layout, layout_path):
    failed = [3, 4, 10, 11, 20, 21, 22]
    result = _run(layout_path, "--fail", "3,4, 10,11", "--fail", "20 21 22")
    assert result.exit_code == 0, result.output
    plan = plan_reorder(layout, failed)
    assert plan.moves > 0
    out = result.stdout
    assert "status: masked" in out
    assert f"stack number S*: {plan.stack_number} (lower bound c(k) = {plan.lower_bound})" in out
    assert f"moves: {plan.moves} " in out
    assert "patch compute: none" in out
    changed = [g for g in range(40) if plan.order[g][0] >= 0 and (plan.order[g] != layout.stacks[g]).any()]
    assert f"groups whose order changed: {len(changed)}" in out
    for g in changed:
        top = " ".join(str(v) for v in plan.order[g][: plan.stack_number])
        assert f"{g:>6}  {top} | " in out


def test_long_tables_are_truncated(tmp_path):
    n = 200
    layout = Layout(circulant_stacks(n, [0, 1, 2]))
    path = str(layout.save(tmp_path / "consecutive.json"))
    failed = [g for g in range(0, n, 4)] + [g + 1 for g in range(0, n, 8)]
    plan = plan_reorder(layout, failed)
    changed = int(sum((plan.order[g] != layout.stacks[g]).any() for g in range(n) if plan.order[g][0] >= 0))
    assert plan.masked and changed > 10
    result = _run(path, "--fail", ",".join(map(str, failed)))
    assert result.exit_code == 0, result.output
    assert f"... and {changed - 10} more" in result.stdout
    assert "more)" in result.stdout  # the failed-group list is truncated too


def test_json_has_exactly_the_plan_keys(layout, layout_path):
    result = _run(layout_path, "--fail", "3,17", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc == plan_reorder(layout, [3, 17]).to_dict()
    assert list(doc) == ["status", "stack_number", "lower_bound", "failed", "lost_shards", "assignment", "order", "moves",
                         "patch", "micro_batches", "load", "step_cost", "split"]
    assert set(doc) == set(Plan.__dataclass_fields__)
    assert doc["micro_batches"] == 1 and doc["load"] == doc["stack_number"] and doc["split"] == [[g] for g in doc["assignment"]]


def test_no_failure_is_the_fault_free_plan(layout, layout_path):
    doc = json.loads(_run(layout_path, "--json").stdout)
    assert doc["status"] == "masked" and doc["stack_number"] == 1 and doc["moves"] == 0
    assert doc["order"] == layout.stacks.tolist()


@pytest.mark.parametrize("content", ["5\n9,  12\n", "[5, 9, 12]", " [ 5 , 9 ,12 ] \n"])
def test_fail_file_text_or_json_joins_fail(tmp_path, layout, layout_path, content):
    file = tmp_path / "failed.txt"
    file.write_text(content)
    result = _run(layout_path, "--fail", "30", "--fail-file", str(file), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == plan_reorder(layout, [5, 9, 12, 30]).to_dict()


def test_wipe_out_text(layout_path):
    # Type 10 is held by groups 10, 9, 7 and 3.
    result = _run(layout_path, "--fail", "3,7,9,10")
    assert result.exit_code == 0, result.output
    assert "status: wipe-out" in result.stdout
    assert "lost shard types: 1 (10)" in result.stdout


def _write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    return str(path)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--fail", "3,40"], "out of range"),
        (["--fail", "-1"], "out of range"),
        (["--fail", "3,3"], "more than once"),
        (["--fail", "3,x"], "not an integer"),
        (["--fail", "1.5"], "not an integer"),
        (["--fail-file", "{missing}"], "does not exist"),
        (["--fail-file", "{dir}"], "is a directory"),
        (["--fail-file", "{malformed}"], "malformed JSON"),
        (["--fail-file", "{json_float}"], "not an integer"),
        (["--fail-file", "{text_word}"], "not an integer"),
        (["--fail", "5", "--fail-file", "{text_ok}"], "more than once"),
    ],
)
def test_bad_failure_input_gets_one_line(tmp_path, layout_path, args, words):
    names = {
        "missing": str(tmp_path / "nope.txt"),
        "dir": str(tmp_path),
        "malformed": _write(tmp_path, "bad.json", "[1, 2"),
        "json_float": _write(tmp_path, "float.json", "[1, 2.5]"),
        "text_word": _write(tmp_path, "word.txt", "1 2 three"),
        "text_ok": _write(tmp_path, "ok.txt", "5 6"),
    }
    result = _run(layout_path, *[a.format(**names) for a in args])
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    errors = _error_lines(result)
    assert len(errors) == 1 and words in errors[0], result.stderr


@pytest.mark.parametrize("content", [None, "{not json", '{"format": "other"}'])
def test_bad_layout_file_gets_one_line(tmp_path, content):
    path = tmp_path / "layout.json"
    if content is not None:
        path.write_text(content)
    result = _run(str(path), "--fail", "1")
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    errors = _error_lines(result)
    assert result.exit_code == 1 and len(errors) == 1 and "layout.json" in errors[0]


def test_plan_runs_on_an_npz_layout(tmp_path):
    layout = Layout(circulant_stacks(30, [0, 2, 7]))
    path = str(layout.save(tmp_path / "layout.npz"))
    result = _run(path, "--fail", "4,5,6", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["failed"] == [4, 5, 6] and np.array(doc["assignment"]).shape == (30,)


# ------------------------------------------------------------- micro-batches
def test_micro_batches_text_and_json(layout, layout_path):
    failed = [3, 4, 10, 11, 20]
    plan = plan_reorder(layout, failed, micro_batches=8)
    result = _run(layout_path, "--fail", "3,4,10,11,20", "--micro-batches", "8")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"load L*: {plan.load} of M = 8 micro-batches per group" in out
    assert f"step cost L*/M: {plan.load / 8:.4g} layers (physical limit N / (N - k) = {40 / 35:.4g})" in out
    assert f"moves: {plan.moves} micro-batches" in out
    assert plan.step_cost < plan_reorder(layout, failed).step_cost
    doc = json.loads(_run(layout_path, "--fail", "3,4,10,11,20", "--micro-batches", "8", "--json").stdout)
    assert doc == plan.to_dict()
    assert doc["micro_batches"] == 8 and doc["step_cost"] == plan.load / 8 and np.array(doc["split"]).shape == (40, 8)
    whole = _run(layout_path, "--fail", "3,4,10,11,20")
    assert f"step cost L*/M: {plan_reorder(layout, failed).stack_number} layers" in whole.stdout


@pytest.mark.parametrize("value, words, code", [
    ("0", "not in the range x>=1", 2),
    ("-3", "not in the range x>=1", 2),
    ("1.5", "is not an integer", 2),
    ("eight", "is not an integer", 2),
    ("4000000", "above the limit", 1),  # N m = 160,000,000 > MAX_SPLIT_ENTRIES
])
def test_bad_micro_batches_get_one_line(layout_path, value, words, code):
    result = _run(layout_path, "--micro-batches", value)
    assert result.exit_code == code
    assert "Traceback" not in result.output
    errors = _error_lines(result)
    assert len(errors) == 1 and words in errors[0], result.stderr


def test_plan_reads_a_layout_from_a_pipe(tmp_path, layout):
    # was: the header peek read the pipe first, then Layout.load found it empty ("malformed JSON") or waited
    # forever for a second writer
    import os
    import subprocess
    import sys

    fifo = tmp_path / "layout.json"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-c", "from spare_opt_cli.main import main; main()", "plan", str(fifo),
                             "--fail", "1", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with open(fifo, "w") as writer:  # opens once the command opens the pipe to read
        writer.write(json.dumps(layout.to_dict()))
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("plan opened the pipe a second time and waited for another writer")
    assert proc.returncode == 0, err
    assert json.loads(out)["failed"] == [1]

"""Tests of ``spare-opt layout`` through click's CliRunner: output, files, every bad-input case."""

import json

import pytest
from click.testing import CliRunner

from spare_opt import Layout
from spare_opt.layouts.generators import METHODS
from spare_opt_cli.main import main


def run(*args):
    return CliRunner().invoke(main, ["layout", *map(str, args)])


def assert_clean_error(result, needle, code=None):
    assert result.exit_code != 0
    if code is not None:
        assert result.exit_code == code
    assert isinstance(result.exception, SystemExit)  # no uncaught exception, no traceback
    assert "Traceback" not in result.output
    assert needle in result.output


@pytest.mark.parametrize("method", METHODS)
def test_each_method_writes_a_loadable_layout(tmp_path, method):
    path = tmp_path / f"{method}.json"
    result = run("--groups", 24, "--redundancy", 4, "--method", method, "--seed", 2, "--time-limit", 1, "-o", path)
    assert result.exit_code == 0, result.output
    layout = Layout.load(path)
    assert (layout.groups, layout.redundancy, layout.method) == (24, 4, method)
    assert f"method:        {method}" in result.output
    assert f"lambda:        {layout.overlap()}" in result.output
    assert "solver status:" in result.output and "time:" in result.output
    assert f"wrote {path}" in result.output


def test_default_method_is_sidon_and_reports_the_construction(tmp_path):
    path = tmp_path / "l.json"
    result = run("-N", 381, "-r", 20, "-o", path)
    assert result.exit_code == 0, result.output
    assert "method:        sidon" in result.output
    assert "solver status: optimal" in result.output
    assert "Singer difference set" in result.output
    assert Layout.load(path).overlap() == 1


def test_a_proved_non_existence_prints_and_records_the_proven_bound(tmp_path):
    # No Sidon set of 8 residues mod 59 exists (the exhaustive search proves it), though
    # the counting bound allows one: lambda 2 is then proved least.
    path = tmp_path / "l.json"
    result = run("-N", 59, "-r", 8, "--time-limit", 60, "-o", path)
    assert result.exit_code == 0, result.output
    assert "solver status: fallback" in result.output
    assert "lambda bound:  >= 2 (lambda proved least)" in result.output
    assert "no Sidon set of 8 residues mod 59 exists" in result.output
    metadata = Layout.load(path).metadata
    assert metadata["lambda"] == metadata["lambda_lower_bound"] == 2 and metadata["lambda_proved_optimal"]


def test_json_output(tmp_path):
    path = tmp_path / "l.npz"
    result = run("-N", 60, "-r", 20, "--time-limit", 0.5, "-o", path, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    layout = Layout.load(path)
    assert doc["path"] == str(path)
    assert (doc["method"], doc["groups"], doc["redundancy"]) == ("sidon", 60, 20)
    assert doc["lambda"] == layout.overlap() == doc["metadata"]["lambda"]
    assert doc["solver_status"] == "fallback"
    assert doc["offsets"] == list(layout.offsets)
    assert "no Sidon set exists" in doc["metadata"]["reason"]


def test_same_seed_same_file(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path in (a, b):
        assert run("-N", 50, "-r", 5, "-m", "random", "--seed", 9, "-o", path).exit_code == 0
    assert Layout.load(a) == Layout.load(b)


def test_existing_file_needs_force(tmp_path):
    path = tmp_path / "l.json"
    path.write_text("keep me")
    result = run("-N", 10, "-r", 3, "-o", path)
    assert_clean_error(result, "exists already (use --force to overwrite)", code=1)
    assert path.read_text() == "keep me"
    result = run("-N", 10, "-r", 3, "-o", path, "--force")
    assert result.exit_code == 0, result.output
    assert Layout.load(path).groups == 10


@pytest.mark.parametrize(
    "args,needle,code",
    [
        (["-N", 0, "-r", 1], "groups N must be >= 1", 1),
        (["-N", 5, "-r", 0], "redundancy r must be >= 1", 1),
        (["-N", 5, "-r", 6], "r must be <= N", 1),
        (["-N", -3, "-r", 1], "groups N must be >= 1", 1),
        (["-N", "2.5", "-r", 1], "'2.5' is not an integer", 2),
        (["-N", 10, "-r", "three"], "'three' is not an integer", 2),
        (["-N", 10, "-r", 3, "--seed", "x"], "'x' is not an integer", 2),
        (["-N", 10, "-r", 3, "--seed", -1], "seed must be >= 0", 1),
        (["-N", 10, "-r", 3, "-m", "random", "--seed", -1], "seed must be >= 0", 1),
        (["-N", 10, "-r", 3, "-m", "block"], "N = 10 is not a multiple of r = 3", 1),
        (["-N", 10, "-r", 3, "-m", "golomb"], "'golomb' is not one of", 2),
        (["-N", 10, "-r", 3, "--time-limit", 0], "--time-limit", 2),
        (["-N", 10, "-r", 3, "--time-limit", "soon"], "--time-limit", 2),
        (["-r", 3], "Missing option '--groups'", 2),
    ],
)
def test_bad_input_is_one_line_error(tmp_path, args, needle, code):
    path = tmp_path / "l.json"
    result = run(*args, "-o", path)
    assert_clean_error(result, needle, code=code)
    assert not path.exists()


def test_missing_output_option():
    assert_clean_error(run("-N", 10, "-r", 3), "Missing option '--output'", code=2)


def test_unwritable_paths(tmp_path):
    # Refused before the solve: the folder is checked up front.
    result = run("-N", 10, "-r", 3, "-o", tmp_path / "no" / "such" / "dir.json")
    assert_clean_error(result, "does not exist", code=1)
    result = run("-N", 10, "-r", 3, "-o", tmp_path)
    assert_clean_error(result, "is a directory", code=2)


def test_help_lists_methods():
    result = CliRunner().invoke(main, ["layout", "--help"])
    assert result.exit_code == 0
    for method in METHODS:
        assert method in result.output

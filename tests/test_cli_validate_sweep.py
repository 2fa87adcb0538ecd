"""`spare-opt validate` and `spare-opt sweep` through click's CliRunner."""

import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from spare_opt import consecutive, sidon, theory
from spare_opt import min_wipe_out_set, monte_carlo, sweep
from spare_opt_cli.main import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def layout():
    return sidon(13, 4, time_limit=5)


@pytest.fixture
def layout_path(tmp_path, layout):
    return str(layout.save(tmp_path / "layout.json"))


def _run(*args):
    return CliRunner().invoke(main, list(args))


def _error_lines(result):
    return [line for line in result.stderr.splitlines() if line.startswith("Error")]


# ---------------------------------------------------------------- validate
def test_validate_text_reports_guarantees_and_estimates(layout, layout_path):
    result = _run("validate", layout_path, "--trials", "30", "--seed", "4")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "N = 13, r = 4, lambda = 1" in out
    assert "every set of up to r-1 = 3 failed groups is masked" in out
    _shard, groups = min_wipe_out_set(layout)
    assert ", ".join(str(g) for g in groups) in out
    assert "worst-case S* = 2" in out
    assert "exact, CP-SAT" in out
    expected = monte_carlo(layout, trials=30, seed=4)
    assert f"{expected.mu:.2f}" in out and f"{expected.sbar:.4f}" in out
    assert f"{theory.mu(13, 4):.2f}" in out


def test_validate_json_has_the_documented_keys_and_matches_the_library(layout, layout_path):
    result = _run("validate", layout_path, "--trials", "25", "--seed", "9", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    expected = monte_carlo(layout, trials=25, seed=9)
    assert doc["monte_carlo"]["mu"] == pytest.approx(expected.mu)
    assert doc["monte_carlo"]["mu_ci95"] == pytest.approx(list(expected.mu_ci95))
    assert doc["monte_carlo"]["sbar"] == pytest.approx(expected.sbar)
    assert doc["monte_carlo"]["sbar_ci95"] == pytest.approx(list(expected.sbar_ci95))
    assert doc["closed_form"]["mu"] == pytest.approx(theory.mu(13, 4))
    assert doc["closed_form"]["sbar"] == pytest.approx(theory.sbar_lower_bound(13, 4))
    assert doc["worst_case"]["min_wipe_out_set"] == min_wipe_out_set(layout)[1].tolist()
    assert [w["failed_count"] for w in doc["worst_case"]["by_failed_count"]] == [1, 2, 3]
    assert all(w["exact"] for w in doc["worst_case"]["by_failed_count"])
    assert doc["guaranteed_tolerance"] == 3


def test_validate_results_do_not_depend_on_workers(layout_path):
    one = json.loads(_run("validate", layout_path, "--trials", "20", "--json", "--worst-k", "0").stdout)
    two = json.loads(_run("validate", layout_path, "--trials", "20", "--json", "--worst-k", "0",
                          "--workers", "2").stdout)
    for key in ("mu", "mu_ci95", "sbar", "sbar_ci95"):
        assert one["monte_carlo"][key] == two["monte_carlo"][key]


def test_validate_without_trials(layout_path):
    result = _run("validate", layout_path, "--trials", "0", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["monte_carlo"] is None
    assert doc["closed_form"]["mu"] == pytest.approx(theory.mu(13, 4))
    text = _run("validate", layout_path, "--trials", "0")
    assert "Monte-Carlo skipped" in text.stdout


def test_validate_plot_is_written_and_never_overwritten(tmp_path, layout_path):
    png = tmp_path / "mc.png"
    result = _run("validate", layout_path, "--trials", "10", "--worst-k", "1", "--plot", str(png))
    assert result.exit_code == 0, result.output
    assert png.read_bytes().startswith(PNG_MAGIC)
    size = png.stat().st_size
    again = _run("validate", layout_path, "--trials", "10", "--worst-k", "1", "--plot", str(png))
    assert again.exit_code != 0
    assert len(_error_lines(again)) == 1 and "exists" in again.stderr
    assert png.stat().st_size == size
    forced = _run("validate", layout_path, "--trials", "10", "--worst-k", "1", "--plot", str(png), "--force")
    assert forced.exit_code == 0, forced.output


def test_plot_without_matplotlib_says_how_to_install(tmp_path, layout_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    result = _run("validate", layout_path, "--trials", "5", "--worst-k", "0", "--plot", str(tmp_path / "x.png"))
    assert result.exit_code == 1
    assert _error_lines(result) == ["Error: plotting needs matplotlib: pip install 'spare-opt[plot]'"]
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    "args, code",
    [
        (["--trials", "-1"], 2),
        (["--workers", "0"], 2),
        (["--worst-k", "99"], 2),
        (["--trials", "0", "--plot", "x.png"], 2),
        (["--time-limit", "0"], 2),
    ],
)
def test_validate_bad_options(layout_path, args, code):
    result = _run("validate", layout_path, *args)
    assert result.exit_code == code
    assert len(_error_lines(result)) == 1
    assert "Traceback" not in result.output


def test_validate_bad_layout_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "spare-layout", "version": 1, "stacks": [[0, 1], [0, 1]]}')
    for path in (str(bad), str(tmp_path / "missing.json")):
        result = _run("validate", path)
        assert result.exit_code != 0  # 1 or 2, as cli/options.py reports a bad layout file
        assert len(_error_lines(result)) == 1
        assert "Traceback" not in result.output


# ---------------------------------------------------------------- sweep
SWEEP_ARGS = ["sweep", "--groups", "12", "--r-min", "2", "--r-max", "5", "--methods", "consecutive,block",
              "--trials", "6", "--seed", "3"]


def test_sweep_table_and_json_match_the_library():
    expected = sweep(12, r_min=2, r_max=5, methods=("consecutive", "block"), trials=6, seed=3)
    text = _run(*SWEEP_ARGS)
    assert text.exit_code == 0, text.output
    assert "skipped block r = 5: r = 5 does not divide N = 12" in text.stdout
    for row in expected.rows:
        assert f"{row['mu']:.1f}" in text.stdout
    doc = json.loads(_run(*SWEEP_ARGS, "--json").stdout)
    assert [(r["method"], r["redundancy"]) for r in doc["rows"]] == [
        (r["method"], r["redundancy"]) for r in expected.rows
    ]
    assert [r["mu"] for r in doc["rows"]] == pytest.approx([r["mu"] for r in expected.rows])
    assert doc["skipped"] == expected.skipped
    assert doc["parameters"]["system_mtbf_seconds"] == 300.0 and "mtbf_seconds" not in doc["parameters"]


def test_sweep_default_r_max_stops_at_n():
    # was: the default --r-max 20 was refused at N < 20 ("got r=20 > N=12"), though the user never chose it
    doc = json.loads(_run("sweep", "-N", "6", "--methods", "consecutive", "--trials", "2", "--json").stdout)
    assert [r["redundancy"] for r in doc["rows"]] == [2, 3, 4, 5, 6]
    given = _run("sweep", "-N", "6", "--r-max", "7", "--trials", "2")
    assert given.exit_code == 1 and "got r=7 > N=6" in given.output
    alone = _run("sweep", "-N", "1", "--trials", "2")  # the library's default r_max, named as such
    assert alone.exit_code == 1 and "Error: r_min=2 is above N = 1" in alone.output


def test_sweep_time_options_change_j():
    doc = json.loads(_run(*SWEEP_ARGS, "--json", "--mtbf", "600", "--restart-seconds", "1800", "--save-seconds", "30").stdout)
    row = doc["rows"][-1]
    assert row["j_closed_form"] == pytest.approx(
        theory.normalised_ttt(12, row["redundancy"], system_mtbf_seconds=36000, save_seconds=30,
                              restart_seconds=1800))


def test_sweep_plot(tmp_path):
    png = tmp_path / "sweep.png"
    result = _run(*SWEEP_ARGS, "--plot", str(png))
    assert result.exit_code == 0, result.output
    assert png.read_bytes().startswith(PNG_MAGIC)
    assert _run(*SWEEP_ARGS, "--plot", str(png)).exit_code != 0


@pytest.mark.parametrize(
    "args, code",
    [
        (["--methods", "sidon,nope"], 2),
        (["--methods", " , "], 2),
        (["--trials", "0"], 2),
        (["--r-max", "13"], 1),
        (["--r-min", "4", "--r-max", "3"], 1),
        (["--mtbf", "0"], 2),
    ],
)
def test_sweep_bad_options(args, code):
    result = _run("sweep", "--groups", "12", "--trials", "2", *args)
    assert result.exit_code == code, result.output
    assert len(_error_lines(result)) == 1
    assert "Traceback" not in result.output


def test_sweep_requires_groups():
    result = _run("sweep")
    assert result.exit_code == 2


def test_validate_consecutive_layout_reports_local_search_beyond_64(tmp_path):
    path = str(consecutive(70, 3).save(tmp_path / "c70.json"))
    result = _run("validate", path, "--trials", "3")
    assert result.exit_code == 0, result.output
    assert "local search: lower bounds" in result.stdout
    assert np.isfinite(json.loads(_run("validate", path, "--trials", "3", "--json").stdout)["monte_carlo"]["mu"])

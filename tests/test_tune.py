"""Tests of r / checkpoint-period tuning: closed forms, the simulation search, the figure."""

import math
from concurrent.futures import ThreadPoolExecutor

import pytest

from spare_opt import theory
from spare_opt._core.errors import OutputExistsError, ParameterError, ParameterTypeError
from spare_opt.simulation.parameters import PAPER_TABLE, SimulationParameters, preset_parameters
from spare_opt.simulation.tuning import PAPER_TABLE as TUNE_PAPER_TABLE
from spare_opt.simulation.tuning import (
    closed_form,
    closed_form_period,
    mean_failures_to_wipe_out,
    plot_tune,
    tune,
)


def tiny(**fields):
    base = dict(groups=20, steps=200, layer_compute_seconds=10.0, allreduce_seconds=1.0, restart_seconds=150.0,
                save_seconds=5.0, system_mtbf_seconds=30.0)
    base.update(fields)
    return SimulationParameters(**base)


SEARCH = dict(seeds=3, rep_redundancies=(2, 3), spare_redundancies=(2, 4), period_factors=(0.5, 1.0, 2.0))


def test_closed_forms_follow_the_paper():
    assert [closed_form(preset_parameters("paper-600k", n))["r_star"] for n in (200, 600, 1000)] == [8, 10, 10]
    params = preset_parameters("paper-600k", 600)
    t_f = 10 * params.system_mtbf_seconds
    expected = params.save_seconds + math.sqrt(params.save_seconds ** 2
                                               + 2 * params.save_seconds * (t_f + params.restart_seconds))
    assert closed_form_period(params, 10) == pytest.approx(expected)
    form = closed_form(params)
    assert form["mu"] == pytest.approx(theory.mu(600, 10))
    assert 0 < form["availability"] < 1 and form["ttt_ratio"] > 1
    assert form["availability"] == pytest.approx(theory.availability(
        params.save_seconds, params.restart_seconds, (form["mu"] + 1) * params.system_mtbf_seconds))
    assert TUNE_PAPER_TABLE is PAPER_TABLE and PAPER_TABLE[600]["spare_r"] == 8


def test_mean_failures_to_wipe_out_grows_with_r():
    params = tiny(groups=60)
    assert mean_failures_to_wipe_out(params, "ckpt", 1) == 1.0
    rep = [mean_failures_to_wipe_out(params, "rep", r) for r in (2, 3, 6)]
    assert rep == sorted(rep) and rep[0] > 1
    assert mean_failures_to_wipe_out(params, "spare", 5) > mean_failures_to_wipe_out(params, "spare", 2)


def test_tune_picks_the_minimum_and_does_not_depend_on_workers():
    one = tune(tiny(), workers=1, **SEARCH)
    two = tune(tiny(), workers=2, **SEARCH)
    assert one.to_dict() == two.to_dict()
    assert one == two
    with ThreadPoolExecutor(max_workers=2) as pool:
        assert tune(tiny(), executor=pool, **SEARCH) == one
    doc = one.to_dict()
    for strategy in ("rep", "spare"):
        curve = doc[strategy]["curve"]
        assert [row["r"] for row in curve] == list(SEARCH[f"{strategy}_redundancies"])
        assert doc[strategy]["best_ttt_ratio"] == min(row["ttt_ratio"] for row in curve)
        for row in curve:
            assert row["ttt_ratio"] == min(row["ttt_ratio_by_period"])
            assert row["ci95"][0] <= row["ttt_ratio"] <= row["ci95"][1]
            assert len(row["periods"]) == 3
        assert doc[strategy]["best_r"] in SEARCH[f"{strategy}_redundancies"]
    assert doc["gain"] == pytest.approx(1 - doc["spare"]["best_ttt_ratio"] / doc["rep"]["best_ttt_ratio"])
    assert "ckpt" in doc


def test_tune_reports_progress_and_rejects_bad_input():
    calls = []
    tune(tiny(), workers=1, progress=lambda done, total: calls.append((done, total)), include_ckpt=False,
         **SEARCH)
    assert calls[-1][0] == calls[-1][1] == 3 * 4 and [c[0] for c in calls] == list(range(1, 13))
    with pytest.raises(ParameterError):
        tune(tiny(), seeds=0)
    with pytest.raises(ParameterError):
        tune(tiny(), spare_redundancies=(1,))
    with pytest.raises(ParameterError):
        tune(tiny(), period_factors=(-1.0,))
    with pytest.raises(ParameterError):
        tune(tiny(), workers=0)
    with pytest.raises(ParameterTypeError):
        tune(tiny(), seeds=1.5)
    with pytest.raises(ParameterTypeError):
        tune(tiny(), executor="tcp://localhost:8786")
    with pytest.raises(ParameterTypeError):
        tune("params")
    with pytest.raises(TypeError):  # options are keyword-only
        tune(tiny(), 3)


def test_plot_is_written_once_without_force(tmp_path):
    pytest.importorskip("matplotlib")
    result = tune(tiny(), workers=1, **SEARCH)
    path = tmp_path / "ttt.png"
    plot_tune([result], path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(OutputExistsError):
        plot_tune([result], path)
    plot_tune([result, result], path, force=True)

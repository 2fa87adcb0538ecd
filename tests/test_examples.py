"""The runnable example: 4 ranks on gloo, one SIGKILLed at a random moment, exact final parameters."""

import importlib.util
import json

import pytest

from conftest import REPO

pytest.importorskip("torch")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_with_spare_survives_a_kill_exactly(capsys):
    example = _load("train_with_spare")
    code = example.main(["--seed", "2", "--steps", "12", "--micro-batches", "2", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    killed = report["killed"]
    assert report["exit_codes"][str(killed)] == -9  # a real SIGKILL
    assert report["survivors"] == [g for g in range(4) if g != killed]
    assert len(report["plan_fingerprints"]) == 1
    assert report["max_difference"] <= 1e-12 * report["parameter_scale"]
    assert report["model"] == "gpt" and len(report["learning_rates"]) == 1  # the scheduler agrees everywhere
    assert all(count >= 1 for count in report["consistency_checks"].values())
    [row] = report["timeline"]
    assert row["group"] == killed
    phases = [row[phase] for phase in ("detection", "agreement", "plan", "rebuild", "patch")]
    assert all(value >= 0 for value in phases), row
    assert sum(phases) == pytest.approx(row["total"])
    assert 0 < row["spare_opt"] < row["total"]


def test_train_with_spare_refuses_too_few_steps(capsys):
    example = _load("train_with_spare")
    with pytest.raises(SystemExit) as raised:
        example.main(["--steps", "3"])
    assert raised.value.code == 2
    assert "--steps must be at least 8" in capsys.readouterr().err

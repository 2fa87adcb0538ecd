"""recovery_phases: the phases of each recovery from hand-written survivors' timelines (a real run: test_examples.py)."""

import math

import pytest

pytest.importorskip("torch")

import spare_opt  # noqa: E402
from spare_opt.torch import RECOVERY_PHASES, recovery_phases  # noqa: E402


def _recovery(start, *, source, detect, agree, plan, rebuild, recovered, patch_plan=None, plan_seconds=0.0, step=0):
    events = [("detect", start + detect, {"source": source, "epoch": 1}),
              ("agree", start + agree, {"epoch": 1}),
              ("plan", start + plan, {"seconds": plan_seconds}),
              ("rebuild", start + rebuild, {})]
    if patch_plan is not None:
        events.append(("patch-plan", start + patch_plan, {"keys": 2}))
    events.append(("recovered", start + recovered, {"step": step}))
    return events


def test_each_failure_is_split_on_the_survivor_that_recovered_last():
    early = [("detect", 50.0, {"source": "stale heartbeat"}), ("recovered", 60.0, {"step": 1})]  # before both
    timelines = {
        1: early + _recovery(100.0, source="collective raised: gloo", detect=0.030, agree=0.050, plan=0.060,
                             rebuild=0.090, patch_plan=0.0905, recovered=0.120, plan_seconds=0.001, step=5)
        + [("checked", 150.0, {})]
        + _recovery(200.0, source="abort flag", detect=0.010, agree=0.020, plan=0.025, rebuild=0.040,
                    recovered=0.070, plan_seconds=0.0005, step=9),
        2: _recovery(100.0, source="abort flag", detect=0.020, agree=0.060, plan=0.070, rebuild=0.100,
                     patch_plan=0.101, recovered=0.150, plan_seconds=0.002, step=5)
        # no rebuild after the second failure: not a whole recovery, so not the slowest
        + [("detect", 200.05, {"source": "death notice"}), ("agree", 200.06, {}), ("plan", 200.07, {}),
           ("recovered", 200.5, {"step": 9})],
        0: [("detect", 10.0, {"source": "abort flag"})],  # the killed group: nothing after its death
    }
    # In any order; the third failure has no recovery after it (the job ended): no row.
    rows = recovery_phases(timelines, [(200.0, 3), (300.0, 1), (100.0, 0)])
    assert [row["group"] for row in rows] == [0, 3]
    first, second = rows
    # Group 2 recovered last from the first failure (100.150 against 100.120).
    assert first["source"] == "abort flag" and first["step"] == 5
    assert first["detection"] == pytest.approx(0.020)
    assert first["agreement"] == pytest.approx(0.040)
    assert first["plan"] == pytest.approx(0.010)
    assert first["rebuild"] == pytest.approx(0.030)
    assert first["patch"] == pytest.approx(0.050)
    assert first["total"] == pytest.approx(0.150)
    assert first["plan_compute"] == pytest.approx(0.002)
    assert first["patch_plan"] == pytest.approx(0.001)
    assert first["spare_opt"] == pytest.approx(0.003)
    # Group 1's second recovery (the 200.5 "recovered" of group 2 lacks a rebuild); no patch-plan event.
    assert second["source"] == "abort flag" and second["step"] == 9
    assert second["total"] == pytest.approx(0.070) and second["patch_plan"] == 0.0
    for row in rows:
        assert sum(row[phase] for phase in RECOVERY_PHASES) == pytest.approx(row["total"])
    assert RECOVERY_PHASES == ("detection", "agreement", "plan", "rebuild", "patch")


def test_events_after_the_next_failure_belong_to_it():
    # The first failure's recovery never finished before the second failure: no row for it.
    timeline = [("detect", 100.01, {"source": "abort flag"}), ("agree", 100.02, {}), ("plan", 100.03, {}),
                *_recovery(101.0, source="collective raised", detect=0.01, agree=0.02, plan=0.03, rebuild=0.04,
                           recovered=0.05)]
    rows = recovery_phases({1: timeline}, [(100.0, 0), (101.0, 2)])
    assert [row["group"] for row in rows] == [2]
    assert rows[0]["detection"] == pytest.approx(0.01) and rows[0]["source"] == "collective raised"
    assert recovery_phases({1: timeline}, []) == []


@pytest.mark.parametrize("timelines, failures, error, message", [
    ([("detect", 1.0, {})], [(0.0, 1)], spare_opt.ParameterTypeError, "timelines must be a mapping"),
    ({}, "0,1", spare_opt.ParameterTypeError, "failures must be a sequence"),
    ({}, [(0.0, 1, 2)], spare_opt.ParameterTypeError, "a (time, group) pair"),
    ({}, [(math.nan, 1)], spare_opt.ParameterError, "finite number of seconds"),
    ({}, [(0.0, 1.5)], spare_opt.ParameterTypeError, "group must be an integer"),
])
def test_bad_input_raises_a_specific_error(timelines, failures, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        recovery_phases(timelines, failures)

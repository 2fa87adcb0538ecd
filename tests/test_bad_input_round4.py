"""Input hardening, round 4: thirteen kinds of hostile or unusual input, one section each.

Same contract as ``tests/test_bad_input_round2.py``: the CLI prints one ``Error: ...``
line and exits non-zero (no traceback), the API raises the specific
:class:`spare_opt.SpareError` subclass, and where there is a right value it is checked.
Sections: 1 float products converted to integers; 2 group ids beyond int32;
3 Weibull shapes that underflow later; 4 more local workers than tasks; 5 wipe-out
pairs of overlapping domains; 6 ``--until-days`` with a domain column; 7 runs that
overshoot the wall cap; 8 malformed plans; 9 booleans and empty containers in
readers; 10 UTC offsets; 11 SIGTERM during a write; 12 options that do nothing;
13 messages that contradict themselves; then the smaller findings.
"""

import copy
import json
import math
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from spare_opt import (
    MAX_STEPS,
    FailureModel,
    FailureModelError,
    FailureSetError,
    ReorderController,
    TopologyError,
    read_failure_set,
    Layout,
    LayoutFileError,
    Topology,
    consecutive,
    derived_topology,
    domain_safe,
    layout_file_size,
    domain_report,
    SimulationParameters,
    model_events,
    synthetic_fault_trace,
    ParameterError,
    TraceError,
    Placement,
    PlacementError,
    PlanError,
    check_plan,
    is_valid_plan,
    plan_reorder,
    compare,
    compare_parameters,
    parse_fault_csv,
    parse_fault_events,
    sidon,
    steps_in,
)
from spare_opt._core.parallel import dask_executor, local_processes, parallelism
from spare_opt._core.stats import weibull_renewals
from spare_opt.traces.failure_model import MAX_SAMPLE_EVENTS
from spare_opt._core.validation import MIN_WEIBULL_SHAPE
from test_bad_input_round2 import cli, error_line, write

LOG = "node,start,end\nn1,1,5\nn2,3,8\nn3,20,30\n"  # hours: the span is 30 h


@pytest.fixture
def small_log(tmp_path):
    return write(tmp_path, "log.csv", LOG)


# ============================================ 1. float products converted to int
def test_kind1_compare_steps_of_the_trace_span_are_the_rounded_quotient(small_log):
    trace = parse_fault_csv(LOG, time_unit="hours")
    params = compare_parameters(groups=4, trace=trace, time_scale=3.0)
    step = params.layer_compute_seconds + params.allreduce_seconds
    assert params.steps == max(1, round(30 * 3600 * 3.0 / step))


@pytest.mark.parametrize("scale, match", [(1e306, "overflows a float"), (1e12, "more than the 1,000,000,000")])
def test_kind1_compare_time_scale_beyond_the_step_count_is_one_line(small_log, scale, match):
    trace = parse_fault_csv(LOG, time_unit="hours")
    with pytest.raises(ParameterError, match=match):
        compare_parameters(groups=4, trace=trace, time_scale=scale)
    line = error_line(cli("compare", "--trace", small_log, "--time-unit", "hours", "--time-scale", scale, "-q"), 1)
    assert match in line


def test_kind1_steps_in_refuses_what_int_cannot_hold():
    params = compare_parameters(groups=4, steps=10)
    step = params.layer_compute_seconds + params.allreduce_seconds
    assert steps_in(step * MAX_STEPS, params) == MAX_STEPS
    for seconds in (float("inf"), step * (MAX_STEPS + 1)):
        with pytest.raises(ParameterError):
            steps_in(seconds, params)


def test_kind1_simulate_time_scale_that_overflows_is_one_line_without_warnings(small_log):
    result = cli("simulate", "--trace", small_log, "--time-unit", "hours", "--preset", "trace-400",
                 "--time-scale", 1e306, "-q")
    assert "overflows a float" in error_line(result, 1)
    assert "RuntimeWarning" not in result.stderr


# ================================================== 2. group ids beyond int32
@pytest.mark.parametrize("group", [12, 2**31, 2**31 - 1, 2**64, 10**30])
def test_kind2_placement_group_beyond_n_is_outside_0_n_however_large(group):
    placement = Placement({"a": [1, group], "b": 4})
    with pytest.raises(PlacementError, match=rf"placed on group {group}, outside \[0, N = 12\)"):
        placement.resolve(["a", "b"], 12)
    indptr, ids = Placement({"a": [1, 11], "b": 4}).resolve(["b", "a"], 12)
    assert indptr.tolist() == [0, 1, 3] and ids.tolist() == [4, 1, 11]


def test_kind2_placement_groups_key_beyond_int32_is_refused():
    with pytest.raises(PlacementError, match=r"'groups' must be an integer in \[1, 2,147,483,647\]"):
        Placement({"a": 1}, groups=2**31)


@pytest.mark.parametrize("command", ["replay", "simulate"])
def test_kind2_placement_file_without_groups_beyond_int32_is_one_line(tmp_path, command):
    log = write(tmp_path, "log.csv", LOG)
    path = write(tmp_path, "p.json", {"format": "spare-placement", "version": 1, "nodes": {"n1": 2**31}})
    if command == "replay":
        layout = tmp_path / "l12.json"
        sidon(12, 3, seed=0).save(layout)
        args = ["replay", layout, "--trace", log, "--time-unit", "hours"]
        n = 12
    else:
        args = ["simulate", "--trace", log, "--time-unit", "hours", "--preset", "trace-400", "-q"]
        n = 400
    line = error_line(cli(*args, "--placement", path), 1)
    assert f"placed on group 2147483648, outside [0, N = {n})" in line


# ====================================== 3. Weibull shapes that underflow later
def _model(**fields):
    base = dict(cluster_nodes=6, event_mtbf_seconds=74828.6, weibull_shape=0.8, repair_median_seconds=3.5e4,
                repair_sigma=1.3, window_seconds=300.0)
    return FailureModel(**{**base, **fields})


@pytest.mark.parametrize("window", [0.0, 300.0])
@pytest.mark.parametrize("mtbf", [74828.6, 300.0 * (1 + 1e-12), 1e12])
def test_kind3_the_least_accepted_shape_samples_finite_gaps_beyond_the_window(window, mtbf):
    model = _model(weibull_shape=MIN_WEIBULL_SHAPE, window_seconds=window, event_mtbf_seconds=mtbf)
    assert 0.0 < model.weibull_scale_seconds < math.inf
    gaps = model.sample_gaps_seconds(np.random.default_rng(0), 100_000)
    assert np.all(np.isfinite(gaps)) and np.all(gaps >= window) and np.all(gaps > 0)


@pytest.mark.parametrize("shape", [1.0, 1e300])
def test_kind3_large_shapes_keep_the_window_form_of_the_draws(shape):
    model = _model(weibull_shape=shape)
    gaps = model.sample_gaps_seconds(np.random.default_rng(0), 1000)
    assert np.all(np.isfinite(gaps)) and np.all(gaps > 300.0)
    if shape == 1.0:  # exponential excess over the window: mean = event MTBF
        assert abs(gaps.mean() - 74828.6) < 0.15 * 74828.6


@pytest.mark.parametrize("shape", [MIN_WEIBULL_SHAPE * (1 - 1e-9), 0.007, 1e-300])
def test_kind3_shapes_below_the_bound_are_refused_by_every_reader(tmp_path, shape):
    for build in (lambda: _model(weibull_shape=shape),
                  lambda: SimulationParameters(groups=12, weibull_shape=shape),
                  lambda: synthetic_fault_trace(nodes=10, days=5.0, weibull_shape=shape)):
        with pytest.raises(ParameterError, match="weibull_shape must be >= 0.05"):
            build()
    doc = _model().to_dict()
    doc["weibull_shape"] = shape
    with pytest.raises(FailureModelError, match="weibull_shape must be >= 0.05"):
        FailureModel.from_dict(doc)
    path = write(tmp_path, "model.json", doc)
    result = cli("simulate", "--failure-model", path, "--preset", "trace-400", "--seeds", 1, "-q")
    assert "weibull_shape must be >= 0.05" in error_line(result, 1)


def test_kind3_model_runs_count_renewals_before_drawing():
    # shape 0.05, an hour's MTBF over 1e9 s: 2.8e5 events by the mean, 1.8e6 draws by renewals
    model = _model(weibull_shape=MIN_WEIBULL_SHAPE, window_seconds=0.0, event_mtbf_seconds=3600.0)
    assert 1e9 / 3600.0 < MAX_SAMPLE_EVENTS < weibull_renewals(1e9, 3600.0, MIN_WEIBULL_SHAPE)
    with pytest.raises(ParameterError, match="failure events of the model"):
        model_events(model, 6, "spare", 3, horizon_seconds=1e9)


# ================================================ 4. more local workers than CPUs
def test_kind4_local_processes_are_at_most_one_per_cpu():
    cpus = os.cpu_count() or 1
    assert local_processes(10**5) == cpus and local_processes(-1) == cpus and local_processes(1) == 1
    with pytest.raises(ParameterError):
        local_processes(0)


def test_kind4_a_local_dask_cluster_of_100000_workers_starts_one_per_cpu():
    pytest.importorskip("distributed")
    with dask_executor("local", workers=10**5) as executor:
        assert parallelism(1, executor) == (os.cpu_count() or 1)
        assert list(executor.map(abs, [-1, -2])) == [1, 2]


# ==================================== 5. wipe-out pairs of overlapping domains
def _brute_wipe_out_pairs(layout, topology, level):
    members = {label: set(groups.tolist()) for label, groups in topology.domains(level).items()}
    holders = [set(np.flatnonzero((layout.stacks == t).any(axis=1)).tolist()) for t in range(layout.groups)]
    labels = sorted(members, key=str)
    count = 0
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            union = members[a] | members[b]
            count += any(h <= union and not h <= members[a] and not h <= members[b] for h in holders)
    return count


def test_kind5_the_issue_case_a_inside_b_has_no_pair():
    topology = Topology(3, {"d": [["A", "B"], ["B"], []]})  # A = {0}, B = {0, 1}
    level = domain_report(consecutive(3, 2), topology).levels["d"]
    assert level["wipe_out_domains"] == 1 and level["wipe_out_pairs"] == 0


def test_kind5_wipe_out_pairs_match_a_brute_force_on_overlapping_domains():
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(60):
        n = int(rng.integers(3, 9))
        r = int(rng.integers(2, min(n, 4) + 1))
        layout = consecutive(n, r) if rng.random() < 0.5 else Layout(np.roll(consecutive(n, r).stacks, 1, axis=0))
        k = int(rng.integers(2, 5))
        entries = [[f"d{j}" for j in range(k) if rng.random() < 0.45] for _ in range(n)]
        topology = Topology(n, {"x": entries})
        if len(topology.domains("x")) < 2:
            continue
        level = domain_report(layout, topology).levels["x"]
        assert level["wipe_out_pairs"] == _brute_wipe_out_pairs(layout, topology, "x"), (entries, r)
        checked += 1
    assert checked > 30


# ================================ 6. --until-days with the trace's domain column
DOMAIN_LOG = "node,start,end,domain\nn1,1,5,rack-a\nn2,3,8,rack-b\nn3,20,30,rack-a\n"  # hours


def _domain_sets(topology):
    return {label: members.tolist() for label, members in topology.domains("domain").items()}


def test_kind6_until_days_keeps_the_nodes_with_a_fault_before_it():
    trace = parse_fault_csv(DOMAIN_LOG, time_unit="hours")
    full = _domain_sets(derived_topology(trace, 3))
    assert full == _domain_sets(derived_topology(trace, 3, until_days=1e308))
    assert len(full) == 2 and sum(map(len, full.values())) == 3
    assert _domain_sets(derived_topology(trace, 3, until_days=0.0)) == {}
    assert _domain_sets(derived_topology(trace, 3, until_days=-1.0)) == {}
    prefix = _domain_sets(derived_topology(trace, 3, until_days=2 / 24))  # n1 only
    assert len(prefix) == 1 and list(prefix.values())[0] == [trace.node_groups(3)[trace.node_ids.index("n1")]]


def test_kind6_until_days_changes_the_cli_topology_and_a_window_is_refused(tmp_path):
    log = write(tmp_path, "log.csv", DOMAIN_LOG)
    summaries = []
    for days in (-1, 0, 0.1, 1e308):
        # --observed-only: the domains the trace shows, without the groups placed by inference
        result = cli("topology", "--groups", 3, "--from-trace", log, "--time-unit", "hours", "--until-days", days,
                     "--observed-only", "-o", tmp_path / f"t{days}.json")
        assert result.exit_code == 0, result.output
        summaries.append(json.loads((tmp_path / f"t{days}.json").read_text())["levels"]["domain"])
    assert summaries[0] == summaries[1] == [[], [], []] and summaries[2] != summaries[3]
    with pytest.raises(ParameterError, match="window_days groups co-failures"):
        derived_topology(parse_fault_csv(DOMAIN_LOG, time_unit="hours"), 3, window_days=1.0)
    result = cli("topology", "--groups", 3, "--from-trace", log, "--time-unit", "hours", "--window-days", 1,
                 "-o", tmp_path / "w.json")
    assert "window_days groups co-failures" in error_line(result, 1)


# ============================================ 7. runs that overshoot the wall cap
def test_kind7_a_last_step_beyond_the_wall_cap_does_not_finish_the_run():
    from spare_opt.simulation import _kernels as K
    from spare_opt.simulation._runs import run_events

    no_events = np.zeros((0, K.N_EV))
    for factor, finished in ((0.5, False), (1.0, True), (3.0, True)):
        params = SimulationParameters(groups=4, steps=1, layer_compute_seconds=100.0, jitter_sd=0.0,
                                      max_wall_factor=factor)
        run = run_events(params, "ckpt", 1, 1e9, 0, no_events)
        assert run.finished is finished and 0.0 <= run.availability <= 1.0
        assert (run.ttt_ratio <= factor) if finished else run.ttt_ratio == math.inf


def test_kind7_compare_with_steps_longer_than_the_cycles_finishes_nothing_beyond_them(small_log):
    trace = parse_fault_csv(LOG, time_unit="hours")
    params = compare_parameters(groups=4, trace=trace, step_seconds=1e6)
    verdict = compare(params, trace=trace, rep_redundancies=(2,), spare_redundancies=(2,), micro_batches=(1,),
                      period_factors=(1.0,), seeds=1, cycles=2)
    rows = verdict.to_dict()["settings"]
    assert rows
    for row in rows:
        assert 0.0 <= row["availability"] <= 1.0
        assert row["ttt_ratio"] is None or row["ttt_ratio"] <= 2.0


# ==================================================== 8. malformed plans
BAD_VALUES = [None, [], [[]], [1.5], [True, False], "x", 3, 2.5, True, {}, {"a": 1}, [[0, 1], [2]],
              np.zeros((2, 2, 2), dtype=int), np.array([0.0, 1.0]), [-1], [10**6], object()]


@pytest.mark.parametrize("micro_batches", [1, 2])
def test_kind8_every_malformed_field_is_a_plan_error_or_false(micro_batches):
    layout = sidon(12, 3, seed=0)
    plan = plan_reorder(layout, [0, 5], micro_batches=micro_batches)
    check_plan(layout, plan)
    fields = ["failed", "lost_shards", "assignment", "order", "moves", "patch", "micro_batches", "load",
              "step_cost", "split", "status", "stack_number", "lower_bound"]
    for name in fields:
        for value in BAD_VALUES + [{0: [1]}, {"g": [1]}, {1: "x"}, {1: [(0, 0, 0)]}, {1: [99]}]:
            broken = copy.copy(plan)
            object.__setattr__(broken, name, value)
            try:
                check_plan(layout, broken)
            except PlanError:
                assert is_valid_plan(layout, broken) is False
            else:
                assert is_valid_plan(layout, broken) is True
    for value in BAD_VALUES:
        for keyword in ("previous_order", "previous_split"):
            try:
                check_plan(layout, plan, **{keyword: value})
            except PlanError:
                pass


def test_kind8_the_issue_case_failed_empty_names_the_rule():
    layout = sidon(12, 3, seed=0)
    plan = copy.copy(plan_reorder(layout, [3]))
    plan.failed = []
    with pytest.raises(PlanError, match="c\\(k\\)|lower_bound"):
        check_plan(layout, plan)
    assert is_valid_plan(layout, plan) is False


# ========================== 9. booleans and empty containers where they do not belong
def _layout_doc(**fields):
    doc = sidon(7, 3, seed=0).to_dict()
    doc.update(fields)
    return doc


@pytest.mark.parametrize("stacks", [[[0, True, 3]], "boolean anywhere"])
def test_kind9_the_layout_reader_refuses_booleans_in_stacks(tmp_path, stacks):
    doc = _layout_doc()
    rows = [list(row) for row in doc["stacks"]]
    if stacks == "boolean anywhere":
        rows[6][2] = False if rows[6][2] == 0 else True
    else:
        rows[0][1] = True if rows[0][1] == 1 else rows[0][1]
        rows[3][0] = True
    with pytest.raises(LayoutFileError, match="true/false are not"):
        Layout.from_dict({**doc, "stacks": rows})
    path = write(tmp_path, "l.json", {**doc, "stacks": rows})
    assert "true/false are not" in error_line(cli("validate", path), 1)


@pytest.mark.parametrize("metadata", [[], 0, "", False, 1, [1]])
def test_kind9_metadata_that_is_not_an_object_is_refused_by_every_reader(metadata):
    with pytest.raises(LayoutFileError, match="'metadata' must be an object or null"):
        Layout.from_dict(_layout_doc(metadata=metadata))
    doc = {"format": "spare-failure-trace", "version": 1, "metadata": metadata, "events": []}
    with pytest.raises(TraceError, match="'metadata' must be an object or null"):
        parse_fault_events(doc)


def test_kind9_missing_or_null_metadata_is_empty():
    assert Layout.from_dict(_layout_doc(metadata=None)).metadata == {}
    doc = _layout_doc()
    del doc["metadata"]
    assert Layout.from_dict(doc).metadata == {}


# ============================================================ 10. UTC offsets
@pytest.mark.parametrize("zone", ["+05:99", "-05:60", "+0599", "+24:00", "-99:00"])
def test_kind10_utc_offsets_beyond_23_59_are_refused(tmp_path, zone):
    text = f"node,start,end\nn1,2024-01-01T10:00:00{zone},2024-01-02T10:00:00Z\nn2,2024-01-03,2024-01-04\n"
    with pytest.raises(TraceError, match=r"line 2: start .* is not a valid timestamp \(a UTC offset is -23:59"):
        parse_fault_csv(text)
    line = error_line(cli("topology", "--groups", 4, "--from-trace", write(tmp_path, "log.csv", text),
                          "-o", tmp_path / "t.json"), 1)
    assert "a UTC offset is -23:59 to +23:59" in line


@pytest.mark.parametrize("zone, hours", [("+05:59", 5 + 59 / 60), ("-23:59", -(23 + 59 / 60)), ("+05", 5.0),
                                         ("+0530", 5.5), ("Z", 0.0)])
def test_kind10_offsets_within_range_shift_the_time_by_their_hours_and_minutes(zone, hours):
    trace = parse_fault_csv(f"node,start,end\nn1,2024-01-02T10:00:00{zone},2024-01-05T10:00:00Z\n")
    # day 0 is the first start; the end is 3 days after 10:00 UTC, the start 10:00 minus the offset
    assert trace.times_days[1] - trace.times_days[0] == pytest.approx(3.0 + hours / 24)


# =================================================== 11. SIGTERM during a write
_HOLD_THE_WRITE = """
import os, sys, time
real_fsync = os.fsync
def held_fsync(fd):  # the temporary file exists and holds the data: hold the write here
    print("writing", flush=True)
    time.sleep(60)
    real_fsync(fd)
os.fsync = held_fsync
"""


@pytest.mark.parametrize("how", ["api", "api-force", "cli"])
def test_kind11_sigterm_during_a_write_leaves_no_temporary_file(tmp_path, how):
    target = tmp_path / "target.json"
    if how == "api-force":
        target.write_text("old")
    if how == "cli":
        body = (f"from spare_opt_cli.main import main\n"
                f"main(['layout', '--groups', '12', '--redundancy', '3', '-o', {str(target)!r}])\n")
    else:
        body = (f"from spare_opt._core.io import write_atomic\n"
                f"write_atomic({str(target)!r}, b'x' * 1_000_000, force={how == 'api-force'})\n")
    child = subprocess.Popen([sys.executable, "-c", _HOLD_THE_WRITE + body], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "writing", child.stderr.read()
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # the write is under way
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=30)
    finally:
        child.kill()
    assert child.returncode == -signal.SIGTERM  # still ends as killed by SIGTERM
    assert "Traceback" not in child.stderr.read()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["target.json"] if how == "api-force" else [])
    if how == "api-force":
        assert target.read_text() == "old"


def test_kind11_a_handler_of_the_application_is_left_alone_and_restored():
    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        from spare_opt._core.io import write_atomic

        with tempfile.TemporaryDirectory() as folder:
            write_atomic(os.path.join(folder, "f"), b"data")
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert signal.getsignal(signal.SIGTERM) is previous


# ======================================================== 12. options that do nothing
@pytest.fixture
def l12_and_racks(tmp_path):
    layout, racks = tmp_path / "l12.json", tmp_path / "racks.json"
    sidon(12, 3, seed=0).save(layout)
    Topology.blocks(12, {"rack": 4}).save(racks)
    return layout, racks


def test_kind12_baselines_without_a_domain_probability_are_refused_with_or_without_topology(l12_and_racks):
    layout, racks = l12_and_racks
    line = error_line(cli("validate", layout, "--topology", racks, "--baselines", "sidon"), 2)
    assert "--baselines needs --domain-probability or --failure-model" in line
    assert "--baselines needs --topology" in error_line(cli("validate", layout, "--baselines", "sidon"), 2)


def test_kind12_baselines_with_a_domain_probability_still_run(l12_and_racks):
    layout, racks = l12_and_racks
    result = cli("validate", layout, "--topology", racks, "--baselines", "consecutive", "--domain-probability",
                 0.1, "--trials", 50, "--json")
    assert result.exit_code == 0, result.output
    assert "consecutive" in result.stdout


# ====================================== 13. messages that contradict themselves
def test_kind13_n_above_the_planner_limit_names_the_limit_on_n():
    from spare_opt import MAX_SPLIT_ENTRIES
    from spare_opt.planning.plan import check_micro_batches

    with pytest.raises(ParameterError, match=r"N = 16,777,217 groups is above the limit of 16,777,216 groups") as info:
        check_micro_batches(1, MAX_SPLIT_ENTRIES + 1)
    assert "smaller m" not in str(info.value)
    with pytest.raises(ParameterError, match="choose a smaller m"):
        check_micro_batches(2, MAX_SPLIT_ENTRIES // 2 + 1)


def test_kind13_plan_refuses_a_huge_layout_from_its_header_before_loading(tmp_path):
    # the stacks are not even JSON: loading would fail; the header alone refuses the file
    path = tmp_path / "huge.json"
    path.write_text('{\n "format": "spare-layout",\n "version": 1,\n "groups": 16777217,\n "redundancy": 3,\n'
                    ' "stacks": [ not loaded')
    line = error_line(cli("plan", path, "--fail", 0), 1)
    assert "N = 16,777,217 groups is above the limit of 16,777,216 groups" in line and str(path) in line
    small = tmp_path / "small.npz"
    sidon(12, 3, seed=0).save(small)
    assert layout_file_size(small) == (12, 3) and layout_file_size(tmp_path / "missing.json") is None
    assert cli("plan", small, "--fail", 0).exit_code == 0


def test_kind13_layout_warns_when_plan_cannot_take_what_it_wrote(tmp_path, monkeypatch):
    import spare_opt_cli.layout

    monkeypatch.setattr(spare_opt_cli.layout, "MAX_SPLIT_ENTRIES", 10)  # N = 12 above a limit of 10
    result = cli("layout", "--groups", 12, "--redundancy", 3, "-o", tmp_path / "l.json")
    assert result.exit_code == 0
    assert "Warning: spare-opt plan cannot take this layout: N = 12 is above its limit of 10 groups" in result.stderr


def test_kind13_a_topology_with_no_domain_has_multiplicity_and_lower_bound_0(tmp_path):
    topology = Topology(12, {"rack": [[]] * 12})
    layout = domain_safe(12, 3, topology)
    assert layout.metadata["domain_multiplicity"] == 0 and layout.metadata["domain_multiplicity_lower_bound"] == 0
    path = write(tmp_path, "t.json", topology.to_dict())
    result = cli("layout", "--groups", 12, "--redundancy", 3, "--topology", path, "-o", tmp_path / "l.json")
    assert "at most 0 holder(s) of a shard type in one domain, lower bound 0" in result.stdout
    assert "no group is in a domain" in result.stdout


# ===================================================== the smaller findings
def test_also_fail_of_a_failed_group_points_to_recover():
    controller = ReorderController(sidon(12, 3, seed=0))
    controller.fail([2])
    with pytest.raises(FailureSetError, match=r"recover\(\) brings it back"):
        controller.fail([2])


def test_also_recover_takes_a_0d_array_as_fail_does():
    controller = ReorderController(sidon(12, 3, seed=0))
    controller.fail(np.array(4))
    plan = controller.recover(np.array(4))
    assert plan.failed.tolist() == [] and plan.stack_number == 1
    with pytest.raises(FailureSetError, match="not an integer"):
        controller.recover(np.array(4.0))


@pytest.mark.parametrize("content", ["3, 7", "[3, 7]"])
def test_also_a_failure_set_file_with_a_byte_order_mark_is_read(tmp_path, content):
    path = tmp_path / "F.txt"
    path.write_bytes(b"\xef\xbb\xbf" + content.encode())
    assert read_failure_set(path) == [3, 7]


def test_also_a_placement_listing_a_group_twice_is_refused_like_a_topology_label():
    with pytest.raises(PlacementError, match="lists group 3 twice"):
        Placement({"a": [3, 1, 3]})
    with pytest.raises(TopologyError, match="twice"):
        Topology(4, {"rack": [["r0", "r0"], "r1", "r1", "r1"]})


@pytest.mark.parametrize("micro_batches", [1, 4])
def test_also_the_replay_maximum_of_s_covers_the_rows_after_recoveries(real_trace_path, micro_batches):
    from spare_opt import read_fault_trace, replay_trace

    result = replay_trace(sidon(400, 5, seed=0), read_fault_trace(real_trace_path), semantics="repair",
                          micro_batches=micro_batches)
    s = result.summary
    assert s["recoveries"] > 0
    assert s["max_stack_number"] >= max([s["final_stack_number"]] + [row.stack_number for row in result.rows])
    text = result.format_text()
    assert f"{s['masked']} masked in {s['masked_batches']} batches, {s['wipe_outs']} wipe-out(s) of " \
           f"{s['group_failures'] - s['masked']} group failures" in text
    assert ("S: most shard types a live group computes part of" in text) is (micro_batches > 1)


def test_also_demo_stage_callback_is_checked_before_any_work(tmp_path):
    from spare_opt import ParameterTypeError, run_demo

    with pytest.raises(ParameterTypeError, match="stage must be a callable"):
        run_demo(tmp_path / "demo", stage=42)
    assert not (tmp_path / "demo").exists()


def test_also_plan_json_writes_each_array_on_one_line(tmp_path):
    path = tmp_path / "l.json"
    sidon(600, 5, seed=0).save(path)
    result = cli("plan", path, "--fail", "3,17", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc == json.loads(json.dumps(plan_reorder(sidon(600, 5, seed=0), [3, 17]).to_dict(),
                                        default=lambda a: a.tolist()))
    assert len(result.stdout.splitlines()) < 2 * 600 + 50  # one line per order row, not per integer
    assert any(line.strip().startswith('"assignment": [') and line.rstrip().endswith("],")
               for line in result.stdout.splitlines())

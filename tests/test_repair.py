"""Repair semantics and fault-model events: hand-made traces with hand-computed wall times, and the rules."""

import numpy as np
import pytest

from spare_opt import (
    FailureEvents,
    FailureModel,
    Layout,
    ParameterError,
    ParameterTypeError,
    SimulationParameters,
    model_events,
    parse_fault_events,
    read_fault_trace,
    simulate,
    simulate_seeds,
    trace_events,
)
from spare_opt.simulation.time_to_train import trace_failures

# A step of replication r = 2 is 2 x 6 h = half a day, SPARe's S x 6 h: every trace time
# below is a dyadic fraction of a day, so every sum is exact.
LAYER = 21600.0
SHRINK = 3600.0


def params(groups, steps, heal=0.0, **more):
    fields = dict(groups=groups, steps=steps, layer_compute_seconds=LAYER, allreduce_seconds=0.0,
                  shrink_seconds=SHRINK, controller_seconds=0.0, restart_seconds=86400.0, save_seconds=1.0,
                  jitter_sd=0.0, heal_seconds=heal)
    fields.update(more)
    return SimulationParameters(**fields)


def trace(*events):
    """A trace from ``(node, day, "start" | "end")`` tuples."""
    return parse_fault_events([
        {"node_id": node, "event_time": day, "event_type": f"fault_{kind}", "fault_type": {"Class": "GPU"}}
        for node, day, kind in events])


def run(p, strategy, r, tr, semantics, **kw):
    return simulate(p, strategy, r, trace=tr, semantics=semantics, checkpoint_period_seconds=1e12, **kw)


SIDON7 = Layout((np.arange(7)[:, None] + [0, 1, 3]) % 7, offsets=[0, 1, 3])


def test_repair_rejoin_keeps_a_replica_set_alive():
    # rep r = 2 on N = 4: replica sets {0, 2} and {1, 3}; nodes a, b, c are groups 0, 1, 2.
    # Step 0 = [0, 43200): a fails at 0.25 d (21600 s), b at 0.5 d (43200 s, still inside
    # step 0, which the first shrink made 46800 s long): two shrinks, step 0 ends at
    # 50400.  b is repaired at the same instant (a repair below the trace's resolution):
    # healed (7200 s) it is ready at 50400, inside step 1 = [50400, 93600), and joins at
    # its end (+ 3600: 97200).  a is repaired at 1 d, ready at 93600, inside step 2 =
    # [97200, 140400): joins at its end, 144000.  c fails at 2 d inside step 3 =
    # [144000, 187200): its replica set still has group 0, masked: 190800.
    tr = trace(("a", 0.25, "start"), ("b", 0.5, "start"), ("b", 0.5, "end"), ("a", 1.0, "end"),
               ("c", 2.0, "start"))
    p = params(4, 4, heal=7200.0)
    repair = run(p, "rep", 2, tr, "repair")
    assert repair.wall_seconds == 190800.0
    assert repair.useful_seconds == 4 * 43200.0 and repair.overhead_seconds == 5 * SHRINK
    assert repair.rejoins == 2 and repair.masked_failures == 3 and repair.restarts == 0
    assert repair.semantics == "repair" and repair.trace["rejoined"] == 2
    # Under the paper's semantics group 0 stays out: c's failure at 172800 s, inside step
    # 3 = [136800, 180000), wipes the set {0, 2} out.  Everything since 0 is rework (no
    # checkpoint), then the restart and 4 fault-free steps.
    paper = run(p, "rep", 2, tr, "paper")
    assert paper.restarts == 1 and paper.rejoins == 0 and paper.trace["ends_ignored"] == 2
    assert paper.wall_seconds == 172800.0 + 86400.0 + 4 * 43200.0
    assert paper.rework_seconds == 172800.0


def test_repair_end_after_a_restart_is_counted_and_ignored():
    # Groups 0 and 2 (one replica set) fail in step 0: a wipe-out at 0.375 d = 32400 s,
    # restart until 118800 s with every group back (spares), then 4 steps.  The later
    # fault_end events of a and c bring nothing back; b, repaired at 0.3125 d, was still
    # healing (10 h) at the restart.
    tr = trace(("a", 0.25, "start"), ("b", 0.3125, "start"), ("b", 0.3125, "end"), ("c", 0.375, "start"),
               ("a", 2.0, "end"), ("c", 3.0, "end"))
    p = params(4, 4, heal=36000.0)
    out = run(p, "rep", 2, tr, "repair")
    assert out.restarts == 1 and out.rejoins == 0
    assert out.trace["ends_after_restart"] == 2 and out.trace["heals_cut_by_restart"] == 1
    assert out.wall_seconds == 32400.0 + 86400.0 + 4 * 43200.0
    assert out.rework_seconds == 32400.0


def test_repair_lowers_the_step_cost_of_spare():
    # SPARe on the 7-group Sidon layout {0, 1, 3}: one failure raises S to 2.  Group 0
    # fails at 0.125 d (10800 s) in step 0 = [0, 21600): its patch (one layer, 21600 s)
    # ends step 0 at 43200; steps then cost 2 layers.  Repaired at 0.75 d with no heal,
    # it is ready inside step 1 = [43200, 86400) and step 2 costs 1 layer again.
    tr = trace(("a", 0.125, "start"), ("a", 0.75, "end"))
    p = params(7, 3, shrink_seconds=0.0)
    repair = run(p, "spare", 3, tr, "repair", layout=SIDON7)
    assert repair.wall_seconds == 43200.0 + 43200.0 + 21600.0
    assert repair.mean_step_cost == pytest.approx(4.0 / 3.0) and repair.mean_stack_number == pytest.approx(4 / 3)
    assert run(p, "spare", 3, tr, "paper", layout=SIDON7).wall_seconds == 3 * 43200.0
    # A heal of half a day makes it ready at 108000 s, inside step 2 = [86400, 129600):
    # too late to help before the end of the run.
    healed = run(params(7, 3, heal=43200.0, shrink_seconds=0.0), "spare", 3, tr, "repair", layout=SIDON7)
    assert healed.wall_seconds == 3 * 43200.0 and healed.rejoins == 1


def test_failure_while_healing_cancels_the_rejoin():
    # Node a is repaired at 1 d, fails again at 1 d + 30 min while healing (heal 1 h),
    # and is repaired for good at 2 d: one rejoin only, at 2 d + 1 h.
    tr = trace(("a", 0.25, "start"), ("a", 1.0, "end"), ("a", 1.0 + 1 / 48, "start"), ("a", 2.0, "end"))
    events = trace_events(tr, 4, "rep", 2, semantics="repair", heal_seconds=3600.0)
    assert events.kinds.tolist() == [0, 1]
    assert events.times_seconds.tolist() == [21600.0, 2 * 86400.0 + 3600.0]
    assert events.counts["failed_while_healing"] == 1 and events.counts["rejoined"] == 1


def test_paper_semantics_events_agree_with_the_replay(real_trace_path):
    # The paper's replay (spare_opt.replay_trace, its own loop over trace_instants) gives
    # the stack number after every reorder decision and each wipe-out: the paper
    # semantics events must be those decisions, with the same outcomes.
    from spare_opt import default_layout, replay_trace

    tr = read_fault_trace(real_trace_path)
    layout = default_layout(400, 4)
    events = trace_events(tr, 400, "spare", 4, layout=layout, time_scale=0.1)
    replay = replay_trace(layout, tr)
    decisions = {}
    for row in replay.rows:
        if row.batch >= 0:
            decisions[row.batch] = (row.time_days * 86400.0 * 0.1, row.status == "wipe-out", row.stack_number)
    assert len(decisions) == len(events) and not events.kinds.any()
    times, wipes, stacks = (np.array(column) for column in zip(*(decisions[b] for b in sorted(decisions))))
    assert np.array_equal(times, events.times_seconds) and np.array_equal(wipes, events.wipe_outs)
    assert np.array_equal(stacks[~wipes], events.stack_numbers[~wipes])
    # trace_failures, kept for its callers, is a view of the same events
    times, stacks, wipe_outs, counts = trace_failures(tr, 400, "spare", 4, layout=layout, time_scale=0.1)
    assert np.array_equal(times, events.times_seconds) and np.array_equal(stacks, events.stack_numbers)
    assert counts["failure_events"] == len(events)


@pytest.mark.parametrize("strategy, r", [("rep", 3), ("spare", 4)])
def test_repair_events_of_the_real_trace_account_for_every_fault(real_trace_path, strategy, r):
    tr = read_fault_trace(real_trace_path)
    events = trace_events(tr, 400, strategy, r, semantics="repair", heal_seconds=60.0)
    c = events.counts
    usable = c["fault_starts"] - c["ignored_by_reader"] - c["outside_cluster"]
    assert c["used"] + c["already_down"] + c["failed_while_healing"] == usable
    # every usable end starts a heal or is ignored after a restart; heals end in a rejoin,
    # are cut by a restart, or are cancelled by a new failure
    heals = c["fault_ends"] - c["ends_after_restart"]
    assert heals == c["rejoined"] + c["heals_cut_by_restart"] + c["failed_while_healing"]
    assert np.all(np.diff(events.times_seconds) >= 0) and not events.wipe_outs[events.kinds == 1].any()
    # replay the rules by hand: a group is down exactly between its failure and its rejoin
    down = np.zeros(400, dtype=bool)
    for kind, groups, wiped in zip(events.kinds, events.event_groups, events.wipe_outs):
        if kind == 0:
            assert not down[groups].any()
            down[groups] = True
            if wiped:
                down[:] = False
        else:
            assert down[groups].all()
            down[groups] = False
    if strategy == "spare":
        assert events.step_costs.max() <= r and set(np.unique(events.stack_numbers)) <= set(range(1, r + 1))


MODEL = FailureModel(cluster_nodes=50, event_mtbf_seconds=4 * 3600.0, weibull_shape=0.7,
                     repair_median_seconds=6 * 3600.0, repair_sigma=1.0, event_size_probabilities=(0.8, 0.2))


def test_model_events_are_prefix_stable_and_seeded():
    short = model_events(MODEL, 50, "rep", 3, horizon_seconds=5e5, semantics="repair", seed=4)
    long = model_events(MODEL, 50, "rep", 3, horizon_seconds=2e6, semantics="repair", seed=4)
    other = model_events(MODEL, 50, "rep", 3, horizon_seconds=5e5, semantics="repair", seed=5)
    assert isinstance(short, FailureEvents) and not short.complete
    head = long.times_seconds <= 5e5
    assert np.array_equal(long.times_seconds[head], short.times_seconds)
    assert np.array_equal(long.kinds[head], short.kinds)
    assert all(np.array_equal(a, b) for a, b in zip(long.event_groups, short.event_groups))
    assert not np.array_equal(other.times_seconds, short.times_seconds)
    assert short.times_seconds.max() <= 5e5 and (short.kinds == 1).any()
    # about one failure event every 4 h: a loose check of the rate (several sigma wide)
    failures = int(np.count_nonzero(long.kinds == 0))
    assert 2e6 / (4 * 3600.0) * 0.6 < failures + long.counts["already_down"] < 2e6 / (4 * 3600.0) * 1.5


def test_model_event_rate_scales_with_the_groups():
    # each group fails like one node of the fitted cluster: twice the groups, twice the events
    few = model_events(MODEL, 50, "ckpt", None, horizon_seconds=4e6, seed=1)
    many = model_events(MODEL, 100, "ckpt", None, horizon_seconds=4e6, seed=1)
    assert 1.6 < len(many) / len(few) < 2.5


def test_simulate_with_a_fault_model_is_deterministic_and_repairs_help():
    p = params(50, 400, heal=60.0, layer_compute_seconds=60.0, restart_seconds=1800.0, save_seconds=30.0,
               shrink_seconds=0.1)
    paper = simulate_seeds(p, "spare", 4, fault_model=MODEL, seeds=3)
    repair = simulate_seeds(p, "spare", 4, fault_model=MODEL, seeds=3, semantics="repair")
    again = simulate(p, "spare", 4, fault_model=MODEL, seed=1, semantics="repair")
    assert again == repair[1]
    assert all(run.finished for run in paper + repair)
    assert sum(run.rejoins for run in repair) > 0 and all(run.rejoins == 0 for run in paper)
    assert np.mean([r.mean_step_cost for r in repair]) < np.mean([r.mean_step_cost for r in paper])


def test_source_checks():
    p = params(4, 4)
    tr = trace(("a", 0.25, "start"))
    with pytest.raises(ParameterError, match="repair"):
        simulate(p, "rep", 2, semantics="repair")
    with pytest.raises(ParameterError, match="not both"):
        simulate(p, "rep", 2, trace=tr, fault_model=MODEL)
    with pytest.raises(ParameterError, match="semantics"):
        simulate(p, "rep", 2, trace=tr, semantics="fast")
    with pytest.raises(ParameterTypeError):
        simulate(p, "rep", 2, fault_model="model.json")
    with pytest.raises(ParameterTypeError):
        simulate(p, "rep", 2, trace=tr, micro_batches=1.5)
    with pytest.raises(ParameterError):
        SimulationParameters(groups=4, heal_seconds=-1.0)
    with pytest.raises(ParameterError):
        trace_events(tr, 4, "rep", 2, heal_seconds=float("nan"))


# ----------------------------------------------------------------------------- CLI
def _cli(args):
    from click.testing import CliRunner

    from spare_opt_cli.main import main

    return CliRunner().invoke(main, args)


def test_cli_simulate_repair_with_a_trace_and_a_fault_model(real_trace_path, tmp_path):
    import json

    base = ["simulate", "--preset", "trace-400", "--strategy", "rep", "-r", "3", "--seeds", "2", "--set",
            "steps=4000", "--ckpt-period", "20000"]
    out = _cli(base + ["--trace", str(real_trace_path), "--trace-time-scale", "0.01", "--semantics", "repair",
                       "--heal-seconds", "120"])
    assert out.exit_code == 0, out.output
    assert "repair semantics" in out.output and "rejoins" in out.output and "groups rejoined" in out.output
    assert "per executed step" in out.output
    model_path = tmp_path / "model.json"
    MODEL.save(model_path)
    out = _cli(base + ["--failure-model", str(model_path), "--semantics", "repair", "--json", "--groups", "400"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["semantics"] == "repair" and doc["micro_batches"] == 1 and doc["mean_step_cost"] == 3.0
    assert doc["parameters"]["heal_seconds"] == 60.0 and all(run["rejoins"] > 0 for run in doc["runs"])


@pytest.mark.parametrize("args, message", [
    (["--semantics", "repair"], "needs the repair times"),
    (["--heal-seconds", "5"], "--semantics repair only"),
    (["--strategy", "rep", "--micro-batches", "4"], "does not use it"),
    (["--semantics", "fast"], "Invalid value for '--semantics'"),
    (["--micro-batches", "0"], "--micro-batches"),
    (["--failure-model", "missing.json"], "missing.json"),
])
def test_cli_simulate_refuses_options_that_do_nothing(args, message):
    out = _cli(["simulate", "--seeds", "1", "--set", "steps=50"] + args)
    assert out.exit_code != 0 and message in out.output, out.output
    assert "Traceback" not in out.output


def test_repair_takes_one_instant_in_file_order():
    # Groups 0 and 2 form a replica set; nodes a, b, c are groups 0, 1, 2.  a is down from
    # 0.25 d; at 1 d its end and c's start share one instant.  End first: with no heal, a
    # is back before c fails (masked); start first: c fails while a is still down (a
    # wipe-out), and a's end comes after the restart.  The replay takes them so too.
    head = [("a", 0.25, "start"), ("b", 0.5, "start"), ("b", 0.625, "end")]
    end_first = trace(*head, ("a", 1.0, "end"), ("c", 1.0, "start"))
    start_first = trace(*head, ("c", 1.0, "start"), ("a", 1.0, "end"))
    events = trace_events(end_first, 4, "rep", 2, semantics="repair")
    assert events.kinds.tolist() == [0, 0, 1, 1, 0] and not events.wipe_outs.any()
    assert events.times_seconds[-2] == events.times_seconds[-1] == 86400.0
    events = trace_events(start_first, 4, "rep", 2, semantics="repair")
    assert events.kinds.tolist() == [0, 0, 1, 0] and events.wipe_outs.tolist() == [False, False, False, True]
    assert events.counts["ends_after_restart"] == 1


def test_failure_events_compare_by_value_and_write_json(real_trace_path):
    import json

    from spare_opt._core.io import dumps_json

    tr = read_fault_trace(real_trace_path)
    a = trace_events(tr, 400, "rep", 3, semantics="repair", heal_seconds=60.0)
    assert a == trace_events(tr, 400, "rep", 3, semantics="repair", heal_seconds=60.0)
    assert a != trace_events(tr, 400, "rep", 3, semantics="repair", heal_seconds=0.0)
    doc = json.loads(dumps_json(a.to_dict()))
    assert len(doc["events"]) == len(a) and doc["horizon_seconds"] is None
    assert {event["kind"] for event in doc["events"]} == {"failure", "rejoin"}


def test_model_events_are_bounded():
    # one failure event a second for a year: more than MAX_SAMPLE_EVENTS, refused
    busy = FailureModel(cluster_nodes=10, event_mtbf_seconds=1.0, weibull_shape=1.0, repair_median_seconds=1.0,
                        repair_sigma=0.1)
    with pytest.raises(ParameterError, match="failure events"):
        model_events(busy, 10, "ckpt", None, horizon_seconds=3.2e7)

"""Guarantees under failure domains, correlated Monte-Carlo, derived topologies, placements in replay, and the CLI."""

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from naive import circulant_stacks, naive_domains, naive_least_stack_number, random_latin_stacks
from spare_opt import (
    Layout,
    Placement,
    Topology,
    consecutive,
    derived_topology,
    domain_comparison,
    domain_monte_carlo,
    domain_report,
    domain_safe,
    least_stack_number,
    monte_carlo,
    parse_fault_events,
    replay_trace,
    sidon,
    trace_failures,
    trace_instants,
)
from spare_opt.guarantees.domains import _StackNumber
from spare_opt.guarantees.montecarlo import _domain_events
from spare_opt.layouts.domain_layouts import _checked_domains
from spare_opt_cli.main import main

REPO_INSTANCES = Path(__file__).resolve().parent.parent / "instances" / "small"


def cli(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def lost_types(stacks, failed):
    dead = set(int(g) for g in failed)
    return {t for t in range(len(stacks)) if all(g in dead for g in np.flatnonzero((stacks == t).any(axis=1)))}


def reference_report(layout, topology, level):
    """Worst single domain and worst pair by the exact planner on every failure set."""
    stacks = layout.stacks
    domains = [groups for _lvl, _label, groups in naive_domains(topology.to_dict()["levels"], [level])]
    singles = [least_stack_number(layout, sorted(groups)) for groups in domains]
    key = lambda s: (s is None, -1 if s is None else s)  # noqa: E731 - worst first: wipe-out, then largest S*
    pairs, wipe_pairs = [], 0
    for a, b in itertools.combinations(range(len(domains)), 2):
        union = sorted(domains[a] | domains[b])
        pairs.append(least_stack_number(layout, union))
        alone = lost_types(stacks, domains[a]) | lost_types(stacks, domains[b])
        wipe_pairs += bool(lost_types(stacks, union) - alone)
    return {
        "worst": max(singles, key=key) if singles else None,
        "wipe_out_domains": sum(s is None for s in singles),
        "worst_pair": max(pairs, key=key) if pairs else None,
        "wipe_out_pairs": wipe_pairs,
    }


# ------------------------------------------------------------------- report
@settings(max_examples=20, deadline=None)
@given(n=st.integers(8, 30), r=st.integers(2, 4), seed=st.integers(0, 10_000), size=st.integers(2, 6),
       shuffle=st.booleans())
def test_domain_report_matches_the_exact_planner_on_every_domain_and_pair(n, r, seed, size, shuffle):
    rng = np.random.default_rng(seed)
    layout = Layout(random_latin_stacks(n, r, rng)) if seed % 2 else Layout(circulant_stacks(n, range(r)))
    topology = Topology.blocks(n, {"rack": min(size, n)}, shuffle=shuffle, seed=seed)
    info = domain_report(layout, topology).levels["rack"]
    expected = reference_report(layout, topology, "rack")
    assert info["worst_stack_number"] == expected["worst"]
    assert info["worst_status"] == ("wipe-out" if expected["worst"] is None else "masked")
    assert info["wipe_out_domains"] == expected["wipe_out_domains"]
    assert info["wipe_out_pairs"] == expected["wipe_out_pairs"]
    if info["worst_pair"] is not None:
        assert info["worst_pair"]["stack_number"] == expected["worst_pair"]
        assert info["pair_search"] == "exhaustive" and info["pairs_evaluated"] == info["pairs_total"]
    # m = 1: the least load is the stack number; None when a domain wipes out.
    assert info["worst_load"] == (None if info["wipe_out_domains"] else expected["worst"])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(6, 12), r=st.integers(2, 4), seed=st.integers(0, 10_000), k=st.integers(1, 6))
def test_stack_number_certificate_agrees_with_brute_force(n, r, seed, k):
    rng = np.random.default_rng(seed)
    layout = Layout(random_latin_stacks(n, min(r, n), rng))
    failed = np.sort(rng.choice(n, size=min(k, n - 1), replace=False))
    assert _StackNumber(layout)(failed) == naive_least_stack_number(layout.stacks, failed)


def test_safe_layouts_report_safe_and_unsafe_ones_do_not():
    racks = Topology.blocks(240, {"rack": 8, "pod": 48})
    safe = domain_report(domain_safe(240, 6, racks), racks)
    assert set(safe.levels) == {"rack", "pod"}
    rack = safe.levels["rack"]
    assert rack["safe"] and rack["multiplicity"] == 1 and rack["domains"] == 30
    assert rack["worst_status"] == "masked" and rack["wipe_out_domains"] == 0 and rack["wipe_out_pairs"] == 0
    assert not safe.levels["pod"]["safe"]  # 48 x 6 > 240: impossible at pod level
    rotation = domain_report(consecutive(240, 6), racks, levels="rack").levels["rack"]
    assert not rotation["safe"] and rotation["worst_status"] == "wipe-out" and rotation["worst_pair"]["status"] == "wipe-out"
    screened = domain_report(domain_safe(240, 6, racks), racks, levels="rack", max_pairs=10).levels["rack"]
    assert screened["pairs_evaluated"] == 10 and screened["pairs_total"] == 435
    assert "share the most" in screened["pair_search"]
    doc = json.loads(json.dumps(safe.to_dict()))
    assert doc["levels"]["rack"]["worst_pair"]["lower_bound"] == 2


# -------------------------------------------------------------- Monte-Carlo
def test_correlated_model_with_p_zero_is_the_paper_model():
    layout = sidon(120, 5)
    racks = Topology.blocks(120, {"rack": 8})
    plain = monte_carlo(layout, trials=30, seed=4)
    correlated = domain_monte_carlo(layout, racks, domain_probability=0.0, trials=30, seed=4, chunk_size=7)
    np.testing.assert_array_equal(correlated.masked_groups, plain.masked)
    np.testing.assert_array_equal(correlated.masked_events, plain.masked)
    np.testing.assert_allclose(correlated.sbar_per_trial, plain.sbar_per_trial)
    assert correlated.domain_events.sum() == 0


def test_correlated_trials_follow_the_model_and_the_exact_planner():
    n, r = 48, 3
    layout = Layout(random_latin_stacks(n, r, np.random.default_rng(1)))
    topology = Topology.blocks(n, {"rack": 4}, shuffle=True, seed=2)
    result = domain_monte_carlo(layout, topology, domain_probability=0.4, trials=12, seed=9)
    again = domain_monte_carlo(layout, topology, domain_probability=0.4, trials=12, seed=9, chunk_size=1)
    assert result == again  # the same whatever the chunks
    domains = _checked_domains(layout, topology, None)
    members, bounds = domains._members()
    structure = (domains.indptr, domains.entry_domain, members, bounds)
    racks = [set(g) for _l, _k, g in naive_domains(topology.to_dict()["levels"], ["rack"])]
    for trial in range(12):
        order, ends, is_domain = _domain_events(n, structure, 0.4, 9, trial)
        assert sorted(order.tolist()) == list(range(n))
        events = np.split(order, ends[:-1])
        for batch, whole in zip(events, is_domain):
            rack = next(d for d in racks if batch[0] in d)
            if whole:  # a domain event takes groups of the struck group's rack only
                assert set(batch.tolist()) <= rack and len(batch) >= 2
            else:
                assert len(batch) == 1
        masked = int(result.masked_events[trial])
        before = order[:ends[masked - 1]] if masked else order[:0]
        after = order[:ends[masked]]
        assert not lost_types(layout.stacks, before) and lost_types(layout.stacks, after)
        assert result.masked_groups[trial] == before.size
        states = [1] + [least_stack_number(layout, order[:ends[e]]) for e in range(masked)]
        assert result.sbar_per_trial[trial] == pytest.approx(np.mean(states))


def test_domain_safe_layouts_survive_correlated_failures_longer():
    racks = Topology.blocks(240, {"rack": 8})
    rows = domain_comparison(domain_safe(240, 6, racks), racks, domain_probability=0.3, trials=40, seed=0)
    by_name = {row["name"]: row for row in rows}
    assert [row["name"] for row in rows] == ["layout", "sidon", "consecutive"]
    assert by_name["layout"]["safe"] and not by_name["consecutive"]["safe"]
    assert by_name["layout"]["mu"] > by_name["sidon"]["mu"] > by_name["consecutive"]["mu"]
    # With p = 1 every event takes a rack; 8 consecutive groups hold all 6 copies of some type.
    wiped = domain_monte_carlo(consecutive(240, 6), racks, domain_probability=1.0, trials=10)
    assert wiped.mu_events == 0 and wiped.mu == 0


# --------------------------------------------------------- derived topology
def _events(rows):
    return [{"node_id": node, "event_time": t, "event_type": kind,
             "fault_type": {"Level": "L1", "Class": "GPU", "Desc": ""}} for node, t, kind in rows]


def test_derived_topology_chains_co_failures_and_respects_window_and_cutoff():
    trace = parse_fault_events(_events([
        ("a", 1.0, "fault_start"), ("b", 1.0, "fault_start"),
        ("b", 1.5, "fault_end"),
        ("b", 2.0, "fault_start"), ("c", 2.0, "fault_start"),  # chains a-b-c
        ("d", 3.0, "fault_start"), ("e", 3.001, "fault_start"),  # close but not equal
        ("f", 9.0, "fault_start"), ("g", 9.0, "fault_start"),
    ]))
    domains = lambda t: {k: v.tolist() for k, v in t.domains("incident").items()}  # noqa: E731
    assert domains(derived_topology(trace, 10)) == {"incident-0": [0, 1, 2], "incident-1": [5, 6]}
    assert domains(derived_topology(trace, 10, window_days=0.01)) == {
        "incident-0": [0, 1, 2], "incident-1": [3, 4], "incident-2": [5, 6]}
    assert domains(derived_topology(trace, 10, until_days=5.0)) == {"incident-0": [0, 1, 2]}
    topology = derived_topology(trace, 10, level="ring")
    assert topology.levels == ("ring",) and topology.entries("ring")[9] == ()
    placed = derived_topology(trace, 10, placement_seed=3)
    mapping = trace.node_groups(10, seed=3)
    assert sorted(placed.domains("incident")["incident-0"].tolist()) == sorted(mapping[:3].tolist())


def test_derived_topology_of_the_real_trace_gives_a_domain_safe_layout(real_trace_path):
    from spare_opt import read_fault_trace

    trace = read_fault_trace(real_trace_path)
    topology = derived_topology(trace, 400)
    sizes = [m.size for m in topology.domains("incident").values()]
    assert max(sizes) <= 9 and len(sizes) >= 10
    layout = domain_safe(400, 9, topology)
    assert layout.metadata["domain_status"] == "safe"
    safe = replay_trace(layout, trace)
    plain = replay_trace(sidon(400, 9), trace)
    assert safe["wipe_outs"] <= plain["wipe_outs"]


# ------------------------------------------------------------- placements
def test_placements_in_trace_instants():
    trace = parse_fault_events(_events([
        ("n0", 1.0, "fault_start"), ("n1", 1.0, "fault_start"), ("n2", 2.0, "fault_start"),
        ("n3", 3.0, "fault_start"), ("n0", 4.0, "fault_end"),
    ]))
    identity = Placement({f"n{i}": i for i in range(4)})
    default, node_group = trace_instants(trace, 8)
    placed, placed_group = trace_instants(trace, 8, placement=identity)
    assert [i.failing.tolist() for i in default] == [i.failing.tolist() for i in placed]
    assert node_group.tolist() == placed_group.tolist()
    racks = Topology.blocks(8, {"rack": 4})
    placement = Placement({"n0": {"rack": "rack-1"}, "n1": 5, "n2": [0, 2]}, topology=racks)
    instants, node_group = trace_instants(trace, 8, placement=placement)
    assert [i.failing.tolist() for i in instants] == [[4, 5, 6, 7], [0, 2], [], []]
    assert instants[0].failing_events.tolist() == [0, 0, 0, 0]  # n0's event fails the whole rack
    assert node_group.tolist() == [4, 5, 0, -1]  # lowest group; n3 is not placed
    with pytest.raises(Exception, match="not both"):
        trace.node_groups(8, seed=1, placement=identity)


def test_replay_with_a_placement_fails_whole_domains_and_matches_a_reference():
    n = 16
    layout = Layout(circulant_stacks(n, [0, 1, 3]))
    racks = Topology.blocks(n, {"rack": 4})
    trace = parse_fault_events(_events([
        ("x", 1.0, "fault_start"), ("y", 2.0, "fault_start"), ("z", 3.0, "fault_start"),
        ("w", 4.0, "fault_start"), ("v", 5.0, "fault_start"),
    ]))
    placement = Placement({"x": 9, "y": {"rack": "rack-0"}, "z": [12, 13], "w": 1, "v": {"rack": "rack-2"}},
                          topology=racks)
    result = replay_trace(layout, trace, placement=placement, planner="exact", check_plans=True)
    # Reference: the groups each event fails, applied in time order with restarts.
    batches = [{9}, {0, 1, 2, 3}, {12, 13}, {1}, {8, 9, 10, 11}]
    dead, statuses, wipes, masked = set(), [], 0, 0
    for batch in batches:
        fresh = batch - dead
        if not fresh:
            statuses.append("already-out")
            continue
        dead |= fresh
        if lost_types(layout.stacks, dead):
            statuses.append("wipe-out")
            wipes += 1
            dead = set()
        else:
            statuses.append("masked")
            masked += len(fresh)
    assert [row.status for row in result.rows] == statuses
    assert result["wipe_outs"] == wipes and result["masked"] == masked
    assert result["placement"].startswith("placement") and "5 nodes" in result["placement"]
    assert result.rows[1].group == 0


def test_a_replay_names_nodes_left_out_of_a_placement_as_such():
    # was: "Skipped: 1 node(s) beyond N = 16", though N was not the reason
    layout = Layout(circulant_stacks(16, [0, 1, 3]))
    trace = parse_fault_events(_events([("x", 1.0, "fault_start"), ("typo", 2.0, "fault_start")]))
    placed = replay_trace(layout, trace, placement=Placement({"x": 9}))
    assert placed["skipped"] == {"nodes": 1, "fault_starts": 1, "events": 1}
    assert "Skipped: 1 node(s) not in the placement (1 fault_start" in placed.format_text()
    small = replay_trace(Layout(circulant_stacks(1, [0])), trace)
    assert small["skipped"]["nodes"] == 1 and "Skipped: 1 node(s) beyond N = 1 (" in small.format_text()


def test_trace_failures_take_placements():
    trace = parse_fault_events(_events([("a", 1.0, "fault_start"), ("b", 2.0, "fault_start")]))
    layout = Layout(circulant_stacks(8, [0, 1, 3]))
    racks = Topology.blocks(8, {"rack": 2})
    placement = Placement({"a": {"rack": "rack-0"}, "b": 5}, topology=racks)
    times, stacks, wipes, counts = trace_failures(trace, 8, "spare", 3, layout=layout, placement=placement)
    assert counts["used"] == 3 and counts["failure_events"] == 2 and counts["already_down"] == 0
    assert stacks.tolist() == [least_stack_number(layout, [0, 1]), least_stack_number(layout, [0, 1, 5])]


# ----------------------------------------------------------------------- CLI
@pytest.fixture
def racks_file(tmp_path):
    path = tmp_path / "racks.json"
    Topology.blocks(96, {"rack": 8, "pod": 48}).save(path)
    return path


def test_layout_and_validate_commands_with_a_topology(tmp_path, racks_file):
    out = tmp_path / "safe.json"
    result = cli("layout", "-N", 96, "-r", 4, "--topology", racks_file, "-o", out)
    assert result.exit_code == 0, result.output
    assert "domains:       safe at level(s) rack" in result.output
    layout = Layout.load(out)
    assert Topology.from_layout(layout) == Topology.load(racks_file)
    result = cli("layout", "-N", 96, "-r", 4, "--topology", racks_file, "--domain-level", "pod", "-o",
                 tmp_path / "pod.json", "--json")
    doc = json.loads(result.output)
    assert doc["domain_status"] == "impossible" and doc["domain_multiplicity"] == 2
    result = cli("validate", out, "--trials", 20, "--worst-k", 1, "--topology", racks_file,
                 "--domain-probability", 0.2, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    rack = doc["domains"]["rack"]
    for key in ("safe", "worst_status", "worst_stack_number", "worst_load", "domains", "worst_pair"):
        assert key in rack
    assert rack["safe"] and rack["domains"] == 12 and not doc["domains"]["pod"]["safe"]
    assert [row["name"] for row in rack["correlated"]] == ["layout", "sidon", "consecutive"]
    assert "correlated" not in doc["domains"]["pod"]
    text = cli("validate", out, "--trials", 0, "--worst-k", 1, "--topology", racks_file, "--domain-level", "rack")
    assert text.exit_code == 0 and "domains rack: 12 domains; domain-safe: yes" in text.output
    assert "domains pod" not in text.output


@pytest.mark.parametrize("args, needle, code", [
    (["layout", "-N", 96, "-r", 4, "--domain-level", "rack", "-o", "x.json"], "need --topology", 2),
    (["layout", "-N", 96, "-r", 4, "--method", "block", "--topology", "RACKS", "-o", "x.json"], "--method sidon", 2),
    (["layout", "-N", 90, "-r", 4, "--topology", "RACKS", "-o", "x.json"], "N = 96", 1),
    (["layout", "-N", 96, "-r", 4, "--topology", "missing.json", "-o", "x.json"], "does not exist", 1),
    (["layout", "-N", 96, "-r", 4, "--topology", "RACKS", "--domain-level", "row", "-o", "x.json"], "no level", 1),
    (["validate", "LAYOUT", "--domain-probability", 0.1], "needs --topology", 2),
    (["validate", "LAYOUT", "--topology", "RACKS", "--domain-probability", 2], "0<=x<=1", 2),
    (["replay", "LAYOUT", "--trace", "TRACE", "--placement", "PLACE", "--placement-seed", 1], "give one", 2),
    (["replay", "LAYOUT", "--trace", "TRACE", "--topology", "RACKS"], "needs --placement", 2),
])
def test_domain_options_bad_input(tmp_path, monkeypatch, racks_file, args, needle, code):
    monkeypatch.chdir(tmp_path)
    layout = tmp_path / "l.json"
    sidon(96, 4).save(layout)
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(_events([("a", 1.0, "fault_start")])))
    place = tmp_path / "place.json"
    Placement({"a": 1}).save(place)
    names = {"RACKS": racks_file, "LAYOUT": layout, "TRACE": trace, "PLACE": place}
    result = cli(*[names.get(a, a) if isinstance(a, str) else a for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and needle in result.output


def test_replay_command_resolves_domain_placements_from_the_layout(tmp_path, racks_file):
    out = tmp_path / "safe.json"
    assert cli("layout", "-N", 96, "-r", 4, "--topology", racks_file, "-o", out).exit_code == 0
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(_events([("a", 1.0, "fault_start"), ("b", 2.0, "fault_start")])))
    place = tmp_path / "place.json"
    Placement({"a": {"rack": "rack-2"}, "b": 40}).save(place)
    result = cli("replay", out, "--trace", trace, "--placement", place, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["group_failures"] == 9 and doc["wipe_outs"] == 0 and doc["batches"] == 2
    bare = cli("replay", sidon(96, 4).save(tmp_path / "plain.json"), "--trace", trace, "--placement", place)
    assert bare.exit_code == 1 and "no topology is given" in bare.output


def test_simulate_command_takes_a_placement(tmp_path):
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(_events([("a", 1.0, "fault_start"), ("b", 2.0, "fault_start"),
                                         ("c", 3.0, "fault_start")])))
    place = tmp_path / "place.json"
    Placement({"a": {"rack": "rack-0"}, "b": 9}, topology=Topology.blocks(400, {"rack": 8})).save(place)
    args = ["simulate", "--preset", "trace-400", "--strategy", "spare", "-r", 9, "--seeds", 1, "--trace", trace,
            "--checkpoint-period-seconds", 3000, "--json"]
    result = cli(*args, "--placement", place)
    assert result.exit_code == 0, result.output
    counts = json.loads(result.output)["trace"]
    assert counts["used"] == 9 and counts["outside_cluster"] == 1 and counts["placement"].startswith("placement")
    assert "give one" in cli(*args, "--placement", place, "--placement-seed", 1).output


def test_a_csv_fault_log_gives_its_own_domains_and_a_fitted_model_gives_p(tmp_path):
    from spare_opt import fit_trace, read_fault_trace

    log = REPO_INSTANCES / "fault-log-N12.csv"
    trace = read_fault_trace(log)
    topology = derived_topology(trace, 12)
    assert topology.levels == ("domain",)
    node_group = trace.node_groups(12)
    for node, domain in enumerate(trace.node_domains):
        if domain is not None and node_group[node] >= 0:
            assert node_group[node] in topology.domains("domain")[domain]
    derived = derived_topology(trace, 12, use_domains=False)
    assert derived.levels == ("incident",)
    with pytest.raises(Exception, match="names no failure domain"):
        derived_topology(parse_fault_events(_events([("a", 1.0, "fault_start")])), 4, use_domains=True)
    model = fit_trace(trace).model
    racks = Topology.blocks(24, {"rack": 4})
    rows = domain_comparison(domain_safe(24, 3, racks), racks, domain_probability=model, trials=5, baselines=())
    assert rows[0]["domain_probability"] == pytest.approx(model.multi_node_probability)
    path = tmp_path / "model.json"
    model.save(path)
    layout = tmp_path / "safe.json"
    domain_safe(24, 3, racks).save(layout)
    racks_path = racks.save(tmp_path / "racks.json")
    result = cli("validate", layout, "--trials", 5, "--worst-k", 1, "--topology", racks_path, "--failure-model", path,
                 "--baselines", "none", "--json")
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)["domains"]["rack"]["correlated"][0]
    assert row["domain_probability"] == pytest.approx(model.multi_node_probability)

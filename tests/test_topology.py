"""Topology and placement files: the model, round trips, every bad-input case, and ``spare-opt topology``."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from spare_opt import (
    OutputExistsError,
    ParameterError,
    ParameterTypeError,
    Placement,
    PlacementError,
    Topology,
    TopologyError,
)
from spare_opt_cli.main import main


def cli(*args):
    return CliRunner().invoke(main, [*map(str, args)])


def error_line(result, code=1):
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result.output.strip().splitlines()[-1]


# ------------------------------------------------------------------ topology
def test_blocks_group_consecutive_groups_and_nest_levels():
    topology = Topology.blocks(20, {"rack": 4, "pod": 8})
    assert topology.levels == ("rack", "pod")
    racks = topology.domains("rack")
    assert list(racks) == [f"rack-{k}" for k in range(5)]
    assert racks["rack-4"].tolist() == [16, 17, 18, 19]
    pods = topology.domains("pod")
    assert [p.size for p in pods.values()] == [8, 8, 4]  # the last pod is smaller
    assert topology.is_partition("rack") and topology.domain_count("pod") == 3
    for members in racks.values():  # every rack lies inside one pod
        assert len({topology.entries("pod")[g] for g in members.tolist()}) == 1


@given(n=st.integers(1, 80), size=st.integers(1, 80), seed=st.integers(0, 1000))
def test_shuffled_blocks_are_a_partition_of_the_given_sizes(n, size, seed):
    size = min(size, n)
    topology = Topology.blocks(n, {"rack": size}, shuffle=True, seed=seed)
    members = np.concatenate(list(topology.domains("rack").values()))
    assert sorted(members.tolist()) == list(range(n))
    sizes = sorted((m.size for m in topology.domains("rack").values()), reverse=True)
    assert sizes[:-1] == [size] * (len(sizes) - 1) and 1 <= sizes[-1] <= size
    assert topology == Topology.blocks(n, {"rack": size}, shuffle=True, seed=seed)


def test_entries_may_be_labels_lists_or_empty_and_round_trip(tmp_path):
    levels = {"rack": ["a", ["a", "b"], [], "b"], "power": [1, 1, 2, 2]}
    topology = Topology(4, levels)
    assert topology.entries("rack") == (("a",), ("a", "b"), (), ("b",))
    assert {k: v.tolist() for k, v in topology.domains("rack").items()} == {"a": [0, 1], "b": [1, 3]}
    assert not topology.is_partition("rack") and topology.is_partition("power")
    indptr, ids = topology.membership("rack")
    assert indptr.tolist() == [0, 1, 3, 3, 4] and ids.tolist() == [0, 0, 1, 1]
    path = topology.save(tmp_path / "t.json")
    assert Topology.load(path) == topology
    assert json.loads(path.read_text())["levels"] == levels
    with pytest.raises(OutputExistsError):
        topology.save(path)
    topology.save(path, force=True)


@pytest.mark.parametrize("doc, needle", [
    ([], "expected a JSON object"),
    ({"format": "spare-layout", "version": 1, "groups": 2, "levels": {}}, "format is 'spare-layout'"),
    ({"format": "spare-topology", "version": 2, "groups": 2, "levels": {}}, "version 2 is not supported"),
    ({"format": "spare-topology", "version": 1, "levels": {}}, "missing key 'groups'"),
    ({"format": "spare-topology", "version": 1, "groups": 0, "levels": {"r": []}}, "positive integer"),
    ({"format": "spare-topology", "version": 1, "groups": 2, "levels": {}}, "'levels' is empty"),
    ({"format": "spare-topology", "version": 1, "groups": 2, "levels": []}, "must be an object"),
    ({"format": "spare-topology", "version": 1, "groups": 2, "levels": {"rack": ["a"]}}, "lists 1 entries"),
    ({"format": "spare-topology", "version": 1, "groups": 2, "levels": {"rack": "ab"}}, "must be a list"),
    ({"format": "spare-topology", "version": 1, "groups": 2, "levels": {"rack": ["a", None]}}, "group 1"),
    ({"format": "spare-topology", "version": 1, "groups": 2, "levels": {"rack": ["a", ""]}}, "group 1"),
    ({"format": "spare-topology", "version": 1, "groups": 2, "levels": {"rack": ["a", True]}}, "group 1"),
    ({"format": "spare-topology", "version": 1, "groups": 2, "levels": {"rack": ["a", ["b", "b"]]}}, "twice"),
    ({"format": "spare-topology", "version": 1, "groups": 2, "levels": {"rack": ["a", 1]}}, "mixes string"),
    ({"format": "spare-topology", "version": 1, "groups": 2, "levels": {"": ["a", "b"]}}, "level name"),
])
def test_bad_topology_documents_give_one_clear_error(tmp_path, doc, needle):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TopologyError, match=needle) as info:
        Topology.load(path)
    assert "\n" not in str(info.value)
    assert str(path) in str(info.value)


def test_unreadable_topology_files(tmp_path):
    with pytest.raises(TopologyError, match="does not exist"):
        Topology.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TopologyError, match="malformed JSON"):
        Topology.load(tmp_path / "bad.json")
    with pytest.raises(TopologyError, match="is a directory"):
        Topology.load(tmp_path)
    with pytest.raises(TopologyError, match="cannot write"):
        Topology.blocks(4, {"r": 2}).save(tmp_path / "no" / "such" / "t.json")


def test_levels_and_block_arguments_are_checked():
    topology = Topology.blocks(8, {"rack": 4})
    with pytest.raises(ParameterError, match="no level 'pod'"):
        topology.domains("pod")
    with pytest.raises(ParameterTypeError):
        topology.domains(3)
    with pytest.raises(ParameterError, match="empty"):
        topology.select_levels([])
    assert topology.select_levels(None) == ("rack",) and topology.select_levels("rack") == ("rack",)
    with pytest.raises(ParameterError, match="<= 8"):
        Topology.blocks(8, {"rack": 9})
    with pytest.raises(ParameterError, match=">= 1"):
        Topology.blocks(8, {"rack": 0})
    with pytest.raises(ParameterError, match="empty"):
        Topology.blocks(8, {})
    with pytest.raises(ParameterTypeError):
        Topology.blocks(8, {"rack": 2.0})
    with pytest.raises(ParameterTypeError):
        Topology.blocks(8, [("rack", 2)])
    with pytest.raises(ParameterError):
        Topology.blocks(8, {"rack": 2}, shuffle=True, seed=-1)
    # was: any N up to 2^31 - 1, allocated until out of memory; no layout holds more than 2^27 groups
    from spare_opt import derived_topology, parse_fault_events

    with pytest.raises(ParameterError, match="groups N must be <= 134,217,728"):
        Topology.blocks(2**27 + 1, {"rack": 8})
    with pytest.raises(ParameterError, match="groups N must be <= 134,217,728"):
        derived_topology(parse_fault_events([]), 2**27 + 1)


# ----------------------------------------------------------------- placement
def test_placement_resolves_groups_lists_and_domains(tmp_path):
    racks = Topology.blocks(8, {"rack": 4})
    placement = Placement({"a": 5, "b": [1, 0], "c": {"rack": "rack-1"}}, groups=8, topology=racks)
    indptr, groups = placement.resolve(["c", "zz", "b", "a"], 8)
    assert [groups[indptr[i]:indptr[i + 1]].tolist() for i in range(4)] == [[4, 5, 6, 7], [], [0, 1], [5]]
    path = placement.save(tmp_path / "p.json")
    loaded = Placement.load(path)
    assert loaded == placement and loaded.needs_topology and loaded.topology == racks
    doc = json.loads(path.read_text())
    assert doc["nodes"] == {"a": 5, "b": [0, 1], "c": {"rack": "rack-1"}}


@pytest.mark.parametrize("nodes, needle", [
    ([], "must be an object"),
    ({"a": -1}, "out of range"),
    ({"a": 9}, "out of range"),
    ({"a": []}, "non-empty list"),
    ({"a": 1.5}, "expected a group id"),
    ({"a": True}, "expected a group id"),
    ({"a": {"rack": "rack-0", "pod": "x"}}, "exactly one level"),
    ({"a": {"pod": "x"}}, "level 'pod'"),
    ({"a": {"rack": "rack-9"}}, "domain 'rack-9'"),
])
def test_bad_placements_give_one_clear_error(nodes, needle):
    with pytest.raises(PlacementError, match=needle):
        Placement(nodes, groups=8, topology=Topology.blocks(8, {"rack": 4}))


def test_placement_files_are_checked(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "spare-placement", "version": 1, "nodes": {"a": {"rack": "r"}}}))
    placement = Placement.load(path)
    with pytest.raises(PlacementError, match="no topology is given"):
        placement.resolve(["a"], 4)
    with pytest.raises(PlacementError, match="N = 3"):
        Placement({"a": 0}, groups=4).resolve(["a"], 3)
    with pytest.raises(PlacementError, match="outside"):
        Placement({"a": 5}).resolve(["a"], 4)
    path.write_text(json.dumps({"format": "spare-placement", "version": 1, "nodes": {},
                                "topology": {"format": "spare-topology", "version": 1, "groups": 2,
                                             "levels": {"rack": ["a"]}}}))
    with pytest.raises(PlacementError, match="embedded topology"):
        Placement.load(path)
    path.write_text(json.dumps({"format": "spare-topology", "version": 1}))
    with pytest.raises(PlacementError, match="format is 'spare-topology'"):
        Placement.load(path)
    with pytest.raises(PlacementError, match="does not exist"):
        Placement.load(tmp_path / "missing.json")


# ----------------------------------------------------------------------- CLI
def test_topology_command_writes_blocks_and_refuses_to_overwrite(tmp_path):
    path = tmp_path / "t.json"
    result = cli("topology", "--groups", 96, "--level", "rack=8", "--level", "pod=48", "-o", path)
    assert result.exit_code == 0, result.output
    assert "level rack: 12 domains of 8 to 8 groups" in result.output
    assert Topology.load(path) == Topology.blocks(96, {"rack": 8, "pod": 48})
    assert "exists already" in error_line(cli("topology", "-N", 96, "--level", "rack=8", "-o", path))
    result = cli("topology", "-N", 96, "--level", "rack=8", "--shuffle", "--seed", 3, "-o", path, "--force", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["levels"]["rack"]["domains"] == 12
    assert Topology.load(path) == Topology.blocks(96, {"rack": 8}, shuffle=True, seed=3)


@pytest.mark.parametrize("args, needle, code", [
    (["-N", 10, "-o", "t.json"], "at least one --level", 2),
    (["-N", 10, "--level", "rack", "-o", "t.json"], "NAME=SIZE", 2),
    (["-N", 10, "--level", "rack=x", "-o", "t.json"], "not an integer", 2),
    (["-N", 10, "--level", "rack=2", "--level", "rack=3", "-o", "t.json"], "twice", 2),
    (["-N", 10, "--level", "rack=20", "-o", "t.json"], "<= 10", 1),
    (["-N", 0, "--level", "rack=1", "-o", "t.json"], ">= 1", 1),
    # was: accepted up to 2^31 - 1, then N int64 positions per level allocated until out of memory
    (["-N", 2_000_000_000, "--level", "rack=8", "-o", "t.json"], "groups N must be <= 134,217,728", 1),
    (["-N", 10, "--level", "rack=2", "--from-trace", "x.json", "-o", "t.json"], "do not combine", 2),
])
def test_topology_command_bad_input(tmp_path, monkeypatch, args, needle, code):
    monkeypatch.chdir(tmp_path)
    assert needle in error_line(cli("topology", *args), code=code)


def test_topology_command_derives_a_topology_from_a_trace(tmp_path):
    events = [{"node_id": node, "event_time": t, "event_type": "fault_start",
               "fault_type": {"Level": "L1", "Class": "GPU", "Desc": ""}}
              for node, t in [("a", 1.0), ("b", 1.0), ("c", 2.0), ("d", 2.5), ("e", 2.5), ("f", 2.5)]]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(events))
    path = tmp_path / "derived.json"
    result = cli("topology", "-N", 8, "--from-trace", trace, "-o", path, "--observed-only")
    assert result.exit_code == 0, result.output
    assert "derived topology" in result.output
    topology = Topology.load(path)
    assert {k: v.tolist() for k, v in topology.domains("incident").items()} == {
        "incident-0": [0, 1], "incident-1": [3, 4, 5]}
    # by default the groups the trace does not place are put in domains too, and the output says how many
    covered = tmp_path / "covered.json"
    result = cli("topology", "-N", 8, "--from-trace", trace, "-o", covered)
    assert result.exit_code == 0, result.output
    assert "3 groups that the trace does not place put in domains of 3 groups (the largest seen)" in result.output
    assert {k: v.tolist() for k, v in Topology.load(covered).domains("incident").items()} == {
        "incident-0": [0, 1, 2], "incident-1": [3, 4, 5], "incident-inferred-0": [6, 7]}
    sized = cli("topology", "-N", 8, "--from-trace", trace, "-o", covered, "--force", "--domain-size", 4, "--json")
    assert sized.exit_code == 0, sized.output
    assert {k: v.tolist() for k, v in Topology.load(covered).domains("incident").items()} == {
        "incident-0": [0, 1, 2, 6], "incident-1": [3, 4, 5, 7]}
    assert json.loads(sized.output)["levels"]["incident"]["groups_in_none"] == 0

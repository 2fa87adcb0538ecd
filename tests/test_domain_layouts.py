"""Domain-safe layouts: every claim checked by the brute-force references of tests/naive.py.

Done-when conditions of issue 11: every layout reported domain-safe is checked
domain-safe over every domain by an independent test, and every single-domain failure
of such a layout is masked, checked with the exact planner.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from naive import circulant_stacks, naive_domain_multiplicity, naive_domains, naive_is_domain_safe, random_latin_stacks
from spare_opt import (
    Layout,
    ParameterError,
    ParameterTypeError,
    Topology,
    check_plan,
    conflict_graph,
    domain_multiplicity,
    domain_safe,
    is_domain_safe,
    lower_bound,
    plan_reorder,
)
from spare_opt.layouts.domain_layouts import _Assignment, _Cells, _checked_domains, _improve
from spare_opt.layouts.generators import _solve_difference_model


def crossing(n, rack, power):
    """Racks of consecutive groups and power feeds striped across them (levels that cross)."""
    g = np.arange(n)
    return Topology(n, {"rack": [f"r{x}" for x in g // rack], "power": [f"p{x}" for x in g % power]})


def spanning(n, rack, seed):
    """Racks where about one group in ten also sits in the next rack (a group spanning two domains)."""
    rng = np.random.default_rng(seed)
    racks = n // rack
    entries = []
    for g in range(n):
        own = f"r{min(g // rack, racks - 1)}"
        entries.append([own, f"r{(g // rack + 1) % racks}"] if rng.random() < 0.1 and racks > 1 else own)
    return Topology(n, {"rack": entries})


def check_claims(layout, topology, levels):
    """The layout's metadata against the naive references; return the naive domains."""
    domains = naive_domains(topology.to_dict()["levels"], levels)
    stacks = layout.stacks
    measured = naive_domain_multiplicity(stacks, domains)
    meta = layout.metadata
    assert meta["domain_multiplicity"] == measured == domain_multiplicity(layout, topology, levels=levels)
    assert meta["domain_levels"] == list(levels)
    largest = max((len(groups) for *_rest, groups in domains), default=0)
    bound = max(1, -(-largest * layout.redundancy // layout.groups))
    assert meta["domain_multiplicity_lower_bound"] == bound
    assert measured >= bound or not domains
    if meta["domain_status"] == "safe":
        assert naive_is_domain_safe(stacks, domains)
    elif meta["domain_status"] == "impossible":
        assert bound > 1 and not naive_is_domain_safe(stacks, domains)
    else:
        assert meta["domain_status"] == "not-found" and bound == 1 and measured > 1
    assert Topology.from_layout(layout) == topology
    return domains


def check_single_domain_failures(layout, domains):
    """Every single domain failure of a domain-safe layout: masked, a valid plan, at most one holder lost per type."""
    n = layout.groups
    for _level, _label, groups in domains:
        failed = sorted(groups)
        plan = plan_reorder(layout, failed)
        assert plan.status == "masked"
        check_plan(layout, plan)
        assert plan.stack_number >= lower_bound(n, len(failed))
        lost = np.bincount(layout.stacks[failed].ravel(), minlength=n)
        assert lost.max() <= 1


# Topologies with a domain-safe layout (s r <= N for every domain s), each route it allows.
SAFE_CASES = [
    ("contiguous racks", 96, 4, Topology.blocks(96, {"rack": 8}), ["rack"], "auto"),
    ("contiguous racks, circulant", 120, 5, Topology.blocks(120, {"rack": 6}), ["rack"], "circulant"),
    ("uneven last rack", 100, 4, Topology.blocks(100, {"rack": 7}), ["rack"], "auto"),
    ("shuffled racks", 96, 4, Topology.blocks(96, {"rack": 8}, shuffle=True, seed=3), ["rack"], "auto"),
    ("shuffled racks, assignment", 96, 4, Topology.blocks(96, {"rack": 8}, shuffle=True, seed=3), ["rack"],
     "assignment"),
    ("nested rack and pod", 96, 3, Topology.blocks(96, {"rack": 4, "pod": 24}, shuffle=True, seed=1),
     ["rack", "pod"], "auto"),
    ("crossing rack and power", 120, 4, crossing(120, 6, 10), ["rack", "power"], "auto"),
    ("crossing, assignment", 60, 3, crossing(60, 4, 6), ["rack", "power"], "assignment"),
    ("spanning groups", 96, 4, spanning(96, 8, 0), ["rack"], "auto"),
    ("spanning groups, assignment", 64, 3, spanning(64, 8, 2), ["rack"], "assignment"),
]


@pytest.mark.parametrize("name, n, r, topology, levels, method", SAFE_CASES, ids=[c[0] for c in SAFE_CASES])
def test_layouts_reported_safe_are_safe_in_every_domain_and_mask_every_domain_failure(name, n, r, topology, levels,
                                                                                        method):
    layout = domain_safe(n, r, topology, levels=levels, method=method, time_limit=5, seed=0)
    domains = check_claims(layout, topology, levels)
    # These instances have domain-safe layouts: the generator must find one.
    assert layout.metadata["domain_status"] == "safe", layout.metadata["search"]
    check_single_domain_failures(layout, domains)
    assert layout.overlap() == layout.metadata["lambda"]


def test_a_circulant_route_on_contiguous_racks_keeps_offsets_spaced_and_sidon():
    topology = Topology.blocks(600, {"rack": 8})
    layout = domain_safe(600, 8, topology)
    assert layout.offsets is not None and layout.metadata["domain_route"] == "circulant"
    offsets = np.array(layout.offsets)
    gaps = np.diff(np.concatenate((offsets, [offsets[0] + 600])))
    assert gaps.min() >= 8  # every two offsets at least a rack apart around the cycle
    assert layout.overlap() == 1
    np.testing.assert_array_equal(layout.stacks, circulant_stacks(600, layout.offsets))


def test_shuffled_racks_get_a_reordered_circulant_layout():
    topology = Topology.blocks(120, {"rack": 6}, shuffle=True, seed=7)
    layout = domain_safe(120, 5, topology)
    assert layout.offsets is None and layout.metadata["domain_route"] == "circulant"
    assert "reordered" in layout.metadata["domain_order"]
    # Rows are those of a circulant layout, permuted.
    offsets = np.sort(layout.stacks[0] - layout.stacks[0][0]) % 120
    rows = {tuple(sorted(row)) for row in layout.stacks.tolist()}
    assert rows == {tuple(sorted(row)) for row in circulant_stacks(120, sorted(offsets)).tolist()}


@pytest.mark.parametrize("n, r, sizes, levels", [
    (48, 4, {"rack": 16}, ["rack"]),                  # 16 x 4 = 64 > 48
    (96, 3, {"rack": 8, "pod": 48}, ["rack", "pod"]),  # pods of 48 x 3 = 144 > 96
])
def test_impossible_topologies_reach_the_pigeonhole_bound(n, r, sizes, levels):
    topology = Topology.blocks(n, sizes)
    layout = domain_safe(n, r, topology, levels=levels, time_limit=2)
    check_claims(layout, topology, levels)
    meta = layout.metadata
    assert meta["domain_status"] == "impossible"
    assert meta["domain_multiplicity"] == meta["domain_multiplicity_lower_bound"] >= 2
    assert "shard slots" in meta["domain_reason"]


def test_unsafe_baselines_are_detected():
    topology = Topology.blocks(96, {"rack": 8})
    rotation = Layout(circulant_stacks(96, range(4)))
    assert domain_multiplicity(rotation, topology) == 4 and not is_domain_safe(rotation, topology)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(12, 48), r=st.integers(2, 4), seed=st.integers(0, 10_000), spans=st.booleans(),
       method=st.sampled_from(["auto", "assignment"]))
def test_random_topologies_claims_match_the_references(n, r, seed, spans, method):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, max(1, n // 3), size=n)
    entries = []
    for g in range(n):
        if rng.random() < 0.1:
            entries.append([])  # in no domain
        elif spans and rng.random() < 0.2:
            other = int(rng.integers(0, max(1, n // 3)))
            entries.append(sorted({f"d{labels[g]}", f"d{other}"}))
        else:
            entries.append(f"d{labels[g]}")
    topology = Topology(n, {"level": entries})
    layout = domain_safe(n, r, topology, method=method, time_limit=1, seed=seed)
    domains = check_claims(layout, topology, ["level"])
    if layout.metadata["domain_status"] == "safe":
        check_single_domain_failures(layout, domains)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(6, 40), r=st.integers(1, 5), seed=st.integers(0, 10_000), block=st.integers(1, 9))
def test_domain_multiplicity_matches_the_reference_on_random_layouts(n, r, seed, block):
    r = min(r, n)
    rng = np.random.default_rng(seed)
    layout = Layout(random_latin_stacks(n, r, rng))
    topology = Topology.blocks(n, {"a": min(block, n), "b": min(2 * block, n)}, shuffle=True, seed=seed)
    for levels in (["a"], ["b"], ["a", "b"]):
        domains = naive_domains(topology.to_dict()["levels"], levels)
        assert domain_multiplicity(layout, topology, levels=levels) == naive_domain_multiplicity(layout.stacks, domains)
        assert is_domain_safe(layout, topology, levels=levels) == naive_is_domain_safe(layout.stacks, domains)


def test_conflict_graph_joins_exactly_the_groups_sharing_shard_types():
    rng = np.random.default_rng(4)
    layout = Layout(random_latin_stacks(20, 4, rng))
    graph = conflict_graph(layout)
    for g, h in itertools.combinations(range(20), 2):
        shared = len(set(layout.stacks[g].tolist()) & set(layout.stacks[h].tolist()))
        assert graph.has_edge(g, h) == (shared > 0)
        if shared:
            assert graph.edges[g, h]["shared"] == shared


def _brute_force_spaced_sidon(n, r, width):
    """Whether some r residues mod n are a Sidon set with every two at least ``width`` apart (cyclically)."""
    for rest in itertools.combinations(range(1, n), r - 1):
        offsets = (0,) + rest
        diffs = [(a - b) % n for a in offsets for b in offsets if a != b]
        if len(set(diffs)) == len(diffs) and min(min(d, n - d) for d in diffs) >= width:
            return True
    return False


@pytest.mark.parametrize("n, r, width", [(21, 4, 3), (26, 4, 4), (31, 5, 2), (40, 5, 4), (24, 4, 5)])
def test_cp_sat_spaced_sidon_model_agrees_with_brute_force(n, r, width):
    exists = _brute_force_spaced_sidon(n, r, width)
    import time

    result = _solve_difference_model(n, r, time.perf_counter() + 20, 0, 1, sidon_only=True, window=(width, 1))
    assert result.status in ("OPTIMAL", "FEASIBLE", "INFEASIBLE")
    assert (result.offsets is not None) == exists
    if exists:
        o = np.array(result.offsets)
        diffs = [(a - b) % n for a in o for b in o if a != b]
        assert len(set(diffs)) == len(diffs) and min(min(d, n - d) for d in diffs) >= width


def test_cp_sat_forbidden_differences_are_avoided():
    import time

    n, r = 40, 4
    forbidden = np.zeros(n, dtype=bool)
    forbidden[[5, 35, 10, 30, 1, 39]] = True
    result = _solve_difference_model(n, r, time.perf_counter() + 20, 0, 1, sidon_only=True, forbidden=forbidden)
    assert result.offsets is not None
    o = np.array(result.offsets)
    diffs = [(a - b) % n for a in o for b in o if a != b]
    assert len(set(diffs)) == len(diffs) and not forbidden[diffs].any()


def test_cp_sat_assignment_model_repairs_a_random_assignment():
    # Shuffled racks of 4 on 32 groups, r = 3: a random row-to-rack assignment conflicts;
    # the whole CP-SAT model must reach excess 0, and the counts must stay consistent.
    topology = Topology.blocks(32, {"rack": 4}, shuffle=True, seed=5)
    base = Layout(circulant_stacks(32, [0, 1, 3]))  # a Sidon set mod 32? its lambda is 1
    assert base.overlap() == 1
    domains = _checked_domains(base, topology, None)
    cells = _Cells(domains)
    rng = np.random.default_rng(0)
    start = rng.permutation(np.repeat(np.arange(cells.count), cells.capacity))
    state = _Assignment(base, domains, cells, start, 1)
    assert state.excess() > 0
    import time

    _improve(state, np.arange(32), time.perf_counter() + 20, 0, 1)
    assert state.excess() == 0
    assert np.all(np.bincount(state.cell_of_row, minlength=cells.count) == cells.capacity)
    fresh = _Assignment(base, domains, cells, state.cell_of_row, 1)
    np.testing.assert_array_equal(fresh.counts, state.counts)


def test_layout_files_record_the_topology(tmp_path):
    topology = Topology.blocks(60, {"rack": 6, "pod": 30}, shuffle=True, seed=2)
    layout = domain_safe(60, 4, topology, levels=["rack"])
    for name in ("safe.json", "safe.npz"):
        layout.save(tmp_path / name)
        loaded = Layout.load(tmp_path / name)
        assert loaded == layout and loaded.metadata == layout.metadata
        assert Topology.from_layout(loaded) == topology
    assert Topology.from_layout(Layout(circulant_stacks(7, [0, 1, 3]))) is None


def test_bad_arguments_are_refused():
    topology = Topology.blocks(24, {"rack": 4})
    with pytest.raises(ParameterError, match="N = 24"):
        domain_safe(30, 3, topology)
    with pytest.raises(ParameterError, match="no level 'pod'"):
        domain_safe(24, 3, topology, levels="pod")
    with pytest.raises(ParameterError, match="method"):
        domain_safe(24, 3, topology, method="magic")
    with pytest.raises(ParameterTypeError, match="Topology"):
        domain_safe(24, 3, {"rack": [0] * 24})
    with pytest.raises(ParameterTypeError):
        domain_safe(24, 3.0, topology)
    with pytest.raises(ParameterError, match="time limit"):
        domain_safe(24, 3, topology, time_limit=0)
    with pytest.raises(ParameterTypeError, match="Layout"):
        domain_multiplicity("layout.json", topology)
    with pytest.raises(ParameterError, match="N = 24"):
        domain_multiplicity(Layout(circulant_stacks(7, [0, 1, 3])), topology)
    # Every group in one domain of 24: not intervals of any useful spacing and no spaced offsets.
    whole = Topology(24, {"all": ["x"] * 12 + ["y"] * 12, "odd": [f"o{g % 2}" for g in range(24)]})
    with pytest.raises(ParameterError, match="assignment"):
        domain_safe(24, 3, whole, levels=["all", "odd"], method="circulant", time_limit=1)

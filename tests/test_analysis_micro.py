"""Analysis with micro-batches (issue 9, scope 3): Monte-Carlo mean step cost, its closed-form
bound and physical limit, the worst-case load after one failure, and the sweep over ``m``.

References are independent of the code under test: the exact planner
(:func:`spare_opt.plan_reorder` with ``micro_batches=m``) replayed over the same failure
orders, plain sums for the closed forms, and a bitmask brute force of Hall's formula
``L* = max_T ceil(m |T| / |H(T)|)`` for the worst case.
"""

import math

import numpy as np
import pytest

from spare_opt import block, consecutive, monte_carlo, plan_reorder, random_latin, sidon, theory
from spare_opt._core.errors import ParameterError, ParameterTypeError


# ---------------------------------------------------------------- references
def _order(n, seed, trial):
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(trial,))).permutation(n)


def _reference_step_cost(layout, m, seed, trial):
    """Masked count and mean of ``L_k / m`` over ``k = 0 .. masked``, from the exact planner."""
    order = _order(layout.groups, seed, trial)
    costs = [1.0]
    for k in range(1, layout.groups + 1):
        plan = plan_reorder(layout, order[:k].tolist(), micro_batches=m)
        if plan.load is None:
            return k - 1, float(np.mean(costs))
        assert plan.step_cost == plan.load / m
        costs.append(plan.load / m)
    raise AssertionError("no wipe-out after every group failed")


def _terms(n, r):
    return max(1, min(int(math.floor(theory.mu(n, r))), n - 1))


# ---------------------------------------------------------------- closed forms
@pytest.mark.parametrize("n, r", [(2, 2), (10, 3), (61, 5), (600, 8), (1000, 10)])
@pytest.mark.parametrize("m", [1, 2, 3, 8, 16])
def test_step_cost_bound_is_the_plain_sum(n, r, m):
    terms = _terms(n, r)
    plain = sum(math.ceil(m * n / (n - k)) for k in range(terms)) / (terms * m)
    assert theory.step_cost_lower_bound(n, r, m) == pytest.approx(plain, rel=1e-15)
    limit = sum(n / (n - k) for k in range(terms)) / terms
    assert theory.physical_step_cost(n, r) == pytest.approx(limit, rel=1e-12)
    # ceil(m x) / m >= x, and it falls to x: m = 1 is the paper's bound exactly.
    assert theory.physical_step_cost(n, r) <= theory.step_cost_lower_bound(n, r, m) + 1e-12
    if m == 1:
        assert theory.step_cost_lower_bound(n, r, 1) == theory.sbar_lower_bound(n, r)


def test_closed_forms_for_huge_n_use_the_block_sum_and_digamma():
    n, r = 10**12, 3
    terms = _terms(n, r)
    assert terms > 10**6
    # Every k < terms << N has N / (N - k) in (1, 2): ceil(m N / (N - k)) = m + 1 for k >= 1.
    m = 4
    expected = (m + (m + 1) * (terms - 1)) / (terms * m)
    assert theory.step_cost_lower_bound(n, r, m) == pytest.approx(expected, rel=1e-12)
    # N / (N - k) = 1 + k / N + (k / N)^2 + O((k / N)^3), averaged over k < K << N.
    second = (terms - 1) * (2 * terms - 1) / (6 * n**2)
    assert theory.physical_step_cost(n, r) == pytest.approx(1 + (terms - 1) / (2 * n) + second, rel=1e-10)


@pytest.mark.parametrize("args, error", [
    ((600, 8, 0), ParameterError),
    ((600, 8, 2.5), ParameterTypeError),
    ((600, 8, True), ParameterTypeError),
    ((600, 601, 2), ParameterError),
])
def test_step_cost_bound_bad_arguments(args, error):
    with pytest.raises(error) as info:
        theory.step_cost_lower_bound(*args)
    assert type(info.value) is error


# ---------------------------------------------------------------- Monte-Carlo
@pytest.mark.parametrize("make, m", [
    (lambda: sidon(31, 4, time_limit=5), 3),
    (lambda: consecutive(30, 3), 8),
    (lambda: block(30, 3), 2),
    (lambda: random_latin(24, 3, seed=4), 5),
])
def test_mean_step_cost_matches_the_exact_planner(make, m):
    layout = make()
    trials = 6
    result = monte_carlo(layout, trials=trials, seed=3, micro_batches=m)
    paper = monte_carlo(layout, trials=trials, seed=3)
    assert np.array_equal(result.masked, paper.masked)
    assert np.array_equal(result.sbar_per_trial, paper.sbar_per_trial)
    for trial in range(trials):
        masked, cost = _reference_step_cost(layout, m, 3, trial)
        assert result.masked[trial] == masked
        assert result.step_cost_per_trial[trial] == pytest.approx(cost, rel=1e-12)
    assert result.mean_step_cost == pytest.approx(np.mean(result.step_cost_per_trial))
    assert result.micro_batches == m


@pytest.mark.parametrize("m", [2, 8])
def test_mean_step_cost_lies_between_its_bounds(m):
    layout = sidon(101, 5, time_limit=5)
    n = layout.groups
    result = monte_carlo(layout, trials=40, seed=7, micro_batches=m)
    paper = monte_carlo(layout, trials=40, seed=7)
    for trial in range(40):
        # Per trial: L_k >= ceil(m N / (N - k)) over the trial's own states, and L_k / m <= S_k.
        states = int(result.masked[trial]) + 1
        floor = np.mean([math.ceil(m * n / (n - k)) / m for k in range(states)])
        assert result.step_cost_per_trial[trial] >= floor - 1e-12
        assert result.step_cost_per_trial[trial] <= paper.sbar_per_trial[trial] + 1e-12
    assert result.step_cost_bound == theory.step_cost_lower_bound(n, 5, m)
    assert result.physical_step_cost == theory.physical_step_cost(n, 5)
    assert result.physical_step_cost < result.step_cost_bound <= result.mean_step_cost < result.sbar
    low, high = result.mean_step_cost_ci95
    assert 1.0 <= low < result.mean_step_cost < high <= 5.0


def test_m_equal_1_is_bit_identical_and_the_step_cost_is_sbar():
    layout = sidon(61, 5, time_limit=5)
    one = monte_carlo(layout, trials=30, seed=2)
    explicit = monte_carlo(layout, trials=30, seed=2, micro_batches=1)
    assert np.array_equal(one.masked, explicit.masked)
    assert np.array_equal(one.sbar_per_trial, explicit.sbar_per_trial)
    assert one.sbar == explicit.sbar and one.sbar_ci95 == explicit.sbar_ci95
    assert one.mean_step_cost == one.sbar and one.mean_step_cost_ci95 == one.sbar_ci95
    assert np.array_equal(one.step_cost_per_trial, one.sbar_per_trial)
    assert one.step_cost_bound == one.closed_form_sbar
    doc = one.to_dict()
    assert doc["monte_carlo"]["mean_step_cost"] == doc["monte_carlo"]["sbar"]
    assert doc["closed_form"]["step_cost_bound"] == doc["closed_form"]["sbar"]


def test_mean_step_cost_json_keys_and_any_chunking():
    layout = sidon(31, 4, time_limit=5)
    one = monte_carlo(layout, trials=20, seed=1, micro_batches=4)
    two = monte_carlo(layout, trials=20, seed=1, micro_batches=4, chunk_size=3)
    assert np.array_equal(one.step_cost_per_trial, two.step_cost_per_trial)
    doc = one.to_dict(per_trial=True)
    assert doc["monte_carlo"]["micro_batches"] == 4
    assert doc["monte_carlo"]["mean_step_cost"] == pytest.approx(one.mean_step_cost)
    assert len(doc["monte_carlo"]["mean_step_cost_ci95"]) == 2
    assert len(doc["monte_carlo"]["step_cost_per_trial"]) == 20
    for key in ("step_cost_bound", "physical_step_cost", "step_cost_relative_error"):
        assert isinstance(doc["closed_form"][key], float)


@pytest.mark.parametrize("value, error", [(0, ParameterError), (-3, ParameterError), (2.0, ParameterTypeError),
                                          ("4", ParameterTypeError), (10**9, ParameterError)])
def test_monte_carlo_refuses_bad_micro_batches(value, error):
    with pytest.raises(error) as info:
        monte_carlo(consecutive(10, 2), trials=2, micro_batches=value)
    assert type(info.value) is error


def test_domain_monte_carlo_takes_micro_batches():
    from spare_opt import Topology, domain_monte_carlo

    layout = sidon(60, 4, time_limit=5)
    racks = Topology.blocks(60, {"rack": 6})
    # p = 0 is the paper's failure model: the same orders as monte_carlo, the same step costs.
    plain = domain_monte_carlo(layout, racks, domain_probability=0.0, trials=15, seed=4, micro_batches=4)
    direct = monte_carlo(layout, trials=15, seed=4, micro_batches=4)
    assert np.allclose(plain.step_cost_per_trial, direct.step_cost_per_trial, rtol=1e-12, atol=0)
    correlated = domain_monte_carlo(layout, racks, domain_probability=0.3, trials=15, seed=4, micro_batches=4)
    paper = domain_monte_carlo(layout, racks, domain_probability=0.3, trials=15, seed=4)
    assert np.array_equal(correlated.masked_events, paper.masked_events)
    assert np.all(correlated.step_cost_per_trial <= paper.sbar_per_trial + 1e-12)
    assert np.all(correlated.step_cost_per_trial >= 1.0)
    assert paper.mean_step_cost == paper.sbar and paper.to_dict()["micro_batches"] == 1
    assert correlated.to_dict()["mean_step_cost"] == pytest.approx(correlated.mean_step_cost)


# ---------------------------------------------------------------- worst case after one failure
def _hall_load(stacks, failed, m):
    """``max_T ceil(m |T| / |H(T)|)`` over every non-empty set ``T`` of shard types (bitmasks); None on a wipe-out."""
    n = stacks.shape[0]
    holders = [0] * n
    for g in range(n):
        if g in failed:
            continue
        for t in stacks[g]:
            holders[int(t)] |= 1 << g
    if any(h == 0 for h in holders):
        return None
    best = 0
    for mask in range(1, 1 << n):
        live = 0
        size = 0
        for t in range(n):
            if mask >> t & 1:
                live |= holders[t]
                size += 1
        best = max(best, -(-m * size // bin(live).count("1")))
    return best


def _two_components(sizes, r):
    """A layout made of consecutive layouts of the given sizes side by side (disconnected)."""
    from spare_opt import Layout

    parts, base = [], 0
    for size in sizes:
        parts.append(base + (np.arange(size)[:, None] + np.arange(r)) % size)
        base += size
    return Layout(np.concatenate(parts).astype(np.int32))


@pytest.mark.parametrize("make", [
    lambda: consecutive(9, 3), lambda: block(12, 3), lambda: block(12, 4), lambda: random_latin(10, 3, seed=1),
    lambda: _two_components((5, 7), 3), lambda: _two_components((4, 4, 3), 2), lambda: consecutive(8, 1),
])
@pytest.mark.parametrize("m", [1, 2, 5])
def test_worst_load_after_one_failure_against_brute_force(make, m):
    from spare_opt import worst_case_load_after_one_failure

    layout = make()
    worst = worst_case_load_after_one_failure(layout, micro_batches=m)
    loads = [_hall_load(layout.stacks, {g}, m) for g in range(layout.groups)]
    if layout.redundancy == 1:
        assert worst["load"] is None and worst["status"] == "wipe-out" and all(v is None for v in loads)
        return
    assert worst["load"] == max(loads)
    assert loads[worst["group"]] == worst["load"]
    assert worst["step_cost"] == worst["load"] / m
    assert worst["lower_bound"] == math.ceil(m * layout.groups / (layout.groups - 1)) <= worst["load"]
    if m == 1:
        assert worst["load"] == 2


@pytest.mark.parametrize("make", [lambda: sidon(40, 4, time_limit=5), lambda: block(40, 5),
                                  lambda: _two_components((13, 9, 20), 3)])
@pytest.mark.parametrize("m", [3, 8])
def test_worst_load_after_one_failure_against_the_exact_planner(make, m):
    from spare_opt import worst_case_load_after_one_failure

    layout = make()
    worst = worst_case_load_after_one_failure(layout, micro_batches=m)
    loads = [plan_reorder(layout, [g], micro_batches=m).load for g in range(layout.groups)]
    assert worst["load"] == max(loads) and loads[worst["group"]] == worst["load"]
    # The closed form's component sizes: every group of a component of s groups costs ceil(m s / (s - 1)).
    sizes = {"sidon": layout.groups, "block": layout.redundancy}.get(layout.method)
    if sizes is not None:
        assert worst["component_groups"] == sizes and worst["load"] == -(-m * sizes // (sizes - 1))


def test_worst_load_after_one_failure_bad_input():
    from spare_opt import worst_case_load_after_one_failure

    with pytest.raises(ParameterError):
        worst_case_load_after_one_failure(consecutive(10, 2), micro_batches=0)
    with pytest.raises(ParameterTypeError):
        worst_case_load_after_one_failure(consecutive(10, 2), micro_batches=1.5)
    with pytest.raises(ParameterTypeError):
        worst_case_load_after_one_failure(None)


# ---------------------------------------------------------------- domains: worst_load
@pytest.mark.parametrize("m", [1, 4])
def test_domain_report_worst_load_is_the_exact_planners(m):
    from spare_opt import Topology, domain_report, domain_safe

    racks = Topology.blocks(48, {"rack": 6})
    for layout in (domain_safe(48, 4, racks), sidon(48, 4, time_limit=5)):
        info = domain_report(layout, racks, micro_batches=m).levels["rack"]
        members = [np.flatnonzero(np.arange(48) // 6 == d) for d in range(8)]
        loads = [plan_reorder(layout, groups.tolist(), micro_batches=m).load for groups in members]
        assert info["micro_batches"] == m
        if any(load is None for load in loads):
            assert info["worst_load"] is None and info["wipe_out_domains"] > 0
            continue
        assert info["worst_load"] == max(loads) >= math.ceil(m * 48 / 42)
        assert info["worst_step_cost"] == info["worst_load"] / m
        if m == 1:
            assert info["worst_load"] == info["worst_stack_number"]
    with pytest.raises(ParameterError):
        domain_report(sidon(48, 4, time_limit=5), racks, micro_batches=0)


# ---------------------------------------------------------------- sweep over m
def test_sweep_rows_per_method_r_and_m():
    from spare_opt import sweep

    calls = []
    result = sweep(12, r_min=2, r_max=3, methods=("consecutive", "block"), trials=6, seed=1, time_limit=2,
                   micro_batches=(1, 4), system_mtbf_seconds=1e6,
                   progress=lambda done, total: calls.append((done, total)))
    keys = [(row["method"], row["redundancy"], row["micro_batches"]) for row in result.rows]
    assert keys == [(method, r, m) for method in ("consecutive", "block") for r in (2, 3) for m in (1, 4)]
    assert calls[-1] == (48, 48)
    assert result.parameters["micro_batches"] == [1, 4]
    for one, four in zip(result.rows[::2], result.rows[1::2]):
        assert one["mu"] == four["mu"] and one["sbar"] == four["sbar"]  # the same layout and orders
        assert one["mean_step_cost"] == one["sbar"] and one["step_cost_bound"] == one["closed_form_sbar"]
        assert four["mean_step_cost"] <= one["mean_step_cost"]
        assert four["physical_step_cost"] <= four["step_cost_bound"] <= one["step_cost_bound"]
        assert one["j_monte_carlo"] is not None
        assert four["j_monte_carlo"] == pytest.approx(one["j_monte_carlo"] * four["mean_step_cost"] / one["sbar"])
    direct = monte_carlo(consecutive(12, 3), trials=6, seed=1, micro_batches=4)
    row = result.rows[3]
    assert row["mean_step_cost"] == direct.mean_step_cost
    assert row["j_closed_form"] == pytest.approx(
        direct.step_cost_bound / theory.availability(60, 3600, theory.mu(12, 3) * 1e6))
    # The default is the paper's sweep, row for row (plus the m = 1 step-cost keys).
    paper = sweep(12, r_min=2, r_max=3, methods=("consecutive",), trials=6, seed=1, system_mtbf_seconds=1e6)
    for old, new in zip(paper.rows, result.rows[::2]):
        assert {k: old[k] for k in old} == {k: new[k] for k in old}


@pytest.mark.parametrize("value, error", [((), ParameterError), ((1, 0), ParameterError), ("4", ParameterTypeError),
                                          ((2.5,), ParameterTypeError)])
def test_sweep_refuses_bad_micro_batches(value, error):
    from spare_opt import sweep

    with pytest.raises(error):
        sweep(12, r_min=2, r_max=2, methods=("consecutive",), trials=2, micro_batches=value)


# ---------------------------------------------------------------- CLI
def _cli(*args):
    from click.testing import CliRunner
    from spare_opt_cli.main import main

    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def layout_path(tmp_path_factory):
    return str(sidon(31, 4, time_limit=5).save(tmp_path_factory.mktemp("micro") / "layout.json"))


def test_validate_micro_batches_json_keys_match_the_library(layout_path, tmp_path):
    import json

    from spare_opt import Layout, Topology, domain_report, worst_case_load_after_one_failure

    racks = Topology.blocks(31, {"rack": 4})
    racks_path = tmp_path / "racks.json"
    racks.save(racks_path)
    result = _cli("validate", layout_path, "--trials", 20, "--seed", 3, "--micro-batches", 8, "--worst-k", 1,
                  "--topology", racks_path, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    layout = Layout.load(layout_path)
    direct = monte_carlo(layout, trials=20, seed=3, micro_batches=8)
    assert doc["micro_batches"] == 8
    assert doc["monte_carlo"]["mean_step_cost"] == pytest.approx(direct.mean_step_cost)
    assert doc["monte_carlo"]["mean_step_cost_ci95"] == pytest.approx(list(direct.mean_step_cost_ci95))
    assert doc["closed_form"]["step_cost_bound"] == pytest.approx(theory.step_cost_lower_bound(31, 4, 8))
    assert doc["closed_form"]["physical_step_cost"] == pytest.approx(theory.physical_step_cost(31, 4))
    assert doc["worst_case"]["load_after_one_failure"] == worst_case_load_after_one_failure(layout, micro_batches=8)
    expected = domain_report(layout, racks, micro_batches=8).levels["rack"]
    assert doc["domains"]["rack"]["worst_load"] == expected["worst_load"]
    text = _cli("validate", layout_path, "--trials", 20, "--seed", 3, "--micro-batches", 8, "--worst-k", 1,
                "--topology", racks_path)
    assert text.exit_code == 0, text.output
    assert f"{direct.mean_step_cost:.4f}" in text.stdout and "physical limit" in text.stdout
    assert "worst-case L* = 9" in text.stdout  # ceil(8 * 31 / 30): a Sidon layout is connected
    # Without --trials the closed forms are still in the JSON.
    bare = json.loads(_cli("validate", layout_path, "--trials", 0, "--worst-k", 0, "--micro-batches", 4,
                           "--json").stdout)
    assert bare["monte_carlo"] is None
    assert bare["closed_form"]["step_cost_bound"] == pytest.approx(theory.step_cost_lower_bound(31, 4, 4))


def test_sweep_micro_batches_json_and_text():
    import json

    result = _cli("sweep", "-n", 12, "--r-min", 2, "--r-max", 3, "--methods", "consecutive", "--trials", 5,
                  "--micro-batches", "1,4", "--micro-batches", 8, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(row["redundancy"], row["micro_batches"]) for row in doc["rows"]] == [
        (2, 1), (2, 4), (2, 8), (3, 1), (3, 4), (3, 8)]
    assert doc["parameters"]["micro_batches"] == [1, 4, 8]
    text = _cli("sweep", "-n", 12, "--r-min", 2, "--r-max", 3, "--methods", "consecutive", "--trials", 5,
                "--micro-batches", "1,4")
    assert text.exit_code == 0, text.output
    assert "mean step cost L*/M" in text.stdout
    for row in doc["rows"]:
        if row["micro_batches"] == 4:
            assert f"{row['mean_step_cost']:.4f}" in text.stdout


@pytest.mark.parametrize("command, value", [
    ("validate", "0"), ("validate", "-2"), ("validate", "1.5"), ("validate", "x"), ("validate", "10000000000"),
    ("sweep", "0"), ("sweep", "1,,4"), ("sweep", "2.5"), ("sweep", "4,-1"), ("sweep", ""), ("sweep", "10000000000"),
])
def test_bad_micro_batches_give_one_line_errors(layout_path, command, value):
    args = ([command, layout_path, "--trials", 2, "--worst-k", 0] if command == "validate"
            else [command, "-n", 12, "--r-min", 2, "--r-max", 2, "--methods", "consecutive", "--trials", 2])
    result = _cli(*args, "--micro-batches", value)
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "micro" in errors[0].lower()


def test_validate_correlated_table_takes_micro_batches(layout_path, tmp_path):
    import json

    from spare_opt import Layout, Topology, domain_monte_carlo

    racks = Topology.blocks(31, {"rack": 4})
    racks_path = tmp_path / "racks.json"
    racks.save(racks_path)
    args = ["validate", layout_path, "--trials", 10, "--worst-k", 0, "--topology", racks_path,
            "--domain-probability", 0.2, "--baselines", "none", "--micro-batches", 4]
    doc = json.loads(_cli(*args, "--json").stdout)
    row = doc["domains"]["rack"]["correlated"][0]
    direct = domain_monte_carlo(Layout.load(layout_path), racks, domain_probability=0.2, trials=10, micro_batches=4)
    assert row["micro_batches"] == 4 and row["mean_step_cost"] == pytest.approx(direct.mean_step_cost)
    text = _cli(*args)
    assert text.exit_code == 0, text.output
    assert "L*/M (M = 4)" in text.stdout and f"{direct.mean_step_cost:.4f}" in text.stdout

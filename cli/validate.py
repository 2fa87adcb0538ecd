"""``spare-opt validate``: guarantees, worst cases and Monte-Carlo estimates of a layout."""

import click

from spare_opt import theory
from spare_opt.guarantees.domains import DOMAIN_REPORT_MAX_PAIRS, domain_comparison, domain_report
from spare_opt.guarantees.montecarlo import MAX_TRIALS, monte_carlo
from spare_opt.guarantees.worst_case import (
    EXACT_WORST_CASE_MAX_GROUPS,
    min_wipe_out_set,
    worst_case_after_one_failure,
    worst_case_load_after_one_failure,
    worst_case_profile,
)

from .options import (
    FloatRange,
    IntegerRange,
    check_output_path,
    given,
    refuse_unused,
    warn_ignored,
    echo_json,
    executor_for,
    force_option,
    json_option,
    layout_argument,
    layout_micro_batches,
    micro_batches_option,
    progress_bar,
    quiet_option,
    scheduler_option,
    seed_option,
    topology_option,
    workers_option,
)

__all__ = ["command"]

SHOWN_GROUPS = 24


def _groups_text(groups):
    text = ", ".join(str(int(g)) for g in groups[:SHOWN_GROUPS])
    if len(groups) > SHOWN_GROUPS:
        text += f", ... ({len(groups) - SHOWN_GROUPS} more)"
    return text


def _percent(value):
    return "n/a" if value is None else f"{100 * value:+.2f}%"


def _interval(pair, digits, trials):
    if pair[0] is None:
        return "n/a (one trial)" if trials == 1 else "n/a (too few trials)"
    return f"[{pair[0]:.{digits}f}, {pair[1]:.{digits}f}]"


@click.command("validate")
@layout_argument
@click.option("--trials", type=IntegerRange(min=0, max=MAX_TRIALS), default=200, show_default=True, metavar="K",
              help="Monte-Carlo failure orders (0 skips the Monte-Carlo).")
@seed_option
@micro_batches_option
@workers_option
@scheduler_option
@click.option("--worst-k", "worst_k", type=IntegerRange(min=0), default=None, metavar="K",
              help="Worst-case S* for failure sets of size 1..K  [default: r-1, the sizes always masked].")
@click.option("--time-limit", type=FloatRange(min=0, min_open=True), default=10.0, show_default=True,
              metavar="SEC", help="Time budget per failure-set size for the worst case (CP-SAT, or local search beyond N = 64).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None, metavar="FILE.png",
              help="Write a PNG: histogram of masked failures and mean S* against failures (needs matplotlib).")
@topology_option("Also report failure domains of this topology file: is the layout domain-safe, the worst single "
                 "domain failure and the worst pair of domains, per level (exact planner).")
@click.option("--domain-level", "domain_levels", multiple=True, metavar="LEVEL",
              help="With --topology: a level to report (repeatable)  [default: every level].")
@click.option("--max-pairs", type=IntegerRange(min=1), default=DOMAIN_REPORT_MAX_PAIRS, show_default=True,
              metavar="K", help="With --topology: domain pairs evaluated for the worst pair (all when fewer).")
@click.option("--domain-probability", type=FloatRange(0, 1), default=None, metavar="P",
              help="With --topology: Monte-Carlo under correlated failures, a failure event taking a whole domain "
                   "(of the first reported level) with probability P, beside the baselines; --trials trials.")
@click.option("--failure-model", "model_path", default=None, metavar="FILE",
              help="With --topology: instead of --domain-probability, take P from a failure model written by "
                   "'spare-opt fit --output FILE' (its probability that a failure event takes several nodes).")
@click.option("--baselines", default="sidon,consecutive", show_default=True, metavar="METHODS",
              help="With --domain-probability: layouts of the same N and r run side by side (comma-separated "
                   "methods, or 'none').")
@force_option
@json_option
@quiet_option
@click.pass_context
def command(ctx, layout, trials, seed, micro_batches, workers, scheduler, worst_k, time_limit, plot_path, topology, domain_levels,
            max_pairs, domain_probability, model_path, baselines, force, as_json, quiet):
    """Check a layout: invariants, guarantees, worst cases and Monte-Carlo endurance.

    \b
    Prints
      * the invariants (the file loaded, so they hold), N, r, method, lambda;
      * the guaranteed tolerance: every set of up to r-1 failed groups is masked,
        and one smallest failure set that wipes out (the r holders of a shard type);
      * the worst-case stack number S* after one failure, and over every failure set
        of size k = 1..r-1: exact (CP-SAT) for N <= 64, a local-search lower bound
        beyond, each with its label;
      * with --trials > 0: Monte-Carlo mu (failures masked before the first wipe-out)
        and Sbar (mean stack number until then) with 95% confidence intervals,
        beside the closed forms of the paper with relative errors;
      * with --micro-batches M > 1 (docs/analysis.md, "Micro-batches"): the
        worst-case load L* after one failure (closed form), and the Monte-Carlo
        mean step cost L*/M until the wipe-out with its 95% interval, beside the
        closed-form bound mean(ceil(M N/(N-k))/M) and the physical limit
        mean(N/(N-k)) over the same k.

    \b
    With --topology (docs/domains.md), per level:
      * safe: whether every domain holds pairwise disjoint shard types, and the
        most holders of one shard type in one domain;
      * the worst single domain failure (status, exact S*; with --micro-batches
        M > 1 also its worst load L*) and the worst pair of domains; with --domain-probability P, mu and Sbar when a failure event
        takes a whole domain with probability P, beside the baselines.

    \b
    Examples:
      spare-opt validate layout.json --trials 2000 --seed 1 --workers 2 --plot mc.png
      spare-opt validate layout.json --trials 1000 --micro-batches 8 --json
      spare-opt validate safe.json --topology racks.json --domain-probability 0.057 --json
    """
    if topology is None:
        for name, option in (("domain_levels", "--domain-level"), ("max_pairs", "--max-pairs"),
                             ("domain_probability", "--domain-probability"), ("model_path", "--failure-model"),
                             ("baselines", "--baselines")):
            if given(ctx, name):
                refuse_unused(option, "needs --topology (without it it would do nothing)")
    if model_path is not None:
        if domain_probability is not None:
            refuse_unused("--failure-model", "and --domain-probability both give P: give one")
        from spare_opt.traces.failure_model import FailureModel

        domain_probability = FailureModel.load(model_path).multi_node_probability
    if topology is not None and domain_probability is None and given(ctx, "baselines"):
        refuse_unused("--baselines", "needs --domain-probability or --failure-model (the baselines run in the "
                                     "Monte-Carlo under correlated failures; without it they would do nothing)")
    if domain_probability is not None and trials == 0:
        refuse_unused("--domain-probability", "needs --trials > 0 (it runs a Monte-Carlo)")
    baseline_methods = [] if baselines.strip() == "none" else [b.strip() for b in baselines.split(",") if b.strip()]
    if plot_path is not None:
        if trials == 0:
            raise click.BadParameter("needs --trials > 0 (the plot shows Monte-Carlo results)", param_hint="--plot")
        check_output_path(plot_path, force)
        from spare_opt._core.plotting import require_matplotlib

        require_matplotlib()  # before the long work, not after it
    n, r = layout.groups, layout.redundancy
    from spare_opt.planning.plan import check_micro_batches

    micro_batches = layout_micro_batches(layout, micro_batches)
    check_micro_batches(micro_batches, n)  # N M beyond memory: refused before any work
    if worst_k is not None and worst_k > n:
        raise click.BadParameter(f"must be at most N = {n}", param_hint="--worst-k")
    # Options of how the work runs, ignored when there is no such work: warnings.
    if force and plot_path is None:
        warn_ignored("--force", "there is no output file to overwrite without --plot")
    if trials == 0:
        for name, option in (("workers", "--workers"), ("scheduler", "--scheduler")):
            if given(ctx, name):
                warn_ignored(option, "--trials 0 runs no Monte-Carlo (the only parallel work)")
    elif given(ctx, "workers") and scheduler not in (None, "local"):
        warn_ignored("--workers", "the Dask scheduler's workers run the trials (--workers sizes only "
                                  "--scheduler local)")
    if given(ctx, "time_limit") and (r - 1 if worst_k is None else worst_k) == 0:
        warn_ignored("--time-limit", "no worst-case search runs (--worst-k 0, or r = 1)")
    # The cluster is reached (or a bad address refused) before the worst case, not after it,
    # and started once for both the Monte-Carlo and the correlated trials.
    with executor_for(scheduler if trials else None, workers) as executor:
        overlap = layout.overlap()
        shard, wipe_out_set = min_wipe_out_set(layout)
        after_one = worst_case_after_one_failure(layout)
        load_after_one = worst_case_load_after_one_failure(layout, micro_batches=micro_batches)
        profile = worst_case_profile(layout, max_failed=worst_k, time_limit=time_limit, seed=seed)
        result = None
        if trials:
            with progress_bar(quiet, "Monte-Carlo trials") as progress:
                result = monte_carlo(layout, trials=trials, seed=seed, micro_batches=micro_batches,
                                     workers=workers, executor=executor, progress=progress)
        domains = comparison = None
        if topology is not None:
            with progress_bar(quiet, "domain failures") as progress:
                domains = domain_report(layout, topology, levels=list(domain_levels) or None, max_pairs=max_pairs,
                                        micro_batches=micro_batches, progress=progress)
            if domain_probability is not None:
                level = next(iter(domains.levels))
                with progress_bar(quiet, "correlated trials") as progress:
                    comparison = domain_comparison(layout, topology, domain_probability=domain_probability,
                                                   level=level, baselines=baseline_methods, trials=trials, seed=seed,
                                                   micro_batches=micro_batches, workers=workers, executor=executor,
                                                   progress=progress)
                domains.levels[level]["correlated"] = comparison
    written = None
    if plot_path is not None:
        from spare_opt.guarantees._plots import plot_monte_carlo

        written = plot_monte_carlo(result, plot_path, force=force)

    closed = None
    if result is None:  # the Monte-Carlo result carries the closed forms beside its estimates
        closed = {"mu": theory.mu(n, r), "sbar": theory.sbar_lower_bound(n, r),
                  "step_cost_bound": theory.step_cost_lower_bound(n, r, micro_batches),
                  "physical_step_cost": theory.physical_step_cost(n, r)}
    if as_json:
        doc = {
            "layout": {"method": layout.method, "groups": n, "redundancy": r, "lambda": overlap,
                       "offsets": None if layout.offsets is None else list(layout.offsets)},
            "invariants": "ok",
            "micro_batches": micro_batches,
            "guaranteed_tolerance": r - 1,
            "worst_case": {
                "min_wipe_out_set": [int(g) for g in wipe_out_set],
                "min_wipe_out_shard_type": shard,
                "after_one_failure": after_one,
                "load_after_one_failure": load_after_one,
                "by_failed_count": [w.to_dict() for w in profile],
            },
            "monte_carlo": None,
            "closed_form": closed,
            "plot": None if written is None else str(written),
        }
        if result is not None:
            doc.update(result.to_dict())
        if domains is not None:
            doc["domains"] = domains.to_dict()["levels"]
        echo_json(doc)
        return

    click.echo(f"layout:        {layout.method}, N = {n}, r = {r}, lambda = {overlap} (most shard types two groups share)")
    click.echo("invariants:    ok (distinct rows, every layer a permutation, every shard type held r times)")
    click.echo(f"guaranteed:    every set of up to r-1 = {r - 1} failed groups is masked")
    click.echo(f"wipe-out:      smallest failure sets have r = {r} groups, e.g. the holders of shard type {shard}: "
               f"{_groups_text(wipe_out_set)}")
    if after_one["stack_number"] is None:
        click.echo("after 1 fail:  wipe-out (r = 1)")
    else:
        click.echo(f"after 1 fail:  worst-case S* = {after_one['stack_number']} (= c(1), for every failed group)")
        if micro_batches > 1:
            w = load_after_one
            even = "the even share" if w["load"] == w["lower_bound"] else f"above the even share {w['lower_bound']}"
            click.echo(f"               with M = {micro_batches} micro-batches: worst-case L* = {w['load']}, step cost "
                       f"{w['step_cost']:.4f} ({even}; ceil(M s/(s-1)), s = {w['component_groups']} groups in the "
                       f"smallest component)")
    if profile:
        label = "exact, CP-SAT" if n <= EXACT_WORST_CASE_MAX_GROUPS else "local search: lower bounds"
        click.echo(f"worst-case S* over every failure set of size k ({label}):")
        click.echo(f"  {'k':>4}  {'S*':>4}  {'c(k)':>4}  {'status':<14}  failure set")
        for w in profile:
            s = "-" if w.stack_number is None else str(w.stack_number)
            status = w.status if w.exact or w.method == "local-search" else f"{w.status} (<= {w.upper_bound})"
            click.echo(f"  {w.failed_count:>4}  {s:>4}  {w.lower_bound!s:>4}  {status:<14}  {_groups_text(w.failure_set)}")
    if result is None:
        click.echo(f"closed forms:  mu = {closed['mu']:.1f}, Sbar >= {closed['sbar']:.3f} (Monte-Carlo skipped: --trials 0)")
        if micro_batches > 1:
            click.echo(f"               M = {micro_batches}: mean step cost >= {closed['step_cost_bound']:.4f}; "
                       f"physical limit mean N/(N-k) = {closed['physical_step_cost']:.4f}")
    else:
        doc = result.to_dict()
        mc, cf = doc["monte_carlo"], doc["closed_form"]
        click.echo(f"Monte-Carlo:   {result.trials} random failure orders, seed {result.seed}, "
                   f"{result.workers} worker(s), {result.seconds:.2f} s")
        click.echo(f"  {'':<30} {'Monte-Carlo':>11}  {'95% CI':<20}  {'closed form':>11}  {'rel. error':>10}")
        click.echo(f"  {'mu (failures masked)':<30} {result.mu:>11.2f}  {_interval(mc['mu_ci95'], 2, result.trials):<20}  "
                   f"{result.closed_form_mu:>11.2f}  {_percent(cf['mu_relative_error']):>10}")
        click.echo(f"  {'Sbar (mean stack number)':<30} {result.sbar:>11.4f}  {_interval(mc['sbar_ci95'], 4, result.trials):<20}  "
                   f"{result.closed_form_sbar:>11.4f}  {_percent(cf['sbar_relative_error']):>10}")
        if micro_batches > 1:
            label = f"step cost L*/M (M = {micro_batches})"
            click.echo(f"  {label:<30} {result.mean_step_cost:>11.4f}  "
                       f"{_interval(mc['mean_step_cost_ci95'], 4, result.trials):<20}  "
                       f"{result.step_cost_bound:>11.4f}  {_percent(cf['step_cost_relative_error']):>10}")
            click.echo(f"  {'physical limit N/(N-k)':<30} {'':>11}  {'':<20}  {result.physical_step_cost:>11.4f}")
        click.echo("  (closed forms: Lee et al. 2026, Sec. 4-5; the Sbar form is a lower bound with rho_k = 0;"
                   " rel. error = (closed - MC) / MC)")
        if micro_batches > 1:
            click.echo("  (step cost: mean of L_k/M over the same k = 0 .. masked as Sbar; its closed form is the "
                       "lower bound mean ceil(M N/(N-k))/M over k < floor(mu))")
    if domains is not None:
        _echo_domains(domains.levels)
    if written is not None:
        click.echo(f"plot:          {written}")


def _echo_domains(levels):
    """The text form of the domain report (and the correlated Monte-Carlo, if run)."""
    for level, info in levels.items():
        safe = "yes" if info["safe"] else f"no: up to {info['multiplicity']} holders of a shard type in one domain"
        click.echo(f"domains {level}: {info['domains']} domains; domain-safe: {safe}")
        if info["worst_status"] is not None:
            s = "-" if info["worst_stack_number"] is None else info["worst_stack_number"]
            click.echo(f"  worst single domain: {info['worst_domain']}: {info['worst_status']}, S* = {s} "
                       f"(c(k) = {info['worst_lower_bound']}); {info['wipe_out_domains']} domain(s) wipe out alone")
            if info["micro_batches"] > 1 and info["worst_load"] is not None:
                click.echo(f"  worst load with M = {info['micro_batches']}: {info['worst_load_domain']}: "
                           f"L* = {info['worst_load']}, step cost {info['worst_step_cost']:.4f}")
        pair = info["worst_pair"]
        if pair is not None:
            s = "-" if pair["stack_number"] is None else pair["stack_number"]
            click.echo(f"  worst pair: {pair['domains'][0]} + {pair['domains'][1]}: {pair['status']}, S* = {s} "
                       f"(c(k) = {pair['lower_bound']}); {info['wipe_out_pairs']} pair(s) lose a shard type "
                       f"neither loses alone; {info['pairs_evaluated']} of {info['pairs_total']} pairs evaluated "
                       f"({info['pair_search']})")
        rows = info.get("correlated")
        if rows:
            first = rows[0]
            click.echo(f"  correlated failures: a failure event takes its whole {level} with probability "
                       f"{first['domain_probability']} ({first['trials']} trials, seed {first['seed']}):")
            m = first["micro_batches"]
            cost = f"  {f'L*/M (M = {m})':>14}" if m > 1 else ""
            click.echo(f"    {'layout':<14} {'safe':<5} {'mu (groups)':>12}  {'mu (events)':>12}  {'Sbar':>8}{cost}")
            for row in rows:
                name = "this layout" if row["name"] == "layout" else row["name"]
                cost = f"  {row['mean_step_cost']:>14.4f}" if m > 1 else ""
                click.echo(f"    {name:<14} {'yes' if row['safe'] else 'no':<5} {row['mu']:>12.2f}  "
                           f"{row['mu_events']:>12.2f}  {row['sbar']:>8.4f}{cost}")

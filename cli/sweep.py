"""``spare-opt sweep``: Monte-Carlo and closed forms over a range of r and layout methods."""

import math
import sys

import click

from spare_opt import theory
from spare_opt.layouts.generators import METHODS
from spare_opt.guarantees.montecarlo import MAX_TRIALS, sweep
from spare_opt.simulation.parameters import PAPER

from .options import (
    deprecated_alias,
    INTEGER,
    FloatRange,
    IntegerRange,
    check_output_path,
    given,
    warn_ignored,
    echo_json,
    executor_for,
    force_option,
    json_option,
    micro_batches_list_option,
    progress_bar,
    quiet_option,
    scheduler_option,
    seed_option,
    workers_option,
)

__all__ = ["command"]


def _methods(ctx, param, value):
    names = [name.strip() for name in value.split(",")]
    if not any(names):
        raise click.BadParameter("name at least one layout method")
    if not all(names):  # "sidon,,block": a typo that would silently drop a method
        raise click.BadParameter(f"empty method name in {value!r}; separate the methods with single commas")
    for name in names:
        if name not in METHODS:
            raise click.BadParameter(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    return list(dict.fromkeys(names))


def _number(value, digits):
    """A figure, or "-" where there is none (no interval from one trial: NaN or None)."""
    return "-" if value is None or value != value else f"{value:.{digits}f}"


def _ratio(value):
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 100 else f"{value:.0f}"


def _percent(value):
    return "-" if value is None else f"{100 * value:+.1f}%"


@click.command("sweep")
@click.option("--groups", "-N", "groups", type=INTEGER, default=None, metavar="N",
              help="Number of DP groups N  [required].")
@click.option("--r-min", type=INTEGER, default=2, show_default=True, help="Smallest redundancy r.")
@click.option("--r-max", type=INTEGER, default=20,
              help="Largest redundancy r (default: 20, or N when N is smaller: a group holds r <= N shard types).")
@click.option("--methods", default="sidon,consecutive,block", show_default=True, callback=_methods,
              help=f"Comma-separated layout methods ({', '.join(METHODS)}); block only where r divides N.")
@click.option("--trials", type=IntegerRange(min=1, max=MAX_TRIALS), default=200, show_default=True, metavar="K",
              help="Monte-Carlo failure orders per (method, r); the same orders for every method.")
@seed_option
@micro_batches_list_option
@workers_option
@scheduler_option
@click.option("--mtbf", "mtbf_minutes", type=FloatRange(min=0, min_open=True),
              default=PAPER["system_mtbf_seconds"] / 60, show_default=True, metavar="MIN",
              help="System MTBF m in minutes, for J.")
@click.option("--restart-seconds", "restart_seconds", type=FloatRange(min=0),
              default=PAPER["restart_seconds"], show_default=True, metavar="SEC",
              help="Global restart time T_r in seconds, for J.")
@click.option("--save-seconds", "save_seconds", type=FloatRange(min=0, min_open=True),
              default=PAPER["save_seconds"], show_default=True, metavar="SEC",
              help="Checkpoint save time T_s in seconds, for J.")
@click.option("--time-limit", type=FloatRange(min=0, min_open=True), default=10.0,
              show_default=True,
              metavar="SEC", help="Sidon generator time budget per layout, in seconds.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None, metavar="FILE.png",
              help="Write a PNG of mu, Sbar and J against r per method (needs matplotlib).")
@force_option
@json_option
@quiet_option
@click.pass_context
@deprecated_alias("-n", "--groups/-N", "groups", type=INTEGER, required=True)
@deprecated_alias("--restart", "--restart-seconds", "restart_seconds", type=FloatRange(min=0),
                  convert=lambda minutes: minutes * 60.0)
@deprecated_alias("--save", "--save-seconds", "save_seconds", type=FloatRange(min=0, min_open=True))
def command(ctx, groups, r_min, r_max, methods, trials, seed, micro_batches, workers, scheduler, mtbf_minutes, restart_seconds,
            save_seconds, time_limit, plot_path, force, as_json, quiet):
    """Compare layout methods over r: Monte-Carlo mu and Sbar, closed forms, and J.

    For each method and each r in [--r-min, --r-max], generates the layout, runs
    --trials random failure orders through the online controller until the first
    wipe-out, and prints mu (failures masked) and Sbar (mean stack number) with 95%
    confidence intervals, the closed forms of the paper with relative errors, and
    the normalised time-to-train J = Sbar / A*(mu m) from the Monte-Carlo and from
    the closed forms (defaults: the paper's m = 5 min, T_r = 60 min, T_s = 60 s).
    Combinations that cannot be built (block where r does not divide N) are
    listed as skipped.  With --micro-batches 1,4,8 every (method, r) is also run
    with M micro-batches per shard type on the same failure orders: one row per
    (method, r, M) with the Monte-Carlo mean step cost L*/M, its 95% interval, the
    closed-form bound and the physical limit, and J from the step cost.

    \b
    Example:
      spare-opt sweep --groups 600 --r-min 2 --r-max 20 --methods sidon,consecutive,block \\
          --trials 300 --seed 0 --workers 2 --plot sweep.png
      spare-opt sweep --groups 600 --r-min 4 --r-max 12 --methods sidon --micro-batches 1,4,8,16
    """
    if not math.isfinite(mtbf_minutes * 60):  # named as given, not as the seconds it overflows to
        raise click.UsageError(f"--mtbf: {mtbf_minutes:g} minutes does not fit in seconds (at most "
                               f"{sys.float_info.max / 60:.4g} minutes)")
    # Options of how the work runs, ignored where there is no such work: warnings.
    if force and plot_path is None:
        warn_ignored("--force", "there is no output file to overwrite without --plot")
    if given(ctx, "time_limit") and "sidon" not in methods:
        warn_ignored("--time-limit", "only the sidon search has a time budget (--methods has no sidon)")
    if given(ctx, "workers") and scheduler not in (None, "local"):
        warn_ignored("--workers", "the Dask scheduler's workers run the trials (--workers sizes only "
                                  "--scheduler local)")
    if plot_path is not None:
        check_output_path(plot_path, force)
        from spare_opt._core.plotting import require_matplotlib

        require_matplotlib()  # before the long work, not after it
    if not given(ctx, "r_max"):
        r_max = None  # the library's default, min(20, N)
    with executor_for(scheduler, workers) as executor, progress_bar(quiet, "sweep trials") as progress:
        result = sweep(groups, r_min=r_min, r_max=r_max, methods=methods, trials=trials, seed=seed, workers=workers,
                       executor=executor, system_mtbf_seconds=mtbf_minutes * 60, save_seconds=save_seconds,
                       restart_seconds=restart_seconds, time_limit=time_limit, micro_batches=micro_batches,
                       progress=progress)
    written = None
    if plot_path is not None:
        from spare_opt.guarantees._plots import plot_sweep

        written = plot_sweep(result, plot_path, force=force)
    if as_json:
        doc = result.to_dict()
        doc["plot"] = None if written is None else str(written)
        echo_json(doc)
        return
    p = result.parameters
    click.echo(f"N = {groups}, {trials} trials per point, seed {seed}; J with m = {p['system_mtbf_seconds'] / 60:g} min, "
               f"T_r = {p['restart_seconds'] / 60:g} min, T_s = {p['save_seconds']:g} s"
               + (f"; J below at M = {micro_batches[0]} (the first --micro-batches; every M in the second table)"
                  if micro_batches != (1,) else ""))
    header = (f"{'method':<12} {'r':>3} {'lam':>3} {'mu MC':>8} {'95% CI':>17} {'mu cf':>7} {'err':>7} "
              f"{'Sbar MC':>7} {'95% CI':>15} {'Sbar cf':>7} {'err':>6} {'J MC':>6} {'J cf':>6}")
    click.echo(header)
    # mu and Sbar do not depend on M: one row per (method, r), with J at the first M.
    for row in (row for row in result.rows if row["micro_batches"] == micro_batches[0]):
        mu_ci = f"[{_number(row['mu_ci95'][0], 1)}, {_number(row['mu_ci95'][1], 1)}]"
        s_ci = f"[{_number(row['sbar_ci95'][0], 3)}, {_number(row['sbar_ci95'][1], 3)}]"
        click.echo(
            f"{row['method']:<12} {row['redundancy']:>3} {row['overlap']:>3} {row['mu']:>8.1f} {mu_ci:>17} "
            f"{row['closed_form_mu']:>7.1f} {_percent(row['mu_relative_error']):>7} {row['sbar']:>7.3f} {s_ci:>15} "
            f"{row['closed_form_sbar']:>7.3f} {_percent(row['sbar_relative_error']):>6} "
            f"{_ratio(row['j_monte_carlo']):>6} {_ratio(row['j_closed_form']):>6}"
        )
    if micro_batches != (1,):
        _echo_step_costs(result.rows)
    for skip in result.skipped:
        click.echo(f"skipped {skip['method']} r = {skip['redundancy']}: {skip['reason']}")
    best = [row for row in result.rows if row["j_monte_carlo"] is not None]
    if best:
        top = min(best, key=lambda row: row["j_monte_carlo"])
        shown_m = "" if micro_batches == (1,) else f", M = {top['micro_batches']}"
        click.echo(f"least J (Monte-Carlo): {top['method']} r = {top['redundancy']}{shown_m} "
                   f"(J = {top['j_monte_carlo']:.3f}); "
                   f"closed-form r* = floor(log2 N + 0.833) = {theory.r_star(groups)}")
    click.echo("err = (closed form - Monte-Carlo) / Monte-Carlo; lam = lambda, the most shard types two groups share")
    if written is not None:
        click.echo(f"plot: {written}")


def _echo_step_costs(rows):
    """The step-cost table of a sweep over M (mu, Sbar and their closed forms do not depend on M)."""
    click.echo("mean step cost L*/M until the wipe-out (same failure orders for every M):")
    click.echo(f"  {'method':<12} {'r':>3} {'M':>4} {'cost MC':>8} {'95% CI':>17} {'bound':>7} {'limit':>7} "
               f"{'J MC':>6} {'J cf':>6}")
    for row in rows:
        ci = f"[{_number(row['mean_step_cost_ci95'][0], 4)}, {_number(row['mean_step_cost_ci95'][1], 4)}]"
        click.echo(f"  {row['method']:<12} {row['redundancy']:>3} {row['micro_batches']:>4} "
                   f"{row['mean_step_cost']:>8.4f} {ci:>17} {row['step_cost_bound']:>7.4f} "
                   f"{row['physical_step_cost']:>7.4f} {_ratio(row['j_monte_carlo']):>6} "
                   f"{_ratio(row['j_closed_form']):>6}")
    click.echo("  bound = mean ceil(M N/(N-k))/M and limit = mean N/(N-k) over k < floor(mu); J uses the step cost")

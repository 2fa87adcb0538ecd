"""The guarantees' plots: Monte-Carlo endurance, the redundancy sweep, correlated failures.

Each writes a PNG atomically and needs the ``plot`` extra (matplotlib); the figure set-up
lives in :mod:`spare_opt._core.plotting`.
"""

import numpy as np

from .._core.plotting import _figure, _save
from ..planning.plan import lower_bound

__all__ = ["plot_monte_carlo", "plot_sweep", "plot_domain_probability"]


def plot_monte_carlo(result, path, force=False):
    """Histogram of masked failures and mean ``S*`` against failures, as a PNG.

    Parameters
    ----------
    result : spare_opt.MonteCarloResult
    path : str or os.PathLike
        PNG file to write.
    force : bool, default False
        Overwrite an existing file.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    SpareError
        matplotlib is not installed.
    OutputExistsError
        ``path`` exists and ``force`` is false.
    """
    figure = _figure(10, 4)
    left, right = figure.subplots(1, 2)
    left.hist(result.masked, bins=min(40, max(5, int(np.sqrt(result.trials)))), color="tab:blue", alpha=0.8)
    left.axvline(result.mu, color="black", label=f"Monte-Carlo mu = {result.mu:.1f}")
    left.axvline(result.closed_form_mu, color="tab:red", linestyle="--",
                 label=f"closed form mu = {result.closed_form_mu:.1f}")
    left.set_xlabel("failures masked before the first wipe-out")
    left.set_ylabel("trials")
    left.legend(fontsize=8)
    k = np.arange(result.stack_mean_by_k.size)
    right.plot(k, result.stack_mean_by_k, color="tab:blue", label="mean S* (trials still masked)")
    bound = [lower_bound(result.groups, int(i)) for i in k]
    right.step(k, bound, where="post", color="tab:red", linestyle="--", label="c(k) = ceil(N / (N - k))")
    right.set_xlabel("failed groups k")
    right.set_ylabel("stack number S")
    twin = right.twinx()
    twin.plot(k, result.survivors_by_k / result.trials, color="tab:gray", alpha=0.6, label="fraction still masked")
    twin.set_ylabel("fraction of trials still masked")
    twin.set_ylim(0, 1.05)
    lines = right.get_legend_handles_labels()
    extra = twin.get_legend_handles_labels()
    right.legend(lines[0] + extra[0], lines[1] + extra[1], fontsize=8, loc="upper left")
    figure.suptitle(f"{result.method} layout, N = {result.groups}, r = {result.redundancy}, "
                    f"{result.trials} trials (seed {result.seed})")
    return _save(figure, path, force)


def _errorbar(axis, x, values, ci, label, nan_to_zero=False):
    """Points with their 95% intervals (``ci``: one ``(low, high)`` per point) on ``axis``."""
    values = np.array(values)
    errors = np.abs(np.array(ci, dtype=float).T - values)
    if nan_to_zero:
        errors = np.nan_to_num(errors)
    axis.errorbar(x, values, yerr=errors, marker="o", markersize=3, capsize=2, label=label)


def plot_sweep(result, path, force=False):
    """``mu`` and ``Sbar`` against ``r`` per layout method, with the closed forms, as a PNG.

    Parameters
    ----------
    result : spare_opt.SweepResult
    path : str or os.PathLike
    force : bool, default False

    Returns
    -------
    pathlib.Path

    Raises
    ------
    SpareError
        matplotlib is not installed.
    OutputExistsError
        ``path`` exists and ``force`` is false.
    """
    micro = list(dict.fromkeys(row["micro_batches"] for row in result.rows))
    # mu and Sbar do not depend on m: the first three panels use the rows of the first m.
    base = [row for row in result.rows if row["micro_batches"] == micro[0]] if micro else []
    figure = _figure(14 if len(micro) <= 1 else 18.5, 4.2)
    axes = figure.subplots(1, 3 if len(micro) <= 1 else 4)
    methods = list(dict.fromkeys(row["method"] for row in base))
    if len(micro) > 1:
        for method in methods:
            for m in micro:
                rows = [row for row in result.rows if row["method"] == method and row["micro_batches"] == m]
                _errorbar(axes[3], [row["redundancy"] for row in rows], [row["mean_step_cost"] for row in rows],
                          [row["mean_step_cost_ci95"] for row in rows], f"{method}, m = {m}")
        for m in micro:
            by_r = {row["redundancy"]: row for row in result.rows if row["micro_batches"] == m}
            all_r = sorted(by_r)
            axes[3].plot(all_r, [by_r[x]["step_cost_bound"] for x in all_r], "k--", linewidth=0.8)
        axes[3].set_ylabel("mean step cost L*/m until the wipe-out (dashed: bounds)")
    for method in methods:
        rows = [row for row in base if row["method"] == method]
        r = [row["redundancy"] for row in rows]
        for axis, key in zip(axes, ("mu", "sbar")):
            _errorbar(axis, r, [row[key] for row in rows], [row[f"{key}_ci95"] for row in rows], method)
        j = [np.nan if row["j_monte_carlo"] is None else row["j_monte_carlo"] for row in rows]
        axes[2].plot(r, j, marker="o", markersize=3, label=method)
    all_r = sorted({row["redundancy"] for row in base})
    if all_r:
        by_r = {row["redundancy"]: row for row in base}
        axes[0].plot(all_r, [by_r[x]["closed_form_mu"] for x in all_r], "k--", label="closed form")
        axes[1].plot(all_r, [by_r[x]["closed_form_sbar"] for x in all_r], "k--", label="closed form (rho = 0)")
        j = [np.nan if by_r[x]["j_closed_form"] is None else by_r[x]["j_closed_form"] for x in all_r]
        axes[2].plot(all_r, j, "k--", label="closed form")
    axes[0].set_ylabel("mu: failures masked before a wipe-out")
    axes[1].set_ylabel("Sbar: mean stack number until the wipe-out")
    axes[2].set_ylabel("J = Sbar / A*(mu m): normalised time-to-train")
    for axis in axes:
        axis.set_xlabel("redundancy r")
        axis.xaxis.get_major_locator().set_params(integer=True)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    p = result.parameters
    figure.suptitle(f"N = {result.groups}: {p['trials']} random failure orders per point (seed {p['seed']}); "
                    f"J with m = {p['system_mtbf_seconds'] / 60:g} min, T_r = {p['restart_seconds'] / 60:g} min, "
                    f"T_s = {p['save_seconds']:g} s; 95% CIs")
    return _save(figure, path, force)


def plot_domain_probability(curves, path, *, title, force=False):
    """``mu`` and ``Sbar`` against the domain probability ``p``, one curve per layout, as a PNG.

    Parameters
    ----------
    curves : dict of str to list of spare_opt.DomainMonteCarloResult
        Layout name -> results at increasing ``domain_probability``.
    path : str or os.PathLike
    title : str
        The figure's title (the instance and the trials).
    force : bool, default False

    Returns
    -------
    pathlib.Path

    Raises
    ------
    SpareError
        matplotlib is not installed.
    OutputExistsError
        ``path`` exists and ``force`` is false.
    """
    figure = _figure(11, 4.2)
    axes = figure.subplots(1, 2)
    for name, results in curves.items():
        p = [result.domain_probability for result in results]
        for axis, key in zip(axes, ("mu", "sbar")):
            _errorbar(axis, p, [getattr(result, key) for result in results],
                      [getattr(result, f"{key}_ci95") for result in results], name, nan_to_zero=True)
    axes[0].set_ylabel("mu: groups masked before the first wipe-out")
    axes[1].set_ylabel("Sbar: mean stack number until the wipe-out")
    for axis in axes:
        axis.set_xlabel("p: probability that a failure event takes its whole domain")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    axes[0].set_yscale("log")
    figure.suptitle(title)
    return _save(figure, path, force)

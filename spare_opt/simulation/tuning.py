"""Choose the redundancy ``r`` and the checkpoint period ``T_c``: closed forms and simulation search.

* :func:`closed_form` - the paper's ``r* = floor(log2 N + 0.833)`` and the Young/Daly
  period ``T_c* = T_s + sqrt(T_s^2 + 2 T_s (T_f + T_r))`` (:mod:`spare_opt.theory`);
* :func:`tune` - a simulation search (:mod:`spare_opt.simulation.time_to_train`) over ``r`` and ``T_c``
  for replication and SPARe (and the checkpoint-only baseline) that minimises the mean
  time-to-train over seeds, with 95% confidence intervals; the result is laid out like
  the paper's table (Lee et al., ICML 2026, Sec. 6).

Runs are spread over a process pool; every run is fixed by its seed, so the result does
not depend on the number of workers.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from .._core import validation as check
from ..guarantees import theory
from .._core.parallel import run_tasks
from .._core.results import Result
from ._runs import (
    FailurePool,
    check_event_budget,
    check_params,
    closed_form_period,
    default_layout,
    mean_failures_to_wipe_out,
    run_synthetic,
    _mean_failures_to_wipe_out,
)
from .._core.stats import finite_or_none
from .._core.errors import ParameterError
from .parameters import (
    DEFAULT_PERIOD_FACTORS,
    DEFAULT_REP_REDUNDANCIES,
    DEFAULT_SPARE_REDUNDANCIES,
    SimulationParameters,
    get_preset,
    preset_parameters,
)
from .._core.paper import PAPER_TABLE
from .time_to_train import _summarise

__all__ = [
    "PAPER_TABLE",
    "closed_form_period",
    "closed_form",
    "mean_failures_to_wipe_out",
    "TuneResult",
    "tune",
    "tune_preset",
    "plot_tune",
]


def closed_form(params):
    """Closed-form choices for SPARe: ``r*`` and ``T_c*`` at ``r*``.

    Parameters
    ----------
    params : SimulationParameters

    Returns
    -------
    dict
        ``r_star`` (``floor(log2 N + 0.833)``), ``mu`` (mean failures masked,
        ``Gamma(1/r)/r * N^(1-1/r)``), ``period_seconds`` (``T_c*`` with
        ``T_f = (mu + 1) m``), ``availability`` (``A*``) and ``ttt_ratio`` (``J(r*)``,
        :func:`spare_opt.theory.normalised_ttt`).

    References
    ----------
    Lee et al., ICML 2026, Sec. 5.
    """
    check_params(params)
    r = theory.r_star(params.groups)
    if r < 2:
        return {"r_star": r, "mu": 0.0, "period_seconds": closed_form_period(params, 1.0),
                "availability": None, "ttt_ratio": None}
    mu = theory.mu(params.groups, r)
    t_f = (mu + 1.0) * params.system_mtbf_seconds
    return {
        "r_star": r,
        "mu": mu,
        "period_seconds": theory.checkpoint_period(params.save_seconds, params.restart_seconds, t_f),
        "availability": theory.availability(params.save_seconds, params.restart_seconds, t_f),
        "ttt_ratio": theory.normalised_ttt(params.groups, r, system_mtbf_seconds=params.system_mtbf_seconds,
                                           save_seconds=params.save_seconds,
                                           restart_seconds=params.restart_seconds),
    }


@dataclass(eq=False)
class TuneResult(Result):
    """Simulation search over ``r`` and ``T_c`` for one cluster size.

    Attributes
    ----------
    groups : int
        ``N``.
    params : SimulationParameters
    seeds : int
        Runs per configuration.
    strategies : dict
        ``"rep"``, ``"spare"`` (and ``"ckpt"``) to a dict with ``best_ttt_ratio``,
        ``best_ttt_ci95`` (``[nan, nan]`` when no interval can be given, and then
        ``best_ttt_ci_note`` says why, :func:`spare_opt.simulation.time_to_train.summarise`), ``best_r``, ``best_period_seconds``, ``availability`` (mean at
        the best configuration), ``mean_stack_number``, ``mean_step_cost`` (per executed
        step), ``restarts``, ``unfinished`` and
        ``curve``: per ``r`` the best ``T_c``'s ``ttt_ratio`` (mean), ``ci95``,
        ``availability`` and ``period_seconds``, plus ``periods``: every ``T_c`` tried.
    gain : float
        ``1 - spare.best_ttt_ratio / rep.best_ttt_ratio``.
    closed_form : dict
        :func:`closed_form`.
    micro_batches : int
        ``m`` of the SPARe sweep (1: the paper's model).
    """

    groups: int
    params: SimulationParameters
    seeds: int
    strategies: dict
    gain: float
    closed_form: dict = field(default_factory=dict)
    micro_batches: int = 1

    def to_dict(self):
        """dict: JSON-ready; the keys ``rep``, ``spare``, ``ckpt`` and ``gain`` at the top."""
        out = {"groups": self.groups, "seeds": self.seeds, "micro_batches": self.micro_batches}
        out.update(self.strategies)
        out["gain"] = self.gain
        out["closed_form"] = self.closed_form
        out["parameters"] = self.params.to_dict()
        return finite_or_none(out)


def _task(params, strategy, redundancy, seed, periods, layout, micro_batches=1):
    """One task: every checkpoint period of one (strategy, r, seed), on one failure pool."""
    pool = FailurePool(strategy, params.groups, redundancy, seed, layout, micro_batches if strategy == "spare" else 1)
    return [run_synthetic(params, strategy, redundancy, period, seed, pool) for period in periods]


def tune(params, *, seeds=10, rep_redundancies=DEFAULT_REP_REDUNDANCIES,
         spare_redundancies=DEFAULT_SPARE_REDUNDANCIES, period_factors=DEFAULT_PERIOD_FACTORS, include_ckpt=True,
         micro_batches=1, workers=1, executor=None, progress=None, layout_time_limit=2.0):
    """Search ``r`` and ``T_c`` by simulation for replication and SPARe; return the best of each.

    For each strategy and ``r``, the checkpoint periods tried are ``period_factors``
    times the Young/Daly ``T_c*`` with ``T_f`` = (mean failures to wipe-out, estimated
    on 64 random failure orders) ``* m``.  Every configuration runs ``seeds`` seeds
    (``0 .. seeds-1``, the same seeds for every configuration: common random
    numbers); the best configuration minimises the mean ``TTT/T0``.

    Parameters
    ----------
    params : SimulationParameters
    seeds : int, default 10
        Runs per configuration (>= 1; >= 2 for confidence intervals).
    rep_redundancies, spare_redundancies : sequence of int
        The ``r`` values swept (``r >= 1`` for replication, ``r >= 2`` for SPARe);
        defaults :data:`~spare_opt.simulation.parameters.DEFAULT_REP_REDUNDANCIES` and
        :data:`~spare_opt.simulation.parameters.DEFAULT_SPARE_REDUNDANCIES`.
    period_factors : sequence of float
        Multiples of ``T_c*`` tried (default
        :data:`~spare_opt.simulation.parameters.DEFAULT_PERIOD_FACTORS`, as the presets).
    include_ckpt : bool, default True
        Also run checkpointing alone (at its ``T_c*`` only).
    micro_batches : int, default 1
        ``m``, micro-batches per shard type of SPARe (``docs/fractional.md``): the ``r``
        sweep runs at this ``m``.  Replication and checkpointing do not use it.  ``m = 1``
        is the paper's model (bit-identical results).
    workers : int, default 1
        Processes (``-1``: every CPU); 1 runs in this process.
    executor : concurrent.futures.Executor, optional
        Run the tasks on this executor instead (a Dask cluster, ``docs/scaling.md``).
    progress : callable or None
        ``progress(done, total)`` after each task (one task = all periods of one
        strategy, ``r`` and seed).
    layout_time_limit : float, default 2.0
        Seconds for each Sidon layout search.

    Returns
    -------
    TuneResult
        The same whatever ``workers`` or ``executor`` runs it.

    Raises
    ------
    ParameterTypeError, ParameterError
        Bad seeds, redundancies, factors, workers or executor; a
        ``params.trace_time_scale`` other than 1 (tune replays no trace).
    """
    check_params(params)
    seeds = check.count("seeds", seeds, maximum=check.MAX_RUNS)
    n = params.groups
    reps = check.integers("rep redundancies", rep_redundancies, minimum=1, maximum=n)
    spares = check.integers("spare redundancies", spare_redundancies, minimum=2, maximum=n)
    factors = check.numbers_("period factors", period_factors, above=0.0)
    include_ckpt = check.flag("include_ckpt", include_ckpt)
    from ..planning.plan import check_micro_batches

    micro_batches = check_micro_batches(micro_batches, n)
    if params.trace_time_scale != 1.0:
        raise ParameterError(f"params.trace_time_scale = {params.trace_time_scale:g} does nothing in tune, which "
                             "draws Weibull failures (no trace)")
    check_event_budget(params)
    return _tune(params, seeds, reps, spares, factors, include_ckpt, micro_batches, workers, executor, progress,
                 layout_time_limit)


def _tune(params, seeds, reps, spares, factors, include_ckpt, micro_batches, workers, executor, progress,
          layout_time_limit):
    """:func:`tune` on checked arguments; ``reps`` may be empty (SPARe only).

    Arguments are checked by the caller (:func:`tune`, or :func:`tune_preset` after a
    :func:`tune` of the same ``N``); ``layout_time_limit`` by :func:`default_layout`."""
    n = params.groups
    # ---------------------------------------------------------------- the task list
    configs = []  # (strategy, r, periods, layout)
    if include_ckpt:
        configs.append(("ckpt", 1, (closed_form_period(params, 1.0),), None))
    for r in reps:
        t_c = closed_form_period(params, _mean_failures_to_wipe_out(params, "rep", r, None))
        configs.append(("rep", r, tuple(t_c * f for f in factors), None))
    for r in spares:
        layout = default_layout(n, r, time_limit=layout_time_limit)
        t_c = closed_form_period(params, _mean_failures_to_wipe_out(params, "spare", r, layout))
        configs.append(("spare", r, tuple(t_c * f for f in factors), layout))
    tasks = [(params, strategy, r, seed, periods, layout, micro_batches)
             for strategy, r, periods, layout in configs for seed in range(seeds)]
    results = run_tasks(_task, tasks, workers=workers, executor=executor, progress=progress)

    # ---------------------------------------------------------------- summaries
    strategies = {}
    position = 0
    for strategy, r, periods, _ in configs:
        runs = results[position:position + seeds]
        position += seeds
        entry = strategies.setdefault(strategy, {"curve": []})
        per_period = []
        for j, period in enumerate(periods):
            summary = _summarise([run[j] for run in runs])
            per_period.append({
                "period_seconds": period,
                "ttt_ratio": summary["ttt_ratio"]["mean"],
                "ci95": summary["ttt_ratio"]["ci95"],
                "ci_note": summary["ttt_ratio"]["ci_note"],
                "availability": summary["availability"]["mean"],
                "mean_stack_number": summary["mean_stack_number"]["mean"],
                "mean_step_cost": summary["mean_step_cost"]["mean"],
                "restarts": summary["restarts"]["mean"],
                "masked_failures": summary["masked_failures"]["mean"],
                "unfinished": summary["unfinished"],
            })
        best = min(per_period, key=lambda row: row["ttt_ratio"])
        entry["curve"].append(dict(best, r=r, periods=[row["period_seconds"] for row in per_period],
                                   ttt_ratio_by_period=[row["ttt_ratio"] for row in per_period]))
    for strategy, entry in strategies.items():
        best = min(entry["curve"], key=lambda row: row["ttt_ratio"])
        entry.update(
            best_ttt_ratio=best["ttt_ratio"],
            best_ttt_ci95=best["ci95"],
            best_ttt_ci_note=best["ci_note"],
            best_r=best["r"],
            best_period_seconds=best["period_seconds"],
            availability=best["availability"],
            mean_stack_number=best["mean_stack_number"],
            mean_step_cost=best["mean_step_cost"],
            restarts=best["restarts"],
            unfinished=best["unfinished"],
        )
    gain = _gain(strategies)
    return TuneResult(groups=n, params=params, seeds=int(seeds), strategies=strategies, gain=gain,
                      micro_batches=micro_batches,
                      closed_form=closed_form(params))


def tune_preset(name, groups=None, *, seeds=10, micro_batches=1, workers=1, executor=None, progress=None,
                **overrides):
    """Run :func:`tune` for a preset: one cluster size or all of the preset's, at one ``m`` or several.

    Parameters
    ----------
    name : str
        Preset name (:data:`spare_opt.simulation.parameters.PRESETS`).
    groups : int or None
        One ``N``, any (the preset's timings and system MTBF at that ``N``; the
        redundancies of its sweep above ``N`` are left out); ``None``: every ``N``
        of the preset.
    seeds, workers, executor, progress
        As in :func:`tune`; ``progress(done, total)`` counts over all sizes and ``m``.
    micro_batches : int or sequence of int, default 1
        ``m`` of the SPARe sweep, or several: one result per ``(N, m)``.  Replication
        and checkpointing do not depend on ``m``: they run once per ``N`` (at the
        first ``m``) and every result of that ``N`` carries them.
    **overrides
        :class:`SimulationParameters` fields to change.

    Returns
    -------
    list of TuneResult
        One per ``N`` and ``m``: ``N`` in the preset's order, ``m`` in the order given
        within each ``N``.

    Raises
    ------
    ParameterTypeError, ParameterError
        Unknown preset, or a bad argument (an ``N`` below every ``r`` of the sweep).
    """
    from ..planning.plan import check_micro_batches

    preset = get_preset(name)
    check.callback("progress", progress)
    sizes = preset.groups if groups is None else (groups,)
    all_params = [preset_parameters(name, n, **overrides) for n in sizes]
    several = not isinstance(micro_batches, (int, np.integer)) or isinstance(micro_batches, bool)
    ms = check.integers("micro_batches", micro_batches if several else [micro_batches], minimum=1)
    ms = tuple(check_micro_batches(m, max(sizes)) for m in ms)
    jobs = [(params, m) for params in all_params for m in ms]
    results = []
    for index, (params, m) in enumerate(jobs):
        def relay(done, total, index=index):
            if progress is not None:
                progress(index * total + done, total * len(jobs))

        first = m == ms[0]
        reps = tuple(r for r in preset.rep_redundancies if r <= params.groups)
        spares = tuple(r for r in preset.spare_redundancies if r <= params.groups)
        if not spares:
            raise ParameterError(f"N = {params.groups} is below every SPARe redundancy of preset {name!r} "
                                 f"({', '.join(map(str, preset.spare_redundancies))})")
        result = tune(params, seeds=seeds, rep_redundancies=reps, spare_redundancies=spares,
                      period_factors=preset.period_factors, micro_batches=m, workers=workers, executor=executor,
                      progress=relay) if first else \
            _tune(params, check.count("seeds", seeds, maximum=check.MAX_RUNS), (), spares,
                  preset.period_factors, False, m, workers, executor, relay, 2.0)
        if not first:  # the m-free strategies of this N, from its first m
            base = results[-1]
            result.strategies = dict(base.strategies, spare=result.strategies["spare"])
            result.gain = _gain(result.strategies)
        results.append(result)
    return results


def _gain(strategies):
    """``1 - spare / rep`` of the best time-to-train ratios, NaN without both."""
    if "rep" in strategies and "spare" in strategies:
        rep_best = strategies["rep"]["best_ttt_ratio"]
        if math.isfinite(rep_best):
            return 1.0 - strategies["spare"]["best_ttt_ratio"] / rep_best
    return math.nan


def plot_tune(results, path, *, force=False, title=None):
    """Figure of the best ``TTT/T0`` against ``r`` for replication and SPARe (one panel per ``N``).

    Parameters
    ----------
    results : list of TuneResult
    path : str or os.PathLike
        PNG file, written atomically.
    force : bool
        Overwrite an existing file.
    title : str or None

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    ParameterTypeError
        ``results`` holds something other than :class:`TuneResult`.
    ParameterError
        ``results`` is empty.
    SpareError
        matplotlib is not installed (``pip install 'spare-opt[plot]'``).
    OutputExistsError
        ``path`` exists and ``force`` is false.
    """
    results = check.sequence("results", results)
    for result in results:
        check.instance("results: each item", result, TuneResult)
    from .._core.plotting import _figure, _save

    panels = {}  # one panel per N; several m of one N share it
    for result in results:
        panels.setdefault(result.groups, []).append(result)
    micro = any(result.micro_batches > 1 for result in results)
    figure = _figure(4.2 * len(panels), 3.6)
    axes = figure.subplots(1, len(panels), squeeze=False)
    blues = ("tab:blue", "tab:cyan", "tab:purple", "tab:green", "tab:olive", "tab:brown")
    for ax, (groups, same_n) in zip(axes[0], panels.items()):
        lines = [("rep", same_n[0], "tab:red", "Rep+CKPT")]
        for index, result in enumerate(same_n):
            label = f"SPARe+CKPT m={result.micro_batches}" if micro else "SPARe+CKPT"
            lines.append(("spare", result, blues[index % len(blues)], label))
        tops = []
        for strategy, result, colour, label in lines:
            entry = result.strategies.get(strategy)
            if not entry:
                continue
            rs = [row["r"] for row in entry["curve"]]
            ys = np.array([row["ttt_ratio"] for row in entry["curve"]])
            lo = np.array([row["ci95"][0] for row in entry["curve"]])
            hi = np.array([row["ci95"][1] for row in entry["curve"]])
            ax.errorbar(rs, ys, yerr=[ys - lo, hi - ys], marker="o", ms=3, capsize=2, color=colour, label=label)
            ax.scatter([entry["best_r"]], [entry["best_ttt_ratio"]], s=80, facecolors="none", edgecolors=colour)
            tops += [row["ttt_ratio"] for row in entry["curve"] if math.isfinite(row["ttt_ratio"])]
        for strategy in ("ckpt",):  # in the scale as before (checkpointing alone has one point)
            entry = same_n[0].strategies.get(strategy)
            if entry:
                tops += [row["ttt_ratio"] for row in entry.get("curve", []) if math.isfinite(row["ttt_ratio"])]
        ax.set_title(f"N = {groups}")
        ax.set_xlabel("redundancy r")
        ax.set_ylabel("TTT / T0 (best T_c)")
        ax.set_ylim(1.0, min(max(tops, default=10.0) * 1.05, 3.0 * max(1.0, min(tops, default=1.0))))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        figure.suptitle(title, fontsize=9)
    return _save(figure, path, force)

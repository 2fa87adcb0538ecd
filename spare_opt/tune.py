"""Choose the redundancy ``r`` and the checkpoint period ``T_c``: closed forms and simulation search.

* :func:`closed_form` - the paper's ``r* = floor(log2 N + 0.833)`` and the Young/Daly
  period ``T_c* = T_s + sqrt(T_s^2 + 2 T_s (T_f + T_r))`` (:mod:`spare_opt.theory`);
* :func:`tune` - a simulation search (:mod:`spare_opt.simulate`) over ``r`` and ``T_c``
  for replication and SPARe (and the checkpoint-only baseline) that minimises the mean
  time-to-train over seeds, with 95% confidence intervals; the result is laid out like
  the paper's table (Lee et al., ICML 2026, Sec. 6).

Runs are spread over a process pool; every run is fixed by its seed, so the result does
not depend on the number of workers.
"""

import math
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from . import theory
from ._stats import finite_or_none
from .errors import ParameterError
from .simulate import (
    SimulationParameters,
    _check_event_budget,
    _check_strategy,
    _TrajectoryPool,
    _run_pool,
    default_layout,
    get_preset,
    preset_parameters,
    summarise,
)

__all__ = [
    "PAPER_TABLE",
    "closed_form_period",
    "closed_form",
    "mean_failures_to_wipeout",
    "TuneResult",
    "tune",
    "tune_preset",
    "plot_tune",
]

#: The paper's time-to-train table (Lee et al., ICML 2026, Sec. 6; ``docs/reproduction.md``):
#: best TTT/T0, availability (fractions) and best r per N, Rep+CKPT (best at r = 3) and SPARe+CKPT.
PAPER_TABLE = {
    200: {"rep": 6.07, "rep_r": 3, "rep_availability": 0.6174, "spare": 2.92, "spare_r": 9,
          "spare_availability": 0.8700, "gain": 0.519},
    600: {"rep": 4.27, "rep_r": 3, "rep_availability": 0.7989, "spare": 2.49, "spare_r": 8,
          "spare_availability": 0.9390, "gain": 0.417},
    1000: {"rep": 3.88, "rep_r": 3, "rep_availability": 0.8441, "spare": 2.34, "spare_r": 9,
           "spare_availability": 0.9654, "gain": 0.396},
}

#: Seed of the failure orders used to estimate ``T_f`` for the period grid (kept apart
#: from the seeds of the runs).
_GRID_SEED = 1_000_003


def closed_form_period(params, mean_failures):
    """Young/Daly checkpoint period for a strategy that survives ``mean_failures`` failures.

    ``T_f = mean_failures * m`` (``m`` the system MTBF) is the mean time between
    unmasked failures; ``T_c* = T_s + sqrt(T_s^2 + 2 T_s (T_f + T_r))``
    (:func:`spare_opt.theory.checkpoint_period`).

    Parameters
    ----------
    params : SimulationParameters
    mean_failures : float
        Mean number of failures up to and including the wipe-out (1 for
        checkpointing alone, ``mu + 1`` for SPARe).

    Returns
    -------
    float
        ``T_c*`` in seconds.

    Raises
    ------
    ParameterError
        ``T_f = mean_failures * m`` is not a finite number ``> 0``, or ``T_c*`` overflows
        (:func:`spare_opt.theory.checkpoint_period`).

    References
    ----------
    Young (1974); Daly (2006); Lee et al., ICML 2026, Sec. 5.
    """
    return theory.checkpoint_period(params.save_seconds, params.restart_seconds,
                                    float(mean_failures) * params.mtbf_seconds)


def mean_failures_to_wipeout(params, strategy, redundancy, layout=None, samples=64, seed=_GRID_SEED):
    """Monte-Carlo mean of the 1-based failure index that wipes a strategy out.

    Parameters
    ----------
    params : SimulationParameters
    strategy : {"ckpt", "rep", "spare"}
    redundancy : int
    layout : Layout or None
        SPARe layout (default: :func:`spare_opt.simulate.default_layout`).
    samples : int
        Random failure orders.
    seed : int
        Seed of the random failure orders (``numpy.random.SeedSequence([seed, 1])``).

    Returns
    -------
    float
        Mean 1-based index, in failures, of the failure that causes the wipe-out
        (1.0 for ``"ckpt"``: every failure is a global restart).

    Raises
    ------
    ParameterError
        Unknown strategy, ``r`` out of range, ``samples`` not a positive integer.
    """
    if not isinstance(params, SimulationParameters):
        raise ParameterError(f"params must be SimulationParameters, got {type(params).__name__}")
    redundancy = _check_strategy(strategy, redundancy, params.groups)
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ParameterError(f"samples must be a positive integer, got {samples!r}")
    if strategy == "spare" and layout is None:
        layout = default_layout(params.groups, redundancy)
    pool = _TrajectoryPool(strategy, params.groups, redundancy, seed, layout)
    if strategy != "ckpt":
        pool.extend(samples)
    return pool.mean_failures_to_wipeout()


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
    r = theory.r_star(params.groups)
    if r < 2:
        return {"r_star": r, "mu": 0.0, "period_seconds": closed_form_period(params, 1.0),
                "availability": None, "ttt_ratio": None}
    mu = theory.mu(params.groups, r)
    t_f = (mu + 1.0) * params.mtbf_seconds
    return {
        "r_star": r,
        "mu": mu,
        "period_seconds": theory.checkpoint_period(params.save_seconds, params.restart_seconds, t_f),
        "availability": theory.availability(t_f, params.save_seconds, params.restart_seconds),
        "ttt_ratio": theory.normalised_ttt(params.groups, r, params.mtbf_seconds, params.save_seconds,
                                           params.restart_seconds),
    }


@dataclass
class TuneResult:
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
        ``best_ttt_ci95``, ``best_r``, ``best_period_seconds``, ``availability`` (mean at
        the best configuration), ``mean_stack_number``, ``restarts``, ``unfinished`` and
        ``curve``: per ``r`` the best ``T_c``'s ``ttt_ratio`` (mean), ``ci95``,
        ``availability`` and ``period_seconds``, plus ``periods``: every ``T_c`` tried.
    gain : float
        ``1 - spare.best_ttt_ratio / rep.best_ttt_ratio``.
    closed_form : dict
        :func:`closed_form`.
    """

    groups: int
    params: SimulationParameters
    seeds: int
    strategies: dict
    gain: float
    closed_form: dict = field(default_factory=dict)

    def to_dict(self):
        """dict: JSON-ready; the keys ``rep``, ``spare``, ``ckpt`` and ``gain`` at the top."""
        out = {"groups": self.groups, "seeds": self.seeds}
        out.update(self.strategies)
        out["gain"] = self.gain
        out["closed_form"] = self.closed_form
        out["parameters"] = self.params.to_dict()
        return finite_or_none(out)


def _check_redundancies(name, values, groups, minimum):
    try:
        values = tuple(dict.fromkeys(values))  # a repeated r would only repeat its curve point
    except TypeError:
        raise ParameterError(f"{name} must be a sequence of integers, got {values!r}") from None
    if not values:
        raise ParameterError(f"{name} is empty")
    for r in values:
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < minimum or r > groups:
            raise ParameterError(f"{name}: r must be an integer in [{minimum}, N={groups}], got {r!r}")
    return tuple(int(r) for r in values)


def _task(args):
    """One process-pool task: every checkpoint period of one (strategy, r, seed)."""
    params, strategy, redundancy, seed, periods, stacks, offsets = args
    layout = None
    if strategy == "spare":
        from .layout import Layout

        layout = Layout(stacks, method="sidon", offsets=offsets)
    pool = _TrajectoryPool(strategy, params.groups, redundancy, seed, layout)
    return [_run_pool(params, strategy, redundancy, period, seed, pool) for period in periods]


def tune(params, seeds=10, rep_redundancies=(2, 3, 4, 5, 6), spare_redundancies=tuple(range(2, 15)),
         period_factors=(0.5, 0.7, 1.0, 1.4, 2.0), include_ckpt=True, workers=None, progress=None,
         layout_time_limit=2.0):
    """Search ``r`` and ``T_c`` by simulation for replication and SPARe; return the best of each.

    For each strategy and ``r``, the checkpoint periods tried are ``period_factors``
    times the Young/Daly ``T_c*`` with ``T_f`` = (mean failures to wipe-out, estimated
    on 64 random failure orders) ``* m``.  Every configuration runs ``seeds`` seeds
    (``0 .. seeds-1``, the same seeds for every configuration: common random
    numbers); the best configuration minimises the mean ``TTT/T0``.

    Parameters
    ----------
    params : SimulationParameters
    seeds : int
        Runs per configuration (>= 1; >= 2 for confidence intervals).
    rep_redundancies, spare_redundancies : sequence of int
        The ``r`` values swept (``r >= 1`` for replication, ``r >= 2`` for SPARe).
    period_factors : sequence of float
        Multiples of ``T_c*`` tried.
    include_ckpt : bool
        Also run checkpointing alone (at its ``T_c*`` only).
    workers : int or None
        Processes (``None``: ``os.cpu_count()``; ``1``: run in this process).
    progress : callable or None
        Called as ``progress(done, total)`` after each task (one task = all periods of
        one strategy, ``r`` and seed).
    layout_time_limit : float
        Seconds for each Sidon layout search.

    Returns
    -------
    TuneResult

    Raises
    ------
    ParameterError
        Bad seeds, redundancies, factors or workers.
    """
    if not isinstance(params, SimulationParameters):
        raise ParameterError(f"params must be SimulationParameters, got {type(params).__name__}")
    if isinstance(seeds, bool) or not isinstance(seeds, (int, np.integer)) or seeds < 1:
        raise ParameterError(f"seeds must be a positive integer, got {seeds!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, (int, np.integer))
                                or workers < 1):
        raise ParameterError(f"workers must be a positive integer, got {workers!r}")
    n = params.groups
    reps = _check_redundancies("rep redundancies", rep_redundancies, n, 1)
    spares = _check_redundancies("spare redundancies", spare_redundancies, n, 2)
    try:
        factors = tuple(period_factors)
    except TypeError:
        raise ParameterError(f"period factors must be a sequence of numbers, got {period_factors!r}") from None
    if not factors or any(isinstance(f, bool) or not isinstance(f, (int, float, np.integer, np.floating))
                          or not math.isfinite(f) or f <= 0 for f in factors):
        raise ParameterError(f"period factors must be positive finite numbers, got {period_factors!r}")
    factors = tuple(float(f) for f in factors)
    if not isinstance(include_ckpt, (bool, np.bool_)):
        raise ParameterError(f"include_ckpt must be a bool, got {include_ckpt!r}")
    _check_event_budget(params)

    # ---------------------------------------------------------------- the task list
    configs = []  # (strategy, r, periods, stacks, offsets)
    if include_ckpt:
        configs.append(("ckpt", 1, (closed_form_period(params, 1.0),), None, None))
    for r in reps:
        t_c = closed_form_period(params, mean_failures_to_wipeout(params, "rep", r))
        configs.append(("rep", r, tuple(t_c * f for f in factors), None, None))
    for r in spares:
        layout = default_layout(n, r, time_limit=layout_time_limit)
        t_c = closed_form_period(params, mean_failures_to_wipeout(params, "spare", r, layout))
        configs.append(("spare", r, tuple(t_c * f for f in factors), np.asarray(layout.stacks),
                        layout.offsets))
    tasks = [(params, strategy, r, seed, periods, stacks, offsets)
             for strategy, r, periods, stacks, offsets in configs for seed in range(seeds)]
    results = _run_tasks(tasks, workers, progress)

    # ---------------------------------------------------------------- summaries
    strategies = {}
    position = 0
    for strategy, r, periods, _, _ in configs:
        runs = results[position:position + seeds]
        position += seeds
        entry = strategies.setdefault(strategy, {"curve": []})
        per_period = []
        for j, period in enumerate(periods):
            summary = summarise([run[j] for run in runs])
            per_period.append({
                "period_seconds": period,
                "ttt_ratio": summary["ttt_ratio"]["mean"],
                "ci95": summary["ttt_ratio"]["ci95"],
                "availability": summary["availability"]["mean"],
                "mean_stack_number": summary["mean_stack_number"]["mean"],
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
            best_r=best["r"],
            best_period_seconds=best["period_seconds"],
            availability=best["availability"],
            mean_stack_number=best["mean_stack_number"],
            restarts=best["restarts"],
            unfinished=best["unfinished"],
        )
    gain = math.nan
    if "rep" in strategies and "spare" in strategies:
        rep_best = strategies["rep"]["best_ttt_ratio"]
        gain = 1.0 - strategies["spare"]["best_ttt_ratio"] / rep_best if math.isfinite(rep_best) else math.nan
    return TuneResult(groups=n, params=params, seeds=int(seeds), strategies=strategies, gain=gain,
                      closed_form=closed_form(params))


def _run_tasks(tasks, workers, progress):
    total = len(tasks)
    if workers == 1 or total <= 1:
        out = []
        for i, task in enumerate(tasks):
            out.append(_task(task))
            if progress is not None:
                progress(i + 1, total)
        return out
    import os

    # No more processes than tasks: idle workers would only cost their start-up.
    workers = min(workers or os.cpu_count() or 1, total)
    out = [None] * total
    with ProcessPoolExecutor(max_workers=workers) as pool:
        # submit in order, collect in order: the result never depends on the workers
        futures = [pool.submit(_task, task) for task in tasks]
        for i, future in enumerate(futures):
            out[i] = future.result()
            if progress is not None:
                progress(i + 1, total)
    return out


def tune_preset(name, groups=None, seeds=10, workers=None, progress=None, **overrides):
    """Run :func:`tune` for a preset: one cluster size or all of the preset's.

    Parameters
    ----------
    name : str
        Preset name (:data:`spare_opt.simulate.PRESETS`).
    groups : int or None
        One ``N`` of the preset; ``None``: every ``N`` of the preset.
    seeds, workers, progress
        As in :func:`tune`; ``progress(done, total)`` counts over all sizes.
    **overrides
        :class:`SimulationParameters` fields to change.

    Returns
    -------
    list of TuneResult
        One per ``N``, in the preset's order.

    Raises
    ------
    ParameterError
        Unknown preset, ``N`` not in the preset, or a bad argument.
    """
    preset = get_preset(name)
    sizes = preset.groups if groups is None else (groups,)
    all_params = [preset_parameters(name, n, **overrides) for n in sizes]
    results = []
    for index, params in enumerate(all_params):
        def relay(done, total, index=index):
            if progress is not None:
                progress(index * total + done, total * len(all_params))

        results.append(tune(params, seeds=seeds, rep_redundancies=preset.rep_redundancies,
                            spare_redundancies=preset.spare_redundancies,
                            period_factors=preset.period_factors, workers=workers, progress=relay))
    return results


def plot_tune(results, path, force=False, title=None):
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
    ParameterError
        ``results`` is empty or holds something other than :class:`TuneResult`.
    SpareError
        matplotlib is not installed (``pip install 'spare-opt[plot]'``).
    OutputExistsError
        ``path`` exists and ``force`` is false.
    """
    results = list(results)
    if not results or not all(isinstance(result, TuneResult) for result in results):
        raise ParameterError("plot_tune needs a non-empty list of TuneResult")
    from ._plotting import _figure, _save

    figure = _figure(4.2 * len(results), 3.6)
    axes = figure.subplots(1, len(results), squeeze=False)
    for ax, result in zip(axes[0], results):
        for strategy, colour, label in (("rep", "tab:red", "Rep+CKPT"), ("spare", "tab:blue", "SPARe+CKPT")):
            entry = result.strategies.get(strategy)
            if not entry:
                continue
            rs = [row["r"] for row in entry["curve"]]
            ys = np.array([row["ttt_ratio"] for row in entry["curve"]])
            lo = np.array([row["ci95"][0] for row in entry["curve"]])
            hi = np.array([row["ci95"][1] for row in entry["curve"]])
            ax.errorbar(rs, ys, yerr=[ys - lo, hi - ys], marker="o", ms=3, capsize=2, color=colour, label=label)
            ax.scatter([entry["best_r"]], [entry["best_ttt_ratio"]], s=80, facecolors="none", edgecolors=colour)
        ax.set_title(f"N = {result.groups}")
        ax.set_xlabel("redundancy r")
        ax.set_ylabel("TTT / T0 (best T_c)")
        tops = [row["ttt_ratio"] for entry in result.strategies.values() for row in entry.get("curve", [])
                if math.isfinite(row["ttt_ratio"])]
        ax.set_ylim(1.0, min(max(tops, default=10.0) * 1.05, 3.0 * max(1.0, min(tops, default=1.0))))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        figure.suptitle(title, fontsize=9)
    return _save(figure, path, force)

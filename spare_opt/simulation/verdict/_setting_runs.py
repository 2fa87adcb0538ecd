"""The verdict's runs: every setting of the grid on the same failures, each at its tuned checkpoint periods.

:func:`run_settings` runs a :class:`~._grid.SettingsGrid`: with a trace, one failure
walk per setting and seed (the outcomes of the failures), the Young/Daly period
measured on it, then the runs at each period; with a failure model or a preset's
failures, the runs draw the failures themselves.  Each setting's row is its figures
at its best period (:func:`_setting_row`).  The task functions (``_walk``,
``_trace_runs_task``, ``_model_runs_task``) are module-level so that worker processes
and a Dask cluster can run them.
"""

import math
from dataclasses import dataclass

import numpy as np

from ..._core.parallel import run_tasks
from ..._core.stats import mean_ci95
from ...guarantees import theory
from .._runs import FailurePool, run_events, run_synthetic
from ._labels import _label


@dataclass(frozen=True)
class SettingRuns:
    """What the runs of a grid gave.

    Attributes
    ----------
    periods : tuple of tuple of float
        The checkpoint periods tried, per setting (in the grid's order).
    settings : list of dict
        Per setting, its figures at its best period (:attr:`CompareResult.settings`,
        before the pricing adds ``exact`` and ``price``).
    trace_info : dict or None
        With a trace: the walk's counts of each setting's first seed and its mean wipe-outs.
    """

    periods: tuple
    settings: list
    trace_info: dict | None


def run_settings(inputs, grid, *, workers=1, executor=None, progress=None, on_setting=None):
    """Run every setting of ``grid`` over ``inputs.seeds`` seeds and every checkpoint period.

    Parameters
    ----------
    inputs : CompareInputs
    grid : SettingsGrid
    workers, executor, progress, on_setting
        As :func:`~spare_opt.compare` (they change when results come, never what they are).

    Returns
    -------
    SettingRuns
    """
    walk_weights, run_weights = _weights(inputs, grid)
    grand_total = sum(walk_weights) + sum(run_weights)

    def relay(offset):
        if progress is None:
            return None
        return lambda done, total: progress(offset + done, grand_total)

    collector = _Collector(grid.configs, inputs.seeds, inputs.period_factors, on_setting)
    if inputs.trace is not None:
        periods, tasks, trace_info = _trace_run_tasks(inputs, grid, walk_weights, workers, executor, relay(0))
        collector.periods = periods
        results = _heavy_first(_trace_runs_task, tasks, run_weights, workers=workers, executor=executor,
                               progress=relay(sum(walk_weights)), on_result=collector.collect)
    else:
        periods, tasks = _model_run_tasks(inputs, grid)
        trace_info = None
        collector.periods = periods
        results = _heavy_first(_model_runs_task, tasks, run_weights, workers=workers, executor=executor,
                               progress=relay(0), on_result=collector.collect)
    seeds = inputs.seeds
    settings = [_setting_row(config, results[c * seeds:(c + 1) * seeds], periods[c], inputs.period_factors)
                for c, config in enumerate(grid.configs)]
    return SettingRuns(periods=tuple(periods), settings=settings, trace_info=trace_info)


def _weights(inputs, grid):
    """Progress in work units: a task weighs what its setting costs (:func:`task_weight`), so the estimate
    of the time left holds while cheap and dear settings finish in any order."""
    configs, seeds, factors = grid.configs, inputs.seeds, inputs.period_factors
    if inputs.trace is not None:  # the walk finds the outcomes, the runs task runs the kernel once per period
        walk_weights = [task_weight(st, r, m, 0) for st, r, m, _ in configs for _ in range(seeds)]
        run_weights = [max(1, task_weight(st, r, m, len(factors)) - task_weight(st, r, m, 0))
                       for st, r, m, _ in configs for _ in range(seeds)]
    else:
        walk_weights = []
        run_weights = [task_weight(st, r, m, len(factors)) for st, r, m, _ in configs for _ in range(seeds)]
    return walk_weights, run_weights


class _Collector:
    """Keeps the results as they come and calls ``on_setting`` with a setting's row once its every seed is in."""

    def __init__(self, configs, seeds, factors, on_setting):
        self.configs, self.seeds, self.factors, self.on_setting = configs, seeds, factors, on_setting
        self.results = [None] * (len(configs) * seeds)
        self.finished = [0] * len(configs)
        self.periods = None  # set before the runs start

    def collect(self, index, result):
        self.results[index] = result
        if self.on_setting is None:
            return
        c = index // self.seeds
        self.finished[c] += 1
        if self.finished[c] == self.seeds:
            mine = self.results[c * self.seeds:(c + 1) * self.seeds]
            self.on_setting(_setting_row(self.configs[c], mine, self.periods[c], self.factors))


def _trace_run_tasks(inputs, grid, walk_weights, workers, executor, progress):
    """Walk every setting and seed over the replayed trace; the periods (Young/Daly on the measured wipe-outs),
    the run tasks and the walks' counts."""
    params, seeds, semantics = inputs.params, inputs.seeds, inputs.semantics
    replayed = inputs.replayed
    walk_tasks = [(params, s, r, m, layout, replayed, seed, semantics)
                  for s, r, m, layout in grid.configs for seed in range(seeds)]
    walks = run_tasks(_walk, walk_tasks, workers=workers, executor=executor, progress=progress,
                      weights=walk_weights)
    span_seconds = replayed.observed_days * 86400.0 * params.trace_time_scale
    periods, tasks, trace_info = [], [], {}
    for c, (strategy, r, m, _) in enumerate(grid.configs):
        mine = walks[c * seeds:(c + 1) * seeds]
        wipe_outs = float(np.mean([wipes for _, wipes, _ in mine]))
        unmasked = span_seconds / (1.0 + wipe_outs)
        centre = theory.checkpoint_period(params.save_seconds, params.restart_seconds, unmasked)
        periods.append(tuple(centre * f for f in inputs.period_factors))
        trace_info[_label(strategy, r, m)] = dict(mine[0][2], mean_wipe_outs=wipe_outs)
        tasks += [(params, strategy, r, m, periods[-1], seed, mine[seed][0], semantics,
                   inputs.micro_batch_overhead_seconds) for seed in range(seeds)]
    return periods, tasks, trace_info


def _model_run_tasks(inputs, grid):
    """The periods (the closed-form T_c* of each setting) and the run tasks without a trace."""
    from ..time_to_train import _period

    params, fault_model, n = inputs.params, inputs.fault_model, inputs.params.groups
    periods, tasks, centres = [], [], {}
    for strategy, r, m, layout in grid.configs:
        if strategy == "redistribute":  # a restart after K failures (every group without the rule)
            mtbf = fault_model.node_mtbf_seconds / n
            centres[strategy, r] = theory.checkpoint_period(params.save_seconds, params.restart_seconds,
                                                            (layout or n) * mtbf)
        elif (strategy, r) not in centres:  # T_c* of simulate(): the wipe-out rate does not depend on m
            if strategy == "elastic":  # every group lost (N failures) under the paper's semantics
                mtbf = fault_model.system_mtbf_seconds * fault_model.cluster_nodes / n
                centres[strategy, r] = theory.checkpoint_period(params.save_seconds, params.restart_seconds,
                                                                n * mtbf)
            else:
                centres[strategy, r] = _period(params, strategy, r, layout, None, fault_model, m, None)
        periods.append(tuple(centres[strategy, r] * f for f in inputs.period_factors))
        tasks += [(params, strategy, r, m, periods[-1], seed, layout, inputs.semantics, fault_model,
                   inputs.micro_batch_overhead_seconds) for seed in range(inputs.seeds)]
    return periods, tasks


# ----------------------------------------------------------------------------- the tasks
def _walk(params, strategy, redundancy, micro_batches, layout, trace, seed, semantics):
    """Failure (and rejoin) events of one setting and placement, how many wipe out, and the walk's counts."""
    from ..events import trace_events

    # Rejoins go through ReorderController.recover (incremental, as cheap as a failure).
    events = trace_events(trace, params.groups, strategy, redundancy, semantics=semantics, layout=layout,
                          micro_batches=micro_batches, heal_seconds=params.heal_seconds,
                          time_scale=params.trace_time_scale, placement_seed=seed)
    return events.kernel_rows(), int(np.count_nonzero(events.wipe_outs)), dict(events.counts)


def _run(params, strategy, redundancy, micro_batches, period, seed, events, semantics, overhead=0.0):
    return run_events(params, strategy, redundancy, period, seed, events, micro_batches=micro_batches,
                      semantics=semantics, micro_batch_overhead_seconds=overhead)


def _trace_runs_task(params, strategy, redundancy, micro_batches, periods, seed, events, semantics, overhead=0.0):
    return [_digest(_run(params, strategy, redundancy, micro_batches, period, seed, events, semantics, overhead),
                    events if strategy == "elastic" else None)
            for period in periods]


def _model_runs_task(params, strategy, redundancy, micro_batches, periods, seed, layout, semantics, fault_model,
                     overhead=0.0):
    if fault_model is None:  # the preset's Weibull failures, the paper's semantics
        pool = FailurePool(strategy, params.groups, redundancy, seed, layout,
                           micro_batches if strategy == "spare" else 1)
        return [_digest(run_synthetic(params, strategy, redundancy, period, seed, pool,
                                      micro_batch_overhead_seconds=overhead)) for period in periods]
    from .. import _kernels as K
    from ..events import _model_events_until, _model_source

    # One source of events per setting and seed, shared by every period: the faults it draws
    # depend on the seed only, and their outcomes (wipe-outs, stack numbers, step costs) on the
    # failed set only, so a run cut at any horizon sees the events of a fresh source (the rows
    # up to the horizon).
    source = _model_source(fault_model, params.groups, strategy, redundancy, semantics, layout, micro_batches,
                           params.heal_seconds, seed)
    drawn = []

    def rows(horizon):
        table = _model_events_until(source, horizon).kernel_rows()
        drawn[:] = [table[table[:, K.EV_TIME] <= horizon]]
        return drawn[0], False

    digests = []
    for period in periods:
        run = run_events(params, strategy, redundancy, period, seed, rows, micro_batches=micro_batches,
                         semantics=semantics, micro_batch_overhead_seconds=overhead)
        digests.append(_digest(run, drawn[0] if strategy == "elastic" else None))
    return digests


def _digest(run, elastic_rows=None):
    """The figures of one run that the verdict keeps (small to send between processes).

    With ``elastic_rows`` (the events of an elastic run, cost ``N / (N - k)``) also the
    batch the run trained with: its mean fraction and the share of time it was short.
    """
    t0 = run.fault_free_seconds
    digest = {
        "ttt_ratio": run.ttt_ratio,
        "availability": run.availability,
        "restarts": run.restarts,
        "mean_step_cost": run.mean_step_cost,
        "finished": run.finished,
        # the parts of the wall time, over T0: they add up to TTT/T0 (the kernel's sums)
        "ttt_parts": {"steps": run.useful_seconds / t0, "patch": run.overhead_seconds / t0,
                      "lost": run.rework_seconds / t0, "restart": run.restart_seconds / t0,
                      "saves": run.checkpoint_seconds / t0},
    }
    if elastic_rows is not None:
        fraction, short = batch_figures(elastic_rows, run.wall_seconds)
        # an elastic step takes a fault-free step's time; the short batches cost more steps instead
        digest.update(mean_batch_fraction=fraction, short_batch_share=short, mean_step_cost=1.0,
                      steps_per_sample=1.0 / fraction if fraction > 0 else math.inf)
    return digest


def batch_figures(rows, wall_seconds):
    """The batch of an elastic run: time-weighted mean fraction of the global batch, share of time short.

    Parameters
    ----------
    rows : numpy.ndarray of float64, shape (F, N_EV)
        The run's events as the kernel reads them before :func:`run_events` converts
        them (:meth:`~spare_opt.simulation.events.FailureEvents.kernel_rows` of an
        ``"elastic"`` walk: the cost after each event is ``N / (N - k)``).
    wall_seconds : float
        The run's wall time: the figures cover ``[0, wall_seconds]``.

    Returns
    -------
    tuple of float
        ``(mean_batch_fraction, short_batch_share)``: the mean over time of ``(N -
        k) / N`` and the fraction of time with ``k > 0``.  A step takes the same time
        whatever its batch, so over the steps trained these are the mean batch and the
        share of steps with a short batch (restarts, rare for elastic, count as full).
    """
    from .. import _kernels as K

    if not wall_seconds > 0:
        return 1.0, 0.0
    times = np.clip(rows[:, K.EV_TIME], 0.0, wall_seconds)
    edges = np.concatenate([[0.0], times, [wall_seconds]])
    fraction = np.concatenate([[1.0], 1.0 / rows[:, K.EV_COST]])
    lengths = np.diff(edges)
    return (float(np.sum(lengths * fraction) / wall_seconds),
            float(np.sum(lengths[fraction < 1.0]) / wall_seconds))


def _heavy_first(function, tasks, weights, *, workers, executor, progress, on_result):
    """:func:`run_tasks` with the dearest tasks sent first (the workers then finish together);
    results, ``on_result`` indices and progress as if sent in order."""
    order = sorted(range(len(tasks)), key=lambda i: (-weights[i], i))
    out = run_tasks(function, [tasks[i] for i in order], workers=workers, executor=executor, progress=progress,
                    weights=[weights[i] for i in order],
                    on_result=None if on_result is None else lambda j, result: on_result(order[j], result))
    results = [None] * len(tasks)
    for j, i in enumerate(order):
        results[i] = out[j]
    return results


def _setting_row(config, runs, periods, factors):
    """The row of one setting: its figures at its best period (least mean TTT/T0), every period's mean."""
    strategy, r, m, _ = config
    per_period = [_summary([run[j] for run in runs]) for j in range(len(factors))]
    best = min(range(len(factors)), key=lambda j: (per_period[j]["ttt_ratio"], j))
    return dict(strategy=strategy, redundancy=int(r), micro_batches=int(m), **per_period[best],
                checkpoint_period_seconds=periods[best], periods=list(periods),
                ttt_ratio_by_period=[row["ttt_ratio"] for row in per_period])


def _summary(digests):
    """Mean and 95% interval of ``TTT/T0`` and the means of the other figures over seeds."""
    ratio, ci = mean_ci95([d["ttt_ratio"] for d in digests])
    summary = {
        "ttt_ratio": ratio,
        "ttt_ci": list(ci),
        "availability": float(np.mean([d["availability"] for d in digests])),
        "restarts": float(np.mean([d["restarts"] for d in digests])),
        "mean_step_cost": float(np.mean([d["mean_step_cost"] for d in digests])),
        "unfinished": int(sum(not d["finished"] for d in digests)),
    }
    summary["ttt_parts"] = {key: float(np.mean([d["ttt_parts"][key] for d in digests]))
                            for key in digests[0]["ttt_parts"]}
    if "mean_batch_fraction" in digests[0]:
        for key in ("mean_batch_fraction", "short_batch_share", "steps_per_sample"):
            summary[key] = float(np.mean([d[key] for d in digests]))
    return summary


def task_weight(strategy, redundancy, micro_batches, periods=1):
    """Work units of one task of :func:`compare` (one seed of a setting, every period), for progress.

    A relative cost, not a time: the runs of the simulation kernel (one per period)
    plus the outcomes of the failures, which cost most for SPARe with micro-batches
    (a split plan per failure and rejoin, growing with ``r m``).  Measured at
    ``N = 2,048`` (``benchmarks/bench_compare.py``, ``docs/benchmarks.md``).

    Parameters
    ----------
    strategy : {"ckpt", "rep", "spare"}
    redundancy, micro_batches : int
    periods : int, default 1
        Checkpoint periods the task runs (``0``: the outcomes only, a trace's walk).

    Returns
    -------
    int
        ``>= 1``.
    """
    outcomes = 1.0 if strategy != "spare" else 1.0 + WEIGHT_PER_SPLIT * redundancy * micro_batches
    return max(1, int(round(10 * (periods * WEIGHT_PER_RUN + outcomes))))


#: Relative cost of one kernel run (one period) against the outcomes of ckpt's failures.
WEIGHT_PER_RUN = 0.2


#: Relative cost of SPARe's outcomes per unit of ``r m`` (split plans).
WEIGHT_PER_SPLIT = 0.1

"""The operator's verdict: checkpointing alone, replication and SPARe on the same failures.

An operator asks: with my failure log and my restart cost, what do I gain from SPARe,
with which ``r`` and ``m``, compared with checkpointing alone and with replication?
:func:`compare` answers it in one call (``spare-opt compare``, issue 10):

* the failures are a fault trace (replayed cyclically, ``cycles`` times, so that every
  strategy meets the trace's failure rate for its whole run) or a preset's failure
  model;
* three strategies run on the same failures: checkpointing alone, replication with
  ``r`` in ``rep_redundancies``, SPARe over a grid of ``r`` and ``m`` (micro-batches
  per shard type);
* every setting gets its own tuned checkpoint period: the Young/Daly ``T_c*`` with
  ``T_f`` measured on the setting's own failure walk, times each of
  ``period_factors``; the best mean time-to-train over the seeds wins;
* the seeds place the traced nodes on random DP groups (``placement_seed = seed``) and
  drive the jitter; every setting runs the same seeds (common random numbers), so the
  95% interval of ``TTT/T0`` says how much the answer depends on where the faulty
  nodes sit.

The result, :class:`CompareResult`, has one row per strategy with its best setting
(``strategies``) and every setting tried (``settings``); :func:`plot_compare` draws it.
``docs/repair.md`` gives the verdict on the real InfiniteHBD trace.
"""

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from .._core import validation as check
from ..guarantees import theory
from .._core.parallel import run_tasks
from .._core.results import Result
from ._runs import FailurePool, check_params, default_layout, run_events, run_synthetic
from .._core.stats import finite_or_none, mean_ci95
from .._core.errors import ParameterError, TraceError
from ..planning.plan import check_micro_batches
from .parameters import SimulationParameters, fault_free_seconds, get_preset
from .events import SEMANTICS
from ..traces.trace import FaultTrace
from ..traces.json_format import parse_fault_events

__all__ = [
    "DEFAULT_COMPARE_FACTORS",
    "DEFAULT_COMPARE_MICRO_BATCHES",
    "DEFAULT_COMPARE_REP",
    "DEFAULT_COMPARE_SPARE",
    "DEFAULT_CYCLES",
    "MAX_CYCLES",
    "STRATEGY_LABELS",
    "CompareResult",
    "compare",
    "compare_parameters",
    "cyclic_trace",
    "plot_compare",
]

#: Replication degrees of the verdict.
DEFAULT_COMPARE_REP = (2, 3)
#: SPARe redundancies of the verdict's grid (9 = r* at N = 400, the traced cluster).
DEFAULT_COMPARE_SPARE = (2, 3, 5, 9)
#: Micro-batches per shard type of the verdict's grid (1: the paper's whole shards).
DEFAULT_COMPARE_MICRO_BATCHES = (1, 4, 16)
#: Checkpoint periods tried for every setting, as multiples of its Young/Daly ``T_c*``.
DEFAULT_COMPARE_FACTORS = (0.5, 0.7, 1.0, 1.4, 2.0)
#: Copies of the trace laid end to end; a run that needs longer is unfinished (``TTT/T0 > cycles``).
DEFAULT_CYCLES = 2
#: Most copies of the trace: beyond it a run is far past any useful TTT/T0 and the walks grow without bound.
MAX_CYCLES = 100
#: Names of the strategies in tables and figures.
STRATEGY_LABELS = {"ckpt": "CKPT only", "rep": "Rep+CKPT", "spare": "SPARe+CKPT"}


# ----------------------------------------------------------------------------- result
@dataclass(eq=False)
class CompareResult(Result):
    """The verdict of :func:`compare`.

    Attributes
    ----------
    params : SimulationParameters
        The run's parameters (``steps``, ``trace_time_scale``, ``max_wall_factor`` as run).
    source : str
        The trace's path, ``"failure model ..."`` for a fitted model, or ``"preset"``
        for the Weibull failures of the parameters.
    semantics : str
        ``"paper"`` or ``"repair"``.
    seeds : int
        Seeds per setting (placements of the traced nodes and jitter).
    cycles : int
        Copies of the trace laid end to end (with a trace); a run not finished within
        ``cycles * T0`` is unfinished.
    strategies : list of dict
        One row per strategy (``ckpt``, ``rep``, ``spare``, those that ran), its best
        setting: ``strategy``, ``redundancy``, ``micro_batches``, ``ttt_ratio`` (mean
        over seeds), ``ttt_ci`` (95% interval, ``[nan, nan]`` when it cannot be
        given), ``availability``, ``restarts``, ``mean_step_cost`` (means),
        ``checkpoint_period_seconds``, ``unfinished`` (runs past the wall-time cap).
    settings : list of dict
        Every ``(strategy, r, m)`` tried, with the same keys at its best period, plus
        ``periods`` (every ``T_c`` tried) and ``ttt_ratio_by_period``.
    trace_info : dict or None
        With a trace: what its replay used (the walk's counts for the first seed of
        each setting, keyed by setting label, and ``mean_wipe_outs``); ``None``
        without a trace.
    elapsed_seconds : float
        Wall-clock time (not compared by ``==``).
    """

    params: SimulationParameters
    source: str
    semantics: str
    seeds: int
    cycles: int
    strategies: list
    settings: list
    trace_info: dict | None = None
    elapsed_seconds: float = field(default=0.0, compare=False)

    def best(self, strategy):
        """dict: the row of ``strategy`` (``"ckpt"``, ``"rep"``, ``"spare"``) in :attr:`strategies`."""
        for row in self.strategies:
            if row["strategy"] == strategy:
                return row
        raise KeyError(strategy)

    def to_dict(self):
        """dict: JSON-ready: ``strategies``, ``settings``, the parameters and the run's context."""
        return finite_or_none({
            "source": self.source,
            "semantics": self.semantics,
            "seeds": self.seeds,
            "cycles": self.cycles,
            "time_scale": self.params.trace_time_scale if self.trace_info is not None else None,
            "fault_free_seconds": fault_free_seconds(self.params),
            "strategies": self.strategies,
            "settings": self.settings,
            "parameters": self.params.to_dict(),
            "elapsed_seconds": self.elapsed_seconds,
        })

    def format_text(self):
        """The verdict as a table, one row per strategy, and a one-line conclusion."""
        p = self.params
        if self.trace_info is not None:
            scale = p.trace_time_scale
            rate = "real rate" if scale == 1.0 else f"compressed {1 / scale:g}x" if scale < 1 else f"stretched {scale:g}x"
            failures = f"trace {self.source} ({rate}, replayed {self.cycles}x end to end)"
        elif self.source != "preset":
            failures = f"failures and repairs drawn from the {self.source}"
        else:
            failures = f"{p.failure_model} failures, system MTBF {p.system_mtbf_seconds / 60:g} min"
        lines = [
            f"Verdict: N = {p.groups}, {failures}, {self.semantics} semantics",
            f"T_r = {p.restart_seconds / 60:g} min, T_s = {p.save_seconds:g} s, step {p.layer_compute_seconds:g} s "
            f"+ all-reduce {p.allreduce_seconds:g} s, {p.steps:,} steps (T0 = {fault_free_seconds(p) / 86400:.2f} days); "
            f"{self.seeds} seeds (node placements), best checkpoint period per setting",
            "",
            f"{'strategy':<11} {'setting':<13} {'TTT/T0':>7} {'95% CI':>15} {'avail.':>7} {'restarts':>8} "
            f"{'step cost':>9} {'T_c':>8}",
        ]
        for row in self.strategies:
            lines.append(
                f"{STRATEGY_LABELS[row['strategy']]:<11} {_setting(row):<13} {_ratio(row['ttt_ratio'], p):>7} "
                f"{_interval(row['ttt_ci']):>15} {row['availability']:>7.2%} {row['restarts']:>8.1f} "
                f"{row['mean_step_cost']:>9.3f} {_duration(row['checkpoint_period_seconds']):>8}"
            )
        lines.append("")
        lines.append(self.conclusion())
        return "\n".join(lines)

    def conclusion(self):
        """str: one line naming the best strategy and its gain over the others."""
        finished = [row for row in self.strategies if math.isfinite(row["ttt_ratio"])]
        if not finished:
            return f"No strategy finished within {self.params.max_wall_factor:g} x T0."
        best = min(finished, key=lambda row: row["ttt_ratio"])
        parts = []
        for row in self.strategies:
            if row is best:
                continue
            if math.isfinite(row["ttt_ratio"]):
                parts.append(f"{1 - best['ttt_ratio'] / row['ttt_ratio']:.1%} less time than "
                             f"{STRATEGY_LABELS[row['strategy']]}")
            else:
                parts.append(f"{STRATEGY_LABELS[row['strategy']]} does not finish within "
                             f"{self.params.max_wall_factor:g} x T0")
        setting = _setting(best)
        return (f"Best: {STRATEGY_LABELS[best['strategy']]}" + (f" {setting}" if setting != "-" else "")
                + f", TTT/T0 {best['ttt_ratio']:.3f}" + (": " + "; ".join(parts) if parts else ""))


def _setting(row):
    if row["strategy"] == "ckpt":
        return "-"
    if row["strategy"] == "rep":
        return f"r = {row['redundancy']}"
    return f"r = {row['redundancy']}, m = {row['micro_batches']}"


def _ratio(value, params):
    """``TTT/T0``, or ``> cap`` for a run stopped at the wall-time cap."""
    if math.isfinite(value):
        return f"{value:.3f}"
    return f"> {params.max_wall_factor:g}"


def _interval(ci):
    low, high = ci
    if not (math.isfinite(low) and math.isfinite(high)):
        return "-"
    return f"[{low:.3f}, {high:.3f}]"


def _duration(seconds):
    if not math.isfinite(seconds):
        return "-"
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"


# ----------------------------------------------------------------------------- parameters
def cyclic_trace(trace, cycles):
    """``cycles`` copies of a trace laid end to end, each shifted by the trace's last event time.

    Copy ``c`` has every event time plus ``c * t_last`` (``t_last``: the last event's
    day, the trace's span from its time origin, day 0); node ids are kept, so a node
    maps to the same DP group in every copy.  Events keep their order (file order
    within a copy, copies in turn).

    Parameters
    ----------
    trace : FaultTrace
    cycles : int
        Number of copies, ``>= 1``.

    Returns
    -------
    FaultTrace
        Read back with :func:`spare_opt.traces.json_format.parse_fault_events`, so irregular events
        are flagged as in any trace (a fault still open at the end of a copy makes the
        next copy's start of that node irregular).

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a :class:`~spare_opt.traces.trace.FaultTrace` or ``cycles`` is not an
        integer.
    ParameterError
        ``cycles < 1``.
    TraceError
        The trace has no event after day 0 (it has no span to repeat).
    """
    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    cycles = check.count("cycles", cycles)
    if cycles == 1:
        return trace
    period = trace.span_days[1]
    if not period > 0:
        raise TraceError(f"{trace.source}: no event after day 0, nothing to repeat")
    order = np.argsort(trace.file_index, kind="stable")
    one = [{"node_id": trace.node_ids[trace.node[k]], "event_time": float(trace.times_days[k]),
            "event_type": "fault_start" if trace.is_start[k] else "fault_end",
            "fault_type": {"Class": trace.fault_class[k]}} for k in order.tolist()]
    events = [dict(event, event_time=event["event_time"] + c * period) for c in range(cycles) for event in one]
    doc = {"format": "spare-failure-trace", "version": 1, "nodes": trace.cluster_nodes,
           "metadata": {"cyclic": {"source": trace.source, "cycles": cycles, "period_days": period}},
           "events": events}
    return replace(parse_fault_events(doc, source=trace.source), format=trace.format)


def compare_parameters(preset="trace-400", groups=None, *, trace=None, restart_seconds=None, save_seconds=None,
                       step_seconds=None, time_scale=1.0, steps=None, **overrides):
    """The :class:`SimulationParameters` of a verdict: a preset's timings with the operator's own.

    Parameters
    ----------
    preset : str, default "trace-400"
        Preset whose timings are the defaults (:data:`spare_opt.simulation.parameters.PRESETS`).
    groups : int, optional
        ``N``; default: the trace's cluster size when its file says so, else the
        larger of the preset's first ``N`` and the number of nodes the trace names
        (400 for the InfiniteHBD trace, which names 231).  Any ``N >= 1``.
    trace : FaultTrace, optional
        The failures; sets the default ``steps``.
    restart_seconds, save_seconds : float, optional
        ``T_r`` and ``T_s``.
    step_seconds : float, optional
        Compute of one fault-free step (one stack layer), ``layer_compute_seconds``;
        the all-reduce is added (default: the paper's line in ``N``).
    time_scale : float, default 1.0
        Trace time multiplier (``trace_time_scale``): ``0.1`` replays the trace 10
        times faster (10 times the failure rate).
    steps : int, optional
        Training steps; default with a trace: the steps of one trace span at the
        fault-free step time (``T0`` = the trace's span, from day 0 to its last event,
        times ``time_scale``); without a trace, the preset's.
    **overrides
        Other :class:`SimulationParameters` fields.

    Returns
    -------
    SimulationParameters

    Raises
    ------
    ParameterTypeError, ParameterError
        Unknown preset, or a value of the wrong type or out of range.
    TraceError
        ``steps`` is not given and the trace has no event after day 0.
    """
    base = dict(get_preset(preset).base)
    if trace is not None:
        check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    if groups is None:
        groups = get_preset(preset).groups[0]
        if trace is not None:  # one node per group: every node of the trace has a group
            groups = trace.cluster_nodes if trace.cluster_nodes else max(groups, trace.n_nodes)
    for name, value in (("restart_seconds", restart_seconds), ("save_seconds", save_seconds),
                        ("layer_compute_seconds", step_seconds)):
        if value is not None:
            base[name] = value
    base["trace_time_scale"] = time_scale
    base.update(overrides)
    if steps is not None:
        base["steps"] = steps
    params = SimulationParameters(groups=groups, **base)
    if steps is None and trace is not None:
        span = trace.span_days[1]
        if not span > 0:
            raise TraceError(f"{trace.source}: no event after day 0: give the number of steps")
        step = params.layer_compute_seconds + params.allreduce_seconds
        params = replace(params, steps=max(1, round(span * 86400.0 * params.trace_time_scale / step)))
    return params


# ----------------------------------------------------------------------------- the runs
# The walk of a setting over the failures and one run on it.  These adapters are the
# only places that know how the simulation takes failures given up front.
def _walk(params, strategy, redundancy, micro_batches, layout, trace, seed, semantics):
    """Failure (and rejoin) events of one setting and placement, how many wipe out, and the walk's counts."""
    from .events import trace_events

    # Rejoins go through ReorderController.recover (incremental, as cheap as a failure).
    events = trace_events(trace, params.groups, strategy, redundancy, semantics=semantics, layout=layout,
                          micro_batches=micro_batches, heal_seconds=params.heal_seconds,
                          time_scale=params.trace_time_scale, placement_seed=seed)
    return events.kernel_rows(), int(np.count_nonzero(events.wipe_outs)), dict(events.counts)


def _run(params, strategy, redundancy, micro_batches, period, seed, events, semantics):
    return run_events(params, strategy, redundancy, period, seed, events, micro_batches=micro_batches,
                      semantics=semantics)


def _trace_runs_task(params, strategy, redundancy, micro_batches, periods, seed, events, semantics):
    return [_digest(_run(params, strategy, redundancy, micro_batches, period, seed, events, semantics))
            for period in periods]


def _model_runs_task(params, strategy, redundancy, micro_batches, periods, seed, layout, semantics, fault_model):
    if fault_model is None:  # the preset's Weibull failures, the paper's semantics
        pool = FailurePool(strategy, params.groups, redundancy, seed, layout,
                           micro_batches if strategy == "spare" else 1)
        return [_digest(run_synthetic(params, strategy, redundancy, period, seed, pool)) for period in periods]
    from .time_to_train import simulate

    return [_digest(simulate(params, strategy, None if strategy == "ckpt" else redundancy,
                             checkpoint_period_seconds=period, seed=seed, layout=layout,
                             micro_batches=micro_batches, semantics=semantics, fault_model=fault_model))
            for period in periods]


def _digest(run):
    """The figures of one run that the verdict keeps (small to send between processes)."""
    return {
        "ttt_ratio": run.ttt_ratio,
        "availability": run.availability,
        "restarts": run.restarts,
        "mean_step_cost": run.mean_step_cost,
        "finished": run.finished,
    }




def compare(params, *, trace=None, semantics="repair", rep_redundancies=DEFAULT_COMPARE_REP,
            spare_redundancies=DEFAULT_COMPARE_SPARE, micro_batches=DEFAULT_COMPARE_MICRO_BATCHES,
            period_factors=DEFAULT_COMPARE_FACTORS, seeds=3, cycles=DEFAULT_CYCLES, include_ckpt=True,
            fault_model=None, workers=1, executor=None, progress=None, layout_time_limit=2.0):
    """Checkpointing alone, replication and SPARe on the same failures, each at its best setting.

    Parameters
    ----------
    params : SimulationParameters
        Timings, ``N`` and steps (:func:`compare_parameters` builds them from a
        preset and the operator's figures).  With a trace, ``trace_time_scale``
        compresses it; ``max_wall_factor`` is replaced by ``cycles``.
    trace : FaultTrace, optional
        The failures, replayed ``cycles`` times end to end (:func:`cyclic_trace`).
    semantics : {"paper", "repair"}, default "repair"
        Repaired groups rejoin (``"repair"``, :mod:`spare_opt.simulation.events`) or stay out
        until a restart.  Without a trace, ``"repair"`` needs a ``fault_model``.
    rep_redundancies : sequence of int, default (2, 3)
        Replication degrees (``1 <= r <= N``).
    spare_redundancies : sequence of int, default (2, 3, 5, 9)
        SPARe redundancies (``2 <= r <= N``); each gets a Sidon layout.
    micro_batches : sequence of int, default (1, 4, 16)
        SPARe micro-batches per shard type ``m`` (1: the paper's whole shards).
    period_factors : sequence of float, default (0.5, 0.7, 1.0, 1.4, 2.0)
        Checkpoint periods tried, as multiples of each setting's Young/Daly ``T_c*``.
    seeds : int, default 3
        Seeds per setting, ``0 .. seeds - 1``: the placement of the traced nodes on
        the groups (``placement_seed``) and the jitter; the same for every setting.
    cycles : int, default 2
        Copies of the trace end to end, at most :data:`MAX_CYCLES`; a run that has not
        finished within them is unfinished (``TTT/T0 > cycles``).
    include_ckpt : bool, default True
        Also run checkpointing alone.
    fault_model : FailureModel, optional
        Without a trace: draw failures and repairs from this fitted model
        (:func:`spare_opt.fit_trace`); without either, the Weibull failures of
        ``params`` (the paper's semantics only).
    workers : int, default 1
        Processes (``-1``: every CPU); the result does not depend on it.
    executor : concurrent.futures.Executor, optional
        Run the tasks on this executor instead (a Dask cluster).
    progress : callable, optional
        ``progress(done, total)`` in tasks: one failure walk per setting and seed,
        then one task of runs (every period) per setting and seed.
    layout_time_limit : float, default 2.0
        Seconds of each Sidon layout search.

    Returns
    -------
    CompareResult

    Raises
    ------
    ParameterTypeError
        An argument of the wrong type.
    ParameterError
        An ``r`` or ``m`` out of range (``N m`` too large included), no strategy to
        run, a bad factor, seed count, cycle count or semantics; ``repair`` semantics
        with neither a trace nor a fault model; both a trace and a fault model; fewer
        groups than the nodes the trace names (their faults would be dropped).

    Notes
    -----
    *Checkpoint period.*  For each setting, ``T_f`` (the mean time between unmasked
    failures, ``unmasked_mtbf_seconds``) is measured on its failure walks: the span of
    the cyclic trace over one plus the mean number of wipe-outs (every failure event
    for checkpointing alone); the Young/Daly ``T_c* = T_s + sqrt(T_s^2 + 2 T_s (T_f +
    T_r))`` (:func:`spare_opt.theory.checkpoint_period`) times each factor is run, and
    the period with the least mean ``TTT/T0`` over the seeds is the setting's.
    Without a trace, ``T_c*`` is the closed form of :func:`spare_opt.simulate`: the
    system MTBF of the failures (the preset's, or the fault model's on ``N`` groups)
    times the mean number of failures to a wipe-out under the paper's semantics.

    *Why cyclic.*  A run takes longer than ``T0``; replayed once, the trace would end
    before the slower strategies finish and leave the end of their runs free of
    failures.  Laid end to end, the trace keeps its failure rate under every strategy
    until ``cycles * T0``.

    References
    ----------
    Lee et al., ICML 2026, arXiv:2603.00357, Sec. 5-6; Young (1974), Daly (2006);
    ``../shared/docs/beyond-the-paper.md`` (micro-batches, repairs).
    """
    started = time.perf_counter()
    check_params(params)
    n = params.groups
    reps = check.integers("rep redundancies", rep_redundancies, minimum=1, maximum=n) if rep_redundancies else []
    spares = check.integers("spare redundancies", spare_redundancies, minimum=2, maximum=n) \
        if spare_redundancies else []
    ms = check.integers("micro_batches", micro_batches, minimum=1) if spares else [1]
    factors = check.numbers_("period factors", period_factors, above=0.0)
    seeds = check.count("seeds", seeds)
    include_ckpt = check.flag("include_ckpt", include_ckpt)
    semantics = check.choice("semantics", semantics, SEMANTICS)
    if not (include_ckpt or reps or spares):
        raise ParameterError("nothing to compare: no strategy to run")
    ms = [check_micro_batches(m, params.groups) for m in ms]  # N m bounded before any work
    cycles = check.count("cycles", cycles, maximum=MAX_CYCLES)
    params = replace(params, max_wall_factor=float(cycles))
    if trace is not None:
        check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
        if params.groups < trace.n_nodes:
            raise ParameterError(f"N = {params.groups} groups is fewer than the {trace.n_nodes} nodes the trace "
                                 "names (one node per group): the faults of the others would be dropped")
        if fault_model is not None:
            raise ParameterError("give the failures once: a trace or a fault model, not both")
        replayed = cyclic_trace(trace, cycles)
    else:
        if fault_model is None and semantics != "paper":
            raise ParameterError("repair semantics need repair times: give a trace or a fault model "
                                 "(spare-opt fit TRACE -o model.json), or use semantics='paper'")
        if fault_model is None:
            from ._runs import check_event_budget

            check_event_budget(params)
        else:
            from ..traces.failure_model import FailureModel

            check.instance("fault_model", fault_model, FailureModel, " (spare_opt.FailureModel.load)")
        replayed = None

    configs = []  # (strategy, r, m, layout)
    if include_ckpt:
        configs.append(("ckpt", 1, 1, None))
    configs += [("rep", r, 1, None) for r in reps]
    for r in spares:
        layout = default_layout(n, r, time_limit=layout_time_limit)
        configs += [("spare", r, m, layout) for m in ms]

    walks_total = len(configs) * seeds if trace is not None else 0
    runs_total = len(configs) * seeds

    def relay(offset):
        if progress is None:
            return None
        return lambda done, total: progress(offset + done, walks_total + runs_total)

    trace_info = None
    if trace is not None:
        walk_tasks = [(params, s, r, m, layout, replayed, seed, semantics)
                      for s, r, m, layout in configs for seed in range(seeds)]
        walks = run_tasks(_walk, walk_tasks, workers=workers, executor=executor, progress=relay(0))
        span_seconds = replayed.span_days[1] * 86400.0 * params.trace_time_scale
        periods, run_tasks_list, trace_info = [], [], {}
        for c, (strategy, r, m, _) in enumerate(configs):
            mine = walks[c * seeds:(c + 1) * seeds]
            wipe_outs = float(np.mean([wipes for _, wipes, _ in mine]))
            unmasked = span_seconds / (1.0 + wipe_outs)
            centre = theory.checkpoint_period(params.save_seconds, params.restart_seconds, unmasked)
            periods.append(tuple(centre * f for f in factors))
            trace_info[_label(strategy, r, m)] = dict(mine[0][2], mean_wipe_outs=wipe_outs)
            run_tasks_list += [(params, strategy, r, m, periods[-1], seed, mine[seed][0], semantics)
                               for seed in range(seeds)]
        results = run_tasks(_trace_runs_task, run_tasks_list, workers=workers, executor=executor,
                            progress=relay(walks_total))
    else:
        from .time_to_train import _period

        periods, run_tasks_list, centres = [], [], {}
        for strategy, r, m, layout in configs:
            if (strategy, r) not in centres:  # T_c* of simulate(): the wipe-out rate does not depend on m
                centres[strategy, r] = _period(params, strategy, r, layout, None, fault_model, m, None)
            periods.append(tuple(centres[strategy, r] * f for f in factors))
            run_tasks_list += [(params, strategy, r, m, periods[-1], seed, layout, semantics, fault_model)
                               for seed in range(seeds)]
        results = run_tasks(_model_runs_task, run_tasks_list, workers=workers, executor=executor,
                            progress=relay(0))

    settings = []
    for c, (strategy, r, m, _) in enumerate(configs):
        runs = results[c * seeds:(c + 1) * seeds]
        per_period = [_summary([run[j] for run in runs]) for j in range(len(factors))]
        best = min(range(len(factors)), key=lambda j: (per_period[j]["ttt_ratio"], j))
        settings.append(dict(strategy=strategy, redundancy=int(r), micro_batches=int(m), **per_period[best],
                             checkpoint_period_seconds=periods[c][best], periods=list(periods[c]),
                             ttt_ratio_by_period=[row["ttt_ratio"] for row in per_period]))
    strategies = []
    for strategy in ("ckpt", "rep", "spare"):
        mine = [row for row in settings if row["strategy"] == strategy]
        if mine:
            best = min(mine, key=lambda row: row["ttt_ratio"])
            strategies.append({key: value for key, value in best.items()
                               if key not in ("periods", "ttt_ratio_by_period")})
    source = trace.source if trace is not None else (
        "preset" if fault_model is None else f"failure model {fault_model.source or ''}".strip())
    return CompareResult(params=params, source=source,
                         semantics=semantics, seeds=seeds, cycles=cycles, strategies=strategies,
                         settings=settings, trace_info=trace_info,
                         elapsed_seconds=time.perf_counter() - started)


def _label(strategy, redundancy, micro_batches):
    if strategy == "ckpt":
        return "ckpt"
    if strategy == "rep":
        return f"rep r={redundancy}"
    return f"spare r={redundancy} m={micro_batches}"


def _summary(digests):
    """Mean and 95% interval of ``TTT/T0`` and the means of the other figures over seeds."""
    ratio, ci = mean_ci95([d["ttt_ratio"] for d in digests])
    return {
        "ttt_ratio": ratio,
        "ttt_ci": list(ci),
        "availability": float(np.mean([d["availability"] for d in digests])),
        "restarts": float(np.mean([d["restarts"] for d in digests])),
        "mean_step_cost": float(np.mean([d["mean_step_cost"] for d in digests])),
        "unfinished": int(sum(not d["finished"] for d in digests)),
    }


# ----------------------------------------------------------------------------- figure
def plot_compare(result, path, *, force=False, title=None):
    """Figure of the verdict: ``TTT/T0`` (best period, 95% interval) of every setting tried.

    One marker per setting, grouped by strategy (checkpointing, replication by ``r``,
    SPARe by ``r`` with one series per ``m``); the best setting of each strategy is
    circled and a dotted line marks checkpointing alone.

    Parameters
    ----------
    result : CompareResult
    path : str or os.PathLike
        PNG file, written atomically.
    force : bool, default False
        Overwrite an existing file.
    title : str, optional

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ParameterTypeError
        ``result`` is not a :class:`CompareResult`.
    SpareError
        matplotlib is not installed (``pip install 'spare-opt[plot]'``).
    OutputExistsError
        ``path`` exists and ``force`` is false.
    """
    check.instance("result", result, CompareResult)
    from .._core.plotting import _figure, _save

    figure = _figure(7.0, 3.8)
    ax = figure.subplots()
    cap = result.params.max_wall_factor
    x = 0

    def draw(rows, colour, label):
        nonlocal x
        xs = np.arange(x, x + len(rows))
        ys = np.array([row["ttt_ratio"] if math.isfinite(row["ttt_ratio"]) else cap for row in rows])
        low = np.array([row["ttt_ci"][0] if math.isfinite(row["ttt_ci"][0]) else y for row, y in zip(rows, ys)])
        high = np.array([row["ttt_ci"][1] if math.isfinite(row["ttt_ci"][1]) else y for row, y in zip(rows, ys)])
        ax.errorbar(xs, ys, yerr=[ys - low, high - ys], fmt="o", ms=4, capsize=2, color=colour, label=label)
        for row, xi, yi in zip(rows, xs, ys):
            best = result.best(row["strategy"])
            if row["redundancy"] == best["redundancy"] and row["micro_batches"] == best["micro_batches"]:
                ax.scatter([xi], [yi], s=120, facecolors="none", edgecolors=colour)
            if not math.isfinite(row["ttt_ratio"]):
                ax.annotate(f"> {cap:g}", (xi, yi), textcoords="offset points", xytext=(0, 6), ha="center",
                            fontsize=7)
        x += len(rows) + 1
        return xs

    settings = result.settings
    ticks = []
    for strategy, colour in (("ckpt", "tab:gray"), ("rep", "tab:red")):
        rows = [row for row in settings if row["strategy"] == strategy]
        if rows:
            xs = draw(rows, colour, STRATEGY_LABELS[strategy])
            ticks += [(xi, _setting(row).replace(", m = ", "\nm = ").replace("-", "ckpt")) for xi, row in zip(xs, rows)]
    spare_rows = [row for row in settings if row["strategy"] == "spare"]
    ms = sorted({row["micro_batches"] for row in spare_rows})
    colours = ["tab:blue", "tab:green", "tab:purple", "tab:orange", "tab:brown"]
    for i, m in enumerate(ms):
        rows = [row for row in spare_rows if row["micro_batches"] == m]
        xs = draw(rows, colours[i % len(colours)], f"SPARe+CKPT m = {m}")
        ticks += [(xi, f"r = {row['redundancy']}") for xi, row in zip(xs, rows)]
    ckpt = [row for row in settings if row["strategy"] == "ckpt"]
    if ckpt and math.isfinite(ckpt[0]["ttt_ratio"]):
        ax.axhline(ckpt[0]["ttt_ratio"], color="tab:gray", linestyle=":", linewidth=1)
    ax.set_xticks([t for t, _ in ticks], [label for _, label in ticks], fontsize=7)
    ax.set_ylabel("TTT / T0 (best T_c, 95% CI)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    ax.set_title(title or f"N = {result.params.groups}, {result.semantics} semantics, {result.seeds} seeds",
                 fontsize=9)
    return _save(figure, path, force)

"""Time-to-train: a discrete-event simulation of a pretraining run under failures.

Three fault-tolerance strategies are simulated on ``N`` data-parallel (DP) groups
(Lee et al., ICML 2026, Sec. 6; ``docs/reproduction.md``):

* ``"ckpt"`` - checkpointing only: every failure is a global restart (``T_r``) and a
  rollback to the last checkpoint;
* ``"rep"`` - classic replication of degree ``r`` with checkpointing: ``N // r``
  replica sets (group ``g`` in set ``g mod (N // r)``), every step costs ``r`` layers of
  compute; a failure is masked while every replica set keeps a live member;
* ``"spare"`` - SPARe with checkpointing: a stack layout and the online reorder
  controller; a step costs ``S`` layers of compute plus the all-reduce, ``S`` the
  all-reduce stack number; a failure that lands in a step adds patch compute,
  controller time and a communicator shrink; a wipe-out is a global restart and a
  rollback.

Failures come from Weibull failure clocks of shape ``k`` (one per group, restarted at
each global restart: ``"group-clocks"``, the default) or from one Weibull renewal
process of mean ``m`` for the whole cluster (``"system-renewal"``); either way each
failure strikes a uniformly random live group.  Because the groups lost between two
restarts are then a uniformly random sequence without repetition, the outcome
trajectory of each restart epoch (stack number and step cost) is computed up front from
one random permutation (:func:`spare_opt.stack_number_trajectories`), and the event
loop itself is a numba kernel (``spare_opt.simulation._kernels``) over flat arrays.  Or
the failures come from a fault trace (InfiniteHBD format) or a fitted failure model
(:class:`spare_opt.FailureModel`): their events, failures and, under the ``"repair"``
semantics, rejoins of repaired groups, get their outcomes up front too
(:mod:`spare_opt.simulation.events`) and the kernel replays them.

With ``m`` micro-batches per shard type (SPARe, ``micro_batches=``) a step computes
``sigma = L*/m`` layers of work, ``L*`` the least load in micro-batches
(``docs/fractional.md``); at ``m = 1`` ``sigma`` is the stack number ``S``.  Parameters and
presets live in :mod:`spare_opt.simulation.parameters`; the machinery shared with
:mod:`spare_opt.simulation.tuning` in ``spare_opt.simulation._runs``.

Time accounting of a run (all in seconds, wall clock)::

    wall = useful + overhead + rework + restart + checkpoint

* ``useful``: compute (``sigma`` or ``r`` layers) and all-reduce of the steps that are kept;
* ``overhead``: masking cost inside kept steps (patch compute, controller, shrink, the
  lost part of an all-reduce that a failure interrupted, the communicator change of a
  rejoin);
* ``rework``: everything spent on steps that a wipe-out rolled back;
* ``restart``: global restarts;
* ``checkpoint``: checkpoint saves (including a save cut short by a wipe-out).

``availability = (useful + overhead) / wall``: the fraction of wall time spent making
progress that is kept; so ``TTT / T0 = ((useful + overhead) / T0) / availability`` -
the compute overhead divided by the availability, the split of the paper's
``J(r) = Sbar / A*``.

References
----------
.. [1] Lee et al., "SPARe: Stacked Parallelism with Adaptive Reordering for
   Fault-Tolerant LLM Pretraining Systems with 100k+ GPUs", ICML 2026,
   arXiv:2603.00357, Sec. 6 (the simulated setting, ``paper-600k``).
.. [2] A. Renyi, "On the theory of order statistics", Acta Math. Acad. Sci. Hungarica
   4, 1953 (exponential spacings, used to draw the group clocks in order).
.. [3] Shou et al., arXiv:2502.03885 (the InfiniteHBD fault trace format).
"""

import warnings
from dataclasses import replace

import numpy as np

from .._core import validation as check
from .._core.parallel import run_tasks
from ._runs import (
    DEFAULT_REP_REDUNDANCY,
    MAX_EXPECTED_FAILURES,
    FailurePool,
    SimulationResult,
    check_event_budget,
    check_run_layout,
    check_params,
    check_period,
    check_redundancy,
    default_layout,
    default_period,
    default_redundancy,
    rep_wipe_out_index,
    run_events,
    _default_redundancy,
    run_synthetic,
)
from .._core.stats import interval95
from .._core.errors import ParameterError
from .events import SEMANTICS, _model_events_until, _model_source, trace_events, trace_seconds
from .events import _trace_events as _checked_trace_events
from .parameters import STRATEGIES, _with_system_mtbf, allreduce_extrapolation, micro_batch_capacity
from .parameters import allreduce_seconds as allreduce_model
from ..traces.trace import FaultTrace, _placement_text

__all__ = [
    "MAX_EXPECTED_FAILURES",
    "DEFAULT_REP_REDUNDANCY",
    "SimulationResult",
    "simulate",
    "simulate_seeds",
    "summarise",
    "default_redundancy",
    "default_layout",
    "rep_wipe_out_index",
    "trace_failures",
    "trace_system_mtbf_seconds",
    "trace_seconds",
]


def simulate(params, strategy, redundancy=None, *, checkpoint_period_seconds=None, seed=0, layout=None,
             trace=None, placement_seed=None, placement=None, micro_batches=1, semantics="paper",
             fault_model=None, global_batch=None, micro_batch_overhead_seconds=0.0, allreduce_seconds=None,
             window=None):
    """Simulate one training run and return its time-to-train and accounting.

    Parameters
    ----------
    params : SimulationParameters
    strategy : {"ckpt", "rep", "spare", "elastic"}
        ``"elastic"``: the rule of TorchFT / FT-HSDP (:mod:`spare_opt.simulation.events`),
        with a trace or a fault model only.
    redundancy : int, optional
        ``r`` (ignored for ``"ckpt"`` and ``"elastic"``); ``1 <= r <= N``, ``r >= 2`` for
        SPARe.  Default: :func:`default_redundancy` (3 for replication, ``r*`` for SPARe).
    checkpoint_period_seconds : float or None
        ``T_c``, seconds of progress between checkpoints; ``None``: the closed-form
        ``T_c*`` (:func:`spare_opt.simulation.tuning.closed_form_period`; for a trace, with the
        trace's own system MTBF, :func:`trace_system_mtbf_seconds`).
    seed : int
        Seed of the failure process, the failure order and the jitter.
    layout : Layout or None
        SPARe layout of ``N`` groups and redundancy ``r``; ``None``: a Sidon layout
        (:func:`default_layout`).
    trace : spare_opt.traces.trace.FaultTrace or None
        Replay this trace instead of Weibull failures (``params.trace_time_scale``
        applies; failures during a restart always "carry").
    placement_seed : int or None
        Trace only: random node-to-group placement (:func:`trace_failures`).
    placement : Placement or None
        Trace only: explicit node placement (:func:`trace_failures`).
    micro_batches : int, default 1
        ``m``, micro-batches per shard type (SPARe): a step computes ``L*/m`` layers'
        worth of work, ``L*`` the least load in micro-batches (``docs/fractional.md``).
        ``m = 1`` is the paper's model, with bit-identical results.
    semantics : {"paper", "repair"}, default "paper"
        ``"paper"``: failed groups stay out until a global restart.  ``"repair"``:
        a group is back ``params.heal_seconds`` after its node's ``fault_end``
        (:mod:`spare_opt.simulation.events`); needs a ``trace`` or a ``fault_model`` (the repair
        times come from there).
    fault_model : spare_opt.traces.failure_model.FailureModel or None
        Draw failures and repairs from this model (``spare-opt fit TRACE -o FILE``,
        :meth:`~spare_opt.traces.failure_model.FailureModel.load`) instead of the Weibull clocks of
        ``params`` (:func:`spare_opt.simulation.events.model_events`; seeded by ``seed``).  Not
        with ``trace``.
    global_batch : int, optional
        Sequences in the global batch ``B``: ``m`` may be at most ``floor(B / N)``
        (:func:`spare_opt.micro_batch_capacity`).
    micro_batch_overhead_seconds : float, default 0.0
        Fixed cost of each micro-batch beyond the first of a shard type
        (:func:`spare_opt.simulation._runs.run_events`).
    allreduce_seconds : float, optional
        All-reduce time per step, replacing ``params.allreduce_seconds``.  Without it,
        an all-reduce time of the paper's line extrapolated past ``N = 1000`` warns.
    window : tuple, optional
        ``(start, end)`` of the trace to replay (:func:`spare_opt.window_trace`).

    Returns
    -------
    SimulationResult

    Raises
    ------
    ParameterTypeError
        ``params`` is not SimulationParameters, ``trace`` is not a FaultTrace,
        ``fault_model`` is not a FailureModel,
        ``layout`` is not a Layout, or an integer argument has another type.
    ParameterError
        Unknown strategy or semantics, ``"repair"`` without a trace or fault model,
        both a trace and a fault model, ``m`` out of range, ``r`` out of range, a layout of the wrong shape, a
        non-positive checkpoint period, a negative ``seed``, or (without a trace) more
        than :data:`MAX_EXPECTED_FAILURES` failures expected before the wall-time cap
        ``max_wall_factor * T0``, or a run that draws more than ``MAX_RUN_FAILURES``
        failures or ``MAX_RUN_EPOCHS`` restarts (the bounds of its loops); or
        ``placement_seed`` or ``params.trace_time_scale != 1`` without a trace (the
        run would ignore them); ``"elastic"`` without a trace or a fault model; an
        ``m`` that ``global_batch`` cannot hold; a ``window`` without a trace.
    TraceError
        The trace's times overflow a float in seconds (:func:`trace_seconds`), or it
        gives no mean time between failures for the default period.

    Examples
    --------
    >>> from spare_opt import preset_parameters, simulate
    >>> params = preset_parameters("paper-600k", 600, steps=500)
    >>> run = simulate(params, "spare", 8, seed=0)
    >>> run.finished, 1.0 < run.ttt_ratio < 5.0
    (True, True)

    Warns
    -----
    UserWarning
        A ``layout`` for a strategy other than ``"spare"``, or a ``redundancy`` other
        than 1 for ``"ckpt"`` or ``"elastic"``: ignored (generic code passes them to
        every strategy).  An all-reduce time of the paper's line extrapolated past
        ``N = 1000`` (:func:`spare_opt.allreduce_extrapolation`).

    Notes
    -----
    The run is deterministic for a given ``seed`` (numba's generator is seeded inside
    the kernel; the failure orders come from ``numpy.random.SeedSequence``).

    A trace or a fault model is turned into events with their outcomes up front
    (:mod:`spare_opt.simulation.events`: wipe-out or not, step cost after each event), then the
    kernel replays them in time; with a fault model events are drawn up to a horizon
    that doubles until the run ends before it.  The default checkpoint period of a
    fault model's run uses its system MTBF on ``N`` groups.
    """
    check_params(params)
    params, trace, overhead = _run_options(params, trace, micro_batches, global_batch,
                                           micro_batch_overhead_seconds, allreduce_seconds, window)
    _check_used(params, strategy, redundancy, layout, trace, placement_seed)
    seed = check.seed(seed)
    redundancy, period, layout, micro_batches, semantics, events = _prepare(
        params, strategy, redundancy, layout, trace, placement_seed, placement, micro_batches, semantics, fault_model,
        checkpoint_period_seconds)
    return _run(params, strategy, redundancy, period, seed, layout, micro_batches, semantics, events, fault_model,
                overhead)


def _run_options(params, trace, micro_batches, global_batch, overhead, allreduce, window):
    """``(params, trace, overhead)`` with the run's options applied: the all-reduce time, the window, the batch."""
    overhead = check.number("micro_batch_overhead_seconds", overhead, minimum=0.0)
    if allreduce is not None:
        params = replace(params, allreduce_seconds=check.number("allreduce_seconds", allreduce, minimum=0.0))
    elif params.allreduce_seconds == allreduce_model(params.groups):
        note = allreduce_extrapolation(params.groups)
        if note:
            warnings.warn(note, UserWarning, stacklevel=3)
    if window is not None:
        if trace is None:
            raise ParameterError("a window cuts a trace: give the trace too")
        from ..traces.window import _window_bounds, window_trace

        trace = window_trace(trace, *_window_bounds(window))
    if global_batch is not None:
        most = micro_batch_capacity(global_batch, params.groups)
        if check.integer("micro_batches", micro_batches) > most:
            raise ParameterError(f"m = {micro_batches} micro-batches per shard type: a global batch of "
                                 f"{global_batch:,} sequences holds {most} per group (m <= {most})")
    return params, trace, overhead


def _prepare(params, strategy, redundancy, layout, trace, placement_seed, placement, micro_batches, semantics,
             fault_model, checkpoint_period_seconds):
    """The checked setting and what does not depend on the seed (the period, a trace's events):
    ``(redundancy, period, layout, micro_batches, semantics, events)``, fixed once for every seed.

    ``params`` and ``strategy`` are checked by the caller (:func:`simulate`,
    :func:`simulate_seeds`, through :func:`_check_used`); the other arguments here."""
    if redundancy is None:
        redundancy = _default_redundancy(strategy, params.groups)
    redundancy = check_redundancy(strategy, redundancy, params.groups)
    micro_batches, semantics = _check_source(params, strategy, micro_batches, semantics, trace, fault_model)
    if strategy == "spare":
        layout = check_run_layout(layout, params.groups, redundancy)
    period = _period(params, strategy, redundancy, layout, trace, fault_model, micro_batches,
                     checkpoint_period_seconds)
    events = None
    if trace is not None:
        events = _trace_events(params, strategy, redundancy, layout, trace, placement_seed, placement, micro_batches,
                               semantics)
    return redundancy, period, layout, micro_batches, semantics, events


def _check_source(params, strategy, micro_batches, semantics, trace, fault_model):
    """Checked ``(micro_batches, semantics)``, and the source of failures they need."""
    from ..planning.plan import check_micro_batches
    from ..traces.failure_model import FailureModel

    micro_batches = check_micro_batches(micro_batches, params.groups)
    semantics = check.choice("semantics", semantics, SEMANTICS)
    if trace is not None:
        check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    if fault_model is not None:
        check.instance("fault_model", fault_model, FailureModel, " (spare_opt.FailureModel.load)")
        if trace is not None:
            raise ParameterError("give a trace or a fault model, not both: each is a source of failures")
    if trace is None and fault_model is None:
        if strategy == "elastic":
            raise ParameterError('strategy "elastic" runs on given events: give a trace or a fault model '
                                 "(spare-opt fit TRACE -o FILE)")
        if semantics == "repair":
            raise ParameterError('semantics "repair" needs repair times: give a trace or a fault model '
                                 "(spare-opt fit TRACE -o FILE)")
        check_event_budget(params)
    return micro_batches, semantics


def _trace_events(params, strategy, redundancy, layout, trace, placement_seed, placement, micro_batches, semantics):
    """The events of a trace run (computed once for every seed), on the arguments :func:`simulate` checked."""
    events = _checked_trace_events(trace, params.groups, strategy, redundancy, semantics, layout, micro_batches,
                                   params.heal_seconds, params.trace_time_scale, placement_seed, placement)
    events.counts.update(source=trace.source, placement=_placement_text(placement_seed, placement))
    return events


def _run(params, strategy, redundancy, period, seed, layout, micro_batches, semantics, events, fault_model,
         overhead=0.0):
    """One run on checked arguments: synthetic failures, given events, or a fault model's."""
    if events is None and fault_model is None:
        pool = FailurePool(strategy, params.groups, redundancy, seed, layout, micro_batches)
        return run_synthetic(params, strategy, redundancy, period, seed, pool, micro_batch_overhead_seconds=overhead)
    if events is not None:
        result = run_events(params, strategy, redundancy, period, seed, events.kernel_rows(),
                            micro_batches=micro_batches, semantics=semantics, micro_batch_overhead_seconds=overhead)
    else:
        source = _model_source(fault_model, params.groups, strategy, redundancy, semantics, layout,
                               micro_batches, params.heal_seconds, seed)

        def rows(horizon):
            nonlocal events
            events = _model_events_until(source, horizon)
            return events.kernel_rows(), False

        result = run_events(params, strategy, redundancy, period, seed, rows, micro_batches=micro_batches,
                            semantics=semantics, micro_batch_overhead_seconds=overhead)
        events.counts.update(source=fault_model.source or "failure model")
    counts = dict(events.counts)
    counts["beyond_run"] = int(np.count_nonzero(events.times_seconds > result.wall_seconds))
    result.trace = counts
    return result


def simulate_seeds(params, strategy, redundancy=None, *, seeds=10, first_seed=0, checkpoint_period_seconds=None,
                   layout=None, trace=None, placement_seed=None, placement=None, micro_batches=1, semantics="paper",
                   fault_model=None, workers=1, executor=None, progress=None, global_batch=None,
                   micro_batch_overhead_seconds=0.0, allreduce_seconds=None, window=None):
    """Run :func:`simulate` for seeds ``first_seed .. first_seed + seeds - 1``.

    Parameters
    ----------
    params, strategy, redundancy, checkpoint_period_seconds, layout, trace, placement_seed, placement
        As for :func:`simulate`.  The default period and layout are computed once.
    micro_batches, semantics, fault_model, global_batch, micro_batch_overhead_seconds, allreduce_seconds, window
        As for :func:`simulate`.  A trace's events are computed once for every seed.
    seeds : int, default 10
        Number of runs, ``>= 1``.
    first_seed : int, default 0
        Seed of the first run.
    workers : int, default 1
        Processes (``-1``: every CPU).
    executor : concurrent.futures.Executor, optional
        Run the seeds on this executor (a Dask cluster, ``docs/scaling.md``).
    progress : callable, optional
        ``progress(done, total)`` in runs.

    Returns
    -------
    list of SimulationResult
        One result per seed, in seed order, identical whatever runs them.

    Raises
    ------
    ParameterTypeError, ParameterError
        ``seeds`` or ``first_seed`` of the wrong type or out of range, or any error of
        :func:`simulate`.
    """
    check_params(params)
    params, trace, overhead = _run_options(params, trace, micro_batches, global_batch,
                                           micro_batch_overhead_seconds, allreduce_seconds, window)
    _check_used(params, strategy, redundancy, layout, trace, placement_seed)
    seeds = check.count("seeds", seeds, maximum=check.MAX_RUNS)
    first_seed = check.seed(first_seed, "first_seed")
    redundancy, period, layout, micro_batches, semantics, events = _prepare(
        params, strategy, redundancy, layout, trace, placement_seed, placement, micro_batches, semantics, fault_model,
        checkpoint_period_seconds)
    tasks = [(params, strategy, redundancy, period, first_seed + s, layout, micro_batches, semantics, events,
              fault_model, overhead) for s in range(seeds)]
    return run_tasks(_run, tasks, workers=workers, executor=executor, progress=progress)


def _check_used(params, strategy, redundancy, layout, trace, placement_seed):
    """Arguments the run would ignore: an error when they describe a trace run that is not
    happening, a warning when generic code passes them to every strategy.

    ``placement_seed`` and ``params.trace_time_scale != 1`` without a trace describe a
    trace replay: the numbers would be taken for one, so they are refused.  A
    ``redundancy`` for ``"ckpt"`` or a ``layout`` for a strategy other than ``"spare"``
    is what a loop over :data:`~spare_opt.simulation.parameters.STRATEGIES` passes to every
    strategy; the run is exactly the strategy asked for, so a ``UserWarning`` (on stderr)
    says the argument is ignored.
    """
    check.choice("strategy", strategy, STRATEGIES)
    if trace is None:
        if placement_seed is not None:
            raise ParameterError("placement_seed places the nodes of a trace; without a trace it would do nothing")
        if params.trace_time_scale != 1.0:
            raise ParameterError(f"params.trace_time_scale = {params.trace_time_scale:g} applies to trace runs "
                                 "only; without a trace it would do nothing")
    if layout is not None and strategy != "spare":
        warnings.warn(f"layout is ignored: it is a SPARe layout and strategy {strategy!r} does not use one",
                      UserWarning, stacklevel=3)
    if strategy in ("ckpt", "elastic") and redundancy is not None and \
            check.integer("redundancy r", redundancy) != 1:
        warnings.warn(f"redundancy {redundancy} is ignored: strategy {strategy!r} has r = 1",
                      UserWarning, stacklevel=3)


def _period(params, strategy, redundancy, layout, trace, fault_model, micro_batches, checkpoint_period_seconds):
    """The checkpoint period of a run: the one given, or the closed-form ``T_c*``.

    ``T_c*`` takes the system MTBF of the source of failures (a trace's own, a fault
    model's on ``N`` groups) and the mean number of failures to a wipe-out under the
    paper's semantics (repairs only make wipe-outs rarer).
    """
    if checkpoint_period_seconds is not None:
        return check_period(checkpoint_period_seconds)
    basis = None
    if trace is not None:
        basis = _with_system_mtbf(params, trace_system_mtbf_seconds(trace, params.trace_time_scale))
    elif fault_model is not None:
        mtbf = fault_model.system_mtbf_seconds * fault_model.cluster_nodes / params.groups
        basis = _with_system_mtbf(params, mtbf)
    # wipe-outs do not depend on m (a shard type with no live holder), nor does T_c*
    return default_period(params, strategy, redundancy, layout, basis)


def summarise(results):
    """Mean and 95% confidence interval of the main figures over several runs.

    Parameters
    ----------
    results : list of SimulationResult
        Runs of one configuration (different seeds).

    Returns
    -------
    dict
        For ``ttt_ratio``, ``availability``, ``restarts``, ``masked_failures``,
        ``mean_stack_number``, ``mean_step_cost``, ``rejoins``, ``rework_seconds``,
        ``checkpoint_seconds``, ``ttt_seconds``: ``{"mean", "ci95": [low, high], "ci_method", "ci_note"}``,
        the interval over seeds within the figure's bounds (availability in
        ``[0, 1]``, counts and times ``>= 0``, the stack number and step cost in
        ``[1, r]``;
        :func:`spare_opt._core.stats.interval95`: Student t, or a BCa bootstrap when the t
        interval leaves the bounds); plus ``runs`` and ``unfinished``.  Unfinished runs
        have ``inf`` time; the interval is ``[nan, nan]`` where it cannot be given (a
        single run, an unfinished one, or fewer than 10 runs whose t interval leaves
        the bounds) and ``ci_note`` says why.

    Raises
    ------
    ParameterTypeError
        ``results`` is not a list of :class:`SimulationResult`.
    ParameterError
        ``results`` is empty.
    """
    results = check.sequence("results", results)
    for result in results:
        check.instance("results: each item", result, SimulationResult)
    return _summarise(results)


def _summarise(results):
    """:func:`summarise`; arguments are checked by the caller (a non-empty list of
    :class:`SimulationResult`, as :func:`spare_opt.tune` builds them)."""
    out = {"runs": len(results), "unfinished": sum(not r.finished for r in results)}
    top = float(max(r.redundancy for r in results))
    # The bounds of each figure: an interval never leaves them (spare_opt._core.stats.interval95).
    bounds = {"ttt_ratio": (0.0, None), "ttt_seconds": (0.0, None), "availability": (0.0, 1.0),
              "restarts": (0.0, None), "masked_failures": (0.0, None), "mean_stack_number": (1.0, top),
              "mean_step_cost": (1.0, top), "rejoins": (0.0, None),
              "rework_seconds": (0.0, None), "checkpoint_seconds": (0.0, None)}
    for key, (lower, upper) in bounds.items():
        values = np.array([getattr(r, key) for r in results], dtype=float)
        interval = interval95(values, lower=lower, upper=upper)
        out[key] = {"mean": interval.mean, "ci95": [interval.low, interval.high], "ci_method": interval.method,
                    "ci_note": interval.note}
    return out


# ----------------------------------------------------------------------------- traces
def trace_failures(trace, groups, strategy, redundancy, *, layout=None, time_scale=1.0, placement_seed=None,
                   placement=None):
    """Failure times and outcomes of a fault-trace replay (restart at each wipe-out).

    The trace is cut into instants by :func:`spare_opt.traces.trace.trace_instants` (the same
    step as :func:`spare_opt.replay_trace`): every usable ``fault_start`` fails its
    node's group, starts at the same instant fail together (one failure event), a start
    for a group already down in the current restart epoch is skipped, and a wipe-out
    brings every group back (``fault_end`` events are ignored: failed groups do not
    rejoin before a restart, the paper's semantics).

    Parameters
    ----------
    trace : spare_opt.traces.trace.FaultTrace
    groups : int
        ``N``.
    strategy : str
    redundancy : int
    layout : Layout or None
        SPARe layout of ``N`` groups and redundancy ``r`` (``None``: :func:`default_layout`).
    time_scale : float
        Seconds per trace second (``< 1`` compresses the trace), finite and ``> 0``.
    placement_seed : int or None
        Place the traced nodes on random distinct groups with this seed instead of
        group ``i`` for the ``i``-th node to appear.
    placement : Placement or None
        Place the traced nodes as this placement says (a node on a domain fails all
        its groups); not together with ``placement_seed``.

    Returns
    -------
    times_seconds : numpy.ndarray of float64, shape (F,)
        Time of each failure event (one or more groups at one instant).
    stack_numbers : numpy.ndarray of int16, shape (F,)
        Stack number after each failure (when masked).
    wipe_outs : numpy.ndarray of int8, shape (F,)
        1 where the failure is a wipe-out.
    counts : dict
        ``fault_starts``, ``used`` (group failures applied), ``failure_events``,
        ``outside_cluster`` (node index >= N), ``already_down`` (group already failed
        in the epoch), ``ignored_by_reader`` (irregular starts).

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a :class:`~spare_opt.traces.trace.FaultTrace`, or an argument of the
        wrong type.
    ParameterError
        Unknown strategy, ``N`` or ``r`` out of range, a layout of the wrong shape, a
        bad ``time_scale``.
    """
    events = trace_events(trace, groups, strategy, redundancy, semantics="paper", layout=layout,
                          time_scale=time_scale, placement_seed=placement_seed, placement=placement)
    counts = {key: events.counts[key] for key in ("fault_starts", "used", "outside_cluster", "already_down",
                                                  "ignored_by_reader", "failure_events")}
    return (events.times_seconds, events.stack_numbers.astype(np.int16), events.wipe_outs.astype(np.int8),
            counts)


def trace_system_mtbf_seconds(trace, time_scale=1.0):
    """The system MTBF of a trace: mean time between its usable ``fault_start`` events, in seconds.

    The span from time 0 to the last event divided by the number of non-ignored
    starts; used for the default checkpoint period of a trace replay.

    Parameters
    ----------
    trace : spare_opt.traces.trace.FaultTrace
    time_scale : float, default 1.0
        Seconds per trace second (``< 1`` compresses the trace), finite and ``> 0``.

    Returns
    -------
    float
        Mean time between usable fault starts, in seconds (``days * 86400 *
        time_scale``), finite and ``> 0``.

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a :class:`~spare_opt.traces.trace.FaultTrace`.
    ParameterError
        ``time_scale`` is not a finite number ``> 0``.
    TraceError
        The trace has no usable ``fault_start``, its times overflow a float in
        seconds (:func:`trace_seconds`), or its last event is at or before time 0, so
        that no mean time between failures can be derived (give a checkpoint period).
    """
    from .._core.errors import TraceError

    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    time_scale = check.number("time_scale", time_scale, above=0.0)
    starts = np.count_nonzero(trace.is_start & ~trace.ignored)
    if starts == 0:
        raise TraceError(f"{trace.source}: no fault_start event to replay")
    last = float(trace_seconds(trace, time_scale)[-1])
    if trace.window is not None:  # the observation lasts the window's length
        last = trace.observed_days * 86400.0 * time_scale
    mtbf = last / starts
    if not mtbf > 0.0:
        raise TraceError(
            f"{trace.source}: the last event is at day {trace.span_days[1]:g}, so the trace gives no mean time "
            "between failures for the default checkpoint period; give the period (--checkpoint-period-seconds)"
        )
    return mtbf

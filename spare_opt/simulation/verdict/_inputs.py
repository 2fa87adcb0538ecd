"""The verdict's input object: the cluster's timings, the failures, the all-reduce and the grid, checked once.

:func:`build_inputs` takes what :func:`~spare_opt.compare` was given (from Python, or
from the command line and a cluster file, which call it the same way), checks every
value once, resolves the defaults (the window of a trace, a trace fitted and scaled to
``N`` groups, the all-reduce time and where it came from, the ``m`` a global batch
allows) and returns a frozen :class:`CompareInputs`.  The steps after it (the grid,
the runs, the pricing, the report) trust it and check nothing again.
"""

from dataclasses import dataclass, replace

from ..._core import validation as check
from ..._core.errors import ParameterError, TraceError
from ...planning.plan import check_micro_batches
from ...traces.trace import FaultTrace
from .._runs import check_params
from ..events import SEMANTICS
from ..parameters import SimulationParameters, allreduce_seconds as allreduce_model, get_preset, steps_in
from ._failures import MAX_CYCLES, cyclic_trace, per_group_model, scaled_trace_model, trace_cluster_size
from ._grid import micro_batch_grid


@dataclass(frozen=True)
class CompareInputs:
    """What one verdict runs on, checked and resolved (:func:`build_inputs`); nothing after it checks again.

    Attributes
    ----------
    params : SimulationParameters
        The timings as run: the all-reduce set (:attr:`allreduce`), ``max_wall_factor
        = cycles``, and ``trace_time_scale = 1`` once a trace was fitted (the model
        holds the scale).
    semantics : str
        ``"paper"`` or ``"repair"``.
    trace : FaultTrace or None
        The trace replayed (cut to its window), ``None`` when fitted or absent.
    replayed : FaultTrace or None
        ``trace`` laid end to end ``cycles`` times (:func:`cyclic_trace`).
    fault_model : FailureModel or None
        The failure model drawn from: the operator's (per group), or the trace's fit.
    fitted_from : FaultTrace or None
        The trace the verdict fitted ``fault_model`` on, if it did.
    windowed : FaultTrace or None
        The trace cut to a window, for the note that says so (even once fitted).
    scaling : str or None
        How a fitted trace was carried over to ``N`` groups, in words.
    failures_path : str or None
        The file ``fault_model`` was read from.
    nodes_per_group : int
    allreduce : dict
        The all-reduce time and where it came from (:attr:`CompareResult.allreduce`).
    rep_redundancies, spare_redundancies, micro_batches, period_factors : tuple
        The grid: replication ``r``, SPARe ``r``, SPARe ``m`` (:func:`micro_batch_grid`),
        checkpoint periods as multiples of ``T_c*``.
    seeds, cycles : int
    include_ckpt, include_elastic, include_redistribution, allreduce_sensitivity : bool
        What runs (elastic and redistribution already left out where they cannot run).
    global_batch : int or None
    micro_batch_overhead_seconds : float
    layout_time_limit : float
        Seconds of each Sidon layout search.
    notes : tuple of str
        What the inputs left out or assumed, for the verdict's notes.
    """

    params: SimulationParameters
    semantics: str
    trace: FaultTrace | None
    replayed: FaultTrace | None
    fault_model: object
    fitted_from: FaultTrace | None
    windowed: FaultTrace | None
    scaling: str | None
    failures_path: object
    nodes_per_group: int
    allreduce: dict
    rep_redundancies: tuple
    spare_redundancies: tuple
    micro_batches: tuple
    period_factors: tuple
    seeds: int
    cycles: int
    include_ckpt: bool
    include_elastic: bool
    include_redistribution: bool
    allreduce_sensitivity: bool
    global_batch: int | None
    micro_batch_overhead_seconds: float
    layout_time_limit: float
    notes: tuple


def build_inputs(params, *, trace, semantics, rep_redundancies, spare_redundancies, micro_batches, period_factors,
                 seeds, cycles, include_ckpt, include_elastic, fault_model, layout_time_limit, global_batch,
                 micro_batch_overhead_seconds, allreduce_seconds, window, trace_nodes, trace_scaling,
                 include_redistribution, gradient_bytes, bandwidth_bytes_per_second, allreduce_latency_seconds,
                 allreduce_sensitivity, nodes_per_group, failures_path):
    """:class:`CompareInputs` from the arguments of :func:`~spare_opt.compare` (the same names and meanings).

    The checks run in the order the errors have always come in (the grid, the
    semantics, the trace's window, the ``m``, the all-reduce, the cycles, then the
    failures), so that a call with two bad values names the same one as before.

    Raises
    ------
    ParameterTypeError, ParameterError, TraceError
        As :func:`~spare_opt.compare`.
    """
    check_params(params)
    n = params.groups
    notes = []
    grid = _checked_grid(n, rep_redundancies, spare_redundancies, period_factors, seeds, include_ckpt,
                         include_elastic, include_redistribution, allreduce_sensitivity)
    semantics = check.choice("semantics", semantics, SEMANTICS)
    overhead = check.number("micro_batch_overhead_seconds", micro_batch_overhead_seconds, minimum=0.0)
    nodes_per_group = check.count("nodes_per_group", nodes_per_group)
    trace, trace_nodes = _trace_in_window(trace, trace_nodes, window)
    if not (grid["include_ckpt"] or grid["reps"] or grid["spares"] or grid["include_elastic"]
            or grid["include_redistribution"]):
        raise ParameterError("nothing to compare: no strategy to run")
    ms, grid_note = micro_batch_grid(global_batch, n, micro_batches) \
        if (grid["spares"] or grid["include_redistribution"]) else ([1], None)
    ms = [check_micro_batches(m, params.groups) for m in ms]  # N m bounded before any work
    if grid_note:
        notes.append(grid_note)
    params, allreduce = _allreduce_source(params, allreduce_seconds, gradient_bytes, bandwidth_bytes_per_second,
                                          allreduce_latency_seconds)
    cycles = check.count("cycles", cycles, maximum=MAX_CYCLES)
    params = replace(params, max_wall_factor=float(cycles))
    windowed = trace if getattr(trace, "window", None) is not None else None  # its note, even once fitted
    trace_scaling = check.choice("trace_scaling", trace_scaling, ("auto", "fit", "replay"))
    failures = _failures(params, trace, fault_model, trace_nodes, trace_scaling, nodes_per_group, semantics,
                         cycles, notes)
    include_elastic = grid["include_elastic"]
    if include_elastic and failures["trace"] is None and failures["fault_model"] is None:
        include_elastic = False
        notes.append("elastic left out: it runs on a trace or a failure model, not on the preset's Weibull "
                     "failures")
        if not (grid["include_ckpt"] or grid["reps"] or grid["spares"]):
            raise ParameterError("nothing to compare: elastic needs a trace or a fault model")
    return CompareInputs(
        semantics=semantics, windowed=windowed, failures_path=failures_path, nodes_per_group=nodes_per_group,
        allreduce=allreduce, rep_redundancies=tuple(grid["reps"]), spare_redundancies=tuple(grid["spares"]),
        micro_batches=tuple(ms), period_factors=tuple(grid["factors"]), seeds=grid["seeds"], cycles=cycles,
        include_ckpt=grid["include_ckpt"], include_elastic=include_elastic,
        include_redistribution=grid["include_redistribution"], allreduce_sensitivity=grid["allreduce_sensitivity"],
        global_batch=global_batch, micro_batch_overhead_seconds=overhead, layout_time_limit=layout_time_limit,
        notes=tuple(notes), **failures)


def _checked_grid(n, rep_redundancies, spare_redundancies, period_factors, seeds, include_ckpt, include_elastic,
                  include_redistribution, allreduce_sensitivity):
    """The grid's arguments checked, as a dict; redistribution only beside SPARe settings and with 2 groups or more."""
    reps = check.integers("rep redundancies", rep_redundancies, minimum=1, maximum=n) if rep_redundancies else []
    spares = check.integers("spare redundancies", spare_redundancies, minimum=2, maximum=n) \
        if spare_redundancies else []
    factors = check.numbers_("period factors", period_factors, above=0.0)
    seeds = check.count("seeds", seeds)
    include_ckpt = check.flag("include_ckpt", include_ckpt)
    include_elastic = check.flag("include_elastic", include_elastic)
    # beside the stacked settings: without SPARe settings there is nothing to set it against
    include_redistribution = check.flag("include_redistribution", include_redistribution) and n >= 2 and \
        bool(spare_redundancies)
    allreduce_sensitivity = check.flag("allreduce_sensitivity", allreduce_sensitivity)
    return {"reps": reps, "spares": spares, "factors": factors, "seeds": seeds, "include_ckpt": include_ckpt,
            "include_elastic": include_elastic, "include_redistribution": include_redistribution,
            "allreduce_sensitivity": allreduce_sensitivity}


def _trace_in_window(trace, trace_nodes, window):
    """The trace cut to ``window`` and the traced cluster's size checked on the whole trace (a window names fewer)."""
    if trace is None and trace_nodes is not None:
        raise ParameterError("trace_nodes is the size of a trace's cluster: give the trace too")
    if trace is not None and trace_nodes is not None:  # against the whole file: a window names fewer nodes
        trace_nodes = trace_cluster_size(trace, nodes=trace_nodes)
    if trace is not None and window is not None:
        from ...traces.window import _window_bounds, window_trace

        trace = window_trace(trace, *_window_bounds(window))
    elif window is not None:
        raise ParameterError("a window cuts a trace: give the trace too")
    return trace, trace_nodes


def _failures(params, trace, fault_model, trace_nodes, trace_scaling, nodes_per_group, semantics, cycles, notes):
    """The failures the runs replay or draw from, as :class:`CompareInputs` fields (``params`` among them).

    A trace is replayed on ``N`` groups, or fitted and scaled per node when its cluster
    is of another size or a group has several nodes; a failure model is made a
    group's; without either, the preset's Weibull failures (the paper's semantics).
    """
    scaling = fitted_from = None
    if trace is not None:
        check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
        if fault_model is not None:
            raise ParameterError("give the failures once: a trace or a fault model, not both")
        nodes = trace.cluster_nodes if trace_nodes is None else trace_nodes  # checked on the whole trace
        if trace.cluster_nodes is not None and nodes != trace.cluster_nodes:
            notes.append(f"the trace's cluster is taken as {nodes:,} nodes, as given; the file says "
                         f"{trace.cluster_nodes:,}")
        if nodes_per_group > 1 and trace_scaling == "replay":
            raise ParameterError("nodes_per_group > 1 needs the trace fitted (trace_scaling 'fit' or 'auto'): a "
                                 "replay places one traced node on each group")
        if trace_scaling == "fit" or nodes_per_group > 1 or (
                trace_scaling == "auto" and nodes is not None and nodes != params.groups
                and params.groups >= trace.n_nodes):
            fitted_from = trace
            fault_model, scaling = scaled_trace_model(trace, nodes, params.groups, params.trace_time_scale,
                                                      nodes_per_group=nodes_per_group)
            params = replace(params, trace_time_scale=1.0)
            trace = None
    elif fault_model is not None and nodes_per_group > 1:
        fault_model = per_group_model(fault_model, nodes_per_group)
    if trace is not None:
        if params.groups < trace.n_nodes:
            raise ParameterError(f"N = {params.groups} groups is fewer than the {trace.n_nodes} nodes the trace "
                                 "names (one node per group): the faults of the others would be dropped")
        replayed = cyclic_trace(trace, cycles)
    else:
        if fault_model is None and semantics != "paper":
            raise ParameterError("repair semantics need repair times: give a trace or a fault model "
                                 "(spare-opt fit TRACE -o model.json), or use semantics='paper'")
        if fault_model is None:
            from .._runs import check_event_budget

            check_event_budget(params)
        else:
            from ...traces.failure_model import FailureModel

            check.instance("fault_model", fault_model, FailureModel, " (spare_opt.FailureModel.load)")
        replayed = None
    return {"params": params, "trace": trace, "replayed": replayed, "fault_model": fault_model,
            "fitted_from": fitted_from, "scaling": scaling}


def _allreduce_source(params, allreduce_seconds, gradient_bytes, bandwidth, latency):
    """``params`` with the all-reduce time of the verdict, and where it came from (a dict).

    The operator's time first, then the ring model from ``gradient_bytes`` and
    ``bandwidth``, then the paper's line inside the range it was fitted on (clipped
    at 2 s below it); past that range the line is not extrapolated: an error asks for
    either.
    """
    from ..parameters import ALLREDUCE_FITTED_GROUPS, ring_allreduce_seconds

    n = params.groups
    low, high = ALLREDUCE_FITTED_GROUPS
    latency = check.number("allreduce_latency_seconds", latency, minimum=0.0)
    ring = gradient_bytes is not None or bandwidth is not None
    if ring and (gradient_bytes is None or bandwidth is None):
        raise ParameterError("the ring all-reduce model needs both gradient_bytes and bandwidth_bytes_per_second")
    if latency and not ring:  # else the latency given would be dropped without a word
        raise ParameterError("allreduce_latency_seconds is part of the ring all-reduce model: give gradient_bytes "
                             "and bandwidth_bytes_per_second too")
    if allreduce_seconds is not None:
        if ring:
            raise ParameterError("give the all-reduce once: allreduce_seconds or gradient_bytes and "
                                 "bandwidth_bytes_per_second (the ring model), not both")
        seconds = check.number("allreduce_seconds", allreduce_seconds, minimum=0.0)
        return replace(params, allreduce_seconds=seconds), {"seconds": seconds, "source": "given",
                                                            "text": f"all-reduce {seconds:g} s (given)"}
    if ring:
        seconds = ring_allreduce_seconds(n, gradient_bytes, bandwidth, latency)
        if params.allreduce_seconds not in (seconds, allreduce_model(n)):  # the operator's own time: not dropped
            raise ParameterError(f"give the all-reduce once: params.allreduce_seconds = {params.allreduce_seconds:g} "
                                 f"s (given) or the ring model's {seconds:.3g} s (gradient_bytes and "
                                 "bandwidth_bytes_per_second), not both")
        text = (f"all-reduce {seconds:.3g} s (ring model: 2 (N-1)/N x {gradient_bytes:.4g} B / "
                f"{bandwidth:.4g} B/s + {latency:g} s)")
        return replace(params, allreduce_seconds=seconds), {
            "seconds": seconds, "source": "ring model", "gradient_bytes": float(gradient_bytes),
            "bandwidth_bytes_per_second": float(bandwidth), "allreduce_latency_seconds": latency,
            "formula": "2 (N - 1) / N * gradient_bytes / bandwidth_bytes_per_second + allreduce_latency_seconds",
            "text": text}
    seconds = params.allreduce_seconds
    if seconds != allreduce_model(n):  # set in the parameters: the operator's
        return params, {"seconds": seconds, "source": "given", "text": f"all-reduce {seconds:g} s (given)"}
    if n > high:
        raise ParameterError(
            f"N = {n:,} is past the range the paper's all-reduce line was fitted on (N = {low}-{high}): give the "
            "measured all-reduce time (allreduce_seconds, --allreduce-seconds) or the gradient's size and the "
            "link bandwidth for the ring model (gradient_bytes and bandwidth_bytes_per_second)")
    where = f"the paper's line at N = {n:,}, fitted on N = {low}-{high}" if n >= low else \
        f"the paper's line clipped at its least value, N = {n:,} below the N = {low}-{high} it was fitted on"
    return params, {"seconds": seconds, "source": "paper line", "text": f"all-reduce {seconds:.3g} s ({where})"}


def compare_parameters(preset="trace-400", groups=None, *, trace=None, restart_seconds=None, save_seconds=None,
                       step_seconds=None, time_scale=1.0, steps=None, window=None, trace_nodes=None, **overrides):
    """The :class:`SimulationParameters` of a verdict: a preset's timings with the operator's own.

    Parameters
    ----------
    preset : str, default "trace-400"
        Preset whose timings are the defaults (:data:`spare_opt.simulation.parameters.PRESETS`).
    groups : int, optional
        ``N``; default: the trace's cluster size (:func:`trace_cluster_size`:
        ``trace_nodes``, else the file's, else the larger of the preset's first ``N``
        and the number of nodes the trace names: 400 for the InfiniteHBD trace, which
        names 231).  Any ``N >= 1``.
    trace : FaultTrace, optional
        The failures; sets the default ``steps``.
    trace_nodes : int, optional
        The traced cluster's size (with ``trace`` only), as in :func:`compare`:
        checked against the nodes the whole trace names, before ``window``.
    restart_seconds, save_seconds : float, optional
        ``T_r`` and ``T_s``.
    step_seconds : float, optional
        Compute of one fault-free step (one stack layer), ``layer_compute_seconds``;
        the all-reduce is added (default: the paper's line in ``N``).
    time_scale : float, default 1.0
        Trace time multiplier (``trace_time_scale``): ``0.1`` replays the trace 10
        times faster (10 times the failure rate).
    window : tuple, optional
        ``(start, end)``: count the default steps on the trace cut to this window
        (:func:`spare_opt.window_trace`), as :func:`compare` with the same window replays it.
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
        # The whole file's cluster, checked even when groups is given: a window names fewer nodes.
        traced = trace_cluster_size(trace, preset, trace_nodes)
        if window is not None:
            from ...traces.window import _window_bounds, window_trace

            trace = window_trace(trace, *_window_bounds(window))
    elif window is not None:
        raise ParameterError("a window cuts a trace: give the trace too")
    if trace is None and trace_nodes is not None:
        raise ParameterError("trace_nodes is the size of a trace's cluster: give the trace too")
    if groups is None:
        groups = get_preset(preset).groups[0] if trace is None else traced
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
        span = trace.observed_days
        if not span > 0:
            raise TraceError(f"{trace.source}: no event after day 0: give the number of steps")
        params = replace(params, steps=steps_in(span * 86400.0 * params.trace_time_scale, params))
    return params

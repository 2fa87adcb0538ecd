"""The verdict's failures: a trace laid end to end, carried over to N groups, and recorded as the verdict used them.

Everything here turns the operator's failures (a fault trace, a fitted failure model)
into what the runs replay or draw from, and writes down what was used
(:func:`_failure_record`, the ``failures`` of :class:`CompareResult` and of a
recommendation file).
"""

from dataclasses import replace

import numpy as np

from ..._core import validation as check
from ..._core.errors import ParameterError, TraceError
from ...traces.json_format import parse_fault_events
from ...traces.trace import FaultTrace
from ..parameters import get_preset

#: Copies of the trace laid end to end; a run that needs longer is unfinished (``TTT/T0 > cycles``).
DEFAULT_CYCLES = 2


#: Most copies of the trace: beyond it a run is far past any useful TTT/T0 and the walks grow without bound.
MAX_CYCLES = 100


def cyclic_trace(trace, cycles):
    """``cycles`` copies of a trace laid end to end, each shifted by the trace's last event time.

    Copy ``c`` has every event time plus ``c * t_last`` (``t_last``: the last event's
    day, the trace's span from its time origin, day 0; for a windowed trace, the
    window's length, :attr:`~spare_opt.traces.trace.FaultTrace.observed_days`); node ids are kept, so a node
    maps to the same DP group in every copy.  Events keep their order (file order
    within a copy, copies in turn).

    Parameters
    ----------
    trace : FaultTrace
    cycles : int
        Number of copies, ``1 <= cycles <= MAX_CYCLES`` (100, as :func:`compare`).

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
        ``cycles < 1`` or ``cycles > MAX_CYCLES``.
    TraceError
        The trace has no event after day 0 (it has no span to repeat).
    """
    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    cycles = check.count("cycles", cycles, maximum=MAX_CYCLES)
    if cycles == 1:
        return trace
    period = trace.observed_days
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
    window = None if trace.window is None else dict(trace.window, length_days=cycles * period)
    return replace(parse_fault_events(doc, source=trace.source), format=trace.format, window=window)


def trace_cluster_size(trace, preset="trace-400", nodes=None):
    """The size of the cluster a trace was recorded on, as the verdict takes it.

    ``nodes`` when given (the operator knows the cluster), else the file's
    ``cluster_nodes`` when it says, else the larger of the preset's first ``N`` and the
    number of nodes the trace names (400 for the InfiniteHBD trace, which names 231 of
    its 400 nodes).  A log that lists only the nodes that failed (a CSV fault log, the
    InfiniteHBD format) cannot say how many nodes never did: give ``nodes``.

    Parameters
    ----------
    trace : FaultTrace
    preset : str, default "trace-400"
    nodes : int, optional
        The traced cluster's size, at least the nodes the trace names.

    Returns
    -------
    int

    Raises
    ------
    ParameterTypeError
        ``nodes`` is not an integer.
    ParameterError
        ``nodes`` is below the number of nodes the trace names, or above
        ``2**31 - 1`` (the most DP groups: the traced cluster's size is the default ``N``).
    """
    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    if nodes is not None:
        nodes = check.count("nodes", nodes, maximum=check.MAX_GROUPS)
        if nodes < trace.n_nodes:
            raise ParameterError(f"nodes must be at least the {trace.n_nodes} nodes the trace names, got {nodes}")
        return nodes
    if trace.cluster_nodes:
        return int(trace.cluster_nodes)
    return max(get_preset(preset).groups[0], trace.n_nodes)


def scaled_trace_model(trace, nodes, groups, time_scale=1.0, *, nodes_per_group=1):
    """A trace's fitted failure model for ``groups`` DP groups, and what was done in words.

    Parameters
    ----------
    trace : FaultTrace
    nodes : int or None
        The traced cluster's size (``None``: :func:`spare_opt.fit_trace`'s default,
        the file's or the nodes the trace names).
    groups : int
        ``N``: each group fails like one node of the traced cluster (the simulation
        scales the model's event gaps by ``nodes / N``, :func:`spare_opt.model_events`).
    time_scale : float, default 1.0
        Multiplies every time of the model (event gaps, window, repairs), as a trace
        replay multiplies the trace's times.
    nodes_per_group : int, default 1
        Nodes of one DP group: a group fails when any of its nodes fails (``g``
        times a traced node's rate, :func:`per_group_model`), its repair ends when
        that node's does.

    Returns
    -------
    model : FailureModel
    scaling : str
        One sentence for the verdict's header.

    Raises
    ------
    ParameterError, TraceError
        As :func:`spare_opt.fit_trace`; ``TraceError`` also when the fit gives no
        failure model (``FitResult.model_error`` says why: no positive repair time...).
    """
    from ...traces.fit import fit_trace

    fit = fit_trace(trace, nodes=nodes)
    model = fit.model
    if model is None:
        raise TraceError(f"{trace.source}: cannot scale the trace to {groups:,} groups: {fit.model_error}; replay it "
                         "unscaled, at the traced cluster's size, instead")
    time_scale = check.number("time_scale", time_scale, above=0.0)
    if time_scale != 1.0:
        model = replace(model, event_mtbf_seconds=model.event_mtbf_seconds * time_scale,
                        repair_median_seconds=model.repair_median_seconds * time_scale,
                        repair_empirical_seconds=tuple(x * time_scale for x in model.repair_empirical_seconds),
                        window_seconds=model.window_seconds * time_scale)
    per_node = model.node_mtbf_seconds / 86400.0
    g = check.count("nodes_per_group", nodes_per_group)
    rate = "" if time_scale == 1.0 else f", times x {time_scale:g}"
    if g == 1:
        each = f"each group fails like one traced node, MTBF {per_node:.3g} days{rate}"
    else:
        each = (f"each group of {g} nodes fails when any of its nodes fails, group MTBF {per_node / g:.3g} days "
                f"(node {per_node:.3g} days{rate})")
    scaling = (f"trace {trace.source} fitted on its {model.cluster_nodes:,} nodes and scaled per node to "
               f"{groups:,} groups ({each}: the cluster fails {g * groups / model.cluster_nodes:.3g}x as often "
               "as the traced one)")
    return per_group_model(model, g), scaling


def per_group_model(model, nodes_per_group):
    """A node's failure model made a DP group's: the group fails when any of its ``g`` nodes fails.

    Failure events come ``g`` times as often (event MTBF and window divided by ``g``),
    each group taking the place of one node of the model; a group's repair ends when
    its failed node's does, so repairs are unchanged.

    Parameters
    ----------
    model : FailureModel
        Per node.
    nodes_per_group : int
        ``g >= 1``.

    Returns
    -------
    FailureModel
        ``model`` itself for ``g = 1``.

    Raises
    ------
    ParameterTypeError, ParameterError
        ``g`` is not an integer ``>= 1``.

    Notes
    -----
    The minimum of ``g`` independent exponential lifetimes of rate ``lambda`` is
    exponential of rate ``g lambda``; for a Weibull shape other than 1 the group's
    gaps keep the node's shape with a ``g`` times smaller mean (an approximation).
    """
    from ...traces.failure_model import FailureModel

    check.instance("model", model, FailureModel, " (spare_opt.FailureModel.load)")
    g = check.count("nodes_per_group", nodes_per_group)
    if g == 1:
        return model
    return replace(model, event_mtbf_seconds=model.event_mtbf_seconds / g, window_seconds=model.window_seconds / g)


def _file_fingerprint(path, fallback):
    """``sha256:`` of a file's bytes (what ``sha256sum`` prints), or of ``fallback()`` bytes without a file."""
    import hashlib
    import os

    if path is not None and os.path.isfile(path):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return "sha256:" + digest.hexdigest()
    return "sha256:" + hashlib.sha256(fallback()).hexdigest()


def _trace_bytes(trace):
    return b"".join(np.ascontiguousarray(array).tobytes() for array in (
        trace.times_days.astype("<f8"), trace.node.astype("<i8"), trace.is_start.astype("u1")))


def _model_bytes(model):
    import json

    doc = {key: value for key, value in model.to_dict().items() if key not in ("derived", "source")}
    return json.dumps(doc, sort_keys=True).encode()


def _model_record(model):
    return {"cluster_nodes": model.cluster_nodes, "event_mtbf_seconds": model.event_mtbf_seconds,
            "node_mtbf_seconds": model.node_mtbf_seconds, "weibull_shape": model.weibull_shape,
            "event_size_probabilities": list(model.event_size_probabilities),
            "repairs": {"distribution": model.repair_distribution, "median_seconds": model.repair_median_seconds,
                        "sigma": model.repair_sigma, "mean_seconds": model.repair_mean_seconds}}


def _failure_record(params, trace, fault_model, fitted_from, failures_path, nodes_per_group, group_mtbf, cycles,
                    semantics):
    """What the verdict's failures were, as the recommendation records them (only what was used)."""
    if trace is not None:
        path = trace.source
        return {"kind": "trace", "path": path, "fingerprint": _file_fingerprint(path, lambda: _trace_bytes(trace)),
                "cluster_nodes": trace.cluster_nodes, "nodes_named": trace.n_nodes, "nodes_per_group": 1,
                "time_scale": params.trace_time_scale, "cycles": cycles,
                "window": None if trace.window is None else dict(trace.window),
                "group_mtbf_seconds": group_mtbf, "repairs": "as traced"}
    if fault_model is None:
        return {"kind": "preset", "system_mtbf_seconds": params.system_mtbf_seconds,
                "group_mtbf_seconds": params.system_mtbf_seconds * params.groups,
                "weibull_shape": params.weibull_shape, "failure_model": params.failure_model,
                "rate_follows_live": params.rate_follows_live, "restart_failures": params.restart_failures}
    if fitted_from is not None:
        path = fitted_from.source
        record = {"kind": "trace fitted and scaled", "path": path,
                  "fingerprint": _file_fingerprint(path, lambda: _trace_bytes(fitted_from))}
    else:
        record = {"kind": "failure model", "path": None if failures_path is None else str(failures_path),
                  "fingerprint": _file_fingerprint(failures_path, lambda: _model_bytes(fault_model)),
                  "description": fault_model.source}
    model = _model_record(fault_model)
    if semantics == "paper":  # no group rejoins: the model's repairs are not used
        del model["repairs"]
    record.update(nodes_per_group=nodes_per_group, group_mtbf_seconds=group_mtbf,
                  node_mtbf_seconds=group_mtbf * nodes_per_group, model=model)
    return record

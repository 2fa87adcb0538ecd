"""Observation windows of a fault trace: the part of a log between two dates, with what is open at each end.

Real logs are excerpts: a log cut to a date window holds faults that began before it
and repairs that end after it.  :func:`window_trace` cuts a trace to ``[start, end]``
with one set of rules, shared by every command that reads a trace (``fit``,
``replay``, ``simulate --trace``, ``compare``, ``topology --from-trace``):

* events outside ``[start, end]`` are dropped;
* a fault open at ``start`` (it began before and had not ended) is taken as already
  down: the windowed trace starts it at the window's first instant, and
  ``window["open_at_start"]`` counts such faults (their start is unknown, so
  :func:`~spare_opt.fit_trace` leaves their repairs and their count out of the fit:
  they are not failures observed in the window);
* a fault open at ``end`` (its repair ends after the window, or never) is
  right-censored there: it has no ``fault_end`` in the windowed trace;
* times are days from ``start`` (day 0 of the windowed trace), and the trace's
  observation lasts the window's length, ``end - start``, even when its last event is
  earlier (:attr:`~spare_opt.traces.trace.FaultTrace.observed_days`): rates are per
  window length.
"""

import math
from dataclasses import replace
from datetime import datetime, timezone

import numpy as np

from .._core import validation as check
from .._core.errors import ParameterError, ParameterTypeError, TraceError
from .trace import FaultTrace

__all__ = ["OPEN_AT_START_CLASS", "window_trace", "window_day", "window_text"]

#: ``fault_type.Class`` of the starts that :func:`window_trace` gives faults open at the window's start.
OPEN_AT_START_CLASS = "open-at-window-start"


def window_day(value, trace, name="window"):
    """A window bound as days from the trace's time origin.

    Parameters
    ----------
    value : float or str
        Days from the trace's origin (day 0), a string of such a number, or an
        ISO-8601 date or timestamp (a CSV log with ISO timestamps keeps its origin,
        ``metadata["time_origin"]``; for other traces, day 0 is taken as the Unix
        epoch only if the trace says so, otherwise an ISO date is refused).
    trace : FaultTrace
    name : str, default "window"
        Name in error messages.

    Returns
    -------
    float

    Raises
    ------
    ParameterTypeError, ParameterError
        Not a number nor a date, or a date for a trace with no time origin.
    """
    if isinstance(value, str):
        try:
            return check.parse_float(value, name)
        except Exception:
            pass
        origin = trace.metadata.get("time_origin") if isinstance(trace.metadata, dict) else None
        if origin is None:
            raise ParameterError(f"{name} {value!r}: a date needs a trace with a time origin (a CSV log with "
                                 "ISO-8601 timestamps); give days from the trace's start instead")
        try:
            when = datetime.fromisoformat(value)
            zero = datetime.fromisoformat(origin)
        except ValueError:
            raise ParameterError(f"{name} {value!r} is neither a number of days nor an ISO-8601 date") from None
        if (when.tzinfo is None) != (zero.tzinfo is None):
            when = when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when
            zero = zero.replace(tzinfo=timezone.utc) if zero.tzinfo is None else zero
        return (when - zero).total_seconds() / 86400.0
    return check.number(name, value)


def _window_bounds(window):
    """The ``window=`` argument of :func:`~spare_opt.fit_trace`, :func:`~spare_opt.simulate` and :func:`~spare_opt.compare` as ``(start, end)``.

    Raises
    ------
    ParameterTypeError
        ``window`` is not a list, tuple or 1-D array (a string, a number, a dict...).
    ParameterError
        It does not hold exactly two bounds.
    """
    if isinstance(window, np.ndarray) and window.ndim == 1:
        window = window.tolist()
    if not isinstance(window, (list, tuple)):
        raise ParameterTypeError(f"window must be a pair (start, end) of days or ISO-8601 dates, got "
                                 f"{type(window).__name__} {window!r}")
    if len(window) != 2:
        raise ParameterError(f"window must be a pair (start, end), got {len(window)} value(s): {list(window)!r}")
    return tuple(window)


def window_trace(trace, start, end):
    """The trace cut to the observation window ``[start, end]`` (module docstring for the rules).

    Parameters
    ----------
    trace : FaultTrace
    start, end : float or str
        Days from the trace's time origin, or ISO-8601 dates (:func:`window_day`);
        ``start < end``.

    Returns
    -------
    FaultTrace
        Times in days from ``start``; its ``window`` is a dict: ``start_day`` and
        ``end_day`` (days of the original trace), ``length_days``, ``open_at_start``
        (faults taken as already down), ``open_at_end`` (faults right-censored at
        ``end``), ``dropped_before`` and ``dropped_after`` (events outside).  Events
        the reader ignored (irregular ones) are left out; the windowed events are read
        again like a file's, so their order and the nodes' numbers follow the usual
        rules (:class:`FaultTrace`).  Format, cluster size, domains and metadata are
        kept.

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a :class:`FaultTrace`, or a bound is not a number or a date.
    ParameterError
        ``start >= end``, or a bound that is not finite.
    TraceError
        The trace is already a window of another (cut the original instead).

    Examples
    --------
    >>> from spare_opt import parse_fault_events
    >>> ev = lambda n, t, k: {"node_id": n, "event_time": t, "event_type": k, "fault_type": {"Class": "GPU"}}
    >>> trace = parse_fault_events([ev("a", 1.0, "fault_start"), ev("a", 3.0, "fault_end"),
    ...                             ev("b", 4.0, "fault_start"), ev("b", 9.0, "fault_end")])
    >>> cut = window_trace(trace, 2.0, 6.0)
    >>> cut.times_days.tolist(), cut.window["open_at_start"], cut.window["open_at_end"], cut.observed_days
    ([0.0, 1.0, 2.0], 1, 1, 4.0)
    """
    from .json_format import parse_fault_events

    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    if trace.window is not None:
        raise TraceError(f"{trace.source}: already a window (days {trace.window['start_day']:g} to "
                         f"{trace.window['end_day']:g}); cut the original trace")
    start = window_day(start, trace, "window start")
    end = window_day(end, trace, "window end")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise ParameterError(f"the window must have finite bounds, got [{start}, {end}]")
    if not start < end:
        raise ParameterError(f"the window must end after it starts, got days {start:g} to {end:g}")
    usable = ~np.asarray(trace.ignored, dtype=bool)
    times = trace.times_days
    down = {}  # node -> fault class of its open fault, before the window
    for k in np.flatnonzero(usable & (times < start)).tolist():
        node = int(trace.node[k])
        if trace.is_start[k]:
            down[node] = trace.fault_class[k]
        else:
            down.pop(node, None)
    events = [{"node_id": trace.node_ids[node], "event_time": 0.0, "event_type": "fault_start",
               "fault_type": {"Class": OPEN_AT_START_CLASS}} for node in sorted(down)]
    inside = np.flatnonzero(usable & (times >= start) & (times <= end))
    for k in inside.tolist():
        events.append({"node_id": trace.node_ids[int(trace.node[k])], "event_time": float(times[k] - start),
                       "event_type": "fault_start" if trace.is_start[k] else "fault_end",
                       "fault_type": {"Class": trace.fault_class[k]}})
    cut = parse_fault_events(events, source=trace.source)
    domains = ()
    if trace.node_domains:
        of = dict(zip(trace.node_ids, trace.node_domains))
        domains = tuple(of.get(node) for node in cut.node_ids)
    window = {
        "start_day": start, "end_day": end, "length_days": end - start,
        "open_at_start": len(down), "open_at_end": int(cut.open_at_end),
        "dropped_before": int(np.count_nonzero(usable & (times < start))),
        "dropped_after": int(np.count_nonzero(usable & (times > end))),
    }
    return replace(cut, format=trace.format, cluster_nodes=trace.cluster_nodes, metadata=dict(trace.metadata),
                   node_domains=domains, window=window)


def window_text(trace):
    """One line saying what a windowed trace holds (``None`` for a whole trace)."""
    w = trace.window
    if w is None:
        return None
    return (f"window: days {w['start_day']:g} to {w['end_day']:g} of the trace ({w['length_days']:g} days): "
            f"{w['dropped_before'] + w['dropped_after']} events outside dropped, {w['open_at_start']} fault(s) open "
            f"at its start taken as already down, {w['open_at_end']} open at its end right-censored")

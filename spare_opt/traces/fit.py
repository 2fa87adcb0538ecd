"""A failure model fitted to a node fault trace: MTBF, bursts, repairs, correlated failures.

:func:`fit_trace` reads a :class:`~spare_opt.traces.trace.FaultTrace` (any format that
:func:`~spare_opt.read_fault_trace` reads) and estimates, with confidence intervals
where they apply (``docs/fit.md`` states every rule):

* the per-node MTBF, the system MTBF of the cluster and the mean time between
  failure *events* (node faults that start together, or within a window);
* the Weibull shape of the gaps between failure events, and whether a shape below 1
  (bursts) is significant;
* the repair-time distribution: median, mean, maximum and a lognormal fit, with
  faults still open at the end of the trace right-censored;
* how often a failure event takes several nodes down at once;
* the time-weighted mean and the peak number of nodes down.

The result carries a :class:`~spare_opt.traces.failure_model.FailureModel`, the few
numbers a simulation needs, whose sampled traces :func:`fit_trace` can fit back.

References
----------
Lawless, *Statistical Models and Methods for Lifetime Data*, 2nd ed., Wiley 2003:
Weibull and lognormal maximum likelihood with censored data (Sec. 5.2, 5.3), profile
likelihood intervals (Sec. 3.3), Kaplan-Meier estimate (Sec. 3.2).
Cox, *Renewal Theory*, Methuen 1962, Sec. 7.2: the variance of the number of
renewals, ``Var N(t) ~ t sigma^2 / mu^3``.
Garwood, "Fiducial limits for the Poisson distribution", Biometrika 28 (1936): the
chi-square interval of a Poisson rate.
"""

import math
import textwrap
from dataclasses import dataclass

import numpy as np

from .._core import validation as check
from .._core.results import Result
from .._core.errors import ParameterError, TraceError
from .trace import FaultTrace
from .failure_model import Estimate, FailureModel, REPAIR_DISTRIBUTIONS, SECONDS_PER_DAY, _plain, _truncated_weibull_mean
from ._fit_repairs import _SAME, _profile_bounds, _repairs
from ._fit_report import _duration, _report_lines

__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_WINDOW_MINUTES",
    "MAX_RESAMPLES",
    "FitResult",
    "fit_trace",
]
#: Most nodes of a cluster (``nodes=``): a count numpy holds as int64 and a float holds; far beyond any cluster.
_MAX_NODES = 2**63 - 1
#: Default window (minutes) within which node faults form one failure event.
DEFAULT_WINDOW_MINUTES = 5.0
#: Default number of bootstrap resamples and Monte-Carlo samples of the goodness-of-fit test.
DEFAULT_RESAMPLES = 999
#: Most bootstrap resamples and Monte-Carlo samples: the goodness-of-fit test refits the
#: lognormal to every sample (about 0.3 ms each), so 100,000 take about half a minute and
#: resolve p-values to 1e-5; a larger request would run for hours.
MAX_RESAMPLES = 100_000

#: Width of the lines of :meth:`FitResult.format_text`.
REPORT_WIDTH = 100


# ----------------------------------------------------------------------------- the fit
@dataclass(frozen=True, eq=False)
class FitResult(Result):
    """What :func:`fit_trace` found in a fault trace.

    Each section is a dict of plain numbers, strings and :class:`Estimate` values
    whose keys carry their unit (``_days``, ``_hours``, ``_seconds``); a value that
    cannot be estimated is ``None`` (NaN inside an :class:`Estimate`), and the
    section's ``"reason"`` says why.

    Attributes
    ----------
    source : str
        The trace's source.
    trace : dict
        What was read and used: events, fault starts and ends, nodes named, the
        starts and ends the reader ignored (irregular events), faults open at the end.
    observation : dict
        ``start_day``, ``end_day``, ``observation_days``, ``time_resolution_days``
        (the smallest gap between two event times) and the rule that chose the window.
    cluster : dict
        ``nodes`` and ``nodes_source`` (``"given"``, ``"file"`` or ``"trace"``) with
        the ``assumption`` in words.
    mtbf : dict
        ``node_faults``, ``failure_events``; ``node_mtbf_days`` (exposure: node
        up-time), ``node_mtbf_calendar_days`` (exposure: nodes x observation),
        ``system_mtbf_hours`` (mean time between node faults in the cluster),
        ``event_mtbf_hours`` (mean time between failure events); the dispersion
        factors that widen the intervals and ``ci_method``.
    interarrival : dict
        Weibull fit of the gaps between failure events, truncated at the window
        (``truncated_at_hours``): ``weibull_shape``, ``weibull_scale_hours``,
        ``weibull_mean_gap_hours`` (of the fit) and ``mean_gap_hours`` (observed), the
        likelihood-ratio test of shape 1 (``likelihood_ratio``,
        ``p_value_shape_below_1``, ``bursty``), ``lag1_rank_correlation`` and its
        ``lag1_p_value``.
    repairs : dict
        ``completed``, ``open``, ``below_resolution`` (zero-length repairs),
        ``median_hours``, ``mean_hours``, ``max_hours``, ``longest_open_hours``,
        ``lognormal_median_hours`` (and ``lognormal_median_seconds``),
        ``lognormal_sigma``, ``lognormal_mean_hours``, ``lognormal_ci_method``,
        ``lognormal_fit_p_value`` (Anderson-Darling) and ``lognormal_fit_test``.
    correlation : dict
        ``window_minutes``; ``same_instant`` and ``within_window``: events,
        multi-node events and their fraction, node faults in them and their
        fraction, the largest event (``largest_nodes``, ``largest_day``);
        ``event_size_counts``: events within the window that take 1, 2, ... nodes.
    nodes_down : dict
        ``mean`` (time-weighted), ``mean_fraction``, ``peak``, ``peak_day``,
        ``fraction_of_time_any_down``.
    node_counts : dict
        How faults spread over nodes: ``nodes_failed``, ``nodes_never_failed``,
        ``expected_never_failed_if_uniform``, ``max_faults_one_node``,
        ``dispersion_index`` and its ``p_value`` (Poisson with equal rates).
    model : FailureModel or None
        The fitted failure model, ``None`` when a part of it cannot be estimated.
    model_error : str or None
        Why there is no model.
    notes : tuple of str
        What was assumed or done with irregular data, one line each.
    confidence : float
        Level of every interval.
    """

    source: str
    trace: dict
    observation: dict
    cluster: dict
    mtbf: dict
    interarrival: dict
    repairs: dict
    correlation: dict
    nodes_down: dict
    node_counts: dict
    model: FailureModel | None
    model_error: str | None
    notes: tuple
    confidence: float

    def to_dict(self):
        """dict: every section as JSON-ready values (:class:`Estimate` as ``{"value", "ci"}``)."""
        return {
            "source": self.source,
            "confidence": self.confidence,
            "trace": _plain(self.trace),
            "observation": _plain(self.observation),
            "cluster": _plain(self.cluster),
            "mtbf": _plain(self.mtbf),
            "interarrival": _plain(self.interarrival),
            "repairs": _plain(self.repairs),
            "correlation": _plain(self.correlation),
            "nodes_down": _plain(self.nodes_down),
            "node_counts": _plain(self.node_counts),
            "model": None if self.model is None else self.model.to_dict(),
            "model_error": self.model_error,
            "notes": list(self.notes),
        }

    def format_text(self):
        """str: a readable report for a terminal (units chosen per value, lines wrapped at 100 characters)."""
        lines = []
        for line in _report_lines(self):
            indent = " " * (len(line) - len(line.lstrip(" ")))
            lines += textwrap.wrap(line, width=REPORT_WIDTH, subsequent_indent=indent + "    ",
                                   break_on_hyphens=False) or [""]
        return "\n".join(lines)


def fit_trace(trace, *, nodes=None, window_minutes=DEFAULT_WINDOW_MINUTES, start_day=None, end_day=None,
              repair_distribution="empirical", confidence=0.95, resamples=DEFAULT_RESAMPLES, seed=0, window=None):
    """Fit a failure model to a node fault trace.

    Parameters
    ----------
    trace : FaultTrace
        From :func:`~spare_opt.read_fault_trace`; the events it flags ``ignored``
        (a start for a node already down, an end for a node that is up) are left out.
    nodes : int, optional
        Cluster size.  Default: the file's (``FaultTrace.cluster_nodes``), else the
        number of nodes the trace names, which undercounts a cluster whose healthy
        nodes are not listed (the InfiniteHBD trace names 231 of its 400 nodes); the
        result says which was used.  Must be at least the number of nodes named (by
        the whole trace, before ``window``: the cluster is the file's, a window of it
        names fewer nodes), at most ``2**63 - 1``.
    window_minutes : float, default 5.0
        Node faults that start within this many minutes of the first fault of an
        event join that event (``0``: only faults at the same instant).
    start_day, end_day : float, optional
        Observation window.  Default: from day 0 (or the first event, if earlier) to
        the last event.  ``start_day`` must not be after the first event nor
        ``end_day`` before the last.
    repair_distribution : {"empirical", "lognormal"}, default "empirical"
        What the fitted :class:`FailureModel` draws repairs from.
    confidence : float, default 0.95
        Level of every interval, in ``(0, 1)``.
    resamples : int, default 999
        Bootstrap resamples (interval of the mean repair time) and Monte-Carlo samples
        of the lognormal goodness-of-fit test, ``99 <= resamples <= MAX_RESAMPLES``
        (100,000).
    seed : int, default 0
        Seed of the bootstrap and the Monte-Carlo test; equal seeds give equal results.
    window : tuple, optional
        ``(start, end)``, days from the trace's origin or ISO-8601 dates: fit the
        trace cut to this observation window (:func:`spare_opt.window_trace`): events
        outside are dropped, faults open at ``start`` are taken as already down (their
        repairs and their count left out: their start is unknown), faults open at
        ``end`` are right-censored there, and the observation lasts ``end - start``.
        Not with ``start_day`` / ``end_day``.  A trace already cut by
        :func:`~spare_opt.window_trace` is fitted on its window the same way.

    Returns
    -------
    FitResult

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a :class:`FaultTrace`, or an option has the wrong type.
    ParameterError
        An option is out of range, ``nodes`` is below the number of nodes the trace
        names or above ``2**63 - 1``, or the window does not hold every event.
    TraceError
        The trace has no usable ``fault_start`` (empty, only ends...), its file
        says it has fewer nodes than it names, or its observation is so long (about
        ``1e300`` days) that its times in seconds overflow a float.

    Notes
    -----
    * **Events.** A failure event is a set of usable fault starts: the first start
      not yet in an event opens one, and every start within ``window_minutes`` of it
      joins (anchored windows, so an event never spans more than the window).  Its
      size is the number of distinct nodes.  ``same_instant`` uses window 0.
    * **MTBF.** Count over exposure: ``node_mtbf_days`` = node up-time / node faults
      (a node that is down cannot fail); ``node_mtbf_calendar_days`` = nodes x
      observation / node faults; ``system_mtbf_hours`` = observation / node faults;
      ``event_mtbf_hours`` = observation / events.  Intervals: Garwood's chi-square
      interval of a Poisson count applied to the effective count ``n / D``, with
      ``D`` the dispersion of the count from renewal theory (Cox 1962): ``D = CV^2``
      of the gaps for events, ``D = Var(X)/E(X) + E(X) CV^2`` for node faults with
      ``X`` the faults per event (a compound renewal process).  ``D`` is taken as
      at least 1 (an interval is never narrower than the Poisson one), and is 1
      when there are fewer than two gaps.
    * **Weibull.** Two events are always more than a window apart, so the gaps
      between consecutive events are fitted by maximum likelihood as a Weibull
      truncated below at the window: for a shape ``k`` the best scale is
      ``lambda^k = mean(x^k - w^k)`` and the shape maximises the profile likelihood,
      searched from ``scipy.stats.weibull_min.fit`` (location 0), which is the
      answer for window 0.  Interval of the shape by profile likelihood (Lawless
      2003, Sec. 3.3): the shapes whose profile log-likelihood is within
      ``chi2_1(confidence) / 2`` of the maximum.  Shape < 1 is tested against the
      exponential (shape 1) by the signed root of the likelihood ratio, one-sided.
      The renewal model assumes independent gaps: ``lag1_rank_correlation``
      (Spearman) checks that.
    * **Repairs.** A fault's repair time runs from its start to the end that closes
      it; a fault still open at ``end_day`` is right-censored there.  Zero-length
      repairs (start and end at the same instant) are below the trace's time
      resolution and left-censored at it in the lognormal fit.  Median: the sample
      median with its distribution-free order-statistic interval, or the
      Kaplan-Meier median with log-log bands when repairs are censored.  Mean:
      sample mean with a BCa bootstrap interval (with open faults counted up to
      ``end_day``, a lower bound).  Lognormal: maximum likelihood
      (``scipy.stats.lognorm.fit`` without censoring; with it, the likelihood of
      ``scipy.stats.lognorm.fit(scipy.stats.CensoredData(...))`` maximised by
      Nelder-Mead on a vectorised objective, which is faster than scipy's generic
      optimiser; tests check both agree); intervals exact (Student t for the
      log-median, chi-square for sigma) without censoring, by profile likelihood
      with it.  Goodness of fit: Anderson-Darling
      with Monte-Carlo p-value (``scipy.stats.goodness_of_fit``) on the positive
      durations, when none is right-censored.
    * **Nodes down.** A node is down from a usable start to the end that closes it
      (or ``end_day``); the count after every instant is held until the next;
      the mean is time-weighted over the window and the peak is taken after each
      instant (not inside one).

    Examples
    --------
    >>> from spare_opt import parse_fault_events
    >>> events = [{"node_id": n, "event_time": t, "event_type": k, "fault_type": {"Class": "GPU"}}
    ...           for n, t, k in [("a", 1.0, "fault_start"), ("b", 1.0, "fault_start"),
    ...                           ("a", 1.5, "fault_end"), ("b", 3.0, "fault_end"),
    ...                           ("a", 4.0, "fault_start"), ("a", 4.25, "fault_end")]]
    >>> result = fit_trace(parse_fault_events(events), nodes=4, resamples=99)
    >>> result.mtbf["system_mtbf_hours"].value / 24   # 4.25 days, 3 node faults
    1.4166666666666667
    >>> result.correlation["same_instant"]["multi_node_events"], result.nodes_down["peak"]
    (1, 2)
    """
    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    window_minutes = check.number("window_minutes", window_minutes, minimum=0.0)
    confidence = check.number("confidence", confidence, above=0.0, maximum=1.0)
    if confidence == 1.0:
        raise ParameterError("confidence must be < 1, got 1.0")
    resamples = check.integer("resamples", resamples, minimum=99, maximum=MAX_RESAMPLES)
    seed = check.seed(seed)
    repair_distribution = check.choice("repair_distribution", repair_distribution, REPAIR_DISTRIBUTIONS)
    notes = []
    cluster = _cluster_size(trace, nodes)  # the whole trace's cluster: a window names fewer nodes
    trace, carried = _cut_to_window(trace, window, start_day, end_day)

    usable = ~np.asarray(trace.ignored, dtype=bool)
    is_start = np.asarray(trace.is_start, dtype=bool)
    times = np.asarray(trace.times_days, dtype=np.float64)
    start_mask = is_start & usable & ~carried
    n_faults = int(start_mask.sum())
    ignored_starts = int((is_start & ~usable).sum())
    ignored_ends = int((~is_start & ~usable).sum())
    if n_faults == 0:
        what = "an empty trace" if trace.n_events == 0 else (
            f"{trace.n_starts} fault_start and {trace.n_ends} fault_end, {ignored_starts + ignored_ends} ignored")
        raise TraceError(f"{trace.source}: no usable fault_start to fit ({what})")

    start, end, window_rule = _observation_window(trace, times, start_day, end_day, notes)
    observation = end - start
    distinct = np.unique(times)
    resolution = float(np.diff(distinct).min()) if distinct.size > 1 else math.nan

    if not math.isfinite(observation * SECONDS_PER_DAY * cluster["nodes"]):
        # Rates and repairs are figured in seconds, up-time over every node: they would overflow.
        raise TraceError(f"{trace.source}: the observation of {observation:.3g} days is too long to fit (its "
                         "node-seconds overflow a float); times are days from the start of the trace")

    # Faults: each usable start with the usable end that closes it (faults open at the
    # window's start first: left out, their start is unknown).
    fault_start, fault_end = _pair_faults(trace, usable)
    fault_start, fault_end = fault_start[int(carried.sum()):], fault_end[int(carried.sum()):]
    open_faults = int(np.isnan(fault_end).sum())
    if ignored_starts or ignored_ends:
        notes.append(_ignored_note(trace, ignored_starts, ignored_ends))

    events = _events(times[start_mask], np.asarray(trace.node)[start_mask], window_minutes / 1440.0)
    instants = _events(times[start_mask], np.asarray(trace.node)[start_mask], 0.0)
    down = _nodes_down(times, is_start, usable, start, end, cluster["nodes"])

    mtbf = _mtbf(n_faults, events, observation, cluster["nodes"], down, confidence)
    interarrival = _interarrival(events, window_minutes / 1440.0, confidence)
    repairs = _repairs(fault_start, fault_end, end, resolution, confidence, resamples, seed)
    correlation = {
        "window_minutes": window_minutes,
        "same_instant": _correlation_summary(instants),
        "within_window": _correlation_summary(events),
        "event_size_counts": np.bincount(events["sizes"])[1:].tolist(),
    }
    node_counts = _node_counts(trace, start_mask, cluster["nodes"])
    if repairs["below_resolution"]:
        notes.append(f"{repairs['below_resolution']} repair(s) of length 0 (start and end at the same instant, below "
                     f"the time resolution {_duration(resolution * SECONDS_PER_DAY)}): left-censored at the resolution "
                     "in the lognormal fit")
    if open_faults:
        notes.append(f"{open_faults} fault(s) still open at the end of the window: right-censored at day {end:g}")

    model, model_error = _build_model(trace, cluster["nodes"], events, observation, interarrival, repairs,
                                      repair_distribution, window_minutes, fault_start, fault_end)
    return FitResult(
        source=trace.source,
        trace=_trace_section(trace, ignored_starts, ignored_ends, n_faults, open_faults),
        observation={
            "start_day": start,
            "end_day": end,
            "observation_days": observation,
            "time_resolution_days": resolution,
            "rule": window_rule,
        },
        cluster=cluster,
        mtbf=mtbf,
        interarrival=interarrival,
        repairs=repairs,
        correlation=correlation,
        nodes_down=down,
        node_counts=node_counts,
        model=model,
        model_error=model_error,
        notes=tuple(notes),
        confidence=confidence,
    )


# ----------------------------------------------------------------------------- parts of the fit
def _cut_to_window(trace, window, start_day, end_day):
    """The trace cut to ``window`` (if given) and the mask of the starts of faults open at the window's start."""
    if window is not None:
        if start_day is not None or end_day is not None:
            raise ParameterError("give the observation window once: window, or start_day / end_day")
        from .window import _window_bounds, window_trace

        trace = window_trace(trace, *_window_bounds(window))
    carried = np.zeros(trace.n_events, dtype=bool)  # starts of faults open at the window's start
    if trace.window is not None:
        if start_day is not None or end_day is not None:
            raise ParameterError("the trace is cut to a window already: its bounds are the observation's")
        carried[:trace.window["open_at_start"]] = True  # they come first, at day 0
    return trace, carried


def _observation_window(trace, times, start_day, end_day, notes):
    """``(start, end, rule)`` of the observation in days, the rule in words; notes what a cut window dropped."""
    first, last = float(times[0]), float(times[-1])
    if trace.window is not None:
        w = trace.window
        start, end = 0.0, float(w["length_days"])
        window_rule = (f"the window given: days {w['start_day']:g} to {w['end_day']:g} of the trace (times below are "
                       f"days from its start)")
        if w["open_at_start"]:
            notes.append(f"{w['open_at_start']} fault(s) open at the window's start taken as already down: their "
                         "repairs and their count are left out (their start is unknown)")
        if w["dropped_before"] or w["dropped_after"]:
            notes.append(f"{w['dropped_before']} event(s) before the window and {w['dropped_after']} after it "
                         "dropped")
    elif start_day is None:
        start, window_rule = min(0.0, first), "from day 0, the trace's time origin, to the last event"
        if first < 0.0:
            window_rule = "from the first event (before day 0) to the last event"
    else:
        start = check.number("start_day", start_day)
        if start > first:
            raise ParameterError(f"start_day must not be after the first event (day {first}), got {start}")
        window_rule = "from start_day to the last event"
    if trace.window is not None:
        pass
    elif end_day is None:
        end = last
    else:
        end = check.number("end_day", end_day)
        if end < last:
            raise ParameterError(f"end_day must not be before the last event (day {last}), got {end}")
        window_rule = window_rule.replace("the last event", "end_day")
    return start, end, window_rule


def _ignored_note(trace, ignored_starts, ignored_ends):
    """The note on the starts and ends the reader flagged as ignored."""
    # a CSV row whose start is ignored is ignored whole: its end is not "an end for a node that is up"
    without_start = min(ignored_ends, trace.irregular_counts()["end-without-start"])
    of_rows = ignored_ends - without_start
    return (f"{ignored_starts} fault_start and {ignored_ends} fault_end ignored as the reader flagged them "
            f"(a start for a node already down; {without_start} end(s) for a node that is up"
            + (f", {of_rows} end(s) of rows whose start was ignored" if of_rows else "") + ")")


def _trace_section(trace, ignored_starts, ignored_ends, n_faults, open_faults):
    """The ``trace`` section of :class:`FitResult`: what was read and used."""
    return {
        "format": trace.format,
        "events": trace.n_events,
        "fault_starts": trace.n_starts,
        "fault_ends": trace.n_ends,
        "nodes_named": trace.n_nodes,
        "ignored_starts": ignored_starts,
        "ignored_ends": ignored_ends,
        "node_faults": n_faults,
        "open_at_end": open_faults,
    }


def _cluster_size(trace, nodes):
    """Cluster size, where it came from, and the assumption in words."""
    named = trace.n_nodes
    if nodes is not None:
        nodes = check.count("nodes", nodes, maximum=_MAX_NODES)
        if nodes < named:
            raise ParameterError(f"nodes must be at least the {named} nodes the trace names, got {nodes}")
        said = "" if trace.cluster_nodes is None else f"; the file says {trace.cluster_nodes}"
        return {"nodes": nodes, "nodes_source": "given",
                "assumption": f"{nodes} nodes, as given ({named} named in the trace{said})"}
    if trace.cluster_nodes is not None:
        if trace.cluster_nodes < named:
            raise TraceError(f"{trace.source}: the file says the cluster has {trace.cluster_nodes} nodes "
                             f"but its events name {named}")
        return {"nodes": int(trace.cluster_nodes), "nodes_source": "file",
                "assumption": f"{trace.cluster_nodes} nodes, as the file says ({named} named in its events)"}
    return {"nodes": named, "nodes_source": "trace",
            "assumption": f"{named} nodes, assumed: the nodes named in the trace (the file does not give the cluster "
                          "size; a trace that lists only nodes that failed undercounts it: give nodes= / --nodes)"}


def _pair_faults(trace, usable):
    """Each usable fault start with the usable end that closes it (NaN while open), in time order of starts."""
    opened = {}
    starts, ends = [], []
    times = trace.times_days
    for k in np.flatnonzero(usable).tolist():
        node = int(trace.node[k])
        if trace.is_start[k]:
            opened[node] = len(starts)
            starts.append(float(times[k]))
            ends.append(math.nan)
        elif node in opened:
            ends[opened.pop(node)] = float(times[k])
        else:  # read_fault_trace flags such an end as ignored; another producer of FaultTrace might not
            raise TraceError(f"{trace.source}: fault_end at day {float(times[k])} for node {trace.node_ids[node]}, "
                             "which is not down, is not flagged as ignored")
    return np.asarray(starts), np.asarray(ends)


def _events(start_days, start_nodes, window_days):
    """Group fault starts (sorted by time) into failure events with anchored windows.

    Returns a dict of arrays: ``times`` (first start of each event, days), ``faults``
    (starts in the event) and ``sizes`` (distinct nodes).
    """
    count = start_days.size
    bounds = [0]
    while bounds[-1] < count:
        first = bounds[-1]
        bounds.append(int(np.searchsorted(start_days, start_days[first] + window_days, side="right")))
    bounds = np.asarray(bounds)
    faults = np.diff(bounds)
    sizes = faults.copy()
    for e in np.flatnonzero(faults > 1).tolist():  # a node can fail twice in one window
        sizes[e] = np.unique(start_nodes[bounds[e]:bounds[e + 1]]).size
    return {"times": start_days[bounds[:-1]], "faults": faults, "sizes": sizes}


def _correlation_summary(events):
    sizes, faults = events["sizes"], events["faults"]
    multi = sizes > 1
    largest = int(np.argmax(sizes))
    return {
        "events": int(sizes.size),
        "multi_node_events": int(multi.sum()),
        "multi_node_event_fraction": float(multi.mean()),
        "node_faults": int(faults.sum()),
        "node_faults_in_multi_node_events": int(faults[multi].sum()),
        "node_fault_fraction_in_multi_node_events": float(faults[multi].sum() / faults.sum()),
        "largest_nodes": int(sizes[largest]),
        "largest_day": float(events["times"][largest]),
    }


def _nodes_down(times, is_start, usable, start, end, nodes):
    """Time-weighted mean and peak of the number of nodes down over ``[start, end]``."""
    delta = np.where(is_start, 1, -1) * usable
    count = np.cumsum(delta)
    last_of_instant = np.concatenate((np.flatnonzero(np.diff(times)), [times.size - 1]))
    level = count[last_of_instant]  # nodes down after each instant
    at = times[last_of_instant]
    held = np.diff(np.concatenate((at, [end])))  # each level holds until the next instant (the last until end)
    observation = end - start
    peak_index = int(np.argmax(level))
    result = {"peak": int(level[peak_index]), "peak_day": float(at[peak_index]), "area_node_days": float(level @ held)}
    if observation > 0:
        mean = result["area_node_days"] / observation
        result.update(mean=mean, mean_fraction=mean / nodes,
                      fraction_of_time_any_down=float(held[level > 0].sum() / observation))
    else:
        result.update(mean=math.nan, mean_fraction=math.nan, fraction_of_time_any_down=math.nan,
                      reason="the observation window has length 0")
    return result


def _dispersions(events):
    """Dispersion of the event count (``CV^2`` of gaps) and of the node-fault count (compound renewal)."""
    gaps = np.diff(events["times"])
    if gaps.size < 2 or gaps.mean() <= 0:
        return 1.0, 1.0, "Poisson (chi-square, Garwood); fewer than 2 gaps between events to measure bursts"
    cv2 = float(gaps.var(ddof=1) / gaps.mean() ** 2)
    faults = events["faults"].astype(np.float64)
    fault_dispersion = float(faults.var(ddof=1) / faults.mean() + faults.mean() * cv2)
    # Regular (under-dispersed) failures are implausible and D from a few gaps is noisy:
    # an interval is never narrower than the Poisson one.
    cv2, fault_dispersion = max(1.0, cv2), max(1.0, fault_dispersion)
    method = ("Poisson chi-square (Garwood) on the effective count n / D, D from renewal theory (Cox 1962), "
              f"at least 1: D = {cv2:.3g} for events (CV^2 of the gaps), {fault_dispersion:.3g} for node faults")
    return cv2, fault_dispersion, method


def _count_interval(exposure, count, dispersion, confidence):
    """Mean time between events (``exposure / count``) with a quasi-Poisson chi-square interval."""
    from scipy import stats

    if exposure <= 0:  # no up-time at all (a node down for the whole window): the MTBF is 0
        return Estimate(0.0, 0.0, 0.0)
    alpha = 1.0 - confidence
    effective, exposure_eff = count / dispersion, exposure / dispersion
    rate_low = stats.chi2.ppf(alpha / 2, 2 * effective) / (2 * exposure_eff)
    rate_high = stats.chi2.ppf(1 - alpha / 2, 2 * effective + 2) / (2 * exposure_eff)
    return Estimate(exposure / count, 1.0 / rate_high, 1.0 / rate_low if rate_low > 0 else math.inf)


def _mtbf(n_faults, events, observation, nodes, down, confidence):
    event_dispersion, fault_dispersion, method = _dispersions(events)
    result = {"node_faults": n_faults, "failure_events": int(events["times"].size),
              "dispersion_events": event_dispersion, "dispersion_node_faults": fault_dispersion,
              "ci_method": method}
    if observation <= 0:
        none = Estimate(math.nan)
        result.update(node_mtbf_days=none, node_mtbf_calendar_days=none, system_mtbf_hours=none,
                      event_mtbf_hours=none, reason="the observation window has length 0")
        return result
    uptime = nodes * observation - down["area_node_days"]
    result.update(
        node_uptime_days=uptime,
        node_mtbf_days=_count_interval(uptime, n_faults, fault_dispersion, confidence),
        node_mtbf_calendar_days=_count_interval(nodes * observation, n_faults, fault_dispersion, confidence),
        system_mtbf_hours=_count_interval(observation, n_faults, fault_dispersion, confidence).scaled(24.0),
        event_mtbf_hours=_count_interval(observation, events["times"].size, event_dispersion, confidence).scaled(24.0),
    )
    return result


def _weibull_profile(gaps, window):
    """Profile log-likelihood of the Weibull shape, scale maximised out, for gaps truncated at ``window``.

    With gaps ``x_i > w`` drawn from a Weibull ``(k, lambda)`` conditioned on
    ``X > w``, the scale that maximises the likelihood for a given shape is
    ``lambda^k = mean(x^k - w^k)`` and the log-likelihood is then
    ``n log k + (k - 1) sum(log x) - n log mean(x^k - w^k) - n`` (for ``w = 0``, the
    textbook profile, Lawless 2003, Sec. 5.2).  Computed in logs (``logsumexp``).

    Returns
    -------
    profile : callable
        ``profile(k)``, the profile log-likelihood.
    scale : callable
        ``scale(k)``, the maximising scale.
    """
    from scipy.special import logsumexp

    log_x = np.log(gaps)
    total = float(log_x.sum())
    n = log_x.size
    log_w = math.log(window) if window > 0 else -math.inf

    def log_mean_power(shape):  # log mean(x^k - w^k)
        with np.errstate(divide="ignore"):
            terms = shape * log_x + np.log(-np.expm1(shape * (log_w - log_x)))
        return float(logsumexp(terms)) - math.log(n)

    def profile(shape):
        if not shape > 0:  # exp(log k) underflowed far out in a search
            return -math.inf
        return n * math.log(shape) + (shape - 1.0) * total - n * log_mean_power(shape) - n

    def scale(shape):
        return math.exp(log_mean_power(shape) / shape)

    return profile, scale


def _interarrival(events, window_days, confidence):
    from scipy import optimize, stats

    gaps_days = np.diff(events["times"])
    result = {"events": int(events["times"].size), "gaps": int(gaps_days.size)}
    none = Estimate(math.nan)
    empty = dict(weibull_shape=none, weibull_scale_hours=none, weibull_mean_gap_hours=math.nan,
                 mean_gap_hours=math.nan, likelihood_ratio=math.nan, p_value_shape_below_1=math.nan,
                 bursty=None, lag1_rank_correlation=math.nan, lag1_p_value=math.nan)
    if gaps_days.size < 2:
        result.update(empty, reason=f"the Weibull fit needs at least 2 gaps between failure events, "
                                    f"got {gaps_days.size}")
        return result
    if np.ptp(np.log(gaps_days)) <= _SAME:
        # Equal gaps have no maximum-likelihood Weibull shape: the likelihood grows without
        # bound as the shape rises (the distribution tends to a point mass at the gap).
        result.update(empty, reason=f"all {gaps_days.size:,} gaps between failure events are equal "
                                    f"({_duration(float(gaps_days[0]) * SECONDS_PER_DAY)}, to a relative {_SAME:g}): "
                                    "the Weibull likelihood has no maximum (it grows without bound as the shape "
                                    "rises), so the fit needs gaps that differ")
        return result
    gaps, window = gaps_days * 24.0, window_days * 24.0  # hours
    shape, _, scale = stats.weibull_min.fit(gaps, floc=0)
    shape, scale = float(shape), float(scale)
    profile, profile_scale = _weibull_profile(gaps, window)
    if window > 0:  # the likelihood truncated at the window, maximised from the untruncated fit
        best = optimize.minimize_scalar(lambda log_k: -profile(math.exp(log_k)),
                                        bracket=(math.log(shape) - 0.1, math.log(shape)))
        shape = math.exp(float(best.x))
        scale = profile_scale(shape)
    top = profile(shape)
    log_low, log_high = _profile_bounds(lambda log_k: profile(math.exp(log_k)), math.log(shape), top, confidence,
                                        step=1.0 / math.sqrt(gaps.size))
    ratio = max(0.0, 2.0 * (top - profile(1.0)))
    signed_root = math.copysign(math.sqrt(ratio), shape - 1.0)
    p_below = float(stats.norm.cdf(signed_root))
    result.update(
        weibull_shape=Estimate(shape, math.exp(log_low), math.exp(log_high)),
        weibull_scale_hours=Estimate(scale),
        weibull_mean_gap_hours=_truncated_weibull_mean(shape, scale, window),
        mean_gap_hours=float(gaps.mean()),
        truncated_at_hours=window,
        likelihood_ratio=ratio,
        p_value_shape_below_1=p_below,
        bursty=bool(shape < 1.0 and p_below < 1.0 - confidence),
    )
    if gaps.size >= 4 and np.unique(gaps[:-1]).size > 1 and np.unique(gaps[1:]).size > 1:
        rho = stats.spearmanr(gaps[:-1], gaps[1:])
        result.update(lag1_rank_correlation=float(rho.statistic), lag1_p_value=float(rho.pvalue))
    else:
        result.update(lag1_rank_correlation=math.nan, lag1_p_value=math.nan)
    return result


def _node_counts(trace, start_mask, nodes):
    from scipy import stats

    # Counts of the named nodes only; the other nodes of the cluster have 0 (no array of
    # the cluster's size, which --nodes could make huge).
    counts = np.bincount(np.asarray(trace.node)[start_mask], minlength=trace.n_nodes)
    faults = int(counts.sum())
    failed = int((counts > 0).sum())
    mean = faults / nodes
    result = {
        "nodes_failed": failed,
        "nodes_never_failed": nodes - failed,
        "expected_never_failed_if_uniform": nodes * math.exp(-mean),
        "max_faults_one_node": int(counts.max()),
    }
    if nodes >= 2:
        squares = int((counts.astype(np.int64) ** 2).sum())
        index = (squares - faults * mean) / (nodes - 1) / mean  # sample variance / mean
        result.update(dispersion_index=index, p_value=float(stats.chi2.sf(index * (nodes - 1), nodes - 1)))
    else:
        result.update(dispersion_index=math.nan, p_value=math.nan)
    return result


def _build_model(trace, nodes, events, observation, interarrival, repairs, repair_distribution, window_minutes,
                 fault_start, fault_end):
    """The :class:`FailureModel` of the fit, or ``(None, why)``."""
    missing = []
    if observation <= 0:
        missing.append("the event MTBF (the observation window has length 0)")
    if not math.isfinite(interarrival["weibull_shape"].value):
        missing.append(f"the Weibull shape ({interarrival['reason']})")
    if "lognormal_median_seconds" not in repairs:
        missing.append(f"the repair distribution ({repairs.get('reason')})")
    if missing:
        return None, "no failure model: cannot estimate " + "; ".join(missing)
    sizes = np.bincount(events["sizes"])[1:]
    closed = ~np.isnan(fault_end)
    try:
        model = FailureModel(
            cluster_nodes=nodes,
            event_mtbf_seconds=observation * SECONDS_PER_DAY / events["times"].size,
            weibull_shape=interarrival["weibull_shape"].value,
            repair_median_seconds=repairs["lognormal_median_seconds"],
            repair_sigma=repairs["lognormal_sigma"].value,
            event_size_probabilities=tuple((sizes / sizes.sum()).tolist()),
            repair_distribution=repair_distribution,
            repair_empirical_seconds=tuple(((fault_end[closed] - fault_start[closed]) * SECONDS_PER_DAY).tolist()),
            window_seconds=window_minutes * 60.0,
            source=trace.source,
        )
    except ParameterError as exc:  # a few events packed into a short window: mean gap below the window
        return None, f"no failure model: {exc}"
    return model, None

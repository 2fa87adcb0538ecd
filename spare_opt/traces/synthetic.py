"""Synthetic fault traces with the shape of real ones: bursts, repairs, correlated failures.

:func:`synthetic_fault_trace` draws a ``spare-failure-trace`` document (the events of
:mod:`spare_opt.traces.json_format`): incidents as a Weibull renewal process, single
nodes or correlated bursts, nodes drawn with a Gamma frailty, log-normal repair times.  Used for the generated instances, the tests and the benchmarks.
"""

import math

import numpy as np

from .._core import validation as check
from .._core.stats import weibull_renewals
from .._core.errors import ParameterError
from .trace import END, START, TRACE_FORMAT, TRACE_VERSION

__all__ = [
    "synthetic_fault_trace",
]


# -------------------------------------------------------------------- generated traces
#: Most incidents a generated trace may expect (:func:`synthetic_fault_trace`).
MAX_SYNTHETIC_INCIDENTS = 10**6
#: Most nodes of a generated trace.
MAX_SYNTHETIC_NODES = 10**6
#: Most node-incident pairs of a generated trace (each incident looks at every node).
MAX_SYNTHETIC_WORK = 2 * 10**9
#: Sound range of the gamma frailty shape: below it some weights underflow to 0 (a node
#: that can never fail: P = exp(-744 a) per node, 7e-17 at the bound); above it every
#: node has the same weight to 0.1% and the sum of weights could overflow.
FRAILTY_SHAPE_RANGE = (0.05, 1e6)
#: Log-normal repair draws must stay inside the float range: ``|ln median| + 9 sigma <= 709``.
_LOG_FLOAT_MAX = 709.0


def synthetic_fault_trace(nodes=400, days=349.0, seed=0, incidents_per_day=1.45,
                          weibull_shape=0.78, burst_probability=0.08, burst_mean=3.0,
                          repair_median_days=1.0, repair_sigma=1.5, frailty_shape=0.6):
    """Generate a node fault trace that looks like the InfiniteHBD one.

    Incidents arrive as a renewal process with Weibull inter-arrival times (shape
    ``weibull_shape`` < 1 gives bursts, as in the paper's simulation); an incident
    strikes one node, or with probability ``burst_probability`` a correlated burst of
    ``1 + Poisson(burst_mean)`` nodes at the same instant.  Only nodes that are up
    can fail; each fault lasts a log-normal repair time, and a repair that would end
    after ``days`` is left out (the fault is still open at the end of the trace).
    Times are rounded to 1e-4 days like the real trace.  The result is regular (no
    irregular events).

    Parameters
    ----------
    nodes : int, default 400
        Cluster size (number of nodes), ``1 <= nodes <= 10**6``.
    days : float, default 349.0
        Length of the trace in days, finite and ``> 0``.
    seed : int, default 0
        Seed of ``numpy.random.default_rng``; equal arguments give equal traces.
    incidents_per_day : float, default 1.45
        Mean incident rate (1/day), finite and ``> 0``.
    weibull_shape : float, default 0.78
        Shape of the Weibull inter-arrival times (paper, Sec. 6: 0.78), finite and
        ``> 0``.
    burst_probability : float, default 0.08
        Probability that an incident is a correlated burst, in ``[0, 1]``.
    burst_mean : float, default 3.0
        Mean of the Poisson number of extra nodes in a burst, in ``[0, nodes]`` (a
        burst is cut to the nodes that are up).
    repair_median_days, repair_sigma : float
        Log-normal repair time: median (days, ``> 0``) and sigma of the log
        (``>= 0``), with ``|ln(repair_median_days)| + 9 * repair_sigma <= 709``.
    frailty_shape : float, default 0.6
        Shape of the gamma-distributed per-node failure weight (smaller: a few
        nodes take most faults), in ``[0.05, 1e6]``.

    Returns
    -------
    dict
        A ``spare-failure-trace`` document (see ``docs/replay.md``), ready for
        :func:`write_fault_trace` or :func:`parse_fault_events`.

    Raises
    ------
    ParameterTypeError
        ``nodes`` or ``seed`` is not an integer, or another argument is not a number.
    ParameterError
        An argument is outside the range where sampling is sound and finishes (the
        ranges above), or the expected number of incidents (a Weibull renewal count,
        :func:`spare_opt._core.stats.weibull_renewals`) exceeds ``10**6``, or
        ``incidents * nodes`` exceeds ``2 * 10**9`` node visits, or the loop still
        draws more than ten times the incident budget.

    Notes
    -----
    The defaults are fitted by eye to the InfiniteHBD trace (584 faults on 400
    nodes in 349 days, some at the same instant on up to 8 nodes, repairs from
    hours to months); they are not a statistical model of it.

    Sound ranges.  A Weibull shape ``k`` well below 1 puts the mean of the
    inter-arrival times into rare, huge draws: the loop then makes far more than
    ``days * incidents_per_day`` draws (``k = 0.01`` with the defaults: about 10^17),
    so the budget is checked on the renewal count up to ``days``, not on the mean.  A
    gamma frailty of shape ``a`` gives a weight that underflows to 0 with probability
    about ``exp(-744 a)`` (``a = 1e-5``: 99% of the nodes, and NumPy then fails on
    the weights); ``a >= 0.05`` keeps that below ``1e-16`` per node.
    """
    nodes = check.integer("nodes", nodes, minimum=1, maximum=MAX_SYNTHETIC_NODES)
    seed = check.seed(seed)
    days = check.number("days", days, above=0.0)
    incidents_per_day = check.number("incidents_per_day", incidents_per_day, above=0.0)
    weibull_shape = check.number("weibull_shape", weibull_shape, above=0.0)
    burst_probability = check.probability("burst_probability", burst_probability)
    burst_mean = check.number("burst_mean", burst_mean, minimum=0.0, maximum=float(nodes))
    repair_median_days = check.number("repair_median_days", repair_median_days, above=0.0)
    repair_sigma = check.number("repair_sigma", repair_sigma, minimum=0.0)
    frailty_shape = check.number("frailty_shape", frailty_shape, minimum=FRAILTY_SHAPE_RANGE[0],
                                 maximum=FRAILTY_SHAPE_RANGE[1])
    if abs(math.log(repair_median_days)) + 9.0 * repair_sigma > _LOG_FLOAT_MAX:
        raise ParameterError(
            f"repair_median_days {repair_median_days:g} with repair_sigma {repair_sigma:g} gives log-normal "
            f"repair times beyond the float range (|ln median| + 9 sigma must be <= {_LOG_FLOAT_MAX:g})"
        )
    # Weibull with mean 1/rate: scale = mean / Gamma(1 + 1/k).
    try:
        scale = (1.0 / incidents_per_day) / math.gamma(1.0 + 1.0 / weibull_shape)
    except OverflowError:
        raise ParameterError(f"weibull_shape must be at least about 0.0059 (Gamma(1 + 1/k) overflows), "
                             f"got {weibull_shape:g}") from None
    expected = weibull_renewals(days, 1.0 / incidents_per_day, weibull_shape)
    if not expected <= MAX_SYNTHETIC_INCIDENTS:
        raise ParameterError(
            f"about {expected:.3g} incidents expected in {days:g} days with incidents_per_day "
            f"{incidents_per_day:g} and weibull_shape {weibull_shape:g} (at most {MAX_SYNTHETIC_INCIDENTS:.0e}"
            + ("; a shape well below 1 makes most gaps tiny" if weibull_shape < 1 else "")
            + "): lower days or incidents_per_day, or raise weibull_shape"
        )
    if expected * nodes > MAX_SYNTHETIC_WORK:
        raise ParameterError(
            f"about {expected:.3g} incidents on {nodes} nodes is too much work (incidents * nodes at most "
            f"{MAX_SYNTHETIC_WORK:.0e}): lower nodes, days or incidents_per_day"
        )
    rng = np.random.default_rng(seed)
    width = len(str(nodes - 1))
    names = [f"node-{i:0{width}d}" for i in range(nodes)]
    # Some servers fail far more often than others (231 of 400 nodes carry the 584
    # real faults): a gamma-distributed frailty per node weights the draw.
    frailty = rng.gamma(frailty_shape, size=nodes)
    up_again = np.zeros(nodes)  # time at which each node is repaired
    events = []
    t = 0.0
    for _ in range(10 * MAX_SYNTHETIC_INCIDENTS):  # a bound on the loop; the budget above is 10x smaller
        t += scale * rng.weibull(weibull_shape)
        now = round(t, 4)
        if now > days:
            break
        alive = np.flatnonzero(up_again <= now)
        if alive.size == 0:
            continue
        size = 1
        if rng.random() < burst_probability:
            size += int(rng.poisson(burst_mean))
        weights = frailty[alive]
        total = weights.sum()
        if not total > 0.0:  # every live node's weight underflowed (not expected in the sound range)
            continue
        weights = weights / total
        hit = rng.choice(alive, size=min(size, int(np.count_nonzero(weights))), replace=False, p=weights)
        for node in hit:
            repair = float(rng.lognormal(math.log(repair_median_days), repair_sigma))
            end = round(now + max(repair, 1e-3), 4)
            up_again[node] = end
            desc = {"Level": "Synthetic", "Class": "Synthetic", "Desc": "generated fault"}
            events.append((now, 0, names[node], START, desc))
            if end <= days:  # repairs after the horizon are not observed, as in a real trace
                events.append((end, 1, names[node], END, desc))
    else:
        raise ParameterError(
            f"the trace drew more than {10 * MAX_SYNTHETIC_INCIDENTS:.0e} incidents before day {days:g}: "
            "lower days or incidents_per_day, or raise weibull_shape"
        )
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    return {
        "format": TRACE_FORMAT,
        "version": TRACE_VERSION,
        "nodes": int(nodes),
        "metadata": {
            "generator": "spare_opt.synthetic_fault_trace",
            "parameters": {
                "nodes": int(nodes), "days": days, "seed": seed, "incidents_per_day": incidents_per_day,
                "weibull_shape": weibull_shape, "burst_probability": burst_probability,
                "burst_mean": burst_mean, "repair_median_days": repair_median_days,
                "repair_sigma": repair_sigma, "frailty_shape": frailty_shape,
            },
        },
        "events": [
            {"node_id": node_id, "event_time": time, "event_type": kind, "fault_type": desc}
            for time, _, node_id, kind, desc in events
        ],
    }

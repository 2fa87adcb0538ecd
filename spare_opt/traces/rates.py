"""Failure rates in the field's units, as a failure model: MTBF, failures per 1,000 node-days, a job's MTTF.

Published failure statistics come in several units: a node MTBF, a rate per 1,000
node-days (Meta's RSC-1 and RSC-2 clusters, 6.50 and 2.34), or a job's mean time to
interruption at a stated size (the Llama 3 405B run: 419 unexpected interruptions in
54 days on 2,048 nodes).  :func:`failure_model_from_rates` turns any one of them into
a :class:`~spare_opt.FailureModel` of single-node failure events, so that
:func:`spare_opt.compare` and ``spare-opt compare`` take them as they take a fitted model.
"""

from .._core import validation as check
from .._core.errors import ParameterError
from .failure_model import FailureModel

__all__ = ["failure_model_from_rates", "node_mtbf_from_rates"]

#: Seconds in a day.
DAY = 86400.0


def node_mtbf_from_rates(*, node_mtbf_seconds=None, failures_per_1000_node_days=None, job_mttf_seconds=None,
                         job_nodes=None):
    """One node's MTBF, in seconds, from exactly one of three published figures.

    Parameters
    ----------
    node_mtbf_seconds : float, optional
        The node MTBF itself (``> 0``).
    failures_per_1000_node_days : float, optional
        Failures per 1,000 node-days (``> 0``): node MTBF ``1000 / rate`` days.
    job_mttf_seconds : float, optional
        A job's mean time to failure (``> 0``) on ``job_nodes`` nodes: node MTBF
        ``job_mttf * job_nodes`` (any node's failure interrupts the job).
    job_nodes : int, optional
        With ``job_mttf_seconds`` only.

    Returns
    -------
    node_mtbf_seconds : float
    text : str
        The figure given, in words (for a verdict's header).

    Raises
    ------
    ParameterError
        None or more than one figure given, ``job_nodes`` missing or given alone, a
        value out of range.
    """
    given = [name for name, value in (("node_mtbf_seconds", node_mtbf_seconds),
                                      ("failures_per_1000_node_days", failures_per_1000_node_days),
                                      ("job_mttf_seconds", job_mttf_seconds)) if value is not None]
    if len(given) != 1:
        raise ParameterError("give one failure rate: a node MTBF, failures per 1,000 node-days, or a job MTTF with "
                             f"its number of nodes (got {', '.join(given) or 'none'})")
    if (job_nodes is None) != (job_mttf_seconds is None):
        raise ParameterError("a job MTTF needs the job's number of nodes (job_nodes), and job_nodes a job MTTF")
    if node_mtbf_seconds is not None:
        mtbf = check.number("node_mtbf_seconds", node_mtbf_seconds, above=0.0)
        return mtbf, f"node MTBF {mtbf / DAY:.4g} days"
    if failures_per_1000_node_days is not None:
        rate = check.number("failures_per_1000_node_days", failures_per_1000_node_days, above=0.0)
        mtbf = 1000.0 / rate * DAY
        return mtbf, f"{rate:g} failures per 1,000 node-days (node MTBF {mtbf / DAY:.4g} days)"
    mttf = check.number("job_mttf_seconds", job_mttf_seconds, above=0.0)
    nodes = check.count("job_nodes", job_nodes)
    mtbf = mttf * nodes
    return mtbf, (f"a job MTTF of {mttf / 3600:.4g} h on {nodes:,} nodes (node MTBF {mtbf / DAY:.4g} days, "
                  f"{1000.0 * DAY / mtbf:.3g} failures per 1,000 node-days)")


def failure_model_from_rates(groups, *, node_mtbf_seconds=None, failures_per_1000_node_days=None,
                             job_mttf_seconds=None, job_nodes=None, weibull_shape=1.0, repair_median_seconds=None,
                             repair_sigma=0.0):
    """A failure model of ``groups`` units that each fail like one node of the given rate.

    Parameters
    ----------
    groups : int
        Units of the model (``cluster_nodes``): the DP groups ``N``, each failing like
        one node (:func:`spare_opt.simulation.verdict.per_group_model` makes a group of
        several nodes fail when any of them fails).
    node_mtbf_seconds, failures_per_1000_node_days, job_mttf_seconds, job_nodes
        Exactly one rate, as :func:`node_mtbf_from_rates`.
    weibull_shape : float, default 1.0
        Shape of the gaps between failures (1: exponential, a constant rate).
    repair_median_seconds : float, optional
        Median repair time (lognormal with ``repair_sigma``).  Without it the model
        carries no repair time (``repair_median_seconds`` is the node MTBF, a
        placeholder) and is meant for the paper's semantics (no rejoin); the source
        text says so.
    repair_sigma : float, default 0.0
        Standard deviation of the log of the repair time (0: every repair takes the median).

    Returns
    -------
    FailureModel
        ``cluster_nodes = groups``, ``event_mtbf_seconds = node MTBF / groups``,
        one node per event, ``source`` the rate in words.

    Raises
    ------
    ParameterError
        As :func:`node_mtbf_from_rates`, or a shape, repair or ``groups`` out of range.
    """
    groups = check.count("groups", groups, maximum=check.MAX_GROUPS)
    mtbf, text = node_mtbf_from_rates(node_mtbf_seconds=node_mtbf_seconds,
                                      failures_per_1000_node_days=failures_per_1000_node_days,
                                      job_mttf_seconds=job_mttf_seconds, job_nodes=job_nodes)
    if repair_median_seconds is None:
        repair = mtbf  # a placeholder: without a repair time the model is for the paper's semantics
    else:
        repair = check.number("repair_median_seconds", repair_median_seconds, above=0.0)
        text += f", repairs median {repair / 3600:.3g} h"
    return FailureModel(cluster_nodes=groups, event_mtbf_seconds=mtbf / groups, weibull_shape=weibull_shape,
                        repair_median_seconds=repair, repair_sigma=repair_sigma, source=text)

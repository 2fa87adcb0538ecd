"""Monte-Carlo endurance and overhead of a stack layout, and sweeps over ``r`` and layout methods.

* :func:`monte_carlo` runs uniformly random failure orders through the online
  controller (:func:`spare_opt.stack_number_trajectories`) until the first wipe-out and
  estimates ``mu`` (failures masked) and ``Sbar`` (mean stack number) with 95%
  confidence intervals, beside the closed forms of :mod:`spare_opt.theory`; with
  ``micro_batches=m`` also the mean step cost ``L*/m`` (:func:`spare_opt.load_trajectories`).
* :func:`sweep` repeats it over a range of ``r`` and layout methods and adds the
  normalised time-to-train ``J``.
* :func:`domain_monte_carlo` runs the same trials under correlated failures: a failure
  event takes a whole failure domain of a topology with probability ``p``
  (``docs/domains.md``).

Both split their trials into seeded chunks (:mod:`spare_opt._core.parallel`), so the numbers
are the same run serially, on ``workers`` processes, or on any
``concurrent.futures.Executor`` (a Dask cluster: ``docs/scaling.md``).

References
----------
.. [1] Lee et al., "SPARe: Stacked Parallelism with Adaptive Reordering for
   Fault-Tolerant LLM Pretraining Systems with 100k+ GPUs", ICML 2026,
   arXiv:2603.00357, Sec. 4-5.
"""

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .._core import validation as check
from . import theory
from .._core.parallel import parallelism, resolve_workers, run_tasks
from .._core.results import Result
from .._core.stats import finite_or_none, mean_ci95
from ..layouts.domain_layouts import _checked_domains
from .._core.errors import ParameterError, SpareError
from .._core.paper import PAPER
from ..layouts.layout import check_layout, check_size

__all__ = [
    "MAX_TRIALS",
    "DomainMonteCarloResult",
    "MonteCarloResult",
    "SweepResult",
    "domain_monte_carlo",
    "monte_carlo",
    "sweep",
]

#: Most Monte-Carlo trials :func:`monte_carlo` accepts (the per-trial results stay in memory).
MAX_TRIALS = 10_000_000


# ====================================================================== Monte-Carlo
@dataclass(eq=False)
class MonteCarloResult(Result):
    """Monte-Carlo endurance and overhead of a layout under uniformly random failures.

    Attributes
    ----------
    groups, redundancy : int
        ``N`` and ``r``.
    method : str
        The layout's method.
    trials : int
        Number of independent failure orders.
    seed : int
        Root seed: trial ``i`` uses ``numpy.random.SeedSequence(seed, spawn_key=(i,))``.
    workers : int
        Processes asked for (results do not depend on it, nor on an executor).
    masked : numpy.ndarray of int64, shape (trials,)
        Failures masked before the first wipe-out, per trial.
    sbar_per_trial : numpy.ndarray of float64, shape (trials,)
        Mean stack number over ``k = 0 .. masked`` (``S = 1`` at ``k = 0``), per trial.
    mu, sbar : float
        Means over trials.
    mu_ci95, sbar_ci95 : tuple of float
        95% confidence intervals within ``[0, N]`` and ``[1, r]``
        (:func:`spare_opt._core.stats.interval95`: Student t, or a bootstrap when the t
        interval leaves the bounds); ``(nan, nan)`` for one trial, or for fewer than
        10 trials whose t interval leaves the bounds.
    closed_form_mu, closed_form_sbar : float
        :func:`spare_opt.theory.mu` and :func:`spare_opt.theory.sbar_lower_bound`.
    micro_batches : int
        ``m``, micro-batches per shard type.
    step_cost_per_trial : numpy.ndarray of float64, shape (trials,)
        Mean step cost ``L_k / m`` over ``k = 0 .. masked`` (``L_0 = m``), per trial;
        the same array as ``sbar_per_trial`` at ``m = 1``.
    mean_step_cost : float
        Mean over trials (``== sbar`` at ``m = 1``).
    mean_step_cost_ci95 : tuple of float
        Its 95% interval within ``[1, r]``, as ``sbar_ci95``.
    step_cost_bound : float
        :func:`spare_opt.theory.step_cost_lower_bound` (``== closed_form_sbar`` at ``m = 1``).
    physical_step_cost : float
        :func:`spare_opt.theory.physical_step_cost`: the mean of ``N / (N - k)`` over the
        same ``k``, the limit of the bound as ``m`` grows.
    stack_mean_by_k : numpy.ndarray of float64
        Mean ``S*`` after ``k`` failures over the trials still masked at ``k``
        (``nan`` where none is).
    survivors_by_k : numpy.ndarray of int64
        Trials still masked after ``k`` failures.
    seconds : float
        Wall-clock time (not compared by ``==``).
    """

    groups: int
    redundancy: int
    method: str
    trials: int
    seed: int
    workers: int
    masked: np.ndarray
    sbar_per_trial: np.ndarray
    mu: float
    mu_ci95: tuple
    sbar: float
    sbar_ci95: tuple
    closed_form_mu: float
    closed_form_sbar: float
    micro_batches: int
    step_cost_per_trial: np.ndarray = field(repr=False)
    mean_step_cost: float
    mean_step_cost_ci95: tuple
    step_cost_bound: float
    physical_step_cost: float
    stack_mean_by_k: np.ndarray = field(repr=False)
    survivors_by_k: np.ndarray = field(repr=False)
    seconds: float = field(default=0.0, compare=False)

    @property
    def mu_relative_error(self):
        """float: ``(closed form - Monte-Carlo) / Monte-Carlo`` for ``mu``."""
        return _relative(self.closed_form_mu, self.mu)

    @property
    def sbar_relative_error(self):
        """float: ``(closed form - Monte-Carlo) / Monte-Carlo`` for ``Sbar``."""
        return _relative(self.closed_form_sbar, self.sbar)

    @property
    def step_cost_relative_error(self):
        """float: ``(closed-form bound - Monte-Carlo) / Monte-Carlo`` for the mean step cost."""
        return _relative(self.step_cost_bound, self.mean_step_cost)

    def to_dict(self, per_trial=False):
        """JSON-ready nested dict: ``monte_carlo`` and ``closed_form`` objects.

        ``monte_carlo.mean_step_cost`` (and its ``_ci95``), ``closed_form.step_cost_bound``
        and ``closed_form.physical_step_cost`` are given for every ``m`` (at ``m = 1``
        they equal ``sbar``, ``closed_form.sbar`` and the mean of ``N / (N - k)``).

        Parameters
        ----------
        per_trial : bool, default False
            Include the per-trial arrays.
        """
        monte = {
            "trials": self.trials,
            "seed": self.seed,
            "workers": self.workers,
            "mu": finite_or_none(self.mu),
            "mu_ci95": [finite_or_none(v) for v in self.mu_ci95],
            "sbar": finite_or_none(self.sbar),
            "sbar_ci95": [finite_or_none(v) for v in self.sbar_ci95],
            "micro_batches": self.micro_batches,
            "mean_step_cost": finite_or_none(self.mean_step_cost),
            "mean_step_cost_ci95": [finite_or_none(v) for v in self.mean_step_cost_ci95],
            "seconds": round(self.seconds, 4),
        }
        if per_trial:
            monte["masked"] = [int(v) for v in self.masked]
            monte["sbar_per_trial"] = [float(v) for v in self.sbar_per_trial]
            monte["step_cost_per_trial"] = [float(v) for v in self.step_cost_per_trial]
        closed = {
            "mu": finite_or_none(self.closed_form_mu),
            "sbar": finite_or_none(self.closed_form_sbar),
            "mu_relative_error": finite_or_none(self.mu_relative_error),
            "sbar_relative_error": finite_or_none(self.sbar_relative_error),
            "step_cost_bound": finite_or_none(self.step_cost_bound),
            "physical_step_cost": finite_or_none(self.physical_step_cost),
            "step_cost_relative_error": finite_or_none(self.step_cost_relative_error),
        }
        return {"monte_carlo": monte, "closed_form": closed}


def monte_carlo(layout, *, trials=200, seed=0, micro_batches=1, workers=1, executor=None, progress=None,
                chunk_size=None):
    """Estimate ``mu``, ``Sbar`` and the mean step cost by running random failure orders through the controller.

    Each trial draws a uniformly random order of the ``N`` groups (failures without
    replacement) and feeds it to the online controller until the first wipe-out
    (:func:`spare_opt.stack_number_trajectories`, one compiled call per chunk of
    trials).  ``mu`` is the number of failures masked before it; ``Sbar`` is the mean
    stack number over ``k = 0 .. mu`` failures (``S = 1`` at ``k = 0``), i.e. the
    time-weighted mean when failures arrive at a constant rate.

    With ``m`` micro-batches per shard type the same orders also run through the
    micro-batch controller (:func:`spare_opt.load_trajectories`): a trial's step cost
    is the mean of ``L_k / m`` over the same states ``k = 0 .. masked`` as its ``Sbar``
    (``L_0 / m = 1``), where ``L_k`` is the least load after ``k`` failures; the wipe-out
    does not depend on ``m``, so ``mu`` and ``Sbar`` (the paper's integer stacking) are
    unchanged and the two costs are compared on the same failures.

    Parameters
    ----------
    layout : Layout
    trials : int, default 200
        Number of failure orders, ``1 <= trials <= MAX_TRIALS`` (ten million).
    seed : int, default 0
        Root seed (``>= 0``).  Trial ``i`` draws its order from
        ``SeedSequence(seed, spawn_key=(i,))``, so results are identical for any
        ``workers``, ``executor`` and ``chunk_size``.
    micro_batches : int, default 1
        ``m``, micro-batches per shard type (``docs/planner.md``, "Micro-batches").  At
        ``m = 1`` the results are those of the paper's model, and ``mean_step_cost``
        is ``sbar`` exactly.
    workers : int, default 1
        Processes (``-1``: every CPU); 1 runs in this process.
    executor : concurrent.futures.Executor, optional
        Run the chunks on this executor instead (for example a Dask cluster's
        ``Client.get_executor()``); ``workers`` is then ignored.
    progress : callable, optional
        ``progress(done, total)`` in trials, after each chunk.
    chunk_size : int, optional
        Trials per task; default splits the work into about 8 chunks per worker (of
        ``workers``, or of the executor: its ``max_workers``, a Dask cluster's threads),
        at most 250 trials and ``4e6 / N`` trials per chunk.

    Returns
    -------
    MonteCarloResult

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout; ``trials``, ``seed``, ``micro_batches``, ``workers``
        or ``chunk_size`` is not an integer; ``executor`` is not an Executor;
        ``progress`` is not callable.
    ParameterError
        ``trials``, ``seed``, ``workers`` or ``chunk_size`` out of range; ``m < 1`` or
        ``N m`` above :data:`~spare_opt.planning.plan.MAX_SPLIT_ENTRIES`.

    Examples
    --------
    >>> from spare_opt import monte_carlo, sidon
    >>> result = monte_carlo(sidon(100, 6), trials=50, seed=1)
    >>> round(result.mu), round(result.sbar, 2)
    (44, 2.0)
    >>> low, high = result.mu_ci95  # the closed form mu(N, r) lies inside the 95% interval
    >>> round(result.closed_form_mu, 1), bool(low < result.closed_form_mu < high)
    (43.1, True)
    >>> eight = monte_carlo(sidon(100, 6), trials=50, seed=1, micro_batches=8)
    >>> eight.mu == result.mu, result.mean_step_cost == result.sbar
    (True, True)
    >>> bool(eight.step_cost_bound <= eight.mean_step_cost < result.mean_step_cost)
    True

    Notes
    -----
    The 95% intervals are ``mean +- t(0.975, n-1) s / sqrt(n)`` (``scipy.stats.t``);
    trials are independent, so the central limit theorem applies to the means
    (:func:`spare_opt._core.stats.interval95`: a bootstrap where that interval leaves the
    quantity's bounds).  Per trial, ``L_k >= ceil(m N / (N - k))`` (Hall's formula
    with every shard type), so the mean step cost of a trial is at least the mean of
    that bound over its states; :attr:`MonteCarloResult.step_cost_bound` averages the
    bound over ``floor(mu)`` states like ``closed_form_sbar``.
    """
    from ..planning.plan import check_micro_batches

    n, r = check_layout(layout).stacks.shape
    micro_batches = check_micro_batches(micro_batches, n)
    # The per-trial results are kept in memory (16 bytes a trial): refuse absurd counts
    # before allocating anything rather than exhausting memory.
    trials = check.count("trials", trials, maximum=MAX_TRIALS)
    processes = resolve_workers(workers)
    seed = check.seed(seed)
    bounds = _chunk_bounds(trials, n, workers, executor, chunk_size)

    started = time.perf_counter()
    parts = run_tasks(_run_chunk, [(layout, seed, lo, hi, micro_batches) for lo, hi in bounds], workers=workers,
                      executor=executor, progress=progress, weights=[hi - lo for lo, hi in bounds],
                      warm_up=lambda: _run_chunk(layout, seed, 0, 1, micro_batches))
    masked = np.concatenate([p[0] for p in parts])
    sbar_per_trial = np.concatenate([p[1] for p in parts])
    stack_sum = np.sum([p[2] for p in parts], axis=0)
    survivors = np.sum([p[3] for p in parts], axis=0)
    last = int(np.flatnonzero(survivors)[-1]) + 1 if survivors.any() else 1
    with np.errstate(invalid="ignore", divide="ignore"):
        stack_mean = stack_sum[:last] / survivors[:last]
    # Intervals within the quantities' bounds: 0 <= masked <= N, 1 <= Sbar <= r.
    mu_mean, mu_ci = mean_ci95(masked.astype(np.float64), lower=0.0, upper=float(n))
    sbar_mean, sbar_ci = mean_ci95(sbar_per_trial, lower=1.0, upper=float(r))
    if micro_batches == 1:  # the paper's model: the step cost is the stack number, bit for bit
        step_cost_per_trial, cost_mean, cost_ci = sbar_per_trial, sbar_mean, sbar_ci
    else:
        step_cost_per_trial = np.concatenate([p[4] for p in parts])
        cost_mean, cost_ci = mean_ci95(step_cost_per_trial, lower=1.0, upper=float(r))
    return MonteCarloResult(
        groups=n, redundancy=r, method=layout.method, trials=trials, seed=seed, workers=processes,
        masked=masked, sbar_per_trial=sbar_per_trial,
        mu=mu_mean, mu_ci95=mu_ci, sbar=sbar_mean, sbar_ci95=sbar_ci,
        closed_form_mu=theory.mu(n, r), closed_form_sbar=theory.sbar_lower_bound(n, r),
        micro_batches=micro_batches, step_cost_per_trial=step_cost_per_trial, mean_step_cost=cost_mean,
        mean_step_cost_ci95=cost_ci, step_cost_bound=theory.step_cost_lower_bound(n, r, micro_batches),
        physical_step_cost=theory.physical_step_cost(n, r),
        stack_mean_by_k=stack_mean, survivors_by_k=survivors[:last].astype(np.int64),
        seconds=time.perf_counter() - started,
    )


def _chunk_bounds(trials, n, workers, executor, chunk_size):
    """``(lo, hi)`` trial ranges of the tasks: by default about 8 chunks per worker (the
    executor's workers when it has its own), each at most ~4 million order entries.
    Results do not depend on the chunks (trial ``i`` draws from its own seed)."""
    if chunk_size is None:
        chunk_size = max(1, min(250, 4_000_000 // n, math.ceil(trials / (8 * parallelism(workers, executor)))))
    chunk_size = check.count("chunk_size", chunk_size)
    return [(lo, min(trials, lo + chunk_size)) for lo in range(0, trials, chunk_size)]


def _trajectories_by_row(layout, orders, prefix, micro_batches=1):
    """Per row of ``orders``: ``(values, wipe_out_index)`` of its walk to the wipe-out.

    The values are the stack numbers at ``m = 1`` and the loads ``L_k`` at ``m > 1``.
    Wipe-outs come after about ``mu`` failures, so the first ``prefix`` failures of every
    order run in one compiled call, and the rare row that outlives them reruns on its
    whole order.
    """
    from ..planning.controller import (
        load_trajectories,
        load_trajectory,
        stack_number_trajectories,
        stack_number_trajectory,
    )

    if micro_batches == 1:
        values, wipeout, _moves = stack_number_trajectories(layout, orders[:, :prefix])
    else:
        values, wipeout, _moves = load_trajectories(layout, orders[:, :prefix], micro_batches=micro_batches)
    for row in range(orders.shape[0]):
        if wipeout[row] > 0:
            yield values[row, :wipeout[row]], int(wipeout[row])
        elif micro_batches == 1:
            yield stack_number_trajectory(layout, orders[row])
        else:
            yield load_trajectory(layout, orders[row], micro_batches=micro_batches)


def _run_chunk(layout, seed, lo, hi, micro_batches=1):
    """Trials ``lo .. hi-1``: masked counts, per-trial Sbar, S sums / counts by ``k``, and
    (``m > 1``) per-trial mean step costs."""
    n, r = layout.stacks.shape
    prefix = min(n, int(3 * theory.mu(n, r)) + 10 * r + 100)
    orders = np.empty((hi - lo, n), dtype=np.int32)
    for i in range(lo, hi):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(i,)))
        orders[i - lo] = rng.permutation(n)
    masked = np.empty(hi - lo, dtype=np.int64)
    sbar = np.empty(hi - lo, dtype=np.float64)
    stack_sum = np.zeros(n + 1, dtype=np.int64)
    survivors = np.zeros(n + 1, dtype=np.int64)
    for row, (stack_numbers, _index) in enumerate(_trajectories_by_row(layout, orders, prefix)):
        # stack_numbers[k] = S* after k failures for the masked states k = 0 .. j-1;
        # failure j wipes out, so j - 1 failures were masked.
        states = stack_numbers.size
        masked[row] = states - 1
        sbar[row] = stack_numbers.mean()
        stack_sum[:states] += stack_numbers
        survivors[:states] += 1
    if micro_batches == 1:
        return masked, sbar, stack_sum, survivors
    # The same orders through the micro-batch controller: the wipe-out (a shard type
    # without live holder) does not depend on m, so its states are the same k.
    step_cost = np.empty(hi - lo, dtype=np.float64)
    for row, (row_loads, _index) in enumerate(_trajectories_by_row(layout, orders, prefix, micro_batches)):
        if row_loads.size != masked[row] + 1:  # an invariant of the model; never silently averaged
            raise AssertionError(f"trial {lo + row}: the micro-batch controller masked {row_loads.size - 1} "
                                 f"failures, the stack-number controller {masked[row]}")
        step_cost[row] = row_loads.mean() / micro_batches
    return masked, sbar, stack_sum, survivors, step_cost


def _relative(estimate, reference):
    if reference == 0 or not math.isfinite(reference):
        return math.nan
    return (estimate - reference) / reference


# ======================================================= correlated failures (domains)
@dataclass(eq=False)
class DomainMonteCarloResult(Result):
    """Monte-Carlo endurance and overhead of a layout under correlated (domain) failures.

    Attributes
    ----------
    groups, redundancy : int
        ``N`` and ``r``.
    method : str
        The layout's method.
    level : str
        The topology level whose domains fail as units.
    domain_probability : float
        ``p``: the probability that a failure event takes a whole domain.
    trials, seed, workers : int
        As in :class:`MonteCarloResult`.
    masked_groups : numpy.ndarray of int64, shape (trials,)
        Groups lost in the events masked before the first wipe-out, per trial.
    masked_events : numpy.ndarray of int64, shape (trials,)
        Failure events masked before the first wipe-out, per trial.
    sbar_per_trial : numpy.ndarray of float64, shape (trials,)
        Mean stack number over the states after ``0 .. masked_events`` events.
    domain_events : numpy.ndarray of int64, shape (trials,)
        Events that took a domain (of two or more live groups), up to the wipe-out included.
    mu, mu_ci95 : float, tuple
        Mean of ``masked_groups`` (the paper's ``mu``: groups masked before a
        wipe-out) and its 95% interval.
    mu_events, mu_events_ci95 : float, tuple
        Mean of ``masked_events``.
    sbar, sbar_ci95 : float, tuple
        Mean stack number until the wipe-out, events arriving at a constant rate.
    micro_batches : int
        ``m``, micro-batches per shard type.
    step_cost_per_trial : numpy.ndarray of float64, shape (trials,)
        Mean of ``L / m`` over the same states as ``sbar_per_trial`` (the same array at ``m = 1``).
    mean_step_cost, mean_step_cost_ci95 : float, tuple
        Its mean over trials and 95% interval (``sbar`` and ``sbar_ci95`` at ``m = 1``).
    seconds : float
        Wall-clock time.
    """

    groups: int
    redundancy: int
    method: str
    level: str
    domain_probability: float
    trials: int
    seed: int
    workers: int
    masked_groups: np.ndarray
    masked_events: np.ndarray
    sbar_per_trial: np.ndarray
    domain_events: np.ndarray
    mu: float
    mu_ci95: tuple
    mu_events: float
    mu_events_ci95: tuple
    sbar: float
    sbar_ci95: tuple
    micro_batches: int
    step_cost_per_trial: np.ndarray = field(repr=False)
    mean_step_cost: float
    mean_step_cost_ci95: tuple
    seconds: float = field(default=0.0, compare=False)

    def to_dict(self, per_trial=False):
        """JSON-ready dict of the figures (and the per-trial arrays with ``per_trial``)."""
        doc = {
            "level": self.level,
            "domain_probability": self.domain_probability,
            "trials": self.trials,
            "seed": self.seed,
            "workers": self.workers,
            "mu": finite_or_none(self.mu),
            "mu_ci95": [finite_or_none(v) for v in self.mu_ci95],
            "mu_events": finite_or_none(self.mu_events),
            "mu_events_ci95": [finite_or_none(v) for v in self.mu_events_ci95],
            "sbar": finite_or_none(self.sbar),
            "sbar_ci95": [finite_or_none(v) for v in self.sbar_ci95],
            "domain_events": finite_or_none(float(self.domain_events.mean())) if self.trials else None,
            "micro_batches": self.micro_batches,
            "mean_step_cost": finite_or_none(self.mean_step_cost),
            "mean_step_cost_ci95": [finite_or_none(v) for v in self.mean_step_cost_ci95],
            "seconds": round(self.seconds, 4),
        }
        if per_trial:
            doc["masked_groups"] = [int(v) for v in self.masked_groups]
            doc["masked_events"] = [int(v) for v in self.masked_events]
            doc["sbar_per_trial"] = [float(v) for v in self.sbar_per_trial]
            doc["step_cost_per_trial"] = [float(v) for v in self.step_cost_per_trial]
        return doc


def domain_monte_carlo(layout, topology, *, domain_probability, level=None, trials=200, seed=0, micro_batches=1,
                       workers=1, executor=None, progress=None, chunk_size=None):
    """Estimate ``mu`` and ``Sbar`` when failures take whole domains with probability ``p``.

    The correlated failure model (``docs/domains.md``): each failure event strikes a
    uniformly random live group ``g``; with probability ``p`` it takes a whole domain
    of ``level`` containing ``g`` (one at random when ``g`` is in several; only ``g``
    when it is in none): every live group of the domain fails at once, one batch;
    otherwise only ``g`` fails.  Events repeat until the first wipe-out.  ``p = 0`` is
    the paper's model: the figures then equal :func:`monte_carlo`'s for the same seed.

    Parameters
    ----------
    layout : Layout
    topology : Topology
        Of the same ``N``.
    domain_probability : float
        ``p`` in ``[0, 1]``: for instance the fraction of failure events that hit
        several nodes at once in a fault trace (5.7% on the InfiniteHBD trace).
    level : str, optional
        The level whose domains fail; default the first level of the topology.
    trials, seed, workers, executor, progress, chunk_size
        As in :func:`monte_carlo`; trial ``i`` draws its order from
        ``SeedSequence(seed, spawn_key=(i,))`` (the same order as :func:`monte_carlo`)
        and its domain draws from ``SeedSequence(seed, spawn_key=(i, 1))``.
    micro_batches : int, default 1
        ``m``: the mean step cost ``L / m`` is averaged over the same states as
        ``sbar`` (:func:`spare_opt.load_trajectories` on the same flattened orders).

    Returns
    -------
    DomainMonteCarloResult
        ``mu`` counts groups (masked before the wipe-out), ``mu_events`` events;
        ``sbar`` is the mean stack number over the states after each masked event.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout, ``topology`` not a Topology, an argument of the
        wrong type.
    ParameterError
        ``p`` outside ``[0, 1]``, sizes that differ, an unknown level, counts out of
        range; ``m < 1`` or ``N m`` above :data:`~spare_opt.planning.plan.MAX_SPLIT_ENTRIES`.

    Examples
    --------
    >>> from spare_opt import Topology, domain_monte_carlo, domain_safe, monte_carlo, sidon
    >>> racks = Topology.blocks(120, {"rack": 6})
    >>> plain = sidon(120, 5)
    >>> domain_monte_carlo(plain, racks, domain_probability=0.0, trials=20).mu == monte_carlo(plain, trials=20).mu
    True
    >>> safe = domain_monte_carlo(domain_safe(120, 5, racks), racks, domain_probability=0.2, trials=20)
    >>> safe.mu > domain_monte_carlo(plain, racks, domain_probability=0.2, trials=20).mu
    True

    Notes
    -----
    Each trial's events are flattened into one failure order (a domain event's groups
    consecutively) and run through the online controller
    (:func:`spare_opt.stack_number_trajectories`) in one compiled call; ``S*``
    depends only on the set of failed groups, so the stack number after an event is
    the one after its last group.  The wipe-out event is the one holding the failure
    that wiped out.  95% intervals as in :func:`monte_carlo`.
    """
    from ..planning.plan import check_micro_batches

    n, r = check_layout(layout).stacks.shape
    micro_batches = check_micro_batches(micro_batches, n)
    domains = _checked_domains(layout, topology, level)
    level = domains.levels[0]
    p = check.probability("domain_probability", domain_probability)
    trials = check.count("trials", trials, maximum=MAX_TRIALS)
    processes = resolve_workers(workers)
    seed = check.seed(seed)
    members, bounds = domains._members()
    structure = (domains.indptr, domains.entry_domain, members, bounds)
    bounds_list = _chunk_bounds(trials, n, workers, executor, chunk_size)

    started = time.perf_counter()
    parts = run_tasks(_run_domain_chunk,
                      [(layout, structure, p, seed, lo, hi, micro_batches) for lo, hi in bounds_list],
                      workers=workers, executor=executor, progress=progress,
                      weights=[hi - lo for lo, hi in bounds_list],
                      warm_up=lambda: _run_domain_chunk(layout, structure, p, seed, 0, 1, micro_batches))
    masked_groups = np.concatenate([part[0] for part in parts])
    masked_events = np.concatenate([part[1] for part in parts])
    sbar_per_trial = np.concatenate([part[2] for part in parts])
    domain_events = np.concatenate([part[3] for part in parts])
    mu, mu_ci = mean_ci95(masked_groups.astype(np.float64))
    mu_events, mu_events_ci = mean_ci95(masked_events.astype(np.float64))
    sbar, sbar_ci = mean_ci95(sbar_per_trial)
    if micro_batches == 1:
        step_cost_per_trial, cost, cost_ci = sbar_per_trial, sbar, sbar_ci
    else:
        step_cost_per_trial = np.concatenate([part[4] for part in parts])
        cost, cost_ci = mean_ci95(step_cost_per_trial)
    return DomainMonteCarloResult(
        groups=n, redundancy=r, method=layout.method, level=level, domain_probability=p, trials=trials, seed=seed,
        workers=processes, masked_groups=masked_groups, masked_events=masked_events, sbar_per_trial=sbar_per_trial,
        domain_events=domain_events, mu=mu, mu_ci95=mu_ci, mu_events=mu_events, mu_events_ci95=mu_events_ci,
        sbar=sbar, sbar_ci95=sbar_ci, micro_batches=micro_batches, step_cost_per_trial=step_cost_per_trial,
        mean_step_cost=cost, mean_step_cost_ci95=cost_ci, seconds=time.perf_counter() - started,
    )


def _domain_events(n, structure, p, seed, trial):
    """Trial ``trial``'s failure order, flattened, and the number of groups failed after each event.

    Returns ``(order, ends, is_domain)``: event ``e`` fails ``order[ends[e-1]:ends[e]]``;
    ``is_domain[e]`` is true when it took a domain of two or more live groups.
    """
    indptr, entry_domain, members, bounds = structure
    order = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(trial,))).permutation(n)
    draws = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(trial, 1)))
    coins = draws.random(n)
    picks = draws.random(n)
    failed = np.zeros(n, dtype=bool)
    flat, ends, is_domain = [], [], []
    done = 0
    position = 0
    # Positions whose event (if they start one) takes a domain; the rest are single failures.
    for where in np.flatnonzero(coins < p).tolist() + [n]:
        singles = order[position:where]
        singles = singles[~failed[singles]]
        failed[singles] = True
        flat.append(singles)
        ends.append(done + 1 + np.arange(singles.size))
        is_domain.append(np.zeros(singles.size, dtype=bool))
        done += singles.size
        position = where + 1
        if where == n:
            break
        g = int(order[where])
        if failed[g]:
            continue  # this position starts no event: its group is already down
        choices = entry_domain[indptr[g]:indptr[g + 1]]
        if choices.size == 0:
            batch = np.array([g])
        else:
            d = int(choices[int(picks[where] * choices.size)])
            others = members[bounds[d]:bounds[d + 1]]
            others = others[(others != g) & ~failed[others]]
            batch = np.concatenate(([g], others))
        failed[batch] = True
        flat.append(batch)
        done += batch.size
        ends.append(np.array([done]))
        is_domain.append(np.array([batch.size >= 2]))
    return (np.concatenate(flat).astype(np.int32), np.concatenate(ends).astype(np.int64),
            np.concatenate(is_domain))


def _run_domain_chunk(layout, structure, p, seed, lo, hi, micro_batches=1):
    """Trials ``lo .. hi-1`` of :func:`domain_monte_carlo`: masked groups and events, Sbar, domain
    events, and (``m > 1``) the mean step costs."""
    n, r = layout.stacks.shape
    largest = int(np.diff(structure[3]).max()) if structure[3].size > 1 else 1
    prefix = min(n, int(3 * theory.mu(n, r)) + 10 * r + 100 + largest)
    events = [_domain_events(n, structure, p, seed, i) for i in range(lo, hi)]
    orders = np.stack([order for order, _ends, _domain in events])
    masked_groups = np.empty(hi - lo, dtype=np.int64)
    masked_events = np.empty(hi - lo, dtype=np.int64)
    sbar = np.empty(hi - lo, dtype=np.float64)
    domain_events = np.empty(hi - lo, dtype=np.int64)
    walks = _trajectories_by_row(layout, orders, prefix)
    for row, ((_order, ends, is_domain), (stack_numbers, index)) in enumerate(zip(events, walks)):
        # Failure number `index` (1-based) wiped out; it belongs to event `event`.
        event = int(np.searchsorted(ends, index - 1, side="right")) if index > 0 else ends.size
        masked_events[row] = event
        masked_groups[row] = ends[event - 1] if event > 0 else 0
        states = np.concatenate(([1], stack_numbers[ends[:event]])) if event > 0 else np.ones(1)
        sbar[row] = states.mean()
        domain_events[row] = int(is_domain[:event + 1].sum())
    if micro_batches == 1:
        return masked_groups, masked_events, sbar, domain_events
    # The same flattened orders through the micro-batch controller, read at the same events.
    step_cost = np.empty(hi - lo, dtype=np.float64)
    walks = _trajectories_by_row(layout, orders, prefix, micro_batches)
    for row, ((_order, ends, _is_domain), (row_loads, _index)) in enumerate(zip(events, walks)):
        event = int(masked_events[row])
        states = np.concatenate(([micro_batches], row_loads[ends[:event]])) if event > 0 else np.full(1, micro_batches)
        step_cost[row] = states.mean() / micro_batches
    return masked_groups, masked_events, sbar, domain_events, step_cost


# ====================================================================== sweep
@dataclass(eq=False)
class SweepResult(Result):
    """Monte-Carlo and closed forms over a range of ``r`` and layout methods.

    Attributes
    ----------
    groups : int
        ``N``.
    rows : list of dict
        One per (method, r, m) evaluated, keys ``method``, ``redundancy``, ``overlap``
        (lambda), ``layout_status``, ``mu``, ``mu_ci95``, ``sbar``, ``sbar_ci95``,
        ``closed_form_mu``, ``closed_form_sbar``, ``mu_relative_error``,
        ``sbar_relative_error``, ``j_closed_form``, ``j_monte_carlo``, and
        ``micro_batches`` (``m``), ``mean_step_cost``, ``mean_step_cost_ci95``,
        ``step_cost_bound``, ``physical_step_cost`` (:class:`MonteCarloResult`).  ``J``
        uses the step cost: ``mean_step_cost / A*`` and ``step_cost_bound / A*``
        (``Sbar`` at ``m = 1``).
    skipped : list of dict
        ``method``, ``redundancy``, ``reason`` for each (method, r) not evaluated (for every ``m``).
    parameters : dict
        The arguments (trials, seed, times in seconds...).
    seconds : list of float
        Wall-clock time of each row's Monte-Carlo (in ``to_dict()`` as the rows'
        ``seconds``; not compared by ``==``).
    """

    groups: int
    rows: list
    skipped: list
    parameters: dict
    seconds: list = field(default_factory=list, compare=False)

    def to_dict(self):
        """JSON-ready dict: ``groups``, ``parameters``, ``rows``, ``skipped``."""
        rows = [dict(row, seconds=round(seconds, 3)) for row, seconds in zip(self.rows, self.seconds)]
        return finite_or_none({"groups": self.groups, "parameters": self.parameters, "rows": rows,
                               "skipped": self.skipped})


def sweep(groups, *, r_min=2, r_max=None, methods=("sidon", "consecutive", "block"), trials=200, seed=0,
          workers=1, executor=None, system_mtbf_seconds=PAPER["system_mtbf_seconds"],
          save_seconds=PAPER["save_seconds"], restart_seconds=PAPER["restart_seconds"], time_limit=10.0,
          micro_batches=(1,), progress=None):
    """Compare layout methods over a range of redundancies by Monte-Carlo and closed forms.

    Parameters
    ----------
    groups : int
        ``N``.
    r_min, r_max : int, default 2 and ``min(20, N)``
        Redundancies ``r_min .. r_max`` (inclusive), ``1 <= r_min <= r_max <= N``.
    methods : sequence of str
        Layout methods of :func:`spare_opt.layouts.generators.generate`.  ``block`` is skipped
        where ``r`` does not divide ``N``; every skip is listed with its reason.
    trials, seed, workers, executor
        As in :func:`monte_carlo`; every (method, r) uses the same ``seed``, so methods
        are compared on the same failure orders (common random numbers).
    system_mtbf_seconds : float, default 300
        System MTBF ``m`` for ``J`` (paper: 5 min).
    save_seconds : float, default 60
        Checkpoint save time ``T_s`` (paper: 60 s).
    restart_seconds : float, default 3600
        Global restart time ``T_r`` (paper: 60 min).
    time_limit : float, default 10.0
        Seconds per layout for the Sidon generator.
    micro_batches : int or sequence of int, default (1,)
        Values of ``m`` (micro-batches per shard type): one row per (method, r, m), on
        the same layout and the same failure orders.  ``(1,)`` is the paper's sweep.
    progress : callable, optional
        ``progress(done, total)`` in trials over the whole sweep.

    Returns
    -------
    SweepResult

    Raises
    ------
    ParameterTypeError
        A size, count or seed that is not an integer; a time that is not a number;
        ``methods`` that is not a sequence of names.
    ParameterError
        A size, method or time is out of range.

    Notes
    -----
    ``j_closed_form`` is :func:`spare_opt.theory.normalised_ttt`; ``j_monte_carlo`` puts
    the Monte-Carlo ``Sbar`` and ``mu`` in the same formula:
    ``Sbar_MC / A*(mu_MC * m)``.  At ``m > 1`` the step cost replaces ``Sbar`` in both
    (``step_cost_bound`` and ``mean_step_cost``); ``mu`` does not depend on ``m``.
    """
    from ..layouts.generators import METHODS, generate

    r_min = check.integer("r_min", r_min, minimum=1)
    defaulted = r_max is None
    if defaulted:  # the paper's sweep goes to r = 20; a smaller cluster stops at r = N
        groups, _ = check_size(groups, 1)
        r_max = min(20, groups)
    r_max = check.integer("r_max", r_max, minimum=1)
    groups, _ = check_size(groups, r_max)
    if r_min > r_max and defaulted:  # no r_max given: say what bounds it
        raise ParameterError(f"r_min={check.int_text(r_min)} is above N = {groups}: a group holds r <= N shard types"
                             if r_min > groups else
                             f"r_min={check.int_text(r_min)} is above the default r_max = {r_max}: give r_max")
    if r_min > r_max:
        raise ParameterError(f"need r_min <= r_max, got r_min={check.int_text(r_min)}, r_max={r_max}")
    if isinstance(methods, str):  # "sidon,block": a single string would otherwise be split into letters
        methods = methods.split(",")
    methods = [m.strip() if isinstance(m, str) else m for m in check.sequence("methods", methods)]
    for method in methods:
        check.choice("layout method", method, METHODS)
    methods = list(dict.fromkeys(methods))  # a repeated method would only repeat its rows
    system_mtbf_seconds = check.seconds("system_mtbf_seconds", system_mtbf_seconds)
    save_seconds = check.seconds("save_seconds", save_seconds)
    restart_seconds = check.seconds("restart_seconds", restart_seconds, positive=False)
    time_limit = check.seconds("time_limit", time_limit)
    # Checked here too so that a sweep whose every combination is skipped still refuses them.
    trials = check.count("trials", trials, maximum=MAX_TRIALS)
    resolve_workers(workers)
    seed = check.seed(seed)
    check.callback("progress", progress)
    micro_values = _micro_batch_values(micro_batches, groups)
    combinations = [(method, r) for method in methods for r in range(r_min, r_max + 1)]
    total = trials * len(combinations) * len(micro_values)
    rows, skipped, seconds = [], [], []
    for index, (method, r) in enumerate(combinations):
        if method == "block" and groups % r:
            skipped.append({"method": method, "redundancy": r, "reason": f"r = {r} does not divide N = {groups}"})
            continue
        try:
            layout = generate(method, groups, r, seed=seed, time_limit=time_limit)
        except SpareError as exc:
            skipped.append({"method": method, "redundancy": r, "reason": str(exc)})
            continue
        for position, m in enumerate(micro_values):
            done_before = (index * len(micro_values) + position) * trials
            relay = None if progress is None else (lambda done, _total, base=done_before: progress(base + done, total))
            result = monte_carlo(layout, trials=trials, seed=seed, micro_batches=m, workers=workers,
                                 executor=executor, progress=relay)
            rows.append(_sweep_row(result, layout, groups, r, method, system_mtbf_seconds, save_seconds,
                                   restart_seconds))
            seconds.append(result.seconds)
    last_rows = (rows[-1]["method"], rows[-1]["redundancy"], rows[-1]["micro_batches"]) if rows else None
    if progress is not None and total and last_rows != combinations[-1] + (micro_values[-1],):
        progress(total, total)  # the last combinations were skipped: the bar still ends full
    parameters = {
        "r_min": r_min, "r_max": r_max, "methods": methods, "trials": trials, "seed": seed,
        "system_mtbf_seconds": system_mtbf_seconds, "save_seconds": save_seconds,
        "restart_seconds": restart_seconds, "time_limit": time_limit, "micro_batches": list(micro_values),
    }
    return SweepResult(groups=groups, rows=rows, skipped=skipped, parameters=parameters, seconds=seconds)


def _micro_batch_values(micro_batches, groups):
    """``micro_batches`` of :func:`sweep` as a list of distinct checked ``m``, in the given order."""
    from ..planning.plan import check_micro_batches

    if isinstance(micro_batches, (int, np.integer)) and not isinstance(micro_batches, bool):
        micro_batches = (micro_batches,)
    values = check.sequence("micro_batches", micro_batches)
    return list(dict.fromkeys(check_micro_batches(m, groups) for m in values))


def _sweep_row(result, layout, groups, r, method, system_mtbf_seconds, save_seconds, restart_seconds):
    """One row of :func:`sweep` from a :class:`MonteCarloResult`."""
    m = result.micro_batches
    a_mc = (theory.availability(save_seconds, restart_seconds, result.mu * system_mtbf_seconds)
            if result.mu > 0 else 0.0)
    if m == 1:  # the paper's J, computed as it always was
        j_closed = theory.normalised_ttt(groups, r, system_mtbf_seconds=system_mtbf_seconds,
                                         save_seconds=save_seconds, restart_seconds=restart_seconds)
    else:
        a_cf = theory.availability(save_seconds, restart_seconds, theory.mu(groups, r) * system_mtbf_seconds)
        j_closed = math.inf if a_cf == 0.0 else result.step_cost_bound / a_cf
    return {
        "method": method,
        "redundancy": r,
        "overlap": layout.overlap(),
        "layout_status": layout.metadata.get("solver_status", layout.metadata.get("status")),
        "mu": result.mu,
        "mu_ci95": list(result.mu_ci95),
        "sbar": result.sbar,
        "sbar_ci95": list(result.sbar_ci95),
        "closed_form_mu": result.closed_form_mu,
        "closed_form_sbar": result.closed_form_sbar,
        "mu_relative_error": result.mu_relative_error,
        "sbar_relative_error": result.sbar_relative_error,
        "j_closed_form": j_closed,
        "j_monte_carlo": result.mean_step_cost / a_mc if a_mc > 0 else None,
        "micro_batches": m,
        "mean_step_cost": result.mean_step_cost,
        "mean_step_cost_ci95": list(result.mean_step_cost_ci95),
        "step_cost_bound": result.step_cost_bound,
        "physical_step_cost": result.physical_step_cost,
    }

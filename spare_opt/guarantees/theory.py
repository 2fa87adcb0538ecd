"""Closed forms of the SPARe model: endurance, overhead, checkpointing and time-to-train.

Every function here is a formula, evaluated in floating point (or exact integer
arithmetic for ``c(k)`` and ``r*``); the Monte-Carlo and worst-case tools that check
them live in :mod:`spare_opt.guarantees.montecarlo` and :mod:`spare_opt.guarantees.worst_case`.

* ``c(k) = ceil(N / (N - k))`` - the stack-number lower bound after ``k`` failures;
* ``mu(N, r) ~ Gamma(1/r) / r * N^(1 - 1/r)`` - mean number of random failures masked
  before a wipe-out (independent holder sets);
* ``Sbar(N, r) >= (1/floor(mu)) * sum_{k=0}^{floor(mu)-1} c(k)`` - mean stack number until
  the wipe-out, with the layout's extra layers ``rho_k`` set to 0;
* ``(1/floor(mu)) * sum_{k=0}^{floor(mu)-1} ceil(m N / (N - k)) / m`` - the same bound on
  the mean step cost with ``m`` micro-batches per shard type, and
  ``(1/floor(mu)) * sum N / (N - k)``, the physical limit it tends to as ``m`` grows;
* ``r* = floor(log2 N + 0.833)`` - the redundancy that minimises the time-to-train;
* ``T_c* = T_s + sqrt(T_s^2 + 2 T_s (T_f + T_r))`` - optimal checkpoint period;
* ``A*(M) = 1 - T_s/T_c* - (T_c*/2 + T_r)/M`` - availability under optimal checkpointing
  when unmasked failures (wipe-outs) come every ``M`` seconds on average;
* ``J(r) = Sbar(N, r) / A*(mu(N, r) * m)`` - time-to-train normalised by the fault-free
  time-to-train at one layer of compute.

References
----------
.. [1] Lee et al., "SPARe: Stacked Parallelism with Adaptive Reordering for
   Fault-Tolerant LLM Pretraining Systems with 100k+ GPUs", ICML 2026,
   arXiv:2603.00357, Sec. 4-5.
.. [2] J. W. Young, "A first order approximation to the optimum checkpoint interval",
   Communications of the ACM 17(9), 1974.
.. [3] J. T. Daly, "A higher order estimate of the optimum checkpoint interval for
   restart dumps", Future Generation Computer Systems 22(3), 2006.
.. [4] Saxena et al., availability-optimal checkpointing for large-scale training
   (2024), the source of ``A*`` cited by [1].
"""

import math
import sys


from .._core import validation as check
from .._core.errors import ParameterError
from ..layouts.layout import check_size
from .._core.paper import PAPER_MTBF_SECONDS, PAPER_RESTART_SECONDS, PAPER_SAVE_SECONDS
from ..planning.plan import lower_bound

__all__ = [
    "PAPER_MTBF_SECONDS",
    "PAPER_RESTART_SECONDS",
    "PAPER_SAVE_SECONDS",
    "stack_lower_bound",
    "mu",
    "sbar_lower_bound",
    "step_cost_lower_bound",
    "physical_step_cost",
    "r_star",
    "checkpoint_period",
    "availability",
    "normalised_ttt",
]



def stack_lower_bound(groups, failed):
    """The stack-number lower bound ``c(k) = ceil(N / (N - k))``.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N >= 1``.
    failed : int
        Number of failed groups ``k``, ``0 <= k < N``.

    Returns
    -------
    int
        ``c(k)``: the ``N`` shard types spread over ``N - k`` live groups need at least
        this many layers on some group (pigeonhole).

    Raises
    ------
    ParameterTypeError
        ``N`` or ``k`` is not an integer.
    ParameterError
        ``N < 1``, or ``k`` is not in ``[0, N)``.

    References
    ----------
    Lee et al., ICML 2026, Sec. 4 (``c(k)``).

    Examples
    --------
    >>> stack_lower_bound(600, 0), stack_lower_bound(600, 300), stack_lower_bound(600, 301)
    (1, 2, 3)
    """
    groups = check.integer("groups N", groups, minimum=1)
    failed = check.integer("failed groups k", failed, minimum=0, maximum=groups - 1)
    return lower_bound(groups, failed)


def mu(groups, redundancy):
    """Mean number of random failures masked before a wipe-out (closed form).

    ``mu(N, r) ~ Gamma(1/r) / r * N^(1 - 1/r)``.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N >= 1``.
    redundancy : int
        Redundancy ``r``, ``1 <= r <= N``.

    Returns
    -------
    float
        Expected failures masked (a count, no unit).

    Raises
    ------
    ParameterError
        ``N`` or ``r`` out of range (see :func:`spare_opt.layouts.layout.check_size`).

    Notes
    -----
    Asymptotic in ``N`` for *independent* holder sets: failures in uniformly random
    order, the ``N`` shard types each wiped out once all ``r`` of their holders have
    failed, treated as independent events.  After ``k`` failures a given type is lost
    with probability ``~ (k/N)^r``, so the first loss among ``N`` types is a Weibull
    minimum with shape ``r`` whose mean gives the formula.  Correlated holder sets
    (consecutive, block) share holders and deviate from it; see ``docs/analysis.md``.
    For ``r = 1`` it gives 1 whereas the first failure already wipes out (0 masked).

    References
    ----------
    Lee et al., ICML 2026, Sec. 4-5.

    Examples
    --------
    >>> round(mu(600, 20), 1)
    424.2
    """
    groups, redundancy = check_size(groups, redundancy, max_groups=None)
    too_large = ParameterError(f"N = {check.int_text(groups)}, r = {check.int_text(redundancy)}: "
                               "mu overflows a float")
    try:
        inverse = 1.0 / redundancy
        try:
            power = groups ** (1.0 - inverse)
        except OverflowError:  # N beyond the float range: the power through logarithms
            exponent = (1.0 - inverse) * math.log(groups)
            if exponent > _MAX_LOG_FLOAT:
                raise too_large from None
            power = math.exp(exponent)
        return math.gamma(inverse) / redundancy * power
    except OverflowError:
        raise too_large from None


def sbar_lower_bound(groups, redundancy):
    """Lower bound on the mean stack number until the wipe-out (``rho_k = 0``).

    ``Sbar(N, r) >= (1/floor(mu)) * sum_{k=0}^{floor(mu)-1} c(k)``.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N >= 1``.
    redundancy : int
        Redundancy ``r``, ``1 <= r <= N``.

    Returns
    -------
    float
        Mean number of stack layers each live group computes per step (1 = fault-free
        cost; replication of degree ``r`` costs ``r``).

    Raises
    ------
    ParameterError
        ``N`` or ``r`` out of range.

    Notes
    -----
    The paper's form is ``(1/floor(mu)) * sum (c(k) + rho_k)`` where ``rho_k`` are the
    layers above ``c(k)`` that the layout forces; with ``rho_k = 0`` it is a lower bound.
    ``floor(mu)`` is clipped to ``[1, N - 1]`` so that every ``c(k)`` is defined.

    References
    ----------
    Lee et al., ICML 2026, Sec. 4-5.
    """
    groups, redundancy = check_size(groups, redundancy, max_groups=None)
    terms = _terms(groups, redundancy)
    return _sum_ceil_ratios(groups, groups - terms + 1) / terms


def step_cost_lower_bound(groups, redundancy, micro_batches=1):
    """Lower bound on the mean step cost until the wipe-out with ``m`` micro-batches per shard type.

    ``(1/floor(mu)) * sum_{k=0}^{floor(mu)-1} ceil(m N / (N - k)) / m``.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N >= 1``.
    redundancy : int
        Redundancy ``r``, ``1 <= r <= N``.
    micro_batches : int, default 1
        ``m >= 1``, micro-batches per shard type (``docs/planner.md``, "Micro-batches").

    Returns
    -------
    float
        Mean step cost (layers' worth of work per live group per step; 1 = fault-free).
        At ``m = 1`` it is :func:`sbar_lower_bound` exactly.

    Raises
    ------
    ParameterTypeError
        ``N``, ``r`` or ``m`` is not an integer.
    ParameterError
        ``N``, ``r`` out of range, or ``m < 1``.

    Notes
    -----
    After ``k`` failures the ``m N`` micro-batches are spread over ``N - k`` live
    groups, so some group computes at least ``ceil(m N / (N - k))`` of them (the set
    ``T`` of all shard types in Hall's formula ``L* = max_T ceil(m |T| / |H(T)|)``);
    the step cost is ``L* / m``.  The mean is over the same ``k = 0 .. floor(mu) - 1``
    as :func:`sbar_lower_bound` (``floor(mu)`` clipped to ``[1, N - 1]``), the
    closed-form counterpart of :attr:`spare_opt.MonteCarloResult.mean_step_cost`.

    References
    ----------
    Lee et al., ICML 2026, Sec. 4-5; P. Hall, "On representatives of subsets", 1935.

    Examples
    --------
    >>> round(step_cost_lower_bound(600, 8, 8), 4), step_cost_lower_bound(600, 8) == sbar_lower_bound(600, 8)
    (1.3622, True)
    """
    groups, redundancy = check_size(groups, redundancy, max_groups=None)
    m = check.integer("micro_batches m", micro_batches, minimum=1)
    terms = _terms(groups, redundancy)
    return _sum_ceil_ratios(groups, groups - terms + 1, numerator=m * groups) / (terms * m)


def physical_step_cost(groups, redundancy):
    """The physical limit of the mean step cost until the wipe-out: the mean of ``N / (N - k)``.

    ``(1/floor(mu)) * sum_{k=0}^{floor(mu)-1} N / (N - k)``, over the same ``k`` as
    :func:`step_cost_lower_bound`, which tends to it as ``m`` grows.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N >= 1``.
    redundancy : int
        Redundancy ``r``, ``1 <= r <= N``.

    Returns
    -------
    float
        Mean of the work per live group when the lost groups' work is shared exactly
        evenly (no plan can do better: ``L* / m >= N / (N - k)``).

    Raises
    ------
    ParameterTypeError
        ``N`` or ``r`` is not an integer.
    ParameterError
        ``N`` or ``r`` out of range.

    Notes
    -----
    ``sum_{k=0}^{K-1} N / (N - k) = N (H_N - H_{N-K})`` with harmonic numbers ``H``;
    summed exactly in floating point (``math.fsum``) up to a million terms, beyond
    through the digamma function, ``H_n = psi(n + 1) + gamma``.

    Examples
    --------
    >>> round(physical_step_cost(600, 8), 4)
    1.2972
    """
    groups, redundancy = check_size(groups, redundancy, max_groups=None)
    terms = _terms(groups, redundancy)
    if terms <= 1_000_000:
        total = math.fsum(groups / (groups - k) for k in range(terms))
    else:
        from scipy.special import digamma

        total = groups * float(digamma(groups + 1.0) - digamma(groups - terms + 1.0))
    return total / terms


def _terms(groups, redundancy):
    """``floor(mu)`` clipped to ``[1, N - 1]``: the number of states the closed forms average."""
    terms = int(math.floor(mu(groups, redundancy)))
    return max(1, min(terms, groups - 1)) if groups > 1 else 1


def _sum_ceil_ratios(n, low, numerator=None):
    """``sum_{j=low}^{n} ceil(M / j)`` (``M = numerator``, default ``n``), in exact integer arithmetic.

    With ``M = n`` it is ``sum_{k=0}^{n-low} c(k)``; with ``M = m n`` the micro-batch
    loads ``sum ceil(m n / (n - k))``.  ``ceil(M / j) = floor((M - 1) / j) + 1`` takes
    each value on a block of consecutive ``j`` (the divisor-block trick), so the sum
    costs one step per distinct value, at most ``min(M / low, 2 sqrt(M)) + 1``, instead
    of one per term: ``N`` may be far larger than an array can hold.
    """
    top = (n if numerator is None else numerator) - 1
    total = n - low + 1  # the "+ 1" of every term
    m = low
    steps = 0
    while m <= n and top // m > 0:
        value = top // m
        last = min(n, top // value)  # the largest m' with floor(top / m') == value
        total += value * (last - m + 1)
        m = last + 1
        steps += 1
        if steps > _MAX_BLOCKS:
            raise ParameterError(f"N = {check.int_text(n)} is too large for the exact sum of ceilings")
    return total


#: ``log`` of the largest float.
_MAX_LOG_FLOAT = math.log(sys.float_info.max) - 1.0
#: Divisor blocks :func:`_sum_ceil_ratios` walks at most (well under a second).
_MAX_BLOCKS = 1_000_000


def r_star(groups):
    """The closed-form optimal redundancy ``r* = floor(log2 N + 0.833)``.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N >= 1``.

    Returns
    -------
    int
        ``r*``, clipped to ``[1, N]``.

    Raises
    ------
    ParameterTypeError
        ``N`` is not an integer.
    ParameterError
        ``N < 1``.

    References
    ----------
    Lee et al., ICML 2026, Sec. 5.

    Examples
    --------
    >>> r_star(200), r_star(600), r_star(1000)
    (8, 10, 10)
    """
    groups = check.integer("groups N", groups, minimum=1)
    return max(1, min(groups, int(math.floor(math.log2(groups) + 0.833))))


def checkpoint_period(save_seconds, restart_seconds, unmasked_mtbf_seconds):
    """Optimal checkpoint period ``T_c* = T_s + sqrt(T_s^2 + 2 T_s (T_f + T_r))``.

    Parameters
    ----------
    save_seconds : float
        Checkpoint save time ``T_s`` in seconds, ``> 0``.
    restart_seconds : float
        Global restart time ``T_r`` in seconds, ``>= 0``.
    unmasked_mtbf_seconds : float
        Mean time between *unmasked* failures ``T_f`` in seconds, ``> 0``: every failure
        for checkpointing alone, the wipe-outs for SPARe (``mu * m``, ``m`` the system
        MTBF).

    Returns
    -------
    float
        ``T_c*`` in seconds.

    Raises
    ------
    ParameterTypeError
        A time is not a number.
    ParameterError
        A time is not finite or out of range, or ``T_c*`` overflows.

    References
    ----------
    Young (1974) first-order period ``sqrt(2 T_s T_f)``; Daly (2006) higher-order
    correction; the form above is the one used in spare-model.md for Lee et al.,
    ICML 2026, Sec. 5.
    """
    t_s = check.seconds("save_seconds", save_seconds)
    t_r = check.seconds("restart_seconds", restart_seconds, positive=False)
    t_f = check.seconds("unmasked_mtbf_seconds", unmasked_mtbf_seconds)
    period = t_s + math.sqrt(t_s * t_s + 2.0 * t_s * (t_f + t_r))
    if not math.isfinite(period):  # the product overflowed: factor it
        period = t_s + math.sqrt(2.0 * t_s) * math.sqrt(0.5 * t_s + t_f + t_r)
    if not math.isfinite(period):
        raise ParameterError(f"checkpoint period overflows for T_s = {t_s}, T_r = {t_r}, T_f = {t_f} seconds")
    return period


def availability(save_seconds, restart_seconds, unmasked_mtbf_seconds):
    """Availability ``A*(M)`` under optimal checkpointing (first-order Young/Daly waste).

    ``A*(M) = 1 - T_s / T_c - (T_c / 2 + T_r) / M`` at ``T_c = T_c*``
    (:func:`checkpoint_period` with ``T_f = M``), clipped to ``[0, 1]``.  The times come
    in the same order as for :func:`checkpoint_period`.

    Parameters
    ----------
    save_seconds : float
        Checkpoint save time ``T_s`` in seconds, ``> 0``.
    restart_seconds : float
        Global restart time ``T_r`` in seconds, ``>= 0``.
    unmasked_mtbf_seconds : float
        Mean time between unmasked failures ``M`` in seconds, ``> 0`` (``inf`` gives 1).

    Returns
    -------
    float
        Fraction of wall-clock time spent on useful training, in ``[0, 1]``.

    Raises
    ------
    ParameterTypeError
        A time is not a number.
    ParameterError
        A time is NaN or out of range.

    Notes
    -----
    The waste has three parts: the save time per period (``T_s / T_c``), and per unmasked
    failure the lost half period of work plus the restart (``(T_c/2 + T_r) / M``).  This
    is the first-order model of Young (1974) and Daly (2006); the paper takes ``A*``
    from the availability-optimal analysis of Saxena et al. (2024), which this textbook
    form approximates.  Where the waste exceeds 1 (failures faster than restarts), the
    first-order model no longer holds and 0 is returned.

    References
    ----------
    Young, CACM 17(9), 1974; Daly, FGCS 22(3), 2006; Lee et al., ICML 2026, Sec. 5.
    """
    t_s = check.seconds("save_seconds", save_seconds)
    t_r = check.seconds("restart_seconds", restart_seconds, positive=False)
    m = check.seconds("unmasked_mtbf_seconds", unmasked_mtbf_seconds, allow_inf=True)
    if math.isinf(m):
        return 1.0
    t_c = checkpoint_period(t_s, t_r, m)
    waste = t_s / t_c + (t_c / 2.0 + t_r) / m
    return min(1.0, max(0.0, 1.0 - waste))


def normalised_ttt(groups, redundancy, *, system_mtbf_seconds=PAPER_MTBF_SECONDS,
                   save_seconds=PAPER_SAVE_SECONDS, restart_seconds=PAPER_RESTART_SECONDS):
    """Normalised time-to-train ``J(r) = Sbar(N, r) / A*(mu(N, r) * m)``.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N >= 1``.
    redundancy : int
        Redundancy ``r``, ``1 <= r <= N``.
    system_mtbf_seconds : float, default 300
        System MTBF ``m`` in seconds (one failure of any group every ``m`` on average).
    save_seconds : float, default 60
        Checkpoint save time ``T_s`` in seconds.
    restart_seconds : float, default 3600
        Global restart time ``T_r`` in seconds.

    Returns
    -------
    float
        Time-to-train divided by the fault-free time-to-train at one layer of compute
        (``inf`` when ``A* = 0``).

    Raises
    ------
    ParameterTypeError, ParameterError
        An argument of the wrong type or out of range.

    Notes
    -----
    Uses :func:`sbar_lower_bound` (``rho_k = 0``) and :func:`availability` with
    ``M = mu * m``: wipe-outs come every ``mu`` failures.

    References
    ----------
    Lee et al., ICML 2026, Sec. 5.
    """
    m = check.seconds("system_mtbf_seconds", system_mtbf_seconds)
    a = availability(save_seconds, restart_seconds, mu(groups, redundancy) * m)
    s = sbar_lower_bound(groups, redundancy)
    return math.inf if a == 0.0 else s / a

"""Small statistics and JSON helpers shared by the analysis, simulation and tuning reports."""

import inspect
import math
from typing import NamedTuple

import numpy as np

__all__ = ["Interval", "interval95", "mean_ci95", "finite_or_none", "weibull_renewals", "MIN_BOOTSTRAP_RUNS"]


#: Fewest runs for a bootstrap interval (used when the Student t interval leaves the
#: quantity's bounds); with fewer, no interval is claimed.
MIN_BOOTSTRAP_RUNS = 10
#: Resamples of the bootstrap, and its fixed seed (intervals are deterministic).
BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0


class Interval(NamedTuple):
    """A mean and its two-sided 95% confidence interval, or why there is none.

    Attributes
    ----------
    mean : float
    low, high : float
        The interval; NaN when none can be given.
    method : str or None
        ``"t"`` (Student t), ``"bootstrap"`` (BCa) or ``None`` (no interval).
    note : str or None
        Why there is no interval (``None`` when there is one).
    """

    mean: float
    low: float
    high: float
    method: str | None
    note: str | None


def interval95(values, *, lower=None, upper=None):
    """Sample mean and a 95% confidence interval of the mean that respects the quantity's bounds.

    Parameters
    ----------
    values : array_like of float, shape (n,)
        One value per run (seed, trial).
    lower, upper : float, optional
        Bounds of the quantity (availability in ``[0, 1]``, counts ``>= 0``, a stack
        number ``>= 1``...).

    Returns
    -------
    Interval
        ``(mean, low, high, method, note)``; ``lower <= low <= high <= upper``
        whenever an interval is given.

    Notes
    -----
    The Student t interval ``mean +- t_{0.975, n-1} s / sqrt(n)`` is used when it lies
    within the bounds: it is exact for normal data and the usual choice.  When it
    crosses a bound, the normal approximation is visibly wrong for this sample (too
    few runs, or a skewed quantity near its bound); then, with at least
    :data:`MIN_BOOTSTRAP_RUNS` runs, the bias-corrected and accelerated (BCa)
    bootstrap interval of the mean is given (``scipy.stats.bootstrap``, 9999
    resamples, fixed seed): its ends are quantiles of resampled means, so they stay
    within the range of the data and hence within the bounds.  With fewer runs no
    interval is claimed and ``note`` says so.  One run, or a value that is not finite
    (an unfinished run's infinite time), gives no interval either.

    References
    ----------
    B. Efron, "Better bootstrap confidence intervals", J. Amer. Statist. Assoc. 82
    (1987) 171-185 (BCa).
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    n = values.size
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, None, "no runs")
    if not np.all(np.isfinite(values)):
        mean = float(values.mean()) if not np.any(np.isnan(values)) else math.nan
        return Interval(mean, math.nan, math.nan, None, "no interval: a run did not finish (its value is infinite)")
    mean = float(values.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, None, "no interval: one run (seed) gives none")
    spread = float(values.std(ddof=1))
    if spread == 0.0:
        return Interval(mean, mean, mean, "t", None)
    # Student t quantile: scipy.special.stdtrit is what scipy.stats.t.ppf evaluates (the
    # same number), without importing scipy.stats (over a second) on the common path.
    from scipy.special import stdtrit

    half = float(stdtrit(n - 1, 0.975)) * spread / math.sqrt(n)
    low, high = mean - half, mean + half
    if (lower is None or low >= lower) and (upper is None or high <= upper):
        return Interval(mean, low, high, "t", None)
    bounds = f"[{'-inf' if lower is None else f'{lower:g}'}, {'inf' if upper is None else f'{upper:g}'}]"
    if n < MIN_BOOTSTRAP_RUNS:
        return Interval(mean, math.nan, math.nan, None,
                        f"no interval: {n} runs are too few for a 95% interval within {bounds} "
                        f"(the Student t interval leaves it; {MIN_BOOTSTRAP_RUNS} runs give a bootstrap one)")
    from scipy import stats

    seeded = {rng_keyword(stats.bootstrap): np.random.default_rng(BOOTSTRAP_SEED)}
    result = stats.bootstrap((values,), np.mean, n_resamples=BOOTSTRAP_RESAMPLES, method="BCa", **seeded)
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):  # BCa undefined (degenerate resamples)
        seeded = {rng_keyword(stats.bootstrap): np.random.default_rng(BOOTSTRAP_SEED)}
        result = stats.bootstrap((values,), np.mean, n_resamples=BOOTSTRAP_RESAMPLES, method="percentile", **seeded)
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    # Quantiles of resampled means lie within [min, max] of the data; clip the last ulp.
    low, high = max(low, float(values.min())), min(high, float(values.max()))
    return Interval(mean, low, high, "bootstrap", None)


def mean_ci95(values, *, lower=None, upper=None):
    """Sample mean and 95% confidence interval of the mean, within ``[lower, upper]``.

    Parameters
    ----------
    values : array_like of float, shape (n,)
    lower, upper : float, optional
        Bounds of the quantity; see :func:`interval95`.

    Returns
    -------
    mean : float
    ci95 : tuple of float
        ``(low, high)``; ``(nan, nan)`` where no interval can be given
        (:func:`interval95` says why).
    """
    result = interval95(values, lower=lower, upper=upper)
    return result.mean, (result.low, result.high)


def finite_or_none(value):
    """``value`` with every NaN or infinity replaced by ``None`` (JSON has no such numbers).

    Dicts, lists and tuples are walked recursively (tuples become lists); numpy
    scalars become Python numbers.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(item) for item in value]
    return value


def weibull_renewals(horizon, mean, shape):
    """Expected number of renewals of a Weibull renewal process up to ``horizon`` (within a factor 2).

    The number of draws a sampling loop ``t += X`` makes before ``t`` passes
    ``horizon``.  With a heavy tail (shape ``k`` well below 1) most draws are tiny and
    the mean is carried by rare huge ones, so this count can exceed ``horizon / mean``
    by many orders of magnitude (``k = 0.01`` on the InfiniteHBD setting: about
    ``10^17`` draws instead of 506); the loops of spare-opt refuse such parameters
    before they spin.

    Parameters
    ----------
    horizon : float
        ``T > 0``, in the unit of ``mean``.
    mean : float
        Mean of the Weibull draws, ``> 0``.
    shape : float
        Weibull shape ``k > 0`` (``Gamma(1 + 1/k)`` must be finite).

    Returns
    -------
    float
        ``T / E[min(X, T)]``; may be ``inf``.

    Notes
    -----
    Draws beyond ``T`` end the loop, so the count is that of the renewal process of
    ``Y = min(X, T)``.  Wald's identity and Lorden's bound give
    ``T / E[Y] <= E[N(T) + 1] <= T / E[Y] + E[Y^2] / E[Y]^2 <= 2 T / E[Y]``, with
    ``E[Y] = s Gamma(1 + 1/k) P(1 + 1/k, (T/s)^k) + T exp(-(T/s)^k)``, ``s`` the
    Weibull scale and ``P`` the regularised lower incomplete gamma function.

    References
    ----------
    G. Lorden, "On excess over the boundary", Ann. Math. Statist. 41 (1970) 520-527.
    """
    from scipy.special import gammainc

    # x = (T / s)^k in logarithms: the scale s = mean / Gamma(1 + 1/k) may be ~1e-306.
    log_ratio = math.log(horizon) - math.log(mean) + math.lgamma(1.0 + 1.0 / shape)
    exponent = shape * log_ratio
    x = math.inf if exponent > 700.0 else math.exp(exponent)
    truncated = mean * float(gammainc(1.0 + 1.0 / shape, x)) + (horizon * math.exp(-x) if x < 745.0 else 0.0)
    if truncated <= 0.0:
        return math.inf
    return horizon / truncated


def rng_keyword(function):
    """The name of the seed argument of a scipy function: ``rng`` (scipy >= 1.15) or ``random_state``.

    The project supports scipy >= 1.11 (pyproject.toml), before ``rng`` existed.
    """
    return "rng" if "rng" in inspect.signature(function).parameters else "random_state"

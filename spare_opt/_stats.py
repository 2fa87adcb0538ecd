"""Small statistics and JSON helpers shared by the analysis, simulation and tuning reports."""

import math

import numpy as np

__all__ = ["mean_ci95", "finite_or_none"]


def mean_ci95(values):
    """Sample mean and two-sided 95% Student-t confidence interval of the mean.

    Parameters
    ----------
    values : array_like of float, shape (n,)

    Returns
    -------
    mean : float
    ci95 : tuple of float
        ``(low, high)``; ``(nan, nan)`` when ``n < 2`` or a value is not finite, where
        no interval can be given.

    Notes
    -----
    ``mean +- t_{0.975, n-1} s / sqrt(n)`` with ``s`` the sample standard deviation
    (``scipy.stats.t``).
    """
    from scipy import stats

    values = np.asarray(values, dtype=np.float64)
    mean = float(values.mean())
    if values.size < 2 or not np.all(np.isfinite(values)):
        return mean, (math.nan, math.nan)
    half = float(stats.t.ppf(0.975, values.size - 1)) * float(values.std(ddof=1)) / math.sqrt(values.size)
    return mean, (mean - half, mean + half)


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

"""The repair-time part of a fit: median, mean and a lognormal fit, with right- and left-censoring.

Private to :mod:`spare_opt.traces.fit` (:func:`~spare_opt.traces.fit.fit_trace` documents
the rules), which also uses the profile-likelihood interval search for its Weibull shape.

References
----------
Lawless, *Statistical Models and Methods for Lifetime Data*, 2nd ed., Wiley 2003:
lognormal maximum likelihood with censored data (Sec. 5.3), profile likelihood
intervals (Sec. 3.3), Kaplan-Meier estimate (Sec. 3.2).
"""

import math

import numpy as np

from .._core.stats import rng_keyword
from ._fit_report import _duration
from .failure_model import Estimate, SECONDS_PER_DAY, SECONDS_PER_HOUR, _BRACKET_STEPS

#: Relative difference below which two durations count as equal (float noise of differences of times).
_SAME = 1e-9


def _profile_bounds(profile, estimate, maximum, confidence, step):
    """The two points where ``profile`` falls ``chi2_1(confidence) / 2`` below ``maximum``.

    The search steps out from ``estimate`` by ``step``, doubling it each time
    (:data:`_BRACKET_STEPS` times at most), halves back a step whose profile is not
    finite, and solves the bracket with Brent's method; a side that never falls far
    enough gives ``-inf`` / ``inf``.
    """
    from scipy import optimize, stats

    drop = stats.chi2.ppf(confidence, 1) / 2.0

    def gap(theta):
        return maximum - profile(theta) - drop

    bounds = []
    for direction in (-1.0, 1.0):
        inner, width, found = estimate, step, direction * math.inf
        for _ in range(_BRACKET_STEPS):
            outer = inner + direction * width
            value = gap(outer)
            if not math.isfinite(value):  # overflow far out: come back halfway
                width /= 2.0
                continue
            if value > 0:
                found = optimize.brentq(gap, min(inner, outer), max(inner, outer),
                                        xtol=1e-12 * max(1.0, abs(outer)))
                break
            inner, width = outer, width * 2.0
        bounds.append(found)
    return bounds[0], bounds[1]


def _censored_normal_loglik(observed, right, left):
    """Log-likelihood of a normal sample with right- and left-censored values (constants dropped).

    Written with ``scipy.special.log_ndtr`` (the log of the normal CDF, accurate in
    the tails) rather than ``scipy.stats.norm``, whose per-call overhead dominates
    the profile-likelihood searches.
    """
    from scipy.special import log_ndtr

    def loglik(mu, sigma):
        z = (observed - mu) / sigma
        return float(-0.5 * (z @ z) - observed.size * math.log(sigma)
                     + log_ndtr((mu - right) / sigma).sum() + log_ndtr((left - mu) / sigma).sum())

    return loglik


def _lognormal_fit(done_seconds, open_seconds, resolution_seconds, confidence):
    """Lognormal fit of repair times: ``(mu, sigma, mu interval, sigma interval, method)`` or a reason string."""
    from scipy import optimize, stats

    positive = done_seconds[done_seconds > 0]
    zeros = int((done_seconds == 0).sum())
    left = np.full(zeros if math.isfinite(resolution_seconds) else 0, resolution_seconds)
    right = open_seconds[open_seconds > 0]  # a fault opened at the window's end says nothing
    if positive.size < 2:
        return f"the lognormal fit needs at least 2 positive repair times, got {positive.size}"
    if np.ptp(np.log(positive)) <= _SAME:
        # The maximum-likelihood sigma of equal values is 0: no lognormal (a point mass).
        return (f"all {positive.size:,} positive repair times are equal ({_duration(float(positive[0]))}, to a "
                f"relative {_SAME:g}): the lognormal's maximum-likelihood sigma would be 0, so the fit needs "
                "repair times that differ")
    if left.size == 0 and right.size == 0:
        sigma, _, scale = stats.lognorm.fit(positive, floc=0)
        mu, sigma = math.log(scale), float(sigma)
        logs = np.log(positive)
        n = logs.size
        sd = float(logs.std(ddof=1))
        half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
        sigma_ci = (sd * math.sqrt((n - 1) / stats.chi2.ppf((1 + confidence) / 2, n - 1)),
                    sd * math.sqrt((n - 1) / stats.chi2.ppf((1 - confidence) / 2, n - 1)))
        return mu, sigma, (mu - half, mu + half), sigma_ci, "exact (Student t, chi-square)"
    # The likelihood of scipy.stats.lognorm.fit(CensoredData(...), floc=0), on the log scale
    # with a vectorised objective (tests check both give the same fit); the start is the
    # fit of the uncensored values.
    logs = np.log(positive)
    loglik = _censored_normal_loglik(logs, np.log(right), np.log(left))
    best = optimize.minimize(lambda p: -loglik(p[0], math.exp(p[1])), x0=[float(logs.mean()), math.log(logs.std())],
                             method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 4000})
    mu, log_sigma = float(best.x[0]), float(best.x[1])
    top = -float(best.fun)
    n = positive.size + left.size + right.size

    def profile_mu(value):
        inner = optimize.minimize_scalar(lambda s: -loglik(value, math.exp(s)), bracket=(log_sigma - 0.5, log_sigma))
        return -float(inner.fun)

    def profile_log_sigma(value):
        sigma = math.exp(value)
        inner = optimize.minimize_scalar(lambda m: -loglik(m, sigma), bracket=(mu - sigma, mu))
        return -float(inner.fun)

    sigma = math.exp(log_sigma)
    mu_ci = _profile_bounds(profile_mu, mu, top, confidence, step=sigma / math.sqrt(n))
    log_sigma_ci = _profile_bounds(profile_log_sigma, log_sigma, top, confidence, step=1.0 / math.sqrt(2 * n))
    return mu, sigma, mu_ci, (math.exp(log_sigma_ci[0]), math.exp(log_sigma_ci[1])), "profile likelihood (censored)"


def _median_interval(done, open_, confidence):
    """Median repair time with its interval: order statistics, or Kaplan-Meier when censored."""
    import warnings

    from scipy import stats

    if open_.size == 0:
        median = float(np.median(done))
        if done.size < 2:
            return Estimate(median)
        ci = stats.quantile_test(done, q=median, p=0.5).confidence_interval(confidence)
        return Estimate(median, float(ci.low), float(ci.high))
    km = stats.ecdf(stats.CensoredData(uncensored=done, right=open_)).sf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the band is undefined where S(t) is 0 or 1
        band = km.confidence_interval(confidence, method="log-log")
    return Estimate(_first_below_half(km), _first_below_half(band.low), _first_below_half(band.high))


def _first_below_half(curve):
    """Smallest time at which a survival curve is at or below 0.5 (``inf`` if it never is)."""
    probabilities = np.nan_to_num(curve.probabilities, nan=1.0)
    below = np.flatnonzero(probabilities <= 0.5)
    return float(curve.quantiles[below[0]]) if below.size else math.inf


def _mean_interval(values, confidence, resamples, seed):
    """Sample mean with a BCa bootstrap interval (NaN bounds when every value is equal or n < 2)."""
    import warnings

    from scipy import stats

    mean = float(values.mean())
    if values.size < 2 or np.unique(values).size < 2:
        return Estimate(mean)
    options = {rng_keyword(stats.bootstrap): np.random.default_rng(seed)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BCa warns on degenerate resamples; the interval is still given
        result = stats.bootstrap((values,), np.mean, confidence_level=confidence, n_resamples=resamples,
                                 method="BCa", batch=100, **options)
    return Estimate(mean, float(result.confidence_interval.low), float(result.confidence_interval.high))


def _repairs(fault_start, fault_end, end, resolution, confidence, resamples, seed):
    from scipy import stats

    closed = ~np.isnan(fault_end)
    done_days = fault_end[closed] - fault_start[closed]
    open_days = end - fault_start[~closed]
    hours = 24.0
    result = {"completed": int(done_days.size), "open": int(open_days.size),
              "below_resolution": int((done_days == 0).sum()),
              "max_hours": float(done_days.max() * hours) if done_days.size else math.nan,
              "longest_open_hours": float(open_days.max() * hours) if open_days.size else math.nan}
    none = Estimate(math.nan)
    lognormal_empty = dict(lognormal_median_hours=none, lognormal_sigma=none, lognormal_mean_hours=math.nan,
                           lognormal_ci_method=None, lognormal_fit_p_value=math.nan)
    if done_days.size == 0:
        result.update(median_hours=none, mean_hours=none, mean_is_lower_bound=None, **lognormal_empty,
                      reason=f"no repair completed ({open_days.size} still open at the end of the window: "
                             "no repair time observed)")
        return result
    result["median_hours"] = _median_interval(done_days, open_days, confidence).scaled(hours)
    result["mean_hours"] = _mean_interval(np.concatenate((done_days, open_days)), confidence, resamples,
                                          seed).scaled(hours)
    result["mean_is_lower_bound"] = bool(open_days.size > 0)
    fit = _lognormal_fit(done_days * SECONDS_PER_DAY, open_days * SECONDS_PER_DAY, resolution * SECONDS_PER_DAY,
                         confidence)
    if isinstance(fit, str):
        result.update(lognormal_empty, reason=fit)
        return result
    mu, sigma, mu_ci, sigma_ci, method = fit
    to_hours = 1.0 / SECONDS_PER_HOUR
    result.update(
        lognormal_median_hours=Estimate(math.exp(mu) * to_hours, math.exp(mu_ci[0]) * to_hours,
                                        math.exp(mu_ci[1]) * to_hours),
        lognormal_sigma=Estimate(sigma, sigma_ci[0], sigma_ci[1]),
        lognormal_mean_hours=_safe_exp(mu + sigma**2 / 2.0) * to_hours,
        lognormal_ci_method=method,
        lognormal_median_seconds=math.exp(mu),
    )
    positive = done_days[done_days > 0] * SECONDS_PER_DAY
    if open_days.size == 0 and positive.size >= 3 and np.unique(positive).size >= 3:
        options = {rng_keyword(stats.goodness_of_fit): np.random.default_rng(seed)}
        test = stats.goodness_of_fit(stats.lognorm, positive, known_params={"loc": 0}, statistic="ad",
                                     n_mc_samples=resamples, **options)
        result["lognormal_fit_p_value"] = float(test.pvalue)
        result["lognormal_fit_test"] = (f"Anderson-Darling, Monte-Carlo p-value, on the {positive.size} "
                                        "positive durations")
    else:
        result["lognormal_fit_p_value"] = math.nan
        result["lognormal_fit_test"] = ("not run: needs 3 different positive durations and no open fault "
                                        "(the test does not take censored data)")
    return result


def _safe_exp(value):
    try:
        return math.exp(value)
    except OverflowError:
        return math.inf

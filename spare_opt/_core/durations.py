"""Durations in readable text, however large (private).

A restart time of ``1e300`` s is valid input (a what-if of a cluster that never comes
back), but printed in days it is a number of 300 digits.  From a million years on,
every duration the CLI and the reports print is given in years, in scientific notation
(``"2.0e+292 years"``); below that, each report keeps its own unit and precision.
"""

import math

#: Seconds in a Julian year (365.25 days).
SECONDS_PER_YEAR = 365.25 * 86400.0
#: From this duration on (a million years), :func:`duration_in` prints years in scientific notation.
HUGE_SECONDS = 1e6 * SECONDS_PER_YEAR


def huge_duration(seconds):
    """``"{years:.2g} years"`` (e.g. ``"2e+292 years"``) for ``seconds >= HUGE_SECONDS``,
    else ``None`` (also for NaN and infinities, which each report prints its own way)."""
    if not math.isfinite(seconds) or abs(seconds) < HUGE_SECONDS:
        return None
    return f"{seconds / SECONDS_PER_YEAR:.2g} years"


def duration_in(seconds, unit_seconds, unit, spec):
    """``seconds`` as ``f"{seconds / unit_seconds:{spec}} {unit}"``, or in years from
    :data:`HUGE_SECONDS` on (:func:`huge_duration`).

    Examples
    --------
    >>> duration_in(7200.0, 3600.0, "h", ".1f")
    '2.0 h'
    >>> duration_in(1e308, 86400.0, "d", ".1f")
    '3.2e+300 years'
    """
    huge = huge_duration(seconds)
    if huge is not None:
        return huge
    return f"{seconds / unit_seconds:{spec}} {unit}"

"""The failure model that simulations sample from: event MTBF, Weibull shape, event sizes, repairs.

A :class:`FailureModel` holds the few numbers a simulation needs (the mean time
between failure events, the Weibull shape of their gaps, how many nodes an event
takes down, the repair times, the cluster size), with a JSON file form
(:meth:`FailureModel.save`, :meth:`FailureModel.load`) and a sampler of synthetic fault
traces (:meth:`FailureModel.sample_trace`).  :func:`spare_opt.fit_trace`
(:mod:`spare_opt.traces.fit`) builds one from a fault trace; a model can also be
written by hand.

References
----------
Lawless, *Statistical Models and Methods for Lifetime Data*, 2nd ed., Wiley 2003: the
Weibull law and its mean (Sec. 1.3, 5.2).
"""

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .._core import validation as check
from .._core.io import as_path, check_version, dumps_json, read_json_file, write_document
from .._core.results import Result
from .._core.stats import finite_or_none
from .._core.errors import FailureModelError, ParameterError, ParameterTypeError
from .trace import TRACE_FORMAT, TRACE_VERSION

__all__ = [
    "FAILURE_MODEL_FORMAT",
    "FAILURE_MODEL_VERSION",
    "MAX_SAMPLE_EVENTS",
    "REPAIR_DISTRIBUTIONS",
    "Estimate",
    "FailureModel",
]

#: ``format`` field of a failure-model file.
FAILURE_MODEL_FORMAT = "spare-failure-model"
#: Version of the failure-model file format.
FAILURE_MODEL_VERSION = 1
#: How a :class:`FailureModel` draws repair times: the observed durations, or the lognormal fit.
REPAIR_DISTRIBUTIONS = ("empirical", "lognormal")
#: Most failure events :meth:`FailureModel.sample_trace` draws (a longer request is refused).
MAX_SAMPLE_EVENTS = 10**6
SECONDS_PER_DAY = 86400.0
SECONDS_PER_HOUR = 3600.0
#: Steps of the outward search that brackets a profile-likelihood bound (each doubles the step).
_BRACKET_STEPS = 60


# ----------------------------------------------------------------------------- estimates
class Estimate(NamedTuple):
    """A point estimate and its confidence interval, in the unit of the key that holds it.

    Attributes
    ----------
    value : float
    low, high : float
        Bounds of the interval at the result's ``confidence``; NaN where no interval
        can be given, ``inf`` for an unbounded side.
    """

    value: float
    low: float = math.nan
    high: float = math.nan

    def to_dict(self):
        """dict: ``{"value": x, "ci": [low, high]}``, ``None`` for a NaN or infinite number."""
        return {"value": finite_or_none(float(self.value)),
                "ci": [finite_or_none(float(self.low)), finite_or_none(float(self.high))]}

    def scaled(self, factor):
        """Estimate: value and bounds multiplied by ``factor`` (a change of unit)."""
        return Estimate(self.value * factor, self.low * factor, self.high * factor)


def _plain(value):
    """``value`` made JSON-ready: Estimates as dicts, tuples as lists, NaN/inf as None."""
    if isinstance(value, Estimate):
        return value.to_dict()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return finite_or_none(value)


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True, eq=False)
class FailureModel(Result):
    """A failure model of a cluster: when failure events come, how many nodes they take, how long repairs last.

    Failure *events* arrive as a renewal process from time 0: the gaps between events
    are independent Weibull draws of shape ``weibull_shape``, truncated below at
    ``window_seconds`` (faults closer than the window form one event, so two events
    are always further apart), with mean ``event_mtbf_seconds``; without a window
    the scale is ``event_mtbf_seconds / Gamma(1 + 1/k)``.  An event takes ``s`` nodes down at once, ``s`` drawn from
    ``event_size_probabilities`` (``s = 1, 2, ...``), chosen uniformly among the nodes
    that are up (fewer when fewer are up; none when every node is down).  Each node
    stays down for a repair time drawn from ``repair_distribution``.

    Parameters
    ----------
    cluster_nodes : int
        Number of nodes of the cluster (``>= 1``).
    event_mtbf_seconds : float
        Mean time between failure events (``> 0``), at the cluster level.
    weibull_shape : float
        Shape ``k`` of the gaps between events (``k < 1``: bursts).
    repair_median_seconds : float
        Median of the lognormal repair time (``> 0``).
    repair_sigma : float
        Standard deviation of the log of the lognormal repair time (``>= 0``).
    event_size_probabilities : sequence of float, default (1.0,)
        ``P(event takes s nodes)`` for ``s = 1 .. len``: non-negative, summing to 1
        (within 1e-6; stored normalised), at most ``cluster_nodes`` entries.
    repair_distribution : {"lognormal", "empirical"}, default "lognormal"
        ``"lognormal"`` draws repairs from the lognormal above; ``"empirical"`` draws
        uniformly from ``repair_empirical_seconds`` (the durations observed in a trace).
    repair_empirical_seconds : sequence of float, default ()
        Observed repair durations (seconds, ``>= 0``), stored sorted; needed by
        ``"empirical"``.
    window_seconds : float, default 0.0
        The window that grouped node faults into events when the model was fitted
        (``0``: same instant only): the least gap between two events.
    source : str, default ""
        Where the model came from (the trace path).

    Raises
    ------
    ParameterTypeError
        A value has the wrong type.
    ParameterError
        A value is out of range, the size probabilities do not sum to 1,
        ``"empirical"`` is asked for with no observed durations, or
        ``event_mtbf_seconds`` is not above ``window_seconds``.

    See Also
    --------
    fit_trace : fits this model to a fault trace (``FitResult.model``).

    Notes
    -----
    Derived figures (properties): :attr:`system_mtbf_seconds`, the mean time between
    *node* faults (event MTBF divided by the mean event size), the ``m`` of
    :class:`~spare_opt.SimulationParameters` when every failure takes one group;
    :attr:`node_mtbf_seconds` (``cluster_nodes`` times that); the mean event size and
    the probability that an event takes several nodes.  A simulation without
    correlated failures can take ``system_mtbf_seconds`` and ``weibull_shape``; one
    with failure domains takes ``event_mtbf_seconds``, ``weibull_shape`` and
    :meth:`sample_event_sizes`; repairs come from :meth:`sample_repair_seconds`.

    Examples
    --------
    >>> model = FailureModel(cluster_nodes=8, event_mtbf_seconds=3600.0, weibull_shape=0.8,
    ...                      repair_median_seconds=7200.0, repair_sigma=1.0,
    ...                      event_size_probabilities=(0.75, 0.25))
    >>> model.mean_event_size, model.system_mtbf_seconds
    (1.25, 2880.0)
    >>> FailureModel.from_dict(model.to_dict()) == model
    True
    """

    cluster_nodes: int
    event_mtbf_seconds: float
    weibull_shape: float
    repair_median_seconds: float
    repair_sigma: float
    event_size_probabilities: tuple = (1.0,)
    repair_distribution: str = "lognormal"
    repair_empirical_seconds: tuple = ()
    window_seconds: float = 0.0
    source: str = ""

    def __post_init__(self):
        nodes = check.count("cluster_nodes", self.cluster_nodes)
        mtbf = check.seconds("event_mtbf_seconds", self.event_mtbf_seconds)
        shape = check.number("weibull_shape", self.weibull_shape, above=0.0)
        try:
            math.gamma(1.0 + 1.0 / shape)
        except OverflowError:
            raise ParameterError(f"weibull_shape {shape!r} is too small (Gamma(1 + 1/k) overflows)") from None
        median = check.seconds("repair_median_seconds", self.repair_median_seconds)
        sigma = check.number("repair_sigma", self.repair_sigma, minimum=0.0)
        sizes = check.numbers_("event_size_probabilities", self.event_size_probabilities, minimum=0.0)
        total = math.fsum(sizes)
        if abs(total - 1.0) > 1e-6:
            raise ParameterError(f"event_size_probabilities must sum to 1, got {total!r}")
        if len(sizes) > nodes:
            raise ParameterError(
                f"event_size_probabilities has {len(sizes)} entries (events of up to {len(sizes)} nodes) "
                f"but the cluster has {nodes} nodes"
            )
        distribution = check.choice("repair_distribution", self.repair_distribution, REPAIR_DISTRIBUTIONS)
        empirical = self.repair_empirical_seconds
        if isinstance(empirical, (str, bytes, dict)):
            raise ParameterTypeError(f"repair_empirical_seconds must be a sequence, got {type(empirical).__name__}")
        try:
            empirical = list(empirical)
        except TypeError:
            raise ParameterTypeError(
                f"repair_empirical_seconds must be a sequence, got {type(empirical).__name__}") from None
        empirical = tuple(sorted(check.number("repair_empirical_seconds: each value", v, minimum=0.0)
                                 for v in empirical))
        if distribution == "empirical" and not empirical:
            raise ParameterError('repair_distribution "empirical" needs repair_empirical_seconds (none given)')
        window = check.number("window_seconds", self.window_seconds, minimum=0.0)
        if mtbf <= window:
            raise ParameterError(f"event_mtbf_seconds ({mtbf:g}) must be above window_seconds ({window:g}): "
                                 "events are at least a window apart")
        if not isinstance(self.source, str):
            raise ParameterTypeError(f"source must be a string, got {type(self.source).__name__}")
        for name, value in (("cluster_nodes", nodes), ("event_mtbf_seconds", mtbf), ("weibull_shape", shape),
                            ("repair_median_seconds", median), ("repair_sigma", sigma),
                            ("event_size_probabilities", tuple(p / total for p in sizes)),
                            ("repair_distribution", distribution), ("repair_empirical_seconds", empirical),
                            ("window_seconds", window)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_scale_seconds", _weibull_scale_for_mean(mtbf, shape, window))

    # ------------------------------------------------------------------ derived figures
    @property
    def mean_event_size(self):
        """float: mean number of nodes a failure event takes down."""
        return math.fsum((s + 1) * p for s, p in enumerate(self.event_size_probabilities))

    @property
    def multi_node_probability(self):
        """float: probability that a failure event takes several nodes down."""
        return math.fsum(self.event_size_probabilities[1:])

    @property
    def system_mtbf_seconds(self):
        """float: mean time between node faults in the cluster (event MTBF / mean event size)."""
        return self.event_mtbf_seconds / self.mean_event_size

    @property
    def node_mtbf_seconds(self):
        """float: per-node MTBF, ``cluster_nodes * system_mtbf_seconds`` (calendar time)."""
        return self.cluster_nodes * self.system_mtbf_seconds

    @property
    def weibull_scale_seconds(self):
        """float: scale of the Weibull gaps between events (before truncation at the window).

        ``event_mtbf_seconds / Gamma(1 + 1/k)`` without a window; with one, the scale
        whose Weibull truncated at ``window_seconds`` has mean ``event_mtbf_seconds``.
        """
        return self._scale_seconds

    @property
    def lognormal_repair_mean_seconds(self):
        """float: mean of the lognormal repair time, ``median * exp(sigma^2 / 2)`` (``inf`` if it overflows)."""
        try:
            return self.repair_median_seconds * math.exp(self.repair_sigma**2 / 2.0)
        except OverflowError:
            return math.inf

    @property
    def repair_mean_seconds(self):
        """float: mean repair time of the distribution the model draws from."""
        if self.repair_distribution == "empirical":
            return math.fsum(self.repair_empirical_seconds) / len(self.repair_empirical_seconds)
        return self.lognormal_repair_mean_seconds

    # ------------------------------------------------------------------ sampling
    def sample_gaps_seconds(self, rng, count):
        """Draw ``count`` gaps between failure events (seconds) from the truncated Weibull.

        ``scale * (u + E)^(1/k)`` with ``E`` a standard exponential and
        ``u = (window / scale)^k``: the inverse of the conditional survival function
        ``exp(u - (x / scale)^k)``, ``x > window``.

        Parameters
        ----------
        rng : numpy.random.Generator
        count : int
            Number of draws, ``>= 0``.

        Returns
        -------
        numpy.ndarray of float64, shape (count,)
        """
        scale = self.weibull_scale_seconds
        floor = (self.window_seconds / scale) ** self.weibull_shape
        return scale * (floor + rng.standard_exponential(int(count))) ** (1.0 / self.weibull_shape)

    def sample_event_sizes(self, rng, count):
        """Draw ``count`` event sizes (numbers of nodes, ``>= 1``) from ``event_size_probabilities``.

        Parameters
        ----------
        rng : numpy.random.Generator
        count : int

        Returns
        -------
        numpy.ndarray of int64, shape (count,)
        """
        probabilities = np.asarray(self.event_size_probabilities)
        return rng.choice(probabilities.size, size=int(count), p=probabilities).astype(np.int64) + 1

    def sample_repair_seconds(self, rng, count):
        """Draw ``count`` repair times (seconds) from the model's repair distribution.

        Parameters
        ----------
        rng : numpy.random.Generator
        count : int

        Returns
        -------
        numpy.ndarray of float64, shape (count,)
            Lognormal draws (``"lognormal"``) or draws with replacement from the
            observed durations (``"empirical"``).
        """
        if self.repair_distribution == "empirical":
            return rng.choice(np.asarray(self.repair_empirical_seconds), size=int(count))
        return rng.lognormal(math.log(self.repair_median_seconds), self.repair_sigma, int(count))

    def sample_trace(self, days, *, seed=0):
        """Draw a synthetic node fault trace of ``days`` days from the model.

        Events arrive by the renewal process of the model from time 0; each takes a
        drawn number of nodes, chosen uniformly among the nodes up at that instant
        (a node is up again from the instant its repair ends); each node gets a drawn
        repair time.  Repairs that would end after ``days`` are left open, as in a
        real trace.  All nodes of an event fail at the same instant.

        Parameters
        ----------
        days : float
            Length of the trace (days, ``> 0``).
        seed : int, default 0
            Seed of ``numpy.random.default_rng``; equal seeds give equal traces.

        Returns
        -------
        dict
            A ``spare-failure-trace`` document (``nodes`` = ``cluster_nodes``), ready
            for :func:`~spare_opt.parse_fault_events` (a
            :class:`~spare_opt.FaultTrace`) or :func:`~spare_opt.write_fault_trace`.
            ``metadata`` holds the model, ``days``, ``seed`` and ``lost_events``
            (events that found every node down).

        Raises
        ------
        ParameterTypeError
            ``days`` is not a number or ``seed`` not an integer.
        ParameterError
            ``days <= 0``, a negative seed, or more than :data:`MAX_SAMPLE_EVENTS`
            events expected (``days * 86400 / event_mtbf_seconds``).

        Examples
        --------
        >>> from spare_opt import parse_fault_events
        >>> model = FailureModel(cluster_nodes=20, event_mtbf_seconds=6 * 3600.0, weibull_shape=0.8,
        ...                      repair_median_seconds=3600.0, repair_sigma=1.0)
        >>> trace = parse_fault_events(model.sample_trace(30.0, seed=1))
        >>> trace.cluster_nodes, trace.irregular
        (20, ())
        """
        days = check.number("days", days, above=0.0)
        seed = check.seed(seed)
        horizon = days * SECONDS_PER_DAY
        expected = horizon / self.event_mtbf_seconds
        if expected > MAX_SAMPLE_EVENTS:
            raise ParameterError(
                f"{days:g} days at one event every {self.event_mtbf_seconds:g} s is about {expected:,.0f} events, "
                f"more than MAX_SAMPLE_EVENTS = {MAX_SAMPLE_EVENTS:,}"
            )
        rng = np.random.default_rng(seed)
        times = self._event_times(rng, horizon, expected)
        sizes = self.sample_event_sizes(rng, times.size)
        width = len(str(self.cluster_nodes - 1))
        up_at = np.zeros(self.cluster_nodes)  # instant each node is up again
        rows = []  # (time_seconds, sequence, node, is_start)
        lost = 0
        for time, size in zip(times.tolist(), sizes.tolist()):
            hit = _pick_live(rng, up_at, time, size)
            if not hit:
                lost += 1
                continue
            repairs = self.sample_repair_seconds(rng, len(hit))
            for node, repair in zip(hit, repairs.tolist()):
                end = time + repair
                up_at[node] = end
                rows.append((time, len(rows), node, True))
                if end <= horizon:  # later repairs are not observed: the fault stays open
                    rows.append((end, len(rows), node, False))
        rows.sort(key=lambda row: (row[0], row[1]))
        kind = {"Level": "Synthetic", "Class": "Synthetic", "Desc": "drawn from a failure model"}
        return {
            "format": TRACE_FORMAT,
            "version": TRACE_VERSION,
            "nodes": self.cluster_nodes,
            "metadata": {
                "generator": "spare_opt.FailureModel.sample_trace",
                "days": days,
                "seed": seed,
                "lost_events": lost,
                "model": self.to_dict(),
            },
            "events": [
                {"node_id": f"node-{node:0{width}d}", "event_time": time / SECONDS_PER_DAY,
                 "event_type": "fault_start" if start else "fault_end", "fault_type": dict(kind)}
                for time, _, node, start in rows
            ],
        }

    def _event_times(self, rng, horizon, expected):
        """Event times (seconds) in ``(0, horizon]``: cumulative Weibull gaps, drawn in chunks."""
        chunk = int(min(expected * 1.2, MAX_SAMPLE_EVENTS)) + 16
        parts, now, total = [], 0.0, 0
        while True:
            arrivals = now + np.cumsum(self.sample_gaps_seconds(rng, chunk))
            inside = arrivals[arrivals <= horizon]
            parts.append(inside)
            total += inside.size
            if inside.size < arrivals.size:
                break
            if total > MAX_SAMPLE_EVENTS:
                raise ParameterError(f"the trace would hold more than MAX_SAMPLE_EVENTS = {MAX_SAMPLE_EVENTS:,} events")
            now = float(arrivals[-1])
        return np.concatenate(parts)

    # ------------------------------------------------------------------ documents and files
    def to_dict(self):
        """dict: the ``spare-failure-model`` document (fields, then ``derived`` figures, ignored on reading)."""
        return {
            "format": FAILURE_MODEL_FORMAT,
            "version": FAILURE_MODEL_VERSION,
            "cluster_nodes": self.cluster_nodes,
            "event_mtbf_seconds": self.event_mtbf_seconds,
            "weibull_shape": self.weibull_shape,
            "event_size_probabilities": list(self.event_size_probabilities),
            "repair_median_seconds": self.repair_median_seconds,
            "repair_sigma": self.repair_sigma,
            "repair_distribution": self.repair_distribution,
            "repair_empirical_seconds": list(self.repair_empirical_seconds),
            "window_seconds": self.window_seconds,
            "source": self.source,
            "derived": finite_or_none({
                "system_mtbf_seconds": self.system_mtbf_seconds,
                "node_mtbf_seconds": self.node_mtbf_seconds,
                "weibull_scale_seconds": self.weibull_scale_seconds,
                "mean_event_size": self.mean_event_size,
                "multi_node_probability": self.multi_node_probability,
                "repair_mean_seconds": self.repair_mean_seconds,
                "lognormal_repair_mean_seconds": self.lognormal_repair_mean_seconds,
            }),
        }

    _FIELDS = ("cluster_nodes", "event_mtbf_seconds", "weibull_shape", "repair_median_seconds", "repair_sigma",
               "event_size_probabilities", "repair_distribution", "repair_empirical_seconds", "window_seconds",
               "source")
    _REQUIRED = ("cluster_nodes", "event_mtbf_seconds", "weibull_shape", "repair_median_seconds", "repair_sigma")

    @classmethod
    def from_dict(cls, doc, source="failure model document"):
        """Build a model from a parsed ``spare-failure-model`` document (what :meth:`to_dict` returns).

        ``derived`` is ignored (it is recomputed); unknown keys are refused.

        Raises
        ------
        FailureModelError
            ``doc`` is not an object, has another format or version, misses a
            required key, has an unknown key, or a value of the wrong type or out of
            range (the message names ``source`` and the key).
        """
        if not isinstance(doc, dict):
            raise FailureModelError(f"{source}: expected a JSON object, got {type(doc).__name__}")
        if doc.get("format") != FAILURE_MODEL_FORMAT:
            raise FailureModelError(
                f"{source}: format is {doc.get('format')!r}, expected {FAILURE_MODEL_FORMAT!r}")
        check_version(doc, FAILURE_MODEL_VERSION, source, FailureModelError, FAILURE_MODEL_FORMAT)
        missing = [key for key in cls._REQUIRED if key not in doc]
        if missing:
            raise FailureModelError(f"{source}: missing key {missing[0]!r}")
        unknown = sorted(set(doc) - set(cls._FIELDS) - {"format", "version", "derived"})
        if unknown:
            raise FailureModelError(f"{source}: unknown key {unknown[0]!r}")
        fields = {key: doc[key] for key in cls._FIELDS if key in doc}
        for key in ("event_size_probabilities", "repair_empirical_seconds"):
            if key in fields and not isinstance(fields[key], list):
                raise FailureModelError(f"{source}: {key!r} must be a list of numbers, got {fields[key]!r}")
        try:
            return cls(**fields)
        except (ParameterError, ParameterTypeError) as exc:
            raise FailureModelError(f"{source}: {exc}") from None

    def save(self, path, *, force=False):
        """Write the model atomically to ``path`` as a ``spare-failure-model`` JSON file.

        Parameters
        ----------
        path : str or os.PathLike
        force : bool, default False
            Overwrite an existing file.

        Returns
        -------
        pathlib.Path

        Raises
        ------
        OutputExistsError
            ``path`` exists and ``force`` is false.
        FailureModelError
            ``path`` is not a path, is a folder, or cannot be written.
        """
        path = as_path(path, FailureModelError, "failure model path")
        return write_document(path, dumps_json(self.to_dict(), indent=1) + "\n", force=force,
                              error=FailureModelError, what="failure model")

    @classmethod
    def load(cls, path):
        """Read a failure-model file written by :meth:`save` (``spare-opt fit TRACE -o FILE``).

        Raises
        ------
        FailureModelError
            ``path`` is not a path; the file is missing, unreadable, not JSON, or not
            a valid ``spare-failure-model`` document.
        """
        path = as_path(path, FailureModelError, "failure model path")
        doc = read_json_file(path, FailureModelError, "failure model", expected="a JSON failure model")
        return cls.from_dict(doc, source=str(path))


def _pick_live(rng, up_at, time, size):
    """Up to ``size`` distinct nodes drawn uniformly among those up at ``time`` (``up_at <= time``).

    Rejection first (draw any node, keep it if up and new), which costs ``O(size)``
    while few nodes are down; after ``8 size + 32`` draws the rest is drawn from the
    list of the remaining live nodes.  Either way every set of live nodes is equally
    likely.
    """
    chosen = []
    for _ in range(8 * size + 32):
        node = int(rng.integers(up_at.size))
        if up_at[node] <= time and node not in chosen:
            chosen.append(node)
            if len(chosen) == size:
                return chosen
    live = np.setdiff1d(np.flatnonzero(up_at <= time), chosen)
    more = rng.choice(live, size=min(size - len(chosen), live.size), replace=False)
    return chosen + more.tolist()


def _truncated_weibull_mean(shape, scale, window):
    """Mean of a Weibull ``(shape, scale)`` conditioned on exceeding ``window``.

    ``w + exp(u) (scale / k) Gamma(1/k) Q(1/k, u)`` with ``u = (w / scale)^k`` and
    ``Q`` the regularised upper incomplete gamma function; for ``u > 500`` the
    conditional excess is ``1 / hazard(w) = w / (k u)`` to first order.
    """
    from scipy.special import gamma, gammaincc

    if window <= 0:
        return scale * math.gamma(1.0 + 1.0 / shape)
    log_u = shape * (math.log(window) - math.log(scale))
    if log_u > math.log(500.0):
        return window + window * math.exp(-log_u) / shape
    u = math.exp(log_u)
    return window + math.exp(u) * (scale / shape) * float(gamma(1.0 / shape) * gammaincc(1.0 / shape, u))


def _weibull_scale_for_mean(mean, shape, window):
    """The scale whose Weibull of ``shape`` truncated at ``window`` has the given mean (``mean > window``)."""
    from scipy import optimize

    plain = mean / math.gamma(1.0 + 1.0 / shape)
    if window <= 0:
        return plain

    def excess(log_scale):  # grows with the scale: the window at scale 0, above the mean at ``plain``
        return _truncated_weibull_mean(shape, math.exp(log_scale), window) - mean

    high = math.log(plain)
    if excess(high) <= 0:  # the window is negligible
        return plain
    low = min(high, math.log(window) - math.log(500.0) / shape)
    for _ in range(_BRACKET_STEPS):
        if excess(low) < 0:
            return math.exp(optimize.brentq(excess, low, high, xtol=1e-14, rtol=1e-14))
        low -= 10.0 / shape
    return math.exp(low)  # the mean is within rounding of the window

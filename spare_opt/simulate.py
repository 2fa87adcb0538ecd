"""Time-to-train: a discrete-event simulation of a pretraining run under failures.

Three fault-tolerance strategies are simulated on ``N`` data-parallel (DP) groups
(Lee et al., ICML 2026, Sec. 6; ``docs/reproduction.md``):

* ``"ckpt"`` - checkpointing only: every failure is a global restart (``T_r``) and a
  rollback to the last checkpoint;
* ``"rep"`` - classic replication of degree ``r`` with checkpointing: ``N // r``
  replica sets (group ``g`` in set ``g mod (N // r)``), every step costs ``r`` layers of
  compute; a failure is masked while every replica set keeps a live member;
* ``"spare"`` - SPARe with checkpointing: a stack layout and the online reorder
  controller; a step costs ``S`` layers of compute plus the all-reduce, ``S`` the
  all-reduce stack number; a failure that lands in a step adds patch compute,
  controller time and a communicator shrink; a wipe-out is a global restart and a
  rollback.

Failures come from Weibull failure clocks of shape ``k`` (one per group, restarted at
each global restart: ``"group-clocks"``, the default) or from one Weibull renewal
process of mean ``m`` for the whole cluster (``"system-renewal"``); either way each
failure strikes a uniformly random live group.  Or they are replayed from a fault trace
(InfiniteHBD format).  Because the groups lost between two restarts are then a
uniformly random sequence without repetition, the stack-number trajectory of each
restart epoch is computed up front from one random permutation
(:func:`spare_opt.controller.stack_number_trajectories`), and the event loop itself is
a numba kernel (``spare_opt._simulate_kernels``) over flat arrays.

Time accounting of a run (all in seconds, wall clock)::

    wall = useful + overhead + rework + restart + checkpoint

* ``useful``: compute (``S`` or ``r`` layers) and all-reduce of the steps that are kept;
* ``overhead``: masking cost inside kept steps (patch compute, controller, shrink, the
  lost part of an all-reduce that a failure interrupted);
* ``rework``: everything spent on steps that a wipe-out rolled back;
* ``restart``: global restarts;
* ``checkpoint``: checkpoint saves (including a save cut short by a wipe-out).

``availability = (useful + overhead) / wall``: the fraction of wall time spent making
progress that is kept; so ``TTT / T0 = ((useful + overhead) / T0) / availability`` -
the compute overhead divided by the availability, the split of the paper's
``J(r) = Sbar / A*``.

References
----------
.. [1] Lee et al., "SPARe: Stacked Parallelism with Adaptive Reordering for
   Fault-Tolerant LLM Pretraining Systems with 100k+ GPUs", ICML 2026,
   arXiv:2603.00357, Sec. 6 (the simulated setting, ``paper-600k``).
.. [2] A. Renyi, "On the theory of order statistics", Acta Math. Acad. Sci. Hungarica
   4, 1953 (exponential spacings, used to draw the group clocks in order).
.. [3] Shou et al., arXiv:2502.03885 (the InfiniteHBD fault trace format).
"""

import json
import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from ._stats import mean_ci95
from .errors import FailureSetError, ParameterError, TraceError
from .layout import Layout, check_size

__all__ = [
    "STRATEGIES",
    "RESTART_FAILURE_POLICIES",
    "MAX_STEPS",
    "MAX_EXPECTED_FAILURES",
    "FAILURE_MODELS",
    "SimulationParameters",
    "SimulationResult",
    "Preset",
    "PRESETS",
    "get_preset",
    "preset_parameters",
    "parse_overrides",
    "allreduce_seconds",
    "fault_free_seconds",
    "simulate",
    "simulate_seeds",
    "summarise",
    "default_redundancy",
    "default_layout",
    "rep_wipe_index",
    "trace_failures",
    "trace_mtbf_seconds",
]

STRATEGIES = ("ckpt", "rep", "spare")
#: What happens to failures that strike during a global restart:
#: ``"absorb"`` - the restart replaces the failed node (the failure is counted, the
#: group comes back with the others); ``"carry"`` - the group stays down and the
#: failure is handled (masked or another restart) when training resumes.
RESTART_FAILURE_POLICIES = ("absorb", "carry")
#: How failure times are drawn (see :class:`SimulationParameters`).
FAILURE_MODELS = ("system-renewal", "group-clocks")


# ----------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class SimulationParameters:
    """Every parameter of a simulated run, with its unit in its name.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N``.
    steps : int
        Training steps to complete, ``1 <= steps <= MAX_STEPS`` (``10**9``).
    layer_compute_seconds : float
        Compute time of one stack layer (one shard) per step.
    allreduce_seconds : float
        Gradient all-reduce time per step.
    shrink_seconds : float
        Communicator shrink after each masked failure.
    controller_seconds : float
        Reorder-controller decision time per masked failure (SPARe only).
    restart_seconds : float
        One global restart ``T_r`` (re-initialise every communicator, reload the
        checkpoint).
    save_seconds : float
        One checkpoint save ``T_s``.
    mtbf_seconds : float
        System MTBF ``m`` with every group live.
    weibull_shape : float
        Shape ``k`` of the Weibull failure times (``k < 1``: decreasing hazard, failures
        come in bursts after a (re)start).
    jitter_sd : float
        Standard deviation of the multiplicative jitter ``Normal(1, sd^2)`` applied to
        every duration (step compute, all-reduce, patch, shrink, controller, save,
        restart); ``0`` for none.
    patch_layers : float
        Layers of patch compute that a masked failure adds to the step it lands in
        (SPARe: the shard types that only the failed group produced this step are
        recomputed by live holders, one extra layer each).
    rate_follows_live : bool
        ``"system-renewal"`` only: True makes the failure rate ``(N - k) / N`` times the
        full rate after ``k`` failures (failures strike live groups); False keeps it at
        ``1/m``.  Group clocks have this property by construction.
    restart_failures : str
        ``"carry"`` or ``"absorb"``, see :data:`RESTART_FAILURE_POLICIES`.  With group
        clocks, ``"carry"`` restarts the clocks at the wipe-out (failures during the
        restart stay down when training resumes) and ``"absorb"`` restarts them when
        training resumes (no failure inside a restart).
    failure_model : str
        ``"group-clocks"`` (default): every group has its own Weibull failure clock of
        shape ``k`` and mean ``N * m`` (so ``N`` live groups fail every ``m`` on average
        in the long run), all clocks restart at each global restart; the order in which
        groups fail is uniformly random, the rate falls as groups are lost, and
        failures bunch up after each restart.  ``"system-renewal"``: one renewal
        process for the cluster with Weibull intervals of mean ``m`` (scale ``m /
        Gamma(1 + 1/k)``), each failure striking a uniformly random live group.
    max_wall_factor : float
        A run that has not finished after ``max_wall_factor * T0`` wall seconds is
        stopped and reported unfinished (checkpointing alone may never finish).
    trace_time_scale : float
        Trace replay only: trace times (days) are multiplied by ``86400 *
        trace_time_scale`` to get seconds; ``< 1`` compresses the trace.

    Raises
    ------
    ParameterError
        A value is out of range (the message names it).
    """

    groups: int
    steps: int = 10_000
    layer_compute_seconds: float = 64.0
    allreduce_seconds: float = 6.0
    shrink_seconds: float = 0.1
    controller_seconds: float = 0.1
    restart_seconds: float = 3600.0
    save_seconds: float = 60.0
    mtbf_seconds: float = 300.0
    weibull_shape: float = 0.78
    jitter_sd: float = 0.05
    patch_layers: float = 1.0
    rate_follows_live: bool = True
    restart_failures: str = "carry"
    failure_model: str = "group-clocks"
    max_wall_factor: float = 200.0
    trace_time_scale: float = 1.0

    def __post_init__(self):
        check_size(self.groups, 1)
        if isinstance(self.steps, bool) or not isinstance(self.steps, (int, np.integer)) or self.steps < 1:
            raise ParameterError(f"steps must be a positive integer, got {self.steps!r}")
        if self.steps > MAX_STEPS:
            raise ParameterError(f"steps must be at most {MAX_STEPS:,} (the event loop visits every step), "
                                 f"got {self.steps}")
        # Plain Python ints (numpy integers would break json.dumps of to_dict()).
        object.__setattr__(self, "groups", int(self.groups))
        object.__setattr__(self, "steps", int(self.steps))
        if not isinstance(self.rate_follows_live, (bool, np.bool_)):
            raise ParameterError(f"rate_follows_live must be a bool, got {self.rate_follows_live!r}")
        object.__setattr__(self, "rate_follows_live", bool(self.rate_follows_live))
        positive = ("layer_compute_seconds", "mtbf_seconds", "weibull_shape", "save_seconds",
                    "max_wall_factor", "trace_time_scale")
        for name in positive:
            _check_number(name, getattr(self, name), positive=True)
        for name in ("allreduce_seconds", "shrink_seconds", "controller_seconds", "restart_seconds",
                     "jitter_sd", "patch_layers"):
            _check_number(name, getattr(self, name), positive=False)
        try:  # the Weibull scale is m / Gamma(1 + 1/k): k below ~0.0059 overflows it to 0
            math.gamma(1.0 + 1.0 / self.weibull_shape)
        except OverflowError:
            raise ParameterError(f"weibull_shape must be at least about 0.0059 (Gamma(1 + 1/k) overflows), "
                                 f"got {self.weibull_shape}") from None
        if self.jitter_sd >= 0.5:
            raise ParameterError(f"jitter_sd must be < 0.5 (a relative standard deviation), got {self.jitter_sd}")
        if self.failure_model not in FAILURE_MODELS:
            raise ParameterError(
                f"failure_model must be one of {', '.join(FAILURE_MODELS)}, got {self.failure_model!r}"
            )
        if self.restart_failures not in RESTART_FAILURE_POLICIES:
            raise ParameterError(
                f"restart_failures must be one of {', '.join(RESTART_FAILURE_POLICIES)}, got {self.restart_failures!r}"
            )
        # The wall-time cap is what stops a run that cannot finish: it must be a number.
        if not math.isfinite(self.max_wall_factor * fault_free_seconds(self)):
            raise ParameterError(
                f"the wall-time cap max_wall_factor * T0 = {self.max_wall_factor} * {fault_free_seconds(self)} s "
                "overflows; lower steps, layer_compute_seconds or max_wall_factor"
            )

    @property
    def fault_free_seconds(self):
        """float: ``T0 = steps * (layer_compute_seconds + allreduce_seconds)``."""
        return fault_free_seconds(self)

    def to_dict(self):
        """dict: the parameters, JSON-ready."""
        return asdict(self)


#: Most training steps a simulated run may have.
MAX_STEPS = 10**9
#: Most failures a synthetic run may expect before its wall-time cap
#: (``max_wall_factor * T0 / mtbf_seconds``): every restart epoch keeps its failure
#: outcomes in memory, so beyond this a hopeless run would exhaust memory or time.
MAX_EXPECTED_FAILURES = 5 * 10**7


def _check_event_budget(params):
    """Refuse synthetic runs that could need more than :data:`MAX_EXPECTED_FAILURES` failures."""
    expected = params.max_wall_factor * fault_free_seconds(params) / params.mtbf_seconds
    if expected > MAX_EXPECTED_FAILURES:
        raise ParameterError(
            f"a run could need about {expected:.3g} failures before its wall-time cap "
            f"(max_wall_factor * T0 / mtbf_seconds; at most {MAX_EXPECTED_FAILURES:.0e}): lower max_wall_factor, "
            "steps or layer_compute_seconds, or raise mtbf_seconds"
        )


def _check_seed(seed, name="seed"):
    # SeedSequence rejects negative seeds with a bare ValueError; floats would be truncated.
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError(f"{name} must be a non-negative integer, got {seed!r}")
    return int(seed)


def _check_number(name, value, positive):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ParameterError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ParameterError(f"{name} must be finite and {bound}, got {value!r}")


def fault_free_seconds(params):
    """Fault-free time-to-train ``T0``: ``steps`` steps of one layer and one all-reduce.

    Parameters
    ----------
    params : SimulationParameters

    Returns
    -------
    float
        ``T0`` in seconds (no jitter, no checkpoints).
    """
    return params.steps * (params.layer_compute_seconds + params.allreduce_seconds)


def allreduce_seconds(groups, low_seconds=2.0, high_seconds=10.0, low_groups=200, high_groups=1000):
    """All-reduce time per step, linear in ``N`` between two anchor points.

    The paper gives "2-10 s growing with N" for ``N`` in {200, 600, 1000}; we take the
    line through ``(200, 2 s)`` and ``(1000, 10 s)`` (so 6 s at ``N = 600``), clipped
    below at ``low_seconds``.  A ring all-reduce has a bandwidth term that is nearly
    constant in ``N`` and a latency term linear in ``N``; at this scale the latency
    term dominates the growth.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N``.
    low_seconds, high_seconds : float
        All-reduce time at ``low_groups`` and ``high_groups``.

    Returns
    -------
    float
        Seconds.
    """
    slope = (high_seconds - low_seconds) / (high_groups - low_groups)
    return max(low_seconds, low_seconds + slope * (groups - low_groups))


# ----------------------------------------------------------------------------- presets
@dataclass(frozen=True)
class Preset:
    """A named simulation setting.

    Attributes
    ----------
    name : str
    groups : tuple of int
        The cluster sizes ``N`` the preset defines.
    base : dict
        :class:`SimulationParameters` fields shared by every ``N`` (``groups`` and
        ``allreduce_seconds`` are set per ``N`` by :func:`allreduce_seconds`).
    description : str
    rep_redundancies, spare_redundancies : tuple of int
        The ``r`` values that tuning sweeps for each strategy.
    period_factors : tuple of float
        The checkpoint periods that tuning tries, as multiples of the closed-form
        ``T_c*`` of each ``(strategy, r)``.
    """

    name: str
    groups: tuple
    base: dict
    description: str
    rep_redundancies: tuple = (2, 3, 4, 5, 6)
    spare_redundancies: tuple = tuple(range(2, 15))
    period_factors: tuple = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0)


PRESETS = {
    "paper-600k": Preset(
        name="paper-600k",
        groups=(200, 600, 1000),
        base=dict(
            steps=10_000,
            layer_compute_seconds=64.0,
            shrink_seconds=0.1,
            controller_seconds=0.1,
            restart_seconds=3600.0,
            save_seconds=60.0,
            mtbf_seconds=300.0,
            weibull_shape=0.78,
            jitter_sd=0.05,
            failure_model="group-clocks",
            restart_failures="carry",
        ),
        description=(
            "Lee et al. (ICML 2026) Sec. 6: 600k H100, 10T parameters, 10,000 steps, 64 s per layer, "
            "all-reduce 2-10 s (linear in N), m = 5 min Weibull k = 0.78, T_r = 60 min, T_s = 60 s"
        ),
    ),
    "trace-400": Preset(
        name="trace-400",
        groups=(400,),
        base=dict(
            steps=400_000,
            layer_compute_seconds=64.0,
            shrink_seconds=0.1,
            controller_seconds=0.1,
            restart_seconds=3600.0,
            save_seconds=60.0,
            mtbf_seconds=300.0,
            weibull_shape=0.78,
            jitter_sd=0.05,
        ),
        description=(
            "The paper's step and restart timings on N = 400 groups (the InfiniteHBD cluster), "
            "400,000 steps (about one year, the span of the trace); meant for --trace runs"
        ),
        rep_redundancies=(2, 3, 4),
        spare_redundancies=(2, 3, 4, 6, 9),
    ),
}


def preset_parameters(name, groups, **overrides):
    """The :class:`SimulationParameters` of preset ``name`` for ``groups`` DP groups.

    Parameters
    ----------
    name : str
        A key of :data:`PRESETS`.
    groups : int
        ``N``; must be one of the preset's ``groups``.
    **overrides
        Fields of :class:`SimulationParameters` to change.

    Returns
    -------
    SimulationParameters

    Raises
    ------
    ParameterError
        Unknown preset, ``N`` not in the preset, or a bad override.
    """
    preset = get_preset(name)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups not in preset.groups:
        raise ParameterError(
            f"preset {name!r} defines N in {{{', '.join(map(str, preset.groups))}}}, got N={groups}"
        )
    fields = dict(preset.base)
    fields["allreduce_seconds"] = allreduce_seconds(groups)
    unknown = set(overrides) - set(SimulationParameters.__dataclass_fields__)
    if unknown:
        raise ParameterError(f"unknown simulation parameter(s): {', '.join(sorted(unknown))}")
    fields.update(overrides)
    return SimulationParameters(groups=int(groups), **fields)


def parse_overrides(items):
    """Parse ``["field=value", ...]`` into :class:`SimulationParameters` overrides.

    Values are converted to the field's type (``int``, ``float``, ``bool`` from
    ``true/false/1/0/yes/no``, ``str``).

    Parameters
    ----------
    items : iterable of str

    Returns
    -------
    dict

    Raises
    ------
    ParameterError
        An item is not ``field=value``, names no field (or ``groups``), or its value
        does not convert.
    """
    fields = SimulationParameters.__dataclass_fields__
    if isinstance(items, str):  # one "field=value", not a sequence of characters
        items = [items]
    try:
        items = list(items)
    except TypeError:
        raise ParameterError(f"overrides must be a list of FIELD=VALUE strings, got {items!r}") from None
    out = {}
    for item in items:
        key, sep, text = str(item).partition("=")
        key, text = key.strip().replace("-", "_"), text.strip()
        if not sep or not key:
            raise ParameterError(f"expected FIELD=VALUE, got {item!r}")
        if key not in fields or key == "groups":
            names = ", ".join(name for name in fields if name != "groups")
            raise ParameterError(f"unknown simulation parameter {key!r}; known: {names}")
        kind = fields[key].type
        kind = kind if isinstance(kind, str) else kind.__name__
        try:
            if kind == "bool":
                lowered = text.lower()
                if lowered not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(text)
                out[key] = lowered in ("true", "1", "yes")
            elif kind == "int":
                out[key] = int(text)
            elif kind == "float":
                out[key] = float(text)
            else:
                out[key] = text
        except ValueError:
            raise ParameterError(f"{key} expects a {kind}, got {text!r}") from None
    return out


def get_preset(name):
    """The preset called ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`PRESETS`.

    Returns
    -------
    Preset

    Raises
    ------
    ParameterError
        ``name`` is not a known preset (the message lists the known ones).
    """
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        raise ParameterError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}") from None


# ----------------------------------------------------------------------------- result
@dataclass
class SimulationResult:
    """The outcome of one simulated run.

    Attributes
    ----------
    strategy : str
        ``"ckpt"``, ``"rep"`` or ``"spare"``.
    groups, redundancy : int
        ``N`` and ``r`` (``r = 1`` for ``"ckpt"``).
    checkpoint_period_seconds : float
        ``T_c``: seconds of progress between checkpoints.
    seed : int
    finished : bool
        False when the run hit ``max_wall_factor * T0`` before its last step.
    ttt_seconds : float
        Time-to-train (wall clock); ``inf`` when unfinished.
    fault_free_seconds : float
        ``T0``.
    ttt_ratio : float
        ``TTT / T0``.
    availability : float
        ``(useful + overhead) / wall``.
    useful_seconds, overhead_seconds, rework_seconds, restart_seconds, checkpoint_seconds : float
        The time accounting (module docstring); they sum to ``wall_seconds``.
    wall_seconds : float
        Wall time simulated (equals ``ttt_seconds`` when finished).
    restarts, masked_failures, absorbed_failures, failures, checkpoints : int
        Global restarts (wipe-outs), failures masked, failures during restarts that
        the restart absorbed, every failure, checkpoints completed.
    mean_stack_number : float
        Mean ``S`` over executed steps (``r`` for replication, 1 for checkpointing).
    steps_executed : int
        Steps run, including rolled-back ones.
    trace : dict or None
        Trace replay only: what was used and skipped (:func:`trace_failures`).
    """

    strategy: str
    groups: int
    redundancy: int
    checkpoint_period_seconds: float
    seed: int
    finished: bool
    ttt_seconds: float
    fault_free_seconds: float
    ttt_ratio: float
    availability: float
    useful_seconds: float
    overhead_seconds: float
    rework_seconds: float
    restart_seconds: float
    checkpoint_seconds: float
    wall_seconds: float
    restarts: int
    masked_failures: int
    absorbed_failures: int
    failures: int
    checkpoints: int
    mean_stack_number: float
    steps_executed: int
    trace: dict = None

    def to_dict(self):
        """dict: the fields, JSON-ready (``inf`` becomes ``None``)."""
        return {key: (None if isinstance(value, float) and not math.isfinite(value) else value)
                for key, value in asdict(self).items()}

    def to_json(self):
        """str: :meth:`to_dict` as indented JSON."""
        return json.dumps(self.to_dict(), indent=2)


# ----------------------------------------------------------------------------- layouts
#: Replication degree of the paper's best Rep+CKPT configuration (Sec. 6).
DEFAULT_REP_REDUNDANCY = 3


def default_redundancy(strategy, groups):
    """The redundancy a strategy runs with when none is given.

    Parameters
    ----------
    strategy : {"ckpt", "rep", "spare"}
    groups : int
        Number of DP groups ``N``.

    Returns
    -------
    int
        1 for ``"ckpt"``; 3 for ``"rep"`` (the paper's best replication degree);
        ``r* = floor(log2 N + 0.833)`` for ``"spare"``
        (:func:`spare_opt.theory.r_star`).

    Raises
    ------
    ParameterError
        Unknown strategy, or (``"spare"``) ``N`` is not a positive integer.

    References
    ----------
    Lee et al., ICML 2026, arXiv:2603.00357, Sec. 5 (``r*``) and Sec. 6 (Rep+CKPT is
    best at ``r = 3``).
    """
    if strategy not in STRATEGIES:
        raise ParameterError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if strategy == "ckpt":
        return 1
    if strategy == "rep":
        return DEFAULT_REP_REDUNDANCY
    from .theory import r_star

    return r_star(groups)


_LAYOUT_CACHE = {}


def default_layout(groups, redundancy, time_limit=10.0, seed=0):
    """The layout SPARe runs with by default: a Sidon circulant layout (cached).

    Parameters
    ----------
    groups, redundancy : int
        ``N`` and ``r``.
    time_limit : float
        Seconds for the offset search (:func:`spare_opt.generators.sidon`).
    seed : int

    Returns
    -------
    Layout

    Raises
    ------
    ParameterError
        ``N`` or ``r`` out of range (:func:`spare_opt.layout.check_size`).

    Notes
    -----
    The cache is keyed by ``(N, r)`` only: ``time_limit`` and ``seed`` apply to the
    first call for a given ``(N, r)`` in the process, later calls return that layout.
    """
    key = check_size(groups, redundancy)
    if key not in _LAYOUT_CACHE:
        from .generators import sidon

        _LAYOUT_CACHE[key] = sidon(int(groups), int(redundancy), time_limit=time_limit, seed=seed)
    return _LAYOUT_CACHE[key]


# ----------------------------------------------------------------------------- trajectories
def rep_wipe_index(failure_order, groups, redundancy):
    """Failure that wipes out replication of degree ``r`` (1-based), for one failure order.

    Replica sets: group ``g`` belongs to set ``g mod (N // r)`` (``N // r`` sets of
    ``r`` or more groups).  The wipe-out is the first failure after which some set has
    no live member.

    Parameters
    ----------
    failure_order : array_like of int, shape (K,)
        Distinct groups in the order they fail.
    groups, redundancy : int

    Returns
    -------
    int
        1-based index in ``failure_order``, or ``-1`` if no set is wiped out.

    Raises
    ------
    ParameterError
        Bad ``N`` or ``r``.
    FailureSetError
        ``failure_order`` repeats a group or names one outside ``[0, N)``.
    """
    groups, redundancy = check_size(groups, redundancy)
    order = np.asarray(failure_order)
    if order.ndim != 1 or (order.size and not np.issubdtype(order.dtype, np.integer)):
        raise FailureSetError("failure order must be a 1-D sequence of integer group ids")
    if order.size and (order.min() < 0 or order.max() >= groups or np.unique(order).size != order.size):
        raise FailureSetError(f"failure order must hold distinct group ids in [0, {groups})")
    n_sets = groups // redundancy
    sets = order % n_sets
    set_size = np.bincount(np.arange(groups) % n_sets, minlength=n_sets)
    lost = np.zeros(n_sets, dtype=np.int64)
    # cumulative count of losses per set at each failure
    for i, s in enumerate(sets):
        lost[s] += 1
        if lost[s] == set_size[s]:
            return i + 1
    return -1


def _rep_wipe_indices(perms, groups, redundancy):
    """Vectorised :func:`rep_wipe_index` over the rows of ``perms`` (full permutations)."""
    n_sets = groups // redundancy
    e = perms.shape[0]
    position = np.empty_like(perms)
    rows = np.arange(e)[:, None]
    position[rows, perms] = np.arange(groups)[None, :]
    set_of = np.arange(groups) % n_sets
    last = np.full((e, n_sets), -1, dtype=np.int64)
    np.maximum.at(last, (np.repeat(np.arange(e), groups), np.tile(set_of, e)), position.ravel())
    return (last.min(axis=1) + 1).astype(np.int32)


class _TrajectoryPool:
    """Per-epoch failure outcomes drawn from one seed, extended on demand.

    Epoch ``e`` uses the ``e``-th random permutation of the groups drawn from
    ``SeedSequence([seed, 1])``, so extending the pool never changes earlier epochs:
    a run is the same whatever the pool size it ends up needing.
    """

    def __init__(self, strategy, groups, redundancy, seed, layout=None):
        self.strategy = strategy
        self.groups = groups
        self.redundancy = redundancy
        self.layout = layout
        self._rng = np.random.default_rng(np.random.SeedSequence([int(seed), 1]))
        self.stack = np.zeros((0, 1), dtype=np.int16)
        self.wipe = np.zeros(0, dtype=np.int32)
        if strategy == "rep":
            self.stack = np.full((1, 1), redundancy, dtype=np.int16)
        elif strategy == "ckpt":
            self.stack = np.ones((1, 1), dtype=np.int16)

    def extend(self, count):
        if self.strategy == "ckpt":
            return
        # Draw in blocks of about a million entries: the float and argsort temporaries of
        # one large draw would take 16 bytes per entry on top of the pool itself.
        block = max(1, 2**20 // self.groups)
        while count > block:
            self._extend(block)
            count -= block
        self._extend(count)

    def _extend(self, count):
        perms = np.argsort(self._rng.random((count, self.groups)), axis=1)
        if self.strategy == "rep":
            self.wipe = np.concatenate([self.wipe, _rep_wipe_indices(perms, self.groups, self.redundancy)])
            return
        from .controller import stack_number_trajectories

        stacks, wipes, _ = stack_number_trajectories(self.layout, perms)
        stacks = np.asarray(stacks)
        wipes = np.asarray(wipes, dtype=np.int32)
        # rows are padded with -1 after the wipe-out: repeat the last stack number
        # (the kernel never reads past the wipe-out, this only keeps the pool tidy)
        block = np.maximum.accumulate(np.where(stacks < 0, 0, stacks), axis=1).astype(np.int16)
        # keep only the columns up to the latest wipe-out (the rest is never read)
        width = max(self.stack.shape[1], int(wipes.max(initial=0)) + 1)
        if width < block.shape[1]:
            block = block[:, :width]
        if self.stack.shape[1] < width:
            pad = np.repeat(self.stack[:, -1:], width - self.stack.shape[1], axis=1)
            self.stack = np.concatenate([self.stack, pad], axis=1)
        self.stack = np.concatenate([self.stack, block])
        self.wipe = np.concatenate([self.wipe, wipes])

    def mean_failures_to_wipeout(self):
        """Mean 1-based wipe index over the pool (``1`` for checkpointing)."""
        if self.strategy == "ckpt":
            return 1.0
        if self.wipe.size == 0:
            self.extend(32)
        valid = self.wipe[self.wipe > 0]
        return float(valid.mean()) if valid.size else float(self.groups)


# ----------------------------------------------------------------------------- traces
def trace_failures(trace, groups, strategy, redundancy, layout=None, time_scale=1.0, placement_seed=None):
    """Failure times and outcomes of a fault-trace replay (restart at each wipe-out).

    Each non-ignored ``fault_start`` whose node maps to a group (the ``i``-th node to
    appear -> group ``i``, or a random placement with ``placement_seed``;
    :meth:`spare_opt.trace.FaultTrace.node_groups`) fails that group;
    starts at the same instant fail together (one failure event); a start for a group
    already down in the current restart epoch is skipped; a wipe-out
    brings every group back (``fault_end`` events are ignored: failed groups do not
    rejoin before a restart, the paper's semantics).

    Parameters
    ----------
    trace : spare_opt.trace.FaultTrace
    groups : int
        ``N``.
    strategy : str
    redundancy : int
    layout : Layout or None
        SPARe layout of ``N`` groups and redundancy ``r`` (``None``: :func:`default_layout`).
    time_scale : float
        Seconds per trace second (``< 1`` compresses the trace), finite and ``> 0``.
    placement_seed : int or None
        Place the traced nodes on random distinct groups with this seed instead of
        group ``i`` for the ``i``-th node to appear.

    Returns
    -------
    times_seconds : numpy.ndarray of float64, shape (F,)
        Time of each failure event (one or more groups at one instant).
    stack_numbers : numpy.ndarray of int16, shape (F,)
        Stack number after each failure (when masked).
    wipe : numpy.ndarray of int8, shape (F,)
        1 where the failure is a wipe-out.
    counts : dict
        ``fault_starts``, ``used`` (group failures applied), ``failure_events``,
        ``outside_cluster`` (node index >= N), ``already_down`` (group already failed
        in the epoch), ``ignored_by_reader`` (irregular starts).

    Raises
    ------
    TraceError
        ``trace`` is not a :class:`~spare_opt.trace.FaultTrace`.
    ParameterError
        Unknown strategy, ``N`` or ``r`` out of range, a layout of the wrong shape, a
        bad ``time_scale``.
    """
    _check_trace(trace)
    redundancy = _check_strategy(strategy, redundancy, groups)
    if strategy == "spare":
        layout = _check_layout(layout, groups, redundancy)
    time_scale = _check_time_scale(time_scale)
    mapping = trace.node_groups(groups, seed=placement_seed)
    counts = {"fault_starts": int(trace.n_starts), "used": 0, "outside_cluster": 0, "already_down": 0,
              "ignored_by_reader": 0, "failure_events": 0}
    # 1. the groups that fail at each distinct instant (simultaneous starts fail together)
    batches = []
    for i in range(trace.n_events):
        if not trace.is_start[i]:
            continue
        if trace.ignored[i]:
            counts["ignored_by_reader"] += 1
            continue
        group = int(mapping[trace.node[i]])
        if group < 0:
            counts["outside_cluster"] += 1
            continue
        time = float(trace.times_days[i])
        if batches and batches[-1][0] == time:
            batches[-1][1].append(group)
        else:
            batches.append((time, [group]))
    # 2. their outcomes, with a restart (every group back) after each wipe-out
    down = np.zeros(groups, dtype=bool)
    controller = None
    if strategy == "spare":
        from .controller import ReorderController

        controller = ReorderController(layout)
    n_sets = max(1, groups // max(1, redundancy))
    set_of = np.arange(groups) % n_sets
    set_size = np.bincount(set_of, minlength=n_sets)
    lost = np.zeros(n_sets, dtype=np.int64)
    times, stacks, wipes = [], [], []
    for time, members in batches:
        fresh = []
        for group in members:
            if down[group] or group in fresh:
                counts["already_down"] += 1
            else:
                fresh.append(group)
        if not fresh:
            continue
        counts["used"] += len(fresh)
        down[fresh] = True
        if strategy == "ckpt":
            wiped, stack = True, 1
        elif strategy == "rep":
            np.add.at(lost, set_of[fresh], 1)
            wiped, stack = bool(np.any(lost >= set_size)), redundancy
        else:
            plan = controller.fail(fresh)
            wiped = plan.status != "masked"
            stack = 1 if wiped else int(plan.stack_number)
        if wiped:
            down[:] = False
            lost[:] = 0
            if controller is not None:
                controller.restart()
            stack = redundancy if strategy == "rep" else 1
        times.append(time * 86400.0 * time_scale)
        stacks.append(stack)
        wipes.append(1 if wiped else 0)
    counts["failure_events"] = len(times)
    return (np.asarray(times, dtype=np.float64), np.asarray(stacks, dtype=np.int16),
            np.asarray(wipes, dtype=np.int8), counts)


def trace_mtbf_seconds(trace, time_scale=1.0):
    """Mean time between ``fault_start`` events of a trace, in (scaled) seconds.

    The span from time 0 to the last event divided by the number of non-ignored
    starts; used for the default checkpoint period of a trace replay.

    Parameters
    ----------
    trace : spare_opt.trace.FaultTrace
    time_scale : float, default 1.0
        Seconds per trace second (``< 1`` compresses the trace), finite and ``> 0``.

    Returns
    -------
    float
        Mean time between usable fault starts, in seconds (``days * 86400 *
        time_scale``).

    Raises
    ------
    TraceError
        ``trace`` is not a :class:`~spare_opt.trace.FaultTrace`, or it has no usable
        ``fault_start``.
    ParameterError
        ``time_scale`` is not a finite number ``> 0``.
    """
    _check_trace(trace)
    time_scale = _check_time_scale(time_scale)
    starts = np.count_nonzero(trace.is_start & ~trace.ignored)
    if starts == 0:
        raise TraceError(f"{trace.source}: no fault_start event to replay")
    return float(trace.span_days[1]) * 86400.0 * time_scale / starts


# ----------------------------------------------------------------------------- simulate
def _check_strategy(strategy, redundancy, groups):
    if strategy not in STRATEGIES:
        raise ParameterError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if strategy == "ckpt":
        return 1
    _, redundancy = check_size(groups, redundancy)
    if strategy == "spare" and redundancy < 2:
        raise ParameterError("SPARe needs redundancy r >= 2 (r = 1 is checkpointing alone)")
    return redundancy


def _pack(params, strategy, redundancy, period, seed, trace_mode):
    from . import _simulate_kernels as K

    f = np.zeros(K.N_FPARAMS)
    f[K.F_LAYER_COMPUTE] = params.layer_compute_seconds
    f[K.F_ALLREDUCE] = params.allreduce_seconds
    f[K.F_SHRINK] = params.shrink_seconds
    f[K.F_CONTROLLER] = params.controller_seconds
    f[K.F_RESTART] = params.restart_seconds
    f[K.F_SAVE] = params.save_seconds
    f[K.F_PERIOD] = period
    f[K.F_MTBF] = params.mtbf_seconds
    f[K.F_SHAPE] = params.weibull_shape
    f[K.F_JITTER] = params.jitter_sd
    f[K.F_MAX_WALL] = params.max_wall_factor * fault_free_seconds(params)
    f[K.F_PATCH_LAYERS] = params.patch_layers
    i = np.zeros(K.N_IPARAMS, dtype=np.int64)
    i[K.I_STEPS] = params.steps
    i[K.I_GROUPS] = params.groups
    i[K.I_STRATEGY] = {"ckpt": K.STRATEGY_CKPT, "rep": K.STRATEGY_REP, "spare": K.STRATEGY_SPARE}[strategy]
    i[K.I_RATE_FOLLOWS_LIVE] = 1 if params.rate_follows_live else 0
    i[K.I_CARRY] = 1 if (params.restart_failures == "carry" or trace_mode) else 0
    i[K.I_SEED] = int(np.random.SeedSequence([int(seed), 2]).generate_state(1)[0])
    i[K.I_TRACE] = 1 if trace_mode else 0
    i[K.I_FAILURE_MODEL] = K.MODEL_GROUP_CLOCKS if params.failure_model == "group-clocks" else K.MODEL_SYSTEM_RENEWAL
    return f, i


def _result(raw, params, strategy, redundancy, period, seed):
    from . import _simulate_kernels as K

    t0 = fault_free_seconds(params)
    wall = float(raw[K.R_WALL])
    finished = bool(raw[K.R_FINISHED] == 1.0)
    ttt = wall if finished else math.inf
    kept = float(raw[K.R_USEFUL] + raw[K.R_OVERHEAD])
    executed = int(raw[K.R_STEPS_EXECUTED])
    return SimulationResult(
        strategy=strategy,
        groups=params.groups,
        redundancy=int(redundancy),
        checkpoint_period_seconds=float(period),
        seed=int(seed),
        finished=finished,
        ttt_seconds=ttt,
        fault_free_seconds=t0,
        ttt_ratio=ttt / t0,
        availability=kept / wall if wall > 0 else 1.0,
        useful_seconds=float(raw[K.R_USEFUL]),
        overhead_seconds=float(raw[K.R_OVERHEAD]),
        rework_seconds=float(raw[K.R_REWORK]),
        restart_seconds=float(raw[K.R_RESTART]),
        checkpoint_seconds=float(raw[K.R_CHECKPOINT]),
        wall_seconds=wall,
        restarts=int(raw[K.R_RESTARTS]),
        masked_failures=int(raw[K.R_MASKED]),
        absorbed_failures=int(raw[K.R_ABSORBED]),
        failures=int(raw[K.R_FAILURES]),
        checkpoints=int(raw[K.R_CHECKPOINTS]),
        mean_stack_number=float(raw[K.R_STACK_STEPS]) / executed if executed else 1.0,
        steps_executed=executed,
    )


def _run_pool(params, strategy, redundancy, period, seed, pool):
    """Run the kernel on a synthetic failure process, growing ``pool`` as needed."""
    from . import _simulate_kernels as K

    f, i = _pack(params, strategy, redundancy, period, seed, trace_mode=False)
    empty_f = np.zeros(0)
    empty_i16 = np.zeros(0, dtype=np.int16)
    empty_i8 = np.zeros(0, dtype=np.int8)
    if strategy != "ckpt" and pool.wipe.size == 0:
        pool.extend(16)
    while True:
        raw = K.run_kernel(f, i, pool.stack, pool.wipe, empty_f, empty_i16, empty_i8)
        if raw[K.R_NEED_MORE] == 0.0:
            return _result(raw, params, strategy, redundancy, period, seed)
        pool.extend(max(16, pool.wipe.size))


def simulate(params, strategy, redundancy=1, checkpoint_period_seconds=None, seed=0, layout=None, trace=None,
             placement_seed=None):
    """Simulate one training run and return its time-to-train and accounting.

    Parameters
    ----------
    params : SimulationParameters
    strategy : {"ckpt", "rep", "spare"}
    redundancy : int
        ``r`` (ignored for ``"ckpt"``); ``1 <= r <= N``, ``r >= 2`` for SPARe.
    checkpoint_period_seconds : float or None
        ``T_c``, seconds of progress between checkpoints; ``None``: the closed-form
        ``T_c*`` (:func:`spare_opt.tune.closed_form_period`; for a trace, with the
        trace's mean time between faults, :func:`trace_mtbf_seconds`, as ``m``).
    seed : int
        Seed of the failure process, the failure order and the jitter.
    layout : Layout or None
        SPARe layout of ``N`` groups and redundancy ``r``; ``None``: a Sidon layout
        (:func:`default_layout`).
    trace : spare_opt.trace.FaultTrace or None
        Replay this trace instead of Weibull failures (``trace_time_scale`` applies;
        failures during a restart always "carry").
    placement_seed : int or None
        Trace only: random node-to-group placement (:func:`trace_failures`).

    Returns
    -------
    SimulationResult

    Raises
    ------
    ParameterError
        Unknown strategy, ``r`` out of range, a layout of the wrong shape, a
        non-positive checkpoint period, ``seed`` not a non-negative integer, or (without
        a trace) more than :data:`MAX_EXPECTED_FAILURES` failures expected before the
        wall-time cap ``max_wall_factor * T0``.
    TraceError
        ``trace`` is not a :class:`~spare_opt.trace.FaultTrace`.

    Notes
    -----
    The run is deterministic for a given ``seed`` (numba's generator is seeded inside
    the kernel; the failure orders come from ``numpy.random.SeedSequence``).
    """
    if not isinstance(params, SimulationParameters):
        raise ParameterError(f"params must be SimulationParameters, got {type(params).__name__}")
    redundancy = _check_strategy(strategy, redundancy, params.groups)
    seed = _check_seed(seed)
    if trace is None:
        _check_event_budget(params)
    else:
        _check_trace(trace)
    if strategy == "spare":
        layout = _check_layout(layout, params.groups, redundancy)
    pool = _TrajectoryPool(strategy, params.groups, redundancy, seed, layout)
    if checkpoint_period_seconds is None:
        from .tune import closed_form_period, mean_failures_to_wipeout

        basis = params
        if trace is not None:
            basis = replace(params, mtbf_seconds=trace_mtbf_seconds(trace, params.trace_time_scale))
        checkpoint_period_seconds = closed_form_period(
            basis, mean_failures_to_wipeout(basis, strategy, redundancy, layout))
    period = _check_period(checkpoint_period_seconds)
    if trace is None:
        return _run_pool(params, strategy, redundancy, period, seed, pool)
    return _run_trace(params, strategy, redundancy, period, seed, layout, trace, placement_seed)


def _run_trace(params, strategy, redundancy, period, seed, layout, trace, placement_seed=None):
    from . import _simulate_kernels as K

    _check_trace(trace)
    times, stacks, wipes, counts = trace_failures(trace, params.groups, strategy, redundancy, layout,
                                                  params.trace_time_scale, placement_seed)
    f, i = _pack(params, strategy, redundancy, period, seed, trace_mode=True)
    rep_stack = np.full((1, 1), redundancy if strategy == "rep" else 1, dtype=np.int16)
    raw = K.run_kernel(f, i, rep_stack, np.zeros(0, dtype=np.int32), times, stacks, wipes)
    result = _result(raw, params, strategy, redundancy, period, seed)
    counts["beyond_run"] = int(np.count_nonzero(times > result.wall_seconds))
    result.trace = dict(counts, source=trace.source,
                        placement="first appearance" if placement_seed is None else f"random, seed {placement_seed}")
    return result


def _check_time_scale(time_scale):
    _check_number("time_scale", time_scale, positive=True)
    return float(time_scale)


def _check_trace(trace):
    from .trace import FaultTrace

    if not isinstance(trace, FaultTrace):
        raise TraceError(f"trace must be a FaultTrace (spare_opt.read_fault_trace), got {type(trace).__name__}")


def _check_layout(layout, groups, redundancy):
    if layout is None:
        return default_layout(groups, redundancy)
    if not isinstance(layout, Layout):
        raise ParameterError(f"layout must be a Layout, got {type(layout).__name__}")
    if layout.groups != groups or layout.redundancy != redundancy:
        raise ParameterError(
            f"layout has N={layout.groups}, r={layout.redundancy}; the run needs N={groups}, r={redundancy}"
        )
    return layout


def _check_period(period):
    if isinstance(period, bool) or not isinstance(period, (int, float, np.integer, np.floating)) \
            or not math.isfinite(period) or period <= 0:
        raise ParameterError(f"checkpoint period must be a finite number of seconds > 0, got {period!r}")
    return float(period)


def simulate_seeds(params, strategy, redundancy=1, checkpoint_period_seconds=None, seeds=10, layout=None,
                   trace=None, first_seed=0):
    """Run :func:`simulate` for seeds ``first_seed .. first_seed + seeds - 1``.

    Parameters
    ----------
    params, strategy, redundancy, checkpoint_period_seconds, layout, trace
        As for :func:`simulate`.
    seeds : int, default 10
        Number of runs, ``>= 1``.
    first_seed : int, default 0
        Seed of the first run.

    Returns
    -------
    list of SimulationResult
        One result per seed, in seed order.

    Raises
    ------
    ParameterError
        ``seeds`` is not a positive integer, or any error of :func:`simulate`.
    TraceError
        As for :func:`simulate`.
    """
    if isinstance(seeds, bool) or not isinstance(seeds, (int, np.integer)) or seeds < 1:
        raise ParameterError(f"seeds must be a positive integer, got {seeds!r}")
    return [simulate(params, strategy, redundancy, checkpoint_period_seconds, seed=first_seed + s,
                     layout=layout, trace=trace) for s in range(seeds)]


def summarise(results):
    """Mean and 95% confidence interval of the main figures over several runs.

    Parameters
    ----------
    results : list of SimulationResult
        Runs of one configuration (different seeds).

    Returns
    -------
    dict
        For ``ttt_ratio``, ``availability``, ``restarts``, ``masked_failures``,
        ``mean_stack_number``, ``rework_seconds``, ``checkpoint_seconds``,
        ``ttt_seconds``: ``{"mean", "ci95": [low, high]}`` (Student t interval over
        seeds); plus ``runs`` and ``unfinished``.  Unfinished runs have ``inf`` time;
        the interval is ``[nan, nan]`` where it cannot be given (a single run, or an
        unfinished one).

    Raises
    ------
    ParameterError
        ``results`` is empty or holds something other than :class:`SimulationResult`.
    """
    results = list(results)
    if not results or not all(isinstance(r, SimulationResult) for r in results):
        raise ParameterError("summarise needs a non-empty list of SimulationResult")
    out = {"runs": len(results), "unfinished": sum(not r.finished for r in results)}
    keys = ("ttt_ratio", "ttt_seconds", "availability", "restarts", "masked_failures", "mean_stack_number",
            "rework_seconds", "checkpoint_seconds")
    for key in keys:
        values = np.array([getattr(r, key) for r in results], dtype=float)
        mean, (low, high) = mean_ci95(values)
        out[key] = {"mean": mean, "ci95": [low, high]}
    return out

"""Simulation parameters and presets: the one place the paper's numbers live.

:data:`PAPER` holds the setting of the paper's evaluation (Lee et al., ICML 2026,
Sec. 6; ``docs/reproduction.md``) and :data:`PAPER_TABLE` its reported results; every default
elsewhere in spare-opt (:class:`SimulationParameters`, the presets, the closed forms of
:mod:`spare_opt.theory`, :func:`spare_opt.sweep`, :func:`spare_opt.simulation.tuning`) is read
from here.

Time names: ``system_mtbf_seconds`` is the system MTBF ``m``, the mean time between
failures of *any* group with every group live; the mean time between *unmasked*
failures (wipe-outs), ``T_f`` in the checkpointing formulas, is called
``unmasked_mtbf_seconds`` (:func:`spare_opt.theory.checkpoint_period`).
"""

import copy
import math
import warnings
from dataclasses import asdict, dataclass

from .._core import validation as check
from .._core.errors import ParameterError, ParameterTypeError
from .._core.paper import PAPER, PAPER_MTBF_SECONDS, PAPER_RESTART_SECONDS, PAPER_SAVE_SECONDS, PAPER_TABLE
from ..layouts.layout import check_size

__all__ = [
    "PAPER",
    "PAPER_TABLE",
    "PAPER_MTBF_SECONDS",
    "PAPER_RESTART_SECONDS",
    "PAPER_SAVE_SECONDS",
    "DEFAULT_PERIOD_FACTORS",
    "DEFAULT_REP_REDUNDANCIES",
    "DEFAULT_SPARE_REDUNDANCIES",
    "STRATEGIES",
    "RESTART_FAILURE_POLICIES",
    "FAILURE_MODELS",
    "MAX_STEPS",
    "DEFAULT_HEAL_SECONDS",
    "SimulationParameters",
    "Preset",
    "PRESETS",
    "get_preset",
    "preset_parameters",
    "parse_overrides",
    "allreduce_seconds",
    "allreduce_extrapolation",
    "ring_allreduce_seconds",
    "ALLREDUCE_FITTED_GROUPS",
    "micro_batch_capacity",
    "fault_free_seconds",
    "steps_in",
]

#: Checkpoint periods that tuning tries, as multiples of the Young/Daly ``T_c*``.
DEFAULT_PERIOD_FACTORS = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0)
#: Replication degrees that tuning sweeps.
DEFAULT_REP_REDUNDANCIES = (2, 3, 4, 5, 6)
#: SPARe redundancies that tuning sweeps.
DEFAULT_SPARE_REDUNDANCIES = tuple(range(2, 15))

#: Strategies of a run: checkpointing alone, replication, SPARe, and the elastic rule of
#: TorchFT / FT-HSDP (live replicas go on with a smaller global batch; given events only).
STRATEGIES = ("ckpt", "rep", "spare", "elastic")
#: What happens to failures that strike during a global restart:
#: ``"absorb"`` - the restart replaces the failed node (the failure is counted, the
#: group comes back with the others); ``"carry"`` - the group stays down and the
#: failure is handled (masked or another restart) when training resumes.
RESTART_FAILURE_POLICIES = ("absorb", "carry")
#: How failure times are drawn (see :class:`SimulationParameters`).
FAILURE_MODELS = ("system-renewal", "group-clocks")
#: Most training steps a simulated run may have.
MAX_STEPS = 10**9
#: Seconds a repaired group takes to heal before it rejoins (``"repair"`` semantics).
#: At the paper's scale (10T parameters, 16 bytes each for bf16 weights, fp32 master
#: weights and two Adam moments: 160 TB of state) a returning group of the N = 600
#: cluster (about 1,000 H100) pulls 160 GB per GPU from a live peer: 6.4 s at half a
#: 400 Gb/s NIC (25 GB/s, the other half left to the peer's training traffic).  Starting
#: the group's processes and its internal tensor- and pipeline-parallel communicators
#: takes longer; we round the whole to one minute (``docs/fractional.md`` shows that
#: time-to-train hardly moves between 0 and 10 minutes: repairs take hours).
DEFAULT_HEAL_SECONDS = 60.0
#: Old names of :class:`SimulationParameters` fields, accepted (with a warning) for one release.
_RENAMED_FIELDS = {"mtbf_seconds": "system_mtbf_seconds"}


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
    allreduce_seconds : float or None
        Gradient all-reduce time per step; ``None`` (default): the paper's line
        :func:`allreduce_seconds` at ``N``.
    shrink_seconds : float
        Communicator shrink after each masked failure.
    controller_seconds : float
        Reorder-controller decision time per masked failure (SPARe only).
    restart_seconds : float
        One global restart ``T_r`` (re-initialise every communicator, reload the
        checkpoint).
    save_seconds : float
        One checkpoint save ``T_s``.
    system_mtbf_seconds : float
        System MTBF ``m``: mean time between failures of any group with every group
        live (not the time between wipe-outs).
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
    heal_seconds : float
        ``"repair"`` semantics only: seconds from a group's ``fault_end`` to the time it
        is ready to rejoin (it loads weights and optimizer state from a live peer), not
        scaled by ``trace_time_scale``; default :data:`DEFAULT_HEAL_SECONDS` (the
        reason is given there).

    Defaults are the paper's setting (:data:`PAPER`); every time is in seconds.

    Raises
    ------
    ParameterTypeError
        A value has the wrong type (an integer field given a float, a flag given 1).
    ParameterError
        A value is out of range (the message names it).
    """

    groups: int
    steps: int = PAPER["steps"]
    layer_compute_seconds: float = PAPER["layer_compute_seconds"]
    allreduce_seconds: float | None = None
    shrink_seconds: float = PAPER["shrink_seconds"]
    controller_seconds: float = PAPER["controller_seconds"]
    restart_seconds: float = PAPER["restart_seconds"]
    save_seconds: float = PAPER["save_seconds"]
    system_mtbf_seconds: float = PAPER["system_mtbf_seconds"]
    weibull_shape: float = PAPER["weibull_shape"]
    jitter_sd: float = PAPER["jitter_sd"]
    patch_layers: float = 1.0
    rate_follows_live: bool = True
    restart_failures: str = "carry"
    failure_model: str = "group-clocks"
    max_wall_factor: float = 200.0
    trace_time_scale: float = 1.0
    heal_seconds: float = DEFAULT_HEAL_SECONDS

    def __post_init__(self):
        groups, _ = check_size(self.groups, 1)
        steps = check.integer("steps", self.steps, minimum=1, maximum=MAX_STEPS)
        # Plain Python values (numpy scalars would break json.dumps of to_dict()).
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "steps", steps)
        if self.allreduce_seconds is None:
            object.__setattr__(self, "allreduce_seconds", allreduce_seconds(groups))
        object.__setattr__(self, "rate_follows_live", check.flag("rate_follows_live", self.rate_follows_live))
        for name in ("layer_compute_seconds", "system_mtbf_seconds", "weibull_shape", "save_seconds",
                     "max_wall_factor", "trace_time_scale"):
            object.__setattr__(self, name, check.number(name, getattr(self, name), above=0.0))
        for name in ("allreduce_seconds", "shrink_seconds", "controller_seconds", "restart_seconds",
                     "jitter_sd", "patch_layers", "heal_seconds"):
            object.__setattr__(self, name, check.number(name, getattr(self, name), minimum=0.0))
        check.weibull_shape(self.weibull_shape)
        if self.jitter_sd >= 0.5:
            raise ParameterError(f"jitter_sd must be < 0.5 (a relative standard deviation), got {self.jitter_sd}")
        check.choice("failure_model", self.failure_model, FAILURE_MODELS)
        check.choice("restart_failures", self.restart_failures, RESTART_FAILURE_POLICIES)
        # The wall-time cap is what stops a run that cannot finish: it must be a number.
        if not math.isfinite(self.max_wall_factor * fault_free_seconds(self)):
            raise ParameterError(
                f"the wall-time cap max_wall_factor * T0 = {self.max_wall_factor} * {fault_free_seconds(self)} s "
                "overflows; lower steps, layer_compute_seconds or max_wall_factor"
            )

    @property
    def fault_free_seconds(self):
        """float: ``T0 = steps * (layer_compute_seconds + allreduce_seconds)``, in seconds."""
        return fault_free_seconds(self)

    def to_dict(self):
        """dict: the parameters, JSON-ready."""
        return asdict(self)


def _with_system_mtbf(params, system_mtbf_seconds):
    """``params`` with another ``system_mtbf_seconds``, the one changed field checked.

    What ``dataclasses.replace`` gives, without checking again the fields that do not
    change: ``params`` is checked by the caller; the new value is checked here as
    ``__post_init__`` checks it (the same message), and no other check there depends on it.
    """
    value = check.number("system_mtbf_seconds", system_mtbf_seconds, above=0.0)
    changed = copy.copy(params)
    object.__setattr__(changed, "system_mtbf_seconds", value)
    return changed


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


class TooManyEvents(ParameterError):
    """A model's run would draw more than :data:`~spare_opt.traces.failure_model.MAX_SAMPLE_EVENTS` failure events.

    ``gap_seconds`` is the model's time between failure events on the run's groups, so
    that a caller that knows the run's parameters names the input that makes the
    horizon astronomic (:func:`astronomic_input`).
    """

    def __init__(self, message, gap_seconds):
        super().__init__(message)
        self.gap_seconds = gap_seconds


def astronomic_input(params, gap_seconds, gap_name, shape=False):
    """Name the input that makes a run need too many failures: the one farthest above its usual magnitude.

    A run's horizon is ``max_wall_factor * T0`` with ``T0 = steps * (layer_compute_seconds
    + allreduce_seconds)``, and the failures it needs are about the horizon over the time
    between failures ``gap_seconds``.  Each input is compared with the paper's setting
    (:data:`PAPER`: 10,000 steps of 64 s, an all-reduce of :func:`allreduce_seconds` at
    ``N``, a cap of 200 ``T0``, a failure every 300 s), on a log scale: the one that
    stands farthest above it (for the gap: below it) is named with its value, since
    lowering (raising) it is what brings the run back.  An all-reduce of ``1e300`` s was
    reported as too many failures with the advice to lower the cycles or the steps.

    Parameters
    ----------
    params : SimulationParameters
    gap_seconds : float
        Mean time between failures of the run's source, in seconds (> 0).
    gap_name : str
        What sets it, as the message names it: a field (``"system_mtbf_seconds"``, to
        raise) or words (``"the failure model"``, whose failures must be rarer).
    shape : bool, default False
        Whether ``params.weibull_shape`` shapes the failures (synthetic runs): a shape
        far below the paper's 0.78 bunches them, and it is a candidate too.

    Returns
    -------
    str
        ``"allreduce_seconds = 1e+300 s makes T0 = steps x (layer_compute_seconds +
        allreduce_seconds) = 1e+05 x (64 s + 1e+300 s) astronomic: lower
        allreduce_seconds"``, or the like for the other inputs.
    """
    usual_allreduce = allreduce_seconds(params.groups)
    candidates = [
        ("steps", params.steps, PAPER["steps"], "", "lower"),
        ("layer_compute_seconds", params.layer_compute_seconds, PAPER["layer_compute_seconds"], " s", "lower"),
        ("allreduce_seconds", params.allreduce_seconds, usual_allreduce, " s", "lower"),
        ("max_wall_factor", params.max_wall_factor, 200.0, "", "lower"),
        (gap_name, gap_seconds, PAPER["system_mtbf_seconds"], " s", "raise"),
    ]
    if shape:
        candidates.append(("weibull_shape", params.weibull_shape, PAPER["weibull_shape"], "", "raise"))

    def excess(item):
        _, value, usual, _, direction = item
        if not value > 0 or not math.isfinite(value):
            return math.inf if direction == "raise" else -math.inf
        ratio = math.log10(value) - math.log10(usual)
        return ratio if direction == "lower" else -ratio

    name, value, _, unit, direction = max(candidates, key=excess)
    t0 = (f"T0 = steps x (layer_compute_seconds + allreduce_seconds) = {params.steps:g} x "
          f"({params.layer_compute_seconds:g} s + {params.allreduce_seconds:g} s) = {fault_free_seconds(params):.3g} s")
    if name == "weibull_shape":
        return f"weibull_shape = {value:g} bunches the failures: raise weibull_shape"
    if direction == "raise":
        if name.isidentifier():  # a field: system_mtbf_seconds
            return f"{name} = {value:.3g} s between failures makes it so: raise {name}"
        return f"{name}'s failures, one every {value:.3g} s, make it so: use a model with rarer failures"
    if name == "max_wall_factor":
        return f"max_wall_factor = {value:g} makes the horizon {value:g} x T0 ({t0}): lower max_wall_factor"
    return f"{name} = {value:g}{unit} makes {t0} astronomic: lower {name}"


def steps_in(seconds, params, what="the trace span times the trace time scale"):
    """The number of fault-free steps of ``params`` that fill ``seconds``: ``round(seconds / step)``, at least 1.

    The one conversion of a duration into a step count (``compare`` takes the steps of
    one trace span this way): the quotient is checked before it becomes an ``int``,
    so a product that overflows a float (a trace time scale of ``1e306``) is refused
    in one line instead of an ``OverflowError``.

    Parameters
    ----------
    seconds : float
        The duration, in seconds (may be infinite: it is refused).
    params : SimulationParameters
        Gives the step time ``layer_compute_seconds + allreduce_seconds``.
    what : str
        How the duration is called in the message.

    Returns
    -------
    int
        ``max(1, round(seconds / step))``, at most :data:`MAX_STEPS`.

    Raises
    ------
    ParameterError
        ``seconds / step`` is not finite or exceeds :data:`MAX_STEPS`.
    """
    step = params.layer_compute_seconds + params.allreduce_seconds
    steps = seconds / step
    if not math.isfinite(steps):
        raise ParameterError(f"{what} overflows a float in seconds or in steps of {step:g} s; "
                             "lower the trace time scale (--time-scale, trace_time_scale) or give the number of "
                             "steps (steps)")
    if steps > MAX_STEPS + 0.5:
        raise ParameterError(f"{what} ({seconds:.3g} s) is {steps:.3g} steps of {step:g} s, more than the "
                             f"{MAX_STEPS:,} a run may have; lower the trace time scale or give the number of steps")
    return max(1, round(steps))


def allreduce_seconds(groups):
    """All-reduce time per step, linear in ``N`` between the paper's two anchor points.

    The paper gives "2-10 s growing with N" for ``N`` in {200, 600, 1000}; we take the
    line through ``(200, 2 s)`` and ``(1000, 10 s)`` (``PAPER["allreduce_low"]`` and
    ``PAPER["allreduce_high"]``; 6 s at ``N = 600``), clipped below at 2 s.  A ring
    all-reduce has a bandwidth term that is nearly constant in ``N`` and a latency term
    linear in ``N``; at this scale the latency term dominates the growth.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N``.

    Returns
    -------
    float
        Seconds.
    """
    (low_groups, low_seconds), (high_groups, high_seconds) = PAPER["allreduce_low"], PAPER["allreduce_high"]
    slope = (high_seconds - low_seconds) / (high_groups - low_groups)
    return max(low_seconds, low_seconds + slope * (groups - low_groups))


#: The range of ``N`` the paper's all-reduce line was fitted on (its two anchor points).
ALLREDUCE_FITTED_GROUPS = (PAPER["allreduce_low"][0], PAPER["allreduce_high"][0])


def ring_allreduce_seconds(groups, gradient_bytes, bandwidth_bytes_per_second, latency_seconds=0.0):
    """All-reduce time of a ring all-reduce: ``2 (N - 1) / N * gradient_bytes / bandwidth + latency``.

    The bandwidth term of the ring algorithm (reduce-scatter then all-gather, each
    moving ``(N - 1) / N`` of the gradient through every link) with one fixed latency
    term added; a model the operator can check against a measurement, used by
    :func:`spare_opt.compare` past the range of the paper's line.

    Parameters
    ----------
    groups : int
        DP groups ``N`` (the ring's members).
    gradient_bytes : float
        Bytes of gradient each group all-reduces per step (``> 0``).
    bandwidth_bytes_per_second : float
        Bus bandwidth of one ring link, bytes per second (``> 0``).
    latency_seconds : float, default 0.0
        Fixed latency of one all-reduce (``>= 0``).

    Returns
    -------
    float
        Seconds.

    Raises
    ------
    ParameterError
        A value out of range.

    References
    ----------
    P. Patarasuk and X. Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
    workstations", J. Parallel Distrib. Comput. 69(2), 2009; NCCL's ``busbw``
    (nccl-tests, ``doc/PERFORMANCE.md``).
    """
    groups, _ = check_size(groups, 1)
    gradient_bytes = check.number("gradient_bytes", gradient_bytes, above=0.0)
    bandwidth = check.number("bandwidth_bytes_per_second", bandwidth_bytes_per_second, above=0.0)
    latency = check.number("allreduce_latency_seconds", latency_seconds, minimum=0.0)
    return 2.0 * (groups - 1) / groups * gradient_bytes / bandwidth + latency


def micro_batch_capacity(global_batch, groups):
    """Most micro-batches per shard type a global batch can hold: ``floor(B / N)`` sequences per group.

    Parameters
    ----------
    global_batch : int
        Sequences in the global batch ``B``, ``>= 1``.
    groups : int
        DP groups ``N``.

    Returns
    -------
    int
        ``floor(B / N)``: a group's shard type holds that many sequences, and a
        micro-batch holds at least one.

    Raises
    ------
    ParameterTypeError
        ``global_batch`` is not an integer.
    ParameterError
        ``global_batch < N``: some group would get no sequence at all.
    """
    global_batch = check.count("global_batch", global_batch)
    if global_batch < groups:
        raise ParameterError(f"a global batch of {global_batch} sequences is fewer than the N = {groups} groups: "
                             "every group needs at least one sequence")
    return global_batch // groups


def allreduce_extrapolation(groups):
    """A one-line warning when :func:`allreduce_seconds` at ``N`` is extrapolated, else ``None``.

    The paper's line is anchored on ``N = 200 .. 1000`` (2-10 s); below it is clipped
    at 2 s, above it grows without a measurement behind it.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N``.

    Returns
    -------
    str or None
        The warning, naming the extrapolated value, for ``N > 1000``; ``None`` otherwise.
    """
    high_groups, high_seconds = PAPER["allreduce_high"]
    if groups <= high_groups:
        return None
    value = allreduce_seconds(groups)
    return (f"all-reduce time {value:.3g} s is the paper's line extrapolated to N = {groups:,} (it was fitted "
            f"on N = {PAPER['allreduce_low'][0]}-{high_groups}, {PAPER['allreduce_low'][1]:g}-{high_seconds:g} s): "
            "give the measured time (allreduce_seconds, --allreduce-seconds)")


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
    rep_redundancies: tuple = DEFAULT_REP_REDUNDANCIES
    spare_redundancies: tuple = DEFAULT_SPARE_REDUNDANCIES
    period_factors: tuple = DEFAULT_PERIOD_FACTORS


#: The paper's timings, shared by the presets that use them.
_PAPER_TIMINGS = {key: PAPER[key] for key in (
    "layer_compute_seconds", "shrink_seconds", "controller_seconds", "restart_seconds", "save_seconds",
    "system_mtbf_seconds", "weibull_shape", "jitter_sd")}

PRESETS = {
    "paper-600k": Preset(
        name="paper-600k",
        groups=PAPER["groups"],
        base=dict(_PAPER_TIMINGS, steps=PAPER["steps"], failure_model="group-clocks", restart_failures="carry"),
        description=(
            "Lee et al. (ICML 2026) Sec. 6: 600k H100, 10T parameters, 10,000 steps, 64 s per layer, "
            "all-reduce 2-10 s (linear in N), m = 5 min Weibull k = 0.78, T_r = 60 min, T_s = 60 s"
        ),
    ),
    "trace-400": Preset(
        name="trace-400",
        groups=(400,),
        base=dict(_PAPER_TIMINGS, steps=400_000),
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
        ``N``, any (``1 <= N``): the preset's ``groups`` are the sizes it was written
        for, but its timings and system MTBF hold at any ``N`` (the all-reduce follows
        :func:`allreduce_seconds` unless overridden).
    **overrides
        Fields of :class:`SimulationParameters` to change (``mtbf_seconds``, the old
        name of ``system_mtbf_seconds``, is accepted with a ``DeprecationWarning``).

    Returns
    -------
    SimulationParameters

    Raises
    ------
    ParameterTypeError
        ``groups`` is not an integer, or an override has the wrong type.
    ParameterError
        Unknown preset, ``N < 1``, or a bad override.
    """
    preset = get_preset(name)
    groups = check.integer("groups N", groups, maximum=check.MAX_GROUPS)
    overrides = _renamed(overrides)
    unknown = set(overrides) - set(SimulationParameters.__dataclass_fields__)
    if unknown:
        raise ParameterError(f"unknown simulation parameter(s): {', '.join(sorted(unknown))}")
    fields = dict(preset.base)
    fields.update(overrides)
    return SimulationParameters(groups=groups, **fields)


def _renamed(overrides):
    """``overrides`` with deprecated field names replaced by the current ones (with a warning)."""
    out = {}
    for key, value in overrides.items():
        if key in _RENAMED_FIELDS:
            warnings.warn(f"simulation parameter {key!r} is now called {_RENAMED_FIELDS[key]!r}",
                          DeprecationWarning, stacklevel=3)
            key = _RENAMED_FIELDS[key]
        out[key] = value
    return out


#: How ``--set FIELD=VALUE`` text converts, per field of :class:`SimulationParameters`.
_FIELD_KINDS = {
    "steps": "int", "rate_follows_live": "bool", "restart_failures": "str", "failure_model": "str",
}


def parse_overrides(items):
    """Parse ``["field=value", ...]`` into :class:`SimulationParameters` overrides.

    Values are converted to the field's type by the project's one parser of written
    numbers (:func:`spare_opt._core.validation.parse_int` and
    :func:`~spare_opt._core.validation.parse_float`, shared with ``--fail`` and every
    numeric option): ``int`` and ``float`` in ASCII decimal (``"1_000"``, other
    scripts' digits, ``nan``, ``inf`` and numbers that overflow or underflow a float
    are refused), ``bool`` from ``true/false/1/0/yes/no``, ``str`` as given.

    Parameters
    ----------
    items : iterable of str

    Returns
    -------
    dict

    Raises
    ------
    ParameterTypeError
        ``items`` is not a list of strings.
    ParameterError
        An item is not ``field=value``, names no field (or ``groups``), gives a field
        twice, or its value does not convert.
    """
    fields = SimulationParameters.__dataclass_fields__
    if isinstance(items, str):  # one "field=value", not a sequence of characters
        items = [items]
    try:
        items = list(items)
    except TypeError:
        raise ParameterTypeError(f"overrides must be a list of FIELD=VALUE strings, got {items!r}") from None
    out = {}
    for item in items:
        if not isinstance(item, str):
            raise ParameterTypeError(f"overrides must be FIELD=VALUE strings, got {type(item).__name__}")
        key, sep, text = item.partition("=")
        key, text = key.strip().replace("-", "_"), text.strip()
        if not sep or not key:
            raise ParameterError(f"expected FIELD=VALUE, got {item!r}")
        key = next(iter(_renamed({key: None})))
        if key not in fields or key == "groups":
            names = ", ".join(name for name in fields if name != "groups")
            raise ParameterError(f"unknown simulation parameter {key!r}; known: {names}")
        if key in out:
            # Two values for one field: the first would be dropped without a word.
            raise ParameterError(f"simulation parameter {key!r} is set twice")
        kind = _FIELD_KINDS.get(key, "float")
        if kind == "bool":
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ParameterError(f"{key} expects true or false, got {text!r}")
            out[key] = lowered in ("true", "1", "yes")
        elif kind == "int":
            out[key] = check.parse_int(text, key)
        elif kind == "float":
            out[key] = check.parse_float(text, key)
        else:
            out[key] = text
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



"""The machinery of simulated runs, shared by :mod:`spare_opt.simulation.time_to_train` and :mod:`spare_opt.simulation.tuning` (private).

* checks of a run's arguments (strategy and redundancy, checkpoint period, event budget);
* the default layout and redundancy of each strategy;
* :class:`FailurePool`: per-restart-epoch failure outcomes drawn from one seed;
* running the numba event loop (:mod:`spare_opt.simulation._kernels`) on a pool or on
  precomputed failure events, and turning its statistics into a :class:`SimulationResult`;
* the Young/Daly checkpoint period of a strategy (:func:`closed_form_period`) and the
  mean number of failures to a wipe-out it needs (:func:`mean_failures_to_wipe_out`).

Public names here are re-exported by :mod:`spare_opt.simulation.time_to_train` and :mod:`spare_opt.simulation.tuning`.
"""

import math
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass

import numpy as np

from .._core import validation as check
from ..guarantees import theory
from .._core.results import Result
from .._core.stats import finite_or_none, weibull_renewals
from .._core.errors import FailureSetError, ParameterError
from .parameters import STRATEGIES, SimulationParameters, TooManyEvents, astronomic_input, fault_free_seconds
from ..layouts.layout import check_layout, check_size

__all__ = [
    "MAX_EXPECTED_FAILURES",
    "MAX_RUN_FAILURES",
    "MAX_RUN_EPOCHS",
    "DEFAULT_REP_REDUNDANCY",
    "SimulationResult",
    "FailurePool",
    "check_event_budget",
    "check_strategy",
    "check_redundancy",
    "check_period",
    "check_params",
    "check_run_layout",
    "default_redundancy",
    "default_layout",
    "rep_wipe_out_index",
    "closed_form_period",
    "mean_failures_to_wipe_out",
    "run_synthetic",
    "run_events",
]

#: Most failures a synthetic run may expect before its wall-time cap
#: (``max_wall_factor * T0 / system_mtbf_seconds``): every restart epoch keeps its failure
#: outcomes in memory, so beyond this a hopeless run would exhaust memory or time.
MAX_EXPECTED_FAILURES = 5 * 10**7
#: Most failures one run may draw, whatever the parameters: the bound of the event loop.
#: The budget above is an expectation (a Weibull renewal count); failures that bunch up
#: after every restart (group clocks with a small shape and a zero restart time) can
#: still exceed it, and such a run is stopped and refused rather than left to spin.
MAX_RUN_FAILURES = 2 * MAX_EXPECTED_FAILURES
#: Most restart epochs one synthetic run may draw outcomes for (each SPARe epoch costs a
#: controller trajectory, about 0.4 ms at N = 200): the bound of the pool's growth.  A
#: finishing run of the presets needs at most a few ten thousand.
MAX_RUN_EPOCHS = 2**18
#: Jitter normals drawn ahead per kernel seed (:func:`_stream_ahead`), at most this many
#: each (16 MB), for this many seeds (the most recent).
MAX_AHEAD_NORMALS = 2**21
AHEAD_SEEDS_KEPT = 4
_AHEAD = OrderedDict()
_AHEAD_LOCK = threading.Lock()
#: Seed of the failure orders used to estimate ``T_f`` for the default checkpoint period
#: (kept apart from the seeds of the runs).
GRID_SEED = 1_000_003


# ----------------------------------------------------------------------------- checks
def check_params(params):
    """``params`` if it is a :class:`SimulationParameters`; :class:`ParameterTypeError` otherwise."""
    return check.instance("params", params, SimulationParameters)


def check_event_budget(params):
    """Refuse synthetic runs that could need more than :data:`MAX_EXPECTED_FAILURES` failures.

    The count is the expected number of Weibull renewals of mean
    ``system_mtbf_seconds`` and shape ``weibull_shape`` up to the wall-time cap
    ``max_wall_factor * T0`` (:func:`spare_opt._core.stats.weibull_renewals`): about
    ``cap / m`` for the usual shapes, far more when a shape well below 1 makes most
    gaps tiny.
    """
    cap = params.max_wall_factor * fault_free_seconds(params)
    expected = weibull_renewals(cap, params.system_mtbf_seconds, params.weibull_shape)
    if not expected <= MAX_EXPECTED_FAILURES:
        raise ParameterError(
            f"a run could need about {expected:.3g} failures before its wall-time cap "
            f"(max_wall_factor * T0 = {cap:.3g} s, system_mtbf_seconds {params.system_mtbf_seconds:g}, "
            f"weibull_shape {params.weibull_shape:g}; at most {MAX_EXPECTED_FAILURES:.0e}): "
            f"{astronomic_input(params, params.system_mtbf_seconds, 'system_mtbf_seconds', shape=True)}"
        )


def check_strategy(strategy, redundancy, groups):
    """The redundancy a strategy runs with: 1 for ``"ckpt"``, ``r`` checked otherwise.

    Raises
    ------
    ParameterTypeError
        ``strategy`` is not a string or ``redundancy`` is not an integer.
    ParameterError
        Unknown strategy, ``r`` outside ``[1, N]``, or ``r < 2`` for SPARe.  ``"ckpt"``
        and ``"elastic"`` run with ``r = 1`` whatever is given.
    """
    check.choice("strategy", strategy, STRATEGIES)
    return check_redundancy(strategy, redundancy, groups)


def check_redundancy(strategy, redundancy, groups):
    """:func:`check_strategy` for a strategy already checked: the redundancy it runs with.

    ``strategy`` is checked by the caller (the public function's check of its arguments).
    """
    if strategy in ("ckpt", "elastic"):
        return 1
    _, redundancy = check_size(groups, redundancy)
    if strategy == "spare" and redundancy < 2:
        alone = "; N = 1 allows only r = 1" if groups == 1 else ""
        raise ParameterError(f"SPARe needs redundancy r >= 2 (r = 1 is checkpointing alone){alone}")
    return redundancy


def check_period(period):
    """A checkpoint period as a finite number of seconds ``> 0``."""
    return check.seconds("checkpoint period", period)


def check_run_layout(layout, groups, redundancy):
    """The SPARe layout of a run: ``layout`` checked against ``N`` and ``r``, or :func:`default_layout`.

    ``groups`` and ``redundancy`` are checked by the caller (:func:`check_strategy`).
    """
    if layout is None:
        return _default_layout(groups, redundancy)
    check_layout(layout)
    if layout.groups != groups or layout.redundancy != redundancy:
        raise ParameterError(
            f"layout has N={layout.groups}, r={layout.redundancy}; the run needs N={groups}, r={redundancy}"
        )
    return layout


# ----------------------------------------------------------------------------- result
@dataclass(eq=False)
class SimulationResult(Result):
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
        False when the run hit ``max_wall_factor * T0`` before its last step, or its
        last step ended beyond it (the cap is tested before each step).
    ttt_seconds : float
        Time-to-train (wall clock); ``inf`` when unfinished.
    fault_free_seconds : float
        ``T0``.
    ttt_ratio : float
        ``TTT / T0``.
    availability : float
        ``(useful + overhead) / wall``, in ``[0, 1]``.
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
        Events given up front (a trace or a fault model) only: what was used and
        skipped (:func:`spare_opt.simulation.time_to_train.failure_events`).
    micro_batches : int
        ``m``, micro-batches per shard type (1: the paper's whole shards).
    semantics : str
        ``"paper"`` (failed groups stay out until a global restart) or ``"repair"``
        (repaired groups heal and rejoin).
    mean_step_cost : float
        Mean step cost ``sigma`` (layers of compute per step: ``S`` at ``m = 1``,
        ``L*/m`` with micro-batches, ``r`` for replication) per executed step, the
        same average as ``mean_stack_number`` (not weighted by time).
    rejoins : int
        Repaired groups that rejoined (``"repair"`` semantics).
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
    micro_batches: int = 1
    semantics: str = "paper"
    mean_step_cost: float = 1.0
    rejoins: int = 0

    def to_dict(self):
        """dict: the fields, JSON-ready (``inf`` and NaN become ``None``)."""
        return finite_or_none(asdict(self))



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
        1 for ``"ckpt"`` and ``"elastic"``; 3 for ``"rep"`` (the paper's best replication degree);
        ``r* = floor(log2 N + 0.833)`` for ``"spare"``
        (:func:`spare_opt.theory.r_star`), at least 2 (``r* = 1`` at ``N = 2``, and
        ``r = 1`` is checkpointing alone).  Both are cut at ``N``: a group holds at most
        ``N`` distinct shard types.

    Raises
    ------
    ParameterTypeError
        ``N`` is not an integer (for every strategy).
    ParameterError
        Unknown strategy, or ``N`` is not in ``[1, 2**31 - 1]``.

    References
    ----------
    Lee et al., ICML 2026, arXiv:2603.00357, Sec. 5 (``r*``) and Sec. 6 (Rep+CKPT is
    best at ``r = 3``).
    """
    check.choice("strategy", strategy, STRATEGIES)
    groups = check.integer("groups N", groups, minimum=1, maximum=check.MAX_GROUPS)
    return _default_redundancy(strategy, groups)


def _default_redundancy(strategy, groups):
    """:func:`default_redundancy`; arguments are checked by the caller (``simulate`` checks
    ``strategy``, :class:`SimulationParameters` checks ``N``)."""
    if strategy in ("ckpt", "elastic"):
        return 1
    if strategy == "rep":
        return min(DEFAULT_REP_REDUNDANCY, groups)
    return min(max(2, theory.r_star(groups)), groups)


_LAYOUT_CACHE = {}


def default_layout(groups, redundancy, *, time_limit=10.0, seed=0):
    """The layout SPARe runs with by default: a Sidon circulant layout (cached).

    Parameters
    ----------
    groups, redundancy : int
        ``N`` and ``r``.
    time_limit : float, default 10.0
        Seconds for the offset search (:func:`spare_opt.sidon`).
    seed : int, default 0

    Returns
    -------
    Layout

    Raises
    ------
    ParameterTypeError, ParameterError
        ``N``, ``r``, ``time_limit`` or ``seed`` of the wrong type or out of range.

    Notes
    -----
    The cache is keyed by every argument, so a different ``time_limit`` or ``seed``
    gets its own layout (a search cut short by its time limit may end elsewhere).
    """
    return _default_layout(*check_size(groups, redundancy), check.seconds("time_limit", time_limit),
                           check.seed(seed))


def _default_layout(groups, redundancy, time_limit=10.0, seed=0):
    """:func:`default_layout`; arguments are checked by the caller (:func:`default_layout`,
    or :func:`check_strategy` before :func:`check_run_layout`)."""
    key = (groups, redundancy, time_limit, seed)
    if key not in _LAYOUT_CACHE:
        from ..layouts.generators import sidon

        _LAYOUT_CACHE[key] = sidon(key[0], key[1], time_limit=key[2], seed=key[3])
    return _LAYOUT_CACHE[key]


# ----------------------------------------------------------------------------- failure pools
def rep_wipe_out_index(failure_order, groups, redundancy):
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
    ParameterTypeError, ParameterError
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


def _rep_wipe_out_indices(perms, groups, redundancy):
    """Vectorised :func:`rep_wipe_out_index` over the rows of ``perms`` (full permutations)."""
    n_sets = groups // redundancy
    e = perms.shape[0]
    position = np.empty_like(perms)
    rows = np.arange(e)[:, None]
    position[rows, perms] = np.arange(groups)[None, :]
    set_of = np.arange(groups) % n_sets
    last = np.full((e, n_sets), -1, dtype=np.int64)
    np.maximum.at(last, (np.repeat(np.arange(e), groups), np.tile(set_of, e)), position.ravel())
    return (last.min(axis=1) + 1).astype(np.int32)


def _spare_wipe_out_indices(perms, stacks):
    """1-based failure of each order in ``perms`` after which some shard type has no live holder.

    The wipe-out of SPARe (at any ``m``): the controller's trajectories
    (:func:`_trajectories`) end there too.  A type's holders are gone at the latest of
    their failure positions, so the wipe-out is the least of those latest positions
    over the types: ``O(N r)`` per order, with no reorder computed.

    Parameters
    ----------
    perms : numpy.ndarray of int, shape (E, N)
        Failure orders, each a permutation of the groups.
    stacks : numpy.ndarray of int, shape (N, r)
        The layout's stacks (every shard type held by exactly ``r`` groups).

    Returns
    -------
    numpy.ndarray of int32, shape (E,)
    """
    n, r = stacks.shape
    holders = (np.argsort(stacks.ravel(), kind="stable") // r).reshape(n, r)  # the r groups of each type
    position = np.empty(n, dtype=np.int64)
    steps = np.arange(n, dtype=np.int64)
    out = np.empty(perms.shape[0], dtype=np.int32)
    for e in range(perms.shape[0]):
        position[perms[e]] = steps
        last = position[holders[:, 0]]
        for column in range(1, r):
            np.maximum(last, position[holders[:, column]], out=last)
        out[e] = last.min() + 1
    return out


def _trajectories(layout, perms, micro_batches):
    """Stack numbers, step costs and wipe-out indices of SPARe along failure orders ``perms``.

    One compiled run gives both (:func:`spare_opt.load_trajectories`): the step cost is
    the least load ``L*`` over ``m`` (the stack number at ``m = 1``).
    """
    from ..planning.controller import _trajectories

    result = _trajectories(layout, perms, micro_batches)
    loads = result["loads"]
    costs = np.where(loads < 0, -1.0, loads / float(micro_batches))
    return result["stack_numbers"], costs, result["wipe_out_index"].astype(np.int32)


def _fill_padding(values):
    """Rows of a trajectory with the ``-1`` padding after the wipe-out replaced by the last value before it."""
    columns = np.arange(values.shape[1])
    last = np.maximum.accumulate(np.where(values >= 0, columns, 0), axis=1)
    return np.take_along_axis(values, last, axis=1)


def _widen(array, width):
    """``array`` (E, W) widened to ``width`` columns by repeating its last column."""
    pad = np.repeat(array[:, -1:], width - array.shape[1], axis=1)
    return np.concatenate([array, pad], axis=1)


class FailurePool:
    """Per-epoch failure outcomes drawn from one seed, extended on demand.

    Epoch ``e`` uses the ``e``-th random permutation of the groups drawn from
    ``SeedSequence([seed, 1])``, so extending the pool never changes earlier epochs:
    a run is the same whatever the pool size it ends up needing.

    Attributes
    ----------
    stack : numpy.ndarray of int16, shape (E, W)
        Stack number after ``k`` failures of epoch ``e`` (replication: ``[[r]]``;
        checkpointing: ``[[1]]``).
    cost : numpy.ndarray of float64, shape (E, W)
        Step cost after ``k`` failures of epoch ``e``: the stack number at ``m = 1``,
        the load ``L*`` over ``m`` with ``m`` micro-batches (replication: ``[[r]]``).
    wipe : numpy.ndarray of int32, shape (E,)
        1-based failure that wipes epoch ``e`` out, ``-1``: none.
    """

    def __init__(self, strategy, groups, redundancy, seed, layout=None, micro_batches=1):
        self.strategy = strategy
        self.groups = groups
        self.redundancy = redundancy
        self.layout = layout
        self.micro_batches = micro_batches
        self._rng = np.random.default_rng(np.random.SeedSequence([int(seed), 1]))
        self.stack = np.zeros((0, 1), dtype=np.int16)
        self.cost = np.zeros((0, 1), dtype=np.float64)
        self.wipe = np.zeros(0, dtype=np.int32)
        if strategy == "rep":
            self.stack = np.full((1, 1), redundancy, dtype=np.int16)
            self.cost = np.full((1, 1), float(redundancy))
        elif strategy == "ckpt":
            self.stack = np.ones((1, 1), dtype=np.int16)
            self.cost = np.ones((1, 1))

    def extend(self, count):
        if self.strategy == "ckpt":
            return
        for size in self._blocks(count):
            self._extend(size)

    def _blocks(self, count):
        """Sizes of the draws that give ``count`` more epochs."""
        # Draw in blocks of about a million entries: the float and argsort temporaries of
        # one large draw would take 16 bytes per entry on top of the pool itself.
        block = max(1, 2**20 // self.groups)
        while count > block:
            yield block
            count -= block
        yield count

    def _orders(self, count):
        """The next ``count`` failure orders (permutations of the groups), one row each."""
        return np.argsort(self._rng.random((count, self.groups)), axis=1)

    def extend_wipe_outs(self, count):
        """Draw ``count`` more epochs but keep only their wipe-outs (``wipe``), not the trajectories.

        The same draws and wipe-out indices as :meth:`extend` (the trajectories end at
        the wipe-out), without running the controller along each order; ``stack`` and
        ``cost`` are left as they are, so a pool extended this way serves
        :meth:`mean_failures_to_wipe_out` only.
        """
        if self.strategy == "ckpt":
            return
        if self.strategy != "spare":
            self.extend(count)
            return
        for size in self._blocks(count):
            self.wipe = np.concatenate([self.wipe, _spare_wipe_out_indices(self._orders(size), self.layout.stacks)])

    def _extend(self, count):
        perms = self._orders(count)
        if self.strategy == "rep":
            self.wipe = np.concatenate([self.wipe, _rep_wipe_out_indices(perms, self.groups, self.redundancy)])
            return
        stacks, costs, wipes = _trajectories(self.layout, perms, self.micro_batches)
        # rows are padded with -1 after the wipe-out: repeat the last value (the kernel
        # never reads past the wipe-out, this only keeps the pool tidy)
        stacks = _fill_padding(stacks).astype(np.int16)
        costs = _fill_padding(costs)
        # keep only the columns up to the latest wipe-out (the rest is never read)
        width = max(self.stack.shape[1], int(wipes.max(initial=0)) + 1)
        if width < stacks.shape[1]:
            stacks = stacks[:, :width]
            costs = costs[:, :width]
        if self.stack.shape[1] < width:
            self.stack = _widen(self.stack, width)
            self.cost = _widen(self.cost, width)
        self.stack = np.concatenate([self.stack, stacks])
        self.cost = np.concatenate([self.cost, costs])
        self.wipe = np.concatenate([self.wipe, wipes])

    def mean_failures_to_wipe_out(self):
        """Mean 1-based wipe index over the pool (``1`` for checkpointing)."""
        if self.strategy == "ckpt":
            return 1.0
        if self.wipe.size == 0:
            self.extend(32)
        valid = self.wipe[self.wipe > 0]
        return float(valid.mean()) if valid.size else float(self.groups)


# ----------------------------------------------------------------------------- checkpoint period
def closed_form_period(params, mean_failures):
    """Young/Daly checkpoint period for a strategy that survives ``mean_failures`` failures.

    ``T_f = mean_failures * m`` (``m`` the system MTBF) is the mean time between
    unmasked failures (``unmasked_mtbf_seconds``); ``T_c* = T_s + sqrt(T_s^2 + 2 T_s (T_f + T_r))``
    (:func:`spare_opt.theory.checkpoint_period`).

    Parameters
    ----------
    params : SimulationParameters
    mean_failures : float
        Mean number of failures up to and including the wipe-out (1 for
        checkpointing alone, ``mu + 1`` for SPARe).

    Returns
    -------
    float
        ``T_c*`` in seconds.

    Raises
    ------
    ParameterError
        ``T_f = mean_failures * m`` is not a finite number ``> 0``, or ``T_c*`` overflows
        (:func:`spare_opt.theory.checkpoint_period`).

    References
    ----------
    Young (1974); Daly (2006); Lee et al., ICML 2026, Sec. 5.
    """
    return theory.checkpoint_period(params.save_seconds, params.restart_seconds,
                                    float(mean_failures) * params.system_mtbf_seconds)


def mean_failures_to_wipe_out(params, strategy, redundancy, layout=None, *, samples=64, seed=GRID_SEED):
    """Monte-Carlo mean of the 1-based failure index that wipes a strategy out.

    Parameters
    ----------
    params : SimulationParameters
    strategy : {"ckpt", "rep", "spare"}
    redundancy : int
    layout : Layout or None
        SPARe layout (default: :func:`default_layout`).
    samples : int, default 64
        Random failure orders.
    seed : int
        Seed of the random failure orders (``numpy.random.SeedSequence([seed, 1])``).

    Returns
    -------
    float
        Mean 1-based index, in failures, of the failure that causes the wipe-out
        (1.0 for ``"ckpt"``: every failure is a global restart; ``N`` for
        ``"elastic"``: every group must be lost).

    Raises
    ------
    ParameterTypeError
        ``params`` is not SimulationParameters, or ``samples`` or ``seed`` is not an integer.
    ParameterError
        Unknown strategy, ``r`` out of range, ``samples`` below 1.
    """
    check_params(params)
    redundancy = check_strategy(strategy, redundancy, params.groups)
    samples = check.count("samples", samples, maximum=10**7)
    seed = check.seed(seed)
    if strategy == "spare":
        layout = check_run_layout(layout, params.groups, redundancy)
    return _mean_failures_to_wipe_out(params, strategy, redundancy, layout, samples, seed)


def _mean_failures_to_wipe_out(params, strategy, redundancy, layout, samples=64, seed=GRID_SEED):
    """:func:`mean_failures_to_wipe_out`; arguments are checked by the caller (its SPARe
    ``layout`` by :func:`check_run_layout`)."""
    if strategy == "elastic":  # every group lost, under the paper's semantics
        return float(params.groups)
    pool = FailurePool(strategy, params.groups, redundancy, seed, layout)
    pool.extend_wipe_outs(samples)  # the wipe-outs alone: no trajectory of the reorder is needed
    return pool.mean_failures_to_wipe_out()


def default_period(params, strategy, redundancy, layout=None, unmasked_basis=None):
    """The Young/Daly period of a run: :func:`closed_form_period` at the strategy's mean failures to wipe-out.

    ``unmasked_basis`` replaces ``params`` for the failure rate (a trace's own MTBF).
    Arguments are checked by the caller (:func:`spare_opt.simulate`: ``params``,
    ``strategy`` and ``redundancy``, and a SPARe ``layout`` by :func:`check_run_layout`).
    """
    basis = params if unmasked_basis is None else unmasked_basis
    return closed_form_period(basis, _mean_failures_to_wipe_out(basis, strategy, redundancy, layout))


# ----------------------------------------------------------------------------- running the kernel
def patch_layers(params, strategy, redundancy, micro_batches=1):
    """Layers of patch compute that a masked failure adds to the step it lands in (SPARe).

    ``patch_layers * ceil(m / (r - 1)) / m``: at ``m = 1`` the paper's one layer per
    failure (``params.patch_layers``, the shard type only the failed group produced is
    recomputed by a live holder); with ``m`` micro-batches, the failed group's ``m``
    micro-batches of that type are recomputed in parallel by its ``r - 1`` other
    holders, ``ceil(m / (r - 1))`` micro-batches each (``docs/fractional.md``).  Other
    strategies have no patch (the kernel reads this for SPARe only).
    """
    if strategy not in ("spare", "redistribute"):
        return params.patch_layers
    return params.patch_layers * (math.ceil(micro_batches / (redundancy - 1)) / micro_batches)


def _pack(params, strategy, redundancy, period, seed, trace_mode, micro_batches=1, horizon=None,
          micro_batch_overhead=0.0):
    from . import _kernels as K

    f = np.zeros(K.N_FPARAMS)
    # m micro-batches of a shard type cost the compute of one layer and m - 1 more
    # fixed costs (launch, pipeline fill): the step time at m = 1 is the measured one
    f[K.F_LAYER_COMPUTE] = params.layer_compute_seconds + (micro_batches - 1) * micro_batch_overhead
    f[K.F_ALLREDUCE] = params.allreduce_seconds
    f[K.F_SHRINK] = params.shrink_seconds
    f[K.F_CONTROLLER] = params.controller_seconds
    f[K.F_RESTART] = params.restart_seconds
    f[K.F_SAVE] = params.save_seconds
    f[K.F_PERIOD] = period
    f[K.F_MTBF] = params.system_mtbf_seconds
    f[K.F_SHAPE] = params.weibull_shape
    f[K.F_JITTER] = params.jitter_sd
    f[K.F_MAX_WALL] = params.max_wall_factor * fault_free_seconds(params)
    f[K.F_PATCH_LAYERS] = patch_layers(params, strategy, redundancy, micro_batches)
    f[K.F_MAX_FAILURES] = MAX_RUN_FAILURES
    f[K.F_EVENTS_HORIZON] = math.inf if horizon is None else horizon
    i = np.zeros(K.N_IPARAMS, dtype=np.int64)
    i[K.I_STEPS] = params.steps
    i[K.I_GROUPS] = params.groups
    # elastic runs on given events only, where the kernel reads the strategy for the base
    # step cost (1, as for checkpointing) and for SPARe's controller and patch costs (none)
    i[K.I_STRATEGY] = {"ckpt": K.STRATEGY_CKPT, "rep": K.STRATEGY_REP, "spare": K.STRATEGY_SPARE,
                       "elastic": K.STRATEGY_CKPT, "redistribute": K.STRATEGY_SPARE}[strategy]
    i[K.I_RATE_FOLLOWS_LIVE] = 1 if params.rate_follows_live else 0
    i[K.I_CARRY] = 1 if (params.restart_failures == "carry" or trace_mode) else 0
    i[K.I_SEED] = int(np.random.SeedSequence([int(seed), 2]).generate_state(1)[0])
    i[K.I_TRACE] = 1 if trace_mode else 0
    i[K.I_FAILURE_MODEL] = K.MODEL_GROUP_CLOCKS if params.failure_model == "group-clocks" else K.MODEL_SYSTEM_RENEWAL
    i[K.I_EVENTS_OPEN] = 0 if horizon is None else 1
    return f, i


def _result(raw, params, strategy, redundancy, period, seed, micro_batches=1, semantics="paper"):
    from . import _kernels as K

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
        availability=min(1.0, kept / wall) if wall > 0 else 1.0,  # sums of the same steps: rounding only
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
        micro_batches=int(micro_batches),
        semantics=semantics,
        mean_step_cost=float(raw[K.R_COST_STEPS]) / executed if executed else 1.0,
        rejoins=int(raw[K.R_REJOINS]),
    )


def run_synthetic(params, strategy, redundancy, period, seed, pool, *, micro_batch_overhead_seconds=0.0):
    """One run on a synthetic failure process (Weibull clocks), growing ``pool`` as needed.

    Arguments are checked by the caller; ``pool`` is a :class:`FailurePool` of the same
    strategy, ``N``, ``r`` and ``seed`` (and its ``micro_batches`` are the run's);
    ``micro_batch_overhead_seconds`` as for :func:`run_events`.
    Returns a :class:`SimulationResult`.
    """
    from . import _kernels as K

    m = pool.micro_batches
    f, i = _pack(params, strategy, redundancy, period, seed, trace_mode=False, micro_batches=m,
                 micro_batch_overhead=micro_batch_overhead_seconds)
    no_events = np.zeros((0, K.N_EV))
    if strategy != "ckpt" and pool.wipe.size == 0:
        pool.extend(16)
    while True:
        raw = K.run_kernel(f, i, pool.stack, pool.cost, pool.wipe, no_events)
        _check_capped(raw, params)
        if raw[K.R_NEED_MORE] == 0.0:
            return _result(raw, params, strategy, redundancy, period, seed, m)
        if pool.wipe.size >= MAX_RUN_EPOCHS:
            raw[K.R_CAPPED] = 1.0
            _check_capped(raw, params)
        pool.extend(min(max(16, pool.wipe.size), MAX_RUN_EPOCHS - pool.wipe.size))


def run_events(params, strategy, redundancy, period, seed, events, *, micro_batches=1, semantics="paper",
               micro_batch_overhead_seconds=0.0):
    """One run whose events are given up front, with their outcomes.

    Parameters
    ----------
    params : SimulationParameters
    strategy, redundancy, period, seed
        As for :func:`run_synthetic` (checked by the caller).
    events : callable or numpy.ndarray of float64, shape (F, N_EV)
        The events (columns ``EV_*`` of :mod:`spare_opt.simulation._kernels`), sorted by
        time; or ``events(horizon_seconds)`` returning ``(rows, complete)``: every event
        up to ``horizon_seconds`` (more may follow unless ``complete``), for events drawn
        on demand (the run asks again with a later horizon when it gets there).
    micro_batches : int
        ``m`` (for the patch compute and the result).
    semantics : str
        ``"paper"`` or ``"repair"`` (recorded in the result).
    micro_batch_overhead_seconds : float, default 0.0
        Fixed cost of each micro-batch a group computes beyond the first of a shard
        type: a layer of compute takes ``layer_compute_seconds + (m - 1) *
        micro_batch_overhead_seconds`` (``T0`` stays the measured step at ``m = 1``).

    Returns
    -------
    SimulationResult

    Notes
    -----
    ``"elastic"`` events carry the time per unit of progress ``N / (N - k)``
    (:mod:`spare_opt.simulation.events`); the kernel scales the compute of a step only,
    so the cost it reads is ``1 + (N / (N - k) - 1) (c + a) / c`` layers (``c`` the
    layer's compute, ``a`` the all-reduce): the whole step, all-reduce included, takes
    ``N / (N - k)`` times as long per unit of progress.
    """
    from . import _kernels as K

    base = np.full((1, 1), redundancy if strategy == "rep" else 1, dtype=np.int16)
    base_cost = base.astype(np.float64)
    no_pool = np.zeros(0, dtype=np.int32)
    pack = dict(micro_batches=micro_batches, micro_batch_overhead=micro_batch_overhead_seconds)
    if not callable(events):
        f, i = _pack(params, strategy, redundancy, period, seed, trace_mode=True, **pack)
        rows = _kernel_costs(events, strategy, f)
        raw = K.run_kernel_from(f, i, base, base_cost, no_pool, rows, *_stream_ahead(f, i, len(rows)))
        _check_capped(raw, params)
        return _result(raw, params, strategy, redundancy, period, seed, micro_batches, semantics)
    horizon = 2.0 * fault_free_seconds(params)  # a run lasts at least T0
    while True:
        try:
            rows, complete = events(horizon)
        except TooManyEvents as exc:  # the source knows its events, this run the input that made the horizon
            head = str(exc).split(": lower ")[0]
            raise ParameterError(f"{head}: {astronomic_input(params, exc.gap_seconds, 'the failure model')}") from None
        f, i = _pack(params, strategy, redundancy, period, seed, trace_mode=True,
                     horizon=None if complete else horizon, **pack)
        rows = _kernel_costs(rows, strategy, f)
        raw = K.run_kernel_from(f, i, base, base_cost, no_pool, rows, *_stream_ahead(f, i, len(rows)))
        _check_capped(raw, params)
        if raw[K.R_NEED_MORE] == 0.0:
            return _result(raw, params, strategy, redundancy, period, seed, micro_batches, semantics)
        horizon *= 2.0


def _stream_ahead(fparams, iparams, events):
    """The kernel's random stream of an events run, its first normals drawn ahead and kept per seed.

    An events run draws nothing but its jitters, about two normals per step: every run
    of one seed (a comparison's settings and periods) takes the same normals, so they
    are drawn once (:func:`spare_opt.simulation._kernels.normals_ahead`, two per step
    and per event, at most :data:`MAX_AHEAD_NORMALS`), and a run that needs more goes
    on with the stream after them (the same numbers as drawing every one in the run).
    Returns ``(ahead, words, doubles, state)`` for ``run_kernel_from``.
    """
    from . import _kernels as K

    seed = int(iparams[K.I_SEED]) & 0xFFFFFFFF
    count = min(MAX_AHEAD_NORMALS, 2 * int(iparams[K.I_STEPS]) + 2 * int(events) + 64)
    if fparams[K.F_JITTER] <= 0.0:  # no jitter, no normal drawn
        count = 0
    with _AHEAD_LOCK:
        entry = _AHEAD.get(seed)
        if entry is not None and entry[0].size >= count:
            _AHEAD.move_to_end(seed)
            return entry
    entry = K.normals_ahead(seed, count)
    with _AHEAD_LOCK:
        _AHEAD[seed] = entry
        _AHEAD.move_to_end(seed)
        while len(_AHEAD) > AHEAD_SEEDS_KEPT:
            _AHEAD.popitem(last=False)
    return entry


def _kernel_costs(rows, strategy, f):
    """Event rows as the kernel reads them: elastic's time per progress in layers of compute (:func:`run_events`)."""
    if strategy != "elastic" or not len(rows):
        return rows
    from . import _kernels as K

    rows = rows.copy()
    step = f[K.F_LAYER_COMPUTE] + f[K.F_ALLREDUCE]
    rows[:, K.EV_COST] = 1.0 + (rows[:, K.EV_COST] - 1.0) * step / f[K.F_LAYER_COMPUTE]
    return rows


def _check_capped(raw, params):
    """Refuse a run stopped at :data:`MAX_RUN_FAILURES` failures or :data:`MAX_RUN_EPOCHS` restarts."""
    from . import _kernels as K

    if raw[K.R_CAPPED] == 1.0:
        raise ParameterError(
            f"the run drew more than {MAX_RUN_FAILURES:.0e} failures or {MAX_RUN_EPOCHS} restarts before "
            f"finishing or reaching its wall-time cap (weibull_shape {params.weibull_shape:g}, system_mtbf_seconds {params.system_mtbf_seconds:g}, "
            f"restart_seconds {params.restart_seconds:g}): failures bunch up faster than training advances; "
            "raise weibull_shape, system_mtbf_seconds or restart_seconds, or lower max_wall_factor"
        )

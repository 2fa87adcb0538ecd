"""Full redistribution: every live DP group may compute any micro-batch (the ``r = N`` layout), in ``O(N m)`` memory.

In a PyTorch job every rank can read every sample; a stack layout only decides which
groups may take a dead group's micro-batches.  When every survivor may take any of
them (the layout ``stacks[g, l] = (g + l) mod N`` with ``r = N``, the invariant of
ReCoVer: a constant number of micro-batches per iteration), Hall's condition holds for
every set of shard types as soon as one group is live, so the least load is always the
counting bound ``ceil(m N / (N - k))`` and a wipe-out happens only when every group is
down.  :class:`RedistributionController` keeps such a plan without building the
``N x N`` layout (:meth:`ReorderController.full_redistribution` returns one).
"""

import numpy as np

from . import _redistribution_kernels as _r
from .._core import validation as check
from .._core.errors import FailureSetError, SpareError
from .failure_sets import normalise_groups
from .plan import MASKED, WIPE_OUT, MAX_SPLIT_ENTRIES, Plan, check_micro_batches, lower_bound

__all__ = ["RedistributionController"]


class RedistributionController:
    """Online plans of a job in which every live DP group may compute any micro-batch (``r = N``).

    The same interface as :class:`~spare_opt.ReorderController` (:meth:`fail`,
    :meth:`recover`, :meth:`set_failed`, :meth:`restart`, ``load``, ``stack_number``...)
    for the full-redistribution layout ``stacks[g, l] = (g + l) mod N``, ``r = N``,
    which is never built: memory ``O(N m)`` instead of ``O(N^2)``.

    Parameters
    ----------
    groups : int
        ``N``, the number of DP groups (and of shard types), ``1 <= N <= 2^24``.
    micro_batches : int, default 1
        ``m``, micro-batches per shard type, with ``N m <= 2^24``.

    Raises
    ------
    ParameterTypeError
        ``groups`` or ``micro_batches`` is not an integer.
    ParameterError
        ``N < 1``, ``m < 1``, ``m > 1024`` or ``N m > 2^24``
        (:func:`~spare_opt.check_micro_batches`).

    See Also
    --------
    ReorderController : the controller of a stack layout (``r < N``).
    spare_opt.plan_reorder : the exact planner, which gives the same ``status`` and
        ``load`` on the ``r = N`` layout (and ``stack_number`` at ``m = 1``).

    Notes
    -----
    **The plan.**  Micro-batch ``j`` of shard type ``t`` is unit ``t m + j``.  With
    ``k`` groups failed and ``n = N - k`` live, every live group computes ``q`` or
    ``q + 1`` units, ``q = floor(m N / n)``, exactly ``m N - q n`` of them ``q + 1``: the
    load is ``L* = ceil(m N / n)``, the counting bound (``N m`` units on ``n`` groups),
    which every plan meets since any live group may take any unit (Hall's condition
    ``m |T| <= L |H(T)|`` holds with ``H(T)`` every live group).  Fault-free, group
    ``g`` computes the ``m`` micro-batches of shard type ``g`` (layer 0 of the layout).

    **A failure** puts the failed groups' units in a pool and spreads it: groups below
    the new ``q`` are filled to ``q``, then the rest go one unit each to groups at
    ``q``.  **A repair** brings a group back with no work; the groups above the new
    ``q + 1`` give their surplus, and as many groups at ``q + 1`` as there are too many
    give one unit each, to fill the returning groups to ``q`` (a returning group gets its
    even share even when ``L*`` does not fall, unlike the stack controller, which then
    moves nothing).  A group gives away the unit it received last.  ``moves`` counts the
    units given to another group (a failure: every unit of the failed groups, and at
    most ``live`` more; the least possible when the level does not change).  Histograms
    of the loads and of the number of distinct shard types per group give the groups
    to visit and the stack number without a scan; a call costs ``O(moves m)`` plus a
    scan of the groups when the level ``q`` changes or groups return (``O(N)``, numba).

    **Plans are lazy**, as the stack controller's: ``failed``, ``assignment`` and
    ``split`` are materialised on first access from the current arrays and a journal of
    the later calls.  ``order`` is ``None``: the ``N x N`` stack order is not built
    (any order works: a group holds every shard type).  ``stack_number`` is ``L*`` at
    ``m = 1``, else the most distinct shard types one live group computes part of.

    References
    ----------
    .. [1] P. Hall, "On representatives of subsets", J. London Math. Soc. 10 (1935).
    .. [2] ReCoVer, arXiv:2605.11215 (a constant number of micro-batches per iteration).
    .. [3] Lee et al., "SPARe", ICML 2026, arXiv:2603.00357, Sec. 4 (the counting bound).

    Examples
    --------
    >>> from spare_opt import ReorderController
    >>> controller = ReorderController.full_redistribution(8, micro_batches=4)
    >>> plan = controller.fail([2, 5])
    >>> plan.status, plan.load, plan.step_cost
    ('masked', 6, 1.5)
    >>> controller.recover(2).load
    5
    """

    def __init__(self, groups, *, micro_batches=1):
        self._groups = check.integer("groups N", groups, minimum=1, maximum=MAX_SPLIT_ENTRIES)
        self._micro_batches = check_micro_batches(micro_batches, self._groups)
        self.restart()

    # ------------------------------------------------------------------ state
    def restart(self):
        """Global restart: every group live, computing the ``m`` micro-batches of its own shard type.

        Fresh arrays are allocated, so that plans returned before keep their values.
        """
        self._units, self._rows, self._counts, self._scalars = _r.new_state(self._groups, self._micro_batches)
        _r.fault_free(self._micro_batches, self._units, self._rows, self._counts, self._scalars)
        self._alive = self._rows[_r.ALIVE]
        self._owner = self._units[_r.OWNER]
        self._pool = self._units[_r.POOL]
        self._wiped = False
        self._history = _History(self._owner, self._alive)

    @property
    def groups(self):
        """int: ``N``."""
        return self._groups

    @property
    def redundancy(self):
        """int: ``r = N``: every group holds every shard type."""
        return self._groups

    @property
    def micro_batches(self):
        """int: ``m``, micro-batches per shard type."""
        return self._micro_batches

    @property
    def load(self):
        """int or None: ``L* = ceil(m N / (N - k))``; ``None`` after a wipe-out."""
        if self._wiped:
            return None
        return lower_bound(self._groups, self._groups - int(self._scalars[_r.LIVE]), self._micro_batches)

    @property
    def stack_number(self):
        """int or None: the most distinct shard types one live group computes part of (``L*``
        at ``m = 1``); ``None`` after a wipe-out."""
        return None if self._wiped else int(self._scalars[_r.WIDEST])

    @property
    def wiped_out(self):
        """bool: whether every group has failed (call :meth:`restart` to continue)."""
        return self._wiped

    @property
    def alive(self):
        """numpy.ndarray of bool, shape (N,): a copy of the live flags."""
        return self._alive != 0

    @property
    def failed(self):
        """numpy.ndarray of int32, shape (k,): the failed groups, sorted."""
        return np.flatnonzero(self._alive == 0).astype(np.int32)

    @property
    def split(self):
        """numpy.ndarray of int32, shape (N, m) or None: read-only view of the live group
        computing each micro-batch; ``None`` after a wipe-out.  It changes with the next call."""
        if self._wiped:
            return None
        view = self._owner.reshape(self._groups, self._micro_batches).view()
        view.setflags(write=False)
        return view

    def __repr__(self):
        return (f"RedistributionController(groups={self._groups}, micro_batches={self._micro_batches}, "
                f"failed={self._groups - int(self._scalars[_r.LIVE])}, load={self.load})")

    # ---------------------------------------------------------------- changes
    def _group_ids(self, groups):
        """``groups`` as a sorted int32 array of distinct ids in ``[0, N)`` (FailureSetError otherwise)."""
        n = self._groups
        if isinstance(groups, (bool, np.bool_)) or isinstance(groups, (float, np.floating)):
            raise FailureSetError(f"groups: {groups!r} is not an integer group id")
        if isinstance(groups, (int, np.integer)):
            group = int(groups)
            if not 0 <= group < n:
                raise FailureSetError(f"groups: group {group} is out of range [0, {n})")
            return np.array((group,), dtype=np.int32)  # a new array: the history keeps it
        if isinstance(groups, np.ndarray) and groups.ndim == 0:
            return self._group_ids(groups[()])
        try:
            return normalise_groups(groups, n)
        except (TypeError, OverflowError):
            raise FailureSetError(f"groups must be a group id or an iterable of group ids, got {groups!r}") from None

    def fail(self, groups, mid_step=False):
        """Record that ``groups`` failed (at the same time) and re-plan.

        Parameters
        ----------
        groups : int or iterable of int
            Live group ids in ``[0, N)``, each at most once; an empty iterable changes
            nothing.
        mid_step : bool, default False
            The groups failed after computing the current step, before its all-reduce:
            the plan's ``patch`` gives each of their micro-batches to its new contributor.

        Returns
        -------
        Plan
            ``status`` (``"wipe-out"`` only when every group has failed), ``load``
            ``ceil(m N / (N - k))``, ``step_cost``, ``stack_number``, ``lower_bound``
            ``c(k)``, ``moves``, ``patch``; ``failed``, ``assignment`` (N,) and ``split``
            (N, m) int32 materialised on first access; ``order`` ``None``.

        Raises
        ------
        FailureSetError
            A group id is not an integer, out of range, repeated or already failed; or
            every group has failed and :meth:`restart` was not called.
        ParameterTypeError
            ``mid_step`` is not a bool.
        """
        if self._wiped:
            raise FailureSetError("every group has failed (a wipe-out): call restart() before failing more groups")
        if mid_step is not False:
            mid_step = check.flag("mid_step", mid_step)
        if type(groups) is int and 0 <= groups < self._groups:  # the common single failure: no array work
            dead = () if self._alive[groups] else (groups,)
            failing = np.array((groups,), dtype=np.int32)
        else:
            failing = self._group_ids(groups)
            dead = failing[self._alive[failing] == 0]
        if len(dead):
            raise FailureSetError(f"group {int(dead[0])} has failed already (recover() brings it back; "
                                  "restart() brings every group back)")
        freed, moves, live, widest, placed = _r.fail_groups(failing, self._micro_batches, self._units, self._rows,
                                                            self._counts, self._scalars)
        if live == 0:
            self._wiped = True
            event = self._history.record(self._units[_r.POOL:, :0], failing, 1)
            return _plan(self, WIPE_OUT, 0, {}, event, live, widest)
        _check_placed(placed)
        patch = {}
        if mid_step and freed:
            units = self._pool[:freed]
            owners = self._owner[units]
            order = np.lexsort((units, owners))
            for owner, unit in zip(owners[order].tolist(), units[order].tolist()):
                patch.setdefault(owner, []).append(divmod(unit, self._micro_batches))
        event = self._history.record(self._units[_r.POOL:, :moves], failing, 1)
        return _plan(self, MASKED, moves, patch, event, live, widest)

    def recover(self, groups):
        """Bring failed groups back (repaired), each with its even share of the work.

        Parameters
        ----------
        groups : int or iterable of int
            Failed group ids, each at most once.

        Returns
        -------
        Plan
            As :meth:`fail`, ``patch`` empty; ``load`` falls to ``ceil(m N / (N - k))``
            for the groups still failed.

        Raises
        ------
        FailureSetError
            A group id is not an integer, out of range, repeated or not failed; or every
            group has failed (call :meth:`restart`, which brings every group back).
        """
        if self._wiped:
            raise FailureSetError("every group has failed (a wipe-out): call restart(), which brings every group back")
        if type(groups) is int and 0 <= groups < self._groups:  # one group: no array work
            live = (groups,) if self._alive[groups] else ()
            back = np.array((groups,), dtype=np.int32)
        else:
            back = self._group_ids(groups)
            live = back[self._alive[back] != 0]
        if len(live):
            raise FailureSetError(f"group {int(live[0])} has not failed: only failed groups can be recovered")
        _, moves, live, widest, placed = _r.recover_groups(back, self._micro_batches, self._units, self._rows,
                                                           self._counts, self._scalars)
        _check_placed(placed)
        event = self._history.record(self._units[_r.POOL:, :moves], back, 0)
        return _plan(self, MASKED, moves, {}, event, live, widest)

    def set_failed(self, groups):
        """Make ``groups`` the whole failed set: the plan every process agrees on, whatever its history.

        The plan of a fresh controller's ``fail(sorted(groups))`` (deterministic), which
        this controller adopts; ``moves`` is counted against the fault-free plan.

        Raises
        ------
        FailureSetError
            A group id is not an integer, out of range or repeated.
        """
        failing = self._group_ids(groups).copy()
        self.restart()
        return self.fail(failing)


def _check_placed(placed):
    if not placed:  # the counts of the kernel disagree: a bug, never a silent plan
        raise SpareError("internal error: the full-redistribution plan left micro-batches unplaced")


class _History:
    """The journal of one generation (since a restart): per call, the units moved and their
    previous groups, and the groups that failed or came back."""

    def __init__(self, owner, alive):
        self.owner, self.alive = owner, alive
        self.events = []

    def record(self, pooled, groups, was_alive):
        """Journal one call: ``pooled`` the (2, moves) units and their previous groups."""
        self.events.append((pooled.copy(), groups, was_alive))
        return len(self.events) - 1

    def snapshot(self, event):
        """``(split, alive)`` as they were after call ``event``."""
        owner, alive = self.owner.copy(), self.alive.copy()
        for pooled, groups, was_alive in reversed(self.events[event + 1:]):
            owner[pooled[0]] = pooled[1]
            alive[groups] = was_alive
        return owner, alive


def _plan(controller, status, moves, patch, event, live, widest):
    """The lazy :class:`Plan` of the controller's call ``event`` (as the stack controller's)."""
    n, m = controller._groups, controller._micro_batches
    wiped = status == WIPE_OUT
    load = None if wiped else -(-(m * n) // live)  # lower_bound(n, n - live, m), inlined: the hot path
    plan = _new_plan(_RedistributionPlan)
    plan.__dict__ = {
        "status": status, "stack_number": None if wiped else widest,
        "lower_bound": None if wiped else -(-n // live), "_failed": _LAZY,
        "lost_shards": np.arange(n, dtype=np.int32) if wiped else _EMPTY,
        "_assignment": None if wiped else _LAZY, "_order": None, "moves": moves, "patch": patch,
        "micro_batches": m, "load": load, "step_cost": None if load is None else load / m,
        "_split": None if wiped else _LAZY, "_source": (controller._history, event, n, m),
    }
    return plan


_EMPTY = np.zeros(0, dtype=np.int32)
_EMPTY.setflags(write=False)
_LAZY = object()
_new_plan = object.__new__


class _RedistributionPlan(Plan):
    """A :class:`Plan` of :class:`RedistributionController` whose ``failed``, ``assignment`` and
    ``split`` are built on first access (``order`` is ``None``).

    Behaves as a Plan in every respect (``isinstance``, attributes, ``to_dict``, ``==``,
    ``dataclasses.replace``); the values are those of the call that made it.  Pickling
    or copying yields a plain, fully materialised :class:`Plan` (as the stack
    controller's plans).
    """

    def __init__(self, status, stack_number, lower_bound, failed, lost_shards=_EMPTY, assignment=None,
                 order=None, moves=0, patch=None, micro_batches=1, load=None, step_cost=None, split=None):
        self.__dict__.update(status=status, stack_number=stack_number, lower_bound=lower_bound, _failed=failed,
                             lost_shards=lost_shards, _assignment=assignment, _order=order, moves=moves,
                             patch={} if patch is None else patch, micro_batches=micro_batches, load=load,
                             step_cost=step_cost, _split=split, _source=None)
        Plan.__post_init__(self)

    def __repr__(self):
        return "Plan" + Plan.__repr__(self)[len(type(self).__qualname__):]

    def __reduce__(self):
        return (Plan, (self.status, self.stack_number, self.lower_bound, self.failed, self.lost_shards,
                       self.assignment, self.order, self.moves, self.patch, self.micro_batches, self.load,
                       self.step_cost, self.split))

    def _materialise(self):
        history, event, n, m = self._source
        owner, alive = history.snapshot(event)
        if self._split is _LAZY:
            self._split = owner.reshape(n, m)
        if self._assignment is _LAZY:
            self._assignment = np.ascontiguousarray(owner.reshape(n, m)[:, 0])
        if self._failed is _LAZY:
            self._failed = np.flatnonzero(alive == 0).astype(np.int32)

    def _lazy(name):
        def get(self):
            if self.__dict__[name] is _LAZY:
                self._materialise()
            return self.__dict__[name]

        def put(self, value):
            self.__dict__[name] = value

        return property(get, put)

    failed = _lazy("_failed")
    assignment = _lazy("_assignment")
    split = _lazy("_split")
    order = _lazy("_order")
    del _lazy

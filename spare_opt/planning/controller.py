"""Online reorder controller: the least stack number after each failure, in microseconds.

:class:`ReorderController` keeps the state of a running job (live groups, the stack
number ``S``, which live group contributes each shard type, every group's compute order)
and updates it incrementally when groups fail, with numba kernels over flat arrays
(:mod:`spare_opt.planning._kernels`).  It returns the same :class:`~spare_opt.planning.plan.Plan`
as the exact planner :func:`spare_opt.plan_reorder` with the same status and stack
number (and, with ``m > 1`` micro-batches per shard type, the same load ``L*``,
:mod:`spare_opt.planning._split_kernels`); its number of moves is not guaranteed minimal (see
``docs/benchmarks.md`` for the measured ratio to the min-cost-flow optimum).

:func:`stack_number_trajectory`, :func:`stack_number_trajectories`,
:func:`load_trajectory` and :func:`load_trajectories` run whole failure sequences
inside one compiled loop, for Monte-Carlo and time-to-train simulation.

Importing this module compiles nothing: the kernels compile (or load from numba's
on-disk cache) on their first call.
"""

import numpy as np

from . import _kernels as _k
from . import _split_kernels as _s
from . import _state_check as _check_state
from .._core import validation as check
from .._core.errors import FailureSetError
from .failure_sets import check_failed_set, normalise_groups
from .plan import (
    MASKED,
    WIPE_OUT,
    Plan,
    _derived_order,
    _holders_by_layer,
    _split_layers,
    _touched_layers,
    check_micro_batches,
    lower_bound,
)
from ..layouts.layout import check_layout, recommended_micro_batches
from .exact import plan_reorder

__all__ = [
    "ReorderController",
    "stack_number_trajectory",
    "stack_number_trajectories",
    "load_trajectory",
    "load_trajectories",
]

#: At ``m > 1``, a rejoin that tries a level one lower with more live groups than this
#: above it (and no kept Hall violation) first runs one maximum flow at that level: a
#: failed attempt by augmenting paths would search from many of them before finding the
#: violation (``docs/benchmarks.md``, "Rejoins").
WIDEST_LEVEL_FALL = 4096


class ReorderController:
    """Stateful online reorder controller of a SPARe job (the paper's ReCtlr).

    Starts fault-free: every group live and computing its layout order, ``S = 1``, shard
    type ``stacks[g, 0]`` contributed by group ``g`` (with ``m`` micro-batches: all ``m``
    micro-batches of that type, load ``L = m``).

    Parameters
    ----------
    layout : Layout
        The stack layout, ``N`` groups with redundancy ``r``.
    micro_batches : int or None, default None
        ``m``, micro-batches per shard type (``docs/planner.md``, "Micro-batches").
        ``m = 1`` is the paper's model and keeps every number of earlier releases.
        ``None``: the layout's recommended ``m`` (:attr:`Layout.micro_batches`, written
        by ``spare-opt compare -o``), else 1; a different ``m`` is used with a
        :class:`~spare_opt.RecommendationWarning`.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a :class:`~spare_opt.layouts.layout.Layout`, or ``micro_batches`` is
        not an integer.
    ParameterError
        ``micro_batches < 1``, or ``N m`` is above
        :data:`~spare_opt.planning.plan.MAX_SPLIT_ENTRIES`.

    See Also
    --------
    spare_opt.plan_reorder : the exact planner (maximum-flow checks and min-cost flow).
    stack_number_trajectory : the stack numbers of a whole failure sequence in one call.
    load_trajectory : the loads ``L*`` of a whole failure sequence in one call.

    Notes
    -----
    **Algorithm.**  The controller keeps a valid assignment of shard types to live
    holders with every group's load at most ``S``.  When groups fail, ``S`` is first
    raised to ``c(k) = ceil(N / (N - k))`` if it is below (Hall's condition for the set of
    all types: ``S* >= c(k)``), then the shard types they contributed are re-placed one
    at a time:

    1. greedily, on a live holder with load below ``S``, preferring one that already has
       the type in its top ``S`` layers (no move), then the least loaded;
    2. otherwise by a breadth-first augmenting path ``t -> g1 -> t1 -> g2 -> ... -> gk``
       (``g_i`` holds ``t_{i-1}`` and contributes ``t_i``; ``gk`` has load below ``S``),
       shifting each type one step along the path;
    3. only when no augmenting path exists, ``S`` is raised by one and the type placed
       again.

    A type given to a group outside its top ``S`` layers is swapped into them with a
    type the group does not contribute (one exists since the load is at most ``S``).
    Every step costs ``O(r)`` except the search, which visits each live group at most
    once, ``O(N r^2)`` in the worst case and a few groups in practice.

    **Exactness.**  Model the problem as a flow network source -> shard types (capacity
    1) -> live holders -> sink (capacity ``S`` per group).  A full assignment with loads
    at most ``S`` exists iff the max flow is ``N``; by Hall's theorem for b-matchings,
    iff ``|T| <= S |N(T)|`` for every set ``T`` of shard types with live holders
    ``N(T)``.  Suppose type ``t`` is unplaced and no augmenting path from ``t`` exists.
    Let ``G'`` be the groups reachable from ``t`` in the residual graph and ``T'`` the
    types reached: every holder of a reached type is reached (shard -> holder arcs have
    infinite residual capacity), every reached group is full (else there is a path), and
    the types reached besides ``t`` are exactly those contributed by groups of ``G'``
    (reverse arcs).  So ``N(T') = G'`` and ``|T'| = 1 + S |G'| > S |N(T')|``: Hall's
    condition fails for capacity ``S`` and ``S* > S``.  Since failures only remove
    groups, ``S*`` never decreases before a restart, so starting from the previous
    ``S`` and raising it only on such a certificate ends at exactly the least ``S*``
    (the augmenting-path theorem of Ford and Fulkerson: a flow is maximum iff no
    augmenting path exists).  A wipe-out is detected in ``O(r)`` per failed group from
    a count of live holders per shard type.

    **Micro-batches** (``m > 1``, :mod:`spare_opt.planning._split_kernels`).  The unit placed is
    one micro-batch and the capacities are source -> type ``m``, type -> live holder
    ``m``, group -> sink ``L``; the bound ``L`` first jumps to ``ceil(m N / (N - k))``.
    A displaced micro-batch of type ``t`` goes greedily to the least loaded live holder
    of ``t`` below ``L``, else along a shortest augmenting path ``t -> g1 -u1-> g2 ...
    -> gk`` (``g_i`` computes part of ``u_i``, ``g_{i+1}`` holds ``u_i``, ``gk`` is
    below ``L``) that shifts one micro-batch per arc, else ``L`` rises by one and the
    paths the call took at the old ``L`` are undone first (they were only needed
    there), so that the call's moves are those of the new level.  The
    proof above carries over with units: when no path exists, the reached groups
    ``G'`` are full and hold every live holder of the reached types ``T'`` (a type ->
    holder arc has residual capacity ``m - c >= 1`` while a unit of the type is
    unplaced, and each type has ``m`` units in all), and every unit on ``G'`` is of a
    type of ``T'`` (reverse arcs); so ``m |T'| >= L |G'| + 1 > L |H(T')|`` and Hall's
    condition ``m |T| <= L |H(T)|`` fails: ``L* > L``.  ``moves`` counts the
    micro-batches whose contributor changed in the call (each step of a path is one);
    ``stack_number`` (the most distinct types a live group computes part of) is kept
    by a histogram in ``O(1)`` per change.  Memory ``O(N (r + m))``.

    **Repairs.**  :meth:`recover` brings failed groups back; there ``S*`` (or ``L*``)
    can fall.  The level falls while a lower one is feasible, one unit at a time along
    shortest augmenting paths into the groups with room (typically the returning ones),
    and a group with no such path certifies by the same argument that Hall's
    condition fails for the lower level (the Notes of :meth:`recover`).

    **Plans are lazy.**  Copying the ``(N, r)`` order on every failure would cost about
    1 ms at ``N = 100,000``; the returned plan materialises ``failed``, ``assignment``,
    ``order`` and ``split`` on first access from the controller's arrays and an undo
    journal of the later failures, so the cost of :meth:`fail` does not grow with ``N``.

    References
    ----------
    .. [1] P. Hall, "On representatives of subsets", J. London Math. Soc. 10 (1935).
    .. [2] L. R. Ford and D. R. Fulkerson, "Maximal flow through a network",
       Canadian J. Math. 8 (1956).
    .. [3] R. K. Ahuja, T. L. Magnanti and J. B. Orlin, "Network Flows", Prentice Hall
       (1993), Sec. 6.5 (augmenting paths) and 12.3 (bipartite b-matching).
    .. [4] Lee et al., "SPARe", ICML 2026, arXiv:2603.00357, Sec. 4 (the reorder
       controller).

    Examples
    --------
    >>> import numpy as np
    >>> from spare_opt import Layout, ReorderController
    >>> layout = Layout((np.arange(7)[:, None] + [0, 1, 3]) % 7, offsets=[0, 1, 3])
    >>> controller = ReorderController(layout)
    >>> plan = controller.fail(2)
    >>> plan.status, plan.stack_number
    ('masked', 2)
    >>> plan = ReorderController(layout, micro_batches=8).fail(2)
    >>> plan.load, plan.step_cost
    (10, 1.25)
    """

    def __init__(self, layout, *, micro_batches=None):
        self._layout = check_layout(layout)
        self._micro_batches = check_micro_batches(recommended_micro_batches(layout, micro_batches), layout.groups)
        self._tables = None
        self._single = np.zeros(1, dtype=np.int32)
        self._widest_level_fall = WIDEST_LEVEL_FALL
        self.restart()

    @classmethod
    def full_redistribution(cls, groups, *, micro_batches=1):
        """The controller of the ``r = N`` layout (every live group may compute any micro-batch), without it.

        The layout ``stacks[g, l] = (g + l) mod N`` with ``r = N`` takes ``4 N^2`` bytes
        (40 GB at ``N = 100,000``); its plans need none of it: the least load is
        always the counting bound ``ceil(m N / (N - k))``, and a wipe-out happens only
        when every group is down.

        Parameters
        ----------
        groups : int
            ``N``, ``1 <= N <= 2^24``.
        micro_batches : int, default 1
            ``m``, with ``N m <= 2^24``.

        Returns
        -------
        RedistributionController
            The same interface (:meth:`fail`, :meth:`recover`, :meth:`set_failed`,
            :meth:`restart`, ``load``, ``stack_number``...), ``O(N m)`` memory; its plans
            have the exact planner's ``status`` and ``load`` on the ``r = N`` layout,
            and ``order = None`` (:mod:`spare_opt.planning.redistribution`).

        Raises
        ------
        ParameterTypeError, ParameterError
            ``groups`` or ``micro_batches`` is not an integer in range.
        """
        from .redistribution import RedistributionController

        return RedistributionController(groups, micro_batches=micro_batches)

    # ------------------------------------------------------------------ state
    def restart(self):
        """Global restart after a wipe-out: all groups live, ``S = 1`` (``L = m``), layout order.

        Fresh arrays are allocated so that plans returned before the restart keep
        their values.
        """
        fresh = getattr(self, "_fresh_state", None)
        if fresh is None:  # built once (a restart at every re-plan of the simulation is frequent), then copied
            if self._micro_batches == 1:
                fresh = _fault_free_state(self._layout.stacks, *self._holder_tables())
            else:
                fresh = _fault_free_split_state(self._layout.stacks, *self._holder_tables(), self._micro_batches)
            self._fresh_state = tuple(array.copy() for array in fresh)
        else:
            fresh = tuple(array.copy() for array in fresh)
        if self._micro_batches == 1:
            self._load_state(*fresh)
        else:
            self._load_split_state(*fresh)

    def _holder_tables(self):
        """``(holder_groups, holder_layers)``: built once, then read from the current state
        (they never change), so that no second copy is kept."""
        if self._tables is None:
            return _holder_table(self._layout)
        if self._micro_batches == 1:
            return self._tables[_k.TABLE_HOLDER_GROUPS], self._tables[_k.TABLE_HOLDER_LAYERS]
        return self._tables[_s.HOLDER_GROUPS], self._tables[_s.HOLDER_LAYERS]

    def _load_state(self, tables, rows, scalars):
        """Adopt the packed m = 1 state ``(tables, rows, scalars)`` with a new, empty journal."""
        n, r = self._layout.stacks.shape
        self._tables, self._rows, self._scalars = tables, rows, scalars
        self._stacks = self._tables[_k.TABLE_STACKS]
        self._order = self._tables[_k.TABLE_ORDER]
        self._alive = self._rows[_k.GROUP_STATE_START + _k.ALIVE]
        self._assigned = self._rows[_k.SHARD_STATE_START + _k.ASSIGNED]
        self._scratch = self._rows[_k.SCRATCH_START:]
        self._wiped = False
        self._history = _History(self._assigned, self._order, self._rows[_k.GROUP_STATE_START + _k.SEQUENCE],
                                 self._scalars, n, r)

    def _load_split_state(self, tables, micro, rows, scalars):
        """Adopt the packed m > 1 state with a new, empty journal."""
        self._tables, self._micro, self._rows, self._scalars = tables, micro, rows, scalars
        self._stacks = tables[_s.STACKS]
        self._alive = rows[_s.ALIVE]
        self._split = micro[_s.SPLIT]
        self._wiped = False
        self._history = _SplitHistory(self._split, rows[_s.SEQUENCE], scalars, self._stacks)

    @property
    def layout(self):
        """Layout: the layout this controller plans for."""
        return self._layout

    @property
    def micro_batches(self):
        """int: ``m``, micro-batches per shard type."""
        return self._micro_batches

    @property
    def stack_number(self):
        """int or None: the current all-reduce stack number ``S*`` (at ``m > 1`` the most
        distinct shard types a live group computes part of); ``None`` after a wipe-out."""
        if self._wiped:
            return None
        if self._micro_batches == 1:
            return int(self._scalars[_k.STACK])
        return int(self._scalars[_s.WIDEST])

    @property
    def load(self):
        """int or None: the current load ``L*`` in micro-batches (``S*`` at ``m = 1``);
        ``None`` after a wipe-out."""
        if self._wiped:
            return None
        return int(self._scalars[_k.STACK if self._micro_batches == 1 else _s.BOUND])

    @property
    def wiped_out(self):
        """bool: whether the last failure wiped out (call :meth:`restart` to continue)."""
        return self._wiped

    @property
    def alive(self):
        """numpy.ndarray of bool, shape (N,): a copy of the live flags of every group."""
        return self._alive != 0

    @property
    def failed(self):
        """numpy.ndarray of int32, shape (k,): the groups failed since the last restart, sorted."""
        return self._history.failed(self._failed_count(), self._history.generation)

    def _failed_count(self):
        return int(self._scalars[_k.FAILED_COUNT if self._micro_batches == 1 else _s.FAILED_COUNT])

    @property
    def assignment(self):
        """numpy.ndarray of int32, shape (N,) or None: read-only view of the live group
        contributing each shard type (at ``m > 1``, micro-batch 0 of each type); ``None``
        after a wipe-out.  It changes with the next :meth:`fail`; copy it to keep it."""
        if self._wiped:
            return None
        if self._micro_batches == 1:
            return _read_only(self._assigned)
        return _read_only(self._split[:, 0])

    @property
    def split(self):
        """numpy.ndarray of int32, shape (N, m) or None: read-only view of the live group
        computing each micro-batch (``assignment[:, None]`` at ``m = 1``); ``None`` after
        a wipe-out.  It changes with the next :meth:`fail`; copy it to keep it."""
        if self._wiped:
            return None
        if self._micro_batches == 1:
            return _read_only(self._assigned[:, None])
        return _read_only(self._split)

    @property
    def order(self):
        """numpy.ndarray of int32, shape (N, r) or None: every group's compute order, ``-1``
        rows for failed groups (``None`` after a wipe-out).  At ``m = 1`` a read-only view
        that changes with the next :meth:`fail` (copy it to keep it); at ``m > 1`` a new
        array derived from the split (``Plan.order``)."""
        if self._wiped:
            return None
        if self._micro_batches == 1:
            return _read_only(self._order)
        return _derived_order(self._stacks, self._tables[_s.COUNT] > 0, self._alive != 0)

    def __repr__(self):
        extra = "" if self._micro_batches == 1 else f", micro_batches={self._micro_batches}, load={self.load}"
        return (
            f"ReorderController(groups={self._stacks.shape[0]}, redundancy={self._stacks.shape[1]}, "
            f"failed={self._failed_count()}, stack_number={self.stack_number}{extra})"
        )

    # ---------------------------------------------------------------- failure
    def fail(self, groups, mid_step=False):
        """Record that ``groups`` failed (at the same time) and re-plan.

        Parameters
        ----------
        groups : int or iterable of int
            One group id or several ids failing at once, each live and in ``[0, N)``.
            An empty iterable changes nothing and returns the current plan.
        mid_step : bool, default False
            The groups failed after computing the current step but before its
            all-reduce: the plan's ``patch`` lists, per live group, the
            ``(shard type, micro-batch)`` pairs it must compute now because only the
            failed groups computed them: at ``m = 1`` the pairs ``(t, 0)`` of the shard
            types that only the failed groups had in their top ``S`` layers; at
            ``m > 1`` the micro-batches the failed groups computed.

        Returns
        -------
        Plan
            ``status``; ``stack_number`` (``S*``, ``None`` on a wipe-out);
            ``lower_bound`` ``c(k)``; ``failed`` (all groups failed since the last
            restart, sorted); ``lost_shards``; ``assignment`` (N,), ``order`` (N, r)
            and ``split`` (N, m) int32 (``None`` on a wipe-out); ``moves``, counted
            against the plan before this call (at ``m > 1``: micro-batches whose
            contributor changed); ``patch``; ``micro_batches``; ``load`` (``L*``, the
            same as the exact planner's) and ``step_cost``.  ``failed``,
            ``assignment``, ``order`` and ``split`` are materialised on first access
            and keep their values after later calls.

        Raises
        ------
        FailureSetError
            A group id is not an integer, out of range, repeated, or already failed; or
            the controller has wiped out and :meth:`restart` was not called.
        ParameterTypeError
            ``mid_step`` is not a bool.
        """
        if self._wiped:
            raise FailureSetError(
                "the controller has wiped out (a shard type lost every holder): "
                "call restart() before failing more groups"
            )
        mid_step = check.flag("mid_step", mid_step)
        n = self._stacks.shape[0]
        if isinstance(groups, np.ndarray) and groups.ndim != 1:
            if groups.ndim == 0:  # a numpy scalar wrapped in an array: treat it as the scalar
                groups = groups[()]
            else:
                raise FailureSetError(f"failed groups must be a group id or a 1-D array of group ids, "
                                      f"got an array of shape {groups.shape}")
        if isinstance(groups, (bool, np.bool_)) or isinstance(groups, (float, np.floating)):
            raise FailureSetError(f"failed groups: {groups!r} is not an integer group id")
        if isinstance(groups, (int, np.integer)):
            # Fast path of the common single failure: skip building a Python list.
            group = int(groups)
            if not 0 <= group < n:
                raise FailureSetError(f"failed groups: group {group} is out of range [0, {n})")
            failing = self._single
            failing[0] = group
        else:
            try:
                failing = normalise_groups(groups, n)
            except (TypeError, OverflowError):
                raise FailureSetError(
                    f"failed groups must be a group id or an iterable of group ids, got {groups!r}"
                ) from None
        return self._apply_failure(failing, mid_step)

    def _apply_failure(self, failing, mid_step):
        """:meth:`fail` after the checks: ``failing`` is an int32 array of group ids."""
        n = self._stacks.shape[0]
        if self._micro_batches > 1:
            return self._fail_split(failing, mid_step)
        history = self._history
        while True:
            status, stack_number, failed_count, moves, lost_count, patch_count, journal_end = _k.fail_packed(
                self._tables, self._rows, self._scalars, failing, bool(mid_step), history.journal
            )
            if status != _k.STATUS_JOURNAL_FULL:
                break
            history.grow()
        if status == _k.STATUS_ALREADY_FAILED:
            raise FailureSetError(f"group {lost_count} has failed already (recover() brings it back; restart() "
                                  "brings every group back)")
        bound = lower_bound(n, failed_count)  # c(k); None when every group failed
        if status == _k.STATUS_WIPE_OUT:
            self._wiped = True
            lost = np.unique(self._scratch[_k.LOST, :lost_count])
            return _lazy_plan(WIPE_OUT, None, bound, lost, 0, {}, None, (history, None, failed_count, history.generation), 1, None)
        patch = {}
        if patch_count:
            types = np.sort(self._scratch[_k.PATCH, :patch_count])
            owners = self._assigned[types]
            for owner, shard in zip(owners.tolist(), types.tolist()):
                patch.setdefault(owner, []).append((shard, 0))
        source = (history, journal_end, failed_count, history.generation)
        return _lazy_plan(MASKED, stack_number, bound, _EMPTY, moves, patch, _LAZY, source, 1, stack_number)

    def _fail_split(self, failing, mid_step):
        """:meth:`fail` at ``m > 1``, after the checks of the group ids."""
        n = self._stacks.shape[0]
        m = self._micro_batches
        history = self._history
        while True:
            status, load, widest, failed_count, moves, lost_count, patch_count, journal_end = _s.fail_split(
                self._tables, self._micro, self._rows, self._scalars, failing, bool(mid_step), history.journal
            )
            if status != _s.STATUS_JOURNAL_FULL:
                break
            history.grow()
        if status == _s.STATUS_ALREADY_FAILED:
            raise FailureSetError(f"group {lost_count} has failed already (recover() brings it back; restart() "
                                  "brings every group back)")
        bound = lower_bound(n, failed_count)
        if status == _s.STATUS_WIPE_OUT:
            self._wiped = True
            lost = np.unique(self._rows[_s.LOST, :lost_count])
            return _lazy_plan(WIPE_OUT, None, bound, lost, 0, {}, None, (history, None, failed_count, history.generation), m, None)
        patch = {}
        if patch_count:
            entries = np.sort(self._micro[_s.LOG_ENTRY].ravel()[:patch_count])
            owners = self._split.ravel()[entries]
            for owner, entry in zip(owners.tolist(), entries.tolist()):
                patch.setdefault(owner, []).append(divmod(entry, m))
        source = (history, journal_end, failed_count, history.generation)
        return _lazy_plan(MASKED, widest, bound, _EMPTY, moves, patch, _LAZY, source, m, load)

    # -------------------------------------------------------------- agreement
    def set_failed(self, groups, *, mid_step=False):
        """Make ``groups`` the whole failed set and return the plan that every process agrees on.

        Idempotent: groups already failed raise no error, failed groups missing from
        ``groups`` come back, and the plan depends on nothing but the layout, the set
        and ``m``.

        Parameters
        ----------
        groups : int or iterable of int
            Every group that is out now, ids in ``[0, N)``, each at most once, in any
            order (an empty iterable: every group is live).
        mid_step : bool, default False
            The groups that are newly out (in ``groups`` but live before this call)
            failed after computing the current step with the controller's previous
            plan but before its all-reduce: the plan's ``patch`` gives every
            micro-batch ``(t, j)`` that one of them contributed in the previous plan to
            its new contributor, which computes it now (:func:`spare_opt.patch_work`).

        Returns
        -------
        Plan
            The plan of a fresh controller's ``fail(sorted(groups))``: ``status``,
            ``stack_number`` and ``load`` equal to the exact planner's; ``moves``
            counted against the fault-free plan; ``failed`` the set, sorted.  With the
            same layout, set and ``m`` it is bitwise identical whatever the
            controller's history (:meth:`Plan.fingerprint` agrees).  On a wipe-out
            the controller is wiped out (:meth:`set_failed` with a smaller set, or
            :meth:`restart`, continues).

        Raises
        ------
        FailureSetError
            A group id is not an integer, out of range or repeated.
        ParameterTypeError
            ``mid_step`` is not a bool.

        See Also
        --------
        spare_opt.agreed_plan : the same plan without a controller, or the exact
            planner's canonical plan.

        Notes
        -----
        The state is rebuilt from the fault-free one (a copy of arrays kept since
        the first call, ``O(N (r + m))``), then the failed groups fail at once in
        ascending order with the incremental algorithm of :meth:`fail`, which is
        deterministic; the controller adopts the result, so later :meth:`fail` and
        :meth:`recover` continue from it.  Starting from the fault-free plan keeps
        every micro-batch of a live group's top layer where it is: among plans with
        the least load, the greedy placement and the shortest augmenting paths move
        few micro-batches (the ratio to the min-cost optimum of
        :func:`spare_opt.plan_reorder` is measured in ``docs/agreement.md``).
        Earlier plans keep their values.  ``patch`` assumes that every live group
        computed exactly its :meth:`Plan.work` of the previous plan (at ``m = 1``
        :meth:`fail` instead assumes that a group computes its whole top ``S``).

        Examples
        --------
        >>> import numpy as np
        >>> from spare_opt import Layout, ReorderController
        >>> layout = Layout((np.arange(7)[:, None] + [0, 1, 3]) % 7, offsets=[0, 1, 3])
        >>> one, two = ReorderController(layout), ReorderController(layout)
        >>> _ = one.fail(5); _ = one.fail(2)
        >>> one.set_failed([2, 5]).fingerprint() == two.set_failed([5, 2]).fingerprint()
        True
        """
        mid_step = check.flag("mid_step", mid_step)
        failing = check_failed_set(groups, self._stacks.shape[0])
        previous = None
        if mid_step and not self._wiped:
            previous = (self._split if self._micro_batches > 1 else self._assigned[:, None], self._alive != 0)
        if self._micro_batches == 1:
            self._load_state(*self._fault_free_copy())
        else:
            self._load_split_state(*self._fault_free_copy())
        plan = self._apply_failure(failing, False)
        if plan.masked:
            # The live arrays are this plan: copy what a rank reads (no undo journal to
            # replay); at m > 1 the order is derived on first access.
            if self._micro_batches == 1:
                plan.assignment = self._assigned.copy()
                plan.split = plan.assignment[:, None].copy()
                plan.order = self._order.copy()
            else:
                plan.split = self._split.copy()
                plan.assignment = plan.split[:, 0].copy()
                plan.__dict__["_touched"] = (self._tables[_s.COUNT] > 0, self._alive != 0, self._stacks)
            if previous is not None:
                plan.patch = _patch_work(previous[0], previous[1], plan.split, self._alive != 0)
        return plan

    def _fault_free_copy(self):
        """Fresh copies of the packed fault-free state (the template is built once)."""
        template = getattr(self, "_template", None)
        if template is None:
            if self._micro_batches == 1:
                template = _fault_free_state(self._layout.stacks, *self._holder_tables())
            else:
                template = _fault_free_split_state(self._layout.stacks, *self._holder_tables(), self._micro_batches)
            self._template = template
        return tuple(array.copy() for array in template)

    def state_dict(self):
        """The controller's state, for a process that heals from a peer (:meth:`load_state_dict`).

        Returns
        -------
        dict
            ``format`` (``"spare-controller-state"``), ``version`` (1), ``layout``
            (:meth:`Layout.fingerprint`), ``micro_batches``, ``wiped_out`` and
            ``arrays``, a dict of numpy arrays (copies): the packed state of the
            kernels (``tables``, ``rows``, ``scalars``, and ``micro`` at ``m > 1``),
            ``O(N (r + m))`` integers; and ``checksum``, a BLAKE2b digest of all of
            them that :meth:`load_state_dict` verifies.  Plain numpy and Python
            values: ``pickle``, ``torch.save`` and ``numpy.savez`` hold it.

        Notes
        -----
        The undo journal behind the lazy arrays of earlier plans is not part of the
        state (those plans belong to the source); the journal offset is stored as 0.
        """
        names = ("tables", "rows", "scalars") if self._micro_batches == 1 else ("tables", "micro", "rows", "scalars")
        arrays = {name: getattr(self, "_" + name).copy() for name in names}
        arrays["scalars"][_k.JOURNAL_END if self._micro_batches == 1 else _s.JOURNAL_END] = 0
        state = {"format": _STATE_FORMAT, "version": 1, "layout": self._layout.fingerprint(),
                 "micro_batches": self._micro_batches, "wiped_out": bool(self._wiped), "arrays": arrays}
        state["checksum"] = _check_state.state_checksum(_check_state.checksum_meta(state), arrays)
        return state

    def load_state_dict(self, state):
        """Adopt the state of another controller (:meth:`state_dict`) of the same layout and ``m``.

        Afterwards this controller behaves exactly as the source: the same calls
        return the same plans.

        Parameters
        ----------
        state : dict
            What :meth:`state_dict` returned (arrays are copied, so the source may
            change them afterwards).

        Returns
        -------
        None

        Raises
        ------
        ParameterError
            ``state`` is not a controller state of version 1, or belongs to another
            layout (by fingerprint) or another ``m``, or its arrays have the wrong
            shapes; or it is corrupt: ``wiped_out`` is not a bool, its checksum is
            missing or does not verify, or its values are inconsistent (a value out
            of range, counts that do not match the assignment, a live shard type
            without a live holder in the plan, a level that is not the least one for
            its failed set).  Nothing is adopted then: the controller keeps its state.

        Notes
        -----
        The checks (:mod:`spare_opt.planning._state_check`) run before any kernel sees
        the arrays, so a state that is accepted cannot make a kernel index out of
        range, even with a recomputed checksum.  They are linear in the state's size
        plus one :meth:`set_failed` for the level; ``docs/benchmarks.md`` ("Loading a
        controller state") gives the cost.  A process that cannot get a valid state can
        rebuild the agreed plan from the failed set alone with :meth:`set_failed`.
        """
        from .._core.errors import ParameterError

        if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT or state.get("version") != 1:
            raise ParameterError("not a controller state: expected the dict of ReorderController.state_dict() "
                                 f"(format {_STATE_FORMAT!r}, version 1)")
        if state.get("layout") != self._layout.fingerprint():
            raise ParameterError(f"the controller state belongs to layout {state.get('layout')!r}, "
                                 f"not to this controller's layout {self._layout.fingerprint()!r}")
        if state.get("micro_batches") != self._micro_batches:
            raise ParameterError(f"the controller state has micro_batches m = {state.get('micro_batches')!r}, "
                                 f"this controller m = {self._micro_batches}")
        wiped = state.get("wiped_out")
        if not isinstance(wiped, (bool, np.bool_)):
            raise ParameterError(f"corrupt controller state: wiped_out must be a bool, got {wiped!r}")
        wiped = bool(wiped)
        self._fault_free_copy()  # builds the template once; its shapes and dtypes are read here, not copied
        template = self._template
        names = ("tables", "rows", "scalars") if self._micro_batches == 1 else ("tables", "micro", "rows", "scalars")
        arrays = state.get("arrays")
        if not isinstance(arrays, dict) or set(arrays) != set(names):
            raise ParameterError(f"the controller state must hold the arrays {', '.join(names)}")
        loaded = _check_state.to_kernel_dtypes(arrays, names, template)
        checksum = state.get("checksum")
        if not isinstance(checksum, str):
            raise ParameterError("corrupt controller state: it carries no checksum (state_dict() writes one)")
        if checksum != _check_state.state_checksum(_check_state.checksum_meta(state), dict(zip(names, loaded))):
            raise ParameterError("corrupt controller state: its checksum does not verify (a truncated or "
                                 "altered transfer?); set_failed(failed) rebuilds the agreed plan")
        layout_tables = (self._layout.stacks, *self._holder_tables())
        if self._micro_batches == 1:
            failed = _check_state.check_single(layout_tables, loaded, wiped)
            level = int(loaded[2][_k.STACK])
        else:
            failed = _check_state.check_split(layout_tables, loaded, wiped, self._micro_batches)
            level = int(loaded[3][_s.BOUND])
        if not wiped:
            # The level must be the least feasible one for the failed set: a fresh
            # controller's (both are exact), so that later plans keep the exact level.
            least = self._set_failed_level(np.sort(failed))
            if least != level:
                raise ParameterError(f"corrupt controller state: its level {level} is not the least one, "
                                     f"{least}, for its {failed.size} failed group(s)")
        if self._micro_batches == 1:
            self._load_state(*loaded)
        else:
            self._load_split_state(*loaded)
        self._wiped = wiped

    def _set_failed_level(self, failing):
        """The level (``S*``, or ``L*`` at ``m > 1``) of the fault-free state after ``failing``
        fail at once, without a journal (:meth:`load_state_dict`'s check)."""
        state = self._fault_free_copy()
        no_journal = np.zeros(0, dtype=np.int32)
        if self._micro_batches == 1:
            result = _k.fail_packed(*state, failing, False, no_journal)
        else:
            result = _s.fail_split(*state, failing, False, no_journal)
        return int(result[1])

    # ----------------------------------------------------------------- repair
    def recover(self, groups):
        """Bring failed groups back (repaired) and re-plan for the groups still failed.

        Parameters
        ----------
        groups : int or iterable of int
            One group id or several, each failed since the last restart.  An empty
            iterable changes nothing (the plan is recomputed all the same).

        Returns
        -------
        Plan
            The plan for the groups still failed, with the same ``status``,
            ``stack_number`` at ``m = 1`` (``S*`` can fall) and ``load`` as the exact
            planner (:func:`spare_opt.plan_reorder`) given the controller's current
            plan as the previous one.  When the least load does not fall, nothing
            moves (the exact planner's choice too: the previous plan is still valid);
            when it falls, work goes back to the returning groups along shortest
            augmenting paths and ``moves`` is counted as the exact planner counts it
            (not guaranteed minimal; ``docs/benchmarks.md`` gives the measured ratio).
            ``patch`` is empty; ``failed`` keeps the groups still failed.
            ``failed``, ``assignment``, ``order`` and ``split`` are materialised on
            first access, as for :meth:`fail`.

        Raises
        ------
        FailureSetError
            A group id is not an integer, out of range, repeated or not failed; or the
            controller has wiped out (call :meth:`restart`: every group is back).

        Notes
        -----
        A returning group comes back with no work (and its layout order at ``m = 1``).
        Then the level falls while a lower one is feasible: ``L* >= ceil(m N / (N -
        k))`` (Hall's condition for all types), so while ``L`` is above that bound each
        live group at load ``L`` gives one unit (a micro-batch, or a shard type at
        ``m = 1``) away along a shortest augmenting path to a group below ``L - 1``,
        typically a returning group (the reverse of a failure's path), and ``L``
        becomes ``L - 1``.  When some group at ``L`` has no such path, the groups it
        reaches in the residual graph certify that Hall's condition fails for ``L - 1``
        (as in :meth:`fail`'s proof), so ``L* = L``; that attempt is undone.  A rejoin
        that keeps the level costs ``O(r + k)``; one that lowers it, a scan of the
        groups plus one search per group at the old level (breadth-first, then shortest
        augmenting paths with distance labels when the rooms are far).  At ``m = 1`` every contributed type outside its group's new top ``S*``
        layers is then swapped into them.  Plans returned before keep their values
        (the undo journal holds the rejoin too; the failure sequence before it is kept
        for them, ``O(k)``).
        """
        if self._wiped:
            raise FailureSetError("the controller has wiped out: call restart(), which brings every group back")
        n = self._stacks.shape[0]
        if isinstance(groups, np.ndarray) and groups.ndim == 0:  # a 0-d array is one id, as fail() takes it
            groups = groups[()]
        if isinstance(groups, (bool, np.bool_)) or isinstance(groups, (float, np.floating)):
            raise FailureSetError(f"recovered groups: {groups!r} is not an integer group id")
        if isinstance(groups, (int, np.integer)):
            group = int(groups)
            if not 0 <= group < n:
                raise FailureSetError(f"recovered groups: group {group} is out of range [0, {n})")
            if self._alive[group]:
                raise FailureSetError(f"recovered groups: group {group} has not failed")
            back = self._single  # the kernel only reads it
            back[0] = group
        else:
            try:
                back = normalise_groups(groups, n, what="recovered groups")
            except (TypeError, OverflowError):
                raise FailureSetError(f"recovered groups must be a group id or an iterable of group ids, "
                                      f"got {groups!r}") from None
            live = self._alive[back] != 0
            if live.any():
                raise FailureSetError(f"recovered groups: group {int(back[live.argmax()])} has not failed")
        return self._recover_checked(back, self._widest_level_fall)

    def _recover_checked(self, back, widest_level_fall):
        """:meth:`recover` after the checks: ``back`` is an int32 array of failed group ids."""
        n = self._stacks.shape[0]
        history = self._history
        count = self._failed_count()
        history.new_generation(count)  # plans made before keep their failed set
        m = self._micro_batches
        while True:
            if m == 1:
                status, load, failed_count, moves, journal_end = _k.recover_packed(
                    self._tables, self._rows, self._scalars, back, history.journal)
                widest = load
            else:
                status, load, widest, failed_count, moves, journal_end = _s.recover_split(
                    self._tables, self._micro, self._rows, self._scalars, back, history.journal,
                    widest_level_fall)
                if status == _s.STATUS_LEVEL_FALL_DEFERRED:
                    return self._recover_past_a_wide_level(back)
            if status != _k.STATUS_JOURNAL_FULL:
                break
            history.grow()
        source = (history, journal_end, failed_count, history.generation)
        return _lazy_plan(MASKED, widest, lower_bound(n, failed_count), _EMPTY, moves, {}, _LAZY, source, m, load)

    def _recover_past_a_wide_level(self, back):
        """:meth:`recover` at ``m > 1`` when the level ``L - 1`` would be tried with more than
        ``_widest_level_fall`` live groups above it and no kept Hall violation stops it.

        A lowering attempt that fails costs augmenting paths from many of those groups
        before the one that has none, all undone; one maximum flow at ``L - 1`` for the
        live groups after the rejoin decides instead.  When it falls short, the types it
        reaches form a Hall violator (``_CoverNetwork.deficient_types``), kept as the
        kernel's certificate, so this rejoin and the next ones it still blocks do no
        search.  Otherwise the level falls by augmenting paths, as in any rejoin."""
        from .exact import _CoverNetwork

        rows, scalars = self._rows, self._scalars
        before = self._alive != 0
        alive = before.copy()
        alive[back] = True
        target = int(scalars[_s.BOUND]) - 1
        live = np.flatnonzero(alive).astype(np.int32)
        types = _CoverNetwork(self._stacks, live, micro_batches=self._micro_batches).deficient_types(target)
        if types is not None:
            if scalars[_s.CERT_ID] >= _k._STAMP_LIMIT:
                rows[_s.CERT_TYPE, :] = 0
                scalars[_s.CERT_ID] = 0
            scalars[_s.CERT_ID] += 1
            rows[_s.CERT_TYPE, types] = scalars[_s.CERT_ID]
            holders = np.unique(self._holder_tables()[0][types].ravel())
            scalars[_s.CERT_TYPES] = types.size
            scalars[_s.CERT_HOLDERS] = int(before[holders].sum())  # the kernel counts the returning ones
            scalars[_s.CERT_TARGET] = target
        return self._recover_checked(back, np.iinfo(np.int64).max)


def stack_number_trajectory(layout, failure_order, *, micro_batches=1, return_moves=False):
    """Stack numbers along one failure sequence, computed in one compiled loop.

    Groups fail one at a time in the given order from a fault-free start; the
    controller's algorithm (:class:`ReorderController`) runs without a Python call per
    failure.

    Parameters
    ----------
    layout : Layout
    failure_order : array_like of int, shape (K,)
        Distinct group ids in ``[0, N)``, in failure order.
    micro_batches : int, default 1
        ``m``, micro-batches per shard type.  At ``m > 1`` the stack number is the most
        distinct shard types a live group computes part of in the controller's split
        (the step cost is in :func:`load_trajectory`).
    return_moves : bool, default False
        Also return the moves of every masked failure.

    Returns
    -------
    stack_numbers : numpy.ndarray of int32
        ``stack_numbers[k]`` is ``S*`` after the first ``k`` failures
        (``stack_numbers[0] = 1``).  If failure number ``j`` (1-based) wipes out, the
        length is ``j`` (``k = 0 .. j-1``: ``j - 1`` failures were masked); otherwise it
        is ``K + 1``.
    wipe_out_index : int
        ``j``, the 1-based index of the failure that wiped out, or -1.
    moves : numpy.ndarray of int32, shape (len(stack_numbers) - 1,)
        Only with ``return_moves``: ``moves[k]`` for failure ``k + 1``.  A failure with no
        move and no rise of ``S`` is one where the paper's fixed check (HK-Fixed) passes.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout, ``micro_batches`` is not an integer, or
        ``return_moves`` is not a bool.
    ParameterError
        ``micro_batches < 1`` or ``N m`` above :data:`~spare_opt.planning.plan.MAX_SPLIT_ENTRIES`.
    FailureSetError
        ``failure_order`` is not a 1-D sequence of distinct group ids in range.
    """
    return _one_trajectory(layout, failure_order, micro_batches, return_moves, "stack_numbers")


def stack_number_trajectories(layout, failure_orders, *, micro_batches=1):
    """Stack numbers of many failure sequences (Monte-Carlo trials) in one compiled call.

    Parameters
    ----------
    layout : Layout
    failure_orders : array_like of int, shape (T, K)
        Row ``i`` is trial ``i``: distinct group ids in failure order.
    micro_batches : int, default 1
        ``m``, micro-batches per shard type (see :func:`stack_number_trajectory`).

    Returns
    -------
    stack_numbers : numpy.ndarray of int32, shape (T, K + 1)
        Row ``i`` as :func:`stack_number_trajectory` would return it, padded with -1.
    wipe_out_index : numpy.ndarray of int64, shape (T,)
        Per trial, the 1-based index of the failure that wiped out, or -1.
    moves : numpy.ndarray of int32, shape (T, K)
        Moves of every masked failure, padded with -1.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout or ``micro_batches`` is not an integer.
    ParameterError
        ``micro_batches < 1`` or ``N m`` above :data:`~spare_opt.planning.plan.MAX_SPLIT_ENTRIES`.
    FailureSetError
        ``failure_orders`` is not 2-D or a row is not a sequence of distinct group ids.
    """
    layout, micro_batches = _check_trajectory_arguments(layout, micro_batches)
    result = _trajectories(layout, failure_orders, micro_batches)
    return result["stack_numbers"], result["wipe_out_index"], result["moves"]


def load_trajectory(layout, failure_order, *, micro_batches=1, return_moves=False):
    """Loads ``L*`` (micro-batches) along one failure sequence, computed in one compiled loop.

    As :func:`stack_number_trajectory`, with the least load ``L*`` of the controller
    (equal to the exact planner's :attr:`Plan.load`) in place of the stack number.
    The step cost after ``k`` failures is ``loads[k] / m``; at ``m = 1`` the loads are
    the stack numbers.

    Parameters
    ----------
    layout : Layout
    failure_order : array_like of int, shape (K,)
        Distinct group ids in ``[0, N)``, in failure order.
    micro_batches : int, default 1
        ``m``, micro-batches per shard type.
    return_moves : bool, default False
        Also return the moves of every masked failure (micro-batches whose contributor
        changed at ``m > 1``).

    Returns
    -------
    loads : numpy.ndarray of int32
        ``loads[k]`` is ``L*`` after the first ``k`` failures (``loads[0] = m``); the
        length is as in :func:`stack_number_trajectory`.
    wipe_out_index : int
        The 1-based index of the failure that wiped out, or -1.
    moves : numpy.ndarray of int32, shape (len(loads) - 1,)
        Only with ``return_moves``.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout, ``micro_batches`` is not an integer, or
        ``return_moves`` is not a bool.
    ParameterError
        ``micro_batches < 1`` or ``N m`` above :data:`~spare_opt.planning.plan.MAX_SPLIT_ENTRIES`.
    FailureSetError
        ``failure_order`` is not a 1-D sequence of distinct group ids in range.

    Examples
    --------
    >>> import numpy as np
    >>> from spare_opt import Layout
    >>> layout = Layout((np.arange(7)[:, None] + [0, 1, 3]) % 7, offsets=[0, 1, 3])
    >>> loads, wipe_out_index = load_trajectory(layout, [2, 5, 0], micro_batches=4)
    >>> loads.tolist(), wipe_out_index
    ([4, 5, 6, 7], -1)
    """
    return _one_trajectory(layout, failure_order, micro_batches, return_moves, "loads")


def load_trajectories(layout, failure_orders, *, micro_batches=1):
    """Loads ``L*`` of many failure sequences (Monte-Carlo trials) in one compiled call.

    Parameters
    ----------
    layout : Layout
    failure_orders : array_like of int, shape (T, K)
        Row ``i`` is trial ``i``: distinct group ids in failure order.
    micro_batches : int, default 1
        ``m``, micro-batches per shard type.

    Returns
    -------
    loads : numpy.ndarray of int32, shape (T, K + 1)
        Row ``i`` as :func:`load_trajectory` would return it (``L_k`` for ``k = 0`` up
        to the last masked failure), padded with -1.  ``loads / m`` is the step cost.
    wipe_out_index : numpy.ndarray of int64, shape (T,)
        Per trial, the 1-based index of the failure that wiped out, or -1.
    moves : numpy.ndarray of int32, shape (T, K)
        Moves of every masked failure, padded with -1.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout or ``micro_batches`` is not an integer.
    ParameterError
        ``micro_batches < 1`` or ``N m`` above :data:`~spare_opt.planning.plan.MAX_SPLIT_ENTRIES`.
    FailureSetError
        ``failure_orders`` is not 2-D or a row is not a sequence of distinct group ids.

    Notes
    -----
    One compiled loop over every trial: the state (``O(N (r + m))``) is reset per
    trial, each failure costs what :meth:`ReorderController.fail` costs without the
    Python call.  This is the call a Monte-Carlo of the step cost needs.
    """
    layout, micro_batches = _check_trajectory_arguments(layout, micro_batches)
    result = _trajectories(layout, failure_orders, micro_batches)
    return result["loads"], result["wipe_out_index"], result["moves"]


def _check_trajectory_arguments(layout, micro_batches):
    """``(layout, m)`` of a trajectory function, checked: the one check of the public functions."""
    check_layout(layout)
    return layout, check_micro_batches(micro_batches, layout.groups)


def _trajectories(layout, failure_orders, micro_batches):
    """Stack numbers, loads, wipe-out indices and moves of many failure orders, one compiled run.

    The run yields both kinds of trajectory, so a caller that needs both (the simulation's
    failure pool at ``m > 1``) walks the orders once.  ``layout`` and ``micro_batches`` are
    checked by the caller (:func:`stack_number_trajectories`, :func:`load_trajectories`,
    or the public function that built the simulation's failure pool); the failure orders
    are checked here.
    """
    state = _trajectory_state(layout, micro_batches)
    return state.run(_check_failure_orders(failure_orders, layout.groups, ndim=2))


def _one_trajectory(layout, failure_order, micro_batches, return_moves, key):
    """The body of :func:`stack_number_trajectory` and :func:`load_trajectory`: checks its arguments."""
    layout, micro_batches = _check_trajectory_arguments(layout, micro_batches)
    state = _trajectory_state(layout, micro_batches)
    return_moves = check.flag("return_moves", return_moves)
    orders = _check_failure_orders(failure_order, layout.groups, ndim=1)[None, :]
    result = state.run(orders)
    index = int(result["wipe_out_index"][0])
    length = orders.shape[1] + 1 if index < 0 else index
    values = result[key][0, :length].copy(), index
    if return_moves:
        return values + (result["moves"][0, :length - 1].copy(),)
    return values


# ---------------------------------------------------------------- helpers
_STATE_FORMAT = "spare-controller-state"


def _patch_work(previous_split, previous_alive, split, alive):
    """``{group: [(t, j), ...]}``: every micro-batch whose contributor in ``previous_split``
    was live before and is failed now, given to its contributor in ``split``."""
    lost = previous_alive & ~alive
    if not lost.any():
        return {}
    types, batches = np.nonzero(lost[previous_split])
    owners = split[types, batches]
    patch = {}
    for owner, t, j in zip(owners.tolist(), types.tolist(), batches.tolist()):
        patch.setdefault(owner, []).append((t, j))
    return dict(sorted(patch.items()))


_EMPTY = np.zeros(0, dtype=np.int32)
_EMPTY.setflags(write=False)
_LAZY = object()


def _read_only(array):
    view = array.view()
    view.setflags(write=False)
    return view


def _holder_table(layout):
    """``(holder_groups, holder_layers)`` (N, r) int32: ``holder_groups[t, i]`` holds shard type
    ``t`` at layer ``holder_layers[t, i]``, ``i``-th in group-id order.

    Every layer of a layout is a permutation (a Latin rectangle), so inverting each layer
    lists the ``r`` holders of every type in ``O(N r)``; sorting rows of ``r`` adds
    ``O(N r log r)``.
    """
    holder_groups = _holders_by_layer(layout.stacks)
    # Sorted by group id: the tie-break order of the greedy placement and of the search.
    by_group = np.argsort(holder_groups, axis=1, kind="stable").astype(np.int32)
    return np.take_along_axis(holder_groups, by_group, axis=1), by_group


def _fault_free_state(stacks, holder_groups, holder_layers):
    """Packed fault-free state ``(tables, rows, scalars)`` of :func:`spare_opt.planning._kernels.fail_packed`."""
    n, r = stacks.shape
    tables = np.zeros((_k.TABLES, n, r), dtype=np.int32)
    tables[_k.TABLE_STACKS] = stacks
    tables[_k.TABLE_HOLDER_GROUPS] = holder_groups
    tables[_k.TABLE_HOLDER_LAYERS] = holder_layers
    tables[_k.TABLE_ORDER] = stacks
    tables[_k.TABLE_POS] = np.arange(r, dtype=np.int32)
    rows = np.zeros((_k.ROWS, n), dtype=np.int32)
    rows[_k.GROUP_STATE_START + _k.ALIVE] = 1
    rows[_k.GROUP_STATE_START + _k.LOAD] = 1
    rows[_k.SHARD_STATE_START + _k.ASSIGNED, stacks[:, 0]] = np.arange(n, dtype=np.int32)
    rows[_k.SHARD_STATE_START + _k.LIVE_HOLDERS] = r
    scalars = np.zeros(_k.SCALARS, dtype=np.int64)
    scalars[_k.STACK] = 1
    return tables, rows, scalars


def _state_from_plan(stacks, holder_groups, holder_layers, plan, alive, sequence):
    """Packed m = 1 state ``(tables, rows, scalars)`` holding a masked ``plan`` (after a recovery)."""
    n, r = stacks.shape
    tables, rows, scalars = _fault_free_state(stacks, holder_groups, holder_layers)
    order = np.where(alive[:, None], plan.order, stacks).astype(np.int32)
    # pos[g, l]: position in order[g] of stacks[g, l].
    tables[_k.TABLE_POS] = (order[:, :, None] == stacks[:, None, :]).argmax(axis=1)
    order[~alive] = -1
    tables[_k.TABLE_ORDER] = order
    group_state = rows[_k.GROUP_STATE_START:_k.SHARD_STATE_START]
    group_state[_k.ALIVE] = alive
    group_state[_k.LOAD] = np.bincount(plan.assignment, minlength=n)
    group_state[_k.SEQUENCE, :sequence.size] = sequence
    shard_state = rows[_k.SHARD_STATE_START:_k.SCRATCH_START]
    shard_state[_k.ASSIGNED] = plan.assignment
    shard_state[_k.LIVE_HOLDERS] = alive[holder_groups].sum(axis=1)
    scalars[_k.STACK] = plan.stack_number
    scalars[_k.FAILED_COUNT] = sequence.size
    return tables, rows, scalars


def _split_state(stacks, holder_groups, holder_layers, split, alive, load, sequence, counts=None):
    """Packed m > 1 state ``(tables, micro, rows, scalars)`` of :func:`spare_opt.planning._split_kernels.fail_split`
    holding the masked ``split`` (N, m) with the live groups ``alive``, the load bound
    ``load`` and the failure ``sequence``; ``counts`` (N, r), the micro-batches of
    ``stacks[g, l]`` on ``g``, is computed from ``split`` unless given."""
    n, r = stacks.shape
    m = split.shape[1]
    tables = np.zeros((_s.TABLES, n, r), dtype=np.int32)
    tables[_s.STACKS] = stacks
    tables[_s.HOLDER_GROUPS] = holder_groups
    tables[_s.HOLDER_LAYERS] = holder_layers
    if counts is None:
        counts = np.zeros((n, r), dtype=np.int32)
        np.add.at(counts, (split, _split_layers(stacks, split)), 1)
    tables[_s.COUNT] = counts
    micro = np.zeros((_s.MICRO, n, m), dtype=np.int32)
    micro[_s.SPLIT] = split
    rows = np.zeros((_s.ROWS, n), dtype=np.int32)
    rows[_s.ALIVE] = alive
    rows[_s.LOAD] = np.bincount(split.ravel(), minlength=n)
    rows[_s.TOUCHED] = np.where(alive, (counts > 0).sum(axis=1), 0)
    rows[_s.SEQUENCE, :len(sequence)] = sequence
    rows[_s.LIVE_HOLDERS] = alive[holder_groups].sum(axis=1)
    scalars = np.zeros(_s.SCALARS + r + 1, dtype=np.int64)
    scalars[_s.BOUND] = load
    scalars[_s.FAILED_COUNT] = len(sequence)
    touched = rows[_s.TOUCHED][alive]
    scalars[_s.HISTOGRAM:] = np.bincount(touched, minlength=r + 1)
    scalars[_s.WIDEST] = int(touched.max()) if touched.size else 0
    return tables, micro, rows, scalars


def _fault_free_split_state(stacks, holder_groups, holder_layers, m):
    """Packed fault-free m > 1 state: group ``g`` computes every micro-batch of ``stacks[g, 0]``."""
    n, r = stacks.shape
    split = np.empty((n, m), dtype=np.int32)
    split[stacks[:, 0]] = np.arange(n, dtype=np.int32)[:, None]
    counts = np.zeros((n, r), dtype=np.int32)
    counts[:, 0] = m
    return _split_state(stacks, holder_groups, holder_layers, split, np.ones(n, dtype=bool), m,
                        np.zeros(0, dtype=np.int32), counts)


def _check_failure_orders(failure_orders, n, ndim):
    what = "failure order" if ndim == 1 else "failure orders"
    try:
        array = np.asarray(failure_orders)
    except (TypeError, ValueError):
        raise FailureSetError(f"{what} must be an array of group ids") from None
    if array.ndim != ndim:
        raise FailureSetError(f"{what} must be {ndim}-D, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise FailureSetError(f"{what} must hold integer group ids, got dtype {array.dtype}")
    if array.size:
        # Compare in the array's own dtype: casting first would wrap huge unsigned ids
        # into negative ones (and the message would name a group that was never given).
        bad = array[(array < 0) | (array >= n)]
        if bad.size:
            raise FailureSetError(f"{what}: group {int(bad.flat[0])} is out of range [0, {n})")
    array = array.astype(np.int64, copy=False)
    if array.size:
        rows = np.sort(array.reshape(-1, array.shape[-1]), axis=1)
        repeated = np.argwhere(rows[:, 1:] == rows[:, :-1])
        if repeated.size:
            row, col = repeated[0]
            raise FailureSetError(f"{what}: group {int(rows[row, col])} fails more than once in a sequence")
    return np.ascontiguousarray(array, dtype=np.int32)


def _trajectory_state(layout, micro_batches):
    """The compiled kernels' state for ``layout`` at ``m`` micro-batches.

    Arguments are checked by the caller (:func:`_check_trajectory_arguments`).
    """
    m = micro_batches
    return _TrajectoryState(layout) if m == 1 else _SplitTrajectoryState(layout, m)


class _TrajectoryState:
    """Controller arrays for the compiled sequence kernels (no journal kept), m = 1."""

    def __init__(self, layout):
        self.tables, self.rows, self.scalars = _fault_free_state(layout.stacks, *_holder_table(layout))

    def run(self, orders):
        trials, length = orders.shape
        stack_numbers = np.full((trials, length + 1), -1, dtype=np.int32)
        moves = np.full((trials, length), -1, dtype=np.int32)
        wipe_out_index = np.full(trials, -1, dtype=np.int64)
        _k.run_trajectories(self.tables, self.rows, self.scalars, orders, stack_numbers, moves, wipe_out_index)
        return {"stack_numbers": stack_numbers, "loads": stack_numbers, "wipe_out_index": wipe_out_index,
                "moves": moves}


class _SplitTrajectoryState:
    """Controller arrays for the compiled sequence kernel at m > 1 (no journal kept)."""

    def __init__(self, layout, m):
        stacks = layout.stacks
        n, r = stacks.shape
        self.tables = np.zeros((_s.TABLES, n, r), dtype=np.int32)
        holder_groups, holder_layers = _holder_table(layout)
        self.tables[_s.STACKS] = stacks
        self.tables[_s.HOLDER_GROUPS] = holder_groups
        self.tables[_s.HOLDER_LAYERS] = holder_layers
        self.micro = np.zeros((_s.MICRO, n, m), dtype=np.int32)
        self.rows = np.zeros((_s.ROWS, n), dtype=np.int32)
        self.scalars = np.zeros(_s.SCALARS + r + 1, dtype=np.int64)

    def run(self, orders):
        trials, length = orders.shape
        loads = np.full((trials, length + 1), -1, dtype=np.int32)
        stack_numbers = np.full((trials, length + 1), -1, dtype=np.int32)
        moves = np.full((trials, length), -1, dtype=np.int32)
        wipe_out_index = np.full(trials, -1, dtype=np.int64)
        _s.run_trajectories(self.tables, self.micro, self.rows, self.scalars, orders, loads, stack_numbers, moves,
                            wipe_out_index)
        return {"stack_numbers": stack_numbers, "loads": loads, "wipe_out_index": wipe_out_index, "moves": moves}


class _Generation:
    """The failure sequence of the plans made between two recoveries: ``frozen`` is
    ``None`` while it is the live one, then a copy of its first ``count`` entries."""

    __slots__ = ("frozen",)

    def __init__(self):
        self.frozen = None


class _History:
    """Undo journal of one controller epoch (between restarts), m = 1.

    ``assignment``, ``order``, ``sequence`` and ``scalars`` are the controller's live
    arrays; ``journal[:scalars[JOURNAL_END]]`` holds one undo record per masked call
    (:mod:`spare_opt.planning._kernels`), so the state at journal offset ``end`` is
    the live state with the records after ``end`` undone, newest first.
    """

    __slots__ = ("assignment", "order", "sequence", "scalars", "journal", "record_room", "generation")

    def __init__(self, assignment, order, sequence, scalars, n, r):
        self.assignment = assignment
        self.order = order
        self.sequence = sequence
        self.scalars = scalars
        self.generation = _Generation()
        self.record_room = n * (r + 3) + 3  # the largest record one call can write
        self.journal = np.zeros(self.record_room + max(1 << 16, self.record_room // 4), dtype=np.int32)

    def grow(self):
        """Grow the journal (at least doubling) so that one more record fits."""
        end = int(self.scalars[_k.JOURNAL_END])
        grown = np.zeros(max(2 * self.journal.size, end + 2 * self.record_room), dtype=np.int32)
        grown[:end] = self.journal[:end]
        self.journal = grown

    def new_generation(self, count):
        """Before a recovery rewrites the failure sequence: the plans made so far keep
        ``sequence[:count]`` (``O(k)``), later ones read the live sequence."""
        self.generation.frozen = self.sequence[:count].copy()
        self.generation = _Generation()

    def failed(self, count, generation):
        sequence = self.sequence if generation.frozen is None else generation.frozen
        return np.sort(sequence[:count])

    def snapshot(self, end, failed):
        """``(assignment, order, split)`` at journal offset ``end``."""
        assignment = self.assignment.copy()
        order = self.order.copy()
        _k.undo_journal(self.journal, end, int(self.scalars[_k.JOURNAL_END]), assignment, order)
        return assignment, order, assignment[:, None].copy()


class _SplitHistory(_History):
    """Undo journal of one controller epoch at m > 1 (:mod:`spare_opt.planning._split_kernels`):
    ``split`` is the controller's live split; orders are derived from the split."""

    __slots__ = ("split", "stacks")

    def __init__(self, split, sequence, scalars, stacks):
        n, m = split.shape
        self.split = split
        self.stacks = stacks
        self.sequence = sequence
        self.scalars = scalars
        self.generation = _Generation()
        self.record_room = 2 * n * m + 3  # the largest record one call can write
        self.journal = np.zeros(self.record_room + max(1 << 16, self.record_room // 4), dtype=np.int32)

    def snapshot(self, end, failed):
        split = self.split.copy()
        _s.undo_journal(self.journal, end, int(self.scalars[_s.JOURNAL_END]), split)
        alive = np.ones(split.shape[0], dtype=bool)
        alive[failed] = False
        order = _derived_order(self.stacks, _touched_layers(self.stacks, split), alive)
        return split[:, 0].copy(), order, split


def _lazy_plan(status, stack_number, bound, lost, moves, patch, arrays, source, micro_batches, load):
    """Build a :class:`_LazyPlan` without the keyword checks of ``__init__`` (hot path of ``fail``).

    ``arrays`` is ``_LAZY`` (materialise ``assignment``, ``order`` and ``split`` from
    ``source``) or ``None`` (wipe-out); ``source`` is ``(history, journal_end,
    failed_count, generation)``.
    """
    plan = _new_plan(_LazyPlan)
    plan.__dict__ = {
        "status": status, "stack_number": stack_number, "lower_bound": bound, "_failed": _LAZY,
        "lost_shards": lost, "_assignment": arrays, "_order": arrays, "moves": moves, "patch": patch,
        "micro_batches": micro_batches, "load": load,
        "step_cost": None if load is None else load / micro_batches, "_split": arrays,
        "_source": source,
    }
    return plan


_new_plan = object.__new__


class _LazyPlan(Plan):
    """A :class:`Plan` whose ``failed``, ``assignment``, ``order`` and ``split`` are built on first access.

    Behaves as a Plan in every respect (``isinstance``, attributes, ``to_dict``, ``==``,
    ``dataclasses.replace``); the values are those at the time of the call that made it.
    Pickling or copying yields a plain, fully materialised :class:`Plan`.
    """

    def __repr__(self):
        return "Plan" + Plan.__repr__(self)[len(type(self).__qualname__):]

    def __reduce__(self):
        return (Plan, (self.status, self.stack_number, self.lower_bound, self.failed, self.lost_shards,
                       self.assignment, self.order, self.moves, self.patch, self.micro_batches, self.load,
                       self.step_cost, self.split))

    def __init__(self, status, stack_number, lower_bound, failed, lost_shards=_EMPTY, assignment=None,
                 order=None, moves=0, patch=None, micro_batches=1, load=None, step_cost=None, split=None):
        self.status = status
        self.stack_number = stack_number
        self.lower_bound = lower_bound
        self._failed = failed
        self.lost_shards = lost_shards
        self._assignment = assignment
        self._order = order
        self.moves = moves
        self.patch = {} if patch is None else patch
        self.micro_batches = micro_batches
        self.load = load
        self.step_cost = step_cost
        self._split = split
        self._source = None
        Plan.__post_init__(self)

    def _materialise_arrays(self):
        history, journal_end, _, _ = self._source
        assignment, order, split = history.snapshot(journal_end, self.failed)
        if self._assignment is _LAZY:
            self._assignment = assignment
        if self._order is _LAZY:
            self._order = order
        if self._split is _LAZY:
            self._split = split

    @property
    def failed(self):
        if self._failed is _LAZY:
            history, _, count, generation = self._source
            self._failed = history.failed(count, generation)
        return self._failed

    @failed.setter
    def failed(self, value):
        self._failed = value

    @property
    def assignment(self):
        if self._assignment is _LAZY:
            self._materialise_arrays()
        return self._assignment

    @assignment.setter
    def assignment(self, value):
        self._assignment = value

    @property
    def order(self):
        if self._order is _LAZY:
            touched = self.__dict__.pop("_touched", None)
            if touched is not None:  # set_failed at m > 1: (touched, alive, stacks) of the plan
                self._order = _derived_order(touched[2], touched[0], touched[1])
            else:
                self._materialise_arrays()
        return self._order

    @order.setter
    def order(self, value):
        self._order = value

    @property
    def split(self):
        if self._split is _LAZY:
            self._materialise_arrays()
        return self._split

    @split.setter
    def split(self, value):
        self._split = value

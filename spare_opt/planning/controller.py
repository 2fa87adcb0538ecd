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
:func:`load_trajectory` and :func:`load_trajectories` (:mod:`spare_opt.planning.trajectories`,
also importable from here) run whole failure sequences inside one compiled loop, for
Monte-Carlo and time-to-train simulation.  The packed states, undo journals and lazy plans
are in :mod:`spare_opt.planning._controller_state`.

Importing this module compiles nothing: the kernels compile (or load from numba's
on-disk cache) on their first call.
"""

import numpy as np

from . import _kernels as _k
from . import _split_kernels as _s
from ._controller_state import (_EMPTY, _LAZY, _History, _SplitHistory, _fault_free_split_state, _fault_free_state,
                                _holder_table, _lazy_plan, _load_state_dict, _read_only, _state_dict)
from ._controller_state import _patch_work  # noqa: F401  (imported from here by spare_opt.planning.agreement)
from .._core import validation as check
from .._core.errors import FailureSetError
from .failure_sets import check_failed_set, normalise_groups
from .plan import MASKED, WIPE_OUT, _derived_order, check_micro_batches, lower_bound
from ..layouts.layout import check_layout, recommended_micro_batches
from .exact import plan_reorder
# Re-exported: the trajectories were defined here, and are still imported from here.
from .trajectories import (_trajectories, _trajectory_state, load_trajectories, load_trajectory,  # noqa: F401
                           stack_number_trajectories, stack_number_trajectory)

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
        return _state_dict(self)

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
        _load_state_dict(self, state)

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

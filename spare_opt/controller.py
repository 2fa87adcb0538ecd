"""Online reorder controller: the least stack number after each failure, in microseconds.

:class:`ReorderController` keeps the state of a running job (live groups, the stack
number ``S``, which live group contributes each shard type, every group's compute order)
and updates it incrementally when groups fail, with numba kernels over flat arrays
(:mod:`spare_opt._controller_kernels`).  It returns the same :class:`~spare_opt.plan.Plan`
as the exact planner :func:`spare_opt.plan_reorder` with the same status and stack
number; its number of moves is not guaranteed minimal (see ``docs/benchmarks.md`` for the
measured ratio to the min-cost-flow optimum).

:func:`stack_number_trajectory` and :func:`stack_number_trajectories` run whole failure
sequences inside one compiled loop, for Monte-Carlo and time-to-train simulation.

Importing this module compiles nothing: the kernels compile (or load from numba's
on-disk cache) on their first call.
"""

import numpy as np

from . import _controller_kernels as _k
from . import _validation as check
from .errors import FailureSetError
from .failure_sets import normalise_groups
from .plan import MASKED, WIPE_OUT, Plan
from .layout import check_layout

__all__ = ["ReorderController", "stack_number_trajectory", "stack_number_trajectories"]


class ReorderController:
    """Stateful online reorder controller of a SPARe job (the paper's ReCtlr).

    Starts fault-free: every group live and computing its layout order, ``S = 1``, shard
    type ``stacks[g, 0]`` contributed by group ``g``.

    Parameters
    ----------
    layout : Layout
        The stack layout, ``N`` groups with redundancy ``r``.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a :class:`~spare_opt.layout.Layout`.

    See Also
    --------
    spare_opt.plan_reorder : the exact planner (maximum-flow checks and min-cost flow).
    stack_number_trajectory : the stack numbers of a whole failure sequence in one call.

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

    **Plans are lazy.**  Copying the ``(N, r)`` order on every failure would cost about
    1 ms at ``N = 100,000``; the returned plan materialises ``failed``, ``assignment``
    and ``order`` on first access from the controller's arrays and an undo journal of
    the later failures, so the cost of :meth:`fail` does not grow with ``N``.

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
    """

    def __init__(self, layout):
        self._layout = check_layout(layout)
        self._tables = None
        self._single = np.zeros(1, dtype=np.int32)
        self.restart()

    # ------------------------------------------------------------------ state
    def restart(self):
        """Global restart after a wipe-out: all groups live, ``S = 1``, layout order.

        Fresh arrays are allocated so that plans returned before the restart keep
        their values.
        """
        n, r = self._layout.stacks.shape
        if self._tables is None:
            holders = _holder_table(self._layout)
        else:  # the holder tables never change: copy them from the previous state
            holders = self._tables[_k.TABLE_HOLDER_GROUPS], self._tables[_k.TABLE_HOLDER_LAYERS]
        self._tables, self._rows, self._scalars = _fault_free_state(self._layout.stacks, *holders)
        self._stacks = self._tables[_k.TABLE_STACKS]
        self._order = self._tables[_k.TABLE_ORDER]
        self._alive = self._rows[_k.GROUP_STATE_START + _k.ALIVE]
        self._assigned = self._rows[_k.SHARD_STATE_START + _k.ASSIGNED]
        self._scratch = self._rows[_k.SCRATCH_START:]
        self._wiped = False
        self._history = _History(self._assigned, self._order, self._rows[_k.GROUP_STATE_START + _k.SEQUENCE],
                                 self._scalars, n, r)

    @property
    def layout(self):
        """Layout: the layout this controller plans for."""
        return self._layout

    @property
    def stack_number(self):
        """int or None: the current all-reduce stack number ``S*`` (``None`` after a wipe-out)."""
        return None if self._wiped else int(self._scalars[_k.STACK])

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
        return self._history.failed(int(self._scalars[_k.FAILED_COUNT]))

    @property
    def assignment(self):
        """numpy.ndarray of int32, shape (N,) or None: read-only view of the live group
        contributing each shard type (``None`` after a wipe-out).  It changes with the next
        :meth:`fail`; copy it to keep it."""
        return None if self._wiped else _read_only(self._assigned)

    @property
    def order(self):
        """numpy.ndarray of int32, shape (N, r) or None: read-only view of every group's
        compute order, ``-1`` rows for failed groups (``None`` after a wipe-out).  It changes
        with the next :meth:`fail`; copy it to keep it."""
        return None if self._wiped else _read_only(self._order)

    def __repr__(self):
        return (
            f"ReorderController(groups={self._stacks.shape[0]}, redundancy={self._stacks.shape[1]}, "
            f"failed={int(self._scalars[_k.FAILED_COUNT])}, stack_number={self.stack_number})"
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
            all-reduce: the plan's ``patch`` lists, per live group, the shard types it
            must compute now because only the failed groups had them in their top ``S``
            layers.

        Returns
        -------
        Plan
            ``status``; ``stack_number`` (``S*``, ``None`` on a wipe-out);
            ``lower_bound`` ``c(k)``; ``failed`` (all groups failed since the last
            restart, sorted); ``lost_shards``; ``assignment`` (N,) and ``order`` (N, r)
            int32 (``None`` on a wipe-out); ``moves``, counted against the order before
            this call; ``patch``.  ``failed``, ``assignment`` and ``order`` are
            materialised on first access and keep their values after later calls.

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
        history = self._history
        while True:
            status, stack_number, failed_count, moves, lost_count, patch_count, journal_end = _k.fail_packed(
                self._tables, self._rows, self._scalars, failing, bool(mid_step), history.journal
            )
            if status != _k.STATUS_JOURNAL_FULL:
                break
            history.grow()
        if status == _k.STATUS_ALREADY_FAILED:
            raise FailureSetError(f"group {lost_count} has failed already (call restart() to revive failed groups)")
        bound = -(-n // (n - failed_count)) if failed_count < n else None  # c(k), as plan.lower_bound
        if status == _k.STATUS_WIPE_OUT:
            self._wiped = True
            lost = np.unique(self._scratch[_k.LOST, :lost_count])
            return _lazy_plan(WIPE_OUT, None, bound, lost, 0, {}, None, (history, None, failed_count))
        patch = {}
        if patch_count:
            types = np.sort(self._scratch[_k.PATCH, :patch_count])
            owners = self._assigned[types]
            for owner, shard in zip(owners.tolist(), types.tolist()):
                patch.setdefault(owner, []).append(shard)
        source = (history, journal_end, failed_count)
        return _lazy_plan(MASKED, stack_number, bound, _EMPTY, moves, patch, _LAZY, source)


def stack_number_trajectory(layout, failure_order, *, return_moves=False):
    """Stack numbers along one failure sequence, computed in one compiled loop.

    Groups fail one at a time in the given order from a fault-free start; the
    controller's algorithm (:class:`ReorderController`) runs without a Python call per
    failure.

    Parameters
    ----------
    layout : Layout
    failure_order : array_like of int, shape (K,)
        Distinct group ids in ``[0, N)``, in failure order.
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
        ``layout`` is not a Layout, or ``return_moves`` is not a bool.
    FailureSetError
        ``failure_order`` is not a 1-D sequence of distinct group ids in range.
    """
    state = _TrajectoryState(layout)
    return_moves = check.flag("return_moves", return_moves)
    orders = _check_failure_orders(failure_order, layout.groups, ndim=1)[None, :]
    stack_numbers, wipe_out_index, moves = state.run(orders)
    length = orders.shape[1] + 1 if wipe_out_index[0] < 0 else int(wipe_out_index[0])
    result = stack_numbers[0, :length].copy(), int(wipe_out_index[0])
    if return_moves:
        return result + (moves[0, :length - 1].copy(),)
    return result


def stack_number_trajectories(layout, failure_orders):
    """Stack numbers of many failure sequences (Monte-Carlo trials) in one compiled call.

    Parameters
    ----------
    layout : Layout
    failure_orders : array_like of int, shape (T, K)
        Row ``i`` is trial ``i``: distinct group ids in failure order.

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
        ``layout`` is not a Layout.
    FailureSetError
        ``failure_orders`` is not 2-D or a row is not a sequence of distinct group ids.
    """
    state = _TrajectoryState(layout)
    orders = _check_failure_orders(failure_orders, layout.groups, ndim=2)
    return state.run(orders)


# ---------------------------------------------------------------- helpers
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
    stacks = layout.stacks
    n, r = stacks.shape
    holder_groups = np.empty((n, r), dtype=np.int32)
    groups = np.arange(n, dtype=np.int32)
    for layer in range(r):
        holder_groups[stacks[:, layer], layer] = groups
    # Sorted by group id: the tie-break order of the greedy placement and of the search.
    by_group = np.argsort(holder_groups, axis=1, kind="stable").astype(np.int32)
    return np.take_along_axis(holder_groups, by_group, axis=1), by_group


def _fault_free_state(stacks, holder_groups, holder_layers):
    """Packed fault-free state ``(tables, rows, scalars)`` of :func:`spare_opt._controller_kernels.fail_packed`."""
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


class _TrajectoryState:
    """Controller arrays for the compiled sequence kernels (no journal kept)."""

    def __init__(self, layout):
        check_layout(layout)
        self.tables, self.rows, self.scalars = _fault_free_state(layout.stacks, *_holder_table(layout))

    def run(self, orders):
        trials, length = orders.shape
        stack_numbers = np.full((trials, length + 1), -1, dtype=np.int32)
        moves = np.full((trials, length), -1, dtype=np.int32)
        wipe_out_index = np.full(trials, -1, dtype=np.int64)
        _k.run_trajectories(self.tables, self.rows, self.scalars, orders, stack_numbers, moves, wipe_out_index)
        return stack_numbers, wipe_out_index, moves


class _History:
    """Undo journal of one controller epoch (between restarts).

    ``assignment``, ``order``, ``sequence`` and ``scalars`` are the controller's live
    arrays; ``journal[:scalars[JOURNAL_END]]`` holds one undo record per masked call
    (:mod:`spare_opt._controller_kernels`), so the state at journal offset ``end`` is
    the live state with the records after ``end`` undone, newest first.
    """

    __slots__ = ("assignment", "order", "sequence", "scalars", "journal", "record_room")

    def __init__(self, assignment, order, sequence, scalars, n, r):
        self.assignment = assignment
        self.order = order
        self.sequence = sequence
        self.scalars = scalars
        self.record_room = n * (r + 3) + 3  # the largest record one call can write
        self.journal = np.zeros(self.record_room + max(1 << 16, self.record_room // 4), dtype=np.int32)

    def grow(self):
        """Grow the journal (at least doubling) so that one more record fits."""
        end = int(self.scalars[_k.JOURNAL_END])
        grown = np.zeros(max(2 * self.journal.size, end + 2 * self.record_room), dtype=np.int32)
        grown[:end] = self.journal[:end]
        self.journal = grown

    def failed(self, count):
        return np.sort(self.sequence[:count])

    def snapshot(self, end):
        assignment = self.assignment.copy()
        order = self.order.copy()
        _k.undo_journal(self.journal, end, int(self.scalars[_k.JOURNAL_END]), assignment, order)
        return assignment, order


def _lazy_plan(status, stack_number, bound, lost, moves, patch, arrays, source):
    """Build a :class:`_LazyPlan` without the keyword checks of ``__init__`` (hot path of ``fail``).

    ``arrays`` is ``_LAZY`` (materialise ``assignment`` and ``order`` from ``source``) or
    ``None`` (wipe-out); ``source`` is ``(history, journal_end, failed_count)``.
    """
    plan = _new_plan(_LazyPlan)
    plan.__dict__ = {
        "status": status, "stack_number": stack_number, "lower_bound": bound, "_failed": _LAZY,
        "lost_shards": lost, "_assignment": arrays, "_order": arrays, "moves": moves, "patch": patch,
        "_source": source,
    }
    return plan


_new_plan = object.__new__


class _LazyPlan(Plan):
    """A :class:`Plan` whose ``failed``, ``assignment`` and ``order`` are built on first access.

    Behaves as a Plan in every respect (``isinstance``, attributes, ``to_dict``, ``==``,
    ``dataclasses.replace``); the values are those at the time of the call that made it.
    Pickling or copying yields a plain, fully materialised :class:`Plan`.
    """

    def __repr__(self):
        return "Plan" + Plan.__repr__(self)[len(type(self).__qualname__):]

    def __reduce__(self):
        return (Plan, (self.status, self.stack_number, self.lower_bound, self.failed, self.lost_shards,
                       self.assignment, self.order, self.moves, self.patch))

    def __init__(self, status, stack_number, lower_bound, failed, lost_shards=_EMPTY, assignment=None,
                 order=None, moves=0, patch=None):
        self.status = status
        self.stack_number = stack_number
        self.lower_bound = lower_bound
        self._failed = failed
        self.lost_shards = lost_shards
        self._assignment = assignment
        self._order = order
        self.moves = moves
        self.patch = {} if patch is None else patch
        self._source = None

    def _materialise_arrays(self):
        history, journal_end, _ = self._source
        assignment, order = history.snapshot(journal_end)
        if self._assignment is _LAZY:
            self._assignment = assignment
        if self._order is _LAZY:
            self._order = order

    @property
    def failed(self):
        if self._failed is _LAZY:
            history, _, count = self._source
            self._failed = history.failed(count)
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
            self._materialise_arrays()
        return self._order

    @order.setter
    def order(self, value):
        self._order = value

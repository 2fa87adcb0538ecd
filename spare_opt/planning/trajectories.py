"""Stack numbers and loads along whole failure sequences, in one compiled loop.

:func:`stack_number_trajectory`, :func:`stack_number_trajectories`,
:func:`load_trajectory` and :func:`load_trajectories` run the algorithm of the online
controller (:class:`~spare_opt.planning.controller.ReorderController`) over whole failure
sequences from a fault-free start, without a Python call per failure, for Monte-Carlo and
time-to-train simulation.  They are also importable from
:mod:`spare_opt.planning.controller`.

Importing this module compiles nothing: the kernels compile (or load from numba's
on-disk cache) on their first call.
"""

import numpy as np

from . import _kernels as _k
from . import _split_kernels as _s
from ._controller_state import _fault_free_state, _holder_table
from .._core import validation as check
from .._core.errors import FailureSetError
from .plan import check_micro_batches
from ..layouts.layout import check_layout

__all__ = [
    "stack_number_trajectory",
    "stack_number_trajectories",
    "load_trajectory",
    "load_trajectories",
]


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

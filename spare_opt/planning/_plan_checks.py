"""The array rules of a valid plan that need no :class:`~spare_opt.planning.plan.Plan` class.

:func:`~spare_opt.planning.plan.check_plan` checks a plan's fields and status and hands a
masked plan to :func:`_check_masked_plan` here; the helpers that map a ``split`` to the
layers of the layout (:func:`_split_layers`, :func:`_touched_layers`,
:func:`_derived_order`) are shared with the planners (``exact.py``, ``controller.py``),
which import them through ``plan.py``.  This module imports nothing of ``plan.py``, so
that ``plan.py`` can import it without a cycle.
"""

import numpy as np

from .._core.errors import PlanError


def _check_masked_plan(layout, plan, alive, bound, previous_order=None, previous_split=None):
    """The checks of :func:`~spare_opt.planning.plan.check_plan` on a masked plan, in its
    order, after its fields' types, ``lost_shards``, ``lower_bound`` and the status:
    ``S*``, ``assignment``, ``split``, ``load`` (at least ``bound = ceil(m N / (N - k))``),
    ``step_cost``, ``order``, ``moves`` and ``patch``.  ``alive`` is the bool ``(N,)`` mask
    of live groups.  Raises :class:`PlanError` naming the first violation."""
    n, r = layout.stacks.shape
    m = plan.micro_batches
    s = plan.stack_number
    _require(s is not None and plan.lower_bound <= s <= r, f"S* = {s} is outside [c(k), r] = [{plan.lower_bound}, {r}]")
    _require(plan.assignment is not None, "a masked plan must have an assignment")
    assignment = _int_array(plan.assignment, "assignment", 1)
    _require(assignment.shape == (n,), f"assignment has shape {assignment.shape}, expected ({n},)")
    _require(assignment.min() >= 0 and assignment.max() < n, "assignment names a group outside [0, N)")
    _require(np.all(alive[assignment]), f"shard type {int(np.argmin(alive[assignment]))} is assigned to a failed group")
    split, layer = _check_split(layout, plan.split, alive, m)
    _require(np.array_equal(assignment, split[:, 0]), "assignment differs from split[:, 0]")
    load = np.bincount(split.ravel(), minlength=n)
    _require(plan.load is not None and load.max() == plan.load,
             f"load is {plan.load} but group {int(load.argmax())} computes {int(load.max())} micro-batches")
    _require(plan.load >= bound, f"load {plan.load} is below the bound ceil(m N / (N - k)) = {bound}")
    _require(plan.step_cost == plan.load / m, f"step_cost is {plan.step_cost}, not load / m = {plan.load / m}")
    touched = _touched_layers(layout.stacks, split, layer)  # (N, r): group g computes part of stacks[g, l]
    if m == 1:
        _require(plan.load == s, f"load is {plan.load} but S* is {s} at m = 1")
    else:
        widest = int(touched[alive].sum(axis=1).max())
        _require(s == widest, f"stack_number is {s} but a live group computes part of {widest} shard types")
    _require(plan.order is not None, "a masked plan must have an order")
    order = _int_array(plan.order, "order", 2)
    _require(order.shape == (n, r), f"order has shape {order.shape}, expected {(n, r)}")
    _require(np.all(order[~alive] == -1), "failed groups must have order rows of -1")
    live_rows = np.flatnonzero(alive)
    same = np.all(np.sort(order[live_rows], axis=1) == np.sort(layout.stacks[live_rows], axis=1), axis=1)
    _require(same.all(), f"order row of group {int(live_rows[np.argmin(same)]) if same.size else -1} "
                         "is not a permutation of its stack")
    in_top = np.zeros((n, r), dtype=bool)  # in_top[g, l]: stacks[g, l] is in g's top S* of order
    for p in range(s):
        in_top |= order[:, p:p + 1] == layout.stacks
    outside = touched & ~in_top
    _require(not outside.any(), f"shard type {int(layout.stacks[outside][0]) if outside.any() else -1} is "
                                "outside the top S* of a group computing it")
    if m == 1 and previous_order is not None:
        prev_top = np.asarray(previous_order)[assignment, :s]
        outside = int((~(prev_top == np.arange(n)[:, None]).any(axis=1)).sum())
        _require(plan.moves == outside, f"moves = {plan.moves} but {outside} assigned types were outside the old top S*")
    if m > 1 and previous_split is not None:
        previous = np.asarray(previous_split)
        _require(previous.shape == split.shape, f"previous_split has shape {previous.shape}, expected {split.shape}")
        changed = int((previous != split).sum())
        _require(plan.moves == changed, f"moves = {plan.moves} but {changed} micro-batches changed contributor")
    for g, items in plan.patch.items():
        _require(_is_int(g) and 0 <= g < n and alive[g], f"patch work given to group {g!r}, which is not live")
        _require(isinstance(items, (list, tuple)), f"patch work of group {g} is a {type(items).__name__}, not a list")
        _require(all(isinstance(item, (list, tuple)) and len(item) == 2 and all(map(_is_int, item))
                     for item in items),
                 f"patch work of group {g} names something other than (shard type, micro-batch) pairs")
        wrong = [(t, j) for t, j in items if not (0 <= t < n and 0 <= j < m) or split[t, j] != g]
        _require(not wrong, f"patch work {wrong[0] if wrong else -1} given to group {g}, "
                            "which does not contribute it")


def _require(condition, message):
    if not condition:
        raise PlanError(message)


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _int_array(value, name, ndim):
    """``value`` as an int64 array of ``ndim`` dimensions; :class:`PlanError` otherwise (empty lists are fine)."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):  # ragged nested lists
        raise PlanError(f"{name} is not a rectangular array") from None
    if array.ndim != ndim:
        raise PlanError(f"{name} must be a {ndim}-D array, got {array.ndim}-D")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise PlanError(f"{name} has dtype {array.dtype}, not integer")
    return array.astype(np.int64)


def _check_split(layout, split, alive, m):
    """``(split, layer)``: ``split`` as an int array after checking its shape and that every
    entry is a live holder, and the layer each entry holds its type at (:func:`_split_layers`)."""
    n = layout.groups
    _require(split is not None, "a masked plan must have a split")
    split = _int_array(split, "split", 2)
    _require(split.shape == (n, m), f"split has shape {split.shape}, expected ({n}, {m})")
    bad = (split < 0) | (split >= n)
    _require(not bad.any(), f"split names group {int(split[bad][0]) if bad.any() else -1} outside [0, {n})")
    dead = ~alive[split]
    if dead.any():
        t, j = np.argwhere(dead)[0]
        raise PlanError(f"micro-batch ({t}, {j}) is given to failed group {split[t, j]}")
    layer = _split_layers(layout.stacks, split)
    if (layer < 0).any():
        t, j = np.argwhere(layer < 0)[0]
        raise PlanError(f"micro-batch ({t}, {j}) is given to group {split[t, j]}, which does not hold shard type {t}")
    return split, layer


def _holders_by_layer(stacks):
    """int32 (N, r): entry ``[t, l]`` is the group holding shard type ``t`` at layer ``l``.

    Every layer of a layout is a permutation, so each column inverts in ``O(N)``.
    """
    n, r = stacks.shape
    holders = np.empty((n, r), dtype=np.int32)
    groups = np.arange(n, dtype=np.int32)
    for layer in range(r):
        holders[stacks[:, layer], layer] = groups
    return holders


def _split_layers(stacks, split):
    """int (N, m): entry ``[t, j]`` is the layer at which group ``split[t, j]`` holds shard
    type ``t``, or -1 where it does not hold it.  ``O(N m r)`` time and booleans."""
    match = _holders_by_layer(stacks)[:, None, :] == split[:, :, None]
    return np.where(match.any(axis=2), match.argmax(axis=2), -1)


def _touched_layers(stacks, split, layer=None):
    """bool (N, r): entry ``[g, l]`` says whether group ``g`` computes part of shard type ``stacks[g, l]``.

    ``split`` must give every micro-batch to a holder of its type; ``layer`` is its
    :func:`_split_layers` when the caller has it already.
    """
    n, r = stacks.shape
    if layer is None:
        layer = _split_layers(stacks, split)
    touched = np.zeros((n, r), dtype=bool)
    touched[split, layer] = True
    return touched


def _derived_order(stacks, touched, alive):
    """Orders at ``m > 1``: per live group the shard types it computes part of, then the
    others, each in layout order; rows of failed groups are ``-1``."""
    # A stable partition of every row in O(N r): the touched entries keep their relative
    # order at positions 0, 1, ...; the others follow (argsort of ~touched, kind="stable",
    # gives the same rows at several times the cost).
    touched = np.asarray(touched, dtype=bool)
    kept = np.cumsum(touched, axis=1, dtype=np.int32)
    rest = np.cumsum(~touched, axis=1, dtype=np.int32)
    position = np.where(touched, kept - 1, kept[:, -1:] + rest - 1)
    order = np.empty(stacks.shape, dtype=np.int32)
    np.put_along_axis(order, position, stacks, axis=1)
    order[~alive] = -1
    return order

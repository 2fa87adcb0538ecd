"""Numba kernels of :class:`spare_opt.planning.redistribution.RedistributionController` (private).

The state of a full-redistribution job (every live group may compute any micro-batch):
``N m`` micro-batches ("units", unit ``u = t m + j`` is micro-batch ``j`` of shard type
``t``), each on one live group, every live group's load in ``{q, q + 1}`` with
``q = floor(m N / live)`` and exactly ``m N - q live`` groups at ``q + 1``.  A group's
units form a singly linked list (``head``, ``next_unit``): a group gives away the unit
it received last.  ``load_count[v]`` counts the live groups of load ``v`` and
``distinct_count[d]`` those computing part of ``d`` distinct shard types, so that the
widest group (the stack number) and the groups to visit are known without a scan.

Nothing is compiled at import time (:mod:`spare_opt._core.jit`).
"""

import numpy as np

from .._core.jit import kernel

# Rows of ``units`` (int32, shape (4, N m)).
OWNER = 0  # the group computing each unit, -1 while in the pool
NEXT = 1  # the next unit of the same group's list, -1 at its end
POOL = 2  # the units taken off their groups in this call, in order
POOL_FROM = 3  # the group each pooled unit was taken from
UNIT_ROWS = 4

# Rows of ``rows`` (int32, shape (4, N)).
ALIVE = 0
HEAD = 1  # the unit the group received last, -1 without any
LOAD = 2
DISTINCT = 3  # distinct shard types the group computes part of
GROUP_ROWS = 4

# Entries of ``scalars`` (int64).
LIVE = 0  # live groups
LEVEL = 1  # q = floor(m N / live) of the current plan
WIDEST = 2  # most distinct shard types one live group computes part of
CURSOR = 3  # where the search for a group at level q starts (rotates, so the search is short)
POOL_END = 4  # units taken off their groups in this call
POOL_READ = 5  # units of the pool given to a group in this call
TAKE_CURSOR = 6  # where the search for a group at level q + 1 starts (rotates too)
SCALARS = 7


@kernel
def _views(units, rows, counts):
    """The named arrays of the packed state (views, no copy): the kernels take 4 arrays so
    that numba's dispatch of a call stays short."""
    groups = rows.shape[1]
    n_units = units.shape[1]
    return (rows[ALIVE], units[OWNER], units[NEXT], rows[HEAD], rows[LOAD], rows[DISTINCT], counts[:n_units + 2],
            counts[n_units + 2:n_units + groups + 4], units[POOL], units[POOL_FROM])


@kernel
def fault_free(micro_batches, units, rows, counts, scalars):
    """Every group computes the ``m`` micro-batches of its own shard type (layer 0 of ``(g + l) mod N``)."""
    groups = rows.shape[1]
    alive, owner, next_unit, head, load, distinct, load_count, distinct_count, pool, pool_from = \
        _views(units, rows, counts)
    alive[:] = 1
    for g in range(groups):
        head[g] = -1
        for j in range(micro_batches):
            u = g * micro_batches + j
            owner[u] = g
            next_unit[u] = head[g]
            head[g] = u
        load[g] = micro_batches
        distinct[g] = 1
    load_count[:] = 0
    distinct_count[:] = 0
    load_count[micro_batches] = groups
    distinct_count[1] = groups
    scalars[LIVE] = groups
    scalars[LEVEL] = micro_batches
    scalars[WIDEST] = 1
    scalars[CURSOR] = 0
    scalars[TAKE_CURSOR] = 0
    scalars[POOL_END] = 0
    scalars[POOL_READ] = 0


@kernel
def _holds_type(g, u, micro_batches, owner):
    """Whether group ``g`` computes a micro-batch of the shard type of unit ``u``."""
    base = (u // micro_batches) * micro_batches
    for i in range(base, base + micro_batches):
        if owner[i] == g:
            return True
    return False


@kernel
def _give(g, micro_batches, owner, next_unit, head, load, distinct, load_count, distinct_count, pool, scalars):
    """Give group ``g`` the next unit of the pool."""
    u = pool[scalars[POOL_READ]]
    scalars[POOL_READ] += 1
    new_type = not _holds_type(g, u, micro_batches, owner)
    owner[u] = g
    next_unit[u] = head[g]
    head[g] = u
    load_count[load[g]] -= 1
    load[g] += 1
    load_count[load[g]] += 1
    if new_type:
        distinct_count[distinct[g]] -= 1
        distinct[g] += 1
        distinct_count[distinct[g]] += 1
        if distinct[g] > scalars[WIDEST]:
            scalars[WIDEST] = distinct[g]


@kernel
def _take(g, micro_batches, owner, next_unit, head, load, distinct, load_count, distinct_count, pool, pool_from,
          scalars):
    """Take the unit group ``g`` received last into the pool."""
    u = head[g]
    head[g] = next_unit[u]
    owner[u] = -1
    pool[scalars[POOL_END]] = u
    pool_from[scalars[POOL_END]] = g
    scalars[POOL_END] += 1
    load_count[load[g]] -= 1
    load[g] -= 1
    load_count[load[g]] += 1
    if not _holds_type(g, u, micro_batches, owner):
        distinct_count[distinct[g]] -= 1
        distinct[g] -= 1
        distinct_count[distinct[g]] += 1


@kernel
def _balance(back, groups, micro_batches, alive, owner, next_unit, head, load, distinct, load_count,
             distinct_count, pool, pool_from, scalars):
    """Spread the pool so that every live load is ``q`` or ``q + 1``, ``m N - q live`` of them at ``q + 1``.

    Before the call the live loads are in ``{0, q0, q0 + 1}`` (0: groups just back),
    ``q0`` the previous level.  Groups above ``q + 1`` give their surplus, then groups
    at ``q + 1`` give one unit each while there are too many of them, then groups below
    ``q`` are filled to ``q``, then the rest of the pool goes one unit each to groups at
    ``q``.  The counts ``m N = q live + rem`` make the pool exactly enough.  The groups
    ``back`` (just repaired, load 0) are filled first without a search; a scan of the
    groups happens only when the level changes (a group above ``q + 1`` or an old one
    below ``q``), the searches for groups at ``q + 1`` and ``q`` rotate so that each
    passes over the groups about once per wrap.
    """
    units = groups * micro_batches
    live = scalars[LIVE]
    old = scalars[LEVEL]
    q = units // live
    rem = units - q * live
    above = 0
    for v in (old, old + 1):
        if v > q + 1:
            above += load_count[v]
    g = 0
    while above > 0 and g < groups:
        if alive[g] and load[g] > q + 1:
            while load[g] > q + 1:
                _take(g, micro_batches, owner, next_unit, head, load, distinct, load_count, distinct_count, pool,
                      pool_from, scalars)
            above -= 1
        g += 1
    excess = load_count[q + 1] - rem
    g = scalars[TAKE_CURSOR]
    idle = 0
    while excess > 0 and idle <= groups:
        if alive[g] and load[g] == q + 1:
            _take(g, micro_batches, owner, next_unit, head, load, distinct, load_count, distinct_count, pool,
                  pool_from, scalars)
            excess -= 1
            idle = 0
        else:
            idle += 1
        g += 1
        if g == groups:
            g = 0
    scalars[TAKE_CURSOR] = g
    below = load_count[0]
    for v in (old, old + 1):
        if 0 < v < q:
            below += load_count[v]
    for i in range(back.shape[0]):
        g = back[i]
        if load[g] < q:
            while load[g] < q:
                _give(g, micro_batches, owner, next_unit, head, load, distinct, load_count, distinct_count, pool,
                      scalars)
            below -= 1
    g = 0
    while below > 0 and g < groups:
        if alive[g] and load[g] < q:
            while load[g] < q:
                _give(g, micro_batches, owner, next_unit, head, load, distinct, load_count, distinct_count, pool,
                      scalars)
            below -= 1
        g += 1
    g = scalars[CURSOR]
    idle = 0  # groups passed since the last unit given: more than N is a broken state, not a loop
    while scalars[POOL_READ] < scalars[POOL_END] and idle <= groups:
        if alive[g] and load[g] == q:
            _give(g, micro_batches, owner, next_unit, head, load, distinct, load_count, distinct_count, pool, scalars)
            idle = 0
        else:
            idle += 1
        g += 1
        if g == groups:
            g = 0
    scalars[CURSOR] = g
    scalars[LEVEL] = q
    while scalars[WIDEST] > 0 and distinct_count[scalars[WIDEST]] == 0:
        scalars[WIDEST] -= 1


@kernel
def fail_groups(failing, micro_batches, units, rows, counts, scalars):
    """Fail the live groups ``failing`` and re-spread.

    Returns ``(freed, moves, live, widest, placed)``: the units freed from the failed
    groups (the pool's first), the units given to a group, the live groups, the stack
    number, and whether the pool was spread whole.  All groups failed: the units stay
    unplaced (``owner`` -1), ``live`` is 0.
    """
    groups = rows.shape[1]
    alive, owner, next_unit, head, load, distinct, load_count, distinct_count, pool, pool_from = \
        _views(units, rows, counts)
    scalars[POOL_END] = 0
    scalars[POOL_READ] = 0
    for i in range(failing.shape[0]):
        g = failing[i]
        alive[g] = 0
        load_count[load[g]] -= 1
        distinct_count[distinct[g]] -= 1
        u = head[g]
        while u >= 0:
            owner[u] = -1
            pool[scalars[POOL_END]] = u
            pool_from[scalars[POOL_END]] = g
            scalars[POOL_END] += 1
            u = next_unit[u]
        head[g] = -1
        load[g] = 0
        distinct[g] = 0
    scalars[LIVE] -= failing.shape[0]
    freed = scalars[POOL_END]
    while scalars[WIDEST] > 0 and distinct_count[scalars[WIDEST]] == 0:
        scalars[WIDEST] -= 1
    if scalars[LIVE] > 0:
        _balance(failing[:0], groups, micro_batches, alive, owner, next_unit, head, load, distinct, load_count,
                 distinct_count, pool, pool_from, scalars)
    return freed, scalars[POOL_END], scalars[LIVE], scalars[WIDEST], scalars[POOL_READ] == scalars[POOL_END]


@kernel
def recover_groups(back, micro_batches, units, rows, counts, scalars):
    """Bring the failed groups ``back`` (no work) and re-spread: they get their even share.

    Returns ``(0, moves, live, widest, placed)`` as :func:`fail_groups`.
    """
    groups = rows.shape[1]
    alive, owner, next_unit, head, load, distinct, load_count, distinct_count, pool, pool_from = \
        _views(units, rows, counts)
    scalars[POOL_END] = 0
    scalars[POOL_READ] = 0
    for i in range(back.shape[0]):
        g = back[i]
        alive[g] = 1
        head[g] = -1
        load[g] = 0
        distinct[g] = 0
        load_count[0] += 1
        distinct_count[0] += 1
    scalars[LIVE] += back.shape[0]
    _balance(back, groups, micro_batches, alive, owner, next_unit, head, load, distinct, load_count,
             distinct_count, pool, pool_from, scalars)
    return 0, scalars[POOL_END], scalars[LIVE], scalars[WIDEST], scalars[POOL_READ] == scalars[POOL_END]


def new_state(groups, micro_batches):
    """Fresh arrays of the state ``(units, rows, counts, scalars)``: ``4 N m + 4 N`` int32 and
    ``N m + N + 4`` int64 entries (``counts``: the load histogram, then the distinct-types one)."""
    n_units = groups * micro_batches
    return (np.empty((UNIT_ROWS, n_units), dtype=np.int32), np.empty((GROUP_ROWS, groups), dtype=np.int32),
            np.zeros(n_units + groups + 4, dtype=np.int64), np.zeros(SCALARS, dtype=np.int64))

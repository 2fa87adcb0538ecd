"""Numba kernels of the online controller with micro-batches, ``m > 1`` (private; see
:mod:`spare_opt.controller`).

The algorithm is that of :mod:`spare_opt._controller_kernels` (greedy placement, then
breadth-first augmenting paths, then a certified rise of the bound) on the network with
capacities in micro-batches: source -> shard type ``m``, shard type -> live holder
``m`` (never binding: a type has ``m`` micro-batches in all), live group -> sink ``L``.
The unit placed is one micro-batch.  Orders are not kept: at ``m > 1`` a plan's order
is derived from its split (:func:`spare_opt.plan._derived_order`).

Every kernel is ``nopython`` with ``cache=True`` (see :mod:`spare_opt._jit`) and takes
only NumPy arrays and scalars; nothing compiles at import time.

State, all flat arrays (``N`` groups = ``N`` shard types, redundancy ``r``, ``m``
micro-batches per type), packed to keep numba's dispatch cheap:

``tables`` (TABLES, N, r) int32
    ``STACKS`` the layout; ``HOLDER_GROUPS``, ``HOLDER_LAYERS`` row ``t``: the ``r``
    holders of shard type ``t`` (ascending group id) and the layout layer at which each
    holds it; ``COUNT`` entry ``[g, l]``: micro-batches of type ``stacks[g, l]`` that
    group ``g`` computes.
``micro`` (MICRO, N, m) int32
    ``SPLIT`` entry ``[t, j]``: the group computing micro-batch ``j`` of type ``t`` (-1
    while being placed); ``STAMP``: the call that last logged the entry; ``LOG_ENTRY``,
    ``LOG_OLD``: the change log of the current call, entry ``c`` at ``[c // m, c % m]``
    (the micro-batch ``t m + j`` and its contributor before the call).
``rows`` (ROWS, N) int32
    Per group: alive flag, load (micro-batches), number of distinct types it computes
    part of, BFS visit stamp, BFS parent (type, group, layers), the failure sequence;
    per type: live holders, call stamp; scratch: BFS queue, displaced types, lost types.
``scalars`` (SCALARS + r + 1,) int64
    The load bound ``L``, the stamp counters, the number of failed groups, the journal
    end, the log length of the current call, the largest number of distinct types a
    live group computes part of (the plan's stack number) and, from ``HISTOGRAM``, how
    many live groups compute part of ``0 .. r`` types.
``journal`` 1-D int32
    Undo log of the controller (empty: not kept).  Each masked call appends one record
    ``[c, (t m + j, old group) * c, length]``; the caller keeps room for ``2 N m + 3``
    more entries.
"""

import numpy as np

from ._jit import kernel

# Tables (N, r).
STACKS = 0
HOLDER_GROUPS = 1
HOLDER_LAYERS = 2
COUNT = 3
TABLES = 4

# Micro-batch arrays (N, m).
SPLIT = 0
STAMP = 1
LOG_ENTRY = 2
LOG_OLD = 3
MICRO = 4

# Rows (N,).
ALIVE = 0
LOAD = 1
TOUCHED = 2
VISIT = 3
PARENT_SHARD = 4
PARENT_GROUP = 5
PARENT_LAYER = 6  # layer of the visited group's row holding the parent type
PARENT_FROM_LAYER = 7  # layer of the parent group's row holding the parent type
SEQUENCE = 8
LIVE_HOLDERS = 9
TYPE_STAMP = 10
QUEUE = 11
DISPLACED = 12
LOST = 13
ROWS = 14

# Scalars.
BOUND = 0
CALL_STAMP = 1
VISIT_COUNTER = 2
FAILED_COUNT = 3
JOURNAL_END = 4
LOG_COUNT = 5
WIDEST = 6
HISTOGRAM = 7
SCALARS = 7  # plus r + 1 histogram entries

# Status codes (as in spare_opt._controller_kernels).
STATUS_MASKED = 0
STATUS_WIPE_OUT = 1
STATUS_JOURNAL_FULL = 2
STATUS_ALREADY_FAILED = 3

_STAMP_LIMIT = 1 << 30


@kernel
def _retouch(g, delta, rows, scalars):
    """Group ``g`` (live) now computes part of ``delta`` (+1 or -1) more distinct types."""
    scalars[HISTOGRAM + rows[TOUCHED, g]] -= 1
    rows[TOUCHED, g] += delta
    value = rows[TOUCHED, g]
    scalars[HISTOGRAM + value] += 1
    if value > scalars[WIDEST]:
        scalars[WIDEST] = value
    while scalars[WIDEST] > 0 and scalars[HISTOGRAM + scalars[WIDEST]] == 0:
        scalars[WIDEST] -= 1


@kernel
def _add_units(g, layer, delta, count, rows, scalars):
    """Add ``delta`` micro-batches of type ``stacks[g, layer]`` to group ``g``'s count."""
    old = count[g, layer]
    count[g, layer] = old + delta
    if old == 0 and delta > 0:
        _retouch(g, 1, rows, scalars)
    elif old + delta == 0 and old > 0:
        _retouch(g, -1, rows, scalars)


@kernel
def _log(t, j, micro, scalars, stamp):
    """Record micro-batch ``(t, j)`` and its contributor the first time this call changes it."""
    if micro[STAMP, t, j] != stamp:
        m = micro.shape[2]
        micro[STAMP, t, j] = stamp
        c = scalars[LOG_COUNT]
        micro[LOG_ENTRY, c // m, c % m] = t * m + j
        micro[LOG_OLD, c // m, c % m] = micro[SPLIT, t, j]
        scalars[LOG_COUNT] = c + 1


@kernel
def _place_greedy(t, j, tables, micro, rows, scalars, bound):
    """Give micro-batch ``(t, j)`` to the least loaded live holder of ``t`` with load below
    ``bound`` (ties: one already computing part of ``t``, then the lowest group id).
    Return False when every live holder is full."""
    count = tables[COUNT]
    r = tables.shape[2]
    best = -1
    best_layer = -1
    best_key = 1 << 62
    for i in range(r):
        g = tables[HOLDER_GROUPS, t, i]
        if rows[ALIVE, g] == 0 or rows[LOAD, g] >= bound:
            continue
        layer = tables[HOLDER_LAYERS, t, i]
        key = 2 * np.int64(rows[LOAD, g])
        if count[g, layer] == 0:
            key += 1
        if key < best_key:
            best_key = key
            best = g
            best_layer = layer
    if best < 0:
        return False
    micro[SPLIT, t, j] = best
    _add_units(best, best_layer, 1, count, rows, scalars)
    rows[LOAD, best] += 1
    return True


@kernel
def _pick_entry(u, g, micro, stamp):
    """A micro-batch index of type ``u`` computed by ``g``: one already changed by this call
    if any (moving it again adds no move), else the first."""
    m = micro.shape[2]
    first = -1
    for jj in range(m):
        if micro[SPLIT, u, jj] == g:
            if micro[STAMP, u, jj] == stamp:
                return jj
            if first < 0:
                first = jj
    return first


@kernel
def _place_augmenting(t, j, tables, micro, rows, scalars, bound, stamp):
    """Breadth-first search for an augmenting path ``t -> g1 -u1-> g2 -u2-> ... -> gk`` in the
    residual graph (``g1`` holds ``t``; ``g_i`` computes part of ``u_i`` and ``g_{i+1}``
    holds it; ``gk`` has load below ``bound``), then shift one micro-batch along every arc:
    ``(t, j)`` goes to ``g1`` and one micro-batch of ``u_i`` from ``g_i`` to ``g_{i+1}``.
    The shortest path is found, so the fewest micro-batches change contributor.  Return
    False when no group with room is reachable: the reached types then violate Hall's
    condition for capacity ``bound`` (``spare_opt.controller``)."""
    stacks = tables[STACKS]
    holder_groups = tables[HOLDER_GROUPS]
    holder_layers = tables[HOLDER_LAYERS]
    count = tables[COUNT]
    alive = rows[ALIVE]
    load = rows[LOAD]
    visit = rows[VISIT]
    queue = rows[QUEUE]
    r = stacks.shape[1]
    if scalars[VISIT_COUNTER] >= _STAMP_LIMIT:
        visit[:] = 0
        scalars[VISIT_COUNTER] = 0
    scalars[VISIT_COUNTER] += 1
    mark = np.int32(scalars[VISIT_COUNTER])
    tail = 0
    for i in range(r):
        g = holder_groups[t, i]
        if alive[g] != 0:
            visit[g] = mark
            rows[PARENT_SHARD, g] = t
            rows[PARENT_GROUP, g] = -1
            rows[PARENT_LAYER, g] = holder_layers[t, i]
            queue[tail] = g
            tail += 1
    head = 0
    found = -1
    while head < tail and found < 0:
        g = queue[head]
        head += 1
        for layer in range(r):
            if count[g, layer] == 0:
                continue
            u = stacks[g, layer]
            for i in range(r):
                h = holder_groups[u, i]
                if alive[h] == 0 or visit[h] == mark:
                    continue
                visit[h] = mark
                rows[PARENT_SHARD, h] = u
                rows[PARENT_GROUP, h] = g
                rows[PARENT_LAYER, h] = holder_layers[u, i]
                rows[PARENT_FROM_LAYER, h] = layer
                if load[h] < bound:
                    found = h
                    break
                queue[tail] = h
                tail += 1
            if found >= 0:
                break
    if found < 0:
        return False
    load[found] += 1
    h = found
    while True:
        u = rows[PARENT_SHARD, h]
        g = rows[PARENT_GROUP, h]
        if g < 0:
            micro[SPLIT, t, j] = h
            _add_units(h, rows[PARENT_LAYER, h], 1, count, rows, scalars)
            break
        jj = _pick_entry(u, g, micro, stamp)
        _log(u, jj, micro, scalars, stamp)
        micro[SPLIT, u, jj] = h
        _add_units(g, rows[PARENT_FROM_LAYER, h], -1, count, rows, scalars)
        _add_units(h, rows[PARENT_LAYER, h], 1, count, rows, scalars)
        h = g
    return True


@kernel
def fail_split(tables, micro, rows, scalars, failing, mid_step, journal):
    """Apply the failure of the live groups ``failing`` (int32 array) and re-plan.

    Returns ``(status, load, stack_number, failed_count, moves, lost_count, patch_count,
    journal_end)``.  ``STATUS_JOURNAL_FULL``: the journal has less room than one record
    may need; ``STATUS_ALREADY_FAILED``: group ``lost_count`` is not live; in both cases
    nothing was changed.  On a wipe-out only the alive flags, the failure sequence and
    the live-holder counts change (the controller must be reset); ``rows[LOST,
    :lost_count]`` holds the lost types.  Otherwise ``micro[SPLIT]`` is the new plan;
    the first ``patch_count`` log entries (only with ``mid_step``) are the micro-batches
    the failed groups computed, to be patched by their new contributors.
    """
    stacks = tables[STACKS]
    count = tables[COUNT]
    n, r = stacks.shape
    m = micro.shape[2]
    if journal.size > 0 and journal.size - scalars[JOURNAL_END] < 2 * n * m + 3:
        return STATUS_JOURNAL_FULL, 0, 0, 0, 0, 0, 0, scalars[JOURNAL_END]
    alive = rows[ALIVE]
    for i in range(failing.size):
        if alive[failing[i]] == 0:
            return STATUS_ALREADY_FAILED, 0, 0, 0, 0, np.int64(failing[i]), 0, scalars[JOURNAL_END]
    failed_count = scalars[FAILED_COUNT]
    for i in range(failing.size):
        alive[failing[i]] = 0
        rows[SEQUENCE, failed_count + i] = failing[i]
    failed_count += failing.size
    scalars[FAILED_COUNT] = failed_count
    lost_count = 0
    for i in range(failing.size):
        f = failing[i]
        for layer in range(r):
            t = stacks[f, layer]
            rows[LIVE_HOLDERS, t] -= 1
            if rows[LIVE_HOLDERS, t] == 0:
                rows[LOST, lost_count] = t
                lost_count += 1
    if lost_count > 0:
        return STATUS_WIPE_OUT, 0, 0, failed_count, 0, lost_count, 0, scalars[JOURNAL_END]

    if scalars[CALL_STAMP] >= _STAMP_LIMIT:
        micro[STAMP, :, :] = 0
        rows[TYPE_STAMP, :] = 0
        scalars[CALL_STAMP] = 0
    scalars[CALL_STAMP] += 1
    stamp = np.int32(scalars[CALL_STAMP])
    scalars[LOG_COUNT] = 0
    displaced_count = 0
    for i in range(failing.size):
        f = failing[i]
        for layer in range(r):
            if count[f, layer] == 0:
                continue
            t = stacks[f, layer]
            for j in range(m):
                if micro[SPLIT, t, j] == f:
                    _log(t, j, micro, scalars, stamp)
                    micro[SPLIT, t, j] = -1
            count[f, layer] = 0
            if rows[TYPE_STAMP, t] != stamp:
                rows[TYPE_STAMP, t] = stamp
                rows[DISPLACED, displaced_count] = t
                displaced_count += 1
        # A failed group leaves the histogram of live groups.
        scalars[HISTOGRAM + rows[TOUCHED, f]] -= 1
        rows[TOUCHED, f] = 0
        rows[LOAD, f] = 0
        while scalars[WIDEST] > 0 and scalars[HISTOGRAM + scalars[WIDEST]] == 0:
            scalars[WIDEST] -= 1
    patch_count = scalars[LOG_COUNT] if mid_step else 0

    # L* >= ceil(m N / (N - k)) (Hall's condition for all types): jump there at once.
    bound = scalars[BOUND]
    lowest = (m * n + (n - failed_count) - 1) // (n - failed_count)
    if lowest > bound:
        bound = lowest
    for d in range(displaced_count):
        t = rows[DISPLACED, d]
        for j in range(m):
            if micro[SPLIT, t, j] != -1:
                continue
            while True:
                if _place_greedy(t, j, tables, micro, rows, scalars, bound):
                    break
                if _place_augmenting(t, j, tables, micro, rows, scalars, bound, stamp):
                    break
                # No augmenting path: Hall's condition fails for capacity L, so L* > L.
                bound += 1
    scalars[BOUND] = bound

    moves = 0
    for c in range(scalars[LOG_COUNT]):
        entry = micro[LOG_ENTRY, c // m, c % m]
        if micro[SPLIT, entry // m, entry % m] != micro[LOG_OLD, c // m, c % m]:
            moves += 1
    if journal.size > 0:
        _write_journal(journal, micro, scalars)
    return STATUS_MASKED, bound, scalars[WIDEST], failed_count, moves, 0, patch_count, scalars[JOURNAL_END]


@kernel
def _write_journal(journal, micro, scalars):
    """Append the undo record of one call (see the module docstring)."""
    m = micro.shape[2]
    start = scalars[JOURNAL_END]
    logged = scalars[LOG_COUNT]
    journal[start] = logged
    at = start + 1
    for c in range(logged):
        journal[at] = micro[LOG_ENTRY, c // m, c % m]
        journal[at + 1] = micro[LOG_OLD, c // m, c % m]
        at += 2
    journal[at] = at + 1 - start
    scalars[JOURNAL_END] = at + 1


@kernel
def undo_journal(journal, stop, end, split):
    """Undo the records in ``journal[stop:end]`` on ``split`` (N, m), newest first."""
    m = split.shape[1]
    while end > stop:
        start = end - journal[end - 1]
        logged = journal[start]
        at = start + 1
        for c in range(logged):
            entry = journal[at]
            split[entry // m, entry % m] = journal[at + 1]
            at += 2
        end = start


@kernel
def reset_state(tables, micro, rows, scalars):
    """Fault-free state: every group live and computing all ``m`` micro-batches of its
    layer-0 type, ``L = m``."""
    stacks = tables[STACKS]
    count = tables[COUNT]
    n, r = stacks.shape
    m = micro.shape[2]
    for g in range(n):
        for layer in range(r):
            count[g, layer] = 0
        count[g, 0] = m
        t = stacks[g, 0]
        for j in range(m):
            micro[SPLIT, t, j] = g
        rows[ALIVE, g] = 1
        rows[LOAD, g] = m
        rows[TOUCHED, g] = 1
        rows[LIVE_HOLDERS, g] = r
    for value in range(r + 1):
        scalars[HISTOGRAM + value] = 0
    scalars[HISTOGRAM + 1] = n
    scalars[WIDEST] = 1
    scalars[BOUND] = m
    scalars[FAILED_COUNT] = 0


@kernel
def run_trajectories(tables, micro, rows, scalars, failure_orders, loads, stack_numbers, moves, wipe_out_index):
    """Run every row of ``failure_orders`` (T, K) from a fault-free state, one group at a time.

    Fills ``loads`` and ``stack_numbers`` (T, K + 1), ``moves`` (T, K) and
    ``wipe_out_index`` (T,) (the 1-based index of the failure that wipes out, or -1);
    entries past the end of a trial are left as given (the caller pre-fills -1).
    """
    single = np.empty(1, dtype=np.int32)
    no_journal = np.empty(0, dtype=np.int32)
    for trial in range(failure_orders.shape[0]):
        reset_state(tables, micro, rows, scalars)
        loads[trial, 0] = scalars[BOUND]
        stack_numbers[trial, 0] = scalars[WIDEST]
        for k in range(failure_orders.shape[1]):
            single[0] = failure_orders[trial, k]
            result = fail_split(tables, micro, rows, scalars, single, False, no_journal)
            if result[0] == STATUS_WIPE_OUT:
                wipe_out_index[trial] = k + 1
                break
            loads[trial, k + 1] = result[1]
            stack_numbers[trial, k + 1] = result[2]
            moves[trial, k] = result[4]

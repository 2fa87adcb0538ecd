"""Numba kernels of the online reorder controller (private; see :mod:`spare_opt.planning.controller`).

Every kernel is ``nopython`` with ``cache=True`` and takes only NumPy arrays and scalars.
Nothing here is compiled at import time: numba compiles (or loads from its cache) a
kernel on its first call.  The cache lives in ``__pycache__`` beside this file, or in
numba's user-wide cache directory when the install is read-only (``NUMBA_CACHE_DIR``
overrides both).

State of a controller, all flat arrays (``N`` groups = ``N`` shard types, redundancy ``r``):

``stacks`` (N, r) int32
    The layout, read-only.
``holder_groups``, ``holder_layers`` (N, r) int32
    Row ``t``: the ``r`` groups holding shard type ``t`` and the layout layer at which
    each holds it (the CSR of ``Layout.holders`` with constant row length ``r``).
``order`` (N, r) int32
    Current compute order of every group (shard type ids); rows of failed groups are -1.
``pos`` (N, r) int32
    ``pos[g, l]``: position in ``order[g]`` of the shard type that the layout puts at
    layer ``l`` of group ``g``; "is ``t`` in ``g``'s top ``S``" is one lookup.
``group_state`` (GROUP_ROWS, N) int32
    Per group: alive flag, load (shard types assigned), BFS visit stamp, BFS parent
    shard type and its layer, row-journal stamp and slot; row ``SEQUENCE`` lists the
    failed groups in failure order (``scalars[FAILED_COUNT]`` of them).
``shard_state`` (SHARD_ROWS, N) int32
    Per shard type: assigned group (-1 while being placed), number of live holders,
    assignment-journal stamp.
``scalars`` (SCALARS,) int64
    The stack number ``S``, the two stamp counters, the number of failed groups, the
    end of the journal and the journal lengths of the current call.
``scratch`` (SCRATCH_ROWS, N) int32 and ``saved_rows`` (N, r) int32
    Work space of one call: shard types whose assignment changed (with the old group),
    groups whose order row changed (with the old row), lost shard types, shard types
    needing patch compute.
``journal`` 1-D int32
    Undo log of the controller (empty: not kept).  Each masked call appends one record
    ``[m, q, (t, old group) * m, (g, old row...) * q, length]`` at
    ``scalars[JOURNAL_END]``; the caller keeps room for ``N (r + 3) + 3`` more entries.
"""

import numpy as np
from .._core.jit import kernel

# Rows of ``group_state``.
ALIVE = 0
LOAD = 1
VISIT = 2
PARENT_SHARD = 3
PARENT_LAYER = 4
ROW_STAMP = 5
ROW_SLOT = 6
SEQUENCE = 7
GROUP_ROWS = 8

# Rows of ``shard_state``.
ASSIGNED = 0
LIVE_HOLDERS = 1
SHARD_STAMP = 2
SHARD_ROWS = 3

# Entries of ``scalars``.
STACK = 0
CALL_STAMP = 1
VISIT_COUNTER = 2
FAILED_COUNT = 3
JOURNAL_END = 4
LOG_COUNTS = 5  # two entries: journal lengths (shard types, rows) of the current call
SCALARS = 7

# Rows of ``scratch``.
QUEUE = 0
DISPLACED = 1
LOG_SHARD = 2
LOG_OLD_GROUP = 3
LOG_ROW_GROUP = 4
LOST = 5
PATCH = 6
SCRATCH_ROWS = 7

# Status codes returned by ``fail_groups``.
STATUS_MASKED = 0
STATUS_WIPE_OUT = 1
STATUS_JOURNAL_FULL = 2
STATUS_ALREADY_FAILED = 3
STATUS_NOT_FAILED = 4  # of ``recover_groups``: a group given back is live
STATUS_LEVEL_FALL_DEFERRED = 5  # of ``recover_split``: a level fall too wide for augmenting paths, nothing changed

# Packed arguments of ``fail_packed`` (fewer arguments make numba's dispatch cheaper):
# ``tables`` (TABLES, N, r) int32 holds stacks, holder_groups, holder_layers, order, pos,
# saved_rows; ``rows`` (ROWS, N) int32 holds group_state, shard_state, scratch.
TABLE_STACKS = 0
TABLE_HOLDER_GROUPS = 1
TABLE_HOLDER_LAYERS = 2
TABLE_ORDER = 3
TABLE_POS = 4
TABLE_SAVED_ROWS = 5
TABLES = 6
GROUP_STATE_START = 0
SHARD_STATE_START = GROUP_ROWS
SCRATCH_START = GROUP_ROWS + SHARD_ROWS
ROWS = GROUP_ROWS + SHARD_ROWS + SCRATCH_ROWS

# Stamps restart from 1 before they could overflow int32.
_STAMP_LIMIT = 1 << 30


@kernel
def _next_stamp(scalars, which, stamps):
    """Advance stamp counter ``scalars[which]``; clear ``stamps`` when it wraps."""
    if scalars[which] >= _STAMP_LIMIT:
        stamps[:] = 0
        scalars[which] = 0
    scalars[which] += 1
    return np.int32(scalars[which])


@kernel
def _layer_of(stacks, g, t):
    """Layout layer at which group ``g`` holds shard type ``t`` (``O(r)``)."""
    for layer in range(stacks.shape[1]):
        if stacks[g, layer] == t:
            return layer
    return -1


@kernel
def _save_row(g, order, group_state, scratch, saved_rows, stamp, row_count):
    """Journal ``order[g]`` the first time this call changes it; return the new row count."""
    if group_state[ROW_STAMP, g] != stamp:
        group_state[ROW_STAMP, g] = stamp
        group_state[ROW_SLOT, g] = row_count
        scratch[LOG_ROW_GROUP, row_count] = g
        # An element loop, not ``saved_rows[row_count, :] = order[g, :]``: the slice copy
        # makes numba compile its shape-mismatch error message (string formatting), about
        # 40% of the first compilation of the fail path (docs/benchmarks.md, "First run").
        for layer in range(order.shape[1]):
            saved_rows[row_count, layer] = order[g, layer]
        row_count += 1
    return row_count


@kernel
def _set_assignment(t, g, layer, stacks, order, pos, group_state, shard_state, scratch, saved_rows,
                    stamp, stack_number, counts):
    """Give shard type ``t`` (layout layer ``layer`` of ``g``) to group ``g``.

    If ``t`` is outside ``g``'s top ``S`` it is swapped with a shard type of the top ``S``
    that ``g`` does not contribute; one exists because ``g`` contributes at most ``S``
    types including ``t``.  ``counts`` holds the journal lengths ``[shards, rows]``.
    """
    assigned = shard_state[ASSIGNED]
    if shard_state[SHARD_STAMP, t] != stamp:
        shard_state[SHARD_STAMP, t] = stamp
        scratch[LOG_SHARD, counts[0]] = t
        scratch[LOG_OLD_GROUP, counts[0]] = assigned[t]
        counts[0] += 1
    assigned[t] = g
    here = pos[g, layer]
    if here < stack_number:
        return
    counts[1] = _save_row(g, order, group_state, scratch, saved_rows, stamp, counts[1])
    # Swap out a type contributed by another group if possible, not one still waiting to
    # be placed (-1), for which this top S could be a placement without a move.
    chosen = -1
    for slot in range(stack_number):
        other = order[g, slot]
        if assigned[other] != g:
            chosen = slot
            if assigned[other] >= 0:
                break
    other = order[g, chosen]
    order[g, chosen] = t
    order[g, here] = other
    pos[g, layer] = chosen
    pos[g, _layer_of(stacks, g, other)] = here


@kernel
def _place_greedy(t, stacks, holder_groups, holder_layers, order, pos, group_state, shard_state, scratch,
                  saved_rows, stamp, stack_number, counts):
    """Give ``t`` to a live holder with room under ``S``: one that has ``t`` in its top ``S``
    (no move) first, then the least loaded.  Return False when every live holder is full."""
    alive = group_state[ALIVE]
    load = group_state[LOAD]
    r = holder_groups.shape[1]
    best = -1
    best_layer = -1
    best_key = 1 << 30
    for i in range(r):
        g = holder_groups[t, i]
        if alive[g] == 0 or load[g] >= stack_number:
            continue
        key = load[g]
        if pos[g, holder_layers[t, i]] >= stack_number:
            key += r + 1
        if key < best_key:
            best_key = key
            best = g
            best_layer = holder_layers[t, i]
    if best < 0:
        return False
    _set_assignment(t, best, best_layer, stacks, order, pos, group_state, shard_state, scratch, saved_rows,
                    stamp, stack_number, counts)
    load[best] += 1
    return True


@kernel
def _place_augmenting(t, stacks, holder_groups, holder_layers, order, pos, group_state, shard_state, scalars,
                      scratch, saved_rows, stamp, stack_number, counts):
    """Breadth-first search for an augmenting path ``t -> g1 -> t1 -> g2 -> ... -> gk`` in the
    residual graph (``t_i`` is contributed by ``g_i``, ``g_{i+1}`` holds ``t_i``, ``gk`` has
    room under ``S``) and shift every shard type one step along it.  Return False when no
    group with room is reachable: then the reached shard types violate Hall's condition for
    capacity ``S`` (see ``spare_opt.planning.controller``).

    Moves: a full group contributes every type of its top ``S``, so ``t_{i-1}`` is outside
    the top ``S`` of every full ``g_i`` and each step into a full group is one move; only
    the last step can be free.  Hence among the groups with room found at the shallowest
    depth, one that has the arriving type in its top ``S`` is preferred.
    """
    alive = group_state[ALIVE]
    load = group_state[LOAD]
    visit = group_state[VISIT]
    parent_shard = group_state[PARENT_SHARD]
    parent_layer = group_state[PARENT_LAYER]
    assigned = shard_state[ASSIGNED]
    queue = scratch[QUEUE]
    r = stacks.shape[1]
    mark = _next_stamp(scalars, VISIT_COUNTER, visit)
    head = 0
    tail = 0
    found = -1
    for i in range(r):
        g = holder_groups[t, i]
        if alive[g] != 0:
            visit[g] = mark
            parent_shard[g] = t
            parent_layer[g] = holder_layers[t, i]
            queue[tail] = g
            tail += 1
    found_free = False
    level_end = tail
    while head < tail:
        if head == level_end:
            if found >= 0:
                break
            level_end = tail
        g = queue[head]
        head += 1
        for layer in range(r):
            u = stacks[g, layer]
            if assigned[u] != g:
                continue
            for i in range(r):
                h = holder_groups[u, i]
                if alive[h] == 0 or visit[h] == mark:
                    continue
                visit[h] = mark
                parent_shard[h] = u
                parent_layer[h] = holder_layers[u, i]
                if load[h] < stack_number:
                    if pos[h, holder_layers[u, i]] < stack_number:
                        found = h
                        found_free = True
                        break
                    if found < 0:
                        found = h
                    continue
                queue[tail] = h
                tail += 1
            if found_free:
                break
        if found_free:
            break
    if found < 0:
        return False
    # Walk back from the end: each group first loses the type it hands on, so a slot of its
    # top S is free when it receives the type from the previous group.
    g = found
    while True:
        u = parent_shard[g]
        previous = assigned[u]
        _set_assignment(u, g, parent_layer[g], stacks, order, pos, group_state, shard_state, scratch, saved_rows,
                        stamp, stack_number, counts)
        if previous < 0:
            break
        g = previous
    load[found] += 1
    return True


@kernel
def fail_groups(stacks, holder_groups, holder_layers, order, pos, group_state, shard_state, scalars, failing,
                mid_step, scratch, saved_rows, journal):
    """Apply the failure of the live groups ``failing`` (int32 array) and re-plan.

    Returns ``(status, stack_number, failed_count, moves, lost_count, patch_count,
    journal_end)``.  ``STATUS_JOURNAL_FULL``: the journal has less room than one record
    may need; ``STATUS_ALREADY_FAILED``: group ``lost_count`` is not live; in both cases
    nothing was changed.  On a wipe-out only the alive flags, the failure sequence and the live-holder counts
    change (the controller must be reset); ``scratch[LOST, :lost_count]`` holds the lost
    shard types.  Otherwise ``order`` and ``shard_state[ASSIGNED]`` hold the new plan,
    ``scratch[PATCH, :patch_count]`` the patch shard types of a mid-step failure, and
    the journal (if kept) one more undo record.
    """
    n, r = stacks.shape
    if journal.size > 0 and journal.size - scalars[JOURNAL_END] < n * (r + 3) + 3:
        return STATUS_JOURNAL_FULL, 0, 0, 0, 0, 0, scalars[JOURNAL_END]
    alive = group_state[ALIVE]
    for i in range(failing.size):
        if alive[failing[i]] == 0:
            return STATUS_ALREADY_FAILED, 0, 0, 0, np.int64(failing[i]), 0, scalars[JOURNAL_END]
    load = group_state[LOAD]
    assigned = shard_state[ASSIGNED]
    live_holders = shard_state[LIVE_HOLDERS]
    lost_count = 0
    failed_count = scalars[FAILED_COUNT]
    for i in range(failing.size):
        alive[failing[i]] = 0
        group_state[SEQUENCE, failed_count + i] = failing[i]
    failed_count += failing.size
    scalars[FAILED_COUNT] = failed_count
    for i in range(failing.size):
        f = failing[i]
        for layer in range(r):
            t = stacks[f, layer]
            live_holders[t] -= 1
            if live_holders[t] == 0:
                scratch[LOST, lost_count] = t
                lost_count += 1
    if lost_count > 0:
        return STATUS_WIPE_OUT, 0, failed_count, 0, lost_count, 0, scalars[JOURNAL_END]

    stamp = _next_stamp(scalars, CALL_STAMP, group_state[ROW_STAMP])
    if stamp == 1:
        shard_state[SHARD_STAMP, :] = 0
    previous_stack = scalars[STACK]
    counts = scalars[LOG_COUNTS:LOG_COUNTS + 2]  # a view: no allocation per call
    counts[0] = 0
    counts[1] = 0
    displaced_count = 0
    for i in range(failing.size):
        f = failing[i]
        for layer in range(r):
            t = stacks[f, layer]
            if assigned[t] == f:
                scratch[DISPLACED, displaced_count] = t
                displaced_count += 1
        counts[1] = _save_row(f, order, group_state, scratch, saved_rows, stamp, counts[1])
        order[f, :] = -1
        load[f] = 0

    # Patch compute: displaced types that no surviving group had in its previous top S.
    patch_count = 0
    if mid_step:
        for j in range(displaced_count):
            t = scratch[DISPLACED, j]
            computed = False
            for i in range(r):
                h = holder_groups[t, i]
                if alive[h] != 0 and pos[h, holder_layers[t, i]] < previous_stack:
                    computed = True
                    break
            if not computed:
                scratch[PATCH, patch_count] = t
                patch_count += 1

    for j in range(displaced_count):
        t = scratch[DISPLACED, j]
        if shard_state[SHARD_STAMP, t] != stamp:
            shard_state[SHARD_STAMP, t] = stamp
            scratch[LOG_SHARD, counts[0]] = t
            scratch[LOG_OLD_GROUP, counts[0]] = assigned[t]
            counts[0] += 1
        assigned[t] = -1

    # S* >= c(k) = ceil(N / (N - k)) (Hall's condition for all types): jump there at once
    # instead of proving it with exhaustive searches.
    stack_number = previous_stack
    lower_bound = (n + (n - failed_count) - 1) // (n - failed_count)
    if lower_bound > stack_number:
        stack_number = lower_bound
        scalars[STACK] = stack_number
    for j in range(displaced_count):
        t = scratch[DISPLACED, j]
        while True:
            if _place_greedy(t, stacks, holder_groups, holder_layers, order, pos, group_state, shard_state,
                             scratch, saved_rows, stamp, stack_number, counts):
                break
            if _place_augmenting(t, stacks, holder_groups, holder_layers, order, pos, group_state, shard_state,
                                 scalars, scratch, saved_rows, stamp, stack_number, counts):
                break
            # No augmenting path: Hall's condition fails for capacity S, so S* > S.
            stack_number += 1
            scalars[STACK] = stack_number

    # Moves: assigned types outside their group's top S* in the order before this call.
    moves = 0
    for j in range(counts[0]):
        t = scratch[LOG_SHARD, j]
        g = assigned[t]
        inside = False
        if group_state[ROW_STAMP, g] == stamp:
            slot = group_state[ROW_SLOT, g]
            for p in range(stack_number):
                if saved_rows[slot, p] == t:
                    inside = True
                    break
        else:
            inside = pos[g, _layer_of(stacks, g, t)] < stack_number
        if not inside:
            moves += 1
    if journal.size > 0:
        _write_journal(journal, scalars, scratch, saved_rows, counts[0], counts[1])
    return STATUS_MASKED, stack_number, failed_count, moves, 0, patch_count, scalars[JOURNAL_END]


@kernel
def fail_packed(tables, rows, scalars, failing, mid_step, journal):
    """:func:`fail_groups` on the packed ``tables`` and ``rows`` (see ``TABLES`` and ``ROWS``)."""
    return fail_groups(
        tables[TABLE_STACKS], tables[TABLE_HOLDER_GROUPS], tables[TABLE_HOLDER_LAYERS], tables[TABLE_ORDER],
        tables[TABLE_POS], rows[GROUP_STATE_START:SHARD_STATE_START], rows[SHARD_STATE_START:SCRATCH_START],
        scalars, failing, mid_step, rows[SCRATCH_START:], tables[TABLE_SAVED_ROWS], journal,
    )


@kernel
def _write_journal(journal, scalars, scratch, saved_rows, shard_count, row_count):
    """Append the undo record of one call (see the module docstring)."""
    r = saved_rows.shape[1]
    start = scalars[JOURNAL_END]
    at = start
    journal[at] = shard_count
    journal[at + 1] = row_count
    at += 2
    for j in range(shard_count):
        journal[at] = scratch[LOG_SHARD, j]
        journal[at + 1] = scratch[LOG_OLD_GROUP, j]
        at += 2
    for j in range(row_count):
        journal[at] = scratch[LOG_ROW_GROUP, j]
        for p in range(r):
            journal[at + 1 + p] = saved_rows[j, p]
        at += r + 1
    journal[at] = at + 1 - start
    scalars[JOURNAL_END] = at + 1


@kernel
def undo_journal(journal, stop, end, assignment, order):
    """Undo the records in ``journal[stop:end]`` on ``assignment`` and ``order``, newest first."""
    r = order.shape[1]
    while end > stop:
        start = end - journal[end - 1]
        shard_count = journal[start]
        row_count = journal[start + 1]
        at = start + 2
        for j in range(shard_count):
            assignment[journal[at]] = journal[at + 1]
            at += 2
        for j in range(row_count):
            g = journal[at]
            for p in range(r):
                order[g, p] = journal[at + 1 + p]
            at += r + 1
        end = start


@kernel
def reset_state(stacks, order, pos, group_state, shard_state, scalars):
    """Fault-free state: every group live and computing its layout order, ``S = 1``."""
    n, r = stacks.shape
    for g in range(n):
        for layer in range(r):
            order[g, layer] = stacks[g, layer]
            pos[g, layer] = layer
        group_state[ALIVE, g] = 1
        group_state[LOAD, g] = 1
        shard_state[ASSIGNED, stacks[g, 0]] = g
        shard_state[LIVE_HOLDERS, g] = r
    scalars[STACK] = 1
    scalars[FAILED_COUNT] = 0


@kernel
def _run_sequence(stacks, holder_groups, holder_layers, order, pos, group_state, shard_state, scalars,
                  failure_order, scratch, saved_rows, single, stack_numbers, moves, no_journal):
    """Fail ``failure_order`` one group at a time; return the 1-based index of the failure
    that wipes out, or -1.  ``stack_numbers[k]`` is ``S*`` after ``k`` failures."""
    stack_numbers[0] = scalars[STACK]
    for j in range(failure_order.size):
        single[0] = failure_order[j]
        result = fail_groups(stacks, holder_groups, holder_layers, order, pos, group_state, shard_state,
                             scalars, single, False, scratch, saved_rows, no_journal)
        if result[0] == STATUS_WIPE_OUT:
            return j + 1
        stack_numbers[j + 1] = result[1]
        moves[j] = result[3]
    return -1


@kernel
def run_trajectories(tables, rows, scalars, failure_orders, stack_numbers, moves, wipeout_index):
    """Run every row of ``failure_orders`` (T, K) from a fault-free state (packed state, as
    :func:`fail_packed`).

    Fills ``stack_numbers`` (T, K + 1), ``moves`` (T, K) and ``wipeout_index`` (T,); entries
    past the end of a trial are left as given (the caller pre-fills -1).
    """
    stacks = tables[TABLE_STACKS]
    order = tables[TABLE_ORDER]
    pos = tables[TABLE_POS]
    group_state = rows[GROUP_STATE_START:SHARD_STATE_START]
    shard_state = rows[SHARD_STATE_START:SCRATCH_START]
    single = np.empty(1, dtype=np.int32)
    no_journal = np.empty(0, dtype=np.int32)
    for trial in range(failure_orders.shape[0]):
        reset_state(stacks, order, pos, group_state, shard_state, scalars)
        wipeout_index[trial] = _run_sequence(stacks, tables[TABLE_HOLDER_GROUPS], tables[TABLE_HOLDER_LAYERS], order,
                                             pos, group_state, shard_state, scalars, failure_orders[trial],
                                             rows[SCRATCH_START:], tables[TABLE_SAVED_ROWS], single,
                                             stack_numbers[trial], moves[trial], no_journal)


# ----------------------------------------------------------------------------- rejoins
@kernel
def _log_shard(t, shard_state, scratch, stamp, counts):
    """Record shard type ``t`` and its group the first time this call changes it."""
    if shard_state[SHARD_STAMP, t] != stamp:
        shard_state[SHARD_STAMP, t] = stamp
        scratch[LOG_SHARD, counts[0]] = t
        scratch[LOG_OLD_GROUP, counts[0]] = shard_state[ASSIGNED, t]
        counts[0] += 1


@kernel
def _room_path(root, stacks, holder_groups, holder_layers, order, pos, group_state, shard_state, scalars, scratch,
               target):
    """Breadth-first search from the group ``root`` (load above ``target``) for the nearest
    group with load below ``target`` along arcs ``g -u-> h`` (``g`` contributes ``u``, ``h``
    is another live holder of ``u``).  Returns that group (its tree path is read back
    through ``PARENT_SHARD`` and the assignment), or -1 when none is reachable: then the
    groups reached violate Hall's condition for capacity ``target`` (see
    :func:`recover_groups`).

    Moves: each group hands on its types from the bottom of its order up (one at layer
    ``target`` or below would leave the new top layers anyway), and among the groups with
    room at the shallowest depth one that has the arriving type in its top ``target``
    layers is preferred (the last step is then free)."""
    alive = group_state[ALIVE]
    load = group_state[LOAD]
    visit = group_state[VISIT]
    parent_shard = group_state[PARENT_SHARD]
    assigned = shard_state[ASSIGNED]
    queue = scratch[QUEUE]
    r = stacks.shape[1]
    mark = _next_stamp(scalars, VISIT_COUNTER, visit)
    visit[root] = mark
    queue[0] = root
    head = 0
    tail = 1
    level_end = 1
    found = -1
    while head < tail:
        if head == level_end:
            if found >= 0:
                return found
            level_end = tail
        g = queue[head]
        head += 1
        for p in range(r - 1, -1, -1):
            u = order[g, p]
            if assigned[u] != g:
                continue
            for i in range(r):
                h = holder_groups[u, i]
                if alive[h] == 0 or visit[h] == mark:
                    continue
                visit[h] = mark
                parent_shard[h] = u
                if load[h] < target:
                    if pos[h, holder_layers[u, i]] < target:
                        return h
                    if found < 0:
                        found = h
                    continue
                queue[tail] = h
                tail += 1
    return found


@kernel
def _lower_stack(root_count, stacks, holder_groups, holder_layers, order, pos, group_state, shard_state, scalars,
                 scratch, target, stamp, counts):
    """Bring the load of the ``root_count`` groups listed in ``scratch[DISPLACED]`` (load
    ``target + 1``) down to ``target`` by augmenting paths; True on success.  Orders are not
    touched (see :func:`recover_groups`).  When a group has no path, every shift of the
    attempt is undone and False is returned (``S* > target``)."""
    load = group_state[LOAD]
    assigned = shard_state[ASSIGNED]
    n = stacks.shape[0]
    undo = np.empty(3 * max(16, 4 * root_count), dtype=np.int32)
    undo_count = 0
    ok = True
    for o in range(root_count):
        root = scratch[DISPLACED, o]
        end = _room_path(root, stacks, holder_groups, holder_layers, order, pos, group_state, shard_state, scalars,
                         scratch, target)
        if end < 0:
            ok = False
            break
        g = end
        while g != root:
            u = group_state[PARENT_SHARD, g]
            previous = assigned[u]
            if undo_count + 3 > undo.size:
                grown = np.empty(2 * undo.size, dtype=np.int32)
                grown[:undo_count] = undo[:undo_count]
                undo = grown
            undo[undo_count] = u
            undo[undo_count + 1] = previous
            undo[undo_count + 2] = g
            undo_count += 3
            _log_shard(u, shard_state, scratch, stamp, counts)
            assigned[u] = g
            load[previous] -= 1
            load[g] += 1
            g = previous
    if ok:
        return True
    while undo_count > 0:
        undo_count -= 3
        u = undo[undo_count]
        assigned[u] = undo[undo_count + 1]
        load[undo[undo_count + 1]] += 1
        load[undo[undo_count + 2]] -= 1
    return False


@kernel
def _bring_into_top(t, g, layer, stacks, order, pos, group_state, shard_state, scratch, saved_rows, stamp,
                    stack_number, counts):
    """Swap shard type ``t`` (layout layer ``layer`` of ``g``, contributed by ``g``) into
    ``g``'s top ``stack_number`` layers in place of a type ``g`` does not contribute (one
    exists: ``g`` contributes at most ``stack_number`` types)."""
    here = pos[g, layer]
    if here < stack_number:
        return
    _log_shard(t, shard_state, scratch, stamp, counts)
    counts[1] = _save_row(g, order, group_state, scratch, saved_rows, stamp, counts[1])
    assigned = shard_state[ASSIGNED]
    chosen = -1
    for slot in range(stack_number - 1, -1, -1):  # the deepest free layer, as the exact planner
        if assigned[order[g, slot]] != g:
            chosen = slot
            break
    other = order[g, chosen]
    order[g, chosen] = t
    order[g, here] = other
    pos[g, layer] = chosen
    pos[g, _layer_of(stacks, g, other)] = here


@kernel
def recover_groups(stacks, holder_groups, holder_layers, order, pos, group_state, shard_state, scalars, back,
                   scratch, saved_rows, journal):
    """Bring the failed groups ``back`` (int32 array) back and re-plan.

    Returns ``(status, stack_number, failed_count, moves, journal_end)``.
    ``STATUS_JOURNAL_FULL``: the journal has less room than one record may need;
    ``STATUS_NOT_FAILED``: group ``failed_count`` is live; in both cases nothing was
    changed.  Otherwise ``order`` and ``shard_state[ASSIGNED]`` hold the new plan and the
    journal (if kept) one more undo record.

    A returning group comes back with its layout order and takes back the types of its
    top ``c(k)`` layers (no move).  Then ``S`` falls while a lower value is feasible: ``S* >= c(k)`` (Hall's condition for all
    types), so while ``S`` is above ``c(k)`` each group contributing ``S`` types gives one
    away along a shortest augmenting path ``g0 -u0-> g1 -u1-> ... -> gk`` (``g_i``
    contributes ``u_i``, ``g_{i+1}`` holds it, ``gk`` contributes fewer than ``S - 1``),
    and ``S`` becomes ``S - 1``.  If some group has no such path, the groups ``G'`` it
    reaches contribute ``S - 1`` types or more (it ``S``) and hold every live holder of
    the types ``T'`` they contribute: ``|T'| >= (S - 1) |G'| + 1 > (S - 1) |H(T')|``,
    Hall's condition fails and ``S* = S``; the attempt is undone.  Last, every
    contributed type outside its group's top ``S*`` layers is swapped into them (the
    moves: counted, as by the exact planner, against the order before the call with the
    returning groups in layout order).
    """
    n, r = stacks.shape
    if journal.size > 0 and journal.size - scalars[JOURNAL_END] < n * (r + 3) + 3:
        return STATUS_JOURNAL_FULL, 0, 0, 0, scalars[JOURNAL_END]
    alive = group_state[ALIVE]
    for i in range(back.size):
        if alive[back[i]] != 0:
            return STATUS_NOT_FAILED, 0, np.int64(back[i]), 0, scalars[JOURNAL_END]
    stamp = _next_stamp(scalars, CALL_STAMP, group_state[ROW_STAMP])
    if stamp == 1:
        shard_state[SHARD_STAMP, :] = 0
    counts = scalars[LOG_COUNTS:LOG_COUNTS + 2]
    counts[0] = 0
    counts[1] = 0
    load = group_state[LOAD]
    assigned = shard_state[ASSIGNED]
    for i in range(back.size):
        g = back[i]
        alive[g] = 1
        load[g] = 0
        counts[1] = _save_row(g, order, group_state, scratch, saved_rows, stamp, counts[1])
        for layer in range(r):
            order[g, layer] = stacks[g, layer]
            pos[g, layer] = layer
            shard_state[LIVE_HOLDERS, stacks[g, layer]] += 1
    kept = 0
    for i in range(scalars[FAILED_COUNT]):  # the failure sequence keeps its order
        g = group_state[SEQUENCE, i]
        if alive[g] == 0:
            group_state[SEQUENCE, kept] = g
            kept += 1
    failed_count = kept
    scalars[FAILED_COUNT] = failed_count

    previous_stack = scalars[STACK]
    stack_number = previous_stack
    lowest = (n + (n - failed_count) - 1) // (n - failed_count)
    # A returning group takes back the types of its top c(k) layers: no move (they stay in
    # its top S* >= c(k) layers), and fewer groups at the level to lower.
    for i in range(back.size):
        h = back[i]
        for layer in range(min(lowest, r)):
            t = stacks[h, layer]
            g = assigned[t]
            if g != h:
                _log_shard(t, shard_state, scratch, stamp, counts)
                assigned[t] = h
                load[g] -= 1
                load[h] += 1
    while stack_number > lowest:
        over = 0
        for g in range(n):
            if alive[g] != 0 and load[g] >= stack_number:
                scratch[DISPLACED, over] = g
                over += 1
        if not _lower_stack(over, stacks, holder_groups, holder_layers, order, pos, group_state, shard_state, scalars,
                            scratch, stack_number - 1, stamp, counts):
            break
        stack_number -= 1
    scalars[STACK] = stack_number

    if stack_number < previous_stack:
        # Contributed types outside the new top S*: those given to a new group, and those
        # kept at layers S* .. S - 1.
        for j in range(counts[0]):
            t = scratch[LOG_SHARD, j]
            g = assigned[t]
            _bring_into_top(t, g, _layer_of(stacks, g, t), stacks, order, pos, group_state, shard_state, scratch,
                            saved_rows, stamp, stack_number, counts)
        for g in range(n):
            if alive[g] == 0:
                continue
            for p in range(stack_number, previous_stack):
                t = order[g, p]
                if assigned[t] == g:
                    _bring_into_top(t, g, _layer_of(stacks, g, t), stacks, order, pos, group_state, shard_state,
                                    scratch, saved_rows, stamp, stack_number, counts)

    moves = 0
    for j in range(counts[0]):
        t = scratch[LOG_SHARD, j]
        g = assigned[t]
        inside = False
        if group_state[ROW_STAMP, g] == stamp:
            slot = group_state[ROW_SLOT, g]
            if saved_rows[slot, 0] < 0:  # a returning group: its order before is the layout's
                inside = _layer_of(stacks, g, t) < stack_number
            else:
                for p in range(stack_number):
                    if saved_rows[slot, p] == t:
                        inside = True
                        break
        else:
            inside = pos[g, _layer_of(stacks, g, t)] < stack_number
        if not inside:
            moves += 1
    if journal.size > 0:
        _write_journal(journal, scalars, scratch, saved_rows, counts[0], counts[1])
    return STATUS_MASKED, stack_number, failed_count, moves, scalars[JOURNAL_END]


@kernel
def recover_packed(tables, rows, scalars, back, journal):
    """:func:`recover_groups` on the packed ``tables`` and ``rows`` (as :func:`fail_packed`)."""
    return recover_groups(
        tables[TABLE_STACKS], tables[TABLE_HOLDER_GROUPS], tables[TABLE_HOLDER_LAYERS], tables[TABLE_ORDER],
        tables[TABLE_POS], rows[GROUP_STATE_START:SHARD_STATE_START], rows[SHARD_STATE_START:SCRATCH_START],
        scalars, back, rows[SCRATCH_START:], tables[TABLE_SAVED_ROWS], journal,
    )

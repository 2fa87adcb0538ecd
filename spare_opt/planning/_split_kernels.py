"""Numba kernels of the online controller with micro-batches, ``m > 1`` (private; see
:mod:`spare_opt.planning.controller`).

The algorithm is that of :mod:`spare_opt.planning._kernels` (greedy placement, then
augmenting paths, then a certified rise of the bound) on the network with capacities in
micro-batches: source -> shard type ``m``, shard type -> live holder ``m`` (never
binding: a type has ``m`` micro-batches in all), live group -> sink ``L``.  The unit
placed is one micro-batch.  Orders are not kept: at ``m > 1`` a plan's order is derived
from its split (:func:`spare_opt.planning.plan._derived_order`).

Augmenting paths come from two searches (``docs/benchmarks.md`` shows why both):

* :func:`_place_nearest`, a breadth-first search from the type to place, stopped at the
  nearest rooms (groups with load below ``L``): cheap when rooms are near, the usual
  case;
* :func:`_place_routed`, one breadth-first search from every type still to place at
  once, then paths into each room reached found backwards in its level graph (a
  blocking flow, as in Dinic's algorithm), used for the rest of a call once near
  searches would cost more than one search of the whole graph, and from the start for
  the next failures at the same bound.  With ``m`` micro-batches per type the last
  rooms of a load level are often far (on circulant layouts the residual graph is a
  long ring), and a search per micro-batch or per type would cross the same groups
  again and again.

Both searches hand each type on once (from the first group reached that computes part
of it to all its live holders), so a search looks at each live holder of a type once.
Rejoins (:func:`recover_split`) use breadth-first searches and the shortest augmenting
path algorithm with distance labels (:func:`_labelled_room_path`).

Every kernel is ``nopython`` with ``cache=True`` (see :mod:`spare_opt._core.jit`) and takes
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
    part of, the breadth-first search's visit stamp, level and parent, the distance label
    and current arc of the labelled search, the path being augmented, the failure
    sequence, the backward arc pointer and source bit set of :func:`_place_routed`; per
    type: live holders, call stamp, the stamp of the last Hall violation found by a
    rejoin, micro-batches still to place, the search that last handed it on, at which
    level and from which sources; scratch: search queue, displaced types, lost types.
``scalars`` (SCALARS + r + 1,) int64
    The load bound ``L``, the call and visit stamps, the number of failed groups, the
    journal end, the log length of the current call, the largest number of distinct
    types a live group computes part of (the plan's stack number), the bound the labels
    were computed for, the relabels since the last exact relabelling, the size of the
    last search, that violation (its level, stamp, number of types and an upper bound on
    their live holders), the bound at which a failure last found its rooms far and,
    from ``HISTOGRAM``, how many live groups compute part of ``0 .. r`` types.
``journal`` 1-D int32
    Undo log of the controller (empty: not kept).  Each masked call appends one record
    ``[c, (t m + j, old group) * c, length]``; the caller keeps room for ``2 N m + 3``
    more entries.
"""

import numpy as np

# Status codes and the stamp limit are the m = 1 kernels' (one protocol for the controller).
from .._core.jit import kernel
from ._kernels import (
    _STAMP_LIMIT,
    STATUS_ALREADY_FAILED,
    STATUS_JOURNAL_FULL,
    STATUS_MASKED,
    STATUS_LEVEL_FALL_DEFERRED,
    STATUS_NOT_FAILED,
    STATUS_WIPE_OUT,
    _layer_of,
)

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
VISIT = 3  # the breadth-first search that last reached the group ...
LEVEL = 4  # ... its level there ...
PARENT_GROUP = 5  # ... the group it was reached from (-1 for a root) ...
PARENT_FROM_LAYER = 6  # ... the layer of that group's row holding the type handed on ...
PARENT_TO_LAYER = 7  # ... and the layer of its own row holding it (for a root: the root's type)
DISTANCE = 8  # an estimate of the residual distance to a group with room (labelled search)
CURRENT = 9  # the current arc (layer * r + holder index) of the labelled search
PATH_GROUP = 10  # the path being augmented: groups ...
PATH_FROM_LAYER = 11  # ... the layer of the previous group's row holding the type handed on ...
PATH_TO_LAYER = 12  # ... and the layer of this group's row holding it
SEQUENCE = 13
LIVE_HOLDERS = 14
TYPE_STAMP = 15
QUEUE = 16
DISPLACED = 17
LOST = 18
CERT_TYPE = 19  # the certificate's stamp on the types of its set (see recover_split)
BACK = 20  # the next arc a backward path search tries into the group (0: its search parent)
WAITING = 21  # per type: micro-batches of a displaced type still to be placed (this call)
TYPE_VISIT = 22  # per type: the breadth-first search that last handed it on ...
TYPE_LEVEL = 23  # ... and the level of the groups that hand it on there (-1: a type to place)
SOURCES = 24  # per group: a bit set of the types to place it is reached from (_place_routed) ...
TYPE_SOURCES = 25  # ... and per type, of the groups that hand it on
ROWS = 26
_SOURCE_BITS = 30  # a displaced type's bit in SOURCES: its index in DISPLACED modulo this

# Scalars.
BOUND = 0
CALL_STAMP = 1
VISIT_COUNTER = 2
FAILED_COUNT = 3
JOURNAL_END = 4
LOG_COUNT = 5
WIDEST = 6
LABEL_BOUND = 7  # the bound the distance labels were computed for (-1: none)
RELABELS = 8  # relabels since the last global relabel
REACHED = 9  # how many groups the last breadth-first search queued (rows[QUEUE, :REACHED])
CERT_TARGET = 10  # a level the failed set cannot reach (0: no certificate) ...
CERT_ID = 11  # ... the stamp of its types in rows[CERT_TYPE] ...
CERT_TYPES = 12  # ... how many types: m CERT_TYPES > CERT_TARGET CERT_HOLDERS ...
CERT_HOLDERS = 13  # ... and at least how many live groups hold one of them
FAR_BOUND = 14  # the bound at which a failure last found its rooms far (0: none)
HISTOGRAM = 15
SCALARS = 15  # plus r + 1 histogram entries



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
        _retouch(np.int64(g), np.int64(1), rows, scalars)
    elif old + delta == 0 and old > 0:
        _retouch(np.int64(g), np.int64(-1), rows, scalars)


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
    _add_units(np.int64(best), np.int64(best_layer), np.int64(1), count, rows, scalars)
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
def _unplaced_index(t, micro):
    """A micro-batch index ``j`` of type ``t`` still to be placed (``split`` -1), or -1."""
    for j in range(micro.shape[2]):
        if micro[SPLIT, t, j] == -1:
            return j
    return -1


@kernel
def _nearest_rooms(t, tables, rows, scalars, bound, pending):
    """Breadth-first search of the residual graph from type ``t`` (its live holders are
    level 0) for groups with load below ``bound`` (rooms).

    Arcs: a group ``g`` that computes part of ``u`` reaches every live holder ``h`` of
    ``u``.  Groups with load below ``bound`` (rooms) are not expanded; the search stops
    once it has reached ``pending`` rooms (as many as micro-batches to place: enough
    targets for the phase when they are near) or the level holding the nearest room is
    complete (so that far rooms are all reached through every shortest path).  Returns
    the nearest room's level, or -1 when no room is reachable.
    """
    stacks = tables[STACKS]
    holder_groups = tables[HOLDER_GROUPS]
    count = tables[COUNT]
    alive = rows[ALIVE]
    load = rows[LOAD]
    visit = rows[VISIT]
    level = rows[LEVEL]
    queue = rows[QUEUE]
    r = stacks.shape[1]
    type_visit = rows[TYPE_VISIT]
    if scalars[VISIT_COUNTER] >= _STAMP_LIMIT:
        visit[:] = 0
        type_visit[:] = 0
        scalars[VISIT_COUNTER] = 0
    scalars[VISIT_COUNTER] += 1
    mark = np.int32(scalars[VISIT_COUNTER])
    type_visit[t] = mark
    tail = 0
    nearest = -1
    rooms = 0
    for i in range(r):
        g = holder_groups[t, i]
        if alive[g] != 0:
            visit[g] = mark
            level[g] = 0
            rows[PARENT_GROUP, g] = -1
            rows[PARENT_TO_LAYER, g] = tables[HOLDER_LAYERS, t, i]
            if load[g] < bound:
                nearest = 0
                rooms += 1
            queue[tail] = g
            tail += 1
    head = 0
    while head < tail and nearest < 0:
        depth = level[queue[head]]
        # One whole level at a time, so that the level of the nearest room is complete.
        while head < tail and level[queue[head]] == depth and rooms < pending:
            g = queue[head]
            head += 1
            if load[g] < bound:
                continue
            for layer in range(r):
                if count[g, layer] == 0:
                    continue
                u = stacks[g, layer]
                if type_visit[u] == mark:
                    continue  # handed on by an earlier group: all its holders are reached
                type_visit[u] = mark
                for i in range(r):
                    h = holder_groups[u, i]
                    if alive[h] == 0 or visit[h] == mark:
                        continue
                    visit[h] = mark
                    level[h] = depth + 1
                    rows[PARENT_GROUP, h] = g
                    rows[PARENT_FROM_LAYER, h] = layer
                    rows[PARENT_TO_LAYER, h] = tables[HOLDER_LAYERS, u, i]
                    queue[tail] = h
                    tail += 1
                    if load[h] < bound:
                        nearest = depth + 1
                        rooms += 1
                        if rooms >= pending:
                            scalars[REACHED] = tail
                            return nearest
    scalars[REACHED] = tail
    return nearest


@kernel
def _place_nearest(t, tables, micro, rows, scalars, bound, stamp):
    """Place the micro-batches of ``t`` still to be placed along shortest augmenting paths to
    the nearest rooms: one breadth-first search from the live holders of ``t``, stopped
    once it has reached as many rooms as micro-batches wait (or the nearest rooms' level
    is complete), then the tree path to each room reached, nearest first, while it is
    still residual.  As many go along a path as it carries: the room left in its last
    group, the micro-batches still waiting, and on every arc the micro-batches the group
    computes of the type it hands on.

    Returns ``(length of the longest path used, micro-batches placed)``, or ``(-1, 0)``
    when no room is reachable (a Hall violation, see :func:`_place_routed`)."""
    m = micro.shape[2]
    waiting = 0
    for j in range(m):
        if micro[SPLIT, t, j] == -1:
            waiting += 1
    if _nearest_rooms(np.int64(t), tables, rows, scalars, np.int64(bound), np.int64(waiting)) < 0:
        return -1, 0
    count = tables[COUNT]
    load = rows[LOAD]
    longest = 0
    placed = 0
    for q in range(scalars[REACHED]):
        end = rows[QUEUE, q]
        if load[end] >= bound:
            continue
        carried = min(bound - load[end], waiting)
        depth = rows[LEVEL, end]
        h = end
        for k in range(depth, 0, -1):
            rows[PATH_GROUP, k] = h
            rows[PATH_FROM_LAYER, k] = rows[PARENT_FROM_LAYER, h]
            rows[PATH_TO_LAYER, k] = rows[PARENT_TO_LAYER, h]
            h = rows[PARENT_GROUP, h]
            carried = min(carried, count[h, rows[PATH_FROM_LAYER, k]])
        if carried <= 0:
            continue  # an arc of the tree path was used up by an earlier path
        rows[PATH_GROUP, 0] = h
        rows[PATH_TO_LAYER, 0] = rows[PARENT_TO_LAYER, h]
        for _ in range(carried):
            _augment_path(np.int64(t), np.int64(depth), tables, micro, rows, scalars, stamp)
        placed += carried
        waiting -= carried
        longest = max(longest, depth)
        if waiting == 0:
            break
    return longest, placed


@kernel
def _global_relabel(tables, rows, scalars, bound):
    """Exact residual distances to the nearest group with room: a breadth-first search
    backwards from every live group with load below ``bound``.  The arcs into ``h`` come
    from the groups ``g != h`` that compute part of a type ``h`` holds.  Unreached groups
    get the label ``N`` (no path)."""
    stacks = tables[STACKS]
    holder_groups = tables[HOLDER_GROUPS]
    holder_layers = tables[HOLDER_LAYERS]
    count = tables[COUNT]
    alive = rows[ALIVE]
    load = rows[LOAD]
    distance = rows[DISTANCE]
    queue = rows[QUEUE]
    n, r = stacks.shape
    tail = 0
    for g in range(n):
        rows[CURRENT, g] = 0
        if alive[g] != 0 and load[g] < bound:
            distance[g] = 0
            queue[tail] = g
            tail += 1
        else:
            distance[g] = n
    head = 0
    while head < tail:
        h = queue[head]
        head += 1
        for layer in range(r):
            u = stacks[h, layer]
            for i in range(r):
                g = holder_groups[u, i]
                if g == h or alive[g] == 0 or distance[g] != n:
                    continue
                if count[g, holder_layers[u, i]] > 0:
                    distance[g] = distance[h] + 1
                    queue[tail] = g
                    tail += 1
    scalars[LABEL_BOUND] = bound
    scalars[RELABELS] = 0


@kernel
def _augment_path(t, depth, tables, micro, rows, scalars, stamp):
    """Shift one micro-batch along the path ``PATH_GROUP[0 .. depth]``: an unplaced
    micro-batch of ``t`` goes to the first group, one micro-batch of the type each group
    hands on to the next; only the last group's load grows."""
    stacks = tables[STACKS]
    count = tables[COUNT]
    for k in range(depth, 0, -1):
        g = rows[PATH_GROUP, k - 1]
        h = rows[PATH_GROUP, k]
        from_layer = rows[PATH_FROM_LAYER, k]
        u = stacks[g, from_layer]
        jj = _pick_entry(u, g, micro, stamp)
        _log(u, jj, micro, scalars, stamp)
        micro[SPLIT, u, jj] = h
        _add_units(np.int64(g), np.int64(from_layer), np.int64(-1), count, rows, scalars)
        _add_units(np.int64(h), np.int64(rows[PATH_TO_LAYER, k]), np.int64(1), count, rows, scalars)
    root = rows[PATH_GROUP, 0]
    micro[SPLIT, t, _unplaced_index(np.int64(t), micro)] = root
    _add_units(np.int64(root), np.int64(rows[PATH_TO_LAYER, 0]), np.int64(1), count, rows, scalars)
    rows[LOAD, rows[PATH_GROUP, depth]] += 1


@kernel
def _reached_from(g, handed_level, stacks, rows, mark):
    """The bit set of the types to place that reach group ``g`` in the level graph of the
    current search: the union over the types ``g`` holds that groups of level
    ``handed_level`` hand on (all of them are complete once that level is)."""
    bits = np.int32(0)
    for layer in range(stacks.shape[1]):
        u = stacks[g, layer]
        if rows[TYPE_VISIT, u] == mark and rows[TYPE_LEVEL, u] == handed_level:
            bits |= rows[TYPE_SOURCES, u]
    return bits


@kernel
def _live_sources(displaced_count, rows):
    """The bit set of the displaced types with micro-batches still to be placed."""
    bits = np.int32(0)
    for d in range(displaced_count):
        if rows[WAITING, rows[DISPLACED, d]] > 0:
            bits |= np.int32(1) << (d % _SOURCE_BITS)
    return bits


@kernel
def _source_layer(g, rows, stacks, stamp):
    """The layer of group ``g``'s row holding a displaced type with micro-batches still to
    be placed in this call, or -1."""
    for layer in range(stacks.shape[1]):
        t = stacks[g, layer]
        if rows[TYPE_STAMP, t] == stamp and rows[WAITING, t] > 0:
            return layer
    return -1


@kernel
def _back_path(x, tables, rows, stamp, mark, live):
    """A path of the last breadth-first search's level graph from a group of level 0 that
    holds a type still to be placed to the group ``x``, found backwards from ``x``: each
    step goes to a group one level lower with a residual arc into the current one (it
    computes part of a type this one holds, handed on from that level), its search
    parent first.  Written to ``PATH_*[0 .. level of x]`` (``PATH_TO_LAYER[0]``: the
    layer of the first group's row holding the type to place); returns the path's
    length in arcs, or -1.

    ``BACK[g]`` is the next arc tried into ``g`` (``0``: from the search parent, ``1 + l
    r + i``: from holder ``i`` of the type at layer ``l`` of ``g``'s row); a group whose
    arcs are all tried (or, at level 0, that holds no type still to be placed) is a dead
    end for the rest of the search's use, as in a blocking flow.  Groups whose
    ``SOURCES`` share no bit with ``live`` (the types still to place) are not tried.
    Arcs that later shifts open are not tried: the search may miss a path, never report
    a wrong one."""
    stacks = tables[STACKS]
    holder_groups = tables[HOLDER_GROUPS]
    holder_layers = tables[HOLDER_LAYERS]
    count = tables[COUNT]
    visit = rows[VISIT]
    level = rows[LEVEL]
    back = rows[BACK]
    type_visit = rows[TYPE_VISIT]
    type_level = rows[TYPE_LEVEL]
    sources = rows[SOURCES]
    r = stacks.shape[1]
    arcs = r * r
    top = level[x]
    if top == 0:
        layer = _source_layer(np.int64(x), rows, stacks, stamp)
        if layer < 0:
            return -1
        rows[PATH_GROUP, 0] = x
        rows[PATH_TO_LAYER, 0] = layer
        return 0
    k = top
    rows[PATH_GROUP, k] = x
    while True:
        y = rows[PATH_GROUP, k]
        found = False
        while back[y] <= arcs:
            a = back[y]
            if a == 0:
                g = rows[PARENT_GROUP, y]
                from_layer = rows[PARENT_FROM_LAYER, y]
                to_layer = rows[PARENT_TO_LAYER, y]
            else:
                to_layer = (a - 1) // r
                u = stacks[y, to_layer]
                if type_visit[u] != mark or type_level[u] != k - 1:
                    back[y] = (to_layer + 1) * r + 1  # not handed on from level k - 1
                    continue
                i = a - 1 - to_layer * r
                g = holder_groups[u, i]
                from_layer = holder_layers[u, i]
            if (g != y and visit[g] == mark and level[g] == k - 1 and back[g] <= arcs and count[g, from_layer] > 0
                    and sources[g] & live != 0):
                if k > 1 or _source_layer(np.int64(g), rows, stacks, stamp) >= 0:
                    found = True
                    break
                back[g] = arcs + 1  # a source no longer
            back[y] = a + 1
        if found:
            rows[PATH_GROUP, k - 1] = g
            rows[PATH_FROM_LAYER, k] = from_layer
            rows[PATH_TO_LAYER, k] = to_layer
            k -= 1
            if k == 0:
                rows[PATH_TO_LAYER, 0] = _source_layer(np.int64(g), rows, stacks, stamp)
                return top
        else:
            k += 1
            if k > top:
                return -1
            back[rows[PATH_GROUP, k]] += 1


@kernel
def _place_routed(displaced_count, tables, micro, rows, scalars, bound, stamp):
    """Place micro-batches of the displaced types still to be placed along shortest
    augmenting paths, all types at once: one breadth-first search of the residual graph
    from every live holder of those types (level 0), stopped once the groups with load
    below ``bound`` (rooms) it has reached have room for all of them, then for each room
    in the order reached (nearest first) paths into it found backwards in the search's
    level graph (:func:`_back_path`) while it has room.  Each path ``t -> g0 -u1-> g1 ...
    -> gk`` gives a micro-batch of ``t`` to ``g0`` and one of ``u_i`` from ``g_{i-1}`` to
    ``g_i``, so that only the room's load grows; it is a shortest path from the
    displaced types to its room at the time of the search.

    The search walks types: a type is handed on once, from the first group reached that
    computes part of it, to all its live holders (the arcs ``g -> h`` of the residual
    graph are those where ``g`` computes part of a type ``h`` holds), so each live
    holder of a type is looked at once per type instead of once per group computing it.
    It also records, as bit sets (``SOURCES``, ``TYPE_SOURCES``; bit ``d mod 30`` for
    ``DISPLACED[d]``), which types to place reach each group in the level graph, so
    that once a type is placed the groups only it reaches are skipped.

    Returns the number of micro-batches placed (at least one when a room is reachable:
    the search tree's path to the first room reached is in the level graph), or -1 when
    no room is reachable.  Then the groups reached ``G'`` are full and hold every live
    holder of the types ``T'`` they reach (the types to place and those ``G'`` computes
    part of), and every micro-batch of ``T'`` is on ``G'`` or still to be placed, so
    ``m |T'| > bound |H(T')|``: Hall's condition fails for capacity ``bound`` (the proof
    in :class:`spare_opt.planning.controller.ReorderController`, with every type still
    to be placed as a source).

    One search serves all the call's displaced micro-batches, where a search per type
    would cross the same far part of the graph again and again when the rooms are far
    (``docs/benchmarks.md``).  The approach is that of a blocking flow in Dinic's
    algorithm, with rooms of several levels as sinks.

    References: E. A. Dinic, "Algorithm for solution of a problem of maximum flow in
    networks with power estimation", Soviet Math. Doklady 11 (1970); Ahuja, Magnanti and
    Orlin, "Network Flows" (1993), Sec. 7.5.
    """
    stacks = tables[STACKS]
    holder_groups = tables[HOLDER_GROUPS]
    holder_layers = tables[HOLDER_LAYERS]
    count = tables[COUNT]
    alive = rows[ALIVE]
    load = rows[LOAD]
    visit = rows[VISIT]
    level = rows[LEVEL]
    queue = rows[QUEUE]
    back = rows[BACK]
    type_visit = rows[TYPE_VISIT]
    type_level = rows[TYPE_LEVEL]
    sources = rows[SOURCES]
    type_sources = rows[TYPE_SOURCES]
    m = micro.shape[2]
    r = stacks.shape[1]
    if scalars[VISIT_COUNTER] >= _STAMP_LIMIT:
        visit[:] = 0
        type_visit[:] = 0
        scalars[VISIT_COUNTER] = 0
    scalars[VISIT_COUNTER] += 1
    mark = np.int32(scalars[VISIT_COUNTER])
    waiting = 0
    tail = 0
    room = 0
    for d in range(displaced_count):
        t = rows[DISPLACED, d]
        left = 0
        for j in range(m):
            if micro[SPLIT, t, j] == -1:
                left += 1
        rows[WAITING, t] = left
        waiting += left
        if left == 0:
            continue
        type_visit[t] = mark
        type_level[t] = -1
        bit = np.int32(1) << (d % _SOURCE_BITS)
        for i in range(r):
            g = holder_groups[t, i]
            if alive[g] == 0:
                continue
            if visit[g] == mark:
                sources[g] |= bit
                continue
            visit[g] = mark
            level[g] = 0
            back[g] = 0
            sources[g] = bit
            rows[PARENT_GROUP, g] = -1
            queue[tail] = g
            tail += 1
            if load[g] < bound:
                room += bound - load[g]
    head = 0
    while head < tail and room < waiting:
        g = queue[head]
        head += 1
        depth = level[g] + 1
        if depth > 1:
            sources[g] = _reached_from(np.int64(g), np.int64(depth - 2), stacks, rows, mark)
        if load[g] < bound:
            continue
        for layer in range(r):
            if count[g, layer] == 0:
                continue
            u = stacks[g, layer]
            if type_visit[u] == mark:
                if type_level[u] == depth - 1:
                    type_sources[u] |= sources[g]
                continue
            type_visit[u] = mark
            type_level[u] = depth - 1
            type_sources[u] = sources[g]
            for i in range(r):
                h = holder_groups[u, i]
                if alive[h] == 0 or visit[h] == mark:
                    continue
                visit[h] = mark
                level[h] = depth
                back[h] = 0
                rows[PARENT_GROUP, h] = g
                rows[PARENT_FROM_LAYER, h] = layer
                rows[PARENT_TO_LAYER, h] = holder_layers[u, i]
                queue[tail] = h
                tail += 1
                if load[h] < bound:
                    room += bound - load[h]
            if room >= waiting:
                break
    scalars[REACHED] = tail
    if room == 0:
        return -1
    for q in range(head, tail):
        g = queue[q]
        if level[g] > 0:
            sources[g] = _reached_from(np.int64(g), np.int64(level[g] - 1), stacks, rows, mark)
    live = _live_sources(np.int64(displaced_count), rows)
    placed = 0
    for q in range(tail):
        x = queue[q]
        while load[x] < bound and placed < waiting and sources[x] & live != 0:
            depth = _back_path(np.int64(x), tables, rows, stamp, mark, live)
            if depth < 0:
                break
            root = rows[PATH_GROUP, 0]
            t = stacks[root, rows[PATH_TO_LAYER, 0]]
            _augment_path(np.int64(t), np.int64(depth), tables, micro, rows, scalars, stamp)
            rows[WAITING, t] -= 1
            if rows[WAITING, t] == 0:
                live = _live_sources(np.int64(displaced_count), rows)
            placed += 1
        if placed == waiting:
            break
    return placed


@kernel
def _roll_back_call(tables, micro, rows, scalars):
    """Give every micro-batch logged by this call back to the contributor it had before
    the call (``LOG_OLD``), or leave it to be placed (``split`` -1) when that group has
    failed; counts and loads follow.  The log stays: the call's moves are still counted
    against the contributors before it."""
    count = tables[COUNT]
    m = micro.shape[2]
    for c in range(scalars[LOG_COUNT]):
        entry = micro[LOG_ENTRY, c // m, c % m]
        t = entry // m
        j = entry % m
        old = micro[LOG_OLD, c // m, c % m]
        now = micro[SPLIT, t, j]
        if old >= 0 and rows[ALIVE, old] == 0:
            old = -1
        if now == old:
            continue
        if now >= 0:
            layer = _layer_of(tables[STACKS], np.int64(now), np.int64(t))
            _add_units(np.int64(now), np.int64(layer), np.int64(-1), count, rows, scalars)
            rows[LOAD, now] -= 1
        if old >= 0:
            layer = _layer_of(tables[STACKS], np.int64(old), np.int64(t))
            _add_units(np.int64(old), np.int64(layer), np.int64(1), count, rows, scalars)
            rows[LOAD, old] += 1
        micro[SPLIT, t, j] = old


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
    # Greedy first; loads only grow within a call, so a micro-batch that no holder can
    # take now waits for an augmenting path or a higher bound.
    pending = 0
    for d in range(displaced_count):
        t = rows[DISPLACED, d]
        for j in range(m):
            if micro[SPLIT, t, j] == -1 and not _place_greedy(t, j, tables, micro, rows, scalars, bound):
                pending += 1
    # Once one failure has found the rooms far, the next ones at the same bound (the level
    # is only tighter) search from every type at once from the start.
    deep = scalars[FAR_BOUND] == bound
    d = 0
    while pending > 0:
        if deep:
            placed = _place_routed(np.int64(displaced_count), tables, micro, rows, scalars, np.int64(bound), stamp)
        else:
            while _unplaced_index(np.int64(rows[DISPLACED, d]), micro) < 0:
                d += 1
            length, placed = _place_nearest(rows[DISPLACED, d], tables, micro, rows, scalars, bound, stamp)
            # The rest of the call goes to searches from every type at once once more
            # searches like this one would cost more than one search of every live group:
            # the rooms are far.
            deep = scalars[REACHED] * (pending - placed) > n - failed_count
            if deep:
                scalars[FAR_BOUND] = bound
            if length >= 0:
                pending -= placed
                continue
        if placed > 0:
            pending -= placed
            continue
        # No augmenting path: Hall's condition fails for capacity L, so L* > L.  The
        # paths taken at L were only needed at L: undo them, so that the call's moves
        # are those of the new level (a few greedy ones), not of a long search.
        _roll_back_call(tables, micro, rows, scalars)
        bound += 1
        deep = False
        d = 0
        pending = 0
        for e in range(displaced_count):
            v = rows[DISPLACED, e]
            for j in range(m):
                if micro[SPLIT, v, j] == -1 and not _place_greedy(v, j, tables, micro, rows, scalars, bound):
                    pending += 1
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
    scalars[LABEL_BOUND] = -1  # the distance labels are reset at their first use
    scalars[CERT_TARGET] = 0
    scalars[FAR_BOUND] = 0


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


# ----------------------------------------------------------------------------- rejoins
# Fields of one shift in the undo log of a lowering attempt.
_SHIFT_FIELDS = 5


@kernel
def _room_path(root, tables, rows, scalars, target):
    """Breadth-first search of the residual graph from the group ``root`` (load above
    ``target``) to the nearest group with load below ``target``; the path is written to
    ``PATH_*[0 .. depth]``.  Returns ``depth`` (>= 1), or -1 when no such group is
    reachable (then the groups reached violate Hall's condition for capacity ``target``,
    see :func:`recover_split`).  ``scalars[REACHED]`` is how many groups it queued."""
    stacks = tables[STACKS]
    holder_groups = tables[HOLDER_GROUPS]
    count = tables[COUNT]
    alive = rows[ALIVE]
    load = rows[LOAD]
    visit = rows[VISIT]
    level = rows[LEVEL]
    queue = rows[QUEUE]
    r = stacks.shape[1]
    if scalars[VISIT_COUNTER] >= _STAMP_LIMIT:
        visit[:] = 0
        rows[TYPE_VISIT, :] = 0  # the stamp is shared with the searches of fail_split
        scalars[VISIT_COUNTER] = 0
    scalars[VISIT_COUNTER] += 1
    mark = np.int32(scalars[VISIT_COUNTER])
    visit[root] = mark
    level[root] = 0
    rows[PARENT_GROUP, root] = -1
    queue[0] = root
    tail = 1
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
                level[h] = level[g] + 1
                rows[PARENT_GROUP, h] = g
                rows[PARENT_FROM_LAYER, h] = layer
                rows[PARENT_TO_LAYER, h] = tables[HOLDER_LAYERS, u, i]
                queue[tail] = h
                tail += 1
                if load[h] < target:
                    found = h
                    break
            if found >= 0:
                break
    scalars[REACHED] = tail
    if found < 0:
        return -1
    depth = level[found]
    h = found
    for k in range(depth, 0, -1):
        rows[PATH_GROUP, k] = h
        rows[PATH_FROM_LAYER, k] = rows[PARENT_FROM_LAYER, h]
        rows[PATH_TO_LAYER, k] = rows[PARENT_TO_LAYER, h]
        h = rows[PARENT_GROUP, h]
    rows[PATH_GROUP, 0] = root
    return depth


@kernel
def _labelled_room_path(root, tables, rows, scalars, target):
    """:func:`_room_path` by the shortest augmenting path algorithm of Ahuja and Orlin with
    distance labels: a shortest path while the labels are lower bounds, and -1 only
    after an exact relabelling, so only when no path exists.

    ``DISTANCE[g]`` estimates the residual distance from ``g`` to a group with load
    below ``target`` (``N``: none).  The path grows from ``root`` along admissible arcs
    (to a label one lower, through a current-arc pointer); a full group with no
    admissible arc is relabelled (one more than its least residual neighbour) and the
    path retreats.  The path found has the length of its root's label, so while the
    labels are lower bounds on the distances (they are after an exact relabelling, and
    admissible augmentations keep them so) it is a shortest path.  The labels are kept
    between searches of the same target; other changes of the split may leave some too
    high or too low, which costs relabels or a longer path but never a wrong answer:
    they are recomputed exactly (:func:`_global_relabel`, one backward breadth-first
    search) when the target changes, after ``N`` relabels (so the search ends), and
    before any answer that no path exists.

    References: R. K. Ahuja and J. B. Orlin, "Distance-directed augmenting path
    algorithms for maximum flow and parametric maximum flow problems", Naval Research
    Logistics 38 (1991); Ahuja, Magnanti and Orlin, "Network Flows" (1993), Sec. 7.4.
    """
    stacks = tables[STACKS]
    holder_groups = tables[HOLDER_GROUPS]
    holder_layers = tables[HOLDER_LAYERS]
    count = tables[COUNT]
    alive = rows[ALIVE]
    load = rows[LOAD]
    distance = rows[DISTANCE]
    current = rows[CURRENT]
    n, r = stacks.shape
    arcs = r * r
    exact = False
    if scalars[LABEL_BOUND] != target:
        _global_relabel(tables, rows, scalars, target)
        exact = True
    while True:
        if distance[root] >= n:
            if exact:
                return -1
            _global_relabel(tables, rows, scalars, target)
            exact = True
            continue
        rows[PATH_GROUP, 0] = root
        depth = 0
        while depth >= 0:
            g = rows[PATH_GROUP, depth]
            if depth > 0 and load[g] < target:
                return depth
            advanced = False
            while current[g] < arcs:
                arc = current[g]
                layer = arc // r
                if count[g, layer] == 0:
                    current[g] = (layer + 1) * r
                    continue
                u = stacks[g, layer]
                i = arc - layer * r
                h = holder_groups[u, i]
                if h != g and alive[h] != 0 and distance[h] == distance[g] - 1:
                    depth += 1
                    rows[PATH_GROUP, depth] = h
                    rows[PATH_FROM_LAYER, depth] = layer
                    rows[PATH_TO_LAYER, depth] = holder_layers[u, i]
                    advanced = True
                    break
                current[g] = arc + 1
            if advanced:
                continue
            lowest = n
            for layer in range(r):
                if count[g, layer] == 0:
                    continue
                u = stacks[g, layer]
                for i in range(r):
                    h = holder_groups[u, i]
                    if h != g and alive[h] != 0 and distance[h] + 1 < lowest:
                        lowest = distance[h] + 1
            distance[g] = lowest
            current[g] = 0
            exact = False
            scalars[RELABELS] += 1
            depth -= 1
            if scalars[RELABELS] > n:
                _global_relabel(tables, rows, scalars, target)
                exact = True
                break


@kernel
def _shift(u, jj, g, h, from_layer, to_layer, tables, micro, rows, scalars):
    """Micro-batch ``(u, jj)`` goes from group ``g`` (layer ``from_layer`` of its row) to ``h``."""
    count = tables[COUNT]
    micro[SPLIT, u, jj] = h
    _add_units(np.int64(g), np.int64(from_layer), np.int64(-1), count, rows, scalars)
    _add_units(np.int64(h), np.int64(to_layer), np.int64(1), count, rows, scalars)
    rows[LOAD, g] -= 1
    rows[LOAD, h] += 1


@kernel
def _shift_path(depth, tables, micro, rows, scalars, stamp, undo, undo_count):
    """Shift one micro-batch along every arc of ``PATH_GROUP[0 .. depth]`` (the first group's
    load falls by one, the last one's grows by one), logging each shift for the call's
    change log and in ``undo``; returns the new ``undo_count`` (-1: ``undo`` is full)."""
    stacks = tables[STACKS]
    if undo_count + depth * _SHIFT_FIELDS > undo.size:
        return -1
    for k in range(depth, 0, -1):
        g = rows[PATH_GROUP, k - 1]
        h = rows[PATH_GROUP, k]
        from_layer = rows[PATH_FROM_LAYER, k]
        to_layer = rows[PATH_TO_LAYER, k]
        u = stacks[g, from_layer]
        jj = _pick_entry(u, g, micro, stamp)
        _log(u, jj, micro, scalars, stamp)
        _shift(u, jj, g, h, from_layer, to_layer, tables, micro, rows, scalars)
        undo[undo_count] = u * micro.shape[2] + jj
        undo[undo_count + 1] = g
        undo[undo_count + 2] = h
        undo[undo_count + 3] = from_layer
        undo[undo_count + 4] = to_layer
        undo_count += _SHIFT_FIELDS
    return undo_count


@kernel
def _keep_certificate(tables, rows, scalars, target, closed, size):
    """Keep the Hall violation that a failed lowering attempt found: ``rows[QUEUE, :size]``
    (``closed`` False) or the live groups with label ``N`` (``closed`` True) are a set
    ``G'`` closed under residual arcs, every group at ``target`` or above and one above
    it; the types ``T'`` they compute part of then have ``m |T'| > target |H(T')|``.
    Stamps ``T'`` in ``rows[CERT_TYPE]`` and counts ``|H(T')|`` (``H(T') <= G'``)."""
    stacks = tables[STACKS]
    count = tables[COUNT]
    n, r = stacks.shape
    queue = rows[QUEUE]
    if closed:
        size = 0
        for g in range(n):
            if rows[ALIVE, g] != 0 and rows[DISTANCE, g] >= n:
                queue[size] = g
                size += 1
    if scalars[CERT_ID] >= _STAMP_LIMIT:
        rows[CERT_TYPE, :] = 0
        scalars[CERT_ID] = 0
    scalars[CERT_ID] += 1
    mark = np.int32(scalars[CERT_ID])
    types = 0
    for i in range(size):
        g = queue[i]
        for layer in range(r):
            u = stacks[g, layer]
            if count[g, layer] > 0 and rows[CERT_TYPE, u] != mark:
                rows[CERT_TYPE, u] = mark
                types += 1
    holders = 0
    for i in range(size):
        g = queue[i]
        for layer in range(r):
            if rows[CERT_TYPE, stacks[g, layer]] == mark:
                holders += 1
                break
    scalars[CERT_TYPES] = types
    scalars[CERT_HOLDERS] = holders
    scalars[CERT_TARGET] = target


@kernel
def _lower_split(tables, micro, rows, scalars, target, stamp):
    """Bring every live group's load down to ``target`` (all are at most ``target + 1``) by
    augmenting paths from each group above it to a group below it; True on success.

    When no path exists for some group, no split has loads at most ``target`` (the
    reached groups violate Hall's condition, see :func:`recover_split`): every shift of
    the attempt is undone, the split is as before and False is returned."""
    n = rows.shape[1]
    m = micro.shape[2]
    alive = rows[ALIVE]
    load = rows[LOAD]
    over = 0
    for g in range(n):
        if alive[g] != 0 and load[g] > target:
            rows[DISPLACED, over] = g
            over += 1
    undo = np.empty(_SHIFT_FIELDS * max(16, 4 * over), dtype=np.int32)
    undo_count = 0
    searched = 0
    live = n - scalars[FAILED_COUNT]
    deep = False
    ok = True
    for o in range(over):
        g = rows[DISPLACED, o]
        while load[g] > target:
            labelled = deep
            if deep:
                depth = _labelled_room_path(g, tables, rows, scalars, target)
            else:
                depth = _room_path(g, tables, rows, scalars, target)
                searched += scalars[REACHED]
                # Far rooms: the rest of the attempt goes to the labelled search once the
                # breadth-first searches have cost more than one search of every live group.
                deep = searched > live
            if depth < 0:
                _keep_certificate(tables, rows, scalars, target, labelled, scalars[REACHED])
                ok = False
                break
            while True:
                new_count = _shift_path(depth, tables, micro, rows, scalars, stamp, undo, undo_count)
                if new_count >= 0:
                    undo_count = new_count
                    break
                grown = np.empty(2 * undo.size + _SHIFT_FIELDS * depth, dtype=np.int32)
                grown[:undo_count] = undo[:undo_count]
                undo = grown
        if not ok:
            break
    if ok:
        return True
    while undo_count > 0:
        undo_count -= _SHIFT_FIELDS
        entry = undo[undo_count]
        _shift(entry // m, entry % m, undo[undo_count + 2], undo[undo_count + 1], undo[undo_count + 4],
               undo[undo_count + 3], tables, micro, rows, scalars)
    return False


@kernel
def _level_fall_too_wide(tables, rows, scalars, back, m, widest_fall):
    """Would this rejoin try a lower level with more than ``widest_fall`` live groups above
    it?  The first test of :func:`recover_split`'s loop, made before anything changes: the
    returning groups come back empty, so the groups above ``L - 1`` are the live ones."""
    stacks = tables[STACKS]
    n, r = stacks.shape
    bound = scalars[BOUND]
    live_after = n - scalars[FAILED_COUNT] + back.size
    lowest = (m * n + live_after - 1) // live_after
    if bound <= lowest:
        return False
    target = bound - 1
    if scalars[CERT_TARGET] == target:
        holders = scalars[CERT_HOLDERS]
        for i in range(back.size):
            for layer in range(r):
                if rows[CERT_TYPE, stacks[back[i], layer]] == scalars[CERT_ID]:
                    holders += 1
                    break
        if m * scalars[CERT_TYPES] > target * holders:
            return False  # the kept Hall violation still holds: no search
    over = 0
    for g in range(n):  # no more than the scan the lowering attempt would make
        if rows[ALIVE, g] != 0 and rows[LOAD, g] > target:
            over += 1
            if over > widest_fall:
                return True
    return False


@kernel
def recover_split(tables, micro, rows, scalars, back, journal, widest_fall):
    """Bring the failed groups ``back`` (int32 array) back and re-plan.

    Returns ``(status, load, stack_number, failed_count, moves, journal_end)``.
    ``STATUS_JOURNAL_FULL``: the journal has less room than one record may need;
    ``STATUS_NOT_FAILED``: group ``failed_count`` is live;
    ``STATUS_LEVEL_FALL_DEFERRED``: the level would be tried one lower with more than
    ``widest_fall`` live groups above it (one augmenting path each: the caller solves
    this rejoin globally instead, ``ReorderController.recover``); in these cases nothing
    was changed.  Otherwise ``micro[SPLIT]`` is the new plan and the journal (if kept)
    holds one more undo record.

    A returning group comes back with no work.  Then ``L`` falls while a lower level is
    feasible: ``L* >= ceil(m N / (N - k))`` (Hall's condition for all types), so while
    ``L`` is above that bound the groups at load ``L`` each give one micro-batch away
    along a shortest augmenting path ``g0 -u0-> g1 -u1-> ... -> gk`` (``g_i`` computes
    part of ``u_i``, ``g_{i+1}`` holds it, ``gk`` has load below ``L - 1``: typically a
    returning group, the reverse of a failure's path), and ``L`` becomes ``L - 1``.  If
    some group at ``L`` has no such path, the groups ``G'`` it reaches are at load
    ``L - 1`` or more (it at ``L``), they hold every live holder of the types ``T'``
    they compute part of, and all micro-batches of ``T'`` are on ``G'``: ``m |T'| >=
    (L - 1) |G'| + 1 > (L - 1) |H(T')|``, so Hall's condition fails for ``L - 1`` and
    ``L* = L``; the attempt is undone.  When ``L`` stays, no micro-batch moves (the
    previous split is still valid at ``L*``), as in the exact planner.

    The violation found is kept (:func:`_keep_certificate`): ``T'`` and an upper bound
    on ``|H(T')|``, which failures only lower and each returning holder raises by one.
    While ``L`` is the same and ``m |T'| > (L - 1) |H(T')|`` still holds, a rejoin
    costs ``O(r)`` per returning group and no search (the attempt would fail again).
    """
    stacks = tables[STACKS]
    n, r = stacks.shape
    m = micro.shape[2]
    if journal.size > 0 and journal.size - scalars[JOURNAL_END] < 2 * n * m + 3:
        return STATUS_JOURNAL_FULL, 0, 0, 0, 0, scalars[JOURNAL_END]
    alive = rows[ALIVE]
    for i in range(back.size):
        if alive[back[i]] != 0:
            return STATUS_NOT_FAILED, 0, 0, np.int64(back[i]), 0, scalars[JOURNAL_END]
    if _level_fall_too_wide(tables, rows, scalars, back, m, widest_fall):
        return STATUS_LEVEL_FALL_DEFERRED, 0, 0, 0, 0, scalars[JOURNAL_END]
    certified = scalars[CERT_TARGET] > 0
    for i in range(back.size):
        g = back[i]
        if certified:  # a returning holder of the certificate's types (counted once)
            for layer in range(r):
                if rows[CERT_TYPE, stacks[g, layer]] == scalars[CERT_ID]:
                    scalars[CERT_HOLDERS] += 1
                    break
        alive[g] = 1
        rows[LOAD, g] = 0
        rows[TOUCHED, g] = 0
        scalars[HISTOGRAM] += 1
        for layer in range(r):
            rows[LIVE_HOLDERS, stacks[g, layer]] += 1
    kept = 0
    for i in range(scalars[FAILED_COUNT]):  # the failure sequence keeps its order
        g = rows[SEQUENCE, i]
        if alive[g] == 0:
            rows[SEQUENCE, kept] = g
            kept += 1
    failed_count = kept
    scalars[FAILED_COUNT] = failed_count

    if scalars[CALL_STAMP] >= _STAMP_LIMIT:
        micro[STAMP, :, :] = 0
        rows[TYPE_STAMP, :] = 0
        scalars[CALL_STAMP] = 0
    scalars[CALL_STAMP] += 1
    stamp = np.int32(scalars[CALL_STAMP])
    scalars[LOG_COUNT] = 0
    scalars[FAR_BOUND] = 0
    bound = scalars[BOUND]
    lowest = (m * n + (n - failed_count) - 1) // (n - failed_count)
    while bound > lowest:
        target = bound - 1
        if scalars[CERT_TARGET] == target and m * scalars[CERT_TYPES] > target * scalars[CERT_HOLDERS]:
            break  # the Hall violation of the last failed attempt still holds: no search
        if not _lower_split(tables, micro, rows, scalars, target, stamp):
            break
        bound -= 1
    scalars[BOUND] = bound

    moves = 0
    for c in range(scalars[LOG_COUNT]):
        entry = micro[LOG_ENTRY, c // m, c % m]
        if micro[SPLIT, entry // m, entry % m] != micro[LOG_OLD, c // m, c % m]:
            moves += 1
    if journal.size > 0:
        _write_journal(journal, micro, scalars)
    return STATUS_MASKED, bound, scalars[WIDEST], failed_count, moves, scalars[JOURNAL_END]

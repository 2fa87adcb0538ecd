"""Checks of a controller state before :meth:`ReorderController.load_state_dict` adopts it (private).

A state crosses process boundaries (a heal from a peer, a file): it can arrive truncated,
flipped, or written by another release.  The numba kernels trust their arrays (no bounds
checks), so a state is adopted only when

1. its checksum (:func:`state_checksum`, BLAKE2b over the metadata and every array)
   verifies: an accidental corruption is refused whatever it touched, caches included;
2. every value the kernels use as an index is in range and the state is consistent:
   the failed set (``alive`` flags, the failure sequence and its count) agrees with
   itself; at ``m = 1`` every live shard type is assigned to a live holder within the
   top ``S`` of that holder's order, the orders of live groups are permutations of
   their layout rows (failed rows ``-1``) and ``pos`` inverts them; at ``m > 1`` every
   micro-batch is computed by a live holder of its type; loads, live-holder counts and
   (at ``m > 1``) per-layer counts, distinct-type counts, their histogram and the
   widest equal the values recomputed from the assignment; stamps are at most their
   counters; search labels and arcs are in range; a kept Hall violation is a real one;
3. its level (``S`` at ``m = 1``, ``L`` at ``m > 1``) is the least feasible one for its
   failed set, the level a fresh controller reaches for that set (both are exact).

So a state that passes 2 and 3 (even with a forged checksum) cannot send a kernel out of
range, and the plans it gives are valid plans at the optimal level.  The cost is linear in
the state's size plus one :meth:`ReorderController.set_failed` (``docs/benchmarks.md``,
"Loading a controller state").
"""

import hashlib

import numpy as np

from . import _kernels as _k
from . import _split_kernels as _s
from .._core.errors import ParameterError

_INT32 = np.iinfo(np.int32)


def _error(what):
    return ParameterError(f"corrupt controller state: {what}")


def state_checksum(meta, arrays):
    """BLAKE2b-128 hex digest of the state's metadata and arrays (``dict`` name -> array).

    The arrays are hashed in their kernel dtypes (int32, int64 scalars) in C order, so
    a state saved with ``numpy.savez`` or ``torch.save`` verifies on any machine of the
    same byte order."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr(meta).encode())
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(memoryview(array).cast("B"))  # no copy of the bytes
    return digest.hexdigest()


def checksum_meta(state):
    """The metadata the checksum covers (format, version, layout, m, wiped_out)."""
    return (state.get("format"), state.get("version"), state.get("layout"), state.get("micro_batches"),
            state.get("wiped_out"))


def to_kernel_dtypes(arrays, names, template):
    """The state's arrays as C-ordered copies in the kernels' dtypes, refusing values that
    do not fit (a cast would wrap them silently)."""
    loaded = []
    for name, expected in zip(names, template):
        value = np.asarray(arrays[name])
        if value.shape != expected.shape or not np.issubdtype(value.dtype, np.integer):
            raise ParameterError(f"controller state array {name!r} has shape {value.shape} and dtype "
                                 f"{value.dtype}, expected {expected.shape} of integers")
        info = np.iinfo(expected.dtype)
        if value.size and (value.min() < info.min or value.max() > info.max):
            raise _error(f"array {name!r} holds values outside {expected.dtype}")
        loaded.append(np.array(value, dtype=expected.dtype, order="C", copy=True))
    return loaded


def _in_range(name, values, low, high):
    """Every entry of ``values`` in ``[low, high]`` (inclusive)."""
    if values.size and (values.min() < low or values.max() > high):
        bad = values[(values < low) | (values > high)]
        raise _error(f"{name} holds {int(bad.flat[0])}, outside [{low}, {high}]")


def _same(name, stored, expected):
    if not np.array_equal(stored, expected):
        raise _error(f"{name} does not match the values recomputed from the assignment")


def _failed_set(alive, sequence_row, failed_count, n):
    """Check the alive flags against the failure sequence; return the failed groups (int32)."""
    _in_range("the alive flags", alive, 0, 1)
    _in_range("the failed count", np.array([failed_count]), 0, n)
    k = int(failed_count)
    sequence = sequence_row[:k]
    _in_range("the failure sequence", sequence, 0, n - 1)
    _in_range("the failure sequence (unused entries)", sequence_row, -1, n - 1)
    if np.unique(sequence).size != k:
        raise _error("the failure sequence repeats a group")
    if int((alive == 0).sum()) != k or (k and alive[sequence].any()):
        raise _error(f"the alive flags do not match the failure sequence of {k} group(s)")
    return sequence.astype(np.int32)


def _stamps(name, stamps, counter):
    _in_range(f"the counter of {name}", np.array([counter]), 0, _k._STAMP_LIMIT)
    _in_range(name, stamps, 0, int(counter))


def _check_holders(layout_tables, stored_tables, alive, sequence_row, failed_count, journal_end, stored_live_holders,
                   wiped):
    """The checks both kernel layouts share: the layout tables, the failed set, the journal
    and the live-holder counts against ``wiped``.  Returns ``(failed, live_holders)``, with
    ``live_holders`` None for a wiped-out state (nothing more to check)."""
    stacks, holder_groups, _ = layout_tables
    for name, stored, expected in zip(("the layout table", "the holder table", "the holder-layer table"),
                                      stored_tables, layout_tables):
        _same(name, stored, expected)
    failed = _failed_set(alive, sequence_row, failed_count, stacks.shape[0])
    if journal_end != 0:
        raise _error("the journal offset is not 0 (a state carries no journal)")
    live_holders = (alive[holder_groups] != 0).sum(axis=1)
    if wiped:
        if live_holders.min() > 0:
            raise _error("wiped_out is True but every shard type has a live holder")
        return failed, None
    _same("the live-holder counts", stored_live_holders, live_holders)
    if live_holders.min() == 0:
        raise _error("wiped_out is False but a shard type has no live holder")
    return failed, live_holders


def check_single(layout_tables, loaded, wiped):
    """Check an ``m = 1`` state ``(tables, rows, scalars)``; return its failed groups."""
    stacks, holder_groups, holder_layers = layout_tables
    tables, rows, scalars = loaded
    n, r = stacks.shape
    group_state = rows[_k.GROUP_STATE_START:_k.SHARD_STATE_START]
    shard_state = rows[_k.SHARD_STATE_START:_k.SCRATCH_START]
    alive = group_state[_k.ALIVE]
    failed, live_holders = _check_holders(
        layout_tables, [tables[_k.TABLE_STACKS], tables[_k.TABLE_HOLDER_GROUPS], tables[_k.TABLE_HOLDER_LAYERS]],
        alive, group_state[_k.SEQUENCE], scalars[_k.FAILED_COUNT], scalars[_k.JOURNAL_END],
        shard_state[_k.LIVE_HOLDERS], wiped)
    if live_holders is None:
        return failed
    stack = int(scalars[_k.STACK])
    _in_range("the stack number S", np.array([stack]), 1, r)
    live = alive != 0
    order = tables[_k.TABLE_ORDER]
    if (order[~live] != -1).any():
        raise _error("a failed group has an order row")
    if not np.array_equal(np.sort(order[live], axis=1), np.sort(stacks[live], axis=1)):
        raise _error("a live group's order is not a permutation of its layout row")
    pos = tables[_k.TABLE_POS]
    _in_range("the order positions", pos, 0, r - 1)
    expected_pos = (order[live][:, :, None] == stacks[live][:, None, :]).argmax(axis=1)
    _same("the order positions of live groups", pos[live], expected_pos)
    assigned = shard_state[_k.ASSIGNED]
    _in_range("the assignment", assigned, 0, n - 1)
    holds = holder_groups == assigned[:, None]
    if not holds.any(axis=1).all():
        raise _error("a shard type is assigned to a group that does not hold it")
    if not live[assigned].all():
        raise _error("a shard type is assigned to a failed group")
    types = np.arange(n)
    layer = holder_layers[types, holds.argmax(axis=1)]
    if (pos[assigned, layer] >= stack).any():
        raise _error(f"a shard type is assigned outside its group's top S = {stack} layers")
    load = np.bincount(assigned, minlength=n)
    _same("the loads", group_state[_k.LOAD], load)
    _stamps("the visit stamps", group_state[_k.VISIT], scalars[_k.VISIT_COUNTER])
    _stamps("the row stamps", group_state[_k.ROW_STAMP], scalars[_k.CALL_STAMP])
    _stamps("the shard stamps", shard_state[_k.SHARD_STAMP], scalars[_k.CALL_STAMP])
    return failed


def check_split(layout_tables, loaded, wiped, m):
    """Check an ``m > 1`` state ``(tables, micro, rows, scalars)``; return its failed groups."""
    stacks, holder_groups, holder_layers = layout_tables
    tables, micro, rows, scalars = loaded
    n, r = stacks.shape
    alive = rows[_s.ALIVE]
    failed, live_holders = _check_holders(
        layout_tables, [tables[_s.STACKS], tables[_s.HOLDER_GROUPS], tables[_s.HOLDER_LAYERS]],
        alive, rows[_s.SEQUENCE], scalars[_s.FAILED_COUNT], scalars[_s.JOURNAL_END], rows[_s.LIVE_HOLDERS],
        wiped)
    if live_holders is None:
        return failed
    live = alive != 0
    split = micro[_s.SPLIT]
    _in_range("the split", split, 0, n - 1)
    holds = holder_groups[:, None, :] == split[:, :, None]  # (N, m, r)
    if not holds.any(axis=2).all():
        raise _error("a micro-batch is computed by a group that does not hold its type")
    if not live[split].all():
        raise _error("a micro-batch is computed by a failed group")
    layers = np.take_along_axis(holder_layers[:, None, :].repeat(m, axis=1), holds.argmax(axis=2)[:, :, None],
                                axis=2)[:, :, 0]
    counts = np.bincount((split.astype(np.int64) * r + layers).ravel(), minlength=n * r).reshape(n, r)
    _same("the per-layer counts", tables[_s.COUNT], counts)
    load = np.bincount(split.ravel(), minlength=n)
    _same("the loads", rows[_s.LOAD], load)
    bound = int(scalars[_s.BOUND])
    _in_range("the load bound L", np.array([bound]), m, n * m)
    if load.max() > bound:
        raise _error(f"a group's load is above the bound L = {bound}")
    touched = np.where(live, (counts > 0).sum(axis=1), 0)
    _same("the distinct-type counts", rows[_s.TOUCHED], touched)
    histogram = np.bincount(touched[live], minlength=r + 1)
    _same("the histogram of distinct-type counts", scalars[_s.HISTOGRAM:], histogram)
    widest = int(touched[live].max()) if live.any() else 0
    if scalars[_s.WIDEST] != widest:
        raise _error("the stack number does not match the split")
    _stamps("the visit stamps", rows[_s.VISIT], scalars[_s.VISIT_COUNTER])
    _stamps("the type visit stamps", rows[_s.TYPE_VISIT], scalars[_s.VISIT_COUNTER])
    _stamps("the type stamps", rows[_s.TYPE_STAMP], scalars[_s.CALL_STAMP])
    _stamps("the micro-batch stamps", micro[_s.STAMP], scalars[_s.CALL_STAMP])
    _stamps("the certificate stamps", rows[_s.CERT_TYPE], scalars[_s.CERT_ID])
    _in_range("the distance labels", rows[_s.DISTANCE], 0, n)
    _in_range("the current arcs", rows[_s.CURRENT], 0, r * r)
    _in_range("the label bound", np.array([scalars[_s.LABEL_BOUND]]), -1, n * m)
    _in_range("the relabel count", np.array([scalars[_s.RELABELS]]), 0, n + 1)
    _in_range("the search size", np.array([scalars[_s.REACHED]]), 0, n)
    _in_range("the far bound", np.array([scalars[_s.FAR_BOUND]]), 0, n * m)
    _in_range("the waiting counts", rows[_s.WAITING], 0, m)
    target = int(scalars[_s.CERT_TARGET])
    _in_range("the certificate's level", np.array([target]), 0, n * m)
    if target > 0:
        marked = rows[_s.CERT_TYPE] == scalars[_s.CERT_ID]
        holders = np.unique(holder_groups[marked].ravel())
        live_count = int(live[holders].sum())
        # The kernel trusts it while m |T| > target CERT_HOLDERS: sound only if CERT_HOLDERS
        # bounds the live holders of the types T from above.
        if scalars[_s.CERT_TYPES] != int(marked.sum()) or scalars[_s.CERT_HOLDERS] < live_count:
            raise _error("the kept Hall violation does not hold for its types")
    return failed

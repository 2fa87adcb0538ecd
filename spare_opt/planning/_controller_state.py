"""Packed states, undo journals, lazy plans and state transfer of the online controller (private).

What :class:`~spare_opt.planning.controller.ReorderController` works on: the packed arrays
of the numba kernels (:mod:`spare_opt.planning._kernels` at ``m = 1``,
:mod:`spare_opt.planning._split_kernels` at ``m > 1``), built fault-free or from a split;
the undo journal of one controller epoch (:class:`_History`, :class:`_SplitHistory`);
:class:`_LazyPlan`, the plan the controller returns, whose arrays are read back from that
journal on first access; and the bodies of ``state_dict`` / ``load_state_dict``
(:func:`_state_dict`, :func:`_load_state_dict`).  The compiled trajectories
(:mod:`spare_opt.planning.trajectories`) start from the same fault-free states.
"""

import numpy as np

from . import _kernels as _k
from . import _split_kernels as _s
from . import _state_check as _check_state
from .plan import Plan, _derived_order, _holders_by_layer, _split_layers, _touched_layers


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


# ------------------------------------------------------- state transfer
_STATE_FORMAT = "spare-controller-state"


def _state_dict(controller):
    """The body of :meth:`ReorderController.state_dict`: ``controller``'s packed state, copied, with its checksum."""
    names = ("tables", "rows", "scalars") if controller._micro_batches == 1 else ("tables", "micro", "rows", "scalars")
    arrays = {name: getattr(controller, "_" + name).copy() for name in names}
    arrays["scalars"][_k.JOURNAL_END if controller._micro_batches == 1 else _s.JOURNAL_END] = 0
    state = {"format": _STATE_FORMAT, "version": 1, "layout": controller._layout.fingerprint(),
             "micro_batches": controller._micro_batches, "wiped_out": bool(controller._wiped), "arrays": arrays}
    state["checksum"] = _check_state.state_checksum(_check_state.checksum_meta(state), arrays)
    return state


def _load_state_dict(controller, state):
    """The body of :meth:`ReorderController.load_state_dict`: every check, then the adoption.

    Raises the errors (word for word) that :meth:`ReorderController.load_state_dict` documents;
    nothing is adopted before the last check passed.
    """
    from .._core.errors import ParameterError

    if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT or state.get("version") != 1:
        raise ParameterError("not a controller state: expected the dict of ReorderController.state_dict() "
                             f"(format {_STATE_FORMAT!r}, version 1)")
    if state.get("layout") != controller._layout.fingerprint():
        raise ParameterError(f"the controller state belongs to layout {state.get('layout')!r}, "
                             f"not to this controller's layout {controller._layout.fingerprint()!r}")
    if state.get("micro_batches") != controller._micro_batches:
        raise ParameterError(f"the controller state has micro_batches m = {state.get('micro_batches')!r}, "
                             f"this controller m = {controller._micro_batches}")
    wiped = state.get("wiped_out")
    if not isinstance(wiped, (bool, np.bool_)):
        raise ParameterError(f"corrupt controller state: wiped_out must be a bool, got {wiped!r}")
    wiped = bool(wiped)
    controller._fault_free_copy()  # builds the template once; its shapes and dtypes are read here, not copied
    template = controller._template
    names = ("tables", "rows", "scalars") if controller._micro_batches == 1 else ("tables", "micro", "rows", "scalars")
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
    layout_tables = (controller._layout.stacks, *controller._holder_tables())
    if controller._micro_batches == 1:
        failed = _check_state.check_single(layout_tables, loaded, wiped)
        level = int(loaded[2][_k.STACK])
    else:
        failed = _check_state.check_split(layout_tables, loaded, wiped, controller._micro_batches)
        level = int(loaded[3][_s.BOUND])
    if not wiped:
        # The level must be the least feasible one for the failed set: a fresh
        # controller's (both are exact), so that later plans keep the exact level.
        least = controller._set_failed_level(np.sort(failed))
        if least != level:
            raise ParameterError(f"corrupt controller state: its level {level} is not the least one, "
                                 f"{least}, for its {failed.size} failed group(s)")
    if controller._micro_batches == 1:
        controller._load_state(*loaded)
    else:
        controller._load_split_state(*loaded)
    controller._wiped = wiped

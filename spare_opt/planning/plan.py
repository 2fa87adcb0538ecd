"""The reorder plan: what every DP group does after a failure.

Both the exact planner (:func:`spare_opt.plan_reorder`) and the online controller
(:class:`spare_opt.ReorderController`) return a :class:`Plan`; :func:`check_plan` is
the one definition of a valid plan that tests hold both to (:func:`is_valid_plan` is
its yes/no form).

With ``m`` micro-batches per shard type (fractional stacking,
``docs/planner.md`` "Micro-batches"), micro-batch ``j`` of shard type ``t`` is the
pair ``(t, j)``; a plan's ``split[t, j]`` is the live group that computes it.  ``m = 1``
is the paper's model.
"""

import hashlib
import math
import struct
from collections import namedtuple
from dataclasses import dataclass, field

import numpy as np

from .._core.results import Result
from .._core.errors import ParameterError, PlanError
from ._plan_checks import _check_masked_plan, _int_array, _is_int, _require
# The split-layer helpers are the planners' too: exact.py and controller.py import them from here.
from ._plan_checks import _derived_order, _holders_by_layer, _split_layers, _touched_layers  # noqa: F401
from ._plan_io import _INT32_MAX, _INT64_MAX, _PLAN_KEYS, _doc_array, _doc_integer, _patch_pairs

__all__ = [
    "Plan",
    "GroupWork",
    "PLAN_BYTES_MAGIC",
    "MASKED",
    "WIPE_OUT",
    "MAX_MICRO_BATCHES",
    "MAX_SPLIT_ENTRIES",
    "check_plan",
    "is_valid_plan",
    "lower_bound",
    "check_micro_batches",
]

MASKED = "masked"
WIPE_OUT = "wipe-out"

#: Largest ``N m`` (micro-batches per step) a plan or controller accepts.  The exact
#: planner peaks at about 80 bytes per micro-batch (measured: 0.99 GB at ``N m =
#: 1.2e7``), so this bound keeps it near 1.3 GB; ``N = 100,000`` still takes ``m = 167``.
MAX_SPLIT_ENTRIES = 1 << 24

#: Largest ``m``.  One failure moves about ``L* ~ m`` micro-batches and each one searches
#: for room, so the online controller's time per failure grows like ``m^2`` at large ``m``
#: (measured at ``N = 12``: 0.9 s per Monte-Carlo trial at ``m = 10,000``, 99 s at
#: ``m = 100,000``), while the step cost is within ``1/m`` of its physical limit
#: ``N / (N - k)`` long before (``docs/analysis.md``).
MAX_MICRO_BATCHES = 1024

#: First bytes of :meth:`Plan.to_bytes` (format version 1).
PLAN_BYTES_MAGIC = b"SPAREPLAN1"

class GroupWork:
    """Every group's work of one plan in compressed-sparse-row form (:meth:`Plan.work_by_group`).

    Indexing is by group: ``work[g]`` is group ``g``'s list of ``(shard type,
    micro-batch)`` pairs, sorted, the same as ``plan.work(g)`` for a live group and
    ``[]`` for a failed one; ``len(work)`` is ``N``.  The arrays are attributes.  It is
    not a tuple: ``indptr, types, batches = work`` and iterating over it raise
    ``TypeError`` (up to release 0.4.1 it was a named tuple, so ``work[0]`` was the
    ``indptr`` array, not group 0's work).

    Attributes
    ----------
    indptr : numpy.ndarray of int64, shape (N + 1,)
        Group ``g``'s work is entries ``indptr[g]`` to ``indptr[g + 1] - 1``; failed groups
        have an empty range.
    shard_types : numpy.ndarray of int32, shape (N m,)
        Shard type ``t`` of each entry.
    micro_batches : numpy.ndarray of int32, shape (N m,)
        Micro-batch ``j`` of each entry; within a group the pairs ``(t, j)`` are sorted.

    Raises
    ------
    ParameterTypeError
        ``work[g]`` with ``g`` not an integer (a bool, a float, a slice).
    FailureSetError
        ``work[g]`` with ``g`` outside ``[0, N)`` (negative ids are not counted from the end).
    """

    __slots__ = ("indptr", "shard_types", "micro_batches")

    def __init__(self, indptr, shard_types, micro_batches):
        self.indptr = indptr
        self.shard_types = shard_types
        self.micro_batches = micro_batches

    def __len__(self):
        return len(self.indptr) - 1

    def __getitem__(self, group):
        from .._core import validation as check
        from .._core.errors import FailureSetError

        g = check.integer("group", group)
        n = len(self)
        if not 0 <= g < n:
            raise FailureSetError(f"group {g} is out of range [0, {n})")
        start, end = int(self.indptr[g]), int(self.indptr[g + 1])
        return list(zip(self.shard_types[start:end].tolist(), self.micro_batches[start:end].tolist()))

    def __iter__(self):
        raise TypeError("GroupWork is indexed by group (work[g]); its arrays are work.indptr, work.shard_types "
                        "and work.micro_batches (it is no longer a tuple to unpack)")

    def __repr__(self):
        return f"GroupWork(groups={len(self)}, entries={len(self.shard_types)})"

    def __reduce__(self):
        return (GroupWork, (self.indptr, self.shard_types, self.micro_batches))


def lower_bound(groups, failed_count, micro_batches=1):
    """The load lower bound ``ceil(m N / (N - k))``; at ``m = 1`` the stack-number bound ``c(k)``.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N``.
    failed_count : int
        Number of failed groups ``k``, ``0 <= k``.
    micro_batches : int, default 1
        Micro-batches per shard type ``m``.

    Returns
    -------
    int or None
        ``ceil(m N / (N - k))``, in micro-batches (``c(k) = ceil(N / (N - k))`` at
        ``m = 1``); ``None`` when every group has failed (``k >= N``).

    Notes
    -----
    The ``N m`` micro-batches are spread over ``N - k`` live groups, so some group
    computes at least ``ceil(m N / (N - k))`` of them (Hall's condition for the set of
    all shard types).  Divided by ``m`` this is the least possible step cost, between
    the physical limit ``N / (N - k)`` and ``c(k)``.  No argument checks (it is on the
    controller's hot path); the validated public form of ``c(k)`` is
    :func:`spare_opt.theory.stack_lower_bound`.

    References
    ----------
    Lee et al., ICML 2026, arXiv:2603.00357, Sec. 4 (``c(k)``);
    ``docs/planner.md``, "Micro-batches".
    """
    if failed_count >= groups:
        return None
    return -(-(micro_batches * groups) // (groups - failed_count))


def check_micro_batches(micro_batches, groups):
    """``micro_batches`` as an ``int`` ``1 <= m <= MAX_MICRO_BATCHES`` with ``N m <= MAX_SPLIT_ENTRIES``.

    Parameters
    ----------
    micro_batches : int
        Micro-batches per shard type ``m``.
    groups : int
        Number of DP groups ``N``.

    Returns
    -------
    int

    Raises
    ------
    ParameterTypeError
        ``micro_batches`` is not an integer (a float or a bool).
    ParameterError
        ``m < 1``, ``m`` above :data:`MAX_MICRO_BATCHES` (1024), or ``N m`` above
        :data:`MAX_SPLIT_ENTRIES` (``2^24``).
    """
    from .._core import validation as check

    m = check.integer("micro_batches m", micro_batches, minimum=1)
    if m > MAX_MICRO_BATCHES:
        raise ParameterError(
            f"micro_batches m = {m:,} is above the limit of {MAX_MICRO_BATCHES:,}: the planners' work per failure "
            f"grows like m^2 and the step cost is within 1/{MAX_MICRO_BATCHES} of its limit N/(N-k) already"
        )
    if groups > MAX_SPLIT_ENTRIES:  # even m = 1 is too many: the limit is on N
        raise ParameterError(
            f"N = {groups:,} groups is above the limit of {MAX_SPLIT_ENTRIES:,} groups that the planner takes "
            f"(N m <= {MAX_SPLIT_ENTRIES:,} micro-batches, about 80 bytes each in the exact planner)"
        )
    if m * groups > MAX_SPLIT_ENTRIES:
        raise ParameterError(
            f"micro_batches m = {m:,} with N = {groups:,} groups gives N m = {m * groups:,} micro-batches, "
            f"above the limit of {MAX_SPLIT_ENTRIES:,} (the exact planner needs about 80 bytes each); "
            "choose a smaller m"
        )
    return m


@dataclass(eq=False)
class Plan(Result):
    """A reorder plan for one failure set (``docs/model.md``, "What happens on a failure").

    Attributes
    ----------
    status : str
        ``"masked"`` or ``"wipe-out"`` (some shard type has no live holder: global
        restart from the last checkpoint).
    stack_number : int or None
        At ``m = 1``, ``S*``: the least all-reduce stack number that covers every shard
        type with the live groups.  At ``m > 1``, the largest number of distinct shard
        types that one live group computes part of in this plan (a property of
        ``split``, at least ``c(k)``).  Every shard type a group computes lies in its
        top ``stack_number`` layers of ``order``.  ``None`` on a wipe-out.
    lower_bound : int or None
        ``c(k) = ceil(N / (N - k))`` for ``k`` failed groups, whatever ``m``;
        ``None`` when ``k = N``.
    failed : numpy.ndarray of int32, shape (k,)
        Every failed group, sorted.
    lost_shards : numpy.ndarray of int32
        Shard types with no live holder (non-empty exactly on a wipe-out).
    assignment : numpy.ndarray of int32, shape (N,) or None
        ``assignment[t]`` is the live group that contributes shard type ``t`` to the
        all-reduce (at ``m > 1``: micro-batch 0 of ``t``, ``split[:, 0]``); ``None`` on
        a wipe-out.
    order : numpy.ndarray of int32, shape (N, r) or None
        New stack order of every group: row ``g`` is a permutation of the layout's
        row ``g`` with the shard types ``g`` computes (the assigned ones at ``m = 1``)
        inside its top ``stack_number`` layers.  At ``m > 1`` it is derived from
        ``split``: the types ``g`` computes part of, then the others, each in layout
        order.  Rows of failed groups are ``-1``.  ``None`` on a wipe-out.
    moves : int
        At ``m = 1``, the assigned shard types that were not already in their group's
        top ``S*`` layers of the previous order (the paper's min-move objective).  At
        ``m > 1``, the micro-batches whose contributor differs from the previous
        ``split``.  0 on a wipe-out.
    patch : dict of int to list of (int, int)
        Patch compute of the current step, for each live group the work it must
        compute now because only groups that failed mid-step had it:
        ``(shard type, micro-batch)`` pairs at every ``m`` (micro-batch 0 at
        ``m = 1``), sorted.  Empty when nothing failed mid-step.
        :attr:`patch_shard_types` gives the shard types alone (the ``m = 1`` form of
        releases before 0.3).
    micro_batches : int
        ``m``, micro-batches per shard type (1: the paper's model).
    load : int or None
        ``L*``, the least largest number of micro-batches that one live group computes
        (``S*`` at ``m = 1``); ``None`` on a wipe-out.
    step_cost : float or None
        ``load / m``: the step's compute in layers (1.0 fault-free); ``None`` on a
        wipe-out.
    split : numpy.ndarray of int32, shape (N, m) or None
        ``split[t, j]`` is the live group that computes micro-batch ``j`` of shard type
        ``t`` (a holder of ``t``); no group is given more than ``load`` micro-batches.
        ``assignment[:, None]`` at ``m = 1``; ``None`` on a wipe-out.

    Notes
    -----
    Plans compare by value (``==`` compares the arrays element-wise), whichever planner
    made them.  A plan built with ``m = 1`` and no ``load``, ``step_cost`` or ``split``
    gets them from ``stack_number`` and ``assignment``; at ``m > 1`` a missing
    ``step_cost`` is ``load / m``.  A ``patch`` given in the old ``m = 1`` form
    (bare shard types) is converted to ``(t, 0)`` pairs with a
    :class:`DeprecationWarning`.

    :meth:`fingerprint` is a short hash that processes compare to check that they hold
    the same plan; :meth:`to_bytes` / :meth:`from_bytes` and :meth:`to_dict` /
    :meth:`from_dict` are lossless round trips (``docs/agreement.md``).
    """

    status: str
    stack_number: int | None
    lower_bound: int | None
    failed: np.ndarray
    lost_shards: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    assignment: np.ndarray | None = None
    order: np.ndarray | None = None
    moves: int = 0
    patch: dict = field(default_factory=dict)
    micro_batches: int = 1
    load: int | None = None
    step_cost: float | None = None
    split: np.ndarray | None = None

    def __post_init__(self):
        if self.micro_batches == 1 and self.status == MASKED:
            if self.load is None and self.stack_number is not None:
                self.load = self.stack_number
            if self.split is None and self.assignment is not None:
                self.split = np.asarray(self.assignment, dtype=np.int32).reshape(-1, 1).copy()
        if self.step_cost is None and self.load is not None:
            self.step_cost = self.load / self.micro_batches
        if self.patch:
            self.patch = _patch_pairs(self.patch, self.micro_batches)

    @property
    def patch_shard_types(self):
        """dict of int to list of int: the shard types of :attr:`patch` per group, sorted and distinct.

        The ``m = 1`` form of :attr:`patch` before release 0.3 (bare shard types);
        at ``m > 1`` a type appears once however many of its micro-batches a group
        patches.
        """
        return {g: sorted({int(t) for t, _ in items}) for g, items in self.patch.items()}

    @property
    def masked(self):
        """bool: whether the failure set is masked (no wipe-out)."""
        return self.status == MASKED

    def work(self, group):
        """The micro-batches that a live group computes this step and contributes to the all-reduce.

        Parameters
        ----------
        group : int
            A live group, in ``[0, N)``.

        Returns
        -------
        list of (int, int)
            ``(shard type, micro-batch)`` pairs ``(t, j)`` with ``split[t, j] == group``,
            sorted; at ``m = 1`` the pairs ``(t, 0)`` of the types assigned to the group.
            The patch work of a mid-step failure is in :attr:`patch`, not here.

        Raises
        ------
        ParameterTypeError
            ``group`` is not an integer.
        PlanError
            The plan is a wipe-out (the job restarts: there is no work to give).
        FailureSetError
            ``group`` is out of range or has failed.

        Examples
        --------
        >>> import numpy as np
        >>> from spare_opt import Layout, plan_reorder
        >>> layout = Layout((np.arange(5)[:, None] + np.array([0, 1])) % 5)
        >>> plan = plan_reorder(layout, [2], micro_batches=2)
        >>> plan.load, plan.step_cost, plan.work(1)
        (3, 1.5, [(1, 0), (2, 0), (2, 1)])
        """
        from .._core import validation as check
        from .._core.errors import FailureSetError

        g = check.integer("group", group)
        if not self.masked:
            raise PlanError("a wipe-out plan gives no work: every group restarts from the last checkpoint")
        split = self.split
        n = split.shape[0]
        if not 0 <= g < n:
            raise FailureSetError(f"group {g} is out of range [0, {n})")
        if np.any(self.failed == g):
            raise FailureSetError(f"group {g} has failed: it computes nothing")
        types, batches = np.nonzero(split == g)
        return list(zip(types.tolist(), batches.tolist()))

    def work_by_group(self):
        """Every group's work (:meth:`work`) in one ``O(N m)`` pass over ``split``.

        Returns
        -------
        GroupWork
            ``work[g]`` is group ``g``'s work, as ``work(g)`` (``[]`` for a failed
            group).  Attributes ``indptr``, ``shard_types``, ``micro_batches`` in
            compressed-sparse-row form:
            ``indptr`` int64 ``(N + 1,)``; ``shard_types`` and ``micro_batches`` int32
            ``(N m,)``.  The work of group ``g`` is the pairs
            ``zip(shard_types[indptr[g]:indptr[g + 1]], micro_batches[indptr[g]:indptr[g + 1]])``,
            sorted, equal to ``work(g)`` for a live group; a failed group has an empty
            range.  The patch work of a mid-step failure is in :attr:`patch`.

        Raises
        ------
        PlanError
            The plan is a wipe-out.

        Notes
        -----
        A stable counting sort of the ``N m`` entries of ``split`` by group
        (``numpy.argsort(kind="stable")``, a radix sort on 16-bit keys when
        ``N <= 65,536``), so a group's pairs stay in ``(t, j)`` order; ``work(g)``
        called for every group costs ``O(N^2 m)``.  Measured in
        ``benchmarks/bench_agreement.py``.

        Examples
        --------
        >>> import numpy as np
        >>> from spare_opt import Layout, plan_reorder
        >>> layout = Layout((np.arange(5)[:, None] + np.array([0, 1])) % 5)
        >>> work = plan_reorder(layout, [2], micro_batches=2).work_by_group()
        >>> work[1], work[2]
        ([(1, 0), (2, 0), (2, 1)], [])
        >>> start, end = work.indptr[1], work.indptr[2]
        >>> list(zip(work.shard_types[start:end].tolist(), work.micro_batches[start:end].tolist()))
        [(1, 0), (2, 0), (2, 1)]
        """
        if not self.masked:
            raise PlanError("a wipe-out plan gives no work: every group restarts from the last checkpoint")
        split = np.asarray(self.split)
        n, m = split.shape
        flat = split.ravel()
        keys = flat.astype(np.uint16) if n <= 1 << 16 else flat
        entries = np.argsort(keys, kind="stable")
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(flat, minlength=n), out=indptr[1:])
        if m == 1:
            return GroupWork(indptr, entries.astype(np.int32), np.zeros(n, dtype=np.int32))
        types, batches = np.divmod(entries.astype(np.int32), np.int32(m))
        return GroupWork(indptr, types, batches)

    # ------------------------------------------------------------ agreement
    def fingerprint(self, *, patch=False):
        """A short hash of the plan that processes compare to check that they agree.

        Parameters
        ----------
        patch : bool, default False
            Also cover :attr:`patch` (the current step's patch work).

        Returns
        -------
        str
            16 hexadecimal digits: the first 64 bits of the SHA-256 of the canonical
            byte form of :meth:`to_bytes` with ``moves`` set to 0 (and the patch left
            out unless ``patch``).  It covers ``status``, ``micro_batches``, ``N``,
            ``failed``, ``lost_shards``, ``stack_number``, ``lower_bound``,
            ``load``, ``step_cost``, ``split`` and, at ``m = 1``, ``order``: every
            group's work and order in the following steps (``assignment`` is
            ``split[:, 0]``, and at ``m > 1`` ``order`` follows from ``split``, so
            neither is hashed again).  ``moves`` (a statistic of the change from the
            previous plan, which depends on history) is not covered.

        Notes
        -----
        Integers are little-endian 64-bit (header) and 32-bit (arrays), the step cost
        an IEEE 754 double, so the hash is the same on every platform, in every
        process and with any numpy dtype the arrays were held in.

        Examples
        --------
        >>> import numpy as np
        >>> from spare_opt import Layout, plan_reorder
        >>> layout = Layout((np.arange(5)[:, None] + np.array([0, 1])) % 5)
        >>> plan_reorder(layout, [2]).fingerprint() == plan_reorder(layout, [2]).fingerprint()
        True
        """
        from .._core import validation as check

        patch = check.flag("patch", patch)
        return hashlib.sha256(self._canonical_bytes(moves=0, with_patch=patch, derived=False)).hexdigest()[:16]

    def to_bytes(self):
        """The plan in a compact, lossless binary form (:meth:`from_bytes` reads it back).

        Returns
        -------
        bytes
            :data:`PLAN_BYTES_MAGIC`, a header of 12 little-endian int64 values and one
            float64 (status, ``N``, ``r``, ``m``, the lengths of ``failed``,
            ``lost_shards`` and ``patch``, ``stack_number``, ``lower_bound``, ``load``,
            ``moves``, a flag of the arrays present, ``step_cost``; ``-1`` / NaN for
            ``None``), then little-endian int32 arrays: ``failed``, ``lost_shards``,
            ``assignment`` ``(N,)``, ``split`` ``(N, m)``, ``order`` ``(N, r)`` and the
            patch as ``(group, shard type, micro-batch)`` triples.  About
            ``4 N (m + r + 1)`` bytes.
        """
        return self._canonical_bytes(moves=self.moves, with_patch=True, derived=True)

    def _canonical_bytes(self, *, moves, with_patch, derived):
        """The byte form of :meth:`to_bytes`; without ``derived``, the arrays that follow
        from ``split`` by rule are left out: ``assignment`` (``split[:, 0]``) always and
        ``order`` at ``m > 1`` (the types a group computes part of first)."""
        masked = self.status == MASKED
        status = {MASKED: 0, WIPE_OUT: 1}.get(self.status)
        if status is None:
            raise PlanError(f"status is {self.status!r}, not {MASKED!r} or {WIPE_OUT!r}")
        arrays = [np.asarray(self.failed), np.asarray(self.lost_shards)]
        present = 0
        n = r = 0
        kept = (derived, True, derived or self.micro_batches == 1)
        for bit, name in enumerate(("assignment", "split", "order")):
            value = getattr(self, name) if kept[bit] else None
            if value is not None:
                value = np.asarray(value)
                present |= 1 << bit
                n = value.shape[0]
                if bit == 2:
                    r = value.shape[1]
                arrays.append(value)
        items = sorted((g, t, j) for g, pairs in self.patch.items() for t, j in pairs) if with_patch else []
        arrays.append(np.asarray(items, dtype=np.int64).reshape(-1, 3))
        optional = [-1 if v is None else int(v) for v in (self.stack_number, self.lower_bound, self.load)]
        step_cost = float("nan") if self.step_cost is None else float(self.step_cost)
        header = struct.pack("<12qd", status, n, r, int(self.micro_batches), arrays[0].size, arrays[1].size,
                             len(items), *optional, int(moves), present, step_cost)
        body = b"".join(np.ascontiguousarray(a, dtype="<i4").tobytes() for a in arrays)
        if not masked and present:
            raise PlanError("a wipe-out plan must have no assignment, split or order")
        return PLAN_BYTES_MAGIC + header + body

    @classmethod
    def from_bytes(cls, data):
        """The plan that :meth:`to_bytes` wrote.

        Parameters
        ----------
        data : bytes-like

        Returns
        -------
        Plan
            Equal to the plan written (``==``), with int32 arrays.

        Raises
        ------
        PlanError
            ``data`` does not start with :data:`PLAN_BYTES_MAGIC`, is truncated or
            has bytes left over, or its header is corrupt (a negative length, a size
            above ``2**31 - 1``, an unknown status).
        """
        try:
            data = memoryview(data).cast("B")
        except TypeError:
            raise PlanError(f"plan bytes must be a bytes-like object, got {type(data).__name__}") from None
        head = len(PLAN_BYTES_MAGIC)
        size = struct.calcsize("<12qd")
        if bytes(data[:head]) != PLAN_BYTES_MAGIC:
            raise PlanError("not a spare-opt plan: the bytes do not start with the plan magic "
                            f"{PLAN_BYTES_MAGIC!r} (a plan written by Plan.to_bytes, format version 1)")
        if len(data) < head + size:
            raise PlanError(f"plan bytes are truncated: {len(data)} bytes, the header alone needs {head + size}")
        (status, n, r, m, k, lost, patched, stack_number, bound, load, moves, present,
         step_cost) = struct.unpack_from("<12qd", data, head)
        shapes = [(k,), (lost,)]
        shapes += [shape for bit, shape in enumerate([(n,), (n, m), (n, r)]) if present >> bit & 1]
        shapes.append((patched, 3))
        if min(min(shape) for shape in shapes) < 0 or status not in (0, 1):
            raise PlanError("plan bytes have a corrupt header (a negative length or an unknown status)")
        if max(n, r, m, k, lost, patched) > _INT32_MAX or not 0 <= present < 8:
            raise PlanError(f"plan bytes have a corrupt header (a size above {_INT32_MAX:,} or unknown array flags)")
        # Python integers: an (N, m) product of two header values must not wrap around.
        expected = head + size + 4 * sum(math.prod(shape) for shape in shapes)
        if len(data) != expected:
            raise PlanError(f"plan bytes have length {len(data)}, the header describes {expected}")
        values = np.frombuffer(data, dtype="<i4", offset=head + size).astype(np.int32)
        arrays, at = [], 0
        for shape in shapes:
            count = int(np.prod(shape))
            arrays.append(values[at:at + count].reshape(shape))
            at += count
        failed, lost_shards, *rest, triples = arrays
        assignment = rest.pop(0) if present & 1 else None
        split = rest.pop(0) if present & 2 else None
        order = rest.pop(0) if present & 4 else None
        patch = {}
        for g, t, j in triples.tolist():
            patch.setdefault(g, []).append((t, j))
        return cls(status=MASKED if status == 0 else WIPE_OUT, stack_number=None if stack_number < 0 else stack_number,
                   lower_bound=None if bound < 0 else bound, failed=failed, lost_shards=lost_shards,
                   assignment=assignment, order=order, moves=moves, patch=patch, micro_batches=m,
                   load=None if load < 0 else load, step_cost=None if step_cost != step_cost else step_cost,
                   split=split)

    @classmethod
    def from_dict(cls, doc):
        """The plan that :meth:`to_dict` wrote (the inverse, for JSON documents).

        Parameters
        ----------
        doc : dict
            The keys of :meth:`to_dict`.  A ``patch`` of bare shard types (the ``m = 1``
            form before release 0.3) is read as ``(t, 0)`` pairs with a
            :class:`DeprecationWarning`.

        Returns
        -------
        Plan
            Equal to the plan written, with int32 arrays.

        Raises
        ------
        PlanError
            ``doc`` is not a dict, misses a key, or holds a value of the wrong kind.
            One rule for every integer (ids, counts, ``moves``, ``micro_batches``,
            entries of the arrays and of ``patch``): a JSON integer (or a float with
            a whole value, as some JSON writers give), within int32 (``moves``: int64);
            a bool, a string, a fraction, an infinity, NaN or a list nested deeper
            than the field is refused, never converted.
        """
        if not isinstance(doc, dict):
            raise PlanError(f"a plan document must be a dict, got {type(doc).__name__}")
        missing = [key for key in _PLAN_KEYS if key not in doc]
        if missing:
            raise PlanError(f"plan document misses the key(s) {', '.join(missing)}")
        if doc["status"] not in (MASKED, WIPE_OUT):
            raise PlanError(f"plan document: status must be {MASKED!r} or {WIPE_OUT!r}, got {doc['status']!r}")
        for key in ("stack_number", "lower_bound", "load"):
            if doc[key] is not None:
                _doc_integer(key, doc[key], 0, _INT32_MAX, "or null")
        step_cost = doc["step_cost"]
        number = isinstance(step_cost, (int, float, np.integer, np.floating)) and not isinstance(step_cost, (bool, np.bool_))
        if step_cost is not None and not (number and math.isfinite(step_cost) and step_cost >= 0):
            raise PlanError(f"plan document: step_cost must be a finite number >= 0 or null, got {step_cost!r}")
        m = _doc_integer("micro_batches", doc["micro_batches"], 1, _INT32_MAX)
        moves = _doc_integer("moves", doc["moves"], 0, _INT64_MAX)
        rows = doc["order"]
        order = None
        if rows is not None:
            if not isinstance(rows, (list, tuple)):
                raise PlanError(f"plan document: order must be a list of rows (a row null for a failed group) "
                                f"or null, got {type(rows).__name__}")
            width = max((len(row) for row in rows if isinstance(row, (list, tuple))), default=0)
            order = _doc_array("order", [[-1] * width if row is None else row for row in rows], 2, -1)
            order = order.reshape(len(rows), width)
        patch = doc["patch"]
        if not isinstance(patch, dict):
            raise PlanError(f"plan document: patch must be an object of group ids, got {type(patch).__name__}")
        pairs = {}
        for g, items in patch.items():
            group = _doc_integer("a patch group id", g, 0, _INT32_MAX, text=True)
            if not isinstance(items, (list, tuple)):
                raise PlanError(f"plan document: the patch of group {group} must be a list, got {items!r}")
            pairs[group] = [tuple(int(v) for v in _doc_array(f"the patch of group {group}", item, 1, 0))
                            if isinstance(item, (list, tuple)) else _doc_integer(f"the patch of group {group}",
                                                                                 item, 0, _INT32_MAX)
                            for item in items]

        def array(key, ndim=1):
            value = doc[key]
            if value is None and key in ("failed", "lost_shards"):
                raise PlanError(f"plan document: {key} must be a list of ids, got null")
            return None if value is None else _doc_array(key, value, ndim, -1 if key == "assignment" else 0)

        split = array("split", 2)
        if split is not None and split.size and split.shape[1] != m:
            raise PlanError(f"plan document: split rows have {split.shape[1]} entries, micro_batches is {m}")
        try:
            return cls(status=doc["status"], stack_number=doc["stack_number"], lower_bound=doc["lower_bound"],
                       failed=array("failed"), lost_shards=array("lost_shards"),
                       assignment=array("assignment"), order=order, moves=moves, patch=pairs,
                       micro_batches=m, load=doc["load"], step_cost=step_cost, split=split)
        except (TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, PlanError):
                raise
            raise PlanError(f"plan document holds a value of the wrong kind: {exc}") from None

    def to_dict(self):
        """The plan as a JSON-ready dict with exactly the keys of the attributes above.

        ``order`` rows of failed groups become ``null``; ``patch`` keys are group ids
        as strings (JSON object keys), sorted numerically, and each patch item is a
        ``[shard type, micro-batch]`` pair (at every ``m`` since release 0.3).
        :meth:`from_dict` reads it back.
        """
        order = None
        if self.order is not None:
            order = [None if row[0] < 0 else [int(v) for v in row] for row in self.order]
        patch = {str(g): [[int(t), int(j)] for t, j in items] for g, items in sorted(self.patch.items())}
        return {
            "status": self.status,
            "stack_number": None if self.stack_number is None else int(self.stack_number),
            "lower_bound": None if self.lower_bound is None else int(self.lower_bound),
            "failed": [int(g) for g in self.failed],
            "lost_shards": [int(t) for t in self.lost_shards],
            "assignment": None if self.assignment is None else [int(g) for g in self.assignment],
            "order": order,
            "moves": int(self.moves),
            "patch": patch,
            "micro_batches": int(self.micro_batches),
            "load": None if self.load is None else int(self.load),
            "step_cost": None if self.step_cost is None else float(self.step_cost),
            "split": None if self.split is None else np.asarray(self.split).tolist(),
        }




def check_plan(layout, plan, previous_order=None, previous_split=None):
    """Check that ``plan`` is a valid plan for ``layout``; raise :class:`PlanError` naming the first violation.

    Checks, in order: ``lost_shards`` is exactly the set of shard types with no live
    holder, ``lower_bound`` is ``c(k)``, ``micro_batches`` is a positive integer; on a
    wipe-out, the status and ``S* = load = step_cost = split = None``; otherwise every
    micro-batch of ``split`` (shape ``(N, m)``) is computed by one live holder of its
    shard type, the largest load is ``load``, ``load >= ceil(m N / (N - k))``,
    ``step_cost = load / m``, ``assignment = split[:, 0]``, ``c(k) <= S* <= r``
    (at ``m = 1`` also ``load = S*``; at ``m > 1`` ``S*`` is the largest number of
    distinct types a live group computes part of), every order row is a permutation of
    the layout row with the types its group computes in its top ``S*`` layers, failed
    rows are ``-1``, ``moves`` is right when the previous plan is given (at ``m = 1``
    ``previous_order``: the assigned types outside their group's previous top ``S*``;
    at ``m > 1`` ``previous_split``: the micro-batches whose contributor changed), and
    patch work goes to the live group that contributes it.  Optimality is not checked
    here: tests compare against brute force and the exact planner.

    Parameters
    ----------
    layout : Layout
    plan : Plan
    previous_order : numpy.ndarray of int, shape (N, r), optional
        At ``m = 1``, the stack orders before the failure, to check ``moves`` against.
    previous_split : numpy.ndarray of int, shape (N, m), optional
        At ``m > 1``, the split before the failure, to check ``moves`` against.

    Returns
    -------
    None

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout or ``plan`` is not a Plan.
    PlanError
        The plan breaks one of the rules above; the message names the first.  The checks
        are plain ``if`` statements, so they also run under ``python -O``.

    See Also
    --------
    is_valid_plan : the same checks, as a bool.
    """
    from .._core import validation as check
    from ..layouts.layout import check_layout

    check_layout(layout)
    check.instance("plan", plan, Plan)
    n, r = layout.stacks.shape
    # The shape and type of every field first, so that a malformed plan is a PlanError.
    failed = _int_array(plan.failed, "failed", 1)
    if failed.size and (failed.min() < 0 or failed.max() >= n):
        raise PlanError(f"failed must be a 1-D array of group ids in [0, {n})")
    _require(np.unique(failed).size == failed.size, "failed names a group twice")
    _require(isinstance(plan.status, str) and plan.status in (MASKED, WIPE_OUT),
             f"status is {plan.status!r}, not {MASKED!r} or {WIPE_OUT!r}")
    for name in ("stack_number", "lower_bound", "load", "moves", "micro_batches"):
        value = getattr(plan, name)
        _require(value is None and name not in ("moves", "micro_batches") or _is_int(value),
                 f"{name} is {value!r}, not an integer")
    _require(plan.micro_batches >= 1, f"micro_batches is {plan.micro_batches!r}, not a positive integer")
    _require(plan.step_cost is None or (isinstance(plan.step_cost, (int, float, np.integer, np.floating))
                                        and not isinstance(plan.step_cost, (bool, np.bool_))),
             f"step_cost is {plan.step_cost!r}, not a number")
    lost_shards = _int_array(plan.lost_shards, "lost_shards", 1)
    _require(isinstance(plan.patch, dict), f"patch is a {type(plan.patch).__name__}, not a dict")
    for name, value, shape in (("previous_order", previous_order, (n, r)),
                               ("previous_split", previous_split, (n, plan.micro_batches))):
        if value is not None:
            value = _int_array(value, name, 2)
            _require(value.shape == shape, f"{name} has shape {value.shape}, expected {shape}")
    alive = np.ones(n, dtype=bool)
    alive[failed] = False
    holder_alive = alive[layout.holders()[1]].reshape(n, r)
    lost = np.flatnonzero(~holder_alive.any(axis=1))
    _require(np.array_equal(np.sort(lost_shards), lost),
             "lost_shards differ from the shard types with no live holder")
    _require(plan.lower_bound == lower_bound(n, len(failed)),
             f"lower_bound is {plan.lower_bound}, not c(k) = {lower_bound(n, len(failed))}")
    m = plan.micro_batches
    if lost.size:
        _require(plan.status == WIPE_OUT, f"status is {plan.status!r} but shard types have no live holder")
        _require(plan.stack_number is None, "a wipe-out plan must have stack_number None")
        _require(plan.load is None and plan.step_cost is None and plan.split is None,
                 "a wipe-out plan must have load, step_cost and split None")
        return
    _require(plan.status == MASKED, f"status is {plan.status!r} but every shard type has a live holder")
    _check_masked_plan(layout, plan, alive, lower_bound(n, len(failed), m), previous_order, previous_split)


def is_valid_plan(layout, plan, previous_order=None):
    """Whether ``plan`` passes :func:`check_plan` (same arguments).

    Returns
    -------
    bool

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout or ``plan`` is not a Plan.
    """
    try:
        check_plan(layout, plan, previous_order)
    except PlanError:
        return False
    return True

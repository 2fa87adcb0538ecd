"""The reorder plan: what every DP group does after a failure.

Both the exact planner (:func:`spare_opt.plan_reorder`) and the online controller
(:class:`spare_opt.ReorderController`) return a :class:`Plan`; :func:`check_plan` is
the one definition of a valid plan that tests hold both to.
"""

import re
from dataclasses import dataclass, field

import numpy as np

from ._io import as_path, read_json_file, reading
from .errors import FailureSetError

__all__ = [
    "parse_group_ids",
    "read_failure_set","Plan", "MASKED", "WIPE_OUT", "check_plan", "lower_bound", "normalise_groups"]

MASKED = "masked"
WIPE_OUT = "wipe-out"


def lower_bound(groups, failed_count):
    """The stack-number lower bound ``c(k) = ceil(N / (N - k))``.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N``.
    failed_count : int
        Number of failed groups ``k``, ``0 <= k``.

    Returns
    -------
    int or None
        ``c(k)``; ``None`` when every group has failed (``k >= N``).

    Notes
    -----
    No argument checks (it is on the controller's hot path); the validated public form
    is :func:`spare_opt.theory.stack_lower_bound`.

    References
    ----------
    Lee et al., ICML 2026, arXiv:2603.00357, Sec. 4 (``c(k)``).
    """
    if failed_count >= groups:
        return None
    return -(-groups // (groups - failed_count))


def normalise_groups(groups, n, what="failed groups"):
    """Validate a collection of group ids against ``N`` and return it as a sorted int32 array.

    Parameters
    ----------
    groups : iterable of int
        Group ids (Python or numpy integers, or a 1-D integer array).
    n : int
        Number of DP groups ``N``: valid ids are ``[0, N)``.
    what : str, default "failed groups"
        What the ids are, for error messages.

    Returns
    -------
    numpy.ndarray of int32, shape (k,)
        The ids, sorted ascending.

    Raises
    ------
    FailureSetError
        ``groups`` is not a collection (``None``, a bare number, a string), or a value
        is not an integer, is outside ``[0, N)``, or is repeated.
    """
    if isinstance(groups, (str, bytes)):
        raise FailureSetError(f"{what}: expected an iterable of integer group ids, got the string {groups!r}")
    if isinstance(groups, np.ndarray) and groups.ndim > 1:
        raise FailureSetError(f"{what}: expected a 1-D iterable of group ids, got an array of shape {groups.shape}")
    if isinstance(groups, np.ndarray) and groups.ndim == 1 and groups.dtype.kind in "iu":
        # Fast path for integer arrays (the controller's and replay's calls).
        outside = groups[(groups < 0) | (groups >= n)]
        if outside.size:
            raise FailureSetError(f"{what}: group {int(outside[0])} is out of range [0, {n})")
        return _sorted_unique(groups.astype(np.int64), what)
    try:
        values = list(groups)
    except TypeError:
        raise FailureSetError(
            f"{what}: expected an iterable of integer group ids, got {type(groups).__name__}"
        ) from None
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise FailureSetError(f"{what}: {value!r} is not an integer group id")
        # Range check on Python ints first: ids beyond int64 would overflow numpy.
        if not 0 <= int(value) < n:
            raise FailureSetError(f"{what}: group {int(value)} is out of range [0, {n})")
    return _sorted_unique(np.asarray(values, dtype=np.int64), what)


def _sorted_unique(array, what):
    """Sorted int32 copy of in-range int64 ids; FailureSetError on a repeated id."""
    if array.size:
        ordered = np.sort(array)
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
        if repeated.size:
            raise FailureSetError(f"{what}: group {int(repeated[0])} is listed more than once")
        array = ordered
    return array.astype(np.int32)


_GROUP_ID = re.compile(r"[+-]?[0-9]+", re.ASCII)


def parse_group_ids(text):
    """Parse group ids written as ``"3,17,42"`` (commas and/or white space) into ints.

    Ids are ASCII decimal integers (``int()`` would also take ``"1_0"`` and other
    scripts' digits).  An empty slot between commas (``"1,,2"``, a trailing comma)
    is refused: it usually means an id went missing.  Range and repeats are checked
    against a layout by :func:`normalise_groups`.

    Parameters
    ----------
    text : str

    Returns
    -------
    list of int

    Raises
    ------
    FailureSetError
        ``text`` holds no id, an empty slot between commas, or a token that is not an
        integer.
    """
    if not text.strip():
        raise FailureSetError("no group ids given (an empty list); leave the option out for none")
    values = []
    for piece in text.split(","):
        tokens = piece.split()
        if not tokens:
            raise FailureSetError(f"empty group id between commas in {text!r}")
        for token in tokens:
            if not _GROUP_ID.fullmatch(token):
                raise FailureSetError(f"{token!r} is not an integer group id")
            values.append(int(token))
    return values


def read_failure_set(path):
    """Read failed group ids from a file: a JSON list, or ids separated by commas and/or white space.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    list of int
        The ids in file order (``[]`` for a file holding ``[]``); range and repeats
        are checked against a layout by :func:`normalise_groups`.

    Raises
    ------
    FailureSetError
        The file is missing, unreadable, empty, malformed JSON, a JSON value other than
        a list of integers, or text with a token that is not an integer.
    """
    path = as_path(path, FailureSetError, "failure-set file")
    with reading(path, FailureSetError, "failure-set file", "a list of group ids"):
        text = path.read_text(encoding="utf-8").strip()
    if not text:
        raise FailureSetError(f"{path} holds no group ids (write [] for an empty failure set)")
    if text[0] not in "[{":
        try:
            return parse_group_ids(text)
        except FailureSetError as exc:
            raise FailureSetError(f"{path}: {exc}") from None
    values = read_json_file(path, FailureSetError, "failure-set file", expected="a list of group ids")
    if not isinstance(values, list):
        raise FailureSetError(f"{path}: expected a JSON list of group ids, got a JSON object")
    for item in values:
        if isinstance(item, bool) or not isinstance(item, int):
            raise FailureSetError(f"{path}: {item!r} is not an integer group id")
    return values


@dataclass
class Plan:
    """A reorder plan for one failure set (spare-model.md, "A step, and the online reorder").

    Attributes
    ----------
    status : str
        ``"masked"`` or ``"wipe-out"`` (some shard type has no live holder: global
        restart from the last checkpoint).
    stack_number : int or None
        ``S*``, the least all-reduce stack number that covers every shard type with
        the live groups; ``None`` on a wipe-out.
    lower_bound : int or None
        ``c(k) = ceil(N / (N - k))`` for ``k`` failed groups; ``None`` when ``k = N``.
    failed : numpy.ndarray of int32, shape (k,)
        Every failed group, sorted.
    lost_shards : numpy.ndarray of int32
        Shard types with no live holder (non-empty exactly on a wipe-out).
    assignment : numpy.ndarray of int32, shape (N,) or None
        ``assignment[t]`` is the live group that contributes shard type ``t`` to the
        all-reduce; ``None`` on a wipe-out.
    order : numpy.ndarray of int32, shape (N, r) or None
        New stack order of every group: row ``g`` is a permutation of the layout's
        row ``g`` with the shard types assigned to ``g`` inside its top ``S*`` layers.
        Rows of failed groups are ``-1``.  ``None`` on a wipe-out.
    moves : int
        Assigned shard types that were not already in their group's top ``S*`` layers
        of the previous order (0 on a wipe-out).
    patch : dict of int to list of int
        Patch compute of the current step: for each live group, the shard types it
        must compute now because only groups that failed mid-step produced them.
        Empty when nothing failed mid-step.
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

    @property
    def masked(self):
        """bool: whether the failure set is masked (no wipe-out)."""
        return self.status == MASKED

    def to_json(self):
        """The plan as a JSON-ready dict with exactly the keys of the attributes above.

        ``order`` rows of failed groups become ``null``; ``patch`` keys are group ids
        as strings (JSON object keys), sorted numerically.
        """
        order = None
        if self.order is not None:
            order = [None if row[0] < 0 else [int(v) for v in row] for row in self.order]
        return {
            "status": self.status,
            "stack_number": None if self.stack_number is None else int(self.stack_number),
            "lower_bound": None if self.lower_bound is None else int(self.lower_bound),
            "failed": [int(g) for g in self.failed],
            "lost_shards": [int(t) for t in self.lost_shards],
            "assignment": None if self.assignment is None else [int(g) for g in self.assignment],
            "order": order,
            "moves": int(self.moves),
            "patch": {str(g): [int(t) for t in types] for g, types in sorted(self.patch.items())},
        }


def check_plan(layout, plan, previous_order=None):
    """Check that ``plan`` is a valid plan for ``layout``; raise ``AssertionError`` if not.

    Checks every shard type is contributed by exactly one live holder, no live group
    is given more than ``S*`` shard types, ``S* >= c(k)``, every order row is a
    permutation of the layout row with the assigned types in its top ``S*`` layers,
    and (given ``previous_order``) that ``moves`` counts the assigned types outside
    their group's previous top ``S*``.  On a wipe-out, checks ``lost_shards`` is
    exactly the set of shard types with no live holder.  Optimality is not checked
    here: tests compare against brute force and the exact planner.

    Parameters
    ----------
    layout : Layout
    plan : Plan
    previous_order : numpy.ndarray of int, shape (N, r), optional
        The stack orders before the failure, to check ``moves`` against.

    Returns
    -------
    bool
        ``True`` when every check passes.

    Raises
    ------
    AssertionError
        The plan breaks one of the checks above (the message names which).  The
        checks are ``assert`` statements: a test helper, skipped under ``python -O``.
    """
    n, r = layout.stacks.shape
    alive = np.ones(n, dtype=bool)
    alive[plan.failed] = False
    holder_alive = alive[layout.holders()[1]].reshape(n, r)
    lost = np.flatnonzero(~holder_alive.any(axis=1))
    assert np.array_equal(np.sort(plan.lost_shards), lost), "lost_shards differ from shard types with no live holder"
    assert plan.lower_bound == lower_bound(n, len(plan.failed)), "lower_bound is not c(k)"
    if lost.size:
        assert plan.status == WIPE_OUT and plan.stack_number is None
        return True
    assert plan.status == MASKED
    s = plan.stack_number
    assert s is not None and plan.lower_bound <= s <= r, f"S*={s} outside [c(k), r]"
    assignment = np.asarray(plan.assignment)
    assert assignment.shape == (n,)
    assert np.all(alive[assignment]), "a shard type is assigned to a failed group"
    load = np.bincount(assignment, minlength=n)
    assert load.max() <= s, f"a group is given {load.max()} shard types, above S*={s}"
    order = np.asarray(plan.order)
    assert order.shape == (n, r)
    assert np.all(order[~alive] == -1), "failed groups must have order rows of -1"
    live_rows = np.flatnonzero(alive)
    assert np.array_equal(np.sort(order[live_rows], axis=1), np.sort(layout.stacks[live_rows], axis=1)), (
        "an order row is not a permutation of the group's stack"
    )
    top = order[assignment, :s]
    assert np.all((top == np.arange(n)[:, None]).any(axis=1)), "an assigned shard type is outside its group's top S*"
    if previous_order is not None:
        prev_top = np.asarray(previous_order)[assignment, :s]
        outside = int((~(prev_top == np.arange(n)[:, None]).any(axis=1)).sum())
        assert plan.moves == outside, f"moves={plan.moves} but {outside} assigned types were outside the old top S*"
    for g, types in plan.patch.items():
        assert alive[g], "patch work given to a failed group"
        assert all(assignment[t] == g for t in types), "patch work given to a group that does not contribute it"
    return True

"""The reorder plan: what every DP group does after a failure.

Both the exact planner (:func:`spare_opt.plan_reorder`) and the online controller
(:class:`spare_opt.ReorderController`) return a :class:`Plan`; :func:`check_plan` is
the one definition of a valid plan that tests hold both to (:func:`is_valid_plan` is
its yes/no form).
"""

from dataclasses import dataclass, field

import numpy as np

from ._results import Result
from .errors import PlanError

__all__ = ["Plan", "MASKED", "WIPE_OUT", "check_plan", "is_valid_plan", "lower_bound"]

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


@dataclass(eq=False)
class Plan(Result):
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

    Notes
    -----
    Plans compare by value (``==`` compares the arrays element-wise), whichever planner
    made them.
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

    def to_dict(self):
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
    """Check that ``plan`` is a valid plan for ``layout``; raise :class:`PlanError` naming the first violation.

    Checks, in order: ``lost_shards`` is exactly the set of shard types with no live
    holder, ``lower_bound`` is ``c(k)``; on a wipe-out, the status and ``S* = None``;
    otherwise every shard type is contributed by exactly one live holder, no live group
    is given more than ``S*`` shard types, ``c(k) <= S* <= r``, every order row is a
    permutation of the layout row with the assigned types in its top ``S*`` layers,
    failed rows are ``-1``, (given ``previous_order``) ``moves`` counts the assigned
    types outside their group's previous top ``S*``, and patch work goes to the live
    group that contributes it.  Optimality is not checked here: tests compare against
    brute force and the exact planner.

    Parameters
    ----------
    layout : Layout
    plan : Plan
    previous_order : numpy.ndarray of int, shape (N, r), optional
        The stack orders before the failure, to check ``moves`` against.

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
    from . import _validation as check
    from .layout import check_layout

    check_layout(layout)
    check.instance("plan", plan, Plan)
    n, r = layout.stacks.shape
    failed = np.asarray(plan.failed)
    if failed.ndim != 1 or (failed.size and (failed.min() < 0 or failed.max() >= n)):
        raise PlanError(f"failed must be a 1-D array of group ids in [0, {n})")
    alive = np.ones(n, dtype=bool)
    alive[failed] = False
    holder_alive = alive[layout.holders()[1]].reshape(n, r)
    lost = np.flatnonzero(~holder_alive.any(axis=1))
    _require(np.array_equal(np.sort(np.asarray(plan.lost_shards)), lost),
             "lost_shards differ from the shard types with no live holder")
    _require(plan.lower_bound == lower_bound(n, len(failed)),
             f"lower_bound is {plan.lower_bound}, not c(k) = {lower_bound(n, len(failed))}")
    if lost.size:
        _require(plan.status == WIPE_OUT, f"status is {plan.status!r} but shard types have no live holder")
        _require(plan.stack_number is None, "a wipe-out plan must have stack_number None")
        return
    _require(plan.status == MASKED, f"status is {plan.status!r} but every shard type has a live holder")
    s = plan.stack_number
    _require(s is not None and plan.lower_bound <= s <= r, f"S* = {s} is outside [c(k), r] = [{plan.lower_bound}, {r}]")
    assignment = np.asarray(plan.assignment)
    _require(assignment.shape == (n,), f"assignment has shape {assignment.shape}, expected ({n},)")
    _require(assignment.min() >= 0 and assignment.max() < n, "assignment names a group outside [0, N)")
    _require(np.all(alive[assignment]), f"shard type {int(np.argmin(alive[assignment]))} is assigned to a failed group")
    load = np.bincount(assignment, minlength=n)
    _require(load.max() <= s, f"group {int(load.argmax())} is given {int(load.max())} shard types, above S* = {s}")
    order = np.asarray(plan.order)
    _require(order.shape == (n, r), f"order has shape {order.shape}, expected {(n, r)}")
    _require(np.all(order[~alive] == -1), "failed groups must have order rows of -1")
    live_rows = np.flatnonzero(alive)
    same = np.all(np.sort(order[live_rows], axis=1) == np.sort(layout.stacks[live_rows], axis=1), axis=1)
    _require(same.all(), f"order row of group {int(live_rows[np.argmin(same)]) if same.size else -1} "
                         "is not a permutation of its stack")
    top = order[assignment, :s]
    inside = (top == np.arange(n)[:, None]).any(axis=1)
    _require(inside.all(), f"shard type {int(np.argmin(inside))} is outside the top S* of its contributing group")
    if previous_order is not None:
        prev_top = np.asarray(previous_order)[assignment, :s]
        outside = int((~(prev_top == np.arange(n)[:, None]).any(axis=1)).sum())
        _require(plan.moves == outside, f"moves = {plan.moves} but {outside} assigned types were outside the old top S*")
    for g, types in plan.patch.items():
        _require(0 <= g < n and alive[g], f"patch work given to group {g}, which is not live")
        wrong = [t for t in types if assignment[t] != g]
        _require(not wrong, f"patch work for shard type {wrong[0] if wrong else -1} given to group {g}, "
                            "which does not contribute it")


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


def _require(condition, message):
    if not condition:
        raise PlanError(message)

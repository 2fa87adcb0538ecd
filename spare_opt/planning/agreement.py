"""Plans that every process agrees on: a pure function of the layout, the failed set and ``m``.

A :class:`~spare_opt.ReorderController` updated incrementally gives a plan that depends
on the order in which groups failed and came back; two processes of one training job
with different histories (one missed an event and healed from a peer) would compute
different work, and the gradient would no longer be exact.  :func:`agreed_plan` (and
the controller's :meth:`~spare_opt.ReorderController.set_failed`) give the canonical
plan of a failed set: the same bytes in any process, at any time, with any history
(``docs/agreement.md``).  :func:`patch_work` is the patch compute between two plans
when groups fail mid-step.
"""

import threading
import weakref

import numpy as np

from .._core import validation as check
from .._core.errors import ParameterError, PlanError
from .failure_sets import check_failed_set
from ..layouts.layout import check_layout, recommended_micro_batches
from .plan import Plan, check_micro_batches

__all__ = ["agreed_plan", "patch_work", "AGREED_METHODS"]

#: The two ways to compute an agreed plan (:func:`agreed_plan`).
AGREED_METHODS = ("controller", "exact")

_CACHE_SIZE = 4
_CACHE = {}  # (id(layout), m) -> (weak reference to the layout, controller)
_LOCK = threading.Lock()


def agreed_plan(layout, failed, *, micro_batches=None, method="controller"):
    """The canonical plan of a failed set: the same in every process, whatever its history.

    Parameters
    ----------
    layout : Layout
        The stack layout, ``N`` groups with redundancy ``r``.
    failed : iterable of int
        Every group that is out, ids in ``[0, N)``, each at most once, in any order.
    micro_batches : int or None, default None
        ``m``, micro-batches per shard type; ``None``: the layout's recommended ``m``
        (:attr:`Layout.micro_batches`, written by ``spare-opt compare -o``), else 1.  A
        different ``m`` is used with a :class:`~spare_opt.RecommendationWarning`.
    method : {"controller", "exact"}, default "controller"
        ``"controller"``: the plan of :meth:`ReorderController.set_failed` (a fresh
        controller failing the groups at once in ascending order), microseconds to
        milliseconds.  ``"exact"``: the exact planner
        (:func:`spare_opt.plan_reorder`) from the fault-free plan, the fewest moves
        (min-cost flow), milliseconds to seconds.  Both give the same ``status``,
        ``stack_number`` at ``m = 1`` and ``load``; their splits can differ, so every
        process of a job must use the same method.

    Returns
    -------
    Plan
        ``moves`` counted against the fault-free plan, ``patch`` empty
        (:func:`patch_work` gives it).  Bitwise identical for the same layout, set,
        ``m`` and method: :meth:`Plan.to_bytes` and :meth:`Plan.fingerprint` agree.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a Layout, or ``micro_batches`` is not an integer.
    ParameterError
        ``micro_batches`` is out of range, or ``method`` is not one of
        :data:`AGREED_METHODS`.
    FailureSetError
        ``failed`` is not a collection of distinct group ids in range.

    See Also
    --------
    ReorderController.set_failed : the controller form, which later ``fail()`` and
        ``recover()`` calls continue from.

    Notes
    -----
    The controller path keeps one controller per layout and ``m`` (the four most
    recent, held while the layout lives), so repeated calls cost only
    :meth:`~spare_opt.ReorderController.set_failed`: ``O(N (r + m))`` to copy the
    fault-free state, then the incremental algorithm for the failed groups
    (``docs/benchmarks.md``, "Agreed plans").  Both paths are deterministic: numba
    kernels with fixed tie-breaks, and OR-Tools' single-threaded min-cost flow on a
    network built in a fixed order.

    Examples
    --------
    >>> import numpy as np
    >>> from spare_opt import Layout, agreed_plan
    >>> layout = Layout((np.arange(7)[:, None] + [0, 1, 3]) % 7, offsets=[0, 1, 3])
    >>> fast = agreed_plan(layout, [5, 2], micro_batches=4)
    >>> exact = agreed_plan(layout, [2, 5], micro_batches=4, method="exact")
    >>> fast.load == exact.load, fast.fingerprint() == agreed_plan(layout, [2, 5], micro_batches=4).fingerprint()
    (True, True)
    """
    check_layout(layout)
    m = check_micro_batches(recommended_micro_batches(layout, micro_batches), layout.groups)
    if method not in AGREED_METHODS:
        raise ParameterError(f"method must be one of {', '.join(map(repr, AGREED_METHODS))}, got {method!r}")
    groups = check_failed_set(failed, layout.groups)
    if method == "exact":
        from .exact import plan_reorder

        return plan_reorder(layout, groups, micro_batches=m)
    with _LOCK:
        return _controller(layout, m).set_failed(groups)


def _controller(layout, m):
    """The cached controller of ``layout`` and ``m`` (call with the lock held)."""
    from .controller import ReorderController

    key = (id(layout), m)
    entry = _CACHE.get(key)
    if entry is not None and entry[0]() is layout:
        _CACHE[key] = _CACHE.pop(key)  # most recently used last
        return entry[1]
    controller = ReorderController(layout, micro_batches=m)
    _CACHE[key] = (weakref.ref(layout), controller)
    while len(_CACHE) > _CACHE_SIZE:
        del _CACHE[next(iter(_CACHE))]
    return controller


def patch_work(previous, plan):
    """The patch compute of a step whose groups failed mid-step: who computes what now.

    Every live group computed its :meth:`Plan.work` of ``previous`` for the current
    step; the groups failed in ``plan`` but live in ``previous`` did not deliver theirs,
    so each of their micro-batches goes to its contributor in ``plan``, which computes
    it before the all-reduce.

    Parameters
    ----------
    previous : Plan
        The plan the current step was computed with (masked).
    plan : Plan
        The new plan (masked), of the same layout and ``m``.

    Returns
    -------
    dict of int to list of (int, int)
        ``{live group: sorted (shard type, micro-batch) pairs}``, groups ascending;
        empty when no group of ``previous`` failed.

    Raises
    ------
    ParameterTypeError
        ``previous`` or ``plan`` is not a Plan.
    PlanError
        A plan is a wipe-out, or the two have different shapes (``N`` or ``m``).

    Examples
    --------
    >>> import numpy as np
    >>> from spare_opt import Layout, agreed_plan, patch_work
    >>> layout = Layout((np.arange(5)[:, None] + np.array([0, 1])) % 5)
    >>> patch_work(agreed_plan(layout, []), agreed_plan(layout, [2]))
    {1: [(2, 0)]}
    """
    from .controller import _patch_work

    check.instance("previous", previous, Plan)
    check.instance("plan", plan, Plan)
    if not (previous.masked and plan.masked):
        raise PlanError("patch work needs two masked plans: a wipe-out restarts every group from the checkpoint")
    before, after = np.asarray(previous.split), np.asarray(plan.split)
    if before.shape != after.shape:
        raise PlanError(f"the plans have splits of shapes {before.shape} and {after.shape}: "
                        "not the same layout and micro_batches")
    n = after.shape[0]
    alive_before = np.ones(n, dtype=bool)
    alive_before[np.asarray(previous.failed)] = False
    alive = np.ones(n, dtype=bool)
    alive[np.asarray(plan.failed)] = False
    return _patch_work(before, alive_before, after, alive)


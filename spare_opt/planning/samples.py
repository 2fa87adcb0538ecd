"""From a plan to data: the sample indices of the global batch that a group computes.

The global batch of one step holds ``B`` samples, indices ``0 .. B-1``.  Shard type
``t`` is block ``t`` of ``N`` equal blocks and micro-batch ``j`` of ``t`` is sub-block
``j`` of that block's ``m`` equal sub-blocks, so micro-batch ``(t, j)`` is the ``b = B /
(N m)`` samples ``(t m + j) b .. (t m + j + 1) b - 1``.  A plan gives each ``(t, j)`` one
live group, so over the live groups of a masked plan the indices cover ``0 .. B-1``
exactly once, whatever failed (``docs/agreement.md``, "From a plan to samples").  Which
dataset items those indices are (a shuffle per epoch, as in
``torch.utils.data.DistributedSampler``) is the caller's choice.
"""

import numpy as np

from .._core import validation as check
from .._core.errors import FailureSetError, ParameterError, PlanError
from .plan import Plan

__all__ = ["sample_indices", "sample_indices_by_group", "micro_batch_size"]


def micro_batch_size(global_batch_size, groups, micro_batches=1):
    """The samples ``b = B / (N m)`` of one micro-batch; refuse a batch that does not split evenly.

    Parameters
    ----------
    global_batch_size : int
        ``B``, samples in the global batch of one step.
    groups : int
        ``N``, DP groups (and shard types).
    micro_batches : int, default 1
        ``m``, micro-batches per shard type.

    Returns
    -------
    int
        ``b >= 1``.

    Raises
    ------
    ParameterTypeError
        An argument is not an integer.
    ParameterError
        ``B`` is not a positive multiple of ``N m``.  The gradient is exact only when
        every micro-batch has the same number of samples (the all-reduce divides the
        sum by ``N m``), so uneven parts are refused rather than padded or dropped.
    """
    batch = check.integer("global_batch_size", global_batch_size, minimum=1)
    n = check.integer("groups N", groups, minimum=1)
    m = check.integer("micro_batches m", micro_batches, minimum=1)
    parts = n * m
    if batch % parts:
        lower, upper = batch // parts * parts, (batch // parts + 1) * parts
        hint = f"{upper:,}" if lower == 0 else f"{lower:,} or {upper:,}"
        raise ParameterError(
            f"a global batch of {batch:,} samples does not split into N m = {n:,} x {m:,} = {parts:,} equal "
            f"micro-batches (every micro-batch must hold the same number of samples for the gradient to be "
            f"exact): choose a multiple of {parts:,}, such as {hint}"
        )
    return batch // parts


def sample_indices(plan, group, global_batch_size, *, patch=False):
    """The sample indices of the global batch that ``group`` computes in one step of ``plan``.

    Parameters
    ----------
    plan : Plan
        A masked plan of ``N`` groups and ``m`` micro-batches per shard type.
    group : int
        A live group of the plan.
    global_batch_size : int
        ``B``, samples in the global batch of one step, a multiple of ``N m``.
    patch : bool, default False
        Give the samples of the group's patch work (``plan.patch[group]``: what it
        computes now, before the all-reduce, after a mid-step failure) instead of its
        work (:meth:`Plan.work`).

    Returns
    -------
    numpy.ndarray of int64, shape (len(work) * b,)
        ``b = B / (N m)``; the micro-batches of ``plan.work(group)`` (or of its patch)
        in order, each as its ``b`` consecutive sample indices: micro-batch number
        ``i`` of the list is ``indices[i b:(i + 1) b]`` (``indices.reshape(-1, b)``
        has one row per micro-batch).  Empty for a group without patch work.

    Raises
    ------
    ParameterTypeError
        ``plan`` is not a Plan, or ``group``, ``global_batch_size`` is not an integer,
        or ``patch`` is not a bool.
    ParameterError
        ``global_batch_size`` is not a positive multiple of ``N m``.
    PlanError
        The plan is a wipe-out.
    FailureSetError
        ``group`` is out of range or failed.

    Examples
    --------
    >>> import numpy as np
    >>> from spare_opt import Layout, agreed_plan, sample_indices
    >>> layout = Layout((np.arange(5)[:, None] + np.array([0, 1])) % 5)
    >>> plan = agreed_plan(layout, [2], micro_batches=2)
    >>> plan.work(1)
    [(1, 1), (2, 0), (2, 1)]
    >>> sample_indices(plan, 1, 20).tolist()  # B / (N m) = 2 samples per micro-batch
    [6, 7, 8, 9, 10, 11]
    """
    check.instance("plan", plan, Plan)
    patch = check.flag("patch", patch)
    if not plan.masked:
        raise PlanError("a wipe-out plan gives no work: every group restarts from the last checkpoint")
    n, m = np.asarray(plan.split).shape
    b = micro_batch_size(global_batch_size, n, m)
    if patch:
        g = check.integer("group", group)
        if not 0 <= g < n:
            raise FailureSetError(f"group {g} is out of range [0, {n})")
        if np.any(np.asarray(plan.failed) == g):
            raise FailureSetError(f"group {g} has failed: it computes nothing")
        items = np.asarray(plan.patch.get(g, []), dtype=np.int64).reshape(-1, 2)
    else:
        items = np.asarray(plan.work(group), dtype=np.int64).reshape(-1, 2)
    starts = (items[:, 0] * m + items[:, 1]) * b
    return (starts[:, None] + np.arange(b, dtype=np.int64)).ravel()


def sample_indices_by_group(plan, global_batch_size):
    """Every group's sample indices (:func:`sample_indices`) in one vectorised pass.

    Parameters
    ----------
    plan : Plan
        A masked plan.
    global_batch_size : int
        ``B``, a multiple of ``N m``.

    Returns
    -------
    indptr : numpy.ndarray of int64, shape (N + 1,)
        Group ``g``'s indices are ``indices[indptr[g]:indptr[g + 1]]`` (empty for a
        failed group).
    indices : numpy.ndarray of int64, shape (B,)
        A permutation of ``0 .. B-1``; each group's part equals
        ``sample_indices(plan, g, B)``.

    Raises
    ------
    ParameterTypeError
        ``plan`` is not a Plan or ``global_batch_size`` is not an integer.
    ParameterError
        ``global_batch_size`` is not a positive multiple of ``N m``.
    PlanError
        The plan is a wipe-out.

    Notes
    -----
    One :meth:`Plan.work_by_group` (``O(N m)``) and one broadcast, ``O(B)``.
    """
    check.instance("plan", plan, Plan)
    work = plan.work_by_group()
    n, m = np.asarray(plan.split).shape
    b = micro_batch_size(global_batch_size, n, m)
    starts = (work.shard_types.astype(np.int64) * m + work.micro_batches) * b
    return work.indptr * b, (starts[:, None] + np.arange(b, dtype=np.int64)).ravel()

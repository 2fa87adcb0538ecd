"""Plans that every rank computes alike, and the mapping from a plan to sample indices.

A :class:`PlanBook` turns a failed set into a plan with a pure function of
``(layout, failed set, m)`` (the controller's ``set_failed``), caches it, and names the
micro-batches of one step: micro-batch ``j`` of shard type ``t`` is the key
``t * m + j``, and it covers the positions ``[t B/N + j b, t B/N + (j + 1) b)`` of the
global batch of ``B`` samples, with ``b = B / (N m)`` (shard type ``t`` = block ``t`` of
``N`` equal blocks, micro-batch ``j`` = sub-block ``j`` of ``m``).
"""

import hashlib

import numpy as np

import spare_opt

__all__ = ["PlanBook", "layout_fingerprint", "plan_fingerprint"]


def layout_fingerprint(layout):
    """A short stable hash of a layout (16 hex digits), equal on every rank for the same stacks.

    Parameters
    ----------
    layout : spare_opt.Layout

    Returns
    -------
    str
    """
    if hasattr(layout, "fingerprint"):
        return str(layout.fingerprint())
    stacks = np.ascontiguousarray(layout.stacks, dtype=np.int32)
    digest = hashlib.blake2b(stacks.tobytes(), digest_size=8)
    digest.update(np.asarray(stacks.shape, dtype=np.int64).tobytes())
    return digest.hexdigest()


def plan_fingerprint(plan):
    """A short stable hash of a plan's status, failed set and split (16 hex digits).

    Parameters
    ----------
    plan : spare_opt.Plan

    Returns
    -------
    str
    """
    if hasattr(plan, "fingerprint"):
        return str(plan.fingerprint())
    digest = hashlib.blake2b(plan.status.encode(), digest_size=8)
    digest.update(np.asarray(plan.failed, dtype=np.int32).tobytes())
    digest.update(np.asarray(plan.micro_batches, dtype=np.int64).tobytes())
    if plan.split is not None:
        digest.update(np.ascontiguousarray(plan.split, dtype=np.int32).tobytes())
    return digest.hexdigest()


class PlanBook:
    """The plans of one job: a pure function of the failed set, cached, with per-group work keys.

    Parameters
    ----------
    layout : spare_opt.Layout
        The same layout on every rank (compare :attr:`fingerprint` across ranks).
    micro_batches : int or None, default None
        ``m``, micro-batches per shard type; ``None``: the layout's recommended ``m``
        (:attr:`Layout.micro_batches`, written by ``spare-opt compare -o``), else 1.  A
        different ``m`` is used with a :class:`~spare_opt.RecommendationWarning`.

    Notes
    -----
    The plan of a failed set comes from ``ReorderController.set_failed`` (a pure function
    of ``(layout, failed set, m)``), so every rank gets a bitwise-identical plan for the
    same failed set whatever its history.  Plans are cached by failed set: the second
    time a set occurs the plan costs a dictionary lookup.
    """

    def __init__(self, layout, micro_batches=None):
        spare_opt.check_layout(layout)
        self.layout = layout
        self.groups = int(layout.stacks.shape[0])
        self.micro_batches = spare_opt.check_micro_batches(
            spare_opt.recommended_micro_batches(layout, micro_batches), self.groups)
        self.fingerprint = layout_fingerprint(layout)
        self._controller = spare_opt.ReorderController(layout, micro_batches=self.micro_batches)
        self._cache = {}

    def plan(self, failed):
        """The plan for the failed set ``failed`` (any iterable of group ids).

        Returns
        -------
        spare_opt.Plan

        Raises
        ------
        spare_opt.FailureSetError
            An id is not an integer (a bool, a float such as ``1.7``, a string), is
            out of range or repeated: the rule of ``ReorderController.set_failed``
            (:func:`spare_opt.check_failed_set`), so that every
            rank plans for the failed set it was given or fails.
        """
        key = frozenset(spare_opt.check_failed_set(failed, self.groups).tolist())
        plan = self._cache.get(key)
        if plan is None:
            plan = self._compute(sorted(key))
            self._cache[key] = plan
        return plan

    def _compute(self, failed):
        controller = self._controller
        if hasattr(controller, "set_failed"):
            return controller.set_failed(failed)
        # Before set_failed: a fresh controller failing the whole set at once depends on
        # nothing but (layout, failed set, m).
        fresh = spare_opt.ReorderController(self.layout, micro_batches=self.micro_batches)
        return fresh.fail(failed) if failed else _fault_free(fresh, self.layout, self.micro_batches)

    def work(self, plan):
        """Every group's work keys ``t * m + j`` under ``plan``: a list of N sorted int lists."""
        cached = getattr(plan, "_spare_torch_work", None)
        if cached is not None:
            return cached
        if hasattr(plan, "work_by_group"):
            by_group = plan.work_by_group()
            indptr = by_group.indptr
            keys = (np.asarray(by_group.shard_types, dtype=np.int64) * self.micro_batches
                    + by_group.micro_batches).tolist()
            work = [keys[indptr[g]:indptr[g + 1]] for g in range(self.groups)]
        else:
            split = np.asarray(plan.split).ravel()
            order = np.argsort(split, kind="stable")
            bounds = np.searchsorted(split[order], np.arange(self.groups + 1))
            work = [order[bounds[g]:bounds[g + 1]].tolist() for g in range(self.groups)]
        try:
            plan._spare_torch_work = work
        except AttributeError:
            pass
        return work

    def owner(self, plan, key):
        """The group that computes micro-batch ``key`` under ``plan``."""
        return int(np.asarray(plan.split).ravel()[key])

    def positions(self, key, global_batch_size):
        """Positions ``range(start, stop)`` of micro-batch ``key`` in a global batch."""
        size = global_batch_size // (self.groups * self.micro_batches)
        return key * size, (key + 1) * size


def _fault_free(controller, layout, micro_batches):
    """The plan with nothing failed: the controller's current state as a Plan."""
    n = layout.stacks.shape[0]
    split = np.asarray(controller.split, dtype=np.int32).reshape(n, micro_batches)
    return spare_opt.Plan(
        status=spare_opt.MASKED, stack_number=1, lower_bound=1, failed=np.zeros(0, dtype=np.int32),
        assignment=split[:, 0].copy(), order=np.asarray(controller.order, dtype=np.int32).copy(),
        micro_batches=micro_batches, load=micro_batches, split=split,
    )

"""What a training loop needs (issue 9, scope 5): plans give an exact gradient at every step.

Nothing is trained; the arithmetic is checked.  A NumPy least-squares model has ``N m``
micro-batches (``m`` per shard type); its gradient at ``w`` is the sum over
micro-batches ``(t, j)`` of ``X_tj^T (X_tj w - y_tj)``.  Along random failure sequences
(failures between steps, failures after compute and before the all-reduce, wipe-outs
with a global restart, and repairs), every live group sums the gradients of the
micro-batches it contributes and the all-reduce sums over groups; the result must equal
the fault-free gradient to a relative error of 1e-12 at every step, whichever planner
made the plans.

The step protocol the test encodes (``docs/planner.md``, "Micro-batches"):

* a step without a mid-step failure: group ``g`` computes and contributes
  ``plan.work(g)``;
* a step interrupted by a mid-step failure: the survivors computed the previous plan's
  work (at ``m = 1`` every live group computed its whole top ``S`` layers, the paper's
  stacked compute), the new plan's ``patch`` is computed now, and each micro-batch is
  counted once: by the survivor that contributed it, else by a survivor that computed
  it, else by its patch group;
* a wipe-out loses the step: the job restarts from its checkpoint with every group
  back and the fault-free plan, and the step is computed again.
"""

import numpy as np
import pytest

from spare_opt import ReorderController, plan_reorder
from spare_opt.layouts import generators

DIMENSION = 3
ROWS_PER_MICRO_BATCH = 2


class Model:
    """Least squares with ``N m`` micro-batches of data."""

    def __init__(self, n, m, rng):
        self.x = rng.normal(size=(n, m, ROWS_PER_MICRO_BATCH, DIMENSION))
        self.y = rng.normal(size=(n, m, ROWS_PER_MICRO_BATCH))

    def micro_gradients(self, w):
        """(N, m, d): the gradient of each micro-batch at ``w``."""
        residual = np.einsum("tjbd,d->tjb", self.x, w) - self.y
        return np.einsum("tjbd,tjb->tjd", self.x, residual)

    def gradient(self, w):
        """The fault-free gradient, from all the data at once (not from the micro-gradients)."""
        x = self.x.reshape(-1, DIMENSION)
        return x.T @ (x @ w - self.y.ravel())


class ExactPlanner:
    """The exact planner driven like the controller: it keeps the previous plan itself."""

    def __init__(self, layout, m):
        self.layout, self.m = layout, m
        self.restart()

    def restart(self):
        self.failed = []
        self.plan = plan_reorder(self.layout, [], micro_batches=self.m)

    def _replan(self, mid_step=()):
        previous = self.plan
        if self.m == 1:
            arguments = {"order": previous.order, "stack_number": previous.stack_number}
        else:
            arguments = {"split": previous.split}
        self.plan = plan_reorder(self.layout, self.failed, micro_batches=self.m, mid_step=mid_step, **arguments)
        return self.plan

    def fail(self, groups, mid_step=False):
        self.failed += list(groups)
        return self._replan(groups if mid_step else ())

    def recover(self, groups):
        self.failed = [g for g in self.failed if g not in groups]
        if self.m == 1:  # a returning group resumes with its layout order, as the controller does
            order = self.plan.order.copy()
            order[list(groups)] = self.layout.stacks[list(groups)]
            self.plan = plan_reorder(self.layout, self.failed, order=order, stack_number=self.plan.stack_number)
            return self.plan
        return self._replan()


def _all_reduce(per_group):
    """Sum of the groups' partial sums (each group first sums its own micro-batches)."""
    return np.sum([np.sum(parts, axis=0) for parts in per_group.values() if parts], axis=0)


def _step_contributions(plan, grads):
    """Every live group contributes ``plan.work(g)``; each micro-batch exactly once."""
    n, m = plan.split.shape
    per_group, seen = {}, []
    for g in np.flatnonzero(~np.isin(np.arange(n), plan.failed)):
        work = plan.work(int(g))
        seen += work
        per_group[int(g)] = [grads[t, j] for t, j in work]
    assert sorted(seen) == [(t, j) for t in range(n) for j in range(m)]
    return _all_reduce(per_group)


def _interrupted_contributions(previous, plan, grads):
    """A step computed with ``previous`` whose all-reduce follows ``plan`` (a mid-step failure)."""
    n, m = plan.split.shape
    survivors = set(np.flatnonzero(~np.isin(np.arange(n), plan.failed)).tolist())
    computed = {}  # micro-batch -> survivors that computed it this step
    for g in survivors:
        items = previous.work(g)
        if m == 1:  # the paper's stacked compute: a live group computes its whole top S layers
            items = [(int(t), 0) for t in previous.order[g, :previous.stack_number]]
        for item in items:
            computed.setdefault(item, []).append(g)
    patch = {tuple(item): g for g, items in plan.patch.items() for item in items}  # (t, j) pairs at every m
    per_group = {g: [] for g in survivors}
    for t in range(n):
        for j in range(m):
            contributor = int(previous.split[t, j])
            if (t, j) in patch:
                assert (t, j) not in computed, "patch work that a survivor had already computed"
                per_group[patch[(t, j)]].append(grads[t, j])
            elif contributor in survivors:
                per_group[contributor].append(grads[t, j])
            else:
                assert (t, j) in computed, f"micro-batch {(t, j)} is lost: not computed and not patched"
                per_group[min(computed[(t, j)])].append(grads[t, j])
    return _all_reduce(per_group)


def _run(layout, m, planner, seed, steps=70):
    rng = np.random.default_rng(seed)
    n = layout.groups
    model = Model(n, m, rng)
    runner = ReorderController(layout, micro_batches=m) if planner == "controller" else ExactPlanner(layout, m)
    plan = runner.fail([]) if planner == "controller" else runner.plan
    failed = []
    seen = {"mid_step": 0, "wipe_out": 0, "recover": 0}
    for _ in range(steps):
        w = rng.normal(size=DIMENSION)
        grads = model.micro_gradients(w)
        expected = model.gradient(w)
        event = rng.random()
        live = [g for g in range(n) if g not in failed]
        if event < 0.1 and failed:
            back = rng.choice(failed, size=min(len(failed), int(rng.integers(1, 3))), replace=False).tolist()
            plan = runner.recover(back)
            failed = [g for g in failed if g not in back]
            seen["recover"] += 1
            got = _step_contributions(plan, grads)
        elif event < 0.55:
            groups = rng.choice(live, size=min(len(live), int(rng.integers(1, 3))), replace=False).tolist()
            mid_step = bool(rng.random() < 0.5)
            previous = plan
            plan = runner.fail(groups, mid_step=mid_step)
            failed += groups
            if not plan.masked:  # wipe-out: restart from the checkpoint, compute the step again
                runner.restart()
                failed = []
                plan = runner.fail([]) if planner == "controller" else runner.plan
                seen["wipe_out"] += 1
                got = _step_contributions(plan, grads)
            elif mid_step:
                seen["mid_step"] += 1
                got = _interrupted_contributions(previous, plan, grads)
            else:
                got = _step_contributions(plan, grads)
        else:
            got = _step_contributions(plan, grads)
        error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
        assert error <= 1e-12, (error, failed)
    return seen


@pytest.mark.parametrize("planner", ["controller", "exact"])
@pytest.mark.parametrize("m", [1, 3, 8])
@pytest.mark.parametrize("kind", ["sidon", "consecutive"])
def test_every_step_reduces_to_the_fault_free_gradient(kind, m, planner):
    layout = generators.sidon(21, 4, time_limit=1.0) if kind == "sidon" else generators.consecutive(16, 3)
    totals = {"mid_step": 0, "wipe_out": 0, "recover": 0}
    for seed in range(3):
        for key, value in _run(layout, m, planner, seed).items():
            totals[key] += value
    assert all(value > 0 for value in totals.values()), totals  # every kind of event happened

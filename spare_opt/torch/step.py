"""The step helper: this rank's micro-batches, one all-reduce, exact under failures."""

import collections
import os

import torch
import torch.distributed as dist
from torch.utils.data import default_collate

import spare_opt

from .elastic import WipeOut

__all__ = ["SpareStep"]


class SpareStep:
    """Run training steps whose gradient equals the fault-free one whatever fails.

    Each call computes this rank's micro-batches of the step (the plan's ``work``),
    accumulates their gradients, all-reduces a SUM over the live groups, divides by
    ``N m`` and steps the optimizer.  When a group fails during the step (before or
    during the all-reduce), the survivors agree on the failed set, rebuild the process
    group, compute only the patch micro-batches (those that only the failed groups had
    computed) on top of what they have already computed, and all-reduce again: every
    micro-batch of the global batch is counted exactly once.

    Parameters
    ----------
    group : SpareGroup
    model : torch.nn.Module
        Without batch-dependent layers (batch norm): the gradient is the mean of the
        micro-batch gradients.
    optimizer : torch.optim.Optimizer
    loss_fn : callable
        ``loss_fn(model, batch) -> torch.Tensor``, the *mean* loss over the micro-batch.
    sampler : SpareBatchSampler
        Built on ``group``.
    dataset : torch.utils.data.Dataset
        Read directly (``collate_fn([dataset[i] for i in indices])``) for the micro-batches
        the loader did not deliver (patch work).
    loader : torch.utils.data.DataLoader, optional
        ``DataLoader(dataset, batch_sampler=sampler, ...)``, with workers and
        prefetching if wanted; without it every micro-batch is read directly.
    collate_fn : callable, default ``torch.utils.data.default_collate``
    checkpoint : str or os.PathLike, optional
        File of the last checkpoint (``torch.save``, written atomically by the lowest
        live group every ``checkpoint_every`` steps); loaded at start when it exists.
        The job restarts from it after a wipe-out.
    checkpoint_every : int, default 0
        Steps between checkpoints (0: never).

    Attributes
    ----------
    step : int
        The next step to compute.

    Notes
    -----
    The step helper adds to ``group.timeline``: ``patch-plan`` (the patch micro-batches
    of this rank planned, ``keys`` of them), ``patch`` (computed), ``caught-up`` (the
    step's result received from a member that had applied it), ``recovered`` (the step
    during which a failure happened applied), ``healed`` and ``restored`` (state from a
    peer, or from the checkpoint).  ``spare_opt.torch.demo.recovery_timeline`` turns them
    into the phases of a recovery.
    """

    def __init__(self, group, model, optimizer, loss_fn, sampler, dataset, *, loader=None,
                 collate_fn=default_collate, checkpoint=None, checkpoint_every=0):
        self.group = group
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.sampler = sampler
        self.dataset = dataset
        self.loader = loader
        self.collate_fn = collate_fn
        self.checkpoint = None if checkpoint is None else os.fspath(checkpoint)
        self.checkpoint_every = int(checkpoint_every)
        self.step = 0
        self.losses = []
        self._params = [p for p in model.parameters() if p.requires_grad]
        dtype = self._params[0].dtype if self._params else torch.float32
        size = sum(p.numel() for p in self._params)
        self._size = size
        self._buffers = [torch.zeros(size + 2, dtype=dtype) for _ in range(2)]
        self._views = [self._split(b) for b in self._buffers]
        self._last = None  # (step, buffer) of the last committed step
        self._iterator = None
        self._cache = {}
        if group.joined_late:
            self._heal()
        elif self.checkpoint is not None and os.path.exists(self.checkpoint):
            self.load_state_dict(torch.load(self.checkpoint, weights_only=False))
            group._event("restored", step=self.step)
        sampler.set_start_step(self.step)

    # ------------------------------------------------------------- state
    def state_dict(self):
        """``{"model", "optimizer", "step"}``: what a repaired group heals from, and what checkpoints hold."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "step": self.step}

    def load_state_dict(self, state):
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step = int(state["step"])

    def _split(self, buffer):
        views, offset = [], 0
        for p in self._params:
            views.append(buffer[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        return views

    # ------------------------------------------------------------- data
    def _batch(self, step, key):
        if self.loader is not None:
            if self._iterator is None:
                self._iterator = iter(self.loader)
            while (step, key) not in self._cache:
                try:
                    batch = next(self._iterator)
                except StopIteration:
                    break
                loaded = self.sampler.pop_key()
                if loaded[0] >= step:
                    self._cache[loaded] = batch
                if loaded[0] > step:
                    break
            batch = self._cache.pop((step, key), None)
            if batch is not None:
                return batch
        return self.collate_fn([self.dataset[i] for i in self.sampler.indices(step, key)])

    def _drop_stale(self, step):
        for loaded in [k for k in self._cache if k[0] < step]:
            del self._cache[loaded]

    # ------------------------------------------------------------- the step
    def __call__(self):
        """Compute one step; return the mean loss over the global batch (a float).

        Raises
        ------
        WipeOut
            A shard type lost every holder: save nothing, exit, restart every group
            from the last checkpoint.
        Evicted
            The others declared this group failed.
        """
        group = self.group
        book = group.book
        me = group.group
        step = self.step
        self._drop_stale(step)
        fresh = True
        recovering = False  # a recovery happened during this step (the timeline's "recovered" event)
        while True:
            if fresh:
                for p in self._params:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                    else:
                        p.grad.zero_()
                loss_sum = 0.0
                work = book.work(group.plan)
                computed = {g: set(work[g]) for g in group.members}
                pending = collections.deque(work[me])
                patching = False
                fresh = False
            while pending and not group.aborted():
                key = pending.popleft()
                loss = self.loss_fn(self.model, self._batch(step, key))
                loss.backward()
                loss_sum += float(loss.detach())
            if not pending and not group.aborted():
                if patching:
                    group._event("patch", step=step)
                buffer = self._buffers[step % 2]
                for view, p in zip(self._views[step % 2], self._params):
                    view.copy_(p.grad)
                buffer[-2] = loss_sum
                buffer[-1] = 1.0 if group.rejoin_pending() else 0.0
                if group.all_reduce(buffer):
                    rejoin = float(buffer[-1]) > 0
                    loss = self._commit(step, buffer)
                    if recovering:
                        group._event("recovered", step=step)
                    if rejoin:
                        self._boundary()
                    return loss
            # A member failed: agree, rebuild, then patch (or catch up).
            passed = group.recover({"step": step, "phase": "step"})
            recovering = True
            steps = {record["step"] for record in passed[-1]["records"].values()}
            if len(steps) > 1:
                caught_up = self._catch_up(step, min(steps), max(steps))
                if caught_up is not None:
                    group._event("recovered", step=step)
                    return caught_up
                fresh = True  # this rank was ahead: restart its step under the new plan
                continue
            for agreed in passed:
                plan = agreed["plan"]
                for g in [g for g in computed if g in agreed["failed"]]:
                    del computed[g]
                covered = set().union(*computed.values())
                owners = book.work(plan)
                for g in computed:
                    for key in owners[g]:
                        if key not in covered:
                            computed[g].add(key)
                            if g == me:
                                pending.append(key)
            patching = True
            group._event("patch-plan", step=step, keys=len(pending))

    def _commit(self, step, buffer, divided=False):
        total = self.group.book.groups * self.group.book.micro_batches
        views = self._views[step % 2] if buffer is self._buffers[step % 2] else self._split(buffer)
        if not divided:
            buffer.div_(total)
        loss = float(buffer[-2])
        for view, p in zip(views, self._params):
            p.grad.copy_(view)
        self.optimizer.step()
        self._last = (step, buffer)
        self.step = step + 1
        self.losses.append(loss)
        if self.checkpoint is not None and self.checkpoint_every and self.step % self.checkpoint_every == 0 \
                and self.group.group == self.group.members[0]:
            temporary = f"{self.checkpoint}.tmp{os.getpid()}"
            torch.save(self.state_dict(), temporary)
            os.replace(temporary, self.checkpoint)
        return loss

    def _catch_up(self, step, low, high):
        """Some members committed step ``low`` before its all-reduce failed elsewhere: they send its result."""
        group = self.group
        records = group.records
        source = min(g for g, record in records.items() if record["step"] == high)
        if step == low:
            received = torch.zeros_like(self._buffers[0])
            ok = group.wait(lambda: dist.broadcast(received, src=group.members.index(source), async_op=True))
            if not ok:
                raise RuntimeError("a member failed while the step's result was sent: not handled")
            group._event("caught-up", step=step)
            return self._commit(step, received, divided=True)
        last_step, last = self._last
        payload = last.clone() if group.group == source else torch.zeros_like(last)
        ok = group.wait(lambda: dist.broadcast(payload, src=group.members.index(source), async_op=True))
        if not ok:
            raise RuntimeError("a member failed while the step's result was sent: not handled")
        return None

    def _boundary(self):
        """A repaired group asked to rejoin: admit it at this step boundary and send it the state."""
        group = self.group
        passed = group.recover({"step": self.step, "phase": "boundary"})
        # A joiner's record (step -1) is in when its admitting epoch's rebuild failed.
        steps = {record["step"] for g, record in passed[-1]["records"].items() if g not in group.joiners}
        if len(steps) > 1:
            self._catch_up(self.step, min(steps), max(steps))
            return
        if group.joiners:
            self._send_state()

    def _send_state(self):
        group = self.group
        source = min(g for g in group.members if g not in group.joiners)
        objects = [self.state_dict() if group.group == source else None]
        dist.broadcast_object_list(objects, src=group.members.index(source))
        group._event("healed", step=self.step, joiners=list(group.joiners))

    def _heal(self):
        group = self.group
        source = min(g for g in group.members if g not in group.joiners)
        objects = [None]
        dist.broadcast_object_list(objects, src=group.members.index(source))
        self.load_state_dict(objects[0])
        group._event("healed", step=self.step)

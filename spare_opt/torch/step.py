"""The step helper: this rank's micro-batches, one all-reduce, exact under failures."""

import collections
import inspect
import os
import sys
import time

import torch
from torch.utils.data import default_collate

import spare_opt

from ._checkpoints import Checkpoints, _check_extra
from ._consistency import _BYTES, _SLOT, Consistency
from ._tensors import _check_group_model, _check_optimizer, _is_dtensor, _local, _portable, _reshard
from .randomness import micro_batch_rng

__all__ = ["SpareStep"]

#: What :meth:`SpareStep._catch_up` returns when a member failed while the step's result was sent.
_FAILED = object()


class SpareStep(Checkpoints, Consistency):
    """Run training steps whose gradient equals the fault-free one whatever fails.

    Each call computes this rank's micro-batches of the step (the plan's ``work``),
    accumulates their gradients, all-reduces a SUM over the live groups, divides by
    ``N m``, calls ``before_step`` and steps the optimizer.  When a group fails during
    the step (before or during the all-reduce), the survivors agree on the failed set,
    rebuild the process group, compute only the patch micro-batches (those that only the
    failed groups had computed) on top of what they have already computed, and
    all-reduce again: every micro-batch of the global batch is counted exactly once.

    Parameters
    ----------
    group : SpareGroup
    model : torch.nn.Module
        Without batch-dependent layers (batch norm): the gradient is the mean of the
        micro-batch gradients.
    optimizer : torch.optim.Optimizer
    loss_fn : callable
        ``loss_fn(model, batch) -> torch.Tensor``, the *mean* loss over the micro-batch.
        With three parameters it is called as ``loss_fn(model, batch, step)``, ``step``
        being this helper (``step.current`` is ``(step, shard type, micro-batch)`` of the
        micro-batch being computed).
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
        File of the last checkpoint (``torch.save`` of :meth:`state_dict` and of
        ``checkpoint_extra``, written atomically by the lowest live group when a step
        that is a multiple of ``checkpoint_every`` begins, and once the sampler's last
        step is applied); loaded at start when it exists.  The job restarts from it
        after a wipe-out.  It records the job that wrote it (``spare_job``: the
        sampler's dataset size, global batch size, shuffle and seed, the steps, N, m and
        the layout's fingerprint): a file of a job that drew its samples in another
        order is refused (:class:`~spare_opt.torch.CheckpointMismatch`), and every
        resume says on stderr which file, at which step, and what else differs.
    checkpoint_every : int, default 0
        Steps between checkpoints (0: only the final one).
    checkpoint_extra : dict or callable, optional
        Entries of the user's own written at the top level of every checkpoint, beside
        ``model``, ``optimizer``, ``step`` and ``state`` (which they may not replace):
        a dict of picklable values (``{"model_args": ..., "config": ...}``, what
        nanoGPT's ``sample.py`` reads), or a callable that returns one, called at each
        save (for values that change, such as the best validation loss).  The entries
        of the checkpoint loaded at start are in :attr:`restored_extra`.  They are not
        sent in a heal.
    before_step : callable, optional
        ``before_step(step) -> bool or None``, called on every rank once the step's
        gradient is reduced: every parameter's ``.grad`` holds the *global* gradient (the
        mean over the whole global batch), ``step.step`` is the step being applied and
        ``step.loss`` its mean loss; then ``optimizer.step()``.  The place for clipping by
        global norm, unscaling (``GradScaler``), a NaN check, logging the gradient norm.
        Returning ``False`` leaves ``optimizer.step()`` out (a skipped step, or one the
        hook made itself, as ``GradScaler.step`` does).  The gradient is bitwise the same
        on every rank, so a decision taken from it is taken alike everywhere; the hook
        must not use collectives nor anything that differs between ranks.
    state : dict of str to object, optional
        Further stateful objects (an LR scheduler, :class:`~spare_opt.torch.RandomState`,
        a ``GradScaler``, a data or curriculum state: anything with ``state_dict()`` and
        ``load_state_dict()``).  They travel with the model and the optimizer: in the
        heal of a repaired group, in checkpoints, and in the restart after a wipe-out.
    check_every : int, default 10
        Steps between two replica-consistency checks of the model and the optimizer
        (0: never).  A check also runs at
        the first step of every process (start, restart, repaired group) and right
        after every heal.  See Notes.
    seed : int, optional
        Seed of the per-micro-batch random streams (default: ``sampler.seed``).
    micro_batch_rng : bool, default True
        Run every micro-batch's forward and backward under
        :func:`~spare_opt.torch.micro_batch_rng` seeded with ``(seed, step, shard type,
        micro-batch)``: dropout draws the same masks whoever computes the micro-batch.

    Attributes
    ----------
    step : int
        The next step to compute (in ``before_step``: the step being applied).
    loss : float
        The mean loss of the last reduced step.
    losses : list of float
        The mean loss of every step applied by this process.
    parameters : list of torch.nn.Parameter
        The trainable parameters (for ``clip_grad_norm_`` in ``before_step``).
    current : tuple of int or None
        ``(step, shard type, micro-batch)`` while ``loss_fn`` runs.
    restored_extra : dict
        The ``checkpoint_extra`` entries of the checkpoint loaded at start (empty when
        none was loaded).

    Raises
    ------
    spare_opt.ParameterTypeError
        ``checkpoint_extra`` is neither a dict with string keys nor a callable.
    spare_opt.ParameterError
        ``checkpoint_extra`` names an entry of :meth:`state_dict`; the optimizer holds
        parameters that are not the model's (built before
        ``fully_shard``); the model is sharded (FSDP2) over another number of ranks than the DP group's
        (``SpareGroup(group_process_group=...)`` missing), only partly sharded, or
        wrapped in FSDP1 in a DP group of several ranks.
    CheckpointMismatch
        The checkpoint found at start was written by a job with another data order, or
        does not fit the model or optimizer.
    ReplicaDivergence
        (from a call) The consistency check found groups whose parameters, optimizer
        state or hyper-parameters (learning rates) differ from the others'.
    Evicted
        (from a call) A rank of this DP group died or failed in a pass: the whole
        group leaves (the launcher restarts it, and it rejoins).

    Notes
    -----
    The state of a step boundary (:meth:`state_dict`) is taken when the next step
    begins, so whatever the loop does between two calls (``scheduler.step()``,
    ``RandomState`` draws, a curriculum update) is in the checkpoint and in the heal;
    repaired groups are admitted at that moment too.  The final checkpoint (when the
    sampler has ``steps``) is taken when the last step is applied, inside the last
    call: what the loop does after it is not in it.

    The consistency check: each live group puts three float64 checksums of its state
    (the sum of its parameters, of its optimizer's state tensors, of the optimizer's
    numeric hyper-parameters, so the learning rate a scheduler set), as their 24 bytes,
    into its own slot of the step's gradient all-reduce (``25 N`` more numbers in that
    buffer, no extra collective; the other groups' slots hold zeros, so the sum
    carries every slot exactly); after the reduction every rank compares the slots
    alike, bit for bit: replicas that apply the same reduced gradient with the same
    optimizer on the same kind of device are bitwise equal, and the sums are taken in
    an order that does not depend on the number of threads.  Groups that differ from
    the largest agreeing set raise :class:`ReplicaDivergence` on every rank, before the
    step is applied.  Replicas on different kinds of device (whose arithmetic may
    differ in the last bits) need ``check_every=0``.

    The step helper adds to ``group.timeline``: ``patch-plan`` (the patch micro-batches
    of this rank planned, ``keys`` of them), ``patch`` (computed), ``caught-up`` (the
    step's result received from a member that had applied it), ``recovered`` (the step
    during which a failure happened applied), ``healed`` and ``restored`` (state from a
    peer, or from the checkpoint) and ``checked`` (a consistency check passed).
    :func:`~spare_opt.torch.recovery_phases` turns them into the phases of a recovery.
    """

    def __init__(self, group, model, optimizer, loss_fn, sampler, dataset, *, loader=None,
                 collate_fn=default_collate, checkpoint=None, checkpoint_every=0, checkpoint_extra=None,
                 before_step=None, state=None, check_every=10, seed=None, micro_batch_rng=True):
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
        if checkpoint_extra is not None and not callable(checkpoint_extra):
            _check_extra(checkpoint_extra)
        self.checkpoint_extra = checkpoint_extra
        self.restored_extra = {}
        if before_step is not None and not callable(before_step):
            raise spare_opt.ParameterTypeError(f"before_step must be callable, got {type(before_step).__name__}")
        self.before_step = before_step
        self.extra_state = dict(state or {})
        for name, value in self.extra_state.items():
            if not isinstance(name, str) or not (hasattr(value, "state_dict") and hasattr(value, "load_state_dict")):
                raise spare_opt.ParameterTypeError(
                    f"state must map names to objects with state_dict() and load_state_dict(); {name!r} is a "
                    f"{type(value).__name__}")
        if isinstance(check_every, bool) or not isinstance(check_every, int) or check_every < 0:
            raise spare_opt.ParameterError(f"check_every must be a non-negative integer, got {check_every!r}")
        self.check_every = check_every
        self.seed = int(getattr(sampler, "seed", 0) if seed is None else seed)
        self.micro_batch_rng = bool(micro_batch_rng)
        self._loss_takes_step = _takes_three(loss_fn)
        self.step = 0
        self.loss = float("nan")
        self.losses = []
        self.current = None
        _reshard(model)  # an evaluation before may have left FSDP2's parameters gathered (not the optimizer's)
        self._params = [p for p in model.parameters() if p.requires_grad]
        self.parameters = self._params
        _check_group_model(group, model)
        _check_optimizer(model, optimizer)
        # A DP group of several ranks: every rank takes part `group_rank` of each micro-batch.
        self._sharded = any(_is_dtensor(p) for p in self._params)
        dtype = self._params[0].dtype if self._params else torch.float32
        size = sum(_local(p).numel() for p in self._params)
        self._size = size
        self._digest_at = size + 2
        self._buffers = [torch.zeros(size + 2 + _SLOT * group.groups, dtype=dtype) for _ in range(2)]
        self._views = [self._split(b) for b in self._buffers]
        self._last = None  # (step, buffer) of the last committed step
        self._iterator = None
        self._cache = {}
        self._admit_due = False  # a repaired group asked to rejoin: admit it when the next step begins
        self._check_due = True  # the first step of every process is checked
        self._saved_step = None
        if any(name == "fresh-start" for name, _, _ in group.timeline):
            self._say("started again as a fresh member: it died while the job started, before anyone could admit it")
        if group.joined_late:
            self._heal()
        elif self.checkpoint is not None and os.path.exists(self._checkpoint_file()):
            self._resume(self._checkpoint_file())
        sampler.set_start_step(self.step)

    def _split(self, buffer):
        views, offset = [], 0
        for p in self._params:
            local = _local(p)
            views.append(buffer[offset:offset + local.numel()].view_as(local))
            offset += local.numel()
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
        ReplicaDivergence
            The consistency check found groups whose state differs (on every rank alike).
        """
        # A forward under torch.no_grad() (an evaluation) leaves FSDP2's root module with its
        # parameters gathered: the state sent, saved and checksummed is the sharded one.
        _reshard(self.model)
        self._begin()
        group = self.group
        book = group.book
        me = group.group
        step = self.step
        self._drop_stale(step)
        check = self.check_every > 0 and (self._check_due or step % self.check_every == 0)
        digest = self._digest() if check else None
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
            # A group of one rank stops at an abort; the ranks of a larger group finish their
            # micro-batches alike (they see the abort at different moments, and each pass
            # runs collectives between them), then learn it from the all-reduce.
            alone = group.group_world_size == 1
            while pending and not (alone and group.aborted()):
                key = pending.popleft()
                loss_sum += self._micro_batch(step, key)
            if not pending and not (alone and group.aborted()):
                if patching:
                    group._event("patch", step=step)
                buffer = self._buffers[step % 2]
                for view, p in zip(self._views[step % 2], self._params):
                    view.copy_(_local(p.grad))
                buffer[self._size] = loss_sum
                buffer[self._size + 1] = 1.0 if group.rejoin_pending() else 0.0
                buffer[self._digest_at:] = 0.0
                if digest is not None:
                    at = self._digest_at + _SLOT * me
                    buffer[at:at + _BYTES] = digest.view(torch.uint8).to(buffer.dtype)
                    buffer[at + _BYTES] = 1.0
                if not self._sharded and group.group_world_size > 1:
                    # Replicated inside the group: average its ranks' parts first.
                    group.all_reduce_in_group(buffer[:self._size + 1]).div_(group.group_world_size)
                ok = group.all_reduce(buffer)
                if group.group_world_size > 1:
                    # Every rank of the group commits, or none: each position's all-reduce
                    # may end differently when a member dies during them.
                    ok = float(group.all_reduce_in_group(torch.tensor([0.0 if ok else 1.0]))[0]) == 0.0
                if ok:
                    loss = self._commit(step, buffer)
                    if recovering:
                        self._recovered(step)
                    return loss
            # A member failed: agree, rebuild, then patch (or catch up).
            while True:
                passed = group.recover({"step": step, "phase": "step"})
                recovering = True
                steps = {record["step"] for record in passed[-1]["records"].values()}
                if len(steps) == 1:
                    break
                caught_up = self._catch_up(step, min(steps), max(steps))
                if caught_up is _FAILED:
                    continue  # a member died while the step's result was sent: agree again
                if caught_up is not None:
                    self._recovered(step)
                    return caught_up
                fresh = True  # this rank was ahead: restart its step under the new plan
                break
            if fresh:
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

    def _micro_batch(self, step, key):
        """Forward and backward of micro-batch ``key`` of ``step`` (under its own random stream); its loss.

        In a DP group of several ranks a ``RuntimeError`` (a collective of the group
        failed: a rank of it died) makes the whole group leave: :class:`Evicted`.
        """
        group = self.group
        group._computing = (step, key, time.monotonic())  # the heartbeat's hang watch (hang_timeout)
        try:
            return self._compute(step, key)
        except RuntimeError as exc:
            if group.group_world_size == 1 or isinstance(exc, spare_opt.SpareError):
                raise
            group._lose_group(f"rank {group.group_rank} of group {group.group} failed in a pass: "
                              f"{str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}")
            group._check_group_lost()
            raise
        finally:
            group._computing = None

    def _compute(self, step, key):
        m = self.group.micro_batches
        self.current = (step, key // m, key % m)
        batch = self._batch(step, key)
        try:
            if self.micro_batch_rng:
                with micro_batch_rng(self.seed, step, key // m, key % m, part=self.group.group_rank):
                    loss = self._loss(batch)
                    loss.backward()
            else:
                loss = self._loss(batch)
                loss.backward()
        finally:
            self.current = None
        return float(loss.detach())

    def _loss(self, batch):
        if self._loss_takes_step:
            return self.loss_fn(self.model, batch, self)
        return self.loss_fn(self.model, batch)

    def _begin(self):
        """The step boundary: admit a repaired group, write the checkpoint that is due."""
        if self._admit_due:
            self._admit_due = False
            self._boundary()
        if self.checkpoint is not None and self.checkpoint_every and self.step % self.checkpoint_every == 0 \
                and self.step > 0 and self._saved_step != self.step:
            self._saved_step = self.step
            if self.group.group == self.group.members[0]:
                self.save_checkpoint()

    def _commit(self, step, buffer, divided=False):
        total = self.group.book.groups * self.group.book.micro_batches
        views = self._views[step % 2] if buffer is self._buffers[step % 2] else self._split(buffer)
        if not divided:
            buffer[:self._size + 1].div_(total)
        loss, admit = self._check(step, buffer)
        # A caught-up step admits nobody: the member that sent it held its boundary (and
        # the catch-up) already; a request still pending is flagged again next step.
        self._admit_due = not divided and admit
        for view, p in zip(views, self._params):
            _local(p.grad).copy_(view)
        self.loss = loss
        self.step = step
        apply = True
        if self.before_step is not None:
            apply = self.before_step(self) is not False
        if apply:
            self.optimizer.step()
        self._last = (step, buffer)
        self.step = step + 1
        self.losses.append(loss)
        if self.checkpoint is not None and self.step == getattr(self.sampler, "steps", None) \
                and self._saved_step != self.step:
            # The final state: no later step begins to write it.
            self._saved_step = self.step
            if self.group.group == self.group.members[0]:
                self.save_checkpoint()
        return loss

    # ------------------------------------------------------------- recovery
    def _catch_up(self, step, low, high):
        """Some members committed step ``low`` before its all-reduce failed elsewhere: they send its result.

        Returns the step's loss on a member that was behind, ``None`` on one that sent
        it, :data:`_FAILED` when a member failed during the broadcast (the epoch is
        aborted: agree again, and catch up or patch under the new record).
        """
        group = self.group
        records = group.records
        source = min(g for g, record in records.items() if record["step"] == high)
        if step == low:
            received = torch.zeros_like(self._buffers[0])
            if not group.broadcast(received, source):
                return _FAILED
            group._event("caught-up", step=step)
            return self._commit(step, received, divided=True)
        last_step, last = self._last
        payload = last.clone() if group.group == source else torch.zeros_like(last)
        if not group.broadcast(payload, source):
            return _FAILED
        return None

    def _boundary(self):
        """A repaired group asked to rejoin: admit it at this step boundary and send it the state.

        A member that fails while the state is sent makes every rank agree again (the
        repaired groups stay joiners) and send it again, until every joiner holds it;
        when no member that holds the state is left, the agreement raises
        :class:`WipeOut`.  A failure agreed here (at the boundary, or during the heal)
        gets its recovery line on stderr, as one during a step does.
        """
        group = self.group
        resent = False  # a member failed while the state was sent: this agreement sends it again
        while True:
            passed = group.recover({"step": self.step, "phase": "boundary"})
            where = f"heal of groups {list(group.joiners)} failed, sending the state again: agreed" if resent else \
                f"boundary of step {self.step} agreed"
            self._report(where, quiet_when_nothing_failed=True)
            # A joiner's record (step -1) is in when its admitting epoch's rebuild or heal failed.
            steps = {record["step"] for g, record in passed[-1]["records"].items() if g not in group.joiners}
            if len(steps) > 1:
                if self._catch_up(self.step, min(steps), max(steps)) is _FAILED:
                    continue
                return
            if not group.joiners or self._send_state():
                return
            resent = True

    def _send_state(self):
        """Send the state to the joiners; ``True`` once every rank agreed that they hold it."""
        group = self.group
        source = min(g for g in group.members if g not in group.joiners)
        sent = group.broadcast_object(_portable(self.state_dict()) if group.group == source else None, source)
        if not group._settle_heal(sent is not None):
            return False
        self._check_due = True
        group._event("healed", step=self.step, joiners=list(group.joiners))
        sender = "this group sent the state" if group.group == source else f"state sent by group {source}"
        self._say(f"groups {list(group.joiners)} rejoined at step {self.step} ({sender})")
        return True

    def _heal(self):
        """This repaired group receives the state from a member; again after every failed attempt."""
        group = self.group
        while True:
            source = min(g for g in group.members if g not in group.joiners)
            state = group.broadcast_object(None, source)
            if group._settle_heal(state is not None):
                break
            # A member died during the heal: agree again (this group stays a joiner, or
            # the agreement raises WipeOut when no member holding the state is left).
            group.recover({"step": -1, "phase": "boundary"})
            if group.group not in group.joiners:
                raise RuntimeError(f"group {group.group} was not kept a joiner after a failed heal (epoch "
                                   f"{group.epoch}): it holds no state")
            self._report(f"heal from group {source} failed, receiving the state again: agreed")
        self.load_state_dict(self._restore(state))
        self._check_due = True
        group._event("healed", step=self.step)
        self._said_at = len(group.timeline)  # what came before the admission is not this group's news
        self._say(f"rejoined at step {self.step} (state received from group {source})")

    def _say(self, text):
        """One line on stderr for the operator's log, from rank 0 of this DP group."""
        if self.group.group_rank == 0:
            print(f"spare-opt: group {self.group.group}: {text}", file=sys.stderr, flush=True)

    #: How far :meth:`_news` has read ``group.timeline``.
    _said_at = 0

    def _news(self):
        """What the agreements since the last line decided: ``(groups newly failed, what the survivors saw)``.

        From ``group.timeline`` past :attr:`_said_at`: the ``agree`` events carry each
        epoch's whole failed set, the ``detect`` events what was seen.
        """
        timeline = self.group.timeline
        before = set()
        for name, _, extra in timeline[:self._said_at]:
            if name == "agree":
                before = set(extra.get("failed", ()))
        after = set(before)
        sources = []
        for name, _, extra in timeline[self._said_at:]:
            if name == "agree":
                after = set(extra.get("failed", ()))
            elif name == "detect" and extra.get("source"):
                sources.append(str(extra["source"]).split(":")[0])  # "collective raised", not gloo's whole message
        self._said_at = len(timeline)
        return sorted(after - before), list(dict.fromkeys(sources))

    def _report(self, where, quiet_when_nothing_failed=False):
        """The operator's line for the failures agreed since the last line: ``{where} in epoch {e}: failed groups ...``.

        ``where`` says where they were handled (``step 12 recovered``, ``boundary of step
        14 agreed``, ...).  The line names the groups newly agreed failed, or says that
        none failed (every member answered: a stall taken for a death, its suspicion
        withdrawn), then the live groups, the joiners, and what the survivors saw
        (``seen: death notice``).  With ``quiet_when_nothing_failed`` (an admission at a
        step boundary that found every member alive) no line when nothing failed and
        nothing was seen.
        """
        group = self.group
        failed, sources = self._news()
        if quiet_when_nothing_failed and not failed and not sources:
            return
        what = f"failed groups {failed}" if failed else \
            "no group failed (every member answered: a stall taken for a failure, withdrawn)" if sources else "no group failed"
        self._say(f"{where} in epoch {group.epoch}: {what}, {group.world_size} of {group.groups} live"
                  + (f", joiners {group.joiners}" if group.joiners else "")
                  + (f" (seen: {'; '.join(sources)})" if sources else ""))

    def _recovered(self, step):
        """The step during which a member failed is applied: the ``recovered`` event and the operator's line."""
        group = self.group
        group._event("recovered", step=step)
        self._report(f"step {step} recovered")


def _takes_three(function):
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind == p.VAR_POSITIONAL for p in parameters)

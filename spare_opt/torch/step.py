"""The step helper: this rank's micro-batches, one all-reduce, exact under failures."""

import collections
import contextlib
import inspect
import numbers
import os
import sys
import time

import numpy

import torch
from torch.utils.data import default_collate

import spare_opt

from ._checkpoints import Checkpoints, _check_extra
from ._consistency import _BYTES, _SLOT, Consistency
from ._pipeline import PipelineRunner
from ._tensors import _check_group_model, _check_optimizer, _group_grad_norm, _is_dtensor, _local, _portable, _reshard
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
    model : torch.nn.Module or list of torch.nn.Module
        Without batch-dependent layers (batch norm): the gradient is the mean of the
        micro-batch gradients.  This rank's part of the model in a DP group of several
        ranks (FSDP2-sharded, tensor-parallel, or its pipeline stages' submodules, a list
        with several stages per rank, torchtitan's ``model_parts``).
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
        global norm (:meth:`clip_grad_norm_`, which adds the norm's parts over the ranks
        of a DP group of several), unscaling (``GradScaler``), a NaN check, logging the
        gradient norm.
        Returning ``False`` leaves ``optimizer.step()`` out (a skipped step, or one the
        hook made itself, as ``GradScaler.step`` does).  The gradient is bitwise the same
        at the same position of every live group, so a decision taken from it is taken
        alike everywhere; the hook must not use collectives between DP groups nor
        anything that differs between them (collectives among the ranks of its own DP
        group, such as :meth:`clip_grad_norm_`'s, are fine: every rank of every group
        runs the hook).
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
        micro-batch)``: dropout draws the same masks whoever computes the micro-batch
        (with the rank's ``dp_shard`` part, and its pipeline stage: each part and each
        stage draws a stream of its own; the ranks of a tensor-parallel row the same).
    stages : torch.distributed.pipelining.PipelineStage or list, optional
        This rank's pipeline stage(s) in a DP group whose mesh has a ``pp`` dimension
        (``SpareGroup(mesh=...)``), built as torchtitan builds them
        (``PipelineStage(model_part, stage_index, num_stages, device,
        group=mesh["pp"].get_group())``); ``model`` is then the stages' submodules (a list
        under a schedule of several stages per rank).  The micro-batches this group
        computes in a step run as the pipeline micro-batches of one schedule step, and a
        survivor's patch micro-batches after a failure as a further schedule step of
        their own count (one schedule per count, built once: see
        :mod:`spare_opt.torch._pipeline`).  ``loss_fn`` is then the schedule's:
        ``loss_fn(output, target)``, the mean loss over one micro-batch, and a micro-batch
        collates to ``(inputs, target)``: every stage reads it, the first stage takes the
        inputs, the last the target.
    schedule : str or type, default "1F1B"
        With ``stages``: the schedule class of ``torch.distributed.pipelining`` or its name
        (``"GPipe"``, ``"1F1B"``, ``"Interleaved1F1B"``, ``"LoopedBFS"``), built with
        ``scale_grads=False`` (the step helper divides by ``N m`` itself).

    Attributes
    ----------
    step : int
        The next step to compute (in ``before_step``: the step being applied).
    loss : float
        The mean loss of the last reduced step.
    losses : list of float
        The mean loss of every step applied by this process.
    parameters : list of torch.nn.Parameter
        The trainable parameters (this rank's local part of the model).
    computed : list of int
        The micro-batch keys ``t m + j`` whose gradients this group added to the last
        applied step (its work under the plan and its patch micro-batches; empty when
        it received the step's result from another group).
    current : tuple of int or None
        ``(step, shard type, micro-batch)`` while ``loss_fn`` runs (with pipeline
        stages: of the pipeline micro-batch whose forward ran last on this rank, the
        one whose loss the last stage computes next; ``None`` while a new schedule
        infers its shapes).
    restored_extra : dict
        The ``checkpoint_extra`` entries of the checkpoint loaded at start (empty when
        none was loaded).

    Raises
    ------
    spare_opt.ParameterTypeError
        ``checkpoint_extra`` is neither a dict with string keys nor a callable;
        ``loss_fn`` or ``collate_fn`` is not callable; ``checkpoint`` is not a path;
        ``seed`` is not an integer.
    spare_opt.ParameterError
        ``checkpoint_every`` or ``check_every`` is not a non-negative integer (a bool, a
        float, text, NaN or ``None``); ``checkpoint_extra`` names an entry of
        :meth:`state_dict`, or one of its entries does not pickle; the optimizer holds
        parameters that are not the model's (built before
        ``fully_shard``); the model is sharded (FSDP2) over another number of ranks than the DP group's
        (``SpareGroup(group_process_group=...)`` missing), only partly sharded, or
        wrapped in FSDP1 in a DP group of several ranks.
    CheckpointMismatch
        The checkpoint found at start was written by a job with another data order, or
        does not fit the model or optimizer; or it is no readable checkpoint (empty,
        truncated, another kind of file), holds a step that is not an integer ``>= 0``,
        is the parts of DP groups of another number of ranks (or lacks a part), or is a
        symbolic link whose target is gone.  The whole job is stopped (every restart
        would meet the same files).
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
                 before_step=None, state=None, check_every=10, seed=None, micro_batch_rng=True, stages=None,
                 schedule="1F1B"):
        self.group = group
        if isinstance(model, (list, tuple)):
            # torchtitan's model_parts: the stages of this rank (several under an interleaved schedule)
            model = torch.nn.ModuleList(model)
        self.model = model
        self.optimizer = optimizer
        for name, value in (("loss_fn", loss_fn), ("collate_fn", collate_fn)):
            if not callable(value):
                raise spare_opt.ParameterTypeError(f"{name} must be callable, got {type(value).__name__}")
        self.loss_fn = loss_fn
        self.sampler = sampler
        self.dataset = dataset
        self.loader = loader
        self.collate_fn = collate_fn
        if checkpoint is not None and not isinstance(checkpoint, (str, os.PathLike)):
            raise spare_opt.ParameterTypeError(f"checkpoint must be a path (str or os.PathLike) or None, got "
                                               f"{type(checkpoint).__name__}")
        self.checkpoint = None if checkpoint is None else os.fspath(checkpoint)
        if self.checkpoint is not None and not str(self.checkpoint).strip():
            raise spare_opt.ParameterError("checkpoint must be a file name, got an empty one")
        self.checkpoint_every = _count("checkpoint_every", checkpoint_every)
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
        self.check_every = _count("check_every", check_every)
        if seed is not None and (isinstance(seed, (bool, numpy.bool_)) or not isinstance(seed, numbers.Integral)):
            raise spare_opt.ParameterTypeError(f"seed must be an integer or None, got {seed!r}")
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
        self._pipeline = None if stages is None else _pipeline_of(group, model, stages, schedule, loss_fn)
        # A DP group whose ranks hold the model whole (no FSDP2, no mesh): each rank takes its
        # part of every micro-batch, and the step averages their gradients itself.
        self._replicated = group.group_world_size > 1 and not group.group_mesh.dims and \
            not any(_is_dtensor(p) for p in self._params)
        self._loss_share = group.group_mesh.loss_share
        self.computed = []
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
        elif self.checkpoint is not None:
            self._start_from_checkpoint()
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
                    if self._pipeline is not None:
                        p.grad = None  # the schedules add theirs (none to add to in a fault-free step)
                    elif p.grad is None:
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
            if self._pipeline is not None and pending:
                loss_sum += self._through_pipeline(step, list(pending))
                pending.clear()
            while pending and not (alone and group.aborted()):
                key = pending.popleft()
                loss_sum += self._micro_batch(step, key)
            if not pending and not (alone and group.aborted()):
                if patching:
                    group._event("patch", step=step)
                buffer = self._buffers[step % 2]
                for view, p in zip(self._views[step % 2], self._params):
                    if p.grad is None:  # a parameter no micro-batch reached (pipeline steps leave it None)
                        view.zero_()
                    else:
                        view.copy_(_local(p.grad))
                buffer[self._size] = loss_sum * self._loss_share
                buffer[self._size + 1] = 1.0 if group.rejoin_pending() else 0.0
                buffer[self._digest_at:] = 0.0
                if digest is not None:
                    at = self._digest_at + _SLOT * me
                    buffer[at:at + _BYTES] = digest.view(torch.uint8).to(buffer.dtype)
                    buffer[at + _BYTES] = 1.0
                if self._replicated:
                    # Replicated inside the group: average its ranks' parts first (their loss
                    # shares add up to the group's mean loss).
                    group.all_reduce_in_group(buffer[:self._size + 1])
                    buffer[:self._size].div_(group.group_world_size)
                ok = group.all_reduce(buffer)
                if group.group_world_size > 1:
                    # Every rank of the group commits, or none: each position's all-reduce
                    # may end differently when a member dies during them.
                    ok = float(group.all_reduce_in_group(torch.tensor([0.0 if ok else 1.0]))[0]) == 0.0
                if ok:
                    self.computed = sorted(computed[me])
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
                    self.computed = []  # this group's micro-batches are not in the result it received
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

    def _through_pipeline(self, step, keys):
        """Forward and backward of micro-batches ``keys`` of ``step`` through this group's pipeline; their loss sum.

        The loss is the sum of the micro-batches' mean losses on a rank of the last stage,
        0 elsewhere.  A ``RuntimeError`` (a stage's peer or a collective of the group failed:
        a rank of it died) makes the whole group leave: :class:`Evicted`.
        """
        group = self.group
        m = group.micro_batches
        batches = [_inputs_and_target(self._batch(step, key)) for key in keys]

        def stream(step, key, stage):
            # The hang watch counts from each micro-batch's forward on this rank: a schedule
            # step of n micro-batches is not one hang of n times the bound.
            group._computing = (step, key, time.monotonic())
            if not self.micro_batch_rng:
                return contextlib.nullcontext()
            self.current = (step, key // m, key % m)
            return micro_batch_rng(self.seed, step, key // m, key % m, part=group.data_part, stage=stage)

        try:
            return sum(self._pipeline.run(step, keys, batches, self._params, stream,
                                          before_schedule=lambda: setattr(self, "current", None)))
        except RuntimeError as exc:
            if isinstance(exc, spare_opt.SpareError):
                raise
            group._lose_group(f"rank {group.group_rank} of group {group.group} failed in its pipeline: "
                              f"{str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}")
            group._check_group_lost()
            raise
        finally:
            self.current = None
            group._computing = None

    def _compute(self, step, key):
        m = self.group.micro_batches
        self.current = (step, key // m, key % m)
        batch = self._batch(step, key)
        try:
            if self.micro_batch_rng:
                with micro_batch_rng(self.seed, step, key // m, key % m, part=self.group.data_part):
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
            if p.grad is None:
                p.grad = torch.zeros_like(p)
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

    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """Clip the global gradient by its norm over the whole model, every rank of the DP group included.

        For ``before_step``: ``before_step=lambda s: s.clip_grad_norm_(1.0)``.  In a DP group
        of one rank it is ``torch.nn.utils.clip_grad_norm_(step.parameters, max_norm)``;
        in a group of several ranks each rank holds part of the model (FSDP2 shards,
        tensor-parallel slices, pipeline stages), so the norm adds every rank's local part
        once (a tensor held whole by the ranks of a tensor-parallel row counts once) in one
        all-reduce over the group's ranks, as torchtitan's ``clip_grad_norm_`` reduces
        over ``tp`` and ``pp``.  Every rank of every live group gets the same norm and
        scales its gradients alike.

        Parameters
        ----------
        max_norm : float
            The largest norm kept (> 0).
        norm_type : float, default 2.0
            ``p`` of the ``p``-norm (``float("inf")``: the largest entry).

        Returns
        -------
        torch.Tensor
            The norm before clipping (a float64 scalar).

        Raises
        ------
        spare_opt.ParameterError
            ``max_norm`` is not a positive finite number, or ``norm_type`` not a positive one.
        Evicted
            A rank of this DP group died during the reduction.

        Notes
        -----
        The gradients are multiplied by ``min(1, max_norm / (norm + 1e-6))``, as
        ``torch.nn.utils.clip_grad_norm_`` does.
        """
        if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float)) or not 0 < max_norm < float("inf"):
            raise spare_opt.ParameterError(f"max_norm must be a positive finite number, got {max_norm!r}")
        if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)) or not norm_type > 0:
            raise spare_opt.ParameterError(f"norm_type must be a positive number (or inf), got {norm_type!r}")
        total = _group_grad_norm(self._params, self.group, norm_type)
        scale = torch.clamp(float(max_norm) / (total + 1e-6), max=1.0)
        for p in self._params:
            if p.grad is not None:
                local = _local(p.grad)
                local.mul_(scale.to(local.dtype))
        return total

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


def _count(name, value):
    """``value`` as a non-negative ``int`` (a step count: 0 means never); a ParameterError naming ``name`` otherwise.

    Only integers are taken (``numpy`` integers too): ``True``, ``2.7``, ``"5"``, NaN or
    ``None`` is refused rather than turned into some count by ``int()``.
    """
    if isinstance(value, (bool, numpy.bool_)) or not isinstance(value, numbers.Integral) or value < 0:
        raise spare_opt.ParameterError(f"{name} must be a non-negative integer (steps; 0: never), got {value!r}")
    return int(value)


def _takes_three(function):
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind == p.VAR_POSITIONAL for p in parameters)


def _pipeline_of(group, model, stages, schedule, loss_fn):
    """The :class:`PipelineRunner` of ``stages`` (this rank's ``PipelineStage`` or list), checked against the group's mesh
    and ``model`` (the stages' submodules)."""
    if group.pipeline_stages < 2:
        raise spare_opt.ParameterError(
            "SpareStep(stages=...) runs a pipeline: the SpareGroup needs mesh= with a 'pp' dimension of at least 2 "
            "ranks (the DP group's pipeline stages)")
    runner = PipelineRunner(stages, schedule, loss_fn, group.pipeline_stages)
    owned = {id(p) for p in model.parameters()}
    staged = {id(p) for module in runner.submodules for p in module.parameters()}
    if owned != staged:
        raise spare_opt.ParameterError(
            "model must be the submodules of this rank's stages (stage.submod; a list of them for several stages "
            "per rank): its parameters differ from the stages'")
    return runner


def _inputs_and_target(batch):
    """A collated micro-batch as ``(inputs, target)``: what a pipeline's first stage and its loss take."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise spare_opt.ParameterTypeError(
            "with pipeline stages, a micro-batch must collate to a pair (inputs, target): inputs for the first "
            f"stage, target for the loss; got {type(batch).__name__}"
            + (f" of {len(batch)} entries" if isinstance(batch, (tuple, list)) else ""))
    return batch[0], batch[1]

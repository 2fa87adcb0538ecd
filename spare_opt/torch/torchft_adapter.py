"""SPARe under TorchFT: the plan of every quorum, so a dead replica group no longer shrinks the batch.

TorchFT (``pip install torchft``) keeps a data-parallel job going when a replica group
dies: its ``Manager`` asks the lighthouse for a quorum before every step, reconfigures
the process group over the quorum's replicas, heals a replica that fell behind from a
peer, and all-reduces the gradients with an *average over the live replicas*.  A dead
replica's shard of the global batch is simply not trained: the batch shrinks.

:class:`TorchFTPlan` makes the plan a function of the quorum instead.  Its
:attr:`~TorchFTPlan.process_group` wraps TorchFT's reconfigurable process group and reads
the quorum's membership each time the manager reconfigures it (replica ``...g`` is
layout group ``g``); the failed set is every layout group outside the quorum, and the
plan is :func:`spare_opt.agreed_plan` of that set (a pure function of
``(layout, failed set, m)``, bitwise identical in every replica whatever its history).
Each live replica computes its plan's micro-batches, and :meth:`TorchFTPlan.all_reduce`
sums over the quorum and divides by ``N m``: the gradient of the whole global batch.

torchft is imported when a :class:`TorchFTPlan` is made, not when this module is: without
torchft, ``import spare_opt.torch`` works and ``TorchFTPlan(...)`` raises
:class:`TorchFTMissingError`.
"""

import datetime
import re
import threading
import time

import spare_opt

from ._plans import PlanBook
from .elastic import WipeOut

__all__ = ["TorchFTMissingError", "TorchFTPlan"]

_TRAILING_DIGITS = re.compile(r"(\d+)$")


class TorchFTMissingError(spare_opt.SpareError, ImportError):
    """torchft is not installed, and a TorchFT adapter was asked for."""


def _torchft():
    """The torchft modules the adapter uses, or :class:`TorchFTMissingError`."""
    try:
        from torch.distributed import ReduceOp
        from torchft.process_group import ProcessGroupGloo, ProcessGroupWrapper
    except ImportError as exc:
        raise TorchFTMissingError(
            "TorchFTPlan needs torchft, which is not installed: pip install torchft "
            "(install the CPU build of torch first: pip install torch==2.13.0)") from exc
    return ReduceOp, ProcessGroupGloo, ProcessGroupWrapper


_WRAPPER = None


def _wrapper_class():
    """``_QuorumProcessGroup``, a ``torchft.process_group.ProcessGroupWrapper`` subclass (made once)."""
    global _WRAPPER
    if _WRAPPER is not None:
        return _WRAPPER
    _, _, ProcessGroupWrapper = _torchft()

    class _QuorumProcessGroup(ProcessGroupWrapper):
        """TorchFT's process group wrapped: tells the adapter each quorum's members, then configures."""

        def __init__(self, adapter, pg, timeout):
            super().__init__(timeout=timeout, pg=pg)
            self._adapter = adapter

        def configure(self, store_addr, replica_id, rank, world_size, quorum_id=None, group_rank=None,
                      group_world_size=None, global_ranks=None):
            self._adapter._on_quorum(replica_id, world_size, quorum_id, group_world_size, global_ranks)
            super().configure(store_addr, replica_id, rank, world_size, quorum_id, group_rank, group_world_size,
                              global_ranks)

        def abort(self, errored=True):
            """Abort the wrapped group (closing its connections), and keep it: ``configure`` rebuilds it."""
            inner = self._pg
            if isinstance(inner, ProcessGroupWrapper):
                inner.abort(errored)
            elif inner is not None and hasattr(inner, "abort"):
                inner.abort()

        def errored(self):
            inner = self._pg
            return inner.errored() if hasattr(inner, "errored") else None

        def set_timeout(self, timeout):
            super().set_timeout(timeout)
            if hasattr(self._pg, "set_timeout"):
                self._pg.set_timeout(timeout)

        def getBackendName(self):
            return self._pg.getBackendName() if hasattr(self._pg, "getBackendName") else "torchft-spare"

    _WRAPPER = _QuorumProcessGroup
    return _WRAPPER


class TorchFTPlan:
    """The SPARe plan of each TorchFT quorum, and the all-reduce that keeps the global batch whole.

    Parameters
    ----------
    layout : spare_opt.Layout
        The stack layout, identical in every replica (build it deterministically, or
        load it from a file; never run the time-limited :func:`spare_opt.sidon` search
        in every replica).  Layout group ``g`` is the TorchFT replica group whose
        ``replica_id`` ends with the digits of ``g`` (``"spare_2"`` is group 2), the
        convention TorchFT itself uses to number global ranks.
    micro_batches : int or None, default None
        ``m``, micro-batches per shard type; ``None``: the layout's recommended ``m``
        (:attr:`Layout.micro_batches`, written by ``spare-opt compare -o``), else 1.  A
        different ``m`` is used with a :class:`~spare_opt.RecommendationWarning`.
    process_group : torchft.process_group.ProcessGroup, optional
        The reconfigurable process group to wrap (default: a new
        ``torchft.process_group.ProcessGroupGloo(timeout=timeout)``).
    timeout : datetime.timedelta or float, default 60 s
        Timeout of the wrapper's reconfiguration (seconds when a float).

    Attributes
    ----------
    book : PlanBook
        The plans of the job, cached by failed set.
    process_group : torchft.process_group.ProcessGroupWrapper
        Give it to ``torchft.Manager(pg=...)``: each time the manager reconfigures it for
        a new quorum, the adapter records the quorum's members.
    group : int or None
        This replica's layout group (known from the first quorum on).
    members : list of int
        The layout groups in the current quorum, sorted.
    failed : frozenset of int
        The layout groups outside the current quorum.
    quorum_id : int or None
    quorums : list of (float, int, list of int)
        ``(time.time(), quorum_id, members)`` of every quorum this replica joined.

    Raises
    ------
    TorchFTMissingError
        torchft is not installed (an ``ImportError`` and a ``spare_opt.SpareError``).
    spare_opt.ParameterError
        ``timeout`` is not positive, or ``micro_batches`` is invalid for the layout.

    Notes
    -----
    One step under TorchFT, with ``spare = TorchFTPlan(layout, micro_batches=m)``,
    ``Manager(pg=spare.process_group, use_async_quorum=False, replica_id=f"spare_{g}",
    ...)`` and ``torchft.optim.OptimizerWrapper``::

        optimizer.zero_grad()                   # start_quorum(): the quorum, then the plan
        batch = global_batch(manager.current_step())
        for indices in spare.local_batches(batch):
            loss_fn(model, indices).backward()  # mean loss of each micro-batch, accumulated
        spare.reduce_gradients(manager, model.parameters())  # SUM over the quorum / (N m)
        optimizer.step()                        # should_commit(): steps only if all succeeded

    **Scaling.**  ``Manager.allreduce`` averages by default: it sums over the
    process group and divides by ``num_participants()``, the number ``W`` of live
    replicas.  That is right when every replica computes one equal share, and it is why
    plain TorchFT's gradient becomes the mean over the ``W/N`` of the batch that the
    live replicas hold.  Under a SPARe plan the replicas compute different numbers of
    micro-batches (the survivors take over the dead replicas' shards), so each replica
    accumulates the *sum* of its micro-batches' mean-loss gradients, the adapter
    all-reduces with ``ReduceOp.SUM`` and divides by ``N m``: every one of the ``N m``
    equal micro-batches of the global batch is counted exactly once, which is the
    fault-free gradient (the mean loss over the whole global batch).  Do not wrap the
    model in ``torchft.ddp.DistributedDataParallel`` (its hook averages over ``W``).

    **Which quorums.**  The plan needs every replica of the quorum to contribute:
    use ``use_async_quorum=False`` (a healing replica then loads its peer's state before
    the step and participates; with the asynchronous quorum it would contribute zeros)
    and the default ``WorldSizeMode.DYNAMIC``.  :meth:`all_reduce` refuses a step in
    which ``manager.num_participants()`` differs from the quorum's size.  The quorum
    must be known before this replica reads its data, so an asynchronous quorum would
    not overlap anything anyway.

    **A failed step.**  When a replica dies during a step, the survivors' all-reduce
    fails, ``should_commit()`` returns ``False`` and the manager repeats the step (same
    ``current_step()``, same global batch) under the next quorum, whose plan covers the
    dead replica's shards: nothing of the failed attempt is kept (unlike
    :class:`SpareStep`, which keeps the micro-batches already computed).  A replica
    whose all-reduce completed commits the full sum; a peer that did not heals from it
    at the next quorum.  TorchFT's lighthouse detects the death (a heartbeat older than
    its ``heartbeat_timeout_ms``); after a failed all-reduce the adapter aborts the
    wrapped process group, so that a peer blocked in the collective on this (live)
    replica fails at once instead of holding up the next quorum until the lighthouse's
    ``join_timeout_ms``.

    References
    ----------
    TorchFT: https://github.com/pytorch/torchft (``Manager``, ``ProcessGroupWrapper``).
    """

    def __init__(self, layout, *, micro_batches=None, process_group=None, timeout=datetime.timedelta(seconds=60)):
        _, ProcessGroupGloo, _ = _torchft()
        if not isinstance(timeout, datetime.timedelta):
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
                raise spare_opt.ParameterError(f"timeout must be a positive number of seconds, got {timeout!r}")
            timeout = datetime.timedelta(seconds=float(timeout))
        self.book = PlanBook(layout, micro_batches)
        if process_group is None:
            process_group = ProcessGroupGloo(timeout=timeout)
        self.process_group = _wrapper_class()(self, process_group, timeout)
        self.group = None
        self.members = list(range(self.book.groups))
        self.failed = frozenset()
        self.quorum_id = None
        self.quorums = []
        self._error = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------- quorum
    def _on_quorum(self, replica_id, world_size, quorum_id, group_world_size, global_ranks):
        """Called by the wrapper (in the manager's quorum thread) before it configures a new quorum."""
        n = self.book.groups
        try:
            match = _TRAILING_DIGITS.search(str(replica_id).split(":")[0])
            if match is None:
                raise spare_opt.ParameterError(
                    f"replica_id {replica_id!r} does not end with its layout group number: name the replica "
                    f"groups like 'spare_0' .. 'spare_{n - 1}' (Manager(replica_id=...))")
            group = int(match.group(1))
            if global_ranks is None:
                raise spare_opt.ParameterError(
                    "the manager gave no global ranks for the quorum: this torchft is too old for TorchFTPlan "
                    "(torchft >= 0.2 is needed)")
            size = int(group_world_size or 1)
            members = sorted({int(rank) // size for rank in global_ranks})
            if len(members) != int(world_size) or not all(0 <= g < n for g in members) or group not in members:
                raise spare_opt.ParameterError(
                    f"the quorum's replicas map to layout groups {members} (of {int(world_size)} replicas): every "
                    f"replica_id must end with a distinct layout group number in [0, {n})")
        except spare_opt.SpareError as exc:
            with self._lock:
                self._error = exc
            raise
        with self._lock:
            self._error = None
            self.group = group
            self.members = members
            self.failed = frozenset(range(n)) - frozenset(members)
            self.quorum_id = quorum_id
            self.quorums.append((time.time(), quorum_id, list(members)))

    @property
    def plan(self):
        """The plan of the current quorum (:class:`spare_opt.Plan`, the same in every replica).

        Raises
        ------
        spare_opt.ParameterError
            The last quorum's replica ids do not name distinct layout groups.
        WipeOut
            Some shard type has no holder in the quorum: the job cannot compute the
            whole global batch until a replica of it comes back (or restarts from a
            checkpoint).
        """
        with self._lock:
            error, failed = self._error, self.failed
        if error is not None:
            raise error
        plan = self.book.plan(failed)
        if not plan.masked:
            raise WipeOut(failed)
        return plan

    def work(self):
        """This replica's micro-batch keys ``t m + j`` under the current plan, a sorted list of ints."""
        plan = self.plan
        if self.group is None:
            raise spare_opt.ParameterError("no quorum yet: call manager.start_quorum() (optimizer.zero_grad()) first")
        return self.book.work(plan)[self.group]

    def local_batches(self, global_batch):
        """This replica's micro-batches of one global batch, in work order.

        Parameters
        ----------
        global_batch : sequence or 1-D tensor of length B
            The step's global batch (dataset indices, or samples), the same in every
            replica: a pure function of the step, e.g.
            :func:`spare_opt.torch.sampler.global_batch_indices`.  ``B`` must be a
            multiple of ``N m``.

        Returns
        -------
        list
            Slices ``global_batch[k b:(k + 1) b]``, ``b = B / (N m)``, for each key
            ``k = t m + j`` of :meth:`work` (shard type ``t`` = block ``t``,
            micro-batch ``j`` = sub-block ``j``).

        Raises
        ------
        spare_opt.ParameterError
            ``B`` is not a positive multiple of ``N m``.
        """
        parts = self.book.groups * self.book.micro_batches
        size = len(global_batch)
        if size < 1 or size % parts:
            raise spare_opt.ParameterError(
                f"the global batch must have a positive multiple of N m = {parts} samples (equal micro-batches "
                f"keep the gradient exact), got {size}")
        b = size // parts
        return [global_batch[key * b:(key + 1) * b] for key in self.work()]

    # ------------------------------------------------------------- reduction
    def all_reduce(self, manager, tensor):
        """Sum ``tensor`` over the quorum and divide by ``N m``, in place; ``True`` if it succeeded.

        Parameters
        ----------
        manager : torchft.Manager
            Made with ``pg=self.process_group`` and ``use_async_quorum=False``; its
            quorum of this step started.
        tensor : torch.Tensor
            Floating point: this replica's sum of its micro-batches' mean-loss gradients.

        Returns
        -------
        bool
            ``False`` if the all-reduce failed (a replica died): the manager recorded
            the error, ``should_commit()`` will refuse the step and ``tensor`` holds
            garbage.  The wrapped process group is then aborted, so that peers still
            blocked in this collective fail at once; the next quorum (a failed commit
            always gives a new quorum id) configures it again.

        Raises
        ------
        spare_opt.ParameterError
            Not every replica of the quorum participates (asynchronous quorum with a
            healing replica, or ``WorldSizeMode.FIXED_WITH_SPARES``).
        """
        ReduceOp, _, _ = _torchft()
        participants = manager.num_participants()
        if participants != len(self.members) or not manager.is_participating():
            raise spare_opt.ParameterError(
                f"{participants} of the quorum's {len(self.members)} replicas participate in this step (this one: "
                f"{manager.is_participating()}): a SPARe plan needs all of them; make the Manager with "
                "use_async_quorum=False and the default WorldSizeMode.DYNAMIC")
        if manager.errored() is not None:
            return False
        work = manager.allreduce(tensor, reduce_op=ReduceOp.SUM)
        work.wait()
        if manager.errored() is not None:
            # Close this replica's connections now: a peer blocked in the same collective
            # on this replica (not on the dead one) fails at once instead of waiting until
            # the next quorum reconfigures the group, which would wait for that peer.
            self.process_group.abort()
            return False
        tensor.div_(self.book.groups * self.book.micro_batches)
        return True

    def reduce_gradients(self, manager, parameters):
        """:meth:`all_reduce` the gradients of ``parameters`` in one flat buffer; ``True`` if it succeeded.

        Parameters
        ----------
        manager : torchft.Manager
        parameters : iterable of torch.Tensor
            The model's parameters; a missing ``.grad`` counts as zeros (and is set).

        Returns
        -------
        bool
        """
        import torch

        params = [p for p in parameters if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        ok = self.all_reduce(manager, flat)
        if ok:
            offset = 0
            for p in params:
                p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
        return ok

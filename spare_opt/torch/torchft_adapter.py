"""SPARe under TorchFT: the plan of every quorum, so a dead replica group no longer shrinks the batch.

TorchFT (``pip install torchft``) keeps a data-parallel job going when a replica group
dies: its ``Manager`` asks the lighthouse for a quorum before every step, reconfigures
the process group over the quorum's replicas, heals a replica that fell behind from a
peer, and all-reduces the gradients with an *average over the live replicas*.  A dead
replica's shard of the global batch is simply not trained: the batch shrinks.

:class:`TorchFTPlan` makes the plan a function of the quorum instead.  Its
:attr:`~TorchFTPlan.process_group` wraps TorchFT's reconfigurable process group and reads
the quorum's membership each time the manager reconfigures it: the *global ranks* that
TorchFT gives the quorum's replicas (replica number times the replica group's size, plus
the rank in the group), from which replica number ``g`` is layout group ``g``.  The
failed set is every layout group outside the quorum, and the plan is
:func:`spare_opt.agreed_plan` of that set (a pure function of ``(layout, failed set,
m)``, bitwise identical in every replica whatever its history).  Each live replica
computes its plan's micro-batches, and :meth:`TorchFTPlan.all_reduce` sums over the
quorum and divides by ``N m``: the gradient of the whole global batch.

Both process-group APIs of TorchFT are supported, detected from the installed torchft:
``configure(store_addr, replica_id, rank, world_size, ..., global_ranks)`` (torchft 0.2)
and ``set_rank_info(...)`` + ``reconfigure(ReconfigureOptions)`` (torchft 0.3 and the
``torchft-nightly`` builds).

torchft is imported when a :class:`TorchFTPlan` is made, not when this module is: without
torchft, ``import spare_opt.torch`` works and ``TorchFTPlan(...)`` raises
:class:`TorchFTMissingError`.
"""

import collections
import datetime
import math
import re
import threading
import time

import spare_opt

from ._plans import PlanBook
from .elastic import WipeOut

__all__ = ["LocalMicroBatch", "NoQuorumError", "TorchFTMissingError", "TorchFTPlan", "TorchFTStepError",
           "torchft_api"]

#: The replica id's layout group number: trailing digits after a prefix that does not make
#: them part of a larger number ("spare_-1", "spare_1e3", "spare_1.5" are refused).
_REPLICA_ID = re.compile(r"^(?P<prefix>.*[^0-9])(?P<digits>[0-9]+)$")
_AMBIGUOUS_PREFIX = re.compile(r"(?:[-+.]|[0-9][eE])$")
#: The longest timeout accepted, in seconds (7 days): TorchFT passes timeouts to C++ stores
#: and process groups as integer milliseconds.
MAX_TIMEOUT_S = 7 * 24 * 3600.0

LocalMicroBatch = collections.namedtuple("LocalMicroBatch", "step shard_type micro_batch key samples")
LocalMicroBatch.__doc__ = """One micro-batch of this rank under the current plan: its identity and its samples.

``step`` is the training step (as given), ``shard_type`` ``t`` and ``micro_batch`` ``j``
name it within the global batch (``key = t m + j``), ``samples`` is the slice of the
global batch it holds (on this rank: its part of the micro-batch when the replica group's
ranks split it).  The identity ``(step, shard_type, micro_batch)`` is the same whichever
replica computes the micro-batch, so per-micro-batch random streams can be seeded from it."""


class TorchFTMissingError(spare_opt.SpareError, ImportError):
    """torchft is not installed, or its process groups offer neither API the adapter knows."""


class TorchFTStepError(spare_opt.SpareError, RuntimeError):
    """A step that did not commit after the adapter's bound on attempts: the job cannot go on."""


class NoQuorumError(spare_opt.SpareError, RuntimeError):
    """This replica group is alone in its quorum and cannot cover the global batch.

    Not a wipe-out: no replica of the others is in the quorum (they may have ended the
    job, as a replica repaired after the last step finds, or be unreachable)."""


def _torchft():
    """The torchft modules the adapter uses, or :class:`TorchFTMissingError`."""
    try:
        from torch.distributed import ReduceOp
        from torchft.process_group import ProcessGroupGloo, ProcessGroupWrapper
    except ImportError as exc:
        raise TorchFTMissingError(
            "TorchFTPlan needs torchft, which is not installed: pip install 'spare-opt[torchft]' "
            "(install the CPU build of torch first: pip install torch==2.13.0)") from exc
    return ReduceOp, ProcessGroupGloo, ProcessGroupWrapper


def torchft_api():
    """Which process-group API the installed torchft offers: ``"reconfigure"`` or ``"configure"``.

    Returns
    -------
    str
        ``"reconfigure"``: ``set_rank_info`` + ``get_reconfigure_handle`` +
        ``reconfigure(ReconfigureOptions)`` (torchft 0.3 and later, ``torchft-nightly``);
        ``"configure"``: ``configure(store_addr, replica_id, rank, world_size, ...)``
        (torchft 0.2).

    Raises
    ------
    TorchFTMissingError
        torchft is not installed, or its ``ProcessGroupWrapper`` has neither API.
    """
    _, _, wrapper = _torchft()
    if all(hasattr(wrapper, name) for name in ("set_rank_info", "reconfigure", "get_reconfigure_handle")):
        return "reconfigure"
    if hasattr(wrapper, "configure"):
        return "configure"
    raise TorchFTMissingError(
        "the installed torchft's ProcessGroupWrapper has neither configure() nor set_rank_info() + reconfigure(): "
        "TorchFTPlan is tested with torchft 0.2.0 and torchft-nightly 2026.10.26")


def _replica_number(replica_id, groups):
    """The layout group number that ``replica_id`` names, ``None`` for TorchFT's placeholder ``"0"``.

    TorchFT numbers a replica by the digits that end its id (``extract_trailing_digits``),
    so ``"spare_-1"`` would be 1 and ``"spare_1e3"`` 3: such ids are refused, as are
    numbers outside ``[0, groups)``.  Only the part before a ``":"`` counts (TorchFT
    appends ``":<uuid>"``).
    """
    if replica_id is None:
        return None
    text = str(replica_id).split(":")[0]
    if text in ("", "0"):
        return None  # what TorchFT hands the process group when the rank was given no replica_id
    shown = text if len(text) <= 40 else f"{text[:20]}...{text[-12:]} ({len(text)} characters)"
    match = _REPLICA_ID.match(text)
    if match is None or _AMBIGUOUS_PREFIX.search(match.group("prefix")):
        raise spare_opt.ParameterError(
            f"replica_id {shown!r} does not end with a plain layout group number: name the replica groups "
            f"'spare_0' .. 'spare_{groups - 1}' (Manager(replica_id=...), on every rank of the group)")
    digits = match.group("digits")
    if len(digits) > 9 or int(digits) >= groups:
        raise spare_opt.ParameterError(
            f"replica_id {shown!r} names layout group {digits if len(digits) <= 12 else digits[:12] + '...'}, "
            f"but the layout has {groups} groups: name them 'spare_0' .. 'spare_{groups - 1}'")
    return int(digits)


def _check_timeout(timeout):
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise spare_opt.ParameterTypeError(
            f"timeout must be a datetime.timedelta or a number of seconds, got {type(timeout).__name__}")
    else:
        seconds = float(timeout)
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT_S):
        raise spare_opt.ParameterError(
            f"timeout must be a positive, finite time of at most {MAX_TIMEOUT_S:.0f} s (7 days), got {timeout!r}")
    return datetime.timedelta(seconds=seconds)


_WRAPPER = None


def _wrapper_class():
    """``_QuorumProcessGroup``, a ``torchft.process_group.ProcessGroupWrapper`` subclass (made once)."""
    global _WRAPPER
    if _WRAPPER is not None:
        return _WRAPPER
    _, _, ProcessGroupWrapper = _torchft()
    api = torchft_api()

    class _QuorumProcessGroup(ProcessGroupWrapper):
        """TorchFT's process group wrapped: tells the adapter each quorum's members, then configures."""

        def __init__(self, adapter, pg, timeout):
            super().__init__(timeout=timeout, pg=pg)
            self._adapter = adapter
            self._rank_info = (None, 0, 1)

        if api == "configure":
            def configure(self, store_addr, replica_id, rank, world_size, quorum_id=None, group_rank=None,
                          group_world_size=None, global_ranks=None):
                self._adapter._on_quorum(replica_id, world_size, quorum_id, group_world_size, global_ranks,
                                         rank=rank, group_rank=group_rank)
                super().configure(store_addr, replica_id, rank, world_size, quorum_id, group_rank,
                                  group_world_size, global_ranks)
        else:
            def set_rank_info(self, replica_id, group_rank, group_world_size, global_rank=None):
                self._rank_info = (replica_id, group_rank, group_world_size)
                super().set_rank_info(replica_id, group_rank, group_world_size, global_rank)

            def reconfigure(self, opts):
                try:  # TorchFT's own reading of the handles (the rank, world size and global ranks it uses)
                    from torchft.process_group import _rendezvous

                    rendezvous = _rendezvous(opts, self._handle_id())
                except Exception as exc:
                    error = TorchFTMissingError(
                        f"this torchft's reconfigure handles cannot be read ({type(exc).__name__}: {exc}): "
                        "TorchFTPlan is tested with torchft 0.2.0 and torchft-nightly 2026.10.26")
                    self._adapter._refuse(error)
                    raise error from exc
                replica_id, group_rank, group_world_size = self._rank_info
                self._adapter._on_quorum(replica_id, rendezvous.world_size, opts.uuid, group_world_size,
                                         rendezvous.global_ranks, rank=rendezvous.rank, group_rank=group_rank,
                                         placeholder_refused=True)
                return super().reconfigure(opts)

        def abort(self, errored=True):
            """Abort the wrapped group (closing its connections), and keep it: the next quorum rebuilds it."""
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
        in every replica).  Layout group ``g`` is TorchFT's replica number ``g``: the
        digits that end the replica group's ``replica_id`` (``"spare_2"`` is group 2).
    micro_batches : int or None, default None
        ``m``, micro-batches per shard type; ``None``: the layout's recommended ``m``
        (:attr:`Layout.micro_batches`, written by ``spare-opt compare -o``), else 1.  A
        different ``m`` is used with a :class:`~spare_opt.RecommendationWarning`.
    process_group : torchft.process_group.ProcessGroup, optional
        The reconfigurable process group to wrap (default: a new
        ``torchft.process_group.ProcessGroupGloo(timeout=timeout)``).
    timeout : datetime.timedelta or float, default 60 s
        Timeout of the wrapper's reconfiguration (seconds when a float); positive,
        finite, at most 7 days.
    max_attempts : int, default 10
        Attempts of one step (quorum, micro-batches, all-reduce) that may fail to commit
        in a row before :meth:`all_reduce` raises :class:`TorchFTStepError`.  A death
        costs one to three failed attempts; a step that fails more often will never
        commit (an error that repeats), and TorchFT alone would repeat it forever.
    group_process_group : torch.distributed.ProcessGroup, optional
        The replica group's own process group (its ranks only, e.g. the default group
        of a torchrun per replica group, FSDP's).  When given, the first :meth:`work`
        (:meth:`micro_batches`, :meth:`local_batches`) after each new quorum agrees over
        it, in one small all-reduce, that no rank of the group refused the quorum: a
        refusal on one rank then raises a ``ParameterError`` on every rank of the group,
        instead of leaving the others to fail in their next collective with it.  Every
        rank of the group must then call :meth:`work` once per attempt of a step.

    Attributes
    ----------
    book : PlanBook
        The plans of the job, cached by failed set.
    process_group : torchft.process_group.ProcessGroupWrapper
        Give it to ``torchft.Manager(pg=...)``: each time the manager reconfigures it for
        a new quorum, the adapter records the quorum's members.
    api : str
        ``"configure"`` (torchft 0.2) or ``"reconfigure"`` (torchft 0.3, nightly).
    group : int or None
        This replica's layout group (known from the first quorum on).
    group_rank, group_world_size : int or None
        This rank's rank in its replica group and the group's size, as TorchFT gave them.
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
        torchft is not installed, or offers neither process-group API (an
        ``ImportError`` and a ``spare_opt.SpareError``).
    spare_opt.ParameterError
        ``timeout`` is not a positive, finite time of at most 7 days, ``max_attempts``
        is not in ``[1, 10**6]``, or ``micro_batches`` is invalid for the layout.

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

    **Which replica is which group.**  TorchFT gives every rank's process group the
    quorum's *global ranks*, ``replica number * group_world_size + group_rank``, in the
    quorum's order (torchft 0.2 computes them from the replica ids of the quorum, which
    rank 0 of each group registered; torchft 0.3 from each rank's own ``replica_id``).
    The adapter takes the layout groups from them, never from this rank's id string
    alone, and refuses (:class:`spare_opt.ParameterError`, raised in the training loop by
    :attr:`plan`, :meth:`work` and :meth:`local_batches`) a quorum whose global ranks do
    not name distinct groups in ``[0, N)`` of this rank's group rank, a replica id that
    is not ``<prefix><number>`` (``"spare_-1"``, ``"spare_1e3"``, a number of more than
    9 digits or ``>= N``), an id that names another group than TorchFT's numbering, and
    a rank without a ``replica_id`` where TorchFT then cannot number it: rank 0 of a
    group (both APIs) and every rank under the reconfigure API (whose global rank is
    then just its group rank, indistinguishable from group 0).  Give every rank of a
    replica group the same ``replica_id``.

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
    which ``manager.num_participants()`` differs from the quorum's size.

    **A failed step.**  When a replica dies during a step, the survivors' all-reduce
    fails, ``should_commit()`` returns ``False`` and the manager repeats the step (same
    ``current_step()``, same global batch) under the next quorum, whose plan covers the
    dead replica's shards: nothing of the failed attempt is kept (unlike
    :class:`SpareStep`, which keeps the micro-batches already computed).  After a failed
    all-reduce the adapter aborts the wrapped process group, so that a peer blocked in
    the collective on this (live) replica fails at once instead of holding up the next
    quorum until the lighthouse's ``join_timeout_ms``.  More than ``max_attempts``
    failed attempts of one step in a row raise :class:`TorchFTStepError`.

    References
    ----------
    TorchFT: https://github.com/pytorch/torchft (``Manager``, ``ProcessGroupWrapper``,
    ``reconfigure_with_store``).
    """

    def __init__(self, layout, *, micro_batches=None, process_group=None, timeout=datetime.timedelta(seconds=60),
                 max_attempts=10, group_process_group=None):
        _, ProcessGroupGloo, _ = _torchft()
        self.api = torchft_api()
        timeout = _check_timeout(timeout)
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or not 1 <= max_attempts <= 10**6:
            raise spare_opt.ParameterError(f"max_attempts must be an integer in [1, 10**6], got {max_attempts!r}")
        self.max_attempts = max_attempts
        self.book = PlanBook(layout, micro_batches)
        if process_group is None:
            process_group = ProcessGroupGloo(timeout=timeout)
        self.process_group = _wrapper_class()(self, process_group, timeout)
        self.group = None
        self.group_rank = None
        self.group_world_size = None
        self.members = list(range(self.book.groups))
        self.failed = frozenset()
        self.quorum_id = None
        self.quorums = []
        self._error = None
        self._lock = threading.Lock()
        self._attempt_step = None  # the step of the last all-reduce, and its attempts in a row
        self._attempts = 0
        self._new_attempt = True  # set by work(): the next all-reduce starts an attempt
        self._group_pg = group_process_group
        self._quorum_events = 0  # quorums seen (accepted or refused), and the last agreed on in the group
        self._agreed_events = 0

    # ------------------------------------------------------------- quorum
    def _on_quorum(self, replica_id, world_size, quorum_id, group_world_size, global_ranks, rank=None,
                   group_rank=None, placeholder_refused=False):
        """Called by the wrapper (in the manager's quorum thread) before it configures a new quorum.

        ``rank`` is this replica's index in the quorum (``None``: the one whose global
        rank is this rank's replica id's number); ``global_ranks`` are TorchFT's.
        """
        n = self.book.groups
        try:
            own = _replica_number(replica_id, n)
            size = 1 if group_world_size is None else int(group_world_size)
            group_rank = 0 if group_rank is None else int(group_rank)
            if size < 1 or not 0 <= group_rank < size:
                raise spare_opt.ParameterError(
                    f"TorchFT gave group rank {group_rank} of a replica group of {size} ranks")
            if own is None and (placeholder_refused or group_rank == 0):
                raise spare_opt.ParameterError(
                    f"rank {group_rank} of this replica group was given no replica_id, so TorchFT cannot number "
                    "its replica group (its global rank is then its group rank, the same as group 0's): give "
                    f"Manager(replica_id='spare_<g>') on every rank of replica group g, g in [0, {n})")
            if global_ranks is None:
                raise spare_opt.ParameterError(
                    "TorchFT gave no global ranks for the quorum (a replica's rank set none): every rank of every "
                    "replica group needs its Manager(replica_id=...)")
            global_ranks = [int(r) for r in global_ranks]
            members = [r // size for r in global_ranks]
            if (len(global_ranks) != int(world_size) or len(set(members)) != len(members)
                    or any(r % size != group_rank for r in global_ranks) or not all(0 <= g < n for g in members)):
                raise spare_opt.ParameterError(
                    f"the quorum's global ranks {global_ranks[:12]}{'...' if len(global_ranks) > 12 else ''} (group "
                    f"size {size}, this rank {group_rank}) do not name {int(world_size)} distinct layout groups in "
                    f"[0, {n}): give every rank of replica group g the same Manager(replica_id='spare_<g>'), "
                    f"g in [0, {n})")
            if rank is None:
                if own is None or own * size + group_rank not in global_ranks:
                    raise spare_opt.ParameterError(f"replica_id {replica_id!r} is not in the quorum {members}")
                rank = global_ranks.index(own * size + group_rank)
            group = members[int(rank)]
            if own is not None and own != group:
                raise spare_opt.ParameterError(
                    f"this rank's replica_id {str(replica_id).split(':')[0]!r} names layout group {own}, but TorchFT "
                    f"numbers its replica group {group} (from the id of the group's rank 0): give every rank of a "
                    "replica group the same replica_id")
        except spare_opt.SpareError as exc:
            self._refuse(exc)
            raise
        with self._lock:
            self._error = None
            self._quorum_events += 1
            self.group = group
            self.group_rank = group_rank
            self.group_world_size = size
            self.members = sorted(members)
            self.failed = frozenset(range(n)) - frozenset(members)
            self.quorum_id = quorum_id
            self.quorums.append((time.time(), quorum_id, sorted(members)))

    def _refuse(self, error):
        """Keep ``error`` (from the quorum thread) for the training loop: :attr:`plan` raises it."""
        with self._lock:
            self._error = error
            self._quorum_events += 1

    def _agree_in_group(self):
        """After a new quorum, the replica group's ranks agree (one MIN all-reduce) that none refused it."""
        if self._group_pg is None:
            return
        with self._lock:
            events, error = self._quorum_events, self._error
        if events == self._agreed_events:
            return
        import torch
        import torch.distributed as dist

        verdict = torch.tensor([0 if error is not None else 1], dtype=torch.int32)
        dist.all_reduce(verdict, op=dist.ReduceOp.MIN, group=self._group_pg)
        self._agreed_events = events
        if error is None and int(verdict.item()) == 0:
            self._refuse(spare_opt.ParameterError(
                "another rank of this replica group refused the quorum (its ParameterError says why, e.g. a rank "
                "without Manager(replica_id=...)): the group cannot compute its micro-batches"))
            with self._lock:
                self._agreed_events = self._quorum_events

    @property
    def plan(self):
        """The plan of the current quorum (:class:`spare_opt.Plan`, the same in every replica).

        Raises
        ------
        spare_opt.ParameterError
            The last quorum's replica ids or global ranks do not name distinct layout
            groups (see the class's Notes).
        NoQuorumError
            This replica group is alone in the quorum and cannot cover the global batch:
            the others ended the job (a replica repaired after the last step) or cannot
            be reached.  Nothing was wiped out.
        WipeOut
            Some shard type has no holder in a quorum of several replicas: the job
            cannot compute the whole global batch until a replica of it comes back (or
            restarts from a checkpoint).
        """
        with self._lock:
            error, failed, members, group = self._error, self.failed, list(self.members), self.group
        if error is not None:
            raise error
        plan = self.book.plan(failed)
        if not plan.masked:
            if members == [group] and self.book.groups > 1:
                raise NoQuorumError(
                    f"replica group {group} is alone in its quorum (quorum {self.quorum_id}): no quorum with the other "
                    f"{self.book.groups - 1} replica groups, which may have ended the job (a replica started after "
                    "the last step finds this) or be unreachable; one group cannot compute the whole global batch. "
                    "Nothing was wiped out: stop this replica, or start the others")
            raise WipeOut(failed)
        return plan

    def work(self):
        """This replica's micro-batch keys ``t m + j`` under the current plan, a sorted list of ints.

        Raises
        ------
        spare_opt.ParameterError, NoQuorumError, WipeOut
            As :attr:`plan`; ``ParameterError`` also before the first quorum.
        """
        self._agree_in_group()
        plan = self.plan
        if self.group is None:
            raise spare_opt.ParameterError("no quorum yet: call manager.start_quorum() (optimizer.zero_grad()) first")
        self._new_attempt = True
        return self.book.work(plan)[self.group]

    def micro_batches(self, global_batch, step, *, split_by_rank=False):
        """This rank's micro-batches of one global batch under the current plan, with their identity.

        Parameters
        ----------
        global_batch : sequence or 1-D tensor of length B
            The step's global batch (dataset indices, or samples), the same in every
            replica: a pure function of the step, e.g.
            :func:`spare_opt.torch.sampler.global_batch_indices`.  ``B`` must be a
            multiple of ``N m`` (of ``N m k`` when ``split_by_rank``).
        step : int
            The step, recorded in each micro-batch's identity
            (``manager.current_step()``).
        split_by_rank : bool, default False
            Split every micro-batch of the replica group by samples among the group's
            ``k = group_world_size`` ranks: this rank gets part ``group_rank`` (of ``k``
            equal parts) of each.  Every rank of the group then runs the same number of
            forward and backward passes, whatever the plan (FSDP needs that: each pass
            all-gathers and reduce-scatters in the group), and FSDP's reduce-scatter
            average over the ``k`` ranks of their parts' mean-loss gradients is the
            micro-batch's mean-loss gradient.  ``False``: every rank gets the whole
            micro-batches (tensor parallelism, or a group of one rank).

        Returns
        -------
        list of LocalMicroBatch
            ``(step, shard_type, micro_batch, key, samples)`` for each key
            ``k = t m + j`` of :meth:`work` (shard type ``t`` = block ``t`` of the global
            batch, micro-batch ``j`` = sub-block ``j``), ``samples`` the slice
            ``global_batch[k b:(k + 1) b]``, ``b = B / (N m)`` (or its part
            ``group_rank`` of ``k``).

        Raises
        ------
        spare_opt.ParameterError
            ``B`` is not a positive multiple of ``N m`` (``N m k``); as :meth:`work`.
        NoQuorumError, WipeOut
            As :attr:`plan`.
        """
        parts = self.book.groups * self.book.micro_batches
        ranks = 1
        keys = self.work()
        if split_by_rank:
            ranks = int(self.group_world_size or 1)
        size = len(global_batch)
        if size < 1 or size % (parts * ranks):
            among = " split equally among the group's ranks" if split_by_rank else ""
            raise spare_opt.ParameterError(
                f"the global batch must have a positive multiple of N m{' k' if split_by_rank else ''} = "
                f"{parts * ranks} samples (equal micro-batches{among} keep the gradient exact), got {size}")
        b = size // parts
        share = b // ranks
        offset = share * (int(self.group_rank or 0) if split_by_rank else 0)
        width = share if split_by_rank else b
        m = self.book.micro_batches
        return [LocalMicroBatch(step, key // m, key % m, key, global_batch[key * b + offset:key * b + offset + width])
                for key in keys]

    def local_batches(self, global_batch, *, split_by_rank=False):
        """This rank's micro-batches of one global batch, in work order: the samples of :meth:`micro_batches`.

        Parameters
        ----------
        global_batch : sequence or 1-D tensor of length B
            As :meth:`micro_batches`; ``B`` a multiple of ``N m``.
        split_by_rank : bool, default False
            As :meth:`micro_batches`.

        Returns
        -------
        list
            Slices ``global_batch[k b:(k + 1) b]``, ``b = B / (N m)``, for each key
            ``k = t m + j`` of :meth:`work` (shard type ``t = k // m``, micro-batch
            ``j = k % m``: ``zip(spare.work(), spare.local_batches(batch))`` pairs each
            slice with its identity; :meth:`micro_batches` gives it with the step).

        Raises
        ------
        spare_opt.ParameterError
            ``B`` is not a positive multiple of ``N m``; as :meth:`work`.
        NoQuorumError, WipeOut
            As :attr:`plan`.
        """
        return [micro.samples for micro in self.micro_batches(global_batch, None, split_by_rank=split_by_rank)]

    # ------------------------------------------------------------- reduction
    def _count_attempt(self, manager):
        """Count an attempt of the manager's step (once per :meth:`work`); raise past ``max_attempts``."""
        if not self._new_attempt:
            return
        self._new_attempt = False
        step = manager.current_step()
        if step == self._attempt_step:
            self._attempts += 1
        else:
            self._attempt_step, self._attempts = step, 1
        if self._attempts > self.max_attempts:
            error = manager.errored()
            cause = getattr(error, "original_exception", error)
            raise TorchFTStepError(
                f"step {step} did not commit in {self._attempts - 1} attempts in a row (max_attempts="
                f"{self.max_attempts}); the manager's last error: {type(cause).__name__}: {cause}"[:2000]) from cause

    def all_reduce(self, manager, tensor):
        """Sum ``tensor`` over the quorum and divide by ``N m``, in place; ``True`` if it succeeded.

        Parameters
        ----------
        manager : torchft.Manager
            Made with ``pg=self.process_group`` and ``use_async_quorum=False``; its
            quorum of this step started.
        tensor : torch.Tensor
            Floating point, a plain tensor (for a DTensor, reduce its ``to_local()``
            shard, as :meth:`reduce_gradients` does): this replica's sum of its
            micro-batches' mean-loss gradients.

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
            ``tensor`` is a DTensor, or not every replica of the quorum participates
            (asynchronous quorum with a healing replica, or
            ``WorldSizeMode.FIXED_WITH_SPARES``).
        TorchFTStepError
            The manager's step has failed to commit ``max_attempts`` times in a row.
        """
        ReduceOp, _, _ = _torchft()
        if _is_dtensor(tensor):
            raise spare_opt.ParameterError(
                "all_reduce got a DTensor (FSDP2 / fully_shard): TorchFT's process group has no sharding strategy "
                "for it; reduce its local shard instead (tensor.to_local(), or reduce_gradients)")
        self._count_attempt(manager)
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
            FSDP2 (``fully_shard``) parameters hold DTensor gradients: their local
            shards are reduced, in place.

        Returns
        -------
        bool

        Raises
        ------
        spare_opt.ParameterError
            A DTensor gradient's device mesh has more ranks than this replica group
            (the model is sharded across replica groups, not inside one); as
            :meth:`all_reduce`.
        TorchFTStepError
            As :meth:`all_reduce`.

        Notes
        -----
        **Why the local shards.**  TorchFT's process group joins rank ``i`` of every
        replica group, and the replica groups shard the model alike (the same model,
        ``fully_shard`` calls and group size), so rank ``i``'s local shard holds the same
        elements in every replica.  FSDP's reduce-scatter inside the group has already
        made it the group's gradient for those elements (the average over the group's
        ranks of their micro-batch parts' mean-loss gradients, summed over the passes).
        The sum over the quorum and the division by ``N m`` act element by element, so
        reducing each shard gives shard ``i`` of the reduced whole gradient: the
        fault-free gradient, sharded as FSDP keeps it.  The same holds for replicated
        and partial placements (the reduction is linear).  A mesh that spans replica
        groups would have mixed replicas before TorchFT sees them, and is refused.
        """
        import torch

        params = [p for p in parameters if p.requires_grad]
        locals_ = []
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grad = p.grad
            if _is_dtensor(grad):
                mesh_size = grad.device_mesh.size()
                if self.group_world_size is not None and mesh_size > self.group_world_size:
                    raise spare_opt.ParameterError(
                        f"a DTensor gradient's device mesh spans {mesh_size} ranks, more than this replica group's "
                        f"{self.group_world_size}: shard the model inside each replica group (TorchFT joins the "
                        "groups), e.g. fully_shard(model, mesh=init_device_mesh('cpu', (group_size,)))")
                grad = grad.to_local()
            locals_.append(grad)
        flat = torch.cat([g.reshape(-1) for g in locals_]) if locals_ else torch.zeros(0)
        ok = self.all_reduce(manager, flat)
        if ok:
            offset = 0
            for g in locals_:
                g.copy_(flat[offset:offset + g.numel()].view_as(g))
                offset += g.numel()
        return ok


def _is_dtensor(tensor):
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - torch without DTensor
        return False
    return isinstance(tensor, DTensor)

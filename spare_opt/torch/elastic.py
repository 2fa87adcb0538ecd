"""One DP group's membership of a SPARe job: heartbeats, abort, agreement, rebuild.

Everything goes through torch's own ``TCPStore`` (hosted outside the ranks, as
``torchrun``'s agent hosts it) and gloo process groups: no networking of our own.

A DP group may be several processes (``group_process_group``: FSDP2 or replication
inside the group).  The process group that SPARe rebuilds after a failure then joins the
ranks of the same position ``k`` in every live group (as HSDP's replicate dimension
does), one per position; the group's own process group is the user's and is never
touched.  Rank 0 of each group takes part in the agreement; its other ranks follow the
agreed records, and the death of any rank fails the whole group.

:class:`SpareGroup` is a face over its roles, one private module each, which share its
state (they are mixins of the class): ``_membership`` (registration, the heartbeat and
the watch ring, death notices, the abort flag, :func:`post_death`), ``_agreement`` (an
epoch's proposal, follow and adopt, the admission of repaired groups, the heal verdict)
and ``_collectives`` (the collectives and their wait for the abort flag); this module
keeps the start, the state of the current epoch that the step helper reads, the rebuild
of the process group and ``close``.  Neither the membership nor the agreement needs a
process group: both run on a store alone.  The exceptions live in ``_errors``.

Store keys (under the store the caller passes, usually a ``PrefixStore`` per job
generation):

* ``layout``: the layout fingerprint, written once (``compare_set``); a rank whose layout
  differs refuses to start and writes ``fatal`` (its message, the first one wins), and
  every other rank of the job stops with the same ``LayoutError``;
* ``fatal``: a configuration error that stops the whole job (a layout that differs,
  another job's checkpoint: :meth:`SpareGroup.stop_job`); a restarted rank reads it as it
  registers and stops too;
* ``hb/{g}``: group ``g``'s heartbeat counter, bumped every ``heartbeat_interval`` by its
  rank 0; ``hb/{g}/{k}``: rank ``k > 0``'s of a DP group of several ranks (read by its
  rank 0 only, and rank ``k`` reads ``hb/{g}``);
* ``group_world_size``, ``group_mesh``: the ranks per DP group and their mesh
  (``pp2.tp2``; ``ranks4`` without one), written once: a group that comes with another
  number or shape is refused;
* ``groups``: the job's ``N``, written once by the first group to register, so that
  :func:`~spare_opt.torch.join_job` and :func:`post_death` refuse a group outside
  ``[0, N)`` by name;
* ``dead/{g}``, ``dead_list``, ``deaths``, ``alarm/{n}``: a death notice (:func:`post_death`),
  written by ``run_worker``'s death watcher or a launcher that saw ``g``'s process die,
  by a peer that found ``g``'s heartbeat stale (a suspicion), or by ``g``'s restarted
  process; ``dead_list`` gets ``g`` appended at every notice; ``deaths`` counts notices,
  abort flags and fatal errors, and each count ``n`` writes ``alarm/{n}`` (``dead g``
  for a death that is a fact), which every member's alarm thread waits for; a
  heartbeat reads the notices when ``deaths`` moved past what its alarm thread handled;
* ``abort/{e}``: epoch ``e`` is over (a member failed); every member stops waiting;
* ``joined/{e}``: the records of the groups that joined epoch ``e``'s agreement (``g
  {json}`` per line: its step and phase), ``joins/{e}`` counts them (the first one
  proposes, and names itself in ``proposer/{e}``); ``wake/{e}/{g}``
  (``wake/{e}/{g}/{k}`` for rank ``k > 0``): where a rank waits for the agreed record,
  written with it by the winning proposal, or with ``nudge`` by the rank's own
  heartbeat;
* ``registered``: how many groups registered at start (a count read before the check of
  every group's ``hb/{g}``);
* ``epoch/{e}``: the agreed record of epoch ``e`` (failed set, admitted joiners, the
  survivors' records: one entry per distinct record, the most common one without its
  groups), written once with ``compare_set``: the first proposal wins;
* ``fatal`` and ``dead_list`` exist from the first registration on (empty), so a
  heartbeat reads both in one request;
* ``ready/{e}/{g}`` (``ready/{e}/{g}/{k}`` for rank ``k > 0`` of a group), ``built/{e}``,
  ``pg/{e}/{k}/...``: the barrier before, the verdict (``go`` or ``abort``, the first one
  written) and the store of the process group of epoch ``e`` between the ranks ``k``
  of the live groups;
* ``rejoin/{g}``, ``pending_rejoins``: a repaired group's request to rejoin;
* ``heal/{e}/{g}`` (``heal/{e}/{g}/{k}`` for rank ``k > 0``), ``heal/{e}``: whether the
  state sent to epoch ``e``'s joiners reached this rank, and the verdict (``go``, or
  ``retry``: agree again, the joiners stay joiners and get the state again), the first
  one written;
* ``owner/{g}``: the token of the process that speaks for group ``g`` (a second process
  that starts as ``g`` afresh is refused);
* ``launches/{g}`` (``launches/{g}/{k}``), ``alive/{g}`` (``alive/{g}/{k}``),
  ``started/{g}`` (``started/{g}/{k}``), ``starts/{g}/{k}``: written by
  :func:`~spare_opt.torch.join_job`: the starts of group ``g``'s rank ``k`` (a later one
  is a restart), its presence beat (a second live process is refused), its pid, and the
  count that gives each start of the group fresh process-group keys;
* ``ended``: the job of this generation is over (``"done"``: it finished; ``"restart"``:
  a wipe-out moved the job to a new generation, or a repaired group found no live
  member to admit it); a repaired group still waiting for admission leaves with
  :class:`JobEnded`.
"""

import datetime
import math
import numbers
import os
import threading
import time

import torch.distributed as dist

import spare_opt

from ._agreement import Agreement
from ._collectives import Collectives
from ._errors import CheckpointMismatch, DuplicateGroup, Evicted, GroupTimeout, JobEnded, ReplicaDivergence, WipeOut
from ._group_mesh import GroupMesh
# ``_Beats``, ``_peek`` and ``_text`` are imported from here by the launchers, the supervisor and the
# control-plane benchmark.
from ._membership import Membership, _Beats, _peek, _short, _text, post_death  # noqa: F401
from ._plans import PlanBook

__all__ = ["SpareGroup", "WipeOut", "Evicted", "GroupTimeout", "ReplicaDivergence", "DuplicateGroup", "JobEnded",
           "CheckpointMismatch", "post_death"]


#: The longest wait any timing argument of :class:`SpareGroup` may give, in seconds (about 11 days, as the
#: store's timeout of :func:`~spare_opt.torch.launchers.join_job`): a longer one is a typo.
_LONGEST_WAIT = 1e6
#: The shortest heartbeat interval: the heartbeat thread and every wait loop sleep this long between looks.
_SHORTEST_INTERVAL = 1e-3
#: The shortest ``timeout``: every group registers within it at start, after loading the planner's kernels.
_SHORTEST_TIMEOUT = 1.0


def _seconds(name, value, least, most=_LONGEST_WAIT):
    """``value`` as a finite float of seconds in ``[least, most]``.

    Raises :class:`spare_opt.ParameterTypeError` (not a real number) or
    :class:`spare_opt.ParameterError` naming ``name`` and the value given.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise spare_opt.ParameterTypeError(f"{name} must be a number of seconds, got {value!r} "
                                           f"({type(value).__name__})")
    try:
        seconds = float(value)
    except (OverflowError, ValueError):  # an int beyond the float range
        seconds = math.inf
    if not (math.isfinite(seconds) and least <= seconds <= most):
        shown = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge integer"
        raise spare_opt.ParameterError(f"{name} must be a positive finite number of seconds, at least {least:g} "
                                       f"and at most {most:g}, got {shown}")
    return seconds


def _timings(heartbeat_interval, heartbeat_timeout, timeout):
    """:class:`SpareGroup`'s timing arguments checked: ``(interval, heartbeat_timeout, timeout)`` as floats."""
    interval = _seconds("heartbeat_interval", heartbeat_interval, _SHORTEST_INTERVAL)
    beat_timeout = _seconds("heartbeat_timeout", heartbeat_timeout, _SHORTEST_INTERVAL)
    if beat_timeout <= interval:
        # A peer is failed once its beat is heartbeat_timeout old: at or below one interval, live peers look dead.
        raise spare_opt.ParameterError(f"heartbeat_timeout must be above heartbeat_interval ({interval:g} s), got "
                                       f"{heartbeat_timeout!r}")
    wait = _seconds("timeout", timeout, _SHORTEST_TIMEOUT)
    return interval, beat_timeout, wait


class SpareGroup(Membership, Agreement, Collectives):
    """One DP group's membership of a SPARe job, on torch's ``TCPStore`` and gloo.

    Parameters
    ----------
    layout : spare_opt.Layout
        The stack layout, identical on every rank: build it deterministically
        (:func:`spare_opt.consecutive`, known constructions) or load it from a file that
        rank 0 wrote; never run the time-limited :func:`spare_opt.sidon` search in every
        rank.  Checked against the other ranks' by fingerprint.
    group : int
        This process's DP group id ``g`` in ``[0, N)``; it holds ``layout.stacks[g]``.
    store : torch.distributed.Store
        A client of a store that outlives every rank (hosted by the launcher, as
        ``torchrun`` does; a store hosted by rank 0 dies with it).
    micro_batches : int or None, default None
        ``m``, micro-batches per shard type; ``None``: the layout's recommended ``m``
        (:attr:`Layout.micro_batches`, written by ``spare-opt compare -o``), else 1.  A
        different ``m`` is used with a :class:`~spare_opt.RecommendationWarning`.
    heartbeat_interval : float, default 0.05
        Seconds between heartbeats (and between checks of the peers' heartbeats and of
        rejoin requests); in ``[0.001, 1e6)``.  Death notices and abort flags do not wait
        for it: each one wakes every member's alarm thread through the store.
    heartbeat_timeout : float, default 2.0
        Seconds without a peer's heartbeat after which it counts as failed; above
        ``heartbeat_interval``, at most ``1e6``.
    timeout : float, default 60.0
        Seconds that bound every wait: the registration of every group at start (else
        :class:`GroupTimeout` on every rank that waits), the barrier before a rebuild
        and the agreement (a member that has not answered by then, though its heartbeat
        goes on, is declared failed), a repaired group's admission (else
        :class:`GroupTimeout`), and the gloo process groups' timeout.  Survivors never
        wait it out for a dead peer (the abort flag and death notices wake them).  In
        ``[1, 1e6]`` (about 11 days): shorter, not every group of a job can register
        (each compiles or loads the planner's kernels first), longer is a typo.
    rejoin : bool, default False
        This process is a repaired group: it asks to rejoin and waits until the live
        groups admit it at a step boundary.  When the live groups have not yet agreed
        that this group failed (nobody posted its death: a launcher restarted it), it
        posts its predecessor's death notice itself first.  When the job has not
        agreed its first epoch yet (the predecessor died while the job started, before
        every group registered), nobody could admit it: it starts as a fresh member,
        and :attr:`joined_late` is ``False``.
    group_process_group : torch.distributed.ProcessGroup, optional
        The process group of this DP group's own ranks (the default group of a
        ``torchrun`` per DP group), of ``K`` ranks that split the samples (FSDP2 over
        all of them, or a replicated model); ``None``: the group is this one process
        (``K = 1``), or, with ``mesh``, the default process group.  Every rank of the
        group builds a ``SpareGroup`` with the same ``group`` and ``rejoin``; the
        gradient SUM runs between the ranks of the same position in every live group,
        so every group of the job must have the same shape (a group that comes back
        with another ``K`` or mesh is refused).  Any rank's death fails the whole group:
        its other ranks leave with :class:`Evicted` and the launcher restarts the group
        as a whole.
    mesh : torch.distributed.device_mesh.DeviceMesh, optional
        The DP group's ranks as a mesh with named dimensions, as torchtitan builds a
        model replica: ``pp`` (pipeline stages), ``dp_shard`` (FSDP2 inside the group:
        each rank takes its own part of every micro-batch) and ``tp`` (tensor
        parallelism: the ranks of a row see the same samples), each at most once, over
        exactly the group's ranks (``init_device_mesh("cuda", (2, 8), mesh_dim_names=
        ("pp", "tp"))`` under one ``torchrun`` per DP group).  A rank's position is its
        rank in the group; the ranks of the same position in every group hold the same
        part of the model.  See :mod:`spare_opt.torch._group_mesh`.
    watch : int or None, default 8
        How many peers' heartbeats each group reads every beat: the next ``watch``
        members on the ring of live groups (``None``: all).  A group whose heartbeat is
        stale gets a death notice from its watchers, which every member reads, so each
        beat costs the store two requests whatever ``N`` (one write, one read of
        ``watch + 2`` keys) instead of a read of ``N`` keys.
    backend : str, default "gloo"
        The backend of the process groups between the live groups: ``"gloo"`` or
        ``"nccl"``.
    hang_timeout : float or None, default 1800.0
        Seconds that one micro-batch's forward and backward (the loss function, the
        model, its backward: what :class:`SpareStep` runs for a micro-batch) may take on
        this rank.  A rank whose training thread stays in one micro-batch longer, while
        its heartbeat still beats (a stuck kernel, a deadlock in the loss function), is
        hung: its heartbeat thread posts the group's death notice (``hung: ...``) and
        says so on stderr; under :func:`~spare_opt.torch.launchers.run_worker` the
        process then exits 76 (evicted: its launcher restarts it and it rejoins), else
        its heartbeat stops.  The others recover at their next heartbeat, as after any
        death notice: a hung group is evicted at most ``hang_timeout`` plus two
        heartbeat intervals after its micro-batch began.  ``None``: never (a training
        thread stuck elsewhere is bounded by ``timeout``: the others' collective
        fails, then their agreement declares the silent group failed).  The default is
        torch's default process-group timeout (30 minutes), in ``[0.001, 1e6]``; the first micro-batch of a
        compiled model includes its compilation.

    Attributes
    ----------
    group_rank, group_world_size : int
        This rank's position ``k`` in its DP group and the group's size ``K`` (0 and 1
        for a group of one process).
    mesh : DeviceMesh or None
        The ``mesh`` argument.
    data_part, data_parts : int
        The part of every micro-batch this rank takes and the number of parts (its
        ``dp_shard`` coordinate and size with a mesh; ``k`` and ``K`` without one).
    pipeline_stage, pipeline_stages : int
        This rank's ``pp`` coordinate and the number of pipeline stages (0 and 1
        without pipeline parallelism).
    epoch : int
        The current epoch; every change of membership starts a new one.
    failed : frozenset of int
        The agreed failed set of the current epoch.
    plan : spare_opt.Plan
        The plan of :attr:`failed`, the same on every rank (a pure function of the set).
    members : list of int
        The live groups, sorted; this group's rank in the process group between the
        live groups is ``members.index(group)``.
    joined_late : bool
        This group was admitted as a repaired group and heals from a live one (the
        step helper receives the state); ``False`` for a member of the first epoch.
    timeline : list of (str, float, dict)
        Events with their wall-clock times (``time.time()``): ``detect``, ``agree``,
        ``plan``, ``rebuild`` and those the step helper adds.

    Raises
    ------
    spare_opt.LayoutError
        This rank's layout differs from the one the first rank registered, or another
        rank's does (every rank of the job stops, whichever registered first); or this
        group's ``K`` differs from the job's (this group is refused, the job goes on).
    spare_opt.ParameterError
        A timing argument is not a finite number of seconds in its range (named, with
        its value), or ``heartbeat_timeout`` is not above ``heartbeat_interval``: at
        once, before anything is written to the store; ``group``, ``watch`` or
        ``backend`` out of range; the ranks of ``group_process_group`` disagree on
        ``group`` or ``rejoin``; the mesh has a dimension without a name, with another
        name than ``pp``, ``dp_shard`` and ``tp``, or over other ranks than the group's.
    spare_opt.ParameterTypeError
        A timing argument is not a real number (a string, ``None``, a bool); ``mesh`` is
        not a ``DeviceMesh``.
    DuplicateGroup
        Another process already started as ``group`` afresh in this job (the ranks of
        a DP group started without ``group_process_group``, a group launched twice).
    GroupTimeout
        Some group did not register within ``timeout`` (at start), or this repaired
        group was not admitted within ``timeout``.
    JobEnded
        A repaired group was not admitted because the job ended or restarted (the
        ``ended`` marker), or because no other group's heartbeat moved for twice
        ``heartbeat_timeout`` (at least ``heartbeat_timeout + 1`` s): every member is
        dead, so it ends the generation (``restart``) and the job restarts from its
        checkpoint (``restart=True``).
    WipeOut
        (a repaired group) Every member that held the state died while it was sent
        and only repaired groups are left.
    """

    def __init__(self, layout, group, store, *, micro_batches=None, heartbeat_interval=0.05, heartbeat_timeout=2.0,
                 timeout=60.0, rejoin=False, watch=8, backend="gloo", group_process_group=None, mesh=None,
                 hang_timeout=1800.0):
        # Checked first: a negative timeout made every wait endless, an infinite interval
        # stopped the heartbeat thread (the group then looked dead to the others).
        interval, heartbeat_timeout, timeout = _timings(heartbeat_interval, heartbeat_timeout, timeout)
        if hang_timeout is not None:  # checked as the other timings are (None: no hang watch)
            hang_timeout = _seconds("hang_timeout", hang_timeout, _SHORTEST_INTERVAL)
        self.book = PlanBook(layout, micro_batches)
        # The first plan of a process compiles (or loads) the planner's kernels: seconds
        # on a busy machine.  Done before this group's first heartbeat, not between its
        # heartbeat key and its heartbeat thread, where it made the group look dead.
        self.book.plan(frozenset())
        n = self.book.groups
        if isinstance(group, bool) or not isinstance(group, int) or not 0 <= group < n:
            # Under join_job the group is SPARE_GROUP (or JOB_COMPLETION_INDEX): the message says where to look.
            raise spare_opt.ParameterError(f"group must be an integer in [0, {n}) (the layout has N = {n} DP groups; "
                                           f"a worker takes it from SPARE_GROUP or JOB_COMPLETION_INDEX), got "
                                           f"{group!r}")
        self.group = group
        self.groups = n
        self.micro_batches = self.book.micro_batches
        self.store = store
        if watch is not None and (isinstance(watch, bool) or not isinstance(watch, int) or watch < 1):
            raise spare_opt.ParameterError(f"watch must be a positive integer or None, got {watch!r}")
        self.watch = watch
        if backend not in ("gloo", "nccl"):
            raise spare_opt.ParameterError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
        self.group_mesh = GroupMesh(mesh, group_process_group)
        self.mesh = mesh
        self.group_process_group = self.group_mesh.process_group
        self.group_rank, self.group_world_size = self.group_mesh.rank, self.group_mesh.size
        self.leader = self.group_rank == 0
        self._pg = None
        self._group_lost = None  # why this DP group must leave (a rank of it died), once known
        self.interval = interval
        self.heartbeat_timeout = heartbeat_timeout
        self.timeout = datetime.timedelta(seconds=timeout)
        self.timeout_seconds = timeout
        self.hang_timeout = hang_timeout
        self._computing = None  # (step, key, time.monotonic()) while the training thread runs a micro-batch
        self._fatal = None
        self._fatal_polled = 0.0
        self.backend = backend
        self.timeline = []
        self.joiners = []
        self.records = {}
        self._lock = threading.Lock()
        self._aborted_epoch = -1
        self._waiter = None
        self._stop = threading.Event()
        self._last_seen = {}
        self._sibling_seen = {}  # heartbeat key of a rank of this DP group -> (value, time first seen)
        self._token = f"{os.getpid()}-{time.time_ns()}"
        self._register(rejoin)
        self.joined_late = self._first_epoch(rejoin)
        if self.joined_late and self.leader:
            # Written once admitted, not before: a rewrite while it waits for admission
            # would look like a beat of its dead predecessor.
            store.set(f"hb/{group}", "0")
            store.set(f"owner/{group}", self._token)
        self._hb_store = store.clone() if hasattr(store, "clone") else store
        self._thread = threading.Thread(target=self._heartbeat, name=f"spare-heartbeat-{group}", daemon=True)
        self._thread.start()
        if hasattr(store, "clone"):
            # On a connection of its own, blocked in a store-side wait for the next alarm (a notice,
            # an abort flag): every member hears of a death in a round trip, not at its next beat.
            threading.Thread(target=self._alarms, name=f"spare-alarm-{group}", daemon=True).start()
        while not self._rebuild():
            self.recover({"step": -1, "phase": "boundary"}, _rebuild_first=False)
            if self._pg_ready:
                break

    # ---------------------------------------------------------------- state
    def _enter(self, epoch, record):
        for g in record.get("joiners", {}):
            # A joiner's heartbeat counts from its admission: it does not beat while it
            # waits (up to a step, maybe longer than heartbeat_timeout), and its last
            # value would make it stale at once.  Dropped before it becomes a member.
            self._last_seen.pop(int(g), None)
        self.epoch = epoch
        self.failed = frozenset(record["failed"])
        self.members = [g for g in range(self.groups) if g not in self.failed]
        self._joiner_tokens = dict(record.get("joiners", {}))
        self.joiners = sorted(int(g) for g in self._joiner_tokens)
        # The joiners hold no state until the heal of this epoch is agreed done
        # (:meth:`_settle_heal`): until then the next epoch keeps them joiners.
        self._heal_due = bool(self.joiners)
        t0 = time.perf_counter()
        self.plan = self.book.plan(self.failed)
        self.plan_seconds = time.perf_counter() - t0
        self._pg_ready = False

    @property
    def data_part(self):
        """int: the part of every micro-batch this rank takes (its ``dp_shard`` coordinate; ``k`` without a mesh)."""
        return self.group_mesh.data_part

    @property
    def data_parts(self):
        """int: the parts a micro-batch is split into among the group's ranks (``dp_shard``; ``K`` without a mesh)."""
        return self.group_mesh.data_parts

    @property
    def pipeline_stage(self):
        """int: this rank's pipeline stage (its ``pp`` coordinate; 0 without pipeline parallelism)."""
        return self.group_mesh.stage

    @property
    def pipeline_stages(self):
        """int: the number of pipeline stages of the group (1 without pipeline parallelism)."""
        return self.group_mesh.stages

    @property
    def rank(self):
        """int: this group's rank in the current process group."""
        return self.members.index(self.group)

    @property
    def world_size(self):
        """int: the number of live groups."""
        return len(self.members)

    def work(self, plan=None):
        """This group's micro-batch keys ``t * m + j`` under ``plan`` (default: the current plan), sorted."""
        return self.book.work(self.plan if plan is None else plan)[self.group]

    #: Called as ``on_event(name, extra)`` after every timeline event (fault injection in tests).
    on_event = None

    def _event(self, name, **extra):
        self.timeline.append((name, time.time(), extra))
        if self.on_event is not None:
            self.on_event(name, extra)

    @property
    def process_group(self):
        """The current process group between the live groups (a c10d backend; ``None`` while none is built).

        Rank ``members.index(group)``; the ranks of this rank's position in each live
        group.  Rebuilt by every :meth:`recover`: do not keep it.
        """
        return self._pg

    # -------------------------------------------------------------- recovery
    def recover(self, record, _rebuild_first=True):
        """Agree on the next epoch and rebuild the process group over its members.

        Parameters
        ----------
        record : dict
            This group's state, JSON-ready; the step helper passes ``{"step": s,
            "phase": "step" | "boundary"}``.  Repaired groups are admitted only when every
            member's phase is ``"boundary"``.

        Returns
        -------
        list of dict
            The agreed records of the epochs passed through, oldest first (more than one
            when a member failed during the rebuild); each has ``epoch``, ``failed``,
            ``joiners``, ``plan`` and ``records`` (every member's record).  The process
            group of the last one is ready.

        Raises
        ------
        WipeOut
            The agreed failed set leaves a shard type with no live holder.
        Evicted
            The others agreed that this group failed.
        """
        passed = []
        while True:
            self._poll_fatal(force=True)
            self._check_group_lost()
            epoch = self.epoch + 1
            agreed = self._agree(epoch, record) if self.leader else self._follow(epoch)
            passed.append(agreed)
            if self._rebuild():
                return passed

    # -------------------------------------------------------------- rebuild
    def _ready_key(self, epoch, group, rank):
        return f"ready/{epoch}/{group}" if rank == 0 else f"ready/{epoch}/{group}/{rank}"

    def _rebuild(self):
        """Drop the old process group and create the current epoch's; ``False`` if a member died first.

        The process group joins the ranks of this rank's position ``k`` in every live
        group (``pg/{e}/{k}``); the barrier before it waits for every rank of every
        live group, so that all positions build theirs or none does.
        """
        store = self.store
        epoch = self.epoch
        self._drop_process_group()
        store.set(self._ready_key(epoch, self.group, self.group_rank), "1")
        ranks = range(self.group_world_size)
        others = {g: [self._ready_key(epoch, g, k) for k in ranks if (g, k) != (self.group, self.group_rank)]
                  for g in self.members}
        everyone = [key for keys in others.values() for key in keys]
        deadline = time.monotonic() + self.timeout_seconds
        # Every member takes the same branch, the first verdict written: a member that
        # connects while another gives up waits out the gloo timeout in the process
        # group's rendezvous (the barrier can complete just after a member saw an abort).
        while True:
            self._poll_fatal()
            if store.check(everyone):
                verdict = store.compare_set(f"built/{epoch}", "", "go")
                break
            if self.aborted() or self._group_lost is not None or time.monotonic() > deadline or \
                    any(self._stale(g) or (g != self.group and store.check([f"dead/{g}"]))
                        for g, keys in others.items() if keys and not store.check(keys)):
                verdict = store.compare_set(f"built/{epoch}", "", "abort")
                break
            time.sleep(0.001)
        if _text(verdict) != "go":
            self.fail_epoch("member died before the rebuild")
            return False
        prefix = dist.PrefixStore(f"pg/{epoch}/{self.group_rank}", store)
        try:
            if self.backend == "nccl":
                options = dist.ProcessGroupNCCL.Options()
                options._timeout = self.timeout
                self._pg = dist.ProcessGroupNCCL(prefix, self.rank, self.world_size, options)
            else:
                self._pg = dist.ProcessGroupGloo(prefix, self.rank, self.world_size, self.timeout)
        except RuntimeError as exc:  # a member died after the verdict: agree again without it
            self.fail_epoch(f"process group failed: {_short(exc)}")
            return False
        self._pg_ready = True
        self._event("rebuild", epoch=epoch, members=list(self.members))
        return True

    def close(self):
        """Stop the heartbeat and drop the process group between the live groups (idempotent).

        The DP group's own process group (``group_process_group``) is the caller's: it
        is left as it is.
        """
        self._stop.set()
        self._drop_process_group()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

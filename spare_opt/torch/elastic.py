"""One DP group's membership of a SPARe job: heartbeats, abort, agreement, rebuild.

Everything goes through torch's own ``TCPStore`` (hosted outside the ranks, as
``torchrun``'s agent hosts it) and gloo process groups: no networking of our own.

A DP group may be several processes (``group_process_group``: FSDP2 or replication
inside the group).  The process group that SPARe rebuilds after a failure then joins the
ranks of the same position ``k`` in every live group (as HSDP's replicate dimension
does), one per position; the group's own process group is the user's and is never
touched.  Rank 0 of each group takes part in the agreement; its other ranks follow the
agreed records, and the death of any rank fails the whole group.

Store keys (under the store the caller passes, usually a ``PrefixStore`` per job
generation):

* ``layout``: the layout fingerprint, written once (``compare_set``); a rank whose layout
  differs refuses to start and writes ``layout_mismatch`` (its message, the first one
  wins), and every other rank of the job stops with the same ``LayoutError``;
* ``hb/{g}``: group ``g``'s heartbeat counter, bumped every ``heartbeat_interval`` by its
  rank 0; ``hb/{g}/{k}``: rank ``k > 0``'s of a DP group of several ranks (read by its
  rank 0 only, and rank ``k`` reads ``hb/{g}``);
* ``group_world_size``: the ranks per DP group, written once: a group that comes with
  another number is refused;
* ``dead/{g}``, ``dead_list``, ``deaths``: a death notice (:func:`post_death`), written by
  a launcher that saw ``g``'s process die, by a watcher that found ``g``'s heartbeat
  stale, or by ``g``'s restarted process; ``deaths`` counts notices and abort flags, so a
  heartbeat reads the notices only when it changed;
* ``abort/{e}``: epoch ``e`` is over (a member failed); every member stops waiting;
* ``join/{e}/{g}``: group ``g``'s record for epoch ``e`` (its step and phase);
  ``joined/{e}`` lists the groups that wrote theirs, ``joins/{e}`` counts them (the
  first one proposes);
* ``registered``: how many groups registered at start (a count read before the check of
  every group's ``hb/{g}``);
* ``epoch/{e}``: the agreed record of epoch ``e`` (failed set, admitted joiners, the
  survivors' ``join`` records), written once with ``compare_set``: the first proposal
  wins and every member reads it;
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
* ``ended``: the job of this generation is over (``"done"``: it finished; ``"restart"``:
  a wipe-out moved the job to a new generation, or a repaired group found no live
  member to admit it); a repaired group still waiting for admission leaves with
  :class:`JobEnded`.
"""

import datetime
import json
import os
import pickle
import threading
import time

import torch
import torch.distributed as dist

import spare_opt

from ._plans import PlanBook

__all__ = ["SpareGroup", "WipeOut", "Evicted", "GroupTimeout", "ReplicaDivergence", "DuplicateGroup", "JobEnded",
           "post_death"]


class WipeOut(RuntimeError):
    """Some shard type lost every holder, or no live group holds the state: the job restarts from the last checkpoint.

    Attributes
    ----------
    failed : list of int
        The agreed failed set that wiped the layout out.
    """

    def __init__(self, failed, reason="some shard type has no live holder"):
        self.failed = sorted(failed)
        super().__init__(f"wipe-out: groups {self.failed} failed and {reason}; "
                         "restart every group from the last checkpoint")


class Evicted(RuntimeError):
    """The survivors agreed that this group failed (it was too slow to answer): it must leave.

    A supervisor may start it again as a repaired group (``rejoin=True``).
    """


class GroupTimeout(spare_opt.SpareError, TimeoutError):
    """A wait of :class:`SpareGroup` outlasted its ``timeout``: a peer never registered, or no member admitted this one.

    Attributes
    ----------
    groups : list of int
        The groups waited for (empty when unknown).
    """

    def __init__(self, message, groups=()):
        self.groups = sorted(groups)
        super().__init__(message)


class ReplicaDivergence(spare_opt.SpareError, RuntimeError):
    """The replica-consistency check found DP groups whose state differs from the others'.

    Raised on every rank alike, before the step is applied.

    Attributes
    ----------
    step : int
        The step whose start state was compared.
    groups : list of int
        The groups that differ from the largest agreeing set.
    agreeing : list of int
        The largest set of groups that agree.
    parts : list of str
        What differs: ``"parameters"``, ``"optimizer state"``, ``"optimizer hyper-parameters"``.
    """

    def __init__(self, step, groups, agreeing, parts):
        self.step = int(step)
        self.groups = sorted(groups)
        self.agreeing = sorted(agreeing)
        self.parts = list(parts)
        super().__init__(
            f"replica divergence at step {self.step}: groups {self.groups} differ from groups {self.agreeing} in "
            f"their {' and '.join(self.parts)} (a state that was not healed, a rank-dependent update, or a "
            f"non-deterministic optimizer); the job stops: find the cause before restarting it, or it comes back")


class DuplicateGroup(spare_opt.ParameterError):
    """Another live process already runs this DP group (the same ``SPARE_GROUP`` launched twice): this one is refused.

    The live process goes on; the refused one posts no death notice (that would evict
    the live one).  :func:`~spare_opt.torch.launchers.run_worker` exits with 77
    (``LAYOUT_EXIT``): the job's configuration is wrong, do not restart.

    Attributes
    ----------
    group : int
        The DP group that is already running.
    """

    def __init__(self, message, group):
        self.group = int(group)
        super().__init__(message)


class JobEnded(RuntimeError):
    """A repaired group was not admitted: the job ended (``ended`` marker) or restarted in a new generation.

    Attributes
    ----------
    restart : bool
        ``True`` when the job moved to a new generation (a wipe-out): start again, as a
        fresh group of the new generation; ``False`` when it finished: nothing is left
        to do.
    """

    def __init__(self, message, restart=False):
        self.restart = bool(restart)
        super().__init__(message)


class SpareGroup:
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
        Seconds between heartbeats (and between checks of the abort flag, the peers'
        heartbeats, death notices and rejoin requests, and between looks for the
        agreed record of an epoch while this rank waits for it).
    heartbeat_timeout : float, default 2.0
        Seconds without a peer's heartbeat after which it counts as failed.
    timeout : float, default 60.0
        Seconds that bound every wait: the registration of every group at start (else
        :class:`GroupTimeout` on every rank that waits), the barrier before a rebuild
        and the agreement (a member that has not answered by then, though its heartbeat
        goes on, is declared failed), a repaired group's admission (else
        :class:`GroupTimeout`), and the gloo process groups' timeout.  Survivors never
        wait it out for a dead peer (the abort flag and death notices wake them).
    rejoin : bool, default False
        This process is a repaired group: it asks to rejoin and waits until the live
        groups admit it at a step boundary.  When the live groups have not yet agreed
        that this group failed (nobody posted its death: a launcher restarted it), it
        posts its predecessor's death notice itself first.
    group_process_group : torch.distributed.ProcessGroup, optional
        The process group of this DP group's own ranks (the default group of a
        ``torchrun`` per DP group, FSDP2's mesh), of ``K`` ranks; ``None``: the group
        is this one process (``K = 1``).  Every rank of the group builds a
        ``SpareGroup`` with the same ``group`` and ``rejoin``; the gradient SUM runs
        between the ranks of the same position in every live group, so every group
        of the job must have the same ``K`` (a group that comes back with another
        ``K`` is refused).  Any rank's death fails the whole group: its other ranks
        leave with :class:`Evicted` and the launcher restarts the group as a whole.
    watch : int or None, default 8
        How many peers' heartbeats each group reads every beat: the next ``watch``
        members on the ring of live groups (``None``: all).  A group whose heartbeat is
        stale gets a death notice from its watchers, which every member reads, so each
        beat costs the store two requests whatever ``N`` (one write, one read of
        ``watch + 2`` keys) instead of a read of ``N`` keys.
    backend : str, default "gloo"
        The backend of the process groups between the live groups: ``"gloo"`` or
        ``"nccl"``.

    Attributes
    ----------
    group_rank, group_world_size : int
        This rank's position ``k`` in its DP group and the group's size ``K`` (0 and 1
        without ``group_process_group``).
    epoch : int
        The current epoch; every change of membership starts a new one.
    failed : frozenset of int
        The agreed failed set of the current epoch.
    plan : spare_opt.Plan
        The plan of :attr:`failed`, the same on every rank (a pure function of the set).
    members : list of int
        The live groups, sorted; this group's rank in the process group between the
        live groups is ``members.index(group)``.
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
        The ranks of ``group_process_group`` disagree on ``group`` or ``rejoin``.
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
                 timeout=60.0, rejoin=False, watch=8, backend="gloo", group_process_group=None):
        self.book = PlanBook(layout, micro_batches)
        # The first plan of a process compiles (or loads) the planner's kernels: seconds
        # on a busy machine.  Done before this group's first heartbeat, not between its
        # heartbeat key and its heartbeat thread, where it made the group look dead.
        self.book.plan(frozenset())
        n = self.book.groups
        if isinstance(group, bool) or not isinstance(group, int) or not 0 <= group < n:
            raise spare_opt.ParameterError(f"group must be an integer in [0, {n}), got {group!r}")
        self.group = group
        self.groups = n
        self.micro_batches = self.book.micro_batches
        self.store = store
        if watch is not None and (isinstance(watch, bool) or not isinstance(watch, int) or watch < 1):
            raise spare_opt.ParameterError(f"watch must be a positive integer or None, got {watch!r}")
        self.watch = watch
        if backend not in ("gloo", "nccl"):
            raise spare_opt.ParameterError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
        self.group_process_group = group_process_group
        if group_process_group is None:
            self.group_rank, self.group_world_size = 0, 1
        else:
            self.group_rank = dist.get_rank(group_process_group)
            self.group_world_size = dist.get_world_size(group_process_group)
        self.leader = self.group_rank == 0
        self._pg = None
        self._group_lost = None  # why this DP group must leave (a rank of it died), once known
        self.interval = float(heartbeat_interval)
        self.heartbeat_timeout = float(heartbeat_timeout)
        self.timeout = datetime.timedelta(seconds=float(timeout))
        self.timeout_seconds = float(timeout)
        self._fatal = None
        self._fatal_polled = 0.0
        self.backend = backend
        self.timeline = []
        self.joined_late = bool(rejoin)
        self.joiners = []
        self.records = {}
        self._lock = threading.Lock()
        self._aborted_epoch = -1
        self._waiter = None
        self._stop = threading.Event()
        self._last_seen = {}
        self._sibling_seen = {}  # heartbeat key of a rank of this DP group -> (value, time first seen)
        self._token = f"{os.getpid()}-{time.time_ns()}"
        registered = _text(store.compare_set("layout", "", self.book.fingerprint))
        if registered != self.book.fingerprint:
            message = (f"group {group}'s layout (fingerprint {self.book.fingerprint}) differs from the job's "
                       f"({registered}): every rank must build the same layout")
            store.compare_set("layout_mismatch", "", message)
            store.add("deaths", 1)  # the running ranks' heartbeats read the notice
            raise spare_opt.LayoutError(message)
        self._poll_fatal(force=True)
        size = self.group_world_size
        registered = _text(store.compare_set("group_world_size", "", str(size)))
        if registered != str(size):
            raise spare_opt.LayoutError(
                f"group {group} has {size} rank(s) but the job's DP groups have {registered}: every group needs the "
                "same number of ranks (the gradient SUM pairs the ranks of the same position in each group)")
        for counter in ("deaths", "pending_rejoins"):  # read with the heartbeats: must exist
            store.compare_set(counter, "", "0")
        if self.leader and not rejoin:
            # One process speaks for a group: a second one (the ranks of a DP group started
            # without group_process_group, a group launched twice) would share its keys and
            # its rank in every process group, and hang there.
            owner = _text(store.compare_set(f"owner/{group}", "", self._token))
            if owner != self._token:
                raise DuplicateGroup(
                    f"group {group} was already started in this job by another process: pass the DP group's "
                    f"process group as group_process_group= when a group has several ranks, rejoin=True when a "
                    f"group is restarted", group)
        # Read before the group's ranks meet, so before rank 0 may ask to rejoin: the epoch
        # that admits it comes later, and a follower scans the epochs from here.
        self._start_epoch = int(_peek(store, "epoch") or 0)
        if size > 1:
            self._meet_group(rejoin)
        if not self.leader:
            epoch, record = self._follow_start(rejoin)
        elif rejoin:
            epoch, record = self._await_admission()
        else:
            store.set(f"hb/{group}", "0")
            self._await_registration()
            epoch = 0
            record = json.loads(_text(store.compare_set("epoch/0", "", json.dumps({"failed": [], "joiners": {}}))))
            store.compare_set("epoch", "", "0")
        self._enter(epoch, record)
        if rejoin and self.leader:
            # Written once admitted, not before: a rewrite while it waits for admission
            # would look like a beat of its dead predecessor.
            store.set(f"hb/{group}", "0")
            store.set(f"owner/{group}", self._token)
        self._hb_store = store.clone() if hasattr(store, "clone") else store
        self._thread = threading.Thread(target=self._heartbeat, name=f"spare-heartbeat-{group}", daemon=True)
        self._thread.start()
        while not self._rebuild():
            self.recover({"step": -1, "phase": "boundary"}, _rebuild_first=False)
            if self._pg_ready:
                break

    # ------------------------------------------- a DP group of several ranks
    @property
    def _beat_key(self):
        """This rank's heartbeat key: ``hb/{g}`` for the group's rank 0, ``hb/{g}/{k}`` for rank ``k``."""
        return f"hb/{self.group}" if self.leader else f"hb/{self.group}/{self.group_rank}"

    def _sibling_keys(self):
        """The heartbeats of this DP group's other ranks that this rank reads: rank 0 reads its ranks', they read rank 0's."""
        if self.leader:
            return [f"hb/{self.group}/{k}" for k in range(1, self.group_world_size)]
        return [f"hb/{self.group}"]

    def _meet_group(self, rejoin):
        """Check with this DP group's other ranks that they are the same group and take rank 0's admission token."""
        if not self.leader:
            # Written before rank 0's heartbeat reads it (that read waits until every key exists).
            self.store.set(self._beat_key, "0")
        gathered = [None] * self.group_world_size
        dist.all_gather_object(gathered, (self.group, bool(rejoin), self._token), group=self.group_process_group)
        if any(g != self.group or r != bool(rejoin) for g, r, _ in gathered):
            raise spare_opt.ParameterError(
                "the ranks of one DP group must pass the same group and rejoin; they passed (group, rejoin) "
                f"{[(g, r) for g, r, _ in gathered]}")
        # Rank 0 asks for the admission; every rank of the group recognises it by this token.
        self._token = gathered[0][2]

    def _follow_start(self, rejoin):
        """Rank ``k > 0``: the record of the epoch this group starts in (epoch 0, or the one that admits it)."""
        store = self.store
        # Rank 0 may wait ``timeout`` for the registration, then again for the admission.
        limit = 2 * self.timeout_seconds + 5.0
        deadline = time.monotonic() + limit
        epoch = 0 if not rejoin else self._start_epoch
        while True:
            self._poll_fatal()
            key = f"epoch/{epoch if not rejoin else epoch + 1}"
            if store.check([key]):
                record = json.loads(_text(store.get(key)))
                if not rejoin:
                    return 0, record
                epoch += 1
                if record.get("joiners", {}).get(str(self.group)) == self._token:
                    self._event("admitted", epoch=epoch)
                    return epoch, record
                continue
            ended = _peek(store, "ended") if rejoin else None
            if ended is not None:
                raise JobEnded(f"group {self.group} was not admitted: the job "
                               f"{'restarted in a new generation' if ended == 'restart' else 'has ended'}",
                               restart=ended == "restart")
            if time.monotonic() > deadline:
                raise GroupTimeout(f"rank {self.group_rank} of group {self.group} saw no agreed epoch within "
                                   f"{limit:g} s: rank 0 of "
                                   "its group or the job never got that far")
            time.sleep(self.interval / 5)

    def _lose_group(self, reason):
        """A rank of this DP group died: the whole group leaves (its death notice stays, every epoch is aborted)."""
        with self._lock:
            if self._group_lost is not None:
                return
            self._group_lost = reason
        if _peek(self.store, f"dead/{self.group}") is None:
            post_death(self.store, self.group, reason)
        self._abort(self.epoch, reason)

    def _check_group_lost(self):
        if self._group_lost is not None:
            self.close()
            raise Evicted(f"group {self.group} leaves: {self._group_lost}")

    # ------------------------------------------------------------ fatal errors
    def _poll_fatal(self, force=False):
        """Raise the job's fatal error (another rank's layout differs) if there is one; reads the store at most every 0.1 s."""
        if self._fatal is None and (force or time.monotonic() - self._fatal_polled >= 0.1):
            self._fatal_polled = time.monotonic()
            message = _peek(self.store, "layout_mismatch")
            if message is not None:
                self._fatal = spare_opt.LayoutError(f"the job stops: {message}")
        if self._fatal is not None:
            raise self._fatal

    def _await_registration(self):
        """Wait until every other group registered (or has a death notice); at most ``timeout`` seconds."""
        store = self.store
        others = [g for g in range(self.groups) if g != self.group]
        deadline = time.monotonic() + self.timeout_seconds
        # A count of the groups registered gates the check of every group's key: a look is
        # one request of one key until the count is complete (a check of N keys from each
        # of N groups was the store's load while a large job started).
        store.add("registered", 1)
        while True:
            self._poll_fatal()
            if int(store.add("registered", 0)) >= self.groups and store.check([f"hb/{g}" for g in others]):
                return
            # A few requests per look whatever N (a check of one key per group, from every
            # group every beat, was O(N^2) requests while the job started).
            hinted = _dead_hint(store)
            if hinted and store.check([f"hb/{g}" for g in others if g not in hinted]) and \
                    all(store.check([f"hb/{g}"]) or store.check([f"dead/{g}"]) for g in hinted if g in others):
                return
            if time.monotonic() > deadline:
                missing = [g for g in others if not store.check([f"hb/{g}"]) and not store.check([f"dead/{g}"])]
                if not missing:
                    return
                self._poll_fatal(force=True)
                raise GroupTimeout(f"groups {missing} did not register within {self.timeout_seconds:g} s (SpareGroup(timeout=...)): "
                                   "a rank that never started, or crashed before joining", missing)
            # Every group looks: at large N a look every 50 ms from each is a load of its own.
            time.sleep(min(self.interval, 0.05) * max(1.0, self.groups / 64))

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

    def aborted(self):
        """bool: whether the current epoch was aborted (a member failed): stop waiting, call :meth:`recover`."""
        return self._aborted_epoch >= self.epoch

    def rejoin_pending(self):
        """bool: whether a repaired group asked to rejoin (seen by the heartbeat thread)."""
        return self._pending_rejoins > 0

    _pending_rejoins = 0

    #: Called as ``on_event(name, extra)`` after every timeline event (fault injection in tests).
    on_event = None

    def _event(self, name, **extra):
        self.timeline.append((name, time.time(), extra))
        if self.on_event is not None:
            self.on_event(name, extra)

    # ------------------------------------------------------------ heartbeat
    def _watched(self):
        """The members whose heartbeats this group reads: the ``watch`` next ones on the ring of members (all when ``None``)."""
        members = self.members
        others = [g for g in members if g != self.group]
        if self.watch is None or len(others) <= self.watch or self.group not in members:
            return others
        index = members.index(self.group)
        return [members[(index + k) % len(members)] for k in range(1, self.watch + 1)]

    def _heartbeat(self):
        state = _Beats()
        while not self._stop.wait(self.interval):
            if not self._beat(state) and not self._stop.is_set():
                time.sleep(self.interval)

    def _beat(self, state):
        """One heartbeat: write this rank's key, read the watched ones, the counters and (when they moved) the notices.

        ``state`` (a :class:`_Beats`) is what the beats remember between calls.  Returns
        ``False`` when the store failed (it went away: the job is over).  The heartbeat
        thread calls it every ``heartbeat_interval``; the control-plane benchmark drives
        many emulated groups' beats from one thread.
        """
        store = self._hb_store
        try:
            state.count += 1
            store.set(self._beat_key, str(state.count))
            epoch = self.epoch
            # Rank k > 0 of a DP group watches rank 0 of its group only: rank 0 speaks for it.
            watched = self._watched() if self.leader else []
            siblings = self._sibling_keys() if self.group_world_size > 1 else []
            # One read: the watched heartbeats and the two counters.  It waits until every
            # key exists, so the time is taken when it returned: a time taken before it
            # made every peer stale after a rank that started late.
            values = store.multi_get([f"hb/{g}" for g in watched] + siblings + ["deaths", "pending_rejoins"])
            now = time.monotonic()
            for g, value in zip(watched, values):
                if self._last_seen.get(g, (None, 0))[0] != value:
                    self._last_seen[g] = (value, now)
            for key, value in zip(siblings, values[len(watched):]):
                if self._sibling_seen.get(key, (None, 0))[0] != value:
                    self._sibling_seen[key] = (value, now)
                elif now - self._sibling_seen[key][1] > self.heartbeat_timeout:
                    self._lose_group(f"{'rank ' + key.rsplit('/', 1)[1] if self.leader else 'rank 0'} of group "
                                     f"{self.group} stopped beating")
            seen = int(values[-2])
            self._pending_rejoins = int(values[-1])
            stale = [g for g in watched if self._stale(g)]
            for g in stale:
                # The others may not read g's heartbeat (``watch``): tell them.
                if state.posted.get(g) != self._last_seen[g][0]:
                    state.posted[g] = self._last_seen[g][0]
                    post_death(store, g, f"{_SUSPICION} (seen by group {self.group})")
            notice = False
            flag = False
            if seen != state.deaths or state.checked != epoch:
                state.deaths, state.checked = seen, epoch
                if self._fatal is None:
                    message = _peek(store, "layout_mismatch")
                    if message is not None:
                        self._fatal = spare_opt.LayoutError(f"the job stops: {message}")
                        self._abort(self.epoch, "layout mismatch")
                hinted = _dead_hint(store)
                if self.group in hinted and self.group in self.members:
                    self._own_notice(store)
                notice = any(store.check([f"dead/{g}"]) for g in hinted if g in self.members and g != self.group)
                flag = store.check([f"abort/{epoch}"])
            if epoch > self._aborted_epoch:
                reason = "abort flag" if flag else "death notice" if notice else "stale heartbeat" if stale else None
                if reason is not None:
                    if not flag:
                        self._post_abort(epoch)
                    self._abort(epoch, reason)
            return True
        except Exception:  # the store went away: the job is over
            return False

    def _own_notice(self, store):
        """A death notice about this group while it runs and is a member: withdraw a suspicion, or leave."""
        if self.group_world_size == 1:
            # A peer found its heartbeat stale (a stall); it is alive: withdraw it.
            store.delete_key(f"dead/{self.group}")
            return
        value = _peek(store, f"dead/{self.group}")
        if value is None or self._group_lost is not None:
            return
        if not value.startswith(_SUSPICION):
            # A launcher saw a rank of this group die, or a rank of it found another silent.
            self._lose_group(f"death notice: {value}")
        elif self.leader:
            # A watcher found rank 0's heartbeat stale (a stall) and every rank of the group
            # still beats (a silent one would have made it lose the group): withdraw it.
            store.delete_key(f"dead/{self.group}")

    def _post_abort(self, epoch):
        """Raise epoch ``epoch``'s abort flag for every member (the counter makes their heartbeats read it)."""
        self.store.set(f"abort/{epoch}", str(self.group))
        self.store.add("deaths", 1)

    def _stale(self, g):
        seen = self._last_seen.get(g)
        return seen is not None and time.monotonic() - seen[1] > self.heartbeat_timeout

    def _abort(self, epoch, reason):
        with self._lock:
            if epoch > self._aborted_epoch:
                self._aborted_epoch = epoch
                if epoch == self.epoch:
                    self._event("detect", source=reason, epoch=epoch)
            waiter = self._waiter
        if waiter is not None:
            waiter.set()

    def fail_epoch(self, reason):
        """Abort the current epoch: this rank saw a member fail (a collective raised)."""
        epoch = self.epoch
        try:
            self._post_abort(epoch)
        finally:
            self._abort(epoch, reason)

    # ----------------------------------------------------------- collectives
    def all_reduce(self, tensor):
        """All-reduce ``tensor`` (SUM) over the live groups; ``False`` when a member failed.

        Waits for the collective or the abort flag, whichever comes first, so a survivor
        never waits out the gloo timeout.  On ``False`` the tensor's content is
        undefined (gloo reduces in place): reduce a copy.
        """
        return self.wait(lambda: self._pg.allreduce([tensor]))

    def broadcast(self, tensor, source):
        """Broadcast ``tensor`` from live group ``source`` to the live groups (in place); ``False`` when a member failed.

        Between the ranks of this rank's position in each group, as :meth:`all_reduce`.
        """
        return self.wait(lambda: self._pg.broadcast(tensor, self.members.index(source)))

    def broadcast_object(self, value, source):
        """``value`` of live group ``source`` (a picklable object), on every live group; ``None`` when a member failed.

        Pickled into a ``uint8`` tensor and sent in two broadcasts (its length, then the
        bytes), each waited for as :meth:`all_reduce` waits.
        """
        sending = self.group == source
        data = torch.frombuffer(bytearray(pickle.dumps(value)), dtype=torch.uint8) if sending else None
        length = torch.tensor([data.numel() if sending else 0], dtype=torch.int64)
        if not self.broadcast(length, source):
            return None
        if not sending:
            data = torch.empty(int(length), dtype=torch.uint8)
        if not self.broadcast(data, source):
            return None
        return value if sending else pickle.loads(data.numpy().tobytes())

    @property
    def process_group(self):
        """The current process group between the live groups (a c10d backend; ``None`` while none is built).

        Rank ``members.index(group)``; the ranks of this rank's position in each live
        group.  Rebuilt by every :meth:`recover`: do not keep it.
        """
        return self._pg

    def all_reduce_in_group(self, tensor):
        """All-reduce ``tensor`` (SUM) over this DP group's own ranks (``group_process_group``).

        Raises
        ------
        Evicted
            A rank of this group died (its heartbeat stopped, a death notice) before
            the collective completed: the group leaves.
        GroupTimeout
            The collective outlasted ``timeout`` with every rank of the group beating.
        """
        if self.group_process_group is None:
            return tensor
        deadline = time.monotonic() + self.timeout_seconds
        try:
            work = dist.all_reduce(tensor, group=self.group_process_group, async_op=True)
            while not work.is_completed():
                self._check_group_lost()
                if time.monotonic() > deadline:
                    self._lose_group(f"a collective of group {self.group}'s ranks outlasted {self.timeout_seconds:g} s")
                    raise GroupTimeout(f"a collective between group {self.group}'s ranks outlasted "
                                       f"{self.timeout_seconds:g} s (SpareGroup(timeout=...))", [self.group])
                time.sleep(min(self.interval, 0.005))
            work.wait()
        except RuntimeError as exc:  # a rank of the group died: gloo's connection closed
            self._lose_group(f"a collective of group {self.group}'s ranks failed: {_short(exc)}")
            self._check_group_lost()
        return tensor

    def wait(self, start):
        """Run ``start()``, which starts a collective on :attr:`process_group` and returns its work, and wait for it or an abort.

        Returns ``True`` on success, ``False`` when a member failed (call :meth:`recover`).
        """
        if self.aborted() or self._pg is None:
            return False
        wake = threading.Event()
        with self._lock:
            self._waiter = wake
        try:
            try:
                work = start()
                work.get_future().add_done_callback(lambda _: wake.set())
            except RuntimeError as exc:
                self.fail_epoch(f"collective raised: {_short(exc)}")
                return False
            # Woken by the collective or by an abort, and checked again every interval: an
            # abort just before the waiter was registered, or one of an older epoch (it
            # wakes without aborting this one), would leave the collective waiting out the
            # gloo timeout for members that already left it to agree.
            while not (work.is_completed() or self.aborted()):
                wake.wait(self.interval)
                wake.clear()
            if self._fatal is not None:
                raise self._fatal
            if self.aborted() and not work.is_completed():
                return False
            try:
                work.wait()
            except RuntimeError as exc:
                self.fail_epoch(f"collective raised: {_short(exc)}")
                return False
            return True
        finally:
            with self._lock:
                self._waiter = None

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

    def _agree(self, epoch, record):
        store = self.store
        previous = list(self.members)
        store.set(f"join/{epoch}/{self.group}", json.dumps(record))
        store.append(f"joined/{epoch}", f"{self.group},")
        key = f"epoch/{epoch}"
        deadline = time.monotonic() + self.timeout_seconds
        # The first member to join reads the store every 2 ms until it can propose.  The
        # others look for the agreed record once every heartbeat interval (one request; a
        # look every few ms from each member was the agreement's load at large N) and at
        # the proposal's conditions themselves every heartbeat timeout, so that they
        # propose when the first one died or hung after it joined (the first proposal
        # wins).  A ``check``, never a ``store.wait`` that times out: torch logs every
        # timed-out wait with the socket's addresses, looked up in reverse DNS in this
        # thread before the wait is cancelled, and one lost DNS query held the agreement
        # for the resolver's 5 s retry (see _wait_for_key).
        first = int(store.add(f"joins/{epoch}", 1)) == 1
        looked = time.monotonic()
        decided = None
        while decided is None:
            if not first:
                if self._wait_for_key(key, looked + self.heartbeat_timeout):
                    break
                looked = time.monotonic()
            self._poll_fatal()
            joined = _int_list(_peek(store, f"joined/{epoch}"))
            present = [g for g in previous if g in joined]
            missing = [g for g in previous if g not in joined]
            hinted = _dead_hint(store) if missing else set()
            dead = [g for g in missing if self._stale(g) or (g in hinted and store.check([f"dead/{g}"]))]
            if len(dead) < len(missing) and time.monotonic() > deadline:
                dead = missing  # alive (a heartbeat) but silent for the whole timeout: a hung rank
            if len(dead) == len(missing):
                failed = set(self.failed) | set(dead)
                joiners = {}
                texts = [_text(v) for v in store.multi_get([f"join/{epoch}/{g}" for g in present])]
                records = [json.loads(text) for text in set(texts)]
                if all(r.get("phase") == "boundary" for r in records):
                    for g in sorted(self.failed):
                        # An admitted joiner deletes its request as soon as another
                        # member's proposal is decided: read it without blocking.
                        token = _peek(store, f"rejoin/{g}")
                        if token is not None:
                            joiners[str(g)] = token
                            failed.discard(g)
                if not self._pg_ready or self._heal_due:
                    # The last epoch's process group was never built, or the state sent to
                    # its joiners did not reach them all (a member died during the heal), so
                    # its joiners hold no state: they stay joiners (the step helper sends it
                    # again, and they heal from a member that is not one), else a joiner
                    # waits for a state that no member sends while the members run the next
                    # step.
                    joiners.update({g: token for g, token in self._joiner_tokens.items() if int(g) not in failed})
                # The survivors are the members present (``dead`` is ``missing``): their
                # records go into the agreed record, one entry per distinct record, so each
                # member reads one key (a read of every survivor's key by every member was
                # N^2 keys).
                survivors = {}
                for g, text in zip(present, texts):
                    survivors.setdefault(text, []).append(g)
                proposal = json.dumps({"failed": sorted(failed), "joiners": joiners,
                                       "records": [[json.loads(text), gs] for text, gs in survivors.items()]})
                decided = _text(store.compare_set(key, "", proposal))  # ours, or the proposal that won
            elif first:
                time.sleep(0.002)
                if store.check([key]):
                    break
        return self._adopt(epoch, previous, json.loads(decided if decided is not None else _text(store.get(key))))

    def _follow(self, epoch):
        """Rank ``k > 0`` of a DP group: wait for epoch ``epoch``'s agreed record (rank 0 of each group agrees it)."""
        store = self.store
        previous = list(self.members)
        key = f"epoch/{epoch}"
        # Rank 0 may wait ``timeout`` for a silent member before it is declared failed.
        deadline = time.monotonic() + 2 * self.timeout_seconds
        # A look every heartbeat interval, never a timed-out store wait (see _wait_for_key).
        while not store.check([key]):
            self._poll_fatal()
            self._check_group_lost()
            if time.monotonic() > deadline:
                self._lose_group(f"rank {self.group_rank} of group {self.group} saw no agreement within "
                                 f"{2 * self.timeout_seconds:g} s")
                self._check_group_lost()
            time.sleep(self.interval)
        return self._adopt(epoch, previous, json.loads(_text(store.get(key))))

    def _wait_for_key(self, key, until):
        """Whether ``key`` exists by ``until`` (``time.monotonic()``): a look every heartbeat interval, never a timed-out wait.

        One ``check`` per look, as many requests as a store-side wait of one interval
        (a wait that times out is two: the wait and its cancellation) and none of its
        cost: torch's client logs each timed-out wait (``waitForInput ... likely a
        timeout``, in two lines) with the socket's local and remote addresses, which it looks
        up in reverse DNS first, in the waiting thread, before it cancels the wait.  A
        lookup whose query is lost costs the resolver's retry timeout (5 s by default),
        so a wait of 50 ms lasted 5 s and the recovery with it.
        """
        while True:
            if self.store.check([key]):
                return True
            left = until - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(self.interval, left))

    def _adopt(self, epoch, previous, decided):
        """Enter epoch ``epoch`` with its agreed record ``decided`` (the members before it: ``previous``)."""
        store = self.store
        if self.leader:
            store.set("epoch", str(epoch))
        self._event("agree", epoch=epoch, failed=decided["failed"])
        if self.group in decided["failed"]:
            raise Evicted(f"group {self.group} was declared failed in epoch {epoch}")
        if "records" in decided:
            records = {g: dict(r) for r, gs in decided["records"] for g in gs}
        else:
            survivors = [g for g in previous if g not in decided["failed"]]
            records = {g: json.loads(_text(v))
                       for g, v in zip(survivors, store.multi_get([f"join/{epoch}/{g}" for g in survivors]))}
        self._enter(epoch, decided)
        self.records = records
        self._event("plan", epoch=epoch, seconds=self.plan_seconds)
        if not self.plan.masked:
            self.close()
            raise WipeOut(self.failed)
        if all(g in self.joiners for g in self.members):
            # Every member that held the state died during a heal: the joiners have none.
            self.close()
            raise WipeOut(self.failed, "every live group is a repaired group that has not received the state yet")
        return {"epoch": epoch, "failed": sorted(self.failed), "joiners": self.joiners, "plan": self.plan,
                "records": records}

    def _await_admission(self):
        store = self.store
        deadline = time.monotonic() + self.timeout_seconds
        beats = {}  # group -> (its heartbeat value, when this group first saw it)

        def check_end():
            ended = _peek(store, "ended")
            if ended is None and self._no_live_member(beats):
                # Every member died (a crash of every group, a wipe-out that nobody
                # survived to report): nobody will admit this group.  End the generation
                # so that every restarted group starts the next one from the checkpoint
                # (run_worker moves the job on) instead of waiting out the timeout.
                if _peek(store, f"rejoin/{self.group}") == self._token:
                    store.delete_key(f"rejoin/{self.group}")
                    store.add("pending_rejoins", -1)
                ended = _text(store.compare_set("ended", "", "restart"))
                if ended == "restart":
                    self._event("no-live-member", seconds=self._liveness_window)
                    raise JobEnded(f"group {self.group} found no live member to admit it (no heartbeat moved for "
                                   f"{self._liveness_window:g} s): the job restarts from its last checkpoint in a new "
                                   "generation", restart=True)
            if ended is not None:
                restart = ended == "restart"
                raise JobEnded(f"group {self.group} was not admitted: the job "
                               f"{'restarted in a new generation' if restart else 'has ended'}", restart=restart)
            if time.monotonic() > deadline:
                raise GroupTimeout(f"group {self.group}'s death was not agreed within {self.timeout_seconds:g} s "
                                   "(SpareGroup(timeout=...)): no live member answered")

        # Its death must be agreed before it may ask: the live groups admit only failed
        # groups, and its death notice must be gone before it is a member again.  A
        # launcher that restarts it (torchrun --max-restarts) posts no notice: post it.
        while True:
            check_end()
            epoch = _peek(store, "epoch")
            if epoch is not None:
                record = json.loads(_text(store.get(f"epoch/{epoch}")))
                if self.group in record["failed"]:
                    break
                if _peek(store, f"dead/{self.group}") is None:
                    post_death(store, self.group, "restarted")
            time.sleep(self.interval / 5)
        store.delete_key(f"dead/{self.group}")
        store.set(f"rejoin/{self.group}", self._token)
        store.add("pending_rejoins", 1)
        epoch = int(_text(store.get("epoch")))
        deadline = time.monotonic() + self.timeout_seconds
        while True:
            self._poll_fatal()
            key = f"epoch/{epoch + 1}"
            if store.check([key]):
                epoch += 1
                record = json.loads(_text(store.get(key)))
                if record.get("joiners", {}).get(str(self.group)) == self._token:
                    store.delete_key(f"rejoin/{self.group}")
                    # Withdrawn here, not after the rebuild: a joiner that dies or is
                    # evicted before its first process group leaves no request behind.
                    store.add("pending_rejoins", -1)
                    self._event("admitted", epoch=epoch)
                    return epoch, record
            elif time.monotonic() > deadline or _peek(store, "ended") is not None:
                ended = _peek(store, "ended")
                if ended is not None:
                    if _peek(store, f"rejoin/{self.group}") == self._token:
                        store.delete_key(f"rejoin/{self.group}")
                        store.add("pending_rejoins", -1)
                    check_end()
                # Withdrawn (a member that admits it in the instant between leaves it a
                # joiner that never connects: the rebuild barrier's timeout ends that).
                if _peek(store, f"rejoin/{self.group}") == self._token:
                    store.delete_key(f"rejoin/{self.group}")
                    store.add("pending_rejoins", -1)
                raise GroupTimeout(f"group {self.group} was not admitted within {self.timeout_seconds:g} s "
                                   "(SpareGroup(timeout=...)): no live member reached a step boundary")
            else:
                check_end()
                time.sleep(self.interval / 5)

    @property
    def _liveness_window(self):
        """Seconds without a heartbeat of any other group after which a repaired group finds no live member."""
        return max(2 * self.heartbeat_timeout, self.heartbeat_timeout + 1.0)

    def _no_live_member(self, beats):
        """Whether no other group's heartbeat moved for :attr:`_liveness_window` seconds (a repaired group's wait).

        ``beats`` remembers each group's heartbeat value and when it was first seen.  Only
        once the job started (``epoch``): before it the groups do not beat yet.  A live
        member beats every ``heartbeat_interval`` from a thread of its own, even in a long
        step; one silent for longer than its ``heartbeat_timeout`` is declared failed by
        its peers anyway.  Every ``heartbeat_interval`` it reads the heartbeats of the
        (up to) ``watch`` groups after it on the ring, and every group's only at its
        first look and when those all look dead (at most every half window): when every
        group died at once and all of them restart, ``N`` repaired groups would read
        ``N`` keys each every beat.
        """
        now = time.monotonic()
        if now - beats.get("read", -1e9) < self.interval:
            return False
        beats["read"] = now
        if _peek(self.store, "epoch") is None:
            return False
        others = [g for g in range(self.groups) if g != self.group]
        if not others or not self.store.check([f"hb/{g}" for g in others]):
            return False  # a group that never registered: the members' own wait ends the job
        near = [(self.group + k) % self.groups for k in range(1, min(self.watch or 8, len(others)) + 1)]

        def look(groups):
            for g, value in zip(groups, self.store.multi_get([f"hb/{g}" for g in groups])):
                if beats.get(g, (None, 0.0))[0] != value:
                    beats[g] = (value, now)
            return all(now - beats[g][1] > self._liveness_window for g in groups)

        if "all" not in beats:
            look(others)
            beats["all"] = now
        if not look(near) or now - beats["all"] < self._liveness_window / 2:
            return False
        beats["all"] = now
        return look(others)

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

    def _settle_heal(self, received):
        """Whether the state sent to this epoch's joiners reached every rank of every member; the same answer everywhere.

        Called by the step helper on every rank of every member (joiners included) after
        the state's broadcast, with ``received``: whether it completed here.  A
        broadcast can complete on some ranks and fail on others (a member dies during
        it), so each rank writes its outcome and the first verdict written wins
        (``go`` once every rank wrote a success; ``retry`` at a failure, an abort, a
        member's death or the timeout), as the barrier of :meth:`_rebuild` does.  On
        ``retry`` the epoch is aborted: every rank agrees again (:meth:`recover`), the
        joiners stay joiners and the state is sent again.

        Returns
        -------
        bool
            ``True`` when every joiner holds the state (``go``).
        """
        store = self.store
        epoch = self.epoch
        key = f"heal/{epoch}"

        def mine(g, k):
            return f"{key}/{g}" if k == 0 else f"{key}/{g}/{k}"

        store.set(mine(self.group, self.group_rank), "1" if received else "0")
        ranks = range(self.group_world_size)
        others = {g: [mine(g, k) for k in ranks if (g, k) != (self.group, self.group_rank)] for g in self.members}
        everyone = [name for names in others.values() for name in names]
        deadline = time.monotonic() + self.timeout_seconds
        while True:
            self._poll_fatal()
            if not received:
                verdict = store.compare_set(key, "", "retry")
                break
            if store.check(everyone):
                answers = [_text(v) for v in store.multi_get(everyone)] if everyone else []
                verdict = store.compare_set(key, "", "go" if all(a == "1" for a in answers) else "retry")
                break
            if store.check([key]):
                verdict = store.get(key)
                break
            if self.aborted() or self._group_lost is not None or time.monotonic() > deadline or \
                    any(self._stale(g) or (g != self.group and store.check([f"dead/{g}"]))
                        for g, names in others.items() if names and not store.check(names)):
                verdict = store.compare_set(key, "", "retry")
                break
            time.sleep(0.001)
        if _text(verdict) != "go":
            self._event("heal-failed", epoch=epoch, joiners=list(self.joiners))
            self.fail_epoch("a member failed while the state was sent to the repaired groups")
            return False
        self._heal_due = False
        return True

    def _drop_process_group(self):
        pg, self._pg = self._pg, None
        if pg is not None:
            try:
                pg.shutdown()  # what destroy_process_group does to each backend
            except RuntimeError:
                pass

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


class _Beats:
    """What a group's heartbeats remember between beats (:meth:`SpareGroup._beat`)."""

    def __init__(self):
        self.count = 0  # this group's beats so far (its heartbeat value)
        self.deaths = None  # the ``deaths`` counter when the notices were last read
        self.checked = None  # the epoch whose abort flag and notices were last read
        self.posted = {}  # group -> its heartbeat value when this group posted its death notice


def _int_list(text):
    """The set of ints of a ``"3,5,"`` list (``None``: empty)."""
    return {int(v) for v in text.split(",") if v} if text else set()


def _dead_hint(store):
    """The groups that ever got a death notice (``dead_list``): which ``dead/{g}`` keys to check."""
    return _int_list(_peek(store, "dead_list"))


def post_death(store, group, reason="died"):
    """Tell the live groups that group ``group``'s process died: they need not wait for its heartbeat.

    What a launcher or a node agent calls when it sees a rank's process end with a
    failure (the :class:`~spare_opt.torch.Supervisor` does so).  Without it the live
    groups notice the death when its heartbeat is ``heartbeat_timeout`` old.

    Parameters
    ----------
    store : torch.distributed.Store
        The job's store of the current generation (the same prefix the workers use).
    group : int
        The DP group whose process died.
    reason : str, default "died"
        Stored as the notice's value (for people reading the store).

    Notes
    -----
    Writes ``dead/{group}``, appends ``group`` to ``dead_list`` (so a reader checks the
    notices of the groups listed there, not of every group) and bumps the ``deaths``
    counter, which every live group's heartbeat thread reads each beat.  A notice for a group that is already agreed
    failed does nothing; a repaired group deletes its own notice before it asks to
    rejoin.
    """
    store.set(f"dead/{int(group)}", str(reason))
    store.append("dead_list", f"{int(group)},")
    store.add("deaths", 1)


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


_ABSENT = "\x00absent"
#: How a watcher's death notice begins: a suspicion (a stale heartbeat), which the group
#: withdraws when it is alive; a launcher's notice is a fact.
_SUSPICION = "stale heartbeat"


def _peek(store, key):
    """The value of ``key`` as text, or ``None`` when the store has no such key; never waits.

    ``store.get`` waits until the key exists, so ``check`` then ``get`` hangs for the
    store's timeout when another rank deletes the key in between.  ``compare_set`` with
    an expected value that no key holds answers in one round trip: it returns the
    current value and changes nothing, or, when the key is absent, returns the
    expected value without creating the key (``TCPStore``, ``HashStore`` and
    ``FileStore`` all do so).
    """
    value = _text(store.compare_set(key, _ABSENT, _ABSENT))
    return None if value == _ABSENT else value


def _short(exc):
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:120]

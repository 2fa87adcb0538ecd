"""Membership of a DP group in a SPARe job: registration, heartbeats, the watch ring, death notices, the abort flag.

The role of :class:`~spare_opt.torch.SpareGroup` that keeps track of who is alive.  It is
a mixin: :class:`Membership` holds no state of its own and reads and writes the
attributes that ``SpareGroup.__init__`` sets (``store``, ``group``, ``groups``,
``group_rank``, ``group_world_size``, ``group_mesh``, ``leader``, ``watch``, ``interval``,
``heartbeat_timeout``, ``timeout_seconds``, ``book``, ``epoch``, ``members``, ``_lock``,
``_aborted_epoch``, ``_waiter``, ``_stop``, ``_last_seen``, ``_sibling_seen``,
``_group_lost``, ``_fatal``, ``_fatal_polled``, ``_token``, ``_hb_store``) and calls the
host's ``_event`` and ``close``.  Nothing here needs a process group: :meth:`_beat` runs
on a store alone (the control-plane benchmark drives it from outside, a test drives it
on a ``TCPStore``).  The store keys are listed in :mod:`spare_opt.torch.elastic`.

The store helpers (:func:`_peek`, :func:`_text`) and :func:`post_death` live here
because every role writes and reads notices with them.
"""

import collections
import datetime
import numbers
import sys
import time

import torch.distributed as dist

import spare_opt

from ._errors import DuplicateGroup, Evicted, GroupTimeout


class Membership:
    """The registration, the heartbeat, the watch ring, death notices and the abort flag of a :class:`~spare_opt.torch.SpareGroup`."""

    # ------------------------------------------------------------ registration
    def _register(self, rejoin):
        """Register this rank: the layout's fingerprint, the group's size, the counters and (rank 0 of a fresh group) the owner token."""
        store, group = self.store, self.group
        registered = _text(store.compare_set("layout", "", self.book.fingerprint))
        if registered != self.book.fingerprint:
            message = (f"group {group}'s layout (fingerprint {self.book.fingerprint}) differs from the job's "
                       f"({registered}): every rank must build the same layout")
            self.stop_job(message)
            raise spare_opt.LayoutError(message)
        # N for the launchers (join_job, post-death): a group outside [0, N) is refused there by name.
        store.compare_set("groups", "", str(self.groups))
        self._poll_fatal(force=True)
        size = self.group_world_size
        registered = _text(store.compare_set("group_world_size", "", str(size)))
        if registered != str(size):
            self._refuse_shape(
                f"group {group} has {size} rank(s) but the job's DP groups have {registered}: every group needs the "
                "same number of ranks (the gradient SUM pairs the ranks of the same position in each group)")
        shape = self.group_mesh.description
        registered = _text(store.compare_set("group_mesh", "", shape))
        if registered != shape:
            self._refuse_shape(
                f"group {group}'s ranks form the mesh {shape} but the job's DP groups form {registered}: every group "
                "needs the same mesh (the gradient SUM pairs the ranks of the same mesh position in each group)")
        for counter in ("deaths", "pending_rejoins"):  # read with the heartbeats: must exist
            store.compare_set(counter, "", "0")
        for listed in ("dead_list", "fatal"):  # read together by a heartbeat when ``deaths`` moved: must exist
            store.compare_set(listed, "", "")
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

    def _refuse_shape(self, message):
        """Refuse a group whose ranks or mesh differ from the job's: ``LayoutError``.

        Once the job runs (epoch 0 agreed), only this group is refused: a launcher that
        restarts one group with another shape must not stop the others.  Before it, the
        job cannot start without this group (the others wait for its registration): the
        whole job stops with the message, as for a layout that differs.
        """
        if not self.store.check(["epoch/0"]):
            self.stop_job(message)
        raise spare_opt.LayoutError(message)

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

    def _meet_group(self, rejoin, fresh=False):
        """Check with this DP group's other ranks that they are the same group and take rank 0's admission token.

        Returns rank 0's ``fresh`` (a repaired group that starts as a fresh member: the
        job had not begun), which every rank of the group follows.
        """
        if not self.leader:
            # Written before rank 0's heartbeat reads it (that read waits until every key exists).
            self.store.set(self._beat_key, "0")
        gathered = [None] * self.group_world_size
        try:
            dist.all_gather_object(gathered, (self.group, bool(rejoin), self._token, bool(fresh)),
                                   group=self.group_process_group)
        except RuntimeError:
            # A rank of this group that registered after the job was stopped left (exit 77)
            # while the others met: the job's fatal error is the reason, not gloo's.
            self._poll_fatal(force=True)
            raise
        if any(g != self.group or r != bool(rejoin) for g, r, _, _ in gathered):
            raise spare_opt.ParameterError(
                "the ranks of one DP group must pass the same group and rejoin; they passed (group, rejoin) "
                f"{[(g, r) for g, r, _, _ in gathered]}")
        # Rank 0 asks for the admission; every rank of the group recognises it by this token.
        self._token = gathered[0][2]
        return gathered[0][3]

    def _lose_group(self, reason, store=None):
        """A rank of this DP group died: the whole group leaves (its death notice stays, every epoch is aborted).

        ``store``: the calling thread's connection (default: the training thread's).
        """
        store = self.store if store is None else store
        with self._lock:
            if self._group_lost is not None:
                return
            self._group_lost = reason
        if _peek(store, f"dead/{self.group}") is None:
            post_death(store, self.group, reason)
        self._abort(self.epoch, reason)

    def _check_group_lost(self):
        if self._group_lost is not None:
            self.close()
            raise Evicted(f"group {self.group} leaves: {self._group_lost}")

    # ------------------------------------------------------------ fatal errors
    def stop_job(self, message):
        """Stop the whole job for a configuration error that a restart cannot mend.

        Writes ``fatal`` (``message``; the first one wins) and wakes the heartbeats: every
        rank of the job raises ``spare_opt.LayoutError("the job stops: ...")`` at its next
        look, and a restarted one as it registers, instead of a rejoin that fails again
        (:func:`~spare_opt.torch.launchers.run_worker` exits 77 for it).  Used for a
        layout that differs and for another job's checkpoint.
        """
        self.store.compare_set("fatal", "", str(message))
        _bump(self.store)  # the running ranks' heartbeats and alarm threads read it

    #: Whether this rank's heartbeat reads ``fatal`` (whenever ``deaths`` moves, as :meth:`stop_job` makes it).
    _fatal_watched = False

    def _poll_fatal(self, force=False):
        """Raise the job's fatal error (``fatal``: :meth:`stop_job`) if there is one.

        Reads the store at most every 0.1 s (``force``: now), and not at all once the
        heartbeat reads it (it does whenever ``deaths`` moved): a request per member per
        agreement less.
        """
        if self._fatal is None and not self._fatal_watched and (force or time.monotonic() - self._fatal_polled >= 0.1):
            self._fatal_polled = time.monotonic()
            message = _peek(self.store, "fatal")
            if message:  # "" from the registration on: none
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

    def aborted(self):
        """bool: whether the current epoch was aborted (a member failed): stop waiting, call :meth:`recover`."""
        return self._aborted_epoch >= self.epoch

    def rejoin_pending(self):
        """bool: whether a repaired group asked to rejoin (seen by the heartbeat thread)."""
        return self._pending_rejoins > 0

    _pending_rejoins = 0

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
            self._watch_hang(store)
            state.count += 1
            store.set(self._beat_key, str(state.count))
            epoch = self.epoch
            # Rank k > 0 of a DP group watches rank 0 of its group only: rank 0 speaks for it.
            watched = self._watched() if self.leader else []
            siblings = self._sibling_keys() if self.group_world_size > 1 else []
            # One read: the watched heartbeats and the two counters.  Only keys known to
            # exist: a read of a missing key waits for it (up to the store's timeout), and a
            # group that died after it passed the registration with a death notice, or a
            # joiner that died before its first beat, never writes it; this heartbeat then
            # stopped, and its own group looked dead to the others.  A missing key is a
            # heartbeat that does not move.
            keys = [f"hb/{g}" for g in watched] + siblings
            missing = [key for key in keys if key not in state.existing]
            if missing and store.check(missing):
                state.existing.update(missing)
            elif missing:  # rare: after a death before a first beat
                state.existing.update(key for key in missing if store.check([key]))
            present = [key for key in keys if key in state.existing]
            read = dict(zip(present + ["deaths", "pending_rejoins"],
                            store.multi_get(present + ["deaths", "pending_rejoins"])))
            values = [read.get(key) for key in keys] + [read["deaths"], read["pending_rejoins"]]
            now = time.monotonic()
            for g, value in zip(watched, values):
                if self._last_seen.get(g, (None, 0))[0] != value:
                    self._last_seen[g] = (value, now)
            self._last_read = now
            for key, value in zip(siblings, values[len(watched):]):
                if self._sibling_seen.get(key, (None, 0))[0] != value:
                    self._sibling_seen[key] = (value, now)
                elif now - self._sibling_seen[key][1] > self.heartbeat_timeout:
                    self._lose_group(f"{'rank ' + key.rsplit('/', 1)[1] if self.leader else 'rank 0'} of group "
                                     f"{self.group} stopped beating", store)
                    self._nudge(store)
            seen = int(values[-2])
            self._pending_rejoins = int(values[-1])
            stale = [g for g in watched if self._stale(g)]
            aborting = bool(stale) and epoch > self._aborted_epoch
            if aborting:  # before the notice it posts: its own alarm thread would take the notice for the cause
                self._abort(epoch, "stale heartbeat")
            for g in stale:
                # The others may not read g's heartbeat (``watch``): tell them.
                if state.posted.get(g) != self._last_seen[g][0]:
                    state.posted[g] = self._last_seen[g][0]
                    post_death(store, g, f"{_SUSPICION} (seen by group {self.group})")
            if (seen != state.deaths and seen > self._alarm_handled) or state.checked != epoch:
                state.deaths, state.checked = seen, epoch
                self._read_notices(store, state.notices, epoch)
            agreeing = self._agreeing
            if agreeing is not None and agreeing[1] is not None and agreeing[1] in stale:
                self._nudge(store)
            if aborting:
                self._post_abort(epoch, store)
            return True
        except Exception:  # the store went away: the job is over
            return False

    def _read_notices(self, store, notices, epoch):
        """Act on the notices, the abort flag and the fatal error (``deaths`` moved): abort the epoch, wake a waiter.

        ``notices`` (``{group: notices posted}``, updated here) is what the calling thread
        read last time.  Two requests, three when a notice is a suspicion: the list of
        notices with the fatal error, the notice itself, the abort flag.
        """
        # One read: the notices' list and the fatal error (both exist from the registration on).
        listed, message = (_text(v) for v in store.multi_get(["dead_list", "fatal"]))
        self._fatal_watched = True
        if message and self._fatal is None:
            self._fatal = spare_opt.LayoutError(f"the job stops: {message}")
            self._abort(self.epoch, "the job stops")
            self._nudge(store)
        hinted = _int_list(listed)
        if self.group in hinted and self.group in self.members:
            self._own_notice(store)
        # Each notice appends its group once more: a count that grows is a new notice.
        posted = collections.Counter(int(v) for v in listed.split(",") if v)
        news = {g for g, n in posted.items() if n > notices.get(g, 0) and g != self.group}
        notices.clear()
        notices.update(posted)
        if epoch <= self._aborted_epoch:
            # This rank agrees (or is about to): wake it when the member that proposes may be
            # the one that died.
            agreeing = self._agreeing
            if news and agreeing is not None and (agreeing[1] is None or agreeing[1] in news):
                self._nudge(store)
            return
        notice = fact = False
        for g in hinted:
            if g in self.members and g != self.group:
                value = _peek(store, f"dead/{g}")
                notice = notice or value is not None
                if value is not None and not value.startswith(_SUSPICION):
                    fact = True
                    break
        # A notice that is a fact (a death seen by a watcher or a launcher) stays until the
        # job agreed on it: every member reads it, no abort flag needed.  A suspicion may be
        # withdrawn before some member read it: the flag makes them all stop.
        flag = not fact and store.check([f"abort/{epoch}"])
        reason = "abort flag" if flag else "death notice" if notice else None
        if reason is not None:
            if not flag and not fact:
                self._post_abort(epoch, store)
            self._abort(epoch, reason)

    def _alarms(self):
        """The alarm thread: wake at every notice, abort flag or fatal error (``alarm/{n}``), not at the next beat.

        Each bump of ``deaths`` (:func:`post_death`, an abort flag, :meth:`stop_job`)
        writes ``alarm/{n}`` for its new count ``n``, with what happened; this thread
        waits for the next one on a connection of its own (a store-side wait: no request
        while nothing happens), so a death notice reaches every member in a store round
        trip whatever ``heartbeat_interval``.  A death that is a fact (``dead g``: a
        watcher or a launcher saw it) aborts the epoch at once, with no further request;
        anything else (a suspicion, an abort flag, a fatal error) is read as a heartbeat
        reads it.  Its wait is a day long: in a job without failures it times out once
        a day (torch logs that), never on a recovery's path.  The heartbeat still reads
        ``deaths`` every beat, unless this thread handled that count already: a missed
        alarm costs a beat, not more.  It ends with its process (a ``SpareGroup`` closed
        earlier leaves it waiting on its generation's next alarm).
        """
        notices = {}
        try:
            store = self._alarm_store = self.store.clone()
            count = int(store.add("deaths", 0))
            self._alarm_handled = count
            while not self._stop.is_set():
                what = _get_within(store, f"alarm/{count + 1}", _ALARM_WAIT)
                if what is None or self._stop.is_set():
                    continue
                count += 1
                self._on_alarm(store, count, what, notices)
        except Exception:  # noqa: BLE001 - the store went away: the job is over
            return

    def _on_alarm(self, store, count, what, notices):
        """Act on alarm ``count`` (its value ``what``) with ``store`` (the alarm thread's connection).

        ``dead g`` (a death that is a fact) aborts the epoch with no request, or wakes
        this rank where it waits for an agreed record when ``g`` may be the member that
        proposes; anything else is read as a heartbeat reads it (``notices``: what this
        caller read last).  The control-plane benchmark drives it from one thread per
        emulating process.
        """
        words = what.split()
        epoch = self.epoch
        if len(words) == 2 and words[0] == "dead" and int(words[1]) != self.group:
            g = int(words[1])
            agreeing = self._agreeing
            if epoch > self._aborted_epoch and g in self.members:
                self._abort(epoch, "death notice")
            elif agreeing is not None and agreeing[1] in (None, g):
                self._nudge(store)
        else:
            self._read_notices(store, notices, epoch)
        self._alarm_handled = count

    #: The ``deaths`` count up to which the alarm thread acted on every bump (the heartbeat need not read them).
    _alarm_handled = -1

    def _watch_hang(self, store):
        """End a hung rank: its training thread spent over ``hang_timeout`` in one micro-batch while this thread beats.

        Posts the group's death notice (``hung: ...``, a fact: the group's other ranks
        leave, the survivors recover at their next beat) and says so on stderr; under
        ``run_worker`` the process then exits 76 (``EVICTED_EXIT``: its launcher
        restarts it, and it rejoins), else this heartbeat stops (the training thread
        cannot be stopped from here).
        """
        busy = self._computing
        if busy is None or self.hang_timeout is None or time.monotonic() - busy[2] <= self.hang_timeout:
            return
        step, key, _ = busy
        m = self.micro_batches
        reason = (f"hung: rank {self.group_rank}'s micro-batch {key % m} of shard type {key // m} at step {step} "
                  f"ran over hang_timeout={self.hang_timeout:g} s while its heartbeat beat")
        self._event("hung", step=step, key=key)
        leave = _hung_exit
        print(f"spare-opt: group {self.group}: {reason}; "
              + ("exiting for the launcher to restart this group" if leave is not None else "its heartbeat stops"),
              file=sys.stderr, flush=True)
        post_death(store, self.group, reason)
        if leave is not None:
            leave()  # never returns
        self._stop.set()
        raise _Hung(reason)

    #: ``(wake key, the proposing member or None)`` while this rank waits for an agreed record.
    _agreeing = None
    #: ``(step, key, time.monotonic())`` while the training thread runs a micro-batch (the step helper sets it).
    _computing = None
    hang_timeout = None

    def _nudge(self, store):
        """Wake this rank's training thread where it waits for an agreed record (its wake key); from the heartbeat."""
        agreeing = self._agreeing
        if agreeing is not None:
            store.set(agreeing[0], "nudge")

    def _own_notice(self, store):
        """A death notice about this group while it runs and is a member: withdraw a suspicion, or leave.

        A suspicion (a peer found a heartbeat stale: a stall) is withdrawn by rank 0
        (every rank of the group still beats: a silent one would have made it lose the
        group).  A fact (a launcher or a death watcher saw a rank of this group die, a
        rank found another silent, or one hung in a micro-batch) makes the group leave;
        it used to be deleted too in a group of one rank, so a hung rank's own alarm
        thread withdrew the notice of its hang.
        """
        value = _peek(store, f"dead/{self.group}")
        if value is None or self._group_lost is not None:
            return
        if not value.startswith(_SUSPICION):
            self._lose_group(f"death notice: {value}", store)
        elif self.leader:
            store.delete_key(f"dead/{self.group}")

    def _post_abort(self, epoch, store=None):
        """Raise epoch ``epoch``'s abort flag for every member (the counter and its alarm make them read it).

        ``store``: the calling thread's connection (default: the training thread's).
        """
        store = self.store if store is None else store
        store.set(f"abort/{epoch}", str(self.group))
        _bump(store)

    #: When this rank's heartbeat last read its peers' heartbeats (``time.monotonic()``).
    _last_read = 0.0

    def _stale(self, g):
        """Whether ``g``'s heartbeat did not move over this rank's own reads of it for ``heartbeat_timeout``.

        Measured between this rank's reads, not up to now: after this rank's own
        heartbeat thread stalled (a long GIL hold, a paused process), every peer would
        otherwise look dead until its next read, and a proposal made in between declared
        the live groups failed.
        """
        seen = self._last_seen.get(g)
        return seen is not None and self._last_read - seen[1] > self.heartbeat_timeout

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


#: Set by ``run_worker``: ends a hung rank's process (exit 76, its death watcher told it exits on purpose).
_hung_exit = None


class _Hung(Exception):
    """This rank is hung (:meth:`Membership._watch_hang`): its heartbeat stops."""


class _Beats:
    """What a group's heartbeats remember between beats (:meth:`SpareGroup._beat`)."""

    def __init__(self):
        self.count = 0  # this group's beats so far (its heartbeat value)
        self.deaths = None  # the ``deaths`` counter when the notices were last read
        self.checked = None  # the epoch whose abort flag and notices were last read
        self.posted = {}  # group -> its heartbeat value when this group posted its death notice
        self.notices = {}  # group -> how many notices ``dead_list`` held for it at the last read
        self.existing = set()  # heartbeat keys known to exist (never deleted): read without a wait


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
        The DP group whose process died, in ``[0, N)``.
    reason : str, default "died"
        Stored as the notice's value (for people reading the store).

    Raises
    ------
    spare_opt.ParameterTypeError
        ``group`` is not an integer (a bool, a float, a string).
    spare_opt.ParameterError
        ``group`` is negative, or not below the job's ``N`` once a group registered it
        (the store's ``groups`` key): nothing is written (a notice ``dead/-1`` misled
        every reader of the store).

    Notes
    -----
    Writes ``dead/{group}``, appends ``group`` to ``dead_list`` (so a reader checks the
    notices of the groups listed there, not of every group) and bumps the ``deaths``
    counter, which every live group's heartbeat thread reads each beat.  A notice for a group that is already agreed
    failed does nothing; a repaired group deletes its own notice before it asks to
    rejoin.
    """
    if isinstance(group, bool) or not isinstance(group, numbers.Integral):
        raise spare_opt.ParameterTypeError(f"group must be an integer, got {group!r} ({type(group).__name__})")
    group = int(group)
    groups = _peek(store, "groups")
    if group < 0 or (groups is not None and groups.isdigit() and group >= int(groups)):
        bound = f"[0, {groups}) (this job has N = {groups} DP groups)" if groups is not None else "[0, N)"
        shown = str(group) if abs(group) < 10**30 else "a huge integer"
        raise spare_opt.ParameterError(f"the group of a death notice must be in {bound}, got {shown}")
    store.set(f"dead/{group}", str(reason))
    store.append("dead_list", f"{group},")
    # A suspicion (a stale heartbeat) may be withdrawn: its alarm says only that something changed.
    _bump(store, "" if str(reason).startswith(_SUSPICION) else f"dead {group}")


def _bump(store, what=""):
    """Count a notice, an abort flag or a fatal error in ``deaths`` and write its alarm (``alarm/{count}``: ``what``)."""
    store.set(f"alarm/{int(store.add('deaths', 1))}", what)


#: How long an alarm thread waits for the next alarm before it waits again (a day).
_ALARM_WAIT = 86400.0


def _get_within(store, key, seconds):
    """The value of ``key`` (text) once it exists, ``None`` when it did not within ``seconds``: one blocking read.

    ``get`` waits for the key on the store's side; its bound is the client's timeout, set
    for this read and put back after it (the connection must be this thread's own).
    """
    saved = store.timeout
    store.set_timeout(datetime.timedelta(seconds=seconds))
    try:
        return _text(store.get(key))
    except RuntimeError:  # DistStoreError: it timed out
        return None
    finally:
        store.set_timeout(saved)


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

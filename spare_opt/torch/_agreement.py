"""The agreement of a SPARe job's epochs: the proposal, follow and adopt, the admission of repaired groups, the heal verdict.

The role of :class:`~spare_opt.torch.SpareGroup` that decides, through ``compare_set``
on the store, which groups make up the next epoch.  It is a mixin: :class:`Agreement`
holds no state of its own and reads and writes the attributes that
``SpareGroup.__init__`` and ``SpareGroup._enter`` set (``store``, ``group``, ``groups``,
``group_rank``, ``group_world_size``, ``leader``, ``watch``, ``interval``,
``heartbeat_timeout``, ``timeout_seconds``, ``epoch``, ``failed``, ``members``,
``joiners``, ``plan``, ``plan_seconds``, ``_joiner_tokens``, ``_heal_due``,
``_pg_ready``, ``_start_epoch``, ``_token``, ``_group_lost``; ``_agreeing`` while a rank
waits for an agreed record, for its heartbeat to wake it), uses the membership's
``_meet_group``, ``_await_registration``, ``_stale``, ``_poll_fatal``, ``_lose_group``,
``_check_group_lost``, ``aborted`` and ``fail_epoch``, and calls the host's ``_enter``,
``_event`` and ``close``.  Nothing here needs a process group (but the meeting of a DP
group of several ranks at its start): the agreement is store requests only.  The store
keys are listed in :mod:`spare_opt.torch.elastic`.
"""

import collections.abc
import json
import time

from ._errors import Evicted, GroupTimeout, JobEnded, WipeOut
from ._membership import _dead_hint, _get_within, _peek, _text, post_death


class Agreement:
    """An epoch's proposal, follow and adopt, the admission of repaired groups and the heal verdict of a :class:`~spare_opt.torch.SpareGroup`."""

    # ------------------------------------------------------------ start
    def _first_epoch(self, rejoin):
        """Enter the epoch this group starts in: epoch 0 once every group registered, or the one that admits it (``rejoin``).

        Returns whether the group rejoins after all: a repaired group whose job has not
        agreed its first epoch yet (its predecessor died while the job started, before
        every group registered) starts as a fresh member instead, since no member exists
        yet to admit it and the others wait for its registration.
        """
        store, group = self.store, self.group
        # Read before the group's ranks meet, so before rank 0 may ask to rejoin: the epoch
        # that admits it comes later, and a follower scans the epochs from here.
        self._start_epoch = int(_peek(store, "epoch") or 0)
        # Rank 0 decides for its whole DP group (its ranks read the store at other times).
        fresh = bool(rejoin) and self.leader and not store.check(["epoch/0"])
        if self.group_world_size > 1:
            fresh = self._meet_group(rejoin, fresh)
        if fresh:
            rejoin = False
            # The predecessor's token may hold the key (it died after it registered);
            # join_job saw the predecessor gone, and a user's rejoin=True says the same.
            if self.leader:
                store.set(f"owner/{group}", self._token)
                # A predecessor that died of an error posted its own notice; this process
                # is a member of the first epoch, and that notice would evict it.
                store.delete_key(f"dead/{group}")
            self._event("fresh-start", reason="the job had not begun when this repaired group started")
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
        return bool(rejoin)

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

    # ------------------------------------------------------------ an epoch
    def _agree(self, epoch, record):
        """Join epoch ``epoch``'s agreement with this group's ``record``; its agreed record (adopted) once decided.

        Two requests to join: the record appended to ``joined/{e}`` (one key holds every
        member's) and the count ``joins/{e}`` (the first member to join proposes).  The
        first member reads the count every 2 ms and the list only when the count says
        that every live member is in (or once per heartbeat interval, for the dead
        without a notice: their heartbeat going stale), then proposes; the proposal
        that wins (``compare_set``) wakes every other member at once through its own
        wake key (``wake/{e}/{g}``, one ``multi_set``).  The others wait on that key
        with a store-side wait (no request while they wait, no look every interval),
        then read the record.  Their wait is longer than any agreement can take
        (``timeout`` plus ``heartbeat_timeout``), so on the normal path it never times
        out: torch logs a timed-out wait with the socket's addresses looked up in
        reverse DNS, in the waiting thread, and one lost DNS query held the agreement
        for the resolver's 5 s retry.  A waiter's own heartbeat wakes it (the same key)
        when a member's death notice appears while it waits: it then proposes itself if
        the first member is among the dead (the first proposal wins).
        """
        store = self.store
        previous = list(self.members)
        store.append(f"joined/{epoch}", f"{self.group} {json.dumps(record, separators=(',', ':'))}\n")
        first = int(store.add(f"joins/{epoch}", 1)) == 1
        self._event("joined", epoch=epoch, first=first)
        if first:
            store.set(f"proposer/{epoch}", str(self.group))
            decided = self._propose_when_ready(epoch, previous)
        else:
            decided = self._await_record(epoch, previous)
        return self._adopt(epoch, previous, json.loads(decided))

    def _propose_when_ready(self, epoch, previous, deadline=None):
        """The first member: propose once every member of ``previous`` joined or is dead; the decided record's text."""
        store = self.store
        deadline = time.monotonic() + self.timeout_seconds if deadline is None else deadline
        counted = looked = None
        dead = 0
        while True:
            self._poll_fatal()
            count = int(store.add(f"joins/{epoch}", 0))
            now = time.monotonic()
            if looked is None or now - looked >= self.interval or now > deadline or \
                    (count != counted and count + dead >= len(previous)):
                counted, looked = count, now
                # A member that took the proposal over (it found this one dead: a stall) may
                # have decided already.
                decided = _peek(store, f"epoch/{epoch}")
                if decided is None:
                    decided, dead = self._try_propose(epoch, previous, deadline)
                if decided is not None:
                    return decided
            time.sleep(0.002)

    def _await_record(self, epoch, previous):
        """A member that is not the first: wait on its wake key for the agreed record; the record's text.

        The proposal that wins writes the record into every waiting rank's wake key, so a
        waiter's one blocking read returns it (one request and one wake-up per member).
        Its heartbeat writes ``nudge`` there when the first member may have died (its
        death notice, or its heartbeat stale; any member's notice while the first one is
        not known), the job stops, or its DP group is lost: it then looks again and
        proposes itself when the first member is gone.
        """
        store = self.store
        key = f"epoch/{epoch}"
        wake = self._wake_key(epoch, self.group, self.group_rank)
        # No agreement outlasts this: the first member declares a silent member failed after ``timeout``.
        limit = self.timeout_seconds + self.heartbeat_timeout
        deadline = time.monotonic() + self.timeout_seconds
        proposer = None
        while True:
            self._agreeing = (wake, proposer)
            try:
                value = _get_within(store, wake, limit)
            finally:
                self._agreeing = None
            if value is not None and value != "nudge":
                return value
            # Nudged (or, abnormally, nobody wrote it for the whole limit): the key goes before
            # the record is read again, so a proposal decided meanwhile is seen here or by the
            # next read.
            store.delete_key(wake)
            decided = _peek(store, key)
            if decided is not None:
                return decided
            self._poll_fatal(force=True)
            self._check_group_lost()
            if proposer is None:
                proposer = _peek(store, f"proposer/{epoch}")
                proposer = None if proposer is None else int(proposer)
            if value is None or proposer is None or self._gone(proposer):
                decided, _ = self._try_propose(epoch, previous, deadline)
                if decided is not None:
                    return decided

    def _gone(self, g):
        """Whether member ``g`` is dead as this member sees it: its heartbeat stale, or a death notice."""
        return self._stale(g) or self.store.check([f"dead/{g}"])

    def _wake_key(self, epoch, group, rank=0):
        return f"wake/{epoch}/{group}" if rank == 0 else f"wake/{epoch}/{group}/{rank}"

    def _try_propose(self, epoch, previous, deadline):
        """Propose epoch ``epoch``'s record if every member of ``previous`` joined or is dead.

        Returns ``(decided record's text or None, how many members are missing and dead)``.
        The proposal that wins writes ``epoch`` and wakes every live member's waiting
        ranks (``multi_set`` of their wake keys).
        """
        store = self.store
        key = f"epoch/{epoch}"
        joined = _joined(_peek(store, f"joined/{epoch}"))
        present = [g for g in previous if g in joined]
        missing = [g for g in previous if g not in joined]
        hinted = _dead_hint(store) if missing else set()
        dead = [g for g in missing if self._stale(g) or (g in hinted and store.check([f"dead/{g}"]))]
        if len(dead) < len(missing) and time.monotonic() > deadline:
            dead = missing  # alive (a heartbeat) but silent for the whole timeout: a hung rank
        if len(dead) < len(missing):
            return None, len(dead)
        failed = set(self.failed) | set(dead)
        joiners = {}
        texts = [joined[g] for g in present]
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
        # The most common record's groups are left out (``null``: every survivor not listed), so
        # the record stays small whatever N (every member reads it).
        survivors = {}
        for g, text in zip(present, texts):
            survivors.setdefault(text, []).append(g)
        common = max(survivors, key=lambda text: len(survivors[text]), default=None)
        proposal = json.dumps({"failed": sorted(failed), "joiners": joiners,
                               "records": [[json.loads(text), None if text == common else gs]
                                           for text, gs in survivors.items()]}, separators=(",", ":"))
        decided = _text(store.compare_set(key, "", proposal))  # ours, or the proposal that won
        if decided == proposal:
            store.set("epoch", str(epoch))
            # Every waiting rank of the members present (rank 0 in the agreement, the
            # others following it) gets the record in its wake key: one request.
            wakes = [self._wake_key(epoch, g, k) for g in present for k in range(self.group_world_size)
                     if (g, k) != (self.group, self.group_rank)]
            if wakes:
                store.multi_set(wakes, [proposal] * len(wakes))
        return decided, len(dead)

    def _follow(self, epoch):
        """Rank ``k > 0`` of a DP group: wait for epoch ``epoch``'s agreed record (rank 0 of each group agrees it).

        On its wake key, as :meth:`_agree`'s waiters (the proposal that wins writes the
        record there); its heartbeat nudges it when its DP group is lost or the job stops.
        """
        store = self.store
        previous = list(self.members)
        key = f"epoch/{epoch}"
        wake = self._wake_key(epoch, self.group, self.group_rank)
        # Rank 0 may wait ``timeout`` for a silent member before it is declared failed.
        limit = 2 * self.timeout_seconds
        deadline = time.monotonic() + limit
        while True:
            decided = _peek(store, key)
            if decided is not None:
                break
            self._poll_fatal()
            self._check_group_lost()
            if time.monotonic() > deadline:
                self._lose_group(f"rank {self.group_rank} of group {self.group} saw no agreement within {limit:g} s")
                self._check_group_lost()
            self._agreeing = (wake, -1)  # no member's notice wakes it: rank 0 of its group agrees
            try:
                decided = _get_within(store, wake, max(deadline - time.monotonic(), 0.001))
            finally:
                self._agreeing = None
            if decided is not None and decided != "nudge":
                break
            store.delete_key(wake)  # nudged: wait again after a look
        return self._adopt(epoch, previous, json.loads(decided))

    def _adopt(self, epoch, previous, decided):
        """Enter epoch ``epoch`` with its agreed record ``decided`` (the members before it: ``previous``)."""
        store = self.store
        self._event("agree", epoch=epoch, failed=decided["failed"])
        if self.group in decided["failed"]:
            raise Evicted(f"group {self.group} was declared failed in epoch {epoch}")
        self._enter(epoch, decided)
        if self.leader and self.group == self.members[0]:
            # The proposer wrote it; the lowest member too, in case the proposer died between.
            store.set("epoch", str(epoch))
        records = _Records(decided["records"], previous, decided["failed"])
        self.records = records
        self._event("plan", epoch=epoch, seconds=self.plan_seconds)
        if not self.plan.masked:
            self.close()
            raise WipeOut(self.failed)
        if self.joiners and all(g in self.joiners for g in self.members):
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

    # ------------------------------------------------------------ the heal
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


def _joined(text):
    """``{group: its record's JSON text}`` of a ``joined/{e}`` list (``"g {json}\\n"`` per member; ``None``: empty)."""
    joined = {}
    for line in (text or "").splitlines():
        g, _, record = line.partition(" ")
        if record:
            joined[int(g)] = record
    return joined


class _Records(collections.abc.Mapping):
    """The survivors' records of an agreed record as ``{group: record}``, indexed on first use.

    ``grouped`` is the record's ``[[record, [groups] or None], ...]``: one entry per
    distinct record, the most common one's groups ``None`` (the survivors not listed:
    the members ``previous`` not in the agreed ``failed`` set).  Every member adopts the agreed record, few look at every survivor's (a dict
    of ``N`` records built by each of ``N`` members was ``N^2`` work for the emulated
    control plane).
    """

    def __init__(self, grouped, previous, failed):
        self._grouped = grouped
        self._previous, self._failed = previous, failed
        self._index = None

    def _lookup(self):
        if self._index is None:
            listed = {g: record for record, gs in self._grouped if gs is not None for g in gs}
            rest = [record for record, gs in self._grouped if gs is None]
            failed = set(self._failed)
            self._index = {g: listed[g] if g in listed else rest[0] for g in self._previous
                           if g not in failed and (g in listed or rest)}
        return self._index

    def __getitem__(self, group):
        return self._lookup()[group]

    def __iter__(self):
        return iter(self._lookup())

    def __len__(self):
        return len(self._lookup())

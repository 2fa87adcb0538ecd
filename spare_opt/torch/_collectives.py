"""The collectives of :class:`~spare_opt.torch.SpareGroup` between the live groups, and within a DP group.

A mixin: :class:`Collectives` runs collectives on the process group that
``SpareGroup._rebuild`` built (``_pg``) and waits for each or the abort flag (the
membership's ``aborted``, ``fail_epoch``, ``_lock`` and ``_waiter``), so a survivor never
waits out the backend's timeout.
"""

import pickle
import threading
import time

import torch
import torch.distributed as dist

from ._errors import GroupTimeout
from ._membership import _short


class Collectives:
    """The collectives of a :class:`~spare_opt.torch.SpareGroup`: all-reduce, broadcasts, the wait for one or an abort."""

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

    def all_reduce_in_group(self, tensor, op="sum"):
        """All-reduce ``tensor`` (``op``: ``"sum"`` or ``"max"``) over this DP group's own ranks (``group_process_group``).

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
            reduce_op = dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM
            work = dist.all_reduce(tensor, op=reduce_op, group=self.group_process_group, async_op=True)

            def lost():
                self._check_group_lost()
                if time.monotonic() > deadline:
                    self._lose_group(f"a collective of group {self.group}'s ranks outlasted {self.timeout_seconds:g} s")
                    raise GroupTimeout(f"a collective between group {self.group}'s ranks outlasted "
                                       f"{self.timeout_seconds:g} s (SpareGroup(timeout=...))", [self.group])
                return False

            self._await_work(work, lost)
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
        try:
            work = start()
        except RuntimeError as exc:
            self.fail_epoch(f"collective raised: {_short(exc)}")
            return False
        completed = self._await_work(work, self.aborted)
        if self._fatal is not None:
            raise self._fatal
        if not completed:
            return False
        try:
            work.wait()
        except RuntimeError as exc:
            self.fail_epoch(f"collective raised: {_short(exc)}")
            return False
        return True

    def _await_work(self, work, stop):
        """Wait until ``work``'s future completes (``True``) or ``stop()`` is true (``False``), whichever comes first.

        Woken by the future's completion (a done-callback) and by an abort (the
        membership's ``_abort`` sets the registered waiter), and checked again every
        heartbeat interval: an abort just before the waiter was registered, or one of an
        older epoch (it wakes without aborting this one), would otherwise leave the
        collective waiting out the gloo timeout for members that already left it.

        Notes
        -----
        The completion is read from the future (``future.done()``), never from
        ``work.is_completed()``: gloo's work completes its future (and runs the
        done-callbacks) *before* it sets its own completed flag, so a loop woken by the
        callback could still read ``is_completed() == False``, clear the event and sleep
        a whole interval; under torchrun every fault-free step took one heartbeat
        interval so (57 ms for a 7 ms step at 50 ms beats).  The future's flag is set
        before its callbacks run, and the event is cleared before the flag is read, so
        no completion is missed.  ``work.wait()`` afterwards returns at once (or raises
        the collective's error).
        """
        future = work.get_future()
        wake = threading.Event()
        with self._lock:
            self._waiter = wake
        try:
            future.add_done_callback(lambda _: wake.set())
            while True:
                wake.clear()
                if future.done():
                    return True
                if stop():
                    return False
                wake.wait(self.interval)
        finally:
            with self._lock:
                self._waiter = None

    def _drop_process_group(self):
        pg, self._pg = self._pg, None
        if pg is not None:
            try:
                pg.shutdown()  # what destroy_process_group does to each backend
            except RuntimeError:
                pass

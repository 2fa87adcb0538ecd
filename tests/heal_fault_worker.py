"""``examples/launch/train.py`` with one fault placed for ``tests/test_launchers.py``: a member held in the heal, or a group held while the job starts.

The group named by ``SPARE_TEST_HOLD_HEAL``, in its first start, stops once the process
group of an epoch that admits a repaired group is built, just before the state is sent
to it (the heal), writes ``held/{g}`` (its pid) to the store and sleeps (at most 60 s);
the test SIGKILLs it there, while the other members are sending the state.

The group named by ``SPARE_TEST_HOLD_START`` (``g:point``), in its first start, stops
while the job starts, before every group registered: at ``join`` (``join_job`` counted
its start, no ``SpareGroup`` yet) or at ``register`` (its heartbeat key written, the
registration not counted), writes ``held/{g}`` and sleeps the same way.

The group named by ``SPARE_TEST_DIE_AT_BOUNDARY``, in its first start, SIGKILLs itself
as it enters the agreement of a step boundary that admits a repaired group (one asked to
rejoin), not one that only agrees on a failure noticed between two steps.

With ``SPARE_TEST_STALL=g``, group ``g``'s heartbeat thread, in its first start, stalls
at its 10th beat for ``heartbeat_timeout + 1`` seconds (its training thread goes on): its
watchers find it stale and post a suspicion.  With ``SPARE_TEST_SLOW_AGREEMENT=g``, every
group but ``g``, in its first start, enters its first agreement 2 s late (its heartbeat
beating on), so ``g`` withdraws the suspicion and answers before they could agree on it.
"""

import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "launch_train", Path(__file__).resolve().parent.parent / "examples" / "launch" / "train.py")
train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(train)


def _hold_here(store, group):
    store.set(f"held/{group}", str(os.getpid()))
    time.sleep(60.0)


def _held_at_start(group, point):
    """Whether ``group``, in its first start, holds at ``point`` (``SPARE_TEST_HOLD_START``)."""
    wanted = os.environ.get("SPARE_TEST_HOLD_START")
    return (wanted == f"{group}:{point}" and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
            and os.environ.get("LOCAL_RANK", "0") == "0")


class HeldFaultWorker(train.SpareGroup):
    """A :class:`SpareGroup` whose group ``SPARE_TEST_HOLD_HEAL`` holds at its first heal, or ``SPARE_TEST_HOLD_START`` at its start."""

    def __init__(self, layout, group, store, **kwargs):
        if _held_at_start(group, "join"):
            _hold_here(store, group)
        super().__init__(layout, group, store, **kwargs)
        if self.group == int(os.environ.get("SPARE_TEST_HOLD_HEAL", -1)) and not self.joined_late:
            self.on_event = self._hold

    def _await_registration(self):
        if _held_at_start(self.group, "register"):
            _hold_here(self.store, self.group)
        super()._await_registration()

    _slowed = False

    def recover(self, record, *args, **kwargs):
        first_start = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
        # Only the boundary that admits a repaired group: on a busy machine the survivors may
        # notice the first failure between two steps, and a death then would be a wipe-out.
        if first_start and record.get("phase") == "boundary" and self.rejoin_pending() and \
                self.group == int(os.environ.get("SPARE_TEST_DIE_AT_BOUNDARY", -1)):
            os.kill(os.getpid(), signal.SIGKILL)
        slow = os.environ.get("SPARE_TEST_SLOW_AGREEMENT")
        if first_start and slow is not None and self.group != int(slow) and not self._slowed:
            self._slowed = True
            time.sleep(2.0)
        return super().recover(record, *args, **kwargs)

    def _beat(self, state):
        if self.group == int(os.environ.get("SPARE_TEST_STALL", -1)) and state.count == 10 and \
                os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
            time.sleep(self.heartbeat_timeout + 1.0)
        return super()._beat(state)

    def _hold(self, name, extra):
        if name == "rebuild" and self.joiners and self.group not in self.joiners:
            self.store.set(f"held/{self.group}", str(os.getpid()))
            time.sleep(60.0)


train.SpareGroup = HeldFaultWorker

if __name__ == "__main__":
    train.run_worker(train.train, train.parse(sys.argv[1:]))

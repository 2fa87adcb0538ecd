"""The wait for a collective ends with the collective, not at the next heartbeat.

Two real ``SpareGroup`` members (threads of this process, a real ``TCPStore`` and gloo
process group) run 300 all-reduces with a heartbeat interval of an hour.  The wait
used to read ``work.is_completed()`` after the future's done-callback woke it; gloo
completes the future before it sets the work's own flag, so the woken wait could see
the work unfinished and sleep a whole heartbeat interval (under torchrun every step
took one interval): here it would sleep an hour, and the bounded join below fail.
"""

import datetime
import threading

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import spare_opt  # noqa: E402
from spare_opt.torch import SpareGroup  # noqa: E402

ROUNDS = 300


def _member(port, group, results):
    store = dist.TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=60))
    member = SpareGroup(spare_opt.consecutive(2, 2), group, store, heartbeat_interval=3600.0,
                        heartbeat_timeout=7200.0, timeout=60.0)
    try:
        total = torch.zeros(4, dtype=torch.float64)
        for i in range(ROUNDS):
            tensor = torch.full((4,), float(group + i), dtype=torch.float64)
            assert member.all_reduce(tensor)
            total += tensor
        results[group] = total
    finally:
        member.close()


def test_a_collective_is_not_waited_for_until_the_next_heartbeat():
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    results = {}
    threads = [threading.Thread(target=_member, args=(server.port, g, results), daemon=True) for g in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        # An hour per missed completion; 300 all-reduces of 4 numbers take well under a second.
        thread.join(120.0)
    assert not any(thread.is_alive() for thread in threads), "a wait outlived its collective"
    expected = sum(2 * i + 1 for i in range(ROUNDS))
    assert set(results) == {0, 1}
    assert all(torch.equal(r, torch.full((4,), float(expected), dtype=torch.float64)) for r in results.values())


class _Stuck(SpareGroup):
    """Group 0 proposes nothing once it joined an agreement (as if it died right after joining); 1 and 2 join late."""

    def _propose_when_ready(self, epoch, previous, deadline=None):
        if self.group == 0:
            threading.Event().wait(600.0)  # the test's bound ends the process long before
        return super()._propose_when_ready(epoch, previous, deadline)

    def recover(self, record, _rebuild_first=True):
        if self.group != 0:
            threading.Event().wait(0.5)  # group 0 joins first: it is the one that proposes
        return super().recover(record, _rebuild_first)


def test_a_death_notice_reaches_every_member_and_its_waiters_at_once(tmp_path):
    """Heartbeats an hour apart, a heartbeat timeout of two hours and a wait timeout of one: only the alarms can move this job.

    A member's collective fails (``fail_epoch``): its abort flag wakes every member's alarm
    thread, and every member agrees.  Group 0 joins first and never proposes; then its
    death notice is posted: the others' alarm threads wake the waiting members, which
    take the proposal over; the rebuild fails on the dead group and the next agreement
    declares it failed.  With a look at the next beat only, each of these steps would
    take an hour.
    """
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    groups, outcome = {}, {}

    def run(g):
        store = dist.TCPStore("127.0.0.1", server.port, is_master=False, wait_for_workers=False,
                              timeout=datetime.timedelta(seconds=60))
        member = _Stuck(spare_opt.consecutive(3, 2), g, store, heartbeat_interval=3600.0,
                        heartbeat_timeout=7200.0, timeout=3600.0)
        groups[g] = member
        while not member.aborted():
            threading.Event().wait(0.01)
        member.recover({"step": 0, "phase": "step"})
        outcome[g] = sorted(member.failed)
        member.close()

    threads = [threading.Thread(target=run, args=(g,), daemon=True) for g in range(3)]
    for thread in threads:
        thread.start()
    deadline = threading.Event()
    while len(groups) < 3 or not all(getattr(m, "_pg_ready", False) for m in groups.values()):
        assert not deadline.wait(0.05) and threads[1].is_alive(), "the groups did not start"
    groups[1].fail_epoch("a collective raised (the test)")
    while not server.check(["joins/1"]) or int(server.add("joins/1", 0)) < 3:
        assert threads[1].is_alive() and threads[2].is_alive()
        deadline.wait(0.05)
    from spare_opt.torch import post_death

    post_death(server, 0, "killed (the test)")
    for thread in threads[1:]:
        thread.join(120.0)
    assert not threads[1].is_alive() and not threads[2].is_alive(), "a member waited for its next beat"
    assert outcome == {1: [0], 2: [0]}
    sources = [extra["source"] for name, _, extra in groups[2].timeline if name == "detect"]
    assert sources and sources[0] == "abort flag", sources

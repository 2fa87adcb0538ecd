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

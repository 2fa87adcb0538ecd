"""SpareGroup's membership and agreement roles driven on a TCPStore alone: no process group, no SpareGroup.

``_Roles`` holds the state that ``SpareGroup.__init__`` sets and runs the roles' own
code: the registration and the first epoch, the heartbeat (``_beat``, driven here as the
control-plane benchmark drives it), the agreement of an epoch, the admission of a
repaired group and the heal verdict.
"""

import datetime
import threading
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import spare_opt  # noqa: E402
from spare_opt.torch import SpareGroup, post_death  # noqa: E402
from spare_opt.torch._agreement import Agreement  # noqa: E402
from spare_opt.torch._group_mesh import GroupMesh  # noqa: E402
from spare_opt.torch._membership import Membership, _Beats  # noqa: E402
from spare_opt.torch._plans import PlanBook  # noqa: E402

GROUPS = 4


class _Roles(Membership, Agreement):
    """The membership and the agreement over the state SpareGroup keeps, with no process group and no heartbeat thread."""

    _enter = SpareGroup._enter  # the state of an epoch, as the face keeps it
    _event = SpareGroup._event
    on_event = None

    def __init__(self, port, group, *, heartbeat_timeout, watch=8, rejoin=False, prefix=None):
        self.book = PlanBook(spare_opt.consecutive(GROUPS, 2), 1)
        self.store = self._hb_store = dist.TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False,
                                                    timeout=datetime.timedelta(seconds=30))
        if prefix is not None:  # the keys of one generation, as join_job gives them
            self.store = self._hb_store = dist.PrefixStore(prefix, self.store)
        self.group, self.groups, self.watch = group, GROUPS, watch
        self.group_rank, self.group_world_size, self.leader = 0, 1, True
        self.group_mesh = GroupMesh(None, None)  # a group of one rank, no mesh
        self.interval, self.heartbeat_timeout, self.timeout_seconds = 0.01, heartbeat_timeout, 20.0
        self.timeline, self.joiners, self.records = [], [], {}
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._aborted_epoch, self._waiter, self._group_lost = -1, None, None
        self._fatal, self._fatal_polled = None, 0.0
        self._last_seen, self._sibling_seen = {}, {}
        self._token = f"token-{group}-{rejoin}"
        self._register(rejoin)
        self._first_epoch(rejoin)

    def close(self):
        self._stop.set()


def _in_threads(calls, timeout=60.0):
    """Run each ``call`` in a thread of its own; their results in order (an exception is re-raised)."""
    results = [None] * len(calls)

    def run(i):
        try:
            results[i] = calls[i]()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a role's wait outlasted the test's bound"
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


@pytest.fixture
def store():
    PlanBook(spare_opt.consecutive(GROUPS, 2), 1).plan(frozenset())  # the planner's kernels, once, before the threads
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=30))
    yield master


def test_the_heartbeat_finds_a_silent_group_and_its_notice_reaches_the_whole_ring(store):
    # watch=1: each group reads the next one's heartbeat only, so group 2 alone sees 3 stop.
    roles = _in_threads([lambda g=g: _Roles(store.port, g, heartbeat_timeout=1.0, watch=1) for g in range(GROUPS)])
    assert [r.epoch for r in roles] == [0] * GROUPS and all(r.members == list(range(GROUPS)) for r in roles)
    beats = {r.group: _Beats() for r in roles}
    wakes = {r.group: threading.Event() for r in roles}
    for r in roles:
        r._waiter = wakes[r.group]

    def beat(groups):
        for r in roles:
            if r.group in groups:
                assert r._beat(beats[r.group])  # False: the store failed
        time.sleep(0.02)

    quiet = time.monotonic() + 1.5  # longer than heartbeat_timeout: every group beats, nobody is stale
    while time.monotonic() < quiet:
        beat(range(GROUPS))
    assert not any(r.aborted() for r in roles) and not store.check(["dead/3"])
    deadline = time.monotonic() + 20.0  # group 3 stops beating
    while not all(roles[g].aborted() for g in (0, 1, 2)) and time.monotonic() < deadline:
        beat([0, 1, 2])
    assert all(roles[g].aborted() for g in (0, 1, 2)) and not roles[3].aborted()
    assert all(wakes[g].is_set() for g in (0, 1, 2))  # a collective waiting on it wakes
    assert store.get("dead/3").decode() == "stale heartbeat (seen by group 2)"
    sources = {g: [extra["source"] for name, _, extra in roles[g].timeline if name == "detect"] for g in (0, 1, 2)}
    assert sources[2] == ["stale heartbeat"]
    assert all(sources[g] in (["abort flag"], ["death notice"]) for g in (0, 1)), sources
    assert store.get("abort/0").decode() in {"0", "1", "2"}


def test_the_agreement_admits_a_repaired_group_and_settles_its_heal(store):
    roles = _in_threads([lambda g=g: _Roles(store.port, g, heartbeat_timeout=5.0) for g in range(GROUPS)])
    post_death(store, 3, "killed")  # what a launcher does when group 3's process dies
    survivors = roles[:3]
    agreed = _in_threads([lambda r=r: r._agree(1, {"step": 7, "phase": "boundary"}) for r in survivors])
    assert [a["failed"] for a in agreed] == [[3]] * 3 and [a["joiners"] for a in agreed] == [[]] * 3
    assert all(a["records"] == {0: {"step": 7, "phase": "boundary"}, 1: {"step": 7, "phase": "boundary"},
                                2: {"step": 7, "phase": "boundary"}} for a in agreed)
    assert all(r.members == [0, 1, 2] and r.epoch == 1 for r in survivors)

    # Group 3 comes back: it asks to rejoin, and the members admit it at their next boundary.
    repaired = []
    thread = threading.Thread(target=lambda: repaired.append(_Roles(store.port, 3, heartbeat_timeout=5.0,
                                                                    rejoin=True)), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20.0
    while int(store.add("pending_rejoins", 0)) < 1:
        assert time.monotonic() < deadline, "the repaired group never asked to rejoin"
        time.sleep(0.01)
    agreed = _in_threads([lambda r=r: r._agree(2, {"step": 9, "phase": "boundary"}) for r in survivors])
    thread.join(30.0)
    assert repaired, "the repaired group was not admitted"
    rejoined = repaired[0]
    assert [a["failed"] for a in agreed] == [[]] * 3 and [a["joiners"] for a in agreed] == [[3]] * 3
    assert rejoined.epoch == 2 and rejoined.members == [0, 1, 2, 3] and rejoined.joiners == [3]
    assert not store.check(["rejoin/3"]) and not store.check(["dead/3"])  # the request and the notice are gone
    assert int(store.add("pending_rejoins", 0)) == 0

    # The heal: every member says the state reached it, and every one reads the same ``go``.
    everyone = survivors + [rejoined]
    assert _in_threads([lambda r=r: r._settle_heal(True) for r in everyone]) == [True] * GROUPS
    assert store.get("heal/2").decode() == "go" and not any(r._heal_due for r in everyone)


def test_a_death_notice_makes_the_agreement_prompt_whichever_groups_started(store):
    """The first member to join an epoch proposes at once when the missing group has a death notice.

    Every group starts through ``join_job``, which counts its starts in the same store; it
    used to count them under ``joins/{g}``, the agreement's own counter of epoch ``g``:
    in epoch 1 (after group 1 was launched) no member was the first, and every member
    waited out the heartbeat timeout (here 30 s) before it proposed, notice or not.
    """
    from spare_opt.torch import launchers

    generation = "gen/0"
    env = {"SPARE_STORE": f"127.0.0.1:{store.port}", "SPARE_STORE_TIMEOUT": "10"}
    for g in range(GROUPS):  # what each group's first start writes (here, in one process)
        launchers.join_job({**env, "SPARE_GROUP": str(g)})
    launchers._presence.stop.set()
    roles = _in_threads([lambda g=g: _Roles(store.port, g, heartbeat_timeout=30.0, prefix=generation)
                         for g in range(GROUPS)])
    post_death(dist.PrefixStore(generation, store), 1, "killed")  # as the launcher's worker does for group 1
    survivors = [roles[0], roles[2], roles[3]]
    started = time.monotonic()
    agreed = _in_threads([lambda r=r: r._agree(1, {"step": 4, "phase": "step"}) for r in survivors])
    elapsed = time.monotonic() - started
    assert [a["failed"] for a in agreed] == [[1]] * 3
    assert elapsed < 10.0, f"the agreement waited {elapsed:.1f} s: nobody proposed before the heartbeat timeout"


def test_a_group_dead_before_its_first_beat_stops_no_heartbeat(store):
    """A group that died after its death notice but before its first heartbeat leaves no ``hb/{g}``.

    The registration lets the others start (the notice stands for it), and their
    heartbeats read the heartbeats they watch: a read of a key that does not exist waits
    for it on the store's side, up to the store's timeout (here 30 s).  Every beat froze
    then, so the survivors' own heartbeats stopped and they took each other for dead (a
    wipe-out under a job of pipeline groups).  A missing key is a heartbeat that does not
    move; the notice makes the survivors agree at once.
    """
    post_death(store, 3, "killed")  # group 3's watcher, before group 3 wrote its heartbeat
    roles = _in_threads([lambda g=g: _Roles(store.port, g, heartbeat_timeout=5.0) for g in range(3)])
    assert not store.check(["hb/3"])
    beats = {r.group: _Beats() for r in roles}
    deadline = time.monotonic() + 10.0
    while not all(r.aborted() for r in roles):
        assert time.monotonic() < deadline, "the notice of the group that never beat was not acted on"
        for r in roles:
            started = time.monotonic()
            assert r._beat(beats[r.group]), "the heartbeat failed"
            assert time.monotonic() - started < 2.0, "a heartbeat waited for a key that is never written"
        time.sleep(0.02)
    agreed = _in_threads([lambda r=r: r._agree(1, {"step": 0, "phase": "boundary"}) for r in roles])
    assert [a["failed"] for a in agreed] == [[3]] * 3

"""Death notices the instant a worker dies (run_worker's watcher), hung groups evicted, the survivors' lines.

Real processes throughout: workers under ``run_worker`` against a real ``TCPStore``,
real SIGKILLs and SIGTERMs; the jobs run ``examples/launch/train.py`` (or a test worker
built on it) under one ``torchrun`` per DP group against ``python -m
spare_opt.torch.store``, and every survivor's final parameters are checked against the
fault-free run.  No timing is asserted but bounds that a death without its notice could
not meet (the heartbeat timeout is set to a minute where the fast path is checked).
"""

import datetime
import os
import re
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from conftest import REPO  # noqa: E402
from test_launchers import TIMEOUT, assert_exact, finish, launched, logs, read, wait_for, worker_pid  # noqa: E402
from spare_opt.torch import recovery_phases  # noqa: E402

_WORKER = """
import os, signal, sys, time
from spare_opt.torch.launchers import join_job, run_worker

def main(mode):
    job = join_job()
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"joined {os.getpid()}", flush=True)
    if mode in ("sleep", "ignore-term"):
        time.sleep(120)
    if mode == "error":
        raise ValueError("an error of the worker's own")
    if mode == "crash":
        os.abort()

run_worker(main, sys.argv[1])
"""


def _worker(port, group, mode, prefix=(), extra_env=None):
    env = {**os.environ, "SPARE_STORE": f"127.0.0.1:{port}", "SPARE_GROUP": str(group), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **(extra_env or {})}
    process = subprocess.Popen([*prefix, sys.executable, "-c", _WORKER, mode], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    line = process.stdout.readline()
    return process, line


def _notice(server, group, generation=0):
    key = f"gen/{generation}/dead/{group}"
    return server.get(key).decode() if server.check([key]) else None


def _wait_for_notice(server, group, seconds=60.0):
    deadline = time.monotonic() + seconds
    while _notice(server, group) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return _notice(server, group)


def test_the_watcher_posts_a_death_at_once_and_nothing_for_an_exit_of_the_workers_own():
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=60))
    # Started together (each start imports torch): what each group's worker does.
    modes = {0: "sleep", 1: "crash", 2: "ignore-term", 3: "finish", 4: "sleep", 5: "error", 6: "sleep"}
    started = {g: _worker(server.port, g, mode, extra_env={"SPARE_DEATH_WATCHER": "0"} if g == 6 else None)
               for g, mode in modes.items()}
    for g, (process, line) in started.items():
        assert line.startswith("joined"), (g, line, process.communicate(timeout=TIMEOUT))
    workers = {g: process for g, (process, _) in started.items()}
    # A second process as group 4 while the first lives: refused (77), nothing posted.
    duplicate, _ = _worker(server.port, 4, "finish")
    # SIGKILL: nothing runs in the worker; its watcher posts the group's notice.
    os.kill(workers[0].pid, signal.SIGKILL)
    # SIGTERM to the whole process group (torchrun stops a group's other ranks so): the watcher
    # outlives it, and posts when the worker (which ignores it here) is SIGKILLed.
    os.killpg(workers[2].pid, signal.SIGTERM)
    os.kill(workers[6].pid, signal.SIGKILL)  # no watcher (SPARE_DEATH_WATCHER=0): no notice
    assert workers[0].wait(TIMEOUT) == -signal.SIGKILL  # the launcher sees the worker's own end
    notice = _wait_for_notice(server, 0)
    assert notice == f"rank 0 died (process {workers[0].pid}, seen by its watcher)", notice
    # A crash (SIGABRT) likewise.
    assert workers[1].wait(TIMEOUT) == -signal.SIGABRT
    assert "seen by its watcher" in (_wait_for_notice(server, 1) or ""), _notice(server, 1)
    assert workers[2].poll() is None
    os.kill(workers[2].pid, signal.SIGKILL)
    workers[2].wait(TIMEOUT)
    assert "seen by its watcher" in (_wait_for_notice(server, 2) or ""), _notice(server, 2)
    # The worker's own exits: a finished worker and a refused duplicate post nothing; an error
    # posts the worker's own notice (run_worker), not the watcher's.
    assert workers[3].wait(TIMEOUT) == 0
    _, error = duplicate.communicate(timeout=TIMEOUT)
    assert duplicate.returncode == 77 and "already running" in error, error
    _, error = workers[5].communicate(timeout=TIMEOUT)
    assert workers[5].returncode == 1 and "an error of the worker's own" in error
    workers[6].wait(TIMEOUT)
    time.sleep(1.0)  # a watcher that wrongly posted would have done so by now (it posts in milliseconds)
    assert _notice(server, 3) is None and _notice(server, 4) is None and _notice(server, 6) is None
    assert _notice(server, 5) == "rank 0 exited with an error"
    workers[4].kill()
    workers[4].wait(TIMEOUT)


def _unshare():
    try:
        done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.mark.skipif(not _unshare(), reason="needs unshare --pid (a PID namespace, as a container has)")
def test_a_worker_that_is_its_containers_pid_1_keeps_its_watcher_as_the_parent():
    """As pid 1 (``exec python train.py`` in a container) the kernel would kill a child watcher with the worker."""
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=60))
    prefix = ["unshare", "--pid", "--fork", "--mount-proc"]
    started = {g: _worker(server.port, g, mode, prefix) for g, mode in {0: "sleep", 1: "sleep", 2: "finish"}.items()}
    for g, (process, line) in started.items():
        assert line.startswith("joined"), (g, line, process.communicate(timeout=TIMEOUT))
    workers = {g: process for g, (process, _) in started.items()}
    watcher, worker = _inside(workers[0].pid)
    os.kill(worker, signal.SIGKILL)
    assert workers[0].wait(TIMEOUT) == 128 + signal.SIGKILL  # the container's exit code, as without the watcher
    assert "signal 9, seen by its watcher" in (_wait_for_notice(server, 0) or ""), _notice(server, 0)
    # SIGTERM to the container's pid 1 reaches the worker, which posts its own notice and exits 143.
    watcher, worker = _inside(workers[1].pid)
    os.kill(watcher, signal.SIGTERM)
    assert workers[1].wait(TIMEOUT) == 128 + signal.SIGTERM
    assert _notice(server, 1) == "rank 0 stopped by signal 15"
    # A finished worker: exit 0, nothing posted.
    assert workers[2].wait(TIMEOUT) == 0 and _notice(server, 2) is None


def _parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rpartition(")")[2].split()[1])
    except OSError:
        return None


def _inside(unshare):
    """The namespace's pid 1 (``unshare``'s child: the watcher) and its child (the worker), as seen from here."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            children.setdefault(_parent(int(name)), []).append(int(name))
    watcher = children[unshare][0]
    return watcher, children[watcher][0]


def _lines(out, groups):
    return "".join(open(os.path.join(out, f"torchrun-g{g}.log")).read() for g in groups)


@pytest.mark.slow
def test_a_killed_one_rank_group_is_noticed_at_once_under_torchrun(tmp_path):
    """N = 3 groups of one rank, one torchrun each; SIGKILL group 1's worker, heartbeat timeout one minute.

    Nothing in the worker runs after a SIGKILL and torchrun posts nothing: only the
    watcher can tell the survivors, which otherwise wait a minute for the heartbeat.
    """
    out = str(tmp_path)
    args = ["--groups", "3", "--steps", "12", "--step-sleep", "0.05", "--await-repairs", "120",
            "--heartbeat-timeout", "60"]
    with launched(3, args, out, restarts=1) as (port, client, processes):
        wait_for(lambda: int(read(client, "gen/0/progress") or 0) >= 4, "four steps", processes, out)
        victim = worker_pid(client, 0, 1)
        killed = time.time()
        os.kill(victim, signal.SIGKILL)
        codes = finish(processes)
        assert codes == {g: 0 for g in range(3)}, logs(out)
        results = assert_exact(out, args, range(3))
        assert results[1]["rejoined"]
        phases = recovery_phases({g: results[g]["timeline"] for g in (0, 2)}, [(killed, 1)])
        # The agreement did not wait for the dead group's heartbeat to be a minute old.
        assert phases and phases[0]["total"] < 60.0, phases


@pytest.mark.slow
def test_a_group_hung_in_its_loss_function_is_evicted_and_the_others_finish(tmp_path):
    """N = 3; group 1's loss function never returns at step 4 (its heartbeat beats on), ``hang_timeout`` 3 s.

    Its heartbeat thread posts the notice (``hung: ...``) and exits 76; the survivors
    agree without it and finish exact; torchrun restarts it and it rejoins.
    """
    out = str(tmp_path)
    args = ["--groups", "3", "--steps", "12", "--step-sleep", "0.05", "--await-repairs", "120",
            "--heartbeat-timeout", "60"]
    script = str(REPO / "tests" / "hang_worker.py")
    with launched(3, args, out, restarts=1, script=script,
                  extra_env={"SPARE_TEST_HANG": "1:4", "SPARE_TEST_HANG_TIMEOUT": "3"}) as (port, client, processes):
        codes = finish(processes)
        assert codes == {g: 0 for g in range(3)}, logs(out)
        results = assert_exact(out, args, range(3))
        assert results[1]["rejoined"] and all(r["members"] == [0, 1, 2] for r in results.values())
        hung = _lines(out, [1])
        assert re.search(r"group 1: hung: rank 0's micro-batch 0 of shard type 1 at step 4 ran over "
                         r"hang_timeout=3 s.*exiting for the launcher to restart this group", hung), logs(out)
        assert re.search(r"group 0: step 4 recovered in epoch \d+: failed groups \[1\], 2 of 3 live", _lines(out, [0]))
        assert any(name == "agree" and extra.get("failed") == [1] for name, _, extra in results[0]["timeline"])


@pytest.mark.slow
def test_a_failure_at_a_step_boundary_gets_its_recovery_line(tmp_path):
    """N = 4, r = 2: group 1 SIGKILLed and restarted; group 2 dies as it enters the boundary agreement that admits 1.

    Every failure the survivors handle gets its line: the step recovered without 1, the
    boundary agreed without 2 (it used to print nothing); both rejoin and every group
    finishes exact.
    """
    out = str(tmp_path)
    args = ["--steps", "16", "--step-sleep", "0.05", "--await-repairs", "120"]
    script = str(REPO / "tests" / "heal_fault_worker.py")
    with launched(4, args, out, restarts=1, script=script, extra_env={"SPARE_TEST_DIE_AT_BOUNDARY": "2"}) as \
            (port, client, processes):
        wait_for(lambda: int(read(client, "gen/0/progress") or 0) >= 4, "four steps", processes, out)
        os.kill(worker_pid(client, 0, 1), signal.SIGKILL)
        codes = finish(processes)
        assert codes == {g: 0 for g in range(4)}, logs(out)
        finished = [g for g in range(4) if os.path.exists(os.path.join(out, f"g{g}.pt"))]
        assert 0 in finished and 3 in finished and 1 in finished, logs(out)
        assert_exact(out, args, finished)
        survivor = _lines(out, [0])
        # Group 1's death noticed in a step, or between two steps on a busy machine: a line either way.
        assert re.search(r"group 0: (step \d+ recovered|boundary of step \d+ agreed) in epoch \d+: failed groups "
                         r"\[1\], 3 of 4 live", survivor), logs(out)
        assert re.search(r"group 0: boundary of step \d+ agreed in epoch \d+: failed groups \[2\], 3 of 4 live, "
                         r"joiners \[1\]", survivor), logs(out)


@pytest.mark.slow
def test_a_suspicion_withdrawn_says_that_no_group_failed(tmp_path):
    """N = 3: group 2's heartbeat thread stalls for 3 s (heartbeat timeout 2 s) while it trains; the others agree 2 s late.

    Its watchers post the suspicion and the others abort; group 2's heartbeat resumes,
    withdraws the suspicion and answers the agreement before the others join it: nobody
    fails, and the line says so (it used to say ``failed groups none``).
    """
    out = str(tmp_path)
    args = ["--groups", "3", "--steps", "80", "--step-sleep", "0.05"]
    script = str(REPO / "tests" / "heal_fault_worker.py")
    with launched(3, args, out, restarts=0, script=script,
                  extra_env={"SPARE_TEST_SLOW_AGREEMENT": "2", "SPARE_TEST_STALL": "2"}) as (port, client, processes):
        codes = finish(processes)
        assert codes == {g: 0 for g in range(3)}, logs(out)
        results = assert_exact(out, args, range(3))
        assert all(r["members"] == [0, 1, 2] and not r["rejoined"] for r in results.values())
        assert re.search(r"group 0: step \d+ recovered in epoch 1: no group failed \(every member answered: a stall "
                         r"taken for a failure, withdrawn\), 3 of 3 live", _lines(out, [0])), logs(out)
        assert "failed groups none" not in logs(out)


def test_a_watcher_that_could_not_connect_at_the_join_connects_to_post():
    """The store's one thread may be slow to accept a connection (each costs it a reverse-DNS lookup, seconds where the
    resolver drops queries, while many workers start at once): a watcher that could not connect when its worker
    joined connects again when the worker dies, and posts."""
    import socket

    from spare_opt.torch import _watcher

    with socket.socket() as probe:  # a port nothing listens on yet
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    target = _watcher._connect(f"127.0.0.1:{port}", 0, 3, 0, None, timeout=1.0)
    assert target[1] is None  # nobody listened: no connection, the address kept
    server = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=30))
    _watcher._post(target, "rank 0 died (seen by its watcher)")
    assert server.get("gen/0/dead/3").decode() == "rank 0 died (seen by its watcher)"
    assert int(server.get("gen/0/deaths")) == 1

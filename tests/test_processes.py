"""No test leaves a process behind: the check of ``tests/conftest.py`` catches one, and whole trees are killed.

A torchrun-based test used to SIGKILL torchrun alone: its workers, in sessions of their
own, ran on after pytest exited.  ``conftest.py`` marks every process of the session
(``SPARE_TEST_SESSION`` in its environment) and fails a test after which one runs on
outside pytest's own tree; the helper that kills whole trees is
``spare_opt.torch._processes.kill_tree``.
"""

import os
import re
import subprocess
import sys
import time

import pytest

from conftest import REPO, _running, descendants, kill_tree


@pytest.mark.skipif(os.environ.get("SPARE_TEST_LEAK") != "1", reason="run by the test below, in a pytest of its own")
def test_a_test_that_leaks_an_orphan():
    # sh starts sleep in the background and exits: sleep is reparented away from pytest, as a torchrun worker
    # is when its torchrun alone is killed.
    pid = subprocess.run(["sh", "-c", "sleep 300 > /dev/null 2>&1 & echo $!"], capture_output=True, text=True,
                         check=True).stdout.strip()
    print(f"leaked {pid}", flush=True)


def test_the_session_check_fails_a_test_that_leaves_a_process_and_kills_it():
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                          "tests/test_processes.py::test_a_test_that_leaks_an_orphan"], capture_output=True,
                         text=True, timeout=300, cwd=REPO,
                         env={**os.environ, "SPARE_TEST_LEAK": "1", "SPARE_TEST_GRACE_SECONDS": "0.5"})
    pid = int(re.search(r"leaked (\d+)", run.stdout).group(1))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "the test left 1 process(es) running, outside pytest's tree (SIGKILLed now)" in run.stdout, run.stdout
    assert f"{pid} (sleep 300)" in run.stdout
    deadline = time.monotonic() + 60
    while _running(pid) and time.monotonic() < deadline:  # a bound, not a speed: SIGKILL is immediate
        time.sleep(0.1)
    assert not _running(pid)


def test_kill_tree_kills_the_grandchildren_a_process_group_signal_misses():
    """A child that starts a grandchild in a session of its own (as torchrun starts its workers)."""
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                               "child = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
                               "print(child.pid, flush=True)\ntime.sleep(300)"], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(parent.stdout.readline())
        assert grandchild in descendants(parent.pid)
        assert {parent.pid, grandchild} <= kill_tree(parent.pid)
        parent.wait(60)
        deadline = time.monotonic() + 60
        while _running(grandchild) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(grandchild)
    finally:
        parent.kill()
        parent.wait()


def test_a_fork_servers_children_are_checked_though_they_carry_its_command_line():
    """The fork server and the resource tracker live for the session; the processes it forks (a Supervisor's
    ranks) carry its command line and are checked like any other."""
    import multiprocessing

    from conftest import _of_this_session

    child = multiprocessing.get_context("forkserver").Process(target=time.sleep, args=(60,))
    child.start()
    try:
        server = [pid for pid, parent in _parents_of(descendants(os.getpid())) if parent == os.getpid()
              and b"multiprocessing.forkserver" in _command(pid)]
        assert server and b"multiprocessing.forkserver" in _command(child.pid)
        assert child.pid in _of_this_session({child.pid}) and not _of_this_session(set(server))
    finally:
        child.kill()
        child.join()


def _command(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        return cmdline.read()


def _parents_of(pids):
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                yield pid, int(stat.read().rpartition(b")")[2].split()[1])
        except OSError:  # it ended meanwhile
            continue

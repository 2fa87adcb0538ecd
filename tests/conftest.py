"""Shared pytest configuration: hypothesis profile and the real fault trace (packaged)."""

import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

REPO = Path(__file__).resolve().parent.parent

# The process-tree helpers of spare_opt.torch (/proc only, no torch), loaded from their file: importing them as
# spare_opt.torch._processes would import torch, which the suite runs without too.
_spec = importlib.util.spec_from_file_location("spare_processes", REPO / "spare_opt" / "torch" / "_processes.py")
_processes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_processes)
descendants, kill_tree = _processes.descendants, _processes.kill_tree

# The example training jobs that the torch tests run (examples/training_job.py,
# examples/torchft_job.py) are not part of the package: import them from examples/.  The
# ranks that the Supervisor starts get this sys.path too (spawn and forkserver pass it on).
if str(REPO / "examples") not in sys.path:
    sys.path.append(str(REPO / "examples"))


@pytest.fixture
def real_trace_path():
    """Path of the real InfiniteHBD fault trace: the copy shipped as package data (always there)."""
    from spare_opt.demo import packaged_trace_path

    path = packaged_trace_path()
    assert path.is_file(), f"the packaged real trace is missing: {path}"
    return path


@pytest.fixture
def no_spare_trace(monkeypatch):
    """$SPARE_TRACE unset, so that the demo falls back to the packaged trace."""
    monkeypatch.delenv("SPARE_TRACE", raising=False)


@pytest.fixture(autouse=True)
def _stop_presence_beat():
    """join_job in the test process starts a presence beat for the process's life: stop it with its test, before the
    test's store goes away (else it logs torch's failed-write warning)."""
    yield
    launchers = sys.modules.get("spare_opt.torch.launchers")
    if launchers is not None and getattr(launchers, "_presence", None) is not None:
        launchers._presence.stop.set()
        launchers._presence.join(5)


# ------------------------------------------------------------------ no process left behind
# Every process this session starts carries this variable in its environment (subprocesses, torchrun's workers,
# multiprocessing's children inherit it), so that one left running after its test (a torchrun worker whose
# launcher was SIGKILLed, a data loader worker of a killed rank) is found whoever its parent is by then.
_SESSION_MARK = f"{os.getpid()}-{time.time_ns()}"
os.environ["SPARE_TEST_SESSION"] = _SESSION_MARK
_MARK = f"SPARE_TEST_SESSION={_SESSION_MARK}".encode()
#: Seconds a process of a finished test may take to go (a killed rank's children exit on their own) before it
#: counts as left behind: a bound, not a speed; a process that is still there after it is a leak.
_GRACE_SECONDS = float(os.environ.get("SPARE_TEST_GRACE_SECONDS", "20"))
#: multiprocessing's helpers live for the session and end with it (they read a pipe to this process); they are
#: pytest's own children: the processes a fork server forks carry its command line too, and are not helpers.
_SESSION_HELPERS = (b"multiprocessing.forkserver", b"multiprocessing.resource_tracker")


def _pids():
    try:
        return {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}
    except OSError:  # no /proc: nothing to check
        return set()


def _running(pid):
    """Whether ``pid`` runs (not ended, not a zombie waiting for its parent)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _of_this_session(pids):
    """The pids among ``pids`` that this session started (its mark in their environment), pytest itself left out."""
    found = set()
    for pid in pids - {os.getpid()}:
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if _MARK not in environ.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                command = cmdline.read()
            with open(f"/proc/{pid}/stat", "rb") as stat:
                parent = int(stat.read().rpartition(b")")[2].split()[1])
        except (OSError, IndexError, ValueError):  # it ended meanwhile, or it is not ours to read
            continue
        if not (parent == os.getpid() and any(helper in command for helper in _SESSION_HELPERS)):
            found.add(pid)
    return found


def _describe(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return str(pid)
    return f"{pid} ({command[:160]})"


def _left_behind(pids, grace):
    """Those of ``pids`` still running after ``grace`` seconds (looked at every 0.1 s), SIGKILLed with their trees."""
    deadline = time.monotonic() + grace
    left = {pid for pid in pids if _running(pid)}
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = {pid for pid in left if _running(pid)}
    described = [_describe(pid) for pid in sorted(left)]
    for pid in left:
        kill_tree(pid)
    return described


@pytest.fixture(autouse=True)
def _no_process_left_behind():
    """Fail a test that leaves a process running outside this session's own tree (an orphan of a killed launcher).

    Processes still under pytest (a module fixture's cluster, a pool) are its fixtures' to stop; the session's
    end checks that they were (:func:`pytest_sessionfinish`).
    """
    before = _pids()
    yield
    new = _of_this_session(_pids() - before)
    if not new:
        return
    orphans = new - descendants(os.getpid())
    left = _left_behind(orphans, _GRACE_SECONDS) if orphans else []
    if left:
        pytest.fail(f"the test left {len(left)} process(es) running, outside pytest's tree (SIGKILLed now): "
                    + "; ".join(left), pytrace=False)


def pytest_sessionfinish(session, exitstatus):
    """After the last test: no process this session started may still run (killed and reported if one does)."""
    left = _left_behind(_of_this_session(_pids()), _GRACE_SECONDS)
    if left:
        session.config.get_terminal_writer().line(
            f"error: {len(left)} process(es) of this test session still ran after its last test (SIGKILLed now): "
            + "; ".join(left), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

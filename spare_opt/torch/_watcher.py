"""The death watcher of :func:`~spare_opt.torch.launchers.run_worker`: a death notice the instant a worker process dies.

A worker SIGKILLed, killed by the OOM killer, crashed in a segfault or a CUDA error
leaves no time to post its own group's death notice, and ``torchrun`` has no hook to
post one; without a notice the live groups wait for its heartbeat to go stale
(``heartbeat_timeout``).  So :func:`start` forks a small process beside the worker at
:func:`run_worker`'s start, before any thread or device exists, that does nothing but
wait for the worker's death:

* the worker tells it, through a pipe, where to post (:func:`tell`: the store's
  address, the generation, the group and the rank; :func:`~spare_opt.torch.launchers.join_job`
  does so, again in every new generation) and it opens its store connection at once,
  so that the post needs no new connection (a new one may cost a reverse-DNS lookup);
* the worker announces every exit it chooses (:func:`announce_exit`, right before
  ``run_worker``'s ``os._exit``): a worker that finished, was evicted or refused
  (exit 77), or already posted its own notice (an error, SIGTERM) gets nothing posted;
* a death without that announcement makes it post ``dead/{g}`` at once
  (:func:`~spare_opt.torch.elastic.post_death`) and exit.

It notices the death with ``pidfd_open`` (Linux 5.3; else it looks at its parent's pid
every 20 ms), not by the pipe's end alone: processes the worker forks later (data-loader
workers) hold the pipe's write end too.  It ignores SIGTERM, SIGINT and SIGHUP (torchrun
signals the worker's whole process group when it stops a DP group of several ranks, and
the watcher must outlive the worker to post), closes every file it inherited (it keeps
no log pipe open after the worker), gives up a post after 5 s, and never outlives the
worker by more than that.  The launcher still sees the worker's own pid and exit code.

**When the worker is its PID namespace's init** (pid 1: a container's entry process, as
``exec python train.py`` makes it), the kernel kills every other process of the
namespace the moment it dies, the watcher included.  Then the roles are swapped: the
process that the container started stays as the watcher (and as the namespace's
init: it forwards SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 to the worker and reaps
orphans), the worker runs in a forked child (``PR_SET_PDEATHSIG``: it dies with the
watcher), and the watcher exits with the worker's code, ``128 + n`` after a signal
``n``, so the container's restart policy sees what it saw before.

``SPARE_DEATH_WATCHER=0`` turns it off (nothing is forked; deaths are then noticed by
the heartbeat, or by a launcher that posts).
"""

import ctypes
import datetime
import os
import select
import signal
import sys

#: Seconds the watcher waits for the store when it connects and when it posts.
_STORE_TIMEOUT = 5.0
#: Seconds it waits to connect at the post when it could not connect at the join (the heartbeat
#: timeout notices the death anyway; a later notice still shortens what is left of it).
_POST_CONNECT_TIMEOUT = 30.0
#: Seconds between two looks at the parent's pid where ``pidfd_open`` is missing.
_POLL = 0.02
#: The signals the watcher ignores (as a child) or forwards to the worker (as pid 1).
_PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)

_pipe = None  # the write end of this worker's pipe to its watcher, while one watches


def start(environ=None):
    """Start this worker's watcher (once per process); return whether one watches.

    Called by :func:`~spare_opt.torch.launchers.run_worker` before it runs ``main``.  In
    a process that is not its PID namespace's init, forks the watcher and returns at
    once.  As pid 1, forks the worker instead: the child returns (and runs ``main``),
    the parent stays the watcher and never returns (it exits with the worker's code).
    """
    global _pipe
    environ = os.environ if environ is None else environ
    if _pipe is not None:
        return True
    if (environ.get("SPARE_DEATH_WATCHER") or "1").strip().lower() in ("0", "false", "no") or \
            not hasattr(os, "fork"):
        return False
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    if os.getpid() == 1:
        worker = os.fork()
        if worker == 0:
            os.close(read)
            _die_with_parent()
            _pipe = write
            return True
        os.close(write)
        _watch(read, worker, parent=True)  # never returns
    worker = os.getpid()
    if os.fork() == 0:
        os.close(write)
        _watch(read, worker, parent=False)  # never returns
    os.close(read)
    _pipe = write
    return True


def tell(address, generation, group, rank):
    """Tell the watcher where to post this worker's death: the store ``address``, ``generation``, ``group``, ``rank``."""
    _send(f"join {address} {int(generation)} {int(group)} {int(rank)}")


def announce_exit():
    """Tell the watcher that the worker exits on purpose (it posts nothing); the worker's next step is ``os._exit``."""
    global _pipe
    _send("exit")
    if _pipe is not None:
        try:
            os.close(_pipe)
        except OSError:
            pass
        _pipe = None


def _send(line):
    if _pipe is None:
        return
    try:
        os.write(_pipe, (line + "\n").encode())
    except OSError:  # the watcher is gone: nobody to tell
        pass


def _die_with_parent():
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)``: this process dies when its parent does (best effort)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _quiet(keep):
    """Point stdin, stdout and stderr at ``/dev/null`` and close every other inherited file but ``keep``."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        limit = os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        limit = 1024
    last = 3
    for fd in sorted(keep):
        os.closerange(last, fd)
        last = fd + 1
    os.closerange(last, max(limit, last))


def _watch(read, worker, parent):
    """The watcher's life: read the worker's messages until it dies; post its death unless it announced its exit."""
    code = 1
    try:
        for number in _PASSED_ON:
            signal.signal(number, (lambda received, _frame: _forward(worker, received)) if parent else signal.SIG_IGN)
        _quiet({read})
        code = _loop(read, worker, parent)
    except BaseException:  # noqa: BLE001 - the watcher must never raise into the worker's code paths
        pass
    os._exit(code)


def _forward(worker, number):
    try:
        os.kill(worker, number)
    except OSError:
        pass


def _loop(read, worker, parent):
    """Wait for the worker's death; its exit code as the watcher's own (as pid 1), else 0."""
    pidfd = None
    if not parent:
        try:
            pidfd = os.pidfd_open(worker)
        except (AttributeError, OSError):
            pidfd = None
        if os.getppid() != worker:  # it died before the watcher looked
            return 0
    messages = _Messages(read)
    status = None
    while status is None:
        waiting = [fd for fd in (messages.fd, None if parent else pidfd) if fd is not None]
        timeout = _POLL if parent or pidfd is None else None
        ready = select.select(waiting, [], [], timeout)[0]
        if messages.fd in ready:
            messages.read()
        if parent:
            status = _reaped(worker)
        elif (pidfd is not None and pidfd in ready) or (pidfd is None and os.getppid() != worker):
            status = 0
    # What the worker wrote before it died is in the pipe by now ("exit" right before os._exit).
    while messages.fd is not None and select.select([messages.fd], [], [], 0)[0]:
        messages.read()
    if not messages.exiting and messages.target is not None:
        _post(messages.target, f"rank {messages.target[3]} died (process {worker}"
                               f"{_how(status) if parent else ''}, seen by its watcher)")
    if not parent:
        return 0
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


class _Messages:
    """The worker's lines on the pipe: ``join ADDRESS GENERATION GROUP RANK`` and ``exit``."""

    def __init__(self, fd):
        self.fd = fd
        self.exiting = False
        self.target = None  # (root store, generation store, group, rank, address)
        self._pending = b""

    def read(self):
        data = os.read(self.fd, 4096)
        if not data:  # every write end closed: the worker and whatever it forked are gone
            os.close(self.fd)
            self.fd = None
        self._pending += data
        while b"\n" in self._pending:
            line, self._pending = self._pending.split(b"\n", 1)
            words = line.decode(errors="replace").split()
            if words[:1] == ["exit"]:
                self.exiting = True
            elif words[:1] == ["join"] and len(words) == 5:
                self.target = _connect(words[1], int(words[2]), int(words[3]), int(words[4]), self.target)


def _reaped(worker):
    """As pid 1: reap every ended child (orphans re-parented to it too); the worker's wait status once it ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return 0
        if pid == 0:
            return None
        if pid == worker:
            return status


def _how(status):
    if os.WIFSIGNALED(status):
        return f", signal {os.WTERMSIG(status)}"
    return f", exit code {os.WEXITSTATUS(status)}"


def _connect(address, generation, group, rank, target, timeout=_STORE_TIMEOUT):
    """``(root, generation store, group, rank, address, generation)`` for the posts.

    The connection of an earlier ``join`` to the same address is kept.  When the store
    cannot be reached within ``timeout`` (a store's thread busy with many new
    connections: each costs it a reverse-DNS lookup, seconds where the resolver drops
    queries), the stores are ``None`` and :func:`_post` connects then.
    """
    import torch.distributed as dist

    root = target[0] if target is not None and target[4] == address else None
    if root is None:
        try:
            host, _, port = address.rpartition(":")  # join_job checked it: host:port, [v6]:port
            host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
            root = dist.TCPStore(host, int(port), is_master=False, wait_for_workers=False,
                                 timeout=datetime.timedelta(seconds=timeout))
        except Exception:  # noqa: BLE001 - not now: the post tries again
            return None, None, group, rank, address, generation
    return root, dist.PrefixStore(f"gen/{generation}", root), group, rank, address, generation


def _post(target, reason):
    from ._membership import post_death

    if target[1] is None:  # the connection failed when the worker joined: once more, with a longer wait
        target = _connect(target[4], target[5], target[2], target[3], None, timeout=_POST_CONNECT_TIMEOUT)
        if target[1] is None:
            return
    try:
        post_death(target[1], target[2], reason)
    except Exception:  # noqa: BLE001 - the store is gone: nobody to tell
        pass

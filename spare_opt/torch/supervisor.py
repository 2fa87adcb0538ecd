"""Spawn one process per DP group, host the store, report deaths, restart after a wipe-out.

What ``torchrun``'s agent does for an elastic job, small enough for tests, examples and
benchmarks on one machine: the store lives in the supervising process, so it survives
the death of any rank.
"""

import collections
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time

import torch.distributed as dist

import spare_opt

from ._processes import descendants, kill_tree
from .elastic import Evicted, JobEnded, WipeOut, _peek, post_death

__all__ = ["Supervisor", "WorkerContext", "WIPE_OUT_EXIT", "EVICTED_EXIT", "LAYOUT_EXIT"]

#: Exit code of a rank that saw a wipe-out (the supervisor restarts every group).
WIPE_OUT_EXIT = 75
#: Exit code of a rank that the others declared failed.
EVICTED_EXIT = 76
#: Exit code of a rank that stopped because some rank's layout differs (the job fails).
LAYOUT_EXIT = 77
#: Seconds the other ranks get to stop by themselves after a layout mismatch.
_LAYOUT_GRACE = 30.0

WorkerContext = collections.namedtuple("WorkerContext", "group groups host port generation rejoin")
WorkerContext.__doc__ = """What a worker needs to join the job: its group, ``N``, the store's address, the
generation (restarts after wipe-outs so far) and whether it is a repaired group."""


def connect(context, timeout=60.0):
    """The store of ``context``'s generation: a ``PrefixStore`` on a ``TCPStore`` client."""
    import datetime

    client = dist.TCPStore(context.host, context.port, is_master=False, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=timeout))
    return dist.PrefixStore(f"gen/{context.generation}", client)


def _end_children(seconds=5.0):
    """SIGTERM this process's ``multiprocessing`` children (data loader workers), then SIGKILL those left.

    A worker leaves with ``os._exit``, which skips the data loader's shutdown of its
    workers: they would run on, orphaned, until their watchdog sees the parent gone.
    The wait for them is bounded by ``seconds``.
    """
    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    deadline = time.monotonic() + seconds
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
            child.join(1.0)


def _entry(target, context, args):
    code = 0
    try:
        target(context, *args)
    except WipeOut:
        code = WIPE_OUT_EXIT
    except Evicted:
        code = EVICTED_EXIT
    except JobEnded as exc:  # a repaired group not admitted: the job ended (0) or restarts (75)
        code = WIPE_OUT_EXIT if exc.restart else 0
    except spare_opt.LayoutError as exc:
        print(f"group {context.group}: {exc}", file=sys.stderr)
        code = LAYOUT_EXIT
    _end_children()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Supervisor:
    """Run ``target(context, *args)`` in one process per DP group and keep the job going.

    Parameters
    ----------
    target : callable
        A picklable (module-level) function ``target(context, *args)``; ``context`` is
        a :class:`WorkerContext`.  Connect to the store with :meth:`connect`.
    groups : int
        ``N``, one process each.
    args : tuple, default ()
    host : str, default "127.0.0.1"
    max_restarts : int, default 2
        Global restarts after a wipe-out before :meth:`run` gives up.
    preload : list of str, optional
        Modules that the fork server imports once before forking the ranks (default:
        torch, its optimizers and data loading, and spare-opt's warmed kernels), so a
        rank, repaired or restarted, starts in milliseconds instead of importing
        torch again.  ``[]`` keeps a plain ``spawn``.

    Attributes
    ----------
    store : torch.distributed.TCPStore
        The job's store (the master, in this process).
    events : list of (str, float, int)
        ``("start" | "kill" | "death" | "repair" | "stranded" | "restart", time.time(), group)``.

    Notes
    -----
    A process that dies with a non-zero code other than a wipe-out's gets a death notice
    in the store (``dead/{g}`` and the ``deaths`` counter) as soon as its process
    sentinel fires, so the survivors need not wait for its heartbeat to go stale.  When
    every process has ended and some saw a wipe-out, every group starts again in a new
    generation (a new key prefix); the step helper restores the last checkpoint.  A
    repaired process that is still waiting for admission when no member is left to admit
    it (the job ended, or every member saw a wipe-out) is killed (a ``"stranded"``
    event), so that the job ends or restarts.  A rank whose layout differs from the
    job's is not a failed group: every rank stops with ``LayoutError`` (exit code
    :data:`LAYOUT_EXIT`) and :meth:`run` raises it.
    """

    def __init__(self, target, groups, *, args=(), host="127.0.0.1", max_restarts=2, preload=None):
        self.target = target
        self.groups = int(groups)
        self.args = tuple(args)
        self.host = host
        self.max_restarts = int(max_restarts)
        self.store = dist.TCPStore(host, 0, is_master=True, wait_for_workers=False)
        self.port = self.store.port
        self.generation = 0
        self.events = []
        self.exit_codes = {}
        self._processes = {}
        self._reaped = set()
        self._joiners = set()  # groups started by repair() in this generation
        if preload is None:
            preload = ["spare_opt.torch._preload"]
        if preload:
            self._context = multiprocessing.get_context("forkserver")
            self._context.set_forkserver_preload(list(preload))
        else:
            self._context = multiprocessing.get_context("spawn")

    def generation_store(self):
        """The store prefix of the current generation (what workers see)."""
        return dist.PrefixStore(f"gen/{self.generation}", self.store)

    connect = staticmethod(connect)

    def _spawn(self, group, rejoin):
        context = WorkerContext(group, self.groups, self.host, self.port, self.generation, rejoin)
        process = self._context.Process(target=_entry, args=(self.target, context, self.args), daemon=False)
        process.start()
        self._processes[group] = process
        self._reaped.discard(group)
        if rejoin:
            self._joiners.add(group)
        else:
            self._joiners.discard(group)
        self.events.append(("start", time.time(), group))

    def start(self):
        """Start every group's process (generation 0)."""
        for g in range(self.groups):
            self._spawn(g, False)

    def kill(self, group):
        """SIGKILL group ``group``'s process and its children (a fault injection); returns the kill's ``time.time()``.

        Its children (data loader workers) die with it, as on a lost node: orphaned,
        they ran on for seconds, after the job and the test that ran it had ended.
        """
        process = self._processes[group]
        # Found before the kill (afterwards they belong to init); the process itself is killed first and at
        # once, so that the kill's moment, which the recovery's timeline counts from, stays the death's.
        children = descendants(process.pid)
        moment = time.time()
        os.kill(process.pid, signal.SIGKILL)
        for child in children:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:  # it ended meanwhile
                pass
        self.events.append(("kill", moment, group))
        return moment

    def repair(self, group):
        """Start a repaired process for ``group``: it heals from a live peer and rejoins at a step boundary."""
        process = self._processes.get(group)
        if process is not None and process.is_alive():
            raise RuntimeError(f"group {group}'s process is still running")
        self._spawn(group, True)
        self.events.append(("repair", time.time(), group))

    def alive(self, group):
        """Whether group ``group``'s process is running."""
        process = self._processes.get(group)
        return process is not None and process.is_alive()

    def poll(self, timeout=0.0):
        """Reap the processes that ended within ``timeout`` seconds; post death notices.  Returns ``True`` while any runs."""
        running = {p.sentinel: g for g, p in self._processes.items() if g not in self._reaped}
        if not running:
            return False
        for sentinel in multiprocessing.connection.wait(list(running), timeout):
            group = running[sentinel]
            process = self._processes[group]
            process.join()
            self._reaped.add(group)
            code = process.exitcode
            self.exit_codes[group] = code
            if code not in (0, WIPE_OUT_EXIT, LAYOUT_EXIT):
                post_death(self.generation_store(), group, str(code))
                self.events.append(("death", time.time(), group))
        return len(self._reaped) < len(self._processes)

    def _end_stranded(self):
        """SIGKILL repaired processes still waiting for admission once no member is left to admit them."""
        running = [g for g in self._processes if g not in self._reaped and self._processes[g].is_alive()]
        if not running or any(g not in self._joiners for g in running):
            return
        store = self.generation_store()
        if all(store.check([f"rejoin/{g}"]) for g in running):
            for g in running:
                self._processes[g].kill()
                self.events.append(("stranded", time.time(), g))

    def run(self, timeout=300.0, on_poll=None):
        """Supervise until every process ends; restart every group after a wipe-out.

        Parameters
        ----------
        timeout : float, default 300.0
            Seconds before the remaining processes are killed and ``TimeoutError`` raised.
        on_poll : callable, optional
            Called with the supervisor about every 5 ms (fault injection, repairs).

        Returns
        -------
        dict of int to int
            The last exit code of every group.

        Raises
        ------
        spare_opt.LayoutError
            Some rank's layout differs from the job's: every rank stopped (those that
            did not within 30 s are killed).
        TimeoutError
            The job did not end within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while True:
            mismatch = False
            while self.poll(0.005):
                if on_poll is not None:
                    on_poll(self)
                self._end_stranded()
                if LAYOUT_EXIT in self.exit_codes.values() and not mismatch:
                    mismatch = True
                    deadline = min(deadline, time.monotonic() + _LAYOUT_GRACE)
                if time.monotonic() > deadline:
                    self.terminate()
                    if mismatch:
                        break
                    raise TimeoutError(f"the job did not end within {timeout} s")
            if LAYOUT_EXIT in self.exit_codes.values():
                message = _peek(self.generation_store(), "fatal") or "some rank's layout differs"
                raise spare_opt.LayoutError(f"the job stopped: {message} (exit codes {dict(sorted(self.exit_codes.items()))})")
            if WIPE_OUT_EXIT in self.exit_codes.values() and self.generation < self.max_restarts:
                self.generation += 1
                self.exit_codes = {}
                self.events.append(("restart", time.time(), -1))
                self.start()
                continue
            return dict(self.exit_codes)

    def terminate(self):
        """SIGKILL every process still running, with its children."""
        for process in self._processes.values():
            if process.exitcode is None:
                kill_tree(process.pid)
                process.join()

"""Process trees on Linux, read from ``/proc``: the descendants of a process, and a kill of a whole tree.

``torchrun`` starts each worker in a session of its own (``start_new_session``), so a
signal to the launcher's process group misses its workers, and a worker whose launcher
was killed is reparented to ``init`` and runs on.  A launcher that stops a job, and every
test that starts one, kills the whole tree: the processes are found through their parent
links while the tree is frozen (``SIGSTOP``), so that none starts another one between
the look and the kill.  Elsewhere than Linux (no ``/proc``) only the root is signalled.
"""

import os
import signal

__all__ = ["descendants", "kill_tree", "parents"]


def parents():
    """``{pid: parent pid}`` of every process this user can see (``/proc/*/stat``); empty without ``/proc``."""
    found = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
                fields = stat.read().rpartition(b")")[2].split()
            found[int(entry)] = int(fields[1])
        except (OSError, IndexError, ValueError):  # it ended meanwhile
            continue
    return found


def descendants(pid):
    """The pids of every living descendant of ``pid`` (children, their children, ...), not ``pid`` itself."""
    children = {}
    for child, parent in parents().items():
        children.setdefault(parent, []).append(child)
    found, queue = set(), [pid]
    while queue:
        for child in children.get(queue.pop(), ()):
            if child not in found:
                found.add(child)
                queue.append(child)
    return found


def _signal(pid, number):
    try:
        os.kill(pid, number)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_tree(pid, rounds=8):
    """SIGKILL process ``pid`` and all its descendants; return the pids signalled.

    The root and then every descendant found are stopped (``SIGSTOP``) before anything
    is killed, round after round until a look finds no new process (at most ``rounds``
    looks): a stopped launcher starts no new worker, and a process is found through its
    parent before a kill reparents it.  The caller reaps its own child (``Popen.wait``);
    the others are reaped by their parents or by ``init``.

    Parameters
    ----------
    pid : int
        The root of the tree (usually a child of the caller).
    rounds : int, default 8
        How many looks for new descendants, at most.

    Returns
    -------
    set of int
        The pids signalled (the root included when it was still there).
    """
    tree = {pid} if _signal(pid, signal.SIGSTOP) else set()
    for _ in range(rounds):
        new = {child for child in descendants(pid) if child not in tree}
        for child in new:
            _signal(child, signal.SIGSTOP)
        tree |= new
        if not new:
            break
    for member in tree | {pid}:
        _signal(member, signal.SIGKILL)
    return tree

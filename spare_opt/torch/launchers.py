"""The launcher contract: run one DP group per ``torchrun``, ``srun`` step or pod.

A SPARe job keeps its state in one ``TCPStore`` that outlives every group (hosted by
``python -m spare_opt.torch.store``); each DP group is launched on its own, by a
launcher that restarts it when it fails.  This module is what a worker and its launcher
need beyond :class:`~spare_opt.torch.SpareGroup`:

* :func:`join_job` - the worker's configuration from the environment: the store's
  address, the group, the generation, and whether it is a repaired group;
* :func:`post_death` - the death notice a launcher or a node agent posts when a group's
  process fails (the live groups then need not wait for its heartbeat);
* :func:`run_worker` - the entry wrapper: after a :class:`WipeOut` it moves the job to
  a new generation and runs the worker again in the same process (from the last
  checkpoint; ``SPARE_RESTART_IN_PROCESS=0``: exit code 75 instead), :class:`Evicted`
  becomes 76, and a repaired group that was not admitted (:class:`JobEnded`) exits
  cleanly, or starts the new generation when the job restarted;
* :func:`end_job` - the end-of-job marker that the groups write when they finish;
* :func:`new_generation` - the wipe-out restart: every group starts again, from the
  last checkpoint, under a new key prefix.

Environment variables read by :func:`join_job`:

``SPARE_STORE``
    ``host:port`` of the job's store (required).
``SPARE_GROUP``
    The DP group ``g`` in ``[0, N)``; when unset, ``JOB_COMPLETION_INDEX`` (a Kubernetes
    indexed Job or a JobSet replica's index) is used.
``SPARE_GROUP_RANK``, ``SPARE_GROUP_WORLD_SIZE``
    This process's rank ``k`` in its DP group of several ranks (its position) and the
    group's size ``K``; when unset, ``RANK`` and ``WORLD_SIZE`` (``torchrun`` per DP
    group), else 0 and 1.
``SPARE_REJOIN``
    ``1`` / ``0`` forces or forbids a rejoin.  When unset, a process is a repaired group
    when its group already started in the current generation (the store records every
    start), whatever restarted it; the first start of every group after a wipe-out (a
    new generation) starts afresh.  ``TORCHELASTIC_RESTART_COUNT`` alone could not tell
    the two apart; it is kept as ``Job.restart_count``.
``SPARE_STORE_TIMEOUT``
    Seconds to wait for the store (default 60).
"""

import collections
import datetime
import gc
import os
import signal
import sys
import threading
import traceback

import torch.distributed as dist

import spare_opt

from .elastic import Evicted, GroupTimeout, JobEnded, WipeOut, post_death, _peek, _text
from .supervisor import EVICTED_EXIT, LAYOUT_EXIT, WIPE_OUT_EXIT

__all__ = ["Job", "join_job", "post_death", "run_worker", "end_job", "new_generation", "connect_store",
           "generation_store", "current_generation", "EVICTED_EXIT", "LAYOUT_EXIT", "WIPE_OUT_EXIT"]

Job = collections.namedtuple(
    "Job", "group rejoin generation store root restart_count group_rank group_world_size group_store")
Job.__doc__ = """A worker's place in the job (what :func:`join_job` returns).

``group`` (int), ``rejoin`` (bool: pass it to :class:`SpareGroup`), ``generation`` (int),
``store`` (the generation's ``PrefixStore``: pass it to :class:`SpareGroup`), ``root``
(the ``TCPStore`` client itself), ``restart_count`` (the launcher's restarts of this
process so far), ``group_rank`` and ``group_world_size`` (this process's rank in its
DP group and the group's size ``K``) and ``group_store``: a ``PrefixStore`` of its own for
this start of the group, where its ``K`` ranks build their process group
(``dist.init_process_group(backend, store=job.group_store, rank=job.group_rank,
world_size=job.group_world_size)``).  Not ``torchrun``'s rendezvous store: a
restarted rank can read its predecessors' addresses there, and gloo's connection
then fails."""

_current = None  # the last Job of this process, for run_worker's wipe-out restart


def connect_store(address, timeout=60.0):
    """A client of the job's store at ``address`` (``"host:port"``), a ``torch.distributed.TCPStore``.

    Raises
    ------
    spare_opt.ParameterError
        ``address`` is not ``host:port``.
    """
    host, _, port = str(address).rpartition(":")
    if not host or not port.isdigit():
        raise spare_opt.ParameterError(f"the store's address must be host:port, got {address!r}")
    return dist.TCPStore(host, int(port), is_master=False, wait_for_workers=False,
                         timeout=datetime.timedelta(seconds=float(timeout)))


def generation_store(root, generation):
    """The ``PrefixStore`` of ``generation`` on the store client ``root`` (every key of a generation lives under it)."""
    return dist.PrefixStore(f"gen/{int(generation)}", root)


def current_generation(root):
    """The job's current generation (an int; 0 before any wipe-out), read from the store ``root``."""
    root.compare_set("generation", "", "0")
    return int(_text(root.get("generation")))


def new_generation(root, seen):
    """Move the job from generation ``seen`` to ``seen + 1`` after a wipe-out; return the current one.

    Every group that saw the wipe-out calls it; the first call moves the job on
    (``compare_set``), the others change nothing.  The old generation is marked ended
    (``"restart"``), so a repaired group still waiting for admission there leaves (and
    its launcher restarts it into the new generation).  The new generation's keys start
    empty: its groups agree from epoch 0 and load the last checkpoint.

    Parameters
    ----------
    root : torch.distributed.Store
        The store client (not a generation's prefix).
    seen : int
        The generation the caller ran in.

    Returns
    -------
    int
        The job's generation after the call (``seen + 1`` unless another restart
        already moved it further).
    """
    seen = int(seen)
    current_generation(root)
    root.compare_set("generation", str(seen), str(seen + 1))
    generation_store(root, seen).compare_set("ended", "", "restart")
    return int(_text(root.get("generation")))


def end_job(store):
    """Mark the job of ``store``'s generation as finished (every group that finishes calls it).

    A repaired group that arrives afterwards, or that is still waiting for admission,
    leaves with :class:`JobEnded` (:func:`run_worker` exits 0 with a message) instead of
    waiting for members that are gone.
    """
    store.compare_set("ended", "", "done")


def _flag(environ, name):
    value = environ.get(name)
    if value is None or value == "":
        return None
    if value.lower() in ("1", "true", "yes"):
        return True
    if value.lower() in ("0", "false", "no"):
        return False
    raise spare_opt.ParameterError(f"{name} must be 0 or 1, got {value!r}")


def _integer(environ, name):
    value = environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise spare_opt.ParameterError(f"{name} must be an integer, got {value!r}") from None


def join_job(environ=None):
    """Connect this worker to the job's store and say which group it is and whether it rejoins.

    Parameters
    ----------
    environ : mapping, optional
        The environment (default ``os.environ``); see the module's docstring for the
        variables.

    Returns
    -------
    Job
        Pass ``job.store``, ``job.group`` and ``job.rejoin`` to :class:`SpareGroup`.

    Raises
    ------
    spare_opt.ParameterError
        A variable is missing or malformed.

    Notes
    -----
    Records ``started/{g}`` (``started/{g}/{k}`` for rank ``k > 0`` of a DP group of
    several ranks) in the current generation, so that a later restart of the
    same group (same generation) knows it is a repaired group, while every group's first
    start after a wipe-out (a new generation) starts afresh.
    """
    global _current
    environ = os.environ if environ is None else environ
    address = environ.get("SPARE_STORE")
    if not address:
        raise spare_opt.ParameterError("SPARE_STORE (host:port of the job's store) is not set")
    group = _integer(environ, "SPARE_GROUP")
    if group is None:
        group = _integer(environ, "JOB_COMPLETION_INDEX")
    if group is None or group < 0:
        raise spare_opt.ParameterError("SPARE_GROUP (this process's DP group, 0 <= g < N) is not set")
    group_rank = _integer(environ, "SPARE_GROUP_RANK")
    launcher_rank = _integer(environ, "RANK")
    if group_rank is not None and launcher_rank is not None and group_rank != launcher_rank:
        raise spare_opt.ParameterError(
            f"SPARE_GROUP_RANK={group_rank} but the launcher's RANK={launcher_rank}: one of them is wrong (with "
            "torchrun per DP group, leave SPARE_GROUP_RANK unset)")
    if group_rank is None:
        group_rank = launcher_rank or 0
    group_world_size = _integer(environ, "SPARE_GROUP_WORLD_SIZE")
    if group_world_size is None:
        group_world_size = _integer(environ, "WORLD_SIZE") or 1
    if not 0 <= group_rank < group_world_size:
        raise spare_opt.ParameterError(
            f"this process's rank in its DP group must be in [0, {group_world_size}) (SPARE_GROUP_RANK or RANK, "
            f"SPARE_GROUP_WORLD_SIZE or WORLD_SIZE), got {group_rank}")
    restarts = max(_integer(environ, "TORCHELASTIC_RESTART_COUNT") or 0, _integer(environ, "SLURM_RESTART_COUNT") or 0)
    timeout = float(environ.get("SPARE_STORE_TIMEOUT") or 60.0)
    root = connect_store(address, timeout)
    generation = current_generation(root)
    store = generation_store(root, generation)
    # One key per rank of the group: its ranks start together and must not see each other's.
    key = f"started/{group}" if group_rank == 0 else f"started/{group}/{group_rank}"
    started = _peek(store, key) is not None
    rejoin = _flag(environ, "SPARE_REJOIN")
    if rejoin is None:
        rejoin = started
    store.set(key, str(os.getpid()))
    # The ranks of a group start together, each once per start of the group: the n-th
    # start of every rank is the same start, and its process group gets fresh keys.
    start = store.add(f"starts/{group}/{group_rank}", 1)
    group_store = dist.PrefixStore(f"group/{group}/{start}", store)
    _current = Job(group, bool(rejoin), generation, store, root, restarts, group_rank, group_world_size, group_store)
    return _current


def run_worker(main, *args, **kwargs):
    """Run ``main(*args, **kwargs)`` and exit with the code a launcher acts on; never returns.

    * it returns: exit 0;
    * :class:`WipeOut`: the job moves to a new generation (:func:`new_generation`, when
      :func:`join_job` was called in this process) and ``main`` runs again in this
      process: it joins the new generation afresh and loads the last checkpoint (with
      ``SPARE_RESTART_IN_PROCESS=0``, or without :func:`join_job`: exit 75,
      ``WIPE_OUT_EXIT``, and the launcher restarts the group);
    * :class:`Evicted`: exit 76 (``EVICTED_EXIT``): the others declared this group
      failed; a restart rejoins as a repaired group;
    * :class:`JobEnded`: a message on stderr; exit 0 when the job has ended (nothing
      to do); when it restarted in a new generation (a wipe-out, or this repaired group
      found no live member to admit it), ``main`` runs again in the new generation as
      after a wipe-out (exit 75 with ``SPARE_RESTART_IN_PROCESS=0``);
    * ``spare_opt.LayoutError`` (this or another rank's layout differs): a message,
      exit 77 (``LAYOUT_EXIT``): the job cannot run, do not restart;
    * :class:`GroupTimeout` (a wait outlasted ``timeout``: a group that never
      registered, a repaired group that was never admitted) or another
      ``spare_opt.SpareError`` (bad settings, such as a batch that does not split): a
      one-line message, this group's death notice, exit 1;
    * any other exception: its traceback, a death notice for this group (when
      :func:`join_job` was called in this process), exit 1.

    It leaves with ``os._exit``: the threads of gloo and of the store never keep a
    finished or failed worker alive.  On SIGTERM (``torchrun`` stops the other ranks of
    a DP group when one of them fails) it posts the group's death notice, so the live
    groups recover at once, and exits with ``128 + 15``.

    Notes
    -----
    The restart after a wipe-out runs in this process so that it does not depend on the
    launcher's restart budget (``torchrun --max-restarts``): a group whose launcher
    already spent its restarts on a kill would otherwise be missing from the new
    generation, and every other group would wait for it.  Before ``main`` runs again,
    the default process group (the DP group's own, ``init_process_group``) is
    destroyed, so ``main`` builds everything again as at a first start.  ``main`` must
    tolerate running twice in a process (global state of its own); where it does not,
    set ``SPARE_RESTART_IN_PROCESS=0`` and give the launcher restarts for the wipe-outs.
    """
    code = 0
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    while True:
        code = _run_once(main, args, kwargs)
        if code != _AGAIN:
            break
        # Out of the failed attempt's frames: its model, optimizer and data workers can go.
        if dist.is_initialized():
            dist.destroy_process_group()  # the DP group's own: main builds it again
        gc.collect()
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit: the gloo and store threads must not keep a finished worker alive.
    os._exit(code)


#: What :func:`_run_once` returns when ``main`` must run again in a new generation.
_AGAIN = -1


def _run_once(main, args, kwargs):
    """Run ``main`` once; the exit code of its outcome, or :data:`_AGAIN` to run it again in the job's new generation."""
    try:
        main(*args, **kwargs)
    except WipeOut as exc:
        if _current is None:
            print(f"spare-opt: {exc}", file=sys.stderr)
            return WIPE_OUT_EXIT
        generation = new_generation(_current.root, _current.generation)
        return _again_or_exit(f"{exc}; the job continues in generation {generation}")
    except Evicted as exc:
        print(f"spare-opt: {exc}; restart it to rejoin", file=sys.stderr)
        return EVICTED_EXIT
    except JobEnded as exc:
        if not exc.restart:
            print(f"spare-opt: {exc}; exiting", file=sys.stderr)
            return 0
        if _current is None:
            print(f"spare-opt: {exc}; exiting", file=sys.stderr)
            return WIPE_OUT_EXIT
        # The first group to see the generation end moves the job on (a no-op when a
        # wipe-out already did).
        generation = new_generation(_current.root, _current.generation)
        return _again_or_exit(f"{exc}; the job continues in generation {generation}")
    except spare_opt.LayoutError as exc:
        print(f"spare-opt: {exc}", file=sys.stderr)
        return LAYOUT_EXIT
    except (GroupTimeout, spare_opt.SpareError) as exc:  # a wait outlasted its bound; bad settings
        print(f"spare-opt: {exc}", file=sys.stderr)
        _post_own_death(f"rank {_current.group_rank} exited: {type(exc).__name__}" if _current else "")
        return 1
    except BaseException:  # noqa: BLE001 - any other failure: its traceback, exit 1
        traceback.print_exc()
        _post_own_death(f"rank {_current.group_rank} exited with an error" if _current else "")
        return 1
    return 0


def _again_or_exit(message):
    """After a wipe-out: :data:`_AGAIN` (``main`` runs again here, afresh) or, with ``SPARE_RESTART_IN_PROCESS=0``, exit 75."""
    if (os.environ.get("SPARE_RESTART_IN_PROCESS") or "1").strip().lower() in ("0", "false", "no"):
        print(f"spare-opt: {message}; exiting for the launcher to restart this group", file=sys.stderr)
        return WIPE_OUT_EXIT
    print(f"spare-opt: {message}; this worker starts again there, from the last checkpoint", file=sys.stderr)
    sys.stderr.flush()
    return _AGAIN


def _post_own_death(reason):
    """Post this process's group's death notice (when :func:`join_job` was called here): the live groups need not
    wait for its heartbeat to go stale (the launcher may post none); the group's other ranks leave."""
    if _current is not None:
        try:
            post_death(_current.store, _current.group, reason)
        except Exception:  # noqa: BLE001 - the store is gone: nothing to tell
            pass


def _terminated(signum, frame):
    """SIGTERM (a launcher stops this rank: torchrun does so to a group's other ranks when one fails): post the group's death, exit."""
    _post_own_death(f"rank {_current.group_rank} stopped by signal {signum}" if _current else "")
    os._exit(128 + signum)


def _main(argv=None):
    """``python -m spare_opt.torch.launchers post-death|end|generation --store HOST:PORT ...``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m spare_opt.torch.launchers",
                                     description="Post to a SPARe job's store what a launcher saw.")
    commands = parser.add_subparsers(dest="command", required=True)
    death = commands.add_parser("post-death", help="group G's process failed: the live groups stop waiting for it")
    death.add_argument("--store", required=True, help="host:port of the job's store")
    death.add_argument("--group", type=int, required=True)
    death.add_argument("--reason", default="died")
    end = commands.add_parser("end", help="mark the current generation's job as finished")
    end.add_argument("--store", required=True)
    show = commands.add_parser("generation", help="print the job's current generation")
    show.add_argument("--store", required=True)
    options = parser.parse_args(argv)
    try:
        root = connect_store(options.store, 10.0)
        generation = current_generation(root)
        store = generation_store(root, generation)
        if options.command == "post-death":
            post_death(store, options.group, options.reason)
        elif options.command == "end":
            end_job(store)
        else:
            print(generation)
    except (spare_opt.ParameterError, RuntimeError) as exc:
        print(f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_main())

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
    indexed Job or a JobSet replica's index) is used.  When both are set,
    ``JOB_COMPLETION_INDEX`` must be the group or this process's rank in it (in a JobSet
    replica, the index of its pod within the replica's Job), else both are refused.
``SPARE_GROUP_RANK``, ``SPARE_GROUP_WORLD_SIZE``
    This process's rank ``k`` in its DP group of several ranks (its position) and the
    group's size ``K``; when unset, ``RANK`` and ``WORLD_SIZE`` (``torchrun`` per DP
    group), else 0 and 1.  Set beside ``RANK`` / ``WORLD_SIZE``, they must agree.
``SPARE_REJOIN``
    ``1`` / ``0`` forces or forbids a rejoin.  When unset, a process is a repaired group
    when its group already started in the current generation (the store records every
    start), whatever restarted it; the first start of every group after a wipe-out (a
    new generation) starts afresh.  ``TORCHELASTIC_RESTART_COUNT`` alone could not tell
    the two apart; it is kept as ``Job.restart_count``.
``SPARE_STORE_TIMEOUT``
    Seconds to wait for the store (default 60), in ``[1, 1e6]``: also the client's
    timeout for every later operation.

Integers are plain decimal digits (``1_0``, ``+5`` or digits of other scripts are
refused by name), and a group not below the job's ``N`` is refused once a group
registered it (the store's ``groups`` key).

A process that finds its group (and rank) already started in the current generation
checks that its predecessor is gone before it rejoins: every worker that joined keeps a
presence key beating (``alive/{g}``, ``alive/{g}/{k}``) for as long as it lives.  While
the predecessor's presence or heartbeat still changes, the new process is a duplicate
(the same ``SPARE_GROUP`` launched twice) and :func:`join_job` refuses it with
:class:`DuplicateGroup`, touching nothing; :func:`run_worker` exits 77.
"""

import collections
import datetime
import gc
import math
import os
import re
import signal
import socket
import sys
import threading
import time
import traceback

import torch.distributed as dist

import spare_opt

from . import _membership, _watcher
from .elastic import (CheckpointMismatch, DuplicateGroup, Evicted, GroupTimeout, JobEnded, WipeOut, post_death, _peek,
                      _text)
from .supervisor import EVICTED_EXIT, LAYOUT_EXIT, WIPE_OUT_EXIT, _end_children

__all__ = ["Job", "join_job", "post_death", "run_worker", "end_job", "new_generation", "connect_store",
           "generation_store", "current_generation", "StoreUnreachable", "DuplicateGroup", "EVICTED_EXIT",
           "LAYOUT_EXIT", "WIPE_OUT_EXIT"]

Job = collections.namedtuple(
    "Job", "group rejoin generation store root restart_count group_rank group_world_size group_store")
Job.__doc__ = """A worker's place in the job (what :func:`join_job` returns).

``group`` (int), ``rejoin`` (bool: this group started before in this generation; pass it
to :class:`SpareGroup`, which starts it as a fresh member when the job had not begun:
``group.joined_late`` says whether it heals from a live group), ``generation`` (int),
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
_presence = None  # the presence beat of the last join_job of this process

#: Seconds between a joined worker's presence beats, and how long a process that finds
#: its group already started watches its predecessor's presence before it takes over.
_PRESENCE_INTERVAL = 0.5
_PRESENCE_WINDOW = 3.0


class StoreUnreachable(spare_opt.SpareError, ConnectionError):
    """The job's store did not answer within the timeout: nothing listens there, or its host does not resolve."""


def _store_address(address):
    """``(host, port)`` of ``"host:port"`` (``"[v6]:port"`` too); a ParameterError otherwise."""
    text = str(address).strip()
    host, colon, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not colon or not host or not re.fullmatch(r"[0-9]{1,5}", port) or not 1 <= int(port) <= 65535:
        raise spare_opt.ParameterError(
            f"the store's address must be host:port with a port in [1, 65535], got {address!r}")
    return host, int(port)


#: The longest wait for the store that :func:`connect_store` takes (about 11 days): a longer one is a typo.
_LONGEST_WAIT = 1e6
#: The shortest: the store's client keeps it as its timeout for every later operation, in whole milliseconds, and
#: a worker's first reads (the generation, its start) must fit in it on a busy store (1e-9 s became 0 ms: every
#: read failed at once with torch's ``DistStoreError``).
_SHORTEST_WAIT = 1.0


def _seconds(value, name):
    """``value`` as a number of seconds in ``[_SHORTEST_WAIT, _LONGEST_WAIT]``; a ParameterError naming ``name``."""
    try:
        seconds = float(value)
    except (TypeError, ValueError, OverflowError):
        raise spare_opt.ParameterError(f"{name} must be a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(seconds) or not _SHORTEST_WAIT <= seconds <= _LONGEST_WAIT:
        raise spare_opt.ParameterError(
            f"{name} must be a number of seconds, at least {_SHORTEST_WAIT:g} and at most {_LONGEST_WAIT:g}, got "
            f"{value!r}")
    return seconds


def _reach(host, port, deadline):
    """Wait until something accepts a TCP connection at ``host:port``; ``None`` then, else why not (by ``deadline``).

    torch's client retries on its own, but overruns its timeout two- to three-fold and logs
    every retry with its C++ stack on stderr; a plain connection says whether anything
    listens yet.  The store itself is torch's ``TCPStore`` client, built once this succeeds.
    """
    pause = 0.05
    while True:
        reason = f"no address for {host!r}"
        try:
            for family, kind, protocol, _, address in _resolve(host, port, deadline - time.monotonic()):
                with socket.socket(family, kind, protocol) as probe:
                    probe.settimeout(min(max(deadline - time.monotonic(), 0.05), 2.0))
                    try:
                        probe.connect(address)
                        return None
                    except OSError as exc:
                        reason = exc.strerror or str(exc) or type(exc).__name__
        except socket.gaierror as exc:
            reason = f"cannot resolve {host!r}: {exc.strerror}"
        except (OSError, UnicodeError) as exc:
            reason = str(exc) or type(exc).__name__
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return reason
        time.sleep(min(pause, remaining))
        pause = min(2 * pause, 1.0)


def _resolve(host, port, seconds):
    """``socket.getaddrinfo(host, port)`` for a stream socket, given up after ``seconds``: a resolver that does not
    answer (no DNS server reachable) must not outlast the store's timeout, so it runs in a daemon thread."""
    found = []

    def resolve():
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            found.append(exc)

    thread = threading.Thread(target=resolve, name="spare-resolve", daemon=True)
    thread.start()
    thread.join(max(seconds, 0.05))
    if not found:
        raise TimeoutError(f"resolving {host!r} took longer than the timeout")
    if isinstance(found[0], BaseException):
        raise found[0]
    return found[0]


def connect_store(address, timeout=60.0):
    """A client of the job's store at ``address`` (``"host:port"``), a ``torch.distributed.TCPStore``.

    Parameters
    ----------
    address : str
        ``host:port`` (``[v6 address]:port`` too) of the store.
    timeout : float, default 60.0
        Seconds to wait for the store to answer (it may start after the workers), and
        the client's timeout for every later operation.

    Returns
    -------
    torch.distributed.TCPStore

    Raises
    ------
    spare_opt.ParameterError
        ``address`` is not ``host:port`` with a port in ``[1, 65535]``, or ``timeout`` is
        not a number of seconds in ``[1, 1e6]``.
    StoreUnreachable
        Nothing answered at ``address`` within ``timeout`` (a host that does not
        resolve included); raised by then, not later.
    """
    return _connect(address, timeout, "the job's store at {host}:{port}")


def _connect(address, timeout, name):
    """:func:`connect_store`, its error naming the store as ``name`` (formatted with ``host`` and ``port``)."""
    host, port = _store_address(address)
    timeout = _seconds(timeout, "the store's timeout")
    deadline = time.monotonic() + timeout
    reason = _reach(host, port, deadline)
    if reason is None:
        try:
            client = dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                                   timeout=datetime.timedelta(seconds=max(deadline - time.monotonic(), 1.0)))
            client.set_timeout(datetime.timedelta(seconds=timeout))
            return client
        except (RuntimeError, ValueError) as exc:  # torch's DistNetworkError, DistStoreError
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    raise StoreUnreachable(f"{name.format(host=host, port=port)} did not answer within {timeout:g} s ({reason}): "
                           "is it running, and is the address right?")


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


def _integer(environ, name, least=None):
    """The integer of variable ``name`` (``None`` when unset or empty): plain decimal digits, ``-`` allowed before them.

    Python's ``int()`` also reads ``1_0`` as 10, ``+5`` as 5, `` 7 `` as 7 and digits of other scripts
    (an Arabic-Indic three as 3): a group or a rank taken from such a value is a typo obeyed, so only ``[0-9]``
    is read.
    """
    value = environ.get(name)
    if value is None or value == "":
        return None
    if not re.fullmatch(r"-?[0-9]+", value):
        raise spare_opt.ParameterError(f"{name} must be an integer (decimal digits 0-9), got {value!r}")
    number = int(value)
    if least is not None and number < least:
        raise spare_opt.ParameterError(f"{name} must be an integer >= {least}, got {value!r}")
    return number


def _job_groups(store):
    """The job's ``N`` as its first group registered it (``groups``), or ``None`` before any registered."""
    text = _peek(store, "groups")
    return int(text) if text is not None and text.isdigit() else None


def _started_at(pid):
    """The start time of process ``pid`` (clock ticks since boot, from ``/proc``), ``None`` when it has none; ``"Z"``
    for a zombie (it ended, its parent has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    if not fields or fields[0] in ("Z", "X"):
        return "Z"
    return fields[19] if len(fields) > 19 else None


def _identity():
    """This process, as its presence beat names it: ``host/pid-namespace/pid/start-time``."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{socket.gethostname()}/{namespace}/{os.getpid()}/{_started_at(os.getpid())}"


def _described(presence):
    """A presence beat's process in words: ``process 13431 on host vm`` (``unknown process`` when unreadable)."""
    identity = (presence or "").rpartition(" ")[0]
    parts = identity.split("/")
    if len(parts) < 4 or not parts[-2].isdigit():
        return "an unknown process"
    return f"process {parts[-2]} on host {'/'.join(parts[:-3])}"


def _alive(identity):
    """Whether the process named ``identity`` (:func:`_identity`) still runs: ``True`` or ``False`` when it ran on
    this machine, in this PID namespace (its pid and start time tell), ``None`` when that cannot be told from here."""
    place, _, rest = identity.rpartition("/")
    place, _, pid = place.rpartition("/")
    mine = _identity().rsplit("/", 2)[0]
    if place != mine or not pid.isdigit() or rest == "None":
        return None
    return _started_at(int(pid)) == rest


class _Presence(threading.Thread):
    """Beat ``key`` on ``store`` every ``_PRESENCE_INTERVAL`` while this process lives (a daemon thread)."""

    def __init__(self, store, key, identity):
        super().__init__(name="spare-presence", daemon=True)
        self.store, self.key, self.identity = store, key, identity
        self.stop = threading.Event()
        self.count = 0
        self.beat()

    def beat(self):
        self.count += 1
        self.store.set(self.key, f"{self.identity} {self.count}")

    def run(self):
        while not self.stop.wait(_PRESENCE_INTERVAL):
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - the store is gone: the job is over
                return


def _refuse_duplicate(store, group, group_rank, presence_key, beat_key):
    """Raise :class:`DuplicateGroup` while the process that last started as this group and rank still lives.

    On this machine its pid and start time tell at once.  Elsewhere it lives while its
    presence beat or its heartbeat changes (or its first presence beat appears: it
    started a moment ago), and counts as gone once neither changed for
    ``_PRESENCE_WINDOW`` seconds (longer than ``SpareGroup``'s default heartbeat timeout).
    """
    value, beat = _peek(store, presence_key), _peek(store, beat_key)
    deadline = time.monotonic() + _PRESENCE_WINDOW
    alive = None
    while True:
        if value is not None:
            identity = value.rpartition(" ")[0]
            if identity == _identity():  # this process joined before (it joins again): no other one to refuse
                return
            alive = _alive(identity)
            if alive is False:
                return
        if alive is None and time.monotonic() > deadline:
            return
        if alive is None:
            time.sleep(0.1)
            now, beat_now = _peek(store, presence_key), _peek(store, beat_key)
            alive = True if now != value or beat_now != beat else None
            value = now
        if alive:
            who = f"group {group}" if group_rank == 0 else f"rank {group_rank} of group {group}"
            raise DuplicateGroup(
                f"{who} is already running in this job ({_described(value)} is alive): a group is launched once, and "
                "restarted only after it ended; this process leaves without touching the job", group)


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
        A variable is missing or malformed (integers are plain decimal digits), or two of
        them disagree (``SPARE_GROUP`` and ``JOB_COMPLETION_INDEX``, ``SPARE_GROUP_RANK``
        and ``RANK``, ``SPARE_GROUP_WORLD_SIZE`` and ``WORLD_SIZE``), or the group is not
        below the job's ``N`` (known once a group registered: the store's ``groups``).
    StoreUnreachable
        The store did not answer within ``SPARE_STORE_TIMEOUT``.
    DuplicateGroup
        Another process that started as this group (and rank) is still alive.

    Notes
    -----
    Records ``started/{g}`` (``started/{g}/{k}`` for rank ``k > 0`` of a DP group of
    several ranks) in the current generation, so that a later restart of the
    same group (same generation) knows it is a repaired group, while every group's first
    start after a wipe-out (a new generation) starts afresh.
    """
    global _current, _presence
    environ = os.environ if environ is None else environ
    address = environ.get("SPARE_STORE")
    if not address or not address.strip():
        raise spare_opt.ParameterError("SPARE_STORE (host:port of the job's store) is not set")
    _store_address(address)
    given = _integer(environ, "SPARE_GROUP", least=0)
    index = _integer(environ, "JOB_COMPLETION_INDEX", least=0)
    group = given if given is not None else index
    if group is None:
        raise spare_opt.ParameterError("SPARE_GROUP (this process's DP group, 0 <= g < N) is not set")
    group_rank = _integer(environ, "SPARE_GROUP_RANK", least=0)
    launcher_rank = _integer(environ, "RANK", least=0)
    if group_rank is not None and launcher_rank is not None and group_rank != launcher_rank:
        raise spare_opt.ParameterError(
            f"SPARE_GROUP_RANK={group_rank} but the launcher's RANK={launcher_rank}: one of them is wrong (with "
            "torchrun per DP group, leave SPARE_GROUP_RANK unset)")
    if group_rank is None:
        group_rank = launcher_rank or 0
    # A Kubernetes indexed Job's index is the group; in a JobSet replica (one Job per group)
    # it is the pod's place in its group.  Any other value contradicts SPARE_GROUP.
    if given is not None and index is not None and index not in (given, group_rank):
        raise spare_opt.ParameterError(
            f"SPARE_GROUP={given} but JOB_COMPLETION_INDEX={index}: the group is one or the other (the index may "
            f"also be this process's rank in its group, {group_rank}); unset one of them or make them agree")
    group_world_size = _integer(environ, "SPARE_GROUP_WORLD_SIZE", least=1)
    launcher_world_size = _integer(environ, "WORLD_SIZE", least=1)
    if group_world_size is not None and launcher_world_size is not None and group_world_size != launcher_world_size:
        raise spare_opt.ParameterError(
            f"SPARE_GROUP_WORLD_SIZE={group_world_size} but the launcher's WORLD_SIZE={launcher_world_size}: one "
            "of them is wrong (with torchrun per DP group, leave SPARE_GROUP_WORLD_SIZE unset)")
    if group_world_size is None:
        group_world_size = launcher_world_size or 1
    if not 0 <= group_rank < group_world_size:
        raise spare_opt.ParameterError(
            f"this process's rank in its DP group must be in [0, {group_world_size}) (SPARE_GROUP_RANK or RANK, "
            f"SPARE_GROUP_WORLD_SIZE or WORLD_SIZE), got {group_rank}")
    restarts = max(_integer(environ, "TORCHELASTIC_RESTART_COUNT") or 0, _integer(environ, "SLURM_RESTART_COUNT") or 0)
    timeout = environ.get("SPARE_STORE_TIMEOUT")
    timeout = 60.0 if timeout is None or not timeout.strip() else _seconds(timeout, "SPARE_STORE_TIMEOUT")
    rejoin = _flag(environ, "SPARE_REJOIN")
    root = _connect(address, timeout, "the job's store (SPARE_STORE={host}:{port})")
    generation = current_generation(root)
    store = generation_store(root, generation)
    groups = _job_groups(store)
    if groups is not None and group >= groups:
        # Refused before anything is written: no start, no presence beat for a group the job does not have.
        source = "SPARE_GROUP" if given is not None else "JOB_COMPLETION_INDEX"
        raise spare_opt.ParameterError(f"{source}={environ.get(source)} is out of range: this job has N = {groups} "
                                       f"DP groups, numbered 0 to {groups - 1}")
    # One key per rank of the group: its ranks start together and must not see each other's.
    suffix = f"{group}" if group_rank == 0 else f"{group}/{group_rank}"
    key = f"started/{suffix}"
    # Counted, not peeked: of two processes that start as the same group at once, one is second.
    # A key of its own: under ``joins/{g}`` group g's start counted as a join of epoch g's
    # agreement, whose first joiner then never proposed (every member waited out the
    # heartbeat timeout before proposing itself, though a death notice was there).
    started = store.add(f"launches/{suffix}", 1) > 1
    if started:
        _refuse_duplicate(store, group, group_rank, f"alive/{suffix}", f"hb/{suffix}")
    if rejoin is None:
        rejoin = started
    # From here a death of this process is this group's: run_worker's watcher posts it.
    _watcher.tell(address.strip(), generation, group, group_rank)
    # The presence beat starts before the start is recorded: a second process that starts as
    # this group (and rank) watches it.
    if _presence is not None:
        _presence.stop.set()
    _presence = _Presence(generation_store(root.clone(), generation), f"alive/{suffix}", _identity())
    _presence.start()
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
    * ``spare_opt.LayoutError`` (this or another rank's layout differs) or
      :class:`CheckpointMismatch` (the checkpoint found at start is another job's): a
      message, exit 77 (``LAYOUT_EXIT``): the job cannot run, do not restart;
    * :class:`DuplicateGroup` (another live process already runs this group): a
      message, no death notice (the live process goes on), exit 77: do not restart;
    * a configuration error, ``spare_opt.ParameterError`` or ``ParameterTypeError``
      (a variable of :func:`join_job` unset or malformed, ``SPARE_GROUP`` out of
      range, settings that ``SpareGroup``, ``SpareStep`` or the sampler refuse, such as
      a batch that does not split): a one-line message, this group's death notice,
      exit 77: a restart would meet the same error;
    * :class:`GroupTimeout` (a wait outlasted ``timeout``: a group that never
      registered, a repaired group that was never admitted), :class:`StoreUnreachable`
      or another ``spare_opt.SpareError``: a one-line message, this group's death
      notice, exit 1;
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
    # Before main builds anything (threads, devices): the watcher is a fork of this process.
    _watcher.start()
    _membership._hung_exit = _leave_hung  # SpareGroup(hang_timeout=...): a hung rank's process ends, exit 76
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
    _end_children()  # os._exit skips the data loader's shutdown: its workers would outlive this one
    sys.stdout.flush()
    sys.stderr.flush()
    _watcher.announce_exit()  # an exit of its own: the watcher posts nothing
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
    except DuplicateGroup as exc:  # no death notice: the group's live process must go on
        print(f"spare-opt: {exc}", file=sys.stderr)
        return LAYOUT_EXIT
    except (spare_opt.LayoutError, CheckpointMismatch) as exc:  # the job's configuration: a restart fails again
        print(f"spare-opt: {exc}", file=sys.stderr)
        return LAYOUT_EXIT
    except (spare_opt.ParameterError, spare_opt.ParameterTypeError) as exc:
        # A configuration error (a variable unset or malformed, SPARE_GROUP out of range, settings that SpareGroup,
        # SpareStep or the sampler refuse): every restart meets it again, after a long import.  The group's
        # death is posted (it may have registered: the others need not wait for its heartbeat).
        print(f"spare-opt: {exc}", file=sys.stderr)
        _post_own_death(f"rank {_current.group_rank} exited: {type(exc).__name__}" if _current else "")
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


def _leave_hung():
    """A rank hung in a micro-batch (``hang_timeout``): its heartbeat posted the notice; exit 76 for a restart."""
    sys.stdout.flush()
    sys.stderr.flush()
    _watcher.announce_exit()  # posted already, with the reason
    os._exit(EVICTED_EXIT)


def _terminated(signum, frame):
    """SIGTERM (a launcher stops this rank: torchrun does so to a group's other ranks when one fails): post the group's death, exit."""
    _post_own_death(f"rank {_current.group_rank} stopped by signal {signum}" if _current else "")
    _watcher.announce_exit()  # posted above
    os._exit(128 + signum)


def _group_number(text):
    """``--group``'s value: plain decimal digits (argparse's ``int`` also reads ``1_0`` as 10 and ``+5``)."""
    import argparse

    if not re.fullmatch(r"-?[0-9]+", text):
        raise argparse.ArgumentTypeError(f"expected an integer (decimal digits 0-9), got {text!r}")
    return int(text)


def _main(argv=None):
    """``python -m spare_opt.torch.launchers post-death|end|generation --store HOST:PORT ...``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m spare_opt.torch.launchers",
                                     description="Post to a SPARe job's store what a launcher saw.")
    commands = parser.add_subparsers(dest="command", required=True)
    death = commands.add_parser("post-death", help="group G's process failed: the live groups stop waiting for it",
                                description="Post DP group G's death notice in the job's current generation: "
                                            "the live groups agree without it at once instead of after the "
                                            "heartbeat timeout (run it when a worker dies, as the SLURM "
                                            "recipe's loop does).")
    death.add_argument("--store", required=True, metavar="HOST:PORT", help="host:port of the job's store")
    death.add_argument("--group", type=_group_number, required=True, metavar="G",
                       help="the DP group that died, 0 <= G < N")
    death.add_argument("--reason", default="died", help="a word or two for the survivors' logs (default: died)")
    end = commands.add_parser("end", help="mark the current generation's job as finished",
                              description="Mark the job of the current generation as finished: a repaired "
                                          "group that starts later leaves at once (exit 0).")
    end.add_argument("--store", required=True, metavar="HOST:PORT", help="host:port of the job's store")
    show = commands.add_parser("generation", help="print the job's current generation",
                               description="Print the job's current generation (it moves on at every wipe-out).")
    show.add_argument("--store", required=True, metavar="HOST:PORT", help="host:port of the job's store")
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
    except (spare_opt.SpareError, RuntimeError) as exc:
        print(f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_main())

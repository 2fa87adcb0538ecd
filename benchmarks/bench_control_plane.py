"""Benchmark: SPARe's control plane at N emulated DP groups on one TCPStore, with a real SIGKILL.

Every DP group is a real :class:`spare_opt.torch.SpareGroup` (its heartbeat's
:meth:`~spare_opt.torch.SpareGroup._beat`, its reaction to an alarm
(``_on_alarm``), the abort flag, the agreement through ``compare_set`` and the wake
keys, the plan of the agreed failed set) with its own two ``TCPStore`` connections
(training thread, heartbeat), but no model and no gloo process group (its rebuild is a
no-op): a thread each in a few host processes, whose heartbeats one thread per host
process drives in turn, spread evenly over the interval, and whose alarms one thread
per host process receives and hands to each group in turn (thousands of heartbeat or
alarm threads starved each other; a real job has one of each per process).  One group (the
victim) runs alone in a process of its own, with its own heartbeat thread, and is
SIGKILLed once every group is up and beating.  With ``--notices`` the victim runs with
``run_worker``'s death watcher (:mod:`spare_opt.torch._watcher`), which posts its death
notice the moment it dies; without, the survivors notice the stale heartbeat.

Measured, from the kill, at every survivor: ``detect`` (the abort seen), ``recover``
(its main thread runs again), ``joined`` (it joined the agreement), ``agree`` (the
agreed failed set read) and ``plan`` (its plan computed); the figure the target is about
is the *last* survivor's ``agree``.  From outside, as the store saw it: when the notice
was posted, when the last survivor joined the agreement (``all_joined_ms``) and when the
agreed record was written (``proposed_ms``).  Every survivor must agree on the same
failed set (``{victim}``): the run fails otherwise (the CI test runs it at a small N for
that).  The store's load: its server process's CPU seconds per second, and the beats per
second the groups achieved against the nominal ``N / interval``, over a quiet window
before the kill.  The profile of the recovery: the CPU seconds of the store's process
and of the host processes from the kill to the last survivor's agreed set, and the
survivors' store requests in that window by connection and method (beyond their beats:
``requests_per_member``).  ``--wake-floor`` measures only what the emulation needs to
wake ``N`` threads blocked in a store read, one ``multi_set`` away (the floor of the
agreement's last phase).

Run it against the package under test (``PYTHONPATH=.`` from the repository root when
another ``spare_opt`` is installed: the script's own folder comes first on the path).

Usage::

    python benchmarks/bench_control_plane.py --groups 64 --notices
    python benchmarks/bench_control_plane.py --groups 256 --interval 0.25 --notices --json
    python benchmarks/bench_control_plane.py --groups 1024 --notices --json   # 250 ms beats, 4 s timeout above N = 256
    python benchmarks/bench_control_plane.py --groups 1024 --json             # no notice
    python benchmarks/bench_control_plane.py --groups 256,1024 --wake-floor   # the emulation's floor for a wake-up
    python benchmarks/bench_control_plane.py --groups 64 --watch all     # every group reads every heartbeat
"""

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import signal
import subprocess
import sys
import threading
import time

import numpy as np


_CONNECT = threading.Lock()


def _client(port):
    """A client of the store; one connection at a time per process.

    Each connection costs a reverse lookup of its address, in the client and in the
    store's event loop (torch formats both ends' names for its logs): a DNS round
    trip each, or a resolver timeout (5 s) where DNS drops the query.  After a lookup
    that failed torch stops looking up names in that process, but a query that is
    answered on the resolver's second attempt is no failure: here, many threads
    connecting at once had connections taking 5 to 15 s each, and the store's event
    loop (one thread) waited out each of its own lookups.
    """
    import torch.distributed as dist

    with _CONNECT:
        return dist.TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False,
                             timeout=datetime.timedelta(seconds=120))


def _emulated_group_class(beater=None):
    from spare_opt.torch.elastic import SpareGroup

    class EmulatedGroup(SpareGroup):
        """A SpareGroup without a process group: the control plane alone.

        With a ``beater``, its heartbeats (:meth:`SpareGroup._beat`, SpareGroup's own code)
        are driven by the host process's beat thread instead of a thread of its own.
        """

        def _heartbeat(self):
            if beater is None:
                super()._heartbeat()
            else:
                beater.add(self)

        def _alarms(self):
            if beater is None:
                super()._alarms()
            else:
                beater.alarms.add(self)

        def _rebuild(self):
            self._pg_ready = True
            self._event("rebuild", epoch=self.epoch, members=[])
            return True

        def close(self):
            self._stop.set()

    return EmulatedGroup


class _Beater:
    """One thread that beats every emulated group of a host process in turn, spread evenly over the interval.

    Each group's beat is :meth:`SpareGroup._beat` on the group's own store client; one
    thread instead of one per group (thousands of Python threads starved each other).
    """

    def __init__(self, interval):
        self.interval = interval
        self.groups = []
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="beater", daemon=True)
        self.thread.start()

    def add(self, group):
        from spare_opt.torch.elastic import _Beats

        with self._lock:
            self.groups.append((group, _Beats()))

    def _run(self):
        start = time.monotonic()
        while True:
            with self._lock:
                groups = [(g, s) for g, s in self.groups if not g._stop.is_set()]
            if not groups:
                time.sleep(self.interval)
                start = time.monotonic()
                continue
            for index, (group, state) in enumerate(groups):
                group._beat(state)
                pause = start + (index + 1) * self.interval / len(groups) - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
            start = max(start + self.interval, time.monotonic() - self.interval)


class _Alarms:
    """One thread that waits for the job's alarms (``alarm/{n}``) and hands each to every emulated group of a host
    process in turn (:meth:`SpareGroup._on_alarm`, SpareGroup's own code), on a connection of its own.

    One thread instead of one per group, as :class:`_Beater` beats them: thousands of
    alarm threads woken at once by the same alarm starved each other (and the beats).
    """

    def __init__(self, port, log=None):
        self.groups = []
        self._lock = threading.Lock()
        self._port, self._log = port, log
        self.thread = threading.Thread(target=self._run, name="alarms", daemon=True)
        self.thread.start()

    def add(self, group):
        with self._lock:
            self.groups.append((group, {}))

    def _run(self):
        import torch.distributed as dist

        from spare_opt.torch._membership import _ALARM_WAIT, _get_within

        store = dist.PrefixStore("gen/0", _client(self._port))
        if self._log is not None:
            store = _Counted(store, "alarm", self._log)
        count = int(store.add("deaths", 0))
        while True:
            what = _get_within(store, f"alarm/{count + 1}", _ALARM_WAIT)
            if what is None:
                continue
            count += 1
            with self._lock:
                groups = list(self.groups)
            for group, notices in groups:
                if not group._stop.is_set():
                    group._on_alarm(store, count, what, notices)


class _Connected:
    """A group's store with the connections it clones (heartbeat, alarms) opened beforehand, under the connect lock.

    SpareGroup clones its store for the heartbeat and the alarm thread once every group
    registered; a connection that waited out a resolver timeout there made the group
    look dead.  :meth:`clone` hands them out in order.
    """

    def __init__(self, store, clones=1, log=None):
        self._store = store
        with _CONNECT:
            self._clones = [store.clone() for _ in range(clones)]
        if log is not None:
            self._store = _Counted(store, "main", log)
            self._clones = [_Counted(c, kind, log) for c, kind in zip(self._clones, ("hb", "alarm"))]

    def clone(self):
        return self._clones.pop(0)

    def __getattr__(self, name):
        return getattr(self._store, name)


#: The store client's methods that are requests to the server (what :class:`_Counted` counts).
_REQUESTS = {"set", "get", "add", "append", "check", "compare_set", "multi_get", "multi_set", "delete_key", "wait"}


class _Counted:
    """A store client whose requests are logged ``(time.time(), kind, method)`` in ``log`` (one list per process).

    ``kind`` names the connection: ``main`` (the group's training thread: the agreement),
    ``hb`` (its heartbeat) or ``alarm`` (its alarm thread).  Appending to a list under
    the GIL costs well under a microsecond a request.
    """

    def __init__(self, store, kind, log):
        self._store, self._kind, self._log = store, kind, log

    def __getattr__(self, name):
        attribute = getattr(self._store, name)
        if name not in _REQUESTS:
            return attribute

        def request(*args, **kwargs):
            self._log.append((time.time(), self._kind, name))
            return attribute(*args, **kwargs)
        return request


class _LockedBook:
    """One PlanBook shared by the threads of a host process (it is not thread-safe): each plan computed once."""

    def __init__(self, book):
        self._book = book
        self._lock = threading.Lock()

    def plan(self, failed):
        with self._lock:
            return self._book.plan(failed)

    def __getattr__(self, name):
        return getattr(self._book, name)


def _host(port, groups, layout_args, options, out, ready):
    """Run the emulated groups ``groups`` in this process (a thread each, one beat thread); write their timelines to ``out``."""
    import torch.distributed as dist

    import spare_opt
    from spare_opt.torch._plans import PlanBook

    log = []  # every request of this process's groups: (time, connection, method)
    beater = _Beater(options["interval"])
    beater.alarms = _Alarms(port, log)
    EmulatedGroup = _emulated_group_class(beater)
    layout = spare_opt.consecutive(*layout_args)
    book = _LockedBook(PlanBook(layout, 1))
    book.plan(frozenset())
    results = {}
    lock = threading.Lock()
    halt = threading.Event()
    wakes = []
    connect = []

    def run(g):
        t = time.perf_counter()
        store = _Connected(dist.PrefixStore("gen/0", _client(port)), log=log)
        connect.append(time.perf_counter() - t)
        group = EmulatedGroup(layout, g, store, heartbeat_interval=options["interval"],
                              heartbeat_timeout=options["timeout"], **options.get("extra", {}))
        group.book = book  # one cache of plans per process: the plan is timed on its own
        store.add("up", 1)
        wake = threading.Event()
        group._waiter = wake
        with lock:
            wakes.append(wake)
        while not group.aborted() and not halt.is_set():
            wake.wait()  # set by the abort, or by a halt (no timeout: a thousand threads woke every second)
            wake.clear()
        record = {"timeline": [], "failed": None}
        if group.aborted():
            group._event("recover")  # its main thread runs again: the agreement starts
            try:
                group.recover({"step": 0, "phase": "step"})
                record["failed"] = sorted(group.failed)
            except Exception as exc:  # noqa: BLE001 - reported, and the run fails
                record["error"] = repr(exc)
        record["timeline"] = [(name, when, {k: v for k, v in extra.items() if k in ("source", "failed")})
                              for name, when, extra in group.timeline]
        group.close()
        with lock:
            results[g] = record

    threads = [threading.Thread(target=run, args=(g,), daemon=True) for g in groups]
    for thread in threads:
        thread.start()
    ready.set() if ready is not None else None
    watcher = _client(port)
    while any(thread.is_alive() for thread in threads):
        if watcher.check(["gen/0/stop"]):
            halt.set()
            with lock:
                for wake in wakes:
                    wake.set()
        time.sleep(0.5)
    # The requests from the kill to this process's last agreed set, by connection and method.
    killed = float(watcher.get("gen/0/killed")) if watcher.check(["gen/0/killed"]) else float("inf")
    agreed = [when for r in results.values() for name, when, _ in r["timeline"] if name == "agree" and when >= killed]
    until = max(agreed, default=killed)
    counts = {}
    for when, kind, method in log:
        if killed <= when <= until:
            counts[f"{kind} {method}"] = counts.get(f"{kind} {method}", 0) + 1
    with open(out + ".tmp", "w") as handle:
        json.dump({"groups": results, "connect_s": connect, "requests": counts, "window": until - killed}, handle)
    os.replace(out + ".tmp", out)
    sys.stdout.flush()
    os._exit(0)  # threads blocked in the store's C++ client must not run at exit


def _victim(port, group, layout_args, options):
    import torch.distributed as dist

    import spare_opt
    from spare_opt.torch import _watcher

    if options.get("watcher"):
        # What run_worker does: a watcher forked beside the worker posts its death notice.
        _watcher.start()
        _watcher.tell(f"127.0.0.1:{port}", 0, group, 0)
    EmulatedGroup = _emulated_group_class()
    store = dist.PrefixStore("gen/0", _client(port))
    EmulatedGroup(spare_opt.consecutive(*layout_args), group, store, heartbeat_interval=options["interval"],
                  heartbeat_timeout=options["timeout"], **options.get("extra", {}))
    store.add("up", 1)
    while True:
        time.sleep(1)


def _floor_host(port, keys, value_size, out):
    """The wake-up floor's host: a thread per key, each on its own connection, blocked in a read of its key."""
    from spare_opt.torch._membership import _get_within

    times = {}
    lock = threading.Lock()

    def run(key):
        store = _client(port)
        store.add("floor/waiting", 1)
        value = _get_within(store, key, 600.0)
        when = time.time()
        with lock:
            times[key] = (when, len(value or ""))

    threads = [threading.Thread(target=run, args=(key,), daemon=True) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    with open(out + ".tmp", "w") as handle:
        json.dump(times, handle)
    os.replace(out + ".tmp", out)
    os._exit(0)


def wake_floor(groups, hosts=4, value_size=150):
    """The emulation's floor for waking ``groups`` waiters: threads in ``hosts`` processes, each blocked in a read of
    its own key on its own connection, woken by one ``multi_set`` of every key (what the winning proposal does).

    Returns ``{"groups", "hosts", "median_ms", "max_ms"}``: from the ``multi_set`` to each
    thread running again with its value (no other work: the agreement's fan-out does a
    little more per member).
    """
    os.environ.setdefault("RES_OPTIONS", "timeout:1 attempts:1")
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    store_process = subprocess.Popen([sys.executable, "-m", "spare_opt.torch.store", "--host", "127.0.0.1",
                                      "--port", "0"], stdout=subprocess.PIPE, text=True)
    port = int(store_process.stdout.readline().rsplit(":", 1)[1])
    client = _client(port)
    context = multiprocessing.get_context("spawn")
    keys = [f"floor/{g}" for g in range(groups)]
    outs, processes = [], []
    try:
        for index in range(hosts):
            out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"spare-floor-{os.getpid()}-{index}.json")
            outs.append(out)
            process = context.Process(target=_floor_host, args=(port, keys[index::hosts], value_size, out),
                                      daemon=True)
            process.start()
            processes.append(process)
        deadline = time.monotonic() + 600
        while int(client.add("floor/waiting", 0)) < groups and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2.0)  # every thread inside its read
        moment = time.time()
        client.multi_set(keys, ["x" * value_size] * groups)
        for process in processes:
            process.join(600)
        delays = []
        for out in outs:
            with open(out) as handle:
                delays.extend((when - moment) * 1e3 for when, _ in json.load(handle).values())
            os.remove(out)
    finally:
        _stop(processes, store_process)
    return {"groups": groups, "hosts": hosts, "median_ms": float(np.median(delays)), "max_ms": float(np.max(delays))}


def _stop(processes, store_process):
    """Kill the host processes still running and end the store's."""
    for process in processes:
        if process.is_alive():
            process.kill()
    store_process.terminate()
    store_process.wait()


def _log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _CpuSampler(threading.Thread):
    """Samples the CPU seconds of processes every 10 ms: :meth:`used` gives each's between two moments."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids = pids
        self.samples = []
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            row = [time.time()]
            for pid in self.pids:
                try:
                    row.append(_cpu_seconds(pid))
                except OSError:
                    row.append(None)
            self.samples.append(row)
            self._halt.wait(0.01)

    def stop(self):
        self._halt.set()
        self.join(5)

    def used(self, start, end):
        """``(store's CPU seconds, the hosts' together)`` between the samples nearest ``start`` and ``end``."""
        if not self.samples:
            return float("nan"), float("nan")
        first = min(self.samples, key=lambda r: abs(r[0] - start))
        last = min(self.samples, key=lambda r: abs(r[0] - end))
        spent = [(b - a) if a is not None and b is not None else 0.0 for a, b in zip(first[1:], last[1:])]
        return spent[0], sum(spent[1:])


def measure(groups, **options):
    """One run at ``groups`` emulated groups (see :func:`_measure`), the caller's environment left as it was.

    The run sets ``RES_OPTIONS`` and ``TORCH_CPP_LOG_LEVEL`` for the processes it starts;
    a test that calls it in-process must not pass them on to later tests (a warning that a
    later test looks for would then never be logged).
    """
    saved = {name: os.environ.get(name) for name in ("RES_OPTIONS", "TORCH_CPP_LOG_LEVEL")}
    try:
        return _measure(groups, **options)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _measure(groups, *, notices, interval, timeout, hosts, watch=8, redundancy=2, quiet=3.0, seed=0, deadline=600.0):
    """One run at ``groups`` emulated groups: a SIGKILL of one, the survivors' detection and agreement.

    Returns
    -------
    dict
        ``groups``, ``notices``, ``interval``, ``timeout``, ``agreed`` (every survivor's
        failed set equals ``[victim]``), ``detect_ms`` / ``recover_ms`` / ``agree_ms`` /
        ``plan_ms`` (median and max over the survivors, from the kill),
        ``notice_posted_ms``, ``all_joined_ms``, ``proposed_ms`` (from the kill),
        ``store_cpu`` (CPU seconds per second of the store's process), ``beats_per_s``
        and ``nominal_beats_per_s``, ``plan_compute_ms`` (one plan of ``{victim}``),
        ``startup_s``, ``connect_ms`` (a group's two connections, median and max),
        ``load_average_at_kill``.
    """
    import spare_opt
    from spare_opt.torch._plans import PlanBook

    rng = np.random.default_rng(seed)
    victim = int(rng.integers(groups))
    options = {"interval": interval, "timeout": timeout, "extra": {"timeout": deadline}, "watcher": bool(notices)}
    if watch != "default":
        options["extra"]["watch"] = watch
    layout_args = (groups, redundancy)
    # Where DNS drops reverse queries (see _client), one attempt of 1 s instead of two of
    # 5 s: the first failure then turns torch's lookups off in that process.
    os.environ.setdefault("RES_OPTIONS", "timeout:1 attempts:1")
    store_process = subprocess.Popen([sys.executable, "-m", "spare_opt.torch.store", "--host", "127.0.0.1",
                                      "--port", "0"], stdout=subprocess.PIPE, text=True)
    port = int(store_process.stdout.readline().rsplit(":", 1)[1])
    client = _client(port)
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # a warning per client connection otherwise
    context = multiprocessing.get_context("spawn")
    outs = []
    processes = []
    try:
        others = [g for g in range(groups) if g != victim]
        for index in range(hosts):
            share = others[index::hosts]
            out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"spare-cp-{os.getpid()}-{groups}-{index}.json")
            outs.append(out)
            process = context.Process(target=_host, args=(port, share, layout_args, options, out, None), daemon=True)
            process.start()
            processes.append(process)
        victim_process = context.Process(target=_victim, args=(port, victim, layout_args, options), daemon=True)
        victim_process.start()
        start = time.monotonic()
        _log(f"N = {groups}: starting {hosts} host processes and the victim ({victim})")
        while int(client.add("gen/0/up", 0)) < groups:
            if time.monotonic() - start > deadline:
                raise TimeoutError(f"only {int(client.add('gen/0/up', 0))} of {groups} groups started")
            time.sleep(0.1)
        startup = time.monotonic() - start
        time.sleep(max(2 * timeout, 1.0))  # every heartbeat thread past its first read
        # The store's load over a quiet window: its CPU time and the beats achieved.
        keys = [f"gen/0/hb/{g}" for g in range(groups)]
        before = [int(v) for v in client.multi_get(keys)]
        hosts0 = sum(_cpu_seconds(p.pid) for p in processes)
        cpu0, t0 = _cpu_seconds(store_process.pid), time.monotonic()
        time.sleep(quiet)
        after = [int(v) for v in client.multi_get(keys)]
        cpu1, t1 = _cpu_seconds(store_process.pid), time.monotonic()
        hosts_cpu = (sum(_cpu_seconds(p.pid) for p in processes) - hosts0) / (t1 - t0)
        beats = (sum(after) - sum(before)) / (t1 - t0)
        store_cpu = (cpu1 - cpu0) / (t1 - t0)
        _log(f"N = {groups}: every group up after {startup:.0f} s; {beats:.0f} beats/s; killing group {victim}")
        load = os.getloadavg()[0]
        # The CPU time of the store and of the host processes from the kill on (the profile of
        # the recovery: which processes were busy, for how long).
        sampler = _CpuSampler([store_process.pid] + [p.pid for p in processes])
        moment = time.time()
        client.set("gen/0/killed", repr(moment))  # the host processes count requests from here
        sampler.start()
        os.kill(victim_process.pid, signal.SIGKILL)
        posted = None
        if notices:  # posted by the victim's death watcher, as under run_worker
            while not client.check([f"gen/0/dead/{victim}"]) and time.time() - moment < deadline:
                time.sleep(0.001)
            posted = (time.time() - moment) * 1e3
        victim_process.join()
        # From outside, as the store saw it: when the last survivor joined the agreement
        # (``joins/1``) and when the agreed record was written (``check`` only: a
        # ``compare_set`` of the absent key would wake the members waiting on it).
        all_joined = proposed = None
        while proposed is None and time.time() - moment < deadline:
            if all_joined is None and int(client.add("gen/0/joins/1", 0)) >= groups - 1:
                all_joined = (time.time() - moment) * 1e3
            if client.check(["gen/0/epoch/1"]):
                proposed = (time.time() - moment) * 1e3
            time.sleep(0.005)
        for process in processes:
            process.join(deadline)
            if process.is_alive():
                client.set("gen/0/stop", "1")
                process.join(30)
                raise TimeoutError("the survivors did not all agree within the deadline")
        sampler.stop()
        records = {}
        connects = []
        requests = {}
        for out in outs:
            with open(out) as handle:
                document = json.load(handle)
            records.update(document["groups"])
            connects.extend(document["connect_s"])
            for name, count in document["requests"].items():
                requests[name] = requests.get(name, 0) + count
            os.remove(out)
    finally:
        _stop(processes, store_process)
    failed_sets = {json.dumps(r["failed"]) for r in records.values()}
    errors = [r["error"] for r in records.values() if "error" in r]

    def first(record, name):
        times = [when for event, when, _ in record["timeline"] if event == name and when >= moment]
        return (times[0] - moment) * 1e3 if times else float("nan")

    def stats(name):
        values = np.array([first(r, name) for r in records.values()])
        return {"median": float(np.nanmedian(values)), "max": float(np.nanmax(values)),
                "missing": int(np.isnan(values).sum())}

    sources = sorted({extra.get("source", "") for r in records.values() for event, when, extra in r["timeline"]
                      if event == "detect" and when >= moment})
    # Aborts before the kill: a group's heartbeat thread starved past the timeout (a
    # loaded machine); the survivors were then already agreeing when the victim died.
    early = sorted({extra.get("source", "") for r in records.values() for event, when, extra in r["timeline"]
                    if event == "detect" and when < moment})
    last_agree = moment + stats("agree")["max"] / 1e3
    cpu_store, cpu_hosts = sampler.used(moment, last_agree)
    book = PlanBook(spare_opt.consecutive(groups, redundancy), 1)
    book.plan(frozenset())
    t = time.perf_counter()
    book.plan(frozenset([victim]))
    plan_compute = (time.perf_counter() - t) * 1e3
    return {
        "groups": groups, "notices": bool(notices), "interval": interval, "timeout": timeout, "hosts": hosts,
        "watch": watch,
        "victim": victim, "survivors": len(records), "agreed": failed_sets == {json.dumps([victim])},
        "failed_sets": sorted(failed_sets), "errors": errors[:3], "detect_sources": sources,
        "aborts_before_kill": early,
        "detect_ms": stats("detect"), "recover_ms": stats("recover"), "agree_ms": stats("agree"),
        "joined_ms": stats("joined"),
        "plan_ms": stats("plan"),
        "plan_compute_ms": plan_compute,
        # From the kill to the last survivor's agreed set: CPU seconds of the store's process
        # and of the host processes together (2 cores: at most twice the window).
        "recovery_cpu_s": {"window": last_agree - moment, "store": cpu_store, "hosts": cpu_hosts},
        # The survivors' requests from the kill to their last agreed set, by connection and
        # method (``hb set`` counts the beats in that window: each is one ``set`` and one
        # ``multi_get``), and per survivor beyond the beats.
        "recovery_requests": requests,
        "requests_per_member": (sum(requests.values()) - 2 * requests.get("hb set", 0)) / max(len(records), 1),
        # The cost model's constants: the store's CPU per request and the host processes' CPU
        # per second for the beats (both over the quiet window), and the hosts' CPU per
        # member in the recovery beyond their beats.
        "store_us_per_request": store_cpu / max(2 * beats, 1e-9) * 1e6,
        "hosts_cpu_quiet": hosts_cpu,
        "host_ms_per_member": (cpu_hosts - hosts_cpu * (last_agree - moment)) / max(len(records), 1) * 1e3, "notice_posted_ms": posted, "all_joined_ms": all_joined, "proposed_ms": proposed, "store_cpu": store_cpu, "beats_per_s": beats,
        "nominal_beats_per_s": groups / interval, "startup_s": startup, "load_average_at_kill": load,
        "connect_ms": {"median": float(np.median(connects)) * 1e3, "max": float(np.max(connects)) * 1e3},
    }


def _hosts(groups):
    """Host processes for ``groups`` emulated groups: one per 128 (at least 4, at most 16).

    The threads of one interpreter woken at once (an alarm, the agreed record) queue for
    its lock: at N = 1,024 the last survivor had the record 0.54 s after the kill with 4
    processes of 256 groups, 0.44 s with 8 of 128.
    """
    return min(16, max(4, -(-groups // 128)))


def cost_fit(rows, predict=(2048, 4096, 16384)):
    """The linear model of the emulation's recovery: ``agree_max - notice_posted = a N + b`` (least squares over ``rows``).

    Returns ``{"a_ms", "b_ms", "predicted_ms": {N: notice + a N + b}}`` with the notice's
    median delay over the rows.  ``a`` is the emulation's serialized work per member:
    its CPU (the host processes' per member, the store's per request times the
    requests) over the cores it gets.
    """
    n = np.array([r["groups"] for r in rows], dtype=float)
    t = np.array([r["agree_ms"]["max"] - (r["notice_posted_ms"] or 0.0) for r in rows])
    a, b = np.polyfit(n, t, 1)
    notice = float(np.median([r["notice_posted_ms"] or 0.0 for r in rows]))
    return {"a_ms": float(a), "b_ms": float(b), "predicted_ms": {m: notice + a * m + b for m in predict}}


def settings(groups, interval=None, timeout=None):
    """``(heartbeat_interval, heartbeat_timeout)`` for ``groups``: the ones given, else what docs/launch.md recommends.

    One store serves every beat: 50 ms beats and a 2 s timeout up to N = 256; above, 250
    ms beats up to N = 1,024 and ``N / 4,096`` s beyond (at most 4,096 beats a second,
    8,192 requests), with a timeout of 16 beats.
    """
    beat = 0.05 if groups <= 256 else max(0.25, groups / 4096)
    return (interval if interval is not None else beat,
            timeout if timeout is not None else 2.0 if groups <= 256 else 16 * beat)


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default="64", help="comma-separated N values (default 64)")
    parser.add_argument("--notices", action="store_true", help="post the death notice when the victim dies")
    parser.add_argument("--interval", type=float, default=None,
                        help="heartbeat interval in seconds (default: what docs/launch.md recommends for N: 0.05 up "
                             "to N = 256, 0.25 up to N = 1,024, N / 4,096 above)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="heartbeat timeout in seconds (default: 2.0 up to N = 256, 16 intervals above)")
    parser.add_argument("--watch", default="8",
                        help="heartbeats each group reads (SpareGroup's watch): an integer, 'all', or 'default' "
                             "(pass nothing: the installed version's default)")
    parser.add_argument("--hosts", type=int, default=None,
                        help="host processes of the emulated groups (default: one per 128 groups, 4 to 16: "
                             "hundreds of threads of one interpreter woken at once queue for its lock)")
    parser.add_argument("--seed", type=int, default=0, help="chooses the victim")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--wake-floor", action="store_true",
                        help="measure only the emulation's floor for waking N waiters at once (see wake_floor)")
    args = parser.parse_args(argv)
    try:
        args.groups = [int(v) for v in args.groups.split(",")]
    except ValueError:
        parser.error(f"--groups must be comma-separated integers, got {args.groups!r}")
    if any(n < 4 for n in args.groups):
        parser.error("--groups values must be at least 4")
    for n in args.groups:
        interval, timeout = settings(n, args.interval, args.timeout)
        if interval <= 0 or timeout <= interval:
            parser.error("need 0 < --interval < --timeout")
    if args.watch not in ("all", "default"):
        try:
            args.watch = int(args.watch)
        except ValueError:
            parser.error(f"--watch must be an integer, 'all' or 'default', got {args.watch!r}")
        if args.watch < 1:
            parser.error("--watch must be at least 1")
    elif args.watch == "all":
        args.watch = None
    if args.hosts is not None and args.hosts < 1:
        parser.error("--hosts must be at least 1")
    return args


def main(argv=None):
    args = parse(argv)
    if args.wake_floor:
        rows = [wake_floor(n, args.hosts or _hosts(n)) for n in args.groups]
        print(json.dumps(rows, indent=2) if args.json else
              "\n".join(f"N = {r['groups']}: {r['hosts']} host processes, woken {r['median_ms']:.0f} ms median, "
                        f"{r['max_ms']:.0f} ms max after the multi_set" for r in rows))
        return 0
    rows = [measure(n, notices=args.notices, interval=settings(n, args.interval, args.timeout)[0],
                    timeout=settings(n, args.interval, args.timeout)[1], hosts=args.hosts or _hosts(n),
                    watch=args.watch, seed=args.seed) for n in args.groups]
    machine = {"cpus": os.cpu_count(), "python": platform.python_version()}
    if args.json:
        print(json.dumps({"machine": machine, "rows": rows}, indent=2))
    else:
        print(f"{'N':>6} {'watch':>5} {'notices':>7} {'beat s':>6} {'agreed':>6} {'detect med/max ms':>18} "
              f"{'agree med/max ms':>17} {'plan max ms':>11} {'store cpu':>9} {'beats/s (nominal)':>18}")
        for r in rows:
            print(f"{r['groups']:>6} {str(r['watch']):>5} {str(r['notices']):>7} {r['interval']:>6.3f} {str(r['agreed']):>6} "
                  f"{r['detect_ms']['median']:>8.0f}/{r['detect_ms']['max']:<8.0f} "
                  f"{r['agree_ms']['median']:>8.0f}/{r['agree_ms']['max']:<8.0f} {r['plan_ms']['max']:>11.0f} "
                  f"{r['store_cpu']:>9.2f} {r['beats_per_s']:>8.0f} ({r['nominal_beats_per_s']:.0f})")
    if len(rows) > 1 and not args.json:
        fit = cost_fit(rows)
        print(f"fit: last survivor's agreed set = notice + {fit['a_ms'] * 1e3:.1f} us x N + {fit['b_ms']:.0f} ms; "
              + ", ".join(f"N = {n:,}: {t:.0f} ms" for n, t in fit["predicted_ms"].items()))
    for r in rows:
        if not r["agreed"]:
            print(f"N = {r['groups']}: the survivors did not all agree on [{r['victim']}]: failed sets "
                  f"{r['failed_sets']}, errors {r['errors']}", file=sys.stderr)
    return 0 if all(r["agreed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

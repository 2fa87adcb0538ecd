"""Running independent tasks in parallel: processes, any ``concurrent.futures`` executor, Dask (private).

The Monte-Carlo (:func:`spare_opt.monte_carlo`, :func:`spare_opt.sweep`) and the
simulation (:func:`spare_opt.simulate_seeds`, :func:`spare_opt.tune`) split their work
into tasks whose results depend only on their arguments (every task carries its own
seed), so the results are the same whatever runs them:

* ``workers=1`` (the default): in this process, in order;
* ``workers=W > 1`` or ``workers=-1`` (all CPUs, the scipy convention): a
  :class:`concurrent.futures.ProcessPoolExecutor` (``fork`` where available, so that
  workers inherit the compiled numba kernels);
* ``executor=E``: any :class:`concurrent.futures.Executor` the caller owns, for example
  a :class:`~concurrent.futures.ThreadPoolExecutor` or a Dask
  ``distributed.Client(...).get_executor()`` to run on a cluster
  (:func:`dask_executor`, ``docs/scaling.md``).  ``workers`` is then ignored.

Results are always returned in task order; ``progress(done, total)`` is called in the
calling thread after each task with ``done`` counting task weights (trials, runs).

Errors (:func:`run_tasks`): a :class:`~spare_opt.SpareError` raised by a task is
re-raised as it is, wherever the task ran; anything else that goes wrong off this
process (a worker that died, a task that cannot be pickled, a Dask connection lost, an
unexpected exception in a task) raises :class:`~spare_opt.ExecutorError` naming the
task, with the original exception as ``__cause__``.  The other tasks are cancelled.
"""

import contextlib
import os
from concurrent.futures import FIRST_COMPLETED, CancelledError, Executor, as_completed, wait

from . import validation as check
from .errors import ExecutorError, ParameterError, ParameterTypeError, SpareError

__all__ = [
    "resolve_workers",
    "check_executor",
    "parallelism",
    "run_tasks",
    "LOCAL_SCHEDULER",
    "check_scheduler_address",
    "local_cluster_options",
    "local_processes",
    "dask_executor",
    "DASK_WORKER_WAIT_SECONDS",
]

#: The ``scheduler`` address that starts a Dask cluster on this machine.
LOCAL_SCHEDULER = "local"
#: Address schemes of Dask's communication layer.
_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")


def resolve_workers(workers):
    """The number of processes that ``workers`` asks for (``-1``: every CPU).

    Raises
    ------
    ParameterTypeError
        ``workers`` is not an integer.
    ParameterError
        ``workers`` is 0 or below -1.
    """
    workers = check.integer("workers", workers)
    if workers == -1:
        return os.cpu_count() or 1
    if workers < 1:
        raise ParameterError(f"workers must be a positive integer or -1 (every CPU), got {check.int_text(workers)}")
    return workers


def local_processes(workers):
    """The worker processes started on this machine for ``workers``: at most one per CPU.

    The kernels are single-threaded and hold the GIL, so processes beyond the CPUs
    only add start-up time and memory (``--workers 100000`` would start 100,000
    processes).  The process pool of :func:`run_tasks` also takes at most one per
    task; a local Dask cluster (:func:`dask_executor`) cannot know its tasks.

    Raises
    ------
    ParameterTypeError, ParameterError
        As :func:`resolve_workers`.
    """
    return min(resolve_workers(workers), os.cpu_count() or 1)


def check_executor(executor):
    """``executor`` if it is a :class:`concurrent.futures.Executor` or ``None``.

    Raises
    ------
    ParameterTypeError
        Anything else (a Dask ``Client`` itself is refused: pass ``client.get_executor()``).
    """
    if executor is not None and not isinstance(executor, Executor):
        raise ParameterTypeError(
            f"executor must be a concurrent.futures.Executor (for Dask: Client(...).get_executor()), "
            f"got {type(executor).__name__}"
        )
    return executor


def parallelism(workers=1, executor=None):
    """How many tasks can run at once: the ``workers`` processes, or the executor's own workers.

    Used to split work into enough tasks (about eight per worker).  For an executor, the
    count is read where the executor tells it (``max_workers`` of the standard pools, the
    threads of a Dask cluster's workers); otherwise it falls back on ``workers``.  Only
    the number of tasks depends on it, never the results.

    Returns
    -------
    int
        At least 1.
    """
    processes = resolve_workers(workers)
    if executor is None:
        return processes
    count = getattr(executor, "_max_workers", None)  # ThreadPoolExecutor, ProcessPoolExecutor
    client = getattr(executor, "_client", None)  # distributed.cfexecutor.ClientExecutor
    if count is None and client is not None:
        try:
            count = sum(client.nthreads().values())
        except Exception:  # a closed client: the submit will say so
            count = None
    return int(count) if isinstance(count, int) and count >= 1 else processes


def run_tasks(function, tasks, *, workers=1, executor=None, progress=None, weights=None, warm_up=None,
              on_result=None):
    """``[function(*task) for task in tasks]``, run serially, on processes or on ``executor``.

    Parameters
    ----------
    function : callable
        A module-level function (it is pickled to other processes).
    tasks : list of tuple
        The arguments of each call (pickled to other processes: keep them small,
        ``docs/scaling.md``).
    workers : int, default 1
        Processes when no ``executor`` is given; ``-1`` for every CPU.
    executor : concurrent.futures.Executor, optional
        Run the tasks here instead (the caller owns it and shuts it down).
    progress : callable, optional
        ``progress(done, total)`` after each task, in units of ``weights``, always
        called from the calling thread.
    weights : list of int, optional
        Weight of each task for ``progress`` (default 1 each).
    warm_up : callable, optional
        Called once before a process pool forks (compile numba kernels in the parent
        so that every worker inherits them).
    on_result : callable, optional
        ``on_result(index, result)`` as each task finishes (in any order, before its
        ``progress`` call), always from the calling thread.

    Returns
    -------
    list
        The results, in task order.

    Raises
    ------
    SpareError
        Raised by a task: re-raised as it is, wherever it ran.
    ExecutorError
        A task could not run or return on the pool or executor, or raised an exception
        that is not a :class:`SpareError` there (chained as ``__cause__``).  Pending
        tasks are cancelled first.
    """
    workers = resolve_workers(workers)
    check_executor(executor)
    check.callback("progress", progress)
    check.callback("on_result", on_result)
    tasks = list(tasks)
    weights = [1] * len(tasks) if weights is None else list(weights)
    total = int(sum(weights))
    results = [None] * len(tasks)
    done = 0
    if executor is None and (workers == 1 or len(tasks) <= 1):
        for index, task in enumerate(tasks):
            results[index] = function(*task)
            if on_result is not None:
                on_result(index, results[index])
            done += weights[index]
            if progress is not None:
                progress(done, total)
        return results
    own_pool = executor is None
    where = "a process pool" if own_pool else f"executor {type(executor).__name__}"
    if own_pool:
        from concurrent.futures import ProcessPoolExecutor  # imported here: a cheap "import spare_opt"

        if warm_up is not None:
            warm_up()
        executor = ProcessPoolExecutor(max_workers=min(local_processes(workers), len(tasks)),
                                       mp_context=_pool_context())
    futures = {}
    watch = None if own_pool else _DaskWatch.of(executor)
    try:
        with _quiet_dask_logs() if watch is not None else contextlib.nullcontext():
            for index, task in enumerate(tasks):
                try:
                    futures[executor.submit(function, *task)] = index
                except SpareError:
                    raise
                except Exception as exc:
                    if watch is not None:
                        watch.check_scheduler(len(tasks))
                    raise _task_error(exc, index, len(tasks), where, "could not be sent to") from exc
            for future in _completed(futures, watch, len(tasks)):
                index = futures[future]
                try:
                    results[index] = future.result()
                except (SpareError, MemoryError):
                    raise
                except Exception as exc:
                    if watch is not None:
                        watch.check_scheduler(len(tasks), cancelled=isinstance(exc, CancelledError))
                    raise _task_error(exc, index, len(tasks), where, "failed on") from exc
                if on_result is not None:
                    on_result(index, results[index])
                done += weights[index]
                if progress is not None:
                    progress(done, total)
    finally:
        # On an error or an interrupt, do not leave the rest of the work running on a
        # cluster the caller owns.
        with _quiet_dask_logs() if watch is not None else contextlib.nullcontext():
            for future in futures:
                with contextlib.suppress(Exception):
                    future.cancel()
        if own_pool:
            executor.shutdown(wait=True, cancel_futures=True)
    return results


def _completed(futures, watch, count):
    """The futures as they complete (``as_completed``); on a Dask executor, with a check of
    the cluster every :attr:`_DaskWatch.poll_seconds` while none completes."""
    if watch is None:
        yield from as_completed(futures)
        return
    pending = set(futures)
    while pending:
        finished, pending = wait(pending, timeout=watch.poll_seconds, return_when=FIRST_COMPLETED)
        if not finished:
            watch.check(count, len(pending))
        yield from finished


#: How long a run on a Dask cluster waits for a worker when the scheduler has none (none
#: joined yet, or the last one was lost with its tasks), unless Dask's configuration sets
#: ``distributed.scheduler.no-workers-timeout`` or :func:`dask_executor` is given one.
DASK_WORKER_WAIT_SECONDS = 30.0


class _DaskWatch:
    """Bounds a run on a Dask ``ClientExecutor``: Dask waits for ever for a worker when the
    scheduler has none, and a lost scheduler only shows as cancelled futures."""

    poll_seconds = 1.0

    def __init__(self, client, worker_wait_seconds):
        import time

        self.client = client
        self.address = getattr(getattr(client, "scheduler", None), "address", None) or "(unknown address)"
        self.worker_wait_seconds = worker_wait_seconds
        self.clock = time.monotonic
        self.had_worker = False
        self.no_worker_since = None

    @classmethod
    def of(cls, executor):
        """The watch of a Dask executor, or ``None`` for any other executor."""
        client = getattr(executor, "_client", None)
        if client is None or type(client).__module__.split(".")[0] != "distributed":
            return None
        wait_seconds = getattr(executor, "spare_opt_worker_wait_seconds", None)
        if wait_seconds is None:
            wait_seconds = _configured_worker_wait()
        return cls(client, wait_seconds)

    def check_scheduler(self, count, cancelled=False):
        """Raise the one-line error of a lost scheduler, if the client lost it."""
        status = getattr(self.client, "status", "running")
        if status != "running" or cancelled and not self._answers():
            raise ExecutorError(f"lost the Dask scheduler {self.address} before all {count} tasks finished "
                                f"(the Dask client is {status})")

    def _answers(self):
        try:
            self.client.nthreads(callback_timeout=5)
            return True
        except Exception:
            return False

    def check(self, count, pending):
        """Called while no task completes: a lost scheduler, or no worker for too long, raise."""
        self.check_scheduler(count)
        try:
            workers = len(self.client.nthreads(callback_timeout=max(5.0, self.poll_seconds)))
        except Exception:
            self.check_scheduler(count, cancelled=True)
            return
        now = self.clock()
        if workers:
            self.had_worker = True
            self.no_worker_since = None
            return
        if self.no_worker_since is None:
            self.no_worker_since = now
        if now - self.no_worker_since >= self.worker_wait_seconds:
            if self.had_worker:
                why = (f"its last worker was lost with {pending} of {count} tasks unfinished, and no worker "
                       f"joined within {self.worker_wait_seconds:g} s")
            else:
                why = f"no worker joined within {self.worker_wait_seconds:g} s ({pending} of {count} tasks waiting)"
            raise ExecutorError(f"the Dask scheduler {self.address} has no worker: {why} (docs/scaling.md, "
                                "'When a worker or the scheduler is lost')")


def _configured_worker_wait():
    """``distributed.scheduler.no-workers-timeout`` in seconds if Dask's configuration sets it,
    else :data:`DASK_WORKER_WAIT_SECONDS`."""
    try:
        import dask
        from dask.utils import parse_timedelta

        value = dask.config.get("distributed.scheduler.no-workers-timeout", None)
        seconds = parse_timedelta(value, default="s") if value is not None else None
    except Exception:
        seconds = None
    return float(seconds) if seconds is not None and seconds > 0 else DASK_WORKER_WAIT_SECONDS


@contextlib.contextmanager
def _quiet_dask_logs():
    """Silence Dask's loggers (``distributed`` and below) for the duration: a lost scheduler
    or worker makes them print tracebacks that :func:`run_tasks` reports as one line."""
    import logging

    names = ["distributed"] + [name for name in list(logging.root.manager.loggerDict)
                               if name.startswith("distributed.")]
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _task_error(exc, index, count, where, verb):
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else "no message"
    return ExecutorError(f"task {index + 1} of {count} {verb} {where}: {type(exc).__name__}: {detail}")


def _pool_context():
    import multiprocessing

    # fork keeps the parent's compiled numba kernels; elsewhere fall back to the default.
    if os.name == "posix" and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return None


# ----------------------------------------------------------------------------- Dask
def check_scheduler_address(address):
    """A Dask scheduler address, checked for form only: ``"local"``, ``scheme://host:port`` or ``host:port``.

    Parameters
    ----------
    address : str
        ``"local"`` (start a cluster on this machine), or the address of a running
        scheduler: ``tcp://10.0.0.5:8786``, ``tls://...``, or ``host:port`` (TCP).

    Returns
    -------
    str
        ``"local"`` or the address with its scheme (``tcp://`` added when missing).

    Raises
    ------
    ParameterTypeError
        ``address`` is not a string.
    ParameterError
        Empty, an unknown scheme, or no port (``tcp`` and ``tls``).
    """
    if not isinstance(address, str):
        raise ParameterTypeError(f"scheduler address must be a string, got {type(address).__name__}")
    text = address.strip()
    if text == LOCAL_SCHEDULER:
        return text
    scheme, sep, location = text.rpartition("://")
    scheme = scheme if sep else "tcp"
    if scheme not in _SCHEMES:
        raise ParameterError(f"scheduler address {address!r}: unknown scheme {scheme!r}; use tcp://HOST:PORT "
                             f"(or {', '.join(s + '://' for s in _SCHEMES[1:])}), or 'local'")
    if scheme in ("tcp", "tls"):
        _host_port(location, address)
    elif not location:
        raise ParameterError(f"scheduler address {address!r} names no host")
    return f"{scheme}://{location}"


def _host_port(location, address):
    host, sep, port = location.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host  # [::1]:8786
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ParameterError(f"scheduler address {address!r} needs a host and a port, e.g. tcp://10.0.0.5:8786")
    return host, int(port)


def local_cluster_options(workers):
    """Keyword arguments of the ``distributed.LocalCluster`` that ``dask_executor("local")`` starts.

    ``workers`` single-threaded worker processes (the kernels hold the GIL, so threads
    would not run them in parallel), everything on the loopback interface, no
    dashboard, and the scheduler's HTTP endpoint on a free port (Dask's default, 8787
    on every interface, may be taken by another cluster).
    """
    import logging

    return dict(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}, silence_logs=logging.ERROR)


@contextlib.contextmanager
def dask_executor(address, *, workers=1, timeout_seconds=10.0, worker_wait_seconds=None):
    """A ``concurrent.futures.Executor`` on a Dask cluster: a running one, or a local one started here.

    Parameters
    ----------
    address : str
        A scheduler address (:func:`check_scheduler_address`), or ``"local"`` to start a
        ``distributed.LocalCluster`` of ``workers`` single-threaded worker processes
        (every CPU for ``-1``, at most one per CPU: :func:`local_processes`), stopped
        on exit.
    workers : int, default 1
        Worker processes of a local cluster; ignored for a running scheduler (its
        workers run the tasks).
    timeout_seconds : float, default 10.0
        How long to wait for a scheduler that answers the TCP connection but not
        Dask's handshake.  A closed port or an unknown host fails at once.
    worker_wait_seconds : float, optional
        How long :func:`run_tasks` waits while the scheduler has no worker (none joined
        yet, or the last one was lost with its tasks) before it raises
        :class:`~spare_opt.ExecutorError`.  Default: Dask's
        ``distributed.scheduler.no-workers-timeout`` if its configuration sets one,
        else :data:`DASK_WORKER_WAIT_SECONDS` (30 s).

    Yields
    ------
    concurrent.futures.Executor
        ``Client.get_executor()``; the client (and a local cluster) are closed on exit.

    Raises
    ------
    ParameterError
        A malformed address (:func:`check_scheduler_address`) or ``workers``.
    ExecutorError
        Dask is not installed, the scheduler cannot be reached, or the local cluster
        does not start.

    Notes
    -----
    Dask's own log messages below ``ERROR`` (workers killed after a slow shutdown, a
    busy port) are silenced on the local cluster.  Workers need spare-opt installed
    (the same version); each compiles the numba kernels it uses on its first task,
    or loads them from its numba cache.
    """
    address = check_scheduler_address(address)
    processes = local_processes(workers)
    timeout_seconds = check.seconds("timeout_seconds", timeout_seconds)
    if worker_wait_seconds is not None:
        worker_wait_seconds = check.seconds("worker_wait_seconds", worker_wait_seconds)
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ExecutorError("running on a Dask cluster needs Dask: pip install 'spare-opt[dask]'") from None
    cluster = client = None
    try:
        if address == LOCAL_SCHEDULER:
            try:
                cluster = LocalCluster(**local_cluster_options(processes))
                client = Client(cluster, set_as_default=False)
            except Exception as exc:
                raise ExecutorError(f"the local Dask cluster did not start: {type(exc).__name__}: {exc}") from exc
        else:
            _probe(address, timeout_seconds)
            try:
                client = Client(address, timeout=f"{timeout_seconds}s", set_as_default=False)
            except Exception as exc:
                raise ExecutorError(f"cannot reach the Dask scheduler {address}: {_first_line(exc)}") from None
        executor = client.get_executor()
        executor.spare_opt_worker_wait_seconds = worker_wait_seconds  # read by run_tasks (_DaskWatch)
        yield executor
    finally:
        with _quiet_dask_logs():
            _close_quietly(client)
            _close_quietly(cluster)


def _probe(address, timeout_seconds):
    """Refuse an address that is not a Dask scheduler answering within ``timeout_seconds``.

    Two checks before ``Client(address)``, which would otherwise retry a closed port
    until its timeout and wait for ever on a server that accepts the connection but
    never answers Dask's handshake (its timeout covers the connection only, by design:
    dask/distributed#7698): a plain TCP connection (a closed port or an unknown host
    fails at once), then Dask's handshake bounded by ``timeout_seconds``, run on its own
    event loop in a helper thread (so it works under a running loop, e.g. Jupyter).
    """
    import asyncio  # here, not at the top: "import spare_opt" stays cheap
    import socket
    import threading

    scheme, _, location = address.partition("://")
    if scheme in ("tcp", "tls"):
        host, port = _host_port(location, address)
        try:
            with socket.create_connection((host, port), timeout=timeout_seconds):
                pass
        except OSError as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            raise ExecutorError(f"cannot reach the Dask scheduler {address}: {reason}") from None
    from distributed.comm import connect
    from distributed.security import Security

    async def handshake():
        comm = await connect(address, timeout=timeout_seconds, **Security().get_connection_args("client"))
        await comm.close()

    outcome = {}

    def run():
        try:
            asyncio.run(asyncio.wait_for(handshake(), timeout_seconds))
        except BaseException as exc:  # reported in the calling thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="spare-opt-dask-probe", daemon=True)
    thread.start()
    thread.join(timeout_seconds + 5.0)
    error = outcome.get("error")
    if thread.is_alive() or isinstance(error, TimeoutError):
        raise ExecutorError(f"cannot reach the Dask scheduler {address}: no answer to Dask's handshake within "
                            f"{timeout_seconds:g} s (is a Dask scheduler listening there?)")
    if error is not None:
        raise ExecutorError(f"cannot reach the Dask scheduler {address}: {_first_line(error)}")


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _close_quietly(resource):
    if resource is None:
        return
    with contextlib.suppress(Exception):
        resource.close()

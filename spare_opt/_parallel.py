"""Running independent tasks in parallel: processes, any ``concurrent.futures`` executor (private).

The Monte-Carlo (:func:`spare_opt.montecarlo`, :func:`spare_opt.sweep`) and the
simulation (:func:`spare_opt.simulate_many`, :func:`spare_opt.tuning`) split their work
into tasks whose results depend only on their arguments (every task carries its own
seed), so the results are the same whatever runs them:

* ``workers=1`` (the default): in this process, in order;
* ``workers=W > 1`` or ``workers=-1`` (all CPUs, the scipy convention): a
  :class:`concurrent.futures.ProcessPoolExecutor` (``fork`` where available, so that
  workers inherit the compiled numba kernels);
* ``executor=E``: any :class:`concurrent.futures.Executor` the caller owns, for example
  a Dask ``distributed.Client(...).get_executor()`` to run on a cluster
  (``docs/scaling.md``).  ``workers`` is then ignored.

Results are always returned in task order; ``progress(done, total)`` is called after
each task with ``done`` counting task weights (trials, runs).
"""

import multiprocessing
import os
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed

from . import _validation as check
from .errors import ParameterError, ParameterTypeError

__all__ = ["resolve_workers", "check_executor", "run_tasks"]


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


def check_executor(executor):
    """``executor`` if it is a :class:`concurrent.futures.Executor` or ``None``."""
    if executor is not None and not isinstance(executor, Executor):
        raise ParameterTypeError(
            f"executor must be a concurrent.futures.Executor (for Dask: Client(...).get_executor()), "
            f"got {type(executor).__name__}"
        )
    return executor


def run_tasks(function, tasks, *, workers=1, executor=None, progress=None, weights=None, warm_up=None):
    """``[function(*task) for task in tasks]``, run serially, on processes or on ``executor``.

    Parameters
    ----------
    function : callable
        A module-level function (it is pickled to other processes).
    tasks : list of tuple
        The arguments of each call.
    workers : int, default 1
        Processes when no ``executor`` is given; ``-1`` for every CPU.
    executor : concurrent.futures.Executor, optional
        Run the tasks here instead (the caller owns it and shuts it down).
    progress : callable, optional
        ``progress(done, total)`` after each task, in units of ``weights``.
    weights : list of int, optional
        Weight of each task for ``progress`` (default 1 each).
    warm_up : callable, optional
        Called once before a process pool forks (compile numba kernels in the parent
        so that every worker inherits them).

    Returns
    -------
    list
        The results, in task order.
    """
    workers = resolve_workers(workers)
    check_executor(executor)
    check.callback("progress", progress)
    tasks = list(tasks)
    weights = [1] * len(tasks) if weights is None else list(weights)
    total = int(sum(weights))
    results = [None] * len(tasks)
    done = 0
    if executor is None and (workers == 1 or len(tasks) <= 1):
        for index, task in enumerate(tasks):
            results[index] = function(*task)
            done += weights[index]
            if progress is not None:
                progress(done, total)
        return results
    own_pool = executor is None
    if own_pool:
        if warm_up is not None:
            warm_up()
        executor = ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=_pool_context())
    try:
        futures = {executor.submit(function, *task): index for index, task in enumerate(tasks)}
        for future in as_completed(futures):
            index = futures[future]
            results[index] = future.result()
            done += weights[index]
            if progress is not None:
                progress(done, total)
    finally:
        if own_pool:
            executor.shutdown(wait=True, cancel_futures=True)
    return results


def _pool_context():
    # fork keeps the parent's compiled numba kernels; elsewhere fall back to the default.
    if os.name == "posix" and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return None

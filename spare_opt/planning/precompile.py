"""Compile the controller's numba kernels before a training job needs them.

The kernels of :class:`~spare_opt.ReorderController` compile on their first call (or
load from numba's on-disk cache, ``docs/agreement.md`` "Compiled kernels").  With an
empty cache the first :meth:`~spare_opt.ReorderController.fail` takes tens of seconds,
which in a training job lands on the failure path, inside a collective's timeout.
:func:`warm_up` runs every kernel a job uses on a tiny layout at start-up instead.
"""

import time

import numpy as np

__all__ = ["warm_up"]


def warm_up(micro_batches=(1,)):
    """Compile (or load from numba's cache) every kernel a training job's controller uses.

    After it returns, :meth:`~spare_opt.ReorderController.fail`, ``recover``,
    ``set_failed``, ``restart``, ``state_dict`` / ``load_state_dict``,
    :func:`spare_opt.agreed_plan` (both methods) and the plans' arrays compile nothing
    more at the given ``m``, for any layout.

    Parameters
    ----------
    micro_batches : int or iterable of int, default (1,)
        The ``m`` values the job uses.  ``m = 1`` and ``m > 1`` run different kernels;
        every ``m > 1`` runs the same compiled code, so ``(1, 16)`` covers every ``m``.

    Returns
    -------
    float
        Seconds spent (about 20 s per kind of ``m`` with an empty cache on a 2-core
        machine, well under a second once numba's cache holds the kernels).

    Raises
    ------
    ParameterTypeError
        A value is not an integer.
    ParameterError
        A value is below 1 or above :data:`~spare_opt.MAX_MICRO_BATCHES`.

    Notes
    -----
    The kernels are numba functions compiled with ``cache=True``: the machine code is
    stored beside the package (``__pycache__``) when that is writable, otherwise in
    the user's cache folder, or in ``NUMBA_CACHE_DIR`` when it is set.  To pre-build
    the cache in a container image, run ``spare_opt.warm_up((1, 16))`` in the image
    build with ``NUMBA_CACHE_DIR`` set to a folder of the image, and set the same
    ``NUMBA_CACHE_DIR`` at run time (``docs/agreement.md``).  numba recompiles when
    the CPU model differs from the one that built the cache.

    The exact planner (:func:`spare_opt.plan_reorder`, behind
    ``agreed_plan(..., method="exact")``) imports SciPy and OR-Tools, which this call
    imports too.

    Examples
    --------
    >>> from spare_opt import warm_up
    >>> seconds = warm_up(micro_batches=(1, 4))
    """
    from .._core import validation as check
    from .agreement import agreed_plan
    from .controller import ReorderController
    from ..layouts.layout import Layout
    from .plan import check_micro_batches

    values = [micro_batches] if isinstance(micro_batches, (int, np.integer, bool, np.bool_, float)) else micro_batches
    try:
        values = list(values)
    except TypeError:
        raise check.ParameterTypeError(f"micro_batches must be an integer or an iterable of integers, "
                                       f"got {type(micro_batches).__name__}") from None
    layout = Layout((np.arange(7)[:, None] + np.array([0, 1, 3])) % 7, offsets=[0, 1, 3])
    kinds = sorted({min(check_micro_batches(m, layout.groups), 2) for m in values})
    start = time.perf_counter()
    for m in kinds:
        controller = ReorderController(layout, micro_batches=m)
        plans = [controller.fail(2), controller.fail([4], mid_step=True)]
        plans.append(controller.recover([2]))
        plans.append(controller.set_failed([1, 5], mid_step=True))
        twin = ReorderController(layout, micro_batches=m)
        twin.load_state_dict(controller.state_dict())
        plans.append(twin.fail(3))
        plans.append(controller.set_failed([3, 5, 6]))  # a wipe-out
        controller.restart()
        plans.append(controller.fail(np.int64(0)))
        plans.append(agreed_plan(layout, [6], micro_batches=m))
        plans.append(agreed_plan(layout, [6], micro_batches=m, method="exact"))
        for plan in plans:
            if plan.masked:
                plan.split, plan.order, plan.assignment, plan.failed
                plan.work_by_group()
    return time.perf_counter() - start

"""The one numba decorator of spare-opt's private kernels.

Kernels compile in nopython mode on first call and are cached on disk (``cache=True``)
so that later processes load them in milliseconds.  numba needs a writable cache
location for that (``__pycache__`` beside the module, or the user's cache folder, or
``NUMBA_CACHE_DIR``); a read-only install run by a user without a writable home has
none, and numba then refuses the decorator at import time.  :func:`kernel` falls back
to in-memory compilation there, so ``import spare_opt`` always works.
"""

from numba import njit

__all__ = ["kernel"]


def kernel(function):
    """Compile ``function`` with ``numba.njit``, cached on disk when a cache location is writable.

    Parameters
    ----------
    function : callable
        A function numba can compile in nopython mode (arrays and scalars only).

    Returns
    -------
    numba.core.registry.CPUDispatcher
        The lazily compiled kernel; ``dispatcher._cache`` says whether it is cached.

    Raises
    ------
    RuntimeError
        Any numba error other than a missing cache location.
    """
    try:
        return njit(cache=True)(function)
    except RuntimeError as exc:
        if "cannot cache" not in str(exc):
            raise
        return njit(cache=False)(function)

"""The one numba decorator of spare-opt's private kernels, compiled only when a command uses them.

:func:`kernel` does not import numba: it returns a :class:`LazyKernel` that stands for
the compiled function.  On the first call of any kernel of a module, numba is imported
and every kernel of that module is replaced, in the module's namespace, by its numba
dispatcher (``numba.njit(cache=True)``), so that kernels calling each other see
dispatchers and later calls through the module (``_controller_kernels.fail_packed``)
cost nothing extra.  Compilation itself stays lazy, per kernel and per signature: a
command compiles (or loads from the cache) only the kernels it calls, and
``import spare_opt`` imports neither numba nor compiles anything
(``docs/benchmarks.md``, "First run").

Kernels compile in nopython mode on first call and are cached on disk (``cache=True``)
so that later processes load them in milliseconds.  numba needs a writable cache
location for that (``__pycache__`` beside the module, or the user's cache folder, or
``NUMBA_CACHE_DIR``); a read-only install run by a user without a writable home has
none, and numba then refuses ``cache=True``.  The kernels then compile in memory, so
spare-opt always works.

Call kernels through their module (``from . import _controller_kernels as _k;
_k.fail_packed(...)``); a name imported with ``from ... import`` keeps the stand-in,
which works but adds a Python call to every call.
"""

import sys
import threading

__all__ = ["kernel", "LazyKernel", "materialise"]

#: ``numba.njit``, imported on the first kernel call (tests replace it).
njit = None
_LOCK = threading.RLock()  # two threads calling a first kernel at once build one dispatcher each kernel


def _njit():
    global njit
    if njit is None:
        from numba import njit as numba_njit

        njit = numba_njit
    return njit


def _compile(function):
    try:
        return _njit()(cache=True)(function)
    except RuntimeError as exc:
        if "cannot cache" not in str(exc):
            raise
        return _njit()(cache=False)(function)


class LazyKernel:
    """A numba kernel that imports numba and becomes a dispatcher on its first use.

    Calling it, or reading any dispatcher attribute (``signatures``, ``stats``,
    ``py_func``...), replaces every :class:`LazyKernel` of its module by its dispatcher
    (:func:`materialise`) and forwards to it.
    """

    def __init__(self, function):
        self.py_func = function
        self.dispatcher = None
        self.__name__ = function.__name__
        self.__qualname__ = function.__qualname__
        self.__module__ = function.__module__
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    def _get(self):
        if self.dispatcher is None:
            materialise(self.__module__)
            with _LOCK:
                if self.dispatcher is None:  # not a module-level kernel
                    self.dispatcher = _compile(self.py_func)
        return self.dispatcher

    def __call__(self, *args, **kwargs):
        return self._get()(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._get(), name)

    def __repr__(self):
        state = "not compiled yet" if self.dispatcher is None else repr(self.dispatcher)
        return f"<kernel {self.__module__}.{self.__qualname__}: {state}>"


def materialise(module_name):
    """Replace every :class:`LazyKernel` of module ``module_name`` by its numba dispatcher.

    Parameters
    ----------
    module_name : str
        A module that defines kernels with :func:`kernel` (already imported).

    Returns
    -------
    dict
        ``{name: dispatcher}`` of the kernels replaced now (empty the second time).
    """
    module = sys.modules.get(module_name)
    if module is None:
        return {}
    done = {}
    with _LOCK:
        for name, value in list(vars(module).items()):
            if isinstance(value, LazyKernel) and value.__module__ == module_name:
                if value.dispatcher is None:
                    value.dispatcher = _compile(value.py_func)
                setattr(module, name, value.dispatcher)
                done[name] = value.dispatcher
    return done


def kernel(function):
    """Declare ``function`` a numba kernel: compiled with ``numba.njit`` when first called.

    Parameters
    ----------
    function : callable
        A function numba can compile in nopython mode (arrays and scalars only).

    Returns
    -------
    LazyKernel
        Stands for ``numba.njit(cache=True)(function)`` (``cache=False`` where no cache
        location is writable); on first use it becomes that dispatcher
        (``kernel(f)._cache`` says whether it is cached on disk).

    Raises
    ------
    RuntimeError
        On first use: any numba error other than a missing cache location.
    """
    return LazyKernel(function)

"""What every result class of spare-opt shares (private): value equality and ``to_dict``.

Result classes are dataclasses, some holding numpy arrays.  The ``__eq__`` that
``dataclasses`` generates compares field tuples, which raises ``ValueError`` ("truth
value of an array is ambiguous") as soon as a field is an array; :class:`Result`
compares field by field with :func:`numpy.array_equal` instead.

Every result class has ``to_dict()`` returning a JSON-ready dict (plain Python numbers,
lists, ``None`` for a value that JSON cannot hold such as NaN or infinity); the one JSON
writer is :func:`spare_opt._core.io.dumps_json`, which refuses NaN.  ``to_json()`` is the
old name of ``to_dict()`` and warns.
"""

import dataclasses
import warnings

import numpy as np

__all__ = ["Result", "values_equal"]


def values_equal(a, b):
    """Whether two field values are equal: arrays by value, containers recursively."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # NaN fields (an interval that cannot be given) compare equal
    return bool(a == b)


class Result:
    """Mixin of the result dataclasses: array-aware ``==`` and the deprecated ``to_json``.

    Subclasses define ``to_dict()``.  Two results are equal when they are of the same
    class family (one is an instance of the other's class) and every dataclass field is
    equal by :func:`values_equal`.
    """

    __hash__ = None

    def __eq__(self, other):
        if not (isinstance(other, type(self)) or isinstance(self, type(other))):
            return NotImplemented
        return all(values_equal(getattr(self, f.name), getattr(other, f.name))
                   for f in dataclasses.fields(self) if f.compare)

    def to_json(self, *args, **kwargs):
        """Deprecated name of :meth:`to_dict` (same arguments, same dict)."""
        warnings.warn(f"{type(self).__name__}.to_json() is deprecated; use to_dict()", DeprecationWarning,
                      stacklevel=2)
        return self.to_dict(*args, **kwargs)

"""Argument checks shared by every public function of spare-opt (private).

Public functions validate their arguments here and nowhere else, so that the same
mistake gets the same message everywhere.  The rule (``docs/api.md``):

* a value of the wrong *type* raises :class:`~spare_opt.errors.ParameterTypeError`
  (a ``TypeError``): a float or a bool where an integer is needed, a string where a
  number is needed, a path where a :class:`~spare_opt.Layout` is needed;
* a value of the right type but out of range raises
  :class:`~spare_opt.errors.ParameterError` (a ``ValueError``), or the more specific
  ``ValueError`` subclass passed as ``error``.

Every check returns the value converted to a plain Python type (``int``, ``float``,
``bool``), so that numpy scalars never leak into JSON output.

This module imports nothing of spare-opt but its errors, so that every module can use
it; the type check of one of the project's own classes lives beside the class
(:func:`spare_opt.layout.check_layout`).
"""

import math
import numbers

import numpy as np

from .errors import ParameterError, ParameterTypeError

__all__ = [
    "integer",
    "count",
    "seed",
    "number",
    "seconds",
    "probability",
    "flag",
    "choice",
    "instance",
    "callback",
    "integers",
    "numbers_",
    "sequence",
]


def _is_integer(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def integer(name, value, *, minimum=None, maximum=None, error=ParameterError):
    """``value`` as an ``int`` in ``[minimum, maximum]``.

    Parameters
    ----------
    name : str
        How the argument is called in messages (``"trials"``, ``"groups N"``).
    value : object
    minimum, maximum : int, optional
        Inclusive bounds.
    error : type, default ParameterError
        The ``ValueError`` subclass raised for a value out of range.

    Returns
    -------
    int

    Raises
    ------
    ParameterTypeError
        ``value`` is not an integer (``bool`` and floats, even integral ones, are refused).
    error
        ``value`` is out of range.
    """
    if not _is_integer(value):
        raise ParameterTypeError(f"{name} must be an integer, got {_shown(value)}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise error(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise error(f"{name} must be <= {maximum:,}, got {value}")
    return value


def count(name, value, *, maximum=None):
    """``value`` as a positive ``int`` (``1 <= value <= maximum``); see :func:`integer`."""
    return integer(name, value, minimum=1, maximum=maximum)


def seed(value, name="seed"):
    """``value`` as a non-negative ``int``: a seed for ``numpy.random.SeedSequence``.

    ``SeedSequence`` refuses negative seeds with a bare ``ValueError``, and a float seed
    would be truncated silently; both are refused here.
    """
    return integer(name, value, minimum=0)


def number(name, value, *, minimum=None, above=None, maximum=None, allow_inf=False, error=ParameterError):
    """``value`` as a ``float``, finite unless ``allow_inf``, within the given bounds.

    Parameters
    ----------
    name : str
    value : object
    minimum : float, optional
        Inclusive lower bound.
    above : float, optional
        Exclusive lower bound.
    maximum : float, optional
        Inclusive upper bound.
    allow_inf : bool, default False
        Accept ``+inf`` (never NaN).
    error : type, default ParameterError

    Returns
    -------
    float

    Raises
    ------
    ParameterTypeError
        ``value`` is not a real number (``bool``, strings, complex numbers are refused).
    error
        ``value`` is NaN, infinite (unless allowed) or out of range.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(f"{name} must be a number, got {_shown(value)}")
    try:
        result = float(value)
    except OverflowError:  # an integer beyond the float range
        raise error(f"{name} is too large for a float, got a {len(str(value))}-digit integer") from None
    if math.isnan(result) or (math.isinf(result) and not (allow_inf and result > 0)):
        raise error(f"{name} must be finite, got {result}")
    if minimum is not None and result < minimum:
        raise error(f"{name} must be >= {minimum}, got {result:g}")
    if above is not None and result <= above:
        raise error(f"{name} must be > {above}, got {result:g}")
    if maximum is not None and result > maximum:
        raise error(f"{name} must be <= {maximum}, got {result:g}")
    return result


def seconds(name, value, *, positive=True, allow_inf=False):
    """``value`` as a number of seconds, ``> 0`` (or ``>= 0`` when not ``positive``); see :func:`number`."""
    if positive:
        return number(name, value, above=0.0, allow_inf=allow_inf)
    return number(name, value, minimum=0.0, allow_inf=allow_inf)


def probability(name, value):
    """``value`` as a ``float`` in ``[0, 1]``; see :func:`number`."""
    return number(name, value, minimum=0.0, maximum=1.0)


def flag(name, value):
    """``value`` as a ``bool``; only ``bool`` and ``numpy.bool_`` are accepted (``1`` is not a flag)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterTypeError(f"{name} must be True or False, got {_shown(value)}")
    return bool(value)


def choice(name, value, options):
    """``value`` if it is one of ``options`` (strings); the message lists them.

    Raises
    ------
    ParameterTypeError
        ``value`` is not a string.
    ParameterError
        ``value`` is not one of ``options``.
    """
    if not isinstance(value, str):
        raise ParameterTypeError(f"{name} must be one of {', '.join(map(repr, options))}, got {_shown(value)}")
    if value not in options:
        raise ParameterError(f"{name} must be one of {', '.join(map(repr, options))}, got {value!r}")
    return value


def instance(name, value, kind, hint=""):
    """``value`` if it is an instance of ``kind``; :class:`ParameterTypeError` otherwise.

    ``hint`` is appended to the message (for example ``" (spare_opt.read_fault_trace)"``).
    """
    if not isinstance(value, kind):
        raise ParameterTypeError(f"{name} must be a {kind.__name__}{hint}, got {type(value).__name__}")
    return value


def callback(name, value):
    """``value`` if it is callable or ``None``; :class:`ParameterTypeError` otherwise."""
    if value is not None and not callable(value):
        raise ParameterTypeError(f"{name} must be a callable or None, got {type(value).__name__}")
    return value


def integers(name, values, *, minimum=None, maximum=None, unique=True):
    """A non-empty sequence of integers as a tuple, each checked by :func:`integer`.

    Repeats are dropped (first occurrence kept) when ``unique``.

    Raises
    ------
    ParameterTypeError
        ``values`` is not an iterable (a string is not), or an item is not an integer.
    ParameterError
        ``values`` is empty or an item is out of range.
    """
    items = sequence(name, values)
    checked = tuple(integer(f"{name}: each value", v, minimum=minimum, maximum=maximum) for v in items)
    return tuple(dict.fromkeys(checked)) if unique else checked


def numbers_(name, values, *, above=None, minimum=None):
    """A non-empty sequence of finite numbers as a tuple of floats, each checked by :func:`number`."""
    items = sequence(name, values)
    return tuple(number(f"{name}: each value", v, above=above, minimum=minimum) for v in items)


def sequence(name, values):
    """``values`` as a non-empty list; strings, bytes and dicts are not sequences here.

    Raises
    ------
    ParameterTypeError
        ``values`` is not iterable, or is a string, bytes or a dict.
    ParameterError
        ``values`` is empty.
    """
    if isinstance(values, (str, bytes, dict)):
        raise ParameterTypeError(f"{name} must be a sequence, got {type(values).__name__}")
    try:
        items = list(values)
    except TypeError:
        raise ParameterTypeError(f"{name} must be a sequence, got {type(values).__name__}") from None
    if not items:
        raise ParameterError(f"{name} is empty")
    return items


def _shown(value):
    """A short description of ``value`` for a message: its repr when short, else its type."""
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        text = ""
    if text and len(text) <= 40:
        return f"{text} ({type(value).__name__})"
    return f"a {type(value).__name__}"

"""Argument checks shared by every public function of spare-opt (private).

Public functions validate their arguments here and nowhere else, so that the same
mistake gets the same message everywhere.  A public function (or a CLI command) checks
its arguments once, at the boundary; the private helpers it calls receive checked values
and say so in their docstrings ("Arguments are checked by the caller"), as
scikit-learn's private helpers trust what ``validate_params`` checked.  A helper that
two public functions share checks nothing their checks already did
(``tests/test_checks_once.py`` counts the calls into this module along
:func:`spare_opt.simulate_seeds`).  The rule for the checks themselves (``docs/api.md``):

* a value of the wrong *type* raises :class:`~spare_opt._core.errors.ParameterTypeError`
  (a ``TypeError``): a float or a bool where an integer is needed, a string where a
  number is needed, a path where a :class:`~spare_opt.Layout` is needed;
* a value of the right type but out of range raises
  :class:`~spare_opt._core.errors.ParameterError` (a ``ValueError``), or the more specific
  ``ValueError`` subclass passed as ``error``.

Every check returns the value converted to a plain Python type (``int``, ``float``,
``bool``), so that numpy scalars never leak into JSON output.

This module imports nothing of spare-opt but its errors, so that every module can use
it; the type check of one of the project's own classes lives beside the class
(:func:`spare_opt.layouts.layout.check_layout`).
"""

import math
import numbers
import re

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
    "parse_int",
    "parse_float",
    "int_text",
    "MAX_INT_DIGITS",
    "MAX_SEED",
    "MAX_GROUPS",
    "MAX_RUNS",
    "MIN_WEIBULL_SHAPE",
    "weibull_shape",
]

#: Most digits a written integer may have: Python's own limit on converting a decimal
#: string to an int (``sys.get_int_max_str_digits()``, 4300 by default), fixed here so
#: that the same text gives the same answer whatever the interpreter's setting.
MAX_INT_DIGITS = 4300
#: Largest seed: far beyond any use, and small enough that every message can print it
#: (``numpy.random.SeedSequence`` mixes any entropy into 128 bits).
MAX_SEED = 2**128 - 1
#: Most DP groups ``N``: group ids are 32-bit integers in every array of spare-opt.
MAX_GROUPS = 2**31 - 1
#: Most runs (seeds) of one configuration: the task list is built up front.
MAX_RUNS = 10**6
#: Least Weibull shape ``k`` of failure gaps.  Every draw is ``scale * E^(1/k)`` with ``E``
#: a standard exponential (numpy draws it in ``[2^-53, 53 ln 2]``) and
#: ``scale = mean / Gamma(1 + 1/k)``.  With ``1/k <= 20``, ``Gamma(1 + 1/k) <= 2.4e18``
#: and the ``1/k``-th powers of every draw but one in ``10^15`` (``E >= 1e-15``) lie in
#: ``[1e-300, 1e32]``, inside the float range, and so does every truncation of the
#: gaps at a window.  Below it draws underflow to 0 or overflow, the scale search of a
#: truncated Weibull underflows, and the number of draws a run needs explodes (most
#: gaps are tiny, the mean is carried by rare huge ones).  Fitted shapes of real
#: clusters are 0.3 to 3.
MIN_WEIBULL_SHAPE = 0.05
#: A written integer: ASCII digits with an optional sign (no ``_``, no other scripts' digits).
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
#: A written real number: ASCII decimal, optional fraction and exponent (no ``_``, no hex,
#: no ``nan``; ``inf``/``infinity`` only where infinity is allowed).
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_INFINITY = re.compile(r"\+?inf(?:inity)?", re.ASCII | re.IGNORECASE)


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
        raise error(f"{name} must be >= {int_text(minimum)}, got {int_text(value)}")
    if maximum is not None and value > maximum:
        shown = f"{maximum:,}" if abs(maximum) < 10**30 else int_text(maximum)
        raise error(f"{name} must be <= {shown}, got {int_text(value)}")
    return value


def int_text(value):
    """``value`` (an int) written for a message: its digits, or ``"a 5000-digit integer"`` when long.

    ``str()`` of an integer beyond Python's conversion limit (4300 digits) raises
    ``ValueError``; a message must never fail, nor be thousands of digits long.
    """
    value = int(value)
    magnitude = -value if value < 0 else value
    if magnitude.bit_length() <= 128:  # at most 39 digits
        return str(value)
    digits = int(magnitude.bit_length() * math.log10(2)) + 1
    return f"a {'negative ' if value < 0 else ''}{digits}-digit integer"


def parse_int(text, name, *, error=ParameterError):
    """The integer written in ``text``: the one integer parser of spare-opt for written input.

    Every integer a person or a file writes (``--fail 3,17``, ``--set steps=20000``, every
    integer option of the command line, the numbers of a CSV fault log) goes through
    here, so that the same text is accepted or refused the same way everywhere.

    Parameters
    ----------
    text : str
        ASCII decimal digits with an optional ``+``/``-`` sign; white space around is
        ignored.
    name : str or None
        What the number is, for messages (``"steps"``, ``"group id"``); ``None``
        leaves it out (the caller names it).
    error : type, default ParameterError
        The ``ValueError`` subclass raised.

    Returns
    -------
    int

    Raises
    ------
    ParameterTypeError
        ``text`` is not a string.
    error
        ``text`` is not an integer (``int()`` would also take ``"1_000"`` and the
        digits of other scripts, such as Arabic-Indic ``"\\u0661\\u0662"``: both are
        refused here), or has more than :data:`MAX_INT_DIGITS` digits.
    """
    if not isinstance(text, str):
        raise ParameterTypeError(f"{name or 'an integer'} must be given as text, got {type(text).__name__}")
    prefix = f"{name}: " if name else ""
    stripped = text.strip()
    if not _INT.fullmatch(stripped):
        raise error(f"{prefix}{_quoted(text)} is not an integer (ASCII digits with an optional sign)")
    digits = len(stripped.lstrip("+-"))
    if digits > MAX_INT_DIGITS:
        raise error(f"{prefix}an integer of {digits} digits is too long (at most {MAX_INT_DIGITS})")
    return int(stripped)


def parse_float(text, name, *, allow_inf=False, error=ParameterError):
    """The real number written in ``text``, finite unless ``allow_inf``: the one float parser for written input.

    Parameters
    ----------
    text : str
        An ASCII decimal number (``"64"``, ``"0.5"``, ``"1e-3"``, ``".5"``); white space
        around is ignored; ``"inf"`` only with ``allow_inf``.
    name : str or None
        What the number is, for messages (``None``: left out).
    allow_inf : bool, default False
        Accept ``inf`` / ``infinity`` (never NaN).
    error : type, default ParameterError

    Returns
    -------
    float

    Raises
    ------
    ParameterTypeError
        ``text`` is not a string.
    error
        ``text`` is not a decimal number (``float()`` would also take ``"1_0"``,
        ``"nan"`` and other scripts' digits), names NaN or infinity (unless allowed),
        or is finite but too large for a float (``"1e999"`` would become infinity) or
        too small (a non-zero number such as ``"1e-999"`` would become 0).
    """
    if not isinstance(text, str):
        raise ParameterTypeError(f"{name or 'a number'} must be given as text, got {type(text).__name__}")
    prefix = f"{name}: " if name else ""
    stripped = text.strip()
    if allow_inf and _INFINITY.fullmatch(stripped):
        return math.inf
    if not _FLOAT.fullmatch(stripped):
        raise error(f"{prefix}{_quoted(text)} is not a finite decimal number")
    value = float(stripped)
    if math.isinf(value):
        raise error(f"{prefix}{_quoted(text)} is too large for a float (it overflows to infinity)")
    if value == 0.0 and any(c in "123456789" for c in stripped.split("e")[0].split("E")[0]):
        raise error(f"{prefix}{_quoted(text)} is too small for a float (it underflows to 0)")
    return value


def _quoted(text, limit=40):
    """``text`` quoted for a message, shortened when long."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def count(name, value, *, maximum=None):
    """``value`` as a positive ``int`` (``1 <= value <= maximum``); see :func:`integer`."""
    return integer(name, value, minimum=1, maximum=maximum)


def seed(value, name="seed"):
    """``value`` as a non-negative ``int``: a seed for ``numpy.random.SeedSequence``.

    ``SeedSequence`` refuses negative seeds with a bare ``ValueError``, and a float seed
    would be truncated silently; both are refused here, and so is a seed above
    :data:`MAX_SEED` (a 5000-digit seed could not even be printed in a report).
    """
    return integer(name, value, minimum=0, maximum=MAX_SEED)


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
        raise error(f"{name} is too large for a float, got {int_text(value)}") from None
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


def weibull_shape(value, name="weibull_shape", error=ParameterError):
    """``value`` as a Weibull shape ``k``: a finite ``float >= MIN_WEIBULL_SHAPE``.

    The one shape check of every Weibull in spare-opt (simulation parameters, failure
    models, synthetic traces), so that the range accepted is the one in which every
    later computation is sound (:data:`MIN_WEIBULL_SHAPE`).

    Raises
    ------
    ParameterTypeError
        ``value`` is not a real number.
    error
        ``value`` is NaN, infinite or below :data:`MIN_WEIBULL_SHAPE`.
    """
    shape = number(name, value, above=0.0, error=error)
    if shape < MIN_WEIBULL_SHAPE:
        raise error(f"{name} must be >= {MIN_WEIBULL_SHAPE} (below it the Weibull draws E^(1/k) leave the float "
                    f"range and most gaps are tiny), got {shape:g}")
    return shape


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

"""Failure sets: the DP groups that have failed, as given by a user or a file.

:func:`normalise_groups` is the one check of a collection of group ids against ``N``
(used by the planner, the controller and the analysis tools); :func:`parse_group_ids`
and :func:`read_failure_set` read ids written by a person (``--fail 3,17,42``) or a
file (a JSON list, or ids separated by commas and white space).
"""

from collections.abc import Mapping

import numpy as np

from .._core import validation as check
from .._core.io import as_path, parse_json_text, reading
from .._core.errors import FailureSetError

__all__ = ["normalise_groups", "check_failed_set", "parse_group_ids", "read_failure_set"]


def normalise_groups(groups, n, what="failed groups"):
    """Validate a collection of group ids against ``N`` and return it as a sorted int32 array.

    Parameters
    ----------
    groups : iterable of int
        Group ids (Python or numpy integers, or a 1-D integer array).
    n : int
        Number of DP groups ``N``: valid ids are ``[0, N)``.
    what : str, default "failed groups"
        What the ids are, for error messages.

    Returns
    -------
    numpy.ndarray of int32, shape (k,)
        The ids, sorted ascending.

    Raises
    ------
    FailureSetError
        ``groups`` is not a collection (``None``, a bare number, a string, a mapping), or a value
        is not an integer, is outside ``[0, N)``, or is repeated.
    """
    if isinstance(groups, (str, bytes)):
        raise FailureSetError(f"{what}: expected an iterable of integer group ids, got the string {groups!r}")
    if isinstance(groups, Mapping):
        # Iterating a dict gives its keys only: {group: step} would silently drop the values.
        raise FailureSetError(f"{what}: expected an iterable of integer group ids, got a mapping {groups!r} "
                              "(pass list(mapping) if its keys are the groups)")
    if isinstance(groups, np.ndarray) and groups.ndim > 1:
        raise FailureSetError(f"{what}: expected a 1-D iterable of group ids, got an array of shape {groups.shape}")
    if isinstance(groups, np.ndarray) and groups.ndim == 1 and groups.dtype.kind in "iu":
        # Fast path for integer arrays (the controller's and replay's calls).
        outside = groups[(groups < 0) | (groups >= n)]
        if outside.size:
            raise FailureSetError(f"{what}: group {int(outside[0])} is out of range [0, {n})")
        return _sorted_unique(groups.astype(np.int64), what)
    try:
        values = list(groups)
    except TypeError:
        raise FailureSetError(
            f"{what}: expected an iterable of integer group ids, got {type(groups).__name__}"
        ) from None
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise FailureSetError(f"{what}: {value!r} is not an integer group id")
        # Range check on Python ints first: ids beyond int64 would overflow numpy.
        if not 0 <= int(value) < n:
            raise FailureSetError(f"{what}: group {check.int_text(value)} is out of range [0, {n})")
    return _sorted_unique(np.asarray(values, dtype=np.int64), what)


def check_failed_set(groups, n, what="failed set"):
    """A whole failed set (one group id, or an iterable of ids) as a sorted int32 array.

    The one rule for a failed set everywhere it is given whole
    (:meth:`ReorderController.set_failed`, :func:`spare_opt.agreed_plan`,
    ``spare_opt.torch.PlanBook.plan``): :func:`normalise_groups`, plus a single id
    (a Python or numpy integer) for a set of one.  A bool, a float (even ``1.0``), a
    string or a nested list is refused, never converted.

    Raises
    ------
    FailureSetError
        As :func:`normalise_groups`; also for a bare bool or float.
    """
    if isinstance(groups, np.ndarray) and groups.ndim == 0:
        groups = groups[()]
    if isinstance(groups, (bool, np.bool_)) or isinstance(groups, (float, np.floating)):
        raise FailureSetError(f"{what}: {groups!r} is not an integer group id")
    if isinstance(groups, (int, np.integer)):
        groups = [groups]
    try:
        return normalise_groups(groups, n, what=what)
    except (TypeError, OverflowError):
        raise FailureSetError(f"{what} must be an iterable of group ids, got {groups!r}") from None


def _sorted_unique(array, what):
    """Sorted int32 copy of in-range int64 ids; FailureSetError on a repeated id."""
    if array.size:
        ordered = np.sort(array)
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
        if repeated.size:
            raise FailureSetError(f"{what}: group {int(repeated[0])} is listed more than once")
        array = ordered
    return array.astype(np.int32)


def parse_group_ids(text):
    """Parse group ids written as ``"3,17,42"`` (commas and/or white space) into ints.

    Ids are ASCII decimal integers of at most 4300 digits, read by the project's one
    integer parser :func:`spare_opt._core.validation.parse_int` (``int()`` would also take
    ``"1_0"`` and other scripts' digits).  An empty slot between commas (``"1,,2"``, a
    trailing comma) is refused: it usually means an id went missing.  Range and
    repeats are checked against a layout by :func:`normalise_groups`.

    Parameters
    ----------
    text : str

    Returns
    -------
    list of int

    Raises
    ------
    FailureSetError
        ``text`` holds no id, an empty slot between commas, or a token that is not an
        integer or is too long.
    ParameterTypeError
        ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise check.ParameterTypeError(f"group ids must be given as text, got {type(text).__name__}")
    if not text.strip():
        raise FailureSetError("no group ids given (an empty list); leave the option out for none")
    values = []
    for piece in text.split(","):
        tokens = piece.split()
        if not tokens:
            raise FailureSetError(f"empty group id between commas in {text!r}")
        for token in tokens:
            values.append(check.parse_int(token, "group id", error=FailureSetError))
    return values


def read_failure_set(path):
    """Read failed group ids from a file: a JSON list, or ids separated by commas and/or white space.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    list of int
        The ids in file order (``[]`` for a file holding ``[]``); range and repeats
        are checked against a layout by :func:`normalise_groups`.

    Raises
    ------
    FailureSetError
        The file is missing, unreadable, empty, malformed JSON, a JSON value other than
        a list of integers, or text with a token that is not an integer.
    """
    path = as_path(path, FailureSetError, "failure-set file")
    with reading(path, FailureSetError, "failure-set file", "a list of group ids"):
        text = path.read_text(encoding="utf-8-sig").strip()  # a byte-order mark is skipped, as in CSV logs
    if not text:
        raise FailureSetError(f"{path} holds no group ids (write [] for an empty failure set)")
    if text[0] not in "[{":
        try:
            return parse_group_ids(text)
        except FailureSetError as exc:
            raise FailureSetError(f"{path}: {exc}") from None
    values = parse_json_text(text, FailureSetError, str(path))
    if not isinstance(values, list):
        raise FailureSetError(f"{path}: expected a JSON list of group ids, got a JSON object")
    for item in values:
        if isinstance(item, bool) or not isinstance(item, int):
            raise FailureSetError(f"{path}: {item!r} is not an integer group id")
    return values

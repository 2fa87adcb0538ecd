"""The rules by which a plan document is read (:meth:`~spare_opt.planning.plan.Plan.from_dict`)
and a ``patch`` given in the old form is converted (:class:`~spare_opt.planning.plan.Plan`).

This module imports nothing of ``plan.py``, so that ``plan.py`` can import it without a cycle.
"""

import math
import warnings

import numpy as np

from .._core.errors import PlanError


_INT32_MAX = int(np.iinfo(np.int32).max)
_INT64_MAX = int(np.iinfo(np.int64).max)


def _doc_integer(name, value, low, high, suffix="", *, text=False):
    """``value`` of a plan document as an int: the one rule of :meth:`Plan.from_dict` for
    every integer (ids, counts, sizes): a JSON integer (a Python or numpy integer, or a
    float with a whole, finite value, as JSON writers may give) in ``[low, high]``; never a
    bool, a string (``text``: the digits of a JSON object key, as ``patch`` keys are), a
    fraction, an infinity or NaN."""
    if text and isinstance(value, str):
        if not (value.isascii() and (value.isdigit() or value[:1] == "-" and value[1:].isdigit())):
            raise PlanError(f"plan document: {name} must be an integer, got {value!r}")
        value = int(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise PlanError(f"plan document: {name} must be an integer {suffix}".rstrip() + f", got {value!r}")
    if isinstance(value, (float, np.floating)):
        if not (math.isfinite(value) and float(value).is_integer()):
            raise PlanError(f"plan document: {name} must be an integer {suffix}".rstrip() + f", got {value!r}")
        value = int(value)
    value = int(value)
    if not low <= value <= high:
        raise PlanError(f"plan document: {name} must be in [{low:,}, {high:,}], got {value:,}")
    return value


def _doc_array(name, value, ndim, low):
    """A list of the plan document as an int32 array of ``ndim`` dimensions, each entry by
    the rule of :func:`_doc_integer` (in ``[low, 2**31 - 1]``); a string, a ragged or
    more deeply nested list is refused, not flattened."""
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, (list, tuple, np.ndarray)):
        raise PlanError(f"plan document: {name} must be a list, got {value!r}")
    try:
        array = np.asarray(value)
    except ValueError:
        raise PlanError(f"plan document: {name} is not a rectangular list") from None
    if array.size == 0 and array.ndim <= ndim:
        return np.zeros((0,) * ndim if ndim == 1 else (0, 0), dtype=np.int32)
    if array.dtype == object or array.ndim != ndim:
        got = "" if array.dtype == object else f", got a {array.ndim}-D list"
        raise PlanError(f"plan document: {name} must be a {ndim}-D list of integers{got}")
    if isinstance(value, (list, tuple)) and array.dtype.kind in "iu":
        # numpy reads [1, True] as [1, 1]: a bool among integers is refused as everywhere else.
        if any(isinstance(item, bool) for item in np.asarray(value, dtype=object).ravel().tolist()):
            raise PlanError(f"plan document: {name} holds a bool, not an integer")
    if array.dtype.kind == "f":
        if not (np.isfinite(array).all() and (array == np.round(array)).all()):
            bad = array[~np.isfinite(array) | (array != np.round(array))]
            raise PlanError(f"plan document: {name} holds {bad.flat[0]!r}, not an integer")
    elif array.dtype.kind not in "iu":
        raise PlanError(f"plan document: {name} must hold integers, got {array.dtype.name} values")
    if array.min() < low or array.max() > _INT32_MAX:
        bad = array[(array < low) | (array > _INT32_MAX)]
        raise PlanError(f"plan document: {name} holds {bad.flat[0]:,}, outside [{low}, {_INT32_MAX:,}]")
    return array.astype(np.int32)


_PLAN_KEYS = ("status", "stack_number", "lower_bound", "failed", "lost_shards", "assignment", "order", "moves",
              "patch", "micro_batches", "load", "step_cost", "split")


def _patch_pairs(patch, micro_batches):
    """``patch`` with every item a ``(shard type, micro-batch)`` tuple of ints; bare shard
    types (the ``m = 1`` form before release 0.3) become ``(t, 0)`` with a DeprecationWarning."""
    pairs, old_form = {}, False
    for g, items in patch.items():
        converted = []
        for item in items:
            if isinstance(item, (tuple, list, np.ndarray)):
                t, j = item
                converted.append((int(t), int(j)))
            else:
                old_form = True
                converted.append((int(item), 0))
        pairs[int(g)] = converted
    if old_form:
        if micro_batches != 1:
            raise PlanError(f"patch items must be (shard type, micro-batch) pairs at micro_batches = {micro_batches}")
        warnings.warn("a Plan patch of bare shard types is deprecated: patch items are (shard type, micro-batch) "
                      "pairs at every m since spare-opt 0.3 ((t, 0) at m = 1); Plan.patch_shard_types gives the "
                      "shard types alone", DeprecationWarning, stacklevel=4)
    return pairs

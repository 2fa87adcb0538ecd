"""The verdict as a file to deploy: the chosen setting, its layout and what it assumed (``compare -o FILE``).

The recommendation is a layout file (``docs/formats.md``): the SPARe layout of the
verdict's SPARe row, so ``plan``, ``validate`` and a data loader read it as any layout,
with ``metadata["recommendation"]`` holding the rest: the strategy the verdict chose
and its ``r``, ``m`` and checkpoint period, the SPARe setting of the layout, the
inputs it assumed (parameters, failure source, scaling, semantics, seeds), the verdict
table (one row per strategy) and the layout's fingerprint.  ``metadata["micro_batches"]``
is the ``m`` the layout is meant to run with.
"""

import hashlib
import math

from .._core import validation as check
from .._core.errors import ParameterError
from .._core.stats import finite_or_none
from ..layouts.layout import Layout, recommendation_digest, stacks_digest

__all__ = ["RECOMMENDATION_VERSION", "layout_fingerprint", "recommendation_layout", "write_recommendation"]

#: Version of ``metadata["recommendation"]``.
RECOMMENDATION_VERSION = 2


def layout_fingerprint(layout):
    """SHA-256 of a layout's stacks: equal for equal layouts, whatever file they came from.

    Parameters
    ----------
    layout : Layout

    Returns
    -------
    str
        ``"sha256:"`` and 64 hex digits, over ``N``, ``r`` and the stacks (int64,
        little-endian, row by row).

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a :class:`Layout`.
    """
    check.instance("layout", layout, Layout)
    return stacks_digest(layout.groups, layout.redundancy, layout.stacks)  # what Layout.load checks


def recommendation_layout(result):
    """The recommendation of a verdict: its SPARe row's layout with the recommendation in its metadata.

    Parameters
    ----------
    result : CompareResult
        From :func:`spare_opt.compare` with SPARe settings.

    Returns
    -------
    Layout
        The layout the SPARe row ran (``result.layouts``), its metadata holding
        ``micro_batches`` (the ``m`` of the SPARe setting held) and ``recommendation``:
        ``version``, ``chosen_strategy`` (the verdict's best overall: ``"spare"``,
        ``"ckpt"``, ``"rep"``, ``"elastic"`` or ``"redistribute"``),
        ``best_exact_strategy``, ``spare_chosen`` (bool), ``layout_held`` (``"the
        verdict's choice"`` or ``"the best exact SPARe setting"`` when another strategy
        won), ``chosen`` (strategy, redundancy, micro_batches,
        checkpoint_period_seconds, ttt_ratio, ttt_ci of the verdict's best strategy),
        ``spare`` (the same for the layout's setting), ``rule`` (how the setting was
        chosen), ``assumptions`` (:meth:`CompareResult.assumptions`: failures with the
        file's fingerprint, the timings used, all-reduce source, global batch, grid,
        notes, the verdict line; plus source, seeds, cycles), ``verdict`` (one row
        per strategy), ``fingerprint`` (:func:`layout_fingerprint`) and
        ``contents_fingerprint`` (over ``micro_batches`` and everything above:
        :func:`spare_opt.layouts.layout.recommendation_digest`; loading refuses a file
        whose ``m`` or recommendation was edited).

    Raises
    ------
    ParameterTypeError
        ``result`` is not a :class:`CompareResult`.
    ParameterError
        The verdict ran no SPARe setting (there is no layout to deploy).
    """
    from .verdict import CompareResult, STRATEGY_LABELS

    check.instance("result", result, CompareResult)
    try:
        spare = result.best("spare")
    except KeyError:
        raise ParameterError("the verdict ran no SPARe setting: there is no layout to recommend") from None
    stacks = result.layouts[spare["redundancy"]]
    rows = [row for row in result.strategies if not row.get("paper_row")]
    finished = [row for row in rows if math.isfinite(row["ttt_ratio"])]
    chosen = min(finished, key=lambda row: row["ttt_ratio"]) if finished else spare
    exact = [row for row in finished if row.get("exact", True)]
    best_exact = min(exact, key=lambda row: row["ttt_ratio"]) if exact else None

    def setting(row):
        return {"strategy": row["strategy"], "label": STRATEGY_LABELS[row["strategy"]],
                "redundancy": row["redundancy"], "micro_batches": row["micro_batches"],
                "checkpoint_period_seconds": row["checkpoint_period_seconds"], "ttt_ratio": row["ttt_ratio"],
                "ttt_ci": row["ttt_ci"]}

    spare_chosen = chosen is spare
    recommendation = {
        "version": RECOMMENDATION_VERSION,
        "chosen_strategy": chosen["strategy"],
        "best_exact_strategy": None if best_exact is None else best_exact["strategy"],
        "spare_chosen": spare_chosen,
        "layout_held": "the verdict's choice" if spare_chosen else "the best exact SPARe setting",
        "chosen": setting(chosen),
        "spare": setting(spare),
        "rule": "per strategy, the smallest r (then m) whose mean lies in the 95% interval of the least mean TTT/T0; "
                "the chosen strategy has the least TTT/T0 of those rows",
        "assumptions": dict(result.assumptions(), source=result.source, seeds=result.seeds, cycles=result.cycles),
        "verdict": result.strategies,
        "conclusion": result.conclusion(),
        "fingerprint": layout_fingerprint(stacks),
    }
    recommendation = finite_or_none(recommendation)
    # Over the m and everything above: loading refuses a file whose m or verdict was edited.
    recommendation["contents_fingerprint"] = recommendation_digest(spare["micro_batches"], recommendation)
    metadata = dict(stacks.metadata, micro_batches=spare["micro_batches"], recommendation=recommendation)
    return Layout(stacks.stacks, method=stacks.method, offsets=stacks.offsets, metadata=metadata)


def write_recommendation(result, path, *, force=False):
    """Write :func:`recommendation_layout` of ``result`` to ``path`` (a layout file, atomically).

    Parameters
    ----------
    result : CompareResult
    path : str or os.PathLike
        JSON, or ``.npz`` for large ``N`` (as :meth:`Layout.save`).
    force : bool, default False
        Overwrite an existing file.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ParameterError
        No SPARe setting in the verdict.
    OutputExistsError
        ``path`` exists and ``force`` is false.
    LayoutFileError
        The file cannot be written.
    """
    return recommendation_layout(result).save(path, force=force)

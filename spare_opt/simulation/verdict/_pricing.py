"""The verdict's pricing: what each setting pays, each strategy's best setting, and the sensitivity to the all-reduce.

:func:`price` adds to every setting's row whether its gradient is exact and its
price (the column of the verdict's table), picks each strategy's setting to deploy
(:func:`best_setting`) and, when asked, runs the verdict again at half and double the
all-reduce time.
"""

import math
from dataclasses import dataclass, replace

from ..._core.errors import ParameterError
from ._labels import _verdict_key


@dataclass(frozen=True)
class Pricing:
    """The priced verdict.

    Attributes
    ----------
    settings : list of dict
        Every setting's row with ``exact`` and ``price`` (:attr:`CompareResult.settings`).
    strategies : list of dict
        One row per strategy at its best setting, SPARe's ``m = 1`` beside its best
        (:attr:`CompareResult.strategies`).
    sensitivity : dict or None
        :attr:`CompareResult.sensitivity`.
    """

    settings: list
    strategies: list
    sensitivity: dict | None


def price(inputs, runs, *, rerun=None):
    """Price the settings of ``runs``, choose each strategy's best, and the sensitivity when ``inputs`` ask for it.

    Parameters
    ----------
    inputs : CompareInputs
    runs : SettingRuns
    rerun : callable, optional
        :func:`~spare_opt.compare` with the caller's workers and executor: the
        sensitivity runs the verdict again through it (needed when
        ``inputs.allreduce_sensitivity``).

    Returns
    -------
    Pricing
    """
    settings = runs.settings
    for row in settings:
        row["exact"] = row["strategy"] != "elastic"  # the gradient equals the fault-free one
        row["price"] = _price(row)
    strategies = []
    for strategy in ("ckpt", "rep", "spare", "redistribute", "elastic"):
        mine = [row for row in settings if row["strategy"] == strategy]
        if mine:
            best = best_setting(mine)
            strategies.append(_row(best))
            if strategy == "spare" and best["micro_batches"] != 1:  # the paper's m = 1 beside the best
                whole_shards = [row for row in mine if row["micro_batches"] == 1]
                if whole_shards:
                    strategies.append(dict(_row(best_setting(whole_shards)), paper_row=True))
    sensitivity = _sensitivity(inputs, strategies, rerun) if inputs.allreduce_sensitivity else None
    return Pricing(settings=settings, strategies=strategies, sensitivity=sensitivity)


def _sensitivity(inputs, strategies, rerun):
    """The verdict at half and at double the all-reduce time: each strategy's best setting run again."""
    base = inputs.params.allreduce_seconds
    rows = [row for row in strategies if not row.get("paper_row")]
    reps = [row["redundancy"] for row in rows if row["strategy"] == "rep"]
    spares = [row for row in rows if row["strategy"] == "spare"]
    redistribute = [row for row in rows if row["strategy"] == "redistribute"]
    ms = sorted({row["micro_batches"] for row in spares + redistribute})
    out = {"allreduce_seconds": base, "runs": []}
    if base <= 0:
        return out
    trace = inputs.trace
    for factor in (0.5, 2.0):
        other = rerun(replace(inputs.params, max_wall_factor=float(inputs.cycles)), trace=trace,
                      fault_model=inputs.fault_model, semantics=inputs.semantics, rep_redundancies=reps,
                      spare_redundancies=[row["redundancy"] for row in spares], micro_batches=ms or None,
                      period_factors=list(inputs.period_factors), seeds=inputs.seeds, cycles=inputs.cycles,
                      include_ckpt=inputs.include_ckpt, include_elastic=inputs.include_elastic,
                      include_redistribution=bool(redistribute), layout_time_limit=inputs.layout_time_limit,
                      micro_batch_overhead_seconds=inputs.micro_batch_overhead_seconds,
                      allreduce_seconds=base * factor, trace_scaling="replay" if trace is not None else "auto")
        out["runs"].append({"factor": factor, "allreduce_seconds": base * factor,
                            "best_exact": _verdict_key(other.strategies, exact=True),
                            "best_overall": _verdict_key(other.strategies), "conclusion": other.conclusion()})
    here = (_verdict_key(strategies, exact=True), _verdict_key(strategies))
    out["changes"] = any((run["best_exact"], run["best_overall"]) != here for run in out["runs"])
    return out


def _row(setting):
    """A strategy's row: its best setting without the per-period figures."""
    return {key: value for key, value in setting.items() if key not in ("periods", "ttt_ratio_by_period")}


def _price(row):
    """What a strategy pays for its fault tolerance, in the unit that fits it (one column of the verdict)."""
    if row["strategy"] == "elastic":  # a step takes a fault-free step's time: more steps for the same samples
        return {"kind": "steps for the same samples", "value": row["steps_per_sample"],
                "missing_batch": 1.0 - row["mean_batch_fraction"], "short_batch_share": row["short_batch_share"]}
    if row["strategy"] == "ckpt":
        return {"kind": "restarts", "value": row["restarts"]}
    return {"kind": "step cost", "value": row["mean_step_cost"]}


def best_setting(rows):
    """The setting to deploy among ``rows``: the cheapest whose mean lies in the best one's interval.

    The best row is the one with the least mean ``TTT/T0``; a row whose mean lies
    within the best row's 95% interval cannot be told apart from it with the seeds
    run; among those, the cheapest wins: the smallest ``r``, then the smallest ``m``,
    then the least ``TTT/T0``.  A row without an interval (one seed, an unfinished run)
    counts as the single point of its mean.

    The test is on the candidate's mean, not on its interval: a setting whose own
    interval is wide (few seeds, a noisy setting) but whose mean is worse than the best
    one's whole interval is not chosen, where an overlap of the two intervals would take
    it.  This is the "one-standard-error rule" of model selection, with the best row's
    95% interval in place of one standard error.

    Parameters
    ----------
    rows : list of dict
        Rows with ``ttt_ratio``, ``ttt_ci`` (``[low, high]``), ``redundancy`` and
        ``micro_batches`` (:attr:`CompareResult.settings`).

    Returns
    -------
    dict
        One of ``rows`` (the first row when none finished).

    Raises
    ------
    ParameterError
        ``rows`` is empty.

    References
    ----------
    L. Breiman, J. Friedman, R. Olshen and C. Stone, "Classification and Regression
    Trees" (1984), Ch. 3 (the 1 SE rule); T. Hastie, R. Tibshirani and J. Friedman, "The Elements
    of Statistical Learning", 2nd ed. (2009), Sec. 7.10.
    """
    if not rows:
        raise ParameterError("no setting to choose from")

    def interval(row):
        low, high = row["ttt_ci"]
        if math.isfinite(low) and math.isfinite(high):
            return low, high
        return row["ttt_ratio"], row["ttt_ratio"]

    finished = [row for row in rows if math.isfinite(row["ttt_ratio"])]
    if not finished:
        return rows[0]
    best = min(finished, key=lambda row: row["ttt_ratio"])
    best_high = interval(best)[1]
    within = [row for row in finished if row["ttt_ratio"] <= best_high]
    return min(within, key=lambda row: (row["redundancy"], row["micro_batches"], row["ttt_ratio"]))

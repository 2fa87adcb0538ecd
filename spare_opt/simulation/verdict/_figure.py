"""The verdict's figure: ``TTT/T0`` of every setting tried (``compare --plot``)."""

import math

import numpy as np

from ..._core import validation as check
from ._labels import STRATEGY_LABELS, _setting
from ._result import CompareResult


def plot_compare(result, path, *, force=False, title=None):
    """Figure of the verdict: ``TTT/T0`` (best period, 95% interval) of every setting tried.

    One marker per setting, grouped by strategy (checkpointing, replication by ``r``,
    SPARe by ``r`` with one series per ``m``, redistribution by ``m``, elastic); the best
    setting of each strategy is circled and a dotted line marks checkpointing alone.

    Parameters
    ----------
    result : CompareResult
    path : str or os.PathLike
        PNG file, written atomically.
    force : bool, default False
        Overwrite an existing file.
    title : str, optional

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ParameterTypeError
        ``result`` is not a :class:`CompareResult`.
    SpareError
        matplotlib is not installed (``pip install 'spare-opt[plot]'``).
    OutputExistsError
        ``path`` exists and ``force`` is false.
    """
    check.instance("result", result, CompareResult)
    from ..._core.plotting import _figure, _save

    figure = _figure(7.0, 3.8)
    ax = figure.subplots()
    cap = result.params.max_wall_factor
    x = 0

    def draw(rows, colour, label):
        nonlocal x
        xs = np.arange(x, x + len(rows))
        ys = np.array([row["ttt_ratio"] if math.isfinite(row["ttt_ratio"]) else cap for row in rows])
        low = np.array([row["ttt_ci"][0] if math.isfinite(row["ttt_ci"][0]) else y for row, y in zip(rows, ys)])
        high = np.array([row["ttt_ci"][1] if math.isfinite(row["ttt_ci"][1]) else y for row, y in zip(rows, ys)])
        ax.errorbar(xs, ys, yerr=[ys - low, high - ys], fmt="o", ms=4, capsize=2, color=colour, label=label)
        for row, xi, yi in zip(rows, xs, ys):
            best = result.best(row["strategy"])
            if row["redundancy"] == best["redundancy"] and row["micro_batches"] == best["micro_batches"]:
                ax.scatter([xi], [yi], s=120, facecolors="none", edgecolors=colour)
            if not math.isfinite(row["ttt_ratio"]):
                ax.annotate(f"> {cap:g}", (xi, yi), textcoords="offset points", xytext=(0, 6), ha="center",
                            fontsize=7)
        x += len(rows) + 1
        return xs

    settings = result.settings
    ticks = []
    for strategy, colour in (("ckpt", "tab:gray"), ("rep", "tab:red")):
        rows = [row for row in settings if row["strategy"] == strategy]
        if rows:
            xs = draw(rows, colour, STRATEGY_LABELS[strategy])
            ticks += [(xi, _setting(row).replace(", m = ", "\nm = ").replace("-", "ckpt")) for xi, row in zip(xs, rows)]
    spare_rows = [row for row in settings if row["strategy"] == "spare"]
    ms = sorted({row["micro_batches"] for row in spare_rows})
    colours = ["tab:blue", "tab:green", "tab:purple", "tab:orange", "tab:brown"]
    for i, m in enumerate(ms):
        rows = [row for row in spare_rows if row["micro_batches"] == m]
        xs = draw(rows, colours[i % len(colours)], f"SPARe+CKPT m = {m}")
        ticks += [(xi, f"r = {row['redundancy']}") for xi, row in zip(xs, rows)]
    redistribute = [row for row in settings if row["strategy"] == "redistribute"]
    if redistribute:  # every survivor may take any micro-batch (r = N): one marker per m
        xs = draw(redistribute, "tab:cyan", STRATEGY_LABELS["redistribute"])
        ticks += [(xi, f"r = N, m = {row['micro_batches']}") for xi, row in zip(xs, redistribute)]
    elastic = [row for row in settings if row["strategy"] == "elastic"]
    if elastic:  # not exact: drawn apart, last
        xs = draw(elastic, "tab:olive", STRATEGY_LABELS["elastic"])
        ticks += [(xi, "elastic") for xi in xs]
    ckpt = [row for row in settings if row["strategy"] == "ckpt"]
    if ckpt and math.isfinite(ckpt[0]["ttt_ratio"]):
        ax.axhline(ckpt[0]["ttt_ratio"], color="tab:gray", linestyle=":", linewidth=1)
    # Upright labels of one line each: side by side they ran into one another.
    ax.set_xticks([t for t, _ in ticks], [label.replace("\n", ", ") for _, label in ticks], fontsize=7,
                  rotation=90)
    ax.set_ylabel("TTT / T0 (best T_c, 95% CI)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    ax.set_title(title or f"N = {result.params.groups}, {result.semantics} semantics, {result.seeds} seeds",
                 fontsize=9)
    return _save(figure, path, force)

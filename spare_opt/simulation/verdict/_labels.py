"""How the verdict names strategies and settings, in tables, figures, notes and the verdict line."""

import math

#: Names of the strategies in tables and figures.
STRATEGY_LABELS = {"ckpt": "CKPT only", "rep": "Rep+CKPT", "spare": "SPARe+CKPT", "elastic": "Elastic+CKPT",
                   "redistribute": "Redistribute"}


def _setting(row, groups=None):
    """A row's setting as the table's column shows it (``-`` for strategies without one)."""
    if row["strategy"] in ("ckpt", "elastic"):
        return "-"
    if row["strategy"] == "rep":
        return f"r = {row['redundancy']}"
    if row["strategy"] == "redistribute":
        return f"r = N, m = {row['micro_batches']}"
    return f"r = {row['redundancy']}, m = {row['micro_batches']}"


def _name(row):
    """A row's strategy and setting, as the verdict line names it."""
    setting = _setting(row)
    return STRATEGY_LABELS[row["strategy"]] + (f" {setting}" if setting != "-" else "")


def _label(strategy, redundancy, micro_batches):
    """A setting's key in :attr:`CompareResult.trace_info`."""
    if strategy in ("ckpt", "elastic"):
        return strategy
    if strategy == "rep":
        return f"rep r={redundancy}"
    return f"spare r={redundancy} m={micro_batches}"


def _verdict_key(strategies, exact=False):
    """The best (exact) strategy and setting among a verdict's rows, as a name (``None`` when none finished)."""
    rows = [row for row in strategies if math.isfinite(row["ttt_ratio"]) and not row.get("paper_row")
            and (row.get("exact", True) or not exact)]
    if not rows:
        return None
    return _name(min(rows, key=lambda row: row["ttt_ratio"]))

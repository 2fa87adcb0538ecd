"""The operator's verdict: checkpointing alone, replication and SPARe on the same failures.

An operator asks: with my failure log and my restart cost, what do I gain from SPARe,
with which ``r`` and ``m``, compared with checkpointing alone and with replication?
:func:`compare` answers it in one call (``spare-opt compare``, ``docs/repair.md``):

* the failures are a fault trace (replayed cyclically, ``cycles`` times, so that every
  strategy meets the trace's failure rate for its whole run) or a preset's failure
  model;
* three strategies run on the same failures: checkpointing alone, replication with
  ``r`` in ``rep_redundancies``, SPARe over a grid of ``r`` and ``m`` (micro-batches
  per shard type);
* every setting gets its own tuned checkpoint period: the Young/Daly ``T_c*`` with
  ``T_f`` measured on the setting's own failure walk, times each of
  ``period_factors``; the best mean time-to-train over the seeds wins;
* the seeds place the traced nodes on random DP groups (``placement_seed = seed``) and
  drive the jitter; every setting runs the same seeds (common random numbers), so the
  95% interval of ``TTT/T0`` says how much the answer depends on where the faulty
  nodes sit.

The result, :class:`CompareResult`, has one row per strategy with its best setting
(``strategies``) and every setting tried (``settings``); :func:`plot_compare` draws it.
``docs/repair.md`` gives the verdict on the real InfiniteHBD trace.
"""

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from .._core import validation as check
from ..guarantees import theory
from .._core.parallel import run_tasks
from .._core.results import Result
from ._runs import FailurePool, check_params, default_layout, run_events, run_synthetic
from .._core.durations import duration_in
from .._core.stats import finite_or_none, mean_ci95
from .._core.errors import ParameterError, TraceError
from ..planning.plan import check_micro_batches
from .parameters import SimulationParameters, allreduce_extrapolation, fault_free_seconds, get_preset, steps_in
from .parameters import micro_batch_capacity
from .parameters import allreduce_seconds as allreduce_model
from .events import SEMANTICS
from ..traces.trace import FaultTrace
from ..traces.json_format import parse_fault_events

__all__ = [
    "DEFAULT_COMPARE_FACTORS",
    "DEFAULT_COMPARE_MICRO_BATCHES",
    "DEFAULT_COMPARE_REP",
    "DEFAULT_COMPARE_SPARE",
    "DEFAULT_CYCLES",
    "MAX_CYCLES",
    "STRATEGY_LABELS",
    "CompareResult",
    "compare",
    "compare_parameters",
    "batch_figures",
    "cyclic_trace",
    "plot_compare",
    "scaled_trace_model",
    "trace_cluster_size",
    "best_setting",
    "task_weight",
    "QUICK_COMPARE",
    "micro_batch_grid",
    "per_group_model",
    "redistribution_restart_threshold",
]

#: Replication degrees of the verdict.
DEFAULT_COMPARE_REP = (2, 3)
#: SPARe redundancies of the verdict's grid (9 = r* at N = 400, the traced cluster).
DEFAULT_COMPARE_SPARE = (2, 3, 5, 9)
#: Micro-batches per shard type of the verdict's grid (1: the paper's whole shards).
DEFAULT_COMPARE_MICRO_BATCHES = (1, 4, 16)
#: Checkpoint periods tried for every setting, as multiples of its Young/Daly ``T_c*``.
DEFAULT_COMPARE_FACTORS = (0.5, 0.7, 1.0, 1.4, 2.0)
#: Copies of the trace laid end to end; a run that needs longer is unfinished (``TTT/T0 > cycles``).
DEFAULT_CYCLES = 2
#: Most copies of the trace: beyond it a run is far past any useful TTT/T0 and the walks grow without bound.
MAX_CYCLES = 100
#: The grid of ``compare --quick``: a first look (fewer settings, seeds and periods); its ``micro_batches``
#: apply without a global batch only (with one, the m of :func:`micro_batch_grid`, as without ``--quick``).
QUICK_COMPARE = {"rep_redundancies": (2,), "spare_redundancies": (3, 5), "micro_batches": (1, 16), "seeds": 2,
                 "period_factors": (0.7, 1.0, 1.4)}
#: Names of the strategies in tables and figures.
STRATEGY_LABELS = {"ckpt": "CKPT only", "rep": "Rep+CKPT", "spare": "SPARe+CKPT", "elastic": "Elastic+CKPT",
                   "redistribute": "Redistribute"}


def micro_batch_grid(global_batch, groups, micro_batches=None, *, default=DEFAULT_COMPARE_MICRO_BATCHES):
    """The ``m`` that :func:`compare` tries, and why, in words.

    With a global batch of ``B`` sequences a group's shard type holds ``floor(B / N)``
    sequences, so ``m <= floor(B / N)`` (:func:`micro_batch_capacity`).  The grid:

    * no ``micro_batches`` given and a global batch: the largest ``m`` the batch
      allows and every power of two below it (``1, 2, 4, ..., floor(B / N)``);
    * ``micro_batches`` given: those the batch allows, with ``1`` (the paper's whole
      shards, shown beside the best) and the largest ``m`` the batch allows added;
    * no global batch: ``micro_batches`` or ``default`` (nothing bounds ``m``), with ``1``.

    Parameters
    ----------
    global_batch : int or None
        ``B``, sequences per global batch.
    groups : int
        ``N``.
    micro_batches : sequence of int, optional
        The operator's grid.
    default : sequence of int
        The grid without a global batch.

    Returns
    -------
    ms : list of int
        Sorted, distinct, each ``>= 1``.
    note : str
        Which ``m`` are tried and why (the verdict's notes).

    Raises
    ------
    ParameterTypeError, ParameterError
        A bad ``m`` or global batch (fewer sequences than groups).
    """
    given = None if micro_batches is None else check.integers("micro_batches", micro_batches, minimum=1)
    if global_batch is None:
        ms = sorted({1, *(default if given is None else given)})
        why = ("the default grid" if given is None else "the grid given") + \
            ("; no global batch given, so nothing bounds m (give global_batch for the largest m it allows)")
        return ms, f"m tried: {', '.join(map(str, ms))} ({why})"
    cap = micro_batch_capacity(global_batch, groups)
    largest = f"{cap}, the largest a global batch of {global_batch:,} sequences allows on {groups:,} groups " \
              f"(floor(B / N))"
    if given is None:
        ms = sorted({2 ** k for k in range(cap.bit_length()) if 2 ** k < cap} | {cap})
        return ms, f"m tried: {', '.join(map(str, ms))} ({largest}, and the powers of two below it)"
    left_out = sorted(m for m in set(given) if m > cap)
    ms = sorted({m for m in given if m <= cap} | {1, cap})
    text = f"m tried: {', '.join(map(str, ms))} (the grid given, with 1 and {largest})"
    if left_out:
        text += f"; m = {', '.join(map(str, left_out))} left out: above {cap}"
    return ms, text


def redistribution_restart_threshold(params, micro_batches, group_mtbf_seconds, micro_batch_overhead_seconds=0.0):
    """When redistribution without repairs should restart: the number of groups out that maximises progress.

    Under the paper's semantics a failed group stays out until a global restart, so
    with every survivor allowed to take any micro-batch (``r = N``) the step cost
    ``ceil(m N / (N - k)) / m`` only grows with the ``k`` groups out and no wipe-out
    comes before every group is down.  The rule: restart when ``K`` groups are out,
    with ``K`` the threshold of greatest long-run progress per second.  A cycle from
    one restart to the next spends ``tau_k = G / (N - k)`` seconds with ``k`` groups
    out (``G`` the group MTBF, failures taken as exponential), making ``tau_k / (c_k t
    + a)`` steps (``c_k`` the step cost, ``t`` the compute of one layer, ``a`` the
    all-reduce); it ends with a restart ``T_r`` and loses on average half a
    checkpoint period ``T_c*`` (Young/Daly at ``T_f = sum tau_k``), and saves take
    ``T_s / T_c*`` of the time.  The progress rate ``sum_k tau_k / (c_k t + a) * (1 -
    T_s / T_c*) / (sum_k tau_k + T_r + T_c* / 2)`` is maximised over ``K = 1 .. N``:
    restart as soon as a restart is cheaper than going on.

    Parameters
    ----------
    params : SimulationParameters
        ``N``, the step's compute and all-reduce, ``T_r`` and ``T_s``.
    micro_batches : int
        ``m``.
    group_mtbf_seconds : float
        Mean time between failures of one group (``> 0``).
    micro_batch_overhead_seconds : float, default 0.0
        As :func:`compare`.

    Returns
    -------
    int
        ``K`` in ``1 .. N``: restart when ``K`` groups are out (``N``: only when every
        group is down).

    Raises
    ------
    ParameterError
        A value out of range.

    References
    ----------
    Renewal-reward theorem (S. Ross, "Stochastic Processes", 2nd ed., 1996, Sec. 3.6);
    Young (1974), Daly (2006) for ``T_c*``.
    """
    check.instance("params", params, SimulationParameters)
    n = params.groups
    m = check.count("micro_batches", micro_batches)
    mtbf = check.number("group_mtbf_seconds", group_mtbf_seconds, above=0.0)
    k = np.arange(n, dtype=np.float64)
    live = n - k
    cost = np.ceil(m * n / live) / m
    compute = params.layer_compute_seconds + (m - 1) * micro_batch_overhead_seconds
    tau = mtbf / live
    span = np.cumsum(tau)
    steps = np.cumsum(tau / (cost * compute + params.allreduce_seconds))
    t_s, t_r = params.save_seconds, params.restart_seconds
    period = t_s + np.sqrt(t_s * t_s + 2.0 * t_s * (span + t_r))
    rate = steps * np.clip(1.0 - t_s / period, 0.0, None) / (span + t_r + period / 2.0)
    return int(np.argmax(rate)) + 1


# ----------------------------------------------------------------------------- result
@dataclass(eq=False)
class CompareResult(Result):
    """The verdict of :func:`compare`.

    Attributes
    ----------
    params : SimulationParameters
        The run's parameters (``steps``, ``trace_time_scale``, ``max_wall_factor`` as run).
    source : str
        The trace's path, ``"failure model ..."`` for a fitted model, or ``"preset"``
        for the Weibull failures of the parameters.
    semantics : str
        ``"paper"`` or ``"repair"``.
    seeds : int
        Seeds per setting (placements of the traced nodes and jitter).
    cycles : int
        Copies of the trace laid end to end (with a trace); a run not finished within
        ``cycles * T0`` is unfinished.
    strategies : list of dict
        One row per strategy (``ckpt``, ``rep``, ``spare``, those that ran), its best
        setting: ``strategy``, ``redundancy``, ``micro_batches``, ``ttt_ratio`` (mean
        over seeds), ``ttt_ci`` (95% interval, ``[nan, nan]`` when it cannot be
        given), ``availability``, ``restarts``, ``mean_step_cost`` (means),
        ``checkpoint_period_seconds``, ``unfinished`` (runs past the wall-time cap).
    settings : list of dict
        Every ``(strategy, r, m)`` tried, with the same keys at its best period, plus
        ``periods`` (every ``T_c`` tried) and ``ttt_ratio_by_period``.
    trace_info : dict or None
        With a trace: what its replay used (the walk's counts for the first seed of
        each setting, keyed by setting label, and ``mean_wipe_outs``); ``None``
        without a trace.
    elapsed_seconds : float
        Wall-clock time (not compared by ``==``).
    notes : list of str
        What the verdict left out or extrapolated (micro-batches a global batch
        cannot hold, elastic without a trace, an extrapolated all-reduce time).
    global_batch : int or None
        Sequences in the global batch, when given.
    micro_batch_overhead_seconds : float
        Fixed cost of each micro-batch beyond the first of a shard type.

    Notes
    -----
    Every row (and setting) also has ``exact`` (the gradient equals the fault-free
    one: every strategy but elastic) and ``price``: what the strategy pays, as
    ``{"kind": ..., "value": ...}``: the mean step cost for SPARe and replication,
    the restarts for checkpointing alone, and for elastic ``"steps for the same
    samples"``: ``steps_per_sample``, ``1 / mean_batch_fraction`` (a step takes a
    fault-free step's time but trains a short batch, so the same samples take more
    steps), with ``missing_batch`` and ``short_batch_share`` (the share of steps with
    a short batch; the elastic row also has ``mean_batch_fraction``,
    ``short_batch_share`` and ``steps_per_sample``).  A
    SPARe row with ``paper_row`` true is the best ``m = 1`` setting, shown beside the
    best when that has a larger ``m``.
    scaling : str or None
        How the failures of a trace were carried over to ``N`` groups, in words (a
        trace of another cluster size fitted and scaled per node); ``None`` when the
        failures were used as they are.
    layouts : dict
        The SPARe layout each ``r`` ran, ``{r: Layout}`` (not in :meth:`to_dict`;
        :func:`spare_opt.write_recommendation` writes the chosen one).
    allreduce : dict
        The all-reduce time used (``seconds``) and where it came from (``source``:
        ``"given"``, ``"ring model"`` with its inputs and ``formula``, or ``"paper
        line"`` within its fitted range), ``text`` for the header.
    failures : dict
        The failures used: ``kind`` (``"trace"``, ``"trace fitted and scaled"``,
        ``"failure model"``, ``"preset"``), the file's ``path`` and ``fingerprint``
        (``sha256:`` of its bytes), ``nodes_per_group``, the per-group and per-node
        MTBF, the Weibull shape and the repairs (``model``) where they apply.
    grid : dict
        The settings tried: ``rep_redundancies``, ``spare_redundancies``,
        ``micro_batches``, ``period_factors``, ``seeds``, ``cycles``, the strategies
        included and ``redistribution_restart_at`` (``{m: K}``, paper semantics); the
        command line adds ``quick``.
    sensitivity : dict or None
        With ``allreduce_sensitivity``: the best exact and best overall strategy at
        half and at double the all-reduce (``runs``) and whether either differs
        (``changes``).

    Every row also has the parts of its ``TTT/T0``, means over the seeds that add up
    to it (``ttt_parts``: ``steps``, the time in committed steps at their step cost,
    over ``T0``; ``patch``, masking: patch compute, shrink, controller, a redone
    all-reduce; ``lost``, work lost to wipe-outs; ``restart``; ``saves``).  The
    elastic row's ``steps`` is more steps for the same samples (its step takes a
    fault-free step's time: ``mean_step_cost`` 1, ``steps_per_sample`` the ratio).
    """

    params: SimulationParameters
    source: str
    semantics: str
    seeds: int
    cycles: int
    strategies: list
    settings: list
    trace_info: dict | None = None
    elapsed_seconds: float = field(default=0.0, compare=False)
    notes: list = field(default_factory=list)
    global_batch: int | None = None
    micro_batch_overhead_seconds: float = 0.0
    scaling: str | None = None
    layouts: dict = field(default_factory=dict, compare=False, repr=False)
    allreduce: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)
    sensitivity: dict | None = None

    def best(self, strategy):
        """dict: the best row of ``strategy`` (``"ckpt"``, ``"rep"``, ``"spare"``, ``"elastic"``) in :attr:`strategies`."""
        for row in self.strategies:
            if row["strategy"] == strategy and not row.get("paper_row"):
                return row
        raise KeyError(strategy)

    def to_dict(self):
        """dict: JSON-ready: ``strategies``, ``settings``, the parameters and the run's context."""
        return finite_or_none({
            "source": self.source,
            "semantics": self.semantics,
            "seeds": self.seeds,
            "cycles": self.cycles,
            "time_scale": self.params.trace_time_scale if self.trace_info is not None else None,
            "scaling": self.scaling,
            "fault_free_seconds": fault_free_seconds(self.params),
            "strategies": self.strategies,
            "settings": self.settings,
            "parameters": self.params.to_dict(),
            "global_batch": self.global_batch,
            "micro_batch_overhead_seconds": self.micro_batch_overhead_seconds,
            "notes": list(self.notes),
            "allreduce": self.allreduce,
            "failures": self.failures,
            "grid": self.grid,
            "sensitivity": self.sensitivity,
            "conclusion": self.conclusion(),
            "elapsed_seconds": self.elapsed_seconds,
        })

    def assumptions(self):
        """dict: what the verdict used, and only that: failures, timings, batch, grid, semantics, notes.

        The timings leave out what the failures made unused (a preset's
        ``system_mtbf_seconds``, ``weibull_shape``, ``failure_model``,
        ``rate_follows_live`` and ``restart_failures`` with a trace or a failure model;
        ``heal_seconds`` under the paper's semantics; ``trace_time_scale`` but with a
        replayed trace, where ``failures`` holds it).
        """
        p = self.params.to_dict()
        unused = {"max_wall_factor"}
        if self.failures.get("kind") != "preset":
            unused |= {"system_mtbf_seconds", "weibull_shape", "failure_model", "rate_follows_live",
                       "restart_failures"}
        if self.failures.get("kind") != "trace":
            unused.add("trace_time_scale")
        if self.semantics == "paper":
            unused.add("heal_seconds")
        timings = {key: value for key, value in p.items() if key not in unused}
        timings["micro_batch_overhead_seconds"] = self.micro_batch_overhead_seconds
        return finite_or_none({
            "failures": self.failures, "scaling": self.scaling, "semantics": self.semantics,
            "parameters": timings, "allreduce": self.allreduce, "global_batch": self.global_batch,
            "grid": self.grid, "notes": list(self.notes), "conclusion": self.conclusion(),
            "sensitivity": self.sensitivity,
        })

    def format_text(self):
        """The verdict as a table, one row per strategy, and a one-line conclusion.

        The columns ``steps``, ``patch``, ``lost``, ``restart`` and ``saves`` add up to
        ``TTT/T0`` (to the rounding of the digits shown) for a finished row.
        """
        p = self.params
        kind = self.failures.get("kind")
        if self.scaling is not None:
            failures = self.scaling
        elif self.trace_info is not None:
            scale = p.trace_time_scale
            rate = "real rate" if scale == 1.0 else f"compressed {1 / scale:g}x" if scale < 1 else f"stretched {scale:g}x"
            failures = f"trace {self.source} ({rate}, replayed {self.cycles}x end to end)"
        elif kind == "failure model":
            model = self.failures["model"]
            repairs = model.get("repairs")
            per = "" if self.failures["nodes_per_group"] == 1 else \
                f", {self.failures['nodes_per_group']} nodes per group (node MTBF " \
                f"{self.failures['node_mtbf_seconds'] / 86400:.3g} days)"
            what = "failures and repairs" if repairs else "failures"
            origin = f"the {self.source}" if self.failures.get("path") else self.failures.get("description") or \
                self.source
            fixed = "" if not repairs else \
                f", repairs {repairs['distribution']}, median {repairs['median_seconds'] / 3600:.3g} h"
            failures = (f"{what} drawn from {origin} (group MTBF "
                        f"{self.failures['group_mtbf_seconds'] / 86400:.3g} days{per}, Weibull k = "
                        f"{model['weibull_shape']:g}{fixed})")
        elif self.source != "preset":
            failures = f"failures and repairs drawn from the {self.source}"
        else:
            failures = f"{p.failure_model} failures, system MTBF {p.system_mtbf_seconds / 60:g} min"
        allreduce = self.allreduce.get("text") or f"all-reduce {p.allreduce_seconds:g} s"
        lines = [
            f"Verdict: N = {p.groups:,}, {failures}, {self.semantics} semantics",
            f"T_r = {p.restart_seconds / 60:g} min, T_s = {p.save_seconds:g} s, step {p.layer_compute_seconds:g} s "
            f"+ {allreduce}, {p.steps:,} steps (T0 = {duration_in(fault_free_seconds(p), 86400, 'days', '.2f')}); "
            f"{self.seeds} seeds (node placements), best checkpoint period per setting",
            "",
            f"{'strategy':<12} {'setting':<13} {'TTT/T0':>7} {'95% CI':>15} {'= steps':>7} {'+ patch':>7} "
            f"{'+ lost':>7} {'+ restart':>9} {'+ saves':>7} {'restarts':>8} {'step cost':>9} {'T_c':>8}  price",
        ]
        for row in self.strategies:
            parts = row.get("ttt_parts") or {}
            lines.append(
                f"{STRATEGY_LABELS[row['strategy']]:<12} {_setting(row, p.groups):<13} "
                f"{_ratio(row['ttt_ratio'], p):>7} {_interval(row['ttt_ci']):>15} "
                + " ".join(f"{_part(parts.get(key)):>{width}}" for key, width in _PART_WIDTHS)
                + f" {row['restarts']:>8.1f} {row['mean_step_cost']:>9.3f} "
                f"{_duration(row['checkpoint_period_seconds']):>8}  {_price_text(row)}"
            )
        lines.append("TTT/T0 = steps (committed steps at their step cost; elastic: more steps for the same "
                     "samples) + patch (patch compute, shrink, controller) + lost (work redone after wipe-outs) "
                     "+ restart + saves, each over T0; step cost: compute of a step in layers (elastic: 1, a "
                     "step takes a fault-free step's time)")
        inputs = self.input_line()
        if inputs:
            lines.append(inputs)
        grid = self.format_grid()
        if len(grid) > 1:  # a strategy with a grid ran (not checkpointing alone only)
            lines += [""] + grid
        lines.append("")
        lines.append(self.conclusion())
        held = self.held_line()
        if held:
            lines.append(held)
        if self.sensitivity is not None and self.sensitivity.get("runs"):
            lines.append(self.sensitivity_line())
        lines += [f"Note: {note}" for note in self.notes]
        return "\n".join(lines)

    def input_line(self):
        """str or None: the input each group must read per step, stacked SPARe against redistribution."""
        n = self.params.groups
        rows = [row for row in self.strategies if row["strategy"] in ("spare", "redistribute")
                and not row.get("paper_row")]
        if not rows:
            return None
        batch = self.global_batch
        parts = []
        for row in rows:
            r = row["redundancy"]
            share = f"{r:,} of {n:,} shard types" if r < n else f"all {n:,} shard types"
            if batch is not None:
                share += f", {r * (batch // n):,} of {batch:,} sequences"
            label = f"SPARe r = {r}" if row["strategy"] == "spare" else "redistribution (r = N)"
            parts.append(f"{label}: {share}")
        return "Input each group reads per step (the data it keeps at hand to take a failed group's " \
               "micro-batches): " + "; ".join(parts)

    def held_line(self):
        """str or None: when the best strategy is not SPARe, what a recommendation file holds instead."""
        best = _verdict_key(self)
        try:
            spare = self.best("spare")
        except KeyError:
            return None
        if best is None or best == _name(spare):
            return None
        return (f"SPARe is not the verdict's choice ({best} is); a recommendation file (-o) holds the best exact "
                f"SPARe setting, {_name(spare)} (TTT/T0 {_ratio(spare['ttt_ratio'], self.params)}), for a job "
                "that deploys SPARe")

    def sensitivity_line(self):
        """str: whether the verdict changes at half and at double the all-reduce time."""
        runs = self.sensitivity["runs"]
        parts = [f"{run['allreduce_seconds']:.3g} s: best exact {run['best_exact'] or 'none finished'}"
                 + ("" if run["best_overall"] == run["best_exact"] else f", best overall {run['best_overall']}")
                 for run in runs]
        verdict = "the verdict changes" if self.sensitivity["changes"] else "the verdict holds"
        return (f"Sensitivity to the all-reduce ({self.params.allreduce_seconds:.3g} s): at half and double, "
                f"{'; '.join(parts)}: {verdict}.")

    def format_grid(self):
        """list of str: every setting tried, one small table per strategy (``*``: the setting chosen)."""
        lines = ["Settings tried: TTT/T0 at each setting's best T_c, 95% CI; * = chosen, the smallest r "
                 "(then m) whose mean lies in the 95% CI of the least TTT/T0"]
        p = self.params

        def cell(row):
            chosen = self.best(row["strategy"])
            mark = "*" if (row["redundancy"], row["micro_batches"]) == (chosen["redundancy"],
                                                                      chosen["micro_batches"]) else " "
            interval = _interval(row["ttt_ci"])
            return f"{_ratio(row['ttt_ratio'], p)} {interval if interval != '-' else ''}".rstrip() + mark

        rep = [row for row in self.settings if row["strategy"] == "rep"]
        if rep:
            lines.append(f"  {STRATEGY_LABELS['rep']:<11} " + "   ".join(
                f"r = {row['redundancy']}: {cell(row)}" for row in rep))
        spread = [row for row in self.settings if row["strategy"] == "redistribute"]
        if spread:
            lines.append(f"  {STRATEGY_LABELS['redistribute']:<11} " + "   ".join(
                f"r = N, m = {row['micro_batches']}: {cell(row)}" for row in spread))
        spare = [row for row in self.settings if row["strategy"] == "spare"]
        if spare:
            ms = sorted({row["micro_batches"] for row in spare})
            rs = sorted({row["redundancy"] for row in spare})
            width = max(len(cell(row)) for row in spare) + 2
            corner = "r \\ m"
            lines.append(f"  {STRATEGY_LABELS['spare']:<11} {corner:>6}" + "".join(f"{m:>{width}}" for m in ms))
            by = {(row["redundancy"], row["micro_batches"]): row for row in spare}
            for r in rs:
                lines.append(f"  {'':<11} {r:>6}" + "".join(
                    f"{cell(by[r, m]) if (r, m) in by else '-':>{width}}" for m in ms))
        return [line.rstrip() for line in lines]

    def conclusion(self):
        """str: the verdict line: the best exact strategy and its gain, then the best overall and what it buys.

        *Exact* strategies train on the fault-free gradient (all but elastic, whose
        global batch shrinks while groups are out).  When the best overall is not
        exact, the line says how much time it saves over the best exact one and at
        which price in samples.
        """
        cap = self.params.max_wall_factor
        finished = [row for row in self.strategies if math.isfinite(row["ttt_ratio"]) and not row.get("paper_row")]
        if not finished:
            return f"No strategy finished within {cap:g} x T0."
        exact = [row for row in finished if row.get("exact", True)]
        best = min(finished, key=lambda row: row["ttt_ratio"])
        if not exact:
            return f"Best overall: {_name(best)}, TTT/T0 {best['ttt_ratio']:.3f}; no exact strategy finished " \
                   f"within {cap:g} x T0."
        best_exact = min(exact, key=lambda row: row["ttt_ratio"])
        parts = []
        for row in self.strategies:
            if row is best_exact or not row.get("exact", True):
                continue
            if math.isfinite(row["ttt_ratio"]):
                parts.append(f"{1 - best_exact['ttt_ratio'] / row['ttt_ratio']:.1%} less time than {_name(row)}")
            else:
                parts.append(f"{_name(row)} does not finish within {cap:g} x T0")
        line = f"Best exact: {_name(best_exact)}, TTT/T0 {best_exact['ttt_ratio']:.3f}" + (
            ": " + "; ".join(parts) if parts else "")
        if best is best_exact:
            return line + ". Best overall: the same (exact gradient, nothing given up)."
        missing = 1.0 - best["mean_batch_fraction"]
        return (line + f". Best overall: {_name(best)}, TTT/T0 {best['ttt_ratio']:.3f}, "
                f"{1 - best['ttt_ratio'] / best_exact['ttt_ratio']:.1%} less time than {_name(best_exact)}, "
                f"bought with {missing:.2%} of the samples missing ({best['short_batch_share']:.1%} of steps "
                "with a short batch): its gradient is not the fault-free one.")


def _name(row):
    """A row's strategy and setting, as the verdict line names it."""
    setting = _setting(row)
    return STRATEGY_LABELS[row["strategy"]] + (f" {setting}" if setting != "-" else "")


def _price_text(row):
    """The price column: step cost (SPARe, Rep, redistribution), steps for the same samples (elastic), restarts."""
    price = row.get("price")
    if price is None:
        return "-"
    if price["kind"] == "steps for the same samples":
        return (f"x{price['value']:.3f} steps for the same samples (batch -{price['missing_batch']:.2%}, short "
                f"on {price['short_batch_share']:.1%} of steps)")
    if price["kind"] == "restarts":
        return f"{price['value']:.1f} restarts"
    extra = " (paper's m = 1)" if row.get("paper_row") else ""
    return f"step cost x{price['value']:.3f}{extra}"


def _setting(row, groups=None):
    if row["strategy"] in ("ckpt", "elastic"):
        return "-"
    if row["strategy"] == "rep":
        return f"r = {row['redundancy']}"
    if row["strategy"] == "redistribute":
        return f"r = N, m = {row['micro_batches']}"
    return f"r = {row['redundancy']}, m = {row['micro_batches']}"


#: The parts of TTT/T0 in the verdict's table, and their widths.
_PART_WIDTHS = (("steps", 7), ("patch", 7), ("lost", 7), ("restart", 9), ("saves", 7))


def _part(value):
    """One ``TTT/T0`` column: three decimals, or three digits of scientific notation from
    10^5 on (a restart of 10^300 s is 10^302 T0, not a line of 300 digits)."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.3f}" if abs(value) < 1e5 else f"{value:.3g}"


def _ratio(value, params):
    """``TTT/T0``, or ``> cap`` for a run stopped at the wall-time cap."""
    if math.isfinite(value):
        return f"{value:.3f}"
    return f"> {params.max_wall_factor:g}"


def _interval(ci):
    low, high = ci
    if not (math.isfinite(low) and math.isfinite(high)):
        return "-"
    return f"[{low:.3f}, {high:.3f}]"


def _duration(seconds):
    if not math.isfinite(seconds):
        return "-"
    if seconds >= 86400:
        return duration_in(seconds, 86400, "d", ".1f")
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"


# ----------------------------------------------------------------------------- parameters
def cyclic_trace(trace, cycles):
    """``cycles`` copies of a trace laid end to end, each shifted by the trace's last event time.

    Copy ``c`` has every event time plus ``c * t_last`` (``t_last``: the last event's
    day, the trace's span from its time origin, day 0; for a windowed trace, the
    window's length, :attr:`~spare_opt.traces.trace.FaultTrace.observed_days`); node ids are kept, so a node
    maps to the same DP group in every copy.  Events keep their order (file order
    within a copy, copies in turn).

    Parameters
    ----------
    trace : FaultTrace
    cycles : int
        Number of copies, ``1 <= cycles <= MAX_CYCLES`` (100, as :func:`compare`).

    Returns
    -------
    FaultTrace
        Read back with :func:`spare_opt.traces.json_format.parse_fault_events`, so irregular events
        are flagged as in any trace (a fault still open at the end of a copy makes the
        next copy's start of that node irregular).

    Raises
    ------
    ParameterTypeError
        ``trace`` is not a :class:`~spare_opt.traces.trace.FaultTrace` or ``cycles`` is not an
        integer.
    ParameterError
        ``cycles < 1`` or ``cycles > MAX_CYCLES``.
    TraceError
        The trace has no event after day 0 (it has no span to repeat).
    """
    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    cycles = check.count("cycles", cycles, maximum=MAX_CYCLES)
    if cycles == 1:
        return trace
    period = trace.observed_days
    if not period > 0:
        raise TraceError(f"{trace.source}: no event after day 0, nothing to repeat")
    order = np.argsort(trace.file_index, kind="stable")
    one = [{"node_id": trace.node_ids[trace.node[k]], "event_time": float(trace.times_days[k]),
            "event_type": "fault_start" if trace.is_start[k] else "fault_end",
            "fault_type": {"Class": trace.fault_class[k]}} for k in order.tolist()]
    events = [dict(event, event_time=event["event_time"] + c * period) for c in range(cycles) for event in one]
    doc = {"format": "spare-failure-trace", "version": 1, "nodes": trace.cluster_nodes,
           "metadata": {"cyclic": {"source": trace.source, "cycles": cycles, "period_days": period}},
           "events": events}
    window = None if trace.window is None else dict(trace.window, length_days=cycles * period)
    return replace(parse_fault_events(doc, source=trace.source), format=trace.format, window=window)


def compare_parameters(preset="trace-400", groups=None, *, trace=None, restart_seconds=None, save_seconds=None,
                       step_seconds=None, time_scale=1.0, steps=None, window=None, trace_nodes=None, **overrides):
    """The :class:`SimulationParameters` of a verdict: a preset's timings with the operator's own.

    Parameters
    ----------
    preset : str, default "trace-400"
        Preset whose timings are the defaults (:data:`spare_opt.simulation.parameters.PRESETS`).
    groups : int, optional
        ``N``; default: the trace's cluster size (:func:`trace_cluster_size`:
        ``trace_nodes``, else the file's, else the larger of the preset's first ``N``
        and the number of nodes the trace names: 400 for the InfiniteHBD trace, which
        names 231).  Any ``N >= 1``.
    trace : FaultTrace, optional
        The failures; sets the default ``steps``.
    trace_nodes : int, optional
        The traced cluster's size (with ``trace`` only), as in :func:`compare`:
        checked against the nodes the whole trace names, before ``window``.
    restart_seconds, save_seconds : float, optional
        ``T_r`` and ``T_s``.
    step_seconds : float, optional
        Compute of one fault-free step (one stack layer), ``layer_compute_seconds``;
        the all-reduce is added (default: the paper's line in ``N``).
    time_scale : float, default 1.0
        Trace time multiplier (``trace_time_scale``): ``0.1`` replays the trace 10
        times faster (10 times the failure rate).
    window : tuple, optional
        ``(start, end)``: count the default steps on the trace cut to this window
        (:func:`spare_opt.window_trace`), as :func:`compare` with the same window replays it.
    steps : int, optional
        Training steps; default with a trace: the steps of one trace span at the
        fault-free step time (``T0`` = the trace's span, from day 0 to its last event,
        times ``time_scale``); without a trace, the preset's.
    **overrides
        Other :class:`SimulationParameters` fields.

    Returns
    -------
    SimulationParameters

    Raises
    ------
    ParameterTypeError, ParameterError
        Unknown preset, or a value of the wrong type or out of range.
    TraceError
        ``steps`` is not given and the trace has no event after day 0.
    """
    base = dict(get_preset(preset).base)
    if trace is not None:
        check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
        # The whole file's cluster, checked even when groups is given: a window names fewer nodes.
        traced = trace_cluster_size(trace, preset, trace_nodes)
        if window is not None:
            from ..traces.window import _window_bounds, window_trace

            trace = window_trace(trace, *_window_bounds(window))
    elif window is not None:
        raise ParameterError("a window cuts a trace: give the trace too")
    if trace is None and trace_nodes is not None:
        raise ParameterError("trace_nodes is the size of a trace's cluster: give the trace too")
    if groups is None:
        groups = get_preset(preset).groups[0] if trace is None else traced
    for name, value in (("restart_seconds", restart_seconds), ("save_seconds", save_seconds),
                        ("layer_compute_seconds", step_seconds)):
        if value is not None:
            base[name] = value
    base["trace_time_scale"] = time_scale
    base.update(overrides)
    if steps is not None:
        base["steps"] = steps
    params = SimulationParameters(groups=groups, **base)
    if steps is None and trace is not None:
        span = trace.observed_days
        if not span > 0:
            raise TraceError(f"{trace.source}: no event after day 0: give the number of steps")
        params = replace(params, steps=steps_in(span * 86400.0 * params.trace_time_scale, params))
    return params


def trace_cluster_size(trace, preset="trace-400", nodes=None):
    """The size of the cluster a trace was recorded on, as the verdict takes it.

    ``nodes`` when given (the operator knows the cluster), else the file's
    ``cluster_nodes`` when it says, else the larger of the preset's first ``N`` and the
    number of nodes the trace names (400 for the InfiniteHBD trace, which names 231 of
    its 400 nodes).  A log that lists only the nodes that failed (a CSV fault log, the
    InfiniteHBD format) cannot say how many nodes never did: give ``nodes``.

    Parameters
    ----------
    trace : FaultTrace
    preset : str, default "trace-400"
    nodes : int, optional
        The traced cluster's size, at least the nodes the trace names.

    Returns
    -------
    int

    Raises
    ------
    ParameterTypeError
        ``nodes`` is not an integer.
    ParameterError
        ``nodes`` is below the number of nodes the trace names, or above
        ``2**31 - 1`` (the most DP groups: the traced cluster's size is the default ``N``).
    """
    check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
    if nodes is not None:
        nodes = check.count("nodes", nodes, maximum=check.MAX_GROUPS)
        if nodes < trace.n_nodes:
            raise ParameterError(f"nodes must be at least the {trace.n_nodes} nodes the trace names, got {nodes}")
        return nodes
    if trace.cluster_nodes:
        return int(trace.cluster_nodes)
    return max(get_preset(preset).groups[0], trace.n_nodes)


# ----------------------------------------------------------------------------- the runs
# The walk of a setting over the failures and one run on it.  These adapters are the
# only places that know how the simulation takes failures given up front.
def _walk(params, strategy, redundancy, micro_batches, layout, trace, seed, semantics):
    """Failure (and rejoin) events of one setting and placement, how many wipe out, and the walk's counts."""
    from .events import trace_events

    # Rejoins go through ReorderController.recover (incremental, as cheap as a failure).
    events = trace_events(trace, params.groups, strategy, redundancy, semantics=semantics, layout=layout,
                          micro_batches=micro_batches, heal_seconds=params.heal_seconds,
                          time_scale=params.trace_time_scale, placement_seed=seed)
    return events.kernel_rows(), int(np.count_nonzero(events.wipe_outs)), dict(events.counts)


def _run(params, strategy, redundancy, micro_batches, period, seed, events, semantics, overhead=0.0):
    return run_events(params, strategy, redundancy, period, seed, events, micro_batches=micro_batches,
                      semantics=semantics, micro_batch_overhead_seconds=overhead)


def _trace_runs_task(params, strategy, redundancy, micro_batches, periods, seed, events, semantics, overhead=0.0):
    return [_digest(_run(params, strategy, redundancy, micro_batches, period, seed, events, semantics, overhead),
                    events if strategy == "elastic" else None)
            for period in periods]


def _model_runs_task(params, strategy, redundancy, micro_batches, periods, seed, layout, semantics, fault_model,
                     overhead=0.0):
    if fault_model is None:  # the preset's Weibull failures, the paper's semantics
        pool = FailurePool(strategy, params.groups, redundancy, seed, layout,
                           micro_batches if strategy == "spare" else 1)
        return [_digest(run_synthetic(params, strategy, redundancy, period, seed, pool,
                                      micro_batch_overhead_seconds=overhead)) for period in periods]
    from . import _kernels as K
    from .events import _model_events_until, _model_source

    # One source of events per setting and seed, shared by every period: the faults it draws
    # depend on the seed only, and their outcomes (wipe-outs, stack numbers, step costs) on the
    # failed set only, so a run cut at any horizon sees the events of a fresh source (the rows
    # up to the horizon).
    source = _model_source(fault_model, params.groups, strategy, redundancy, semantics, layout, micro_batches,
                           params.heal_seconds, seed)
    drawn = []

    def rows(horizon):
        table = _model_events_until(source, horizon).kernel_rows()
        drawn[:] = [table[table[:, K.EV_TIME] <= horizon]]
        return drawn[0], False

    digests = []
    for period in periods:
        run = run_events(params, strategy, redundancy, period, seed, rows, micro_batches=micro_batches,
                         semantics=semantics, micro_batch_overhead_seconds=overhead)
        digests.append(_digest(run, drawn[0] if strategy == "elastic" else None))
    return digests


def _digest(run, elastic_rows=None):
    """The figures of one run that the verdict keeps (small to send between processes).

    With ``elastic_rows`` (the events of an elastic run, cost ``N / (N - k)``) also the
    batch the run trained with: its mean fraction and the share of time it was short.
    """
    t0 = run.fault_free_seconds
    digest = {
        "ttt_ratio": run.ttt_ratio,
        "availability": run.availability,
        "restarts": run.restarts,
        "mean_step_cost": run.mean_step_cost,
        "finished": run.finished,
        # the parts of the wall time, over T0: they add up to TTT/T0 (the kernel's sums)
        "ttt_parts": {"steps": run.useful_seconds / t0, "patch": run.overhead_seconds / t0,
                      "lost": run.rework_seconds / t0, "restart": run.restart_seconds / t0,
                      "saves": run.checkpoint_seconds / t0},
    }
    if elastic_rows is not None:
        fraction, short = batch_figures(elastic_rows, run.wall_seconds)
        # an elastic step takes a fault-free step's time; the short batches cost more steps instead
        digest.update(mean_batch_fraction=fraction, short_batch_share=short, mean_step_cost=1.0,
                      steps_per_sample=1.0 / fraction if fraction > 0 else math.inf)
    return digest


def batch_figures(rows, wall_seconds):
    """The batch of an elastic run: time-weighted mean fraction of the global batch, share of time short.

    Parameters
    ----------
    rows : numpy.ndarray of float64, shape (F, N_EV)
        The run's events as the kernel reads them before :func:`run_events` converts
        them (:meth:`~spare_opt.simulation.events.FailureEvents.kernel_rows` of an
        ``"elastic"`` walk: the cost after each event is ``N / (N - k)``).
    wall_seconds : float
        The run's wall time: the figures cover ``[0, wall_seconds]``.

    Returns
    -------
    tuple of float
        ``(mean_batch_fraction, short_batch_share)``: the mean over time of ``(N -
        k) / N`` and the fraction of time with ``k > 0``.  A step takes the same time
        whatever its batch, so over the steps trained these are the mean batch and the
        share of steps with a short batch (restarts, rare for elastic, count as full).
    """
    from . import _kernels as K

    if not wall_seconds > 0:
        return 1.0, 0.0
    times = np.clip(rows[:, K.EV_TIME], 0.0, wall_seconds)
    edges = np.concatenate([[0.0], times, [wall_seconds]])
    fraction = np.concatenate([[1.0], 1.0 / rows[:, K.EV_COST]])
    lengths = np.diff(edges)
    return (float(np.sum(lengths * fraction) / wall_seconds),
            float(np.sum(lengths[fraction < 1.0]) / wall_seconds))




def compare(params, *, trace=None, semantics="repair", rep_redundancies=DEFAULT_COMPARE_REP,
            spare_redundancies=DEFAULT_COMPARE_SPARE, micro_batches=None,
            period_factors=DEFAULT_COMPARE_FACTORS, seeds=3, cycles=DEFAULT_CYCLES, include_ckpt=True,
            include_elastic=True, fault_model=None, workers=1, executor=None, progress=None,
            layout_time_limit=2.0, global_batch=None, micro_batch_overhead_seconds=0.0, allreduce_seconds=None,
            window=None, trace_nodes=None, trace_scaling="auto", on_setting=None, include_redistribution=True,
            gradient_bytes=None, bandwidth_bytes_per_second=None, allreduce_latency_seconds=0.0,
            allreduce_sensitivity=False, nodes_per_group=1, failures_path=None):
    """Checkpointing alone, replication and SPARe on the same failures, each at its best setting.

    Parameters
    ----------
    params : SimulationParameters
        Timings, ``N`` and steps (:func:`compare_parameters` builds them from a
        preset and the operator's figures).  With a trace, ``trace_time_scale``
        compresses it; ``max_wall_factor`` is replaced by ``cycles``.
    trace : FaultTrace, optional
        The failures, replayed ``cycles`` times end to end (:func:`cyclic_trace`).
    semantics : {"paper", "repair"}, default "repair"
        Repaired groups rejoin (``"repair"``, :mod:`spare_opt.simulation.events`) or stay out
        until a restart.  Without a trace, ``"repair"`` needs a ``fault_model``.
    rep_redundancies : sequence of int, default (2, 3)
        Replication degrees (``1 <= r <= N``).
    spare_redundancies : sequence of int, default (2, 3, 5, 9)
        SPARe redundancies (``2 <= r <= N``); each gets a Sidon layout.
    micro_batches : sequence of int, optional
        SPARe micro-batches per shard type ``m`` (1: the paper's whole shards).  The
        grid is :func:`micro_batch_grid`: with ``global_batch`` and no
        ``micro_batches``, the largest ``m`` the batch allows (``floor(B / N)``) and the
        powers of two below it; without a global batch, ``micro_batches`` or
        :data:`DEFAULT_COMPARE_MICRO_BATCHES`.  A note says which ``m`` were tried and why.
    period_factors : sequence of float, default (0.5, 0.7, 1.0, 1.4, 2.0)
        Checkpoint periods tried, as multiples of each setting's Young/Daly ``T_c*``.
    seeds : int, default 3
        Seeds per setting, ``0 .. seeds - 1``: the placement of the traced nodes on
        the groups (``placement_seed``) and the jitter; the same for every setting.
    cycles : int, default 2
        Copies of the trace end to end, at most :data:`MAX_CYCLES`; a run that has not
        finished within them is unfinished (``TTT/T0 > cycles``).
    include_ckpt : bool, default True
        Also run checkpointing alone.
    include_elastic : bool, default True
        Also run the elastic strategy of TorchFT / FT-HSDP (:mod:`spare_opt.simulation.events`):
        with a trace or a fault model only (it is left out on the preset's Weibull
        failures, and a note says so).
    fault_model : FailureModel, optional
        Without a trace: draw failures and repairs from this fitted model
        (:func:`spare_opt.fit_trace`); without either, the Weibull failures of
        ``params`` (the paper's semantics only).
    workers : int, default 1
        Processes (``-1``: every CPU); the result does not depend on it.
    executor : concurrent.futures.Executor, optional
        Run the tasks on this executor instead (a Dask cluster).
    progress : callable, optional
        ``progress(done, total)`` in work units: one failure walk per setting and
        seed, then one task of runs (every period) per setting and seed, each
        weighing its setting's cost (:func:`task_weight`), so that the time left
        estimated from the work done holds while settings of different cost finish.
    on_setting : callable, optional
        ``on_setting(row)`` as each setting finishes (every seed run), with its row
        of :attr:`CompareResult.settings`, in the calling thread.
    layout_time_limit : float, default 2.0
        Seconds of each Sidon layout search.
    global_batch : int, optional
        Sequences in the global batch ``B``.  A group's shard type holds
        ``floor(B / N)`` sequences, so SPARe's ``m`` is at most that: larger ``m`` of
        the grid are left out (a note names them).  Default: no bound.
    micro_batch_overhead_seconds : float, default 0.0
        Fixed cost (launch, pipeline fill) of each micro-batch a group computes beyond
        the first of a shard type (:func:`spare_opt.simulation._runs.run_events`); 0
        gives the figures without it to the digit.
    allreduce_seconds : float, optional
        All-reduce time per step, replacing ``params.allreduce_seconds``.  Without it
        (nor a ring model), ``params.allreduce_seconds`` when it is not the paper's
        line (:func:`spare_opt.simulation.parameters.allreduce_seconds`), else the
        paper's line, only within the range it was fitted on (``N <= 1000``; clipped at
        2 s below ``N = 200``): past it the verdict is refused rather than extrapolated.
        :attr:`CompareResult.allreduce` says which was used.
    gradient_bytes, bandwidth_bytes_per_second : float, optional
        Together: the all-reduce from the ring model
        :func:`spare_opt.simulation.parameters.ring_allreduce_seconds`, ``2 (N - 1) /
        N * gradient_bytes / bandwidth + allreduce_latency_seconds``.
    allreduce_latency_seconds : float, default 0.0
        The ring model's fixed latency.
    allreduce_sensitivity : bool, default False
        Also run each strategy's best setting at half and at double the all-reduce
        time and say whether the verdict changes (:attr:`CompareResult.sensitivity`).
    include_redistribution : bool, default True
        Also run redistribution, SPARe with every survivor allowed to take any
        micro-batch (``r = N``, the row ``"redistribute"``): the step cost with ``k``
        groups out is the counting bound ``ceil(m N / (N - k)) / m`` (closed form, no
        layout is built), no wipe-out until every group is down; under the paper's
        semantics a restart is taken at :func:`redistribution_restart_threshold`
        groups out.  With a trace or a fault model and SPARe settings only.
    nodes_per_group : int, default 1
        Nodes of one DP group: a group fails when any of its nodes fails and its
        repair ends when that node's does (:func:`per_group_model`); a trace is then
        fitted and scaled (not replayed).
    failures_path : str, optional
        The file ``fault_model`` was read from: named in the header and fingerprinted
        in :attr:`CompareResult.failures`.
    window : tuple, optional
        ``(start, end)`` of the trace to replay (:func:`spare_opt.window_trace`).
    trace_nodes : int, optional
        The cluster size of the trace, at least the nodes it names (the whole
        trace's, before ``window``), with ``trace`` only (default: the file's,
        ``FaultTrace.cluster_nodes``; the CLI passes :func:`trace_cluster_size`).  A
        note says when it differs from the file's.
    trace_scaling : {"auto", "fit", "replay"}, default "auto"
        How a trace's failures reach ``N`` groups.  ``"replay"``: its nodes are placed
        on the groups and its events replayed (one node per group: the trace's failure
        rate, whatever ``N``).  ``"fit"``: the trace is fitted
        (:func:`spare_opt.fit_trace` with ``nodes=trace_nodes``) and the runs draw
        from the model, each group failing like one node of the traced cluster (the
        per-node rate is kept, the cluster's rate grows with ``N``; times scaled by
        ``trace_time_scale``).  ``"auto"``: ``"fit"`` when the trace's cluster size
        is known and differs from ``N`` (and ``N`` is at least the nodes the trace
        names), else ``"replay"``.  The result's
        :attr:`~CompareResult.scaling` says which was done.

    Returns
    -------
    CompareResult
        One row per strategy at its best setting; SPARe also has its ``m = 1`` row
        (the paper's) when its best ``m`` is larger.

    Raises
    ------
    ParameterTypeError
        An argument of the wrong type.
    ParameterError
        An ``r`` or ``m`` out of range (``N m`` too large included), no strategy to
        run, a bad factor, seed count, cycle count or semantics; ``repair`` semantics
        with neither a trace nor a fault model; both a trace and a fault model; fewer
        groups than the nodes the trace names when it is replayed (their faults
        would be dropped); a global batch of fewer sequences than groups; a window
        without a trace or with bad bounds (:func:`spare_opt.window_trace`);
        ``trace_nodes`` without a trace, below the nodes the trace names or above
        ``2**31 - 1``; the all-reduce given twice (``allreduce_seconds`` and the ring
        model), half a ring model, or ``allreduce_latency_seconds`` without one.

    Notes
    -----
    *Checkpoint period.*  For each setting, ``T_f`` (the mean time between unmasked
    failures, ``unmasked_mtbf_seconds``) is measured on its failure walks: the span of
    the cyclic trace over one plus the mean number of wipe-outs (every failure event
    for checkpointing alone); the Young/Daly ``T_c* = T_s + sqrt(T_s^2 + 2 T_s (T_f +
    T_r))`` (:func:`spare_opt.theory.checkpoint_period`) times each factor is run, and
    the period with the least mean ``TTT/T0`` over the seeds is the setting's.
    Without a trace, ``T_c*`` is the closed form of :func:`spare_opt.simulate`: the
    system MTBF of the failures (the preset's, or the fault model's on ``N`` groups)
    times the mean number of failures to a wipe-out under the paper's semantics.

    *Elastic.*  The events of the elastic strategy carry ``N / (N - k)``, the time per
    unit of progress with ``k`` groups out; its row adds ``mean_batch_fraction``
    (time-weighted mean of ``(N - k) / N`` over the run) and ``short_batch_share``
    (share of the time, hence of the steps, with a short batch).  Its ``T_f`` is
    measured on its walks like the others'; without a trace, ``T_c*`` takes ``N``
    failures to a wipe-out (every group lost, the paper's semantics).
    *Best setting.*  Each strategy's row is :func:`best_setting` of its settings: among
    the settings whose mean lies in the 95% interval of the least mean ``TTT/T0``, the
    cheapest (smallest ``r``, then smallest ``m``).

    *Why cyclic.*  A run takes longer than ``T0``; replayed once, the trace would end
    before the slower strategies finish and leave the end of their runs free of
    failures.  Laid end to end, the trace keeps its failure rate under every strategy
    until ``cycles * T0``.

    References
    ----------
    Lee et al., ICML 2026, arXiv:2603.00357, Sec. 5-6; Young (1974), Daly (2006);
    ``docs/model.md`` (micro-batches, repairs).
    """
    started = time.perf_counter()
    check_params(params)
    n = params.groups
    notes = []
    reps = check.integers("rep redundancies", rep_redundancies, minimum=1, maximum=n) if rep_redundancies else []
    spares = check.integers("spare redundancies", spare_redundancies, minimum=2, maximum=n) \
        if spare_redundancies else []
    factors = check.numbers_("period factors", period_factors, above=0.0)
    seeds = check.count("seeds", seeds)
    include_ckpt = check.flag("include_ckpt", include_ckpt)
    include_elastic = check.flag("include_elastic", include_elastic)
    # beside the stacked settings: without SPARe settings there is nothing to set it against
    include_redistribution = check.flag("include_redistribution", include_redistribution) and n >= 2 and \
        bool(spare_redundancies)
    allreduce_sensitivity = check.flag("allreduce_sensitivity", allreduce_sensitivity)
    semantics = check.choice("semantics", semantics, SEMANTICS)
    overhead = check.number("micro_batch_overhead_seconds", micro_batch_overhead_seconds, minimum=0.0)
    nodes_per_group = check.count("nodes_per_group", nodes_per_group)
    if trace is None and trace_nodes is not None:
        raise ParameterError("trace_nodes is the size of a trace's cluster: give the trace too")
    if trace is not None and trace_nodes is not None:  # against the whole file: a window names fewer nodes
        trace_nodes = trace_cluster_size(trace, nodes=trace_nodes)
    if trace is not None and window is not None:
        from ..traces.window import _window_bounds, window_trace

        trace = window_trace(trace, *_window_bounds(window))
    elif window is not None:
        raise ParameterError("a window cuts a trace: give the trace too")
    if not (include_ckpt or reps or spares or include_elastic or include_redistribution):
        raise ParameterError("nothing to compare: no strategy to run")
    ms, grid_note = micro_batch_grid(global_batch, n, micro_batches) if (spares or include_redistribution) \
        else ([1], None)
    ms = [check_micro_batches(m, params.groups) for m in ms]  # N m bounded before any work
    if grid_note:
        notes.append(grid_note)
    params, allreduce = _allreduce_source(params, allreduce_seconds, gradient_bytes, bandwidth_bytes_per_second,
                                          allreduce_latency_seconds)
    cycles = check.count("cycles", cycles, maximum=MAX_CYCLES)
    params = replace(params, max_wall_factor=float(cycles))
    scaling = None
    fitted_from = None  # the trace a model was fitted on, when the verdict fitted it
    windowed = trace if getattr(trace, "window", None) is not None else None  # its note, even once fitted
    trace_scaling = check.choice("trace_scaling", trace_scaling, ("auto", "fit", "replay"))
    if trace is not None:
        check.instance("trace", trace, FaultTrace, " (spare_opt.read_fault_trace)")
        if fault_model is not None:
            raise ParameterError("give the failures once: a trace or a fault model, not both")
        nodes = trace.cluster_nodes if trace_nodes is None else trace_nodes  # checked above, on the whole trace
        if trace.cluster_nodes is not None and nodes != trace.cluster_nodes:
            notes.append(f"the trace's cluster is taken as {nodes:,} nodes, as given; the file says "
                         f"{trace.cluster_nodes:,}")
        if nodes_per_group > 1 and trace_scaling == "replay":
            raise ParameterError("nodes_per_group > 1 needs the trace fitted (trace_scaling 'fit' or 'auto'): a "
                                 "replay places one traced node on each group")
        if trace_scaling == "fit" or nodes_per_group > 1 or (
                trace_scaling == "auto" and nodes is not None and nodes != params.groups
                and params.groups >= trace.n_nodes):
            fitted_from = trace
            fault_model, scaling = scaled_trace_model(trace, nodes, params.groups, params.trace_time_scale,
                                                      nodes_per_group=nodes_per_group)
            params = replace(params, trace_time_scale=1.0)
            trace = None
    elif fault_model is not None and nodes_per_group > 1:
        fault_model = per_group_model(fault_model, nodes_per_group)
    if trace is not None:
        if params.groups < trace.n_nodes:
            raise ParameterError(f"N = {params.groups} groups is fewer than the {trace.n_nodes} nodes the trace "
                                 "names (one node per group): the faults of the others would be dropped")
        replayed = cyclic_trace(trace, cycles)
    else:
        if fault_model is None and semantics != "paper":
            raise ParameterError("repair semantics need repair times: give a trace or a fault model "
                                 "(spare-opt fit TRACE -o model.json), or use semantics='paper'")
        if fault_model is None:
            from ._runs import check_event_budget

            check_event_budget(params)
        else:
            from ..traces.failure_model import FailureModel

            check.instance("fault_model", fault_model, FailureModel, " (spare_opt.FailureModel.load)")
        replayed = None
    if include_elastic and trace is None and fault_model is None:
        include_elastic = False
        notes.append("elastic left out: it runs on a trace or a failure model, not on the preset's Weibull "
                     "failures")
        if not (include_ckpt or reps or spares):
            raise ParameterError("nothing to compare: elastic needs a trace or a fault model")

    configs = []  # (strategy, r, m, layout)
    if include_ckpt:
        configs.append(("ckpt", 1, 1, None))
    configs += [("rep", r, 1, None) for r in reps]
    layouts = {}
    for r in spares:
        layout = layouts[r] = default_layout(n, r, time_limit=layout_time_limit)
        configs += [("spare", r, m, layout) for m in ms]
    if include_elastic:
        configs.append(("elastic", 1, 1, None))
    group_mtbf = None
    if trace is not None:
        from .time_to_train import trace_system_mtbf_seconds

        group_mtbf = trace_system_mtbf_seconds(trace, params.trace_time_scale) * n
    elif fault_model is not None:
        group_mtbf = fault_model.node_mtbf_seconds  # each group fails like one node of the model
    restart_rule = None
    if include_redistribution and group_mtbf is None:
        notes.append("redistribution (r = N) left out: it runs on a trace or a failure model, not on the preset's "
                     "Weibull failures")
    elif include_redistribution:
        for m in ms:
            # Without repairs the group count only falls: restart when a restart is cheaper than going on.
            threshold = redistribution_restart_threshold(params, m, group_mtbf, overhead) \
                if semantics == "paper" else None
            configs.append(("redistribute", n, m, threshold))
        if semantics == "paper":
            restart_rule = {str(m): int(layout) for strategy, _, m, layout in configs if strategy == "redistribute"}
            notes.append("redistribution without repairs: a global restart when K groups are out, K = " + ", ".join(
                f"{k:,} at m = {m}" for m, k in restart_rule.items()) + " (the K of greatest progress per "
                "second: restart when a restart is cheaper than going on; redistribution_restart_threshold)")
    if not configs:
        raise ParameterError("nothing to compare: no strategy to run")

    # Progress in work units: a task weighs what its setting costs (task_weight), so the
    # estimate of the time left holds while cheap and dear settings finish in any order.
    if trace is not None:  # the walk finds the outcomes, the runs task runs the kernel once per period
        walk_weights = [task_weight(st, r, m, 0) for st, r, m, _ in configs for _ in range(seeds)]
        run_weights = [max(1, task_weight(st, r, m, len(factors)) - task_weight(st, r, m, 0))
                       for st, r, m, _ in configs for _ in range(seeds)]
    else:
        walk_weights = []
        run_weights = [task_weight(st, r, m, len(factors)) for st, r, m, _ in configs for _ in range(seeds)]
    grand_total = sum(walk_weights) + sum(run_weights)

    def relay(offset):
        if progress is None:
            return None
        return lambda done, total: progress(offset + done, grand_total)

    finished = [0] * len(configs)

    def announce(index, result):
        if on_setting is None:
            return
        c = index // seeds
        finished[c] += 1
        if finished[c] == seeds:
            on_setting(_setting_row(configs[c], results_so_far[c * seeds:(c + 1) * seeds], periods[c], factors))

    results_so_far = [None] * (len(configs) * seeds)

    def collect(index, result):
        results_so_far[index] = result
        announce(index, result)

    trace_info = None
    if trace is not None:
        walk_tasks = [(params, s, r, m, layout, replayed, seed, semantics)
                      for s, r, m, layout in configs for seed in range(seeds)]
        walks = run_tasks(_walk, walk_tasks, workers=workers, executor=executor, progress=relay(0),
                          weights=walk_weights)
        span_seconds = replayed.observed_days * 86400.0 * params.trace_time_scale
        periods, run_tasks_list, trace_info = [], [], {}
        for c, (strategy, r, m, _) in enumerate(configs):
            mine = walks[c * seeds:(c + 1) * seeds]
            wipe_outs = float(np.mean([wipes for _, wipes, _ in mine]))
            unmasked = span_seconds / (1.0 + wipe_outs)
            centre = theory.checkpoint_period(params.save_seconds, params.restart_seconds, unmasked)
            periods.append(tuple(centre * f for f in factors))
            trace_info[_label(strategy, r, m)] = dict(mine[0][2], mean_wipe_outs=wipe_outs)
            run_tasks_list += [(params, strategy, r, m, periods[-1], seed, mine[seed][0], semantics, overhead)
                               for seed in range(seeds)]
        results = _heavy_first(_trace_runs_task, run_tasks_list, run_weights, workers=workers, executor=executor,
                               progress=relay(sum(walk_weights)), on_result=collect)
    else:
        from .time_to_train import _period

        periods, run_tasks_list, centres = [], [], {}
        for strategy, r, m, layout in configs:
            if strategy == "redistribute":  # a restart after K failures (every group without the rule)
                mtbf = fault_model.node_mtbf_seconds / n
                centres[strategy, r] = theory.checkpoint_period(params.save_seconds, params.restart_seconds,
                                                                (layout or n) * mtbf)
            elif (strategy, r) not in centres:  # T_c* of simulate(): the wipe-out rate does not depend on m
                if strategy == "elastic":  # every group lost (N failures) under the paper's semantics
                    mtbf = fault_model.system_mtbf_seconds * fault_model.cluster_nodes / n
                    centres[strategy, r] = theory.checkpoint_period(params.save_seconds, params.restart_seconds,
                                                                    n * mtbf)
                else:
                    centres[strategy, r] = _period(params, strategy, r, layout, None, fault_model, m, None)
            periods.append(tuple(centres[strategy, r] * f for f in factors))
            run_tasks_list += [(params, strategy, r, m, periods[-1], seed, layout, semantics, fault_model,
                                overhead) for seed in range(seeds)]
        results = _heavy_first(_model_runs_task, run_tasks_list, run_weights, workers=workers, executor=executor,
                               progress=relay(0), on_result=collect)

    settings = [_setting_row(config, results[c * seeds:(c + 1) * seeds], periods[c], factors)
                for c, config in enumerate(configs)]
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
    if windowed is not None:
        from ..traces.window import window_text

        notes.append(window_text(windowed))
    source = trace.source if trace is not None else (
        "preset" if fault_model is None else
        f"failure model {failures_path}" if failures_path is not None else
        f"failure model {fault_model.source or ''}".strip())
    failures = _failure_record(params, trace, fault_model, fitted_from, failures_path, nodes_per_group,
                               group_mtbf, cycles, semantics)
    grid = {"rep_redundancies": list(reps), "spare_redundancies": list(spares), "micro_batches": list(ms),
            "period_factors": list(factors), "seeds": seeds, "cycles": cycles, "include_ckpt": include_ckpt,
            "include_elastic": include_elastic,
            "include_redistribution": any(config[0] == "redistribute" for config in configs),
            "redistribution_restart_at": restart_rule}
    result = CompareResult(params=params, source=source,
                           semantics=semantics, seeds=seeds, cycles=cycles, strategies=strategies,
                           settings=settings, trace_info=trace_info,
                           elapsed_seconds=time.perf_counter() - started, notes=notes,
                           global_batch=global_batch, micro_batch_overhead_seconds=overhead, scaling=scaling,
                           layouts=layouts, allreduce=allreduce, failures=failures, grid=grid)
    if allreduce_sensitivity:
        result.sensitivity = _sensitivity(result, trace, fault_model, workers, executor, layout_time_limit,
                                          include_ckpt, include_elastic)
        result.elapsed_seconds = time.perf_counter() - started
    return result


def _allreduce_source(params, allreduce_seconds, gradient_bytes, bandwidth, latency):
    """``params`` with the all-reduce time of the verdict, and where it came from (a dict).

    The operator's time first, then the ring model from ``gradient_bytes`` and
    ``bandwidth``, then the paper's line inside the range it was fitted on (clipped
    at 2 s below it); past that range the line is not extrapolated: an error asks for
    either.
    """
    from .parameters import ALLREDUCE_FITTED_GROUPS, ring_allreduce_seconds

    n = params.groups
    low, high = ALLREDUCE_FITTED_GROUPS
    latency = check.number("allreduce_latency_seconds", latency, minimum=0.0)
    ring = gradient_bytes is not None or bandwidth is not None
    if ring and (gradient_bytes is None or bandwidth is None):
        raise ParameterError("the ring all-reduce model needs both gradient_bytes and bandwidth_bytes_per_second")
    if latency and not ring:  # else the latency given would be dropped without a word
        raise ParameterError("allreduce_latency_seconds is part of the ring all-reduce model: give gradient_bytes "
                             "and bandwidth_bytes_per_second too")
    if allreduce_seconds is not None:
        if ring:
            raise ParameterError("give the all-reduce once: allreduce_seconds or gradient_bytes and "
                                 "bandwidth_bytes_per_second (the ring model), not both")
        seconds = check.number("allreduce_seconds", allreduce_seconds, minimum=0.0)
        return replace(params, allreduce_seconds=seconds), {"seconds": seconds, "source": "given",
                                                            "text": f"all-reduce {seconds:g} s (given)"}
    if ring:
        seconds = ring_allreduce_seconds(n, gradient_bytes, bandwidth, latency)
        if params.allreduce_seconds not in (seconds, allreduce_model(n)):  # the operator's own time: not dropped
            raise ParameterError(f"give the all-reduce once: params.allreduce_seconds = {params.allreduce_seconds:g} "
                                 f"s (given) or the ring model's {seconds:.3g} s (gradient_bytes and "
                                 "bandwidth_bytes_per_second), not both")
        text = (f"all-reduce {seconds:.3g} s (ring model: 2 (N-1)/N x {gradient_bytes:.4g} B / "
                f"{bandwidth:.4g} B/s + {latency:g} s)")
        return replace(params, allreduce_seconds=seconds), {
            "seconds": seconds, "source": "ring model", "gradient_bytes": float(gradient_bytes),
            "bandwidth_bytes_per_second": float(bandwidth), "allreduce_latency_seconds": latency,
            "formula": "2 (N - 1) / N * gradient_bytes / bandwidth_bytes_per_second + allreduce_latency_seconds",
            "text": text}
    seconds = params.allreduce_seconds
    if seconds != allreduce_model(n):  # set in the parameters: the operator's
        return params, {"seconds": seconds, "source": "given", "text": f"all-reduce {seconds:g} s (given)"}
    if n > high:
        raise ParameterError(
            f"N = {n:,} is past the range the paper's all-reduce line was fitted on (N = {low}-{high}): give the "
            "measured all-reduce time (allreduce_seconds, --allreduce-seconds) or the gradient's size and the "
            "link bandwidth for the ring model (gradient_bytes and bandwidth_bytes_per_second)")
    where = f"the paper's line at N = {n:,}, fitted on N = {low}-{high}" if n >= low else \
        f"the paper's line clipped at its least value, N = {n:,} below the N = {low}-{high} it was fitted on"
    return params, {"seconds": seconds, "source": "paper line", "text": f"all-reduce {seconds:.3g} s ({where})"}


def _file_fingerprint(path, fallback):
    """``sha256:`` of a file's bytes (what ``sha256sum`` prints), or of ``fallback()`` bytes without a file."""
    import hashlib
    import os

    if path is not None and os.path.isfile(path):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return "sha256:" + digest.hexdigest()
    return "sha256:" + hashlib.sha256(fallback()).hexdigest()


def _trace_bytes(trace):
    return b"".join(np.ascontiguousarray(array).tobytes() for array in (
        trace.times_days.astype("<f8"), trace.node.astype("<i8"), trace.is_start.astype("u1")))


def _model_bytes(model):
    import json

    doc = {key: value for key, value in model.to_dict().items() if key not in ("derived", "source")}
    return json.dumps(doc, sort_keys=True).encode()


def _model_record(model):
    return {"cluster_nodes": model.cluster_nodes, "event_mtbf_seconds": model.event_mtbf_seconds,
            "node_mtbf_seconds": model.node_mtbf_seconds, "weibull_shape": model.weibull_shape,
            "event_size_probabilities": list(model.event_size_probabilities),
            "repairs": {"distribution": model.repair_distribution, "median_seconds": model.repair_median_seconds,
                        "sigma": model.repair_sigma, "mean_seconds": model.repair_mean_seconds}}


def _failure_record(params, trace, fault_model, fitted_from, failures_path, nodes_per_group, group_mtbf, cycles,
                    semantics):
    """What the verdict's failures were, as the recommendation records them (only what was used)."""
    if trace is not None:
        path = trace.source
        return {"kind": "trace", "path": path, "fingerprint": _file_fingerprint(path, lambda: _trace_bytes(trace)),
                "cluster_nodes": trace.cluster_nodes, "nodes_named": trace.n_nodes, "nodes_per_group": 1,
                "time_scale": params.trace_time_scale, "cycles": cycles,
                "window": None if trace.window is None else dict(trace.window),
                "group_mtbf_seconds": group_mtbf, "repairs": "as traced"}
    if fault_model is None:
        return {"kind": "preset", "system_mtbf_seconds": params.system_mtbf_seconds,
                "group_mtbf_seconds": params.system_mtbf_seconds * params.groups,
                "weibull_shape": params.weibull_shape, "failure_model": params.failure_model,
                "rate_follows_live": params.rate_follows_live, "restart_failures": params.restart_failures}
    if fitted_from is not None:
        path = fitted_from.source
        record = {"kind": "trace fitted and scaled", "path": path,
                  "fingerprint": _file_fingerprint(path, lambda: _trace_bytes(fitted_from))}
    else:
        record = {"kind": "failure model", "path": None if failures_path is None else str(failures_path),
                  "fingerprint": _file_fingerprint(failures_path, lambda: _model_bytes(fault_model)),
                  "description": fault_model.source}
    model = _model_record(fault_model)
    if semantics == "paper":  # no group rejoins: the model's repairs are not used
        del model["repairs"]
    record.update(nodes_per_group=nodes_per_group, group_mtbf_seconds=group_mtbf,
                  node_mtbf_seconds=group_mtbf * nodes_per_group, model=model)
    return record


def per_group_model(model, nodes_per_group):
    """A node's failure model made a DP group's: the group fails when any of its ``g`` nodes fails.

    Failure events come ``g`` times as often (event MTBF and window divided by ``g``),
    each group taking the place of one node of the model; a group's repair ends when
    its failed node's does, so repairs are unchanged.

    Parameters
    ----------
    model : FailureModel
        Per node.
    nodes_per_group : int
        ``g >= 1``.

    Returns
    -------
    FailureModel
        ``model`` itself for ``g = 1``.

    Raises
    ------
    ParameterTypeError, ParameterError
        ``g`` is not an integer ``>= 1``.

    Notes
    -----
    The minimum of ``g`` independent exponential lifetimes of rate ``lambda`` is
    exponential of rate ``g lambda``; for a Weibull shape other than 1 the group's
    gaps keep the node's shape with a ``g`` times smaller mean (an approximation).
    """
    from ..traces.failure_model import FailureModel

    check.instance("model", model, FailureModel, " (spare_opt.FailureModel.load)")
    g = check.count("nodes_per_group", nodes_per_group)
    if g == 1:
        return model
    return replace(model, event_mtbf_seconds=model.event_mtbf_seconds / g, window_seconds=model.window_seconds / g)


def _sensitivity(result, trace, fault_model, workers, executor, layout_time_limit, include_ckpt, include_elastic):
    """The verdict at half and at double the all-reduce time: each strategy's best setting run again."""
    base = result.params.allreduce_seconds
    rows = [row for row in result.strategies if not row.get("paper_row")]
    reps = [row["redundancy"] for row in rows if row["strategy"] == "rep"]
    spares = [row for row in rows if row["strategy"] == "spare"]
    redistribute = [row for row in rows if row["strategy"] == "redistribute"]
    ms = sorted({row["micro_batches"] for row in spares + redistribute})
    out = {"allreduce_seconds": base, "runs": []}
    if base <= 0:
        return out
    for factor in (0.5, 2.0):
        other = compare(replace(result.params, max_wall_factor=float(result.cycles)), trace=trace,
                        fault_model=fault_model, semantics=result.semantics, rep_redundancies=reps,
                        spare_redundancies=[row["redundancy"] for row in spares], micro_batches=ms or None,
                        period_factors=result.grid["period_factors"], seeds=result.seeds, cycles=result.cycles,
                        include_ckpt=include_ckpt, include_elastic=include_elastic,
                        include_redistribution=bool(redistribute), workers=workers, executor=executor,
                        layout_time_limit=layout_time_limit, micro_batch_overhead_seconds=
                        result.micro_batch_overhead_seconds, allreduce_seconds=base * factor,
                        trace_scaling="replay" if trace is not None else "auto")
        out["runs"].append({"factor": factor, "allreduce_seconds": base * factor,
                            "best_exact": _verdict_key(other, exact=True), "best_overall": _verdict_key(other),
                            "conclusion": other.conclusion()})
    here = (_verdict_key(result, exact=True), _verdict_key(result))
    out["changes"] = any((run["best_exact"], run["best_overall"]) != here for run in out["runs"])
    return out


def _verdict_key(result, exact=False):
    """The verdict's best (exact) strategy and setting, as a name (``None`` when none finished)."""
    rows = [row for row in result.strategies if math.isfinite(row["ttt_ratio"]) and not row.get("paper_row")
            and (row.get("exact", True) or not exact)]
    if not rows:
        return None
    return _name(min(rows, key=lambda row: row["ttt_ratio"]))


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


def scaled_trace_model(trace, nodes, groups, time_scale=1.0, *, nodes_per_group=1):
    """A trace's fitted failure model for ``groups`` DP groups, and what was done in words.

    Parameters
    ----------
    trace : FaultTrace
    nodes : int or None
        The traced cluster's size (``None``: :func:`spare_opt.fit_trace`'s default,
        the file's or the nodes the trace names).
    groups : int
        ``N``: each group fails like one node of the traced cluster (the simulation
        scales the model's event gaps by ``nodes / N``, :func:`spare_opt.model_events`).
    time_scale : float, default 1.0
        Multiplies every time of the model (event gaps, window, repairs), as a trace
        replay multiplies the trace's times.
    nodes_per_group : int, default 1
        Nodes of one DP group: a group fails when any of its nodes fails (``g``
        times a traced node's rate, :func:`per_group_model`), its repair ends when
        that node's does.

    Returns
    -------
    model : FailureModel
    scaling : str
        One sentence for the verdict's header.

    Raises
    ------
    ParameterError, TraceError
        As :func:`spare_opt.fit_trace`; ``TraceError`` also when the fit gives no
        failure model (``FitResult.model_error`` says why: no positive repair time...).
    """
    from ..traces.fit import fit_trace

    fit = fit_trace(trace, nodes=nodes)
    model = fit.model
    if model is None:
        raise TraceError(f"{trace.source}: cannot scale the trace to {groups:,} groups: {fit.model_error}; replay it "
                         "unscaled, at the traced cluster's size, instead")
    time_scale = check.number("time_scale", time_scale, above=0.0)
    if time_scale != 1.0:
        model = replace(model, event_mtbf_seconds=model.event_mtbf_seconds * time_scale,
                        repair_median_seconds=model.repair_median_seconds * time_scale,
                        repair_empirical_seconds=tuple(x * time_scale for x in model.repair_empirical_seconds),
                        window_seconds=model.window_seconds * time_scale)
    per_node = model.node_mtbf_seconds / 86400.0
    g = check.count("nodes_per_group", nodes_per_group)
    rate = "" if time_scale == 1.0 else f", times x {time_scale:g}"
    if g == 1:
        each = f"each group fails like one traced node, MTBF {per_node:.3g} days{rate}"
    else:
        each = (f"each group of {g} nodes fails when any of its nodes fails, group MTBF {per_node / g:.3g} days "
                f"(node {per_node:.3g} days{rate})")
    scaling = (f"trace {trace.source} fitted on its {model.cluster_nodes:,} nodes and scaled per node to "
               f"{groups:,} groups ({each}: the cluster fails {g * groups / model.cluster_nodes:.3g}x as often "
               "as the traced one)")
    return per_group_model(model, g), scaling


def _heavy_first(function, tasks, weights, *, workers, executor, progress, on_result):
    """:func:`run_tasks` with the dearest tasks sent first (the workers then finish together);
    results, ``on_result`` indices and progress as if sent in order."""
    order = sorted(range(len(tasks)), key=lambda i: (-weights[i], i))
    out = run_tasks(function, [tasks[i] for i in order], workers=workers, executor=executor, progress=progress,
                    weights=[weights[i] for i in order],
                    on_result=None if on_result is None else lambda j, result: on_result(order[j], result))
    results = [None] * len(tasks)
    for j, i in enumerate(order):
        results[i] = out[j]
    return results


def _setting_row(config, runs, periods, factors):
    """The row of one setting: its figures at its best period (least mean TTT/T0), every period's mean."""
    strategy, r, m, _ = config
    per_period = [_summary([run[j] for run in runs]) for j in range(len(factors))]
    best = min(range(len(factors)), key=lambda j: (per_period[j]["ttt_ratio"], j))
    return dict(strategy=strategy, redundancy=int(r), micro_batches=int(m), **per_period[best],
                checkpoint_period_seconds=periods[best], periods=list(periods),
                ttt_ratio_by_period=[row["ttt_ratio"] for row in per_period])


def task_weight(strategy, redundancy, micro_batches, periods=1):
    """Work units of one task of :func:`compare` (one seed of a setting, every period), for progress.

    A relative cost, not a time: the runs of the simulation kernel (one per period)
    plus the outcomes of the failures, which cost most for SPARe with micro-batches
    (a split plan per failure and rejoin, growing with ``r m``).  Measured at
    ``N = 2,048`` (``benchmarks/bench_compare.py``, ``docs/benchmarks.md``).

    Parameters
    ----------
    strategy : {"ckpt", "rep", "spare"}
    redundancy, micro_batches : int
    periods : int, default 1
        Checkpoint periods the task runs (``0``: the outcomes only, a trace's walk).

    Returns
    -------
    int
        ``>= 1``.
    """
    outcomes = 1.0 if strategy != "spare" else 1.0 + WEIGHT_PER_SPLIT * redundancy * micro_batches
    return max(1, int(round(10 * (periods * WEIGHT_PER_RUN + outcomes))))


#: Relative cost of one kernel run (one period) against the outcomes of ckpt's failures.
WEIGHT_PER_RUN = 0.2
#: Relative cost of SPARe's outcomes per unit of ``r m`` (split plans).
WEIGHT_PER_SPLIT = 0.1


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


def _label(strategy, redundancy, micro_batches):
    if strategy in ("ckpt", "elastic"):
        return strategy
    if strategy == "rep":
        return f"rep r={redundancy}"
    return f"spare r={redundancy} m={micro_batches}"


def _summary(digests):
    """Mean and 95% interval of ``TTT/T0`` and the means of the other figures over seeds."""
    ratio, ci = mean_ci95([d["ttt_ratio"] for d in digests])
    summary = {
        "ttt_ratio": ratio,
        "ttt_ci": list(ci),
        "availability": float(np.mean([d["availability"] for d in digests])),
        "restarts": float(np.mean([d["restarts"] for d in digests])),
        "mean_step_cost": float(np.mean([d["mean_step_cost"] for d in digests])),
        "unfinished": int(sum(not d["finished"] for d in digests)),
    }
    summary["ttt_parts"] = {key: float(np.mean([d["ttt_parts"][key] for d in digests]))
                            for key in digests[0]["ttt_parts"]}
    if "mean_batch_fraction" in digests[0]:
        for key in ("mean_batch_fraction", "short_batch_share", "steps_per_sample"):
            summary[key] = float(np.mean([d[key] for d in digests]))
    return summary


# ----------------------------------------------------------------------------- figure
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
    from .._core.plotting import _figure, _save

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

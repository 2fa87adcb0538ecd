"""The verdict's result: :class:`CompareResult`, its data and how it is built from the pipeline's steps.

The words (table, grid, verdict line) are in :mod:`._text`; the methods of
:class:`CompareResult` that return them call it.
"""

import time
from dataclasses import dataclass, field

from ..._core.results import Result
from ..._core.stats import finite_or_none
from ..parameters import SimulationParameters, fault_free_seconds
from . import _text
from ._failures import _failure_record


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
        return _text.format_text(self)

    def input_line(self):
        """str or None: the input each group must read per step, stacked SPARe against redistribution."""
        return _text.input_line(self)

    def held_line(self):
        """str or None: when the best strategy is not SPARe, what a recommendation file holds instead."""
        return _text.held_line(self)

    def sensitivity_line(self):
        """str: whether the verdict changes at half and at double the all-reduce time."""
        return _text.sensitivity_line(self)

    def format_grid(self):
        """list of str: every setting tried, one small table per strategy (``*``: the setting chosen)."""
        return _text.format_grid(self)

    def conclusion(self):
        """str: the verdict line: the best exact strategy and its gain, then the best overall and what it buys.

        *Exact* strategies train on the fault-free gradient (all but elastic, whose
        global batch shrinks while groups are out).  When the best overall is not
        exact, the line says how much time it saves over the best exact one and at
        which price in samples.
        """
        return _text.conclusion(self)


def verdict_result(inputs, grid, runs, pricing, *, started):
    """The :class:`CompareResult` of one verdict, from its steps: inputs, grid, runs and pricing.

    ``started`` is the :func:`time.perf_counter` of the call, for ``elapsed_seconds``.
    """
    notes = list(inputs.notes) + list(grid.notes)
    if inputs.windowed is not None:
        from ...traces.window import window_text

        notes.append(window_text(inputs.windowed))
    trace, fault_model = inputs.trace, inputs.fault_model
    source = trace.source if trace is not None else (
        "preset" if fault_model is None else
        f"failure model {inputs.failures_path}" if inputs.failures_path is not None else
        f"failure model {fault_model.source or ''}".strip())
    failures = _failure_record(inputs.params, trace, fault_model, inputs.fitted_from, inputs.failures_path,
                               inputs.nodes_per_group, grid.group_mtbf_seconds, inputs.cycles, inputs.semantics)
    settings_grid = {
        "rep_redundancies": list(inputs.rep_redundancies), "spare_redundancies": list(inputs.spare_redundancies),
        "micro_batches": list(inputs.micro_batches), "period_factors": list(inputs.period_factors),
        "seeds": inputs.seeds, "cycles": inputs.cycles, "include_ckpt": inputs.include_ckpt,
        "include_elastic": inputs.include_elastic,
        "include_redistribution": any(config[0] == "redistribute" for config in grid.configs),
        "redistribution_restart_at": grid.restart_rule}
    return CompareResult(params=inputs.params, source=source, semantics=inputs.semantics, seeds=inputs.seeds,
                         cycles=inputs.cycles, strategies=pricing.strategies, settings=pricing.settings,
                         trace_info=runs.trace_info, elapsed_seconds=time.perf_counter() - started, notes=notes,
                         global_batch=inputs.global_batch,
                         micro_batch_overhead_seconds=inputs.micro_batch_overhead_seconds, scaling=inputs.scaling,
                         layouts=grid.layouts, allreduce=inputs.allreduce, failures=failures, grid=settings_grid,
                         sensitivity=pricing.sensitivity)

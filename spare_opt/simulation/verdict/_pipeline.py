"""The verdict's pipeline: :func:`compare` as five steps.

``inputs -> grid -> runs -> pricing -> report``: :func:`~._inputs.build_inputs`
checks and resolves the arguments once into a frozen :class:`~._inputs.CompareInputs`,
:func:`~._grid.settings_grid` lists the settings, :func:`~._setting_runs.run_settings`
runs them, :func:`~._pricing.price` prices them and picks each strategy's best, and
:func:`~._result.verdict_result` makes the :class:`~._result.CompareResult`.
"""

import time
from functools import partial

from ._failures import DEFAULT_CYCLES
from ._grid import DEFAULT_COMPARE_FACTORS, DEFAULT_COMPARE_REP, DEFAULT_COMPARE_SPARE, settings_grid
from ._inputs import build_inputs
from ._pricing import price
from ._result import verdict_result
from ._setting_runs import run_settings


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
    inputs = build_inputs(
        params, trace=trace, semantics=semantics, rep_redundancies=rep_redundancies,
        spare_redundancies=spare_redundancies, micro_batches=micro_batches, period_factors=period_factors,
        seeds=seeds, cycles=cycles, include_ckpt=include_ckpt, include_elastic=include_elastic,
        fault_model=fault_model, layout_time_limit=layout_time_limit, global_batch=global_batch,
        micro_batch_overhead_seconds=micro_batch_overhead_seconds, allreduce_seconds=allreduce_seconds,
        window=window, trace_nodes=trace_nodes, trace_scaling=trace_scaling,
        include_redistribution=include_redistribution, gradient_bytes=gradient_bytes,
        bandwidth_bytes_per_second=bandwidth_bytes_per_second, allreduce_latency_seconds=allreduce_latency_seconds,
        allreduce_sensitivity=allreduce_sensitivity, nodes_per_group=nodes_per_group, failures_path=failures_path)
    grid = settings_grid(inputs)
    runs = run_settings(inputs, grid, workers=workers, executor=executor, progress=progress, on_setting=on_setting)
    pricing = price(inputs, runs, rerun=partial(compare, workers=workers, executor=executor))
    return verdict_result(inputs, grid, runs, pricing, started=started)

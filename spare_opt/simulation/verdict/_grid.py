"""The verdict's grid: every (strategy, r, m) it runs, with the layouts and restart rules they need.

:func:`settings_grid` turns the checked :class:`~._inputs.CompareInputs` into a
:class:`SettingsGrid`; the defaults of the grid (``DEFAULT_COMPARE_*``,
:data:`QUICK_COMPARE`) and the ``m`` a global batch allows (:func:`micro_batch_grid`)
live here too.
"""

from dataclasses import dataclass

import numpy as np

from ..._core import validation as check
from ..._core.errors import ParameterError
from .._runs import default_layout
from ..parameters import SimulationParameters, micro_batch_capacity

#: Replication degrees of the verdict.
DEFAULT_COMPARE_REP = (2, 3)


#: SPARe redundancies of the verdict's grid (9 = r* at N = 400, the traced cluster).
DEFAULT_COMPARE_SPARE = (2, 3, 5, 9)


#: Micro-batches per shard type of the verdict's grid (1: the paper's whole shards).
DEFAULT_COMPARE_MICRO_BATCHES = (1, 4, 16)


#: Checkpoint periods tried for every setting, as multiples of its Young/Daly ``T_c*``.
DEFAULT_COMPARE_FACTORS = (0.5, 0.7, 1.0, 1.4, 2.0)


#: The grid of ``compare --quick``: a first look (fewer settings, seeds and periods); its ``micro_batches``
#: apply without a global batch only (with one, the m of :func:`micro_batch_grid`, as without ``--quick``).
QUICK_COMPARE = {"rep_redundancies": (2,), "spare_redundancies": (3, 5), "micro_batches": (1, 16), "seeds": 2,
                 "period_factors": (0.7, 1.0, 1.4)}


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


@dataclass(frozen=True)
class SettingsGrid:
    """The settings of one verdict, in the order they run and are reported.

    Attributes
    ----------
    configs : tuple of tuple
        ``(strategy, r, m, extra)`` per setting: ``extra`` is the SPARe layout, the
        restart threshold ``K`` of redistribution under the paper's semantics
        (:func:`redistribution_restart_threshold`), else ``None``.
    layouts : dict
        ``{r: Layout}``, the Sidon layout of each SPARe ``r``.
    group_mtbf_seconds : float or None
        One group's MTBF (a trace's or a failure model's; ``None`` on a preset's Weibull failures).
    restart_rule : dict or None
        ``{str(m): K}``: redistribution's restart threshold per ``m`` (paper semantics).
    notes : tuple of str
        What the grid left out or chose, for the verdict's notes.
    """

    configs: tuple
    layouts: dict
    group_mtbf_seconds: float | None
    restart_rule: dict | None
    notes: tuple


def settings_grid(inputs):
    """The :class:`SettingsGrid` of checked inputs (:class:`~._inputs.CompareInputs`).

    Checkpointing alone, replication per ``r``, SPARe per ``(r, m)`` (a Sidon layout
    per ``r``), elastic, then redistribution per ``m`` (with a trace or a failure
    model only: it needs a group's MTBF for its restart rule).

    Raises
    ------
    ParameterError
        No setting to run.
    """
    params, n = inputs.params, inputs.params.groups
    configs, layouts, notes = [], {}, []
    if inputs.include_ckpt:
        configs.append(("ckpt", 1, 1, None))
    configs += [("rep", r, 1, None) for r in inputs.rep_redundancies]
    for r in inputs.spare_redundancies:
        layout = layouts[r] = default_layout(n, r, time_limit=inputs.layout_time_limit)
        configs += [("spare", r, m, layout) for m in inputs.micro_batches]
    if inputs.include_elastic:
        configs.append(("elastic", 1, 1, None))
    group_mtbf = None
    if inputs.trace is not None:
        from ..time_to_train import trace_system_mtbf_seconds

        group_mtbf = trace_system_mtbf_seconds(inputs.trace, params.trace_time_scale) * n
    elif inputs.fault_model is not None:
        group_mtbf = inputs.fault_model.node_mtbf_seconds  # each group fails like one node of the model
    restart_rule = None
    if inputs.include_redistribution and group_mtbf is None:
        notes.append("redistribution (r = N) left out: it runs on a trace or a failure model, not on the preset's "
                     "Weibull failures")
    elif inputs.include_redistribution:
        paper = inputs.semantics == "paper"
        for m in inputs.micro_batches:
            # Without repairs the group count only falls: restart when a restart is cheaper than going on.
            threshold = redistribution_restart_threshold(params, m, group_mtbf, inputs.micro_batch_overhead_seconds) \
                if paper else None
            configs.append(("redistribute", n, m, threshold))
        if paper:
            restart_rule = {str(m): int(k) for strategy, _, m, k in configs if strategy == "redistribute"}
            notes.append("redistribution without repairs: a global restart when K groups are out, K = " + ", ".join(
                f"{k:,} at m = {m}" for m, k in restart_rule.items()) + " (the K of greatest progress per "
                "second: restart when a restart is cheaper than going on; redistribution_restart_threshold)")
    if not configs:
        raise ParameterError("nothing to compare: no strategy to run")
    return SettingsGrid(configs=tuple(configs), layouts=layouts, group_mtbf_seconds=group_mtbf,
                        restart_rule=restart_rule, notes=tuple(notes))

"""Time-to-train: simulated runs, trace replay and the operator's verdict.

* :mod:`.parameters` - :class:`SimulationParameters` and the presets;
* :mod:`.events` - failure and rejoin events (``paper`` and ``repair`` semantics);
* :mod:`.time_to_train` - :func:`simulate`, :func:`simulate_seeds` (run drivers in
  ``_runs``, the compiled run in ``_kernels``);
* :mod:`.tuning` - :func:`tune`, the best redundancy and checkpoint period;
* :mod:`.replay` - :func:`replay_trace`, a real fault trace replayed on a layout;
* :mod:`.verdict` - :func:`compare`: checkpointing, replication and SPARe on the same failures;
* :mod:`.cluster` - :func:`load_cluster`, the cluster file (TOML) the commands read with ``--cluster``;
* :mod:`.recommend` - :func:`write_recommendation`, the verdict as a layout file to deploy.
"""

from .parameters import (
    PAPER,
    PAPER_TABLE,
    PAPER_MTBF_SECONDS,
    PAPER_RESTART_SECONDS,
    PAPER_SAVE_SECONDS,
    DEFAULT_PERIOD_FACTORS,
    DEFAULT_REP_REDUNDANCIES,
    DEFAULT_SPARE_REDUNDANCIES,
    STRATEGIES,
    RESTART_FAILURE_POLICIES,
    FAILURE_MODELS,
    MAX_STEPS,
    DEFAULT_HEAL_SECONDS,
    SimulationParameters,
    Preset,
    PRESETS,
    get_preset,
    preset_parameters,
    parse_overrides,
    allreduce_seconds,
    allreduce_extrapolation,
    micro_batch_capacity,
    ALLREDUCE_FITTED_GROUPS,
    ring_allreduce_seconds,
    fault_free_seconds,
    steps_in,
)
from .events import SEMANTICS, SEMANTICS_RULES, EVENT_KINDS, FailureEvents, trace_events, model_events
from .time_to_train import (
    MAX_EXPECTED_FAILURES,
    DEFAULT_REP_REDUNDANCY,
    SimulationResult,
    simulate,
    simulate_seeds,
    summarise,
    default_redundancy,
    default_layout,
    rep_wipe_out_index,
    trace_failures,
    trace_system_mtbf_seconds,
    trace_seconds,
)
from .tuning import (
    closed_form_period,
    closed_form,
    mean_failures_to_wipe_out,
    TuneResult,
    tune,
    tune_preset,
    plot_tune,
)
from .replay import PLANNERS, ReplayRow, ReplayResult, replay_trace, ROW_STATUSES
from .replay import DEFAULT_PLACEMENTS, MAX_PLACEMENTS, replay_placements, first_fault_warning
from . import verdict as _verdict
from .verdict import *  # noqa: F403 - the verdict's public names, listed once in its __all__
from .cluster import CLUSTER_KEYS, FAILURE_KEYS, ClusterFile, load_cluster
from .recommend import RECOMMENDATION_VERSION, layout_fingerprint, recommendation_layout, write_recommendation

__all__ = [
    "PAPER",
    "PAPER_TABLE",
    "PAPER_MTBF_SECONDS",
    "PAPER_RESTART_SECONDS",
    "PAPER_SAVE_SECONDS",
    "DEFAULT_PERIOD_FACTORS",
    "DEFAULT_REP_REDUNDANCIES",
    "DEFAULT_SPARE_REDUNDANCIES",
    "STRATEGIES",
    "RESTART_FAILURE_POLICIES",
    "FAILURE_MODELS",
    "MAX_STEPS",
    "DEFAULT_HEAL_SECONDS",
    "SimulationParameters",
    "Preset",
    "PRESETS",
    "get_preset",
    "preset_parameters",
    "parse_overrides",
    "allreduce_seconds",
    "allreduce_extrapolation",
    "fault_free_seconds",
    "steps_in",
    "SEMANTICS",
    "SEMANTICS_RULES",
    "EVENT_KINDS",
    "FailureEvents",
    "trace_events",
    "model_events",
    "MAX_EXPECTED_FAILURES",
    "DEFAULT_REP_REDUNDANCY",
    "SimulationResult",
    "simulate",
    "simulate_seeds",
    "summarise",
    "default_redundancy",
    "default_layout",
    "rep_wipe_out_index",
    "trace_failures",
    "trace_system_mtbf_seconds",
    "trace_seconds",
    "closed_form_period",
    "closed_form",
    "mean_failures_to_wipe_out",
    "TuneResult",
    "tune",
    "tune_preset",
    "plot_tune",
    "PLANNERS",
    "ReplayRow",
    "ReplayResult",
    "replay_trace",
    "DEFAULT_PLACEMENTS",
    "MAX_PLACEMENTS",
    "replay_placements",
    "first_fault_warning",
    "ROW_STATUSES",
    "micro_batch_capacity",
    "ALLREDUCE_FITTED_GROUPS",
    "ring_allreduce_seconds",
    *_verdict.__all__,
    "CLUSTER_KEYS",
    "FAILURE_KEYS",
    "ClusterFile",
    "load_cluster",
    "RECOMMENDATION_VERSION",
    "layout_fingerprint",
    "recommendation_layout",
    "write_recommendation",
]

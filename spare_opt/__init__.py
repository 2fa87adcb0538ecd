"""spare-opt: fault-tolerance planning for data-parallel LLM pretraining (SPARe).

Every public name is importable from here; the modules, one per concept:

* :mod:`spare_opt.layout` - :class:`Layout`, a stack layout;
  :mod:`spare_opt.generators` - :func:`sidon`, :func:`consecutive`, :func:`block`,
  :func:`random_latin`, :func:`generate`;
* :mod:`spare_opt.plan` - :class:`Plan`, :func:`check_plan`;
  :mod:`spare_opt.failure_sets` - reading and checking failure sets;
* :mod:`spare_opt.planner` - :func:`plan_reorder`, the exact reorder planner (the
  reference), and :func:`stack_number_certificate`;
* :mod:`spare_opt.controller` - :class:`ReorderController`, the online controller;
* :mod:`spare_opt.theory` - closed forms; :mod:`spare_opt.worst_case` - guarantees;
  :mod:`spare_opt.montecarlo` - :func:`monte_carlo` and :func:`sweep`;
* :mod:`spare_opt.parameters` - simulation parameters and presets (the paper's
  numbers); :mod:`spare_opt.simulation` - :func:`simulate`; :mod:`spare_opt.tuning` -
  :func:`tune`;
* :mod:`spare_opt.trace` - fault traces; :mod:`spare_opt.fit` - :func:`fit_trace` and the
  :class:`FailureModel` it fits; :mod:`spare_opt.replay` - :func:`replay_trace`;
  :mod:`spare_opt.verdict` - :func:`compare`, the operator's verdict (checkpointing,
  replication and SPARe on the same failures); :mod:`spare_opt.demo` - the demo.

Conventions (``docs/api.md``): core inputs positional, options keyword-only; wrong types
raise :class:`ParameterTypeError`, bad values :class:`ParameterError` (both
:class:`SpareError`); ``workers`` as in scipy (``-1`` = every CPU); ``executor=`` any
``concurrent.futures.Executor``; ``progress(done, total)``; every result has
``to_dict()``.

Reference: Lee et al., "SPARe: Stacked Parallelism with Adaptive Reordering for
Fault-Tolerant LLM Pretraining Systems with 100k+ GPUs", ICML 2026, arXiv:2603.00357.
"""

from .errors import (
    FailureSetError,
    LayoutError,
    LayoutFileError,
    OutputExistsError,
    OutputWriteError,
    ParameterError,
    ParameterTypeError,
    PlanError,
    FailureModelError,
    SolverError,
    SpareError,
    TraceError,
)
from .layout import (
    LAYOUT_FORMAT,
    LAYOUT_VERSION,
    check_layout,
    check_size,
    Layout,
)
from .plan import (
    MASKED,
    WIPE_OUT,
    check_plan,
    is_valid_plan,
    lower_bound,
    Plan,
)
from .failure_sets import (
    normalise_groups,
    parse_group_ids,
    read_failure_set,
)
from .generators import (
    DEFAULT_TIME_LIMIT,
    METHODS,
    block,
    consecutive,
    generate,
    random_latin,
    sidon,
)
from .planner import (
    least_stack_number,
    plan_reorder,
    stack_number_certificate,
)
from .controller import (
    ReorderController,
    stack_number_trajectories,
    stack_number_trajectory,
)
from .worst_case import (
    EXACT_WORST_CASE_MAX_GROUPS,
    WORST_CASE_METHODS,
    min_wipe_out_set,
    worst_case_after_one_failure,
    worst_case_profile,
    worst_case_stack_number,
    WorstCase,
)
from .montecarlo import (
    MAX_TRIALS,
    monte_carlo,
    MonteCarloResult,
    sweep,
    SweepResult,
)
from .parameters import (
    DEFAULT_PERIOD_FACTORS,
    DEFAULT_REP_REDUNDANCIES,
    DEFAULT_SPARE_REDUNDANCIES,
    FAILURE_MODELS,
    MAX_STEPS,
    PAPER,
    PAPER_MTBF_SECONDS,
    PAPER_RESTART_SECONDS,
    PAPER_SAVE_SECONDS,
    PAPER_TABLE,
    PRESETS,
    RESTART_FAILURE_POLICIES,
    STRATEGIES,
    allreduce_seconds,
    fault_free_seconds,
    get_preset,
    parse_overrides,
    Preset,
    preset_parameters,
    SimulationParameters,
)
from .simulation import (
    DEFAULT_REP_REDUNDANCY,
    MAX_EXPECTED_FAILURES,
    default_layout,
    default_redundancy,
    rep_wipe_out_index,
    simulate,
    simulate_seeds,
    SimulationResult,
    summarise,
    trace_failures,
    trace_system_mtbf_seconds,
)
from .tuning import (
    closed_form,
    closed_form_period,
    mean_failures_to_wipe_out,
    plot_tune,
    tune,
    tune_preset,
    TuneResult,
)
from .trace import (
    IRREGULAR_KINDS,
    TRACE_FORMAT,
    TRACE_VERSION,
    FaultTrace,
    Instant,
    IrregularEvent,
    parse_fault_events,
    read_fault_trace,
    synthetic_fault_trace,
    trace_instants,
    instant_batches,
    write_fault_trace,
)
from .fit import (
    DEFAULT_RESAMPLES,
    DEFAULT_WINDOW_MINUTES,
    FAILURE_MODEL_FORMAT,
    FAILURE_MODEL_VERSION,
    MAX_SAMPLE_EVENTS,
    REPAIR_DISTRIBUTIONS,
    Estimate,
    FailureModel,
    FitResult,
    fit_trace,
)
from .replay import (
    PLANNERS,
    SEMANTICS,
    ROW_STATUSES,
    replay_trace,
    ReplayResult,
    ReplayRow,
)
from .demo import (
    DEFAULT_OUT,
    DEFAULT_TRACE_SEED,
    DEMO_GROUPS,
    default_trace_document,
    DemoResult,
    find_trace,
    packaged_trace_path,
    run_demo,
)
from .verdict import (
    COMPARE_SEMANTICS,
    DEFAULT_COMPARE_FACTORS,
    DEFAULT_COMPARE_MICRO_BATCHES,
    DEFAULT_COMPARE_REP,
    DEFAULT_COMPARE_SPARE,
    DEFAULT_CYCLES,
    STRATEGY_LABELS,
    CompareResult,
    compare,
    compare_parameters,
    cyclic_trace,
    plot_compare,
)
from . import theory

__version__ = "0.2.0"

__all__ = [
    "theory",
    "SpareError",
    "ParameterTypeError",
    "ParameterError",
    "LayoutError",
    "LayoutFileError",
    "FailureSetError",
    "PlanError",
    "TraceError",
    "OutputExistsError",
    "OutputWriteError",
    "SolverError",
    "FailureModelError",
    "Layout",
    "LAYOUT_FORMAT",
    "LAYOUT_VERSION",
    "check_size",
    "check_layout",
    "Plan",
    "MASKED",
    "WIPE_OUT",
    "check_plan",
    "is_valid_plan",
    "lower_bound",
    "normalise_groups",
    "parse_group_ids",
    "read_failure_set",
    "consecutive",
    "sidon",
    "block",
    "random_latin",
    "generate",
    "METHODS",
    "DEFAULT_TIME_LIMIT",
    "plan_reorder",
    "least_stack_number",
    "stack_number_certificate",
    "ReorderController",
    "stack_number_trajectory",
    "stack_number_trajectories",
    "EXACT_WORST_CASE_MAX_GROUPS",
    "WORST_CASE_METHODS",
    "WorstCase",
    "min_wipe_out_set",
    "worst_case_after_one_failure",
    "worst_case_stack_number",
    "worst_case_profile",
    "MAX_TRIALS",
    "MonteCarloResult",
    "SweepResult",
    "monte_carlo",
    "sweep",
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
    "SimulationParameters",
    "Preset",
    "PRESETS",
    "get_preset",
    "preset_parameters",
    "parse_overrides",
    "allreduce_seconds",
    "fault_free_seconds",
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
    "closed_form_period",
    "closed_form",
    "mean_failures_to_wipe_out",
    "TuneResult",
    "tune",
    "tune_preset",
    "plot_tune",
    "FaultTrace",
    "Instant",
    "IrregularEvent",
    "IRREGULAR_KINDS",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "read_fault_trace",
    "parse_fault_events",
    "trace_instants",
    "instant_batches",
    "synthetic_fault_trace",
    "write_fault_trace",
    "Estimate",
    "FailureModel",
    "FitResult",
    "fit_trace",
    "REPAIR_DISTRIBUTIONS",
    "FAILURE_MODEL_FORMAT",
    "FAILURE_MODEL_VERSION",
    "DEFAULT_WINDOW_MINUTES",
    "DEFAULT_RESAMPLES",
    "MAX_SAMPLE_EVENTS",
    "PLANNERS",
    "SEMANTICS",
    "ReplayRow",
    "ReplayResult",
    "replay_trace",
    "ROW_STATUSES",
    "DEMO_GROUPS",
    "DEFAULT_OUT",
    "DEFAULT_TRACE_SEED",
    "DemoResult",
    "run_demo",
    "find_trace",
    "packaged_trace_path",
    "default_trace_document",
    "COMPARE_SEMANTICS",
    "DEFAULT_COMPARE_FACTORS",
    "DEFAULT_COMPARE_MICRO_BATCHES",
    "DEFAULT_COMPARE_REP",
    "DEFAULT_COMPARE_SPARE",
    "DEFAULT_CYCLES",
    "STRATEGY_LABELS",
    "CompareResult",
    "compare",
    "compare_parameters",
    "cyclic_trace",
    "plot_compare",
]

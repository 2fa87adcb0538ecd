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
  :mod:`spare_opt.monte_carlo` - :func:`monte_carlo` and :func:`sweep`;
* :mod:`spare_opt.parameters` - simulation parameters and presets (the paper's
  numbers); :mod:`spare_opt.simulate` - :func:`simulate`; :mod:`spare_opt.tune` -
  :func:`tune`;
* :mod:`spare_opt.trace` - fault traces; :mod:`spare_opt.replay` - :func:`replay_trace`;
  :mod:`spare_opt.demo` - the demo.

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
    SolverError,
    SpareError,
    TraceError,
)
from .layout import Layout
from .plan import MASKED, WIPE_OUT, Plan, check_plan, is_valid_plan, lower_bound
from .failure_sets import normalise_groups, parse_group_ids, read_failure_set
from .generators import block, consecutive, generate, random_latin, sidon
from .planner import least_stack_number, plan_reorder, stack_number_certificate
from .controller import ReorderController, stack_number_trajectories, stack_number_trajectory
from .worst_case import (
    WorstCase,
    min_wipe_out_set,
    worst_case_after_one_failure,
    worst_case_profile,
    worst_case_stack_number,
)
from .monte_carlo import MonteCarloResult, SweepResult, monte_carlo, sweep
from .parameters import PRESETS, SimulationParameters, get_preset, preset_parameters
from .simulate import SimulationResult, simulate, simulate_seeds, summarise
from .tune import TuneResult, tune, tune_preset
from .trace import FaultTrace, read_fault_trace, synthetic_fault_trace, trace_instants
from .replay import ReplayResult, replay_trace

__version__ = "0.2.0"

__all__ = [
    "Layout",
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
    "plan_reorder",
    "least_stack_number",
    "stack_number_certificate",
    "ReorderController",
    "stack_number_trajectory",
    "stack_number_trajectories",
    "WorstCase",
    "min_wipe_out_set",
    "worst_case_after_one_failure",
    "worst_case_stack_number",
    "worst_case_profile",
    "MonteCarloResult",
    "SweepResult",
    "monte_carlo",
    "sweep",
    "SimulationParameters",
    "PRESETS",
    "get_preset",
    "preset_parameters",
    "SimulationResult",
    "simulate",
    "simulate_seeds",
    "summarise",
    "TuneResult",
    "tune",
    "tune_preset",
    "FaultTrace",
    "read_fault_trace",
    "synthetic_fault_trace",
    "trace_instants",
    "ReplayResult",
    "replay_trace",
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
]

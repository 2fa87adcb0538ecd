"""spare-opt: fault-tolerance planning for data-parallel LLM pretraining (SPARe).

The main objects:

* :class:`Layout` - a stack layout (``spare_opt.layout``), made by the generators in
  ``spare_opt.generators`` (:func:`sidon`, :func:`consecutive`, :func:`block`,
  :func:`random_latin`);
* :func:`plan_reorder` - the exact reorder planner (``spare_opt.planner``), the reference;
* :class:`ReorderController` - the online incremental controller (``spare_opt.controller``);
* :class:`Plan` - what both return (``spare_opt.plan``);
* ``spare_opt.theory``, ``spare_opt.analysis``, ``spare_opt.simulate``, ``spare_opt.tune``
  - closed forms, Monte-Carlo and worst-case analysis, time-to-train simulation;
* ``spare_opt.trace`` and ``spare_opt.replay`` - real fault traces.

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
    SolverError,
    SpareError,
    TraceError,
)
from .layout import Layout
from .plan import MASKED, WIPE_OUT, Plan, check_plan, lower_bound
from .generators import block, consecutive, generate, random_latin, sidon
from .planner import plan_reorder
from .controller import ReorderController, stack_number_trajectories, stack_number_trajectory
from .trace import read_fault_trace
from .replay import replay_trace

__version__ = "0.1.0"

__all__ = [
    "Layout",
    "Plan",
    "MASKED",
    "WIPE_OUT",
    "check_plan",
    "lower_bound",
    "consecutive",
    "sidon",
    "block",
    "random_latin",
    "generate",
    "plan_reorder",
    "ReorderController",
    "stack_number_trajectory",
    "stack_number_trajectories",
    "read_fault_trace",
    "replay_trace",
    "SpareError",
    "ParameterError",
    "LayoutError",
    "LayoutFileError",
    "FailureSetError",
    "TraceError",
    "OutputExistsError",
    "OutputWriteError",
    "SolverError",
]

"""Reorder planning: who computes which (shard type, micro-batch) after failures.

* :mod:`.plan` - :class:`Plan`, :func:`check_plan`, the Hall bound :func:`lower_bound`;
* :mod:`.failure_sets` - reading and checking failure sets;
* :mod:`.exact` - :func:`plan_reorder`, the exact planner (max flow + min-cost flow), the
  reference;
* :mod:`.controller` - :class:`ReorderController`, the online controller (numba kernels
  in ``_kernels`` and ``_split_kernels``), which agrees with the exact planner.
"""

from .plan import (
    Plan,
    MASKED,
    WIPE_OUT,
    MAX_MICRO_BATCHES,
    MAX_SPLIT_ENTRIES,
    check_plan,
    is_valid_plan,
    lower_bound,
    check_micro_batches,
)
from .failure_sets import normalise_groups, parse_group_ids, read_failure_set
from .exact import plan_reorder, least_stack_number, least_load, stack_number_certificate
from .controller import (
    ReorderController,
    stack_number_trajectory,
    stack_number_trajectories,
    load_trajectory,
    load_trajectories,
)

__all__ = [
    "Plan",
    "MASKED",
    "WIPE_OUT",
    "MAX_MICRO_BATCHES",
    "MAX_SPLIT_ENTRIES",
    "check_plan",
    "is_valid_plan",
    "lower_bound",
    "check_micro_batches",
    "normalise_groups",
    "parse_group_ids",
    "read_failure_set",
    "plan_reorder",
    "least_stack_number",
    "least_load",
    "stack_number_certificate",
    "ReorderController",
    "stack_number_trajectory",
    "stack_number_trajectories",
    "load_trajectory",
    "load_trajectories",
]

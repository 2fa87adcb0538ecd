"""Reorder planning: who computes which (shard type, micro-batch) after failures.

* :mod:`.plan` - :class:`Plan`, :func:`check_plan`, the Hall bound :func:`lower_bound`;
* :mod:`.failure_sets` - reading and checking failure sets;
* :mod:`.exact` - :func:`plan_reorder`, the exact planner (max flow + min-cost flow), the
  reference;
* :mod:`.controller` - :class:`ReorderController`, the online controller (numba kernels
  in ``_kernels`` and ``_split_kernels``), which agrees with the exact planner;
* :mod:`.agreement` - :func:`agreed_plan`, the plan every process of a job agrees on;
* :mod:`.samples` - :func:`sample_indices`, from a plan to the samples of a batch;
* :mod:`.precompile` - :func:`warm_up`, the controller's kernels compiled before a job.
"""

from .plan import (
    Plan,
    GroupWork,
    PLAN_BYTES_MAGIC,
    MASKED,
    WIPE_OUT,
    MAX_MICRO_BATCHES,
    MAX_SPLIT_ENTRIES,
    check_plan,
    is_valid_plan,
    lower_bound,
    check_micro_batches,
)
from .failure_sets import check_failed_set, normalise_groups, parse_group_ids, read_failure_set
from .exact import plan_reorder, least_stack_number, least_load, stack_number_certificate
from .controller import (
    ReorderController,
    stack_number_trajectory,
    stack_number_trajectories,
    load_trajectory,
    load_trajectories,
)
from .redistribution import RedistributionController
from .agreement import AGREED_METHODS, agreed_plan, patch_work
from .samples import micro_batch_size, sample_indices, sample_indices_by_group
from .precompile import warm_up

__all__ = [
    "Plan",
    "GroupWork",
    "PLAN_BYTES_MAGIC",
    "MASKED",
    "WIPE_OUT",
    "MAX_MICRO_BATCHES",
    "MAX_SPLIT_ENTRIES",
    "check_plan",
    "is_valid_plan",
    "lower_bound",
    "check_micro_batches",
    "normalise_groups",
    "check_failed_set",
    "parse_group_ids",
    "read_failure_set",
    "plan_reorder",
    "least_stack_number",
    "least_load",
    "stack_number_certificate",
    "ReorderController",
    "RedistributionController",
    "stack_number_trajectory",
    "stack_number_trajectories",
    "load_trajectory",
    "load_trajectories",
    "AGREED_METHODS",
    "agreed_plan",
    "patch_work",
    "micro_batch_size",
    "sample_indices",
    "sample_indices_by_group",
    "warm_up",
]

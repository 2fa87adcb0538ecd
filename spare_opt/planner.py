"""Exact reorder planner. (STUB: owned by the planner helper.)"""

__all__ = ["plan_reorder"]


def plan_reorder(layout, failed, order=None, stack_number=1, mid_step=()):
    raise NotImplementedError

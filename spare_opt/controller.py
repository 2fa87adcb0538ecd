"""Online reorder controller. (STUB: owned by the controller helper.)"""

__all__ = ["ReorderController", "stack_number_trajectory"]


class ReorderController:
    def __init__(self, layout):
        raise NotImplementedError


def stack_number_trajectory(layout, failure_order):
    raise NotImplementedError

"""Fault-trace readers. (STUB: owned by the replay helper.)"""

__all__ = ["read_fault_trace"]


def read_fault_trace(path):
    raise NotImplementedError

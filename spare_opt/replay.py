"""Trace replay. (STUB: owned by the replay helper.)"""

__all__ = ["replay_trace"]


def replay_trace(layout, trace, exact=False):
    raise NotImplementedError

"""``examples/launch/train.py`` with one group whose loss function hangs forever, for ``tests/test_death_notices.py``.

The group named by ``SPARE_TEST_HANG`` (``g:s``), in its first start, never returns from
its loss function at step ``s`` (it waits on an event that nobody sets, its heartbeat
beating on); every group builds its ``SpareGroup`` with
``hang_timeout=SPARE_TEST_HANG_TIMEOUT`` seconds.
"""

import importlib.util
import os
import sys
import threading
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "launch_train", Path(__file__).resolve().parent.parent / "examples" / "launch" / "train.py")
train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(train)


def _hangs(group):
    """The step at which ``group``'s loss function hangs in this start, or ``None``."""
    wanted = os.environ.get("SPARE_TEST_HANG", "")
    if ":" not in wanted or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return None
    g, step = wanted.split(":")
    return int(step) if int(g) == group else None


class HangingGroup(train.SpareGroup):
    """A :class:`SpareGroup` with ``hang_timeout`` from the environment."""

    def __init__(self, layout, group, store, **kwargs):
        super().__init__(layout, group, store, hang_timeout=float(os.environ["SPARE_TEST_HANG_TIMEOUT"]), **kwargs)
        train.HANG_AT = _hangs(group)


def _hanging(loss):
    def loss_fn(model, batch, step):
        if train.HANG_AT is not None and step.step == train.HANG_AT:
            threading.Event().wait()  # forever: only the hang watch ends this process
        return loss(model, batch)
    return loss_fn


train.HANG_AT = None
train.SpareGroup = HangingGroup
train.loss_fn = _hanging(train.loss_fn)
train.lm_loss_fn = _hanging(train.lm_loss_fn)

if __name__ == "__main__":
    train.run_worker(train.train, train.parse(sys.argv[1:]))

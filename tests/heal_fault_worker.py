"""``examples/launch/train.py`` with one fault placed for ``tests/test_launchers.py``: a member held in the heal.

The group named by ``SPARE_TEST_HOLD_HEAL``, in its first start, stops once the process
group of an epoch that admits a repaired group is built, just before the state is sent
to it (the heal), writes ``held/{g}`` (its pid) to the store and sleeps (at most 60 s);
the test SIGKILLs it there, while the other members are sending the state.
"""

import importlib.util
import os
import sys
import time
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "launch_train", Path(__file__).resolve().parent.parent / "examples" / "launch" / "train.py")
train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(train)


class HeldInTheHeal(train.SpareGroup):
    """A :class:`SpareGroup` whose group ``SPARE_TEST_HOLD_HEAL`` holds at the first heal it takes part in."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.group == int(os.environ["SPARE_TEST_HOLD_HEAL"]) and not self.joined_late:
            self.on_event = self._hold

    def _hold(self, name, extra):
        if name == "rebuild" and self.joiners and self.group not in self.joiners:
            self.store.set(f"held/{self.group}", str(os.getpid()))
            time.sleep(60.0)


train.SpareGroup = HeldInTheHeal

if __name__ == "__main__":
    train.run_worker(train.train, train.parse(sys.argv[1:]))

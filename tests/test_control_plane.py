"""The control-plane benchmark at a small N, as a test of correctness: every survivor agrees on the same failed set.

Real store clients (one TCPStore server process), emulated DP groups as threads of
host processes, a real SIGKILL of the victim's process; no timing is asserted.
"""

import importlib
import math
import sys

import pytest

from conftest import REPO

pytest.importorskip("torch")


def _bench():
    # Imported by name (the host processes are spawned and unpickle its functions by module name).
    if str(REPO / "benchmarks") not in sys.path:
        sys.path.insert(0, str(REPO / "benchmarks"))
    return importlib.import_module("bench_control_plane")


@pytest.mark.slow
@pytest.mark.parametrize("notices, watch", [(True, 8), (False, 2)], ids=["death-notice", "stale-heartbeat-watch-2"])
def test_every_survivor_agrees_on_the_killed_group(notices, watch):
    """N = 12: with a death notice, and without one (only 2 of the 11 survivors read the victim's heartbeat)."""
    row = _bench().measure(12, notices=notices, interval=0.05, timeout=1.0, hosts=1, watch=watch, quiet=0.5,
                           seed=3)
    assert row["survivors"] == 11 and not row["errors"], row
    assert row["agreed"] and row["failed_sets"] == [f"[{row['victim']}]"], row
    assert row["agree_ms"]["missing"] == 0 and math.isfinite(row["agree_ms"]["max"]), row
    expected = "death notice" if notices else "stale heartbeat"
    assert any(source.startswith(expected) for source in row["detect_sources"]), row

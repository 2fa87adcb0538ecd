"""Shared pytest configuration: hypothesis profile and the real fault trace (packaged)."""

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

REPO = Path(__file__).resolve().parent.parent

# The example training jobs that the torch tests run (examples/training_job.py,
# examples/torchft_job.py) are not part of the package: import them from examples/.  The
# ranks that the Supervisor starts get this sys.path too (spawn and forkserver pass it on).
if str(REPO / "examples") not in sys.path:
    sys.path.append(str(REPO / "examples"))


@pytest.fixture
def real_trace_path():
    """Path of the real InfiniteHBD fault trace: the copy shipped as package data (always there)."""
    from spare_opt.demo import packaged_trace_path

    path = packaged_trace_path()
    assert path.is_file(), f"the packaged real trace is missing: {path}"
    return path


@pytest.fixture
def no_spare_trace(monkeypatch):
    """$SPARE_TRACE unset, so that the demo falls back to the packaged trace."""
    monkeypatch.delenv("SPARE_TRACE", raising=False)


@pytest.fixture(autouse=True)
def _stop_presence_beat():
    """join_job in the test process starts a presence beat for the process's life: stop it with its test, before the
    test's store goes away (else it logs torch's failed-write warning)."""
    yield
    launchers = sys.modules.get("spare_opt.torch.launchers")
    if launchers is not None and getattr(launchers, "_presence", None) is not None:
        launchers._presence.stop.set()
        launchers._presence.join(5)

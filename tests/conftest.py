"""Shared pytest configuration: hypothesis profile and the real fault-trace location."""

import os
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


def _trace_path():
    env = os.environ.get("SPARE_TRACE")
    if env:
        return Path(env)
    return REPO.parent / "shared" / "data" / "infinitehbd-trace" / "fault_trace.json"


@pytest.fixture
def real_trace_path():
    """Path of the real InfiniteHBD fault trace; the test is skipped when it is absent."""
    path = _trace_path()
    if not path.is_file():
        pytest.skip(f"real fault trace not found at {path} (set SPARE_TRACE to its path)")
    return path

"""Shared pytest configuration: hypothesis profile and the real fault trace (packaged)."""

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

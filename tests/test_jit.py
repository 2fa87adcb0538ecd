"""The kernel decorator falls back to in-memory compilation when numba cannot cache."""

import numba
import pytest

from spare_opt._core import jit as _jit


def _add_one(x):
    return x + 1


def test_kernel_is_cached_when_a_cache_location_exists():
    compiled = _jit.kernel(_add_one)
    assert compiled(1) == 2
    assert compiled._cache.__class__.__name__ == "FunctionCache"


def test_kernel_falls_back_without_a_cache_location(monkeypatch):
    real_njit = numba.njit

    def njit_without_locator(**options):
        if options.get("cache"):
            raise RuntimeError("cannot cache function '_add_one': no locator available for file 'x.py'")
        return real_njit(**options)

    monkeypatch.setattr(_jit, "njit", njit_without_locator)
    compiled = _jit.kernel(_add_one)
    assert compiled(41) == 42
    assert compiled._cache.__class__.__name__ == "NullCache"


def test_kernel_does_not_hide_other_numba_errors(monkeypatch):
    def broken_njit(**options):
        raise RuntimeError("something else went wrong")

    monkeypatch.setattr(_jit, "njit", broken_njit)
    with pytest.raises(RuntimeError, match="something else"):
        _jit.kernel(_add_one)(1)  # numba is only asked on first use

"""Deprecated home of the analysis tools; import them from :mod:`spare_opt` instead.

The worst-case guarantees moved to :mod:`spare_opt.worst_case`, the Monte-Carlo and the
sweep to :mod:`spare_opt.montecarlo`, the certificate to :mod:`spare_opt.planner`.
This module keeps the old names importable for one release, with a
``DeprecationWarning``.
"""

import warnings

_MOVED = {
    "stack_number_certificate": ("spare_opt.planner", "stack_number_certificate"),
    "min_wipeout_set": ("spare_opt.worst_case", "min_wipe_out_set"),
    "worst_case_after_one_failure": ("spare_opt.worst_case", "worst_case_after_one_failure"),
    "WorstCase": ("spare_opt.worst_case", "WorstCase"),
    "worst_case_stack_number": ("spare_opt.worst_case", "worst_case_stack_number"),
    "worst_case_profile": ("spare_opt.worst_case", "worst_case_profile"),
    "EXACT_WORST_CASE_MAX_GROUPS": ("spare_opt.worst_case", "EXACT_WORST_CASE_MAX_GROUPS"),
    "MonteCarloResult": ("spare_opt.montecarlo", "MonteCarloResult"),
    "monte_carlo": ("spare_opt.montecarlo", "monte_carlo"),
    "MAX_TRIALS": ("spare_opt.montecarlo", "MAX_TRIALS"),
    "SweepResult": ("spare_opt.montecarlo", "SweepResult"),
    "sweep": ("spare_opt.montecarlo", "sweep"),
}

__all__ = []


def __getattr__(name):
    if name not in _MOVED:
        raise AttributeError(f"module 'spare_opt.analysis' has no attribute {name!r}")
    module, new_name = _MOVED[name]
    warnings.warn(f"spare_opt.analysis.{name} is deprecated; use {module}.{new_name}", DeprecationWarning,
                  stacklevel=2)
    import importlib

    return getattr(importlib.import_module(module), new_name)

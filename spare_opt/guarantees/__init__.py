"""Coverage guarantees, checked offline.

* :mod:`.theory` - the paper's closed forms (endurance, overhead, checkpoint period);
* :mod:`.worst_case` - worst-case tolerance and stack numbers;
* :mod:`.montecarlo` - :func:`monte_carlo`, :func:`domain_monte_carlo` and :func:`sweep`;
* :mod:`.domains` - :func:`domain_report` and :func:`derived_topology` for failure domains.
"""

from .worst_case import (
    EXACT_WORST_CASE_MAX_GROUPS,
    WORST_CASE_METHODS,
    WorstCase,
    min_wipe_out_set,
    worst_case_after_one_failure,
    worst_case_load_after_one_failure,
    worst_case_stack_number,
    worst_case_profile,
)
from .montecarlo import (
    MAX_TRIALS,
    DomainMonteCarloResult,
    MonteCarloResult,
    SweepResult,
    domain_monte_carlo,
    monte_carlo,
    sweep,
)
from .domains import DOMAIN_REPORT_MAX_PAIRS, DomainReport, derived_topology, domain_report, domain_comparison
from . import theory

__all__ = [
    "theory",
    "EXACT_WORST_CASE_MAX_GROUPS",
    "WORST_CASE_METHODS",
    "WorstCase",
    "min_wipe_out_set",
    "worst_case_after_one_failure",
    "worst_case_load_after_one_failure",
    "worst_case_stack_number",
    "worst_case_profile",
    "MAX_TRIALS",
    "DomainMonteCarloResult",
    "MonteCarloResult",
    "SweepResult",
    "domain_monte_carlo",
    "monte_carlo",
    "sweep",
    "DOMAIN_REPORT_MAX_PAIRS",
    "DomainReport",
    "derived_topology",
    "domain_report",
    "domain_comparison",
]

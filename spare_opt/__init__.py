"""spare-opt: fault-tolerance planning for data-parallel LLM pretraining (SPARe).

Every public name is importable from here; the modules, one per concept:

* :mod:`spare_opt.layouts.layout` - :class:`Layout`, a stack layout;
  :mod:`spare_opt.layouts.generators` - :func:`sidon`, :func:`consecutive`, :func:`block`,
  :func:`random_latin`, :func:`generate`;
* :mod:`spare_opt.planning.plan` - :class:`Plan`, :func:`check_plan`;
  :mod:`spare_opt.planning.failure_sets` - reading and checking failure sets;
* :mod:`spare_opt.planning.exact` - :func:`plan_reorder`, the exact reorder planner (the
  reference), and :func:`stack_number_certificate`;
* :mod:`spare_opt.planning.controller` - :class:`ReorderController`, the online controller;
  :mod:`spare_opt.planning.agreement` - :func:`agreed_plan`, plans every process agrees on;
  :mod:`spare_opt.planning.samples` - :func:`sample_indices`, from a plan to data;
  :mod:`spare_opt.planning.precompile` - :func:`warm_up`, the kernels compiled before a job;
* :mod:`spare_opt.theory` - closed forms; :mod:`spare_opt.guarantees.worst_case` - guarantees;
  :mod:`spare_opt.guarantees.montecarlo` - :func:`monte_carlo` and :func:`sweep`;
* :mod:`spare_opt.simulation.parameters` - simulation parameters and presets (the paper's
  numbers); :mod:`spare_opt.simulation.events` - failure and rejoin events under the ``paper``
  and ``repair`` semantics; :mod:`spare_opt.simulation.time_to_train` - :func:`simulate`; :mod:`spare_opt.simulation.tuning` -
  :func:`tune`;
* :mod:`spare_opt.traces.trace` - fault traces; :mod:`spare_opt.traces.fit` - :func:`fit_trace` and the
  :class:`FailureModel` it fits; :mod:`spare_opt.simulation.replay` - :func:`replay_trace`;
  :mod:`spare_opt.simulation.verdict` - :func:`compare`, the operator's verdict (checkpointing,
  replication and SPARe on the same failures); :mod:`spare_opt.demo` - the demo;
* :mod:`spare_opt.layouts.topology` - :class:`Topology`, failure domains;
  :mod:`spare_opt.layouts.domain_safe` - :func:`domain_safe` layouts;
  :mod:`spare_opt.guarantees.domains` - :func:`domain_report` and :func:`derived_topology`;
  :mod:`spare_opt.traces.placement` - :class:`Placement` of trace nodes.

Conventions (``docs/api.md``): core inputs positional, options keyword-only; wrong types
raise :class:`ParameterTypeError`, bad values :class:`ParameterError` (both
:class:`SpareError`); ``workers`` as in scipy (``-1`` = every CPU); ``executor=`` any
``concurrent.futures.Executor``; ``progress(done, total)``; every result has
``to_dict()``.

Reference: Lee et al., "SPARe: Stacked Parallelism with Adaptive Reordering for
Fault-Tolerant LLM Pretraining Systems with 100k+ GPUs", ICML 2026, arXiv:2603.00357.
"""

# Each stage's ``__init__.py`` owns its list of public names; this file only composes
# them, in the order of the stages, so that a name is listed once.  The star imports
# take exactly each ``__all__``.  ``spare_opt.simulation`` also re-exports the paper's
# constants, hence the de-duplication.
from ._core import errors as _errors, paper as _paper
from ._core.errors import *  # noqa: F401,F403
from ._core.paper import *  # noqa: F401,F403
from . import layouts as _layouts
from .layouts import *  # noqa: F401,F403
from . import planning as _planning
from .planning import *  # noqa: F401,F403
from . import traces as _traces
from .traces import *  # noqa: F401,F403
from . import guarantees as _guarantees
from .guarantees import *  # noqa: F401,F403
from . import simulation as _simulation
from .simulation import *  # noqa: F401,F403
from . import demo as _demo
from .demo import *  # noqa: F401,F403

__version__ = "0.8.0"

__all__ = list(dict.fromkeys(
    name
    for part in (_errors, _paper, _layouts, _planning, _traces, _guarantees, _simulation, _demo)
    for name in part.__all__
))

del _errors, _paper, _layouts, _planning, _traces, _guarantees, _simulation, _demo

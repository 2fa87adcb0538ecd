"""Stack layouts: which ``r`` shard types each DP group holds.

* :mod:`.layout` - :class:`Layout`, the layout model and its files;
* :mod:`.generators` - :func:`sidon` (known constructions, exhaustive search, CP-SAT), :func:`consecutive`,
  :func:`block`, :func:`random_latin`, :func:`generate`;
* :mod:`.topology` - :class:`Topology`, failure domains (racks, switches, power feeds);
* :mod:`.domain_safe` - :func:`domain_safe` layouts, in which one domain failure removes
  at most one holder of each shard type.
"""

from .layout import (Layout, LAYOUT_FORMAT, LAYOUT_VERSION, check_size, check_layout, layout_file_size,
                     recommended_micro_batches)
from .generators import consecutive, sidon, block, random_latin, generate, METHODS, DEFAULT_TIME_LIMIT
from .topology import Topology, TOPOLOGY_FORMAT, TOPOLOGY_VERSION, check_topology
from .domain_layouts import (
    DOMAIN_METHODS,
    DOMAIN_STATUSES,
    conflict_graph,
    domain_multiplicity,
    domain_safe,
    is_domain_safe,
)

__all__ = [
    "Layout",
    "LAYOUT_FORMAT",
    "LAYOUT_VERSION",
    "check_size",
    "check_layout",
    "recommended_micro_batches",
    "layout_file_size",
    "consecutive",
    "sidon",
    "block",
    "random_latin",
    "generate",
    "METHODS",
    "DEFAULT_TIME_LIMIT",
    "Topology",
    "TOPOLOGY_FORMAT",
    "TOPOLOGY_VERSION",
    "check_topology",
    "DOMAIN_METHODS",
    "DOMAIN_STATUSES",
    "conflict_graph",
    "domain_multiplicity",
    "domain_safe",
    "is_domain_safe",
]

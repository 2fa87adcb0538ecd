"""Where the nodes of a fault trace sit: the DP group, or the failure domain, of every node.

A fault trace names nodes (servers); replay and trace-driven simulation need the DP
groups each node's failure takes.  Without a placement, node ``i`` (order of first
fault) is group ``i`` (the paper's replay) or a random group (a seed).  A
:class:`Placement` says it explicitly, as JSON (``docs/formats.md``)::

    {"format": "spare-placement", "version": 1, "groups": 600,
     "nodes": {"node-a": 17, "node-b": [17, 18], "node-c": {"rack": "rack-3"}},
     "topology": {...}}

* an integer: the node belongs to that group; its failure fails the group (several
  nodes may belong to one group: a DP group spans several servers);
* a list of integers: the node hosts part of each of these groups; its failure fails
  every one of them;
* ``{"<level>": "<label>"}``: the node is that whole domain of the topology (a switch,
  a power feed, a server hosting several small groups); its failure fails every group
  of the domain.  To place a node *inside* a rack on one group, give the group.

Nodes not listed are not placed: their events are skipped and counted.  ``groups``
(optional) must equal the layout's ``N``; ``topology`` (optional) is an embedded
``spare-topology`` document used for domain entries when no other topology is given.
"""

import json

import numpy as np

from .._core.io import as_path, read_json_file, write_document
from .._core.errors import PlacementError, TopologyError
from ..layouts.topology import Topology, check_topology

__all__ = ["Placement", "PLACEMENT_FORMAT", "PLACEMENT_VERSION"]

PLACEMENT_FORMAT = "spare-placement"
PLACEMENT_VERSION = 1


def _is_group(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class Placement:
    """Trace nodes to DP groups or failure domains.

    Parameters
    ----------
    nodes : dict of str to entry
        Node id -> a group id (int), a list of group ids, or ``{level: label}`` (a
        whole domain of ``topology``).
    groups : int, optional
        ``N``; when given, :meth:`resolve` refuses another ``N``.
    topology : Topology, optional
        Resolves the domain entries.
    source : str
        How the placement is named in messages (a file path).

    Raises
    ------
    PlacementError
        ``nodes`` is not a dict of string ids, an entry is none of the three forms, a
        group id is negative (or ``>= groups``), a domain entry names a level or
        label that ``topology`` does not have.
    ParameterTypeError
        ``topology`` is not a Topology.

    Examples
    --------
    >>> from spare_opt import Placement, Topology
    >>> racks = Topology.blocks(8, {"rack": 4})
    >>> placement = Placement({"a": 5, "b": [0, 1], "c": {"rack": "rack-1"}}, topology=racks)
    >>> indptr, groups = placement.resolve(["a", "b", "c", "d"], 8)
    >>> [groups[indptr[i]:indptr[i + 1]].tolist() for i in range(4)]
    [[5], [0, 1], [4, 5, 6, 7], []]
    """

    def __init__(self, nodes, *, groups=None, topology=None, source="placement"):
        if not isinstance(nodes, dict):
            raise PlacementError(f"{source}: 'nodes' must be an object mapping node ids to groups or domains, "
                                 f"got {type(nodes).__name__}")
        if groups is not None and (not _is_group(groups) or groups < 1):
            raise PlacementError(f"{source}: 'groups' must be a positive integer, got {groups!r}")
        if topology is not None:
            check_topology(topology)
        self.groups = None if groups is None else int(groups)
        self.topology = topology
        self.source = source
        self._entries = {}
        for node, entry in nodes.items():
            if not isinstance(node, str) or not node:
                raise PlacementError(f"{source}: node ids must be non-empty strings, got {node!r}")
            self._entries[node] = self._check_entry(node, entry)
        if topology is not None:
            self._check_domains(topology)

    def _check_entry(self, node, entry):
        prefix = f"{self.source}: node {node!r}"
        if _is_group(entry):
            entry = [entry]
        if isinstance(entry, list):
            if not entry or not all(_is_group(g) for g in entry):
                raise PlacementError(f"{prefix}: expected a group id, a non-empty list of group ids or "
                                     f"{{level: label}}, got {entry!r}")
            for g in entry:
                if g < 0 or (self.groups is not None and g >= self.groups):
                    limit = "" if self.groups is None else f" < N = {self.groups}"
                    raise PlacementError(f"{prefix}: group {g} is out of range (ids are >= 0{limit})")
            return tuple(sorted(set(int(g) for g in entry)))
        if isinstance(entry, dict):
            if len(entry) != 1:
                raise PlacementError(f"{prefix}: a domain entry names exactly one level and label, got {entry!r}")
            (level, label), = entry.items()
            if not isinstance(label, (str, int)) or isinstance(label, bool):
                raise PlacementError(f"{prefix}: domain label must be a string or an integer, got {label!r}")
            return (level, label)
        raise PlacementError(f"{prefix}: expected a group id, a list of group ids or {{level: label}}, got {entry!r}")

    def _check_domains(self, topology):
        for node, entry in self._entries.items():
            if entry and isinstance(entry[0], str):
                level, label = entry
                if level not in topology.levels:
                    raise PlacementError(f"{self.source}: node {node!r} is placed on level {level!r}, which the "
                                         f"topology does not have (levels: {', '.join(topology.levels)})")
                if label not in topology.domains(level):
                    raise PlacementError(f"{self.source}: node {node!r} is placed on domain {label!r} of level "
                                         f"{level!r}, which the topology does not have")

    @property
    def nodes(self):
        """tuple of str: the node ids, in file order."""
        return tuple(self._entries)

    @property
    def needs_topology(self):
        """bool: some node is placed on a domain."""
        return any(entry and isinstance(entry[0], str) for entry in self._entries.values())

    def with_topology(self, topology):
        """A copy of this placement whose domain entries are resolved with ``topology``.

        Raises
        ------
        ParameterTypeError
            ``topology`` is not a Topology.
        PlacementError
            A domain entry names a level or label the topology does not have.
        """
        return Placement(self.to_dict()["nodes"], groups=self.groups, topology=topology, source=self.source)

    def prepared(self, *, topology=None, layout=None):
        """This placement with the topology its domain entries need.

        ``topology`` when given; else the placement's own (embedded in its file);
        else, when some node is placed on a domain, the topology ``layout`` records
        (:meth:`~spare_opt.Topology.from_layout`).

        Raises
        ------
        ParameterTypeError
            ``topology`` is not a Topology or ``layout`` not a Layout.
        PlacementError, TopologyError
            A domain entry the topology lacks; a malformed recorded topology.
        """
        if topology is not None:
            return self.with_topology(topology)
        if self.topology is None and self.needs_topology and layout is not None:
            recorded = Topology.from_layout(layout)
            if recorded is not None:
                return self.with_topology(recorded)
        return self

    def __repr__(self):
        return f"Placement(nodes={len(self._entries)}, groups={self.groups}, topology={self.topology is not None})"

    def __eq__(self, other):
        if not isinstance(other, Placement):
            return NotImplemented
        return self._entries == other._entries and self.groups == other.groups and self.topology == other.topology

    __hash__ = None

    # ------------------------------------------------------------------ resolve
    def resolve(self, node_ids, groups):
        """The groups of each node, in CSR form.

        Parameters
        ----------
        node_ids : sequence of str
            The nodes, e.g. :attr:`spare_opt.FaultTrace.node_ids`.
        groups : int
            ``N``, the layout's number of groups.

        Returns
        -------
        indptr : numpy.ndarray of int64, shape (len(node_ids) + 1,)
        group_ids : numpy.ndarray of int32
            The groups of node ``i`` are ``group_ids[indptr[i]:indptr[i + 1]]``,
            sorted; empty for a node the placement does not list.

        Raises
        ------
        PlacementError
            ``groups`` differs from the placement's ``N``, a group id is ``>= N``, a
            node is placed on a domain and there is no topology, or the topology's
            ``N`` differs.
        """
        if self.groups is not None and groups != self.groups:
            raise PlacementError(f"{self.source}: the placement is for N = {self.groups} groups, not N = {groups}")
        if self.topology is not None and self.topology.groups != groups:
            raise PlacementError(f"{self.source}: its topology has N = {self.topology.groups} groups, not N = {groups}")
        counts = np.zeros(len(node_ids) + 1, dtype=np.int64)
        parts = []
        for i, node in enumerate(node_ids):
            entry = self._entries.get(node)
            if entry is None:
                continue
            if isinstance(entry[0], str):
                if self.topology is None:
                    raise PlacementError(
                        f"{self.source}: node {node!r} is placed on domain {entry[1]!r} of level {entry[0]!r} but no "
                        "topology is given (embed one in the placement file, or give the topology)")
                members = self.topology.domains(entry[0])[entry[1]]
            else:
                members = np.asarray(entry, dtype=np.int32)
                if members.size and members[-1] >= groups:
                    raise PlacementError(f"{self.source}: node {node!r} is placed on group {int(members[-1])}, "
                                         f"outside [0, N = {groups})")
            counts[i + 1] = members.size
            parts.append(members.astype(np.int32))
        indptr = np.cumsum(counts)
        group_ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        return indptr, group_ids

    # ---------------------------------------------------------------------- I/O
    def to_dict(self):
        """The ``spare-placement`` document as a dict (the topology embedded when there is one)."""
        nodes = {}
        for node, entry in self._entries.items():
            if isinstance(entry[0], str):
                nodes[node] = {entry[0]: entry[1]}
            else:
                nodes[node] = entry[0] if len(entry) == 1 else list(entry)
        doc = {"format": PLACEMENT_FORMAT, "version": PLACEMENT_VERSION, "groups": self.groups, "nodes": nodes}
        if self.topology is not None:
            doc["topology"] = self.topology.to_dict()
        return doc

    @classmethod
    def from_dict(cls, doc, source="placement document"):
        """Build a placement from a parsed ``spare-placement`` document.

        Raises
        ------
        PlacementError
            Not an object, wrong format or version, no ``nodes``, bad entries, or a
            malformed embedded topology.
        """
        if not isinstance(doc, dict):
            raise PlacementError(f"{source}: expected a JSON object, got {type(doc).__name__}")
        if doc.get("format") != PLACEMENT_FORMAT:
            raise PlacementError(f"{source}: format is {doc.get('format')!r}, expected {PLACEMENT_FORMAT!r}")
        if type(doc.get("version")) is not int or doc["version"] != PLACEMENT_VERSION:
            raise PlacementError(f"{source}: version {doc.get('version')!r} is not supported "
                                 f"(expected {PLACEMENT_VERSION})")
        if "nodes" not in doc:
            raise PlacementError(f"{source}: missing key 'nodes'")
        topology = None
        if doc.get("topology") is not None:
            try:
                topology = Topology.from_dict(doc["topology"], source=f"{source}: embedded topology")
            except TopologyError as exc:
                raise PlacementError(str(exc)) from None
        return cls(doc["nodes"], groups=doc.get("groups"), topology=topology, source=source)

    @classmethod
    def load(cls, path):
        """Read a ``spare-placement`` JSON file.

        Raises
        ------
        PlacementError
            ``path`` is not a path, the file is missing, unreadable, not JSON or not
            a valid placement.
        """
        path = as_path(path, PlacementError, "placement file path")
        doc = read_json_file(path, PlacementError, "placement file")
        return cls.from_dict(doc, source=str(path))

    def save(self, path, *, force=False):
        """Write the placement atomically to ``path`` as JSON, one node per line.

        Raises
        ------
        OutputExistsError
            ``path`` exists and ``force`` is false.
        PlacementError
            ``path`` is not a path or cannot be written.
        """
        path = as_path(path, PlacementError, "placement file path")
        doc = self.to_dict()
        nodes = doc.pop("nodes")
        topology = doc.pop("topology", None)
        head = json.dumps(doc, indent=1)[:-2]
        body = ",\n  ".join(f"{json.dumps(node)}: {json.dumps(entry)}" for node, entry in nodes.items())
        text = f'{head},\n "nodes": {{\n  {body}\n }}'
        if topology is not None:
            text += f',\n "topology": {json.dumps(topology)}'
        return write_document(path, text + "\n}\n", force=force, error=PlacementError, what="placement file")

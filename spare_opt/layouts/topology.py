"""Failure domains of DP groups: racks, switches, power feeds, NVLink domains, pods.

A failure domain fails as a unit: every DP group with a node in it fails at the same
moment (``docs/domains.md``).  A :class:`Topology` lists, for each *level* named by the
user (``rack``, ``switch``, ``power``, ``nvl``, ``pod``...), the domain of every group at
that level: a label, a list of labels when the group spans several domains of the
level, or an empty list when it is in none.  Files are JSON::

    {"format": "spare-topology", "version": 1, "groups": N,
     "levels": {"rack": ["rack-0", "rack-0", ...], "power": [...]}}

written by :meth:`Topology.save` and ``spare-opt topology`` (``docs/formats.md``).
"""

import json

import numpy as np

from .._core import validation as check
from .._core.io import as_path, read_json_file, write_document
from .._core.errors import ParameterError, ParameterTypeError, TopologyError
from .generators import MAX_LAYOUT_ENTRIES
from .layout import check_layout

__all__ = ["Topology", "TOPOLOGY_FORMAT", "TOPOLOGY_VERSION", "check_topology"]

TOPOLOGY_FORMAT = "spare-topology"
TOPOLOGY_VERSION = 1

#: Most levels in one topology (a sanity bound: real hierarchies have a handful).
MAX_LEVELS = 64


def check_topology(value, name="topology"):
    """``value`` if it is a :class:`Topology`.

    Raises
    ------
    ParameterTypeError
        ``value`` is anything else (a path, a dict...): load or build a topology first.
    """
    return check.instance(name, value, Topology, " (spare_opt.Topology.load or Topology.blocks)")


def _is_label(value):
    """A domain label: a non-empty string or an integer (not a bool)."""
    if isinstance(value, str):
        return bool(value)
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _normalise_entry(entry, level, group, source):
    """One group's entry at one level as a tuple of labels (checked)."""
    prefix = f"{source}: level {level!r}, group {group}"
    if isinstance(entry, (list, tuple)):
        labels = tuple(entry)
        for label in labels:
            if not _is_label(label):
                raise TopologyError(f"{prefix}: a domain label must be a non-empty string or an integer, got {label!r}")
        if len(set(labels)) != len(labels):
            raise TopologyError(f"{prefix}: lists the domain {next(x for x in labels if labels.count(x) > 1)!r} twice")
        return tuple(int(x) if not isinstance(x, str) else x for x in labels)
    if not _is_label(entry):
        raise TopologyError(
            f"{prefix}: expected a domain label (non-empty string or integer) or a list of labels, got {entry!r}"
        )
    return (entry if isinstance(entry, str) else int(entry),)


class Topology:
    """Failure domains of ``N`` DP groups, at one or more named levels.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N``.
    levels : dict of str to sequence
        For each level (in the order given), one entry per group ``0 .. N-1``: the
        label of the group's domain at that level, a list of labels when the group
        spans several domains of the level, or an empty list when it is in none.
        Labels are non-empty strings or integers (not both in one level).

    Raises
    ------
    ParameterTypeError
        ``groups`` is not an integer.
    TopologyError
        ``levels`` is not a non-empty dict of named levels, a level does not list
        exactly ``N`` entries, an entry is not a label or a list of distinct labels,
        or a level mixes string and integer labels.  The message names the level
        and the group.

    Notes
    -----
    A group in a domain fails when the domain fails.  Domains of one level may be of
    any sizes and need not be contiguous group ids; a group may span several domains
    (a group whose nodes sit in two racks).  Domains are listed in order of first
    appearance.  Construction and checks take ``O(N * levels)`` time.

    Examples
    --------
    >>> from spare_opt import Topology
    >>> topology = Topology.blocks(8, {"rack": 4, "pod": 8})
    >>> topology
    Topology(groups=8, levels={'rack': 2, 'pod': 1})
    >>> {label: members.tolist() for label, members in topology.domains("rack").items()}
    {'rack-0': [0, 1, 2, 3], 'rack-1': [4, 5, 6, 7]}
    >>> Topology(2, {"rack": ["a"]})
    Traceback (most recent call last):
    ...
    spare_opt._core.errors.TopologyError: topology: level 'rack' lists 1 entries, expected one per group (N = 2)
    """

    def __init__(self, groups, levels, *, source="topology"):
        self._groups = check.integer("groups N", groups, minimum=1, error=TopologyError)
        if not isinstance(levels, dict):
            raise TopologyError(f"{source}: 'levels' must be an object mapping level names to lists, "
                                f"got {type(levels).__name__}")
        if not levels:
            raise TopologyError(f"{source}: 'levels' is empty; give at least one level (e.g. rack)")
        if len(levels) > MAX_LEVELS:
            raise TopologyError(f"{source}: {len(levels)} levels, more than the limit of {MAX_LEVELS}")
        self._levels = {}
        for name, entries in levels.items():
            if not isinstance(name, str) or not name.strip():
                raise TopologyError(f"{source}: a level name must be a non-empty string, got {name!r}")
            if isinstance(entries, (str, bytes, dict)) or not hasattr(entries, "__len__"):
                raise TopologyError(f"{source}: level {name!r} must be a list of one entry per group, "
                                    f"got {type(entries).__name__}")
            if len(entries) != self._groups:
                raise TopologyError(f"{source}: level {name!r} lists {len(entries)} entries, expected one per group "
                                    f"(N = {self._groups})")
            normalised = tuple(_normalise_entry(entry, name, g, source) for g, entry in enumerate(entries))
            kinds = {type(label) for labels in normalised for label in labels}
            if len(kinds) > 1:
                raise TopologyError(f"{source}: level {name!r} mixes string and integer labels; use one kind")
            self._levels[name] = normalised
        self._domains = {}

    # ----------------------------------------------------------------- shape
    @property
    def groups(self):
        """int: the number of DP groups ``N``."""
        return self._groups

    @property
    def levels(self):
        """tuple of str: the level names, in file order."""
        return tuple(self._levels)

    def entries(self, level):
        """tuple of tuple: the labels of every group at ``level`` (empty tuple: in no domain)."""
        return self._levels[self.check_level(level)]

    def check_level(self, level):
        """``level`` if the topology has it.

        Raises
        ------
        ParameterTypeError
            ``level`` is not a string.
        ParameterError
            The topology has no such level (the message lists the levels).
        """
        if not isinstance(level, str):
            raise ParameterTypeError(f"level must be a level name (str), got {type(level).__name__}")
        if level not in self._levels:
            raise ParameterError(f"the topology has no level {level!r}; its levels are "
                                 f"{', '.join(map(repr, self._levels))}")
        return level

    def select_levels(self, levels=None):
        """The levels named by ``levels`` as a tuple (each once), checked.

        Parameters
        ----------
        levels : str, sequence of str or None
            One level, several, or ``None`` for the first level of the topology (the
            finest one by convention: ``rack`` before ``pod``).

        Returns
        -------
        tuple of str

        Raises
        ------
        ParameterTypeError, ParameterError
            As :meth:`check_level`; an empty sequence.
        """
        if levels is None:
            return (self.levels[0],)
        if isinstance(levels, str):
            levels = [levels]
        return tuple(dict.fromkeys(self.check_level(level) for level in check.sequence("levels", levels)))

    def _index(self, level):
        """(labels, indptr, domain ids): the domains of a level and each group's domains, CSR."""
        level = self.check_level(level)
        if level not in self._domains:
            index = {}
            counts = np.zeros(self._groups + 1, dtype=np.int64)
            ids = []
            for g, labels in enumerate(self._levels[level]):
                counts[g + 1] = len(labels)
                for label in labels:
                    ids.append(index.setdefault(label, len(index)))
            indptr = np.cumsum(counts)
            domain_ids = np.asarray(ids, dtype=np.int32)
            indptr.setflags(write=False)
            domain_ids.setflags(write=False)
            self._domains[level] = (tuple(index), indptr, domain_ids)
        return self._domains[level]

    def labels(self, level):
        """tuple: the domain labels of ``level``, in order of first appearance."""
        return self._index(level)[0]

    def domain_count(self, level):
        """int: the number of domains at ``level``."""
        return len(self._index(level)[0])

    def membership(self, level):
        """The domains of every group at ``level``, in CSR form.

        Returns
        -------
        indptr : numpy.ndarray of int64, shape (N + 1,)
        domains : numpy.ndarray of int32
            The domains of group ``g`` are ``domains[indptr[g]:indptr[g + 1]]``,
            indices into :meth:`labels`.
        """
        _labels, indptr, domain_ids = self._index(level)
        return indptr, domain_ids

    def domains(self, level):
        """dict: label -> sorted int32 array of the groups in that domain, in order of first appearance."""
        labels, indptr, domain_ids = self._index(level)
        owners = np.repeat(np.arange(self._groups, dtype=np.int32), np.diff(indptr))
        order = np.argsort(domain_ids, kind="stable")
        bounds = np.searchsorted(domain_ids[order], np.arange(len(labels) + 1))
        members = owners[order]
        return {label: members[bounds[i]:bounds[i + 1]] for i, label in enumerate(labels)}

    def is_partition(self, level):
        """bool: every group is in exactly one domain of ``level``."""
        _labels, indptr, _ids = self._index(level)
        return bool(np.all(np.diff(indptr) == 1))

    def __repr__(self):
        shown = {level: self.domain_count(level) for level in self._levels}
        return f"Topology(groups={self._groups}, levels={shown})"

    def __eq__(self, other):
        if not isinstance(other, Topology):
            return NotImplemented
        return self._groups == other._groups and self._levels == other._levels

    __hash__ = None

    # ------------------------------------------------------------------ builders
    @classmethod
    def blocks(cls, groups, sizes, *, shuffle=False, seed=0):
        """Blocks of consecutive groups at each level, optionally placed at random.

        Parameters
        ----------
        groups : int
            ``N``.
        sizes : dict of str to int
            Level name -> groups per domain, ``1 <= size <= N``; the last domain of a
            level is smaller when the size does not divide ``N``.  Domain ``k`` of
            level ``L`` is labelled ``"L-k"``.
        shuffle : bool, default False
            Place the groups at random: position ``p`` of the blocks holds group
            ``perm[p]`` of a random permutation (the same one for every level, so
            nested levels stay nested).  Domains are then random sets of group ids.
        seed : int, default 0
            Seed of the permutation (``numpy.random.default_rng``), with ``shuffle``.

        Returns
        -------
        Topology

        Raises
        ------
        ParameterTypeError
            ``groups``, a size or ``seed`` is not an integer, ``sizes`` is not a dict,
            ``shuffle`` is not a bool.
        ParameterError
            A size outside ``[1, N]``, ``N`` above ``2^27`` (no layout holds more groups),
            a negative seed, no level.
        """
        # No layout holds more groups (N r <= MAX_LAYOUT_ENTRIES), and N int64 positions per level would
        # exhaust the memory long before N = 2^31.
        groups = check.integer("groups N", groups, minimum=1, maximum=MAX_LAYOUT_ENTRIES)
        shuffle = check.flag("shuffle", shuffle)
        seed = check.seed(seed)
        check.instance("sizes", sizes, dict, " of level name -> groups per domain")
        if not sizes:
            raise ParameterError("sizes is empty; give at least one level, e.g. {'rack': 8}")
        position = np.arange(groups, dtype=np.int64)
        if shuffle:
            # Group perm[p] sits at position p: position[perm[p]] = p.
            perm = np.random.default_rng(seed).permutation(groups)
            position = np.empty(groups, dtype=np.int64)
            position[perm] = np.arange(groups)
        levels = {}
        for name, size in sizes.items():
            size = check.integer(f"size of level {name!r}", size, minimum=1, maximum=groups)
            block = position // size
            levels[name] = [f"{name}-{k}" for k in block.tolist()]
        return cls(groups, levels)

    # ----------------------------------------------------------------------- I/O
    def to_dict(self):
        """The ``spare-topology`` document (``docs/formats.md``) as a dict.

        A group in one domain is written as its label, in none as ``[]``, in several
        as the list of labels.
        """
        levels = {}
        for name, entries in self._levels.items():
            levels[name] = [labels[0] if len(labels) == 1 else list(labels) for labels in entries]
        return {"format": TOPOLOGY_FORMAT, "version": TOPOLOGY_VERSION, "groups": self._groups, "levels": levels}

    @classmethod
    def from_dict(cls, doc, source="topology document"):
        """Build a topology from a parsed ``spare-topology`` document.

        Raises
        ------
        TopologyError
            Not an object, wrong format or version, ``groups`` not a positive
            integer, or bad ``levels`` (see :class:`Topology`).
        """
        if not isinstance(doc, dict):
            raise TopologyError(f"{source}: expected a JSON object, got {type(doc).__name__}")
        if doc.get("format") != TOPOLOGY_FORMAT:
            raise TopologyError(f"{source}: format is {doc.get('format')!r}, expected {TOPOLOGY_FORMAT!r}")
        if type(doc.get("version")) is not int or doc["version"] != TOPOLOGY_VERSION:
            raise TopologyError(f"{source}: version {doc.get('version')!r} is not supported "
                                f"(expected {TOPOLOGY_VERSION})")
        for key in ("groups", "levels"):
            if key not in doc:
                raise TopologyError(f"{source}: missing key {key!r}")
        if type(doc["groups"]) is not int or doc["groups"] < 1:
            raise TopologyError(f"{source}: 'groups' must be a positive integer, got {doc['groups']!r}")
        return cls(doc["groups"], doc["levels"], source=source)

    @classmethod
    def load(cls, path):
        """Read a ``spare-topology`` JSON file.

        Raises
        ------
        TopologyError
            ``path`` is not a path, the file is missing, unreadable or not JSON, or
            the document is not a valid topology (the message names the file and
            the first problem).
        """
        path = as_path(path, TopologyError, "topology file path")
        doc = read_json_file(path, TopologyError, "topology file")
        return cls.from_dict(doc, source=str(path))

    def save(self, path, *, force=False):
        """Write the topology atomically to ``path`` as JSON, one level per line.

        Parameters
        ----------
        path : str or os.PathLike
        force : bool, default False
            Overwrite an existing file.

        Returns
        -------
        pathlib.Path

        Raises
        ------
        OutputExistsError
            ``path`` exists and ``force`` is false.
        TopologyError
            ``path`` is not a path, or the file cannot be written.
        """
        path = as_path(path, TopologyError, "topology file path")
        doc = self.to_dict()
        levels = doc.pop("levels")
        head = json.dumps(doc, indent=1)[:-2]
        body = ",\n  ".join(f"{json.dumps(name)}: {json.dumps(entries)}" for name, entries in levels.items())
        return write_document(path, f'{head},\n "levels": {{\n  {body}\n }}\n}}\n', force=force,
                              error=TopologyError, what="topology file")

    @classmethod
    def from_layout(cls, layout):
        """The topology a layout was made for (``layout.metadata["topology"]``), or ``None``.

        Raises
        ------
        ParameterTypeError
            ``layout`` is not a Layout.
        TopologyError
            The recorded topology is malformed.
        """
        doc = check_layout(layout).metadata.get("topology")
        if doc is None:
            return None
        return cls.from_dict(doc, source="the layout's recorded topology")

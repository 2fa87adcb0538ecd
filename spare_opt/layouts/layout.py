"""The stack layout: which shard types each DP group holds, in which order.

A layout of ``N`` DP groups with redundancy ``r`` is an integer matrix
``stacks[g, l]``: the shard type that group ``g`` holds at stack layer ``l`` (layer 0 is
the top).  The SPARe model (Lee et al., ICML 2026, Sec. 3; ``docs/model.md``) requires

* each row to hold ``r`` distinct shard types in ``[0, N)``;
* each layer (column) to be a permutation of ``0..N-1`` (a Latin rectangle), so that
  the top layer alone covers every shard type once in a fault-free step;
* hence every shard type to be held by exactly ``r`` groups.

Files are JSON (``format = "spare-layout"``, ``version = 1``) or, for large ``N``,
``.npz``; see ``docs/formats.md``.
"""

import json

import numpy as np

from .._core import validation as check
from .._core.io import (
    as_path,
    check_version,
    has_bool,
    json_default,
    optional_object,
    parse_json_text,
    read_json_file,
    reading,
    write_document,
)
from .._core.errors import LayoutError, LayoutFileError, ParameterError, RecommendationWarning

__all__ = ["Layout", "LAYOUT_FORMAT", "LAYOUT_VERSION", "check_size", "check_layout", "layout_file_size",
           "recommended_micro_batches"]

LAYOUT_FORMAT = "spare-layout"
LAYOUT_VERSION = 1

#: The largest recommended ``m`` a layout may carry: the planners' limit
#: (``spare_opt.MAX_MICRO_BATCHES``, a stage above this one; a test checks they agree).
_MAX_RECOMMENDED_M = 1024


def check_size(groups, redundancy, *, max_groups=check.MAX_GROUPS):
    """Check a cluster size ``N`` and redundancy ``r``; return them as Python ints.

    Parameters
    ----------
    groups : int
        Number of DP groups ``N``.
    redundancy : int
        Redundancy ``r``: shard types held by each group.
    max_groups : int or None, default ``2**31 - 1``
        Largest ``N``: group ids are 32-bit integers in every array of spare-opt.
        ``None`` for formulas that hold for any ``N`` (:mod:`spare_opt.theory`).

    Returns
    -------
    (int, int)
        ``(N, r)`` as Python ints.

    Raises
    ------
    ParameterTypeError
        ``N`` or ``r`` is not an integer.
    ParameterError
        ``N < 1``, ``N > max_groups``, ``r < 1`` or ``r > N``.
    """
    groups = check.integer("groups N", groups, minimum=1, maximum=max_groups)
    redundancy = check.integer("redundancy r", redundancy, minimum=1)
    if redundancy > groups:
        raise ParameterError("redundancy r must be <= N (a group holds r distinct shard types), got "
                             f"r={check.int_text(redundancy)} > N={check.int_text(groups)}")
    return groups, redundancy


def check_layout(value, name="layout"):
    """``value`` if it is a :class:`Layout`.

    Raises
    ------
    ParameterTypeError
        ``value`` is anything else (a path, an array...): load or generate a layout first.
    """
    return check.instance(name, value, Layout, " (spare_opt.Layout.load or a generator such as spare_opt.sidon)")


def _check_offsets(offsets, groups):
    """Circulant offsets as a tuple of ints in ``[0, N)``; raise LayoutError otherwise."""
    if isinstance(offsets, (str, bytes, dict)) or not hasattr(offsets, "__iter__"):
        raise LayoutError(f"offsets must be a sequence of integers or None, got {type(offsets).__name__}")
    values = []
    for value in offsets:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise LayoutError(f"offsets must be integers, got {value!r}")
        if not 0 <= value < groups:
            raise LayoutError(f"offset {check.int_text(value)} is outside [0, N = {groups})")
        values.append(int(value))
    return tuple(values)


def _check_recommended_m(value, error, source):
    """``metadata["micro_batches"]`` of a layout: an ``int`` in ``[1, 1024]``; ``error`` otherwise."""
    if type(value) is not int or not 1 <= value <= _MAX_RECOMMENDED_M:
        if type(value) is int:
            shown = check.int_text(value) if abs(value) < 10**40 else "a huge integer"
        elif isinstance(value, str):
            shown = repr(value[:40])
        elif isinstance(value, (dict, list)):
            shown = f"a JSON {'object' if isinstance(value, dict) else 'list'}"
        else:
            shown = repr(value)
        raise error(f"{source}: metadata 'micro_batches' (the recommended m) must be an integer in "
                    f"[1, {_MAX_RECOMMENDED_M}], got {shown}")
    return value


def stacks_digest(groups, redundancy, stacks):
    """SHA-256 of a layout's stacks, as written in a recommendation's ``fingerprint``.

    Parameters
    ----------
    groups, redundancy : int
        ``N`` and ``r``.
    stacks : numpy.ndarray of int, shape (N, r)

    Returns
    -------
    str
        ``"sha256:"`` and 64 hex digits, over the text ``"spare-layout N r\\n"`` then the
        stacks as little-endian int64, row by row (``docs/formats.md``, "Recommendation").
    """
    import hashlib

    digest = hashlib.sha256(f"spare-layout {groups} {redundancy}\n".encode())
    digest.update(np.ascontiguousarray(stacks, dtype="<i8").tobytes())
    return "sha256:" + digest.hexdigest()


def _check_recommendation(layout, source):
    """Refuse a ``metadata["recommendation"]`` that is not an object or whose fingerprint is not the stacks'."""
    recommendation = layout.metadata.get("recommendation")
    if recommendation is None:
        return
    if not isinstance(recommendation, dict):
        raise LayoutFileError(f"{source}: metadata 'recommendation' must be an object, got a JSON "
                              f"{'list' if isinstance(recommendation, list) else type(recommendation).__name__}")
    version = _recommendation_version(recommendation, source)
    fingerprint = recommendation.get("fingerprint")
    if not isinstance(fingerprint, str):
        raise LayoutFileError(f"{source}: the recommendation has no fingerprint of its layout "
                              "(metadata.recommendation.fingerprint must be a \"sha256:...\" string)")
    actual = stacks_digest(layout.groups, layout.redundancy, layout.stacks)
    if fingerprint != actual:
        shown = fingerprint[:71] + ("..." if len(fingerprint) > 71 else "")
        raise LayoutFileError(f"{source}: the recommendation's fingerprint {shown!r} is not the layout's "
                              f"({actual}): the stacks or the fingerprint were changed after the recommendation "
                              "was written")
    # The m deployed is metadata.micro_batches: it must be the m the verdict chose, and
    # (from version 2) the whole recommendation as written (contents_fingerprint).
    m = layout.metadata.get("micro_batches")
    spare = recommendation.get("spare")
    if isinstance(spare, dict):
        for key, value, name in (("micro_batches", m, "metadata.micro_batches"),
                                 ("redundancy", layout.redundancy, "the layout's r")):
            if key in spare and spare[key] != value:
                raise LayoutFileError(f"{source}: {name} = {value!r} is not the recommendation's "
                                      f"(metadata.recommendation.spare.{key} = {spare[key]!r}): the file was changed "
                                      "after the recommendation was written")
    contents = recommendation.get("contents_fingerprint")
    if version == 1 and contents is None:
        return  # a version 1 recommendation: no contents fingerprint
    if not isinstance(contents, str):
        raise LayoutFileError(f"{source}: the recommendation has no fingerprint of its contents "
                              "(metadata.recommendation.contents_fingerprint must be a \"sha256:...\" string)")
    actual = recommendation_digest(m, recommendation)
    if contents != actual:
        shown = contents[:71] + ("..." if len(contents) > 71 else "")
        raise LayoutFileError(f"{source}: the recommendation's contents_fingerprint {shown!r} does not verify "
                              f"({actual}): metadata.micro_batches or metadata.recommendation was changed after the "
                              "recommendation was written")


#: The versions of ``metadata["recommendation"]`` this release reads (1: no contents fingerprint; 2: with one).
_RECOMMENDATION_VERSIONS = (1, 2)


def _recommendation_version(recommendation, source):
    """``metadata.recommendation.version``: the JSON integer 1 or 2; else :class:`LayoutFileError`.

    ``"2"``, ``2.0``, ``true``, ``null`` or a missing version is no version number (a file
    whose version was edited to one of those, and its ``contents_fingerprint`` deleted,
    was read as version 1, its edited ``m`` deployed unchecked); a larger integer is a
    newer format this release cannot check.
    """
    version = recommendation.get("version")
    if type(version) is int and version in _RECOMMENDATION_VERSIONS:
        return version
    where = f"{source}: metadata.recommendation.version"
    if type(version) is int and version > max(_RECOMMENDATION_VERSIONS):
        shown = check.int_text(version) if version < 10**40 else "a huge integer"
        raise LayoutFileError(f"{where} {shown} is not supported: this spare-opt reads versions 1 and 2 (written by "
                              "a newer spare-opt? upgrade, or write the file again with compare -o)")
    if "version" not in recommendation:
        shown = "is missing"
    elif type(version) is int:
        shown = f"is {check.int_text(version) if abs(version) < 10**40 else 'a huge integer'}"
    elif isinstance(version, str):
        shown = f"is the string {version[:40]!r}"
    elif isinstance(version, (dict, list)):
        shown = f"is a JSON {'object' if isinstance(version, dict) else 'list'}"
    else:
        shown = f"is {_json_literal(version)}"
    raise LayoutFileError(f"{where} {shown}: it must be the integer 1 or 2 (the file was changed after it was "
                          "written; write it again with compare -o)")


def _json_literal(value):
    """``value`` as JSON writes it (``true``, ``null``, ``2.0``), for messages about a file's fields."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def recommendation_digest(micro_batches, recommendation):
    """SHA-256 of a recommendation's contents, as written in its ``contents_fingerprint``.

    Parameters
    ----------
    micro_batches : int or None
        The layout's ``metadata["micro_batches"]``, the ``m`` it recommends.
    recommendation : dict
        ``metadata["recommendation"]`` (its own ``contents_fingerprint`` left out).

    Returns
    -------
    str
        ``"sha256:"`` and 64 hex digits over the JSON text of ``{"micro_batches": m,
        "recommendation": ...}`` with sorted keys, no spaces (``separators=(",", ":")``)
        and ASCII escapes (Python's :func:`json.dumps` with ``sort_keys=True``), read back
        from JSON first so that a written and a loaded recommendation give the same text.

    Raises
    ------
    ValueError
        A NaN or infinite number (JSON has none; a recommendation holds ``None`` there).
    TypeError
        A value JSON cannot represent.

    Notes
    -----
    ``recommendation["fingerprint"]`` (:func:`stacks_digest`) is part of the text, so
    this digest covers ``N``, ``r`` and the stacks too.
    """
    import hashlib
    import json

    from .._core.io import json_default

    body = {key: value for key, value in recommendation.items() if key != "contents_fingerprint"}
    document = json.loads(json.dumps({"micro_batches": micro_batches, "recommendation": body},
                                     default=json_default, allow_nan=False))
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def recommended_micro_batches(layout, micro_batches=None):
    """The ``m`` to run ``layout`` with: the one given, else the layout's recommended ``m``, else 1.

    Every reader of a layout (``spare-opt plan``, ``validate``, ``replay``,
    ``simulate --layout``, :class:`~spare_opt.ReorderController`,
    :func:`~spare_opt.agreed_plan`, ``SpareGroup``, ``SpareBatchSampler``,
    ``TorchFTPlan``) takes its ``m`` from here, so a file written by
    ``spare-opt compare -o`` is deployed without repeating its ``m``.

    Parameters
    ----------
    layout : Layout
    micro_batches : int or None, default None
        An explicit ``m``, or ``None`` for the layout's.

    Returns
    -------
    int or object
        ``micro_batches`` itself when given (the caller checks its range against
        ``N``), else :attr:`Layout.micro_batches`, else ``1``.

    Raises
    ------
    ParameterTypeError
        ``layout`` is not a :class:`Layout`.

    Warns
    -----
    RecommendationWarning
        ``micro_batches`` is given and differs from the layout's recommended ``m``:
        the explicit value is used.  Once per layout object and value (the layout
        remembers it, also across pickling), so a reader that builds planners in a
        loop or in worker processes warns once.
    """
    check_layout(layout)
    recommended = layout.micro_batches
    if micro_batches is None:
        return 1 if recommended is None else recommended
    if recommended is not None and micro_batches != recommended and not isinstance(micro_batches, bool):
        warned = layout.__dict__.setdefault("_warned_m", set())
        try:
            key = int(micro_batches)
        except (TypeError, ValueError, OverflowError):
            return micro_batches  # not a number: the caller's check names it
        if key not in warned:
            warned.add(key)
            import warnings

            warnings.warn(f"the layout recommends m = {recommended} micro-batches per shard type "
                          f"(metadata.micro_batches); m = {key} was given and is used",
                          RecommendationWarning, stacklevel=3)
    return micro_batches


def _unpickle_layout(groups, redundancy, stacks, method, offsets, metadata, warned=()):
    """A :class:`Layout` from what :meth:`Layout.__reduce__` pickled, not validated again.

    The layout was validated when it was made; a pickle is trusted input by nature
    (loading one can run any code), so only its shape is checked here.
    """
    if stacks is None:
        stacks = (np.arange(groups, dtype=np.int64)[:, None] + np.asarray(offsets, dtype=np.int64)[None, :]) % groups
    layout = Layout.__new__(Layout)
    layout._stacks = np.ascontiguousarray(stacks, dtype=np.int32)
    if layout._stacks.shape != (groups, redundancy):
        raise LayoutError(f"pickled layout has stacks of shape {layout._stacks.shape}, expected {(groups, redundancy)}")
    layout._stacks.setflags(write=False)
    layout.method = method
    layout.offsets = None if offsets is None else tuple(offsets)
    layout.metadata = dict(metadata)
    layout._holders = None
    if warned:
        layout._warned_m = set(warned)
    return layout


class Layout:
    """A validated SPARe stack layout.

    Parameters
    ----------
    stacks : array_like of int, shape (N, r)
        ``stacks[g, l]`` is the shard type that DP group ``g`` holds at layer ``l``
        (layer 0 = top).  Stored as a read-only ``numpy.int32`` array.
    method : str, default "custom"
        How the layout was made (``"sidon"``, ``"consecutive"``, ``"block"``,
        ``"random"``, ``"custom"``...).
    offsets : sequence of int or None
        Circulant offsets ``0 = o_0 < ... < o_{r-1} < N`` when the layout is circulant,
        ``stacks[g, l] = (g + o_l) mod N``.  Checked against ``stacks``.
    metadata : dict or None
        Free JSON-serialisable information (solver status, seed, time...).  Its
        ``micro_batches``, when not ``None``, is the recommended ``m``
        (:attr:`micro_batches`): an integer in ``[1, 1024]``.

    Raises
    ------
    LayoutError
        ``stacks`` is not a 2-D array of integers (strings, booleans, complex or
        non-integral numbers are refused), breaks an invariant, or ``offsets`` are not
        integers in ``[0, N)`` that generate ``stacks``; ``metadata`` is not a dict,
        or its ``micro_batches`` is not an integer in ``[1, 1024]``.
        The message names the first violation.

    Notes
    -----
    Validation is vectorised: ``O(N r log N)`` time, no Python loop over groups, so
    ``N = 100,000`` layouts validate in well under a second.

    A pickled layout (sent to a worker process or a Dask cluster) holds its offsets
    when it is circulant (a few hundred bytes at any ``N``), its stacks otherwise
    (``4 N r`` bytes), never the holder index it caches; it is not validated again
    when loaded.

    Examples
    --------
    The circulant layout of ``N = 7`` groups with offsets ``{0, 1, 3}`` (a Sidon set mod 7:
    two groups share at most one shard type):

    >>> import numpy as np
    >>> from spare_opt import Layout
    >>> layout = Layout((np.arange(7)[:, None] + [0, 1, 3]) % 7, method="sidon", offsets=[0, 1, 3])
    >>> layout
    Layout(groups=7, redundancy=3, method='sidon')
    >>> layout.stacks[:2].tolist(), layout.overlap()
    ([[0, 1, 3], [1, 2, 4]], 1)
    >>> Layout([[0, 1], [0, 1]])
    Traceback (most recent call last):
    ...
    spare_opt._core.errors.LayoutError: layer 0 is not a permutation of 0..1: shard type 0 appears 2 times and shard type 1 is missing
    """

    def __init__(self, stacks, method="custom", offsets=None, metadata=None):
        try:
            array = np.asarray(stacks)
        except (TypeError, ValueError) as exc:
            raise LayoutError(f"stacks is not a rectangular integer array: {exc}") from None
        if array.ndim != 2:
            raise LayoutError(f"stacks must be a 2-D integer array of shape (N, r), got shape {array.shape}")
        if array.dtype == object:
            raise LayoutError("stacks must hold integer shard types, got values numpy keeps as Python objects "
                              "(integers beyond 64 bits, or not numbers)")
        # Only integers, or floats with integral values: strings, booleans and complex
        # numbers would otherwise be cast silently (True -> 1) or fail inside numpy.
        if array.dtype.kind not in "iuf":
            raise LayoutError(f"stacks must hold integer shard types, got dtype {array.dtype}")
        if array.size and not np.issubdtype(array.dtype, np.integer):
            if not np.all(np.isfinite(array)) or not np.all(array == np.round(array)):
                raise LayoutError("stacks must hold integer shard types")
        if array.shape[0] < 1 or array.shape[1] < 1:
            raise LayoutError(f"stacks must have at least one group and one layer, got shape {array.shape}")
        if array.size and (array.min() < 0 or array.max() >= array.shape[0]):
            bad = np.argwhere((array < 0) | (array >= array.shape[0]))[0]
            raise LayoutError(
                f"group {bad[0]} layer {bad[1]} holds shard type {array[bad[0], bad[1]]}, "
                f"outside [0, {array.shape[0]})"
            )
        self._stacks = np.ascontiguousarray(array, dtype=np.int32)
        self._stacks.setflags(write=False)
        self.method = str(method)
        self.offsets = None if offsets is None else _check_offsets(offsets, array.shape[0])
        if metadata is not None and not isinstance(metadata, dict):
            raise LayoutError(f"metadata must be a dict or None, got {type(metadata).__name__}")
        self.metadata = dict(metadata or {})
        if self.metadata.get("micro_batches") is not None:
            _check_recommended_m(self.metadata["micro_batches"], LayoutError, "layout")
        self._holders = None
        self.validate()

    # ------------------------------------------------------------------ shape
    @property
    def stacks(self):
        """numpy.ndarray of int32, shape (N, r), read-only: the shard type at ``[group, layer]``."""
        return self._stacks

    @property
    def groups(self):
        """int: the number of DP groups ``N`` (also the number of shard types)."""
        return self._stacks.shape[0]

    @property
    def redundancy(self):
        """int: the redundancy ``r``, the number of layers in every stack."""
        return self._stacks.shape[1]

    @property
    def micro_batches(self):
        """int or None: the recommended ``m`` (``metadata["micro_batches"]``, written by
        ``spare-opt compare -o``), which every reader takes unless given another
        (:func:`recommended_micro_batches`); ``None`` when the layout carries none."""
        value = self.metadata.get("micro_batches")
        if value is not None:
            _check_recommended_m(value, LayoutError, "layout")  # metadata is a plain dict: it may have changed
        return value

    @property
    def recommendation(self):
        """dict or None: ``metadata["recommendation"]``, the verdict that chose this layout
        (``spare-opt compare -o``; ``docs/formats.md``, "Recommendation"), or ``None``."""
        return self.metadata.get("recommendation")

    def __repr__(self):
        return f"Layout(groups={self.groups}, redundancy={self.redundancy}, method={self.method!r})"

    def __eq__(self, other):
        if not isinstance(other, Layout):
            return NotImplemented
        return (
            self.method == other.method
            and self.offsets == other.offsets
            and np.array_equal(self._stacks, other._stacks)
        )

    __hash__ = None

    def fingerprint(self):
        """A short hash of the stacks that processes compare to check that they hold the same layout.

        Returns
        -------
        str
            16 hexadecimal digits: the first 64 bits of the SHA-256 of
            ``b"spare-layout-v1"``, ``N`` and ``r`` as little-endian int64, then
            ``stacks`` as little-endian int32 in row order.  Only the stacks are
            covered (every plan depends on them alone), not ``method``, ``offsets``
            or ``metadata``; the hash is the same in every process and on every
            platform.

        Examples
        --------
        >>> import numpy as np
        >>> layout = Layout((np.arange(5)[:, None] + np.array([0, 1])) % 5)
        >>> layout.fingerprint() == Layout(layout.stacks.astype(np.int64)).fingerprint()
        True
        """
        import hashlib

        digest = hashlib.sha256(b"spare-layout-v1")
        digest.update(np.array(self._stacks.shape, dtype="<i8").tobytes())
        digest.update(np.ascontiguousarray(self._stacks, dtype="<i4").tobytes())
        return digest.hexdigest()[:16]

    # ---------------------------------------------------------------- pickling
    def __reduce__(self):
        # What travels to another process (a worker of a pool or a Dask cluster) is what
        # defines the layout, not its caches: a circulant layout as its r offsets (the
        # stacks are rebuilt in O(N r)), any other as its stacks (4 N r bytes).  The
        # holder index (another 4 N r + 8 N bytes) is rebuilt on first use.
        stacks = None if self.offsets is not None else self._stacks
        warned = tuple(sorted(self.__dict__.get("_warned_m", ())))  # a warning given once stays given in workers
        return (_unpickle_layout, (self.groups, self.redundancy, stacks, self.method, self.offsets, self.metadata,
                                   warned))

    # ------------------------------------------------------------- invariants
    def validate(self):
        """Check the invariants of the SPARe model; raise on the first violation.

        Raises
        ------
        LayoutError
            A group holds a shard type twice, a layer is not a permutation of
            ``0..N-1``, or the offsets do not generate the stacks.
        """
        stacks = self._stacks
        n, r = stacks.shape
        ordered = np.sort(stacks, axis=1)
        repeated = np.nonzero(np.any(ordered[:, 1:] == ordered[:, :-1], axis=1))[0]
        if repeated.size:
            g = int(repeated[0])
            row = stacks[g]
            values, counts = np.unique(row, return_counts=True)
            shard = int(values[np.argmax(counts > 1)])
            layers = np.nonzero(row == shard)[0].tolist()
            raise LayoutError(f"group {g} holds shard type {shard} more than once (layers {layers})")
        for layer in range(r):
            counts = np.bincount(stacks[:, layer], minlength=n)
            if np.any(counts != 1):
                missing = np.nonzero(counts == 0)[0]
                doubled = int(np.argmax(counts > 1))
                raise LayoutError(
                    f"layer {layer} is not a permutation of 0..{n - 1}: shard type {doubled} "
                    f"appears {int(counts[doubled])} times and shard type {int(missing[0])} is missing"
                )
        # Every layer is a permutation, so every shard type is held exactly r times.
        if self.offsets is not None:
            offsets = np.asarray(self.offsets, dtype=np.int64)
            if offsets.shape != (r,):
                raise LayoutError(f"{len(self.offsets)} offsets given for redundancy r = {r}")
            expected = (np.arange(n, dtype=np.int64)[:, None] + offsets[None, :]) % n
            if not np.array_equal(expected, stacks):
                g, layer = np.argwhere(expected != stacks)[0]
                raise LayoutError(
                    f"offsets {list(self.offsets)} do not generate the stacks: group {g} layer {layer} "
                    f"holds {stacks[g, layer]}, offsets give {expected[g, layer]}"
                )

    # ---------------------------------------------------------------- holders
    def holders(self):
        """Holders of every shard type, in CSR form.

        Returns
        -------
        indptr : numpy.ndarray of int64, shape (N + 1,)
        groups : numpy.ndarray of int32, shape (N * r,)
            The holders of shard type ``t`` are ``groups[indptr[t]:indptr[t + 1]]``
            (exactly ``r`` of them, sorted by group id).
        """
        if self._holders is None:
            n, r = self._stacks.shape
            flat = self._stacks.ravel()
            owner = np.repeat(np.arange(n, dtype=np.int32), r)
            order = np.lexsort((owner, flat))
            groups = owner[order]
            indptr = np.arange(0, n * r + 1, r, dtype=np.int64)
            groups.setflags(write=False)
            indptr.setflags(write=False)
            self._holders = (indptr, groups)
        return self._holders

    def overlap(self):
        """The largest number of shard types that two distinct groups share (``lambda``).

        Returns
        -------
        int
            0 when ``r = 1``.  A Sidon (modular Golomb ruler) layout has ``lambda <= 1``:
            the independence condition of the paper.

        Notes
        -----
        For a circulant layout, groups ``g`` and ``g + d`` share one shard type per pair
        of layers ``(i, j)`` with ``o_i - o_j = d (mod N)``, so ``lambda`` is the largest
        multiplicity of a non-zero difference: ``O(r^2)``.  Otherwise, for each group
        ``g`` the holders of its ``r`` shard types are gathered (``r^2`` ids) and the
        holders ``h > g`` counted by sorting the row; the largest count over all rows is
        ``lambda`` (each pair is counted from its smaller id, so rows are independent).
        ``O(N r^2 log r)`` time; groups are processed in chunks of about ``2^21``
        holder ids, so memory stays ``O(N r + 2^21)`` whatever ``N`` and ``r`` are.
        """
        n, r = self._stacks.shape
        if r == 1 or n == 1:
            return 0
        if self.offsets is not None:
            o = np.asarray(self.offsets, dtype=np.int64)
            diffs = (o[:, None] - o[None, :]) % n
            diffs = diffs[~np.eye(r, dtype=bool)]
            return int(np.bincount(diffs, minlength=n).max())
        holders = self.holders()[1].reshape(n, r)
        width = r * r
        # Distinct negative fillers for the pairs that are not counted (h <= g), so they
        # never form runs; they sort before every group id.
        fillers = -1 - np.arange(width, dtype=np.int32)
        chunk = max(1, (1 << 21) // width)
        best = 0
        for start in range(0, n, chunk):
            rows = np.arange(start, min(n, start + chunk), dtype=np.int32)
            partners = holders[self._stacks[rows]].reshape(rows.size, width)
            partners = np.where(partners > rows[:, None], partners, fillers[None, :])
            partners.sort(axis=1)
            flat = partners.ravel()
            run_start = np.ones(flat.size, dtype=bool)
            run_start[1:] = flat[1:] != flat[:-1]
            run_start[::width] = True  # runs never cross rows
            starts = np.flatnonzero(run_start)
            lengths = np.diff(np.append(starts, flat.size))
            counted = flat[starts] >= 0
            if counted.any():
                best = max(best, int(lengths[counted].max()))
        return best

    # -------------------------------------------------------------------- I/O
    def to_dict(self):
        """The JSON document of ``docs/formats.md`` as a dict."""
        return {**self._header(), "stacks": self._stacks.tolist()}

    def _header(self):
        """The document without ``stacks`` (the ``.npz`` header)."""
        return {
            "format": LAYOUT_FORMAT,
            "version": LAYOUT_VERSION,
            "groups": self.groups,
            "redundancy": self.redundancy,
            "method": self.method,
            "offsets": None if self.offsets is None else list(self.offsets),
            "metadata": self.metadata,
        }

    def save(self, path, *, force=False):
        """Write the layout atomically to ``path`` (``.npz`` for NumPy, JSON otherwise).

        Parameters
        ----------
        path : str or os.PathLike
        force : bool, default False
            Overwrite an existing file.

        Raises
        ------
        OutputExistsError
            ``path`` exists and ``force`` is false.
        LayoutFileError
            ``path`` is not a path, is a folder, or the file cannot be written (its
            folder is missing, no permission...).
        LayoutError
            ``metadata`` holds a value JSON cannot represent (numpy scalars and
            arrays are converted to numbers and lists).
        """
        path = as_path(path, LayoutFileError, "layout file path")
        try:
            json.dumps(self.metadata, default=json_default, allow_nan=False)
        except (TypeError, ValueError) as exc:
            if "JSON compliant" in str(exc):  # NaN or infinity: JSON has no such numbers
                exc = "it holds a NaN or infinite number, which JSON cannot hold"
            raise LayoutError(f"metadata cannot be written as JSON: {exc}") from None
        if path.suffix == ".npz":
            header = self._header()
            arrays = {"stacks": self._stacks,
                      "header": np.array(json.dumps(header, default=json_default, allow_nan=False))}
            data = _npz_bytes(arrays)
        else:
            doc = self.to_dict()
            stacks = doc.pop("stacks")
            # One group per line keeps large files diff- and grep-friendly.
            head = json.dumps(doc, indent=1, default=json_default, allow_nan=False)[:-2]
            rows = ",\n  ".join(json.dumps(row) for row in stacks)
            data = f'{head},\n "stacks": [\n  {rows}\n ]\n}}\n'
        return write_document(path, data, force=force, error=LayoutFileError, what="layout file")

    @classmethod
    def from_dict(cls, doc, source="layout document"):
        """Build a layout from a parsed ``spare-layout`` document; checks format, version, invariants.

        Raises
        ------
        LayoutFileError
            Wrong format or version, missing or mistyped keys (``groups`` and
            ``redundancy`` must be integers, ``method`` a string), sizes that disagree;
            a recommended ``m`` (``metadata.micro_batches``) that is not an integer in
            ``[1, 1024]``; a ``metadata.recommendation`` that is not an object or whose
            ``fingerprint`` is not :func:`stacks_digest` of the stacks (the stacks were
            changed after ``spare-opt compare -o`` wrote the file).
        LayoutError
            The stacks break an invariant.
        """
        if not isinstance(doc, dict):
            raise LayoutFileError(f"{source}: expected a JSON object, got {type(doc).__name__}")
        if doc.get("format") != LAYOUT_FORMAT:
            raise LayoutFileError(f"{source}: format is {doc.get('format')!r}, expected {LAYOUT_FORMAT!r}")
        # type() is int: 1.0 and true compare equal to 1 but are not a version number.
        check_version(doc, LAYOUT_VERSION, source, LayoutFileError, LAYOUT_FORMAT)
        for key in ("groups", "redundancy", "stacks"):
            if key not in doc:
                raise LayoutFileError(f"{source}: missing key {key!r}")
        for key in ("groups", "redundancy"):
            if type(doc[key]) is not int:
                raise LayoutFileError(f"{source}: {key!r} must be an integer, got {doc[key]!r}")
        method = doc.get("method", "custom")
        if not isinstance(method, str):
            raise LayoutFileError(f"{source}: 'method' must be a string, got {method!r}")
        stacks = doc["stacks"]
        if has_bool(stacks):  # numpy would read true as 1
            raise LayoutFileError(f"{source}: 'stacks' must be a list of N lists of r integers (true/false are not)")
        try:
            array = np.asarray(stacks)
        except ValueError:
            raise LayoutFileError(f"{source}: 'stacks' rows have different lengths") from None
        if array.ndim != 2 or array.dtype == object or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
            raise LayoutFileError(f"{source}: 'stacks' must be a list of N lists of r integers")
        if array.shape != (doc["groups"], doc["redundancy"]):
            raise LayoutFileError(
                f"{source}: 'stacks' has shape {array.shape} but groups={doc['groups']!r}, "
                f"redundancy={doc['redundancy']!r}"
            )
        offsets = doc.get("offsets")
        # type() is int: true would pass isinstance(o, int).
        if offsets is not None and (not isinstance(offsets, list) or not all(type(o) is int for o in offsets)):
            raise LayoutFileError(f"{source}: 'offsets' must be a list of integers or null")
        metadata = optional_object(doc, "metadata", source, LayoutFileError)
        if metadata.get("micro_batches") is not None:
            _check_recommended_m(metadata["micro_batches"], LayoutFileError, source)
        try:
            layout = cls(array, method=method, offsets=offsets, metadata=metadata)
        except LayoutError as exc:
            raise LayoutError(f"{source}: {exc}") from None
        _check_recommendation(layout, source)
        return layout

    @classmethod
    def load(cls, path):
        """Read a layout file written by :meth:`save` (JSON or ``.npz``).

        Raises
        ------
        LayoutFileError
            ``path`` is not a path or is empty; missing, unreadable or malformed file;
            wrong format or version; a recommendation whose fingerprint or ``m`` is
            wrong (:meth:`from_dict`).
        LayoutError
            The stacks break an invariant.
        """
        path = as_path(path, LayoutFileError, "layout file path")
        if path.suffix == ".npz":
            with reading(path, LayoutFileError, "layout file", "JSON or .npz"):
                header = _read_npz(path)
            return cls.from_dict(header, source=str(path))
        doc = read_json_file(path, LayoutFileError, "layout file", expected="JSON or .npz")
        return cls.from_dict(doc, source=str(path))


def layout_file_size(path):
    """``(N, r)`` of a layout file read from its header only, or ``None`` when the header does not say.

    Lets a command refuse a layout it cannot take (``N`` above a limit) before
    loading its ``N r`` entries: :meth:`Layout.save` writes ``groups`` and
    ``redundancy`` before ``stacks`` in JSON, and a separate ``header`` in ``.npz``.
    Nothing is checked here; :meth:`Layout.load` checks the whole file.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    tuple of int or None
        ``None`` for a file that cannot be read, that is not a regular file (a pipe,
        ``<(...)`` in a shell: it can be read once only, by :meth:`Layout.load`), or
        whose first 64 KiB do not give both sizes before ``stacks``.
    """
    import re
    import zipfile

    try:
        path = as_path(path, LayoutFileError, "layout file path")
        if not path.is_file():
            return None
        if path.suffix == ".npz":
            with zipfile.ZipFile(path) as archive, archive.open("header.npy") as member:
                text = str(np.lib.format.read_array(member, allow_pickle=False))
        else:
            with open(path, "rb") as handle:
                text = handle.read(1 << 16).decode("utf-8", errors="replace")
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, LayoutFileError):
        return None
    head = text.split('"stacks"', 1)[0]
    sizes = [re.search(rf'"{key}"\s*:\s*([0-9]{{1,19}})\s*[,}}]', head) for key in ("groups", "redundancy")]
    if not all(sizes):
        return None
    return int(sizes[0].group(1)), int(sizes[1].group(1))


def _npz_bytes(arrays):
    """A ``.npz`` archive (readable by :func:`numpy.load`) of ``arrays``, as bytes.

    Like :func:`numpy.savez_compressed` but at zlib level 1: 7-9 times faster on
    layouts of 10^7 entries for files under 1% larger (measured at N = 100,000,
    r = 60 and 200).
    """
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
    return buffer.getvalue()


def _read_npz(path):
    """The header dict of a ``.npz`` layout file with its ``stacks`` array added.

    Raises LayoutFileError on anything but a NumPy zip archive holding a JSON-object
    ``header`` and a ``stacks`` array; lets FileNotFoundError, PermissionError and
    IsADirectoryError through for :meth:`Layout.load` to word.
    """
    import zipfile

    with open(path, "rb") as handle:
        magic = handle.read(6)
    if magic == b"\x93NUMPY":
        raise LayoutFileError(f"{path}: not a spare-layout .npz file (a single .npy array, not an archive)")
    if not magic.startswith(b"PK"):
        # np.load would take any other bytes for a pickle and suggest unpickling them.
        raise LayoutFileError(f"{path}: not a spare-layout .npz file (not a NumPy .npz zip archive)")
    try:
        archive = np.load(path, allow_pickle=False)
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise LayoutFileError(f"{path}: not a spare-layout .npz file ({exc})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        # np.load returns a bare array for a .npy file, whatever its name.
        raise LayoutFileError(f"{path}: not a spare-layout .npz file (a single .npy array, not an archive)")
    with archive:
        try:
            missing = [key for key in ("header", "stacks") if key not in archive.files]
            if missing:
                raise LayoutFileError(f"{path}: not a spare-layout .npz file (no {' or '.join(missing)} array)")
            header_array = archive["header"]
            # A member that is not in .npy format comes back as raw bytes.
            if not isinstance(header_array, np.ndarray) or header_array.shape != () or header_array.dtype.kind != "U":
                raise LayoutFileError(f"{path}: not a spare-layout .npz file ('header' is not one JSON string)")
            header = parse_json_text(str(header_array), LayoutFileError, f"{path}: 'header'",
                                     malformed="not a spare-layout .npz header")
            stacks = archive["stacks"]
            if not isinstance(stacks, np.ndarray):
                raise LayoutFileError(f"{path}: not a spare-layout .npz file ('stacks' is not a .npy array)")
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise LayoutFileError(f"{path}: not a spare-layout .npz file ({reason})") from None
    if not isinstance(header, dict):
        raise LayoutFileError(f"{path}: 'header' must be a JSON object, got {type(header).__name__}")
    header["stacks"] = stacks
    return header

"""A ``torch.utils.data`` batch sampler that yields this rank's micro-batches of every step."""

import collections

import numpy as np
import torch

import spare_opt

__all__ = ["SpareBatchSampler", "global_batch_indices"]

#: The largest sampler seed: ``torch.Generator.manual_seed`` takes ``seed + epoch`` below ``2**64``.
_MAX_SAMPLER_SEED = 2**63 - 1


def _integer(name, value, *, minimum=None, maximum=None):
    """``value`` as an ``int`` (a Python or numpy integer; not a bool, a float or text) in
    ``[minimum, maximum]``: the library's rule for integer arguments."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise spare_opt.ParameterTypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise spare_opt.ParameterError(f"{name} must be >= {minimum:,}, got {value:,}")
    if maximum is not None and value > maximum:
        raise spare_opt.ParameterError(f"{name} must be <= {maximum:,}, got {value:,}")
    return value


def _flag(name, value):
    """``value`` as a ``bool`` (``bool`` or ``numpy.bool_`` only: ``1`` or ``"no"`` is not a flag)."""
    if not isinstance(value, (bool, np.bool_)):
        raise spare_opt.ParameterTypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def global_batch_indices(dataset_size, global_batch_size, step, *, shuffle=True, seed=0):
    """The dataset indices of step ``step``'s global batch (what :class:`SpareBatchSampler` splits).

    A pure function of its arguments: the permutation of data epoch
    ``q = step // (dataset_size // global_batch_size)`` is ``torch.randperm`` with a
    generator seeded ``seed + q`` (``arange`` without shuffle), and the step takes its
    ``global_batch_size`` consecutive entries.  A fault-free single-process reference
    run uses it to read the same batches.

    Returns
    -------
    torch.Tensor of int64, shape (global_batch_size,)

    Raises
    ------
    spare_opt.ParameterTypeError, spare_opt.ParameterError
        As :class:`SpareBatchSampler` (``step`` an integer >= 0).
    """
    dataset_size = _integer("dataset_size", dataset_size, minimum=1)
    global_batch_size = _integer("global_batch_size", global_batch_size, minimum=1, maximum=dataset_size)
    step = _integer("step", step, minimum=0)
    shuffle = _flag("shuffle", shuffle)
    seed = _integer("seed", seed, minimum=0, maximum=_MAX_SAMPLER_SEED)
    epoch, position = divmod(step, dataset_size // global_batch_size)
    if shuffle:
        order = torch.randperm(int(dataset_size), generator=torch.Generator().manual_seed(int(seed) + epoch))
    else:
        order = torch.arange(int(dataset_size))
    start = position * int(global_batch_size)
    return order[start:start + int(global_batch_size)]


def _data_split(source):
    """``(parts, part)``: into how many parts a micro-batch is split among ``source``'s DP group, and this rank's."""
    if hasattr(source, "data_parts"):
        return int(source.data_parts), int(source.data_part)
    if getattr(source, "group_process_group", None) is None:
        return 1, 0
    return int(getattr(source, "group_world_size", 1) or 1), int(getattr(source, "group_rank", 0) or 0)


class SpareBatchSampler(torch.utils.data.Sampler):
    """Yield this rank's micro-batches, step after step, under the plan in force.

    The global batch of step ``s`` is ``global_batch_size`` consecutive samples of a
    permutation of the dataset that is a pure function of ``seed`` and the data epoch
    ``s // (dataset_size // global_batch_size)`` (as in ``DistributedSampler``), so
    every rank computes the same batches without talking to the others.  Micro-batch
    ``j`` of shard type ``t`` is sub-block ``j`` (of ``m``) of block ``t`` (of ``N``).

    Parameters
    ----------
    source : SpareGroup or TorchFTPlan
        Gives the current plan (``source.plan``), this rank's group (``source.group``)
        and the :class:`PlanBook` (``source.book``).  The plan is read when the sampler
        yields a step's first micro-batch, so a re-plan takes effect for the steps that
        were not yet sampled.
    dataset_size : int
        Number of samples in the dataset.
    global_batch_size : int
        ``B``, samples per step; a multiple of ``N m`` (every micro-batch has
        ``B / (N m)`` samples, so the gradient of the mean loss is exact), and of
        ``N m K`` in DP groups whose ``K`` ranks split the samples (each takes part
        ``k`` of every micro-batch: FSDP2's ``dp_shard`` ranks, or every rank of a group
        without a mesh; tensor and pipeline parallel ranks read the same part).
    steps : int or None, default None
        Steps to sample (``None``: without end).
    shuffle : bool, default True
    seed : int, default 0
    start_step : int, default 0
        The first step to sample (a restart from a checkpoint, a healed rank).

    Raises
    ------
    spare_opt.ParameterTypeError
        ``dataset_size``, ``global_batch_size``, ``steps`` (unless ``None``), ``seed``
        or ``start_step`` is not an integer (Python or numpy; a bool, a float or a
        string is refused), or ``shuffle`` is not a bool.
    spare_opt.ParameterError
        ``global_batch_size`` is not a positive multiple of ``N m`` or exceeds
        ``dataset_size``; ``dataset_size < 1``, ``steps < 0``, ``start_step < 0``, or
        ``seed`` outside ``[0, 2**63 - 1]`` (``torch.Generator.manual_seed`` takes
        ``seed + epoch``).  All are checked here, not when iteration starts.

    Notes
    -----
    With ``DataLoader(dataset, batch_sampler=sampler, num_workers=w)`` the sampler runs
    in the training process and the workers only load samples, so the plan is always
    the one of the training process.  The loader prefetches ``w * prefetch_factor``
    micro-batches: those sampled before a re-plan may no longer be this rank's work.
    :class:`SpareStep` matches every loaded micro-batch with the key that the sampler
    recorded for it (:meth:`pop_key`, in yield order, which a ``DataLoader`` keeps),
    drops the stale ones and loads missing ones (patch work) directly.
    """

    def __init__(self, source, dataset_size, global_batch_size, *, steps=None, shuffle=True, seed=0, start_step=0):
        super().__init__()
        book = source.book
        parts = book.groups * book.micro_batches
        dataset_size = _integer("dataset_size", dataset_size, minimum=1)
        global_batch_size = _integer("global_batch_size", global_batch_size)
        if global_batch_size < 1 or global_batch_size % parts:
            raise spare_opt.ParameterError(
                f"global_batch_size must be a positive multiple of N m = {parts} (equal micro-batches keep the "
                f"gradient exact), got {global_batch_size!r}")
        if global_batch_size > dataset_size:
            raise spare_opt.ParameterError(
                f"global_batch_size {global_batch_size} exceeds the dataset's {dataset_size} samples")
        # A DP group of several ranks: the ranks that split the samples (FSDP2's dp_shard, or
        # every rank of a group without a mesh) each take their part of every micro-batch,
        # so all its ranks run the same passes; tensor and pipeline parallel ranks take the
        # same part (SpareGroup.data_part).
        ranks, part = _data_split(source)
        if (global_batch_size // parts) % ranks:
            raise spare_opt.ParameterError(
                f"global_batch_size must be a multiple of N m K = {parts * ranks} (every micro-batch split equally "
                f"among the {ranks} ranks of a DP group that split the samples keeps the gradient exact), got "
                f"{global_batch_size!r}")
        self.source = source
        self.dataset_size = dataset_size
        self.global_batch_size = global_batch_size
        self.micro_batch_size = global_batch_size // parts
        self.data_parts = ranks
        self.data_part = part
        self.steps = None if steps is None else _integer("steps", steps, minimum=0)
        self.shuffle = _flag("shuffle", shuffle)
        self.seed = _integer("seed", seed, minimum=0, maximum=_MAX_SAMPLER_SEED)
        self.start_step = _integer("start_step", start_step, minimum=0)
        self.steps_per_epoch = self.dataset_size // global_batch_size
        self._keys = collections.deque()
        self._permutation = (None, None)

    def global_batch(self, step):
        """The dataset indices of step ``step``'s global batch, a ``torch.int64`` tensor of ``B``."""
        epoch, position = divmod(int(step), self.steps_per_epoch)
        if self._permutation[0] != epoch:
            if self.shuffle:
                generator = torch.Generator().manual_seed(self.seed + epoch)
                order = torch.randperm(self.dataset_size, generator=generator)
            else:
                order = torch.arange(self.dataset_size)
            self._permutation = (epoch, order)
        start = position * self.global_batch_size
        return self._permutation[1][start:start + self.global_batch_size]

    def indices(self, step, key):
        """The dataset indices (a list of ``B / (N m)`` ints) of micro-batch ``key = t m + j`` of ``step``.

        In a DP group whose ranks split the samples (``K`` of them; ``dp_shard`` of a mesh):
        this rank's part ``k`` of ``K`` equal parts of it (``B / (N m K)`` ints).
        """
        size = self.micro_batch_size
        part = size // self.data_parts
        start = key * size + self.data_part * part
        return self.global_batch(step)[start:start + part].tolist()

    def set_start_step(self, step):
        """Start the next iteration at ``step`` (an integer >= 0) and forget the recorded keys."""
        self.start_step = _integer("start_step", step, minimum=0)
        self._keys.clear()

    def pop_key(self):
        """``(step, key)`` of the oldest yielded micro-batch not yet popped (the next one a loader delivers)."""
        return self._keys.popleft()

    def __iter__(self):
        source = self.source
        step = self.start_step
        while self.steps is None or step < self.steps:
            work = source.book.work(source.plan)[source.group]
            for key in work:
                self._keys.append((step, key))
                yield self.indices(step, key)
            step += 1

    def __len__(self):
        if self.steps is None:
            raise TypeError("a SpareBatchSampler without steps has no length")
        source = self.source
        per_step = len(source.book.work(source.plan)[source.group])
        return max(0, self.steps - self.start_step) * per_step

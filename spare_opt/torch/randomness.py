"""Random numbers per micro-batch: a stream that depends on the micro-batch, not on who computes it.

A survivor that computes a failed group's micro-batch (patch work) must draw the same
dropout masks as the failed group would have: the stream of micro-batch ``j`` of shard
type ``t`` at step ``s`` is a pure function of ``(seed, s, t, j)``, whoever computes it
and whatever it computed before.  :class:`~spare_opt.torch.SpareStep` runs every
micro-batch under :func:`micro_batch_rng`; a TorchFT loop, or a reference run, uses the
same functions.
"""

import contextlib
import hashlib

import torch

__all__ = ["RandomState", "micro_batch_generator", "micro_batch_rng", "micro_batch_seed"]


def micro_batch_seed(seed, step, shard_type, micro_batch, part=0, stage=0):
    """The seed of micro-batch ``micro_batch`` of shard type ``shard_type`` at step ``step``.

    Parameters
    ----------
    seed : int
        The job's seed (any Python int; reduced modulo ``2**64``).
    step : int
    shard_type : int
        ``t`` in ``[0, N)``.
    micro_batch : int
        ``j`` in ``[0, m)``.  The step helper's key of the micro-batch is ``t m + j``.
    part : int, default 0
        The part of the micro-batch that a rank of a DP group whose ranks split the
        samples computes (its ``dp_shard`` coordinate; each part draws its own stream;
        0 gives the stream of the whole).  Tensor-parallel ranks of one row compute the
        same part and draw the same stream, so their dropout masks agree.
    stage : int, default 0
        The pipeline stage that runs this part of the model (each stage draws its own
        stream, so stages of equal shapes do not draw equal masks; 0 gives the stream
        of a model that is not pipelined).

    Returns
    -------
    int
        In ``[0, 2**63)``, a pure function of the integers (BLAKE2b of their 64-bit
        encodings), so neighbouring identities give unrelated streams.
    """
    digest = hashlib.blake2b(digest_size=8, person=b"spare-mb-rng")
    extra = ((part,) if part or stage else ()) + ((stage,) if stage else ())
    for value in (seed, step, shard_type, micro_batch) + extra:
        digest.update((int(value) % (1 << 64)).to_bytes(8, "little"))
    return int.from_bytes(digest.digest(), "little") >> 1


def micro_batch_generator(seed, step, shard_type, micro_batch, device="cpu"):
    """A ``torch.Generator`` on ``device`` seeded with :func:`micro_batch_seed` (for explicit draws)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(micro_batch_seed(seed, step, shard_type, micro_batch))
    return generator


def _devices():
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return [torch.cuda.current_device()]
    return []


@contextlib.contextmanager
def micro_batch_rng(seed, step, shard_type, micro_batch, part=0, stage=0):
    """Run the block with torch's default generators seeded for this micro-batch, restored afterwards.

    ``torch.random.fork_rng`` over the CPU generator (and the current CUDA device's,
    when CUDA is in use), then each of those generators seeded with
    ``micro_batch_seed(...)`` (what ``torch.manual_seed`` does to them): dropout and
    every other draw from the default generators inside the block depend only on
    ``(seed, step, shard_type, micro_batch, part, stage)``, and the draws outside it are
    not shifted by it.  Python's ``random`` and NumPy's global state are not touched,
    nor the random tracker of DTensor's own random operators (dropout on sharded
    activations under sequence parallelism draws from it).

    Notes
    -----
    Not ``torch.manual_seed`` itself: it also queues a lazy seed of every CUDA, XPU and
    MTIA device not initialised yet, each with the caller's formatted stack (for torch's
    error messages), 2 ms per call on a CPU job, paid for every micro-batch (a third of
    a small model's step).  The generators seeded here are the ones ``fork_rng``
    restores; the draws are the same.
    """
    devices = _devices()
    with torch.random.fork_rng(devices=devices):
        value = micro_batch_seed(seed, step, shard_type, micro_batch, part, stage)
        torch.default_generator.manual_seed(value)
        for device in devices:
            torch.cuda.default_generators[device].manual_seed(value)
        yield


class RandomState:
    """The process's random states as one stateful object, for ``SpareStep(state={"rng": RandomState()})``.

    ``state_dict()`` holds torch's CPU generator (and the CUDA generators' when CUDA is
    initialised), Python's ``random`` and NumPy's global state (when NumPy is
    importable); ``load_state_dict`` restores them.  Registered with the step helper,
    the draws a training loop makes between steps continue after a heal or a restart
    from the checkpoint as in an uninterrupted run.

    Notes
    -----
    Every entry is a tensor or a plain Python value (ints, a float, a string, tuples,
    lists), so that a checkpoint holding it loads with ``torch.load``'s defaults
    (``weights_only=True``, as nanoGPT's ``sample.py`` loads one): NumPy's state
    ``("MT19937", keys, pos, has_gauss, cached_gaussian)`` is kept as a dict whose
    ``keys`` are an int64 tensor of the 624 words, not as NumPy's tuple with an array
    (which ``weights_only`` refuses).  ``load_state_dict`` also takes that tuple, as
    states written by earlier versions hold it.
    """

    def state_dict(self):
        """``{"torch": ByteTensor, "python": tuple, "numpy": dict, "cuda": list of ByteTensor}`` (see Notes)."""
        import random

        state = {"torch": torch.get_rng_state(), "python": random.getstate()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
        try:
            import numpy
        except ImportError:  # pragma: no cover - numpy is a core dependency
            pass
        else:
            name, keys, position, has_gauss, cached = numpy.random.get_state(legacy=True)
            state["numpy"] = {"bit_generator": str(name), "keys": torch.from_numpy(keys.astype(numpy.int64)),
                              "pos": int(position), "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}
        return state

    def load_state_dict(self, state):
        """Restore :meth:`state_dict`'s result (NumPy's state as a dict, or as NumPy's own tuple)."""
        import random

        torch.set_rng_state(state["torch"])
        random.setstate(_python_state(state["python"]))
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])
        if "numpy" in state:
            import numpy

            saved = state["numpy"]
            if isinstance(saved, dict):
                keys = saved["keys"]
                keys = keys.numpy() if isinstance(keys, torch.Tensor) else numpy.asarray(keys)
                saved = (saved["bit_generator"], keys.astype(numpy.uint32), int(saved["pos"]),
                         int(saved["has_gauss"]), float(saved["cached_gaussian"]))
            numpy.random.set_state(saved)


def _python_state(state):
    """``random.getstate()``'s tuple back from a checkpoint (a list, when it went through JSON-like copies)."""
    version, internal, gauss = state
    return int(version), tuple(int(word) for word in internal), gauss

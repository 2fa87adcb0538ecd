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


def micro_batch_seed(seed, step, shard_type, micro_batch, part=0):
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
        The part of the micro-batch that rank ``part`` of a DP group of several ranks
        computes (each part draws its own stream; 0 gives the stream of the whole).

    Returns
    -------
    int
        In ``[0, 2**63)``, a pure function of the integers (BLAKE2b of their 64-bit
        encodings), so neighbouring identities give unrelated streams.
    """
    digest = hashlib.blake2b(digest_size=8, person=b"spare-mb-rng")
    for value in (seed, step, shard_type, micro_batch) + ((part,) if part else ()):
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
def micro_batch_rng(seed, step, shard_type, micro_batch, part=0):
    """Run the block with torch's default generators seeded for this micro-batch, restored afterwards.

    ``torch.random.fork_rng`` over the CPU generator (and the current CUDA device's,
    when CUDA is in use), then each of those generators seeded with
    ``micro_batch_seed(...)`` (what ``torch.manual_seed`` does to them): dropout and
    every other draw from the default generators inside the block depend only on
    ``(seed, step, shard_type, micro_batch, part)``, and the draws outside it are not shifted
    by it.  Python's ``random`` and NumPy's global state are not touched.

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
        value = micro_batch_seed(seed, step, shard_type, micro_batch, part)
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
    """

    def state_dict(self):
        import random

        state = {"torch": torch.get_rng_state(), "python": random.getstate()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
        try:
            import numpy
        except ImportError:  # pragma: no cover - numpy is a core dependency
            pass
        else:
            state["numpy"] = numpy.random.get_state()
        return state

    def load_state_dict(self, state):
        import random

        torch.set_rng_state(state["torch"])
        random.setstate(state["python"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])
        if "numpy" in state:
            import numpy

            numpy.random.set_state(state["numpy"])

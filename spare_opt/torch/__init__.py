"""Run SPARe in a PyTorch job: a sampler, a step helper, failure agreement and group rebuild.

An optional part of spare-opt (``import spare_opt`` never imports torch).  Install the
CPU build of PyTorch first, then the extra::

    pip install torch==2.13.0
    pip install "spare-opt[torch]"

* :class:`SpareGroup` - one DP group's membership: heartbeats on torch's ``TCPStore``,
  an abort flag, one agreed failed set per epoch, rebuild of the process group;
* :class:`SpareBatchSampler` - a ``torch.utils.data`` batch sampler that yields this
  rank's micro-batches of every step under the current plan;
* DP groups that are whole model replicas: ``SpareGroup(mesh=...)`` takes the group's
  ranks as a device mesh (``pp``, ``dp_shard``, ``tp``, as torchtitan builds one replica)
  and ``SpareStep(stages=..., schedule=...)`` runs each step's micro-batches through a
  ``torch.distributed.pipelining`` schedule;
* :class:`SpareStep` - the step helper: accumulates this rank's micro-batch gradients,
  all-reduces a SUM over the live ranks and divides by ``N m``; on a failure it computes
  only the patch micro-batches; a ``before_step`` hook sees the global gradient, extra
  ``state`` (schedulers, :class:`RandomState`) heals and checkpoints with the model, a
  consistency check raises :class:`ReplicaDivergence`, and every micro-batch draws its
  random numbers from its own stream (:func:`micro_batch_rng`);
* :class:`Supervisor` - spawns the ranks, hosts the store, reports deaths, restarts
  after a wipe-out (what ``torchrun``'s agent does, for tests and examples);
* :func:`recovery_phases` - the phases of each recovery (detection, agreement, plan,
  rebuild, patch), from the survivors' timelines;
* :mod:`spare_opt.torch.launchers` and ``python -m spare_opt.torch.store`` - one
  ``torchrun``, ``srun`` step or pod per DP group: the worker's configuration from the
  environment, :func:`post_death`, exit codes, the end-of-job marker and the wipe-out
  restart (see ``docs/launch.md``);
* :class:`TorchFTPlan` - the plan of each TorchFT quorum, so a dead replica group no
  longer shrinks the batch (needs ``torchft``; see ``docs/torchft.md``).

Where each part lives:

* the group and its agreement: ``elastic`` (:class:`SpareGroup`, the errors,
  :func:`post_death`) and ``_plans`` (:class:`PlanBook`, the fingerprints);
* the step and the sampler: ``step`` (:class:`SpareStep`, the step and the recovery,
  with its roles ``_checkpoints``: the state, checkpoints and the resume;
  ``_consistency``: the replica-consistency check; ``_tensors``: sharded tensors and the
  norm over a group; ``_pipeline``: the schedules of a pipeline inside a group), the
  shape of a group (``_group_mesh``),
  ``sampler`` and ``randomness`` (the micro-batch random streams), with ``timeline``
  (:func:`recovery_phases`);
* the launchers: ``launchers`` (the contract for ``torchrun``, SLURM and Kubernetes),
  ``store`` (the standalone store) and ``supervisor`` (:class:`Supervisor`, the
  one-machine launcher);
* the adapters: ``torchft_adapter`` (:class:`TorchFTPlan`).

Every public name is importable from ``spare_opt.torch``.  The example training jobs
that the tests and benchmarks run are ``examples/training_job.py`` and
``examples/torchft_job.py`` in the repository, not part of the package.  See
``docs/torch.md``.
"""

try:
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without torch only
    raise ImportError(
        "spare_opt.torch needs PyTorch, which is not installed: install the CPU build first "
        "(pip install torch==2.13.0), then the extra: pip install 'spare-opt[torch]'"
    ) from exc

from ._plans import PlanBook, layout_fingerprint, plan_fingerprint
from .elastic import (CheckpointMismatch, DuplicateGroup, Evicted, GroupTimeout, JobEnded, ReplicaDivergence,
                      SpareGroup, WipeOut, post_death)
from .randomness import RandomState, micro_batch_generator, micro_batch_rng, micro_batch_seed
from .sampler import SpareBatchSampler, global_batch_indices
from .step import SpareStep
from .supervisor import EVICTED_EXIT, LAYOUT_EXIT, WIPE_OUT_EXIT, Supervisor, WorkerContext
from .timeline import RECOVERY_PHASES, recovery_phases
from .torchft_adapter import (LocalMicroBatch, NoQuorumError, TorchFTMissingError, TorchFTPlan, TorchFTStepError,
                              torchft_api)

__all__ = [
    "Job",
    "connect_store",
    "current_generation",
    "end_job",
    "generation_store",
    "join_job",
    "new_generation",
    "run_worker",
    "serve_store",
    "CheckpointMismatch",
    "DuplicateGroup",
    "EVICTED_EXIT",
    "Evicted",
    "GroupTimeout",
    "JobEnded",
    "LAYOUT_EXIT",
    "LocalMicroBatch",
    "NoQuorumError",
    "PlanBook",
    "RECOVERY_PHASES",
    "RandomState",
    "ReplicaDivergence",
    "SpareBatchSampler",
    "SpareGroup",
    "SpareStep",
    "StoreUnreachable",
    "Supervisor",
    "TorchFTMissingError",
    "TorchFTPlan",
    "TorchFTStepError",
    "WIPE_OUT_EXIT",
    "WipeOut",
    "WorkerContext",
    "global_batch_indices",
    "layout_fingerprint",
    "micro_batch_generator",
    "micro_batch_rng",
    "micro_batch_seed",
    "plan_fingerprint",
    "post_death",
    "recovery_phases",
    "torchft_api",
]

# Imported on first use, not here: ``python -m spare_opt.torch.store`` and
# ``python -m spare_opt.torch.launchers`` run these modules as ``__main__``, and an import
# by the package first would load them twice.
_LAZY = {"Job": "launchers", "connect_store": "launchers", "current_generation": "launchers", "end_job": "launchers",
         "generation_store": "launchers", "join_job": "launchers", "new_generation": "launchers",
         "run_worker": "launchers", "serve_store": "store", "StoreUnreachable": "launchers"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

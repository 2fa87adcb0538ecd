"""Sharded tensors in the step helper: FSDP2's and tensor parallelism's ``DTensor`` parameters, gradients and state.

The step helper works on each rank's local shards; a state that travels (a heal) or is
saved (a per-rank checkpoint) holds every ``DTensor`` as its local shard and what
rebuilds it on a rank of the same position in another DP group.
"""

import collections

import torch

import spare_opt

def _is_dtensor(tensor):
    return type(tensor).__name__ == "DTensor" and hasattr(tensor, "to_local")


def _local(tensor):
    """This rank's shard of a sharded tensor (FSDP2's ``DTensor`` parameters, gradients and optimizer state); the tensor itself otherwise."""
    return tensor.to_local() if _is_dtensor(tensor) else tensor


class _Shard(collections.namedtuple("_Shard", "local shape stride placements")):
    """A ``DTensor`` in a state sent or saved: its local shard and what rebuilds it on a rank of the same position."""


def _portable(value):
    """``value`` (a nested state) with every ``DTensor`` replaced by its local :class:`_Shard` (picklable alone)."""
    if _is_dtensor(value):
        return _Shard(value.to_local().detach().clone(), tuple(value.shape), tuple(value.stride()),
                      tuple(value.placements))
    if isinstance(value, dict):
        return type(value)((k, _portable(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_portable(v) for v in value)
    return value


def _from_portable(value, mesh):
    """The inverse of :func:`_portable` on a rank whose sharded tensors live on ``mesh``."""
    if isinstance(value, _Shard):
        from torch.distributed.tensor import DTensor

        return DTensor.from_local(value.local, mesh, value.placements, run_check=False, shape=torch.Size(value.shape),
                                  stride=value.stride)
    if isinstance(value, dict):
        return type(value)((k, _from_portable(v, mesh)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_from_portable(v, mesh) for v in value)
    return value


def _reshard(model):
    """Put every FSDP2 module of ``model`` back in its sharded state (its registered parameters the sharded
    ``DTensor`` ones, which the optimizer updates), whatever a forward without backward left gathered; no
    collective, and a no-op for a model without FSDP2."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch without FSDP2
        return
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def _check_optimizer(model, optimizer):
    """Refuse an optimizer that holds parameters the model does not (built before ``fully_shard`` replaced them)."""
    owned = {id(p) for p in model.parameters()}
    foreign = sum(1 for g in optimizer.param_groups for p in g["params"] if id(p) not in owned)
    if foreign:
        raise spare_opt.ParameterError(
            f"the optimizer holds {foreign} parameter(s) that are not the model's, so its steps would not change "
            "the model: build the optimizer after fully_shard (which replaces the parameters with sharded ones) "
            "or any other wrapping")


def _check_group_model(group, model):
    """Refuse a model whose gradients the DP group cannot reduce exactly (FSDP1, partly sharded, sharded over other ranks)."""
    meshes = {p.device_mesh.size() for p in model.parameters() if _is_dtensor(p)}
    if meshes and meshes != {group.group_world_size}:
        raise spare_opt.ParameterError(
            f"the model is sharded over {max(meshes)} ranks (FSDP2) but the SpareGroup has "
            f"{group.group_world_size}: pass the DP group's process group as SpareGroup(group_process_group=...)")
    if group.group_world_size == 1:
        return
    if type(model).__name__ == "FullyShardedDataParallel":
        raise spare_opt.ParameterError(
            "a DP group of several ranks takes a model sharded with FSDP2 (fully_shard) or a replicated one, not "
            "FSDP1's FullyShardedDataParallel (its flat shards cannot be told from replicated parameters)")
    sharded = [_is_dtensor(p) for p in model.parameters() if p.requires_grad]
    if any(sharded) and not all(sharded):
        raise spare_opt.ParameterError(
            f"{sharded.count(False)} of the model's {len(sharded)} trainable parameters are not sharded: apply "
            "fully_shard to the root module too, so that every gradient is reduced inside the DP group")

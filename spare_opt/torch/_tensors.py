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


class _Shard(collections.namedtuple("_Shard", "local shape stride placements mesh_dims", defaults=(None,))):
    """A ``DTensor`` in a state sent or saved: its local shard and what rebuilds it on a rank of the same position.

    ``mesh_dims``: the names of its mesh's dimensions (``None``: an unnamed mesh, or a
    state written before they were recorded), by which the receiver finds its own mesh.
    The form of 0.7's checkpoints (still read); states are now written as plain dicts
    (:func:`_portable`).
    """


#: The key that marks a ``DTensor`` in a portable state: a dict of plain types and one tensor, which
#: ``torch.load``'s defaults (``weights_only=True``) read, unlike a class of our own or torch's placements.
_SHARD_KEY = "__spare_dtensor__"


def _placement_code(placement):
    """A ``DTensor`` placement as plain types: ``["shard", dim]``, ``["strided", dim, split]``, ``["replicate"]``,
    ``["partial", reduce_op]``."""
    from torch.distributed.tensor.placement_types import Partial, Replicate, Shard, _StridedShard

    if isinstance(placement, _StridedShard):
        return ["strided", int(placement.dim), int(placement.split_factor)]
    if isinstance(placement, Shard):
        return ["shard", int(placement.dim)]
    if isinstance(placement, Replicate):
        return ["replicate"]
    if isinstance(placement, Partial):
        return ["partial", str(placement.reduce_op)]
    raise spare_opt.ParameterError(f"a DTensor placement of an unknown kind cannot be sent or saved: {placement!r}")


def _placement(code):
    """The inverse of :func:`_placement_code`."""
    from torch.distributed.tensor.placement_types import Partial, Replicate, Shard, _StridedShard

    kind = code[0]
    if kind == "strided":
        return _StridedShard(code[1], split_factor=code[2])
    if kind == "shard":
        return Shard(code[1])
    if kind == "replicate":
        return Replicate()
    return Partial(code[1])


def _portable(value):
    """``value`` (a nested state) with every ``DTensor`` replaced by its local shard and what rebuilds it, in plain
    types (a dict marked ``_SHARD_KEY``): picklable alone, and readable by ``torch.load(..., weights_only=True)``."""
    if _is_dtensor(value):
        names = value.device_mesh.mesh_dim_names
        return {_SHARD_KEY: 1, "local": value.to_local().detach().clone(), "shape": list(value.shape),
                "stride": list(value.stride()), "placements": [_placement_code(p) for p in value.placements],
                "mesh_dims": list(names) if names else None}
    if isinstance(value, dict):
        return type(value)((k, _portable(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_portable(v) for v in value)
    return value


def _from_portable(value, mesh):
    """The inverse of :func:`_portable` on a rank whose sharded tensors live on ``mesh``.

    ``mesh``: a ``DeviceMesh`` (every sharded tensor on it), or a callable that returns
    the mesh of a tensor from its ``mesh_dims`` (a DP group's mesh and its submeshes:
    FSDP2 with tensor parallelism holds norms on ``dp_shard`` and weights on
    ``(dp_shard, tp)``).
    """
    if isinstance(value, dict) and _SHARD_KEY in value:
        value = _Shard(value["local"], tuple(value["shape"]), tuple(value["stride"]),
                       tuple(_placement(code) for code in value["placements"]),
                       tuple(value["mesh_dims"]) if value["mesh_dims"] else None)
    if isinstance(value, _Shard):  # also the form of 0.7 checkpoints
        from torch.distributed.tensor import DTensor

        where = mesh(value.mesh_dims) if callable(mesh) else mesh
        return DTensor.from_local(value.local, where, value.placements, run_check=False,
                                  shape=torch.Size(value.shape), stride=value.stride)
    if isinstance(value, dict):
        return type(value)((k, _from_portable(v, mesh)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_from_portable(v, mesh) for v in value)
    return value


def _meshes_of(parameters, group_mesh=None):
    """A function ``names -> DeviceMesh`` for :func:`_from_portable`: the meshes of ``parameters`` by their
    dimension names, else the DP group's submesh of those names; the only mesh when a name is missing."""
    known = {}
    for p in parameters:
        if _is_dtensor(p):
            names = p.device_mesh.mesh_dim_names
            known.setdefault(tuple(names) if names else None, p.device_mesh)

    def find(names):
        names = tuple(names) if names else None
        if names in known:
            return known[names]
        found = group_mesh.submesh(names) if group_mesh is not None and names else None
        if found is not None:
            return found
        if len(known) == 1:  # a state written before the names were recorded: one mesh only
            return next(iter(known.values()))
        raise spare_opt.ParameterError(
            f"a sharded tensor of the state lives on a mesh of dimensions {names}, which this rank's model does not "
            f"have (its meshes: {sorted(map(str, known))}): the state was written by a model sharded otherwise")

    return find


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
    shape = getattr(group, "group_mesh", None)
    if shape is not None and shape.dims:
        _check_mesh_model(shape, model)
        return
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


def _check_mesh_model(shape, model):
    """Refuse a model that does not live on the DP group's mesh (``GroupMesh`` ``shape``): sharded tensors on
    meshes of other dimensions, or parameters that FSDP2 does not shard over ``dp_shard``."""
    if type(model).__name__ == "FullyShardedDataParallel":
        raise spare_opt.ParameterError("a DP group given as a mesh takes a model sharded with FSDP2 (fully_shard), "
                                       "not FSDP1's FullyShardedDataParallel")
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    for name, p in trainable:
        if _is_dtensor(p):
            names = p.device_mesh.mesh_dim_names
            if not names or not set(names) <= set(shape.dims):
                raise spare_opt.ParameterError(
                    f"parameter {name} is sharded over a mesh of dimensions {names}, not over the DP group's mesh "
                    f"({shape.description}): shard the model over the group's submeshes (mesh['tp'], "
                    "mesh['dp_shard'])")
    if shape.dims.get("dp_shard", 1) > 1:
        unsharded = [name for name, p in trainable
                     if not _is_dtensor(p) or "dp_shard" not in (p.device_mesh.mesh_dim_names or ())]
        if unsharded:
            raise spare_opt.ParameterError(
                f"{len(unsharded)} of the model's {len(trainable)} trainable parameters (first: {unsharded[0]}) are "
                "not sharded over the mesh's 'dp_shard' dimension: apply fully_shard(..., mesh=mesh['dp_shard']) to "
                "every block and to the root module, so that every gradient is reduced among the ranks that split "
                "the samples")


def _group_grad_norm(parameters, group, norm_type=2.0):
    """The norm of the gradients of ``parameters`` over the whole DP group (every rank of ``group``), a float64 tensor.

    Each rank adds ``|g|^p`` of its local shard of every gradient, divided by the number
    of the group's ranks that hold that shard alike (:meth:`GroupMesh.replication`:
    tensor-parallel rows hold norms and embeddings whole), and one all-reduce (SUM; MAX
    for the infinity norm) over the group's process group gives the norm of the whole
    model's gradient, as torchtitan's ``clip_grad_norm_`` does with a reduction over
    the ``tp`` and ``pp`` ranks.  The same bits on every rank of the group, and on every
    group (the same gradients, the same order).
    """
    shape = group.group_mesh
    p = float(norm_type)
    infinite = p == float("inf")
    total = torch.zeros((), dtype=torch.float64)
    for param in parameters:
        if param.grad is None:
            continue
        local = _local(param.grad).detach()
        if not local.numel():
            continue
        if infinite:
            total = torch.maximum(total, local.abs().max().to(torch.float64))
        else:
            norm = torch.linalg.vector_norm(local, p, dtype=torch.float64)
            total = total + norm ** p / shape.replication(param.grad)
    if shape.size > 1:
        total = total.reshape(1)
        group.all_reduce_in_group(total, op="max" if infinite else "sum")
        total = total.reshape(())
    return total if infinite else total ** (1.0 / p)

"""The shape of one DP group: its ranks as a device mesh of pipeline, FSDP2 and tensor parallelism.

A DP group of SPARe is a whole model replica.  Its ``K`` ranks form a mesh with named
dimensions, as torchtitan builds it inside a replica (``init_device_mesh`` over the
group's ranks):

* ``pp``: the stages of one pipeline (each rank holds some layers);
* ``dp_shard``: FSDP2 inside the group (each rank holds a shard of every parameter and
  takes its own part of every micro-batch);
* ``tp``: tensor parallelism (each rank holds a slice of some weights; the ranks of one
  ``tp`` row see the same samples).

Across DP groups, the ranks of the same mesh position hold the same part of the model:
SPARe's gradient SUM, the heal of a repaired group, the consistency check and the
per-rank checkpoints pair them.  :class:`GroupMesh` answers what the step helper and the
sampler need of that shape: which part of a micro-batch a rank takes, which pipeline
stage it runs, how its loss counts in the step's mean, and over how many ranks of the
group each of its tensors is replicated (for a norm over the whole group).  A DP group
given as a bare process group of ``K`` ranks (FSDP2 over all of them, or a replicated
model) is the mesh of one unnamed dimension whose ranks split the samples.
"""

import math

import torch.distributed as dist

import spare_opt

__all__ = ["GroupMesh", "MESH_DIMENSIONS"]

#: The dimensions a DP group's mesh may have, and what each does to the samples.
MESH_DIMENSIONS = {
    "pp": "pipeline stages: every stage reads the same micro-batches (the first uses the inputs, the last the targets)",
    "dp_shard": "FSDP2 inside the group: each rank takes its own part of every micro-batch",
    "tp": "tensor parallelism: the ranks of a row see the same samples",
}
#: Names torchtitan gives to dimensions that a SPARe DP group does not have, with the reason.
_REFUSED = {
    "dp_replicate": "SPARe itself is the replicate dimension (the DP groups): build the mesh of one DP group only",
    "dp": "SPARe itself is the data-parallel dimension between DP groups: name FSDP2's dimension 'dp_shard'",
    "cp": "context parallelism inside a DP group is not supported (its ranks split each sample's sequence)",
}


class GroupMesh:
    """The ranks of one DP group and their roles, read from a ``DeviceMesh`` or a process group.

    Parameters
    ----------
    mesh : torch.distributed.device_mesh.DeviceMesh or None
        The DP group's mesh, with dimension names from :data:`MESH_DIMENSIONS` (each at
        most once, in any order), over exactly the ranks of ``process_group``.
        ``None``: the group is ``process_group``'s ranks, which split the samples (FSDP2
        over all of them, or a replicated model), or one process.
    process_group : torch.distributed.ProcessGroup or None
        The process group of the DP group's own ranks (``None``: one process; with a
        mesh, the default process group).

    Attributes
    ----------
    rank, size : int
        This rank's position ``k`` in the group (its rank in ``process_group``) and the
        group's number of ranks ``K``.
    dims : dict of str to int
        Every named dimension's size (empty without a mesh).
    coordinate : dict of str to int
        This rank's coordinate along each named dimension.
    data_part, data_parts : int
        The part of every micro-batch this rank takes, and into how many parts a
        micro-batch is split (``dp_shard``; without a mesh, the group's ``K`` ranks).
    stage, stages : int
        This rank's pipeline stage (its ``pp`` coordinate) and the number of stages
        (0 and 1 without ``pp``).
    description : str
        The shape as one word (``"pp2.tp2"``; ``"ranks4"`` without a mesh), the same on
        every group that may pair with this one.

    Raises
    ------
    spare_opt.ParameterTypeError
        ``mesh`` is not a ``DeviceMesh``.
    spare_opt.ParameterError
        A dimension has no name, an unknown name or a name twice; the mesh does not
        cover exactly the ranks of ``process_group``.
    """

    def __init__(self, mesh=None, process_group=None):
        self.mesh = mesh
        self.process_group = process_group
        if mesh is not None:
            self._check_mesh(mesh)
            if self.process_group is None:
                self.process_group = dist.group.WORLD
        if self.process_group is None:
            self.rank, self.size = 0, 1
        else:
            self.rank = dist.get_rank(self.process_group)
            self.size = dist.get_world_size(self.process_group)
        if mesh is None:
            self.dims, self.coordinate = {}, {}
            self.data_part, self.data_parts = self.rank, self.size
            self.stage, self.stages = 0, 1
            self.description = f"ranks{self.size}"
            return
        names = mesh.mesh_dim_names
        self.dims = dict(zip(names, mesh.mesh.shape))
        self.coordinate = dict(zip(names, mesh.get_coordinate()))
        ranks = sorted(int(r) for r in mesh.mesh.flatten().tolist())
        members = sorted(dist.get_process_group_ranks(self.process_group))
        if ranks != members:
            raise spare_opt.ParameterError(
                f"the DP group's mesh covers ranks {ranks} but its process group has ranks {members}: build the mesh "
                "over the DP group's own ranks (init_device_mesh under one torchrun per DP group)")
        self.data_part, self.data_parts = self.coordinate.get("dp_shard", 0), self.dims.get("dp_shard", 1)
        self.stage, self.stages = self.coordinate.get("pp", 0), self.dims.get("pp", 1)
        self.description = ".".join(f"{name}{size}" for name, size in self.dims.items())

    @staticmethod
    def _check_mesh(mesh):
        if not (hasattr(mesh, "mesh_dim_names") and hasattr(mesh, "get_coordinate") and hasattr(mesh, "mesh")):
            raise spare_opt.ParameterTypeError(
                f"mesh must be a torch.distributed.device_mesh.DeviceMesh, got {type(mesh).__name__}")
        names = mesh.mesh_dim_names
        if not names or any(name is None for name in names):
            raise spare_opt.ParameterError(
                "the DP group's mesh needs named dimensions (init_device_mesh(..., mesh_dim_names=(...))) from "
                f"{sorted(MESH_DIMENSIONS)}")
        for name in names:
            if name in _REFUSED:
                raise spare_opt.ParameterError(f"the DP group's mesh has a dimension {name!r}: {_REFUSED[name]}")
            if name not in MESH_DIMENSIONS:
                raise spare_opt.ParameterError(
                    f"the DP group's mesh has a dimension {name!r}; a DP group's dimensions are "
                    f"{', '.join(repr(n) for n in MESH_DIMENSIONS)}")
        if len(set(names)) != len(names):
            raise spare_opt.ParameterError(f"the DP group's mesh names a dimension twice: {names}")
        if mesh.get_coordinate() is None:
            raise spare_opt.ParameterError("this rank is not part of the DP group's mesh")

    # ------------------------------------------------------------ roles
    @property
    def is_last_stage(self):
        """bool: this rank runs the last pipeline stage (it computes the loss)."""
        return self.stage == self.stages - 1

    @property
    def loss_share(self):
        """float: the weight of this rank's mean micro-batch loss in its DP group's mean loss.

        The ranks that compute a loss are those of the last pipeline stage; their
        ``tp`` rows compute the same one, and their ``dp_shard`` parts split the samples,
        so each counts ``1 / (dp_shard * tp)``; a group without a mesh counts each of its
        ``K`` ranks' parts ``1 / K``; a rank of an earlier stage counts 0.
        """
        if not self.dims:
            return 1.0 / self.size
        if not self.is_last_stage:
            return 0.0
        return 1.0 / (self.dims.get("dp_shard", 1) * self.dims.get("tp", 1))

    def replication(self, tensor):
        """Over how many ranks of the group ``tensor`` (a parameter or its gradient) is held alike.

        A ``DTensor`` is replicated along every group dimension but ``pp`` that its mesh
        does not have or on which its placement is ``Replicate``; a plain tensor along
        every group dimension but ``pp`` (tensor parallelism leaves norms and embeddings
        whole on every rank of a row; a model without FSDP2 is whole on every rank of a
        group without a mesh).  A norm over the group counts each such tensor once:
        every holder adds its part divided by this number.

        Raises
        ------
        spare_opt.ParameterError
            A ``Partial`` placement (an unreduced tensor has no norm yet).
        """
        if not self.dims:
            return 1 if _is_sharded(tensor) else self.size
        replicated = {name: size for name, size in self.dims.items() if name != "pp"}
        if _is_sharded(tensor):
            for name, placement in zip(tensor.device_mesh.mesh_dim_names or (), tensor.placements):
                if placement.is_partial():
                    raise spare_opt.ParameterError(
                        f"a gradient is Partial along {name!r}: reduce it before its norm is taken")
                if not placement.is_replicate():
                    replicated.pop(name, None)
        return math.prod(replicated.values())

    def submesh(self, names):
        """The mesh of the dimensions ``names`` (a tuple; ``None``: an unnamed mesh) on this rank, or ``None``.

        Sharded tensors sent by the same position of another group are rebuilt on it.
        """
        if self.mesh is None or not names:
            return None
        names = tuple(names)
        if names == tuple(self.mesh.mesh_dim_names):
            return self.mesh
        try:
            return self.mesh[names if len(names) > 1 else names[0]]
        except (KeyError, RuntimeError, ValueError):
            return None


def _is_sharded(tensor):
    return type(tensor).__name__ == "DTensor" and hasattr(tensor, "device_mesh")

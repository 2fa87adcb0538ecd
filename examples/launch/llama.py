"""A SPARe worker whose DP groups are whole model replicas: pipeline, tensor and FSDP2 parallelism inside each group.

One ``torchrun --nproc-per-node K`` per DP group (``K = pp * dp_shard * tp``), as in
docs/launch.md ("Groups with tensor and pipeline parallelism")::

    python -m spare_opt.torch.store --port 29600 &
    for g in 0 1 2; do
        SPARE_STORE=127.0.0.1:29600 SPARE_GROUP=$g python -m torch.distributed.run --standalone \\
            --nproc-per-node 4 --max-restarts 3 examples/launch/llama.py --pp 2 --tp 2 --out runs/llama &
    done
    wait

Each group builds its mesh the way torchtitan builds a model replica (``init_device_mesh``
over the group's ranks, dimensions ``pp``, ``dp_shard``, ``tp``), a small Llama-style
model (RMSNorm, rotary attention, SwiGLU) split into pipeline stages by layers, tensor
parallelism on attention and MLP, FSDP2 over ``dp_shard``, AdamW, clipping by the global
norm, a warmup + cosine schedule and dropout, and trains it with :class:`SpareStep` on a
circulant layout (or the recommendation file of ``spare-opt compare -o``: ``--layout``).
Every rank writes its final local parameters to ``OUT/g{group}.r{rank}.pt``.
"""

import argparse
import copy
import datetime
import math
import os
import sys
import types

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh

import spare_opt
from spare_opt.torch import RandomState, SpareBatchSampler, SpareGroup, SpareStep, plan_fingerprint
from spare_opt.torch.launchers import end_job, join_job, run_worker


# ------------------------------------------------------------------ the model
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x, cos, sin):
    """Rotary position embedding of ``x`` (batch, sequence, heads, head_dim): pairs of features turned by angles."""
    even, odd = x[..., 0::2], x[..., 1::2]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.head_dim = dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin):
        batch, length, _ = x.shape
        # -1 heads: a tensor-parallel rank holds heads / tp of them
        q = self.wq(x).view(batch, length, -1, self.head_dim)
        k = self.wk(x).view(batch, length, -1, self.head_dim)
        v = self.wv(x).view(batch, length, -1, self.head_dim)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(batch, length, -1))


class FeedForward(nn.Module):
    """SwiGLU."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden, dropout):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, hidden)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, cos, sin):
        x = x + self.dropout(self.attention(self.attention_norm(x), cos, sin))
        return x + self.dropout(self.feed_forward(self.ffn_norm(x)))


class Llama(nn.Module):
    """Token embedding, blocks, a final norm and the output projection; a pipeline stage keeps some of them."""

    def __init__(self, vocab=64, dim=32, heads=4, hidden=64, layers=4, length=16, dropout=0.1):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleDict({str(i): Block(dim, heads, hidden, dropout) for i in range(layers)})
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        head_dim = dim // heads
        angles = torch.outer(torch.arange(length, dtype=torch.float64),
                             1.0 / 10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens) if self.tok_embeddings is not None else tokens
        cos, sin = self.cos[:h.shape[1]], self.sin[:h.shape[1]]
        for layer in self.layers.values():
            h = layer(h, cos, sin)
        h = self.norm(h) if self.norm is not None else h
        return self.output(h) if self.output is not None else h


def pipeline_stage(model, stage, stages):
    """Keep the layers of ``stage`` (of ``stages``, split by layers): the first keeps the embedding, the last the
    norm and the output (as torchtitan's ``pipeline_module_split`` does)."""
    names = list(model.layers)
    per = len(names) // stages
    for name in names[:stage * per] + names[(stage + 1) * per:]:
        del model.layers[name]
    if stage > 0:
        model.tok_embeddings = None
    if stage < stages - 1:
        model.norm = model.output = None
    return model


def parallelize(model, mesh):
    """Tensor parallelism on attention and MLP (``tp``), then FSDP2 over ``dp_shard``, as torchtitan applies them."""
    names = mesh.mesh_dim_names
    if "tp" in names:
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        plan = {"attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
                "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel(),
                "feed_forward.w1": ColwiseParallel(), "feed_forward.w2": RowwiseParallel(),
                "feed_forward.w3": ColwiseParallel()}
        for block in model.layers.values():
            parallelize_module(block, mesh["tp"], plan)
    if "dp_shard" in names:
        from torch.distributed.fsdp import fully_shard

        for block in model.layers.values():
            fully_shard(block, mesh=mesh["dp_shard"])
        fully_shard(model, mesh=mesh["dp_shard"])
    return model


def lm_loss(logits, targets):
    """The mean cross-entropy of next-token prediction over a micro-batch (the pipeline schedule's loss)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def token_dataset(samples=512, length=16, vocab=64, seed=0):
    """``(inputs, targets)`` pairs of a fixed random token stream: every group reads the same data."""
    tokens = torch.randint(0, vocab, (samples, length + 1), generator=torch.Generator().manual_seed(seed))
    return torch.utils.data.TensorDataset(tokens[:, :-1], tokens[:, 1:])


def warmup_cosine(optimizer, warmup, steps):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, steps - warmup))))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


# ------------------------------------------------------------------ the worker
def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=3, help="N, DP groups (default 3)")
    parser.add_argument("--redundancy", type=int, default=2, help="r, shard types per group (default 2)")
    parser.add_argument("--layout", help="a layout or recommendation file (spare-opt compare -o) instead of "
                                         "--groups/--redundancy")
    parser.add_argument("--micro-batches", type=int, default=None,
                        help="m (default: the layout file's recommended m, else 1)")
    parser.add_argument("--pp", type=int, default=1, help="pipeline stages per DP group")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks per stage")
    parser.add_argument("--dp-shard", type=int, default=1, help="FSDP2 ranks per stage (each takes a part of every "
                                                                "micro-batch)")
    parser.add_argument("--schedule", default="1F1B", help="pipeline schedule (GPipe, 1F1B, Interleaved1F1B)")
    parser.add_argument("--stages-per-rank", type=int, default=1, help="stages per pipeline rank (2 with "
                                                                       "Interleaved1F1B)")
    parser.add_argument("--layers", type=int, default=4, help="transformer blocks (a multiple of the stages)")
    parser.add_argument("--dim", type=int, default=32, help="model width (4 heads, an MLP of twice the width)")
    parser.add_argument("--micro-batch-size", type=int, default=2, help="samples per micro-batch")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="folder of the checkpoint and the result files")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints (0: only the "
                                                                        "final one)")
    parser.add_argument("--timeout", type=float, default=60.0, help="SpareGroup's timeout (seconds)")
    parser.add_argument("--heartbeat-timeout", type=float, default=2.0,
                        help="seconds without a heartbeat after which a rank counts as dead (SpareGroup's)")
    return parser.parse_args(argv)


def build(args, job):
    """This rank's part of the job: the DP group's mesh and process group, its SpareGroup, the model part(s) and
    pipeline stages, the optimizer, the schedule, the data and the loss."""
    # The DP group's own ranks, on the job's store (fresh keys for every start of the group).
    dist.init_process_group("gloo", store=job.group_store, rank=job.group_rank, world_size=job.group_world_size,
                            timeout=datetime.timedelta(seconds=args.timeout))
    dims = {name: size for name, size in (("pp", args.pp), ("dp_shard", args.dp_shard), ("tp", args.tp)) if size > 1}
    mesh = init_device_mesh("cpu", tuple(dims.values()) or (1,), mesh_dim_names=tuple(dims) or ("tp",))
    layout = spare_opt.Layout.load(args.layout) if args.layout else spare_opt.consecutive(args.groups, args.redundancy)
    group = SpareGroup(layout, job.group, job.store, micro_batches=args.micro_batches, rejoin=job.rejoin,
                       mesh=mesh, timeout=args.timeout, heartbeat_timeout=args.heartbeat_timeout)

    torch.manual_seed(args.seed)  # the same initial weights in every group
    model = Llama(dim=args.dim, hidden=2 * args.dim, layers=args.layers)
    stages = None
    if args.pp > 1:
        from torch.distributed.pipelining import PipelineStage

        pp_rank, count = mesh["pp"].get_local_rank(), args.pp * args.stages_per_rank
        indices = [pp_rank + v * args.pp for v in range(args.stages_per_rank)]  # looped, as torchtitan numbers them
        parts = [parallelize(pipeline_stage(copy.deepcopy(model), i, count), mesh) for i in indices]
        stages = [PipelineStage(part, i, count, torch.device("cpu"), group=mesh["pp"].get_group())
                  for part, i in zip(parts, indices)]
        model = parts if len(parts) > 1 else parts[0]
        loss = lm_loss  # the schedule's loss: (output, target)
    else:
        model = parallelize(model, mesh)

        def loss(model, batch):
            inputs, targets = batch
            return lm_loss(model(inputs), targets)

    params = [p for part in (model if isinstance(model, list) else [model]) for p in part.parameters()]
    optimizer = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.01)  # after fully_shard: its parameters
    scheduler = warmup_cosine(optimizer, warmup=3, steps=args.steps)
    dataset = token_dataset(seed=args.seed)
    # B: a multiple of N m (SPARe's micro-batches) times the ranks that split every micro-batch (dp_shard)
    global_batch = group.groups * group.micro_batches * args.micro_batch_size * args.dp_shard
    sampler = SpareBatchSampler(group, len(dataset), global_batch, steps=args.steps, seed=args.seed)
    return types.SimpleNamespace(mesh=mesh, group=group, model=model, stages=stages, params=params,
                                 optimizer=optimizer, scheduler=scheduler, dataset=dataset, sampler=sampler, loss=loss)


def spare_step(args, run):
    """The step helper: the pipeline's stages and schedule, clipping by the global norm, the state that heals and
    checkpoints with the model."""
    return SpareStep(run.group, run.model, run.optimizer, run.loss, run.sampler, run.dataset,
                     stages=run.stages, schedule=args.schedule,
                     before_step=lambda s: s.clip_grad_norm_(1.0),
                     state={"scheduler": run.scheduler, "rng": RandomState()},
                     checkpoint=os.path.join(args.out, "checkpoint.pt"), checkpoint_every=args.checkpoint_every)


def save_result(args, job, run):
    """Every rank's final local parameters (its shards and stage), with what the group went through."""
    group = run.group
    result = {"params": [p.detach().to_local().clone() if hasattr(p, "to_local") else p.detach().clone()
                         for p in run.params],
              "members": group.members, "generation": job.generation, "rejoined": group.joined_late,
              "fingerprint": plan_fingerprint(group.plan), "timeline": group.timeline}
    path = os.path.join(args.out, f"g{job.group}.r{job.group_rank}.pt")
    torch.save(result, path + ".tmp")
    os.replace(path + ".tmp", path)


def train(args):
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    job = join_job()
    run = build(args, job)
    step = spare_step(args, run)
    if job.group_rank == 0:
        print(f"group {job.group}: pid {os.getpid()}, mesh {run.group.group_mesh.description}, step {step.step}",
              file=sys.stderr, flush=True)
    while step.step < args.steps:
        step()
        run.scheduler.step()
        if job.group_rank == 0 and step.step % 5 == 0:
            print(f"group {job.group}: step {step.step}, loss {step.loss:.4f}", file=sys.stderr, flush=True)
    end_job(job.store)
    run.group.close()
    save_result(args, job, run)


if __name__ == "__main__":
    run_worker(train, parse(sys.argv[1:]))

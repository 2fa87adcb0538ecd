"""One DP group of a SPARe job, as a launcher starts it (torchrun, srun, a pod): configured from the environment.

Usage (one store, then one launcher command per DP group; see docs/launch.md)::

    python -m spare_opt.torch.store --port 29600 &
    for g in 0 1 2 3; do
        SPARE_STORE=127.0.0.1:29600 SPARE_GROUP=$g python -m torch.distributed.run --standalone \\
            --nproc-per-node 1 --max-restarts 3 examples/launch/train.py --out runs/demo &
    done
    wait

With ``--nproc-per-node K`` each DP group is ``K`` processes: their own process group
(on the job's store), the model sharded among them with FSDP2 (``fully_shard``), each
taking part ``k`` of every micro-batch, and SPARe's gradient SUM between the ranks of
the same position in each group.  The death of any rank fails its whole group
(torchrun stops the others and restarts the group as a whole, which rejoins).

Each group trains the two-layer perceptron of ``examples/training_job.py`` with
:class:`SpareStep` on a circulant layout (``N`` groups, offsets ``0..r-1``) and writes
its final parameters to ``OUT/g{group}.pt``.  :func:`spare_opt.torch.launchers.run_worker`
runs the worker again in its process after a wipe-out (the job's next generation, from
the last checkpoint), turns an eviction into exit code 76; a restarted group rejoins by
itself (the store records that its group had started), and one that comes after the
end of the job exits 0 with a message.
"""

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

import spare_opt
from spare_opt.torch import RandomState, SpareBatchSampler, SpareGroup, SpareStep, plan_fingerprint
from spare_opt.torch.launchers import end_job, join_job, run_worker

sys.path.append(str(Path(__file__).resolve().parent.parent))  # examples/: the example job
from training_job import (DEFAULTS, clip_hook, lm_loss_fn, loss_fn, make_dataset, make_model,  # noqa: E402
                          make_optimizer, make_scheduler)


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=4, help="N, DP groups (default 4)")
    parser.add_argument("--redundancy", type=int, default=2, help="r, shard types per group (default 2)")
    parser.add_argument("--micro-batches", type=int, default=1, help="m (default 1)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", choices=("mlp", "gpt"), default="mlp",
                        help="the perceptron with SGD, or the GPT-style model with AdamW, clipping, a warmup + cosine "
                             "schedule and dropout (default mlp)")
    parser.add_argument("--out", required=True, help="folder of the result files and the checkpoint")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints (0: none)")
    parser.add_argument("--step-sleep", type=float, default=0.0, help="seconds of sleep after each step")
    parser.add_argument("--heartbeat-timeout", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds that bound SpareGroup's waits (registration, agreement, admission)")
    parser.add_argument("--await-repairs", type=float, default=0.0,
                        help="before the last step but one, wait up to this many seconds until every group is live "
                             "or a repaired one asked to rejoin (so that a restarted group takes part)")
    parser.add_argument("--check-every", type=int, default=10,
                        help="steps between replica-consistency checks (SpareStep's check_every; default 10)")
    parser.add_argument("--evaluate-every", type=int, default=0,
                        help="steps between evaluations of the loss on a few samples under torch.no_grad(), before "
                             "the step (as nanoGPT's estimate_loss; 0: none)")
    parser.add_argument("--evaluate-group", type=int, default=None,
                        help="the only group that evaluates (default: every group)")
    return parser.parse_args(argv)


def config_of(args):
    """The example job's settings for these arguments (the fault-free reference uses the same)."""
    layout = spare_opt.consecutive(args.groups, args.redundancy)
    return {**DEFAULTS, "layout": layout, "micro_batches": args.micro_batches, "steps": args.steps,
            "global_batch_size": 4 * args.groups * args.micro_batches, "seed": args.seed, "model": args.model}


def evaluate(model, dataset, loss):
    """The loss of the first 8 samples, in eval mode and under ``torch.no_grad()``: with FSDP2 the root module then
    keeps its parameters gathered (no backward reshards them) until the next step."""
    model.eval()
    with torch.no_grad():
        value = float(loss(model, dataset[:8]))
    model.train()
    return value


def train(args):
    torch.set_num_threads(1)
    config = config_of(args)
    job = join_job()
    # The process a trial SIGKILLs (docs/launch.md kills it by this pid, never by a name pattern).
    who = f"group {job.group}" + (f" rank {job.group_rank}" if job.group_world_size > 1 else "")
    print(f"{who}: worker pid {os.getpid()}", flush=True)
    dataset = make_dataset(config)
    group_process_group = None
    if job.group_world_size > 1:
        # torchrun per DP group: its ranks are this group's; their process group on the
        # job's store (job.group_store: fresh keys for every start of the group).
        dist.init_process_group("gloo", store=job.group_store, rank=job.group_rank, world_size=job.group_world_size,
                                timeout=datetime.timedelta(seconds=args.timeout))
        group_process_group = dist.group.WORLD
    model, optimizer = make_model(config)
    if group_process_group is not None:
        from torch.distributed.fsdp import fully_shard

        for layer in (model.blocks if args.model == "gpt" else [l for l in model if isinstance(l, torch.nn.Linear)]):
            fully_shard(layer)
        fully_shard(model)
        optimizer = make_optimizer(model, config)  # over the sharded parameters
    group = SpareGroup(config["layout"], job.group, job.store, micro_batches=args.micro_batches,
                       heartbeat_timeout=args.heartbeat_timeout, rejoin=job.rejoin,
                       timeout=args.timeout, group_process_group=group_process_group)
    sampler = SpareBatchSampler(group, len(dataset), config["global_batch_size"], steps=args.steps, seed=args.seed)
    checkpoint = os.path.join(args.out, "checkpoint.pt") if args.checkpoint_every else None
    extra = {}
    if args.model == "gpt":
        scheduler = make_scheduler(optimizer, config)
        extra = {"before_step": clip_hook(config["max_norm"]), "state": {"scheduler": scheduler, "rng": RandomState()}}
    step = SpareStep(group, model, optimizer, lm_loss_fn if args.model == "gpt" else loss_fn, sampler, dataset,
                     checkpoint=checkpoint, checkpoint_every=args.checkpoint_every, check_every=args.check_every,
                     **extra)
    while step.step < args.steps:
        # Held before the last step but one: a request flagged in that step's all-reduce is
        # admitted when the last step begins, so the repaired group takes part in it.
        if step.step == args.steps - 2 and args.await_repairs:
            deadline = time.monotonic() + args.await_repairs
            while group.world_size < group.groups and not group.rejoin_pending() and time.monotonic() < deadline:
                time.sleep(0.01)
        if args.evaluate_every and step.step % args.evaluate_every == 0 and args.evaluate_group in (None, job.group):
            evaluate(model, dataset, lm_loss_fn if args.model == "gpt" else loss_fn)
        step()
        if args.model == "gpt":
            scheduler.step()
        if group.group == group.members[0]:
            job.store.set("progress", str(step.step))
        if args.step_sleep:
            time.sleep(args.step_sleep)
    end_job(job.store)
    params = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()]  # FSDP2: gathered
    group.close()
    if group.group_rank:
        return
    result = {"params": [p.detach().clone() for p in params], "members": group.members,
              "generation": job.generation, "rejoined": group.joined_late, "fingerprint": plan_fingerprint(group.plan),
              "timeline": group.timeline}
    path = os.path.join(args.out, f"g{job.group}.pt")
    torch.save(result, path + ".tmp")
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    run_worker(train, parse(sys.argv[1:]))

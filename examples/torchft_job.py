"""The example training job under TorchFT: a lighthouse, replica groups of one or more ranks, scripted SIGKILLs.

Not part of the package, like ``examples/training_job.py`` whose model it trains: the
tests and ``benchmarks/bench_torchft.py`` import it from here (with ``examples/`` on
``sys.path``).

:func:`torchft_worker` trains the model of ``training_job`` on one rank of one
replica group of a TorchFT job (``Manager`` + reconfigurable ``ProcessGroupGloo`` +
``OptimizerWrapper``, synchronous quorum), in one of two modes:

* ``"spare"``: :class:`TorchFTPlan` - every step, the replica computes the micro-batches
  of the quorum's plan and the gradients are summed over the quorum and divided by
  ``N m``;
* ``"plain"``: plain TorchFT - replica ``g`` always computes block ``g`` of the global
  batch (as ``torchft.data.DistributedSampler`` shards by replica group) and the
  manager averages over the live replicas, so a dead replica's block is not trained.

With ``ranks_per_group = k > 1`` a replica group is ``k`` processes: a gloo process group
of their own (the job's default group), the model sharded over it with FSDP2
(``fully_shard``, when ``fsdp``), every micro-batch split by samples among the ``k``
ranks (:meth:`TorchFTPlan.micro_batches` with ``split_by_rank=True``), and one TorchFT
``Manager`` per rank (``rank``, ``world_size=k``; the manager server on rank 0).

:func:`run_torchft_job` runs the job and returns the survivors' final parameters, to
compare with :func:`training_job.reference_run` (the fault-free run).
"""

import datetime
import json
import os
import random
import signal
import tempfile
import time

import torch
import torch.distributed as dist

import spare_opt
from spare_opt.torch import Supervisor, TorchFTPlan, global_batch_indices

from training_job import DEFAULTS, loss_fn, make_dataset, make_model

__all__ = ["TORCHFT_DEFAULTS", "run_torchft_job", "torchft_worker"]

#: Settings of the TorchFT job on top of :data:`training_job.DEFAULTS`.
TORCHFT_DEFAULTS = {
    "mode": "spare",
    "steps": 20,
    "timeout": 20.0,
    "heartbeat_interval": 0.05,
    # The lighthouse's: a replica without a heartbeat for this long is out of the next quorum.
    "heartbeat_timeout": 1.0,
    "join_timeout": 5.0,
    # {"group": g, "step": s}: every rank of replica group g SIGKILLs itself at step s, instead
    # of entering the all-reduce, 20 ms after its peers entered theirs (a death in the collective).
    "die": None,
    # Ranks per replica group, and whether they shard the model with FSDP2 (fully_shard).
    "ranks_per_group": 1,
    "fsdp": False,
    # "all": every rank of a group gets Manager(replica_id="spare_<g>"); "rank0": only rank 0
    # (TorchFT's docstring says rank 0 is enough).
    "replica_ids": "all",
    # The replica groups that run; the others end at once (as if the job had ended for them).
    "run_groups": None,
    # Report an error to the manager in every step (a step that can never commit).
    "inject_error": False,
}


def _local(value):
    """A state dict with every DTensor replaced by its local shard (what travels in a heal)."""
    from torch.distributed.tensor import DTensor

    if isinstance(value, DTensor):
        return value.to_local().detach().clone()
    if isinstance(value, dict):
        return {k: _local(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_local(v) for v in value]
    return value


def _load_local(target, source):
    """Copy ``source`` (a :func:`_local` state) into the tensors of ``target`` (a live state dict), in place."""
    from torch.distributed.tensor import DTensor

    if isinstance(target, DTensor):
        target.to_local().copy_(source)
    elif isinstance(target, torch.Tensor):
        target.copy_(source)
    elif isinstance(target, dict):
        if set(target) != set(source):
            raise RuntimeError(f"a healed state's keys {sorted(source)} differ from {sorted(target)}")
        for key in target:
            _load_local(target[key], source[key])
    elif isinstance(target, list):
        for t, s in zip(target, source):
            _load_local(t, s)


def torchft_worker(context, config):
    """A :class:`Supervisor` target: one rank of replica group ``context.group // k`` of a TorchFT job.

    Writes ``p{process}.pt`` in ``config["out"]``: the replica group, the rank, the final
    parameters (the whole tensors), the step records ``(step, committed, members, start,
    end)``, the quorums and whether the process is a repaired one (``context.rejoin``: it
    heals from a peer at its first quorum).  A ``SpareError`` in the training loop is
    written to ``p{process}.error.json`` (its type and message) and raised.
    """
    from torchft.manager import Manager
    from torchft.optim import OptimizerWrapper
    from torchft.process_group import ProcessGroupGloo

    config = {**DEFAULTS, **TORCHFT_DEFAULTS, **config}
    torch.set_num_threads(1)
    k = int(config["ranks_per_group"])
    group, rank = divmod(context.group, k)
    groups = context.groups // k
    if config["run_groups"] is not None and group not in config["run_groups"]:
        return
    running = groups if config["run_groups"] is None else len(config["run_groups"])
    store = Supervisor.connect(context)
    incarnation = int(store.add(f"incarnation/{group}/{rank}", 1))
    replica_store = None
    if rank == 0:
        replica_store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        store.set(f"replica_store/{group}/{incarnation}", str(replica_store.port))
    store.wait([f"replica_store/{group}/{incarnation}"], datetime.timedelta(seconds=config["timeout"]))
    port = int(store.get(f"replica_store/{group}/{incarnation}"))
    if k > 1:
        # The replica group's own process group (FSDP's), on the replica group's store.
        client = dist.TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False)
        dist.init_process_group("gloo", store=dist.PrefixStore("intra", client), rank=rank, world_size=k,
                                timeout=datetime.timedelta(seconds=config["timeout"]))
    dataset = make_dataset(config)
    x, y = dataset.tensors
    model, inner = make_model(config)
    if config["fsdp"]:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        fully_shard(model, mesh=init_device_mesh("cpu", (k,)))
        inner = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])
    timeout = datetime.timedelta(seconds=config["timeout"])
    spare = None
    if config["mode"] == "spare":
        spare = TorchFTPlan(config["layout"], micro_batches=config["micro_batches"], timeout=timeout,
                            group_process_group=dist.group.WORLD if k > 1 else None)
        pg = spare.process_group
    else:
        pg = ProcessGroupGloo(timeout=timeout)

    def state_dict():
        return {"model": _local(model.state_dict()), "optim": _local(inner.state_dict())}

    def load_state_dict(state):
        if config["fsdp"]:
            _load_local(model.state_dict(), state["model"])
            _load_local(inner.state_dict()["state"], state["optim"]["state"])
        else:
            model.load_state_dict(state["model"])
            inner.load_state_dict(state["optim"])

    replica_id = f"spare_{group}" if rank == 0 or config["replica_ids"] == "all" else None
    manager = Manager(
        pg=pg, load_state_dict=load_state_dict, state_dict=state_dict, min_replica_size=1,
        use_async_quorum=False, init_sync=False, timeout=timeout, quorum_timeout=timeout, connect_timeout=timeout,
        rank=rank, world_size=k, store_addr="127.0.0.1", store_port=port,
        lighthouse_addr=config["lighthouse"], replica_id=replica_id,
        heartbeat_interval=datetime.timedelta(seconds=config["heartbeat_interval"]))
    optimizer = OptimizerWrapper(manager, inner)
    # Every replica heartbeats before any asks for a quorum: the first quorum holds all N.
    store.add("ready", 1)
    deadline = time.monotonic() + config["timeout"]
    while not context.rejoin and int(store.add("ready", 0)) < running * k and time.monotonic() < deadline:
        time.sleep(0.005)
    if context.rejoin:
        store.add("rejoined", 1)
    size = config["global_batch_size"]
    records = []
    try:
        while manager.current_step() < config["steps"]:
            # Likewise a repaired replica heartbeats before the next quorum is asked for, so
            # that it joins it: its manager starts in 0.2 s to seconds (a loaded machine), in
            # which the live replicas could finish the job without it (bounded: join_timeout).
            waited = time.monotonic() + config["join_timeout"]
            while int(store.add("rejoined", 0)) < int(store.add("repairs", 0)) and time.monotonic() < waited:
                time.sleep(0.005)
            start = time.time()
            optimizer.zero_grad()  # start_quorum(): the quorum of this step (and the plan)
            step = manager.current_step()
            index = global_batch_indices(len(dataset), size, step, seed=config["seed"])
            die = config["die"]
            dying = die is not None and die["group"] == group and die["step"] == step
            if spare is not None:
                for micro in spare.micro_batches(index, step, split_by_rank=k > 1):
                    loss_fn(model, (x[micro.samples], y[micro.samples])).backward()
                if dying:
                    _die()
                if config["inject_error"]:
                    manager.report_error(RuntimeError(f"an error injected in step {step}"))
                spare.reduce_gradients(manager, model.parameters())
                members = list(spare.members)
            else:
                block = index[group * size // groups:(group + 1) * size // groups]
                part = block[rank * len(block) // k:(rank + 1) * len(block) // k]
                loss_fn(model, (x[part], y[part])).backward()
                if dying:
                    _die()
                # TorchFT's default: SUM / live replicas (of the local shards, under FSDP2).
                grads = [p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad for p in model.parameters()]
                flat = torch.cat([g.reshape(-1) for g in grads])
                manager.allreduce(flat).wait()
                offset = 0
                for g in grads:
                    g.copy_(flat[offset:offset + g.numel()].view_as(g))
                    offset += g.numel()
                members = [-1] * manager.num_participants()
            optimizer.step()  # should_commit(): the optimizer steps only if every replica succeeded
            committed = manager.current_step() > step
            records.append((step, committed, members, start, time.time()))
            if committed:
                store.set("progress", str(manager.current_step()))
            if config["step_sleep"]:
                time.sleep(config["step_sleep"])
    except spare_opt.SpareError as exc:
        path = os.path.join(config["out"], f"p{context.group}.error.json")
        with open(path + ".tmp", "w") as handle:
            json.dump({"group": group, "rank": rank, "type": type(exc).__name__, "message": str(exc)}, handle)
        os.replace(path + ".tmp", path)
        raise
    params = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()]
    result = {"group": group, "rank": rank, "params": [p.detach().clone() for p in params], "records": records,
              "quorums": list(spare.quorums) if spare is not None else [],
              "fingerprint": str(spare.plan.fingerprint()) if spare is not None else None,
              "repaired": context.rejoin}
    path = os.path.join(config["out"], f"p{context.group}.pt")
    torch.save(result, path + ".tmp")
    os.replace(path + ".tmp", path)
    manager.shutdown(wait=False)
    if k > 1:
        dist.destroy_process_group()


def _die():
    time.sleep(0.02)  # the peers are inside the all-reduce now
    os.kill(os.getpid(), signal.SIGKILL)


def run_torchft_job(config, actions=(), *, seed=0, timeout=180.0, out=None):
    """Run :func:`torchft_worker` in ``N k`` processes around a lighthouse in this process.

    Parameters
    ----------
    config : dict
        :data:`DEFAULTS` and :data:`TORCHFT_DEFAULTS` overrides; ``layout`` is required,
        ``mode`` is ``"spare"`` or ``"plain"``.
    actions : sequence of tuple
        ``("kill", g, progress)``: SIGKILL every rank of replica group ``g`` once the job
        has committed ``progress`` steps, after a random delay of 0-30 ms (compute,
        all-reduce or quorum); ``("repair", g, progress)``: start new processes for
        ``g`` once ``g`` is dead and ``progress`` steps are committed (they join a
        quorum and heal from a live peer, as TorchFT does).  Done in order.
    seed : int, default 0
        Seed of the random delays.
    timeout : float, default 180.0
    out : str, optional
        Folder of the result files (default: a fresh temporary folder).

    Returns
    -------
    dict
        ``codes`` (exit code per process), ``events`` (the supervisor's: start, kill,
        death; by process), ``results`` (replica group -> result dict of its rank 0, for
        the groups whose rank 0 finished), ``ranks`` (process -> result dict),
        ``errors`` (process -> ``{"type", "message", ...}`` of a ``SpareError``),
        ``seconds`` (wall time of the job) and ``out``.
    """
    from torchft.coordination import LighthouseServer

    config = {**TORCHFT_DEFAULTS, **config}
    os.environ.setdefault("RUST_LOG", "warn")  # torchft logs every quorum at "info"
    out = out or tempfile.mkdtemp(prefix="spare-torchft-")
    groups = config["layout"].stacks.shape[0]
    k = int(config["ranks_per_group"])
    lighthouse = LighthouseServer(
        bind="[::]:0", min_replicas=1, join_timeout_ms=int(config["join_timeout"] * 1000), quorum_tick_ms=10,
        heartbeat_timeout_ms=int(config["heartbeat_timeout"] * 1000))
    config = {**config, "out": out, "lighthouse": lighthouse.address()}
    supervisor = Supervisor(torchft_worker, groups * k, args=(config,), max_restarts=0)
    rng = random.Random(seed)
    pending = list(actions)

    def on_poll(sup):
        if not pending:
            return
        kind, g, progress = pending[0]
        store = sup.generation_store()
        done = int(store.get("progress")) if store.check(["progress"]) else 0
        if done < progress:
            return
        processes = range(g * k, (g + 1) * k)
        if kind == "kill":
            pending.pop(0)
            if any(sup.alive(p) for p in processes):
                time.sleep(rng.uniform(0.0, 0.03))
                for p in processes:
                    if sup.alive(p):
                        sup.kill(p)
        elif not any(sup.alive(p) for p in processes):
            pending.pop(0)
            store.add("repairs", k)  # the live replicas wait for it before their next quorum
            for p in processes:
                sup.repair(p)

    began = time.time()
    try:
        supervisor.start()
        codes = supervisor.run(timeout=timeout, on_poll=on_poll)
    finally:
        supervisor.terminate()
        lighthouse.shutdown()
    ranks, errors = {}, {}
    for p in range(groups * k):
        path = os.path.join(out, f"p{p}.pt")
        if os.path.exists(path):
            ranks[p] = torch.load(path, weights_only=False)
        path = os.path.join(out, f"p{p}.error.json")
        if os.path.exists(path):
            with open(path) as handle:
                errors[p] = json.load(handle)
    results = {p // k: result for p, result in ranks.items() if p % k == 0}
    return {"codes": codes, "events": supervisor.events, "results": results, "ranks": ranks, "errors": errors,
            "seconds": time.time() - began, "out": out}

"""The demo job under TorchFT: a lighthouse, one process per replica group, scripted SIGKILLs.

:func:`torchft_worker` trains the model of :mod:`spare_opt.torch.demo` in one replica
group of a TorchFT job (``Manager`` + reconfigurable ``ProcessGroupGloo`` +
``OptimizerWrapper``, synchronous quorum), in one of two modes:

* ``"spare"``: :class:`TorchFTPlan` - every step, the replica computes the micro-batches
  of the quorum's plan and the gradients are summed over the quorum and divided by
  ``N m``;
* ``"plain"``: plain TorchFT - replica ``g`` always computes block ``g`` of the global
  batch (as ``torchft.data.DistributedSampler`` shards by replica group) and the
  manager averages over the live replicas, so a dead replica's block is not trained.

:func:`run_torchft_job` runs the job and returns the survivors' final parameters, to
compare with :func:`spare_opt.torch.demo.reference_run` (the fault-free run).  Used by
``tests/test_torchft.py`` and ``benchmarks/bench_torchft.py``.
"""

import datetime
import os
import random
import signal
import tempfile
import time

import torch
import torch.distributed as dist

from .demo import DEFAULTS, loss_fn, make_dataset, make_model
from .launch import Supervisor, connect
from .sampler import global_batch_indices
from .torchft_adapter import TorchFTPlan

__all__ = ["TORCHFT_DEFAULTS", "run_torchft_job", "torchft_worker"]

#: Settings of the TorchFT job on top of :data:`spare_opt.torch.demo.DEFAULTS`.
TORCHFT_DEFAULTS = {
    "mode": "spare",
    "steps": 20,
    "timeout": 20.0,
    "heartbeat_interval": 0.05,
    # The lighthouse's: a replica without a heartbeat for this long is out of the next quorum.
    "heartbeat_timeout": 1.0,
    "join_timeout": 5.0,
    # {"group": g, "step": s}: replica g SIGKILLs itself at step s, instead of entering the
    # all-reduce, 20 ms after its peers entered theirs (a death inside the collective).
    "die": None,
}


def torchft_worker(context, config):
    """A :class:`Supervisor` target: replica group ``context.group`` of a TorchFT job.

    Writes ``g{group}.pt`` in ``config["out"]``: the final parameters, the step records
    ``(step, committed, members, start, end)``, the quorums and whether the process is a
    repaired one (``context.rejoin``: it heals from a peer at its first quorum).
    """
    from torchft.manager import Manager
    from torchft.optim import OptimizerWrapper
    from torchft.process_group import ProcessGroupGloo

    config = {**DEFAULTS, **TORCHFT_DEFAULTS, **config}
    torch.set_num_threads(1)
    group = context.group
    groups = context.groups
    store = connect(context)
    dataset = make_dataset(config)
    x, y = dataset.tensors
    model, inner = make_model(config)
    timeout = datetime.timedelta(seconds=config["timeout"])
    spare = None
    if config["mode"] == "spare":
        spare = TorchFTPlan(config["layout"], micro_batches=config["micro_batches"], timeout=timeout)
        pg = spare.process_group
    else:
        pg = ProcessGroupGloo(timeout=timeout)
    replica_store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)

    def state_dict():
        return {"model": model.state_dict(), "optim": inner.state_dict()}

    def load_state_dict(state):
        model.load_state_dict(state["model"])
        inner.load_state_dict(state["optim"])

    manager = Manager(
        pg=pg, load_state_dict=load_state_dict, state_dict=state_dict, min_replica_size=1,
        use_async_quorum=False, init_sync=False, timeout=timeout, quorum_timeout=timeout, connect_timeout=timeout,
        rank=0, world_size=1, store_addr="127.0.0.1", store_port=replica_store.port,
        lighthouse_addr=config["lighthouse"], replica_id=f"spare_{group}",
        heartbeat_interval=datetime.timedelta(seconds=config["heartbeat_interval"]))
    optimizer = OptimizerWrapper(manager, inner)
    # Every replica heartbeats before any asks for a quorum: the first quorum holds all N.
    store.add("ready", 1)
    while not context.rejoin and int(store.add("ready", 0)) < groups:
        time.sleep(0.005)
    if context.rejoin:
        store.add("rejoined", 1)
    size = config["global_batch_size"]
    records = []
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
            for part in spare.local_batches(index):
                loss_fn(model, (x[part], y[part])).backward()
            if dying:
                _die()
            spare.reduce_gradients(manager, model.parameters())
            members = list(spare.members)
        else:
            part = index[group * size // groups:(group + 1) * size // groups]
            loss_fn(model, (x[part], y[part])).backward()
            if dying:
                _die()
            params = list(model.parameters())
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            manager.allreduce(flat).wait()  # TorchFT's default: SUM / live replicas
            offset = 0
            for p in params:
                p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
            members = [-1] * manager.num_participants()
        optimizer.step()  # should_commit(): the optimizer steps only if every replica succeeded
        committed = manager.current_step() > step
        records.append((step, committed, members, start, time.time()))
        if committed:
            store.set("progress", str(manager.current_step()))
        if config["step_sleep"]:
            time.sleep(config["step_sleep"])
    result = {"params": [p.detach().clone() for p in model.parameters()], "records": records,
              "quorums": list(spare.quorums) if spare is not None else [],
              "fingerprint": str(spare.plan.fingerprint()) if spare is not None else None,
              "repaired": context.rejoin}
    path = os.path.join(config["out"], f"g{group}.pt")
    torch.save(result, path + ".tmp")
    os.replace(path + ".tmp", path)
    manager.shutdown(wait=False)


def _die():
    time.sleep(0.02)  # the peers are inside the all-reduce now
    os.kill(os.getpid(), signal.SIGKILL)


def run_torchft_job(config, actions=(), *, seed=0, timeout=180.0, out=None):
    """Run :func:`torchft_worker` in ``N`` processes around a lighthouse in this process.

    Parameters
    ----------
    config : dict
        :data:`DEFAULTS` and :data:`TORCHFT_DEFAULTS` overrides; ``layout`` is required,
        ``mode`` is ``"spare"`` or ``"plain"``.
    actions : sequence of tuple
        ``("kill", g, progress)``: SIGKILL replica group ``g`` once the job has
        committed ``progress`` steps, after a random delay of 0-30 ms (compute,
        all-reduce or quorum); ``("repair", g, progress)``: start a new process for
        ``g`` once ``g`` is dead and ``progress`` steps are committed (it joins a
        quorum and heals from a live peer, as TorchFT does).  Done in order.
    seed : int, default 0
        Seed of the random delays.
    timeout : float, default 180.0
    out : str, optional
        Folder of the result files (default: a fresh temporary folder).

    Returns
    -------
    dict
        ``codes`` (exit code per group), ``events`` (the supervisor's: start, kill,
        death), ``results`` (group -> result dict, for the groups that finished),
        ``seconds`` (wall time of the job) and ``out``.
    """
    from torchft.coordination import LighthouseServer

    config = {**TORCHFT_DEFAULTS, **config}
    os.environ.setdefault("RUST_LOG", "warn")  # torchft logs every quorum at "info"
    out = out or tempfile.mkdtemp(prefix="spare-torchft-")
    groups = config["layout"].stacks.shape[0]
    lighthouse = LighthouseServer(
        bind="[::]:0", min_replicas=1, join_timeout_ms=int(config["join_timeout"] * 1000), quorum_tick_ms=10,
        heartbeat_timeout_ms=int(config["heartbeat_timeout"] * 1000))
    config = {**config, "out": out, "lighthouse": lighthouse.address()}
    supervisor = Supervisor(torchft_worker, groups, args=(config,), max_restarts=0)
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
        if kind == "kill":
            pending.pop(0)
            if sup.alive(g):
                time.sleep(rng.uniform(0.0, 0.03))
                sup.kill(g)
        elif not sup.alive(g):
            pending.pop(0)
            store.add("repairs", 1)  # the live replicas wait for it before their next quorum
            sup.repair(g)

    began = time.time()
    try:
        supervisor.start()
        codes = supervisor.run(timeout=timeout, on_poll=on_poll)
    finally:
        supervisor.terminate()
        lighthouse.shutdown()
    results = {}
    for g in range(groups):
        path = os.path.join(out, f"g{g}.pt")
        if os.path.exists(path):
            results[g] = torch.load(path, weights_only=False)
    return {"codes": codes, "events": supervisor.events, "results": results, "seconds": time.time() - began,
            "out": out}

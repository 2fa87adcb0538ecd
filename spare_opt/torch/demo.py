"""A small training job for the example, the tests and the benchmark: CPU, gloo, one process per group.

:func:`train_worker` is a :class:`Supervisor` target that trains a two-layer
perceptron on a fixed random regression data set with :class:`SpareStep`;
:func:`reference_run` trains the same model in one process on the whole global batch
of every step, the fault-free reference that the distributed run must equal.
"""

import os
import random
import signal
import tempfile
import time

import torch

from .elastic import SpareGroup
from ._plans import plan_fingerprint
from .launch import Supervisor, connect
from .sampler import SpareBatchSampler, global_batch_indices
from .step import SpareStep

__all__ = ["DEFAULTS", "make_dataset", "make_model", "reference_run", "run_job", "train_worker"]

#: The job's settings (override any key).
DEFAULTS = {
    "micro_batches": 1,
    "steps": 30,
    "global_batch_size": 96,
    "dataset_size": 960,
    "features": 8,
    "hidden": 16,
    "dtype": "float64",
    "seed": 0,
    "lr": 0.05,
    "momentum": 0.9,
    "loader_workers": 0,
    "heartbeat_interval": 0.02,
    "heartbeat_timeout": 1.0,
    "timeout": 30.0,
    "step_sleep": 0.0,
    "checkpoint_every": 0,
    # {"group": g, "event": name, "epoch": e}: SIGKILL itself at that timeline event of epoch >= e;
    # {"group": g, "event": "all-reduce", "step": s}: SIGKILL itself inside the all-reduce of step s.
    "die": None,
}


def _dtype(config):
    return getattr(torch, config["dtype"])


def make_dataset(config):
    """A ``TensorDataset`` of ``dataset_size`` regression samples, a pure function of ``seed``."""
    generator = torch.Generator().manual_seed(1000 + config["seed"])
    x = torch.randn(config["dataset_size"], config["features"], generator=generator, dtype=_dtype(config))
    w = torch.randn(config["features"], 1, generator=generator, dtype=_dtype(config))
    y = torch.tanh(x @ w) + 0.1 * torch.randn(config["dataset_size"], 1, generator=generator, dtype=_dtype(config))
    return torch.utils.data.TensorDataset(x, y)


def make_model(config):
    """The model and its optimizer (SGD with momentum), initialised from ``seed`` alike on every rank."""
    torch.manual_seed(config["seed"])
    model = torch.nn.Sequential(torch.nn.Linear(config["features"], config["hidden"]), torch.nn.Tanh(),
                                torch.nn.Linear(config["hidden"], 1)).to(_dtype(config))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])
    return model, optimizer


def loss_fn(model, batch):
    """Mean squared error of a micro-batch ``(x, y)``."""
    x, y = batch
    return torch.nn.functional.mse_loss(model(x), y)


def reference_run(config):
    """Train in one process on every step's whole global batch; return the final parameters (a list of tensors)."""
    config = {**DEFAULTS, **config}
    dataset = make_dataset(config)
    model, optimizer = make_model(config)
    x, y = dataset.tensors
    for step in range(config["steps"]):
        index = global_batch_indices(len(dataset), config["global_batch_size"], step, seed=config["seed"])
        optimizer.zero_grad()
        loss_fn(model, (x[index], y[index])).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def train_worker(context, config):
    """A :class:`Supervisor` target: train group ``context.group`` and save its result to ``config["out"]``.

    The result file ``g{group}.pt`` holds the final parameters, the timeline and the
    losses, written atomically when the group finishes.
    """
    config = {**DEFAULTS, **config}
    torch.set_num_threads(1)
    store = connect(context)
    dataset = make_dataset(config)
    model, optimizer = make_model(config)
    group = SpareGroup(config["layout"], context.group, store, micro_batches=config["micro_batches"],
                       heartbeat_interval=config["heartbeat_interval"],
                       heartbeat_timeout=config["heartbeat_timeout"], timeout=config["timeout"],
                       rejoin=context.rejoin)
    die = config["die"]
    if die is not None and die["group"] == context.group and not context.rejoin and context.generation == 0:
        _arm(group, die, lambda: step.step)
    sampler = SpareBatchSampler(group, len(dataset), config["global_batch_size"], steps=config["steps"],
                                seed=config["seed"])
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler, num_workers=config["loader_workers"])
    checkpoint = os.path.join(config["out"], "checkpoint.pt") if config["checkpoint_every"] else None
    step = SpareStep(group, model, optimizer, loss_fn, sampler, dataset, loader=loader, checkpoint=checkpoint,
                     checkpoint_every=config["checkpoint_every"])
    while step.step < config["steps"]:
        step()
        if group.group == group.members[0]:
            store.set("progress", str(step.step))
        if config["step_sleep"]:
            time.sleep(config["step_sleep"])
    result = {"params": [p.detach().clone() for p in model.parameters()], "timeline": group.timeline,
              "losses": step.losses, "members": group.members, "epoch": group.epoch,
              "plan_seconds": group.plan_seconds, "generation": context.generation,
              "fingerprint": plan_fingerprint(group.plan), "rejoined": context.rejoin}
    path = os.path.join(config["out"], f"g{context.group}.pt")
    torch.save(result, path + ".tmp")
    os.replace(path + ".tmp", path)
    group.close()


def _arm(group, die, current_step):
    """SIGKILL this process at the event ``die`` names (a real kill, placed precisely)."""
    if die["event"] == "all-reduce":
        reduce = group.all_reduce

        def all_reduce(tensor):
            if current_step() < die["step"]:
                return reduce(tensor)
            torch.distributed.all_reduce(tensor, async_op=True)
            time.sleep(0.001)  # the peers are inside the collective now
            os.kill(os.getpid(), signal.SIGKILL)
        group.all_reduce = all_reduce
        return

    def on_event(name, extra):
        if name == die["event"] and extra.get("epoch", 0) >= die.get("epoch", 0):
            os.kill(os.getpid(), signal.SIGKILL)
    group.on_event = on_event


def run_job(config, actions=(), *, seed=0, timeout=180.0, out=None):
    """Run :func:`train_worker` on ``N`` processes under a :class:`Supervisor` with scripted faults.

    Parameters
    ----------
    config : dict
        :data:`DEFAULTS` overrides; ``layout`` is required.
    actions : sequence of tuple
        ``("kill", g, progress)``: SIGKILL group ``g`` once the job has finished
        ``progress`` steps, after a random delay of 0-30 ms (a random moment: compute
        or all-reduce); ``("repair", g, progress)``: start a repaired ``g`` once ``g``
        is dead and ``progress`` steps are done.  Done in order.
    seed : int, default 0
        Seed of the random delays.
    timeout : float, default 180.0
    out : str, optional
        Folder of the result files (default: a fresh temporary folder).

    Returns
    -------
    dict
        ``codes`` (exit code per group), ``events`` (the supervisor's), ``results``
        (group -> its result dict, for the groups that finished) and ``out``.
    """
    out = out or tempfile.mkdtemp(prefix="spare-torch-")
    groups = config["layout"].stacks.shape[0]
    config = {**config, "out": out}
    supervisor = Supervisor(train_worker, groups, args=(config,))
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
            if not sup.alive(g):
                pending.pop(0)
                return
            time.sleep(rng.uniform(0.0, 0.03))
            sup.kill(g)
        elif kind == "repair":
            if sup.alive(g):
                return
            sup.repair(g)
        pending.pop(0)

    supervisor.start()
    codes = supervisor.run(timeout=timeout, on_poll=on_poll)
    results = {}
    for g in range(groups):
        path = os.path.join(out, f"g{g}.pt")
        if os.path.exists(path):
            results[g] = torch.load(path, weights_only=False)
    return {"codes": codes, "events": supervisor.events, "results": results, "out": out}

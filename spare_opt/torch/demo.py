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

__all__ = ["DEFAULTS", "PHASES", "make_dataset", "make_model", "max_difference", "recovery_timeline", "reference_run",
           "run_job", "train_worker"]

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
    # {"group": g, "seconds": s}: group g joins the job s seconds late (generation 0).
    "start_delay": None,
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
    delay = config["start_delay"]
    if delay is not None and delay["group"] == context.group and not context.rejoin and context.generation == 0:
        time.sleep(delay["seconds"])
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
        # A repaired group is on its way: wait until it connected (the supervisor counts
        # it), else the job may end before its process starts on a loaded machine.
        while int(store.add("connected", 0)) < int(store.add("repairs", 0)):
            time.sleep(0.005)
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


def run_job(config, actions=(), *, seed=0, timeout=180.0, out=None, worker=None):
    """Run :func:`train_worker` (or ``worker``) on ``N`` processes under a :class:`Supervisor` with scripted faults.

    Parameters
    ----------
    config : dict
        :data:`DEFAULTS` overrides; ``layout`` is required.
    actions : sequence of tuple
        ``("kill", g, progress)``: SIGKILL group ``g`` once the job has finished
        ``progress`` steps, after a random delay of 0-30 ms (a random moment: compute
        or all-reduce); ``("repair", g, progress)``: start a repaired ``g`` once ``g``
        is dead and ``progress`` steps are done (the live groups wait before their
        next step until it connected).  Done in order.
    seed : int, default 0
        Seed of the random delays.
    timeout : float, default 180.0
    out : str, optional
        Folder of the result files (default: a fresh temporary folder).
    worker : callable, optional
        A module-level ``worker(context, config)`` in place of :func:`train_worker`; it
        must keep :func:`train_worker`'s protocol (wait for ``connected`` to reach
        ``repairs`` before a step, the lowest member sets ``progress``, the result in
        ``g{group}.pt`` under ``config["out"]``).

    Returns
    -------
    dict
        ``codes`` (exit code per group), ``events`` (the supervisor's), ``results``
        (group -> its result dict, for the groups that finished) and ``out``.
    """
    out = out or tempfile.mkdtemp(prefix="spare-torch-")
    groups = config["layout"].stacks.shape[0]
    config = {**config, "out": out}
    supervisor = Supervisor(worker or train_worker, groups, args=(config,))
    rng = random.Random(seed)
    pending = list(actions)
    waiting = []  # repaired groups not connected yet (the live groups wait for them)

    def on_poll(sup):
        store = sup.generation_store()
        # A repaired group deletes its death notice first thing, then asks to rejoin (a
        # sign that stays: its request is deleted at once if it is admitted at once).
        for g in [g for g in waiting if not store.check([f"dead/{g}"]) or not sup.alive(g)]:
            waiting.remove(g)
            store.add("connected", 1)
        if not pending:
            return
        kind, g, progress = pending[0]
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
            store.add("repairs", 1)
            waiting.append(g)
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


#: The phases of a recovery, in order (seconds each; see :func:`recovery_timeline`).
PHASES = ("detection", "agreement", "plan", "rebuild", "patch")


def max_difference(results, reference):
    """The largest absolute difference of any survivor's final parameters from ``reference``.

    Parameters
    ----------
    results : dict of int to dict
        ``run_job(...)["results"]``.
    reference : list of torch.Tensor
        :func:`reference_run`'s parameters.

    Returns
    -------
    (float, float)
        The difference and the parameter scale (largest absolute reference entry).
    """
    scale = max(float(p.abs().max()) for p in reference)
    difference = max(float((a - b).abs().max()) for result in results.values()
                     for a, b in zip(result["params"], reference))
    return difference, scale


def recovery_timeline(job):
    """The recovery after every kill of a :func:`run_job`, phase by phase, on the slowest survivor.

    For each ``kill`` event of the supervisor and each survivor, the survivor's first
    ``detect`` after the kill and the ``agree``, ``plan``, ``rebuild``, ``patch-plan``
    and ``recovered`` events that follow it mark the phases:

    * ``detection``: kill to ``detect`` (a collective raised, the abort flag, a death
      notice or a stale heartbeat);
    * ``agreement``: ``detect`` to ``agree`` (the agreed failed set read from the store);
    * ``plan``: ``agree`` to ``plan`` (the members' records read and the plan of the
      failed set computed; ``plan_compute`` is the plan alone);
    * ``rebuild``: ``plan`` to ``rebuild`` (the gloo process group of the survivors);
    * ``patch``: ``rebuild`` to ``recovered`` (the patch micro-batches planned and
      computed, the step's gradient all-reduced and applied; ``patch_plan`` is the
      planning alone).

    Parameters
    ----------
    job : dict
        What :func:`run_job` returned.

    Returns
    -------
    list of dict
        One per kill with ``group`` (the killed one), ``source`` (what detected it
        first), ``step``, the :data:`PHASES` in seconds, ``plan_compute`` and
        ``patch_plan`` (seconds), ``spare_opt`` (their sum: spare-opt's own compute on
        the recovery path, the rest being waits on the store, gloo and the model) and
        ``total`` (kill to ``recovered``), all on the survivor that recovered last.
    """
    kills = [(moment, g) for name, moment, g in job["events"] if name == "kill"]
    rows = []
    for index, (moment, victim) in enumerate(kills):
        end = kills[index + 1][0] if index + 1 < len(kills) else float("inf")
        slowest = None
        for g, result in job["results"].items():
            marks = {}
            for name, when, extra in result["timeline"]:
                if when < moment or when >= end:
                    continue
                if name == "detect" and "detect" not in marks:
                    marks["detect"] = (when, extra)
                elif "detect" in marks and name in ("agree", "plan", "rebuild", "patch-plan", "recovered") \
                        and name not in marks:
                    marks[name] = (when, extra)
            if len(marks) < 5 or "recovered" not in marks:
                continue
            if slowest is None or marks["recovered"][0] > slowest["recovered"][0]:
                slowest = marks
        if slowest is None:
            continue
        time_of = {name: value[0] for name, value in slowest.items()}
        patch_plan = time_of["patch-plan"] - time_of["rebuild"] if "patch-plan" in time_of else 0.0
        plan_compute = float(slowest["plan"][1].get("seconds", 0.0))
        rows.append({
            "group": victim,
            "source": slowest["detect"][1]["source"].split(":")[0],
            "step": slowest["recovered"][1].get("step"),
            "detection": time_of["detect"] - moment,
            "agreement": time_of["agree"] - time_of["detect"],
            "plan": time_of["plan"] - time_of["agree"],
            "rebuild": time_of["rebuild"] - time_of["plan"],
            "patch": time_of["recovered"] - time_of["rebuild"],
            "plan_compute": plan_compute,
            "patch_plan": patch_plan,
            "spare_opt": plan_compute + patch_plan,
            "total": time_of["recovered"] - moment,
        })
    return rows

"""The example training job of spare-opt's PyTorch integration: CPU, gloo, one process per DP group.

Not part of the package: ``examples/train_with_spare.py``, ``examples/launch/train.py``,
the tests and the benchmarks import it from here (with ``examples/`` on ``sys.path``).

:func:`train_worker` is a :class:`~spare_opt.torch.Supervisor` target that trains, with
:class:`~spare_opt.torch.SpareStep`, either a two-layer perceptron on a fixed random
regression data set (``model="mlp"``) or a small GPT-style causal language model on
byte tokens of the standard library's source (``model="gpt"``: 2 pre-LN blocks, causal
self-attention, a tied head, dropout, AdamW with weight decay, clipping by global norm
in the ``before_step`` hook, a warmup + cosine ``LambdaLR`` registered as state).
:func:`run_job` runs it on ``N`` processes with scripted SIGKILLs and repairs.
:func:`reference_run` trains the same model in one process, the fault-free reference
that the distributed run must equal: on the whole global batch of every step (the
perceptron), or micro-batch by micro-batch, each under its own random stream (the GPT
model, whose dropout makes a whole-batch forward draw other masks).
"""

import inspect
import math
import os
import random
import signal
import tempfile
import time

import torch
import torch.nn.functional as F

from spare_opt.torch import (RandomState, SpareBatchSampler, SpareGroup, SpareStep, Supervisor, global_batch_indices,
                             micro_batch_rng, plan_fingerprint, recovery_phases)

__all__ = ["DEFAULTS", "TinyGPT", "clip_hook", "lm_loss_fn", "make_dataset", "make_model", "make_optimizer",
           "make_scheduler", "max_difference", "recovery_timeline", "reference_run", "run_job", "train_worker"]

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
    # "mlp" (the perceptron, SGD) or "gpt" (the causal LM; then "lr" is AdamW's peak rate).
    "model": "mlp",
    "width": 16,
    "context": 8,
    "dropout": 0.1,
    "weight_decay": 0.1,
    "max_norm": 1.0,
    "warmup": 3,
    "check_every": 10,
    # K, ranks per DP group (the launch example's torchrun --nproc-per-node): the reference
    # splits each micro-batch into K parts, each under its own random stream, as they do.
    "group_ranks": 1,
    # {"group": g, "event": name, "epoch": e}: SIGKILL itself at that timeline event of epoch >= e;
    # {"group": g, "event": "all-reduce", "step": s}: SIGKILL itself inside the all-reduce of step s.
    "die": None,
    # {"group": g, "seconds": s}: group g joins the job s seconds late (generation 0).
    "start_delay": None,
}


def _dtype(config):
    return getattr(torch, config["dtype"])


def make_dataset(config):
    """A ``TensorDataset`` of ``dataset_size`` samples: regression data from ``seed``, or byte windows of text.

    For ``model="gpt"``: windows of ``context + 1`` bytes (stride 3) of ``json.decoder``'s
    source, inputs and next-byte targets (``int64``, shape ``(dataset_size, context)``).
    """
    if config["model"] == "gpt":
        import json.decoder

        text = inspect.getsource(json.decoder).encode()
        data = torch.tensor(list(text), dtype=torch.int64)
        windows = data.unfold(0, config["context"] + 1, 3)
        if len(windows) < config["dataset_size"]:
            raise ValueError(f"the text has {len(windows)} windows, fewer than dataset_size {config['dataset_size']}")
        windows = windows[:config["dataset_size"]]
        return torch.utils.data.TensorDataset(windows[:, :-1].contiguous(), windows[:, 1:].contiguous())
    generator = torch.Generator().manual_seed(1000 + config["seed"])
    x = torch.randn(config["dataset_size"], config["features"], generator=generator, dtype=_dtype(config))
    w = torch.randn(config["features"], 1, generator=generator, dtype=_dtype(config))
    y = torch.tanh(x @ w) + 0.1 * torch.randn(config["dataset_size"], 1, generator=generator, dtype=_dtype(config))
    return torch.utils.data.TensorDataset(x, y)


class _Block(torch.nn.Module):
    """A pre-LN transformer block: causal self-attention and an MLP, dropout on the attention and both residuals."""

    def __init__(self, width, heads, dropout):
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.ln1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.ln2 = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width))

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(width // self.heads)
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        weights = F.dropout(scores.masked_fill(~causal, float("-inf")).softmax(-1), self.dropout, self.training)
        x = x + F.dropout(self.proj((weights @ v).transpose(1, 2).reshape(batch, length, width)), self.dropout,
                          self.training)
        return x + F.dropout(self.mlp(self.ln2(x)), self.dropout, self.training)


class TinyGPT(torch.nn.Module):
    """A GPT-style causal LM on bytes: token and position embeddings, pre-LN blocks, the head tied to the embedding.

    ``forward(tokens)``: ``int64 (batch, length)`` to logits ``(batch, length, 256)``.
    """

    def __init__(self, width=16, heads=2, layers=2, context=8, dropout=0.1):
        super().__init__()
        self.tokens = torch.nn.Embedding(256, width)
        self.positions = torch.nn.Embedding(context, width)
        self.blocks = torch.nn.ModuleList(_Block(width, heads, dropout) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(width)
        self.dropout = dropout

    def forward(self, tokens):
        x = self.tokens(tokens) + self.positions(torch.arange(tokens.shape[1], device=tokens.device))
        x = F.dropout(x, self.dropout, self.training)
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.tokens.weight.T


def make_model(config):
    """The model and its optimizer, initialised from ``seed`` alike on every rank.

    The perceptron with SGD (momentum), or :class:`TinyGPT` with AdamW (weight decay).
    """
    torch.manual_seed(config["seed"])
    if config["model"] == "gpt":
        model = TinyGPT(config["width"], context=config["context"], dropout=config["dropout"]).to(_dtype(config))
    else:
        model = torch.nn.Sequential(torch.nn.Linear(config["features"], config["hidden"]), torch.nn.Tanh(),
                                    torch.nn.Linear(config["hidden"], 1)).to(_dtype(config))
    return model, make_optimizer(model, config)


def make_optimizer(model, config):
    """AdamW (weight decay) for the GPT model, SGD (momentum) for the perceptron, over ``model``'s parameters.

    Built again after ``fully_shard`` (which replaces the parameters with sharded ones).
    """
    if config["model"] == "gpt":
        return torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=config["weight_decay"])
    return torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])


def loss_fn(model, batch):
    """Mean squared error of a micro-batch ``(x, y)``."""
    x, y = batch
    return torch.nn.functional.mse_loss(model(x), y)


def lm_loss_fn(model, batch):
    """Mean next-byte cross-entropy of a micro-batch ``(tokens, targets)``."""
    x, y = batch
    return F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))


def make_scheduler(optimizer, config):
    """Warmup + cosine ``LambdaLR``: linear over ``warmup`` steps, then cosine down to 0.1 of the peak at ``steps``."""
    warmup, steps = config["warmup"], config["steps"]

    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.45 * (1.0 + math.cos(math.pi * min(step - warmup, steps - warmup) / max(1, steps - warmup)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def clip_hook(max_norm, norms=None):
    """A ``before_step`` hook: clip the global gradient to ``max_norm``; skip the step when it is not finite.

    ``norms`` (a dict), when given, gets each step's gradient norm before clipping.
    """
    def before_step(step):
        norm = torch.nn.utils.clip_grad_norm_(step.parameters, max_norm)
        if norms is not None:
            norms[step.step] = float(norm)
        return bool(torch.isfinite(norm))
    return before_step


def reference_run(config):
    """Train in one process, fault-free; return the final parameters (a list of tensors).

    The perceptron: on every step's whole global batch.  The GPT model: micro-batch by
    micro-batch in key order, each under :func:`~spare_opt.torch.micro_batch_rng` of
    ``(seed, step, shard type, micro-batch)``, the gradients summed and divided by
    ``N m``, then the clipping hook, AdamW and the scheduler, as the distributed run.
    """
    config = {**DEFAULTS, **config}
    dataset = make_dataset(config)
    model, optimizer = make_model(config)
    if config["model"] == "gpt":
        return _reference_gpt(config, dataset, model, optimizer)
    x, y = dataset.tensors
    for step in range(config["steps"]):
        index = global_batch_indices(len(dataset), config["global_batch_size"], step, seed=config["seed"])
        optimizer.zero_grad()
        loss_fn(model, (x[index], y[index])).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


class _Helper:
    def __init__(self, parameters):
        self.parameters = parameters
        self.step = 0


def _reference_gpt(config, dataset, model, optimizer):
    torch.set_num_threads(1)
    scheduler = make_scheduler(optimizer, config)
    hook = clip_hook(config["max_norm"])
    groups = config["layout"].stacks.shape[0]
    m = config["micro_batches"]
    size = config["global_batch_size"] // (groups * m)
    helper = _Helper([p for p in model.parameters() if p.requires_grad])
    for step in range(config["steps"]):
        index = global_batch_indices(len(dataset), config["global_batch_size"], step, seed=config["seed"]).tolist()
        for p in helper.parameters:
            p.grad = torch.zeros_like(p)
        ranks = config["group_ranks"]
        part = size // ranks
        for key in range(groups * m):
            for k in range(ranks):  # FSDP2 averages the K parts' gradients
                start = key * size + k * part
                batch = torch.utils.data.default_collate([dataset[i] for i in index[start:start + part]])
                with micro_batch_rng(config["seed"], step, key // m, key % m, part=k):
                    (lm_loss_fn(model, batch) / ranks).backward()
        for p in helper.parameters:
            p.grad.div_(groups * m)
        helper.step = step
        if hook(helper) is not False:
            optimizer.step()
        scheduler.step()
    return [p.detach().clone() for p in model.parameters()]


def train_worker(context, config):
    """A :class:`Supervisor` target: train group ``context.group`` and save its result to ``config["out"]``.

    The result file ``g{group}.pt`` holds the final parameters, the timeline and the
    losses, written atomically when the group finishes.
    """
    config = {**DEFAULTS, **config}
    torch.set_num_threads(1)
    store = Supervisor.connect(context)
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
    scheduler = None
    if config["model"] == "gpt":
        scheduler = make_scheduler(optimizer, config)
        step = SpareStep(group, model, optimizer, lm_loss_fn, sampler, dataset, loader=loader, checkpoint=checkpoint,
                         checkpoint_every=config["checkpoint_every"], before_step=clip_hook(config["max_norm"]),
                         state={"scheduler": scheduler, "rng": RandomState()}, check_every=config["check_every"])
    else:
        step = SpareStep(group, model, optimizer, loss_fn, sampler, dataset, loader=loader, checkpoint=checkpoint,
                         checkpoint_every=config["checkpoint_every"], check_every=config["check_every"])
    while step.step < config["steps"]:
        # A repaired group is on its way: wait until it connected (the supervisor counts
        # it), else the job may end before its process starts on a loaded machine.
        while int(store.add("connected", 0)) < int(store.add("repairs", 0)):
            time.sleep(0.005)
        step()
        if scheduler is not None:
            scheduler.step()  # after the step: part of the next step boundary's state
        if group.group == group.members[0]:
            store.set("progress", str(step.step))
        if config["step_sleep"]:
            time.sleep(config["step_sleep"])
    result = {"params": [p.detach().clone() for p in model.parameters()], "timeline": group.timeline,
              "losses": step.losses, "members": group.members, "epoch": group.epoch,
              "plan_seconds": group.plan_seconds, "generation": context.generation,
              "fingerprint": plan_fingerprint(group.plan), "rejoined": group.joined_late,
              "lr": None if scheduler is None else scheduler.get_last_lr(),
              "checks": sum(1 for name, _, _ in group.timeline if name == "checked")}
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

    :func:`spare_opt.torch.recovery_phases` of the finished groups' timelines and the
    supervisor's ``kill`` events: one dict per kill with ``group``, ``source``, ``step``,
    the :data:`~spare_opt.torch.RECOVERY_PHASES` in seconds, ``plan_compute``,
    ``patch_plan``, ``spare_opt`` and ``total``.
    """
    timelines = {g: result["timeline"] for g, result in job["results"].items()}
    kills = [(moment, g) for name, moment, g in job["events"] if name == "kill"]
    return recovery_phases(timelines, kills)

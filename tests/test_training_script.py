"""A training script of the usual shape on spare_opt.torch: real processes, gloo, SIGKILL, a fault-free reference.

The model is a small GPT-style causal language model written here (2 pre-LN blocks,
causal self-attention, a tied head, dropout 0.1) on byte tokens of the standard
library's source, in float64, with AdamW (weight decay), clipping by global norm in
``SpareStep``'s ``before_step`` hook, a warmup + cosine ``LambdaLR`` stepped after every
step and registered as state, ``RandomState`` registered too (the loop draws from
torch's generator between steps).  The reference is a single process that computes the
same micro-batches in order, each under its own random stream
(``spare_opt.torch.micro_batch_rng``), and applies the same hook, optimizer and
schedule: with a kill, a rejoin or a wipe-out, every finished group must end within
``1e-12`` of it (relative to the parameter scale), with the same AdamW moments, learning
rate and random draws.
"""

import inspect
import math
import os
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import spare_opt  # noqa: E402
from spare_opt.torch import (  # noqa: E402
    GroupTimeout, RandomState, ReplicaDivergence, SpareBatchSampler, SpareGroup, SpareStep, Supervisor,
    global_batch_indices, micro_batch_rng,
)
from spare_opt.torch.supervisor import LAYOUT_EXIT, connect  # noqa: E402
from training_job import _arm, run_job  # noqa: E402

GROUPS = 4
MICRO_BATCHES = 2
SAMPLES = 2  # per micro-batch
GLOBAL_BATCH = GROUPS * MICRO_BATCHES * SAMPLES
CONTEXT = 8
STEPS = 12
WARMUP = 3
LR = 3e-3
MAX_NORM = 0.5
NAN_STEP = 5  # a micro-batch whose loss is NaN (job with the loss scaler): the step is skipped everywhere
NAN_KEY = 3
TOLERANCE = 1e-12


# ------------------------------------------------------------------ the model
class Block(torch.nn.Module):
    def __init__(self, width, heads, dropout):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.ln2 = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width))
        self.dropout = dropout

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(width // self.heads)
        mask = torch.ones(length, length, dtype=torch.bool).tril()
        weights = F.dropout(scores.masked_fill(~mask, float("-inf")).softmax(-1), self.dropout, self.training)
        attended = (weights @ v).transpose(1, 2).reshape(batch, length, width)
        x = x + F.dropout(self.proj(attended), self.dropout, self.training)
        return x + F.dropout(self.mlp(self.ln2(x)), self.dropout, self.training)


class TinyGPT(torch.nn.Module):
    """A causal LM on bytes: token and position embeddings, pre-LN blocks, the head tied to the embedding."""

    def __init__(self, vocabulary=256, width=16, heads=2, layers=2, context=CONTEXT, dropout=0.1):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocabulary, width)
        self.positions = torch.nn.Embedding(context, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(width)
        self.dropout = dropout

    def forward(self, tokens):
        x = self.tokens(tokens) + self.positions(torch.arange(tokens.shape[1]))
        x = F.dropout(x, self.dropout, self.training)
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.tokens.weight.T


def text_dataset():
    """Windows of ``CONTEXT + 1`` bytes of ``json.decoder``'s source (stride 3): input and next-byte targets."""
    import json.decoder

    data = torch.tensor(list(inspect.getsource(json.decoder).encode()[:1500]), dtype=torch.int64)
    windows = data.unfold(0, CONTEXT + 1, 3)[:480]
    return torch.utils.data.TensorDataset(windows[:, :-1].contiguous(), windows[:, 1:].contiguous())


def schedule(step):
    """Linear warmup over ``WARMUP`` steps, then cosine down to 0.1 of the peak at ``STEPS``."""
    if step < WARMUP:
        return (step + 1) / WARMUP
    return 0.1 + 0.45 * (1.0 + math.cos(math.pi * min(step - WARMUP, STEPS - WARMUP) / (STEPS - WARMUP)))


def build(config):
    torch.manual_seed(config["seed"])
    model = TinyGPT().to(torch.float64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=3) if config.get("scaler") else None
    return model, optimizer, scheduler, scaler


def byte_lm_loss(model, batch):
    """The next-byte cross-entropy of one micro-batch (the tests' ``loss_fn`` without a loss scaler)."""
    x, y = batch
    return F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))


def make_loss_fn(scaler):
    def loss_fn(model, batch, step):
        x, y = batch
        loss = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
        if scaler is not None:
            s, t, j = step.current
            if s == NAN_STEP and t * MICRO_BATCHES + j == NAN_KEY:
                loss = loss * float("nan")
            loss = scaler.scale(loss)
        return loss
    return loss_fn


def make_hook(optimizer, scaler, norms):
    """The recipes: unscale (GradScaler), clip by global norm, skip a step whose gradient is not finite."""
    def before_step(step):
        if scaler is not None:
            scaler.unscale_(optimizer)
        norm = torch.nn.utils.clip_grad_norm_(step.parameters, MAX_NORM)
        norms[step.step] = float(norm)
        if scaler is not None:
            scaler.step(optimizer)  # skips the step when the unscaled gradient has an inf or a NaN
            scaler.update()
            return False
        return bool(torch.isfinite(norm))
    return before_step


# ------------------------------------------------------------------ a rank
def worker(context, config):
    torch.set_num_threads(1)
    store = connect(context)
    dataset = text_dataset()
    model, optimizer, scheduler, scaler = build(config)
    layout = config["layout"]
    if config.get("odd_layout") == context.group:
        layout = spare_opt.Layout(np.roll(layout.stacks, 1, axis=1))
    if config.get("absent") == context.group:
        time.sleep(config["timeout"] + 3.0)  # a rank that never starts its SpareGroup
        return
    time.sleep(config.get("start_delay", {}).get(context.group, 0.0))
    started = time.monotonic()
    try:
        group = SpareGroup(layout, context.group, store, micro_batches=MICRO_BATCHES, heartbeat_interval=0.02,
                           heartbeat_timeout=1.0, timeout=config.get("timeout", 30.0), rejoin=context.rejoin)
    except (GroupTimeout, spare_opt.LayoutError) as exc:
        torch.save({"type": type(exc).__name__, "seconds": time.monotonic() - started,
                    "groups": getattr(exc, "groups", None), "message": str(exc)},
                   os.path.join(config["out"], f"error{context.group}.pt"))
        raise
    die = config.get("die")
    if die is not None and die["group"] == context.group and not context.rejoin and context.generation == 0:
        _arm(group, die, lambda: step.step)
    sampler = SpareBatchSampler(group, len(dataset), GLOBAL_BATCH, steps=STEPS, seed=config["seed"])
    norms = {}
    state = {"scheduler": scheduler, "rng": RandomState()}
    if scaler is not None:
        state["scaler"] = scaler
    if not config.get("register_state", True):  # a script written the old way (for the sensitivity check)
        state = {}
    checkpoint = os.path.join(config["out"], "checkpoint.pt") if config.get("checkpoint_every") else None
    step = SpareStep(group, model, optimizer, make_loss_fn(scaler), sampler, dataset,
                     before_step=make_hook(optimizer, scaler, norms), state=state, checkpoint=checkpoint,
                     checkpoint_every=config.get("checkpoint_every", 0), check_every=config.get("check_every", 10),
                     micro_batch_rng=config.get("micro_batch_rng", True))
    start = step.step
    draws = {}
    error = None
    diverge = config.get("diverge")
    try:
        while step.step < STEPS:
            while int(store.add("connected", 0)) < int(store.add("repairs", 0)):
                time.sleep(0.005)
            if diverge is not None and diverge["group"] == context.group and diverge["step"] == step.step:
                # The schedule restarts in one replica (as an unregistered scheduler does in a
                # repaired group): it trains at the warmup's first rate while the others decay.
                scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
            step()
            scheduler.step()  # after the step: the state of the next boundary holds it
            draws[step.step - 1] = float(torch.rand(()))
            if group.group == group.members[0]:
                store.set("progress", str(step.step))
            time.sleep(0.005)
    except ReplicaDivergence as exc:
        error = {"step": exc.step, "groups": exc.groups, "parts": exc.parts, "message": str(exc)}
    result = {"params": [p.detach().clone() for p in model.parameters()],
              "moments": {k: (v["exp_avg"].clone(), v["exp_avg_sq"].clone())
                          for k, v in optimizer.state_dict()["state"].items()},
              "lr": scheduler.get_last_lr(), "scale": None if scaler is None else scaler.get_scale(),
              "applied": int(optimizer.state_dict()["state"][0]["step"]),
              "draws": draws, "norms": norms, "start": start, "generation": context.generation,
              "rejoined": context.rejoin, "members": group.members, "timeline": group.timeline, "error": error}
    path = os.path.join(config["out"], f"g{context.group}.pt")
    torch.save(result, path + ".tmp")
    os.replace(path + ".tmp", path)
    group.close()


# ------------------------------------------------------------------ the reference
class _Helper:
    """What the hook and the loss function read of the step helper, for the reference run."""

    def __init__(self, parameters):
        self.parameters = parameters
        self.step = 0
        self.current = None


def reference(config):
    """One process, every micro-batch of every step in order, each under its own random stream."""
    torch.set_num_threads(1)
    dataset = text_dataset()
    model, optimizer, scheduler, scaler = build(config)
    helper = _Helper([p for p in model.parameters() if p.requires_grad])
    norms, draws = {}, {}
    hook, loss_fn = make_hook(optimizer, scaler, norms), make_loss_fn(scaler)
    parts = GROUPS * MICRO_BATCHES
    for s in range(STEPS):
        index = global_batch_indices(len(dataset), GLOBAL_BATCH, s, seed=config["seed"]).tolist()
        for p in helper.parameters:
            p.grad = torch.zeros_like(p)
        for key in range(parts):
            t, j = divmod(key, MICRO_BATCHES)
            batch = torch.utils.data.default_collate([dataset[i] for i in index[key * SAMPLES:(key + 1) * SAMPLES]])
            helper.current = (s, t, j)
            with micro_batch_rng(config["seed"], s, t, j):
                loss_fn(model, batch, helper).backward()
        for p in helper.parameters:
            p.grad.div_(parts)
        helper.step = s
        if hook(helper) is not False:
            optimizer.step()
        scheduler.step()
        draws[s] = float(torch.rand(()))
    return {"params": [p.detach().clone() for p in model.parameters()],
            "moments": {k: (v["exp_avg"].clone(), v["exp_avg_sq"].clone())
                        for k, v in optimizer.state_dict()["state"].items()},
            "lr": scheduler.get_last_lr(), "scale": None if scaler is None else scaler.get_scale(),
            "applied": int(optimizer.state_dict()["state"][0]["step"]), "draws": draws, "norms": norms}


def assert_exact(job, config, finished):
    results = job["results"]
    assert sorted(results) == sorted(finished), (job["codes"], job["events"])
    expected = reference(config)
    scale = max(float(p.abs().max()) for p in expected["params"])
    for g, result in results.items():
        assert result["error"] is None, (g, result["error"])
        difference = max(float((a - b).abs().max()) for a, b in zip(result["params"], expected["params"]))
        assert difference <= TOLERANCE * scale, (g, difference, result["timeline"])
        for k, (avg, avg_sq) in expected["moments"].items():
            got_avg, got_avg_sq = result["moments"][k]
            assert float((got_avg - avg).abs().max()) <= TOLERANCE * max(1.0, float(avg.abs().max())), (g, k)
            assert float((got_avg_sq - avg_sq).abs().max()) <= TOLERANCE * max(1.0, float(avg_sq.abs().max())), (g, k)
        assert result["lr"] == pytest.approx(expected["lr"], rel=1e-15, abs=0), g
        assert result["scale"] == expected["scale"], g
        assert result["applied"] == expected["applied"], g  # AdamW's step count: the same steps skipped
        for s, draw in result["draws"].items():  # the random state continued as in one uninterrupted run
            assert draw == expected["draws"][s], (g, s)
        for s, norm in result["norms"].items():
            assert norm == pytest.approx(expected["norms"][s], rel=1e-9, nan_ok=True), (g, s)
    return results, expected


# ------------------------------------------------------------------ the tests
@pytest.mark.slow
def test_a_kill_and_a_rejoin_with_clipping_a_scheduler_dropout_and_a_loss_scaler():
    """N = 4, consecutive r = 2, m = 2: group 0 is killed at a random moment, then repaired and healed.

    The survivors and the rejoined group end where the fault-free micro-batch-wise run
    ends (parameters, AdamW moments, the scheduler's LR, the loss scale, the random draws
    of the loop), and the step whose gradient holds a NaN is skipped on every rank.
    """
    config = {"layout": spare_opt.consecutive(GROUPS, 2), "seed": 11, "scaler": True, "check_every": 4}
    job = run_job(config, [("kill", 0, 3), ("repair", 0, 7)], seed=11, worker=worker, timeout=240.0)
    results, expected = assert_exact(job, config, [0, 1, 2, 3])
    assert results[0]["rejoined"] and 0 < results[0]["start"] < STEPS
    assert math.isnan(expected["norms"][NAN_STEP]) and expected["applied"] == STEPS - 1  # the NaN step skipped
    assert all(sorted(r["members"]) == [0, 1, 2, 3] for r in results.values())
    for g, result in results.items():
        events = [name for name, _, _ in result["timeline"]]
        assert "healed" in events and "checked" in events, (g, events)
        healed = next(extra["step"] for name, _, extra in result["timeline"] if name == "healed")
        checked = [extra["step"] for name, _, extra in result["timeline"] if name == "checked"]
        assert healed in checked, (g, healed, checked)  # checked right after the heal


def test_a_wipe_out_restarts_with_the_scheduler_and_the_random_state():
    """Groups 1 and 2 (the only holders of shard type 2) die: every group restarts from the checkpoint."""
    config = {"layout": spare_opt.consecutive(GROUPS, 2), "seed": 12, "checkpoint_every": 4,
              "die": {"group": 2, "event": "agree", "epoch": 1}}
    job = run_job(config, [("kill", 1, 6)], seed=12, worker=worker, timeout=240.0)
    assert any(name == "restart" for name, _, _ in job["events"]), job["events"]
    results, _ = assert_exact(job, config, [0, 1, 2, 3])
    for result in results.values():
        assert result["generation"] == 1 and result["start"] in (4, 8), result["start"]
        assert any(name == "restored" for name, _, _ in result["timeline"])


def test_a_diverged_replica_is_named_within_k_steps():
    """Group 2's schedule restarts at step 4 (another learning rate): every rank raises ReplicaDivergence naming it."""
    every, at = 3, 4
    config = {"layout": spare_opt.consecutive(GROUPS, 2), "seed": 13, "check_every": every,
              "diverge": {"group": 2, "step": at}}
    job = run_job(config, [], seed=13, worker=worker, timeout=240.0)
    assert sorted(job["results"]) == [0, 1, 2, 3], job["codes"]
    errors = [r["error"] for r in job["results"].values()]
    assert all(e is not None and e["groups"] == [2] for e in errors), errors
    assert len({e["step"] for e in errors}) == 1 and at <= errors[0]["step"] <= at + every, errors
    assert "group" in errors[0]["message"] and "[2]" in errors[0]["message"]


def test_a_divergence_without_a_majority_blames_neither_side():
    """Two groups that disagree (or two halves): the check cannot tell which is wrong, and the message says so."""
    tie = str(ReplicaDivergence(5, [1], [0], ["parameters"]))
    assert "groups [0] and groups [1] disagree in their parameters" in tie and "either may be the wrong one" in tie
    assert "differ from" not in tie
    halves = ReplicaDivergence(5, [2, 3], [0, 1], ["optimizer state"])
    assert halves.groups == [2, 3] and "neither is a majority" in str(halves)
    majority = str(ReplicaDivergence(5, [2], [0, 1, 3], ["parameters"]))
    assert "groups [2] differ from groups [0, 1, 3]" in majority and "majority" not in majority


def test_a_rank_that_never_starts_ends_every_other_rank_within_the_timeout():
    """N = 4, timeout 4 s: group 2's process never builds its SpareGroup; the others raise GroupTimeout, none hangs."""
    out = __import__("tempfile").mkdtemp(prefix="spare-never-")
    config = {"layout": spare_opt.consecutive(GROUPS, 2), "seed": 15, "absent": 2, "timeout": 4.0, "out": out}
    supervisor = Supervisor(worker, GROUPS, args=(config,))
    supervisor.start()
    codes = supervisor.run(timeout=120.0)
    outcomes = {g: torch.load(os.path.join(out, f"error{g}.pt")) for g in (0, 1, 3)}
    assert all(o["type"] == "GroupTimeout" and o["groups"] == [2] for o in outcomes.values()), outcomes
    assert all(3.9 <= o["seconds"] <= 4.0 + 10.0 for o in outcomes.values()), outcomes
    assert codes[2] == 0 and all(codes[g] != 0 for g in (0, 1, 3)), codes


def test_a_rank_with_another_layout_fails_the_supervised_job():
    """Group 1 builds another layout and registers first: every rank stops with LayoutError and run() raises it.

    The odd group used to be the one left waiting (the others' LayoutError left it
    alone), or, registering later, a failed group that the job trained on without.
    """
    out = __import__("tempfile").mkdtemp(prefix="spare-odd-")
    config = {"layout": spare_opt.consecutive(GROUPS, 2), "seed": 14, "odd_layout": 1, "timeout": 20.0,
              "out": out, "start_delay": {0: 1.0, 2: 1.0, 3: 1.0}}
    supervisor = Supervisor(worker, GROUPS, args=(config,))
    supervisor.start()
    started = time.monotonic()
    with pytest.raises(spare_opt.LayoutError, match="differs"):
        supervisor.run(timeout=120.0)
    assert time.monotonic() - started < 60.0
    assert supervisor.exit_codes == {g: LAYOUT_EXIT for g in range(GROUPS)}, supervisor.exit_codes
    assert not any(name == "death" for name, _, _ in supervisor.events)
    outcomes = {g: torch.load(os.path.join(out, f"error{g}.pt")) for g in range(GROUPS)}
    assert all(o["type"] == "LayoutError" and o["seconds"] < 20.0 for o in outcomes.values()), outcomes


def test_the_hook_sees_the_global_gradient_and_the_state_round_trips(tmp_path):
    """One group (N = 1): the hook reads the mean gradient; the registered state is in the checkpoint and heals back."""
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    config = {"seed": 3}
    model, optimizer, scheduler, _ = build(config)
    dataset = text_dataset()
    group = SpareGroup(spare_opt.consecutive(1, 1), 0, dist.PrefixStore("gen/0", store), micro_batches=2)
    try:
        sampler = SpareBatchSampler(group, len(dataset), 4, steps=3, seed=3)
        seen = []

        def before_step(step):
            seen.append([p.grad.clone() for p in step.parameters])
            return step.step != 1  # step 1 skipped

        def loss_fn(model, batch):
            x, y = batch
            return F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))

        helper = SpareStep(group, model, optimizer, loss_fn, sampler, dataset, before_step=before_step,
                           state={"scheduler": scheduler}, checkpoint=tmp_path / "c.pt", checkpoint_every=1)
        for _ in range(3):
            helper()
            scheduler.step()
        assert len(seen) == 3 and int(optimizer.state_dict()["state"][0]["step"]) == 2  # one step skipped
        helper.save_checkpoint()
        saved = torch.load(tmp_path / "c.pt", weights_only=False)
        assert saved["step"] == 3 and saved["state"]["scheduler"]["last_epoch"] == 3
        with pytest.raises(spare_opt.SpareError):
            SpareStep(group, model, optimizer, loss_fn, sampler, dataset, state={"scheduler": 3})
    finally:
        group.close()


def test_the_final_state_and_the_users_entries_are_in_the_checkpoint(tmp_path):
    """One group (N = 1), 3 steps, a checkpoint every 2: the file ends with the state after step 3 and the user's entries.

    The checkpoint used to be written only when a checkpointed step began (here step 2),
    so the trained state was never in it, and it held nothing of the user's (nanoGPT's
    ``sample.py`` reads ``model_args`` beside ``model``).
    """
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    dataset = text_dataset()
    path = tmp_path / "c.pt"
    best = {"val_loss": 9.0}

    group = SpareGroup(spare_opt.consecutive(1, 1), 0, dist.PrefixStore("gen/0", store), micro_batches=2)
    try:
        model, optimizer, _, _ = build({"seed": 3})
        sampler = SpareBatchSampler(group, len(dataset), 4, steps=3, seed=3)
        helper = SpareStep(group, model, optimizer, byte_lm_loss, sampler, dataset, checkpoint=path, checkpoint_every=2,
                           checkpoint_extra=lambda: {"model_args": {"width": 16}, "best": dict(best)})
        assert helper.restored_extra == {}
        while helper.step < 3:
            helper()
            best["val_loss"] -= 1.0
        saved = torch.load(path, weights_only=False)
        assert saved["step"] == 3 and saved["model_args"] == {"width": 16}
        assert saved["best"] == {"val_loss": 7.0}  # called at the final save, after step 3's update
        assert all(torch.equal(saved["model"][k], v) for k, v in model.state_dict().items())
        # A restart from it: the final state, the user's entries back, nothing left to run.
        again, optimizer2, _, _ = build({"seed": 4})
        restarted = SpareStep(group, again, optimizer2, byte_lm_loss, SpareBatchSampler(group, len(dataset), 4, steps=3,
                                                                                   seed=3),
                              dataset, checkpoint=path, checkpoint_every=2)
        assert restarted.step == 3 and restarted.restored_extra == {"model_args": {"width": 16},
                                                                    "best": {"val_loss": 7.0}}
        assert all(torch.equal(a, b) for a, b in zip(again.parameters(), model.parameters()))
        for bad, kind in (({"model": 1}, spare_opt.ParameterError), (3, spare_opt.ParameterTypeError),
                          ({1: 2}, spare_opt.ParameterTypeError)):
            with pytest.raises(kind):
                SpareStep(group, model, optimizer, byte_lm_loss, sampler, dataset, checkpoint_extra=bad)
        helper.checkpoint_extra = lambda: {"step": 0}
        with pytest.raises(spare_opt.ParameterError, match="may not name 'step'"):
            helper.save_checkpoint()
    finally:
        group.close()


def test_a_checkpoint_of_another_job_is_refused_and_every_resume_is_said(tmp_path, capfd):
    """A checkpoint left by another job (another seed, global batch or model) is refused; a resume says so on stderr.

    The file used to be resumed silently, whatever job wrote it.  Another number of
    steps continues the same run (the line says so); a file with no job record (an
    earlier version's) is resumed with a note.
    """
    from spare_opt.torch import CheckpointMismatch

    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    dataset = text_dataset()
    path = tmp_path / "c.pt"

    group = SpareGroup(spare_opt.consecutive(1, 1), 0, dist.PrefixStore("gen/0", store), micro_batches=2)
    try:
        model, optimizer, _, _ = build({"seed": 3})
        sampler = SpareBatchSampler(group, len(dataset), 4, steps=2, seed=3)
        helper = SpareStep(group, model, optimizer, byte_lm_loss, sampler, dataset, checkpoint=path)
        while helper.step < 2:
            helper()
        capfd.readouterr()
        assert torch.load(path, weights_only=False)["spare_job"]["seed"] == 3

        def resume(seed=3, batch=4, steps=2, model_seed=4, width=16):
            again, again_optimizer, _, _ = build({"seed": model_seed})
            if width != 16:
                again = TinyGPT(width=width).to(torch.float64)
                again_optimizer = torch.optim.AdamW(again.parameters(), lr=LR)
            sampler = SpareBatchSampler(group, len(dataset), batch, steps=steps, seed=seed)
            return SpareStep(group, again, again_optimizer, byte_lm_loss, sampler, dataset, checkpoint=path)

        for other, named in (({"seed": 5}, "seed 3 there, 5 here"), ({"batch": 8}, "global_batch_size 4 there, 8 here")):
            with pytest.raises(CheckpointMismatch, match=r"written by another job \(" + named) as caught:
                resume(**other)
            assert caught.value.path == str(path)
        # The whole job stops (a restart would meet the same file): a group that starts now is refused at once.
        assert "written by another job" in store.get("gen/0/fatal").decode()
        with pytest.raises(spare_opt.LayoutError, match="the job stops: checkpoint .* written by another job"):
            SpareGroup(spare_opt.consecutive(1, 1), 0, dist.PrefixStore("gen/0", store), micro_batches=2, rejoin=True,
                       timeout=5)
        store.delete_key("gen/0/fatal")
        resumed = resume(steps=5)
        assert resumed.step == 2
        err = capfd.readouterr().err
        assert f"resumes from checkpoint {path} at step 2" in err and "a job of 2 steps; this one has 5" in err
        resume()
        assert "this job has 2 steps: nothing is left to train" in capfd.readouterr().err
        saved = torch.load(path, weights_only=False)
        del saved["spare_job"]
        torch.save(saved, path)
        resume()
        assert "records no job" in capfd.readouterr().err
        with pytest.raises(CheckpointMismatch, match="does not fit this model") as caught:
            resume(width=8)
        assert "size mismatch for" in str(caught.value) and "\n" not in str(caught.value)  # torch's keys, one line
        store.delete_key("gen/0/fatal")
        torch.save({"weights": 1}, path)
        with pytest.raises(CheckpointMismatch, match="holds no SpareStep state"):
            resume()
    finally:
        group.close()


def test_the_micro_batch_stream_is_a_pure_function_of_its_identity_and_leaves_the_outer_stream_alone():
    """Same identity, same draws, whatever came before; another identity, other draws; the outer stream goes on."""
    from spare_opt.torch import micro_batch_generator, micro_batch_seed

    torch.manual_seed(0)
    outer = torch.rand(3)
    torch.manual_seed(0)
    with micro_batch_rng(7, 4, 2, 1):
        first = torch.rand(5)
    torch.rand(100)  # another history
    with micro_batch_rng(7, 4, 2, 1):
        again = torch.rand(5)
    assert torch.equal(first, again)
    torch.manual_seed(0)
    with micro_batch_rng(7, 4, 2, 1):
        torch.rand(1000)
    assert torch.equal(torch.rand(3), outer)  # the micro-batch's draws did not shift the outer stream
    seeds = {micro_batch_seed(7, s, t, j) for s in range(4) for t in range(4) for j in range(4)}
    assert len(seeds) == 64 and all(0 <= seed < 2 ** 63 for seed in seeds)
    assert micro_batch_seed(7, 4, 2, 1) != micro_batch_seed(8, 4, 2, 1)
    assert torch.equal(torch.rand(5, generator=micro_batch_generator(7, 4, 2, 1)), first)

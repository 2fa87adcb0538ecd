"""One DP group (N = 1) of ``examples/launch/llama.py``'s model on a mesh, one step, checked against the whole model.

Run by ``tests/test_group_meshes.py`` under ``torchrun --nproc-per-node 4`` with the
mesh's sizes as arguments (``--pp 2 --tp 2``, ``--dp-shard 2 --tp 2``, ...): every rank
builds the whole model too, on its own, with the same initial weights and the global
batch, and checks that the step helper's mean loss, the global gradient norm of
``step.clip_grad_norm_`` (in ``before_step``) and its local gradient slices equal the
whole model's (float64, no dropout); then that its part of a checkpoint loads with
``torch.load``'s defaults and restores its slice.  Prints ``ok`` on rank 0, or raises.
"""

import copy
import importlib.util
import os
import sys
from pathlib import Path

import torch

def pytest_approx(values, relative=1e-12):
    """``values`` as a list that equals another within ``relative`` (no pytest in a worker)."""
    class Close(list):
        def __eq__(self, other):
            return len(other) == len(self) and all(abs(a - b) <= relative * abs(b) for a, b in zip(other, self))

    return Close(values)


_spec = importlib.util.spec_from_file_location(
    "launch_llama", Path(__file__).resolve().parent.parent / "examples" / "launch" / "llama.py")
llama = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llama)


def main(argv):
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    args = llama.parse(["--groups", "1", "--redundancy", "1", "--micro-batches", "3", "--steps", "1",
                        "--out", os.environ["CHECK_OUT"], *argv])
    job = llama.join_job()
    run = llama.build(args, job)
    for module in (run.model if isinstance(run.model, list) else [run.model]):
        for sub in module.modules():
            if isinstance(sub, torch.nn.Dropout):
                sub.p = 0.0
    seen = {}

    def before_step(step):
        seen["grads"] = [p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad.clone()
                         for p in step.parameters]
        seen["norm"] = float(step.clip_grad_norm_(1e9))  # a norm far below: nothing clipped
        return False  # compare the gradient, not a step of AdamW

    step = llama.SpareStep(run.group, run.model, run.optimizer, run.loss, run.sampler, run.dataset,
                           stages=run.stages, schedule=args.schedule, before_step=before_step)
    step()

    torch.manual_seed(args.seed)
    whole = llama.Llama(dim=args.dim, hidden=2 * args.dim, layers=args.layers, dropout=0.0)
    batch = run.sampler.global_batch(0).tolist()
    inputs, targets = run.dataset[batch]
    size = len(batch) // 3  # m = 3 micro-batches of the one shard type
    loss = sum(llama.lm_loss(whole(inputs[i * size:(i + 1) * size]), targets[i * size:(i + 1) * size])
               for i in range(3)) / 3
    loss.backward()
    expected_norm = float(torch.sqrt(sum((p.grad ** 2).sum() for p in whole.parameters())))
    assert abs(step.loss - float(loss)) <= 1e-12 * abs(float(loss)), (step.loss, float(loss))
    assert abs(seen["norm"] - expected_norm) <= 1e-12 * expected_norm, (seen["norm"], expected_norm)
    named = dict(whole.named_parameters())
    parts = run.model if isinstance(run.model, list) else [run.model]
    mine = [(name, p) for part in parts for name, p in part.named_parameters()]
    for (name, p), grad in zip(mine, seen["grads"]):
        reference = named[name.replace("_orig_mod.", "")].grad
        assert grad.shape == reference.shape, (name, grad.shape, reference.shape)
        assert float((grad - reference).abs().max()) <= 1e-12 * float(reference.abs().max() + 1e-300), name
    # Evaluation through a schedule of one's own over the same submodule (docs/launch.md): the whole model's losses.
    if run.stages is not None and len(run.stages) == 1:
        from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

        stage = run.stages[0]
        evaluation = ScheduleGPipe(PipelineStage(stage.submod, stage.stage_index, stage.num_stages, stage.device,
                                                 group=stage.group), 3, loss_fn=llama.lm_loss)
        found = []
        if stage.is_first:
            evaluation.eval(inputs, target=targets, losses=found)
        elif stage.is_last:
            evaluation.eval(target=targets, losses=found)
        else:
            evaluation.eval()
        if stage.is_last:
            with torch.no_grad():
                expected = [float(llama.lm_loss(whole(inputs[i * size:(i + 1) * size]), targets[i * size:(i + 1) * size]))
                            for i in range(3)]
            assert [float(x) for x in found] == pytest_approx(expected), (found, expected)

    # A per-rank part of the checkpoint (sharded tensors as local shards) loads with torch.load's defaults
    # (weights_only=True, as a sampling script reads it) and restores this rank's slice exactly.
    path = os.path.join(args.out, "check.pt")
    step.save_checkpoint(path)
    part = torch.load(f"{path}.rank{job.group_rank}")
    before = [p.detach().clone() for p in step.parameters]
    with torch.no_grad():
        for p in step.parameters:
            p.zero_()
    step.load_state_dict(step._restore(part))
    for p, saved in zip(step.parameters, before):
        assert torch.equal(p.full_tensor() if hasattr(p, "full_tensor") else p,
                           saved.full_tensor() if hasattr(saved, "full_tensor") else saved)
    if job.group_rank == 0:
        print(f"ok loss {step.loss:.12f} norm {seen['norm']:.12f}", flush=True)
    run.group.close()


if __name__ == "__main__":
    llama.run_worker(main, sys.argv[1:])

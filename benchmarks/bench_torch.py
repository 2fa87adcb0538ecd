"""Benchmark: spare_opt.torch on real processes (CPU, gloo): recovery timeline and fault-free overhead.

1. **Recovery timeline.**  ``--kills`` jobs of ``N = 4`` groups (Sidon offsets {0, 1},
   ``r = 2``, ``m`` micro-batches) train the small model of ``examples/training_job.py`` for
   16 steps; in each, a random group is SIGKILLed after a random number of steps and a
   random delay of 0-30 ms (so the kill lands in the compute or in the all-reduce).
   ``spare_opt.torch.recovery_phases`` splits the recovery of the survivor that
   recovered last into detection, agreement, plan, rebuild and patch; the table gives
   their median and worst, the whole recovery (kill to the step's gradient applied)
   and spare-opt's own compute on that path (the plan of the agreed failed set and
   the patch plan; the rest is waiting on the store, gloo and the model).  The ranks are
   forked from a server that imported torch and warmed the kernels (``warm_up``).

2. **Fault-free overhead.**  One job of the same ``N = 4`` ranks runs two training loops
   on the same model, data and gloo group, in alternating blocks of ``--block`` steps
   (``--blocks`` of each, after ``--warm-steps``; a barrier around every block), so
   drift in the machine's load falls on both:

   * *plain*: a ``DataLoader`` over a plain batch sampler that yields this rank's block
     of the global batch in ``m`` micro-batches, gradient accumulation, one
     ``all_reduce`` (SUM) of the flattened gradients, divide by ``N m``,
     ``optimizer.step()``;
   * *spare*: ``SpareBatchSampler`` in a ``DataLoader`` and ``SpareStep`` (the wait on
     the collective or the abort flag, the plan's work, the step's record).

   The overhead is the median over the block pairs of ``spare / plain - 1`` (and
   ``sum(spare) / sum(plain) - 1``); beside the wall time, each rank's CPU time
   (``time.process_time``, all its threads) per step, which other jobs on the machine
   disturb much less: its overhead is the median over the ranks of the ratio of the sums.
   ``SpareGroup``'s heartbeat thread runs during both loops; its cost is measured
   apart: the store round trips of one heartbeat (against a ``TCPStore`` in this
   process) over the heartbeat interval.  Two model sizes: the example's (8-16-1, a
   step of Python overhead only: the worst case for a fixed per-step cost) and a
   256-1024-1 perceptron (float32, 64 samples per micro-batch).

3. **Replica-consistency check.**  What ``SpareStep`` adds on a checked step (every
   ``check_every`` steps): the three float64 checksums of the parameters, the optimizer's
   state tensors and hyper-parameters (``SpareStep._digest``), timed in one process
   beside the optimizer's own ``step()`` and one micro-batch's forward and backward of
   the same model (AdamW with its moments filled; medians of ``--check-reps``), for the
   example's GPT-style model (float64), a 256-1024-1 perceptron and a 2048-4096-2048
   MLP (float32).  The check's checksums travel in the step's gradient all-reduce
   (``25 N`` more entries, no collective of its own); their share of that buffer is
   given for ``N = 4``.

Usage::

    python benchmarks/bench_torch.py                 # both parts, table on stdout
    python benchmarks/bench_torch.py --json
    python benchmarks/bench_torch.py --kills 12 --blocks 20 --block 10
    python benchmarks/bench_torch.py --skip-recovery --skip-overhead    # the check's cost alone
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

import spare_opt
from spare_opt.torch import RECOVERY_PHASES, SpareBatchSampler, SpareGroup, SpareStep, Supervisor, global_batch_indices

sys.path.append(str(Path(__file__).resolve().parent.parent / "examples"))  # the example job
from training_job import loss_fn, make_dataset, make_model, recovery_timeline, run_job  # noqa: E402

GROUPS = 4
HEARTBEAT_INTERVAL = 0.05  # SpareGroup's default
MODELS = {
    "example 8-16-1 float64": {"features": 8, "hidden": 16, "dtype": "float64", "micro_batch": 4},
    "mlp 256-1024-1 float32": {"features": 256, "hidden": 1024, "dtype": "float32", "micro_batch": 64},
}


# ---------------------------------------------------------------- recovery timeline
def recovery_rows(kills, micro_batches, seed):
    """One job per kill: a random group SIGKILLed after a random step and 0-30 ms."""
    import random

    rng = random.Random(seed)
    layout = spare_opt.sidon(GROUPS, 2, seed=0)
    config = {"layout": layout, "micro_batches": micro_batches, "steps": 16,
              "global_batch_size": 4 * GROUPS * micro_batches, "step_sleep": 0.005}
    rows, codes = [], []
    for index in range(kills):
        victim, after = rng.randrange(GROUPS), rng.randrange(3, 10)
        job = run_job(config, [("kill", victim, after)], seed=seed + index, timeout=300.0)
        codes.append(job["codes"])
        rows += recovery_timeline(job)
    return rows, codes


def summarise(rows):
    keys = list(RECOVERY_PHASES) + ["total", "plan_compute", "patch_plan", "spare_opt"]
    return {key: {"median_ms": 1e3 * statistics.median(r[key] for r in rows),
                  "worst_ms": 1e3 * max(r[key] for r in rows)} for key in keys}


# ---------------------------------------------------------------- fault-free overhead
class BlockSampler(torch.utils.data.Sampler):
    """Rank ``g``'s block of every step's global batch, in ``m`` micro-batches (the plain loop's sampler)."""

    def __init__(self, dataset_size, global_batch_size, groups, group, micro_batches, steps, seed):
        super().__init__()
        self.args = (dataset_size, global_batch_size, seed)
        self.block = global_batch_size // groups
        self.group, self.micro_batches, self.steps = group, micro_batches, steps

    def __iter__(self):
        size, batch, seed = self.args
        part = self.block // self.micro_batches
        for step in range(self.steps):
            mine = global_batch_indices(size, batch, step, seed=seed)[self.group * self.block:][:self.block]
            for j in range(self.micro_batches):
                yield mine[j * part:(j + 1) * part].tolist()

    def __len__(self):
        return self.steps * self.micro_batches


def _barrier(group):
    # SpareGroup's process group between the live groups (torch's default group is not used).
    if not group.all_reduce(torch.zeros(1)):
        raise RuntimeError("a group failed during the overhead benchmark")


def overhead_worker(context, config):
    """Alternate blocks of plain steps and SpareStep steps on the same ranks, model and process group."""
    torch.set_num_threads(1)
    store = Supervisor.connect(context)
    dataset = make_dataset(config)
    model, optimizer = make_model(config)
    params = [p for p in model.parameters()]
    m, block, blocks, warm = config["micro_batches"], config["block"], config["blocks"], config["warm_steps"]
    total = GROUPS * m
    group = SpareGroup(config["layout"], context.group, store, micro_batches=m)
    spare_sampler = SpareBatchSampler(group, len(dataset), config["global_batch_size"], seed=config["seed"])
    spare_loader = torch.utils.data.DataLoader(dataset, batch_sampler=spare_sampler)
    spare_step = SpareStep(group, model, optimizer, loss_fn, spare_sampler, dataset, loader=spare_loader)
    plain_sampler = BlockSampler(len(dataset), config["global_batch_size"], GROUPS, context.group, m,
                                 warm + block * blocks, config["seed"])
    plain_loader = iter(torch.utils.data.DataLoader(dataset, batch_sampler=plain_sampler))

    def plain_step():
        optimizer.zero_grad()
        for _ in range(m):
            loss_fn(model, next(plain_loader)).backward()
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        if not group.all_reduce(flat):  # SUM over the same gloo process group as SpareStep's
            raise RuntimeError("a group failed during the overhead benchmark")
        flat.div_(total)
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        optimizer.step()

    steps = {"plain": plain_step, "spare": spare_step}
    for _ in range(warm):
        plain_step()
        spare_step()
    times = {"plain": [], "spare": [], "plain_cpu": [], "spare_cpu": []}
    profiles = None
    if config.get("profile") and context.group == 0:
        import cProfile

        profiles = {"plain": cProfile.Profile(), "spare": cProfile.Profile()}
    for index in range(blocks):
        for mode in ("plain", "spare") if index % 2 == 0 else ("spare", "plain"):
            _barrier(group)
            start, cpu = time.perf_counter(), time.process_time()
            if profiles:
                profiles[mode].enable()
            for _ in range(block):
                steps[mode]()
            if profiles:
                profiles[mode].disable()
            cpu = time.process_time() - cpu
            _barrier(group)
            times[mode].append((time.perf_counter() - start) / block)
            times[f"{mode}_cpu"].append(cpu / block)
    if profiles:
        for mode, profile in profiles.items():
            profile.dump_stats(os.path.join(config["out"], f"{mode}.prof"))
    path = os.path.join(config["out"], f"{context.group}.json")
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(times, handle)
    os.replace(path + ".tmp", path)
    group.close()


def heartbeat_cost(samples=300):
    """Seconds of store work in one heartbeat of N = 4 (what SpareGroup's thread does every interval)."""
    import datetime

    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    store = dist.PrefixStore("gen/0", dist.TCPStore("127.0.0.1", master.port, is_master=False,
                                                    wait_for_workers=False,
                                                    timeout=datetime.timedelta(seconds=30)))
    keys = [f"hb/{g}" for g in range(GROUPS)]
    for g in range(GROUPS):
        store.set(f"hb/{g}", "0")
    durations = []
    for count in range(samples):
        start = time.perf_counter()
        store.set("hb/0", str(count))
        store.multi_get(keys)
        store.check(["abort/0"])
        store.add("deaths", 0)
        store.add("pending_rejoins", 0)
        durations.append(time.perf_counter() - start)
    return statistics.median(durations)


def overhead_rows(models, micro_batches, block, blocks, warm_steps, seed, profile=False):
    layout = spare_opt.sidon(GROUPS, 2, seed=0)
    rows = []
    for name, model in models.items():
        out = tempfile.mkdtemp(prefix="spare-bench-")
        config = {"features": model["features"], "hidden": model["hidden"], "dtype": model["dtype"],
                  "micro_batches": micro_batches,
                  "global_batch_size": GROUPS * micro_batches * model["micro_batch"],
                  "block": block, "blocks": blocks, "warm_steps": warm_steps, "seed": seed,
                  "lr": 0.01, "momentum": 0.9, "layout": layout, "out": out, "profile": profile}
        config["dataset_size"] = 8 * config["global_batch_size"]
        supervisor = Supervisor(overhead_worker, GROUPS, args=(config,))
        supervisor.start()
        codes = supervisor.run(timeout=900.0)
        if any(codes.values()):
            raise RuntimeError(f"the overhead job failed: {codes}")
        with open(os.path.join(out, "0.json"), encoding="utf-8") as handle:
            times = json.load(handle)
        ratios = [s / p for s, p in zip(times["spare"], times["plain"])]
        cpu = []
        for g in range(GROUPS):
            with open(os.path.join(out, f"{g}.json"), encoding="utf-8") as handle:
                rank = json.load(handle)
            cpu.append(sum(rank["spare_cpu"]) / sum(rank["plain_cpu"]))
        params = model["features"] * model["hidden"] + model["hidden"] + model["hidden"] + 1
        if profile:
            import io
            import pstats

            for mode in ("plain", "spare"):
                text = io.StringIO()
                stats = pstats.Stats(os.path.join(out, f"{mode}.prof"), stream=text)
                stats.sort_stats("tottime").print_stats(14)
                print(f"--- rank 0, {name}, {mode} loop, {blocks * block} steps (cProfile, by own time)\n"
                      + text.getvalue().split("\n\n", 1)[-1], file=sys.stderr)
        rows.append({"model": name, "parameters": params, "micro_batches": micro_batches,
                     "micro_batch_size": model["micro_batch"], "block": block, "blocks": blocks,
                     "plain_ms": 1e3 * statistics.median(times["plain"]),
                     "spare_ms": 1e3 * statistics.median(times["spare"]),
                     "overhead": statistics.median(ratios) - 1.0,
                     "overhead_of_totals": sum(times["spare"]) / sum(times["plain"]) - 1.0,
                     "plain_cpu_ms": 1e3 * statistics.median(times["plain_cpu"]),
                     "spare_cpu_ms": 1e3 * statistics.median(times["spare_cpu"]),
                     "cpu_overhead": statistics.median(cpu) - 1.0,
                     "ratio_quartiles": statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios})
    return rows


def check_cost_rows(reps=50, seed=0):
    """Seconds of one consistency checksum against one optimizer step and one micro-batch, per model."""
    from types import SimpleNamespace

    from training_job import DEFAULTS, TinyGPT, lm_loss_fn
    from spare_opt.torch._consistency import _SLOT

    torch.set_num_threads(1)
    torch.manual_seed(seed)

    def mlp(widths, dtype):
        layers = []
        for a, b in zip(widths, widths[1:]):
            layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
        return torch.nn.Sequential(*layers[:-1]).to(dtype)

    gpt = TinyGPT(DEFAULTS["width"], context=DEFAULTS["context"]).to(torch.float64)
    tokens = torch.randint(0, 256, (4, DEFAULTS["context"]))
    cases = [
        ("example GPT (float64)", gpt, lambda m: lm_loss_fn(m, (tokens, tokens))),
        ("256-1024-1 MLP (float32)", mlp([256, 1024, 1], torch.float32),
         lambda m: m(torch.randn(64, 256)).square().mean()),
        ("2048-4096-2048 MLP (float32)", mlp([2048, 4096, 2048], torch.float32),
         lambda m: m(torch.randn(64, 2048)).square().mean()),
    ]

    def median_seconds(function):
        durations = []
        for _ in range(reps):
            start = time.perf_counter()
            function()
            durations.append(time.perf_counter() - start)
        return statistics.median(durations)

    rows = []
    for name, model, loss in cases:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
        loss(model).backward()
        optimizer.step()  # the moments exist
        helper = SimpleNamespace(model=model, optimizer=optimizer)
        digest = median_seconds(lambda: SpareStep._digest(helper))
        step = median_seconds(optimizer.step)

        def micro_batch():
            optimizer.zero_grad(set_to_none=False)
            loss(model).backward()
        compute = median_seconds(micro_batch)
        params = sum(p.numel() for p in model.parameters())
        rows.append({"model": name, "parameters": params, "checksum_ms": 1e3 * digest,
                     "optimizer_step_ms": 1e3 * step, "micro_batch_ms": 1e3 * compute,
                     "checksum_over_step": digest / step, "checksum_over_micro_batch": digest / compute,
                     "buffer_share_n4": _SLOT * GROUPS / (params + 2 + _SLOT * GROUPS)})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=12)
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--block", type=int, default=10, help="steps per timed block")
    parser.add_argument("--blocks", type=int, default=20, help="timed blocks of each loop, alternating")
    parser.add_argument("--warm-steps", type=int, default=5, help="untimed steps of each loop first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-recovery", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--profile", action="store_true",
                        help="profile rank 0's two loops (cProfile) and print their top functions on stderr")
    parser.add_argument("--skip-check", action="store_true", help="skip the consistency check's cost")
    parser.add_argument("--check-reps", type=int, default=20, help="timed repetitions of each operation (part 3)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
              "load_average": os.getloadavg(), "groups": GROUPS, "micro_batches": args.micro_batches}
    if not args.skip_recovery:
        rows, codes = recovery_rows(args.kills, args.micro_batches, args.seed)
        report["recovery"] = {"kills": args.kills, "measured": len(rows), "rows": rows,
                              "summary": summarise(rows) if rows else None, "exit_codes": codes}
    if not args.skip_overhead:
        report["overhead"] = overhead_rows(MODELS, args.micro_batches, args.block, args.blocks, args.warm_steps,
                                           args.seed, profile=args.profile)
        report["heartbeat_seconds"] = heartbeat_cost()
    if not args.skip_check:
        report["check"] = check_cost_rows(args.check_reps, args.seed)
    report["load_average_after"] = os.getloadavg()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"python {report['python']}, torch {report['torch']}, {report['cpus']} CPUs, "
          f"load average {report['load_average'][0]:.1f} -> {report['load_average_after'][0]:.1f}")
    if "recovery" in report:
        recovery = report["recovery"]
        print(f"\nRecovery after a SIGKILL: N = {GROUPS}, r = 2, m = {args.micro_batches}, "
              f"{recovery['measured']} of {recovery['kills']} kills measured (ms)")
        print(f"{'phase':<28}{'median':>10}{'worst':>10}")
        labels = {"detection": "detection", "agreement": "agreement", "plan": "plan (records + plan)",
                  "rebuild": "rebuild (gloo group)", "patch": "patch (compute + all-reduce)",
                  "total": "whole recovery", "plan_compute": "  plan of the failed set",
                  "patch_plan": "  patch plan", "spare_opt": "spare-opt's own compute"}
        for key, label in labels.items():
            cell = recovery["summary"][key]
            print(f"{label:<28}{cell['median_ms']:>10.3f}{cell['worst_ms']:>10.3f}")
        sources = {}
        for row in recovery["rows"]:
            sources[row["source"]] = sources.get(row["source"], 0) + 1
        print(f"first detected by: {sources}")
    if "overhead" in report:
        print(f"\nFault-free step, N = {GROUPS}, m = {args.micro_batches}: {args.blocks} blocks of {args.block} "
              "steps of each loop, alternating in one job (medians)")
        print(f"{'model':<26}{'params':>9}{'plain ms':>10}{'spare ms':>10}{'overhead':>10}{'of sums':>9}"
              f"  block ratio quartiles | CPU ms/step/rank: plain, spare, overhead")
        for row in report["overhead"]:
            quartiles = " ".join(f"{r:.3f}" for r in row["ratio_quartiles"])
            print(f"{row['model']:<26}{row['parameters']:>9}{row['plain_ms']:>10.3f}{row['spare_ms']:>10.3f}"
                  f"{100 * row['overhead']:>9.1f}%{100 * row['overhead_of_totals']:>8.1f}%  {quartiles} | "
                  f"{row['plain_cpu_ms']:.3f}, {row['spare_cpu_ms']:.3f}, {100 * row['cpu_overhead']:.1f}%")
        beat = report["heartbeat_seconds"]
        print(f"heartbeat thread (in both loops above): {1e3 * beat:.3f} ms of store round trips every "
              f"{1e3 * HEARTBEAT_INTERVAL:.0f} ms = {100 * beat / HEARTBEAT_INTERVAL:.2f}% of the step time at most")
    if "check" in report:
        print(f"\nReplica-consistency check, one process, 1 thread (medians of {args.check_reps}): the checksum "
              "against AdamW's step and one micro-batch's forward + backward")
        print(f"{'model':<30}{'params':>11}{'checksum ms':>13}{'AdamW step ms':>15}{'micro-batch ms':>16}"
              f"{'/ step':>8}{'/ micro-batch':>15}{'buffer share N=4':>18}")
        for row in report["check"]:
            print(f"{row['model']:<30}{row['parameters']:>11}{row['checksum_ms']:>13.3f}"
                  f"{row['optimizer_step_ms']:>15.3f}{row['micro_batch_ms']:>16.3f}"
                  f"{row['checksum_over_step']:>8.2f}{row['checksum_over_micro_batch']:>15.3f}"
                  f"{100 * row['buffer_share_n4']:>17.3f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Train a small GPT-style model with SPARe on 4 CPU ranks (gloo), SIGKILL one at a random moment, stay exact.

Usage::

    python examples/train_with_spare.py --seed 0
    python examples/train_with_spare.py --seed 3 --micro-batches 1 --dtype float32 --json
    python examples/train_with_spare.py --model mlp     # the two-layer perceptron, SGD

One process per DP group trains the causal language model of ``examples/training_job.py``
(2 pre-LN blocks, causal self-attention, a tied head, dropout 0.1) on byte tokens of
the standard library's source, as a training script usually does: AdamW with weight
decay, clipping by global norm in ``SpareStep``'s ``before_step`` hook, a warmup +
cosine ``LambdaLR`` stepped after every step and registered as state (``N = 4`` groups,
Sidon layout with ``r = 2``, ``m`` micro-batches per shard type).  Every micro-batch
draws its dropout masks from its own random stream, so the fault-free reference is a
single process that computes the same micro-batches in order.  After a random number of steps, and a random delay of
0-30 ms (so the kill lands in the compute or in the all-reduce), one random group is
killed with SIGKILL.  The survivors detect it, agree on the failed set through torch's
``TCPStore``, rebuild the gloo group, compute only the patch micro-batches and finish the
run.  The script prints the recovery timeline and the largest difference of the
survivors' final parameters from the fault-free single-process run (micro-batch by
micro-batch; for the perceptron, on the whole global batch of every step): summation
noise only (``<= 1e-12`` of the parameter scale in
float64, ``<= 1e-6`` in float32).

Needs the CPU build of PyTorch (``pip install torch==2.13.0``) and ``spare-opt[torch]``.
"""

import argparse
import json
import random
import sys
import time

import spare_opt
from spare_opt.torch import RECOVERY_PHASES

from training_job import max_difference, recovery_timeline, reference_run, run_job  # examples/training_job.py

GROUPS = 4
REDUNDANCY = 2
TOLERANCE = {"float64": 1e-12, "float32": 1e-6}


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="chooses the killed group, the step and the delay")
    parser.add_argument("--steps", type=int, default=30, help="training steps (at least 8)")
    parser.add_argument("--micro-batches", type=int, default=4, help="m, micro-batches per shard type")
    parser.add_argument("--dtype", choices=sorted(TOLERANCE), default="float64")
    parser.add_argument("--model", choices=["gpt", "mlp"], default="gpt",
                        help="the GPT-style LM (AdamW, clipping, scheduler, dropout) or the perceptron (SGD)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the text")
    args = parser.parse_args(argv)
    if args.steps < 8:
        parser.error("--steps must be at least 8")
    if args.micro_batches < 1:
        parser.error("--micro-batches must be at least 1")
    return args


def main(argv=None):
    args = parse(argv)
    rng = random.Random(args.seed)
    victim = rng.randrange(GROUPS)
    after = rng.randrange(2, args.steps - 4)
    layout = spare_opt.sidon(GROUPS, REDUNDANCY, seed=0)  # once, here: every rank gets this very layout
    config = {"layout": layout, "micro_batches": args.micro_batches, "dtype": args.dtype, "steps": args.steps,
              "global_batch_size": 4 * GROUPS * args.micro_batches, "seed": args.seed, "model": args.model}
    if args.model == "gpt":
        config.update(lr=3e-3, check_every=5)
    started = time.perf_counter()
    job = run_job(config, [("kill", victim, after)], seed=args.seed)
    wall = time.perf_counter() - started
    survivors = sorted(job["results"])
    difference, scale = max_difference(job["results"], reference_run(config))
    timeline = recovery_timeline(job)
    fingerprints = sorted({result["fingerprint"] for result in job["results"].values()})
    exact = difference <= TOLERANCE[args.dtype] * scale
    report = {
        "groups": GROUPS, "redundancy": REDUNDANCY, "offsets": list(layout.offsets),
        "model": args.model, "micro_batches": args.micro_batches, "dtype": args.dtype, "steps": args.steps,
        "seed": args.seed,
        "killed": victim, "kill_after_steps": after, "survivors": survivors,
        "exit_codes": {str(g): code for g, code in sorted(job["codes"].items())},
        "plan_fingerprints": fingerprints, "timeline": timeline,
        "max_difference": difference, "parameter_scale": scale, "tolerance": TOLERANCE[args.dtype] * scale,
        "exact": exact, "wall_seconds": wall,
        "learning_rates": sorted({result["lr"][0] for result in job["results"].values()
                                  if result.get("lr") is not None}),
        "consistency_checks": {str(g): result.get("checks", 0) for g, result in sorted(job["results"].items())},
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        model = ("GPT-style LM (2 blocks, dropout 0.1), AdamW, clipping, warmup + cosine LR" if args.model == "gpt"
                 else "two-layer perceptron, SGD")
        print(f"N = {GROUPS} groups, Sidon offsets {list(layout.offsets)} (r = {REDUNDANCY}), "
              f"m = {args.micro_batches}, {args.dtype}, {args.steps} steps, seed {args.seed}; {model}")
        print(f"SIGKILL group {victim} after step {after} (plus a random 0-30 ms); "
              f"exit codes {dict(sorted(job['codes'].items()))}")
        print(f"survivors {survivors} agree on the plan: {', '.join(fingerprints)}")
        for row in timeline:
            print(f"recovery of step {row['step']} (first detected by: {row['source']}), ms after the kill:")
            elapsed = 0.0
            for phase in RECOVERY_PHASES:
                elapsed += row[phase]
                print(f"  {phase:<10} {1e3 * row[phase]:8.2f}   (at {1e3 * elapsed:8.2f})")
            print(f"  total      {1e3 * row['total']:8.2f}   spare-opt's own compute {1e3 * row['spare_opt']:.3f} "
                  f"(plan {1e3 * row['plan_compute']:.3f}, patch plan {1e3 * row['patch_plan']:.3f})")
        if report["learning_rates"]:
            print(f"final learning rate on every survivor: {', '.join(f'{lr:.6e}' for lr in report['learning_rates'])}; "
                  f"consistency checks passed per group: {report['consistency_checks']}")
        print(f"largest |final parameter - fault-free run|: {difference:.3e} "
              f"(parameter scale {scale:.3f}, tolerance {TOLERANCE[args.dtype] * scale:.1e}): "
              f"{'exact' if exact else 'NOT EXACT'}")
        print(f"wall time {wall:.1f} s")
    agreed = len(report["learning_rates"]) <= 1
    return 0 if exact and agreed and victim not in survivors and len(survivors) == GROUPS - 1 else 1


if __name__ == "__main__":
    sys.exit(main())

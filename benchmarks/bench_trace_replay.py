"""Trace-driven runs end to end: ``replay --semantics repair`` of a 100,000-row log, ``compare``, ``simulate``.

Writes the synthetic log (``synthetic_fault_trace(nodes=2000, days=349.0, seed=21,
incidents_per_day=130.0)``, its first 100,000 events), the layout
(``spare-opt layout -N 2000 -r 8 --seed 0``) and the shipped trace's failure model
(``spare-opt fit <shipped trace> --nodes 400 -o model400.json``) into ``--dir``, then
times, in subprocesses (wall and CPU of the child):

* ``spare-opt replay LAYOUT --trace LOG --semantics repair --micro-batches 4 --json`` (the
  default 5 placements on one process), the same with ``--placement-seed 0`` (one
  placement, ``replay-1``) and with ``--workers 2`` (``replay-w2``, this tree only);
* ``spare-opt compare --trace <shipped trace> --workers 1 --json``;
* ``spare-opt simulate --failure-model model400.json --groups 69000 --allreduce-seconds
  10 --semantics repair --seeds 1 --json``: the fitted model on 69,000 groups, each
  failing like one of the traced cluster's 400 nodes (node MTBF 239 days), so that the
  system MTBF is 300 s (the paper's 5 minutes); SPARe at ``r* = 16``, the paper-600k
  preset's other timings (the all-reduce given: the preset's line in ``N`` would
  extrapolate to 690 s);

for this tree and, with ``--old ROOT``, for another checkout beside it (``ROOT`` holds
``spare_opt`` and ``spare_opt_cli``, e.g. links to ``git archive main``'s ``spare_opt``
and ``cli``), and says whether the JSON outputs agree (the ``time``/``seconds`` keys
left out).  ``--skip`` (repeatable) leaves a command out (``replay`` all three replays).

    python benchmarks/bench_trace_replay.py --dir /tmp/trace100k [--old /tmp/main_tree] [--skip replay]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SHIPPED = HERE / "spare_opt" / "data" / "infinitehbd" / "fault_trace.json"


def write_inputs(folder, rows):
    sys.path.insert(0, str(HERE))
    from spare_opt import synthetic_fault_trace

    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "model400.json"
    if not model.exists():
        subprocess.run([sys.executable, "-c", "from spare_opt_cli.main import main; main()", "fit", str(SHIPPED),
                        "--nodes", "400", "-o", str(model)], check=True, cwd=HERE, capture_output=True)

    log = folder / f"synthetic_{rows}.json"
    if not log.exists():
        doc = synthetic_fault_trace(nodes=2000, days=349.0, seed=21, incidents_per_day=130.0)
        doc["events"] = doc["events"][:rows]
        log.write_text(json.dumps(doc))
    layout = folder / "layout_2000_8.json"
    if not layout.exists():
        subprocess.run([sys.executable, "-c", "from spare_opt_cli.main import main; main()", "layout", "-N", "2000",
                        "-r", "8", "--seed", "0", "-o", str(layout)], check=True, cwd=HERE)
    return log, layout, model


def run(root, args):
    env = dict(os.environ)
    if root is not None:
        env["PYTHONPATH"] = str(root)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", "from spare_opt_cli.main import main; main()", *args],
                         check=True, capture_output=True, text=True, env=env, cwd="/tmp").stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(out)


def stripped(doc):
    if isinstance(doc, dict):
        return {k: stripped(v) for k, v in doc.items() if "time" not in k and "second" not in k}
    if isinstance(doc, list):
        return [stripped(v) for v in doc]
    return doc


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/trace100k"))
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--old", type=Path, default=None, help="root of the other code (spare_opt, spare_opt_cli)")
    parser.add_argument("--skip", choices=["replay", "compare", "simulate"], action="append", default=[])
    opts = parser.parse_args()
    log, layout, model = write_inputs(opts.dir, opts.rows)
    replay = ["replay", str(layout), "--trace", str(log), "--semantics", "repair", "--micro-batches", "4", "--json"]
    commands = {
        # the CLI's default (--seeds 5 random placements on one process), one placement, the 5 on two processes
        "replay": replay,
        "replay-1": replay + ["--placement-seed", "0"],
        "replay-w2": replay + ["--workers", "2"],
        "compare": ["compare", "--trace", str(SHIPPED), "--workers", "1", "--json"],
        "simulate": ["simulate", "--failure-model", str(model), "--groups", "69000", "--allreduce-seconds", "10",
                     "--semantics", "repair", "--seeds", "1", "--json"],
    }
    trees = [("this tree", HERE)] + ([("old", opts.old)] if opts.old else [])
    for name, command in commands.items():
        if name.split("-")[0] in opts.skip:
            continue
        docs = []
        for label, root in trees:
            if name == "replay-w2" and root is not HERE:
                continue  # older trees have no --workers for replay
            wall, cpu, doc = run(root, command)
            docs.append(stripped(doc))
            print(f"{name:8s} {label:10s} wall {wall:7.1f} s  cpu {cpu:7.1f} s", flush=True)
        if len(docs) == 2:
            print(f"{name:8s} outputs {'identical' if docs[0] == docs[1] else 'DIFFER'}", flush=True)


if __name__ == "__main__":
    main()

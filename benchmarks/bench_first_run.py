"""First run of spare-opt: import time, numba compilation per kernel, the demo's phases.

Usage::

    python benchmarks/bench_first_run.py import [--ref 7a93341 ...] [--runs 9]
    python benchmarks/bench_first_run.py demo [--cache-dir DIR] [--ref COMMIT]
    python benchmarks/bench_first_run.py kernels COMMAND...   # which kernels a CLI command compiles

``import`` times ``import spare_opt`` (in a fresh interpreter each time, alternating
between this tree and the tree of ``--ref``, extracted with ``git archive``) and prints
the medians.  ``demo`` runs ``spare-opt demo`` in a fresh interpreter with
``NUMBA_CACHE_DIR`` pointed at an empty folder (then again with the cache it filled) and
reports where the time goes, in wall and CPU seconds (CPU is what compilation costs on
an idle core): imports, the Sidon layout, numba compilation of each kernel (numba's
``numba:compile`` events, exclusive of the kernels it calls), the replays.  ``kernels`` lists the numba dispatchers that a command compiled or loaded.
Timings on a shared machine are noisy: compare figures of one run, and repeat.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_IMPORT = "import time; t = time.perf_counter(); import spare_opt; print(time.perf_counter() - t)"

# Runs in a fresh interpreter: the demo with timers around its phases and numba's compile events.
_DEMO = r'''
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import spare_opt
t_import, c_import = time.perf_counter() - t0, time.process_time() - c0
from numba.core import event
import spare_opt.layouts.generators as generators
import spare_opt.simulation.replay as replay_module
phases = {"import spare_opt": t_import}
cpu = {"import spare_opt": c_import}
compile_stack, exclusive = [], {}

class Compiles(event.Listener):
    def on_start(self, ev):
        compile_stack.append([ev.data["dispatcher"].py_func.__qualname__, time.process_time(), 0.0])

    def on_end(self, ev):
        name, start, children = compile_stack.pop()
        spent = time.process_time() - start
        exclusive[name] = exclusive.get(name, 0.0) + spent - children
        if compile_stack:
            compile_stack[-1][2] += spent

event.register("numba:compile", Compiles())

def timed(label, function):
    def wrapper(*args, **kwargs):
        t, c = time.perf_counter(), time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            phases[label] = phases.get(label, 0.0) + time.perf_counter() - t
            cpu[label] = cpu.get(label, 0.0) + time.process_time() - c
    return wrapper

generators.sidon = timed("Sidon layout", generators.sidon)
replay_module.replay_trace = timed("replays (2, compilation included)", replay_module.replay_trace)
t, c = time.perf_counter(), time.process_time()
from spare_opt_cli.main import main
phases["import the CLI"], cpu["import the CLI"] = time.perf_counter() - t, time.process_time() - c
t, c = time.perf_counter(), time.process_time()
try:
    main(["demo", "--out", sys.argv[1], "--force", "--json"], standalone_mode=False)
finally:
    phases["demo command"], cpu["demo command"] = time.perf_counter() - t, time.process_time() - c
    phases["total in process"], cpu["total in process"] = time.perf_counter() - t0, time.process_time() - c0
    json.dump({"wall_seconds": phases, "cpu_seconds": cpu, "compile_cpu_seconds": exclusive}, sys.stderr)
'''

_KERNELS = r'''
import sys
from numba.core.registry import CPUDispatcher
from spare_opt_cli.main import main
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    used = sorted(f"{name}.{attr}" for name, module in list(sys.modules.items()) if name.startswith("spare_opt.")
                  for attr, value in vars(module).items()
                  if isinstance(value, CPUDispatcher) and value.__module__ == name and value.signatures)
    print("KERNELS", " ".join(used), file=sys.stderr)
'''


def _python(code, *args, env=None, cwd=None):
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode:
        raise SystemExit(done.stderr)
    return done, time.perf_counter() - started


def bench_import(refs, runs):
    with tempfile.TemporaryDirectory() as scratch:
        trees = {"this tree": str(REPO)}
        for ref in refs:
            folder = Path(scratch) / ref
            folder.mkdir()
            trees[ref] = _extract(ref, folder)
        times = {name: [] for name in trees}
        for _ in range(runs):
            for name, tree in trees.items():
                env = dict(os.environ, PYTHONPATH=tree)
                done, _ = _python(_IMPORT, env=env, cwd=tree)
                times[name].append(float(done.stdout))
    return {name: {"median_seconds": round(statistics.median(v), 3), "runs": [round(x, 3) for x in v]}
            for name, v in times.items()}


def _extract(ref, folder):
    """The tree of commit ``ref`` in ``folder``, importable as ``spare_opt`` and ``spare_opt_cli``."""
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    (Path(folder) / "spare_opt_cli").symlink_to("cli")  # as installed (pyproject's package-dir)
    return str(folder)


def bench_demo(cache_dir, ref=None):
    cache = Path(cache_dir or tempfile.mkdtemp(prefix="numba-cache-"))
    out = {"library": ref or "this tree"}
    with tempfile.TemporaryDirectory() as work:
        extra = {"PYTHONPATH": _extract(ref, Path(work))} if ref else {}
        for label in ("empty numba cache", "warm numba cache"):
            env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), **extra)
            done, wall = _python(_DEMO, str(Path(work) / "demo"), env=env, cwd=work)
            report = json.loads(done.stderr.strip().splitlines()[-1])
            report["process wall seconds"] = round(wall, 2)
            for key in ("wall_seconds", "cpu_seconds"):
                report[key] = {k: round(v, 2) for k, v in report[key].items()}
            compiles = report["compile_cpu_seconds"]
            ours = {k: v for k, v in compiles.items() if "." not in k}  # spare-opt's kernels, not numba's own
            report["compile_cpu_seconds"] = {
                "spare-opt kernels": round(sum(ours.values()), 2),
                "numba's library functions they need": round(sum(compiles.values()) - sum(ours.values()), 2),
                "by kernel": {k: round(v, 2) for k, v in sorted(ours.items(), key=lambda kv: -kv[1])},
            }
            out[label] = report
    out["cache_dir"] = str(cache)
    return out


def kernels(command):
    with tempfile.TemporaryDirectory() as work:
        done, wall = _python(_KERNELS, *command, cwd=work)
    line = [l for l in done.stderr.splitlines() if l.startswith("KERNELS")][-1]
    return {"command": command, "kernels": line.split()[1:], "seconds": round(wall, 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("import")
    p.add_argument("--ref", action="append", default=None,
                   help="git commits to compare with (repeatable; default 7a93341, the previous release)")
    p.add_argument("--runs", type=int, default=9)
    p = sub.add_parser("demo")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--ref", default=None, help="run the library and the CLI of this git commit")
    p = sub.add_parser("kernels")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.what == "import":
        result = bench_import(args.ref or ["7a93341"], args.runs)
    elif args.what == "demo":
        result = bench_demo(args.cache_dir, args.ref)
    else:
        result = kernels(args.command)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

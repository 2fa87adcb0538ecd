"""The simulation kernel's random stream: what the jitter normals cost in a ``compare`` run.

One events run of ``compare --trace <shipped trace>`` (SPARe ``r = 3``, ``m = 1``, the
trace replayed twice, placement seed 0, period 10,000 s: about 440,000 steps, two
jitter normals per step), timed side by side in one process (best of ``--repeat``):

* ``run_kernel``: the kernel drawing its normals from its block stream as it goes;
* ``run_kernel_from``: the same run on the normals drawn ahead for the seed
  (``normals_ahead``, what ``compare`` shares between the runs of a seed), the drawing
  timed apart;
* the normals alone: ``normals_ahead`` (the block stream) and a numba loop drawing the
  same number with ``np.random.normal`` (numba's stream, the kernel's before: the same
  numbers).

The outputs of the two kernel entries are checked equal.

    python benchmarks/bench_kernel_stream.py [--repeat 5]
"""

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from numba import njit

from spare_opt import read_fault_trace
from spare_opt.simulation import _kernels as K
from spare_opt.simulation._runs import _pack
from spare_opt.simulation.events import trace_events
from spare_opt.simulation.time_to_train import default_layout
from spare_opt.simulation.verdict import compare_parameters, cyclic_trace

SHIPPED = Path(__file__).resolve().parent.parent / "spare_opt" / "data" / "infinitehbd" / "fault_trace.json"


@njit
def numba_normals(seed, count):
    np.random.seed(seed)
    total = 0.0
    for _ in range(count):
        total += np.random.normal(1.0, 0.05)
    return total


def best(function, repeat):
    times = []
    for _ in range(repeat):
        start = time.process_time()
        value = function()
        times.append(time.process_time() - start)
    return min(times), value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    trace = read_fault_trace(SHIPPED)
    params = compare_parameters("trace-400", trace=trace)
    replayed = cyclic_trace(trace, 2)
    params = replace(params, max_wall_factor=2.0)  # compare's two cycles
    layout = default_layout(params.groups, 3)
    rows = trace_events(replayed, params.groups, "spare", 3, semantics="repair", layout=layout,
                        heal_seconds=params.heal_seconds, placement_seed=0).kernel_rows()
    f, i = _pack(params, "spare", 3, 10_000.0, 0, trace_mode=True)
    base = np.ones((1, 1), dtype=np.int16)
    arrays = (base, base.astype(np.float64), np.zeros(0, dtype=np.int32), rows)
    seed = int(i[K.I_SEED])
    plain = K.run_kernel(f, i, *arrays)  # compiles (or loads) the kernels
    steps = int(plain[K.R_STEPS_EXECUTED])
    count = 2 * steps
    stream = K.normals_ahead(seed, count)
    assert np.array_equal(K.run_kernel_from(f, i, *arrays, *stream), plain)
    numba_normals(seed, 10)
    figures = {
        "run_kernel (normals drawn in the run)": best(lambda: K.run_kernel(f, i, *arrays), opts.repeat)[0],
        "run_kernel_from (normals drawn ahead)": best(lambda: K.run_kernel_from(f, i, *arrays, *stream),
                                                      opts.repeat)[0],
        "normals alone, block stream (normals_ahead)": best(lambda: K.normals_ahead(seed, count), opts.repeat)[0],
        "normals alone, np.random.normal (numba)": best(lambda: numba_normals(seed, count), opts.repeat)[0],
    }
    print(f"one run: {steps:,} steps, {count:,} normals; CPU seconds, best of {opts.repeat}")
    for label, seconds in figures.items():
        print(f"{label:44s} {seconds * 1e3:7.1f} ms  {seconds / steps * 1e9:6.1f} ns/step")


if __name__ == "__main__":
    main()

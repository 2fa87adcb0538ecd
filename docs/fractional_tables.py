"""Print the repair tables of docs/fractional.md (the InfiniteHBD trace and its fitted model).

Run from the repository root:  python docs/fractional_tables.py
Every figure is the mean of 3 seeds (the seeds change the jitter, and the fitted
model's draws); the checkpoint period is the default Young/Daly T_c* of each run.
"""

import numpy as np

from spare_opt import fit_trace, packaged_trace_path, preset_parameters, read_fault_trace, simulate_seeds

SEEDS = 3


def row(label, runs):
    def mean(key):
        return float(np.mean([getattr(run, key) for run in runs]))

    return (f"| {label} | {mean('ttt_ratio'):.3f} | {mean('availability'):.2%} | {mean('mean_step_cost'):.3f} | "
            f"{mean('restarts'):.1f} | {mean('rejoins'):.0f} |")


def main():
    trace = read_fault_trace(packaged_trace_path())
    model = fit_trace(trace, nodes=400).model
    params = preset_parameters("trace-400", 400)
    header = ("| run | TTT/T0 | availability | mean step cost | restarts | rejoins |\n"
              "|---|---|---|---|---|---|")
    for title, source in (("The InfiniteHBD trace", {"trace": trace}),
                          ("Its fitted model (empirical repairs)", {"fault_model": model})):
        print(f"{title}, N = 400, trace-400 preset ({SEEDS} seeds)\n")
        print(header)
        for semantics in ("paper", "repair"):
            print(row(f"{semantics}: CKPT only", simulate_seeds(params, "ckpt", seeds=SEEDS, semantics=semantics,
                                                               **source)))
            print(row(f"{semantics}: Rep r = 3", simulate_seeds(params, "rep", 3, seeds=SEEDS, semantics=semantics,
                                                               **source)))
            for m in (1, 2, 4, 8, 16):
                runs = simulate_seeds(params, "spare", 9, seeds=SEEDS, semantics=semantics, micro_batches=m,
                                      **source)
                print(row(f"{semantics}: SPARe r = 9, m = {m}", runs))
        print()
    print(f"Heal time, repair semantics on the trace, SPARe r = 9 ({SEEDS} seeds)\n")
    print(header)
    for m in (1, 8):
        for heal in (0.0, 60.0, 600.0, 3600.0):
            runs = simulate_seeds(preset_parameters("trace-400", 400, heal_seconds=heal), "spare", 9, seeds=SEEDS,
                                  trace=trace, semantics="repair", micro_batches=m)
            print(row(f"m = {m}, heal {heal:g} s", runs))


if __name__ == "__main__":
    main()

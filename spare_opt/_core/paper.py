"""The paper's evaluation setting and its reported results (Lee et al., ICML 2026, Sec. 6).

The one place the paper's numbers live: the closed forms (:mod:`spare_opt.theory`),
the Monte-Carlo defaults and the simulation parameters all read them from here.
:mod:`spare_opt.simulation.time_to_train.parameters` re-exports every name.
"""

__all__ = ["PAPER", "PAPER_TABLE", "PAPER_MTBF_SECONDS", "PAPER_RESTART_SECONDS", "PAPER_SAVE_SECONDS"]

#: The setting of the paper's simulation (Lee et al., ICML 2026, Sec. 6): a 600k-H100
#: cluster training a 10T-parameter model for 10,000 steps.  All-reduce time grows
#: linearly from 2 s at N = 200 to 10 s at N = 1000 (:func:`allreduce_seconds`).
PAPER = {
    "groups": (200, 600, 1000),
    "steps": 10_000,
    "layer_compute_seconds": 64.0,
    "allreduce_low": (200, 2.0),
    "allreduce_high": (1000, 10.0),
    "shrink_seconds": 0.1,
    "controller_seconds": 0.1,
    "restart_seconds": 3600.0,
    "save_seconds": 60.0,
    "system_mtbf_seconds": 300.0,
    "weibull_shape": 0.78,
    "jitter_sd": 0.05,
}
#: System MTBF ``m`` of the paper's evaluation: 5 minutes.
PAPER_MTBF_SECONDS = PAPER["system_mtbf_seconds"]
#: Global restart time ``T_r`` of the paper's evaluation: 60 minutes.
PAPER_RESTART_SECONDS = PAPER["restart_seconds"]
#: Checkpoint save time ``T_s`` of the paper's evaluation: 60 seconds.
PAPER_SAVE_SECONDS = PAPER["save_seconds"]

#: The paper's time-to-train table (Lee et al., ICML 2026, Sec. 6; ``docs/reproduction.md``):
#: best TTT/T0, availability (fractions) and best r per N, Rep+CKPT (best at r = 3) and SPARe+CKPT.
PAPER_TABLE = {
    200: {"rep": 6.07, "rep_r": 3, "rep_availability": 0.6174, "spare": 2.92, "spare_r": 9,
          "spare_availability": 0.8700, "gain": 0.519},
    600: {"rep": 4.27, "rep_r": 3, "rep_availability": 0.7989, "spare": 2.49, "spare_r": 8,
          "spare_availability": 0.9390, "gain": 0.417},
    1000: {"rep": 3.88, "rep_r": 3, "rep_availability": 0.8441, "spare": 2.34, "spare_r": 9,
           "spare_availability": 0.9654, "gain": 0.396},
}

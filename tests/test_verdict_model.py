"""The verdict on a failure model builds each setting's events once per seed: every run equals simulate().

``compare(fault_model=...)`` draws one source of events per (setting, seed), shares it
by every checkpoint period and re-plans the groups still down instead of running the
online controller; the reference is the public :func:`spare_opt.simulate`, one fresh
run per period with the controller.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spare_opt import FailureModel, compare, compare_parameters, simulate

FACTORS = (0.5, 1.0, 2.0)


def _check_against_simulate(params, model, seeds, micro_batches, spares):
    result = compare(params, fault_model=model, semantics="repair", rep_redundancies=(2,),
                     spare_redundancies=spares, micro_batches=micro_batches, seeds=seeds, cycles=3,
                     period_factors=FACTORS)
    for row in result.settings:
        if row["strategy"] == "redistribute":  # no layout to simulate: its own tests (test_verdict_deploy.py)
            continue
        r = None if row["strategy"] == "ckpt" else row["redundancy"]
        for period, ratio in zip(row["periods"], row["ttt_ratio_by_period"]):
            runs = [simulate(result.params, row["strategy"], r, checkpoint_period_seconds=period, seed=seed,
                             micro_batches=row["micro_batches"], semantics="repair", fault_model=model)
                    for seed in range(seeds)]
            assert ratio == pytest.approx(np.mean([run.ttt_ratio for run in runs]), rel=1e-12)
    return result


def test_bursty_model_runs_equal_simulate_at_every_period():
    # adversarial: events of up to 4 nodes, repairs of zero length among them, failures
    # frequent enough to wipe out small r within a run
    model = FailureModel(cluster_nodes=20, event_mtbf_seconds=1800.0, weibull_shape=0.6,
                         repair_median_seconds=3600.0, repair_sigma=1.5,
                         event_size_probabilities=(0.55, 0.25, 0.1, 0.1), repair_distribution="empirical",
                         repair_empirical_seconds=(0.0, 0.0, 600.0, 7200.0, 86400.0))
    params = compare_parameters("trace-400", 30, steps=3000, step_seconds=20.0, restart_seconds=600.0,
                                save_seconds=20.0, jitter_sd=0.02)
    result = _check_against_simulate(params, model, 2, (1, 3), (2, 4))
    assert any(row["restarts"] > 0 for row in result.settings)  # the case is not trivial


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=st.integers(8, 24), shape=st.floats(0.5, 1.2), mtbf=st.floats(600.0, 7200.0),
       multi=st.floats(0.0, 0.5), m=st.integers(1, 4))
def test_random_models_runs_equal_simulate(groups, shape, mtbf, multi, m):
    model = FailureModel(cluster_nodes=12, event_mtbf_seconds=mtbf, weibull_shape=shape,
                         repair_median_seconds=1800.0, repair_sigma=1.0,
                         event_size_probabilities=(1.0 - multi, multi))
    params = compare_parameters("trace-400", groups, steps=1500, step_seconds=20.0, restart_seconds=300.0,
                                save_seconds=10.0)
    _check_against_simulate(params, model, 1, (m,), (3,))

"""From a plan to data: sample_indices covers the global batch exactly once over the live groups."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spare_opt import (
    FailureSetError,
    Layout,
    ParameterError,
    ParameterTypeError,
    PlanError,
    agreed_plan,
    micro_batch_size,
    plan_reorder,
    sample_indices,
    sample_indices_by_group,
)


def _layout(n, offsets):
    return Layout((np.arange(n)[:, None] + np.asarray(offsets)[None, :]) % n, offsets=list(offsets))


@settings(max_examples=40)
@given(n=st.integers(4, 12), m=st.integers(1, 4), per=st.integers(1, 3), seed=st.integers(0, 10**6),
       exact=st.booleans())
def test_live_groups_cover_the_batch_exactly_once(n, m, per, seed, exact):
    rng = np.random.default_rng(seed)
    layout = _layout(n, [0, 1, 3] if n > 4 else [0, 1])
    failed = rng.choice(n, size=int(rng.integers(0, n // 2 + 1)), replace=False)
    plan = agreed_plan(layout, failed, micro_batches=m, method="exact" if exact else "controller")
    if not plan.masked:
        return
    batch = n * m * per
    parts = [sample_indices(plan, g, batch) for g in range(n) if g not in failed]
    assert all(part.dtype == np.int64 for part in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(batch))
    indptr, indices = sample_indices_by_group(plan, batch)
    for g in range(n):
        expected = np.zeros(0, dtype=np.int64) if g in failed else sample_indices(plan, g, batch)
        assert np.array_equal(indices[indptr[g]:indptr[g + 1]], expected)
    # Micro-batch (t, j) is sub-block j of block t.
    g = int(np.flatnonzero(~np.isin(np.arange(n), failed))[0])
    rows = sample_indices(plan, g, batch).reshape(-1, per)
    for (t, j), row in zip(plan.work(g), rows):
        assert row.tolist() == list(range((t * m + j) * per, (t * m + j + 1) * per))


def test_patch_indices_are_the_patch_micro_batches():
    layout = _layout(5, [0, 1])
    plan = plan_reorder(layout, [2], mid_step=[2], micro_batches=2)
    assert plan.patch
    for g in range(5):
        if g == 2:
            continue
        expected = [i for t, j in plan.patch.get(g, []) for i in range((t * 2 + j) * 3, (t * 2 + j + 1) * 3)]
        assert sample_indices(plan, g, 30, patch=True).tolist() == expected


def test_a_batch_that_does_not_split_evenly_is_refused():
    plan = agreed_plan(_layout(5, [0, 1]), [2], micro_batches=2)
    with pytest.raises(ParameterError, match="does not split into N m = 5 x 2 = 10 equal micro-batches.*20 or 30"):
        sample_indices(plan, 1, 25)
    with pytest.raises(ParameterError, match="such as 10"):
        sample_indices_by_group(plan, 4)
    with pytest.raises(ParameterTypeError):
        micro_batch_size(10.0, 5)
    with pytest.raises(FailureSetError, match="failed"):
        sample_indices(plan, 2, 20)
    with pytest.raises(FailureSetError, match="failed"):
        sample_indices(plan, 2, 20, patch=True)
    with pytest.raises(PlanError, match="wipe-out"):
        sample_indices(agreed_plan(_layout(5, [0, 1]), [1, 2]), 0, 10)

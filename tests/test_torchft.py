"""The TorchFT adapter on real processes: a lighthouse, gloo on CPU, real SIGKILLs.

Each job runs one process per replica group (``torchft.Manager``, reconfigurable
``ProcessGroupGloo``, ``OptimizerWrapper``) around a lighthouse in the test process.
Through :class:`spare_opt.torch.TorchFTPlan` the survivors' final parameters must equal
those of a single-process run on the whole global batch of every step (float64: 1e-12,
float32: 1e-6, relative to the parameter scale); plain TorchFT on the same run must not
(its batch shrinks when a replica dies), so the comparison can fail.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")
os.environ.setdefault("RUST_LOG", "warn")  # torchft logs every quorum at "info"

import spare_opt
from spare_opt.torch import TorchFTPlan, WipeOut
from spare_opt.torch.demo import reference_run

TOLERANCE = {"float64": 1e-12, "float32": 1e-6}


def circulant(groups, offsets, method):
    stacks = (np.arange(groups)[:, None] + np.asarray(offsets)[None, :]) % groups
    return spare_opt.Layout(stacks, method=method, offsets=list(offsets))


def relative_differences(job, config):
    """Each finished replica's largest parameter difference from the fault-free run, over the parameter scale."""
    reference = reference_run(config)
    scale = max(float(p.abs().max()) for p in reference)
    return {g: max(float((a - b).abs().max()) for a, b in zip(result["params"], reference)) / scale
            for g, result in job["results"].items()}


def test_without_torchft_the_adapter_raises_only_when_used():
    """``import spare_opt.torch`` works without torchft; making a TorchFTPlan raises an ImportError-like SpareError."""
    code = (
        "import sys; sys.modules['torchft'] = None\n"
        "import numpy as np, spare_opt, spare_opt.torch as st\n"
        "layout = spare_opt.Layout((np.arange(4)[:, None] + np.arange(2)[None, :]) % 4)\n"
        "try:\n"
        "    st.TorchFTPlan(layout)\n"
        "except st.TorchFTMissingError as exc:\n"
        "    assert isinstance(exc, ImportError) and isinstance(exc, spare_opt.SpareError)\n"
        "    print('missing:', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "missing: TorchFTPlan needs torchft" in done.stdout, done.stdout


def test_quorum_membership_gives_the_plan():
    """The replica ids of a quorum name the live groups; their micro-batches cover the global batch once."""
    pytest.importorskip("torchft")
    layout = circulant(6, [0, 1, 3], "sidon")
    adapters = [TorchFTPlan(layout, micro_batches=2) for _ in range(6)]
    batch = torch.arange(48)
    for members in ([0, 1, 2, 3, 4, 5], [0, 2, 3, 5], [1, 2, 3, 4]):
        seen = []
        for g in members:
            adapters[g]._on_quorum(f"spare_{g}", len(members), 7, 1, list(members))
            assert adapters[g].failed == frozenset(range(6)) - set(members)
            seen += [int(i) for part in adapters[g].local_batches(batch) for i in part]
        assert sorted(seen) == list(range(48))
        assert len({adapters[g].plan.fingerprint() for g in members}) == 1
    with pytest.raises(spare_opt.ParameterError, match="end with"):
        adapters[0]._on_quorum("replica", 2, 8, 1, [0, 1])
    with pytest.raises(spare_opt.ParameterError, match="end with"):
        adapters[0].work()  # the quorum thread's error reaches the training loop
    adapters[1]._on_quorum("spare_1", 6, 9, 1, list(range(6)))
    with pytest.raises(spare_opt.ParameterError, match="multiple of N m"):
        adapters[1].local_batches(torch.arange(50))
    adapters[1]._on_quorum("spare_1", 2, 10, 1, [0, 1])  # shard type 5 lives on groups 2, 4 and 5 only
    with pytest.raises(WipeOut):
        adapters[1].work()


def test_torchft_keeps_the_global_batch_when_a_replica_dies_in_the_all_reduce():
    """N = 4, consecutive r = 2, m = 2, float64: replica 2 is SIGKILLed while its peers are in the step-5 all-reduce.

    Through the adapter the failed step is repeated under the quorum {0, 1, 3} with
    the whole batch: exact.  Plain TorchFT repeats it with the three live blocks only.
    """
    pytest.importorskip("torchft")
    from spare_opt.torch._torchft_job import run_torchft_job

    config = {"layout": circulant(4, [0, 1], "consecutive"), "micro_batches": 2, "steps": 12,
              "global_batch_size": 32, "dataset_size": 320, "dtype": "float64", "die": {"group": 2, "step": 5},
              "timeout": 10.0, "join_timeout": 2.0}
    spare = run_torchft_job({**config, "mode": "spare"})
    assert sorted(spare["results"]) == [0, 1, 3], spare["codes"]
    differences = relative_differences(spare, config)
    assert max(differences.values()) <= TOLERANCE["float64"], differences
    repeated = []
    for result in spare["results"].values():
        attempts = [(step, committed, members) for step, committed, members, _, _ in result["records"]]
        assert (5, False, [0, 1, 2, 3]) in attempts, attempts  # the step the death broke ...
        repeated += [members for step, committed, members in attempts if step == 5 and committed]
        assert result["quorums"][-1][2] == [0, 1, 3]
    assert repeated and all(2 not in members for members in repeated), repeated  # ... repeated without 2
    assert len({result["fingerprint"] for result in spare["results"].values()}) == 1

    plain = run_torchft_job({**config, "mode": "plain"})
    assert sorted(plain["results"]) == [0, 1, 3], plain["codes"]
    shrunk = relative_differences(plain, config)
    # Seven of twelve steps saw 3/4 of the batch: far from the fault-free run.
    assert min(shrunk.values()) > 1e6 * TOLERANCE["float64"], shrunk


def test_torchft_adapter_exact_after_a_random_kill_and_a_repair():
    """N = 4, consecutive r = 2, m = 1, float32: replica 1 SIGKILLed at a random moment, then started again.

    The repaired replica heals from a live peer (TorchFT's recovery) at its first
    quorum and rejoins: the plan is the fault-free one again, the same in every
    replica whatever quorums it missed, and all four end at the fault-free parameters.
    """
    pytest.importorskip("torchft")
    from spare_opt.torch._torchft_job import run_torchft_job

    config = {"layout": circulant(4, [0, 1], "consecutive"), "micro_batches": 1, "steps": 14,
              "global_batch_size": 32, "dataset_size": 320, "dtype": "float32", "mode": "spare",
              "step_sleep": 0.01, "timeout": 10.0}
    job = run_torchft_job(config, [("kill", 1, 3), ("repair", 1, 6)], seed=7)
    assert sorted(job["results"]) == [0, 1, 2, 3], job["codes"]
    assert job["results"][1]["repaired"]
    differences = relative_differences(job, config)
    assert max(differences.values()) <= TOLERANCE["float32"], differences
    for g, result in job["results"].items():
        members = [quorum[2] for quorum in result["quorums"]]
        assert members[-1] == [0, 1, 2, 3], (g, members)
        if g != 1:
            assert [0, 2, 3] in members, (g, members)  # the quorum that went on without replica 1
    assert len({result["fingerprint"] for result in job["results"].values()}) == 1

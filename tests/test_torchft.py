"""The TorchFT adapter on real processes: a lighthouse, gloo on CPU, real SIGKILLs.

Each job runs one process per rank of each replica group (``torchft.Manager``,
reconfigurable ``ProcessGroupGloo``, ``OptimizerWrapper``; with two ranks per group, a
gloo group of their own and the model sharded by FSDP2) around a lighthouse in the test
process.  Through :class:`spare_opt.torch.TorchFTPlan` the survivors' final parameters
must equal those of a single-process run on the whole global batch of every step
(float64: 1e-12, float32: 1e-6, relative to the parameter scale); plain TorchFT on the
same run must not (its batch shrinks when a replica dies), so the comparison can fail.

CI runs this file against torchft 0.2 (``configure``) and against the newest
``torchft-nightly`` (``set_rank_info`` + ``reconfigure``).
"""

import datetime
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")
os.environ.setdefault("RUST_LOG", "warn")  # torchft logs every quorum at "info"

import spare_opt
from spare_opt.torch import NoQuorumError, TorchFTPlan, WipeOut
from training_job import reference_run  # examples/training_job.py

TOLERANCE = {"float64": 1e-12, "float32": 1e-6}
#: The lighthouse's heartbeat timeout in the jobs (s): a live replica whose heartbeats stall
#: longer (a loaded 2-core machine) would get a quorum of its own, a split of the job.
HEARTBEAT_TIMEOUT = 3.0


def circulant(groups, offsets, method="consecutive"):
    stacks = (np.arange(groups)[:, None] + np.asarray(offsets)[None, :]) % groups
    return spare_opt.Layout(stacks, method=method, offsets=list(offsets))


def relative_differences(job, config, by="results"):
    """Each finished replica's (or rank's) largest parameter difference from the fault-free run, over the scale."""
    reference = reference_run(config)
    scale = max(float(p.abs().max()) for p in reference)
    return {g: max(float((a - b).abs().max()) for a, b in zip(result["params"], reference)) / scale
            for g, result in job[by].items()}


def torchft_api():
    pytest.importorskip("torchft")
    from spare_opt.torch.torchft_adapter import torchft_api as api

    return api()


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


def test_quorum_global_ranks_give_the_plan():
    """TorchFT's global ranks name the live groups (any group size); their micro-batches cover the batch once."""
    api = torchft_api()
    layout = circulant(6, [0, 1, 3], "sidon")
    adapters = [TorchFTPlan(layout, micro_batches=2) for _ in range(6)]
    assert adapters[0].api == api
    batch = torch.arange(48)
    for members in ([0, 1, 2, 3, 4, 5], [0, 2, 3, 5], [1, 2, 3, 4]):
        seen = []
        for rank, g in enumerate(members):
            adapters[g]._on_quorum(f"spare_{g}", len(members), 7, 1, list(members), rank=rank, group_rank=0)
            assert adapters[g].failed == frozenset(range(6)) - set(members)
            micro = adapters[g].micro_batches(batch, 11)
            assert [(mb.step, mb.shard_type * 2 + mb.micro_batch) for mb in micro] == [(11, k) for k in
                                                                                      adapters[g].work()]
            seen += [int(i) for part in adapters[g].local_batches(batch) for i in part]
        assert sorted(seen) == list(range(48))
        assert len({adapters[g].plan.fingerprint() for g in members}) == 1
    # Replica groups of 3 ranks: global rank = 3 g + group rank; rank 2 of each splits by samples.
    plan = TorchFTPlan(layout, micro_batches=2)
    plan._on_quorum("spare_3", 3, 8, 3, [2, 11, 17], rank=1, group_rank=2)
    assert (plan.group, plan.members, plan.group_world_size) == (3, [0, 3, 5], 3)
    whole = plan.local_batches(torch.arange(72))
    parts = plan.local_batches(torch.arange(72), split_by_rank=True)
    assert [list(p) for p in parts] == [list(w[4:6]) for w in whole]
    with pytest.raises(spare_opt.ParameterError, match="N m k = 36"):
        plan.local_batches(torch.arange(48), split_by_rank=True)
    # No replica_id on rank 1: TorchFT 0.2 numbers it from rank 0's id; the reconfigure API cannot.
    plan._on_quorum("0", 2, 9, 2, [1, 7], rank=1, group_rank=1, placeholder_refused=False)
    assert plan.group == 3
    with pytest.raises(spare_opt.ParameterError, match="no replica_id"):
        plan._on_quorum("0", 2, 9, 2, [1, 7], rank=1, group_rank=1, placeholder_refused=True)
    with pytest.raises(spare_opt.ParameterError, match="no replica_id"):
        plan.work()  # the quorum thread's error reaches the training loop
    for ranks, rank in (([1, 1, 7], 0), ([1, 6], 0), ([1, 13], 1), ([1], 0)):
        with pytest.raises(spare_opt.ParameterError, match="distinct layout groups"):
            plan._on_quorum("spare_0", 2 if len(ranks) != 1 else 3, 10, 2, ranks, rank=rank, group_rank=1)
    with pytest.raises(spare_opt.ParameterError, match="numbers its replica group 3"):
        plan._on_quorum("spare_1", 2, 11, 2, [1, 7], rank=1, group_rank=1)
    with pytest.raises(spare_opt.ParameterError, match="no global ranks"):
        plan._on_quorum("spare_1", 2, 12, 1, None, rank=1, group_rank=0)
    adapters[1]._on_quorum("spare_1", 6, 9, 1, list(range(6)), rank=1, group_rank=0)
    with pytest.raises(spare_opt.ParameterError, match="multiple of N m"):
        adapters[1].local_batches(torch.arange(50))
    adapters[1]._on_quorum("spare_1", 2, 10, 1, [0, 1], rank=1, group_rank=0)  # type 5 lives on 2, 4, 5 only
    with pytest.raises(WipeOut):
        adapters[1].work()
    adapters[1]._on_quorum("spare_1", 1, 11, 1, [1], rank=0, group_rank=0)  # alone: not a wipe-out
    with pytest.raises(NoQuorumError, match="alone in its quorum"):
        adapters[1].work()


@pytest.mark.parametrize("timeout", [float("inf"), 1e300, float("nan"), 0, -1.0, datetime.timedelta(seconds=-5),
                                     datetime.timedelta(0), datetime.timedelta(days=8)])
def test_bad_timeouts_are_refused(timeout):
    pytest.importorskip("torchft")
    with pytest.raises(spare_opt.ParameterError, match="timeout must be a positive, finite time"):
        TorchFTPlan(circulant(4, [0, 1]), timeout=timeout)


@pytest.mark.parametrize("replica_id, match", [
    ("spare_" + "9" * 5000, "names layout group 999999999999..."), ("spare_-1", "plain layout group number"),
    ("spare_1e3", "plain layout group number"), ("spare_1.5", "plain layout group number"),
    ("spare_+2", "plain layout group number"), ("spare_4", "names layout group 4"), ("replica", "plain layout"),
    ("spare_-1:0c9d", "plain layout group number")],
    ids=["5000-digits", "minus-1", "1e3", "1.5", "plus-2", "out-of-range", "no-number", "minus-1-uuid"])
def test_bad_replica_ids_are_refused(replica_id, match):
    pytest.importorskip("torchft")
    plan = TorchFTPlan(circulant(4, [0, 1]))
    with pytest.raises(spare_opt.ParameterError, match=match):
        plan._on_quorum(replica_id, 4, 1, 1, [0, 1, 2, 3], rank=1, group_rank=0)
    with pytest.raises(spare_opt.ParameterError, match=match):
        plan.plan
    for bad in (0, -1, 1.5, True, 10**7):
        with pytest.raises(spare_opt.ParameterError, match="max_attempts"):
            TorchFTPlan(circulant(4, [0, 1]), max_attempts=bad)


def test_dtensor_gradients_are_reduced_as_local_shards_or_refused():
    """all_reduce refuses a DTensor at once; reduce_gradients refuses a mesh that spans replica groups."""
    pytest.importorskip("torchft")
    code = (
        "import datetime, numpy as np, torch, torch.distributed as dist, spare_opt\n"
        "from torch.distributed.device_mesh import init_device_mesh\n"
        "from torch.distributed.fsdp import fully_shard\n"
        "from spare_opt.torch import TorchFTPlan\n"
        "store = dist.TCPStore('127.0.0.1', 0, is_master=True, wait_for_workers=False)\n"
        "dist.init_process_group('gloo', store=store, rank=0, world_size=1)\n"
        "model = torch.nn.Linear(3, 2)\n"
        "fully_shard(model, mesh=init_device_mesh('cpu', (1,)))\n"
        "model(torch.randn(4, 3)).sum().backward()\n"
        "plan = TorchFTPlan(spare_opt.Layout((np.arange(4)[:, None] + np.arange(2)[None, :]) % 4))\n"
        "for call in (lambda: plan.all_reduce(None, model.weight.grad),):\n"
        "    try:\n"
        "        call()\n"
        "    except spare_opt.ParameterError as exc:\n"
        "        print('refused:', exc)\n"
        "plan.group_world_size = 0  # a mesh of 1 rank spans more than a replica group of 0\n"
        "try:\n"
        "    plan.reduce_gradients(None, model.parameters())\n"
        "except spare_opt.ParameterError as exc:\n"
        "    print('mesh:', exc)\n"
        "dist.destroy_process_group()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused: all_reduce got a DTensor" in done.stdout, done.stdout
    assert "mesh: a DTensor gradient's device mesh spans 1 ranks" in done.stdout, done.stdout


def fsdp_config(**extra):
    """N = 3 replica groups of 2 ranks (FSDP2 inside), consecutive r = 2, m = 2, float64."""
    return {"layout": circulant(3, [0, 1]), "micro_batches": 2, "steps": 8, "global_batch_size": 24,
            "dataset_size": 240, "dtype": "float64", "ranks_per_group": 2, "fsdp": True, "timeout": 15.0,
            "join_timeout": 2.0, "heartbeat_timeout": HEARTBEAT_TIMEOUT, **extra}


def test_fsdp_replica_groups_exact_when_a_whole_group_dies_in_the_all_reduce():
    """Both ranks of replica group 1 SIGKILLed inside the step-3 all-reduce; FSDP2 shards the model in each group.

    Through the adapter the failed step is repeated under the quorum {0, 2}, whose plan
    gives the survivors group 1's micro-batches, split by samples between each group's
    two ranks: every rank ends within 1e-12 of the fault-free run.  Plain TorchFT on
    the same run trains the remaining steps on 2/3 of the batch.
    """
    pytest.importorskip("torchft")
    from torchft_job import run_torchft_job

    config = fsdp_config(die={"group": 1, "step": 3})
    spare = run_torchft_job({**config, "mode": "spare"})
    assert sorted(spare["ranks"]) == [0, 1, 4, 5], (spare["codes"], spare["errors"])
    differences = relative_differences(spare, config, by="ranks")
    assert max(differences.values()) <= TOLERANCE["float64"], differences
    for result in spare["ranks"].values():
        attempts = [(step, committed, members) for step, committed, members, _, _ in result["records"]]
        assert (3, False, [0, 1, 2]) in attempts, attempts  # the step the death broke ...
        assert (3, True, [0, 2]) in attempts, attempts  # ... repeated without group 1
        assert result["quorums"][-1][2] == [0, 2]
    assert len({result["fingerprint"] for result in spare["ranks"].values()}) == 1

    plain = run_torchft_job({**config, "mode": "plain"})
    assert sorted(plain["ranks"]) == [0, 1, 4, 5], plain["codes"]
    shrunk = relative_differences(plain, config, by="ranks")
    assert min(shrunk.values()) > 1e6 * TOLERANCE["float64"], shrunk


def test_rank_without_replica_id_ends_exact_or_raises():
    """Rank 1 of every replica group omits ``replica_id`` (TorchFT's docstring: rank 0's is enough).

    torchft 0.2 numbers the quorum's global ranks from rank 0's ids: the job is exact.
    Under the reconfigure API rank 1's global rank is then its group rank alone, so
    every rank 1 refuses with a ParameterError in its training loop, and rank 0 of its
    group too (the group agrees on the verdict over its own process group).  Either way
    no rank finishes with a wrong model.
    """
    api = torchft_api()
    from torchft_job import run_torchft_job

    config = fsdp_config(replica_ids="rank0", steps=5)
    job = run_torchft_job(config)
    differences = relative_differences(job, config, by="ranks")
    assert all(d <= TOLERANCE["float64"] for d in differences.values()), differences
    if api == "configure":
        assert sorted(job["ranks"]) == list(range(6)), (job["codes"], job["errors"])
    else:  # every rank refuses: rank 1 for want of an id, rank 0 from the group's agreement
        assert sorted(job["errors"]) == list(range(6)), (job["codes"], job["errors"])
        assert all(e["type"] == "ParameterError" for e in job["errors"].values()), job["errors"]
        assert all("no replica_id" in job["errors"][p]["message"] for p in (1, 3, 5)), job["errors"]
        assert all("another rank of this replica group refused" in job["errors"][p]["message"] for p in (0, 2, 4))
        assert all(code != 0 for code in job["codes"].values()), job["codes"]


def test_lone_late_replica_and_a_step_that_never_commits_end_with_an_error():
    """A replica alone in its quorum gets a NoQuorumError (not a wipe-out); a step that never commits ends the loop."""
    pytest.importorskip("torchft")
    from torchft_job import run_torchft_job

    config = {"layout": circulant(3, [0, 1]), "steps": 4, "global_batch_size": 12, "dataset_size": 120,
              "timeout": 10.0, "join_timeout": 1.0}
    lone = run_torchft_job({**config, "run_groups": [1]}, timeout=120)
    assert lone["codes"][1] != 0 and lone["errors"][1]["type"] == "NoQuorumError", lone
    assert "no quorum with the other 2 replica groups" in lone["errors"][1]["message"]
    assert "may have ended the job" in lone["errors"][1]["message"]

    # N = 2, r = 2: one replica covers the batch; an error in every step keeps it from committing.
    stuck = run_torchft_job({**config, "layout": circulant(2, [0, 1]), "global_batch_size": 8, "run_groups": [0],
                             "inject_error": True}, timeout=120)
    error = stuck["errors"][0]
    assert error["type"] == "TorchFTStepError" and "did not commit in 10 attempts" in error["message"], stuck
    assert "an error injected in step 0" in error["message"]


def test_torchft_adapter_exact_after_a_random_kill_and_a_repair():
    """N = 4, consecutive r = 2, m = 1, float32: replica 1 SIGKILLed at a random moment, then started again.

    The repaired replica heals from a live peer (TorchFT's recovery) at its first
    quorum and rejoins: the plan is the fault-free one again, the same in every
    replica whatever quorums it missed, and all four end at the fault-free parameters.
    """
    pytest.importorskip("torchft")
    from torchft_job import run_torchft_job

    config = {"layout": circulant(4, [0, 1]), "micro_batches": 1, "steps": 12,
              "global_batch_size": 32, "dataset_size": 320, "dtype": "float32", "mode": "spare",
              "step_sleep": 0.01, "timeout": 10.0, "heartbeat_timeout": HEARTBEAT_TIMEOUT}
    job = run_torchft_job(config, [("kill", 1, 3), ("repair", 1, 5)], seed=7)
    assert sorted(job["results"]) == [0, 1, 2, 3], (job["codes"], job["errors"])
    assert job["results"][1]["repaired"]
    differences = relative_differences(job, config)
    assert max(differences.values()) <= TOLERANCE["float32"], differences
    for g, result in job["results"].items():
        members = [quorum[2] for quorum in result["quorums"]]
        assert members[-1] == [0, 1, 2, 3], (g, members)
        if g != 1:
            assert [0, 2, 3] in members, (g, members)  # the quorum that went on without replica 1
    assert len({result["fingerprint"] for result in job["results"].values()}) == 1

"""DP groups of several ranks: the sampler's split, the parts' random streams, the launch variables, sharded state.

The whole job (torchrun per group, FSDP2 inside, a SIGKILL, a rejoin) is in
``tests/test_launchers.py``; these are the pieces it rests on.
"""

import os
import subprocess
import sys
import textwrap
import threading
import time
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import spare_opt  # noqa: E402
from conftest import REPO  # noqa: E402
from spare_opt.torch import PlanBook, SpareBatchSampler, micro_batch_seed  # noqa: E402
from spare_opt.torch.launchers import join_job  # noqa: E402


def circulant(groups, offsets):
    return spare_opt.Layout((np.arange(groups)[:, None] + np.asarray(offsets)[None, :]) % groups, method="sidon",
                            offsets=list(offsets))


def _source(book, plan, group, rank, ranks):
    return types.SimpleNamespace(book=book, plan=plan, group=group, group_rank=rank, group_world_size=ranks,
                                 group_process_group=object() if ranks > 1 else None)


@pytest.mark.parametrize("ranks", [2, 3])
def test_the_ranks_of_a_group_split_each_micro_batch_into_equal_parts(ranks):
    """Every rank of a group gets the same keys; their parts tile each micro-batch; all ranks tile the global batch."""
    layout = circulant(6, [0, 1, 3])
    book = PlanBook(layout, 2)
    batch = 6 * 2 * ranks * 2
    for failed in ([], [2], [1, 4]):
        plan = book.plan(failed)
        seen = []
        for g in (g for g in range(6) if g not in failed):
            parts = [list(SpareBatchSampler(_source(book, plan, g, k, ranks), 480, batch, steps=2, seed=5))
                     for k in range(ranks)]
            whole = list(SpareBatchSampler(_source(book, plan, g, 0, 1), 480, batch, steps=2, seed=5))
            assert all(len(p) == len(whole) for p in parts)  # the same passes on every rank
            for index, micro in enumerate(whole):
                assert sum((p[index] for p in parts), []) == micro
                assert len({len(p[index]) for p in parts}) == 1
            seen += [i for p in parts for micro in p for i in micro]
        sampler = SpareBatchSampler(_source(book, plan, 0, 0, 1), 480, batch, steps=2, seed=5)
        expected = sampler.global_batch(0).tolist() + sampler.global_batch(1).tolist()
        assert sorted(seen) == sorted(expected)


def test_a_batch_that_does_not_split_among_the_ranks_is_refused():
    book = PlanBook(circulant(6, [0, 1, 3]), 2)
    with pytest.raises(spare_opt.ParameterError, match="N m K = 36"):
        SpareBatchSampler(_source(book, book.plan([]), 0, 1, 3), 480, 24)


def test_each_part_of_a_micro_batch_draws_its_own_stream():
    assert micro_batch_seed(7, 3, 2, 1) == micro_batch_seed(7, 3, 2, 1, part=0)
    seeds = {micro_batch_seed(7, 3, 2, 1, part=k) for k in range(4)}
    assert len(seeds) == 4


def test_launch_variables_of_a_group_of_several_ranks():
    """torchrun's RANK / WORLD_SIZE give the rank in the group; each rank's start is its own; a fresh store per start."""
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    env = {"SPARE_STORE": f"127.0.0.1:{server.port}", "SPARE_GROUP": "1", "WORLD_SIZE": "2"}
    first = [join_job({**env, "RANK": str(k)}) for k in range(2)]
    assert [(j.group_rank, j.group_world_size, j.rejoin) for j in first] == [(0, 2, False), (1, 2, False)]
    again = [join_job({**env, "RANK": str(k)}) for k in range(2)]
    assert all(j.rejoin for j in again)  # the group restarted as a whole rejoins, every rank of it
    first[0].group_store.set("x", "1")
    assert not again[1].group_store.check(["x"])  # its process group starts on fresh keys
    assert first[1].group_store.check(["x"])
    explicit = join_job({"SPARE_STORE": env["SPARE_STORE"], "SPARE_GROUP": "1", "SPARE_GROUP_RANK": "2",
                         "SPARE_GROUP_WORLD_SIZE": "4"})  # srun: no RANK / WORLD_SIZE
    assert (explicit.group_rank, explicit.group_world_size) == (2, 4)
    for bad in ({**env, "RANK": "2"}, {**env, "SPARE_GROUP_RANK": "-1"}, {**env, "WORLD_SIZE": "two"},
                {**env, "RANK": "1", "SPARE_GROUP_RANK": "0"},  # two ranks of a group would both be rank 0
                {**env, "SPARE_GROUP_RANK": "2", "SPARE_GROUP_WORLD_SIZE": "4"}):  # torchrun says K = 2
        with pytest.raises(spare_opt.ParameterError):
            join_job(bad)


_SHARDED_STATE = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    import spare_opt
    from spare_opt.torch._tensors import _from_portable, _portable
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    def build(seed):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1)).double()
        fully_shard(model[0]); fully_shard(model[2]); fully_shard(model)
        return model, torch.optim.AdamW(model.parameters(), lr=0.1)
    source, optimizer = build(0)
    for _ in range(2):
        source(torch.randn(5, 4, dtype=torch.float64)).sum().backward()
        optimizer.step()
    state = {"model": source.state_dict(), "optimizer": optimizer.state_dict()}
    import pickle
    received = pickle.loads(pickle.dumps(_portable(state)))  # what broadcast_object sends
    target, target_optimizer = build(1)
    mesh = next(p.device_mesh for p in target.parameters())
    restored = _from_portable(received, mesh)
    target.load_state_dict(restored["model"])
    target_optimizer.load_state_dict(restored["optimizer"])
    from spare_opt.torch._tensors import _check_optimizer
    stale_model, _ = build(2)
    stale = torch.optim.AdamW(torch.nn.Linear(4, 3).parameters())  # not the model's: never changes it
    try:
        _check_optimizer(stale_model, stale)
        raise SystemExit("an optimizer over other parameters was accepted")
    except spare_opt.ParameterError as exc:
        assert "after fully_shard" in str(exc)
    _check_optimizer(source, optimizer)
    for a, b in zip(source.parameters(), target.parameters()):
        assert type(b).__name__ == "DTensor" and torch.equal(a.full_tensor(), b.full_tensor())
    for a, b in zip(optimizer.state.values(), target_optimizer.state.values()):
        for key in a:
            x, y = a[key], b[key]
            x = x.full_tensor() if hasattr(x, "full_tensor") else x
            y = y.full_tensor() if hasattr(y, "full_tensor") else y
            assert torch.equal(x, y), key
    print("ok")
""")


def test_sharded_state_travels_as_local_shards():
    """FSDP2's DTensor parameters and AdamW state, sent as local shards, are rebuilt equal on the receiving rank."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", _SHARDED_STATE], capture_output=True, text=True, timeout=180,
                            env=env)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def test_a_second_process_that_starts_as_the_same_group_is_refused():
    """Two processes that claim one DP group afresh (the ranks of a group started without group_process_group)."""
    from spare_opt.torch import GroupTimeout, SpareGroup

    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    layout = circulant(3, [0, 1])
    outcome = {}

    def first():
        try:
            SpareGroup(layout, 0, dist.PrefixStore("job", server), timeout=3.0)
        except GroupTimeout as exc:  # groups 1 and 2 never come
            outcome["first"] = exc

    thread = threading.Thread(target=first)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.check(["job/owner/0"]):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(spare_opt.ParameterError, match="already started in this job by another process"):
        SpareGroup(layout, 0, dist.PrefixStore("job", server), timeout=3.0)
    thread.join(60)
    assert isinstance(outcome.get("first"), GroupTimeout)

"""spare_opt.torch on real processes: gloo on CPU, real SIGKILLs, exactness against a fault-free run.

Every job trains the small model of ``examples/training_job.py`` with one process per DP
group; the survivors' final parameters must equal those of a single-process run on the
whole global batch of every step, within summation noise (float64: 1e-12, float32:
1e-6, relative to the parameter scale).
"""

import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

import spare_opt  # noqa: E402
from spare_opt.torch import PlanBook, SpareBatchSampler, plan_fingerprint  # noqa: E402
from training_job import reference_run, run_job, train_worker  # noqa: E402


TOLERANCE = {"float64": 1e-12, "float32": 1e-6}


def circulant(groups, offsets, method):
    stacks = (np.arange(groups)[:, None] + np.asarray(offsets)[None, :]) % groups
    return spare_opt.Layout(stacks, method=method, offsets=list(offsets))


def assert_exact(job, config, survivors):
    """Every survivor finished, all agree on the plan, and their parameters equal the fault-free run's."""
    results = job["results"]
    assert sorted(results) == sorted(survivors), (job["codes"], job["events"])
    reference = reference_run(config)
    scale = max(float(p.abs().max()) for p in reference)
    tolerance = TOLERANCE[config.get("dtype", "float64")] * scale
    fingerprints = {r["fingerprint"] for r in results.values()}
    assert len(fingerprints) == 1, fingerprints
    for g, result in results.items():
        difference = max(float((a - b).abs().max()) for a, b in zip(result["params"], reference))
        assert difference <= tolerance, (g, difference, tolerance, result["timeline"])
    return results


def test_sampler_covers_the_global_batch_once():
    """Over the live groups' work, every sample of the global batch appears exactly once, at any failed set."""
    layout = circulant(6, [0, 1, 3], "sidon")
    book = PlanBook(layout, 4)

    class Source:
        pass

    for failed in ([], [2], [1, 4]):
        plan = book.plan(failed)
        seen = []
        for g in range(6):
            if g in failed:
                continue
            source = Source()
            source.book, source.plan, source.group = book, plan, g
            sampler = SpareBatchSampler(source, 480, 48, steps=1, seed=3)
            batches = list(sampler)
            assert len(batches) == len(sampler)
            seen += [i for batch in batches for i in batch]
        expected = sampler.global_batch(0).tolist()
        assert sorted(seen) == sorted(expected)
        if hasattr(spare_opt, "sample_indices"):  # the core library's mapping agrees
            for g in range(6):
                if g not in failed:
                    mine = sorted(i for key in book.work(plan)[g] for i in range(key * 2, key * 2 + 2))
                    assert mine == sorted(np.asarray(spare_opt.sample_indices(plan, g, 48)).tolist())


def test_plan_book_is_history_free():
    """The same failed set gives the same plan fingerprint whatever was asked before."""
    layout = circulant(6, [0, 1], "consecutive")
    first, second = PlanBook(layout, 4), PlanBook(layout, 4)
    for failed in ([1], [1, 3], [3]):
        first.plan(failed)
    assert plan_fingerprint(first.plan([3])) == plan_fingerprint(second.plan([3]))


@pytest.mark.parametrize("case", [
    # N = 4, consecutive r = 2, m = 4: one kill at a random moment, loader with a worker process.
    dict(groups=4, offsets=[0, 1], method="consecutive", m=4, dtype="float64", loader_workers=1,
         actions=[("kill", 2, 6)], survivors=[0, 1, 3], seed=1),
    # N = 6, r = 3 (offsets of least overlap: no Sidon set of size 3 mod 6), m = 1, float32:
    # two failures, the second one inside the all-reduce.
    dict(groups=6, offsets=[0, 1, 3], method="sidon", m=1, dtype="float32",
         actions=[("kill", 1, 5)], die={"group": 4, "event": "all-reduce", "step": 12},
         survivors=[0, 2, 3, 5], seed=2),
], ids=["N4-consecutive-r2-m4-random-kill", "N6-sidon-r3-m1-two-failures-allreduce"])
def test_exact_after_kills(case):
    layout = circulant(case["groups"], case["offsets"], case["method"])
    config = {"layout": layout, "micro_batches": case["m"], "dtype": case["dtype"], "steps": 20,
              "global_batch_size": 4 * case["groups"] * case["m"], "dataset_size": 960,
              "loader_workers": case.get("loader_workers", 0), "die": case.get("die"), "step_sleep": 0.005}
    job = run_job(config, case["actions"], seed=case["seed"])
    results = assert_exact(job, config, case["survivors"])
    for result in results.values():
        assert result["epoch"] >= 1 and sorted(result["members"]) == case["survivors"]


def test_failure_during_recovery():
    """N = 6, Sidon offsets {0, 2}, r = 2, m = 4: a kill, then a second group dies while the survivors rebuild."""
    layout = circulant(6, [0, 2], "sidon")
    config = {"layout": layout, "micro_batches": 4, "steps": 16, "global_batch_size": 48, "step_sleep": 0.005,
              "die": {"group": 4, "event": "agree", "epoch": 1}}
    job = run_job(config, [("kill", 1, 4)], seed=3)
    results = assert_exact(job, config, [0, 2, 3, 5])
    agreed = [extra["failed"] for name, _, extra in results[0]["timeline"] if name == "agree"]
    assert agreed[-1] == [1, 4], agreed


def test_repaired_group_rejoins():
    """N = 4, consecutive r = 3, m = 1: a kill, then the repaired group heals from a peer and rejoins."""
    layout = circulant(4, [0, 1, 2], "consecutive")
    config = {"layout": layout, "micro_batches": 1, "steps": 24, "global_batch_size": 16, "step_sleep": 0.01}
    job = run_job(config, [("kill", 0, 4), ("repair", 0, 8)], seed=4)
    results = assert_exact(job, config, [0, 1, 2, 3])
    assert results[0]["rejoined"]
    assert all(sorted(r["members"]) == [0, 1, 2, 3] for r in results.values())


def test_wipe_out_restarts_from_the_checkpoint():
    """N = 4, consecutive r = 2: groups 1 and 2 hold shard type 2 alone; losing both restarts the job."""
    layout = circulant(4, [0, 1], "consecutive")
    config = {"layout": layout, "micro_batches": 1, "steps": 20, "global_batch_size": 16, "checkpoint_every": 4,
              "step_sleep": 0.005,
              "die": {"group": 2, "event": "agree", "epoch": 1}}
    job = run_job(config, [("kill", 1, 6)], seed=5)
    assert any(name == "restart" for name, _, _ in job["events"])
    results = assert_exact(job, config, [0, 1, 2, 3])
    assert all(r["generation"] == 1 for r in results.values())


def test_repaired_group_that_arrives_after_the_end_is_not_left_waiting():
    """N = 4, consecutive r = 2: group 1 is repaired only once the others finished; the job still ends."""
    layout = circulant(4, [0, 1], "consecutive")
    config = {"layout": layout, "micro_batches": 1, "steps": 10, "global_batch_size": 16, "step_sleep": 0.005}
    job = run_job(config, [("kill", 1, 3), ("repair", 1, 10)], seed=6, timeout=120.0)
    assert any(name == "stranded" and g == 1 for name, _, g in job["events"]), job["events"]
    assert not any(name == "restart" for name, _, _ in job["events"])
    assert_exact(job, config, [0, 2, 3])


def test_a_rejoin_request_deleted_between_two_reads_does_not_hang_the_proposer():
    """The proposer reads a repaired group's request without waiting: present, absent, deleted.

    The admitted joiner deletes ``rejoin/{g}`` as soon as the epoch is decided; a member
    that had just seen the key used to wait the store's whole timeout on ``get``.
    """
    import datetime

    import torch.distributed as dist

    from spare_opt.torch.elastic import _peek

    server = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=5))
    store = dist.PrefixStore("gen/0", server)
    assert _peek(store, "rejoin/0") is None
    assert not store.check(["rejoin/0"])  # reading created nothing
    store.set("rejoin/0", "token-1")
    assert _peek(store, "rejoin/0") == "token-1"
    assert _peek(store, "rejoin/0") == "token-1"  # reading changed nothing
    store.delete_key("rejoin/0")
    assert _peek(store, "rejoin/0") is None  # ``get`` would wait out the 5 s timeout, then raise


def test_a_repaired_group_admitted_after_a_long_step_is_not_declared_failed():
    """N = 4, consecutive r = 3: steps longer than the heartbeat timeout (0.8 s), so the repaired group waits longer.

    A joiner does not heartbeat while it waits for the members' next step boundary;
    its last heartbeat used to make it stale at admission: the members aborted the
    admitting epoch, some connected to its process group while others gave up (a
    30 s gloo timeout, then crashes).  Now no member fails after the admission.
    """
    layout = circulant(4, [0, 1, 2], "consecutive")
    config = {"layout": layout, "micro_batches": 1, "steps": 4, "global_batch_size": 16, "step_sleep": 1.3,
              "heartbeat_timeout": 0.8}
    job = run_job(config, [("kill", 0, 1), ("repair", 0, 2)], seed=4)
    results = assert_exact(job, config, [0, 1, 2, 3])
    assert results[0]["rejoined"]
    admitted = [extra["epoch"] for name, _, extra in results[0]["timeline"] if name == "admitted"]
    assert admitted and all(r["epoch"] == admitted[0] for r in results.values()), \
        (admitted, {g: r["epoch"] for g, r in results.items()})


def test_a_member_dies_while_a_repaired_group_is_admitted():
    """N = 4, consecutive r = 3: group 3 dies after agreeing to admit the repaired group 0, before the rebuild.

    The next epoch must keep group 0 a joiner (it has no state yet): it used to
    drop it, so the members ran their next step while group 0 waited for the state.
    """
    layout = circulant(4, [0, 1, 2], "consecutive")
    config = {"layout": layout, "micro_batches": 1, "steps": 16, "global_batch_size": 16, "step_sleep": 0.01,
              "die": {"group": 3, "event": "plan", "epoch": 2}}
    job = run_job(config, [("kill", 0, 4), ("repair", 0, 8)], seed=4)
    results = assert_exact(job, config, [0, 1, 2])
    assert results[0]["rejoined"]
    agreed = [(extra["epoch"], extra["failed"]) for name, _, extra in results[1]["timeline"] if name == "agree"]
    assert agreed[-2:] == [(2, []), (3, [3])], agreed  # 0 admitted in epoch 2, whose rebuild 3's death broke


def test_a_group_that_starts_late_is_not_declared_failed():
    """N = 4, consecutive r = 2: group 3 starts 1.6 s after the others (heartbeat timeout 1 s); nobody fails.

    Every heartbeat thread's first read waits until every group's heartbeat key exists;
    the time of the read was taken before it, so the late group's arrival made every
    peer look stale at once: the live groups evicted one another, or wiped out.
    """
    layout = circulant(4, [0, 1], "consecutive")
    config = {"layout": layout, "micro_batches": 1, "steps": 4, "global_batch_size": 16, "step_sleep": 0.01,
              "heartbeat_timeout": 1.0, "start_delay": {"group": 3, "seconds": 1.6}}
    job = run_job(config, [], seed=8)
    assert not any(name == "restart" for name, _, _ in job["events"]), job["events"]  # a wipe-out would hide it
    results = assert_exact(job, config, [0, 1, 2, 3])
    detected = {g: [extra for name, _, extra in r["timeline"] if name == "detect"] for g, r in results.items()}
    assert all(r["epoch"] == 0 for r in results.values()) and not any(detected.values()), detected


def test_a_member_dies_while_a_repaired_group_receives_the_state():
    """N = 4, consecutive r = 3: group 3 SIGKILLs itself once the epoch admitting the repaired group 0 is built.

    The other members are then sending the state to group 0 (the heal): the broadcast
    fails for some of them.  Every group used to crash ("... not handled") and the job was
    lost; now every rank settles alike that the heal failed, they agree again without
    group 3 (group 0 stays a joiner), send the state again, and finish exact.
    """
    layout = circulant(4, [0, 1, 2], "consecutive")
    config = {"layout": layout, "micro_batches": 1, "steps": 16, "global_batch_size": 16, "step_sleep": 0.01,
              "die": {"group": 3, "event": "rebuild", "epoch": 2}}
    job = run_job(config, [("kill", 0, 4), ("repair", 0, 8)], seed=4)
    assert job["codes"][3] == -9 and all(job["codes"][g] == 0 for g in range(3)), job["codes"]
    results = assert_exact(job, config, [0, 1, 2])
    assert results[0]["rejoined"] and not any(name == "restart" for name, _, _ in job["events"])
    admitted = [extra["epoch"] for name, _, extra in results[0]["timeline"] if name == "admitted"][0]
    agreed = [(extra["epoch"], extra["failed"]) for name, _, extra in results[0]["timeline"] if name == "agree"]
    assert agreed and agreed[0] == (admitted + 1, [3]), agreed  # agreed again after the failed heal
    healed = [name for name, _, _ in results[0]["timeline"] if name in ("healed", "heal-failed")]
    assert healed[-1] == "healed", healed


def test_every_group_killed_at_once_restarts_from_the_checkpoint(tmp_path):
    """N = 4, consecutive r = 2: every group SIGKILLed at once, then every one restarted (as a launcher restarts it).

    Each restarted process is a repaired group, and no member is left to admit it: they
    used to wait out the timeout (60 s) and fail, the checkpoint unused.  Now each finds
    no heartbeat moving, the generation ends ("restart"), and every group starts the next
    one from the checkpoint and finishes exact.
    """
    from spare_opt.torch import Supervisor

    layout = circulant(4, [0, 1], "consecutive")
    config = {"layout": layout, "micro_batches": 1, "steps": 16, "global_batch_size": 16, "checkpoint_every": 4,
              "step_sleep": 0.01, "out": str(tmp_path)}
    supervisor = Supervisor(train_worker, 4, args=(config,))
    stage = {"repaired": False}

    def on_poll(sup):
        store = sup.generation_store()
        if not stage["repaired"] and store.check(["progress"]) and int(store.get("progress")) >= 6:
            for g in range(4):
                sup.kill(g)
            deadline = time.monotonic() + 10.0
            while any(sup.alive(g) for g in range(4)) and time.monotonic() < deadline:
                time.sleep(0.005)
            for g in range(4):
                sup.repair(g)
            stage["repaired"] = True

    supervisor.start()
    started = time.monotonic()
    codes = supervisor.run(timeout=120.0, on_poll=on_poll)
    assert stage["repaired"] and codes == {g: 0 for g in range(4)}, (codes, supervisor.events)
    assert time.monotonic() - started < 60.0  # not one wait of the 30 s timeout
    results = {g: torch.load(tmp_path / f"g{g}.pt", weights_only=False) for g in range(4)}
    assert all(r["generation"] == 1 and not r["rejoined"] for r in results.values())
    assert any(name == "restored" for name, _, _ in results[0]["timeline"])  # from the checkpoint
    assert_exact({"results": results, "codes": codes, "events": supervisor.events}, config, [0, 1, 2, 3])

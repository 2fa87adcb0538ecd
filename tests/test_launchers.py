"""The launcher contract with real launchers: a standalone store, one torchrun per DP group, SIGKILLs.

Every job runs ``examples/launch/train.py`` under ``python -m torch.distributed.run``
(one per group, ``--max-restarts`` for the restarts) against the store of
``python -m spare_opt.torch.store``; the survivors' final parameters must equal a
fault-free single-process run (float64, 1e-12 of the parameter scale).
"""

import contextlib
import datetime
import os
import re
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import spare_opt  # noqa: E402
from conftest import REPO  # noqa: E402
from spare_opt.torch._processes import kill_tree  # noqa: E402
from spare_opt.torch.launchers import EVICTED_EXIT, WIPE_OUT_EXIT, join_job, new_generation, post_death  # noqa: E402
from training_job import reference_run  # noqa: E402

SCRIPT = str(REPO / "examples" / "launch" / "train.py")
TIMEOUT = 240.0


def start_store():
    process = subprocess.Popen([sys.executable, "-m", "spare_opt.torch.store", "--host", "127.0.0.1", "--port", "0"],
                               stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    assert line.startswith("spare-store listening on"), line
    port = int(line.rsplit(":", 1)[1])
    client = dist.TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=30))
    return process, port, client


def torchrun(port, group, args, out, restarts, extra_env=None, nproc=1, script=SCRIPT):
    # TORCH_CPP_LOG_LEVEL at torch's default: the survivors' logs are searched for its warnings.
    env = {**os.environ, "SPARE_STORE": f"127.0.0.1:{port}", "SPARE_GROUP": str(group), "OMP_NUM_THREADS": "1",
           "TORCH_CPP_LOG_LEVEL": "WARNING",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **(extra_env or {})}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
               "--max-restarts", str(restarts), "--monitor-interval", "0.1", script, "--out", out, *args]
    log = open(os.path.join(out, f"torchrun-g{group}.log"), "a")
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


@contextlib.contextmanager
def launched(groups, args, out, restarts, nproc=1, **options):
    """A store and one torchrun per group; yields ``(port, client, processes)``; kills whatever is left at the end."""
    store, port, client = start_store()
    processes = {}
    try:
        processes.update({g: torchrun(port, g, args, out, restarts=restarts, nproc=nproc, **options)
                          for g in range(groups)})
        yield port, client, processes
    finally:
        # The whole tree: torchrun starts its workers in sessions of their own, and a worker whose torchrun
        # alone was killed ran on after the test.
        for process in processes.values():
            kill_tree(process.pid)
            process.wait()
        store.terminate()
        store.wait()


def read(client, key):
    return client.get(key).decode() if client.check([key]) else None


def wait_for(condition, what, processes, out, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{logs(out)}"
        ended = {g: p.returncode for g, p in processes.items() if p.poll() is not None}
        assert not ended, f"torchrun ended before {what}: {ended}\n{logs(out)}"
        time.sleep(0.05)


def worker_pid(client, generation, group, rank=0):
    return int(read(client, f"gen/{generation}/started/{group}" + (f"/{rank}" if rank else "")))


def finish(processes, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    codes = {}
    for g, process in processes.items():
        try:
            codes[g] = process.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in processes.values():
                kill_tree(other.pid)
            raise
    return codes


def rounding_sensitivity(config, reference):
    """How far a change of one ulp in every micro-batch's loss moves the fault-free run's final parameters.

    The GPT model with AdamW amplifies float64 rounding: any other order of the same sums
    (FSDP2's reduce-scatter, the SUM over the survivors, the patch micro-batches) moves its
    final parameters by about this much, a wrong gradient by orders of magnitude more.
    """
    import training_job

    original = training_job.lm_loss_fn
    training_job.lm_loss_fn = lambda model, batch: original(model, batch) * (1 + 2 ** -52)
    try:
        moved = reference_run(config)
    finally:
        training_job.lm_loss_fn = original
    return max(float((a - b).abs().max()) for a, b in zip(moved, reference))


def assert_exact(out, args, groups, scale_tolerance=1e-12, **settings):
    """Every group's final parameters within ``scale_tolerance`` of the parameter scale of the fault-free run.

    For the GPT model, within ten times the fault-free run's own sensitivity to rounding
    (:func:`rounding_sensitivity`) when that is larger.
    """
    import importlib.util

    spec = importlib.util.spec_from_file_location("launch_train", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = {**module.config_of(module.parse(["--out", out, *args])), **settings}
    reference = reference_run(config)
    scale = max(float(p.abs().max()) for p in reference)
    if config["model"] == "gpt":
        scale_tolerance = max(scale_tolerance, 10 * rounding_sensitivity(config, reference) / scale)
    results = {g: torch.load(os.path.join(out, f"g{g}.pt"), weights_only=False) for g in groups}
    assert len({r["fingerprint"] for r in results.values()}) == 1
    for g, result in results.items():
        difference = max(float((a - b).abs().max()) for a, b in zip(result["params"], reference))
        assert difference <= scale_tolerance * scale, (g, difference)
    return results


#: torch's log line for a TCPStore wait that timed out on the client (``socket.cpp``).
WAIT_TIMEOUT_WARNING = re.compile(r"waitForInput.*likely a timeout")


def wait_timeout_warnings(out, groups):
    """How many timed-out TCPStore waits torch logged in these groups' torchrun logs (their workers' stderr).

    torch formats each one with the socket's addresses, looked up in reverse DNS in the
    waiting thread before the wait is cancelled: a lost DNS query held a survivor's
    agreement for the resolver's 5 s retry.  The survivors of a kill must log none.
    """
    found = 0
    for g in groups:
        with open(os.path.join(out, f"torchrun-g{g}.log")) as handle:
            found += len(WAIT_TIMEOUT_WARNING.findall(handle.read()))
    return found


def test_a_timed_out_store_wait_is_logged_where_the_kill_tests_look():
    """The check of the survivors' logs can fail: a timed-out ``store.wait`` in a worker's environment is logged."""
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    code = ("import datetime, sys, torch.distributed as dist\n"
            f"store = dist.TCPStore('127.0.0.1', {server.port}, is_master=False, wait_for_workers=False)\n"
            "try:\n"
            "    store.wait(['never'], datetime.timedelta(milliseconds=20))\n"
            "except dist.DistStoreError:\n"
            "    sys.exit(0)\n"
            "sys.exit(1)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "TORCH_CPP_LOG_LEVEL": "WARNING"})
    assert done.returncode == 0, done.stderr
    assert WAIT_TIMEOUT_WARNING.search(done.stderr), done.stderr


def logs(out):
    text = ""
    for name in sorted(os.listdir(out)):
        if name.endswith(".log"):
            with open(os.path.join(out, name)) as handle:
                text += f"--- {name}\n" + handle.read()[-3000:]
    return text


@pytest.mark.slow
def test_torchrun_per_group_kill_rejoin_and_a_late_joiner(tmp_path):
    """N = 4, r = 2: SIGKILL group 1's worker; torchrun restarts it, it rejoins; a joiner after the end exits 0."""
    out = str(tmp_path)
    args = ["--steps", "16", "--step-sleep", "0.05", "--await-repairs", "120"]
    with launched(4, args, out, restarts=1) as (port, client, processes):
        wait_for(lambda: int(read(client, "gen/0/progress") or 0) >= 4, "four steps", processes, out)
        # As docs/launch.md's recipe does: the pid the worker printed in its log (the store's record agrees).
        with open(os.path.join(out, "torchrun-g1.log")) as log:
            printed = re.findall(r"^group 1: worker pid (\d+)$", log.read(), flags=re.M)
        assert printed and int(printed[-1]) == worker_pid(client, 0, 1), logs(out)
        os.kill(int(printed[-1]), signal.SIGKILL)
        codes = finish(processes)
        assert codes == {g: 0 for g in range(4)}, logs(out)
        # The survivors waited for the agreement without a store wait that timed out.
        assert wait_timeout_warnings(out, [0, 2, 3]) == 0, logs(out)
        results = assert_exact(out, args, range(4))
        assert results[1]["rejoined"] and not results[0]["rejoined"]
        assert all(r["members"] == [0, 1, 2, 3] for r in results.values())
        # The operator's logs say what happened: the survivors' recovery, the rejoin.
        text = "".join(open(os.path.join(out, f"torchrun-g{g}.log")).read() for g in range(4))
        assert re.search(r"spare-opt: group 0: step \d+ recovered in epoch \d+: failed groups \[1\], 3 of 4 live", text)
        assert re.search(r"spare-opt: group 1: rejoined at step \d+ \(state received from group 0\)", text)
        # A group restarted after the end of the job: it leaves at once, cleanly.
        started = time.monotonic()
        late = torchrun(port, 2, args, out, restarts=0)
        assert late.wait(TIMEOUT) == 0, logs(out)
        assert "the job has ended" in logs(out)
        assert time.monotonic() - started < TIMEOUT


@pytest.mark.slow
def test_torchrun_per_group_wipe_out_restarts_in_a_new_generation(tmp_path):
    """N = 4, r = 2: groups 1 and 2 (the two holders of shard type 2) die together; every group restarts.

    Under ``--max-restarts 1``: the killed groups spend their only restart on the kill,
    whether their restart comes before the wipe-out (a repaired group in the old
    generation, which then moves on in its process) or after it; the survivors start
    the new generation in their processes.  It used to depend on that timing.
    """
    out = str(tmp_path)
    args = ["--steps", "16", "--step-sleep", "0.05", "--checkpoint-every", "4"]
    with launched(4, args, out, restarts=1) as (port, client, processes):
        wait_for(lambda: int(read(client, "gen/0/progress") or 0) >= 6, "six steps", processes, out)
        victims = [worker_pid(client, 0, 1), worker_pid(client, 0, 2)]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        codes = finish(processes)
        assert codes == {g: 0 for g in range(4)}, logs(out)
        assert read(client, "generation") == "1"
        assert read(client, "gen/0/ended") == "restart"
        assert "this worker starts again there, from the last checkpoint" in logs(out)  # survivors, in-process
        results = assert_exact(out, args, range(4))
        assert all(r["generation"] == 1 for r in results.values())


@pytest.mark.slow
def test_torchrun_per_group_a_member_killed_during_the_heal(tmp_path):
    """N = 4, r = 2: group 1 SIGKILLed and restarted; group 2 SIGKILLed while the state is sent to group 1.

    Group 2 is held just before the heal (``tests/heal_fault_worker.py``) and SIGKILLed
    there by the test.  Every group used to crash with "... not handled", and their
    restarts waited for an admission that nobody gave.  Now the heal is settled as failed
    on every rank, the others agree again without group 2 (group 1 stays a joiner) and
    send the state again; group 2's torchrun restarts it and it rejoins too (or, when its
    restart comes after the last step, leaves: the job has ended).  Every group that
    finishes ends exact, in generation 0: no restart from the checkpoint was needed.
    """
    out = str(tmp_path)
    args = ["--steps", "16", "--step-sleep", "0.05", "--await-repairs", "120"]
    script = str(REPO / "tests" / "heal_fault_worker.py")
    with launched(4, args, out, restarts=1, script=script, extra_env={"SPARE_TEST_HOLD_HEAL": "2"}) as \
            (port, client, processes):
        wait_for(lambda: int(read(client, "gen/0/progress") or 0) >= 4, "four steps", processes, out)
        os.kill(worker_pid(client, 0, 1), signal.SIGKILL)
        wait_for(lambda: read(client, "gen/0/held/2") is not None, "group 2 held in the heal", processes, out)
        os.kill(int(read(client, "gen/0/held/2")), signal.SIGKILL)
        codes = finish(processes)
        assert codes == {g: 0 for g in range(4)}, logs(out)
        assert "not handled" not in logs(out)
        finished = [g for g in range(4) if os.path.exists(os.path.join(out, f"g{g}.pt"))]
        assert finished in ([0, 1, 3], [0, 1, 2, 3]), logs(out)
        if 2 not in finished:
            assert "group 2 was not admitted: the job has ended" in logs(out)
        results = assert_exact(out, args, finished)
        assert all(r["generation"] == 0 and r["members"] == finished for r in results.values())
        assert results[1]["rejoined"]
        # Group 1's heal failed once (group 2 killed in it), then succeeded.
        healing = [name for name, _, extra in results[1]["timeline"]
                   if name == "heal-failed" or (name == "healed" and "joiners" not in extra)]
        assert healing == ["heal-failed", "healed"], healing
        # Both sides of the failed heal say so on stderr (the death of group 2 handled there).
        text = logs(out)
        assert re.search(r"group 0: heal of groups \[1\] failed, sending the state again: agreed in epoch \d+: "
                         r"failed groups \[2\]", text), text
        assert re.search(r"group 1: heal from group 0 failed, receiving the state again: agreed in epoch \d+: "
                         r"failed groups \[2\]", text), text


@pytest.mark.slow
@pytest.mark.parametrize("point, watcher", [("join", False), ("register", False), ("join", True)])
def test_a_group_killed_while_the_job_starts_starts_again_as_a_fresh_member(tmp_path, point, watcher):
    """N = 3, r = 2: group 0 SIGKILLed in its first seconds, before every group registered; the job finishes exact.

    ``join``: after ``join_job`` counted its start, before its ``SpareGroup``; ``register``:
    its heartbeat key written, its registration not counted.  Without a death notice
    (``SPARE_DEATH_WATCHER=0``: as when its machine is lost) its torchrun restarts it
    and ``join_job`` takes it for a repaired group, but nobody could admit it: the
    others wait for its registration.  It used to wait for an admission and the others
    for its registration until both timed out, and every restart after that failed: the
    job was lost.  Now it starts as a fresh member of the first epoch.  With its watcher,
    its death is posted at once: the others start without it and it rejoins.
    """
    out = str(tmp_path)
    args = ["--groups", "3", "--steps", "8", "--timeout", "60"] + (["--await-repairs", "120"] if watcher else [])
    script = str(REPO / "tests" / "heal_fault_worker.py")
    env = {"SPARE_TEST_HOLD_START": f"0:{point}", **({} if watcher else {"SPARE_DEATH_WATCHER": "0"})}
    with launched(3, args, out, restarts=1, script=script, extra_env=env) as (port, client, processes):
        wait_for(lambda: read(client, "gen/0/held/0") is not None, "group 0 held at its start", processes, out)
        assert read(client, "gen/0/epoch/0") is None  # the job has not begun: the others wait for group 0
        os.kill(int(read(client, "gen/0/held/0")), signal.SIGKILL)
        started = time.monotonic()
        codes = finish(processes, timeout=50.0)  # well within the timeout that every wait used to run out
        assert codes == {g: 0 for g in range(3)}, logs(out)
        assert time.monotonic() - started < 50.0
        assert "did not register" not in logs(out) and "death was not agreed" not in logs(out), logs(out)
        assert read(client, "generation") in (None, "0")  # no restart from a checkpoint was needed
        results = assert_exact(out, args, range(3))
        assert all(r["members"] == [0, 1, 2] for r in results.values())
        if watcher:
            assert results[0]["rejoined"] and not results[1]["rejoined"]
            assert any(name == "agree" and extra.get("failed") == [0] for name, _, extra in results[1]["timeline"])
        else:
            assert not any(r["rejoined"] for r in results.values())
            assert [name for name, _, _ in results[0]["timeline"]].count("fresh-start") == 1


def test_worker_configuration_from_the_environment():
    """join_job reads the store, the group and the rejoin; a second start of a group in a generation rejoins."""
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    env = {"SPARE_STORE": f"127.0.0.1:{server.port}", "SPARE_GROUP": "3"}
    first = join_job(env)
    assert (first.group, first.generation, first.rejoin) == (3, 0, False)
    again = join_job({**env, "TORCHELASTIC_RESTART_COUNT": "1"})
    assert again.rejoin and again.restart_count == 1
    assert not join_job({**env, "SPARE_REJOIN": "0"}).rejoin
    assert join_job({"SPARE_STORE": env["SPARE_STORE"], "JOB_COMPLETION_INDEX": "2"}).group == 2
    # After a wipe-out, the first start of every group in the new generation is fresh.
    assert new_generation(first.root, 0) == 1
    assert new_generation(first.root, 0) == 1  # a second survivor's call changes nothing
    fresh = join_job({**env, "TORCHELASTIC_RESTART_COUNT": "2"})
    assert (fresh.generation, fresh.rejoin) == (1, False)
    post_death(fresh.store, 0)
    assert server.get("gen/1/dead/0") == b"died" and server.add("gen/1/deaths", 0) == 1
    for bad in ({}, {"SPARE_STORE": "nohost"}, {"SPARE_STORE": env["SPARE_STORE"]},
                {**env, "SPARE_GROUP": "x"}, {**env, "SPARE_REJOIN": "maybe"}):
        with pytest.raises(spare_opt.ParameterError):
            join_job(bad)
    assert (WIPE_OUT_EXIT, EVICTED_EXIT) == (75, 76)


@pytest.mark.slow
def test_dp_groups_of_two_ranks_with_fsdp2_kill_one_rank_and_rejoin(tmp_path):
    """3 groups of 2 ranks (torchrun --nproc-per-node 2, FSDP2 fully_shard inside each group, gloo, float64).

    The GPT-style model with AdamW, clipping by global norm in ``before_step``, a warmup
    + cosine scheduler and dropout (each rank's part of a micro-batch draws its own
    stream).  Against the fault-free run within ten times what a one-ulp change of every
    loss moves it (about 1e-11 of a scale of 3.7 here: AdamW amplifies rounding; a
    fault-free job of 3 x 2 ranks is that far from it too); a wrong gradient moves it by
    more than 1e-3.

    SIGKILL rank 1 of group 1: torchrun stops its rank 0 and restarts the group as a
    whole, which rejoins; every group ends that close to the fault-free run.  Then
    group 1 comes back with one rank: refused (exit 77), the job's store untouched.
    """
    out = str(tmp_path)
    args = ["--groups", "3", "--steps", "14", "--step-sleep", "0.05", "--await-repairs", "120", "--model", "gpt"]
    with launched(3, args, out, restarts=1, nproc=2) as (port, client, processes):
        wait_for(lambda: int(read(client, "gen/0/progress") or 0) >= 4, "four steps", processes, out)
        os.kill(worker_pid(client, 0, 1, rank=1), signal.SIGKILL)
        codes = finish(processes)
        assert codes == {g: 0 for g in range(3)}, logs(out)
        assert wait_timeout_warnings(out, [0, 2]) == 0, logs(out)  # rank 1 of each survivor followed rank 0
        results = assert_exact(out, args, range(3), group_ranks=2)
        assert results[1]["rejoined"] and not results[0]["rejoined"]
        assert all(r["members"] == [0, 1, 2] for r in results.values())
        assert read(client, "gen/0/group_world_size") == "2"
        # The dead rank's group left as a whole: the survivors agreed that group 1 failed.
        assert any(name == "agree" and extra.get("failed") == [1] for name, _, extra in results[0]["timeline"])
        other = torchrun(port, 1, args, out, restarts=0, nproc=1)
        assert other.wait(TIMEOUT) != 0
        assert "group 1 has 1 rank(s) but the job's DP groups have 2" in logs(out)


@pytest.mark.slow
def test_dp_groups_of_two_ranks_with_fsdp2_wipe_out_restarts_in_process_from_the_per_rank_checkpoint(tmp_path):
    """N = 3, r = 2, groups of 2 ranks (FSDP2, the GPT-style model): groups 1 and 2, the two holders of shard type 2,
    each lose one rank (rank 1 of group 1, rank 0 of group 2) together: a wipe-out.

    Both ranks of group 0 restart in their processes in generation 1 (the DP group's
    process group destroyed and built again) and load their own part of the checkpoint
    (``checkpoint.pt.rank{k}``, sharded); torchrun restarts the killed groups as a whole
    (``--max-restarts 1``), into generation 1 directly or through generation 0's end.
    Every group ends as close to the fault-free run as the K = 2 kill test.
    """
    out = str(tmp_path)
    args = ["--groups", "3", "--steps", "10", "--step-sleep", "0.05", "--checkpoint-every", "3", "--model", "gpt"]
    with launched(3, args, out, restarts=1, nproc=2) as (port, client, processes):
        wait_for(lambda: int(read(client, "gen/0/progress") or 0) >= 4, "four steps", processes, out)
        victims = [worker_pid(client, 0, 1, rank=1), worker_pid(client, 0, 2, rank=0)]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        codes = finish(processes)
        assert codes == {g: 0 for g in range(3)}, logs(out)
        assert read(client, "generation") == "1"
        assert read(client, "gen/0/ended") == "restart"
        with open(os.path.join(out, "torchrun-g0.log")) as handle:
            survivor = handle.read()
        # Both ranks of the survivor started again in their processes, from their parts of the checkpoint.
        assert survivor.count("this worker starts again there, from the last checkpoint") == 2, logs(out)
        assert read(client, "gen/1/started/0") is not None and read(client, "gen/1/started/0/1") is not None
        assert wait_timeout_warnings(out, [0]) == 0, logs(out)
        results = assert_exact(out, args, range(3), group_ranks=2)
        assert all(r["generation"] == 1 and r["members"] == [0, 1, 2] for r in results.values())
        # Every group of generation 1 started from the same checkpoint, written in generation 0 (step 3 or later).
        restored = [[extra.get("step") for name, _, extra in r["timeline"] if name == "restored"]
                    for r in results.values()]
        assert len({tuple(steps) for steps in restored}) == 1 and len(restored[0]) == 1, restored
        assert restored[0][0] in (3, 6, 9), restored


@pytest.mark.slow
def test_fsdp2_groups_with_a_no_grad_evaluation_on_one_group_finish_exact(tmp_path):
    """2 groups of 2 ranks (FSDP2, gloo, the GPT-style model); group 0 evaluates under torch.no_grad() before steps 0
    and 2, as nanoGPT does.  FSDP2's root module then keeps its parameters gathered; the consistency check (every
    step here) must read the sharded ones alike on both groups: no ReplicaDivergence, every group exact."""
    out = str(tmp_path)
    args = ["--groups", "2", "--steps", "4", "--model", "gpt", "--evaluate-every", "2", "--evaluate-group", "0",
            "--check-every", "1"]
    with launched(2, args, out, restarts=0, nproc=2) as (port, client, processes):
        codes = finish(processes)
        assert codes == {0: 0, 1: 0}, logs(out)
        assert "divergence" not in logs(out)
        results = assert_exact(out, args, range(2), group_ranks=2)
        for r in results.values():
            assert {extra.get("step") for name, _, extra in r["timeline"] if name == "checked"} == {0, 1, 2, 3}


_RUN_AGAIN = """
import sys
from spare_opt.torch.elastic import JobEnded, WipeOut
from spare_opt.torch.launchers import join_job, run_worker

def main(failing):
    job = join_job()
    print(f"start generation={job.generation} rejoin={job.rejoin}", flush=True)
    if job.generation in failing:
        raise WipeOut([1, 2]) if job.generation % 2 == 0 else JobEnded("no live member", restart=True)

run_worker(main, [int(g) for g in sys.argv[1:]])
"""


def test_run_worker_starts_the_worker_again_in_the_new_generation():
    """After a WipeOut or a JobEnded(restart=True), run_worker moves the job on and runs main again in its process.

    So the restart does not depend on the launcher's restart budget; with
    SPARE_RESTART_IN_PROCESS=0 the worker exits 75 for the launcher as before.
    """
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    env = {**os.environ, "SPARE_STORE": f"127.0.0.1:{server.port}", "SPARE_GROUP": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # Generation 0: a wipe-out; generation 1: no live member; generation 2: it finishes.
    done = subprocess.run([sys.executable, "-c", _RUN_AGAIN, "0", "1"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"start generation={g} rejoin=False" for g in range(3)]
    assert server.get("generation") == b"2" and server.get("gen/1/ended") == b"restart"
    assert done.stderr.count("this worker starts again there, from the last checkpoint") == 2
    legacy = subprocess.run([sys.executable, "-c", _RUN_AGAIN, "2"], env={**env, "SPARE_RESTART_IN_PROCESS": "0"},
                            capture_output=True, text=True, timeout=120)
    assert legacy.returncode == WIPE_OUT_EXIT, legacy.stderr
    assert legacy.stdout.splitlines() == ["start generation=2 rejoin=True"]  # group 1 had started there
    assert server.get("generation") == b"3" and "exiting for the launcher to restart this group" in legacy.stderr

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


def torchrun(port, group, args, out, restarts, extra_env=None, nproc=1):
    env = {**os.environ, "SPARE_STORE": f"127.0.0.1:{port}", "SPARE_GROUP": str(group), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **(extra_env or {})}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
               "--max-restarts", str(restarts), "--monitor-interval", "0.1", SCRIPT, "--out", out, *args]
    log = open(os.path.join(out, f"torchrun-g{group}.log"), "a")
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


@contextlib.contextmanager
def launched(groups, args, out, restarts, nproc=1):
    """A store and one torchrun per group; yields ``(port, client, processes)``; kills whatever is left at the end."""
    store, port, client = start_store()
    processes = {}
    try:
        processes.update({g: torchrun(port, g, args, out, restarts=restarts, nproc=nproc) for g in range(groups)})
        yield port, client, processes
    finally:
        for process in processes.values():
            process.kill()
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
                other.kill()
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
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
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
        os.kill(worker_pid(client, 0, 1), signal.SIGKILL)
        codes = finish(processes)
        assert codes == {g: 0 for g in range(4)}, logs(out)
        # The survivors waited for the agreement without a store wait that timed out.
        assert wait_timeout_warnings(out, [0, 2, 3]) == 0, logs(out)
        results = assert_exact(out, args, range(4))
        assert results[1]["rejoined"] and not results[0]["rejoined"]
        assert all(r["members"] == [0, 1, 2, 3] for r in results.values())
        # A group restarted after the end of the job: it leaves at once, cleanly.
        started = time.monotonic()
        late = torchrun(port, 2, args, out, restarts=0)
        assert late.wait(TIMEOUT) == 0, logs(out)
        assert "the job has ended" in logs(out)
        assert time.monotonic() - started < TIMEOUT


@pytest.mark.slow
def test_torchrun_per_group_wipe_out_restarts_in_a_new_generation(tmp_path):
    """N = 4, r = 2: groups 1 and 2 (the two holders of shard type 2) die together; every group restarts."""
    out = str(tmp_path)
    args = ["--steps", "16", "--step-sleep", "0.05", "--checkpoint-every", "4"]
    with launched(4, args, out, restarts=3) as (port, client, processes):
        wait_for(lambda: int(read(client, "gen/0/progress") or 0) >= 6, "six steps", processes, out)
        victims = [worker_pid(client, 0, 1), worker_pid(client, 0, 2)]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        codes = finish(processes)
        assert codes == {g: 0 for g in range(4)}, logs(out)
        assert read(client, "generation") == "1"
        assert read(client, "gen/0/ended") == "restart"
        results = assert_exact(out, args, range(4))
        assert all(r["generation"] == 1 for r in results.values())


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

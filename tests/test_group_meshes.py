"""DP groups that are whole model replicas: pipeline, tensor and FSDP2 parallelism inside each group, under SIGKILL.

Every job runs ``examples/launch/llama.py`` (through ``tests/mesh_worker.py``, which
records every step) under one ``torchrun --nproc-per-node K`` per DP group against the
standalone store: a small Llama-style model (RMSNorm, rotary attention, SwiGLU), tensor
parallelism on attention and MLP, pipeline stages by layers, FSDP2 over ``dp_shard``,
AdamW, clipping by the global norm, a warmup + cosine schedule and dropout, float64 on
gloo.  A fault is a SIGKILL of one rank; every rank's final parameters must equal those
of the fault-free run of the same mesh within 1e-10 (relative, per tensor), and every
step's micro-batches must be the plan's: each exactly once over the groups, each with
the samples the sampler gives it.
"""

import json
import os
import random
import signal
import sys

import pytest

torch = pytest.importorskip("torch")

import spare_opt  # noqa: E402
from conftest import REPO  # noqa: E402
from test_launchers import finish, launched, logs, read, wait_for, worker_pid  # noqa: E402

SCRIPT = str(REPO / "tests" / "mesh_worker.py")
#: Relative difference allowed per tensor from the fault-free run of the same mesh (float64).
TOLERANCE = 1e-10


def run_job(out, args, groups, ranks, fault=None, restarts=1):
    """A store, one torchrun of ``ranks`` processes per group running ``args``; ``fault(client, processes)`` once the
    job trains.  Returns the exit codes."""
    os.makedirs(out, exist_ok=True)
    with launched(groups, args, out, restarts=restarts, nproc=ranks, script=SCRIPT) as (port, client, processes):
        if fault is not None:
            fault(client, processes)
        codes = finish(processes)
        generation = read(client, "generation")
    return codes, generation


def results(out, groups, ranks):
    return {(g, k): torch.load(os.path.join(out, f"g{g}.r{k}.pt"), weights_only=False)
            for g in range(groups) for k in range(ranks)}


def assert_equal_to(reference, out, groups, ranks):
    """Every rank's final local parameters within TOLERANCE (relative, per tensor) of the same rank's in ``reference``."""
    expected = results(reference, groups, ranks)
    found = results(out, groups, ranks)
    worst = 0.0
    for where, result in found.items():
        for mine, theirs in zip(result["params"], expected[where]["params"]):
            scale = max(float(theirs.abs().max()), 1e-30)
            worst = max(worst, float((mine - theirs).abs().max()) / scale)
    assert worst <= TOLERANCE, (worst, logs(out))
    return found, worst


def records(out, groups, ranks):
    lines = {}
    for g in range(groups):
        for k in range(ranks):
            path = os.path.join(out, f"record-g{g}.r{k}.jsonl")
            if os.path.exists(path):
                with open(path) as handle:
                    lines[g, k] = [json.loads(line) for line in handle]
    return lines


def assert_the_plans_micro_batches(out, groups, ranks, micro_batches, steps, sampler, layout):
    """Every step's gradient counts every micro-batch once over the groups, and each rank's pipeline received the
    samples of the micro-batches its group computed: the first stage their inputs, the last their targets.

    A group that died after its step's gradient was summed (the survivors applied that step with it, then agreed it
    failed) left no record of the step: its part is its work under the plan of the epoch that applied the step.
    """
    from spare_opt.torch import PlanBook

    book = PlanBook(layout, micro_batches)
    lines = records(out, groups, ranks)
    keys = set(range(groups * micro_batches))
    for s in range(steps):
        by_group = {}
        members = {tuple(e["members"]) for entries in lines.values() for e in entries if e["step"] == s}
        for (g, k), entries in lines.items():
            # the last record of step s (a restarted group's earlier process may have written one before it died)
            entry = [e for e in entries if e["step"] == s]
            if not entry:
                continue
            entry = entry[-1]
            by_group.setdefault(g, set()).update(entry["computed"])
            assert len(set(entry["computed"])) == len(entry["computed"]), (s, g, k, entry)
            for key in entry["computed"]:
                expected = sampler(s, key, entry["data_part"])
                seen = [rows for name, rows in entry["rows"].items() if name[1:] == str(key)]
                # every rank of a pipeline stage that takes inputs or targets saw them, once, exactly these
                for found in seen:
                    assert found == [expected], (s, g, k, key, found, expected)
            for name in entry["rows"]:
                assert int(name[1:]) in entry["computed"], (s, g, k, name, entry)
        for applied in members:
            work = book.work(book.plan([g for g in range(groups) if g not in applied]))
            for g in applied:
                by_group.setdefault(g, set(work[g]))
        counted = [key for computed in by_group.values() for key in computed]
        caught_up = any(e["caught_up"] for entries in lines.values() for e in entries if e["step"] == s)
        if not caught_up:
            assert sorted(counted) == sorted(keys), (s, by_group)


def sampler_of(args):
    """``(step, key, part) -> dataset indices`` of the job's sampler, as a rank of data part ``part`` reads them."""
    from spare_opt.torch import global_batch_indices

    micro_batch = args["micro_batch_size"] * args["dp_shard"]

    def indices(step, key, part):
        batch = global_batch_indices(512, args["global_batch"], step, seed=0)
        start = key * micro_batch + part * args["micro_batch_size"]
        return batch[start:start + args["micro_batch_size"]].tolist()

    return indices


def kill_one_rank(group, ranks, rng, steps):
    """A fault: SIGKILL a random rank of ``group`` once the job reached a random step."""
    at, rank = rng.randrange(2, steps - 4), rng.randrange(ranks)

    def fault(client, processes):
        wait_for(lambda: int(read(client, "gen/0/progress") or 0) >= at, f"step {at}", processes, fault.out)
        os.kill(worker_pid(client, 0, group, rank=rank), signal.SIGKILL)
        fault.where = (at, rank)

    return fault


#: The meshes of the kill tests, with m: two micro-batches per shard type make the pipeline's fault-free count 2,
#: which 1F1B runs itself (a count below the number of stages runs under GPipe).
JOBS = {
    "pp2-tp2": (["--pp", "2", "--tp", "2", "--schedule", "1F1B"], 2),
    "dp_shard2-tp2": (["--dp-shard", "2", "--tp", "2"], 1),
}
STEPS = 12


def job_args(mesh):
    # A heartbeat timeout well above a busy machine's stalls: the kills are noticed by their death notices.
    options, micro_batches = JOBS[mesh]
    return ["--groups", "3", "--steps", str(STEPS), "--checkpoint-every", "3", "--heartbeat-timeout", "10",
            "--micro-batches", str(micro_batches), "--record", *options]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The fault-free run of each mesh (once per mesh for the module)."""
    done = {}

    def of(mesh):
        if mesh not in done:
            out = str(tmp_path_factory.mktemp(f"reference-{mesh}"))
            codes, _ = run_job(out, job_args(mesh), 3, 4)
            assert codes == {0: 0, 1: 0, 2: 0}, logs(out)
            done[mesh] = out
        return done[mesh]

    return of


@pytest.mark.slow
@pytest.mark.parametrize("mesh", sorted(JOBS))
def test_a_killed_rank_fails_its_group_and_every_group_ends_as_the_fault_free_run(tmp_path, reference, mesh):
    """N = 3, r = 2, groups of 4 ranks (PP 2 x TP 2 under 1F1B, or FSDP2 dp_shard 2 x TP 2): SIGKILL a random rank of
    group 1 at a random step.  Its torchrun stops the group's other ranks and restarts the group, which rejoins and
    heals each rank from the same mesh position of a live group; the survivors patch its micro-batches through their
    pipelines.  Every rank ends within 1e-10 of the fault-free run, and every step counted each micro-batch once."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    out = str(tmp_path)
    args = [*job_args(mesh), "--await-repairs", "120"]
    fault = kill_one_rank(1, 4, rng, STEPS)
    fault.out = out
    codes, generation = run_job(out, args, 3, 4, fault)
    assert codes == {0: 0, 1: 0, 2: 0}, (seed, logs(out))
    assert generation in (None, "0"), (seed, logs(out))
    found, worst = assert_equal_to(reference(mesh), out, 3, 4)
    assert all(r["members"] == [0, 1, 2] for r in found.values()), seed
    assert all(found[1, k]["rejoined"] for k in range(4)) and not found[0, 0]["rejoined"], seed
    # The survivors agreed that group 1 failed, and printed the recovery.
    assert any(name == "agree" and extra.get("failed") == [1] for name, _, extra in found[0, 0]["timeline"]), seed
    text = logs(out)
    assert "rejoined at step" in text, seed
    dp_shard = 2 if "dp_shard" in mesh else 1
    m = JOBS[mesh][1]
    assert_the_plans_micro_batches(out, 3, 4, m, STEPS, sampler_of(
        {"micro_batch_size": 2, "dp_shard": dp_shard, "global_batch": 3 * m * 2 * dp_shard}),
        spare_opt.consecutive(3, 2))


@pytest.mark.slow
def test_a_wipe_out_of_pipeline_groups_restarts_from_the_per_rank_checkpoint(tmp_path, reference):
    """N = 3, r = 2, PP 2 x TP 2: one rank of group 1 and one of group 2 (the two holders of shard type 2) SIGKILLed
    together: a wipe-out.  Group 0's four ranks start again in their processes in generation 1, every rank loads its
    own part of the checkpoint (``checkpoint.pt.rank{k}``: its stage, its tensor-parallel slice), the killed groups'
    torchruns restart them, and every rank ends within 1e-10 of the fault-free run."""
    rng = random.Random()
    out = str(tmp_path)

    def fault(client, processes):
        wait_for(lambda: int(read(client, "gen/0/progress") or 0) >= 4, "step 4", processes, out)
        for g in (1, 2):
            os.kill(worker_pid(client, 0, g, rank=rng.randrange(4)), signal.SIGKILL)

    codes, generation = run_job(out, job_args("pp2-tp2"), 3, 4, fault)
    assert codes == {0: 0, 1: 0, 2: 0}, logs(out)
    assert generation == "1", logs(out)
    found, _ = assert_equal_to(reference("pp2-tp2"), out, 3, 4)
    assert all(r["generation"] == 1 for r in found.values())
    restored = {tuple(extra.get("step") for name, _, extra in r["timeline"] if name == "restored")
                for r in found.values()}
    assert len(restored) == 1 and next(iter(restored))[0] in (3, 6), restored


def _torchrun_check(tmp_path, script, args, nproc=4):
    """Run ``script`` under one torchrun of ``nproc`` ranks against a fresh store; its combined output."""
    import subprocess

    from test_launchers import start_store

    store, port, _ = start_store()
    env = {**os.environ, "SPARE_STORE": f"127.0.0.1:{port}", "SPARE_GROUP": "0", "OMP_NUM_THREADS": "1",
           "CHECK_OUT": str(tmp_path), "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    try:
        done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                               str(nproc), "--max-restarts", "0", script, *args], env=env, capture_output=True,
                              text=True, timeout=300, start_new_session=True)
    finally:
        store.terminate()
        store.wait()
    return done


@pytest.mark.parametrize("mesh", [["--pp", "2", "--tp", "2", "--schedule", "1F1B"],
                                  ["--pp", "2", "--tp", "2", "--schedule", "Interleaved1F1B",
                                   "--stages-per-rank", "2"],
                                  ["--dp-shard", "2", "--tp", "2"],
                                  ["--pp", "2", "--dp-shard", "2", "--schedule", "GPipe"]],
                         ids=["pp2-tp2-1f1b", "pp2-tp2-interleaved", "dp_shard2-tp2", "pp2-dp_shard2-gpipe"])
def test_one_step_on_a_mesh_equals_the_whole_model(tmp_path, mesh):
    """One DP group of 4 ranks, three micro-batches through its pipeline (or FSDP2 with TP): the step's mean loss,
    the global norm of ``step.clip_grad_norm_`` and every rank's gradient slice equal the whole model's, computed
    on one rank (float64, 1e-12).  With three micro-batches on two stages, 1F1B runs a count it takes and
    interleaved 1F1B one it splits (2 + 1)."""
    done = _torchrun_check(tmp_path, str(REPO / "tests" / "mesh_step_check.py"), mesh)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "ok loss" in done.stdout + done.stderr


_REFUSALS = r'''
import datetime, os, sys, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
import spare_opt
from spare_opt.torch import SpareGroup, SpareStep, SpareBatchSampler
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
store = dist.HashStore()
layout = spare_opt.consecutive(2, 2)
said = []
for names in (("dp_replicate",), ("cp",), ("dp",), ("fsdp",), ("tp", "tp")):
    try:
        mesh = init_device_mesh("cpu", (1,) * len(names), mesh_dim_names=names)
    except Exception as exc:  # torch refuses a repeated name itself
        said.append(f"torch: {type(exc).__name__}")
        continue
    try:
        SpareGroup(layout, 0, dist.PrefixStore(repr(names), store), mesh=mesh)
        said.append("accepted")
    except spare_opt.ParameterError as exc:
        said.append(str(exc))
group = SpareGroup(spare_opt.consecutive(1, 1), 0, dist.PrefixStore("tp", store),
                   mesh=init_device_mesh("cpu", (1,), mesh_dim_names=("tp",)))
dataset = torch.utils.data.TensorDataset(torch.zeros(8, 2), torch.zeros(8, 1))
model = torch.nn.Linear(2, 1)
sampler = SpareBatchSampler(group, 8, 4, steps=1)
try:
    SpareStep(group, model, torch.optim.SGD(model.parameters(), lr=0.1), lambda out, target: out.sum(), sampler,
              dataset, stages=object())
    said.append("accepted")
except spare_opt.ParameterError as exc:
    said.append(str(exc))
group.close()
try:
    SpareGroup(layout, 0, dist.PrefixStore("x", store), mesh="pp2")
except spare_opt.ParameterTypeError as exc:
    said.append(str(exc))
print("\n".join(said))
'''


def test_a_mesh_that_is_not_one_replicas_is_refused_with_its_reason():
    """``dp_replicate`` (SPARe is that dimension), ``cp`` (it splits a sample), ``dp``, an unknown name and a mesh that
    is not a DeviceMesh are refused with a message that says why, before the group touches the store."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _REFUSALS], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "SPARe itself is the replicate dimension" in lines[0], lines
    assert "context parallelism inside a DP group is not supported" in lines[1], lines
    assert "name FSDP2's dimension 'dp_shard'" in lines[2], lines
    assert "a DP group's dimensions are 'pp', 'dp_shard', 'tp'" in lines[3], lines
    assert "accepted" not in lines, lines
    assert "SpareStep(stages=...) runs a pipeline: the SpareGroup needs mesh= with a 'pp' dimension" in lines[-2], lines
    assert "mesh must be a torch.distributed.device_mesh.DeviceMesh, got str" in lines[-1], lines


def test_every_stage_and_data_part_draws_its_own_stream_and_a_whole_model_keeps_its_old_one():
    """``micro_batch_seed``'s ``stage``: stage 0 of part 0 is the stream of a model that is not pipelined (runs and
    checkpoints of earlier versions draw the same masks), and every (part, stage) pair draws another."""
    from spare_opt.torch import micro_batch_seed

    base = (7, 3, 2, 1)
    assert micro_batch_seed(*base, part=0, stage=0) == micro_batch_seed(*base)
    assert micro_batch_seed(*base, part=1) == micro_batch_seed(*base, part=1, stage=0)
    seeds = {micro_batch_seed(*base, part=part, stage=stage) for part in range(4) for stage in range(4)}
    assert len(seeds) == 16


def test_the_complete_worker_of_the_launch_docs_is_the_example_file():
    """docs/launch.md prints examples/launch/llama.py whole: the worker the tests run is the one the page shows."""
    import re

    text = (REPO / "docs" / "launch.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"^```python\n(.*?)\n```$", text, flags=re.S | re.M) if "class Llama(nn.Module)" in b]
    assert len(blocks) == 1
    assert blocks[0] + "\n" == (REPO / "examples" / "launch" / "llama.py").read_text(encoding="utf-8")
    assert "not covered" not in text.split("## Groups with tensor and pipeline parallelism")[1].split("\n## ")[0]


def test_a_group_that_starts_with_another_mesh_stops_the_job_at_once(tmp_path):
    """N = 2: group 0 is PP 2 x TP 2, group 1 FSDP2 dp_shard 2 x TP 2 (the same four ranks, another mesh).  Before the
    job runs nobody can admit a group, and the others would wait for its registration until their timeout with a
    misleading message ("a rank that never started"): the first start of a group of another shape stops the whole
    job with the reason, every rank exits 77 (do not restart), and the groups never agree a first epoch."""
    from test_launchers import start_store, torchrun
    from spare_opt.torch._processes import kill_tree

    out = str(tmp_path)
    store, port, client = start_store()
    common = ["--groups", "2", "--steps", "2", "--timeout", "120"]
    processes = {}
    try:
        processes[0] = torchrun(port, 0, [*common, "--pp", "2", "--tp", "2"], out, restarts=0, nproc=4,
                                script=SCRIPT)
        processes[1] = torchrun(port, 1, [*common, "--dp-shard", "2", "--tp", "2"], out, restarts=0, nproc=4,
                                script=SCRIPT)
        codes = finish(processes, timeout=100)  # well within the timeout that every wait used to run out
        assert read(client, "gen/0/epoch/0") is None
    finally:
        for process in processes.values():
            kill_tree(process.pid)
            process.wait()
        store.terminate()
        store.wait()
    # The whole logs (logs() keeps each one's tail, which torchrun's reports of four ranks can fill).
    text = "".join(open(os.path.join(out, name)).read() for name in sorted(os.listdir(out)) if name.endswith(".log"))
    assert codes == {0: 1, 1: 1}, (codes, logs(out))  # torchrun reports its workers' failure
    assert text.count("exitcode  : 77") >= 2, logs(out)
    assert "the job stops: group" in text and "form the mesh" in text, logs(out)
    assert "did not register" not in text, logs(out)

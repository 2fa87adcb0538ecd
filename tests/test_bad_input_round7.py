"""Input hardening, round 7 (the runtime): timing arguments, checkpoints read and written, the launcher's inputs.

Same contract as ``tests/test_bad_input_round2.py``: the API raises the specific
:class:`spare_opt.SpareError` subclass, naming the argument, file or variable and its
value; a worker prints one line (no traceback) and exits with the code its launcher acts
on (77: a configuration error that every restart would meet again); every wait ends
within its bound.  Sections, after the bugs they pin: 1 ``SpareGroup``'s timing
arguments (a negative timeout hung); 2 ``SpareStep(checkpoint_every=...)``; 3 a
checkpoint that cannot be read, or holds no step number; 4 checkpoint parts of another
``K`` and a dangling link (a silent start from step 0); 5 ``checkpoint_extra`` that does
not pickle (a temporary file left per failed save); 6 ``RandomState`` in a checkpoint
that ``torch.load``'s defaults read; 7 ``SPARE_STORE_TIMEOUT`` too small to use and group
numbers that ``int()`` reads too kindly; 8 a death notice for a group the job does not
have; 9 configuration errors under ``run_worker`` (exit 77); 10 a store started on a
port that is taken.  Real stores (torch's ``TCPStore``), real processes, gloo on CPU.
"""

import math
import os
import pickle
import random
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import spare_opt  # noqa: E402
from conftest import REPO  # noqa: E402
from spare_opt import ParameterError, ParameterTypeError  # noqa: E402
from spare_opt.torch import (CheckpointMismatch, RandomState, SpareBatchSampler, SpareGroup,  # noqa: E402
                             SpareStep, post_death)
from spare_opt.torch.launchers import LAYOUT_EXIT, join_job  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
       "OMP_NUM_THREADS": "1"}
for _name in ("SPARE_STORE", "SPARE_GROUP", "JOB_COMPLETION_INDEX", "RANK", "WORLD_SIZE", "SPARE_GROUP_RANK",
              "SPARE_GROUP_WORLD_SIZE", "SPARE_REJOIN", "SPARE_STORE_TIMEOUT", "TORCHELASTIC_RESTART_COUNT"):
    ENV.pop(_name, None)

DATASET = torch.utils.data.TensorDataset(torch.arange(64.0).reshape(16, 4) / 64, torch.ones(16, 1))


@pytest.fixture
def server():
    """A store of the test's own (a job of its own: a refusal's ``fatal`` key stops no other test's job)."""
    return dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)


@pytest.fixture
def store(server):
    """The store of the job's generation 0, as ``join_job`` gives it."""
    return dist.PrefixStore("gen/0", server)


@pytest.fixture
def group(store):
    built = SpareGroup(spare_opt.consecutive(1, 1), 0, store)
    yield built
    built.close()


def loss_fn(model, batch):
    x, y = batch
    return ((model(x) - y) ** 2).mean()


def new_step(group, checkpoint=None, steps=3, seed=1, **kwargs):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    sampler = SpareBatchSampler(group, len(DATASET), 4, steps=steps, seed=seed)
    return SpareStep(group, model, optimizer, loss_fn, sampler, DATASET, checkpoint=checkpoint, **kwargs)


def train(step):
    while step.step < step.sampler.steps:
        step()
    return step


def beside(path):
    """The files beside ``path`` whose names begin with its name (temporaries, parts), itself left out."""
    folder, name = os.path.split(str(path))
    return sorted(f for f in os.listdir(folder) if f.startswith(name) and f != name)


def python(code, env=None, timeout=300):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env={**ENV, **(env or {})})


# ------------------------------------------------------------------ 1 SpareGroup's timing arguments
TIMINGS = [
    ("timeout", -1.0, ParameterError), ("timeout", 0, ParameterError), ("timeout", 0.5, ParameterError),
    ("timeout", math.nan, ParameterError), ("timeout", math.inf, ParameterError), ("timeout", 1e300, ParameterError),
    ("timeout", 10**400, ParameterError), ("timeout", "abc", ParameterTypeError), ("timeout", None, ParameterTypeError),
    ("timeout", True, ParameterTypeError),
    ("heartbeat_interval", -1.0, ParameterError), ("heartbeat_interval", 0.0, ParameterError),
    ("heartbeat_interval", math.nan, ParameterError), ("heartbeat_interval", math.inf, ParameterError),
    ("heartbeat_interval", 1e300, ParameterError), ("heartbeat_interval", "abc", ParameterTypeError),
    ("heartbeat_timeout", 0.0, ParameterError), ("heartbeat_timeout", -1.0, ParameterError),
    ("heartbeat_timeout", math.nan, ParameterError), ("heartbeat_timeout", math.inf, ParameterError),
    ("heartbeat_timeout", 1e300, ParameterError), ("heartbeat_timeout", "2", ParameterTypeError),
]


@pytest.mark.parametrize("name, value, error", TIMINGS, ids=[f"{n}={v!r}"[:32] for n, v, _ in TIMINGS])
def test_a_timing_argument_that_is_no_usable_number_of_seconds_is_refused_before_the_store(store, name, value,
                                                                                          error):
    """``timeout=-1`` waited for ever; an infinite interval killed the heartbeat thread; others passed ``float()``."""
    with pytest.raises(error) as caught:
        SpareGroup(spare_opt.consecutive(1, 1), 0, store, **{name: value})
    assert str(caught.value).startswith(name), caught.value
    assert not store.check(["layout"])  # refused before anything was written


@pytest.mark.parametrize("timeout", [0.05, 0.01])
def test_a_heartbeat_timeout_not_above_the_interval_is_refused(store, timeout):
    with pytest.raises(ParameterError, match=r"heartbeat_timeout must be above heartbeat_interval \(0.05 s\)"):
        SpareGroup(spare_opt.consecutive(1, 1), 0, store, heartbeat_interval=0.05, heartbeat_timeout=timeout)


def test_the_least_usable_timings_are_taken(store):
    group = SpareGroup(spare_opt.consecutive(1, 1), 0, store, heartbeat_interval=np.float64(0.001),
                       heartbeat_timeout=0.002 + 1.0, timeout=1)
    try:
        assert (group.interval, group.timeout_seconds) == (0.001, 1.0) and type(group.interval) is float
    finally:
        group.close()


def test_a_group_out_of_range_names_the_launchers_variable(store):
    with pytest.raises(ParameterError, match=r"in \[0, 1\).*SPARE_GROUP"):
        SpareGroup(spare_opt.consecutive(1, 1), 1, store)


# ------------------------------------------------------------------ 2 SpareStep(checkpoint_every=...)
@pytest.mark.parametrize("value", ["abc", math.nan, math.inf, None, 2.7, -1, True, "5", 3.0])
def test_checkpoint_every_is_checked_as_check_every_is(group, tmp_path, value):
    with pytest.raises(ParameterError, match=r"checkpoint_every must be a non-negative integer"):
        new_step(group, tmp_path / "c.pt", checkpoint_every=value)


@pytest.mark.parametrize("argument, value, error", [
    ("seed", "abc", ParameterTypeError), ("seed", 1.5, ParameterTypeError), ("seed", math.nan, ParameterTypeError),
    ("seed", True, ParameterTypeError), ("checkpoint", 123, ParameterTypeError), ("checkpoint", "", ParameterError),
    ("loss_fn", None, ParameterTypeError), ("collate_fn", "default", ParameterTypeError)])
def test_the_step_helpers_other_arguments_are_checked_by_name(group, argument, value, error):
    """``seed="abc"`` reached ``int()``'s raw ValueError, ``checkpoint=123`` ``os.fspath``'s TypeError."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    arguments = {"loss_fn": loss_fn, argument: value}
    with pytest.raises(error, match=argument):
        SpareStep(group, model, torch.optim.SGD(model.parameters(), lr=0.1), arguments.pop("loss_fn"),
                  SpareBatchSampler(group, len(DATASET), 4, steps=3, seed=1), DATASET, **arguments)


def test_checkpoint_every_takes_numpy_integers(group, tmp_path):
    assert new_step(group, tmp_path / "c.pt", checkpoint_every=np.int64(2)).checkpoint_every == 2


# ------------------------------------------------------------------ 3 a checkpoint that cannot be read
def _written(group, path):
    train(new_step(group, None)).save_checkpoint(path)
    return path.read_bytes()


CORRUPT = {
    "empty": lambda whole: b"",
    "truncated": lambda whole: whole[: len(whole) // 2],
    "noise": lambda whole: bytes(random.Random(0).randrange(256) for _ in range(4096)),
    "text": lambda whole: b"step = 3\n",
    "a pickle of no checkpoint": lambda whole: pickle.dumps([1, 2, 3]),
}


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_a_checkpoint_that_cannot_be_read_is_refused_naming_the_file_and_stops_the_job(group, store, tmp_path, kind):
    path = tmp_path / "c.pt"
    path.write_bytes(CORRUPT[kind](_written(group, tmp_path / "whole.pt")))
    with pytest.raises(CheckpointMismatch) as caught:
        new_step(group, path)
    assert str(path) in str(caught.value) and "move it away" in str(caught.value)
    assert "\n" not in str(caught.value) and caught.value.path == str(path)
    assert store.check(["fatal"])  # every restart would meet the same file: the job stops


def test_a_folder_where_the_checkpoint_should_be_is_refused(group, tmp_path):
    (tmp_path / "c.pt").mkdir()
    with pytest.raises(CheckpointMismatch, match="cannot be read"):
        new_step(group, tmp_path / "c.pt")


@pytest.mark.parametrize("value", [-3, 2.5, "3", True, None, [3]])
def test_a_checkpoint_whose_step_is_no_step_number_is_refused_naming_the_file(group, tmp_path, value):
    """A step of -3 reached the sampler's error without the file's name; 2.5 resumed at step 2."""
    path = tmp_path / "c.pt"
    _written(group, path)
    saved = torch.load(path, weights_only=False)
    saved["step"] = value
    torch.save(saved, path)
    with pytest.raises(CheckpointMismatch, match=r"holds step .* not a step number") as caught:
        new_step(group, path)
    assert str(path) in str(caught.value)


def test_a_checkpoint_with_a_numpy_step_resumes(group, tmp_path):
    path = tmp_path / "c.pt"
    _written(group, path)
    saved = torch.load(path, weights_only=False)
    saved["step"] = np.int64(2)
    torch.save(saved, path)
    resumed = new_step(group, path)
    assert resumed.step == 2 and type(resumed.step) is int


# ------------------------------------------------------------------ 4 parts of another K, a dangling link
def test_parts_of_groups_of_two_ranks_are_refused_by_a_job_of_one_rank(group, store, tmp_path):
    """A job of 2-rank groups left checkpoint.pt.rank0/.rank1; a job of 1-rank groups trained from step 0 silently."""
    path = tmp_path / "checkpoint.pt"
    _written(group, tmp_path / "checkpoint.pt.rank0")
    (tmp_path / "checkpoint.pt.rank1").write_bytes((tmp_path / "checkpoint.pt.rank0").read_bytes())
    with pytest.raises(CheckpointMismatch) as caught:
        new_step(group, path)
    text = str(caught.value)
    assert "checkpoint.pt.rank0, checkpoint.pt.rank1" in text and "had 2 ranks" in text and "have 1 rank" in text
    assert store.check(["fatal"]) and not path.exists()


def test_a_checkpoint_link_whose_target_is_gone_is_refused(group, tmp_path):
    path = tmp_path / "latest.pt"
    path.symlink_to(tmp_path / "gone" / "ckpt.pt")
    with pytest.raises(CheckpointMismatch, match="symbolic link to .*gone.*which does not exist"):
        new_step(group, path)


def test_a_fresh_start_and_a_resume_each_say_so(group, tmp_path, capfd):
    path = tmp_path / "c.pt"
    train(new_step(group, path))
    assert f"spare-opt: group 0: no checkpoint at {path}: starts from step 0" in capfd.readouterr().err
    assert new_step(group, path).step == 3
    assert f"resumes from checkpoint {path} at step 3" in capfd.readouterr().err
    # Unrelated files beside it (a part of another name, a temporary) are not parts of it.
    (tmp_path / "c.pt.rank0.bak").write_bytes(b"")
    (tmp_path / "c.ptx.rank0").write_bytes(b"")
    assert new_step(group, path).step == 3


_TWO_RANKS = """
import os, sys, torch, torch.distributed as dist
import spare_opt
from spare_opt.torch import CheckpointMismatch, SpareBatchSampler, SpareGroup, SpareStep
rank, port, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
server = dist.TCPStore("127.0.0.1", port, is_master=False, wait_for_workers=False)
dist.init_process_group("gloo", store=dist.PrefixStore("pg", server), rank=rank, world_size=2)
data = torch.utils.data.TensorDataset(torch.arange(64.0).reshape(16, 4) / 64, torch.ones(16, 1))
for case in ("whole", "missing", "extra", "complete"):
    group = SpareGroup(spare_opt.consecutive(1, 1), 0, dist.PrefixStore(case + "/gen/0", server),
                       group_process_group=dist.group.WORLD)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    try:
        step = SpareStep(group, model, torch.optim.SGD(model.parameters(), lr=0.1), lambda model, batch: 0,
                         SpareBatchSampler(group, 16, 4, steps=3, seed=1), data,
                         checkpoint=os.path.join(folder, case, "c.pt"))
        print(case, "resumed", step.step, flush=True)
    except CheckpointMismatch as exc:
        print(case, "refused", " ".join(str(exc).split())[:400], flush=True)
    group.close()
"""


def test_a_dp_group_of_two_ranks_resumes_only_from_its_own_complete_set_of_parts(group, server, tmp_path):
    """K = 2: a whole-file checkpoint (K = 1), a part missing, a part of a third rank: refused; both parts: resumed."""
    whole = _written(group, tmp_path / "seed.pt")
    layout = {"whole": ["c.pt"], "missing": ["c.pt.rank0"], "extra": ["c.pt.rank0", "c.pt.rank1", "c.pt.rank2"],
              "complete": ["c.pt.rank0", "c.pt.rank1"]}
    for case, names in layout.items():
        (tmp_path / case).mkdir()
        for name in names:
            (tmp_path / case / name).write_bytes(whole)
    ranks = [subprocess.Popen([sys.executable, "-c", _TWO_RANKS, str(k), str(server.port), str(tmp_path)], cwd=REPO,
                              env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in (0, 1)]
    outputs = [rank.communicate(timeout=300) for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], outputs
    for out, _ in outputs:
        lines = dict(line.split(" ", 1) for line in out.splitlines())
        assert lines["whole"].startswith("refused") and "DP groups of 1 rank" in lines["whole"], lines
        assert lines["missing"].startswith("refused") and "rank 1 missing" in lines["missing"], lines
        assert lines["extra"].startswith("refused") and "groups of 3 ranks" in lines["extra"], lines
        assert lines["complete"] == "resumed 3", lines


# ------------------------------------------------------------------ 5 checkpoint_extra that does not pickle
def _generator():
    yield 1


UNPICKLABLE = {"a lambda": lambda: (lambda x: x), "a generator": lambda: _generator(), "a lock": threading.Lock,
               "nested": lambda: {"ok": [1, 2], "bad": [threading.Lock()]}}


@pytest.mark.parametrize("kind", sorted(UNPICKLABLE))
def test_an_extra_entry_that_does_not_pickle_is_named_at_construction(group, tmp_path, kind):
    with pytest.raises(ParameterError, match=r"checkpoint_extra\['f'\] cannot be pickled"):
        new_step(group, tmp_path / "c.pt", checkpoint_extra={"f": UNPICKLABLE[kind](), "fine": torch.zeros(3)})


@pytest.mark.parametrize("kind", sorted(UNPICKLABLE))
def test_a_save_that_cannot_pickle_names_the_entry_and_leaves_no_temporary(group, tmp_path, kind):
    """The first save raised a raw pickling error after training, and left ``c.pt.tmp<pid>`` (one per restart)."""
    path = tmp_path / "c.pt"
    step = new_step(group, path, checkpoint_every=1, checkpoint_extra=lambda: {"f": UNPICKLABLE[kind]()})
    with pytest.raises(ParameterError, match=rf"checkpoint {path} was not written: checkpoint_extra\['f'\]"):
        train(step)
    assert beside(path) == [] and not path.exists()


class _Locked:
    """A stateful object whose state holds a lock (registered with ``state=``)."""

    def state_dict(self):
        return {"lock": threading.Lock()}

    def load_state_dict(self, state):
        pass


def test_a_state_object_that_does_not_pickle_is_named_at_the_save(group, tmp_path):
    path = tmp_path / "c.pt"
    with pytest.raises(ParameterError, match=r"the state_dict\(\) of 'locked' \(state=\) cannot be pickled"):
        train(new_step(group, path, checkpoint_every=1, state={"locked": _Locked()}))
    assert beside(path) == []


def test_the_temporary_goes_whatever_the_save_raised(group, tmp_path):
    target = tmp_path / "c.pt"
    target.mkdir()  # os.replace(temporary, a folder) fails after torch.save wrote the temporary
    step = new_step(group, None)
    with pytest.raises(OSError):
        step.save_checkpoint(target)
    assert beside(target) == []


# ------------------------------------------------------------------ 6 RandomState and torch.load's defaults
def test_a_checkpoint_with_random_state_loads_with_torch_loads_defaults(group, tmp_path):
    """``weights_only=True`` (nanoGPT's sample.py, docs/torch.md's snippet) refused NumPy's state inside."""
    path = tmp_path / "ckpt.pt"
    np.random.seed(7)
    random.seed(7)
    step = train(new_step(group, path, state={"rng": RandomState()},
                          checkpoint_extra=lambda: {"model_args": {"n_embd": 4}, "config": {"lr": 0.1}}))
    expected = (np.random.rand(3), random.random(), torch.rand(2))  # the draws after the final state
    checkpoint = torch.load(path)  # the defaults: weights_only=True
    assert checkpoint["model_args"] == {"n_embd": 4} and checkpoint["step"] == step.step == 3
    torch.nn.Linear(4, 1).load_state_dict(checkpoint["model"])
    # The random streams continue from it as in an uninterrupted run.
    RandomState().load_state_dict(checkpoint["state"]["rng"])
    again = (np.random.rand(3), random.random(), torch.rand(2))
    assert np.array_equal(expected[0], again[0]) and expected[1] == again[1] and torch.equal(expected[2], again[2])


def test_a_random_state_of_the_earlier_form_still_loads(group, tmp_path):
    """States written before hold NumPy's own tuple (an array inside): still restored, and resumed from a file."""
    np.random.seed(11)
    legacy = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    expected = np.random.rand(4)
    RandomState().load_state_dict(legacy)
    assert np.array_equal(np.random.rand(4), expected)
    path = tmp_path / "old.pt"
    train(new_step(group, path, state={"rng": RandomState()}))
    saved = torch.load(path)
    saved["state"]["rng"] = legacy
    torch.save(saved, path)
    new_step(group, path, state={"rng": RandomState()})
    assert np.array_equal(np.random.rand(4), expected)


# ------------------------------------------------------------------ 7 the launcher's variables
BASE = {"SPARE_STORE": "127.0.0.1:29600", "SPARE_GROUP": "0"}


@pytest.mark.parametrize("value", ["1e-9", "5e-4", "1e-300", "0.999", "0.5"])
def test_a_store_timeout_too_small_to_use_is_refused_by_name(server, value):
    """1e-9 passed the check and became a client timeout of 0 ms: torch's raw DistStoreError at the first read."""
    with pytest.raises(ParameterError, match=r"SPARE_STORE_TIMEOUT must be a number of seconds, at least 1") as caught:
        join_job({**BASE, "SPARE_STORE": f"127.0.0.1:{server.port}", "SPARE_STORE_TIMEOUT": value})
    assert repr(value) in str(caught.value)


def test_the_least_store_timeout_is_taken():
    """1 s is the least: taken (a join with it is not tried here: on a loaded machine a connection may take longer)."""
    from spare_opt.torch.launchers import _seconds

    assert _seconds("1", "SPARE_STORE_TIMEOUT") == 1.0 and _seconds("1e6", "SPARE_STORE_TIMEOUT") == 1e6
    with pytest.raises(ParameterError, match="at most 1e"):
        _seconds("1000001", "SPARE_STORE_TIMEOUT")


@pytest.mark.parametrize("name", ["SPARE_GROUP", "JOB_COMPLETION_INDEX", "SPARE_GROUP_RANK", "RANK",
                                  "SPARE_GROUP_WORLD_SIZE", "WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT"])
@pytest.mark.parametrize("value", ["1_0", "+5", "\u0663", "\uff13", " 3", "3 ", "0x3", "3\n"])
def test_an_integer_variable_takes_plain_decimal_digits_only(name, value):
    """``int()`` read SPARE_GROUP=1_0 as 10, +5 as 5 and an Arabic-Indic three as 3."""
    env = {**BASE, name: value}
    if name == "JOB_COMPLETION_INDEX":
        del env["SPARE_GROUP"]
    with pytest.raises(ParameterError, match=rf"{name} must be an integer \(decimal digits 0-9\)"):
        join_job(env)


def test_a_group_beyond_the_jobs_n_is_refused_before_anything_is_written(server, store):
    jobs = store
    jobs.set("groups", "4")  # what the first group's registration writes
    address = f"127.0.0.1:{server.port}"
    with pytest.raises(ParameterError, match=r"SPARE_GROUP=4 is out of range: this job has N = 4 DP groups"):
        join_job({"SPARE_STORE": address, "SPARE_GROUP": "4"})
    with pytest.raises(ParameterError, match=r"JOB_COMPLETION_INDEX=9 is out of range"):
        join_job({"SPARE_STORE": address, "JOB_COMPLETION_INDEX": "9"})
    assert not jobs.check(["launches/4"]) and not jobs.check(["alive/4"])
    assert join_job({"SPARE_STORE": address, "SPARE_GROUP": "3"}).group == 3


def test_a_registered_group_records_the_jobs_n(group, store):
    assert store.get("groups") == b"1"


# ------------------------------------------------------------------ 8 a death notice for a group the job lacks
@pytest.mark.parametrize("value, error", [(-1, ParameterError), (10**20, ParameterError), (4, ParameterError),
                                          (True, ParameterTypeError), (1.0, ParameterTypeError),
                                          ("1", ParameterTypeError)])
def test_a_death_notice_outside_the_jobs_groups_is_refused_and_writes_nothing(store, value, error):
    store.set("groups", "4")
    with pytest.raises(error):
        post_death(store, value)
    assert not store.check(["deaths"]) and not store.check(["dead_list"])
    post_death(store, np.int64(3), "killed")
    assert store.get("dead/3") == b"killed"


def test_the_post_death_command_refuses_a_group_outside_the_job(server, store, capsys):
    """``python -m spare_opt.torch.launchers post-death --group -1`` exited 0 and wrote ``dead/-1``."""
    from spare_opt.torch.launchers import _main

    store.set("groups", "4")
    address = f"127.0.0.1:{server.port}"
    for value, words in (("-1", "must be in [0, 4)"), ("4", "got 4"), ("100000000000000000000", "got 1000")):
        assert _main(["post-death", "--store", address, "--group", value]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: the group of a death notice") and words in err and err.count("\n") == 1, err
    for value in ("1_0", "+1", "\u0663"):
        with pytest.raises(SystemExit) as caught:  # argparse's usage error, as for any malformed option
            _main(["post-death", "--store", address, "--group", value])
        assert caught.value.code == 2 and "decimal digits" in capsys.readouterr().err
    assert not store.check(["dead_list"])
    assert _main(["post-death", "--store", address, "--group", "3"]) == 0 and store.get("dead/3") == b"died"


# ------------------------------------------------------------------ 9 configuration errors under run_worker
WORKER = """
import spare_opt
from spare_opt.torch import SpareGroup
from spare_opt.torch.launchers import join_job, run_worker

def main():
    job = join_job()
    SpareGroup(spare_opt.consecutive(2, 2), job.group, job.store, timeout=30)

run_worker(main)
"""


@pytest.mark.parametrize("case", ["SPARE_STORE unset", "SPARE_GROUP unset", "SPARE_GROUP out of range",
                                  "SPARE_GROUP malformed"])
def test_a_configuration_error_exits_77_in_one_line_naming_the_variable(server, case):
    """They exited 1, which the exit-code table calls "restart": torchrun and the SLURM loop retried them."""
    env = {"SPARE_STORE": f"127.0.0.1:{server.port}", "SPARE_GROUP": "0", "SPARE_STORE_TIMEOUT": "30"}
    name = "SPARE_GROUP"
    if case == "SPARE_STORE unset":
        del env["SPARE_STORE"]
        name = "SPARE_STORE"
    elif case == "SPARE_GROUP unset":
        del env["SPARE_GROUP"]
    elif case == "SPARE_GROUP out of range":
        env["SPARE_GROUP"] = "2"  # the layout has N = 2: the first group to register, so SpareGroup refuses it
    else:
        env["SPARE_GROUP"] = "+1"
    run = python(WORKER, env=env)
    assert run.returncode == LAYOUT_EXIT, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("spare-opt: ") and name in lines[0], run.stderr


def test_a_corrupt_checkpoint_under_run_worker_exits_77_and_stops_the_job(server, tmp_path):
    path = tmp_path / "c.pt"
    path.write_bytes(b"")
    code = f"""
    import torch
    import spare_opt
    from spare_opt.torch import SpareBatchSampler, SpareGroup, SpareStep
    from spare_opt.torch.launchers import join_job, run_worker

    def main():
        job = join_job()
        group = SpareGroup(spare_opt.consecutive(1, 1), job.group, job.store, timeout=30)
        model = torch.nn.Linear(2, 1)
        data = torch.utils.data.TensorDataset(torch.zeros(4, 2), torch.zeros(4, 1))
        SpareStep(group, model, torch.optim.SGD(model.parameters(), lr=0.1), lambda model, batch: 0,
                  SpareBatchSampler(group, 4, 2, steps=2), data, checkpoint={str(path)!r})

    run_worker(main)
    """
    run = python(code, env={"SPARE_STORE": f"127.0.0.1:{server.port}", "SPARE_GROUP": "0"})
    assert run.returncode == LAYOUT_EXIT, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "is not a readable checkpoint" in lines[0] and str(path) in lines[0], run.stderr
    assert server.check(["gen/0/fatal"])  # the job is stopped: a restart meets the refusal at once


# ------------------------------------------------------------------ 10 a store on a port that is taken
def test_a_store_on_a_port_that_is_taken_says_so_in_one_line(server):
    run = subprocess.run([sys.executable, "-m", "spare_opt.torch.store", "--host", "127.0.0.1", "--port",
                          str(server.port)], capture_output=True, text=True, timeout=300, cwd=REPO, env=ENV)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.strip().count("\n") == 0, run.stderr
    assert run.stderr.startswith(f"error: port {server.port} on 127.0.0.1 is taken: a store (or another program) "
                                 "already listens there; pick another --port"), run.stderr
    assert "EADDRINUSE" not in run.stderr

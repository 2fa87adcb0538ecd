"""Input hardening, round 5: ten kinds of hostile or unusual input, one section each.

Same contract as ``tests/test_bad_input_round2.py``: the CLI prints one ``Error: ...``
line and exits non-zero (no traceback), the API raises the specific
:class:`spare_opt.SpareError` subclass, and where there is a right value it is checked.
Sections: 1 corrupt controller states; 2 Dask runs with no worker, 3 with a lost
scheduler; 4 overflowing plan serialisations, 5 values of the wrong kind in a plan's
dict; 6 the sampler's and the plan book's arguments; 7 cluster-file errors; 8 huge
durations; 9 ``fit`` messages; 10 ``work_by_group()[g]``.
"""

import json
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import spare_opt as so
from spare_opt import ExecutorError, ParameterError, Plan, PlanError, ReorderController, SpareError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, timeout=300):
    """Run ``code`` in a fresh interpreter (a segfault fails the test instead of pytest)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


# ------------------------------------------------------------------ 1 controller states
def _source(m=1, failures=(1, 4)):
    controller = ReorderController(so.generate("sidon", 12, 3), micro_batches=m)
    for group in failures:
        controller.fail([group])
    return controller


@pytest.mark.parametrize("m", [1, 3])
def test_a_state_with_a_changed_value_is_refused_by_its_checksum(m):
    state = _source(m).state_dict()
    state["arrays"]["scalars"][0] += 1
    target = ReorderController(so.generate("sidon", 12, 3), micro_batches=m)
    before = target.state_dict()
    with pytest.raises(ParameterError, match="checksum does not verify"):
        target.load_state_dict(state)
    after = target.state_dict()  # nothing adopted
    assert all(np.array_equal(before["arrays"][k], after["arrays"][k]) for k in before["arrays"])


def test_a_state_without_checksum_or_with_a_text_wiped_out_flag_is_refused():
    state = _source().state_dict()
    target = ReorderController(so.generate("sidon", 12, 3))
    for key, value, message in (("checksum", None, "no checksum"), ("wiped_out", "no", "wiped_out must be a bool"),
                                ("wiped_out", 0, "wiped_out must be a bool")):
        bad = dict(state, **{key: value})
        with pytest.raises(ParameterError, match=message):
            target.load_state_dict(bad)


def test_a_state_with_values_beyond_int32_is_refused_not_wrapped():
    from spare_opt.planning._state_check import checksum_meta, state_checksum

    state = _source().state_dict()
    rows = state["arrays"]["rows"].astype(np.int64)
    rows[0, 0] = 2**32 + 1  # would wrap to 1, the value it had
    state["arrays"]["rows"] = rows
    state["checksum"] = state_checksum(checksum_meta(state), state["arrays"])
    with pytest.raises(ParameterError, match="outside int32"):
        ReorderController(so.generate("sidon", 12, 3)).load_state_dict(state)


@pytest.mark.parametrize("m", [1, 3])
def test_consistent_forgeries_are_refused_by_name(m):
    """Re-signed states that break one invariant each: the message names it."""
    from spare_opt.planning import _kernels as k, _split_kernels as s
    from spare_opt.planning._state_check import checksum_meta, state_checksum

    layout = so.generate("sidon", 12, 3)
    target = ReorderController(layout, micro_batches=m)

    def forged(change):
        state = _source(m).state_dict()
        change(state["arrays"])
        state["checksum"] = state_checksum(checksum_meta(state), state["arrays"])
        return state

    if m == 1:
        cases = [
            (lambda a: a["rows"].__setitem__((k.SHARD_STATE_START + k.ASSIGNED, 0), 1), "assignment|assigned"),
            (lambda a: a["scalars"].__setitem__(k.STACK, 3), "level 3 is not the least"),
            (lambda a: a["rows"].__setitem__((k.GROUP_STATE_START + k.ALIVE, 1), 1), "alive flags"),
            (lambda a: a["scalars"].__setitem__(k.FAILED_COUNT, 13), "failed count"),
            (lambda a: a["tables"].__setitem__((k.TABLE_ORDER, 0, 0), 99), "permutation"),
        ]
    else:
        cases = [
            (lambda a: a["micro"].__setitem__((s.SPLIT, 0, 0), 1), "split|micro-batch"),
            (lambda a: a["scalars"].__setitem__(s.BOUND, 9), "level 9 is not the least"),
            (lambda a: a["rows"].__setitem__((s.DISTANCE, 0), 10**6), "distance labels"),
            (lambda a: a["scalars"].__setitem__(s.JOURNAL_END, 5), "journal offset"),
        ]
    for change, message in cases:
        with pytest.raises(ParameterError, match=message):
            target.load_state_dict(forged(change))


def test_a_wiped_out_state_round_trips():
    controller = ReorderController(so.consecutive(6, 2))
    controller.fail([0])
    assert controller.fail([1]).status == "wipe-out"
    twin = ReorderController(so.consecutive(6, 2))
    twin.load_state_dict(controller.state_dict())
    assert twin.wiped_out and twin.failed.tolist() == [0, 1]
    assert twin.set_failed([0]).stack_number == controller.set_failed([0]).stack_number


FUZZ = """
import numpy as np, spare_opt as so
from spare_opt import ReorderController, SpareError
from spare_opt.planning._state_check import checksum_meta, state_checksum

def source(rng, m):
    layout = so.generate(str(rng.choice(["sidon", "consecutive"])), int(rng.integers(7, 20)), 3)
    a = ReorderController(layout, micro_batches=m)
    for _ in range(int(rng.integers(0, 7))):
        if a.failed.size and rng.random() < 0.3:
            a.recover([int(rng.choice(a.failed))])
        elif a.fail([int(rng.choice(np.flatnonzero(a.alive)))]).status != "masked":
            break
    return layout, a

counts = {"refused": 0, "accepted": 0}
for seed in range(SEEDS):
    rng = np.random.default_rng(seed)
    m = int(rng.choice([1, 1, 2, 3]))
    layout, a = source(rng, m)
    state = a.state_dict()
    name = str(rng.choice(sorted(state["arrays"])))
    flat = state["arrays"][name].reshape(-1)
    original = flat.copy()
    at = rng.integers(0, flat.size, size=int(rng.integers(1, 4)))
    kind = int(rng.integers(4))
    flat[at] = [rng.integers(-10**6, 10**6, size=at.size), flat[at] + rng.choice([-1, 1], size=at.size),
                rng.integers(-2, layout.groups + 2, size=at.size), rng.integers(-1, 4, size=at.size)][kind]
    if np.array_equal(flat, original):
        flat[at[0]] = original[at[0]] + 1  # a corruption changes something
    if RESIGN:
        state["checksum"] = state_checksum(checksum_meta(state), state["arrays"])
    b = ReorderController(layout, micro_batches=m)
    try:
        b.load_state_dict(state)
    except SpareError:
        counts["refused"] += 1
        continue
    counts["accepted"] += 1
    assert RESIGN, "a corrupt state passed its checksum"
    for _ in range(5):  # an accepted state plans exactly: every level equals the exact planner's
        if b.wiped_out:
            b.restart()
        if b.failed.size and rng.random() < 0.4:
            plan = b.recover([int(rng.choice(b.failed))])
        else:
            plan = b.fail([int(rng.choice(np.flatnonzero(b.alive)))])
        plan.order, plan.split, plan.assignment
        if plan.status == "masked":
            assert so.plan_reorder(layout, plan.failed, micro_batches=m).load == plan.load, seed
print(counts)
"""


@pytest.mark.parametrize("resign", [False, True])
def test_random_corruptions_never_crash_the_interpreter(resign):
    """Random corruptions of random states (m = 1 to 3, after failures and rejoins), in a
    subprocess so that a segmentation fault fails the test.  With the checksum kept, every
    one is refused; re-signed (a forged or foreign state), each is refused or, when
    accepted, plans at the exact planner's level."""
    result = run_python(FUZZ.replace("SEEDS", "120").replace("RESIGN", str(resign)))
    assert result.returncode == 0, result.stderr[-3000:]
    counts = eval(result.stdout.strip().splitlines()[-1])
    assert counts["refused"] + counts["accepted"] == 120
    if not resign:
        assert counts["accepted"] == 0
    else:
        assert counts["refused"] > 30  # the checks do refuse most value corruptions


def test_the_reproducer_of_a_corrupt_state_now_raises():
    layout = so.generate("sidon", 12, 3)
    a = ReorderController(layout)
    a.fail([1])
    a.fail([4])
    state = a.state_dict()
    flat = state["arrays"]["scalars"].reshape(-1)
    rng = np.random.default_rng(1)
    at = rng.integers(0, flat.size, size=max(1, flat.size // 10))
    flat[at] = rng.integers(-10**6, 10**6, size=at.size)
    with pytest.raises(ParameterError, match="corrupt controller state"):
        ReorderController(layout).load_state_dict(state)


# ------------------------------------------------------------- 2, 3 Dask runs bounded


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(args):
    return subprocess.Popen([sys.executable, "-m", "dask", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _stop(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


@pytest.fixture
def scheduler():
    """A real ``dask scheduler`` process on 127.0.0.1 (no worker): ``(process, address)``."""
    pytest.importorskip("distributed")
    port = _free_port()
    process = _start(["scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address",
                      "127.0.0.1:0", "--no-show"])
    deadline = time.monotonic() + 90
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                _stop(process)
                pytest.fail("the dask scheduler did not start within 90 s")
            time.sleep(0.3)
    yield process, f"tcp://127.0.0.1:{port}"
    _stop(process)


def _worker(address):
    return _start(["worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-nanny", "--no-dashboard"])


def _run_sleeps(executor, count, seconds):
    from spare_opt._core.parallel import run_tasks

    return run_tasks(time.sleep, [(seconds,)] * count, executor=executor)


@pytest.mark.slow
def test_dask_a_scheduler_without_worker_is_an_error_after_the_stated_wait(scheduler):
    from spare_opt._core.parallel import dask_executor

    start = time.monotonic()
    with dask_executor(scheduler[1], worker_wait_seconds=2) as executor:
        with pytest.raises(ExecutorError, match=r"has no worker: no worker joined within 2 s \(3 of 3 tasks"):
            _run_sleeps(executor, 3, 0.01)
    assert time.monotonic() - start < 60


@pytest.mark.slow
def test_dask_the_only_worker_lost_mid_run_is_an_error_naming_it(scheduler):
    from spare_opt._core.parallel import dask_executor

    worker = _worker(scheduler[1])
    try:
        with dask_executor(scheduler[1], worker_wait_seconds=2) as executor:
            executor._client.wait_for_workers(1, timeout=90)
            assert _run_sleeps(executor, 2, 0.01) == [None, None]  # the worker runs tasks
            killer = subprocess.Popen(["sh", "-c", f"sleep 2; kill -9 {worker.pid}"])
            with pytest.raises(ExecutorError, match="its last worker was lost with 4 of 4 tasks unfinished, "
                                                    "and no worker joined within 2 s"):
                _run_sleeps(executor, 4, 30)
            killer.wait(timeout=30)
    finally:
        _stop(worker)


@pytest.mark.slow
def test_dask_a_lost_scheduler_is_one_line_without_dask_tracebacks(scheduler, capfd):
    from spare_opt._core.parallel import dask_executor

    process, address = scheduler
    worker = _worker(address)
    try:
        with dask_executor(address) as executor:
            executor._client.wait_for_workers(1, timeout=90)
            killer = subprocess.Popen(["sh", "-c", f"sleep 2; kill -9 {process.pid}"])
            with pytest.raises(ExecutorError, match=f"lost the Dask scheduler {address} before all 6 tasks finished"):
                _run_sleeps(executor, 6, 5)
            killer.wait(timeout=30)
    finally:
        _stop(worker)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "distributed." not in err, err[-2000:]


# ------------------------------------------------------ 4, 5 plan bytes and plan dicts
def _plan():
    return so.plan_reorder(so.generate("consecutive", 12, 3), [1, 5], micro_batches=4)


@pytest.mark.parametrize("sizes", [(2**32, 0, 2**32, 0, 0, 0), (5, 3, 2**31, 0, 0, 0), (12, 3, 4, 2**40, 0, 0),
                                   (2**62, 2**62, 2**62, 0, 0, 0)])
def test_plan_bytes_with_overflowing_header_sizes_are_a_plan_error(sizes):
    data = _plan().to_bytes()
    header = list(struct.unpack_from("<12qd", data, 10))
    header[1:7] = sizes
    header[11] = 2
    with pytest.raises(PlanError, match="corrupt header"):
        Plan.from_bytes(b"SPAREPLAN1" + struct.pack("<12qd", *header))


@pytest.mark.parametrize("key, value", [
    ("failed", [2**40]), ("failed", [2**31]), ("moves", float("inf")), ("micro_batches", float("inf")),
    ("moves", float("nan")), ("micro_batches", 2**40), ("assignment", [2**33] * 12),
    ("micro_batches", 4.7), ("micro_batches", "4"), ("moves", "3"), ("moves", 2.9), ("failed", "15"),
    ("failed", [[1], [5]]), ("failed", [1, True]), ("micro_batches", True), ("moves", False),
    ("failed", [1.5, 5]), ("failed", ["1", "5"]), ("failed", None), ("lost_shards", 3),
    ("split", [[0, 0, 0, 0]] * 11 + [[0, 0, 0]]), ("load", "6"), ("stack_number", 1.5),
    ("patch", {"x": []}), ("patch", {"2": [[1, 0.5]]}), ("patch", {"2": 7}), ("order", "abc"),
])
def test_plan_dict_values_of_the_wrong_kind_are_one_plan_error(key, value):
    with pytest.raises(PlanError, match="plan document"):
        Plan.from_dict({**_plan().to_dict(), key: value})


def test_plan_dict_whole_floats_and_numpy_integers_are_read_as_integers():
    plan = _plan()
    doc = plan.to_dict()
    doc.update(micro_batches=4.0, moves=np.int64(plan.moves), failed=[1.0, 5.0], load=float(plan.load))
    assert Plan.from_dict(doc) == plan
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    assert Plan.from_bytes(plan.to_bytes()) == plan


# ------------------------------------------------- 6 the sampler's and PlanBook's arguments
class _Source:
    def __init__(self):
        from spare_opt.torch import PlanBook

        self.book = PlanBook(so.consecutive(4, 2), 2)
        self.plan = self.book.plan(())
        self.group = 0


def test_sampler_takes_numpy_integers():
    pytest.importorskip("torch")
    from spare_opt.torch import SpareBatchSampler

    sampler = SpareBatchSampler(_Source(), np.int64(100), np.int64(16), steps=np.int32(2), seed=np.uint64(7),
                                start_step=np.int64(1))
    reference = SpareBatchSampler(_Source(), 100, 16, steps=2, seed=7, start_step=1)
    assert sampler.global_batch_size == 16 and type(sampler.global_batch_size) is int
    assert list(sampler) == list(reference) and len(sampler) == len(reference)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(dataset_size="100"), so.ParameterTypeError, "dataset_size must be an integer"),
    (dict(dataset_size=None), so.ParameterTypeError, "dataset_size must be an integer"),
    (dict(dataset_size=100.0), so.ParameterTypeError, "dataset_size must be an integer"),
    (dict(dataset_size=True), so.ParameterTypeError, "dataset_size must be an integer"),
    (dict(global_batch_size=16.0), so.ParameterTypeError, "global_batch_size must be an integer"),
    (dict(global_batch_size=12), ParameterError, "multiple of N m = 8"),
    (dict(steps="5"), so.ParameterTypeError, "steps must be an integer"),
    (dict(steps=2.5), so.ParameterTypeError, "steps must be an integer"),
    (dict(steps=-1), ParameterError, "steps must be >= 0"),
    (dict(seed=2**64), ParameterError, "seed must be <="),
    (dict(seed="abc"), so.ParameterTypeError, "seed must be an integer"),
    (dict(seed=-1), ParameterError, "seed must be >= 0"),
    (dict(start_step=-5), ParameterError, "start_step must be >= 0"),
    (dict(start_step=1.5), so.ParameterTypeError, "start_step must be an integer"),
    (dict(shuffle="no"), so.ParameterTypeError, "shuffle must be True or False"),
    (dict(shuffle=1), so.ParameterTypeError, "shuffle must be True or False"),
])
def test_sampler_arguments_are_refused_at_construction(kwargs, error, message):
    pytest.importorskip("torch")
    from spare_opt.torch import SpareBatchSampler

    arguments = dict(dataset_size=100, global_batch_size=16)
    arguments.update(kwargs)
    size, batch = arguments.pop("dataset_size"), arguments.pop("global_batch_size")
    with pytest.raises(error, match=message):
        SpareBatchSampler(_Source(), size, batch, **arguments)  # no iteration needed
    with pytest.raises(SpareError):
        SpareBatchSampler(_Source(), 100, 16).set_start_step(-1)


@pytest.mark.parametrize("failed", [[1.7], ["2"], [True], [1.0], 1.5, "12", [[1]], [1, 1], [4], [-1], None])
def test_plan_book_refuses_group_ids_as_set_failed_does(failed):
    pytest.importorskip("torch")
    book = _Source().book
    controller = ReorderController(so.consecutive(4, 2), micro_batches=2)
    with pytest.raises(so.FailureSetError) as by_book:
        book.plan(failed)
    with pytest.raises(so.FailureSetError) as by_controller:
        controller.set_failed(failed)
    assert str(by_book.value) == str(by_controller.value)  # one rule, one message


def test_plan_book_takes_numpy_ids_and_plans_for_exactly_that_set():
    pytest.importorskip("torch")
    book = _Source().book
    plan = book.plan(np.array([3], dtype=np.int64))
    assert plan.failed.tolist() == [3] and book.plan([np.int32(3)]) is plan and book.plan(3) is plan


# ---------------------------------------------------------------- 7 cluster-file errors
FAULT_LOG = """node,start,end,domain,kind
gpu-node-03,2024-03-01T08:00:00Z,2024-03-01T20:30:00Z,rack-1,GPU
gpu-node-07,2024-03-02T14:15:00Z,2024-03-04T09:00:00Z,rack-2,NIC
gpu-node-08,2024-03-02T14:15:00Z,2024-03-03T02:00:00Z,rack-2,NIC
gpu-node-03,2024-03-03T06:00:00Z,2024-03-03T11:00:00Z,rack-1,Fan
gpu-node-01,2024-03-05T01:00:00Z,2024-03-05T04:00:00Z,rack-1,GPU
gpu-node-11,2024-03-06T10:00:00Z,2024-03-07T10:00:00Z,rack-3,PSU
gpu-node-05,2024-03-08T12:00:00Z,2024-03-08T18:00:00Z,rack-2,GPU
gpu-node-09,2024-03-09T02:00:00Z,2024-03-09T03:30:00Z,rack-3,NIC
gpu-node-02,2024-03-10T20:00:00Z,2024-03-11T08:00:00Z,rack-1,GPU
"""


def cli(*args):
    from click.testing import CliRunner
    from spare_opt_cli.main import main

    return CliRunner().invoke(main, [str(a) for a in args])


def error_line(result, code=None):
    """The one ``Error:`` line of a clean CLI failure (asserts there is no traceback)."""
    assert result.exit_code != 0, result.output
    if code is not None:
        assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("Warning:")]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


@pytest.fixture
def fault_log(tmp_path):
    path = tmp_path / "log12.csv"
    path.write_text(FAULT_LOG)
    return path


@pytest.mark.parametrize("command", ["compare", "simulate"])
@pytest.mark.parametrize("key, value", [("format", "xml"), ("time_unit", "fortnights"), ("preset", "nope")])
def test_a_bad_failures_key_is_blamed_on_the_file_and_its_key(tmp_path, fault_log, command, key, value):
    cluster = tmp_path / "k.toml"
    cluster.write_text(f'[failures]\ntrace = "{fault_log.name}"\n{key} = "{value}"\n')
    line = error_line(cli(command, "--cluster", cluster, "--seeds", "1"), 1)
    assert line.startswith(f"Error: {cluster}: [failures] {key} = '{value}': '{value}' is not one of"), line
    assert "--" not in line.split("is not one of")[0]  # no option is blamed


def test_the_command_line_failure_source_wins_over_the_file(tmp_path, fault_log):
    model = tmp_path / "model12.json"
    assert cli("fit", fault_log, "--nodes", "12", "-o", model).exit_code == 0
    with_model = tmp_path / "k2.toml"
    with_model.write_text(f'[failures]\nfailure_model = "{model.name}"\n')
    result = cli("simulate", "--cluster", with_model, "--trace", fault_log, "--groups", "12", "--strategy", "ckpt",
                 "--seeds", "1", "-q", "--json")
    assert result.exit_code == 0, result.output
    assert f"Warning: {with_model}: --trace on the command line replaces the file's [failures] failure_model" \
        in result.stderr
    alone = cli("simulate", "--trace", fault_log, "--groups", "12", "--strategy", "ckpt", "--seeds", "1", "-q",
                "--json")
    assert json.loads(result.stdout)["summary"] == json.loads(alone.stdout)["summary"]  # the trace's run
    with_trace = tmp_path / "k3.toml"
    with_trace.write_text(f'[failures]\ntrace = "{fault_log.name}"\nformat = "csv"\ntime_scale = 2.0\n')
    result = cli("simulate", "--cluster", with_trace, "--failure-model", model, "--groups", "12", "--strategy",
                 "ckpt", "--seeds", "1", "-q")
    assert result.exit_code == 0, result.output
    assert "--failure-model on the command line replaces the file's [failures] trace, format, time_scale" \
        in result.stderr


# ------------------------------------------------------------------- 8 huge durations
def test_huge_durations_are_printed_in_years_in_scientific_notation():

    from spare_opt._core.durations import HUGE_SECONDS, duration_in
    from spare_opt.simulation.verdict import _duration as verdict_duration
    from spare_opt.traces.fit import _duration as fit_duration

    for seconds in (HUGE_SECONDS, 1e250, 1e308, sys.float_info.max):
        for text in (duration_in(seconds, 86400, "days", ".2f"), verdict_duration(seconds), fit_duration(seconds)):
            assert text.endswith(" years") and len(text) <= 20, text
            years = float(text.split()[0])
            assert math.isclose(years, seconds / (365.25 * 86400), rel_tol=0.05)
    assert verdict_duration(2 * 86400) == "2.0 d" and fit_duration(3600.0) == "60 min"  # below: unchanged
    assert duration_in(HUGE_SECONDS * 0.99, 86400, "d", ".0f") == f"{HUGE_SECONDS * 0.99 / 86400:.0f} d"


def test_compare_with_a_huge_restart_time_prints_no_long_number(fault_log):
    import re

    result = cli("compare", "--restart-seconds", "1e308", "--trace", fault_log, "--nodes", "12", "--rep-r", "2",
                 "--spare-r", "3", "--micro-batches", "1", "--seeds", "1", "--no-elastic", "--cycles", "1", "-q")
    assert result.exit_code == 0, result.output
    assert not re.search(r"\d{16}", result.stdout), result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith("CKPT only"))
    assert re.search(r"\d\.\de\+\d+ years", row), row


# ------------------------------------------------------------------- 9 fit's messages
def test_fit_says_why_equal_gaps_and_near_equal_repairs_have_no_fit(tmp_path):
    """Equal gaps have no maximum-likelihood Weibull shape (the likelihood grows without
    bound with the shape) and equal repairs a lognormal sigma of 0: refused, saying so,
    never "needs 2 different ..., got 9999"."""
    rows = [f"n0,{2 * i},{2 * i + 1 + (i % 16) * 1e-12}" for i in range(300)]  # 16 repair values, equal to 1e-9
    path = tmp_path / "equal.csv"
    path.write_text("node,start,end\n" + "\n".join(rows) + "\n")
    result = cli("fit", path, "--time-unit", "hours", "--nodes", "12")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "all 299 gaps between failure events are equal (2 h, to a relative 1e-09): the Weibull likelihood " \
           "has no maximum" in text
    assert "all 300 positive repair times are equal (60 min, to a relative 1e-09): the lognormal's " \
           "maximum-likelihood sigma would be 0" in text
    assert "different to a relative" not in text and "needs at least 2 different" not in text
    few = tmp_path / "few.csv"
    few.write_text("node,start,end\nn0,0,1\nn1,5,6\n")
    text = " ".join(cli("fit", few, "--time-unit", "hours", "--nodes", "12").stdout.split())
    assert "needs at least 2 gaps between failure events, got 1" in text


# ------------------------------------------------------------ 10 work_by_group()[g]
@pytest.mark.parametrize("m", [1, 3])
def test_work_by_group_is_indexed_by_group(m):
    plan = so.plan_reorder(so.generate("consecutive", 12, 3), [1, 5], micro_batches=m)
    work = plan.work_by_group()
    assert len(work) == 12
    for g in range(12):
        assert work[g] == ([] if g in (1, 5) else plan.work(g))
    assert work[np.int64(3)] == plan.work(3)
    with pytest.raises(TypeError, match="indexed by group"):
        indptr, types, batches = work
    with pytest.raises(SpareError):
        work[-1]
    with pytest.raises(SpareError):
        work[12]
    with pytest.raises(SpareError):
        work[True]
    with pytest.raises(SpareError):
        work[0:2]
    part = list(zip(work.shard_types[work.indptr[4]:work.indptr[5]].tolist(),
                    work.micro_batches[work.indptr[4]:work.indptr[5]].tolist()))
    assert part == work[4]
    import pickle

    again = pickle.loads(pickle.dumps(work))
    assert [again[g] for g in range(12)] == [work[g] for g in range(12)]

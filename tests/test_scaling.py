"""Parallel runs: processes, a thread pool and a Dask cluster give the numbers of one process.

One two-worker Dask ``LocalCluster`` is started for the module (``dask_client``) and
shut down at its end; every test that uses it is guarded by a watchdog that ends the
test process with a traceback rather than letting the suite hang.
"""

import copy
import faulthandler
import json
import math
import pickle
import socket
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from click.testing import CliRunner

import spare_opt
from spare_opt import (
    ExecutorError,
    Layout,
    ParameterError,
    ParameterTypeError,
    consecutive,
    monte_carlo,
    preset_parameters,
    random_latin,
    read_fault_trace,
    sidon,
    simulate,
    simulate_seeds,
    sweep,
    tune,
)
from spare_opt._core.parallel import (
    check_scheduler_address,
    dask_executor,
    local_cluster_options,
    parallelism,
    run_tasks,
)
from spare_opt.demo import packaged_trace_path
from spare_opt_cli.main import main

distributed = pytest.importorskip("distributed", reason="the 'dask' extra (dask[distributed]) is not installed")

#: Seconds a test that talks to the cluster may take before the watchdog ends the run.
WATCHDOG_SECONDS = 240


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def dask_client():
    """A Dask client on a two-worker local cluster (single-threaded worker processes)."""
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
    cluster = distributed.LocalCluster(**local_cluster_options(2))
    client = distributed.Client(cluster, set_as_default=False, timeout="60s")
    faulthandler.cancel_dump_traceback_later()
    yield client
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
    try:
        client.close(timeout=30)
        cluster.close(timeout=30)
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def dask_executor_(dask_client):
    """The cluster's ``concurrent.futures`` executor, with the watchdog armed during the test."""
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
    yield dask_client.get_executor()
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def layout():
    return sidon(60, 5, time_limit=2.0)


def _mc_numbers(result):
    """Everything a Monte-Carlo result reports but the wall time and the workers asked for."""
    doc = result.to_dict(per_trial=True)
    del doc["monte_carlo"]["seconds"], doc["monte_carlo"]["workers"]
    doc["stack_mean_by_k"] = result.stack_mean_by_k.tolist()
    doc["survivors_by_k"] = result.survivors_by_k.tolist()
    return doc


def _closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ----------------------------------------------------------------------------- pickling
def test_a_circulant_layout_travels_as_its_offsets_without_its_holder_index():
    n, r = 100_000, 17
    layout = Layout((np.arange(n)[:, None] + np.arange(r)) % n, method="consecutive", offsets=range(r))
    layout.holders()  # cache the index: it must not travel
    data = pickle.dumps(layout)
    assert len(data) < 1_000  # the stacks alone would be 4 N r = 6.8 MB
    loaded = pickle.loads(data)
    assert loaded == layout and loaded.metadata == layout.metadata
    assert loaded._holders is None
    assert not loaded.stacks.flags.writeable
    np.testing.assert_array_equal(loaded.holders()[1], layout.holders()[1])


def test_any_other_layout_travels_as_its_stacks_read_only():
    layout = random_latin(500, 6, seed=3)
    layout.holders()
    data = pickle.dumps(layout)
    stacks_bytes = layout.stacks.nbytes
    assert stacks_bytes <= len(data) < stacks_bytes + 2_000
    for loaded in (pickle.loads(data), copy.deepcopy(layout)):
        assert loaded == layout and loaded.metadata == layout.metadata and loaded.offsets is None
        assert not loaded.stacks.flags.writeable
        with pytest.raises(ValueError):
            loaded.stacks[0, 0] = 1


def test_parameters_traces_and_results_pickle_by_value():
    params = preset_parameters("paper-600k", 200, steps=300)
    trace = read_fault_trace(packaged_trace_path())
    run = simulate(params, "rep", 3, seed=1)
    result = monte_carlo(consecutive(40, 4), trials=5, seed=1)
    for value in (params, run, result):
        assert pickle.loads(pickle.dumps(value)) == value
    loaded = pickle.loads(pickle.dumps(trace))
    for name in ("times_days", "is_start", "node", "file_index", "ignored"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(trace, name))
    assert (loaded.node_ids, loaded.fault_class, loaded.irregular, loaded.source) == (
        trace.node_ids, trace.fault_class, trace.irregular, trace.source)
    # What a simulation task carries stays small: parameters, a circulant layout, the trace.
    assert len(pickle.dumps((params, sidon(200, 6, time_limit=2.0)))) < 4_000
    assert len(pickle.dumps(trace)) < 20 * trace.n_events + 30_000


# ----------------------------------------------------------------------------- arguments
@pytest.mark.parametrize("workers", [0, -2])
def test_bad_worker_counts_are_refused(workers, layout):
    with pytest.raises(ParameterError, match="workers"):
        monte_carlo(layout, trials=4, workers=workers)
    with pytest.raises(ParameterError, match="workers"):
        run_tasks(math.sqrt, [(1.0,)], workers=workers)


def test_an_executor_must_be_a_concurrent_futures_executor(layout, dask_client):
    with pytest.raises(ParameterTypeError, match="get_executor"):
        monte_carlo(layout, trials=4, executor=dask_client)  # the Client itself, not its executor
    with pytest.raises(ParameterTypeError):
        run_tasks(math.sqrt, [(1.0,)], executor="tcp://127.0.0.1:8786")


@pytest.mark.parametrize("address, expected", [
    ("local", "local"),
    ("tcp://127.0.0.1:8786", "tcp://127.0.0.1:8786"),
    ("127.0.0.1:8786", "tcp://127.0.0.1:8786"),
    ("tls://[::1]:8786", "tls://[::1]:8786"),
])
def test_scheduler_addresses_are_normalised(address, expected):
    assert check_scheduler_address(address) == expected


@pytest.mark.parametrize("address", ["", "local2", "127.0.0.1", "tcp://127.0.0.1:port", "http://127.0.0.1:8786",
                                     "tcp://:8786", "tcp://127.0.0.1:70000"])
def test_malformed_scheduler_addresses_are_refused(address):
    with pytest.raises(ParameterError, match="scheduler address"):
        check_scheduler_address(address)


def test_parallelism_is_read_from_the_executor(dask_client):
    assert parallelism(3) == 3
    with ThreadPoolExecutor(max_workers=5) as pool:
        assert parallelism(1, pool) == 5
    assert parallelism(1, dask_client.get_executor()) == 2


# ----------------------------------------------------------------------------- same numbers
def test_monte_carlo_numbers_do_not_depend_on_what_runs_them(layout, dask_executor_):
    reference = _mc_numbers(monte_carlo(layout, trials=64, seed=5))
    assert _mc_numbers(monte_carlo(layout, trials=64, seed=5, workers=2)) == reference
    with ThreadPoolExecutor(max_workers=2) as pool:
        assert _mc_numbers(monte_carlo(layout, trials=64, seed=5, executor=pool, chunk_size=7)) == reference
    assert _mc_numbers(monte_carlo(layout, trials=64, seed=5, executor=dask_executor_)) == reference
    assert _mc_numbers(monte_carlo(layout, trials=64, seed=6, executor=dask_executor_)) != reference


def test_simulation_numbers_do_not_depend_on_what_runs_them(dask_executor_):
    params = preset_parameters("paper-600k", 200, steps=400)
    for strategy, r in (("spare", 6), ("rep", 3)):
        reference = [run.to_dict() for run in simulate_seeds(params, strategy, r, seeds=4)]
        assert len({json.dumps(run, sort_keys=True) for run in reference}) == 4  # the seeds differ
        with ThreadPoolExecutor(max_workers=2) as pool:
            threaded = simulate_seeds(params, strategy, r, seeds=4, executor=pool)
        assert [run.to_dict() for run in threaded] == reference
        on_dask = simulate_seeds(params, strategy, r, seeds=4, executor=dask_executor_)
        assert [run.to_dict() for run in on_dask] == reference
    trace = read_fault_trace(packaged_trace_path())
    reference = [run.to_dict() for run in simulate_seeds(params, "spare", 6, seeds=2, trace=trace)]
    on_dask = simulate_seeds(params, "spare", 6, seeds=2, trace=trace, executor=dask_executor_, workers=2)
    assert [run.to_dict() for run in on_dask] == reference


def test_tune_and_sweep_numbers_do_not_depend_on_what_runs_them(dask_executor_):
    params = preset_parameters("paper-600k", 200, steps=300)
    options = dict(seeds=2, rep_redundancies=(2, 3), spare_redundancies=(5, 7), period_factors=(0.5, 1.0))
    reference = tune(params, **options).to_dict()
    assert tune(params, executor=dask_executor_, **options).to_dict() == reference
    assert tune(params, workers=2, **options).to_dict() == reference

    def rows(result):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in result.to_dict()["rows"]]

    options = dict(r_min=3, r_max=4, methods=("sidon", "consecutive"), trials=24, seed=2)
    assert rows(sweep(48, executor=dask_executor_, **options)) == rows(sweep(48, **options))


def test_progress_is_reported_in_order_from_an_executor(layout, dask_executor_):
    calls = []
    monte_carlo(layout, trials=50, seed=1, executor=dask_executor_, chunk_size=8,
                progress=lambda done, total: calls.append((done, total)))
    assert len(calls) == 7  # ceil(50 / 8) chunks
    assert all(total == 50 for _, total in calls)
    dones = [done for done, _ in calls]
    assert dones == sorted(dones) and len(set(dones)) == len(dones) and dones[-1] == 50


# ----------------------------------------------------------------------------- errors
def test_a_library_error_in_a_remote_task_is_raised_as_it_is(dask_executor_):
    # theory.mu(10, 0) raises ParameterError (r = 0) on a worker process.
    with pytest.raises(ParameterError, match="redundancy") as info:
        run_tasks(spare_opt.guarantees.theory.mu, [(10, 3), (10, 0)], executor=dask_executor_)
    assert not isinstance(info.value, ExecutorError)


def test_any_other_remote_failure_is_an_executor_error_naming_the_task(dask_executor_):
    with pytest.raises(ExecutorError, match=r"task 2 of 3 failed on executor ClientExecutor: ValueError") as info:
        run_tasks(math.sqrt, [(4.0,), (-1.0,), (9.0,)], executor=dask_executor_)
    assert isinstance(info.value.__cause__, ValueError)
    with ThreadPoolExecutor(max_workers=2) as pool:
        with pytest.raises(ExecutorError, match="ThreadPoolExecutor: ValueError: math domain error"):
            run_tasks(math.sqrt, [(4.0,), (-1.0,)], executor=pool)
    # Serially the task's own exception propagates unchanged.
    with pytest.raises(ValueError, match="math domain error"):
        run_tasks(math.sqrt, [(4.0,), (-1.0,)])


def test_a_worker_process_that_dies_is_an_executor_error():
    import os

    with pytest.raises(ExecutorError, match="process pool"):
        run_tasks(os._exit, [(3,), (3,)], workers=2)


def test_a_closed_port_is_refused_at_once():
    address = f"tcp://127.0.0.1:{_closed_port()}"
    with pytest.raises(ExecutorError, match=f"cannot reach the Dask scheduler {address}"):
        with dask_executor(address):
            pass


def test_a_server_that_is_not_a_dask_scheduler_is_refused_after_the_timeout():
    faulthandler.dump_traceback_later(60, exit=True)
    try:
        with socket.socket() as silent:  # accepts connections, never answers
            silent.bind(("127.0.0.1", 0))
            silent.listen(4)
            address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
            with pytest.raises(ExecutorError, match="handshake within 0.5 s"):
                with dask_executor(address, timeout_seconds=0.5):
                    pass
    finally:
        faulthandler.cancel_dump_traceback_later()


def test_without_dask_the_message_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # "import distributed" raises ImportError
    with pytest.raises(ExecutorError, match=r"needs Dask: pip install 'spare-opt\[dask\]'"):
        with dask_executor("local", workers=2):
            pass
    result = CliRunner().invoke(main, ["sweep", "-n", "20", "--r-max", "3", "--trials", "2", "--scheduler", "local"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == ["Error: running on a Dask cluster needs Dask: pip install "
                                                  "'spare-opt[dask]'"]


# ----------------------------------------------------------------------------- the CLI
SWEEP = ["sweep", "-n", "48", "--r-min", "3", "--r-max", "4", "--methods", "sidon,consecutive", "--trials", "24",
         "--seed", "2", "--json"]


def _sweep_rows(output):
    return [{k: v for k, v in row.items() if k != "seconds"} for row in json.loads(output)["rows"]]


def test_cli_on_a_running_scheduler_gives_the_numbers_of_one_process(dask_client, tmp_path, monkeypatch):
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
    try:
        runner = CliRunner()
        serial = runner.invoke(main, SWEEP)
        assert serial.exit_code == 0, serial.output
        remote = runner.invoke(main, [*SWEEP, "--scheduler", dask_client.scheduler.address])
        assert remote.exit_code == 0, remote.output
        assert _sweep_rows(remote.stdout) == _sweep_rows(serial.stdout)
        # The progress bar follows the tasks as they come back from the cluster (click
        # draws nothing off a terminal, so the bar is replaced by one that records).
        positions = []

        class Bar:
            def __init__(self, length, label, file):
                self.pos = 0
                positions.append((label, length))

            def __enter__(self):
                return self

            def update(self, steps):
                self.pos += steps
                positions.append(self.pos)

            def __exit__(self, *exc):
                positions.append("closed")

        monkeypatch.setattr("spare_opt_cli.options.progress_enabled", lambda quiet: not quiet)
        monkeypatch.setattr("spare_opt_cli.options.click.progressbar", Bar)
        layout_path = tmp_path / "layout.json"
        sidon(60, 5, time_limit=2.0).save(layout_path)
        shown = runner.invoke(main, ["validate", str(layout_path), "--trials", "40", "--worst-k", "1",
                                     "--scheduler", dask_client.scheduler.address])
        assert shown.exit_code == 0, shown.output
        assert positions[0] == ("Monte-Carlo trials", 40) and positions[-2:] == [40, "closed"]
        assert len(positions) >= 4 and positions[1:-1] == sorted(positions[1:-1])
    finally:
        faulthandler.cancel_dump_traceback_later()


def test_cli_local_cluster_of_two_workers_gives_the_numbers_of_one_process():
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
    try:
        runner = CliRunner()
        small = ["sweep", "-n", "48", "--r-min", "4", "--r-max", "4", "--methods", "consecutive", "--trials", "16",
                 "--seed", "3", "--json"]
        serial = runner.invoke(main, small)
        local = runner.invoke(main, [*small, "--scheduler", "local", "--workers", "2"])
        assert local.exit_code == 0, local.output
        assert _sweep_rows(local.stdout) == _sweep_rows(serial.stdout)
    finally:
        faulthandler.cancel_dump_traceback_later()


def test_cli_a_remote_failure_is_one_error_line(monkeypatch):
    # Any executor: here a thread pool in place of the cluster, so the broken task runs in this process.
    from contextlib import contextmanager

    @contextmanager
    def threads(address, *, workers=1):
        with ThreadPoolExecutor(max_workers=2) as pool:
            yield pool

    def broken_chunk(*args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("spare_opt_cli.options.dask_executor", threads)
    monkeypatch.setattr(sys.modules["spare_opt.guarantees.montecarlo"], "_run_chunk", broken_chunk)
    result = CliRunner().invoke(main, ["sweep", "-n", "20", "--r-min", "3", "--r-max", "3", "--trials", "30",
                                       "--methods", "consecutive", "--scheduler", "tcp://127.0.0.1:8786"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: task ")
    assert lines[0].endswith("failed on executor ThreadPoolExecutor: RuntimeError: disk on fire")


def test_cli_unreachable_scheduler_is_one_error_line():
    address = f"tcp://127.0.0.1:{_closed_port()}"
    for command in (["sweep", "-n", "20", "--r-max", "3"], ["simulate", "--groups", "200", "--seeds", "2"],
                    ["tune", "--groups", "200", "--seeds", "1"]):
        result = CliRunner().invoke(main, [*command, "--scheduler", address])
        assert result.exit_code == 1
        assert result.output.strip().splitlines() == [
            f"Error: cannot reach the Dask scheduler {address}: Connection refused"]


@pytest.mark.parametrize("command", [["sweep", "-n", "20"], ["simulate"], ["tune"], ["validate", "LAYOUT"]])
@pytest.mark.parametrize("option", [["--workers", "0"], ["--workers", "-2"], ["--scheduler", "10.1.2.3"],
                                    ["--scheduler", "ftp://127.0.0.1:8786"]])
def test_cli_bad_workers_or_scheduler_are_usage_errors(command, option, tmp_path):
    if command[-1] == "LAYOUT":
        command = [command[0], str(tmp_path / "layout.json")]
        consecutive(20, 3).save(command[1])
    result = CliRunner().invoke(main, [*command, *option])
    assert result.exit_code == 2
    assert f"Invalid value for '{option[0]}'" in result.output

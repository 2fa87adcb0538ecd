"""Each command compiles only the numba kernels it calls (nothing is timed here).

The commands run one after the other in one fresh interpreter; after each, the kernels
that gained a signature (compiled, or loaded from numba's cache) are listed.  A kernel
loaded from the cache carries the kernels it calls inside it, so those may or may not
appear: the test accepts them, and refuses anything outside the command's path.  A path
is read from the kernels' code (every kernel the entry reaches), so the tests hold in
any state of numba's on-disk cache: cold, warm, or warmed by ``spare-opt demo`` (which
loads the fail path whole from the cache, so that the Monte-Carlo, compiled afresh,
then types the kernels of the fail path it shares, ``_write_journal`` among them).
"""

import json
import subprocess
import sys

import pytest

from spare_opt.planning import _kernels as _controller_kernels
from spare_opt.simulation import _kernels as _simulate_kernels
from spare_opt._core.jit import LazyKernel
from spare_opt.demo import packaged_trace_path


def _kernels(module):
    return {name for name, value in vars(module).items()
            if isinstance(value, LazyKernel) or type(value).__name__ == "CPUDispatcher"}


def _call_closure(module, entry):
    """``entry`` and every kernel of ``module`` it calls, directly or through other kernels.

    Read from the kernels' code (the names each one looks up), not written by hand: a
    kernel compiled afresh types every kernel it names, in any branch, so the path of
    a command is the whole closure.  Which of them gain a signature in a process
    depends on numba's cache (a kernel loaded from the cache carries its callees
    inside; one compiled afresh types them, unless an earlier command did), so the
    tests ask only for a subset of the closure.
    """
    kernels = _kernels(module)
    path, todo = set(), [entry]
    while todo:
        name = todo.pop()
        if name in path:
            continue
        path.add(name)
        function = getattr(module, name)
        code = getattr(function, "py_func", function).__code__
        todo.extend(callee for callee in code.co_names if callee in kernels)
    return path


# The kernels of each path: the entry kernel called from Python and every kernel it reaches.
FAIL_PATH = _call_closure(_controller_kernels, "fail_packed") | {"undo_journal"}  # the controller undoes a failed step
# a repaired group rejoins through the incremental recover (the replay's repair semantics)
CONTROLLER_PATH = FAIL_PATH | _call_closure(_controller_kernels, "recover_packed")
TRAJECTORY_PATH = _call_closure(_controller_kernels, "run_trajectories")
SIMULATION_PATH = _kernels(_simulate_kernels)  # the simulation's kernels, all of them

_SCRIPT = r'''
import json, sys
from click.testing import CliRunner
import spare_opt
from spare_opt._core.jit import LazyKernel
from spare_opt_cli.main import main

def compiled():
    names = set()
    for module_name in ("spare_opt.planning._kernels", "spare_opt.simulation._kernels"):
        module = sys.modules.get(module_name)
        for name, value in (vars(module) if module else {}).items():
            if getattr(value, "__module__", None) == module_name and not isinstance(value, LazyKernel) \
                    and getattr(value, "signatures", None):
                names.add(name)
    return names

report = {"after import": {"numba": "numba" in sys.modules, "kernels": sorted(compiled())}}
seen = compiled()
for label, args in json.loads(sys.argv[1]):
    result = CliRunner().invoke(main, args)
    now = compiled()
    report[label] = {"exit_code": result.exit_code, "output": result.output[-500:], "new": sorted(now - seen),
                     "numba": "numba" in sys.modules,
                     "simulation module": "spare_opt.simulation._kernels" in sys.modules}
    seen = now
print(json.dumps(report))
'''


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("first-run")
    layout = str(folder / "layout.json")
    trace = str(packaged_trace_path())
    commands = [
        ("layout", ["layout", "--groups", "40", "--redundancy", "4", "-o", layout]),
        ("plan", ["plan", layout, "--fail", "3,17"]),
        ("validate without trials", ["validate", layout, "--trials", "0", "--worst-k", "1"]),
        # the demo's verdict is a simulation (the "simulate" path below); without it, a replay
        ("demo", ["demo", "--out", str(folder / "demo"), "--json", "--no-verdict"]),
        ("replay", ["replay", layout, "--trace", trace]),
        ("validate", ["validate", layout, "--trials", "20", "--worst-k", "1"]),
        ("simulate", ["simulate", "--groups", "200", "--seeds", "1", "--set", "steps=200"]),
    ]
    done = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(commands)], capture_output=True, text=True,
                          timeout=600, cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_paths_name_kernels_that_exist():
    assert FAIL_PATH | TRAJECTORY_PATH <= _kernels(_controller_kernels)
    assert "run_kernel" in SIMULATION_PATH


def test_the_paths_follow_the_calls():
    # a kernel reached only through a callee is on the path (fail_groups writes the journal)
    assert {"fail_packed", "fail_groups", "_write_journal", "_place_augmenting", "_save_row"} <= FAIL_PATH
    assert {"run_trajectories", "_run_sequence", "reset_state", "fail_groups", "_write_journal"} <= TRAJECTORY_PATH
    # and the entry of the other path is not: the Monte-Carlo never calls the single-failure entry
    assert not {"fail_packed", "undo_journal"} & TRAJECTORY_PATH
    assert not {"run_trajectories", "reset_state"} & FAIL_PATH


def test_import_neither_imports_numba_nor_compiles(report):
    assert report["after import"] == {"numba": False, "kernels": []}


@pytest.mark.parametrize("command", ["layout", "plan", "validate without trials"])
def test_commands_without_the_controller_compile_nothing_and_do_not_import_numba(report, command):
    assert report[command]["exit_code"] == 0, report[command]["output"]
    assert report[command]["new"] == []
    assert not report[command]["numba"]


def test_demo_compiles_the_controllers_fail_and_recover_paths_only(report):
    demo = report["demo"]
    assert demo["exit_code"] == 0, demo["output"]
    assert "fail_packed" in demo["new"]
    assert set(demo["new"]) <= CONTROLLER_PATH
    assert not demo["simulation module"]


def test_monte_carlo_compiles_the_trajectory_path_only(report):
    validate = report["validate"]
    assert validate["exit_code"] == 0, validate["output"]
    assert "run_trajectories" in validate["new"]
    assert set(validate["new"]) <= TRAJECTORY_PATH
    assert not validate["simulation module"]


def test_simulation_compiles_its_kernel_and_the_trajectories_it_draws(report):
    simulate = report["simulate"]
    assert simulate["exit_code"] == 0, simulate["output"]
    assert "run_kernel" in simulate["new"]
    assert set(simulate["new"]) <= SIMULATION_PATH | TRAJECTORY_PATH

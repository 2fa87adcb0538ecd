"""The verdict's shape: compare() keeps its arguments, its steps are small, the arguments are checked once.

spare_opt/simulation/verdict/ is a pipeline (inputs -> grid -> runs -> pricing -> result,
docs/api.md, "Where things live"); these tests keep it one.  They read the source and
build one input object; nothing runs a simulation.
"""

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

import spare_opt
from spare_opt.simulation.verdict import _inputs, _pipeline

FOLDER = Path(_pipeline.__file__).parent

#: compare()'s keyword arguments: every caller's (the CLI's, the demo's, users') keep working.
COMPARE_KEYWORDS = [
    "trace", "semantics", "rep_redundancies", "spare_redundancies", "micro_batches", "period_factors", "seeds",
    "cycles", "include_ckpt", "include_elastic", "fault_model", "workers", "executor", "progress",
    "layout_time_limit", "global_batch", "micro_batch_overhead_seconds", "allreduce_seconds", "window",
    "trace_nodes", "trace_scaling", "on_setting", "include_redistribution", "gradient_bytes",
    "bandwidth_bytes_per_second", "allreduce_latency_seconds", "allreduce_sensitivity", "nodes_per_group",
    "failures_path",
]


def _code_lines(function):
    """Lines of a function without its docstring."""
    lines = function.end_lineno - function.lineno + 1
    first = function.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines -= first.end_lineno - first.lineno + 1
    return lines


def test_compare_takes_the_same_keyword_arguments():
    parameters = inspect.signature(spare_opt.compare).parameters
    assert list(parameters)[0] == "params"
    assert [name for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY] == COMPARE_KEYWORDS
    assert spare_opt.compare is _pipeline.compare


def test_every_module_and_function_of_the_verdict_is_small():
    long_modules, long_functions = [], []
    for path in sorted(FOLDER.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        if len(source.splitlines()) > 500:
            long_modules.append(path.name)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _code_lines(node) > 80:
                long_functions.append(f"{path.name}:{node.name}")
    assert long_modules == [] and long_functions == []


def _imports_the_checks(module_file):
    """Whether a module of the folder imports the argument checks (``spare_opt._core.validation``)."""
    for node in ast.walk(ast.parse((FOLDER / module_file).read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if "validation" in (node.module or "").split(".") + [alias.name for alias in node.names]:
                return True
    return False


def test_the_steps_after_the_inputs_check_no_argument():
    # The checks run once, where the input object is built (and in the public helpers the
    # input object uses); the pipeline's later steps trust it.
    assert _imports_the_checks("_inputs.py")  # the test sees an import of the checks
    trusting = ["_pipeline.py", "_setting_runs.py", "_pricing.py", "_result.py", "_text.py", "_labels.py"]
    assert [name for name in trusting if _imports_the_checks(name)] == []


def test_the_input_object_is_frozen_and_resolved():
    params = spare_opt.compare_parameters("paper-600k", 16, steps=2000)
    inputs = _inputs.build_inputs(
        params, trace=None, semantics="paper", rep_redundancies=(3, 2), spare_redundancies=(2,), micro_batches=(4,),
        period_factors=(1.0,), seeds=2, cycles=3, include_ckpt=True, include_elastic=True, fault_model=None,
        layout_time_limit=2.0, global_batch=None, micro_batch_overhead_seconds=0.0, allreduce_seconds=1.5,
        window=None, trace_nodes=None, trace_scaling="auto", include_redistribution=True, gradient_bytes=None,
        bandwidth_bytes_per_second=None, allreduce_latency_seconds=0.0, allreduce_sensitivity=False,
        nodes_per_group=1, failures_path=None)
    assert inputs.params.allreduce_seconds == 1.5 and inputs.params.max_wall_factor == 3.0
    assert inputs.micro_batches == (1, 4)  # m = 1 always beside the grid given
    assert inputs.include_elastic is False  # no trace, no failure model: left out, and said so
    assert any(note.startswith("elastic left out") for note in inputs.notes)
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.seeds = 5

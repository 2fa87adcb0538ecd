"""The package's structure: no import cycle, every public name at the top level, a cheap import.

``spare_opt.torch`` is the top layer, an optional integration with PyTorch: it imports
the public API (``import spare_opt``) and nothing below it, no other module imports it,
and its public names live at ``spare_opt.torch`` (``import spare_opt`` never imports
torch).  Every other module follows the strict rules.
"""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import importlib.util

import networkx as nx
import pytest

import spare_opt

#: The integration layer: may import the package itself, exposes its names at its own top level.
INTEGRATION = "spare_opt.torch"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _integration(name):
    return name == INTEGRATION or name.startswith(INTEGRATION + ".")

PACKAGES = {"spare_opt": Path(spare_opt.__file__).parent}
try:
    import spare_opt_cli

    PACKAGES["spare_opt_cli"] = Path(spare_opt_cli.__file__).parent
except ImportError:  # pragma: no cover - the CLI is installed with the package
    pass


def _modules():
    """Every module of the two packages, subpackages included: dotted name -> source path."""
    # Read from the files, not with pkgutil.walk_packages: that imports every subpackage,
    # and without torch the import of spare_opt.torch fails and hides its modules.
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            relative = path.relative_to(folder).with_suffix("").parts
            if any(not (folder.joinpath(*relative[:i]) / "__init__.py").is_file() for i in range(1, len(relative))):
                continue  # not inside a package (data folders)
            parts = relative[:-1] if relative[-1] == "__init__" else relative
            if all(part.isidentifier() for part in parts):
                found[".".join((package,) + parts)] = path
    return found


def _is_package(name):
    return _modules()[name].name == "__init__.py"


def _resolve(module, node, known):
    """The modules of the packages that one import statement of ``module`` loads."""
    targets = []
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            package = module if module in PACKAGES or _is_package(module) else module.rsplit(".", 1)[0]
            base = package if node.level == 1 else package.rsplit(".", node.level - 1)[0]
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module
        # "from . import theory" loads the submodule, "from .plan import Plan" the module.
        targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    return {target for target in targets if target in known}


def import_graph():
    """Directed graph: an edge a -> b for every import of b anywhere in a (functions included)."""
    known = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            for target in _resolve(module, node, known):
                if target != module:
                    graph.add_edge(module, target)
    return graph


def test_import_graph_resolves_relative_imports():
    graph = import_graph()
    # Spot checks that the parser sees top-level, "from . import x" and in-function imports.
    assert graph.has_edge("spare_opt.planning.exact", "spare_opt.planning.plan")
    assert graph.has_edge("spare_opt.guarantees.montecarlo", "spare_opt.guarantees.theory")
    assert graph.has_edge("spare_opt.simulation._runs", "spare_opt.planning.controller")  # imported inside a method
    assert graph.has_edge("spare_opt_cli.plan", "spare_opt.planning.exact")


def test_no_import_cycle_between_modules():
    graph = import_graph()
    # The package __init__ imports every module by design; cycles through it are not
    # cycles between modules (no module imports the package itself).
    modules = graph.subgraph(n for n in graph if n not in PACKAGES)
    cycles = list(nx.simple_cycles(modules))
    assert cycles == [], f"import cycles: {cycles}"
    importers_of_package = [a for a, b in graph.edges
                            if b == "spare_opt" and a.startswith("spare_opt.") and not _integration(a)]
    assert importers_of_package == [], f"modules importing the package itself: {importers_of_package}"


def test_the_integration_layer_is_on_top():
    graph = import_graph()
    assert graph.has_edge("spare_opt.torch.step", "spare_opt")  # the check below sees its imports
    # spare_opt.torch uses the public API only: the package itself, not the modules below it.
    internal = [f"{a} -> {b}" for a, b in graph.edges if _integration(a) and b.startswith("spare_opt.")
                and not _integration(b)]
    assert internal == [], f"spare_opt.torch importing below the public API: {internal}"
    # Nothing else imports it (so that importing the library or the CLI never imports torch).
    importers = [f"{a} -> {b}" for a, b in graph.edges if _integration(b) and not _integration(a)]
    assert importers == [], f"modules importing spare_opt.torch: {importers}"


def test_every_public_name_of_every_module_is_the_same_object_at_the_top_level():
    # The closed forms stay in the spare_opt.theory namespace (spare_opt.theory.mu...).
    skip = {"spare_opt.guarantees.theory"}
    # The shared base is private but for the errors and the paper's constants.
    public_core = {"spare_opt._core.errors", "spare_opt._core.paper"}
    missing, different = [], []
    for name in _modules():
        private = any(part.startswith("_") for part in name.split(".")[1:])
        if not name.startswith("spare_opt.") or (private and name not in public_core) or name in skip:
            continue
        if _integration(name):
            continue  # the next test
        module = importlib.import_module(name)
        assert hasattr(module, "__all__"), f"{name} has no __all__"
        for public in module.__all__:
            if not hasattr(spare_opt, public):
                missing.append(f"{name}.{public}")
            elif getattr(spare_opt, public) is not getattr(module, public):
                different.append(f"{name}.{public}")
    assert missing == [], f"public names not importable from spare_opt: {missing}"
    assert different == [], f"top-level names that are other objects than the module's: {different}"
    assert set(spare_opt.__all__) <= set(dir(spare_opt))


@pytest.mark.skipif(not HAS_TORCH, reason="spare_opt.torch needs torch")
def test_every_public_name_of_the_integration_layer_is_at_its_top_level_and_not_in_spare_opt():
    top = importlib.import_module(INTEGRATION)
    missing, different, leaked = [], [], []
    for name in _modules():
        private = any(part.startswith("_") for part in name.split(".")[1:])
        if not _integration(name) or private:
            continue
        module = importlib.import_module(name)
        assert hasattr(module, "__all__"), f"{name} has no __all__"
        for public in module.__all__:
            if not hasattr(top, public):
                missing.append(f"{name}.{public}")
            elif getattr(top, public) is not getattr(module, public):
                different.append(f"{name}.{public}")
            if getattr(spare_opt, public, None) is getattr(module, public):
                leaked.append(f"{name}.{public}")
    assert missing == [], f"public names not importable from spare_opt.torch: {missing}"
    assert different == [], f"spare_opt.torch names that are other objects than the module's: {different}"
    assert leaked == [], f"spare_opt.torch names at the top level of spare_opt: {leaked}"
    assert set(top.__all__) <= set(dir(top))


def test_importing_the_package_compiles_and_imports_no_heavy_module():
    # ortools, matplotlib, scipy and Dask load on first use; numba is imported and the
    # kernels compile on the first kernel call (spare_opt/_core/jit.py, tests/test_jit.py); the
    # simulation kernel's module is not even imported.
    code = ("import sys, spare_opt; heavy = [m for m in ('ortools', 'matplotlib', 'distributed', 'scipy', "
            "'numba', 'asyncio', 'torch', 'torchft', 'spare_opt.torch', 'spare_opt.simulation._kernels') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_module_is_shadowed_by_a_function_of_the_same_name():
    # "import spare_opt.simulation.verdict as v" binds getattr(spare_opt.simulation, "verdict"):
    # a function exported under a module's name would replace the module there.
    for name in _modules():
        if name.startswith("spare_opt.") and (HAS_TORCH or not _integration(name)):
            parent, _, leaf = name.rpartition(".")
            attribute = getattr(importlib.import_module(parent), leaf, None)
            assert attribute is None or attribute is importlib.import_module(name), name


# The stages, bottom up: a stage imports only from the stages before it (and itself).
STAGES = ["_core", "layouts", "planning", "traces", "guarantees", "simulation"]


def _stage(module):
    parts = module.split(".")
    return parts[1] if module.startswith("spare_opt.") and len(parts) > 2 and parts[1] in STAGES else None


def test_every_module_of_the_library_lives_in_a_stage_folder():
    loose = [name for name in _modules() if name.startswith("spare_opt.") and name.count(".") == 1
             and name.split(".")[1] not in STAGES + ["demo", "torch"]]
    assert loose == [], f"modules outside the stage folders: {loose}"


def test_a_stage_imports_only_from_the_stages_below_it():
    graph = import_graph()
    upward = []
    for importer, imported in graph.edges:
        low, high = _stage(imported), _stage(importer)
        if importer.startswith("spare_opt.") and high is not None:
            if imported == "spare_opt" or (imported.startswith("spare_opt.") and _stage(imported) is None):
                upward.append(f"{importer} -> {imported}")  # a stage importing the top level or the demo
            elif low is not None and STAGES.index(low) > STAGES.index(high):
                upward.append(f"{importer} -> {imported}")
    assert upward == [], f"imports from a stage above: {upward}"


def test_core_imports_nothing_else_of_spare_opt():
    graph = import_graph()
    outside = [f"{a} -> {b}" for a, b in graph.edges
               if _stage(a) == "_core" and b.startswith("spare_opt") and _stage(b) != "_core"]
    assert outside == [], outside


def test_the_layering_check_sees_an_upward_import():
    # The check above would pass vacuously if _stage misread the names.
    assert _stage("spare_opt.planning.controller") == "planning"
    assert _stage("spare_opt.demo") is None
    graph = import_graph()
    assert graph.has_edge("spare_opt.simulation.verdict._inputs", "spare_opt.traces.trace")
    assert STAGES.index(_stage("spare_opt.traces.trace")) < STAGES.index(_stage("spare_opt.simulation.verdict"))

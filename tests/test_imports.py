"""The package's structure: no import cycle, every public name at the top level, a cheap import."""

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import spare_opt

PACKAGES = {"spare_opt": Path(spare_opt.__file__).parent}
try:
    import spare_opt_cli

    PACKAGES["spare_opt_cli"] = Path(spare_opt_cli.__file__).parent
except ImportError:  # pragma: no cover - the CLI is installed with the package
    pass


def _modules():
    """Every module of the two packages: dotted name -> source path."""
    found = {}
    for package, folder in PACKAGES.items():
        found[package] = folder / "__init__.py"
        for info in pkgutil.iter_modules([str(folder)]):
            found[f"{package}.{info.name}"] = folder / f"{info.name}.py"
    return found


def _resolve(module, node, known):
    """The modules of the packages that one import statement of ``module`` loads."""
    targets = []
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            package = module if module in PACKAGES else module.rsplit(".", 1)[0]
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
    assert graph.has_edge("spare_opt.planner", "spare_opt.plan")
    assert graph.has_edge("spare_opt.montecarlo", "spare_opt.theory")
    assert graph.has_edge("spare_opt._runs", "spare_opt.controller")  # imported inside a method
    assert graph.has_edge("spare_opt_cli.plan", "spare_opt.planner")


def test_no_import_cycle_between_modules():
    graph = import_graph()
    # The package __init__ imports every module by design; cycles through it are not
    # cycles between modules (no module imports the package itself).
    modules = graph.subgraph(n for n in graph if n not in PACKAGES)
    cycles = list(nx.simple_cycles(modules))
    assert cycles == [], f"import cycles: {cycles}"
    importers_of_package = [a for a, b in graph.edges if b == "spare_opt" and a.startswith("spare_opt.")]
    assert importers_of_package == [], f"modules importing the package itself: {importers_of_package}"


def test_every_public_name_of_every_module_is_the_same_object_at_the_top_level():
    # The closed forms stay in the spare_opt.theory namespace (spare_opt.theory.mu...);
    # spare_opt.analysis is a deprecated shim.
    skip = {"spare_opt.analysis", "spare_opt.theory"}
    missing, different = [], []
    for name in _modules():
        if not name.startswith("spare_opt.") or name.split(".")[-1].startswith("_") or name in skip:
            continue
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


def test_deprecated_analysis_module_still_answers_with_a_warning():
    import spare_opt.analysis as analysis

    with pytest.warns(DeprecationWarning, match="spare_opt.montecarlo.monte_carlo"):
        assert analysis.monte_carlo is spare_opt.monte_carlo
    with pytest.raises(AttributeError):
        analysis.no_such_name  # noqa: B018


def test_importing_the_package_compiles_and_imports_no_heavy_module():
    # ortools, matplotlib, scipy and Dask load on first use; numba is imported and the
    # kernels compile on the first kernel call (spare_opt/_jit.py, tests/test_jit.py); the
    # simulation kernel's module is not even imported.
    code = ("import sys, spare_opt; heavy = [m for m in ('ortools', 'matplotlib', 'distributed', 'scipy', "
            "'numba', 'asyncio', 'spare_opt._simulate_kernels') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_module_is_shadowed_by_a_function_of_the_same_name():
    # "import spare_opt.simulation as sim" binds getattr(spare_opt, "simulation"): a
    # function exported under a module's name would replace the module there.
    for name in _modules():
        if name.startswith("spare_opt.") and name.count(".") == 1:
            attribute = getattr(spare_opt, name.split(".")[1], None)
            assert attribute is None or attribute is importlib.import_module(name), name

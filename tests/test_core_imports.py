"""No import cycle in the product, and the domain core's (``gpucluster/``) layers.

The import graph is built with :mod:`ast` from every module: an edge for each
``import``/``from ... import`` of another module, at module level or inside a function (a
function-local import hides a cycle, it does not remove it), and an edge to every parent package
(importing ``gpucluster.sdk.testing`` runs ``gpucluster/sdk/__init__.py`` first). For the layer
tests of the core, imports under ``if TYPE_CHECKING:`` are annotations only and not edges; the
cycle test of the whole product (``gpucluster/``, ``gpucluster_cdk/``, the plugins) counts them
too: two modules that need each other's names, even for annotations only, are one concern.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "gpucluster"
PLUGINS = ROOT / "plugins"
PRODUCT = (CORE, ROOT / "gpucluster_cdk", *sorted(p.parent for p in PLUGINS.glob("*/__init__.py")))
"""The product's packages: the core, the cdktf layer and each plugin (``plugins/`` is on the path)."""


def core_modules(roots: tuple[Path, ...] = (CORE,)) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the packages ``roots``."""
    modules = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            parts = [root.name, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def imports_of(path: Path, *, lazy: bool, type_checking: bool = False) -> set[str]:
    """Dotted names imported by ``path`` (``from a import b`` yields ``a`` and ``a.b``), at any
    depth when ``lazy`` (else outside functions only), under ``if TYPE_CHECKING:`` too when
    ``type_checking``."""
    found: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        if (
            not type_checking
            and isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            return
        if lazy or not in_function:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), False)
    return found


def import_graph(
    *, lazy: bool, roots: tuple[Path, ...] = (CORE,), type_checking: bool = False
) -> dict[str, set[str]]:
    modules = core_modules(roots)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for imported in imports_of(path, lazy=lazy, type_checking=type_checking):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported:
                parts = imported.split(".")
                targets.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        graph[name] = {
            t for t in targets if t in modules and t != name and not name.startswith(t + ".")
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_no_import_cycle_among_module_level_imports():
    assert cycles(import_graph(lazy=False)) == set()


def test_no_import_cycle_through_function_local_imports():
    assert cycles(import_graph(lazy=True)) == set()


def test_no_import_cycle_anywhere_in_the_product():
    """The core, the cdktf layer and the plugins together: no cycle through module-level,
    function-local or ``TYPE_CHECKING`` imports."""
    assert cycles(import_graph(lazy=True, roots=PRODUCT, type_checking=True)) == set()


def test_neither_the_cdktf_layer_nor_a_plugin_imports_a_command():
    """gpucluster_cdk/ and the plugins import no command module (gpucluster.cli, gpucluster.init),
    not even inside a function: the command layer is above them."""
    graph = import_graph(lazy=True, roots=PRODUCT, type_checking=True)
    offenders = {
        name: sorted(t for t in targets if t in ("gpucluster.cli", "gpucluster.init"))
        for name, targets in graph.items()
        if not name.startswith("gpucluster.")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_graph_follows_imports_inside_functions_and_type_checking(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n"
    )
    assert cycles(import_graph(lazy=True, roots=(package,), type_checking=True)) == {
        frozenset({"pkg.a", "pkg.b"})
    }
    assert cycles(import_graph(lazy=True, roots=(package,))) == set()
    assert cycles(import_graph(lazy=False, roots=(package,), type_checking=True)) == set()


def test_the_sdk_is_a_facade_the_core_does_not_import():
    """Core modules import nothing from gpucluster.sdk (its __init__ re-exports the core): the
    types live in gpucluster.model, the hook specifications in gpucluster.hookspecs, the gate
    constructors in gpucluster.charts.gate_helpers; gpucluster.sdk re-exports them."""
    graph = import_graph(lazy=True)
    offenders = {
        name: sorted(t for t in targets if t == "gpucluster.sdk" or t.startswith("gpucluster.sdk."))
        for name, targets in graph.items()
        if not name.startswith("gpucluster.sdk")
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert graph["gpucluster.hookspecs"] == set()  # nothing at run time (TYPE_CHECKING only)
    assert graph["gpucluster.charts.gate_helpers"] <= {"gpucluster.model"}


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset({"a", "b", "c"})}
    assert cycles({"a": {"b"}, "b": set()}) == set()


LEAVES = (
    "gpucluster.model",
    "gpucluster.errors",
    "gpucluster.values",
    "gpucluster.versions",
    "gpucluster.hashing",
    "gpucluster.schemas",
    "gpucluster.yamlsafe",
    "gpucluster.diskcache",
    "gpucluster.policy_keys",
    "gpucluster.fields",
    "gpucluster.outfolder",
    "gpucluster.hookspecs",
    "gpucluster.plugins",
)
"""The root modules every concern package may use (gpucluster.plugins: the hook calls)."""
CONCERNS = ("gpucluster.recipes", "gpucluster.charts", "gpucluster.inputs")
"""The concern packages in layer order: each may import the leaves and the packages before it,
never one after it, nor gpucluster.pipeline, gpucluster.lint, gpucluster.live, the commands or
gpucluster.sdk (each package's __init__ docstring says so)."""
ABOVE = (
    "gpucluster.pipeline",
    "gpucluster.lint",
    "gpucluster.live",
    "gpucluster.cli",
    "gpucluster.init",
    "gpucluster.sdk",
)


def _package(name: str) -> str:
    for top in (*CONCERNS, *ABOVE):
        if name == top or name.startswith(top + "."):
            return top
    return name


def test_no_import_up_a_layer():
    """A leaf imports only leaves; recipes, charts and inputs import only leaves and the concern
    packages before them (recipes < charts < inputs); none imports the pipeline, lint, live, the
    commands or the SDK."""
    graph = import_graph(lazy=True)
    allowed = {leaf: set(LEAVES) for leaf in LEAVES}
    for i, package in enumerate(CONCERNS):
        allowed[package] = {*LEAVES, *CONCERNS[: i + 1]}
    offenders = {}
    for name, targets in graph.items():
        layer = _package(name)
        if layer in allowed:
            bad = sorted(
                t for t in targets if _package(t) not in allowed[layer] and t != "gpucluster"
            )
            if bad:
                offenders[name] = bad
    assert offenders == {}
    assert set(graph) >= {*LEAVES, *CONCERNS}  # every name in the table is a module


def test_the_concern_packages_init_imports_nothing():
    """Each concern package's __init__ is its docstring (what it owns, what it may import): no
    aliases of old paths, nothing run on import."""
    for package in (*CONCERNS, OFFLINE, LIVE):
        path = CORE.joinpath(*package.split(".")[1:], "__init__.py")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree) and "May import" in ast.get_docstring(tree), package
        assert len(tree.body) == 1, package


OFFLINE = "gpucluster.lint"
"""The offline package: render, lint, images, ``upgrade-check --from/--to`` (files, no cluster)."""
LIVE = "gpucluster.live"
"""The day-2 package: what reads a running cluster or its snapshot, and the validation gate."""


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def imports_into(graph: dict[str, set[str]], source: str, target: str) -> dict[str, list[str]]:
    """Each module of package ``source`` that imports a module of package ``target`` -> those
    modules (sorted); empty when none does."""
    found = {
        name: sorted(t for t in targets if _within(t, target))
        for name, targets in graph.items()
        if _within(name, source)
    }
    return {name: targets for name, targets in found.items() if targets}


def test_the_offline_package_never_imports_the_live_one():
    """No module of gpucluster.lint imports gpucluster.live, at module level, inside a function
    or under TYPE_CHECKING: what checks files never needs what reads a cluster (the live package
    may import the offline one: upgrade_live judges upgrade_check's comparison on a snapshot)."""
    graph = import_graph(lazy=True, roots=PRODUCT, type_checking=True)
    assert {f"{OFFLINE}.render", f"{OFFLINE}.lint", f"{OFFLINE}.upgrade_check"} <= set(graph)
    assert {f"{LIVE}.snapshot", f"{LIVE}.validate", f"{LIVE}.gate"} <= set(graph)
    assert imports_into(graph, OFFLINE, LIVE) == {}


def test_only_the_commands_import_the_live_package_and_synth_only_its_gate():
    """Outside gpucluster.live, only the command module (gpucluster.cli) imports it, and the
    pipeline its gate (for ``settings.validate``); gpucluster_cdk and the plugins never do."""
    graph = import_graph(lazy=True, roots=PRODUCT, type_checking=True)
    allowed = {"gpucluster.pipeline": {LIVE, f"{LIVE}.gate"}}
    offenders = {}
    for name in graph:
        if _within(name, LIVE) or name == "gpucluster.cli":
            continue
        bad = [
            t
            for t in imports_into(graph, name, LIVE).get(name, [])
            if t not in allowed.get(name, set())
        ]
        if bad:
            offenders[name] = bad
    assert offenders == {}


def test_imports_into_sees_an_import_inside_a_function(tmp_path):
    package = tmp_path / "pkg"
    for sub in ("", "lint", "live"):
        (package / sub).mkdir(exist_ok=True)
        (package / sub / "__init__.py").write_text("")
    (package / "live" / "b.py").write_text("from pkg.lint import a\n")
    (package / "lint" / "a.py").write_text("def f():\n    from pkg.live import b\n")
    graph = import_graph(lazy=True, roots=(package,))
    assert imports_into(graph, "pkg.lint", "pkg.live") == {"pkg.lint.a": ["pkg.live", "pkg.live.b"]}
    assert imports_into(graph, "pkg.live", "pkg.lint") == {"pkg.live.b": ["pkg.lint", "pkg.lint.a"]}
    assert imports_into(import_graph(lazy=False, roots=(package,)), "pkg.lint", "pkg.live") == {}

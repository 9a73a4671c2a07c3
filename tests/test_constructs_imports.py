"""Layering: only gpucluster_cdk/constructs_lib/cdk.py imports the CDK framework and provider bindings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORK = (
    "cdktf",
    "constructs",
    "jsii",
    "cdktf_cdktf_provider_azurerm",
    "cdktf_cdktf_provider_helm",
    "cdktn",
    "cdktn_provider_azurerm",
    "cdktn_provider_helm",
)
SKIP = {".venv", ".venv-checkov", "node_modules", "cdktf.out", ".git", "build"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def project_files():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if not SKIP.intersection(rel.parts) and not rel.parts[0].startswith(
            (".cdktf.out", ".venv")
        ):
            yield rel, path


def test_only_cdk_module_imports_the_framework():
    offenders = {
        str(rel): sorted(m for m in imported_modules(path) if m.split(".")[0] in FRAMEWORK)
        for rel, path in project_files()
        if str(rel) != "gpucluster_cdk/constructs_lib/cdk.py"
    }
    assert {k: v for k, v in offenders.items() if v} == {}


TEST_KIT = "gpucluster/sdk/testing.py"
"""The plugin authors' test kit: ``PluginKit.synth`` runs the stacks (imported inside the method)."""
LAZY_CDK = {
    TEST_KIT: {"synth": ("gpucluster_cdk", "stacks")},
    "gpucluster/cli.py": {
        "_cmd_synth": ("gpucluster_cdk.app", "synth_command"),
        "_worker_count": ("gpucluster_cdk.stacks.synthesis", "is_worker_count"),
    },
}
"""Core modules that import the cdktf layer, only inside named functions: file -> {function:
(module, name)} of each function's one ``from module import name``."""


def test_domain_core_never_imports_constructs_or_stacks():
    offenders = {
        str(rel): sorted(m for m in imported_modules(path) if m.split(".")[0] == "gpucluster_cdk")
        for rel, path in project_files()
        if rel.parts[0] == "gpucluster" and str(rel) not in LAZY_CDK
    }
    assert {k: v for k, v in offenders.items() if v} == {}


@pytest.mark.parametrize("rel", sorted(LAZY_CDK))
def test_the_test_kit_and_the_synth_command_import_the_stacks_only_inside_named_functions(rel):
    tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
    module_level = {
        alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names
    }
    module_level |= {
        node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module
    }
    assert not {m for m in module_level if m.split(".")[0] in ("gpucluster_cdk", *FRAMEWORK)}

    def cdk_imports(node: ast.AST) -> set[tuple[str, str]]:
        return {
            (n.module, a.name)
            for n in ast.walk(node)
            if isinstance(n, ast.ImportFrom)
            and n.module
            and n.module.split(".")[0] == "gpucluster_cdk"
            for a in n.names
        }

    functions = {
        n.name: n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name in LAZY_CDK[rel]
    }
    assert {name: cdk_imports(node) for name, node in functions.items()} == {
        name: {pair} for name, pair in LAZY_CDK[rel].items()
    }
    assert cdk_imports(tree) == set(LAZY_CDK[rel].values())


def test_the_helm_constructs_know_no_plan():
    """gpucluster_cdk/constructs_lib/helm.py renders the props it is given: plain types only (the LocalChart it
    ships); values documents, set entries and the CRD bundle's limit are computed by the
    PlanNode -> props mapping in gpucluster_cdk/stacks/runtime.py."""
    imported = {
        m
        for m in imported_modules(ROOT / "gpucluster_cdk" / "constructs_lib" / "helm.py")
        if m.split(".")[0] == "gpucluster"
    }
    assert imported <= {"gpucluster.model"}
    text = (ROOT / "gpucluster_cdk" / "constructs_lib" / "helm.py").read_text(encoding="utf-8")
    assert "PlanNode" not in text and "from_plan_node" not in text


PLAIN_TYPES = {"gpucluster.model"}
"""What gpucluster_cdk.constructs_lib may import from gpucluster: the plain data types it is given."""
ERRORS_ALLOWED = {"gpucluster_cdk/constructs_lib/cdk.py": {"gpucluster.errors"}}
"""cdk.py reports an unknown CDK distribution setting as the one-line GpuclusterError (exit 2)."""


def test_constructs_lib_imports_only_plain_types_from_gpucluster():
    offenders = {}
    for rel, path in project_files():
        if rel.parts[:2] != ("gpucluster_cdk", "constructs_lib"):
            continue
        imported = {m for m in imported_modules(path) if m.split(".")[0] == "gpucluster"}
        extra = imported - PLAIN_TYPES - ERRORS_ALLOWED.get(str(rel), set())
        if extra:
            offenders[str(rel)] = sorted(extra)
    assert offenders == {}

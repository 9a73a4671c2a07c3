"""The built-in plugins' tests are written as a third party's would be: from gpucluster they import
only the SDK and its test kit (``gpucluster.sdk``, ``gpucluster.sdk.testing``, ``.hookspecs``,
``.gates``), besides their own plugin, what a plugin may import itself
(``gpucluster_cdk.constructs_lib``) and this repository's test helpers and app (``main``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FILES = sorted(
    p
    for pattern in ("test_aks_*.py", "test_nvke_*.py", "test_oke_*.py")
    for p in TESTS.glob(pattern)
)
SDK = {
    "gpucluster.sdk",
    "gpucluster.sdk.testing",
    "gpucluster.sdk.hookspecs",
    "gpucluster.sdk.gates",
}


def core_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of gpucluster or gpucluster_cdk that a plugin's test may not make."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module] + (
                [f"{node.module}.{a.name}" for a in node.names]
                if node.module == "gpucluster"
                else []
            )
        else:
            continue
        for module in modules:
            top = module.split(".")[0]
            if top == "gpucluster" and module != "gpucluster" and module not in SDK:
                found.append((node.lineno, module))
            elif top == "gpucluster" and module == "gpucluster" and isinstance(node, ast.Import):
                found.append((node.lineno, module))
            elif top == "gpucluster_cdk" and not module.startswith("gpucluster_cdk.constructs_lib"):
                found.append((node.lineno, module))
    return found


def test_there_are_plugin_tests():
    assert len(FILES) >= 12


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_a_plugin_test_imports_only_the_sdk_and_the_kit(path):
    assert core_imports(path.read_text(encoding="utf-8")) == []


def test_the_scan_sees_core_imports():
    source = (
        "from gpucluster.pipeline import prepare_cluster\nfrom gpucluster import recipe_result\nimport gpucluster.cli\n"
        "from gpucluster_cdk.stacks.runtime import x\nfrom gpucluster.sdk import hookimpl\n"
        "from gpucluster.sdk.testing import registered\nfrom gpucluster_cdk.constructs_lib import AksGpuCluster\n"
    )
    assert core_imports(source) == [
        (1, "gpucluster.pipeline"),
        (2, "gpucluster.recipe_result"),
        (3, "gpucluster.cli"),
        (4, "gpucluster_cdk.stacks.runtime"),
    ]

"""No function or method of the core, the cdktf layer or the built-in plugins reaches 120 lines.

Measured with :mod:`ast` from the ``def`` line to the function's last line (decorators not
counted; nested functions count in their parent too). A longer unit is split along the seams it
already shows (a section of the input, a kind of gate, a resource of a construct).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gpucluster", "gpucluster_cdk", "plugins")
LIMIT = 120
"""Lines a function must stay under."""


def function_lengths(root: Path = ROOT) -> list[tuple[int, str]]:
    """``(lines, "path:line name")`` of every function and method under :data:`PACKAGES`."""
    out = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.append(
                        (
                            node.end_lineno - node.lineno + 1,
                            f"{path.relative_to(root)}:{node.lineno} {node.name}",
                        )
                    )
    return out


def test_every_function_is_under_120_lines():
    too_long = sorted((n, where) for n, where in function_lengths() if n >= LIMIT)
    assert not too_long, "split along its seams: " + "; ".join(
        f"{where} ({n} lines)" for n, where in too_long
    )


def test_the_measure_sees_a_long_function(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "gpucluster").mkdir()
    (tmp_path / "gpucluster" / "long.py").write_text(
        f"class C:\n    def method(self):\n{body}\n", encoding="utf-8"
    )
    for package in PACKAGES[1:]:
        (tmp_path / package).mkdir()
    assert function_lengths(tmp_path) == [(LIMIT + 1, "gpucluster/long.py:2 method")]

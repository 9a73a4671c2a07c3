"""Every ``error[...]``/``warning[...]``/``info[...]`` line is made by one formatter,
:func:`gpucluster.errors.format_line`, which escapes every part (:func:`gpucluster.errors.one_line`).

The source scan below finds a line formatted anywhere else: in an f-string, a ``str.format``
template or a ``%`` template (string literals outside docstrings), a literal that starts a
severity tag (``error[``), the ``fix:`` part of the line, or a severity expression followed by ``[``.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest

from gpucluster import errors
from gpucluster.errors import Problem
from gpucluster.model import Finding

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    [
        *ROOT.joinpath("gpucluster").rglob("*.py"),
        *ROOT.joinpath("gpucluster_cdk").rglob("*.py"),
        *ROOT.joinpath("plugins").rglob("*.py"),
        ROOT / "main.py",
    ]
)
FORMATTER = ("gpucluster/errors.py", "format_line")

SEVERITY_TAG = re.compile(r"(?<![\w`'\"])(?:error|warning|info)\[")
"""A literal severity tag as a line starts with (``error[``), not one quoted in prose (```error[x]```)."""
FIX_PART = re.compile(r"(?:^| )fix: ")
"""The ``fix:`` part of a line."""
SEVERITY_NAME = re.compile(r"sev|severity|level", re.I)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
        # attribute docstrings: a string statement right after an assignment
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list):
                for prev, stmt in itertools.pairwise(stmts):
                    if (
                        isinstance(stmt, ast.Expr)
                        and isinstance(stmt.value, ast.Constant)
                        and isinstance(prev, (ast.Assign, ast.AnnAssign))
                    ):
                        ids.add(id(stmt.value))
    return ids


def _inside(tree: ast.AST, name: str) -> set[int]:
    """ids of every node inside the function ``name`` (the one formatter)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return {id(n) for n in ast.walk(node)}
    return set()


def _pieces(node: ast.JoinedStr) -> list[tuple[str, object]]:
    return [
        ("text", v.value) if isinstance(v, ast.Constant) else ("value", ast.unparse(v.value))
        for v in node.values
    ]


def hand_formatted(source: str, path: str) -> list[str]:
    """Where ``source`` formats an error/warning/info line itself: ``path:line: what``."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    if path == FORMATTER[0]:
        skip |= _inside(tree, FORMATTER[1])
    found = []

    def hit(node: ast.AST, what: str) -> None:
        found.append(f"{path}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if SEVERITY_TAG.search(node.value):
                hit(node, f"a severity tag in {node.value[:60]!r}")
            elif FIX_PART.search(node.value):
                hit(node, f"the fix: part in {node.value[:60]!r}")
        elif isinstance(node, ast.JoinedStr):
            pieces = _pieces(node)
            for (kind, value), (next_kind, next_value) in itertools.pairwise(pieces):
                if (
                    kind == "value"
                    and next_kind == "text"
                    and str(next_value).startswith("[")
                    and SEVERITY_NAME.search(str(value))
                ):
                    hit(node, f"{{{value}}}[ in an f-string")
        elif (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Mod)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)
            and re.search(r"%s\[", node.left.value)
        ):
            hit(node, f"a %-template {node.left.value[:60]!r}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)
            and re.search(r"\}\[\{", node.func.value.value)
            and any(
                SEVERITY_NAME.search(ast.unparse(a))
                for a in [*node.args, *[k.value for k in node.keywords]]
            )
        ):
            hit(node, f"a format template {node.func.value.value[:60]!r}")
    return found


def test_no_error_line_is_formatted_outside_the_one_formatter():
    found = []
    for path in SOURCES:
        found += hand_formatted(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert found == []


@pytest.mark.parametrize(
    "code",
    [
        'line = f"{f.severity}[{f.id}] cluster={f.cluster}: {f.message}"',
        'line = "error[%s] %s" % (kind, message)',
        'line = "{}[{}]: {}".format(severity, fid, message)',
        'line = f"{sev}[{fid}]" + text',
        'line = text + " fix: " + fix',
        'line = f"warning[output] key={key}: gone"',
    ],
)
def test_the_scan_finds_each_hand_formatted_form(code):
    assert hand_formatted(code, "gpucluster/x.py")


@pytest.mark.parametrize(
    "code",
    [
        '"""A docstring may name the ``error[input]`` line and its fix: part."""',
        'key = f"{key}[{i}]"',
        'message = "write one `error[usage]` line"',
    ],
)
def test_the_scan_leaves_prose_and_key_paths_alone(code):
    assert hand_formatted(code, "gpucluster/x.py") == []


def test_every_part_of_a_line_is_escaped_by_the_formatter():
    line = errors.format_line(
        "warning",
        "X",
        "a\nb",
        where=[("file", "f\x1b[2J"), ("cluster", ""), ("key", "k\u202e")],
        allowed="1\r2",
        fix="do\nit",
    )
    assert line == "warning[X] file=f\\x1b[2J key=k\\u202e: a\\nb (allowed: 1\\r2) fix: do\\nit"
    assert "\n" not in line


def test_problem_and_finding_lines_are_the_formatters():
    assert (
        Problem("m", file="c.yaml", key="k", fix="f").render()
        == "error[input] file=c.yaml key=k: m fix: f"
    )
    finding = Finding("GPU1", "warning", "c1", "gpu-operator", "driver.enabled", "m", "f")
    assert (
        finding.render()
        == "warning[GPU1] cluster=c1 component=gpu-operator key=driver.enabled: m fix: f"
    )


def test_a_summary_line_escapes_what_came_from_the_input():
    from gpucluster.cli import summarize_findings

    findings = [
        Finding(
            "X",
            "warning",
            "c1",
            "comp",
            f"k{i}",
            "said \x1b]0;title\x07",
            "fix it",
            file="r\x1b.yaml",
        )
        for i in range(2)
    ]
    (line,) = summarize_findings(findings, how="add --findings all")
    assert "\x1b" not in line and "\x07" not in line
    assert line.startswith(
        "warning[X] file=r\\x1b.yaml cluster=c1: 2 findings (comp); first: component=comp key=k0: "
    )
    assert line.endswith("; all 2: add --findings all fix: fix it")

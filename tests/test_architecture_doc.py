"""docs/ARCHITECTURE.md names every module of the core and the cdktf layer by its path, and every
module path it names exists (a moved or removed module cannot leave the map stale)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGES = ("gpucluster", "gpucluster_cdk", "gpucluster_rig")
PATH = re.compile(r"(?<![\w/.-])((?:plugins/)?gpucluster\w*/(?:[\w]+/)*[\w]+\.py)(?![\w/])")


def modules() -> list[str]:
    return sorted(
        str(p.relative_to(ROOT)) for package in PACKAGES for p in (ROOT / package).rglob("*.py")
    )


def named_paths(text: str) -> set[str]:
    return set(PATH.findall(text))


def test_every_module_is_named_in_the_architecture_doc():
    named = named_paths(DOC.read_text(encoding="utf-8"))
    assert len(modules()) > 50
    assert [m for m in modules() if m not in named] == []


def test_every_module_path_the_architecture_doc_names_exists():
    named = named_paths(DOC.read_text(encoding="utf-8"))
    assert [p for p in sorted(named) if not (ROOT / p).is_file()] == []


def test_named_paths_reads_whole_paths_only():
    text = "`gpucluster/charts/gates.py` and gpucluster/model.py, not xgpucluster/a.py nor gpucluster/charts/gates.pyc"
    assert named_paths(text) == {"gpucluster/charts/gates.py", "gpucluster/model.py"}

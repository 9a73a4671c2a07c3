"""Atomic replacement of the output folder (stacks.outdir; no cdktf needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stacks import outdir as outdir_mod
from stacks.outdir import replace_dir, staged_outdir


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def make(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_staged_outdir_replaces_previous_output(tmp_path):
    final = make(tmp_path / "cdktf.out", {"manifest.json": "old", "stacks/gone/cdk.tf.json": "old"})
    with staged_outdir(final) as staged:
        assert staged.parent == final.parent and staged.name.startswith(".cdktf.out.")
        assert list(staged.iterdir()) == []
        make(staged, {"manifest.json": "new", "stacks/a/cdk.tf.json": "{}"})
        assert tree(final)["manifest.json"] == b"old"  # untouched until the block succeeds
    assert tree(final) == {"manifest.json": b"new", "stacks/a/cdk.tf.json": b"{}"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdktf.out"]  # no staged or old folders left


def test_failure_inside_block_leaves_previous_output_untouched(tmp_path):
    final = make(tmp_path / "cdktf.out", {"manifest.json": "old", "stacks/x/cdk.tf.json": "{}"})
    before = tree(final)
    with pytest.raises(RuntimeError, match="validation failed"):
        with staged_outdir(final) as staged:
            make(staged, {"manifest.json": "half"})
            raise RuntimeError("validation failed")
    assert tree(final) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdktf.out"]


def test_creates_output_when_absent_with_umask_permissions(tmp_path):
    final = tmp_path / "sub" / "cdktf.out"
    with staged_outdir(final) as staged:
        make(staged, {"manifest.json": "{}"})
    umask = os.umask(0)
    os.umask(umask)
    assert (final / "manifest.json").read_text() == "{}"
    assert final.stat().st_mode & 0o777 == 0o777 & ~umask


def test_fallback_without_renameat2(tmp_path, monkeypatch):
    monkeypatch.setattr(outdir_mod, "_exchange", lambda a, b: False)
    final = make(tmp_path / "out", {"a": "old"})
    new = make(tmp_path / ".out.new", {"a": "new"})
    replace_dir(new, final)
    assert tree(final) == {"a": b"new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_refuses_to_replace_a_file(tmp_path):
    final = tmp_path / "cdktf.out"
    final.write_text("not a folder")
    with pytest.raises(OSError, match="not a folder"):
        with staged_outdir(final) as staged:
            make(staged, {"manifest.json": "{}"})
    assert final.read_text() == "not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdktf.out"]

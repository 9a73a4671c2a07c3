"""Atomic replacement of the output folder (gpucluster_cdk.stacks.outdir; no cdktf needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _support import make, tree

from gpucluster.errors import GpuclusterError
from gpucluster.outfolder import MARKER, MARKER_TEXT
from gpucluster_cdk.stacks import outdir as outdir_mod
from gpucluster_cdk.stacks.outdir import replace_dir, staged_outdir


def test_staged_outdir_replaces_previous_output(tmp_path):
    final = make(tmp_path / "cdktf.out", {"manifest.json": "old", "stacks/gone/cdk.tf.json": "old"})
    with staged_outdir(final) as staged:
        assert staged.parent == final.parent and staged.name.startswith(".cdktf.out.")
        assert list(staged.iterdir()) == [staged / outdir_mod.STAGING_LOCK]  # its run's lock only
        make(staged, {"manifest.json": "new", "stacks/a/cdk.tf.json": "{}"})
        assert tree(final)["manifest.json"] == b"old"  # untouched until the block succeeds
    assert tree(final) == {
        MARKER: MARKER_TEXT.encode(),
        "manifest.json": b"new",
        "stacks/a/cdk.tf.json": b"{}",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cdktf.out"
    ]  # no staged or old folders left


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


def test_refuses_to_replace_a_file_before_any_work(tmp_path):
    final = tmp_path / "cdktf.out"
    final.write_text("not a folder")
    ran = []
    with pytest.raises(GpuclusterError) as info:
        with staged_outdir(final):
            ran.append(True)  # the (slow) synth must not even start
    assert ran == []
    assert info.value.render() == (
        f"error[output] key=CDKTF_OUTDIR: {final} exists and is not a folder; refusing to replace it "
        "fix: remove or rename it, or synthesize elsewhere (cdktf synth --output DIR, or CDKTF_OUTDIR for main.py)"
    )
    assert final.read_text() == "not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdktf.out"]


def test_symlinked_output_folder_replaces_the_target_and_keeps_the_link(tmp_path):
    real = make(
        tmp_path / "disk" / "out", {"manifest.json": "old", "stacks/gone/cdk.tf.json": "{}"}
    )
    (tmp_path / "project").mkdir()
    link = tmp_path / "project" / "cdktf.out"
    link.symlink_to("../disk/out")
    with staged_outdir(link) as staged:
        assert (
            staged.parent == real.parent
        )  # staged next to the target: the swap stays on one file system
        make(staged, {"manifest.json": "new"})
    assert link.is_symlink() and os.readlink(link) == "../disk/out"
    assert tree(link) == {MARKER: MARKER_TEXT.encode(), "manifest.json": b"new"}
    assert sorted(p.name for p in (tmp_path / "disk").iterdir()) == ["out"]
    assert sorted(p.name for p in (tmp_path / "project").iterdir()) == ["cdktf.out"]


def test_dangling_symlink_is_refused(tmp_path):
    link = tmp_path / "cdktf.out"
    link.symlink_to("missing")
    with pytest.raises(GpuclusterError, match="is a symbolic link to a missing folder"):
        with staged_outdir(link):
            pass
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["cdktf.out"]


def test_unwritable_parent_is_an_error_naming_the_folder(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", kwargs.get("dir"))

    monkeypatch.setattr(outdir_mod.tempfile, "mkdtemp", refuse)
    final = make(tmp_path / "cdktf.out", {"manifest.json": "old", "stacks/a/cdk.tf.json": "{}"})
    with pytest.raises(GpuclusterError) as info:
        with staged_outdir(final):
            pass
    assert info.value.render() == (
        f"error[output] key=CDKTF_OUTDIR: cannot create the staging folder next to {final}: Permission denied "
        f"fix: make {tmp_path} writable, or synthesize elsewhere (cdktf synth --output DIR, or CDKTF_OUTDIR for main.py)"
    )
    assert tree(final) == {"manifest.json": b"old", "stacks/a/cdk.tf.json": b"{}"}


def test_output_created_by_a_concurrent_synth_between_check_and_rename_is_exchanged(
    tmp_path, monkeypatch
):
    final = tmp_path / "cdktf.out"
    new = make(tmp_path / ".cdktf.out.mine", {"manifest.json": "mine"})
    real_rename = os.rename

    def racing_rename(src, dst):  # another synth moves its output into place first
        if Path(dst) == final and not final.exists():
            make(tmp_path / ".cdktf.out.other", {"manifest.json": "other"})
            real_rename(tmp_path / ".cdktf.out.other", final)
        real_rename(src, dst)

    monkeypatch.setattr(outdir_mod.os, "rename", racing_rename)
    replace_dir(new, final)
    assert tree(final) == {"manifest.json": b"mine"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdktf.out"]


@pytest.mark.parametrize("exchange", [True, False])
def test_removing_the_previous_output_never_follows_a_symbolic_link(
    tmp_path, monkeypatch, exchange
):
    """A previous output whose ``stacks`` (or a stack folder inside it) is a symbolic link to a
    folder of the user's: removing that output removes the links, never what they point to."""
    if not exchange:
        monkeypatch.setattr(outdir_mod, "_exchange", lambda a, b: False)
    mine = make(tmp_path / "mine", {"a/keep.txt": "mine", "b/keep.txt": "mine", "c/keep.txt": "x"})
    theirs = make(tmp_path / "theirs", {"keep.txt": "theirs"})
    final = make(
        tmp_path / "cdktf.out",
        {MARKER: MARKER_TEXT, "manifest.json": "old", "nested/stacks/x/cdk.tf.json": "{}"},
    )
    (final / "stacks").symlink_to(mine)
    (mine / "d").symlink_to(theirs)  # a link below the linked folder too
    before = tree(tmp_path / "mine"), tree(theirs)
    with staged_outdir(final) as staged:
        make(staged, {"manifest.json": "new", "stacks/a/cdk.tf.json": "{}"})
    assert (tree(tmp_path / "mine"), tree(theirs)) == before
    assert tree(final)["stacks/a/cdk.tf.json"] == b"{}"


_ENTER_AND_STOP = """
import os, signal, sys
from gpucluster_cdk.stacks.outdir import staged_outdir
with staged_outdir(sys.argv[1]) as staged:
    (staged / "stacks").mkdir()
    print(staged, flush=True)
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.read()  # alive until told
"""


def _run_entering(final: Path, how: str):
    """A child Python process that enters ``staged_outdir(final)``, prints its staging folder,
    then SIGKILLs itself (``kill``) or waits for its stdin to close (``wait``)."""
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-c", _ENTER_AND_STOP, str(final), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_killed_runs_staging_folder_is_removed_by_the_next_run(tmp_path):
    final = tmp_path / "cdktf.out"
    killed = _run_entering(final, "kill")
    left = Path(killed.stdout.readline().strip())
    assert killed.wait(timeout=120) == -9
    assert left.parent == tmp_path and left.name.startswith(".cdktf.out.") and left.is_dir()
    with staged_outdir(final) as staged:
        make(staged, {"stacks/a/cdk.tf.json": "{}"})
    assert not left.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdktf.out"]
    assert tree(final) == {"stacks/a/cdk.tf.json": b"{}", MARKER: MARKER_TEXT.encode()}


def test_a_live_runs_staging_folder_and_look_alikes_are_left_alone(tmp_path):
    """The staging folder of a run still going (its lock held), and a folder of the same name
    shape without the lock file (the user's), stay."""
    final = tmp_path / "cdktf.out"
    look_alike = tmp_path / ".cdktf.out.abcd1234"
    make(look_alike, {"notes.txt": "mine"})
    alive = _run_entering(final, "wait")
    try:
        live = Path(alive.stdout.readline().strip())
        assert live.is_dir()
        with staged_outdir(final) as staged:
            make(staged, {"stacks/a/cdk.tf.json": "{}"})
        assert live.is_dir() and (look_alike / "notes.txt").read_text() == "mine"
    finally:
        alive.stdin.close()
        alive.wait(timeout=120)

"""Output folders users really have, under real conditions: a mount point (container
volume), a full disk, a previous output owned by another user, a folder the user cannot write.

Mounts and ownership changes need root (skipped otherwise); the other user is ``nobody`` (65534)
through ``setpriv``, running the system Python on ``gpucluster_cdk/stacks/outdir.py`` loaded by path (the
``stacks`` package imports cdktf). Real ``main.py`` runs use an existing-cluster file (no azurerm
binding) so they stay short.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import _support
import pytest
from _support import EXISTING_AKS, make, tree

from gpucluster.outfolder import MARKER, MARKER_TEXT

ROOT = Path(__file__).resolve().parents[1]
NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount, chown, setpriv)")


@pytest.fixture
def mount(tmp_path):
    mounted: list[Path] = []

    def do(target: Path, size: str = "16m") -> Path:
        target.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
        mounted.append(target)
        return target

    yield do
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], check=False)


def run_main(tmp_path: Path, outdir: Path) -> subprocess.CompletedProcess:
    (tmp_path / "gpucluster.yaml").write_text(EXISTING_AKS)
    return _support.run_main(cwd=ROOT, outdir=outdir, config=tmp_path / "gpucluster.yaml")


def test_mount_point_output_folder_is_filled_in_place(tmp_path, mount):
    """cdktf.out as a mount point: renaming it fails with EBUSY; the children are swapped instead."""
    out = mount(tmp_path / "cdktf.out")
    make(out, {"manifest.json": '{"old": true}', "stacks/gone-runtime/cdk.tf.json": "{}"})
    result = run_main(tmp_path, out)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert os.path.ismount(out)
    assert sorted(p.name for p in (out / "stacks").iterdir()) == ["lab-runtime"]
    assert '"old"' not in (out / "manifest.json").read_text()
    assert sorted(p.name for p in out.iterdir()) == [
        MARKER,
        "manifest.json",
        "stacks",
    ]  # no staging folder left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdktf.out", "gpucluster.yaml"]


def test_full_disk_is_one_output_error_and_keeps_the_previous_output(tmp_path, mount):
    disk = mount(tmp_path / "disk", size="48k")
    out = make(
        disk / "cdktf.out",
        {"manifest.json": '{"old": true}', "stacks/old-runtime/cdk.tf.json": "{}"},
    )
    before = tree(out)
    result = run_main(tmp_path, out)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error[")]
    assert len(errors) == 1 and errors[0].startswith("error[output] key=CDKTF_OUTDIR: "), (
        result.stderr
    )
    assert (
        "No space left on device" in errors[0]
        and " fix: free space on the file system of " in errors[0]
    )
    assert all(line.startswith(("error[", "warning[", "info[")) for line in lines), result.stderr
    assert tree(out) == before
    assert sorted(p.name for p in disk.iterdir()) == [
        "cdktf.out"
    ]  # nothing half-written next to it


@pytest.fixture
def open_dir():
    """A folder under /tmp that nobody can reach (pytest's tmp_path sits in a root-only 0700 folder)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="gpucluster-outdir-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


_READABLE: list[Path] = []


def _readable_copy() -> Path:
    """A copy of ``gpucluster_cdk/stacks/outdir.py`` and the ``gpucluster`` package that nobody can read.

    The checkout may sit under a folder only root can enter (``mktemp -d`` makes mode 0700), so
    nobody cannot import from it; the copy lives in a 0755 folder under /tmp, made once.
    """
    if not _READABLE:
        import atexit
        import tempfile

        top = Path(tempfile.mkdtemp(prefix="gpucluster-src-", dir="/tmp"))
        atexit.register(shutil.rmtree, top, True)
        shutil.copytree(
            ROOT / "gpucluster", top / "gpucluster", ignore=shutil.ignore_patterns("__pycache__")
        )
        (top / "stacks").mkdir()
        shutil.copy2(ROOT / "gpucluster_cdk" / "stacks" / "outdir.py", top / "stacks" / "outdir.py")
        for path in [top, *top.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        _READABLE.append(top)
    return _READABLE[0]


def _as_nobody(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``code`` as nobody with ``replace``/``staged`` bound to gpucluster_cdk/stacks/outdir.py (loaded by path)."""
    src = _readable_copy()
    prelude = textwrap.dedent(f"""
        import importlib.util, sys
        sys.path.insert(0, {str(src)!r})
        spec = importlib.util.spec_from_file_location("outdir", {str(src / "stacks" / "outdir.py")!r})
        outdir = importlib.util.module_from_spec(spec); spec.loader.exec_module(outdir)
        from gpucluster.errors import GpuclusterError
    """)
    return subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            SYSTEM_PYTHON,
            "-c",
            prelude + textwrap.dedent(code),
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_previous_output_owned_by_root_is_replaced_with_a_warning(open_dir):
    """After ``sudo make synth``: the new output is swapped in; the old tree cannot be removed by the
    user, which is a warning naming the folder and the fix, not a failure or a traceback."""
    if not Path(SYSTEM_PYTHON).exists() or shutil.which("setpriv") is None:
        pytest.skip("needs /usr/bin/python3 and setpriv")
    project = open_dir / "project"
    project.mkdir()
    out = make(
        project / "cdktf.out", {"manifest.json": "old", "stacks/old-runtime/cdk.tf.json": "{}"}
    )
    os.chown(project, NOBODY, NOBODY)  # the user's folder; cdktf.out and its contents stay root's
    result = _as_nobody(
        """
        warnings = []
        with outdir.staged_outdir("cdktf.out", warnings=warnings) as staged:
            (staged / "manifest.json").write_text("new")
        for w in warnings:
            print(w.render("warning"))
    """,
        project,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    [line] = result.stdout.splitlines()
    assert line.startswith(
        "warning[output] key=CDKTF_OUTDIR: the new output is in place, but the previous one could "
        "not be removed from "
    )
    assert " fix: remove it as its owner (e.g. sudo rm -rf " in line
    assert (out / "manifest.json").read_text() == "new"
    leftovers = [p for p in project.iterdir() if p.name != "cdktf.out"]
    assert len(leftovers) == 1 and str(leftovers[0]) in line  # the one folder the warning names


def test_unwritable_folder_is_one_output_error(open_dir):
    if not Path(SYSTEM_PYTHON).exists() or shutil.which("setpriv") is None:
        pytest.skip("needs /usr/bin/python3 and setpriv")
    project = open_dir / "project"
    out = make(
        project / "cdktf.out", {"manifest.json": "old", "stacks/a/cdk.tf.json": "{}"}
    )  # root's, 0755: nobody cannot write
    result = _as_nobody(
        """
        try:
            with outdir.staged_outdir("cdktf.out") as staged:
                print("synth ran")
        except GpuclusterError as err:
            print(err.render())
    """,
        project,
    )
    assert result.returncode == 0, result.stderr
    [line] = result.stdout.splitlines()
    assert line.startswith(
        "error[output] key=CDKTF_OUTDIR: cannot create the staging folder next to "
    )
    assert "Permission denied fix: make " in line
    assert tree(out) == {"manifest.json": b"old", "stacks/a/cdk.tf.json": b"{}"}


def test_non_owned_output_in_a_sticky_folder_is_swapped_child_by_child(open_dir):
    """A shared sticky folder (/tmp-like): the user may not rename root's cdktf.out (EPERM) but may
    write inside it (mode 0777): the children are exchanged, the folder itself stays."""
    if not Path(SYSTEM_PYTHON).exists() or shutil.which("setpriv") is None:
        pytest.skip("needs /usr/bin/python3 and setpriv")
    shared = open_dir / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    out = make(shared / "cdktf.out", {"manifest.json": "old"})
    (out / "stacks").mkdir(
        mode=0o777
    )  # an earlier output (manifest.json and stacks/): ours to replace
    (out / "stacks").chmod(0o777)
    out.chmod(0o777)
    (out / "manifest.json").chmod(0o666)
    result = _as_nobody(
        """
        with outdir.staged_outdir("cdktf.out") as staged:
            (staged / "manifest.json").write_text("new")
            (staged / "stacks").mkdir()
    """,
        shared,
    )
    assert result.returncode == 0, result.stderr
    assert out.stat().st_uid == 0  # the same folder, filled in place
    assert (
        tree(out) == {MARKER: MARKER_TEXT.encode(), "manifest.json": b"new"}
        and (out / "stacks").is_dir()
    )
    assert sorted(p.name for p in shared.iterdir()) == ["cdktf.out"]

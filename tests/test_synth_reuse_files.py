"""How a re-synth writes the reused stacks: by a helper process, hard-linking the previous output's
files that hold the same bytes -- and never a byte different from a full synth.

Every run is ``python main.py`` (the helper is forked before cdktf is imported, which this test
process, having synthesized in other tests, cannot do). Each case compares the re-synthesized
folder with a full one-process synth (``GPUCLUSTER_SYNTH_CACHE=off``), byte for byte.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _support import run_main, tree
from test_synth_reuse import write_clusters

ROOT = Path(__file__).resolve().parents[1]


def resynth(tmp_path: Path, config: Path, out: Path) -> subprocess.CompletedProcess:
    result = run_main(
        cwd=tmp_path, outdir=out, config=config, GPUCLUSTER_CACHE_DIR=str(tmp_path / "cache")
    )
    assert result.returncode == 0, result.stderr
    return result


def full(tmp_path: Path, config: Path) -> dict[str, bytes]:
    out = tmp_path / "full" / "cdktf.out"
    result = run_main(cwd=tmp_path, outdir=out, config=config, GPUCLUSTER_SYNTH_CACHE="off")
    assert result.returncode == 0, result.stderr
    return tree(out)


def inodes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.lstat().st_ino for p in sorted(root.rglob("*"))}


def test_unchanged_files_are_linked_from_the_previous_output(tmp_path):
    config = write_clusters(tmp_path)
    out = tmp_path / "work" / "cdktf.out"
    resynth(tmp_path, config, out)
    before = inodes(out / "stacks")
    write_clusters(tmp_path, nodes=3)  # the train cluster's pool: lab and edge are reused
    resynth(tmp_path, config, out)
    assert tree(out) == full(tmp_path, config)
    after = inodes(out / "stacks")
    files = [rel for rel in after if (out / "stacks" / rel).is_file()]
    reused = [rel for rel in files if rel.startswith(("lab-runtime/", "edge-runtime/"))]
    assert reused and all(after[rel] == before[rel] for rel in reused)  # the same files, linked
    rebuilt = [rel for rel in files if rel.startswith("train-runtime/")]
    assert rebuilt and all(after[rel] != before.get(rel) for rel in rebuilt)
    assert all((out / "stacks" / rel).stat().st_nlink == 1 for rel in files)  # previous one gone
    assert sorted(p.name for p in out.parent.iterdir()) == ["cdktf.out"]  # no staging left


def test_a_previous_output_that_differs_in_any_way_is_written_anew(tmp_path):
    config = write_clusters(tmp_path)
    out = tmp_path / "work" / "cdktf.out"
    resynth(tmp_path, config, out)
    lab, edge = out / "stacks" / "lab-runtime", out / "stacks" / "edge-runtime"
    flipped = lab / "cdk.tf.json"  # the same size, one byte changed
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    private = edge / "cdk.tf.json"  # the same bytes, another mode
    private.chmod(0o600)
    asset = next(p for p in sorted(lab.rglob("*.yaml")) if p.is_file())
    copy = tmp_path / "elsewhere.yaml"  # the same bytes through a symbolic link
    copy.write_bytes(asset.read_bytes())
    asset.unlink()
    asset.symlink_to(copy)
    shared = next(p for p in sorted(edge.rglob("*.yaml")) if p.is_file())
    outside = tmp_path / "outside-link.yaml"  # the same bytes, a file with another name too
    os.link(shared, outside)
    tampered = {p: p.lstat().st_ino for p in (flipped, private, asset, shared)}

    write_clusters(tmp_path, nodes=3)
    resynth(tmp_path, config, out)
    assert tree(out) == full(tmp_path, config)
    for path, inode in tampered.items():
        st = path.lstat()
        assert stat.S_ISREG(st.st_mode) and st.st_ino != inode, path
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(private.stat().st_mode) == 0o666 & ~umask
    assert outside.stat().st_nlink == 1 and outside.read_bytes() == shared.read_bytes()
    assert copy.read_bytes() == asset.read_bytes()


HELPER_FAILS = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from types import SimpleNamespace
    from gpucluster_cdk.stacks import reuse, synthesis

    folder = Path(sys.argv[1]) / "reused"
    files = [("cdk.tf.json", b"{}"), ("assets/a/b/values.yaml", b"x: 1\\n")]
    reused = [SimpleNamespace(entry={"stacks": [(f"c{i}-runtime", {}, files)]}) for i in range(6)]
    parent, write = os.getpid(), reuse.write_stack_files

    def dies_in_the_helper(folder_, name, files_, **kw):
        write(folder_, name, files_, **kw)
        if os.getpid() != parent and name == "c{n}-runtime":
            if "{how}" == "killed":
                os.kill(os.getpid(), signal.SIGKILL)  # half written, then gone
            raise OSError("the helper's disk is full")

    reuse.write_stack_files = dies_in_the_helper
    writer = synthesis._ReusedWriter(reused, folder, None)
    writer.begin()
    assert writer._begun, "the helper was not forked"
    writer.finish()
    writer.stop()
    print(sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()))
    """
)


@pytest.mark.parametrize("how, n", [("killed", 2), ("raises", 0), ("raises", 5)])
def test_a_helper_that_fails_or_is_killed_leaves_the_writing_to_this_process(tmp_path, how, n):
    """The helper ends after writing part of the stacks; this process writes them all again."""
    code = HELPER_FAILS.replace("{n}", str(n)).replace("{how}", how)
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    expected = sorted(
        f"c{i}-runtime/{rel}" for i in range(6) for rel in ("assets/a/b/values.yaml", "cdk.tf.json")
    )
    assert result.stdout.strip() == repr(expected)


@pytest.mark.parametrize("where", ["stacks", "stack and assets folders"])
def test_files_reached_through_a_symbolic_link_are_never_linked(tmp_path, where):
    """A previous output whose ``stacks`` folder, or a stack's folder or a folder inside one, is a
    symbolic link: the files it reaches are outside the output, so none is hard-linked into the new
    one (each would then be one file with a name outside the output, changed by any edit there)."""
    config = write_clusters(tmp_path)
    out = tmp_path / "work" / "cdktf.out"
    resynth(tmp_path, config, out)
    stacks = out / "stacks"
    if where == "stacks":
        moved = {stacks: tmp_path / "outside-stacks"}
    else:
        moved = {
            stacks / "lab-runtime" / "assets": tmp_path / "outside-assets",
            stacks / "edge-runtime": tmp_path / "outside-edge",
        }
    for folder, outside in moved.items():
        shutil.copytree(folder, outside)  # fresh files: this user's, one link, a new file's mode
        shutil.rmtree(folder)
        folder.symlink_to(outside)

    write_clusters(tmp_path, nodes=3)
    resynth(tmp_path, config, out)
    assert tree(out) == full(tmp_path, config)
    for outside in moved.values():
        files = [p for p in sorted(outside.rglob("*")) if p.is_file()]
        assert files and all(p.stat().st_nlink == 1 for p in files), outside


WRITES_INTO_THE_PREVIOUS_OUTPUT = """
import os, time
from pathlib import Path
from gpucluster.sdk import hookimpl

@hookimpl(tryfirst=True)
def gpucluster_cluster_stack(scope, cluster, recipe):
    stacks = Path(os.environ["PREVIOUS_STACKS"])
    edge = [p for p in (stacks / "edge-runtime").rglob("*") if p.is_file()]
    deadline = time.monotonic() + 120
    while not any(p.stat().st_nlink > 1 for p in edge) and time.monotonic() < deadline:
        time.sleep(0.01)  # the helper links lab's files, then edge's
    if any(p.stat().st_nlink > 1 for p in edge):
        Path(os.environ["LINKED_MARKER"]).write_text("linked")
    with open(stacks / "lab-runtime" / "cdk.tf.json", "r+b") as f:  # an edit in place
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0x01
        f.seek(0)
        f.write(data)
    return None  # the AKS plugin builds the cluster
"""


def test_a_write_into_the_previous_output_during_the_synth_never_reaches_the_new_one(tmp_path):
    """The previous output's file is changed in place after the helper linked it (while the app
    builds the changed cluster): the new output still holds the entry's bytes."""
    config = write_clusters(tmp_path)
    out = tmp_path / "work" / "cdktf.out"
    resynth(tmp_path, config, out)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "gpucluster_test_inplace.py").write_text(WRITES_INTO_THE_PREVIOUS_OUTPUT)
    write_clusters(tmp_path, nodes=3)  # train is built (the plugin runs), lab and edge reused
    result = run_main(
        cwd=tmp_path,
        outdir=out,
        config=config,
        GPUCLUSTER_CACHE_DIR=str(tmp_path / "cache"),
        GPUCLUSTER_PLUGINS="gpucluster_test_inplace",
        PYTHONPATH=str(plugins),
        PREVIOUS_STACKS=str(out / "stacks"),
        LINKED_MARKER=str(tmp_path / "linked"),
        GPUCLUSTER_SYNTH_WORKERS="1",
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "linked").exists()  # the edit came after the helper's links
    assert tree(out) == full(tmp_path, config)
    assert sorted(p.name for p in out.parent.iterdir()) == ["cdktf.out"]

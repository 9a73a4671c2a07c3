"""An output folder is ours or it is refused (gpucluster.outfolder): synthesis (gpucluster_cdk.stacks.outdir,
main.py's CDKTF_OUTDIR) and ``gpucluster render --out`` replace only a folder that is absent,
empty, marked, or an earlier output's layout; anything else is one error[outdir] line and every
file stays."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import _support
import pytest
from _support import EXISTING_AKS, make, tree

from gpucluster import outfolder
from gpucluster.cli import main as cli_main
from gpucluster.errors import GpuclusterError
from gpucluster.lint.render import RenderResult, write_output
from gpucluster.outfolder import MARKER, MARKER_TEXT, check_replaceable
from gpucluster_cdk.stacks.outdir import staged_outdir


def check(path, kind="synth"):
    check_replaceable(path, kind=kind, key="CDKTF_OUTDIR", fix_elsewhere="synthesize elsewhere")


USER_FOLDERS = {
    "project": {"gpucluster.yaml": "clusters: []\n", "notes.txt": "precious"},
    "values": {"values/gpu-operator.yaml": "a: 1\n"},
    "legacy-plus-a-file": {
        "manifest.json": "{}",
        "stacks/a/cdk.tf.json": "{}",
        "notes.txt": "precious",
    },
    "manifest-only": {"manifest.json": "{}"},
    "stacks-and-more": {"stacks/a/cdk.tf.json": "{}", "main.tf": ""},
    "stacks-is-a-file": {"manifest.json": "{}", "stacks": "not a folder"},
    "foreign-marker-text": {MARKER: "something else\n", "notes.txt": "precious"},
}


@pytest.mark.parametrize("name", sorted(USER_FOLDERS))
def test_a_folder_of_user_files_is_refused_and_left_alone(tmp_path, name):
    folder = make(tmp_path / "out", USER_FOLDERS[name])
    before = tree(folder)
    with pytest.raises(GpuclusterError) as info:
        with staged_outdir(folder):
            pytest.fail("the synthesis must not start")
    line = info.value.render()
    assert line.startswith(
        f"error[outdir] key=CDKTF_OUTDIR: the output folder {folder} is not an earlier gpucluster "
        "output (it holds "
    ), line
    assert (
        " fix: synthesize elsewhere (cdktf synth --output DIR, or CDKTF_OUTDIR for main.py), or move those files"
        in line
    )
    assert "\n" not in line
    assert tree(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folder either


@pytest.mark.parametrize(
    "files",
    [
        {},
        {
            "manifest.json": '{"stacks": {}}',
            "stacks/old-runtime/cdk.tf.json": "{}",
        },  # cdktf synth's layout
        {"stacks/stale-runtime/cdk.tf.json": "{}"},  # its stacks/ without a manifest
        {MARKER: MARKER_TEXT, "manifest.json": "{}", "stacks/x/cdk.tf.json": "{}", "stray": "x"},
    ],
    ids=["empty", "earlier-cdktf-output", "stacks-only", "marked"],
)
def test_an_earlier_output_or_an_empty_folder_is_replaced_and_marked(tmp_path, files):
    folder = tmp_path / "out"
    folder.mkdir()
    make(folder, files)
    with staged_outdir(folder) as staged:
        make(staged, {"manifest.json": "new"})
    assert tree(folder) == {MARKER: MARKER_TEXT.encode(), "manifest.json": b"new"}


def test_absent_folder_is_created_with_the_marker(tmp_path):
    with staged_outdir(tmp_path / "a" / "out") as staged:
        make(staged, {"manifest.json": "{}"})
    assert (tmp_path / "a" / "out" / MARKER).read_text() == MARKER_TEXT


@pytest.mark.parametrize("where", ["cwd", "parent-of-cwd", "dot", "dotdot", "link-to-cwd"])
def test_the_working_folder_and_its_parents_are_never_output_folders_even_when_marked(
    tmp_path, monkeypatch, where
):
    project = make(tmp_path / "proj", {"gpucluster.yaml": "x", MARKER: MARKER_TEXT})
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub" if where in ("parent-of-cwd", "dotdot") else project)
    target = {
        "cwd": project,
        "parent-of-cwd": project,
        "dot": Path("."),
        "dotdot": Path(".."),
        "link-to-cwd": tmp_path / "link",
    }[where]
    (tmp_path / "link").symlink_to(project)
    before = tree(project)
    with pytest.raises(GpuclusterError) as info:
        check(target)
    line = info.value.render()
    assert line.startswith("error[outdir] key=CDKTF_OUTDIR: the output folder "), line
    assert (
        ("is the working folder" in line)
        if where in ("cwd", "dot", "link-to-cwd")
        else ("holds the working folder" in line)
    )
    assert tree(project) == before


def test_root_and_home_are_never_output_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GpuclusterError, match=r"error\[outdir\].* is the root of the file system"):
        check("/")
    home = make(tmp_path / "home", {MARKER: MARKER_TEXT})
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(GpuclusterError, match=r"is your home folder"):
        check(home)


def test_a_symbolic_link_is_judged_by_the_folder_it_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    user = make(tmp_path / "data", {"notes.txt": "precious"})
    (tmp_path / "out").symlink_to(user)
    with pytest.raises(
        GpuclusterError, match=r"is not an earlier gpucluster output \(it holds notes.txt,"
    ):
        check(tmp_path / "out")
    assert tree(user) == {"notes.txt": b"precious"}


def test_a_fifo_named_like_the_marker_does_not_block_and_is_not_the_marker(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    os.mkfifo(folder / MARKER)
    with pytest.raises(GpuclusterError, match=r"error\[outdir\]"):
        check(folder)


def test_a_folder_that_becomes_foreign_during_the_synthesis_is_refused_at_the_swap(tmp_path):
    folder = tmp_path / "out"
    with pytest.raises(GpuclusterError, match=r"error\[outdir\]"):
        with staged_outdir(folder) as staged:
            make(staged, {"manifest.json": "new"})
            make(folder, {"notes.txt": "written meanwhile"})
    assert tree(folder) == {"notes.txt": b"written meanwhile"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount)")
def test_a_folder_holding_a_mount_point_is_refused(tmp_path):
    folder = make(tmp_path / "out", {MARKER: MARKER_TEXT})
    (folder / "vol").mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder / "vol")]
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here")
    try:
        with pytest.raises(
            GpuclusterError, match=r"holds the mount point .*/vol; replacing the folder would move"
        ):
            check(folder)
    finally:
        subprocess.run(["umount", "-l", str(folder / "vol")], check=False)


# --------------------------------------------------------------------------- main.py (CDKTF_OUTDIR)


def test_main_py_with_cdktf_outdir_dot_keeps_every_file_of_the_project(tmp_path):
    """The reproducer: CDKTF_OUTDIR=. in the project folder (was exit 0 with only manifest.json and
    stacks left)."""
    project = make(tmp_path / "proj", {"gpucluster.yaml": EXISTING_AKS, "notes.txt": "precious\n"})
    before = tree(project)
    result = _support.run_main(cwd=project, outdir=Path("."))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(
        f"error[outdir] key=CDKTF_OUTDIR: the output folder {project} is the working folder; "
    ), line
    assert " fix: synthesize elsewhere " in line
    assert tree(project) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]


def test_main_py_refuses_a_folder_of_user_files(tmp_path):
    (tmp_path / "gpucluster.yaml").write_text(EXISTING_AKS)
    values = make(tmp_path / "values", {"gpu-operator.yaml": "a: 1\n"})
    result = _support.run_main(cwd=tmp_path, outdir=values)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(
        f"error[outdir] key=CDKTF_OUTDIR: the output folder {values} is not an earlier gpucluster "
        "output (it holds gpu-operator.yaml, and no .gpucluster-output marker)"
    ), line
    assert tree(values) == {"gpu-operator.yaml": b"a: 1\n"}


# --------------------------------------------------------------------------- render --out


def test_render_out_refuses_the_working_folder_before_rendering(tmp_path, monkeypatch, capsys):
    project = make(tmp_path / "proj", {"gpucluster.yaml": EXISTING_AKS, "notes.txt": "precious\n"})
    monkeypatch.chdir(project)
    before = tree(project)
    for out in (".", str(project)):
        code = cli_main(["render", "--charts", str(project), "--out", out])
        err = capsys.readouterr().err
        assert code == 2, err
        [line] = err.splitlines()
        assert (
            line.startswith("error[outdir] key=--out: the output folder ")
            and "is the working folder" in line
        ), line
        assert " fix: render elsewhere (--out NEW_FOLDER): " in line
        assert tree(project) == before


def _result(*clusters: str) -> RenderResult:
    from gpucluster.lint.render import RenderedRelease

    class Node:
        def __init__(self, id):
            self.id = id

    releases = [
        RenderedRelease(
            cluster=c,
            node=Node("rel"),
            chart=None,
            values={"a": 1},
            manifests={"t/x.yaml": "k: v\n"},
        )
        for c in clusters
    ]
    return RenderResult(releases=releases, findings=[], plans=[], renderer=None)


def test_render_output_is_marked_and_replaces_its_previous_or_a_pre_marker_render(tmp_path):
    out = tmp_path / "render"
    make(out, {"old-cluster/rel/values.yaml": "a: 0\n"})  # an earlier render, before the marker
    write_output(_result("c1"), out)
    assert tree(out) == {
        MARKER: MARKER_TEXT.encode(),
        "c1/rel/values.yaml": b"a: 1\n",
        "c1/rel/t/x.yaml": b"k: v\n",
    }
    write_output(_result("c2"), out)
    assert sorted(tree(out)) == [MARKER, "c2/rel/t/x.yaml", "c2/rel/values.yaml"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["render"]


def test_render_out_refuses_user_files_and_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    out = make(tmp_path / "render", {"notes.txt": "precious"})
    with pytest.raises(
        GpuclusterError, match=r"error\[outdir\] key=--out: the output folder .* is not an earlier"
    ):
        write_output(_result("c1"), out)
    assert tree(out) == {"notes.txt": b"precious"}

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outfolder, "write_marker", full)
    fresh = tmp_path / "fresh"
    with pytest.raises(
        GpuclusterError,
        match=r"error\[output\] key=--out: cannot write the rendered releases .*No space",
    ):
        write_output(_result("c1"), fresh)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "render"
    ]  # no staging folder left (was: .fresh.XXXX)


def test_an_out_folder_that_cannot_be_made_names_the_option_that_gave_it(tmp_path, capsys):
    """``gpucluster synth --out DIR`` below a file: the one ``error[output]`` line says ``key=--out``
    (the option the user typed), not ``CDKTF_OUTDIR``; the staging helper keeps its default key."""
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    config = _support.write_cluster_file(tmp_path, EXISTING_AKS)
    out = tmp_path / "afile" / "out"
    assert cli_main(["synth", "--config", str(config), "--out", str(out)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and errors[0].startswith("error[output] key=--out: "), errors
    assert errors[0].endswith(", or synthesize elsewhere (gpucluster synth --out NEW_FOLDER)"), (
        errors
    )
    with pytest.raises(GpuclusterError) as err, staged_outdir(out):
        pass
    assert err.value.render().startswith("error[output] key=CDKTF_OUTDIR: ")
    assert err.value.render().endswith("(cdktf synth --output DIR, or CDKTF_OUTDIR for main.py)")

"""``gpucluster synth``: the cdktf app in the CLI's process, the files ``cdktf synth`` writes.

The real ``cdktf synth`` (pinned CLI 0.21, node_modules/.bin/cdktf) runs in a project made by
``gpucluster init``, whose ``cdktf.json`` runs ``python -m gpucluster_cdk``, with the environment
the project's README names and nothing of gpucluster's or cdktf's own settings.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _support import EXISTING_AKS, NVKE_EXISTING, tree

from gpucluster import cli
from gpucluster import init as init_mod

ROOT = Path(__file__).resolve().parents[1]
CDKTF = ROOT / "node_modules" / ".bin" / "cdktf"
BIN = Path(sys.executable).parent


def readme_env(**extra: str) -> dict[str, str]:
    """This process's environment without gpucluster's, cdktf's, jsii's and the checkpoint
    settings, then what the project's README names (``CHECKPOINT_DISABLE=1``), with this
    environment's ``bin`` first on PATH (the README's activated virtual environment: ``python``
    and ``gpucluster`` are its own). A ``TF_CLI_CONFIG_FILE`` naming a missing file (this machine's
    setting, not the README's) is dropped: Terraform would warn about it on every run."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPUCLUSTER_", "CDKTF_", "JSII_"))
        and k != "CHECKPOINT_DISABLE"
        or k == "GPUCLUSTER_CDK"
    }
    if env.get("TF_CLI_CONFIG_FILE") and not Path(env["TF_CLI_CONFIG_FILE"]).exists():
        del env["TF_CLI_CONFIG_FILE"]
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", CHECKPOINT_DISABLE="1", CI="true", **extra
    )
    return env


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("user") / "gpu-project"
    init_mod.init_project(root, init_mod.InitOptions(service="aks"))
    return root


@pytest.mark.synth
def test_gpucluster_synth_writes_what_cdktf_synth_writes(project):
    if not CDKTF.exists():
        pytest.fail(f"{CDKTF} missing: run `make setup` (npm ci installs the pinned cdktf-cli)")
    ours = subprocess.run(
        [str(BIN / "gpucluster"), "synth", "--out", "by-gpucluster"],
        cwd=project,
        env=readme_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == (
        "synthesized 2 stacks into by-gpucluster: aks-training-cluster, aks-training-runtime\n"
    )
    assert ours.stderr == ""  # one cluster: no progress line; a cluster file: no notice
    theirs = subprocess.run(
        [str(CDKTF), "synth", "--output", "by-cdktf"],
        cwd=project,
        env=readme_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr
    assert "Generated Terraform code for the stacks: aks-training-cluster" in theirs.stdout
    for text in (theirs.stdout, theirs.stderr):
        assert (
            "[ERROR]" not in text and "end-of-life" not in text and "checkpoint" not in text.lower()
        )
    assert tree(project / "by-gpucluster") == tree(project / "by-cdktf")
    files = tree(project / "by-cdktf")
    assert {f.split("/")[1] for f in files if f.startswith("stacks/")} == {
        "aks-training-cluster",
        "aks-training-runtime",
    }
    assert "manifest.json" in files and "stacks/aks-training-runtime/cdk.tf.json" in files


def run_synth(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["synth", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


MULTI = "clusters:\n" + EXISTING_AKS.split("clusters:\n", 1)[1] + NVKE_EXISTING


BUILT = "gpucluster: cluster 1/2 lab: stacks lab-runtime built\ngpucluster: cluster 2/2 nvke-a: stacks nvke-a-runtime built\n"


def test_one_progress_line_per_cluster_of_a_multi_cluster_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUCLUSTER_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "gpucluster.yaml").write_text(MULTI)
    code, out, err = run_synth(
        "--config", str(tmp_path / "gpucluster.yaml"), "--out", str(tmp_path / "out")
    )
    assert code == 0, capsys.readouterr().err
    assert err == BUILT
    assert out == f"synthesized 2 stacks into {tmp_path / 'out'}: lab-runtime, nvke-a-runtime\n"
    assert sorted(p.name for p in (tmp_path / "out" / "stacks").iterdir()) == [
        "lab-runtime",
        "nvke-a-runtime",
    ]
    first = tree(tmp_path / "out")
    # Again: both clusters come from the cache, and the line says so; the bytes are the same.
    code, out, err = run_synth(
        "--config", str(tmp_path / "gpucluster.yaml"), "--out", str(tmp_path / "out")
    )
    assert code == 0, capsys.readouterr().err
    assert err == BUILT.replace(" built", " reused")
    assert tree(tmp_path / "out") == first
    # --no-cache builds both (and --workers 1 in this process) with the same bytes.
    code, out, err = run_synth(
        "--config",
        str(tmp_path / "gpucluster.yaml"),
        "--out",
        str(tmp_path / "out"),
        "--no-cache",
        "--workers",
        "1",
    )
    assert (code, err) == (0, BUILT), capsys.readouterr().err
    assert tree(tmp_path / "out") == first


@pytest.mark.parametrize("value", ["0", "-1", "x", "1.5", "1\n", "", "9999", "\u0661"])
def test_a_bad_workers_flag_is_one_usage_line(tmp_path, value, capsys):
    code, out, err = run_synth("--out", str(tmp_path / "out"), "--workers", value)
    assert (code, out) == (2, "")
    [line] = (err + capsys.readouterr().err).splitlines()
    assert line.startswith("error[usage]") and "worker count" in line and " fix: " in line
    assert not (tmp_path / "out").exists()


def test_config_and_out_flags_win_over_the_environment(tmp_path, monkeypatch, capsys):
    (tmp_path / "lab.yaml").write_text(EXISTING_AKS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CDKTF_OUTDIR", str(tmp_path / "from-env"))
    monkeypatch.setenv("GPUCLUSTER_CONFIG", str(tmp_path / "missing.yaml"))
    code, out, err = run_synth("--config", "lab.yaml", "--out", "flagged")
    assert (code, err) == (0, ""), capsys.readouterr().err
    assert out == "synthesized 1 stack into flagged: lab-runtime\n"
    assert (tmp_path / "flagged" / "stacks" / "lab-runtime" / "cdk.tf.json").is_file() and not (
        tmp_path / "from-env"
    ).exists()
    monkeypatch.delenv("GPUCLUSTER_CONFIG")
    (tmp_path / "gpucluster.yaml").write_text(EXISTING_AKS)
    code, out, _ = run_synth()
    assert code == 0 and out == f"synthesized 1 stack into {tmp_path / 'from-env'}: lab-runtime\n"


def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    (tmp_path / "gpucluster.yaml").write_text(EXISTING_AKS.replace("name: lab", "name: Lab"))
    code, out, err = run_synth(
        "--config", str(tmp_path / "gpucluster.yaml"), "--out", str(tmp_path / "out")
    )
    assert (code, out, err) == (2, "", "")
    [line] = capsys.readouterr().err.splitlines()
    assert (
        line.startswith(f"error[input] file={tmp_path / 'gpucluster.yaml'} ")
        and "key=clusters[0].name" in line
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpucluster.yaml"]

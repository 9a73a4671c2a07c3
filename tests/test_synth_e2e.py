"""End to end: the real `cdktf synth` (pinned CLI 0.21) on the embedded default cluster file.

Marked ``synth`` (needs node_modules/.bin/cdktf from `npm ci`; `make test` installs it).
Also: byte-identical output in another folder, no absolute paths, atomic replacement on a
failing synth (bad cluster file: exit 2 from main.py, output untouched).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _support import tree

ROOT = Path(__file__).resolve().parents[1]
CDKTF = ROOT / "node_modules" / ".bin" / "cdktf"

pytestmark = pytest.mark.synth


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCLUSTER_", "CDKTF_"))}
    env.update(
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20", CHECKPOINT_DISABLE="1", CI="true"
    )
    tfrc = env.get("TF_CLI_CONFIG_FILE") or str(Path.home() / ".terraformrc")
    if not Path(tfrc).exists():
        env["TF_CLI_CONFIG_FILE"] = "/dev/null"
    env.update(extra)
    return env


def run_cdktf_synth(outdir: Path, **env: str) -> subprocess.CompletedProcess:
    if not CDKTF.exists():
        pytest.fail(f"{CDKTF} missing: run `make setup` (npm ci installs the pinned cdktf-cli)")
    return subprocess.run(
        [str(CDKTF), "synth", "--output", str(outdir)],
        cwd=ROOT,
        env=cli_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="session")
def default_plans():
    from gpucluster.inputs.config import load_clusters
    from gpucluster.pipeline import build_plans

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return build_plans(load_clusters(env={}))
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="session")
def cli_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "cdktf.out"
    stale = out / "stacks" / "stale-runtime"
    stale.mkdir(parents=True)
    (stale / "cdk.tf.json").write_text("{}")
    result = run_cdktf_synth(out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Generated Terraform code for the stacks" in result.stdout
    return out


def test_cdktf_synth_writes_cluster_and_runtime_stacks(cli_out, default_plans):
    names = sorted(p.name for p in (cli_out / "stacks").iterdir())
    expected = sorted(
        f"{p.cluster.name}-{kind}" for p in default_plans for kind in ("cluster", "runtime")
    )
    assert names == expected  # the stale stack folder of the previous output is gone
    import json

    for plan in default_plans:
        runtime = json.loads(
            (cli_out / "stacks" / f"{plan.cluster.name}-runtime" / "cdk.tf.json").read_text()
        )
        releases = runtime["resource"]["helm_release"]
        assert sorted(releases) == sorted(n.id for n in plan.nodes)
        assert len(releases) == len(plan.nodes) > 5
        for node in plan.nodes:
            assert sorted(releases[node.id].get("depends_on", [])) == [
                f"helm_release.{d}" for d in node.depends_on
            ]
            if node.local_chart is not None:
                shipped = (
                    cli_out / "stacks" / f"{plan.cluster.name}-runtime" / releases[node.id]["chart"]
                )
                assert tree(shipped) == {k: v.encode() for k, v in node.local_chart.files.items()}
        cluster = json.loads(
            (cli_out / "stacks" / f"{plan.cluster.name}-cluster" / "cdk.tf.json").read_text()
        )
        pools = cluster["resource"]["azurerm_kubernetes_cluster_node_pool"].values()
        assert any(
            p.get("gpu_driver") == "Install" and p["vm_size"] == "Standard_ND96isr_H100_v5"
            for p in pools
        )
        # GPU pools carry the label the derived accelerated node selector selects on
        gpu_pools = [p for p in pools if "gpu_driver" in p]
        assert gpu_pools and all(
            p["node_labels"] == {"nvidia.com/gpu.present": "true"} for p in gpu_pools
        )
        assert "nvidia.com/gpu.present" in releases["nvidia-dra-driver-gpu"]["values"][0]


def test_same_input_in_another_folder_is_byte_identical(
    cli_out, default_plans, tmp_path, monkeypatch
):
    from gpucluster_cdk import stacks

    monkeypatch.chdir(tmp_path)
    stacks.synth(default_plans, "elsewhere/cdktf.out")
    assert tree(tmp_path / "elsewhere" / "cdktf.out") == tree(cli_out)


def test_output_has_no_absolute_paths(cli_out):
    # the project folder, the output folder, and the staging folders (charts, staged outdir)
    forbidden = {str(ROOT), str(cli_out.parent), "gpucluster-charts-", ".cdktf.out."}
    for rel, data in tree(cli_out).items():
        text = data.decode("utf-8")
        for needle in forbidden:
            assert needle not in text, f"{rel} contains {needle}"
        for path in re.findall(r'"path":\s*"([^"]+)"', text):
            assert not path.startswith("/"), f"{rel}: absolute path {path}"


BAD_CLUSTER_FILE = "clusters:\n  - name: Bad_Name\n    criteria:\n      service: aks\n"


def test_bad_cluster_file_exits_2_and_keeps_previous_output(cli_out, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_CLUSTER_FILE)
    before = tree(cli_out)
    code = "import sys, main; rc = main.main([]); print('cdktf' in sys.modules); sys.exit(rc)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(GPUCLUSTER_CONFIG=str(bad), CDKTF_OUTDIR=str(cli_out)),
    )
    assert result.returncode == 2, result.stderr
    assert "error[" in result.stderr and "Bad_Name" in result.stderr and str(bad) in result.stderr
    assert result.stdout.strip() == "False"  # failed before cdktf was even imported
    assert tree(cli_out) == before
    assert sorted(p.name for p in cli_out.parent.iterdir()) == ["cdktf.out"]


def test_cdktf_cli_with_bad_cluster_file_fails_and_keeps_previous_output(cli_out, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_CLUSTER_FILE)
    before = tree(cli_out)
    result = run_cdktf_synth(cli_out, GPUCLUSTER_CONFIG=str(bad))
    assert result.returncode != 0
    assert "Bad_Name" in result.stdout + result.stderr
    assert tree(cli_out) == before

"""Stacks with a ``cloud`` backend: terraform.cloud blocks, cross-stack remote state, charts.

The in-process synths share the process's cdktf and azurerm imports with tests/test_stacks.py.
The ``synth``-marked test runs main.py on a cluster file with a cloud backend through the real
pipeline (catalog, gates, local charts).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath

import pytest
from _support import tree
from plan_factory import make_plan

from gpucluster.errors import GpuclusterError
from gpucluster.inputs.backends import parse_backend
from gpucluster.model import ExistingCluster
from gpucluster_cdk import stacks

ACME = parse_backend(
    {"type": "cloud", "organization": "acme", "workspacePrefix": "gpu-", "project": "GPU Platform"},
    file="t",
    cluster=None,
    key="backend",
)
TFE = parse_backend(
    {
        "type": "cloud",
        "organization": "edge-org",
        "workspacePrefix": "",
        "hostname": "tfe.example.com",
    },
    file="t",
    cluster=None,
    key="backend",
)


def load(outdir: Path, stack: str) -> dict:
    return json.loads((outdir / "stacks" / stack / "cdk.tf.json").read_text())


def cloud_plans():
    lab = make_plan("lab")
    lab.cluster.backend = ACME
    edge = make_plan("edge", existing=ExistingCluster(kubeconfig_path="~/.kube/edge"))
    edge.cluster.backend = TFE
    return [lab, edge, make_plan("loc")]  # loc keeps the default local backend


@pytest.fixture(scope="module")
def outdir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cloud") / "cdktf.out"
    assert stacks.synth(cloud_plans(), out) == [
        "edge-runtime",
        "lab-cluster",
        "lab-runtime",
        "loc-cluster",
        "loc-runtime",
    ]
    return out


def test_each_stack_has_a_cloud_block_with_its_own_workspace(outdir):
    for stack in ("lab-cluster", "lab-runtime"):
        assert load(outdir, stack)["terraform"]["cloud"] == {
            "hostname": "app.terraform.io",
            "organization": "acme",
            "workspaces": {"name": f"gpu-{stack}", "project": "GPU Platform"},
        }
        assert "backend" not in load(outdir, stack)["terraform"]
    assert load(outdir, "edge-runtime")["terraform"]["cloud"] == {
        "hostname": "tfe.example.com",
        "organization": "edge-org",
        "workspaces": {"name": "edge-runtime"},
    }
    for stack in ("loc-cluster", "loc-runtime"):  # a local cluster in the same app is unchanged
        terraform = load(outdir, stack)["terraform"]
        assert (
            terraform["backend"] == {"local": {"path": f"../../../terraform.{stack}.tfstate"}}
            and "cloud" not in terraform
        )


def test_no_token_in_the_output(outdir):
    for rel, data in tree(outdir).items():
        assert b'"token"' not in data, rel


def test_runtime_reads_cluster_outputs_from_the_cluster_workspace(outdir):
    runtime = load(outdir, "lab-runtime")
    assert runtime["data"]["terraform_remote_state"] == {
        "cross-stack-reference-input-lab-cluster": {
            "backend": "remote",
            "config": {
                "hostname": "app.terraform.io",
                "organization": "acme",
                "workspaces": {"name": "gpu-lab-cluster"},
            },
        }
    }
    (provider,) = runtime["provider"]["helm"]
    source = "data.terraform_remote_state.cross-stack-reference-input-lab-cluster.outputs.cross-stack-output-"
    assert provider["kubernetes"]["host"].startswith("${" + source)
    assert provider["kubernetes"]["cluster_ca_certificate"].startswith("${base64decode(" + source)
    assert (
        provider["kubernetes"]["exec"]["command"] == "kubelogin"
    )  # Entra ID: no credential in the workspace outputs
    assert not {"client_certificate", "client_key", "token"} & set(provider["kubernetes"])
    outputs = load(outdir, "lab-cluster")["output"]
    referenced = {
        provider["kubernetes"][k].split(".outputs.", 1)[1].rstrip("})")
        for k in ("host", "cluster_ca_certificate")
    }
    assert len(referenced) == 2 and referenced <= set(outputs)
    manifest = json.loads((outdir / "manifest.json").read_text())
    assert manifest["stacks"]["lab-runtime"]["dependencies"] == ["lab-cluster"]
    assert "data" not in load(
        outdir, "edge-runtime"
    )  # existing cluster: kubeconfig variables, no remote state


def assert_charts_travel_with_the_stack(outdir: Path, stack: str) -> int:
    """Every local chart path is relative and resolves inside a copy of the stack folder alone."""
    upload = outdir.parent / "upload" / stack
    shutil.rmtree(upload, ignore_errors=True)
    shutil.copytree(
        outdir / "stacks" / stack, upload
    )  # what a remote run gets: the stack folder only
    releases = json.loads((upload / "cdk.tf.json").read_text())["resource"]["helm_release"]
    local = 0
    for name, release in releases.items():
        if "repository" in release:
            assert "/" not in release["chart"], name  # remote chart: a name in a repository
            continue
        chart = PurePosixPath(release["chart"])
        assert not chart.is_absolute() and ".." not in chart.parts, (name, release["chart"])
        folder = (upload / chart).resolve()
        assert folder.is_relative_to(upload.resolve()) and (folder / "Chart.yaml").is_file(), (
            name,
            release["chart"],
        )
        local += 1
    text = (upload / "cdk.tf.json").read_text()
    assert str(outdir) not in text and str(outdir.parent) not in text
    return local


def test_local_charts_travel_inside_the_stack_folder(outdir):
    assert (
        assert_charts_travel_with_the_stack(outdir, "lab-runtime") == 2
    )  # manifests + gate of the factory plan
    assert assert_charts_travel_with_the_stack(outdir, "edge-runtime") == 2


def test_cloud_output_is_deterministic(outdir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stacks.synth(cloud_plans(), "again/cdktf.out")
    assert tree(tmp_path / "again" / "cdktf.out") == tree(outdir)


def test_cloud_backend_without_terraform_cli_is_an_input_error(tmp_path, monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("TERRAFORM_BINARY_NAME", raising=False)
    out = tmp_path / "cdktf.out"
    with pytest.raises(GpuclusterError) as info:
        stacks.synth(cloud_plans()[:1], out)
    text = info.value.render()
    assert (
        "file=tests/plan_factory.py cluster=lab key=backend.type: backend type 'cloud' needs the Terraform CLI"
        in text
    )
    assert "'terraform' is not on PATH" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]  # nothing written, staging removed


CLOUD_FILE = """\
backend:
  type: cloud
  organization: acme
  workspacePrefix: gpu-
clusters:
  - name: gpu-training
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    profile: {gpuStack: azure-managed}
  - name: attached
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: inference}
    existing: {kubeconfig: ~/.kube/attached}
    scheduling: {accelerated: {tolerations: ["nvidia.com/gpu:NoSchedule"]}}
    backend: {type: local}
"""


@pytest.mark.synth
def test_main_with_a_cloud_cluster_file(tmp_path, monkeypatch, capsys):
    import main

    config = tmp_path / "gpucluster.yaml"
    config.write_text(CLOUD_FILE)
    out = tmp_path / "cdktf.out"
    monkeypatch.setenv("GPUCLUSTER_CONFIG", str(config))
    monkeypatch.setenv("CDKTF_OUTDIR", str(out))
    monkeypatch.delenv("CDKTF_CONTINUE_SYNTH_ON_ERROR_ANNOTATIONS", raising=False)
    assert main.main([]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in (out / "stacks").iterdir()) == [
        "attached-runtime",
        "gpu-training-cluster",
        "gpu-training-runtime",
    ]
    for stack in ("gpu-training-cluster", "gpu-training-runtime"):
        assert load(out, stack)["terraform"]["cloud"] == {
            "hostname": "app.terraform.io",
            "organization": "acme",
            "workspaces": {"name": f"gpu-{stack}"},
        }
    runtime = load(out, "gpu-training-runtime")
    assert runtime["data"]["terraform_remote_state"][
        "cross-stack-reference-input-gpu-training-cluster"
    ] == {
        "backend": "remote",
        "config": {
            "hostname": "app.terraform.io",
            "organization": "acme",
            "workspaces": {"name": "gpu-gpu-training-cluster"},
        },
    }
    assert load(out, "attached-runtime")["terraform"]["backend"] == {
        "local": {"path": "../../../terraform.attached-runtime.tfstate"}
    }
    gates = [
        n for n, r in runtime["resource"]["helm_release"].items() if r["wait_for_jobs"] is True
    ]
    assert gates  # readiness gates are ordinary releases: they block a remote apply the same way
    assert assert_charts_travel_with_the_stack(out, "gpu-training-runtime") >= len(gates)
    assert assert_charts_travel_with_the_stack(out, "attached-runtime") >= 1
    again = tmp_path / "again"
    monkeypatch.setenv("CDKTF_OUTDIR", str(again))
    assert main.main([]) == 0
    assert tree(again) == tree(out)

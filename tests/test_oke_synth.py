"""OKE through main.py's real cdktf synth: runtime stacks only (the OKE clusters exist), the
Helm provider reading the kubeconfig named in the cluster file, the GB200 releases in order,
byte-identical output in another folder. Marked ``synth``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _support import run_main, tree

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.synth

CLUSTER_FILE = """\
clusters:
  - name: oke-gb200
    criteria: {service: oke, accelerator: gb200, os: ubuntu, intent: training, platform: kubeflow}
    profile: {gpuStack: oci-managed}
    kubernetesVersion: "1.34"
    existing: {kubeconfig: ~/.kube/oke-gb200.yaml, context: oke-gb200-admin}
    settings: {nvidiaGpuPluginAddon: installed}
  - name: oke-a100
    criteria: {service: oke, accelerator: a100, os: ubuntu, intent: training}
    profile: {gpuStack: operator-managed}
"""


def synth(work: Path, outdir: Path) -> subprocess.CompletedProcess:
    return run_main(
        cwd=ROOT,
        outdir=outdir,
        config=work / "gpucluster.yaml",
        timeout=600,
        CHECKPOINT_DISABLE="1",
    )


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    work = tmp_path_factory.mktemp("oke-synth")
    (work / "gpucluster.yaml").write_text(CLUSTER_FILE)
    proc = synth(work, work / "cdktf.out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return work, proc


def stack(work: Path, name: str) -> dict:
    return json.loads((work / "cdktf.out" / "stacks" / name / "cdk.tf.json").read_text())


def test_only_runtime_stacks(synthesized):
    work, _ = synthesized
    assert sorted(p.name for p in (work / "cdktf.out" / "stacks").iterdir()) == [
        "oke-a100-runtime",
        "oke-gb200-runtime",
    ]


def test_helm_provider_reads_the_kubeconfig_of_the_cluster_file(synthesized):
    work, _ = synthesized
    gb200 = stack(work, "oke-gb200-runtime")
    assert gb200["provider"] == {
        "helm": [
            {
                "kubernetes": {
                    "config_context": '${var.kube_context == "" ? null : var.kube_context}',
                    "config_path": "${var.kubeconfig_path}",
                }
            }
        ]
    }
    assert gb200["variable"]["kubeconfig_path"]["default"] == "~/.kube/oke-gb200.yaml"
    assert gb200["variable"]["kube_context"]["default"] == "oke-gb200-admin"
    assert list(gb200["terraform"]["required_providers"]) == ["helm"]
    a100 = stack(work, "oke-a100-runtime")
    assert a100["variable"]["kubeconfig_path"]["default"] == "~/.kube/config"
    assert a100["variable"]["kube_context"]["default"] == ""  # the kubeconfig's current context
    assert "azurerm" not in json.dumps(gb200) and "azurerm" not in json.dumps(a100)


def test_gb200_releases_and_edges(synthesized):
    work, _ = synthesized
    rel = stack(work, "oke-gb200-runtime")["resource"]["helm_release"]
    assert set(rel) == {
        "cert-manager",
        "nfd",
        "network-operator",
        "network-operator-manifests",
        "network-operator-nicclusterpolicy-ready",
        "nodewright-operator",
        "prometheus-operator-crds",
        "kube-prometheus-stack",
        "gpu-operator-pre",
        "gpu-operator",
        "gpu-operator-clusterpolicy-ready",
        "k8s-ephemeral-storage-metrics",
        "kai-scheduler",
        "kubeflow-trainer",
        "kubeflow-trainer-manifests",
        "nvidia-dra-driver-gpu",
        "nvidia-dra-driver-gpu-kubelet-plugin-rollout",
        "nvsentinel",
        "prometheus-adapter",
        # CRD steps of the owners whose CRDs live only in crds/ (docs/upgrading.md)
        "nfd-crds",
        "kubeflow-trainer-crds",
        "nvidia-dra-driver-gpu-crds",
    } | {r for r in rel if r.endswith("-teardown")}
    assert {r for r in rel if r.endswith("-teardown")}, (
        "components with custom resources get a teardown guard"
    )
    assert (
        "helm_release.network-operator-nicclusterpolicy-ready" in rel["gpu-operator"]["depends_on"]
    )
    assert "helm_release.gpu-operator-pre" in rel["gpu-operator"]["depends_on"]
    assert rel["nvidia-dra-driver-gpu"]["depends_on"] == [
        "helm_release.gpu-operator-clusterpolicy-ready",
        "helm_release.nvidia-dra-driver-gpu-crds",
    ]
    assert (rel["gpu-operator"]["repository"], rel["gpu-operator"]["version"]) == (
        "https://helm.ngc.nvidia.com/nvidia",
        "v26.7.1",
    )
    assert rel["network-operator-nicclusterpolicy-ready"]["wait_for_jobs"] is True
    ncp_chart = (
        work
        / "cdktf.out"
        / "stacks"
        / "oke-gb200-runtime"
        / rel["network-operator-manifests"]["chart"]
    )
    text = (ncp_chart / "templates" / "000-nic-cluster-policy-oke-gb200.yaml").read_text()
    assert (
        "kind: NicClusterPolicy" in text
        and '"ifNames": ["rdma0", "rdma1", "rdma2", "rdma3"]' in text
    )
    assert "ofedDriver" not in text
    values = rel["gpu-operator"]["values"][0]
    assert "devicePlugin:\n  enabled: false" in values and "MOFED_ENABLED" in values


def test_a100_operator_managed(synthesized):
    work, proc = synthesized
    rel = stack(work, "oke-a100-runtime")["resource"]["helm_release"]
    assert "network-operator" not in rel and "gpu-operator-pre" not in rel
    values = rel["gpu-operator"]["values"][0]
    assert "driver:\n  enabled: true" in values and "devicePlugin:\n  enabled: true" in values
    assert "nvidiaDriverRoot: /run/nvidia/driver" in rel["nvidia-dra-driver-gpu"]["values"][0]
    # only the GB200 oci-managed cluster warns (kernel module parameters under the image driver)
    assert (
        proc.stderr.count("warning[") == 1
        and "warning[OKE-KERNEL-MODULE-PARAMS] cluster=oke-gb200" in proc.stderr
    )


def test_byte_identical_in_another_folder(synthesized, tmp_path):
    work, _ = synthesized
    (tmp_path / "gpucluster.yaml").write_text(CLUSTER_FILE)
    proc = synth(tmp_path, tmp_path / "cdktf.out")
    assert proc.returncode == 0, proc.stderr

    assert tree(tmp_path / "cdktf.out") == tree(work / "cdktf.out")


def test_bad_oke_input_exits_2_and_writes_nothing(tmp_path):
    (tmp_path / "gpucluster.yaml").write_text(
        CLUSTER_FILE.replace("~/.kube/oke-gb200.yaml", "oke-gb200.yaml")
    )
    proc = synth(tmp_path, tmp_path / "cdktf.out")
    assert proc.returncode == 2
    assert (
        "key=clusters[0].existing.kubeconfig" in proc.stderr and "is a relative path" in proc.stderr
    )
    assert not (tmp_path / "cdktf.out").exists()

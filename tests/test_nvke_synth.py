"""NVKE through main.py's real cdktf synth: one runtime stack on an existing cluster, the
fabric releases in order, Helm hooks enabled for the teardown wait. Marked ``synth``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support import NVKE_EXISTING, run_main

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.synth

CLUSTER_FILE = "clusters:\n" + NVKE_EXISTING


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("nvke-synth")
    (work / "gpucluster.yaml").write_text(CLUSTER_FILE)
    proc = run_main(
        cwd=ROOT,
        outdir=work / "cdktf.out",
        config=work / "gpucluster.yaml",
        timeout=600,
        CHECKPOINT_DISABLE="1",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return work / "cdktf.out"


def test_only_a_runtime_stack_reaching_the_existing_cluster(synthesized):
    assert sorted(p.name for p in (synthesized / "stacks").iterdir()) == ["nvke-a-runtime"]
    stack = json.loads((synthesized / "stacks" / "nvke-a-runtime" / "cdk.tf.json").read_text())
    assert stack["variable"]["kubeconfig_path"]["default"] == "~/.kube/nvke-a.yaml"
    assert stack["variable"]["kube_context"]["default"] == "tenant-a"
    assert "azurerm" not in json.dumps(stack.get("provider", {}))


def test_fabric_releases_and_edges(synthesized):
    stack = json.loads((synthesized / "stacks" / "nvke-a-runtime" / "cdk.tf.json").read_text())
    rel = stack["resource"]["helm_release"]
    assert rel["sriov-ib-networks-manifests"]["depends_on"] == [
        "helm_release.network-operator-ippool-crd",
        "helm_release.network-operator-multus-rollout",
        "helm_release.network-operator-nicclusterpolicy-ready",
    ]
    assert (
        "helm_release.nvidia-dra-driver-gpu-kubelet-plugin-version"
        in rel["kubeflow-trainer"]["depends_on"]
    )
    assert rel["nvidia-dra-driver-gpu"]["version"] == "0.5.1"
    # the teardown wait is a post-delete hook: hooks must not be disabled on its release
    assert not rel["sriov-ib-networks-manifests"].get("disable_webhooks", False)
    chart = synthesized / "stacks" / "nvke-a-runtime" / rel["sriov-ib-networks-manifests"]["chart"]
    teardown = (chart / "templates" / "001-teardown-wait.yaml").read_text()
    assert "helm.sh/hook: post-delete" in teardown and "sriovnetworknodestates" in teardown

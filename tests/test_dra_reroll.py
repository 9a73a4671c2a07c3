"""The DRA kubelet plugin re-rolls exactly when the GPU driver's identity changes (issue 11, item 1).

After a driver change the plugin keeps a stale NVML handle until it restarts (AICR #965/#973/#980).
gpucluster annotates the plugin's pod template with a hash of the driver identity
(``kubeletPlugin.podAnnotations["gpucluster/driver-identity"]``); the real DRA chart, rendered with
Helm's engine (helm-python-sdk), must carry it into the DaemonSet's pod template, where a change
makes the DaemonSet controller replace every plugin pod."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpucluster import pipeline
from gpucluster.charts import gates
from gpucluster.inputs.config import parse_clusters

helm_python = pytest.importorskip("helm_python")

DRA = "nvidia-dra-driver-gpu"


def plan_for(
    tmp_path: Path,
    *,
    stack: str = "operator-managed",
    sets=(),
    k8s: str = "1.34",
    existing: bool = False,
    pools=None,
):
    doc = {
        "name": "lab",
        "criteria": {"service": "aks", "accelerator": "h100", "intent": "training"},
        "profile": {"gpuStack": stack},
        "kubernetesVersion": k8s,
        "overrides": {"set": list(sets)},
    }
    if pools is not None:
        doc["pools"] = pools
    if existing:
        doc["existing"] = {"kubeconfig": "~/.kube/config"}
        doc["scheduling"] = {"accelerated": {"tolerations": ["nvidia.com/gpu:NoSchedule"]}}
    (spec,) = parse_clusters({"clusters": [doc]}, source="clusters.yaml", root=tmp_path)
    return pipeline.build_plan(spec)


def identity(plan) -> str:
    return plan.components[DRA].values["kubeletPlugin"]["podAnnotations"][
        gates.DRIVER_IDENTITY_ANNOTATION
    ]


def rendered_pod_annotations(chart_dir: Path, plan) -> dict:
    node = plan.node(DRA)
    out = helm_python.Chart.load(str(chart_dir)).render(
        node.values, name=node.id, namespace=node.namespace, is_install=True
    )
    texts = out.values() if isinstance(out, dict) else [out]
    for text in texts:
        for doc in yaml.safe_load_all(text):
            if (
                doc
                and doc.get("kind") == "DaemonSet"
                and doc["metadata"]["name"].endswith("-kubelet-plugin")
            ):
                return doc["spec"]["template"]["metadata"].get("annotations") or {}
    raise AssertionError("no kubelet plugin DaemonSet rendered")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return plan_for(tmp_path_factory.mktemp("base"))


def test_real_chart_puts_the_identity_on_the_plugin_pod_template(base, reference_charts):
    annotations = rendered_pod_annotations(reference_charts / "dra-driver-nvidia-gpu", base)
    assert annotations == {gates.DRIVER_IDENTITY_ANNOTATION: identity(base)}


def test_driver_version_change_rerolls_the_plugin(base, tmp_path, reference_charts):
    bumped = plan_for(tmp_path, sets=["gpuoperator:driver.version=600.10.01"])
    assert identity(bumped) != identity(base)
    assert rendered_pod_annotations(reference_charts / "dra-driver-nvidia-gpu", bumped)[
        gates.DRIVER_IDENTITY_ANNOTATION
    ] == identity(bumped)


@pytest.mark.parametrize(
    "unrelated",
    [
        "gpuoperator:dcgmExporter.serviceMonitor.interval=90s",
        "dradriver:controller.priorityClassName=system-cluster-critical",
        "gpuoperator:driver.maxParallelUpgrades=2",
    ],
)
def test_other_changes_do_not_reroll(base, tmp_path, unrelated):
    assert identity(plan_for(tmp_path, sets=[unrelated])) == identity(base)


def test_driver_image_and_module_type_are_part_of_the_identity(base, tmp_path):
    assert identity(
        plan_for(tmp_path, sets=["gpuoperator:driver.repository=myacr.azurecr.io/nvidia"])
    ) != identity(base)
    assert identity(
        plan_for(tmp_path, sets=["gpuoperator:driver.kernelModuleType=proprietary"])
    ) != identity(base)


def test_aks_owned_driver_follows_the_node_image_inputs(tmp_path):
    """azure-managed: AKS installs the driver in the node image; the node image follows the pool's
    Kubernetes version and gpu_driver, so those change the identity -- gpu-operator values do not."""
    managed = plan_for(tmp_path, stack="azure-managed")
    ident, variables = gates.driver_identity(managed.cluster, managed.components)
    assert ident["owner"] == "host" and variables == ()
    assert ident["gpuPools"] == [{"vmSize": "Standard_ND96isr_H100_v5", "gpuDriver": "Install"}]
    assert identity(plan_for(tmp_path, stack="azure-managed", k8s="1.35")) != identity(managed)
    assert identity(
        plan_for(
            tmp_path,
            stack="azure-managed",
            sets=["gpuoperator:dcgmExporter.serviceMonitor.interval=90s"],
        )
    ) == identity(managed)
    # flipping the owner (gpuStack) is a driver change
    assert identity(plan_for(tmp_path, stack="operator-managed")) != identity(managed)


SYSTEM = {"name": "system", "vmSize": "Standard_D8ds_v5", "nodeCount": 2}
GPU = {"name": "gpu", "vmSize": "Standard_ND96isr_H100_v5", "nodeCount": 1}


def test_a_gpu_pool_of_a_shape_already_there_keeps_the_identity(tmp_path):
    """docs/gates.md: the host-owned identity follows what replaces the node image (a pool's
    Kubernetes version, gpu_driver, VM size). A second GPU pool of a VM size the cluster has
    already does not change it (it did: the identity listed the pools by name, so every plugin pod
    on the existing nodes restarted); a pool of a new VM size does."""
    one = plan_for(tmp_path, stack="azure-managed", pools=[SYSTEM, GPU])
    two = plan_for(tmp_path, stack="azure-managed", pools=[SYSTEM, GPU, dict(GPU, name="gpub")])
    assert identity(two) == identity(one)
    renamed = plan_for(tmp_path, stack="azure-managed", pools=[SYSTEM, dict(GPU, name="gpuc")])
    assert identity(renamed) == identity(one)
    other = dict(GPU, name="gpub", vmSize="Standard_NC40ads_H100_v5")
    assert identity(
        plan_for(tmp_path, stack="azure-managed", pools=[SYSTEM, GPU, other])
    ) != identity(one)


def test_user_pod_annotations_are_kept(tmp_path):
    plan = plan_for(tmp_path, sets=["dradriver:kubeletPlugin.podAnnotations.team=gpu"])
    annotations = plan.components[DRA].values["kubeletPlugin"]["podAnnotations"]
    assert annotations["team"] == "gpu" and gates.DRIVER_IDENTITY_ANNOTATION in annotations


def test_without_variables_the_annotation_is_the_identitys_fingerprint(tmp_path):
    """No Terraform variable feeds the identity: the annotation is the fingerprint of
    :func:`gates.driver_identity` itself (a plain value, not a hash Terraform computes)."""
    from gpucluster.hashing import fingerprint

    plan = plan_for(tmp_path)
    got, variables = gates.driver_identity(plan.cluster, plan.components)
    assert not variables
    assert identity(plan) == fingerprint(got)
    assert gates.DRIVER_IDENTITY_PATH not in plan.components[DRA].variable_hashes

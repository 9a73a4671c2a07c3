"""Tests of the example plugin, written as a third party writes them.

They import only :mod:`gpucluster.sdk`, :mod:`gpucluster.sdk.testing`, pytest and the plugin
itself (``tests/test_plugin_sdk.py`` checks that), and run the real pipeline, stacks and CLI.
"""

from __future__ import annotations

import json

import gpucluster_example
import pytest

from gpucluster.sdk import GpuclusterError
from gpucluster.sdk.testing import registered

CLUSTER = {
    "name": "ex1",
    "criteria": {
        "service": "example-k8s",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
    },
    "existing": {"kubeconfig": "~/.kube/example.yaml", "context": "ex1"},
}
AKS_CLUSTER = {
    "name": "lab",
    "criteria": {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
}


@pytest.fixture
def kit():
    """The installed plugins (built-ins) plus this one, for one test."""
    with registered(gpucluster_example) as kit:
        yield kit


def test_the_platform_is_declared(kit):
    result = kit.cli("plugins", "--format", "json")
    assert result.code == 0, result.err
    (entry,) = [p for p in json.loads(result.out)["plugins"] if p["module"] == "gpucluster_example"]
    assert entry["platforms"] == [
        {"service": "example-k8s", "displayName": "Example Kubernetes", "provisionsCluster": False}
    ]
    assert entry["hooks"] == [
        "gpucluster_catalog_dirs",
        "gpucluster_gates",
        "gpucluster_platforms",
        "gpucluster_policy_checks",
        "gpucluster_prepare_cluster",
    ]


def test_the_plan_uses_the_catalog_gate_and_check(kit):
    plan = kit.plan(CLUSTER)
    assert plan.recipe.applied_overlays[-1] == "h100-example-k8s-ubuntu-training"
    assert plan.cluster.existing.kubeconfig_path == "~/.kube/example.yaml"
    # catalog: the manifest-only component, its values file and template
    comp = plan.components["example-gpu-priority"]
    assert comp.ref.type == "Manifest" and comp.ref.namespace == "example-system"
    assert comp.values["priorityClass"] == {
        "name": "gpu-training",
        "value": 100000,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    node = plan.node("example-gpu-priority-manifests")
    assert node.kind == "manifests" and node.depends_on == ["kai-scheduler"]
    (template,) = [v for k, v in node.local_chart.files.items() if k.startswith("templates/")]
    assert "kind: PriorityClass" in template and "value: 100000" in template
    # gate: dependents of gpu-operator wait for it instead of the chart
    assert [g.name for g in plan.gates] == ["example-clusterpolicy-ready"]
    assert plan.node("example-clusterpolicy-ready").depends_on == ["gpu-operator"]
    for dependent in ("kai-scheduler", "nvidia-dra-driver-gpu", "nvsentinel"):
        deps = plan.node(dependent).depends_on
        assert "example-clusterpolicy-ready" in deps and "gpu-operator" not in deps
    # no built-in platform plugin touched it
    assert not any(n.id.startswith(("network-operator", "gate-")) for n in plan.nodes)
    assert [f.id for f in plan.findings if f.id.startswith(("AKS", "NVKE", "OKE"))] == []


def test_prepare_fills_the_existing_cluster(kit):
    doc = {k: v for k, v in CLUSTER.items() if k != "existing"}
    spec = kit.cluster(doc)
    plan = kit.plan(spec)
    assert (plan.cluster.existing.kubeconfig_path, plan.cluster.existing.context) == (
        "~/.kube/config",
        None,
    )
    assert spec.existing is None  # the hook got a copy


def test_prepare_refuses_pools(kit):
    with pytest.raises(GpuclusterError) as exc:
        kit.plan(
            {**CLUSTER, "existing": None, "pools": [{"name": "gpu", "vmSize": "x", "nodeCount": 1}]}
        )
    (problem,) = exc.value.problems
    assert (problem.file, problem.cluster, problem.key) == (
        "clusters.yaml",
        "ex1",
        "clusters[0].pools",
    )
    assert "example-k8s clusters exist already" in problem.message


def test_the_policy_check_stops_the_plan(kit, tmp_path):
    path = tmp_path / "clusters.yaml"
    path.write_text(
        json.dumps(
            {"clusters": [{**CLUSTER, "overrides": {"set": ["gpuoperator:driver.enabled=false"]}}]}
        )
    )
    result = kit.cli("plan", "--config", str(path))
    assert result.code == 2 and result.out == ""
    assert (
        f"error[EXAMPLE-DRIVER] file={path} cluster=ex1 component=gpu-operator key=driver.enabled: driver.enabled is false, "
        "but example-k8s nodes come without a GPU driver: GPU nodes would stay driverless and advertise no nvidia.com/gpu "
        "fix: remove the gpuoperator:driver.enabled=false override"
    ) in result.err.splitlines()  # (core checks may add their own lines)
    assert "Traceback" not in result.err


def test_unknown_settings_are_refused(kit):
    with pytest.raises(GpuclusterError) as exc:
        kit.plan({**CLUSTER, "settings": {"driverless": True}})
    assert exc.value.problems[0].key == "clusters[0].settings.driverless"


def test_other_services_are_left_alone():
    with registered() as kit:
        without = kit.plan(AKS_CLUSTER)
    with registered(gpucluster_example) as kit:
        with_plugin = kit.plan(AKS_CLUSTER)
    assert with_plugin.edges() == without.edges()
    assert [g.name for g in with_plugin.gates] == [g.name for g in without.gates]


def test_without_the_plugin_the_service_is_unknown(gpucluster_kit):
    with pytest.raises(GpuclusterError, match="unknown service 'example-k8s'"):
        gpucluster_kit.plan(CLUSTER)
    gpucluster_kit.register(gpucluster_example)
    assert gpucluster_kit.plan(CLUSTER).gates


def test_synthesized_runtime_stack(kit, tmp_path):
    out = kit.synth({"clusters": [CLUSTER]}, tmp_path / "cdktf.out")
    assert out.stacks == ["ex1-runtime"]  # existing cluster: no ex1-cluster stack
    releases = out.releases("ex1-runtime")
    priority = releases["example-gpu-priority-manifests"]
    assert priority["namespace"] == "example-system" and priority["depends_on"] == [
        "helm_release.kai-scheduler"
    ]
    gate = releases["example-clusterpolicy-ready"]
    assert gate["depends_on"] == ["helm_release.gpu-operator"] and gate["wait_for_jobs"] is True
    assert "helm_release.example-clusterpolicy-ready" in releases["kai-scheduler"]["depends_on"]
    terraform = out.terraform("ex1-runtime")
    assert terraform["provider"]["helm"][0]["kubernetes"]["config_path"] == "${var.kubeconfig_path}"
    assert terraform["variable"]["kubeconfig_path"]["default"] == "~/.kube/example.yaml"

"""Every OKE recipe through the pipeline (the test kit's plan): releases, edges, gates, findings,
schema-valid rendered objects (manifest charts and gate charts), determinism, and the
OKE refusals with their messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from k8s_schema import validate_object
from render_cases import OKE as OKE_LEAVES
from test_schemas import checked_gate_conditions, rendered_objects, validate_training_runtime

from gpucluster.sdk import GpuclusterError
from gpucluster.sdk.testing import PluginKit, registered

LEAVES = OKE_LEAVES  # leaf -> (accelerator, os, intent, platform), one table (render_cases.OKE)
PROFILES = ("oci-managed", "operator-managed")
CASES = [(leaf, profile) for leaf in LEAVES for profile in PROFILES]

CP_GATE = "gpu-operator-clusterpolicy-ready"
NCP_GATE = "network-operator-nicclusterpolicy-ready"
DRA_GATE = "nvidia-dra-driver-gpu-kubelet-plugin-rollout"

COMMON_CHARTS = {
    "cert-manager",
    "nfd",
    "nodewright-operator",
    "prometheus-operator-crds",
    "kube-prometheus-stack",
    "gpu-operator",
    "k8s-ephemeral-storage-metrics",
    "kai-scheduler",
    "nvidia-dra-driver-gpu",
    "nvsentinel",
    "prometheus-adapter",
}


def cluster_doc(leaf: str, profile: str | None = None, **extra: Any) -> dict[str, Any]:
    acc, os_, intent, platform = LEAVES[leaf]
    criteria = {"service": "oke", "accelerator": acc, "os": os_, "intent": intent}
    if platform != "any":
        criteria["platform"] = platform
    doc: dict[str, Any] = {"name": "oke-a", "criteria": criteria, "kubernetesVersion": "1.34"}
    if profile:
        doc["profile"] = {"gpuStack": profile}
    doc.update(extra)
    return doc


KIT: PluginKit | None = None


@pytest.fixture(scope="module", autouse=True)
def _kit():
    """One plugin manager (the installed plugins) for the module's plans."""
    global KIT
    with registered() as KIT:
        yield
    KIT = None


def build(root: Path, leaf: str, profile: str | None = None, **extra: Any):
    if KIT is None:  # called from another test module: a plugin manager of its own
        with registered() as kit:
            (spec,) = kit.clusters(
                {"clusters": [cluster_doc(leaf, profile, **extra)]},
                source="clusters.yaml",
                root=root,
            )
            return kit.plan(spec)
    (spec,) = KIT.clusters(
        {"clusters": [cluster_doc(leaf, profile, **extra)]}, source="clusters.yaml", root=root
    )
    return KIT.plan(spec)


def refused(root: Path, leaf: str, profile: str | None = None, **extra: Any) -> str:
    with pytest.raises(GpuclusterError) as exc:
        build(root, leaf, profile, **extra)
    return str(exc.value)


@pytest.fixture(scope="module")
def plans(tmp_path_factory, _kit):
    root = tmp_path_factory.mktemp("oke")
    return {(leaf, profile): build(root, leaf, profile) for leaf, profile in CASES}


def expected_nodes(leaf: str) -> dict[str, str]:
    acc, _, intent, platform = LEAVES[leaf]
    nodes = {name: "chart" for name in COMMON_CHARTS}
    nodes.update({CP_GATE: "gate", DRA_GATE: "gate"})
    nodes.update(
        {"nfd-crds": "crds", "nvidia-dra-driver-gpu-crds": "crds"}
    )  # crds/-only owners (docs/upgrading.md)
    nodes["gpu-operator-teardown"] = (
        "teardown"  # deletes the ClusterPolicy while the operator runs (docs/upgrading.md)
    )
    if acc == "gb200" and intent == "training":
        nodes.update(
            {
                "network-operator": "chart",
                "network-operator-manifests": "manifests",
                NCP_GATE: "gate",
                "gpu-operator-pre": "pre-manifests",
                "network-operator-teardown": "teardown",
            }
        )
    if intent == "inference":
        nodes.update(
            {
                "agentgateway-crds": "chart",
                "agentgateway": "chart",
                "agentgateway-crds-manifests": "manifests",
                "agentgateway-manifests": "manifests",
                "agentgateway-crds-gateways-established": "gate",
                "agentgateway-crds-agentgatewayparameters-established": "gate",
            }
        )
    if platform == "kubeflow":
        nodes.update(
            {
                "kubeflow-trainer": "chart",
                "kubeflow-trainer-manifests": "manifests",
                "kubeflow-trainer-crds": "crds",
                "kubeflow-trainer-teardown": "teardown",
            }
        )
    if platform == "dynamo":
        nodes.update({"grove": "chart", "dynamo-platform": "chart"})
    return nodes


# --------------------------------------------------------------------------- releases and edges


@pytest.mark.parametrize("leaf, profile", CASES)
def test_releases(plans, leaf, profile):
    plan = plans[(leaf, profile)]
    assert plan.recipe.applied_overlays[-1] == leaf
    assert plan.recipe.profile == ("gpuStack", profile)
    assert {n.id: n.kind for n in plan.nodes} == expected_nodes(leaf)
    assert (
        plan.cluster.existing.kubeconfig_path == "~/.kube/config"
        and plan.cluster.existing.context is None
    )
    assert plan.cluster.pools == [] and plan.cluster.region is None
    for node in plan.nodes:
        if node.kind == "chart":
            assert node.values == KIT.chart_values(plan, node.component)  # manifestValues stay out
            assert node.namespace == plan.components[node.component].ref.namespace


@pytest.mark.parametrize("leaf, profile", CASES)
def test_gpu_consumers_wait_for_the_clusterpolicy(plans, leaf, profile):
    plan = plans[(leaf, profile)]
    assert plan.node(CP_GATE).depends_on == ["gpu-operator"]
    for consumer in (
        "nvidia-dra-driver-gpu",
        "kai-scheduler",
        "nvsentinel",
        "kubeflow-trainer",
        "dynamo-platform",
    ):
        if consumer in {n.id for n in plan.nodes}:
            assert CP_GATE in plan.node(consumer).depends_on, consumer
            assert "gpu-operator" not in plan.node(consumer).depends_on, (
                consumer
            )  # the gate is the ready handle
    assert plan.node(DRA_GATE).depends_on == ["nvidia-dra-driver-gpu"]


def test_gb200_training_edges(plans):
    plan = plans[("gb200-oke-ubuntu-training-kubeflow", "oci-managed")]
    assert plan.node("network-operator").depends_on == ["cert-manager", "nfd"]
    assert plan.node("network-operator-manifests").depends_on == [
        "cert-manager",
        "network-operator",
        "nfd",
    ]
    assert plan.node(NCP_GATE).depends_on == ["network-operator-manifests"]
    assert plan.node("gpu-operator-pre").depends_on == [
        "cert-manager",
        "kube-prometheus-stack",
        NCP_GATE,
        "nfd",
    ]
    assert plan.node("gpu-operator").depends_on == [
        "cert-manager",
        "gpu-operator-pre",
        "kube-prometheus-stack",
        NCP_GATE,
        "nfd",
    ]
    assert plan.node("kubeflow-trainer").depends_on == [
        "cert-manager",
        CP_GATE,
        "kube-prometheus-stack",
        "kubeflow-trainer-crds",
    ]
    assert plan.node("kubeflow-trainer-crds").depends_on == [
        "cert-manager",
        CP_GATE,
        "kube-prometheus-stack",
    ]
    assert plan.node("kubeflow-trainer-manifests").depends_on == [
        "cert-manager",
        CP_GATE,
        "kube-prometheus-stack",
        "kubeflow-trainer",
    ]
    assert plan.node("nvsentinel").depends_on == [
        "cert-manager",
        CP_GATE,
        "prometheus-operator-crds",
    ]


def test_inference_edges(plans):
    plan = plans[("gb200-oke-ubuntu-inference-dynamo", "oci-managed")]
    assert plan.node("gpu-operator").depends_on == ["cert-manager", "kube-prometheus-stack", "nfd"]
    assert plan.node("dynamo-platform").depends_on == [
        "cert-manager",
        CP_GATE,
        "grove",
        "kai-scheduler",
        "kube-prometheus-stack",
    ]
    established = [
        "agentgateway-crds-agentgatewayparameters-established",
        "agentgateway-crds-gateways-established",
    ]
    assert plan.node("agentgateway").depends_on == [
        *established,
        "cert-manager",
    ]  # after the CRDs are Established
    assert plan.node("agentgateway-manifests").depends_on == [
        "agentgateway",
        *established,
        "cert-manager",
    ]
    for gate in established:
        assert plan.node(gate).depends_on == ["agentgateway-crds-manifests"]


# --------------------------------------------------------------------------- gates


@pytest.mark.parametrize("leaf, profile", CASES)
def test_gate_specs(plans, leaf, profile):
    plan = plans[(leaf, profile)]
    gates = {g.name: g for g in plan.gates}
    with_fabric = "network-operator" in plan.components
    inference = {
        "agentgateway-crds-gateways-established",
        "agentgateway-crds-agentgatewayparameters-established",
    }
    assert set(gates) == {CP_GATE, DRA_GATE} | ({NCP_GATE} if with_fabric else set()) | (
        inference if "inference" in leaf else set()
    )
    cp = gates[CP_GATE]
    assert (
        cp.kind,
        cp.api_version,
        cp.resource,
        cp.kind_name,
        cp.name_of_object,
        cp.jsonpath,
        cp.value,
        cp.timeout_seconds,
    ) == (
        "resource-condition",
        "nvidia.com/v1",
        "clusterpolicies",
        "ClusterPolicy",
        "cluster-policy",
        "{.status.state}",
        "ready",
        1800,
    )
    assert cp.before is None
    dra = gates[DRA_GATE]
    assert (dra.kind, dra.kind_name, dra.name_of_object, dra.namespace, dra.min_ready) == (
        "rollout",
        "DaemonSet",
        "nvidia-dra-driver-gpu-kubelet-plugin",
        "nvidia-dra-driver",
        1,
    )
    if with_fabric:
        ncp = gates[NCP_GATE]
        assert (
            ncp.kind,
            ncp.api_version,
            ncp.resource,
            ncp.kind_name,
            ncp.name_of_object,
            ncp.jsonpath,
            ncp.value,
        ) == (
            "resource-condition",
            "mellanox.com/v1alpha1",
            "nicclusterpolicies",
            "NicClusterPolicy",
            None,
            "{.status.state}",
            "ready",
        )
        assert ncp.before == ["gpu-operator"]


def test_gate_charts_wait_on_the_right_objects(plans):
    plan = plans[("gb200-oke-ubuntu-training", "oci-managed")]
    cp = "\n".join(plan.node(CP_GATE).local_chart.files.values())
    assert "clusterpolicies" in cp and "cluster-policy" in cp
    ncp = "\n".join(plan.node(NCP_GATE).local_chart.files.values())
    assert "nicclusterpolicies" in ncp
    dra = "\n".join(plan.node(DRA_GATE).local_chart.files.values())
    assert "nvidia-dra-driver-gpu-kubelet-plugin" in dra and "nvidia-dra-driver" in dra
    assert plan.node(CP_GATE).wait_for_jobs and plan.node(CP_GATE).timeout_seconds > 1800


def test_gate_conditions_name_real_crd_status_fields(plans):
    assert checked_gate_conditions(plans) == {CP_GATE, NCP_GATE}


def test_network_operator_disabled_drops_its_gate_and_the_edge(tmp_path):
    plan = build(
        tmp_path, "gb200-oke-ubuntu-training", overrides={"set": ["networkoperator:enabled=false"]}
    )
    assert NCP_GATE not in {n.id for n in plan.nodes}
    assert NCP_GATE not in plan.node("gpu-operator").depends_on
    assert "network-operator" not in plan.components


# --------------------------------------------------------------------------- rendered objects


@pytest.mark.parametrize("leaf, profile", CASES)
def test_every_rendered_object_validates(plans, leaf, profile):
    objects = rendered_objects(plans[(leaf, profile)])
    used = {}
    for release, _, doc in objects:
        if doc["kind"] == "ClusterTrainingRuntime":
            validate_training_runtime(doc)
            used[(release, doc["kind"])] = "shape + batch/v1 Job template"
        else:
            used[(release, doc["kind"])] = validate_object(doc)
    assert used[(CP_GATE, "Job")] == "kubernetes 1.34"
    assert used[(DRA_GATE, "Job")] == "kubernetes 1.34"
    if "network-operator" in plans[(leaf, profile)].components:
        assert (
            used[("network-operator-manifests", "NicClusterPolicy")]
            == "crd mellanox.com/mellanox.com_nicclusterpolicies.yaml"
        )
        assert used[("gpu-operator-pre", "ConfigMap")] == "kubernetes 1.34"
        assert used[(NCP_GATE, "Job")] == "kubernetes 1.34"


@pytest.mark.parametrize("leaf, profile", CASES)
def test_manifest_objects_per_recipe(plans, leaf, profile):
    found = {
        (release, doc["kind"], doc["metadata"]["name"])
        for release, _, doc in rendered_objects(plans[(leaf, profile)])
    }
    manifests = {k for k in found if k[0].endswith("-manifests") or k[0].endswith("-pre")}
    expected = set()
    if "network-operator" in plans[(leaf, profile)].components:
        expected |= {
            ("network-operator-manifests", "NicClusterPolicy", "nic-cluster-policy"),
            ("gpu-operator-pre", "ConfigMap", "nvidia-kernel-module-params"),
        }
    if leaf.endswith("-kubeflow"):
        expected.add(("kubeflow-trainer-manifests", "ClusterTrainingRuntime", "torch-distributed"))
    if "inference" in leaf:  # the agentgateway inference gateway and its CRD manifests
        expected |= {
            ("agentgateway-manifests", "AgentgatewayParameters", "system-proxy"),
            ("agentgateway-manifests", "Gateway", "inference-gateway"),
        }
        expected |= {
            k
            for k in found
            if k[0] == "agentgateway-crds-manifests" and k[1] == "CustomResourceDefinition"
        }
        assert len([k for k in found if k[0] == "agentgateway-crds-manifests"]) == 10
    assert manifests == expected


def test_nic_cluster_policy(plans):
    objects = rendered_objects(plans[("gb200-oke-ubuntu-training", "operator-managed")])
    (ncp,) = [doc for _, _, doc in objects if doc["kind"] == "NicClusterPolicy"]
    spec = ncp["spec"]
    assert set(spec) == {
        "rdmaSharedDevicePlugin",
        "deploymentTolerations",
        "tolerations",
    }  # no ofedDriver: host MOFED
    plugin = spec["rdmaSharedDevicePlugin"]
    assert (plugin["repository"], plugin["image"], plugin["version"]) == (
        "nvcr.io/nvidia/mellanox",
        "k8s-rdma-shared-dev-plugin",
        "network-operator-v26.4.1",
    )
    import json

    (entry,) = json.loads(plugin["config"])["configList"]
    assert entry == {
        "resourcePrefix": "nvidia.com",
        "resourceName": "mlnxnics",
        "rdmaHcaMax": 63,
        "selectors": {"linkTypes": ["infiniband"], "ifNames": ["rdma0", "rdma1", "rdma2", "rdma3"]},
    }
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in spec["tolerations"]
    assert "namespace" not in ncp["metadata"]


def test_kernel_module_params_configmap(plans):
    plan = plans[("gb200-oke-ubuntu-training", "operator-managed")]
    objects = [doc for release, _, doc in rendered_objects(plan) if release == "gpu-operator-pre"]
    (cm,) = objects
    assert cm["metadata"] == {
        "name": "nvidia-kernel-module-params",
        "namespace": "gpu-operator",
        "labels": {"app.kubernetes.io/part-of": "gpucluster"},
    }
    assert cm["data"] == {"nvidia.conf": "options nvidia NVreg_GrdmaPciTopoCheckOverride=1\n"}
    assert (
        plan.components["gpu-operator"].values["driver"]["kernelModuleConfig"]["name"]
        == cm["metadata"]["name"]
    )


def test_kernel_module_params_follow_the_configured_name(tmp_path):
    plan = build(
        tmp_path,
        "gb200-oke-ubuntu-training",
        "operator-managed",
        overrides={"set": ["gpuoperator:driver.kernelModuleConfig.name=grdma-params"]},
    )
    (cm,) = [doc for release, _, doc in rendered_objects(plan) if release == "gpu-operator-pre"]
    assert cm["metadata"]["name"] == "grdma-params"
    unset = build(
        tmp_path,
        "gb200-oke-ubuntu-training",
        "operator-managed",
        overrides={"set": ["gpuoperator:driver.kernelModuleConfig=null"]},
    )
    assert "gpu-operator-pre" not in {n.id for n in unset.nodes}


# --------------------------------------------------------------------------- findings and determinism


@pytest.mark.parametrize("leaf, profile", CASES)
def test_findings(plans, leaf, profile):
    plan = plans[(leaf, profile)]
    ids = [f.id for f in plan.findings]
    acc, _, intent, _ = LEAVES[leaf]
    if acc == "gb200" and intent == "training" and profile == "oci-managed":
        assert ids == ["OKE-KERNEL-MODULE-PARAMS"]
        (finding,) = plan.findings
        assert finding.severity == "warning" and finding.component == "gpu-operator"
        assert (
            "NVreg_GrdmaPciTopoCheckOverride=1" in finding.message
            and "nvidia-kernel-module-params" in finding.message
        )
    else:
        assert ids == []


def _gb200_training_leaf() -> str:
    return next(
        leaf
        for leaf, (acc, _, intent, platform) in LEAVES.items()
        if acc == "gb200" and intent == "training" and platform == "any"
    )


def test_a_stated_image_driver_parameter_turns_the_kernel_module_warning_into_info(tmp_path):
    """``settings.imageDriverParams`` states what the image's driver loads with (gpucluster cannot
    read a node's module parameters): with the RDMA parameter stated the finding is ``info``; a
    list without it keeps the warning."""
    leaf = _gb200_training_leaf()
    stated = build(
        tmp_path,
        leaf,
        "oci-managed",
        settings={"imageDriverParams": ["NVreg_GrdmaPciTopoCheckOverride=1"]},
    )
    (finding,) = stated.findings
    assert (finding.id, finding.severity) == ("OKE-KERNEL-MODULE-PARAMS", "info")
    assert "settings.imageDriverParams" in finding.message
    other = build(
        tmp_path, leaf, "oci-managed", settings={"imageDriverParams": ["NVreg_EnableGpuFirmware=0"]}
    )
    assert [(f.id, f.severity) for f in other.findings] == [("OKE-KERNEL-MODULE-PARAMS", "warning")]
    assert (
        "settings.imageDriverParams: [NVreg_GrdmaPciTopoCheckOverride=1]" in other.findings[0].fix
    )


@pytest.mark.parametrize(
    "value", ["NVreg_GrdmaPciTopoCheckOverride", "GrdmaPciTopoCheckOverride=1", "x=1; rm -rf /", 1]
)
def test_image_driver_params_that_are_not_module_parameters_are_refused(tmp_path, value):
    message = refused(
        tmp_path, _gb200_training_leaf(), "oci-managed", settings={"imageDriverParams": [value]}
    )
    assert "settings.imageDriverParams" in message and "NVreg_<Name>=<value>" in message


def test_deterministic(tmp_path, plans):
    again = build(tmp_path, "gb200-oke-ubuntu-training-kubeflow", "oci-managed")
    first = plans[("gb200-oke-ubuntu-training-kubeflow", "oci-managed")]

    def key(p):
        return [
            (n.id, n.depends_on, n.values, n.local_chart and n.local_chart.content_hash)
            for n in p.nodes
        ]

    assert key(again) == key(first)


def test_runtime_only(plans):
    assert KIT.platforms()["oke"].provisions_cluster is False


# --------------------------------------------------------------------------- refusals through the pipeline


def test_refuses_pools(tmp_path):
    text = refused(
        tmp_path,
        "gb200-oke-ubuntu-training",
        pools=[{"name": "gpu", "vmSize": "BM.GPU.GB200.4", "nodeCount": 2}],
    )
    assert "file=clusters.yaml cluster=oke-a key=clusters[0].pools" in text
    assert (
        "OKE clusters exist already; gpucluster does not create node pools for them (1 given: gpu)"
        in text
    )


def test_refuses_a_relative_kubeconfig(tmp_path):
    text = refused(tmp_path, "a100-oke-ubuntu-training", existing={"kubeconfig": "kube/oke.yaml"})
    assert (
        "key=clusters[0].existing.kubeconfig" in text
        and "'kube/oke.yaml' is a relative path" in text
    )
    assert "allowed: an absolute path or one starting with ~/" in text


def test_existing_kubeconfig_and_context_pass_through(tmp_path):
    plan = build(
        tmp_path,
        "a100-oke-ubuntu-training",
        existing={"kubeconfig": "/etc/oke/kubeconfig", "context": "oke-prod"},
    )
    assert (plan.cluster.existing.kubeconfig_path, plan.cluster.existing.context) == (
        "/etc/oke/kubeconfig",
        "oke-prod",
    )


@pytest.mark.parametrize("version, severity", [("1.33", "error"), ("1.31", "error")])
def test_kubernetes_floor_of_gb200_training(tmp_path, version, severity):
    text = refused(tmp_path, "gb200-oke-ubuntu-training", kubernetesVersion=version)
    assert "error[OKE-K8S-VERSION]" in text and "key=clusters[0].kubernetesVersion" in text
    assert (
        f"runs Kubernetes {version} but gb200-oke-ubuntu-training needs K8s.server.version >= 1.34"
        in text
    )
    assert "resource.k8s.io/v1" in text


def test_kubernetes_patch_floor_is_a_warning(tmp_path):
    plan = build(tmp_path, "gb200-oke-ubuntu-inference", kubernetesVersion="1.32")
    (finding,) = [f for f in plan.findings if f.id == "OKE-K8S-VERSION"]
    assert finding.severity == "warning" and ">= 1.32.4" in finding.message
    text = refused(tmp_path, "gb200-oke-ubuntu-inference", kubernetesVersion="1.31")
    assert "error[OKE-K8S-VERSION]" in text and "needs K8s.server.version >= 1.32.4" in text
    assert build(tmp_path, "a100-oke-training", kubernetesVersion="1.30").findings == []


@pytest.mark.parametrize(
    "state, profile, needed",
    [
        ("installed", "operator-managed", "oci-managed"),
        ("absent", "oci-managed", "operator-managed"),
    ],
)
def test_gpu_plugin_addon_must_match_gpu_stack(tmp_path, state, profile, needed):
    text = refused(
        tmp_path, "a100-oke-ubuntu-training", profile, settings={"nvidiaGpuPluginAddon": state}
    )
    assert (
        "error[OKE-GPU-PLUGIN-ADDON]" in text
        and "key=clusters[0].settings.nvidiaGpuPluginAddon" in text
    )
    assert f"the NvidiaGpuPlugin add-on is {state} but the gpuStack profile is '{profile}'" in text
    assert f"set profile gpuStack: {needed}" in text
    ok = build(
        tmp_path, "a100-oke-ubuntu-training", needed, settings={"nvidiaGpuPluginAddon": state}
    )
    assert ok.findings == []


def test_external_advertiser_refuses_the_operator_device_plugin(tmp_path):
    text = refused(
        tmp_path,
        "gb200-oke-ubuntu-inference",
        overrides={"set": ["gpuoperator:devicePlugin.enabled=true"]},
    )
    assert (
        "error[GPU-ADVERTISER]" in text
        and "component=gpu-operator key=devicePlugin.enabled" in text
    )
    assert (
        "gpuStack=oci-managed declares that a platform add-on outside the recipe advertises whole GPUs"
        in text
    )
    assert "error[PROFILE-OWNED]" in text  # the key is also owned by the profile


def test_external_advertiser_refuses_dra_gpu_advertisement(tmp_path):
    text = refused(
        tmp_path,
        "gb200-oke-ubuntu-inference",
        overrides={
            "set": [
                "dradriver:resources.gpus.enabled=true",
                "dradriver:gpuResourcesEnabledOverride=true",
            ]
        },
    )
    assert (
        "error[GPU-ADVERTISER]" in text
        and "component=nvidia-dra-driver-gpu key=resources.gpus.enabled" in text
    )
    assert "the DRA driver's resources.gpus.enabled=true advertises them too" in text


def test_operator_managed_without_a_device_plugin_has_no_advertiser(tmp_path):
    text = refused(
        tmp_path,
        "a100-oke-ubuntu-training",
        "operator-managed",
        overrides={"set": ["gpuoperator:devicePlugin.enabled=false"]},
    )
    assert "error[GPU-ADVERTISER]" in text and "no whole-GPU advertiser" in text


@pytest.mark.parametrize("path", ["controller.affinity.nodeAffinity", "controller.affinity"])
def test_dra_controller_affinity_check(tmp_path, path):
    # a `set` to null deletes the key from the values, so the chart default (control-plane) returns
    text = refused(
        tmp_path, "a100-oke-ubuntu-training", overrides={"set": [f"dradriver:{path}=null"]}
    )
    assert "error[OKE-DRA-CONTROLLER-AFFINITY]" in text
    assert "component=nvidia-dra-driver-gpu key=controller.affinity.nodeAffinity" in text
    assert "control-plane" in text and "Pending" in text
    own = build(
        tmp_path,
        "a100-oke-ubuntu-training",
        overrides={
            "values": [
                {
                    "component": "dradriver",
                    "values": {
                        "controller": {
                            "affinity": {
                                "nodeAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": {
                                        "nodeSelectorTerms": [
                                            {
                                                "matchExpressions": [
                                                    {
                                                        "key": "pool",
                                                        "operator": "In",
                                                        "values": ["system"],
                                                    }
                                                ]
                                            }
                                        ]
                                    }
                                }
                            }
                        }
                    },
                }
            ]
        },
    )
    assert own.findings == []


def test_other_platforms_get_nothing_from_the_oke_plugin():
    """The plugin manager scopes OKE's cluster hooks to OKE clusters (no per-hook service check)."""
    aks = KIT.load()[0]
    assert aks.criteria.service == "aks"
    assert [
        plugin
        for plugin, _ in KIT.call_hook("gpucluster_gates", cluster=aks, recipe=None, components={})
    ] == ["aks"]
    ((plugin, _),) = KIT.call_hook("gpucluster_prepare_cluster", cluster=aks)
    assert plugin == "aks"

"""Both NVKE recipes through the pipeline (the test kit's plan): releases, values, manifests
(schema-valid), gates, edges, teardown, and every NVKE refusal with its message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support import ancestors
from nvke_crds import validate

from gpucluster.sdk import GpuclusterError
from gpucluster.sdk.testing import PluginKit, registered

KIT: PluginKit | None = None


@pytest.fixture(scope="module", autouse=True)
def _kit():
    """One plugin manager (the installed plugins) for the module's plans."""
    global KIT
    with registered() as KIT:
        yield
    KIT = None


RAILS = [
    {"name": "mlx5_0", "rootDevice": "0000:03:00.0"},
    {"name": "mlx5_1", "rootDevice": "0002:03:00.0"},
    {"name": "mlx5_3", "rootDevice": "0010:03:00.0"},
    {"name": "mlx5_4", "rootDevice": "0012:03:00.0"},
]
CP = {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}
NET_GATES = [
    "network-operator-ippool-crd",
    "network-operator-multus-rollout",
    "network-operator-nicclusterpolicy-ready",
]
DRA_GATE = "nvidia-dra-driver-gpu-kubelet-plugin-version"


def cluster_doc(platform: str = "any", **extra: Any) -> dict[str, Any]:
    criteria = {"service": "nvke", "accelerator": "gb200", "os": "ubuntu", "intent": "training"}
    if platform != "any":
        criteria["platform"] = platform
    doc: dict[str, Any] = {
        "name": "nvke-a",
        "criteria": criteria,
        "kubernetesVersion": "1.34",
        "settings": {"rails": RAILS},
    }
    for key, value in extra.items():
        if key == "settings":
            doc["settings"] = {**doc["settings"], **value}
        else:
            doc[key] = value
    return doc


def build(tmp_path: Path, platform: str = "any", **extra: Any):
    if KIT is None:  # called from another test module: a plugin manager of its own
        with registered() as kit:
            (spec,) = kit.clusters(
                {"clusters": [cluster_doc(platform, **extra)]},
                source="clusters.yaml",
                root=tmp_path,
            )
            return kit.plan(spec)
    (spec,) = KIT.clusters(
        {"clusters": [cluster_doc(platform, **extra)]}, source="clusters.yaml", root=tmp_path
    )
    return KIT.plan(spec)


def refused(tmp_path: Path, platform: str = "any", **extra: Any) -> str:
    with pytest.raises(GpuclusterError) as exc:
        build(tmp_path, platform, **extra)
    return str(exc.value)


def chart_docs(plan, node_id: str) -> list[dict[str, Any]]:
    chart = plan.node(node_id).local_chart
    docs = []
    for path, text in sorted(chart.files.items()):
        if path.startswith("templates/"):
            docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    root = tmp_path_factory.mktemp("nvke")
    return {p: build(root, p) for p in ("any", "kubeflow")}


# --------------------------------------------------------------------------- recipes and releases


def test_recipes_resolve(plans):
    assert plans["any"].recipe.applied_overlays[-2:] == ["nvke", "gb200-nvke-ubuntu-training"]
    assert plans["kubeflow"].recipe.applied_overlays[-1] == "gb200-nvke-ubuntu-training-kubeflow"
    names = {r.name for r in plans["kubeflow"].recipe.component_refs}
    assert {"kubeflow-trainer", "sriov-ib-networks", "rdma-modules", "network-operator"} <= names
    assert "kubeflow-trainer" not in {r.name for r in plans["any"].recipe.component_refs}
    assert {c.name: c.value for c in plans["any"].recipe.constraints}[
        "K8s.server.version"
    ] == ">= 1.34"


def test_existing_cluster_and_no_findings(plans):
    for plan in plans.values():
        assert plan.cluster.existing.kubeconfig_path == "~/.kube/config"
        assert plan.cluster.pools == []
        assert [f for f in plan.findings if f.id.startswith("NVKE")] == []


@pytest.mark.parametrize("platform", ["any", "kubeflow"])
def test_releases(plans, platform):
    ids = {n.id: n.kind for n in plans[platform].nodes}
    expected = {
        "network-operator": "chart",
        "network-operator-manifests": "manifests",
        "gpu-operator-pre": "pre-manifests",
        "gpu-operator": "chart",
        "nvidia-dra-driver-gpu": "chart",
        "sriov-ib-networks-manifests": "manifests",
        "rdma-modules-manifests": "manifests",
        DRA_GATE: "gate",
        **{g: "gate" for g in NET_GATES},
    }
    if platform == "kubeflow":
        expected["kubeflow-trainer"] = "chart"
    for node_id, kind in expected.items():
        assert ids.get(node_id) == kind, node_id
    assert "sriov-ib-networks" not in ids and "rdma-modules" not in ids  # manifest-only


# --------------------------------------------------------------------------- values


def test_gpu_operator_values(plans):
    v = plans["any"].components["gpu-operator"].values
    assert (
        v["driver"]["enabled"] is True
        and v["toolkit"]["enabled"] is True
        and v["gdrcopy"]["enabled"] is True
    )
    env = {e["name"]: e["value"] for e in v["toolkit"]["env"]}
    assert env == {
        "RUNTIME_CONFIG_SOURCE": "file",
        "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED": "false",
    }
    assert "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS" not in env
    assert "rdma" not in v["driver"]
    assert v["driver"]["kernelModuleConfig"]["name"] == "kernel-module-params"
    assert plans["any"].node("gpu-operator").values == v


def test_kernel_module_params_configmap_is_a_pre_manifest(plans):
    plan = plans["any"]
    (cm,) = chart_docs(plan, "gpu-operator-pre")
    validate(cm)
    assert cm["kind"] == "ConfigMap"
    assert (
        cm["metadata"]["name"]
        == plan.components["gpu-operator"].values["driver"]["kernelModuleConfig"]["name"]
    )
    assert cm["metadata"]["namespace"] == plan.node("gpu-operator").namespace == "gpu-operator"
    assert "NVreg_GrdmaPciTopoCheckOverride=1" in cm["data"]["nvidia.conf"]
    assert "gpu-operator-pre" in plan.node("gpu-operator").depends_on


def test_dra_values_and_pin(plans):
    comp = plans["any"].components["nvidia-dra-driver-gpu"]
    assert comp.ref.version == "0.5.1"
    assert plans["any"].node("nvidia-dra-driver-gpu").version == "0.5.1"
    v = comp.values
    assert v["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert v["resources"]["computeDomains"]["enabled"] is True
    terms = v["kubeletPlugin"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert len(terms) == 5
    for term in terms:  # nodeSelectorTerms are ORed: every term must exclude the control plane
        assert CP in term["matchExpressions"], term


def test_network_operator_values(plans):
    v = plans["any"].components["network-operator"].values
    assert "ofedDriver" not in json.dumps(v)
    assert not {"deployCR", "nvIpam", "secondaryNetwork", "nicClusterPolicy"} & set(
        v
    )  # keys chart 26.4.1 does not read
    assert (
        v["sriovNetworkOperator"]["enabled"] is True and v["maintenanceOperator"]["enabled"] is True
    )
    cfg = v["sriov-network-operator"]["sriovOperatorConfig"]
    assert cfg["disablePlugins"] == ["mellanox"]
    assert cfg["configDaemonNodeSelector"] == {"feature.node.kubernetes.io/rdma.available": "true"}
    assert v["sriov-network-operator"]["operator"]["externalDrainer"]["enabled"] is True
    assert v["maintenance-operator-chart"]["operatorConfig"]["maxParallelOperations"] == "1"


# --------------------------------------------------------------------------- manifests


@pytest.mark.parametrize(
    "node_id",
    [
        "network-operator-manifests",
        "sriov-ib-networks-manifests",
        "rdma-modules-manifests",
        "gpu-operator-pre",
    ],
)
def test_manifests_are_schema_valid(plans, node_id):
    docs = chart_docs(plans["kubeflow"], node_id)
    assert docs
    for doc in docs:
        validate(doc)


def test_nic_cluster_policy_manifest(plans):
    (ncp,) = chart_docs(plans["any"], "network-operator-manifests")
    assert ncp["kind"] == "NicClusterPolicy"
    spec = ncp["spec"]
    assert "ofedDriver" not in spec
    assert set(spec) >= {"nvIpam", "secondaryNetwork"}
    assert set(spec["secondaryNetwork"]) == {"multus", "cniPlugins"}
    assert spec["nvIpam"]["version"] == "network-operator-v26.4.1"
    # the multus DaemonSet (gated below) takes this affinity: no control-plane node
    for term in spec["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]:
        assert CP in term["matchExpressions"]


def test_rail_manifests(plans):
    docs = chart_docs(plans["any"], "sriov-ib-networks-manifests")
    kinds = [d["kind"] for d in docs]
    assert (
        kinds.count("IPPool")
        == kinds.count("SriovNetworkNodePolicy")
        == kinds.count("SriovIBNetwork")
        == 4
    )
    pools = {d["metadata"]["name"]: d["spec"]["subnet"] for d in docs if d["kind"] == "IPPool"}
    assert sorted(pools.values()) == sorted(
        ["10.255.0.0/22", "10.255.4.0/22", "10.255.8.0/22", "10.255.12.0/22"]
    )
    nets = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "SriovIBNetwork"}
    assert sorted(nets) == [f"sriov-network-rail-{n}" for n in range(4)]
    assert {s["networkNamespace"] for s in nets.values()} == {"default"}
    for pol in (d for d in docs if d["kind"] == "SriovNetworkNodePolicy"):
        assert (
            pol["spec"]["numVfs"] == 16
            and pol["spec"]["linkType"] == "IB"
            and pol["spec"]["isRdma"] is True
        )
        assert pol["spec"]["nodeSelector"] == {"feature.node.kubernetes.io/rdma.available": "true"}
    assert "pci-15b3" not in json.dumps(
        [d for d in docs if d["kind"] in ("IPPool", "SriovNetworkNodePolicy")]
    )
    hooks = [
        d
        for d in docs
        if (d["metadata"].get("annotations") or {}).get("helm.sh/hook") == "post-delete"
    ]
    assert sorted(d["kind"] for d in hooks) == ["Job", "Role", "RoleBinding", "ServiceAccount"]


def test_rdma_modules_manifest(plans):
    (nw,) = chart_docs(plans["any"], "rdma-modules-manifests")
    assert nw["kind"] == "NodeWright" and nw["apiVersion"] == "nodewright.nvidia.com/v1alpha1"
    assert nw["spec"]["runtimeRequired"] is True and nw["spec"]["autoTaintNewNodes"] is True
    assert nw["spec"]["nodeSelectors"]["matchLabels"] == {
        "feature.node.kubernetes.io/pci-15b3.present": "true"
    }
    assert nw["spec"]["nodeSelectors"]["matchExpressions"] == [CP]
    assert plans["any"].node("rdma-modules-manifests").depends_on == ["nodewright-operator"]


# --------------------------------------------------------------------------- gates and edges


def test_gate_specs(plans):
    gates = {g.name: g for g in plans["kubeflow"].gates}
    crd = gates["network-operator-ippool-crd"]
    assert (crd.kind, crd.name_of_object, crd.create_timeout_seconds, crd.timeout_seconds) == (
        "crd-established",
        "ippools.nv-ipam.nvidia.com",
        600,
        120,
    )
    ncp = gates["network-operator-nicclusterpolicy-ready"]
    assert (ncp.kind, ncp.kind_name, ncp.jsonpath, ncp.value, ncp.name_of_object) == (
        "resource-condition",
        "NicClusterPolicy",
        "{.status.state}",
        "ready",
        None,
    )
    multus = gates["network-operator-multus-rollout"]
    assert (multus.kind, multus.kind_name, multus.name_of_object, multus.namespace) == (
        "rollout",
        "DaemonSet",
        "kube-multus-ds",
        "nvidia-network-operator",
    )
    dra = gates[DRA_GATE]
    assert (
        dra.kind,
        dra.kind_name,
        dra.name_of_object,
        dra.container,
        dra.value,
        dra.namespace,
    ) == (
        "min-version",
        "DaemonSet",
        "nvidia-dra-driver-gpu-kubelet-plugin",
        "compute-domains",
        "0.5.1",
        "nvidia-dra-driver",
    )


def test_network_operator_gate_order_and_sriov_edge(plans):
    plan = plans["any"]
    assert "network-operator-manifests" in plan.node("network-operator-ippool-crd").depends_on
    assert (
        "network-operator-ippool-crd"
        in plan.node("network-operator-nicclusterpolicy-ready").depends_on
    )
    assert (
        "network-operator-nicclusterpolicy-ready"
        in plan.node("network-operator-multus-rollout").depends_on
    )
    assert plan.node("sriov-ib-networks-manifests").depends_on == NET_GATES
    # terraform destroys dependents first: sriov-ib-networks goes before network-operator
    assert {"network-operator", "network-operator-manifests"} <= ancestors(
        plan, "sriov-ib-networks-manifests"
    )
    assert "sriov-ib-networks-manifests" not in ancestors(plan, "network-operator")


def test_dra_gate_before_compute_domain_workloads(plans):
    kf = plans["kubeflow"]
    assert DRA_GATE in kf.node("kubeflow-trainer").depends_on
    assert kf.node(DRA_GATE).depends_on == ["nvidia-dra-driver-gpu"]
    plain = plans["any"]
    assert not any(DRA_GATE in n.depends_on for n in plain.nodes if n.id != DRA_GATE)
    assert plain.node(DRA_GATE).timeout_seconds > 600


def test_gate_charts_wait_on_the_right_objects(plans):
    plan = plans["kubeflow"]
    multus = "\n".join(plan.node("network-operator-multus-rollout").local_chart.files.values())
    assert "kube-multus-ds" in multus and "nvidia-network-operator" in multus
    dra = "\n".join(plan.node(DRA_GATE).local_chart.files.values())
    assert (
        "nvidia-dra-driver-gpu-kubelet-plugin" in dra
        and "0.5.1" in dra
        and "compute-domains" in dra
    )
    crd = "\n".join(plan.node("network-operator-ippool-crd").local_chart.files.values())
    assert "ippools.nv-ipam.nvidia.com" in crd and "Established" in crd


def test_deterministic(tmp_path, plans):
    again = build(tmp_path, "kubeflow")
    first = plans["kubeflow"]
    assert [
        (n.id, n.depends_on, n.values, n.local_chart and n.local_chart.content_hash)
        for n in again.nodes
    ] == [
        (n.id, n.depends_on, n.values, n.local_chart and n.local_chart.content_hash)
        for n in first.nodes
    ]


# --------------------------------------------------------------------------- settings, scheduling, toggles


def test_rdma_modules_disabled_by_setting(tmp_path):
    plan = build(tmp_path, settings={"rdmaModules": {"enabled": False}})
    assert "rdma-modules" not in plan.components
    assert "rdma-modules-manifests" not in {n.id for n in plan.nodes}
    assert not any(
        d["kind"] == "NodeWright"
        for n in plan.nodes
        if n.kind not in ("gate", "crds") and n.local_chart
        for d in chart_docs(plan, n.id)
    )


def test_rdma_modules_disabled_in_the_recipe_file(tmp_path):
    doc = KIT.recipe_document(build(tmp_path))
    for ref in doc["componentRefs"]:
        if ref["name"] == "rdma-modules":
            ref.setdefault("overrides", {})["enabled"] = False
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(doc))
    doc2 = cluster_doc()
    doc2["recipe"] = "recipe.yaml"
    del doc2["criteria"]
    (spec,) = KIT.clusters({"clusters": [doc2]}, source="clusters.yaml", root=tmp_path)
    plan = KIT.plan(spec)
    assert plan.recipe.component("rdma-modules").enabled is False
    assert "rdma-modules-manifests" not in {n.id for n in plan.nodes}


def test_auto_taint_switches(tmp_path):
    by_override = build(tmp_path, overrides={"set": ["rdmamodules:autoTaintNewNodes=false"]})
    (nw,) = chart_docs(by_override, "rdma-modules-manifests")
    assert nw["spec"]["autoTaintNewNodes"] is False
    by_setting = build(tmp_path, settings={"rdmaModules": {"autoTaintNewNodes": False}})
    (nw,) = chart_docs(by_setting, "rdma-modules-manifests")
    assert nw["spec"]["autoTaintNewNodes"] is False


def test_accelerated_scheduling_reaches_only_rdma_modules(tmp_path, plans):
    plan = build(
        tmp_path,
        scheduling={
            "accelerated": {
                "nodeSelector": {"nvidia.com/gpu.present": "true"},
                "tolerations": ["nvidia.com/gpu:NoSchedule"],
            }
        },
    )
    (nw,) = chart_docs(plan, "rdma-modules-manifests")
    assert nw["spec"]["nodeSelectors"]["matchLabels"] == {"nvidia.com/gpu.present": "true"}
    assert nw["spec"]["nodeSelectors"]["matchExpressions"] == [CP]
    assert nw["spec"]["additionalTolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    for name, comp in plan.components.items():
        if name != "rdma-modules":
            assert comp.values == plans["any"].components[name].values, name


def test_rail_settings_flow_into_manifests(tmp_path):
    plan = build(
        tmp_path,
        settings={"numVfs": 8, "networkNamespace": "training", "podNetwork": "10.128.0.0/14"},
    )
    docs = chart_docs(plan, "sriov-ib-networks-manifests")
    assert {d["spec"]["numVfs"] for d in docs if d["kind"] == "SriovNetworkNodePolicy"} == {8}
    assert {d["spec"]["networkNamespace"] for d in docs if d["kind"] == "SriovIBNetwork"} == {
        "training"
    }


# --------------------------------------------------------------------------- refusals


def test_refuses_kubernetes_older_than_1_34(tmp_path):
    text = refused(tmp_path, kubernetesVersion="1.33")
    assert "error[NVKE-K8S-VERSION]" in text and "Kubernetes 1.33 is older than 1.34" in text
    assert "file=clusters.yaml" in text and "cluster=nvke-a" in text


def test_refuses_pools(tmp_path):
    text = refused(tmp_path, pools=[{"name": "gpu", "vmSize": "x", "nodeCount": 1}])
    assert "key=" in text and "pools" in text


def test_refuses_ofed_driver_in_values(tmp_path):
    text = refused(
        tmp_path,
        overrides={
            "values": [
                {"component": "network-operator", "values": {"ofedDriver": {"deploy": True}}}
            ]
        },
    )
    assert "error[NVKE-OFED-DRIVER]" in text and "key=ofedDriver" in text and "mlx5_core" in text


def test_refuses_ofed_driver_in_the_nic_cluster_policy(tmp_path):
    text = refused(
        tmp_path,
        settings={
            "nicClusterPolicy": {
                "ofedDriver": {"image": "doca-driver", "repository": "r", "version": "v"}
            }
        },
    )
    assert (
        "error[NVKE-OFED-DRIVER]" in text
        and "key=clusters[0].settings.nicClusterPolicy.ofedDriver" in text
    )
    assert "primary address" in text


def test_refuses_dra_below_0_5_1_by_image_tag(tmp_path):
    text = refused(tmp_path, overrides={"set": ["dradriver:image.tag=v0.5.0"]})
    assert "error[NVKE-DRA-VERSION]" in text and "key=image.tag" in text
    assert "OwnerReferencesPermissionEnforcement" in text and "NVLink clique" in text


def test_refuses_dra_below_0_5_1_by_recipe_pin(tmp_path):
    doc = KIT.recipe_document(build(tmp_path))
    for ref in doc["componentRefs"]:
        if ref["name"] == "nvidia-dra-driver-gpu":
            ref["version"] = "0.5.0"
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(doc))
    doc2 = cluster_doc()
    doc2["recipe"] = "recipe.yaml"
    del doc2["criteria"]
    (spec,) = KIT.clusters({"clusters": [doc2]}, source="clusters.yaml", root=tmp_path)
    with pytest.raises(GpuclusterError) as exc:
        KIT.plan(spec)
    text = str(exc.value)
    assert (
        "error[NVKE-DRA-VERSION]" in text
        and "key=version" in text
        and "nvidia-dra-driver-gpu 0.5.0 is older than 0.5.1" in text
    )


def test_refuses_driver_rdma(tmp_path):
    text = refused(tmp_path, overrides={"set": ["gpuoperator:driver.rdma.enabled=true"]})
    assert "error[NVKE-DRIVER-RDMA]" in text and "key=driver.rdma" in text and "DMA-BUF" in text


def test_refuses_num_vfs_above_firmware(tmp_path):
    text = refused(tmp_path, settings={"numVfs": 32})
    assert "error[NVKE-SRIOV-NUMVFS]" in text and "key=clusters[0].settings.numVfs" in text
    assert "numVfs 32 exceeds the firmware's NUM_OF_VFS 16" in text


def test_refuses_ippool_overlapping_the_pod_network(tmp_path):
    text = refused(tmp_path, settings={"podNetwork": "10.255.8.0/21"})
    assert "error[NVKE-IPPOOL-OVERLAP]" in text
    assert (
        "key=clusters[0].settings.rails[2].subnet" in text
        and "key=clusters[0].settings.rails[3].subnet" in text
    )
    assert "key=settings.rails[0].subnet" not in text
    assert "10.255.8.0/22 overlaps the pod network 10.255.8.0/21" in text


def test_refuses_overlapping_rails(tmp_path):
    rails = [dict(RAILS[0]), dict(RAILS[1], subnet="10.255.0.0/23")]
    text = refused(tmp_path, settings={"rails": rails})
    assert (
        "error[NVKE-IPPOOL-OVERLAP]" in text
        and "key=clusters[0].settings.rails[1].subnet" in text
        and "overlaps rail 0" in text
    )


def test_refuses_sriov_selection_by_pci_15b3(tmp_path):
    text = refused(
        tmp_path,
        settings={"sriovNodeSelector": {"feature.node.kubernetes.io/pci-15b3.present": "true"}},
    )
    assert (
        "error[NVKE-SRIOV-SELECTOR]" in text
        and "key=clusters[0].settings.sriovNodeSelector" in text
        and "control-plane" in text
    )
    text = refused(
        tmp_path,
        overrides={
            "values": [
                {
                    "component": "networkoperator",
                    "values": {
                        "sriov-network-operator": {
                            "sriovOperatorConfig": {
                                "configDaemonNodeSelector": {
                                    "feature.node.kubernetes.io/pci-15b3.present": "true"
                                }
                            }
                        }
                    },
                }
            ]
        },
    )
    assert "error[NVKE-SRIOV-SELECTOR]" in text and "configDaemonNodeSelector" in text


def test_refuses_the_mellanox_config_daemon_plugin(tmp_path):
    text = refused(
        tmp_path,
        overrides={
            "values": [
                {
                    "component": "network-operator",
                    "values": {
                        "sriov-network-operator": {"sriovOperatorConfig": {"disablePlugins": []}}
                    },
                }
            ]
        },
    )
    assert "error[NVKE-SRIOV-MELLANOX-PLUGIN]" in text and "mstfwreset" in text


def test_refuses_toolkit_config_source_change(tmp_path):
    text = refused(
        tmp_path,
        overrides={
            "values": [
                {
                    "component": "gpu-operator",
                    "values": {
                        "toolkit": {"env": [{"name": "RUNTIME_CONFIG_SOURCE", "value": "command"}]}
                    },
                }
            ]
        },
    )
    assert "error[NVKE-GPU-STACK]" in text and "key=toolkit.env.RUNTIME_CONFIG_SOURCE" in text
    assert "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED" in text


def test_refuses_a_rail_without_root_device(tmp_path):
    text = refused(tmp_path, settings={"rails": ["mlx5_0"]})
    assert "key=clusters[0].settings.rails[0].rootDevice" in text and "file=clusters.yaml" in text


def test_refuses_an_operator_without_driver_toolkit_or_gdrcopy(tmp_path):
    text = refused(
        tmp_path,
        overrides={
            "set": ["gpuoperator:driver.enabled=false", "gpuoperator:gdrcopy.enabled=false"]
        },
    )
    assert (
        "error[NVKE-GPU-STACK]" in text
        and "key=driver.enabled" in text
        and "key=gdrcopy.enabled" in text
    )
    assert "the GPU Operator installs all three" in text


def test_refuses_missing_kernel_module_params(tmp_path):
    text = refused(tmp_path, overrides={"set": ["gpuoperator:driver.kernelModuleConfig=null"]})
    assert (
        "error[NVKE-KERNEL-MODULE-PARAMS]" in text and "key=driver.kernelModuleConfig.name" in text
    )
    assert "NVreg_GrdmaPciTopoCheckOverride=1" in text


def test_refuses_rails_without_the_sriov_and_maintenance_operators(tmp_path):
    text = refused(
        tmp_path,
        overrides={
            "set": [
                "networkoperator:sriovNetworkOperator.enabled=false",
                "networkoperator:maintenanceOperator.enabled=false",
            ]
        },
    )
    assert "error[NVKE-SRIOV-OPERATOR]" in text
    assert "key=sriovNetworkOperator.enabled" in text and "key=maintenanceOperator.enabled" in text


def test_operator_init_container_settings_are_not_an_ofed_driver(tmp_path):
    plan = build(
        tmp_path,
        overrides={"set": ["networkoperator:operator.ofedDriver.initContainer.enable=false"]},
    )
    assert plan.components["network-operator"].values["operator"]["ofedDriver"] == {
        "initContainer": {"enable": False}
    }


def test_other_platforms_get_nothing_from_the_nvke_plugin():
    (aks,) = [KIT.plan(c) for c in KIT.load()]
    assert aks.cluster.criteria.service == "aks"
    ids = {n.id for n in aks.nodes}
    assert not ids & {
        "sriov-ib-networks-manifests",
        "rdma-modules-manifests",
        "gpu-operator-pre",
        DRA_GATE,
        "network-operator-ippool-crd",
        "network-operator-multus-rollout",
    }
    assert {g.kind for g in aks.gates}.isdisjoint({"crd-established", "min-version"})
    assert "kernelModuleConfig" not in aks.components["gpu-operator"].values.get("driver", {})
    assert not [f for f in aks.findings if f.id.startswith("NVKE")]

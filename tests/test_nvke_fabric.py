"""NVKE object builders (pure): shapes from the seed, schema-valid against the operators' CRDs."""

from __future__ import annotations

import json

import pytest
from nvke_crds import crd_scope, validate

from gpucluster_nvke import fabric
from gpucluster_nvke.settings import parse_settings

NS = "nvidia-network-operator"
CP = {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}
RAILS = [
    {"name": "mlx5_0", "rootDevice": "0000:03:00.0"},
    {"name": "mlx5_1", "rootDevice": "0002:03:00.0"},
    {"name": "mlx5_3", "rootDevice": "0010:03:00.0", "pfName": "ibP16p3s0"},
    {"name": "mlx5_4", "rootDevice": "0012:03:00.0"},
]


@pytest.fixture
def settings():
    return parse_settings({"rails": RAILS})


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def test_rail_objects_per_rail(settings):
    docs = fabric.rail_objects(settings, NS)
    pools, policies, nets = (
        by_kind(docs, "IPPool"),
        by_kind(docs, "SriovNetworkNodePolicy"),
        by_kind(docs, "SriovIBNetwork"),
    )
    assert len(pools) == len(policies) == len(nets) == 4
    for n, (pool, pol, net) in enumerate(zip(pools, policies, nets, strict=True)):
        assert pool["spec"]["subnet"] == f"10.255.{4 * n}.0/22"
        assert pool["metadata"]["namespace"] == NS
        assert pool["spec"]["nodeSelector"] == {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "feature.node.kubernetes.io/rdma.available",
                            "operator": "In",
                            "values": ["true"],
                        }
                    ]
                }
            ]
        }
        spec = pol["spec"]
        assert (spec["linkType"], spec["isRdma"], spec["deviceType"], spec["numVfs"]) == (
            "IB",
            True,
            "netdevice",
            16,
        )
        assert spec["resourceName"] == f"sriov_resource_rail_{n}"
        assert spec["nicSelector"]["rootDevices"] == [RAILS[n]["rootDevice"]]
        assert spec["nicSelector"]["vendor"] == "15b3"
        assert spec["nodeSelector"] == {"feature.node.kubernetes.io/rdma.available": "true"}
        assert "feature.node.kubernetes.io/pci-15b3.present" not in json.dumps(pol)
        assert net["metadata"]["name"] == f"sriov-network-rail-{n}"
        assert net["spec"]["networkNamespace"] == "default"
        assert net["spec"]["resourceName"] == f"sriov_resource_rail_{n}"
        assert json.loads(net["spec"]["ipam"]) == {
            "type": "nv-ipam",
            "poolName": pool["metadata"]["name"],
        }
    assert policies[2]["spec"]["nicSelector"]["pfNames"] == ["ibP16p3s0"]
    assert "pfNames" not in policies[0]["spec"]["nicSelector"]


def test_rail_objects_are_schema_valid(settings):
    for doc in fabric.rail_objects(settings, NS):
        validate(doc)
        assert crd_scope(doc["apiVersion"], doc["kind"]) == "Namespaced"


def test_schema_check_catches_a_misspelled_field(settings):
    doc = fabric.sriov_node_policy(settings.rails[0], settings, NS)
    doc["spec"]["numVFs"] = 16
    with pytest.raises(AssertionError, match="numVFs"):
        validate(doc)


def test_nic_cluster_policy(settings):
    ncp = fabric.nic_cluster_policy(settings, network_operator_version="26.4.1")
    validate(ncp)
    assert (
        crd_scope("mellanox.com/v1alpha1", "NicClusterPolicy") == "Cluster"
        and "namespace" not in ncp["metadata"]
    )
    spec = ncp["spec"]
    assert "ofedDriver" not in spec
    assert spec["nvIpam"] == {
        "image": "nvidia-k8s-ipam",
        "repository": "nvcr.io/nvidia/mellanox",
        "version": "network-operator-v26.4.1",
        "enableWebhook": False,
    }
    assert spec["secondaryNetwork"]["multus"]["image"] == "multus-cni"
    assert spec["secondaryNetwork"]["cniPlugins"]["image"] == "plugins"
    terms = spec["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {
            "matchExpressions": [
                {
                    "key": "feature.node.kubernetes.io/pci-15b3.present",
                    "operator": "In",
                    "values": ["true"],
                },
                CP,
            ]
        }
    ]


def test_nic_cluster_policy_patch_from_settings():
    s = parse_settings(
        {"rails": RAILS, "nicClusterPolicy": {"nvIpam": {"enableWebhook": True}, "tolerations": []}}
    )
    spec = fabric.nic_cluster_policy(s, network_operator_version="v26.4.1")["spec"]
    assert spec["nvIpam"]["enableWebhook"] is True and spec["nvIpam"]["image"] == "nvidia-k8s-ipam"
    assert spec["tolerations"] == []


def test_kernel_module_params():
    cm = fabric.kernel_module_params("kernel-module-params", "gpu-operator")
    validate(cm)
    assert cm["metadata"] == {
        "name": "kernel-module-params",
        "namespace": "gpu-operator",
        "labels": fabric.PART_OF,
    }
    assert cm["data"] == {"nvidia.conf": "options nvidia NVreg_GrdmaPciTopoCheckOverride=1\n"}


def test_rdma_modules_nodewright_defaults():
    nw = fabric.rdma_modules_nodewright(
        {"autoTaintNewNodes": True, "acceleratedNodeSelector": {}, "acceleratedTolerations": []}
    )
    validate(nw)
    assert (
        crd_scope("nodewright.nvidia.com/v1alpha1", "NodeWright") == "Cluster"
        and "namespace" not in nw["metadata"]
    )
    spec = nw["spec"]
    assert spec["runtimeRequired"] is True and spec["autoTaintNewNodes"] is True
    assert spec["nodeSelectors"] == {
        "matchLabels": {"feature.node.kubernetes.io/pci-15b3.present": "true"},
        "matchExpressions": [CP],
    }
    assert spec["additionalTolerations"] == [{"operator": "Exists"}]
    (pkg,) = spec["packages"].values()
    assert "interrupt" not in pkg
    apply = pkg["configMap"]["apply.sh"]
    for mod in ("rdma_ucm", "ib_umad", "ib_ipoib"):
        assert mod in apply and mod in pkg["configMap"]["apply_check.sh"]
    assert "modprobe" in apply and "> /etc/modules-load.d/" in apply


def test_rdma_modules_nodewright_inputs_keep_control_plane_out():
    nw = fabric.rdma_modules_nodewright(
        {
            "autoTaintNewNodes": False,
            "acceleratedNodeSelector": {"nvidia.com/gpu.present": "true"},
            "acceleratedTolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        }
    )
    validate(nw)
    assert nw["spec"]["autoTaintNewNodes"] is False
    assert nw["spec"]["nodeSelectors"]["matchLabels"] == {"nvidia.com/gpu.present": "true"}
    assert nw["spec"]["nodeSelectors"]["matchExpressions"] == [CP]
    assert nw["spec"]["additionalTolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert (
        fabric.rdma_modules_nodewright({"autoTaintNewNodes": "false"})["spec"]["autoTaintNewNodes"]
        is False
    )


def test_teardown_hook(settings):
    docs = fabric.teardown_wait_hook(settings, NS)
    assert [d["kind"] for d in docs] == ["ServiceAccount", "Role", "RoleBinding", "Job"]
    for d in docs:
        validate(d)
        ann = d["metadata"]["annotations"]
        assert ann["helm.sh/hook"] == "post-delete"
        assert "hook-succeeded" in ann["helm.sh/hook-delete-policy"]
        assert d["metadata"]["namespace"] == NS
    role = docs[1]
    assert role["rules"] == [
        {
            "apiGroups": ["sriovnetwork.openshift.io"],
            "resources": ["sriovnetworknodestates"],
            "verbs": ["get", "list"],
        }
    ]
    weights = [int(d["metadata"]["annotations"]["helm.sh/hook-weight"]) for d in docs]
    assert weights == sorted(weights) and weights[-1] > weights[0]
    job = docs[3]["spec"]["template"]["spec"]
    (container,) = job["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NAMESPACE"] == NS
    assert env["RAIL_DEVICES"].split() == sorted(
        ["0000:03:00.0", "0002:03:00.0", "0010:03:00.0", "0012:03:00.0", "ibP16p3s0"]
    )
    script = container["command"][-1]
    assert "sriovnetworknodestates" in script and "Succeeded" in script and "Idle" in script
    assert str(settings.teardown_timeout_seconds) in script
    assert docs[3]["spec"]["activeDeadlineSeconds"] > settings.teardown_timeout_seconds

"""Pure builders of the Kubernetes objects the NVKE plugin renders (plain dicts, no I/O).

Facts (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup); shapes as NVIDIA k8s-launch-kit generates them for
``--deployment-type sriov --fabric infiniband``):

* ``kernel-module-params`` ConfigMap: ``options nvidia NVreg_GrdmaPciTopoCheckOverride=1`` for
  GPUDirect RDMA over DMA-BUF (no ``nvidia-peermem``), read by the GPU Operator driver through
  ``driver.kernelModuleConfig.name``.
* NicClusterPolicy: ``nvIpam``, ``secondaryNetwork.multus`` and ``secondaryNetwork.cniPlugins``
  (the NVKE image ships OVN-Kubernetes only), never ``ofedDriver`` (a DOCA driver container
  unloads the inbox ``mlx5_core`` and the node's primary address goes with it).
* Per rail n: IPPool ``10.255.<4n>.0/22``, SriovNetworkNodePolicy (``linkType: IB``,
  ``isRdma: true``, ``deviceType: netdevice``, ``numVfs``, PF chosen by PCI root device) and a
  SriovIBNetwork whose NetworkAttachmentDefinition lands in ``networkNamespace``.
* The ``rdma-modules`` NodeWright: loads ``rdma_ucm``, ``ib_umad``, ``ib_ipoib`` and writes a
  modules-load.d entry on ``pci-15b3.present`` nodes that are not control-plane nodes.
* A Helm ``post-delete`` hook Job that holds the uninstall of ``sriov-ib-networks`` until every
  SriovNetworkNodeState is ``Succeeded`` and idle, so no NodeMaintenance is orphaned.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gpucluster.sdk import deep_merge
from gpucluster_nvke.settings import (
    CONTROL_PLANE_LABEL,
    PCI_15B3_LABEL,
    NvkeSettings,
    Rail,
)

PART_OF = {"app.kubernetes.io/part-of": "gpucluster", "app.kubernetes.io/managed-by": "Helm"}

NETWORK_OPERATOR_COMPONENT_REPOSITORY = "nvcr.io/nvidia/mellanox"
"""Registry of the Network Operator's component images (nv-ipam, multus, CNI plugins); the tag
is ``network-operator-v<chart version>`` (k8s-launch-kit release catalog, 26.4 line)."""

MULTUS_DAEMONSET = "kube-multus-ds"
"""Name of the multus DaemonSet the Network Operator renders from ``secondaryNetwork.multus``."""

SRIOV_IB_MTU = 4000
"""IPoIB MTU k8s-launch-kit sets on InfiniBand SR-IOV policies."""

SRIOV_POLICY_PRIORITY = 90

RDMA_ULP_MODULES = ("rdma_ucm", "ib_umad", "ib_ipoib")
"""Upper-layer protocol modules the NVKE image does not load (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup))."""

MODULES_LOAD_FILE = "/etc/modules-load.d/gpucluster-rdma-ulp.conf"
NODEWRIGHT_SHELLSCRIPT_IMAGE = "ghcr.io/nvidia/skyhook-packages/shellscript"
NODEWRIGHT_SHELLSCRIPT_VERSION = "1.1.1"
NODEWRIGHT_SHELLSCRIPT_DIGEST = (
    "sha256:5414b06e52c090d0842704f2580798064362d771f12421ccc8888186b5f5a3cf"
)
"""The digest of ``shellscript:1.1.1`` (AICR's container image inventory, docs "Container Image
Inventory": ``ghcr.io/nvidia/skyhook-packages/shellscript:1.1.1@sha256:5414b06e...``); the
Skyhook package pins it as ``containerSHA``. Change it with the version, never alone."""
GRDMA_OPTION = "options nvidia NVreg_GrdmaPciTopoCheckOverride=1\n"


def not_control_plane() -> dict[str, Any]:
    """The node-selector requirement that keeps a workload off control-plane nodes.

    NVKE control-plane nodes carry ``nvidia.com/gpu.present``, ``nvidia.com/gpu.deploy.driver``
    and ``pci-15b3.present`` without a GPU or ConnectX-7 (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup)), so every DaemonSet a gate waits
    for must carry this requirement.
    """
    return {"key": CONTROL_PLANE_LABEL, "operator": "DoesNotExist"}


def node_affinity(
    selector: Mapping[str, str], *, exclude_control_plane: bool = True
) -> dict[str, Any]:
    """``requiredDuringSchedulingIgnoredDuringExecution`` node affinity ANDing ``selector``'s
    ``key In [value]`` requirements (and, by default, "not a control-plane node")."""
    exprs = [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(selector.items())]
    if exclude_control_plane:
        exprs.append(not_control_plane())
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": exprs}]
        }
    }


def kernel_module_params(name: str, namespace: str) -> dict[str, Any]:
    """ConfigMap read by the GPU Operator driver container (``driver.kernelModuleConfig.name``)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(PART_OF)},
        "data": {"nvidia.conf": GRDMA_OPTION},
    }


def component_image_tag(network_operator_version: str) -> str:
    """``"26.4.1"`` / ``"v26.4.1"`` -> ``"network-operator-v26.4.1"``."""
    return f"network-operator-v{str(network_operator_version).lstrip('v')}"


def nic_cluster_policy(settings: NvkeSettings, *, network_operator_version: str) -> dict[str, Any]:
    """The NicClusterPolicy of NVKE (cluster-scoped, named ``nic-cluster-policy``).

    Its DaemonSets (nv-ipam node, multus, CNI plugins) land on ``pci-15b3.present`` nodes that
    are not control-plane nodes: the same cohort ``rdma-modules`` prepares. ``settings.nic_cluster_policy``
    is deep-merged over the spec (policy refuses an ``ofedDriver`` in the result).
    """
    tag = component_image_tag(network_operator_version)
    repo = NETWORK_OPERATOR_COMPONENT_REPOSITORY
    spec: dict[str, Any] = {
        "nodeAffinity": node_affinity({PCI_15B3_LABEL: "true"}),
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "nvIpam": {
            "image": "nvidia-k8s-ipam",
            "repository": repo,
            "version": tag,
            "enableWebhook": False,
        },
        "secondaryNetwork": {
            "cniPlugins": {"image": "plugins", "repository": repo, "version": tag},
            "multus": {"image": "multus-cni", "repository": repo, "version": tag},
        },
    }
    spec = deep_merge(spec, settings.nic_cluster_policy)
    return {
        "apiVersion": "mellanox.com/v1alpha1",
        "kind": "NicClusterPolicy",
        "metadata": {"name": "nic-cluster-policy", "labels": dict(PART_OF)},
        "spec": spec,
    }


def ip_pool(rail: Rail, settings: NvkeSettings, namespace: str) -> dict[str, Any]:
    """nv-ipam IPPool of one rail (in the Network Operator namespace, where nv-ipam runs)."""
    return {
        "apiVersion": "nv-ipam.nvidia.com/v1alpha1",
        "kind": "IPPool",
        "metadata": {"name": rail.pool_name, "namespace": namespace, "labels": dict(PART_OF)},
        "spec": {
            "subnet": rail.subnet,
            "perNodeBlockSize": settings.per_node_block_size,
            "gateway": rail.gateway,
            "nodeSelector": node_affinity(
                settings.sriov_node_selector, exclude_control_plane=False
            )["requiredDuringSchedulingIgnoredDuringExecution"],
        },
    }


def sriov_node_policy(rail: Rail, settings: NvkeSettings, namespace: str) -> dict[str, Any]:
    """SriovNetworkNodePolicy creating ``numVfs`` IB VFs on one rail's PF."""
    nic: dict[str, Any] = {"vendor": "15b3"}
    if rail.root_device:
        nic["rootDevices"] = [rail.root_device]
    if rail.pf_name:
        nic["pfNames"] = [rail.pf_name]
    return {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovNetworkNodePolicy",
        "metadata": {"name": rail.policy_name, "namespace": namespace, "labels": dict(PART_OF)},
        "spec": {
            "deviceType": "netdevice",
            "linkType": "IB",
            "isRdma": True,
            "numVfs": settings.num_vfs,
            "mtu": SRIOV_IB_MTU,
            "priority": SRIOV_POLICY_PRIORITY,
            "resourceName": rail.resource_name,
            "nicSelector": nic,
            "nodeSelector": dict(settings.sriov_node_selector),
        },
    }


def sriov_ib_network(rail: Rail, settings: NvkeSettings, namespace: str) -> dict[str, Any]:
    """SriovIBNetwork; the operator renders NetworkAttachmentDefinition ``<networkNamespace>/sriov-network-rail-<n>``."""
    ipam = json.dumps({"type": "nv-ipam", "poolName": rail.pool_name}, sort_keys=True)
    return {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovIBNetwork",
        "metadata": {"name": rail.network_name, "namespace": namespace, "labels": dict(PART_OF)},
        "spec": {
            "resourceName": rail.resource_name,
            "networkNamespace": settings.network_namespace,
            "linkState": "enable",
            "ipam": ipam,
        },
    }


def rail_objects(settings: NvkeSettings, namespace: str) -> list[dict[str, Any]]:
    """Every rail's IPPool, SriovNetworkNodePolicy and SriovIBNetwork, grouped by kind."""
    return (
        [ip_pool(r, settings, namespace) for r in settings.rails]
        + [sriov_node_policy(r, settings, namespace) for r in settings.rails]
        + [sriov_ib_network(r, settings, namespace) for r in settings.rails]
    )


TEARDOWN_NAME = "sriov-ib-networks-teardown-wait"

_TEARDOWN_SCRIPT = r"""set -eu
deadline=$(( $(date +%s) + TIMEOUT_SECONDS ))
if res=$(timeout 30 kubectl api-resources --api-group=sriovnetwork.openshift.io -o name 2>&1); then
  case "$res" in
    *sriovnetworknodestates*) ;;
    *) echo "no SriovNetworkNodeState API: nothing to wait for"; exit 0 ;;
  esac
fi
sleep 10
while true; do
  if out=$(timeout 30 kubectl get sriovnetworknodestates.sriovnetwork.openshift.io -n "$NAMESPACE" -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.status.syncStatus}{"|"}{.metadata.annotations.sriovnetwork\.openshift\.io/desired-state}{"|"}{.metadata.annotations.sriovnetwork\.openshift\.io/current-state}{"|"}{.spec.interfaces[*].pciAddress} {.spec.interfaces[*].name}{"\n"}{end}'); then
    pending=""
    while IFS='|' read -r name sync desired current devs; do
      if [ -z "$name" ]; then continue; fi
      busy=0
      if [ "$sync" != "Succeeded" ]; then busy=1; fi
      if [ -n "$desired" ] && [ "$desired" != "Idle" ]; then busy=1; fi
      if [ -n "$current" ] && [ "$current" != "Idle" ]; then busy=1; fi
      for dev in $devs; do
        for rail in $RAIL_DEVICES; do
          if [ "$dev" = "$rail" ]; then busy=1; fi
        done
      done
      if [ "$busy" = 1 ]; then pending="$pending $name"; fi
    done <<STATES
$out
STATES
  else
    pending="(API error)"
  fi
  if [ -z "$pending" ]; then
    echo "every SriovNetworkNodeState is Succeeded with no drain in flight"
    exit 0
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "timed out; still reconfiguring: $(echo $pending)" >&2
    echo "do not uninstall network-operator before these nodes are Succeeded (see docs/nvke.md)" >&2
    exit 1
  fi
  echo "waiting for: $(echo $pending)"
  sleep 10
done
"""


def teardown_wait_hook(
    settings: NvkeSettings,
    namespace: str,
    *,
    system_node_selector: Mapping[str, str] | None = None,
    system_tolerations: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Helm ``post-delete`` hook objects of the ``sriov-ib-networks`` chart.

    After Helm deletes the rails' policies, the SR-IOV config daemon asks the Maintenance
    Operator to drain each node; uninstalling the operators while that is in flight orphans the
    NodeMaintenance and leaves the node cordoned (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup)). The Job waits until every
    SriovNetworkNodeState no longer lists a rail PF in ``spec.interfaces``, reports
    ``status.syncStatus: Succeeded`` and has no drain in flight (desired/current state ``Idle``);
    it fails after ``teardown.timeoutSeconds``, which fails the uninstall and keeps
    ``network-operator`` (destroyed after it) in place. The Job runs on the system nodes when
    the cluster file names them (``scheduling.system``: node selector added to
    ``kubernetes.io/os: linux``, tolerations).
    """
    hook = {
        "helm.sh/hook": "post-delete",
        "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
    }

    def meta(kind_weight: str) -> dict[str, Any]:
        return {
            "name": TEARDOWN_NAME,
            "namespace": namespace,
            "labels": dict(PART_OF),
            "annotations": {**hook, "helm.sh/hook-weight": kind_weight},
        }

    devices = " ".join(sorted({d for r in settings.rails for d in (r.root_device, r.pf_name) if d}))
    script = _TEARDOWN_SCRIPT.replace("TIMEOUT_SECONDS", str(settings.teardown_timeout_seconds))
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("-10")},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta("-10"),
            "rules": [
                {
                    "apiGroups": ["sriovnetwork.openshift.io"],
                    "resources": ["sriovnetworknodestates"],
                    "verbs": ["get", "list"],  # polled with kubectl get: no watch
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta("-5"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": TEARDOWN_NAME,
            },
            "subjects": [{"kind": "ServiceAccount", "name": TEARDOWN_NAME, "namespace": namespace}],
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta("0"),
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": settings.teardown_timeout_seconds + 60,
                "template": {
                    "metadata": {"labels": {"app.kubernetes.io/name": TEARDOWN_NAME}},
                    "spec": {
                        "serviceAccountName": TEARDOWN_NAME,
                        "restartPolicy": "Never",
                        "nodeSelector": {
                            "kubernetes.io/os": "linux",
                            **dict(system_node_selector or {}),
                        },
                        **({"tolerations": list(system_tolerations)} if system_tolerations else {}),
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65534,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "wait",
                                "image": settings.teardown_image,
                                "command": ["/bin/sh", "-c", script],
                                "env": [
                                    {"name": "NAMESPACE", "value": namespace},
                                    {"name": "RAIL_DEVICES", "value": devices},
                                    {"name": "HOME", "value": "/tmp"},
                                ],
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "resources": {
                                    "requests": {"cpu": "10m", "memory": "32Mi"},
                                    "limits": {"memory": "128Mi"},
                                },
                                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                            }
                        ],
                        "volumes": [{"name": "tmp", "emptyDir": {}}],
                    },
                },
            },
        },
    ]


def _apply_script() -> str:
    mods = " ".join(RDMA_ULP_MODULES)
    return (
        "#!/bin/bash\n"
        "set -euo pipefail\n"
        f"for m in {mods}; do\n"
        '  modprobe "$m"\n'
        "done\n"
        f"printf '%s\\n' {mods} > {MODULES_LOAD_FILE}\n"
    )


def _check_script() -> str:
    mods = " ".join(RDMA_ULP_MODULES)
    return (
        "#!/bin/bash\n"
        "set -euo pipefail\n"
        f"for m in {mods}; do\n"
        '  grep -q "^${m} " /proc/modules || { echo "kernel module $m is not loaded"; exit 1; }\n'
        f'  grep -qx "$m" {MODULES_LOAD_FILE} || {{ echo "$m missing from {MODULES_LOAD_FILE}"; exit 1; }}\n'
        "done\n"
    )


def rdma_modules_nodewright(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``rdma-modules`` NodeWright (``nodewright.nvidia.com/v1alpha1``, cluster-scoped).

    Args:
        values: the ``rdma-modules`` component values: ``autoTaintNewNodes`` (bool, default
            True), ``acceleratedNodeSelector`` (labels replacing the default
            ``pci-15b3.present=true``), ``acceleratedTolerations`` (list replacing the default
            wildcard toleration).

    The node selector always adds "not a control-plane node": the control plane carries a
    BlueField-3 (``pci-15b3.present``) and an auto-tainted node whose taints the package cannot
    tolerate would stay tainted (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup)). No interrupt: no cordon, drain or reboot.
    """
    auto_taint = values.get("autoTaintNewNodes", True)
    auto_taint = not (auto_taint is False or str(auto_taint).lower() == "false")
    selector = dict(values.get("acceleratedNodeSelector") or {PCI_15B3_LABEL: "true"})
    tolerations = list(values.get("acceleratedTolerations") or [{"operator": "Exists"}])
    return {
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "metadata": {"name": "rdma-modules", "labels": dict(PART_OF)},
        "spec": {
            "runtimeRequired": True,
            "autoTaintNewNodes": auto_taint,
            "additionalTolerations": tolerations,
            "nodeSelectors": {
                "matchLabels": {str(k): str(v) for k, v in sorted(selector.items())},
                "matchExpressions": [not_control_plane()],
            },
            "packages": {
                "rdma-modules": {
                    "image": NODEWRIGHT_SHELLSCRIPT_IMAGE,
                    "version": NODEWRIGHT_SHELLSCRIPT_VERSION,
                    "containerSHA": NODEWRIGHT_SHELLSCRIPT_DIGEST,
                    "configMap": {"apply.sh": _apply_script(), "apply_check.sh": _check_script()},
                }
            },
        },
    }

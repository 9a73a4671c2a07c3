"""OKE plugin: policy checks (hook ``gpucluster_policy_checks``), OKE clusters only.

Written against the public SDK only. Check ids (docs/oke.md, "Policies"):

================================  ========  ==============================================
``OKE-K8S-VERSION``               error     kubernetesVersion below the recipe's
                                            ``K8s.server.version`` floor (warning when only
                                            the patch level cannot be verified)
``OKE-GPU-PLUGIN-ADDON``          error     NvidiaGpuPlugin add-on state contradicts gpuStack
``OKE-DRA-CONTROLLER-AFFINITY``   error     DRA controller keeps the chart's control-plane
                                            node affinity (no schedulable control plane)
``OKE-KERNEL-MODULE-PARAMS``      warning   kernel module parameters set for a driver the
                                            GPU Operator does not install (oci-managed image)
================================  ========  ==============================================

The whole-GPU advertiser under ``gpuStack=oci-managed`` (OKE's add-on, the recipe's device
plugin and DRA GPU advertisement off) is the core check ``GPU-ADVERTISER`` (the profile value
declares ``advertiser: external``); profile-owned driver values are core ``PROFILE-OWNED``.

Facts: AICR recipe data (overlays ``oke-ol``, ``gb200-oke-training``, the gpuStack profile
constraints ``K8s.oke-addons.nvidia-gpu-plugin``; the DRA ``controller.affinity.nodeAffinity: null``
override). The network-operator 26.4.1 chart renders no NicClusterPolicy (it has no ``deployCR``
key, ``gpucluster lint``: dead value), so the recipe's own ``nic-cluster-policy`` has no second
owner to guard against.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from gpucluster.sdk import ClusterSpec, Finding, Recipe, hookimpl
from gpucluster_oke.platform import ADDON_STATES, PROFILE_DEFAULT, PROFILE_NAME

__all__ = ["gpucluster_policy_checks", "version_floor", "CHECK_IDS"]

GPU_OPERATOR = "gpu-operator"
DRA_DRIVER = "nvidia-dra-driver-gpu"
NETWORK_OPERATOR = "network-operator"
K8S_VERSION_CONSTRAINT = "K8s.server.version"
RDMA_TOPO_PARAM = "NVreg_GrdmaPciTopoCheckOverride=1"
"""The nvidia module parameter GB200 training needs for GPUDirect RDMA over dma-buf (AICR overlay
``gb200-oke-training``, its ``nvidia-kernel-module-params`` ConfigMap)."""
CHECK_IDS = (
    "OKE-K8S-VERSION",
    "OKE-GPU-PLUGIN-ADDON",
    "OKE-DRA-CONTROLLER-AFFINITY",
    "OKE-KERNEL-MODULE-PARAMS",
)

_MISSING = object()
_FLOOR = re.compile(r"^\s*>=\s*v?(\d+)\.(\d+)(?:\.(\d+))?\s*$")
_MINOR = re.compile(r"^\s*v?(\d+)\.(\d+)\s*$")


def _get(values: Any, path: str) -> Any:
    node = values
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _finding(
    cluster: ClusterSpec,
    id: str,
    severity: Literal["error", "warning", "info"],
    component: str,
    key: str,
    message: str,
    fix: str,
) -> Finding:
    return Finding(
        id=id,
        severity=severity,
        cluster=cluster.name,
        component=component,
        key=key,
        message=message,
        fix=fix,
    )


def version_floor(recipe: Recipe) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of the recipe's ``K8s.server.version >= X.Y[.Z]`` constraint.

    Returns:
        None when the recipe has no such constraint or it is not a ``>=`` floor.
    """
    for c in recipe.constraints:
        if c.name == K8S_VERSION_CONSTRAINT:
            m = _FLOOR.fullmatch(c.value)
            if m:
                return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    return None


def _check_version(cluster: ClusterSpec, recipe: Recipe) -> list[Finding]:
    floor = version_floor(recipe)
    if floor is None:
        return []
    wanted = f"{floor[0]}.{floor[1]}" + (f".{floor[2]}" if floor[2] else "")
    m = _MINOR.fullmatch(str(cluster.kubernetes_version))
    leaf = recipe.applied_overlays[-1] if recipe.applied_overlays else "the recipe"
    if m is None:
        return [
            _finding(
                cluster,
                "OKE-K8S-VERSION",
                "error",
                "-",
                "kubernetesVersion",
                f"kubernetesVersion {cluster.kubernetes_version!r} is not a MAJOR.MINOR version",
                f'set kubernetesVersion to the OKE cluster\'s version, e.g. "{floor[0]}.{floor[1]}"',
            )
        ]
    have = (int(m.group(1)), int(m.group(2)))
    if have < floor[:2]:
        why = (
            "the DRA driver's ComputeDomains and Dynamo need the GA resource.k8s.io/v1 API"
            if floor[:2] >= (1, 34)
            else "the recipe is qualified only from that version"
        )
        return [
            _finding(
                cluster,
                "OKE-K8S-VERSION",
                "error",
                "-",
                "kubernetesVersion",
                f"the OKE cluster runs Kubernetes {cluster.kubernetes_version} but {leaf} needs {K8S_VERSION_CONSTRAINT} "
                f">= {wanted}: {why}",
                f"upgrade the OKE control plane and node pools to {floor[0]}.{floor[1]} or later (oci ce cluster update, "
                "one minor version at a time), then set kubernetesVersion accordingly",
            )
        ]
    if have == floor[:2] and floor[2]:
        return [
            _finding(
                cluster,
                "OKE-K8S-VERSION",
                "warning",
                "-",
                "kubernetesVersion",
                f"{leaf} needs Kubernetes >= {wanted}; kubernetesVersion {cluster.kubernetes_version} does not say the "
                "patch level, so it cannot be verified",
                f"check `kubectl version` reports {wanted} or later on the OKE cluster",
            )
        ]
    return []


def _check_addon(cluster: ClusterSpec, recipe: Recipe) -> list[Finding]:
    state = (cluster.settings or {}).get("nvidiaGpuPluginAddon")
    if state not in ADDON_STATES or recipe.profile is None or recipe.profile[0] != PROFILE_NAME:
        return []
    stack = recipe.profile[1]
    needed = ADDON_STATES[state]
    if stack == needed:
        return []
    if state == "installed":
        consequence = (
            "OKE's NvidiaGpuPlugin add-on advertises nvidia.com/gpu and the GPU Operator's device plugin would "
            "advertise the same GPUs again (double allocation); the operator's driver container would also fight the "
            "driver of the Oracle GPU image"
        )
    else:
        consequence = (
            "nothing advertises nvidia.com/gpu: the recipe turns the GPU Operator's device plugin off and expects the "
            "add-on to do it"
        )
    return [
        _finding(
            cluster,
            "OKE-GPU-PLUGIN-ADDON",
            "error",
            "-",
            "settings.nvidiaGpuPluginAddon",
            f"the NvidiaGpuPlugin add-on is {state} but the gpuStack profile is '{stack}', which needs it "
            f"{'installed' if stack == PROFILE_DEFAULT else 'absent'}: {consequence}",
            f"set profile gpuStack: {needed}, or change the cluster ({'remove' if state == 'installed' else 'install'} "
            "the add-on with oci ce cluster) and update settings.nvidiaGpuPluginAddon",
        )
    ]


def _check_dra_affinity(cluster: ClusterSpec, components: Mapping[str, Any]) -> list[Finding]:
    dra = components.get(DRA_DRIVER)
    if dra is None:
        return []
    affinity = _get(dra.values, "controller.affinity")
    if affinity is None:
        return []  # the whole affinity dropped: the controller schedules anywhere
    if isinstance(affinity, Mapping) and "nodeAffinity" in affinity:
        return []  # null drops the chart default; a mapping is the user's own placement
    return [
        _finding(
            cluster,
            "OKE-DRA-CONTROLLER-AFFINITY",
            "error",
            DRA_DRIVER,
            "controller.affinity.nodeAffinity",
            "the DRA controller keeps the chart's default node affinity for control-plane nodes, but OKE's control "
            "plane is managed by Oracle and runs no pods: the controller stays Pending and ComputeDomains never "
            "reconcile",
            "keep the recipe's controller.affinity.nodeAffinity: null (do not replace the controller section), or give "
            "an explicit controller.affinity.nodeAffinity for worker nodes",
        )
    ]


def _check_kernel_module_params(
    cluster: ClusterSpec, components: Mapping[str, Any]
) -> list[Finding]:
    gpu = components.get(GPU_OPERATOR)
    if gpu is None:
        return []
    name = _get(gpu.values, "driver.kernelModuleConfig.name")
    if name is _MISSING or not name or _get(gpu.values, "driver.enabled") is not False:
        return []
    stated = (cluster.settings or {}).get("imageDriverParams") or []
    if RDMA_TOPO_PARAM in stated:
        return [
            _finding(
                cluster,
                "OKE-KERNEL-MODULE-PARAMS",
                "info",
                GPU_OPERATOR,
                "driver.kernelModuleConfig.name",
                f"the ConfigMap '{name}' does not reach the Oracle GPU image's driver (driver.enabled=false); "
                f"settings.imageDriverParams states that driver loads with {RDMA_TOPO_PARAM}",
                "none needed while the image keeps the parameter; after an image change, check "
                "/proc/driver/nvidia/params on a GPU node again",
            )
        ]
    return [
        _finding(
            cluster,
            "OKE-KERNEL-MODULE-PARAMS",
            "warning",
            GPU_OPERATOR,
            "driver.kernelModuleConfig.name",
            f"the ConfigMap '{name}' (NVreg_GrdmaPciTopoCheckOverride=1) only reaches a driver the GPU Operator "
            "installs, but driver.enabled=false (gpuStack oci-managed: the Oracle GPU image's driver): without the "
            "parameter GPUDirect RDMA over dma-buf is refused and NCCL falls back from InfiniBand to sockets",
            "make sure the OKE GPU image or node bootstrap loads nvidia with NVreg_GrdmaPciTopoCheckOverride=1 "
            "(cat /proc/driver/nvidia/params on a GPU node shows GrdmaPciTopoCheckOverride: 1) and state it: "
            f"settings.imageDriverParams: [{RDMA_TOPO_PARAM}]; or use gpuStack operator-managed",
        )
    ]


@hookimpl
def gpucluster_policy_checks(cluster, recipe, components):
    """OKE checks on the final effective values."""
    findings: list[Finding] = []
    findings += _check_version(cluster, recipe)
    findings += _check_addon(cluster, recipe)
    findings += _check_dra_affinity(cluster, components)
    findings += _check_kernel_module_params(cluster, components)
    return findings

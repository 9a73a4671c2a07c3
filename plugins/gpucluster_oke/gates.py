"""OKE plugin: readiness gates (hook ``gpucluster_gates``; see docs/gates.md).

* ``gpu-operator-clusterpolicy-ready``: ClusterPolicy ``cluster-policy`` reports
  ``status.state`` = ``ready`` (driver or image driver validated, device plugin or OKE's
  add-on, DCGM, GFD up on the GPU nodes). It is gpu-operator's ready handle: the DRA driver,
  KAI scheduler, NVSentinel, Kubeflow Trainer and Dynamo install after it. Source: AICR
  gpu-operator health check (ClusterPolicy singleton ready).
* ``network-operator-nicclusterpolicy-ready`` (GB200 training recipes, which ship the network
  operator): *every* NicClusterPolicy reports ``ready`` (the RDMA shared device plugin
  advertises ``nvidia.com/mlnxnics`` on the InfiniBand nodes). The AICR OKE overlays give
  gpu-operator no dependency on network-operator (OCI nodes carry host MOFED), so the gate names
  gpu-operator in ``before`` (plus network-operator's own dependents): the GPU stack installs
  on a ready fabric, as on AKS, and ClusterPolicy ready then means GPU *and* RDMA are up.
* ``nvidia-dra-driver-gpu-kubelet-plugin-rollout``: the DRA kubelet plugin DaemonSet
  (``<nameOverride>-kubelet-plugin``, ``gpucluster.sdk.dra_kubelet_plugin_name``) rolled out on
  at least one node, before ComputeDomain and DRA consumers. At least one pod is required
  (``min_ready`` 1): the cluster exists and a GPU recipe is only installed onto GPU nodes, so
  zero scheduled pods means the plugin found no GPU node (wrong labels, taints not tolerated),
  not success. Source: AICR nvidia-dra-driver-gpu
  health check.

Written against the public SDK only, like a third-party plugin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucluster.sdk import (
    GateSpec,
    clusterpolicy_ready,
    dra_kubelet_plugin_name,
    dra_kubelet_plugin_rollout,
    hookimpl,
    nicclusterpolicy_ready,
)

__all__ = [
    "gpucluster_gates",
    "build_gates",
    "dra_kubelet_plugin_name",
    "GATE_CLUSTERPOLICY",
    "GATE_NICCLUSTERPOLICY",
    "GATE_DRA",
    "NICCLUSTERPOLICY_TIMEOUT",
    "DRA_ROLLOUT_TIMEOUT",
]

GATE_CLUSTERPOLICY = "gpu-operator-clusterpolicy-ready"
GATE_NICCLUSTERPOLICY = "network-operator-nicclusterpolicy-ready"
GATE_DRA = "nvidia-dra-driver-gpu-kubelet-plugin-rollout"

NICCLUSTERPOLICY_TIMEOUT = 900
"""15 min: no OFED driver container on OKE (host MOFED); only the RDMA shared device plugin
DaemonSet has to pull its image and register on every node."""

DRA_ROLLOUT_TIMEOUT = 900
"""15 min: kubelet plugin image pull and registration on every GPU node."""


def build_gates(cluster, recipe, components: Mapping[str, Any]) -> list[GateSpec]:
    """The OKE gates for the enabled ``components`` (see the module docstring)."""
    gates: list[GateSpec] = []
    if "gpu-operator" in components:
        gates.append(
            clusterpolicy_ready(  # CLUSTERPOLICY_DEFAULT_TIMEOUT: bare-metal shapes boot slowly after a driver reload
                description="ClusterPolicy cluster-policy is ready (GPU stack up on the GPU nodes)",
            )
        )
    if "network-operator" in components:
        dependents = {
            ref.name
            for ref in recipe.component_refs
            if ref.name in components and "network-operator" in ref.dependency_refs
        }
        waiters = dependents | ({"gpu-operator"} if "gpu-operator" in components else set())
        gates.append(
            nicclusterpolicy_ready(
                timeout_seconds=NICCLUSTERPOLICY_TIMEOUT,
                before=sorted(waiters) if waiters else None,
                description="every NicClusterPolicy is ready (RDMA shared device plugin on the InfiniBand nodes)",
            )
        )
    dra = components.get("nvidia-dra-driver-gpu")
    if dra is not None:
        gates.append(
            dra_kubelet_plugin_rollout(dra, min_ready=1, timeout_seconds=DRA_ROLLOUT_TIMEOUT)
        )
    return gates


@hookimpl
def gpucluster_gates(cluster, recipe, components):
    """The OKE readiness gates."""
    return build_gates(cluster, recipe, components)

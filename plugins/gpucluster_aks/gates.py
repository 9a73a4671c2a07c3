"""AKS plugin: readiness gates (hook ``gpucluster_gates``; see docs/gates.md).

* ``gpu-operator-clusterpolicy-ready``: ClusterPolicy ``cluster-policy`` (created by the
  gpu-operator chart) reports ``status.state`` = ``ready`` -- the operator's own signal that
  driver, toolkit, device plugin and validator are up on the GPU nodes. Every release that
  depends on gpu-operator (DRA driver, KAI scheduler, NVSentinel, Kubeflow Trainer, ...)
  waits on it. Source: AICR gpu-operator health check (ClusterPolicy singleton ready).
* ``network-operator-nicclusterpolicy-ready``: *every* NicClusterPolicy reports ``ready``
  (OFED driver container, RDMA shared device plugin). gpu-operator installs only after the
  RDMA stack is ready -- whether or not the recipe has the gpu-operator -> network-operator
  edge (AICR files up to v0.11 lack it): the gate names gpu-operator in ``before`` (plus
  network-operator's own dependents), as the OKE plugin does, so the OFED driver container and
  the GPU driver never install concurrently (AICR#2499). With ``networkoperator
  enabled=false`` the gate is dropped with its component. The NicClusterPolicy comes from the
  AKS manifest ``nic-cluster-policy-aks.yaml.j2`` (``supplied_by``: added to a RecipeResult's
  network-operator that lists none, so the gate never waits for an object nothing creates).
* ``nvidia-dra-driver-gpu-kubelet-plugin-rollout``: the DRA kubelet plugin DaemonSet rolled
  out, on at least one node wherever GPU nodes are expected (``gpu_nodes_expected``: GPU pools
  with nodes, and every ``existing:`` cluster, whose GPU nodes the accelerated node selector
  picks) -- 0 scheduled pods fails the gate instead of passing vacuously (AICR#2456). Only a
  cluster whose pools gpucluster creates without any GPU pool accepts 0. Source: AICR
  nvidia-dra-driver-gpu health check.

The gate objects come from the SDK constructors (``gpucluster.sdk.gates``); this module only
chooses the timeouts and ``min_ready``.

Written against the public SDK only, like a third-party plugin.
"""

from __future__ import annotations

from gpucluster.sdk import (
    clusterpolicy_ready,
    dra_kubelet_plugin_rollout,
    gpu_nodes_expected,
    hookimpl,
    nicclusterpolicy_ready,
)

__all__ = [
    "gpucluster_gates",
    "NICCLUSTERPOLICY_TIMEOUT",
    "NICCLUSTERPOLICY_MANIFEST",
    "DRA_ROLLOUT_TIMEOUT",
]

NICCLUSTERPOLICY_TIMEOUT = 2400
"""40 min: the DOCA OFED driver container compiles and loads its modules on every IB node
(``forcePrecompiled: false``) and may drain nodes one at a time while doing so."""

NICCLUSTERPOLICY_MANIFEST = "components/network-operator/manifests/nic-cluster-policy-aks.yaml.j2"
"""The AKS NicClusterPolicy (OFED driver container, RDMA shared device plugin): the object the
NicClusterPolicy gate waits for. A RecipeResult whose network-operator lists no manifest that
renders one (AICR files up to v0.11, whose network-operator 25.1.0 values rendered it from
``deployCR``) gets it from the platform instead of a gate that never succeeds."""

DRA_ROLLOUT_TIMEOUT = 900
"""15 min: kubelet plugin image pull and registration on every GPU node."""


@hookimpl
def gpucluster_gates(cluster, recipe, components):
    """The AKS readiness gates for the enabled components."""
    gates = []
    if "gpu-operator" in components:
        gates.append(
            clusterpolicy_ready()
        )  # CLUSTERPOLICY_DEFAULT_TIMEOUT: nodewright reboots, driver builds
    if "network-operator" in components:
        gpu = components.get("gpu-operator")
        before = None
        if gpu is not None and "network-operator" not in gpu.ref.dependency_refs:
            # the recipe lacks the edge (AICR files up to v0.11): the gate orders gpu-operator anyway
            before = sorted(
                {n for n, c in components.items() if "network-operator" in c.ref.dependency_refs}
                | {"gpu-operator"}
            )
        gates.append(
            nicclusterpolicy_ready(
                timeout_seconds=NICCLUSTERPOLICY_TIMEOUT,
                before=before,
                supplied_by=NICCLUSTERPOLICY_MANIFEST,
            )
        )
    dra = components.get("nvidia-dra-driver-gpu")
    if dra is not None:
        gates.append(
            dra_kubelet_plugin_rollout(
                dra,
                min_ready=1 if gpu_nodes_expected(cluster) else 0,
                timeout_seconds=DRA_ROLLOUT_TIMEOUT,
            )
        )
    return gates

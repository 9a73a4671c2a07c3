"""NVKE plugin: ``gpucluster_gates`` (readiness gates as data; the core renders them).

Order on ``network-operator`` (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup), "SR-IOV InfiniBand"):

1. ``ippools.nv-ipam.nvidia.com`` created (10 min), then Established (2 min): the operator
   creates the IPPool CRD while it reconciles the NicClusterPolicy, not the chart;
2. every NicClusterPolicy ``status.state == ready``;
3. the multus DaemonSet rolled out (a pod requesting a rail attachment on a node without multus
   gets its VF and no IB interface, silently).

All three form ``network-operator``'s ready handle, so ``sriov-ib-networks`` (the IPPools and
rail attachments) installs after them. On ``nvidia-dra-driver-gpu``: the kubelet plugin
DaemonSet rolled out with every ``compute-domains`` image at >= 0.5.1, before ComputeDomain
workloads (``kubeflow-trainer``) and the driver's other dependents.

On ``gpu-operator``: ClusterPolicy ``cluster-policy`` ``status.state == ready``
(:data:`gpucluster.sdk.gates.CLUSTERPOLICY_DEFAULT_TIMEOUT`). On NVKE the GPU Operator installs the driver, toolkit and GDRCopy
on untainted bare-metal trays (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup), "Cluster prerequisites"), so its chart
being installed says nothing about the GPUs; the gate is gpu-operator's ready handle, so the DRA
driver (whose kubelet plugin needs the driver loaded) and every other dependent waits for it.

Rollout gates count only the pods a DaemonSet schedules; both DaemonSets gated here exclude
control-plane nodes (the NicClusterPolicy ``nodeAffinity`` and the DRA values), which carry GPU
labels without a GPU or ConnectX-7.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucluster.sdk import (
    GateSpec,
    clusterpolicy_ready,
    dra_kubelet_plugin_rollout,
    hookimpl,
    nicclusterpolicy_ready,
)
from gpucluster_nvke.fabric import MULTUS_DAEMONSET

MIN_DRA_VERSION = "0.5.1"
"""Lowest DRA driver that joins a shared NVLink clique under OwnerReferencesPermissionEnforcement."""

COMPUTE_DOMAIN_WORKLOADS = ("kubeflow-trainer",)
"""Components whose workloads claim ComputeDomains (they wait for the DRA version gate)."""

IPPOOL_CRD = "ippools.nv-ipam.nvidia.com"
GATE_IPPOOL_CRD = "network-operator-ippool-crd"
GATE_NCP_READY = "network-operator-nicclusterpolicy-ready"
GATE_MULTUS = "network-operator-multus-rollout"
GATE_DRA = "nvidia-dra-driver-gpu-kubelet-plugin-version"
GATE_CLUSTERPOLICY = "gpu-operator-clusterpolicy-ready"


def build_gates(recipe, components: Mapping[str, Any]) -> list[GateSpec]:
    """The NVKE gates for the enabled ``components`` (see module docstring)."""
    gates: list[GateSpec] = []
    if "gpu-operator" in components:
        gates.append(
            clusterpolicy_ready(
                name=GATE_CLUSTERPOLICY,  # CLUSTERPOLICY_DEFAULT_TIMEOUT: the -nvidia-64k driver build per tray
                description="ClusterPolicy cluster-policy is ready (driver, toolkit, GDRCopy up on the GB200 trays)",
            )
        )
    net = components.get("network-operator")
    if net is not None:
        ns = net.ref.namespace
        gates += [
            GateSpec(
                name=GATE_IPPOOL_CRD,
                component="network-operator",
                kind="crd-established",
                api_version="apiextensions.k8s.io/v1",
                resource="customresourcedefinitions",
                kind_name="CustomResourceDefinition",
                name_of_object=IPPOOL_CRD,
                create_timeout_seconds=600,
                timeout_seconds=120,
            ),
            nicclusterpolicy_ready(
                name=GATE_NCP_READY, timeout_seconds=900, after=[GATE_IPPOOL_CRD]
            ),
            GateSpec(
                name=GATE_MULTUS,
                component="network-operator",
                kind="rollout",
                api_version="apps/v1",
                resource="daemonsets",
                kind_name="DaemonSet",
                name_of_object=MULTUS_DAEMONSET,
                namespace=ns,
                timeout_seconds=600,
                after=[GATE_NCP_READY],
            ),
        ]
    dra = components.get("nvidia-dra-driver-gpu")
    if dra is not None:
        dependents = {
            ref.name
            for ref in recipe.component_refs
            if ref.name in components and "nvidia-dra-driver-gpu" in ref.dependency_refs
        }
        workloads = {c for c in COMPUTE_DOMAIN_WORKLOADS if c in components}
        gates.append(
            dra_kubelet_plugin_rollout(
                dra,
                name=GATE_DRA,
                min_version=MIN_DRA_VERSION,
                container="compute-domains",
                timeout_seconds=600,
                # With ComputeDomain workloads present, name every waiter explicitly (the
                # driver's own dependents plus those workloads); otherwise the gate is simply
                # the driver's ready handle.
                before=sorted(dependents | workloads) if workloads else None,
            )
        )
    return gates


@hookimpl
def gpucluster_gates(cluster, recipe, components):
    return build_gates(recipe, components)

"""Nodes as the plan expects them: which nodes are GPU nodes, how many GPUs each should advertise,
and whether a pod spec may run on a node (Kubernetes scheduling predicates, read-only).

The plan knows its GPU nodes in one of two ways:

* node pools gpucluster creates (``ClusterSpec.pools``, e.g. AKS): each GPU pool's nodes are the
  nodes carrying the pool's ``node_selector`` (AKS: ``kubernetes.azure.com/agentpool=<pool>``),
  ``node_count`` of them, each advertising ``gpus_per_node`` GPUs (the VM size's GPU count, from
  the platform's data) -- both set by the platform plugin in ``gpucluster_prepare_cluster``;
* an existing cluster (no pools: NVKE, OKE, ``existing:``): the GPU nodes are the nodes matching
  ``scheduling.accelerated.nodeSelector`` when the cluster file sets one, else those labelled
  ``nvidia.com/gpu.present=true`` (GPU Feature Discovery / NFD), control-plane nodes
  (``node-role.kubernetes.io/control-plane``) excluded; each should advertise the GPUs GPU Feature
  Discovery counted in its ``nvidia.com/gpu.count`` label (NVIDIA GPU Feature Discovery labels).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpucluster.model import ClusterSpec

__all__ = [
    "GpuNodeGroup",
    "gpu_node_groups",
    "pod_fits",
    "labels_match",
    "GPU_PRESENT_LABEL",
    "GPU_COUNT_LABEL",
    "CONTROL_PLANE_LABEL",
]

GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
"""GPU Feature Discovery's label with the number of GPUs it found on the node."""
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


@dataclass(frozen=True)
class GpuNodeGroup:
    """GPU nodes the plan expects, selected by labels.

    Attributes:
        name: the pool name, or ``gpu-nodes`` for an existing cluster.
        selector: labels every node of the group carries.
        exclude: label keys a node of the group must not carry.
        node_count: expected nodes (None: any number, at least one).
        gpus_per_node: GPUs each node advertises (None: its ``nvidia.com/gpu.count`` label).
        vm_size: the pool's VM size ('' for an existing cluster), for messages.
    """

    name: str
    selector: Mapping[str, str]
    exclude: tuple[str, ...] = ()
    node_count: int | None = None
    gpus_per_node: int | None = None
    vm_size: str = ""

    def selects(self, node: Mapping[str, Any]) -> bool:
        labels = (node.get("metadata") or {}).get("labels") or {}
        return labels_match(labels, self.selector) and not any(k in labels for k in self.exclude)

    def describe(self) -> str:
        sel = ",".join(f"{k}={v}" for k, v in sorted(self.selector.items()))
        return f"pool {self.name} ({sel})" if self.vm_size else f"GPU nodes ({sel})"


def labels_match(labels: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def gpu_node_groups(cluster: ClusterSpec) -> list[GpuNodeGroup]:
    """The GPU node groups of ``cluster`` (module docstring). Empty for a cluster whose pools
    have no GPU pool."""
    if cluster.pools:
        return [
            GpuNodeGroup(
                name=p.name,
                selector=dict(p.node_selector or p.labels),
                node_count=p.node_count,
                gpus_per_node=p.gpus_per_node,
                vm_size=p.vm_size,
            )
            for p in cluster.pools
            if p.gpu
        ]
    selector = dict(cluster.scheduling.accelerated_node_selector) or {GPU_PRESENT_LABEL: "true"}
    return [GpuNodeGroup(name="gpu-nodes", selector=selector, exclude=(CONTROL_PLANE_LABEL,))]


def _expression_holds(labels: Mapping[Any, Any], expr: Mapping[str, Any]) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), list(expr.get("values") or [])
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except (TypeError, ValueError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") not in (None, "", taint.get("effect")):
            continue
        if not t.get("key"):
            if t.get("operator") == "Exists":
                return True
            continue
        if t.get("key") != taint.get("key"):
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def pod_fits(node: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> bool:
    """Whether the scheduler may place a pod of ``pod_spec`` on ``node``: ``nodeSelector``,
    required node affinity (terms ORed, expressions ANDed; ``matchExpressions`` only) and
    ``NoSchedule``/``NoExecute`` taints tolerated (Kubernetes docs "Assigning Pods to Nodes",
    "Taints and Tolerations"). Resources and pod affinity are not considered."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if not labels_match(labels, pod_spec.get("nodeSelector") or {}):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(
        all(_expression_holds(labels, e) for e in (term.get("matchExpressions") or []))
        for term in terms
    ):
        return False
    tolerations = pod_spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(
            tolerations, taint
        ):
            return False
    return True

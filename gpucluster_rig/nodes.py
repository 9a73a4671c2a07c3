"""KWOK nodes shaped like a cluster file's pools.

For a cluster whose pools gpucluster provisions (AKS), each pool becomes up to
:data:`MAX_NODES_PER_POOL` nodes with the labels the pool's nodes will carry (the platform's
``node_selector``, the scheduling node selectors the constructs write onto the pool, the pool's own
labels) and its taints. A pool-less cluster (an existing NVKE or OKE cluster) gets a system pool
labelled with ``scheduling.system_node_selector`` and a GPU pool labelled with
``scheduling.accelerated_node_selector`` and tainted for every keyed accelerated toleration, or,
without one, with the platform's GPU-node taints (``Platform.gpu_taints``, as ``gpucluster lint``
assumes them).

GPU nodes also carry what the GPU software stack selects by once it runs: the ``nvidia.com/gpu``
capacity and the Node Feature Discovery / GPU Feature Discovery labels
(``feature.node.kubernetes.io/pci-10de.present``, ``nvidia.com/gpu.present``, ``.count``,
``.product``; NVIDIA GPU Operator docs, "GPU Feature Discovery"), so DaemonSets that select GPU
nodes by them land there. No node carries KWOK's ``kwok.x-k8s.io/node`` taint (no DaemonSet
would tolerate it); every node gets the annotation KWOK manages nodes by.
"""

from __future__ import annotations

from typing import Any

from gpucluster.model import ClusterSpec, NodePool

MAX_NODES_PER_POOL = 3
"""Nodes made per pool at most (placement needs a few, not a fleet)."""

GPU_PRODUCT = {8: "NVIDIA-H100-80GB-HBM3", 4: "NVIDIA-GB200"}
"""``nvidia.com/gpu.product`` by GPUs per node for the rig's nodes (H100 SXM boards carry 8, GB200
compute trays 4); informational only."""


def _node(
    name: str, pool: str, labels: dict[str, str], taints: list[dict[str, str]], gpus: int, arch: str
) -> dict[str, Any]:
    capacity = {
        "cpu": "96" if gpus else "8",
        "memory": "1800Gi" if gpus else "32Gi",
        "pods": "250",
        "ephemeral-storage": "500Gi",
    }
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": arch,
        "type": "kwok",
        "gpucluster.rig/pool": pool,
        **labels,
    }
    if gpus:
        all_labels.update(
            {
                "feature.node.kubernetes.io/pci-10de.present": "true",
                # the ConnectX InfiniBand/RoCE NICs of H100 and GB200 systems (NFD's PCI vendor label)
                "feature.node.kubernetes.io/pci-15b3.present": "true",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.product": GPU_PRODUCT.get(gpus, "NVIDIA-GPU"),
            }
        )
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": all_labels,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }
    if taints:
        node["spec"]["taints"] = taints
    return node


def _taints(pool: NodePool) -> list[dict[str, str]]:
    out = []
    for t in pool.taints:
        d = {"key": t.key, "effect": t.effect}
        if t.value:
            d["value"] = t.value
        out.append(d)
    return out


def platform_gpu_taints(service: str) -> list[dict[str, str]]:
    """The GPU-node taints the platform serving ``service`` declares
    (:attr:`gpucluster.model.Platform.gpu_taints`: OKE and NVKE ``nvidia.com/gpu:NoSchedule``) as
    Node ``spec.taints`` entries; empty for an unknown service or none declared."""
    from gpucluster.plugins import platforms
    from gpucluster.recipes.scheduling import parse_taint

    platform = platforms().get(service)
    out: list[dict[str, str]] = []
    for spec in platform.gpu_taints if platform is not None else ():
        t = parse_taint(spec)
        entry = {"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})}
        if entry not in out:
            out.append(entry)
    return out


ARM_ACCELERATORS = frozenset({"gb200", "gb300"})
"""Accelerators whose nodes are arm64 (Grace CPUs); every other cluster's nodes are amd64."""


def nodes_for(
    cluster: ClusterSpec, *, arch: str | None = None, per_pool: int = MAX_NODES_PER_POOL
) -> list[dict[str, Any]]:
    """The Node objects of ``cluster`` (prepared by its platform plugin: pools, scheduling);
    ``arch`` (``kubernetes.io/arch``) defaults to arm64 for Grace systems, else amd64; a pool
    becomes ``min(nodeCount, per_pool)`` nodes (at least 1).

    Returns:
        Node manifests named ``<pool>-<i>`` (i from 0), each with ``metadata.labels``
        (``gpucluster.rig/pool: <pool>`` among them), ``spec.taints`` and ``status.capacity``.
    """
    if arch is None:
        arch = "arm64" if cluster.criteria.accelerator in ARM_ACCELERATORS else "amd64"
    sched = cluster.scheduling
    out: list[dict[str, Any]] = []
    if cluster.pools:
        for pool in cluster.pools:
            labels = dict(pool.node_selector)
            labels.update(
                sched.accelerated_node_selector if pool.gpu else sched.system_node_selector
            )
            labels.update(pool.labels)
            gpus = (pool.gpus_per_node or 8) if pool.gpu else 0
            for i in range(min(pool.node_count, per_pool) or 1):
                out.append(_node(f"{pool.name}-{i}", pool.name, labels, _taints(pool), gpus, arch))
        return out
    gpu_taints = [
        {"key": t.key, "value": t.value or "present", "effect": t.effect or "NoSchedule"}
        for t in sched.accelerated_tolerations
        if t.key
    ] or platform_gpu_taints(cluster.criteria.service)
    for i in range(2):
        out.append(_node(f"system-{i}", "system", dict(sched.system_node_selector), [], 0, arch))
    for i in range(2):
        out.append(
            _node(f"gpu-{i}", "gpu", dict(sched.accelerated_node_selector), gpu_taints, 4, arch)
        )
    return out

"""AKS plugin: platform hooks (declaration, catalog directory, cluster defaults).

Facts (seed ``aks-gpu-setup``): AKS needs Kubernetes 1.34+ (DRA GA); the 8-GPU
``Standard_ND96isr_H100_v5`` SKU is the supported H100 node size; GPU pools are unmanaged
(AKS "Driver only" install profile by default). The ``gpuStack`` profile picks who installs
the GPU driver and container toolkit, and the pool's AKS ``gpu_driver`` property must match
it: ``azure-managed`` -> ``Install`` (AKS default), ``operator-managed`` -> ``None``
(``--gpu-driver none``).
"""

from __future__ import annotations

import re
from pathlib import Path

from gpucluster.sdk import CORE_SETTING_KEYS, ClusterSpec, GpuclusterError, NodePool, Platform, Taint, hookimpl

__all__ = [
    "gpucluster_platforms",
    "gpucluster_catalog_dirs",
    "gpucluster_prepare_cluster",
    "AKS_PLATFORM",
    "DEFAULT_REGION",
    "GPU_VM_SIZE",
    "SYSTEM_VM_SIZE",
    "GPU_TAINT",
    "GPU_LABELS",
    "GPU_DRIVER_FOR_PROFILE",
]

SERVICE = "aks"
CATALOG_DIR = Path(__file__).parent / "catalog"

DEFAULT_REGION = "eastus"
"""Default AKS location: a region offering ND H100 v5 (check your subscription's quota)."""

GPU_VM_SIZE = "Standard_ND96isr_H100_v5"
"""8x H100 with InfiniBand; the SKU AICR's AKS recipes are validated on (seed aks-gpu-setup)."""

SYSTEM_VM_SIZE = "Standard_D8s_v5"
"""System pool VM size for the default pools (8 vCPU, 32 GiB: room for the operators)."""

SETTING_KEYS = CORE_SETTING_KEYS
"""``settings`` keys an AKS cluster accepts: the core ones (``gateImage``, the kubectl image of the
gate Jobs, validated by the core); AKS has no platform settings of its own, so anything else is a typo."""

SYSTEM_NODE_COUNT = 2
GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
"""Taint of GPU pools; runtime components tolerate it with a keyed toleration (seed: a
wildcard toleration deadlocks nodewright on AKS)."""

GPU_LABELS = {"nvidia.com/gpu.present": "true"}
"""Node labels of GPU pools (a key the pool already sets keeps its value). The label GPU Operator's
NFD rules set on GPU nodes anyway; set from the first boot, the default accelerated node selector
(derived from the labels all GPU pools share) targets GPU-only components (DRA kubelet plugin,
nodewright customizations, training runtimes) to GPU nodes before NFD has run."""

PROFILE_NAME = "gpuStack"
PROFILE_DEFAULT = "azure-managed"
GPU_DRIVER_FOR_PROFILE = {"azure-managed": "Install", "operator-managed": "None"}
"""AKS ``gpu_driver`` node pool property per gpuStack value (seed: both must come from one mode)."""

AKS_PLATFORM = Platform(
    service=SERVICE,
    display_name="Azure Kubernetes Service",
    accelerators=("h100",),
    oses=("ubuntu",),
    intents=("training", "inference"),
    platforms=("any", "kubeflow", "dynamo"),
    provisions_cluster=True,
    min_kubernetes="1.34",
    provider_id_prefix="azure://",
    profiles={PROFILE_NAME: (PROFILE_DEFAULT, tuple(sorted(GPU_DRIVER_FOR_PROFILE)))},
)

POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
"""AKS Linux node pool names: lowercase letters and digits, start with a letter, 1-12 chars."""
MAX_NODES_PER_POOL = 1000
GPU_DRIVERS = ("Install", "None")


@hookimpl
def gpucluster_platforms():
    """Declare the ``aks`` service (H100, Ubuntu, training/inference, gpuStack profile)."""
    return [AKS_PLATFORM]


@hookimpl
def gpucluster_catalog_dirs():
    """The AKS overlays and AKS values files (``plugins/gpucluster_aks/catalog``)."""
    return [CATALOG_DIR]


@hookimpl
def gpucluster_prepare_cluster(cluster: ClusterSpec):
    """Fill AKS defaults and validate AKS inputs.

    * ``region``: :data:`DEFAULT_REGION` when omitted.
    * ``profile``: ``gpuStack`` defaults to ``azure-managed``; names and values are checked by the
      core against ``Platform.profiles`` before this hook runs.
    * ``pools``: default ``system`` (``Standard_D8s_v5`` x2) + ``gpu``
      (``Standard_ND96isr_H100_v5`` x1) for clusters gpucluster creates. GPU pools get the
      ``nvidia.com/gpu=present:NoSchedule`` taint, the ``nvidia.com/gpu.present: "true"`` label
      (:data:`GPU_LABELS`) and ``gpu_driver`` derived from gpuStack (``Install``/``None``) when
      not given. Names must be AKS pool names and unique, node
      counts 1..1000, at least one non-GPU (system) pool.
    * the Kubernetes floor (>= 1.34) is a policy check (``AKS-K8S-VERSION`` in ``policy``).

    Returns:
        the prepared ClusterSpec, or None for other services.

    Raises:
        GpuclusterError: naming the cluster file, cluster and key.
    """
    if cluster.criteria.service != SERVICE:
        return None
    where = {"file": cluster.source, "cluster": cluster.name}
    for name in sorted(cluster.settings or {}, key=str):
        if name not in SETTING_KEYS:
            raise GpuclusterError(
                f"unknown setting '{name}' for service aks",
                key=f"settings.{name}",
                allowed=", ".join(SETTING_KEYS),
                fix="remove it or fix its spelling (AKS settings: docs/cluster-file.md)",
                **where,
            )
    stack = cluster.profile.get(PROFILE_NAME, PROFILE_DEFAULT)  # validated by the core
    if cluster.region is None:
        cluster.region = DEFAULT_REGION
    if not cluster.pools and cluster.existing is None:
        cluster.pools = [
            NodePool(name="system", vm_size=SYSTEM_VM_SIZE, node_count=SYSTEM_NODE_COUNT, gpu=False),
            NodePool(name="gpu", vm_size=GPU_VM_SIZE, node_count=1, gpu=True),
        ]
    _validate_pools(cluster, stack, where)
    return cluster


def _validate_pools(cluster: ClusterSpec, stack: str, where: dict) -> None:
    seen: set[str] = set()
    for i, pool in enumerate(cluster.pools):
        key = f"pools[{i}]"
        if not POOL_NAME.match(pool.name):
            raise GpuclusterError(
                f"node pool name '{pool.name}' is not a valid AKS pool name",
                key=f"{key}.name",
                allowed="1-12 lowercase letters and digits, starting with a letter",
                fix=f"rename it, e.g. {(re.sub(r'[^a-z0-9]', '', pool.name.lower()).lstrip('0123456789')[:12] or 'gpu')}",
                **where,
            )
        if pool.name in seen:
            raise GpuclusterError(f"node pool name '{pool.name}' is used twice", key=f"{key}.name", fix="rename one pool", **where)
        seen.add(pool.name)
        if not 1 <= pool.node_count <= MAX_NODES_PER_POOL:
            raise GpuclusterError(
                f"node pool '{pool.name}' has nodeCount {pool.node_count}",
                key=f"{key}.nodeCount",
                allowed=f"1..{MAX_NODES_PER_POOL}",
                fix=f"set nodeCount between 1 and {MAX_NODES_PER_POOL}; add pools for more nodes",
                **where,
            )
        if not pool.gpu:
            if pool.gpu_driver is not None:
                raise GpuclusterError(
                    f"node pool '{pool.name}' is not a GPU pool but sets gpuDriver",
                    key=f"{key}.gpuDriver",
                    fix="remove gpuDriver or set gpu: true",
                    **where,
                )
            continue
        if pool.gpu_driver is None:
            pool.gpu_driver = GPU_DRIVER_FOR_PROFILE[stack]
        elif pool.gpu_driver not in GPU_DRIVERS:
            raise GpuclusterError(
                f"node pool '{pool.name}' has gpuDriver '{pool.gpu_driver}'",
                key=f"{key}.gpuDriver",
                allowed=", ".join(GPU_DRIVERS),
                fix="remove gpuDriver: gpucluster derives it from profile.gpuStack (azure-managed -> Install, "
                "operator-managed -> None)",
                **where,
            )
        if not any(t.key == GPU_TAINT.key for t in pool.taints):
            pool.taints.append(Taint(GPU_TAINT.key, GPU_TAINT.value, GPU_TAINT.effect))
        for key, value in GPU_LABELS.items():
            if key not in pool.labels:
                pool.labels = dict(sorted({**pool.labels, key: value}.items()))
    if cluster.pools and all(p.gpu for p in cluster.pools):
        raise GpuclusterError(
            "every node pool is a GPU pool; AKS needs a system pool for the control components",
            key="pools",
            fix="add a pool with gpu: false (e.g. Standard_D8s_v5 x2)",
            **where,
        )

"""AKS plugin: ``gpucluster_cluster_stack`` (the only AKS code that touches cdktf).

``constructs_lib`` is imported inside the hook, so loading the plugin (and every pure-Python
command: recipe, explain, graph) never imports cdktf or the azurerm binding.
"""

from __future__ import annotations

from gpucluster.sdk import ClusterConnection, ClusterSpec, GpuclusterError, Recipe, hookimpl

__all__ = ["gpucluster_cluster_stack", "cluster_props"]

SERVICE = "aks"
RESERVED_LABEL_PREFIXES = ("kubernetes.azure.com/", "kubernetes.io/", "k8s.io/")
"""Label prefixes AKS sets itself and refuses in ``node_labels``; selectors on them already match."""


def _reserved(key: str) -> bool:
    return key.startswith(RESERVED_LABEL_PREFIXES) or "kubernetes.io/" in key


def _labels(selector: dict[str, str], own: dict[str, str] | None = None) -> dict[str, str]:
    """Node labels of a pool: the node selector's labels except reserved ones (AKS sets those it
    knows, e.g. ``kubernetes.azure.com/agentpool``), plus the pool's own labels."""
    merged = {k: v for k, v in (selector or {}).items() if not _reserved(k)}
    merged.update(own or {})
    return dict(sorted(merged.items()))


def _check_own_labels(cluster: ClusterSpec, index: int) -> None:
    pool = cluster.pools[index]
    for key in sorted(pool.labels or {}):
        if _reserved(key):
            raise GpuclusterError(
                f"label '{key}' of pool '{pool.name}' is in a namespace AKS reserves for the labels it sets itself "
                f"({', '.join(RESERVED_LABEL_PREFIXES)}); AKS refuses it as a node label",
                file=cluster.source,
                cluster=cluster.name,
                key=f"pools[{index}].labels.{key}",
                fix="use a label of your own (e.g. example.com/role); to select on labels AKS sets "
                "(kubernetes.azure.com/agentpool, kubernetes.azure.com/accelerator), use scheduling node selectors",
            )


def _tolerates_critical_addons(toleration) -> bool:
    """Kubernetes matching of ``toleration`` against taint ``CriticalAddonsOnly=true:NoSchedule``."""
    if toleration.effect not in (None, "", "NoSchedule"):
        return False
    if not toleration.key:
        return toleration.operator == "Exists"
    return toleration.key == "CriticalAddonsOnly" and (toleration.operator == "Exists" or toleration.value == "true")


def _check_critical_addons_reachable(cluster: ClusterSpec, index: int) -> None:
    """A CriticalAddonsOnly system pool needs the system toleration, or another untainted CPU pool."""
    system = cluster.pools[index]
    if not system.taints:
        return
    if any(not p.gpu and not p.taints for p in cluster.pools):
        return
    if any(_tolerates_critical_addons(t) for t in cluster.scheduling.system_tolerations):
        return
    raise GpuclusterError(
        f"the system pool '{system.name}' is tainted {system.taints[0]}, no other pool without taints runs non-GPU "
        "pods, and no scheduling.system.tolerations tolerates the taint: operators and readiness gates would stay "
        "Pending",
        file=cluster.source,
        cluster=cluster.name,
        key=f"pools[{index}].taints",
        fix="add 'CriticalAddonsOnly:NoSchedule' to scheduling.system.tolerations, or add a pool with gpu: false and no "
        "taints",
    )


def cluster_props(cluster: ClusterSpec):
    """Map a prepared :class:`ClusterSpec` to :class:`constructs_lib.AksGpuClusterProps`.

    * the first non-GPU pool is the AKS system (default) pool, other pools are User pools;
    * GPU pools carry the accelerated node selector labels, the system pool the system node
      selector labels (what the components' nodeSelectors select on), plus the pool's own;
    * ``gpu_stack`` from ``profile.gpuStack`` (default ``azure-managed``); pool ``gpu_driver`` as
      prepared by :func:`gpucluster_aks.platform.gpucluster_prepare_cluster`.

    Raises:
        GpuclusterError: a pool's own label is in a namespace AKS reserves (``pools[i].labels.<key>``;
            selector labels there are left to AKS, which sets the ones it knows); the system pool is tainted
            ``CriticalAddonsOnly`` while no system toleration tolerates it and no untainted CPU pool
            exists (non-GPU pods would stay Pending); or the system pool has a taint other than ``CriticalAddonsOnly=true:NoSchedule``,
            the only one azurerm 4.x can set on the AKS default pool (key ``pools[i].taints``).
    """
    from constructs_lib import AksGpuClusterProps, NodePoolProps, gpu_pool, system_pool
    from constructs_lib.aks import CRITICAL_ADDONS_TAINT

    scheduling = cluster.scheduling
    system = None
    pools = []
    for index, pool in enumerate(cluster.pools):
        _check_own_labels(cluster, index)
        if not pool.gpu and system is None:
            for taint in (str(t) for t in pool.taints):
                if taint != CRITICAL_ADDONS_TAINT:
                    raise GpuclusterError(
                        f"the AKS system pool '{pool.name}' cannot carry taint {taint}: azurerm 4.x sets only "
                        f"{CRITICAL_ADDONS_TAINT} on the default node pool (only_critical_addons_enabled)",
                        file=cluster.source,
                        cluster=cluster.name,
                        key=f"pools[{index}].taints",
                        allowed=CRITICAL_ADDONS_TAINT,
                        fix="remove the taint, or put the workloads that need it on a separate pool with gpu: false",
                    )
            _check_critical_addons_reachable(cluster, index)
            system = system_pool(
                name=pool.name,
                vm_size=pool.vm_size,
                node_count=pool.node_count,
                labels=_labels(scheduling.system_node_selector, pool.labels),
                taints=tuple(str(t) for t in pool.taints),
            )
            continue
        pools.append(
            NodePoolProps(
                name=pool.name,
                vm_size=pool.vm_size,
                node_count=pool.node_count,
                gpu=pool.gpu,
                gpu_driver=pool.gpu_driver if pool.gpu else None,
                labels=_labels(scheduling.accelerated_node_selector if pool.gpu else {}, pool.labels),
                taints=tuple(str(t) for t in pool.taints),
                managed_gpu=pool.managed_gpu,
            )
        )
    kwargs = {}
    if system is not None:
        kwargs["system_pool"] = system
    if not cluster.pools:
        kwargs["pools"] = (gpu_pool(labels=_labels(scheduling.accelerated_node_selector)),)
    else:
        kwargs["pools"] = tuple(pools)
    return AksGpuClusterProps(
        name=cluster.name,
        location=cluster.region or "eastus",
        kubernetes_version=cluster.kubernetes_version,
        gpu_stack=cluster.profile.get("gpuStack", "azure-managed"),
        tags={"gpucluster-cluster": cluster.name},
        **kwargs,
    )


@hookimpl
def gpucluster_cluster_stack(scope, cluster: ClusterSpec, recipe: Recipe):
    """Build the AKS cluster (:class:`constructs_lib.AksGpuCluster`) in the ``<name>-cluster`` stack.

    Returns:
        ClusterConnection with the cluster's host and PEM client credentials (tokens), or
        None for clusters of other services.
    """
    if cluster.criteria.service != SERVICE:
        return None
    from constructs_lib import AksGpuCluster

    aks = AksGpuCluster(scope, "aks", cluster_props(cluster))
    connection: ClusterConnection = aks.connection()
    return connection

"""AKS plugin: ``gpucluster_cluster_stack`` (the only AKS code that touches cdktf).

``constructs_lib`` is imported inside the hook, so loading the plugin (and every pure-Python
command: recipe, explain, graph) never imports cdktf or the azurerm binding.
"""

from __future__ import annotations

from gpucluster.errors import GpuclusterError
from gpucluster.sdk import ClusterConnection, ClusterSpec, Recipe, hookimpl

__all__ = ["gpucluster_cluster_stack", "cluster_props"]

SERVICE = "aks"
RESERVED_LABEL_PREFIXES = ("kubernetes.azure.com/", "kubernetes.io/", "k8s.io/")
"""Label prefixes AKS sets itself and refuses in ``node_labels``; selectors on them already match."""


def _labels(*sources: dict[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for source in sources:
        merged.update(source or {})
    return {k: v for k, v in sorted(merged.items()) if not k.startswith(RESERVED_LABEL_PREFIXES) and "kubernetes.io/" not in k}


def cluster_props(cluster: ClusterSpec):
    """Map a prepared :class:`ClusterSpec` to :class:`constructs_lib.AksGpuClusterProps`.

    * the first non-GPU pool is the AKS system (default) pool, other pools are User pools;
    * GPU pools carry the accelerated node selector labels, the system pool the system node
      selector labels (what the components' nodeSelectors select on), plus the pool's own;
    * ``gpu_stack`` from ``profile.gpuStack`` (default ``azure-managed``); pool ``gpu_driver`` as
      prepared by :func:`gpucluster_aks.platform.gpucluster_prepare_cluster`.

    Raises:
        GpuclusterError: the system pool has a taint other than ``CriticalAddonsOnly=true:NoSchedule``,
            the only one azurerm 4.x can set on the AKS default pool (key ``pools[i].taints``).
    """
    from constructs_lib import AksGpuClusterProps, NodePoolProps, gpu_pool, system_pool
    from constructs_lib.aks import CRITICAL_ADDONS_TAINT

    scheduling = cluster.scheduling
    system = None
    pools = []
    for index, pool in enumerate(cluster.pools):
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

"""AKS plugin: ``gpucluster_cluster_stack`` (the only AKS code that touches cdktf).

``constructs_lib`` is imported inside the functions, so loading the plugin (and every pure-Python
command: recipe, plan, graph) never imports cdktf or the azurerm binding. Every AKS decision is
taken in :mod:`gpucluster_aks.platform` (``gpucluster_prepare_cluster`` writes it into the
ClusterSpec and refuses bad input at plan time); this module only maps the prepared spec to
:class:`constructs_lib.AksGpuClusterProps`.
"""

from __future__ import annotations

from gpucluster.sdk import ClusterConnection, ClusterSpec, Recipe, hookimpl
from gpucluster_aks.platform import CRITICAL_ADDONS_TAINT, RESERVED_LABEL_PREFIXES, resource_group_name, rotation_name, system_pool_index

__all__ = ["gpucluster_cluster_stack", "cluster_props"]


def _reserved(key: str) -> bool:
    return key.startswith(RESERVED_LABEL_PREFIXES) or "kubernetes.io/" in key


def _labels(selector: dict[str, str], own: dict[str, str] | None = None) -> dict[str, str]:
    """Node labels of a pool: the node selector's labels except reserved ones (AKS sets those it
    knows, e.g. ``kubernetes.azure.com/agentpool``), plus the pool's own labels."""
    merged = {k: v for k, v in (selector or {}).items() if not _reserved(k)}
    merged.update(own or {})
    return dict(sorted(merged.items()))


def cluster_props(cluster: ClusterSpec):
    """Map a ClusterSpec prepared by :func:`gpucluster_aks.platform.gpucluster_prepare_cluster` to
    :class:`constructs_lib.AksGpuClusterProps` (no decision and no check here).

    * the first non-GPU pool is the AKS system (default) pool, other pools are User pools;
      a system pool tainted ``CriticalAddonsOnly=true:NoSchedule`` renders as
      ``only_critical_addons``;
    * GPU pools carry the accelerated node selector labels, the system pool the system node
      selector labels (what the components' nodeSelectors select on), plus the pool's own;
    * pool taints and ``gpu_driver`` as prepared.
    """
    from constructs_lib import AksGpuClusterProps, NodePoolProps

    scheduling = cluster.scheduling
    system_index = system_pool_index(cluster)
    system = cluster.pools[system_index]
    pools = []
    for index, pool in enumerate(cluster.pools):
        if index == system_index:
            continue
        pools.append(
            NodePoolProps(
                name=pool.name,
                vm_size=pool.vm_size,
                node_count=pool.node_count,
                gpu_driver=pool.gpu_driver if pool.gpu else None,
                labels=_labels(scheduling.accelerated_node_selector if pool.gpu else {}, pool.labels),
                taints=tuple(str(t) for t in pool.taints),
            )
        )
    return AksGpuClusterProps(
        name=cluster.name,
        location=cluster.region,
        kubernetes_version=cluster.kubernetes_version,
        resource_group_name=resource_group_name(cluster),
        system_pool=NodePoolProps(
            name=system.name,
            vm_size=system.vm_size,
            node_count=system.node_count,
            labels=_labels(scheduling.system_node_selector, system.labels),
            only_critical_addons=any(str(t) == str(CRITICAL_ADDONS_TAINT) for t in system.taints),
            temporary_name_for_rotation=rotation_name(system.name),
        ),
        pools=tuple(pools),
        tags={"gpucluster-cluster": cluster.name},
    )


@hookimpl
def gpucluster_cluster_stack(scope, cluster: ClusterSpec, recipe: Recipe):
    """Build the AKS cluster (:class:`constructs_lib.AksGpuCluster`) in the ``<name>-cluster`` stack.

    Returns:
        ClusterConnection with the cluster's host and PEM client credentials (tokens).
    """
    from constructs_lib import AksGpuCluster

    aks = AksGpuCluster(scope, "aks", cluster_props(cluster))
    connection: ClusterConnection = aks.connection()
    return connection

"""AKS plugin: ``gpucluster_cluster_stack`` (the only AKS code that touches cdktf).

``gpucluster_cdk.constructs_lib`` is imported inside the functions, so loading the plugin (and every pure-Python
command: recipe, plan, graph) never imports cdktf or the azurerm binding. Every AKS decision is
taken in :mod:`gpucluster_aks.platform` (``gpucluster_prepare_cluster`` writes it into the
ClusterSpec and refuses bad input at plan time); this module only maps the prepared spec to
:class:`gpucluster_cdk.constructs_lib.AksGpuClusterProps`.
"""

from __future__ import annotations

from gpucluster.sdk import ClusterConnection, ClusterSpec, Recipe, hookimpl
from gpucluster_aks.platform import (
    CRITICAL_ADDONS_TAINT,
    RESERVED_LABEL_PREFIXES,
    ephemeral_os_disk_fits,
    resource_group_name,
    rotation_name,
    system_pool_index,
)
from gpucluster_aks.settings import (
    CPU_POOL_UPGRADE,
    DEPLOYER_ROLE,
    GPU_POOL_UPGRADE,
    KUBELOGIN_SERVER_ID,
    AksSettings,
    parse_settings,
)

__all__ = ["gpucluster_cluster_stack", "cluster_props"]


def _reserved(key: str) -> bool:
    return key.startswith(RESERVED_LABEL_PREFIXES) or "kubernetes.io/" in key


def _labels(selector: dict[str, str], own: dict[str, str] | None = None) -> dict[str, str]:
    """Node labels of a pool: the node selector's labels except reserved ones (AKS sets those it
    knows, e.g. ``kubernetes.azure.com/agentpool``), plus the pool's own labels."""
    merged = {k: v for k, v in (selector or {}).items() if not _reserved(k)}
    merged.update(own or {})
    return dict(sorted(merged.items()))


def kubelogin_exec(settings: AksSettings):
    """The runtime stack's credential plugin: ``kubelogin get-token --login <mode> --server-id <AKS>``
    (:data:`KUBELOGIN_SERVER_ID`), with ``settings.kubelogin.env`` added to its environment."""
    from gpucluster.sdk import ExecAuth

    return ExecAuth(
        command="kubelogin",
        args=("get-token", "--login", settings.kubelogin_login, "--server-id", KUBELOGIN_SERVER_ID),
        env=dict(settings.kubelogin_env),
    )


def _pool_props(cluster: ClusterSpec, pool, settings: AksSettings, *, system: bool):
    """Per-pool production settings: ephemeral OS disk where the size allows, zones, max pods,
    host encryption, subnet, upgrade settings (GPU pools: no surge), and the checkov skips that
    follow from them (each with its reason)."""
    from gpucluster_cdk.constructs_lib.aks import PoolUpgradeProps

    upgrade = settings.pool_upgrade.get(pool.name) or (
        GPU_POOL_UPGRADE if pool.gpu else CPU_POOL_UPGRADE
    )
    ephemeral = settings.ephemeral_os_disk and ephemeral_os_disk_fits(pool.vm_size)
    skips = {}
    if not settings.host_encryption:
        skips["CKV_AZURE_227"] = (
            "host encryption turned off in the cluster file (settings.hostEncryption: false)"
        )
    if system and not ephemeral:
        skips["CKV_AZURE_226"] = (
            f"{pool.vm_size} has no local disk large enough for an ephemeral OS disk (plugins/gpucluster_aks/gpu_vm_sizes.yaml)"
            if settings.ephemeral_os_disk
            else "ephemeral OS disks turned off in the cluster file (settings.ephemeralOsDisk: false)"
        )
    return dict(
        os_disk_type="Ephemeral" if ephemeral else None,
        zones=settings.zones,
        max_pods=settings.max_pods,
        host_encryption=settings.host_encryption,
        vnet_subnet_id=settings.subnet_id,
        upgrade=PoolUpgradeProps(
            max_surge=upgrade.max_surge,
            max_unavailable=None if system else upgrade.max_unavailable,
            drain_timeout_in_minutes=upgrade.drain_timeout_minutes,
        ),
        checkov_skips=skips,
    )


def cluster_props(cluster: ClusterSpec):
    """Map a ClusterSpec prepared by :func:`gpucluster_aks.platform.gpucluster_prepare_cluster` to
    :class:`gpucluster_cdk.constructs_lib.AksGpuClusterProps` (no decision and no check here).

    * the first non-GPU pool is the AKS system (default) pool, other pools are User pools;
      a system pool tainted ``CriticalAddonsOnly=true:NoSchedule`` renders as
      ``only_critical_addons``;
    * GPU pools carry the accelerated node selector labels, the system pool the system node
      selector labels (what the components' nodeSelectors select on), plus the pool's own;
    * pool taints and ``gpu_driver`` as prepared;
    * the production settings of :func:`gpucluster_aks.settings.parse_settings` (Entra ID with
      Azure RBAC, no local accounts, the deployer's role, private API server, Azure CNI overlay
      with Cilium, upgrade channels and window, add-ons, encryption, ...), and the checkov skips
      that follow from an opt-out, each with its reason.
    """
    from gpucluster_cdk.constructs_lib import AksGpuClusterProps, NodePoolProps
    from gpucluster_cdk.constructs_lib.aks import EntraIdProps, MaintenanceWindowProps, NetworkProps

    settings = parse_settings(cluster)
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
                labels=_labels(
                    scheduling.accelerated_node_selector if pool.gpu else {}, pool.labels
                ),
                taints=tuple(str(t) for t in pool.taints),
                **_pool_props(cluster, pool, settings, system=False),
            )
        )
    only_critical = any(str(t) == str(CRITICAL_ADDONS_TAINT) for t in system.taints)
    skips = _cluster_skips(settings, only_critical)
    network_policy = None if settings.network_policy == "none" else settings.network_policy
    return AksGpuClusterProps(
        name=cluster.name,
        location=cluster.region,
        kubernetes_version=cluster.kubernetes_version,
        resource_group_name=settings.existing_resource_group or resource_group_name(cluster),
        existing_resource_group=settings.existing_resource_group is not None,
        system_pool=NodePoolProps(
            name=system.name,
            vm_size=system.vm_size,
            node_count=system.node_count,
            labels=_labels(scheduling.system_node_selector, system.labels),
            only_critical_addons=only_critical,
            temporary_name_for_rotation=rotation_name(system.name),
            **_pool_props(cluster, system, settings, system=True),
        ),
        pools=tuple(pools),
        tags={"gpucluster-cluster": cluster.name},
        sku_tier=settings.sku_tier,
        local_account_disabled=not settings.local_accounts,
        entra_id=EntraIdProps(
            azure_rbac=True,
            admin_group_object_ids=settings.admin_group_object_ids,
            deployer_role=DEPLOYER_ROLE,
        ),
        private_cluster=settings.private_cluster,
        authorized_ip_ranges=settings.authorized_ip_ranges,
        network=NetworkProps(
            network_plugin="azure",
            network_plugin_mode="overlay",
            network_policy=network_policy,
            network_data_plane="cilium" if settings.network_policy == "cilium" else None,
            pod_cidr=settings.pod_cidr,
        ),
        automatic_upgrade_channel=settings.upgrade_channel,
        node_os_upgrade_channel=settings.node_os_channel,
        maintenance_window=MaintenanceWindowProps(
            day_of_week=settings.maintenance_day,
            start_time=settings.maintenance_start,
            duration_hours=settings.maintenance_hours,
            utc_offset=settings.maintenance_utc_offset,
        ),
        azure_policy=settings.azure_policy,
        defender=settings.defender,
        log_analytics_workspace_id=settings.log_analytics_workspace_id,
        create_log_analytics_workspace=settings.monitoring
        and settings.log_analytics_workspace_id is None,
        disk_encryption_set_id=settings.disk_encryption_set_id,
        secret_rotation_interval=settings.secret_rotation_interval,
        connection_exec=None if settings.local_accounts else kubelogin_exec(settings),
        checkov_skips=skips,
    )


def _cluster_skips(settings: AksSettings, only_critical: bool) -> dict[str, str]:
    """checkov checks of the cluster resource that a setting turns off, each with its reason
    (docs/cluster-file.md "production defaults")."""
    skips = {}
    if settings.disk_encryption_set_id is None:
        skips["CKV_AZURE_117"] = (
            "OS and data disks are encrypted at rest with platform-managed keys; customer-managed "
            "keys need a Key Vault and a disk encryption set the tenant owns: settings.diskEncryptionSetId"
        )
    if not only_critical:
        skips["CKV_AZURE_232"] = (
            "the system pool also runs the GPU operators and gates (no extra CPU pool by default); "
            "taint it CriticalAddonsOnly=true:NoSchedule and add a CPU pool to isolate system pods"
        )
    if not settings.private_cluster:
        skips["CKV_AZURE_115"] = (
            "public API server restricted to settings.apiServer.authorizedIpRanges (chosen in the cluster file)"
        )
    for check, off, reason in (
        (
            "CKV_AZURE_141",
            settings.local_accounts,
            "local accounts kept on by settings.localAccounts: true",
        ),
        (
            "CKV_AZURE_170",
            settings.sku_tier == "Free",
            "Free tier (no uptime SLA) chosen by settings.skuTier: Free",
        ),
        (
            "CKV_AZURE_171",
            settings.upgrade_channel == "none",
            "automatic upgrades turned off by settings.upgrade.channel: none",
        ),
        (
            "CKV_AZURE_116",
            not settings.azure_policy,
            "Azure Policy add-on turned off by settings.azurePolicy: false",
        ),
        (
            "CKV_AZURE_4",
            not settings.monitoring,
            "monitoring turned off by settings.monitoring: false",
        ),
        (
            "CKV_AZURE_172",
            settings.secret_rotation_interval is None,
            "Key Vault secrets provider turned off by settings.keyVaultSecretsProvider: false",
        ),
        (
            "CKV_AZURE_7",
            settings.network_policy == "none",
            "network policy turned off by settings.network.policy: none",
        ),
    ):
        if off:
            skips[check] = reason
    return skips


@hookimpl
def gpucluster_cluster_stack(scope, cluster: ClusterSpec, recipe: Recipe):
    """Build the AKS cluster (:class:`gpucluster_cdk.constructs_lib.AksGpuCluster`) in the ``<name>-cluster`` stack.

    Returns:
        ClusterConnection with the cluster's host and PEM client credentials (tokens).
    """
    from gpucluster_cdk.constructs_lib import AksGpuCluster

    aks = AksGpuCluster(scope, "aks", cluster_props(cluster))
    connection: ClusterConnection = aks.connection()
    return connection

"""AKS ``settings``: production cluster inputs, typed, with secure defaults (docs/cluster-file.md,
"AKS settings" and "production defaults").

:func:`parse_settings` turns a cluster's ``settings`` mapping into :class:`AksSettings` (every
default filled in) or raises one :class:`GpuclusterError` naming ``settings.<key>``. It is the one
place these defaults are decided; ``cluster.py`` maps the result to the construct's props.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpucluster.sdk import CORE_SETTING_KEYS, ClusterSpec, Fields, GpuclusterError, Where

__all__ = [
    "AksSettings",
    "PoolUpgrade",
    "parse_settings",
    "AKS_SETTING_KEYS",
    "SETTING_KEYS",
    "KUBELOGIN_SERVER_ID",
    "DEPLOYER_ROLE",
]

SKU_TIERS = ("Free", "Standard", "Premium")
UPGRADE_CHANNELS = ("patch", "stable", "rapid", "node-image", "none")
NODE_OS_CHANNELS = ("NodeImage", "SecurityPatch", "Unmanaged", "None")
NETWORK_POLICIES = ("cilium", "azure", "calico", "none")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
KUBELOGIN_LOGINS = ("azurecli", "workloadidentity", "spn", "msi", "devicecode", "interactive")
"""kubelogin ``get-token --login`` modes (Azure/kubelogin): ``azurecli`` (a laptop after ``az login``),
``workloadidentity`` (CI and Terraform Cloud agents with a federated token file), ``spn`` (service
principal from ``AAD_SERVICE_PRINCIPAL_CLIENT_ID``/``_SECRET``), ``msi`` (a VM's managed identity)."""

KUBELOGIN_SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
"""Application ID of the AKS Entra ID server every AKS-managed Entra cluster accepts tokens for
(``kubelogin get-token --server-id``, AKS docs "kubelogin")."""

DEPLOYER_ROLE = "Azure Kubernetes Service RBAC Cluster Admin"
"""Built-in role the identity running Terraform gets on the cluster: the runtime stack installs CRDs,
namespaces and cluster-scoped RBAC ("Use Azure RBAC for Kubernetes authorization",
https://learn.microsoft.com/azure/aks/manage-azure-rbac; local accounts disabled, as AKS Automatic does)."""

# Patterns as strings: re.fullmatch compiles one on its first use (re's cache), so a cluster without
# these settings does not pay for compiling them.
_GUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_RESOURCE_ID = r"^/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w.()]{1,90}/providers/[A-Za-z.]+/[-\w./()]+$"
_RG_NAME = r"^[-\w.()]{1,89}[-\w()]$"
_TIME = r"^([01]\d|2[0-3]):[0-5]\d$"
_OFFSET = r"^[+-](0\d|1[0-4]):[0-5]\d$"
_SURGE = r"^(0|[1-9]\d{0,2})$|^(0|[1-9]\d?|100)%$"
"""A node count, or a percentage of the pool of at most 100% (AKS upgrade settings: maxSurge / maxUnavailable)."""
_INTERVAL = r"^[1-9]\d{0,2}[smh]$"
_ENV_NAME = r"^[A-Z_][A-Z0-9_]{0,63}$"

AKS_SETTING_KEYS = tuple(
    sorted(
        {
            "skuTier",
            "localAccounts",
            "adminGroupObjectIds",
            "apiServer",
            "network",
            "existingResourceGroup",
            "upgrade",
            "azurePolicy",
            "defender",
            "monitoring",
            "hostEncryption",
            "diskEncryptionSetId",
            "keyVaultSecretsProvider",
            "ephemeralOsDisk",
            "zones",
            "maxPods",
            "poolUpgrade",
            "kubelogin",
        }
    )
)
"""The AKS platform's own ``settings`` keys (``Platform.settings``; the core adds its ``gateImage``)."""
SETTING_KEYS = tuple(sorted({*CORE_SETTING_KEYS, *AKS_SETTING_KEYS}))
"""Every ``settings`` key an AKS cluster accepts."""


@dataclass(frozen=True)
class PoolUpgrade:
    """A pool's upgrade settings: ``maxSurge``, ``maxUnavailable`` (strings, ``"1"`` or ``"10%"``), drain minutes."""

    max_surge: str
    max_unavailable: str | None = None
    drain_timeout_minutes: int | None = None


GPU_POOL_UPGRADE = PoolUpgrade(max_surge="0", max_unavailable="1")
"""GPU pools upgrade in place, one node at a time: a surge node is one more ND96 VM, quota nobody has
spare; azurerm 4.55 ``upgrade_settings`` accepts ``max_surge = "0"`` with ``max_unavailable``."""

CPU_POOL_UPGRADE = PoolUpgrade(max_surge="10%")
"""CPU pools: the AKS recommended surge for production (AKS docs "Upgrade options": 33% max, 10% default for new pools)."""


@dataclass(frozen=True)
class AksSettings:
    """Typed AKS settings with their defaults (docs/cluster-file.md "production defaults")."""

    sku_tier: str = "Standard"
    local_accounts: bool = False
    admin_group_object_ids: tuple[str, ...] = ()
    private_cluster: bool = True
    authorized_ip_ranges: tuple[str, ...] = ()
    network_policy: str = "cilium"
    pod_cidr: str | None = None
    subnet_id: str | None = None
    existing_resource_group: str | None = None
    upgrade_channel: str = "patch"
    node_os_channel: str = "NodeImage"
    maintenance_day: str = "Sunday"
    maintenance_start: str = "00:00"
    maintenance_hours: int = 4
    maintenance_utc_offset: str = "+00:00"
    azure_policy: bool = True
    defender: bool = True
    monitoring: bool = True
    log_analytics_workspace_id: str | None = None
    host_encryption: bool = True
    disk_encryption_set_id: str | None = None
    secret_rotation_interval: str | None = "2m"
    ephemeral_os_disk: bool = True
    zones: tuple[str, ...] = ()
    max_pods: int = 110
    pool_upgrade: Mapping[str, PoolUpgrade] = field(default_factory=dict)
    kubelogin_login: str = "azurecli"
    kubelogin_env: Mapping[str, str] = field(default_factory=dict)


def _err(
    cluster: ClusterSpec, key: str, message: str, fix: str, allowed: str | None = None
) -> GpuclusterError:
    return GpuclusterError(
        message,
        file=cluster.source,
        cluster=cluster.name,
        key=f"settings.{key}",
        fix=fix,
        **({"allowed": allowed} if allowed else {}),
    )


def _known(value: Fields, allowed: tuple[str, ...]) -> None:
    value.check_keys(allowed, context="for service aks")


def _mapping_fix(key: str) -> str:
    return f"write {key}: {{...}} (docs/cluster-file.md, AKS settings)"


def _choice_fix(allowed: tuple[str, ...]) -> str:
    return f"use one of {', '.join(allowed)}"


def _strings(c, raw, key, pattern_ok, what, example, at="") -> tuple[str, ...]:
    value = raw.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and pattern_ok(v) for v in value):
        raise _err(
            c,
            at + key,
            f"settings.{at}{key} must be a list of {what}",
            f"write e.g. {key}: [{example}]",
        )
    return tuple(value)


def _cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=True)
    except ValueError:
        return False
    return "/" in text


def _covers_every_ipv4_address(ranges) -> bool:
    """True when the IPv4 CIDR ``ranges`` together are ``0.0.0.0/0`` (e.g. ``0.0.0.0/0``, or ``0.0.0.0/1`` + ``128.0.0.0/1``)."""
    nets = [n for n in map(ipaddress.ip_network, ranges) if n.version == 4]
    return any(n.prefixlen == 0 for n in ipaddress.collapse_addresses(nets))


def _resource_id(c, raw, key, kind, at="") -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not re.fullmatch(_RESOURCE_ID, value)
        or f"/{kind}/" not in value.lower() + "/"
    ):
        raise _err(
            c,
            at + key,
            f"settings.{at}{key} must be an Azure resource ID of a {kind.split('/')[-1]}",
            f"write /subscriptions/<id>/resourceGroups/<rg>/providers/{kind.split('/')[0]}/... (az resource show --query id)",
        )
    return value


def _api_server(c, raw) -> tuple[bool, tuple[str, ...]]:
    """``(private, authorizedIpRanges)`` of ``settings.apiServer``, checked."""
    api = raw.get_fields("apiServer", empty=True, fix=_mapping_fix("apiServer"))
    _known(api, ("authorizedIpRanges", "private"))
    ranges = _strings(
        c, api, "authorizedIpRanges", _cidr, "CIDR ranges", '"203.0.113.0/24"', at="apiServer."
    )
    private = api.get_bool("private", not ranges, fix="write private: true or private: false")
    if private and ranges:
        raise _err(
            c,
            "apiServer",
            "a private API server has no authorized IP ranges (AKS refuses both)",
            "remove authorizedIpRanges for a private cluster, or set private: false",
        )
    if ranges and _covers_every_ipv4_address(ranges):
        raise _err(
            c,
            "apiServer.authorizedIpRanges",
            f"settings.apiServer.authorizedIpRanges {list(ranges)} admit every IPv4 address: an API server open to the whole internet",
            'list only the ranges that may reach it, e.g. authorizedIpRanges: ["203.0.113.0/24"], or keep the default private API server',
        )
    if not private and not ranges:
        raise _err(
            c,
            "apiServer",
            "a public API server without authorizedIpRanges is open to the whole internet",
            'list the ranges that may reach it, e.g. authorizedIpRanges: ["203.0.113.0/24"], or keep the default private API server',
        )
    return private, ranges


def _network_upgrade(c, raw, d):
    """``(network, upgrade, maintenanceWindow, hours)`` of the settings, checked."""
    network = raw.get_fields("network", empty=True, fix=_mapping_fix("network"))
    _known(network, ("podCidr", "policy", "subnetId"))
    upgrade = raw.get_fields("upgrade", empty=True, fix=_mapping_fix("upgrade"))
    _known(upgrade, ("channel", "maintenanceWindow", "nodeOsChannel"))
    window = upgrade.get_fields(
        "maintenanceWindow",
        empty=True,
        fix='write maintenanceWindow: {day: Sunday, start: "00:00", hours: 4}',
    )
    _known(window, ("day", "hours", "start", "utcOffset"))
    hours = window.get_int(
        "hours", d.maintenance_hours, minimum=4, maximum=24, fix="use 4..24 (AKS minimum 4)"
    )
    for key, pattern, example in (("start", _TIME, '"00:00"'), ("utcOffset", _OFFSET, '"+01:00"')):
        if key in window and not (
            isinstance(window[key], str) and re.fullmatch(pattern, window[key])
        ):
            raise _err(
                c,
                f"upgrade.maintenanceWindow.{key}",
                f"maintenance window {key} {window[key]!r}",
                f"write e.g. {key}: {example}",
            )
    return network, upgrade, window, hours


def _monitoring(c, raw, d):
    """``(monitoring, workspace, defender)`` of the settings, checked."""
    monitoring = raw.get("monitoring", True)
    workspace = None
    if isinstance(monitoring, dict):
        monitoring = raw.require_fields("monitoring")
        _known(monitoring, ("logAnalyticsWorkspaceId",))
        workspace = _resource_id(
            c,
            monitoring,
            "logAnalyticsWorkspaceId",
            "microsoft.operationalinsights/workspaces",
            at="monitoring.",
        )
        monitoring = True
    elif not isinstance(monitoring, bool):
        raise _err(
            c,
            "monitoring",
            "settings.monitoring must be true, false or {logAnalyticsWorkspaceId: ...}",
            "write monitoring: true (a new workspace) or monitoring: {logAnalyticsWorkspaceId: <id>}",
        )
    defender = raw.get_bool("defender", d.defender, fix="write defender: true or defender: false")
    if defender and not monitoring:
        raise _err(
            c,
            "defender",
            "Defender for Containers sends its data to the monitoring Log Analytics workspace",
            "keep monitoring on, or set defender: false",
        )
    return monitoring, workspace, defender


def _secret_rotation(c, raw, d):
    """The Key Vault secrets provider rotation interval (None when it is off), checked."""
    kv = raw.get("keyVaultSecretsProvider", {})
    rotation = d.secret_rotation_interval
    if kv is False:
        rotation = None
    elif isinstance(kv, dict):
        kv = raw.get_fields("keyVaultSecretsProvider", empty=True)
        _known(kv, ("rotationInterval",))
        rotation = kv.get("rotationInterval", rotation)
        if not isinstance(rotation, str) or not re.fullmatch(_INTERVAL, rotation):
            raise _err(
                c,
                "keyVaultSecretsProvider.rotationInterval",
                f"rotation interval {rotation!r}",
                'write e.g. rotationInterval: "2m"',
            )
    else:
        raise _err(
            c,
            "keyVaultSecretsProvider",
            "settings.keyVaultSecretsProvider must be a mapping or false",
            'write keyVaultSecretsProvider: {rotationInterval: "2m"} or false',
        )
    return rotation


def _kubelogin(c, raw):
    """``(kubelogin, env)`` of ``settings.kubelogin``, checked."""
    login = raw.get_fields("kubelogin", empty=True, fix=_mapping_fix("kubelogin"))
    _known(login, ("env", "login"))
    env = login.get("env") or {}
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and re.fullmatch(_ENV_NAME, k) and isinstance(v, str)
        for k, v in env.items()
    ):
        raise _err(
            c,
            "kubelogin.env",
            "settings.kubelogin.env must map variable names to strings",
            "write e.g. env: {AZURE_FEDERATED_TOKEN_FILE: /var/run/secrets/azure/tokens/azure-identity-token}",
        )
    return login, env


def parse_settings(cluster: ClusterSpec) -> AksSettings:
    """The AKS settings of ``cluster`` with defaults (see :class:`AksSettings`).

    Raises:
        GpuclusterError: an unknown key (with the allowed ones), a wrong type or value, a private
            cluster with authorized IP ranges, local accounts disabled without Entra ID ... each
            naming ``settings.<key>``.
    """
    c = cluster
    raw = Where(
        c.source, c.name, docs="docs/cluster-file.md, AKS settings", null_is_missing=False
    ).fields(dict(cluster.settings or {}), "settings")
    _known(raw, SETTING_KEYS)
    d = AksSettings()
    private, ranges = _api_server(c, raw)
    network, upgrade, window, hours = _network_upgrade(c, raw, d)
    monitoring, workspace, defender = _monitoring(c, raw, d)
    rotation = _secret_rotation(c, raw, d)
    max_pods = raw.get_int(
        "maxPods",
        d.max_pods,
        minimum=50,
        maximum=250,
        fix="use 50..250 (AKS allows 10..250; checkov CKV_AZURE_168 wants >= 50)",
    )
    zones = _strings(
        c, raw, "zones", lambda z: z in ("1", "2", "3"), 'zone names "1", "2", "3"', '"1", "2", "3"'
    )
    rg = raw.get("existingResourceGroup")
    if rg is not None and not (isinstance(rg, str) and re.fullmatch(_RG_NAME, rg)):
        raise _err(
            c,
            "existingResourceGroup",
            f"settings.existingResourceGroup {rg!r} is not a resource group name",
            "write the name of the existing resource group (letters, digits, '-', '_', '.', '(', ')')",
        )
    pool_upgrade = _pool_upgrade(c, raw)
    login, env = _kubelogin(c, raw)
    return AksSettings(
        sku_tier=raw.get_choice("skuTier", SKU_TIERS, d.sku_tier, fix=_choice_fix(SKU_TIERS)),
        local_accounts=raw.get_bool(
            "localAccounts",
            d.local_accounts,
            fix="write localAccounts: true or localAccounts: false",
        ),
        admin_group_object_ids=_strings(
            c,
            raw,
            "adminGroupObjectIds",
            lambda v: bool(re.fullmatch(_GUID, v)),
            "Entra group object IDs",
            '"00000000-0000-0000-0000-000000000000"',
        ),
        private_cluster=private,
        authorized_ip_ranges=ranges,
        network_policy=network.get_choice(
            "policy", NETWORK_POLICIES, d.network_policy, fix=_choice_fix(NETWORK_POLICIES)
        ),
        pod_cidr=_pod_cidr(c, network),
        subnet_id=_resource_id(
            c, network, "subnetId", "microsoft.network/virtualnetworks", at="network."
        ),
        existing_resource_group=rg,
        upgrade_channel=upgrade.get_choice(
            "channel", UPGRADE_CHANNELS, d.upgrade_channel, fix=_choice_fix(UPGRADE_CHANNELS)
        ),
        node_os_channel=upgrade.get_choice(
            "nodeOsChannel", NODE_OS_CHANNELS, d.node_os_channel, fix=_choice_fix(NODE_OS_CHANNELS)
        ),
        maintenance_day=window.get_choice("day", DAYS, d.maintenance_day, fix=_choice_fix(DAYS)),
        maintenance_start=window.get("start", d.maintenance_start),
        maintenance_hours=hours,
        maintenance_utc_offset=window.get("utcOffset", d.maintenance_utc_offset),
        azure_policy=raw.get_bool(
            "azurePolicy", d.azure_policy, fix="write azurePolicy: true or azurePolicy: false"
        ),
        defender=defender,
        monitoring=monitoring,
        log_analytics_workspace_id=workspace,
        host_encryption=raw.get_bool(
            "hostEncryption",
            d.host_encryption,
            fix="write hostEncryption: true or hostEncryption: false",
        ),
        disk_encryption_set_id=_resource_id(
            c, raw, "diskEncryptionSetId", "microsoft.compute/diskencryptionsets"
        ),
        secret_rotation_interval=rotation,
        ephemeral_os_disk=raw.get_bool(
            "ephemeralOsDisk",
            d.ephemeral_os_disk,
            fix="write ephemeralOsDisk: true or ephemeralOsDisk: false",
        ),
        zones=zones,
        max_pods=max_pods,
        pool_upgrade=pool_upgrade,
        kubelogin_login=login.get_choice(
            "login", KUBELOGIN_LOGINS, d.kubelogin_login, fix=_choice_fix(KUBELOGIN_LOGINS)
        ),
        kubelogin_env=dict(sorted(env.items())),
    )


def _pod_cidr(c, network) -> str | None:
    value = network.get("podCidr")
    if value is None:
        return None
    if not isinstance(value, str) or not _cidr(value):
        raise _err(
            c,
            "network.podCidr",
            f"settings.network.podCidr {value!r} is not a CIDR range",
            "write e.g. podCidr: 10.244.0.0/16",
        )
    return value


def _pool_upgrade(c, raw) -> dict[str, PoolUpgrade]:
    value = raw.get_fields("poolUpgrade", empty=True, fix=_mapping_fix("poolUpgrade"))
    names = {p.name for p in c.pools}
    system_name = next((p.name for p in c.pools if not p.gpu), None)  # platform.system_pool_index
    out: dict[str, PoolUpgrade] = {}
    for name in sorted(value, key=str):
        key = f"poolUpgrade.{name}"
        if name not in names:
            raise _err(
                c,
                key,
                f"settings.poolUpgrade names pool '{name}', which the cluster does not have",
                "use a pool name from pools",
                ", ".join(sorted(names)) or None,
            )
        entry = value.where.fields(
            value[name], value.key_of(name), fix='write e.g. {maxSurge: "0", maxUnavailable: "1"}'
        )
        _known(entry, ("drainTimeoutMinutes", "maxSurge", "maxUnavailable"))
        # a key not given keeps the pool's own default (GPU_POOL_UPGRADE / CPU_POOL_UPGRADE)
        base = (
            GPU_POOL_UPGRADE if next(p for p in c.pools if p.name == name).gpu else CPU_POOL_UPGRADE
        )
        if name == system_name and "maxUnavailable" in entry:
            raise _err(
                c,
                f"{key}.maxUnavailable",
                f"pool '{name}' is the system (default) pool, which has no maxUnavailable (azurerm 4.55 default_node_pool.upgrade_settings)",
                'remove maxUnavailable and keep a maxSurge above 0, e.g. maxSurge: "10%"',
            )
        surge, unavailable = (
            entry.get("maxSurge", base.max_surge),
            entry.get("maxUnavailable", base.max_unavailable),
        )
        for field_name, text in (("maxSurge", surge), ("maxUnavailable", unavailable)):
            if text is not None and not (isinstance(text, str) and re.fullmatch(_SURGE, text)):
                raise _err(
                    c,
                    f"{key}.{field_name}",
                    f"{field_name} {text!r} must be a quoted count or percentage",
                    f'write e.g. {field_name}: "1" or "10%"',
                )
        if surge in ("0", "0%") and unavailable in (None, "0", "0%"):
            raise _err(
                c,
                key,
                "maxSurge 0 with maxUnavailable 0 can never upgrade a node",
                'set maxUnavailable: "1" (in place, one node at a time) or a maxSurge above 0',
            )
        drain = entry.get_int("drainTimeoutMinutes", minimum=1, maximum=1440, fix="use 1..1440")
        out[name] = PoolUpgrade(surge, unavailable, drain)
    return out

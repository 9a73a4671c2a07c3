"""Entra ID + Azure RBAC without local accounts, kubelogin exec in the runtime stack,
typed production settings with secure defaults, pools whose GPU-ness follows from the VM size,
and the SDK's ClusterConnection auth shapes."""

from __future__ import annotations

import re

import pytest

from gpucluster.sdk import (
    ClusterConnection,
    ClusterSpec,
    Criteria,
    ExecAuth,
    GpuclusterError,
    NodePool,
)
from gpucluster.sdk.testing import registered


def prepare_cluster(spec: ClusterSpec) -> ClusterSpec:
    with registered() as kit:
        return kit.prepare(spec)


def spec(settings=None, pools=None, **kw) -> ClusterSpec:
    kw.setdefault("criteria", Criteria("aks", "h100", "ubuntu", "training"))
    return ClusterSpec(name="c1", source="g.yaml", settings=settings or {}, pools=pools or [], **kw)


def props_of(settings=None, pools=None):
    from gpucluster_aks.cluster import cluster_props

    return cluster_props(prepare_cluster(spec(settings, pools)))


# ------------------------------------------------------------------ ClusterConnection shapes

EXEC = ExecAuth(
    command="kubelogin", args=("get-token", "--login", "azurecli"), env={"B": "2", "A": "1"}
)


@pytest.mark.parametrize(
    "connection, auth",
    [
        (ClusterConnection(kubeconfig_path="/k"), "kubeconfig"),
        (ClusterConnection(host="h", cluster_ca_certificate="ca", exec=EXEC), "exec"),
        (
            ClusterConnection(host="h", cluster_ca_certificate="ca", token="${data.x.token}"),
            "token",
        ),
        (
            ClusterConnection(
                host="h", cluster_ca_certificate="ca", client_certificate="c", client_key="k"
            ),
            "client_certificate",
        ),
        (ClusterConnection(host="h"), "none"),
    ],
)
def test_cluster_connection_auth_shapes(connection, auth):
    assert connection.auth() == auth


@pytest.mark.parametrize(
    "connection, message",
    [
        (
            ClusterConnection(host="h", exec=EXEC, token="t"),
            "more than one credential (exec, token)",
        ),
        (
            ClusterConnection(host="h", client_certificate="c"),
            "client_certificate and client_key go together",
        ),
        (ClusterConnection(host="h", exec={"command": "kubelogin"}), "must be an ExecAuth"),
    ],
)
def test_cluster_connection_refuses_ambiguous_credentials(connection, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        connection.auth()


# ------------------------------------------------------------------ pools: GPU-ness from the VM size


def _pools(*sizes_and_gpu):
    out = []
    for i, item in enumerate(sizes_and_gpu):
        size, gpu = item if isinstance(item, tuple) else (item, None)
        pool = NodePool(
            name=f"p{i}", vm_size=size, gpu=True if gpu is None else gpu, gpu_set=gpu is not None
        )
        out.append(pool)
    return out


def test_a_cpu_size_without_gpu_false_is_a_cpu_pool():
    c = prepare_cluster(
        spec(pools=_pools("Standard_D8ds_v5", "Standard_D16s_v5", "Standard_ND96isr_H100_v5"))
    )
    assert [(p.vm_size, p.gpu, p.gpu_driver, [str(t) for t in p.taints]) for p in c.pools] == [
        ("Standard_D8ds_v5", False, None, []),
        ("Standard_D16s_v5", False, None, []),
        ("Standard_ND96isr_H100_v5", True, "Install", ["nvidia.com/gpu=present:NoSchedule"]),
    ]
    assert "nvidia.com/gpu.present" not in c.pools[1].labels


@pytest.mark.parametrize("size", ["Standard_NC40ads_H100_v5", "Standard_NC80adis_H100_v5"])
def test_every_h100_size_of_the_aks_gpu_setup_guide_is_a_gpu_pool(size):
    c = prepare_cluster(spec(pools=_pools("Standard_D8ds_v5", size)))
    assert c.pools[1].gpu and c.pools[1].gpu_driver == "Install"


@pytest.mark.parametrize(
    "pools, key, message, closest",
    [
        (
            _pools("Standard_D8ds_v5", "Standard_ND96isr_H100_v6"),
            "pools[1].vmSize",
            "is not a known AKS GPU size",
            "Standard_ND96isr_H100_v5",
        ),
        (
            _pools("Standard_D8ds_v5", "Standard_ND96asr_v4"),
            "pools[1].vmSize",
            "whose GPU is the A100; this cluster's recipe is for the H100",
            "Standard_ND96isr_H100_v5",
        ),
        (
            _pools("Standard_D8ds_v5", "Standard_NC24ads_A100_v4"),
            "pools[1].vmSize",
            "whose GPU is the A100",
            "Standard_NC40ads_H100_v5",
        ),
        (
            _pools("Standard_D8ds_v5", ("Standard_D16s_v5", True)),
            "pools[1].gpu",
            "sets gpu: true, but Standard_D16s_v5 is not a GPU size",
            "Standard_ND96isr_H100_v5",
        ),
        (
            _pools(("Standard_ND96isr_H100_v5", False), "Standard_D8ds_v5"),
            "pools[0].gpu",
            "sets gpu: false, but Standard_ND96isr_H100_v5 is a GPU size",
            None,
        ),
    ],
)
def test_pool_size_rules(pools, key, message, closest):
    with pytest.raises(GpuclusterError) as info:
        prepare_cluster(spec(pools=pools))
    line = info.value.render()
    assert f"key={key}:" in line and message in line, line
    if closest:
        assert "closest: " in line and closest in line.split("closest: ", 1)[1], line


def test_an_explicit_gpu_that_agrees_with_the_size_is_fine():
    c = prepare_cluster(
        spec(pools=_pools(("Standard_D8ds_v5", False), ("Standard_ND96isr_H100_v5", True)))
    )
    assert [p.gpu for p in c.pools] == [False, True]


def test_the_data_file_lists_the_h100_sizes_of_the_aks_gpu_setup_guide(shared_dir):
    from gpucluster_aks.platform import vm_sizes

    guide = (shared_dir / "seeds" / "aks-gpu-setup.txt").read_text()  # AICR's AKS GPU Setup guide
    import re

    in_guide = set(re.findall(r"Standard_N\w+_H100_v5", guide))
    assert in_guide and in_guide == set(vm_sizes()["accelerators"]["h100"])


# ------------------------------------------------------------------ settings: secure defaults and each input


def test_secure_defaults():
    p = props_of()
    assert p.sku_tier == "Standard" and p.local_account_disabled is True
    assert (
        p.entra_id.azure_rbac
        and p.entra_id.deployer_role == "Azure Kubernetes Service RBAC Cluster Admin"
    )
    assert p.private_cluster is True and p.authorized_ip_ranges == ()
    assert (
        p.network.network_plugin,
        p.network.network_plugin_mode,
        p.network.network_policy,
        p.network.network_data_plane,
    ) == ("azure", "overlay", "cilium", "cilium")
    assert (p.automatic_upgrade_channel, p.node_os_upgrade_channel) == ("patch", "NodeImage")
    assert (
        p.maintenance_window.day_of_week,
        p.maintenance_window.start_time,
        p.maintenance_window.duration_hours,
    ) == ("Sunday", "00:00", 4)
    assert (
        p.azure_policy
        and p.defender
        and p.create_log_analytics_workspace
        and p.log_analytics_workspace_id is None
    )
    assert p.secret_rotation_interval == "2m" and p.disk_encryption_set_id is None
    assert p.connection_exec.command == "kubelogin" and "azurecli" in p.connection_exec.args
    system, (gpu,) = p.system_pool, p.pools
    assert system.os_disk_type == "Ephemeral" and system.host_encryption and system.max_pods == 110
    assert system.upgrade.max_surge == "10%" and system.upgrade.max_unavailable is None
    assert gpu.os_disk_type is None and gpu.host_encryption and gpu.max_pods == 110
    assert (gpu.upgrade.max_surge, gpu.upgrade.max_unavailable) == ("0", "1")  # GPU pools: no surge
    assert set(p.checkov_skips) == {"CKV_AZURE_117", "CKV_AZURE_232"}


SUBNET = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/aks"
WORKSPACE = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ops/providers/Microsoft.OperationalInsights/workspaces/logs"
DES = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/kv/providers/Microsoft.Compute/diskEncryptionSets/des"
GROUP = "11111111-2222-3333-4444-555555555555"


@pytest.mark.parametrize(
    "settings, check",
    [
        ({"skuTier": "Premium"}, lambda p: p.sku_tier == "Premium"),
        (
            {"localAccounts": True},
            lambda p: (
                p.local_account_disabled is False
                and p.connection_exec is None
                and "CKV_AZURE_141" in p.checkov_skips
            ),
        ),
        ({"adminGroupObjectIds": [GROUP]}, lambda p: p.entra_id.admin_group_object_ids == (GROUP,)),
        (
            {"apiServer": {"authorizedIpRanges": ["203.0.113.0/24"]}},
            lambda p: (
                not p.private_cluster
                and p.authorized_ip_ranges == ("203.0.113.0/24",)
                and "CKV_AZURE_115" in p.checkov_skips
            ),
        ),
        (
            {"network": {"policy": "calico", "podCidr": "10.10.0.0/16", "subnetId": SUBNET}},
            lambda p: (
                p.network.network_policy == "calico"
                and p.network.network_data_plane is None
                and p.network.pod_cidr == "10.10.0.0/16"
                and p.system_pool.vnet_subnet_id == SUBNET
                and p.pools[0].vnet_subnet_id == SUBNET
            ),
        ),
        (
            {"existingResourceGroup": "platform-rg"},
            lambda p: p.resource_group_name == "platform-rg" and p.existing_resource_group,
        ),
        (
            {
                "upgrade": {
                    "channel": "stable",
                    "nodeOsChannel": "SecurityPatch",
                    "maintenanceWindow": {
                        "day": "Saturday",
                        "start": "22:30",
                        "hours": 6,
                        "utcOffset": "+01:00",
                    },
                }
            },
            lambda p: (
                (
                    p.automatic_upgrade_channel,
                    p.node_os_upgrade_channel,
                    p.maintenance_window.day_of_week,
                    p.maintenance_window.start_time,
                    p.maintenance_window.duration_hours,
                    p.maintenance_window.utc_offset,
                )
                == ("stable", "SecurityPatch", "Saturday", "22:30", 6, "+01:00")
            ),
        ),
        (
            {"azurePolicy": False},
            lambda p: p.azure_policy is False and "CKV_AZURE_116" in p.checkov_skips,
        ),
        ({"defender": False}, lambda p: p.defender is False),
        (
            {"monitoring": {"logAnalyticsWorkspaceId": WORKSPACE}},
            lambda p: (
                p.log_analytics_workspace_id == WORKSPACE and not p.create_log_analytics_workspace
            ),
        ),
        (
            {"monitoring": False, "defender": False},
            lambda p: not p.create_log_analytics_workspace and "CKV_AZURE_4" in p.checkov_skips,
        ),
        (
            {"hostEncryption": False},
            lambda p: (
                p.system_pool.host_encryption is False
                and "CKV_AZURE_227" in p.pools[0].checkov_skips
            ),
        ),
        (
            {"diskEncryptionSetId": DES},
            lambda p: p.disk_encryption_set_id == DES and "CKV_AZURE_117" not in p.checkov_skips,
        ),
        (
            {"keyVaultSecretsProvider": {"rotationInterval": "5m"}},
            lambda p: p.secret_rotation_interval == "5m",
        ),
        (
            {"keyVaultSecretsProvider": False},
            lambda p: p.secret_rotation_interval is None and "CKV_AZURE_172" in p.checkov_skips,
        ),
        (
            {"ephemeralOsDisk": False},
            lambda p: (
                p.system_pool.os_disk_type is None
                and "CKV_AZURE_226" in p.system_pool.checkov_skips
            ),
        ),
        (
            {"zones": ["1", "2"]},
            lambda p: p.system_pool.zones == ("1", "2") and p.pools[0].zones == ("1", "2"),
        ),
        ({"maxPods": 60}, lambda p: p.system_pool.max_pods == 60 and p.pools[0].max_pods == 60),
        (
            {
                "poolUpgrade": {
                    "gpu": {"maxSurge": "1", "maxUnavailable": "0", "drainTimeoutMinutes": 45}
                }
            },
            lambda p: (
                (
                    p.pools[0].upgrade.max_surge,
                    p.pools[0].upgrade.max_unavailable,
                    p.pools[0].upgrade.drain_timeout_in_minutes,
                )
                == ("1", "0", 45)
            ),
        ),
        # a poolUpgrade key not given keeps the pool's own default (GPU: surge 0 / unavailable 1, CPU: surge 10%)
        (
            {"poolUpgrade": {"gpu": {"drainTimeoutMinutes": 60}}},
            lambda p: (
                (
                    p.pools[0].upgrade.max_surge,
                    p.pools[0].upgrade.max_unavailable,
                    p.pools[0].upgrade.drain_timeout_in_minutes,
                )
                == ("0", "1", 60)
            ),
        ),
        (
            {"poolUpgrade": {"system": {"drainTimeoutMinutes": 30}}},
            lambda p: (
                (
                    p.system_pool.upgrade.max_surge,
                    p.system_pool.upgrade.max_unavailable,
                    p.system_pool.upgrade.drain_timeout_in_minutes,
                )
                == ("10%", None, 30)
            ),
        ),
        (
            {"kubelogin": {"login": "workloadidentity", "env": {"AZURE_CLIENT_ID": "x"}}},
            lambda p: (
                "workloadidentity" in p.connection_exec.args
                and dict(p.connection_exec.env) == {"AZURE_CLIENT_ID": "x"}
            ),
        ),
    ],
)
def test_each_setting(settings, check):
    assert check(props_of(settings))


@pytest.mark.parametrize(
    "settings, key",
    [
        ({"skuTier": "Gold"}, "settings.skuTier"),
        ({"localAccounts": "no"}, "settings.localAccounts"),
        ({"adminGroupObjectIds": ["admins"]}, "settings.adminGroupObjectIds"),
        (
            {"apiServer": {"authorizedIpRanges": ["203.0.113.0/24"], "private": True}},
            "settings.apiServer",
        ),
        ({"apiServer": {"private": False}}, "settings.apiServer"),
        (
            {"apiServer": {"authorizedIpRanges": ["203.0.113.5/24"]}},
            "settings.apiServer.authorizedIpRanges",
        ),
        ({"apiServer": {"allowed": []}}, "settings.apiServer.allowed"),
        ({"network": {"policy": "weave"}}, "settings.network.policy"),
        ({"network": {"podCidr": "10.0.0.0"}}, "settings.network.podCidr"),
        ({"network": {"subnetId": "subnet-1"}}, "settings.network.subnetId"),
        ({"existingResourceGroup": "bad/rg"}, "settings.existingResourceGroup"),
        ({"upgrade": {"channel": "latest"}}, "settings.upgrade.channel"),
        ({"upgrade": {"nodeOsChannel": "nodeimage"}}, "settings.upgrade.nodeOsChannel"),
        (
            {"upgrade": {"maintenanceWindow": {"hours": 2}}},
            "settings.upgrade.maintenanceWindow.hours",
        ),
        (
            {"upgrade": {"maintenanceWindow": {"start": "25:00"}}},
            "settings.upgrade.maintenanceWindow.start",
        ),
        (
            {"upgrade": {"maintenanceWindow": {"day": "Sun"}}},
            "settings.upgrade.maintenanceWindow.day",
        ),
        ({"azurePolicy": 1}, "settings.azurePolicy"),
        ({"monitoring": False}, "settings.defender"),
        (
            {"monitoring": {"logAnalyticsWorkspaceId": DES}},
            "settings.monitoring.logAnalyticsWorkspaceId",
        ),
        ({"hostEncryption": "yes"}, "settings.hostEncryption"),
        ({"diskEncryptionSetId": WORKSPACE}, "settings.diskEncryptionSetId"),
        (
            {"keyVaultSecretsProvider": {"rotationInterval": "2 minutes"}},
            "settings.keyVaultSecretsProvider.rotationInterval",
        ),
        ({"ephemeralOsDisk": None}, "settings.ephemeralOsDisk"),
        ({"zones": ["4"]}, "settings.zones"),
        ({"maxPods": 30}, "settings.maxPods"),
        ({"poolUpgrade": {"nosuch": {"maxSurge": "1"}}}, "settings.poolUpgrade.nosuch"),
        (
            {"poolUpgrade": {"gpu": {"maxSurge": "0", "maxUnavailable": "0"}}},
            "settings.poolUpgrade.gpu",
        ),
        ({"poolUpgrade": {"gpu": {"maxSurge": 1}}}, "settings.poolUpgrade.gpu.maxSurge"),
        ({"poolUpgrade": {"gpu": {"maxSurge": "101%"}}}, "settings.poolUpgrade.gpu.maxSurge"),
        ({"poolUpgrade": {"system": {"maxSurge": "0"}}}, "settings.poolUpgrade.system"),
        # the system (default) pool has no max_unavailable in azurerm 4.55: refused, not dropped silently
        (
            {"poolUpgrade": {"system": {"maxUnavailable": "1"}}},
            "settings.poolUpgrade.system.maxUnavailable",
        ),
        (
            {"poolUpgrade": {"system": {"maxSurge": "0", "maxUnavailable": "1"}}},
            "settings.poolUpgrade.system.maxUnavailable",
        ),
        # an "authorized" range set that admits every IPv4 address is the open public endpoint the docs refuse
        (
            {"apiServer": {"authorizedIpRanges": ["0.0.0.0/0"]}},
            "settings.apiServer.authorizedIpRanges",
        ),
        (
            {"apiServer": {"private": False, "authorizedIpRanges": ["0.0.0.0/1", "128.0.0.0/1"]}},
            "settings.apiServer.authorizedIpRanges",
        ),
        ({"kubelogin": {"login": "password"}}, "settings.kubelogin.login"),
        ({"kubelogin": {"env": {"lower": "x"}}}, "settings.kubelogin.env"),
        ({"localAccountDisabled": True}, "settings.localAccountDisabled"),
    ],
)
def test_each_bad_setting_is_one_input_error_naming_its_key(settings, key):
    with pytest.raises(GpuclusterError) as info:
        prepare_cluster(spec(settings))
    line = info.value.render()
    assert (
        line.startswith("error[input] file=g.yaml cluster=c1 ")
        and f"key={key}:" in line
        and " fix: " in line
    ), line


def test_strings_reaching_terraform_are_escaped():
    from gpucluster_cdk.constructs_lib import AksGpuCluster
    from gpucluster_cdk.constructs_lib.cdk import TerraformStack, Testing

    p = props_of({"kubelogin": {"env": {"AZURE_FEDERATED_TOKEN_FILE": "/t/${x}"}}})
    stack = TerraformStack(Testing.app(), "s")
    cluster = AksGpuCluster(stack, "aks", p)
    assert cluster.connection().exec.env == {"AZURE_FEDERATED_TOKEN_FILE": "/t/$${x}"}

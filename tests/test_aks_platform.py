"""AKS plugin platform hooks: declaration, catalog directory, cluster defaults and validation."""

from __future__ import annotations

import pytest

from gpucluster.sdk import ClusterSpec, Criteria, ExistingCluster, GpuclusterError, NodePool, Taint
from gpucluster.sdk.testing import registered
from gpucluster_aks import platform as aks_platform


def prepare_cluster(spec: ClusterSpec) -> ClusterSpec:
    with registered() as kit:
        return kit.prepare(spec)


def platforms():
    with registered() as kit:
        return kit.platforms()


def spec(**kw) -> ClusterSpec:
    kw.setdefault("criteria", Criteria("aks", "h100", "ubuntu", "training"))
    return ClusterSpec(name="c1", source="g.yaml", **kw)


def test_platform_declaration():
    p = platforms()["aks"]
    assert p.provisions_cluster is True and p.provider_id_prefix == "azure://"
    assert (p.accelerators, p.oses, p.intents, p.platforms) == (
        ("h100",),
        ("ubuntu",),
        ("training", "inference"),
        ("any", "kubeflow", "dynamo"),
    )
    assert p.profiles == {"gpuStack": ("azure-managed", ("azure-managed", "operator-managed"))}
    assert p.min_kubernetes == "1.34"


def test_catalog_dir_holds_aks_overlays():
    (d,) = aks_platform.gpucluster_catalog_dirs()
    assert (d / "overlays" / "aks.yaml").is_file()
    assert (d / "components" / "gpu-operator" / "values-aks.yaml").is_file()


def test_default_pools_and_region():
    c = prepare_cluster(spec())
    assert c.region == "eastus"
    assert [(p.name, p.vm_size, p.node_count, p.gpu, p.gpu_driver) for p in c.pools] == [
        ("system", "Standard_D8ds_v5", 2, False, None),
        ("gpu", "Standard_ND96isr_H100_v5", 1, True, "Install"),
    ]
    assert [str(t) for t in c.pools[1].taints] == ["nvidia.com/gpu=present:NoSchedule"]
    assert c.pools[0].taints == []


def test_operator_managed_profile_sets_gpu_driver_none():
    c = prepare_cluster(spec(profile={"gpuStack": "operator-managed"}, region="westus3"))
    assert c.region == "westus3"
    assert c.pools[1].gpu_driver == "None"


def test_user_pools_get_taint_and_driver_but_keep_given_values():
    pools = [
        NodePool(name="sys", vm_size="Standard_D4s_v5", gpu=False),
        NodePool(
            name="gpua",
            vm_size="Standard_ND96isr_H100_v5",
            node_count=4,
            taints=[Taint("nvidia.com/gpu", "true", "NoSchedule")],
        ),
        NodePool(name="gpub", vm_size="Standard_ND96isr_H100_v5", gpu_driver="Install"),
    ]
    c = prepare_cluster(spec(pools=pools))
    assert [str(t) for t in c.pools[1].taints] == ["nvidia.com/gpu=true:NoSchedule"]
    assert [str(t) for t in c.pools[2].taints] == ["nvidia.com/gpu=present:NoSchedule"]
    assert (c.pools[1].gpu_driver, c.pools[2].gpu_driver) == ("Install", "Install")


def test_existing_cluster_gets_no_pools():
    c = prepare_cluster(spec(existing=ExistingCluster(kubeconfig_path="k")))
    assert c.pools == []


def test_input_is_not_mutated():
    original = spec()
    prepare_cluster(original)
    assert original.pools == [] and original.region is None


@pytest.mark.parametrize(
    "kw, key, message",
    [
        (
            {"profile": {"gpuStack": "managed"}},
            "profile.gpuStack",
            "unknown value 'managed' for profile gpuStack (allowed: azure-managed, operator-managed)",
        ),
        (
            {"profile": {"driver": "x"}},
            "profile.driver",
            "unknown profile 'driver' for service aks (allowed: gpuStack)",
        ),
        (
            {
                "pools": [
                    NodePool("System_1", "Standard_D8s_v5", gpu=False),
                    NodePool("gpu", "Standard_ND96isr_H100_v5"),
                ]
            },
            "pools[0].name",
            "node pool name 'System_1' is not a valid AKS pool name",
        ),
        (
            {"pools": [NodePool("abcdefghijklm", "Standard_D8s_v5", gpu=False)]},
            "pools[0].name",
            "is not a valid AKS pool name",
        ),
        (
            {
                "pools": [
                    NodePool("sys", "Standard_D8s_v5", gpu=False),
                    NodePool("sys", "Standard_ND96isr_H100_v5"),
                ]
            },
            "pools[1].name",
            "node pool name 'sys' is used twice",
        ),
        (
            {"pools": [NodePool("sys", "Standard_D8s_v5", gpu=False, node_count=0)]},
            "pools[0].nodeCount",
            "node pool 'sys' has nodeCount 0 (allowed: 1..1000)",
        ),
        (
            {
                "pools": [
                    NodePool("sys", "Standard_D8s_v5", gpu=False),
                    NodePool("gpu", "Standard_ND96isr_H100_v5", node_count=1001),
                ]
            },
            "pools[1].nodeCount",
            "nodeCount 1001",
        ),
        (
            {
                "pools": [
                    NodePool("sys", "Standard_D8s_v5", gpu=False),
                    NodePool("gpu", "Standard_ND96isr_H100_v5", gpu_driver="Managed"),
                ]
            },
            "pools[1].gpuDriver",
            "has gpuDriver 'Managed' (allowed: Install, None)",
        ),
        (
            {"pools": [NodePool("sys", "Standard_D8s_v5", gpu=False, gpu_driver="Install")]},
            "pools[0].gpuDriver",
            "is not a GPU pool but sets gpuDriver",
        ),
        (
            {"pools": [NodePool("gpu", "Standard_ND96isr_H100_v5")]},
            "pools",
            "every node pool is a GPU pool",
        ),
    ],
)
def test_validation_errors(kw, key, message):
    with pytest.raises(GpuclusterError) as exc:
        prepare_cluster(spec(**kw))
    problem = exc.value.problems[0]
    assert (problem.file, problem.cluster, problem.key) == ("g.yaml", "c1", key)
    assert message in exc.value.render()


def test_profile_check_is_the_core_one_driven_by_platform_profiles():
    """Profile names/values come from Platform.profiles; the plugin hook no longer repeats them."""
    aks = platforms()["aks"]
    assert aks.profiles == {"gpuStack": ("azure-managed", ("azure-managed", "operator-managed"))}
    with pytest.raises(GpuclusterError) as exc:
        prepare_cluster(spec(profile={"gpuStack": "managed"}))
    assert "fix: use one of the allowed values (default: azure-managed" in exc.value.render()
    # the hook itself accepts whatever the core let through
    assert (
        aks_platform.gpucluster_prepare_cluster(spec(profile={"gpuStack": "operator-managed"}))
        is not None
    )

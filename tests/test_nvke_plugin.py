"""The NVKE plugin as a third party would write it: SDK-only imports, platform, cluster preparation."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _support import imports as _imports

import gpucluster_nvke
from gpucluster.sdk import (
    ClusterSpec,
    Criteria,
    ExistingCluster,
    GpuclusterError,
    NodePool,
    NodeScheduling,
    Toleration,
)
from gpucluster.sdk.testing import registered
from gpucluster_nvke.platform import PLATFORM, prepare

PLUGIN_DIR = Path(gpucluster_nvke.__file__).parent
RAILS = [{"name": f"mlx5_{i}", "rootDevice": f"00{i:02d}:03:00.0"} for i in (0, 1, 3, 4)]
ALLOWED_THIRD_PARTY = {"yaml"}


def test_plugin_imports_only_the_sdk_stdlib_and_yaml():
    files = sorted(PLUGIN_DIR.rglob("*.py"))
    assert len(files) >= 7
    bad = []
    for path in files:
        for line, module in _imports(path):
            top = module.split(".")[0]
            ok = (
                module == "gpucluster.sdk"
                or module.startswith(".")
                or top == "gpucluster_nvke"
                or top in sys.stdlib_module_names
                or top in ALLOWED_THIRD_PARTY
            ) and top not in ("importlib",)
            if not ok:
                bad.append(f"{path.relative_to(PLUGIN_DIR)}:{line}: {module}")
    assert bad == [], "plugin must import only gpucluster.sdk, the stdlib and yaml:\n" + "\n".join(
        bad
    )


def test_the_import_check_sees_a_core_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from gpucluster.values import deep_merge\nimport gpucluster.recipes.recipe\n")
    assert [m for _, m in _imports(probe)] == ["gpucluster.values", "gpucluster.recipes.recipe"]


def test_registered_through_the_entry_point_group():
    with registered() as kit:
        pm = kit.pm
    assert pm.get_plugin("nvke") is gpucluster_nvke
    hooks = {
        impl.function.__name__
        for caller in pm.hook.__dict__.values()
        if hasattr(caller, "get_hookimpls")
        for impl in caller.get_hookimpls()
        if impl.plugin is gpucluster_nvke
    }
    assert hooks == {
        "gpucluster_platforms",
        "gpucluster_catalog_dirs",
        "gpucluster_prepare_cluster",
        "gpucluster_adjust_values",
        "gpucluster_manifests",
        "gpucluster_gates",
        "gpucluster_policy_checks",
    }


def test_platform_declaration():
    with registered() as kit:
        p = kit.platforms()["nvke"]
    assert p is PLATFORM or p == PLATFORM
    assert p.provisions_cluster is False
    assert p.provider_id_prefix == "nico://"
    assert (p.accelerators, p.oses, p.intents, p.platforms) == (
        ("gb200",),
        ("ubuntu",),
        ("training",),
        ("any", "kubeflow"),
    )
    assert p.min_kubernetes == "1.34"


def cluster(**kw) -> ClusterSpec:
    base = dict(
        name="nvke-a",
        criteria=Criteria(service="nvke", accelerator="gb200", os="ubuntu", intent="training"),
        settings={"rails": RAILS},
        source="clusters.yaml",
    )
    base.update(kw)
    return ClusterSpec(**base)


def test_prepare_defaults_existing_kubeconfig_and_does_not_mutate_input():
    c = cluster()
    out = prepare(c)
    assert out.existing == ExistingCluster(kubeconfig_path="~/.kube/config", context=None)
    assert c.existing is None
    given = prepare(
        cluster(existing=ExistingCluster(kubeconfig_path="/etc/nvke.kubeconfig", context="tenant"))
    )
    assert given.existing == ExistingCluster(
        kubeconfig_path="/etc/nvke.kubeconfig", context="tenant"
    )


def test_prepare_refuses_pools():
    with pytest.raises(GpuclusterError) as exc:
        prepare(cluster(pools=[NodePool(name="gpu", vm_size="x")]))
    text = str(exc.value)
    assert "key=pools" in text and "file=clusters.yaml" in text and "cluster=nvke-a" in text
    assert "NVKE clusters exist already" in text


def test_prepare_routes_accelerated_scheduling_to_rdma_modules_only():
    sched = NodeScheduling(
        accelerated_node_selector={"nvidia.com/gpu.present": "true"},
        accelerated_tolerations=[
            Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
        ],
        system_node_selector={"node-role.kubernetes.io/infra": ""},
    )
    out = prepare(cluster(scheduling=sched))
    assert (
        out.scheduling.accelerated_node_selector == {}
        and out.scheduling.accelerated_tolerations == []
    )
    assert out.scheduling.system_node_selector == {"node-role.kubernetes.io/infra": ""}
    assert out.settings["rdmaModules"] == {
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }


def test_prepare_refuses_accelerated_selector_given_twice():
    sched = NodeScheduling(accelerated_node_selector={"a": "b"})
    with pytest.raises(GpuclusterError) as exc:
        prepare(
            cluster(
                scheduling=sched,
                settings={"rails": RAILS, "rdmaModules": {"nodeSelector": {"c": "d"}}},
            )
        )
    assert "key=settings.rdmaModules.nodeSelector" in str(exc.value)


def test_prepare_turns_the_rdma_modules_setting_into_a_component_toggle():
    out = prepare(cluster(settings={"rails": RAILS, "rdmaModules": {"enabled": False}}))
    (o,) = out.overrides
    assert (o.component, o.kind, o.path, o.value, o.key) == (
        "rdma-modules",
        "set",
        "enabled",
        False,
        "settings.rdmaModules.enabled",
    )
    assert prepare(cluster()).overrides == []


@pytest.mark.parametrize("field, value", [("accelerator", "h100"), ("os", "rhel")])
def test_prepare_refuses_accelerators_and_oses_without_an_nvke_recipe(field, value):
    crit = {
        "service": "nvke",
        "accelerator": "gb200",
        "os": "ubuntu",
        "intent": "training",
        field: value,
    }
    with pytest.raises(GpuclusterError) as exc:
        prepare(cluster(criteria=Criteria(**crit)))
    text = str(exc.value)
    assert (
        f"key=criteria.{field}" in text
        and f"not '{value}'" in text
        and "file=clusters.yaml" in text
    )


def test_prepare_accepts_wildcard_criteria():
    assert prepare(cluster(criteria=Criteria(service="nvke"))).criteria.accelerator == "any"

"""AKS policy checks (plugins/gpucluster_aks/policy.py): unit tests on hand-built data and
end-to-end runs through the real catalog (load_clusters + build_plans)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from policy_helpers import (
    base_values,
    by_id,
    ids,
    make_catalog,
    make_cluster,
    make_components,
    make_recipe,
)

from gpucluster.errors import GpuclusterError
from gpucluster.inputs.config import load_clusters
from gpucluster.model import NodePool, NodeScheduling, Taint, Toleration
from gpucluster.pipeline import build_plans
from gpucluster.recipes.overrides import apply_overrides, parse_overrides
from gpucluster.recipes.scheduling import apply_scheduling
from gpucluster.values import set_path
from gpucluster_aks.policy import gpucluster_policy_checks, minor_upgrade_steps


@pytest.fixture
def catalog(tmp_path):
    return make_catalog(tmp_path)


def aks(catalog, *, values=None, recipe=None, overrides=None, scheduling=None, **cluster_kw):
    recipe = recipe or make_recipe()
    components = make_components(recipe, values)
    cluster = make_cluster(
        overrides=parse_overrides(overrides, file="c.yaml", cluster="c1") if overrides else None,
        scheduling=scheduling,
        **cluster_kw,
    )
    components = apply_overrides(cluster, recipe, components, catalog)
    components = apply_scheduling(cluster, recipe, components, catalog)
    return gpucluster_policy_checks(cluster=cluster, recipe=recipe, components=components)


def values_with(updates):
    values = base_values()
    for (component, path), value in updates.items():
        set_path(values[component], path, value)
    return values


OPERATOR_MANAGED = {
    ("gpu-operator", "driver.enabled"): True,
    ("gpu-operator", "toolkit.enabled"): True,
    ("gpu-operator", "operator.runtimeClass"): "nvidia",
    ("nvidia-dra-driver-gpu", "nvidiaDriverRoot"): "/run/nvidia/driver",
}


def test_azure_managed_default_passes(catalog):
    assert aks(catalog) == []


# --------------------------------------------------------------------------- AKS-K8S-VERSION


@pytest.mark.parametrize("version", ["1.33", "1.32.4", "one"])
def test_kubernetes_below_134_rejected(catalog, version):
    [f] = by_id(aks(catalog, kubernetes_version=version), "AKS-K8S-VERSION")
    assert (
        f.severity == "error"
        and "DRA" in f.message
        and "1.34" in f.message
        and f.key == "kubernetesVersion"
    )
    assert "one minor version at a time" in f.fix


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.34.2", "1.36", "1.37.1"])
def test_kubernetes_134_and_later_accepted(catalog, version):
    assert "AKS-K8S-VERSION" not in ids(aks(catalog, kubernetes_version=version))


@pytest.mark.parametrize("version", ["1.38", "1.99", "2.0", "1.38.1"])
def test_kubernetes_newer_than_the_newest_known_is_a_warning(catalog, version):
    """A version newer than the newest the AKS plugin knows is not refused (AKS adds a minor
    about every quarter) but warned about, naming the newest known and the public list."""
    [f] = by_id(aks(catalog, kubernetes_version=version), "AKS-K8S-VERSION")
    assert (f.severity, f.key) == ("warning", "kubernetesVersion")
    assert f"Kubernetes '{version}' is newer than 1.37" in f.message
    assert "https://kubernetes.io/releases/" in f.message
    assert "https://learn.microsoft.com/azure/aks/supported-kubernetes-versions" in f.message
    assert "az aks get-versions" in f.fix


def test_a_kubernetes_version_newer_than_known_plans_with_one_warning_line(tmp_path):
    """End to end: `plan` accepts the file (exit 0) and prints one warning line for it."""
    import io

    from gpucluster import cli

    path = tmp_path / "gpucluster.yaml"
    path.write_text(REGION_CLUSTER.format(region="eastus") + '    kubernetesVersion: "1.99"\n')
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["plan", "--config", str(path)], stdout=out, stderr=err)
    lines = [
        line for line in (out.getvalue() + err.getvalue()).splitlines() if "AKS-K8S-VERSION" in line
    ]
    assert code == 0, err.getvalue()
    assert len(lines) == 1 and lines[0].startswith("warning[AKS-K8S-VERSION] "), lines
    assert "key=clusters[0].kubernetesVersion" in lines[0] and "fix: " in lines[0]


# --------------------------------------------------------------------------- AKS-MANAGED-GPU


def test_managed_gpu_pool_rejected(catalog):
    pools = [
        NodePool(name="system", vm_size="Standard_D8s_v5", gpu=False),
        NodePool(
            name="gpu",
            vm_size="Standard_ND96isr_H100_v5",
            taints=[Taint("nvidia.com/gpu", "present", "NoSchedule")],
            gpu_driver="Install",
            managed_gpu=True,
        ),
    ]
    [f] = by_id(aks(catalog, pools=pools), "AKS-MANAGED-GPU")
    assert (
        f.key == "pools[1].managedGpu"
        and "duplicate and conflict with the GPU Operator" in f.message
    )


# --------------------------------------------------------------------------- AKS-GPU-DRIVER


def test_operator_managed_tuple_with_none_pools_accepted(catalog):
    recipe = make_recipe(profile="operator-managed")
    assert (
        aks(catalog, recipe=recipe, values=values_with(OPERATOR_MANAGED), gpu_driver="None") == []
    )


def test_none_pool_with_azure_managed_profile_rejected(catalog):
    [f] = by_id(aks(catalog, gpu_driver="None"), "AKS-GPU-DRIVER")
    assert f.key == "pools[1].gpuDriver" and "driverless" in f.message
    assert "gpuDriver: Install" in f.fix and "gpuStack: operator-managed" in f.fix


def test_install_pool_with_operator_managed_profile_rejected(catalog):
    recipe = make_recipe(profile="operator-managed")
    [f] = by_id(
        aks(catalog, recipe=recipe, values=values_with(OPERATOR_MANAGED), gpu_driver="Install"),
        "AKS-GPU-DRIVER",
    )
    assert "conflict with the driver AKS preinstalls" in f.message


def test_mixed_pool_drivers_rejected(catalog):
    pools = [
        NodePool(name="system", vm_size="Standard_D8s_v5", gpu=False),
        NodePool(name="gpua", vm_size="x", gpu_driver="Install"),
        NodePool(name="gpub", vm_size="x", gpu_driver="None"),
    ]
    [f] = by_id(aks(catalog, pools=pools), "AKS-GPU-DRIVER")
    assert "mix gpuDriver values (Install, None)" in f.message


def test_none_pool_with_toolkit_disabled_rejected_without_profile(catalog):
    """A RecipeResult without a selected profile: the pools decide the mode."""
    recipe = make_recipe(profile=None)
    values = values_with({**OPERATOR_MANAGED, ("gpu-operator", "toolkit.enabled"): False})
    findings = aks(catalog, recipe=recipe, values=values, gpu_driver="None")
    [f] = by_id(findings, "AKS-GPU-DRIVER")
    assert f.component == "gpu-operator" and f.key == "toolkit.enabled"
    assert "FailedCreatePodSandBox" in f.message and "zero nvidia.com/gpu" in f.message
    assert "profile gpuStack: operator-managed sets driver.enabled, toolkit.enabled" in f.fix


def test_azure_managed_with_operator_driver_rejected(catalog):
    recipe = make_recipe(profile=None)
    findings = aks(
        catalog, recipe=recipe, values=values_with({("gpu-operator", "driver.enabled"): True})
    )
    [f] = by_id(findings, "AKS-GPU-DRIVER")
    assert (
        f.key == "driver.enabled"
        and "driver.enabled is true" in f.message
        and "needs false" in f.message
    )


def test_azure_managed_runtime_class_must_match_node_image(catalog):
    recipe = make_recipe(profile=None)
    [f] = by_id(
        aks(
            catalog,
            recipe=recipe,
            values=values_with({("gpu-operator", "operator.runtimeClass"): "nvidia"}),
        ),
        "AKS-GPU-DRIVER",
    )
    assert "nvidia-container-runtime" in f.message


def test_string_toggle_left_to_core_check(catalog):
    recipe = make_recipe(profile=None)
    findings = aks(
        catalog, recipe=recipe, values=values_with({("gpu-operator", "driver.enabled"): "false"})
    )
    assert "AKS-GPU-DRIVER" not in ids(findings)


# --------------------------------------------------------------------------- AKS-WILDCARD-TOLERATION


def test_keyed_default_toleration_accepted(catalog):
    assert "AKS-WILDCARD-TOLERATION" not in ids(aks(catalog))


def test_wildcard_accelerated_toleration_rejected(catalog):
    findings = aks(
        catalog,
        scheduling=NodeScheduling(
            accelerated_tolerations=[Toleration(key=None, operator="Exists")]
        ),
    )
    [f] = by_id(findings, "AKS-WILDCARD-TOLERATION")
    assert f.component == "nodewright-customizations" and f.key == "acceleratedTolerations"
    assert (
        "AKS admission collapses" in f.message
        and "nodewright#296" in f.message
        and "drain exemption" in f.message
    )
    assert "nvidia.com/gpu:NoSchedule" in f.fix


def test_missing_tolerations_fall_back_to_wildcard_and_are_rejected(catalog):
    findings = aks(
        catalog, taints=[]
    )  # untainted GPU pool: nothing derived, template renders the wildcard
    [f] = by_id(findings, "AKS-WILDCARD-TOLERATION")
    assert "falls back to the wildcard" in f.message


def test_wildcard_allowed_when_nodewright_customizations_disabled(catalog):
    findings = aks(
        catalog,
        scheduling=NodeScheduling(
            accelerated_tolerations=[Toleration(key=None, operator="Exists")]
        ),
        overrides={"set": ["nodewrightcustomizations:enabled=false"]},
    )
    assert "AKS-WILDCARD-TOLERATION" not in ids(findings)


# --------------------------------------------------------------------------- AKS-HOST-MOFED


def test_network_operator_disabled_with_host_mofed_warns(catalog):
    findings = aks(
        catalog,
        overrides={
            "set": ["networkoperator:enabled=false", "gpuoperator:driver.rdma.useHostMofed=true"]
        },
    )
    [f] = by_id(findings, "AKS-HOST-MOFED")
    assert f.severity == "warning" and "driver.rdma.useHostMofed is true" in f.message
    assert f.fix == "add gpuoperator:driver.rdma.useHostMofed=false to overrides.set"


def test_network_operator_disabled_with_mofed_unset_warns(catalog):
    values = base_values()
    del values["gpu-operator"]["driver"]["rdma"]["useHostMofed"]
    findings = aks(catalog, values=values, overrides={"set": ["networkoperator:enabled=false"]})
    assert "is unset" in by_id(findings, "AKS-HOST-MOFED")[0].message


def test_rdma_opt_out_is_accepted(catalog):
    findings = aks(
        catalog,
        overrides={
            "set": [
                "networkoperator:enabled=false",
                "gpuoperator:driver.rdma.useHostMofed=false",
                "nodewrightcustomizations:enabled=false",
            ]
        },
    )
    assert findings == []


# --------------------------------------------------------------------------- upgrades


def test_minor_upgrade_steps():
    assert minor_upgrade_steps("1.32", "1.34") == ["1.33", "1.34"]
    assert minor_upgrade_steps("1.34.1", "1.34") == []
    with pytest.raises(ValueError, match="cannot downgrade"):
        minor_upgrade_steps("1.34", "1.33")
    with pytest.raises(ValueError):
        minor_upgrade_steps("x", "1.34")


# --------------------------------------------------------------------------- end to end (real catalog)

CRITERIA = "criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}"


def plan(tmp_path, body: str):
    f = tmp_path / "gpucluster.yaml"
    f.write_text(
        "clusters:\n  - name: c1\n    "
        + CRITERIA
        + "\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
    )
    return build_plans(load_clusters(str(f)))[0]


def plan_error(tmp_path, body: str) -> str:
    with pytest.raises(GpuclusterError) as exc:
        plan(tmp_path, body)
    return exc.value.render()


def test_e2e_default_cluster_has_keyed_tolerations_and_no_findings(tmp_path):
    p = plan(tmp_path, "")
    assert p.findings == []
    tol = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert p.components["nodewright-customizations"].values["acceleratedTolerations"] == [tol]
    assert p.components["gpu-operator"].values["daemonsets"]["tolerations"] == [tol]


def test_e2e_rdma_opt_out_accepted(tmp_path):
    p = plan(
        tmp_path,
        """
        overrides:
          set:
            - networkoperator:enabled=false
            - gpuoperator:driver.rdma.useHostMofed=false
            - nodewrightcustomizations:enabled=false
        """,
    )
    assert (
        "network-operator" not in p.components and "nodewright-customizations" not in p.components
    )
    assert [f.id for f in p.findings if f.severity != "info"] == []
    assert {n.id for n in p.nodes}.isdisjoint({"network-operator", "nodewright-customizations"})


def test_e2e_operator_managed_profile_accepted(tmp_path):
    p = plan(tmp_path, "profile: {gpuStack: operator-managed}\n")
    assert p.findings == []
    assert p.components["nvidia-dra-driver-gpu"].values["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert [pool.gpu_driver for pool in p.cluster.pools if pool.gpu] == ["None"]


def test_e2e_dra_only_via_overrides_warns(tmp_path):
    p = plan(
        tmp_path,
        """
        overrides:
          set:
            - dradriver:resources.gpus.enabled=true
            - dradriver:gpuResourcesEnabledOverride=true
            - gpuoperator:devicePlugin.enabled=false
        """,
    )
    assert sorted(f.key for f in p.findings if f.id == "POLICY-KEY-OVERRIDE") == [
        "devicePlugin.enabled",
        "gpuResourcesEnabledOverride",
        "resources.gpus.enabled",
    ]


def test_e2e_partial_flip_rejected(tmp_path):
    text = plan_error(tmp_path, "overrides:\n  set: [dradriver:resources.gpus.enabled=true]\n")
    assert (
        "error[GPU-ADVERTISER]" in text
        and "cluster=c1" in text
        and "component=nvidia-dra-driver-gpu" in text
    )


def test_e2e_single_profile_key_flip_rejected(tmp_path):
    text = plan_error(tmp_path, "overrides:\n  set: [gpuoperator:toolkit.enabled=true]\n")
    assert "error[PROFILE-OWNED]" in text and "key=toolkit.enabled" in text
    assert "choose profile: {gpuStack: operator-managed}" in text
    assert (
        "error[AKS-GPU-DRIVER]" not in text
    )  # the profile owns the key: one answer, from PROFILE-OWNED


def test_e2e_wildcard_rejected(tmp_path):
    text = plan_error(
        tmp_path, "scheduling:\n  accelerated:\n    tolerations: [{operator: Exists}]\n"
    )
    assert "error[AKS-WILDCARD-TOLERATION]" in text and "error[SCHED-GPU-TAINT]" not in text


def test_e2e_none_pool_with_default_profile_rejected(tmp_path):
    text = plan_error(
        tmp_path,
        """
        pools:
          - {name: system, vmSize: Standard_D8s_v5, nodeCount: 2, gpu: false}
          - {name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: 1, gpu: true, gpuDriver: "None"}
        """,
    )
    assert (
        "error[AKS-GPU-DRIVER]" in text
        and "key=clusters[0].pools[1].gpuDriver" in text
        and "driverless" in text
    )


def test_e2e_managed_gpu_pool_rejected(tmp_path):
    text = plan_error(
        tmp_path,
        """
        pools:
          - {name: system, vmSize: Standard_D8s_v5, nodeCount: 2, gpu: false}
          - {name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: 1, gpu: true, managedGpu: true}
        """,
    )
    assert "error[AKS-MANAGED-GPU]" in text and "pool 'gpu'" in text


def test_e2e_kubernetes_133_rejected(tmp_path):
    text = plan_error(tmp_path, 'kubernetesVersion: "1.33"\n')
    assert "1.34" in text and "DRA" in text and "kubernetesVersion" in text


def test_e2e_network_operator_disabled_warns_host_mofed(tmp_path):
    p = plan(
        tmp_path,
        """
        overrides:
          set: [networkoperator:enabled=false, gpuoperator:driver.rdma.useHostMofed=true]
        """,
    )
    assert [f.id for f in p.findings if f.severity == "warning"] == ["AKS-HOST-MOFED"]


# --------------------------------------------------------------------------- AKS-REGION


def _plan_of(text: str, tmp_path):
    path = tmp_path / "gpucluster.yaml"
    path.write_text(text)
    return build_plans(load_clusters(str(path), env={}))


REGION_CLUSTER = """\
clusters:
  - name: c
    criteria: {{service: aks, accelerator: h100, os: ubuntu, intent: training}}
    region: {region}
"""


def test_a_mistyped_region_is_a_warning_naming_the_region_it_resembles(tmp_path):
    (plan,) = _plan_of(REGION_CLUSTER.format(region="westeurop"), tmp_path)
    [f] = by_id(plan.findings, "AKS-REGION")
    assert (f.severity, f.key) == ("warning", "clusters[0].region")
    assert "'westeurop' is not an Azure region name" in f.message
    assert f.fix.startswith("did you mean 'westeurope'? ")


@pytest.mark.parametrize("region", ["westeurope", "swedencentral", "westus3", "eastus"])
def test_an_azure_region_gets_no_warning(region, tmp_path):
    (plan,) = _plan_of(REGION_CLUSTER.format(region=region), tmp_path)
    assert by_id(plan.findings, "AKS-REGION") == []


def test_the_default_region_and_the_fleet_default_are_known_regions():
    from gpucluster_aks.platform import DEFAULT_REGION
    from gpucluster_aks.policy import known_regions

    regions = known_regions()
    assert DEFAULT_REGION in regions and len(regions) == len(set(regions)) > 60


# --------------------------------------------------------------------------- PROFILE-OWNED components


def _owned_components() -> list[str]:
    """The components the default AKS recipe's profile sets keys of (the code's answer)."""
    (plan,) = _plan_of_default()
    return sorted(plan.recipe.profile_owned)


def _plan_of_default():
    from gpucluster.inputs.config import EMBEDDED_DEFAULT

    return build_plans(load_clusters(str(EMBEDDED_DEFAULT), env={}))


@pytest.mark.parametrize("profile", ["azure-managed", "operator-managed"])
def test_the_fix_for_a_removed_owned_component_is_not_a_circle(profile, tmp_path):
    """--set C:enabled=false of each component the profile owns: refused, and the fix either
    names a profile value under which the same --set is accepted, or says that no value is one
    (never 'choose the other value' when the other refuses it the same way)."""
    import io

    from gpucluster import cli

    owned = _owned_components()
    assert owned == ["gpu-operator", "kai-scheduler", "nvidia-dra-driver-gpu", "nvsentinel"]
    config = tmp_path / "gpucluster.yaml"
    config.write_text(
        REGION_CLUSTER.format(region="eastus") + f"    profile: {{gpuStack: {profile}}}\n"
    )
    for component in owned:
        err = io.StringIO()
        argv = ["plan", "--config", str(config), "--set", f"{component}:enabled=false"]
        assert cli.main(argv, stdout=io.StringIO(), stderr=err) == 2
        [line] = [x for x in err.getvalue().splitlines() if x.startswith("error[PROFILE-OWNED]")]
        assert f"component={component} key=enabled:" in line
        fix = line.split(" fix: ", 1)[1]
        assert "choose the other" not in fix
        assert fix.startswith(
            "remove the override: every gpuStack value (azure-managed, operator-managed)"
        )


def test_a_recipe_result_without_an_owned_component_is_refused_the_same_way(tmp_path):
    import yaml

    from gpucluster.errors import GpuclusterError

    source = (
        Path(__file__).parent / "data" / "aicr" / "v0.11.1" / "h100-aks-ubuntu-training.recipe.yaml"
    )
    doc = yaml.safe_load(source.read_text())
    doc["componentRefs"] = [r for r in doc["componentRefs"] if r["name"] != "kai-scheduler"]
    (tmp_path / "t.recipe.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (tmp_path / "gpucluster.yaml").write_text("clusters:\n  - name: t\n    recipe: t.recipe.yaml\n")
    with pytest.raises(GpuclusterError) as caught:
        build_plans(load_clusters(str(tmp_path / "gpucluster.yaml"), env={}))
    [problem] = [p for p in caught.value.problems if p.id == "PROFILE-OWNED"]
    assert (problem.component, problem.key) == ("kai-scheduler", "componentRefs")
    assert problem.fix.startswith("put 'kai-scheduler' back in componentRefs")


@pytest.mark.parametrize("doc", ["policies.md", "overrides.md"])
def test_the_docs_name_the_components_the_code_owns(doc):
    text = " ".join((Path(__file__).parents[1] / "docs" / doc).read_text().split())
    sentence = text.split("sets keys of", 1)[1].split(")", 1)[0]
    named = sorted(
        re.findall(r"(gpu-operator|kai-scheduler|nvidia-dra-driver-gpu|nvsentinel)", sentence)
    )
    assert named == _owned_components()


# --------------------------------------------------------------------------- SERVICE-UNSERVED


def _plan_lines(tmp_path, *sets: str) -> tuple[int, list[str]]:
    import io

    from gpucluster import cli

    config = tmp_path / "gpucluster.yaml"
    config.write_text(REGION_CLUSTER.format(region="eastus"))
    err = io.StringIO()
    argv = ["plan", "--config", str(config)] + [a for s in sets for a in ("--set", s)]
    code = cli.main(argv, stdout=io.StringIO(), stderr=err)
    return code, [x for x in err.getvalue().splitlines() if not x.startswith("info[")]


def test_prometheus_adapter_pointing_at_a_prometheus_nothing_installs_is_refused(tmp_path):
    code, lines = _plan_lines(tmp_path, "kube-prometheus-stack:enabled=false")
    [line] = [x for x in lines if "SERVICE-UNSERVED" in x]
    assert (
        code == 2
        and line.startswith("error[SERVICE-UNSERVED] file=")
        and "component=prometheus-adapter key=prometheus.url:" in line
    )
    assert (
        "kube-prometheus-prometheus" in line
        and "fix: point prometheus-adapter:prometheus.url" in line
    )
    code, lines = _plan_lines(
        tmp_path,
        "kube-prometheus-stack:enabled=false",
        "prometheus-adapter:prometheus.url=http://prometheus.example:9090",
    )
    assert code == 0 and not [x for x in lines if "SERVICE-UNSERVED" in x]
    code, lines = _plan_lines(
        tmp_path, "kube-prometheus-stack:enabled=false", "prometheus-adapter:enabled=false"
    )
    assert code == 0 and not [x for x in lines if "SERVICE-UNSERVED" in x]
    assert _plan_lines(tmp_path)[0] == 0


def test_a_recipe_result_without_kube_prometheus_stack_is_refused_the_same_way(tmp_path):
    import yaml

    from gpucluster.errors import GpuclusterError

    source = (
        Path(__file__).parent / "data" / "aicr" / "v0.11.1" / "h100-aks-ubuntu-training.recipe.yaml"
    )
    doc = yaml.safe_load(source.read_text())
    doc["componentRefs"] = [r for r in doc["componentRefs"] if r["name"] != "kube-prometheus-stack"]
    for ref in doc["componentRefs"]:
        ref["dependencyRefs"] = [
            d for d in ref.get("dependencyRefs") or [] if d != "kube-prometheus-stack"
        ]
    (tmp_path / "t.recipe.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (tmp_path / "gpucluster.yaml").write_text("clusters:\n  - name: t\n    recipe: t.recipe.yaml\n")
    with pytest.raises(GpuclusterError) as caught:
        build_plans(load_clusters(str(tmp_path / "gpucluster.yaml"), env={}))
    assert [p.component for p in caught.value.problems if p.id == "SERVICE-UNSERVED"] == [
        "prometheus-adapter"
    ]


# --------------------------------------------------------------------------- AKS-SCHEDULER-MODE

PROFILE_CLUSTER = """\
clusters:
  - name: c
    criteria: {{service: aks, accelerator: h100, os: ubuntu, intent: training}}
{extra}"""


def test_scheduler_profiles_warn_that_the_cluster_needs_the_crd_managed_mode(tmp_path):
    """gpucluster does not switch the cluster's scheduler to AKS's CRD-managed mode, without which
    the scheduler-profiles release fails at apply: the plan says so, with the command that does."""
    extra = "    schedulerProfiles:\n      - {schedulerName: gpu-packing, preset: gpu-binpacking}\n"
    (plan,) = _plan_of(PROFILE_CLUSTER.format(extra=extra), tmp_path)
    [f] = by_id(plan.findings, "AKS-SCHEDULER-MODE")
    assert (f.severity, f.component, f.key) == (
        "warning",
        "scheduler-profiles",
        "clusters[0].schedulerProfiles",
    )
    assert "ManagedByCRD" in f.message and "fails" in f.message
    assert "--enable-upstream-kubescheduler-user-configuration" in f.fix
    assert "--resource-group c-rg --name c " in f.fix
    (plan,) = _plan_of(PROFILE_CLUSTER.format(extra=""), tmp_path)
    assert by_id(plan.findings, "AKS-SCHEDULER-MODE") == []

"""Core (platform-neutral) policy checks on hand-built recipes and effective values.

The cluster's service is ``testsvc`` so no platform plugin adds findings.
"""

from __future__ import annotations

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

from gpucluster.model import NodeScheduling, Toleration
from gpucluster.policy_keys import policy_owned_paths
from gpucluster.recipes.overrides import apply_overrides, parse_overrides
from gpucluster.recipes.policy import ALLOCATION_POLICY_KEYS, evaluate, tolerates


@pytest.fixture
def catalog(tmp_path):
    return make_catalog(tmp_path)


def check(
    catalog,
    *,
    values=None,
    recipe=None,
    overrides=None,
    scheduling=None,
    profile="azure-managed",
    **cluster_kw,
):
    recipe = recipe or make_recipe(profile=profile, service="testsvc")
    components = make_components(recipe, values)
    cluster = make_cluster(
        service="testsvc",
        overrides=parse_overrides(overrides, file="c.yaml", cluster="c1") if overrides else None,
        scheduling=scheduling,
        **cluster_kw,
    )
    components = apply_overrides(cluster, recipe, components, catalog)
    return evaluate(cluster, recipe, components, catalog)


def with_values(updates: dict[tuple[str, str], object]):
    from gpucluster.values import set_path

    values = base_values()
    for (component, path), value in updates.items():
        set_path(values[component], path, value)
    return values


def test_baseline_has_no_findings(catalog):
    assert check(catalog) == []


# --------------------------------------------------------------------------- GPU-ADVERTISER

DRA_ONLY = {
    ("gpu-operator", "devicePlugin.enabled"): False,
    ("nvidia-dra-driver-gpu", "resources.gpus.enabled"): True,
    ("nvidia-dra-driver-gpu", "gpuResourcesEnabledOverride"): True,
}


def test_dra_only_all_three_flipped_is_accepted(catalog):
    assert check(catalog, values=with_values(DRA_ONLY)) == []


def test_dra_only_through_overrides_accepted_with_deprecation_warnings(catalog):
    findings = check(
        catalog,
        overrides={
            "set": [
                "dradriver:resources.gpus.enabled=true",
                "dradriver:gpuResourcesEnabledOverride=true",
                "gpuoperator:devicePlugin.enabled=false",
            ]
        },
    )
    assert ids(findings, "error") == []
    warnings = by_id(findings, "POLICY-KEY-OVERRIDE")
    assert sorted(f.key for f in warnings) == [
        "devicePlugin.enabled",
        "gpuResourcesEnabledOverride",
        "resources.gpus.enabled",
    ]
    assert all(
        f.severity == "warning" and "deprecated" in f.message and "recipe overlay" in f.fix
        for f in warnings
    )


def test_dual_advertisement_rejected(catalog):
    findings = check(
        catalog,
        values=with_values(
            {
                ("nvidia-dra-driver-gpu", "resources.gpus.enabled"): True,
                ("nvidia-dra-driver-gpu", "gpuResourcesEnabledOverride"): True,
            }
        ),
    )
    [f] = by_id(findings, "GPU-ADVERTISER")
    assert (
        f.severity == "error"
        and "dual advertisement" in f.message
        and "double-allocate" in f.message
    )
    assert f.component == "nvidia-dra-driver-gpu" and f.key == "resources.gpus.enabled"


@pytest.mark.parametrize(
    "absent",
    [
        ("gpu-operator", "devicePlugin"),
        ("nvidia-dra-driver-gpu", "resources"),
        ("gpu-operator", "devicePlugin", "nvidia-dra-driver-gpu", "resources"),
    ],
)
def test_dual_advertisement_through_chart_defaults_rejected(catalog, absent):
    """An absent toggle is the chart's default: gpu-operator ``devicePlugin.enabled`` and the DRA
    driver's ``resources.gpus.enabled`` are both on by default, so with the DRA waiver set and either
    key absent both ledgers advertise whole GPUs."""
    values = with_values(
        {
            ("nvidia-dra-driver-gpu", "resources.gpus.enabled"): True,
            ("nvidia-dra-driver-gpu", "gpuResourcesEnabledOverride"): True,
        }
    )
    for component, section in zip(absent[::2], absent[1::2], strict=True):
        del values[component][section]
    [f] = by_id(check(catalog, values=values), "GPU-ADVERTISER")
    assert (f.severity, f.component, f.key) == (
        "error",
        "nvidia-dra-driver-gpu",
        "resources.gpus.enabled",
    )
    assert f.message.startswith("dual advertisement: the device plugin")


def test_partial_flip_gpus_without_waiver_rejected(catalog):
    findings = check(
        catalog,
        values=with_values(
            {
                ("nvidia-dra-driver-gpu", "resources.gpus.enabled"): True,
                ("gpu-operator", "devicePlugin.enabled"): False,
            }
        ),
    )
    [f] = by_id(findings, "GPU-ADVERTISER")
    assert "partial flip" in f.message and f.key == "gpuResourcesEnabledOverride"
    assert "set all three keys together" in f.fix


def test_inert_waiver_rejected(catalog):
    findings = check(
        catalog,
        values=with_values({("nvidia-dra-driver-gpu", "gpuResourcesEnabledOverride"): True}),
    )
    [f] = by_id(findings, "GPU-ADVERTISER")
    assert (f.component, f.key) == ("nvidia-dra-driver-gpu", "resources.gpus.enabled")
    assert f.message == (
        "partial flip: gpuResourcesEnabledOverride=true while resources.gpus.enabled=false is an "
        "inert waiver; the allocation policy is ambiguous"
    )
    assert f.fix.startswith("pick one policy and set all three keys together in a recipe overlay")


def test_no_advertiser_rejected(catalog):
    findings = check(catalog, values=with_values({("gpu-operator", "devicePlugin.enabled"): False}))
    [f] = by_id(findings, "GPU-ADVERTISER")
    assert "no whole-GPU advertiser" in f.message and "devicePlugin.enabled=false" in f.message


def test_absent_keys_take_chart_defaults(catalog):
    # dra chart default resources.gpus.enabled=true without the waiver -> partial flip
    values = with_values({("nvidia-dra-driver-gpu", "resources"): None})
    [f] = by_id(check(catalog, values=values), "GPU-ADVERTISER")
    assert "partial flip" in f.message


def test_disabling_dra_driver_keeps_device_plugin_policy(catalog):
    findings = check(catalog, profile=None, overrides={"set": ["dradriver:enabled=false"]})
    assert ids(findings, "error") == []
    assert [f.key for f in by_id(findings, "POLICY-KEY-OVERRIDE")] == ["enabled"]


def test_disabling_gpu_operator_leaves_no_advertiser(catalog):
    recipe = make_recipe(profile=None, service="testsvc")
    findings = check(catalog, recipe=recipe, overrides={"set": ["gpuoperator:enabled=false"]})
    [f] = by_id(findings, "GPU-ADVERTISER")
    assert "gpu-operator is disabled" in f.message
    [w] = by_id(findings, "POLICY-KEY-OVERRIDE")
    assert (
        "disables 'gpu-operator'" in w.message
        and "changes the whole-GPU allocation policy" in w.message
    )


def test_disabling_gpu_operator_with_dra_only_is_accepted(catalog):
    recipe = make_recipe(profile=None, service="testsvc")
    values = with_values(DRA_ONLY)
    findings = check(
        catalog, recipe=recipe, values=values, overrides={"set": ["gpuoperator:enabled=false"]}
    )
    assert "GPU-ADVERTISER" not in ids(findings)


# --------------------------------------------------------------------------- GPU-TOGGLE-TYPE


def test_string_false_toggle_rejected(catalog):
    findings = check(
        catalog, profile=None, overrides={"set": ["gpuoperator:devicePlugin.enabled='false'"]}
    )
    [f] = by_id(findings, "GPU-TOGGLE-TYPE")
    assert f.key == "devicePlugin.enabled" and "the string 'false', not a boolean" in f.message
    assert "YAML boolean without quotes" in f.fix
    assert "GPU-ADVERTISER" not in ids(findings)  # not evaluated on an unverifiable value


def test_null_section_rejected(catalog):
    # a null written by a recipe overlay (kept for Helm) reaches policy as an explicit None
    values = base_values()
    values["gpu-operator"]["driver"] = None
    findings = check(catalog, profile=None, values=values)
    [f] = [f for f in by_id(findings, "GPU-TOGGLE-TYPE") if f.key == "driver.enabled"]
    assert "'driver' is explicitly null" in f.message


# --------------------------------------------------------------------------- driver roots


def operator_managed_values(extra=None):
    return with_values(
        {
            ("gpu-operator", "driver.enabled"): True,
            ("gpu-operator", "toolkit.enabled"): True,
            ("gpu-operator", "operator.runtimeClass"): "nvidia",
            ("nvidia-dra-driver-gpu", "nvidiaDriverRoot"): "/run/nvidia/driver",
            **(extra or {}),
        }
    )


def test_operator_managed_lockstep_accepted(catalog):
    assert (
        check(
            catalog,
            profile="operator-managed",
            values=operator_managed_values()
            | {
                "nvsentinel": {
                    "labeler": {"assumeDriverInstalled": False},
                    "metadata-collector": {"runtimeClassName": "nvidia"},
                }
            },
        )
        == []
    )


def test_operator_managed_trailing_slash_is_the_same_root(catalog):
    values = operator_managed_values(
        {("nvidia-dra-driver-gpu", "nvidiaDriverRoot"): "/run/nvidia/driver/"}
    )
    assert "GPU-DRIVER-ROOT" not in ids(check(catalog, profile=None, values=values))


def test_operator_managed_root_mismatch_rejected(catalog):
    values = operator_managed_values({("nvidia-dra-driver-gpu", "nvidiaDriverRoot"): "/"})
    [f] = by_id(check(catalog, profile=None, values=values), "GPU-DRIVER-ROOT")
    assert (
        "hostPaths.driverInstallDir=/run/nvidia/driver" in f.message
        and "ContainerCreating" in f.message
    )
    assert (
        f.fix == "set dradriver:nvidiaDriverRoot=/run/nvidia/driver (both roots move in lockstep)"
    )


def test_operator_managed_root_unset_rejected(catalog):
    values = operator_managed_values()
    del values["nvidia-dra-driver-gpu"]["nvidiaDriverRoot"]
    [f] = by_id(check(catalog, profile=None, values=values), "GPU-DRIVER-ROOT")
    assert "nvidiaDriverRoot is not set (chart default /)" in f.message


def test_moved_install_dir_needs_matching_root(catalog):
    values = operator_managed_values(
        {("gpu-operator", "hostPaths.driverInstallDir"): "/opt/nvidia/driver"}
    )
    [f] = by_id(check(catalog, profile=None, values=values), "GPU-DRIVER-ROOT")
    assert "nvidiaDriverRoot=/opt/nvidia/driver" in f.fix
    values = operator_managed_values(
        {
            ("gpu-operator", "hostPaths.driverInstallDir"): "/opt/nvidia/driver",
            ("nvidia-dra-driver-gpu", "nvidiaDriverRoot"): "/opt/nvidia/driver",
        }
    )
    assert "GPU-DRIVER-ROOT" not in ids(check(catalog, profile=None, values=values))


@pytest.mark.parametrize(
    "install_dir,needle",
    [
        ("/", "runc refuses a mount destination of '/'"),
        ("//", "runc refuses"),
        ("run/nvidia/driver", "is a relative path"),
        ("", "is empty"),
        (5, "5 (int)"),
    ],
)
def test_bad_driver_install_dir_rejected(catalog, install_dir, needle):
    values = with_values({("gpu-operator", "hostPaths.driverInstallDir"): install_dir})
    [f] = by_id(check(catalog, values=values), "GPU-DRIVER-ROOT")
    assert (
        f.component == "gpu-operator"
        and f.key == "hostPaths.driverInstallDir"
        and needle in f.message
    )


@pytest.mark.parametrize(
    "root,needle",
    [
        ("", "is empty"),
        ("run/nvidia/driver", "the relative path 'run/nvidia/driver'"),
        (False, "false (bool)"),
    ],
)
def test_bad_dra_root_rejected(catalog, root, needle):
    values = with_values({("nvidia-dra-driver-gpu", "nvidiaDriverRoot"): root})
    findings = check(catalog, profile=None, values=values)
    [f] = by_id(findings, "GPU-DRIVER-ROOT")
    assert f.key == "nvidiaDriverRoot" and needle in f.message and "absolute path" in f.message


def test_stale_pre_flip_recipe_rejected(catalog):
    values = with_values({("nvidia-dra-driver-gpu", "nvidiaDriverRoot"): "/run/nvidia/driver"})
    [f] = by_id(check(catalog, profile=None, values=values), "GPU-DRIVER-STALE-RECIPE")
    assert (
        f.severity == "error" and "stale recipe" in f.message and "nothing populates" in f.message
    )
    assert "regenerate the recipe" in f.fix


def test_host_driver_with_host_root_accepted(catalog):
    assert "GPU-DRIVER-STALE-RECIPE" not in ids(check(catalog, profile=None))


# --------------------------------------------------------------------------- PROFILE-OWNED


def test_profile_owned_same_value_accepted(catalog):
    findings = check(
        catalog,
        overrides={"set": ["gpuoperator:driver.enabled=false", "dradriver:nvidiaDriverRoot=/"]},
    )
    assert "PROFILE-OWNED" not in ids(findings)


def test_profile_owned_different_value_rejected(catalog):
    findings = check(catalog, overrides={"set": ["gpuoperator:operator.runtimeClass=nvidia"]})
    [f] = by_id(findings, "PROFILE-OWNED")
    assert (f.severity, f.component, f.key) == ("error", "gpu-operator", "operator.runtimeClass")
    assert (
        "owned by the gpuStack profile 'azure-managed', which sets 'nvidia-container-runtime'"
        in f.message
    )
    assert "effective value is 'nvidia'" in f.message
    assert "choose the other gpuStack profile value" in f.fix


def test_profile_owned_type_change_rejected(catalog):
    findings = check(catalog, overrides={"set": ["gpuoperator:driver.enabled='false'"]})
    assert "driver.enabled" in [f.key for f in by_id(findings, "PROFILE-OWNED")]


def test_profile_owned_removed_rejected(catalog):
    findings = check(catalog, overrides={"set": ["nvsentinel:labeler=null"]})
    [f] = by_id(findings, "PROFILE-OWNED")
    assert f.key == "labeler.assumeDriverInstalled" and "was removed" in f.message


def test_profile_owned_component_cannot_be_disabled(catalog):
    findings = check(catalog, overrides={"set": ["nvsentinel:enabled=false"]})
    [f] = by_id(findings, "PROFILE-OWNED")
    assert f.component == "nvsentinel" and f.key == "enabled" and "cannot be disabled" in f.message


def test_policy_owned_paths_union():
    recipe = make_recipe()

    class Cat:
        components = {}

    owned = policy_owned_paths("gpu-operator", recipe, Cat())
    assert owned["devicePlugin.enabled"] == "a whole-GPU allocation-policy key"
    assert owned["operator.runtimeClass"] == "owned by the gpuStack profile 'azure-managed'"
    assert ALLOCATION_POLICY_KEYS["nvidia-dra-driver-gpu"] == (
        "resources.gpus.enabled",
        "gpuResourcesEnabledOverride",
    )


# --------------------------------------------------------------------------- SCHED-GPU-TAINT


def test_user_toleration_not_matching_gpu_taint_rejected(catalog):
    findings = check(
        catalog,
        scheduling=NodeScheduling(
            accelerated_tolerations=[Toleration(key="other", operator="Exists")]
        ),
    )
    [f] = by_id(findings, "SCHED-GPU-TAINT")
    assert (f.component, f.key) == ("-", "scheduling.accelerated.tolerations")
    assert (
        "tainted nvidia.com/gpu=present:NoSchedule" in f.message
        and "'nvidia.com/gpu:NoSchedule'" in f.fix
    )


def test_user_toleration_matching_gpu_taint_accepted(catalog):
    findings = check(
        catalog,
        scheduling=NodeScheduling(
            accelerated_tolerations=[
                Toleration(
                    key="nvidia.com/gpu", operator="Equal", value="present", effect="NoSchedule"
                )
            ]
        ),
    )
    assert "SCHED-GPU-TAINT" not in ids(findings)


@pytest.mark.parametrize(
    "tol,ok",
    [
        (Toleration(key=None, operator="Exists"), True),
        (Toleration(key="k", operator="Exists"), True),
        (Toleration(key="k", operator="Equal", value="v", effect="NoSchedule"), True),
        (Toleration(key="k", operator="Equal", value="w"), False),
        (Toleration(key="k", operator="Exists", effect="NoExecute"), False),
        (Toleration(key="j", operator="Exists"), False),
    ],
)
def test_tolerates(tol, ok):
    assert tolerates(tol, "k", "v", "NoSchedule") is ok


# --------------------------------------------------------------------------- POLICY-KEY-OVERRIDE / DEPENDENCY-PRUNED


def test_structured_values_touching_policy_key_warn(catalog):
    findings = check(
        catalog,
        overrides={
            "values": [{"component": "gpuoperator", "values": {"devicePlugin": {"enabled": True}}}]
        },
    )
    [w] = by_id(findings, "POLICY-KEY-OVERRIDE")
    assert (
        w.severity == "warning"
        and w.key == "devicePlugin.enabled"
        and "overrides.values[0]" in w.message
    )


def test_unrelated_override_does_not_warn(catalog):
    assert check(catalog, overrides={"set": ["gpuoperator:dcgm.enabled=false"]}) == []


def test_pruned_edges_reported_as_info(catalog):
    findings = check(catalog, overrides={"set": ["networkoperator:enabled=false"]})
    [f] = by_id(findings, "DEPENDENCY-PRUNED")
    assert (
        f.severity == "info"
        and f.component == "gpu-operator"
        and "no longer waits for 'network-operator'" in f.message
    )


def test_findings_sorted_errors_first(catalog):
    findings = check(
        catalog,
        overrides={
            "set": ["networkoperator:enabled=false", "gpuoperator:devicePlugin.enabled=false"]
        },
    )
    severities = [f.severity for f in findings]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    assert ids(findings) == ["GPU-ADVERTISER", "POLICY-KEY-OVERRIDE", "DEPENDENCY-PRUNED"]


def test_plugin_returning_junk_is_a_plugin_error(catalog):
    from gpucluster.errors import PluginError
    from gpucluster.sdk import hookimpl
    from gpucluster.sdk.testing import registered

    class Junk:
        @hookimpl
        def gpucluster_policy_checks(self, cluster, recipe, components):
            return ["not a finding"]

    with registered() as kit:
        kit.register(Junk(), name="junk-policy-test")
        with pytest.raises(PluginError) as exc:
            check(catalog)
    assert (
        "plugin 'junk-policy-test' returned str from gpucluster_policy_checks (allowed: gpucluster.sdk.Finding instances)"
        in exc.value.render()
    )


def test_plugin_raising_is_a_plugin_error_naming_it(catalog):
    from gpucluster.errors import PluginError
    from gpucluster.sdk import hookimpl
    from gpucluster.sdk.testing import registered

    class Boom:
        @hookimpl
        def gpucluster_policy_checks(self, cluster, recipe, components):
            raise ValueError("kaput")

    with registered() as kit:
        kit.register(Boom(), name="boom-policy-test")
        with pytest.raises(PluginError) as exc:
            check(catalog)
    text = exc.value.render()
    assert (
        "plugin 'boom-policy-test' failed in hook gpucluster_policy_checks: ValueError: kaput"
        in text
    )
    assert "GPUCLUSTER_DISABLE_PLUGINS=boom-policy-test" in text


# --------------------------------------------------------------------------- NVSENTINEL-RUNTIMECLASS


def test_nvsentinel_runtime_class_matching_accepted(catalog):
    assert "NVSENTINEL-RUNTIMECLASS" not in ids(check(catalog, profile=None))


def test_nvsentinel_runtime_class_both_unset_accepted(catalog):
    values = base_values()
    del values["gpu-operator"]["operator"]["runtimeClass"]
    del values["nvsentinel"]["metadata-collector"]
    assert "NVSENTINEL-RUNTIMECLASS" not in ids(check(catalog, profile=None, values=values))


def test_nvsentinel_runtime_class_mismatch_rejected(catalog):
    values = base_values()
    del values["nvsentinel"][
        "metadata-collector"
    ]  # chart default 'nvidia' vs operator 'nvidia-container-runtime'
    [f] = by_id(check(catalog, profile=None, values=values), "NVSENTINEL-RUNTIMECLASS")
    assert (f.severity, f.component) == ("error", "nvsentinel")
    assert (
        f.key == "metadata-collector.runtimeClassName"
        and "rejects every metadata-collector pod" in f.message
    )
    assert f.fix.startswith(
        "set nvsentinel:metadata-collector.runtimeClassName=nvidia-container-runtime"
    )


# --------------------------------------------------------------------------- external advertiser


@pytest.mark.parametrize(
    "updates, component, key, what",
    [
        ({}, "gpu-operator", "devicePlugin.enabled", "gpu-operator devicePlugin.enabled=true"),
        (
            {
                ("gpu-operator", "devicePlugin.enabled"): False,
                ("nvidia-dra-driver-gpu", "resources.gpus.enabled"): True,
                ("nvidia-dra-driver-gpu", "gpuResourcesEnabledOverride"): True,
            },
            "nvidia-dra-driver-gpu",
            "resources.gpus.enabled",
            "the DRA driver's resources.gpus.enabled=true",
        ),
    ],
)
def test_an_external_advertiser_refuses_the_recipes_own(catalog, updates, component, key, what):
    """A profile value whose platform add-on advertises whole GPUs (``advertiser: external``):
    the recipe's device plugin or DRA GPU advertisement is a dual advertisement, one error each."""
    from dataclasses import replace

    recipe = replace(make_recipe(profile=None, service="testsvc"), advertiser="external")
    recipe = replace(recipe, profile=("gpuStack", "oci-managed"))
    [f] = by_id(check(catalog, values=with_values(updates), recipe=recipe), "GPU-ADVERTISER")
    assert (f.component, f.key) == (component, key)
    assert f.message == (
        "dual advertisement: gpuStack=oci-managed declares that a platform add-on outside the recipe "
        f"advertises whole GPUs, and {what} advertises them too; the two ledgers can double-allocate "
        "the same physical GPU"
    )
    assert f.fix == (
        f"keep {key}=false under gpuStack=oci-managed, or select the profile value in which the recipe "
        "owns the advertiser (and remove the platform add-on)"
    )
    off = {**updates, ("gpu-operator", "devicePlugin.enabled"): False}
    off[("nvidia-dra-driver-gpu", "resources.gpus.enabled")] = False
    off[("nvidia-dra-driver-gpu", "gpuResourcesEnabledOverride")] = False
    assert by_id(check(catalog, values=with_values(off), recipe=recipe), "GPU-ADVERTISER") == []


def test_the_profile_owned_fix_names_every_other_profile_value(catalog, monkeypatch):
    """A profile with three values (a plugin may declare any number): an override no value sets
    is told what each other value sets; one a value sets is told to choose that value."""
    from gpucluster.recipes import recipe as recipe_mod

    values = {
        "azure-managed": {
            "gpu-operator": {"operator": {"runtimeClass": "nvidia-container-runtime"}}
        },
        "kata-managed": {"gpu-operator": {"operator": {"runtimeClass": "kata-qemu-nvidia-gpu"}}},
        "operator-managed": {"gpu-operator": {"operator": {"runtimeClass": "nvidia"}}},
    }
    monkeypatch.setattr(recipe_mod, "profile_values_owned", lambda recipe, catalog: values)
    findings = check(catalog, overrides={"set": ["gpuoperator:operator.runtimeClass=custom"]})
    [f] = by_id(findings, "PROFILE-OWNED")
    assert f.fix == (
        "remove the override: no gpuStack profile value sets operator.runtimeClass to 'custom' (the "
        "chosen 'azure-managed' sets 'nvidia-container-runtime'; 'kata-managed' sets "
        "'kata-qemu-nvidia-gpu'; 'operator-managed' sets 'nvidia')"
    )
    findings = check(
        catalog, overrides={"set": ["gpuoperator:operator.runtimeClass=kata-qemu-nvidia-gpu"]}
    )
    [f] = by_id(findings, "PROFILE-OWNED")
    assert f.fix == (
        "remove the override and choose profile: {gpuStack: kata-managed} in the cluster file: that "
        "gpuStack value sets operator.runtimeClass to 'kata-qemu-nvidia-gpu' and changes every key "
        "it owns together"
    )


# --------------------------------------------------------------------------- which recipes have an advertiser


def test_a_recipe_without_gpu_operator_and_dra_driver_has_no_advertiser_check(catalog):
    recipe = make_recipe(profile=None, service="testsvc", names=("nfd", "nvsentinel"))
    assert "GPU-ADVERTISER" not in ids(check(catalog, recipe=recipe))


def test_a_recipe_with_the_operator_alone_still_needs_an_advertiser(catalog):
    """Without the DRA driver in the recipe, the operator's device plugin is the only advertiser:
    turning it off leaves none."""
    recipe = make_recipe(profile=None, service="testsvc", names=("nfd", "gpu-operator"))
    values = with_values({("gpu-operator", "devicePlugin.enabled"): False})
    [f] = by_id(check(catalog, recipe=recipe, values=values), "GPU-ADVERTISER")
    assert (f.component, f.key) == ("gpu-operator", "devicePlugin.enabled")
    assert f.message == (
        "no whole-GPU advertiser: gpu-operator devicePlugin.enabled=false and nvidia-dra-driver-gpu "
        "is disabled, so GPU nodes advertise no GPUs to the scheduler"
    )
    assert "GPU-ADVERTISER" not in ids(check(catalog, recipe=recipe))


# --------------------------------------------------------------------------- HELM-NAME-OVERRIDE, VALUES-CREDENTIAL


@pytest.mark.parametrize("key", ["nameOverride", "fullnameOverride"])
def test_a_name_override_that_cannot_name_objects_is_refused(catalog, key):
    values = with_values({("nfd", key): "NFD_Master"})
    [f] = by_id(check(catalog, values=values), "HELM-NAME-OVERRIDE")
    assert (f.severity, f.component, f.key) == ("error", "nfd", key)
    assert f.message == (
        f"{key} 'NFD_Master' of nfd cannot name Kubernetes objects: the chart builds object names "
        "and labels from it"
    )
    assert f.fix == (
        "use lowercase letters, digits and '-', starting and ending with a letter or digit (e.g. "
        f"nfd), or remove the {key} override"
    )
    fine = with_values({("nfd", key): "nfd-" + "a" * 70})  # cut at 63 characters by the chart
    assert "HELM-NAME-OVERRIDE" not in ids(check(catalog, values=fine))


def test_a_literal_credential_in_values_is_a_warning(catalog):
    values = base_values()
    values["extra"] = {"auth": {"admin.password": "hunter2"}}
    recipe = make_recipe(profile=None, service="testsvc")
    from gpucluster.model import ComponentRef

    recipe.component_refs.append(ComponentRef(name="extra", namespace="extra"))
    [f] = by_id(check(catalog, values=values, recipe=recipe), "VALUES-CREDENTIAL")
    assert (f.severity, f.component, f.key) == ("warning", "extra", "auth.admin\\.password")
    assert "holds a literal credential" in f.message and "overrides.variables" in f.fix


def test_a_null_host_paths_section_or_a_dotdot_install_dir_is_refused(catalog):
    values = base_values()
    values["gpu-operator"]["hostPaths"] = None
    [f] = by_id(check(catalog, values=values), "GPU-DRIVER-ROOT")
    assert (f.component, f.key) == ("gpu-operator", "hostPaths.driverInstallDir")
    assert f.message.startswith("'hostPaths' is explicitly null: Helm drops a null section")
    assert f.fix.startswith("set gpuoperator:hostPaths.driverInstallDir=/run/nvidia/driver")
    values = with_values({("gpu-operator", "hostPaths.driverInstallDir"): "/run/../etc"})
    [f] = by_id(check(catalog, values=values), "GPU-DRIVER-ROOT")
    assert f.message == (
        "hostPaths.driverInstallDir '/run/../etc' contains a '..' segment; Kubernetes refuses "
        "hostPath volumes whose path contains '..', so the operator's driver and validator pods "
        "are never created"
    )


def test_an_absent_driver_enabled_is_the_charts_default_the_operator_installs_it(catalog):
    """gpu-operator ``driver.enabled`` absent: the chart installs the driver, so the DRA root must
    be the operator's install dir (GPU-DRIVER-ROOT), and with it the lockstep holds."""
    values = base_values()
    del values["gpu-operator"]["driver"]["enabled"]
    [f] = by_id(check(catalog, profile=None, values=values), "GPU-DRIVER-ROOT")
    assert (f.component, f.key) == ("nvidia-dra-driver-gpu", "nvidiaDriverRoot")
    assert f.message.startswith(
        "the GPU Operator installs the driver (driver.enabled=true) to "
        "hostPaths.driverInstallDir=/run/nvidia/driver, but nvidiaDriverRoot=/"
    )
    values["nvidia-dra-driver-gpu"]["nvidiaDriverRoot"] = "/run/nvidia/driver"
    assert "GPU-DRIVER-ROOT" not in ids(check(catalog, profile=None, values=values))


def test_findings_come_errors_first_then_warnings_then_info(catalog):
    """evaluate's order: errors, then warnings, then info (then id, component, key)."""
    findings = check(
        catalog,
        profile=None,
        values=with_values({("gpu-operator", "hostPaths.driverInstallDir"): "/"}),
        overrides={"set": ["nfd:enabled=false", "gpuoperator:devicePlugin.enabled=true"]},
    )
    severities = [f.severity for f in findings]
    assert {"error", "warning", "info"} <= set(severities), findings
    assert severities == sorted(severities, key=["error", "warning", "info"].index)


def test_an_absent_dra_waiver_is_off(catalog):
    """The DRA chart's ``gpuResourcesEnabledOverride`` defaults to false: GPUs through DRA with the
    waiver absent are a partial flip, keyed on the waiver."""
    values = with_values(
        {
            ("gpu-operator", "devicePlugin.enabled"): False,
            ("nvidia-dra-driver-gpu", "resources.gpus.enabled"): True,
        }
    )
    del values["nvidia-dra-driver-gpu"]["gpuResourcesEnabledOverride"]
    [f] = by_id(check(catalog, values=values), "GPU-ADVERTISER")
    assert (f.component, f.key) == ("nvidia-dra-driver-gpu", "gpuResourcesEnabledOverride")
    assert f.message.startswith("partial flip: the DRA driver's resources.gpus.enabled=true")

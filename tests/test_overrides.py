"""User overrides: parsing (cluster file ``overrides`` block) and application semantics."""

from __future__ import annotations

import copy
import os

import pytest
from policy_helpers import make_catalog, make_cluster, make_components, make_recipe

from gpucluster.errors import GpuclusterError
from gpucluster.recipes.overrides import apply_overrides, parse_overrides, parse_scalar


@pytest.fixture
def catalog(tmp_path):
    return make_catalog(tmp_path)


def run(catalog, raw, *, recipe=None, values=None, file="cluster.yaml"):
    recipe = recipe or make_recipe()
    components = make_components(recipe, values)
    cluster = make_cluster(overrides=parse_overrides(raw, file=file, cluster="c1"), source=file)
    components = apply_overrides(cluster, recipe, components, catalog)
    return components


def error_text(excinfo) -> str:
    return excinfo.value.render()


# --------------------------------------------------------------------------- scalar typing


@pytest.mark.parametrize(
    "text,expected",
    [
        ("true", True),
        ("false", False),
        ("0", 0),
        ("-12", -12),
        ("null", None),
        ("'false'", "false"),
        ('"true"', "true"),
        ("False", "False"),
        ("1.10", "1.10"),
        ("007", "007"),
        ("", ""),
        ("nvidia-container-runtime", "nvidia-container-runtime"),
        ("a=b", "a=b"),
    ],
)
def test_parse_scalar_types_like_aicr_set(text, expected):
    value = parse_scalar(text)
    assert value == expected and type(value) is type(expected)


# --------------------------------------------------------------------------- set


def test_set_by_alias_and_by_name_changes_values(catalog):
    comps = run(
        catalog,
        {
            "set": [
                "gpuoperator:driver.rdma.useHostMofed=true",
                "nvidia-dra-driver-gpu:controller.priorityClassName=high",
            ]
        },
    )
    assert comps["gpu-operator"].values["driver"]["rdma"] == {"enabled": True, "useHostMofed": True}
    assert comps["nvidia-dra-driver-gpu"].values["controller"] == {"priorityClassName": "high"}


def test_set_alias_is_case_insensitive(catalog):
    comps = run(catalog, {"set": ["GpuOperator:dcgm.enabled=false"]})
    assert comps["gpu-operator"].values["dcgm"] == {"enabled": False}


def test_set_quoted_false_stays_a_string(catalog):
    comps = run(catalog, {"set": ["gpuoperator:toolkit.enabled='false'"]})
    assert comps["gpu-operator"].values["toolkit"]["enabled"] == "false"


def test_set_null_deletes_key(catalog):
    comps = run(catalog, {"set": ["gpuoperator:operator.upgradeCRD=null"]})
    assert "upgradeCRD" not in comps["gpu-operator"].values["operator"]


def test_last_set_wins(catalog):
    comps = run(catalog, {"set": ["gpuoperator:dcgm.interval=10", "gpu-operator:dcgm.interval=30"]})
    assert comps["gpu-operator"].values["dcgm"]["interval"] == 30


def test_escaped_dot_in_key(catalog):
    comps = run(catalog, {"set": [r"gpuoperator:node.labels.nvidia\.com-x=yes"]})
    assert comps["gpu-operator"].values["node"]["labels"] == {"nvidia.com-x": "yes"}


def test_scalar_on_parent_and_child_path_rejected(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"set": ["gpuoperator:dcgm=off", "gpuoperator:dcgm.enabled=true"]})
    text = error_text(exc)
    assert (
        "overrides.set[1]" in text and "overrides.set[0] sets 'dcgm'" in text and "below it" in text
    )
    assert "component=gpu-operator" in text


def test_parent_child_conflict_detected_across_aliases(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(
            catalog, {"set": ["gpu-operator:driver.rdma.enabled=true", "gpuoperator:driver.rdma=x"]}
        )
    assert "conflicting overrides" in error_text(exc)


def test_set_below_existing_scalar_rejected(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"set": ["gpuoperator:devicePlugin.enabled.x=1"]})
    text = error_text(exc)
    assert (
        "cannot set 'devicePlugin.enabled.x'" in text
        and "holds a bool" in text
        and "key=overrides.set[0]" in text
    )


@pytest.mark.parametrize(
    "entry,needle",
    [
        ("gpuoperator:driver..enabled=true", "path segment '(empty)'"),
        ("gpuoperator:-driver.enabled=true", "path segment '-driver'"),
        ("gpuoperator:driver/x=true", "path segment 'driver/x'"),
        ("gpuoperator:driver.enabled", "has no '=value'"),
        ("driver.enabled=true", "has no ':'"),
        (":driver.enabled=true", "is not a component name"),
        ("gpuoperator:=true", "values path is empty"),
    ],
)
def test_malformed_set_entries_rejected_at_parse(entry, needle):
    with pytest.raises(GpuclusterError) as exc:
        parse_overrides({"set": [entry]}, file="cluster.yaml", cluster="c1")
    text = error_text(exc)
    assert (
        needle in text
        and "file=cluster.yaml" in text
        and "cluster=c1" in text
        and "key=overrides.set[0]" in text
    )


def test_unknown_component_lists_allowed_names(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"set": ["gpuoperatr:driver.enabled=true"]})
    text = error_text(exc)
    assert "unknown component or alias 'gpuoperatr'" in text
    assert "gpuoperator" in text and "dradriver" in text and "key=overrides.set[0]" in text


def test_unknown_component_fix_names_the_closest(catalog):
    """The allowed list is long and cut; the fix names the near miss so a typo is fixed at once."""
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"set": ["gpuoperatr:driver.enabled=true"]})
    assert exc.value.problems[0].fix.startswith("did you mean 'gpuoperator'?")
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"set": ["zzzzzz:driver.enabled=true"]})
    assert "did you mean" not in exc.value.problems[0].fix


def test_component_absent_from_recipe_rejected(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"set": ["extra:replicas=2"]})
    text = error_text(exc)
    assert "'extra' is not part of the resolved recipe" in text and "allowed: gpu-operator" in text


def test_all_problems_reported_and_nothing_applied(catalog):
    recipe = make_recipe()
    components = make_components(recipe)
    before = copy.deepcopy({n: c.values for n, c in components.items()})
    cluster = make_cluster(
        overrides=parse_overrides(
            {"set": ["gpuoperator:dcgm.enabled=false", "nosuch:x=1", "extra:y=2"]},
            file="cluster.yaml",
            cluster="c1",
        )
    )
    with pytest.raises(GpuclusterError) as exc:
        apply_overrides(cluster, recipe, components, catalog)
    assert len(exc.value.problems) == 2
    assert {n: c.values for n, c in components.items()} == before


# --------------------------------------------------------------------------- structured values


def test_structured_values_deep_merge_lists_replace_null_deletes(catalog):
    comps = run(
        catalog,
        {
            "values": [
                {
                    "component": "gpuoperator",
                    "values": {
                        "driver": {"rdma": {"useHostMofed": True}},
                        "daemonsets": {"tolerations": [{"key": "k", "operator": "Exists"}]},
                        "hostPaths": None,
                    },
                }
            ]
        },
    )
    v = comps["gpu-operator"].values
    assert v["driver"] == {"enabled": False, "rdma": {"enabled": True, "useHostMofed": True}}
    assert v["daemonsets"]["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert "hostPaths" not in v


def test_structured_values_apply_after_scalar_sets(catalog):
    comps = run(
        catalog,
        {
            "values": [{"component": "gpuoperator", "values": {"dcgm": {"interval": 5}}}],
            "set": ["gpuoperator:dcgm.interval=60"],
        },
    )
    assert comps["gpu-operator"].values["dcgm"]["interval"] == 5


def test_values_file_relative_to_cluster_file(catalog, tmp_path):
    project = tmp_path / "project"
    (project / "values").mkdir(parents=True)
    (project / "values" / "gpu.yaml").write_text(
        "dcgm:\n  enabled: false\nmigManager:\n  enabled: true\n"
    )
    cluster_file = project / "gpucluster.yaml"
    comps = run(
        catalog,
        {"values": [{"component": "gpu-operator", "file": "values/gpu.yaml"}]},
        file=str(cluster_file),
    )
    assert comps["gpu-operator"].values["dcgm"] == {"enabled": False}
    assert comps["gpu-operator"].values["migManager"] == {"enabled": True}


def test_values_file_escaping_project_folder_rejected(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "outside.yaml").write_text("a: 1\n")
    with pytest.raises(GpuclusterError) as exc:
        parse_overrides(
            {"values": [{"component": "gpuoperator", "file": "../outside.yaml"}]},
            file=str(project / "gpucluster.yaml"),
            cluster="c1",
        )
    text = error_text(exc)
    assert (
        "'../outside.yaml' resolves outside the project folder" in text
        and "key=overrides.values[0].file" in text
    )


def test_values_file_symlink_escaping_project_folder_rejected(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "secret.yaml").write_text("a: 1\n")
    os.symlink(tmp_path / "secret.yaml", project / "link.yaml")
    with pytest.raises(GpuclusterError) as exc:
        parse_overrides(
            {"values": [{"component": "gpuoperator", "file": "link.yaml"}]},
            file=str(project / "c.yaml"),
            cluster="c1",
        )
    assert "resolves outside the project folder" in error_text(exc)


def test_values_file_absolute_path_rejected(tmp_path):
    with pytest.raises(GpuclusterError) as exc:
        parse_overrides(
            {"values": [{"component": "gpuoperator", "file": str(tmp_path / "x.yaml")}]},
            file=str(tmp_path / "c.yaml"),
            cluster="c1",
        )
    assert "is an absolute path" in error_text(exc)


def test_values_entry_needs_exactly_one_of_values_and_file():
    with pytest.raises(GpuclusterError) as exc:
        parse_overrides({"values": [{"component": "gpuoperator"}]}, file="c.yaml", cluster="c1")
    assert "give exactly one of 'values' and 'file'" in error_text(exc)


# --------------------------------------------------------------------------- enabled


def test_enabled_false_removes_component_and_prunes_ordering_edges(catalog):
    comps = run(
        catalog,
        {"set": ["networkoperator:enabled=false", "nodewrightcustomizations:enabled=false"]},
    )
    assert "network-operator" not in comps and "nodewright-customizations" not in comps
    assert comps["gpu-operator"].ref.dependency_refs == ["nfd"]


def test_disabling_operator_of_manifest_only_component_names_the_edge(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"set": ["nodewright:enabled=false"]})
    text = error_text(exc)
    assert "'nodewright-customizations' depends on 'nodewright-operator'" in text
    assert "component=nodewright-customizations" in text and "key=overrides.set[0]" in text
    assert "also disable 'nodewright-customizations'" in text


def test_disabling_both_ends_of_an_edge_is_accepted(catalog):
    comps = run(
        catalog, {"set": ["nodewright:enabled=false", "skyhookcustomizations:enabled=false"]}
    )
    assert "nodewright-operator" not in comps and "nodewright-customizations" not in comps


def test_enabled_true_is_a_no_op_and_last_enabled_wins(catalog):
    comps = run(catalog, {"set": ["networkoperator:enabled=false", "networkoperator:enabled=true"]})
    assert "network-operator" in comps


def test_enabled_must_be_boolean(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"set": ["networkoperator:enabled=no"]})
    text = error_text(exc)
    assert "enabled must be true or false, not 'no'" in text and "allowed: true, false" in text


def test_enabled_via_structured_values_rejected():
    with pytest.raises(GpuclusterError) as exc:
        parse_overrides(
            {"values": [{"component": "networkoperator", "values": {"enabled": False}}]},
            file="c.yaml",
            cluster="c1",
        )
    text = error_text(exc)
    assert (
        "'enabled' cannot be given as a structured value" in text
        and "networkoperator:enabled=false" in text
    )


def test_enabling_component_the_recipe_disabled_rejected(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(
            catalog,
            {"set": ["nvsentinel:enabled=true"]},
            recipe=make_recipe(disabled=("nvsentinel",)),
        )
    text = error_text(exc)
    assert "the recipe disables component 'nvsentinel'" in text and "not supported" in text


def test_override_on_component_the_recipe_disabled_rejected(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(
            catalog,
            {"set": ["nv-sentinel:global.x=1"]},
            recipe=make_recipe(disabled=("nvsentinel",)),
        )
    assert "'nvsentinel' (alias 'nv-sentinel') is disabled by the recipe" in error_text(exc)


def test_disable_plus_other_override_on_same_component_conflicts(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"set": ["networkoperator:enabled=false", "network-operator:operator.x=1"]})
    text = error_text(exc)
    assert (
        "conflicting overrides: overrides.set[0] disables 'network-operator'" in text
        and "key=overrides.set[1]" in text
    )


# --------------------------------------------------------------------------- terraform variables


def test_variables_recorded_on_component(catalog):
    comps = run(
        catalog,
        {
            "variables": {
                "gpuoperator:driver.version": "gpu_driver_version",
                "nv-sentinel:global.image.tag": "nvs_tag",
            }
        },
    )
    assert comps["gpu-operator"].terraform_variables == {"driver.version": "gpu_driver_version"}
    assert comps["nvsentinel"].terraform_variables == {"global.image.tag": "nvs_tag"}


@pytest.mark.parametrize(
    "target,needle",
    [
        ("gpuoperator:devicePlugin.enabled", "a whole-GPU allocation-policy key"),
        ("gpuoperator:devicePlugin", "touches 'devicePlugin.enabled'"),
        ("dradriver:resources.gpus.enabled", "a whole-GPU allocation-policy key"),
        ("gpuoperator:driver.enabled", "owned by the gpuStack profile 'azure-managed'"),
        ("dradriver:nvidiaDriverRoot", "owned by the gpuStack profile 'azure-managed'"),
        ("nvsentinel:global.tracing.endpoint", "policyKeys"),
    ],
)
def test_variables_on_policy_owned_keys_rejected(catalog, target, needle):
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"variables": {target: "v"}})
    text = error_text(exc)
    assert "cannot be bound to a Terraform variable" in text and needle in text
    assert f"key=overrides.variables.{target}" in text


def test_variable_on_enabled_rejected(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"variables": {"networkoperator:enabled": "v"}})
    assert "enabled cannot be bound to a Terraform variable" in error_text(exc)


def test_variable_on_mapping_rejected(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(catalog, {"variables": {"networkoperator:operator": "v"}})
    assert "holds a mapping; a Terraform variable binds one scalar value" in error_text(exc)


def test_variable_and_set_on_same_path_conflict(catalog):
    with pytest.raises(GpuclusterError) as exc:
        run(
            catalog,
            {
                "set": ["gpuoperator:driver.version=1"],
                "variables": {"gpuoperator:driver.version": "v"},
            },
        )
    assert "is bound to a Terraform variable and also changed by overrides.set[0]" in error_text(
        exc
    )


@pytest.mark.parametrize(
    "name,needle",
    [
        ("1abc", "is not a Terraform variable name"),
        ("count", "reserved by Terraform"),
        (3, "is not a Terraform"),
    ],
)
def test_invalid_variable_names_rejected(name, needle):
    with pytest.raises(GpuclusterError) as exc:
        parse_overrides(
            {"variables": {"gpuoperator:driver.version": name}}, file="c.yaml", cluster="c1"
        )
    assert needle in error_text(exc)


# --------------------------------------------------------------------------- shape errors


@pytest.mark.parametrize(
    "raw,needle",
    [
        (["gpuoperator:x=1"], "overrides must be a mapping, not a list"),
        ({"sets": []}, "unknown overrides key 'sets'"),
        ({"set": "gpuoperator:x=1"}, "overrides.set must be a list of strings"),
        ({"set": [{"gpuoperator": "x"}]}, "a set entry must be a string, not a dict"),
        ({"values": {"component": "x"}}, "overrides.values must be a list"),
        ({"values": ["x"]}, "a values entry must be a mapping"),
        (
            {"values": [{"component": "gpuoperator", "values": [1]}]},
            "structured values must be a mapping",
        ),
        (
            {"values": [{"component": "gpuoperator", "values": {}, "extra": 1}]},
            "unknown key(s) 'extra'",
        ),
        ({"variables": ["a"]}, "overrides.variables must be a mapping"),
    ],
)
def test_wrong_shapes_rejected(raw, needle):
    with pytest.raises(GpuclusterError) as exc:
        parse_overrides(raw, file="c.yaml", cluster="c1")
    text = error_text(exc)
    assert needle in text and "file=c.yaml" in text and "cluster=c1" in text


def test_parse_order_sets_then_values_then_variables():
    out = parse_overrides(
        {
            "variables": {"b:y": "v2", "a:x": "v1"},
            "values": [{"component": "a", "values": {"k": 1}}],
            "set": ["a:z=1"],
        },
        file="c.yaml",
        cluster="c1",
    )
    assert [(o.kind, o.key) for o in out] == [
        ("set", "overrides.set[0]"),
        ("values", "overrides.values[0]"),
        ("variable", "overrides.variables.a:x"),
        ("variable", "overrides.variables.b:y"),
    ]


def test_the_pipeline_resolves_the_overrides_once(monkeypatch, tmp_path):
    """Scheduling, policy and the error-file mapping share one ResolvedOverrides value."""
    from gpucluster import pipeline
    from gpucluster.inputs.config import parse_clusters
    from gpucluster.recipes import overrides as overrides_mod

    calls = []
    real = overrides_mod.resolved_overrides

    def counting(cluster, catalog):
        calls.append(cluster.name)
        return real(cluster, catalog)

    monkeypatch.setattr(overrides_mod, "resolved_overrides", counting)
    monkeypatch.setattr("gpucluster.recipes.scheduling.resolved_overrides", counting)
    monkeypatch.setattr("gpucluster.recipes.policy.resolved_overrides", counting)
    doc = {
        "clusters": [
            {
                "name": "lab",
                "criteria": {
                    "service": "aks",
                    "accelerator": "h100",
                    "os": "ubuntu",
                    "intent": "training",
                },
                "overrides": {
                    "set": [
                        "gpuoperator:devicePlugin.enabled=false",
                        "dradriver:resources.gpus.enabled=true",
                        "dradriver:gpuResourcesEnabledOverride=true",
                    ]
                },
            }
        ]
    }
    (spec,) = parse_clusters(doc, source="clusters.yaml", root=tmp_path)
    plan = pipeline.build_plan(spec)
    assert calls == ["lab"]
    assert "POLICY-KEY-OVERRIDE" in [f.id for f in plan.findings]  # the policy saw the overrides

"""Resolution mechanics on small synthetic catalogs (written to tmp dirs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpucluster.errors import GpuclusterError
from gpucluster.model import Criteria
from gpucluster.recipes import layering, recipe
from gpucluster.recipes.catalog import load_catalog

REGISTRY = {
    "components": [
        {
            "name": n,
            "helm": {
                "repository": "https://charts.example",
                "chart": n,
                "version": "1.0.0",
                "namespace": n,
            },
        }
        for n in ("a", "b", "c", "d")
    ]
}


def overlay(name, criteria=None, base=None, refs=(), constraints=(), mixins=(), profile=None):
    spec = {}
    if base:
        spec["base"] = base
    if criteria is not None:
        spec["criteria"] = criteria
    if mixins:
        spec["mixins"] = list(mixins)
    if constraints:
        spec["constraints"] = [{"name": k, "value": v} for k, v in constraints]
    if profile:
        spec["profile"] = profile
    spec["componentRefs"] = list(refs)
    return {
        "kind": "RecipeOverlay",
        "apiVersion": "gpucluster/v1alpha1",
        "metadata": {"name": name},
        "spec": spec,
    }


def mixin(name, refs=(), constraints=()):
    spec = {"componentRefs": list(refs)}
    if constraints:
        spec["constraints"] = [{"name": k, "value": v} for k, v in constraints]
    return {
        "kind": "RecipeMixin",
        "apiVersion": "gpucluster/v1alpha1",
        "metadata": {"name": name},
        "spec": spec,
    }


def make_catalog(tmp_path: Path, overlays, mixins=(), registry=REGISTRY, values=None):
    (tmp_path / "overlays").mkdir()
    (tmp_path / "mixins").mkdir()
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(registry))
    for o in overlays:
        (tmp_path / "overlays" / f"{o['metadata']['name']}.yaml").write_text(yaml.safe_dump(o))
    for m in mixins:
        (tmp_path / "mixins" / f"{m['metadata']['name']}.yaml").write_text(yaml.safe_dump(m))
    for rel, data in (values or {}).items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(yaml.safe_dump(data))
    return load_catalog((tmp_path,))


SVC = overlay("svc", {"service": "aks"})
Q = Criteria(service="aks", accelerator="h100", os="ubuntu", intent="training")


def test_field_merge_scalars_overrides_and_lists(tmp_path):
    cat = make_catalog(
        tmp_path,
        [
            overlay(
                "base",
                refs=[
                    {
                        "name": "a",
                        "overrides": {"x": {"p": 1, "q": 2}, "l": [1, 2]},
                        "manifestFiles": ["m1.j2"],
                    },
                    {"name": "b"},
                ],
            ),
            overlay(
                "svc",
                {"service": "aks"},
                refs=[
                    {
                        "name": "a",
                        "version": "2.0.0",
                        "overrides": {"x": {"q": 3, "gone": None}, "l": [9]},
                        "dependencyRefs": ["b"],
                        "manifestFiles": ["m2.j2", "m1.j2"],
                    }
                ],
            ),
            overlay(
                "leaf",
                {"service": "aks", "accelerator": "h100"},
                base="svc",
                refs=[{"name": "a", "namespace": "", "dependencyRefs": ["b"]}],
            ),
        ],
    )
    r = recipe.resolve(Criteria(service="aks", accelerator="h100"), cat)
    a = r.component("a")
    assert a.version == "2.0.0"  # later non-empty scalar wins
    assert a.namespace == "a"  # empty scalar does not override (registry default)
    assert a.overrides == {
        "x": {"p": 1, "q": 3, "gone": None},
        "l": [9],
    }  # deep merge, lists replace, null kept
    assert a.manifest_files == ["m1.j2", "m2.j2"]  # union, first occurrence order
    assert a.dependency_refs == ["b"]
    assert r.applied_overlays == ["base", "svc", "leaf"]


def test_query_any_matches_only_overlays_leaving_field_any(tmp_path):
    cat = make_catalog(
        tmp_path,
        [
            overlay("base", refs=[{"name": "a"}]),
            overlay("svc", {"service": "aks"}),
            overlay("svc-h100", {"service": "aks", "accelerator": "h100"}, base="svc"),
            overlay("everything", {"intent": "any"}),
        ],
    )
    generic = Criteria(service="aks")
    assert recipe.select_overlays(cat, generic) == ["everything", "svc"]
    assert recipe.resolve(generic, cat).applied_overlays == ["base", "everything", "svc"]
    assert recipe.select_overlays(cat, Criteria(service="aks", accelerator="h100")) == [
        "everything",
        "svc-h100",
    ]


def test_ancestors_dropped_and_order_by_specificity_then_name(tmp_path):
    cat = make_catalog(
        tmp_path,
        [
            overlay("base"),
            overlay("zz-svc", {"service": "aks"}),
            overlay("aa-accel", {"accelerator": "h100"}),
            overlay("mid", {"service": "aks", "intent": "training"}, base="zz-svc"),
            overlay(
                "leaf",
                {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
                base="mid",
            ),
        ],
    )
    assert recipe.select_overlays(cat, Q) == ["aa-accel", "leaf"]
    assert recipe.resolve(Q, cat).applied_overlays == ["base", "aa-accel", "zz-svc", "mid", "leaf"]


def test_unknown_dependency_ref_names_component_and_key(tmp_path):
    cat = make_catalog(
        tmp_path, [overlay("base", refs=[{"name": "a", "dependencyRefs": ["nope"]}]), SVC]
    )
    with pytest.raises(GpuclusterError) as exc:
        recipe.resolve(Criteria(service="aks"), cat, file="f.yaml", cluster="c1")
    text = exc.value.render()
    assert "'a' depends on 'nope', which is not in the recipe" in text
    assert "component=a key=dependencyRefs" in text


def test_dependency_cycle_is_reported(tmp_path):
    cat = make_catalog(
        tmp_path,
        [
            overlay(
                "base",
                refs=[
                    {"name": "a", "dependencyRefs": ["b"]},
                    {"name": "b", "dependencyRefs": ["c"]},
                    {"name": "c", "dependencyRefs": ["a"]},
                    {"name": "d"},
                ],
            ),
            SVC,
        ],
    )
    with pytest.raises(GpuclusterError) as exc:
        recipe.resolve(Criteria(service="aks"), cat)
    assert "dependency cycle: a -> b -> c -> a" in exc.value.render()
    assert "key=dependencyRefs" in exc.value.render()


def test_inheritance_cycle(tmp_path):
    cat = make_catalog(
        tmp_path,
        [overlay("base"), overlay("x", {"service": "aks"}, base="y"), overlay("y", base="x"), SVC],
    )
    with pytest.raises(GpuclusterError, match="overlay inheritance cycle"):
        recipe.resolve(Criteria(service="aks"), cat)


def test_unknown_component_in_overlay(tmp_path):
    cat = make_catalog(tmp_path, [overlay("base", refs=[{"name": "zzz"}]), SVC])
    with pytest.raises(GpuclusterError, match="component 'zzz' is not in the registry"):
        recipe.resolve(Criteria(service="aks"), cat)


def test_mixins_accumulate_and_conflicting_constraint_is_error(tmp_path):
    cat = make_catalog(
        tmp_path,
        [
            overlay("base", refs=[{"name": "a"}]),
            overlay("svc", {"service": "aks"}, mixins=["m1"]),
            overlay(
                "leaf", {"service": "aks", "accelerator": "h100"}, base="svc", mixins=["m1", "m2"]
            ),
        ],
        mixins=[
            mixin("m1", refs=[{"name": "a", "overrides": {"k": 1}}]),
            mixin("m2", refs=[{"name": "b"}], constraints=[("OS.release.ID", "ubuntu")]),
        ],
    )
    r = recipe.resolve(Criteria(service="aks", accelerator="h100"), cat)
    assert r.component("a").overrides == {"k": 1}
    assert {c.name for c in r.component_refs} == {"a", "b"}
    assert [(c.name, c.value) for c in r.constraints] == [("OS.release.ID", "ubuntu")]

    tmp2 = tmp_path / "two"
    tmp2.mkdir()
    cat2 = make_catalog(
        tmp2,
        [
            overlay("base", constraints=[("OS.release.ID", "rhel")]),
            overlay("svc", {"service": "aks"}, mixins=["m2"]),
        ],
        mixins=[mixin("m2", constraints=[("OS.release.ID", "ubuntu")])],
    )
    with pytest.raises(GpuclusterError, match="mixin 'm2' constraint 'OS.release.ID' conflicts"):
        recipe.resolve(Criteria(service="aks"), cat2)


def test_two_profile_declarations_are_an_error(tmp_path):
    def prof(n):
        return {
            "name": n,
            "default": "x",
            "values": {"x": {"componentRefs": [{"name": "a", "overrides": {"k": 1}}]}},
        }

    cat = make_catalog(
        tmp_path,
        [
            overlay("base", refs=[{"name": "a"}]),
            overlay("svc", {"service": "aks"}, profile=prof("one")),
            overlay(
                "leaf", {"service": "aks", "accelerator": "h100"}, base="svc", profile=prof("two")
            ),
        ],
    )
    with pytest.raises(GpuclusterError, match="more than one profile: one, two"):
        recipe.resolve(Criteria(service="aks", accelerator="h100"), cat)


def test_profile_default_must_be_a_value(tmp_path):
    cat = make_catalog(
        tmp_path,
        [
            overlay("base", refs=[{"name": "a"}]),
            overlay(
                "svc",
                {"service": "aks"},
                profile={"name": "p", "default": "nope", "values": {"x": {}}},
            ),
        ],
    )
    with pytest.raises(GpuclusterError, match="default 'nope' is not one of its values"):
        recipe.resolve(Criteria(service="aks"), cat)


def test_overlay_schema_error_names_file_and_key(tmp_path):
    bad = overlay("base", refs=[{"name": "a", "valuesFiles": ["x"]}])
    cat = make_catalog(tmp_path, [bad, SVC])
    with pytest.raises(GpuclusterError) as exc:
        recipe.resolve(Criteria(service="aks"), cat)
    text = exc.value.render()
    assert "base.yaml" in text and "key=spec.componentRefs.0" in text and "valuesFiles" in text


def test_enabled_false_override_disables_component(tmp_path):
    cat = make_catalog(
        tmp_path,
        [
            overlay(
                "base", refs=[{"name": "a"}, {"name": "b", "overrides": {"enabled": False, "x": 1}}]
            ),
            SVC,
        ],
    )
    r = recipe.resolve(Criteria(service="aks"), cat)
    assert r.component("b").enabled is False and r.component("b").overrides == {"x": 1}
    assert list(layering.effective_components(r, cat)) == ["a"]


def test_values_file_layering_with_base_values(tmp_path):
    cat = make_catalog(
        tmp_path,
        [
            overlay("base", refs=[{"name": "a", "valuesFile": "components/a/values.yaml"}]),
            overlay(
                "svc",
                {"service": "aks"},
                refs=[
                    {
                        "name": "a",
                        "valuesFile": "components/a/values-aks.yaml",
                        "overrides": {"y": 3},
                    }
                ],
            ),
        ],
        values={
            "components/a/values.yaml": {"x": 1, "y": 1, "z": {"k": 1}},
            "components/a/values-aks.yaml": {"y": 2, "z": {"j": 2}},
        },
    )
    r = recipe.resolve(Criteria(service="aks"), cat)
    assert r.component("a").values_files == [
        "components/a/values.yaml",
        "components/a/values-aks.yaml",
    ]
    assert layering.effective_components(r, cat)["a"].values == {
        "x": 1,
        "y": 3,
        "z": {"k": 1, "j": 2},
    }

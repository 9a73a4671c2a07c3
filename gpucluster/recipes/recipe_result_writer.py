"""Writing RecipeResult documents: a resolved recipe as the AICR ``RecipeResult`` that
``gpucluster recipe`` prints (the shape: :mod:`gpucluster.recipes.recipe_result`, which reads such
files back).

:func:`to_document` gives plain data in AICR's field order, keys sorted inside ``overrides`` and
``values``, so the same recipe always writes the same bytes; :func:`dump_yaml` writes it as YAML
(block style, multi-line strings as literal blocks, no anchors).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from gpucluster.model import Component, Recipe
from gpucluster.recipes.recipe_result import API_VERSION, KIND
from gpucluster.values import deep_merge, leaf_paths


def _sorted(data: Any) -> Any:
    if isinstance(data, Mapping):
        return {k: _sorted(data[k]) for k in sorted(data)}
    if isinstance(data, list):
        return [_sorted(v) for v in data]
    return data


def owned_paths(recipe: Recipe) -> dict[str, list[str]]:
    """AICR ``selectedProfile.ownedPaths``: component -> sorted dotted paths + ``enabled``."""
    out: dict[str, list[str]] = {}
    for name, values in sorted(recipe.profile_owned.items()):
        out[name] = sorted({p for p, _ in leaf_paths(values)} | {"enabled"})
    return out


def to_document(
    recipe: Recipe, components: Mapping[str, Component] | None = None
) -> dict[str, Any]:
    """The RecipeResult document of a resolved recipe (plain data, deterministic order).

    Args:
        recipe: from :func:`gpucluster.pipeline.recipe_for_cluster`.
        components: effective components; when given, each componentRef carries its
            hydrated ``values`` (components absent from the mapping get none).
    """
    metadata: dict[str, Any] = {
        "generator": "gpucluster",
        "appliedOverlays": list(recipe.applied_overlays),
    }
    if recipe.profile is not None:
        metadata["selectedProfile"] = {
            "name": recipe.profile[0],
            "value": recipe.profile[1],
            "ownedPaths": owned_paths(recipe),
        }
    refs = []
    for ref in recipe.component_refs:
        entry: dict[str, Any] = {"name": ref.name, "type": ref.type}
        if ref.namespace:
            entry["namespace"] = ref.namespace
        if ref.chart:
            entry["chart"] = ref.chart
        if ref.source:
            entry["source"] = ref.source
        if ref.version:
            entry["version"] = ref.version
        if ref.values_files:
            entry["valuesFile"] = ref.values_files[-1]
        overrides = deep_merge(ref.overrides, recipe.profile_owned.get(ref.name), keep_nulls=True)
        if not ref.enabled:
            overrides["enabled"] = False
        if overrides:
            entry["overrides"] = _sorted(overrides)
        if ref.dependency_refs:
            entry["dependencyRefs"] = sorted(ref.dependency_refs)
        if ref.pre_manifest_files:
            entry["preManifestFiles"] = list(ref.pre_manifest_files)
        if ref.manifest_files:
            entry["manifestFiles"] = list(ref.manifest_files)
        if components is not None and ref.name in components:
            entry["values"] = _sorted(components[ref.name].values)
        refs.append(entry)
    return {
        "kind": KIND,
        "apiVersion": API_VERSION,
        "metadata": metadata,
        "criteria": recipe.criteria.as_dict(),
        "constraints": [{"name": c.name, "value": c.value} for c in recipe.constraints],
        "componentRefs": refs,
        "deploymentOrder": [r.name for r in recipe.component_refs if r.enabled],
    }


class _Dumper(yaml.SafeDumper):
    """Block-style multi-line strings; never aliases."""

    def ignore_aliases(self, data: Any) -> bool:  # noqa: D401
        return True


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str)


def dump_yaml(doc: Any) -> str:
    """Deterministic YAML text (key order as given, block style, no aliases, wide lines)."""
    return yaml.dump(
        doc,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=4096,
    )

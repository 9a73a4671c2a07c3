"""RecipeResult documents: write resolved recipes, read AICR-written ones.

Shape (AICR ``RecipeResult``, fields in this order)::

    kind: RecipeResult
    apiVersion: aicr.run/v1beta2
    metadata: {generator, appliedOverlays, selectedProfile: {name, value, ownedPaths}}
    criteria: {service, accelerator, os, intent, platform}
    constraints: [{name, value}]
    componentRefs: [{name, type, namespace, chart, source, version, valuesFile, overrides,
                     dependencyRefs, preManifestFiles, manifestFiles, values}]
    deploymentOrder: [component names]

``values`` (the hydrated recipe-level values) is a gpucluster addition; everything else
follows AICR. ``overrides`` already contains the selected profile's values, as AICR writes it.

What :func:`recipe_from_file` accepts (docs/recipes.md has the full table):

* ``kind: RecipeResult``; ``apiVersion`` ``aicr.nvidia.com/v1alpha1`` or ``aicr.run/<version>``.
* ``criteria`` (required): resolved against gpucluster's catalog, with the profile named in
  ``metadata.selectedProfile`` (or the cluster's profile); the result supplies each
  component's catalog facts and the profile-owned values.
* ``componentRefs`` (required): the component set. Each name must be in gpucluster's
  registry. ``source``/``chart``/``version``/``namespace`` pin the chart when given (a
  ``repo/`` prefix on ``chart`` is dropped, as AICR does); ``valuesFile`` must name a file
  that exists in gpucluster's catalog (same ``components/<name>/...`` layout as AICR);
  ``overrides`` are taken as written; ``manifestFiles``/``preManifestFiles`` map to the
  catalog's ``.yaml.j2`` templates; ``values`` (gpucluster output) that differ from what the
  files and overrides give replace them as the complete recipe-level values, on a componentRef
  without ``overrides`` (with ``overrides`` the disagreement is an error: an edit of one of them,
  or a catalog change since the file was written, would otherwise be dropped silently).
* Rejected with an error: other kinds or apiVersions, Kustomize refs (``type: Kustomize``,
  ``tag``, ``path``), ``patches``, ``cleanup: true``, unknown components, values files or
  manifests gpucluster's catalog does not have, a ``selectedProfile`` that contradicts the
  cluster's ``profile``, a non-empty ``configuration`` block, unknown keys.
* Ignored: ``deploymentOrder`` (recomputed from dependencyRefs), ``validation``, other
  ``metadata`` fields, ``expectedResources``/``healthCheckAsserts``/``healthCheckSkip``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

import yaml

from gpucluster import yamlsafe
from gpucluster.catalog import REGISTRY_SCHEMA, Catalog
from gpucluster.errors import GpuclusterError, allowed_list
from gpucluster.model import ANY, CRITERIA_FIELDS, ClusterSpec, Component, ComponentRef, Constraint, Criteria, Recipe
from gpucluster.recipe import COMPONENT_TYPES, order_components, resolve, values_files_for
from gpucluster.values import deep_merge, get_path, leaf_paths

_MISSING = object()

KIND = "RecipeResult"
API_VERSION = "aicr.run/v1beta2"
"""apiVersion gpucluster writes (AICR's current RecipeResult group/version)."""
LEGACY_API_VERSION = "aicr.nvidia.com/v1alpha1"
_AICR_RUN = re.compile(r"^aicr\.run/v[0-9]+((alpha|beta)[0-9]+)?$")

TOP_KEYS = ("kind", "apiVersion", "metadata", "criteria", "constraints", "componentRefs", "deploymentOrder", "validation", "configuration")
REF_KEYS = (
    "name",
    "type",
    "source",
    "chart",
    "version",
    "namespace",
    "valuesFile",
    "overrides",
    "dependencyRefs",
    "manifestFiles",
    "preManifestFiles",
    "values",
    "cleanup",
    "expectedResources",
    "healthCheckAsserts",
    "healthCheckSkip",
)
_HELM_FACTS = REGISTRY_SCHEMA["properties"]["components"]["items"]["properties"]["helm"]["properties"]
CHART_FACT_RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "source": (re.compile(_HELM_FACTS["repository"]["pattern"]), "an https:// or oci:// chart repository URL"),
    "chart": (re.compile(_HELM_FACTS["chart"]["pattern"]), "a chart name: letters, digits, '.', '_', '-' (no repo/ prefix)"),
    "namespace": (re.compile(_HELM_FACTS["namespace"]["pattern"]), "a DNS-1123 label of at most 63 characters"),
    "version": (re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$"), "a pinned chart version such as v26.7.1 or 0.5.1"),
}
"""What a RecipeResult may pin per componentRef: the registry's rules (``registry.yaml`` schema),
so a recipe file cannot point a release at a plaintext ``http://`` or ``file://`` repository or an
invalid namespace that would only fail inside Terraform."""

REF_REJECTED = {
    "tag": "Kustomize components are not supported",
    "path": "Kustomize components are not supported",
    "patches": "patch files are applied by no deployer (AICR rejects them too)",
}


# --------------------------------------------------------------------------- writing


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


def to_document(recipe: Recipe, components: Mapping[str, Component] | None = None) -> dict[str, Any]:
    """The RecipeResult document of a resolved recipe (plain data, deterministic order).

    Args:
        recipe: from :func:`gpucluster.recipe.recipe_for_cluster`.
        components: effective components; when given, each componentRef carries its
            hydrated ``values`` (components absent from the mapping get none).
    """
    metadata: dict[str, Any] = {"generator": "gpucluster", "appliedOverlays": list(recipe.applied_overlays)}
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
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096)


# --------------------------------------------------------------------------- reading


REGENERATE_FIX = (
    "regenerate the file (gpucluster recipe --service ... > file, or aicr recipe) instead of editing it by hand, or "
    "correct the key named here (docs/recipes.md, RecipeResult input)"
)
"""The fix of a RecipeResult problem that names none of its own."""


def _with_fix(read):
    """Give every problem of a RecipeResult reader a fix (:data:`REGENERATE_FIX` when it has none)
    and the cluster it is read for (``cluster=``: a name or a ClusterSpec)."""

    @functools.wraps(read)
    def wrapper(*args, **kwargs):
        try:
            return read(*args, **kwargs)
        except GpuclusterError as err:
            cluster = kwargs.get("cluster")
            cname = getattr(cluster, "name", cluster)
            problems = [dataclasses.replace(p, fix=p.fix or REGENERATE_FIX, cluster=p.cluster or cname) for p in err.problems]
            raise type(err)(problems=problems) from None

    return wrapper


def _load(path: str, display: str | None, cluster: str | None) -> dict[str, Any]:
    name = display or path
    data = yamlsafe.load_yaml_file(Path(path), display=name, cluster=cluster)
    if not isinstance(data, dict):
        raise GpuclusterError("a RecipeResult must be a YAML mapping", file=name, cluster=cluster)
    kind = data.get("kind")
    if kind != KIND:
        raise GpuclusterError(
            f"kind is {kind!r}, not RecipeResult",
            file=name,
            cluster=cluster,
            key="kind",
            allowed=KIND,
            fix="give the output of 'aicr recipe' or 'gpucluster recipe'",
        )
    api = data.get("apiVersion")
    if not isinstance(api, str) or not (api == LEGACY_API_VERSION or _AICR_RUN.match(api)):
        raise GpuclusterError(
            f"unsupported apiVersion {api!r}",
            file=name,
            cluster=cluster,
            key="apiVersion",
            allowed=f"{LEGACY_API_VERSION}, aicr.run/<version> (e.g. {API_VERSION})",
        )
    unknown = sorted(k for k in data if k not in TOP_KEYS)
    if unknown:
        raise GpuclusterError(
            f"unknown key '{unknown[0]}'", file=name, cluster=cluster, key=unknown[0], allowed=", ".join(TOP_KEYS)
        )
    if data.get("configuration"):
        raise GpuclusterError(
            "RecipeResult 'configuration' (typed desired state, e.g. Slurm accounting) is not supported",
            file=name,
            cluster=cluster,
            key="configuration",
            fix="resolve the recipe without --config/configuration options",
        )
    return data


def _criteria(data: Mapping[str, Any], name: str, cluster: str | None) -> Criteria:
    raw = data.get("criteria")
    if not isinstance(raw, dict):
        raise GpuclusterError(
            "missing or invalid 'criteria' mapping", file=name, cluster=cluster, key="criteria", fix="add the recipe's criteria"
        )
    values: dict[str, str] = {}
    for key, value in raw.items():
        if key == "nodes":  # AICR node count hint: no effect on resolution here
            continue
        if key not in CRITERIA_FIELDS:
            raise GpuclusterError(
                f"unknown criteria field '{key}'", file=name, cluster=cluster, key=f"criteria.{key}", allowed=", ".join(CRITERIA_FIELDS)
            )
        if value in (None, ""):
            continue
        if not isinstance(value, str):
            raise GpuclusterError(f"criteria.{key} must be a string", file=name, cluster=cluster, key=f"criteria.{key}")
        values[key] = value.strip().lower()
    if values.get("service", ANY) == ANY:
        raise GpuclusterError(
            "criteria.service is missing; gpucluster needs it to pick the platform",
            file=name,
            cluster=cluster,
            key="criteria.service",
        )
    return Criteria(**{f: values.get(f, ANY) for f in CRITERIA_FIELDS})


@_with_fix
def read_criteria(path: str, *, display: str | None = None, cluster: str | None = None) -> Criteria:
    """Criteria of a RecipeResult file (validates kind, apiVersion and criteria only).

    Raises:
        GpuclusterError: unreadable file, wrong kind/apiVersion, missing/invalid criteria.
    """
    data = _load(path, display, cluster)
    return _criteria(data, display or path, cluster)


def _selected_profile(data: Mapping[str, Any], name: str, cluster: ClusterSpec | None) -> dict[str, str]:
    meta = data.get("metadata") or {}
    if not isinstance(meta, dict):
        raise GpuclusterError("'metadata' must be a mapping", file=name, key="metadata")
    selection: dict[str, str] = {}
    sel = meta.get("selectedProfile")
    if sel is not None:
        if not isinstance(sel, dict) or not isinstance(sel.get("name"), str) or not isinstance(sel.get("value"), str):
            raise GpuclusterError(
                "metadata.selectedProfile needs string 'name' and 'value'", file=name, key="metadata.selectedProfile"
            )
        selection[sel["name"]] = sel["value"]
    if cluster is not None:
        for pname, pvalue in cluster.profile.items():
            if pname in selection and selection[pname] != pvalue:
                raise GpuclusterError(
                    f"the cluster selects profile {pname}={pvalue}, but the recipe file was resolved for {pname}={selection[pname]}",
                    file=cluster.source,
                    cluster=cluster.name,
                    key=f"profile.{pname}",
                    fix=f"regenerate the recipe with --profile {pname}={pvalue}, or drop the cluster's profile setting",
                )
            selection[pname] = pvalue
    return selection


def _inside_catalog(path: str) -> bool:
    """A catalog-relative reference: not absolute, no ``..`` segment, no backslash."""
    p = PurePosixPath(path)
    return not p.is_absolute() and ".." not in p.parts and "\\" not in path


def _catalog_path_error(path: str, comp: str, name: str, key: str, cluster: str | None) -> GpuclusterError:
    return GpuclusterError(
        f"'{path}' is not a path inside gpucluster's catalog",
        file=name,
        cluster=cluster,
        component=comp,
        key=key,
        allowed="catalog-relative paths such as components/<name>/values.yaml (no '..', not absolute)",
        fix="reference the catalog's own files, or put the values inline under 'overrides'",
    )


def _manifest_ref(
    path: Any, comp: str, ours: ComponentRef | None, catalog: Catalog, name: str, key: str, cluster: str | None
) -> str:
    if not isinstance(path, str) or not path:
        raise GpuclusterError("manifest entries must be non-empty strings", file=name, cluster=cluster, component=comp, key=key)
    if not _inside_catalog(path):
        raise _catalog_path_error(path, comp, name, key, cluster)
    template = path if path.endswith(".j2") else f"{path}.j2"
    known = set()
    if ours is not None:
        known = set(ours.manifest_files) | set(ours.pre_manifest_files)
    if template in known or any((d / template).is_file() for d in catalog.dirs):
        return template
    raise GpuclusterError(
        f"gpucluster's catalog has no manifest template for '{path}'",
        file=name,
        cluster=cluster,
        component=comp,
        key=key,
        allowed=", ".join(sorted(known)) or "none for this component",
        fix="remove the manifest from the recipe or add its template to a catalog directory (components/<name>/manifests/*.yaml.j2)",
    )


def _yaml_scalar(value: Any) -> str:
    """A value as written in YAML (``false``, ``null``, ``'/'``) for messages."""
    if isinstance(value, str):
        return f"'{value}'"
    return yaml.safe_dump(value, default_flow_style=True, width=4096).strip().removesuffix("...").strip()


def _values_files_known(comp: str, catalog: Catalog) -> list[str]:
    found = set()
    for d in catalog.dirs:
        folder = d / "components" / comp
        if folder.is_dir():
            found.update(f"components/{comp}/{p.name}" for p in folder.glob("values*.yaml"))
    return sorted(found)


@_with_fix
def recipe_from_file(path: str, catalog: Catalog, *, cluster: ClusterSpec | None = None, display: str | None = None) -> Recipe:
    """Read a RecipeResult (written by ``aicr recipe`` or ``gpucluster recipe``) into a Recipe.

    See the module docstring for what is accepted and rejected.

    Args:
        path: the file (already checked to be inside the project folder by the config loader).
        catalog: gpucluster's catalog (values files and templates are looked up there).
        cluster: the cluster it is used for (profile choice, error locations).
        display: how to name the file in errors.

    Raises:
        GpuclusterError: naming the recipe file, component and key.
    """
    name = display or path
    cname = cluster.name if cluster else None
    data = _load(path, name, cname)
    criteria = _criteria(data, name, cname)
    selection = _selected_profile(data, name, cluster)
    ours = resolve(criteria, catalog, profile=selection, file=name, cluster=cname)
    ours_by_name = {r.name: r for r in ours.component_refs}

    raw_refs = data.get("componentRefs")
    if not isinstance(raw_refs, list) or not raw_refs:
        raise GpuclusterError("'componentRefs' must be a non-empty list", file=name, cluster=cname, key="componentRefs")
    refs: list[ComponentRef] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_refs):
        key = f"componentRefs[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise GpuclusterError("each componentRef must be a mapping with a 'name'", file=name, cluster=cname, key=key)
        comp = raw["name"]
        w = {"file": name, "cluster": cname, "component": comp}
        if comp in seen:
            raise GpuclusterError(f"component '{comp}' is listed twice", key=f"{key}.name", **w)
        seen.add(comp)
        entry = catalog.components.get(comp)
        if entry is None:
            raise GpuclusterError(
                f"component '{comp}' is not in gpucluster's registry",
                key=f"{key}.name",
                allowed=allowed_list(catalog.components),
                fix="remove it from the recipe, or add it to a catalog registry.yaml",
                **w,
            )
        for bad, why in REF_REJECTED.items():
            if raw.get(bad):
                raise GpuclusterError(f"'{bad}' is not supported: {why}", key=f"{key}.{bad}", **w)
        unknown = sorted(k for k in raw if k not in REF_KEYS and k not in REF_REJECTED)
        if unknown:
            raise GpuclusterError(f"unknown key '{unknown[0]}'", key=f"{key}.{unknown[0]}", allowed=", ".join(REF_KEYS), **w)
        if raw.get("cleanup"):
            raise GpuclusterError(
                "'cleanup: true' (uninstall after validation) is not supported", key=f"{key}.cleanup", fix="remove the component", **w
            )
        rtype = raw.get("type") or entry.type
        if rtype not in COMPONENT_TYPES:
            raise GpuclusterError(f"unsupported component type '{rtype}'", key=f"{key}.type", allowed=", ".join(COMPONENT_TYPES), **w)
        if entry.type == "Manifest":
            rtype = "Manifest"  # AICR writes manifest-only components as Helm refs without a chart
        mine = ours_by_name.get(comp)
        strings: dict[str, str] = {}
        for field_name in ("source", "chart", "version", "namespace", "valuesFile"):
            value = raw.get(field_name)
            if value is None or value == "":
                strings[field_name] = ""
                continue
            if not isinstance(value, str) or value != value.strip():
                raise GpuclusterError(
                    f"'{field_name}' must be a string without surrounding spaces", key=f"{key}.{field_name}", **w
                )
            rule = CHART_FACT_RULES.get(field_name)
            checked = value.rsplit("/", 1)[-1] if field_name == "chart" else value  # AICR's repo/ prefix is dropped
            if rule is not None and (not rule[0].match(checked) or (field_name == "namespace" and len(value) > 63)):
                raise GpuclusterError(
                    f"{field_name} '{value}' is not allowed",
                    key=f"{key}.{field_name}",
                    allowed=rule[1],
                    fix=f"remove '{field_name}' to use gpucluster's catalog value, or correct it",
                    **w,
                )
            strings[field_name] = value
        chart = strings["chart"].rsplit("/", 1)[-1] if strings["chart"] else ""
        if rtype == "Manifest":
            source, chart = "", ""
        else:
            source = strings["source"] or (mine.source if mine else entry.repository)
            chart = chart or (mine.chart if mine else entry.chart)
        version = strings["version"] or (mine.version if mine else entry.version)
        namespace = strings["namespace"] or (mine.namespace if mine else entry.namespace)

        overrides_raw = raw.get("overrides") or {}
        if not isinstance(overrides_raw, dict):
            raise GpuclusterError("'overrides' must be a mapping", key=f"{key}.overrides", **w)
        vf = strings["valuesFile"]
        if vf and not _inside_catalog(vf):
            raise _catalog_path_error(vf, comp, name, f"{key}.valuesFile", cname)
        if vf and not any((d / vf).is_file() for d in catalog.dirs):
            raise GpuclusterError(
                f"values file '{vf}' is not in gpucluster's catalog",
                key=f"{key}.valuesFile",
                allowed=", ".join(_values_files_known(comp, catalog)) or "none",
                fix="use one of the catalog's values files, or put the values inline under 'overrides'",
                **w,
            )
        values_files = values_files_for(comp, vf, catalog)
        if "enabled" in overrides_raw and not isinstance(overrides_raw["enabled"], bool):
            raise GpuclusterError(
                f"overrides.enabled is {overrides_raw['enabled']!r}, not a boolean; it decides whether the component "
                "is installed",
                key=f"{key}.overrides.enabled",
                allowed="true or false (YAML booleans, without quotes)",
                fix="write enabled: false to leave the component out, or remove the key",
                **w,
            )
        overrides = {k: copy.deepcopy(v) for k, v in overrides_raw.items() if not (k == "enabled" and isinstance(v, bool))}
        def check_profile_owned(candidate: Mapping[str, Any]) -> None:
            for owned_path, owned_value in leaf_paths(ours.profile_owned.get(comp, {})):
                have = get_path(candidate, owned_path, _MISSING)
                if have is not _MISSING and have != owned_value:
                    raise GpuclusterError(
                        f"overrides set {owned_path}={_yaml_scalar(have)}, but profile {ours.profile[0]}={ours.profile[1]} "  # type: ignore[index]
                        f"owns it as {_yaml_scalar(owned_value)}",
                        key=f"{key}.overrides.{owned_path}",
                        fix="select the matching profile (metadata.selectedProfile or the cluster's profile) instead of overriding",
                        **w,
                    )

        check_profile_owned(overrides)
        if "values" in raw:
            if not isinstance(raw["values"], dict):
                raise GpuclusterError("'values' must be a mapping", key=f"{key}.values", **w)
            layered: dict[str, Any] = {}
            for rel in values_files:
                layered = deep_merge(layered, catalog.load_values(rel), keep_nulls=True)
            layered = deep_merge(layered, overrides, keep_nulls=True)
            layered = deep_merge(layered, ours.profile_owned.get(comp), keep_nulls=True)
            if layered != raw["values"]:
                if overrides:
                    # values and overrides disagree: one of them was edited, and which one cannot be told
                    raise GpuclusterError(
                        "'values' do not match what valuesFile + overrides give: one of them was edited, or the "
                        "catalog's values file changed since the recipe was written; gpucluster cannot tell which "
                        "values are meant",
                        key=f"{key}.values",
                        fix="remove 'values' to use valuesFile + overrides (gpucluster recomputes them; or regenerate "
                        "the recipe), or remove 'overrides' to take 'values' as the complete recipe-level values",
                        **w,
                    )
                # edited (or foreign) hydrated values: they are the complete recipe-level values
                values_files, overrides = [], copy.deepcopy(raw["values"])
                check_profile_owned(overrides)
        gate = overrides_raw.get("enabled")
        enabled = gate if isinstance(gate, bool) else True

        lists: dict[str, list[str]] = {}
        for field_name in ("dependencyRefs", "manifestFiles", "preManifestFiles"):
            value = raw.get(field_name) or []
            if not isinstance(value, list):
                raise GpuclusterError(f"'{field_name}' must be a list", key=f"{key}.{field_name}", **w)
            lists[field_name] = value
        deps = []
        for j, dep in enumerate(lists["dependencyRefs"]):
            if not isinstance(dep, str):
                raise GpuclusterError("dependencyRefs entries must be strings", key=f"{key}.dependencyRefs[{j}]", **w)
            deps.append(dep)
        manifests = [
            _manifest_ref(p, comp, mine, catalog, name, f"{key}.manifestFiles[{j}]", cname) for j, p in enumerate(lists["manifestFiles"])
        ]
        pre = [
            _manifest_ref(p, comp, mine, catalog, name, f"{key}.preManifestFiles[{j}]", cname)
            for j, p in enumerate(lists["preManifestFiles"])
        ]
        if rtype == "Helm" and not (source and chart and version):
            raise GpuclusterError("a Helm component needs source, chart and version", key=key, **w)
        refs.append(
            ComponentRef(
                name=comp,
                type=rtype,  # type: ignore[arg-type]
                source=source,
                chart=chart,
                version=version,
                namespace=namespace,
                values_files=values_files,
                overrides=overrides,
                pre_manifest_files=pre,
                manifest_files=manifests,
                dependency_refs=sorted(set(deps)),
                enabled=enabled,
            )
        )
    ordered = order_components(refs, file=name, cluster=cname)

    constraints = ours.constraints
    if "constraints" in data:
        raw_c = data.get("constraints") or []
        if not isinstance(raw_c, list):
            raise GpuclusterError("'constraints' must be a list", file=name, cluster=cname, key="constraints")
        constraints = []
        for j, c in enumerate(raw_c):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str) or "value" not in c:
                raise GpuclusterError("constraints need 'name' and 'value'", file=name, cluster=cname, key=f"constraints[{j}]")
            constraints.append(Constraint(c["name"], str(c["value"])))
    meta = data.get("metadata") or {}
    applied = meta.get("appliedOverlays") if isinstance(meta.get("appliedOverlays"), list) else None
    present = {r.name for r in ordered}
    return Recipe(
        criteria=criteria,
        applied_overlays=[str(a) for a in applied] if applied else list(ours.applied_overlays),
        constraints=constraints,
        component_refs=ordered,
        profile=ours.profile,
        profile_owned={k: v for k, v in ours.profile_owned.items() if k in present},
        advertiser=ours.advertiser,
    )

"""RecipeResult documents: their shape, and reading AICR-written ones (writing:
:mod:`gpucluster.recipes.recipe_result_writer`).

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
import difflib
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from gpucluster import yamlsafe
from gpucluster.errors import GpuclusterError, Problem, allowed_list
from gpucluster.fields import Where
from gpucluster.model import (
    ANY,
    CRITERIA_FIELDS,
    ClusterSpec,
    Component,
    ComponentRef,
    Constraint,
    Criteria,
    Finding,
    Recipe,
    Severity,
    absolute_key,
)
from gpucluster.recipes.catalog import REGISTRY_SCHEMA, Catalog, chart_version_entries
from gpucluster.recipes.layering import layer_values
from gpucluster.recipes.overlays import COMPONENT_TYPES
from gpucluster.recipes.recipe import (
    catalog_has,
    order_components,
    owned_component_fix,
    resolve,
    values_files_for,
)
from gpucluster.values import deep_merge, get_path, leaf_paths
from gpucluster.versions import compare_versions

_MISSING = object()

KIND = "RecipeResult"
API_VERSION = "aicr.run/v1beta2"
"""apiVersion gpucluster writes (AICR's current RecipeResult group/version)."""
LEGACY_API_VERSION = "aicr.nvidia.com/v1alpha1"
_AICR_RUN = re.compile(r"^aicr\.run/v[0-9]+((alpha|beta)[0-9]+)?$")

TOP_KEYS = (
    "kind",
    "apiVersion",
    "metadata",
    "criteria",
    "constraints",
    "componentRefs",
    "deploymentOrder",
    "validation",
    "configuration",
)
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
_HELM_FACTS = REGISTRY_SCHEMA["properties"]["components"]["items"]["properties"]["helm"][
    "properties"
]
CHART_FACT_RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "source": (
        re.compile(_HELM_FACTS["repository"]["pattern"]),
        "an https:// or oci:// chart repository URL",
    ),
    "chart": (
        re.compile(_HELM_FACTS["chart"]["pattern"]),
        "a chart name: letters, digits, '.', '_', '-' (no repo/ prefix)",
    ),
    "namespace": (
        re.compile(_HELM_FACTS["namespace"]["pattern"]),
        "a DNS-1123 label of at most 63 characters",
    ),
    "version": (
        re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$"),
        "a pinned chart version such as v26.7.1 or 0.5.1",
    ),
}
"""What a RecipeResult may pin per componentRef: the registry's rules (``registry.yaml`` schema),
so a recipe file cannot point a release at a plaintext ``http://`` or ``file://`` repository or an
invalid namespace that would only fail inside Terraform."""

REF_REJECTED = {
    "tag": "Kustomize components are not supported",
    "path": "Kustomize components are not supported",
    "patches": "patch files are applied by no deployer (AICR rejects them too)",
}


# --------------------------------------------------------------------------- reading


REGENERATE_FIX = (
    "regenerate the file (gpucluster recipe --service ... > file, or aicr recipe) instead of editing it by hand, or "
    "correct the key named here (docs/recipes.md, RecipeResult input)"
)
"""The fix of a RecipeResult problem that names none of its own."""

AICR_TOP_KEYS = TOP_KEYS
"""Every top-level field of an AICR RecipeResult (``pkg/recipe`` ``RecipeResult``, v1alpha1 to v1alpha3)."""
USED_TOP_KEYS = (
    "kind",
    "apiVersion",
    "metadata",
    "criteria",
    "configuration",
    "constraints",
    "componentRefs",
)
AICR_REF_KEYS = REF_KEYS + ("tag", "path", "patches")
USED_REF_KEYS = (
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
)
UNUSED_FIELDS = ("validation", "expectedResources", "healthCheckAsserts", "healthCheckSkip")
"""AICR fields gpucluster reads past: ``validation`` (AICR's validator phases) and the
per-component health checks (gpucluster's readiness gates come from the platform plugins).
Reported in one info line ``RECIPE-FIELDS-UNUSED``. ``deploymentOrder`` is read past silently
(gpucluster writes it too; the order is recomputed from dependencyRefs)."""
GATE_KEYS = ("enabled", "install")
"""``overrides`` keys that decide whether a component is installed (AICR ``ComponentRef.IsEnabled``:
``enabled: false`` or ``install: false``); they are not chart values."""


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
            problems = [
                dataclasses.replace(p, fix=p.fix or REGENERATE_FIX, cluster=p.cluster or cname)
                for p in err.problems
            ]
            raise type(err)(problems=problems) from None

    return wrapper


class _Report:
    """Problems (errors, all reported together) and findings (info/warning) of one file."""

    def __init__(self, file: str, cluster: str | None) -> None:
        self.file = file
        self.cluster = cluster
        self.problems: list[Problem] = []
        self.findings: list[Finding] = []

    def bad(self, message: str, **where: Any) -> None:
        self.problems.append(Problem(message, file=self.file, cluster=self.cluster, **where))

    def take(self, err: GpuclusterError) -> None:
        self.problems.extend(err.problems)

    def note(
        self, id: str, severity: Severity, component: str, key: str, message: str, fix: str
    ) -> None:
        self.findings.append(
            Finding(id, severity, self.cluster or "", component, key, message, fix, file=self.file)
        )

    def checked(self, check: Any, *args: Any, **kwargs: Any) -> Any:
        """``check(*args, **kwargs)`` -- a typed reader of :class:`gpucluster.fields.Where` /
        :class:`gpucluster.fields.Fields` -- with its error recorded instead of raised (every
        problem of the file is reported together); ``None`` then."""
        try:
            return check(*args, **kwargs)
        except GpuclusterError as err:
            self.take(err)
            return None

    def where(self, component: str | None = None) -> Where:
        """Where this file's values are, for the typed readers (:meth:`checked`)."""
        return Where(self.file, self.cluster, component, docs="docs/recipes.md")

    def check(self) -> None:
        if self.problems:
            raise GpuclusterError(problems=list(self.problems))


def _unknown_keys(
    raw: Mapping[str, Any],
    known: tuple[str, ...],
    used: tuple[str, ...],
    base: str,
    rep: _Report,
    unknown: list[str],
    component: str | None = None,
) -> None:
    """Keys no AICR release writes: a near miss of a key gpucluster uses is an error (a typo would
    silently drop what it sets); any other is collected for one info line (a later AICR addition)."""
    for k in raw:
        if k in known:
            continue
        close = difflib.get_close_matches(str(k), used, n=1, cutoff=0.8)
        if close:
            rep.bad(
                f"unknown key '{k}' (did you mean '{close[0]}'?)",
                component=component,
                key=f"{base}{k}",
                allowed=", ".join(used),
                fix=f"rename it to '{close[0]}'",
            )
        else:
            unknown.append(f"{base}{k}")


def _load(path: str, display: str | None, cluster: str | None) -> dict[str, Any]:
    name = display or path
    data = yamlsafe.load_yaml_file(Path(path), display=name, cluster=cluster)
    if not isinstance(data, dict):
        raise GpuclusterError("a RecipeResult must be a YAML mapping", file=name, cluster=cluster)
    rep = _Report(name, cluster)
    kind = data.get("kind")
    if kind != KIND:
        rep.bad(
            f"kind is {kind!r}, not RecipeResult",
            key="kind",
            allowed=KIND,
            fix="give the output of 'aicr recipe' or 'gpucluster recipe'",
        )
    api = data.get("apiVersion")
    if api is not None and (
        not isinstance(api, str) or not (api == LEGACY_API_VERSION or _AICR_RUN.fullmatch(api))
    ):
        rep.bad(
            f"unsupported apiVersion {api!r}",
            key="apiVersion",
            allowed=f"{LEGACY_API_VERSION}, aicr.run/<version> (v1alpha2, v1alpha3, ...; e.g. {API_VERSION})",
        )
    if data.get("configuration"):
        rep.bad(
            "RecipeResult 'configuration' (typed desired state, e.g. Slurm accounting) is not supported",
            key="configuration",
            fix="resolve the recipe without --config/configuration options",
        )
    rep.check()
    return data


def _criteria(data: Mapping[str, Any], rep: _Report) -> Criteria | None:
    raw = data.get("criteria")
    if not isinstance(raw, dict):
        rep.bad(
            "missing or invalid 'criteria' mapping", key="criteria", fix="add the recipe's criteria"
        )
        return None
    values: dict[str, str] = {}
    for key, value in raw.items():
        if key == "nodes":  # AICR node count hint: no effect on resolution here
            continue
        if key not in CRITERIA_FIELDS:
            rep.bad(
                f"unknown criteria field '{key}'",
                key=f"criteria.{key}",
                allowed=", ".join(CRITERIA_FIELDS),
            )
            continue
        if value in (None, ""):
            continue
        if rep.checked(rep.where().check_str, value, f"criteria.{key}") is None:
            continue
        values[key] = value.strip().lower()
    if values.get("service", ANY) == ANY:
        rep.bad(
            "criteria.service is missing; gpucluster needs it to pick the platform",
            key="criteria.service",
        )
        return None
    return Criteria(**{f: values.get(f, ANY) for f in CRITERIA_FIELDS})


@_with_fix
def read_criteria(path: str, *, display: str | None = None, cluster: str | None = None) -> Criteria:
    """Criteria of a RecipeResult file (validates kind, apiVersion and criteria only).

    Raises:
        GpuclusterError: unreadable file, wrong kind/apiVersion, missing/invalid criteria (all
            of them at once).
    """
    name = display or path
    data = _load(path, display, cluster)
    rep = _Report(name, cluster)
    criteria = _criteria(data, rep)
    rep.check()
    assert criteria is not None
    return criteria


def _selected_profile(
    data: Mapping[str, Any], rep: _Report, cluster: ClusterSpec | None
) -> dict[str, str]:
    meta = rep.checked(rep.where().fields, data.get("metadata") or {}, "metadata")
    if meta is None:
        return {}
    selection: dict[str, str] = {}
    sel = meta.get("selectedProfile")
    if sel is not None:
        if (
            not isinstance(sel, dict)
            or not isinstance(sel.get("name"), str)
            or not isinstance(sel.get("value"), str)
        ):
            rep.bad(
                "metadata.selectedProfile needs string 'name' and 'value'",
                key="metadata.selectedProfile",
            )
        else:
            selection[sel["name"]] = sel["value"]
    if cluster is not None:
        for pname, pvalue in cluster.profile.items():
            if pname in selection and selection[pname] != pvalue:
                rep.problems.append(
                    Problem(
                        f"the cluster selects profile {pname}={pvalue}, but the recipe file was resolved for {pname}={selection[pname]}",
                        file=cluster.source,
                        cluster=cluster.name,
                        key=absolute_key(cluster, f"profile.{pname}"),
                        fix=f"regenerate the recipe with --profile {pname}={pvalue}, or drop the cluster's profile setting",
                    )
                )
            selection[pname] = pvalue
    return selection


def _inside_catalog(path: str) -> bool:
    """A catalog-relative reference: not absolute, no ``..`` segment, no backslash."""
    p = PurePosixPath(path)
    return not p.is_absolute() and ".." not in p.parts and "\\" not in path


def _catalog_path_error(
    path: str, comp: str, name: str, key: str, cluster: str | None
) -> GpuclusterError:
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
    path: Any,
    comp: str,
    ours: ComponentRef | None,
    catalog: Catalog,
    name: str,
    key: str,
    cluster: str | None,
) -> str:
    if not isinstance(path, str) or not path:
        raise GpuclusterError(
            "manifest entries must be non-empty strings",
            file=name,
            cluster=cluster,
            component=comp,
            key=key,
        )
    if not _inside_catalog(path):
        raise _catalog_path_error(path, comp, name, key, cluster)
    template = path if path.endswith(".j2") else f"{path}.j2"
    known = set()
    if ours is not None:
        known = set(ours.manifest_files) | set(ours.pre_manifest_files)
    if template in known or catalog_has(catalog, template):
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
    return (
        yaml.safe_dump(value, default_flow_style=True, width=4096)
        .strip()
        .removesuffix("...")
        .strip()
    )


def _values_files_known(comp: str, catalog: Catalog) -> list[str]:
    found: set[str] = set()
    for d in catalog.dirs:
        folder = d / "components" / comp
        if folder.is_dir():
            found.update(f"components/{comp}/{p.name}" for p in folder.glob("values*.yaml"))
    return sorted(found)


def former_names(catalog: Catalog) -> dict[str, tuple[str, str]]:
    """Registry ``formerNames``: old component name -> (current name, note)."""
    return {f.name: (e.name, f.note) for e in catalog.components.values() for f in e.former_names}


def _renamed_path(path: str, renames: Mapping[str, tuple[str, str]]) -> str:
    """``components/<old>/...`` -> ``components/<new>/...`` for a former component name."""
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "components" and parts[1] in renames:
        return "/".join(["components", renames[parts[1]][0], *parts[2:]])
    return path


def _drop_path(values: dict[str, Any], path: str) -> None:
    """Remove the key at a dotted path, and parents left empty by it."""
    from gpucluster.values import split_path

    parts = split_path(path)
    stack = [values]
    for part in parts[:-1]:
        stack.append(stack[-1][part])
    del stack[-1][parts[-1]]
    for depth in range(len(parts) - 1, 0, -1):
        if stack[depth] == {}:
            del stack[depth - 1][parts[depth - 1]]


_DIRECTION_ID = {
    "upgrade": "VERSION-UPGRADED",
    "downgrade": "VERSION-DOWNGRADED",
    "replace": "VERSION-REPLACED",
}
_DIRECTION_TEXT = {
    "upgrade": "an upgrade (the file's pin is older than the catalog's)",
    "downgrade": "a downgrade (the file's pin is newer than the catalog's)",
    "replace": "another chart or version (neither is newer by Semantic Versioning)",
}


def _direction(pinned: str, catalog: str) -> str:
    """``upgrade``, ``downgrade`` or ``replace``: what installing the catalog's version ``catalog``
    instead of the file's pin ``pinned`` is (:func:`gpucluster.versions.compare_versions`; the
    same or an unordered version: ``replace``)."""
    order = compare_versions(pinned, catalog)
    return "upgrade" if order == -1 else "downgrade" if order == 1 else "replace"


def _covered_ranges(entry: Any, chart: str, mine: ComponentRef | None) -> str:
    """The ``chartVersions`` ranges of ``entry`` for ``chart`` a pin may take, for a fix:
    ``>=82.8.0 <85.0.0`` (``or``-joined), narrowed by the recipe's own range when it has one."""
    ranges = " or ".join(cv.versions for cv in chart_version_entries(entry, chart)) or "none"
    if mine is not None and mine.chart_versions:
        ranges += f" within the recipe's {mine.chart_versions}"
    return ranges


def _version_key(version: str) -> str:
    return version[1:] if version[:1] in ("v", "V") and version[1:2].isdigit() else version


def _ref_error(rep: _Report, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except GpuclusterError as err:
        rep.take(err)
        return None


@_with_fix
class _FileReader:
    """The steps of :func:`recipe_from_file` for each ``componentRefs[i]`` entry: which component
    it is (:meth:`identify`), its chart facts (:meth:`chart_facts`), its values
    (:meth:`values`), its lists (:meth:`lists`); what they find goes to the file's report."""

    def __init__(
        self,
        data: Mapping[str, Any],
        catalog: Catalog,
        rep: _Report,
        ours: Recipe,
        *,
        name: str,
        cname: str | None,
        skew_severity: str,
        unknown: list[str],
    ) -> None:
        self.data, self.catalog, self.rep, self.ours = data, catalog, rep, ours
        self.name, self.cname, self.skew_severity, self.unknown = (
            name,
            cname,
            skew_severity,
            unknown,
        )
        self.ours_by_name = {r.name: r for r in ours.component_refs}
        self.renames = former_names(catalog)
        self.refs: list[ComponentRef] = []
        self.ref_keys: dict[str, str] = {}
        self.seen: dict[str, str] = {}
        self.ref_unused: dict[str, int] = {}
        self.deps_at: list[tuple[str, str, str]] = []  # (component, dep, key)
        self.cluster_profile: dict[str, str] = {}  # the cluster's own profile choices

    def component(self, i: int, raw: Any) -> None:
        """Read ``componentRefs[i]`` into :attr:`refs` (problems and notes into the report)."""
        key = f"componentRefs[{i}]"
        found = self.identify(key, raw)
        if found is None:
            return
        written, comp, renamed, note, entry = found
        self.ref_keys[comp] = key
        mine = self.ours_by_name.get(comp)
        problems_before = len(self.rep.problems)
        rtype, source, chart, version, namespace, strings = self.chart_facts(
            key, raw, written, comp, renamed, note, entry, mine
        )
        values_files, overrides, enabled = self.values(
            key, raw, comp, entry, strings, problems_before
        )
        deps, manifest_lists = self.lists(key, raw, written, comp, entry, mine)
        rep, w, refs = self.rep, {"component": comp}, self.refs
        if rtype == "Helm" and not (source and chart and version):
            rep.bad("a Helm component needs source, chart and version", key=key, **w)
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
                pre_manifest_files=manifest_lists["preManifestFiles"],
                manifest_files=manifest_lists["manifestFiles"],
                dependency_refs=sorted(set(deps)),
                enabled=enabled,
                chart_versions=mine.chart_versions if mine else "",
            )
        )

    def identify(self, key: str, raw: Any) -> tuple[str, str, bool, str, Any] | None:
        """``(written name, component, renamed, rename note, registry entry)``; None (reported)
        for an entry without a name, a component listed twice or one not in the registry."""
        rep, catalog, renames, seen = self.rep, self.catalog, self.renames, self.seen
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            rep.bad("each componentRef must be a mapping with a 'name'", key=key)
            return None
        written = raw["name"]
        comp = written
        renamed = comp not in catalog.components and comp in renames
        note = ""
        if renamed:
            comp, note = renames[written]
        w = {"component": comp}
        if comp in seen:
            rep.bad(
                f"component '{comp}' is listed twice ({seen[comp]} and {key}"
                + (f", as '{written}'" if renamed else "")
                + ")",
                key=f"{key}.name",
                fix="remove one of the entries",
                **w,
            )
            return None
        seen[comp] = key
        entry = catalog.components.get(comp)
        if entry is None:
            rep.bad(
                f"component '{comp}' is not in gpucluster's registry",
                key=f"{key}.name",
                allowed=allowed_list(catalog.components),
                fix="remove it from the recipe, or add it to a catalog registry.yaml",
                **w,
            )
            return None
        return written, comp, renamed, note, entry

    def chart_facts(
        self,
        key: str,
        raw: Mapping[str, Any],
        written: str,
        comp: str,
        renamed: bool,
        note: str,
        entry: Any,
        mine: ComponentRef | None,
    ) -> tuple[str, str, str, str, str, dict[str, str]]:
        """Unknown and unsupported keys, the type, and the chart facts: ``(type, source, chart,
        version, namespace, the file's strings)`` -- the catalog's for a renamed component
        (``RECIPE-RENAMED``), the file's pins otherwise (``VERSION-SKEW`` when they differ)."""
        rep, unknown, ref_unused = self.rep, self.unknown, self.ref_unused
        w = {"component": comp}
        _unknown_keys(raw, AICR_REF_KEYS, USED_REF_KEYS, f"{key}.", rep, unknown, comp)
        for k in UNUSED_FIELDS:
            if k in raw:
                ref_unused[k] = ref_unused.get(k, 0) + 1
        for bad, why in REF_REJECTED.items():
            if raw.get(bad):
                rep.bad(f"'{bad}' is not supported: {why}", key=f"{key}.{bad}", **w)
        if raw.get("cleanup"):
            rep.bad(
                "'cleanup: true' (uninstall after validation) is not supported",
                key=f"{key}.cleanup",
                fix="remove the component",
                **w,
            )
        rtype = raw.get("type") or entry.type
        if rtype not in COMPONENT_TYPES:
            rep.bad(
                f"unsupported component type '{rtype}'",
                key=f"{key}.type",
                allowed=", ".join(COMPONENT_TYPES),
                **w,
            )
            rtype = entry.type
        if entry.type == "Manifest":
            rtype = "Manifest"  # AICR writes manifest-only components as Helm refs without a chart
        strings = self.fact_strings(key, raw, w)
        cat_source = mine.source if mine else entry.repository
        cat_chart = mine.chart if mine else entry.chart
        cat_version = mine.version if mine else entry.version
        cat_namespace = mine.namespace if mine else entry.namespace
        file_chart = strings["chart"].rsplit("/", 1)[-1] if strings["chart"] else ""
        if renamed:
            old_pin = " ".join(x for x in (file_chart or written, strings["version"]) if x)
            new_pin = " ".join(x for x in (cat_chart or comp, cat_version) if x)
            rep.note(
                "RECIPE-RENAMED",
                "info",
                comp,
                f"{key}.name",
                f"'{written}' is now '{comp}': {note}; installing {new_pin}"
                + (f" ({cat_source})" if cat_source else "")
                + (
                    f" instead of the file's {old_pin}"
                    + (f" ({strings['source']})" if strings["source"] else "")
                    if strings["version"] or file_chart
                    else ""
                )
                + ", the chart gpucluster's values are written for",
                f"none needed; regenerate the recipe with a current AICR (aicr recipe) to write '{comp}'",
            )
            source, chart, version, namespace = cat_source, cat_chart, cat_version, cat_namespace
            if rtype == "Manifest":
                source, chart = "", ""
        else:
            if rtype == "Manifest":
                source, chart = "", ""
            else:
                source = strings["source"] or cat_source
                chart = file_chart or cat_chart
            version = strings["version"] or cat_version
            namespace = strings["namespace"] or cat_namespace
            if rtype == "Helm" and (
                (strings["version"] and _version_key(version) != _version_key(cat_version))
                or (file_chart and file_chart != cat_chart)
            ):
                source, chart, version = self.judge_skew(
                    key,
                    comp,
                    entry,
                    mine,
                    strings,
                    source,
                    chart,
                    version,
                    cat_source,
                    cat_chart,
                    cat_version,
                )

        return rtype, source, chart, version, namespace, strings

    def fact_strings(
        self, key: str, raw: Mapping[str, Any], w: Mapping[str, str]
    ) -> dict[str, str]:
        """The ref's chart fact strings (source, chart, version, namespace, valuesFile), "" for each invalid one."""
        rep = self.rep
        strings: dict[str, str] = {}
        for field_name in ("source", "chart", "version", "namespace", "valuesFile"):
            value = raw.get(field_name)
            strings[field_name] = ""
            if value is None or value == "":
                continue
            if not isinstance(value, str) or value != value.strip():
                rep.bad(
                    f"'{field_name}' must be a string without surrounding spaces",
                    key=f"{key}.{field_name}",
                    **w,
                )
                continue
            rule = CHART_FACT_RULES.get(field_name)
            checked = (
                value.rsplit("/", 1)[-1] if field_name == "chart" else value
            )  # AICR's repo/ prefix is dropped
            if rule is not None and (
                not rule[0].fullmatch(checked) or (field_name == "namespace" and len(value) > 63)
            ):
                rep.bad(
                    f"{field_name} '{value}' is not allowed",
                    key=f"{key}.{field_name}",
                    allowed=rule[1],
                    fix=f"remove '{field_name}' to use gpucluster's catalog value, or correct it",
                    **w,
                )
                continue
            strings[field_name] = value
        return strings

    def judge_skew(
        self,
        key: str,
        comp: str,
        entry: Any,
        mine: ComponentRef | None,
        strings: Mapping[str, str],
        source: str,
        chart: str,
        version: str,
        cat_source: str,
        cat_chart: str,
        cat_version: str,
    ) -> tuple[str, str, str]:
        """A pin other than the catalog's (:mod:`gpucluster.recipes.chart_versions`): ``(source, chart,
        version)`` to install. Covered: the pin, values written for it (``VERSION-SKEW`` info, or
        error with ``versionSkew: error``); never checked against a chart: the pin (``VERSION-SKEW``
        warning/error); uncovered: refused, or with ``versionSkew: upgrade`` the catalog's chart
        (``VERSION-UPGRADED`` warning, the change as ``upgrade-check`` shows it)."""
        from gpucluster.recipes import chart_versions

        rep, skew_severity = self.rep, self.skew_severity
        at = f"{key}.version" if strings["version"] else f"{key}.chart"
        judged = chart_versions.judge_pin(
            entry, chart, version, mine.chart_versions if mine else ""
        )
        pinned = f"{chart} {version} ({source})"
        catalog_pin = f"{cat_chart} {cat_version} ({cat_source})"
        if judged.verdict == chart_versions.COVERED:
            assert judged.entry is not None
            rep.note(
                "VERSION-SKEW",
                "error" if skew_severity == "error" else "info",
                comp,
                at,
                f"the file pins {pinned}, not the catalog's {catalog_pin}; gpucluster writes the values for that "
                f"version (range {judged.entry.versions}, checked against {', '.join(judged.entry.checked)})",
                f"none needed; pin {cat_version} to install the catalog's version"
                + (
                    "; versionSkew: error refuses every pin other than the catalog's"
                    if skew_severity == "error"
                    else ""
                ),
            )
            return source, chart, version
        if judged.verdict == chart_versions.UNVERIFIED:
            rep.note(
                "VERSION-SKEW",
                "error" if skew_severity == "error" else "warning",
                comp,
                at,
                f"the file pins {pinned}, but gpucluster's values for '{comp}' are written for {catalog_pin} and were "
                "never rendered with a real chart of either version (docs/catalog-sources.md); keys the other version "
                "does not read are ignored by Helm",
                f"pin {cat_version} here (or regenerate the recipe with a current AICR), or keep the pin after "
                "rendering the chart at that version (gpucluster render); versionSkew: error in the cluster file "
                "makes this fail",
            )
            return source, chart, version
        direction = _direction(version, cat_version)
        if skew_severity == "upgrade":
            from gpucluster.recipes.upgrade_rules import version_change_text

            rep.note(
                _DIRECTION_ID[direction],
                "warning",
                comp,
                at,
                f"the file pins {pinned}, for which gpucluster has no coherent values ({judged.why}); versionSkew: "
                f"upgrade installs {catalog_pin} instead, {_DIRECTION_TEXT[direction]}: "
                + version_change_text(comp, version, cat_version, self.ours.criteria.service),
                f"pin {cat_version} in the file to make the {direction} explicit, or pin a version gpucluster has values for"
                + (
                    f"; a release already installed at {version} is rolled back to {cat_version} "
                    "(gpucluster upgrade-check shows what that does)"
                    if direction == "downgrade"
                    else ""
                ),
            )
            return cat_source, cat_chart, cat_version
        # an error finding, not an input problem: synth refuses it (one line, naming this key), while
        # upgrade-check (strict=False) can still judge a running install that pins such a version
        rep.note(
            "VERSION-UNCOVERED",
            "error",
            comp,
            at,
            f"gpucluster has no coherent values for {pinned}: {judged.why}",
            f"set {at} to a version in {_covered_ranges(entry, chart, mine)} (the catalog's is {cat_version}), or set "
            f"versionSkew: upgrade on the cluster to install {cat_version} instead ({_DIRECTION_TEXT[direction]}; the "
            "change is printed); versionSkew: warning (the default) and error refuse this pin, and installing "
            f"{version} itself takes a chartVersions range for it in gpucluster's catalog, rendered with that chart "
            '(docs/recipes.md, "Values per chart version")',
        )
        return source, chart, version

    def values(
        self,
        key: str,
        raw: Mapping[str, Any],
        comp: str,
        entry: Any,
        strings: Mapping[str, str],
        problems_before: int,
    ) -> tuple[list[str], dict[str, Any], bool]:
        """``(values files, overrides, enabled)``: the values file, the install gates, retired
        overrides, profile-owned values, and hydrated ``values`` compared with what they give."""
        rep, catalog, renames, ours, name, cname = (
            self.rep,
            self.catalog,
            self.renames,
            self.ours,
            self.name,
            self.cname,
        )
        w = {"component": comp}
        overrides_raw = (
            rep.checked(rep.where(comp).fields, raw.get("overrides") or {}, f"{key}.overrides")
            or {}
        )
        vf = _renamed_path(strings["valuesFile"], renames)
        values_files: list[str] = []
        if vf and not _inside_catalog(vf):
            rep.take(_catalog_path_error(vf, comp, name, f"{key}.valuesFile", cname))
        elif vf and not catalog_has(catalog, vf):
            rep.bad(
                f"values file '{strings['valuesFile']}' is not in gpucluster's catalog",
                key=f"{key}.valuesFile",
                allowed=", ".join(_values_files_known(comp, catalog)) or "none",
                fix="use one of the catalog's values files, or put the values inline under 'overrides'",
                **w,
            )
        else:
            values_files = values_files_for(comp, vf, catalog)
        enabled = True
        for gate_key in GATE_KEYS:
            if gate_key not in overrides_raw:
                continue
            if not isinstance(overrides_raw[gate_key], bool):
                rep.bad(
                    f"overrides.{gate_key} is {overrides_raw[gate_key]!r}, not a boolean; it decides whether the "
                    "component is installed",
                    key=f"{key}.overrides.{gate_key}",
                    allowed="true or false (YAML booleans, without quotes)",
                    fix=f"write {gate_key}: false to leave the component out, or remove the key",
                    **w,
                )
            elif overrides_raw[gate_key] is False:
                enabled = False
        if not enabled and comp in ours.profile_owned:
            gate_key = "enabled" if overrides_raw.get("enabled") is False else "install"
            rep.bad(
                f"'{comp}' is owned by the {ours.profile[0]} profile '{ours.profile[1]}' and cannot be disabled",  # type: ignore[index]
                key=f"{key}.overrides.{gate_key}",
                fix=owned_component_fix(
                    ours, self.catalog, comp, f"remove overrides.{gate_key}: false"
                ),
                **w,
            )
        overrides = {k: copy.deepcopy(v) for k, v in overrides_raw.items() if k not in GATE_KEYS}
        self.drop_retired(key, comp, entry, overrides)

        def check_profile_owned(candidate: Mapping[str, Any], where: str) -> None:
            for owned_path, owned_value in leaf_paths(ours.profile_owned.get(comp, {})):
                have = get_path(candidate, owned_path, _MISSING)
                if have is not _MISSING and have != owned_value:
                    rep.bad(
                        f"{where} set {owned_path}={_yaml_scalar(have)}, but profile {ours.profile[0]}={ours.profile[1]} "  # type: ignore[index]
                        f"owns it as {_yaml_scalar(owned_value)}",
                        key=f"{key}.{where}.{owned_path}",
                        **self.profile_owned_fix(
                            f"{key}.{where}.{owned_path}", comp, owned_path, have
                        ),
                        **w,
                    )

        check_profile_owned(overrides, "overrides")
        if (
            "values" in raw and len(rep.problems) == problems_before
        ):  # compared only when the rest of the ref is sound
            if rep.checked(rep.where(comp).fields, raw["values"], f"{key}.values") is not None:
                layered = layer_values(
                    values_files, overrides, ours.profile_owned.get(comp), catalog
                )
                if layered != raw["values"]:
                    if overrides:
                        # values and overrides disagree: one of them was edited, and which one cannot be told
                        rep.bad(
                            "'values' do not match what valuesFile + overrides give: one of them was edited, or the "
                            "catalog's values file changed since the recipe was written; gpucluster cannot tell which "
                            "values are meant",
                            key=f"{key}.values",
                            fix="remove 'values' to use valuesFile + overrides (gpucluster recomputes them; or regenerate "
                            "the recipe), or remove 'overrides' to take 'values' as the complete recipe-level values",
                            **w,
                        )
                    else:
                        # edited (or foreign) hydrated values: they are the complete recipe-level values
                        values_files, overrides = [], copy.deepcopy(raw["values"])
                        check_profile_owned(overrides, "values")

        return values_files, overrides, enabled

    def profile_owned_fix(self, at: str, comp: str, path: str, have: Any) -> dict[str, str]:
        """``{"fix": ..., "allowed": ...}`` for a file value ``have`` at profile-owned ``path`` of
        ``comp`` (file key ``at``) that the selected profile value sets otherwise: select the
        profile value that sets ``have`` when every other profile-owned value the file states
        agrees with it too; else remove the override (what the profile value it selects sets),
        naming why no other value fits. ``allowed`` lists each profile value's value there."""
        from gpucluster.recipes.recipe import profile_values_owned

        pname, chosen = self.ours.profile  # type: ignore[misc]
        table = profile_values_owned(self.ours, self.catalog)
        stated = _file_raw_refs(dict(self.data), self.catalog, self.renames)
        allowed = ", ".join(
            f"{v}: {_yaml_scalar(get_path(table[v].get(comp, {}), path, None))}"
            for v in sorted(table)
        )
        unfit = []
        for value in sorted(table):
            if value == chosen or get_path(table[value].get(comp, {}), path, _MISSING) != have:
                continue
            conflicts = [
                f"{c} {p}"
                for c, owned in sorted(table[value].items())
                for field_name in ("overrides", "values")
                for p, want in leaf_paths(owned)
                if get_path(stated.get(c, {}).get(field_name) or {}, p, want) != want
            ]
            if not conflicts:
                return {
                    "fix": f"select {pname}={value}, which sets {path}: {_yaml_scalar(have)} and agrees with every "
                    f"other {pname} value of the file: {self.selection_text(pname, value)}",
                    "allowed": allowed,
                }
            unfit.append(
                f"{pname}={value} sets it but disagrees with {len(conflicts)} other override(s) of the file "
                f"({', '.join(conflicts[:3])}{', ...' if len(conflicts) > 3 else ''})"
            )
        why = "; ".join(unfit) or f"no {pname} value sets {path}: {_yaml_scalar(have)}"
        return {
            "fix": f"remove {at} ({pname}={chosen} sets it; {why}), or regenerate the file for one {pname} value "
            f"(gpucluster recipe --profile {pname}=...)",
            "allowed": allowed,
        }

    def selection_text(self, pname: str, value: str) -> str:
        """Where to select ``pname=value`` so that it takes effect: the file's
        ``metadata.selectedProfile`` when it names ``pname``, the cluster's ``profile`` when that
        does (both when both do: they must agree), else the cluster's ``profile``."""
        meta = self.data.get("metadata")
        sel = meta.get("selectedProfile") if isinstance(meta, dict) else None
        where = []
        if isinstance(sel, dict) and sel.get("name") == pname:
            where.append(f"metadata.selectedProfile.value: {value}")
        if pname in self.cluster_profile or not where:
            where.append(f"the cluster's profile.{pname}: {value}")
        return " and ".join(where)

    def drop_retired(self, key: str, comp: str, entry: Any, overrides: dict[str, Any]) -> None:
        """Drop the retired overrides the file's apiVersion wrote from ``overrides`` (RECIPE-OVERRIDE-RETIRED)."""
        rep, data = self.rep, self.data
        for retired_override in entry.retired_overrides:
            have = get_path(overrides, retired_override.path, _MISSING)
            if (
                data.get("apiVersion") in retired_override.api_versions
                and type(have) is type(retired_override.value)
                and have == retired_override.value
            ):
                _drop_path(overrides, retired_override.path)
                rep.note(
                    "RECIPE-OVERRIDE-RETIRED",
                    "warning",
                    comp,
                    f"{key}.overrides.{retired_override.path}",
                    f"{retired_override.path}: {_yaml_scalar(have)} ({data.get('apiVersion')}) is not applied: {retired_override.note}",
                    "none needed; to advertise GPUs through DRA instead, flip the whole allocation policy in a recipe "
                    "overlay (docs/policies.md, GPU-ADVERTISER)",
                )

    def lists(
        self,
        key: str,
        raw: Mapping[str, Any],
        written: str,
        comp: str,
        entry: Any,
        mine: ComponentRef | None,
    ) -> tuple[list[str], dict[str, list[str]]]:
        """``(dependencies, {"manifestFiles": [...], "preManifestFiles": [...]})``: former names
        mapped, a self-dependency refused, retired manifests noted."""
        rep, catalog, renames, name, cname = (
            self.rep,
            self.catalog,
            self.renames,
            self.name,
            self.cname,
        )
        w = {"component": comp}
        deps_at = self.deps_at
        lists: dict[str, list[Any]] = {}
        for field_name in ("dependencyRefs", "manifestFiles", "preManifestFiles"):
            lists[field_name] = (
                rep.checked(
                    rep.where(comp).check_list,
                    raw.get(field_name) or [],
                    f"{key}.{field_name}",
                    empty_ok=True,
                )
                or []
            )
        deps = []
        for j, dep in enumerate(lists["dependencyRefs"]):
            if rep.checked(rep.where(comp).check_str, dep, f"{key}.dependencyRefs[{j}]") is None:
                continue
            mapped = renames[dep][0] if dep not in catalog.components and dep in renames else dep
            if (
                comp in (dep, mapped) or dep == written
            ):  # its own name, or its former / current AICR name
                rep.bad(
                    f"dependency cycle: {comp} -> {comp} ('{comp}' depends on itself)",
                    key=f"{key}.dependencyRefs[{j}]",
                    fix=f"remove '{dep}' from the dependencyRefs of '{written}'",
                    **w,
                )
                continue
            deps.append(mapped)
            deps_at.append((comp, mapped, f"{key}.dependencyRefs[{j}]"))
        retired = {m.file: m.note for m in entry.retired_manifests}
        manifest_lists: dict[str, list[str]] = {}
        for field_name in ("manifestFiles", "preManifestFiles"):
            out: list[str] = []
            for j, p in enumerate(lists[field_name]):
                mkey = f"{key}.{field_name}[{j}]"
                mapped = _renamed_path(p, renames) if isinstance(p, str) else p
                if isinstance(mapped, str) and mapped.removesuffix(".j2") in retired:
                    rep.note(
                        "RECIPE-MANIFEST-RETIRED",
                        "info",
                        comp,
                        mkey,
                        f"'{p}' is not installed: {retired[mapped.removesuffix('.j2')]}",
                        "none needed; a current AICR recipe no longer names it",
                    )
                    continue
                template = _ref_error(
                    rep, _manifest_ref, mapped, comp, mine, catalog, name, mkey, cname
                )
                if template is not None:
                    out.append(template)
            manifest_lists[field_name] = out
        return deps, manifest_lists


def _check_dependencies(
    rep: _Report, catalog: Catalog, deps_at: list, present: set[str], seen: Mapping[str, str]
) -> None:
    """Report each dependencyRef naming a component that is not in the recipe."""
    for comp, dep, dkey in deps_at:
        if dep not in present and (dep in catalog.components or dep not in seen):
            rep.bad(
                f"'{comp}' depends on '{dep}', which is not in the recipe",
                component=comp,
                key=dkey,
                allowed=allowed_list(present),
                fix=f"add '{dep}' to the recipe or remove the dependencyRef",
            )


def _file_constraints(data: dict, rep: _Report) -> list[Constraint]:
    """The file's ``constraints`` list, reporting each entry without ``name`` and ``value``."""
    raw_c = (
        rep.checked(
            rep.where().check_list, data.get("constraints") or [], "constraints", empty_ok=True
        )
        or []
    )
    constraints = []
    for j, c in enumerate(raw_c):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or "value" not in c:
            rep.bad("constraints need 'name' and 'value'", key=f"constraints[{j}]")
            continue
        constraints.append(Constraint(c["name"], str(c["value"])))
    return constraints


def _note_criteria_unused(
    rep: _Report, criteria: Criteria, selected: Sequence[str], applied: list[Any] | None
) -> None:
    """``RECIPE-CRITERIA-UNUSED`` (warning) when the file's ``criteria`` select an overlay its
    ``metadata.appliedOverlays`` do not hold: the criteria were edited (``intent: training`` ->
    ``inference``) while the components stayed those resolved for the old ones, and the
    components are what gpucluster installs."""
    if not applied or not selected or selected[-1] in [str(a) for a in applied]:
        return
    flags = " ".join(
        f"--{name} {value}"
        for name, value in (
            ("service", criteria.service),
            ("accelerator", criteria.accelerator),
            ("os", criteria.os),
            ("intent", criteria.intent),
            ("platform", criteria.platform),
        )
        if value != ANY
    )
    rep.note(
        "RECIPE-CRITERIA-UNUSED",
        "warning",
        "",
        "criteria",
        f"the criteria select the recipe {selected[-1]}, but the file's componentRefs were resolved "
        f"for {applied[-1]} (metadata.appliedOverlays): the file's components win -- gpucluster "
        "installs the componentRefs as written, so editing the criteria alone changes nothing "
        "they install",
        f"regenerate the file for these criteria (gpucluster recipe {flags} > FILE, or aicr "
        "recipe), or put back the criteria it was made for",
    )


def _note_fields(
    rep: _Report, unused: list[str], ref_unused: Mapping[str, int], unknown: list[str]
) -> None:
    """Note the RECIPE-FIELDS-UNUSED and RECIPE-FIELDS-UNKNOWN findings of the file."""
    if unused or ref_unused:
        parts = list(unused) + [
            f"componentRefs[*].{k} ({n} component{'s' if n != 1 else ''})"
            for k, n in sorted(ref_unused.items())
        ]
        rep.note(
            "RECIPE-FIELDS-UNUSED",
            "info",
            "",
            "",
            f"read past AICR fields gpucluster does not use: {', '.join(parts)} (readiness comes from gpucluster's "
            "gates, validation from aicr validate)",
            "none needed",
        )
    if unknown:
        rep.note(
            "RECIPE-FIELDS-UNKNOWN",
            "info",
            "",
            "",
            f"ignored fields no AICR release known to gpucluster writes (a later additive AICR field?): {', '.join(unknown)}",
            "none needed if the file is a newer AICR's output; otherwise remove them",
        )


def recipe_from_file(
    path: str, catalog: Catalog, *, cluster: ClusterSpec | None = None, display: str | None = None
) -> Recipe:
    """Read a RecipeResult (written by any AICR release -- ``aicr.nvidia.com/v1alpha1``,
    ``aicr.run/v1alpha2``, ``v1alpha3`` and later additive versions -- or by ``gpucluster recipe``)
    into a Recipe.

    See the module docstring and docs/recipes.md for what is accepted and rejected. Every problem
    of the file is reported at once. What the reader notices without failing becomes
    ``Recipe.findings`` (each naming the file and its ``componentRefs[i]`` path):
    ``RECIPE-RENAMED`` (a historical component name, registry ``formerNames``),
    ``RECIPE-MANIFEST-RETIRED`` (registry ``retiredManifests``), ``VERSION-SKEW`` (a chart pin
    other than the one gpucluster's values are written for: the version gpucluster's own recipe
    for the same criteria installs, else the registry's ``helm.version``; warning, or error with
    the cluster's ``versionSkew: error``), ``RECIPE-FIELDS-UNUSED`` (AICR fields read past) and
    ``RECIPE-FIELDS-UNKNOWN`` (fields no known AICR release writes).

    Args:
        path: the file (already checked to be inside the project folder by the config loader).
        catalog: gpucluster's catalog (values files and templates are looked up there).
        cluster: the cluster it is used for (profile choice, error locations, ``versionSkew``).
        display: how to name the file in errors.

    Raises:
        GpuclusterError: every problem of the file, each naming the recipe file, component and
            key (``componentRefs[2].valuesFile``).
    """
    name = display or path
    cname = cluster.name if cluster else None
    skew_severity = cluster.version_skew if cluster is not None else "warning"
    data = _load(path, name, cname)
    rep = _Report(name, cname)
    unknown: list[str] = []
    unused: list[str] = []
    _unknown_keys(data, AICR_TOP_KEYS, USED_TOP_KEYS, "", rep, unknown)
    unused.extend(k for k in UNUSED_FIELDS if k in data)
    criteria = _criteria(data, rep)
    selection = _selected_profile(data, rep, cluster)
    raw_refs = rep.checked(
        rep.where().check_list,
        data.get("componentRefs"),
        "componentRefs",
        fix="list the recipe's components (regenerate it with 'aicr recipe' or 'gpucluster recipe')",
    )
    if criteria is None:
        rep.check()
    assert criteria is not None
    try:
        ours = resolve(criteria, catalog, profile=selection, file=name, cluster=cname)
    except GpuclusterError as err:
        rep.take(err)
        rep.check()
        raise  # pragma: no cover - check() raised
    rep.check()
    reader = _FileReader(
        data,
        catalog,
        rep,
        ours,
        name=name,
        cname=cname,
        skew_severity=skew_severity,
        unknown=unknown,
    )
    reader.cluster_profile = dict(cluster.profile) if cluster is not None else {}
    for i, raw in enumerate(raw_refs):
        reader.component(i, raw)
    refs, ref_keys, ref_unused, seen, deps_at = (
        reader.refs,
        reader.ref_keys,
        reader.ref_unused,
        reader.seen,
        reader.deps_at,
    )
    present = {r.name for r in refs}
    _check_dependencies(rep, catalog, deps_at, present, seen)
    for comp in sorted(set(ours.profile_owned) - set(seen)):
        rep.bad(
            f"'{comp}' is owned by the {ours.profile[0]} profile '{ours.profile[1]}' but the file's "  # type: ignore[index]
            "componentRefs leave it out",
            key="componentRefs",
            component=comp,
            id="PROFILE-OWNED",
            fix=owned_component_fix(
                ours, catalog, comp, f"put '{comp}' back in componentRefs (regenerate the file)"
            ),
        )

    constraints = ours.constraints
    if "constraints" in data:
        constraints = _file_constraints(data, rep)
    rep.check()
    ordered = order_components(refs, file=name, cluster=cname)

    _note_fields(rep, unused, ref_unused, unknown)
    meta = data.get("metadata") or {}
    applied = (
        meta.get("appliedOverlays")
        if isinstance(meta, dict) and isinstance(meta.get("appliedOverlays"), list)
        else None
    )
    _note_criteria_unused(rep, criteria, ours.applied_overlays, applied)
    return Recipe(
        criteria=criteria,
        applied_overlays=[str(a) for a in applied] if applied else list(ours.applied_overlays),
        constraints=constraints,
        component_refs=ordered,
        profile=ours.profile,
        profile_owned={k: v for k, v in ours.profile_owned.items() if k in present},
        advertiser=ours.advertiser,
        findings=rep.findings,
        file=name,
        ref_keys=ref_keys,
    )


# --------------------------------------------------------------------------- the file's intent


@dataclasses.dataclass
class FileIntent:
    """What a RecipeResult says about who owns the GPU driver and who advertises whole GPUs
    (:func:`file_intent`).

    Attributes:
        selection: profile choices the file's values imply (``{"gpuStack": "operator-managed"}``),
            for a cluster that chooses none and a file without ``metadata.selectedProfile``.
        findings: ``PROFILE-FROM-FILE`` (info: the profile the file's values select) or
            ``PROFILE-CHANGED`` (warning: the cluster's profile differs from the file's).
        stated: component -> ``(componentRefs[i] key, the file's values, where they come from)``:
            ``formerValues`` of the file's apiVersion, then its ``overrides``/``values``.
        raw: component -> ``{"overrides": ..., "values": ...}`` as the file writes them (keys).
        replaced: component -> ``(componentRefs[i] key, [(path, the file's value, why, where)])``:
            values the file's ``valuesFile`` set as its apiVersion's files were written that
            gpucluster deliberately installs otherwise (registry ``formerValues[].replaced``);
            :func:`file_value_changes` names each one the installed values differ from.
    """

    selection: dict[str, str]
    findings: list[Finding]
    stated: dict[str, tuple[str, dict[str, Any], str]]
    raw: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    replaced: dict[str, tuple[str, list[tuple[str, Any, str, str]]]] = dataclasses.field(
        default_factory=dict
    )

    def key_of(self, component: str, path: str) -> str:
        """The file's key that states ``path`` of ``component``: ``componentRefs[i].overrides.<path>``
        (or ``.values.<path>``), else ``componentRefs[i].valuesFile`` (``formerValues``)."""
        key = self.stated[component][0]
        for field_name in ("overrides", "values"):
            if (
                get_path(self.raw.get(component, {}).get(field_name) or {}, path, _MISSING)
                is not _MISSING
            ):
                return f"{key}.{field_name}.{path}"
        return f"{key}.valuesFile"


def _file_refs(
    data: Mapping[str, Any], catalog: Catalog, service: str
) -> Iterator[tuple[str, str, dict[str, Any], list[Any]]]:
    """``(key, component, raw ref, former values)`` of each of the file's ``componentRefs`` that
    names a catalog component (a former name renamed, :func:`former_names`): ``key`` is
    ``componentRefs[i]``, the former values are the registry's ``formerValues`` entries of the
    file's ``apiVersion`` and ``service``."""
    renames = former_names(catalog)
    api = data.get("apiVersion")
    refs = data.get("componentRefs")
    for i, raw in enumerate(refs if isinstance(refs, list) else []):  # else: the file's check says
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            continue
        comp = raw["name"]
        comp = renames[comp][0] if comp not in catalog.components and comp in renames else comp
        entry = catalog.components.get(comp)
        if entry is None:
            continue
        former = [
            fv
            for fv in entry.former_values
            if api in fv.api_versions and (not fv.services or service in fv.services)
        ]
        yield f"componentRefs[{i}]", comp, raw, former


def _stated_values(
    data: Mapping[str, Any], catalog: Catalog, service: str
) -> dict[str, tuple[str, dict[str, Any], str]]:
    api = data.get("apiVersion")
    out: dict[str, tuple[str, dict[str, Any], str]] = {}
    for key, comp, raw, former in _file_refs(data, catalog, service):
        values: dict[str, Any] = {}
        where = []
        for fv in former:
            values = deep_merge(values, fv.values, keep_nulls=True)
            where.append(f"its valuesFile as {api} files were written: {fv.note}")
        for field_name in ("overrides", "values"):
            if isinstance(raw.get(field_name), dict):
                values = deep_merge(
                    values,
                    {k: v for k, v in raw[field_name].items() if k not in GATE_KEYS},
                    keep_nulls=True,
                )
                where.append(field_name)
        if values:
            out[comp] = (key, values, "; ".join(where))
    return out


def _replaced_values(
    data: Mapping[str, Any], catalog: Catalog, service: str
) -> dict[str, tuple[str, list[tuple[str, Any, str, str]]]]:
    """Per component of the file, the registry's ``formerValues[].replaced`` entries of the
    file's apiVersion and ``service``, with the file's ``componentRefs[i]`` key."""
    api = data.get("apiVersion")
    out: dict[str, tuple[str, list[tuple[str, Any, str, str]]]] = {}
    for key, comp, _, former in _file_refs(data, catalog, service):
        found = [
            (path, value, why, f"its valuesFile as {api} files were written: {fv.note}")
            for fv in former
            for path, value, why in fv.replaced
        ]
        if found:
            out[comp] = (key, found)
    return out


def _file_raw_refs(data: dict, catalog: Catalog, renames: Mapping) -> dict[str, dict]:
    """The file's componentRefs' ``overrides``/``values`` mappings, by (renamed) component name."""
    raw = {}
    refs = data.get("componentRefs")
    for r in refs if isinstance(refs, list) else []:
        if isinstance(r, dict) and isinstance(r.get("name"), str):
            n = r["name"]
            n = renames[n][0] if n not in catalog.components and n in renames else n
            raw[n] = {k: r.get(k) for k in ("overrides", "values") if isinstance(r.get(k), dict)}
    return raw


def _judge_profile_value(
    table: Mapping, stated: Mapping, value: str
) -> tuple[list[tuple[str, str, str, Any, Any]], int]:
    """The stated values' conflicts with profile value ``value`` and how many agree with it."""
    conflicts, agreed = [], 0
    for comp, owned in sorted(table[value].items()):
        if comp not in stated:
            continue
        key, vals, where = stated[comp]
        for p, want in leaf_paths(owned):
            have = get_path(vals, p, _MISSING)
            if have is _MISSING:
                continue
            if have == want:
                agreed += 1
            else:
                conflicts.append((comp, key, p, have, want))
    return conflicts, agreed


def _shown_conflicts(conflicts: list[tuple[str, str, str, Any, Any]]) -> str:
    """The conflicts as ``comp path: value (key)``, comma-separated."""
    return ", ".join(
        f"{comp} {p}: {_yaml_scalar(have)} ({key})" for comp, key, p, have, _ in conflicts
    )


def _profile_evidence(table: Mapping, stated: Mapping, value: str) -> str:
    """The stated values that agree with profile value ``value``, for PROFILE-FROM-FILE."""
    parts = []
    for comp, owned in sorted(table[value].items()):
        if comp in stated:
            key, vals, where = stated[comp]
            for p, want in leaf_paths(owned):
                if get_path(vals, p, _MISSING) == want:
                    parts.append(f"{comp} {p}: {_yaml_scalar(want)} ({key}, {where})")
    return "; ".join(parts)


def file_intent(
    path: str, catalog: Catalog, *, cluster: ClusterSpec, display: str | None = None
) -> FileIntent:
    """The driver owner and GPU advertiser a RecipeResult's values say (docs/recipes.md, "The
    file's intent"), with the values its ``valuesFile`` set that gpucluster installs otherwise
    (:attr:`FileIntent.replaced`, for :func:`file_value_changes`).

    See :func:`_intent_of` for the selection and the errors raised.
    """
    intent = _intent_of(path, catalog, cluster=cluster, display=display)
    try:
        data = _load(path, display or path, cluster.name)
    except GpuclusterError:
        return intent
    crit = data.get("criteria")
    service = crit.get("service") if isinstance(crit, dict) else None
    if isinstance(service, str):
        intent.replaced = _replaced_values(data, catalog, service)
        if intent.replaced and not intent.raw:
            intent.raw = _file_raw_refs(data, catalog, former_names(catalog))
    return intent


def _file_selection(
    sel: Mapping[str, Any], pname: str, table: Mapping[str, Any], cluster: ClusterSpec
) -> dict[str, str]:
    """``{pname: value}`` of the file's ``metadata.selectedProfile`` when it names the recipe's
    profile and a value it declares, and the cluster chooses none itself: the cluster's pools
    follow the file (AKS ``operator-managed``: ``gpu_driver None``); else ``{}``."""
    if sel.get("name") == pname and sel.get("value") in table and pname not in cluster.profile:
        return {pname: str(sel["value"])}
    return {}


def _intent_of(
    path: str, catalog: Catalog, *, cluster: ClusterSpec, display: str | None = None
) -> FileIntent:
    """The driver owner and GPU advertiser a RecipeResult's values say (docs/recipes.md, "The
    file's intent").

    The values the file states at the paths a profile owns (gpu-operator ``driver.enabled``,
    ``toolkit.enabled``, ``operator.runtimeClass``, the DRA ``nvidiaDriverRoot``, KAI's runtime
    class, ...) -- its ``overrides``/``values``, else the registry's ``formerValues`` for its
    apiVersion (AICR up to v0.11 wrote AKS values with the operator installing the driver) --
    select the profile value they agree with. A file with ``metadata.selectedProfile`` selects it
    itself (the reader checks its overrides against it).

    Raises:
        GpuclusterError: the stated values agree with no profile value (one problem, naming
            the file, the keys and the profile values).
    """
    from gpucluster.recipes.recipe import profile_values_owned

    name = display or path
    empty = FileIntent({}, [], {})
    try:
        data = _load(path, name, cluster.name)
    except GpuclusterError:
        return empty  # the reader reports it
    rep = _Report(name, cluster.name)
    criteria = _criteria(data, rep)
    if criteria is None:
        return empty
    stated = _stated_values(data, catalog, criteria.service)
    renames = former_names(catalog)
    raw = _file_raw_refs(data, catalog, renames)
    meta: dict[str, Any] = data["metadata"] if isinstance(data.get("metadata"), dict) else {}
    try:
        ours = resolve(
            criteria, catalog, profile=dict(cluster.profile), file=name, cluster=cluster.name
        )
    except GpuclusterError:
        return FileIntent({}, [], stated, raw)
    if ours.profile is None:
        return FileIntent({}, [], stated, raw)
    pname, chosen = ours.profile
    table = profile_values_owned(ours, catalog)
    if isinstance(
        meta.get("selectedProfile"), dict
    ):  # the file selects it (the reader checks the rest)
        picked = _file_selection(meta["selectedProfile"], pname, table, cluster)
        return FileIntent(picked, [], stated, raw)

    judged = {v: _judge_profile_value(table, stated, v) for v in sorted(table)}
    if not any(c or a for c, a in judged.values()):
        return FileIntent({}, [], stated, raw)  # the file says nothing a profile owns
    matching = [v for v, (c, _) in judged.items() if not c]

    if pname in cluster.profile:
        if chosen in matching or not matching:
            return FileIntent({}, [], stated, raw)
        first = judged[chosen][0][0]
        return FileIntent(
            {},
            [
                Finding(
                    "PROFILE-CHANGED",
                    "warning",
                    cluster.name,
                    first[0],
                    FileIntent({}, [], stated, raw).key_of(first[0], first[2]),
                    f"the file was written for {pname}={matching[0]} ({_shown_conflicts(judged[chosen][0])}); the cluster selects "
                    f"{pname}={chosen}, so {first[0]} gets {first[2]}: {_yaml_scalar(first[4])}",
                    f"drop the cluster's profile.{pname} to install the file as written, or regenerate the file for {pname}={chosen}",
                    file=name,
                )
            ],
            stated,
            raw,
        )
    if chosen in matching:
        return FileIntent({}, [], stated, raw)
    if not matching:
        conflicts = judged[chosen][0]
        raise GpuclusterError(
            problems=[
                Problem(
                    f"the file's values agree with no {pname} profile value: {_shown_conflicts(conflicts)} "
                    + "; ".join(
                        f"{v} has {', '.join(f'{c[2]}: {_yaml_scalar(c[4])}' for c in cs)}"
                        for v, (cs, _) in judged.items()
                    ),
                    id="PROFILE-CONFLICT",
                    file=name,
                    cluster=cluster.name,
                    component=conflicts[0][0],
                    key=FileIntent({}, [], stated, raw).key_of(conflicts[0][0], conflicts[0][2]),
                    allowed=", ".join(sorted(table)),
                    fix=f"regenerate the file for one {pname} value (gpucluster recipe --profile {pname}=...), or set the "
                    f"cluster's profile.{pname} and remove the conflicting overrides",
                )
            ]
        )
    value = matching[0]
    return FileIntent(
        {pname: value},
        [
            Finding(
                "PROFILE-FROM-FILE",
                "info",
                cluster.name,
                "",
                "",
                f"{pname}={value} selected: the file's values say so ({_profile_evidence(table, stated, value)})",
                f"none needed; set profile.{pname} on the cluster to choose another value (then PROFILE-CHANGED says what changes)",
                file=name,
            )
        ],
        stated,
        raw,
    )


def intent_changes(
    intent: FileIntent,
    components: Mapping[str, Component],
    catalog: Catalog,
    cluster: str,
    file: str,
) -> list[Finding]:
    """Every way the installed values depart from the file's intent: :func:`advertiser_changes`
    (``ADVERTISER-CHANGED``), then :func:`file_value_changes` (``FILE-VALUE-CHANGED``)."""
    return advertiser_changes(intent, components, catalog, cluster, file) + file_value_changes(
        intent, components, cluster, file
    )


def file_value_changes(
    intent: FileIntent,
    components: Mapping[str, Component],
    cluster: str,
    file: str,
) -> list[Finding]:
    """``FILE-VALUE-CHANGED`` (warning) per value the file's ``valuesFile`` set as its apiVersion's
    files were written that gpucluster deliberately installs otherwise (registry
    ``formerValues[].replaced``; AKS ``aicr.nvidia.com/v1alpha1``: gpu-operator ``toolkit.enabled:
    false`` beside ``driver.enabled: true``), where the installed value differs: names the file's
    key, the file's value, the installed one and why (the registry's ``why``, with its public
    source). An installed value equal to the file's (a cluster that selects ``gpuStack:
    azure-managed``) is no finding."""
    out = []
    for comp, (_key, entries) in sorted(intent.replaced.items()):
        if comp not in components:
            continue
        raw = intent.raw.get(comp, {})
        for path, have, why, where in entries:
            new = get_path(components[comp].values, path, _MISSING)
            if have == new or any(
                get_path(raw.get(f) or {}, path, _MISSING) is not _MISSING
                for f in ("overrides", "values")
            ):  # the file's own overrides/values state it: those are taken as written
                continue
            shown = "unset (the chart's default)" if new is _MISSING else _yaml_scalar(new)
            out.append(
                Finding(
                    "FILE-VALUE-CHANGED",
                    "warning",
                    cluster,
                    comp,
                    intent.key_of(comp, path),
                    f"gpucluster installs {path}: {shown}, where the file sets {path}: "
                    f"{_yaml_scalar(have)}: {why} (the file's value: {where})",
                    "none needed where the GPU Operator installs the driver (AKS pools gpu_driver None); to keep the "
                    "node image's driver and toolkit instead, set the cluster's profile.gpuStack: azure-managed",
                    file=file,
                )
            )
    return out


def advertiser_changes(
    intent: FileIntent,
    components: Mapping[str, Component],
    catalog: Catalog,
    cluster: str,
    file: str,
) -> list[Finding]:
    """``ADVERTISER-CHANGED`` (warning) per whole-GPU allocation key (registry ``policyKeys``:
    gpu-operator ``devicePlugin.enabled``, DRA ``resources.gpus.enabled``,
    ``gpuResourcesEnabledOverride``) the file states and the installed values differ from,
    naming the file's key and the value installed."""
    out = []
    for comp, (_key, vals, where) in sorted(intent.stated.items()):
        entry = catalog.components.get(comp)
        if entry is None or comp not in components:
            continue
        for path in entry.policy_keys:
            have = get_path(vals, path, _MISSING)
            new = get_path(components[comp].values, path, _MISSING)
            if have is _MISSING or have == new:
                continue
            out.append(
                Finding(
                    "ADVERTISER-CHANGED",
                    "warning",
                    cluster,
                    comp,
                    intent.key_of(comp, path),
                    f"the file sets {path}: {_yaml_scalar(have)} ({where}); gpucluster installs "
                    f"{path}: {'unset' if new is _MISSING else _yaml_scalar(new)}: whole GPUs are advertised by one component only "
                    "(policy GPU-ADVERTISER)",
                    "none needed if the device plugin should advertise GPUs; to advertise them through DRA instead, flip the "
                    "allocation policy in a recipe overlay (docs/policies.md, GPU-ADVERTISER)",
                    file=file,
                )
            )
    return out

"""Load the recipe catalog: registry, overlays, mixins, values files and manifest templates.

The catalog is data the project owns (``gpucluster/catalog``) plus every directory plugins
contribute through ``gpucluster_catalog_dirs``. Directories share one layout::

    registry.yaml                    {components: [RegistryEntry...]}
    overlays/<name>.yaml             RecipeOverlay documents (name = metadata.name = file stem)
    mixins/<name>.yaml               RecipeMixin documents
    components/<c>/values*.yaml      values files (plain Helm values)
    components/<c>/manifests/*.j2    Jinja2 manifest templates

Relative file references (``components/gpu-operator/values-aks.yaml``) are looked up in the
directories in order (core first, then plugins by name); the first hit wins, and a name defined
twice (component, overlay, mixin) is an error naming both directories.

Facts in the core catalog come from NVIDIA AI Cluster Runtime recipe data (Apache-2.0); see
NOTICE and docs/catalog-sources.md.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster import diskcache, schemas
from gpucluster.errors import GpuclusterError, allowed_list
from gpucluster.versions import version_in_range

CORE_CATALOG_DIR = Path(__file__).parent.parent / "catalog"

SHIPPED_PLUGIN_PACKAGES = ("gpucluster_aks", "gpucluster_nvke", "gpucluster_oke")
"""The built-in platform plugins installed with gpucluster (``pyproject.toml``,
``[project.entry-points.gpucluster]``): their ``catalog`` folders and :data:`CORE_CATALOG_DIR`
are the shipped catalog, whose schema check a content-keyed marker may vouch for
(:func:`shipped_catalog_dirs`). Every other catalog folder is validated on every load."""


@dataclass(frozen=True)
class SchedulingPaths:
    """Values paths that receive node scheduling inputs (AICR registry ``nodeScheduling``)."""

    system_node_selector: tuple[str, ...] = ()
    system_tolerations: tuple[str, ...] = ()
    accelerated_node_selector: tuple[str, ...] = ()
    accelerated_tolerations: tuple[str, ...] = ()
    accelerated_taint_str: tuple[str, ...] = ()
    node_count: tuple[str, ...] = ()


CRD_UPGRADE_MODES = ("chart", "templates", "gpucluster")
"""How an owner's CRDs reach a new chart version (registry ``crds.upgrade``):

* ``chart``: the chart's own pre-upgrade hook applies them (gpu-operator ``operator.upgradeCRD``,
  network-operator ``upgradeCRDs``, KAI's crd-upgrader);
* ``templates``: the CRDs are chart templates, so ``helm upgrade`` updates them like any object;
* ``gpucluster``: only in the chart's ``crds/``, which Helm installs once and never upgrades:
  gpucluster's generated CRD step applies them server-side before the operator upgrades
  (:mod:`gpucluster.charts.crds`)."""


@dataclass(frozen=True)
class CrdSpec:
    """The CRDs a component owns (registry ``crds``; one owner per CRD across a stack).

    Attributes:
        owns: CRD names (``<plural>.<group>``) the component is the owner of.
        upgrade: one of :data:`CRD_UPGRADE_MODES`.
        creates_at_runtime: CRDs its operator creates while reconciling (not in the chart), owned too.
        also_ships: ``(name, since version or None)`` CRDs the chart carries without owning them
            (Helm installs them only when absent); the component becomes their owner only when no
            enabled component owns them.
    """

    owns: tuple[str, ...] = ()
    upgrade: str = "templates"
    creates_at_runtime: tuple[str, ...] = ()
    also_ships: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class FormerName:
    """A name a component had in earlier AICR releases (registry ``formerNames``).

    A RecipeResult componentRef with this name is read as the component that carries the
    record, with an info finding ``RECIPE-RENAMED`` quoting ``note``; the file's chart pin
    (source, chart, version, namespace) belonged to the old product and is replaced by the
    component's catalog chart. Paths ``components/<name>/...`` map to ``components/<new>/...``.

    Attributes:
        name: the old component name (``skyhook-operator``).
        note: what happened and where it is recorded upstream (AICR PR), one sentence.
    """

    name: str
    note: str


@dataclass(frozen=True)
class RetiredManifest:
    """A manifest file older AICR recipes name that the component no longer needs (registry
    ``retiredManifests``): dropped from a RecipeResult with an info finding ``RECIPE-MANIFEST-RETIRED``
    quoting ``note`` (what provides the objects now)."""

    file: str
    note: str


@dataclass(frozen=True)
class RetiredOverride:
    """A componentRef override older AICR RecipeResults write that no longer means anything with
    gpucluster's values (registry ``retiredOverrides``): dropped from files of ``api_versions``
    with a warning ``RECIPE-OVERRIDE-RETIRED`` quoting ``note``; in files of other versions it is
    taken as written (and policy judges it)."""

    path: str
    value: Any
    api_versions: tuple[str, ...]
    note: str


@dataclass(frozen=True)
class FormerValues:
    """What a component's values file said in RecipeResults of older AICR releases (registry
    ``formerValues``): the file names only ``valuesFile``, whose content gpucluster's catalog has
    since changed. The reader takes these as the file's own values when it asks who owns the GPU
    driver and who advertises whole GPUs (:func:`gpucluster.recipes.recipe_result.file_intent`).

    Attributes:
        api_versions: RecipeResult apiVersions they apply to (``aicr.nvidia.com/v1alpha1``).
        services: ``criteria.service`` values they apply to (empty: every service).
        values: the values (nested), only keys the source shows.
        note: where the values come from (an AICR release's bundle output), one sentence.
        replaced: ``(path, value, why)`` per value those files also set that gpucluster
            deliberately installs otherwise (registry ``replaced``): it selects no profile value;
            where the installed value differs, the reader's ``FILE-VALUE-CHANGED`` warning names
            the file's key, the file's value, the installed one and ``why`` (with its public
            source) (:func:`gpucluster.recipes.recipe_result.file_value_changes`).
    """

    api_versions: tuple[str, ...]
    services: tuple[str, ...]
    values: Any
    note: str
    replaced: tuple[tuple[str, Any, str], ...] = ()


@dataclass(frozen=True)
class ConditionalValue:
    """A value that holds only while another release provides what it switches off (registry
    ``conditionalValues``): e.g. gpu-operator ``nfd.enabled: false`` because the ``nfd`` release
    runs Node Feature Discovery.

    Resolution (:func:`gpucluster.recipes.layering.effective_components`), for every recipe -- catalog
    recipes and RecipeResult files alike: when the component's recipe-level value at ``path``
    equals ``value`` and none of ``providers`` is an enabled component of the recipe, the value
    becomes ``otherwise`` (the chart default that keeps the bundled subchart/CRDs) with an info
    finding ``CONDITIONAL-VALUE``; when a provider is present, the component is ordered after the
    first present provider (an edge is added when the recipe lacks one, info ``ORDER-ADDED``),
    because the value assumes the provider's objects exist at install time.

    Attributes:
        path: dotted values path (``crds.enabled``).
        value: the value that assumes a provider (``false``).
        otherwise: the value without a provider (``true``).
        providers: component names, any one of which provides it, in order of preference.
        why: what the provider supplies, for messages.
    """

    path: str
    value: Any
    otherwise: Any
    providers: tuple[str, ...]
    why: str = ""


@dataclass(frozen=True)
class ChartVersionValues:
    """The values of a component for one range of chart versions (registry ``chartVersions``).

    gpucluster's values of a component (values files, overlay and profile overrides, scheduling
    paths, plugin patches) are written in the vocabulary of the registry's pinned chart. A chart
    version in another range gets the same values rewritten by this entry, in this order, after
    every other layer (:func:`gpucluster.recipes.chart_versions.values_for_version`):

    * ``rename``: ``(from, to)`` dotted paths: the same setting under the key that version reads
      (KAI v0.13/v0.14 ``admission.gpuPodRuntimeClassName`` for v0.16's
      ``admission.gpuFractionRuntimeClassName``);
    * ``drop``: ``(path, value)``: a value that version behaves as anyway (its chart has no such
      key, e.g. gpu-operator v25 has no ``kataSandboxDevicePlugin``); dropped when the values hold
      exactly that value, refused (the version cannot do what it asks) otherwise;
    * ``unsupported``: paths that version does not have: values that set one are refused;
    * ``defaults``: ``(path, value)``: a default the pinned chart has that this version's chart
      lacks; written when the values leave the path unset (the DRA driver chart 25.12.0 has
      ``kubeletPlugin.tolerations: []`` where 0.4.1 and 0.5.0 tolerate ``nvidia.com/gpu``), so the
      values behave as they do with the pinned chart;
    * ``operands``: ``(path, value)``: the operand version this version's chart installs by
      default where gpucluster's own values name the catalog chart's (gpu-operator v25.10.1
      ``driver.version: 580.105.08``, v26.7's 595.91.07): the value there is replaced when it is
      the one gpucluster's ``components/<name>/values.yaml`` writes; a value the file or the user
      set is kept.

    Attributes:
        versions: the range (:func:`gpucluster.versions.version_in_range` syntax, ``>= 0.13.0 < 0.16.0``).
        charts: chart names it applies to (default: the registry's ``helm.chart``).
        checked: the chart versions these values were rendered against with real Helm (the test
            renders each one found in the reference charts).
        rename / drop / unsupported / defaults / operands: see above.
        note: what differs in that range and where the chart says so (chart file + version).
    """

    versions: str
    charts: tuple[str, ...] = ()
    checked: tuple[str, ...] = ()
    rename: tuple[tuple[str, str], ...] = ()
    drop: tuple[tuple[str, Any], ...] = ()
    unsupported: tuple[str, ...] = ()
    defaults: tuple[tuple[str, Any], ...] = ()
    operands: tuple[tuple[str, str], ...] = ()
    note: str = ""


@dataclass(frozen=True)
class RegistryEntry:
    """One component of the registry.

    Attributes:
        name: canonical name (``gpu-operator``).
        aliases: override keys accepted for it (``gpuoperator``), lowercase.
        type: ``Helm`` or ``Manifest`` (manifest-only, no chart).
        repository / chart / version / namespace: chart facts (defaults for componentRefs).
        scheduling: value paths for node scheduling inputs.
        policy_keys: dotted value paths owned by policy (allocation policy etc.): Terraform
            variables are refused on them; direct overrides warn (see gpucluster.recipes.policy).
        crds: the CRDs it owns and how they upgrade (:class:`CrdSpec`; empty = none known).
        former_names: names the component had in earlier AICR releases (:class:`FormerName`).
        retired_manifests: manifest files of earlier AICR releases it no longer needs.
        retired_overrides: overrides of earlier AICR releases that are dropped (:class:`RetiredOverride`).
        conditional_values: values that hold only with a provider in the recipe
            (:class:`ConditionalValue`).
        chart_versions: the chart-version ranges gpucluster has values for (:class:`ChartVersionValues`);
            empty: the component's values were never checked against a chart version (a pin other
            than the catalog's is a warning, ``VERSION-SKEW``).
        former_values: values files' content in older AICR RecipeResults (:class:`FormerValues`).
        renders: ``(apiVersion, kind, name)`` of objects the component's chart renders that gates
            wait for (registry ``renders``; gpu-operator: ClusterPolicy ``cluster-policy``), checked
            with real Helm in tests; :func:`gpucluster.charts.gates.check_gate_objects` reads them.
        wait_established: CRDs (``<plural>.<group>``) the component installs that must be
            Established before anything depending on it installs (registry ``waitEstablished``;
            the core adds one ``crd-established`` gate each, :func:`gpucluster.charts.gates.collect_gates`).
        manifest_values: dotted values paths that only the component's manifest templates read
            (registry ``manifestValues``): they stay in the component's values (overrides reach
            them, templates see them) but are never passed to its chart, which would not read
            them (:func:`gpucluster.charts.graph.chart_values`; a Terraform variable cannot bind them).
        source_dir: the catalog directory that declared it.
    """

    name: str
    display_name: str = ""
    aliases: tuple[str, ...] = ()
    type: str = "Helm"
    repository: str = ""
    chart: str = ""
    version: str = ""
    namespace: str = ""
    scheduling: SchedulingPaths = field(default_factory=SchedulingPaths)
    policy_keys: tuple[str, ...] = ()
    crds: CrdSpec = field(default_factory=CrdSpec)
    former_names: tuple[FormerName, ...] = ()
    retired_manifests: tuple[RetiredManifest, ...] = ()
    retired_overrides: tuple[RetiredOverride, ...] = ()
    conditional_values: tuple[ConditionalValue, ...] = ()
    wait_established: tuple[str, ...] = ()
    manifest_values: tuple[str, ...] = ()
    chart_versions: tuple[ChartVersionValues, ...] = ()
    renders: tuple[tuple[str, str, str], ...] = ()
    former_values: tuple[FormerValues, ...] = ()
    source_dir: str = ""


@dataclass
class Catalog:
    """The merged catalog.

    Attributes:
        dirs: catalog directories, core first.
        components: registry entries by canonical name.
        overlays / mixins: raw documents by name (validated by :mod:`gpucluster.recipes.overlays`).
    """

    dirs: list[Path]
    components: dict[str, RegistryEntry]
    overlays: dict[str, dict[str, Any]]
    mixins: dict[str, dict[str, Any]]
    overlay_files: dict[str, Path] = field(default_factory=dict)
    mixin_files: dict[str, Path] = field(default_factory=dict)
    schema_vouched: frozenset[Path] = field(default_factory=frozenset, repr=False, compare=False)
    """Files of the shipped catalog a marker says passed their JSON Schemas (not checked again)."""
    schema_pending: dict[Path, str] = field(default_factory=dict, repr=False, compare=False)
    """Shipped folders checked in this process: folder -> marker key, recorded by
    :meth:`record_schema_checked` once their overlays and mixins passed too."""

    def schema_checked_already(self, path: Path | None) -> bool:
        """Whether a marker vouches for the overlay/mixin file ``path`` (:attr:`schema_vouched`),
        so its JSON Schema check may be skipped."""
        return path in self.schema_vouched

    def record_schema_checked(self) -> None:
        """Write the markers of :attr:`schema_pending` (every file of those folders passed its
        schema); a cache that cannot be written is ignored (:mod:`gpucluster.diskcache`)."""
        for key in self.schema_pending.values():
            diskcache.put(VALID_MARKER_KIND, key, b"valid\n")
        self.schema_pending.clear()

    def resolve_name(self, name_or_alias: str) -> str:
        """Canonical component name for a name or alias (case-insensitive).

        Raises:
            KeyError: unknown; the message lists the known names and aliases.
        """
        key = name_or_alias.strip()
        if key in self.components:
            return key
        low = key.lower()
        for entry in self.components.values():
            if low == entry.name.lower() or low in entry.aliases:
                return entry.name
        raise KeyError(
            f"unknown component or alias '{name_or_alias}' "
            f"(allowed: {allowed_list(n for e in self.components.values() for n in (e.name, *e.aliases))})"
        )

    def find_file(self, relpath: str) -> Path:
        """The first catalog directory's file at ``relpath``.

        Raises:
            GpuclusterError: not found in any catalog directory, or escaping it.
        """
        rel = Path(relpath)
        if rel.is_absolute() or ".." in rel.parts:
            raise GpuclusterError(
                f"catalog reference '{relpath}' must be a relative path inside the catalog"
            )
        for d in self.dirs:
            candidate = d / rel
            if candidate.is_file():
                return candidate
        raise GpuclusterError(
            f"catalog file '{relpath}' not found",
            allowed=", ".join(str(d) for d in self.dirs),
            fix="add the file to a catalog directory or fix the reference",
        )

    def load_values(self, relpath: str) -> dict[str, Any]:
        """Parsed values file (an empty file is ``{}``)."""
        path = self.find_file(relpath)
        data = _load_yaml(path)
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise GpuclusterError(
                f"values file must hold a mapping, not {type(data).__name__}", file=str(path)
            )
        return data

    def template_text(self, relpath: str) -> str:
        """Source text of a manifest template."""
        return self.find_file(relpath).read_text(encoding="utf-8")


def _load_yaml(path: Path) -> Any:
    """``yaml.safe_load`` of a catalog file, parsed by libyaml when PyYAML has it (a file it
    refuses is parsed again by the pure-Python loader, which words the error)."""
    return _parse_yaml(path.read_text(encoding="utf-8"), path)


def load_data_file(path: Path) -> Any:
    """A YAML data file a plugin ships (``gpu_vm_sizes.yaml``, its catalog overlays), parsed as
    catalog files are: ``yaml.safe_load`` by libyaml, once per text, kept in the per-user cache
    (:func:`_parse_yaml`). ``gpucluster.sdk.load_data_file``.

    Raises:
        GpuclusterError: invalid YAML, naming the file; OSError: the file cannot be read.
    """
    return _load_yaml(Path(path))


def _decode(data: bytes) -> str:
    """``data`` as :meth:`Path.read_text` (UTF-8, universal newlines) decodes the file's bytes."""
    text = data.decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


PARSE_CACHE_KIND = "yaml-parse"
""":mod:`gpucluster.diskcache` kind of parsed catalog files (:func:`_parse_yaml`)."""


@functools.lru_cache(maxsize=1)
def _parse_identity() -> str | None:
    """Digest of what parsing a catalog file depends on besides its text: this module's source
    (the loaders used), the PyYAML install with whether it has libyaml
    (:func:`gpucluster.diskcache.module_identity`: PyYAML is not imported), the Python version; None
    when the source cannot be read (nothing is cached)."""
    return diskcache.code_identity("yaml-parse 2", __file__, ["yaml"])


def _parse_yaml(text: str, path: Path) -> Any:
    """:func:`_load_yaml` of a file whose text is ``text``; parsed once per text and kept in the
    per-user cache (:mod:`gpucluster.diskcache`) when the result is plain data
    (:func:`gpucluster.diskcache.is_plain`: it reads back exactly). Errors are never kept."""
    identity = _parse_identity()
    key = None if identity is None else diskcache.digest([identity, text])
    if key is not None:
        cached = diskcache.get_plain(PARSE_CACHE_KIND, key)
        if cached is not diskcache.MISS:
            return cached
    data = _parse_yaml_text(text, path)
    if key is not None:
        diskcache.put_plain(PARSE_CACHE_KIND, key, data)
    return data


def _parse_yaml_text(text: str, path: Path) -> Any:
    """``yaml.safe_load(text)`` by libyaml when PyYAML has it, else (or when libyaml refuses it)
    by the pure-Python loader, which words the error.

    Raises:
        GpuclusterError: invalid YAML, naming ``path``.
    """
    import yaml  # here, not at module level: a plan whose parses are all cached does not import PyYAML

    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            return yaml.load(text, Loader=loader)
        except yaml.YAMLError:
            pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise GpuclusterError(f"invalid YAML: {exc}", file=str(path)) from exc


def _entry(raw: dict[str, Any], source: Path) -> RegistryEntry:
    helm = raw.get("helm") or {}
    sched = raw.get("nodeScheduling") or {}
    system = sched.get("system") or {}
    accel = sched.get("accelerated") or {}
    return RegistryEntry(
        name=raw["name"],
        display_name=raw.get("displayName", raw["name"]),
        aliases=tuple(a.lower() for a in raw.get("aliases", [])),
        type=raw.get("type", "Helm"),
        repository=helm.get("repository", ""),
        chart=helm.get("chart", ""),
        version=str(helm.get("version", "")),
        namespace=helm.get("namespace", ""),
        scheduling=SchedulingPaths(
            system_node_selector=tuple(system.get("nodeSelectorPaths", [])),
            system_tolerations=tuple(system.get("tolerationPaths", [])),
            accelerated_node_selector=tuple(accel.get("nodeSelectorPaths", [])),
            accelerated_tolerations=tuple(accel.get("tolerationPaths", [])),
            accelerated_taint_str=tuple(accel.get("taintStrPaths", [])),
            node_count=tuple(sched.get("nodeCountPaths", [])),
        ),
        policy_keys=tuple(raw.get("policyKeys", [])),
        crds=CrdSpec(
            owns=tuple((raw.get("crds") or {}).get("owns", [])),
            upgrade=(raw.get("crds") or {}).get("upgrade", "templates"),
            creates_at_runtime=tuple((raw.get("crds") or {}).get("createsAtRuntime", [])),
            also_ships=tuple(
                (s["name"], s.get("since")) for s in (raw.get("crds") or {}).get("alsoShips", [])
            ),
        ),
        former_names=tuple(FormerName(f["name"], f["note"]) for f in raw.get("formerNames", [])),
        retired_manifests=tuple(
            RetiredManifest(m["file"], m["note"]) for m in raw.get("retiredManifests", [])
        ),
        retired_overrides=tuple(
            RetiredOverride(o["path"], o["value"], tuple(o["apiVersions"]), o["note"])
            for o in raw.get("retiredOverrides", [])
        ),
        conditional_values=tuple(
            ConditionalValue(
                c["path"], c["value"], c["otherwise"], tuple(c["providers"]), c.get("why", "")
            )
            for c in raw.get("conditionalValues", [])
        ),
        wait_established=tuple(raw.get("waitEstablished", [])),
        manifest_values=tuple(raw.get("manifestValues", [])),
        chart_versions=tuple(
            ChartVersionValues(
                versions=str(v["versions"]),
                charts=tuple(v.get("charts", [])),
                checked=tuple(str(c) for c in v.get("checked", [])),
                rename=tuple((str(a), str(b)) for a, b in (v.get("rename") or {}).items()),
                drop=tuple((str(d["path"]), d["value"]) for d in v.get("drop", [])),
                unsupported=tuple(v.get("unsupported", [])),
                defaults=tuple((str(d["path"]), d["value"]) for d in v.get("defaults", [])),
                operands=tuple((str(d["path"]), str(d["value"])) for d in v.get("operands", [])),
                note=v.get("note", ""),
            )
            for v in raw.get("chartVersions", [])
        ),
        renders=tuple(
            (str(r["apiVersion"]), str(r["kind"]), str(r.get("name", "")))
            for r in raw.get("renders", [])
        ),
        former_values=tuple(
            FormerValues(
                tuple(f["apiVersions"]),
                tuple(f.get("services", [])),
                f["values"],
                f["note"],
                tuple((str(r["path"]), r["value"], str(r["why"])) for r in f.get("replaced", [])),
            )
            for f in raw.get("formerValues", [])
        ),
        source_dir=str(source),
    )


_PATHS = {"type": "array", "items": {"type": "string", "minLength": 1}}
_CRD_NAME = {
    "type": "string",
    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+\\Z",
}
_CRD_NAMES = {"type": "array", "items": _CRD_NAME, "uniqueItems": True}
REGISTRY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "kind": {"const": "ComponentRegistry"},
        "apiVersion": {"const": "gpucluster/v1alpha1"},
        "components": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?\\Z"},
                    "displayName": {"type": "string"},
                    "aliases": _PATHS,
                    "type": {"enum": ["Helm", "Manifest"]},
                    "helm": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "repository": {
                                "type": "string",
                                "pattern": "^(https://|oci://)[^\\s]+\\Z",
                            },
                            "chart": {
                                "type": "string",
                                "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*\\Z",
                            },
                            "version": {"type": "string", "minLength": 1},
                            "namespace": {
                                "type": "string",
                                "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?\\Z",
                            },
                        },
                    },
                    "nodeScheduling": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "system": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "nodeSelectorPaths": _PATHS,
                                    "tolerationPaths": _PATHS,
                                },
                            },
                            "accelerated": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "nodeSelectorPaths": _PATHS,
                                    "tolerationPaths": _PATHS,
                                    "taintStrPaths": _PATHS,
                                },
                            },
                            "nodeCountPaths": _PATHS,
                        },
                    },
                    "policyKeys": _PATHS,
                    "formerNames": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name", "note"],
                            "additionalProperties": False,
                            "properties": {
                                "name": {
                                    "type": "string",
                                    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?\\Z",
                                },
                                "note": {"type": "string", "minLength": 1},
                            },
                        },
                    },
                    "retiredManifests": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["file", "note"],
                            "additionalProperties": False,
                            "properties": {
                                "file": {
                                    "type": "string",
                                    "pattern": "^components/[^\\s]+\\.yaml\\Z",
                                },
                                "note": {"type": "string", "minLength": 1},
                            },
                        },
                    },
                    "retiredOverrides": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["path", "value", "apiVersions", "note"],
                            "additionalProperties": False,
                            "properties": {
                                "path": {"type": "string", "minLength": 1},
                                "value": {"type": ["boolean", "string", "number"]},
                                "apiVersions": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {"type": "string", "minLength": 1},
                                },
                                "note": {"type": "string", "minLength": 1},
                            },
                        },
                    },
                    "formerValues": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["apiVersions", "values", "note"],
                            "additionalProperties": False,
                            "properties": {
                                "apiVersions": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {"type": "string", "minLength": 1},
                                },
                                "services": {
                                    "type": "array",
                                    "items": {"type": "string", "minLength": 1},
                                },
                                "values": {"type": "object", "minProperties": 1},
                                "note": {"type": "string", "minLength": 1},
                                "replaced": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["path", "value", "why"],
                                        "additionalProperties": False,
                                        "properties": {
                                            "path": {"type": "string", "minLength": 1},
                                            "value": {},
                                            "why": {"type": "string", "minLength": 1},
                                        },
                                    },
                                },
                            },
                        },
                    },
                    "renders": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["apiVersion", "kind"],
                            "additionalProperties": False,
                            "properties": {
                                "apiVersion": {"type": "string", "minLength": 1},
                                "kind": {"type": "string", "minLength": 1},
                                "name": {"type": "string", "minLength": 1},
                            },
                        },
                    },
                    "chartVersions": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["versions", "checked"],
                            "additionalProperties": False,
                            "properties": {
                                "versions": {"type": "string", "minLength": 1},
                                "charts": {
                                    "type": "array",
                                    "items": {
                                        "type": "string",
                                        "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*\\Z",
                                    },
                                },
                                "checked": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {"type": "string", "minLength": 1},
                                },
                                "rename": {
                                    "type": "object",
                                    "additionalProperties": {"type": "string", "minLength": 1},
                                },
                                "drop": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["path", "value"],
                                        "additionalProperties": False,
                                        "properties": {
                                            "path": {"type": "string", "minLength": 1},
                                            "value": {"type": ["boolean", "string", "number"]},
                                        },
                                    },
                                },
                                "unsupported": _PATHS,
                                "defaults": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["path", "value"],
                                        "additionalProperties": False,
                                        "properties": {
                                            "path": {"type": "string", "minLength": 1},
                                            "value": {},
                                        },
                                    },
                                },
                                "operands": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["path", "value"],
                                        "additionalProperties": False,
                                        "properties": {
                                            "path": {"type": "string", "minLength": 1},
                                            "value": {"type": "string", "minLength": 1},
                                        },
                                    },
                                },
                                "note": {"type": "string"},
                            },
                        },
                    },
                    "waitEstablished": {
                        "type": "array",
                        "items": {
                            "type": "string",
                            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+\\Z",
                        },
                    },
                    "manifestValues": _PATHS,
                    "conditionalValues": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["path", "value", "otherwise", "providers"],
                            "additionalProperties": False,
                            "properties": {
                                "path": {"type": "string", "minLength": 1},
                                "value": {"type": ["boolean", "string", "number"]},
                                "otherwise": {"type": ["boolean", "string", "number"]},
                                "providers": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {"type": "string", "minLength": 1},
                                },
                                "why": {"type": "string"},
                            },
                        },
                    },
                    "crds": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["upgrade", "owns"],
                        "properties": {
                            "upgrade": {"enum": list(CRD_UPGRADE_MODES)},
                            "owns": _CRD_NAMES,
                            "createsAtRuntime": _CRD_NAMES,
                            "alsoShips": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["name"],
                                    "properties": {
                                        "name": _CRD_NAME,
                                        "since": {"type": "string", "minLength": 1},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}
"""JSON Schema of ``registry.yaml``: chart names without a repo prefix, versions as strings
(quote ``"0.19.0"``-like numbers), repositories ``https://`` or ``oci://``."""


def validate_registry(data: Any, file: str) -> None:
    """Validate a parsed ``registry.yaml`` against :data:`REGISTRY_SCHEMA`.

    Raises:
        GpuclusterError: naming the file and the key path of the first violation.
    """
    import jsonschema

    try:
        schemas.validate(data, REGISTRY_SCHEMA)
    except jsonschema.ValidationError as exc:
        key = ".".join(str(p) for p in exc.absolute_path) or None
        raise GpuclusterError(
            f"invalid registry: {exc.message}",
            file=file,
            key=key,
            fix="fix the entry (format: docs/recipes.md, registry.yaml)",
        ) from None


def check_crd_ownership(components: dict[str, RegistryEntry]) -> None:
    """One owner per CRD: refuse a CRD that two registry entries own (``crds.owns`` or
    ``crds.createsAtRuntime``), wherever they are declared. A chart that carries a CRD it does
    not own lists it under ``alsoShips`` (docs/upgrading.md, "CRD ownership").

    Raises:
        GpuclusterError: naming the CRD, both components and their catalog directories.
    """
    owner: dict[str, RegistryEntry] = {}
    for entry in components.values():
        for crd in (*entry.crds.owns, *entry.crds.creates_at_runtime):
            first = owner.get(crd)
            if first is not None and first.name != entry.name:
                raise GpuclusterError(
                    f"CRD '{crd}' is owned by two components: '{first.name}' ({first.source_dir}) and "
                    f"'{entry.name}' ({entry.source_dir}); two owners would overwrite each other's schema on every upgrade",
                    file=str(Path(entry.source_dir) / "registry.yaml"),
                    component=entry.name,
                    key="crds.owns",
                    fix=f"keep one owner: move '{crd}' to crds.alsoShips of '{entry.name}' (or of '{first.name}')",
                )
            owner[crd] = entry


VALID_MARKER_KIND = "catalog-valid"
""":mod:`gpucluster.diskcache` kind of the shipped catalog's schema markers."""


def shipped_catalog_dirs() -> frozenset[Path]:
    """:data:`CORE_CATALOG_DIR` and the ``catalog`` folders of the loaded :data:`SHIPPED_PLUGIN_PACKAGES`."""
    dirs = {CORE_CATALOG_DIR}
    for name in SHIPPED_PLUGIN_PACKAGES:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if origin:
            dirs.add(Path(origin).parent / "catalog")
    return frozenset(dirs)


SCHEMA_SOURCES = ("recipes/catalog.py", "recipes/overlays.py", "schemas.py", "model.py")
"""The gpucluster modules that define the catalog's JSON Schemas (:data:`REGISTRY_SCHEMA`,
``gpucluster.recipes.overlays.OVERLAY_SCHEMA`` and ``MIXIN_SCHEMA``, the constants they use) and apply them."""


def _schema_identity() -> list[str | bytes] | None:
    """What a schema check's outcome depends on besides the files: the source bytes of
    :data:`SCHEMA_SOURCES` (read, not imported: overlays imports this module), the gpucluster and
    Python versions and which jsonschema is installed, with the two libraries its checks rely on
    (``referencing``, ``jsonschema_specifications``; :func:`gpucluster.diskcache.module_identity`).
    None when a source cannot be read (an install without sources): then nothing is vouched for."""
    from gpucluster import __version__

    here = Path(__file__).parent.parent  # gpucluster/
    try:
        sources = [(here / name).read_bytes() for name in SCHEMA_SOURCES]
    except OSError:
        return None
    return [
        "catalog-valid 1",
        __version__,
        sys.version,
        *(
            diskcache.module_identity(name)
            for name in ("jsonschema", "referencing", "jsonschema_specifications")
        ),
        *sources,
    ]


def schema_marker_key(
    files: list[tuple[str, bytes]], identity: list[str | bytes] | None = None
) -> str | None:
    """The marker key of one catalog folder: ``identity`` (default :func:`_schema_identity`) and
    every ``(folder-relative path, bytes)`` of its ``registry.yaml``, ``overlays/*.yaml`` and
    ``mixins/*.yaml`` (None: no key can be made, see :func:`_schema_identity`)."""
    base = _schema_identity() if identity is None else identity
    if base is None:
        return None
    parts = list(base)
    for rel, data in files:
        parts += [rel, data]
    return diskcache.digest(parts)


def catalog_dirs() -> list[Path]:
    """Core catalog directory followed by plugin directories (plugin call order).

    Raises:
        PluginError: a plugin returned something other than a list of paths, or a directory
            that does not exist (e.g. package data missing from its distribution); names the plugin.
    """
    from gpucluster.errors import PluginError
    from gpucluster.plugins import call_list_hook

    dirs = [CORE_CATALOG_DIR]
    for plugin, d in call_list_hook(
        "gpucluster_catalog_dirs", (str, os.PathLike), what="directory paths (pathlib.Path)"
    ):
        p = Path(d)
        if not p.is_dir():
            raise PluginError(
                f"plugin '{plugin}' returned catalog directory '{p}', which does not exist",
                fix="ship the catalog as package data (setuptools package-data) and return "
                "Path(__file__).parent / 'catalog'",
            )
        if p not in dirs:
            dirs.append(p)
    return dirs


def load_catalog(dirs: tuple[Path, ...] | None = None) -> Catalog:
    """Load and merge the catalog (cached per directory tuple; treat the result as read-only).

    Raises:
        GpuclusterError: malformed registry/overlay/mixin files, or a name defined twice.
    """
    return _load_catalog(tuple(dirs) if dirs is not None else tuple(catalog_dirs()))


@functools.lru_cache(maxsize=8)
def _load_catalog(dirs: tuple[Path, ...]) -> Catalog:
    components: dict[str, RegistryEntry] = {}
    overlays: dict[str, dict[str, Any]] = {}
    overlay_files: dict[str, Path] = {}
    mixins: dict[str, dict[str, Any]] = {}
    mixin_files: dict[str, Path] = {}
    shipped = shipped_catalog_dirs()
    vouched: set[Path] = set()
    pending: dict[Path, str] = {}
    identity = _schema_identity() if shipped.intersection(dirs) else None
    for d in dirs:
        contents: dict[Path, bytes] = {}
        if d in shipped:
            # The shipped catalog: read every file once, and skip the schema checks when a marker
            # keyed by exactly these bytes (and the schemas and versions) says they passed.
            paths = [d / "registry.yaml"] if (d / "registry.yaml").is_file() else []
            for kind in ("overlays", "mixins"):
                if (d / kind).is_dir():
                    paths += sorted((d / kind).glob("*.yaml"))
            contents = {path: path.read_bytes() for path in paths}
            key = (
                None
                if identity is None
                else schema_marker_key(
                    [(path.relative_to(d).as_posix(), data) for path, data in contents.items()],
                    identity,
                )
            )
            if key is not None and diskcache.get(VALID_MARKER_KIND, key) == b"valid\n":
                vouched.update(contents)
            elif key is not None:
                pending[d] = key

        def load(path: Path) -> Any:
            return (
                _parse_yaml(_decode(contents[path]), path) if path in contents else _load_yaml(path)
            )

        reg = d / "registry.yaml"
        if reg.is_file():
            data = load(reg) or {}
            if reg not in vouched:
                validate_registry(data, str(reg))
            for raw in data.get("components", []):
                if not isinstance(raw, dict) or "name" not in raw:
                    raise GpuclusterError(
                        "registry entry without a name", file=str(reg), key="components"
                    )
                entry = _entry(raw, d)
                if entry.name in components:
                    raise GpuclusterError(
                        f"component '{entry.name}' is defined in two catalogs: {components[entry.name].source_dir} and {d}",
                        file=str(reg),
                        component=entry.name,
                    )
                components[entry.name] = entry
        for kind, target, files in (
            ("overlays", overlays, overlay_files),
            ("mixins", mixins, mixin_files),
        ):
            sub = d / kind
            if not sub.is_dir():
                continue
            for path in sorted(sub.glob("*.yaml")):
                doc = load(path)
                if not isinstance(doc, dict):
                    raise GpuclusterError(f"{kind[:-1]} file must hold a mapping", file=str(path))
                name = (doc.get("metadata") or {}).get("name") or path.stem
                if name in target:
                    raise GpuclusterError(
                        f"{kind[:-1]} '{name}' is defined twice: {files[name]} and {path}",
                        file=str(path),
                    )
                target[name] = doc
                files[name] = path
    check_crd_ownership(components)
    _check_registry_links(components)
    check_registry(components.values())
    return Catalog(
        dirs=list(dirs),
        components=components,
        overlays=overlays,
        mixins=mixins,
        overlay_files=overlay_files,
        mixin_files=mixin_files,
        schema_vouched=frozenset(vouched),
        schema_pending=pending,
    )


def _charts(entry: RegistryEntry, cv: ChartVersionValues) -> tuple[str, ...]:
    return cv.charts or (entry.chart,)


def range_entry(entry: RegistryEntry, chart: str, version: str) -> ChartVersionValues | None:
    """The first ``chartVersions`` entry of ``entry`` whose range holds ``version`` for ``chart``."""
    for cv in entry.chart_versions:
        if chart in _charts(entry, cv) and version_in_range(version, cv.versions):
            return cv
    return None


def chart_version_entries(entry: RegistryEntry, chart: str) -> list[ChartVersionValues]:
    """The ``chartVersions`` entries of ``entry`` that apply to ``chart`` (a chart name without
    a repo prefix), in registry order."""
    return [cv for cv in entry.chart_versions if chart in _charts(entry, cv)]


def describe(entry: RegistryEntry) -> str:
    """The ranges gpucluster has values for, for messages:
    ``kai-scheduler >= 0.16.0 < 0.17.0 (checked: v0.16.9); ...``."""
    return "; ".join(
        f"{'/'.join(_charts(entry, cv))} {cv.versions} (checked: {', '.join(cv.checked)})"
        for cv in entry.chart_versions
    )


def check_registry(entries: Iterable[RegistryEntry]) -> None:
    """Catalog rule: every ``chartVersions`` range parses, and a component's own pin is covered.

    Raises:
        GpuclusterError: naming the registry file, component and ``chartVersions``.
    """
    from gpucluster.versions import parse_version

    for entry in entries:
        if not entry.chart_versions:
            continue
        reg = str(Path(entry.source_dir) / "registry.yaml")
        for i, cv in enumerate(entry.chart_versions):
            clauses = cv.versions.split()
            if not clauses or any(parse_version(c.lstrip("<>=")) is None for c in clauses):
                raise GpuclusterError(
                    f"chartVersions range '{cv.versions}' of '{entry.name}' is not a version range",
                    file=reg,
                    component=entry.name,
                    key=f"chartVersions[{i}].versions",
                    allowed="clauses such as '>= 0.13.0 < 0.16.0'",
                )
        if entry.version and range_entry(entry, entry.chart, entry.version) is None:
            raise GpuclusterError(
                f"the pinned {entry.chart} {entry.version} of '{entry.name}' is in none of its chartVersions ranges ({describe(entry)})",
                file=reg,
                component=entry.name,
                key="chartVersions",
                fix="add a chartVersions entry for the pinned version (its values checked against that chart)",
            )


def _check_registry_links(components: dict[str, RegistryEntry]) -> None:
    """Cross-entry rules: a former name is no current component and names one component only;
    conditional-value providers are registry components.

    Raises:
        GpuclusterError: naming the registry file and component.
    """
    former: dict[str, str] = {}
    for entry in components.values():
        reg = str(Path(entry.source_dir) / "registry.yaml")
        for f in entry.former_names:
            if f.name in components:
                raise GpuclusterError(
                    f"former name '{f.name}' of '{entry.name}' is a current component",
                    file=reg,
                    component=entry.name,
                    key="formerNames",
                    fix="remove the formerNames entry or rename the component",
                )
            if f.name in former:
                raise GpuclusterError(
                    f"former name '{f.name}' is claimed by both '{former[f.name]}' and '{entry.name}'",
                    file=reg,
                    component=entry.name,
                    key="formerNames",
                )
            former[f.name] = entry.name
        for c in entry.conditional_values:
            unknown = [p for p in c.providers if p not in components]
            if unknown:
                raise GpuclusterError(
                    f"conditional value {c.path} of '{entry.name}' names provider '{unknown[0]}', which is not in the registry",
                    file=reg,
                    component=entry.name,
                    key="conditionalValues",
                    allowed=allowed_list(components),
                )

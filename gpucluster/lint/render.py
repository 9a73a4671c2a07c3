"""Render every ``helm_release`` of the runtime stacks with Helm's own engine, offline.

``gpucluster render`` / ``gpucluster lint`` (docs/cli.md). Pure Python: no cdktf import. Helm's
engine comes from PyPI ``helm-python-sdk`` (import ``helm_python``, Helm v4 compiled into the
wheel, no helm binary), imported lazily so the core imports without the ``render`` extra.

Data flow::

    RuntimePlan (gpucluster.pipeline.build_plans, the plan synth uses)
      -> per PlanNode: chart folder (ChartSources: offline folders, pull cache, online pull)
      -> values Helm receives (gpucluster.values.values_yaml + set_entries: the serialization the
         constructs layer writes into helm_release.values / set)
      -> helm_python.Chart.render(values, name=<release>, namespace=<namespace>, is_install=True)
      -> RenderedRelease (templates, parsed objects, the chart's CRDs)

Chart sources, first that has the chart:

1. offline folders (``--charts DIR``, repeatable; else ``$GPUCLUSTER_CHARTS``, ``os.pathsep``
   separated): every ``DIR/*/Chart.yaml`` (and ``DIR/Chart.yaml``) is indexed by its ``name`` and
   ``version``. A chart whose exact version is absent is matched to the nearest one of the same
   name (or, when no chart has that name, to a folder named like the chart); the substitute is
   reported as a finding (``render.chart-nearest``), never silently. A folder named
   ``<anything>-<version>`` (``agentgateway-v1.3.1``) holding a chart of that name is taken for
   that version when no ``Chart.yaml`` says it (charts whose tags carry a placeholder version),
   with an info finding;
2. the chart cache (:mod:`gpucluster.charts.chartcache`: ``gpucluster charts pull`` fills it; default
   ``$GPUCLUSTER_CHART_CACHE`` or ``~/.cache/gpucluster/charts``; only entries the user owns);
3. with ``pull=True`` (``--pull``): :func:`gpucluster.charts.pull.pull_one` from the HTTP repository or
   OCI registry into the cache (atomically: a half-finished pull never becomes a cache entry).

The repository a node names is the one Terraform fetches from (the cluster file's mirror, when
it names one: :mod:`gpucluster.charts.mirrors`). A chart that cannot be had is reported by name with how
to get it (``render.chart-unavailable``). A dependency a chart declares but does not carry in
``charts/`` is looked up in the same sources (like ``helm dependency build``); when it cannot be
had either, the parent is rendered with the dependency's ``condition`` set to false and
``render.subchart-unavailable`` names it. Both are warnings (the release or subchart is reported
as not checked, :func:`unverified`), or errors with ``require_charts`` (``--require-charts``)
for every name not in ``allow_missing``. A chart or subchart rendered from a stand-in that is not
the pinned version (:data:`STAND_IN`: the nearest version, a chart whose appVersion is the pin, or
a dependency at a version outside its range) is listed (:func:`stand_ins`) and, with
``require_charts``, an error for every name in neither ``allow_nearest`` nor ``allow_missing``;
a folder named for the pinned version is taken for it (no stand-in).

Helm's ``.Capabilities`` are those of the target cluster (:class:`Capabilities`): its Kubernetes
version (``kubernetesVersion``, ``v1.34.0``) and, added to Helm's default API versions, every GA
``group/version`` and ``group/version/Kind`` of kubernetes-validate's schemas for it (with the
aggregator's ``apiregistration.k8s.io/v1``, which Helm's defaults lack) plus the CRDs of the
releases a release depends on and of its own chart, as Helm's discovery would list them at install.
No cluster is contacted (``lookup`` returns nothing), so templates that generate random data
(certificates, passwords) differ per render.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpucluster.charts import chartcache
from gpucluster.charts.chartcache import CACHE_ENV, cache_key, default_cache_dir  # noqa: F401  (re-exported)
from gpucluster.charts.helmsdk import helm  # noqa: F401  (re-exported: render and lint use Helm's engine through it)
from gpucluster.errors import GpuclusterError
from gpucluster.model import PlanNode, RuntimePlan
from gpucluster.values import deep_merge, get_path, set_entries, set_path, split_path, values_yaml

CHARTS_ENV = "GPUCLUSTER_CHARTS"
"""Environment variable: offline chart folders (``os.pathsep`` separated) when no ``--charts``."""

HOW_TO_GET = (
    "run `gpucluster charts pull` to fetch it into the chart cache (behind egress rules, name a mirror that "
    "holds it: charts.mirror or charts.mirrors in the cluster file), or unpack it into a --charts folder"
)
"""The ``fix:`` of a chart render and lint cannot have (``charts pull`` has its own, :data:`gpucluster.charts.pull.PULL_FIX`)."""

Severity = str  # "error" | "warning" | "info"


# --------------------------------------------------------------------------- findings


@dataclass(frozen=True)
class LintFinding:
    """One finding of ``gpucluster render`` / ``gpucluster lint``.

    Attributes:
        id: stable id (``render.chart-unavailable``, ``lint.dead-value``, ...).
        severity: ``error`` (exit 2), ``warning`` or ``info``.
        message / fix: what is wrong, what to change.
        cluster / component / release / key / file: where (key: a values path or an object path).
        undecided: the releases of the cluster that were not rendered (``<release>`` or
            ``<release> subcharts a, b``) on which the finding depends; non-empty: a check that could
            not be decided (severity ``info``), never an error (:mod:`gpucluster.lint.lint`).
    """

    id: str
    severity: Severity
    message: str
    fix: str = ""
    cluster: str = ""
    component: str = ""
    release: str = ""
    key: str = ""
    file: str = ""
    undecided: tuple[str, ...] = ()

    def render(self) -> str:
        """One line: ``error[id] file=… cluster=… component=… release=… key=…: message fix: …``; every
        part escaped by :func:`gpucluster.errors.format_line` (values keys and object names come from
        input files and charts)."""
        from gpucluster.errors import format_line

        return format_line(
            self.severity,
            self.id,
            self.message,
            where=(
                ("file", self.file),
                ("cluster", self.cluster),
                ("component", self.component),
                ("release", self.release),
                ("key", self.key),
            ),
            fix=self.fix or None,
            message_limit=2000,
        )


def sort_findings(findings: Iterable[LintFinding]) -> list[LintFinding]:
    """Deterministic order: cluster, release, id, key, message; duplicates dropped."""
    order = {"error": 0, "warning": 1, "info": 2}
    unique = {f: None for f in findings}
    return sorted(
        unique,
        key=lambda f: (f.cluster, f.release, order.get(f.severity, 3), f.id, f.key, f.message),
    )


# --------------------------------------------------------------------------- chart sources


_VERSION_NUMBERS = re.compile(r"\d+")


def normalize_version(version: str) -> str:
    """``v26.7.1`` -> ``26.7.1`` (chart repositories spell versions with or without ``v``)."""
    return str(version or "").strip().removeprefix("v")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(
        int(n) for n in _VERSION_NUMBERS.findall(normalize_version(version).split("+")[0])[:3]
    )


def _folder_version(name: str) -> str:
    """The version a chart folder's name ends with (``agentgateway-v1.3.1`` -> ``1.3.1``,
    ``grove-v0.1.0-alpha.8`` -> ``0.1.0-alpha.8``), normalized; '' when it ends with none.
    Used when a chart's ``Chart.yaml`` carries a development placeholder version (agentgateway
    and grove tags keep ``0.0.2`` / ``0.1.0`` there) and the folder says which tag it holds."""
    m = re.search(r"-(v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$", name)
    return normalize_version(m.group(1)) if m else ""


def _distance(a: str, b: str) -> tuple[int, ...]:
    ka, kb = _version_key(a) + (0, 0, 0), _version_key(b) + (0, 0, 0)
    return tuple(abs(x - y) for x, y in zip(ka[:3], kb[:3], strict=True))


@dataclass(frozen=True)
class ChartDir:
    """An unpacked chart on disk (its ``Chart.yaml`` read)."""

    path: Path
    name: str
    version: str
    app_version: str
    dependencies: tuple[Mapping[str, Any], ...] = ()


CHART_YAML_LIMIT = 1 << 20
"""Largest ``Chart.yaml`` read (1 MiB; real ones are a few KiB)."""


def read_chart_dir(path: Path) -> ChartDir | None:
    """The :class:`ChartDir` at ``path`` (a folder with a regular ``Chart.yaml`` of at most
    :data:`CHART_YAML_LIMIT` bytes), or None."""
    from gpucluster.diskcache import open_regular

    fd = open_regular(path / "Chart.yaml")  # without blocking: a FIFO named Chart.yaml is no chart
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            raw = f.read(CHART_YAML_LIMIT + 1)
        if len(raw) > CHART_YAML_LIMIT:
            return None
        meta = yaml.safe_load(raw.decode("utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError):
        return None
    if not isinstance(meta, Mapping) or not meta.get("name"):
        return None
    deps = tuple(
        d for d in (meta.get("dependencies") or []) if isinstance(d, Mapping) and d.get("name")
    )
    return ChartDir(
        path=path,
        name=str(meta["name"]),
        version=str(meta.get("version", "")),
        app_version=str(meta.get("appVersion", "")),
        dependencies=deps,
    )


def scan_folders(folders: Sequence[Path]) -> list[ChartDir]:
    """Every chart directly in (or directly below) each folder, in folder order, then by path."""
    out: list[ChartDir] = []
    for folder in folders:
        own = read_chart_dir(folder)
        if own is not None:
            out.append(own)
        if folder.is_dir():
            for child in sorted(folder.iterdir()):
                if child.is_dir():
                    found = read_chart_dir(child)
                    if found is not None:
                        out.append(found)
    return out


def chart_folders_from(
    charts: Sequence[str] | None, env: Mapping[str, str] = os.environ
) -> list[Path]:
    """The offline chart folders: ``charts`` (``--charts``), else ``$GPUCLUSTER_CHARTS`` split at ``os.pathsep``.

    Raises:
        GpuclusterError: a named folder does not exist.
    """
    raw = list(charts or []) or [p for p in (env.get(CHARTS_ENV) or "").split(os.pathsep) if p]
    folders = []
    for text in raw:
        path = Path(text)
        if not path.is_dir():
            raise GpuclusterError(
                f"chart folder '{text}' "
                + ("is a file, not a folder" if path.exists() else "does not exist"),
                key="--charts" if charts else CHARTS_ENV,
                fix="name a folder of unpacked charts (one sub-folder per chart with its Chart.yaml)",
            )
        folders.append(path)
    return folders


@dataclass(frozen=True)
class Located:
    """Where a chart was found: ``chart`` (None: not found) and a note when it is a substitute."""

    chart: ChartDir | None
    how: str = ""  # exact | folder | cached | pulled | app-version | nearest | range | ""
    note: str = ""


STAND_IN = ("nearest", "app-version", "folder")
""":attr:`Located.how` of a chart that is not known to be the pinned version: rendered in its
stead, so the pinned version is not checked. ``app-version``: the chart's ``version`` differs and
only its ``appVersion`` equals the pin (a source checkout whose ``Chart.yaml`` keeps a placeholder
version looks so, but appVersion does not identify a chart release: kube-prometheus-stack 83.7.0
and 84.4.0 both carry appVersion v0.90.1). ``folder``: a folder named ``<name>-<pinned version>``
whose ``Chart.yaml`` says another version -- the name is a claim nothing checks (a source
checkout's placeholder version, or a copy of another release renamed), so it is reported like
the others (``info``; an error under ``require_charts`` unless allowed)."""


class ChartSources:
    """Find pinned charts: offline folders, then the pull cache, then (``pull=True``) the network.

    Args:
        folders: offline chart folders (see module docstring).
        cache_dir: pull cache (default :func:`default_cache_dir`).
        pull: pull charts that are neither in the folders nor in the cache.
    """

    def __init__(
        self, folders: Sequence[Path] = (), *, cache_dir: Path | None = None, pull: bool = False
    ):
        self.folders = [Path(f) for f in folders]
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.pull = pull
        self._index = scan_folders(self.folders)
        self._memo: dict[tuple[str, str, str], Located] = {}

    def locate(self, repository: str, chart: str, version: str) -> Located:
        """The chart ``chart`` at ``version`` from ``repository`` (see class docstring)."""
        key = (repository, chart, version)
        if key not in self._memo:
            self._memo[key] = self._locate(repository, chart, version)
        return self._memo[key]

    def _locate(self, repository: str, chart: str, version: str) -> Located:
        want = normalize_version(version)
        same = [c for c in self._index if c.name == chart]
        for c in same:
            if normalize_version(c.version) == want:
                return Located(c, "exact")
        for c in same:
            if want and _folder_version(c.path.name) == want:
                return Located(
                    c,
                    "folder",
                    f"folder {c.path.name} (chart {c.name}, Chart.yaml version {c.version}) is "
                    f"taken for {chart} {version} by its name",
                )
        cached = self._cached(repository, chart, version)
        if cached is not None:
            return Located(cached, "cached")
        if self.pull and repository:
            pulled = self._pull(repository, chart, version)
            if pulled.chart is not None:
                return pulled
            if not same:
                return pulled
        if same:
            for c in same:
                if normalize_version(c.app_version) == want:
                    return Located(
                        c,
                        "app-version",
                        f"chart {c.name} {c.version} (appVersion {c.app_version}) stands in for {chart} {version}",
                    )
            best = min(same, key=lambda c: (_distance(c.version, version), c.version))
            return Located(
                best,
                "nearest",
                f"chart {best.name} {best.version} stands in for {chart} {version} (the nearest version available)",
            )
        by_folder = [
            c for c in self._index if c.path.name == chart or c.path.name.startswith(chart + "-")
        ]
        if by_folder:
            c = by_folder[0]
            return Located(
                c,
                "nearest",
                f"folder {c.path.name} holds chart {c.name} {c.version}, standing in for {chart} {version}",
            )
        return Located(None)

    def _cached(self, repository: str, chart: str, version: str) -> ChartDir | None:
        found = chartcache.lookup(self.cache_dir, repository, chart, version)
        return None if found is None else read_chart_dir(found)

    def _pull(self, repository: str, chart: str, version: str) -> Located:
        """Pull into the chart cache (:func:`gpucluster.charts.pull.pull_one`); a failure is the note."""
        from gpucluster.charts import pull as charts

        helm()  # the render extra's absence is an input error, not a failed pull
        result = charts.pull_one((repository, chart, version), self.cache_dir)
        if result.path is None:
            return Located(
                None, note=f"pull of {chart} {version} from {repository} failed: {result.reason}"
            )
        found = read_chart_dir(result.path)
        return (
            Located(found, "pulled")
            if found is not None
            else Located(None, note=f"pull of {chart} {version} gave no chart")
        )

    def locate_dependency(self, dep: Mapping[str, Any]) -> Located:
        """A chart dependency (``Chart.yaml`` ``dependencies`` entry) from the sources: the exact
        version (``how`` exact, cached or pulled); for a range (``0.12.*``) the highest version
        the range's prefix admits (``range``), else the highest version of that name as a
        stand-in (``nearest``, with a note: other range forms, ``^1.2``, are not evaluated, so
        their match is a stand-in too); ``Located(None)`` when neither is there."""
        name, version, repo = (
            str(dep.get("name")),
            str(dep.get("version", "")),
            str(dep.get("repository", "")),
        )
        found = (
            self.locate(repo, name, version)
            if not any(ch in version for ch in "*^~<>= ")
            else Located(None)
        )
        if found.chart is not None and found.how in ("exact", "cached", "pulled"):
            return found
        same = [c for c in self._index if c.name == name]
        if any(ch in version for ch in "*^~<>= ") and same:
            prefix = version.split("*")[0]
            fits = [
                c
                for c in same
                if normalize_version(c.version).startswith(normalize_version(prefix))
            ]
            if fits:
                return Located(max(fits, key=lambda c: _version_key(c.version)), "range")
            best = max(same, key=lambda c: _version_key(c.version))
            return Located(
                best,
                "nearest",
                f"chart {best.name} {best.version} stands in for dependency {name} {version} "
                "(no version in the chart sources is known to fit the range)",
            )
        return Located(None)


# --------------------------------------------------------------------------- rendering


def post_render(manifests: Mapping[str, str], image_mirror: str | None) -> dict[str, str]:
    """``manifests`` as the cluster receives them: with ``image_mirror``, each template's objects
    through :func:`gpucluster.charts.imagemirror.rewrite_stream` (the post-renderer Terraform runs),
    Helm hooks left as rendered: Terraform's helm provider links Helm 3 (v3.18.4), whose
    post-renderer is handed the release's manifests without its hooks (helm/helm v3.18.4
    ``pkg/action/action.go``, ``renderResources``: ``pr.Run`` on the manifests, the hooks sorted
    apart), so a hook's images reach the cluster as the chart renders them (lint reports each one
    outside the mirror). A template that is not YAML is kept as it is (parsing reports it).
    Without ``image_mirror``: ``manifests``."""
    if not image_mirror:
        return dict(manifests)
    from gpucluster.charts.imagemirror import rewrite_stream

    out = {}
    for path, text in manifests.items():
        try:
            out[path] = rewrite_stream(text, image_mirror, hooks=False)
        except yaml.YAMLError:
            out[path] = text
    return out


@dataclass
class RenderedRelease:
    """One rendered ``helm_release``.

    Attributes:
        cluster: cluster name; node: the PlanNode (release name = ``node.id``).
        chart: the chart folder rendered (an assembled copy when dependencies were added), or None.
        values: the values Helm received (values document + set entries), as Helm parsed them.
        manifests: template path -> rendered text (NOTES.txt and empty templates dropped).
        objects: ``(template path, object)`` of every rendered Kubernetes object, in template order.
        crd_files: ``(file name, text)`` of the chart's ``crds/`` folders (chart and subcharts);
            :attr:`crds` parses them (once per renderer).
        missing_subcharts: dependency aliases that could not be had (rendered disabled).
        stand_ins: what stood in at another version than the pinned one (:data:`STAND_IN`):
            ``<chart> <version>[, appVersion <v>,] for <pin>`` for the chart,
            ``subchart <alias> (<chart> <version> for <range>)`` for a subchart.
        disabled_conditions: the values paths set false to render without them.
        defaults: the chart's coalesced default values (subcharts under their names).
        image_mirror: the cluster's ``images.mirror``: :attr:`manifests` (and every re-render)
            carry the image references Helm's post-renderer gives the cluster
            (:func:`gpucluster.charts.imagemirror.rewrite_stream`); None: as the chart renders them.
    """

    cluster: str
    node: PlanNode
    chart: Path | None
    values: dict[str, Any] = field(default_factory=dict)
    manifests: dict[str, str] = field(default_factory=dict)
    objects: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    crd_files: list[tuple[str, str]] = field(default_factory=list)
    missing_subcharts: list[str] = field(default_factory=list)
    stand_ins: list[str] = field(default_factory=list)
    defaults: dict[str, Any] = field(default_factory=dict)
    disabled_conditions: list[str] = field(default_factory=list)
    renderer: Any = None
    capabilities: Capabilities | None = None
    image_mirror: str | None = None

    @property
    def name(self) -> str:
        return self.node.id

    @property
    def crds(self) -> list[tuple[str, dict[str, Any]]]:
        """``(file name, object)`` of every CRD in :attr:`crd_files` (parsed lazily, cached)."""
        if self.renderer is not None and self.chart is not None:
            return self.renderer.parsed_crds(self.chart, self.crd_files)
        return [
            (name, doc)
            for name, text in self.crd_files
            for doc in load_documents(text)
            if isinstance(doc, dict)
        ]

    def render_with(self, values: Mapping[str, Any], *, fresh: bool = False) -> dict[str, str]:
        """Re-render this chart with other values (same release name/namespace); used by lint's
        dead-value check. Missing subcharts stay disabled. ``fresh``: a new render even when the
        renderer remembers one for these values (to see which templates differ per render)."""
        vals = copy.deepcopy(dict(values))
        for path in self.disabled_conditions:
            set_path(vals, path, False)
        if self.chart is None:
            raise ValueError(f"release {self.node.id} has no chart to render")
        if self.renderer is not None and not fresh:
            out = self.renderer.render_chart(self.chart, vals, self.node, self.capabilities)
        else:
            out = _render_chart(self.chart, vals, self.node, self.capabilities)
        return post_render(out, self.image_mirror)


@dataclass
class RenderResult:
    """All rendered releases of the plans, and the findings of rendering them."""

    releases: list[RenderedRelease]
    findings: list[LintFinding]
    plans: list[RuntimePlan]
    renderer: Any = None


@dataclass(frozen=True)
class Capabilities:
    """Helm ``.Capabilities`` of one render: ``kube_version`` (``v1.34.0``) and the API versions
    (``apps/v1``, ``apps/v1/Deployment``, ...) Helm's ``Capabilities.APIVersions.Has`` sees."""

    kube_version: str = ""
    api_versions: tuple[str, ...] = ()


def kubernetes_api_versions(kube_version: str) -> tuple[str, ...]:
    """``group/version`` and ``group/version/Kind`` of every GA built-in kind of Kubernetes
    ``kube_version`` (``1.34``), from kubernetes-validate's schemas (``_definitions.json``
    ``x-kubernetes-group-version-kind``; versions ``v<N>`` only: beta APIs are not served by
    default, KEP-3136), plus ``apiregistration.k8s.io/v1`` (kube-aggregator's, served by every
    API server). Empty when no schemas exist for that minor."""
    import json as _json
    from importlib import resources

    minor = ".".join(str(kube_version).removeprefix("v").split(".")[:2])
    root = resources.files("kubernetes_validate").joinpath(
        "kubernetes-json-schema", f"v{minor}.0-local-strict"
    )
    try:
        defs = _json.loads(root.joinpath("_definitions.json").read_text(encoding="utf-8")).get(
            "$defs", {}
        )
    except (OSError, ValueError):
        return ()
    out: set[str] = {"apiregistration.k8s.io/v1", "apiregistration.k8s.io/v1/APIService"}
    for schema in defs.values():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            version, kind = str(gvk.get("version", "")), str(gvk.get("kind", ""))
            if (
                not re.fullmatch(r"v\d+", version)
                or kind.endswith("List")
                or kind in ("WatchEvent", "DeleteOptions", "Status")
            ):
                continue
            gv = f"{gvk['group']}/{version}" if gvk.get("group") else version
            out |= {gv, f"{gv}/{kind}"}
    return tuple(sorted(out))


def crd_api_versions(docs: Iterable[Any]) -> set[str]:
    """``group/version`` and ``group/version/Kind`` of every served version of the CRDs in ``docs``."""
    out: set[str] = set()
    for doc in docs:
        if not isinstance(doc, Mapping) or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc.get("spec") or {}
        kind = (spec.get("names") or {}).get("kind")
        for v in spec.get("versions") or []:
            if (
                isinstance(v, Mapping)
                and v.get("served", True)
                and spec.get("group")
                and v.get("name")
            ):
                out |= {f"{spec['group']}/{v['name']}", f"{spec['group']}/{v['name']}/{kind}"}
    return out


def helm_values(node: PlanNode) -> tuple[dict[str, Any], list[LintFinding]]:
    """The values Helm gets for ``node``: the values document (``values_yaml``, parsed by Helm's
    own YAML reader) with the ``set`` entries applied the way Helm applies them (``--set-string``
    for type ``string``, ``--set`` for ``auto``), each at its variable's default; the
    Terraform-computed entries (``node.variable_hashes``) at the value Terraform computes for the
    defaults (:func:`gpucluster.hashing.evaluate_variable_hash`)."""
    hp = helm()
    values = hp.values_from_yaml(values_yaml(node.values)) if node.values else {}
    findings = []
    for path, var_name, default, set_type in set_entries(node.values, node.terraform_variables):
        if default is None:
            findings.append(
                LintFinding(
                    "render.variable-required",
                    "info",
                    f"values path '{path}' comes from Terraform variable '{var_name}', which has no default: rendered without it",
                    fix="give it a value in the cluster file to render it",
                    component=node.component,
                    release=node.id,
                    key=path,
                )
            )
            continue
        text = ("true" if default else "false") if isinstance(default, bool) else str(default)
        parsed = (hp.parse_set_string_values if set_type == "string" else hp.parse_set_string)(
            f"{path}={text}"
        )
        values = deep_merge(values, parsed, keep_nulls=True)
    if getattr(node, "variable_hashes", None):
        from gpucluster.hashing import evaluate_variable_hash

        for path, vh in sorted(node.variable_hashes.items()):
            # the set entry Terraform computes (sha256(jsonencode([base, var...]))), at the variables' defaults
            values = deep_merge(
                values,
                hp.parse_set_string_values(f"{path}={evaluate_variable_hash(vh)}"),
                keep_nulls=True,
            )
    return values, findings


def _render_chart(
    path: Path, values: Mapping[str, Any], node: PlanNode, caps: Capabilities | None = None
) -> dict[str, str]:
    """Render the chart at ``path`` with a freshly loaded chart: Helm's value coalescing writes
    into the loaded chart's own default values (subchart maps), so a chart object reused for a
    second render would carry the first render's values. ``caps``: the target's capabilities
    (helm-python-sdk 0.2's ``Chart.render`` does not pass them; its native ``helm_render`` entry
    takes them as the ``kube_version`` / ``api_versions`` options, which extend Helm's defaults)."""
    with helm().Chart.load(str(path)) as handle:
        if caps is not None and (caps.kube_version or caps.api_versions):
            import json as _json

            from helm_python import _native
            from helm_python.chart import _dumps

            opts = {
                "name": node.id,
                "namespace": node.namespace,
                "is_install": True,
                "kube_version": caps.kube_version,
                "api_versions": list(caps.api_versions),
            }
            out = _json.loads(
                _native.call_string(
                    "helm_render", handle._raw(), _dumps(dict(values)), _json.dumps(opts)
                )
            )
        else:
            out = handle.render(
                dict(values), name=node.id, namespace=node.namespace, is_install=True
            )
    return {k: v for k, v in sorted(out.items()) if not k.endswith("NOTES.txt") and v.strip()}


_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """YAML loader for rendered manifests (libyaml when available): like ``SafeLoader`` but
    ``=`` and timestamps stay strings, as the API server reads them (JSON types only)."""


ManifestLoader.yaml_implicit_resolvers = {
    first: [
        (tag, rx)
        for tag, rx in resolvers
        if tag not in ("tag:yaml.org,2002:value", "tag:yaml.org,2002:timestamp")
    ]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


def split_documents(text: str) -> list[str]:
    """Split a rendered template into documents the way Helm does (pkg/release/util
    SplitManifests, regex ``(?:^|\\s*\\n)---\\s*``): a line starting with ``---`` starts a new
    document, the rest of that line included (``---# comment`` separates documents too)."""
    docs: list[list[str]] = [[]]
    for line in text.split("\n"):
        if line.startswith("---"):
            docs.append([line[3:]])
        else:
            docs[-1].append(line)
    return ["\n".join(d) for d in docs if "\n".join(d).strip()]


def load_documents(text: str) -> list[Any]:
    """The YAML documents of a rendered template, split the way Helm splits them."""
    return [yaml.load(part, Loader=ManifestLoader) for part in split_documents(text)]  # noqa: S506 (safe loader subclass)


def parse_objects(
    manifests: Mapping[str, str], cache: dict[str, list[Any]] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Every object of every rendered template (``List`` kinds expanded), in template order.

    ``cache`` (template text -> parsed documents) avoids parsing the same text twice (CRD
    templates render identically for every cluster); cached objects are shared: read-only.
    """
    out: list[tuple[str, dict[str, Any]]] = []
    for path, text in manifests.items():
        docs = None if cache is None else cache.get(text)
        if docs is None:
            docs = load_documents(text)
            if cache is not None:
                cache[text] = docs
        for doc in docs:
            if (
                isinstance(doc, dict)
                and doc.get("kind") == "List"
                and isinstance(doc.get("items"), list)
            ):
                out += [(path, d) for d in doc["items"] if isinstance(d, dict)]
            elif isinstance(doc, dict):
                out.append((path, doc))
    return out


def _present_subcharts(chart: ChartDir) -> set[str]:
    names = set()
    sub = chart.path / "charts"
    if sub.is_dir():
        for child in sub.iterdir():
            found = read_chart_dir(child) if child.is_dir() else None
            if found is not None:
                names.add(found.name)
            elif child.suffix == ".tgz":
                names.add(child.name.rsplit("-", 1)[0])
    return names


def _assemble(chart: ChartDir, extra: Mapping[str, ChartDir], workdir: Path) -> Path:
    """A copy of ``chart`` whose ``charts/`` also holds the ``extra`` dependencies (made once
    per chart and dependency set; copies, not links: Helm logs every link it follows)."""
    import hashlib

    tag = hashlib.sha256(
        repr(
            (
                str(chart.path.resolve()),
                sorted((n, str(d.path.resolve())) for n, d in extra.items()),
            )
        ).encode()
    ).hexdigest()[:16]
    target = workdir / "assembled" / f"{chart.path.name}-{tag}"
    if target.exists():
        return target
    staging = workdir / "assembled" / f".{target.name}.tmp"
    shutil.copytree(chart.path, staging, symlinks=False)
    (staging / "charts").mkdir(exist_ok=True)
    for name, dep in sorted(extra.items()):
        if not (staging / "charts" / name).exists():
            shutil.copytree(dep.path, staging / "charts" / name, symlinks=False)
    os.replace(staging, target)
    return target


class Renderer:
    """Renders plan nodes; keeps loaded charts for re-renders (use as a context manager, or
    call :meth:`close`: local charts are written to a temporary folder)."""

    def __init__(
        self,
        sources: ChartSources,
        *,
        allow_missing: Iterable[str] = (),
        require_charts: bool = False,
        allow_nearest: Iterable[str] = (),
    ):
        self.sources = sources
        self.allow_missing = set(allow_missing)
        self.allow_nearest = set(allow_nearest)
        self.require_charts = require_charts
        self._tmp = Path(tempfile.mkdtemp(prefix="gpucluster-render-"))
        self._crds: dict[Path, list[tuple[str, dict[str, Any]]]] = {}
        self._crd_files: dict[Path, list[tuple[str, str]]] = {}
        self._parsed: dict[str, list[Any]] = {}
        self._defaults: dict[Path, dict[str, Any]] = {}
        self.schema_memo: dict[int, tuple[Any, str, list[str], list[str]]] = {}
        self._rendered: dict[tuple[str, str, str, str, Capabilities | None], dict[str, str]] = {}
        """lint's schema results of shared (parse-cached) objects, for this renderer's lifetime."""

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def render_chart(
        self,
        path: Path,
        values: Mapping[str, Any],
        node: PlanNode,
        caps: Capabilities | None = None,
    ) -> dict[str, str]:
        """:func:`_render_chart`, remembered per (chart, values, release name, namespace): the same
        inputs render the same templates (charts drawing random data -- certificates, passwords --
        then repeat one draw, which changes nothing the checks look at). Returned mappings are
        shared: read-only."""
        import json

        key = (
            str(path),
            node.id,
            node.namespace,
            json.dumps(values, sort_keys=True, default=str),
            caps,
        )
        if key not in self._rendered:
            self._rendered[key] = _render_chart(path, values, node, caps)
        return self._rendered[key]

    def chart_defaults(self, path: Path) -> dict[str, Any]:
        """The chart's default values coalesced with its subcharts' (under each alias), disabled
        subcharts included (Helm leaves those out; their values are still declared keys)."""
        if path not in self._defaults:
            with helm().Chart.load(str(path)) as handle:
                defaults = handle.merge_values({})
            meta = read_chart_dir(path)
            aliases = {
                str(d["name"]): str(d.get("alias") or d["name"])
                for d in (meta.dependencies if meta else ())
            }
            sub = path / "charts"
            for child in sorted(sub.iterdir()) if sub.is_dir() else []:
                found = read_chart_dir(child) if child.is_dir() else None
                if found is None or not (child / "values.yaml").is_file():
                    continue
                alias = aliases.get(found.name, found.name)
                try:
                    own = (
                        yaml.load(
                            (child / "values.yaml").read_text(encoding="utf-8"),
                            Loader=ManifestLoader,
                        )
                        or {}
                    )
                except yaml.YAMLError:
                    continue
                if isinstance(own, dict):
                    defaults[alias] = deep_merge(own, defaults.get(alias) or {}, keep_nulls=True)
            self._defaults[path] = defaults
        return copy.deepcopy(self._defaults[path])

    def chart_crd_files(self, path: Path) -> list[tuple[str, str]]:
        """``(file name, text)`` of the ``crds/`` files of the chart at ``path`` (read once)."""
        if path not in self._crd_files:
            with helm().Chart.load(str(path)) as handle:
                crds = handle.crds
            self._crd_files[path] = [
                (c.get("filename") or c.get("name", ""), c.get("data", "")) for c in crds
            ]
        return self._crd_files[path]

    def parsed_crds(
        self, path: Path, files: list[tuple[str, str]]
    ) -> list[tuple[str, dict[str, Any]]]:
        """The CRD objects of ``files`` (of the chart at ``path``), parsed once per renderer."""
        if path not in self._crds:
            self._crds[path] = [
                (name, doc)
                for name, text in files
                for doc in load_documents(text)
                if isinstance(doc, dict)
            ]
        return self._crds[path]

    def _missing_severity(self, name: str) -> str:
        """``warning`` (reported as not checked), or ``error`` with ``require_charts`` unless
        ``name`` is in ``allow_missing``."""
        return "error" if self.require_charts and name not in self.allow_missing else "warning"

    def _stand_in_finding(
        self, name: str, note: str, severity: str, where: dict[str, Any]
    ) -> LintFinding:
        """``render.chart-nearest`` for a chart or subchart ``name`` rendered from a stand-in:
        ``severity`` (warning, or info for an appVersion or folder-name match), or ``error`` with
        ``require_charts`` unless ``name`` is in ``allow_nearest`` or ``allow_missing`` (a chart
        that may be absent may also stand in at another version)."""
        required = self.require_charts and not ({name} & (self.allow_nearest | self.allow_missing))
        return LintFinding(
            "render.chart-nearest",
            "error" if required else severity,
            note
            + "; findings refer to that chart"
            + ("; the pinned version is not checked (--require-charts)" if required else ""),
            fix="add the pinned version to the chart sources"
            + (f", or allow the stand-in with --allow-nearest {name}" if required else ""),
            **where,
        )

    def _node_chart(
        self,
        node: PlanNode,
        where: dict[str, Any],
        findings: list[LintFinding],
        stand_ins: list[str],
    ) -> ChartDir | None:
        """The chart of ``node`` (located, or the generated one written out), or None with a
        finding; a stand-in at another version is added to ``stand_ins``."""
        if node.kind == "chart":
            located = self.sources.locate(node.repository, node.chart, node.version)
            if located.chart is None:
                sev = self._missing_severity(node.component)
                detail = f" ({located.note})" if located.note else ""
                findings.append(
                    LintFinding(
                        "render.chart-unavailable",
                        sev,
                        f"chart {node.chart} {node.version} from {node.repository} is not in the chart sources{detail}: "
                        "release not rendered, not checked" + _unverified(node.component),
                        fix=HOW_TO_GET,
                        **where,
                    )
                )
                return None
            if located.how in STAND_IN:
                chart = located.chart
                how = {
                    "app-version": f", appVersion {chart.app_version},",
                    "folder": f", folder {chart.path.name},",
                }.get(located.how, "")
                stand_ins.append(f"{chart.name} {chart.version}{how} for {node.version}")
                findings.append(
                    self._stand_in_finding(
                        node.component,
                        located.note,
                        "warning" if located.how == "nearest" else "info",
                        where,
                    )
                )
            return located.chart
        else:
            digest = node.local_chart.content_hash[:32] if node.local_chart else "none"
            folder = (
                self._tmp / "local" / f"{_safe_segment(node.id)}-{_safe_segment(digest)}"
            )  # one folder per content
            if not folder.exists():
                for rel, text in sorted(
                    (node.local_chart.files if node.local_chart else {}).items()
                ):
                    target = folder / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(text, encoding="utf-8")
            generated = read_chart_dir(folder)
            if generated is None:
                findings.append(
                    LintFinding(
                        "render.local-chart-invalid",
                        "error",
                        "the generated chart has no readable Chart.yaml",
                        fix="report this as a gpucluster bug",
                        **where,
                    )
                )
                return None
            return generated

    def _resolve_dependencies(
        self,
        chart: ChartDir,
        values: dict[str, Any],
        where: dict[str, Any],
        findings: list[LintFinding],
        stand_ins: list[str],
    ) -> tuple[dict[str, ChartDir], list[str], list[str]]:
        """The ``(extra, disabled, missing)`` subcharts of ``chart``, with findings for missing
        ones and for stand-ins at another version (those added to ``stand_ins``)."""
        present = _present_subcharts(chart)
        coalesced: dict[str, Any] | None = None
        extra: dict[str, ChartDir] = {}
        disabled: list[str] = []
        missing: list[str] = []
        for dep in chart.dependencies:
            name = str(dep["name"])
            alias = str(dep.get("alias") or name)
            if name in present:
                continue
            located = self.sources.locate_dependency(dep)
            found = located.chart
            if found is not None:
                extra[name] = found
                if located.how in STAND_IN:
                    version = dep.get("version", "")
                    stand_ins.append(
                        f"subchart {alias} ({found.name} {found.version} for {version})"
                    )
                    findings.append(
                        self._stand_in_finding(
                            alias,
                            f"{located.note}, in chart {chart.name} {chart.version} (values under '{alias}')",
                            "warning",
                            where,
                        )
                    )
                continue
            condition = str(dep.get("condition") or "").split(",")[0].strip()
            if condition and coalesced is None:
                with helm().Chart.load(str(chart.path)) as handle:
                    coalesced = handle.merge_values(values)
            enabled = bool(get_path(coalesced or {}, condition, True)) if condition else True
            if condition and not enabled:
                continue  # disabled: Helm would not render it either
            missing.append(alias)
            if condition:
                disabled.append(condition)
            findings.append(
                LintFinding(
                    "render.subchart-unavailable",
                    self._missing_severity(alias),
                    f"dependency {name} {dep.get('version', '')} of chart {chart.name} {chart.version} is neither in the chart's "
                    f"charts/ folder nor in the chart sources: rendered with {condition or 'it'} off, so its objects and the values "
                    f"under '{alias}' are not checked",
                    fix=f"put {name} {dep.get('version', '')} into the chart's charts/ folder (a chart package from its "
                    "repository carries it), or unpack it into a --charts folder",
                    **where,
                )
            )
        return extra, disabled, missing

    def render_node(
        self,
        cluster: str,
        node: PlanNode,
        caps: Capabilities | None = None,
        image_mirror: str | None = None,
    ) -> tuple[RenderedRelease, list[LintFinding]]:
        """Render one release (see module docstring) with ``caps`` (its own chart's CRDs are
        added to them), its image references at ``image_mirror`` when given (:func:`post_render`).
        Findings name what could not be had."""
        findings: list[LintFinding] = []
        where: dict[str, Any] = dict(cluster=cluster, component=node.component, release=node.id)
        stand_ins: list[str] = []
        chart = self._node_chart(node, where, findings, stand_ins)
        if chart is None:
            return RenderedRelease(cluster, node, None), findings
        values, value_findings = helm_values(node)
        findings += value_findings
        extra, disabled, missing = self._resolve_dependencies(
            chart, values, where, findings, stand_ins
        )
        path = _assemble(chart, extra, self._tmp) if extra else chart.path
        try:  # Helm's loader refuses what no install could use (a values.yaml of excessive aliasing)
            crd_files, defaults = self.chart_crd_files(path), self.chart_defaults(path)
        except helm().HelmError as exc:
            findings.append(
                LintFinding(
                    "render.chart-unreadable",
                    "error",
                    f"Helm cannot load chart {chart.name} {chart.version} ({chart.path}): "
                    f"{' '.join(str(exc).split())}; release not rendered, not checked",
                    fix="use the chart as its repository publishes it (gpucluster charts pull "
                    "--refresh), or correct the chart folder",
                    **where,
                )
            )
            return RenderedRelease(cluster, node, None), findings  # not checked at all
        render_values = copy.deepcopy(values)
        for cond in disabled:
            set_path(render_values, cond, False)
        if caps is not None:
            own = crd_api_versions(doc for _, doc in self.parsed_crds(path, crd_files))
            caps = Capabilities(caps.kube_version, tuple(sorted(set(caps.api_versions) | own)))
        release = RenderedRelease(
            cluster,
            node,
            path,
            values=values,
            missing_subcharts=missing,
            stand_ins=stand_ins,
            disabled_conditions=disabled,
            renderer=self,
            capabilities=caps,
            image_mirror=image_mirror,
        )
        try:
            release.manifests = post_render(
                self.render_chart(path, render_values, node, caps), image_mirror
            )
        except Exception as exc:  # HelmError: the chart refused the values
            findings.append(
                LintFinding(
                    "render.failed",
                    "error",
                    f"Helm could not render the chart: {' '.join(str(exc).split())}",
                    fix="fix the value the message names (catalog or overrides)",
                    **where,
                )
            )
            return release, findings
        try:
            release.objects = parse_objects(release.manifests, self._parsed)
        except yaml.YAMLError as exc:
            findings.append(
                LintFinding(
                    "render.invalid-yaml",
                    "error",
                    f"a rendered template is not YAML: {' '.join(str(exc).split())}",
                    fix="fix the value or template that produced it",
                    **where,
                )
            )
        release.crd_files = crd_files
        release.defaults = defaults
        return release, findings


def render_plans(
    plans: Sequence[RuntimePlan],
    sources: ChartSources,
    *,
    allow_missing: Iterable[str] = (),
    require_charts: bool = False,
    allow_nearest: Iterable[str] = (),
    renderer: Renderer | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> RenderResult:
    """Render every release of every plan (plan order).

    The caller closes ``renderer`` when it passes one; otherwise a fresh one is made and kept
    open for lint's re-renders: close it with ``result.renderer.close()``. ``progress`` is
    called before each release is rendered with ``(number, total, "<cluster>/<release>")``
    (number from 1; total: the releases of all ``plans``). A renderer made here is closed
    (its temporary folder removed) when rendering ends in an exception or a stop signal
    (``KeyboardInterrupt``)."""
    own = renderer or Renderer(
        sources,
        allow_missing=allow_missing,
        require_charts=require_charts,
        allow_nearest=allow_nearest,
    )
    try:
        return _render_plans(plans, own, progress)
    except BaseException:
        if renderer is None:
            own.close()
        raise


def _render_plans(
    plans: Sequence[RuntimePlan],
    own: Renderer,
    progress: Callable[[int, int, str], None] | None,
) -> RenderResult:
    """:func:`render_plans` with its renderer ``own``."""
    releases: list[RenderedRelease] = []
    findings: list[LintFinding] = []
    total = sum(len(plan.nodes) for plan in plans)
    for plan in plans:
        builtin = kubernetes_api_versions(plan.cluster.kubernetes_version)
        kube = f"v{'.'.join((plan.cluster.kubernetes_version.removeprefix('v').split('.') + ['0', '0'])[:3])}"
        by_id = {n.id: n for n in plan.nodes}
        done: dict[str, RenderedRelease] = {}

        def ancestors(node_id: str, seen: set[str]) -> set[str]:
            for dep in by_id[node_id].depends_on if node_id in by_id else ():
                if dep not in seen:
                    seen.add(dep)
                    ancestors(dep, seen)
            return seen

        def render(node: PlanNode) -> None:
            if node.id in done:
                return
            for dep in node.depends_on:
                if dep in by_id:
                    render(by_id[dep])
            crds: set[str] = set()
            for dep in sorted(ancestors(node.id, set())):
                rel = done.get(dep)
                if rel is not None:
                    crds |= crd_api_versions(doc for _, doc in rel.objects)
                    crds |= crd_api_versions(doc for _, doc in rel.crds)
            caps = Capabilities(kube, tuple(sorted(set(builtin) | crds)))
            if progress is not None:
                progress(len(releases) + len(done) + 1, total, f"{plan.cluster.name}/{node.id}")
            release, f = own.render_node(
                plan.cluster.name, node, caps, getattr(plan.cluster, "image_mirror", None)
            )
            done[node.id] = release
            findings.extend(f)

        for node in plan.nodes:
            render(node)
        releases += [done[n.id] for n in plan.nodes]
    return RenderResult(
        releases=releases, findings=sort_findings(findings), plans=list(plans), renderer=own
    )


def unverified(result: RenderResult) -> list[str]:
    """What was not rendered or checked because a chart could not be had, in release order:
    ``<cluster>/<release>`` for a chart, ``<cluster>/<release> subcharts a, b`` for subcharts."""
    out = []
    for release in result.releases:
        if release.node.kind == "chart" and release.chart is None:
            out.append(f"{release.cluster}/{release.name}")
        elif release.missing_subcharts:
            out.append(
                f"{release.cluster}/{release.name} subcharts {', '.join(release.missing_subcharts)}"
            )
    return out


def stand_ins(result: RenderResult) -> list[str]:
    """What was checked against another version than the pinned one, in release order:
    ``<cluster>/<release> (<chart> <version> for <pin>)`` for a chart,
    ``<cluster>/<release> subchart <alias> (<chart> <version> for <range>)`` for a subchart
    (:attr:`RenderedRelease.stand_ins`)."""
    out = []
    for release in result.releases:
        for what in release.stand_ins:
            head = f"{release.cluster}/{release.name}"
            out.append(f"{head} {what}" if what.startswith("subchart ") else f"{head} ({what})")
    return out


# --------------------------------------------------------------------------- output folder


def _unverified(component: str) -> str:
    """``; its values were never rendered with a real chart ...`` for a component whose registry
    entry has no ``chartVersions`` (nvsentinel, dynamo-platform), '' otherwise."""
    try:
        from gpucluster.recipes.catalog import load_catalog

        entry = load_catalog().components.get(component)
    except Exception:  # noqa: BLE001 - a message detail only
        return ""
    if entry is None or entry.chart_versions or entry.type != "Helm":
        return ""
    return (
        f"; gpucluster's values for '{component}' were never rendered with a real chart of any version "
        "(unverified: docs/catalog-sources.md)"
    )


def _safe_segment(name: str) -> str:
    seg = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return "_" if seg in ("", ".", "..") else seg


def check_output_folder(out: Path) -> None:
    """Refuse ``--out`` unless it is absent, empty or an earlier render output
    (:func:`gpucluster.outfolder.check_replaceable`); ``gpucluster render`` calls it before
    rendering, :func:`write_output` again before the swap.

    Raises:
        GpuclusterError: ``error[outdir] key=--out`` (one line); nothing was touched.
    """
    from gpucluster.outfolder import check_replaceable

    check_replaceable(
        out, kind="render", key="--out", fix_elsewhere="render elsewhere (--out NEW_FOLDER)"
    )


def write_output(result: RenderResult, out: Path) -> None:
    """Write ``<out>/<cluster>/<release>/`` per release: ``values.yaml`` (what Helm received),
    the rendered templates under their chart paths, and the chart's CRDs under ``crds/``; and the
    ``.gpucluster-output`` marker at the top (:mod:`gpucluster.outfolder`).

    Only a folder that is ours is replaced (absent, empty, marked, or an earlier render's
    ``<cluster>/<release>/values.yaml`` layout: :func:`gpucluster.outfolder.check_replaceable`).
    The folder is built beside ``out`` and swapped in with one rename, so ``out`` is either the
    previous result or the complete new one, never half-written; a failed write removes what it
    staged.

    Raises:
        GpuclusterError: ``error[outdir]`` when ``out`` is not an earlier output nor empty;
            ``out`` exists and is not a folder, or cannot be written.
    """
    from gpucluster.outfolder import write_marker

    out = Path(out)
    check_output_folder(out)
    if out.exists() and not out.is_dir():
        raise GpuclusterError(
            f"output '{out}' exists and is not a folder",
            key="--out",
            fix="name a folder (it is replaced)",
        )
    tmp = old = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        for release in result.releases:
            folder = tmp / _safe_segment(release.cluster) / _safe_segment(release.name)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "values.yaml").write_text(values_yaml(release.values), encoding="utf-8")
            for path, text in release.manifests.items():
                parts = [_safe_segment(p) for p in path.split("/")]
                target = folder.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            for name, text in release.crd_files:
                target = folder / "crds" / _safe_segment(Path(name).name or "crd.yaml")
                target.parent.mkdir(parents=True, exist_ok=True)
                with target.open("a", encoding="utf-8") as fh:
                    fh.write(text if text.endswith("\n") else text + "\n")
        write_marker(tmp)
        check_output_folder(out)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / "x")
            try:
                os.replace(tmp, out)
            except OSError:
                os.replace(
                    old / "x", out
                )  # the previous output back in place before ``old`` is removed
                raise
        else:
            os.replace(tmp, out)
        tmp = None
    except (OSError, ValueError) as exc:
        raise GpuclusterError(
            f"cannot write the rendered releases to '{out}': {getattr(exc, 'strerror', None) or exc}",
            key="--out",
            id="output",
            fix="choose a writable folder",
        ) from None
    finally:
        for leftover in (tmp, old):
            if leftover is not None:
                shutil.rmtree(leftover, ignore_errors=True)


def iter_objects(
    releases: Iterable[RenderedRelease],
) -> Iterator[tuple[RenderedRelease, str, dict[str, Any]]]:
    """``(release, template path, object)`` over rendered releases."""
    for release in releases:
        for path, doc in release.objects:
            yield release, path, doc


def values_path_segments(path: str) -> list[str]:
    """Dotted values path -> segments (backslash-escaped dots kept inside a key)."""
    return split_path(path)

"""``gpucluster images``: every container image the runtime stack runs, from what is really rendered.

Pure Python, no cdktf. The input is a :class:`gpucluster.lint.render.RenderResult` (the charts at
their pinned versions from the chart sources ``render`` and ``lint`` read, with gpucluster's
values, plus gpucluster's generated manifest, gate and teardown charts); nothing is rendered a
second way. Where an image comes from (:attr:`Image.sources`):

``chart render``
    a container of a pod template (Deployment, DaemonSet, StatefulSet, Job, CronJob, Pod, ...)
    rendered from an upstream chart. Helm test hooks (``helm.sh/hook: test``) are left out:
    Terraform's ``helm_release`` never runs ``helm test``.
``our manifest``
    the same, in a chart gpucluster generates (manifests, readiness gates, teardown Jobs).
``CR operand``
    an image a custom resource we render names for its operator to start: every mapping of the
    object with an ``image`` and a ``repository`` or ``version`` (the GPU Operator's ClusterPolicy,
    the Network Operator's NicClusterPolicy, NodeWright/Skyhook packages). The reference is put
    together as the operators do (GPU Operator ``ImagePath``, public source:
    https://github.com/NVIDIA/gpu-operator/blob/main/internal/image/image.go): ``repository/image:version``,
    ``repository/image@version`` for a ``sha256:`` version, ``image`` alone when it is a full
    reference; a ``containerSHA`` (NodeWright) is added as the digest. A component with
    ``enabled: false`` is skipped with everything below it, and so are the ClusterPolicy's sandbox
    components (:data:`SANDBOX_COMPONENTS`) while ``sandboxWorkloads.enabled`` is false.
``operator default``
    an environment variable named ``*_IMAGE`` of a rendered container whose value is an image
    reference: the image an operator starts when its custom resource leaves it out (the GPU
    Operator's ``VALIDATOR_IMAGE``, the Network Operator's ``OFED_INIT_CONTAINER_IMAGE``, SR-IOV's
    ``SRIOV_CNI_IMAGE``, NodeWright's ``AGENT_IMAGE``, ...), from the chart of that operator version.

Driver containers are tagged per node OS by their operators: the GPU Operator adds ``-<ID><VERSION_ID>``
of the node's ``/etc/os-release`` (``595.91.07-ubuntu24.04``) to the ``driver``, ``vgpuManager``,
``gds`` and ``gdrcopy`` images; the Network Operator adds ``-<ID><VERSION_ID>-<arch>`` to
``ofedDriver`` (DOCA driver). One reference per node OS is listed (``node_os``; default
:data:`DEFAULT_NODE_OS` of ``criteria.os``); a precompiled GPU driver (``usePrecompiled: true``) is
tagged per kernel too and cannot be listed: it is named in :attr:`Inventory.unlisted`.

An image is ``moving`` when it has no digest and its tag is missing or names no version (no digit:
``latest``, ``stable``, ``main``): what it pulls changes without any edit of ours.

Output forms (:func:`render_text`, :func:`render_json`, :func:`hauler_documents`,
:func:`zarf_document`); the Hauler and Zarf forms are validated against ``schemas/hauler-v1.schema.json``
and ``schemas/zarf-package.schema.json`` (the fields those tools document; see each schema's
``description`` for its public source) before they are printed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpucluster.charts.imagemirror import (
    _DIGEST,
    Ref,
    is_custom,
    is_test_hook,
    parse_reference,
    pod_spec,
)
from gpucluster.lint.render import STAND_IN, RenderedRelease, RenderResult
from gpucluster.model import RuntimePlan

SOURCES = ("chart render", "our manifest", "CR operand", "operator default")
"""Where an image is named, in this order of preference (:attr:`Image.sources`)."""

SANDBOX_COMPONENTS = frozenset(
    {
        "vgpuManager",
        "vgpuDeviceManager",
        "vfioManager",
        "kataManager",
        "ccManager",
        "sandboxDevicePlugin",
        "kataSandboxDevicePlugin",
    }
)
"""ClusterPolicy components the GPU Operator deploys only with ``sandboxWorkloads.enabled: true``
(public source: NVIDIA GPU Operator docs, "GPU Operator with KubeVirt" / "Kata Containers")."""

OS_TAGGED = {
    ("ClusterPolicy", "driver"): False,
    ("ClusterPolicy", "vgpuManager"): False,
    ("ClusterPolicy", "gds"): False,
    ("ClusterPolicy", "gdrcopy"): False,
    ("NicClusterPolicy", "ofedDriver"): True,
}
"""``(kind, top-level spec key)`` -> whether the tag also carries the CPU architecture: the
components whose image tag the operator completes per node OS (module docstring)."""

DEFAULT_NODE_OS = {"ubuntu": ("ubuntu22.04", "ubuntu24.04")}
"""``criteria.os`` -> the node OS tags listed for per-OS driver images when ``--node-os`` is not
given (AKS, NVKE and OKE Ubuntu node images are 22.04 or 24.04 depending on the Kubernetes
version and node image; listing both is what a mirror of either needs)."""

ARM64_ACCELERATORS = frozenset({"gb200", "gb300", "gh200"})
"""Accelerators on Grace (arm64) hosts; other GPU nodes are amd64."""


def moving(ref: Ref) -> bool:
    """True when ``ref`` has no digest and no tag naming a version (no tag, or one without a digit)."""
    return ref.digest is None and not (ref.tag and any(c.isdigit() for c in ref.tag))


@dataclass
class Image:
    """One image of a cluster's inventory (JSON: :meth:`to_json`).

    Attributes:
        ref: the parsed reference; releases: the releases whose objects name it (sorted);
        sources: where it is named (:data:`SOURCES` order); where: ``<release>: <kind>/<name> <path>``
            of each place (sorted, for the curious and for the rig's comparison);
        note: why the tag is what it is (per-OS driver tags), '' otherwise.
    """

    ref: Ref
    releases: set[str] = field(default_factory=set)
    sources: set[str] = field(default_factory=set)
    where: set[str] = field(default_factory=set)
    note: str = ""
    mirror: str | None = None

    @property
    def moving(self) -> bool:
        return moving(self.ref)

    @property
    def upstream(self) -> str:
        """Where the image is copied from: with ``images.mirror`` the reference without the
        ``<mirror>/`` prefix (:mod:`gpucluster.charts.imagemirror`'s mapping read backwards),
        else the reference itself."""
        text = self.ref.reference
        if self.mirror and text.startswith(self.mirror + "/"):
            return text[len(self.mirror) + 1 :]
        return text

    def to_json(self) -> dict[str, Any]:
        """``{reference, upstream, registry, repository, tag, digest, releases, sources, moving,
        note}`` (``reference``: what the cluster pulls; ``upstream``: where it is copied from)."""
        return {
            "reference": self.ref.reference,
            "upstream": self.upstream,
            "registry": self.ref.registry,
            "repository": self.ref.repository,
            "tag": self.ref.tag,
            "digest": self.ref.digest,
            "releases": sorted(self.releases),
            "sources": [s for s in SOURCES if s in self.sources],
            "moving": self.moving,
            "note": self.note,
        }


@dataclass(frozen=True)
class Chart:
    """An upstream chart a cluster's runtime stack installs (``repository`` as Terraform fetches it)."""

    name: str
    version: str
    repository: str
    releases: tuple[str, ...]


@dataclass
class Inventory:
    """Everything one cluster's runtime stack pulls.

    Attributes:
        cluster: the cluster's name; images: sorted by reference; charts: sorted by name, version;
        not_rendered: ``<release>`` (or ``<release> subcharts a, b``) whose images are not known
            because its chart could not be had: the inventory is incomplete while non-empty;
        unlisted: one line per image that exists but cannot be named here (and why).
        stand_ins: ``<release>: <note>`` for each release rendered from a chart of another
            version standing in for the pinned one (``render.chart-nearest``): its images are
            that chart's, not necessarily the ones the deploy pulls, so the inventory is
            incomplete while non-empty.
    """

    cluster: str
    images: list[Image]
    charts: list[Chart]
    not_rendered: list[str]
    unlisted: list[str]
    stand_ins: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.not_rendered and not self.unlisted and not self.stand_ins

    def counts(self) -> dict[str, int]:
        """``{images, digest, tagOnly, moving}``: digest = pinned by digest, tagOnly = tag without
        digest (moving ones included)."""
        digest = sum(1 for i in self.images if i.ref.digest)
        return {
            "images": len(self.images),
            "digest": digest,
            "tagOnly": len(self.images) - digest,
            "moving": sum(1 for i in self.images if i.moving),
        }


# --------------------------------------------------------------------------- collection


def _pod_spec(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return pod_spec(doc)


def _object_name(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
    return f"{doc.get('kind')}/{(meta or {}).get('name')}"


def _is_test_hook(doc: Mapping[str, Any]) -> bool:
    return is_test_hook(doc)


def _containers(pod: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for c in pod.get(group) or []:
            if isinstance(c, Mapping):
                yield f"{group}[{c.get('name')}]", c


def _compose(spec: Mapping[str, Any]) -> str:
    """The reference an operator pulls for one CR component (module docstring)."""
    image = str(spec.get("image") or "").strip()
    repository = str(spec.get("repository") or "").strip().rstrip("/")
    version = str(spec.get("version") or "").strip()
    own = parse_reference(image)
    if not repository and (not version or (own is not None and (own.tag or own.digest))):
        text = image  # a full reference (Prometheus, Alertmanager: image wins over version)
    else:
        base = f"{repository}/{image}" if repository else image
        text = f"{base}@{version}" if version.startswith("sha256:") else f"{base}:{version}"
    sha = str(spec.get("containerSHA") or "").strip()
    if _DIGEST.match(sha) and "@" not in text:
        text = f"{text}@{sha}"
    return text


def _compose_parts(image: Mapping[str, Any]) -> str:
    """An ``image: {repository, name, tag, digest}`` mapping (KAI Scheduler's Config, many charts'
    values shape) as a reference: ``repository[/name][:tag][@digest]``."""
    text = str(image.get("repository") or "").strip().rstrip("/")
    name = str(image.get("name") or "").strip()
    if name:
        text = f"{text}/{name}"
    tag = str(image.get("tag") or "").strip()
    if tag:
        text = f"{text}:{tag}"
    digest = str(image.get("digest") or "").strip()
    if _DIGEST.match(digest):
        text = f"{text}@{digest}"
    return text


def _enabled(spec: Mapping[str, Any]) -> bool:
    value = spec.get("enabled", True)
    return not (value is False or str(value).lower() == "false")


def cr_operands(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    """``(spec path, reference text, top-level spec key)`` of every operand image a custom
    resource names (module docstring: ``CR operand``)."""
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        return
    kind = str(doc.get("kind"))
    sandbox = spec.get("sandboxWorkloads")
    sandbox_on = isinstance(sandbox, Mapping) and _enabled(sandbox) and "enabled" in sandbox

    def walk(node: Any, path: tuple[str, ...]) -> Iterator[tuple[str, str, str]]:
        if isinstance(node, Mapping):
            if not _enabled(node):
                return
            if kind == "ClusterPolicy" and len(path) == 1 and path[0] in SANDBOX_COMPONENTS:
                if not sandbox_on:
                    return
            image = node.get("image")
            if isinstance(image, str) and image and ("repository" in node or "version" in node):
                yield ".".join(("spec", *path)), _compose(node), path[0] if path else ""
            elif isinstance(image, Mapping) and image.get("repository") and _enabled(image):
                yield (
                    ".".join(("spec", *path, "image")),
                    _compose_parts(image),
                    path[0] if path else "",
                )
            for key, value in node.items():
                if key != "image":
                    yield from walk(value, (*path, str(key)))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                yield from walk(item, (*path, str(i)))

    yield from walk(spec, ())


def _is_custom(doc: Mapping[str, Any]) -> bool:
    return is_custom(doc)


def node_os_tags(plan: RuntimePlan, node_os: Sequence[str] = ()) -> tuple[str, ...]:
    """The node OS tags per-OS driver images are listed for: ``node_os`` when given, else
    :data:`DEFAULT_NODE_OS` of the cluster's ``criteria.os`` (empty when it has none)."""
    if node_os:
        return tuple(dict.fromkeys(node_os))
    return DEFAULT_NODE_OS.get(str(plan.cluster.criteria.os), ())


def node_arch(plan: RuntimePlan) -> str:
    """``arm64`` for Grace GPU nodes (:data:`ARM64_ACCELERATORS`), else ``amd64``."""
    return "arm64" if str(plan.cluster.criteria.accelerator) in ARM64_ACCELERATORS else "amd64"


class _Collector:
    def __init__(self, plan: RuntimePlan, node_os: Sequence[str]) -> None:
        self.plan = plan
        self.os_tags = node_os_tags(plan, node_os)
        self.arch = node_arch(plan)
        self.images: dict[str, Image] = {}
        self.unlisted: list[str] = []

    def add(
        self, text: str, release: RenderedRelease, source: str, where: str, note: str = ""
    ) -> None:
        ref = parse_reference(text)
        if ref is None:
            self.unlisted.append(
                f"{release.name}: {where} names '{text}', which is not an image reference"
            )
            return
        mirror = getattr(self.plan.cluster, "image_mirror", None)
        image = self.images.setdefault(ref.reference, Image(ref, note=note, mirror=mirror))
        image.releases.add(release.name)
        image.sources.add(source)
        image.where.add(f"{release.name}: {where}")

    def per_os(self, text: str, release: RenderedRelease, where: str, with_arch: bool) -> None:
        ref = parse_reference(text)
        if ref is None or ref.digest:
            self.add(text, release, "CR operand", where)
            return
        if not self.os_tags:
            self.unlisted.append(
                f"{release.name}: {where} '{text}' is tagged per node OS by its operator, and no node OS is "
                f"known for criteria.os={self.plan.cluster.criteria.os}: give --node-os"
            )
            return
        for os_tag in self.os_tags:
            suffix = f"-{os_tag}" + (f"-{self.arch}" if with_arch else "")
            self.add(
                f"{text}{suffix}",
                release,
                "CR operand",
                where,
                note=f"tag completed by the operator for node OS {os_tag}"
                + (f" ({self.arch})" if with_arch else ""),
            )

    def release(self, release: RenderedRelease) -> None:
        source = "chart render" if release.node.kind == "chart" else "our manifest"
        for _template, doc in release.objects:
            if not isinstance(doc, Mapping) or _is_test_hook(doc):
                continue
            name = _object_name(doc)
            pod = _pod_spec(doc)
            if pod is not None:
                for slot, c in _containers(pod):
                    self.add(str(c.get("image") or ""), release, source, f"{name} {slot}")
                    for env in c.get("env") or []:
                        if not isinstance(env, Mapping):
                            continue
                        key, value = str(env.get("name") or ""), env.get("value")
                        if key.endswith("_IMAGE") and isinstance(value, str) and "/" in value:
                            self.add(value, release, "operator default", f"{name} {slot} env {key}")
                    for arg in [*(c.get("args") or []), *(c.get("command") or [])]:
                        flag, _, value = str(arg).partition("=")
                        ref = parse_reference(value) if flag.startswith("--") else None
                        if (
                            ref is not None
                            and "/" in value
                            and (ref.tag or ref.digest)
                            and "." in value.split("/", 1)[0]
                        ):
                            self.add(
                                value, release, "operator default", f"{name} {slot} arg {flag}"
                            )
                continue
            if doc.get("kind") == "ConfigMap" and isinstance(doc.get("data"), Mapping):
                self.embedded(doc, release, name)
                continue
            self.custom(doc, release, name)

    def embedded(self, doc: Mapping[str, Any], release: RenderedRelease, name: str) -> None:
        """Custom resources written into a ConfigMap for a hook Job to apply (KAI Scheduler's
        ``kai-config-manifest``): each data value that is YAML of objects with ``apiVersion`` and ``kind``."""
        for key, text in sorted(doc["data"].items()):
            if not isinstance(text, str) or "apiVersion" not in text or "kind" not in text:
                continue
            try:
                inner = list(yaml.safe_load_all(text))
            except yaml.YAMLError:
                continue
            for obj in inner:
                if isinstance(obj, Mapping) and obj.get("apiVersion") and obj.get("kind"):
                    self.custom(obj, release, f"{name} data.{key}: {_object_name(obj)}")

    def custom(self, doc: Mapping[str, Any], release: RenderedRelease, name: str) -> None:
        """The operand images of one custom resource (module docstring)."""
        if not _is_custom(doc):
            return
        kind = str(doc.get("kind"))
        for path, text, top in cr_operands(doc):
            where = f"{name} {path}"
            os_key = (kind, top)
            if os_key not in OS_TAGGED or path != f"spec.{top}":
                self.add(text, release, "CR operand", where)
                continue
            spec = (doc.get("spec") or {}).get(top) or {}
            if kind == "ClusterPolicy" and str(spec.get("usePrecompiled")).lower() == "true":
                self.unlisted.append(
                    f"{release.name}: {where} '{text}' is a precompiled driver, tagged per node kernel "
                    "by the GPU Operator: list the <version>-<kernel>-<os> tags of your node images yourself"
                )
                continue
            self.per_os(text, release, where, OS_TAGGED[os_key])


def inventory(
    result: RenderResult, *, node_os: Sequence[str] = (), clusters: Iterable[str] | None = None
) -> list[Inventory]:
    """One :class:`Inventory` per plan of ``result`` (plan order; only ``clusters`` when given).

    ``node_os``: node OS tags (``ubuntu24.04``) per-OS driver images are listed for (default
    :func:`node_os_tags`). Deterministic: images sorted by reference, charts by name and version."""
    from gpucluster.lint.render import unverified

    wanted = set(clusters) if clusters is not None else None
    missing = unverified(result)
    out = []
    for plan in result.plans:
        name = plan.cluster.name
        if wanted is not None and name not in wanted:
            continue
        collector = _Collector(plan, node_os)
        releases = [r for r in result.releases if r.cluster == name]
        stand_ins = []
        for release in releases:
            collector.release(release)
            node = release.node
            if node.kind == "chart" and release.chart is not None:
                located = result.renderer.sources.locate(node.repository, node.chart, node.version)
                if located.how in STAND_IN:
                    stand_ins.append(f"{release.name}: {located.note}")
        charts: dict[tuple[str, str, str], list[str]] = {}
        for node in plan.nodes:
            if node.kind == "chart":
                charts.setdefault((node.chart, node.version, node.repository), []).append(node.id)
        out.append(
            Inventory(
                cluster=name,
                images=[collector.images[k] for k in sorted(collector.images)],
                charts=[
                    Chart(c, v, repo, tuple(sorted(ids)))
                    for (c, v, repo), ids in sorted(charts.items())
                ],
                not_rendered=[m.split("/", 1)[1] for m in missing if m.split("/", 1)[0] == name],
                unlisted=sorted(dict.fromkeys(collector.unlisted)),
                stand_ins=stand_ins,
            )
        )
    return out


def cluster_images(plan: RuntimePlan, sources: Any, *, node_os: Sequence[str] = ()) -> Inventory:
    """The inventory of one cluster (as ``plan`` reads it): render its releases from ``sources``
    (a :class:`gpucluster.lint.render.ChartSources`), then :func:`inventory`. For callers outside
    the CLI (a live cluster compared with its inventory)."""
    from gpucluster.lint.render import render_plans

    result = render_plans([plan], sources)
    try:
        return inventory(result, node_os=node_os)[0]
    finally:
        result.renderer.close()


# --------------------------------------------------------------------------- output forms


SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
HAULER_SCHEMA = SCHEMA_DIR / "hauler-v1.schema.json"
ZARF_SCHEMA = SCHEMA_DIR / "zarf-package.schema.json"


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", str(text).lower()).strip("-")
    return slug or "cluster"


def render_text(inventories: Sequence[Inventory]) -> str:
    """The table: per cluster a header with the counts, then ``IMAGE  RELEASES  SOURCE  FLAGS``
    (``moving``: known only by a moving tag), the charts, and what is not listed."""
    from gpucluster.errors import escaped

    lines: list[str] = []
    for inv in inventories:
        c = inv.counts()
        lines.append(
            f"cluster {escaped(inv.cluster)}: {c['images']} images ({c['digest']} pinned by digest, "
            f"{c['tagOnly']} by tag only, {c['moving']} moving), {len(inv.charts)} charts"
        )
        rows = [("IMAGE", "RELEASES", "SOURCE", "FLAGS")]
        for image in inv.images:
            flags = ["moving"] if image.moving else []
            if image.note:
                flags.append(image.note)
            rows.append(
                (
                    escaped(image.ref.reference),
                    ",".join(sorted(image.releases)),
                    ",".join(s for s in SOURCES if s in image.sources),
                    "; ".join(flags) or "-",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for r in rows:
            lines.append("  " + "  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3])
        lines.append("  CHART / VERSION / REPOSITORY")
        for chart in inv.charts:
            lines.append(
                f"  {escaped(chart.name)} {escaped(chart.version)} {escaped(chart.repository)}"
            )
        for item in inv.not_rendered:
            lines.append(f"  not listed (chart unavailable): {escaped(item)}")
        for item in inv.unlisted:
            lines.append(f"  not listed: {escaped(item)}")
        for item in inv.stand_ins:
            lines.append(f"  listed from a stand-in chart: {escaped(item)}")
    return "\n".join(lines) + "\n"


def render_json(inventories: Sequence[Inventory]) -> str:
    """``{"clusters": [{name, counts, complete, images, charts, notRendered, standIns, unlisted}]}``,
    indented, sorted keys."""
    doc = {
        "clusters": [
            {
                "name": inv.cluster,
                "counts": inv.counts(),
                "complete": inv.complete,
                "images": [i.to_json() for i in inv.images],
                "charts": [
                    {
                        "name": c.name,
                        "version": c.version,
                        "repository": c.repository,
                        "releases": list(c.releases),
                    }
                    for c in inv.charts
                ],
                "notRendered": inv.not_rendered,
                "standIns": inv.stand_ins,
                "unlisted": inv.unlisted,
            }
            for inv in inventories
        ]
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _chart_location(chart: Chart) -> tuple[str, str]:
    """``(repoURL, name)`` as Hauler and Zarf take them: an OCI repository keeps ``oci://``."""
    return chart.repository.rstrip("/"), chart.name


def hauler_documents(inventories: Sequence[Inventory]) -> list[dict[str, Any]]:
    """Hauler manifests (``content.hauler.cattle.io/v1``): per cluster one ``Images`` (every image by
    its full reference) and one ``Charts`` (every upstream chart); ``hauler store sync -f`` reads them.
    Public source of the fields: https://github.com/hauler-dev/hauler (pkg/apis/hauler.cattle.io/v1)."""
    docs: list[dict[str, Any]] = []
    for inv in inventories:
        slug = _slug(inv.cluster)
        docs.append(
            {
                "apiVersion": "content.hauler.cattle.io/v1",
                "kind": "Images",
                "metadata": {"name": f"gpucluster-{slug}-images"},
                "spec": {"images": [{"name": i.upstream} for i in inv.images]},
            }
        )
        charts = []
        for chart in inv.charts:
            repo, name = _chart_location(chart)
            charts.append({"name": name, "repoURL": repo, "version": chart.version})
        docs.append(
            {
                "apiVersion": "content.hauler.cattle.io/v1",
                "kind": "Charts",
                "metadata": {"name": f"gpucluster-{slug}-charts"},
                "spec": {"charts": charts},
            }
        )
    return docs


def zarf_document(inventories: Sequence[Inventory]) -> dict[str, Any]:
    """One Zarf package config (``zarf.yaml``) with a component per cluster carrying its images and
    charts (``zarf package create`` pulls them). Public source of the fields:
    https://github.com/zarf-dev/zarf (zarf.schema.json)."""
    components = []
    for inv in inventories:
        slug = _slug(inv.cluster)
        charts = []
        seen: set[str] = set()
        for chart in inv.charts:
            repo, name = _chart_location(chart)
            zname = _slug(f"{name}-{chart.version}")
            if zname in seen:
                continue
            seen.add(zname)
            entry: dict[str, Any] = {"name": zname, "version": chart.version}
            if repo.startswith("oci://"):
                entry["url"] = f"{repo}/{name}"
            else:
                entry["url"] = repo
                entry["repoName"] = name
            charts.append(entry)
        components.append(
            {
                "name": slug,
                "description": f"images and charts of cluster {inv.cluster}'s runtime stack",
                "required": True,
                "images": [i.upstream for i in inv.images],
                "charts": charts,
            }
        )
    return {
        "kind": "ZarfPackageConfig",
        "metadata": {
            "name": "gpucluster-images",
            "description": "container images and charts of the gpucluster runtime stacks",
        },
        "components": components,
    }


def _schema(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def validate_against(doc: Any, schema_path: Path) -> list[str]:
    """The messages of ``doc``'s violations of the JSON schema at ``schema_path`` (empty: valid)."""
    import jsonschema

    schema = _schema(schema_path)
    validator = jsonschema.validators.validator_for(schema)(schema)
    return sorted(
        f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
        for e in validator.iter_errors(doc)
    )


def render_hauler(inventories: Sequence[Inventory]) -> str:
    """:func:`hauler_documents` as a YAML stream; ``ValueError`` when one is not valid (a bug)."""
    docs = hauler_documents(inventories)
    for doc in docs:
        problems = validate_against(doc, HAULER_SCHEMA)
        if problems:
            raise ValueError(f"hauler manifest not valid: {problems[0]}")
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False)


def render_zarf(inventories: Sequence[Inventory]) -> str:
    """:func:`zarf_document` as YAML; ``ValueError`` when it is not valid (a bug)."""
    doc = zarf_document(inventories)
    problems = validate_against(doc, ZARF_SCHEMA)
    if problems:
        raise ValueError(f"zarf package config not valid: {problems[0]}")
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)

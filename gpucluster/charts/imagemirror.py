"""``images.mirror``: every image reference of the rendered releases rewritten to a private registry.

Path mapping (one rule, documented in docs/cluster-file.md and docs/air-gap.md)::

    <registry>/<path>[:tag][@digest]  ->  <mirror>/<registry>/<path>[:tag][@digest]

with Docker's defaults applied first (``busybox`` is ``docker.io/library/busybox``), so
``nvcr.io/nvidia/driver:595.91.07`` becomes ``myacr.azurecr.io/mirror/nvcr.io/nvidia/driver:595.91.07``;
tags and digests are kept (a digest names the same content in any registry). Keeping the upstream
host as the first path segment keeps images of different registries apart.

What is rewritten in each rendered object (:func:`rewrite_object`):

* every container of a pod template (``image``), its environment variables named ``*_IMAGE``
  and its ``--flag=<image>`` arguments (operators' default images);
* in custom resources, every component mapping with ``image`` and ``repository`` or ``version``
  (ClusterPolicy, NicClusterPolicy, NodeWright, Prometheus): its ``repository`` (or ``image``,
  when that is a full reference), and every ``image: {repository, name, tag}`` mapping (KAI
  Scheduler); the operators then start their operands -- per-OS driver tags included -- from
  the mirror;
* custom resources written as YAML into a ConfigMap for a hook Job to apply.

Hooks. Terraform's helm provider links Helm 3, whose post-renderer is never handed a release's
hooks (helm/helm v3.18.4 ``pkg/action/action.go``, ``renderResources``), so a hook Job's image
must be at the mirror before the post-renderer: gpucluster's own Jobs (gates, CRD steps, teardown
guards) name the mirror themselves (:func:`gpucluster.charts.jobchart.gate_image`), and the
values that name upstream charts' hook images (:data:`HOOK_IMAGE_VALUES`) are written at the
mirror (:func:`apply_hook_values`, the plan's last step). ``render`` and ``lint`` leave hooks
as Helm does, so ``lint`` reports any hook image still outside the mirror.

Terraform applies the same function through Helm's post-renderer (``helm_release.postrender``
running ``gpucluster postrender --image-mirror MIRROR``; Helm docs, "Post Rendering":
https://helm.sh/docs/topics/advanced/#post-rendering), and ``render``/``lint`` apply it to what
they render, so ``lint`` sees what the cluster receives and reports every image still outside the
mirror (``lint.public-registry``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpucluster.errors import GpuclusterError
from gpucluster.values import deep_copy, get_path, set_path

DOCS = "docs/cluster-file.md#images-mirror"

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_REFERENCE = re.compile(
    r"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$"
)
"""An OCI image reference (distribution/reference grammar, simplified: lower-case path components)."""
_PATH = re.compile(r"^[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*$")

POD_TEMPLATE_PATHS = {
    "Pod": ("spec",),
    "DaemonSet": ("spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
"""Where each workload kind keeps its pod spec (lint and images read it from here)."""


def pod_spec(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod spec of a workload object (:data:`POD_TEMPLATE_PATHS`), or None."""
    node: Any = doc
    path = POD_TEMPLATE_PATHS.get(str(doc.get("kind")))
    if not path:
        return None
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else None


def is_test_hook(doc: Mapping[str, Any]) -> bool:
    """Helm test hooks (``helm.sh/hook: test``): ``helm_release`` never runs them."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
    notes = (meta or {}).get("annotations")
    hook = str((notes if isinstance(notes, Mapping) else {}).get("helm.sh/hook", ""))
    return "test" in [h.strip() for h in hook.split(",")]


def is_custom(doc: Mapping[str, Any]) -> bool:
    """True for a custom resource: its API group has a dot and is not a ``*.k8s.io`` one."""
    api = str(doc.get("apiVersion") or "")
    group = api.split("/", 1)[0] if "/" in api else ""
    return bool(group) and "." in group and not group.endswith(".k8s.io")


@dataclass(frozen=True)
class Ref:
    """A parsed image reference.

    Attributes:
        registry: the host (``docker.io`` when the reference names none).
        repository: the path in the registry (``library/busybox`` for ``busybox``).
        tag / digest: ``None`` when absent; a digest is ``sha256:<64 hex>``.
    """

    registry: str
    repository: str
    tag: str | None
    digest: str | None

    @property
    def name(self) -> str:
        """``registry/repository`` (the fully qualified image name)."""
        return f"{self.registry}/{self.repository}"

    @property
    def reference(self) -> str:
        """The fully qualified reference: ``registry/repository[:tag][@digest]``."""
        return (
            self.name
            + (f":{self.tag}" if self.tag else "")
            + (f"@{self.digest}" if self.digest else "")
        )


def parse_reference(text: str) -> Ref | None:
    """``text`` as an image reference (Docker's defaults: no host -> ``docker.io``, one path
    component -> ``library/``), or None when it is not one."""
    text = str(text or "").strip()
    if not text or not _REFERENCE.match(text):
        return None
    digest = None
    if "@" in text:
        text, digest = text.split("@", 1)
    tag = None
    last = text.rsplit("/", 1)[-1]
    if ":" in last:
        text, tag = text.rsplit(":", 1)
    first, _, rest = text.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, rest
    else:
        registry, repository = "docker.io", text
    if not _PATH.fullmatch(repository):
        return None  # an upper-case first component is a path, not a host
    if registry == "docker.io" and "/" not in repository:
        repository = f"library/{repository}"
    return Ref(registry, repository, tag, digest)


_MIRROR = re.compile(
    r"^(?P<host>[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?)"
    r"(?P<path>(/[a-z0-9]+([._-][a-z0-9]+)*)*)$"
)


def parse_images(raw: Any, *, file: str, cluster: str | None, key: str) -> str | None:
    """Validate one ``images`` mapping of the cluster file (``{mirror: HOST[:PORT][/PATH]}``).

    Returns:
        the mirror (no scheme, no trailing ``/``), or None when ``mirror`` is not given.

    Raises:
        GpuclusterError: not a mapping, an unknown key, a mirror that is not a registry host with
            an optional lower-case path (a scheme, user info, a tag or upper case are refused).
    """
    from gpucluster.fields import Where

    fields = Where(file, cluster).fields(raw, key, allowed="mirror: HOST[/PATH]", fix=DOCS)
    fields.check_keys(("mirror",), context=f"in '{key}'", fix=DOCS)
    value = raw.get("mirror")
    if value is None:
        return None
    return check_mirror(value, file=file, cluster=cluster, key=f"{key}.mirror")


def check_mirror(value: Any, *, file: str, cluster: str | None, key: str) -> str:
    """``value`` as an image mirror (``HOST[:PORT][/PATH]``, lower case, no scheme), without a
    trailing ``/``; ``GpuclusterError`` (one line at ``key``) otherwise."""
    text = str(value).strip().rstrip("/") if isinstance(value, str) else ""
    if (
        not _MIRROR.match(text)
        or "." not in text.split("/")[0]
        and not text.startswith("localhost")
    ):
        raise GpuclusterError(
            f"invalid image mirror {value!r}",
            file=file,
            cluster=cluster,
            key=key,
            allowed="a registry host with an optional path, lower case, no scheme: myacr.azurecr.io/mirror",
            fix="write the registry as `docker pull` names it, without https:// or a tag",
        )
    return text


def _parse(text: str) -> Ref | None:
    return parse_reference(text)


def mirror_reference(text: str, mirror: str) -> str | None:
    """``text`` (an image reference) at ``mirror`` (module docstring), or None when it is no image
    reference. A reference already under ``mirror`` is returned unchanged."""
    if under(text, mirror):
        return text
    ref = _parse(text)
    if ref is None:
        return None
    return (
        f"{mirror}/{ref.registry}/{ref.repository}"
        + (f":{ref.tag}" if ref.tag else "")
        + (f"@{ref.digest}" if ref.digest else "")
    )


def mirror_repository(repository: str, mirror: str) -> str | None:
    """A ``repository`` field (a registry path without image name or tag: ``nvcr.io/nvidia``) at
    ``mirror``, or None when it cannot be read as one."""
    repository = repository.strip().rstrip("/")
    if under(repository, mirror):
        return repository
    probe = mirror_reference(f"{repository}/x", mirror)
    return probe[: -len("/x")] if probe else None


def under(text: str, mirror: str) -> bool:
    """True when ``text`` names ``mirror`` or a path below it."""
    return text == mirror or text.startswith(mirror + "/")


def _rewrite_container(c: dict[str, Any], mirror: str, where: str) -> Iterator[str]:
    image = c.get("image")
    if isinstance(image, str) and image:
        new = mirror_reference(image, mirror)
        if new is None:
            yield f"{where} image '{image}' is not an image reference"
        else:
            c["image"] = new
    for env in c.get("env") or []:
        if isinstance(env, dict) and str(env.get("name") or "").endswith("_IMAGE"):
            value = env.get("value")
            if isinstance(value, str) and "/" in value:
                new = mirror_reference(value, mirror)
                if new is not None:
                    env["value"] = new
    for group in ("args", "command"):
        items = c.get(group)
        if not isinstance(items, list):
            continue
        for i, arg in enumerate(items):
            flag, eq, value = str(arg).partition("=")
            if not (eq and flag.startswith("--") and "/" in value):
                continue
            ref = _parse(value)
            if ref is not None and (ref.tag or ref.digest) and "." in value.split("/", 1)[0]:
                items[i] = f"{flag}={mirror_reference(value, mirror)}"


def _rewrite_component(node: dict[str, Any], mirror: str) -> None:
    image = node.get("image")
    repository = node.get("repository")
    if isinstance(image, str) and image and ("repository" in node or "version" in node):
        if isinstance(repository, str) and repository.strip():
            new = mirror_repository(repository, mirror)
            if new is not None:
                node["repository"] = new
        else:
            own = _parse(image)
            if own is not None and ("/" in image or own.tag or own.digest):
                node["image"] = mirror_reference(image, mirror)
    elif isinstance(image, dict) and isinstance(image.get("repository"), str):
        new = mirror_repository(image["repository"], mirror)
        if new is not None:
            image["repository"] = new


def _walk_custom(node: Any, mirror: str) -> None:
    if isinstance(node, dict):
        _rewrite_component(node, mirror)
        for key, value in node.items():
            if key != "image" or isinstance(value, dict):
                _walk_custom(value, mirror)
    elif isinstance(node, list):
        for item in node:
            _walk_custom(item, mirror)


def rewrite_object(doc: dict[str, Any], mirror: str) -> list[str]:
    """Rewrite the image references of one rendered object in place (module docstring); returns one
    line per reference that could not be read (left as it is)."""
    problems: list[str] = []
    pod = pod_spec(doc)
    if pod is not None:
        for group in ("initContainers", "containers", "ephemeralContainers"):
            for c in pod.get(group) or []:
                if isinstance(c, dict):
                    problems += _rewrite_container(c, mirror, f"{group}[{c.get('name')}]")
        return problems
    if doc.get("kind") == "ConfigMap" and isinstance(doc.get("data"), dict):
        for key, text in list(doc["data"].items()):
            if isinstance(text, str) and "apiVersion" in text and "kind" in text:
                doc["data"][key] = _rewrite_embedded(text, mirror)
        return problems
    if is_custom(doc) and isinstance(doc.get("spec"), dict):
        _walk_custom(doc["spec"], mirror)
    return problems


def _rewrite_embedded(text: str, mirror: str) -> str:
    import yaml  # here: reading the cluster file (parse_images) must not import PyYAML

    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return text
    if not docs or not all(
        isinstance(d, dict) and d.get("apiVersion") and d.get("kind") for d in docs
    ):
        return text
    for d in docs:
        rewrite_object(d, mirror)
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False)


@dataclass(frozen=True)
class HookImageValue:
    """A chart value that names the image of one of the chart's Helm hooks (module docstring,
    "Hooks").

    Attributes:
        path: dotted values path (``startupapicheck.image.repository``).
        default: the chart's default per chart version (``"*"``: every version), used when our
            values leave the path out; a version without one is left alone (lint reports the hook).
        when: a dotted values path that must be true in our values for the hook to exist, or ''.
    """

    path: str
    default: Mapping[str, str]
    when: str = ""


HOOK_IMAGE_VALUES: Mapping[str, tuple[HookImageValue, ...]] = {
    # startupapicheck (post-install); `repository` overrides imageRegistry/imageNamespace/name (v1.20)
    "cert-manager": (
        HookImageValue(
            "startupapicheck.image.repository",
            {"*": "quay.io/jetstack/cert-manager-startupapicheck"},
        ),
    ),
    # gpu-operator-upgrade-crd (pre-upgrade), gpu-operator-cleanup-* (pre-delete): the operator image
    "gpu-operator": (HookImageValue("operator.repository", {"*": "nvcr.io/nvidia"}),),
    # network-operator-keep-ncp / -upgrade-crd (pre-install, pre-upgrade): the operator image; the
    # SR-IOV subchart's pre-delete hook: its operator image
    "network-operator": (
        HookImageValue(
            "operator.repository",
            {"26.4.1": "nvcr.io/nvidia/cloud-native", "25.1.0": "nvcr.io/nvstaging/mellanox"},
        ),
        HookImageValue(
            "sriov-network-operator.images.operator",
            {
                "26.4.1": "nvcr.io/nvidia/mellanox/sriov-network-operator:network-operator-v26.4.1",
                "25.1.0": "nvcr.io/nvidia/mellanox/sriov-network-operator:network-operator-25.1.0",
            },
            when="sriovNetworkOperator.enabled",
        ),
    ),
    # node-feature-discovery-prune (post-delete)
    "node-feature-discovery": (
        HookImageValue("image.repository", {"*": "registry.k8s.io/nfd/node-feature-discovery"}),
    ),
    # crd-upgrader, kai-config-deployer, topology-migration Jobs and the Config they apply (hooks):
    # every image is <global.registry>/<name> (the catalog writes the published chart's registry)
    "kai-scheduler": (
        HookImageValue("global.registry", {"*": "ghcr.io/kai-scheduler/kai-scheduler"}),
    ),
    # kube-prometheus-admission-create/-patch (pre-install, post-install): <registry>/<repository>
    "kube-prometheus-stack": (
        HookImageValue(
            "prometheusOperator.admissionWebhooks.patch.image.registry", {"*": "ghcr.io"}
        ),
    ),
    # skyhook-operator-*-cleanup (pre-delete)
    "nodewright": (HookImageValue("webhook.removalImage", {"*": "docker.io/bitnami/kubectl"}),),
}
"""Chart name -> the values that name its hooks' images, for :func:`hook_values` (the reference
charts' templates at the versions the catalog pins; lint checks every rendered hook)."""


def _mirror_value(text: str, mirror: str) -> str | None:
    last = text.rsplit("/", 1)[-1]
    whole = "@" in text or ":" in last
    return mirror_reference(text, mirror) if whole else mirror_repository(text, mirror)


def hook_values(chart: str, version: str, values: Mapping[str, Any], mirror: str) -> dict[str, str]:
    """``{values path: value at mirror}`` for the hooks of ``chart`` at ``version``
    (:data:`HOOK_IMAGE_VALUES`): our value at the path when we set one, else the chart's default."""
    out: dict[str, str] = {}
    bare = version.lstrip("v")
    for entry in HOOK_IMAGE_VALUES.get(chart, ()):
        if entry.when and str(get_path(values, entry.when)).lower() != "true":
            continue
        ours = get_path(values, entry.path)
        current = (
            ours
            if isinstance(ours, str) and ours
            else entry.default.get(bare, entry.default.get("*"))
        )
        if not current:
            continue
        new = _mirror_value(current, mirror)
        if new is not None and new != ours:
            out[entry.path] = new
    return out


def apply_hook_values(nodes: Sequence[Any], mirror: str | None) -> list[Any]:
    """``nodes`` (PlanNodes) with :func:`hook_values` written into the values of every chart
    release that has some: a new list, a changed node replaced by a new PlanNode (its values
    copied first); ``nodes`` are left as they are. Without ``mirror``: ``nodes`` unchanged."""
    import dataclasses

    if not mirror:
        return list(nodes)
    out = []
    for node in nodes:
        changes = (
            hook_values(node.chart, node.version, node.values, mirror)
            if node.kind == "chart"
            else {}
        )
        if changes:
            values = deep_copy(node.values)
            for path, value in changes.items():
                set_path(values, path, value)
            node = dataclasses.replace(node, values=values)
        out.append(node)
    return out


def is_hook(doc: Mapping[str, Any]) -> bool:
    """True for a Helm hook (any ``helm.sh/hook`` annotation)."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
    notes = (meta or {}).get("annotations")
    return isinstance(notes, Mapping) and "helm.sh/hook" in notes


@functools.cache
def manifest_loader() -> Any:
    """A YAML loader for rendered manifests (libyaml when available): ``SafeLoader`` with ``=``
    and timestamps kept as strings, as Go's YAML library and the API server read them
    (prometheus-operator-crds' CRDs carry ``- =``)."""
    import yaml  # here: reading the cluster file (parse_images) must not import PyYAML

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    resolvers = {
        first: [
            (tag, rx)
            for tag, rx in found
            if tag not in ("tag:yaml.org,2002:value", "tag:yaml.org,2002:timestamp")
        ]
        for first, found in base.yaml_implicit_resolvers.items()
    }
    return type("ManifestLoader", (base,), {"yaml_implicit_resolvers": resolvers})


def split_documents(text: str) -> list[str]:
    """Split a YAML stream of manifests the way Helm does (pkg/release/util SplitManifests: a line
    starting with ``---`` starts a new document, the rest of that line included)."""
    docs: list[list[str]] = [[]]
    for line in text.split("\n"):
        if line.startswith("---"):
            docs.append([line[3:]])
        else:
            docs[-1].append(line)
    return ["\n".join(d) for d in docs if "\n".join(d).strip()]


def rewrite_stream(text: str, mirror: str, *, hooks: bool = True) -> str:
    """A YAML stream of Kubernetes objects (what Helm hands a post-renderer) with every image
    reference at ``mirror``; empty documents dropped, comments not kept. ``hooks=False`` leaves Helm
    hooks as they are (what Helm 3 does: its post-renderer never sees them, see
    :mod:`gpucluster.lint.render`). ``yaml.YAMLError`` when the stream is not YAML."""
    import yaml  # here: reading the cluster file (parse_images) must not import PyYAML

    loader = manifest_loader()
    docs = [
        d
        for part in split_documents(text)
        if (d := yaml.load(part, Loader=loader)) is not None  # noqa: S506 (safe loader subclass)
    ]
    for doc in docs:
        if isinstance(doc, dict) and (hooks or not is_hook(doc)):
            rewrite_object(doc, mirror)
    if not docs:
        return ""
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False)

"""Snapshots of a cluster: the Kubernetes objects ``gpucluster validate`` reads, as one ``List``.

A snapshot is what ``kubectl get -o json`` writes for several kinds at once: ``{"apiVersion":
"v1", "kind": "List", "items": [...]}``, every item a complete object with its ``apiVersion``
and ``kind``. ``gpucluster snapshot`` writes one from a live cluster (:func:`read_live`, the
official ``kubernetes`` client: kubeconfig, contexts, exec credential plugins such as kubelogin),
a user can make or edit one with kubectl, and ``gpucluster validate --snapshot`` reads it
(:func:`load_snapshot_file`). Snapshots are read-only evidence: the kinds read are listed in
:data:`BUILTIN_KINDS` plus the custom resources a plan and its checks name (:func:`kinds_to_read`);
Secrets and ConfigMaps are never read. CRDs are kept without their OpenAPI schemas (no check reads
them; they are most of a CRD's bytes).

:class:`Snapshot` answers the lookups of :class:`gpucluster.live.chainsaw.ObjectSource`: a kind
is served when it is a built-in kind of Kubernetes 1.34 (:data:`BUILTIN_KINDS`) or a CRD in the
snapshot serves it (``spec.group``, ``spec.names.kind``, a served ``spec.versions[].name``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import signal
import stat as stat_mod
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import GpuclusterError, Problem
from gpucluster.live.shapes import shape_problem

__all__ = [
    "BUILTIN_KINDS",
    "EVERY_NAMESPACE_KINDS",
    "EVERY_NAMESPACE_KEY",
    "PLANNED_CLUSTER_KEY",
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_SNAPSHOT_BYTES",
    "Snapshot",
    "check_kubeconfig",
    "read_live",
    "load_snapshot_file",
    "snapshot_document",
    "dump_snapshot",
]

MAX_SNAPSHOT_BYTES = 128 * 1024 * 1024
"""Largest snapshot file read (128 MiB: a 1000-node cluster's nodes, pods and custom resources fit)."""

BUILTIN_KINDS: dict[tuple[str, str], tuple[str, str]] = {
    ("v1", "Namespace"): ("namespaces", "Cluster"),
    ("v1", "Node"): ("nodes", "Cluster"),
    ("v1", "Pod"): ("pods", "Namespaced"),
    ("apps/v1", "DaemonSet"): ("daemonsets", "Namespaced"),
    ("apps/v1", "Deployment"): ("deployments", "Namespaced"),
    ("apps/v1", "StatefulSet"): ("statefulsets", "Namespaced"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): (
        "customresourcedefinitions",
        "Cluster",
    ),
    ("node.k8s.io/v1", "RuntimeClass"): ("runtimeclasses", "Cluster"),
    ("resource.k8s.io/v1", "ResourceSlice"): ("resourceslices", "Cluster"),
    ("resource.k8s.io/v1", "DeviceClass"): ("deviceclasses", "Cluster"),
    ("resource.k8s.io/v1", "ResourceClaim"): ("resourceclaims", "Namespaced"),
}
"""``(apiVersion, kind)`` -> ``(plural, scope)`` of the built-in Kubernetes 1.34 kinds a snapshot
holds (Kubernetes API reference 1.34; ``resource.k8s.io/v1`` is GA from 1.34)."""

EVERY_NAMESPACE_KINDS: tuple[tuple[str, str], ...] = (
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("v1", "Pod"),
)
"""The namespaced kinds ``gpucluster snapshot`` and ``upgrade-check --kubeconfig`` list in every
namespace (GPU jobs run in their teams' own namespaces); a snapshot records them under
:data:`EVERY_NAMESPACE_KEY`."""

PLANNED_CLUSTER_KEY = "plannedCluster"
"""Key of a snapshot ``List``'s ``metadata`` that ``gpucluster snapshot`` writes: the name of the
cluster-file cluster whose plan said what to read (``validate`` remarks on a snapshot validated
against another cluster's plan). A List without it (kubectl) says nothing."""

EVERY_NAMESPACE_KEY = "listedInEveryNamespace"
"""Key of a snapshot ``List``'s ``metadata``: the ``apiVersion/kind`` of each kind it lists in
every namespace (sorted), e.g. ``["resource.k8s.io/v1/ResourceClaim", "v1/Pod"]``. A List
without it (``kubectl get -n NS -o json``) says nothing about the namespaces it left out."""


def _problem(
    message: str, *, file: str, key: str | None = None, fix: str, id: str = "validate.snapshot"
) -> GpuclusterError:
    return GpuclusterError(message, file=file, key=key, fix=fix, id=id)


@dataclass
class Snapshot:
    """Objects indexed for lookups.

    Attributes:
        items: the objects, in the file's order.
        source: where they came from (a file name or ``context <name>``), for evidence.
        digest: sha256 of the canonical JSON of ``items`` (sorted keys), for evidence.
        every_namespace: the ``(apiVersion, kind)`` listed in every namespace (a live reading's
            ``ReadPlan.cluster_wide``, a file's :data:`EVERY_NAMESPACE_KEY`); empty when unknown.
        file_sha256: sha256 of the file's bytes as read and judged ('' when read live).
        planned_cluster: the cluster whose plan ``gpucluster snapshot`` read it for (a file's
            :data:`PLANNED_CLUSTER_KEY`); '' when unknown (kubectl, or read live).
    """

    items: list[dict[str, Any]]
    source: str = ""
    digest: str = ""
    every_namespace: frozenset[tuple[str, str]] = frozenset()
    file_sha256: str = ""
    planned_cluster: str = ""
    _by_kind: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict, repr=False)
    _crd_scope: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for obj in self.items:
            self._by_kind.setdefault((obj["apiVersion"], obj["kind"]), []).append(obj)
        for crd in self._by_kind.get(("apiextensions.k8s.io/v1", "CustomResourceDefinition"), []):
            spec = crd.get("spec") or {}
            group, kind = spec.get("group"), (spec.get("names") or {}).get("kind")
            for version in spec.get("versions") or []:
                if isinstance(version, Mapping) and version.get("served", True) and group and kind:
                    self._crd_scope[(f"{group}/{version.get('name')}", kind)] = str(
                        spec.get("scope", "Namespaced")
                    )
        if not self.digest:
            self.digest = hashlib.sha256(
                json.dumps(self.items, sort_keys=True, separators=(",", ":")).encode()
            ).hexdigest()

    def scope(self, api_version: str, kind: str) -> str | None:
        builtin = BUILTIN_KINDS.get((api_version, kind))
        return builtin[1] if builtin else self._crd_scope.get((api_version, kind))

    def objects(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        """Every object of the kind, in file order."""
        return list(self._by_kind.get((api_version, kind), []))

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        for obj in self._by_kind.get((api_version, kind), []):
            meta = obj.get("metadata") or {}
            if meta.get("name") == name and (
                namespace is None or meta.get("namespace") == namespace
            ):
                return obj
        return None

    def list(
        self, api_version: str, kind: str, namespace: str | None, labels: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        out = []
        for obj in self._by_kind.get((api_version, kind), []):
            meta = obj.get("metadata") or {}
            if namespace is not None and meta.get("namespace") != namespace:
                continue
            have = meta.get("labels") or {}
            if all(have.get(k) == v for k, v in labels.items()):
                out.append(obj)
        return sorted(
            out,
            key=lambda o: (
                (o.get("metadata") or {}).get("namespace") or "",
                (o.get("metadata") or {}).get("name") or "",
            ),
        )

    def identity(self) -> dict[str, Any]:
        """What identifies the cluster: the ``kube-system`` Namespace's uid (the de facto cluster
        id), the nodes' provider-id scheme and kubelet versions, the snapshot source and digest."""
        kube_system = self.get("v1", "Namespace", None, "kube-system") or {}
        nodes = self.objects("v1", "Node")
        providers = sorted(
            {str((n.get("spec") or {}).get("providerID", "")).split("://")[0] for n in nodes} - {""}
        )
        kubelets = sorted(
            {
                str(((n.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", ""))
                for n in nodes
            }
            - {""}
        )
        return {
            "kubeSystemUid": (kube_system.get("metadata") or {}).get("uid", ""),
            "providers": providers,
            "kubeletVersions": kubelets,
            "nodes": len(nodes),
            "source": self.source,
            "snapshotSha256": self.digest,
        }


_FIX_SHAPE = (
    "give each field the type of its kind's API (as kubectl get -o json writes it), or leave it out"
)


def _check_items(doc: Any, *, file: str, id: str = "validate.snapshot") -> list[dict[str, Any]]:
    """The items of a snapshot document, each an object with ``apiVersion``, ``kind``,
    ``metadata.name`` (strings), a string ``metadata.namespace`` and string labels, once, each
    field shaped as its kind says (:func:`gpucluster.live.shapes.shape_problem`).

    Raises:
        GpuclusterError: the first item that is not (``key`` names it; id ``id``).
    """
    fix = "give a Kubernetes List as `kubectl get -o json` or `gpucluster snapshot` writes it"
    if not isinstance(doc, Mapping) or doc.get("kind") != "List" or doc.get("apiVersion") != "v1":
        raise _problem(
            "is not a Kubernetes List (apiVersion v1, kind List)",
            file=file,
            key="kind",
            fix=fix,
            id=id,
        )
    items = doc.get("items")
    if not isinstance(items, list):
        raise _problem("has no items list", file=file, key="items", fix=fix, id=id)
    seen: set[tuple[str, str, str, str]] = set()
    for i, obj in enumerate(items):
        if not isinstance(obj, Mapping):
            raise _problem("is not an object", file=file, key=f"items[{i}]", fix=fix, id=id)
        for key in ("apiVersion", "kind"):
            if not isinstance(obj.get(key), str) or not obj.get(key):
                raise _problem(f"has no {key}", file=file, key=f"items[{i}].{key}", fix=fix, id=id)
        meta = obj.get("metadata")
        if (
            not isinstance(meta, Mapping)
            or not isinstance(meta.get("name"), str)
            or not meta.get("name")
        ):
            raise _problem(
                "has no metadata.name",
                file=file,
                key=f"items[{i}].metadata.name",
                fix=fix,
                id=id,
            )
        namespace = meta.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            raise _problem(
                "metadata.namespace is not a string",
                file=file,
                key=f"items[{i}].metadata.namespace",
                fix=fix,
                id=id,
            )
        labels = meta.get("labels")
        if labels is not None and (
            not isinstance(labels, Mapping) or any(not isinstance(v, str) for v in labels.values())
        ):
            raise _problem(
                "metadata.labels is not a map of strings",
                file=file,
                key=f"items[{i}].metadata.labels",
                fix=fix,
                id=id,
            )
        found = shape_problem(obj)
        if found is not None:
            raise _problem(
                f"{obj['kind']} {meta['name']}: {found[0]} {found[1]}",
                file=file,
                key=f"items[{i}].{found[0]}",
                fix=_FIX_SHAPE,
                id=id,
            )
        ident = (obj["apiVersion"], obj["kind"], namespace or "", meta["name"])
        if ident in seen:
            raise _problem(
                f"holds {obj['kind']} {'/'.join(ident[2:]).lstrip('/')} twice",
                file=file,
                key=f"items[{i}]",
                fix="keep one copy of each object",
                id=id,
            )
        seen.add(ident)
    return [dict(o) for o in items]


def load_snapshot_file(path: str | Path, *, max_bytes: int = MAX_SNAPSHOT_BYTES) -> Snapshot:
    """Read a snapshot file (JSON, or YAML as ``kubectl get -o yaml`` writes it).

    Bounded: only a regular file of at most ``max_bytes`` bytes is read.

    Raises:
        GpuclusterError: the kubernetes client is not installed, the file is missing, not a
            regular file, too large, not UTF-8, not JSON/YAML, not a ``List`` of objects with
            ``apiVersion``, ``kind`` and ``metadata.name``, holds a field not shaped as its kind
            says (``status.nodeInfo: "x"``), or an object twice (id ``validate.snapshot``; ``key``
            names the item and field).
    """
    name = str(path)
    if importlib.util.find_spec("kubernetes") is None:
        raise _problem(
            "reading a snapshot needs the official kubernetes client (its models give the fields "
            "of each kind), which is not installed",
            file=name,
            fix="pip install 'gpucluster[validate]'",
        )
    p = Path(path)
    try:
        info = p.stat()
    except FileNotFoundError:
        raise _problem(
            "snapshot file not found",
            file=name,
            fix="check the path (gpucluster snapshot --out FILE writes one)",
        ) from None
    except (OSError, ValueError) as exc:
        raise _problem(
            f"cannot read the snapshot file: {getattr(exc, 'strerror', None) or exc}",
            file=name,
            fix="check the path and its permissions",
        ) from None
    if not stat_mod.S_ISREG(info.st_mode):
        raise _problem(
            "is not a regular file", file=name, fix="point --snapshot to a snapshot file"
        )
    try:
        with p.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise _problem(
            f"cannot read the snapshot file: {exc.strerror}",
            file=name,
            fix="check the file's permissions",
        ) from None
    if len(raw) > max_bytes:
        raise _problem(
            f"is larger than {max_bytes} bytes", file=name, fix="check that this is a snapshot file"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _problem(
            f"is not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            file=name,
            fix="give the JSON kubectl or gpucluster snapshot wrote",
        ) from None
    try:
        doc = json.loads(text, object_pairs_hook=_unique_keys)
    except DuplicateKey as exc:
        raise _problem(
            f"holds the key '{exc.key}' twice in one object (which copy counts depends on the reader)",
            file=name,
            fix="keep one copy of the key (kubectl and gpucluster snapshot never write two)",
        ) from None
    except (ValueError, RecursionError):
        from gpucluster.yamlsafe import load_yaml_text

        try:
            doc = load_yaml_text(text, file=name)
        except GpuclusterError as err:
            problem = err.problems[0]
            raise _problem(
                f"is neither JSON nor YAML: {problem.message}",
                file=name,
                fix="give the JSON kubectl or gpucluster snapshot wrote",
            ) from None
    if isinstance(doc, Mapping) and isinstance(doc.get("metadata"), Mapping):
        if doc["metadata"].get("continue"):
            raise _problem(
                "is one page of a longer list (metadata.continue is set): the items after it are missing",
                file=name,
                key="metadata.continue",
                fix="list without --chunk-size/limit (kubectl get --chunk-size=0 -o json), or use gpucluster snapshot",
            )
    return Snapshot(
        items=_check_items(doc, file=name),
        source=name,
        every_namespace=_every_namespace(doc, file=name),
        file_sha256=hashlib.sha256(raw).hexdigest(),
        planned_cluster=_planned_cluster(doc),
    )


def _planned_cluster(doc: Mapping[str, Any]) -> str:
    """:data:`PLANNED_CLUSTER_KEY` of a snapshot document: a string, else '' (not a name to judge by)."""
    meta = doc.get("metadata")
    raw = meta.get(PLANNED_CLUSTER_KEY) if isinstance(meta, Mapping) else None
    return raw if isinstance(raw, str) else ""


class DuplicateKey(Exception):
    """A JSON object names a key twice (:func:`_unique_keys`)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of :func:`json.loads` that refuses a key given twice in one object
    (RFC 8259 leaves which one counts to the reader).

    Raises:
        DuplicateKey: naming the key (escaped, at most 80 characters).
    """
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            from gpucluster.errors import one_line

            raise DuplicateKey(one_line(key, 80))
        out[key] = value
    return out


def _every_namespace(doc: Mapping[str, Any], *, file: str) -> frozenset[tuple[str, str]]:
    """The kinds a snapshot document says it lists in every namespace (:data:`EVERY_NAMESPACE_KEY`).

    Raises:
        GpuclusterError: the key is not a list of ``apiVersion/kind`` strings.
    """
    meta = doc.get("metadata")
    raw = meta.get(EVERY_NAMESPACE_KEY) if isinstance(meta, Mapping) else None
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(
        isinstance(k, str) and "/" in k.strip("/") for k in raw
    ):
        raise _problem(
            f"metadata.{EVERY_NAMESPACE_KEY} is not a list of apiVersion/kind strings",
            file=file,
            key=f"metadata.{EVERY_NAMESPACE_KEY}",
            fix='leave it as gpucluster snapshot writes it (["resource.k8s.io/v1/ResourceClaim", "v1/Pod"]), or drop it',
        )
    return frozenset(tuple(k.rsplit("/", 1)) for k in raw)  # type: ignore[misc]


def strip_crd(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A CRD without its OpenAPI schemas (``spec.versions[].schema``) and managed fields."""
    out = json.loads(json.dumps(obj))
    for version in (out.get("spec") or {}).get("versions") or []:
        if isinstance(version, dict):
            version.pop("schema", None)
    (out.get("metadata") or {}).pop("managedFields", None)
    return out


def snapshot_document(
    items: Iterable[Mapping[str, Any]],
    *,
    every_namespace: Iterable[tuple[str, str]] = (),
    cluster: str | None = None,
) -> dict[str, Any]:
    """The ``List`` document of ``items``, sorted by apiVersion, kind, namespace and name (so the
    same objects always give the same bytes), ``managedFields`` dropped, CRDs :func:`strip_crd`-ed;
    ``every_namespace``: the ``(apiVersion, kind)`` read in every namespace, recorded under
    ``metadata.``:data:`EVERY_NAMESPACE_KEY` (nothing recorded when empty); ``cluster``: the
    cluster-file cluster it was read for, under ``metadata.``:data:`PLANNED_CLUSTER_KEY`."""

    def key(o: Mapping[str, Any]) -> tuple[str, str, str, str]:
        meta = o.get("metadata") or {}
        return (
            str(o.get("apiVersion")),
            str(o.get("kind")),
            str(meta.get("namespace") or ""),
            str(meta.get("name")),
        )

    out = []
    for obj in sorted(items, key=key):
        obj = (
            strip_crd(obj)
            if obj.get("kind") == "CustomResourceDefinition"
            else json.loads(json.dumps(obj))
        )
        (obj.get("metadata") or {}).pop("managedFields", None)
        out.append(obj)
    metadata: dict[str, Any] = {"resourceVersion": ""}
    kinds = sorted(f"{a}/{k}" for a, k in set(every_namespace))
    if kinds:
        metadata[EVERY_NAMESPACE_KEY] = kinds
    if cluster:
        metadata[PLANNED_CLUSTER_KEY] = cluster
    return {"apiVersion": "v1", "kind": "List", "metadata": metadata, "items": out}


def dump_snapshot(document: Mapping[str, Any]) -> str:
    """Deterministic JSON text of a snapshot document (2-space indent, sorted keys, newline),
    ASCII only (``\\uXXXX`` escapes: a name with a lone surrogate still writes)."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


# --------------------------------------------------------------------------- live clusters

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""Largest API response read for one list (64 MiB)."""
MAX_KUBECONFIG_BYTES = 16 * 1024 * 1024
"""Largest kubeconfig file read (16 MiB)."""
DEFAULT_TIMEOUT_SECONDS = 60
"""Default total deadline of one live reading, ``--timeout`` (60 s). It covers everything the
reading does: loading the kubeconfig, its exec credential plugin, connecting, every request and its
retries, and reading every answer to its last byte (as kubectl's ``--request-timeout`` and Helm's
``--timeout`` bound a whole operation)."""
NEVER_READ = frozenset({("v1", "Secret"), ("v1", "ConfigMap")})
"""Kinds a snapshot never reads, whatever a check names (credentials and configuration live there)."""


@dataclass(frozen=True)
class ReadPlan:
    """What to read: built-in namespaced kinds only in ``namespaces``, except the built-in kinds
    ``(apiVersion, kind)`` of ``cluster_wide``, listed in every namespace (``upgrade-check`` reads
    every Pod and ResourceClaim: GPU jobs run in the users' namespaces); the custom kinds
    ``(apiVersion, kind)`` in ``custom`` (their plural and scope come from the cluster's CRDs)."""

    namespaces: tuple[str, ...]
    custom: tuple[tuple[str, str], ...]
    cluster_wide: tuple[tuple[str, str], ...] = ()

    def rules(self, crds: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
        """RBAC PolicyRules (get/list) of this reading; custom kinds' plurals from ``crds``."""
        plurals = _crd_plurals(crds)
        groups: dict[str, set[str]] = {}
        for (api_version, _kind), (plural, _scope) in BUILTIN_KINDS.items():
            groups.setdefault(api_version.rpartition("/")[0], set()).add(plural)
        for api_version, kind in self.custom:
            plural = plurals.get((api_version, kind), (None, None))[0]
            if plural:
                groups.setdefault(api_version.rpartition("/")[0], set()).add(plural)
        return [
            {"apiGroups": [g], "resources": sorted(r), "verbs": ["get", "list"]}
            for g, r in sorted(groups.items())
        ]


def _crd_plurals(crds: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[str, str]]:
    out = {}
    for crd in crds:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or []:
            if (
                isinstance(version, Mapping)
                and spec.get("group")
                and names.get("kind")
                and names.get("plural")
            ):
                out[(f"{spec['group']}/{version.get('name')}", names["kind"])] = (
                    names["plural"],
                    str(spec.get("scope", "Namespaced")),
                )
    return out


def _api_error(message: str, *, source: str, fix: str, key: str | None = None) -> GpuclusterError:
    return GpuclusterError(message, file=source, key=key, fix=fix, id="validate.cluster")


_FIX_REACH = (
    "check that the cluster is reachable from here and the kubeconfig's credentials are valid"
)
_FIX_ANSWER = (
    "check that the kubeconfig's server is a Kubernetes API server "
    "(kubectl --kubeconfig F get --raw /version), or snapshot with kubectl"
)


def live_source(kubeconfig: str | None, context: str | None) -> str:
    """How a live reading names its cluster in evidence and error lines:
    ``kubeconfig <path or (default)>[ context <name>]``."""
    return f"kubeconfig {kubeconfig or '(default)'}" + (f" context {context}" if context else "")


def kubeconfig_files(kubeconfig: str | None) -> list[str]:
    """The kubeconfig files a reading loads: ``kubeconfig`` when given; else the existing files of
    ``$KUBECONFIG`` (a list separated by ``os.pathsep``, as kubectl reads it), else
    ``~/.kube/config`` when it exists (the official client's default)."""
    if kubeconfig is not None:
        return [kubeconfig]
    env = os.environ.get("KUBECONFIG")
    names = [n for n in env.split(os.pathsep) if n] if env else ["~/.kube/config"]
    out = []
    for name in names:
        try:
            if Path(name).expanduser().exists():
                out.append(name)
        except (OSError, RuntimeError, ValueError):
            out.append(name)  # check_kubeconfig names what is wrong with it
    return out


def check_kubeconfig(path: str) -> None:
    """Refuse, before any credential plugin runs, a kubeconfig file that is missing, not a regular
    file, larger than :data:`MAX_KUBECONFIG_BYTES`, not UTF-8, not YAML (read with PyYAML's safe
    loader: a ``!!python/object`` tag is refused, never constructed), or not a mapping.

    Raises:
        GpuclusterError: ``validate.input`` for a missing or oversized file, ``input`` (with
            ``file=``) for one whose content is not a kubeconfig.
    """
    import yaml

    try:
        expanded = Path(path).expanduser()
        info = expanded.stat()
    except (OSError, RuntimeError, ValueError):
        info = None
    if info is None or not stat_mod.S_ISREG(info.st_mode):
        raise GpuclusterError(
            "kubeconfig is missing or not a regular file",
            file=path,
            key="--kubeconfig",
            fix="give the kubeconfig file of the cluster",
            id="validate.input",
        )
    if info.st_size > MAX_KUBECONFIG_BYTES:
        raise GpuclusterError(
            f"kubeconfig is larger than {MAX_KUBECONFIG_BYTES // (1024 * 1024)} MiB",
            file=path,
            key="--kubeconfig",
            fix="give the kubeconfig file of the cluster",
            id="validate.input",
        )
    fix = "give the kubeconfig file of the cluster (az aks get-credentials, kubectl config view --raw)"
    try:
        with expanded.open("rb") as fh:
            raw = fh.read(MAX_KUBECONFIG_BYTES + 1)
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GpuclusterError(
            f"is not a kubeconfig: not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            file=path,
            fix=fix,
        ) from None
    except OSError as exc:
        raise GpuclusterError(
            f"cannot read the kubeconfig: {exc.strerror or type(exc).__name__}",
            file=path,
            key="--kubeconfig",
            fix="check the file's permissions",
            id="validate.input",
        ) from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or type(exc).__name__
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise GpuclusterError(
            f"is not a kubeconfig: not YAML: {problem}{where}", file=path, fix=fix
        ) from None
    except RecursionError:
        raise GpuclusterError(
            "is not a kubeconfig: nested too deeply", file=path, fix=fix
        ) from None
    if not isinstance(doc, Mapping):
        raise GpuclusterError(
            f"is not a kubeconfig: its YAML is {'empty' if doc is None else 'a ' + type(doc).__name__}, "
            "not a mapping with clusters, users and contexts",
            file=path,
            fix=fix,
        )


def read_live(
    kubeconfig: str | None,
    context: str | None,
    what: ReadPlan,
    *,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    warn: Callable[[str], None] | None = None,
) -> Snapshot:
    """Read a live cluster with the official ``kubernetes`` client (kubeconfig, context, exec
    credential plugins): ``get``/``list`` only, of :data:`BUILTIN_KINDS` (namespaced ones in
    ``what.namespaces``) and the custom kinds of ``what`` its CRDs serve; never :data:`NEVER_READ`.
    A kind the cluster does not serve (404) is left out.

    Bounded: ``timeout`` seconds (default :data:`DEFAULT_TIMEOUT_SECONDS`) in total for the whole
    reading -- the exec credential plugin, connecting, every request and retry, and every answer to
    its last byte (a server that trickles a byte at a time is stopped at the deadline, not at a
    per-read timeout). The reading runs in a child process (with the credential plugin it starts,
    in a process group of its own), stopped at the deadline; each answer is read up to
    :data:`MAX_RESPONSE_BYTES`. The same function serves every command that reads a live cluster.

    Args:
        warn: called with each ``warning[validate.cluster]`` line (one line of text, no newline):
            a bearer token or password that would be sent over plain ``http://``.

    Raises:
        GpuclusterError: a kubeconfig that is not a YAML mapping (``input``, :func:`check_kubeconfig`)
            or cannot be used (``validate.input``); the deadline passed, the API cannot be reached,
            a read is forbidden (names the resource; the RBAC of docs/validate.md fixes it), an
            answer is too large, cut, not JSON or not shaped as a Kubernetes list
            (``validate.cluster``). Error lines quote no credential (:func:`gpucluster.errors.mask_secrets`).
    """
    if importlib.util.find_spec("kubernetes") is None:
        raise GpuclusterError(
            "gpucluster snapshot/validate --kubeconfig need the official kubernetes client, which is not installed",
            fix="pip install 'gpucluster[validate]'",
            id="validate.cluster",
        )
    source = live_source(kubeconfig, context)
    for path in kubeconfig_files(kubeconfig):
        check_kubeconfig(path)
    items = _run_bounded(
        _read_cluster,
        (kubeconfig, context, what, float(timeout)),
        seconds=float(timeout),
        source=source,
        warn=warn,
    )
    return Snapshot(items=items, source=source, every_namespace=frozenset(what.cluster_wide))


def _run_bounded(
    target: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    seconds: float,
    source: str,
    warn: Callable[[str], None] | None,
) -> Any:
    """``target(*args, send=…)`` in a child process, its answer within ``seconds`` or one
    ``validate.cluster`` error; the child (and what it started) is stopped either way.

    The child reports through a pipe: ``("step", text)`` (what it is waiting for, named by the
    deadline's error), ``("warning", line)`` (passed to ``warn``), then ``("ok", result)`` or
    ``("error", [Problem fields])``."""
    import multiprocessing

    method = "fork" if sys.platform.startswith("linux") else "spawn"
    ctx = multiprocessing.get_context(method)
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(sender, target, args, source), daemon=True)
    step = "starting"
    deadline = time.monotonic() + seconds
    proc.start()
    sender.close()
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not receiver.poll(remaining):
                raise _api_error(
                    f"no complete answer within the {seconds:g} s deadline (--timeout) while {step}",
                    source=source,
                    fix="check that the API server answers from here (kubectl --kubeconfig F get "
                    "--raw /readyz) and that the credential plugin ends without a prompt, or allow "
                    "more time with --timeout",
                )
            try:
                kind, payload = receiver.recv()
            except (EOFError, OSError):
                proc.join(5)
                raise _api_error(
                    f"the reading ended without an answer (exit code {proc.exitcode}) while {step}",
                    source=source,
                    fix=_FIX_REACH,
                ) from None
            if kind == "step":
                step = str(payload)
            elif kind == "warning":
                if warn is not None:
                    warn(str(payload))
            elif kind == "error":
                raise GpuclusterError(problems=[Problem(**p) for p in payload])
            else:
                return payload
    finally:
        receiver.close()
        _stop(proc)


def _stop(proc: Any) -> None:
    """Stop a reading's child and the processes it started (its process group: an exec credential
    plugin); the child is reaped."""
    if proc.is_alive():
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the child leads its own process group (setsid)
        except (OSError, AttributeError):
            proc.kill()
    proc.join(10)
    if proc.is_alive():  # pragma: no cover - SIGKILL is not refused
        proc.kill()
        proc.join(10)


def _child(sender: Any, target: Callable[..., Any], args: tuple[Any, ...], source: str) -> None:
    """The body of a reading's child process: a process group of its own (so the deadline stops the
    credential plugin it starts too), the answer sent once; an unexpected exception (a peer's
    answer no check foresaw) is one ``validate.cluster`` problem naming its type, never its text."""
    import dataclasses

    if hasattr(os, "setsid"):
        with contextlib.suppress(OSError):
            os.setsid()

    def send(kind: str, payload: Any) -> None:
        sender.send((kind, payload))

    try:
        send("ok", target(*args, send=send))
    except GpuclusterError as err:
        send("error", [dataclasses.asdict(p) for p in err.problems])
    except BaseException as exc:  # noqa: BLE001 - a bad peer's answer ends in one line
        if os.environ.get("GPUCLUSTER_DEBUG") == "1":
            import traceback

            traceback.print_exc()
        problem = Problem(
            message=f"reading the cluster failed: unexpected {type(exc).__name__} "
            "(GPUCLUSTER_DEBUG=1 prints where)",
            file=source,
            fix=_FIX_ANSWER,
            id="validate.cluster",
        )
        send("error", [dataclasses.asdict(problem)])
    finally:
        sender.close()


def _keep_log_records() -> list[str]:
    """Keep (never print) what is logged in this process from now on, Python warnings included:
    the client logs a failed credential plugin's output, which may hold a credential. Returns the
    list the messages are appended to. Used in a reading's child process only."""
    import logging

    kept: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record.getMessage())

    logging.captureWarnings(True)
    logging.root.handlers[:] = [Keep()]
    logging.root.setLevel(logging.WARNING)
    return kept


def _read_cluster(
    kubeconfig: str | None,
    context: str | None,
    what: ReadPlan,
    seconds: float,
    *,
    send: Callable[[str, Any], None],
) -> list[dict[str, Any]]:
    """The reading itself (in the child of :func:`_run_bounded`): the items of the snapshot, checked."""
    import urllib3
    from kubernetes import client as kube_client
    from kubernetes import config as kube_config

    deadline = time.monotonic() + seconds
    source = live_source(kubeconfig, context)
    cfg = kube_client.Configuration()
    send("step", "loading the kubeconfig and running its exec credential plugin, if any")
    kept = _keep_log_records()
    try:
        kube_config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=cfg, persist_config=False
        )
    except Exception as exc:  # noqa: BLE001 - the client raises many kinds for a bad kubeconfig
        text = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GpuclusterError(
            f"cannot use the kubeconfig: {text}",
            file=kubeconfig,
            key="--context" if context else "--kubeconfig",
            fix="check the kubeconfig and --context (kubectl config get-contexts)",
            id="validate.input",
        ) from None
    if kept:  # the client logs (and otherwise ignores) a credential plugin that failed
        raise GpuclusterError(
            f"the exec credential plugin gave no credential: {kept[0].splitlines()[0] if kept[0].strip() else 'no output'}",
            file=kubeconfig,
            key="--context" if context else "--kubeconfig",
            fix="run the plugin's command by hand (kubelogin, az login) and fix what it reports",
            id="validate.input",
        )
    authorization = str(cfg.get_api_key_with_prefix("BearerToken", alias="authorization") or "")
    if authorization and not _HEADER_VALUE.fullmatch(authorization):
        raise GpuclusterError(
            f"the kubeconfig's credential is not a valid token ({len(authorization)} characters, "
            "with line breaks, control characters or non-ASCII text); it is not sent",
            file=kubeconfig,
            key="--context" if context else "--kubeconfig",
            fix="give the token itself in token or tokenFile (a file holding only the token)",
            id="validate.input",
        )
    host = str(cfg.host or "")
    if authorization and host.lower().startswith("http://"):
        send(
            "warning",
            Problem(
                message=f"the kubeconfig's credential (Authorization header) would be sent to {host} "
                "over plain http://: anyone on the way can read and reuse it",
                file=source,
                fix="use the API server's https:// address in the kubeconfig",
                id="validate.cluster",
            ).render("warning"),
        )
    cfg.retries = urllib3.Retry(
        total=2, connect=2, read=0, status=0, other=0, redirect=False, backoff_factor=0.2
    )
    api = kube_client.ApiClient(configuration=cfg)
    try:

        def get(path: str) -> dict[str, Any] | None:
            send("step", f"waiting for GET {path}")
            return _get_json(api, path, source=source, deadline=deadline)

        items: list[dict[str, Any]] = []
        crds = _list(
            get,
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            None,
            source=source,
        )
        items += [strip_crd(c) for c in crds]
        for (api_version, kind), (plural, scope) in sorted(BUILTIN_KINDS.items()):
            if kind == "CustomResourceDefinition":
                continue
            if kind == "Namespace":
                for ns in sorted({"kube-system", *what.namespaces}):
                    obj = get(f"/api/v1/namespaces/{ns}")
                    if obj is not None:
                        obj = {**obj, "apiVersion": "v1", "kind": "Namespace"}
                        _check_item(obj, f"/api/v1/namespaces/{ns}", source=source)
                        items.append(obj)
                continue
            spaces: list[str | None] = (
                sorted(what.namespaces)
                if scope == "Namespaced" and (api_version, kind) not in what.cluster_wide
                else [None]
            )
            for ns in spaces:
                items += _list(get, api_version, kind, plural, ns, source=source)
        plurals = _crd_plurals(crds)
        for api_version, kind in sorted(set(what.custom)):
            if (
                (api_version, kind) in NEVER_READ
                or (api_version, kind) in BUILTIN_KINDS
                or (api_version, kind) not in plurals
            ):
                continue
            plural, scope = plurals[(api_version, kind)]
            spaces = sorted(what.namespaces) if scope == "Namespaced" else [None]
            for ns in spaces:
                items += _list(get, api_version, kind, plural, ns, source=source)
    finally:
        api.close()
    send("step", "checking the answers")
    return _check_items(snapshot_document(items), file=source, id="validate.cluster")


_HEADER_VALUE = re.compile(r"[\x21-\x7e]+(?: [\x21-\x7e]+)*")
"""A credential that can travel in an HTTP header: printable ASCII, single spaces (RFC 9110, 5.5)."""


def _check_item(obj: Any, path: str, *, source: str, index: int | None = None) -> None:
    where = f"items[{index}]" if index is not None else "the object"
    if not isinstance(obj, Mapping):
        raise _api_error(
            f"the answer to GET {path} is not a Kubernetes list: {where} is a {type(obj).__name__}, not an object",
            source=source,
            fix=_FIX_ANSWER,
        )
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise _api_error(
            f"the answer to GET {path} is not a Kubernetes list: {where} has no metadata.name",
            source=source,
            fix=_FIX_ANSWER,
        )
    found = shape_problem(obj)
    if found is not None:
        raise _api_error(
            f"the answer to GET {path} is not shaped as a {obj.get('kind')}: "
            + (f"{where}.{found[0]}" if index is not None else found[0])
            + f" {found[1]}",
            source=source,
            fix=_FIX_ANSWER,
        )


def _list(
    get, api_version: str, kind: str, plural: str, namespace: str | None, *, source: str
) -> list[dict[str, Any]]:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    body = get(path)
    if body is None:
        return []
    meta = body.get("metadata")
    if isinstance(meta, Mapping) and meta.get("continue"):
        raise _api_error(
            f"the answer to GET {path} is one page of a longer list (metadata.continue is set), "
            "though no page was asked for",
            source=source,
            fix=_FIX_ANSWER,
        )
    items = body.get("items")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise _api_error(
            f"the answer to GET {path} is not a Kubernetes list: items is a {type(items).__name__}, not a list",
            source=source,
            fix=_FIX_ANSWER,
        )
    out = []
    for i, item in enumerate(items):
        if isinstance(item, Mapping):
            item = {
                "apiVersion": api_version,
                "kind": kind,
                **{k: v for k, v in item.items() if k not in ("apiVersion", "kind")},
            }
        _check_item(item, path, source=source, index=i)
        out.append(item)
    return out


def _get_json(api: Any, path: str, *, source: str, deadline: float) -> dict[str, Any] | None:
    """GET ``path`` through the client's authenticated connection; None on 404. Its connect and
    read timeouts end a little after ``deadline`` (the parent's deadline ends the reading first,
    with the step it was waiting for)."""
    import urllib3

    left = max(deadline - time.monotonic(), 0.0) + 1.0
    try:
        method, url, headers, _, _ = api.param_serialize(
            "GET", path, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
        )
        response = api.call_api(method, url, header_params=headers, _request_timeout=(left, left))
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise _api_error(
            f"cannot reach the Kubernetes API ({type(exc).__name__})", source=source, fix=_FIX_REACH
        ) from None
    except Exception as exc:  # noqa: BLE001 - never quoted: it may carry a header value
        raise _api_error(
            f"cannot send GET {path} ({type(exc).__name__})", source=source, fix=_FIX_REACH
        ) from None
    raw = response.response
    try:
        if response.status == 404:
            return None
        if response.status in (401, 403):
            raise _api_error(
                f"the API refused GET {path} ({response.status})",
                source=source,
                fix="grant the read-only ClusterRole of docs/validate.md (get/list) to this identity",
            )
        if response.status != 200:
            raise _api_error(
                f"the API answered GET {path} with {response.status}", source=source, fix=_FIX_REACH
            )
        try:
            data = raw.read(MAX_RESPONSE_BYTES + 1, decode_content=True)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _api_error(
                f"the answer to GET {path} was cut ({type(exc).__name__})",
                source=source,
                fix=_FIX_REACH,
            ) from None
        if len(data) > MAX_RESPONSE_BYTES:
            raise _api_error(
                f"the answer to GET {path} is larger than {MAX_RESPONSE_BYTES} bytes",
                source=source,
                fix="reduce what the namespaces hold, or snapshot with kubectl",
            )
        try:
            body = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys)
        except DuplicateKey as exc:
            raise _api_error(
                f"the answer to GET {path} holds the key '{exc.key}' twice in one object",
                source=source,
                fix=_FIX_ANSWER,
            ) from None
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise _api_error(
                f"the answer to GET {path} is not JSON", source=source, fix=_FIX_ANSWER
            ) from None
        if not isinstance(body, dict):
            raise _api_error(
                f"the answer to GET {path} is not a JSON object", source=source, fix=_FIX_ANSWER
            )
        return body
    finally:
        with contextlib.suppress(Exception):
            raw.release_conn()

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

:class:`Snapshot` answers the lookups of :class:`gpucluster.verify.chainsaw.ObjectSource`: a kind
is served when it is a built-in kind of Kubernetes 1.34 (:data:`BUILTIN_KINDS`) or a CRD in the
snapshot serves it (``spec.group``, ``spec.names.kind``, a served ``spec.versions[].name``).
"""

from __future__ import annotations

import hashlib
import json
import stat as stat_mod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import GpuclusterError

__all__ = [
    "BUILTIN_KINDS",
    "MAX_SNAPSHOT_BYTES",
    "Snapshot",
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


def _problem(message: str, *, file: str, key: str | None = None, fix: str) -> GpuclusterError:
    return GpuclusterError(message, file=file, key=key, fix=fix, id="validate.snapshot")


@dataclass
class Snapshot:
    """Objects indexed for lookups.

    Attributes:
        items: the objects, in the file's order.
        source: where they came from (a file name or ``context <name>``), for evidence.
        digest: sha256 of the canonical JSON of ``items`` (sorted keys), for evidence.
    """

    items: list[dict[str, Any]]
    source: str = ""
    digest: str = ""
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


def _check_items(doc: Any, *, file: str) -> list[dict[str, Any]]:
    fix = "give a Kubernetes List as `kubectl get -o json` or `gpucluster snapshot` writes it"
    if not isinstance(doc, Mapping) or doc.get("kind") != "List" or doc.get("apiVersion") != "v1":
        raise _problem(
            "is not a Kubernetes List (apiVersion v1, kind List)", file=file, key="kind", fix=fix
        )
    items = doc.get("items")
    if not isinstance(items, list):
        raise _problem("has no items list", file=file, key="items", fix=fix)
    seen: set[tuple[str, str, str, str]] = set()
    for i, obj in enumerate(items):
        if not isinstance(obj, Mapping):
            raise _problem("is not an object", file=file, key=f"items[{i}]", fix=fix)
        for key in ("apiVersion", "kind"):
            if not isinstance(obj.get(key), str) or not obj.get(key):
                raise _problem(f"has no {key}", file=file, key=f"items[{i}].{key}", fix=fix)
        meta = obj.get("metadata")
        if (
            not isinstance(meta, Mapping)
            or not isinstance(meta.get("name"), str)
            or not meta.get("name")
        ):
            raise _problem(
                "has no metadata.name", file=file, key=f"items[{i}].metadata.name", fix=fix
            )
        namespace = meta.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            raise _problem(
                "metadata.namespace is not a string",
                file=file,
                key=f"items[{i}].metadata.namespace",
                fix=fix,
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
            )
        ident = (obj["apiVersion"], obj["kind"], namespace or "", meta["name"])
        if ident in seen:
            raise _problem(
                f"holds {obj['kind']} {'/'.join(ident[2:]).lstrip('/')} twice",
                file=file,
                key=f"items[{i}]",
                fix="keep one copy of each object",
            )
        seen.add(ident)
    return [dict(o) for o in items]


def load_snapshot_file(path: str | Path, *, max_bytes: int = MAX_SNAPSHOT_BYTES) -> Snapshot:
    """Read a snapshot file (JSON, or YAML as ``kubectl get -o yaml`` writes it).

    Bounded: only a regular file of at most ``max_bytes`` bytes is read.

    Raises:
        GpuclusterError: missing, not a regular file, too large, not UTF-8, not JSON/YAML, not a
            ``List`` of objects with ``apiVersion``, ``kind`` and ``metadata.name``, or an object
            twice (id ``validate.snapshot``; ``key`` names the item).
    """
    name = str(path)
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
        doc = json.loads(text)
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
    return Snapshot(items=_check_items(doc, file=name), source=name)


def strip_crd(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A CRD without its OpenAPI schemas (``spec.versions[].schema``) and managed fields."""
    out = json.loads(json.dumps(obj))
    for version in (out.get("spec") or {}).get("versions") or []:
        if isinstance(version, dict):
            version.pop("schema", None)
    (out.get("metadata") or {}).pop("managedFields", None)
    return out


def snapshot_document(items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``List`` document of ``items``, sorted by apiVersion, kind, namespace and name (so the
    same objects always give the same bytes), ``managedFields`` dropped, CRDs :func:`strip_crd`-ed."""

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
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": out}


def dump_snapshot(document: Mapping[str, Any]) -> str:
    """Deterministic JSON text of a snapshot document (2-space indent, sorted keys, newline)."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- live clusters

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""Largest API response read for one list (64 MiB)."""
REQUEST_TIMEOUT_SECONDS = 30
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


def _api_error(message: str, *, source: str, fix: str) -> GpuclusterError:
    return GpuclusterError(message, file=source, fix=fix, id="validate.cluster")


def read_live(kubeconfig: str | None, context: str | None, what: ReadPlan) -> Snapshot:
    """Read a live cluster with the official ``kubernetes`` client (kubeconfig, context, exec
    credential plugins): ``get``/``list`` only, of :data:`BUILTIN_KINDS` (namespaced ones in
    ``what.namespaces``) and the custom kinds of ``what`` its CRDs serve; never :data:`NEVER_READ`.
    Each response is read up to :data:`MAX_RESPONSE_BYTES` with a :data:`REQUEST_TIMEOUT_SECONDS`
    timeout. A kind the cluster does not serve (404) is left out.

    Raises:
        GpuclusterError: the kubeconfig cannot be used, the API cannot be reached, a read is
            forbidden (names the resource; the RBAC of docs/validate.md fixes it), or a response is
            too large or not JSON (id ``validate.cluster``).
    """
    try:
        from kubernetes import config as kube_config
        from kubernetes.config.config_exception import ConfigException
    except ImportError:
        raise GpuclusterError(
            "gpucluster snapshot/validate --kubeconfig need the official kubernetes client, which is not installed",
            fix="pip install 'gpucluster[validate]'",
            id="validate.cluster",
        ) from None
    source = f"kubeconfig {kubeconfig or '(default)'}" + (f" context {context}" if context else "")
    if kubeconfig is not None:
        info = None
        try:
            info = Path(kubeconfig).stat()
        except (OSError, ValueError):
            pass
        if info is None or not stat_mod.S_ISREG(info.st_mode):
            raise GpuclusterError(
                "kubeconfig is missing or not a regular file",
                file=kubeconfig,
                key="--kubeconfig",
                fix="give the kubeconfig file of the cluster",
                id="validate.input",
            )
        if info.st_size > 16 * 1024 * 1024:
            raise GpuclusterError(
                "kubeconfig is larger than 16 MiB",
                file=kubeconfig,
                key="--kubeconfig",
                fix="give the kubeconfig file of the cluster",
                id="validate.input",
            )
    try:
        api = kube_config.new_client_from_config(
            config_file=kubeconfig, context=context, persist_config=False
        )
    except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        raise GpuclusterError(
            f"cannot use the kubeconfig: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            file=kubeconfig,
            key="--context" if context else "--kubeconfig",
            fix="check the kubeconfig and --context (kubectl config get-contexts)",
            id="validate.input",
        ) from None
    try:

        def get(path: str) -> dict[str, Any] | None:
            return _get_json(api, path, source=source)

        items: list[dict[str, Any]] = []
        crds = _list(
            get,
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            None,
        )
        items += [strip_crd(c) for c in crds]
        for (api_version, kind), (plural, scope) in sorted(BUILTIN_KINDS.items()):
            if kind == "CustomResourceDefinition":
                continue
            if kind == "Namespace":
                for ns in sorted({"kube-system", *what.namespaces}):
                    obj = get(f"/api/v1/namespaces/{ns}")
                    if obj is not None:
                        items.append({"apiVersion": "v1", "kind": "Namespace", **obj})
                continue
            spaces: list[str | None] = (
                sorted(what.namespaces)
                if scope == "Namespaced" and (api_version, kind) not in what.cluster_wide
                else [None]
            )
            for ns in spaces:
                items += _list(get, api_version, kind, plural, ns)
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
                items += _list(get, api_version, kind, plural, ns)
    finally:
        api.close()
    doc = snapshot_document(items)
    return Snapshot(items=_check_items(doc, file=source), source=source)


def _list(
    get, api_version: str, kind: str, plural: str, namespace: str | None
) -> list[dict[str, Any]]:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    body = get(path)
    if body is None:
        return []
    out = []
    for item in body.get("items") or []:
        if isinstance(item, dict):
            out.append(
                {
                    "apiVersion": api_version,
                    "kind": kind,
                    **{k: v for k, v in item.items() if k not in ("apiVersion", "kind")},
                }
            )
    return out


def _get_json(api: Any, path: str, *, source: str) -> dict[str, Any] | None:
    """GET ``path`` through the client's authenticated connection; None on 404."""
    import urllib3

    fix = "check that the cluster is reachable from here and the kubeconfig's credentials are valid"
    try:
        method, url, headers, _, _ = api.param_serialize(
            "GET", path, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
        )
        response = api.call_api(
            method, url, header_params=headers, _request_timeout=REQUEST_TIMEOUT_SECONDS
        )
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise _api_error(
            f"cannot reach the Kubernetes API ({type(exc).__name__})", source=source, fix=fix
        ) from None
    except Exception as exc:  # noqa: BLE001 - exec credential plugins raise their own errors
        raise _api_error(
            f"cannot authenticate to the Kubernetes API: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            source=source,
            fix=fix,
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
                f"the API answered GET {path} with {response.status}", source=source, fix=fix
            )
        data = raw.read(MAX_RESPONSE_BYTES + 1, decode_content=True)
        if len(data) > MAX_RESPONSE_BYTES:
            raise _api_error(
                f"the answer to GET {path} is larger than {MAX_RESPONSE_BYTES} bytes",
                source=source,
                fix="reduce what the namespaces hold, or snapshot with kubectl",
            )
        try:
            body = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise _api_error(
                f"the answer to GET {path} is not JSON", source=source, fix=fix
            ) from None
        if not isinstance(body, dict):
            raise _api_error(f"the answer to GET {path} is not an object", source=source, fix=fix)
        return body
    finally:
        raw.release_conn()

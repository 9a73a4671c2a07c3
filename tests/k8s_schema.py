"""Validate rendered Kubernetes objects: built-in kinds against the Kubernetes 1.34 strict JSON
schemas (PyPI kubernetes-validate), custom resources against the pinned operators' CRDs in
tests/data/crds (openAPIV3Schema converted to JSON Schema, checked with jsonschema).

CRD conversion: ``x-kubernetes-*`` keys are dropped (CEL rules are not evaluated),
``nullable`` adds ``null`` to the type, ``x-kubernetes-int-or-string`` accepts integers and
strings, and every object schema with ``properties`` refuses unknown fields unless it says
``x-kubernetes-preserve-unknown-fields`` -- the API server would prune them silently, and
``kubectl --validate=strict`` rejects them; either way they are a bug in a template.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

from gpucluster.lint.lint_schema import openapi_to_jsonschema as _openapi_to_jsonschema


def _read_schema_files_once() -> None:
    """``kubernetes_validate.validate`` reads and parses its schema file and the 1.5 MB
    ``_definitions.json`` on every call (kubernetes_validate/utils.py ``schema_contents``), ~0.1 s
    an object; the tests validate thousands. Cache what it reads (the same parsed JSON each time;
    jsonschema only reads a schema). Idempotent; a missing file still raises on every call."""
    from kubernetes_validate import utils

    if not getattr(utils.schema_contents, "_gpucluster_cached", False):
        cached = functools.lru_cache(maxsize=None)(utils.schema_contents)
        cached._gpucluster_cached = True  # type: ignore[attr-defined]
        utils.schema_contents = cached


_read_schema_files_once()

K8S_VERSION = "1.34.0"
CRD_DIR = Path(__file__).parent / "data" / "crds"
CATALOG_CRD_MANIFESTS = sorted(
    (Path(__file__).parent.parent / "gpucluster" / "catalog" / "components").glob(
        "*/manifests/*-crds.yaml.j2"
    )
)
"""CRDs gpucluster itself installs as manifests (agentgateway-crds: Gateway API, Inference
Extension; plain YAML, no template syntax): custom resources are validated against exactly the
CRDs the stack installs."""

BUILTIN_SCOPE = {
    ("", "Namespace"): "Cluster",
    ("", "ServiceAccount"): "Namespaced",
    ("", "ConfigMap"): "Namespaced",
    ("apps", "DaemonSet"): "Namespaced",
    ("apps", "Deployment"): "Namespaced",
    ("batch", "Job"): "Namespaced",
    ("rbac.authorization.k8s.io", "Role"): "Namespaced",
    ("rbac.authorization.k8s.io", "RoleBinding"): "Namespaced",
    ("rbac.authorization.k8s.io", "ClusterRole"): "Cluster",
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): "Cluster",
    ("apiextensions.k8s.io", "CustomResourceDefinition"): "Cluster",
    ("networking.k8s.io", "NetworkPolicy"): "Namespaced",
    ("", "Node"): "Cluster",
    ("", "Pod"): "Namespaced",
    ("apps", "StatefulSet"): "Namespaced",
    ("node.k8s.io", "RuntimeClass"): "Cluster",
    ("resource.k8s.io", "ResourceSlice"): "Cluster",
    ("resource.k8s.io", "DeviceClass"): "Cluster",
}
"""Scope of the built-in kinds gpucluster renders (extend when a template adds a kind)."""

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")


def schema_set_dir() -> Path:
    """The kubernetes-validate directory holding the strict 1.34.0 schemas."""
    return Path(
        str(
            resources.files("kubernetes_validate").joinpath(
                "kubernetes-json-schema", f"v{K8S_VERSION}-local-strict"
            )
        )
    )


openapi_to_jsonschema = _openapi_to_jsonschema
"""The CRD conversion ``gpucluster lint`` uses (:func:`gpucluster.lint.lint_schema.openapi_to_jsonschema`)."""


@functools.lru_cache(maxsize=1)
def crd_index() -> dict[tuple[str, str, str], dict[str, Any]]:
    """``(group, version, kind)`` -> ``{"schema", "scope", "file", "plural"}`` of every saved CRD."""
    index: dict[tuple[str, str, str], dict[str, Any]] = {}
    for path in sorted(CRD_DIR.rglob("*.yaml")) + CATALOG_CRD_MANIFESTS:
        for doc in yaml.load_all(
            path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        ):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                root = openapi_to_jsonschema(version["schema"]["openAPIV3Schema"])
                props = root.setdefault("properties", {})
                props.setdefault("apiVersion", {"type": "string"})
                props.setdefault("kind", {"type": "string"})
                props.setdefault("metadata", {"type": "object"})
                root.setdefault("additionalProperties", False)
                key = (spec["group"], version["name"], spec["names"]["kind"])
                assert key not in index, (
                    f"{key} defined twice ({index.get(key, {}).get('file')} and {path})"
                )
                index[key] = {
                    "schema": root,
                    "raw": version["schema"]["openAPIV3Schema"],
                    "scope": spec["scope"],
                    "file": str(path.relative_to(CRD_DIR))
                    if path.is_relative_to(CRD_DIR)
                    else f"catalog {path.name}",
                    "plural": spec["names"]["plural"],
                }
    return index


def _check_metadata(doc: dict[str, Any], scope: str) -> None:
    meta = doc["metadata"]
    name = meta.get("name", "")
    assert _DNS_SUBDOMAIN.match(name), (
        f"{doc['kind']}: metadata.name '{name}' is not a DNS-1123 subdomain"
    )
    for field in ("labels", "annotations"):
        for k, v in (meta.get(field) or {}).items():
            assert isinstance(k, str) and isinstance(v, str), (
                f"{doc['kind']} {name}: {field} {k!r}: {v!r} must be strings"
            )
    if scope == "Cluster":
        assert "namespace" not in meta, (
            f"{doc['kind']} {name} is cluster-scoped but sets metadata.namespace"
        )
    else:
        assert meta.get("namespace"), (
            f"{doc['kind']} {name} is namespaced and must set metadata.namespace explicitly"
        )


def validate_object(doc: dict[str, Any]) -> str:
    """Validate one object; returns ``"kubernetes 1.34"`` or ``"crd <file>"``.

    Raises:
        AssertionError: the object is invalid, or no schema covers its kind.
    """
    api_version, kind = doc["apiVersion"], doc["kind"]
    group, _, version = api_version.rpartition("/")
    key = (group, version, kind)
    crds = crd_index()
    if key in crds:
        entry = crds[key]
        _check_metadata(doc, entry["scope"])
        errors = sorted(
            jsonschema.Draft202012Validator(entry["schema"]).iter_errors(doc),
            key=lambda e: list(e.path),
        )
        assert not errors, f"{kind} {doc['metadata'].get('name')}: " + "; ".join(
            f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors[:5]
        )
        return f"crd {entry['file']}"
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except SchemaNotFoundError:
        raise AssertionError(
            f"no schema for {api_version} {kind} (neither Kubernetes {K8S_VERSION} nor tests/data/crds)"
        ) from None
    except kubernetes_validate.ValidationError as exc:
        raise AssertionError(
            f"{kind} {doc['metadata'].get('name')}: {'.'.join(map(str, exc.path))}: {exc.message}"
        ) from None
    assert (group, kind) in BUILTIN_SCOPE, (
        f"add the scope of {group or 'core'}/{kind} to BUILTIN_SCOPE"
    )
    _check_metadata(doc, BUILTIN_SCOPE[(group, kind)])
    return f"kubernetes {K8S_VERSION[:4]}"


def schema_at(raw: dict[str, Any], jsonpath: str) -> dict[str, Any] | None:
    """The CRD openAPIV3Schema node at a simple ``{.a.b.c}`` jsonpath, or None."""
    node = raw
    for part in jsonpath.strip("{}").lstrip(".").split("."):
        props = node.get("properties") or {}
        if part not in props:
            return None
        node = props[part]
    return node

"""Validate rendered custom resources against CRD schemas in tests/data/crds (NVKE tests).

A CRD's ``openAPIV3Schema`` becomes a JSON Schema: objects that declare ``properties`` (and
neither ``additionalProperties`` nor ``x-kubernetes-preserve-unknown-fields``) get
``additionalProperties: false`` -- the API server would prune such unknown fields silently, so a
misspelled field is a test failure here; ``nullable: true`` admits null. CEL rules
(``x-kubernetes-validations``) are not evaluated. Built-in kinds go to kubernetes-validate
(Kubernetes 1.34.0 schemas, strict).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRD_DIR = Path(__file__).parent / "data" / "crds"
K8S_VERSION = "1.34.0"


def _tighten(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _tighten(v) for k, v in node.items() if k != "description"}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        if out.get("nullable") and isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        return out
    if isinstance(node, list):
        return [_tighten(v) for v in node]
    return node


@lru_cache(maxsize=1)
def _crds() -> tuple[dict[str, Any], ...]:
    """Every CustomResourceDefinition under tests/data/crds, in file order, parsed once (read only)."""
    return tuple(
        doc
        for path in sorted(CRD_DIR.rglob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if doc and doc.get("kind") == "CustomResourceDefinition"
    )


@lru_cache(maxsize=1)
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """``(apiVersion, kind)`` -> JSON Schema, from every CRD file under tests/data/crds."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in _crds():
        group = doc["spec"]["group"]
        kind = doc["spec"]["names"]["kind"]
        for version in doc["spec"]["versions"]:
            schema = _tighten(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
            schema.setdefault("properties", {})["metadata"] = {"type": "object"}
            out[(f"{group}/{version['name']}", kind)] = schema
    return out


def crd_scope(api_version: str, kind: str) -> str:
    """``Namespaced`` or ``Cluster`` for a CRD kind in tests/data/crds."""
    group = api_version.split("/")[0]
    for doc in _crds():
        if doc["spec"]["group"] == group and doc["spec"]["names"]["kind"] == kind:
            return doc["spec"]["scope"]
    raise KeyError((api_version, kind))


def validate(doc: dict[str, Any]) -> None:
    """Raise AssertionError naming the object when ``doc`` violates its schema.

    Custom resources need their CRD in tests/data/crds (a missing CRD is a failure, never a
    skip); built-in kinds are checked with kubernetes-validate.
    """
    key = (doc["apiVersion"], doc["kind"])
    name = f"{doc['kind']} {doc.get('metadata', {}).get('name')}"
    if (
        "." in doc["apiVersion"].split("/")[0]
        and "/" in doc["apiVersion"]
        and not doc["apiVersion"].startswith(("rbac.authorization.k8s.io/", "apps/", "batch/"))
    ):
        schema = crd_schemas().get(key)
        assert schema is not None, f"no CRD for {key} in {CRD_DIR}"
        errors = sorted(
            jsonschema.Draft7Validator(schema).iter_errors(doc), key=lambda e: list(e.absolute_path)
        )
        assert not errors, f"{name}: " + "; ".join(
            f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors
        )
        return
    import k8s_schema  # noqa: F401  (kubernetes_validate reads its schema files once per process)
    import kubernetes_validate

    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:  # pragma: no cover - message on failure
        raise AssertionError(f"{name}: {exc}") from exc

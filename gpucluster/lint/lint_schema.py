"""Schemas for ``gpucluster lint``: built-in kinds against Kubernetes 1.34 (PyPI
``kubernetes-validate``'s strict JSON schemas), custom resources against CRDs (openAPIV3Schema
converted to JSON Schema, checked with ``jsonschema``).

CRD conversion (as ``kubectl --validate=strict`` reads a CRD): ``x-kubernetes-*`` keys are
dropped (the CEL rules are evaluated by :mod:`gpucluster.lint.lint_cel`, :func:`check_custom_resource`), ``nullable`` adds ``null`` to the type,
``x-kubernetes-int-or-string`` accepts integers and strings, and an object schema with
``properties`` refuses unknown fields unless it says ``x-kubernetes-preserve-unknown-fields``
(the API server would prune them silently).

Before a custom resource is validated it is normalized the way the API server stores it
(:func:`api_server_view`): a ``null`` in a declared field whose schema is not ``nullable`` is
pruned (Kubernetes docs "Defaulting and Nullable"), then schema ``default``s fill absent fields
whose parent object exists. A null in an undeclared field is kept, so the schema refuses the
unknown field as the API server does. The pruned nulls of fields without a ``default`` are
reported as warnings (``lint.schema-null``, :class:`NullField`): server-side apply refuses them and
a create drops them. Built-in kinds are validated as rendered (their strict schemas accept the
nulls Helm renders, which the API server's decoder reads as unset).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

K8S_VERSION = "1.34.0"
"""Kubernetes version of the built-in schemas (the minimum the platforms accept)."""


def openapi_to_jsonschema(node: Any) -> Any:
    """Convert a CRD ``openAPIV3Schema`` (sub)tree to JSON Schema (see module docstring)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in ("properties", "patternProperties") and isinstance(value, dict):
            out[key] = {name: openapi_to_jsonschema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = openapi_to_jsonschema(value)
        elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
            out[key] = [openapi_to_jsonschema(sub) for sub in value]
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if node.get("nullable") and "type" in out:
        out["type"] = (
            [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
        )
    if (
        out.get("type") == "object"
        and "properties" in out
        and "additionalProperties" not in out
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


class CrdIndex:
    """``(group, version, kind)`` -> JSON Schema of every CRD added (first one wins; the
    source of each is kept for messages)."""

    def __init__(self) -> None:
        self._raw: dict[tuple[str, str, str], tuple[Any, str]] = {}
        self._crds: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        self._status: set[tuple[str, str, str]] = set()
        self._validators: dict[tuple[str, str, str], Any] = {}

    def add(self, doc: Mapping[str, Any], source: str) -> None:
        if not isinstance(doc, Mapping) or doc.get("kind") != "CustomResourceDefinition":
            return
        spec = doc.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or []:
            schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema")
            key = (
                str(spec.get("group", "")),
                str(version.get("name", "")),
                str(names.get("kind", "")),
            )
            if schema is not None and key not in self._raw:
                self._raw[key] = (schema, source)
                self._crds[key] = doc
                if isinstance((version.get("subresources") or {}).get("status"), Mapping):
                    self._status.add(key)

    def add_all(self, docs: Iterable[tuple[Mapping[str, Any], str]]) -> None:
        for doc, source in docs:
            self.add(doc, source)

    def __contains__(self, key: tuple[str, str, str]) -> bool:
        return key in self._raw

    def keys(self) -> list[tuple[str, str, str]]:
        """Every ``(group, version, kind)`` added, in the order added."""
        return list(self._raw)

    def crd(self, key: tuple[str, str, str]) -> Mapping[str, Any]:
        """The CustomResourceDefinition object that defines ``key``."""
        return self._crds[key]

    def status_subresource(self, key: tuple[str, str, str]) -> bool:
        """True when the CRD version has the ``status`` subresource: the API server ignores
        ``status`` on create (only the ``/status`` endpoint writes it)."""
        return key in self._status

    def source(self, key: tuple[str, str, str]) -> str:
        return self._raw[key][1]

    def raw_schema(self, key: tuple[str, str, str]) -> Any:
        """The CRD version's ``openAPIV3Schema`` as written (``nullable``, ``default`` kept)."""
        return self._raw[key][0]

    def validator(self, key: tuple[str, str, str]):
        if key not in self._validators:
            import jsonschema

            root = openapi_to_jsonschema(self._raw[key][0])
            props = root.setdefault("properties", {})
            props.setdefault("apiVersion", {"type": "string"})
            props.setdefault("kind", {"type": "string"})
            props.setdefault("metadata", {"type": "object"})
            root.setdefault("additionalProperties", False)
            self._validators[key] = jsonschema.Draft202012Validator(
                root, format_checker=kubernetes_formats()
            )
        return self._validators[key]


def _ip(version: int):
    import ipaddress

    def check(value: object) -> bool:
        if not isinstance(value, str):
            return True
        try:
            return ipaddress.ip_address(value).version == version
        except ValueError:
            return False

    return check


@functools.cache
def kubernetes_formats():
    """The ``format`` values of CRD schemas lint checks as the API server does: ``ipv4`` and
    ``ipv6`` (an address of that family). Other formats are not checked (the server knows more:
    kube-openapi's ``strfmt`` registry, https://github.com/kubernetes/kube-openapi, pkg/validation/strfmt)."""
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    checker.checks("ipv4")(_ip(4))
    checker.checks("ipv6")(_ip(6))
    return checker


_API_GROUP = re.compile(r"^([^./]*)(?:\.[^/]*)?/")


@functools.cache
def _builtin_definitions():
    from referencing import Registry, Resource

    root = resources.files("kubernetes_validate").joinpath(
        "kubernetes-json-schema", f"v{K8S_VERSION}-local-strict"
    )
    defs = json.loads(root.joinpath("_definitions.json").read_text(encoding="utf-8"))
    return root, Resource.from_contents(defs) @ Registry()


@functools.cache
def builtin_validator(api_version: str, kind: str):
    """Draft 2020-12 validator of a built-in kind (kubernetes-validate's strict 1.34 files,
    the same lookup ``kubernetes_validate.validate`` does, built once), or None when
    Kubernetes 1.34 has no such kind.

    Raises:
        ImportError: kubernetes-validate is not installed (the ``render`` extra).
    """
    import jsonschema
    from referencing import Resource

    root, registry = _builtin_definitions()
    group = _API_GROUP.sub(r"\1-", api_version)
    name = f"{kind.lower()}-{group}.json"
    file = root.joinpath(name)
    if not file.is_file():
        return None
    schema = json.loads(file.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(
        schema, registry=Resource.from_contents(schema) @ registry
    )


def errors_of(validator, doc: Mapping[str, Any], limit: int = 3) -> list[str]:
    """Up to ``limit`` ``path: message`` strings of ``doc`` against ``validator`` (stable order)."""
    errors = sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    out = []
    for e in errors[:limit]:
        path = ".".join(str(p) for p in e.absolute_path) or "(root)"
        message = e.message if len(e.message) <= 200 else e.message[:200] + "..."
        out.append(f"{path}: {message}")
    return out


@dataclass(frozen=True)
class NullField:
    """A ``null`` in a declared custom resource field whose schema is neither ``nullable: true``
    nor has a ``default``: a create or update drops it (no effect); server-side apply (``kubectl
    apply --server-side``, Helm 4) refuses the object with ``<path>: Invalid value: "null": <path> in
    body must be of type <type>`` (the rig's API server, tests/rig/test_lint_server.py).

    Attributes:
        path: dotted path in the object (``spec.storage.emptyDir``).
        type: the field's schema ``type`` (``object``, ``array``, ``string``, ...; ``""`` when the
            schema names none).
    """

    path: str
    type: str


def api_server_view(
    doc: Any, schema: Any = None, *, nulls: list[NullField] | None = None
) -> tuple[Any, list[str], list[str]]:
    """``doc`` as the API server stores it, for validation: ``(object, pruned, defaulted)``.

    With a CRD ``openAPIV3Schema`` (``schema``): a ``null`` in a declared field whose schema is not
    ``nullable: true`` is removed, then every absent property with a ``default`` is set, inside
    objects that exist (Kubernetes docs, "Defaulting and Nullable": "null values for fields that
    either don't specify the nullable flag, or give it a false value, will be pruned before defaulting
    happens. If a default is present, it will be applied"). A null in an undeclared field is kept
    (the schema refuses the unknown field, as the API server does on create and apply). Without a
    schema (built-in kinds, whose JSON decoder reads ``null`` as unset): every ``null`` map value
    is removed.

    ``nulls``: when given, a :class:`NullField` is appended for each pruned null whose field has no
    ``default`` (what server-side apply refuses).

    Returns:
        a copy (``doc`` itself when nothing changes), the dotted paths of pruned nulls and of
        defaulted fields.
    """
    pruned: list[str] = []
    defaulted: list[str] = []

    def walk(node: Any, sch: Any, path: str) -> Any:
        sch = sch if isinstance(sch, Mapping) else None
        if isinstance(node, Mapping):
            props = (sch or {}).get("properties") if sch is not None else None
            extra = (sch or {}).get("additionalProperties") if sch is not None else None
            out: dict[str, Any] = {}
            for key, value in node.items():
                sub = (
                    (props or {}).get(key)
                    if isinstance(props, Mapping) and key in props
                    else (extra if isinstance(extra, Mapping) else None)
                )
                where = f"{path}.{key}" if path else str(key)
                if value is None and not (isinstance(sub, Mapping) and sub.get("nullable")):
                    if sch is not None and sub is None:
                        out[key] = value  # free-form data, or an unknown field the schema refuses
                        continue
                    pruned.append(where)
                    if nulls is not None and isinstance(sub, Mapping) and "default" not in sub:
                        nulls.append(NullField(where, str(sub.get("type") or "")))
                    continue
                out[key] = walk(value, sub, where) if sch is not None else walk(value, None, where)
            if isinstance(props, Mapping):
                for key, sub in props.items():
                    if key not in out and isinstance(sub, Mapping) and "default" in sub:
                        out[key] = copy.deepcopy(sub["default"])
                        defaulted.append(f"{path}.{key}" if path else str(key))
            return out
        if isinstance(node, list):
            items = (sch or {}).get("items") if sch is not None else None
            return [walk(v, items, f"{path}[{i}]") for i, v in enumerate(node)]
        return node

    out = walk(doc, schema if schema is not None else None, "")
    if not pruned and not defaulted:
        return doc, [], []
    return out, pruned, defaulted


@dataclass(frozen=True)
class CustomResourceCheck:
    """What lint finds on one custom resource against its CRD version (:func:`check_custom_resource`).

    Attributes:
        errors: ``path: message`` of the OpenAPI schema check (at most 3).
        nulls: the nulls server-side apply refuses and a create drops (:class:`NullField`).
        failed: CEL rules that reject the object (:mod:`gpucluster.lint.lint_cel`).
        not_checked: CEL rules lint could not evaluate (never counted as passed).
    """

    errors: list[str]
    nulls: list[NullField]
    failed: list[Any]
    not_checked: list[Any]

    @property
    def rejected(self) -> bool:
        """True when the API server would refuse to create the object."""
        return bool(self.errors or self.failed)


def check_custom_resource(
    doc: Mapping[str, Any], raw_schema: Any, validator: Any, *, status_subresource: bool = False
) -> CustomResourceCheck:
    """``doc`` as the API server checks it on create: normalized (:func:`api_server_view`), then
    validated against the OpenAPI schema (``validator``, :meth:`CrdIndex.validator`) and, when the
    schema passes, against the CRD's CEL rules (``raw_schema``, the version's ``openAPIV3Schema``;
    the server evaluates the rules only on objects that pass the schema). With
    ``status_subresource`` (:meth:`CrdIndex.status_subresource`), ``status`` is not checked: the
    server drops it on create."""
    from gpucluster.lint.lint_cel import evaluate_rules

    if status_subresource and "status" in doc:
        doc = {k: v for k, v in doc.items() if k != "status"}
    nulls: list[NullField] = []
    view, _pruned, _defaulted = api_server_view(doc, raw_schema, nulls=nulls)
    errors = errors_of(validator, view)
    failed: list[Any] = []
    not_checked: list[Any] = []
    for outcome in evaluate_rules(view, raw_schema) if not errors else []:
        if outcome.verdict == "failed":
            failed.append(outcome)
        elif outcome.verdict == "not checked":
            not_checked.append(outcome)
    return CustomResourceCheck(errors, nulls, failed, not_checked)

"""The shape of each object of a snapshot, checked once when the snapshot is read.

Every reader of a snapshot (the checks of :mod:`gpucluster.live.checks`, :mod:`gpucluster.live.nodes`,
:mod:`gpucluster.live.upgrade_live`, the cluster identity of :class:`~gpucluster.live.snapshot.Snapshot`)
trusts that a field holds what its kind says: ``status.nodeInfo`` of a Node is an object,
``spec.containers`` of a Pod a list of objects, a label a string. :func:`shape_problem` checks
that of one object, so that a snapshot file (:func:`gpucluster.live.snapshot.load_snapshot_file`)
or an API server's answer (:func:`gpucluster.live.snapshot.read_live`) that is not so is one
error line, never a crash deep in a check.

The shapes are the official Kubernetes Python client's models (``kubernetes.client.models``,
package ``kubernetes`` 37, generated from the Kubernetes OpenAPI specification): each model's
``openapi_types`` names the type of each field and ``attribute_map`` its JSON name. A built-in
kind of :data:`MODELS` is checked field by field, at every depth; any other kind (a custom
resource) has its ``metadata`` checked as ``ObjectMeta`` (its other fields are read only through
the generic comparisons of :mod:`gpucluster.live.chainsaw` and the gates, which take any value).
A field the model does not name is not checked (a newer Kubernetes may add fields); ``null``
where a field is expected reads as the field being absent; a field typed ``object`` in the model
(``IntOrString``, raw extensions) takes any value; a value of a string map may be a number
(a quantity, :data:`_QUANTITY`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MODELS", "shape_problem"]

MODELS: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "Node"): "V1Node",
    ("v1", "Pod"): "V1Pod",
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("apps/v1", "StatefulSet"): "V1StatefulSet",
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): "V1CustomResourceDefinition",
    ("node.k8s.io/v1", "RuntimeClass"): "V1RuntimeClass",
    ("resource.k8s.io/v1", "ResourceSlice"): "V1ResourceSlice",
    ("resource.k8s.io/v1", "DeviceClass"): "V1DeviceClass",
    ("resource.k8s.io/v1", "ResourceClaim"): "ResourceV1ResourceClaim",
}
"""``(apiVersion, kind)`` -> the ``kubernetes.client.models`` class of that kind (the client names
``resource.k8s.io/v1`` ResourceClaim ``ResourceV1ResourceClaim``, as it has a core one too).
Every kind of :data:`gpucluster.live.snapshot.BUILTIN_KINDS` is here."""

_OBJECT_META = "V1ObjectMeta"
_SCALARS: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "datetime": (str,),
    "date": (str,),
    "bytes": (str,),
    "bytearray": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
}
"""JSON form of the client's scalar types: dates and bytes travel as strings (RFC 3339, base64)."""
_QUANTITY = (str, int, float)
"""A value of a string map (``resources.limits``, ``status.allocatable``): the client types
quantities as strings, and the API server also takes a JSON number for one (``cpu: 2`` as Helm
renders it; apimachinery ``resource.Quantity`` UnmarshalJSON), so a number is accepted there."""
_JSON_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    list: "a list",
    dict: "an object",
    type(None): "null",
}
_LIST = re.compile(r"List\[(.+)\]|list\[(.+)\]")
_DICT = re.compile(r"Dict\[str, (.+)\]|dict\(str, (.+)\)")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _json_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Mapping):
        return "an object"
    return _JSON_NAMES.get(type(value), type(value).__name__)


@functools.cache
def _parse(type_name: str) -> tuple[str, Any]:
    """``('list', inner)``, ``('dict', inner)``, ``('scalar', python types)``, ``('any', None)`` or
    ``('model', {json name: type name})`` of one ``openapi_types`` value."""
    from kubernetes.client import models

    text = type_name.strip()
    if m := _LIST.fullmatch(text):
        return "list", _parse(m.group(1) or m.group(2))
    if m := _DICT.fullmatch(text):
        inner = _parse(m.group(1) or m.group(2))
        return "dict", (("scalar", _QUANTITY) if inner == ("scalar", (str,)) else inner)
    if text in _SCALARS:
        return "scalar", _SCALARS[text]
    cls = getattr(models, text, None)
    if cls is None or not hasattr(cls, "openapi_types"):
        return "any", None
    return "model", (
        text,
        {cls.attribute_map[attr]: t for attr, t in cls.openapi_types.items()},
    )


def _expected(shape: tuple[str, Any]) -> str:
    kind, inner = shape
    if kind == "list":
        return "a list"
    if kind in ("dict", "model"):
        return "an object"
    if kind == "scalar":
        return {(int, float): "a number", _QUANTITY: "a string or a number"}.get(
            inner, _JSON_NAMES[inner[-1]]
        )
    return "a value"


def _child(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    if _PLAIN_KEY.fullmatch(text):
        return f"{path}.{text}" if path else text
    return f"{path}[{text!r}]"


def _model_name(shape: tuple[str, Any]) -> str:
    return str(shape[1][0]).removeprefix("ResourceV1").removeprefix("V1")


def shape_problem(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first field of ``obj`` (an object with ``apiVersion`` and ``kind``) that is not shaped
    as its kind says, as ``(path, what is wrong)``: ``("status.nodeInfo", "is a string, not an
    object (NodeStatus.nodeInfo: NodeSystemInfo)")``; None when every field is. Paths are dotted,
    list items ``[i]``, keys that are not plain names ``['nvidia.com/gpu']``.

    Fields are visited in the object's order, depth first (the first problem is always the same
    one for the same object); the walk keeps its own stack (a deeply nested value cannot exhaust
    the interpreter's).

    Raises:
        ModuleNotFoundError: the ``kubernetes`` client is not installed (``gpucluster[validate]``).
    """
    model = MODELS.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    if model is not None:
        stack: list[tuple[str, Any, tuple[str, Any], str]] = [("", obj, _parse(model), "")]
    else:
        stack = [("metadata", obj.get("metadata"), _parse(_OBJECT_META), "")]
    while stack:
        path, value, shape, owner = stack.pop()
        kind, inner = shape
        if kind == "any" or value is None and owner != "item":
            continue
        problem = None
        if kind == "scalar":
            ok = isinstance(value, inner) and not (isinstance(value, bool) and bool not in inner)
            problem = None if ok else _expected(shape)
        elif kind == "list":
            if isinstance(value, list):
                stack += [
                    (_child(path, i), v, inner, "item") for i, v in reversed(list(enumerate(value)))
                ]
            else:
                problem = "a list"
        elif isinstance(value, Mapping):
            if kind == "dict":
                stack += [
                    (_child(path, k), v, inner, "item") for k, v in reversed(list(value.items()))
                ]
            else:
                fields = inner[1]
                stack += [
                    (_child(path, k), v, _parse(fields[k]), f"{_model_name(shape)}.{k}")
                    for k, v in reversed(list(value.items()))
                    if k in fields
                ]
        else:
            problem = "an object"
        if problem is not None:
            what = f"is {_json_name(value)}, not {problem}"
            if owner and owner != "item":
                what += f" ({owner}" + (f": {_model_name(shape)})" if kind == "model" else ")")
            return path, what
    return None

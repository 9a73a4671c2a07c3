"""Kyverno Chainsaw ``assert`` / ``error`` tests evaluated against Kubernetes objects, read-only.

AICR's component health checks (``aicr_checks/<component>/health-check.yaml``, copied unchanged
from NVIDIA/aicr ``recipes/checks/``) are Chainsaw ``Test`` documents made only of ``assert`` and
``error`` operations. This module runs such a Test against an :class:`ObjectSource` (a snapshot,
:mod:`gpucluster.live.snapshot`) with the semantics of the real tools:

* **resource lookup** (chainsaw ``pkg/engine/operations/internal/read.go``): with
  ``metadata.name`` the object is fetched by name; without it the kind is listed in
  ``metadata.namespace`` (all namespaces of a cluster-scoped kind), narrowed by
  ``metadata.labels`` as an equality label selector;
* **assert** (``operations/assert``): fails when the named object does not exist ("actual resource
  not found") or the list is empty ("no actual resource found"); passes when at least one
  candidate matches the assertion tree;
* **error** (``operations/error``): passes when nothing is found; fails when any candidate matches;
* **assertion trees** (kyverno-json ``pkg/core/assertion``, ``matching``, ``projection``,
  ``expression``; docs "Assertion trees"): a mapping is a *subset* match, each key projecting
  the current value -- a plain key reads that field ("field not found in the input object" when
  absent), ``(expr)`` evaluates a JMESPath expression on it (PyPI ``jmespath``); a list
  matches a list of exactly that length element by element; a leaf is compared with
  kyverno-json's equality (numbers by value, ``null`` only with ``null``, values of types that
  cannot be compared -- a string against a number -- are an engine error, which fails the
  operation as it does in Chainsaw); a leaf ``(expr)`` is evaluated first; ``~.(expr)`` applies
  the subtree to every element of a list (every value of a map); ``\\key\\`` escapes a
  projection; an empty mapping requires a non-null value.

Honoured with one difference, stated: PyPI ``jmespath`` compares numbers by value under ``==``,
while kyverno-json's Go JMESPath compares an integer field with a numeric literal type-strictly
(never equal; AICR's nvsentinel check explains why it avoids that form). An expression with
``==``/``!=`` between a field and a numeric literal is therefore reported **unsupported** rather
than given an answer Chainsaw would not give.

Not honoured, reported as ``unsupported`` (never a pass): bindings (``->name``, ``$name``,
``bindings:``), the ``cel;`` compiler, JMESPath functions and operators beyond the JMESPath
specification (kyverno-json's extensions, arithmetic), templated lookups (``(expr)`` in
``apiVersion``/``kind``/``name``/``namespace``/``labels``), ``file:`` operations, any operation
other than ``assert``/``error`` (``apply``, ``script``, ``wait``, ...), ``catch``/``finally``/
``cleanup``, and a namespaced kind without ``metadata.namespace`` (Chainsaw would look in its
own ephemeral test namespace). Timeouts are recorded, not slept: a snapshot does not change;
``gpucluster validate --wait`` re-reads a live cluster instead.

Source of the semantics: kyverno/chainsaw (``website/docs/quick-start/assertion-trees.md``,
``website/docs/operations/assert.md``, ``error.md``) and kyverno/kyverno-json
(``website/docs/policies/asserts.md`` and the packages named above).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "ObjectSource",
    "OperationResult",
    "TestResult",
    "ChainsawTest",
    "Unsupported",
    "EngineError",
    "parse_tests",
    "run_test",
    "compile_tree",
    "object_ref",
]

CHAINSAW_GROUP = "chainsaw.kyverno.io"

_FOREACH = re.compile(r"^~(\w+)?\.(.*)")
_BINDING = re.compile(r"(.*)\s*->\s*(\w+)$")
_ESCAPE = re.compile(r"^\\(.+)\\$")
_COMPILER = re.compile(r"^\((?:(\w+);)?(.+)\)$")
"""kyverno-json ``pkg/core/expression``: foreach ``~name.``, binding ``->name``, escape ``\\x\\``,
compiler ``(name;expr)`` -- applied in that order, as there."""

_TEST_KEYS = {"apiVersion", "kind", "metadata", "spec"}
_SPEC_KEYS = {"steps", "timeouts", "description"}
_STEP_KEYS = {"name", "try", "description"}
_OP_KEYS = {"assert", "error"}
_OP_BODY_KEYS = {"resource", "timeout", "template"}


class Unsupported(Exception):
    """A Chainsaw feature this evaluator does not honour (the check is reported ``unsupported``)."""


class EngineError(Exception):
    """kyverno-json's internal errors (a value of the wrong type, an expression that cannot be
    evaluated): the operation fails, as in Chainsaw."""


class ObjectSource(Protocol):
    """Where operations read objects from (a snapshot or a live cluster).

    ``scope`` is ``"Namespaced"``, ``"Cluster"``, or None when the cluster does not serve the kind
    (``apiVersion`` ``group/version`` or ``v1``). ``get`` returns the object or None; ``list``
    returns the objects of the kind in ``namespace`` (None: every namespace) whose labels
    include ``labels``, in a stable order.
    """

    def scope(self, api_version: str, kind: str) -> str | None: ...

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None: ...

    def list(
        self, api_version: str, kind: str, namespace: str | None, labels: Mapping[str, str]
    ) -> list[dict[str, Any]]: ...


def object_ref(obj: Mapping[str, Any]) -> str:
    """``apiVersion/Kind/namespace/name`` (``apps/v1/Deployment/gpu-operator/gpu-operator``;
    cluster-scoped: ``nvidia.com/v1/ClusterPolicy/cluster-policy``), as Chainsaw names objects."""
    meta = obj.get("metadata") or {}
    parts = [str(obj.get("apiVersion", "")), str(obj.get("kind", ""))]
    if meta.get("namespace"):
        parts.append(str(meta["namespace"]))
    parts.append(str(meta.get("name", "")))
    return "/".join(parts)


# --------------------------------------------------------------------------- JMESPath


def _jmespath():
    try:
        import jmespath  # noqa: PLC0415  (optional extra "validate")
    except ImportError:  # pragma: no cover - the extra is installed wherever validate runs
        from gpucluster.errors import GpuclusterError

        raise GpuclusterError(
            "gpucluster validate needs PyPI jmespath (Chainsaw assertion expressions), which is not installed",
            fix="pip install 'gpucluster[validate]'",
        ) from None
    return jmespath


def _strict_equality_hazard(node: Mapping[str, Any]) -> str | None:
    """The first ``==``/``!=`` of the parsed expression between a non-literal and a numeric
    literal (where Go's JMESPath and PyPI's disagree), else None."""
    if node.get("type") == "comparator" and node.get("value") in ("eq", "ne"):
        kinds = [c.get("type") for c in node["children"]]
        values = [c.get("value") for c in node["children"]]
        for i in range(len(node["children"])):
            other = node["children"][1 - i]
            if (
                kinds[i] == "literal"
                and isinstance(values[i], (int, float))
                and not isinstance(values[i], bool)
                and other.get("type") != "literal"
            ):
                return "==" if node["value"] == "eq" else "!="
    for child in node.get("children", []):
        if isinstance(child, Mapping):
            found = _strict_equality_hazard(child)
            if found:
                return found
    return None


@dataclass(frozen=True)
class _Expression:
    text: str
    compiled: Any

    def evaluate(self, value: Any) -> Any:
        jmespath = _jmespath()
        try:
            return self.compiled.search(value)
        except jmespath.exceptions.UnknownFunctionError as exc:
            raise Unsupported(
                f"JMESPath function outside the JMESPath specification in ({self.text}): {exc}"
            ) from None
        except jmespath.exceptions.JMESPathError as exc:
            raise EngineError(f"({self.text}): {exc}") from None


def _compile_expression(text: str, compiler: str | None) -> _Expression:
    if compiler not in (None, "default", "jp"):
        raise Unsupported(
            f"expression compiler '{compiler}' in ({compiler};{text}) (only JMESPath is honoured)"
        )
    jmespath = _jmespath()
    try:
        compiled = jmespath.compile(text)
    except jmespath.exceptions.JMESPathError as exc:
        reason = "bindings ($name)" if "$" in text else "JMESPath syntax outside the specification"
        raise Unsupported(f"({text}): {reason}: {str(exc).splitlines()[0]}") from None
    hazard = _strict_equality_hazard(compiled.parsed)
    if hazard:
        raise Unsupported(
            f"({text}): '{hazard}' between a field and a numeric literal is type-strict in Chainsaw's JMESPath "
            "(an integer field never equals a number literal) and by value in PyPI jmespath"
        )
    return _Expression(text, compiled)


# --------------------------------------------------------------------------- assertion tree


@dataclass(frozen=True)
class FieldError:
    """One mismatch (kyverno-json ``field.Error``): ``path`` as ``status.(availableReplicas > `0`)``."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, list):
        return "slice"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(expected: Any, actual: Any) -> bool:
    """kyverno-json ``matching.Equal``: nulls only with nulls, same types by value, numbers of
    different types by value; anything else cannot be compared (:class:`EngineError`)."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if type(expected) is type(actual):
        return expected == actual
    if _is_number(expected) and _is_number(actual):
        return float(expected) == float(actual)
    raise EngineError(f"types are not comparable, {_type_name(expected)} - {_type_name(actual)}")


def _match(expected: Any, actual: Any) -> bool:
    """kyverno-json ``matching.Match``: lists by length and element, mappings as subsets."""
    if isinstance(expected, list):
        if not isinstance(actual, list):
            raise EngineError(f"invalid actual value, must be a slice, found {_type_name(actual)}")
        return len(expected) == len(actual) and all(
            _match(e, a) for e, a in zip(expected, actual, strict=True)
        )
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            raise EngineError(f"invalid actual value, must be a map, found {_type_name(actual)}")
        return all(k in actual and _match(v, actual[k]) for k, v in expected.items())
    return _equal(expected, actual)


def _expected_text(value: Any) -> str:
    if isinstance(value, str):
        return f'Expected value: "{value}"'
    if isinstance(value, bool):
        return f"Expected value: {'true' if value else 'false'}"
    return f"Expected value: {value}"


class _Node:
    def check(
        self, path: str, value: Any, errs: list[FieldError]
    ) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass
class _Scalar(_Node):
    literal: Any = None
    expression: _Expression | None = None

    def check(self, path, value, errs):
        expected = self.expression.evaluate(value) if self.expression is not None else self.literal
        if not _match(expected, value):
            errs.append(
                FieldError(path, f"Invalid value: {_shown(value)}: {_expected_text(expected)}")
            )


@dataclass
class _Slice(_Node):
    items: list[_Node] = field(default_factory=list)

    def check(self, path, value, errs):
        if value is None:
            errs.append(FieldError(path, "Invalid value: null: value is null"))
        elif not isinstance(value, list):
            raise EngineError(f"{path}: Invalid value: expected a slice, found {_type_name(value)}")
        elif len(value) != len(self.items):
            errs.append(
                FieldError(path, f"Invalid value: {_shown(value)}: lengths of slices don't match")
            )
        else:
            for i, (node, item) in enumerate(zip(self.items, value, strict=True)):
                node.check(f"{path}[{i}]", item, errs)


@dataclass
class _Projection:
    key: str
    foreach: bool = False
    expression: _Expression | None = None

    def project(self, value: Any) -> tuple[Any, bool]:
        if self.expression is not None:
            return self.expression.evaluate(value), True
        if value is None:
            return None, False
        if isinstance(value, Mapping):
            return (value[self.key], True) if self.key in value else (None, False)
        raise EngineError(
            f"{self.key}: projection not recognized (the value is a {_type_name(value)}, not a map)"
        )


@dataclass
class _Map(_Node):
    entries: list[tuple[str, _Projection, _Node]] = field(default_factory=list)

    def check(self, path, value, errs):
        if not self.entries:
            if value is None:
                errs.append(
                    FieldError(path, "Invalid value: null: invalid value, must not be null")
                )
            return
        for display, projection, node in self.entries:
            here = _child(path, display)
            projected, found = projection.project(value)
            if not found:
                errs.append(FieldError(here, "Required value: field not found in the input object"))
            elif projection.foreach:
                if isinstance(projected, list):
                    for i, item in enumerate(projected):
                        node.check(f"{here}[{i}]", item, errs)
                elif isinstance(projected, Mapping):
                    for key in sorted(projected, key=str):
                        node.check(f"{here}[{key}]", projected[key], errs)
                else:
                    raise EngineError(
                        f"{here}: Invalid value: expected a slice or a map, found {_type_name(projected)}"
                    )
            else:
                node.check(here, projected, errs)


def _shown(value: Any) -> str:
    import json

    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _parse_key(key: Any) -> tuple[str, _Projection]:
    if not isinstance(key, str):
        return str(key), _Projection(key=key)
    text = key
    foreach = False
    match = _FOREACH.match(text)
    if match:
        foreach, text = True, match.group(2)
    match = _BINDING.fullmatch(text)
    if match:
        raise Unsupported(
            f"binding '->{match.group(2)}' in key '{key}' (bindings are not honoured)"
        )
    escaped = _ESCAPE.fullmatch(text)
    if escaped:
        return key, _Projection(key=escaped.group(1), foreach=foreach)
    compiled = _COMPILER.fullmatch(text)
    if compiled:
        return key, _Projection(
            key=text,
            foreach=foreach,
            expression=_compile_expression(compiled.group(2), compiled.group(1)),
        )
    return key, _Projection(key=text, foreach=foreach)


def compile_tree(tree: Any) -> _Node:
    """Compile an assertion tree (kyverno-json ``assertion.Parse``).

    Raises:
        Unsupported: a feature of :mod:`gpucluster.live.chainsaw`'s "Not honoured" list.
    """
    if isinstance(tree, list):
        return _Slice([compile_tree(item) for item in tree])
    if isinstance(tree, Mapping):
        return _Map(
            [
                (display, projection, compile_tree(value))
                for display, projection, value in ((*_parse_key(k), v) for k, v in tree.items())
            ]
        )
    if isinstance(tree, str):
        if _FOREACH.match(tree):
            raise Unsupported(f"foreach '{tree}' in a leaf (kyverno-json refuses it too)")
        if _BINDING.fullmatch(tree):
            raise Unsupported(f"binding in the leaf '{tree}' (kyverno-json refuses it too)")
        escaped = _ESCAPE.fullmatch(tree)
        if escaped:
            return _Scalar(literal=escaped.group(1))
        compiled = _COMPILER.fullmatch(tree)
        if compiled:
            return _Scalar(expression=_compile_expression(compiled.group(2), compiled.group(1)))
    return _Scalar(literal=tree)


def leaf_paths(tree: Any, path: str = "") -> list[str]:
    """The key paths of an assertion tree's leaves (``status.phase``), for evidence."""
    if isinstance(tree, Mapping):
        out: list[str] = []
        for k, v in tree.items():
            out += leaf_paths(v, _child(path, str(k)))
        return out or [path]
    if isinstance(tree, list):
        return [p for i, v in enumerate(tree) for p in leaf_paths(v, f"{path}[{i}]")] or [path]
    return [path]


# --------------------------------------------------------------------------- tests and operations


@dataclass(frozen=True)
class Operation:
    """One ``assert``/``error`` of a step: ``resource`` is the assertion tree (also the lookup)."""

    step: str
    index: int
    op: str
    resource: Any
    problem: str = ""  # set when the operation itself cannot be honoured


@dataclass(frozen=True)
class ChainsawTest:
    """A parsed Chainsaw ``Test`` document: name, ``spec.timeouts.assert`` as written, operations
    in step and ``try`` order; ``problem`` when the document uses a feature that is not honoured."""

    name: str
    operations: tuple[Operation, ...]
    assert_timeout: str = ""
    problem: str = ""


@dataclass(frozen=True)
class OperationResult:
    """The verdict of one operation.

    Attributes:
        step / index / op: where (step name, position in its ``try``, ``assert`` or ``error``).
        lookup: what was read, ``apps/v1 Deployment gpu-operator/gpu-operator`` or
            ``v1 Pod in gpu-operator (labels app=x)``.
        verdict: ``pass``, ``fail`` or ``unsupported``.
        reason: why, as Chainsaw words it (``actual resource not found``, the field errors).
        object: the object that decided (``apps/v1/Deployment/gpu-operator/gpu-operator``), or ''.
        field: the assertion-tree path that decided (``status.(availableReplicas > `0`)``), or ''.
    """

    step: str
    index: int
    op: str
    lookup: str
    verdict: str
    reason: str
    object: str = ""
    field: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "index": self.index,
            "operation": self.op,
            "lookup": self.lookup,
            "verdict": self.verdict,
            "reason": self.reason,
            "object": self.object,
            "field": self.field,
        }


@dataclass(frozen=True)
class TestResult:
    """A Test's verdict: ``pass`` when every operation passed, ``unsupported`` when any operation
    (or the document) uses a feature that is not honoured, else ``fail``."""

    name: str
    verdict: str
    operations: tuple[OperationResult, ...]
    problem: str = ""

    @property
    def deciding(self) -> OperationResult | None:
        """The first operation that did not pass (None when all passed)."""
        return next((o for o in self.operations if o.verdict != "pass"), None)


def _as_test(doc: Any, index: int) -> ChainsawTest:
    if not isinstance(doc, Mapping):
        return ChainsawTest(
            name=f"doc[{index}]", operations=(), problem="the document is not a mapping"
        )
    api_version = str(doc.get("apiVersion", ""))
    name = str((doc.get("metadata") or {}).get("name") or f"doc[{index}]")
    if doc.get("kind") != "Test" or api_version.split("/")[0] != CHAINSAW_GROUP:
        return ChainsawTest(
            name=name,
            operations=(),
            problem=f"not a Chainsaw Test (apiVersion {api_version!r}, kind {doc.get('kind')!r})",
        )
    extra = sorted(set(doc) - _TEST_KEYS)
    spec = doc.get("spec") or {}
    extra += (
        [f"spec.{k}" for k in sorted(set(spec) - _SPEC_KEYS)]
        if isinstance(spec, Mapping)
        else ["spec"]
    )
    timeouts = spec.get("timeouts") or {} if isinstance(spec, Mapping) else {}
    operations: list[Operation] = []
    for s, step in enumerate((spec.get("steps") or []) if isinstance(spec, Mapping) else []):
        if not isinstance(step, Mapping):
            extra.append(f"spec.steps[{s}]")
            continue
        step_name = str(step.get("name") or f"step-{s + 1}")
        extra += [f"spec.steps[{s}].{k}" for k in sorted(set(step) - _STEP_KEYS)]
        for t, entry in enumerate(step.get("try") or []):
            keys = set(entry) if isinstance(entry, Mapping) else set()
            ops = keys & _OP_KEYS
            problem = ""
            if len(ops) != 1 or keys - _OP_KEYS:
                problem = f"operation {sorted(keys) or entry!r} (only one assert or error per try entry is honoured)"
                operations.append(
                    Operation(step_name, t, "/".join(sorted(keys)) or "?", None, problem)
                )
                continue
            op = ops.pop()
            body = entry[op] if isinstance(entry[op], Mapping) else {}
            if "resource" not in body or set(body) - _OP_BODY_KEYS:
                problem = f"{op} with {sorted(set(body) - {'resource'}) or 'no resource'} (only an inline resource is honoured)"
            operations.append(Operation(step_name, t, op, body.get("resource"), problem))
    if not operations and not extra:
        extra.append("no assert or error operation (a check that checks nothing)")
    return ChainsawTest(
        name=name,
        operations=tuple(operations),
        assert_timeout=str(timeouts.get("assert", "")),
        problem=("features not honoured: " + ", ".join(extra)) if extra else "",
    )


def parse_tests(text: str, *, file: str) -> list[ChainsawTest]:
    """Every document of a Chainsaw test file (empty documents skipped, as AICR's executor does).

    Raises:
        GpuclusterError: the text is not YAML (names ``file``).
    """
    import yaml

    from gpucluster.errors import GpuclusterError

    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise GpuclusterError(
            f"not a YAML Chainsaw test: {str(exc).splitlines()[0]}",
            file=file,
            fix="give a Chainsaw Test file (chainsaw.kyverno.io/v1alpha1, kind Test)",
        ) from None
    return [_as_test(d, i) for i, d in enumerate(docs)] or [
        ChainsawTest(name=file, operations=(), problem="no Test document")
    ]


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and bool(_COMPILER.fullmatch(value))


def _lookup(resource: Mapping[str, Any]) -> tuple[str, str, str | None, str | None, dict[str, str]]:
    api_version, kind = resource.get("apiVersion"), resource.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        raise Unsupported(
            "a resource without apiVersion and kind (Chainsaw checks it against null)"
        )
    meta = resource.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise Unsupported("metadata that is not a mapping")
    name, namespace, labels = meta.get("name"), meta.get("namespace"), meta.get("labels") or {}
    for what, value in (
        ("apiVersion", api_version),
        ("kind", kind),
        ("metadata.name", name),
        ("metadata.namespace", namespace),
        *(
            (f"metadata.labels.{k}", v)
            for k, v in (labels.items() if isinstance(labels, Mapping) else ())
        ),
    ):
        if _is_template(value):
            raise Unsupported(f"templated lookup {what}: {value} (bindings are not honoured)")
    if not isinstance(labels, Mapping) or any(not isinstance(v, str) for v in labels.values()):
        raise Unsupported(
            "metadata.labels that are not string pairs (no label selector can be made)"
        )
    for what, value in (("metadata.name", name), ("metadata.namespace", namespace)):
        if value is not None and not isinstance(value, str):
            raise Unsupported(f"{what} that is not a string")
    return (
        api_version,
        kind,
        namespace or None,
        name or None,
        {str(k): v for k, v in labels.items()},
    )


def _lookup_text(
    api_version: str, kind: str, namespace: str | None, name: str | None, labels: Mapping[str, str]
) -> str:
    where = (
        f"{namespace}/{name}"
        if namespace and name
        else (name or (f"in {namespace}" if namespace else "in all namespaces"))
    )
    text = f"{api_version} {kind} {where}"
    if labels:
        text += " (labels " + ",".join(f"{k}={v}" for k, v in sorted(labels.items())) + ")"
    return text


def _first_field(errs: Sequence[FieldError]) -> str:
    return errs[0].path if errs else ""


def run_operation(op: Operation, source: ObjectSource) -> OperationResult:
    """Evaluate one ``assert``/``error`` against ``source`` (module docstring for the semantics)."""
    base: dict[str, Any] = {"step": op.step, "index": op.index, "op": op.op}
    if op.problem:
        return OperationResult(**base, lookup="-", verdict="unsupported", reason=op.problem)
    resource = op.resource
    if not isinstance(resource, Mapping):
        return OperationResult(
            **base, lookup="-", verdict="unsupported", reason="a resource that is not a mapping"
        )
    try:
        api_version, kind, namespace, name, labels = _lookup(resource)
        lookup = _lookup_text(api_version, kind, namespace, name, labels)
        tree = compile_tree(resource)
    except Unsupported as exc:
        return OperationResult(**base, lookup="-", verdict="unsupported", reason=str(exc))
    scope = source.scope(api_version, kind)
    if scope is None:
        return OperationResult(
            **base,
            lookup=lookup,
            verdict="fail",
            reason=f"the cluster does not serve {kind} in {api_version} (no such API or CRD)",
        )
    if scope == "Namespaced" and namespace is None:
        return OperationResult(
            **base,
            lookup=lookup,
            verdict="unsupported",
            reason=f"namespaced {kind} without metadata.namespace (Chainsaw would read its own ephemeral test namespace)",
        )
    if scope == "Cluster":
        namespace_filter = None
    else:
        namespace_filter = namespace
    if name is not None:
        found = source.get(api_version, kind, namespace_filter, name)
        candidates = [found] if found is not None else []
    else:
        candidates = source.list(api_version, kind, namespace_filter, labels)
    leaves = ", ".join(
        p
        for p in leaf_paths(
            {k: v for k, v in resource.items() if k not in ("apiVersion", "kind", "metadata")}
        )
        if p
    )
    try:
        if op.op == "assert":
            if not candidates:
                return OperationResult(
                    **base,
                    lookup=lookup,
                    verdict="fail",
                    reason="actual resource not found" if name else "no actual resource found",
                    object=lookup,
                    field="metadata.name" if name else "metadata",
                )
            first: tuple[str, list[FieldError]] | None = None
            for candidate in candidates:
                errs: list[FieldError] = []
                tree.check("", candidate, errs)
                if not errs:
                    return OperationResult(
                        **base,
                        lookup=lookup,
                        verdict="pass",
                        reason="matches",
                        object=object_ref(candidate),
                        field=leaves,
                    )
                if first is None:
                    first = (object_ref(candidate), errs)
            assert first is not None
            return OperationResult(
                **base,
                lookup=lookup,
                verdict="fail",
                reason="; ".join(str(e) for e in first[1]),
                object=first[0],
                field=_first_field(first[1]),
            )
        for candidate in candidates:
            errs = []
            tree.check("", candidate, errs)
            if not errs:
                return OperationResult(
                    **base,
                    lookup=lookup,
                    verdict="fail",
                    reason="resource matches expectation",
                    object=object_ref(candidate),
                    field=leaves,
                )
        return OperationResult(
            **base,
            lookup=lookup,
            verdict="pass",
            reason="no resource matches" if candidates else "no resource found",
            field=leaves,
        )
    except Unsupported as exc:
        return OperationResult(**base, lookup=lookup, verdict="unsupported", reason=str(exc))
    except EngineError as exc:
        return OperationResult(
            **base, lookup=lookup, verdict="fail", reason=f"assertion engine error: {exc}"
        )


def run_test(test: ChainsawTest, source: ObjectSource) -> TestResult:
    """Every operation of ``test`` against ``source``; see :class:`TestResult` for the verdict.

    Every operation is evaluated (read-only, so the order cannot change a verdict), to report all
    that fail, not only the first Chainsaw would stop at.
    """
    if test.problem:
        results = tuple(run_operation(op, source) for op in test.operations)
        return TestResult(
            name=test.name, verdict="unsupported", operations=results, problem=test.problem
        )
    results = tuple(run_operation(op, source) for op in test.operations)
    verdicts = {r.verdict for r in results}
    verdict = (
        "unsupported" if "unsupported" in verdicts else ("fail" if "fail" in verdicts else "pass")
    )
    return TestResult(name=test.name, verdict=verdict, operations=results)

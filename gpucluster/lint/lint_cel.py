"""CEL validation rules of CRDs (``x-kubernetes-validations``) evaluated offline for ``gpucluster lint``.

The API server evaluates each rule of a CRD's ``openAPIV3Schema`` against every value of the
object at the schema node that declares it (Kubernetes docs, "Validation rules",
https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation-rules):
``self`` is that value (each item of a list whose ``items`` declares the rule, each value of a map
whose ``additionalProperties`` does); at the root, ``self`` carries ``apiVersion``, ``kind`` and
``metadata.name``/``metadata.generateName`` only. A rule that evaluates to ``false`` rejects the
object with its ``message`` (or ``messageExpression``, or ``failed rule: <rule>``) at the node's
path plus its ``fieldPath``; a rule that cannot be evaluated on the data (``no such key``) rejects
it too.

Lint evaluates the rules on the object as the API server stores it (defaults filled,
:func:`gpucluster.lint.lint_schema.api_server_view`), with the CEL interpreter of PyPI
``cel-python`` (the ``render`` extra) and the standard macros and functions (``has``, ``size``,
``all``, ``exists``, ``exists_one``, ``filter``, ``map``, ``matches`` with RE2, string and list
operators). A rule it cannot decide is *not checked*, never passed:

* a transition rule (it names ``oldSelf``): the server evaluates it on updates only, against the
  stored object, which lint does not have;
* a rule that calls a function of the Kubernetes CEL libraries (lists, regex, URLs, quantities,
  IP/CIDR, format, ...) or a CEL extension the interpreter lacks, or that does not compile;
* every rule when ``cel-python`` is not installed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

_OLD_SELF = re.compile(r"\boldSelf\b")
_STRINGS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


@dataclass(frozen=True)
class RuleOutcome:
    """One rule evaluated at one value of an object.

    Attributes:
        path: dotted path of the value (``spec.updateStrategy``; ``spec.items[0]``; ``""`` root),
            the rule's ``fieldPath`` appended when it has one.
        rule: the CEL expression as the CRD writes it.
        verdict: ``"passed"``, ``"failed"`` (the server rejects the object) or ``"not checked"``.
        message: for ``failed``, the message the server gives; for ``not checked``, why.
    """

    path: str
    rule: str
    verdict: str
    message: str = ""


def is_transition_rule(rule: str) -> bool:
    """True when ``rule`` names ``oldSelf`` outside string literals (evaluated on update only)."""
    return bool(_OLD_SELF.search(_STRINGS.sub("''", rule)))


def _celpy() -> Any:
    try:
        import celpy
    except ImportError:
        return None
    logging.getLogger("celpy").setLevel(logging.WARNING)
    return celpy


_PROGRAMS: dict[str, Any] = {}


def _program(celpy: Any, rule: str) -> Any:
    """The compiled program of ``rule`` (cached), or the exception compiling it raised."""
    if rule not in _PROGRAMS:
        try:
            env = celpy.Environment()
            _PROGRAMS[rule] = env.program(env.compile(rule))
        except Exception as e:  # noqa: BLE001 - any compile failure: the rule is not checked
            _PROGRAMS[rule] = e
    return _PROGRAMS[rule]


def _data_error(error: BaseException) -> bool:
    """True for a CEL evaluation error the data causes (a field the rule reads is absent, also
    when it is carried inside another error, as ``_||_`` of two such errors), which the API server
    reports as a rejection (``no such key``); False for a limit of the interpreter."""
    text = repr(error)
    return isinstance(error, KeyError) or (
        "no such member" in text and "undeclared reference" not in text
    )


def _evaluate(celpy: Any, rule: str, value: Any) -> tuple[str, Any]:
    """``("value", result)``, ``("data", error)`` or ``("limit", error)``."""
    program = _program(celpy, rule)
    if isinstance(program, BaseException):
        return "limit", program
    try:
        result = program.evaluate({"self": celpy.json_to_cel(value)})
    except Exception as e:  # noqa: BLE001 - classified below
        return ("data" if _data_error(e) else "limit"), e
    if isinstance(result, BaseException):
        return ("data" if _data_error(result) else "limit"), result
    return "value", result


def _root_view(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``self`` of a rule at the schema root: metadata reduced to name and generateName."""
    out = {k: v for k, v in doc.items() if k != "metadata"}
    meta = doc.get("metadata")
    if isinstance(meta, Mapping):
        out["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return out


def _nodes(value: Any, schema: Any, path: str) -> Iterator[tuple[str, Any, Mapping[str, Any]]]:
    """``(path, value, schema node)`` of every present, non-null value with a schema node."""
    if not isinstance(schema, Mapping) or value is None:
        return
    yield path, value, schema
    if isinstance(value, Mapping):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(props, Mapping) and key in props:
                yield from _nodes(sub, props[key], where)
            elif isinstance(extra, Mapping):
                yield from _nodes(sub, extra, where)
    elif isinstance(value, list):
        items = schema.get("items")
        for i, sub in enumerate(value):
            yield from _nodes(sub, items, f"{path}[{i}]")


def has_rules(schema: Any) -> bool:
    """True when ``schema`` (an ``openAPIV3Schema``) declares a rule anywhere."""
    if isinstance(schema, Mapping):
        return bool(schema.get("x-kubernetes-validations")) or any(
            has_rules(v) for v in schema.values()
        )
    if isinstance(schema, list):
        return any(has_rules(v) for v in schema)
    return False


def evaluate_rules(doc: Mapping[str, Any], schema: Any) -> list[RuleOutcome]:
    """Every ``x-kubernetes-validations`` rule of ``schema`` (a CRD version's
    ``openAPIV3Schema``) evaluated at every value of ``doc`` it applies to, as on create.

    Args:
        doc: the custom resource as the API server stores it (defaults filled).
        schema: the CRD version's ``openAPIV3Schema``.

    Returns:
        one :class:`RuleOutcome` per rule and value, in document order.
    """
    celpy = _celpy()
    out: list[RuleOutcome] = []
    for path, value, node in _nodes(doc, schema, ""):
        rules = node.get("x-kubernetes-validations")
        if not isinstance(rules, list):
            continue
        self_value = _root_view(value) if path == "" and isinstance(value, Mapping) else value
        for entry in rules:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("rule"), str):
                continue
            out.append(_outcome(celpy, entry, path, self_value))
    return out


def _outcome(celpy: Any, entry: Mapping[str, Any], path: str, value: Any) -> RuleOutcome:
    rule = str(entry["rule"])
    field_path = str(entry.get("fieldPath") or "")
    if field_path and not field_path.startswith((".", "[")):
        field_path = "." + field_path
    where = f"{path}{field_path}".lstrip(".")
    if is_transition_rule(rule):
        return RuleOutcome(
            where,
            rule,
            "not checked",
            "a transition rule (oldSelf): the server evaluates it on updates, against the stored object",
        )
    if celpy is None:
        return RuleOutcome(where, rule, "not checked", "cel-python is not installed")
    kind, result = _evaluate(celpy, rule, value)
    if kind == "limit":
        return RuleOutcome(
            where, rule, "not checked", f"lint cannot evaluate it ({_short(result)})"
        )
    if kind == "data":
        return RuleOutcome(where, rule, "failed", f"{_short(result)} evaluating rule: {rule}")
    if not isinstance(result, celpy.celtypes.BoolType):
        return RuleOutcome(
            where, rule, "not checked", f"it gave {type(result).__name__}, not a bool"
        )
    if bool(result):
        return RuleOutcome(where, rule, "passed")
    return RuleOutcome(where, rule, "failed", _message(celpy, entry, value))


def _message(celpy: Any, entry: Mapping[str, Any], value: Any) -> str:
    """The server's message for a failed rule: ``messageExpression`` when it evaluates to a
    non-empty string, else ``message``, else ``failed rule: <rule>``."""
    expression = entry.get("messageExpression")
    if isinstance(expression, str):
        kind, result = _evaluate(celpy, expression, value)
        if kind == "value" and isinstance(result, str) and result.strip():
            return str(result)
    message = entry.get("message")
    if isinstance(message, str) and message:
        return message
    return f"failed rule: {entry['rule']}"


def _short(error: Any) -> str:
    args = getattr(error, "args", ())
    text = str(args[0]) if args else str(error)
    text = text.split(" (in activation")[0]
    return text if len(text) <= 120 else text[:120] + "..."

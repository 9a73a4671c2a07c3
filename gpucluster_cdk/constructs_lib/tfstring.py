"""Terraform string literals: the ONE escaping function for text that reaches a Terraform resource.

Terraform's JSON syntax reads every string of a resource argument (and every key of an object
argument such as ``tags`` or ``node_labels``) as a *string template*: ``${expr}`` is evaluated
and ``%{ directive }`` runs, at plan time, with every Terraform function available.
``vm_size = "${file(pathexpand("~/.terraform.d/credentials.tfrc.json"))}"`` would put the
runner's Terraform Cloud token into the plan. The only literal spellings are the escapes
``$${`` (for ``${``) and ``%%{`` (for ``%{``); any other ``$`` or ``%`` is literal as is
(Terraform 1.11, checked with a provider-less ``terraform plan`` in tests/test_tfstring.py).

Not templates (verified the same way; pass those strings raw): a ``variable`` block's
``default`` and ``description``.

Use:

* :func:`literal` -- escape one string (idempotent only on text without ``$``/``%`` before ``{``;
  call it exactly once, where the string becomes a resource argument: in the constructs).
* :func:`literal_tree` -- escape every string *and every mapping key* of a JSON-like value.
* :func:`template_sequences` -- the unescaped ``${``/``%{`` sequences of a string as Terraform
  reads it; :func:`unexpected_templates` walks a synthesized ``cdk.tf.json`` document and
  returns those that gpucluster did not generate (``gpucluster_cdk.stacks.synth`` refuses to write such output).

This module imports neither cdktf nor ``gpucluster`` (plain ``gpucluster_cdk.constructs_lib`` helper).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

__all__ = [
    "literal",
    "literal_tree",
    "template_sequences",
    "unexpected_templates",
    "GENERATED_EXPRESSION",
]


def literal(text: str) -> str:
    """``text`` spelled so that Terraform reads it back unchanged: ``${`` -> ``$${``, ``%{`` -> ``%%{``.

    Args:
        text: any string (a cluster-file value, a Helm values document, a chart name).

    Returns:
        the escaped string; Terraform's template parser turns it back into ``text``.

    Raises:
        TypeError: ``text`` is not a ``str`` (a token or object must not be escaped).
    """
    if not isinstance(text, str):
        raise TypeError(f"literal() takes a str, not {type(text).__name__}")
    return text.replace("${", "$${").replace("%{", "%%{")


def literal_tree(value: Any) -> Any:
    """:func:`literal` applied to every string and every mapping key of ``value`` (dicts, lists,
    tuples; other scalars unchanged). Returns a new value; mapping order is kept."""
    if isinstance(value, str):
        return literal(value)
    if isinstance(value, dict):
        return {literal(k) if isinstance(k, str) else k: literal_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(literal_tree(v) for v in value)
    return value


_SEQUENCE_OR_ESCAPE = re.compile(r"\$\$\{|%%\{|\$\{|%\{")
"""An escape (``$${``, ``%%{``) or a template sequence start (``${``, ``%{``); at one position an
escape wins, as in Terraform's scanner."""


def template_sequences(text: str) -> list[str]:
    """The template sequences Terraform would evaluate in ``text``: for each unescaped ``${`` or
    ``%{``, the text from it to the end of the string (empty list: ``text`` is a literal).

    Terraform's scanner (HCL templates) reads ``$${`` and ``%%{`` as escapes, every other ``$``
    or ``%`` as itself: ``$$${x}`` is ``$`` followed by the escape ``$${``. (The scan is one
    regular expression over the text, left to right, an escape consumed whole; a string without
    ``{`` is answered at once -- the check reads every string of every synthesized stack.)
    """
    if "{" not in text:
        return []
    return [
        text[m.start() :] for m in _SEQUENCE_OR_ESCAPE.finditer(text) if m.end() - m.start() == 2
    ]


GENERATED_EXPRESSION = re.compile(
    r"^\$\{\(*(?:"  # cdktf's Op.* wraps operands in parentheses
    r"(?:var|data|local|self|terraform|terraform_data|azurerm_[a-z0-9_]+|azapi_[a-z0-9_]+|helm_[a-z0-9_]+)\."  # references
    r"|(?:length|regexall|can|regex|base64decode|alltrue|lookup|sha256|base64gzip)\("  # functions gpucluster's constructs write
    r")"
)
"""The start of every expression gpucluster's constructs and cdktf write: references to
variables, data sources, resources of the azurerm/helm providers, ``self``, and the functions
used by variable validations, the AKS upgrade postcondition, cross-stack credentials, the fleet's
stage barriers (``terraform_data`` preconditions, ``alltrue``/``lookup``, ``azapi_resource`` ids) and
the Terraform-computed gate hashes (``sha256(jsonencode([...]))``, gpucluster_cdk.constructs_lib.helm.variable_hash_expression)."""

_LITERAL_CONTEXTS = {("variable", "default"), ("variable", "description")}


def _walk(value: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield path + ("<key>",), str(key)
            yield from _walk(item, path + (str(key),))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, path + (str(index),))


def unexpected_templates(document: dict) -> list[tuple[str, str]]:
    """Template sequences of a synthesized ``cdk.tf.json`` that gpucluster did not generate.

    Walks every string and object key, except the literal contexts (``variable.<name>.default``
    and ``.description``, which Terraform does not evaluate). A sequence is expected when it
    matches :data:`GENERATED_EXPRESSION`; a ``%{`` directive never is.

    Returns:
        ``(dotted JSON path, sequence cut to 80 characters)`` per unexpected sequence, in
        document order; empty when every user string arrived escaped.
    """
    problems: list[tuple[str, str]] = []
    for path, text in _walk(document, ()):
        if len(path) >= 3 and (path[0], path[2]) in _LITERAL_CONTEXTS:
            continue
        for seq in template_sequences(text):
            if seq.startswith("${") and GENERATED_EXPRESSION.match(seq):
                continue
            problems.append((".".join(path), seq[:80]))
    return problems


CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""C0/C1 control characters (newline, carriage return, ESC, NUL, ...), DEL and the Unicode line
and paragraph separators: never part of a Terraform or Kubernetes name or attribute gpucluster
writes, except inside a ``helm_release``'s ``values`` documents (YAML text)."""


def unexpected_controls(document: dict) -> list[tuple[str, str]]:
    """Strings and object keys of a synthesized ``cdk.tf.json`` holding a :data:`CONTROL_CHARACTER`,
    except the items of a ``values`` list (the YAML documents Helm receives, multi-line by nature).

    A value with a trailing newline (``name: |``, ``region: "westus3\\n"``) is refused where the
    cluster file is validated; this is the check that no field was missed.

    Returns:
        ``(dotted JSON path, the string's ``repr`` cut to 80 characters)`` per string, in document order.
    """
    problems: list[tuple[str, str]] = []
    for path, text in _walk(document, ()):
        if len(path) >= 2 and path[-2] == "values" and path[-1].isdigit():
            continue
        if CONTROL_CHARACTER.search(text):
            problems.append((".".join(path), repr(text)[:80]))
    return problems

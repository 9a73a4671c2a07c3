"""Canonical hashes of plan data: :func:`fingerprint` (sha256 of canonical JSON) and the value
Terraform computes for a :class:`~gpucluster.model.VariableHash` (:func:`evaluate_variable_hash`).

A leaf module (it imports only :mod:`gpucluster.model`): :mod:`gpucluster.charts.gates` (the DRA driver
identity hash) and :mod:`gpucluster.charts.graph` (the gates' ``gatedHash``) both use it, and neither
imports the other for it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gpucluster.model import VariableHash


def fingerprint(data: Any) -> str:
    """sha256 hex of canonical JSON of ``data`` (sorted keys, no whitespace variance)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_TF_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def terraform_jsonencode(value: Any) -> str:
    """``jsonencode(value)`` as Terraform writes it: compact JSON, UTF-8, and ``<``, ``>``, ``&``,
    U+2028, U+2029 as ``\\u`` escapes (Terraform docs, ``jsonencode``). Scalars, lists and string-keyed
    maps of them; keys sorted like Terraform's map encoding."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escape in _TF_JSON_ESCAPES.items():
        text = text.replace(char, escape)
    return text


def evaluate_variable_hash(vh: VariableHash) -> str:
    """The value Terraform computes for ``vh`` when every variable has its default (None = null).

    Equal to ``sha256(jsonencode([base, var.v1, ...]))`` in Terraform (checked with real terraform
    in tests/test_gate_variables.py)."""
    text = terraform_jsonencode([vh.base, *[default for _, default in vh.variables]])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()

"""gpucluster_cdk.constructs_lib.tfstring: the one escaping function, checked against the real Terraform parser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucluster_cdk.constructs_lib.tfstring import (
    literal,
    literal_tree,
    template_sequences,
    unexpected_templates,
)

SAMPLES = [
    '${file("/etc/hostname")}',
    "%{ if true }x%{ endif }",
    "$${already}",
    "$$${x}",
    "a$b%c$$d%%e",
    "$",
    "%",
    "${",
    "%{",
    "trailing $",
    "ünïcødé ${x} \u202e",
    "${HOME}:%{x}:$${y}:%%{z}",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_literal_leaves_no_template_sequence(text):
    assert template_sequences(literal(text)) == []


def test_template_sequences_reads_like_terraform():
    assert template_sequences("${a}") == ["${a}"]
    assert template_sequences("$${a}") == []
    assert template_sequences("$$${a}") == []  # '$' then the escape '$${'
    assert template_sequences("x%{ if }") == ["%{ if }"]
    assert template_sequences("$ {a} % {b}") == []


def _scan_like_terraform(text: str) -> list[str]:
    """Terraform's template scanner, one character at a time: ``$${``/``%%{`` are escapes (three
    characters consumed), ``${``/``%{`` start a sequence, any other character is itself."""
    found, i = [], 0
    while i < len(text):
        if text[i] in "$%":
            if text.startswith(text[i] * 2 + "{", i):
                i += 3
                continue
            if text.startswith(text[i] + "{", i):
                found.append(text[i:])
                i += 2
                continue
        i += 1
    return found


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="$%{}ab ", max_size=24) | st.text(max_size=40))
def test_template_sequences_scans_as_terraform_does(text):
    """The one-regex scan equals the character-by-character scanner on any text (runs of ``$``,
    ``%`` and braces included)."""
    assert template_sequences(text) == _scan_like_terraform(text)


def test_literal_tree_escapes_keys_and_values():
    assert literal_tree({"${k}": ["%{v}", 1, True], "n": None}) == {
        "$${k}": ["%%{v}", 1, True],
        "n": None,
    }


def test_literal_refuses_non_strings():
    with pytest.raises(TypeError):
        literal(1)  # type: ignore[arg-type]


def test_unexpected_templates_allows_generated_expressions_and_variable_defaults():
    doc = {
        "variable": {
            "v": {
                "default": '${file("x")}',
                "description": "%{ if }",
                "validation": [{"condition": '${length(regexall("a", var.v)) == 0}'}],
            }
        },
        "resource": {"helm_release": {"r": {"values": ["$${ok}"], "name": "${var.v}"}}},
        "output": {"o": {"value": "${azurerm_kubernetes_cluster.a.id}"}},
    }
    assert unexpected_templates(doc) == []
    doc["resource"]["helm_release"]["r"]["chart"] = '${file("/etc/passwd")}'
    doc["resource"]["helm_release"]["r"]["set"] = [{"name": "%{ if true }"}]
    doc["resource"]["helm_release"]["r"]["tags"] = {"${k}": "v"}
    found = unexpected_templates(doc)
    assert [p for p, _ in found] == [
        "resource.helm_release.r.chart",
        "resource.helm_release.r.set.0.name",
        "resource.helm_release.r.tags.<key>",
    ]


@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform CLI not installed")
def test_terraform_reads_literal_back_unchanged(tmp_path):
    """Provider-less plan: each escaped sample, as an output value and as an object key, is the
    original text; a variable default is not a template (passed raw, read back raw)."""
    outputs = {f"o{i}": {"value": literal(t)} for i, t in enumerate(SAMPLES)}
    outputs["keys"] = {"value": {literal(t): str(i) for i, t in enumerate(SAMPLES)}}
    outputs["var"] = {"value": "${var.raw}"}
    doc = {
        "variable": {"raw": {"type": "string", "default": SAMPLES[0] + SAMPLES[1]}},
        "output": outputs,
    }
    (tmp_path / "main.tf.json").write_text(json.dumps(doc), encoding="utf-8")
    env = {
        **os.environ,
        "TF_CLI_CONFIG_FILE": "/dev/null",
        "CHECKPOINT_DISABLE": "1",
        "TF_IN_AUTOMATION": "1",
    }

    def tf(*args):
        return subprocess.run(
            ["terraform", *args], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
        )

    tf("init", "-input=false", "-no-color")
    tf("apply", "-auto-approve", "-input=false", "-no-color")
    got = json.loads(tf("output", "-json").stdout)
    for i, text in enumerate(SAMPLES):
        assert got[f"o{i}"]["value"] == text
    assert got["keys"]["value"] == {t: str(i) for i, t in enumerate(SAMPLES)}
    assert got["var"]["value"] == SAMPLES[0] + SAMPLES[1]

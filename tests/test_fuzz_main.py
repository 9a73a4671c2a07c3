"""The cluster file end to end: every string field reaches Terraform escaped, and real ``main.py`` runs
keep the contract (issue 13).

* :func:`test_every_string_field_of_the_schema_arrives_escaped` walks every string field of the
  cluster-file schema (:data:`STRING_FIELDS`, checked against ``gpucluster.inputs.config``'s key tables)
  with a Terraform payload ``${var.<probe>}`` / ``%{ if <probe> }``. Each field is either refused
  with one ``error[...]`` line, or accepted; the accepted ones are then synthesized together and
  no probe may appear in ``cdk.tf.json`` as an unescaped template sequence -- while each must
  appear (escaped, or raw in a variable default, which Terraform does not evaluate), so the test
  cannot pass by losing the value.
* :func:`test_main_py_keeps_the_contract` runs the real script on seeded mutated cluster files
  (fast profile: a few; ``make fuzz``: more) with a previous output in place.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import fuzz_cluster as fc
from _support import run_main, tree
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from test_fuzz_cluster_file import LINE, LONG, SEED

from gpucluster.errors import GpuclusterError
from gpucluster.inputs import config
from gpucluster_cdk.constructs_lib.tfstring import template_sequences

ROOT = Path(__file__).resolve().parents[1]
MAIN_EXAMPLES = int(os.environ.get("GPUCLUSTER_FUZZ_MAIN_EXAMPLES", "60" if LONG else "6"))

BASE = {
    "backend": {
        "type": "cloud",
        "organization": "acme",
        "workspacePrefix": "gpu-",
        "hostname": "app.terraform.io",
        "project": "GPU Platform",
    },
    "clusters": [
        {
            "name": "lab",
            "criteria": {
                "service": "aks",
                "accelerator": "h100",
                "os": "ubuntu",
                "intent": "training",
                "platform": "any",
            },
            "profile": {"gpuStack": "operator-managed"},
            "region": "westus3",
            "kubernetesVersion": "1.34",
            "pools": [
                {
                    "name": "system",
                    "vmSize": "Standard_D8s_v5",
                    "nodeCount": 2,
                    "gpu": False,
                    "labels": {"example.com/tier": "system"},
                },
                {
                    "name": "gpu",
                    "vmSize": "Standard_ND96isr_H100_v5",
                    "nodeCount": 1,
                    "gpuDriver": "None",
                    "labels": {"example.com/team": "ml"},
                    "taints": ["nvidia.com/gpu=present:NoSchedule"],
                },
            ],
            "overrides": {
                "set": ["gpuoperator:dcgmExporter.serviceMonitor.interval=60s"],
                "values": [
                    {"component": "gpu-operator", "values": {"gpucluster_fuzz": "plain"}},
                    {"component": "gpu-operator", "file": "values/gpu-operator.yaml"},
                ],
                "variables": {"gpuoperator:driver.version": "gpu_driver_version"},
            },
            "scheduling": {"system": {"nodeSelector": {"example.com/tier": "system"}}},
            "settings": {"gateImage": "myacr.azurecr.io/kubectl:v1.34.1@sha256:" + "0" * 64},
        },
        {
            "name": "edge",
            "criteria": {
                "service": "aks",
                "accelerator": "h100",
                "os": "ubuntu",
                "intent": "inference",
            },
            "existing": {"kubeconfig": "/etc/kube/config", "context": "edge-admin"},
            "scheduling": {"accelerated": {"tolerations": ["nvidia.com/gpu:NoSchedule"]}},
        },
    ],
}

STRING_FIELDS: list[tuple] = [
    ("backend", "organization"),
    ("backend", "workspacePrefix"),
    ("backend", "hostname"),
    ("backend", "project"),
    ("backend", "type"),
    ("clusters", 0, "name"),
    *[
        ("clusters", 0, "criteria", k)
        for k in ("service", "accelerator", "os", "intent", "platform")
    ],
    ("clusters", 0, "profile", "gpuStack"),
    ("clusters", 0, "region"),
    ("clusters", 0, "kubernetesVersion"),
    ("clusters", 0, "pools", 1, "name"),
    ("clusters", 0, "pools", 1, "vmSize"),
    ("clusters", 0, "pools", 1, "gpuDriver"),
    ("clusters", 0, "pools", 1, "replaces"),
    ("clusters", 0, "pools", 1, "labels", "example.com/team"),
    ("clusters", 0, "pools", 1, "labels", "<key>"),
    ("clusters", 0, "pools", 1, "taints", 0),
    ("clusters", 0, "overrides", "set", 0),
    ("clusters", 0, "overrides", "values", 0, "component"),
    ("clusters", 0, "overrides", "values", 0, "values", "gpucluster_fuzz"),
    ("clusters", 0, "overrides", "values", 0, "values", "<key>"),
    ("clusters", 0, "overrides", "values", 1, "file"),
    ("clusters", 0, "overrides", "variables", "gpuoperator:driver.version"),
    ("clusters", 0, "overrides", "variables", "<key>"),
    ("clusters", 0, "scheduling", "system", "nodeSelector", "example.com/tier"),
    ("clusters", 0, "settings", "gateImage"),
    ("clusters", 1, "existing", "kubeconfig"),
    ("clusters", 1, "existing", "context"),
    ("clusters", 1, "scheduling", "accelerated", "tolerations", 0),
    ("clusters", 0, "recipe"),
    ("clusters", 0, "versionSkew"),
]
"""Every string field of the cluster-file schema (``<key>``: the mapping key itself). ``recipe``
replaces ``criteria`` (the two exclude each other)."""


def probe(i: int) -> str:
    return f"x${{var.{fc.PROBE}_{i}}}%{{ if {fc.PROBE}_{i} }}y"


def with_payload(doc: dict, path: tuple, payload: str) -> dict:
    doc = copy.deepcopy(doc)
    node = doc
    for step in path[:-1]:
        node = node[step]
    if path[-1] == "<key>":
        key = next(iter(node))
        node[payload] = node.pop(key)
    else:
        if path[-1] == "recipe":
            node.pop("criteria", None)
        node[path[-1]] = payload
    return doc


def plan_or_error(doc: dict, folder: Path):
    """(plans, fleet) or the GpuclusterError of loading and planning ``doc`` from ``folder``."""
    from gpucluster.pipeline import build_plans

    path = folder / "gpucluster.yaml"
    path.write_text(fc.dump(doc), encoding="utf-8")
    try:
        clusters, fleet = config.load_config(str(path))
        return build_plans(clusters), fleet
    except GpuclusterError as err:
        return err


def test_string_fields_cover_the_schema():
    """Every string-valued key of the schema tables is walked (a new string key must be added)."""
    walked = {p[-1] for p in STRING_FIELDS} | {
        p[-2] for p in STRING_FIELDS if p[-1] == "<key>" or isinstance(p[-1], int)
    }
    for key in ("name", "recipe", "region", "kubernetesVersion"):
        assert key in walked and key in config.CLUSTER_KEYS
    assert {"vmSize", "name", "gpuDriver", "labels", "taints", "replaces"} <= walked and set(
        config.POOL_KEYS
    ) - walked <= {"nodeCount", "gpu", "managedGpu"}
    assert set(config.EXISTING_KEYS) <= walked


def test_every_string_field_of_the_schema_arrives_escaped(tmp_path):
    from gpucluster_cdk import stacks

    folder = tmp_path / "project"
    folder.mkdir()
    fc.lay_out_project(folder)
    base = plan_or_error(BASE, folder)
    assert not isinstance(base, GpuclusterError), base.render()
    accepted, refused = [], []
    for i, path in enumerate(STRING_FIELDS):
        result = plan_or_error(with_payload(BASE, path, probe(i)), folder)
        if isinstance(result, GpuclusterError):
            for line in result.render().splitlines():
                assert LINE.match(line), line
            refused.append(path)
        else:
            accepted.append((i, path))
    assert accepted, "no field accepted a payload: nothing would reach Terraform"
    doc = BASE
    for i, path in accepted:
        doc = with_payload(doc, path, probe(i))
    result = plan_or_error(doc, folder)
    assert not isinstance(result, GpuclusterError), result.render()
    plans, fleet = result
    out = tmp_path / "cdktf.out"
    stacks.synth(plans, out, fleet=fleet)  # also runs the product's own injection check
    strings, evaluated = [], []
    for stack in sorted((out / "stacks").iterdir()):
        document = json.loads((stack / "cdk.tf.json").read_text())
        strings += list(_strings(document))
        evaluated += [
            f"{stack.name}:{where}={text}" for where, text in _evaluated_strings(document)
        ]
    text = "\n".join(strings)
    for i, path in accepted:
        marker = f"{fc.PROBE}_{i}"
        unescaped = [
            s for s in evaluated for seq in template_sequences(s.split("=", 1)[1]) if marker in seq
        ]
        assert unescaped == [], (
            f"{'.'.join(map(str, path))} reached Terraform unescaped: {unescaped[:2]}"
        )
        assert marker in text, (
            f"{'.'.join(map(str, path))} was accepted but its value never reached Terraform"
        )
    print(
        f"\nstring fields: {len(STRING_FIELDS)}; refused with one line: {len(refused)}; accepted and escaped: "
        f"{len(accepted)} ({', '.join('.'.join(map(str, p)) for _, p in accepted)})"
    )


def _evaluated_strings(value, path=()):
    """(dotted path, string) of every string and key Terraform reads as a template: all but a
    ``variable`` block's ``default`` and ``description`` (literal; verified in tests/test_tfstring.py)."""
    if len(path) >= 3 and path[0] == "variable" and path[2] in ("default", "description"):
        return
    if isinstance(value, str):
        yield ".".join(map(str, path)), value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield ".".join(map(str, path + ("<key>",))), str(k)
            yield from _evaluated_strings(v, path + (str(k),))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _evaluated_strings(v, path + (i,))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


@settings(
    max_examples=MAIN_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@seed(SEED + 10)
@given(fc.mutated_documents())
def test_main_py_keeps_the_contract(doc):
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gpucluster-fuzz-main-") as name:
        folder = Path(name)
        fc.lay_out_project(folder)
        (folder / "gpucluster.yaml").write_text(fc.dump(doc), encoding="utf-8")
        out = folder / "cdktf.out"
        (out / "stacks" / "old-runtime").mkdir(parents=True)
        (out / "stacks" / "old-runtime" / "cdk.tf.json").write_text('{"old": true}')
        (out / "manifest.json").write_text('{"stacks": {}}')
        before = tree(out)
        proc = run_main(
            cwd=folder,
            outdir=out,
            config=folder / "gpucluster.yaml",
            timeout=600,
            TMPDIR=str(folder),
        )
        where = f"\n--- input ---\n{fc.dump(doc)[:2000]}\n--- stderr ---\n{proc.stderr[:3000]}"
        assert "Traceback" not in proc.stderr, where
        assert proc.returncode in (0, 2), where
        for line in proc.stderr.splitlines():
            assert LINE.match(line), f"{line[:300]!r}{where}"
        if proc.returncode == 2:
            assert tree(out) == before, where
            assert (
                sorted(p.name for p in out.parent.iterdir() if p.name.startswith(".cdktf.out"))
                == []
            ), where
        else:
            for stack in (out / "stacks").iterdir():
                document = json.loads((stack / "cdk.tf.json").read_text())
                bad = [
                    s
                    for s in _strings(document)
                    for seq in template_sequences(s)
                    if fc.PROBE in seq
                ]
                assert bad == [], f"{bad[:2]}{where}"
        assert not re.search(r"gpucluster_probe", " ".join(os.listdir("/tmp"))), (
            "a shell payload ran"
        )


@settings(
    max_examples=max(MAIN_EXAMPLES // 2, 3),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@seed(SEED + 11)
@given(st.data())
def test_main_py_never_writes_a_control_character_outside_values(data):
    """A valid document with a control character (a trailing newline, mostly, as YAML block
    scalar) in one of its strings: main.py exits 2 with one contract line (never error[internal]
    exit 70, as name: | did), or synthesizes stacks whose every string but a helm_release values
    document is free of control characters."""
    import tempfile

    from gpucluster_cdk.constructs_lib.tfstring import unexpected_controls

    doc = data.draw(fc.control_character_mutations(data.draw(fc.valid_documents())))
    text = fc.dump_block(doc)
    with tempfile.TemporaryDirectory(prefix="gpucluster-fuzz-main-") as name:
        folder = Path(name)
        (folder / "gpucluster.yaml").write_text(text, encoding="utf-8")
        out = folder / "cdktf.out"
        proc = run_main(
            cwd=folder,
            outdir=out,
            config=folder / "gpucluster.yaml",
            timeout=600,
            TMPDIR=str(folder),
        )
        where = f"\n--- input ---\n{text[:2000]}\n--- stderr ---\n{proc.stderr[:3000]}"
        assert (
            proc.returncode in (0, 2)
            and "Traceback" not in proc.stderr
            and "error[internal]" not in proc.stderr
        ), where
        for line in proc.stderr.splitlines():
            assert LINE.match(line), f"{line[:300]!r}{where}"
        if proc.returncode == 0:
            for stack in (out / "stacks").iterdir():
                found = unexpected_controls(json.loads((stack / "cdk.tf.json").read_text()))
                assert found == [], f"{found[:2]}{where}"

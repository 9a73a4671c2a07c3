"""Gates follow every change that reaches the gated release, install-time Terraform variables
included (issue 11, item 1), and the DRA kubelet plugin re-rolls exactly when the driver does.

A variable bound with ``variables: {"gpuoperator:driver.version": gpu_driver_version}`` reaches
gpu-operator through a Helm ``set`` entry chosen at plan time, so a hash computed at synth cannot
see it. The gate's ``gatedHash`` (and the DRA driver-identity annotation) is therefore a ``set``
entry Terraform computes, ``sha256(jsonencode([seed, var.gpu_driver_version]))``. The real
``terraform`` 1.11 (no provider download) plans the synthesized expressions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpucluster import hashing, pipeline
from gpucluster.charts import gates, graph
from gpucluster.inputs.config import parse_clusters
from gpucluster.model import VariableHash
from gpucluster_cdk import stacks

CP_GATE = "gpu-operator-clusterpolicy-ready"
DRA_GATE = "nvidia-dra-driver-gpu-kubelet-plugin-rollout"
DRA = "nvidia-dra-driver-gpu"
DRIVER_VAR = "gpu_driver_version"
OTHER_VAR = "dcgm_interval"


def cluster_doc(**extra):
    doc = {
        "name": "lab",
        "criteria": {"service": "aks", "accelerator": "h100", "intent": "training"},
        "profile": {"gpuStack": "operator-managed"},
        "existing": {"kubeconfig": "~/.kube/config"},
        "scheduling": {"accelerated": {"tolerations": ["nvidia.com/gpu:NoSchedule"]}},
        "overrides": {
            "variables": {
                "gpuoperator:driver.version": DRIVER_VAR,
                "gpuoperator:dcgmExporter.serviceMonitor.interval": OTHER_VAR,
            }
        },
    }
    doc.update(extra)
    return doc


def build(tmp_path: Path, **extra):
    (spec,) = parse_clusters(
        {"clusters": [cluster_doc(**extra)]}, source="clusters.yaml", root=tmp_path
    )
    return pipeline.build_plan(spec)


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    return build(tmp_path_factory.mktemp("plan"))


@pytest.fixture(scope="module")
def runtime(plan, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("synth") / "cdktf.out"
    assert stacks.synth([plan], out) == ["lab-runtime"]
    return json.loads((out / "stacks" / "lab-runtime" / "cdk.tf.json").read_text())


def set_entry(doc: dict, release: str, name: str) -> dict:
    (entry,) = [
        s for s in doc["resource"]["helm_release"][release].get("set", []) if s["name"] == name
    ]
    return entry


# --------------------------------------------------------------------------- plan data


def test_gate_hash_is_computed_from_the_variables(plan):
    node = plan.node(CP_GATE)
    vh = node.variable_hashes["gatedHash"]
    assert [name for name, _ in vh.variables] == [OTHER_VAR, DRIVER_VAR]
    assert (
        dict(vh.variables)[DRIVER_VAR]
        == plan.components["gpu-operator"].values["driver"]["version"]
    )
    assert node.values["gatedHash"] == hashing.evaluate_variable_hash(
        vh
    )  # the values hold the defaults' value


def test_dra_identity_reads_only_the_driver_variable(plan):
    vh = plan.node(DRA).variable_hashes[gates.DRIVER_IDENTITY_PATH]
    assert [name for name, _ in vh.variables] == [DRIVER_VAR]
    # and the DRA gate follows it too: the variable reaches the DRA release
    assert [name for name, _ in plan.node(DRA_GATE).variable_hashes["gatedHash"].variables] == [
        DRIVER_VAR
    ]


def test_no_variables_no_set_entry(tmp_path):
    plain = build(tmp_path, overrides={})
    assert all(not n.variable_hashes for n in plain.nodes)
    node = plain.node(CP_GATE)
    assert node.values["gatedHash"] == graph.component_fingerprint(
        plain.components["gpu-operator"],
        {
            (n.component, "pre" if n.kind == "pre-manifests" else "post"): n.local_chart
            for n in plain.nodes
            if n.kind in ("pre-manifests", "manifests")
        },
    )


def test_synthesized_set_entries(runtime):
    gate = set_entry(runtime, CP_GATE, "gatedHash")
    assert gate["type"] == "string"
    assert (
        gate["value"].startswith('${sha256(jsonencode(["') and f"var.{DRIVER_VAR}" in gate["value"]
    )
    dra = set_entry(runtime, DRA, gates.DRIVER_IDENTITY_PATH)
    assert f"var.{DRIVER_VAR}" in dra["value"] and f"var.{OTHER_VAR}" not in dra["value"]
    assert DRIVER_VAR in runtime["variable"] and OTHER_VAR in runtime["variable"]


# --------------------------------------------------------------------------- real terraform plan


def _terraform(tmp: Path, doc: dict, outputs: dict[str, str]):
    config = {
        "variable": {name: doc["variable"][name] for name in (DRIVER_VAR, OTHER_VAR)},
        "output": {key: {"value": expr} for key, expr in outputs.items()},
    }
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "main.tf.json").write_text(json.dumps(config))
    env = dict(
        os.environ, TF_CLI_CONFIG_FILE="/dev/null", CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1"
    )

    def tf(*args):
        proc = subprocess.run(
            ["terraform", *args, "-no-color"],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    tf("init", "-input=false")

    def plan(**variables) -> dict[str, str]:
        tf("plan", "-input=false", "-out=tfplan", *[f"-var={k}={v}" for k, v in variables.items()])
        shown = json.loads(tf("show", "-json", "tfplan"))
        return {k: v["value"] for k, v in shown["planned_values"]["outputs"].items()}

    return plan


@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform CLI not installed")
def test_terraform_plan_changes_the_gate_when_the_variable_changes(plan, runtime, tmp_path):
    outputs = {
        "cp_gate": set_entry(runtime, CP_GATE, "gatedHash")["value"],
        "dra_gate": set_entry(runtime, DRA_GATE, "gatedHash")["value"],
        "dra_identity": set_entry(runtime, DRA, gates.DRIVER_IDENTITY_PATH)["value"],
    }
    terraform_plan = _terraform(tmp_path, runtime, outputs)

    defaults = terraform_plan()
    # at the defaults Terraform computes what the values document carries
    assert defaults["cp_gate"] == plan.node(CP_GATE).values["gatedHash"]
    assert defaults["dra_gate"] == plan.node(DRA_GATE).values["gatedHash"]
    assert (
        defaults["dra_identity"]
        == plan.components[DRA].values["kubeletPlugin"]["podAnnotations"][
            gates.DRIVER_IDENTITY_ANNOTATION
        ]
    )

    driver = terraform_plan(**{DRIVER_VAR: "600.10.01"})
    assert driver["cp_gate"] != defaults["cp_gate"]
    assert (
        driver["dra_identity"] != defaults["dra_identity"]
        and driver["dra_gate"] != defaults["dra_gate"]
    )
    vh = plan.node(CP_GATE).variable_hashes["gatedHash"]
    changed = VariableHash(
        vh.base, tuple((n, "600.10.01" if n == DRIVER_VAR else d) for n, d in vh.variables)
    )
    assert driver["cp_gate"] == hashing.evaluate_variable_hash(changed)

    other = terraform_plan(**{OTHER_VAR: "90s"})
    assert (
        other["cp_gate"] != defaults["cp_gate"]
    )  # every change reaching gpu-operator re-runs its gate
    assert (
        other["dra_identity"] == defaults["dra_identity"]
    )  # ... but only a driver change re-rolls the plugin
    assert other["dra_gate"] == defaults["dra_gate"]


@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform CLI not installed")
def test_terraform_jsonencode_matches_python(tmp_path):
    """The Python twin of jsonencode escapes what Terraform escapes (so defaults hash alike)."""
    value = 'a<b>&c\u2028é"\\'
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "main.tf.json").write_text(
        json.dumps(
            {
                "variable": {
                    "s": {"type": "string", "default": value},
                    "n": {"type": "number", "default": 2},
                    "b": {"type": "bool", "default": True},
                },
                "output": {
                    "h": {"value": '${sha256(jsonencode(["seed", var.s, var.n, var.b, null]))}'}
                },
            }
        )
    )
    env = dict(
        os.environ, TF_CLI_CONFIG_FILE="/dev/null", CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1"
    )
    for args in (["init", "-input=false"], ["plan", "-input=false", "-out=tfplan"]):
        assert (
            subprocess.run(
                ["terraform", *args], cwd=tmp_path, env=env, capture_output=True, timeout=120
            ).returncode
            == 0
        )
    shown = json.loads(
        subprocess.run(
            ["terraform", "show", "-json", "tfplan"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    )
    want = hashing.evaluate_variable_hash(
        VariableHash("seed", (("s", value), ("n", 2), ("b", True), ("z", None)))
    )
    assert shown["planned_values"]["outputs"]["h"]["value"] == want

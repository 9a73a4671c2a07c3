"""String values bound to Terraform variables reach Helm through a ``set`` entry of type
``string`` (Helm ``--set-string``), which splits on commas, treats ``\\`` as an escape and reads
``{a,b}`` as a list. hashicorp/helm 3.1.1's ``literal`` type cannot replace it: it YAML-parses the
value and stores it under the whole name as ONE top-level key (``driver.version`` is not nested),
so every gpucluster path (always dotted) would miss the chart. The variable therefore refuses
such values at plan time with a validation block (docs/synth.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from test_constructs_helm import releases, synth

from gpucluster_cdk.constructs_lib.helm import HelmComponent, HelmComponentProps
from gpucluster_cdk.stacks.runtime import values_props


@pytest.fixture(scope="module")
def doc() -> dict:
    def build(stack):
        HelmComponent(
            stack,
            "op",
            HelmComponentProps(
                release_name="gpu-operator",
                namespace="gpu-operator",
                chart="gpu-operator",
                repository="https://helm.ngc.nvidia.com/nvidia",
                version="v26.7.1",
                **values_props(
                    {"driver": {"version": "580.126.09"}, "dcgm": {"enabled": True}, "replicas": 2},
                    {
                        "driver.version": "gpu_driver_version",
                        "dcgm.enabled": "dcgm_enabled",
                        "replicas": "replicas",
                        "nodeName": "node_name",
                    },
                ),
            ),
        )

    return synth(build)


def test_string_variables_validate_their_value(doc):
    for name in ("gpu_driver_version", "node_name"):  # with and without a default
        (validation,) = doc["variable"][name]["validation"]
        assert "regexall" in validation["condition"] and f"var.{name}" in validation["condition"]
        assert (
            "comma" in validation["error_message"]
            and "overrides.values" in validation["error_message"]
        )


def test_bool_and_number_variables_have_no_validation(doc):
    assert "validation" not in doc["variable"]["dcgm_enabled"]
    assert "validation" not in doc["variable"]["replicas"]


def test_set_entries_keep_the_string_type(doc):
    rel = releases(doc)["gpu-operator"]
    assert {s["name"]: s["type"] for s in rel["set"]} == {
        "dcgm.enabled": "auto",
        "driver.version": "string",
        "nodeName": "string",
        "replicas": "auto",
    }


@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform CLI not installed")
@pytest.mark.parametrize(
    "value, ok",
    [
        ("580.126.09", True),
        ("registry.example.com/driver:580", True),
        ("a=b", True),
        ("580,581", False),
        ("a\\b", False),
        ("{a}", False),
    ],
)
def test_terraform_plan_refuses_values_helm_would_split(doc, tmp_path, value, ok):
    """Real Terraform (no provider download): the synthesized variable block alone."""
    config = {
        "variable": {"gpu_driver_version": doc["variable"]["gpu_driver_version"]},
        "output": {"v": {"value": "${var.gpu_driver_version}"}},
    }
    (tmp_path / "main.tf.json").write_text(json.dumps(config))
    env = dict(
        os.environ, TF_CLI_CONFIG_FILE="/dev/null", CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1"
    )

    def tf(*args):
        return subprocess.run(
            ["terraform", *args, "-input=false", "-no-color"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert tf("init").returncode == 0
    plan = tf("plan", f"-var=gpu_driver_version={value}")
    assert (plan.returncode == 0) is ok, plan.stdout + plan.stderr
    if not ok:
        assert "gpu_driver_version" in plan.stderr and "comma" in " ".join(plan.stderr.split())


def test_a_default_helm_would_split_fails_synth():
    from gpucluster_cdk.constructs_lib.cdk import validation_errors

    def build(stack):
        HelmComponent(
            stack,
            "op",
            HelmComponentProps(
                release_name="gpu-operator",
                namespace="gpu-operator",
                chart="gpu-operator",
                repository="https://helm.ngc.nvidia.com/nvidia",
                version="v26.7.1",
                **values_props({"driver": {"args": "a,b"}}, {"driver.args": "driver_args"}),
            ),
        )

    with pytest.raises(Exception) as exc:
        synth(build)
    text = " ".join(validation_errors(exc.value) or [str(exc.value)])
    assert (
        "values path 'driver.args' of release 'gpu-operator' is bound to Terraform variable 'driver_args'"
        in text
    )
    assert "'a,b' has a comma" in text

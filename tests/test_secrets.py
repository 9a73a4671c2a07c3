"""Secrets (docs/cluster-file.md, "Secrets"): a literal credential in a values file is a
VALUES-CREDENTIAL warning at plan and synth, and a synthesis holding one writes its output 0700/0600
(was: cdk.tf.json 0644 and no word); fleet.hub.kubeconfig follows the rules of existing.kubeconfig."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest
import yaml

import _support
from _support import EXISTING_AKS

from gpucluster.cli import main as cli_main
from gpucluster.values import credential_paths

ROOT = Path(__file__).resolve().parents[1]


def test_credential_paths_are_literal_strings_under_credential_keys():
    values = {"adminPassword": "hunter2", "grafana": {"apiToken": "t", "existingSecret": "s", "passwordKey": "k"},
              "clientSecret": "", "secretName": "n", "token": 3, "a": {"privateKey": "-----BEGIN"}, "enabled": True}
    assert credential_paths(values) == [("a", "privateKey"), ("adminPassword",), ("grafana", "apiToken")]


def _with_values(tmp_path: Path, text: str) -> Path:
    (tmp_path / "v.yaml").write_text(text)
    (tmp_path / "gpucluster.yaml").write_text(
        EXISTING_AKS + "    overrides:\n      values:\n        - {component: gpu-operator, file: v.yaml}\n")
    return tmp_path / "gpucluster.yaml"


def test_plan_warns_about_a_literal_credential_and_not_otherwise(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["plan", "--config", str(_with_values(tmp_path, "x: {apiToken: s3cret}\n"))], stdout=out, stderr=err) == 0
    [line] = [line for line in err.getvalue().splitlines() if "VALUES-CREDENTIAL" in line]
    assert line.startswith("warning[VALUES-CREDENTIAL] cluster=lab component=gpu-operator key=x.apiToken: "), line
    assert "s3cret" not in line and " fix: bind it to a Terraform variable" in line
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["plan", "--config", str(_with_values(tmp_path, "x: {existingSecret: mine}\n"))], stdout=out, stderr=err) == 0
    assert "VALUES-CREDENTIAL" not in err.getvalue()


def _modes(root: Path) -> set[tuple[str, int]]:
    return {("d" if p.is_dir() else "f", stat.S_IMODE(p.stat().st_mode)) for p in [root, *root.rglob("*")]}


@pytest.mark.parametrize("values, private", [("adminPassword: hunter2\n", True), ("x: 1\n", False)])
def test_synthesized_output_holding_a_credential_is_private(tmp_path, values, private):
    config = _with_values(tmp_path, values)
    out = tmp_path / "cdktf.out"
    result = _support.run_main(cwd=tmp_path, outdir=out, config=config)
    assert result.returncode == 0, result.stderr
    assert ("warning[VALUES-CREDENTIAL]" in result.stderr) is private
    modes = _modes(out)
    if private:
        assert modes == {("d", 0o700), ("f", 0o600)}, modes
        assert "hunter2" in (out / "stacks" / "lab-runtime" / "cdk.tf.json").read_text()  # kept, as decided
    else:
        assert ("d", 0o700) not in modes or ("f", 0o600) not in modes, modes


@pytest.mark.parametrize("kubeconfig, said", [("relative/kc", "is a relative path"), ("/ok\n", "control characters"),
                                              (" /x", "surrounding whitespace")])
def test_the_fleet_hub_kubeconfig_follows_the_existing_kubeconfig_rules(tmp_path, kubeconfig, said):
    doc = yaml.safe_load((ROOT / "examples" / "fleet-canary-prod.yaml").read_text())
    doc["fleet"].setdefault("hub", {})["kubeconfig"] = kubeconfig
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(doc))
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["plan", "--config", str(tmp_path / "c.yaml")], stdout=out, stderr=err) == 2
    [line] = err.getvalue().splitlines()
    assert "key=fleet.hub.kubeconfig: fleet.hub.kubeconfig " in line and said in line, line


@pytest.mark.parametrize("key", ["privateKey", "accessKey", "apiKey", "api_key", "sshPrivateKey"])
def test_keys_ending_in_key_that_are_credentials_are_found(key):
    """The rule excluded every key ending in 'key' (passwordKey names a Secret's key), privateKey and
    accessKey too, so they were never reported."""
    assert credential_paths({key: "x"}) == [(key,)]
    assert credential_paths({"passwordKey": "x", "secretKey": "y"}) == []

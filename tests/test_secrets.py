"""Secrets (docs/cluster-file.md, "Secrets"): a literal credential in a values file is a
VALUES-CREDENTIAL warning at plan and synth, and a synthesis holding one writes its output 0700/0600
(was: cdk.tf.json 0644 and no word); fleet.hub.kubeconfig follows the rules of existing.kubeconfig."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import _support
import pytest
import yaml
from _support import EXISTING_AKS

from gpucluster.cli import main as cli_main
from gpucluster.values import credential_paths

ROOT = Path(__file__).resolve().parents[1]


def test_credential_paths_are_literal_strings_under_credential_keys():
    values = {
        "adminPassword": "hunter2",
        "grafana": {"apiToken": "t", "existingSecret": "s", "passwordKey": "k"},
        "clientSecret": "",
        "secretName": "n",
        "token": 3,
        "a": {"privateKey": "-----BEGIN"},
        "enabled": True,
    }
    assert credential_paths(values) == [
        ("a", "privateKey"),
        ("adminPassword",),
        ("grafana", "apiToken"),
    ]


def _with_values(tmp_path: Path, text: str) -> Path:
    (tmp_path / "v.yaml").write_text(text)
    (tmp_path / "gpucluster.yaml").write_text(
        EXISTING_AKS
        + "    overrides:\n      values:\n        - {component: gpu-operator, file: v.yaml}\n"
    )
    return tmp_path / "gpucluster.yaml"


def test_plan_warns_about_a_literal_credential_and_not_otherwise(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    assert (
        cli_main(
            ["plan", "--config", str(_with_values(tmp_path, "x: {apiToken: s3cret}\n"))],
            stdout=out,
            stderr=err,
        )
        == 0
    )
    [line] = [line for line in err.getvalue().splitlines() if "VALUES-CREDENTIAL" in line]
    assert line.startswith(
        "warning[VALUES-CREDENTIAL] cluster=lab component=gpu-operator key=x.apiToken: "
    ), line
    assert "s3cret" not in line and " fix: bind it to a Terraform variable" in line
    out, err = io.StringIO(), io.StringIO()
    assert (
        cli_main(
            ["plan", "--config", str(_with_values(tmp_path, "x: {existingSecret: mine}\n"))],
            stdout=out,
            stderr=err,
        )
        == 0
    )
    assert "VALUES-CREDENTIAL" not in err.getvalue()


def _modes(root: Path) -> set[tuple[str, int]]:
    return {
        ("d" if p.is_dir() else "f", stat.S_IMODE(p.stat().st_mode))
        for p in [root, *root.rglob("*")]
    }


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
        assert (
            "hunter2" in (out / "stacks" / "lab-runtime" / "cdk.tf.json").read_text()
        )  # kept, as decided
    else:
        assert ("d", 0o700) not in modes or ("f", 0o600) not in modes, modes


@pytest.mark.parametrize(
    "kubeconfig, said",
    [
        ("relative/kc", "is a relative path"),
        ("/ok\n", "control characters"),
        (" /x", "surrounding whitespace"),
    ],
)
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


def test_a_credential_in_the_cluster_settings_is_private_and_never_cached(tmp_path):
    """A literal secret in a platform setting (kubelogin's service principal secret, which the
    runtime stack's Helm provider passes to kubelogin) is in cdk.tf.json as the user wrote it, so
    the output is the owner's only and the cluster's stacks are not put into the per-user cache,
    as for a values credential (was: 0644 files and a synth-cluster entry holding it)."""
    (tmp_path / "gpucluster.yaml").write_text(
        "clusters:\n  - name: spn\n    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}\n"
        "    settings:\n      kubelogin:\n        login: spn\n"
        "        env: {AAD_SERVICE_PRINCIPAL_CLIENT_ID: 00000000-0000-0000-0000-000000000001,"
        " AAD_SERVICE_PRINCIPAL_CLIENT_SECRET: hunter2-literal}\n"
    )
    out, cache = tmp_path / "cdktf.out", tmp_path / "cache"
    result = _support.run_main(
        cwd=tmp_path,
        outdir=out,
        config=tmp_path / "gpucluster.yaml",
        GPUCLUSTER_CACHE_DIR=str(cache),
    )
    assert result.returncode == 0, result.stderr
    assert (
        "hunter2-literal" in (out / "stacks" / "spn-runtime" / "cdk.tf.json").read_text()
    )  # kept, as decided
    assert _modes(out) == {("d", 0o700), ("f", 0o600)}
    kind = cache / "synth-cluster"
    assert not kind.is_dir() or not any(
        b"hunter2-literal" in p.read_bytes() for p in kind.iterdir()
    )

"""checkov as a test (issue 12): the synthesized cluster stacks of the default cluster and of every
documented AKS cluster file pass every checkov check, except checks a resource skips itself with a
reason (tools/checkov_gate.py). Also the identity properties of the same output: Entra ID with
Azure RBAC, no local accounts, kubelogin exec in the runtime Helm provider, no secret output, a
``required_version`` in every stack.

checkov lives in its own virtual environment (it needs ``packaging<24``): ``make checkov-setup``,
which ``make test`` runs first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_docs_examples import BLOCKS, _write_referenced_files

ROOT = Path(__file__).resolve().parents[1]
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
GATE = ROOT / "tools" / "checkov_gate.py"

needs_checkov = pytest.mark.skipif(not CHECKOV.exists(), reason="checkov not installed: run `make checkov-setup` (make test does)")

AKS_BLOCKS = [(where, text) for where, text in BLOCKS if "service: aks" in text]
CASES = [("default", None)] + AKS_BLOCKS


def _synth(text: str | None, folder: Path, monkeypatch) -> Path:
    from gpucluster import yamlsafe
    from gpucluster.config import load_clusters
    from gpucluster.pipeline import build_plans
    import stacks

    monkeypatch.chdir(folder)
    path = None
    if text is not None:
        path = folder / "gpucluster.yaml"
        path.write_text(text)
        _write_referenced_files(yamlsafe.load_yaml_file(path, display="gpucluster.yaml"), folder)
    out = folder / "cdktf.out"
    stacks.synth(build_plans(load_clusters(str(path) if path else None, env={})), out)
    return out / "stacks"


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    out = {}
    try:
        for where, text in CASES:
            out[where] = _synth(text, tmp_path_factory.mktemp("docs"), mp)
    finally:
        mp.undo()
    return out


def _gate(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GATE), *map(str, paths)], capture_output=True, text=True, timeout=900)


def test_the_documented_aks_examples_are_covered():
    assert {w.split(":")[0] for w, _ in AKS_BLOCKS} >= {"README.md", "docs/cluster-file.md"}
    assert len(AKS_BLOCKS) >= 3  # README, the full example and the production example


@needs_checkov
@pytest.mark.parametrize("where", [w for w, _ in CASES])
def test_checkov_passes_every_check_of_the_cluster_stacks(synthesized, where):
    clusters = sorted(p for p in synthesized[where].iterdir() if p.name.endswith("-cluster"))
    assert clusters, f"{where}: no cluster stack"
    run = _gate(*clusters)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAILED" not in run.stdout and "STALE" not in run.stdout
    assert " passed, 0 failed" in run.stdout


@pytest.mark.parametrize("where", [w for w, _ in CASES])
def test_entra_id_no_local_accounts_kubelogin_and_no_secret_output(synthesized, where):
    for stack in sorted(synthesized[where].iterdir()):
        doc = json.loads((stack / "cdk.tf.json").read_text())
        assert doc["terraform"]["required_version"] == ">= 1.4", stack.name
        if stack.name.endswith("-cluster"):
            (aks,) = doc["resource"]["azurerm_kubernetes_cluster"].values()
            assert aks["local_account_disabled"] is True
            assert aks["azure_active_directory_role_based_access_control"]["azure_rbac_enabled"] is True
            (role,) = doc["resource"]["azurerm_role_assignment"].values()
            assert role["principal_id"].startswith("${data.azurerm_client_config.")
            assert role["role_definition_name"] == "Azure Kubernetes Service RBAC Cluster Admin"
            outputs = json.dumps(doc.get("output", {}))
            for secret in ("client_key", "client_certificate", "kube_admin_config", "password", "raw_kube_config"):
                assert secret not in outputs, (stack.name, secret)
        elif stack.name.endswith("-runtime") and "terraform_remote_state" in doc.get("data", {}):
            (provider,) = doc["provider"]["helm"]
            kube = provider["kubernetes"]
            assert kube["exec"]["command"] == "kubelogin" and kube["exec"]["args"][:2] == ["get-token", "--login"]
            assert not {"client_certificate", "client_key", "token"} & set(kube)


@needs_checkov
def test_the_gate_fails_on_an_unjustified_failure_and_on_a_stale_skip(synthesized, tmp_path):
    (cluster,) = [p for p in synthesized["default"].iterdir() if p.name.endswith("-cluster")]
    doc = json.loads((cluster / "cdk.tf.json").read_text())
    (name, aks), = doc["resource"]["azurerm_kubernetes_cluster"].items()
    del aks["//"]["checkov"]  # the justified skips gone: CKV_AZURE_117 and CKV_AZURE_232 fail
    aks["local_account_disabled"] = False
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "cdk.tf.json").write_text(json.dumps(doc))
    run = _gate(tmp_path / "a")
    assert run.returncode == 1
    assert {line.split()[1] for line in run.stdout.splitlines() if line.startswith("FAILED")} == {
        "CKV_AZURE_117", "CKV_AZURE_232", "CKV_AZURE_141"}
    aks["local_account_disabled"] = True
    aks["//"]["checkov"] = {"skip": [{"id": "CKV_AZURE_141", "comment": "no longer true"},
                                     {"id": "CKV_AZURE_117", "comment": "platform keys"},
                                     {"id": "CKV_AZURE_232", "comment": ""}]}
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "cdk.tf.json").write_text(json.dumps(doc))
    run = _gate(tmp_path / "b")
    assert run.returncode == 1
    assert "STALE   CKV_AZURE_141" in run.stdout and "NOREASON CKV_AZURE_232" in run.stdout
    assert "SKIPPED CKV_AZURE_117" in run.stdout

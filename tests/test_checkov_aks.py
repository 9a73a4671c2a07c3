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

needs_checkov = pytest.mark.skipif(
    not CHECKOV.exists(), reason="checkov not installed: run `make checkov-setup` (make test does)"
)

AKS_BLOCKS = [(where, text) for where, text in BLOCKS if "service: aks" in text]
CASES = [("default", None)] + AKS_BLOCKS


def _synth(text: str | None, folder: Path, monkeypatch) -> Path:
    from gpucluster import yamlsafe
    from gpucluster.inputs.config import load_clusters
    from gpucluster.pipeline import build_plans
    from gpucluster_cdk import stacks

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


def _gate(*paths: Path, checkov: Path | None = None) -> subprocess.CompletedProcess:
    extra = ["--checkov", str(checkov)] if checkov else []
    return subprocess.run(
        [sys.executable, str(GATE), *extra, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=900,
    )


def _sections(stdout: str, files: list[Path]) -> dict[Path, list[str]]:
    """The gate's output per file: each file's result lines end with its ``<file>: ...`` summary
    line, in the order the files were given."""
    out: dict[Path, list[str]] = {}
    lines = iter(stdout.splitlines())
    for file in files:
        section = []
        for line in lines:
            section.append(line)
            if line.startswith(f"{file}: "):
                break
        out[file] = section
    assert not list(lines), stdout
    return out


def _tampered(synthesized, folder: Path) -> tuple[Path, Path]:
    """Two copies of the default cluster stack: ``a`` without its justified skips and with local
    accounts on (CKV_AZURE_117, 232 and 141 fail), ``b`` with a stale skip and one without reason."""
    (cluster,) = [p for p in synthesized["default"].iterdir() if p.name.endswith("-cluster")]
    doc = json.loads((cluster / "cdk.tf.json").read_text())
    ((name, aks),) = doc["resource"]["azurerm_kubernetes_cluster"].items()
    del aks["//"]["checkov"]  # the justified skips gone: CKV_AZURE_117 and CKV_AZURE_232 fail
    aks["local_account_disabled"] = False
    (folder / "a").mkdir()
    (folder / "a" / "cdk.tf.json").write_text(json.dumps(doc))
    aks["local_account_disabled"] = True
    aks["//"]["checkov"] = {
        "skip": [
            {"id": "CKV_AZURE_141", "comment": "no longer true"},
            {"id": "CKV_AZURE_117", "comment": "platform keys"},
            {"id": "CKV_AZURE_232", "comment": ""},
        ]
    }
    (folder / "b").mkdir()
    (folder / "b" / "cdk.tf.json").write_text(json.dumps(doc))
    return folder / "a" / "cdk.tf.json", folder / "b" / "cdk.tf.json"


@pytest.fixture(scope="module")
def gated(synthesized, tmp_path_factory):
    """ONE gate run (one checkov process) over every cluster stack of CASES and the two tampered
    copies: ``(exit status, {cdk.tf.json: its lines}, {case: its cluster files}, (a, b))``."""
    if not CHECKOV.exists():
        pytest.skip("checkov not installed: run `make checkov-setup` (make test does)")
    per_case = {
        where: sorted(
            p / "cdk.tf.json" for p in synthesized[where].iterdir() if p.name.endswith("-cluster")
        )
        for where, _ in CASES
    }
    tampered = _tampered(synthesized, tmp_path_factory.mktemp("tampered"))
    files = [f for where, _ in CASES for f in per_case[where]] + list(tampered)
    run = _gate(*files)
    return run.returncode, _sections(run.stdout, files), per_case, tampered


def test_the_documented_aks_examples_are_covered():
    assert {w.split(":")[0] for w, _ in AKS_BLOCKS} >= {"README.md", "docs/cluster-file.md"}
    assert len(AKS_BLOCKS) >= 3  # README, the full example and the production example


@needs_checkov
@pytest.mark.parametrize("where", [w for w, _ in CASES])
def test_checkov_passes_every_check_of_the_cluster_stacks(gated, where):
    _, sections, per_case, _ = gated
    assert per_case[where], f"{where}: no cluster stack"
    for file in per_case[where]:
        text = "\n".join(sections[file])
        assert " passed, 0 failed" in sections[file][-1], text
        assert not [
            line for line in sections[file] if line.startswith(("FAILED", "STALE", "NOREASON"))
        ], text
        assert "PASSED  CKV_AZURE_141" in text  # checkov's results of this very file


@pytest.mark.parametrize("where", [w for w, _ in CASES])
def test_entra_id_no_local_accounts_kubelogin_and_no_secret_output(synthesized, where):
    for stack in sorted(synthesized[where].iterdir()):
        doc = json.loads((stack / "cdk.tf.json").read_text())
        assert doc["terraform"]["required_version"] == ">= 1.4", stack.name
        if stack.name.endswith("-cluster"):
            (aks,) = doc["resource"]["azurerm_kubernetes_cluster"].values()
            assert aks["local_account_disabled"] is True
            assert (
                aks["azure_active_directory_role_based_access_control"]["azure_rbac_enabled"]
                is True
            )
            (role,) = doc["resource"]["azurerm_role_assignment"].values()
            assert role["principal_id"].startswith("${data.azurerm_client_config.")
            assert role["role_definition_name"] == "Azure Kubernetes Service RBAC Cluster Admin"
            outputs = json.dumps(doc.get("output", {}))
            for secret in (
                "client_key",
                "client_certificate",
                "kube_admin_config",
                "password",
                "raw_kube_config",
            ):
                assert secret not in outputs, (stack.name, secret)
        elif stack.name.endswith("-runtime") and "terraform_remote_state" in doc.get("data", {}):
            (provider,) = doc["provider"]["helm"]
            kube = provider["kubernetes"]
            assert kube["exec"]["command"] == "kubelogin" and kube["exec"]["args"][:2] == [
                "get-token",
                "--login",
            ]
            assert not {"client_certificate", "client_key", "token"} & set(kube)


@needs_checkov
def test_the_gate_fails_on_an_unjustified_failure_and_on_a_stale_skip(gated):
    """In the same run as the passing stacks: a skip counts only for the file it is on (``a`` and
    ``b`` hold the same resource address as the default stack)."""
    code, sections, _, (a, b) = gated
    assert code == 1
    assert {line.split()[1] for line in sections[a] if line.startswith("FAILED")} == {
        "CKV_AZURE_117",
        "CKV_AZURE_232",
        "CKV_AZURE_141",
    }
    text = "\n".join(sections[b])
    assert "STALE   CKV_AZURE_141" in text and "NOREASON CKV_AZURE_232" in text
    assert "SKIPPED CKV_AZURE_117" in text
    # a skip without a reason covers nothing: its check fails as well
    assert [line.split()[1] for line in sections[b] if line.startswith("FAILED")] == [
        "CKV_AZURE_232"
    ]


FAKE_CHECKOV = '''#!{python}
"""A stand-in for checkov's JSON report: check CKV_FAKE_1 fails on resources with "fake_fail"."""
import json, sys
args = sys.argv[1:]
files = [args[i + 1] for i, a in enumerate(args) if a == "-f"]
results = {{"failed_checks": [], "passed_checks": [], "skipped_checks": [], "parsing_errors": []}}
for path in files:
    doc = json.load(open(path))
    for rtype, resources in doc.get("resource", {{}}).items():
        for name, body in resources.items():
            kind = "failed_checks" if body.get("fake_fail") else "passed_checks"
            results[kind].append({{"check_id": "CKV_FAKE_1", "check_name": "fake", "resource": f"{{rtype}}.{{name}}",
                                  "file_abs_path": path, "file_path": "/" + path.rsplit("/", 2)[-2] + "/cdk.tf.json"}})
print(json.dumps({{"check_type": "terraform_json", "results": results, "summary": {{"checkov_version": "fake"}}}}))
'''


def test_the_gate_attributes_every_result_to_its_file_and_exits_0_when_all_are_justified(tmp_path):
    """The gate's own logic, with a stand-in checkov: two files hold the same resource address;
    the skip on the first file's resource does not cover the second file's failure."""
    fake = tmp_path / "checkov"
    fake.write_text(FAKE_CHECKOV.format(python=sys.executable))
    fake.chmod(0o755)
    skip = {"checkov": {"skip": [{"id": "CKV_FAKE_1", "comment": "justified here"}]}}
    files = []
    for name, body in (
        ("x", {"fake_fail": True, "//": skip}),
        ("y", {"fake_fail": True}),
        ("z", {}),
    ):
        (tmp_path / name).mkdir()
        files.append(tmp_path / name / "cdk.tf.json")
        files[-1].write_text(
            json.dumps(
                {"terraform": {"required_version": ">= 1.4"}, "resource": {"t": {"r": body}}}
            )
        )
    run = _gate(*files, checkov=fake)
    assert run.returncode == 1, run.stderr
    sections = _sections(run.stdout, files)
    assert sections[files[0]] == [
        "SKIPPED CKV_FAKE_1 t.r: justified here",
        f"{files[0]}: 0 passed, 0 failed, 1 skipped with a reason (checkov fake)",
    ]
    assert sections[files[1]] == [
        "FAILED  CKV_FAKE_1 t.r: fake",
        f"{files[1]}: 0 passed, 1 failed, 0 skipped with a reason (checkov fake)",
    ]
    assert sections[files[2]] == [
        "PASSED  CKV_FAKE_1 t.r",
        f"{files[2]}: 1 passed, 0 failed, 0 skipped with a reason (checkov fake)",
    ]
    run = _gate(files[0], tmp_path / "z", checkov=fake)  # a folder names its cdk.tf.json
    assert run.returncode == 0, run.stdout + run.stderr

"""Whole-string validation: no pattern check accepts a trailing newline (``re.match`` with ``$``
matched before a final ``\\n``: ``region: "westus3\\n"`` reached ``location``, ``name: |`` split
the plan output and made synth exit 70), and no synthesized attribute but a ``values`` document
holds a control character (gpucluster_cdk.constructs_lib.tfstring.unexpected_controls, checked by gpucluster_cdk.stacks.synth)."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import _support
import fuzz_cluster as fc
import pytest
import yaml
from _support import EXISTING_AKS

from gpucluster.cli import main as cli_main
from gpucluster_cdk.constructs_lib.tfstring import unexpected_controls

ROOT = Path(__file__).resolve().parents[1]
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")

AKS_FULL = {
    "clusters": [
        {
            "name": "lab",
            "criteria": {
                "service": "aks",
                "accelerator": "h100",
                "os": "ubuntu",
                "intent": "training",
            },
            "region": "westus3",
            "kubernetesVersion": "1.34",
            "profile": {"gpuStack": "operator-managed"},
            "pools": [
                {"name": "system", "vmSize": "Standard_D8s_v5", "nodeCount": 2, "gpu": False},
                {
                    "name": "gpu",
                    "vmSize": "Standard_ND96isr_H100_v5",
                    "nodeCount": 1,
                    "labels": {"example.com/team": "ml"},
                },
            ],
            "overrides": {
                "set": ["gpuoperator:dcgmExporter.serviceMonitor.interval=60s"],
                "variables": {"gpuoperator:driver.version": "gpu_driver_version"},
            },
            "scheduling": {
                "system": {
                    "nodeSelector": {"agentpool": "system"},
                    "tolerations": ["CriticalAddonsOnly:NoSchedule"],
                }
            },
            "backend": {
                "type": "cloud",
                "organization": "acme",
                "workspacePrefix": "gpu-",
                "hostname": "app.terraform.io",
            },
        }
    ]
}
DOCUMENTS = {
    "aks": AKS_FULL,
    "aks-existing": yaml.safe_load(
        EXISTING_AKS.replace("/etc/kube/config}", "/etc/kube/config, context: prod}")
    ),
    "oke": {"clusters": [fc.OKE_CLUSTER]},
    "nvke": {"clusters": [fc.NVKE_CLUSTER]},
    "fleet": yaml.safe_load((ROOT / "examples" / "fleet-canary-prod.yaml").read_text()),
}


def _leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, path + (i,))
    elif isinstance(value, str):
        yield path


CASES = [(name, path) for name, doc in DOCUMENTS.items() for path in _leaves(doc)]


def plan_json(doc: dict, tmp_path: Path) -> tuple[int, str, str]:
    path = tmp_path / "gpucluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(["plan", "--config", str(path), "--format", "json"], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "name, path", CASES, ids=[f"{n}:{'.'.join(map(str, p))}" for n, p in CASES]
)
def test_a_trailing_newline_in_any_string_is_refused_or_never_reaches_the_plan(
    tmp_path, monkeypatch, name, path
):
    monkeypatch.setenv("GPUCLUSTER_CACHE_DIR", "off")
    doc = copy.deepcopy(DOCUMENTS[name])
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] += "\n"
    code, out, err = plan_json(doc, tmp_path)
    if code == 2:
        assert (
            out == ""
            and len(err.splitlines()) == 1
            and err.startswith("error[")
            and " fix: " in err
        ), err
        return
    assert code == 0, err
    strings = [s for s in _leaves_values(json.loads(out))]
    assert not [s for s in strings if CONTROL.search(s)], (
        out
    )  # e.g. a value that is stripped before use


def _leaves_values(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _leaves_values(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves_values(v)
    elif isinstance(value, str):
        yield value


def test_the_unmutated_documents_plan(tmp_path):
    for name, doc in DOCUMENTS.items():
        code, _, err = plan_json(doc, tmp_path)
        assert code == 0, (name, err)


def test_a_block_scalar_name_is_one_error_line_in_plan_and_synth(tmp_path):
    """``name: |`` (YAML adds the newline): was a split plan header and synth's error[internal] exit 70."""
    text = EXISTING_AKS.replace("  - name: lab\n", "  - name: |\n      lab\n")
    (tmp_path / "gpucluster.yaml").write_text(text)
    out, err = io.StringIO(), io.StringIO()
    assert (
        cli_main(["plan", "--config", str(tmp_path / "gpucluster.yaml")], stdout=out, stderr=err)
        == 2
    )
    [line] = err.getvalue().splitlines()
    assert (
        line.startswith("error[input] file=")
        and "key=clusters[0].name" in line
        and "'lab\\n'" in line
    ), line
    result = _support.run_main(cwd=tmp_path, outdir=tmp_path / "cdktf.out")
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr.splitlines()
        == [line.replace(f"file={tmp_path / 'gpucluster.yaml'}", "file=gpucluster.yaml")]
        or len(result.stderr.splitlines()) == 1
    ), result.stderr
    assert "error[internal]" not in result.stderr and not (tmp_path / "cdktf.out").exists()


def test_control_characters_are_found_everywhere_but_in_values_documents():
    document = {
        "resource": {
            "azurerm_resource_group": {"rg": {"location": "westus3\n", "name": "ok"}},
            "helm_release": {
                "r": {
                    "values": ["a: |\n  multi\n  line\n"],
                    "name": "r\x1b",
                    "set": [{"name": "x\u2028", "value": "1"}],
                }
            },
        },
        "output": {"k\r": {"value": "v"}},
    }
    found = [path for path, _ in unexpected_controls(document)]
    assert found == [
        "resource.azurerm_resource_group.rg.location",
        "resource.helm_release.r.name",
        "resource.helm_release.r.set.0.name",
        "output.<key>",
    ]


@pytest.mark.parametrize(
    "pattern_file",
    sorted(
        str(p.relative_to(ROOT))
        for d in ("gpucluster", "gpucluster_cdk", "plugins")
        for p in (ROOT / d).rglob("*.py")
    ),
)
def test_no_validation_pattern_is_matched_with_re_match(pattern_file):
    """Every pattern ending in ``$`` is checked with ``fullmatch`` (or ends in ``\\Z``): a ``.match(``
    of such a pattern accepts a trailing newline."""
    text = (ROOT / pattern_file).read_text()
    dollar_patterns = set(re.findall(r"^(\w+) = re\.compile\(r?\"\^[^\n]*\$\"", text, re.M))
    strings = set(re.findall(r"^(\w+) = r\"\^[^\n]*\$\"", text, re.M))
    for name in dollar_patterns:
        assert not re.search(rf"\b{name}\.match\(", text), (
            f"{pattern_file}: {name}.match( accepts a trailing newline"
        )
    for name in strings:
        assert not re.search(rf"re\.match\({name}\b", text), (
            f"{pattern_file}: re.match({name} accepts a trailing newline"
        )
    assert not re.search(r"re\.match\(r\"\^[^\"]*\$\"", text), (
        f'{pattern_file}: re.match(r"^...$") accepts a trailing newline'
    )
    assert not re.search(r"\"pattern\": \"\^[^\"]*\$\"", text), (
        f"{pattern_file}: a JSON Schema pattern ending in $ (re.search)"
    )

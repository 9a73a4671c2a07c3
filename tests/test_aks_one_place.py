"""Every AKS decision lives in ``plugins/gpucluster_aks``, and ``plan`` refuses
whatever synth refuses.

* The AKS facts (default VM sizes, region, GPU taint, gpuStack -> gpu_driver map, Kubernetes
  floor) are defined once: no Python code outside the plugin carries them (AST scan of string and
  number constants, docstrings excluded).
* A table of AKS input errors: ``gpucluster plan`` and the cdktf app (``main.main``) both exit 2
  with the same one line, written before anything is synthesized.
* The props the plugin hands the construct for accepted inputs pass the construct's own
  validation, so no AKS input can pass ``plan`` and fail ``synth``.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "plugins" / "gpucluster_aks"


def _facts() -> dict[str, object]:
    from gpucluster_aks import platform as aks

    return {
        "GPU_VM_SIZE": aks.GPU_VM_SIZE,
        "SYSTEM_VM_SIZE": aks.SYSTEM_VM_SIZE,
        "DEFAULT_REGION": aks.DEFAULT_REGION,
        "GPU_TAINT": str(aks.GPU_TAINT),
        "gpu_driver map": tuple(sorted(aks.GPU_DRIVER_FOR_PROFILE.items())),
    }


def _floor() -> dict[str, object]:
    """The AKS Kubernetes floor. The core's own default ``kubernetesVersion`` happens to be the same
    string, so the floor is searched for where it was copied before: the constructs and stacks."""
    from gpucluster_aks import platform as aks

    return {
        "min_kubernetes": aks.AKS_PLATFORM.min_kubernetes,
        "min_kubernetes minor": int(aks.AKS_PLATFORM.min_kubernetes.split(".")[1]),
    }


def _code_constants(path: Path) -> list[tuple[int, object]]:
    """(line, value) of every str/int constant that is not a docstring, plus dict literals of constants."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
        if isinstance(node, ast.Expr) and isinstance(
            node.value, ast.Constant
        ):  # attribute docstrings
            docstrings.add(id(node.value))
    out: list[tuple[int, object]] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and id(node) not in docstrings
            and isinstance(node.value, (str, int))
        ):
            out.append((node.lineno, node.value))
        if (
            isinstance(node, ast.Dict)
            and all(isinstance(k, ast.Constant) for k in node.keys)
            and all(isinstance(v, ast.Constant) for v in node.values)
        ):
            out.append(
                (
                    node.lineno,
                    tuple(
                        sorted(
                            (k.value, v.value) for k, v in zip(node.keys, node.values, strict=True)
                        )
                    ),
                )
            )
    return out


def _python_files(*roots: Path) -> list[Path]:
    """The product's Python files under ``roots`` (other platform plugins keep their own facts)."""
    files: list[Path] = []
    for root in roots:
        files.extend([root] if root.is_file() else sorted(root.rglob("*.py")))
    return files


CORE = (ROOT / "gpucluster", ROOT / "gpucluster_cdk", ROOT / "main.py")


def test_aks_facts_are_defined_only_in_the_aks_plugin():
    found = []
    for facts, files in (
        (_facts(), _python_files(*CORE)),
        (
            _floor(),
            _python_files(
                ROOT / "gpucluster_cdk" / "constructs_lib", ROOT / "gpucluster_cdk" / "stacks"
            ),
        ),
    ):
        for path in files:
            for line, value in _code_constants(path):
                for name, fact in facts.items():
                    if value == fact and type(value) is type(fact):
                        found.append(f"{path.relative_to(ROOT)}:{line}: {name} {value!r}")
    assert found == [], "AKS facts outside plugins/gpucluster_aks:\n" + "\n".join(found)


def test_the_scan_finds_a_fact_when_one_is_there(tmp_path):
    # the scan must be able to fail: a module with a copy of the GPU VM size and the driver map
    copy = tmp_path / "copy.py"
    copy.write_text(
        '"""Docstring mentioning Standard_ND96isr_H100_v5 is fine."""\n'
        'SIZE = "Standard_ND96isr_H100_v5"\nMAP = {"azure-managed": "Install", "operator-managed": "None"}\n'
    )
    values = [v for _, v in _code_constants(copy)]
    facts = _facts()
    assert facts["GPU_VM_SIZE"] in values and facts["gpu_driver map"] in values
    assert values.count(facts["GPU_VM_SIZE"]) == 1  # the docstring is not counted


def test_the_construct_has_no_aks_defaults():
    import dataclasses

    from gpucluster_cdk.constructs_lib import AksGpuClusterProps

    required = [
        f.name
        for f in dataclasses.fields(AksGpuClusterProps)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    assert {"location", "kubernetes_version", "resource_group_name", "system_pool", "pools"} <= set(
        required
    )


BASE = """\
clusters:
  - name: lab
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
"""

# (id, cluster keys added to BASE, expected key= of the one error line)
BAD_INPUTS = [
    (
        "reserved-label",
        "pools: [{name: system, vmSize: Standard_D8s_v5, gpu: false}, "
        "{name: gpu, vmSize: Standard_ND96isr_H100_v5, labels: {kubernetes.io/role: gpu}}]",
        "pools[1].labels.kubernetes.io/role",
    ),
    (
        "azure-label",
        "pools: [{name: system, vmSize: Standard_D8s_v5, gpu: false, labels: {kubernetes.azure.com/mode: x}}, "
        "{name: gpu, vmSize: Standard_ND96isr_H100_v5}]",
        "pools[0].labels.kubernetes.azure.com/mode",
    ),
    (
        "system-taint",
        "pools: [{name: system, vmSize: Standard_D8s_v5, gpu: false, taints: ['dedicated=infra:NoSchedule']}, "
        "{name: gpu, vmSize: Standard_ND96isr_H100_v5}]",
        "pools[0].taints",
    ),
    (
        "critical-addons-unreachable",
        "pools: [{name: system, vmSize: Standard_D8s_v5, gpu: false, "
        "taints: ['CriticalAddonsOnly=true:NoSchedule']}, {name: gpu, vmSize: Standard_ND96isr_H100_v5}]",
        "pools[0].taints",
    ),
    (
        "rotation-name",
        "pools: [{name: system, vmSize: Standard_D8s_v5, gpu: false}, "
        "{name: systemtmp, vmSize: Standard_ND96isr_H100_v5}]",
        "pools[1].name",
    ),
    (
        "no-gpu-pool",
        "pools: [{name: system, vmSize: Standard_D8s_v5, gpu: false}, "
        "{name: cpu, vmSize: Standard_D16s_v5, gpu: false}]",
        "pools",
    ),
    ("all-gpu", "pools: [{name: gpu, vmSize: Standard_ND96isr_H100_v5}]", "pools"),
    (
        "same-key-effect",
        "pools: [{name: system, vmSize: Standard_D8s_v5, gpu: false}, "
        "{name: gpu, vmSize: Standard_ND96isr_H100_v5, taints: ['team=a:NoSchedule', 'team=b:NoSchedule']}]",
        "pools[1].taints",
    ),
    (
        "pool-name",
        "pools: [{name: System, vmSize: Standard_D8s_v5, gpu: false}, {name: gpu, vmSize: Standard_ND96isr_H100_v5}]",
        "pools[0].name",
    ),
    (
        "node-count",
        "pools: [{name: system, vmSize: Standard_D8s_v5, gpu: false}, "
        "{name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: 0}]",
        "pools[1].nodeCount",
    ),
    (
        "gpu-driver",
        "pools: [{name: system, vmSize: Standard_D8s_v5, gpu: false}, "
        "{name: gpu, vmSize: Standard_ND96isr_H100_v5, gpuDriver: Managed}]",
        "pools[1].gpuDriver",
    ),
    (
        "gpu-driver-contradicts-profile",
        "profile: {gpuStack: operator-managed}\npools: [{name: system, vmSize: Standard_D8s_v5, "
        "gpu: false}, {name: gpu, vmSize: Standard_ND96isr_H100_v5, gpuDriver: Install}]",
        None,
    ),
    (
        "managed-gpu",
        "pools: [{name: system, vmSize: Standard_D8s_v5, gpu: false}, "
        "{name: gpu, vmSize: Standard_ND96isr_H100_v5, managedGpu: true}]",
        None,
    ),
    ("kubernetes-floor", 'kubernetesVersion: "1.33"', None),
    (
        "vm-size-shape",
        "pools: [{name: system, vmSize: Standard_D8s_v5, gpu: false}, {name: gpu, vmSize: Std.H100}]",
        "pools[1].vmSize",
    ),
    (
        "sku-typo",
        "pools: [{name: system, vmSize: Standard_D8ds_v5}, {name: gpu, vmSize: Standard_ND96isr_H100_v6}]",
        "pools[1].vmSize",
    ),
    (
        "other-accelerator",
        "pools: [{name: system, vmSize: Standard_D8ds_v5}, {name: gpu, vmSize: Standard_ND96asr_v4}]",
        "pools[1].vmSize",
    ),
    (
        "gpu-contradicts-size",
        "pools: [{name: system, vmSize: Standard_D8ds_v5, gpu: true}, {name: gpu, vmSize: Standard_ND96isr_H100_v5}]",
        "pools[0].gpu",
    ),
    ("open-public-api-server", "settings: {apiServer: {private: false}}", "settings.apiServer"),
    ("nested-setting-typo", "settings: {upgrade: {chanel: patch}}", "settings.upgrade.chanel"),
    (
        "pool-upgrade-unknown-pool",
        "settings: {poolUpgrade: {gpu2: {maxSurge: '1'}}}",
        "settings.poolUpgrade.gpu2",
    ),
    ("unknown-setting", "settings: {localAccountDisabld: true}", "settings.localAccountDisabld"),
]


def _plan_line(path: Path) -> tuple[int, str]:
    from gpucluster.sdk.testing import registered

    with registered() as kit:
        result = kit.cli("plan", "--config", str(path))
    return result.code, result.err


def _synth_line(path: Path, monkeypatch, capsys) -> tuple[int, str, list]:
    import main

    outdir = path.parent / "cdktf.out"
    monkeypatch.setenv("GPUCLUSTER_CONFIG", str(path))
    monkeypatch.setenv("CDKTF_OUTDIR", str(outdir))
    capsys.readouterr()
    code = main.main([])
    err = capsys.readouterr().err
    return code, err, sorted(p.name for p in path.parent.iterdir())


@pytest.mark.parametrize("case, extra, key", BAD_INPUTS, ids=[c for c, _, _ in BAD_INPUTS])
def test_plan_and_synth_refuse_the_same_aks_inputs_with_the_same_line(
    case, extra, key, tmp_path, monkeypatch, capsys
):
    path = tmp_path / "gpucluster.yaml"
    path.write_text(BASE + textwrap.indent(extra + "\n", "    "))
    monkeypatch.chdir(tmp_path)
    plan_code, plan_err = _plan_line(path)
    synth_code, synth_err, written = _synth_line(path, monkeypatch, capsys)
    assert plan_code == synth_code == 2, (plan_err, synth_err)
    plan_errors = [line for line in plan_err.splitlines() if line.startswith("error[")]
    synth_errors = [line for line in synth_err.splitlines() if line.startswith("error[")]
    assert plan_errors and plan_errors == synth_errors
    assert "invalid YAML" not in plan_errors[0]
    if key is not None:
        assert f"key={key}:" in plan_errors[0] or f"key=clusters[0].{key}:" in plan_errors[0], (
            plan_errors[0]
        )
    assert written == ["gpucluster.yaml"]  # nothing half-written


GOOD_INPUTS = [
    "",
    "region: westus3\nprofile: {gpuStack: operator-managed}",
    "pools: [{name: controlplane, vmSize: Standard_D8s_v5, gpu: false, taints: ['CriticalAddonsOnly=true:NoSchedule']}, "
    "{name: cpu, vmSize: Standard_D16s_v5, gpu: false, labels: {example.com/role: cpu}}, "
    "{name: gpua, vmSize: Standard_ND96isr_H100_v5, nodeCount: 2, taints: ['nvidia.com/gpu=true:NoSchedule', 'x=y:NoExecute']}, "
    "{name: gpub, vmSize: Standard_ND96isr_H100_v5}]",
]


@pytest.mark.parametrize("extra", GOOD_INPUTS)
def test_props_of_every_accepted_input_pass_the_construct_validation(extra, tmp_path, monkeypatch):
    from gpucluster.sdk.testing import registered
    from gpucluster_aks.cluster import cluster_props
    from gpucluster_cdk.constructs_lib import validate_props

    path = tmp_path / "gpucluster.yaml"
    path.write_text(BASE + textwrap.indent(extra + "\n", "    "))
    monkeypatch.chdir(tmp_path)
    with registered() as kit:
        (plan,) = [kit.plan(c) for c in kit.load(path)]
    assert validate_props(cluster_props(plan.cluster)) == []

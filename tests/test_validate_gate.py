"""``settings.validate: true``: the in-cluster validation gate (gpucluster/live/gate.py).

Its release is the runtime stack's last (after every release but the teardown guards), its chart a
gpucluster Job chart (pinned kubectl image, NetworkPolicy, get/list RBAC of exactly what it reads),
and its script -- run here under dash and bash against a kubectl stand-in answering from the same
snapshots as ``gpucluster validate`` -- passes on the healthy cluster and fails, naming the check,
object and field, on the faults it can see. Absent without the setting; a non-boolean is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gate_harness import _DATE, _SLEEP, SHELLS
from validate_support import (
    HEALTHY_DEFAULT,
    NVKE,
    find,
    items_of,
    mutate,
    nvke_healthy,
    plan_of,
    tool,
    write_snapshot,
)

from gpucluster.charts.jobchart import DEFAULT_KUBECTL_IMAGE
from gpucluster.errors import GpuclusterError
from gpucluster.live.gate import VALIDATION_NODE

VALIDATE = """clusters:
  - name: gpu-training
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    profile: {gpuStack: azure-managed}
    settings: {validate: true}
"""
GPU_NODE = "aks-gpu-12345678-vmss000000"
KUBECTL = Path(__file__).parent / "validate_kubectl.py"


def _script(plan) -> str:
    job = next(
        d
        for d in yaml.safe_load_all(
            plan.node(VALIDATION_NODE).local_chart.files["templates/002-job.yaml"]
        )
        if d
    )
    return job["spec"]["template"]["spec"]["containers"][0]["command"][2]


def run_gate(script: str, items: list[dict], tmp: Path, shell: str) -> subprocess.CompletedProcess:
    stub = tmp / "stub"
    stub.mkdir(exist_ok=True)
    for name, text in (
        ("kubectl", f'#!/bin/sh\nexec {sys.executable} {KUBECTL} "$@"\n'),
        ("date", _DATE),
        ("sleep", _SLEEP),
    ):
        (stub / name).write_text(text)
        (stub / name).chmod(0o755)
    (stub / "clock").write_text("1000000\n")
    snap = write_snapshot(tmp / "snapshot.json", items)
    env = {
        "PATH": f"{stub}:/usr/bin:/bin",
        "GATE_STUB_DIR": str(stub),
        "VALIDATE_STUB_DIR": str(stub),
        "GATE_CLOCK_STEP": "400",
        "VALIDATE_SNAPSHOT": str(snap),
        "HOME": str(tmp),
        "LC_ALL": "C",
    }
    return subprocess.run(
        [shell, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )


def test_absent_unless_enabled(tmp_path):
    assert VALIDATION_NODE not in [n.id for n in plan_of(None).nodes]
    plan = plan_of(VALIDATE, tmp_path)
    node = plan.nodes[-1]
    assert node.id == VALIDATION_NODE and node.kind == "gate" and node.wait_for_jobs
    assert set(node.depends_on) == {
        n.id for n in plan.nodes if n.kind != "teardown" and n.id != VALIDATION_NODE
    }
    (tmp_path / "bad.yaml").write_text(VALIDATE.replace("validate: true", "validate: 'yes'"))
    from gpucluster.inputs.config import load_config
    from gpucluster.pipeline import build_plans

    with pytest.raises(GpuclusterError) as info:
        build_plans(load_config(str(tmp_path / "bad.yaml"))[0])
    assert "key=clusters[0].settings.validate" in info.value.render()


LOADED_LIVE = (
    "import sys\n"
    "from gpucluster.inputs.config import load_config\n"
    "from gpucluster.pipeline import build_plans\n"
    "build_plans(load_config(sys.argv[1] if len(sys.argv) > 1 else None)[0])\n"
    "print(*sorted(m for m in sys.modules if m == 'gpucluster.live' or m.startswith('gpucluster.live.')))\n"
)
"""Builds the plans of a cluster file (none: the embedded default) in a fresh process and prints
the modules of the live package it loaded."""


def test_synth_loads_the_live_package_only_for_settings_validate(tmp_path):
    """A plan without ``settings.validate`` loads no module of gpucluster.live; with it, the
    gate and what the gate derives its checks from, never the commands (cli, validate)."""

    def loaded(*args: str) -> set[str]:
        res = subprocess.run(
            [sys.executable, "-c", LOADED_LIVE, *args],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": str(tmp_path),
                "GPUCLUSTER_EMBEDDED_DEFAULT": "1",
            },
        )
        assert res.returncode == 0, res.stderr
        return set(res.stdout.split())

    assert loaded() == set()
    (tmp_path / "v.yaml").write_text(VALIDATE, encoding="utf-8")
    with_gate = loaded(str(tmp_path / "v.yaml"))
    assert {"gpucluster.live", "gpucluster.live.gate"} <= with_gate
    assert not with_gate & {
        "gpucluster.live.cli",
        "gpucluster.live.validate",
        "gpucluster.live.detect",
    }


def test_chart_is_a_gpucluster_job_chart_with_least_privilege(tmp_path):
    plan = plan_of(VALIDATE, tmp_path)
    files = plan.node(VALIDATION_NODE).local_chart.files
    docs = [
        d
        for path, text in sorted(files.items())
        if path.startswith("templates/")
        for d in yaml.safe_load_all(text)
        if d
    ]
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Job",
        "NetworkPolicy",
    }
    pod = kinds["Job"]["spec"]["template"]["spec"]
    assert (
        pod["containers"][0]["image"] == DEFAULT_KUBECTL_IMAGE
        and "@sha256:" in pod["containers"][0]["image"]
    )
    assert (
        pod["securityContext"]["runAsNonRoot"]
        and pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"]
    )
    rules = kinds["ClusterRole"]["rules"]
    assert all(r["verbs"] == ["get", "list"] for r in rules)
    granted = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    assert (
        ("", "nodes") in granted
        and ("node.k8s.io", "runtimeclasses") in granted
        and ("", "secrets") not in granted
    )
    assert kinds["NetworkPolicy"]["spec"]["ingress"] == []
    from k8s_schema import validate_object

    for d in docs:
        validate_object(d)


@pytest.mark.parametrize("shell", SHELLS)
def test_script_passes_on_the_healthy_cluster_and_reads_only(tmp_path, shell):
    plan = plan_of(VALIDATE, tmp_path)
    result = run_gate(_script(plan), items_of(HEALTHY_DEFAULT.read_text()), tmp_path, shell)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASSED" in result.stdout
    calls = [
        json.loads(line) for line in (tmp_path / "stub" / "calls.jsonl").read_text().splitlines()
    ]
    assert calls and all(c[0] == "get" for c in calls)


def _dra_slice(items):
    return items + tool.gpu_resource_slices(find(items, "Node", GPU_NODE))


FAULTS = {
    "both-advertisers": (
        _dra_slice,
        f"gpu-advertiser v1/Node/{GPU_NODE} status.allocatable.nvidia.com/gpu",
    ),
    "fewer-gpus": (
        lambda items: mutate(
            items,
            "Node",
            GPU_NODE,
            lambda o: o["status"]["allocatable"].update({"nvidia.com/gpu": "4"}),
        ),
        f"gpu-count v1/Node/{GPU_NODE} status.allocatable.nvidia.com/gpu",
    ),
    "runtimeclass-missing": (
        lambda items: [o for o in items if o["kind"] != "RuntimeClass"],
        "runtime-class node.k8s.io/v1/RuntimeClass/nvidia-container-runtime metadata.name",
    ),
    "gpu-node-not-ready": (
        lambda items: mutate(
            items, "Node", GPU_NODE, lambda o: o["status"]["conditions"][0].update(status="False")
        ),
        "gpu-nodes gpu: 0 Ready node(s), the plan has 1",
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_script_fails_naming_check_object_and_field(tmp_path, fault):
    make, expected = FAULTS[fault]
    plan = plan_of(VALIDATE, tmp_path)
    result = run_gate(
        _script(plan), make(items_of(HEALTHY_DEFAULT.read_text())), tmp_path, SHELLS[0]
    )
    assert result.returncode == 1 and f"FAILED: {expected}" in result.stdout, (
        result.stdout + result.stderr
    )


def test_nvke_rail_without_its_ippool_fails_the_gate(tmp_path, reference_charts):
    plan = plan_of(
        NVKE.replace("    settings:\n", "    settings:\n      validate: true\n"), tmp_path
    )
    items = items_of(nvke_healthy(str(reference_charts)))
    script = _script(plan)
    assert run_gate(script, items, tmp_path, SHELLS[0]).returncode == 0
    broken = [
        o
        for o in items
        if not (o["kind"] == "IPPool" and o["metadata"]["name"] == "nv-ipam-pool-rail-2")
    ]
    result = run_gate(script, broken, tmp_path, SHELLS[0])
    assert result.returncode == 1
    assert (
        "FAILED: manifest-object ippools.nv-ipam.nvidia.com nvidia-network-operator/nv-ipam-pool-rail-2 metadata.name"
        in result.stdout
    )


FLEET = """fleet:
  name: gpu-fleet
  location: eastus
  groups:
    - {name: canary}
    - {name: prod}
clusters:
  - name: canary-eastus
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    fleet: {group: canary}
SETTINGS
  - name: prod-westus3
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    region: westus3
    fleet: {group: prod}
SETTINGS
"""


@pytest.fixture(scope="module")
def fleets(tmp_path_factory):
    """The two-group fleet synthesized with and without ``settings.validate`` (real pipeline and stacks)."""
    from gpucluster.inputs.config import load_config
    from gpucluster.pipeline import build_plans
    from gpucluster_cdk import stacks

    out = {}
    for name, settings in (("with", "    settings: {validate: true}"), ("without", "")):
        folder = tmp_path_factory.mktemp(name)
        (folder / "gpucluster.yaml").write_text(
            FLEET.replace("SETTINGS\n", settings + ("\n" if settings else ""))
        )
        clusters, fleet = load_config(str(folder / "gpucluster.yaml"))
        plans = build_plans(clusters)
        stacks.synth(plans, folder / "cdktf.out", fleet=fleet)
        out[name] = (folder / "cdktf.out", plans)
    return out


def _stack(out: Path, name: str) -> dict:
    return json.loads((out / "stacks" / name / "cdk.tf.json").read_text())


def test_synthesized_validation_gate_and_fleet_order(fleets):
    out, plans = fleets["with"]
    for cluster in ("canary-eastus", "prod-westus3"):
        res = _stack(out, f"{cluster}-runtime")["resource"]
        gate = res["helm_release"][VALIDATION_NODE]
        assert gate["wait_for_jobs"] is True and gate["name"] == VALIDATION_NODE
        others = {
            k for k in res["helm_release"] if k != VALIDATION_NODE and not k.endswith("-teardown")
        }
        assert {d.split(".", 1)[1] for d in gate["depends_on"]} == others
    canary = _stack(out, "canary-eastus-runtime")["resource"]["terraform_data"]["rollout"]
    assert (
        f"helm_release.{VALIDATION_NODE}" in canary["depends_on"]
    )  # the barrier reads this marker
    barrier = _stack(out, "gpu-fleet-after-canary")["resource"]["terraform_data"]["promotion"]
    (pre,) = barrier["lifecycle"]["precondition"]
    assert "cross-stack-reference-input-canary-eastus-runtime" in pre["condition"]
    prod = _stack(out, "prod-westus3-runtime")["resource"]["terraform_data"]
    assert (
        "cross-stack-reference-input-gpu-fleet-after-canary"
        in prod["promotion_gate"]["lifecycle"]["precondition"][0]["condition"]
    )


def test_no_validation_gate_without_the_setting(fleets):
    out, _ = fleets["without"]
    for cluster in ("canary-eastus", "prod-westus3"):
        res = _stack(out, f"{cluster}-runtime")["resource"]
        assert VALIDATION_NODE not in res["helm_release"]
    canary = _stack(out, "canary-eastus-runtime")["resource"]["terraform_data"]["rollout"]
    assert f"helm_release.{VALIDATION_NODE}" not in canary["depends_on"]

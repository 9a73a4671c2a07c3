"""A surge (blue/green) replacement of an AKS GPU pool in two cluster-file steps
(docs/cluster-file.md "Replacing a GPU pool"): step 1 adds the new pool with ``replaces:``,
step 2 removes the old pool and the key. Both steps are synthesized and their stacks read."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from gpucluster import cli
from gpucluster.errors import GpuclusterError
from gpucluster.inputs.config import load_clusters
from gpucluster.pipeline import build_plans
from gpucluster_cdk import stacks

SYSTEM = {"name": "system", "vmSize": "Standard_D8ds_v5", "nodeCount": 2, "gpu": False}
OLD = {"name": "gpu", "vmSize": "Standard_ND96isr_H100_v5", "nodeCount": 1}
NEW = {"name": "gpu2", "vmSize": "Standard_NC80adis_H100_v5", "nodeCount": 2}


def cluster_file(folder: Path, name: str, pools: list[dict]) -> Path:
    doc = {
        "clusters": [
            {
                "name": "h100",
                "criteria": {
                    "service": "aks",
                    "accelerator": "h100",
                    "os": "ubuntu",
                    "intent": "training",
                },
                "kubernetesVersion": "1.34",
                "pools": pools,
            }
        ]
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def step1(folder: Path) -> Path:
    return cluster_file(folder, "step1", [SYSTEM, OLD, {**NEW, "replaces": "gpu"}])


def step2(folder: Path) -> Path:
    return cluster_file(folder, "step2", [SYSTEM, NEW])


def synth(path: Path, out: Path) -> tuple[dict, dict]:
    plans = build_plans(load_clusters(str(path), env={}))
    stacks.synth(plans, out)
    read = lambda kind: json.loads((out / "stacks" / f"h100-{kind}" / "cdk.tf.json").read_text())  # noqa: E731
    return read("cluster"), read("runtime")


def gpu_pools(cluster: dict) -> dict[str, dict]:
    pools = cluster["resource"]["azurerm_kubernetes_cluster_node_pool"].values()
    return {p["name"]: p for p in pools if "gpu_driver" in p}


def gated_hashes(runtime: dict) -> dict[str, str]:
    out = {}
    for name, release in runtime["resource"]["helm_release"].items():
        for item in release.get("set", []) or []:
            if item.get("name") == "gatedHash":
                out[name] = item["value"]
        for text in release.get("values", []) or []:
            values = yaml.safe_load(text) or {}
            if "gatedHash" in values:
                out[name] = values["gatedHash"]
    return out


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    folder = tmp_path_factory.mktemp("surge")
    base = cluster_file(folder, "before", [SYSTEM, OLD])
    return {
        step: synth(path, folder / f"{step}.out")
        for step, path in (("before", base), ("step1", step1(folder)), ("step2", step2(folder)))
    }


def test_step1_writes_both_gpu_pools_and_keeps_the_old_one_unchanged(synthesized):
    before, _ = synthesized["before"]
    cluster, _ = synthesized["step1"]
    pools = gpu_pools(cluster)
    assert sorted(pools) == ["gpu", "gpu2"]
    assert pools["gpu"] == gpu_pools(before)["gpu"]  # the running pool: no change, no replacement
    assert pools["gpu2"]["vm_size"] == "Standard_NC80adis_H100_v5"
    assert pools["gpu2"]["node_count"] == 2
    assert pools["gpu2"]["node_taints"] == ["nvidia.com/gpu=present:NoSchedule"]


def test_step1_reruns_every_gate_so_the_apply_waits_for_the_new_pool(synthesized):
    _, before = synthesized["before"]
    _, runtime = synthesized["step1"]
    old, new = gated_hashes(before), gated_hashes(runtime)
    assert "gpu-operator-clusterpolicy-ready" in new
    assert "nvidia-dra-driver-gpu-kubelet-plugin-rollout" in new
    assert sorted(old) == sorted(new)
    assert all(old[g] != new[g] for g in new), "a gate whose hash did not change does not re-run"
    releases = runtime["resource"]["helm_release"]
    gate = releases["gpu-operator-clusterpolicy-ready"]
    assert gate["wait_for_jobs"] is True
    # every release after the GPU Operator waits for its gate (the gate dependencies of step 1)
    dependents = [
        k
        for k, r in releases.items()
        if "helm_release.gpu-operator-clusterpolicy-ready" in r.get("depends_on", [])
    ]
    assert "nvidia-dra-driver-gpu" in dependents


def test_step2_writes_only_the_new_pool_and_the_gates_run_again(synthesized):
    cluster, runtime = synthesized["step2"]
    assert sorted(gpu_pools(cluster)) == ["gpu2"]
    _, step1_runtime = synthesized["step1"]
    _, before = synthesized["before"]
    two, one = gated_hashes(runtime), gated_hashes(step1_runtime)
    assert all(two[g] != one[g] for g in two)
    assert (
        gated_hashes(before)["gpu-operator-clusterpolicy-ready"]
        == two["gpu-operator-clusterpolicy-ready"]
    )  # the same inputs without a replacement: the hash of a cluster that never had one


def test_the_same_step_synthesizes_byte_identical(tmp_path):
    a = synth(step1(tmp_path), tmp_path / "a")
    b = synth(step1(tmp_path), tmp_path / "b")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def plan(path: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        code = cli.main(["plan", "--config", str(path)], stdout=out, stderr=err)
    except SystemExit as exc:
        code = exc.code
    return code or 0, err.getvalue()


def test_plan_says_step_1_of_2_and_what_to_run_next(tmp_path):
    code, err = plan(step1(tmp_path))
    assert code == 0, err
    (line,) = [x for x in err.splitlines() if "AKS-POOL-SURGE" in x]
    assert line.startswith("info[AKS-POOL-SURGE] ")
    assert "key=clusters[0].pools[2].replaces" in line
    assert "step 1 of 2: GPU pool 'gpu2' replaces 'gpu'" in line
    assert (
        "kubectl cordon -l kubernetes.azure.com/agentpool=gpu && "
        "kubectl drain -l kubernetes.azure.com/agentpool=gpu --ignore-daemonsets --delete-emptydir-data"
        in line
    )
    assert "then step 2: remove pool 'gpu' and 'replaces: gpu'" in line
    code, err = plan(step2(tmp_path))
    assert code == 0 and "AKS-POOL-SURGE" not in err


@pytest.mark.parametrize(
    "pools, message",
    [
        (
            [SYSTEM, OLD, {**NEW, "replaces": "gpux"}],
            "node pool 'gpu2' replaces 'gpux', which the cluster does not have",
        ),
        (
            [SYSTEM, OLD, {**NEW, "replaces": "system"}],
            "node pool 'gpu2' replaces 'system', which is not a GPU pool",
        ),
        ([SYSTEM, {**OLD, "replaces": "gpu"}], "node pool 'gpu' replaces itself"),
        (
            [SYSTEM, OLD, {**NEW, "replaces": "gpu"}, {**NEW, "name": "gpu3", "replaces": "gpu"}],
            "node pools 'gpu2' and 'gpu3' both replace 'gpu'",
        ),
        (
            [SYSTEM, OLD, {**NEW, "replaces": "gpu"}, {**NEW, "name": "gpu3", "replaces": "gpu2"}],
            "node pool 'gpu3' replaces 'gpu2', which itself replaces 'gpu'",
        ),
        (
            [
                SYSTEM,
                OLD,
                {"name": "cpu", "vmSize": "Standard_D8ds_v5", "gpu": False, "replaces": "gpu"},
            ],
            "node pool 'cpu' is not a GPU pool but replaces 'gpu'",
        ),
        (
            [SYSTEM, OLD, {**NEW, "name": "gpu", "replaces": "gpu"}],
            "node pool name 'gpu' is used twice",
        ),
        (
            [SYSTEM, OLD, {**NEW, "replaces": 3}],
            "'clusters[0].pools[2].replaces' must be a non-empty string",
        ),
    ],
)
def test_inconsistent_replaces_is_one_error_line(tmp_path, pools, message):
    path = cluster_file(tmp_path, "bad", pools)
    with pytest.raises(GpuclusterError) as info:
        build_plans(load_clusters(str(path), env={}))
    line = info.value.render()
    assert len(line.splitlines()) == 1 and line.startswith("error["), line
    assert message in line, line
    code, err = plan(path)
    assert code == 2 and err.count("\n") == 1 and message in err


def upgrade_check(old: Path, new: Path) -> tuple[int, dict]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(
        ["upgrade-check", "--from", str(old), "--to", str(new), "--format", "json"],
        stdout=out,
        stderr=err,
    )
    return code, json.loads(out.getvalue())


def test_upgrade_check_names_the_replacement_and_the_surge_path(tmp_path):
    old = cluster_file(tmp_path, "old", [SYSTEM, OLD])
    new = cluster_file(tmp_path, "new", [SYSTEM, {**OLD, "vmSize": NEW["vmSize"]}])
    code, report = upgrade_check(old, new)
    (cluster,) = report["clusters"]
    (change,) = [c for c in cluster["changes"] if c["component"] == "cluster"]
    (reason,) = [r for r in change["reasons"] if r["rule"] == "aks-gpu-pool-replaced"]
    assert change["verdict"] == "manual" and code != 0
    assert "pool gpu: vmSize Standard_ND96isr_H100_v5 -> Standard_NC80adis_H100_v5" in reason["why"]
    assert "`replaces: <old pool>`" in reason["action"]
    assert "Replacing a GPU pool" in reason["action"]


def test_upgrade_check_from_step_1_to_step_2_says_drain_first(tmp_path):
    code, report = upgrade_check(step1(tmp_path), step2(tmp_path))
    (cluster,) = report["clusters"]
    (change,) = [c for c in cluster["changes"] if c["component"] == "cluster"]
    assert "GPU pool gpu removed: step 2 of replacing it with gpu2" in change["details"]
    (reason,) = [r for r in change["reasons"] if r["rule"] == "aks-gpu-pool-removed"]
    assert reason["verdict"] == "manual" and code != 0
    assert "kubectl drain -l kubernetes.azure.com/agentpool=<pool>" in reason["action"]
    # step 1 removes nothing
    code, report = upgrade_check(cluster_file(tmp_path, "base", [SYSTEM, OLD]), step1(tmp_path))
    rules = {r["rule"] for c in report["clusters"][0]["changes"] for r in c["reasons"]}
    assert "aks-gpu-pool-removed" not in rules


def test_upgrade_check_names_the_azurerm_fields_that_force_the_replacement(tmp_path):
    old = cluster_file(tmp_path, "old", [SYSTEM, OLD])
    new = cluster_file(tmp_path, "new", [SYSTEM, {**OLD, "vmSize": NEW["vmSize"]}])
    _, report = upgrade_check(old, new)
    (change,) = [c for c in report["clusters"][0]["changes"] if c["component"] == "cluster"]
    (reason,) = [r for r in change["reasons"] if r["rule"] == "aks-gpu-pool-replaced"]
    assert "vmSize (azurerm vm_size) or gpuDriver (gpu_driver)" in reason["why"]
    assert "destroys the kubernetes_cluster_node_pool and creates it again" in reason["why"]

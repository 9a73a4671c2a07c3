"""Rehearsals on the rig: the default AKS training cluster's runtime stack (with a GPU
bin-packing scheduler profile) applied to the real control plane with the real charts
(../shared/reference/charts), its gates run as their own ServiceAccounts, then destroyed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucluster_rig import rehearse

DEFAULT_WITH_PROFILE = """\
clusters:
  - name: gpu-training
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    profile: {gpuStack: azure-managed}
    kubernetesVersion: "1.34"
    schedulerProfiles:
      - {schedulerName: gpu-packing, preset: gpu-binpacking}
"""
"""The embedded default cluster (gpucluster/default_cluster.yaml) with a GPU bin-packing profile."""


@pytest.fixture(scope="module")
def default_report(
    rig_bin: Path, shared: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("rehearse-default")
    config = work / "gpucluster.yaml"
    config.write_text(DEFAULT_WITH_PROFILE, encoding="utf-8")
    reports = rehearse.run(
        config=config,
        cluster_name=None,
        folder=work,
        binaries=rig_bin,
        charts=shared / "charts",
        crds=shared / "crds",
        delay=2.0,
    )
    assert len(reports) == 1
    print(rehearse.render_text(reports[0]))
    (work / "report-all.json").write_text(json.dumps(reports, indent=1))
    return reports[0]


def test_every_release_is_deployed(default_report: dict[str, Any]) -> None:
    releases = default_report["apply"]["releases"]
    assert len(releases) >= 20
    assert [r["release"] for r in releases if not r["ok"]] == [], [
        r for r in releases if not r["ok"]
    ]


def test_every_gate_ran_its_own_script_as_its_own_service_account(
    default_report: dict[str, Any],
) -> None:
    jobs = [j for j in default_report["jobs"] if "teardown" not in j["job"]]
    gates = {j["job"] for j in jobs}
    assert "gpu-operator-clusterpolicy-ready" in gates
    assert "network-operator-nicclusterpolicy-ready" in gates
    for job in jobs:
        assert job["exitCode"] == 0, job
        assert job["serviceAccount"] == job["job"]
        assert any(
            "ready" in line or "passed" in line or "applied" in line for line in job["lastLines"]
        ), job


def test_custom_resources_hold_every_rendered_field(default_report: dict[str, Any]) -> None:
    crs = default_report["custom_resources"]
    kinds = {c["kind"] for c in crs}
    assert {"ClusterPolicy", "NicClusterPolicy"} <= kinds
    assert [c for c in crs if c["diffs"]] == []


def test_our_jobs_run_on_system_nodes_and_gpu_daemonsets_only_on_gpu_nodes(
    default_report: dict[str, Any],
) -> None:
    placed = {(p["namespace"], p["kind"], p["name"]): p for p in default_report["placement"]}
    assert placed
    for p in placed.values():
        assert "unscheduled" not in p["pools"], p
    dra = placed[("nvidia-dra-driver", "DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin")]
    assert set(dra["pools"]) == {"gpu"}
    jobs = default_report["jobs"]
    assert len(jobs) >= 5 and all(j["node"].startswith("system-") for j in jobs), jobs


def test_no_operator_or_controller_runs_on_a_gpu_node(default_report: dict[str, Any]) -> None:
    """Every Deployment and StatefulSet of the default AKS stack runs on the system pool, the
    kai-scheduler and network-operator operators among them (with AICR's wildcard toleration
    they took GPU nodes), so the rehearsal has no ``rig.placement`` warning."""
    controllers = {
        (p["namespace"], p["name"]): p
        for p in default_report["placement"]
        if p["kind"] in ("Deployment", "StatefulSet")
    }
    assert {
        ("kai-scheduler", "kai-operator"),
        ("nvidia-network-operator", "network-operator"),
    } <= set(controllers)
    assert {k: p["pools"] for k, p in controllers.items() if set(p["pools"]) != {"system"}} == {}
    assert default_report["placement_findings"] == []


def test_destroy_leaves_no_release(default_report: dict[str, Any]) -> None:
    assert all(r["ok"] for r in default_report["destroy"]["releases"]), default_report["destroy"]
    assert default_report["left_after_destroy"]["releases"] == []
    teardown = [j for j in default_report["jobs"] if "teardown" in j["job"]]
    assert teardown and all(j["exitCode"] == 0 for j in teardown), teardown


def test_the_report_says_passed(default_report: dict[str, Any]) -> None:
    assert default_report["ok"] is True


def test_the_scheduler_configuration_applied_is_started_by_the_real_scheduler(
    default_report: dict[str, Any],
) -> None:
    """The synthesized runtime stack's ``scheduler-profiles`` release is applied (the rig serves
    AKS's ``SchedulerConfiguration``), read back unchanged, and a real kube-scheduler started on
    its ``rawConfig`` runs the profile."""
    (release,) = [
        r for r in default_report["apply"]["releases"] if r["release"] == "scheduler-profiles"
    ]
    assert release["ok"] is True, release
    assert [
        c["name"]
        for c in default_report["custom_resources"]
        if c["kind"] == "SchedulerConfiguration"
    ] == ["upstream"]
    assert default_report["scheduler_profiles"] == {
        "profiles": ["gpu-packing"],
        "accepted": True,
        "message": "",
    }
    assert (
        "scheduler profiles: gpu-packing started by the real kube-scheduler"
        in rehearse.render_text(default_report)
    )


@pytest.fixture(scope="module")
def oke_report(
    rig_bin: Path, shared: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The OKE GB200 training cluster ``gpucluster init --service oke`` scaffolds, rehearsed."""
    project = tmp_path_factory.mktemp("oke") / "project"
    init = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpucluster.cli",
            "init",
            str(project),
            "--service",
            "oke",
            "--intent",
            "training",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert init.returncode == 0, init.stderr
    (report,) = rehearse.run(
        config=project / "gpucluster.yaml",
        cluster_name=None,
        folder=tmp_path_factory.mktemp("rehearse-oke"),
        binaries=rig_bin,
        charts=shared / "charts",
        crds=shared / "crds",
        delay=2.0,
    )
    print(rehearse.render_text(report))
    return report


def test_the_oke_gb200_stack_applies_gates_pass_and_destroys(oke_report: dict[str, Any]) -> None:
    releases = oke_report["apply"]["releases"]
    assert len(releases) >= 15 and all(r["ok"] for r in releases), [
        r for r in releases if not r["ok"]
    ]
    gates = {j["job"]: j for j in oke_report["jobs"]}
    assert gates["gpu-operator-clusterpolicy-ready"]["exitCode"] == 0
    assert gates["nvidia-dra-driver-gpu-kubelet-plugin-rollout"]["exitCode"] == 0
    assert all(j["exitCode"] == 0 and j["serviceAccount"] == j["job"] for j in gates.values())
    assert [c for c in oke_report["custom_resources"] if c["diffs"]] == []
    assert oke_report["left_after_destroy"]["releases"] == []
    assert oke_report["ok"] is True


def test_on_oke_no_controller_runs_on_the_tainted_gpu_nodes(oke_report: dict[str, Any]) -> None:
    """The OKE GPU nodes carry the platform's GPU taint (nvidia.com/gpu:NoSchedule) and OKE has no
    system-node selector: every Deployment and StatefulSet keeps off them by not tolerating it,
    the KAI and network operators too; the GPU-node agents run there."""
    placed = {(p["namespace"], p["kind"], p["name"]): p for p in oke_report["placement"]}
    controllers = {
        k: p["pools"] for k, p in placed.items() if k[1] in ("Deployment", "StatefulSet")
    }
    assert ("kai-scheduler", "Deployment", "kai-operator") in controllers
    assert {k: pools for k, pools in controllers.items() if set(pools) != {"system"}} == {}
    assert oke_report["placement_findings"] == []
    dra = placed[("nvidia-dra-driver", "DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin")]
    assert set(dra["pools"]) == {"gpu"}

"""Rehearsals on the rig: the default AKS training cluster's runtime stack applied to the real
control plane with the real charts (../shared/reference/charts), its gates run as their own
ServiceAccounts, then destroyed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpucluster_rig import rehearse


@pytest.fixture(scope="module")
def default_report(
    rig_bin: Path, shared: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("rehearse-default")
    reports = rehearse.run(
        config=None,
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


def test_system_components_and_our_jobs_stay_off_gpu_nodes(default_report: dict[str, Any]) -> None:
    placed = default_report["placement"]
    assert placed
    for p in placed:
        if p["kind"] in ("Deployment", "StatefulSet", "Job"):
            assert "gpu" not in p["pools"], p
        assert "unscheduled" not in p["pools"], p


def test_destroy_leaves_no_release(default_report: dict[str, Any]) -> None:
    assert all(r["ok"] for r in default_report["destroy"]["releases"]), default_report["destroy"]
    assert default_report["left_after_destroy"]["releases"] == []
    teardown = [j for j in default_report["jobs"] if "teardown" in j["job"]]
    assert teardown and all(j["exitCode"] == 0 for j in teardown), teardown


def test_the_report_says_passed(default_report: dict[str, Any]) -> None:
    assert default_report["ok"] is True

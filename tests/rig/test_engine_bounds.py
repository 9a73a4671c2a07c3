"""The engine never waits on Helm past a release's timeout: a chart repository that accepts and
never answers (``ChartRepo.hang``) makes ``helm`` fail at the deadline given, with one line that
says so -- not after Helm's own 120 s HTTP timeout. No cluster needed: ``helm show crds`` of a
chart in that repository (what a CRD step's ``data.helm_template`` runs) is enough."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpucluster_rig.build import RigError
from gpucluster_rig.charts import ChartRepo
from gpucluster_rig.engine import STOP_SECONDS, Engine, Stack


def test_a_hanging_repository_fails_a_chart_read_at_its_deadline(
    rig_bin: Path, tmp_path: Path
) -> None:
    repo = ChartRepo(tmp_path / "charts", rig_bin / "helm", None, {"PATH": "/usr/bin:/bin"})
    repo.start()
    try:
        repo.add("example", "1.0.0")
        repo.index()
        stack = Stack(
            tmp_path,
            templates={"example": {"chart": "example", "repository": repo.url, "version": "1.0.0"}},
        )
        engine = Engine(rig_bin / "helm", tmp_path / "kubeconfig", tmp_path / "helm", {})
        assert engine.crds(stack, "example", timeout=30) == ""  # answered: a stub has no CRDs
        repo.hang = True
        fresh = Engine(rig_bin / "helm", tmp_path / "kubeconfig", tmp_path / "helm2", {})
        started = time.monotonic()
        with pytest.raises(RigError) as err:
            fresh.crds(stack, "example", timeout=3)
        took = time.monotonic() - started
    finally:
        repo.hang = False
        repo.stop()
    assert repo.held >= 1
    assert "did not finish within the release's timeout (3 s)" in err.value.line
    assert "\n" not in err.value.line
    assert took < 3 + STOP_SECONDS + 5, took

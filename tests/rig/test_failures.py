"""Failures the rig must surface with the server's own words: a gate whose Role lacks its verb
fails with ``forbidden`` (not a timeout), and what depends on it is never started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpucluster_rig import rehearse

GATE = "gpu-operator-clusterpolicy-ready"


def _drop_get_verb(stack: Path) -> None:
    (rbac,) = stack.glob(f"assets/{GATE}_chart_*/*/templates/001-rbac.yaml")
    text = rbac.read_text()
    assert "  verbs:\n  - get\n" in text
    rbac.write_text(text.replace("  verbs:\n  - get\n", "  verbs:\n  - list\n"))


@pytest.fixture(scope="module")
def broken_report(
    rig_bin: Path, shared: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    (report,) = rehearse.run(
        config=None,
        cluster_name=None,
        folder=tmp_path_factory.mktemp("rehearse-broken"),
        binaries=rig_bin,
        charts=shared / "charts",
        crds=shared / "crds",
        delay=1.0,
        mutate=_drop_get_verb,
    )
    print(rehearse.render_text(report))
    return report


def test_a_gate_without_its_verb_fails_with_the_servers_forbidden_line(
    broken_report: dict[str, Any],
) -> None:
    assert broken_report["ok"] is False
    step = next(r for r in broken_report["apply"]["releases"] if r["release"] == GATE)
    assert step["ok"] is False
    job = next(j for j in broken_report["jobs"] if j["job"] == GATE)
    assert job["exitCode"] == 1
    assert any("forbidden" in line for line in job["lastLines"]), job
    text = rehearse.render_text(broken_report)
    errors = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("error[rig.release]")]
    assert len(errors) == 1 and f"release={GATE}" in errors[0] and "forbidden" in errors[0]


def test_what_depends_on_the_failed_gate_is_never_started(broken_report: dict[str, Any]) -> None:
    steps = {r["release"]: r for r in broken_report["apply"]["releases"]}
    assert steps["kai-scheduler"]["ok"] is None
    assert steps["kai-scheduler"]["message"].startswith("not started:")
    assert steps["cert-manager"]["ok"] is True

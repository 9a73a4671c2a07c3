"""``lint.service-ref``: a container that reaches an in-cluster Service by URL needs a release of
the stack that renders that Service -- prometheus-adapter's ``--prometheus-url`` with nothing
behind it is an error, not a silent pass. Rendered with the reference charts (and a stand-in
chart for NVSentinel, which the reference folder lacks, so every release is rendered)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from gpucluster import cli

pytest.importorskip("helm_python", reason="needs the render extra (helm-python-sdk)")

CLUSTER = """clusters:
  - name: c
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
"""


def lint(tmp_path: Path, charts: Path, *extra: str, stub: bool = True) -> tuple[int, list[str]]:
    config = tmp_path / "gpucluster.yaml"
    config.write_text(CLUSTER)
    folders = ["--charts", str(charts)]
    if stub:
        chart = tmp_path / "stub" / "nvsentinel"
        (chart / "templates").mkdir(parents=True, exist_ok=True)
        (chart / "Chart.yaml").write_text("apiVersion: v2\nname: nvsentinel\nversion: v1.25.0\n")
        (chart / "values.yaml").write_text("")
        folders += ["--charts", str(tmp_path / "stub")]
    out, err = io.StringIO(), io.StringIO()
    argv = ["lint", "--config", str(config), *folders, "--cache", str(tmp_path / "none"), *extra]
    code = cli.main(argv, stdout=out, stderr=err)
    return code, [line for line in err.getvalue().splitlines() if "lint.service-ref" in line]


def test_the_default_stack_reaches_only_services_it_renders(
    reference_charts, tmp_path, monkeypatch
):
    monkeypatch.delenv("GPUCLUSTER_CHARTS", raising=False)
    code, lines = lint(tmp_path, reference_charts)
    assert lines == []


def test_a_url_to_a_service_no_release_renders_fails_lint(reference_charts, tmp_path, monkeypatch):
    monkeypatch.delenv("GPUCLUSTER_CHARTS", raising=False)
    code, lines = lint(
        tmp_path,
        reference_charts,
        "--set",
        "prometheus-adapter:prometheus.url=http://my-prometheus",
    )
    [line] = lines
    assert code == 2 and line.startswith(
        "error[lint.service-ref] cluster=c component=prometheus-adapter release=prometheus-adapter "
        "key=spec.template.spec.containers[0].args["
    ), line
    assert "reaches http://my-prometheus" in line and "Service monitoring/my-prometheus" in line


def test_with_a_release_not_rendered_the_reference_is_not_decided(
    reference_charts, tmp_path, monkeypatch
):
    monkeypatch.delenv("GPUCLUSTER_CHARTS", raising=False)
    code, lines = lint(
        tmp_path,
        reference_charts,
        "--set",
        "prometheus-adapter:prometheus.url=http://my-prometheus",
        stub=False,
    )
    [line] = lines
    assert (
        line.startswith("info[lint.service-ref] ")
        and "not decided:" in line
        and "nvsentinel" in line
    )

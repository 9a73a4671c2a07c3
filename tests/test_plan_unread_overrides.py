"""``gpucluster plan`` names an override no values key of the pinned chart version reads.

A ``--set`` or cluster-file ``values`` path that the chart neither declares (``values.yaml``,
subcharts included, ``values.schema.json``) nor names in a template is one
``warning[values.unread]`` line with the nearest real key as the fix; checked against the real
upstream charts (``../shared/reference/charts``, offline folders as ``$GPUCLUSTER_CHARTS``) and
against a chart in the chart cache. A chart at hand nowhere is one ``info[values.unchecked]``
note. Plan still exits 0: Helm accepts such a value.
"""

from __future__ import annotations

import io
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster import cli
from gpucluster.charts import chartcache

CLUSTER = """clusters:
  - name: lab
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    pools:
      - {name: system, vmSize: Standard_D8s_v5, nodeCount: 2, gpu: false}
      - {name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: 1}
"""


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCLUSTER_CACHE_DIR", "off")
    monkeypatch.setenv(chartcache.CACHE_ENV, str(tmp_path / "chart-cache"))
    monkeypatch.delenv("GPUCLUSTER_CHARTS", raising=False)


def plan(tmp_path: Path, text: str, *args: str) -> tuple[int, str, list[str]]:
    (tmp_path / "gpucluster.yaml").write_text(text)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(
        ["plan", "--config", str(tmp_path / "gpucluster.yaml"), *args], stdout=out, stderr=err
    )
    return code, out.getvalue(), err.getvalue().splitlines()


def ours(lines: list[str]) -> list[str]:
    return [line for line in lines if "[values.un" in line]


@pytest.mark.parametrize(
    "args, extra, key, fix",
    [
        (("--set", "gpuoperator:x=5"), "", "x", "remove the override"),
        (
            ("--set", "gpuoperator:drivr.version=580.105.08"),
            "",
            "drivr.version",
            "(driver.version)",
        ),
        (
            (),
            "    overrides:\n      values:\n        - {component: gpu-operator, values: {drivr: {version: '1'}}}\n",
            "drivr.version",
            "(driver.version)",
        ),
    ],
)
def test_an_override_no_key_of_the_real_chart_reads_is_one_warning(
    tmp_path, monkeypatch, reference_charts, args, extra, key, fix
):
    monkeypatch.setenv("GPUCLUSTER_CHARTS", str(reference_charts))
    code, _, err = plan(tmp_path, CLUSTER + extra, *args)
    assert code == 0, err
    [line] = ours(err)
    assert line.startswith(
        f"warning[values.unread] cluster=lab component=gpu-operator key={key}: override '{key}' "
    ), line
    assert "read by no values key of chart gpu-operator v26.7.0 (standing in for v26.7.1)" in line
    assert f" fix: {'write the key the chart reads ' if 'driver' in fix else ''}{fix}" in line, line


@pytest.mark.parametrize(
    "entry",
    [
        "gpuoperator:driver.version=580.105.08",  # declared in values.yaml
        "gpuoperator:daemonsets.tolerations=null",  # declared
        "gpuoperator:node-feature-discovery.worker.config.core.sleepInterval=60s",  # subchart free-form
        "kube-prometheus-stack:grafana.adminPassword=x",  # named by the grafana subchart's templates only
        "prometheus-adapter:enabled=false",  # gpucluster's component toggle
    ],
)
def test_a_key_the_real_chart_reads_gives_no_warning(
    tmp_path, monkeypatch, reference_charts, entry
):
    monkeypatch.setenv("GPUCLUSTER_CHARTS", str(reference_charts))
    code, _, err = plan(tmp_path, CLUSTER, "--set", entry)
    assert code == 0 and ours(err) == [], err


def test_a_chart_in_the_chart_cache_is_checked_at_its_exact_version(tmp_path, monkeypatch):
    (tmp_path / "gpucluster.yaml").write_text(CLUSTER)
    plans, _ = cli._plans_and_fleet(str(tmp_path / "gpucluster.yaml"))
    [node] = [n for n in plans[0].nodes if n.component == "gpu-operator" and n.kind == "chart"]
    assert (node.chart, node.version) == ("gpu-operator", "v26.7.1")
    cache = tmp_path / "chart-cache"
    chart = chartcache.entry_dir(cache, node.repository, node.chart, node.version) / "gpu-operator"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: gpu-operator\nversion: v26.7.1\n")
    (chart / "values.yaml").write_text("driver:\n  version: '1'\n")
    (chart / "templates" / "x.yaml").write_text("v: {{ .Values.toolkit.env }}\n")
    for folder in (
        cache,
        *[p for p in chart.parents if cache in p.parents],
        chart,
        chart / "templates",
    ):
        folder.chmod(0o700)
    assert chartcache.lookup(cache, node.repository, node.chart, node.version), "entry not trusted"
    code, _, err = plan(
        tmp_path,
        CLUSTER,
        "--set",
        "gpuoperator:drivers.version=2",
        "--set",
        "gpuoperator:toolkit.env=[]",
    )
    assert code == 0, err
    [line] = ours(err)
    assert "key=drivers.version:" in line and "chart gpu-operator v26.7.1:" in line, line
    assert line.endswith(
        "fix: write the key the chart reads (driver.version), or remove the override"
    )


def test_a_chart_at_hand_nowhere_is_one_note(tmp_path):
    code, _, err = plan(tmp_path, CLUSTER, "--set", "gpuoperator:x=5", "--set", "gpuoperator:y=6")
    assert code == 0, err
    [line] = ours(err)
    assert line.startswith("info[values.unchecked] cluster=lab component=gpu-operator key=x: ")
    assert "gpucluster charts pull" in line


def test_a_plan_without_overrides_checks_nothing(tmp_path, monkeypatch, reference_charts):
    monkeypatch.setenv("GPUCLUSTER_CHARTS", str(reference_charts))
    code, _, err = plan(tmp_path, CLUSTER)
    assert code == 0 and ours(err) == [], err


ALIAS_BOMB = (
    "a: &a {"
    + ", ".join(f"k{n}: x" for n in range(9))
    + "}\n"
    + "".join(
        f"{c}: &{c} {{" + ", ".join(f"k{n}: *{p}" for n in range(9)) + "}\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
)
"""A values.yaml of about 500 bytes whose aliases make 9**9 (387 million) leaves (mappings: the keys
are what the check walks)."""


def test_a_chart_whose_values_are_an_alias_bomb_is_one_note(tmp_path):
    """A chart in $GPUCLUSTER_CHARTS (the pinned name and version) whose values.yaml repeats
    itself through aliases: plan with an override on it ends at once with one
    ``info[values.unchecked]`` naming the refusal, exit 0 (run as a child process limited to
    1 GiB of address space, so the old endless walk failed in about 40 s instead of swapping)."""
    charts = tmp_path / "charts" / "gpu-operator"
    charts.mkdir(parents=True)
    (charts / "Chart.yaml").write_text("apiVersion: v2\nname: gpu-operator\nversion: v26.7.1\n")
    (charts / "values.yaml").write_text(ALIAS_BOMB)
    (tmp_path / "gpucluster.yaml").write_text(CLUSTER)
    env = {
        **os.environ,
        "GPUCLUSTER_CHARTS": str(tmp_path / "charts"),
        "GPUCLUSTER_CACHE_DIR": "off",
        chartcache.CACHE_ENV: str(tmp_path / "chart-cache"),
    }

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "gpucluster"),
            "plan",
            "--config",
            str(tmp_path / "gpucluster.yaml"),
            "--set",
            "gpuoperator:x=5",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        preexec_fn=limit,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    [line] = ours(proc.stderr.splitlines())
    assert line.startswith("info[values.unchecked] cluster=lab component=gpu-operator key=x: "), (
        line
    )
    assert "values.yaml" in line and "aliases (*name) are not accepted" in line, line

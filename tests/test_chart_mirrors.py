"""Cluster-file ``charts`` (gpucluster/charts/mirrors.py): where every chart is fetched from.

* accepted forms (one mirror for all, a map per upstream repository, both; top level and per
  cluster) and every refusal as one line with exit 2 from ``gpucluster plan``;
* the plan: chart releases and CRD steps name the mirror, the gates' ``gatedHash`` does not
  change (what is installed is the same chart);
* the synthesized Terraform JSON: every ``helm_release.repository`` and the CRD step's
  ``helm_template`` point at the mirror.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support import AKS_CLUSTER, load_cluster_text, write_cluster_file

from gpucluster import pipeline
from gpucluster.cli import main
from gpucluster.errors import GpuclusterError
from gpucluster.inputs import config
from gpucluster.inputs.config import EMBEDDED_DEFAULT
from gpucluster.model import ChartMirrors

ACR = "oci://myacr.azurecr.io/helm"
NGC = "https://helm.ngc.nvidia.com/nvidia"
ART = "https://artifactory.example.com/helm-nvidia"
CLUSTER = AKS_CLUSTER


write = write_cluster_file
load = load_cluster_text


def test_top_level_default_and_per_cluster_replacement(tmp_path):
    a, b, c = load(
        tmp_path,
        f"charts:\n  mirror: {ACR}/\nclusters:\n"
        + CLUSTER.format(name="a")
        + CLUSTER.format(name="b")
        + f"    charts: {{mirrors: {{'{NGC}/': '{ART}'}}}}\n"
        + CLUSTER.format(name="c")
        + "    charts: {}\n",
    )
    assert a.chart_mirrors == ChartMirrors(default=ACR)  # trailing '/' dropped
    assert a.chart_mirrors.key == "charts"
    assert (
        b.chart_mirrors == ChartMirrors(by_upstream=((NGC, ART),))
        and b.chart_mirrors.key == "clusters[1].charts"
    )
    assert c.chart_mirrors is None  # an empty charts mapping: upstream repositories
    (plain,) = load(tmp_path, "clusters:\n" + CLUSTER.format(name="a"))
    assert plain.chart_mirrors is None


REFUSALS = [
    ("[oci://x.io/h]", "key=clusters[0].charts: 'clusters[0].charts' must be a mapping"),
    (
        "{mirror: oci://x.io/h, proxy: y}",
        "key=clusters[0].charts.proxy: unknown key 'proxy' in 'clusters[0].charts' (allowed: mirror, mirrors)",
    ),
    (
        "{mirror: 42}",
        "key=clusters[0].charts.mirror: 'clusters[0].charts.mirror' must be a repository URL string",
    ),
    (
        "{mirror: myacr.azurecr.io/helm}",
        "key=clusters[0].charts.mirror: invalid repository URL 'myacr.azurecr.io/helm'",
    ),
    ("{mirror: 'ftp://x.io/h'}", "invalid repository URL 'ftp://x.io/h'"),
    (  # a port no socket can have: charts pull would fail on every chart with another cause
        "{mirror: 'http://127.0.0.1:99999/charts'}",
        "invalid repository URL 'http://127.0.0.1:99999/charts': port 99999 is not 1 to 65535",
    ),
    (
        f"{{mirrors: {{'{NGC}': 'oci://x.io:0/h'}}}}",
        "invalid repository URL 'oci://x.io:0/h': port 0 is not 1 to 65535",
    ),
    ("{mirror: 'https://x.io/h?token=1'}", "invalid repository URL 'https://x.io/h?token=***'"),
    ('{mirror: "oci://x.io/h\\n"}', "invalid repository URL 'oci://x.io/h\\n'"),
    (
        "{mirror: 'https://user:s3cret@x.io/h'}",
        "key=clusters[0].charts.mirror: 'clusters[0].charts.mirror': credentials do not "
        "belong in the cluster file",
    ),
    (
        "{mirrors: [a]}",
        "key=clusters[0].charts.mirrors: 'clusters[0].charts.mirrors' must be a mapping",
    ),
    (
        f"{{mirrors: {{'{NGC}': '{NGC}/'}}}}",
        f"key=clusters[0].charts.mirrors[{NGC}]: 'clusters[0].charts.mirrors[{NGC}]' mirrors a "
        "repository to itself",
    ),
    (
        f"{{mirrors: {{'{NGC}': '{ART}', '{NGC}/': '{ACR}'}}}}",
        f"upstream repository '{NGC}' is given twice",
    ),
    (
        "{mirrors: {not-a-url: 'oci://x.io/h'}}",
        "key=clusters[0].charts.mirrors: invalid repository URL 'not-a-url'",
    ),
]


@pytest.mark.parametrize(
    "charts, expected", REFUSALS, ids=[r[1].split(": ", 1)[-1][:48] for r in REFUSALS]
)
def test_plan_refuses_with_one_line_and_exit_2(tmp_path, capsys, charts, expected):
    path = write(tmp_path, "clusters:\n" + CLUSTER.format(name="train") + f"    charts: {charts}\n")
    assert main(["plan", "--config", str(path)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert (
        line.startswith(f"error[input] file={path} cluster=train ")
        and expected in line
        and " fix: " in line
    ), line
    assert "s3cret" not in line and captured.out == ""


def test_top_level_refusal_names_no_cluster(tmp_path):
    with pytest.raises(GpuclusterError) as info:
        load(tmp_path, "charts: {mirror: 'http://'}\nclusters:\n" + CLUSTER.format(name="a"))
    assert (
        " key=charts.mirror: invalid repository URL 'http://'" in info.value.render()
        and " cluster=" not in info.value.render()
    )


def mirrored_plan(tmp_path: Path, charts: str):
    (cluster,) = load(tmp_path, f"charts: {charts}\n" + EMBEDDED_DEFAULT.read_text())
    return pipeline.build_plan(cluster)


@pytest.fixture(scope="module")
def upstream_plan(tmp_path_factory):
    (cluster,) = config.load_clusters(str(EMBEDDED_DEFAULT), env={})
    return pipeline.build_plan(cluster)


def test_charts_and_crd_steps_come_from_the_mirror_and_gates_do_not_change(tmp_path, upstream_plan):
    plan = mirrored_plan(tmp_path, f"{{mirror: {ACR}, mirrors: {{'{NGC}': '{ART}'}}}}")
    up = {n.id: n for n in upstream_plan.nodes}
    charts = [n for n in plan.nodes if n.kind == "chart"]
    assert charts and {n.repository for n in charts} == {ACR, ART}
    for n in charts:
        assert n.repository == (ART if up[n.id].repository == NGC else ACR), n.id
        assert (n.chart, n.version) == (up[n.id].chart, up[n.id].version)
    steps = [n for n in plan.nodes if n.crd_source is not None]
    assert steps and all(n.crd_source.repository == ACR for n in steps)
    for n in plan.nodes:  # everything else is the upstream plan's: gatedHash, values, order
        assert (n.values, n.depends_on, n.variable_hashes) == (
            up[n.id].values,
            up[n.id].depends_on,
            up[n.id].variable_hashes,
        ), n.id


def test_two_charts_of_one_name_cannot_share_a_mirror(tmp_path):
    from gpucluster.charts.mirrors import apply_mirrors
    from gpucluster.model import PlanNode

    nodes = [
        PlanNode(
            id="a",
            kind="chart",
            component="a",
            namespace="n",
            repository="https://one.example/charts",
            chart="x",
            version="1",
        ),
        PlanNode(
            id="b",
            kind="chart",
            component="b",
            namespace="n",
            repository="oci://two.example/charts",
            chart="x",
            version="2",
        ),
    ]
    with pytest.raises(GpuclusterError) as info:
        apply_mirrors(
            nodes, ChartMirrors(default=ACR, key="clusters[0].charts"), cluster="c", file="f.yaml"
        )
    assert (
        "key=clusters[0].charts.mirrors: chart 'x' of https://one.example/charts and of oci://two.example/charts would both "
        f"come from mirror {ACR}"
    ) in info.value.render()


def test_synthesized_releases_and_crd_steps_point_at_the_mirror(tmp_path):
    from gpucluster_cdk import stacks

    plan = mirrored_plan(tmp_path, f"{{mirrors: {{'{NGC}': '{ART}'}}, mirror: {ACR}}}")
    out = tmp_path / "cdktf.out"
    stacks.synth([plan], out)
    runtime = json.loads((out / "stacks" / "gpu-training-runtime" / "cdk.tf.json").read_text())
    remote = {
        name: r for name, r in runtime["resource"]["helm_release"].items() if "repository" in r
    }
    assert remote and {r["repository"] for r in remote.values()} == {ACR, ART}
    assert (
        remote["gpu-operator"]["repository"] == ART
        and remote["gpu-operator"]["chart"] == "gpu-operator"
    )
    assert (
        remote["cert-manager"]["repository"] == ACR
        and remote["cert-manager"]["chart"] == "cert-manager"
    )
    templates = runtime["data"]["helm_template"]
    assert templates and {t["repository"] for t in templates.values()} == {ACR}
    text = json.dumps(runtime)
    for upstream in (
        "https://charts.jetstack.io",
        NGC,
        "oci://ghcr.io",
        "oci://registry.k8s.io",
    ):  # chart repositories only
        assert upstream not in text, upstream

"""Cluster-file ``images.mirror`` (gpucluster/charts/imagemirror.py): every image reference of the
rendered releases rewritten to a private registry.

* the path mapping (``<mirror>/<registry>/<path>``, Docker's defaults, tags and digests kept) and
  the rewrite of pod templates, operator defaults and custom-resource operands;
* the cluster file: top level and per cluster, refusals as one line with exit 2;
* real charts (../shared/reference/charts; skipped when absent): with the mirror, lint finds no
  image outside it for the default AKS, an NVKE GB200 and an OKE GB200 cluster, and
  ``gpucluster images`` lists the same images as without it, each at the mirror (its upstream is
  the unmirrored reference); without the rewrite lint reports them (``lint.public-registry``);
* synth: each ``helm_release`` of a mirrored cluster runs ``gpucluster postrender``; the post-renderer
  command rewrites stdin.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import yaml
from _support import load_cluster_text
from test_images import THREE

from gpucluster import pipeline
from gpucluster.charts import imagemirror
from gpucluster.cli import main
from gpucluster.inputs.config import EMBEDDED_DEFAULT

M = "myacr.azurecr.io/mirror"
SHA = "sha256:" + "e" * 64


def run(*argv: str, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("busybox", f"{M}/docker.io/library/busybox"),
        ("nvcr.io/nvidia/driver:595.91.07", f"{M}/nvcr.io/nvidia/driver:595.91.07"),
        (f"registry.k8s.io/kubectl:v1.34.1@{SHA}", f"{M}/registry.k8s.io/kubectl:v1.34.1@{SHA}"),
        (f"{M}/quay.io/a/b:1", f"{M}/quay.io/a/b:1"),
        ("not an image", None),
    ],
)
def test_path_mapping_keeps_tag_and_digest(text, expected):
    assert imagemirror.mirror_reference(text, M) == expected


def test_rewrite_covers_containers_operator_defaults_and_operands():
    pod = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {
            "template": {
                "spec": {
                    "initContainers": [{"name": "i", "image": "busybox:1.38"}],
                    "containers": [
                        {
                            "name": "op",
                            "image": "nvcr.io/nvidia/gpu-operator:v26.7.0",
                            "env": [
                                {
                                    "name": "VALIDATOR_IMAGE",
                                    "value": "nvcr.io/nvidia/gpu-operator:v26.7.0",
                                },
                                {"name": "OTHER", "value": "nvcr.io/x:1"},
                            ],
                            "args": ["--prometheus-config-reloader=quay.io/p/r:v1", "--level=2"],
                        }
                    ],
                }
            }
        },
    }
    assert imagemirror.rewrite_object(pod, M) == []
    spec = pod["spec"]["template"]["spec"]
    assert spec["initContainers"][0]["image"] == f"{M}/docker.io/library/busybox:1.38"
    c = spec["containers"][0]
    assert c["env"][0]["value"] == f"{M}/nvcr.io/nvidia/gpu-operator:v26.7.0"
    assert c["env"][1]["value"] == "nvcr.io/x:1"  # not an image variable
    assert c["args"] == [f"--prometheus-config-reloader={M}/quay.io/p/r:v1", "--level=2"]
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "spec": {
            "driver": {"repository": "nvcr.io/nvidia", "image": "driver", "version": "595"},
            "validator": {"image": "nvcr.io/nvidia/gpu-operator:v1", "version": "v1"},
        },
    }
    imagemirror.rewrite_object(policy, M)
    assert policy["spec"]["driver"] == {
        "repository": f"{M}/nvcr.io/nvidia",
        "image": "driver",
        "version": "595",
    }
    assert policy["spec"]["validator"]["image"] == f"{M}/nvcr.io/nvidia/gpu-operator:v1"
    kai = {
        "apiVersion": "kai.scheduler/v1",
        "kind": "Config",
        "spec": {"binder": {"image": {"name": "binder", "repository": "ghcr.io/k", "tag": "v1"}}},
    }
    holder = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"c.yaml": yaml.safe_dump(kai)}}
    imagemirror.rewrite_object(holder, M)
    assert (
        yaml.safe_load(holder["data"]["c.yaml"])["spec"]["binder"]["image"]["repository"]
        == f"{M}/ghcr.io/k"
    )


def test_cluster_file_top_level_and_per_cluster(tmp_path):
    text = EMBEDDED_DEFAULT.read_text()
    (cluster,) = load_cluster_text(tmp_path, f"images: {{mirror: {M}/}}\n" + text)
    assert cluster.image_mirror == M
    assert pipeline.build_plan(cluster).cluster.image_mirror == M
    per = text.replace(
        "    kubernetesVersion:",
        "    images: {mirror: reg.example.com:5000}\n    kubernetesVersion:",
    )
    (cluster,) = load_cluster_text(tmp_path, f"images: {{mirror: {M}}}\n" + per)
    assert cluster.image_mirror == "reg.example.com:5000"


@pytest.mark.parametrize(
    ("images", "key"),
    [
        ("{mirror: 'https://myacr.azurecr.io'}", "images.mirror"),
        ("{mirror: 'MyAcr.azurecr.io'}", "images.mirror"),
        ("{mirror: 'myacr.azurecr.io/m:1'}", "images.mirror"),
        ("{mirror: registry}", "images.mirror"),
        ("{mirrors: x}", "images"),
        ("myacr.azurecr.io", "images"),
    ],
)
def test_bad_mirror_is_one_line_exit_2(tmp_path, images, key):
    file = tmp_path / "gpucluster.yaml"
    file.write_text(f"images: {images}\n" + EMBEDDED_DEFAULT.read_text())
    code, out, err = run("plan", "--config", str(file))
    assert code == 2 and out == ""
    lines = [line for line in err.splitlines() if line.startswith("error[")]
    assert len(lines) == 1 and f" key={key}" in lines[0] and "Traceback" not in err


def test_postrender_command_rewrites_stdin(monkeypatch):
    stream = "---\n# Source: c/templates/d.yaml\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: 'quay.io/a/b:1'}\n---\n"
    code, out, err = run("postrender", "--image-mirror", M, stdin=stream, monkeypatch=monkeypatch)
    assert code == 0, err
    (doc,) = list(yaml.safe_load_all(out))
    assert doc["spec"]["containers"][0]["image"] == f"{M}/quay.io/a/b:1"
    code, out, err = run("postrender", "--image-mirror", M, stdin="a: [", monkeypatch=monkeypatch)
    assert code == 2 and out == "" and err.startswith("error[postrender.input] key=stdin:")


def test_postrender_reads_yaml_value_keys_as_helm_does(monkeypatch):
    """prometheus-operator-crds' CRDs carry ``- =`` (an enum member): YAML 1.1's value-key tag, a
    plain string to Go's YAML library. The post-renderer refused the whole release before."""
    stream = (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x.example.com}\n"
        "spec:\n  enum:\n  - =\n  - '!='\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec:\n  containers:\n  - {name: c, image: 'quay.io/a/b:1'}\n"
    )
    code, out, err = run("postrender", "--image-mirror", M, stdin=stream, monkeypatch=monkeypatch)
    assert code == 0, err
    crd, pod = list(yaml.safe_load_all(out))
    assert crd["spec"]["enum"] == ["=", "!="]
    assert pod["spec"]["containers"][0]["image"] == f"{M}/quay.io/a/b:1"


def test_render_leaves_hooks_as_helm_3_does():
    """Helm 3's post-renderer is handed the release's manifests without its hooks (helm v3.18.4,
    pkg/action/action.go renderResources: ``pr.Run(b)`` on the sorted manifests, the hooks kept
    apart), so a hook's image is pulled as the chart renders it: render and lint must see that."""
    from gpucluster.lint.render import post_render

    hook = (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  annotations: {helm.sh/hook: post-install}\n"
        "spec:\n  template:\n    spec:\n      containers:\n      - {name: c, image: 'quay.io/a/hook:1'}\n"
    )
    plain = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: 'quay.io/a/b:1'}\n"
    out = post_render({"t/hook.yaml": hook, "t/pod.yaml": plain}, M)
    (job,) = list(yaml.safe_load_all(out["t/hook.yaml"]))
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "quay.io/a/hook:1"
    (pod,) = list(yaml.safe_load_all(out["t/pod.yaml"]))
    assert pod["spec"]["containers"][0]["image"] == f"{M}/quay.io/a/b:1"


def test_synthesized_releases_run_the_post_renderer(tmp_path):
    from gpucluster_cdk import stacks

    (cluster,) = load_cluster_text(
        tmp_path, f"images: {{mirror: {M}}}\n" + EMBEDDED_DEFAULT.read_text()
    )
    out = tmp_path / "cdktf.out"
    stacks.synth([pipeline.build_plan(cluster)], out)
    runtime = json.loads((out / "stacks" / "gpu-training-runtime" / "cdk.tf.json").read_text())
    releases = runtime["resource"]["helm_release"]
    assert len(releases) > 10
    for name, release in releases.items():
        assert release["postrender"] == {
            "binary_path": "gpucluster",
            "args": ["postrender", "--image-mirror", M],
        }, name
    (plain,) = load_cluster_text(tmp_path, EMBEDDED_DEFAULT.read_text())
    stacks.synth([pipeline.build_plan(plain)], out)
    runtime = json.loads((out / "stacks" / "gpu-training-runtime" / "cdk.tf.json").read_text())
    assert not any("postrender" in r for r in runtime["resource"]["helm_release"].values())


# --------------------------------------------------------------------------- real charts


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, reference_charts: Path):
    from gpucluster.cli import _plans
    from gpucluster.lint.render import ChartSources, chart_folders_from, render_plans

    folder = tmp_path_factory.mktemp("mirror")
    plain, mirrored = folder / "plain.yaml", folder / "mirrored.yaml"
    plain.write_text(THREE, encoding="utf-8")
    mirrored.write_text(f"images: {{mirror: {M}}}\n" + THREE, encoding="utf-8")
    sources = ChartSources(chart_folders_from([str(reference_charts)]), cache_dir=folder / "cache")
    out = {}
    for name, file in (("plain", plain), ("mirrored", mirrored)):
        out[name] = render_plans(_plans(str(file)), sources)
    yield out
    for result in out.values():
        result.renderer.close()


def test_lint_finds_no_public_registry_with_the_mirror(rendered):
    from gpucluster.lint.lint import lint_result

    findings = lint_result(rendered["mirrored"])
    assert [f.render() for f in findings if f.id == "lint.public-registry"] == []
    assert not [f.render() for f in findings if f.severity == "error"]


def test_lint_reports_images_outside_the_mirror(rendered, monkeypatch):
    """The check can fail: the same rendered objects without the rewrite."""
    from gpucluster.lint.lint import lint_result

    plain = rendered["plain"]
    for plan in plain.plans:
        monkeypatch.setattr(plan.cluster, "image_mirror", M)
    findings = [f for f in lint_result(plain) if f.id == "lint.public-registry"]
    assert {f.cluster for f in findings} == {"gpu-training", "nvke-gb200", "oke-gb200"}
    assert any("nvcr.io/nvidia/k8s-device-plugin:v0.20.0" in f.message for f in findings)


def test_inventory_is_the_same_images_each_at_the_mirror(rendered):
    from gpucluster.lint import images

    plain = {inv.cluster: inv for inv in images.inventory(rendered["plain"])}
    mirrored = {inv.cluster: inv for inv in images.inventory(rendered["mirrored"])}
    assert set(plain) == set(mirrored) == {"gpu-training", "nvke-gb200", "oke-gb200"}
    for name, inv in mirrored.items():
        refs = [i.ref.reference for i in inv.images]
        assert refs and all(r.startswith(M + "/") for r in refs), name
        assert sorted(i.upstream for i in inv.images) == sorted(
            i.ref.reference for i in plain[name].images
        ), name
        for doc in images.hauler_documents([inv]):
            assert images.validate_against(doc, images.HAULER_SCHEMA) == []

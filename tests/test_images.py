"""``gpucluster images`` (gpucluster/lint/images.py, docs/air-gap.md).

* Real charts (../shared/reference/charts; skipped when absent), the default AKS cluster, an NVKE
  GB200 and an OKE GB200 cluster rendered once: every container image of every rendered pod
  template is in the inventory (the rendered objects are walked independently here); the
  operand images of the GPU Operator's ClusterPolicy and the Network Operator's NicClusterPolicy
  are there with their per-node-OS driver tags; ``--format hauler`` and ``--format zarf`` validate
  against the vendored schemas, and the JSON counts add up.
* Units: reference parsing (Docker's defaults), moving tags, CR operand composition (disabled and
  sandbox components skipped, a precompiled driver unlisted), the schemas refuse a document
  Hauler or Zarf would refuse.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from gpucluster.cli import main
from gpucluster.lint import images

THREE = """\
clusters:
  - name: gpu-training
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    profile: {gpuStack: azure-managed}
    kubernetesVersion: "1.34"
  - name: nvke-gb200
    criteria: {service: nvke, accelerator: gb200, os: ubuntu, intent: training}
    kubernetesVersion: "1.34"
    settings:
      rails:
        - {name: mlx5_0, rootDevice: "0000:03:00.0"}
        - {name: mlx5_1, rootDevice: "0002:03:00.0"}
        - {name: mlx5_3, rootDevice: "0010:03:00.0"}
        - {name: mlx5_4, rootDevice: "0012:03:00.0"}
  - name: oke-gb200
    criteria: {service: oke, accelerator: gb200, os: ubuntu, intent: training}
    kubernetesVersion: "1.34"
"""


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("busybox", ("docker.io", "library/busybox", None, None)),
        ("alpine/kubectl:1.36.2", ("docker.io", "alpine/kubectl", "1.36.2", None)),
        ("localhost:5000/a/b:1", ("localhost:5000", "a/b", "1", None)),
        (
            "nvcr.io/nvidia/driver:595.91.07-ubuntu24.04",
            ("nvcr.io", "nvidia/driver", "595.91.07-ubuntu24.04", None),
        ),
        (
            "registry.k8s.io/kubectl:v1.34.1@sha256:" + "a" * 64,
            ("registry.k8s.io", "kubectl", "v1.34.1", "sha256:" + "a" * 64),
        ),
    ],
)
def test_parse_reference_applies_dockers_defaults(text, expected):
    ref = images.parse_reference(text)
    assert ref is not None
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == expected


@pytest.mark.parametrize(
    "text", ["", "a:b:c", "quay.io/p/prometheus:v3:v3", "UPPER/case", "x@sha256:12"]
)
def test_parse_reference_refuses_what_is_no_reference(text):
    assert images.parse_reference(text) is None


@pytest.mark.parametrize(
    ("text", "moving"),
    [
        ("ghcr.io/x/y", True),
        ("ghcr.io/x/y:latest", True),
        ("ghcr.io/x/y:stable", True),
        ("ghcr.io/x/y:v1.2", False),
        ("ghcr.io/x/y@sha256:" + "b" * 64, False),
        ("ghcr.io/x/y:latest@sha256:" + "b" * 64, False),
    ],
)
def test_moving_is_a_tag_naming_no_version_without_a_digest(text, moving):
    assert images.moving(images.parse_reference(text)) is moving


def _ops(doc):
    return [(path, text) for path, text, _ in images.cr_operands(doc)]


def test_cluster_policy_operands_skip_disabled_and_sandbox_components():
    doc = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "spec": {
            "driver": {
                "enabled": False,
                "repository": "nvcr.io/nvidia",
                "image": "driver",
                "version": "1",
                "manager": {
                    "repository": "nvcr.io/nvidia/cloud-native",
                    "image": "k8s-driver-manager",
                    "version": "v0.1",
                },
            },
            "devicePlugin": {
                "enabled": True,
                "repository": "nvcr.io/nvidia",
                "image": "k8s-device-plugin",
                "version": "v0.2",
            },
            "validator": {
                "repository": "nvcr.io/nvidia",
                "image": "gpu-operator",
                "version": "sha256:" + "c" * 64,
            },
            "sandboxWorkloads": {"enabled": False},
            "sandboxDevicePlugin": {
                "enabled": True,
                "repository": "nvcr.io/nvidia",
                "image": "kubevirt-gpu-device-plugin",
                "version": "v1",
            },
        },
    }
    assert _ops(doc) == [
        ("spec.devicePlugin", "nvcr.io/nvidia/k8s-device-plugin:v0.2"),
        ("spec.validator", "nvcr.io/nvidia/gpu-operator@sha256:" + "c" * 64),
    ]
    doc["spec"]["sandboxWorkloads"]["enabled"] = True
    assert ("spec.sandboxDevicePlugin", "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1") in _ops(doc)


def test_full_image_wins_over_version_and_a_container_sha_is_the_digest():
    prom = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "spec": {"image": "quay.io/prometheus/prometheus:v3.1.0", "version": "v3.1.0"},
    }
    assert _ops(prom) == [("spec", "quay.io/prometheus/prometheus:v3.1.0")]
    sha = "sha256:" + "d" * 64
    wright = {
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "spec": {
            "packages": {
                "p": {"image": "ghcr.io/nvidia/pkg", "version": "1.1.1", "containerSHA": sha}
            }
        },
    }
    assert _ops(wright) == [("spec.packages.p", f"ghcr.io/nvidia/pkg:1.1.1@{sha}")]
    kai = {
        "apiVersion": "kai.scheduler/v1",
        "kind": "Config",
        "spec": {
            "binder": {
                "image": {
                    "name": "binder",
                    "repository": "ghcr.io/nvidia/kai-scheduler",
                    "tag": "v0.16.9",
                }
            }
        },
    }
    assert _ops(kai) == [("spec.binder.image", "ghcr.io/nvidia/kai-scheduler/binder:v0.16.9")]


def test_hauler_schema_refuses_what_hauler_does_not_read():
    good = {
        "apiVersion": "content.hauler.cattle.io/v1",
        "kind": "Images",
        "metadata": {"name": "a"},
        "spec": {"images": [{"name": "nvcr.io/x:1"}]},
    }
    assert images.validate_against(good, images.HAULER_SCHEMA) == []
    for bad in (
        {**good, "apiVersion": "content.hauler.cattle.io/v1alpha1"},
        {**good, "spec": {"images": [{"image": "nvcr.io/x:1"}]}},
        {**good, "kind": "Charts", "spec": {"charts": [{"name": "c", "repoURL": "oci://r"}]}},
    ):
        assert images.validate_against(bad, images.HAULER_SCHEMA) != []


def test_zarf_schema_refuses_what_zarf_does_not_read():
    good = {
        "kind": "ZarfPackageConfig",
        "metadata": {"name": "p"},
        "components": [{"name": "c", "images": ["nvcr.io/x:1"]}],
    }
    assert images.validate_against(good, images.ZARF_SCHEMA) == []
    for bad in (
        {**good, "components": []},
        {**good, "components": [{"name": "Upper", "images": []}]},
        {**good, "components": [{"name": "c", "charts": [{"name": "x", "repo": "y"}]}]},
        {**good, "kind": "Package"},
    ):
        assert images.validate_against(bad, images.ZARF_SCHEMA) != []


def test_bad_node_os_is_one_line_exit_2(tmp_path):
    code, out, err = run("images", "--node-os", "Ubuntu 24", "--charts", str(tmp_path))
    assert code == 2 and out == ""
    assert err.startswith("error[input] key=--node-os:") and err.count("\n") == 1


def test_images_of_a_stand_in_chart_make_the_inventory_incomplete(tmp_path):
    """A chart of another version standing in for the pinned one (render.chart-nearest) renders
    that version's images, not the ones the deploy pulls: the inventory said complete (exit 0)
    and listed nvcr.io/nvidia/gpu-operator:v26.7.0 for the pinned v26.7.1 chart."""
    chart = tmp_path / "charts" / "gpu-operator"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: gpu-operator\nversion: v1.0.0\n")
    (chart / "templates" / "d.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: gpu-operator}\nspec:\n"
        "  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n"
        "    spec: {containers: [{name: c, image: 'nvcr.io/nvidia/gpu-operator:v1.0.0'}]}\n"
    )
    config = tmp_path / "gpucluster.yaml"
    config.write_text(THREE.split("  - name: nvke-gb200")[0], encoding="utf-8")
    argv = ["images", "--config", str(config), "--charts", str(tmp_path / "charts")]
    code, out, err = run(*argv, "--cache", str(tmp_path / "cache"), "--format", "json")
    (doc,) = json.loads(out)["clusters"]
    assert code == 4 and doc["complete"] is False, err
    (stand_in,) = doc["standIns"]
    assert stand_in.startswith(
        "gpu-operator: chart gpu-operator v1.0.0 stands in for gpu-operator v"
    )
    assert (
        "warning[images.stand-in] cluster=gpu-training: the images of gpu-operator were listed "
        "from a stand-in: chart gpu-operator v1.0.0 stands in for gpu-operator v"
    ) in err
    code, text, _ = run(*argv, "--cache", str(tmp_path / "cache"))
    assert "  listed from a stand-in chart: gpu-operator: chart gpu-operator v1.0.0" in text


@pytest.mark.parametrize("how", ["app-version", "folder"])
def test_every_kind_of_stand_in_makes_the_inventory_incomplete(tmp_path, how):
    """Not only the nearest version: a chart whose appVersion alone is the pin, and a folder
    named ``<chart>-<pin>`` whose Chart.yaml says another version, are stand-ins too (render
    and lint list them; images listed only the nearest and said the inventory was complete)."""
    config = tmp_path / "gpucluster.yaml"
    config.write_text(THREE.split("  - name: nvke-gb200")[0], encoding="utf-8")
    code, out, _ = run("plan", "--config", str(config), "--format", "json")
    assert code == 0
    (pin,) = {
        n["version"]
        for c in json.loads(out)
        for n in c["nodes"]
        if n["kind"] == "chart" and n["component"] == "gpu-operator"
    }
    name = f"gpu-operator-{pin}" if how == "folder" else "gpu-operator"
    chart = tmp_path / "charts" / name
    (chart / "templates").mkdir(parents=True)
    app = f"\nappVersion: {pin}" if how == "app-version" else ""
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: gpu-operator\nversion: 0.0.1{app}\n")
    (chart / "templates" / "d.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: gpu-operator}\nspec:\n"
        "  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n"
        "    spec: {containers: [{name: c, image: 'nvcr.io/nvidia/gpu-operator:v1.0.0'}]}\n"
    )
    argv = ["images", "--config", str(config), "--charts", str(tmp_path / "charts")]
    code, out, err = run(*argv, "--cache", str(tmp_path / "cache"), "--format", "json")
    (doc,) = json.loads(out)["clusters"]
    assert code == 4 and doc["complete"] is False, err
    (stand_in,) = doc["standIns"]
    assert stand_in.startswith("gpu-operator: "), stand_in
    assert "warning[images.stand-in] cluster=gpu-training: the images of gpu-operator" in err


# --------------------------------------------------------------------------- real charts


@pytest.fixture(scope="module")
def three(tmp_path_factory, reference_charts: Path):
    config = tmp_path_factory.mktemp("images") / "gpucluster.yaml"
    config.write_text(THREE, encoding="utf-8")
    base = (
        "--config",
        str(config),
        "--charts",
        str(reference_charts),
        "--cache",
        str(config.parent / "cache"),
    )
    results = {fmt: run("images", *base, "--format", fmt) for fmt in ("json", "hauler", "zarf")}
    from gpucluster.cli import _plans
    from gpucluster.lint.render import ChartSources, chart_folders_from, render_plans

    plans = _plans(str(config))
    result = render_plans(
        plans,
        ChartSources(
            chart_folders_from([str(reference_charts)]), cache_dir=config.parent / "cache"
        ),
    )
    yield results, result
    result.renderer.close()


def _pod_images(result, cluster):
    from gpucluster.lint.lint import POD_TEMPLATE_PATHS

    found = set()
    for release in result.releases:
        if release.cluster != cluster:
            continue
        for _, doc in release.objects:
            path = POD_TEMPLATE_PATHS.get(str(doc.get("kind")))
            if (
                not path
                or (doc.get("metadata", {}).get("annotations") or {}).get("helm.sh/hook") == "test"
            ):
                continue
            pod = doc
            for key in path:
                pod = pod.get(key) or {}
            for group in ("initContainers", "containers"):
                for c in pod.get(group) or []:
                    found.add(images.parse_reference(c["image"]).reference)
    return found


@pytest.mark.parametrize("cluster", ["gpu-training", "nvke-gb200", "oke-gb200"])
def test_every_rendered_container_image_is_in_the_inventory(three, cluster):
    results, result = three
    code, out, err = results["json"]
    assert code == 4, err  # nvsentinel's chart is not in the reference charts: incomplete, said so
    assert "warning[images.incomplete] cluster=" + cluster + ": the images of nvsentinel" in err
    doc = next(c for c in json.loads(out)["clusters"] if c["name"] == cluster)
    listed = {i["reference"] for i in doc["images"]}
    pods = _pod_images(result, cluster)
    assert len(pods) > 15
    assert sorted(pods - listed) == []
    counts = doc["counts"]
    assert counts["images"] == len(doc["images"]) == counts["digest"] + counts["tagOnly"]
    assert counts["digest"] == sum(1 for i in doc["images"] if i["digest"])
    assert doc["complete"] is False and doc["notRendered"] == ["nvsentinel"]


def test_operand_images_of_the_custom_resources_are_listed(three):
    results, _ = three
    clusters = {c["name"]: c for c in json.loads(results["json"][1])["clusters"]}
    by_ref = {c: {i["reference"]: i for i in doc["images"]} for c, doc in clusters.items()}
    nvke = by_ref["nvke-gb200"]
    # the operator-managed GPU driver of NVKE: one tag per node OS, from the ClusterPolicy
    drivers = sorted(r for r in nvke if r.startswith("nvcr.io/nvidia/driver:"))
    assert [d.rsplit("-", 1)[1] for d in drivers] == ["ubuntu22.04", "ubuntu24.04"]
    assert all(nvke[d]["sources"] == ["CR operand"] for d in drivers)
    assert any(r.startswith("nvcr.io/nvidia/k8s/container-toolkit:") for r in nvke)
    assert "nvcr.io/nvidia/mellanox/multus-cni:network-operator-v26.4.1" in nvke  # NicClusterPolicy
    # azure-managed AKS: no driver, no toolkit; the DOCA driver per OS and arch (amd64 H100 hosts)
    aks = by_ref["gpu-training"]
    assert not any(
        r.startswith(("nvcr.io/nvidia/driver:", "nvcr.io/nvidia/k8s/container-toolkit:"))
        for r in aks
    )
    doca = sorted(r for r in aks if "/doca-driver:" in r)
    assert len(doca) == 2 and all(r.endswith("-amd64") for r in doca)
    assert "nvcr.io/nvidia/k8s-device-plugin:v0.20.0" in aks
    # operator defaults: images an operator starts with no CR field naming them
    assert (
        "operator default"
        in aks["quay.io/prometheus-operator/prometheus-config-reloader:v0.90.1"]["sources"]
    )
    assert (
        "operator default"
        in aks["nvcr.io/nvidia/mellanox/network-operator-init-container:network-operator-v26.4.1"][
            "sources"
        ]
    )
    # a moving tag is flagged
    moving = [r for r, i in nvke.items() if i["moving"]]
    assert moving == ["ghcr.io/k8snetworkplumbingwg/sriov-network-metrics-exporter"]


def test_hauler_and_zarf_forms_validate_against_the_vendored_schemas(three):
    results, _ = three
    code, out, _err = results["hauler"]
    assert code == 4
    docs = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in docs] == ["Images", "Charts"] * 3
    for d in docs:
        assert images.validate_against(d, images.HAULER_SCHEMA) == []
    listed = {c["name"]: len(c["images"]) for c in json.loads(results["json"][1])["clusters"]}
    assert [len(d["spec"]["images"]) for d in docs if d["kind"] == "Images"] == list(
        listed.values()
    )
    code, out, _err = results["zarf"]
    zarf = yaml.safe_load(out)
    assert images.validate_against(zarf, images.ZARF_SCHEMA) == []
    assert [c["name"] for c in zarf["components"]] == ["gpu-training", "nvke-gb200", "oke-gb200"]
    oci = [
        c for comp in zarf["components"] for c in comp["charts"] if c["url"].startswith("oci://")
    ]
    assert any(c["url"] == "oci://ghcr.io/nvidia/nvsentinel" for c in oci)

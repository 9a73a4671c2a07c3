"""Every image of gpucluster's own manifests is pinned by digest, image and digest together.

The Skyhook packages (nodewright tuning, NVKE rdma-modules) carry ``containerSHA`` next to their
version; pod images of manifest charts carry ``@sha256:``; the nodewright removal image is given
with its own tag and digest (the chart's default digest belongs to another image). The
NicClusterPolicy images (AKS, OKE) are the one exception: the CRD takes repository / image /
version and builds ``repository/image:version``, so no digest can be given (upstream: AICR's image
digest exemptions, Mellanox/network-operator#2555) -- listed here so a new one is noticed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from render_cases import base_cases, cluster_doc

from gpucluster import pipeline
from gpucluster.inputs.config import parse_clusters

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
NICCLUSTERPOLICY_TAG_ONLY = {
    "doca-driver",
    "k8s-rdma-shared-dev-plugin",
    "doca_telemetry",
    "nvidia-k8s-ipam",
    "plugins",
    "multus-cni",
}


def _objects(plan):
    for node in plan.nodes:
        if node.local_chart is None or node.kind not in ("manifests", "pre-manifests"):
            continue
        for path, text in node.local_chart.files.items():
            if path.startswith("templates/"):
                yield from (d for d in yaml.safe_load_all(text) if isinstance(d, dict))


def _walk_images(doc):
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "image" and isinstance(v, str):
                yield v
            yield from _walk_images(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _walk_images(v)


@pytest.mark.parametrize(
    "platform,leaf,profile", [c for c in base_cases() if c[0] != "aks" or c[2] == "azure-managed"]
)
def test_own_manifest_images_are_pinned_by_digest(platform, leaf, profile, tmp_path):
    (spec,) = parse_clusters(
        {"clusters": [cluster_doc(platform, leaf, profile, "plain")]},
        source="x.yaml",
        root=tmp_path,
    )
    plan = pipeline.build_plan(spec)
    for doc in _objects(plan):
        if doc.get("kind") in ("Skyhook", "NodeWright"):
            for name, pkg in doc["spec"]["packages"].items():
                assert DIGEST.match(str(pkg.get("containerSHA", ""))), (
                    f"Skyhook package {name} without containerSHA"
                )
        elif doc.get("kind") == "NicClusterPolicy":
            images = {
                v["image"] for v in doc["spec"].values() if isinstance(v, dict) and "image" in v
            }
            images |= {
                v["image"]
                for part in doc["spec"].values()
                if isinstance(part, dict)
                for v in part.values()
                if isinstance(v, dict) and "image" in v
            }
            assert images <= NICCLUSTERPOLICY_TAG_ONLY, images
        else:
            for image in _walk_images(doc):
                assert re.search(r"@sha256:[0-9a-f]{64}$", image), (
                    f"{doc.get('kind')} {doc['metadata']['name']}: {image}"
                )
    nodewright = plan.components.get("nodewright-operator")
    if nodewright is not None:
        hook = nodewright.values["webhook"]
        assert hook["removalImage"] == "docker.io/alpine/kubectl" and hook["removalTag"] == "1.36.2"
        assert DIGEST.match(hook["removalDigest"])


def test_the_nodewright_removal_job_runs_the_digest_of_its_own_image(reference_charts):
    """Rendered with the chart: image, tag and digest together (the chart default's digest is
    bitnami/kubectl's)."""
    from render_cases import UNAVAILABLE

    from gpucluster.inputs.config import load_clusters
    from gpucluster.lint.render import ChartSources, Renderer, render_plans

    (plan,) = [pipeline.build_plan(c) for c in load_clusters(env={})]
    sources = ChartSources([reference_charts], cache_dir=Path("/nonexistent-gpucluster-cache"))
    with Renderer(sources, allow_missing=UNAVAILABLE) as r:
        result = render_plans([plan], sources, renderer=r)
    images = {
        c["image"]
        for rel in result.releases
        if rel.node.component == "nodewright-operator"
        for _, o in rel.objects
        if o.get("kind") == "Job"
        for c in o["spec"]["template"]["spec"]["containers"]
    }
    assert (
        "docker.io/alpine/kubectl:1.36.2@sha256:01d138ce994b684abc62d9cfdff44de42a4c8996dcc12626dd0193afc3fb5a95"
        in images
    )

"""CRD ownership: one owner per CRD across the stack, checked at catalog load;
ComputeDomain CRDs owned by the DRA driver; every owned CRD matches the real charts' CRDs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpucluster import pipeline
from gpucluster.charts import crds
from gpucluster.errors import GpuclusterError
from gpucluster.inputs import config
from gpucluster.recipes import catalog

CD = "computedomains.resource.nvidia.com"


@pytest.fixture(scope="module")
def plan():
    return pipeline.build_plan(config.load_clusters()[0])


def test_computedomains_owned_by_the_dra_driver(plan):
    owners = crds.crd_owners(plan.components)
    assert (
        owners[CD] == owners["computedomaincliques.resource.nvidia.com"] == "nvidia-dra-driver-gpu"
    )
    assert owners["clusterpolicies.nvidia.com"] == "gpu-operator"
    assert (
        owners["nodefeaturerules.nfd.k8s-sigs.io"] == "nfd"
    )  # gpu-operator and network-operator only ship them


def test_without_the_dra_driver_gpu_operator_ships_the_only_copy(plan):
    comps = {k: v for k, v in plan.components.items() if k != "nvidia-dra-driver-gpu"}
    assert crds.crd_owners(comps)[CD] == "gpu-operator"  # v26.7.1 >= v26.7.0 (alsoShips since)
    old = dict(comps)
    gpu = old["gpu-operator"]
    import dataclasses

    old["gpu-operator"] = dataclasses.replace(
        gpu, ref=dataclasses.replace(gpu.ref, version="v25.10.0")
    )
    assert CD not in crds.crd_owners(old)  # older charts ship no ComputeDomain CRD


def test_a_doubly_owned_crd_is_refused(tmp_path):
    (tmp_path / "registry.yaml").write_text(
        yaml.safe_dump(
            {
                "kind": "ComponentRegistry",
                "apiVersion": "gpucluster/v1alpha1",
                "components": [
                    {
                        "name": "my-dra",
                        "type": "Helm",
                        "helm": {
                            "repository": "https://example.com/charts",
                            "chart": "my-dra",
                            "version": "1.0.0",
                            "namespace": "x",
                        },
                        "crds": {"upgrade": "gpucluster", "owns": [CD]},
                    }
                ],
            }
        )
    )
    with pytest.raises(GpuclusterError) as exc:
        catalog.load_catalog((catalog.CORE_CATALOG_DIR, tmp_path))
    text = str(exc.value)
    assert (
        f"CRD '{CD}' is owned by two components: 'nvidia-dra-driver-gpu'" in text
        and "'my-dra'" in text
    )
    assert "alsoShips" in text  # the fix
    # listing it as shipped, not owned, is accepted
    doc = yaml.safe_load((tmp_path / "registry.yaml").read_text())
    doc["components"][0]["crds"] = {
        "upgrade": "gpucluster",
        "owns": [],
        "alsoShips": [{"name": CD}],
    }
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(doc))
    assert "my-dra" in catalog.load_catalog((catalog.CORE_CATALOG_DIR, tmp_path)).components


def _chart_crds(chart: Path) -> set[str]:
    names = set()
    for f in chart.rglob("*.yaml"):
        inside = f.relative_to(chart).as_posix()
        if "/ci/" in f"/{inside}" or "unittests" in inside:
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        for doc in text.split("\n---"):
            if "kind: CustomResourceDefinition" not in doc:
                continue
            try:
                data = yaml.safe_load(doc)
            except yaml.YAMLError:
                continue  # templated
            if isinstance(data, dict) and data.get("kind") == "CustomResourceDefinition":
                names.add(data["metadata"]["name"])
    return names


@pytest.mark.parametrize(
    "component, folder",
    [
        ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu"),
        ("gpu-operator", "gpu-operator"),
        ("kai-scheduler", "kai-scheduler"),
        ("kubeflow-trainer", "kubeflow-trainer"),
        ("nfd", "node-feature-discovery"),
        ("network-operator", "network-operator"),
    ],
)
def test_owned_crds_are_the_charts_crds(reference_charts, component, folder):
    entry = catalog.load_catalog().components[component]
    shipped = _chart_crds(reference_charts / folder / "crds") | _chart_crds(
        reference_charts / folder / "charts"
    )
    declared = set(entry.crds.owns) | {name for name, _ in entry.crds.also_ships}
    assert set(entry.crds.owns) <= shipped
    # every CRD in the chart's crds/ folders is either owned or declared as shipped
    assert {n for n in shipped if "topology.node.k8s.io" not in n} <= declared

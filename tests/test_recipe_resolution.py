"""Recipe resolution against the embedded catalog (AKS H100 recipes)."""

from __future__ import annotations

import pytest

from gpucluster import recipe
from gpucluster.catalog import load_catalog
from gpucluster.model import Criteria


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def aks(intent: str, platform: str = "any") -> Criteria:
    return Criteria(service="aks", accelerator="h100", os="ubuntu", intent=intent, platform=platform)


@pytest.mark.parametrize(
    "criteria, overlays",
    [
        (aks("training"), ["base", "monitoring-hpa", "h100-any", "aks", "aks-training", "h100-aks-training", "h100-aks-ubuntu-training"]),
        (
            aks("training", "kubeflow"),
            ["base", "monitoring-hpa", "h100-any", "aks", "aks-training", "h100-aks-training", "h100-aks-ubuntu-training", "h100-aks-ubuntu-training-kubeflow"],
        ),
        (aks("inference"), ["base", "monitoring-hpa", "h100-any", "aks", "aks-inference", "h100-aks-inference", "h100-aks-ubuntu-inference"]),
        (
            aks("inference", "dynamo"),
            ["base", "monitoring-hpa", "h100-any", "aks", "aks-inference", "h100-aks-inference", "h100-aks-ubuntu-inference", "h100-aks-ubuntu-inference-dynamo"],
        ),
    ],
)
def test_applied_overlays_least_specific_first(catalog, criteria, overlays):
    assert recipe.resolve(criteria, catalog).applied_overlays == overlays


def test_training_components_in_topological_order(catalog):
    r = recipe.resolve(aks("training"), catalog)
    names = [c.name for c in r.component_refs]
    assert names == [
        "cert-manager",
        "nfd",
        "network-operator",
        "nodewright-operator",
        "nodewright-customizations",
        "prometheus-operator-crds",
        "kube-prometheus-stack",
        "gpu-operator",
        "k8s-ephemeral-storage-metrics",
        "kai-scheduler",
        "nvidia-dra-driver-gpu",
        "nvsentinel",
        "prometheus-adapter",
    ]
    for i, ref in enumerate(r.component_refs):
        for dep in ref.dependency_refs:
            assert names.index(dep) < i, (ref.name, dep)
    assert r.component("gpu-operator").dependency_refs == [
        "cert-manager",
        "kube-prometheus-stack",
        "network-operator",
        "nfd",
        "nodewright-customizations",
    ]

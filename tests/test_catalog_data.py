"""Integrity of the embedded catalog data (registry, overlays, mixins, values files)."""

from __future__ import annotations

import re

import pytest
import yaml

from gpucluster.plugins import platforms
from gpucluster.recipes import overlays
from gpucluster.recipes.catalog import CORE_CATALOG_DIR, load_catalog
from gpucluster_aks.platform import CATALOG_DIR as AKS_DIR

# Chart facts as the AICR registry pins them (docs/catalog-sources.md), chart names without
# the repo prefix AICR writes (``nvidia/gpu-operator`` -> ``gpu-operator``).
EXPECTED = {
    "nfd": (
        "https://kubernetes-sigs.github.io/node-feature-discovery/charts",
        "node-feature-discovery",
        "0.19.0",
        "node-feature-discovery",
    ),
    "cert-manager": ("https://charts.jetstack.io", "cert-manager", "v1.20.2", "cert-manager"),
    "gpu-operator": (
        "https://helm.ngc.nvidia.com/nvidia",
        "gpu-operator",
        "v26.7.1",
        "gpu-operator",
    ),
    "network-operator": (
        "https://helm.ngc.nvidia.com/nvidia",
        "network-operator",
        "26.4.1",
        "nvidia-network-operator",
    ),
    "nvidia-dra-driver-gpu": (
        "oci://registry.k8s.io/dra-driver-nvidia/charts",
        "dra-driver-nvidia-gpu",
        "0.5.0",
        "nvidia-dra-driver",
    ),
    "nodewright-operator": (
        "oci://ghcr.io/nvidia/nodewright/charts",
        "nodewright",
        "v0.19.1",
        "nodewright",
    ),
    "nodewright-customizations": ("", "", "", "nodewright"),
    "nvsentinel": ("oci://ghcr.io/nvidia", "nvsentinel", "v1.25.0", "nvsentinel"),
    "prometheus-operator-crds": (
        "https://prometheus-community.github.io/helm-charts",
        "prometheus-operator-crds",
        "28.0.1",
        "monitoring",
    ),
    "kube-prometheus-stack": (
        "https://prometheus-community.github.io/helm-charts",
        "kube-prometheus-stack",
        "84.4.0",
        "monitoring",
    ),
    "prometheus-adapter": (
        "https://prometheus-community.github.io/helm-charts",
        "prometheus-adapter",
        "5.3.0",
        "monitoring",
    ),
    "k8s-ephemeral-storage-metrics": (
        "https://jmcgrath207.github.io/k8s-ephemeral-storage-metrics/chart",
        "k8s-ephemeral-storage-metrics",
        "1.19.2",
        "monitoring",
    ),
    "kai-scheduler": (
        "oci://ghcr.io/kai-scheduler/kai-scheduler",
        "kai-scheduler",
        "v0.16.9",
        "kai-scheduler",
    ),
    "kubeflow-trainer": ("oci://ghcr.io/kubeflow/charts", "kubeflow-trainer", "2.2.0", "kubeflow"),
    "grove": ("oci://ghcr.io/ai-dynamo/grove", "grove-charts", "v0.1.0-alpha.13", "dynamo-system"),
    "dynamo-platform": (
        "https://helm.ngc.nvidia.com/nvidia/ai-dynamo",
        "dynamo-platform",
        "1.4.2",
        "dynamo-system",
    ),
    "agentgateway-crds": (
        "oci://cr.agentgateway.dev/charts",
        "agentgateway-crds",
        "v1.5.0",
        "agentgateway-system",
    ),
    "agentgateway": (
        "oci://cr.agentgateway.dev/charts",
        "agentgateway",
        "v1.5.0",
        "agentgateway-system",
    ),
}

ALIASES = {
    "gpuoperator": "gpu-operator",
    "dradriver": "nvidia-dra-driver-gpu",
    "networkoperator": "network-operator",
    "nodewright": "nodewright-operator",
    "skyhook": "nodewright-operator",
    "nodewrightcustomizations": "nodewright-customizations",
    "skyhookcustomizations": "nodewright-customizations",
    "certmanager": "cert-manager",
    "kubeprometheusstack": "kube-prometheus-stack",
    "prometheus": "kube-prometheus-stack",
    "kaischeduler": "kai-scheduler",
    "dynamo": "dynamo-platform",
    "grove": "grove",
    "nfd": "nfd",
    "trainer": "kubeflow-trainer",
    "nv-sentinel": "nvsentinel",
    "GpuOperator": "gpu-operator",
}

MANIFESTS = {
    "gpu-operator": (
        AKS_DIR,
        ["components/gpu-operator/manifests/nvidia-toolkit-hardening-aks.yaml.j2"],
    ),
    "network-operator": (
        AKS_DIR,
        [
            "components/network-operator/manifests/nfd-network-rule.yaml.j2",
            "components/network-operator/manifests/nic-cluster-policy-aks.yaml.j2",
            "components/network-operator/manifests/nvidia-peermem-reloader.yaml.j2",
        ],
    ),
    "nodewright-customizations": (
        CORE_CATALOG_DIR,
        ["components/nodewright-customizations/manifests/tuning.yaml.j2"],
    ),
    "kubeflow-trainer": (
        CORE_CATALOG_DIR,
        [
            "components/kubeflow-trainer/manifests/torch-distributed-cluster-training-runtime.yaml.j2"
        ],
    ),
    "agentgateway-crds": (
        CORE_CATALOG_DIR,
        [
            "components/agentgateway-crds/manifests/gateway-api-crds.yaml.j2",
            "components/agentgateway-crds/manifests/inference-extension-crds.yaml.j2",
        ],
    ),
    "agentgateway": (
        CORE_CATALOG_DIR,
        ["components/agentgateway/manifests/inference-gateway.yaml.j2"],
    ),
}


@pytest.fixture(scope="module")
def catalog():
    # core + AKS only: other plugins' catalog directories are tested by their own suites
    return load_catalog((CORE_CATALOG_DIR, AKS_DIR))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_registry_chart_facts(catalog, name):
    e = catalog.components[name]
    assert (e.repository, e.chart, e.version, e.namespace) == EXPECTED[name]
    assert "/" not in e.chart
    if e.repository:
        assert re.match(r"^(https://|oci://)[^\s]+[^/]$", e.repository)
    assert e.source_dir == str(CORE_CATALOG_DIR)


def test_registry_has_exactly_the_catalog_components(catalog):
    assert sorted(catalog.components) == sorted(EXPECTED)
    assert catalog.components["nodewright-customizations"].type == "Manifest"
    assert all(
        catalog.components[n].type == "Helm" for n in EXPECTED if n != "nodewright-customizations"
    )


@pytest.mark.parametrize("alias, name", sorted(ALIASES.items()))
def test_aliases(catalog, alias, name):
    assert catalog.resolve_name(alias) == name


def test_scheduling_paths_and_policy_keys(catalog):
    gpu = catalog.components["gpu-operator"]
    assert gpu.scheduling.system_node_selector == ("operator.nodeSelector",)
    assert gpu.scheduling.accelerated_tolerations == ("daemonsets.tolerations",)
    assert gpu.policy_keys == ("devicePlugin.enabled",)
    dra = catalog.components["nvidia-dra-driver-gpu"]
    assert dra.scheduling.accelerated_node_selector == ("kubeletPlugin.nodeSelector",)
    assert set(dra.policy_keys) == {"resources.gpus.enabled", "gpuResourcesEnabledOverride"}
    nw = catalog.components["nodewright-operator"]
    assert nw.scheduling.accelerated_taint_str == (
        "controllerManager.manager.env.runtimeRequiredTaint",
    )
    assert nw.scheduling.node_count == ("estimatedNodeCount",)
    assert catalog.components["nodewright-customizations"].scheduling.accelerated_tolerations == (
        "acceleratedTolerations",
    )


def test_every_overlay_and_mixin_validates(catalog):
    index = overlays.overlay_index(catalog)
    assert set(index.overlays) == {
        "base",
        "h100-any",
        "monitoring-hpa",
        "aks",
        "aks-training",
        "aks-inference",
        "h100-aks-training",
        "h100-aks-inference",
        "h100-aks-ubuntu-training",
        "h100-aks-ubuntu-training-kubeflow",
        "h100-aks-ubuntu-inference",
        "h100-aks-ubuntu-inference-dynamo",
    }
    assert set(index.mixins) == {
        "os-ubuntu",
        "platform-kubeflow",
        "platform-inference",
        "nvsentinel-nic-health-monitor",
    }


def test_generic_data_in_core_and_aks_data_in_plugin(catalog):
    for name, path in catalog.overlay_files.items():
        expected = AKS_DIR if "aks" in name else CORE_CATALOG_DIR
        assert path.parent.parent == expected, name
    aks_values = sorted(
        str(p.relative_to(AKS_DIR)) for p in (AKS_DIR / "components").rglob("values*.yaml")
    )
    assert aks_values == [
        "components/gpu-operator/values-aks-training.yaml",
        "components/gpu-operator/values-aks.yaml",
        "components/network-operator/values-aks.yaml",
        "components/nfd/values-nvidia-nics-aks.yaml",
    ]
    assert not list((CORE_CATALOG_DIR / "components").rglob("values-aks*.yaml"))


def _all_refs(catalog):
    for doc in list(catalog.overlays.values()) + list(catalog.mixins.values()):
        for ref in doc["spec"].get("componentRefs") or []:
            yield doc["metadata"]["name"], ref


def test_values_files_exist_and_hold_mappings(catalog):
    for owner, ref in _all_refs(catalog):
        if "valuesFile" in ref:
            assert ref["valuesFile"].startswith(f"components/{ref['name']}/"), owner
            assert isinstance(catalog.load_values(ref["valuesFile"]), dict), (
                owner,
                ref["valuesFile"],
            )
    for d in catalog.dirs:
        for p in (d / "components").rglob("values*.yaml"):
            assert isinstance(yaml.safe_load(p.read_text()), dict), p


def test_manifest_references_use_the_agreed_names(catalog):
    seen: dict[str, list[str]] = {}
    for _, ref in _all_refs(catalog):
        for m in ref.get("manifestFiles", []) + ref.get("preManifestFiles", []):
            assert m.startswith(f"components/{ref['name']}/manifests/") and m.endswith(
                ".yaml.j2"
            ), m
            seen.setdefault(ref["name"], [])
            if m not in seen[ref["name"]]:
                seen[ref["name"]].append(m)
    assert seen == {name: files for name, (_, files) in MANIFESTS.items()}


@pytest.mark.parametrize("component", sorted(MANIFESTS))
def test_manifest_templates_live_where_referenced(component):
    directory, files = MANIFESTS[component]
    for rel in files:
        assert (directory / rel).is_file(), rel


def test_platform_profile_matches_catalog_declaration(catalog):
    declared = catalog.overlays["aks"]["spec"]["profile"]
    default, allowed = platforms()["aks"].profiles[declared["name"]]
    assert default == declared["default"]
    assert sorted(allowed) == sorted(declared["values"])


def test_gpu_operator_base_values_facts(catalog):
    base = catalog.load_values("components/gpu-operator/values.yaml")
    assert base["hostPaths"]["driverInstallDir"] == "/run/nvidia/driver"
    assert base["devicePlugin"]["enabled"] is True
    dra = catalog.load_values("components/nvidia-dra-driver-gpu/values.yaml")
    assert (
        dra["resources"]["gpus"]["enabled"] is False and dra["gpuResourcesEnabledOverride"] is False
    )

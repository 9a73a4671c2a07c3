"""Recipe resolution against the embedded catalog (AKS H100 recipes)."""

from __future__ import annotations

import pytest

from gpucluster.errors import GpuclusterError
from gpucluster.model import Criteria
from gpucluster.recipes import layering, recipe
from gpucluster.recipes.catalog import load_catalog


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def aks(intent: str, platform: str = "any") -> Criteria:
    return Criteria(
        service="aks", accelerator="h100", os="ubuntu", intent=intent, platform=platform
    )


@pytest.mark.parametrize(
    "criteria, overlays",
    [
        (
            aks("training"),
            [
                "base",
                "monitoring-hpa",
                "h100-any",
                "aks",
                "aks-training",
                "h100-aks-training",
                "h100-aks-ubuntu-training",
            ],
        ),
        (
            aks("training", "kubeflow"),
            [
                "base",
                "monitoring-hpa",
                "h100-any",
                "aks",
                "aks-training",
                "h100-aks-training",
                "h100-aks-ubuntu-training",
                "h100-aks-ubuntu-training-kubeflow",
            ],
        ),
        (
            aks("inference"),
            [
                "base",
                "monitoring-hpa",
                "h100-any",
                "aks",
                "aks-inference",
                "h100-aks-inference",
                "h100-aks-ubuntu-inference",
            ],
        ),
        (
            aks("inference", "dynamo"),
            [
                "base",
                "monitoring-hpa",
                "h100-any",
                "aks",
                "aks-inference",
                "h100-aks-inference",
                "h100-aks-ubuntu-inference",
                "h100-aks-ubuntu-inference-dynamo",
            ],
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


# --------------------------------------------------------------------------- values facts (AKS H100)


def values_of(catalog, criteria, profile=None):
    r = recipe.resolve(criteria, catalog, profile=profile)
    return r, layering.effective_components(r, catalog)


def test_gpu_operator_azure_managed_values(catalog):
    r, comps = values_of(catalog, aks("training"))
    gpu = comps["gpu-operator"]
    assert (gpu.ref.source, gpu.ref.chart, gpu.ref.version, gpu.ref.namespace) == (
        "https://helm.ngc.nvidia.com/nvidia",
        "gpu-operator",
        "v26.7.1",
        "gpu-operator",
    )
    v = gpu.values
    assert v["driver"]["enabled"] is False
    assert v["toolkit"]["enabled"] is False
    assert v["operator"]["runtimeClass"] == "nvidia-container-runtime"
    assert v["devicePlugin"]["enabled"] is True
    assert v["hostPaths"]["driverInstallDir"] == "/run/nvidia/driver"
    assert v["driver"]["rdma"] == {"enabled": True, "useHostMofed": False}
    assert r.profile == ("gpuStack", "azure-managed")
    assert {"name": "K8s.aks-gpu-pools.gpu-driver", "value": "Install"} in [
        vars(c) for c in r.constraints
    ]


def test_dra_driver_values(catalog):
    _, comps = values_of(catalog, aks("training"))
    dra = comps["nvidia-dra-driver-gpu"]
    assert (dra.ref.source, dra.ref.chart, dra.ref.version) == (
        "oci://registry.k8s.io/dra-driver-nvidia/charts",
        "dra-driver-nvidia-gpu",
        "0.5.0",
    )
    assert dra.values["nvidiaDriverRoot"] == "/"
    assert dra.values["resources"]["gpus"]["enabled"] is False
    assert dra.values["gpuResourcesEnabledOverride"] is False
    # an explicit null reaches Helm so the chart's control-plane nodeAffinity is removed on AKS
    assert "nodeAffinity" in dra.values["controller"]["affinity"]
    assert dra.values["controller"]["affinity"]["nodeAffinity"] is None


def test_operator_managed_profile_values(catalog):
    r, comps = values_of(catalog, aks("inference"), {"gpuStack": "operator-managed"})
    gpu = comps["gpu-operator"].values
    assert (
        gpu["driver"]["enabled"],
        gpu["toolkit"]["enabled"],
        gpu["operator"]["runtimeClass"],
    ) == (True, True, "nvidia")
    assert comps["nvidia-dra-driver-gpu"].values["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert comps["nvsentinel"].values["labeler"]["assumeDriverInstalled"] is False
    assert comps["nvsentinel"].values["metadata-collector"]["runtimeClassName"] == "nvidia"
    assert r.profile == ("gpuStack", "operator-managed")
    assert r.profile_owned == {
        "gpu-operator": {
            "driver": {"enabled": True},
            "toolkit": {"enabled": True},
            "operator": {"runtimeClass": "nvidia"},
        },
        "kai-scheduler": {"admission": {"gpuFractionRuntimeClassName": "nvidia"}},
        "nvidia-dra-driver-gpu": {"nvidiaDriverRoot": "/run/nvidia/driver"},
        "nvsentinel": {
            "labeler": {"assumeDriverInstalled": False},
            "metadata-collector": {"runtimeClassName": "nvidia"},
        },
    }
    assert [c.value for c in r.constraints if c.name == "K8s.aks-gpu-pools.gpu-driver"] == ["None"]


def test_profile_values_layer_over_recipe_overrides(catalog):
    # aks overlay overrides nvidiaDriverRoot "/" ; the operator-managed profile value wins
    r = recipe.resolve(aks("training"), catalog, profile={"gpuStack": "operator-managed"})
    assert r.component("nvidia-dra-driver-gpu").overrides["nvidiaDriverRoot"] == "/"
    comps = layering.effective_components(r, catalog)
    assert comps["nvidia-dra-driver-gpu"].values["nvidiaDriverRoot"] == "/run/nvidia/driver"


def test_values_file_of_later_overlay_replaces_earlier(catalog):
    training = recipe.resolve(aks("training"), catalog).component("gpu-operator")
    inference = recipe.resolve(aks("inference"), catalog).component("gpu-operator")
    assert training.values_files == [
        "components/gpu-operator/values.yaml",
        "components/gpu-operator/values-aks-training.yaml",
    ]
    assert inference.values_files == [
        "components/gpu-operator/values.yaml",
        "components/gpu-operator/values-aks.yaml",
    ]
    comps = layering.effective_components(recipe.resolve(aks("training"), catalog), catalog)
    assert comps["gpu-operator"].values["cdi"] == {
        "enabled": True
    }  # training file (chart v26.7 has no cdi.default)
    assert comps["gpu-operator"].values["driver"]["rdma"]["enabled"] is True  # training file
    assert comps["gpu-operator"].values["nfd"] == {"enabled": False}  # base values.yaml


def test_layering_order_base_file_then_overlay_file_then_overrides(catalog):
    _, comps = values_of(catalog, aks("training"))
    nfd = comps["nfd"]
    assert nfd.ref.values_files == [
        "components/nfd/values.yaml",
        "components/nfd/values-nvidia-nics-aks.yaml",
    ]
    assert nfd.values["topologyUpdater"]["enable"] is True  # override beats values.yaml's false
    assert nfd.values["topologyUpdater"]["createCRDs"] is True  # kept from values.yaml
    assert (
        nfd.values["worker"]["config"]["sources"]["custom"][0]["name"] == "nvidia-ib-vfs"
    )  # AKS file
    assert nfd.values["worker"]["config"]["core"]["noPublishFeatures"][0] == "cpu.*"  # base file


def test_kube_prometheus_stack_aks_pin_and_storage(catalog):
    _, comps = values_of(catalog, aks("training"))
    kps = comps["kube-prometheus-stack"]
    assert kps.ref.version == "83.7.0"  # aks overlay pin beats the registry's 84.4.0
    assert catalog.components["kube-prometheus-stack"].version == "84.4.0"
    storage = kps.values["prometheus"]["prometheusSpec"]["storageSpec"]
    assert (
        "emptyDir" not in storage
    )  # a null would render into the Prometheus CR (schema: not nullable)
    assert storage["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == "50Gi"


def test_mixin_overrides_accumulate(catalog):
    _, comps = values_of(catalog, aks("inference", "dynamo"))
    nvs = comps["nvsentinel"].values
    assert nvs["global"]["nicHealthMonitor"]["enabled"] is True
    assert nvs["global"]["tolerations"] == [{"operator": "Exists"}]  # from values.yaml
    assert nvs["nic-health-monitor"]["processingStrategy"] == "STORE_ONLY"
    r = recipe.resolve(aks("inference", "dynamo"), catalog)
    assert [c.name for c in r.constraints if c.name.startswith("OS.")] == [
        "OS.release.ID",
        "OS.release.VERSION_ID",
        "OS.sysctl./proc/sys/kernel/osrelease",
    ]  # os-ubuntu from the inherited h100-aks-ubuntu-inference overlay


@pytest.mark.parametrize(
    "intent, expected", [("training", "multiNodeTraining"), ("inference", "inference")]
)
def test_nodewright_customizations_is_manifest_only(catalog, intent, expected):
    ref = recipe.resolve(aks(intent), catalog).component("nodewright-customizations")
    assert (ref.type, ref.source, ref.chart, ref.namespace) == ("Manifest", "", "", "nodewright")
    assert ref.values_files == []
    assert ref.overrides == {
        "service": "aks",
        "accelerator": "h100",
        "intent": expected,
        "tuningEnabled": False,
    }
    assert ref.manifest_files == ["components/nodewright-customizations/manifests/tuning.yaml.j2"]
    assert ref.dependency_refs == ["nodewright-operator"]


def test_manifest_references(catalog):
    r = recipe.resolve(aks("training", "kubeflow"), catalog)
    assert r.component("gpu-operator").manifest_files == [
        "components/gpu-operator/manifests/nvidia-toolkit-hardening-aks.yaml.j2"
    ]
    assert r.component("network-operator").manifest_files == [
        "components/network-operator/manifests/nfd-network-rule.yaml.j2",
        "components/network-operator/manifests/nic-cluster-policy-aks.yaml.j2",
        "components/network-operator/manifests/nvidia-peermem-reloader.yaml.j2",
    ]
    assert r.component("kubeflow-trainer").manifest_files == [
        "components/kubeflow-trainer/manifests/torch-distributed-cluster-training-runtime.yaml.j2"
    ]
    assert r.component("kubeflow-trainer").dependency_refs == [
        "cert-manager",
        "gpu-operator",
        "kube-prometheus-stack",
    ]


def test_inference_components(catalog):
    names = {c.name for c in recipe.resolve(aks("inference", "dynamo"), catalog).component_refs}
    assert {"agentgateway", "agentgateway-crds", "grove", "dynamo-platform"} <= names
    assert "kubeflow-trainer" not in names
    dyn = recipe.resolve(aks("inference", "dynamo"), catalog).component("dynamo-platform")
    assert dyn.dependency_refs == [
        "cert-manager",
        "grove",
        "kai-scheduler",
        "kube-prometheus-stack",
    ]
    assert (dyn.source, dyn.chart, dyn.version) == (
        "https://helm.ngc.nvidia.com/nvidia/ai-dynamo",
        "dynamo-platform",
        "1.4.2",
    )
    plain = {c.name for c in recipe.resolve(aks("inference"), catalog).component_refs}
    assert "dynamo-platform" not in plain and "agentgateway" in plain


def test_constraints_later_overlay_replaces_same_name(catalog):
    r = recipe.resolve(aks("training"), catalog)
    assert [c.value for c in r.constraints if c.name == "K8s.server.version"] == [">= 1.34"]
    assert r.constraints[0].name == "K8s.server.version"  # keeps base's position


# --------------------------------------------------------------------------- errors against the real catalog


def test_unknown_profile_value_lists_allowed(catalog):
    with pytest.raises(GpuclusterError) as exc:
        recipe.resolve(
            aks("training"), catalog, profile={"gpuStack": "managed"}, file="c.yaml", cluster="x"
        )
    text = exc.value.render()
    assert "unknown value 'managed' for profile 'gpuStack'" in text
    assert "allowed: azure-managed, operator-managed" in text
    assert "file=c.yaml cluster=x key=profile.gpuStack" in text


def test_unknown_profile_name(catalog):
    with pytest.raises(
        GpuclusterError, match=r"unknown profile 'driver' for this recipe \(allowed: gpuStack\)"
    ):
        recipe.resolve(aks("training"), catalog, profile={"driver": "x"})


def test_unknown_criteria_value_lists_allowed(catalog):
    with pytest.raises(GpuclusterError) as exc:
        recipe.resolve(
            Criteria(service="aks", accelerator="h200", os="ubuntu", intent="training"), catalog
        )
    assert "unknown accelerator 'h200'" in exc.value.render()
    assert "key=criteria.accelerator" in exc.value.render()
    assert "h100" in exc.value.problems[0].allowed


def test_uncovered_criteria_combination(catalog):
    with pytest.raises(GpuclusterError) as exc:
        recipe.resolve(aks("training", "dynamo"), catalog)
    text = exc.value.render()
    assert "no recipe covers platform 'dynamo'" in text
    assert (
        "h100-aks-ubuntu-inference-dynamo" in text and "h100-aks-ubuntu-training-kubeflow" in text
    )


def test_malformed_mixin_error_names_its_real_file(tmp_path):
    """A schema error in a mixin names the file it was read from (not a made-up relative path)."""
    from gpucluster.recipes.catalog import CORE_CATALOG_DIR, load_catalog
    from gpucluster.recipes.overlays import overlay_index

    extra = tmp_path / "catalog"
    (extra / "mixins").mkdir(parents=True)
    bad = extra / "mixins" / "broken.yaml"
    bad.write_text(
        "kind: RecipeMixin\napiVersion: x/v1\nmetadata: {name: broken}\nspec: {componentRefs: 7}\n"
    )
    cat = load_catalog(dirs=(CORE_CATALOG_DIR, extra))
    with pytest.raises(GpuclusterError) as exc:
        overlay_index(cat)
    assert f"file={bad}" in exc.value.render()

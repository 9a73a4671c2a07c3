"""OKE recipe resolution (plugins/gpucluster_oke/catalog on top of the core catalog): applied
overlays, components, chart versions and namespaces, constraints, the gpuStack profile and the
key values each recipe takes from AICR's OKE recipe data (docs/catalog-sources.md, OKE)."""

from __future__ import annotations

import pytest
import yaml

from gpucluster.sdk import Criteria, GpuclusterError, hookimpl
from gpucluster.sdk.testing import PluginKit, registered
from gpucluster_oke.platform import CATALOG_DIR as OKE_DIR
from gpucluster_oke.platform import OKE_PLATFORM, recipe_leaves

BASE_COMPONENTS = {
    "cert-manager",
    "gpu-operator",
    "k8s-ephemeral-storage-metrics",
    "kai-scheduler",
    "kube-prometheus-stack",
    "nfd",
    "nodewright-operator",
    "nvidia-dra-driver-gpu",
    "nvsentinel",
    "prometheus-adapter",
    "prometheus-operator-crds",
}
INFERENCE = {"agentgateway", "agentgateway-crds"}

# leaf -> (criteria, appliedOverlays after base+monitoring-hpa, extra components, K8s.server.version, os constraint)
RECIPES = {
    "gb200-oke-ubuntu-training": (
        ("gb200", "ubuntu", "training", "any"),
        [
            "gb200-any",
            "oke-ol",
            "oke-ol-training",
            "gb200-oke-training",
            "gb200-oke-ubuntu-training",
        ],
        {"network-operator"},
        ">= 1.34",
        "ubuntu",
    ),
    "gb200-oke-ubuntu-training-kubeflow": (
        ("gb200", "ubuntu", "training", "kubeflow"),
        [
            "gb200-any",
            "oke-ol",
            "oke-ol-training",
            "gb200-oke-training",
            "gb200-oke-ubuntu-training",
            "gb200-oke-ubuntu-training-kubeflow",
        ],
        {"network-operator", "kubeflow-trainer"},
        ">= 1.34",
        "ubuntu",
    ),
    "gb200-oke-ubuntu-inference": (
        ("gb200", "ubuntu", "inference", "any"),
        [
            "gb200-any",
            "oke-ol",
            "oke-ol-inference",
            "gb200-oke-inference",
            "gb200-oke-ubuntu-inference",
        ],
        INFERENCE,
        ">= 1.32.4",
        "ubuntu",
    ),
    "gb200-oke-ubuntu-inference-dynamo": (
        ("gb200", "ubuntu", "inference", "dynamo"),
        [
            "gb200-any",
            "oke-ol",
            "oke-ol-inference",
            "gb200-oke-inference",
            "gb200-oke-ubuntu-inference",
            "gb200-oke-ubuntu-inference-dynamo",
        ],
        INFERENCE | {"grove", "dynamo-platform"},
        ">= 1.34",
        "ubuntu",
    ),
    "a100-oke-ubuntu-training": (
        ("a100", "ubuntu", "training", "any"),
        ["a100-any", "oke-ol", "oke-ol-training", "a100-oke-training", "a100-oke-ubuntu-training"],
        set(),
        ">= 1.32",
        "ubuntu",
    ),
    "a100-oke-ubuntu-training-kubeflow": (
        ("a100", "ubuntu", "training", "kubeflow"),
        [
            "a100-any",
            "oke-ol",
            "oke-ol-training",
            "a100-oke-training",
            "a100-oke-ubuntu-training",
            "a100-oke-ubuntu-training-kubeflow",
        ],
        {"kubeflow-trainer"},
        ">= 1.32",
        "ubuntu",
    ),
    "gb200-oke-training": (
        ("gb200", "ol", "training", "any"),
        ["gb200-any", "oke-ol", "oke-ol-training", "gb200-oke-training"],
        {"network-operator"},
        ">= 1.34",
        None,
    ),
    "gb200-oke-inference": (
        ("gb200", "ol", "inference", "any"),
        ["gb200-any", "oke-ol", "oke-ol-inference", "gb200-oke-inference"],
        INFERENCE,
        ">= 1.32.4",
        None,
    ),
    "a100-oke-training": (
        ("a100", "ol", "training", "any"),
        ["a100-any", "oke-ol", "oke-ol-training", "a100-oke-training"],
        set(),
        ">= 1.30",
        None,
    ),
    "l40s-oke-training": (
        ("l40s", "ol", "training", "any"),
        ["l40s-any", "oke-ol", "oke-ol-training", "l40s-oke-training"],
        set(),
        ">= 1.30",
        None,
    ),
    "l40s-oke-inference": (
        ("l40s", "ol", "inference", "any"),
        ["l40s-any", "oke-ol", "oke-ol-inference", "l40s-oke-inference"],
        INFERENCE,
        ">= 1.30",
        None,
    ),
}

CHARTS = {
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
    "nfd": (
        "https://kubernetes-sigs.github.io/node-feature-discovery/charts",
        "node-feature-discovery",
        "0.19.0",
        "node-feature-discovery",
    ),
    "kube-prometheus-stack": (
        "https://prometheus-community.github.io/helm-charts",
        "kube-prometheus-stack",
        "84.4.0",
        "monitoring",
    ),
    "nvsentinel": ("oci://ghcr.io/nvidia", "nvsentinel", "v1.25.0", "nvsentinel"),
    "kubeflow-trainer": ("oci://ghcr.io/kubeflow/charts", "kubeflow-trainer", "2.2.0", "kubeflow"),
    "grove": ("oci://ghcr.io/ai-dynamo/grove", "grove-charts", "v0.1.0-alpha.13", "dynamo-system"),
    "dynamo-platform": (
        "https://helm.ngc.nvidia.com/nvidia/ai-dynamo",
        "dynamo-platform",
        "1.4.2",
        "dynamo-system",
    ),
}

DEVICE_PLUGIN_ENV = [
    {"name": "DP_DISABLE_HEALTHCHECKS", "value": "109"},
    {"name": "DEVICE_LIST_STRATEGY", "value": "cdi-annotations,cdi-cri,volume-mounts"},
    {"name": "MOFED_ENABLED", "value": "false"},
]


KIT: PluginKit


@pytest.fixture(scope="module", autouse=True)
def _kit():
    """The installed plugins (the OKE catalog on top of the core's, beside the other platforms')."""
    global KIT
    with registered() as KIT:
        yield


@pytest.fixture(scope="module")
def catalog(_kit):
    return KIT.catalog()


def resolve(catalog, leaf: str, profile: str | None = None):
    (acc, os_, intent, platform), *_ = RECIPES[leaf]
    crit = Criteria(service="oke", accelerator=acc, os=os_, intent=intent, platform=platform)
    return KIT.resolve(crit, profile={"gpuStack": profile} if profile else None)


def values(catalog, recipe, name):
    return KIT.component_values(recipe, name)


# --------------------------------------------------------------------------- overlays and components


@pytest.mark.parametrize("leaf", sorted(RECIPES))
def test_applied_overlays_components_and_constraints(catalog, leaf):
    _, overlays, extra, k8s, os_id = RECIPES[leaf]
    recipe = resolve(catalog, leaf)
    assert recipe.applied_overlays == ["base", "monitoring-hpa", *overlays]
    names = {ref.name for ref in recipe.component_refs}
    assert names == BASE_COMPONENTS | extra
    assert all(ref.enabled for ref in recipe.component_refs)
    constraints = {c.name: c.value for c in recipe.constraints}
    assert constraints["K8s.server.version"] == k8s
    assert constraints.get("OS.release.ID") == os_id
    assert constraints["K8s.oke-addons.nvidia-gpu-plugin"] == "installed"
    assert recipe.profile == ("gpuStack", "oci-managed")


@pytest.mark.parametrize("leaf", sorted(RECIPES))
def test_chart_facts_from_the_registry(catalog, leaf):
    recipe = resolve(catalog, leaf)
    for ref in recipe.component_refs:
        if ref.name in CHARTS:
            assert (ref.source, ref.chart, ref.version, ref.namespace) == CHARTS[ref.name], ref.name


@pytest.mark.parametrize("leaf", sorted(RECIPES))
def test_dependency_edges(catalog, leaf):
    recipe = resolve(catalog, leaf)
    deps = {ref.name: ref.dependency_refs for ref in recipe.component_refs}
    assert deps["gpu-operator"] == ["cert-manager", "kube-prometheus-stack", "nfd"]
    assert deps["nvidia-dra-driver-gpu"] == ["gpu-operator"]
    if "network-operator" in deps:
        assert deps["network-operator"] == ["cert-manager", "nfd"]
    if "dynamo-platform" in deps:
        assert deps["dynamo-platform"] == [
            "cert-manager",
            "gpu-operator",
            "grove",
            "kai-scheduler",
            "kube-prometheus-stack",
        ]
    if "kubeflow-trainer" in deps:
        assert deps["kubeflow-trainer"] == ["cert-manager", "gpu-operator", "kube-prometheus-stack"]
    order = [ref.name for ref in recipe.component_refs]
    for name, refs in deps.items():
        assert all(order.index(d) < order.index(name) for d in refs), name


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("leaf", sorted(RECIPES))
def test_gpu_operator_values(catalog, leaf):
    recipe = resolve(catalog, leaf)
    intent = RECIPES[leaf][0][2]
    ref = recipe.component("gpu-operator")
    expected_file = (
        f"components/gpu-operator/values-oke{'-training' if intent == 'training' else ''}.yaml"
    )
    assert ref.values_files == ["components/gpu-operator/values.yaml", expected_file]
    v = values(catalog, recipe, "gpu-operator")
    assert v["cdi"] == {
        "enabled": True
    }  # chart v26.7 has no cdi.default (gpucluster lint: dead value)
    assert v["driver"]["enabled"] is False and "useOpenKernelModules" not in v["driver"]
    assert v["driver"]["upgradePolicy"] == {"maxParallelUpgrades": 5}
    assert v["toolkit"]["enabled"] is False
    assert v["devicePlugin"] == {"enabled": False, "env": DEVICE_PLUGIN_ENV}
    assert v["hostPaths"] == {"driverInstallDir": "/run/nvidia/driver"}
    assert v["validator"]["plugin"]["env"] == [{"name": "WITH_WORKLOAD", "value": "false"}]
    gb200_training = leaf.startswith("gb200") and intent == "training"
    if gb200_training:
        assert v["driver"]["kernelModuleConfig"] == {"name": "nvidia-kernel-module-params"}
        assert ref.pre_manifest_files == [
            "components/gpu-operator/manifests/kernel-module-params.yaml.j2"
        ]
    else:
        assert "kernelModuleConfig" not in v["driver"]
        assert ref.pre_manifest_files == []
    assert v["gdrcopy"]["enabled"] is True


@pytest.mark.parametrize("leaf", sorted(RECIPES))
def test_dra_nfd_prometheus_and_nvsentinel_values(catalog, leaf):
    recipe = resolve(catalog, leaf)
    dra = values(catalog, recipe, "nvidia-dra-driver-gpu")
    assert recipe.component("nvidia-dra-driver-gpu").values_files == [
        "components/nvidia-dra-driver-gpu/values.yaml",
        "components/nvidia-dra-driver-gpu/values-oke.yaml",
    ]
    assert dra["nvidiaDriverRoot"] == "/"
    assert dra["fullnameOverride"] == "nvidia-dra-driver-gpu"
    assert dra["controller"]["affinity"] == {
        "nodeAffinity": None
    }  # explicit null: Helm drops the chart default
    assert dra["resources"] == {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}}
    assert dra["gpuResourcesEnabledOverride"] is False
    nfd = values(catalog, recipe, "nfd")
    assert nfd["topologyUpdater"]["enable"] is True
    custom = (nfd["worker"]["config"].get("sources") or {}).get("custom")
    if "network-operator" in {r.name for r in recipe.component_refs}:
        assert custom[0]["labels"] == {"feature.node.kubernetes.io/pci-15b3.present": "true"}
        assert custom[0]["matchFeatures"][0]["matchExpressions"]["class"] == {
            "op": "In",
            "value": ["0200", "0207"],
        }
    else:
        assert custom is None
    storage = values(catalog, recipe, "kube-prometheus-stack")["prometheus"]["prometheusSpec"][
        "storageSpec"
    ]
    assert (
        "emptyDir" not in storage
    )  # a null would render into the Prometheus CR (schema: not nullable)
    assert storage["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == "50Gi"
    sentinel = values(catalog, recipe, "nvsentinel")
    assert sentinel["labeler"] == {"assumeDriverInstalled": True}
    assert sentinel["global"]["nicHealthMonitor"] == {"enabled": True}
    assert sentinel["nic-health-monitor"] == {"processingStrategy": "STORE_ONLY"}


@pytest.mark.parametrize("leaf", ["gb200-oke-ubuntu-training", "gb200-oke-training"])
def test_gb200_training_network_operator(catalog, leaf):
    recipe = resolve(catalog, leaf)
    ref = recipe.component("network-operator")
    assert ref.values_files == [
        "components/network-operator/values.yaml",
        "components/network-operator/values-oke-gb200.yaml",
    ]
    assert ref.manifest_files == [
        "components/network-operator/manifests/nic-cluster-policy-oke-gb200.yaml.j2"
    ]
    v = values(catalog, recipe, "network-operator")
    assert not {"deployCR", "nvIpam", "secondaryNetwork", "nicClusterPolicy"} & set(
        v
    )  # keys chart 26.4.1 does not read
    assert v["nfd"]["enabled"] is False
    assert v["operator"]["resources"] == {
        "limits": {"cpu": "1", "memory": "2Gi"},
        "requests": {"cpu": "500m", "memory": "2Gi"},
    }


def test_operator_managed_profile(catalog):
    for leaf in RECIPES:
        recipe = resolve(catalog, leaf, "operator-managed")
        assert recipe.profile == ("gpuStack", "operator-managed")
        assert recipe.advertiser is None
        constraints = {c.name: c.value for c in recipe.constraints}
        assert constraints["K8s.oke-addons.nvidia-gpu-plugin"] == "absent"
        assert constraints["K8s.oke-legacy-plugin.nvidia-gpu-device-plugin"] == "none"
        gpu = values(catalog, recipe, "gpu-operator")
        assert (
            gpu["driver"]["enabled"],
            gpu["toolkit"]["enabled"],
            gpu["devicePlugin"]["enabled"],
        ) == (True, True, True)
        assert (
            "useOpenKernelModules" not in gpu["driver"]
            and gpu["driver"]["kernelModuleType"] == "open"
        )  # core value
        assert gpu["devicePlugin"]["env"] == DEVICE_PLUGIN_ENV
        assert (
            values(catalog, recipe, "nvidia-dra-driver-gpu")["nvidiaDriverRoot"]
            == "/run/nvidia/driver"
        )
        assert values(catalog, recipe, "nvsentinel")["labeler"] == {"assumeDriverInstalled": False}


def test_oci_managed_profile_declares_an_external_advertiser_and_owns_the_tuple(catalog):
    recipe = resolve(catalog, "gb200-oke-ubuntu-training")
    assert recipe.advertiser == "external"
    assert recipe.profile_owned["gpu-operator"] == {
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        "devicePlugin": {"enabled": False},
        "hostPaths": {"driverInstallDir": "/run/nvidia/driver"},
    }
    assert recipe.profile_owned["nvidia-dra-driver-gpu"] == {"nvidiaDriverRoot": "/"}
    assert recipe.profile_owned["nvsentinel"] == {"labeler": {"assumeDriverInstalled": True}}


def test_inference_and_dynamo_components(catalog):
    inference = resolve(catalog, "gb200-oke-ubuntu-inference")
    assert "network-operator" not in {r.name for r in inference.component_refs}
    assert inference.component("agentgateway").dependency_refs == [
        "agentgateway-crds",
        "cert-manager",
    ]
    dynamo = resolve(catalog, "gb200-oke-ubuntu-inference-dynamo")
    assert dynamo.component("grove").values_files == ["components/grove/values.yaml"]
    assert dynamo.component("dynamo-platform").values_files == [
        "components/dynamo-platform/values.yaml"
    ]


def test_recipe_result_round_trip_keeps_profile_and_advertiser(catalog, tmp_path):
    recipe = resolve(catalog, "gb200-oke-ubuntu-training-kubeflow")
    components = KIT.components(recipe)
    doc = KIT.recipe_document(recipe, components)
    assert doc["metadata"]["selectedProfile"]["value"] == "oci-managed"
    assert (
        "devicePlugin.enabled" in doc["metadata"]["selectedProfile"]["ownedPaths"]["gpu-operator"]
    )
    path = tmp_path / "oke.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    again = KIT.read_recipe(path)
    assert again.advertiser == "external"
    assert [r.name for r in again.component_refs] == [r.name for r in recipe.component_refs]
    assert KIT.recipe_document(again, KIT.components(again)) == doc


# --------------------------------------------------------------------------- catalog integrity


def test_every_oke_overlay_validates_and_names_are_the_reference_family(catalog):
    names = KIT.check_catalog()
    oke = {n for n, p in catalog.overlay_files.items() if p.parent.parent == OKE_DIR}
    core = {n for n, p in catalog.overlay_files.items() if p.parent.parent == catalog.dirs[0]}
    assert oke == {
        "oke-ol",
        "oke-ol-training",
        "oke-ol-inference",
        "gb200-any",
        "a100-any",
        "l40s-any",
        "gb200-oke-training",
        "gb200-oke-inference",
        "gb200-oke-ubuntu-training",
        "gb200-oke-ubuntu-training-kubeflow",
        "gb200-oke-ubuntu-inference",
        "gb200-oke-ubuntu-inference-dynamo",
        "a100-oke-training",
        "a100-oke-ubuntu-training",
        "a100-oke-ubuntu-training-kubeflow",
        "l40s-oke-training",
        "l40s-oke-inference",
    }
    assert core == {"base", "h100-any", "monitoring-hpa"} and oke | core <= set(names)


def test_every_plugin_catalog_file_is_referenced(catalog):
    referenced = set()
    for doc in catalog.overlays.values():
        for ref in doc["spec"].get("componentRefs") or []:
            referenced.add(ref.get("valuesFile"))
            referenced.update(ref.get("manifestFiles") or [])
            referenced.update(ref.get("preManifestFiles") or [])
    shipped = {
        str(p.relative_to(OKE_DIR)) for p in (OKE_DIR / "components").rglob("*") if p.is_file()
    }
    assert shipped == {
        "components/gpu-operator/values-oke.yaml",
        "components/gpu-operator/values-oke-training.yaml",
        "components/gpu-operator/manifests/kernel-module-params.yaml.j2",
        "components/nvidia-dra-driver-gpu/values-oke.yaml",
        "components/network-operator/values-oke-gb200.yaml",
        "components/network-operator/manifests/nic-cluster-policy-oke-gb200.yaml.j2",
        "components/nfd/values-nvidia-nics.yaml",
    }
    assert shipped <= referenced
    for rel in shipped:
        if rel.endswith(".yaml"):
            assert isinstance(yaml.safe_load((OKE_DIR / rel).read_text()), dict), rel
        assert "Copyright" not in (OKE_DIR / rel).read_text(), rel  # own files, no copied headers


def test_platform_declaration_matches_the_catalog(catalog):
    leaves = recipe_leaves()
    assert set(OKE_PLATFORM.accelerators) == {leaf[0] for leaf in leaves}
    assert set(OKE_PLATFORM.oses) == {leaf[1] for leaf in leaves}
    assert set(OKE_PLATFORM.intents) == {leaf[2] for leaf in leaves}
    assert set(OKE_PLATFORM.platforms) == {leaf[3] for leaf in leaves}
    assert len(leaves) == len(RECIPES)
    declared = catalog.overlays["oke-ol"]["spec"]["profile"]
    default, allowed = KIT.platforms()["oke"].profiles[declared["name"]]
    assert default == declared["default"] == "oci-managed"
    assert sorted(allowed) == sorted(declared["values"])
    assert KIT.platforms()["oke"].provisions_cluster is False
    assert KIT.platforms()["oke"].provider_id_prefix == "ocid1."


# --------------------------------------------------------------------------- what has no recipe


def test_no_recipe_for_uncovered_platform(catalog):
    crit = Criteria(
        service="oke", accelerator="gb200", os="ubuntu", intent="training", platform="dynamo"
    )
    with pytest.raises(GpuclusterError) as exc:
        KIT.resolve(crit)
    text = str(exc.value)
    assert "no recipe covers platform 'dynamo'" in text and "key=criteria.platform" in text
    assert "gb200-oke-ubuntu-training" in text  # the service's recipes are listed


def test_unknown_profile_value(catalog):
    crit = Criteria(service="oke", accelerator="a100", os="ubuntu", intent="training")
    with pytest.raises(GpuclusterError) as exc:
        KIT.resolve(crit, profile={"gpuStack": "azure-managed"})
    assert "unknown value 'azure-managed' for profile 'gpuStack'" in str(exc.value)
    assert "oci-managed, operator-managed" in str(exc.value)


def test_the_oke_profile_schema_refuses_an_unknown_advertiser(tmp_path):
    import shutil

    copy = tmp_path / "oke"
    shutil.copytree(OKE_DIR, copy)
    path = copy / "overlays" / "oke-ol.yaml"
    path.write_text(path.read_text().replace("advertiser: external", "advertiser: both"))

    class EditedCopy:
        @hookimpl
        def gpucluster_catalog_dirs(self):
            return [copy]

    with registered(entry_points=False) as kit, pytest.raises(GpuclusterError) as exc:
        kit.register(EditedCopy(), name="oke-copy")
        kit.check_catalog()
    assert "spec.profile.values.oci-managed.advertiser" in str(exc.value)
    assert str(path) in str(exc.value)

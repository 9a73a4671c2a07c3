"""Node scheduling inputs: parsing and injection into the registry's value paths."""

from __future__ import annotations

import pytest
from policy_helpers import make_catalog, make_cluster, make_components, make_recipe

from gpucluster.errors import GpuclusterError
from gpucluster.model import Taint, Toleration
from gpucluster.recipes.overrides import apply_overrides, parse_overrides
from gpucluster.recipes.scheduling import apply_scheduling, parse_scheduling, parse_toleration

GPU_TOL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture
def catalog(tmp_path):
    return make_catalog(tmp_path)


def inject(catalog, *, scheduling=None, recipe=None, overrides=None, **cluster_kw):
    recipe = recipe or make_recipe()
    components = make_components(recipe)
    cluster = make_cluster(
        scheduling=parse_scheduling(scheduling, file="c.yaml", cluster="c1")
        if scheduling is not None
        else None,
        overrides=parse_overrides(overrides, file="c.yaml", cluster="c1") if overrides else None,
        **cluster_kw,
    )
    components = apply_overrides(cluster, recipe, components, catalog)
    components = apply_scheduling(cluster, recipe, components, catalog)
    return components


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    "spec,expected",
    [
        (
            "nvidia.com/gpu:NoSchedule",
            Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),
        ),
        (
            "dedicated=gpu:NoExecute",
            Toleration(key="dedicated", operator="Equal", value="gpu", effect="NoExecute"),
        ),
        ({"key": "a", "operator": "Exists"}, Toleration(key="a", operator="Exists")),
        (
            {"key": "a", "value": "b", "effect": "PreferNoSchedule"},
            Toleration(key="a", operator="Equal", value="b", effect="PreferNoSchedule"),
        ),
        ({"operator": "Exists"}, Toleration(key=None, operator="Exists")),
    ],
)
def test_parse_toleration_forms(spec, expected):
    assert parse_toleration(spec) == expected


def test_structured_wildcard_is_a_wildcard():
    assert parse_toleration({"operator": "Exists"}).is_wildcard
    assert not parse_toleration("nvidia.com/gpu:NoSchedule").is_wildcard


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("nvidia.com/gpu", "has no ':Effect'"),
        ("nvidia.com/gpu:NoScheduled", "effect 'NoScheduled' is not one of"),
        ("bad key:NoSchedule", "is not a valid Kubernetes label/taint key"),
        ({"key": "a", "operator": "Exists", "value": "b"}, "operator Exists cannot have a value"),
        ({"operator": "Equal", "value": "b"}, "without a key must use operator Exists"),
        ({"key": "a", "operator": "In"}, "is not Exists or Equal"),
        ({"key": "a", "tolerationSeconds": 5}, "unknown toleration field(s) tolerationSeconds"),
        (5, "must be a string or a mapping"),
    ],
)
def test_parse_toleration_rejects(spec, needle):
    with pytest.raises(ValueError) as exc:
        parse_toleration(spec)
    assert needle in str(exc.value)


def test_parse_scheduling_full():
    s = parse_scheduling(
        {
            "accelerated": {
                "nodeSelector": {"nvidia.com/gpu.present": "true"},
                "tolerations": ["nvidia.com/gpu:NoSchedule"],
            },
            "system": {
                "nodeSelector": {"kubernetes.azure.com/mode": "system"},
                "tolerations": ["CriticalAddonsOnly:NoSchedule"],
            },
            "workloadGateTaint": "nodewright.nvidia.com/runtime-required=true:NoSchedule",
            "nodeCount": 4,
        },
        file="c.yaml",
        cluster="c1",
    )
    assert s.accelerated_node_selector == {"nvidia.com/gpu.present": "true"}
    assert s.system_tolerations == [
        Toleration(key="CriticalAddonsOnly", operator="Exists", effect="NoSchedule")
    ]
    assert s.workload_gate_taint == Taint(
        "nodewright.nvidia.com/runtime-required", "true", "NoSchedule"
    )
    assert s.node_count == 4


@pytest.mark.parametrize(
    "raw,key,needle",
    [
        ({"gpu": {}}, "scheduling.gpu", "unknown scheduling key 'gpu'"),
        (
            {"accelerated": {"tolerations": "nvidia.com/gpu:NoSchedule"}},
            "scheduling.accelerated.tolerations",
            "tolerations must be a list",
        ),
        (
            {"accelerated": {"tolerations": ["x"]}},
            "scheduling.accelerated.tolerations[0]",
            "has no ':Effect'",
        ),
        (
            {"system": {"nodeSelector": {"pool": True}}},
            "scheduling.system.nodeSelector.pool",
            "label values are strings (quote it)",
        ),
        (
            {"system": {"nodeSelector": ["a"]}},
            "scheduling.system.nodeSelector",
            "must be a mapping",
        ),
        ({"system": {"selector": {}}}, "scheduling.system.selector", "unknown key 'selector'"),
        ({"nodeCount": 0}, "scheduling.nodeCount", "positive integer"),
        ({"nodeCount": True}, "scheduling.nodeCount", "positive integer"),
        ({"workloadGateTaint": "x=y"}, "scheduling.workloadGateTaint", "not key=value:Effect"),
        (["a"], "scheduling", "scheduling must be a mapping"),
    ],
)
def test_parse_scheduling_rejects_with_key(raw, key, needle):
    with pytest.raises(GpuclusterError) as exc:
        parse_scheduling(raw, file="c.yaml", cluster="c1")
    text = exc.value.render()
    assert (
        needle in text and f"key={key}" in text and "file=c.yaml" in text and "cluster=c1" in text
    )


# --------------------------------------------------------------------------- injection


def test_default_accelerated_toleration_derived_from_gpu_pool_taint(catalog):
    comps = inject(catalog)
    assert comps["gpu-operator"].values["daemonsets"]["tolerations"] == [
        GPU_TOL
    ]  # replaced, old entry gone
    assert comps["nvidia-dra-driver-gpu"].values["kubeletPlugin"]["tolerations"] == [GPU_TOL]
    assert comps["nodewright-customizations"].values["acceleratedTolerations"] == [GPU_TOL]
    assert "tolerations" not in comps["gpu-operator"].values["operator"]  # system path untouched
    assert "controller" not in comps["nvidia-dra-driver-gpu"].values


def test_default_toleration_follows_the_pool_taint_not_a_constant(catalog):
    comps = inject(catalog, taints=[Taint("sku", "h100", "NoExecute")])
    assert comps["nodewright-customizations"].values["acceleratedTolerations"] == [
        {"key": "sku", "operator": "Exists", "effect": "NoExecute"}
    ]


def test_no_default_without_tainted_gpu_pools(catalog):
    comps = inject(catalog, taints=[])
    assert "acceleratedTolerations" not in comps["nodewright-customizations"].values
    assert comps["gpu-operator"].values["daemonsets"]["tolerations"] == [
        {"key": "old", "operator": "Exists"}
    ]


def test_user_tolerations_replace_the_default(catalog):
    comps = inject(
        catalog,
        scheduling={
            "accelerated": {"tolerations": ["nvidia.com/gpu:NoSchedule", "dedicated=ml:NoSchedule"]}
        },
    )
    assert comps["nvidia-dra-driver-gpu"].values["kubeletPlugin"]["tolerations"] == [
        GPU_TOL,
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
    ]


def test_selectors_and_system_tolerations_go_to_their_paths(catalog):
    comps = inject(
        catalog,
        scheduling={
            "accelerated": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
            "system": {
                "nodeSelector": {"agentpool": "system"},
                "tolerations": ["CriticalAddonsOnly:NoSchedule"],
            },
        },
    )
    dra = comps["nvidia-dra-driver-gpu"].values
    assert dra["kubeletPlugin"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert dra["controller"] == {
        "nodeSelector": {"agentpool": "system"},
        "tolerations": [
            {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"}
        ],
    }
    assert comps["network-operator"].values["operator"]["nodeSelector"] == {
        "a": "b"
    }  # no registry paths: untouched
    assert comps["nodewright-customizations"].values["acceleratedNodeSelector"] == {
        "nvidia.com/gpu.present": "true"
    }


def test_path_in_system_and_accelerated_gets_accelerated(catalog):
    comps = inject(
        catalog, scheduling={"system": {"tolerations": ["CriticalAddonsOnly:NoSchedule"]}}
    )
    nfd = comps["nfd"].values
    assert nfd["master"]["tolerations"] == [
        {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert nfd["worker"]["tolerations"] == [GPU_TOL]


def test_system_tolerations_keep_the_gpu_toleration_at_a_gpu_agent_path(catalog):
    """Without accelerated tolerations (no tainted pool, OKE/NVKE), a path both system and
    accelerated (NFD's worker) keeps the GPU toleration its values hold and gets the system ones
    added; a system-only path (NFD's master) is replaced."""
    recipe = make_recipe()
    components = make_components(recipe)
    components["nfd"].values["worker"]["tolerations"] = [GPU_TOL]
    components["nfd"].values["master"] = {"tolerations": [GPU_TOL]}
    cluster = make_cluster(
        taints=[],
        scheduling=parse_scheduling(
            {"system": {"tolerations": ["CriticalAddonsOnly:NoSchedule"]}},
            file="c.yaml",
            cluster="c1",
        ),
    )
    nfd = apply_scheduling(cluster, recipe, components, catalog)["nfd"].values
    critical = {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"}
    assert nfd["worker"]["tolerations"] == [GPU_TOL, critical]
    assert nfd["master"]["tolerations"] == [critical]


def test_recipe_list_at_toleration_path_appends(catalog):
    recipe = make_recipe(
        ref_overrides={
            "gpu-operator": {"daemonsets": {"tolerations": [{"key": "old", "operator": "Exists"}]}}
        }
    )
    comps = inject(catalog, recipe=recipe)
    assert comps["gpu-operator"].values["daemonsets"]["tolerations"] == [
        {"key": "old", "operator": "Exists"},
        GPU_TOL,
    ]


def test_recipe_empty_list_opts_the_path_out(catalog):
    recipe = make_recipe(
        ref_overrides={"nvidia-dra-driver-gpu": {"kubeletPlugin": {"tolerations": []}}}
    )
    comps = inject(catalog, recipe=recipe)
    assert "kubeletPlugin" not in comps["nvidia-dra-driver-gpu"].values
    assert comps["gpu-operator"].values["daemonsets"]["tolerations"] == [GPU_TOL]


def test_user_list_at_toleration_path_appends_without_duplicates(catalog):
    comps = inject(
        catalog,
        overrides={
            "values": [
                {
                    "component": "nodewrightcustomizations",
                    "values": {
                        "acceleratedTolerations": [{"key": "extra", "operator": "Exists"}, GPU_TOL]
                    },
                }
            ]
        },
    )
    assert comps["nodewright-customizations"].values["acceleratedTolerations"] == [
        {"key": "extra", "operator": "Exists"},
        GPU_TOL,
    ]


def test_workload_gate_taint_and_node_count(catalog):
    comps = inject(
        catalog,
        scheduling={"workloadGateTaint": "nodewright.nvidia.com/runtime-required=true:NoSchedule"},
    )
    v = comps["nodewright-operator"].values
    assert (
        v["controllerManager"]["manager"]["env"]["runtimeRequiredTaint"]
        == "nodewright.nvidia.com/runtime-required=true:NoSchedule"
    )
    assert v["estimatedNodeCount"] == 3  # the GPU pool's node count


def test_explicit_node_count_and_taint_without_value(catalog):
    comps = inject(
        catalog,
        scheduling={"nodeCount": 7, "workloadGateTaint": {"key": "gate", "effect": "NoSchedule"}},
    )
    v = comps["nodewright-operator"].values
    assert v["estimatedNodeCount"] == 7
    assert v["controllerManager"]["manager"]["env"]["runtimeRequiredTaint"] == "gate:NoSchedule"


def test_no_pools_no_defaults(catalog):
    recipe = make_recipe()
    components = make_components(recipe)
    cluster = make_cluster(pools=[])
    components = apply_scheduling(cluster, recipe, components, catalog)
    assert components["nodewright-operator"].values["estimatedNodeCount"] == 0
    assert "acceleratedTolerations" not in components["nodewright-customizations"].values


def test_injection_through_a_scalar_is_an_error(catalog):
    recipe = make_recipe()
    components = make_components(recipe)
    components["gpu-operator"].values["daemonsets"] = "none"
    with pytest.raises(GpuclusterError) as exc:
        apply_scheduling(make_cluster(), recipe, components, catalog)
    text = exc.value.render()
    assert (
        "cannot inject node scheduling at 'daemonsets.tolerations'" in text
        and "component=gpu-operator" in text
    )


@pytest.mark.parametrize(
    "platform,leaf",
    [
        ("oke", "gb200-oke-ubuntu-training"),
        ("nvke", "gb200-nvke-ubuntu-training"),
        ("oke", "l40s-oke-inference"),
    ],
)
def test_nfd_tolerates_the_gpu_taint_like_the_other_gpu_daemonsets(platform, leaf, tmp_path):
    """Without declared accelerated tolerations, the NFD worker and topology updater tolerate
    nvidia.com/gpu:NoSchedule, as gpu-operator's daemonsets and the DRA kubelet plugin do by their
    charts' defaults: a tainted GPU node is labelled."""
    from render_cases import cluster_doc

    from gpucluster import pipeline
    from gpucluster.inputs.config import parse_clusters

    (spec,) = parse_clusters(
        {"clusters": [cluster_doc(platform, leaf, "", "plain")]}, source="x.yaml", root=tmp_path
    )
    plan = pipeline.build_plan(spec)
    want = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    nfd = plan.components["nfd"].values
    assert want in nfd["worker"]["tolerations"] and want in nfd["topologyUpdater"]["tolerations"]


@pytest.mark.parametrize(
    "platform,leaf",
    [("oke", "gb200-oke-ubuntu-training"), ("nvke", "gb200-nvke-ubuntu-training")],
)
def test_system_tolerations_keep_nfd_on_tainted_gpu_nodes(platform, leaf, tmp_path):
    """scheduling.system.tolerations without an accelerated block (an unchanged AICR OKE file,
    built-in OKE/NVKE criteria): the NFD worker and topology updater keep nvidia.com/gpu:NoSchedule
    beside CriticalAddonsOnly."""
    from render_cases import cluster_doc

    from gpucluster import pipeline
    from gpucluster.inputs.config import parse_clusters

    (spec,) = parse_clusters(
        {"clusters": [cluster_doc(platform, leaf, "", "system")]}, source="x.yaml", root=tmp_path
    )
    nfd = pipeline.build_plan(spec).components["nfd"].values
    critical = {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"}
    for part in ("worker", "topologyUpdater"):
        assert nfd[part]["tolerations"] == [GPU_TOL, critical], part

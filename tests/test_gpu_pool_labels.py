"""GPU pool labels (AKS plugin) and the accelerated node selector derived from them.

docs/synth.md: GPU pools get node labels for the accelerated node selector. The AKS plugin
pre-labels every GPU pool ``nvidia.com/gpu.present: "true"`` (the label GPU Operator/NFD set
anyway); without ``scheduling.accelerated.nodeSelector`` the selector is derived from the labels
common to all GPU pools, like the default toleration is derived from their taints.
"""

from __future__ import annotations

import pytest
import yaml
from policy_helpers import make_catalog, make_cluster, make_components, make_recipe

from gpucluster.model import ClusterSpec, Criteria, ExistingCluster, NodePool
from gpucluster.pipeline import build_plan, prepare_cluster
from gpucluster.recipes.scheduling import effective_inputs, gpu_pool_node_selector, parse_scheduling

GPU_LABEL = {"nvidia.com/gpu.present": "true"}


def spec(**kw) -> ClusterSpec:
    kw.setdefault("criteria", Criteria("aks", "h100", "ubuntu", "training"))
    return ClusterSpec(name="c1", source="g.yaml", **kw)


def test_default_aks_gpu_pool_is_labelled_gpu_present():
    c = prepare_cluster(spec())
    assert [(p.name, p.labels) for p in c.pools] == [("system", {}), ("gpu", GPU_LABEL)]


def test_user_gpu_pools_get_the_label_but_keep_their_own_value_and_labels():
    pools = [
        NodePool(name="sys", vm_size="Standard_D4s_v5", gpu=False, labels={"role": "sys"}),
        NodePool(name="gpua", vm_size="Standard_ND96isr_H100_v5", labels={"team": "a"}),
        NodePool(
            name="gpub",
            vm_size="Standard_ND96isr_H100_v5",
            labels={"nvidia.com/gpu.present": "yes"},
        ),
    ]
    c = prepare_cluster(spec(pools=pools))
    assert c.pools[0].labels == {"role": "sys"}  # CPU pools get nothing
    assert c.pools[1].labels == {"team": "a", **GPU_LABEL}
    assert c.pools[2].labels == {
        "nvidia.com/gpu.present": "yes"
    }  # the user's value of that key wins
    assert pools[1].labels == {"team": "a"}  # the input is not mutated


def test_selector_is_the_labels_common_to_all_gpu_pools():
    c = make_cluster(
        pools=[
            NodePool(name="sys", vm_size="x", gpu=False, labels={"team": "a", "zone": "1"}),
            NodePool(name="g1", vm_size="y", labels={"team": "a", "zone": "1", **GPU_LABEL}),
            NodePool(name="g2", vm_size="y", labels={"team": "a", "zone": "2", **GPU_LABEL}),
        ]
    )
    assert gpu_pool_node_selector(c) == {
        "nvidia.com/gpu.present": "true",
        "team": "a",
    }  # zone differs: not common
    assert effective_inputs(c).accelerated_node_selector == {
        "nvidia.com/gpu.present": "true",
        "team": "a",
    }


def test_no_gpu_pools_no_selector():
    assert gpu_pool_node_selector(make_cluster(pools=[])) == {}
    assert (
        gpu_pool_node_selector(
            make_cluster(pools=[NodePool(name="s", vm_size="x", gpu=False, labels={"a": "b"})])
        )
        == {}
    )


def test_user_selector_wins_over_the_derived_one():
    c = make_cluster(
        pools=[
            NodePool(name="s", vm_size="x", gpu=False),
            NodePool(name="g", vm_size="y", labels=GPU_LABEL),
        ],
        scheduling=parse_scheduling(
            {"accelerated": {"nodeSelector": {"pool": "gpu"}}}, file="c.yaml", cluster="c1"
        ),
    )
    assert effective_inputs(c).accelerated_node_selector == {"pool": "gpu"}


def test_derived_selector_injected_at_the_accelerated_paths(tmp_path):
    from gpucluster.recipes.overrides import apply_overrides
    from gpucluster.recipes.scheduling import apply_scheduling

    catalog = make_catalog(tmp_path)
    recipe = make_recipe()
    components = make_components(recipe)
    cluster = make_cluster(
        pools=[
            NodePool(name="s", vm_size="x", gpu=False),
            NodePool(name="g", vm_size="y", labels=GPU_LABEL),
        ]
    )
    components = apply_overrides(cluster, recipe, components, catalog)
    components = apply_scheduling(cluster, recipe, components, catalog)
    assert components["nvidia-dra-driver-gpu"].values["kubeletPlugin"]["nodeSelector"] == GPU_LABEL
    assert components["nodewright-customizations"].values["acceleratedNodeSelector"] == GPU_LABEL


@pytest.fixture(scope="module")
def default_plan():
    return build_plan(spec())


def test_default_aks_plan_targets_gpu_only_components_to_gpu_nodes(default_plan):
    comps = default_plan.components
    assert comps["nvidia-dra-driver-gpu"].values["kubeletPlugin"]["nodeSelector"] == GPU_LABEL
    assert comps["nodewright-customizations"].values["acceleratedNodeSelector"] == GPU_LABEL
    # the Skyhook CR selects GPU nodes only (AICR CheckAcceleratedSelectorMissing: else every node)
    (node,) = [n for n in default_plan.nodes if n.id == "nodewright-customizations-manifests"]
    docs = [
        d
        for k, v in node.local_chart.files.items()
        if k.startswith("templates/")
        for d in yaml.safe_load_all(v)
        if d
    ]
    (skyhook,) = [d for d in docs if d["kind"] == "Skyhook"]
    assert skyhook["spec"]["nodeSelectors"] == {"matchLabels": GPU_LABEL}
    # system components keep no accelerated selector
    assert "nodeSelector" not in comps["nvidia-dra-driver-gpu"].values.get("controller", {})


def test_kubeflow_runtime_gets_the_derived_selector():
    """The ClusterTrainingRuntime template reads the cluster's effective scheduling inputs; the
    kubeflow-trainer chart's values carry no acceleratedNodeSelector (the chart never read it)."""
    import yaml

    plan = build_plan(spec(criteria=Criteria("aks", "h100", "ubuntu", "training", "kubeflow")))
    assert "acceleratedNodeSelector" not in plan.components["kubeflow-trainer"].values
    chart = plan.node("kubeflow-trainer-manifests").local_chart
    docs = [
        d
        for p, t in sorted(chart.files.items())
        if p.startswith("templates/")
        for d in yaml.safe_load_all(t)
        if d
    ]
    (runtime,) = [d for d in docs if d["kind"] == "ClusterTrainingRuntime"]
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]
    assert pod["nodeSelector"] == GPU_LABEL
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]


def test_user_selector_wins_in_the_plan():
    c = spec(
        scheduling=parse_scheduling(
            {"accelerated": {"nodeSelector": {"example.com/pool": "h100"}}},
            file="g.yaml",
            cluster="c1",
        )
    )
    plan = build_plan(c)
    assert plan.components["nvidia-dra-driver-gpu"].values["kubeletPlugin"]["nodeSelector"] == {
        "example.com/pool": "h100"
    }


def test_existing_cluster_gets_no_derived_selector():
    from gpucluster.recipes.scheduling import parse_scheduling as ps

    c = spec(
        existing=ExistingCluster(kubeconfig_path="k"),
        scheduling=ps(
            {"accelerated": {"tolerations": ["nvidia.com/gpu:NoSchedule"]}},
            file="g.yaml",
            cluster="c1",
        ),
    )
    plan = build_plan(c)
    assert plan.cluster.pools == []
    assert "nodeSelector" not in plan.components["nvidia-dra-driver-gpu"].values.get(
        "kubeletPlugin", {}
    )
    assert "acceleratedNodeSelector" not in plan.components["nodewright-customizations"].values


def test_gpu_pool_labels_reach_the_azurerm_node_pool_props(default_plan):
    from gpucluster_aks.cluster import cluster_props

    props = cluster_props(default_plan.cluster)
    (gpu,) = props.pools
    assert gpu.labels == GPU_LABEL
    assert props.system_pool.labels == {}

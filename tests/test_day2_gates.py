"""Gates that mean it (issue 11, item 4): rollout gates need >= 1 ready pod wherever GPU nodes are
expected -- existing clusters included -- and every platform gets a ClusterPolicy-ready gate when
the GPU Operator is installed (NVKE declares it, a third-party platform gets the core default)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from gate_harness import SHELLS, run_script

from gpucluster import pipeline
from gpucluster.charts import gates
from gpucluster.inputs.config import parse_clusters
from gpucluster.model import ClusterSpec, Component, ComponentRef, Criteria, NodePool, Recipe
from gpucluster.sdk import gpu_nodes_expected

DRA_GATE = "nvidia-dra-driver-gpu-kubelet-plugin-rollout"
CP_GATE = "gpu-operator-clusterpolicy-ready"
ZERO_PODS = "1|1|0|||0"  # generation|observed|desired|updated|available|current: no pod scheduled
ONE_POD = "1|1|1|1|1|1"


def existing_aks(tmp_path: Path):
    doc = {
        "clusters": [
            {
                "name": "aks-existing",
                "criteria": {"service": "aks", "accelerator": "h100", "intent": "training"},
                "existing": {"kubeconfig": "~/.kube/config"},
                "scheduling": {"accelerated": {"tolerations": ["nvidia.com/gpu:NoSchedule"]}},
            }
        ]
    }
    (spec,) = parse_clusters(doc, source="clusters.yaml", root=tmp_path)
    return pipeline.build_plan(spec)


def job_script(plan, gate: str) -> str:
    node = plan.node(gate)
    rendered = gates.render_release(node.local_chart, node.values)
    (job,) = [d for d in yaml.safe_load_all(rendered["templates/002-job.yaml"]) if d]
    return job["spec"]["template"]["spec"]["containers"][0]["command"][2]


@pytest.fixture(scope="module")
def existing_plan(tmp_path_factory):
    return existing_aks(tmp_path_factory.mktemp("existing"))


def test_existing_aks_cluster_expects_gpu_nodes(existing_plan):
    assert existing_plan.cluster.pools == [] and existing_plan.cluster.existing is not None
    (dra,) = [g for g in existing_plan.gates if g.name == DRA_GATE]
    assert dra.min_ready == 1


@pytest.mark.parametrize("shell", SHELLS)
def test_dra_gate_fails_at_zero_pods_on_an_existing_cluster(existing_plan, tmp_path, shell):
    script = job_script(existing_plan, DRA_GATE)
    failed = run_script(
        script, [(ZERO_PODS, "", 0)], tmp_path / "zero", shell=shell, clock_step=300
    )
    assert failed.returncode == 1
    assert "FAILED" in failed.lines[-1] and "desired 0" in failed.lines[-1]
    ok = run_script(script, [(ZERO_PODS, "", 0), (ONE_POD, "", 0)], tmp_path / "one", shell=shell)
    assert ok.returncode == 0 and "ready:" in ok.lines[-1]


def test_gpu_nodes_expected():
    def spec(**kw):
        return ClusterSpec(name="c", criteria=Criteria(service="aks"), **kw)

    assert gpu_nodes_expected(spec())  # existing cluster / platform without pools
    assert gpu_nodes_expected(
        spec(pools=[NodePool("sys", "x", gpu=False), NodePool("gpu", "y", gpu=True)])
    )
    assert not gpu_nodes_expected(spec(pools=[NodePool("sys", "x", gpu=False)]))


def test_nvke_has_its_clusterpolicy_gate(tmp_path):
    from test_nvke_pipeline import build

    plan = build(tmp_path)
    gate = next(g for g in plan.gates if g.name == CP_GATE)
    assert (
        gate.kind,
        gate.resource,
        gate.name_of_object,
        gate.jsonpath,
        gate.value,
        gate.timeout_seconds,
    ) == (
        "resource-condition",
        "clusterpolicies",
        "cluster-policy",
        "{.status.state}",
        "ready",
        1800,
    )
    assert plan.node(CP_GATE).depends_on == ["gpu-operator"]
    # gpu-operator's ready handle: the DRA driver (whose plugin needs the driver loaded) waits for it
    assert CP_GATE in plan.node("nvidia-dra-driver-gpu").depends_on
    assert "gpu-operator" not in plan.node("nvidia-dra-driver-gpu").depends_on


def test_a_platform_without_a_clusterpolicy_gate_gets_the_core_default():
    cluster = ClusterSpec(name="c", criteria=Criteria(service="myk8s"), source="c.yaml")
    recipe = Recipe(
        criteria=cluster.criteria, applied_overlays=[], constraints=[], component_refs=[]
    )
    comps = {
        "gpu-operator": Component(
            ref=ComponentRef(name="gpu-operator", namespace="gpu-operator"), values={}
        )
    }
    (gate,) = gates.collect_gates(cluster, recipe, comps)
    assert (gate.name, gate.component, gate.resource, gate.value, gate.timeout_seconds) == (
        CP_GATE,
        "gpu-operator",
        "clusterpolicies",
        "ready",
        1800,
    )
    assert gates.collect_gates(cluster, recipe, {}) == []  # no GPU Operator, no gate

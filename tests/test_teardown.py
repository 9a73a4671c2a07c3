"""Teardown (issue 11, item 3): ``terraform destroy`` removes custom resources before their
operators, waits for their finalizers with a bounded timeout, fails naming object, finalizer and
node with the documented recovery, and leaves no node cordoned by a NodeMaintenance."""

from __future__ import annotations

import re

import pytest
import yaml
from _support import ancestors
from gate_harness import SHELLS, run_script

from gpucluster import pipeline
from gpucluster.charts import crds, graph, teardown
from gpucluster.inputs import config

NCP = {
    "kind": "NicClusterPolicy",
    "version": "v1alpha1",
    "group": "mellanox.com",
    "plural": "nicclusterpolicies",
    "name": "nic-cluster-policy",
    "namespace": "",
}
NM = {
    "kind": "NodeMaintenance",
    "version": "v1alpha1",
    "group": "maintenance.nvidia.com",
    "plural": "nodemaintenances",
    "name": "x",
    "namespace": "nvidia-network-operator",
}


@pytest.fixture(scope="module")
def plan():
    return pipeline.build_plan(config.load_clusters()[0])


@pytest.fixture(scope="module")
def nvke_plans(tmp_path_factory):
    from test_nvke_pipeline import build

    root = tmp_path_factory.mktemp("nvke")
    return {p: build(root, p) for p in ("any", "kubeflow")}


def destroy_order(plan) -> list[str]:
    """Terraform destroys a resource only after everything that depends on it (reverse topological)."""
    return [n for layer in reversed(graph.topological_layers(plan.nodes)) for n in layer]


# --------------------------------------------------------------------------- ordering


def _all_plans(plan, nvke_plans, tmp_path):
    from test_oke_pipeline import LEAVES
    from test_oke_pipeline import build as build_oke

    oke = [build_oke(tmp_path, leaf) for leaf in LEAVES if "gb200" in leaf and "training" in leaf]
    return [plan, *nvke_plans.values(), *oke]


def test_destroy_removes_every_custom_resource_before_its_operator(plan, nvke_plans, tmp_path):
    """For every custom resource of every release: the release of its CRD owner is an ancestor, so
    Terraform destroys the CR release first (and the teardown guard before that)."""
    checked = 0
    for p in _all_plans(plan, nvke_plans, tmp_path):
        owners = crds.crd_owners(p.components)
        order = destroy_order(p)
        for node in p.nodes:
            if node.kind not in ("pre-manifests", "manifests"):
                continue
            for obj in teardown.custom_resources(node, owners):
                owner = owners[f"{obj['plural']}.{obj['group']}"]
                owner_releases = [
                    n.id for n in p.nodes if n.component == owner and n.kind == "chart"
                ]
                for rel in owner_releases:
                    if owner != node.component:
                        assert rel in ancestors(p, node.id), (node.id, obj, rel)
                    assert order.index(node.id) < order.index(rel), (node.id, rel)
                guard = node.component + teardown.TEARDOWN_SUFFIX
                assert order.index(guard) < order.index(node.id)
                checked += 1
    assert (
        checked >= 8
    )  # NicClusterPolicy, NodeFeatureRule, Skyhook, IPPools, SR-IOV policies/networks, ...


def test_guards_of_the_default_cluster(plan):
    guards = {n.id: n for n in plan.nodes if n.kind == "teardown"}
    assert set(guards) == {
        "network-operator-teardown",
        "nodewright-customizations-teardown",
        "gpu-operator-teardown",
    }
    # the chart-created ClusterPolicy (known from the ClusterPolicy gate) is deleted while the operator runs
    gpu = guards["gpu-operator-teardown"]
    assert gpu.depends_on == ["gpu-operator"]
    assert (
        "ClusterPolicy.v1.nvidia.com||cluster-policy"
        in gpu.local_chart.files["templates/002-job.yaml"]
    )
    net = guards["network-operator-teardown"]
    assert net.depends_on == [
        "network-operator",
        "network-operator-manifests",
    ]  # chart: owner of NodeMaintenance
    assert not any(
        "teardown" in d for n in plan.nodes for d in n.depends_on
    )  # nothing waits for a guard on install
    rendered = {
        p: [d for d in yaml.safe_load_all(t) if d]
        for p, t in net.local_chart.files.items()
        if p.startswith("templates/")
    }
    (job,) = rendered["templates/002-job.yaml"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    role = rendered["templates/001-rbac.yaml"][0]
    assert {
        "apiGroups": ["mellanox.com"],
        "resources": ["nicclusterpolicies"],
        "resourceNames": ["nic-cluster-policy"],
        "verbs": ["delete", "get"],
    } in role["rules"]
    assert {
        "apiGroups": ["maintenance.nvidia.com"],
        "resources": ["nodemaintenances"],
        "verbs": ["list"],
    } in role["rules"]
    assert net.timeout_seconds == teardown.TEARDOWN_TIMEOUT + teardown.TEARDOWN_HELM_MARGIN
    # the guard's pods reach only the API server; the policy is a plain template, present when the pre-delete hook runs
    (policy,) = rendered["templates/003-networkpolicy.yaml"]
    assert policy["kind"] == "NetworkPolicy" and "annotations" not in policy["metadata"]
    assert (
        policy["spec"]["podSelector"]["matchLabels"].items()
        <= job["spec"]["template"]["metadata"]["labels"].items()
    )
    assert policy["spec"]["ingress"] == [] and policy["spec"]["policyTypes"] == [
        "Ingress",
        "Egress",
    ]
    assert job["spec"]["activeDeadlineSeconds"] < net.timeout_seconds


def test_nvke_fabric_guard_deletes_the_rails_before_the_operator(nvke_plans):
    plan = nvke_plans["any"]
    sriov = plan.node("sriov-ib-networks-teardown")
    script = yaml.safe_load(sriov.local_chart.files["templates/002-job.yaml"])["spec"]["template"][
        "spec"
    ]["containers"][0]["command"][2]
    assert "IPPool.v1alpha1.nv-ipam.nvidia.com|nvidia-network-operator|" in script
    assert "SriovNetworkNodePolicy.v1.sriovnetwork.openshift.io|nvidia-network-operator|" in script
    order = destroy_order(plan)
    assert (
        order.index("sriov-ib-networks-teardown")
        < order.index("sriov-ib-networks-manifests")
        < order.index("network-operator-teardown")
        < order.index("network-operator")
    )


# --------------------------------------------------------------------------- the Job


def script(objects, **kw):
    return teardown.teardown_script("network-operator-teardown", objects, **kw)


@pytest.mark.parametrize("shell", SHELLS)
def test_waits_for_finalizers_then_succeeds(tmp_path, shell):
    responses = [
        ("", "", 0),  # delete accepted
        ("NicClusterPolicy||nic-cluster-policy|[nvidia.com/finalizer]|", "", 0),
        ("", "", 0),  # still there, no NM
        ("", "", 0),
        ("", "", 0),
    ]  # gone, no NodeMaintenance
    run = run_script(script([NCP], node_maintenance=True), responses, tmp_path, shell=shell)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.calls[0][0] == "delete" and "--wait=false" in run.calls[0]
    assert "NicClusterPolicy.v1alpha1.mellanox.com" in run.calls[0]
    assert (
        run.lines[-1]
        == "teardown network-operator-teardown: done: every custom resource is gone and no NodeMaintenance is left"
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_stuck_names_object_finalizer_node_and_recovery(tmp_path, shell):
    nm_row = "NodeMaintenance|nvidia-network-operator|sriov-drain-gpu-7|[maintenance.nvidia.com/finalizer]|gpu-7\n"
    ncp_row = ("NicClusterPolicy||nic-cluster-policy|[nvidia.com/finalizer]|", "", 0)
    responses = [
        ("", "", 0),
        ncp_row,
        (nm_row, "", 0),
        ncp_row,
        (nm_row, "", 0),
    ]  # two polls, then the deadline
    run = run_script(
        script([NCP], node_maintenance=True, timeout=60),
        responses,
        tmp_path,
        shell=shell,
        clock_step=40,
    )
    assert run.returncode == 1
    text = run.stdout
    assert "FAILED: still present after 60s:" in text
    assert (
        "STUCK NicClusterPolicy nic-cluster-policy finalizers=[nvidia.com/finalizer] node=-" in text
    )
    assert (
        "STUCK NodeMaintenance nvidia-network-operator/sriov-drain-gpu-7 finalizers=[maintenance.nvidia.com/finalizer] node=gpu-7"
        in text
    )
    assert (
        "kubectl uncordon <node>" in text
        and "docs/upgrading.md" in text
        and 'finalizers":null' in text
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_no_node_maintenance_api_is_nothing_to_wait_for(tmp_path, shell):
    responses = [
        ("", "", 0),
        ("", "", 0),
        ("", 'error: the server doesn\'t have a resource type "nodemaintenances"', 1),
    ]
    run = run_script(script([NCP], node_maintenance=True), responses, tmp_path, shell=shell)
    assert run.returncode == 0, run.stdout


@pytest.mark.parametrize("shell", SHELLS)
def test_api_errors_are_retried_not_success(tmp_path, shell):
    responses = [
        ("", "", 0),
        ("", "Unable to connect to the server", 1),
        ("", "", 0),
        ("", "", 0),
        ("", "", 0),
    ]
    run = run_script(script([NCP], node_maintenance=True), responses, tmp_path, shell=shell)
    assert (
        run.returncode == 0 and len(run.sleeps) >= 1
    )  # the first check failed on the API error and slept


def test_guard_chart_validates_and_has_no_template_syntax(plan):
    from k8s_schema import validate_object

    for node in plan.nodes:
        if node.kind != "teardown":
            continue
        for path, text in node.local_chart.files.items():
            if path.startswith("templates/"):
                assert "{{" not in text
                for doc in yaml.safe_load_all(text):
                    if doc:
                        assert (
                            validate_object(doc) == "kubernetes 1.34"
                        )  # raises on an invalid object


# --------------------------------------------------------------------------- in-cluster kubectl


def test_no_job_of_any_plan_passes_a_client_flag_that_drops_the_in_cluster_configuration(
    plan, nvke_plans, tmp_path
):
    """kubectl ignores a pod's in-cluster configuration (and dials localhost:8080) as soon as a
    client flag such as ``--request-timeout`` is given (kubernetes/kubernetes#93474, open; seen on
    the rehearsal rig). Every kubectl call of every gate, CRD step and teardown guard is bounded by
    coreutils ``timeout`` instead."""
    scripts = 0
    for p in _all_plans(plan, nvke_plans, tmp_path):
        for node in p.nodes:
            if node.local_chart is None:
                continue
            for name, text in node.local_chart.files.items():
                if not name.startswith("templates/") or "kind: Job" not in text:
                    continue
                scripts += 1
                for line in text.splitlines():
                    code = line.split("# ", 1)[0]
                    assert "--request-timeout" not in code, (p.cluster.name, node.id, line)
                    if re.search(r"(^|[;&|(`$]\s*|\s)kubectl\s", code) and not re.search(
                        r"timeout [0-9]+ kubectl", code
                    ):
                        if "echo" in code or "log " in code or 'log "' in code:
                            continue
                        raise AssertionError(
                            f"{p.cluster.name} {node.id}: unbounded kubectl: {line.strip()}"
                        )
    assert scripts >= 10

"""The gate Jobs' wait scripts, run for real under dash and bash against a fake kubectl."""

from __future__ import annotations

import pytest
from gate_harness import SHELLS, run_script

from gpucluster.charts import gates
from gpucluster.model import ClusterSpec, Criteria, GateSpec

CLUSTER = ClusterSpec(name="lab", criteria=Criteria(service="aks"), source="tests")
NOT_FOUND = (
    "",
    'Error from server (NotFound): clusterpolicies.nvidia.com "cluster-policy" not found\n',
    1,
)


def script(**kwargs) -> str:
    return gates.gate_script(
        gates.validate_gate(GateSpec(**kwargs), plugin="tests", cluster=CLUSTER)
    )


def clusterpolicy(**extra) -> str:
    return script(
        name="gpu-operator-clusterpolicy-ready",
        component="gpu-operator",
        kind="resource-condition",
        api_version="nvidia.com/v1",
        resource="clusterpolicies",
        kind_name="ClusterPolicy",
        name_of_object="cluster-policy",
        jsonpath="{.status.state}",
        value="ready",
        **extra,
    )


def nicclusterpolicies(**extra) -> str:
    return script(
        name="network-operator-nicclusterpolicy-ready",
        component="network-operator",
        kind="resource-condition",
        api_version="mellanox.com/v1alpha1",
        resource="nicclusterpolicies",
        kind_name="NicClusterPolicy",
        jsonpath="{.status.state}",
        value="ready",
        **extra,
    )


def crd(**extra) -> str:
    return script(
        name="network-operator-ippool-crd",
        component="network-operator",
        kind="crd-established",
        name_of_object="ippools.nv-ipam.nvidia.com",
        **extra,
    )


def rollout(kind_name="DaemonSet", **extra) -> str:
    return script(
        name="dra-rollout",
        component="nvidia-dra-driver-gpu",
        kind="rollout",
        kind_name=kind_name,
        name_of_object="nvidia-dra-driver-gpu-kubelet-plugin",
        namespace="nvidia-dra-driver",
        **extra,
    )


def min_version(value="0.5.1", **extra) -> str:
    return script(
        name="dra-version",
        component="nvidia-dra-driver-gpu",
        kind="min-version",
        kind_name="DaemonSet",
        name_of_object="nvidia-dra-driver-gpu-kubelet-plugin",
        namespace="nvidia-dra-driver",
        container="compute-domains",
        value=value,
        **extra,
    )


pytestmark = pytest.mark.parametrize("shell", SHELLS)


# --------------------------------------------------------------------------- resource-condition


def test_named_object_ready_at_once(tmp_path, shell):
    run = run_script(clusterpolicy(), [("cluster-policy=ready\n", "", 0)], tmp_path, shell=shell)
    assert run.returncode == 0, run.stderr
    assert (
        run.lines[0]
        == "gate gpu-operator-clusterpolicy-ready: waiting up to 600s for ClusterPolicy cluster-policy has {.status.state} = ready"
    )
    assert run.lines[-1] == (
        "gate gpu-operator-clusterpolicy-ready: ready: ClusterPolicy cluster-policy has "
        "{.status.state} = ready (saw: cluster-policy=ready)"
    )
    assert run.calls == [
        [
            "get",
            "clusterpolicies.v1.nvidia.com",
            "cluster-policy",
            "-o",
            'jsonpath={.metadata.name}={.status.state}{"\\n"}',
        ]
    ]
    assert run.sleeps == []


def test_named_object_waits_through_not_found_and_not_ready(tmp_path, shell):
    responses = [
        NOT_FOUND,
        ("cluster-policy=notReady\n", "", 0),
        ("cluster-policy=\n", "", 0),
        ("cluster-policy=ready\n", "", 0),
    ]
    run = run_script(clusterpolicy(poll_seconds=7), responses, tmp_path, shell=shell)
    assert run.returncode == 0
    assert len(run.calls) == 4
    assert run.sleeps == ["7", "7", "7"]
    assert run.lines[-1].endswith("(saw: cluster-policy=ready)")


def test_named_object_times_out_with_what_it_saw(tmp_path, shell):
    run = run_script(
        clusterpolicy(timeout_seconds=300),
        [("cluster-policy=notReady\n", "", 0)],
        tmp_path,
        shell=shell,
        clock_step=100,
    )
    assert run.returncode == 1
    assert run.lines[-1] == (
        "gate gpu-operator-clusterpolicy-ready: FAILED: ClusterPolicy cluster-policy has "
        "{.status.state} = ready was not reached within 300s; last seen: cluster-policy=notReady"
    )
    # the fake clock moves 100 s per `date`: checks at 0, 100 and 200 s; at 300 s the budget is spent
    assert (len(run.calls), len(run.sleeps)) == (3, 2), (run.calls, run.sleeps)


def test_timeout_reports_the_last_kubectl_error(tmp_path, shell):
    run = run_script(
        clusterpolicy(timeout_seconds=100), [NOT_FOUND], tmp_path, shell=shell, clock_step=100
    )
    assert run.returncode == 1
    assert run.lines[-1].endswith(
        "last seen: kubectl get failed: Error from server (NotFound): "
        'clusterpolicies.nvidia.com "cluster-policy" not found'
    )


@pytest.mark.parametrize(
    "refusal",
    [
        'Error from server (Forbidden): clusterpolicies.nvidia.com "cluster-policy" is forbidden: User '
        '"system:serviceaccount:gpu-operator:gpu-operator-clusterpolicy-ready" cannot get resource '
        '"clusterpolicies" in API group "nvidia.com" at the cluster scope',
        "error: You must be logged in to the server (Unauthorized)",
    ],
)
def test_a_refusal_of_the_gates_own_identity_fails_at_once(tmp_path, shell, refusal):
    """RBAC that lacks a verb (or a token the server refuses) is not a state to wait out: the gate
    fails on its first look, with the server's line, long before its 1800 s budget."""
    run = run_script(
        clusterpolicy(timeout_seconds=1800), [("", refusal + "\n", 1)], tmp_path, shell=shell
    )
    assert run.returncode == 1
    assert len(run.calls) == 1 and run.sleeps == []
    assert run.lines[-1] == (
        "gate gpu-operator-clusterpolicy-ready: FAILED: the API server refused the gate's "
        f"ServiceAccount: {refusal}"
    )


def test_every_object_must_be_ready(tmp_path, shell):
    responses = [
        ("", "", 0),  # no NicClusterPolicy yet
        ("a=ready\nb=notReady\n", "", 0),
        ("a=ready\nb=ready\n", "", 0),
    ]
    run = run_script(nicclusterpolicies(), responses, tmp_path, shell=shell)
    assert run.returncode == 0
    assert len(run.calls) == 3
    assert run.calls[0] == [
        "get",
        "nicclusterpolicies.v1alpha1.mellanox.com",
        "-o",
        'jsonpath={range .items[*]}{.metadata.name}={.status.state}{"\\n"}{end}',
    ]
    assert run.lines[-1].endswith("(saw: a=ready b=ready)")


@pytest.mark.parametrize(
    "listing, seen",
    [
        ("", "no object exists yet"),
        ("a=ready\nb=\n", "a=ready b=<unset>"),
        ("a=notReady\nb=ready\n", "a=notReady b=ready"),
    ],
)
def test_any_not_ready_object_fails_the_gate(tmp_path, shell, listing, seen):
    run = run_script(
        nicclusterpolicies(timeout_seconds=200),
        [(listing, "", 0)],
        tmp_path,
        shell=shell,
        clock_step=100,
    )
    assert run.returncode == 1
    assert run.lines[-1].endswith(f"last seen: {seen}")


def test_kubectl_warnings_on_stderr_do_not_count_as_objects(tmp_path, shell):
    run = run_script(
        nicclusterpolicies(),
        [("a=ready\n", "Warning: mellanox.com/v1alpha1 is deprecated\n", 0)],
        tmp_path,
        shell=shell,
    )
    assert run.returncode == 0
    assert run.lines[-1].endswith("(saw: a=ready)")


def test_namespaced_condition_passes_the_namespace(tmp_path, shell):
    text = script(
        name="pool",
        component="c",
        kind="resource-condition",
        api_version="nv-ipam.nvidia.com/v1alpha1",
        resource="ippools",
        kind_name="IPPool",
        namespace="nvidia-network-operator",
        jsonpath="{.status.allocations[0].nodeName}",
        value="n1",
    )
    run = run_script(text, [("pool-a=n1\n", "", 0)], tmp_path, shell=shell)
    assert run.returncode == 0
    assert run.calls[0][1:4] == [
        "ippools.v1alpha1.nv-ipam.nvidia.com",
        "-n",
        "nvidia-network-operator",
    ]


# --------------------------------------------------------------------------- crd-established


def test_crd_created_then_established(tmp_path, shell):
    responses = [
        (
            "",
            'Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io "ippools.nv-ipam.nvidia.com" not found\n',
            1,
        ),
        ("", "", 0),  # created (phase 1 done)
        ("", "", 0),  # no conditions yet
        ("False", "", 0),
        ("True", "", 0),
    ]
    run = run_script(crd(), responses, tmp_path, shell=shell)
    assert run.returncode == 0, run.stdout
    assert run.lines[0] == (
        "gate network-operator-ippool-crd: waiting up to 600s for CRD ippools.nv-ipam.nvidia.com "
        "to be created, then up to 120s for it to be Established"
    )
    assert run.lines[-1] == (
        "gate network-operator-ippool-crd: ready: CRD ippools.nv-ipam.nvidia.com is created "
        "and Established (saw: Established=True)"
    )
    assert run.calls[0] == [
        "get",
        "customresourcedefinitions.v1.apiextensions.k8s.io",
        "ippools.nv-ipam.nvidia.com",
        "-o",
        'jsonpath={.status.conditions[?(@.type=="Established")].status}',
    ]
    assert len(run.calls) == 5  # not found, created (phase 1), then 3 checks of phase 2
    assert run.sleeps == ["10", "10", "10"]


def test_crd_never_created(tmp_path, shell):
    run = run_script(
        crd(),
        [("", "Error from server (NotFound): not found\n", 1)],
        tmp_path,
        shell=shell,
        clock_step=200,
    )
    assert run.returncode == 1
    assert run.lines[-1] == (
        "gate network-operator-ippool-crd: FAILED: CRD ippools.nv-ipam.nvidia.com was not created "
        "within 600s; last seen: not created yet: Error from server (NotFound): not found"
    )


def test_crd_created_but_never_established(tmp_path, shell):
    run = run_script(crd(), [("False", "", 0)], tmp_path, shell=shell, clock_step=50)
    assert run.returncode == 1
    assert run.lines[-1] == (
        "gate network-operator-ippool-crd: FAILED: CRD ippools.nv-ipam.nvidia.com was created but "
        "not Established within 120s; last seen: Established=False"
    )


# --------------------------------------------------------------------------- rollout


def test_daemonset_rolled_out(tmp_path, shell):
    run = run_script(rollout(), [("4|4|2|2|2|2", "", 0)], tmp_path, shell=shell)
    assert run.returncode == 0
    assert run.calls[0] == [
        "get",
        "daemonsets.v1.apps",
        "nvidia-dra-driver-gpu-kubelet-plugin",
        "-n",
        "nvidia-dra-driver",
        "-o",
        "jsonpath={.metadata.generation}|{.status.observedGeneration}|{.status.desiredNumberScheduled}|"
        "{.status.updatedNumberScheduled}|{.status.numberAvailable}|{.status.currentNumberScheduled}",
    ]
    assert run.lines[-1].endswith(
        "(saw: generation 4 (observed 4), desired 2, updated 2, available 2, current 2)"
    )


@pytest.mark.parametrize(
    "status, seen",
    [
        (
            "5|4|2|2|2|2",
            "generation 5 (observed 4), desired 2, updated 2, available 2, current 2",
        ),  # stale status
        (
            "4|4|2|1|2|2",
            "generation 4 (observed 4), desired 2, updated 1, available 2, current 2",
        ),  # old pod left
        (
            "4|4|2|2|1|2",
            "generation 4 (observed 4), desired 2, updated 2, available 1, current 2",
        ),  # not available
        (
            "1|1|0|||0",
            "generation 1 (observed 1), desired 0, updated 0, available 0, current 0",
        ),  # no GPU node yet
        (
            "1||||",
            "generation 1 (observed 0), desired 0, updated 0, available 0, current 0",
        ),  # fresh object
        (
            "4|4|2|2|n/a|2",
            "generation 4 (observed 4), desired 2, updated 2, available 0, current 2",
        ),  # a field that is no count reads as 0
    ],
)
def test_daemonset_not_rolled_out(tmp_path, shell, status, seen):
    run = run_script(
        rollout(timeout_seconds=100), [(status, "", 0)], tmp_path, shell=shell, clock_step=100
    )
    assert run.returncode == 1
    assert run.lines[-1].endswith(f"last seen: {seen}")


def test_zero_pods_pass_only_with_min_ready_zero(tmp_path, shell):
    run = run_script(rollout(min_ready=0), [("1|1|0|||0", "", 0)], tmp_path, shell=shell)
    assert run.returncode == 0


def test_deployment_needs_every_replica_updated_and_no_old_ones(tmp_path, shell):
    text = rollout(kind_name="Deployment")
    assert "deployments.v1.apps" in text and "{.spec.replicas}" in text
    run = run_script(text, [("2|2|3|3|3|4", "", 0), ("2|2|3|3|3|3", "", 0)], tmp_path, shell=shell)
    assert run.returncode == 0
    assert len(run.calls) == 2


# --------------------------------------------------------------------------- min-version


IMAGE = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu"


@pytest.mark.parametrize(
    "tag", ["v0.5.1", "0.5.1", "v0.5.2", "v0.6.0", "v1.0.0-rc.1", "v0.5.1+build.7"]
)
def test_min_version_met(tmp_path, shell, tag):
    run = run_script(
        min_version(),
        [(f"3|3|2|2|2|2|{IMAGE}:{tag}@sha256:0123abcd", "", 0)],
        tmp_path,
        shell=shell,
    )
    assert run.returncode == 0, run.stdout
    assert run.calls[0][-1].endswith(
        '|{.spec.template.spec.containers[?(@.name=="compute-domains")].image}'
    )
    assert run.lines[-1].endswith(f"image {IMAGE}:{tag}@sha256:0123abcd)")


@pytest.mark.parametrize(
    "image, seen_tail",
    [
        (f"{IMAGE}:v0.5.0", f"image {IMAGE}:v0.5.0"),
        (f"{IMAGE}:v0.5.1-rc.2", f"image {IMAGE}:v0.5.1-rc.2"),
        (f"{IMAGE}:v0.4.9", f"image {IMAGE}:v0.4.9"),
        (f"{IMAGE}:latest", f"image {IMAGE}:latest has no version tag"),
        (f"{IMAGE}@sha256:0123abcd", f"image {IMAGE}@sha256:0123abcd has no version tag"),
        ("", "no container compute-domains in the pod template"),
    ],
)
def test_min_version_not_met(tmp_path, shell, image, seen_tail):
    run = run_script(
        min_version(timeout_seconds=100),
        [(f"3|3|2|2|2|2|{image}", "", 0)],
        tmp_path,
        shell=shell,
        clock_step=100,
    )
    assert run.returncode == 1
    assert run.lines[-1].endswith(seen_tail)


def test_min_version_also_waits_for_the_rollout(tmp_path, shell):
    run = run_script(
        min_version(),
        [(f"3|2|2|2|2|2|{IMAGE}:v0.5.1", "", 0), (f"3|3|2|2|2|2|{IMAGE}:v0.5.1", "", 0)],
        tmp_path,
        shell=shell,
    )
    assert run.returncode == 0
    assert len(run.calls) == 2


@pytest.mark.parametrize(
    "have, want, rc",
    [
        ("0.5.1", "0.5.1", 0),
        ("v0.5.1", "0.5.1", 0),
        ("0.10.0", "0.9.9", 0),
        ("1", "0.9", 0),
        ("0.5", "0.5.0", 0),
        ("0.5.0", "0.5.1", 1),
        ("0.5.1-rc1", "0.5.1", 1),
        ("0.5.1", "0.5.1-rc1", 0),
        ("0.5.1-rc2", "0.5.1-rc1", 0),
        ("0.5.1-rc1", "0.5.1-rc2", 1),
        ("0.9.9", "0.10.0", 1),
        ("latest", "0.5.1", 2),
        ("", "0.5.1", 2),
    ],
)
def test_version_comparison(tmp_path, shell, have, want, rc):
    run = run_script(
        gates._VERSION_GE + f'version_ge "{have}" "{want}"; echo "rc=$?"',
        [("", "", 0)],
        tmp_path,
        shell=shell,
    )
    assert run.lines == [f"rc={rc}"]

"""The SDK's NVIDIA-stack gate constructors (gpucluster/charts/gate_helpers.py = gpucluster.sdk.gates, docs/plugins.md#gate-helpers)."""

from __future__ import annotations

import pytest

from gpucluster import sdk
from gpucluster.charts.gates import validate_gate
from gpucluster.errors import GpuclusterError
from gpucluster.sdk import (
    Component,
    ComponentRef,
    clusterpolicy_ready,
    dra_kubelet_plugin_name,
    dra_kubelet_plugin_rollout,
    nicclusterpolicy_ready,
)


def _dra(values, namespace="nvidia-dra-driver"):
    ref = ComponentRef(name="nvidia-dra-driver-gpu", namespace=namespace)
    return Component(ref=ref, values=values)


def test_clusterpolicy_ready_fields():
    g = clusterpolicy_ready(timeout_seconds=1800, before=("kai-scheduler",))
    assert (g.name, g.component, g.kind) == (
        "gpu-operator-clusterpolicy-ready",
        "gpu-operator",
        "resource-condition",
    )
    assert (g.api_version, g.resource, g.kind_name) == (
        "nvidia.com/v1",
        "clusterpolicies",
        "ClusterPolicy",
    )
    assert (g.name_of_object, g.namespace, g.jsonpath, g.value) == (
        "cluster-policy",
        None,
        "{.status.state}",
        "ready",
    )
    assert g.timeout_seconds == 1800 and g.before == ["kai-scheduler"] and g.after == []


def test_nicclusterpolicy_ready_waits_for_every_object():
    g = nicclusterpolicy_ready(
        timeout_seconds=900, name="ncp", after=["network-operator-ippool-crd"]
    )
    assert (g.name, g.component, g.api_version, g.resource) == (
        "ncp",
        "network-operator",
        "mellanox.com/v1alpha1",
        "nicclusterpolicies",
    )
    assert g.name_of_object is None and g.before is None
    assert g.after == ["network-operator-ippool-crd"]


@pytest.mark.parametrize(
    "values, expected",
    [
        (
            {"nameOverride": "nvidia-dra-driver-gpu", "fullnameOverride": "nvidia-dra-driver-gpu"},
            "nvidia-dra-driver-gpu-kubelet-plugin",
        ),
        # fullnameOverride does not name the DaemonSet (the chart's name helper does)
        ({"fullnameOverride": "custom"}, "dra-driver-nvidia-gpu-kubelet-plugin"),
        ({}, "dra-driver-nvidia-gpu-kubelet-plugin"),
        ({"nameOverride": "a" * 62 + "-x"}, "a" * 62 + "-kubelet-plugin"),
    ],
)
def test_dra_kubelet_plugin_name(values, expected):
    assert dra_kubelet_plugin_name(values) == expected


def test_dra_rollout_and_min_version():
    dra = _dra({"nameOverride": "nvidia-dra-driver-gpu"})
    r = dra_kubelet_plugin_rollout(dra, min_ready=0, timeout_seconds=900)
    assert (r.name, r.kind, r.component) == (
        "nvidia-dra-driver-gpu-kubelet-plugin-rollout",
        "rollout",
        "nvidia-dra-driver-gpu",
    )
    assert (r.kind_name, r.name_of_object, r.namespace) == (
        "DaemonSet",
        "nvidia-dra-driver-gpu-kubelet-plugin",
        "nvidia-dra-driver",
    )
    assert (r.min_ready, r.container, r.value) == (0, "", "")
    v = dra_kubelet_plugin_rollout(dra, min_version="0.5.1", timeout_seconds=600)
    assert (v.name, v.kind, v.container, v.value) == (
        "nvidia-dra-driver-gpu-kubelet-plugin-version",
        "min-version",
        "compute-domains",
        "0.5.1",
    )


def test_constructed_gates_pass_core_validation():
    from gpucluster.inputs.config import load_clusters

    cluster = load_clusters(None, env={})[0]
    for g in (
        clusterpolicy_ready(timeout_seconds=1800),
        nicclusterpolicy_ready(timeout_seconds=2400),
        dra_kubelet_plugin_rollout(_dra({}), timeout_seconds=900, min_version="0.5.1"),
    ):
        out = validate_gate(g, plugin="test", cluster=cluster)
        assert out.description
    with pytest.raises(GpuclusterError, match="timeout"):
        validate_gate(clusterpolicy_ready(timeout_seconds=0), plugin="test", cluster=cluster)


def test_exported_from_sdk():
    for name in (
        "clusterpolicy_ready",
        "nicclusterpolicy_ready",
        "dra_kubelet_plugin_rollout",
        "dra_kubelet_plugin_name",
    ):
        assert name in sdk.__all__ and getattr(sdk, name).__doc__

"""Example third-party gpucluster platform plugin: ``example-k8s``.

A complete, runnable plugin, written against the public SDK (:mod:`gpucluster.sdk`), the
standard library and nothing else. It is the worked example of docs/plugins.md; its tests
(``tests/test_example.py``, on :mod:`gpucluster.sdk.testing`) run with gpucluster's own suite.

``example-k8s`` is a made-up Kubernetes service whose clusters exist already (gpucluster writes
only the ``<name>-runtime`` stack), with H100 nodes that come without a GPU driver: the GPU
Operator installs driver and toolkit. The plugin contributes

* ``gpucluster_platforms``       the ``example-k8s`` service (H100, Ubuntu, training);
* ``gpucluster_catalog_dirs``    ``catalog/``: one overlay, one manifest-only component
  (``example-gpu-priority``, a PriorityClass) with its values file and manifest template;
* ``gpucluster_prepare_cluster`` refuses node pools, defaults ``existing`` to ``~/.kube/config``;
* ``gpucluster_gates``           ``example-clusterpolicy-ready``: dependents of gpu-operator wait
  for ClusterPolicy ``cluster-policy`` to report ``status.state`` = ``ready``;
* ``gpucluster_policy_checks``   ``EXAMPLE-DRIVER``: refuses ``driver.enabled=false`` on the GPU
  Operator (nothing else installs a driver on example-k8s nodes).

Registered through ``[project.entry-points.gpucluster] example = "gpucluster_example"`` (see
``pyproject.toml`` next to this package), or for development with
``GPUCLUSTER_PLUGINS=gpucluster_example``.
"""

from __future__ import annotations

import copy
from pathlib import Path

from gpucluster.sdk import (
    ExistingCluster,
    Finding,
    GateSpec,
    GpuclusterError,
    Platform,
    get_path,
    hookimpl,
)

SERVICE = "example-k8s"
CATALOG_DIR = Path(__file__).parent / "catalog"
DEFAULT_KUBECONFIG = "~/.kube/config"
CLUSTERPOLICY_TIMEOUT = 1200
"""20 min for the GPU Operator to build and load the driver on every GPU node."""

PLATFORM = Platform(
    service=SERVICE,
    display_name="Example Kubernetes",
    accelerators=("h100",),
    oses=("ubuntu",),
    intents=("training",),
    platforms=("any",),
    provisions_cluster=False,
    min_kubernetes="1.34",
    provider_id_prefix="example://",
)


@hookimpl
def gpucluster_platforms():
    """Declare the ``example-k8s`` service."""
    return [PLATFORM]


@hookimpl
def gpucluster_catalog_dirs():
    """This plugin's catalog directory (overlay, registry entry, values file, template)."""
    return [CATALOG_DIR]


@hookimpl
def gpucluster_prepare_cluster(cluster):
    """Refuse node pools and point the runtime stack at the existing cluster.

    Returns:
        a prepared copy of ``cluster``.

    Raises:
        GpuclusterError: node pools given (naming file, cluster and key).
    """
    if cluster.pools:
        raise GpuclusterError(
            "example-k8s clusters exist already; gpucluster does not create node pools for them",
            file=cluster.source,
            cluster=cluster.name,
            key="pools",
            fix="remove 'pools' and set existing.kubeconfig / existing.context",
        )
    cluster = copy.deepcopy(cluster)
    if cluster.existing is None:
        cluster.existing = ExistingCluster(kubeconfig_path=DEFAULT_KUBECONFIG, context=None)
    return cluster


@hookimpl
def gpucluster_gates(cluster, recipe, components):
    """Wait for the GPU Operator's ClusterPolicy before its dependents install."""
    if "gpu-operator" not in components:
        return None
    return [
        GateSpec(
            name="example-clusterpolicy-ready",
            component="gpu-operator",
            kind="resource-condition",
            api_version="nvidia.com/v1",
            resource="clusterpolicies",
            kind_name="ClusterPolicy",
            name_of_object="cluster-policy",
            jsonpath="{.status.state}",
            value="ready",
            timeout_seconds=CLUSTERPOLICY_TIMEOUT,
        )
    ]


@hookimpl
def gpucluster_policy_checks(cluster, recipe, components):
    """``EXAMPLE-DRIVER`` (error): the GPU Operator must install the driver on example-k8s."""
    gpu = components.get("gpu-operator")
    if gpu is None or get_path(gpu.values, "driver.enabled", True) is not False:
        return []
    return [
        Finding(
            id="EXAMPLE-DRIVER",
            severity="error",
            cluster=cluster.name,
            component="gpu-operator",
            key="driver.enabled",
            message="driver.enabled is false, but example-k8s nodes come without a GPU driver: "
            "GPU nodes would stay driverless and advertise no nvidia.com/gpu",
            fix="remove the gpuoperator:driver.enabled=false override",
        )
    ]

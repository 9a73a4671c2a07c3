"""Typed constructors for the NVIDIA-stack readiness gates every GPU platform declares.

A platform plugin's ``gpucluster_gates`` hook returns :class:`~gpucluster.sdk.GateSpec` objects
(docs/gates.md). The three gates below are the same on every service: only the wait budget and
the ordering (``before``/``after``) differ, so plugins build them here instead of spelling out
API group, resource, Kind and JSONPath each time::

    from gpucluster.sdk import clusterpolicy_ready, dra_kubelet_plugin_rollout

    gates = [clusterpolicy_ready()]
    if (dra := components.get("nvidia-dra-driver-gpu")) is not None:
        gates.append(dra_kubelet_plugin_rollout(dra, timeout_seconds=900))

Each function returns a plain, unvalidated GateSpec; the core validates it and fills kind
defaults (docs/gates.md). All arguments after the first are keyword-only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpucluster.model import ClusterSpec, Component, GateSpec

__all__ = [
    "GATE_CLUSTERPOLICY_READY",
    "GATE_NICCLUSTERPOLICY_READY",
    "GATE_DRA_KUBELET_PLUGIN_ROLLOUT",
    "GATE_DRA_KUBELET_PLUGIN_VERSION",
    "DRA_CHART_NAME",
    "clusterpolicy_ready",
    "nicclusterpolicy_ready",
    "dra_kubelet_plugin_name",
    "dra_kubelet_plugin_rollout",
    "gpu_nodes_expected",
    "CLUSTERPOLICY_DEFAULT_TIMEOUT",
]

GATE_CLUSTERPOLICY_READY = "gpu-operator-clusterpolicy-ready"
"""Default name of the :func:`clusterpolicy_ready` gate (also its Helm release name)."""

GATE_NICCLUSTERPOLICY_READY = "network-operator-nicclusterpolicy-ready"
"""Default name of the :func:`nicclusterpolicy_ready` gate."""

GATE_DRA_KUBELET_PLUGIN_ROLLOUT = "nvidia-dra-driver-gpu-kubelet-plugin-rollout"
"""Default name of :func:`dra_kubelet_plugin_rollout` without ``min_version``."""

GATE_DRA_KUBELET_PLUGIN_VERSION = "nvidia-dra-driver-gpu-kubelet-plugin-version"
"""Default name of :func:`dra_kubelet_plugin_rollout` with ``min_version``."""

DRA_CHART_NAME = "dra-driver-nvidia-gpu"
"""``name`` in the NVIDIA DRA driver chart's Chart.yaml (the chart behind component
``nvidia-dra-driver-gpu``); the DaemonSet name falls back to it without ``nameOverride``."""


CLUSTERPOLICY_DEFAULT_TIMEOUT = 1800
"""Seconds a ClusterPolicy gate waits unless its platform says otherwise (the default of
:func:`clusterpolicy_ready`): the budget of every built-in platform's gate and of the one the core
adds for a platform that declares none while gpu-operator is installed. 30 min: under the
operator-managed gpuStack the driver container builds and loads the driver on every GPU node
first (on NVKE for the ``-nvidia-64k`` kernel of each GB200 tray), bare-metal shapes (OKE, NVKE)
boot slowly after a driver reload, and AKS GPU nodes may still be rebooting for nodewright's host
setup."""


def gpu_nodes_expected(cluster: ClusterSpec) -> bool:
    """True when the cluster is expected to have GPU nodes, so a GPU DaemonSet must schedule >= 1 pod.

    * gpucluster creates the node pools (``cluster.pools`` non-empty): True iff a GPU pool has
      ``node_count`` >= 1 (an all-CPU cluster legitimately has no GPU node);
    * no pools (``existing:`` clusters, and platforms whose clusters always exist: NVKE, OKE):
      True. A GPU recipe is installed onto GPU nodes; the DaemonSets of the GPU components land on
      the nodes the accelerated node selector (``scheduling.accelerated.nodeSelector``) or the
      chart's own GPU-node affinity match, so zero scheduled pods means that selector matched no
      node -- wrong labels, untolerated taints -- not success (AICR#2456: desired 0, helm says
      success).

    Rollout gates use ``min_ready=1 if gpu_nodes_expected(cluster) else 0``.
    """
    if cluster.pools:
        return any(pool.gpu and pool.node_count > 0 for pool in cluster.pools)
    return True


def _list(items: Sequence[str] | None) -> list[str] | None:
    return list(items) if items is not None else None


def _state_ready(
    target: tuple[str, str, str, str | None],
    *,
    name: str,
    component: str,
    timeout_seconds: int,
    description: str,
    after: Sequence[str],
    before: Sequence[str] | None,
    supplied_by: str = "",
) -> GateSpec:
    """``resource-condition`` gate on ``{.status.state}`` = ``ready`` of ``target``
    (api_version, plural resource, Kind, object name or None for every object)."""
    api_version, resource, kind_name, name_of_object = target
    return GateSpec(
        name=name,
        component=component,
        kind="resource-condition",
        api_version=api_version,
        resource=resource,
        kind_name=kind_name,
        name_of_object=name_of_object,
        jsonpath="{.status.state}",
        value="ready",
        timeout_seconds=timeout_seconds,
        after=list(after),
        before=_list(before),
        description=description,
        supplied_by=supplied_by,
    )


def clusterpolicy_ready(
    *,
    timeout_seconds: int = CLUSTERPOLICY_DEFAULT_TIMEOUT,
    name: str = GATE_CLUSTERPOLICY_READY,
    component: str = "gpu-operator",
    description: str = "",
    after: Sequence[str] = (),
    before: Sequence[str] | None = None,
) -> GateSpec:
    """Gate: ClusterPolicy ``cluster-policy`` has ``{.status.state}`` = ``ready``.

    The gpu-operator chart creates the singleton ClusterPolicy ``cluster-policy``
    (``nvidia.com/v1``, cluster-scoped, plural ``clusterpolicies``); the operator sets
    ``status.state`` to ``ready`` once driver (or host driver), toolkit, device plugin, DCGM,
    GFD and validator are up on the GPU nodes. Source: AICR gpu-operator health check
    (ClusterPolicy singleton ready); AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md).

    Args:
        timeout_seconds: wait budget in seconds (positive; default
            :data:`CLUSTERPOLICY_DEFAULT_TIMEOUT`, what the built-in platforms use).
        name: gate name / Helm release name (DNS-1123 label, <= 53 characters).
        component: the gated component (default ``gpu-operator``).
        description: one line for logs; empty = generated by the core.
        after: extra components or gates to run after (beyond ``component``).
        before: components that wait for the gate; None = the dependents of ``component``.

    Returns:
        a ``resource-condition`` GateSpec (validated later by the core, which raises a
        GpuclusterError naming the plugin and field on a bad value).
    """
    return _state_ready(
        ("nvidia.com/v1", "clusterpolicies", "ClusterPolicy", "cluster-policy"),
        name=name,
        component=component,
        timeout_seconds=timeout_seconds,
        description=description,
        after=after,
        before=before,
    )


def nicclusterpolicy_ready(
    *,
    timeout_seconds: int,
    name: str = GATE_NICCLUSTERPOLICY_READY,
    component: str = "network-operator",
    description: str = "",
    after: Sequence[str] = (),
    before: Sequence[str] | None = None,
    supplied_by: str = "",
) -> GateSpec:
    """Gate: *every* NicClusterPolicy has ``{.status.state}`` = ``ready`` (at least one exists).

    NicClusterPolicy (``mellanox.com/v1alpha1``, cluster-scoped, plural
    ``nicclusterpolicies``) is the network-operator's CR for OFED driver container, RDMA shared
    device plugin, multus and nv-ipam; the operator sets ``status.state`` to ``ready`` when
    every state it manages is ready. No object name: the gate waits for all of them. Source:
    AICR network-operator health check; AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md) and AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup) ("SR-IOV
    InfiniBand").

    Args:
        timeout_seconds: wait budget in seconds (2400 on AKS where DOCA OFED compiles on every
            node, 900 without an OFED container).
        name, component, description, after, before: as in :func:`clusterpolicy_ready`
            (default component ``network-operator``).
        supplied_by: the platform's catalog manifest that renders a NicClusterPolicy, added when
            no release of the stack renders one (:attr:`gpucluster.model.GateSpec.supplied_by`).

    Returns:
        a ``resource-condition`` GateSpec.
    """
    return _state_ready(
        ("mellanox.com/v1alpha1", "nicclusterpolicies", "NicClusterPolicy", None),
        name=name,
        component=component,
        timeout_seconds=timeout_seconds,
        description=description,
        after=after,
        before=before,
        supplied_by=supplied_by,
    )


def dra_kubelet_plugin_name(values: Mapping[str, Any]) -> str:
    """Name of the DaemonSet the DRA driver chart renders for its kubelet plugin.

    ``<name>-kubelet-plugin`` where ``<name>`` is the chart's ``name`` helper:
    ``nameOverride`` or else the chart name ``dra-driver-nvidia-gpu``, cut to 63 characters
    and stripped of a trailing ``-``. ``fullnameOverride`` does *not* apply: the chart uses its
    fullname helper only for ServiceAccounts and RoleBindings. Source: AICR
    ``components/nvidia-dra-driver-gpu/values.yaml`` (why it pins ``nameOverride`` as well as
    ``fullnameOverride: nvidia-dra-driver-gpu``). Every built-in catalog pins ``nameOverride:
    nvidia-dra-driver-gpu``, so the DaemonSet is ``nvidia-dra-driver-gpu-kubelet-plugin``.

    Args:
        values: the component's effective Helm values.
    """
    name = values.get("nameOverride") or DRA_CHART_NAME
    return f"{str(name)[:63].rstrip('-')}-kubelet-plugin"


def dra_kubelet_plugin_rollout(
    component: Component,
    *,
    timeout_seconds: int,
    min_ready: int = 1,
    min_version: str | None = None,
    container: str = "compute-domains",
    name: str | None = None,
    description: str = "",
    after: Sequence[str] = (),
    before: Sequence[str] | None = None,
) -> GateSpec:
    """Gate: the DRA driver's kubelet-plugin DaemonSet rolled out (optionally at a minimum version).

    The DaemonSet is :func:`dra_kubelet_plugin_name` of ``component.values`` in the component's
    namespace. Source: AICR nvidia-dra-driver-gpu health check (kubelet plugin DaemonSet ready);
    AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup) (compute-domains >= 0.5.1 before ComputeDomain workloads).

    Args:
        component: the ``nvidia-dra-driver-gpu`` Component (its name, namespace and values are
            used).
        timeout_seconds: wait budget in seconds (900 / 600 in the built-in plugins).
        min_ready: minimum desired pods (default 1; 0 accepts a cluster with no GPU node).
        min_version: None = kind ``rollout``; a version like ``0.5.1`` = kind ``min-version``
            (the image tag of ``container`` must be at least this).
        container: container checked by ``min_version`` (default ``compute-domains``).
        name: gate name; None = ``nvidia-dra-driver-gpu-kubelet-plugin-rollout`` or, with
            ``min_version``, ``…-version``.
        description, after, before: as in :func:`clusterpolicy_ready`.

    Returns:
        a ``rollout`` or ``min-version`` GateSpec on ``apps/v1`` ``daemonsets``.
    """
    versioned = min_version is not None
    return GateSpec(
        name=name
        or (GATE_DRA_KUBELET_PLUGIN_VERSION if versioned else GATE_DRA_KUBELET_PLUGIN_ROLLOUT),
        component=component.name,
        kind="min-version" if versioned else "rollout",
        api_version="apps/v1",
        resource="daemonsets",
        kind_name="DaemonSet",
        name_of_object=dra_kubelet_plugin_name(component.values),
        namespace=component.ref.namespace,
        container=container if versioned else "",
        value=min_version if min_version is not None else "",
        min_ready=min_ready,
        timeout_seconds=timeout_seconds,
        after=list(after),
        before=_list(before),
        description=description,
    )

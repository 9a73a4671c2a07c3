"""gpucluster plugin SDK: the one import path for third-party platform plugins.

Usage::

    from gpucluster.sdk import hookimpl, Platform, GateSpec, Finding, Manifest

    @hookimpl
    def gpucluster_platforms():
        return [Platform(service="myk8s", display_name="My Kubernetes", accelerators=("h100",))]

See ``docs/plugins.md`` for one section per hook.
"""

from __future__ import annotations

import pluggy

from gpucluster.errors import GpuclusterError, Problem
from gpucluster.model import ExistingCluster, LocalChart, NodeScheduling, Override, PlanNode
from gpucluster.sdk.types import (
    ClusterConnection,
    ClusterSpec,
    Component,
    ComponentRef,
    Criteria,
    Finding,
    GateSpec,
    Manifest,
    NodePool,
    Platform,
    Recipe,
    RuntimePlan,
    Taint,
    Toleration,
)

hookimpl = pluggy.HookimplMarker("gpucluster")
"""Marker for hook implementations (``@hookimpl``, ``@hookimpl(tryfirst=True)``)."""

__all__ = [
    "hookimpl",
    "ClusterConnection",
    "ClusterSpec",
    "Component",
    "ComponentRef",
    "Criteria",
    "ExistingCluster",
    "Finding",
    "GateSpec",
    "GpuclusterError",
    "LocalChart",
    "Manifest",
    "NodePool",
    "NodeScheduling",
    "Override",
    "PlanNode",
    "Platform",
    "Problem",
    "Recipe",
    "RuntimePlan",
    "Taint",
    "Toleration",
]

"""gpucluster plugin SDK: the one import path for third-party platform plugins.

Usage::

    from gpucluster.sdk import hookimpl, Platform, GateSpec, Finding, Manifest

    @hookimpl
    def gpucluster_platforms():
        return [Platform(service="myk8s", display_name="My Kubernetes", accelerators=("h100",))]

See ``docs/plugins.md`` for one section per hook. Everything a plugin needs is importable from
here; a plugin should import nothing else from ``gpucluster`` (internal modules may change),
and its tests :mod:`gpucluster.sdk.testing` besides.

Direction: this package re-exports the core and the core imports nothing from it. The types
live in :mod:`gpucluster.model` (the one home of plain data); the hook specifications and the
NVIDIA gate constructors live in :mod:`gpucluster.hookspecs` and :mod:`gpucluster.charts.gate_helpers`,
re-exported here as ``gpucluster.sdk.hookspecs`` and ``gpucluster.sdk.gates``
(``tests/test_core_imports.py``).

Exports:

* marker: :data:`hookimpl` (``@hookimpl``, ``@hookimpl(tryfirst=True)``, ``@hookimpl(trylast=True)``);
* what plugins return: :class:`Platform`, :class:`GateSpec`, :class:`Finding`,
  :class:`Manifest`, :class:`ClusterConnection`;
* what hooks receive: :class:`ClusterSpec` (with :class:`Criteria`, :class:`NodePool`,
  :class:`Taint`, :class:`Toleration`, :class:`NodeScheduling`, :class:`ExistingCluster`,
  :class:`Override`), :class:`Recipe` (with :class:`ComponentRef`, :class:`Constraint`),
  :class:`Component`; for tests: :class:`RuntimePlan`, :class:`PlanNode`, :class:`LocalChart`;
* data files: :func:`load_data_file` (a plugin's own YAML, parsed and cached as catalog files are);
* errors: :class:`GpuclusterError`, :class:`Problem`, :func:`allowed_list` (a key is relative to the
  cluster document, ``pools[1].gpu``; the core prints it absolute, ``clusters[3].pools[1].gpu``);
* typed reading of YAML input (a plugin's ``settings``), with the core's one-line errors:
  :class:`Where` (file, cluster, error id; ``check_str``/``check_int``/... of one value) and
  :class:`Fields` (one mapping: ``get_str``/``require_str``/``get_int``/``get_bool``/
  ``get_list``/``get_choice``/``get_fields``/``check_keys``), :func:`type_name`
  (:mod:`gpucluster.fields`);
* Helm-values helpers with the pipeline's semantics: :func:`get_path`, :func:`has_path`,
  :func:`deep_merge` (objects merge, lists/scalars replace, ``None`` deletes);
* NVIDIA-stack gate constructors (``gpucluster.sdk.gates``): :func:`clusterpolicy_ready`,
  :func:`nicclusterpolicy_ready`, :func:`dra_kubelet_plugin_rollout`,
  :func:`dra_kubelet_plugin_name`, and :func:`gpu_nodes_expected` (``min_ready`` of rollout gates);
* constants: :data:`API_VERSION` (this API's semantic version), :data:`ANY` (the criteria
  wildcard ``"any"``), :data:`ENTRY_POINT_GROUP`
  (``"gpucluster"``), :data:`CORE_SETTING_KEYS` (``settings`` keys the core reads and
  accepts on every platform, besides the platform's own ``Platform.settings``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pluggy

from gpucluster import SDK_API_VERSION
from gpucluster.charts.gate_helpers import (
    clusterpolicy_ready,
    dra_kubelet_plugin_name,
    dra_kubelet_plugin_rollout,
    gpu_nodes_expected,
    nicclusterpolicy_ready,
)
from gpucluster.charts.jobchart import DEFAULT_KUBECTL_IMAGE, MOVING_TAGS, image_tag
from gpucluster.errors import GpuclusterError, Problem, allowed_list
from gpucluster.fields import Fields, Where, type_name
from gpucluster.model import (
    ANY,
    CORE_SETTING_KEYS,
    ClusterConnection,
    ClusterSpec,
    Component,
    ComponentRef,
    Constraint,
    Criteria,
    ExecAuth,
    ExistingCluster,
    Finding,
    GateSpec,
    LocalChart,
    Manifest,
    NodePool,
    NodeScheduling,
    Override,
    PlanNode,
    Platform,
    Recipe,
    RuntimePlan,
    Taint,
    Toleration,
)
from gpucluster.values import deep_merge, get_path, has_path


def load_data_file(path: Path) -> Any:
    """A YAML data file the plugin ships (``Path(__file__).parent / "sizes.yaml"``), parsed like
    the catalog's files: ``yaml.safe_load`` of the text, by libyaml, kept in gpucluster's per-user
    cache keyed by the text (a warm ``gpucluster plan`` neither parses it again nor imports PyYAML).
    See :func:`gpucluster.recipes.catalog.load_data_file`."""
    from gpucluster.recipes.catalog import load_data_file as core_load

    return core_load(path)


def check_existing(
    existing: ExistingCluster,
    *,
    file: str | None = None,
    cluster: str | None = None,
    key: str = "existing",
) -> None:
    """The core's check of an ``existing: {kubeconfig, context}`` (every platform; see
    :func:`gpucluster.inputs.config.check_existing`). Platforms that default ``existing`` may re-check it."""
    from gpucluster.inputs.config import check_existing as core_check

    core_check(existing, file=file, cluster=cluster, key=key)


ENTRY_POINT_GROUP = "gpucluster"
"""Entry-point group plugins register under (``[project.entry-points.gpucluster]``)."""

API_VERSION = SDK_API_VERSION
"""This SDK's API version, ``"MAJOR.MINOR.PATCH"`` (semantic versioning; docs/plugins.md,
"Compatibility"). A plugin that needs a feature added in a minor release can check
``tuple(map(int, API_VERSION.split(".")[:2])) >= (1, 1)``."""


hookimpl = pluggy.HookimplMarker("gpucluster")
"""Marker for hook implementations (``@hookimpl``, ``@hookimpl(tryfirst=True)``)."""

__all__ = [
    "hookimpl",
    "ANY",
    "API_VERSION",
    "CORE_SETTING_KEYS",
    "DEFAULT_KUBECTL_IMAGE",
    "MOVING_TAGS",
    "ENTRY_POINT_GROUP",
    "ClusterConnection",
    "ExecAuth",
    "ClusterSpec",
    "Component",
    "ComponentRef",
    "Constraint",
    "Criteria",
    "ExistingCluster",
    "Fields",
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
    "Where",
    "allowed_list",
    "check_existing",
    "clusterpolicy_ready",
    "deep_merge",
    "dra_kubelet_plugin_name",
    "dra_kubelet_plugin_rollout",
    "get_path",
    "gpu_nodes_expected",
    "has_path",
    "image_tag",
    "load_data_file",
    "nicclusterpolicy_ready",
    "type_name",
]

"""NVKE plugin: ``gpucluster_adjust_values`` (settings into component values)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucluster.sdk import hookimpl
from gpucluster_nvke.settings import NvkeSettings, parse_settings

INERT_RDMA_DEFAULT = {"enabled": False}
"""``driver.rdma`` as the core GPU Operator values carry it. On NVKE the recipe sets no
``driver.rdma`` value at all (no ``nvidia-peermem``: GPUDirect RDMA runs over DMA-BUF), so this
inert default is dropped; any other ``driver.rdma`` is user intent and refused by policy."""


def adjust(
    component_name: str, values: Mapping[str, Any], settings: NvkeSettings
) -> dict[str, Any] | None:
    """The values patch for one NVKE component (deep-merged; ``None`` deletes a key).

    * ``gpu-operator``: drops the catalog's inert ``driver.rdma: {enabled: false}``.
    * ``rdma-modules``: ``autoTaintNewNodes`` from ``settings.rdmaModules.autoTaintNewNodes``
      (when given; an ``rdmamodules:autoTaintNewNodes`` override works as well), and the
      accelerated node selector/tolerations from ``settings.rdmaModules`` (where
      ``gpucluster_prepare_cluster`` moved the cluster's accelerated scheduling inputs).
    """
    if component_name == "gpu-operator":
        driver = values.get("driver")
        if isinstance(driver, Mapping) and driver.get("rdma") == INERT_RDMA_DEFAULT:
            return {"driver": {"rdma": None}}
        return None
    if component_name == "rdma-modules":
        patch: dict[str, Any] = {}
        if settings.rdma_modules_auto_taint is not None:
            patch["autoTaintNewNodes"] = settings.rdma_modules_auto_taint
        if settings.rdma_modules_node_selector:
            patch["acceleratedNodeSelector"] = dict(settings.rdma_modules_node_selector)
        if settings.rdma_modules_tolerations:
            patch["acceleratedTolerations"] = [dict(t) for t in settings.rdma_modules_tolerations]
        return patch or None
    return None


@hookimpl
def gpucluster_adjust_values(cluster, recipe, component):
    settings = parse_settings(cluster.settings, file=cluster.source, cluster=cluster.name)
    return adjust(component.name, component.values, settings)

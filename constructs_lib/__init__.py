"""Reusable CDK for Terraform constructs for GPU clusters (AWS CDK / cdk8s-plus style).

Every construct is ``Construct(scope, id, props)`` with a typed, frozen props dataclass,
sensible defaults and validation through ``node.add_validation`` (problems surface at synth,
prefixed with the construct path). The framework itself is imported only by
:mod:`constructs_lib.cdk`.

* :class:`AksGpuCluster` (:mod:`constructs_lib.aks`) -- AKS cluster with unmanaged GPU pools.
* :class:`HelmComponent`, :class:`LocalChartRelease` (:mod:`constructs_lib.helm`) -- Helm releases.
"""

from constructs_lib.aks import (
    AksGpuCluster,
    AksGpuClusterProps,
    NodePoolProps,
    ensure_azurerm_provider,
    gpu_pool,
    system_pool,
)
from constructs_lib.helm import (
    HelmComponent,
    HelmComponentProps,
    LocalChartRelease,
    LocalChartReleaseProps,
    ReleaseOptions,
    chart_source,
    values_document,
)

__all__ = [
    "AksGpuCluster",
    "AksGpuClusterProps",
    "NodePoolProps",
    "ensure_azurerm_provider",
    "gpu_pool",
    "system_pool",
    "HelmComponent",
    "HelmComponentProps",
    "LocalChartRelease",
    "LocalChartReleaseProps",
    "ReleaseOptions",
    "chart_source",
    "values_document",
]

"""Reusable CDK for Terraform constructs for GPU clusters (AWS CDK / cdk8s-plus style).

Every construct is ``Construct(scope, id, props)`` with a typed, frozen props dataclass,
sensible defaults and validation through ``node.add_validation`` (problems surface at synth,
prefixed with the construct path). The framework itself is imported only by
:mod:`gpucluster_cdk.constructs_lib.cdk`.

* :class:`AksGpuCluster` (:mod:`gpucluster_cdk.constructs_lib.aks`) -- AKS cluster rendered from its props;
  :class:`AksNodePool` -- one of its user node pools.
* :class:`HelmComponent`, :class:`LocalChartRelease` (:mod:`gpucluster_cdk.constructs_lib.helm`) -- Helm releases.
"""

from gpucluster_cdk.constructs_lib.aks import (
    AksGpuCluster,
    AksGpuClusterProps,
    AksNodePool,
    NodePoolProps,
    ensure_azurerm_provider,
    validate_props,
)
from gpucluster_cdk.constructs_lib.helm import (
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
    "AksNodePool",
    "NodePoolProps",
    "ensure_azurerm_provider",
    "validate_props",
    "HelmComponent",
    "HelmComponentProps",
    "LocalChartRelease",
    "LocalChartReleaseProps",
    "ReleaseOptions",
    "chart_source",
    "values_document",
]

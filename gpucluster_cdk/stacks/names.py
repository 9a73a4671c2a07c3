"""Stack names of a cluster (no cdktf import, so the synthesis path can name stacks before it builds any)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucluster.plugins import platform_for

if TYPE_CHECKING:
    from gpucluster.model import RuntimePlan


def cluster_stack_name(cluster: str) -> str:
    """``<name>-cluster``: cloud resources of the cluster (one Terraform workspace)."""
    return f"{cluster}-cluster"


def runtime_stack_name(cluster: str) -> str:
    """``<name>-runtime``: Helm releases of the GPU software stack (one Terraform workspace)."""
    return f"{cluster}-runtime"


def provisions_cluster(plan: RuntimePlan) -> bool:
    """True when gpucluster creates the cluster (platform ``provisions_cluster`` and no ``existing``)."""
    platform = platform_for(plan.cluster.criteria.service, file=plan.cluster.source)
    return bool(platform.provisions_cluster) and plan.cluster.existing is None


def stack_names(plan: RuntimePlan) -> list[str]:
    """The stacks of one cluster, in App order: ``<name>-cluster`` (if provisioned), ``<name>-runtime``."""
    name = plan.cluster.name
    return ([cluster_stack_name(name)] if provisions_cluster(plan) else []) + [
        runtime_stack_name(name)
    ]

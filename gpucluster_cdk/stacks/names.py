"""Stack names of a cluster (no cdktf import, so the synthesis path can name stacks before it builds any)."""

from __future__ import annotations


def cluster_stack_name(cluster: str) -> str:
    """``<name>-cluster``: cloud resources of the cluster (one Terraform workspace)."""
    return f"{cluster}-cluster"


def runtime_stack_name(cluster: str) -> str:
    """``<name>-runtime``: Helm releases of the GPU software stack (one Terraform workspace)."""
    return f"{cluster}-runtime"

"""Stacks: per cluster ``<name>-cluster`` (platform plugin) and ``<name>-runtime`` (Helm releases).

Importing this package imports cdktf (through :mod:`gpucluster_cdk.constructs_lib.cdk`), not the azurerm
binding; that is loaded when a cluster stack is built.
"""

from gpucluster_cdk.stacks.app import build_app, provisions_cluster, synth
from gpucluster_cdk.stacks.common import cluster_stack_name, runtime_stack_name

__all__ = ["build_app", "provisions_cluster", "synth", "cluster_stack_name", "runtime_stack_name"]

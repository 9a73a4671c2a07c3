"""Stacks: per cluster ``<name>-cluster`` (platform plugin) and ``<name>-runtime`` (Helm releases).

:func:`synth` (:mod:`gpucluster_cdk.stacks.synthesis`) is the one synthesis path; importing this
package does not import cdktf: that happens when a stack is built (:func:`build_app`,
:mod:`gpucluster_cdk.stacks.app`, loaded on first use), and the azurerm binding when a cluster
stack is.
"""

from gpucluster_cdk.stacks.injection import check_no_injection
from gpucluster_cdk.stacks.names import cluster_stack_name, provisions_cluster, runtime_stack_name
from gpucluster_cdk.stacks.synthesis import synth

__all__ = [
    "build_app",
    "provisions_cluster",
    "synth",
    "check_no_injection",
    "cluster_stack_name",
    "runtime_stack_name",
]


def __getattr__(name: str):
    if name == "build_app":
        from gpucluster_cdk.stacks.app import build_app

        return build_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

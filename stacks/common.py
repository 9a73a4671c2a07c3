"""Conventions shared by the stacks: names and backends."""

from __future__ import annotations

from constructs_lib.cdk import LocalBackend, TerraformStack

STATE_DIR_FROM_STACK = "../../.."
"""Local state lives next to the output folder: ``<outdir>/stacks/<stack>/`` -> ``<outdir>/..``.

Relative, so the same input gives byte-identical JSON in any folder, and outside ``cdktf.out``
(which every synth replaces)."""


def cluster_stack_name(cluster: str) -> str:
    """``<name>-cluster``: cloud resources of the cluster (one Terraform workspace)."""
    return f"{cluster}-cluster"


def runtime_stack_name(cluster: str) -> str:
    """``<name>-runtime``: Helm releases of the GPU software stack (one Terraform workspace)."""
    return f"{cluster}-runtime"


def local_state_path(stack_name: str) -> str:
    """Relative path of the local state file of ``stack_name`` (``terraform.<stack>.tfstate``)."""
    return f"{STATE_DIR_FROM_STACK}/terraform.{stack_name}.tfstate"


def use_local_backend(stack: TerraformStack) -> LocalBackend:
    """Configure the explicit local backend of ``stack`` (see :data:`STATE_DIR_FROM_STACK`)."""
    return LocalBackend(stack, path=local_state_path(stack.node.id))

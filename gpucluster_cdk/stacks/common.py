"""Conventions shared by the stacks: names and backends."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import Any

from gpucluster.errors import GpuclusterError
from gpucluster.inputs.backends import state_key, workspace_name
from gpucluster.model import ClusterSpec
from gpucluster_cdk.constructs_lib.cdk import (
    AzurermBackend,
    CloudBackend,
    LocalBackend,
    NamedCloudWorkspace,
    TerraformStack,
)
from gpucluster_cdk.stacks.names import cluster_stack_name, runtime_stack_name  # noqa: F401 (re-exported)

STATE_DIR_FROM_STACK = "../../.."
"""Local state lives next to the output folder: ``<outdir>/stacks/<stack>/`` -> ``<outdir>/..``.

Relative, so the same input gives byte-identical JSON in any folder, and outside ``cdktf.out``
(which every synth replaces)."""


def local_state_path(stack_name: str) -> str:
    """Relative path of the local state file of ``stack_name`` (``terraform.<stack>.tfstate``)."""
    return f"{STATE_DIR_FROM_STACK}/terraform.{stack_name}.tfstate"


def use_local_backend(stack: TerraformStack) -> LocalBackend:
    """Configure the explicit local backend of ``stack`` (see :data:`STATE_DIR_FROM_STACK`)."""
    return LocalBackend(stack, path=local_state_path(stack.node.id))


def terraform_binary() -> str:
    """The Terraform CLI cdktf runs: ``TERRAFORM_BINARY_NAME`` or ``terraform`` (cdktf's rule)."""
    return os.environ.get("TERRAFORM_BINARY_NAME") or "terraform"


def use_cloud_backend(stack: TerraformStack, backend: Mapping[str, Any]) -> CloudBackend:
    """Configure a Terraform ``cloud`` block with the stack's own named workspace.

    ``backend`` is the normalized mapping of :func:`gpucluster.inputs.backends.parse_backend`; the
    workspace is ``<workspacePrefix><stack name>`` in ``organization`` on ``hostname``
    (optionally in ``project``). No token is set: Terraform reads it from ``terraform login``
    or ``TF_TOKEN_<hostname>``. A stack that reads this stack's outputs (cross-stack
    reference) gets a ``terraform_remote_state`` data source with backend ``remote`` and the
    same organization, hostname and workspace name (cdktf 0.21 ``CloudBackend``).
    """
    return CloudBackend(
        stack,
        organization=backend["organization"],
        hostname=backend["hostname"],
        workspaces=NamedCloudWorkspace(
            workspace_name(backend, stack.node.id), backend.get("project")
        ),
    )


def use_azurerm_backend(stack: TerraformStack, backend: Mapping[str, Any]) -> AzurermBackend:
    """Configure Terraform's ``azurerm`` backend with the stack's own state blob.

    ``backend`` is the normalized mapping of :func:`gpucluster.inputs.backends.parse_backend`; the blob
    is :func:`gpucluster.inputs.backends.state_key` (``<keyPrefix><stack name>.tfstate``) in
    ``containerName`` of ``storageAccountName``. ``use_azuread_auth`` is always written (true
    unless the cluster file says ``useAzureadAuth: false``); ``resource_group_name``,
    ``subscription_id``, ``tenant_id`` and ``use_oidc`` only when the cluster file sets them.
    No access key, SAS token or client secret is ever written: Terraform reads them from
    ``ARM_*`` environment variables, ``az login``, a managed identity or OIDC (Terraform
    documentation "Backend Type: azurerm",
    https://developer.hashicorp.com/terraform/language/backend/azurerm). A stack that reads this
    stack's outputs (cross-stack reference) gets a ``terraform_remote_state`` data source with
    backend ``azurerm`` and the same settings (cdktf's ``DataTerraformRemoteStateAzurerm``).
    """
    optional = {
        "resource_group_name": backend.get("resourceGroupName"),
        "subscription_id": backend.get("subscriptionId"),
        "tenant_id": backend.get("tenantId"),
        "use_oidc": backend.get("useOidc"),
    }
    return AzurermBackend(
        stack,
        storage_account_name=backend["storageAccountName"],
        container_name=backend["containerName"],
        key=state_key(backend, stack.node.id),
        use_azuread_auth=backend["useAzureadAuth"],
        **{name: value for name, value in optional.items() if value is not None},
    )


REQUIRED_TERRAFORM = ">= 1.4"
"""``terraform.required_version`` of every stack: lifecycle postconditions (AKS upgrade check) need
Terraform 1.2, the ``cloud`` block 1.1, ``terraform_data`` (gates, fleet barriers) 1.4."""


def require_terraform(stack: TerraformStack) -> None:
    """Set ``terraform.required_version`` (:data:`REQUIRED_TERRAFORM`) on ``stack``."""
    stack.add_override("terraform.required_version", REQUIRED_TERRAFORM)


def use_backend(
    stack: TerraformStack, cluster: ClusterSpec
) -> LocalBackend | CloudBackend | AzurermBackend:
    """Configure the backend the cluster file chose for ``cluster`` (``ClusterSpec.backend``).

    Every stack also gets ``terraform.required_version`` (:func:`require_terraform`).
    ``None`` (default, ``type: local``): :func:`use_local_backend`.
    ``type: cloud``: :func:`use_cloud_backend`.
    ``type: azurerm``: :func:`use_azurerm_backend` (no Terraform CLI needed to synthesize).

    Raises:
        GpuclusterError: ``type: cloud`` but the Terraform CLI is not on ``PATH``. cdktf's
            ``CloudBackend`` checks ``terraform version`` (>= 1.1) while synthesizing and would
            otherwise fail with a bare validation error. The key is where the backend was set
            (``ClusterSpec.backend_key``): ``backend.type`` or ``clusters[<i>].backend.type``.
    """
    require_terraform(stack)
    backend = cluster.backend
    if backend is None:
        return use_local_backend(stack)
    if backend.get("type") == "azurerm":
        return use_azurerm_backend(stack, backend)
    if shutil.which(terraform_binary()) is None:
        raise GpuclusterError(
            f"backend type 'cloud' needs the Terraform CLI (>= 1.1) while synthesizing, and '{terraform_binary()}' "
            "is not on PATH (cdktf checks `terraform version` for the cloud block)",
            file=cluster.source,
            cluster=cluster.name,
            key=f"{cluster.backend_key or 'backend'}.type",
            fix="install Terraform >= 1.1 (or set TERRAFORM_BINARY_NAME), or use backend type 'local'",
        )
    return use_cloud_backend(stack, backend)

"""The ONE module that imports cdktf, constructs, jsii and the prebuilt provider bindings.

Everything else in ``constructs_lib``, ``stacks`` and ``main.py`` imports the framework from
here, so moving to another CDK for Terraform distribution (e.g. CDK Terrain, ``cdktn``) is a
change of this module only.

Provider bindings are loaded lazily and once per process:

* :func:`helm` -- ``cdktf-cdktf-provider-helm`` 12.x (``hashicorp/helm`` 3.1.1), ~0.1 s.
* :func:`azurerm` -- ``cdktf-cdktf-provider-azurerm`` 14.x (``hashicorp/azurerm`` 4.55.0).
  Importing it loads a ~30 MB jsii assembly into the Node.js kernel process: several seconds
  and ~0.5 GB, so only stacks that create Azure resources pay for it.

Set ``JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20`` when running on Node 20 (done here
with ``setdefault`` before jsii starts, and in the Makefile).
"""

from __future__ import annotations

import functools
import os
from types import SimpleNamespace
from typing import Callable, Sequence

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CHECKPOINT_DISABLE", "1")

import jsii  # noqa: E402
from cdktf import (  # noqa: E402,F401  (re-exported)
    App,
    AssetType,
    CloudBackend,
    DataResource,
    Fn,
    LocalBackend,
    NamedCloudWorkspace,
    Op,
    Postcondition,
    Precondition,
    TerraformAsset,
    TerraformOutput,
    TerraformProvider,
    TerraformProviderGeneratorMetadata,
    TerraformResource,
    TerraformResourceLifecycle,
    TerraformStack,
    TerraformVariable,
    TerraformVariableValidationConfig,
    Testing,
    Token,
)
from constructs import Construct, IValidation, Node  # noqa: E402,F401  (re-exported)

FRAMEWORK = "cdktf"
"""Name of the CDK for Terraform distribution this module binds to."""

AZURERM_PROVIDER_VERSION = "4.55.0"
"""``hashicorp/azurerm`` version the installed binding (cdktf-cdktf-provider-azurerm 14.23.1) pins in
``required_providers``. Each binding release pins another provider version, so pyproject.toml
pins the binding exactly and a test compares the synthesized JSON with this value."""

HELM_PROVIDER_VERSION = "3.1.1"
"""``hashicorp/helm`` version the installed binding (cdktf-cdktf-provider-helm 12.1.2) pins."""


@jsii.implements(IValidation)
class _Validation:
    """jsii adapter: a Python callable returning a list of error strings."""

    def __init__(self, check: Callable[[], Sequence[str]]):
        self._check = check

    def validate(self) -> list[str]:
        return [str(msg) for msg in self._check()]


def add_validation(scope: Construct, check: Callable[[], Sequence[str]]) -> None:
    """Register ``check`` on ``scope.node``; cdktf runs it at synth time.

    Each returned string becomes an error prefixed with the construct path
    (``[stack/construct] message``) and synthesis fails (also under the cdktf CLI, which
    only continues on error *annotations*, not on validation errors).
    """
    scope.node.add_validation(_Validation(check))


_VALIDATION_FAILED = "Validation failed with the following errors:"


def validation_errors(err: BaseException) -> list[str] | None:
    """The messages of a construct validation failure raised by ``App.synth()``, else None.

    cdktf (through jsii) raises a plain ``RuntimeError`` whose text holds one
    ``[<construct path>] <message>`` line per failed validation (see :func:`add_validation`).
    Returns those lines in order, or None when ``err`` is some other error.
    """
    text = str(err)
    if not isinstance(err, RuntimeError) or _VALIDATION_FAILED not in text:
        return None
    body = text.split(_VALIDATION_FAILED, 1)[1]
    return [line.strip() for line in body.splitlines() if line.strip().startswith("[")]


@functools.cache
def helm() -> SimpleNamespace:
    """The Helm provider binding (``hashicorp/helm`` 3.1.1): HelmProvider, Release, ReleaseSet."""
    from cdktf_cdktf_provider_helm.provider import HelmProvider, HelmProviderKubernetes
    from cdktf_cdktf_provider_helm.release import Release, ReleaseSet

    return SimpleNamespace(
        HelmProvider=HelmProvider,
        HelmProviderKubernetes=HelmProviderKubernetes,
        Release=Release,
        ReleaseSet=ReleaseSet,
        PROVIDER_SOURCE="hashicorp/helm",
    )


@functools.cache
def azurerm() -> SimpleNamespace:
    """The azurerm provider binding (``hashicorp/azurerm`` 4.55.0), imported once per process."""
    from cdktf_cdktf_provider_azurerm.kubernetes_cluster import (
        KubernetesCluster,
        KubernetesClusterDefaultNodePool,
        KubernetesClusterIdentity,
    )
    from cdktf_cdktf_provider_azurerm.kubernetes_cluster_node_pool import KubernetesClusterNodePool
    from cdktf_cdktf_provider_azurerm.provider import AzurermProvider, AzurermProviderFeatures
    from cdktf_cdktf_provider_azurerm.resource_group import ResourceGroup

    return SimpleNamespace(
        AzurermProvider=AzurermProvider,
        AzurermProviderFeatures=AzurermProviderFeatures,
        ResourceGroup=ResourceGroup,
        KubernetesCluster=KubernetesCluster,
        KubernetesClusterDefaultNodePool=KubernetesClusterDefaultNodePool,
        KubernetesClusterIdentity=KubernetesClusterIdentity,
        KubernetesClusterNodePool=KubernetesClusterNodePool,
        PROVIDER_SOURCE="hashicorp/azurerm",
    )


def azurerm_loaded() -> bool:
    """True once :func:`azurerm` has imported the binding in this process."""
    return azurerm.cache_info().currsize > 0


@functools.cache
def azurerm_fleet() -> SimpleNamespace:
    """The Azure Kubernetes Fleet Manager resources of the azurerm binding (4.55.0), imported once.

    azurerm 4.55 has ``kubernetes_fleet_manager``, ``_member``, ``_update_strategy`` and
    ``_update_run``; it has no auto-upgrade profile resource (see :data:`AZAPI_PROVIDER`).
    """
    from cdktf_cdktf_provider_azurerm.kubernetes_fleet_manager import KubernetesFleetManager, KubernetesFleetManagerHubProfile
    from cdktf_cdktf_provider_azurerm.kubernetes_fleet_member import KubernetesFleetMember
    from cdktf_cdktf_provider_azurerm.kubernetes_fleet_update_run import KubernetesFleetUpdateRun, KubernetesFleetUpdateRunManagedClusterUpdate, KubernetesFleetUpdateRunManagedClusterUpdateNodeImageSelection, KubernetesFleetUpdateRunManagedClusterUpdateUpgrade
    from cdktf_cdktf_provider_azurerm.kubernetes_fleet_update_strategy import KubernetesFleetUpdateStrategy, KubernetesFleetUpdateStrategyStage, KubernetesFleetUpdateStrategyStageGroup

    return SimpleNamespace(
        KubernetesFleetManager=KubernetesFleetManager,
        KubernetesFleetManagerHubProfile=KubernetesFleetManagerHubProfile,
        KubernetesFleetMember=KubernetesFleetMember,
        KubernetesFleetUpdateRun=KubernetesFleetUpdateRun,
        KubernetesFleetUpdateRunManagedClusterUpdate=KubernetesFleetUpdateRunManagedClusterUpdate,
        KubernetesFleetUpdateRunManagedClusterUpdateNodeImageSelection=KubernetesFleetUpdateRunManagedClusterUpdateNodeImageSelection,
        KubernetesFleetUpdateRunManagedClusterUpdateUpgrade=KubernetesFleetUpdateRunManagedClusterUpdateUpgrade,
        KubernetesFleetUpdateStrategy=KubernetesFleetUpdateStrategy,
        KubernetesFleetUpdateStrategyStage=KubernetesFleetUpdateStrategyStage,
        KubernetesFleetUpdateStrategyStageGroup=KubernetesFleetUpdateStrategyStageGroup,
    )


AZAPI_PROVIDER = SimpleNamespace(source="Azure/azapi", name="azapi", version_constraint="~> 2.0")
"""The ``Azure/azapi`` provider (no prebuilt cdktf binding is installed): resources azurerm 4.55
lacks are written as raw ``azapi_resource`` blocks (:class:`TerraformResource` plus overrides)."""

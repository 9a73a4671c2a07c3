"""AksGpuCluster: an AKS cluster with unmanaged H100 GPU node pools (``hashicorp/azurerm`` 4.x).

Facts (seed ``aks-gpu-setup``, azurerm 4.55.0 ``kubernetes_cluster_node_pool`` docs):

* Kubernetes 1.34 or later (DRA ``resource.k8s.io/v1`` is GA from 1.34, no feature gate).
* OIDC issuer, workload identity and a SystemAssigned managed identity
  (``az aks create --enable-oidc-issuer --enable-workload-identity --enable-managed-identity``).
* GPU ownership comes in two mutually exclusive profiles; the pool flag and the GPU Operator
  values must come from the same one:

  ============================  ===========================  ==================================
  gpuStack profile              node pool ``gpu_driver``      GPU Operator
  ============================  ===========================  ==================================
  ``azure-managed`` (default)   ``Install`` (AKS default)     driver/toolkit disabled
  ``operator-managed``          ``None`` (``--gpu-driver``)   driver/toolkit enabled
  ============================  ===========================  ==================================

  azurerm's ``gpu_driver`` accepts ``Install`` and ``None`` and forces a new pool on change.
* AKS-managed GPU pools (``gpuProfile.nvidia.managementMode: Managed``) install their own
  device plugin and DCGM exporter, which conflict with the GPU Operator: always refused.
* AKS upgrades cannot skip a Kubernetes minor version (1.32 -> 1.33 -> 1.34). The cluster gets a
  lifecycle ``postcondition`` comparing the live ``current_kubernetes_version`` (refreshed from
  Azure during plan) with the configured minor; see ``docs/synth.md`` for when it fires.

Usage::

    cluster = AksGpuCluster(stack, "aks", AksGpuClusterProps(name="h100", location="eastus"))
    connection = cluster.connection()   # tokens for the runtime stack's Helm provider
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

from constructs_lib.cdk import (
    Construct,
    Fn,
    Postcondition,
    TerraformOutput,
    TerraformResourceLifecycle,
    TerraformStack,
    add_validation,
    azurerm,
)
from constructs_lib.tfstring import literal, literal_tree
from gpucluster.sdk.types import ClusterConnection

GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"
"""Taint of every GPU pool without its own ``nvidia.com/gpu`` taint; GPU workloads and operands
tolerate ``nvidia.com/gpu`` (seed)."""

CRITICAL_ADDONS_TAINT = "CriticalAddonsOnly=true:NoSchedule"
"""The only taint azurerm 4.x can put on the default (system) pool: ``only_critical_addons_enabled``
(azurerm 4.0 removed ``default_node_pool.node_taints``)."""

DEFAULT_GPU_VM_SIZE = "Standard_ND96isr_H100_v5"
"""8x H100 with the InfiniBand fabric the AKS NCCL and inference gates are calibrated on (seed)."""

DEFAULT_SYSTEM_VM_SIZE = "Standard_D8s_v5"
MIN_KUBERNETES_MINOR = 34
"""Kubernetes 1.34: DRA GA (seed aks-gpu-setup)."""

GPU_STACK_DRIVER = {"azure-managed": "Install", "operator-managed": "None"}
"""gpuStack profile -> azurerm ``gpu_driver`` of GPU pools."""

_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
_K8S_VERSION = re.compile(r"^1\.(\d+)(\.\d+)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_VM_SIZE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,79}$")
"""Azure VM size names (``Standard_ND96isr_H100_v5``): letters, digits, ``_`` and ``-``."""
_TAINT = re.compile(r"^[A-Za-z0-9./_-]+=[A-Za-z0-9._-]*:(NoSchedule|PreferNoSchedule|NoExecute)$")


@dataclass(frozen=True)
class NodePoolProps:
    """One node pool.

    Attributes:
        name: AKS pool name: lowercase letters/digits, starts with a letter, <= 12 chars.
        vm_size: Azure VM size (``Standard_ND96isr_H100_v5`` for GPU pools by default).
        node_count: fixed node count, >= 1.
        gpu: GPU pool: tainted ``nvidia.com/gpu=present:NoSchedule`` and ``gpu_driver`` set.
        gpu_driver: ``Install`` | ``None``; ``None`` here (the Python value) derives it from the
            cluster's ``gpu_stack``. Must agree with ``gpu_stack`` when given.
        labels: node labels (e.g. the accelerated node selector components select on).
        taints: taints ``key=value:Effect`` (``key=:Effect`` for an empty value), at most one per key
            and effect. GPU pools without an ``nvidia.com/gpu`` taint get :data:`GPU_TAINT`. On the
            system pool only :data:`CRITICAL_ADDONS_TAINT` is possible.
        managed_gpu: AKS-managed GPU pool; always refused (validation error).
        os_sku: AKS node OS SKU (``Ubuntu``: Ubuntu 24.04 node image on Kubernetes 1.34).
    """

    name: str
    vm_size: str
    node_count: int = 1
    gpu: bool = False
    gpu_driver: Literal["Install", "None"] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[str] = ()
    managed_gpu: bool = False
    os_sku: str = "Ubuntu"


def gpu_pool(name: str = "gpu", vm_size: str = DEFAULT_GPU_VM_SIZE, node_count: int = 1, **kwargs) -> NodePoolProps:
    """A GPU pool with the defaults of the seed: one ``Standard_ND96isr_H100_v5`` node."""
    return NodePoolProps(name=name, vm_size=vm_size, node_count=node_count, gpu=True, **kwargs)


def system_pool(name: str = "system", vm_size: str = DEFAULT_SYSTEM_VM_SIZE, node_count: int = 2, **kwargs) -> NodePoolProps:
    """The AKS system (default) node pool: 2x ``Standard_D8s_v5`` by default."""
    return NodePoolProps(name=name, vm_size=vm_size, node_count=node_count, gpu=False, **kwargs)


@dataclass(frozen=True)
class AksGpuClusterProps:
    """Props of :class:`AksGpuCluster`.

    Attributes:
        name: cluster name (DNS-1123 label); also the default DNS prefix.
        location: Azure region (default ``eastus``).
        kubernetes_version: ``"1.34"`` (minor; AKS picks the latest patch) or ``"1.34.x"``.
        gpu_stack: ``azure-managed`` (AKS installs driver + toolkit, default) or
            ``operator-managed`` (GPU Operator installs them; pools use ``gpu_driver = None``).
        resource_group_name: default ``<name>-rg``.
        dns_prefix: default ``name``.
        system_pool: the default node pool (mode System; untainted unless its taints are
            :data:`CRITICAL_ADDONS_TAINT`).
        pools: additional pools; default one GPU pool (:func:`gpu_pool`).
        tags: Azure tags on every resource.
    """

    name: str
    location: str = "eastus"
    kubernetes_version: str = "1.34"
    gpu_stack: Literal["azure-managed", "operator-managed"] = "azure-managed"
    resource_group_name: str | None = None
    dns_prefix: str | None = None
    system_pool: NodePoolProps = field(default_factory=system_pool)
    pools: Sequence[NodePoolProps] = field(default_factory=lambda: (gpu_pool(),))
    tags: Mapping[str, str] = field(default_factory=dict)

    def gpu_driver_for(self, pool: NodePoolProps) -> str | None:
        """``gpu_driver`` of ``pool``: explicit value, else derived from ``gpu_stack``; None for CPU pools."""
        if not pool.gpu:
            return None
        return pool.gpu_driver or GPU_STACK_DRIVER.get(self.gpu_stack)


def validate_props(props: AksGpuClusterProps) -> list[str]:
    """All problems of ``props`` (empty when valid); messages name the key and the fix."""
    errors: list[str] = []
    if not _DNS_LABEL.match(props.name or ""):
        errors.append(f"name '{props.name}' must be a DNS-1123 label (lowercase letters, digits, '-', <= 63 chars)")
    match = _K8S_VERSION.match(props.kubernetes_version or "")
    if not match:
        errors.append(f"kubernetes_version '{props.kubernetes_version}' must look like 1.34 or 1.34.2")
    elif int(match.group(1)) < MIN_KUBERNETES_MINOR:
        errors.append(
            f"kubernetes_version {props.kubernetes_version} is below 1.{MIN_KUBERNETES_MINOR}: DRA (resource.k8s.io/v1), "
            f"used by every GPU recipe, is GA from 1.{MIN_KUBERNETES_MINOR}; set kubernetes_version to 1.{MIN_KUBERNETES_MINOR} "
            "(upgrade one minor version at a time)"
        )
    if props.gpu_stack not in GPU_STACK_DRIVER:
        errors.append(f"gpu_stack '{props.gpu_stack}' is not one of {', '.join(sorted(GPU_STACK_DRIVER))}")
    if not props.location:
        errors.append("location must be an Azure region, e.g. eastus")
    seen: set[str] = set()
    for where, pool in [("system_pool", props.system_pool)] + [(f"pools[{i}]", p) for i, p in enumerate(props.pools)]:
        label = f"{where} '{pool.name}'"
        if not _POOL_NAME.match(pool.name or ""):
            errors.append(f"{label}: AKS pool names are 1-12 lowercase letters/digits starting with a letter")
        if pool.name in seen:
            errors.append(f"{label}: duplicate pool name")
        elif where != "system_pool" and pool.name == rotation_name(props.system_pool):
            errors.append(f"{label}: the name is the system pool's temporary_name_for_rotation; rename the pool")
        seen.add(pool.name)
        if not pool.vm_size:
            errors.append(f"{label}: vm_size is required")
        elif not _VM_SIZE.match(pool.vm_size):
            errors.append(f"{label}: vm_size {pool.vm_size[:80]!r} is not an Azure VM size name (letters, digits, '_', "
                          "'-', e.g. Standard_ND96isr_H100_v5)")
        if pool.node_count < 1:
            errors.append(f"{label}: node_count must be >= 1 (got {pool.node_count})")
        if pool.managed_gpu:
            errors.append(
                f"{label}: AKS-managed GPU pools (gpuProfile.nvidia.managementMode: Managed) install their own device "
                "plugin and DCGM exporter, which conflict with the GPU Operator; use an unmanaged pool "
                "(managed_gpu=False)"
            )
        seen_taints: dict[tuple[str, str], str] = {}
        for taint in dict.fromkeys(pool.taints):
            if not _TAINT.match(taint):
                errors.append(f"{label}: taint '{taint}' must look like key=value:NoSchedule")
                continue
            other = seen_taints.setdefault(_taint_key_effect(taint), taint)
            if other != taint:
                errors.append(
                    f"{label}: taints {other} and {taint} have the same key and effect; Kubernetes keeps one taint "
                    "per key and effect (AKS leaves the nodes NotReady); keep one of them"
                )
            if where == "system_pool" and taint != CRITICAL_ADDONS_TAINT:
                errors.append(
                    f"{label}: taint {taint} cannot be set on the AKS default (system) pool: azurerm 4.x only "
                    f"sets {CRITICAL_ADDONS_TAINT} there (only_critical_addons_enabled); use that taint, or "
                    "move the workloads that need this taint to a User pool"
                )
        if pool.gpu and where == "system_pool":
            errors.append(f"{label}: the system pool cannot be a GPU pool; add GPU pools under pools")
        if pool.gpu_driver is not None and not pool.gpu:
            errors.append(f"{label}: gpu_driver is only valid on GPU pools (gpu=True)")
        if pool.gpu and pool.gpu_driver is not None:
            if pool.gpu_driver not in ("Install", "None"):
                errors.append(f"{label}: gpu_driver '{pool.gpu_driver}' is not one of Install, None")
            elif props.gpu_stack in GPU_STACK_DRIVER and pool.gpu_driver != GPU_STACK_DRIVER[props.gpu_stack]:
                errors.append(
                    f"{label}: gpu_driver {pool.gpu_driver} contradicts gpu_stack {props.gpu_stack} (needs "
                    f"{GPU_STACK_DRIVER[props.gpu_stack]}); pool flags and GPU Operator values must come from the "
                    "same profile, otherwise containerd has no nvidia runtime or nodes have no driver"
                )
    if not any(p.gpu for p in props.pools):
        errors.append("pools: at least one GPU pool (gpu=True) is required")
    return errors


def rotation_name(pool: NodePoolProps) -> str:
    """``temporary_name_for_rotation`` of the default (system) pool: ``<name[:9]>tmp``.

    azurerm refuses to change ``vm_size``, ``os_sku`` (and other properties that cycle the nodes)
    of the default pool without it: it creates a temporary System pool under this name, moves the
    system pods there and rebuilds the default pool.
    """
    return f"{pool.name[:9]}tmp"


def _taint_key_effect(taint: str) -> tuple[str, str]:
    """``key=value:Effect`` -> ``(key, Effect)``."""
    body, _, effect = taint.rpartition(":")
    return body.partition("=")[0], effect


def pool_taints(pool: NodePoolProps) -> list[str]:
    """The ``node_taints`` of a User pool: its own taints, plus :data:`GPU_TAINT` first on a GPU
    pool that has no ``nvidia.com/gpu`` taint of its own (the AKS platform plugin's rule).

    Kubernetes keeps one taint per key and effect, so a second ``nvidia.com/gpu`` taint is never
    added (AKS leaves such a pool's nodes NotReady, Azure/AKS#1412).
    """
    taints = list(dict.fromkeys(pool.taints))
    gpu_key = _taint_key_effect(GPU_TAINT)[0]
    if pool.gpu and not any(_taint_key_effect(t)[0] == gpu_key for t in taints):
        taints.insert(0, GPU_TAINT)
    return taints


def upgrade_skip_condition(kubernetes_version: str) -> tuple[str, str]:
    """Terraform ``(condition, error_message)`` of the no-minor-skip postcondition.

    The condition holds when the live ``current_kubernetes_version`` is on the configured minor
    or the one before it (AKS upgrades one minor at a time and never downgrades). ``self`` is
    the planned object: for an existing cluster the planned ``current_kubernetes_version`` is the
    refreshed live value (azurerm does not mark it unknown on a version change), so the check
    fails the *plan*; on create it is unknown and Terraform checks it after apply.
    """
    match = _K8S_VERSION.match(kubernetes_version)
    minor = int(match.group(1)) if match else MIN_KUBERNETES_MINOR
    allowed = "|".join(str(m) for m in (minor - 1, minor))
    condition = f'${{can(regex("^1[.]({allowed})([.]|$)", self.current_kubernetes_version))}}'
    message = (
        f"AKS cannot skip Kubernetes minor versions: the cluster runs ${{self.current_kubernetes_version}} and the "
        f"configuration asks for {literal(kubernetes_version)}. Upgrade one minor version per apply "
        f"(set kubernetes_version to the next minor, apply, repeat) until 1.{minor - 1}, then apply {literal(kubernetes_version)}."
    )
    return condition, message


class AksGpuCluster(Construct):
    """Resource group, AKS cluster (system pool) and one ``kubernetes_cluster_node_pool`` per pool.

    Creates the stack's ``azurerm`` provider (id ``azurerm``) unless the stack has one.
    Validation errors surface at synth with this construct's path.

    Attributes:
        resource_group, cluster, node_pools (dict name -> resource).
    """

    def __init__(self, scope: Construct, id: str, props: AksGpuClusterProps):
        super().__init__(scope, id)
        self.props = props
        add_validation(self, lambda: validate_props(props))
        az = azurerm()
        stack = TerraformStack.of(self)
        ensure_azurerm_provider(stack)
        # Every literal string below passes literal() (constructs_lib.tfstring): Terraform reads resource
        # arguments and object keys as templates, so an unescaped ${ in a name would be evaluated at plan.
        tags = literal_tree(dict(sorted(props.tags.items())))
        version = props.kubernetes_version
        self.resource_group = az.ResourceGroup(
            self,
            "resource-group",
            name=literal(props.resource_group_name or f"{props.name}-rg"),
            location=literal(props.location),
            tags=tags or None,
        )
        sys_pool = props.system_pool
        condition, message = upgrade_skip_condition(version)
        self.cluster = az.KubernetesCluster(
            self,
            "cluster",
            name=literal(props.name),
            location=self.resource_group.location,
            resource_group_name=self.resource_group.name,
            dns_prefix=literal(props.dns_prefix or props.name),
            kubernetes_version=literal(version),
            oidc_issuer_enabled=True,
            workload_identity_enabled=True,
            identity=az.KubernetesClusterIdentity(type="SystemAssigned"),
            default_node_pool=az.KubernetesClusterDefaultNodePool(
                name=literal(sys_pool.name),
                vm_size=literal(sys_pool.vm_size),
                node_count=sys_pool.node_count,
                orchestrator_version=literal(version),
                os_sku=literal(sys_pool.os_sku),
                node_labels=literal_tree(dict(sorted(sys_pool.labels.items()))) or None,
                only_critical_addons_enabled=(CRITICAL_ADDONS_TAINT in sys_pool.taints) or None,
                temporary_name_for_rotation=literal(rotation_name(sys_pool)),
            ),
            tags=tags or None,
            lifecycle=TerraformResourceLifecycle(
                postcondition=[Postcondition(condition=condition, error_message=message)]
            ),
        )
        self.node_pools = {}
        for pool in props.pools:
            taints = pool_taints(pool)
            self.node_pools[pool.name] = az.KubernetesClusterNodePool(
                self,
                f"pool-{pool.name}",
                name=literal(pool.name),
                kubernetes_cluster_id=self.cluster.id,
                vm_size=literal(pool.vm_size),
                node_count=pool.node_count,
                mode="User",
                os_type="Linux",
                os_sku=literal(pool.os_sku),
                orchestrator_version=literal(version),
                gpu_driver=props.gpu_driver_for(pool),
                node_labels=literal_tree(dict(sorted(pool.labels.items()))) or None,
                node_taints=literal_tree(taints) or None,
                tags=tags or None,
            )
        for output_id, value, description in (
            ("kubernetes_version", self.cluster.current_kubernetes_version,
             "Kubernetes version the control plane runs (live, patch level)"),
            ("oidc_issuer_url", self.cluster.oidc_issuer_url, "OIDC issuer of the cluster (workload identity federation)"),
        ):
            TerraformOutput(self, output_id, value=value, description=description).override_logical_id(output_id)

    def connection(self) -> ClusterConnection:
        """Tokens of the cluster's API endpoint and client credentials (PEM, base64-decoded).

        Referenced from another stack, cdktf turns each into a ``sensitive`` output of this
        stack plus a ``terraform_remote_state`` read in the consuming stack.
        """
        kube = self.cluster.kube_config.get(0)
        return ClusterConnection(
            host=kube.host,
            client_certificate=Fn.base64decode(kube.client_certificate),
            client_key=Fn.base64decode(kube.client_key),
            cluster_ca_certificate=Fn.base64decode(kube.cluster_ca_certificate),
        )


def ensure_azurerm_provider(stack: TerraformStack):
    """The stack's ``azurerm`` provider (id ``azurerm``), created with ``features {}`` if absent.

    Credentials and ``subscription_id`` come from the environment (``ARM_SUBSCRIPTION_ID``,
    ``az login``, workload identity in Terraform Cloud), never from the synthesized JSON.
    """
    existing = stack.node.try_find_child("azurerm")
    if existing is not None:
        return existing
    az = azurerm()
    return az.AzurermProvider(stack, "azurerm", features=[az.AzurermProviderFeatures()])

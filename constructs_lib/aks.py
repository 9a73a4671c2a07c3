"""AksGpuCluster: an AKS cluster with node pools (``hashicorp/azurerm`` 4.x), rendered from its props.

The construct decides nothing about AKS: which pools are GPU pools, their taints and
``gpu_driver``, VM sizes, region, Kubernetes floor and resource group name come from the AKS
platform plugin (``plugins/gpucluster_aks/platform.py``, the one place those facts live).
:func:`validate_props` checks props-level shape only (synth fails with the construct path).

Rendered always: OIDC issuer, workload identity and a SystemAssigned managed identity
(``az aks create --enable-oidc-issuer --enable-workload-identity --enable-managed-identity``,
seed ``aks-gpu-setup``), and a lifecycle ``postcondition`` that refuses skipping a Kubernetes
minor version (AKS upgrades one minor at a time; see ``docs/synth.md`` for when it fires).

Usage::

    cluster = AksGpuCluster(stack, "aks", AksGpuClusterProps(
        name="h100", location="westus3", kubernetes_version="1.34", resource_group_name="h100-rg",
        system_pool=NodePoolProps(name="system", vm_size="Standard_D8s_v5", node_count=2),
        pools=(NodePoolProps(name="gpu", vm_size="Standard_ND96isr_H100_v5", gpu_driver="Install",
                             taints=("nvidia.com/gpu=present:NoSchedule",)),)))
    connection = cluster.connection()   # tokens for the runtime stack's Helm provider
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

from constructs_lib.cdk import (
    AZURERM_MAJOR,
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

_K8S_VERSION = re.compile(r"^1\.(\d+)(\.\d+)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_VM_SIZE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,79}$")
"""Azure VM size names (``Standard_ND96isr_H100_v5``): letters, digits, ``_`` and ``-``."""
_TAINT = re.compile(r"^[A-Za-z0-9./_-]+=[A-Za-z0-9._-]*:(NoSchedule|PreferNoSchedule|NoExecute)$")
GPU_DRIVERS = ("Install", "None")
"""Values azurerm 4.55 accepts for ``gpu_driver`` (it forces a new pool on change)."""


@dataclass(frozen=True)
class NodePoolProps:
    """One node pool, rendered as given (the platform plugin decides every value).

    Attributes:
        name: AKS pool name (non-empty, unique in the cluster; the plugin checks AKS naming rules).
        vm_size: Azure VM size, e.g. ``Standard_ND96isr_H100_v5``.
        node_count: fixed node count, >= 1.
        gpu_driver: azurerm ``gpu_driver`` (``Install`` | ``None``) of a GPU pool; the Python
            ``None`` (CPU pool) leaves the attribute out.
        labels: node labels, rendered sorted.
        taints: ``node_taints`` ``key=value:Effect`` (``key=:Effect`` for an empty value), at most one
            per key and effect, rendered in the given order. Not on the system pool (azurerm 4.x has
            no ``default_node_pool.node_taints``): use ``only_critical_addons``.
        os_sku: AKS node OS SKU (default ``Ubuntu``).
        only_critical_addons: system pool only: ``only_critical_addons_enabled`` (AKS taints the
            pool ``CriticalAddonsOnly=true:NoSchedule``).
        temporary_name_for_rotation: system pool only: the temporary System pool name azurerm uses
            to change ``vm_size``/``os_sku`` of the default pool; must not be another pool's name.
    """

    name: str
    vm_size: str
    node_count: int = 1
    gpu_driver: Literal["Install", "None"] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[str] = ()
    os_sku: str = "Ubuntu"
    only_critical_addons: bool = False
    temporary_name_for_rotation: str | None = None


@dataclass(frozen=True)
class AksGpuClusterProps:
    """Props of :class:`AksGpuCluster`; no AKS defaults here (the AKS plugin fills them).

    Attributes:
        name: cluster name (DNS-1123 label).
        location: Azure region, e.g. ``westus3``.
        kubernetes_version: ``"1.34"`` (minor; AKS picks the latest patch) or ``"1.34.x"``.
        resource_group_name: resource group created for the cluster.
        system_pool: the default node pool (mode System).
        pools: User pools (GPU pools carry ``gpu_driver`` and their taints).
        dns_prefix: default ``name``.
        tags: Azure tags on every resource.
    """

    name: str
    location: str
    kubernetes_version: str
    resource_group_name: str
    system_pool: NodePoolProps
    pools: Sequence[NodePoolProps]
    dns_prefix: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


def validate_props(props: AksGpuClusterProps) -> list[str]:
    """Props-level shape problems of ``props`` (empty when valid); messages name the prop.

    Platform rules (AKS pool names, the Kubernetes floor, which pools are GPU pools, the
    gpuStack -> ``gpu_driver`` map) are the AKS plugin's (``plugins/gpucluster_aks``), which
    refuses bad input before anything is synthesized.
    """
    errors: list[str] = []
    if not _DNS_LABEL.match(props.name or ""):
        errors.append(f"name '{props.name}' must be a DNS-1123 label (lowercase letters, digits, '-', <= 63 chars)")
    if not _K8S_VERSION.match(props.kubernetes_version or ""):
        errors.append(f"kubernetes_version '{props.kubernetes_version}' must look like 1.34 or 1.34.2")
    if not props.location:
        errors.append("location must be an Azure region, e.g. westus3")
    if not props.resource_group_name:
        errors.append("resource_group_name must be set")
    sys_pool = props.system_pool
    if sys_pool.taints:
        errors.append(
            f"system_pool '{sys_pool.name}': taints cannot be set on the AKS default (system) pool (azurerm 4.x has no "
            "default_node_pool.node_taints); use only_critical_addons"
        )
    if sys_pool.gpu_driver is not None:
        errors.append(f"system_pool '{sys_pool.name}': the system pool cannot be a GPU pool; add GPU pools under pools")
    seen: set[str] = set()
    for where, pool in [("system_pool", sys_pool)] + [(f"pools[{i}]", p) for i, p in enumerate(props.pools)]:
        label = f"{where} '{pool.name}'"
        if not pool.name:
            errors.append(f"{label}: name is required")
        if pool.name in seen:
            errors.append(f"{label}: duplicate pool name")
        elif where != "system_pool" and pool.name == sys_pool.temporary_name_for_rotation:
            errors.append(f"{label}: the name is the system pool's temporary_name_for_rotation; rename the pool")
        seen.add(pool.name)
        if where != "system_pool" and (pool.only_critical_addons or pool.temporary_name_for_rotation):
            errors.append(f"{label}: only_critical_addons and temporary_name_for_rotation apply to the system pool only")
        if not pool.vm_size:
            errors.append(f"{label}: vm_size is required")
        elif not _VM_SIZE.match(pool.vm_size):
            errors.append(f"{label}: vm_size {pool.vm_size[:80]!r} is not an Azure VM size name (letters, digits, '_', "
                          "'-', e.g. Standard_ND96isr_H100_v5)")
        if pool.node_count < 1:
            errors.append(f"{label}: node_count must be >= 1 (got {pool.node_count})")
        if pool.gpu_driver is not None and pool.gpu_driver not in GPU_DRIVERS:
            errors.append(f"{label}: gpu_driver '{pool.gpu_driver}' is not one of {', '.join(GPU_DRIVERS)}")
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
    return errors


def _taint_key_effect(taint: str) -> tuple[str, str]:
    """``key=value:Effect`` -> ``(key, Effect)``."""
    body, _, effect = taint.rpartition(":")
    return body.partition("=")[0], effect


def upgrade_skip_condition(kubernetes_version: str) -> tuple[str, str]:
    """Terraform ``(condition, error_message)`` of the no-minor-skip postcondition.

    The condition holds when the live ``current_kubernetes_version`` is on the configured minor
    or the one before it (AKS upgrades one minor at a time and never downgrades). ``self`` is
    the planned object: for an existing cluster the planned ``current_kubernetes_version`` is the
    refreshed live value (azurerm does not mark it unknown on a version change), so the check
    fails the *plan*; on create it is unknown and Terraform checks it after apply.
    """
    match = _K8S_VERSION.match(kubernetes_version)
    minor = int(match.group(1)) if match else 0  # a malformed version fails validate_props at synth
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
            name=literal(props.resource_group_name),
            location=literal(props.location),
            tags=tags or None,
        )
        sys_pool = props.system_pool
        condition, message = upgrade_skip_condition(version)
        # azurerm 5.x requires node_provisioning_profile (5.0 upgrade guide); "Manual" is AKS's default:
        # the node pools declared here, no node auto-provisioning (Karpenter). azurerm 4.x has no such block.
        by_major = ({"node_provisioning_profile": az.KubernetesClusterNodeProvisioningProfile(mode="Manual")}
                    if AZURERM_MAJOR >= 5 else {})
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
            **by_major,
            default_node_pool=az.KubernetesClusterDefaultNodePool(
                name=literal(sys_pool.name),
                vm_size=literal(sys_pool.vm_size),
                node_count=sys_pool.node_count,
                orchestrator_version=literal(version),
                os_sku=literal(sys_pool.os_sku),
                node_labels=literal_tree(dict(sorted(sys_pool.labels.items()))) or None,
                only_critical_addons_enabled=sys_pool.only_critical_addons or None,
                temporary_name_for_rotation=literal(sys_pool.temporary_name_for_rotation) if sys_pool.temporary_name_for_rotation else None,
            ),
            tags=tags or None,
            lifecycle=TerraformResourceLifecycle(
                postcondition=[Postcondition(condition=condition, error_message=message)]
            ),
        )
        self.node_pools = {}
        for pool in props.pools:
            taints = list(dict.fromkeys(pool.taints))
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
                gpu_driver=pool.gpu_driver,
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

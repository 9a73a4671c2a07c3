"""AKS plugin: platform hooks (declaration, catalog directory, cluster defaults).

Facts (AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md)): AKS needs Kubernetes 1.34+ (DRA GA); the 8-GPU
``Standard_ND96isr_H100_v5`` SKU is the supported H100 node size; GPU pools are unmanaged
(AKS "Driver only" install profile by default). The ``gpuStack`` profile picks who installs
the GPU driver and container toolkit, and the pool's AKS ``gpu_driver`` property must match
it: ``azure-managed`` -> ``Install`` (AKS default), ``operator-managed`` -> ``None``
(``--gpu-driver none``).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from gpucluster.sdk import (
    ClusterSpec,
    GpuclusterError,
    NodePool,
    Platform,
    Taint,
    hookimpl,
    load_data_file,
)
from gpucluster_aks.settings import AKS_SETTING_KEYS, parse_settings

__all__ = [
    "gpucluster_platforms",
    "gpucluster_catalog_dirs",
    "gpucluster_prepare_cluster",
    "AKS_PLATFORM",
    "DEFAULT_REGION",
    "GPU_VM_SIZE",
    "SYSTEM_VM_SIZE",
    "GPU_TAINT",
    "GPU_LABELS",
    "GPU_DRIVER_FOR_PROFILE",
    "CRITICAL_ADDONS_TAINT",
    "RESERVED_LABEL_PREFIXES",
    "resource_group_name",
    "rotation_name",
]

SERVICE = "aks"
CATALOG_DIR = Path(__file__).parent / "catalog"

DEFAULT_REGION = "eastus"
"""Default AKS location: a region offering ND H100 v5 (check your subscription's quota); also the
default ``fleet.location`` (``AKS_PLATFORM.default_region``, read by the core's fleet parser)."""

GPU_VM_SIZE = "Standard_ND96isr_H100_v5"
"""8x H100 with InfiniBand; the SKU AICR's AKS recipes are validated on (AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md))."""

SYSTEM_VM_SIZE = "Standard_D8ds_v5"
"""System pool VM size for the default pools (8 vCPU, 32 GiB: room for the operators; its 300 GiB
temp disk holds an ephemeral OS disk, checkov CKV_AZURE_226)."""

VM_SIZES_FILE = Path(__file__).parent / "gpu_vm_sizes.yaml"
"""AKS GPU VM sizes per accelerator and the sizes that take an ephemeral OS disk (data, with sources)."""

SYSTEM_NODE_COUNT = 2
GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
"""Taint of GPU pools; runtime components tolerate it with a keyed toleration (AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md):
a wildcard toleration deadlocks nodewright on AKS)."""

GPU_LABELS = {"nvidia.com/gpu.present": "true"}
"""Node labels of GPU pools (a key the pool already sets keeps its value). The label GPU Operator's
NFD rules set on GPU nodes anyway; set from the first boot, the default accelerated node selector
(derived from the labels all GPU pools share) targets GPU-only components (DRA kubelet plugin,
nodewright customizations, training runtimes) to GPU nodes before NFD has run."""

PROFILE_NAME = "gpuStack"
PROFILE_DEFAULT = "azure-managed"
GPU_DRIVER_FOR_PROFILE = {"azure-managed": "Install", "operator-managed": "None"}
"""AKS ``gpu_driver`` node pool property per gpuStack value (AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md): both must come from one mode)."""

AKS_PLATFORM = Platform(
    service=SERVICE,
    display_name="Azure Kubernetes Service",
    accelerators=("h100",),
    oses=("ubuntu",),
    intents=("training", "inference"),
    platforms=("any", "kubeflow", "dynamo"),
    provisions_cluster=True,
    min_kubernetes="1.34",
    provider_id_prefix="azure://",
    profiles={PROFILE_NAME: (PROFILE_DEFAULT, tuple(sorted(GPU_DRIVER_FOR_PROFILE)))},
    settings=AKS_SETTING_KEYS,
    gpu_taints=(f"{GPU_TAINT.key}={GPU_TAINT.value}:{GPU_TAINT.effect}",),
    default_region=DEFAULT_REGION,
)
"""``settings``: the AKS production settings (:mod:`gpucluster_aks.settings`, docs/cluster-file.md
"AKS settings"); the core refuses other top-level keys, :func:`parse_settings` the nested ones."""

CRITICAL_ADDONS_TAINT = Taint(key="CriticalAddonsOnly", value="true", effect="NoSchedule")
"""The only taint azurerm 4.x can put on the default (system) pool: ``only_critical_addons_enabled``
(azurerm 4.0 removed ``default_node_pool.node_taints``)."""

RESERVED_LABEL_PREFIXES = ("kubernetes.azure.com/", "kubernetes.io/", "k8s.io/")
"""Label prefixes AKS sets itself and refuses in ``node_labels``; selectors on them already match."""

POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
"""AKS Linux node pool names: lowercase letters and digits, start with a letter, 1-12 chars."""
VM_SIZE = re.compile(r"^Standard_[A-Za-z0-9_-]{1,70}$")
"""AKS node VM size names: ``Standard_`` + letters, digits, ``_``, ``-`` (``Standard_ND96isr_H100_v5``)."""
AGENTPOOL_LABEL = "kubernetes.azure.com/agentpool"
"""The label AKS puts on every node with its node pool's name (AKS docs "Use labels in an AKS
cluster", labels AKS sets): a pool's ``node_selector``."""
MAX_NODES_PER_POOL = 1000
GPU_DRIVERS = ("Install", "None")


@hookimpl
def gpucluster_platforms():
    """Declare the ``aks`` service (H100, Ubuntu, training/inference, gpuStack profile)."""
    return [AKS_PLATFORM]


@hookimpl
def gpucluster_catalog_dirs():
    """The AKS overlays and AKS values files (``plugins/gpucluster_aks/catalog``)."""
    return [CATALOG_DIR]


@hookimpl
def gpucluster_prepare_cluster(cluster: ClusterSpec):
    """Fill AKS defaults and validate AKS inputs.

    * ``region``: :data:`DEFAULT_REGION` when omitted.
    * ``profile``: ``gpuStack`` defaults to ``azure-managed``; names and values are checked by the
      core against ``Platform.profiles`` (and ``settings`` keys against ``Platform.settings``)
      before this hook runs, which the core calls for AKS clusters only.
    * ``pools``: default ``system`` (:data:`SYSTEM_VM_SIZE` ``Standard_D8ds_v5`` x2) + ``gpu``
      (:data:`GPU_VM_SIZE` ``Standard_ND96isr_H100_v5`` x1) for clusters gpucluster creates. GPU pools get the
      ``nvidia.com/gpu=present:NoSchedule`` taint, the ``nvidia.com/gpu.present: "true"`` label
      (:data:`GPU_LABELS`) and ``gpu_driver`` derived from gpuStack (``Install``/``None``) when
      not given. Names must be AKS pool names and unique (and not the system pool's
      :func:`rotation_name`), node counts 1..1000, at least one non-GPU (system) pool and one GPU
      pool; no label in a namespace AKS reserves (:data:`RESERVED_LABEL_PREFIXES`); one taint per
      key and effect; the system pool tainted at most :data:`CRITICAL_ADDONS_TAINT`, and then
      tolerated by ``scheduling.system.tolerations`` or relieved by an untainted CPU pool.
    * the Kubernetes floor (>= 1.34) is a policy check (``AKS-K8S-VERSION`` in ``policy``).

    Everything ``gpucluster_cdk.constructs_lib.AksGpuCluster`` would refuse at synth is refused here, so
    ``gpucluster plan`` and ``cdktf synth`` fail on the same inputs with the same line.

    Returns:
        the prepared ClusterSpec.

    Raises:
        GpuclusterError: naming the cluster file, cluster and key.
    """
    where = {"file": cluster.source, "cluster": cluster.name}
    stack = cluster.profile.get(PROFILE_NAME, PROFILE_DEFAULT)  # validated by the core
    if cluster.region is None:
        cluster.region = DEFAULT_REGION
    if not cluster.pools and cluster.existing is None:
        cluster.pools = [
            NodePool(
                name="system", vm_size=SYSTEM_VM_SIZE, node_count=SYSTEM_NODE_COUNT, gpu=False
            ),
            NodePool(name="gpu", vm_size=GPU_VM_SIZE, node_count=1, gpu=True),
        ]
    _pool_kinds(cluster, where)
    _validate_pools(cluster, stack, where)
    parse_settings(cluster)  # refuses bad settings at plan; cluster.py reads the same result
    return cluster


@functools.cache
def vm_sizes() -> dict:
    """:data:`VM_SIZES_FILE`: ``{"accelerators": {acc: [size, ...]}, "gpus_per_vm": {size: int},
    "gpu_size_prefix": str, "ephemeral_os_disk": [...]}``."""
    return load_data_file(VM_SIZES_FILE)


def accelerator_of(vm_size: str) -> str | None:
    """The accelerator of a known AKS GPU VM size (``h100`` for ``Standard_ND96isr_H100_v5``), else None."""
    for accelerator, sizes in vm_sizes()["accelerators"].items():
        if vm_size in sizes:
            return accelerator
    return None


def ephemeral_os_disk_fits(vm_size: str) -> bool:
    """True when ``vm_size``'s local temp disk holds the AKS default OS disk (data file list)."""
    return vm_size in vm_sizes()["ephemeral_os_disk"]


def _closest(vm_size: str, candidates: list[str]) -> str:
    import difflib  # only for an error message

    close = difflib.get_close_matches(vm_size, candidates, n=3, cutoff=0.0)
    return ", ".join(close)


def _pool_kinds(cluster: ClusterSpec, where: dict) -> None:
    """GPU-ness of every pool from its VM size (:data:`VM_SIZES_FILE`).

    A size of an accelerator the cluster's platform serves is a GPU pool; a CPU size is a CPU
    pool. Refused (``pools[i].vmSize`` / ``pools[i].gpu``): a GPU size of another accelerator, an
    N-series (GPU) size that is not listed (typo), and an explicit ``gpu:`` that contradicts the size.
    """
    wanted = (
        cluster.criteria.accelerator
        if cluster.criteria.accelerator in AKS_PLATFORM.accelerators
        else None
    )
    accelerators = (wanted,) if wanted else AKS_PLATFORM.accelerators
    valid = [size for acc in accelerators for size in vm_sizes()["accelerators"][acc]]
    for i, pool in enumerate(cluster.pools):
        key = f"pools[{i}]"
        accelerator = accelerator_of(pool.vm_size)
        looks_gpu = pool.vm_size.startswith(vm_sizes()["gpu_size_prefix"])
        if accelerator is not None and accelerator not in accelerators:
            raise GpuclusterError(
                f"node pool '{pool.name}' has vmSize {pool.vm_size}, whose GPU is the {accelerator.upper()}; this "
                f"cluster's recipe is for the {'/'.join(a.upper() for a in accelerators)}",
                key=f"{key}.vmSize",
                allowed=", ".join(valid),
                fix=f"use a VM size with the {'/'.join(a.upper() for a in accelerators)}, closest: {_closest(pool.vm_size, valid)}",
                **where,
            )
        if accelerator is None and looks_gpu:
            raise GpuclusterError(
                f"node pool '{pool.name}' has vmSize {pool.vm_size}, which is not a known AKS GPU size",
                key=f"{key}.vmSize",
                allowed=", ".join(valid),
                fix=f"check the spelling; closest: {_closest(pool.vm_size, valid)}",
                **where,
            )
        is_gpu = accelerator is not None
        if pool.gpu_set and pool.gpu != is_gpu:
            raise GpuclusterError(
                f"node pool '{pool.name}' sets gpu: {str(pool.gpu).lower()}, but {pool.vm_size} is "
                f"{'a GPU' if is_gpu else 'not a GPU'} size",
                key=f"{key}.gpu",
                fix="remove gpu: (gpucluster derives it from vmSize)"
                + (
                    ""
                    if is_gpu
                    else f", or use a GPU size, closest: {_closest(pool.vm_size, valid)}"
                ),
                **where,
            )
        pool.gpu = is_gpu


def resource_group_name(cluster: ClusterSpec) -> str:
    """The resource group gpucluster creates for ``cluster``: ``<name>-rg``."""
    return f"{cluster.name}-rg"


def rotation_name(pool_name: str) -> str:
    """``temporary_name_for_rotation`` of the default (system) pool: ``<name[:9]>tmp``.

    azurerm refuses to change ``vm_size``, ``os_sku`` (and other properties that cycle the nodes)
    of the default pool without it: it creates a temporary System pool under this name, moves the
    system pods there and rebuilds the default pool. No other pool may use the name.
    """
    return f"{pool_name[:9]}tmp"


def system_pool_index(cluster: ClusterSpec) -> int | None:
    """Index of the AKS system (default) pool: the first non-GPU pool (None without pools)."""
    return next((i for i, p in enumerate(cluster.pools) if not p.gpu), None)


def _reserved(key: str) -> bool:
    return key.startswith(RESERVED_LABEL_PREFIXES) or "kubernetes.io/" in key


def _validate_pools(cluster: ClusterSpec, stack: str, where: dict) -> None:
    """Every AKS pool rule (what ``AksGpuCluster`` would refuse at synth is refused here, at plan)."""
    if not cluster.pools:
        return
    seen: set[str] = set()
    for i, pool in enumerate(cluster.pools):
        key = f"pools[{i}]"
        if not POOL_NAME.fullmatch(pool.name):
            raise GpuclusterError(
                f"node pool name '{pool.name}' is not a valid AKS pool name",
                key=f"{key}.name",
                allowed="1-12 lowercase letters and digits, starting with a letter",
                fix=f"rename it, e.g. {(re.sub(r'[^a-z0-9]', '', pool.name.lower()).lstrip('0123456789')[:12] or 'gpu')}",
                **where,
            )
        if not VM_SIZE.fullmatch(pool.vm_size):
            raise GpuclusterError(
                f"node pool '{pool.name}' has vmSize '{pool.vm_size}', not an Azure VM size name",
                key=f"{key}.vmSize",
                allowed="Standard_ followed by letters, digits, '_' and '-'",
                fix=f"write the size as Azure lists it, e.g. {GPU_VM_SIZE} or {SYSTEM_VM_SIZE}",
                **where,
            )
        if pool.name in seen:
            raise GpuclusterError(
                f"node pool name '{pool.name}' is used twice",
                key=f"{key}.name",
                fix="rename one pool",
                **where,
            )
        seen.add(pool.name)
        if not 1 <= pool.node_count <= MAX_NODES_PER_POOL:
            raise GpuclusterError(
                f"node pool '{pool.name}' has nodeCount {pool.node_count}",
                key=f"{key}.nodeCount",
                allowed=f"1..{MAX_NODES_PER_POOL}",
                fix=f"set nodeCount between 1 and {MAX_NODES_PER_POOL}; add pools for more nodes",
                **where,
            )
        _check_own_labels(cluster, i, where)
        _check_taints_one_per_key_and_effect(cluster, i, where)
        pool.node_selector = {AGENTPOOL_LABEL: pool.name}
        if pool.gpu:
            pool.gpus_per_node = vm_sizes().get("gpus_per_vm", {}).get(pool.vm_size)
        if not pool.gpu:
            if pool.gpu_driver is not None:
                raise GpuclusterError(
                    f"node pool '{pool.name}' is not a GPU pool but sets gpuDriver",
                    key=f"{key}.gpuDriver",
                    fix="remove gpuDriver or set gpu: true",
                    **where,
                )
            continue
        if pool.gpu_driver is None:
            pool.gpu_driver = GPU_DRIVER_FOR_PROFILE[stack]
        elif pool.gpu_driver not in GPU_DRIVERS:
            raise GpuclusterError(
                f"node pool '{pool.name}' has gpuDriver '{pool.gpu_driver}'",
                key=f"{key}.gpuDriver",
                allowed=", ".join(GPU_DRIVERS),
                fix="remove gpuDriver: gpucluster derives it from profile.gpuStack (azure-managed -> Install, "
                "operator-managed -> None)",
                **where,
            )
        if not any(t.key == GPU_TAINT.key for t in pool.taints):
            pool.taints.append(Taint(GPU_TAINT.key, GPU_TAINT.value, GPU_TAINT.effect))
        for label, value in GPU_LABELS.items():
            if label not in pool.labels:
                pool.labels = dict(sorted({**pool.labels, label: value}.items()))
    system = system_pool_index(cluster)
    if system is None:
        raise GpuclusterError(
            "every node pool is a GPU pool; AKS needs a system pool for the control components",
            key="pools",
            fix=f"add a pool with gpu: false (e.g. {SYSTEM_VM_SIZE} x{SYSTEM_NODE_COUNT})",
            **where,
        )
    if not any(p.gpu for p in cluster.pools):
        raise GpuclusterError(
            "no node pool is a GPU pool; a GPU cluster needs at least one",
            key="pools",
            fix=f"add a GPU pool, e.g. {{name: gpu, vmSize: {GPU_VM_SIZE}}}",
            **where,
        )
    _check_system_pool(cluster, system, where)
    _check_replaces(cluster, where)
    temporary = rotation_name(cluster.pools[system].name)
    for i, pool in enumerate(cluster.pools):
        if i != system and pool.name == temporary:
            raise GpuclusterError(
                f"node pool name '{pool.name}' is the temporary name azurerm uses to rotate the system pool "
                f"'{cluster.pools[system].name}' (temporary_name_for_rotation)",
                key=f"pools[{i}].name",
                fix="rename the pool",
                **where,
            )


SURGE_FIX = (
    "write replaces: on the new GPU pool only, naming the GPU pool it takes over "
    "(docs/cluster-file.md 'Replacing a GPU pool'), or remove replaces"
)


def _check_replaces(cluster: ClusterSpec, where: dict) -> None:
    """``pools[i].replaces`` (a surge change, docs/cluster-file.md "Replacing a GPU pool"): the
    new pool is a GPU pool that names another GPU pool of the cluster, which itself replaces
    nothing, and no two pools name the same one.

    Raises:
        GpuclusterError: one line naming ``pools[i].replaces``.
    """
    by_name = {p.name: p for p in cluster.pools}
    claimed: dict[str, str] = {}
    for i, pool in enumerate(cluster.pools):
        old_name = pool.replaces
        if old_name is None:
            continue
        key = f"pools[{i}].replaces"
        old = by_name.get(old_name)
        problem = None
        if old_name == pool.name:
            problem = f"node pool '{pool.name}' replaces itself"
        elif not pool.gpu:
            problem = f"node pool '{pool.name}' is not a GPU pool but replaces '{old_name}'"
        elif old is None:
            problem = (
                f"node pool '{pool.name}' replaces '{old_name}', which the cluster does not have "
                f"(pools: {', '.join(sorted(by_name))})"
            )
        elif not old.gpu:
            problem = f"node pool '{pool.name}' replaces '{old_name}', which is not a GPU pool"
        elif old.replaces is not None:
            problem = (
                f"node pool '{pool.name}' replaces '{old_name}', which itself replaces "
                f"'{old.replaces}'; finish that replacement first"
            )
        elif old_name in claimed:
            problem = (
                f"node pools '{claimed[old_name]}' and '{pool.name}' both replace '{old_name}'"
            )
        if problem is not None:
            raise GpuclusterError(problem, key=key, fix=SURGE_FIX, **where)
        claimed[old_name] = pool.name


def _check_own_labels(cluster: ClusterSpec, index: int, where: dict) -> None:
    pool = cluster.pools[index]
    for key in sorted(pool.labels or {}):
        if _reserved(key):
            raise GpuclusterError(
                f"label '{key}' of pool '{pool.name}' is in a namespace AKS reserves for the labels it sets itself "
                f"({', '.join(RESERVED_LABEL_PREFIXES)}); AKS refuses it as a node label",
                key=f"pools[{index}].labels.{key}",
                fix="use a label of your own (e.g. example.com/role); to select on labels AKS sets "
                "(kubernetes.azure.com/agentpool, kubernetes.azure.com/accelerator), use scheduling node selectors",
                **where,
            )


def _check_taints_one_per_key_and_effect(cluster: ClusterSpec, index: int, where: dict) -> None:
    pool = cluster.pools[index]
    seen: dict[tuple[str, str], str] = {}
    for taint in pool.taints:
        other = seen.setdefault((taint.key, taint.effect), str(taint))
        if other != str(taint):
            raise GpuclusterError(
                f"node pool '{pool.name}' has taints {other} and {taint} with the same key and effect; Kubernetes "
                "keeps one taint per key and effect (AKS leaves the nodes NotReady)",
                key=f"pools[{index}].taints",
                fix="keep one of them",
                **where,
            )


def _tolerates_critical_addons(toleration) -> bool:
    """Kubernetes matching of ``toleration`` against :data:`CRITICAL_ADDONS_TAINT`."""
    if toleration.effect not in (None, "", CRITICAL_ADDONS_TAINT.effect):
        return False
    if not toleration.key:
        return toleration.operator == "Exists"
    return toleration.key == CRITICAL_ADDONS_TAINT.key and (
        toleration.operator == "Exists" or toleration.value == CRITICAL_ADDONS_TAINT.value
    )


def _check_system_pool(cluster: ClusterSpec, index: int, where: dict) -> None:
    """The system pool can carry only :data:`CRITICAL_ADDONS_TAINT`, and then non-GPU pods need a
    toleration for it or another untainted CPU pool."""
    system = cluster.pools[index]
    for taint in system.taints:
        if str(taint) != str(CRITICAL_ADDONS_TAINT):
            raise GpuclusterError(
                f"the AKS system pool '{system.name}' cannot carry taint {taint}: azurerm 4.x sets only "
                f"{CRITICAL_ADDONS_TAINT} on the default node pool (only_critical_addons_enabled)",
                key=f"pools[{index}].taints",
                allowed=str(CRITICAL_ADDONS_TAINT),
                fix="remove the taint, or put the workloads that need it on a separate pool with gpu: false",
                **where,
            )
    if not system.taints:
        return
    if any(not p.gpu and not p.taints for p in cluster.pools):
        return
    if any(_tolerates_critical_addons(t) for t in cluster.scheduling.system_tolerations):
        return
    raise GpuclusterError(
        f"the system pool '{system.name}' is tainted {system.taints[0]}, no other pool without taints runs non-GPU "
        "pods, and no scheduling.system.tolerations tolerates the taint: operators and readiness gates would stay "
        "Pending",
        key=f"pools[{index}].taints",
        fix="add 'CriticalAddonsOnly:NoSchedule' to scheduling.system.tolerations, or add a pool with gpu: false and no "
        "taints",
        **where,
    )

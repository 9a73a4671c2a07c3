"""AKS plugin: policy checks (hook ``gpucluster_policy_checks``), AKS clusters only.

Written against the public SDK only. Check ids (docs/policies.md has one section each):

==============================  ========  ================================================
``AKS-K8S-VERSION``             error/    Kubernetes >= 1.34 (DRA GA); warning for a minor
                                warning   newer than :data:`NEWEST_KUBERNETES`
``AKS-MANAGED-GPU``             error     AKS-managed GPU pools conflict with the operator
``AKS-GPU-DRIVER``              error     pool gpu_driver, gpuStack profile and the four
                                          driver-ownership values come from one mode
``AKS-WILDCARD-TOLERATION``     error     wildcard accelerated toleration with nodewright
``AKS-HOST-MOFED``              error/    useHostMofed not false: warning without
                                warning   network-operator or while inert; error when the
                                          operator builds nvidia-peermem
``AKS-REGION``                  warning   the region is an Azure region name (azure_regions.yaml)
``AKS-SCHEDULER-MODE``          warning   schedulerProfiles need the cluster's scheduler in
                                          AKS's ManagedByCRD mode, which gpucluster does not set
``AKS-UPGRADE-SKIP``            (plan)    no skipped minor versions; enforced in Terraform,
                                          :func:`minor_upgrade_steps` is the pure helper
==============================  ========  ================================================

Facts: AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md) (driver ownership modes, managed GPU pools, keyed tolerations
and nodewright#296, RDMA opt-out, Kubernetes 1.34, no version skipping) and AICR registry
validations (CheckWildcardAcceleratedToleration, CheckHostMofedWithoutNetworkOperator).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from gpucluster.sdk import ClusterSpec, Finding, Recipe, get_path, hookimpl, load_data_file
from gpucluster_aks.platform import (
    AGENTPOOL_LABEL,
    AKS_PLATFORM,
    GPU_DRIVER_FOR_PROFILE,
    resource_group_name,
)

__all__ = [
    "gpucluster_policy_checks",
    "minor_upgrade_steps",
    "MIN_KUBERNETES",
    "NEWEST_KUBERNETES",
    "OWNERSHIP_MODES",
]

MIN_KUBERNETES = tuple(int(part) for part in AKS_PLATFORM.min_kubernetes.split("."))
"""``AKS_PLATFORM.min_kubernetes`` as ``(major, minor)``: DRA (``resource.k8s.io/v1``) is GA from
Kubernetes 1.34 and every AKS recipe includes the DRA driver (AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md))."""

NEWEST_KUBERNETES = "1.37"
"""The newest Kubernetes minor released upstream when this plugin was made (1.37.0, 2026-08-26:
:data:`KUBERNETES_RELEASES_URL`); AKS offers a minor only after its upstream release, some weeks
later and in preview first (Microsoft Learn, "Supported Kubernetes versions in Azure Kubernetes
Service (AKS)", :data:`SUPPORTED_VERSIONS_URL`). A newer ``kubernetesVersion`` is a warning, not
an error: a newer minor may be out by the time this runs, and only the apply knows whether the
region offers it."""

KUBERNETES_RELEASES_URL = "https://kubernetes.io/releases/"

SUPPORTED_VERSIONS_URL = "https://learn.microsoft.com/azure/aks/supported-kubernetes-versions"

GPU_OPERATOR = "gpu-operator"
DRA_DRIVER = "nvidia-dra-driver-gpu"
NETWORK_OPERATOR = "network-operator"
NODEWRIGHT_CUSTOMIZATIONS = "nodewright-customizations"
NODEWRIGHT_TOLERATIONS_PATH = "acceleratedTolerations"
"""Registry accelerated toleration path of nodewright-customizations (the Skyhook CR's
``additionalTolerations``); its manifest template falls back to a wildcard when empty."""

OWNERSHIP_MODES: dict[str, dict[str, Any]] = {
    "azure-managed": {
        "gpu_driver": GPU_DRIVER_FOR_PROFILE["azure-managed"],
        "values": {
            (GPU_OPERATOR, "driver.enabled"): False,
            (GPU_OPERATOR, "toolkit.enabled"): False,
            (GPU_OPERATOR, "operator.runtimeClass"): "nvidia-container-runtime",
            (DRA_DRIVER, "nvidiaDriverRoot"): "/",
        },
    },
    "operator-managed": {
        "gpu_driver": GPU_DRIVER_FOR_PROFILE["operator-managed"],
        "values": {
            (GPU_OPERATOR, "driver.enabled"): True,
            (GPU_OPERATOR, "toolkit.enabled"): True,
            (GPU_OPERATOR, "operator.runtimeClass"): "nvidia",
            (DRA_DRIVER, "nvidiaDriverRoot"): "/run/nvidia/driver",
        },
    },
}
"""The two AKS GPU driver ownership modes (AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md)): node pool ``gpu_driver`` and
the four values that must come with it. ``operator-managed`` is the guide's override tuple."""

MODE_FOR_GPU_DRIVER = {spec["gpu_driver"]: mode for mode, spec in OWNERSHIP_MODES.items()}

_CHART_DEFAULTS = {
    (GPU_OPERATOR, "driver.enabled"): True,
    (GPU_OPERATOR, "toolkit.enabled"): True,
    (DRA_DRIVER, "nvidiaDriverRoot"): "/",
}
_MISSING = object()


def _minor(version: str) -> tuple[int, int]:
    parts = str(version).strip().lstrip("v").split(".")
    if len(parts) < 2:
        raise ValueError(version)
    return int(parts[0]), int(parts[1])


def minor_upgrade_steps(current: str, target: str) -> list[str]:
    """Kubernetes minor versions an AKS upgrade from ``current`` to ``target`` must pass through.

    AKS does not allow skipping a minor version (AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md): 1.32 must go to 1.33 before 1.34).

    Returns:
        ``[]`` when target == current minor, else every minor after ``current`` up to
        ``target`` (``("1.32", "1.34")`` -> ``["1.33", "1.34"]``). Apply one per run.

    Raises:
        ValueError: unparsable versions, a different major, or a downgrade.
    """
    cur, tgt = _minor(current), _minor(target)
    if cur[0] != tgt[0]:
        raise ValueError(f"cannot upgrade across major versions ({current} -> {target})")
    if tgt < cur:
        raise ValueError(f"AKS cannot downgrade Kubernetes ({current} -> {target})")
    return [f"{cur[0]}.{m}" for m in range(cur[1] + 1, tgt[1] + 1)]


def _show(value: Any) -> str:
    """A value as the user writes it in YAML (``false``, ``'nvidia'``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    return repr(value)


def _finding(
    cluster: ClusterSpec,
    id: str,
    severity: Literal["error", "warning", "info"],
    component: str,
    key: str,
    message: str,
    fix: str,
) -> Finding:
    return Finding(
        id=id,
        severity=severity,
        cluster=cluster.name,
        component=component,
        key=key,
        message=message,
        fix=fix,
    )


def _check_version(cluster: ClusterSpec) -> list[Finding]:
    try:
        too_old = _minor(cluster.kubernetes_version) < MIN_KUBERNETES
        bad = False
    except ValueError:
        too_old, bad = True, True
    if not too_old:
        return _check_newest(cluster)
    what = "is not a MAJOR.MINOR version" if bad else "is below 1.34"
    return [
        _finding(
            cluster,
            "AKS-K8S-VERSION",
            "error",
            "-",
            "kubernetesVersion",
            f"Kubernetes {cluster.kubernetes_version!r} {what}: every AKS GPU recipe includes the DRA driver, and DRA "
            "(resource.k8s.io/v1) is GA only from Kubernetes 1.34",
            'set kubernetesVersion: "1.34"; upgrade existing clusters one minor version at a time (1.32 -> 1.33 -> 1.34)',
        )
    ]


def _check_newest(cluster: ClusterSpec) -> list[Finding]:
    """``AKS-K8S-VERSION`` warning: ``kubernetesVersion`` (already at least 1.34) is a newer minor
    than :data:`NEWEST_KUBERNETES`; Terraform accepts it and only the apply would find whether AKS
    offers it."""
    newest = _minor(NEWEST_KUBERNETES)
    if _minor(cluster.kubernetes_version) <= newest:
        return []
    return [
        _finding(
            cluster,
            "AKS-K8S-VERSION",
            "warning",
            "-",
            "kubernetesVersion",
            f"Kubernetes {cluster.kubernetes_version!r} is newer than {NEWEST_KUBERNETES}, the newest "
            f"Kubernetes minor gpucluster's AKS plugin knows to be released ({KUBERNETES_RELEASES_URL}); "
            f"AKS offers a minor only after that ({SUPPORTED_VERSIONS_URL}), and if it does not "
            "offer this one in the region, only the apply fails",
            "check that AKS offers it (az aks get-versions --location <region> -o table) or set "
            f'kubernetesVersion: "{NEWEST_KUBERNETES}"',
        )
    ]


REGIONS_FILE = Path(__file__).parent / "azure_regions.yaml"
"""The Azure region names the ``AKS-REGION`` check knows (public, government and China clouds)."""


def known_regions() -> list[str]:
    """Every region name of :data:`REGIONS_FILE`, sorted."""
    data = load_data_file(REGIONS_FILE)
    return sorted(name for names in data.values() for name in names)


def _check_region(cluster: ClusterSpec) -> list[Finding]:
    if cluster.existing is not None or cluster.region is None:
        return []  # an existing cluster's region is Azure's business, not this file's
    known = known_regions()
    if cluster.region in known:
        return []
    import difflib

    close = difflib.get_close_matches(
        cluster.region.lower().replace(" ", ""), known, n=1, cutoff=0.6
    )
    return [
        _finding(
            cluster,
            "AKS-REGION",
            "warning",
            "-",
            "region",
            f"region {cluster.region!r} is not an Azure region name gpucluster knows; Terraform "
            "accepts it and only the apply fails (the AKS cluster's location)",
            (f"did you mean '{close[0]}'? " if close else "")
            + "write the region's name as `az account list-locations --query [].name` prints it; "
            f"a region newer than this list: ignore this warning (gpucluster_aks/{REGIONS_FILE.name})",
        )
    ]


def _check_managed_pools(cluster: ClusterSpec) -> list[Finding]:
    out = []
    for i, pool in enumerate(cluster.pools):
        if getattr(pool, "managed_gpu", False):
            out.append(
                _finding(
                    cluster,
                    "AKS-MANAGED-GPU",
                    "error",
                    "-",
                    f"pools[{i}].managedGpu",
                    f"node pool '{pool.name}' is an AKS-managed GPU pool (gpuProfile.nvidia.managementMode: Managed): AKS "
                    "then installs its own device plugin, DCGM exporter and GPU health tooling, which duplicate and "
                    "conflict with the GPU Operator operands gpucluster deploys",
                    "remove managedGpu: use an unmanaged GPU pool (gpuDriver Install with gpuStack azure-managed, or "
                    "gpuDriver None with gpuStack operator-managed)",
                )
            )
    return out


_CONSEQUENCE = {
    (
        "azure-managed",
        "driver.enabled",
    ): "the GPU Operator's driver container would fight the driver the AKS node image preinstalls",
    (
        "operator-managed",
        "driver.enabled",
    ): "nothing installs a driver on --gpu-driver none nodes, so GPU nodes stay driverless",
    (
        "azure-managed",
        "toolkit.enabled",
    ): "the operator's toolkit would rewrite the containerd runtime the AKS node image already configured",
    ("operator-managed", "toolkit.enabled"): (
        "containerd gets no nvidia runtime handler: every GPU Operator operand fails with FailedCreatePodSandBox "
        '(no runtime for "nvidia" is configured) and GPU nodes advertise zero nvidia.com/gpu'
    ),
    (
        "azure-managed",
        "operator.runtimeClass",
    ): "it must name the runtime handler the AKS node image preconfigures (nvidia-container-runtime)",
    (
        "operator-managed",
        "operator.runtimeClass",
    ): "the operator-managed tuple names the handler the operator's toolkit installs (nvidia)",
    (
        "azure-managed",
        "nvidiaDriverRoot",
    ): "the DRA kubelet plugin must read the host driver the AKS node image installs at /",
    (
        "operator-managed",
        "nvidiaDriverRoot",
    ): "the DRA kubelet plugin must read the driver the operator installs at /run/nvidia/driver",
}


def _check_driver_ownership(
    cluster: ClusterSpec, recipe: Recipe, components: Mapping[str, Any]
) -> list[Finding]:
    out: list[Finding] = []
    profile = recipe.profile[1] if recipe.profile and recipe.profile[0] == "gpuStack" else None
    gpu_pools = [(i, p) for i, p in enumerate(cluster.pools) if p.gpu]
    drivers = {p.gpu_driver for _, p in gpu_pools if p.gpu_driver is not None}
    pool_mode = None
    for i, pool in gpu_pools:
        if pool.gpu_driver is not None and pool.gpu_driver not in MODE_FOR_GPU_DRIVER:
            out.append(
                _finding(
                    cluster,
                    "AKS-GPU-DRIVER",
                    "error",
                    "-",
                    f"pools[{i}].gpuDriver",
                    f"GPU pool '{pool.name}' has gpuDriver {pool.gpu_driver!r}; driver ownership cannot be verified",
                    "use gpuDriver Install (AKS installs the driver) or None (the GPU Operator installs it)",
                )
            )
            return out
    if len(drivers) > 1:
        out.append(
            _finding(
                cluster,
                "AKS-GPU-DRIVER",
                "error",
                "-",
                "pools",
                f"GPU pools mix gpuDriver values ({', '.join(sorted(drivers))}); one recipe can own the driver only one way",
                "give every GPU pool the same gpuDriver, matching the gpuStack profile",
            )
        )
        return out
    if drivers:
        pool_mode = MODE_FOR_GPU_DRIVER[next(iter(drivers))]
    mode = profile or pool_mode
    if profile is not None and pool_mode is not None and profile != pool_mode:
        i, pool = next((i, p) for i, p in gpu_pools if p.gpu_driver is not None)
        expected = OWNERSHIP_MODES[profile]["gpu_driver"]
        consequence = (
            "nothing on the nodes provides a driver and the recipe does not install one: GPU nodes come up driverless"
            if profile == "azure-managed"
            else "the GPU Operator's driver container would conflict with the driver AKS preinstalls"
        )
        out.append(
            _finding(
                cluster,
                "AKS-GPU-DRIVER",
                "error",
                "-",
                f"pools[{i}].gpuDriver",
                f"GPU pool '{pool.name}' has gpuDriver {pool.gpu_driver} ({pool_mode}) but the gpuStack profile is "
                f"'{profile}' (gpuDriver {expected}): {consequence}",
                f"either set gpuDriver: {expected} on the GPU pools, or choose profile gpuStack: {pool_mode} — pool "
                "creation flags and GPU Operator values must come from the same mode",
            )
        )
        return out
    if mode is None:
        return out
    for (component, path), expected in OWNERSHIP_MODES[mode]["values"].items():
        comp = components.get(component)
        if comp is None:
            continue
        if (
            profile is not None
            and get_path(recipe.profile_owned.get(component) or {}, path, _MISSING) is not _MISSING
        ):
            continue  # the gpuStack profile owns the key: PROFILE-OWNED names the profile value that sets it
        actual = get_path(comp.values, path, _MISSING)
        if actual is _MISSING:
            actual = _CHART_DEFAULTS.get((component, path), _MISSING)
        if actual is _MISSING:
            shown = "unset"
        elif isinstance(actual, bool) != isinstance(expected, bool):
            continue  # a non-boolean toggle is reported by GPU-TOGGLE-TYPE
        elif actual == expected or (
            path == "nvidiaDriverRoot"
            and isinstance(actual, str)
            and actual.rstrip("/") == expected.rstrip("/")
        ):
            continue
        else:
            shown = _show(actual)
        pools = (
            f"GPU pools with gpuDriver {OWNERSHIP_MODES[mode]['gpu_driver']} use"
            if gpu_pools
            else "this cluster uses"
        )
        out.append(
            _finding(
                cluster,
                "AKS-GPU-DRIVER",
                "error",
                component,
                path,
                f"{path} is {shown} but {pools} the {mode} driver ownership mode, which needs {_show(expected)}: "
                f"{_CONSEQUENCE[(mode, path)]}",
                f"use the complete {mode} mode — profile gpuStack: {mode} sets driver.enabled, toolkit.enabled, "
                "operator.runtimeClass and nvidiaDriverRoot together; do not override them one by one",
            )
        )
    return out


def _check_wildcard_toleration(
    cluster: ClusterSpec, components: Mapping[str, Any]
) -> list[Finding]:
    comp = components.get(NODEWRIGHT_CUSTOMIZATIONS)
    if comp is None:
        return []
    tolerations = get_path(comp.values, NODEWRIGHT_TOLERATIONS_PATH, _MISSING)
    if tolerations is _MISSING or not tolerations:
        why = "has no accelerated tolerations, so its manifest falls back to the wildcard (operator Exists, no key)"
    elif not isinstance(tolerations, list):
        why = f"has {NODEWRIGHT_TOLERATIONS_PATH}={tolerations!r}, not a list of tolerations"
    else:
        wild = [t for t in tolerations if not isinstance(t, Mapping) or not t.get("key")]
        if not wild:
            return []
        why = "renders a wildcard accelerated toleration (no key)"
    return [
        _finding(
            cluster,
            "AKS-WILDCARD-TOLERATION",
            "error",
            NODEWRIGHT_CUSTOMIZATIONS,
            NODEWRIGHT_TOLERATIONS_PATH,
            f"{NODEWRIGHT_CUSTOMIZATIONS} {why}: AKS admission collapses a pod's toleration list to just the wildcard "
            "when one is present, which defeats the nodewright operator's drain exemption for its own package pods and "
            "deadlocks packages that declare interrupts on first install (NVIDIA/nodewright#296); recovery needs a "
            "manual cordon and reboot of the node",
            _wildcard_fix(cluster),
        )
    ]


def _wildcard_fix(cluster: ClusterSpec) -> str:
    """AKS-WILDCARD-TOLERATION fix: the pool-derived default when the cluster has GPU pools, else
    (an existing cluster) a keyed toleration matching the taint the GPU nodes carry."""
    opt_out = (
        "; or opt out of the RDMA stack with networkoperator:enabled=false, gpuoperator:driver.rdma.useHostMofed=false, "
        "nodewrightcustomizations:enabled=false"
    )
    taints = [f"{t.key}:{t.effect}" for p in cluster.pools if p.gpu for t in p.taints]
    if taints:
        keyed = ", ".join(f"'{t}'" for t in dict.fromkeys(taints))
        return (
            "remove scheduling.accelerated.tolerations to use the default derived from the GPU pool taints, or pass "
            f"keyed tolerations matching them: scheduling.accelerated.tolerations: [{keyed}]"
            + opt_out
        )
    return (
        "pass a keyed toleration matching the taint of the GPU nodes, e.g. scheduling.accelerated.tolerations: "
        "['nvidia.com/gpu:NoSchedule'] for nodes tainted nvidia.com/gpu (an existing cluster has no pools to derive a "
        "default from)" + opt_out
    )


def _check_host_mofed(
    cluster: ClusterSpec, recipe: Recipe, components: Mapping[str, Any]
) -> list[Finding]:
    """AKS-HOST-MOFED: ``driver.rdma.useHostMofed`` stays false on AKS (AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md)).

    * network-operator disabled, value not explicitly false: warning (no MOFED at all; AICR
      CheckHostMofedWithoutNetworkOperator);
    * network-operator enabled (its DOCA OFED container supplies MOFED, which is not a host
      MOFED) and the value true: error when the GPU Operator builds the driver with RDMA
      (``driver.enabled`` and ``driver.rdma.enabled`` true: nvidia-peermem is built against the
      wrong ib_core, ``modprobe nvidia-peermem`` fails with Invalid argument, GPUDirect RDMA is
      lost), else a warning (inert now, revives the bug on a switch to operator-managed).
    """
    if GPU_OPERATOR not in components:
        return []
    if not any(ref.name == NETWORK_OPERATOR for ref in recipe.component_refs):
        return []
    values = components[GPU_OPERATOR].values
    value = get_path(values, "driver.rdma.useHostMofed", _MISSING)
    fix = "add gpuoperator:driver.rdma.useHostMofed=false to overrides.set"
    if NETWORK_OPERATOR not in components:
        if value is False:
            return []
        shown = "unset" if value is _MISSING else _show(value)
        return [
            _finding(
                cluster,
                "AKS-HOST-MOFED",
                "warning",
                GPU_OPERATOR,
                "driver.rdma.useHostMofed",
                f"network-operator is disabled but driver.rdma.useHostMofed is {shown}: without network-operator no MOFED "
                "is present; keep driver.rdma.useHostMofed=false (the AKS default) unless the node image preinstalls MOFED",
                fix,
            )
        ]
    if value is not True:
        return []  # false, unset (chart default false), or a non-boolean reported by GPU-TOGGLE-TYPE
    builds_peermem = (
        get_path(values, "driver.enabled", True) is True
        and get_path(values, "driver.rdma.enabled", False) is True
    )
    consequence = (
        "the GPU Operator's driver container builds nvidia-peermem against a host MOFED that does not exist, so "
        "`modprobe nvidia-peermem` fails (Invalid argument, an ib_core symbol mismatch) and GPUDirect RDMA is lost"
    )
    if builds_peermem:
        return [
            _finding(
                cluster,
                "AKS-HOST-MOFED",
                "error",
                GPU_OPERATOR,
                "driver.rdma.useHostMofed",
                f"driver.rdma.useHostMofed is true while network-operator supplies MOFED as a container (not a host "
                f"MOFED): {consequence}",
                fix,
            )
        ]
    return [
        _finding(
            cluster,
            "AKS-HOST-MOFED",
            "warning",
            GPU_OPERATOR,
            "driver.rdma.useHostMofed",
            "driver.rdma.useHostMofed is true while network-operator supplies MOFED as a container: inert while the GPU "
            f"Operator does not build the driver with RDMA, but after a switch to operator-managed {consequence}",
            fix,
        )
    ]


SURGE_DRAIN_FLAGS = "--ignore-daemonsets --delete-emptydir-data"
"""``kubectl drain`` flags for a replaced GPU pool: the GPU Operator's operands are DaemonSet pods
(kept; they go with the nodes), and a job's ``emptyDir`` scratch space is lost with its node anyway
(kubectl reference, "kubectl drain": https://kubernetes.io/docs/reference/kubectl/generated/kubectl_drain/)."""


def drain_commands(pool_name: str) -> str:
    """The commands that move every workload off an AKS pool's nodes before the pool is deleted
    (AKS deletes a node pool without cordon and drain; azurerm kubernetes_cluster_node_pool):
    ``kubectl cordon -l kubernetes.azure.com/agentpool=<pool>`` then ``kubectl drain -l ...``
    with :data:`SURGE_DRAIN_FLAGS`. ``pool_name`` is a validated AKS pool name (lowercase
    letters and digits), so the text needs no quoting."""
    selector = f"{AGENTPOOL_LABEL}={pool_name}"
    return f"kubectl cordon -l {selector} && kubectl drain -l {selector} {SURGE_DRAIN_FLAGS}"


def _surge_steps(cluster: ClusterSpec) -> list[Finding]:
    """One ``info[AKS-POOL-SURGE]`` finding per pool that ``replaces`` another: step 1 of 2 (both
    pools exist; the GPU stack's gates wait for the new pool's nodes) and what to run next."""
    out = []
    for i, pool in enumerate(cluster.pools):
        if pool.replaces is None:
            continue
        old = pool.replaces
        out.append(
            _finding(
                cluster,
                "AKS-POOL-SURGE",
                "info",
                "-",
                f"pools[{i}].replaces",
                f"step 1 of 2: GPU pool '{pool.name}' replaces '{old}'; apply creates '{pool.name}' beside "
                f"'{old}' (kept, unchanged), and the GPU stack's readiness gates run again: the apply "
                f"completes only when the GPU Operator (and the DRA kubelet plugin) are ready on every "
                f"GPU node, those of '{pool.name}' included",
                f"after the apply succeeds, move the jobs: {drain_commands(old)}; then step 2: remove pool "
                f"'{old}' and 'replaces: {old}' from the cluster file and apply (Terraform destroys pool "
                f"'{old}' only)",
            )
        )
    return out


SCHEDULER_DOCS = "https://learn.microsoft.com/azure/aks/configure-aks-scheduler"
"""Microsoft Learn, "Configure advanced scheduler profiles on AKS (preview)": the aks-preview CLI
extension, the ``UserDefinedSchedulerConfigurationPreview`` feature flag and
``az aks update --enable-upstream-kubescheduler-user-configuration``."""


def _check_scheduler_mode(cluster: ClusterSpec) -> list[Finding]:
    """AKS-SCHEDULER-MODE (warning): ``schedulerProfiles`` need the cluster's upstream scheduler in
    AKS's ``ManagedByCRD`` configuration mode, which gpucluster does not set."""
    if not cluster.scheduler_profiles:
        return []
    if cluster.existing is None:
        from gpucluster_aks.settings import parse_settings

        group = parse_settings(cluster).existing_resource_group or resource_group_name(cluster)
        target, when = (
            f"--resource-group {group} --name {cluster.name}",
            "after the cluster stack is applied and before the runtime stack: ",
        )
    else:
        target, when = (
            "--resource-group <its resource group> --name <its name>",
            "unless the cluster has it already: ",
        )
    return [
        _finding(
            cluster,
            "AKS-SCHEDULER-MODE",
            "warning",
            "scheduler-profiles",
            "schedulerProfiles",
            "the scheduler-profiles release installs AKS's SchedulerConfiguration, which a cluster serves "
            "only when its upstream scheduler is in the ManagedByCRD configuration mode (AKS preview); "
            "gpucluster does not set that mode, and without it the release fails at apply",
            f"{when}az extension add --name aks-preview; az feature register --namespace "
            "Microsoft.ContainerService --name UserDefinedSchedulerConfigurationPreview; "
            f"az aks update {target} --enable-upstream-kubescheduler-user-configuration ({SCHEDULER_DOCS})",
        )
    ]


@hookimpl
def gpucluster_policy_checks(cluster, recipe, components):
    """AKS checks on the final effective values."""
    findings: list[Finding] = []
    findings += _check_version(cluster)
    findings += _check_region(cluster)
    findings += _check_managed_pools(cluster)
    findings += _check_driver_ownership(cluster, recipe, components)
    findings += _check_wildcard_toleration(cluster, components)
    findings += _check_host_mofed(cluster, recipe, components)
    findings += _surge_steps(cluster)
    findings += _check_scheduler_mode(cluster)
    return findings

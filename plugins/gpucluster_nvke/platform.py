"""NVKE plugin: platform declaration, catalog directory and cluster preparation."""

from __future__ import annotations

import copy
from pathlib import Path

from gpucluster.sdk import (
    ClusterSpec,
    ExistingCluster,
    GpuclusterError,
    Override,
    Platform,
    hookimpl,
)
from gpucluster_nvke.settings import (
    MIN_KUBERNETES,
    PROVIDER_ID_PREFIX,
    SERVICE,
    SETTINGS_KEYS,
    parse_settings,
)

CATALOG_DIR = Path(__file__).parent / "catalog"

DEFAULT_KUBECONFIG = "~/.kube/config"

PLATFORM = Platform(
    service=SERVICE,
    display_name="NVIDIA Kubernetes Engine (GB200 NVL, Forge/NICo bare metal)",
    accelerators=("gb200",),
    oses=("ubuntu",),
    intents=("training",),
    platforms=("any", "kubeflow"),
    provisions_cluster=False,
    min_kubernetes=MIN_KUBERNETES,
    provider_id_prefix=PROVIDER_ID_PREFIX,
    settings=SETTINGS_KEYS,
    gpu_taints=("nvidia.com/gpu:NoSchedule",),
)
"""NVKE: the cluster exists (no ``<name>-cluster`` stack); nodes carry ``providerID: nico://``.
``gpu_taints``: the GPU-node taint the NVKE NicClusterPolicy tolerates (:mod:`gpucluster_nvke.fabric`)."""


@hookimpl
def gpucluster_platforms():
    return [PLATFORM]


@hookimpl
def gpucluster_catalog_dirs():
    return [CATALOG_DIR]


def prepare(cluster: ClusterSpec) -> ClusterSpec:
    """Validate an NVKE cluster and fill in what the runtime stack needs (pure; returns a copy).

    * ``existing``: the kubeconfig path/context of the existing cluster, from the cluster
      file's ``existing: {kubeconfig, context}``; default ``~/.kube/config`` and its current
      context.
    * ``pools``: refused, NVKE nodes are provisioned by Forge/NICo, not by gpucluster.
    * ``criteria.accelerator``/``criteria.os``: only the declared ``gb200``/``ubuntu`` (or ``any``).
    * accelerated node selector/tolerations: moved to ``settings.rdmaModules`` so they reach
      only the ``rdma-modules`` NodeWright (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup): the NicClusterPolicy keeps its fixed affinity
      and the GPU Operator selects nodes by its own labels).
    * ``settings.rdmaModules.enabled: false``: becomes an ``enabled=false`` override of
      ``rdma-modules``, so the component leaves the recipe (and the expected resources) rather
      than only the bundle.

    Raises:
        GpuclusterError: invalid settings, node pools given, an accelerator/OS NVKE has no recipe
            for, or the accelerated scheduling inputs given twice.
    """
    cluster = copy.deepcopy(cluster)
    for field_name, allowed in (("accelerator", PLATFORM.accelerators), ("os", PLATFORM.oses)):
        value = getattr(cluster.criteria, field_name)
        if value != "any" and value not in allowed:
            raise GpuclusterError(
                f"NVKE recipes exist for {field_name} {', '.join(allowed)} only, not '{value}' (a wildcard "
                f"{field_name} overlay would otherwise mix an unqualified {value} stack into the NVKE fabric)",
                file=cluster.source,
                cluster=cluster.name,
                key=f"criteria.{field_name}",
                allowed=", ".join(allowed),
                fix=f"set criteria.{field_name}: {allowed[0]}",
            )
    settings = parse_settings(cluster.settings, file=cluster.source, cluster=cluster.name)
    if cluster.pools:
        raise GpuclusterError(
            f"NVKE clusters exist already; gpucluster does not create node pools for them "
            f"({len(cluster.pools)} given: {', '.join(p.name for p in cluster.pools)})",
            file=cluster.source,
            cluster=cluster.name,
            key="pools",
            fix="remove 'pools'; point existing.kubeconfig/existing.context at the cluster instead",
        )
    if cluster.existing is None:
        cluster.existing = ExistingCluster(kubeconfig_path=DEFAULT_KUBECONFIG, context=None)

    sched = cluster.scheduling
    if sched.accelerated_node_selector or sched.accelerated_tolerations:
        raw = dict(cluster.settings or {})
        rdma = dict(raw.get("rdmaModules") or {})
        for key, given in (
            ("nodeSelector", sched.accelerated_node_selector),
            ("tolerations", sched.accelerated_tolerations),
        ):
            if given and key in rdma:
                raise GpuclusterError(
                    f"the accelerated node {'selector' if key == 'nodeSelector' else 'tolerations'} is given both as a "
                    f"scheduling input and as settings.rdmaModules.{key}",
                    file=cluster.source,
                    cluster=cluster.name,
                    key=f"settings.rdmaModules.{key}",
                    fix="give it once; on NVKE it reaches only the rdma-modules NodeWright",
                )
        if sched.accelerated_node_selector:
            rdma["nodeSelector"] = dict(sched.accelerated_node_selector)
        if sched.accelerated_tolerations:
            rdma["tolerations"] = [t.as_dict() for t in sched.accelerated_tolerations]
        raw["rdmaModules"] = rdma
        cluster.settings = raw
        sched.accelerated_node_selector = {}
        sched.accelerated_tolerations = []
        parse_settings(cluster.settings, file=cluster.source, cluster=cluster.name)

    if not settings.rdma_modules_enabled:
        toggles = [
            o
            for o in cluster.overrides
            if o.kind == "set"
            and o.path == "enabled"
            and o.component.strip().lower() in ("rdma-modules", "rdmamodules")
        ]
        if toggles and toggles[-1].value is True:
            raise GpuclusterError(
                f"settings.rdmaModules.enabled is false but {toggles[-1].key or 'an override'} sets "
                f"{toggles[-1].component}:enabled=true",
                file=cluster.source,
                cluster=cluster.name,
                key="settings.rdmaModules.enabled",
                fix="decide once: remove the override, or set settings.rdmaModules.enabled: true",
            )
        if not any(o.value is False for o in toggles[-1:]):
            cluster.overrides.append(
                Override(
                    component="rdma-modules",
                    kind="set",
                    path="enabled",
                    value=False,
                    source=cluster.source,
                    key="settings.rdmaModules.enabled",
                )
            )
    return cluster


@hookimpl
def gpucluster_prepare_cluster(cluster):
    return prepare(cluster)

"""OKE plugin: platform declaration, catalog directory and cluster preparation.

Oracle Kubernetes Engine clusters exist already: gpucluster produces only the ``<name>-runtime``
stack, reaching the cluster through the cluster file's ``existing: {kubeconfig, context}``
(default ``~/.kube/config`` and its current context). OKE nodes carry the instance OCID as
``spec.providerID`` (``ocid1.instance.oc1.<region>.<id>``, no URI scheme), which is how AICR's
snapshot maps a node to ``service: oke`` and how ``gpucluster detect`` does.

Cluster-file shape::

    - name: oke-gb200
      criteria: {service: oke, accelerator: gb200, os: ubuntu, intent: training}
      profile: {gpuStack: oci-managed}        # default; or operator-managed
      kubernetesVersion: "1.34"               # the existing cluster's version (policy OKE-K8S-VERSION)
      existing: {kubeconfig: ~/.kube/oke.yaml, context: oke-gb200}
      settings:
        nvidiaGpuPluginAddon: installed       # optional: installed | absent (oci ce cluster list-addons)
        imageDriverParams: [NVreg_GrdmaPciTopoCheckOverride=1]   # optional: what the image's driver loads with

Facts: AICR recipe data (overlay ``oke-ol`` and its gpuStack profile; ``pkg/collector/k8s``
providerID parsing and the ``oke-addons`` projection of ``oci ce cluster list-addons``).
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path

from gpucluster.sdk import (
    ClusterSpec,
    ExistingCluster,
    GpuclusterError,
    Platform,
    check_existing,
    hookimpl,
    load_data_file,
)

__all__ = [
    "gpucluster_platforms",
    "gpucluster_catalog_dirs",
    "gpucluster_prepare_cluster",
    "prepare",
    "recipe_leaves",
    "OKE_PLATFORM",
    "SERVICE",
    "PROVIDER_ID_PREFIX",
    "PROFILE_NAME",
    "PROFILE_DEFAULT",
    "PROFILE_VALUES",
    "ADDON_STATES",
    "DEFAULT_KUBECONFIG",
]

SERVICE = "oke"
"""AICR ``service`` criteria value of Oracle Kubernetes Engine."""

CATALOG_DIR = Path(__file__).parent / "catalog"

PROVIDER_ID_PREFIX = "ocid1."
"""OKE nodes set ``spec.providerID`` to the raw instance OCID (``ocid1.instance.oc1...``), no
``scheme://`` (AICR ``parseProvider``: ``ocid1.`` -> ``oke``)."""

PROFILE_NAME = "gpuStack"
PROFILE_DEFAULT = "oci-managed"
PROFILE_VALUES = ("oci-managed", "operator-managed")
"""gpuStack values (AICR overlay ``oke-ol``): ``oci-managed`` = Oracle GPU image (driver, toolkit)
plus OKE's NvidiaGpuPlugin add-on as the nvidia.com/gpu advertiser; ``operator-managed`` =
driverless images, add-on removed, the GPU Operator installs driver, toolkit and device plugin."""

ADDON_STATES = {"installed": "oci-managed", "absent": "operator-managed"}
"""``settings.nvidiaGpuPluginAddon`` -> the gpuStack value it qualifies (AICR constraint
``K8s.oke-addons.nvidia-gpu-plugin``: ``installed`` = the add-on is listed and ACTIVE)."""

IMAGE_DRIVER_PARAM = re.compile(r"^NVreg_[A-Za-z0-9_]{1,64}=[A-Za-z0-9_.,:-]{1,64}$")
"""One entry of ``settings.imageDriverParams``: an nvidia module parameter as ``modprobe`` takes it
(``NVreg_<Name>=<value>``; NVIDIA's driver README, "Kernel module parameters")."""

SETTINGS_KEYS = ("nvidiaGpuPluginAddon", "imageDriverParams")
"""OKE's own ``settings`` keys (``Platform.settings``); the core refuses others, except the core
ones every platform accepts (``gateImage``, docs/gates.md)."""

DEFAULT_KUBECONFIG = "~/.kube/config"

OKE_PLATFORM = Platform(
    service=SERVICE,
    display_name="Oracle Kubernetes Engine",
    accelerators=("a100", "gb200", "l40s"),
    oses=("ol", "ubuntu"),
    intents=("training", "inference"),
    platforms=("any", "kubeflow", "dynamo"),
    provisions_cluster=False,
    min_kubernetes="1.32",
    provider_id_prefix=PROVIDER_ID_PREFIX,
    profiles={PROFILE_NAME: (PROFILE_DEFAULT, PROFILE_VALUES)},
    settings=SETTINGS_KEYS,
    gpu_taints=("nvidia.com/gpu:NoSchedule",),
)
"""OKE: the cluster exists (no ``<name>-cluster`` stack). ``min_kubernetes`` is the family floor
of overlay ``oke-ol``; each recipe's own ``K8s.server.version`` is checked by policy.
``gpu_taints``: OKE GPU nodes are tainted ``nvidia.com/gpu`` (AICR
recipes/components/network-operator/manifests/nic-cluster-policy-oke-gb200.yaml: "RDMA DaemonSets
must land on tainted GPU nodes", tolerating ``nvidia.com/gpu``)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@hookimpl
def gpucluster_platforms():
    """Declare the ``oke`` service (A100/GB200/L40S, Oracle Linux and Ubuntu, gpuStack profile)."""
    return [OKE_PLATFORM]


@hookimpl
def gpucluster_catalog_dirs():
    """The OKE overlays, values files and manifest templates (``plugins/gpucluster_oke/catalog``)."""
    return [CATALOG_DIR]


@functools.lru_cache(maxsize=1)
def recipe_leaves() -> tuple[tuple[str, str, str, str], ...]:
    """``(accelerator, os, intent, platform)`` of every OKE recipe in this plugin's catalog.

    A recipe is an overlay whose criteria name ``service: oke`` and a concrete accelerator, os
    and intent (platform ``any`` when absent). Read from ``catalog/overlays/*.yaml``, so adding
    an overlay there (no code) makes its combination acceptable to :func:`prepare`.
    """
    leaves = set()
    for path in sorted((CATALOG_DIR / "overlays").glob("*.yaml")):
        doc = load_data_file(path) or {}
        crit = (doc.get("spec") or {}).get("criteria") or {}
        if crit.get("service") != SERVICE:
            continue
        fields = tuple(crit.get(f, "any") for f in ("accelerator", "os", "intent", "platform"))
        if "any" not in fields[:3]:
            leaves.add(fields)
    return tuple(sorted(leaves))


def _leaf_name(leaf: tuple[str, str, str, str]) -> str:
    acc, os_, intent, platform = leaf
    return f"{acc}/{os_}/{intent}" + ("" if platform == "any" else f"/{platform}")


def _check_criteria(cluster: ClusterSpec, where: dict) -> None:
    crit = cluster.criteria
    for field_name, allowed in (
        ("accelerator", OKE_PLATFORM.accelerators),
        ("os", OKE_PLATFORM.oses),
    ):
        value = getattr(crit, field_name)
        if value != "any" and value not in allowed:
            raise GpuclusterError(
                f"OKE recipes exist for {field_name} {', '.join(allowed)} only, not '{value}' (a wildcard "
                f"'{value}' overlay would otherwise combine with the generic OKE overlays into an unqualified stack)",
                key=f"criteria.{field_name}",
                allowed=", ".join(allowed),
                fix=f"set criteria.{field_name} to one of the allowed values",
                **where,
            )
    if "any" in (crit.accelerator, crit.os, crit.intent):
        return  # partial queries: recipe resolution reports what it cannot cover
    leaves = recipe_leaves()
    if not any(leaf[:3] == (crit.accelerator, crit.os, crit.intent) for leaf in leaves):
        raise GpuclusterError(
            f"there is no OKE recipe for accelerator {crit.accelerator}, os {crit.os}, intent {crit.intent}",
            key="criteria",
            allowed="accelerator/os/intent[/platform]: "
            + ", ".join(_leaf_name(leaf) for leaf in leaves),
            fix="choose one of the listed OKE recipes",
            **where,
        )


def _check_settings(cluster: ClusterSpec, where: dict) -> None:
    settings = cluster.settings or {}  # keys checked by the core against OKE_PLATFORM.settings
    if "nvidiaGpuPluginAddon" in settings:
        state = settings["nvidiaGpuPluginAddon"]
        if not isinstance(state, str) or state not in ADDON_STATES:
            raise GpuclusterError(
                f"settings.nvidiaGpuPluginAddon is {state!r}",
                key="settings.nvidiaGpuPluginAddon",
                allowed=", ".join(ADDON_STATES),
                fix="installed: `oci ce cluster list-addons --cluster-id <ocid> --all` lists NvidiaGpuPlugin ACTIVE; "
                "absent: it is not listed; any other state (UPDATING, DELETING, FAILED...): wait until it settles",
                **where,
            )
    _check_image_driver_params(settings, where)


def _check_image_driver_params(settings: dict, where: dict) -> None:
    if "imageDriverParams" not in settings:
        return
    params = settings["imageDriverParams"]
    bad = (
        [params]
        if not isinstance(params, list)
        else [p for p in params if not isinstance(p, str) or not IMAGE_DRIVER_PARAM.fullmatch(p)]
    )
    if bad:
        raise GpuclusterError(
            f"settings.imageDriverParams has {bad[0]!r}",
            key="settings.imageDriverParams",
            allowed="a list of NVreg_<Name>=<value>, e.g. [NVreg_GrdmaPciTopoCheckOverride=1]",
            fix="list the nvidia module parameters the node image's driver is loaded with, as `cat "
            "/proc/driver/nvidia/params` shows them on a GPU node (GrdmaPciTopoCheckOverride: 1 is "
            "NVreg_GrdmaPciTopoCheckOverride=1)",
            **where,
        )


def _check_existing(existing: ExistingCluster, where: dict) -> None:
    """The core's check of ``existing`` (the same for every platform; also run on the default)."""
    check_existing(existing, key="existing", **where)


def prepare(cluster: ClusterSpec) -> ClusterSpec:
    """Validate an OKE cluster and fill in what the runtime stack needs (pure; returns a copy).

    * ``criteria``: accelerator ``a100``/``gb200``/``l40s`` and os ``ol``/``ubuntu`` (or ``any``);
      a fully stated accelerator/os/intent must name an OKE recipe of :func:`recipe_leaves`.
    * ``profile``: only ``gpuStack`` with ``oci-managed`` (default) or ``operator-managed``
      (checked by the core against ``Platform.profiles`` before this hook runs).
    * ``pools`` and ``region``: refused; OKE clusters and node pools are created outside
      gpucluster (console, ``oci ce``, Terraform OCI provider).
    * ``existing``: default ``~/.kube/config`` and its current context; the kubeconfig path
      must be absolute or ``~/``-relative (Terraform reads it from the stack folder), path and
      context without surrounding whitespace or control characters.
    * ``settings``: only ``nvidiaGpuPluginAddon`` (``installed`` | ``absent``; its agreement with
      gpuStack is policy ``OKE-GPU-PLUGIN-ADDON``) and ``imageDriverParams`` (a list of
      ``NVreg_<Name>=<value>``: the module parameters the image's driver is known to load with; policy
      ``OKE-KERNEL-MODULE-PARAMS`` reads it).

    Raises:
        GpuclusterError: naming the cluster file, cluster and key.
    """
    cluster = copy.deepcopy(cluster)
    where = {"file": cluster.source, "cluster": cluster.name}
    _check_criteria(cluster, where)
    _check_settings(cluster, where)
    if cluster.pools:
        raise GpuclusterError(
            f"OKE clusters exist already; gpucluster does not create node pools for them "
            f"({len(cluster.pools)} given: {', '.join(p.name for p in cluster.pools)})",
            key="pools",
            fix="remove 'pools' (create OKE node pools with the console, oci ce or the OCI Terraform provider); "
            "point existing.kubeconfig/existing.context at the cluster instead",
            **where,
        )
    if cluster.region is not None:
        raise GpuclusterError(
            f"region '{cluster.region}' has no effect on an OKE cluster: gpucluster does not create it and reaches it "
            "through the kubeconfig",
            key="region",
            fix="remove 'region'",
            **where,
        )
    if cluster.existing is None:
        cluster.existing = ExistingCluster(kubeconfig_path=DEFAULT_KUBECONFIG, context=None)
    _check_existing(cluster.existing, where)
    return cluster


@hookimpl
def gpucluster_prepare_cluster(cluster):
    """:func:`prepare` (the core calls it for OKE clusters only)."""
    return prepare(cluster)

"""NVKE plugin: ``gpucluster_policy_checks`` (fail closed on configurations known to break NVKE).

Every check is a pure function of the prepared cluster, its settings and the final component
values; each returns :class:`gpucluster.sdk.Finding` s (``error`` stops synthesis, exit 2).
Facts: AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any

from gpucluster.sdk import ClusterSpec, Finding, get_path, hookimpl
from gpucluster_nvke import fabric
from gpucluster_nvke.gates import MIN_DRA_VERSION
from gpucluster_nvke.settings import (
    MIN_KUBERNETES,
    PCI_15B3_LABEL,
    NvkeSettings,
    parse_settings,
    version_less,
)


def _find_key(node: Any, key: str, prefix: str = "") -> Iterator[str]:
    """Dotted paths of every mapping key named ``key`` (lists index as ``[i]``)."""
    if isinstance(node, Mapping):
        for k in sorted(node, key=str):
            path = f"{prefix}.{k}" if prefix else str(k)
            if k == key:
                yield path
            yield from _find_key(node[k], key, path)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _find_key(item, key, f"{prefix}[{i}]")


def _env(values: Mapping[str, Any], path: str) -> dict[str, Any]:
    env = get_path(values, path)
    out: dict[str, Any] = {}
    if isinstance(env, list):
        for item in env:
            if isinstance(item, Mapping) and "name" in item:
                out[str(item["name"])] = item.get("value")
    return out


class _Checks:
    def __init__(self, cluster: ClusterSpec, settings: NvkeSettings, components: Mapping[str, Any]):
        self.cluster = cluster
        self.settings = settings
        self.components = components
        self.findings: list[Finding] = []

    def error(self, id_: str, component: str, key: str, message: str, fix: str) -> None:
        self.findings.append(
            Finding(
                id=id_,
                severity="error",
                cluster=self.cluster.name,
                component=component,
                key=key,
                message=message,
                fix=fix,
            )
        )

    # -- cluster ------------------------------------------------------------------------------

    def kubernetes(self) -> None:
        version = str(self.cluster.kubernetes_version)
        try:
            too_old = version_less(version, MIN_KUBERNETES)
        except ValueError:
            too_old = True
        if too_old:
            self.error(
                "NVKE-K8S-VERSION",
                "-",
                "kubernetesVersion",
                f"Kubernetes {version} is older than {MIN_KUBERNETES}: NVKE GB200 recipes need DRA resource.k8s.io/v1 "
                "(GA in 1.34) for ComputeDomains, the IMEX channels of multi-node NVLink",
                f"run NVKE on Kubernetes {MIN_KUBERNETES} or newer and set kubernetesVersion accordingly",
            )

    # -- GPU Operator -------------------------------------------------------------------------

    def gpu_operator(self) -> None:
        comp = self.components.get("gpu-operator")
        if comp is None:
            return
        v = comp.values
        for path in _find_key(v.get("driver") or {}, "rdma", "driver"):
            if path == "driver.rdma":
                self.error(
                    "NVKE-DRIVER-RDMA",
                    "gpu-operator",
                    "driver.rdma",
                    "driver.rdma is set: on NVKE GPUDirect RDMA runs over DMA-BUF; nvidia-peermem has no build for the "
                    "64k-page Grace kernel and needs DOCA-OFED symbols this recipe never installs",
                    "remove every driver.rdma override (the recipe sets no driver.rdma value)",
                )
        for key, want in (
            ("driver.enabled", True),
            ("toolkit.enabled", True),
            ("gdrcopy.enabled", True),
        ):
            if get_path(v, key) is not want:
                self.error(
                    "NVKE-GPU-STACK",
                    "gpu-operator",
                    key,
                    f"{key} is {get_path(v, key)!r}: NVKE GPU nodes come with no GPU driver, toolkit or GDRCopy; "
                    "the GPU Operator installs all three",
                    f"set {key}: true (remove the override)",
                )
        env = _env(v, "toolkit.env")
        if env.get("RUNTIME_CONFIG_SOURCE") != "file":
            self.error(
                "NVKE-GPU-STACK",
                "gpu-operator",
                "toolkit.env.RUNTIME_CONFIG_SOURCE",
                f"RUNTIME_CONFIG_SOURCE is {env.get('RUNTIME_CONFIG_SOURCE')!r}: the default reads `containerd config dump`, "
                "whose version-4 drop-in stops the image's containerd 2.3 (version-3 config) from starting",
                "keep toolkit.env RUNTIME_CONFIG_SOURCE=file",
            )
        unprivileged = env.get("ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED")
        if (
            not isinstance(unprivileged, str) or unprivileged.lower() != "false"
        ):  # EnvVar values are strings
            self.error(
                "NVKE-GPU-STACK",
                "gpu-operator",
                "toolkit.env.ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED",
                "unprivileged containers could take every GPU with NVIDIA_VISIBLE_DEVICES=all",
                'keep toolkit.env ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED="false"',
            )
        name = get_path(v, "driver.kernelModuleConfig.name")
        if not isinstance(name, str) or not name:
            self.error(
                "NVKE-KERNEL-MODULE-PARAMS",
                "gpu-operator",
                "driver.kernelModuleConfig.name",
                "no kernel module parameters ConfigMap: without NVreg_GrdmaPciTopoCheckOverride=1 GPUDirect RDMA over "
                "DMA-BUF is refused and NCCL falls back to sockets",
                "keep driver.kernelModuleConfig.name (the recipe's kernel-module-params ConfigMap)",
            )

    # -- DRA driver ---------------------------------------------------------------------------

    def dra(self) -> None:
        comp = self.components.get("nvidia-dra-driver-gpu")
        if comp is None:
            return
        why = (
            "the NVKE API server enables OwnerReferencesPermissionEnforcement, under which the 0.5.0 ComputeDomain "
            "daemon on the second tray cannot join the trays' shared NVLink clique, so multi-node NVLink jobs never start"
        )
        for key, version in (
            ("version", comp.ref.version),
            ("image.tag", get_path(comp.values, "image.tag")),
        ):
            if not version:
                continue
            try:
                old = version_less(str(version), MIN_DRA_VERSION)
            except ValueError:
                old = True
            if old:
                self.error(
                    "NVKE-DRA-VERSION",
                    "nvidia-dra-driver-gpu",
                    key,
                    f"nvidia-dra-driver-gpu {version} is older than {MIN_DRA_VERSION}: {why}",
                    f"use {MIN_DRA_VERSION} or newer (remove the lower {key} override)",
                )

    # -- Network Operator / SR-IOV ------------------------------------------------------------

    def network_operator(self) -> None:
        comp = self.components.get("network-operator")
        ofed_why = (
            "a DOCA-OFED driver container unloads the inbox mlx5_core that OVN-Kubernetes rides on, and the node's "
            "primary address disappears with it (a reboot restores it, then the operator applies the driver again)"
        )
        if comp is not None:
            for path in _find_key(comp.values, "ofedDriver"):
                if path == "operator.ofedDriver" or path.startswith("operator.ofedDriver."):
                    continue  # the chart's init-container settings, not a driver
                self.error(
                    "NVKE-OFED-DRIVER",
                    "network-operator",
                    path,
                    f"{path} is set: {ofed_why}",
                    "remove the ofedDriver values; NVKE keeps the inbox driver",
                )
            cfg = "sriov-network-operator.sriovOperatorConfig"
            plugins = get_path(comp.values, f"{cfg}.disablePlugins") or []
            if "sriov-ib-networks" in self.components and "mellanox" not in plugins:
                self.error(
                    "NVKE-SRIOV-MELLANOX-PLUGIN",
                    "network-operator",
                    f"{cfg}.disablePlugins",
                    "the SR-IOV config daemon's mellanox plugin is enabled: it rewrites firmware NUM_OF_VFS and runs "
                    "`mstfwreset -l 3`, which the GB200 tray firmware rejects, leaving the node cordoned in a reset loop",
                    f"keep {cfg}.disablePlugins: [mellanox]",
                )
            for key in ("sriovNetworkOperator.enabled", "maintenanceOperator.enabled"):
                if (
                    "sriov-ib-networks" in self.components
                    and get_path(comp.values, key) is not True
                ):
                    self.error(
                        "NVKE-SRIOV-OPERATOR",
                        "network-operator",
                        key,
                        f"{key} is not true but sriov-ib-networks needs the SR-IOV Network Operator and the Maintenance "
                        "Operator (its external drainer)",
                        f"set {key}: true, or disable sriov-ib-networks",
                    )
            daemon = get_path(comp.values, f"{cfg}.configDaemonNodeSelector") or {}
            if isinstance(daemon, Mapping) and PCI_15B3_LABEL in daemon:
                self.error(
                    "NVKE-SRIOV-SELECTOR",
                    "network-operator",
                    f"{cfg}.configDaemonNodeSelector",
                    self._pci_why(),
                    "select SR-IOV nodes by feature.node.kubernetes.io/rdma.available=true",
                )
        if "network-operator" in self.components:
            version = comp.ref.version if comp is not None else ""
            spec = fabric.nic_cluster_policy(self.settings, network_operator_version=version)[
                "spec"
            ]
            if "ofedDriver" in spec:
                self.error(
                    "NVKE-OFED-DRIVER",
                    "network-operator",
                    "settings.nicClusterPolicy.ofedDriver",
                    f"the NicClusterPolicy carries an ofedDriver: {ofed_why}",
                    "remove ofedDriver from settings.nicClusterPolicy",
                )

    @staticmethod
    def _pci_why() -> str:
        return (
            f"SR-IOV nodes are selected by {PCI_15B3_LABEL}: NVKE control-plane nodes carry that label for their "
            "BlueField-3 without any ConnectX-7, and a device-plugin pod placed there waits forever"
        )

    def fabric(self) -> None:
        if "sriov-ib-networks" not in self.components:
            return
        s = self.settings
        if s.num_vfs > s.firmware_num_vfs:
            self.error(
                "NVKE-SRIOV-NUMVFS",
                "sriov-ib-networks",
                "settings.numVfs",
                f"numVfs {s.num_vfs} exceeds the firmware's NUM_OF_VFS {s.firmware_num_vfs}: with the mellanox plugin "
                "off, VFs are created by a sysfs write that cannot exceed the firmware count, so the policy never "
                "syncs",
                f"set settings.numVfs <= {s.firmware_num_vfs}, or raise NUM_OF_VFS on every tray (mstconfig) and "
                "settings.firmwareNumVfs with it",
            )
        pod = ipaddress.ip_network(s.pod_network)
        seen: list[tuple[int, ipaddress.IPv4Network | ipaddress.IPv6Network]] = []
        for rail in s.rails:
            net = ipaddress.ip_network(rail.subnet)
            if net.version == pod.version and net.overlaps(pod):
                self.error(
                    "NVKE-IPPOOL-OVERLAP",
                    "sriov-ib-networks",
                    f"settings.rails[{rail.index}].subnet",
                    f"rail {rail.index} IPPool {net} overlaps the pod network {pod}: IPoIB routes would shadow pod "
                    "traffic",
                    "move the rail subnet outside settings.podNetwork (default rails use 10.255.<4n>.0/22)",
                )
            for other, onet in seen:
                if onet.version == net.version and onet.overlaps(net):
                    self.error(
                        "NVKE-IPPOOL-OVERLAP",
                        "sriov-ib-networks",
                        f"settings.rails[{rail.index}].subnet",
                        f"rail {rail.index} IPPool {net} overlaps rail {other} IPPool {onet}",
                        "give every rail its own subnet",
                    )
            seen.append((rail.index, net))
        if PCI_15B3_LABEL in s.sriov_node_selector:
            self.error(
                "NVKE-SRIOV-SELECTOR",
                "sriov-ib-networks",
                "settings.sriovNodeSelector",
                self._pci_why(),
                "select SR-IOV nodes by feature.node.kubernetes.io/rdma.available=true",
            )


def check(
    cluster: ClusterSpec, settings: NvkeSettings, components: Mapping[str, Any]
) -> list[Finding]:
    """All NVKE findings for the final effective ``components`` (ids ``NVKE-*``)."""
    c = _Checks(cluster, settings, components)
    c.kubernetes()
    c.gpu_operator()
    c.dra()
    c.network_operator()
    c.fabric()
    return c.findings


@hookimpl
def gpucluster_policy_checks(cluster, recipe, components):
    settings = parse_settings(cluster.settings, file=cluster.source, cluster=cluster.name)
    return check(cluster, settings, components)

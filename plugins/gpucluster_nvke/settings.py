"""NVKE platform inputs (``ClusterSpec.settings``): parsing, defaults and validation.

Everything here is pure: ``parse_settings`` turns the raw ``settings`` mapping of a cluster
file into a frozen :class:`NvkeSettings` or raises :class:`gpucluster.sdk.GpuclusterError`
naming the file, cluster and key. Cross-field *policy* (numVfs above the firmware VF count,
IPPools overlapping the pod network, selecting SR-IOV nodes by ``pci-15b3.present``) is left to
:mod:`gpucluster_nvke.policy`, so those refusals carry a policy id.

The existing cluster itself is reached through the cluster file's ``existing: {kubeconfig,
context}`` (default ``~/.kube/config`` and its current context).

Cluster-file shape (every key optional; defaults from AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup))::

    settings:
      rails:                            # InfiniBand rails, in rail order (rail n = list index n)
        - {name: mlx5_0, rootDevice: "0000:03:00.0"}
        - {name: mlx5_1, rootDevice: "0002:03:00.0", pfName: ibP2p3s0}
        - ...
      firmwareNumVfs: 16                # NUM_OF_VFS the firmware enables per PF (mstconfig q)
      numVfs: 16                        # VFs the SriovNetworkNodePolicy asks for per rail
      podNetwork: 192.168.0.0/16        # OVN-Kubernetes pod network the IPPools must avoid
      networkNamespace: default         # where each rail's NetworkAttachmentDefinition lands
      perNodeBlockSize: 16              # IPs nv-ipam hands each node per rail
      sriovNodeSelector: {feature.node.kubernetes.io/rdma.available: "true"}
      nicClusterPolicy: {}              # patch deep-merged over the generated NicClusterPolicy spec
      rdmaModules:
        enabled: true                   # false drops the rdma-modules component from the recipe
        autoTaintNewNodes: true
        nodeSelector: {}                # replaces the default pci-15b3.present selector
        tolerations: []                 # replaces the default wildcard toleration
      teardown:
        image: registry.k8s.io/kubectl:v1.34.1@sha256:<digest>
        timeoutSeconds: 780
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucluster.sdk import (
    DEFAULT_KUBECTL_IMAGE,
    MOVING_TAGS,
    Fields,
    GpuclusterError,
    Where,
    image_tag,
)

SERVICE = "nvke"
"""AICR ``service`` criteria value of NVIDIA Kubernetes Engine."""

PROVIDER_ID_PREFIX = "nico://"
"""Node ``spec.providerID`` scheme of NVKE nodes (Forge/NICo; AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup))."""

MIN_KUBERNETES = "1.34"
"""DRA ``resource.k8s.io/v1`` (ComputeDomains) is GA from 1.34 (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup))."""

DEFAULT_RAILS = ("mlx5_0", "mlx5_1", "mlx5_3", "mlx5_4")
"""The four ConnectX-7 InfiniBand rails of a GB200 tray; ``mlx5_2`` is the BlueField-3 host
representor and is never a rail (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup))."""

DEFAULT_FIRMWARE_NUM_VFS = 16
"""Firmware ``NUM_OF_VFS`` per PF on the reference trays (``sriov_totalvfs``)."""

DEFAULT_NUM_VFS = 16
"""VFs requested per rail: the firmware count (the ``mellanox`` config-daemon plugin is off, so
VF creation is a sysfs write that cannot exceed it)."""

DEFAULT_POD_NETWORK = "192.168.0.0/16"
"""OVN-Kubernetes pod network of the reference tenant."""

RAIL_SUPERNET = ipaddress.ip_network("10.255.0.0/16")
"""Rail n's IPPool is ``10.255.<4n>.0/22`` (NVIDIA k8s-launch-kit's ``192.168.<4n>.0/22``, moved out of the
NVKE pod network 192.168.0.0/16)."""

DEFAULT_NETWORK_NAMESPACE = "default"
DEFAULT_PER_NODE_BLOCK_SIZE = 16
RDMA_AVAILABLE_LABEL = "feature.node.kubernetes.io/rdma.available"
PCI_15B3_LABEL = "feature.node.kubernetes.io/pci-15b3.present"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
DEFAULT_TEARDOWN_IMAGE = DEFAULT_KUBECTL_IMAGE
"""The teardown wait Job's image: the gates' upstream kubectl image, pinned by digest (its script
needs only /bin/sh, kubectl, date and sleep). It was the community image alpine/kubectl:1.34.1,
pinned by tag only."""
DEFAULT_TEARDOWN_TIMEOUT_SECONDS = 780
"""Fits inside the 900 s Helm timeout of a manifest release; a destroy that runs out of it
fails and can simply be re-run (the wait resumes)."""

SETTINGS_KEYS = (
    "rails",
    "firmwareNumVfs",
    "numVfs",
    "podNetwork",
    "networkNamespace",
    "perNodeBlockSize",
    "sriovNodeSelector",
    "nicClusterPolicy",
    "rdmaModules",
    "teardown",
)
"""NVKE's own top-level ``settings`` keys (``Platform.settings``: the core refuses any other key
but its own ``gateImage``); the nested keys are checked by :func:`parse_settings`."""
RAIL_KEYS = ("name", "rootDevice", "pfName", "subnet")
RDMA_MODULES_KEYS = ("enabled", "autoTaintNewNodes", "nodeSelector", "tolerations")
TEARDOWN_KEYS = ("image", "timeoutSeconds")

# Patterns as strings: re.fullmatch compiles one on its first use (re's cache), so a plan of another
# platform's clusters does not pay for compiling them.
_PCI_ADDRESS = r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"
_RDMA_DEVICE = r"^[A-Za-z0-9_]+$"
_NETDEV = r"^[A-Za-z0-9_.:-]{1,15}$"
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_PINNED_IMAGE = (
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(?::[0-9]+(?=/))?(?:/[A-Za-z0-9][A-Za-z0-9._-]*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9._-]*)?(@sha256:[0-9a-f]{64})?$"
)


@dataclass(frozen=True)
class Rail:
    """One InfiniBand rail (one ConnectX-7 PF).

    Attributes:
        index: rail number n (list position): resource ``sriov_resource_rail_<n>``, network
            ``sriov-network-rail-<n>``.
        name: RDMA device name (``mlx5_0``), for humans and docs.
        root_device: PCI address of the PF (``0000:03:00.0``); selects the PF in the
            SriovNetworkNodePolicy ``nicSelector.rootDevices``.
        pf_name: PF netdev name, optional extra selector (``nicSelector.pfNames``).
        subnet: the rail's IPPool subnet (``10.255.<4n>.0/22`` unless given).
    """

    index: int
    name: str
    root_device: str | None
    pf_name: str | None
    subnet: str

    @property
    def resource_name(self) -> str:
        return f"sriov_resource_rail_{self.index}"

    @property
    def network_name(self) -> str:
        return f"sriov-network-rail-{self.index}"

    @property
    def pool_name(self) -> str:
        return f"nv-ipam-pool-rail-{self.index}"

    @property
    def policy_name(self) -> str:
        return f"infiniband-sriov-rail-{self.index}"

    @property
    def gateway(self) -> str:
        """First host address of the subnet (l8k: network address + 1)."""
        return str(ipaddress.ip_network(self.subnet).network_address + 1)


@dataclass(frozen=True)
class NvkeSettings:
    """Validated NVKE inputs with defaults filled in (see module docstring for the file shape)."""

    rails: tuple[Rail, ...]
    firmware_num_vfs: int = DEFAULT_FIRMWARE_NUM_VFS
    num_vfs: int = DEFAULT_NUM_VFS
    pod_network: str = DEFAULT_POD_NETWORK
    network_namespace: str = DEFAULT_NETWORK_NAMESPACE
    per_node_block_size: int = DEFAULT_PER_NODE_BLOCK_SIZE
    sriov_node_selector: dict[str, str] = field(
        default_factory=lambda: {RDMA_AVAILABLE_LABEL: "true"}
    )
    nic_cluster_policy: dict[str, Any] = field(default_factory=dict)
    rdma_modules_enabled: bool = True
    rdma_modules_auto_taint: bool | None = None  # None: leave the component's values alone
    rdma_modules_node_selector: dict[str, str] = field(default_factory=dict)
    rdma_modules_tolerations: tuple[dict[str, Any], ...] = ()
    teardown_image: str = DEFAULT_TEARDOWN_IMAGE
    teardown_timeout_seconds: int = DEFAULT_TEARDOWN_TIMEOUT_SECONDS


def default_rail_subnet(index: int) -> str:
    """``10.255.<4n>.0/22`` for rail ``n`` (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup)).

    Raises:
        ValueError: ``n`` >= 64 (no /22 left in ``10.255.0.0/16``).
    """
    if not 0 <= index < 64:
        raise ValueError(f"rail {index} has no default subnet in {RAIL_SUPERNET}")
    return f"10.255.{4 * index}.0/22"


class _Ctx:
    def __init__(self, file: str | None, cluster: str | None):
        self.file = file
        self.cluster = cluster
        self.where = Where(file, cluster, id="input.nvke-settings", docs="docs/nvke.md, settings")

    def error(
        self, key: str, message: str, *, allowed: str | None = None, fix: str | None = None
    ) -> GpuclusterError:
        return GpuclusterError(
            message,
            file=self.file,
            cluster=self.cluster,
            key=f"settings.{key}" if key else "settings",
            allowed=allowed,
            fix=fix
            or f"correct settings.{key or ''}".rstrip(".")
            + " (format and defaults: docs/nvke.md, settings)",
            id="input.nvke-settings",
        )


def _str(fields: Fields, key: str) -> str | None:
    """A string setting, surrounding spaces removed; missing or null: ``None``; blank: refused."""
    value = fields.get_str(key)
    if value is not None and not value.strip():
        raise fields.error(
            key,
            f"'{fields.key_of(key)}' is blank",
            fix="write a value, or remove the key for the default",
        )
    return None if value is None else value.strip()


def _image(ctx: _Ctx, raw: Fields, key: str, prefix: str) -> str | None:
    """An image reference with a tag or a sha256 digest (``registry/repo:tag``, ``repo@sha256:…``)."""
    image = _str(raw, key)
    if image is None:
        return None
    match = re.fullmatch(_PINNED_IMAGE, image)
    tag = image_tag(image)
    if match and tag is not None and tag.lower() in MOVING_TAGS and not match.group(2):
        raise ctx.error(
            f"{prefix}.{key}",
            f"'{image}' uses the moving tag ':{tag}'",
            allowed="registry/repository:version, with @sha256:digest recommended",
            fix=f"pin a version and its digest, e.g. {DEFAULT_TEARDOWN_IMAGE}",
        )
    if not match or not (match.group(1) or match.group(2)):
        raise ctx.error(
            f"{prefix}.{key}",
            f"'{image}' is not a pinned image reference",
            allowed="registry/repository:tag or registry/repository@sha256:digest (tag or digest required)",
            fix=f"e.g. {DEFAULT_TEARDOWN_IMAGE} or a mirror of it",
        )
    return image


def _labels(ctx: _Ctx, value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ctx.error(where, f"must be a mapping of label to value, not {type(value).__name__}")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k or isinstance(v, (dict, list)) or v is None:
            raise ctx.error(
                where,
                f"label {k!r}: {v!r} is not a string label selector entry",
                fix='quote label values, e.g. "true"',
            )
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return dict(sorted(out.items()))


def _tolerations(ctx: _Ctx, value: Any, where: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(value, list):
        raise ctx.error(where, f"must be a list of tolerations, not {type(value).__name__}")
    out = []
    for i, tol in enumerate(value):
        if not isinstance(tol, Mapping):
            raise ctx.error(
                f"{where}[{i}]", "must be a toleration mapping (key, operator, value, effect)"
            )
        unknown = set(tol) - {"key", "operator", "value", "effect", "tolerationSeconds"}
        if unknown:
            raise ctx.error(
                f"{where}[{i}]",
                f"unknown toleration field(s) {sorted(unknown)}",
                allowed="key, operator, value, effect, tolerationSeconds",
            )
        op = tol.get("operator", "Equal")
        if op not in ("Exists", "Equal"):
            raise ctx.error(
                f"{where}[{i}].operator", f"unknown operator {op!r}", allowed="Exists, Equal"
            )
        out.append(dict(tol))
    return tuple(out)


def _rails(ctx: _Ctx, raw: Any) -> tuple[Rail, ...]:
    if raw is None:
        raw = list(DEFAULT_RAILS)
    raw = ctx.where.check_list(
        raw, "settings.rails", fix="list the rails, one per InfiniBand PF (docs/nvke.md, settings)"
    )
    rails: list[Rail] = []
    for i, entry in enumerate(raw):
        where = f"rails[{i}]"
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, Mapping):
            raise ctx.error(where, "must be a rail name or a mapping with name and rootDevice")
        entry = ctx.where.fields(dict(entry), f"settings.{where}")
        entry.check_keys(sorted(RAIL_KEYS))
        name = _str(entry, "name") or f"rail{i}"
        if not re.fullmatch(_RDMA_DEVICE, name):
            raise ctx.error(
                f"{where}.name", f"'{name}' is not an RDMA device name", allowed="e.g. mlx5_0"
            )
        root = _str(entry, "rootDevice")
        if root is not None and not re.fullmatch(_PCI_ADDRESS, root):
            raise ctx.error(
                f"{where}.rootDevice",
                f"'{root}' is not a PCI address",
                allowed="DDDD:BB:SS.F, e.g. 0000:03:00.0",
            )
        pf = _str(entry, "pfName")
        if pf is not None and not re.fullmatch(_NETDEV, pf):
            raise ctx.error(f"{where}.pfName", f"'{pf}' is not a network interface name")
        if root is None and pf is None:
            raise ctx.error(
                f"{where}.rootDevice",
                f"rail {i} ({name}) has no rootDevice: the SriovNetworkNodePolicy selects each rail's PF by "
                "its PCI root device, and an RDMA device name cannot select it",
                allowed="PCI address DDDD:BB:SS.F (or pfName, the PF's netdev name)",
                fix=f"set settings.rails[{i}].rootDevice to the output of "
                f"`basename $(readlink -f /sys/class/infiniband/{name}/device)` on a GPU node",
            )
        subnet_raw = _str(entry, "subnet")
        if subnet_raw is None:
            try:
                subnet_raw = default_rail_subnet(i)
            except ValueError as exc:
                raise ctx.error(
                    f"{where}.subnet", str(exc), fix="give the rail an explicit subnet"
                ) from exc
        try:
            subnet = ipaddress.ip_network(subnet_raw, strict=True)
        except ValueError as exc:
            raise ctx.error(
                f"{where}.subnet",
                f"'{subnet_raw}' is not a network CIDR: {exc}",
                allowed="IPv4 network with host bits zero, e.g. 10.255.0.0/22",
            ) from exc
        rails.append(Rail(index=i, name=name, root_device=root, pf_name=pf, subnet=str(subnet)))
    for kind, values in (
        ("name", [r.name for r in rails]),
        ("rootDevice", [r.root_device for r in rails if r.root_device]),
    ):
        dupes = sorted({v for v in values if values.count(v) > 1})
        if dupes:
            raise ctx.error(
                "rails", f"rail {kind} given twice: {', '.join(dupes)}", fix="list every PF once"
            )
    return tuple(rails)


def parse_settings(
    raw: Mapping[str, Any] | None, *, file: str | None = None, cluster: str | None = None
) -> NvkeSettings:
    """Validate ``ClusterSpec.settings`` of an NVKE cluster and fill in defaults.

    Args:
        raw: the ``settings`` mapping as loaded from YAML (None or {} for all defaults).
        file / cluster: where it came from, for error messages.

    Returns:
        NvkeSettings with defaults from AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup) (rails mlx5_0/1/3/4, firmware and requested VF
        count 16, pod network 192.168.0.0/16, NADs in ``default``).

    Raises:
        GpuclusterError: unknown nested keys (top-level keys are the core's check against
            ``Platform.settings``), wrong types, a rail without ``rootDevice``/``pfName``,
            an unparsable CIDR (key ``settings.<path>``).
    """
    ctx = _Ctx(file, cluster)
    raw = ctx.where.fields({} if raw is None else raw, "settings")

    pod_network = _str(raw, "podNetwork") or DEFAULT_POD_NETWORK
    try:
        pod_network = str(ipaddress.ip_network(pod_network, strict=False))
    except ValueError as exc:
        raise ctx.error(
            "podNetwork",
            f"'{pod_network}' is not a network CIDR: {exc}",
            allowed="e.g. 192.168.0.0/16",
        ) from exc

    namespace = _str(raw, "networkNamespace") or DEFAULT_NETWORK_NAMESPACE
    if not re.fullmatch(_DNS_LABEL, namespace) or len(namespace) > 63:
        raise ctx.error(
            "networkNamespace", f"'{namespace}' is not a namespace name", allowed="DNS-1123 label"
        )

    selector = (
        _labels(ctx, raw["sriovNodeSelector"], "sriovNodeSelector")
        if "sriovNodeSelector" in raw
        else {RDMA_AVAILABLE_LABEL: "true"}
    )
    if not selector:
        raise ctx.error(
            "sriovNodeSelector",
            "must not be empty: the SR-IOV policies would select every node",
            fix=f"select nodes by {RDMA_AVAILABLE_LABEL}=true",
        )

    ncp = raw.get_fields(
        "nicClusterPolicy",
        empty=True,
        fix="write a mapping deep-merged over the NicClusterPolicy spec (docs/nvke.md, settings)",
    )

    rdma = raw.get_fields("rdmaModules", empty=True)
    rdma.check_keys(sorted(RDMA_MODULES_KEYS))
    enabled = rdma.get_bool("enabled")
    auto_taint = rdma.get_bool("autoTaintNewNodes")
    node_selector = (
        _labels(ctx, rdma["nodeSelector"], "rdmaModules.nodeSelector")
        if "nodeSelector" in rdma
        else {}
    )
    tolerations = (
        _tolerations(ctx, rdma["tolerations"], "rdmaModules.tolerations")
        if "tolerations" in rdma
        else ()
    )

    teardown = raw.get_fields("teardown", empty=True)
    teardown.check_keys(sorted(TEARDOWN_KEYS))

    rails = _rails(ctx, raw.get("rails"))
    block = raw.get_int("perNodeBlockSize", DEFAULT_PER_NODE_BLOCK_SIZE, minimum=2)
    for rail in rails:
        hosts = ip_pool_host_count(rail.subnet)
        if hosts < block:
            raise ctx.error(
                f"rails[{rail.index}].subnet",
                f"rail {rail.index} subnet {rail.subnet} has {hosts} usable address(es), fewer than perNodeBlockSize "
                f"{block}: nv-ipam rejects the IPPool and no node gets an address",
                allowed=f"a subnet with at least {block} host addresses (e.g. /{_prefix_for(block, rail.subnet)} or larger)",
                fix="give the rail a larger subnet or lower settings.perNodeBlockSize",
            )
    return NvkeSettings(
        rails=rails,
        firmware_num_vfs=raw.get_int("firmwareNumVfs", DEFAULT_FIRMWARE_NUM_VFS, minimum=1),
        num_vfs=raw.get_int("numVfs", DEFAULT_NUM_VFS, minimum=1),
        pod_network=pod_network,
        network_namespace=namespace,
        per_node_block_size=block,
        sriov_node_selector=selector,
        nic_cluster_policy=dict(ncp),
        rdma_modules_enabled=True if enabled is None else enabled,
        rdma_modules_auto_taint=auto_taint,
        rdma_modules_node_selector=node_selector,
        rdma_modules_tolerations=tolerations,
        teardown_image=_image(ctx, teardown, "image", "teardown") or DEFAULT_TEARDOWN_IMAGE,
        teardown_timeout_seconds=teardown.get_int(
            "timeoutSeconds", DEFAULT_TEARDOWN_TIMEOUT_SECONDS, minimum=60
        ),
    )


def ip_pool_host_count(subnet: str) -> int:
    """Addresses nv-ipam can hand out from ``subnet`` (its ``GetPossibleIPCount``): IPv4 all but
    the network and broadcast addresses, IPv6 all but the network address, 2 for a point-to-point
    /31 or /127, 1 for a single address. nv-ipam refuses an IPPool whose ``perNodeBlockSize`` is
    below 2 or above this count."""
    net = ipaddress.ip_network(subnet, strict=False)
    if net.prefixlen == net.max_prefixlen:
        return 1
    if net.prefixlen == net.max_prefixlen - 1:
        return 2
    return net.num_addresses - (2 if net.version == 4 else 1)


def _prefix_for(block: int, subnet: str) -> int:
    net = ipaddress.ip_network(subnet, strict=False)
    prefix: int = net.max_prefixlen
    while prefix > 0 and ip_pool_host_count(f"{net.network_address}/{prefix}") < block:
        prefix -= 1
    return prefix


_VERSION = r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$"
"""``[v]MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD]``: the versions the core ``min-version`` gate
script compares (:mod:`gpucluster.charts.gates`); anything else is not a version there either."""


def _parse_version(text: str) -> tuple[tuple[int, ...], str | None]:
    match = re.fullmatch(_VERSION, str(text).strip())
    if not match:
        raise ValueError(f"'{text}' is not a version")
    core = tuple(int(p) for p in match.groups()[:3] if p is not None)
    return core, match.group(4)


def version_tuple(text: str) -> tuple[int, ...]:
    """``"v0.5.1"`` / ``"0.5.1-rc.1"`` / ``"1.34"`` -> ``(0, 5, 1)`` / ``(0, 5, 1)`` / ``(1, 34)``.

    The numeric core only; see :func:`version_less` for how a pre-release compares.

    Raises:
        ValueError: not ``[v]MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD]`` (e.g. ``latest``,
            ``0.5.1rc1``).
    """
    return _parse_version(text)[0]


def version_less(a: str, b: str) -> bool:
    """True when version ``a`` < ``b``, as the gate script's ``version_ge`` decides it.

    Missing core parts count as 0; a leading ``v`` and ``+build`` metadata are ignored; a
    pre-release sorts before its release (``0.5.1-rc1`` < ``0.5.1``, semver), and two
    pre-releases of one core compare as text. The NVKE DRA check must agree with the
    ``min-version`` gate, or a tag the policy accepts would hold ``terraform apply`` until the
    gate times out.

    Raises:
        ValueError: either is not a version (see :func:`version_tuple`).
    """
    (ta, pa), (tb, pb) = _parse_version(a), _parse_version(b)
    n = max(len(ta), len(tb))
    ta, tb = ta + (0,) * (n - len(ta)), tb + (0,) * (n - len(tb))
    if ta != tb:
        return ta < tb
    if pa is None:
        return False
    if pb is None:
        return True
    return pa < pb

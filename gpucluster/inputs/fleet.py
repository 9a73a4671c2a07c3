"""Fleets: many AKS GPU clusters in one Azure Kubernetes Fleet Manager, rolled out in stages (pure data).

The cluster file's top-level ``fleet:`` section (docs/fleets.md) names a Fleet Manager (created by
gpucluster, or an existing one referenced by resource ID), its update groups in order (e.g.
``canary`` then ``prod``), optional update runs, an optional auto-upgrade profile and, with a
hub cluster, fleet-wide objects placed on the members (the kernel-module blocklist of
the AKS advisory Azure/AKS#5753 (CVE-2026-31431, Copy Fail)). Every cluster entry then names its group::

    fleet:
      name: gpu-fleet
      groups:
        - {name: canary, afterStageWaitSeconds: 3600, approval: true}
        - {name: prod}
    clusters:
      - name: canary-1
        fleet: {group: canary}

This module validates that section and derives everything the stacks render, as plain data:

* :func:`parse_fleet` -- the ``fleet:`` mapping -> :class:`FleetSpec` (one-line errors);
* :func:`check_members` -- cross-checks against the parsed clusters (every cluster in a known
  group, AKS only, clusters gpucluster creates, update runs without a Kubernetes minor skip and
  not below the AKS floor);
* :func:`stages` -- the rollout order, one list of cluster names per group;
* :func:`rollout_digest` -- what a runtime stack installs, as one sha256 (the value a stage
  barrier compares);
* :func:`placement_objects` -- the hub objects (Namespace, DaemonSet, ClusterResourcePlacement,
  ClusterStagedUpdateStrategy, ClusterStagedUpdateRun);
* :func:`tfc_topology` -- Terraform Cloud workspaces, project and run triggers.

No cdktf import (domain core rule).

Facts and their sources:

* Fleet resource, member, update strategy and update run names: ``^[a-z0-9]([-a-z0-9]*[a-z0-9])?$``,
  at most 63 (fleet) / 50 (others) characters (Azure REST API ``Microsoft.ContainerService/fleets``,
  api-version 2025-03-01).
* A ``ClusterStagedUpdateStrategy`` stage name is ``^[a-z0-9]+$``, at most 63 characters; at most
  31 stages; ``afterStageTasks`` are ``TimedWait`` (``waitTime`` like ``3600s``) and/or
  ``Approval``, at most 2 (CRD ``clusterstagedupdatestrategies.placement.kubernetes-fleet.io`` v1,
  github Azure/fleet ``config/crd/bases``). Group names therefore are ``^[a-z][a-z0-9]*$``: valid
  both as Azure update groups and as hub stage names.
* Update runs: upgrade type ``Full`` | ``ControlPlaneOnly`` (with a Kubernetes version) or
  ``NodeImageOnly`` (without); node image selection ``Latest`` | ``Consistent`` (``az fleet
  updaterun create --upgrade-type {ControlPlaneOnly, Full, NodeImageOnly} --node-image-selection
  {Consistent, Latest}``). azurerm creates a run but does not start it: ``az fleet updaterun start
  --resource-group RG --fleet-name FLEET --name RUN`` (Azure CLI fleet extension) starts it.
* AKS upgrades one Kubernetes minor at a time and never below the AKS platform floor
  (``Platform.min_kubernetes`` of the AKS plugin, 1.34: DRA GA, AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md)).
* Auto-upgrade profile channels ``Stable`` | ``Rapid`` | ``NodeImage`` (``az fleet
  autoupgradeprofile create --channel``; REST ``fleets/autoUpgradeProfiles`` 2025-03-01). azurerm
  4.55 has no resource for it (the binding cdktf-cdktf-provider-azurerm 14.23.1 has
  kubernetes_fleet_manager, _member, _update_strategy and _update_run only).
* HCP Terraform connects a workspace to at most 20 source workspaces through run triggers
  (HCP Terraform docs, "Run Triggers").
* The kernel-module blocklist (modules ``algif_aead esp4 esp6 rxrpc``, ``install <mod> /bin/false``
  plus ``blacklist <mod>`` in ``/etc/modprobe.d``, ``modprobe -r`` when loaded, privileged, hostPID,
  ``system-node-critical``, requests 10m/16Mi, limit 32Mi): the mitigation DaemonSet of
  the AKS advisory Azure/AKS#5753 (CVE-2026-31431, Copy Fail), placed on the members through Fleet Manager resource placement.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpucluster.errors import GpuclusterError
from gpucluster.fields import Fields, Where
from gpucluster.plugins import platforms

FLEET_KEYS = (
    "name",
    "resourceGroup",
    "location",
    "existing",
    "hub",
    "groupLabel",
    "groups",
    "updateRuns",
    "autoUpgrade",
    "placements",
)
GROUP_KEYS = ("name", "afterStageWaitSeconds", "approval")
MEMBER_KEYS = ("group", "labels")
RUN_KEYS = ("name", "upgrade", "kubernetesVersion", "nodeImageSelection")
AUTO_KEYS = ("name", "channel", "nodeImageSelection", "disabled")
HUB_KEYS = ("dnsPrefix", "kubeconfig", "context")
PLACEMENT_KEYS = ("component", "name", "modules", "image")

AZURE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
FLEET_NAME_MAX = 40
"""Fleet names are DNS labels of at most 40 characters (stack ``<name>-fleet``; Azure allows 63)."""
GROUP_NAME = re.compile(r"^[a-z][a-z0-9]*$")
GROUP_NAME_MAX = 50
MAX_GROUPS = 31
"""At most 31 stages in a ClusterStagedUpdateStrategy (CRD ``maxItems``)."""
FLEET_ID = re.compile(
    r"^/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w._()]{1,90}/providers/Microsoft\.ContainerService/fleets/"
    r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
)
UPGRADE_TYPES = ("Full", "ControlPlaneOnly", "NodeImageOnly")
NODE_IMAGE_SELECTIONS = ("Latest", "Consistent")
AUTO_UPGRADE_CHANNELS = ("Stable", "Rapid", "NodeImage")
K8S_VERSION = re.compile(r"^1\.(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?$")
MODULE_NAME = re.compile(r"^[a-z0-9_]{1,56}$")
IMAGE_REF = re.compile(
    r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+(:[A-Za-z0-9_][A-Za-z0-9._-]*)?@sha256:[0-9a-f]{64}$"
)
LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
MAX_RUN_TRIGGER_SOURCES = 20
"""HCP Terraform: a workspace has at most 20 source workspaces (run triggers)."""

DEFAULT_GROUP_LABEL = "upgroup"
"""Member label carrying the update group (``az fleet member create --update-group canary --labels upgroup=canary``: Azure Kubernetes Fleet Manager,
"Update orchestration", https://learn.microsoft.com/azure/kubernetes-fleet/update-orchestration)."""
KERNEL_BLOCKLIST = "kernel-module-blocklist"
PLACEMENT_COMPONENTS = (KERNEL_BLOCKLIST,)
DEFAULT_BLOCKED_MODULES = ("algif_aead", "esp4", "esp6", "rxrpc")
"""CVE-2026-31431 (algif_aead; Azure/AKS#5753) and DirtyFrag, CVE-2026-43284 and CVE-2026-43500 (esp4,
esp6, rxrpc; the AKS node image blocks them too, Azure/AgentBaker#8475)."""
DEFAULT_BLOCKLIST_IMAGE = "mcr.microsoft.com/cbl-mariner/busybox:2.0@sha256:e4fb4d51fc9b70d6cdc1ce66a0af02ab40554d2ca632e1d188fabc760e432fdd"
"""The image of the Azure/AKS#5753 mitigation DaemonSet, ``mcr.microsoft.com/cbl-mariner/busybox:2.0``, pinned by the digest Azure's public AKS
troubleshooting scripts pin it to. Override with ``placements[].image`` (a digest is required)."""
PLACEMENT_API = "placement.kubernetes-fleet.io/v1"
"""Served by the Fleet hub for ClusterResourcePlacement and (since Azure/fleet #430, 2026-02) the
cluster-scoped staged update kinds; ``v1beta1`` is the storage version."""

_DOCS = "see docs/fleets.md"


@dataclass(frozen=True)
class UpdateGroup:
    """One update group = one stage of the rollout, in file order.

    Attributes:
        name: ``^[a-z][a-z0-9]*$``, at most 50 characters.
        after_stage_wait_seconds: wait after the stage finished before the next one starts
            (Fleet update strategy ``after_stage_wait_in_seconds``, hub ``TimedWait``); None = none.
        approval: the next group waits for an explicit approval (barrier stack variable; hub
            ``Approval`` after-stage task). Meaningless on the last group (refused).
    """

    name: str
    after_stage_wait_seconds: int | None = None
    approval: bool = False


@dataclass(frozen=True)
class MemberSpec:
    """One cluster's membership: its update group and extra member labels (sorted)."""

    cluster: str
    group: str
    labels: tuple[tuple[str, str], ...] = ()
    key: str = ""


@dataclass(frozen=True)
class UpdateRunSpec:
    """A declared Fleet update run (``azurerm_kubernetes_fleet_update_run``); created, not started.

    Attributes:
        name: Azure name (``^[a-z0-9]([-a-z0-9]*[a-z0-9])?$``, <= 50).
        upgrade: ``Full`` | ``ControlPlaneOnly`` | ``NodeImageOnly``.
        kubernetes_version: ``"1.35"`` or ``"1.35.2"`` for Full/ControlPlaneOnly, None for NodeImageOnly.
        node_image_selection: ``Latest`` (default) | ``Consistent``.
    """

    name: str
    upgrade: str
    kubernetes_version: str | None = None
    node_image_selection: str = "Latest"
    key: str = ""


@dataclass(frozen=True)
class AutoUpgradeSpec:
    """The fleet's auto-upgrade profile (``fleets/autoUpgradeProfiles``), following the update strategy."""

    name: str
    channel: str
    node_image_selection: str | None = None
    disabled: bool = False


@dataclass(frozen=True)
class PlacementSpec:
    """A fleet-wide component placed on the members from the hub (``ClusterResourcePlacement``).

    Attributes:
        component: ``kernel-module-blocklist`` (the only one so far).
        name: object names on the hub (Namespace ``<name>``, CRP ``<name>``), DNS label <= 40.
        modules: kernel modules to block (``[a-z0-9_]``), in order, no duplicates.
        image: pinned image with ``/bin/sh``, ``grep``, ``chroot``, ``modprobe`` (busybox).
    """

    component: str
    name: str
    modules: tuple[str, ...] = DEFAULT_BLOCKED_MODULES
    image: str = DEFAULT_BLOCKLIST_IMAGE


@dataclass(frozen=True)
class HubSpec:
    """The Fleet hub cluster: created with the fleet (``dns_prefix``), and how Terraform reaches it.

    The hub's API server accepts Microsoft Entra ID users only; ``az fleet get-credentials``
    writes a kubeconfig (kubelogin exec plugin) that the ``<fleet>-hub`` stack's Helm provider
    reads (variables ``kubeconfig_path``, ``kube_context``).
    """

    dns_prefix: str | None
    kubeconfig_path: str = "~/.kube/config"
    context: str | None = None


@dataclass
class FleetSpec:
    """The validated ``fleet:`` section.

    Attributes:
        name: fleet name (DNS label <= 40); stacks ``<name>-fleet``, ``<name>-hub``,
            ``<name>-after-<group>``.
        resource_group / location: where a created fleet lives (default ``<name>-rg``; the AKS
            platform's ``default_region``, :func:`default_location`).
        existing_id: resource ID of an existing Fleet Manager (then nothing of the fleet itself is
            created; members, strategy, runs attach to it).
        hub: hub cluster, or None (no placements then).
        group_label: member label key carrying the group (default ``upgroup``).
        groups: update groups in rollout order.
        members: cluster name -> MemberSpec, in file order.
        update_runs / auto_upgrade / placements: as declared.
        source: the cluster file.
    """

    name: str
    groups: list[UpdateGroup]
    location: str
    resource_group: str | None = None
    existing_id: str | None = None
    hub: HubSpec | None = None
    group_label: str = DEFAULT_GROUP_LABEL
    members: dict[str, MemberSpec] = field(default_factory=dict)
    update_runs: list[UpdateRunSpec] = field(default_factory=list)
    auto_upgrade: AutoUpgradeSpec | None = None
    placements: list[PlacementSpec] = field(default_factory=list)
    source: str = ""

    @property
    def strategy_name(self) -> str:
        """Name of the Fleet update strategy and of the hub ClusterStagedUpdateStrategy: ``<name>-stages``."""
        return f"{self.name}-stages"

    def member_labels(self, cluster: str) -> dict[str, str]:
        """Labels a member should carry: the group label plus the member's own (sorted)."""
        member = self.members[cluster]
        return dict(sorted({**dict(member.labels), self.group_label: member.group}.items()))


# --------------------------------------------------------------------------- names


def fleet_stack_name(fleet: str) -> str:
    """``<fleet>-fleet``: Fleet Manager, members, update strategy, update runs, auto-upgrade profile."""
    return f"{fleet}-fleet"


def hub_stack_name(fleet: str) -> str:
    """``<fleet>-hub``: objects on the hub cluster (placements), Helm provider on the hub's kubeconfig."""
    return f"{fleet}-hub"


def barrier_stack_name(fleet: str, group: str) -> str:
    """``<fleet>-after-<group>``: the promotion barrier between ``group`` and the next group."""
    return f"{fleet}-after-{group}"


# --------------------------------------------------------------------------- parsing


def _where(file: str, cluster: str | None = None) -> Where:
    """Where a fleet value comes from: its errors have the id ``fleet`` and point to docs/fleets.md."""
    return Where(file, cluster, id="fleet", docs="docs/fleets.md")


def _err(
    message: str,
    *,
    file: str,
    key: str,
    fix: str,
    cluster: str | None = None,
    allowed: str | None = None,
) -> GpuclusterError:
    return _where(file, cluster).error(key, message, allowed=allowed, fix=fix)


def _mapping(
    value: Any, *, file: str, key: str, cluster: str | None = None, example: str = ""
) -> Fields:
    return _where(file, cluster).fields(
        value,
        key,
        fix=f"write it as indented 'key: value' lines{', e.g. ' + example if example else ''} ({_DOCS})",
    )


def _text(value: Any, *, file: str, key: str, cluster: str | None = None) -> str:
    return _where(file, cluster).check_str(value, key)


def _choice(value: Any, allowed: Sequence[str], *, file: str, key: str, what: str) -> str:
    return _where(file).check_choice(value, key, allowed, what=what)


def _azure_name(value: Any, *, file: str, key: str, max_len: int, what: str) -> str:
    text = _text(value, file=file, key=key)
    if not AZURE_NAME.fullmatch(text) or len(text) > max_len:
        suggestion = (
            re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:max_len].strip("-") or "gpu-fleet"
        )
        raise _err(
            f"invalid {what} '{text}'",
            file=file,
            key=key,
            allowed=f"lowercase letters, digits and '-', starting and ending alphanumeric, at most {max_len} characters",
            fix=f"rename it, e.g. {suggestion}",
        )
    return text


def _bool(value: Any, *, file: str, key: str) -> bool:
    return _where(file).check_bool(value, key)


def _list(value: Any, *, file: str, key: str, fix: str, allow_empty: bool = False) -> list:
    return _where(file).check_list(value, key, empty_ok=allow_empty, fix=fix)


def parse_fleet(raw: Any, *, file: str) -> FleetSpec:
    """Validate the top-level ``fleet:`` mapping (members are added by :func:`parse_member`).

    One reader per section, in this order (the first bad key is the one reported): the fleet's
    own fields (:func:`_parse_fleet_fields`), ``groups`` (:func:`_parse_groups`), ``hub``
    (:func:`_parse_hub`), ``updateRuns`` (:func:`_parse_update_runs`), ``autoUpgrade``
    (:func:`_parse_auto_upgrade`) and ``placements`` (:func:`_parse_placements`).

    Raises:
        GpuclusterError: (id ``fleet``) not a mapping, unknown keys, invalid names, no groups,
            duplicate group names, a wait that is not a whole number of seconds, ``approval`` on
            the last group, ``hub`` with ``existing`` and no kubeconfig, update runs of the wrong
            shape, an unknown placement component, an unpinned image, invalid module names.
    """
    data = _mapping(
        raw,
        file=file,
        key="fleet",
        example="{name: gpu-fleet, groups: [{name: canary}, {name: prod}]}",
    )
    data.check_keys(FLEET_KEYS)
    fields = _parse_fleet_fields(data, file=file)
    name, existing_id = fields["name"], fields["existing_id"]
    groups = _parse_groups(data, file=file)
    hub = (
        _parse_hub(data["hub"], name=name, existing_id=existing_id, file=file)
        if data.get("hub") is not None
        else None
    )
    runs = (
        _parse_update_runs(data["updateRuns"], file=file)
        if data.get("updateRuns") is not None
        else []
    )
    auto = (
        _parse_auto_upgrade(data["autoUpgrade"], name=name, file=file)
        if data.get("autoUpgrade") is not None
        else None
    )
    placements = (
        _parse_placements(data["placements"], name=name, hub=hub, file=file)
        if data.get("placements") is not None
        else []
    )
    return FleetSpec(
        name=name,
        groups=groups,
        resource_group=fields["resource_group"],
        location=fields["location"],
        existing_id=existing_id,
        hub=hub,
        group_label=fields["group_label"],
        update_runs=runs,
        auto_upgrade=auto,
        placements=placements,
        source=file,
    )


def default_location(file: str) -> str:
    """The location of a fleet whose ``fleet.location`` is unset: the AKS platform's
    ``default_region`` (its members are AKS clusters; the AKS plugin defines the region once).

    Raises:
        GpuclusterError: ``error[input] key=fleet.location`` when no installed AKS platform names
            a default region.
    """
    aks = platforms().get("aks")
    region = aks.default_region if aks is not None else None
    if not region:
        raise _err(
            "fleet.location is unset and no installed AKS platform names a default region",
            file=file,
            key="fleet.location",
            fix="write the fleet's Azure region, e.g. location: westus3",
        )
    return region


def _parse_fleet_fields(data: Fields, *, file: str) -> dict[str, Any]:
    """``fleet.name``, ``existing``, ``resourceGroup``, ``location`` and ``groupLabel``:
    ``{"name", "existing_id", "resource_group", "location", "group_label"}`` (defaults: no
    existing fleet, no resource group, :func:`default_location`, :data:`DEFAULT_GROUP_LABEL`)."""
    if "name" not in data:
        raise _err(
            "missing key 'fleet.name'",
            file=file,
            key="fleet.name",
            fix="name the fleet, e.g. name: gpu-fleet",
        )
    name = _azure_name(
        data["name"], file=file, key="fleet.name", max_len=FLEET_NAME_MAX, what="fleet name"
    )

    existing_id = None
    if data.get("existing") is not None:
        existing_id = _text(data["existing"], file=file, key="fleet.existing")
        if not FLEET_ID.fullmatch(existing_id):
            raise _err(
                f"'fleet.existing' is not a Fleet Manager resource ID: {existing_id!r}",
                file=file,
                key="fleet.existing",
                allowed="/subscriptions/<uuid>/resourceGroups/<rg>/providers/Microsoft.ContainerService/fleets/<name>",
                fix="copy the id from `az fleet show -g RG -n FLEET --query id -o tsv`",
            )
        for other in ("resourceGroup", "location"):
            if data.get(other) is not None:
                raise _err(
                    f"'fleet.{other}' does not apply to an existing Fleet Manager",
                    file=file,
                    key=f"fleet.{other}",
                    fix=f"remove fleet.{other} (the existing fleet keeps its own), or remove fleet.existing to create one",
                )

    resource_group = None
    if data.get("resourceGroup") is not None:
        resource_group = _text(data["resourceGroup"], file=file, key="fleet.resourceGroup")
        if not re.fullmatch(
            r"^[-\w._()]{1,90}$", resource_group, re.ASCII
        ) or resource_group.endswith("."):
            raise _err(
                f"invalid resource group name {resource_group!r}",
                file=file,
                key="fleet.resourceGroup",
                allowed="1-90 letters, digits, '-', '_', '.', '(', ')', not ending with '.'",
                fix=f"e.g. resourceGroup: {name}-rg",
            )
    location = default_location(file)
    if data.get("location") is not None:
        location = _text(data["location"], file=file, key="fleet.location")
        if not re.fullmatch(r"^[a-z0-9]+$", location):
            raise _err(
                f"invalid location {location!r}",
                file=file,
                key="fleet.location",
                allowed="an Azure region's programmatic name (lowercase letters and digits, e.g. eastus, westus3)",
                fix="write e.g. location: eastus",
            )

    group_label = DEFAULT_GROUP_LABEL
    if data.get("groupLabel") is not None:
        group_label = _text(data["groupLabel"], file=file, key="fleet.groupLabel")
        if not LABEL_KEY.fullmatch(group_label) or len(group_label) > 253:
            raise _err(
                f"invalid label key {group_label!r}",
                file=file,
                key="fleet.groupLabel",
                allowed="a Kubernetes label key ([prefix/]name)",
                fix=f"e.g. groupLabel: {DEFAULT_GROUP_LABEL}",
            )
    return {
        "name": name,
        "existing_id": existing_id,
        "resource_group": resource_group,
        "location": location,
        "group_label": group_label,
    }


def _parse_groups(data: Fields, *, file: str) -> list[UpdateGroup]:
    """``fleet.groups``: the update groups in rollout order (1 to :data:`MAX_GROUPS`, unique names,
    no ``approval`` on the last one)."""
    if "groups" not in data:
        raise _err(
            "missing key 'fleet.groups'",
            file=file,
            key="fleet.groups",
            fix="list the update groups in rollout order, e.g. groups: [{name: canary}, {name: prod}]",
        )
    raw_groups = _list(
        data["groups"],
        file=file,
        key="fleet.groups",
        fix="list the update groups in rollout order, e.g. groups: [{name: canary}, {name: prod}]",
    )
    if len(raw_groups) > MAX_GROUPS:
        raise _err(
            f"{len(raw_groups)} update groups; a staged update strategy has at most {MAX_GROUPS} stages",
            file=file,
            key="fleet.groups",
            fix="merge groups",
        )
    groups: list[UpdateGroup] = []
    seen: dict[str, int] = {}
    for i, g in enumerate(raw_groups):
        key = f"fleet.groups[{i}]"
        g = _mapping(g, file=file, key=key, example="{name: canary, afterStageWaitSeconds: 3600}")
        g.check_keys(GROUP_KEYS)
        if "name" not in g:
            raise _err(
                f"missing key '{key}.name'",
                file=file,
                key=f"{key}.name",
                fix="name the group, e.g. name: canary",
            )
        gname = _text(g["name"], file=file, key=f"{key}.name")
        if not GROUP_NAME.fullmatch(gname) or len(gname) > GROUP_NAME_MAX:
            raise _err(
                f"invalid update group name '{gname}'",
                file=file,
                key=f"{key}.name",
                allowed=f"a lowercase letter, then lowercase letters and digits, at most {GROUP_NAME_MAX} characters "
                "(Azure update group names and the hub's ClusterStagedUpdateStrategy stage names, which allow no '-')",
                fix=f"rename it, e.g. {re.sub(r'[^a-z0-9]', '', gname.lower()).lstrip('0123456789')[:GROUP_NAME_MAX] or 'canary'}",
            )
        if gname in seen:
            raise _err(
                f"update group '{gname}' is declared twice (fleet.groups[{seen[gname]}] and {key})",
                file=file,
                key=f"{key}.name",
                fix="give every group a unique name",
            )
        seen[gname] = i
        wait = g.get("afterStageWaitSeconds")
        if wait is not None and (
            not isinstance(wait, int) or isinstance(wait, bool) or not 0 <= wait <= 7 * 86400
        ):
            raise _err(
                f"'{key}.afterStageWaitSeconds' must be a whole number of seconds from 0 to 604800, not {wait!r}",
                file=file,
                key=f"{key}.afterStageWaitSeconds",
                fix="write e.g. afterStageWaitSeconds: 3600 (one hour)",
            )
        approval = (
            _bool(g["approval"], file=file, key=f"{key}.approval")
            if g.get("approval") is not None
            else False
        )
        groups.append(
            UpdateGroup(name=gname, after_stage_wait_seconds=wait or None, approval=approval)
        )
    last = groups[-1]
    if last.approval:
        raise _err(
            f"'fleet.groups[{len(groups) - 1}].approval' is set on the last group '{last.name}': no group follows it",
            file=file,
            key=f"fleet.groups[{len(groups) - 1}].approval",
            fix="put approval: true on the group whose rollout must be approved before the next group starts",
        )
    return groups


def _parse_hub(raw: Any, *, name: str, existing_id: str | None, file: str) -> HubSpec:
    """``fleet.hub``: a hub created with the fleet (``dnsPrefix``, default ``<fleet>-hub``) or an
    existing fleet's hub reached through ``kubeconfig`` (default ``~/.kube/config``) / ``context``."""
    h = _mapping(raw, file=file, key="fleet.hub", example=f"{{dnsPrefix: {name}-hub}}")
    h.check_keys(HUB_KEYS)
    dns_prefix = None
    if h.get("dnsPrefix") is not None:
        dns_prefix = _text(h["dnsPrefix"], file=file, key="fleet.hub.dnsPrefix")
        if not re.fullmatch(r"^[a-zA-Z0-9]([a-zA-Z0-9-]{0,52}[a-zA-Z0-9])?$", dns_prefix):
            raise _err(
                f"invalid hub dnsPrefix {dns_prefix!r}",
                file=file,
                key="fleet.hub.dnsPrefix",
                allowed="1-54 letters, digits and '-', starting and ending alphanumeric",
                fix=f"e.g. dnsPrefix: {name}-hub",
            )
    if existing_id is None and dns_prefix is None:
        dns_prefix = f"{name}-hub"
    if existing_id is not None and dns_prefix is not None:
        raise _err(
            "'fleet.hub.dnsPrefix' creates a hub with the fleet, but the fleet is existing",
            file=file,
            key="fleet.hub.dnsPrefix",
            fix="remove dnsPrefix; an existing fleet's hub is reached through fleet.hub.kubeconfig",
        )
    kubeconfig = (
        _text(h["kubeconfig"], file=file, key="fleet.hub.kubeconfig")
        if h.get("kubeconfig") is not None
        else "~/.kube/config"
    )
    context = (
        _text(h["context"], file=file, key="fleet.hub.context")
        if h.get("context") is not None
        else None
    )
    for k, v in (("kubeconfig", kubeconfig), ("context", context or "")):
        if "${" in v or "%{" in v:
            raise _err(
                f"'fleet.hub.{k}' contains a Terraform template sequence",
                file=file,
                key=f"fleet.hub.{k}",
                fix="remove '${' / '%{' from the value",
            )
    return HubSpec(dns_prefix=dns_prefix, kubeconfig_path=kubeconfig, context=context)


def _parse_update_runs(raw: Any, *, file: str) -> list[UpdateRunSpec]:
    """``fleet.updateRuns``: each run's unique name and upgrade (see :func:`_parse_update_run`)."""
    raw_runs = _list(
        raw,
        file=file,
        key="fleet.updateRuns",
        allow_empty=True,
        fix="list runs, e.g. updateRuns: [{name: node-images, upgrade: NodeImageOnly}]",
    )
    runs: list[UpdateRunSpec] = []
    names: dict[str, int] = {}
    for i, r in enumerate(raw_runs):
        runs.append(
            _parse_update_run(r, file=file, key=f"fleet.updateRuns[{i}]", index=i, seen=names)
        )
    return runs


def _parse_update_run(
    raw: Any, *, file: str, key: str, index: int, seen: dict[str, int]
) -> UpdateRunSpec:
    """One update run (``fleet.updateRuns[index]``): ``name`` (not one of ``seen``, name -> index
    of the runs before it; this one is added), ``upgrade`` (:data:`UPGRADE_TYPES`),
    ``kubernetesVersion`` (a quoted ``1.MINOR[.PATCH]``, for every upgrade but ``NodeImageOnly``)
    and ``nodeImageSelection`` (default ``Latest``)."""
    r = _mapping(raw, file=file, key=key, example="{name: node-images, upgrade: NodeImageOnly}")
    r.check_keys(RUN_KEYS)
    for req in ("name", "upgrade"):
        if req not in r:
            raise _err(
                f"missing key '{key}.{req}'",
                file=file,
                key=f"{key}.{req}",
                fix='give name and upgrade, e.g. {name: k8s-1-35, upgrade: Full, kubernetesVersion: "1.35"}',
            )
    rname = _azure_name(r["name"], file=file, key=f"{key}.name", max_len=50, what="update run name")
    if rname in seen:
        raise _err(
            f"update run '{rname}' is declared twice (fleet.updateRuns[{seen[rname]}] and {key})",
            file=file,
            key=f"{key}.name",
            fix="give every update run a unique name",
        )
    seen[rname] = index
    upgrade = _choice(
        r["upgrade"], UPGRADE_TYPES, file=file, key=f"{key}.upgrade", what="upgrade type"
    )
    version = None
    if upgrade == "NodeImageOnly":
        if r.get("kubernetesVersion") is not None:
            raise _err(
                "a NodeImageOnly update run takes no kubernetesVersion",
                file=file,
                key=f"{key}.kubernetesVersion",
                fix="remove kubernetesVersion, or use upgrade: Full to upgrade Kubernetes and node images",
            )
    else:
        kv = r.get("kubernetesVersion")
        if kv is None:
            raise _err(
                f"a {upgrade} update run needs kubernetesVersion",
                file=file,
                key=f"{key}.kubernetesVersion",
                fix='add the target, e.g. kubernetesVersion: "1.35"',
            )
        if isinstance(kv, float):
            raise _err(
                f"kubernetesVersion {kv!r} is a number; YAML reads 1.30 as 1.3",
                file=file,
                key=f"{key}.kubernetesVersion",
                fix='quote it: kubernetesVersion: "1.35"',
            )
        version = _text(kv, file=file, key=f"{key}.kubernetesVersion")
        if not K8S_VERSION.fullmatch(version):
            raise _err(
                f"kubernetesVersion '{version}' is not 1.MINOR or 1.MINOR.PATCH",
                file=file,
                key=f"{key}.kubernetesVersion",
                allowed='e.g. "1.35" or "1.35.2"',
                fix='write e.g. kubernetesVersion: "1.35"',
            )
    selection = "Latest"
    if r.get("nodeImageSelection") is not None:
        selection = _choice(
            r["nodeImageSelection"],
            NODE_IMAGE_SELECTIONS,
            file=file,
            key=f"{key}.nodeImageSelection",
            what="node image selection",
        )
    return UpdateRunSpec(
        name=rname,
        upgrade=upgrade,
        kubernetes_version=version,
        node_image_selection=selection,
        key=key,
    )


def _parse_auto_upgrade(raw: Any, *, name: str, file: str) -> AutoUpgradeSpec:
    """``fleet.autoUpgrade``: ``channel`` (:data:`AUTO_UPGRADE_CHANNELS`, required), ``name``
    (default ``<fleet>-auto``), ``nodeImageSelection`` and ``disabled`` (default false)."""
    a = _mapping(raw, file=file, key="fleet.autoUpgrade", example="{channel: Stable}")
    a.check_keys(AUTO_KEYS)
    if "channel" not in a:
        raise _err(
            "missing key 'fleet.autoUpgrade.channel'",
            file=file,
            key="fleet.autoUpgrade.channel",
            allowed=", ".join(AUTO_UPGRADE_CHANNELS),
            fix="set channel: Stable (Kubernetes + node images) or NodeImage",
        )
    channel = _choice(
        a["channel"],
        AUTO_UPGRADE_CHANNELS,
        file=file,
        key="fleet.autoUpgrade.channel",
        what="auto-upgrade channel",
    )
    aname = _azure_name(
        a.get("name", f"{name}-auto"),
        file=file,
        key="fleet.autoUpgrade.name",
        max_len=50,
        what="auto-upgrade profile name",
    )
    sel = None
    if a.get("nodeImageSelection") is not None:
        sel = _choice(
            a["nodeImageSelection"],
            NODE_IMAGE_SELECTIONS,
            file=file,
            key="fleet.autoUpgrade.nodeImageSelection",
            what="node image selection",
        )
    disabled = (
        _bool(a["disabled"], file=file, key="fleet.autoUpgrade.disabled")
        if a.get("disabled") is not None
        else False
    )
    return AutoUpgradeSpec(name=aname, channel=channel, node_image_selection=sel, disabled=disabled)


def _parse_placements(
    raw: Any, *, name: str, hub: HubSpec | None, file: str
) -> list[PlacementSpec]:
    """``fleet.placements`` (each: :func:`_parse_placement`); a non-empty list needs ``fleet.hub``."""
    raw_pl = _list(
        raw,
        file=file,
        key="fleet.placements",
        allow_empty=True,
        fix=f"list placements, e.g. placements: [{{component: {KERNEL_BLOCKLIST}}}]",
    )
    if raw_pl and hub is None:
        raise _err(
            "placements need a hub cluster (ClusterResourcePlacement lives on the hub)",
            file=file,
            key="fleet.placements",
            fix=f"add fleet.hub (e.g. hub: {{dnsPrefix: {name}-hub}}), or remove placements",
        )
    pnames: dict[str, int] = {}
    return [
        _parse_placement(p, file=file, key=f"fleet.placements[{i}]", index=i, seen=pnames)
        for i, p in enumerate(raw_pl)
    ]


def _parse_placement(
    raw: Any, *, file: str, key: str, index: int, seen: dict[str, int]
) -> PlacementSpec:
    """One placement (``fleet.placements[index]``): ``component`` (:data:`PLACEMENT_COMPONENTS`),
    ``name`` (default the component; not one of ``seen``, name -> index of the placements before
    it; this one is added), ``modules`` (kernel module names, default
    :data:`DEFAULT_BLOCKED_MODULES`) and ``image`` (pinned by digest, default
    :data:`DEFAULT_BLOCKLIST_IMAGE`)."""
    p = _mapping(raw, file=file, key=key, example=f"{{component: {KERNEL_BLOCKLIST}}}")
    p.check_keys(PLACEMENT_KEYS)
    if "component" not in p:
        raise _err(
            f"missing key '{key}.component'",
            file=file,
            key=f"{key}.component",
            allowed=", ".join(PLACEMENT_COMPONENTS),
            fix=f"set component: {KERNEL_BLOCKLIST}",
        )
    comp = _choice(
        p["component"],
        PLACEMENT_COMPONENTS,
        file=file,
        key=f"{key}.component",
        what="placement component",
    )
    pname = _azure_name(
        p.get("name", comp), file=file, key=f"{key}.name", max_len=40, what="placement name"
    )
    if pname in seen:
        raise _err(
            f"placement name '{pname}' is used twice (fleet.placements[{seen[pname]}] and {key})",
            file=file,
            key=f"{key}.name",
            fix="give every placement its own name",
        )
    seen[pname] = index
    modules = DEFAULT_BLOCKED_MODULES
    if p.get("modules") is not None:
        mods = _list(
            p["modules"],
            file=file,
            key=f"{key}.modules",
            fix="list module names, e.g. modules: [algif_aead, esp4]",
        )
        for j, m in enumerate(mods):
            if not isinstance(m, str) or not MODULE_NAME.fullmatch(m):
                raise _err(
                    f"invalid kernel module name {m!r}",
                    file=file,
                    key=f"{key}.modules[{j}]",
                    allowed="1-56 lowercase letters, digits and '_' (the name modprobe and /proc/modules use)",
                    fix="write the module name as lsmod shows it, e.g. algif_aead",
                )
        if len(set(mods)) != len(mods):
            dup = next(m for m in mods if mods.count(m) > 1)
            raise _err(
                f"kernel module '{dup}' is listed twice",
                file=file,
                key=f"{key}.modules",
                fix="list each module once",
            )
        modules = tuple(mods)
    image = DEFAULT_BLOCKLIST_IMAGE
    if p.get("image") is not None:
        image = _text(p["image"], file=file, key=f"{key}.image")
        if not IMAGE_REF.fullmatch(image):
            raise _err(
                f"image {image!r} is not pinned by digest",
                file=file,
                key=f"{key}.image",
                allowed="registry/repository[:tag]@sha256:<64 hex> of an image with /bin/sh, grep, chroot and modprobe",
                fix=f"pin it, e.g. {DEFAULT_BLOCKLIST_IMAGE}",
            )
    return PlacementSpec(component=comp, name=pname, modules=modules, image=image)


def parse_member(raw: Any, *, file: str, cluster: str, key: str) -> MemberSpec:
    """Validate one cluster entry's ``fleet:`` mapping (``{group: canary, labels: {...}}``).

    Raises:
        GpuclusterError: not a mapping, unknown keys, no group, labels that are not Kubernetes
            labels, or a label that sets the fleet's group label (the group does that).
    """
    data = _mapping(raw, file=file, key=key, cluster=cluster, example="{group: canary}")
    data.check_keys(MEMBER_KEYS)
    if data.get("group") is None:
        raise _err(
            f"missing key '{key}.group'",
            file=file,
            key=f"{key}.group",
            cluster=cluster,
            fix="name the cluster's update group, e.g. fleet: {group: canary}",
        )
    group = _text(data["group"], file=file, key=f"{key}.group", cluster=cluster)
    labels: dict[str, str] = {}
    if data.get("labels") is not None:
        lab = _mapping(
            data["labels"],
            file=file,
            key=f"{key}.labels",
            cluster=cluster,
            example="{region: eastus}",
        )
        for lk, lv in lab.items():
            if (
                not isinstance(lk, str)
                or not LABEL_KEY.fullmatch(lk)
                or not isinstance(lv, str)
                or not LABEL_VALUE.fullmatch(lv)
            ):
                raise _err(
                    f"member label {lk!r}: {lv!r} is not a Kubernetes label",
                    file=file,
                    key=f"{key}.labels.{lk}",
                    cluster=cluster,
                    allowed="[prefix/]name keys and string values of <= 63 of [A-Za-z0-9._-]",
                    fix="write e.g. labels: {region: eastus}; quote values YAML reads as numbers or booleans",
                )
            labels[lk] = lv
    return MemberSpec(cluster=cluster, group=group, labels=tuple(sorted(labels.items())), key=key)


def check_members(fleet: FleetSpec, clusters: Sequence[Any], *, min_kubernetes: str) -> None:
    """Cross-check the fleet against the parsed clusters (``ClusterSpec`` s, in file order).

    Args:
        min_kubernetes: the AKS platform floor (``Platform.min_kubernetes``, ``"1.34"``).

    Raises:
        GpuclusterError (id ``fleet``): a cluster in no group; an unknown group; a member that is
            not AKS (``criteria.service``) or that gpucluster does not create (``existing:``: its
            resource ID is unknown here); a group without clusters; a group whose members exceed
            the run-trigger fan-in when the backend is cloud; an update run whose Kubernetes
            version skips a minor for some member, is below the floor, or downgrades.
    """
    file = fleet.source
    groups = [g.name for g in fleet.groups]
    for i, c in enumerate(clusters):
        member = fleet.members.get(c.name)
        if member is None:
            raise _err(
                f"cluster '{c.name}' is in no update group of fleet '{fleet.name}'",
                file=file,
                cluster=c.name,
                key=f"clusters[{i}].fleet.group",
                allowed=", ".join(groups),
                fix=f"add fleet: {{group: {groups[0]}}} to the cluster (every cluster of a fleet file is a member)",
            )
        if member.group not in groups:
            raise _err(
                f"cluster '{c.name}' names unknown update group '{member.group}'",
                file=file,
                cluster=c.name,
                key=f"{member.key}.group",
                allowed=", ".join(groups),
                fix="use one of fleet.groups, or declare the group there (groups roll out in their listed order)",
            )
        if c.criteria.service != "aks":
            raise _err(
                f"cluster '{c.name}' is not an AKS cluster (service '{c.criteria.service}'); Azure Kubernetes Fleet "
                "Manager members here are AKS clusters",
                file=file,
                cluster=c.name,
                key=f"clusters[{i}].criteria.service",
                allowed="aks",
                fix="remove the cluster's fleet: key and keep it out of this file's fleet, or use service: aks",
            )
        if c.existing is not None:
            raise _err(
                f"cluster '{c.name}' is an existing cluster; a fleet member needs the AKS resource ID of a cluster "
                "gpucluster creates",
                file=file,
                cluster=c.name,
                key=f"clusters[{i}].existing",
                fix="remove existing: (gpucluster creates the cluster), or join it with `az fleet member create "
                "--member-cluster-id ...` and keep it out of this file",
            )
    for g in groups:
        if not any(m.group == g for m in fleet.members.values()):
            raise _err(
                f"update group '{g}' has no cluster",
                file=file,
                key="fleet.groups",
                fix=f"add fleet: {{group: {g}}} to a cluster, or remove the group",
            )
    for run in fleet.update_runs:
        if run.kubernetes_version is None:
            continue
        target = _minor(run.kubernetes_version)
        floor = _minor(min_kubernetes)
        if target < floor:
            raise _err(
                f"update run '{run.name}' targets Kubernetes {run.kubernetes_version}, below the AKS floor {min_kubernetes} "
                "(DRA resource.k8s.io/v1 is GA from 1.34)",
                file=file,
                key=f"{run.key}.kubernetesVersion",
                allowed=f">= {min_kubernetes}",
                fix=f'target {min_kubernetes} or later, e.g. kubernetesVersion: "{min_kubernetes}"',
            )
        for c in clusters:
            current = _minor(c.kubernetes_version)
            if target > current + 1:
                raise _err(
                    f"update run '{run.name}' would take cluster '{c.name}' from Kubernetes {c.kubernetes_version} to "
                    f"{run.kubernetes_version}, skipping minor versions (AKS upgrades one minor at a time)",
                    file=file,
                    cluster=c.name,
                    key=f"{run.key}.kubernetesVersion",
                    allowed=f"1.{current} or 1.{current + 1} for this cluster",
                    fix=f'target 1.{current + 1} first (kubernetesVersion: "1.{current + 1}"), start it, then set the '
                    f"cluster's kubernetesVersion to 1.{current + 1} and declare the next run",
                )
            if target < current:
                raise _err(
                    f"update run '{run.name}' targets Kubernetes {run.kubernetes_version}, older than cluster '{c.name}' "
                    f"({c.kubernetes_version}); AKS never downgrades",
                    file=file,
                    cluster=c.name,
                    key=f"{run.key}.kubernetesVersion",
                    fix=f"target {c.kubernetes_version} or 1.{current + 1}",
                )


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def check_cloud_fan_in(fleet: FleetSpec, clusters: Sequence[Any]) -> None:
    """Refuse a group larger than HCP Terraform's run-trigger fan-in when the clusters use the cloud backend.

    The barrier workspace ``<fleet>-after-<group>`` is triggered by every runtime workspace of
    its group; HCP Terraform connects at most :data:`MAX_RUN_TRIGGER_SOURCES` source workspaces.

    Raises:
        GpuclusterError: a non-last group with more than 20 clusters on the cloud backend.
    """
    from gpucluster.inputs.backends import is_cloud

    by_name = {c.name: c for c in clusters}
    for g in fleet.groups[:-1]:
        names = [m.cluster for m in fleet.members.values() if m.group == g.name]
        if len(names) > MAX_RUN_TRIGGER_SOURCES and any(
            is_cloud(by_name[n].backend) for n in names
        ):
            raise _err(
                f"update group '{g.name}' has {len(names)} clusters; its barrier workspace would need {len(names)} run "
                f"trigger sources and HCP Terraform allows {MAX_RUN_TRIGGER_SOURCES}",
                file=fleet.source,
                key="fleet.groups",
                fix=f"split the group into groups of at most {MAX_RUN_TRIGGER_SOURCES} clusters (e.g. prod1, prod2)",
            )


# --------------------------------------------------------------------------- rollout


def stages(fleet: FleetSpec) -> list[tuple[UpdateGroup, list[str]]]:
    """The rollout order: ``[(group, [cluster names in file order]), ...]`` in group order."""
    return [
        (g, [m.cluster for m in fleet.members.values() if m.group == g.name]) for g in fleet.groups
    ]


def rollout_digest(plan: Any) -> str:
    """sha256 (hex) of what a cluster's runtime stack installs (a :class:`~gpucluster.model.RuntimePlan`).

    Covers every release: id, kind, chart, repository, version, namespace, values, generated
    chart content hash and dependencies. Same plan, same digest, in any folder.
    """
    nodes = [
        {
            "id": n.id,
            "kind": n.kind,
            "chart": n.chart,
            "repository": n.repository,
            "version": n.version,
            "namespace": n.namespace,
            "values": n.values,
            "local": n.local_chart.content_hash if n.local_chart is not None else None,
            "dependsOn": list(n.depends_on),
        }
        for n in plan.nodes
    ]
    text = json.dumps(nodes, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def group_digest(digests: Iterable[tuple[str, str]]) -> str:
    """sha256 (hex) over ``(cluster, rollout digest)`` pairs, sorted: what a barrier promotes."""
    text = "\n".join(f"{c}={d}" for c, d in sorted(digests))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- hub objects


def blocklist_script(modules: Sequence[str]) -> str:
    """The DaemonSet's shell script: block ``modules`` in modprobe.d and unload them (as Azure/AKS#5753 does)."""
    mods = " ".join(modules)
    return (
        'echo "=== Kernel module blocklist (gpucluster fleet placement) ==="\n'
        f'MODULES="{mods}"\n'
        "for mod in $MODULES; do\n"
        '  if ! grep -qs "install ${mod} /bin/false" /host/etc/modprobe.d/*.conf 2>/dev/null; then\n'
        '    printf "install %s /bin/false\\nblacklist %s\\n" "$mod" "$mod" >> /host/etc/modprobe.d/disable-gpucluster-blocklist.conf\n'
        '    echo "Blocked ${mod}"\n'
        "  else\n"
        '    echo "${mod} already blocked"\n'
        "  fi\n"
        '  if chroot /host grep -q "^${mod} " /proc/modules 2>/dev/null; then\n'
        '    if chroot /host modprobe -r "$mod" 2>/dev/null; then\n'
        '      echo "Unloaded ${mod}"\n'
        "    else\n"
        '      echo "WARNING: could not unload ${mod} (in use); reboot the node"\n'
        "    fi\n"
        "  fi\n"
        "done\n"
        'echo "=== Blocklist applied; sleeping ==="\n'
        "sleep infinity\n"
    )


def blocklist_objects(placement: PlacementSpec) -> list[dict[str, Any]]:
    """Namespace + privileged DaemonSet that block ``placement.modules`` on every Linux node."""
    ns = placement.name
    labels = {
        "app.kubernetes.io/name": placement.name,
        "app.kubernetes.io/managed-by": "gpucluster",
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": dict(labels)}},
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": placement.name,
                "namespace": ns,
                "labels": {**labels, "purpose": "security-mitigation"},
            },
            "spec": {
                "selector": {"matchLabels": {"app.kubernetes.io/name": placement.name}},
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {
                        "hostPID": True,
                        "priorityClassName": "system-node-critical",
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [
                            {
                                "name": "blocklist",
                                "image": placement.image,
                                "command": ["/bin/sh", "-c", blocklist_script(placement.modules)],
                                "resources": {
                                    "requests": {"cpu": "10m", "memory": "16Mi"},
                                    "limits": {"memory": "32Mi"},
                                },
                                "securityContext": {"privileged": True},
                                "volumeMounts": [{"name": "host-root", "mountPath": "/host"}],
                            }
                        ],
                        "volumes": [
                            {"name": "host-root", "hostPath": {"path": "/", "type": "Directory"}}
                        ],
                    },
                },
            },
        },
    ]


def staged_strategy(fleet: FleetSpec) -> dict[str, Any]:
    """The hub ``ClusterStagedUpdateStrategy``: one stage per group, selecting members by the group label."""
    stages_out = []
    for g in fleet.groups:
        stage: dict[str, Any] = {
            "name": g.name,
            "labelSelector": {"matchLabels": {fleet.group_label: g.name}},
        }
        tasks = []
        if g.after_stage_wait_seconds:
            tasks.append({"type": "TimedWait", "waitTime": f"{g.after_stage_wait_seconds}s"})
        if g.approval:
            tasks.append({"type": "Approval"})
        if tasks:
            stage["afterStageTasks"] = tasks
        stages_out.append(stage)
    return {
        "apiVersion": PLACEMENT_API,
        "kind": "ClusterStagedUpdateStrategy",
        "metadata": {"name": fleet.strategy_name},
        "spec": {"stages": stages_out},
    }


def placement_objects(fleet: FleetSpec, placement: PlacementSpec) -> list[dict[str, Any]]:
    """Hub objects of one placement, in apply order.

    The component's own objects (Namespace, DaemonSet), a ``ClusterResourcePlacement`` selecting the
    Namespace (with its resources) for all members (``PickAll``) with strategy ``External``, and a
    ``ClusterStagedUpdateRun`` with ``state: Run`` over the fleet's ``ClusterStagedUpdateStrategy``.
    The run's name carries the first 10 hex digits of the objects' hash: changed content, new run
    (a run's placement, strategy and snapshot are immutable).
    """
    if placement.component != KERNEL_BLOCKLIST:  # pragma: no cover - refused by parse_fleet
        raise ValueError(placement.component)
    objects = blocklist_objects(placement)
    digest = hashlib.sha256(json.dumps(objects, sort_keys=True).encode("utf-8")).hexdigest()[:10]
    crp = {
        "apiVersion": PLACEMENT_API,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": placement.name},
        "spec": {
            "resourceSelectors": [
                {"group": "", "version": "v1", "kind": "Namespace", "name": placement.name}
            ],
            "policy": {"placementType": "PickAll"},
            "strategy": {"type": "External"},
        },
    }
    run = {
        "apiVersion": PLACEMENT_API,
        "kind": "ClusterStagedUpdateRun",
        "metadata": {"name": f"{placement.name}-{digest}"},
        "spec": {
            "placementName": placement.name,
            "stagedRolloutStrategyName": fleet.strategy_name,
            "state": "Run",
        },
    }
    return [*objects, crp, run]


# --------------------------------------------------------------------------- Terraform Cloud


def tfc_topology(
    fleet: FleetSpec, clusters: Sequence[Any], *, provisioned: Mapping[str, bool]
) -> dict[str, Any] | None:
    """The Terraform Cloud layout of the fleet, or None when no cluster uses the cloud backend.

    Args:
        clusters: the fleet's ClusterSpecs (``backend`` normalized by :mod:`gpucluster.inputs.backends`).
        provisioned: cluster name -> True when a ``<name>-cluster`` stack exists.

    Returns:
        ``{"organization", "hostname", "project", "workspaces": [names], "runTriggers":
        [{"workspace", "sources": [...]}, ...], "remoteStateConsumers": [{"workspace", "consumers"}]}``.
        One workspace per stack, ``<workspacePrefix><stack>``; the project is the fleet's (the
        backend's ``project``, else the fleet name). Run triggers: a cluster's runtime workspace
        after its cluster workspace; the fleet workspace after the cluster workspaces (the first 20:
        HCP Terraform's limit; beyond that, queue the fleet workspace yourself); the barrier ``<fleet>-after-<group>`` after the group's runtime workspaces; the next
        group's runtime workspaces after the barrier; the hub workspace after the fleet workspace.
    """
    from gpucluster.inputs.backends import is_cloud, workspace_name

    backend = next((c.backend for c in clusters if is_cloud(c.backend)), None)
    if backend is None:
        return None
    ws = lambda stack: workspace_name(backend, stack)  # noqa: E731
    workspaces: list[str] = []
    triggers: list[dict[str, Any]] = []
    consumers: dict[str, set[str]] = {}

    def consume(source: str, reader: str) -> None:
        consumers.setdefault(source, set()).add(reader)

    fleet_ws = ws(fleet_stack_name(fleet.name))
    cluster_ws = []
    for c in clusters:
        runtime = ws(f"{c.name}-runtime")
        if provisioned.get(c.name):
            cws = ws(f"{c.name}-cluster")
            workspaces.append(cws)
            cluster_ws.append(cws)
            triggers.append({"workspace": runtime, "sources": [cws]})
            consume(cws, runtime)
            consume(cws, fleet_ws)
        workspaces.append(runtime)
    workspaces.append(fleet_ws)
    if cluster_ws:
        triggers.append({"workspace": fleet_ws, "sources": cluster_ws[:MAX_RUN_TRIGGER_SOURCES]})
    order = stages(fleet)
    for (group, names), nxt in itertools.pairwise(order):
        barrier = ws(barrier_stack_name(fleet.name, group.name))
        workspaces.append(barrier)
        sources = [ws(f"{n}-runtime") for n in names]
        triggers.append({"workspace": barrier, "sources": sources})
        for s in sources:
            consume(s, barrier)
        for n in nxt[1]:
            target = ws(f"{n}-runtime")
            triggers.append({"workspace": target, "sources": [barrier]})
            consume(barrier, target)
    if fleet.hub is not None and fleet.placements:
        hub = ws(hub_stack_name(fleet.name))
        workspaces.append(hub)
        triggers.append({"workspace": hub, "sources": [fleet_ws]})
    merged: dict[str, list[str]] = {}
    for t in triggers:
        merged.setdefault(t["workspace"], [])
        merged[t["workspace"]].extend(s for s in t["sources"] if s not in merged[t["workspace"]])
    return {
        "organization": backend["organization"],
        "hostname": backend["hostname"],
        "project": backend.get("project") or fleet.name,
        "workspaces": workspaces,
        "runTriggers": [{"workspace": w, "sources": s} for w, s in merged.items()],
        "remoteStateConsumers": [
            {"workspace": w, "consumers": sorted(r)} for w, r in consumers.items()
        ],
    }

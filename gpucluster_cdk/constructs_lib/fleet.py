"""Azure Kubernetes Fleet Manager constructs (``hashicorp/azurerm`` 4.55 + ``Azure/azapi`` 2.x).

* :class:`FleetManager` -- ``azurerm_kubernetes_fleet_manager`` (optional hub profile) or a
  referenced existing fleet, one ``azurerm_kubernetes_fleet_member`` per cluster,
  ``azurerm_kubernetes_fleet_update_strategy`` (one stage per update group, after-stage waits),
  ``azurerm_kubernetes_fleet_update_run`` per declared run, and the auto-upgrade profile as an
  ``azapi_resource`` (azurerm 4.55 has no resource for ``fleets/autoUpgradeProfiles``).
* :class:`StageBarrier` -- ``terraform_data`` whose precondition holds only when every runtime
  stack of a group reports the rollout digest gpucluster expects (and, with approval, when the
  ``approve_<group>`` variable carries that digest).
* :func:`rollout_marker` / :func:`promotion_gate` -- the two ends of a barrier in the runtime stacks.

The constructs render what they are given (:mod:`gpucluster.inputs.fleet` decides); names and values
arrive validated (no ``${`` / ``%{`` can reach Terraform).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpucluster_cdk.constructs_lib.aks import ensure_azurerm_provider
from gpucluster_cdk.constructs_lib.cdk import (
    AZAPI_PROVIDER,
    Construct,
    DataResource,
    Fn,
    Op,
    Precondition,
    TerraformOutput,
    TerraformProvider,
    TerraformProviderGeneratorMetadata,
    TerraformResource,
    TerraformResourceLifecycle,
    TerraformStack,
    TerraformVariable,
    azurerm_fleet,
)
from gpucluster_cdk.constructs_lib.tfstring import literal, literal_tree

AUTO_UPGRADE_API = "Microsoft.ContainerService/fleets/autoUpgradeProfiles@2025-03-01"
"""ARM type and GA api-version of the auto-upgrade profile (REST ``Auto Upgrade Profiles - Create Or Update``)."""
DIGEST_DISPLAY = 16
"""Hex digits of a group digest an approver types (``approve_<group>``)."""


@dataclass(frozen=True)
class FleetMemberProps:
    """One fleet member.

    Attributes:
        name: the member name (the cluster's name).
        group: its update group (a stage of the update strategy).
        cluster_id: the AKS cluster's resource id (a token of its cluster stack).
    """

    name: str
    group: str
    cluster_id: Any


@dataclass(frozen=True)
class FleetStage:
    """One update-strategy stage (= one update group).

    Attributes:
        name: the stage's name, which is its group's name.
        after_stage_wait_seconds: wait after the stage in seconds; None: no wait.
    """

    name: str
    after_stage_wait_seconds: int | None = None


@dataclass(frozen=True)
class FleetUpdateRunProps:
    """A declared update run (``azurerm_kubernetes_fleet_update_run``).

    Attributes:
        name: the run's name.
        upgrade: ``Full`` | ``ControlPlaneOnly`` | ``NodeImageOnly``.
        kubernetes_version: the target version; None for ``NodeImageOnly``.
        node_image_selection: ``Latest`` (default) | ``Consistent``.
    """

    name: str
    upgrade: str
    kubernetes_version: str | None = None
    node_image_selection: str = "Latest"


@dataclass(frozen=True)
class FleetAutoUpgradeProps:
    """The fleet's auto-upgrade profile.

    Attributes:
        name: the profile's name.
        channel: ``Stable`` | ``Rapid`` | ``NodeImage``.
        node_image_selection: ``Latest`` | ``Consistent``; None leaves it out.
        disabled: the profile exists but triggers no runs.
    """

    name: str
    channel: str
    node_image_selection: str | None = None
    disabled: bool = False


@dataclass(frozen=True)
class FleetManagerProps:
    """Props of :class:`FleetManager`.

    Attributes:
        name: fleet name.
        existing_id: the resource id of an existing fleet to reference instead of creating one.
        resource_group / location: of a created fleet (resource group created too).
        hub_dns_prefix: create the fleet with a hub cluster (``hub_profile.dns_prefix``).
        members / stages / update_runs / auto_upgrade: as in :mod:`gpucluster.inputs.fleet`.
        strategy_name: name of the update strategy.
        tags: Azure tags of created resources.
    """

    name: str
    strategy_name: str
    members: Sequence[FleetMemberProps]
    stages: Sequence[FleetStage]
    location: str
    resource_group: str | None = None
    existing_id: str | None = None
    hub_dns_prefix: str | None = None
    update_runs: Sequence[FleetUpdateRunProps] = ()
    auto_upgrade: FleetAutoUpgradeProps | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


class FleetManager(Construct):
    """The fleet, its members, update strategy, update runs and auto-upgrade profile.

    Attributes:
        fleet_id: the Fleet Manager resource id (token or the existing id);
        manager, members (name -> resource), strategy, update_runs (name -> resource), auto_upgrade.
    """

    def __init__(self, scope: Construct, id: str, props: FleetManagerProps):
        super().__init__(scope, id)
        az = azurerm_fleet()
        stack = TerraformStack.of(self)
        ensure_azurerm_provider(stack)
        tags = literal_tree(dict(sorted(props.tags.items()))) or None
        self.manager = None
        if props.existing_id is None:
            from gpucluster_cdk.constructs_lib.cdk import azurerm

            rg = azurerm().ResourceGroup(
                self,
                "resource-group",
                name=literal(props.resource_group or f"{props.name}-rg"),
                location=literal(props.location),
                tags=tags,
            )
            self.manager = az.KubernetesFleetManager(
                self,
                "manager",
                name=literal(props.name),
                location=rg.location,
                resource_group_name=rg.name,
                hub_profile=az.KubernetesFleetManagerHubProfile(
                    dns_prefix=literal(props.hub_dns_prefix)
                )
                if props.hub_dns_prefix
                else None,
                tags=tags,
            )
            self.fleet_id = self.manager.id
        else:
            self.fleet_id = literal(props.existing_id)
        self.members = {}
        for m in props.members:
            self.members[m.name] = az.KubernetesFleetMember(
                self,
                f"member-{m.name}",
                name=literal(m.name),
                kubernetes_fleet_id=self.fleet_id,
                kubernetes_cluster_id=m.cluster_id,
                group=literal(m.group),
            )
        stage_blocks = [
            az.KubernetesFleetUpdateStrategyStage(
                name=literal(s.name),
                group=[az.KubernetesFleetUpdateStrategyStageGroup(name=literal(s.name))],
                after_stage_wait_in_seconds=s.after_stage_wait_seconds or None,
            )
            for s in props.stages
        ]
        self.strategy = az.KubernetesFleetUpdateStrategy(
            self,
            "strategy",
            name=literal(props.strategy_name),
            kubernetes_fleet_manager_id=self.fleet_id,
            stage=stage_blocks,
            depends_on=list(self.members.values()) or None,
        )
        self.update_runs = {}
        for run in props.update_runs:
            update = az.KubernetesFleetUpdateRunManagedClusterUpdate(
                upgrade=az.KubernetesFleetUpdateRunManagedClusterUpdateUpgrade(
                    type=literal(run.upgrade),
                    kubernetes_version=literal(run.kubernetes_version)
                    if run.kubernetes_version
                    else None,
                ),
                node_image_selection=az.KubernetesFleetUpdateRunManagedClusterUpdateNodeImageSelection(
                    type=literal(run.node_image_selection)
                ),
            )
            self.update_runs[run.name] = az.KubernetesFleetUpdateRun(
                self,
                f"run-{run.name}",
                name=literal(run.name),
                kubernetes_fleet_manager_id=self.fleet_id,
                fleet_update_strategy_id=self.strategy.id,
                managed_cluster_update=update,
            )
        self.auto_upgrade = None
        if props.auto_upgrade is not None:
            a = props.auto_upgrade
            provider = ensure_azapi_provider(stack)
            self.auto_upgrade = TerraformResource(
                self,
                "auto-upgrade",
                terraform_resource_type="azapi_resource",
                terraform_generator_metadata=TerraformProviderGeneratorMetadata(
                    provider_name=AZAPI_PROVIDER.name
                ),
                provider=provider,
            )
            properties: dict[str, Any] = {
                "channel": literal(a.channel),
                "updateStrategyId": self.strategy.id,
                "disabled": a.disabled,
            }
            if a.node_image_selection:
                properties["nodeImageSelection"] = {"type": literal(a.node_image_selection)}
            for key, value in (
                ("type", AUTO_UPGRADE_API),
                ("name", literal(a.name)),
                ("parent_id", self.fleet_id),
                ("body", {"properties": properties}),
            ):
                self.auto_upgrade.add_override(key, value)
        TerraformOutput(
            self, "fleet_id", value=self.fleet_id, description="Fleet Manager resource id"
        ).override_logical_id("fleet_id")
        TerraformOutput(
            self,
            "update_strategy_id",
            value=self.strategy.id,
            description="update strategy (stages = update groups in order)",
        ).override_logical_id("update_strategy_id")


def ensure_azapi_provider(stack: TerraformStack) -> TerraformProvider:
    """The stack's ``azapi`` provider (``Azure/azapi`` ``~> 2.0``), created if absent.

    Credentials come from the environment like azurerm's (``ARM_*``, ``az login``).
    """
    existing = stack.node.try_find_child(AZAPI_PROVIDER.name)
    if existing is not None:
        return existing
    return TerraformProvider(
        stack,
        AZAPI_PROVIDER.name,
        terraform_resource_type=AZAPI_PROVIDER.name,
        terraform_generator_metadata=TerraformProviderGeneratorMetadata(
            provider_name=AZAPI_PROVIDER.name,
            provider_version_constraint=AZAPI_PROVIDER.version_constraint,
        ),
        terraform_provider_source=AZAPI_PROVIDER.source,
    )


def rollout_marker(stack: TerraformStack, digest: str, releases: Sequence[Any]) -> DataResource:
    """``terraform_data.rollout`` in a runtime stack: ``input.digest``, applied after every release.

    Its ``output`` changes only when every Helm release (gates included, ``wait_for_jobs``) applied;
    a failed gate leaves the previous digest in the state, so a barrier reading it stays shut.
    """
    marker = DataResource(
        stack,
        "rollout",
        input={"digest": literal(digest)},
        depends_on=[getattr(r, "release", r) for r in releases] or None,
    )
    marker.override_logical_id("rollout")
    return marker


@dataclass(frozen=True)
class BarrierSource:
    """One runtime stack the barrier waits for.

    Attributes:
        cluster: the cluster's name.
        marker: its runtime stack's ``terraform_data.rollout`` (:func:`rollout_marker`).
        digest: the digest the marker must carry.
    """

    cluster: str
    marker: DataResource
    digest: str


class StageBarrier(Construct):
    """The promotion between update group ``group`` and the next one (in the ``<fleet>-after-<group>`` stack).

    ``terraform_data.promotion`` (``input.digest`` = the group digest) carries a precondition: every
    source's ``rollout`` output (read through cdktf cross-stack references, i.e. the source
    workspaces' outputs) equals the digest expected for this synthesis; with ``approval`` the
    variable ``approve_<group>`` must also hold the first :data:`DIGEST_DISPLAY` hex digits of the
    group digest. The next group's runtime stacks check ``promotion`` (:func:`promotion_gate`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        group: str,
        group_digest: str,
        sources: Sequence[BarrierSource],
        approval: bool,
    ):
        super().__init__(scope, id)
        stack = TerraformStack.of(self)
        checks = [Op.eq(Fn.lookup(s.marker.output, "digest", ""), s.digest) for s in sources]
        condition: Any = Fn.alltrue(checks)
        message = (
            f"update group '{group}' has not finished this rollout: every runtime stack of the group must have "
            f"applied (all gates passed) the release set gpucluster synthesized ({', '.join(s.cluster for s in sources)})"
        )
        short = group_digest[:DIGEST_DISPLAY]
        self.approval = None
        if approval:
            self.approval = TerraformVariable(
                stack,
                f"approve_{group}",
                type="string",
                default="",
                description=f"set to {short} to promote the rollout of update group '{group}' to the next group",
            )
            self.approval.override_logical_id(f"approve_{group}")
            condition = Op.and_(condition, Op.eq(self.approval.string_value, short))
            message += f'; and it needs an approval: set variable approve_{group} = "{short}" after validating the group'
        self.promotion = DataResource(
            self,
            "promotion",
            input={"digest": literal(group_digest)},
            lifecycle=TerraformResourceLifecycle(
                precondition=[Precondition(condition=condition, error_message=message)]
            ),
        )
        self.promotion.override_logical_id("promotion")


def promotion_gate(
    stack: TerraformStack, promotion: DataResource, group_digest: str, *, after_group: str
) -> DataResource:
    """``terraform_data.promotion_gate`` in a runtime stack of the next group: the plan fails unless the
    barrier after ``after_group`` promoted ``group_digest`` (a failed precondition fails the whole plan,
    so no release of this stack changes before the previous group is done)."""
    gate = DataResource(
        stack,
        "promotion_gate",
        input={"after": literal(after_group)},
        lifecycle=TerraformResourceLifecycle(
            precondition=[
                Precondition(
                    condition=Op.eq(Fn.lookup(promotion.output, "digest", ""), group_digest),
                    error_message=f"update group '{after_group}' has not been promoted for this rollout yet: apply the "
                    f"barrier stack after it first (cdktf deploy orders the stacks; in Terraform Cloud its run trigger does)",
                )
            ]
        ),
    )
    gate.override_logical_id("promotion_gate")
    return gate

"""Fleet stacks: ``<fleet>-fleet``, ``<fleet>-after-<group>`` barriers and ``<fleet>-hub`` (docs/fleets.md).

:func:`add_fleet` wires them into an App that already holds the clusters' ``<name>-cluster`` and
``<name>-runtime`` stacks:

* ``<fleet>-fleet`` (:class:`FleetStack`): Fleet Manager, one member per cluster (its AKS id read
  from the cluster stack through a cdktf cross-stack reference = that stack's outputs), update
  strategy, update runs, auto-upgrade profile.
* every runtime stack gets ``terraform_data.rollout`` (its rollout digest, after all releases);
* between group N and N+1 a ``<fleet>-after-<N>`` stack (:class:`BarrierStack`) reads group N's
  rollout outputs (and the approval variable), and every runtime stack of group N+1 gets
  ``terraform_data.promotion_gate`` reading the barrier, plus a cdktf stack dependency on it, so one
  ``cdktf deploy '*'`` applies canary, then the barrier, then prod.
* ``<fleet>-hub`` (:class:`HubStack`) with placements: Helm releases of generated charts on the hub
  (ClusterStagedUpdateStrategy; per placement its objects + ClusterResourcePlacement, then the
  ClusterStagedUpdateRun), after the fleet stack.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from gpucluster.charts.manifests import dump_documents, make_chart
from gpucluster.inputs import fleet as fleet_mod
from gpucluster.inputs.fleet import FleetSpec
from gpucluster.model import RuntimePlan
from gpucluster_cdk.constructs_lib.cdk import Construct, TerraformStack
from gpucluster_cdk.constructs_lib.fleet import (
    BarrierSource,
    FleetAutoUpgradeProps,
    FleetManager,
    FleetManagerProps,
    FleetMemberProps,
    FleetStage,
    FleetUpdateRunProps,
    StageBarrier,
    promotion_gate,
    rollout_marker,
)
from gpucluster_cdk.constructs_lib.helm import (
    LocalChartRelease,
    LocalChartReleaseProps,
    ensure_helm_provider,
    stack_variable,
)
from gpucluster_cdk.stacks.common import use_backend

HUB_RELEASE_NAMESPACE = "gpucluster-placements"
"""Namespace on the hub holding the placement Helm releases' metadata (the placed objects carry their own)."""


def _backend_owner(fleet: FleetSpec, plans: Sequence[RuntimePlan], stack_name: str) -> Any:
    """What :func:`gpucluster_cdk.stacks.common.use_backend` needs for a fleet-level stack: the fleet clusters' backend."""
    owner = next((p.cluster for p in plans if p.cluster.backend is not None), None)
    return SimpleNamespace(
        backend=owner.backend if owner else None,
        backend_key=owner.backend_key if owner else None,
        source=fleet.source,
        name=stack_name,
    )


class FleetStack(TerraformStack):
    """``<fleet>-fleet``: :class:`gpucluster_cdk.constructs_lib.fleet.FleetManager` for the fleet's members."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        fleet: FleetSpec,
        member_ids: Mapping[str, Any],
        owner: Any,
    ):
        super().__init__(scope, id)
        use_backend(self, owner)
        self.fleet = FleetManager(
            self,
            "fleet",
            FleetManagerProps(
                name=fleet.name,
                strategy_name=fleet.strategy_name,
                resource_group=fleet.resource_group,
                location=fleet.location,
                existing_id=fleet.existing_id,
                hub_dns_prefix=fleet.hub.dns_prefix if fleet.hub else None,
                members=[
                    FleetMemberProps(name=c, group=m.group, cluster_id=member_ids[c])
                    for c, m in fleet.members.items()
                ],
                stages=[
                    FleetStage(name=g.name, after_stage_wait_seconds=g.after_stage_wait_seconds)
                    for g in fleet.groups
                ],
                update_runs=[
                    FleetUpdateRunProps(
                        name=r.name,
                        upgrade=r.upgrade,
                        kubernetes_version=r.kubernetes_version,
                        node_image_selection=r.node_image_selection,
                    )
                    for r in fleet.update_runs
                ],
                auto_upgrade=FleetAutoUpgradeProps(
                    name=fleet.auto_upgrade.name,
                    channel=fleet.auto_upgrade.channel,
                    node_image_selection=fleet.auto_upgrade.node_image_selection,
                    disabled=fleet.auto_upgrade.disabled,
                )
                if fleet.auto_upgrade
                else None,
                tags={"gpucluster-fleet": fleet.name},
            ),
        )


class BarrierStack(TerraformStack):
    """``<fleet>-after-<group>``: :class:`gpucluster_cdk.constructs_lib.fleet.StageBarrier` (no provider, no cloud resource)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        group: fleet_mod.UpdateGroup,
        group_digest: str,
        sources: Sequence[BarrierSource],
        owner: Any,
    ):
        super().__init__(scope, id)
        use_backend(self, owner)
        self.barrier = StageBarrier(
            self,
            "barrier",
            group=group.name,
            group_digest=group_digest,
            sources=sources,
            approval=group.approval,
        )


class HubStack(TerraformStack):
    """``<fleet>-hub``: the fleet's placements as Helm releases on the hub cluster.

    The Helm provider reads the kubeconfig ``az fleet get-credentials`` writes (variables
    ``kubeconfig_path`` / ``kube_context``, defaults from ``fleet.hub``).
    """

    def __init__(self, scope: Construct, id: str, *, fleet: FleetSpec, owner: Any):
        super().__init__(scope, id)
        use_backend(self, owner)
        hub = fleet.hub
        if hub is None:
            raise ValueError(f"fleet {fleet.name} has no hub: its hub stack cannot be built")
        path_var = stack_variable(
            self,
            "kubeconfig_path",
            default=hub.kubeconfig_path,
            description="kubeconfig of the Fleet hub (`az fleet get-credentials`)",
        )
        stack_variable(
            self,
            "kube_context",
            default=hub.context or "",
            description="kubeconfig context of the hub ('' = the current context)",
        )
        ensure_helm_provider(
            self,
            config_path=path_var.string_value,
            config_context='${var.kube_context == "" ? null : var.kube_context}',
        )
        strategy_chart = make_chart(
            f"{fleet.name}-stages",
            "gpucluster: ClusterStagedUpdateStrategy of the fleet's update groups",
            [
                (
                    "cluster-staged-update-strategy",
                    dump_documents([fleet_mod.staged_strategy(fleet)]),
                )
            ],
        )
        strategy = LocalChartRelease(
            self,
            "stages",
            LocalChartReleaseProps(
                release_name=f"{fleet.name}-stages",
                namespace=HUB_RELEASE_NAMESPACE,
                chart=strategy_chart,
                description="gpucluster fleet staged update strategy",
            ),
        )
        self.releases = {"stages": strategy}
        for p in fleet.placements:
            objects = fleet_mod.placement_objects(fleet, p)
            *placed, run = objects
            chart = make_chart(
                p.name,
                f"gpucluster fleet placement: {p.component}",
                [
                    (f"{o['kind'].lower()}-{o['metadata']['name']}", dump_documents([o]))
                    for o in placed
                ],
            )
            release = LocalChartRelease(
                self,
                p.name,
                LocalChartReleaseProps(
                    release_name=p.name,
                    namespace=HUB_RELEASE_NAMESPACE,
                    chart=chart,
                    depends_on=(strategy,),
                    wait=False,
                    description=f"gpucluster fleet placement {p.component}",
                ),
            )
            run_chart = make_chart(
                f"{p.name}-run",
                f"gpucluster: ClusterStagedUpdateRun of placement {p.name}",
                [("cluster-staged-update-run", dump_documents([run]))],
            )
            run_release = LocalChartRelease(
                self,
                f"{p.name}-run",
                LocalChartReleaseProps(
                    release_name=f"{p.name}-run",
                    namespace=HUB_RELEASE_NAMESPACE,
                    chart=run_chart,
                    depends_on=(release,),
                    description=f"gpucluster staged update run of placement {p.name}",
                ),
            )
            self.releases[p.name] = release
            self.releases[f"{p.name}-run"] = run_release


def member_aks_cluster(stack: TerraformStack) -> Any:
    """The AKS cluster resource (``azurerm_kubernetes_cluster``) of a member's cluster stack."""
    from gpucluster_cdk.constructs_lib.aks import AksGpuCluster

    aks = stack.node.try_find_child("aks")  # the AKS plugin's construct id (one jsii call)
    if not isinstance(aks, AksGpuCluster):
        aks = next(c for c in stack.node.children if isinstance(c, AksGpuCluster))
    return aks.cluster


def member_cluster_id(stack: TerraformStack) -> Any:
    """The token of a member's AKS resource id the fleet stack references: the AKS construct's, or,
    for a stand-in of a reused stack (:func:`gpucluster_cdk.stacks.app.stand_in_stacks`), its resource
    with the same type and logical id (the same expression, so the same cross-stack output name)."""
    stand_in = getattr(stack, "stand_in_cluster_id", None)
    return stand_in if stand_in is not None else member_aks_cluster(stack).id


def member_exports(stack: TerraformStack) -> dict[str, Any]:
    """What a fleet build needs of a member's real cluster stack when it is reused later
    (:data:`gpucluster_cdk.stacks.reuse.EXPORT_KEYS`): ``aks_cluster`` = [resource type, logical id]."""
    cluster = member_aks_cluster(stack)
    return {"aks_cluster": [cluster.terraform_resource_type, cluster.friendly_unique_id]}


def add_fleet(
    app: Construct,
    fleet: FleetSpec,
    plans: Sequence[RuntimePlan],
    *,
    cluster_stacks: Mapping[str, TerraformStack],
    runtime_stacks: Mapping[str, Any],
) -> dict[str, TerraformStack]:
    """Add the fleet's stacks to ``app`` and order the runtime stacks by update group.

    Args:
        cluster_stacks: cluster name -> its ``<name>-cluster`` stack (every member has one).
        runtime_stacks: cluster name -> its :class:`~gpucluster_cdk.stacks.runtime.RuntimeStack`.

    Returns:
        stack name -> stack, of the stacks added.
    """
    by_name = {p.cluster.name: p for p in plans}
    added: dict[str, TerraformStack] = {}
    member_ids = {name: member_cluster_id(stack) for name, stack in cluster_stacks.items()}
    fs_name = fleet_mod.fleet_stack_name(fleet.name)
    added[fs_name] = FleetStack(
        app,
        fs_name,
        fleet=fleet,
        member_ids=member_ids,
        owner=_backend_owner(fleet, plans, fs_name),
    )

    digests = {name: fleet_mod.rollout_digest(plan) for name, plan in by_name.items()}
    markers = {
        name: rollout_marker(
            runtime_stacks[name], digests[name], list(runtime_stacks[name].releases.values())
        )
        for name in fleet.members
    }
    order = fleet_mod.stages(fleet)
    for (group, names), (_, next_names) in itertools.pairwise(order):
        gdigest = fleet_mod.group_digest((n, digests[n]) for n in names)
        b_name = fleet_mod.barrier_stack_name(fleet.name, group.name)
        barrier = BarrierStack(
            app,
            b_name,
            group=group,
            group_digest=gdigest,
            sources=[BarrierSource(cluster=n, marker=markers[n], digest=digests[n]) for n in names],
            owner=_backend_owner(fleet, plans, b_name),
        )
        added[b_name] = barrier
        for n in next_names:
            promotion_gate(
                runtime_stacks[n], barrier.barrier.promotion, gdigest, after_group=group.name
            )
            runtime_stacks[n].add_dependency(barrier)
    if fleet.hub is not None and fleet.placements:
        h_name = fleet_mod.hub_stack_name(fleet.name)
        hub = HubStack(app, h_name, fleet=fleet, owner=_backend_owner(fleet, plans, h_name))
        hub.add_dependency(added[fs_name])
        added[h_name] = hub
    return added

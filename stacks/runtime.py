"""``<name>-runtime``: one ``helm_release`` per PlanNode, in the plan's dependency order."""

from __future__ import annotations

from constructs_lib.cdk import Construct, TerraformStack
from constructs_lib.helm import (
    HelmComponent,
    ensure_helm_provider,
    HelmComponentProps,
    LocalChartRelease,
    LocalChartReleaseProps,
    stack_variable,
)
from gpucluster.graph import topological_layers
from gpucluster.model import ExistingCluster, RuntimePlan
from gpucluster.sdk.types import ClusterConnection
from stacks.common import use_backend

KUBECONFIG_PATH_VARIABLE = "kubeconfig_path"
KUBE_CONTEXT_VARIABLE = "kube_context"


class RuntimeStack(TerraformStack):
    """The GPU software stack of one cluster.

    The Helm provider (id ``helm``) reaches the cluster either through ``connection`` tokens
    (cross-stack references to the ``<name>-cluster`` outputs: host, client certificate/key,
    CA) or, for existing clusters, through Terraform variables ``kubeconfig_path`` and
    ``kube_context`` whose defaults come from the cluster file (``existing:``). The backend
    is the cluster file's choice (:func:`stacks.common.use_backend`).

    Attributes:
        releases: PlanNode id -> HelmComponent | LocalChartRelease.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: RuntimePlan,
        connection: ClusterConnection | None = None,
        existing: ExistingCluster | None = None,
    ):
        super().__init__(scope, id)
        use_backend(self, plan.cluster)
        if connection is not None and connection.host is not None:
            kubernetes = dict(
                host=connection.host,
                client_certificate=connection.client_certificate,
                client_key=connection.client_key,
                cluster_ca_certificate=connection.cluster_ca_certificate,
            )
        else:
            existing = existing or ExistingCluster()
            if connection is not None and connection.kubeconfig_path:
                existing = ExistingCluster(kubeconfig_path=connection.kubeconfig_path, context=connection.context)
            path_var = stack_variable(
                self,
                KUBECONFIG_PATH_VARIABLE,
                default=existing.kubeconfig_path,
                description="kubeconfig file of the existing cluster",
            )
            stack_variable(
                self,
                KUBE_CONTEXT_VARIABLE,
                default=existing.context or "",
                description="kubeconfig context of the existing cluster ('' = the current context)",
            )
            kubernetes = dict(
                config_path=path_var.string_value,
                config_context=f'${{var.{KUBE_CONTEXT_VARIABLE} == "" ? null : var.{KUBE_CONTEXT_VARIABLE}}}',
            )
        self.provider = ensure_helm_provider(self, **kubernetes)
        by_id = {node.id: node for node in plan.nodes}
        self.releases: dict[str, HelmComponent | LocalChartRelease] = {}
        for layer in topological_layers(plan.nodes):
            for node_id in layer:
                node = by_id[node_id]
                deps = [self.releases[d] for d in node.depends_on]
                if node.kind == "chart":
                    release = HelmComponent(self, node.id, HelmComponentProps.from_plan_node(node, depends_on=deps))
                else:
                    release = LocalChartRelease(self, node.id, LocalChartReleaseProps.from_plan_node(node, depends_on=deps))
                self.releases[node.id] = release

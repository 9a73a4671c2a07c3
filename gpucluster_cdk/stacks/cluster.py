"""``<name>-cluster``: the cloud resources of one cluster, built by its platform plugin."""

from __future__ import annotations

from gpucluster.errors import GpuclusterError
from gpucluster.model import ClusterConnection, ClusterSpec, Recipe, absolute_key
from gpucluster.plugins import call_hook
from gpucluster.recipes.recipe import criteria_source
from gpucluster_cdk.constructs_lib.cdk import Construct, TerraformStack
from gpucluster_cdk.stacks.common import use_backend


class ClusterStack(TerraformStack):
    """One cluster's infrastructure stack.

    Calls hook ``gpucluster_cluster_stack(scope=self, cluster, recipe)`` (firstresult): the
    platform plugin adds its constructs to this stack and returns the
    :class:`~gpucluster.model.ClusterConnection` (Terraform tokens) the runtime stack
    consumes through cdktf cross-stack references. The backend is the cluster file's choice
    (:func:`gpucluster_cdk.stacks.common.use_backend`).

    Raises:
        GpuclusterError: no plugin built the cluster, or the plugin returned something else
            than a ClusterConnection with a host (and credentials) or a kubeconfig_path.
    """

    def __init__(self, scope: Construct, id: str, *, cluster: ClusterSpec, recipe: Recipe):
        super().__init__(scope, id)
        use_backend(self, cluster)
        connection = call_hook(
            "gpucluster_cluster_stack", scope=self, cluster=cluster, recipe=recipe
        )
        service = cluster.criteria.service
        if connection is None:
            file = criteria_source(cluster)  # the RecipeResult for a cluster given by recipe:
            raise GpuclusterError(
                f"the platform of service '{service}' provisions clusters, but no plugin built the cluster stack",
                file=file,
                cluster=cluster.name,
                key=absolute_key(cluster, "criteria.service", file=file),
                fix="implement gpucluster_cluster_stack in the platform plugin (return a ClusterConnection), "
                "or set existing: to target an existing cluster",
            )
        if not isinstance(connection, ClusterConnection) or (
            connection.host is None and not connection.kubeconfig_path
        ):
            raise GpuclusterError(
                f"gpucluster_cluster_stack for service '{service}' returned {type(connection).__name__} "
                "without a host or kubeconfig_path",
                file=cluster.source,
                cluster=cluster.name,
                fix="return gpucluster.sdk.ClusterConnection(host=..., client_certificate=..., client_key=..., "
                "cluster_ca_certificate=...)",
            )
        self.connection: ClusterConnection = connection

"""``<name>-runtime``: one ``helm_release`` per PlanNode, in the plan's dependency order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpucluster.charts.crds import MAX_CRDS_GZ_BYTES
from gpucluster.charts.graph import topological_layers
from gpucluster.model import ClusterConnection, CrdSource, ExistingCluster, PlanNode, RuntimePlan
from gpucluster.values import has_path, set_entries, values_yaml
from gpucluster_cdk.constructs_lib.cdk import Construct, TerraformStack
from gpucluster_cdk.constructs_lib.helm import (
    CrdBundleSource,
    HelmComponent,
    HelmComponentProps,
    LocalChartRelease,
    LocalChartReleaseProps,
    SetEntry,
    ensure_helm_provider,
    stack_variable,
)
from gpucluster_cdk.stacks.common import use_backend

_VALUES_YAML: dict[str, str] = {}


def values_text(values: Mapping[str, Any]) -> str:
    """The values document of a release: :func:`gpucluster.values.values_yaml` (the text
    ``gpucluster render`` shares, so what is rendered is what is installed).

    PyYAML's pure-Python emitter is slow (libyaml's writes other bytes for some keys and strings),
    so each distinct document is rendered once per process: the cache key is ``repr`` of the
    values, which keeps every type apart (``1``/``'1'``/``True``/``1.0``, list/tuple, key types).
    """
    key = repr(values) if type(values) is dict else None
    if key is not None:
        hit = _VALUES_YAML.get(key)
        if hit is not None:
            return hit
    text = values_yaml(values)
    if key is not None:
        _VALUES_YAML[key] = text
    return text


def release_set_entries(
    values: Mapping[str, Any], terraform_variables: Mapping[str, str]
) -> tuple[SetEntry, ...]:
    """The :class:`gpucluster_cdk.constructs_lib.helm.SetEntry` s of a release's variable-bound values paths
    (:func:`gpucluster.values.set_entries`, sorted by path)."""
    return tuple(
        SetEntry(
            path=path,
            variable=var,
            default=default,
            set_type=set_type,
            present=has_path(values, path),
        )
        for path, var, default, set_type in set_entries(values, terraform_variables)
    )


def values_props(
    values: Mapping[str, Any], terraform_variables: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``values_yaml`` and ``set_entries`` of :class:`gpucluster_cdk.constructs_lib.helm.ReleaseOptions` for Helm
    ``values`` and their variable bindings (dotted path -> Terraform variable name)."""
    return dict(
        values_yaml=values_text(values),
        set_entries=release_set_entries(values, terraform_variables or {}),
    )


def crd_bundle_source(source: CrdSource | None) -> CrdBundleSource | None:
    """The construct's :class:`gpucluster_cdk.constructs_lib.helm.CrdBundleSource` of a CRD step's
    :class:`gpucluster.model.CrdSource` (with the size limit of :data:`gpucluster.charts.crds.MAX_CRDS_GZ_BYTES`)."""
    if source is None:
        return None
    return CrdBundleSource(
        repository=source.repository,
        chart=source.chart,
        version=source.version,
        values_yaml=values_text(source.values),
        kube_version=source.kube_version,
        max_gz_bytes=MAX_CRDS_GZ_BYTES,
    )


def _release_options(node: PlanNode, depends_on: Sequence[Any], provider: Any) -> dict[str, Any]:
    """The :class:`gpucluster_cdk.constructs_lib.helm.ReleaseOptions` fields of a :class:`PlanNode` (release name = node id)."""
    return dict(
        release_name=node.id,
        namespace=node.namespace,
        **values_props(node.values, node.terraform_variables),
        depends_on=tuple(depends_on),
        timeout_seconds=node.timeout_seconds,
        wait_for_jobs=node.wait_for_jobs,
        variable_hashes=node.variable_hashes,
        crd_source=crd_bundle_source(node.crd_source),
        description=f"gpucluster {node.kind} of component {node.component}",
        provider=provider,
    )


def chart_release_props(
    node: PlanNode, *, depends_on: Sequence[Any] = (), provider: Any = None
) -> HelmComponentProps:
    """Props of a ``kind == "chart"`` :class:`PlanNode` (the plan -> construct mapping lives here,
    in the stacks; ``gpucluster_cdk.constructs_lib`` knows nothing of plans)."""
    return HelmComponentProps(
        chart=node.chart,
        repository=node.repository,
        version=node.version,
        **_release_options(node, depends_on, provider),
    )


def local_chart_release_props(
    node: PlanNode, *, depends_on: Sequence[Any] = (), provider: Any = None
) -> LocalChartReleaseProps:
    """Props of a :class:`PlanNode` with a ``local_chart`` (pre-manifests, manifests, gate)."""
    return LocalChartReleaseProps(
        chart=node.local_chart, **_release_options(node, depends_on, provider)
    )


KUBECONFIG_PATH_VARIABLE = "kubeconfig_path"
KUBE_CONTEXT_VARIABLE = "kube_context"


def connection_arguments(connection: ClusterConnection) -> dict:
    """``HelmProviderKubernetes`` arguments of a host-based :class:`ClusterConnection`.

    ``host`` + ``cluster_ca_certificate`` and the one credential the connection carries: an
    ``exec`` credential plugin (e.g. kubelogin; nothing secret in state or outputs), a bearer
    ``token``, or a client certificate and key.

    Raises:
        ValueError: the connection carries more than one credential (:meth:`ClusterConnection.auth`).
    """
    from gpucluster_cdk.constructs_lib.cdk import helm

    auth = connection.auth()
    kubernetes: dict = dict(
        host=connection.host, cluster_ca_certificate=connection.cluster_ca_certificate
    )
    if auth == "exec":
        e = connection.exec
        kubernetes["exec"] = helm().HelmProviderKubernetesExec(
            api_version=e.api_version, command=e.command, args=list(e.args) or None
        )
    elif auth == "token":
        kubernetes["token"] = connection.token
    elif auth == "client_certificate":
        kubernetes.update(
            client_certificate=connection.client_certificate, client_key=connection.client_key
        )
    return kubernetes


def connect_helm_provider(stack: TerraformStack, connection: ClusterConnection):
    """The stack's ``helm`` provider reaching ``connection`` (:func:`connection_arguments`).

    ``exec.env`` is written as a raw override: cdktf rewrites the keys of maps nested in provider
    blocks to snake case (``AZURE_CLIENT_ID`` -> ``azure_client_id``), which would rename the
    variables the credential plugin reads.
    """
    provider = ensure_helm_provider(stack, **connection_arguments(connection))
    if connection.auth() == "exec" and connection.exec.env:
        provider.add_override("kubernetes.exec.env", dict(sorted(connection.exec.env.items())))
    return provider


class RuntimeStack(TerraformStack):
    """The GPU software stack of one cluster.

    The Helm provider (id ``helm``) reaches the cluster either through ``connection``
    (:func:`connection_arguments`: cross-stack references to the ``<name>-cluster`` outputs host
    and CA, plus an exec credential plugin, a token or a client certificate) or, for existing clusters, through Terraform variables ``kubeconfig_path`` and
    ``kube_context`` whose defaults come from the cluster file (``existing:``). The backend
    is the cluster file's choice (:func:`gpucluster_cdk.stacks.common.use_backend`).

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
            kubernetes = None
        else:
            existing = existing or ExistingCluster()
            if connection is not None and connection.kubeconfig_path:
                existing = ExistingCluster(
                    kubeconfig_path=connection.kubeconfig_path, context=connection.context
                )
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
        if kubernetes is None:
            self.provider = connect_helm_provider(self, connection)
        else:
            self.provider = ensure_helm_provider(self, **kubernetes)
        by_id = {node.id: node for node in plan.nodes}
        self.releases: dict[str, HelmComponent | LocalChartRelease] = {}
        for layer in topological_layers(plan.nodes):
            for node_id in layer:
                node = by_id[node_id]
                deps = [self.releases[d] for d in node.depends_on]
                mirror = plan.cluster.image_mirror or ""
                if node.kind == "chart":
                    release = HelmComponent(
                        self,
                        node.id,
                        replace(chart_release_props(node, depends_on=deps), image_mirror=mirror),
                    )
                else:
                    release = LocalChartRelease(
                        self,
                        node.id,
                        replace(
                            local_chart_release_props(node, depends_on=deps), image_mirror=mirror
                        ),
                    )
                self.releases[node.id] = release

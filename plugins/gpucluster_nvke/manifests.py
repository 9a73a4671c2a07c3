"""NVKE plugin: ``gpucluster_manifests`` (objects built in Python from settings and values)."""

from __future__ import annotations

from collections.abc import Mapping

from gpucluster.sdk import Component, Manifest, get_path, hookimpl
from gpucluster_nvke import fabric
from gpucluster_nvke.settings import NvkeSettings, parse_settings


def build_manifests(
    settings: NvkeSettings, components: Mapping[str, Component], scheduling=None
) -> list[Manifest]:
    """Every NVKE manifest for the enabled ``components`` (deterministic order).

    * ``gpu-operator`` pre: the ``driver.kernelModuleConfig.name`` ConfigMap
      (``NVreg_GrdmaPciTopoCheckOverride=1``) in the operator namespace.
    * ``network-operator`` post: the NicClusterPolicy (nv-ipam, multus, CNI plugins).
    * ``sriov-ib-networks`` post: per-rail IPPool, SriovNetworkNodePolicy, SriovIBNetwork, and
      the post-delete teardown wait.
    * ``rdma-modules`` post: the NodeWright loading the RDMA ULP modules.
    """
    out: list[Manifest] = []
    gpu = components.get("gpu-operator")
    if gpu is not None:
        name = get_path(gpu.values, "driver.kernelModuleConfig.name")
        if isinstance(name, str) and name:
            out.append(
                Manifest(
                    component="gpu-operator",
                    phase="pre",
                    name="kernel-module-params",
                    documents=[fabric.kernel_module_params(name, gpu.ref.namespace)],
                )
            )
    net = components.get("network-operator")
    if net is not None:
        out.append(
            Manifest(
                component="network-operator",
                phase="post",
                name="nic-cluster-policy",
                documents=[
                    fabric.nic_cluster_policy(settings, network_operator_version=net.ref.version)
                ],
            )
        )
    rails = components.get("sriov-ib-networks")
    if rails is not None:
        ns = rails.ref.namespace
        out.append(
            Manifest(
                component="sriov-ib-networks",
                phase="post",
                name="rails",
                documents=fabric.rail_objects(settings, ns),
            )
        )
        out.append(
            Manifest(
                component="sriov-ib-networks",
                phase="post",
                name="teardown-wait",
                documents=fabric.teardown_wait_hook(
                    settings,
                    ns,
                    system_node_selector=dict(scheduling.system_node_selector)
                    if scheduling is not None
                    else None,
                    system_tolerations=[t.as_dict() for t in scheduling.system_tolerations]
                    if scheduling is not None
                    else None,
                ),
            )
        )
    rdma = components.get("rdma-modules")
    if rdma is not None:
        out.append(
            Manifest(
                component="rdma-modules",
                phase="post",
                name="nodewright",
                documents=[fabric.rdma_modules_nodewright(rdma.values)],
            )
        )
    return out


@hookimpl
def gpucluster_manifests(cluster, recipe, components):
    settings = parse_settings(cluster.settings, file=cluster.source, cluster=cluster.name)
    return build_manifests(settings, components, cluster.scheduling)

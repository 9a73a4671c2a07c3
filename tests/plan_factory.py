"""Hand-built RuntimePlans for the constructs/stacks tests (no catalog, no pipeline).

The plans follow gpucluster.model exactly (the data contract between the domain core and the
constructs layer): a remote chart with a dependency, an OCI chart, a manifests local chart and
a readiness gate with ``wait_for_jobs``.
"""

from __future__ import annotations

import hashlib

from gpucluster.model import (
    ClusterSpec,
    Component,
    ComponentRef,
    Criteria,
    ExistingCluster,
    LocalChart,
    NodePool,
    PlanNode,
    Recipe,
    RuntimePlan,
    Taint,
)


def local_chart(name: str, manifest: str) -> LocalChart:
    files = {
        "Chart.yaml": f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n",
        "templates/000-object.yaml": manifest,
    }
    digest = hashlib.sha256(
        "".join(f"{k}\0{v}\0" for k, v in sorted(files.items())).encode()
    ).hexdigest()
    return LocalChart(name=name, version="0.1.0", files=files, content_hash=digest)


def make_plan(
    name: str = "lab",
    *,
    service: str = "aks",
    existing: ExistingCluster | None = None,
    gpu_stack: str = "azure-managed",
    kubernetes_version: str = "1.34",
) -> RuntimePlan:
    cluster = ClusterSpec(
        name=name,
        criteria=Criteria(service=service, accelerator="h100", os="ubuntu", intent="training"),
        profile={"gpuStack": gpu_stack},
        region="eastus",
        kubernetes_version=kubernetes_version,
        pools=[
            NodePool(name="system", vm_size="Standard_D8s_v5", node_count=2, gpu=False),
            NodePool(
                name="gpu",
                vm_size="Standard_ND96isr_H100_v5",
                node_count=1,
                gpu=True,
                gpu_driver="Install" if gpu_stack == "azure-managed" else "None",
                taints=[Taint("nvidia.com/gpu", "present", "NoSchedule")],
            ),
        ]
        if existing is None
        else [],
        existing=existing,
        source="tests/plan_factory.py",
    )
    refs = [
        ComponentRef(
            name="cert-manager",
            source="https://charts.jetstack.io",
            chart="cert-manager",
            version="v1.20.2",
            namespace="cert-manager",
        ),
        ComponentRef(
            name="gpu-operator",
            source="https://helm.ngc.nvidia.com/nvidia",
            chart="gpu-operator",
            version="v26.7.1",
            namespace="gpu-operator",
            dependency_refs=["cert-manager"],
        ),
        ComponentRef(
            name="nvidia-dra-driver-gpu",
            source="oci://registry.k8s.io/dra-driver-nvidia/charts",
            chart="nvidia-dra-driver-gpu",
            version="26.4.1",
            namespace="nvidia-dra-driver",
            dependency_refs=["gpu-operator"],
        ),
    ]
    recipe = Recipe(
        criteria=cluster.criteria, applied_overlays=["base"], constraints=[], component_refs=refs
    )
    components = {r.name: Component(ref=r, values={}) for r in refs}
    manifests = local_chart(
        "gpu-operator-manifests", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
    )
    gate = local_chart(
        "gpu-operator-ready", "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: wait\n"
    )
    nodes = [
        PlanNode(
            id="cert-manager",
            kind="chart",
            component="cert-manager",
            namespace="cert-manager",
            repository="https://charts.jetstack.io",
            chart="cert-manager",
            version="v1.20.2",
            values={"crds": {"enabled": True}, "literal": "${HOSTNAME} %{x}"},
        ),
        PlanNode(
            id="gpu-operator",
            kind="chart",
            component="gpu-operator",
            namespace="gpu-operator",
            repository="https://helm.ngc.nvidia.com/nvidia",
            chart="gpu-operator",
            version="v26.7.1",
            values={
                "driver": {"enabled": False, "version": "580.126.09"},
                "toolkit": {"enabled": False},
            },
            depends_on=["cert-manager"],
            terraform_variables={"driver.version": "gpu_driver_version"},
        ),
        PlanNode(
            id="gpu-operator-manifests",
            kind="manifests",
            component="gpu-operator",
            namespace="gpu-operator",
            local_chart=manifests,
            values={"contentHash": manifests.content_hash},
            depends_on=["gpu-operator"],
        ),
        PlanNode(
            id="gpu-operator-ready",
            kind="gate",
            component="gpu-operator",
            namespace="gpu-operator",
            local_chart=gate,
            values={"contentHash": gate.content_hash, "gatedHash": "abc"},
            depends_on=["gpu-operator-manifests"],
            wait_for_jobs=True,
            timeout_seconds=720,
        ),
        PlanNode(
            id="nvidia-dra-driver-gpu",
            kind="chart",
            component="nvidia-dra-driver-gpu",
            namespace="nvidia-dra-driver",
            repository="oci://registry.k8s.io/dra-driver-nvidia/charts",
            chart="nvidia-dra-driver-gpu",
            version="26.4.1",
            values={"nvidiaDriverRoot": "/"},
            depends_on=["gpu-operator-ready"],
        ),
    ]
    return RuntimePlan(cluster=cluster, recipe=recipe, components=components, nodes=nodes)

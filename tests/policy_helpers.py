"""Hand-built catalogs, recipes and components for the overrides/scheduling/policy unit tests.

The test catalog mirrors the shape of the real registry (names, aliases, nodeScheduling paths,
policyKeys) but is written here, so unit tests do not depend on the shipped catalog data.
"""

from __future__ import annotations

import copy
import re
import textwrap
from pathlib import Path
from typing import Any

from gpucluster.model import (
    ClusterSpec,
    Component,
    ComponentRef,
    Criteria,
    NodePool,
    NodeScheduling,
    Recipe,
    Taint,
)
from gpucluster.recipes.catalog import load_catalog

REGISTRY = textwrap.dedent(
    """
    components:
      - name: nfd
        aliases: [nfd]
        helm: {repository: https://example.invalid/nfd, chart: nfd, version: "1.0.0", namespace: nfd}
        nodeScheduling:
          system:
            nodeSelectorPaths: [master.nodeSelector]
            tolerationPaths: [master.tolerations, worker.tolerations]
          accelerated:
            tolerationPaths: [worker.tolerations]
      - name: gpu-operator
        aliases: [gpuoperator]
        helm: {repository: https://example.invalid/nvidia, chart: gpu-operator, version: v1.0.0, namespace: gpu-operator}
        nodeScheduling:
          system:
            nodeSelectorPaths: [operator.nodeSelector]
            tolerationPaths: [operator.tolerations]
          accelerated:
            tolerationPaths: [daemonsets.tolerations]
        policyKeys: [devicePlugin.enabled]
      - name: network-operator
        aliases: [networkoperator]
        helm: {repository: https://example.invalid/nvidia, chart: network-operator, version: "1.0.0", namespace: nvidia-network-operator}
      - name: nvidia-dra-driver-gpu
        aliases: [dradriver]
        helm: {repository: oci://example.invalid/dra, chart: dra, version: "0.5.0", namespace: nvidia-dra-driver}
        nodeScheduling:
          system:
            nodeSelectorPaths: [controller.nodeSelector]
            tolerationPaths: [controller.tolerations]
          accelerated:
            nodeSelectorPaths: [kubeletPlugin.nodeSelector]
            tolerationPaths: [kubeletPlugin.tolerations]
        policyKeys: [resources.gpus.enabled, gpuResourcesEnabledOverride]
      - name: nodewright-operator
        aliases: [nodewright, skyhook]
        helm: {repository: oci://example.invalid/nodewright, chart: nodewright, version: v0.1.0, namespace: nodewright}
        nodeScheduling:
          nodeCountPaths: [estimatedNodeCount]
          system:
            nodeSelectorPaths: [controllerManager.selectors]
            tolerationPaths: [controllerManager.tolerations]
          accelerated:
            taintStrPaths: [controllerManager.manager.env.runtimeRequiredTaint]
      - name: nodewright-customizations
        aliases: [nodewrightcustomizations, skyhookcustomizations]
        type: Manifest
        helm: {namespace: nodewright}
        nodeScheduling:
          accelerated:
            nodeSelectorPaths: [acceleratedNodeSelector]
            tolerationPaths: [acceleratedTolerations]
      - name: nvsentinel
        aliases: [nv-sentinel]
        helm: {repository: oci://example.invalid/nvsentinel, chart: nvsentinel, version: v1.0.0, namespace: nvsentinel}
        policyKeys: [global.tracing.endpoint]
      - name: extra
        helm: {repository: https://example.invalid/extra, chart: extra, version: "1.0.0", namespace: extra}
    """
)

EDGES = {
    "gpu-operator": ["network-operator", "nfd", "nodewright-customizations"],
    "network-operator": ["nfd"],
    "nodewright-customizations": ["nodewright-operator"],
    "nvidia-dra-driver-gpu": [],
    "nfd": [],
    "nodewright-operator": [],
    "nvsentinel": [],
}

AZURE_MANAGED = {
    "gpu-operator": {
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        "operator": {"runtimeClass": "nvidia-container-runtime"},
    },
    "nvidia-dra-driver-gpu": {"nvidiaDriverRoot": "/"},
    "nvsentinel": {
        "labeler": {"assumeDriverInstalled": True},
        "metadata-collector": {"runtimeClassName": "nvidia-container-runtime"},
    },
}
OPERATOR_MANAGED = {
    "gpu-operator": {
        "driver": {"enabled": True},
        "toolkit": {"enabled": True},
        "operator": {"runtimeClass": "nvidia"},
    },
    "nvidia-dra-driver-gpu": {"nvidiaDriverRoot": "/run/nvidia/driver"},
    "nvsentinel": {
        "labeler": {"assumeDriverInstalled": False},
        "metadata-collector": {"runtimeClassName": "nvidia"},
    },
}
PROFILES = {"azure-managed": AZURE_MANAGED, "operator-managed": OPERATOR_MANAGED}


def base_values() -> dict[str, dict[str, Any]]:
    """Device-plugin allocation policy, driver-only (azure-managed) ownership."""
    return {
        "gpu-operator": {
            "hostPaths": {"driverInstallDir": "/run/nvidia/driver"},
            "operator": {"runtimeClass": "nvidia-container-runtime", "upgradeCRD": True},
            "driver": {"enabled": False, "rdma": {"enabled": True, "useHostMofed": False}},
            "toolkit": {"enabled": False},
            "devicePlugin": {"enabled": True},
            "daemonsets": {"tolerations": [{"key": "old", "operator": "Exists"}]},
        },
        "nvidia-dra-driver-gpu": {
            "nvidiaDriverRoot": "/",
            "gpuResourcesEnabledOverride": False,
            "resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
        },
        "network-operator": {"operator": {"nodeSelector": {"a": "b"}}},
        "nfd": {"worker": {"config": {"sources": {}}}},
        "nodewright-operator": {"estimatedNodeCount": 0},
        "nodewright-customizations": {"tuningEnabled": False},
        "nvsentinel": {
            "labeler": {"assumeDriverInstalled": True},
            "metadata-collector": {"runtimeClassName": "nvidia-container-runtime"},
        },
    }


def make_catalog(tmp_path: Path):
    """A catalog with only the test registry (``load_catalog(dirs=(dir,))``)."""
    d = tmp_path / "catalog"
    d.mkdir(exist_ok=True)
    (d / "registry.yaml").write_text(REGISTRY)
    return load_catalog(dirs=(d,))


def make_recipe(
    *,
    profile: str | None = "azure-managed",
    disabled: tuple[str, ...] = (),
    ref_overrides: dict[str, dict[str, Any]] | None = None,
    service: str = "aks",
    names: tuple[str, ...] | None = None,
) -> Recipe:
    refs = []
    for name in names or tuple(EDGES):
        refs.append(
            ComponentRef(
                name=name,
                type="Manifest" if name == "nodewright-customizations" else "Helm",
                namespace=name,
                overrides=copy.deepcopy((ref_overrides or {}).get(name, {})),
                dependency_refs=[d for d in EDGES[name] if names is None or d in names],
                enabled=name not in disabled,
            )
        )
    return Recipe(
        criteria=Criteria(service=service, accelerator="h100", os="ubuntu", intent="training"),
        applied_overlays=["base"],
        constraints=[],
        component_refs=refs,
        profile=("gpuStack", profile) if profile else None,
        profile_owned=copy.deepcopy(PROFILES[profile]) if profile else {},
    )


def make_components(
    recipe: Recipe, values: dict[str, dict[str, Any]] | None = None
) -> dict[str, Component]:
    values = values if values is not None else base_values()
    out = {}
    for ref in recipe.component_refs:
        if ref.enabled:
            out[ref.name] = Component(
                ref=copy.deepcopy(ref), values=copy.deepcopy(values.get(ref.name, {}))
            )
    return out


def make_cluster(
    *,
    service: str = "aks",
    overrides=None,
    scheduling: NodeScheduling | None = None,
    gpu_driver: str | None = "Install",
    taints: list[Taint] | None = None,
    pools: list[NodePool] | None = None,
    kubernetes_version: str = "1.34",
    source: str = "cluster.yaml",
) -> ClusterSpec:
    if pools is None:
        pools = [
            NodePool(name="system", vm_size="Standard_D8s_v5", node_count=2, gpu=False),
            NodePool(
                name="gpu",
                vm_size="Standard_ND96isr_H100_v5",
                node_count=3,
                gpu=True,
                taints=list(taints)
                if taints is not None
                else [Taint("nvidia.com/gpu", "present", "NoSchedule")],
                gpu_driver=gpu_driver,
            ),
        ]
    return ClusterSpec(
        name="c1",
        criteria=Criteria(service=service, accelerator="h100", os="ubuntu", intent="training"),
        kubernetes_version=kubernetes_version,
        pools=pools,
        overrides=list(overrides or []),
        scheduling=scheduling or NodeScheduling(),
        source=source,
    )


def ids(findings, severity: str | None = None) -> list[str]:
    return [f.id for f in findings if severity is None or f.severity == severity]


def _documented_severities() -> dict[str, str]:
    """Check id -> severity of the rows of docs/policies.md's table whose severity is one word."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "policies.md").read_text(
        encoding="utf-8"
    )
    rows = re.findall(
        r"^\| \[?`([A-Z0-9-]+)`\]?(?:\(#[a-z0-9-]+\))? \| (error|warning|info) \|", text, re.M
    )
    return dict(rows)


SEVERITY = _documented_severities()
"""The severity of each check as docs/policies.md documents it: an error refuses the cluster, a
warning only prints. :func:`by_id` checks it on every finding it returns, so a test that looks a
refusal up also fails when the refusal became a warning."""


def by_id(findings, id: str):
    """The findings of check ``id``; each must have the check's :data:`SEVERITY` (when listed)."""
    found = [f for f in findings if f.id == id]
    wrong = [f for f in found if f.severity != SEVERITY.get(id, f.severity)]
    assert not wrong, f"{id} must be {SEVERITY[id]}: {wrong}"
    return found

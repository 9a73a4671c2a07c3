"""Shared helpers of the validate tests: plans of the AKS recipes, their healthy snapshots (the
real Helm renders of ``../shared/reference/charts`` plus live status: ``tools/validate_snapshot.py``)
and small object builders."""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gpucluster.live.snapshot import (
    EVERY_NAMESPACE_KINDS,
    Snapshot,
    dump_snapshot,
    snapshot_document,
)

ROOT = Path(__file__).resolve().parents[1]
HEALTHY_DEFAULT = ROOT / "examples" / "validate" / "healthy-default.json"

_spec = importlib.util.spec_from_file_location(
    "validate_snapshot_tool", ROOT / "tools" / "validate_snapshot.py"
)
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)  # type: ignore[union-attr]

KUBEFLOW = """clusters:
  - name: kf
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training, platform: kubeflow}
"""
DYNAMO = """clusters:
  - name: dyn
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: inference, platform: dynamo}
"""
OPERATOR_MANAGED = """clusters:
  - name: om
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    profile: {gpuStack: operator-managed}
    pools:
      - {name: system, vmSize: Standard_D8ds_v5, nodeCount: 2}
      - {name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: 2}
"""


def plan_of(text: str | None, tmp: Path | None = None):
    """The first plan of a cluster file text (None: the embedded default)."""
    if text is None:
        return tool.default_plan(None)
    assert tmp is not None
    path = tmp / "gpucluster.yaml"
    path.write_text(text, encoding="utf-8")
    return tool.default_plan(str(path))


@functools.lru_cache(maxsize=8)
def rendered(text: str | None, charts: str) -> tuple[str, tuple[dict[str, Any], ...]]:
    """``(healthy snapshot JSON text, the full CRDs the releases render)`` of a cluster file
    text's plan rendered with ``charts`` (one render, cached per process)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        plan = plan_of(text, Path(tmp))
        result = tool.render_plan(plan, Path(charts))
        try:
            crds = tuple(
                o
                for o in tool.rendered_objects(result.releases)
                if o["kind"] == "CustomResourceDefinition"
            )
            nodes = nvke_nodes(plan) if plan.cluster.criteria.service == "nvke" else None
            return dump_snapshot(
                snapshot_document(
                    tool.healthy_items(plan, result.releases, nodes),
                    every_namespace=EVERY_NAMESPACE_KINDS,
                    cluster=plan.cluster.name,
                )
            ), crds
        finally:
            result.renderer.close()


def healthy_document(text: str | None, charts: str) -> str:
    """The healthy snapshot (JSON text) of a cluster file text's plan, rendered with ``charts``."""
    return rendered(text, charts)[0]


def items_of(text: str) -> list[dict[str, Any]]:
    return json.loads(text)["items"]


def snapshot_of(items: Iterable[dict[str, Any]], source: str = "test") -> Snapshot:
    return Snapshot(items=[copy.deepcopy(o) for o in items], source=source)


def write_snapshot(
    path: Path, items: Iterable[dict[str, Any]], *, every_namespace: bool = True
) -> Path:
    """``items`` as ``gpucluster snapshot`` writes them (Pods and ResourceClaims of every
    namespace); ``every_namespace=False``: a List that does not say so (kubectl -n)."""
    kinds = EVERY_NAMESPACE_KINDS if every_namespace else ()
    path.write_text(
        dump_snapshot(snapshot_document(items, every_namespace=kinds)), encoding="utf-8"
    )
    return path


def find(
    items: list[dict[str, Any]], kind: str, name: str | None = None, namespace: str | None = None
) -> list[dict[str, Any]]:
    return [
        o
        for o in items
        if o["kind"] == kind
        and (name is None or o["metadata"]["name"] == name)
        and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]


def mutate(
    items: list[dict[str, Any]],
    kind: str,
    name: str,
    change: Callable[[dict[str, Any]], Any],
    namespace: str | None = None,
) -> list[dict[str, Any]]:
    """A copy of ``items`` with ``change`` applied to the one object of ``kind``/``name``."""
    out = copy.deepcopy(items)
    targets = find(out, kind, name, namespace)
    assert len(targets) == 1, (kind, name, namespace, len(targets))
    change(targets[0])
    return out


NVKE = "clusters:\n" + __import__("_support").NVKE_EXISTING


def nvke_nodes(plan) -> list[dict[str, Any]]:
    """Two GB200 trays (4 GPUs, one SR-IOV resource per rail) and a control-plane node that carries
    GPU labels without a GPU (tests/data/nvke/nodes-nvke.json shapes)."""
    from gpucluster.live.checks import SRIOV_RESOURCE_PREFIX_DEFAULT

    rails = [
        o
        for c, o in __import__("gpucluster.live.checks", fromlist=["x"])._manifest_objects(plan)
        if o["kind"] == "SriovNetworkNodePolicy"
    ]
    version = tool.operator_driver_version(plan)
    tray = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": "4",
        "nvidia.com/gpu.product": "NVIDIA-GB200",
        "feature.node.kubernetes.io/pci-15b3.present": "true",
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/rdma.available": "true",
        **({"nvidia.com/cuda.driver-version.full": version} if version else {}),
    }
    alloc = {
        "nvidia.com/gpu": "4",
        **{f"{SRIOV_RESOURCE_PREFIX_DEFAULT}/{r['spec']['resourceName']}": "16" for r in rails},
    }
    nodes = [
        tool.existing_node(
            f"gb200-tray-0{i}",
            tray,
            provider_id=f"nico://{tool.uid('tray', str(i))}",
            allocatable=alloc,
        )
        for i in (1, 2)
    ]
    nodes.append(
        tool.existing_node(
            "nvke-cp-0",
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.deploy.driver": "true",
                "feature.node.kubernetes.io/pci-15b3.present": "true",
                "node-role.kubernetes.io/control-plane": "",
            },
            provider_id=f"nico://{tool.uid('cp', '0')}",
        )
    )
    return nodes


def nvke_healthy(charts: str) -> str:
    """The healthy snapshot of the NVKE training-kubeflow plan (rails, kubeflow-trainer) on :func:`nvke_nodes`."""
    return rendered(NVKE, charts)[0]

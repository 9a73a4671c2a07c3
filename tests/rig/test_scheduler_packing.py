"""The AKS bin-packing scheduler profiles, rendered by gpucluster, placing pods on simulated nodes.

A cluster file with ``schedulerProfiles`` ``preset: gpu-binpacking`` and ``preset: cpu-binpacking``
goes through gpucluster as ``synth`` takes it (load, the platform's preparation, the runtime plan);
the ``SchedulerConfiguration``'s ``spec.rawConfig`` is read from the ``scheduler-profiles``
release's chart, exactly as rendered. A second real ``kube-scheduler`` (the rig's, v1.34) runs
with that text and this process's own settings appended (the rig's kubeconfig, no leader election,
its own 127.0.0.1 port): the profiles AKS overlays on its base configuration. The base's
``default-scheduler`` profile is kwokctl's own scheduler, unchanged (two schedulers serving one
name would race). The nodes are KWOK nodes shaped like the cluster file's pools
(:func:`gpucluster_rig.nodes.nodes_for`): 4 GPU nodes of 8 ``nvidia.com/gpu`` (96 CPUs, 1800 Gi)
and 4 CPU nodes of 8 CPUs (32 Gi).

Each round submits N pods naming one scheduler, counts the nodes they land on, then submits one
pod asking for a whole node and records whether it is bound; the pods are deleted before the next
round. GPU pods ask for 1 GPU, 2 CPUs and 16 Gi; CPU pods for 2 CPUs and 2 Gi.

* ``gpu-binpacking``: N = 4, 8, 12, 16 land on ceil(N/8) nodes (``MostAllocated``, GPU weight 8);
  with ``default-scheduler`` (``LeastAllocated`` on CPU and memory) on min(N, 4); the later 8-GPU
  pod is bound with the profile and stays Pending (``Unschedulable``) without.
* ``cpu-binpacking``: N = 4, 6, 9 land on ceil(N/3) nodes: the profile's curve scores 25 %, 50 %,
  75 % CPU use (1, 2, 3 pods of 2 CPUs on 8) at 6.7, 10, 10 of 10 and a full node at 0, so a node
  takes 3 and keeps 25 % headroom; with ``default-scheduler`` they spread over min(N, 4); the
  later 8-CPU pod is bound with the profile, not without.

The measured table is printed (``-s`` or the report's captured output) and docs/scheduler-profiles.md
quotes it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster import pipeline
from gpucluster.inputs import scheduler_profiles as sp
from gpucluster.inputs.config import load_clusters
from gpucluster_rig import aks_scheduler
from gpucluster_rig.aks_scheduler import ProfileScheduler, config_text
from gpucluster_rig.cluster import Cluster
from gpucluster_rig.nodes import nodes_for

CLUSTER_FILE = """\
clusters:
  - name: packing
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    kubernetesVersion: "1.34"
    pools:
      - {name: system, vmSize: Standard_D8ds_v5, nodeCount: 1}
      - {name: cpu, vmSize: Standard_D8ds_v5, nodeCount: 4}
      - {name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: 4}
    schedulerProfiles:
      - {schedulerName: gpu-packing, preset: gpu-binpacking}
      - {schedulerName: cpu-packing, preset: cpu-binpacking}
"""
NAMESPACE = "packing"
POOL_LABEL = "gpucluster.rig/pool"
NODES_PER_POOL = 4
WAIT = 60.0
"""Seconds a round may wait for its pods to be bound (each takes well under one)."""

CASES = {
    # preset: (scheduler, pool, one pod's requests, the whole-node pod's requests, Ns, pods per node)
    "gpu-binpacking": (
        "gpu-packing",
        "gpu",
        {"nvidia.com/gpu": "1", "cpu": "2", "memory": "16Gi"},
        {"nvidia.com/gpu": "8", "cpu": "2", "memory": "16Gi"},
        (4, 8, 12, 16),
        8,
    ),
    "cpu-binpacking": (
        "cpu-packing",
        "cpu",
        {"cpu": "2", "memory": "2Gi"},
        {"cpu": "8", "memory": "2Gi"},
        (4, 6, 9),
        3,
    ),
}


def _raw_config(tmp: Path) -> tuple[str, list[dict[str, Any]]]:
    """``(rawConfig text as the plan renders it, the rig's Node objects)`` for :data:`CLUSTER_FILE`."""
    path = tmp / "gpucluster.yaml"
    path.write_text(CLUSTER_FILE, encoding="utf-8")
    (spec,) = [pipeline.prepare_cluster(c) for c in load_clusters(str(path))]
    plan = pipeline.build_plan(spec)
    chart = plan.node(sp.NODE_ID).local_chart
    (text,) = [t for p, t in chart.files.items() if p.startswith("templates/")]
    raw = str(yaml.safe_load(text)["spec"]["rawConfig"])
    return raw, nodes_for(spec, per_pool=NODES_PER_POOL)


@pytest.fixture(scope="module")
def packing(rig: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The rig with the cluster file's nodes and the second scheduler running the rendered profiles."""
    folder = tmp_path_factory.mktemp("packing")
    raw, nodes = _raw_config(folder)
    rig.apply(nodes)
    rig.wait_ready_nodes([n["metadata"]["name"] for n in nodes])
    rig.create_namespace(NAMESPACE)
    scheduler = ProfileScheduler(
        rig.binaries / "kube-scheduler", folder, config_text(raw, rig.kubeconfig)
    )
    try:
        ok, why = scheduler.wait_healthy()
        assert ok, why
        yield rig
    finally:
        scheduler.stop()


def _pod(name: str, scheduler: str, pool: str, requests: dict[str, str]) -> dict[str, Any]:
    limits = {
        k: v for k, v in requests.items() if k == "nvidia.com/gpu"
    }  # extended: limit = request
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {POOL_LABEL: pool},
            "tolerations": [{"operator": "Exists"}],  # the GPU pool's taint
            "containers": [
                {
                    "name": "work",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": requests, "limits": limits},
                }
            ],
        },
    }


def _pods(rig: Cluster) -> dict[str, dict[str, Any]]:
    items = json.loads(rig.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json"))["items"]
    return {p["metadata"]["name"]: p for p in items}


def _unschedulable(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "PodScheduled"
        and c["status"] == "False"
        and c.get("reason") == "Unschedulable"
        for c in pod.get("status", {}).get("conditions", [])
    )


def _wait(rig: Cluster, names: list[str], *, may_fail: bool = False) -> dict[str, dict[str, Any]]:
    """The pods ``names`` once each is bound (or, with ``may_fail``, found unschedulable)."""
    deadline = time.monotonic() + WAIT
    while True:
        pods = _pods(rig)
        done = [
            n
            for n in names
            if n in pods
            and (pods[n]["spec"].get("nodeName") or (may_fail and _unschedulable(pods[n])))
        ]
        if len(done) == len(names):
            return pods
        assert time.monotonic() < deadline, (
            f"not placed after {WAIT:.0f} s: {set(names) - set(done)}"
        )
        time.sleep(0.3)


def _clean(rig: Cluster) -> None:
    rig.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--force")
    deadline = time.monotonic() + WAIT
    while _pods(rig):
        assert time.monotonic() < deadline, "pods not deleted"
        time.sleep(0.3)


def _round(rig: Cluster, preset: str, scheduler: str, n: int) -> tuple[int, bool]:
    """``(nodes the n pods landed on, whether the whole-node pod then was bound)``."""
    _, pool, one, whole, _, _ = CASES[preset]
    names = [f"job-{i}" for i in range(n)]
    try:
        rig.apply([_pod(name, scheduler, pool, one) for name in names])
        pods = _wait(rig, names)
        used = {pods[name]["spec"]["nodeName"] for name in names}
        assert all(nodename.startswith(f"{pool}-") for nodename in used), used
        rig.apply([_pod("whole-node", scheduler, pool, whole)])
        big = _wait(rig, ["whole-node"], may_fail=True)["whole-node"]
    finally:  # a failed round leaves no pod for the next one to collide with
        _clean(rig)
    return len(used), bool(big["spec"].get("nodeName"))


@pytest.mark.parametrize("preset", sorted(CASES))
def test_packing_profile_fills_nodes_the_default_spreads(packing: Cluster, preset: str) -> None:
    scheduler, pool, one, whole, ns, per_node = CASES[preset]
    rows = []
    for n in ns:
        rows.append(
            (
                n,
                *_round(packing, preset, scheduler, n),
                *_round(packing, preset, sp.DEFAULT_SCHEDULER, n),
            )
        )
    unit = "GPU" if "nvidia.com/gpu" in one else "CPU"
    print(
        f"\n{preset} ({NODES_PER_POOL} nodes; pods of {one}; then one pod of {whole}):\n"
        f"{'N':>3}  {'nodes used with packing':>23}  {'nodes used without':>18}  "
        f"{'whole-node pod with':>19}  {'without':>7}"
    )
    for n, packed, fits_packed, spread, fits_spread in rows:
        print(
            f"{n:>3}  {packed:>23}  {spread:>18}  {'bound' if fits_packed else 'Pending':>19}  "
            f"{'bound' if fits_spread else 'Pending':>7}"
        )
    for n, packed, fits_packed, spread, fits_spread in rows:
        assert packed == math.ceil(n / per_node), (preset, n, packed)
        assert spread == min(n, NODES_PER_POOL), (preset, n, spread)
        assert fits_packed and not fits_spread, (preset, n, unit, fits_packed, fits_spread)


def _placed(rig: Cluster, scheduler: str) -> str:
    """The node a single-GPU pod naming ``scheduler`` lands on, beside :data:`BUSY` (then cleaned)."""
    pinned = []
    for name, (node, requests) in BUSY.items():
        pod = _pod(name, "unused", "gpu", requests)
        pod["spec"]["nodeName"] = node  # placed by hand: no scheduler decides it
        pinned.append(pod)
    try:
        rig.apply(pinned)
        _wait(rig, list(BUSY))
        rig.apply([_pod("next", scheduler, "gpu", CASES["gpu-binpacking"][2])])
        node = str(_wait(rig, ["next"])["next"]["spec"]["nodeName"])
    finally:
        _clean(rig)
    return node


BUSY = {
    "data-loader": ("gpu-0", {"cpu": "72", "memory": "1350Gi"}),
    "inference": ("gpu-1", {"nvidia.com/gpu": "4", "cpu": "2", "memory": "16Gi"}),
}
"""A GPU node three quarters used by CPU-only work, and one with half its GPUs in use."""


def test_gpu_weight_decides_between_gpu_and_cpu_load(packing: Cluster) -> None:
    """With ``gpu-binpacking`` the next single-GPU pod joins the node whose GPUs are in use
    (``gpu-1``), not the one whose CPUs and memory are busiest (``gpu-0``), because of the GPU
    weight. kube-scheduler's integer scores (``NodeResourcesFit`` + ``NodeResourcesBalancedAllocation``,
    pkg/scheduler/framework/plugins/noderesources): GPU weight 8, CPU 1 gives gpu-1 55 + 98,
    gpu-0 19 + 99, an empty node 10 + 99; with GPU weight 1 gpu-0 would win (44 + 99 against
    33 + 98), and without the GPU entry too. ``default-scheduler`` (``LeastAllocated``) picks an
    empty node."""
    packed = _placed(packing, "gpu-packing")
    spread = _placed(packing, sp.DEFAULT_SCHEDULER)
    print(
        f"\ngpu-binpacking beside a CPU-busy GPU node (gpu-0: {BUSY['data-loader'][1]}) and a node "
        f"with half its GPUs in use (gpu-1): next single-GPU pod on {packed} with packing, {spread} without"
    )
    assert packed == "gpu-1"
    assert spread in {"gpu-2", "gpu-3"}


def test_the_applied_scheduler_configuration_is_started_or_refused(
    packing: Cluster, tmp_path: Path
) -> None:
    """What a rehearsal does after the apply (:func:`gpucluster_rig.aks_scheduler.check_applied`):
    the ``SchedulerConfiguration`` ``upstream`` read back from the server, a kube-scheduler started
    on its ``rawConfig``. The rendered one is accepted with its profiles; one whose GPU weight is
    800 (above kube-scheduler's 100) is refused with the scheduler's own reason."""
    assert aks_scheduler.check_applied(packing, tmp_path / "none") is None
    aks_scheduler.serve(packing)
    raw, _ = _raw_config(tmp_path)
    obj = {
        "apiVersion": sp.CR_API_VERSION,
        "kind": sp.CR_KIND,
        "metadata": {"name": sp.CR_NAME},
        "spec": {"rawConfig": raw},
    }
    try:
        packing.apply([obj])
        good = aks_scheduler.check_applied(packing, tmp_path / "good")
        assert good == {"profiles": ["gpu-packing", "cpu-packing"], "accepted": True, "message": ""}
        assert "weight: 8\n" in raw
        obj["spec"]["rawConfig"] = raw.replace("weight: 8\n", "weight: 800\n", 1)
        packing.apply([obj])
        bad = aks_scheduler.check_applied(packing, tmp_path / "bad")
        assert bad is not None and bad["accepted"] is False
        assert "exited" in bad["message"] and "weight" in bad["message"], bad
    finally:
        packing.kubectl("delete", aks_scheduler.RESOURCE, sp.CR_NAME, "--ignore-not-found")

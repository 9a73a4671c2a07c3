"""A property of ``upgrade-check``: for changes drawn from the cluster file's keys (name, region,
backend, gpuStack, system, CPU and GPU pools, driver overrides, the driver upgrade policy) and for
workloads drawn at random on the cluster (GPU pods of every kind -- whole GPUs, MIG slices, shared
GPUs, ResourceClaims --, bare or owned, in any namespace; CPU pods; every node's upgrade state
``upgrade-done`` or none; snapshots that do or do not say they list every namespace):

* the verdict from the files alone is never milder than the verdict on the running cluster for the
  same change (a gate on the files never lets through what the cluster would stop);
* ``safe`` (from the files or from the cluster) never comes with a renamed, moved or re-backed
  cluster, a pool replaced, added, resized or removed, or a GPU pod the change evicts.

Node faults (a cordon by someone else, a stuck or running driver roll, a driver pod that is not
running) are outside the drawn states: the files cannot know them, and the live check alone judges
them (tests/test_upgrade_live.py)."""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st
from test_upgrade_live import NODES, healthy_items

from gpucluster.lint import upgrade_check
from gpucluster.live import upgrade_live
from gpucluster.live.snapshot import EVERY_NAMESPACE_KINDS, Snapshot
from gpucluster.recipes.upgrade_rules import VERDICTS, driver_roll

LONG = os.environ.get("GPUCLUSTER_FUZZ") == "long"
EXAMPLES = int(os.environ.get("GPUCLUSTER_FUZZ_UPGRADE_EXAMPLES", "600" if LONG else "60"))
"""Each example builds two plans and judges them on a snapshot (~0.2 s)."""

CRITERIA = {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"}
SYSTEM_SIZES = ("Standard_D8ds_v5", "Standard_D16ds_v5")
GPU_SIZES = ("Standard_ND96isr_H100_v5", "Standard_NC80adis_H100_v5")
DRIVER_SETS = (
    "gpuoperator:driver.version=580.105.08",
    "gpuoperator:driver.repository=registry.example.com/nvidia",
    "gpuoperator:driver.imagePullPolicy=Always",
    "gpuoperator:driver.manager.version=v0.9.0",
    "gpuoperator:gdrcopy.enabled=true",
    "gpuoperator:cdi.enabled=false",
    "gpuoperator:driver.upgradePolicy.maxParallelUpgrades=2",
)


@st.composite
def cluster_docs(draw) -> dict:
    """One cluster of a cluster file, from the keys a change can touch."""
    doc: dict = {
        "name": draw(st.sampled_from(["lab", "lab2"])),
        "criteria": dict(CRITERIA),
        "kubernetesVersion": "1.34",
        "profile": {"gpuStack": draw(st.sampled_from(["azure-managed", "operator-managed"]))},
    }
    region = draw(st.sampled_from([None, "eastus", "westus3"]))
    if region:
        doc["region"] = region
    if draw(st.booleans()):
        doc["backend"] = {
            "type": "azurerm",
            "storageAccountName": "gpustate01",
            "containerName": "tfstate",
        }
    pools = [
        {"name": "system", "vmSize": draw(st.sampled_from(SYSTEM_SIZES)), "nodeCount": 2},
        {
            "name": "gpu",
            "vmSize": draw(st.sampled_from(GPU_SIZES)),
            "nodeCount": draw(st.integers(1, 3)),
        },
    ]
    if draw(st.booleans()):
        pools.insert(1, {"name": "cpu", "vmSize": SYSTEM_SIZES[0], "nodeCount": 1})
    if draw(st.booleans()):
        pools.append({"name": "gpu2", "vmSize": GPU_SIZES[0], "nodeCount": 1})
    doc["pools"] = pools
    sets = draw(st.lists(st.sampled_from(DRIVER_SETS), unique=True, max_size=3))
    if sets:
        doc["overrides"] = {"set": sets}
    return doc


RESOURCES = st.sampled_from(
    [
        {"limits": {"nvidia.com/gpu": "8"}},
        {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
        {"limits": {"nvidia.com/mig-1g.10gb": "1"}},
        {"limits": {"nvidia.com/gpu.shared": "1"}},
        {},  # a CPU pod, or a DRA pod when it has claims
    ]
)


@st.composite
def live_states(draw) -> tuple[list[dict], bool]:
    """``(items, every_namespace)``: the healthy snapshot with 3 GPU nodes, random pods on them
    (always at least one, so the snapshot lists pods), each node's upgrade state done or none."""
    items = healthy_items(3)
    for node in (o for o in items if o["kind"] == "Node"):
        if node["metadata"]["name"] in NODES and draw(st.booleans()):
            node["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-done"
    pods = draw(
        st.lists(
            st.tuples(
                st.sampled_from(NODES[:3]),
                st.sampled_from(["team-a", "research", "default"]),
                RESOURCES,
                st.booleans(),  # ResourceClaims
                st.booleans(),  # owned by a Job
            ),
            min_size=1,
            max_size=5,
        )
    )
    for i, (node, namespace, resources, claims, owned) in enumerate(pods):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"job-{i}", "namespace": namespace, "uid": f"uid-{i}"},
            "spec": {
                "nodeName": node,
                "containers": [
                    {"name": "main", "image": "x", "resources": copy.deepcopy(resources)}
                ],
            },
            "status": {"phase": "Running"},
        }
        if owned:
            pod["metadata"]["ownerReferences"] = [
                {"apiVersion": "batch/v1", "kind": "Job", "name": f"job-{i}", "uid": f"o-{i}"}
            ]
        if claims:
            pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"c-{i}"}]
        items.append(pod)
    return items, draw(st.booleans())


def _severity(verdict: str) -> int:
    return VERDICTS.index(verdict)


def _sides(folder: Path, old: dict, new: dict):
    paths = []
    for label, doc in (("old", old), ("new", new)):
        path = folder / f"{label}.yaml"
        path.write_text(yaml.safe_dump({"clusters": [doc]}, sort_keys=False), encoding="utf-8")
        paths.append(str(path))
    return upgrade_check.run_sides(*paths)


@st.composite
def changes(draw) -> tuple[dict, dict]:
    """``(old, new)``: a cluster and the same cluster with one or two of its keys drawn again (a
    change touches few keys, so each kind of change is judged on its own often)."""
    old = draw(cluster_docs())
    other = draw(cluster_docs())
    new = copy.deepcopy(old)
    keys = draw(
        st.lists(
            st.sampled_from(
                [
                    "name",
                    "region",
                    "backend",
                    "profile",
                    "system",
                    "cpu",
                    "gpu",
                    "gpu2",
                    "overrides",
                ]
            ),
            min_size=1,
            max_size=2,
            unique=True,
        )
    )
    for key in keys:
        if key in ("system", "cpu", "gpu", "gpu2"):
            theirs = {p["name"]: p for p in other["pools"]}
            pools = [p for p in new["pools"] if p["name"] != key]
            if key in theirs:
                pools.append(theirs[key])
            order = ("system", "cpu", "gpu", "gpu2")
            new["pools"] = sorted(pools, key=lambda p: order.index(p["name"]))
        elif key in other:
            new[key] = copy.deepcopy(other[key])
        else:
            new.pop(key, None)
    return old, new


def _base(**extra) -> dict:
    doc = {
        "name": "lab",
        "criteria": dict(CRITERIA),
        "kubernetesVersion": "1.34",
        "profile": {"gpuStack": "operator-managed"},
        "pools": [
            {"name": "system", "vmSize": SYSTEM_SIZES[0], "nodeCount": 2},
            {"name": "gpu", "vmSize": GPU_SIZES[0], "nodeCount": 2},
        ],
    }
    doc.update(extra)
    return doc


def _job(node: str, resources: dict) -> tuple[list[dict], bool]:
    items = healthy_items(3)
    items.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "train-0", "namespace": "team-a", "uid": "uid-train-0"},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "main", "image": "x", "resources": resources}],
            },
            "status": {"phase": "Running"},
        }
    )
    return items, True


_GPU_JOB = _job(NODES[0], {"limits": {"nvidia.com/gpu": "8"}})
_MIG_JOB = _job(NODES[1], {"limits": {"nvidia.com/mig-1g.10gb": "1"}})


@settings(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@seed(4411)
@given(changes(), live_states())
# the reviewed reproducers, always among the examples
@example(
    (_base(), _base(overrides={"set": ["gpuoperator:driver.repository=registry.example.com/n"]})),
    _GPU_JOB,
)
@example(
    (_base(), _base(overrides={"set": ["gpuoperator:driver.imagePullPolicy=Always"]})), _MIG_JOB
)
@example((_base(), _base(region="westus3")), _GPU_JOB)
@example((_base(), _base(name="lab2")), _GPU_JOB)
@example(
    (
        _base(),
        _base(pools=[*_base()["pools"], {"name": "gpu2", "vmSize": GPU_SIZES[0], "nodeCount": 1}]),
    ),
    _GPU_JOB,
)
@example(
    (
        _base(),
        _base(pools=[_base()["pools"][0], {"name": "gpu", "vmSize": GPU_SIZES[1], "nodeCount": 2}]),
    ),
    _GPU_JOB,
)
def test_the_file_verdict_is_never_milder_and_safe_never_destroys(change, state):
    old, new = change
    with tempfile.TemporaryDirectory() as tmp:
        report, a, b = _sides(Path(tmp), old, new)
    (cluster,) = report.clusters
    old_plan, new_plan = a.plans[0], b.plans[0]
    items, every_namespace = state
    snap = Snapshot(
        items=items,
        source="random",
        every_namespace=frozenset(EVERY_NAMESPACE_KINDS) if every_namespace else frozenset(),
    )
    live = upgrade_live.assess(report, old_plan, new_plan, snap)

    # 1. the files alone are never milder than the cluster
    assert _severity(report.verdict) >= _severity(live.verdict), (
        report.verdict,
        live.as_dict()["components"],
    )
    assert live.exit_code == upgrade_check.EXIT_CODES[live.verdict]

    # 2. safe never comes with something replaced, orphaned, added or evicted
    replacing = upgrade_check.replacing_changes(old_plan, new_plan)
    pools = upgrade_live._replaced_pools(old_plan, new_plan)
    gpu_op = next((c for c in cluster.changes if c.component == "gpu-operator"), None)
    roll = (
        driver_roll(
            gpu_op.kind,
            gpu_op.values,
            old_plan.components["gpu-operator"].values,
            new_plan.components["gpu-operator"].values,
        )
        if gpu_op is not None and gpu_op.kind in ("version", "values")
        else []
    )
    if report.verdict == "safe":
        assert not replacing and not pools and not roll, (replacing, pools, roll)
    if live.verdict == "safe":
        assert not replacing and not pools and not roll, (replacing, pools, roll)
        evicting = [
            n.name
            for n in live.nodes
            if n.gpu_pods
            and any(a.startswith(("driver re-install", "node pool")) for a in n.actions)
        ]
        assert not evicting, evicting

"""``gpucluster upgrade-check --from OLD --to NEW --snapshot FILE | --kubeconfig F``: the change
judged on the running cluster, per GPU pool, node and component, on snapshots made from
examples/validate/healthy-default.json with faults (GPU pods incl. a bare one and a DRA one, a
node cordoned by another actor, a node in upgrade-required, a crash-looping driver pod)."""

from __future__ import annotations

import copy
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from validate_server import FakeApi, HostileApi
from validate_support import HEALTHY_DEFAULT, items_of, write_snapshot

from gpucluster.cli import main
from gpucluster.errors import GpuclusterError, one_line

GPU_NODE = "aks-gpu-12345678-vmss000000"
NODES = [f"aks-gpu-12345678-vmss00000{i}" for i in range(5)]
POOLS = [
    {"name": "system", "vmSize": "Standard_D8ds_v5", "nodeCount": 2},
    {"name": "gpu", "vmSize": "Standard_ND96isr_H100_v5", "nodeCount": 5},
]


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(args), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def _pod(name: str, node: str, *, gpus: int = 0, owner: str | None = "Job", claims: bool = False):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "research", "uid": f"uid-{name}"},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {},
                }
            ],
        },
        "status": {"phase": "Running"},
    }
    if owner:
        pod["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": owner, "name": name, "uid": f"owner-{name}"}
        ]
    if claims:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
    return pod


def healthy_items(node_count: int = 5) -> list[dict]:
    """The healthy default snapshot with ``node_count`` GPU nodes (copies of its one GPU node)."""
    items = items_of(HEALTHY_DEFAULT.read_text(encoding="utf-8"))
    (gpu,) = [o for o in items if o["kind"] == "Node" and o["metadata"]["name"] == GPU_NODE]
    for i in range(1, node_count):
        node = copy.deepcopy(gpu)
        node["metadata"]["name"] = NODES[i]
        node["metadata"]["labels"]["kubernetes.io/hostname"] = NODES[i]
        node["metadata"]["uid"] = f"node-{i}"
        items.append(node)
    return items


def faulted_items() -> list[dict]:
    """Node 0 runs GPU pods (a Job's, a bare one, a DRA one), node 1 is cordoned by someone else,
    node 2 waits in upgrade-required, node 3's driver pod crash-loops, node 4 is clean."""
    items = healthy_items()
    nodes = {o["metadata"]["name"]: o for o in items if o["kind"] == "Node"}
    items += [
        _pod("train-0", NODES[0], gpus=8),
        _pod("notebook", NODES[0], gpus=1, owner=None),
        _pod("dra-job", NODES[0], claims=True),
        _pod("cpu-only", NODES[4]),
    ]
    nodes[NODES[1]]["spec"]["unschedulable"] = True
    nodes[NODES[2]]["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = (
        "upgrade-required"
    )
    nodes[NODES[4]]["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-done"
    driver = _pod("nvidia-driver-daemonset-7xk2p", NODES[3], owner="DaemonSet")
    driver["metadata"]["namespace"] = "gpu-operator"
    driver["spec"]["initContainers"] = [{"name": "k8s-driver-manager", "image": "x"}]
    driver["status"] = {
        "phase": "Pending",
        "initContainerStatuses": [
            {
                "name": "k8s-driver-manager",
                "ready": False,
                "restartCount": 42,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            }
        ],
    }
    items.append(driver)
    return items


def cluster_file(path: Path, **extra) -> str:
    cluster = {
        "name": "lab",
        "criteria": {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
        "kubernetesVersion": "1.34",
        "pools": copy.deepcopy(POOLS),
        **extra,
    }
    path.write_text(yaml.safe_dump({"clusters": [cluster]}, sort_keys=False))
    return str(path)


def judge(tmp_path: Path, old: str, new: str, items: list[dict], *, fmt: str = "json"):
    snap = write_snapshot(tmp_path / "snap.json", items)
    code, out, err = cli(
        "upgrade-check", "--from", old, "--to", new, "--snapshot", str(snap), "--format", fmt
    )
    return code, (json.loads(out) if fmt == "json" and out else out), err


def by(doc: dict, key: str, name_key: str) -> dict:
    return {e[name_key]: e for e in doc[key]}


@pytest.fixture
def operator_patch(tmp_path):
    """gpu-operator v26.7.0 -> v26.7.1 with the operator managing the driver: a chart step a
    rule marks safe, which still re-installs the driver on every GPU node."""
    new, old = _recipe_files(tmp_path, "v26.7.0", component="gpu-operator")
    return old, new


@pytest.fixture
def driver_change(tmp_path):
    # a cluster that lets the controller take up to 5 nodes at once (the default is 1)
    profile, policy = {"gpuStack": "operator-managed"}, {"maxParallelUpgrades": 5}
    old = cluster_file(tmp_path / "a.yaml", profile=profile, driverUpgradePolicy=policy)
    new = cluster_file(
        tmp_path / "b.yaml",
        profile=profile,
        driverUpgradePolicy=policy,
        overrides={"set": ["gpuoperator:driver.version=580.105.08"]},
    )
    return old, new


def test_the_default_driver_upgrade_policy_takes_one_node_at_a_time(tmp_path):
    """Without driverUpgradePolicy the cluster installs maxParallelUpgrades 1: one node out."""
    profile = {"gpuStack": "operator-managed"}
    old = cluster_file(tmp_path / "a.yaml", profile=profile)
    new = cluster_file(
        tmp_path / "b.yaml",
        profile=profile,
        overrides={"set": ["gpuoperator:driver.version=580.105.08"]},
    )
    code, doc, err = judge(tmp_path, old, new, faulted_items())
    assert code == 3 and err == ""
    assert doc["driverUpgradePolicy"]["maxParallelUpgrades"] == 1
    (pool,) = doc["pools"]
    assert (pool["gpusSchedulableNow"], pool["gpusSchedulableDuring"]) == (32, 24), pool
    assert "1 of 5 nodes out at once" in pool["note"], pool["note"]


def test_driver_version_change_per_node(tmp_path, driver_change):
    code, doc, err = judge(tmp_path, *driver_change, faulted_items())
    assert (code, err) == (3, "") and doc["verdict"] == "manual" and doc["exitCode"] == 3
    comps = by(doc, "components", "component")
    assert comps["gpu-operator"]["verdict"] == "manual"
    assert "driver re-install on 5 GPU nodes" in comps["gpu-operator"]["note"]
    assert f"not safe now on {', '.join(NODES[:4])}" in comps["gpu-operator"]["note"]
    # the DRA plugin re-rolls with the driver identity: only the crash-looping driver blocks it
    assert comps["nvidia-dra-driver-gpu"]["verdict"] == "manual"
    assert comps["nvidia-dra-driver-gpu"]["note"].endswith(f"; not safe now on {NODES[3]}")
    nodes = by(doc, "nodes", "node")
    assert sorted(nodes) == NODES, "only GPU nodes, sorted"
    n0, n1, n2, n3, n4 = (nodes[n] for n in NODES)
    assert n0["gpuPods"] == ["research/dra-job", "research/notebook", "research/train-0"]
    assert n0["barePods"] == ["research/notebook"] and n0["claimPods"] == ["research/dra-job"]
    assert n0["verdict"] == "manual" and any("3 GPU pods are evicted" in x for x in n0["notes"])
    assert any("no controller re-creates 1 bare pods" in x for x in n0["notes"])
    assert n1["cordonedByOther"] and n1["verdict"] == "manual"
    assert n2["upgradeState"] == "upgrade-required" and n2["verdict"] == "manual"
    assert (
        "node is in upgrade-required: a driver upgrade is already pending or failed here; finish "
        "it (kubectl describe node, the driver pod's logs) before another"
    ) in n2["notes"]
    assert n3["driverCrash"].endswith("Init:CrashLoopBackOff") and n3["verdict"] == "manual"
    assert n4["verdict"] == "safe" and n4["gpuPods"] == [] and not n4["cordonedByOther"]
    for n in nodes.values():
        assert any(
            a.startswith("driver re-install by the GPU Operator's upgrade controller")
            for a in n["actions"]
        )
    (pool,) = doc["pools"]
    policy = doc["driverUpgradePolicy"]
    assert policy["maxUnavailable"] == "25%" and policy["autoUpgrade"] is True
    # 5 nodes: 25% rounded up is 2, below maxParallelUpgrades; 4 schedulable nodes of 8 GPUs
    assert policy["maxParallelUpgrades"] >= 2
    assert (pool["pool"], pool["gpusSchedulableNow"], pool["gpusSchedulableDuring"]) == (
        "gpu",
        32,
        16,
    )
    # the text table says the same, and the output is deterministic
    code_t, text, _ = judge(tmp_path, *driver_change, faulted_items(), fmt="text")
    assert code_t == 3 and "cordoned-by-other" in text and "upgrade-required" in text
    assert text.endswith("verdict: manual (exit 3)\n")
    assert judge(tmp_path, *driver_change, faulted_items(), fmt="text")[1] == text


def test_a_controller_cordon_is_not_someone_elses(tmp_path, driver_change):
    items = healthy_items(2)
    for o in items:
        if o["kind"] == "Node" and o["metadata"]["name"] == NODES[1]:
            o["spec"]["unschedulable"] = True
            o["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "drain-required"
    _, doc, _ = judge(tmp_path, *driver_change, items)
    nodes = by(doc, "nodes", "node")
    assert not nodes[NODES[1]]["cordonedByOther"]
    # not someone else's cordon, but a roll already in progress: not safe now
    assert nodes[NODES[1]]["verdict"] == "manual"
    assert not any(x.startswith("cordoned by someone else") for x in nodes[NODES[1]]["notes"])
    assert nodes[NODES[0]]["verdict"] == "safe"


def test_no_pods_listed_is_unknown_never_safe(tmp_path, driver_change):
    items = [o for o in healthy_items() if o["kind"] != "Pod"]
    code, doc, _ = judge(tmp_path, *driver_change, items)
    assert code == 3 and doc["snapshot"]["podsListed"] == 0
    assert {n["verdict"] for n in doc["nodes"]} == {"unknown"} and len(doc["nodes"]) == 5
    assert all(
        "the snapshot lists no pods: what runs on the node is not known" in n["notes"]
        for n in doc["nodes"]
    )
    comps = by(doc, "components", "component")
    assert comps["nvidia-dra-driver-gpu"]["fileVerdict"] == "safe"
    assert comps["nvidia-dra-driver-gpu"]["verdict"] == "unknown"
    assert "the snapshot lists no pods" in comps["nvidia-dra-driver-gpu"]["note"]


def _recipe_files(
    tmp_path: Path, dra_version: str, component: str = "nvidia-dra-driver-gpu"
) -> tuple[str, str]:
    """Cluster files of two RecipeResults (operator-managed driver) that differ in
    ``component``'s version: the recipe's on the ``a`` side, ``dra_version`` on the ``b`` side."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpucluster.cli",
            "recipe",
            "--service",
            "aks",
            "--accelerator",
            "h100",
            "--os",
            "ubuntu",
            "--intent",
            "training",
            "--profile",
            "gpuStack=operator-managed",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = yaml.safe_load(proc.stdout)
    files = []
    for label, version in (("a", None), ("b", dra_version)):
        recipe = copy.deepcopy(doc)
        for ref in recipe["componentRefs"]:
            if ref["name"] == component and version:
                assert ref["version"] != version
                ref["version"] = version
        (tmp_path / f"{label}.recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
        cluster = {
            "name": "lab",
            "recipe": f"{label}.recipe.yaml",
            "kubernetesVersion": "1.34",
            "pools": POOLS,
        }
        path = tmp_path / f"{label}.yaml"
        path.write_text(yaml.safe_dump({"clusters": [cluster]}, sort_keys=False))
        files.append(str(path))
    return files[0], files[1]


def test_dra_version_change_re_rolls_the_kubelet_plugin(tmp_path):
    old, new = _recipe_files(tmp_path, "0.5.1")
    code, doc, err = judge(tmp_path, old, new, faulted_items())
    assert code == 3 and err == ""
    comps = by(doc, "components", "component")
    assert "gpu-operator" not in comps
    dra = comps["nvidia-dra-driver-gpu"]
    assert dra["verdict"] == "manual" and NODES[3] in dra["note"]
    assert "kubelet plugin re-roll on 5 GPU nodes" in dra["note"]
    nodes = by(doc, "nodes", "node")
    for n in nodes.values():
        assert n["actions"] == [
            "DRA kubelet plugin re-roll (its pod restarts; running claims stay prepared)"
        ]
    # running pods keep their devices: the GPU pods of node 0 do not make it manual
    assert nodes[NODES[0]]["verdict"] == "safe"
    assert any("1 pods with ResourceClaims keep running" in x for x in nodes[NODES[0]]["notes"])
    assert nodes[NODES[3]]["verdict"] == "manual"
    assert {nodes[n]["verdict"] for n in (NODES[1], NODES[2], NODES[4])} == {"safe"}
    (pool,) = doc["pools"]
    assert pool["gpusSchedulableDuring"] == pool["gpusSchedulableNow"] == 32


def test_aks_gpu_driver_change_replaces_the_pool(tmp_path):
    old = cluster_file(tmp_path / "a.yaml")
    pools = copy.deepcopy(POOLS)
    pools[1]["gpuDriver"] = "None"
    new = cluster_file(tmp_path / "b.yaml", pools=pools)
    code, doc, _ = judge(tmp_path, old, new, faulted_items())
    assert code == 3
    comps = by(doc, "components", "component")
    assert comps["cluster"]["verdict"] == "manual"
    assert "GPU pools replaced: gpu (5 nodes)" in comps["cluster"]["note"]
    (pool,) = doc["pools"]
    assert (pool["gpusSchedulableNow"], pool["gpusSchedulableDuring"]) == (32, 0)
    nodes = by(doc, "nodes", "node")
    for n in nodes.values():
        assert any(
            a.startswith(
                "node pool replaced: Terraform destroys and re-creates pool gpu (gpuDriver Install -> None)"
            )
            for a in n["actions"]
        )
        assert not any(a.startswith("driver re-install") for a in n["actions"]), (
            "AKS installs the driver"
        )
    assert nodes[NODES[0]]["verdict"] == "manual"
    assert any("3 GPU pods end with the node" in x for x in nodes[NODES[0]]["notes"])
    assert nodes[NODES[1]]["verdict"] == "manual", "cordoned by someone else"
    # upgrade-required matters to a driver change, not to a replaced pool
    assert {nodes[n]["verdict"] for n in (NODES[2], NODES[4])} == {"safe"}
    # the DRA plugin's driver identity follows gpuDriver: it re-rolls, and needs a working driver
    assert comps["nvidia-dra-driver-gpu"]["verdict"] == "manual"
    assert nodes[NODES[3]]["verdict"] == "manual"
    assert any(x.startswith("driver pod not running") for x in nodes[NODES[3]]["notes"])


def test_a_kubernetes_upgrade_drains_each_node_of_the_gpu_pool(tmp_path):
    """kubernetesVersion 1.34 -> 1.35: the GPU pool is upgraded node by node (each drained and
    re-imaged); the nodes running GPU pods, or cordoned by someone else, are not safe now, and
    at least one node's GPUs are out at a time (it said only 'file change only')."""
    old = cluster_file(tmp_path / "a.yaml")
    new = cluster_file(tmp_path / "b.yaml", kubernetesVersion="1.35")
    code, doc, _ = judge(tmp_path, old, new, faulted_items())
    assert code == 3
    comps = by(doc, "components", "component")
    assert comps["cluster"]["verdict"] == "manual"
    assert "GPU pools upgraded node by node: gpu (5 nodes)" in comps["cluster"]["note"], comps
    (pool,) = doc["pools"]
    assert (pool["gpusSchedulableNow"], pool["gpusSchedulableDuring"]) == (32, 24), pool
    nodes = by(doc, "nodes", "node")
    for n in nodes.values():
        assert (
            "node drained and re-imaged: the platform upgrades pool gpu node by node "
            "(Kubernetes 1.34 -> 1.35)" in n["actions"]
        ), n
    assert nodes[NODES[0]]["verdict"] == "manual"
    assert any("3 GPU pods are evicted by the drain" in x for x in nodes[NODES[0]]["notes"])
    assert nodes[NODES[1]]["verdict"] == "manual", "cordoned by someone else"
    assert {nodes[n]["verdict"] for n in (NODES[2], NODES[4])} == {"safe"}


def test_bad_input_is_one_line_exit_2(tmp_path, driver_change):
    snap = write_snapshot(tmp_path / "s.json", healthy_items(1))
    cases = [
        ("--snapshot", str(snap), "--kubeconfig", str(snap)),
        ("--snapshot", str(snap), "--context", "x"),
        ("--snapshot", str(tmp_path / "missing.json")),
    ]
    for extra in cases:
        code, out, err = cli(
            "upgrade-check", "--from", driver_change[0], "--to", driver_change[1], *extra
        )
        assert code == 2 and out == "" and err.startswith("error[") and err.count("\n") == 1, (
            extra,
            err,
        )


def test_live_cluster_reads_every_pod(tmp_path, driver_change):
    items = faulted_items()
    api = FakeApi(lambda: items)
    try:
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
        code, out, err = cli(
            "upgrade-check",
            "--from",
            driver_change[0],
            "--to",
            driver_change[1],
            "--kubeconfig",
            str(kubeconfig),
            "--format",
            "json",
        )
    finally:
        api.close()
    assert code == 3 and all(  # the stand-in serves http://: only the token warning, if any
        line.startswith("warning[validate.cluster] ") and "http://" in line
        for line in err.splitlines()
    ), err
    live = json.loads(out)
    _, from_file, _ = judge(tmp_path, *driver_change, items)
    assert live["nodes"] == from_file["nodes"] and live["components"] == from_file["components"]
    paths = [p for _, p in api.requests]
    assert "/api/v1/pods" in paths and "/apis/resource.k8s.io/v1/resourceclaims" in paths
    assert {m for m, _ in api.requests} == {"GET"}
    assert not [p for p in paths if "/secrets" in p or "/configmaps" in p]


@pytest.mark.parametrize(
    ("path", "value", "action"),
    [
        ("driver.upgradePolicy.maxParallelUpgrades", "2", None),
        (
            "driver.upgradePolicy.autoUpgrade",
            "false",
            "driver re-install when the node's driver pod is deleted by hand",
        ),
    ],
)
def test_the_upgrade_policy_decides_what_rolls_the_driver(tmp_path, path, value, action):
    """An upgrade-policy change alone re-installs no driver; with autoUpgrade off a driver change
    waits for each node's driver pod to be deleted by hand (manual even on a clean node)."""
    profile = {"gpuStack": "operator-managed"}
    old = cluster_file(tmp_path / "a.yaml", profile=profile)
    sets = [f"gpuoperator:{path}={value}"]
    if action:
        old = cluster_file(tmp_path / "a.yaml", profile=profile, overrides={"set": sets})
        sets.append("gpuoperator:driver.version=580.105.08")
    new = cluster_file(tmp_path / "b.yaml", profile=profile, overrides={"set": sets})
    _, doc, _ = judge(tmp_path, old, new, healthy_items(2))
    assert [n["node"] for n in doc["nodes"]] == NODES[:2]
    for n in doc["nodes"]:
        drivers = [a for a in n["actions"] if a.startswith("driver re-install")]
        if action is None:
            assert drivers == [] and n["verdict"] == "safe", n
        else:
            assert [a.startswith(action) for a in drivers] == [True] and n["verdict"] == "manual", n


def test_live_reading_has_validates_deadline(tmp_path, driver_change):
    """A server that trickles its answer: one error[validate.cluster] line naming the --timeout
    deadline, exit 2, nothing on stdout (the CLI as a subprocess; a hang fails at the outer limit)."""
    server = HostileApi("trickle")
    try:
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpucluster.cli",
                "upgrade-check",
                "--from",
                driver_change[0],
                "--to",
                driver_change[1],
                "--kubeconfig",
                str(kubeconfig),
                "--timeout",
                "2s",
            ],
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
    finally:
        server.close()
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    lines = [x for x in proc.stderr.splitlines() if not x.startswith("warning[")]
    assert len(lines) == 1 and lines[0].startswith("error[validate.cluster] "), proc.stderr
    assert "deadline" in lines[0] and "--timeout" in lines[0], lines[0]
    code, out, err = cli(
        "upgrade-check",
        "--from",
        driver_change[0],
        "--to",
        driver_change[1],
        "--kubeconfig",
        str(kubeconfig),
        "--timeout",
        "forever",
    )
    assert code == 2 and out == "" and err.startswith("error[") and "--timeout" in err, err


def test_step_2_of_a_pool_replacement_names_the_nodes_still_running_jobs(tmp_path):
    """Removing the old pool (step 2 of docs/cluster-file.md "Replacing a GPU pool"): the nodes
    still running GPU pods are manual, the drained (cordoned, empty) ones safe."""
    new_pool = {"name": "gpu2", "vmSize": "Standard_NC80adis_H100_v5", "nodeCount": 2}
    old = cluster_file(tmp_path / "a.yaml", pools=[*POOLS, {**new_pool, "replaces": "gpu"}])
    new = cluster_file(tmp_path / "b.yaml", pools=[POOLS[0], new_pool])
    items = healthy_items()
    for node in (o for o in items if o["kind"] == "Node" and o["metadata"]["name"] != NODES[0]):
        node["spec"]["unschedulable"] = True  # drained with kubectl: cordoned by the user
    items.append(_pod("train-0", NODES[0], gpus=8))
    code, doc, _ = judge(tmp_path, old, new, items)
    assert code == 3
    comps = by(doc, "components", "component")
    assert comps["cluster"]["verdict"] == "manual"
    nodes = by(doc, "nodes", "node")
    assert sorted(nodes) == NODES
    for n in nodes.values():
        assert (
            "node pool removed: Terraform destroys pool gpu (removed: step 2 of replacing it with gpu2)"
            in n["actions"]
        )
    assert nodes[NODES[0]]["verdict"] == "manual"
    assert any("1 GPU pods end with the node" in x for x in nodes[NODES[0]]["notes"])
    assert {nodes[n]["verdict"] for n in NODES[1:]} == {"safe"}, "a drained node is ready to go"


def test_a_change_that_touches_no_node_is_unknown_without_pods(tmp_path):
    """A values change of a component that acts on no node (NFD) is still judged on the snapshot:
    without pods the snapshot cannot tell, so the verdict is unknown (exit 4), never safe, and the
    CTRF report says ``other`` for it."""
    old = cluster_file(tmp_path / "a.yaml")
    new = cluster_file(tmp_path / "b.yaml", overrides={"set": ["nfd:gc.interval=2h"]})
    items = [o for o in healthy_items(2) if o["kind"] != "Pod"]
    code, doc, err = judge(tmp_path, old, new, items)
    assert (code, err) == (4, "") and doc["verdict"] == "unknown", doc["components"]
    comps = by(doc, "components", "component")
    assert set(comps) == {"nfd"}, comps
    nfd = comps["nfd"]
    assert (nfd["fileVerdict"], nfd["verdict"]) == ("safe", "unknown"), nfd
    assert "the snapshot lists no pods" in nfd["note"]
    code, ctrf, _ = judge(tmp_path, old, new, items, fmt="ctrf")
    tests = {t["name"]: t for t in json.loads(ctrf)["results"]["tests"]}
    assert code == 4 and tests["component/nfd"]["status"] == "other", tests
    # with the pods listed the same change is safe: it acts on no node
    code, doc, _ = judge(tmp_path, old, new, healthy_items(2))
    assert code == 0 and by(doc, "components", "component")["nfd"]["verdict"] == "safe"


def test_a_cordon_before_the_controller_and_a_failed_upgrade_block_a_driver_change(
    tmp_path, driver_change
):
    """Node 0: cordoned by the controller (drain-required): not someone else's cordon, but a roll
    in progress, manual. Node 1: the same state, but the
    controller recorded that the node was already unschedulable when it took it
    (``node-initial-state.unschedulable``): someone else's cordon, manual. Node 2: its last driver
    upgrade failed (upgrade-failed, held cordoned by the controller): manual, not someone else's."""
    items = healthy_items(3)
    nodes = {o["metadata"]["name"]: o for o in items if o["kind"] == "Node"}
    for name, state in zip(
        NODES[:3], ("drain-required", "drain-required", "upgrade-failed"), strict=True
    ):
        nodes[name]["spec"]["unschedulable"] = True
        nodes[name]["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = state
    nodes[NODES[1]]["metadata"].setdefault("annotations", {})[
        "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
    ] = "true"
    code, doc, _ = judge(tmp_path, *driver_change, items)
    got = by(doc, "nodes", "node")
    assert [
        (got[n]["cordonedByOther"], got[n]["upgradeState"], got[n]["verdict"]) for n in NODES[:3]
    ] == [
        (False, "drain-required", "manual"),
        (True, "drain-required", "manual"),
        (False, "upgrade-failed", "manual"),
    ], doc["nodes"]
    assert any(x.startswith("cordoned by someone else") for x in got[NODES[1]]["notes"])
    # a failed upgrade is finished by hand; it is not an upgrade in progress to wait for
    assert (
        "node is in upgrade-failed: a driver upgrade is already pending or failed here; finish it "
        "(kubectl describe node, the driver pod's logs) before another"
    ) in got[NODES[2]]["notes"]
    comps = by(doc, "components", "component")
    assert code == 3 and comps["gpu-operator"]["verdict"] == "manual"
    assert comps["gpu-operator"]["note"].endswith(f"; not safe now on {', '.join(NODES[:3])}")
    assert any(
        "drain-required: a driver upgrade is in progress" in x for x in got[NODES[0]]["notes"]
    )


def test_a_snapshot_of_one_cluster_against_files_of_two_is_one_line_exit_2(tmp_path):
    """Files that compare two clusters cannot be judged on one cluster's snapshot: one
    error[validate.input] line naming --snapshot and both clusters, exit 2, nothing on stdout."""
    paths = []
    for label in ("a", "b"):
        doc = {
            "clusters": [
                {
                    "name": name,
                    "criteria": {
                        "service": "aks",
                        "accelerator": "h100",
                        "os": "ubuntu",
                        "intent": "training",
                    },
                    "kubernetesVersion": "1.34",
                    "pools": copy.deepcopy(POOLS),
                }
                for name in ("lab", "lab2")
            ]
        }
        path = tmp_path / f"{label}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        paths.append(str(path))
    code, out, err = judge(tmp_path, *paths, healthy_items(1))
    assert (code, out) == (2, ""), err
    assert err.startswith("error[validate.input] ") and err.count("\n") == 1, err
    assert "key=--snapshot" in err and "(allowed: lab, lab2)" in err, err
    assert "the files hold several" in err and "fix: compare files of one cluster each" in err
    # the library refuses it too, with the same one line
    from gpucluster.lint import upgrade_check
    from gpucluster.live import snapshot, upgrade_live

    report, old, new = upgrade_check.run_sides(*paths)
    snap = snapshot.load_snapshot_file(str(write_snapshot(tmp_path / "s.json", healthy_items(1))))
    with pytest.raises(GpuclusterError) as exc:
        upgrade_live.assess(report, old.plans[0], new.plans[0], snap)
    assert exc.value.render() == (
        "error[validate.input] key=--snapshot: a snapshot is one cluster's state, and the files "
        "compare several clusters (allowed: lab, lab2) fix: compare one cluster's files (split the "
        "cluster file), or drop --snapshot/--kubeconfig"
    )


# --------------------------------------------------------------------------- what the snapshot can see


def _team_pod(name: str, node: str, resources: dict) -> dict:
    pod = _pod(name, node)
    pod["metadata"]["namespace"] = "team-a"
    pod["spec"]["containers"][0]["resources"] = resources
    return pod


def test_our_own_snapshot_sees_a_gpu_job_in_a_user_namespace(tmp_path, operator_patch):
    """``gpucluster snapshot`` lists every namespace's Pods (a GPU job runs in the team's own
    namespace): upgrade-check --snapshot on its file says what the live check says -- manual,
    team-a/train-0 evicted (it said safe: the snapshot held only the plan's namespaces)."""
    items = healthy_items(2) + [_team_pod("train-0", NODES[0], {"limits": {"nvidia.com/gpu": "8"}})]
    api = FakeApi(lambda: items)
    try:
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
        snap = tmp_path / "ours.json"
        code, _, err = cli(
            "snapshot",
            "--config",
            operator_patch[1],
            "--kubeconfig",
            str(kubeconfig),
            "--out",
            str(snap),
        )
        assert code == 0, err
        assert "/api/v1/pods" in [p for _, p in api.requests]
        code, out, _ = cli(
            "upgrade-check",
            "--from",
            operator_patch[0],
            "--to",
            operator_patch[1],
            "--kubeconfig",
            str(kubeconfig),
            "--format",
            "json",
        )
        live = json.loads(out)
    finally:
        api.close()
    code_f, out_f, _ = cli(
        "upgrade-check",
        "--from",
        operator_patch[0],
        "--to",
        operator_patch[1],
        "--snapshot",
        str(snap),
        "--format",
        "json",
    )
    from_file = json.loads(out_f)
    assert from_file["verdict"] == live["verdict"] == "manual" and code_f == 3
    assert by(from_file, "nodes", "node")[NODES[0]]["gpuPods"] == ["team-a/train-0"]
    assert from_file["nodes"] == live["nodes"]
    assert from_file["snapshot"]["podsInEveryNamespace"] is True


def test_a_snapshot_that_does_not_say_it_lists_every_namespace_is_unknown(tmp_path, operator_patch):
    """A List that does not record that its Pods come from every namespace (kubectl -n, or an
    older snapshot of the plan's namespaces only) cannot show that no GPU job runs on a node: a
    driver re-install is unknown there, never safe; CTRF says other, not passed."""
    items = healthy_items(2)
    snap = write_snapshot(tmp_path / "partial.json", items, every_namespace=False)
    code, out, _ = cli(
        "upgrade-check",
        "--from",
        operator_patch[0],
        "--to",
        operator_patch[1],
        "--snapshot",
        str(snap),
        "--format",
        "json",
    )
    doc = json.loads(out)
    assert code == 3 and doc["verdict"] != "safe", doc["components"]
    assert doc["snapshot"]["podsInEveryNamespace"] is False
    nodes = by(doc, "nodes", "node")
    assert {n["verdict"] for n in nodes.values()} == {"unknown"}
    assert {p["verdict"] for p in doc["pools"]} == {"unknown"}
    assert any("every namespace" in x for x in nodes[NODES[0]]["notes"])
    code, out, _ = cli(
        "upgrade-check",
        "--from",
        operator_patch[0],
        "--to",
        operator_patch[1],
        "--snapshot",
        str(snap),
        "--format",
        "ctrf",
    )
    summary = json.loads(out)["results"]["summary"]
    assert summary["passed"] < summary["tests"], summary
    # the same cluster in a List that says so: every node safe (no GPU pod anywhere)
    snap = write_snapshot(tmp_path / "whole.json", items)
    code, out, _ = cli(
        "upgrade-check",
        "--from",
        operator_patch[0],
        "--to",
        operator_patch[1],
        "--snapshot",
        str(snap),
        "--format",
        "json",
    )
    assert {n["verdict"] for n in json.loads(out)["nodes"]} == {"safe"}


@pytest.mark.parametrize(
    "resources",
    [
        {"limits": {"nvidia.com/mig-1g.10gb": "1"}},
        {"requests": {"nvidia.com/mig-3g.40gb": "2"}, "limits": {"nvidia.com/mig-3g.40gb": "2"}},
        {"limits": {"nvidia.com/gpu.shared": "1"}},
        {"limits": {"nvidia.com/gpu-h100-ts": "1"}},  # time-slicing with a renamed resource
    ],
)
def test_mig_and_shared_gpu_pods_are_gpu_pods(tmp_path, operator_patch, resources):
    """A pod holding a MIG slice or a shared (time-sliced) GPU is evicted by a driver re-install
    like any GPU pod: counted, and the node is manual (it was safe)."""
    items = healthy_items(2) + [_team_pod("slice", NODES[0], resources)]
    code, doc, _ = judge(tmp_path, *operator_patch, items)
    node = by(doc, "nodes", "node")[NODES[0]]
    assert node["gpuPods"] == ["team-a/slice"] and node["verdict"] == "manual", node
    assert code == 3 and doc["verdict"] == "manual"


# --------------------------------------------------------------------------- states outside the named hazards


def _with_node(items: list[dict], name: str, change) -> list[dict]:
    for o in items:
        if o["kind"] == "Node" and o["metadata"]["name"] == name:
            change(o)
    return items


@pytest.mark.parametrize(
    "state",
    ["drain-required", "validation-required", "pod-restart-required", "cordon-required"],
)
def test_a_node_already_mid_upgrade_is_not_safe_now(tmp_path, driver_change, state):
    """A driver roll already in progress on a node (any upgrade state but upgrade-done) blocks
    another driver change there: manual, naming the state (it was safe)."""

    def mid(node):
        node["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = state

    items = _with_node(healthy_items(2), NODES[1], mid)
    code, doc, _ = judge(tmp_path, *driver_change, items)
    nodes = by(doc, "nodes", "node")
    assert nodes[NODES[1]]["verdict"] == "manual", nodes[NODES[1]]
    assert any(state in x and "in progress" in x for x in nodes[NODES[1]]["notes"])
    assert nodes[NODES[0]]["verdict"] == "safe" and code != 0


def _driver_pod(name: str, node: str, reason: str | None, phase: str = "Running") -> dict:
    pod = _pod(name, node, owner="DaemonSet")
    pod["metadata"]["namespace"] = "gpu-operator"
    status = {"name": "nvidia-driver-ctr", "ready": reason is None, "restartCount": 0}
    status["state"] = {"waiting": {"reason": reason}} if reason else {"running": {}}
    pod["status"] = {"phase": phase, "containerStatuses": [status]}
    return pod


@pytest.mark.parametrize(
    "name, reason, phase",
    [
        ("nvidia-driver-daemonset-4k2xq", "ImagePullBackOff", "Pending"),
        ("nvidia-driver-daemonset-4k2xq", "ErrImagePull", "Pending"),
        ("nvidia-driver-daemonset-4k2xq", "CreateContainerConfigError", "Pending"),
        ("nvidia-driver-daemonset-4k2xq", None, "Failed"),
        ("nvidia-gpu-driver-ubuntu22.04-5f8b7c9d6-x2v4n", "CrashLoopBackOff", "Running"),
        ("nvidia-gpu-driver-ubuntu22.04-5f8b7c9d6-x2v4n", "ImagePullBackOff", "Pending"),
    ],
)
def test_a_driver_pod_that_is_not_running_blocks_a_driver_change(
    tmp_path, driver_change, name, reason, phase
):
    """A driver pod (ClusterPolicy's nvidia-driver-daemonset-*, or an NVIDIADriver resource's
    nvidia-gpu-driver-*) that cannot pull its image, is misconfigured, failed or crash-loops: the
    node is manual for a driver change (it was safe unless CrashLoopBackOff of the first name)."""
    items = healthy_items(2) + [_driver_pod(name, NODES[1], reason, phase)]
    code, doc, _ = judge(tmp_path, *driver_change, items)
    node = by(doc, "nodes", "node")[NODES[1]]
    assert node["verdict"] == "manual" and name in node["driverCrash"], node
    assert (reason or phase) in node["driverCrash"]
    assert by(doc, "nodes", "node")[NODES[0]]["verdict"] == "safe"


def test_a_running_driver_pod_is_no_problem(tmp_path, driver_change):
    items = healthy_items(2) + [_driver_pod("nvidia-gpu-driver-ubuntu-x", NODES[1], None)]
    _, doc, _ = judge(tmp_path, *driver_change, items)
    assert by(doc, "nodes", "node")[NODES[1]]["verdict"] == "safe"


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-1", "1.5", "lots"])
def test_a_gpu_quantity_that_is_no_count_is_refused(tmp_path, driver_change, value):
    """A GPU request that is not a whole count (NaN, Infinity, negative, a fraction, text) is
    refused in one error line naming the pod and the field, exit 2 (NaN was read as 0: no GPU)."""
    items = healthy_items(2) + [_team_pod("odd", NODES[0], {"limits": {"nvidia.com/gpu": value}})]
    code, out, err = judge(tmp_path, *driver_change, items, fmt="text")
    assert (code, out) == (2, ""), (out, err)
    assert err.startswith("error[validate.snapshot] ") and err.count("\n") == 1, err
    assert "team-a/odd" in err and "nvidia.com/gpu" in err, err


def test_a_list_that_says_it_is_one_page_of_several_is_refused(tmp_path, driver_change):
    """metadata.continue on a snapshot List, or on a list the API answers, means more items
    follow: a truncated list is refused in one line, never judged as complete."""
    snap = write_snapshot(tmp_path / "page.json", healthy_items(2))
    doc = json.loads(snap.read_text())
    doc["metadata"]["continue"] = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTJ9"
    snap.write_text(json.dumps(doc))
    code, out, err = cli(
        "upgrade-check",
        "--from",
        driver_change[0],
        "--to",
        driver_change[1],
        "--snapshot",
        str(snap),
    )
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert err.startswith("error[validate.snapshot] ") and "metadata.continue" in err, err

    class Paged(FakeApi):
        def answer(self, path):
            code, body = super().answer(path)
            if path == "/api/v1/pods":
                body["metadata"]["continue"] = "next-page"
            return code, body

    items = healthy_items(2)
    api = Paged(lambda: items)
    try:
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
        code, out, err = cli(
            "upgrade-check",
            "--from",
            driver_change[0],
            "--to",
            driver_change[1],
            "--kubeconfig",
            str(kubeconfig),
        )
    finally:
        api.close()
    lines = [x for x in err.splitlines() if x.startswith("error[")]
    assert (code, out) == (2, "") and len(lines) == 1, err
    assert "/api/v1/pods" in lines[0] and "continue" in lines[0], lines


def test_a_snapshot_with_a_duplicate_key_is_refused(tmp_path, driver_change):
    """JSON with a key twice in one object (which copy wins depends on the reader) is refused."""
    snap = write_snapshot(tmp_path / "dup.json", healthy_items(2))
    text = snap.read_text().replace('"kind": "List",', '"kind": "List",\n  "kind": "List",', 1)
    snap.write_text(text)
    code, out, err = cli(
        "upgrade-check",
        "--from",
        driver_change[0],
        "--to",
        driver_change[1],
        "--snapshot",
        str(snap),
    )
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert err.startswith("error[validate.snapshot] ") and "'kind' twice" in err, err


def test_one_exit_code_table_for_both_modes(tmp_path, driver_change):
    """The same verdict gives the same exit code with or without the cluster's state (0 safe,
    3 manual, 4 unknown), and the JSON carries it: a CI gate means one thing (live mode exited 1
    for both manual and unknown)."""
    from gpucluster.lint.upgrade_check import EXIT_CODES

    code_file, out, _ = cli(
        "upgrade-check", "--from", driver_change[0], "--to", driver_change[1], "--format", "json"
    )
    assert json.loads(out)["verdict"] == "manual" and code_file == EXIT_CODES["manual"] == 3
    code_live, doc, _ = judge(tmp_path, *driver_change, healthy_items(2))
    assert doc["verdict"] == "manual" and code_live == doc["exitCode"] == code_file
    unchanged = cluster_file(tmp_path / "same.yaml")
    items = [o for o in healthy_items(2) if o["kind"] != "Pod"]
    code, doc, _ = judge(tmp_path, unchanged, unchanged, items)
    assert (code, doc["exitCode"], doc["verdict"]) == (0, 0, "safe")


def test_an_attestation_of_a_live_reading_names_the_snapshot_by_its_source(tmp_path, driver_change):
    """Read live (no snapshot file), the attestation's first subject is ``snapshot:<source>`` with
    the digest of what was read; the predicate is the JSON report."""
    items = faulted_items()
    api = FakeApi(lambda: items)
    att = tmp_path / "live.intoto.json"
    try:
        kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
        args = ["upgrade-check", "--from", driver_change[0], "--to", driver_change[1]]
        args += ["--kubeconfig", str(kubeconfig)]
        code, out, _ = cli(*args, "--format", "json", "--attestation", str(att))
    finally:
        api.close()
    live = json.loads(out)
    doc = json.loads(att.read_text(encoding="utf-8"))
    assert code == 3 and doc["predicate"] == live
    first = doc["subject"][0]
    assert first == {
        "name": f"snapshot:{live['snapshot']['source']}",
        "digest": {"sha256": live["snapshot"]["sha256"]},
    }, first
    assert live["snapshot"]["source"] and len(live["snapshot"]["sha256"]) == 64
    assert [s["name"] for s in doc["subject"][1:]] == ["plan:from:lab", "plan:to:lab"]


def test_the_text_tables_say_what_the_json_says(tmp_path, driver_change):
    """The text report: a header line, then the COMPONENT, POOL and NODE tables (columns two
    spaces apart, one row per entry of the JSON report, verdicts in capitals), then the verdict."""
    _, doc, _ = judge(tmp_path, *driver_change, faulted_items())
    code, text, err = judge(tmp_path, *driver_change, faulted_items(), fmt="text")
    lines = text.splitlines()
    assert (code, err) == (3, "") and lines[0] == (
        f"upgrade-check {driver_change[0]} -> {driver_change[1]}: cluster lab against "
        f"{tmp_path / 'snap.json'} ({doc['snapshot']['podsListed']} pods listed)"
    )
    cells = [re.split(r"\s{2,}", line.strip()) for line in lines[1:-1]]
    headers = [i for i, row in enumerate(cells) if row[0] in ("COMPONENT", "POOL", "NODE")]
    assert [cells[i] for i in headers] == [
        ["COMPONENT", "FILE", "NOW", "NOTE"],
        ["POOL", "NODES", "GPUS NOW", "GPUS DURING", "RESULT", "NOTE"],
        ["NODE", "POOL", "GPU PODS", "BARE", "STATE", "RESULT", "NOTES"],
    ]
    components, pools, nodes = (
        cells[headers[0] + 1 : headers[1]],
        cells[headers[1] + 1 : headers[2]],
        cells[headers[2] + 1 :],
    )
    assert components == [
        [c["component"], c["fileVerdict"].upper(), c["verdict"].upper(), one_line(c["note"], 400)]
        for c in doc["components"]
    ]
    assert pools == [
        [
            p["pool"],
            str(len(p["nodes"])),
            str(p["gpusSchedulableNow"]),
            str(p["gpusSchedulableDuring"]),
            p["verdict"].upper(),
            one_line(p["note"], 400),
        ]
        for p in doc["pools"]
    ]
    states = {
        n["node"]: ", ".join(
            x
            for x in (
                n["upgradeState"],
                "cordoned-by-other" if n["cordonedByOther"] else "",
                "driver-pod-not-running" if n["driverCrash"] else "",
            )
            if x
        )
        or "-"
        for n in doc["nodes"]
    }
    assert nodes == [
        [
            n["node"],
            n["pool"],
            str(len(n["gpuPods"])),
            str(len(n["barePods"])),
            states[n["node"]],
            n["verdict"].upper(),
            one_line("; ".join(n["actions"] + n["notes"]), 600),
        ]
        for n in doc["nodes"]
    ]
    assert states[NODES[0]] == "-" and states[NODES[1]] == "cordoned-by-other"
    # the columns line up: every row of a table starts its cells where its header does
    for first, last in ((headers[1], headers[2]), (headers[2], len(cells))):
        table = lines[1 + first : 1 + last]
        starts = [m.start() for m in re.finditer(r"(?<=  )\S", table[0])]
        for row in table[1:]:
            assert all(row[s - 2 : s] == "  " and row[s] != " " for s in starts[:-1]), row
    assert lines[-1] == "verdict: manual (exit 3)"


def test_finished_pods_use_no_gpu_and_the_policy_decides_how_many_nodes_go(tmp_path):
    """Succeeded and Failed pods hold no GPU (only the running one is evicted); a GPU asked for
    as a request alone or by an init container counts; maxUnavailable as a count limits the nodes
    out at once."""
    profile = {"gpuStack": "operator-managed"}
    policy = {"maxParallelUpgrades": 0, "maxUnavailable": 3}
    old = cluster_file(tmp_path / "a.yaml", profile=profile, driverUpgradePolicy=policy)
    new = cluster_file(
        tmp_path / "b.yaml",
        profile=profile,
        driverUpgradePolicy=policy,
        overrides={"set": ["gpuoperator:driver.version=580.105.08"]},
    )
    items = healthy_items()
    for phase in ("Succeeded", "Failed", "Running"):
        pod = _pod(f"job-{phase.lower()}", NODES[0], gpus=8)
        pod["status"]["phase"] = phase
        items.append(pod)
    request = _pod("asks", NODES[1])
    request["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "1"}}
    init = _pod("init-gpu", NODES[2])
    init["spec"]["initContainers"] = [
        {"name": "warm", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    ]
    items += [request, init]
    code, doc, _ = judge(tmp_path, old, new, items)
    nodes = by(doc, "nodes", "node")
    assert nodes[NODES[0]]["gpuPods"] == ["research/job-running"]
    assert nodes[NODES[1]]["gpuPods"] == ["research/asks"]
    assert nodes[NODES[2]]["gpuPods"] == ["research/init-gpu"]
    assert [nodes[n]["verdict"] for n in NODES] == ["manual"] * 3 + ["safe"] * 2
    assert doc["driverUpgradePolicy"] == {
        "autoUpgrade": True,
        "maxParallelUpgrades": 0,
        "maxUnavailable": 3,
    }
    (pool,) = doc["pools"]
    assert (pool["gpusSchedulableNow"], pool["gpusSchedulableDuring"]) == (40, 16), pool
    assert pool["note"] == (
        "3 of 5 nodes out at once (maxParallelUpgrades 0, maxUnavailable 3): at least 16 of 40 "
        "schedulable GPUs left"
    )


def test_the_ctrf_extras_say_what_the_json_says(tmp_path, driver_change):
    """Each CTRF test's ``extra``: its kind and live verdict, and per kind the file verdict, the
    GPUs now and during the change, or the node's pool, GPU pods, bare pods and upgrade state
    (empty values left out); an unchanged cluster's text report says "no change"."""
    _, doc, _ = judge(tmp_path, *driver_change, faulted_items())
    _, ctrf, _ = judge(tmp_path, *driver_change, faulted_items(), fmt="ctrf")
    extras = {t["name"]: t["extra"] for t in json.loads(ctrf)["results"]["tests"]}

    def present(d: dict) -> dict:
        return {k: v for k, v in d.items() if v != ""}

    expected = {
        f"component/{c['component']}": {
            "kind": "component",
            "fileVerdict": c["fileVerdict"],
            "verdict": c["verdict"],
        }
        for c in doc["components"]
    }
    for p in doc["pools"]:
        expected[f"pool/{p['pool']}"] = {
            "kind": "pool",
            "verdict": p["verdict"],
            "gpusSchedulableNow": str(p["gpusSchedulableNow"]),
            "gpusSchedulableDuring": str(p["gpusSchedulableDuring"]),
        }
    for n in doc["nodes"]:
        expected[f"node/{n['node']}"] = present(
            {
                "kind": "node",
                "pool": n["pool"],
                "verdict": n["verdict"],
                "gpuPods": str(len(n["gpuPods"])),
                "barePods": str(len(n["barePods"])),
                "upgradeState": n["upgradeState"],
            }
        )
    assert extras == expected
    messages = {t["name"]: t["message"] for t in json.loads(ctrf)["results"]["tests"]}
    assert [messages[f"pool/{p['pool']}"] for p in doc["pools"]] == [
        one_line(p["note"]) for p in doc["pools"]
    ]
    unchanged = cluster_file(tmp_path / "same.yaml")
    code, text, _ = judge(tmp_path, unchanged, unchanged, healthy_items(2), fmt="text")
    assert code == 0 and text.splitlines()[1:3] == [
        "  COMPONENT  FILE  NOW   NOTE",
        "  -          -     SAFE  no change",
    ]

"""Day 2 on a running rig: successive revisions of one AKS cluster file applied to one rig cluster
(:class:`gpucluster_rig.day2.KeptRig`): a second apply that changes nothing, a driver and DRA
driver change judged by ``upgrade-check --kubeconfig`` and then applied, the faults
``upgrade-check`` and ``validate`` know made real on the rig and judged live and from a snapshot
alike, and the AKS surge replacement of a GPU pool through both steps.

The tests of this module run in order on one rig (each builds on the state the previous left).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support import AKS_TRAINING_RECIPE, recipe_file

from gpucluster_rig import rehearse
from gpucluster_rig.day2 import Applied, KeptRig

CLUSTER = "day2"
OLD_DRIVER, NEW_DRIVER = "580.105.08", "595.91.07"
OLD_DRA, NEW_DRA = "0.5.0", "0.5.1"
DRA_NS, DRA_DS = "nvidia-dra-driver", "nvidia-dra-driver-gpu-kubelet-plugin"
SYSTEM = {"name": "system", "vmSize": "Standard_D8ds_v5", "nodeCount": 2, "gpu": False}
GPU = {"name": "gpu", "vmSize": "Standard_ND96isr_H100_v5", "nodeCount": 2}
GPU2 = {"name": "gpu2", "vmSize": "Standard_ND96isr_H100_v5", "nodeCount": 2}


def _recipe(folder: Path, dra: str) -> str:
    """``gpucluster recipe`` of the AKS H100 training cluster with the operator installing the
    driver, the DRA driver chart pinned at ``dra``; the file's name."""
    return recipe_file(
        folder,
        f"recipe-dra-{dra}.yaml",
        [*AKS_TRAINING_RECIPE, "--profile", "gpuStack=operator-managed"],
        {"nvidia-dra-driver-gpu": dra},
    )


def _revision(
    folder: Path, name: str, *, driver: str, dra: str, pools: list[dict[str, Any]]
) -> Path:
    cluster: dict[str, Any] = {
        "name": CLUSTER,
        "recipe": _recipe(folder, dra),
        "kubernetesVersion": "1.34",
        "pools": pools,
        "overrides": {"set": [f"gpuoperator:driver.version={driver}"]},
    }
    path = folder / name
    path.write_text(yaml.safe_dump({"clusters": [cluster]}, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The cluster file's revisions: ``old`` (driver 580, DRA 0.5.0), ``new`` (driver 595, DRA
    0.5.1), ``surge`` (``new`` plus pool gpu2 replacing gpu: step 1), ``replaced`` (step 2)."""
    folder = tmp_path_factory.mktemp("day2-files")
    return {
        "old": _revision(folder, "old.yaml", driver=OLD_DRIVER, dra=OLD_DRA, pools=[SYSTEM, GPU]),
        "new": _revision(folder, "new.yaml", driver=NEW_DRIVER, dra=NEW_DRA, pools=[SYSTEM, GPU]),
        "surge": _revision(
            folder,
            "surge.yaml",
            driver=NEW_DRIVER,
            dra=NEW_DRA,
            pools=[SYSTEM, GPU, {**GPU2, "replaces": "gpu"}],
        ),
        "replaced": _revision(
            folder, "replaced.yaml", driver=NEW_DRIVER, dra=NEW_DRA, pools=[SYSTEM, GPU2]
        ),
    }


@pytest.fixture(scope="module")
def kept(
    keep_rig: Callable[[Path, str], KeptRig], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KeptRig]:
    with keep_rig(tmp_path_factory.mktemp("day2"), CLUSTER) as rig:
        yield rig


@pytest.fixture(scope="module")
def first(kept: KeptRig, files: dict[str, Path]) -> Applied:
    applied = kept.apply(files["old"])
    print(f"first apply: makespan {applied.makespan:.1f} s")
    return applied


def _failed(applied: Applied) -> list[dict[str, Any]]:
    """The releases that failed; else, when the rehearsal's verdict is not ok (a Job's exit
    code, a custom resource the server changed), its report as text."""
    if applied.failed() or applied.ok:
        return applied.failed()
    return [{"rehearsal": rehearse.render_text(applied.report)}]


def test_the_first_apply_creates_every_release(first: Applied) -> None:
    assert _failed(first) == []
    assert set(first.actions().values()) == {"create"}
    assert first.upgraded() == set(first.stack.releases)


def test_a_second_apply_of_the_same_file_changes_nothing(
    kept: KeptRig, first: Applied, files: dict[str, Path]
) -> None:
    """As ``terraform apply`` with no change: no release upgraded (Helm revisions read from Helm
    stay), no Job runs."""
    again = kept.apply(files["old"])
    print(f"second apply, no change: makespan {again.makespan:.1f} s")
    assert _failed(again) == []
    assert set(again.actions().values()) == {"unchanged"}
    assert again.upgraded() == set()
    assert again.revisions_after == again.revisions_before
    assert again.jobs == []


# --------------------------------------------------------------------------- gpucluster's commands


def _gpucluster(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def _json_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.stdout, proc.stderr
    return dict(json.loads(proc.stdout))


def _upgrade_check(kept: KeptRig, files: dict[str, Path], *, snapshot: Path | None = None):
    where = (
        ["--snapshot", str(snapshot)] if snapshot else ["--kubeconfig", str(kept.rig.kubeconfig)]
    )
    return _gpucluster(
        "upgrade-check",
        "--from",
        str(files["old"]),
        "--to",
        str(files["new"]),
        *where,
        "--format",
        "json",
        cwd=files["old"].parent,
    )


def _validate(kept: KeptRig, config: Path, *, snapshot: Path | None = None):
    where = (
        ["--snapshot", str(snapshot)] if snapshot else ["--kubeconfig", str(kept.rig.kubeconfig)]
    )
    return _gpucluster(
        "validate", "--config", str(config), *where, "--format", "json", cwd=config.parent
    )


def _snapshot(kept: KeptRig, config: Path, out: Path) -> Path:
    proc = _gpucluster(
        "snapshot",
        "--config",
        str(config),
        "--kubeconfig",
        str(kept.rig.kubeconfig),
        "--out",
        str(out),
        cwd=config.parent,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def _verdicts(doc: dict[str, Any]) -> dict[str, Any]:
    """An upgrade-check report without what names where it read from (source, digest)."""
    out = dict(doc)
    out["snapshot"] = {k: v for k, v in doc["snapshot"].items() if k not in ("source", "sha256")}
    return out


def _checks(doc: dict[str, Any]) -> dict[str, tuple[str, str, Any]]:
    """A validate report's checks: id -> (verdict, reason, object)."""
    return {c["id"]: (c["verdict"], c["reason"], c["object"]) for c in doc["checks"]}


def _items(kept: KeptRig, *args: str) -> list[dict[str, Any]]:
    return list(json.loads(kept.rig.kubectl("get", *args, "-o", "json"))["items"])


def _wait(what: str, probe: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f} s")
        time.sleep(0.5)


GPU_TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
"""A training pod's toleration of the GPU pools' taint (not of every taint: a pod tolerating
``node.kubernetes.io/unschedulable`` would be scheduled back onto a cordoned node)."""
TEAM = "team-a"


def _gpu_pod_spec(node: str) -> dict[str, Any]:
    return {
        "nodeSelector": {"kubernetes.io/hostname": node},
        "tolerations": GPU_TOLERATION,
        "containers": [
            {
                "name": "train",
                "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                "resources": {"limits": {"nvidia.com/gpu": "8"}},
            }
        ],
    }


# --------------------------------------------------------------------------- faults (live vs snapshot)

DRIVER_DS = "nvidia-driver-daemonset"


def _inject_faults(kept: KeptRig) -> str:
    """Make real on the rig what upgrade-check and validate know: gpu-0 cordoned by another actor
    and running a GPU pod without a controller; gpu-1 labelled upgrade-required, its driver pod in
    CrashLoopBackOff (the driver DaemonSet the GPU Operator would make, with a status KWOK's stages
    leave alone: they act on Pending pods only). The crash-looping pod's name."""
    rig = kept.rig
    rig.kubectl("cordon", "gpu-0")
    rig.kubectl("label", "node", "gpu-1", "nvidia.com/gpu-driver-upgrade-state=upgrade-required")
    rig.create_namespace(TEAM)
    rig.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "bare-train", "namespace": TEAM},
                "spec": {**_gpu_pod_spec("gpu-0"), "nodeName": "gpu-0"},
            },
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": DRIVER_DS, "namespace": "gpu-operator"},
                "spec": {
                    "selector": {"matchLabels": {"app": DRIVER_DS}},
                    "template": {
                        "metadata": {"labels": {"app": DRIVER_DS}},
                        "spec": {
                            "nodeSelector": {"nvidia.com/gpu.present": "true"},
                            "tolerations": [{"operator": "Exists"}],
                            "containers": [
                                {
                                    "name": "nvidia-driver-ctr",
                                    "image": f"nvcr.io/nvidia/driver:{OLD_DRIVER}-ubuntu24.04",
                                }
                            ],
                        },
                    },
                },
            },
        ]
    )

    def running_driver_pod() -> str:
        for pod in _items(kept, "pods", "-n", "gpu-operator", "-l", f"app={DRIVER_DS}"):
            if pod["spec"].get("nodeName") == "gpu-1" and pod["status"].get("phase") == "Running":
                return str(pod["metadata"]["name"])
        return ""

    name = _wait("the driver pod on gpu-1 Running", running_driver_pod)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    crash = {
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "False", "lastTransitionTime": now},
            ],
            "containerStatuses": [
                {
                    "name": "nvidia-driver-ctr",
                    "image": f"nvcr.io/nvidia/driver:{OLD_DRIVER}-ubuntu24.04",
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 7,
                    "state": {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": "back-off 5m0s restarting failed container",
                        }
                    },
                    "lastState": {
                        "terminated": {
                            "exitCode": 1,
                            "reason": "Error",
                            "startedAt": now,
                            "finishedAt": now,
                        }
                    },
                }
            ],
        }
    }
    rig.kubectl(
        "patch",
        "pod",
        name,
        "-n",
        "gpu-operator",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(crash),
    )
    time.sleep(3)  # KWOK had its chance to overwrite it: the test below reads what stayed
    return name


def _remove_faults(kept: KeptRig) -> None:
    rig = kept.rig
    rig.kubectl("uncordon", "gpu-0")
    rig.kubectl("label", "node", "gpu-1", "nvidia.com/gpu-driver-upgrade-state-")
    rig.kubectl("delete", "pod", "bare-train", "-n", TEAM, "--wait=true")
    rig.kubectl("delete", "daemonset", DRIVER_DS, "-n", "gpu-operator", "--wait=true")


def test_faults_get_the_same_verdicts_live_and_from_a_snapshot(
    kept: KeptRig, first: Applied, files: dict[str, Path], tmp_path: Path
) -> None:
    """upgrade-check and validate read the faults from the live rig (--kubeconfig) and from
    ``gpucluster snapshot`` of it (--snapshot) and say the same; the faults are what they name."""
    assert first.ok
    crashing = _inject_faults(kept)
    try:
        pod = json.loads(
            kept.rig.kubectl("get", "pod", crashing, "-n", "gpu-operator", "-o", "json")
        )
        assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == (
            "CrashLoopBackOff"
        )
        live = _upgrade_check(kept, files)
        snap = _snapshot(kept, files["old"], tmp_path / "snapshot.json")
        offline = _upgrade_check(kept, files, snapshot=snap)
        print(live.stdout)
        assert live.returncode == offline.returncode == 3, (live.stderr, offline.stderr)
        live_doc, file_doc = _json_of(live), _json_of(offline)
        assert _verdicts(live_doc) == _verdicts(file_doc)
        nodes = {n["node"]: n for n in live_doc["nodes"]}
        assert sorted(nodes) == ["gpu-0", "gpu-1"]
        assert nodes["gpu-0"]["cordonedByOther"] is True
        assert nodes["gpu-0"]["barePods"] == [f"{TEAM}/bare-train"]
        assert nodes["gpu-1"]["upgradeState"] == "upgrade-required"
        assert nodes["gpu-1"]["driverCrash"] == f"gpu-operator/{crashing}: CrashLoopBackOff"
        assert nodes["gpu-0"]["verdict"] == nodes["gpu-1"]["verdict"] == "manual"

        v_live = _validate(kept, files["old"])
        v_file = _validate(kept, files["old"], snapshot=snap)
        assert v_live.returncode == v_file.returncode, (v_live.stderr, v_file.stderr)
        assert _checks(_json_of(v_live)) == _checks(_json_of(v_file))
    finally:
        _remove_faults(kept)


# --------------------------------------------------------------------------- the driver and DRA change


def _gated_hashes(applied: Applied) -> dict[str, str]:
    """Gate release id -> its ``gatedHash`` (the values document the graph writes)."""
    out = {}
    for rid, cfg in applied.stack.releases.items():
        for text in cfg.get("values", []):
            doc = yaml.safe_load(text)
            if isinstance(doc, dict) and "gatedHash" in doc:
                out[rid] = str(doc["gatedHash"])
    return out


def _raw_changes(a: Applied, b: Applied) -> set[str]:
    """Release ids whose ``cdk.tf.json`` arguments differ between two revisions (as written)."""
    return {
        rid
        for rid, cfg in b.stack.releases.items()
        if json.dumps(cfg, sort_keys=True) != json.dumps(a.stack.releases.get(rid), sort_keys=True)
    }


def _dra(kept: KeptRig) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    ds = json.loads(kept.rig.kubectl("get", "daemonset", DRA_DS, "-n", DRA_NS, "-o", "json"))
    pods = [
        p
        for p in _items(kept, "pods", "-n", DRA_NS)
        if any(
            o.get("uid") == ds["metadata"]["uid"]
            for o in p["metadata"].get("ownerReferences") or []
        )
        and not p["metadata"].get("deletionTimestamp")
    ]
    return ds, pods


IDENTITY = "gpucluster/driver-identity"


@pytest.fixture(scope="module")
def trainer(kept: KeptRig, first: Applied) -> str:
    """A training Deployment on gpu-1 (a GPU pod a controller re-creates): its pod's name."""
    kept.rig.create_namespace("team-b")
    kept.rig.apply(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "trainer", "namespace": "team-b"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "trainer"}},
                    "template": {
                        "metadata": {"labels": {"app": "trainer"}},
                        "spec": {
                            "tolerations": GPU_TOLERATION,
                            "containers": _gpu_pod_spec("gpu-1")["containers"],
                        },
                    },
                },
            }
        ]
    )

    def running() -> str:
        for p in _items(kept, "pods", "-n", "team-b", "-l", "app=trainer"):
            if p["status"].get("phase") == "Running" and p["spec"].get("nodeName"):
                return f"{p['spec']['nodeName']}/{p['metadata']['name']}"
        return ""

    return str(_wait("the trainer pod Running", running))


def test_upgrade_check_on_the_rig_judges_the_change_per_node_and_component(
    kept: KeptRig, files: dict[str, Path], trainer: str
) -> None:
    """Before the apply: the driver re-install (operator-managed) ends the GPU pod on its node
    (manual there), the node without GPU pods is safe; the DRA chart 0.5.0 -> 0.5.1 has no
    transition record (unknown); validate against the new file sees the plugin not re-rolled."""
    node, pod = trainer.split("/")
    proc = _upgrade_check(kept, files)
    print(proc.stdout)
    doc = _json_of(proc)
    assert proc.returncode == 3, proc.stderr
    comps = {c["component"]: c["verdict"] for c in doc["components"]}
    assert comps["gpu-operator"] == "manual"
    assert comps["nvidia-dra-driver-gpu"] == "unknown"
    nodes = {n["node"]: n for n in doc["nodes"]}
    assert sorted(nodes) == ["gpu-0", "gpu-1"]
    other = "gpu-0" if node == "gpu-1" else "gpu-1"
    assert nodes[node]["gpuPods"] == [f"team-b/{pod}"] and nodes[node]["barePods"] == []
    assert nodes[node]["verdict"] == "manual"
    assert nodes[other]["gpuPods"] == [] and nodes[other]["verdict"] == "safe"
    checks = _checks(_json_of(_validate(kept, files["new"])))
    assert checks["driver-identity"][0] == "fail"


@pytest.fixture(scope="module")
def upgrade(kept: KeptRig, first: Applied, files: dict[str, Path], trainer: str) -> Applied:
    applied = kept.apply(files["new"])
    print(f"apply of the driver and DRA change: makespan {applied.makespan:.1f} s")
    return applied


def test_only_the_changed_releases_are_upgraded(first: Applied, upgrade: Applied) -> None:
    assert _failed(upgrade) == []
    changed = _raw_changes(first, upgrade)
    assert {
        "gpu-operator",
        "gpu-operator-clusterpolicy-ready",
        "nvidia-dra-driver-gpu",
        "nvidia-dra-driver-gpu-crds",
        "nvidia-dra-driver-gpu-kubelet-plugin-rollout",
    } <= changed
    assert "cert-manager" not in changed and "network-operator" not in changed
    assert upgrade.upgraded() == changed  # Helm's revision numbers, not the engine's word
    assert {r for r, a in upgrade.actions().items() if a == "update"} == changed


def test_only_the_gates_whose_gated_hash_changed_run_again(
    first: Applied, upgrade: Applied
) -> None:
    before, after = _gated_hashes(first), _gated_hashes(upgrade)
    moved = {g for g in after if after[g] != before.get(g)}
    assert moved == {
        "gpu-operator-clusterpolicy-ready",
        "nvidia-dra-driver-gpu-kubelet-plugin-rollout",
    }
    ran = {j["job"] for j in upgrade.jobs if j["job"] in after}
    assert ran == moved
    assert all(j["exitCode"] == 0 for j in upgrade.jobs), upgrade.jobs


def test_the_dra_kubelet_plugin_rolls_out_the_new_version(
    kept: KeptRig, upgrade: Applied, files: dict[str, Path]
) -> None:
    ds, pods = _dra(kept)
    template = ds["spec"]["template"]
    image = template["spec"]["containers"][0]["image"]
    assert image.endswith(f":v{NEW_DRA}") or image.endswith(f":{NEW_DRA}"), image
    identity = template["metadata"]["annotations"][IDENTITY]
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-0", "gpu-1"]
    for p in pods:
        assert p["metadata"]["annotations"][IDENTITY] == identity
        assert p["spec"]["containers"][0]["image"] == image
        assert p["status"]["phase"] == "Running"
    gate = next(
        j for j in upgrade.jobs if j["job"] == "nvidia-dra-driver-gpu-kubelet-plugin-rollout"
    )
    assert gate["exitCode"] == 0 and any("ready" in ln for ln in gate["lastLines"]), gate
    checks = _checks(_json_of(_validate(kept, files["new"])))
    assert checks["driver-identity"][0] == "pass", checks["driver-identity"]


# --------------------------------------------------------------------------- AKS surge replacement

GATES = ("gpu-operator-clusterpolicy-ready", "nvidia-dra-driver-gpu-kubelet-plugin-rollout")


def _gates_ran(applied: Applied) -> dict[str, dict[str, Any]]:
    gates = set(_gated_hashes(applied))
    return {j["job"]: j for j in applied.jobs if j["job"] in gates}


@pytest.fixture(scope="module")
def surge(kept: KeptRig, upgrade: Applied, files: dict[str, Path]) -> Applied:
    applied = kept.apply(files["surge"])
    print(f"surge step 1: makespan {applied.makespan:.1f} s")
    return applied


def test_surge_step_1_the_new_pools_nodes_carry_the_operands_and_pass_the_gates(
    kept: KeptRig, surge: Applied
) -> None:
    """Step 1 (pool gpu2 ``replaces: gpu``): gpu2's nodes join beside gpu's, the GPU stack's
    gates run again and pass with the DRA kubelet plugin rolled out on all four GPU nodes."""
    assert _failed(surge) == []
    assert surge.nodes_added == ["gpu2-0", "gpu2-1"] and surge.nodes_removed == []
    ran = _gates_ran(surge)
    assert set(GATES) <= set(ran), sorted(ran)
    assert all(j["exitCode"] == 0 for j in ran.values()), ran
    dra_gate = ran["nvidia-dra-driver-gpu-kubelet-plugin-rollout"]
    assert any("desired 4, updated 4, available 4" in ln for ln in dra_gate["lastLines"]), dra_gate
    _ds, pods = _dra(kept)
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-0", "gpu-1", "gpu2-0", "gpu2-1"]
    assert all(p["status"]["phase"] == "Running" for p in pods)


def _move_the_jobs(kept: KeptRig, files: dict[str, Path]) -> list[str]:
    """Run the ``kubectl`` commands of plan's ``AKS-POOL-SURGE`` line (its fix: cordon and drain
    the old pool); the commands run."""
    proc = _gpucluster("plan", "--config", str(files["surge"]), cwd=files["surge"].parent)
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("info[AKS-POOL-SURGE]")]
    move = line.split("move the jobs: ", 1)[1].split("; then step 2", 1)[0]
    commands = [c.strip() for c in move.split("&&")]
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "kubectl", command
        kept.rig.kubectl(*words[1:], timeout=180)
    return commands


def test_surge_step_2_removes_the_old_pool_once_its_jobs_moved(
    kept: KeptRig, surge: Applied, files: dict[str, Path], trainer: str
) -> None:
    """Between the steps plan's own cordon/drain moves the training pod to gpu2; step 2 (pool gpu
    removed) deletes gpu's nodes, the gates run again and pass on gpu2's nodes alone."""
    commands = _move_the_jobs(kept, files)
    print("\n".join(commands))
    old = {n["metadata"]["name"]: n for n in _items(kept, "nodes")}
    assert old["gpu-0"]["spec"].get("unschedulable") and old["gpu-1"]["spec"].get("unschedulable")

    def moved() -> str:
        for p in _items(kept, "pods", "-n", "team-b", "-l", "app=trainer"):
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"):
                return str(p["spec"].get("nodeName") or "")
        return ""

    assert _wait("the trainer pod Running again", moved).startswith("gpu2-")
    replaced = kept.apply(files["replaced"])
    print(f"surge step 2: makespan {replaced.makespan:.1f} s")
    assert _failed(replaced) == []
    assert replaced.nodes_removed == ["gpu-0", "gpu-1"] and replaced.nodes_added == []
    ran = _gates_ran(replaced)
    assert set(GATES) <= set(ran) and all(j["exitCode"] == 0 for j in ran.values()), ran
    dra_gate = ran["nvidia-dra-driver-gpu-kubelet-plugin-rollout"]
    assert any("desired 2, updated 2, available 2" in ln for ln in dra_gate["lastLines"]), dra_gate

    _ds, pods = _dra(kept)
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu2-0", "gpu2-1"]

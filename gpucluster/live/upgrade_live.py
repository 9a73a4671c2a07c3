"""``gpucluster upgrade-check --from OLD --to NEW --snapshot FILE | --kubeconfig F``: what the
change does to the cluster as it runs now, per GPU node pool, per node and per component.

:mod:`gpucluster.lint.upgrade_check` compares the two revisions (files only); this module reads
a snapshot (:mod:`gpucluster.live.snapshot`) and says, for the changes it found:

* **driver re-install** (``gpu-operator`` version or driver values change, with the operator
  managing the driver: ``driver.enabled``): the GPU Operator's upgrade controller cordons, waits for
  or deletes GPU pods, drains and reloads the driver node by node, ``driver.upgradePolicy.
  maxParallelUpgrades`` at a time and at most ``maxUnavailable`` nodes out (NVIDIA GPU Operator
  docs, "GPU Driver Upgrades",
  https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-driver-upgrades.html;
  chart defaults ``autoUpgrade: true``, ``maxParallelUpgrades: 1``, ``maxUnavailable: 25%``,
  gpu-operator chart ``values.yaml`` of every version in the reference charts). With
  ``autoUpgrade: false`` nothing rolls it out: the driver DaemonSet is always ``OnDelete`` (the
  same ``values.yaml``, ``daemonsets.updateStrategy``), so each node waits for its driver pod to be
  deleted by hand (``manual``). ``driver.upgradePolicy.*`` changes alone re-install nothing;
* **DRA kubelet plugin re-roll** (``nvidia-dra-driver-gpu`` version or values change): the
  plugin's DaemonSet pods restart on every GPU node; running pods keep their prepared devices,
  new ResourceClaims on the node wait for the plugin (Kubernetes docs, "Dynamic Resource
  Allocation", https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/);
* **node-pool replacement** (AKS GPU pool ``gpuDriver`` or ``vmSize`` change): ``gpu_driver``,
  ``vm_size`` and ``os_sku`` of azurerm ``kubernetes_cluster_node_pool`` are ForceNew, so
  Terraform destroys the pool and creates a new one; every pod on it ends (Terraform Registry,
  hashicorp/azurerm, "azurerm_kubernetes_cluster_node_pool",
  https://registry.terraform.io/providers/hashicorp/azurerm/latest/docs/resources/kubernetes_cluster_node_pool);
* **node-pool upgrade** (``kubernetesVersion`` changes; a kept GPU pool's Kubernetes version
  follows it): AKS upgrades the pool node by node, cordoning, draining and re-imaging each node,
  ``maxUnavailable`` at a time (Microsoft Learn, "Upgrade an Azure Kubernetes Service (AKS)
  cluster", https://learn.microsoft.com/azure/aks/upgrade-aks-cluster);
* **CRD upgrades**: the CRD step :mod:`gpucluster.lint.upgrade_check` names.

What each node runs now: GPU pods (a container or init container requesting or limiting
``nvidia.com/gpu``, a shared or renamed ``nvidia.com/gpu*`` or a MIG slice ``nvidia.com/mig-*``
(:func:`is_gpu_resource`), or a pod with ``spec.resourceClaims``: DRA), and which of them are bare (no
``metadata.ownerReferences``: nothing recreates them once evicted); whether it is cordoned by
someone else (``spec.unschedulable`` while the upgrade controller's state label
``nvidia.com/gpu-driver-upgrade-state`` is not one of the states in which the controller itself
cordons, or the controller recorded ``nvidia.com/gpu-driver-upgrade.node-initial-state.
unschedulable``); whether it waits in ``upgrade-required`` or ``upgrade-failed``; whether its
driver pod (``nvidia-driver-daemonset``) is in ``CrashLoopBackOff`` / ``Init:CrashLoopBackOff``.
Label names and states: NVIDIA/k8s-operator-libs ``pkg/upgrade/consts.go``
(``UpgradeStateLabelKeyFmt = "nvidia.com/%s-driver-upgrade-state"``, driver name ``gpu``).

Verdicts (``safe | manual | unknown``): a node is ``manual`` when the change ends or evicts GPU
pods there, or when it is blocked (cordoned by another actor, stuck in an upgrade state, a
crash-looping driver pod); ``unknown`` when the snapshot cannot tell (no pods listed at all, no
nodes; for a change that evicts pods, a snapshot that does not say it lists every namespace's
Pods: :data:`gpucluster.live.snapshot.EVERY_NAMESPACE_KEY`); else ``safe``. Each verdict of a node belongs to one hazard (``driver``, ``dra``,
``pool``); a component's live verdict is the worst of its file verdict and its nodes' verdicts
for its own hazard (a node cordoned by someone else blocks a driver re-install, not a DRA re-roll).
Exit codes: the file check's (:data:`gpucluster.lint.upgrade_check.EXIT_CODES`): 0 every verdict
safe, 3 any ``manual``, 4 else any ``unknown``, 2 bad input. Pure Python, no cdktf; deterministic (sorted nodes, pools and components).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpucluster.errors import FIELD_LIMIT, GpuclusterError, one_line
from gpucluster.lint.upgrade_check import (
    EXIT_CODES,
    Change,
    ClusterReport,
    Report,
    removed_gpu_pools,
)
from gpucluster.live.snapshot import Snapshot
from gpucluster.model import NodePool, RuntimePlan
from gpucluster.recipes.upgrade_rules import driver_roll, worst

__all__ = [
    "render_ctrf",
    "attestation",
    "UPGRADE_STATE_LABEL",
    "INITIAL_UNSCHEDULABLE_ANNOTATION",
    "CONTROLLER_CORDON_STATES",
    "STUCK_STATES",
    "EXIT_SAFE",
    "LiveReport",
    "assess",
    "render_text",
    "render_json",
]

EXIT_SAFE = EXIT_CODES["safe"]
"""Exit codes: one table for both modes (:data:`gpucluster.lint.upgrade_check.EXIT_CODES`:
0 safe, 3 manual, 4 unknown; 2 bad input)."""

UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
"""The GPU Operator's driver upgrade state label (k8s-operator-libs ``UpgradeStateLabelKeyFmt``)."""
INITIAL_UNSCHEDULABLE_ANNOTATION = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
"""Set by the upgrade controller on a node that was already unschedulable when its upgrade began."""
CONTROLLER_CORDON_STATES = frozenset(
    {
        "cordon-required",
        "wait-for-jobs-required",
        "pod-deletion-required",
        "drain-required",
        "node-maintenance-required",
        "post-maintenance-required",
        "pod-restart-required",
        "validation-required",
        "uncordon-required",
        "upgrade-failed",
    }
)
"""States in which the upgrade controller itself may hold the node cordoned (k8s-operator-libs
``pkg/upgrade/consts.go``); an unschedulable node in any other state was cordoned by someone else."""
STUCK_STATES = frozenset({"upgrade-required", "upgrade-failed"})
"""States that block a new driver change: an upgrade already pending (gpu-operator#2509: nodes left
in ``upgrade-required`` with driver pods in ``Init:CrashLoopBackOff``) or failed."""
DONE_STATES = frozenset({"", "upgrade-done"})
"""Upgrade states of a node no driver roll is under way on (no label, or the last roll done);
any other state (``cordon-required`` ... ``uncordon-required``) is a roll in progress."""
CRASH_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "InvalidImageName",
        "RunContainerError",
    }
)
"""Waiting reasons of a container that does not start by itself (kubelet ``kuberuntime``
reasons; Kubernetes docs, "Debug Pods" and "Images": ``ImagePullBackOff``, ``ErrImagePull``)."""
DRIVER_POD_PREFIXES = ("nvidia-driver-daemonset", "nvidia-gpu-driver-")
"""Name prefixes of the GPU Operator's driver pods: the ClusterPolicy's DaemonSet
``nvidia-driver-daemonset``, and the DaemonSets ``nvidia-gpu-driver-<os>-<hash>`` an
``NVIDIADriver`` resource makes (``driver.nvidiaDriverCRD.enabled``; GPU Operator docs, "NVIDIA
GPU Driver Custom Resource Definition")."""
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
DRA_COMPONENT = "nvidia-dra-driver-gpu"
GPU_OPERATOR = "gpu-operator"


# --------------------------------------------------------------------------- reading the snapshot


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def is_gpu_resource(name: str) -> bool:
    """Is ``name`` an extended resource the NVIDIA device plugin advertises for a GPU or a part of
    one: ``nvidia.com/gpu``, a shared or renamed GPU (``nvidia.com/gpu.shared``, any
    ``nvidia.com/gpu*``: time-slicing and MPS ``rename``/``renameByDefault``), or a MIG slice
    (``nvidia.com/mig-<profile>``, MIG strategy ``mixed``)? Every one of them is held by a process
    on the GPU, so a driver re-install evicts the pod (NVIDIA GPU Operator docs, "Time-Slicing GPUs
    in Kubernetes" and "GPU Operator with MIG")."""
    return name.startswith((GPU_RESOURCE, MIG_RESOURCE_PREFIX))


def _item_key(obj: Mapping[str, Any], snap: Snapshot) -> str:
    """``items[<i>].``: where ``obj`` is in the snapshot's items ('' when it is not)."""
    for i, item in enumerate(snap.items):
        if item is obj:
            return f"items[{i}]."
    return ""


def _gpu_request(pod: Mapping[str, Any], snap: Snapshot) -> int:
    """GPUs (or GPU parts: :func:`is_gpu_resource`) the pod asks for: the largest such request or
    limit of a container (init containers included).

    Raises:
        GpuclusterError: a GPU quantity that is not a whole count (``NaN``, ``-1``, ``1.5``):
            one line naming the pod and the field (``validate.snapshot`` for a file,
            ``validate.cluster`` for a live reading).
    """
    spec = pod.get("spec") or {}
    total = 0
    for key in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(key) or []):
            res = (c or {}).get("resources") or {}
            for part in ("limits", "requests"):
                for name, value in (res.get(part) or {}).items():
                    if not is_gpu_resource(str(name)):
                        continue
                    count = _quantity_count(value)
                    if count is None:
                        meta = _meta(pod)
                        raise GpuclusterError(
                            f"Pod {meta.get('namespace')}/{meta.get('name')} asks for "
                            f"{one_line(value)} of {one_line(name)}, which is not a whole count",
                            file=snap.source,
                            key=f"{_item_key(pod, snap)}spec.{key}[{i}].resources.{part}.{name}",
                            allowed="a whole number of GPUs or GPU parts (0, 1, 8)",
                            fix="give the quantity as the API server stores it (kubectl get pod -o json)",
                            id="validate.snapshot" if snap.file_sha256 else "validate.cluster",
                        )
                    total = max(total, count)
    return total


def _active(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _driver_pod_problem(pod: Mapping[str, Any]) -> str:
    """Why a driver pod is not running and ready: ``<reason>`` / ``Init:<reason>`` of a container
    waiting in :data:`CRASH_REASONS`, ``phase <phase>`` when not ``Running``, ``not ready`` for a
    container not ready; '' for a running, ready pod."""
    status = pod.get("status") or {}
    for key, prefix in (("initContainerStatuses", "Init:"), ("containerStatuses", "")):
        for cs in status.get(key) or []:
            reason = (((cs or {}).get("state") or {}).get("waiting") or {}).get("reason")
            if reason in CRASH_REASONS:
                return f"{prefix}{reason}"
    phase = status.get("phase")
    if phase != "Running":
        return f"phase {phase or 'unknown'}"
    if any(not (cs or {}).get("ready") for cs in status.get("containerStatuses") or []):
        return "not ready"
    return ""


def _quantity_count(value: Any) -> int | None:
    """A GPU quantity as a whole count (extended resources are whole numbers: Kubernetes docs,
    "Extended resources"): ``"8"``, ``8``, ``"1k"``; None for anything else (``NaN``, ``-1``,
    ``1.5``, text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    text = str(value)
    if not re.fullmatch(r"[0-9]+(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?", text):
        return None
    from kubernetes.utils import parse_quantity

    return int(parse_quantity(text))


@dataclass
class NodeState:
    """One node as the snapshot shows it and what the change does to it.

    Attributes:
        name / pool: the node and its pool ('' when no pool of the plan selects it).
        gpus: allocatable ``nvidia.com/gpu``.
        gpu_pods: ``namespace/name`` of active pods using GPUs (requests/limits or ResourceClaims).
        bare_pods: those of ``gpu_pods`` without ownerReferences (nothing recreates them).
        claim_pods: those of ``gpu_pods`` with ``spec.resourceClaims``.
        upgrade_state: the value of :data:`UPGRADE_STATE_LABEL` ('' when absent).
        cordoned_by_other: unschedulable and not by the upgrade controller.
        driver_crash: ``pod: reason`` of a crash-looping driver pod on the node ('' when none).
        actions: what the change does to the node (sorted, one line each).
        verdict / notes: ``safe | manual | unknown`` and why.
    """

    name: str
    pool: str
    gpus: int
    unschedulable: bool
    gpu_pods: list[str] = field(default_factory=list)
    bare_pods: list[str] = field(default_factory=list)
    claim_pods: list[str] = field(default_factory=list)
    upgrade_state: str = ""
    cordoned_by_other: bool = False
    driver_crash: str = ""
    actions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verdicts: list[tuple[str, str]] = field(default_factory=list)
    """``(hazard, verdict)``: hazard ``driver``, ``dra``, ``pool`` or ``*`` (all of them)."""

    @property
    def verdict(self) -> str:
        return worst(v for _, v in self.verdicts) if self.verdicts else "safe"

    def verdict_for(self, hazard: str) -> str:
        """The node's verdict for one hazard (``driver``, ``dra``, ``pool``)."""
        found = [v for h, v in self.verdicts if h in (hazard, "*")]
        return worst(found) if found else "safe"

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.name,
            "pool": self.pool,
            "gpus": self.gpus,
            "unschedulable": self.unschedulable,
            "cordonedByOther": self.cordoned_by_other,
            "upgradeState": self.upgrade_state,
            "driverCrash": self.driver_crash,
            "gpuPods": list(self.gpu_pods),
            "barePods": list(self.bare_pods),
            "claimPods": list(self.claim_pods),
            "actions": list(self.actions),
            "verdict": self.verdict,
            "notes": list(self.notes),
        }


@dataclass
class PoolState:
    """One GPU pool: its nodes' GPUs now and during the change."""

    name: str
    nodes: list[str]
    gpus_schedulable: int
    gpus_during: int | None
    actions: list[str]
    verdict: str
    note: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool": self.name,
            "nodes": list(self.nodes),
            "gpusSchedulableNow": self.gpus_schedulable,
            "gpusSchedulableDuring": self.gpus_during,
            "actions": list(self.actions),
            "verdict": self.verdict,
            "note": self.note,
        }


@dataclass
class ComponentVerdict:
    component: str
    file_verdict: str
    verdict: str
    note: str

    def as_dict(self) -> dict[str, str]:
        return {
            "component": self.component,
            "fileVerdict": self.file_verdict,
            "verdict": self.verdict,
            "note": self.note,
        }


@dataclass
class LiveReport:
    """The file comparison (:class:`~gpucluster.lint.upgrade_check.Report`) judged on a snapshot."""

    report: Report
    cluster: str
    snapshot: Snapshot
    upgrade_policy: dict[str, Any]
    pools: list[PoolState]
    nodes: list[NodeState]
    components: list[ComponentVerdict]
    pods_listed: int
    pods_in_every_namespace: bool = False

    @property
    def verdict(self) -> str:
        return worst([c.verdict for c in self.components] or ["safe"])

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": "gpucluster.UpgradeCheckLive",
            "version": 1,
            "from": self.report.old,
            "to": self.report.new,
            "cluster": self.cluster,
            "snapshot": {
                "source": self.snapshot.source,
                "sha256": self.snapshot.digest,
                "podsListed": self.pods_listed,
                "podsInEveryNamespace": self.pods_in_every_namespace,
            },
            "driverUpgradePolicy": self.upgrade_policy,
            "verdict": self.verdict,
            "exitCode": self.exit_code,
            "components": [c.as_dict() for c in self.components],
            "pools": [p.as_dict() for p in self.pools],
            "nodes": [n.as_dict() for n in self.nodes],
            "changes": [ch.as_dict() for c in self.report.clusters for ch in c.changes],
        }


def _upgrade_policy(plan: RuntimePlan) -> dict[str, Any]:
    """``driver.upgradePolicy`` of the plan's gpu-operator values over the chart defaults
    (``autoUpgrade: true``, ``maxParallelUpgrades: 1``, ``maxUnavailable: 25%``: gpu-operator chart
    ``values.yaml``, v25.10.1 to v26.x)."""
    comp = plan.components.get(GPU_OPERATOR)
    policy = dict(((comp.values.get("driver") or {}).get("upgradePolicy") or {}) if comp else {})
    return {
        "autoUpgrade": policy.get("autoUpgrade", True),
        "maxParallelUpgrades": policy.get("maxParallelUpgrades", 1),
        "maxUnavailable": policy.get("maxUnavailable", "25%"),
    }


def _nodes_out(policy: Mapping[str, Any], total: int) -> int:
    """Nodes the upgrade controller takes out at once: ``maxParallelUpgrades`` (0: no limit) and
    ``maxUnavailable`` (a count, or a percentage of the nodes rounded up), the smaller of both."""
    parallel = _quantity(policy.get("maxParallelUpgrades")) or total
    raw = str(policy.get("maxUnavailable"))
    if raw.endswith("%"):
        unavailable = math.ceil(total * _quantity(raw[:-1]) / 100)
    else:
        unavailable = _quantity(raw)
    return max(0, min(parallel, unavailable or total, total))


def _pool_of(node: Mapping[str, Any], plan: RuntimePlan, extra: Sequence[NodePool] = ()) -> str:
    """The pool of ``plan`` (then of ``extra``: pools the change removes) whose node selector the
    node's labels match; "" for none."""
    labels = _meta(node).get("labels") or {}
    for pool in [*plan.cluster.pools, *extra]:
        if pool.node_selector and all(labels.get(k) == v for k, v in pool.node_selector.items()):
            return pool.name
    return ""


def _is_gpu_node(
    node: Mapping[str, Any], pool: str, plan: RuntimePlan, extra: Sequence[NodePool] = ()
) -> bool:
    labels = _meta(node).get("labels") or {}
    if any(p.name == pool and p.gpu for p in [*plan.cluster.pools, *extra]):
        return True
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return labels.get("nvidia.com/gpu.present") == "true" or any(
        is_gpu_resource(str(k)) and _quantity(v) > 0 for k, v in allocatable.items()
    )


def _node_states(
    snap: Snapshot, plan: RuntimePlan, extra: Sequence[NodePool] = ()
) -> list[NodeState]:
    pods = snap.objects("v1", "Pod")
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for p in pods:
        by_node.setdefault(str((p.get("spec") or {}).get("nodeName") or ""), []).append(p)
    states = []
    for node in sorted(snap.objects("v1", "Node"), key=lambda n: str(_meta(n).get("name"))):
        meta = _meta(node)
        name = str(meta.get("name"))
        pool = _pool_of(node, plan, extra)
        if not _is_gpu_node(node, pool, plan, extra):
            continue
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        state = str(labels.get(UPGRADE_STATE_LABEL, ""))
        unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        ns = NodeState(
            name=name,
            pool=pool,
            gpus=_quantity(((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)),
            unschedulable=unschedulable,
            upgrade_state=state,
            cordoned_by_other=unschedulable
            and (
                state not in CONTROLLER_CORDON_STATES
                or annotations.get(INITIAL_UNSCHEDULABLE_ANNOTATION) == "true"
            ),
        )
        driver_problems: list[str] = []
        driver_running = False
        for pod in sorted(
            by_node.get(name, []),
            key=lambda o: (str(_meta(o).get("namespace")), str(_meta(o).get("name"))),
        ):
            ident = f"{_meta(pod).get('namespace')}/{_meta(pod).get('name')}"
            if str(_meta(pod).get("name", "")).startswith(DRIVER_POD_PREFIXES):
                problem = _driver_pod_problem(pod)
                if problem:
                    driver_problems.append(f"{ident}: {problem}")
                else:
                    driver_running = True
            if not _active(pod):
                continue
            claims = bool((pod.get("spec") or {}).get("resourceClaims"))
            if _gpu_request(pod, snap) > 0 or claims:
                ns.gpu_pods.append(ident)
                if not _meta(pod).get("ownerReferences"):
                    ns.bare_pods.append(ident)
                if claims:
                    ns.claim_pods.append(ident)
        if (
            driver_problems and not driver_running
        ):  # a new driver pod that runs replaces a failed one
            ns.driver_crash = driver_problems[0]
        states.append(ns)
    return states


# --------------------------------------------------------------------------- judging


def _driver_rolls(change: Change | None, old: RuntimePlan, new: RuntimePlan) -> bool:
    """Does the gpu-operator change make the operator re-install the driver on the nodes? The
    file check's rule (:func:`gpucluster.recipes.upgrade_rules.driver_roll`): one table."""
    a, b = old.components.get(GPU_OPERATOR), new.components.get(GPU_OPERATOR)
    if change is None or change.kind not in ("version", "values") or a is None or b is None:
        return False
    return bool(driver_roll(change.kind, change.values, a.values, b.values))


def _replaced_pools(old: RuntimePlan, new: RuntimePlan) -> dict[str, str]:
    """GPU pools whose ForceNew arguments change, and GPU pools NEW removes
    (:func:`~gpucluster.lint.upgrade_check.removed_gpu_pools`): pool name -> what changes."""
    before = {p.name: p for p in old.cluster.pools if p.gpu}
    out = {}
    for pool in new.cluster.pools:
        a = before.get(pool.name)
        if not pool.gpu or a is None:
            continue
        diffs = [
            f"{k} {getattr(a, attr)} -> {getattr(pool, attr)}"
            for k, attr in (("vmSize", "vm_size"), ("gpuDriver", "gpu_driver"))
            if getattr(a, attr) != getattr(pool, attr)
        ]
        if diffs:
            out[pool.name] = ", ".join(diffs)
    out.update(removed_gpu_pools(old, new))
    return out


def _upgraded_pools(old: RuntimePlan, new: RuntimePlan) -> dict[str, str]:
    """GPU pools kept as they are (same ``vmSize`` and ``gpuDriver``) while ``kubernetesVersion``
    changes: pool name -> ``Kubernetes A -> B``. Their Kubernetes version follows the cluster's,
    and the platform upgrades them node by node, draining and re-imaging each node (the file
    check's ``gpuPoolUpgrade``, :func:`~gpucluster.lint.upgrade_check.replacing_changes`)."""
    a, b = old.cluster.kubernetes_version, new.cluster.kubernetes_version
    if a == b:
        return {}
    before = {p.name: p for p in old.cluster.pools if p.gpu}
    return {
        p.name: f"Kubernetes {a} -> {b}"
        for p in new.cluster.pools
        if p.gpu
        and p.name in before
        and (before[p.name].vm_size, before[p.name].gpu_driver) == (p.vm_size, p.gpu_driver)
    }


def _pods_text(pods: Sequence[str]) -> str:
    return ", ".join(pods[:5]) + (f", ... ({len(pods)} pods)" if len(pods) > 5 else "")


def _pool_states(
    nodes: Sequence[NodeState],
    replaced: Mapping[str, str],
    driver: bool,
    auto: bool,
    policy: Mapping[str, Any],
    upgraded: Mapping[str, str] | None = None,
) -> list[PoolState]:
    """Per GPU pool: the GPUs schedulable now and during the change, and the worst node verdict.
    A pool upgraded node by node (``upgraded``, :func:`_upgraded_pools`) has at least its largest
    node out at a time (how many more: the pool's upgrade settings, ``maxUnavailable``)."""
    upgraded = upgraded or {}
    pools: list[PoolState] = []
    by_pool: dict[str, list[NodeState]] = {}
    for n in nodes:
        by_pool.setdefault(n.pool, []).append(n)
    for name in sorted(by_pool):
        members = by_pool[name]
        schedulable = [n for n in members if not n.unschedulable]
        now = sum(n.gpus for n in schedulable)
        actions = sorted({a for n in members for a in n.actions})
        if name in replaced:
            during: int | None = 0
            note = f"pool {name or '(no pool)'} is replaced: 0 of its GPUs are schedulable until the new pool is ready"
        elif name in upgraded:
            during = now - max((n.gpus for n in schedulable), default=0)
            note = (
                f"pool {name} is upgraded node by node ({upgraded[name]}): each node is drained "
                f"and re-imaged; at least {during} of {now} schedulable GPUs left with one node out "
                "(more nodes at once when the pool's upgrade settings allow: maxUnavailable)"
            )
        elif driver and auto:
            out = _nodes_out(policy, len(members))
            largest = sorted((n.gpus for n in schedulable), reverse=True)[:out]
            during = now - sum(largest)
            note = (
                f"{out} of {len(members)} nodes out at once (maxParallelUpgrades "
                f"{policy['maxParallelUpgrades']}, maxUnavailable {policy['maxUnavailable']}): at least "
                f"{during} of {now} schedulable GPUs left"
            )
        else:
            during = now
            note = f"{now} schedulable GPUs; the change takes no node out"
        pools.append(
            PoolState(
                name=name,
                nodes=[n.name for n in members],
                gpus_schedulable=now,
                gpus_during=during,
                actions=actions,
                verdict=worst([n.verdict for n in members]),
                note=note,
            )
        )

    return pools


def _component_verdicts(
    cluster: ClusterReport,
    nodes: Sequence[NodeState],
    *,
    driver: bool,
    dra_rolls: bool,
    replaced: Mapping[str, str],
    blind: bool,
    upgraded: Mapping[str, str] | None = None,
) -> list[ComponentVerdict]:
    """Per changed component: its live verdict, never better than its file verdict."""
    changes = {ch.component: ch for ch in cluster.changes}

    def live(nodes_of: Sequence[NodeState], hazard: str) -> str:
        return worst(
            [n.verdict_for(hazard) for n in nodes_of] or (["unknown"] if blind else ["safe"])
        )

    components: list[ComponentVerdict] = []
    for ch in sorted(cluster.changes, key=lambda c: c.component):
        affected: Sequence[NodeState] = []
        note, hazard = "", "*"
        if ch.component == GPU_OPERATOR and driver:
            affected, hazard = nodes, "driver"
            note = f"driver re-install on {len(nodes)} GPU nodes"
        elif ch.component == GPU_OPERATOR and changes.get(GPU_OPERATOR) is not None:
            note = "no driver re-install (the operator does not manage the driver, or the change does not touch it)"
        elif ch.component == DRA_COMPONENT and dra_rolls:
            affected, hazard = nodes, "dra"
            note = f"kubelet plugin re-roll on {len(nodes)} GPU nodes"
        elif ch.component == "cluster" and (replaced or upgraded):
            affected, hazard = (
                [n for n in nodes if n.pool in {**(upgraded or {}), **replaced}],
                "pool",
            )
            parts = [
                f"{what}: {', '.join(sorted(pools))} "
                f"({sum(1 for n in nodes if n.pool in pools)} nodes)"
                for what, pools in (
                    ("GPU pools replaced", replaced),
                    ("GPU pools upgraded node by node", {**(upgraded or {})}),
                )
                if pools
            ]
            note = "; ".join(parts)
        if ch.crds.get("step"):
            note = "; ".join(x for x in (note, f"CRD upgrade: {ch.crds['step']}") if x)
        blocked = [n for n in affected if n.verdict_for(hazard) != "safe"]
        if blocked:
            note += f"; not safe now on {', '.join(n.name for n in blocked)}"
        verdict = worst([ch.verdict, live(affected, hazard) if affected or blind else "safe"])
        if blind:
            note = "; ".join(x for x in (note, "the snapshot lists no pods") if x)
        components.append(
            ComponentVerdict(ch.component, ch.verdict, verdict, note or "file change only")
        )
    return components


def _judge_driver_rollout(n: NodeState, auto: bool) -> None:
    """Add to ``n`` what a driver change does on it: how the new driver rolls out (by the GPU
    Operator's upgrade controller when ``auto``, else by hand: the driver DaemonSet updates
    OnDelete), and a ``("driver", "manual")`` verdict for GPU pods evicted, autoUpgrade off, or an
    upgrade already pending, failed or in progress on the node (its upgrade-state label).
    """
    if auto:
        n.actions.append(
            "driver re-install by the GPU Operator's upgrade controller (cordon, GPU pods deleted, drain)"
        )
    else:
        n.actions.append(
            "driver re-install when the node's driver pod is deleted by hand (autoUpgrade off: "
            "the driver DaemonSet updates OnDelete)"
        )
        n.verdicts.append(("driver", "manual"))
        n.notes.append(
            "autoUpgrade is off: nothing rolls the new driver out; delete each node's "
            "nvidia-driver-daemonset pod after draining it (GPU Driver Upgrades, without the upgrade controller)"
        )
    if n.gpu_pods:
        n.verdicts.append(("driver", "manual"))
        n.notes.append(f"{len(n.gpu_pods)} GPU pods are evicted: {_pods_text(n.gpu_pods)}")
    if n.upgrade_state in STUCK_STATES:
        n.verdicts.append(("driver", "manual"))
        n.notes.append(
            f"node is in {n.upgrade_state}: a driver upgrade is already pending or failed here; "
            "finish it (kubectl describe node, the driver pod's logs) before another"
        )
    elif n.upgrade_state not in DONE_STATES:
        n.verdicts.append(("driver", "manual"))
        n.notes.append(
            f"node is in {n.upgrade_state}: a driver upgrade is in progress here; let it "
            f"reach upgrade-done (kubectl get nodes -L {UPGRADE_STATE_LABEL}) before another"
        )


def _judge_pool_change(n: NodeState, replaced: dict[str, str], upgraded: dict[str, str]) -> None:
    """Node ``n``'s action and verdict when its pool is ``replaced`` (destroyed, and re-created
    unless removed) or ``upgraded`` (drained and re-imaged node by node): ``manual`` when GPU pods
    run on it (they end with the node, or the drain evicts them). Both map pool -> reason."""
    if n.pool in replaced:
        n.actions.append(
            f"node pool removed: Terraform destroys pool {n.pool} ({replaced[n.pool]})"
            if replaced[n.pool].startswith("removed")
            else f"node pool replaced: Terraform destroys and re-creates pool {n.pool} ({replaced[n.pool]})"
        )
        if n.gpu_pods:
            n.verdicts.append(("pool", "manual"))
            n.notes.append(
                f"{len(n.gpu_pods)} GPU pods end with the node: {_pods_text(n.gpu_pods)}"
            )
    if n.pool in upgraded:
        n.actions.append(
            f"node drained and re-imaged: the platform upgrades pool {n.pool} node by node "
            f"({upgraded[n.pool]})"
        )
        if n.gpu_pods:
            n.verdicts.append(("pool", "manual"))
            n.notes.append(
                f"{len(n.gpu_pods)} GPU pods are evicted by the drain: {_pods_text(n.gpu_pods)}"
            )


def assess(report: Report, old: RuntimePlan, new: RuntimePlan, snap: Snapshot) -> LiveReport:
    """Judge ``report`` (one cluster: ``old`` -> ``new``) on ``snap`` (see the module docstring).

    Raises:
        GpuclusterError: the report compares several clusters (a snapshot is one cluster's).
    """
    if len(report.clusters) != 1:
        raise GpuclusterError(
            "a snapshot is one cluster's state, and the files compare several clusters",
            key="--snapshot",
            allowed=", ".join(c.cluster for c in report.clusters),
            fix="compare one cluster's files (split the cluster file), or drop --snapshot/--kubeconfig",
            id="validate.input",
        )
    cluster: ClusterReport = report.clusters[0]
    changes = {ch.component: ch for ch in cluster.changes}
    policy = _upgrade_policy(new)
    kept = {p.name for p in new.cluster.pools}
    nodes = _node_states(snap, new, [p for p in old.cluster.pools if p.name not in kept])
    pods_listed = len(snap.objects("v1", "Pod"))
    blind = pods_listed == 0 or not snap.objects("v1", "Node")
    every_namespace = ("v1", "Pod") in snap.every_namespace
    driver = _driver_rolls(changes.get(GPU_OPERATOR), old, new)
    dra = changes.get(DRA_COMPONENT)
    dra_rolls = dra is not None and dra.kind in ("version", "values")
    replaced = _replaced_pools(old, new) if changes.get("cluster") else {}
    upgraded = {
        k: v
        for k, v in (_upgraded_pools(old, new) if changes.get("cluster") else {}).items()
        if k not in replaced
    }
    drained = {**upgraded, **replaced}
    auto = bool(policy["autoUpgrade"])

    for n in nodes:
        if blind:
            n.verdicts.append(("*", "unknown"))
            n.notes.append("the snapshot lists no pods: what runs on the node is not known")
        if not every_namespace and not blind and (driver or n.pool in drained):
            n.verdicts += [
                (h, "unknown") for h, on in (("driver", driver), ("pool", n.pool in drained)) if on
            ]
            n.notes.append(
                "the snapshot does not say it lists Pods of every namespace: a GPU job in another "
                "namespace would not be seen (gpucluster snapshot lists every namespace)"
            )
        _judge_pool_change(n, replaced, upgraded)
        if driver:
            _judge_driver_rollout(n, auto)
        if dra_rolls:
            n.actions.append(
                "DRA kubelet plugin re-roll (its pod restarts; running claims stay prepared)"
            )
            if n.claim_pods:
                n.notes.append(
                    f"{len(n.claim_pods)} pods with ResourceClaims keep running; new claims here wait for the plugin"
                )
        if (driver or dra_rolls) and n.driver_crash:
            n.verdicts += [
                (h, "manual") for h, on in (("driver", driver), ("dra", dra_rolls)) if on
            ]
            n.notes.append(
                f"driver pod not running ({n.driver_crash}): fix the driver before changing it "
                "(a crash loop is often 'driver is in use': GPU processes still hold the device; "
                "ImagePullBackOff: the driver image or its registry)"
            )
        # a pool being removed is cordoned on purpose (step 2 of a replacement): only a re-created one is at risk
        recreated = n.pool in upgraded or (
            n.pool in replaced and not replaced[n.pool].startswith("removed")
        )
        if (driver or recreated) and n.cordoned_by_other:
            n.verdicts += [
                (h, "manual") for h, on in (("driver", driver), ("pool", recreated)) if on
            ]
            n.notes.append(
                "cordoned by someone else (unschedulable, not by the upgrade controller): the change "
                "would act on it and may uncordon it; agree with who cordoned it first"
            )
        if n.bare_pods and (driver or n.pool in drained):
            n.notes.append(
                f"no controller re-creates {len(n.bare_pods)} bare pods (no ownerReferences): {_pods_text(n.bare_pods)}"
            )
        n.actions.sort()

    pools = _pool_states(nodes, replaced, driver, auto, policy, upgraded)
    components = _component_verdicts(
        cluster,
        nodes,
        driver=driver,
        dra_rolls=dra_rolls,
        replaced=replaced,
        blind=blind,
        upgraded=upgraded,
    )
    return LiveReport(
        report=report,
        cluster=cluster.cluster,
        snapshot=snap,
        upgrade_policy=policy,
        pools=pools,
        nodes=nodes,
        components=components,
        pods_listed=pods_listed,
        pods_in_every_namespace=every_namespace,
    )


# --------------------------------------------------------------------------- output


def _cell(text: Any, limit: int = FIELD_LIMIT) -> str:
    return one_line(text if text not in (None, "") else "-", limit)


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(row[:-1])) + "  " + row[-1]
        for row in rows
    ]


def render_text(live: LiveReport) -> str:
    """Tables like ``gpucluster validate``'s: components, GPU pools, GPU nodes; then the verdict."""
    r = live.report
    lines = [
        f"upgrade-check {_cell(r.old)} -> {_cell(r.new)}: cluster {_cell(live.cluster)} against "
        f"{_cell(live.snapshot.source)} ({live.pods_listed} pods listed)"
    ]
    rows: list[tuple[str, ...]] = [("COMPONENT", "FILE", "NOW", "NOTE")]
    rows += [
        (_cell(c.component), c.file_verdict.upper(), c.verdict.upper(), _cell(c.note, 400))
        for c in live.components
    ] or [("-", "-", "SAFE", "no change")]
    lines += _table(rows)
    rows = [("POOL", "NODES", "GPUS NOW", "GPUS DURING", "RESULT", "NOTE")]
    rows += [
        (
            _cell(p.name),
            str(len(p.nodes)),
            str(p.gpus_schedulable),
            "-" if p.gpus_during is None else str(p.gpus_during),
            p.verdict.upper(),
            _cell(p.note, 400),
        )
        for p in live.pools
    ]
    if len(rows) > 1:
        lines += _table(rows)
    rows = [("NODE", "POOL", "GPU PODS", "BARE", "STATE", "RESULT", "NOTES")]
    for n in live.nodes:
        state = ", ".join(
            x
            for x in (
                n.upgrade_state,
                "cordoned-by-other" if n.cordoned_by_other else "",
                "driver-pod-not-running" if n.driver_crash else "",
            )
            if x
        )
        rows.append(
            (
                _cell(n.name),
                _cell(n.pool),
                str(len(n.gpu_pods)),
                str(len(n.bare_pods)),
                _cell(state),
                n.verdict.upper(),
                _cell("; ".join(n.actions + n.notes) or "-", 600),
            )
        )
    if len(rows) > 1:
        lines += _table(rows)
    lines.append(f"verdict: {live.verdict} (exit {live.exit_code})")
    return "\n".join(lines) + "\n"


def render_json(live: LiveReport) -> str:
    return json.dumps(live.as_dict(), indent=2, sort_keys=True) + "\n"


# --------------------------------------------------------------------------- CTRF, in-toto

CTRF_PHASE = "upgrade"
"""The CTRF ``suite`` of every upgrade-check test (one per component, GPU pool and GPU node)."""

PREDICATE_TYPE = "urn:gpucluster:UpgradeCheckLive:v1"
"""``predicateType`` of an upgrade-check attestation: the predicate is the ``--format json``
document (``kind`` ``gpucluster.UpgradeCheckLive``)."""

_AS_VERDICT = {"safe": "pass", "manual": "fail", "unknown": "unsupported"}
"""``safe | manual | unknown`` -> the verdicts CTRF statuses are made of (``passed``, ``failed``,
``other``: a change the snapshot cannot judge blocks like AICR's ``other``)."""


def render_ctrf(live: LiveReport, *, time: str) -> str:
    """The CTRF report (:func:`gpucluster.live.evidence.ctrf_document`): one test per component
    (``component/<name>``), GPU pool (``pool/<name>``) and GPU node (``node/<name>``), suite
    :data:`CTRF_PHASE`, status from the live verdict (safe ``passed``, manual ``failed``, unknown
    ``other``), message the note; ``time`` the check's time (:func:`gpucluster.live.evidence.now`)."""
    from gpucluster import __version__
    from gpucluster.live import evidence

    tests = [
        evidence.CtrfTest(
            name=f"component/{c.component}",
            verdict=_AS_VERDICT[c.verdict],
            phase=CTRF_PHASE,
            message=one_line(c.note),
            extra={"kind": "component", "fileVerdict": c.file_verdict, "verdict": c.verdict},
        )
        for c in live.components
    ]
    tests += [
        evidence.CtrfTest(
            name=f"pool/{p.name}",
            verdict=_AS_VERDICT[p.verdict],
            phase=CTRF_PHASE,
            message=one_line(p.note),
            extra={
                "kind": "pool",
                "verdict": p.verdict,
                "gpusSchedulableNow": str(p.gpus_schedulable),
                "gpusSchedulableDuring": "" if p.gpus_during is None else str(p.gpus_during),
            },
        )
        for p in live.pools
    ]
    tests += [
        evidence.CtrfTest(
            name=f"node/{n.name}",
            verdict=_AS_VERDICT[n.verdict],
            phase=CTRF_PHASE,
            message=one_line("; ".join(n.actions + n.notes)),
            extra={
                "kind": "node",
                "pool": n.pool,
                "verdict": n.verdict,
                "gpuPods": str(len(n.gpu_pods)),
                "barePods": str(len(n.bare_pods)),
                "upgradeState": n.upgrade_state,
            },
        )
        for n in live.nodes
    ]
    doc = evidence.ctrf_document(
        tests,
        tool_version=__version__,
        time=time,
        environment={
            "appName": "gpucluster",
            "appVersion": __version__,
            "testEnvironment": live.cluster,
        },
        extra={
            "gpucluster": {
                "from": live.report.old,
                "to": live.report.new,
                "snapshotSha256": live.snapshot.digest,
                "snapshotSource": live.snapshot.source,
            }
        },
    )
    return evidence.render(doc)


def attestation(
    live: LiveReport, old: RuntimePlan, new: RuntimePlan, *, snapshot_file: str | None = None
) -> str:
    """An unsigned in-toto Statement v1 whose predicate is :meth:`LiveReport.as_dict` (type
    :data:`PREDICATE_TYPE`). Subjects: the snapshot (``snapshot_file`` by its name and the sha256
    of its bytes, or ``snapshot:<source>`` with the digest of what was read live), then
    ``plan:from:<cluster>`` and ``plan:to:<cluster>`` with both sides' plan fingerprints
    (:func:`gpucluster.inputs.fleet.rollout_digest`).

    Raises:
        GpuclusterError: the snapshot file cannot be read (``error[validate.input]``).
    """
    from gpucluster.inputs.fleet import rollout_digest
    from gpucluster.live import evidence

    snap = live.snapshot
    subjects = [
        evidence.judged_subject(snapshot_file, snap.file_sha256, key="--snapshot")
        if snapshot_file is not None
        else evidence.Subject(f"snapshot:{snap.source}", snap.digest),
        evidence.Subject(f"plan:from:{old.cluster.name}", rollout_digest(old)),
        evidence.Subject(f"plan:to:{new.cluster.name}", rollout_digest(new)),
    ]
    return evidence.render(
        evidence.statement(subjects, predicate_type=PREDICATE_TYPE, predicate=live.as_dict())
    )

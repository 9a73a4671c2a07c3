"""The checks ``gpucluster validate`` runs, derived from a :class:`~gpucluster.model.RuntimePlan`.

Nothing here is written per example: every check and every expected value comes from the plan
(its components and their effective values, its readiness gates, its generated manifest charts,
the prepared cluster spec) or from the AICR health check of a component the plan installs.

==================  ===========================================================================
check               proves (and the plan facts it is derived from)
==================  ===========================================================================
``aicr-health``     AICR's Chainsaw health check of the component passes, run unchanged
                    (:mod:`gpucluster.live.chainsaw`); one per installed component that has one.
                    A check that reads a namespace the plan does not install the component in is
                    ``skip`` (reason printed), never counted as a pass.
``gate``            each readiness gate's condition holds now (``RuntimePlan.gates``: ClusterPolicy
                    / NicClusterPolicy ``status.state``, CRDs Established, DaemonSet/Deployment
                    rolled out with at least ``min_ready`` pods, minimum image version).
``gpu-nodes``       each GPU pool has its ``node_count`` Ready nodes (``ClusterSpec.pools``; for an
                    existing cluster: at least one GPU node, :mod:`gpucluster.live.nodes`).
``gpu-advertiser``  every GPU node advertises whole GPUs through exactly the plan's advertiser:
                    the device plugin (allocatable ``nvidia.com/gpu``: gpu-operator
                    ``devicePlugin.enabled``, or an external plugin when the recipe's profile
                    says ``advertiser: external``, OKE) or DRA (ResourceSlices of driver
                    ``gpu.nvidia.com``: nvidia-dra-driver-gpu ``resources.gpus.enabled``), never both.
``gpu-count``       every GPU node advertises the GPUs its VM size has (``NodePool.gpus_per_node``;
                    existing clusters: GPU Feature Discovery's ``nvidia.com/gpu.count``), so the
                    pool advertises ``GPUs per VM x nodes``.
``runtime-class``   the RuntimeClass the profile names (gpu-operator ``operator.runtimeClass``,
                    chart default ``nvidia``) exists with the handler of the same name (the GPU
                    Operator names the RuntimeClass and the containerd runtime alike).
``driver-version``  where the GPU Operator installs the driver (``driver.enabled``), every GPU node
                    runs ``driver.version`` (GPU Feature Discovery ``nvidia.com/cuda.driver-version.full``).
``driver-identity`` the DRA kubelet plugin runs with the plan's driver identity (its pod template and
                    every pod carry ``gpucluster/driver-identity`` as the plan computed it).
``manifest-rollout`` every DaemonSet/Deployment of the plan's manifest charts (the toolkit hardening,
                    the peermem reloader, ...) runs on every node its pod spec admits, all ready.
``manifest-object`` every custom resource of the plan's manifest charts exists (NicClusterPolicy,
                    Skyhook, IPPools, SR-IOV policies and networks, ...).
``rail-ippool``     every SR-IOV InfiniBand network (rail) of the plan has its nv-ipam IPPool
                    (``SriovIBNetwork.spec.ipam`` ``poolName``).
``rail-resource``   every node a rail's SriovNetworkNodePolicy selects advertises its VFs
                    (allocatable ``<resourcePrefix>/<resourceName>``; prefix: network-operator
                    ``sriov-network-operator.operator.resourcePrefix``, chart default ``nvidia.com``).
``placement``       every pod of the plan's namespaces runs on a node its own node selector,
                    required node affinity and tolerations admit (labels or taints changed under it
                    mean it runs on the wrong nodes).
==================  ===========================================================================
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from importlib import resources
from typing import Any

from gpucluster.live import chainsaw
from gpucluster.live.nodes import GPU_COUNT_LABEL, GpuNodeGroup, gpu_node_groups, pod_fits
from gpucluster.live.snapshot import Snapshot
from gpucluster.model import GateSpec, RuntimePlan
from gpucluster.values import get_path

__all__ = [
    "Check",
    "CheckResult",
    "derive_checks",
    "AICR_CHECKS",
    "DEVICE_PLUGIN_RESOURCE",
    "DRA_GPU_DRIVER",
]

AICR_CHECKS = "aicr_checks"
"""Package folder of AICR's health checks: ``aicr_checks/<component>/health-check.yaml``."""

DEVICE_PLUGIN_RESOURCE = "nvidia.com/gpu"
"""The extended resource NVIDIA's device plugin advertises whole GPUs as (k8s-device-plugin)."""
DRA_GPU_DRIVER = "gpu.nvidia.com"
"""The DRA driver name of NVIDIA's GPU kubelet plugin in ResourceSlices (dra-driver-nvidia-gpu)."""
DRIVER_VERSION_LABEL = "nvidia.com/cuda.driver-version.full"
"""GPU Feature Discovery's node label with the running driver version (``595.91.07``)."""
DRIVER_IDENTITY_ANNOTATION = "gpucluster/driver-identity"
SRIOV_RESOURCE_PREFIX_PATH = "sriov-network-operator.operator.resourcePrefix"
SRIOV_RESOURCE_PREFIX_DEFAULT = "nvidia.com"
"""network-operator chart (26.4.1) ``values.yaml``: ``sriov-network-operator.operator.resourcePrefix``."""
WORKLOAD_KINDS = ("DaemonSet", "Deployment", "StatefulSet")


@dataclass(frozen=True)
class CheckResult:
    """A check's verdict on one snapshot.

    Attributes:
        verdict: ``pass``, ``fail``, ``skip`` (not applicable; the reason says why) or
            ``unsupported`` (cannot be decided honestly; counts as not passed).
        reason: one sentence.
        object: the object that decided, ``apiVersion/Kind/[namespace/]name``.
        field: the field of that object that decided (``status.state``).
        observed: what was read (evidence).
        operations: AICR checks: every Chainsaw operation's result.
    """

    verdict: str
    reason: str
    object: str = ""
    field: str = ""
    observed: Mapping[str, Any] = dc_field(default_factory=dict)
    operations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Check:
    """One check derived from the plan: ``name`` (the table's check column), ``id`` (unique),
    ``component``, ``proves`` (one line), ``inputs`` (the plan facts it uses) and ``run``."""

    id: str
    name: str
    component: str
    proves: str
    inputs: Mapping[str, Any]
    run: Callable[[Snapshot], CheckResult] = dc_field(repr=False, compare=False)


def _ref(obj: Mapping[str, Any]) -> str:
    return chainsaw.object_ref(obj)


def _ok(
    reason: str, obj: Mapping[str, Any] | str = "", fld: str = "", **observed: Any
) -> CheckResult:
    return CheckResult("pass", reason, obj if isinstance(obj, str) else _ref(obj), fld, observed)


def _fail(
    reason: str, obj: Mapping[str, Any] | str = "", fld: str = "", **observed: Any
) -> CheckResult:
    return CheckResult("fail", reason, obj if isinstance(obj, str) else _ref(obj), fld, observed)


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


# --------------------------------------------------------------------------- AICR health checks


def _aicr_file(component: str):
    path = resources.files("gpucluster.live").joinpath(AICR_CHECKS, component, "health-check.yaml")
    return path if path.is_file() else None


def _aicr_check(plan: RuntimePlan, component: str, text: str) -> Check:
    tests = chainsaw.parse_tests(text, file=f"{AICR_CHECKS}/{component}/health-check.yaml")
    namespace = plan.components[component].ref.namespace
    read = sorted(
        {
            str((op.resource.get("metadata") or {}).get("namespace"))
            for t in tests
            for op in t.operations
            if isinstance(op.resource, Mapping)
            and (op.resource.get("metadata") or {}).get("namespace")
        }
    )

    def run(snap: Snapshot) -> CheckResult:
        elsewhere = [ns for ns in read if ns != namespace]
        if elsewhere:
            return CheckResult(
                "skip",
                f"the AICR check reads namespace {', '.join(elsewhere)}; the plan installs {component} "
                f"in namespace {namespace}, so it cannot pass or fail on this cluster",
            )
        results = [chainsaw.run_test(t, snap) for t in tests]
        ops = tuple(o.as_dict() for r in results for o in r.operations)
        bad = next((r for r in results if r.verdict != "pass"), None)
        if bad is None:
            return CheckResult("pass", f"{len(ops)} Chainsaw operations passed", operations=ops)
        deciding = bad.deciding
        if deciding is None:
            return CheckResult(bad.verdict, bad.problem, operations=ops)
        return CheckResult(
            bad.verdict,
            f"step {deciding.step}, {deciding.op} {deciding.lookup}: {deciding.reason}",
            deciding.object,
            deciding.field,
            operations=ops,
        )

    return Check(
        id=f"aicr-health/{component}",
        name="aicr-health",
        component=component,
        proves=f"AICR's {component} health check passes (run unchanged)",
        inputs={
            "file": f"gpucluster/live/{AICR_CHECKS}/{component}/health-check.yaml",
            "namespace": namespace,
            "readsNamespaces": read,
        },
        run=run,
    )


# --------------------------------------------------------------------------- gates


def _jsonpath_value(obj: Mapping[str, Any], jsonpath: str) -> tuple[bool, Any]:
    """``{.a.b}`` of ``obj`` (the simple dotted form the built-in gates use)."""
    path = jsonpath.strip()
    if not (path.startswith("{.") and path.endswith("}")) or any(
        c in path[2:-1] for c in "[]*?@\\\"'"
    ):
        return False, None
    value: Any = obj
    for part in path[2:-1].split("."):
        if not isinstance(value, Mapping) or part not in value:
            return True, None
        value = value[part]
    return True, value


_ROLLOUT_FIELDS = {
    "DaemonSet": {
        "desired": "status.desiredNumberScheduled",
        "updated": "status.updatedNumberScheduled",
        "available": "status.numberAvailable",
        "current": "status.currentNumberScheduled",
    },
    "Deployment": {
        "desired": "spec.replicas",
        "updated": "status.updatedReplicas",
        "available": "status.availableReplicas",
        "current": "status.replicas",
    },
}
"""The fields a rollout gate reads (:func:`gpucluster.charts.gates.gate_script`), per kind."""


def _rollout(obj: Mapping[str, Any], spec: GateSpec) -> tuple[bool, str, dict[str, int]]:
    """The rollout gate's condition on ``obj``: ``(holds, the field that decided, numbers seen)``."""
    fields = _ROLLOUT_FIELDS["DaemonSet" if obj.get("kind") == "DaemonSet" else "Deployment"]
    seen = {}
    for key, path in fields.items():
        value: Any = obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        seen[key] = _int(value if value is not None else (1 if path == "spec.replicas" else 0))
    seen["generation"] = _int((obj.get("metadata") or {}).get("generation"))
    seen["observed"] = _int((obj.get("status") or {}).get("observedGeneration"))
    if seen["observed"] < seen["generation"]:
        return False, "status.observedGeneration", seen
    if seen["desired"] < spec.min_ready:
        return False, fields["desired"], seen
    for key in ("updated", "available", "current"):
        if seen[key] != seen["desired"]:
            return False, fields[key], seen
    return True, fields["desired"], seen


def _image_version(obj: Mapping[str, Any], container: str) -> str | None:
    for c in (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers"
    ) or []:
        if c.get("name") == container:
            ref = str(c.get("image", "")).split("@")[0]
            last = ref.rsplit("/", 1)[-1]
            return last.rsplit(":", 1)[1] if ":" in last else ""
    return None


def _gate_crd_established(spec: GateSpec, snap: Snapshot) -> CheckResult:
    """The ``crd-established`` gate: the CRD exists and is Established."""
    crd = snap.get(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        None,
        str(spec.name_of_object),
    )
    if crd is None:
        return _fail(
            f"CRD {spec.name_of_object} does not exist",
            f"apiextensions.k8s.io/v1/CustomResourceDefinition/{spec.name_of_object}",
            "metadata.name",
        )
    established = [
        c.get("status")
        for c in (crd.get("status") or {}).get("conditions") or []
        if c.get("type") == "Established"
    ]
    if established != ["True"]:
        return _fail(
            f"CRD {spec.name_of_object} is not Established (Established={established[0] if established else 'unset'})",
            crd,
            "status.conditions[type=Established].status",
        )
    return _ok("Established", crd, "status.conditions[type=Established].status")


def _gate_resource_condition(spec: GateSpec, snap: Snapshot) -> CheckResult:
    """The ``resource-condition`` gate: a jsonpath of the object(s) has the value."""
    ok, _ = _jsonpath_value({}, spec.jsonpath)
    if not ok:
        return CheckResult("unsupported", f"jsonpath {spec.jsonpath} is not a simple {{.a.b}} path")
    if snap.scope(spec.api_version, spec.kind_name) is None:
        return _fail(
            f"the cluster does not serve {spec.kind_name} in {spec.api_version}",
            f"{spec.api_version}/{spec.kind_name}",
        )
    if spec.name_of_object:
        obj = snap.get(spec.api_version, spec.kind_name, spec.namespace, spec.name_of_object)
        objs = [obj] if obj is not None else []
        if not objs:
            where = "/".join(
                p
                for p in (
                    spec.api_version,
                    spec.kind_name,
                    spec.namespace or "",
                    spec.name_of_object,
                )
                if p
            )
            return _fail(
                f"{spec.kind_name} {spec.name_of_object} does not exist",
                where,
                "metadata.name",
            )
    else:
        objs = snap.list(spec.api_version, spec.kind_name, spec.namespace, {})
        if not objs:
            return _fail(
                f"no {spec.kind_name} exists (at least one must)",
                f"{spec.api_version}/{spec.kind_name}",
                "metadata.name",
            )
    fld = spec.jsonpath.strip()[2:-1]
    for obj in objs:
        _, value = _jsonpath_value(obj, spec.jsonpath)
        if str(value) != spec.value or value is None:
            return _fail(f"{fld} is {value!r}, not {spec.value!r}", obj, fld, value=value)
    return _ok(f"{fld} = {spec.value} on {len(objs)} object(s)", objs[0], fld)


def _gate_rollout(spec: GateSpec, snap: Snapshot) -> CheckResult:
    """The rollout gates (and ``min-version``): the workload is rolled out (at that image)."""
    from gpucluster.versions import parse_version

    obj = snap.get(
        spec.api_version or "apps/v1", spec.kind_name, spec.namespace, str(spec.name_of_object)
    )
    where = f"apps/v1/{spec.kind_name}/{spec.namespace}/{spec.name_of_object}"
    if obj is None:
        return _fail(
            f"{spec.kind_name} {spec.namespace}/{spec.name_of_object} does not exist",
            where,
            "metadata.name",
        )
    ok, fld, seen = _rollout(obj, spec)
    if not ok:
        return _fail(
            f"not rolled out (at least {spec.min_ready} desired): "
            + ", ".join(f"{k} {v}" for k, v in seen.items()),
            obj,
            fld,
            **seen,
        )
    if spec.kind == "min-version":
        tag = _image_version(obj, spec.container)
        have, want = parse_version(tag or ""), parse_version(spec.value)
        if have is None or want is None or have < want:
            return _fail(
                f"container {spec.container} runs {tag!r}, below {spec.value}",
                obj,
                f"spec.template.spec.containers[name={spec.container}].image",
                image=tag,
            )
    return _ok("rolled out: " + ", ".join(f"{k} {v}" for k, v in seen.items()), obj, fld, **seen)


def _gate_check(spec: GateSpec) -> Check:
    def run(snap: Snapshot) -> CheckResult:
        if spec.kind == "crd-established":
            return _gate_crd_established(spec, snap)
        if spec.kind == "resource-condition":
            return _gate_resource_condition(spec, snap)
        return _gate_rollout(spec, snap)

    return Check(
        id=f"gate/{spec.name}",
        name="gate",
        component=spec.component,
        proves=spec.description or spec.name,
        inputs={
            "gate": spec.name,
            "kind": spec.kind,
            "apiVersion": spec.api_version,
            "kindName": spec.kind_name,
            "name": spec.name_of_object,
            "namespace": spec.namespace,
            "jsonpath": spec.jsonpath,
            "value": spec.value,
            "minReady": spec.min_ready,
            "container": spec.container,
        },
        run=run,
    )


# --------------------------------------------------------------------------- GPU nodes


def advertiser(plan: RuntimePlan) -> str | None:
    """``device-plugin``, ``external-device-plugin`` (the recipe's profile says ``advertiser:
    external``), ``dra``, or None when the plan installs no GPU advertiser (the policy refuses
    two: ``GPU-ADVERTISER``)."""
    if plan.recipe.advertiser == "external":
        return "external-device-plugin"
    dra = plan.components.get("nvidia-dra-driver-gpu")
    if dra is not None and get_path(dra.values, "resources.gpus.enabled") is True:
        return "dra"
    gpu = plan.components.get("gpu-operator")
    if gpu is not None and get_path(gpu.values, "devicePlugin.enabled") is not False:
        return "device-plugin"
    return None


def _dra_gpus(snap: Snapshot) -> dict[str, tuple[int, str]]:
    """node name -> (GPU devices in ResourceSlices of driver gpu.nvidia.com, first slice name)."""
    out: dict[str, tuple[int, str]] = {}
    for rs in snap.objects("resource.k8s.io/v1", "ResourceSlice"):
        spec = rs.get("spec") or {}
        if spec.get("driver") != DRA_GPU_DRIVER or not spec.get("nodeName"):
            continue
        devices = [
            d
            for d in spec.get("devices") or []
            if ((d.get("attributes") or {}).get("type") or {}).get("string", "gpu") == "gpu"
        ]
        count, first = out.get(spec["nodeName"], (0, rs["metadata"]["name"]))
        out[spec["nodeName"]] = (count + len(devices), first)
    return out


def _group_nodes(snap: Snapshot, group: GpuNodeGroup) -> list[dict[str, Any]]:
    return [n for n in snap.objects("v1", "Node") if group.selects(n)]


def _ready(node: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def _gpu_nodes_result(snap: Snapshot, group: GpuNodeGroup) -> CheckResult:
    """The ``gpu-nodes`` check of ``group``: its nodes are Ready (as many as planned)."""
    nodes = _group_nodes(snap, group)
    ready = [n for n in nodes if _ready(n)]
    names = [n["metadata"]["name"] for n in nodes]
    if group.node_count is None:
        if not ready:
            return _fail(
                f"no Ready node of {group.describe()}",
                "v1/Node",
                "metadata.labels",
                nodes=names,
            )
        return _ok(
            f"{len(ready)} Ready GPU node(s)",
            ready[0],
            "status.conditions[type=Ready]",
            nodes=names,
        )
    if len(ready) != group.node_count:
        not_ready = next((n for n in nodes if not _ready(n)), None)
        return _fail(
            f"{len(ready)} Ready node(s) of {group.describe()}, the plan has {group.node_count}",
            not_ready or "v1/Node",
            "status.conditions[type=Ready]" if not_ready else "metadata.labels",
            nodes=names,
        )
    return _ok(
        f"{len(ready)} Ready node(s), as planned",
        ready[0] if ready else "v1/Node",
        "status.conditions[type=Ready]",
        nodes=names,
    )


def _gpu_advertiser_result(
    snap: Snapshot, group: GpuNodeGroup, expected: str | None
) -> CheckResult:
    """The ``gpu-advertiser`` check of ``group``: GPUs come through the ``expected`` advertiser only."""
    if expected is None:
        return CheckResult("skip", "the plan installs no GPU advertiser")
    dra = _dra_gpus(snap)
    seen = {}
    nodes = _group_nodes(snap, group)
    if not nodes:
        return _fail(
            f"no node of {group.describe()} to advertise GPUs", "v1/Node", "metadata.labels"
        )
    for node in nodes:
        name = node["metadata"]["name"]
        dp = _int(
            ((node.get("status") or {}).get("allocatable") or {}).get(DEVICE_PLUGIN_RESOURCE, 0)
        )
        dra_n, slice_name = dra.get(name, (0, ""))
        seen[name] = {"devicePlugin": dp, "dra": dra_n}
        if dp and dra_n:
            return _fail(
                f"node {name} advertises GPUs through both the device plugin (allocatable {DEVICE_PLUGIN_RESOURCE}={dp}) "
                f"and DRA (ResourceSlice {slice_name}: {dra_n} {DRA_GPU_DRIVER} devices)",
                node,
                f"status.allocatable.{DEVICE_PLUGIN_RESOURCE}",
                nodes=seen,
            )
        if expected == "dra" and dp:
            return _fail(
                f"node {name} advertises {DEVICE_PLUGIN_RESOURCE}={dp} through a device plugin; the plan's advertiser is DRA",
                node,
                f"status.allocatable.{DEVICE_PLUGIN_RESOURCE}",
                nodes=seen,
            )
        if expected != "dra" and dra_n:
            return _fail(
                f"node {name} advertises {dra_n} GPUs through DRA (ResourceSlice {slice_name}); the plan's advertiser "
                f"is the {expected.replace('-', ' ')}",
                f"resource.k8s.io/v1/ResourceSlice/{slice_name}",
                "spec.devices",
                nodes=seen,
            )
        if not (dra_n if expected == "dra" else dp):
            where = (
                (
                    f"resource.k8s.io/v1/ResourceSlice (driver {DRA_GPU_DRIVER}, node {name})",
                    "spec.devices",
                )
                if expected == "dra"
                else (_ref(node), f"status.allocatable.{DEVICE_PLUGIN_RESOURCE}")
            )
            return _fail(
                f"node {name} advertises no GPU through the {expected.replace('-', ' ')}",
                where[0],
                where[1],
                nodes=seen,
            )
    return _ok(
        f"{len(nodes)} node(s) advertise through the {expected.replace('-', ' ')} only",
        nodes[0],
        "spec.devices" if expected == "dra" else f"status.allocatable.{DEVICE_PLUGIN_RESOURCE}",
        nodes=seen,
    )


def _gpu_count_result(snap: Snapshot, group: GpuNodeGroup, expected: str | None) -> CheckResult:
    """The ``gpu-count`` check of ``group``: each node advertises the GPUs it has."""
    if expected is None:
        return CheckResult("skip", "the plan installs no GPU advertiser")
    dra = _dra_gpus(snap)
    nodes = _group_nodes(snap, group)
    if not nodes:
        return _fail(f"no node of {group.describe()}", "v1/Node", "metadata.labels")
    total, seen = 0, {}
    for node in nodes:
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        want = (
            group.gpus_per_node
            if group.gpus_per_node is not None
            else _int(labels.get(GPU_COUNT_LABEL)) or None
        )
        if expected == "dra":
            have, fld, obj = (
                dra.get(name, (0, ""))[0],
                "spec.devices",
                f"resource.k8s.io/v1/ResourceSlice/{dra.get(name, (0, '?'))[1]}",
            )
        else:
            have = _int(
                ((node.get("status") or {}).get("allocatable") or {}).get(DEVICE_PLUGIN_RESOURCE, 0)
            )
            fld, obj = f"status.allocatable.{DEVICE_PLUGIN_RESOURCE}", _ref(node)
        seen[name] = {"advertised": have, "expected": want}
        total += have
        if want is None:
            if have < 1:
                return _fail(f"node {name} advertises no GPU", obj, fld, nodes=seen)
        elif have < want:
            why = (
                f"its VM size {group.vm_size} has {want}"
                if group.vm_size
                else f"GPU Feature Discovery counted {want} ({GPU_COUNT_LABEL})"
            )
            return _fail(f"node {name} advertises {have} GPU(s); {why}", obj, fld, nodes=seen)
    planned = (
        f" (= {group.gpus_per_node} x {group.node_count} planned)"
        if group.gpus_per_node and group.node_count
        else ""
    )
    return _ok(
        f"{total} GPUs on {len(nodes)} node(s){planned}",
        nodes[0],
        f"status.allocatable.{DEVICE_PLUGIN_RESOURCE}" if expected != "dra" else "spec.devices",
        nodes=seen,
        total=total,
    )


def _gpu_checks(plan: RuntimePlan) -> list[Check]:
    checks: list[Check] = []
    expected = advertiser(plan)
    for group in gpu_node_groups(plan.cluster):
        inputs = {
            "group": group.name,
            "selector": dict(group.selector),
            "exclude": list(group.exclude),
            "nodeCount": group.node_count,
            "gpusPerNode": group.gpus_per_node,
            "vmSize": group.vm_size,
            "advertiser": expected,
        }

        def nodes_run(snap: Snapshot, group=group) -> CheckResult:
            return _gpu_nodes_result(snap, group)

        def advertiser_run(snap: Snapshot, group=group) -> CheckResult:
            return _gpu_advertiser_result(snap, group, expected)

        def count_run(snap: Snapshot, group=group) -> CheckResult:
            return _gpu_count_result(snap, group, expected)

        component = {"dra": "nvidia-dra-driver-gpu", "device-plugin": "gpu-operator"}.get(
            expected or "", "-"
        )
        checks += [
            Check(
                id=f"gpu-nodes/{group.name}",
                name="gpu-nodes",
                component="-",
                inputs=inputs,
                run=nodes_run,
                proves=f"{group.describe()} has {group.node_count if group.node_count is not None else 'at least one'} Ready node(s)",
            ),
            Check(
                id=f"gpu-advertiser/{group.name}",
                name="gpu-advertiser",
                component=component,
                inputs=inputs,
                run=advertiser_run,
                proves=f"every node of {group.describe()} advertises GPUs through the {expected or 'no'} advertiser only",
            ),
            Check(
                id=f"gpu-count/{group.name}",
                name="gpu-count",
                component=component,
                inputs=inputs,
                run=count_run,
                proves=f"every node of {group.describe()} advertises "
                + (f"{group.gpus_per_node} GPUs" if group.gpus_per_node else "the GPUs it has"),
            ),
        ]
    return checks


# --------------------------------------------------------------------------- GPU Operator, DRA


def _runtime_class_check(plan: RuntimePlan) -> list[Check]:
    gpu = plan.components.get("gpu-operator")
    if gpu is None:
        return []
    name = str(get_path(gpu.values, "operator.runtimeClass") or "nvidia")

    def run(snap: Snapshot) -> CheckResult:
        rc = snap.get("node.k8s.io/v1", "RuntimeClass", None, name)
        if rc is None:
            return _fail(
                f"RuntimeClass {name} does not exist (pods naming it cannot start)",
                f"node.k8s.io/v1/RuntimeClass/{name}",
                "metadata.name",
            )
        if rc.get("handler") != name:
            return _fail(
                f"RuntimeClass {name} has handler {rc.get('handler')!r}, not {name!r}",
                rc,
                "handler",
            )
        return _ok(f"RuntimeClass {name} with handler {name}", rc, "handler")

    return [
        Check(
            id=f"runtime-class/{name}",
            name="runtime-class",
            component="gpu-operator",
            inputs={"runtimeClass": name, "from": "gpu-operator operator.runtimeClass"},
            run=run,
            proves=f"RuntimeClass {name} exists with handler {name}",
        )
    ]


def _driver_checks(plan: RuntimePlan) -> list[Check]:
    checks: list[Check] = []
    gpu = plan.components.get("gpu-operator")
    version = get_path(gpu.values, "driver.version") if gpu is not None else None
    if (
        gpu is not None
        and get_path(gpu.values, "driver.enabled") is True
        and isinstance(version, str)
        and version
    ):
        groups = gpu_node_groups(plan.cluster)

        def run(snap: Snapshot) -> CheckResult:
            nodes = [n for g in groups for n in _group_nodes(snap, g)]
            if not nodes:
                return _fail("no GPU node", "v1/Node", "metadata.labels")
            for node in nodes:
                have = (node["metadata"].get("labels") or {}).get(DRIVER_VERSION_LABEL)
                if have != version:
                    runs = (
                        f"runs driver {have!r}"
                        if have is not None
                        else f"has no {DRIVER_VERSION_LABEL} label (no driver the GPU Operator "
                        "manages has started there)"
                    )
                    return _fail(
                        f"node {node['metadata']['name']} {runs}, the plan pins {version}",
                        node,
                        f"metadata.labels.{DRIVER_VERSION_LABEL}",
                        driver=have,
                    )
            return _ok(
                f"{len(nodes)} GPU node{'' if len(nodes) == 1 else 's'} run{'s' if len(nodes) == 1 else ''} driver {version}",
                nodes[0],
                f"metadata.labels.{DRIVER_VERSION_LABEL}",
            )

        checks.append(
            Check(
                id="driver-version",
                name="driver-version",
                component="gpu-operator",
                run=run,
                inputs={"driver.version": version, "label": DRIVER_VERSION_LABEL},
                proves=f"every GPU node runs the driver the plan pins ({version})",
            )
        )
    dra = plan.components.get("nvidia-dra-driver-gpu")
    identity = (
        get_path(dra.values, f"kubeletPlugin.podAnnotations.{DRIVER_IDENTITY_ANNOTATION}")
        if dra is not None
        else None
    )
    if dra is not None and isinstance(identity, str) and identity and not dra.variable_hashes:
        from gpucluster.charts.gate_helpers import dra_kubelet_plugin_name

        ds_name, ns = dra_kubelet_plugin_name(dra.values), dra.ref.namespace

        def identity_run(snap: Snapshot) -> CheckResult:
            ds = snap.get("apps/v1", "DaemonSet", ns, ds_name)
            if ds is None:
                return _fail(
                    f"DaemonSet {ns}/{ds_name} does not exist",
                    f"apps/v1/DaemonSet/{ns}/{ds_name}",
                    "metadata.name",
                )
            fld = f"spec.template.metadata.annotations.{DRIVER_IDENTITY_ANNOTATION}"
            have = (
                (((ds.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
                    "annotations"
                )
                or {}
            ).get(DRIVER_IDENTITY_ANNOTATION)
            if have != identity:
                return _fail(
                    f"the kubelet plugin's pod template has driver identity {have!r}, the plan's is {identity[:12]}...",
                    ds,
                    fld,
                )
            uid = (ds.get("metadata") or {}).get("uid")
            for pod in snap.list("v1", "Pod", ns, {}):
                owners = [
                    o
                    for o in (pod.get("metadata") or {}).get("ownerReferences") or []
                    if o.get("uid") == uid or o.get("name") == ds_name
                ]
                if (
                    owners
                    and ((pod.get("metadata") or {}).get("annotations") or {}).get(
                        DRIVER_IDENTITY_ANNOTATION
                    )
                    != identity
                ):
                    return _fail(
                        f"pod {pod['metadata']['name']} runs with another driver identity (not re-rolled with the driver)",
                        pod,
                        f"metadata.annotations.{DRIVER_IDENTITY_ANNOTATION}",
                    )
            return _ok("the kubelet plugin runs with the plan's driver identity", ds, fld)

        checks.append(
            Check(
                id="driver-identity",
                name="driver-identity",
                component="nvidia-dra-driver-gpu",
                run=identity_run,
                inputs={"daemonSet": f"{ns}/{ds_name}", "identity": identity},
                proves="the DRA kubelet plugin was rolled with the plan's driver",
            )
        )
    return checks


# --------------------------------------------------------------------------- manifest charts


def _manifest_objects(plan: RuntimePlan) -> list[tuple[str, dict[str, Any]]]:
    """``(component, object)`` of every object of the plan's manifest charts (pre and post)."""
    from gpucluster.lint.render import load_documents

    out = []
    for node in plan.nodes:
        if node.kind not in ("manifests", "pre-manifests") or node.local_chart is None:
            continue
        for path, text in sorted(node.local_chart.files.items()):
            if not path.startswith("templates/"):
                continue
            for doc in load_documents(text):
                if (
                    isinstance(doc, dict)
                    and doc.get("kind")
                    and not ((doc.get("metadata") or {}).get("annotations") or {}).get(
                        "helm.sh/hook"
                    )
                ):
                    doc = json.loads(json.dumps(doc))
                    doc.setdefault("metadata", {})
                    out.append((node.component, doc))
    return out


def _component_namespace(plan: RuntimePlan, component: str) -> str:
    """The namespace of ``component``'s releases; '' for a release of no catalog component (the
    AKS ``scheduler-profiles`` release, whose object is cluster-scoped)."""
    found = plan.components.get(component)
    return found.ref.namespace if found is not None else ""


def _manifest_checks(plan: RuntimePlan) -> list[Check]:
    checks: list[Check] = []
    for component, obj in _manifest_objects(plan):
        kind, meta = obj["kind"], obj["metadata"]
        name, ns, api = (
            meta.get("name"),
            meta.get("namespace") or _component_namespace(plan, component),
            obj["apiVersion"],
        )
        if kind in WORKLOAD_KINDS:

            def run(snap: Snapshot, api=api, kind=kind, name=name, ns=ns, obj=obj) -> CheckResult:
                live = snap.get(api, kind, ns, name)
                if live is None:
                    return _fail(
                        f"{kind} {ns}/{name} does not exist",
                        f"{api}/{kind}/{ns}/{name}",
                        "metadata.name",
                    )
                status = live.get("status") or {}
                if kind == "DaemonSet":
                    template = ((live.get("spec") or {}).get("template") or {}).get("spec") or {}
                    fits = [
                        n["metadata"]["name"]
                        for n in snap.objects("v1", "Node")
                        if pod_fits(n, template)
                    ]
                    desired, ready = (
                        _int(status.get("desiredNumberScheduled")),
                        _int(status.get("numberReady")),
                    )
                    if desired < len(fits):
                        return _fail(
                            f"{desired} pod(s) desired, but its pod spec admits {len(fits)} node(s)",
                            live,
                            "status.desiredNumberScheduled",
                            fits=fits,
                            desired=desired,
                        )
                    if ready < desired or desired == 0 and fits:
                        return _fail(
                            f"{ready} of {desired} pod(s) ready",
                            live,
                            "status.numberReady",
                            desired=desired,
                            ready=ready,
                        )
                    return _ok(
                        f"{ready} of {desired} pod(s) ready on the {len(fits)} node(s) it admits",
                        live,
                        "status.numberReady",
                    )
                want = _int((live.get("spec") or {}).get("replicas", 1))
                have = _int(status.get("readyReplicas"))
                if have < want:
                    return _fail(f"{have} of {want} replica(s) ready", live, "status.readyReplicas")
                return _ok(f"{have} of {want} replica(s) ready", live, "status.readyReplicas")

            checks.append(
                Check(
                    id=f"manifest-rollout/{ns}/{name}",
                    name="manifest-rollout",
                    component=component,
                    run=run,
                    inputs={"object": f"{api}/{kind}/{ns}/{name}"},
                    proves=f"{kind} {ns}/{name} runs on every node it admits",
                )
            )
        elif "." in api.split("/")[0] and "/" in api:

            def run_obj(
                snap: Snapshot, api=api, kind=kind, name=name, ns=ns, obj=obj
            ) -> CheckResult:
                scope = snap.scope(api, kind)
                if scope is None:
                    return _fail(
                        f"the cluster does not serve {kind} in {api}", f"{api}/{kind}", "apiVersion"
                    )
                live = snap.get(api, kind, ns if scope == "Namespaced" else None, name)
                where = "/".join(
                    p for p in (api, kind, ns if scope == "Namespaced" else "", name) if p
                )
                if live is None:
                    return _fail(f"{kind} {name} does not exist", where, "metadata.name")
                if (
                    kind == "SchedulerConfiguration"
                ):  # AKS scheduler profiles: the planned rawConfig
                    return _scheduler_configuration(live, obj)
                return _ok("exists", live, "metadata.name")

            checks.append(
                Check(
                    id=f"manifest-object/{api}/{kind}/{ns}/{name}",
                    name="manifest-object",
                    component=component,
                    run=run_obj,
                    inputs={"object": f"{api}/{kind}/{name}", "namespace": ns},
                    proves=f"{kind} {name} exists",
                )
            )
    checks += _rail_checks(plan)
    return checks


def _scheduler_configuration(live: Mapping[str, Any], planned: Mapping[str, Any]) -> CheckResult:
    """AKS ``SchedulerConfiguration``: ``pass`` when the live ``spec.rawConfig`` parses to the
    planned one (docs/scheduler-profiles.md), ``fail`` when it differs or is not YAML."""
    import yaml

    want = yaml.safe_load(planned["spec"]["rawConfig"])
    text = (live.get("spec") or {}).get("rawConfig")
    try:
        have = yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        have = None
    if have != want:
        return _fail(
            "spec.rawConfig differs from the planned scheduler profiles (edited outside gpucluster, or the "
            "release has not been applied)",
            live,
            "spec.rawConfig",
        )
    return _ok("spec.rawConfig holds the planned scheduler profiles", live, "spec.rawConfig")


def _rail_checks(plan: RuntimePlan) -> list[Check]:
    objs = _manifest_objects(plan)
    checks: list[Check] = []
    net = plan.components.get("network-operator")
    prefix = (
        str(get_path(net.values, SRIOV_RESOURCE_PREFIX_PATH) or SRIOV_RESOURCE_PREFIX_DEFAULT)
        if net is not None
        else SRIOV_RESOURCE_PREFIX_DEFAULT
    )
    for component, obj in objs:
        meta = obj["metadata"]
        ns = meta.get("namespace") or _component_namespace(plan, component)
        if obj["kind"] == "SriovIBNetwork":
            try:
                pool = json.loads(str((obj.get("spec") or {}).get("ipam") or "{}")).get("poolName")
            except ValueError:
                pool = None
            if not pool:
                continue

            def run(snap: Snapshot, pool=pool, ns=ns, net_name=meta["name"]) -> CheckResult:
                found = snap.get("nv-ipam.nvidia.com/v1alpha1", "IPPool", ns, pool)
                if found is None:
                    return _fail(
                        f"rail network {net_name} has no IPPool {ns}/{pool} (its pods get a VF and no address)",
                        f"nv-ipam.nvidia.com/v1alpha1/IPPool/{ns}/{pool}",
                        "metadata.name",
                        network=net_name,
                    )
                return _ok(
                    f"IPPool {pool} of rail network {net_name} exists", found, "metadata.name"
                )

            checks.append(
                Check(
                    id=f"rail-ippool/{meta['name']}",
                    name="rail-ippool",
                    component=component,
                    run=run,
                    inputs={"network": meta["name"], "ipPool": pool, "namespace": ns},
                    proves=f"rail network {meta['name']} has its IPPool {pool}",
                )
            )
        elif obj["kind"] == "SriovNetworkNodePolicy":
            spec = obj.get("spec") or {}
            resource = f"{prefix}/{spec.get('resourceName')}"
            selector = dict(spec.get("nodeSelector") or {})

            def res_run(
                snap: Snapshot, resource=resource, selector=selector, policy=meta["name"]
            ) -> CheckResult:
                nodes = [
                    n
                    for n in snap.objects("v1", "Node")
                    if all(
                        ((n["metadata"].get("labels") or {}).get(k) == v)
                        for k, v in selector.items()
                    )
                ]
                if not nodes:
                    return _fail(
                        f"no node matches the nodeSelector of SriovNetworkNodePolicy {policy}",
                        "v1/Node",
                        "metadata.labels",
                    )
                for node in nodes:
                    have = _int(
                        ((node.get("status") or {}).get("allocatable") or {}).get(resource, 0)
                    )
                    if have < 1:
                        return _fail(
                            f"node {node['metadata']['name']} advertises no {resource} VF",
                            node,
                            f"status.allocatable.{resource}",
                        )
                return _ok(
                    f"{len(nodes)} node(s) advertise {resource}",
                    nodes[0],
                    f"status.allocatable.{resource}",
                )

            checks.append(
                Check(
                    id=f"rail-resource/{meta['name']}",
                    name="rail-resource",
                    component=component,
                    run=res_run,
                    inputs={"policy": meta["name"], "resource": resource, "nodeSelector": selector},
                    proves=f"the nodes of SriovNetworkNodePolicy {meta['name']} advertise {resource}",
                )
            )
    return checks


# --------------------------------------------------------------------------- placement


def _placement_check(plan: RuntimePlan) -> list[Check]:
    namespaces = sorted({c.ref.namespace for c in plan.components.values() if c.ref.namespace})

    def run(snap: Snapshot) -> CheckResult:
        nodes = {n["metadata"]["name"]: n for n in snap.objects("v1", "Node")}
        count = 0
        for ns in namespaces:
            for pod in snap.list("v1", "Pod", ns, {}):
                node_name = (pod.get("spec") or {}).get("nodeName")
                if not node_name or (pod.get("status") or {}).get("phase") in (
                    "Succeeded",
                    "Failed",
                ):
                    continue
                count += 1
                node = nodes.get(node_name)
                if node is None:
                    return _fail(
                        f"pod {ns}/{pod['metadata']['name']} runs on node {node_name}, which does not exist",
                        pod,
                        "spec.nodeName",
                    )
                if not pod_fits(node, pod.get("spec") or {}):
                    return _fail(
                        f"pod {ns}/{pod['metadata']['name']} runs on node {node_name}, which its node selector, required "
                        "node affinity or tolerations do not admit (labels or taints changed under it)",
                        pod,
                        "spec.nodeName",
                        node=node_name,
                    )
        return _ok(f"{count} running pod(s) on nodes they admit", "", "spec.nodeName", pods=count)

    return [
        Check(
            id="placement",
            name="placement",
            component="-",
            run=run,
            inputs={"namespaces": namespaces},
            proves="every pod of the stack runs on a node its scheduling constraints admit",
        )
    ]


# --------------------------------------------------------------------------- all


def derive_checks(plan: RuntimePlan) -> list[Check]:
    """Every check of ``plan``, in a stable order (AICR health checks in recipe order, gates, GPU
    nodes, GPU Operator and DRA, manifests and rails, placement)."""
    checks: list[Check] = []
    for ref in plan.recipe.component_refs:
        if ref.name in plan.components:
            path = _aicr_file(ref.name)
            if path is not None:
                checks.append(_aicr_check(plan, ref.name, path.read_text(encoding="utf-8")))
    checks += [_gate_check(g) for g in plan.gates]
    checks += _gpu_checks(plan)
    checks += _runtime_class_check(plan)
    checks += _driver_checks(plan)
    checks += _manifest_checks(plan)
    checks += _placement_check(plan)
    seen: set[str] = set()
    unique = []
    for c in checks:
        if c.id not in seen:
            seen.add(c.id)
            unique.append(c)
    return unique


def run_checks(checks: Sequence[Check], snap: Snapshot) -> list[tuple[Check, CheckResult]]:
    """Each check's result; a check that raises is reported ``fail`` with the error (never lost)."""
    out = []
    for check in checks:
        try:
            result = check.run(snap)
        except Exception as exc:  # noqa: BLE001 - a broken object must not hide the other checks
            result = CheckResult("fail", f"could not evaluate: {type(exc).__name__}: {exc}")
        out.append((check, result))
    return out


def read_plan(plan: RuntimePlan):
    """What a snapshot of ``plan``'s cluster must hold for :func:`derive_checks`: the namespaces
    of its components, gates, manifests and AICR checks, and every custom kind they name."""
    from gpucluster.live.snapshot import BUILTIN_KINDS, NEVER_READ, ReadPlan

    namespaces = {c.ref.namespace for c in plan.components.values() if c.ref.namespace}
    kinds: set[tuple[str, str]] = set()
    for ref in plan.recipe.component_refs:
        path = _aicr_file(ref.name) if ref.name in plan.components else None
        for test in (
            chainsaw.parse_tests(path.read_text(encoding="utf-8"), file=ref.name)
            if path is not None
            else []
        ):
            for op in test.operations:
                if isinstance(op.resource, Mapping) and isinstance(op.resource.get("kind"), str):
                    kinds.add((str(op.resource.get("apiVersion")), op.resource["kind"]))
                    ns = (op.resource.get("metadata") or {}).get("namespace")
                    if isinstance(ns, str) and ns:
                        namespaces.add(ns)
    for gate in plan.gates:
        kinds.add((gate.api_version or "apps/v1", gate.kind_name))
        if gate.namespace:
            namespaces.add(gate.namespace)
    for component, obj in _manifest_objects(plan):
        kinds.add((obj["apiVersion"], obj["kind"]))
        ns = (obj.get("metadata") or {}).get("namespace") or _component_namespace(plan, component)
        if ns:
            namespaces.add(ns)
        if obj["kind"] == "SriovIBNetwork":
            kinds.add(("nv-ipam.nvidia.com/v1alpha1", "IPPool"))
    custom = sorted(
        k
        for k in kinds
        if k not in BUILTIN_KINDS and k not in NEVER_READ and "." in k[0].split("/")[0]
    )
    return ReadPlan(namespaces=tuple(sorted(n for n in namespaces if n)), custom=tuple(custom))

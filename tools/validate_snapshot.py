"""Make the snapshot of a healthy cluster of a plan: the objects its releases render (real Helm
renders of the reference charts) plus what a live cluster writes (nodes, status, pods, the objects
operators create). Deterministic: the same plan and charts give the same bytes.

    python tools/validate_snapshot.py [--charts DIR] [--config FILE] [--out FILE]

With no arguments it writes ``examples/validate/healthy-default.json``: the built-in example
cluster (the embedded default plan), its GPU pool at its node count, rendered with
``../shared/reference/charts``. ``tests/test_validate_fixtures.py`` regenerates it and compares
bytes. The functions are used by the tests to make healthy snapshots of other plans and, from
them, the fault snapshots.

What a live cluster writes, and the source of each shape:

* Nodes of every pool (AKS names ``aks-<pool>-<id>-vmss<n>``, labels AKS sets:
  ``kubernetes.azure.com/agentpool``, ``node.kubernetes.io/instance-type``,
  ``kubernetes.azure.com/accelerator: nvidia`` on GPU nodes; NFD's PCI vendor labels
  ``pci-10de.present`` (NVIDIA) and, on ND sizes, ``pci-15b3.present`` (ConnectX); GPU Feature
  Discovery's ``nvidia.com/gpu.count``/``gpu.product`` and, with an operator-installed driver,
  ``nvidia.com/cuda.driver-version.full``), allocatable ``nvidia.com/gpu`` where the device plugin
  advertises, ``resource.k8s.io/v1`` ResourceSlices of driver ``gpu.nvidia.com`` where DRA does
  (NVIDIA DRA driver for GPUs: one device per GPU, attribute ``type: gpu``);
* status of Deployments, DaemonSets (desired = the nodes the pod template fits, :func:`pod_fits`),
  StatefulSets and one Running, Ready pod per replica / node;
* CRDs Established, ClusterPolicy and NicClusterPolicy ``status.state: ready``, the
  ``NodeWright`` mirror the nodewright operator (v0.18+) writes for each ``Skyhook`` with
  ``status.status: complete`` (AICR nodewright-customizations check), Prometheus and Alertmanager
  ``Available`` with the StatefulSets the Prometheus operator creates, the RuntimeClass the GPU
  Operator creates (ClusterPolicy ``spec.operator.runtimeClass``, handler of the same name);
* NVSentinel's labeler Deployment and driver-labelled DaemonSets, synthesized: its chart is not
  available offline (charts/SOURCES.md), names from AICR's nvsentinel health check.
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import json
import sys
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpucluster.live.nodes import GPU_COUNT_LABEL, pod_fits  # noqa: E402
from gpucluster.live.snapshot import (  # noqa: E402
    EVERY_NAMESPACE_KINDS,
    dump_snapshot,
    snapshot_document,
)

DEFAULT_OUT = REPO / "examples" / "validate" / "healthy-default.json"
TIME = "2026-01-01T00:00:00Z"
KUBELET = "v1.34.1"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
ALLOW_MISSING = (
    "nvsentinel",
    "grafana",
    "kube-state-metrics",
    "prometheus-node-exporter",
    "dynamo-platform",
)
_NS = uuid.UUID("7d3b1c2e-9f3a-4c55-9d0b-3f1f6c1a2b4c")

READ_KINDS = {
    ("v1", "Namespace"),
    ("v1", "Node"),
    ("v1", "Pod"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("node.k8s.io/v1", "RuntimeClass"),
    ("resource.k8s.io/v1", "ResourceSlice"),
    ("resource.k8s.io/v1", "DeviceClass"),
}


def uid(*parts: str) -> str:
    return str(uuid.uuid5(_NS, "/".join(parts)))


def _meta(
    kind: str,
    name: str,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": uid(kind, namespace or "", name),
        "creationTimestamp": TIME,
        "resourceVersion": "1",
        "generation": 1,
    }
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(sorted(labels.items()))
    meta.update(extra)
    return meta


# --------------------------------------------------------------------------- nodes


def pool_nodes(plan) -> list[dict[str, Any]]:
    """Nodes of every pool of ``plan.cluster`` at its node count (AKS shapes)."""
    cluster = plan.cluster
    dp = device_plugin_advertises(plan)
    driver_version = operator_driver_version(plan)
    nodes = []
    for pool in cluster.pools:
        for n in range(pool.node_count):
            name = f"aks-{pool.name}-12345678-vmss{n:06d}"
            labels = {
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": pool.vm_size,
                "agentpool": pool.name,
                "topology.kubernetes.io/region": cluster.region or "",
                **pool.node_selector,
                **pool.labels,
            }
            capacity = {
                "cpu": "96" if pool.gpu else "8",
                "memory": "1900Gi" if pool.gpu else "32Gi",
                "pods": "110",
            }
            if pool.gpu:
                gpus = pool.gpus_per_node or 1
                labels.update(
                    {
                        GPU_COUNT_LABEL: str(gpus),
                        "nvidia.com/gpu.product": GPU_PRODUCT,
                        "nvidia.com/gpu.present": "true",
                        "kubernetes.azure.com/accelerator": "nvidia",
                        "feature.node.kubernetes.io/pci-10de.present": "true",
                    }
                )
                if pool.vm_size.startswith(
                    "Standard_ND"
                ):  # ND sizes carry ConnectX InfiniBand NICs (NFD: PCI vendor 15b3)
                    labels["feature.node.kubernetes.io/pci-15b3.present"] = "true"
                if driver_version:
                    labels["nvidia.com/cuda.driver-version.full"] = driver_version
                if dp:
                    capacity["nvidia.com/gpu"] = str(gpus)
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": _meta("Node", name, labels=labels),
                    "spec": {
                        "providerID": f"azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/"
                        f"mc_{cluster.name}/providers/Microsoft.Compute/virtualMachineScaleSets/"
                        f"aks-{pool.name}-12345678-vmss/virtualMachines/{n}",
                        **(
                            {
                                "taints": [
                                    {"key": t.key, "value": t.value, "effect": t.effect}
                                    for t in pool.taints
                                ]
                            }
                            if pool.taints
                            else {}
                        ),
                    },
                    "status": {
                        "capacity": dict(capacity),
                        "allocatable": dict(capacity),
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True",
                                "reason": "KubeletReady",
                                "lastHeartbeatTime": TIME,
                                "lastTransitionTime": TIME,
                            }
                        ],
                        "nodeInfo": {
                            "kubeletVersion": KUBELET,
                            "kubeProxyVersion": KUBELET,
                            "osImage": "Ubuntu 24.04 LTS",
                            "containerRuntimeVersion": "containerd://2.0.0",
                            "kernelVersion": "6.8.0",
                            "operatingSystem": "linux",
                            "architecture": "amd64",
                            "machineID": uid("machine", name),
                            "systemUUID": uid("system", name),
                            "bootID": uid("boot", name),
                        },
                    },
                }
            )
    return nodes


def existing_node(
    name: str,
    labels: Mapping[str, str],
    *,
    provider_id: str,
    allocatable: Mapping[str, str] | None = None,
    arch: str = "arm64",
    taints: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A node of an existing cluster (NVKE, OKE: gpucluster does not create its pools)."""
    capacity = {"cpu": "144", "memory": "880Gi", "pods": "110", **dict(allocatable or {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(
            "Node",
            name,
            labels={
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": arch,
                "kubernetes.io/hostname": name,
                **labels,
            },
        ),
        "spec": {
            "providerID": provider_id,
            **({"taints": [dict(t) for t in taints]} if taints else {}),
        },
        "status": {
            "capacity": dict(capacity),
            "allocatable": dict(capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": TIME,
                    "lastTransitionTime": TIME,
                }
            ],
            "nodeInfo": {
                "kubeletVersion": KUBELET,
                "kubeProxyVersion": KUBELET,
                "osImage": "Ubuntu 24.04 LTS",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kernelVersion": "6.8.0-nvidia-64k",
                "operatingSystem": "linux",
                "architecture": arch,
                "machineID": uid("machine", name),
                "systemUUID": uid("system", name),
                "bootID": uid("boot", name),
            },
        },
    }


def device_plugin_advertises(plan) -> bool:
    gpu = plan.components.get("gpu-operator")
    if plan.recipe.advertiser == "external":
        return True
    return gpu is not None and bool((gpu.values.get("devicePlugin") or {}).get("enabled", True))


def dra_advertises(plan) -> bool:
    dra = plan.components.get("nvidia-dra-driver-gpu")
    return dra is not None and bool(
        ((dra.values.get("resources") or {}).get("gpus") or {}).get("enabled", False)
    )


def operator_driver_version(plan) -> str | None:
    gpu = plan.components.get("gpu-operator")
    driver = (gpu.values.get("driver") or {}) if gpu else {}
    return str(driver["version"]) if driver.get("enabled") and driver.get("version") else None


def gpu_resource_slices(nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One ResourceSlice of driver ``gpu.nvidia.com`` per GPU node, one device per GPU."""
    out = []
    for node in nodes:
        labels = node["metadata"].get("labels") or {}
        if GPU_COUNT_LABEL not in labels:
            continue
        name = node["metadata"]["name"]
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": _meta("ResourceSlice", f"{name}-gpu.nvidia.com-abcde"),
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": f"gpu-{i}",
                            "attributes": {
                                "type": {"string": "gpu"},
                                "index": {"int": i},
                                "productName": {"string": GPU_PRODUCT},
                            },
                        }
                        for i in range(int(labels[GPU_COUNT_LABEL]))
                    ],
                },
            }
        )
    return out


# --------------------------------------------------------------------------- workloads


def _pod(
    owner: Mapping[str, Any], template: Mapping[str, Any], name: str, node: str
) -> dict[str, Any]:
    spec = copy.deepcopy(template.get("spec") or {})
    spec["nodeName"] = node
    meta = template.get("metadata") or {}
    owner_ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    statuses = [
        {
            "name": c["name"],
            "ready": True,
            "restartCount": 0,
            "started": True,
            "image": c.get("image", ""),
            "imageID": "",
            "containerID": f"containerd://{uid('c', name, c['name']).replace('-', '')}",
            "state": {"running": {"startedAt": TIME}},
        }
        for c in spec.get("containers") or []
    ]
    init = [
        {
            "name": c["name"],
            "ready": True,
            "restartCount": 0,
            "image": c.get("image", ""),
            "imageID": "",
            "state": {
                "terminated": {
                    "exitCode": 0,
                    "reason": "Completed",
                    "startedAt": TIME,
                    "finishedAt": TIME,
                }
            },
        }
        for c in spec.get("initContainers") or []
    ]
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **_meta("Pod", name, owner["metadata"]["namespace"], labels=meta.get("labels")),
            **({"annotations": dict(meta["annotations"])} if meta.get("annotations") else {}),
            "ownerReferences": [owner_ref],
        },
        "spec": spec,
        "status": {
            "phase": "Running",
            "podIP": "10.244.0.10",
            "hostIP": "10.224.0.4",
            "startTime": TIME,
            "qosClass": "Burstable",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": TIME}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": statuses,
            **({"initContainerStatuses": init} if init else {}),
        },
    }
    pod["metadata"].pop("generation", None)
    return pod


def _fitting(nodes: Sequence[Mapping[str, Any]], template: Mapping[str, Any]) -> list[str]:
    return [n["metadata"]["name"] for n in nodes if pod_fits(n, template.get("spec") or {})]


def workload_status(
    obj: dict[str, Any], nodes: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Give a Deployment/DaemonSet/StatefulSet a healthy status; returns its pods."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    template = (obj.get("spec") or {}).get("template") or {}
    obj["metadata"].setdefault("uid", uid(kind, obj["metadata"].get("namespace", ""), name))
    obj["metadata"].setdefault("generation", 1)
    obj["metadata"].setdefault("creationTimestamp", TIME)
    if kind == "DaemonSet":
        where = _fitting(nodes, template)
        n = len(where)
        obj["status"] = {
            "currentNumberScheduled": n,
            "desiredNumberScheduled": n,
            "numberAvailable": n,
            "numberMisscheduled": 0,
            "numberReady": n,
            "updatedNumberScheduled": n,
            "observedGeneration": 1,
        }
        return [_pod(obj, template, f"{name}-{uid('p', name, node)[:5]}", node) for node in where]
    replicas = (obj.get("spec") or {}).get("replicas", 1)
    where = _fitting(nodes, template) or [nodes[0]["metadata"]["name"]]
    if kind == "Deployment":
        obj["status"] = {
            "replicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "updatedReplicas": replicas,
            "observedGeneration": 1,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "MinimumReplicasAvailable",
                    "lastTransitionTime": TIME,
                    "lastUpdateTime": TIME,
                },
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "NewReplicaSetAvailable",
                    "lastTransitionTime": TIME,
                    "lastUpdateTime": TIME,
                },
            ],
        }
        suffix = uid("rs", name)[:10].replace("-", "a")
        return [
            _pod(
                obj,
                template,
                f"{name}-{suffix}-{uid('p', name, str(i))[:5]}",
                where[i % len(where)],
            )
            for i in range(replicas)
        ]
    obj["status"] = {
        "replicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "currentReplicas": replicas,
        "updatedReplicas": replicas,
        "observedGeneration": 1,
    }
    return [_pod(obj, template, f"{name}-{i}", where[i % len(where)]) for i in range(replicas)]


def _statefulset(
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    containers: list[dict[str, Any]],
    replicas: int = 1,
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta("StatefulSet", name, namespace, labels=labels),
        "spec": {
            "replicas": replicas,
            "serviceName": f"{name}-operated",
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": {"containers": containers}},
        },
    }


def _crd_status(crd: dict[str, Any]) -> None:
    names = (crd.get("spec") or {}).get("names") or {}
    crd["status"] = {
        "acceptedNames": {
            k: v
            for k, v in names.items()
            if k in ("kind", "plural", "singular", "listKind", "shortNames")
        },
        "storedVersions": [
            v["name"] for v in (crd.get("spec") or {}).get("versions") or [] if v.get("storage")
        ],
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": TIME,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": TIME,
            },
        ],
    }


def _dedupe(objs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for o in objs:
        m = o["metadata"]
        seen.setdefault((o["apiVersion"], o["kind"], m.get("namespace") or "", m["name"]), o)
    return list(seen.values())


def pinned_images(plan, obj: dict[str, Any]) -> None:
    """The DRA driver's images at the pinned chart version: the reference chart (0.5.0-dev, a
    stand-in, charts/SOURCES.md) renders ``v0.5.0``; the pinned chart's appVersion, the image tag
    a live cluster runs, equals the chart version."""
    comp = plan.components.get("nvidia-dra-driver-gpu")
    if (
        comp is None
        or obj.get("kind") not in ("DaemonSet", "Deployment")
        or obj["metadata"].get("namespace") != comp.ref.namespace
    ):
        return
    for c in ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get(
        "containers"
    ) or []:
        image = str(c.get("image", ""))
        if ":" in image.rsplit("/", 1)[-1] and "@" not in image:
            c["image"] = image.rsplit(":", 1)[0] + ":v" + str(comp.ref.version).lstrip("v")


def rendered_objects(releases) -> list[dict[str, Any]]:
    """Every object the releases render (templates and the charts' CRDs)."""
    out = []
    for rel in releases:
        for _path, obj in rel.objects:
            if isinstance(obj, dict) and obj.get("kind"):
                obj = copy.deepcopy(obj)
                if (
                    rel.node.namespace
                    and "namespace" not in obj.get("metadata", {})
                    and _namespaced(obj)
                ):
                    obj["metadata"]["namespace"] = rel.node.namespace
                out.append(_without_generated_secrets(obj))
        for _name, doc in rel.crds:
            if doc.get("kind") == "CustomResourceDefinition":
                out.append(copy.deepcopy(doc))
    return out


def _without_generated_secrets(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with what a chart generates at random on each render made fixed, so that the
    snapshot is the same bytes every time: a Secret's ``data`` values (grafana's chart, for one,
    makes its admin password with ``randAlphaNum 40`` when none is given: kube-prometheus-stack's
    charts/grafana/templates/_helpers.tpl, ``grafana.password``) become a digest of the Secret's
    name and key, and a pod template's ``checksum/secret*`` annotations (the digest of such a
    Secret) a digest of the workload's name. A live cluster's Secret holds other bytes; no check
    of ``validate`` reads them."""
    meta = obj.get("metadata") or {}
    where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    if obj.get("kind") == "Secret" and isinstance(obj.get("data"), dict):
        obj["data"] = {
            key: base64.b64encode(
                hashlib.sha256(f"{where}/{key}".encode()).hexdigest().encode()
            ).decode()
            for key in obj["data"]
        }
    template = (obj.get("spec") or {}).get("template")
    annotations = (
        ((template or {}).get("metadata") or {}).get("annotations")
        if isinstance(template, dict)
        else None
    )
    if isinstance(annotations, dict):
        for key in annotations:
            if key.startswith("checksum/secret"):
                annotations[key] = hashlib.sha256(f"{where}/{key}".encode()).hexdigest()
    return obj


_CLUSTER_KINDS = {
    "Namespace",
    "Node",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "RuntimeClass",
    "ClusterPolicy",
    "NicClusterPolicy",
    "Skyhook",
    "NodeWright",
    "DeviceClass",
    "ResourceSlice",
    "PriorityClass",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "NodeFeatureRule",
    "DeploymentPolicy",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "APIService",
    "StorageClass",
}


def _namespaced(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") not in _CLUSTER_KINDS


def nvsentinel_objects(plan, nodes) -> list[dict[str, Any]]:
    """NVSentinel's workloads the AICR check reads (its chart is not available offline)."""
    comp = plan.components.get("nvsentinel")
    if comp is None:
        return []
    ns = comp.ref.namespace
    gpu_tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    image = "ghcr.io/nvidia/nvsentinel/labeler@sha256:" + "0" * 64

    def workload(kind: str, name: str, spec_extra: dict[str, Any]) -> dict[str, Any]:
        labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": "nvsentinel"}
        pod_spec = {"containers": [{"name": name, "image": image}], **spec_extra}
        spec: dict[str, Any] = {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        }
        if kind == "Deployment":
            spec["replicas"] = 1
        return {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": _meta(kind, name, ns, labels=labels),
            "spec": spec,
        }

    gpu_nodes = {
        "nodeSelector": {"nvsentinel.dgxc.nvidia.com/driver.installed": "true"},
        "tolerations": gpu_tolerations,
    }
    return [
        workload("Deployment", "labeler", {}),
        workload("DaemonSet", "metadata-collector", gpu_nodes),
        workload("DaemonSet", "syslog-health-monitor-regular", gpu_nodes),
    ]


CRD_FOLDERS = (REPO / "tests" / "data" / "crds", REPO.parent / "shared" / "reference" / "crds")
RUNTIME_CRDS = {
    "nodewright-operator": (
        "nodewrights.nodewright.nvidia.com",
    ),  # v0.18+ (the stand-in chart v0.15.1 lacks it)
    "network-operator": (
        "ippools.nv-ipam.nvidia.com",
        "cidrpools.nv-ipam.nvidia.com",
    ),  # created by the operator
}
"""CRDs a live cluster of the plan has that the rendered reference charts do not carry."""


def runtime_crds(plan) -> list[dict[str, Any]]:
    import yaml

    wanted = {
        name for comp, names in RUNTIME_CRDS.items() if comp in plan.components for name in names
    }
    found: dict[str, dict[str, Any]] = {}
    for folder in CRD_FOLDERS:
        for path in sorted(folder.rglob("*.yaml")) if folder.is_dir() else []:
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
                if (
                    isinstance(doc, dict)
                    and doc.get("kind") == "CustomResourceDefinition"
                    and doc["metadata"]["name"] in wanted
                ):
                    found.setdefault(doc["metadata"]["name"], doc)
    return [found[n] for n in sorted(found)]


def dynamo_platform_objects(plan) -> list[dict[str, Any]]:
    """dynamo-platform's operator Deployment and its DynamoComponentDeployment CRD, synthesized:
    the chart is not available offline (charts/SOURCES.md); names from AICR's dynamo-platform
    health check (the chart labels the manager ``app.kubernetes.io/name: dynamo-operator``)."""
    comp = plan.components.get("dynamo-platform")
    if comp is None:
        return []
    ns = comp.ref.namespace
    labels = {
        "app.kubernetes.io/name": "dynamo-operator",
        "app.kubernetes.io/instance": "dynamo-platform",
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(
            "Deployment", "dynamo-platform-dynamo-operator-controller-manager", ns, labels=labels
        ),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "manager",
                            "image": "nvcr.io/nvidia/ai-dynamo/kubernetes-operator@sha256:"
                            + "2" * 64,
                        }
                    ]
                },
            },
        },
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "dynamocomponentdeployments.nvidia.com"},
        "spec": {
            "group": "nvidia.com",
            "scope": "Namespaced",
            "names": {
                "kind": "DynamoComponentDeployment",
                "listKind": "DynamoComponentDeploymentList",
                "plural": "dynamocomponentdeployments",
                "singular": "dynamocomponentdeployment",
            },
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    return [deployment, crd]


def network_operator_objects(plan, nicclusterpolicy: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The multus DaemonSet the Network Operator renders from a NicClusterPolicy's
    ``secondaryNetwork.multus`` (name ``kube-multus-ds``, the policy's node affinity and
    tolerations; Network Operator ``manifests/state-multus-cni``)."""
    comp = plan.components.get("network-operator")
    spec = nicclusterpolicy.get("spec") or {}
    multus = (spec.get("secondaryNetwork") or {}).get("multus")
    if comp is None or not multus:
        return []
    labels = {"app": "multus", "name": "multus"}
    pod_spec: dict[str, Any] = {
        "containers": [
            {
                "name": "kube-multus",
                "image": f"{multus.get('repository')}/{multus.get('image')}:{multus.get('version')}",
            }
        ]
    }
    if spec.get("nodeAffinity"):
        pod_spec["affinity"] = {"nodeAffinity": copy.deepcopy(spec["nodeAffinity"])}
    if spec.get("tolerations"):
        pod_spec["tolerations"] = copy.deepcopy(spec["tolerations"])
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": _meta("DaemonSet", "kube-multus-ds", comp.ref.namespace, labels=labels),
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        }
    ]


def healthy_items(
    plan, releases, nodes: Sequence[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The objects of a healthy cluster of ``plan`` (module docstring); ``nodes`` default to
    :func:`pool_nodes`."""
    nodes = [copy.deepcopy(n) for n in (nodes if nodes is not None else pool_nodes(plan))]
    for node in nodes:
        if "nvsentinel" in plan.components and GPU_COUNT_LABEL in (
            node["metadata"].get("labels") or {}
        ):
            node["metadata"]["labels"]["nvsentinel.dgxc.nvidia.com/driver.installed"] = "true"
    objs = (
        rendered_objects(releases)
        + runtime_crds(plan)
        + nvsentinel_objects(plan, nodes)
        + dynamo_platform_objects(plan)
    )
    items: list[dict[str, Any]] = list(nodes)
    namespaces = {"kube-system"}
    extra: list[dict[str, Any]] = []
    for obj in objs:
        kind = obj["kind"]
        meta = obj.setdefault("metadata", {})
        if meta.get("namespace"):
            namespaces.add(meta["namespace"])
        if kind == "CustomResourceDefinition":
            _crd_status(obj)
        elif kind in ("Deployment", "DaemonSet", "StatefulSet"):
            pinned_images(plan, obj)
            extra += workload_status(obj, nodes)
        elif kind == "ClusterPolicy":
            obj["status"] = {
                "state": "ready",
                "namespace": plan.components["gpu-operator"].ref.namespace,
            }
            rc = str(
                ((obj.get("spec") or {}).get("operator") or {}).get("runtimeClass") or "nvidia"
            )
            extra.append(
                {
                    "apiVersion": "node.k8s.io/v1",
                    "kind": "RuntimeClass",
                    "metadata": _meta("RuntimeClass", rc),
                    "handler": rc,
                }
            )
        elif kind == "NicClusterPolicy":
            obj["status"] = {"state": "ready"}
            for ds in network_operator_objects(plan, obj):
                extra += [ds, *workload_status(ds, nodes)]
        elif kind == "Skyhook":
            obj["status"] = {"status": "complete"}
            mirror = copy.deepcopy(obj)
            mirror["apiVersion"], mirror["kind"] = "nodewright.nvidia.com/v1alpha1", "NodeWright"
            mirror["metadata"]["uid"] = uid("NodeWright", "", meta["name"])
            extra.append(mirror)
        elif kind == "NodeWright":
            obj["status"] = {"status": "complete"}
        elif kind in ("Prometheus", "Alertmanager"):
            obj["status"] = {
                "conditions": [
                    {
                        "type": "Available",
                        "status": "True",
                        "lastTransitionTime": TIME,
                        "observedGeneration": 1,
                    },
                    {
                        "type": "Reconciled",
                        "status": "True",
                        "lastTransitionTime": TIME,
                        "observedGeneration": 1,
                    },
                ],
                "replicas": 1,
                "availableReplicas": 1,
                "updatedReplicas": 1,
                "unavailableReplicas": 0,
                "paused": False,
            }
            prefix = "prometheus" if kind == "Prometheus" else "alertmanager"
            sts = _statefulset(
                f"{prefix}-{meta['name']}",
                meta["namespace"],
                {"app.kubernetes.io/name": prefix, prefix: meta["name"]},
                [{"name": prefix, "image": f"quay.io/prometheus/{prefix}@sha256:" + "1" * 64}],
            )
            extra += [sts, *workload_status(sts, nodes)]
        meta.setdefault("uid", uid(kind, meta.get("namespace") or "", meta.get("name", "")))
        meta.setdefault("creationTimestamp", TIME)
        items.append(obj)
    if dra_advertises(plan):
        extra += gpu_resource_slices(nodes)
    items += extra
    for ns in sorted(namespaces):
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": _meta("Namespace", ns, labels={"kubernetes.io/metadata.name": ns}),
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }
        )
    for o in items:
        o["metadata"].pop("generation", None) if o["kind"] in (
            "Namespace",
            "Node",
            "Pod",
            "RuntimeClass",
        ) else None
    from gpucluster.live.checks import read_plan

    read = {"kube-system", *read_plan(plan).namespaces}  # the namespaces gpucluster snapshot reads
    return [
        o
        for o in _dedupe(items)
        if ((o["apiVersion"], o["kind"]) in READ_KINDS or _custom(o))
        and (o["kind"] != "Namespace" or o["metadata"]["name"] in read)
    ]


def _custom(obj: Mapping[str, Any]) -> bool:
    """Custom resources a snapshot holds (the kinds the checks read; never Secrets or ConfigMaps)."""
    return (
        "." in obj["apiVersion"].split("/")[0]
        and obj["apiVersion"].split("/")[0]
        not in (
            "rbac.authorization.k8s.io",
            "admissionregistration.k8s.io",
            "networking.k8s.io",
            "scheduling.k8s.io",
            "policy",
            "batch",
            "apiregistration.k8s.io",
            "coordination.k8s.io",
            "storage.k8s.io",
            "autoscaling",
            "cert-manager.io",
            "monitoring.coreos.com",
            "kai.scheduler",
            "scheduling.run.ai",
        )
        or obj["kind"] in ("Prometheus", "Alertmanager")
    )


def render_plan(plan, charts: Path):
    """The plan's releases rendered with the charts in ``charts`` (Helm's engine, offline)."""
    from gpucluster.lint import render as render_mod

    sources = render_mod.ChartSources([charts])
    return render_mod.render_plans([plan], sources, allow_missing=ALLOW_MISSING)


def snapshot_text(plan, charts: Path, nodes: Sequence[dict[str, Any]] | None = None) -> str:
    result = render_plan(plan, charts)
    try:
        return dump_snapshot(
            snapshot_document(
                healthy_items(plan, result.releases, nodes),
                every_namespace=EVERY_NAMESPACE_KINDS,
                cluster=plan.cluster.name,
            )
        )
    finally:
        result.renderer.close()


def default_plan(config: str | None = None):
    from gpucluster.inputs.config import load_config
    from gpucluster.pipeline import build_plans

    clusters, _ = load_config(config)
    return build_plans(clusters)[0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charts", default=str(REPO.parent / "shared" / "reference" / "charts"))
    parser.add_argument(
        "--config", default=None, help="cluster file (default: the embedded default cluster)"
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    text = snapshot_text(default_plan(args.config), Path(args.charts))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} ({len(json.loads(text)['items'])} objects)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Operator stand-ins: what the GPU and network operators would report, after a delay.

Under KWOK no operator runs (its pods are Running in name only), so the objects our gates wait
for never change by themselves. :class:`StandIns` does the operators' part, small and on
purpose:

* a ClusterPolicy (``nvidia.com/v1``, NVIDIA GPU Operator) gets ``status.state: ready``
  :attr:`delay` seconds after it was created;
* a NicClusterPolicy (``mellanox.com/v1alpha1``, NVIDIA Network Operator) likewise;
* the IPPool CRD (``ippools.nv-ipam.nvidia.com``), which the Network Operator creates at run time
  (its nv-ipam controller), is created from ``ippool_crd`` :attr:`delay` seconds after the
  ``network-operator`` Deployment appeared.

* the multus DaemonSet (``kube-multus-ds``) the Network Operator renders from a NicClusterPolicy's
  ``secondaryNetwork.multus`` is created with the policy's node affinity and tolerations.

DaemonSets then roll out by themselves (the DRA kubelet plugin's, multus): KWOK makes their pods
Ready on the nodes the scheduler picked.

Knobs for failure tests (attributes; a change takes effect at the next pass, within a second):

* :attr:`StandIns.states` -- the ``status.state`` reported per kind instead of ``ready`` (an
  operator stuck at ``notReady``: the gate must time out naming the state it saw);
  :attr:`StandIns.never_ready` -- kinds whose objects are left alone (no ``status`` at all);
* :attr:`StandIns.finalizers` -- a finalizer added per kind to each object not being deleted (an
  operator that never finishes its cleanup: the teardown guard must fail with its ``STUCK``
  line). Removing the kind from the mapping does not remove finalizers already added; the test
  removes them as a person would (``kubectl patch ... finalizers``).
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from gpucluster_rig.build import RigError
from gpucluster_rig.cluster import Cluster

STATE_KINDS = {
    "ClusterPolicy": "clusterpolicies.v1.nvidia.com",
    "NicClusterPolicy": "nicclusterpolicies.v1alpha1.mellanox.com",
}
"""Kinds whose ``status.state`` the stand-in sets to ``ready``, by ``kubectl`` resource name."""


def _age(obj: dict[str, Any]) -> float:
    created = datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    return time.time() - created.timestamp()


class StandIns:
    """The stand-ins' loop (a daemon thread) and what it did (:attr:`events`).

    Args:
        cluster: the started rig cluster.
        delay: seconds an object waits before its stand-in acts (default 3).
        ippool_crd: the IPPool CRD file (``../shared/reference/crds``), or None.
        never_ready: kinds of :data:`STATE_KINDS` left alone.
        states: kind -> the ``status.state`` reported instead of ``ready``.
        finalizers: kind -> a finalizer added to each of its objects not being deleted.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        delay: float = 3.0,
        ippool_crd: Path | None = None,
        never_ready: frozenset[str] = frozenset(),
        states: dict[str, str] | None = None,
        finalizers: dict[str, str] | None = None,
    ) -> None:
        self.cluster = cluster
        self.delay = delay
        self.ippool_crd = ippool_crd
        self.never_ready = never_ready
        self.states: dict[str, str] = dict(states or {})
        self.finalizers: dict[str, str] = dict(finalizers or {})
        self.events: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ippool_done = False
        self._multus_done = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="stand-ins", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _items(self, resource: str) -> list[dict[str, Any]]:
        out = self.cluster.kubectl("get", resource, "-A", "-o", "json", check=False)
        try:
            return list(json.loads(out)["items"]) if out else []
        except (ValueError, KeyError):
            return []

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._once()
            except RigError:
                pass
            self._stop.wait(1.0)

    def _once(self) -> None:
        if not self._ippool_done and self.ippool_crd is not None:
            operators = [
                d for d in self._items("deployments") if d["metadata"]["name"] == "network-operator"
            ]
            if any(_age(d) >= self.delay for d in operators):
                self._ippool()
        for kind, resource in STATE_KINDS.items():
            if kind in self.never_ready:
                continue
            state = self.states.get(kind, "ready")
            for obj in self._items(resource):
                self._hold(kind, resource, obj)
                if (obj.get("status") or {}).get("state") == state or _age(obj) < self.delay:
                    continue
                meta = obj["metadata"]
                args = [
                    "patch",
                    resource,
                    meta["name"],
                    "--type=merge",
                    "-p",
                    json.dumps({"status": {"state": state}}),
                ]
                if meta.get("namespace"):
                    args += ["-n", meta["namespace"]]
                self.cluster.kubectl(*args, "--subresource=status", check=False)
                if kind == "NicClusterPolicy" and state == "ready":
                    self._multus(obj)
                self.events.append(
                    {
                        "time": round(time.time(), 1),
                        "kind": kind,
                        "name": meta["name"],
                        "set": f"status.state={state}",
                    }
                )

    def _hold(self, kind: str, resource: str, obj: dict[str, Any]) -> None:
        """Add :attr:`finalizers`' finalizer of ``kind`` to ``obj`` (unless it is being deleted)."""
        finalizer = self.finalizers.get(kind)
        meta = obj["metadata"]
        have = meta.get("finalizers") or []
        if not finalizer or finalizer in have or meta.get("deletionTimestamp"):
            return
        args = [
            "patch",
            resource,
            meta["name"],
            "--type=merge",
            "-p",
            json.dumps({"metadata": {"finalizers": [*have, finalizer]}}),
        ]
        if meta.get("namespace"):
            args += ["-n", meta["namespace"]]
        self.cluster.kubectl(*args, check=False)
        self.events.append(
            {
                "time": round(time.time(), 1),
                "kind": kind,
                "name": meta["name"],
                "set": f"metadata.finalizers+={finalizer}",
            }
        )

    def _multus(self, policy: dict[str, Any]) -> None:
        """The multus DaemonSet the Network Operator renders from ``secondaryNetwork.multus``
        (``kube-multus-ds``, in the operator's namespace, with the policy's node affinity and
        tolerations): KWOK runs its pods on the nodes that match."""
        multus = ((policy.get("spec") or {}).get("secondaryNetwork") or {}).get("multus")
        operators = [
            d for d in self._items("deployments") if d["metadata"]["name"] == "network-operator"
        ]
        if not multus or not operators or self._multus_done:
            return
        ns = operators[0]["metadata"]["namespace"]
        spec = policy["spec"]
        labels = {"app": "kube-multus-ds", "gpucluster.rig/stand-in": "network-operator"}
        pod: dict[str, Any] = {
            "containers": [
                {
                    "name": "kube-multus",
                    "image": f"{multus.get('repository', '')}/{multus.get('image', 'multus-cni')}:{multus.get('version', '')}",
                }
            ],
            "tolerations": spec.get("tolerations") or [],
        }
        if spec.get("nodeAffinity"):
            pod["affinity"] = {"nodeAffinity": spec["nodeAffinity"]}
        ds = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "kube-multus-ds", "namespace": ns, "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod},
            },
        }
        self.cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(ds), check=False)
        self._multus_done = True
        self.events.append(
            {
                "time": round(time.time(), 1),
                "kind": "DaemonSet",
                "name": f"{ns}/kube-multus-ds",
                "set": "created",
            }
        )

    def _ippool(self) -> None:
        if self._ippool_done or self.ippool_crd is None:
            return
        self.cluster.kubectl("apply", "--server-side", "-f", str(self.ippool_crd), check=False)
        self._ippool_done = True
        self.events.append(
            {
                "time": round(time.time(), 1),
                "kind": "CustomResourceDefinition",
                "name": "ippools.nv-ipam.nvidia.com",
                "set": "created",
            }
        )

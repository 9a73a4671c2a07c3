"""Day 2 on the rig: successive revisions of one cluster file applied to one running rig cluster.

:class:`KeptRig` opens one :class:`gpucluster_rig.rehearse.Rehearsal` (a rig cluster, its chart
repository, the Job runner and the stand-ins, kept up) and applies one revision of a cluster file
after another (:meth:`KeptRig.apply`), as a team applies its pull requests:

1. the revision is synthesized (``gpucluster synth``, charts from the rig's repository) into its
   own folder (:meth:`Rehearsal.synth`);
2. the nodes follow the revision's pools, as the cluster stack's apply would leave them: nodes of
   a pool the revision adds are created (:meth:`Rehearsal.apply`), nodes of a pool it no longer
   has are deleted first (Terraform destroys the node pool: the nodes go, with whatever still
   runs on them);
3. the runtime stack is applied (:meth:`Rehearsal.apply`) by the rehearsal's one
   :class:`gpucluster_rig.engine.Engine`, whose state makes it upgrade only the releases whose
   configuration changed (``terraform apply``'s plan).

Each apply returns an :class:`Applied`: the rehearsal's report, the Helm revision of every
release before and after (read from Helm), and the nodes added and removed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster_rig.build import RigError
from gpucluster_rig.cluster import Cluster
from gpucluster_rig.engine import Stack
from gpucluster_rig.nodes import nodes_for
from gpucluster_rig.rehearse import Rehearsal


@dataclass
class Applied:
    """One revision applied.

    Attributes:
        revision: 1 for the first apply, then 2, 3, ...
        stack: the synthesized runtime stack.
        report: :meth:`gpucluster_rig.rehearse.Rehearsal.apply`'s report (``apply.releases``
            with each release's ``action``: ``create``, ``update`` or ``unchanged``; ``jobs``
            run during this apply; ``ok``).
        revisions_before / revisions_after: ``(namespace, name)`` -> Helm revision.
        nodes_added / nodes_removed: node names the revision's pools added or removed.
    """

    revision: int
    stack: Stack
    report: dict[str, Any]
    revisions_before: dict[tuple[str, str], int]
    revisions_after: dict[tuple[str, str], int]
    nodes_added: list[str] = field(default_factory=list)
    nodes_removed: list[str] = field(default_factory=list)

    @property
    def releases(self) -> list[dict[str, Any]]:
        return list(self.report["apply"]["releases"])

    @property
    def jobs(self) -> list[dict[str, Any]]:
        return list(self.report["jobs"])

    @property
    def makespan(self) -> float:
        return float(self.report["apply"]["makespan_seconds"])

    @property
    def ok(self) -> bool:
        return bool(self.report["ok"])

    def failed(self) -> list[dict[str, Any]]:
        """The releases that did not deploy."""
        return [r for r in self.releases if not r["ok"]]

    def actions(self) -> dict[str, str]:
        """Release id -> ``create`` / ``update`` / ``unchanged``."""
        return {r["release"]: r["action"] for r in self.releases}

    def upgraded(self) -> set[str]:
        """Release ids whose Helm revision moved during this apply (read from Helm, not the engine)."""
        out = set()
        for rid, cfg in self.stack.releases.items():
            key = (cfg["namespace"], cfg["name"])
            if self.revisions_after.get(key) != self.revisions_before.get(key):
                out.add(rid)
        return out


class KeptRig:
    """A rig cluster kept up across applies of one cluster's successive revisions.

    Args:
        binaries: the rig's programs (:func:`gpucluster_rig.build.binaries`).
        folder: a fresh work folder (rig, chart repository, one folder per revision).
        cluster: the cluster's name in the files (the same in every revision).
        charts: a folder of unpacked charts (``--charts``); crds: the CRD folder (the IPPool CRD
            stand-in); delay: the stand-ins' delay in seconds.

    A pool removed and later added again under the same name is not supported (the rehearsal
    creates a node once).
    """

    def __init__(
        self,
        binaries: Path,
        folder: Path,
        *,
        cluster: str,
        charts: Path | None,
        crds: Path | None,
        delay: float = 1.0,
    ) -> None:
        self.binaries = binaries
        self.folder = folder
        self.name = cluster
        self.charts = charts
        self.crds = crds
        self.delay = delay
        self.rehearsal: Rehearsal | None = None
        self.applied: list[Applied] = []

    @property
    def rig(self) -> Cluster:
        """The started rig cluster (:class:`RigError` before :meth:`start`)."""
        if self.rehearsal is None:
            raise RigError("input", "the kept rig is not started", "call start() first")
        return self.rehearsal.cluster

    def start(self) -> None:
        """Open the rehearsal: the chart repository, the cluster, the Job runner, the stand-ins."""
        self.rehearsal = Rehearsal.open(
            binaries=self.binaries,
            folder=self.folder,
            charts=self.charts,
            crds=self.crds,
            delay=self.delay,
            name=f"rig-{self.name}",
        )
        self.rehearsal.__enter__()

    def stop(self) -> None:
        """Stop everything :meth:`start` started."""
        if self.rehearsal is not None:
            self.rehearsal.__exit__(None, None, None)

    def __enter__(self) -> KeptRig:
        """:meth:`start`; ``with KeptRig(...) as kept:`` stops it on leaving."""
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _remove_gone_nodes(self, spec: Any) -> list[str]:
        """Delete the rig's nodes no pool of ``spec`` has; their names."""
        wanted = {n["metadata"]["name"] for n in nodes_for(spec)}
        have = {
            n["metadata"]["name"]
            for n in json.loads(self.rig.kubectl("get", "nodes", "-o", "json"))["items"]
        }
        removed = sorted(have - wanted)
        for name in removed:
            self.rig.kubectl("delete", "node", name, "--wait=true")
        if removed:
            self._wait_pods_gone(set(removed))
        return removed

    def _wait_pods_gone(self, nodes: set[str], timeout: float = 240) -> None:
        """Wait until no pod is bound to ``nodes`` (deleted): the pod garbage collector removes
        them once the controllers have seen the nodes go, as they have long before a runtime
        apply that follows the cluster stack's (a node pool's deletion takes minutes on AKS).
        Without the wait a gate could read a DaemonSet status from before the deletion."""
        deadline = time.monotonic() + timeout
        while True:
            pods = json.loads(self.rig.kubectl("get", "pods", "-A", "-o", "json"))["items"]
            left = sorted(
                f"{p['metadata']['namespace']}/{p['metadata']['name']}"
                for p in pods
                if p["spec"].get("nodeName") in nodes
            )
            if not left:
                return
            if time.monotonic() > deadline:
                raise RigError(
                    "nodes",
                    f"pods of deleted nodes still there after {timeout:.0f} s: {', '.join(left[:5])}",
                    "read the kube-controller-manager's log (pod garbage collector)",
                )
            time.sleep(1.0)

    def apply(self, config: Path) -> Applied:
        """Synthesize revision ``config`` and apply it (see the module docstring)."""
        r = self.rehearsal
        if r is None:
            raise RigError("input", "the kept rig is not started", "call start() first")
        stack_dir = r.synth(config, self.name)
        spec = r.specs[stack_dir]
        have = {
            n["metadata"]["name"]
            for n in json.loads(self.rig.kubectl("get", "nodes", "-o", "json"))["items"]
        }
        removed = self._remove_gone_nodes(spec)
        added = sorted({n["metadata"]["name"] for n in nodes_for(spec)} - have)
        before = r.engine.revisions()
        report = r.apply(stack_dir, spec)
        applied = Applied(
            revision=len(self.applied) + 1,
            stack=Stack.load(stack_dir),
            report=report,
            revisions_before=before,
            revisions_after=r.engine.revisions(),
            nodes_added=added,
            nodes_removed=removed,
        )
        self.applied.append(applied)
        return applied

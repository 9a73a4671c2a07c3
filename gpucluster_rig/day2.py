"""Day 2 on the rig: successive revisions of one cluster file applied to one running rig cluster.

:class:`KeptRig` starts a rig cluster, its chart repository, the Job runner and the stand-ins once
(:mod:`gpucluster_rig.rehearse` describes each), then applies one revision of a cluster file
after another (:meth:`KeptRig.apply`), as a team applies its pull requests:

1. the revision is synthesized (``gpucluster synth``, charts from the rig's repository) into its
   own folder;
2. the nodes follow the revision's pools, as the cluster stack's apply would leave them: nodes of
   a pool the revision adds are created, nodes of a pool it no longer has are deleted (Terraform
   destroys the node pool: the nodes go, whatever still runs on them);
3. the runtime stack is applied by the one :class:`gpucluster_rig.engine.Engine`, whose state
   makes it upgrade only the releases whose configuration changed (``terraform apply``'s plan).

Each apply returns an :class:`Applied`: the steps (with ``action``: ``create``, ``update``,
``unchanged``), the makespan, the Helm revision of every release before and after, and the Job
runs (gates, CRD steps) it caused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster_rig.build import RigError
from gpucluster_rig.charts import ChartRepo
from gpucluster_rig.cluster import Cluster
from gpucluster_rig.engine import Engine, Stack, Step
from gpucluster_rig.nodes import nodes_for
from gpucluster_rig.rehearse import mirrored_config, synth
from gpucluster_rig.runner import JobRunner
from gpucluster_rig.standins import StandIns

POOL_LABEL = "gpucluster.rig/pool"
"""The label :func:`gpucluster_rig.nodes.nodes_for` gives each node: its pool's name."""


@dataclass
class Applied:
    """One revision applied.

    Attributes:
        revision: 1 for the first apply, then 2, 3, ...
        stack: the synthesized runtime stack.
        steps: one per ``helm_release`` (:class:`gpucluster_rig.engine.Step`, with ``action``).
        makespan: seconds of the walk.
        revisions_before / revisions_after: ``(namespace, name)`` -> Helm revision.
        jobs: the Job runs (:meth:`gpucluster_rig.runner.JobRunner.snapshot` entries) started
            during this apply.
        nodes_added / nodes_removed: node names the revision's pools added or removed.
    """

    revision: int
    stack: Stack
    steps: list[Step]
    makespan: float
    revisions_before: dict[tuple[str, str], int]
    revisions_after: dict[tuple[str, str], int]
    jobs: list[dict[str, Any]] = field(default_factory=list)
    nodes_added: list[str] = field(default_factory=list)
    nodes_removed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps)

    def actions(self) -> dict[str, str]:
        """Release id -> ``create`` / ``update`` / ``unchanged``."""
        return {s.id: s.action for s in self.steps}

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
        self.folder = folder
        self.name = cluster
        self.rig = Cluster(binaries, folder / "rig", name=f"rig-{cluster}"[:40])
        self.env = self.rig.env()
        self.env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
        self.env.setdefault("CHECKPOINT_DISABLE", "1")
        self.repo = ChartRepo(folder / "charts", binaries / "helm", charts, self.env)
        ippool = crds / "nv-ipam.nvidia.com" / "nv-ipam.nvidia.com_ippools.yaml" if crds else None
        self.ippool = ippool if ippool and ippool.is_file() else None
        self.delay = delay
        self.runner: JobRunner | None = None
        self.standins: StandIns | None = None
        self.engine: Engine | None = None
        self.applied: list[Applied] = []

    def start(self) -> None:
        """Start the chart repository, the cluster, the Job runner and the stand-ins."""
        self.repo.start()
        self.rig.start()
        self.runner = JobRunner(self.rig)
        self.standins = StandIns(self.rig, delay=self.delay, ippool_crd=self.ippool)
        self.runner.start()
        self.standins.start()
        self.engine = Engine(
            self.rig.binaries / "helm",
            self.rig.kubeconfig,
            self.rig.folder / "helm",
            self.rig.env(),
        )

    def stop(self) -> None:
        """Stop everything :meth:`start` started (safe after a failed start)."""
        if self.runner is not None:
            self.runner.stop()
        if self.standins is not None:
            self.standins.stop()
        self.rig.stop()
        self.repo.stop()

    def spec(self, config: Path) -> Any:
        """The prepared cluster ``self.name`` of ``config`` (pools, scheduling)."""
        from gpucluster.inputs.config import load_clusters
        from gpucluster.pipeline import prepare_cluster

        for c in load_clusters(str(config)):
            if c.name == self.name:
                return prepare_cluster(c)
        raise RigError("input", f"no cluster named {self.name!r} in {config}", "name it")

    def sync_nodes(self, spec: Any) -> tuple[list[str], list[str]]:
        """Create the nodes of ``spec``'s pools the rig lacks, delete those of pools it no longer
        has; (added, removed) node names."""
        wanted = {n["metadata"]["name"]: n for n in nodes_for(spec)}
        have = {
            n["metadata"]["name"]
            for n in json.loads(self.rig.kubectl("get", "nodes", "-o", "json"))["items"]
        }
        added = sorted(set(wanted) - have)
        removed = sorted(have - set(wanted))
        if added:
            self.rig.kubectl(
                "create",
                "-f",
                "-",
                input=json.dumps(
                    {"apiVersion": "v1", "kind": "List", "items": [wanted[n] for n in added]}
                ),
            )
            self.rig.wait_ready_nodes(added)
        for name in removed:
            self.rig.kubectl("delete", "node", name, "--wait=true")
        return added, removed

    def apply(self, config: Path) -> Applied:
        """Synthesize revision ``config`` and apply it (see the module docstring)."""
        if self.engine is None or self.runner is None:
            raise RigError("input", "the kept rig is not started", "call start() first")
        n = len(self.applied) + 1
        work = self.folder / f"revision-{n}"
        work.mkdir(parents=True, exist_ok=True)
        copy = mirrored_config(config, work, self.repo.url)
        synth(copy, work / "cdktf.out", self.env)
        stack = Stack.load(work / "cdktf.out" / "stacks" / f"{self.name}-runtime")
        for chart, version in sorted(
            {
                (c["chart"], c["version"])
                for c in [*stack.releases.values(), *stack.templates.values()]
                if c.get("repository")
            }
        ):
            self.repo.add(chart, version)
        self.repo.index()
        added, removed = self.sync_nodes(self.spec(copy))
        before = self.engine.revisions()
        seen = len(self.runner.snapshot())
        steps, makespan = self.engine.walk(stack)
        applied = Applied(
            revision=n,
            stack=stack,
            steps=steps,
            makespan=makespan,
            revisions_before=before,
            revisions_after=self.engine.revisions(),
            jobs=self.runner.snapshot()[seen:],
            nodes_added=added,
            nodes_removed=removed,
        )
        self.applied.append(applied)
        return applied

"""``gpucluster rehearse``: a cluster file's runtime stacks applied to a simulated cluster, then destroyed.

For each cluster of the file (or the one ``--cluster`` names):

1. a rig cluster (:class:`gpucluster_rig.cluster.Cluster`) with KWOK nodes shaped like its pools
   (:func:`gpucluster_rig.nodes.nodes_for`);
2. a chart repository on 127.0.0.1 (:class:`gpucluster_rig.charts.ChartRepo`) and the stacks
   synthesized with ``charts.mirror`` pointing at it (``gpucluster synth``, the user's own
   cluster file otherwise unchanged);
3. the runtime stack applied in dependency order (:class:`gpucluster_rig.engine.Engine`), with our
   Job pods run for real (:class:`gpucluster_rig.runner.JobRunner`) and the operators' reports
   made by :class:`gpucluster_rig.standins.StandIns`; a cluster with ``schedulerProfiles`` gets
   AKS's ``SchedulerConfiguration`` kind (:mod:`gpucluster_rig.aks_scheduler`);
4. checks: every release deployed; every gate ran its own script as its own ServiceAccount and
   exited 0; every custom resource read back from the server holds every field rendered;
   where each DaemonSet's and Deployment's pods landed; the applied ``SchedulerConfiguration``'s
   profiles started in a real kube-scheduler; what the API server tried to reach outside loopback
   (the egress sink);
5. destroy in reverse order, and what is left (namespaces, releases, custom resources).

The report is a JSON-ready dict (:func:`rehearse_cluster`); :func:`render_text` prints it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gpucluster.errors import GpuclusterError, allowed_list, format_line
from gpucluster_rig import aks_scheduler
from gpucluster_rig.build import RigError
from gpucluster_rig.charts import ChartRepo
from gpucluster_rig.cluster import Cluster
from gpucluster_rig.engine import Engine, Stack
from gpucluster_rig.nodes import nodes_for
from gpucluster_rig.runner import JobRunner
from gpucluster_rig.standins import StandIns

BUILTIN_GROUPS = frozenset(
    {
        "",
        "v1",
        "apps",
        "batch",
        "policy",
        "autoscaling",
        "networking.k8s.io",
        "rbac.authorization.k8s.io",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "node.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "resource.k8s.io",
        "certificates.k8s.io",
        "flowcontrol.apiserver.k8s.io",
    }
)
"""API groups of built-in kinds; objects of any other group are custom resources."""


def _group(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def mirrored_config(source: Path | None, folder: Path, mirror: str) -> Path:
    """A copy of the cluster file (or the embedded default) in ``folder`` whose every cluster
    takes its charts from ``mirror`` (the top-level ``charts``; cluster-level ``charts`` dropped),
    with each cluster's ``recipe`` file copied beside it and its ``overrides.values[].file``
    files at the same relative paths."""
    from gpucluster.inputs.config import EMBEDDED_DEFAULT

    path = source or Path(EMBEDDED_DEFAULT)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["charts"] = {"mirror": mirror}
    for cluster in data.get("clusters", []):
        cluster.pop("charts", None)
        recipe = cluster.get("recipe")
        if isinstance(recipe, str) and source is not None:
            target = folder / Path(recipe).name
            shutil.copyfile(source.parent / recipe, target)
            cluster["recipe"] = target.name
        for entry in (cluster.get("overrides") or {}).get("values") or []:
            # values files are relative to the cluster file and stay in its folder (checked when
            # the file was loaded): the same relative path beside the copy
            ref = entry.get("file") if isinstance(entry, dict) else None
            if isinstance(ref, str) and source is not None:
                target = folder / ref
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source.parent / ref, target)
    out = folder / "gpucluster.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return out


def synth(config: Path, out: Path, env: dict[str, str]) -> None:
    """``gpucluster synth --config CONFIG --out OUT`` in this interpreter; :class:`RigError` with its line."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpucluster.cli",
            "synth",
            "--config",
            str(config),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=config.parent,
        timeout=600,
    )
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise RigError(
            "synth",
            f"gpucluster synth failed: {lines[-1] if lines else proc.returncode}",
            "run `gpucluster plan` on the file",
        )


def _json(cluster: Cluster, *args: str) -> list[dict[str, Any]]:
    out = cluster.kubectl(*args, "-o", "json", check=False)
    try:
        return list(json.loads(out).get("items", [])) if out else []
    except ValueError:
        return []


def _contains(rendered: Any, live: Any, path: str, diffs: list[str]) -> None:
    """Every field of ``rendered`` is in ``live`` with the same value (``live`` may have more)."""
    if isinstance(rendered, dict):
        if not isinstance(live, dict):
            diffs.append(f"{path}: rendered a mapping, the server holds {type(live).__name__}")
            return
        for k, v in rendered.items():
            if k not in live:
                if v not in (None, {}, []):
                    diffs.append(f"{path}.{k}: pruned by the server")
                continue
            _contains(v, live[k], f"{path}.{k}", diffs)
    elif isinstance(rendered, list):
        if not isinstance(live, list) or len(live) != len(rendered):
            diffs.append(
                f"{path}: rendered {len(rendered)} items, the server holds {len(live) if isinstance(live, list) else type(live).__name__}"
            )
            return
        for i, (a, b) in enumerate(zip(rendered, live, strict=True)):
            _contains(a, b, f"{path}[{i}]", diffs)
    elif rendered != live and not (
        isinstance(rendered, (int, float)) and str(rendered) == str(live)
    ):
        diffs.append(f"{path}: rendered {rendered!r}, the server holds {live!r}")


class _ManifestLoader(yaml.SafeLoader):
    """SafeLoader that reads YAML 1.1's ``=`` (the "value" key type) as the string ``=``, as Go's
    YAML library does (kube-prometheus-stack's rules carry ``- =``)."""


def _value_key(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return "="


_ManifestLoader.add_constructor("tag:yaml.org,2002:value", _value_key)


def custom_resources_round_trip(
    cluster: Cluster, engine: Engine, stack: Stack, ok: list[str]
) -> list[dict[str, Any]]:
    """For every custom resource the deployed releases rendered: read back, compare (``diffs``)."""
    out = []
    for rid in ok:
        cfg = stack.releases[rid]
        proc = engine.helm_run(
            "get", "manifest", cfg["name"], "--namespace", cfg["namespace"], timeout=120
        )
        for doc in yaml.load_all(proc.stdout or "", Loader=_ManifestLoader):
            if (
                not isinstance(doc, dict)
                or _group(str(doc.get("apiVersion", ""))) in BUILTIN_GROUPS
            ):
                continue
            meta = doc.get("metadata") or {}
            ns = meta.get("namespace")
            args = ["get", f"{doc['kind']}.{_group(doc['apiVersion'])}", meta["name"], "-o", "json"]
            live_text = cluster.kubectl(
                *args, *(["-n", ns] if ns else ["-n", cfg["namespace"]]), check=False
            )
            entry: dict[str, Any] = {"release": rid, "kind": doc["kind"], "name": meta["name"]}
            if not live_text:
                entry["diffs"] = ["not found on the server"]
            else:
                live = json.loads(live_text)
                diffs: list[str] = []
                for key, value in doc.items():
                    if key not in ("apiVersion", "kind", "metadata", "status"):
                        _contains(value, live.get(key), key, diffs)
                entry["diffs"] = diffs
            out.append(entry)
    return out


def placement(cluster: Cluster, namespaces: set[str]) -> list[dict[str, Any]]:
    """Where each DaemonSet's, Deployment's, StatefulSet's and Job's pods landed: pools and pod
    counts, and whether a pod tolerates every taint (a toleration without a key, ``Exists``)."""
    pools = {
        n["metadata"]["name"]: n["metadata"]["labels"].get("gpucluster.rig/pool", "?")
        for n in _json(cluster, "get", "nodes")
    }
    owners: dict[tuple[str, str, str], dict[str, Any]] = {}
    for pod in _json(cluster, "get", "pods", "-A"):
        meta = pod["metadata"]
        if meta["namespace"] not in namespaces:
            continue
        ref: dict[str, Any] = next(iter(meta.get("ownerReferences") or []), {})
        kind, name = ref.get("kind", "Pod"), ref.get("name", meta["name"])
        if kind == "ReplicaSet":
            kind, name = "Deployment", name.rsplit("-", 1)[0]
        node = pod["spec"].get("nodeName")
        pool = pools.get(node, "unscheduled") if node else "unscheduled"
        entry = owners.setdefault((meta["namespace"], kind, name), {"pools": {}, "wildcard": False})
        entry["pools"][pool] = entry["pools"].get(pool, 0) + 1
        entry["wildcard"] |= any(
            not t.get("key") and t.get("operator") == "Exists"
            for t in pod["spec"].get("tolerations") or []
        )
    return [
        {
            "namespace": ns,
            "kind": kind,
            "name": name,
            "pools": dict(sorted(e["pools"].items())),
            "toleratesEveryTaint": e["wildcard"],
        }
        for (ns, kind, name), e in sorted(owners.items())
    ]


def placement_findings(placed: list[dict[str, Any]], gpu_pools: set[str]) -> list[str]:
    """One ``warning[rig.placement]`` line per Deployment/StatefulSet with pods on GPU nodes: a
    system component taking an H100 node's room (why: a toleration of every taint, or none of the
    system node selector)."""
    out = []
    for p in placed:
        on_gpu = sorted(set(p["pools"]) & gpu_pools)
        if p["kind"] in ("Deployment", "StatefulSet") and on_gpu:
            why = (
                "its pods tolerate every taint"
                if p["toleratesEveryTaint"]
                else "it tolerates the GPU taint"
            )
            out.append(
                format_line(
                    "warning",
                    "rig.placement",
                    f"{p['kind']} {p['namespace']}/{p['name']} has pods on GPU nodes ({', '.join(on_gpu)}): {why} "
                    "and no node selector keeps it on the system nodes",
                    fix="set scheduling.system.nodeSelector (and keyed scheduling.system.tolerations) in the cluster file (docs/overrides.md)",
                )
            )
    return out


class Rehearsal:
    """A started rig kept across applies: apply, change, apply again and destroy on ONE control plane.

    It holds the rig cluster (:attr:`cluster`), the chart repository on 127.0.0.1 (:attr:`repo`),
    the Job runner (:attr:`runner`), the operator stand-ins (:attr:`standins`) and the apply engine
    (:attr:`engine`); the runner and the stand-ins run while the ``with`` block does::

        with Rehearsal.open(binaries=b, folder=f, charts=c, crds=d, delay=1.0) as r:
            stack = r.synth(None)          # the built-in example's first cluster -> its runtime stack
            report = r.apply(stack)        # the report :func:`rehearse_cluster` makes, without destroy
            ...                            # change the stack (or synth another file), r.apply again
            r.destroy(stack)               # {"destroy", "jobs", "left_after_destroy", "ok"}

    ``Rehearsal(cluster, repo, ...)`` wraps a cluster and a repository the caller started (and
    stops); :meth:`open` starts both and stops them when the ``with`` block ends.

    Args:
        cluster: a started :class:`~gpucluster_rig.cluster.Cluster`.
        repo: a started :class:`~gpucluster_rig.charts.ChartRepo` (``apply`` adds what a stack pins).
        delay: the stand-ins' delay in seconds (default 3).
        crds_dir: the reference CRD folder (``../shared/reference/crds``; the IPPool CRD the
            network operator's stand-in creates), or None.
        never_ready: :data:`gpucluster_rig.standins.STATE_KINDS` kinds the stand-ins leave alone.
    """

    def __init__(
        self,
        cluster: Cluster,
        repo: ChartRepo,
        *,
        delay: float = 3.0,
        crds_dir: Path | None = None,
        never_ready: frozenset[str] = frozenset(),
    ) -> None:
        self.cluster = cluster
        self.repo = repo
        self.folder = cluster.folder.parent
        ippool = (
            crds_dir / "nv-ipam.nvidia.com" / "nv-ipam.nvidia.com_ippools.yaml"
            if crds_dir
            else None
        )
        self.runner = JobRunner(cluster)
        self.standins = StandIns(
            cluster,
            delay=delay,
            ippool_crd=ippool if ippool and ippool.is_file() else None,
            never_ready=never_ready,
        )
        self.engine = Engine(
            cluster.binaries / "helm", cluster.kubeconfig, cluster.folder / "helm", cluster.env()
        )
        self.specs: dict[Path, Any] = {}
        """The cluster (``gpucluster.pipeline`` spec) of each stack :meth:`synth` made."""
        self._nodes: set[str] = set()
        self._owned = False
        self._synths = 0

    @classmethod
    def open(
        cls,
        *,
        binaries: Path,
        folder: Path,
        charts: Path | None,
        crds: Path | None,
        delay: float = 3.0,
        name: str = "rig",
        never_ready: frozenset[str] = frozenset(),
    ) -> Rehearsal:
        """Start a chart repository (from ``charts``, unpacked charts) and a rig cluster named
        ``name`` in ``folder``; the rehearsal that stops both when its ``with`` block ends.
        :class:`RigError` (nothing left running) when the rig cannot start."""
        rig = Cluster(binaries, folder / "rig", name=name[:40])
        repo = ChartRepo(folder / "charts", binaries / "helm", charts, _synth_env(rig))
        repo.start()
        try:
            rig.start()
        except BaseException:
            rig.stop()
            repo.stop()
            raise
        made = cls(rig, repo, delay=delay, crds_dir=crds, never_ready=never_ready)
        made._owned = True
        return made

    def __enter__(self) -> Rehearsal:
        self.runner.start()
        self.standins.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.runner.stop()
        self.standins.stop()
        if self._owned:
            self.cluster.stop()
            self.repo.stop()

    def synth(self, config: Path | None, cluster: str | None = None) -> Path:
        """``gpucluster synth`` of ``config`` (None: the built-in example) with its charts from
        :attr:`repo`, into a fresh folder of :attr:`folder`; the runtime stack's folder of
        ``cluster`` (default: the file's first cluster). :class:`RigError` ``rig.input`` when the
        file has no such cluster, ``rig.synth`` with synth's last line when it fails."""
        from gpucluster.inputs.config import load_clusters
        from gpucluster.pipeline import prepare_cluster

        specs = [prepare_cluster(c) for c in load_clusters(str(config) if config else None)]
        chosen = [s for s in specs if cluster is None or s.name == cluster][:1]
        if not chosen:
            raise RigError(
                "input",
                f"no cluster named {cluster!r} in the file",
                "name one of the file's clusters",
            )
        self._synths += 1
        work = self.folder / f"synth-{self._synths}"
        work.mkdir(parents=True, exist_ok=True)
        synth(
            mirrored_config(config, work, self.repo.url),
            work / "cdktf.out",
            _synth_env(self.cluster),
        )
        stack_dir = work / "cdktf.out" / "stacks" / f"{chosen[0].name}-runtime"
        self.specs[stack_dir] = chosen[0]
        return stack_dir

    def nodes(self, spec: Any) -> list[dict[str, Any]]:
        """The KWOK nodes shaped like ``spec``'s pools (:func:`nodes_for`), created once (a later
        call creates only the ones missing) and Ready."""
        nodes = nodes_for(spec)
        new = [n for n in nodes if n["metadata"]["name"] not in self._nodes]
        if new:
            self.cluster.kubectl(
                "create",
                "-f",
                "-",
                input=json.dumps({"apiVersion": "v1", "kind": "List", "items": new}),
            )
            self._nodes |= {n["metadata"]["name"] for n in new}
        self.cluster.wait_ready_nodes([n["metadata"]["name"] for n in nodes])
        return nodes

    def apply(self, stack_dir: Path, spec: Any = None) -> dict[str, Any]:
        """Apply the runtime stack in ``stack_dir`` (its charts added to :attr:`repo`, the nodes
        of ``spec`` -- default: the cluster :meth:`synth` made it for -- created) and check it.

        The report (JSON-ready): ``cluster``, ``charts``, ``nodes`` (count per pool), ``apply``
        (``makespan_seconds``, ``releases``: one dict per release with ``ok``, ``start``,
        ``seconds``, ``message``), ``jobs`` (our Job pods run during this apply), ``placement``,
        ``placement_findings``, ``custom_resources`` (read back from the releases this apply
        installed or upgraded; one left ``unchanged`` was read back when it was applied),
        ``stand_ins`` (what they did during this apply), for a cluster with ``schedulerProfiles``
        ``scheduler_profiles`` (AKS's ``SchedulerConfiguration`` is served before the apply; after
        it :func:`gpucluster_rig.aks_scheduler.check_applied`: ``profiles``, ``accepted``,
        ``message``), ``egress_attempts`` and ``ok``. A release that fails is in the report, never
        raised.
        """
        spec = spec if spec is not None else self.specs.get(stack_dir)
        if spec is None:
            raise RigError("input", f"no cluster known for {stack_dir}", "pass spec=")
        report: dict[str, Any] = {"cluster": spec.name}
        stack = Stack.load(stack_dir)
        wanted = sorted(
            {
                (c["chart"], c["version"])
                for c in [*stack.releases.values(), *stack.templates.values()]
                if c.get("repository")
            }
        )
        report["charts"] = [self.repo.add(chart, version).as_dict() for chart, version in wanted]
        self.repo.index()
        nodes = self.nodes(spec)
        report["nodes"] = {
            p: sum(1 for n in nodes if n["metadata"]["labels"]["gpucluster.rig/pool"] == p)
            for p in sorted({n["metadata"]["labels"]["gpucluster.rig/pool"] for n in nodes})
        }
        since, wall = time.monotonic(), time.time()
        if spec.scheduler_profiles:
            aks_scheduler.serve(self.cluster)
        steps, makespan = self.engine.walk(stack)
        t0 = min((s.start for s in steps if s.start), default=0.0)
        report["apply"] = {
            "makespan_seconds": round(makespan, 1),
            "releases": [s.as_dict(t0) for s in steps],
        }
        ok = [s.id for s in steps if s.ok and s.action != "unchanged"]
        namespaces = {stack.releases[r]["namespace"] for r in stack.releases}
        report["jobs"] = self.runner.snapshot(since)
        report["placement"] = placement(self.cluster, namespaces)
        gpu_pools = {
            n["metadata"]["labels"]["gpucluster.rig/pool"]
            for n in nodes
            if "nvidia.com/gpu" in n["status"]["capacity"]
        }
        report["placement_findings"] = placement_findings(report["placement"], gpu_pools)
        report["custom_resources"] = custom_resources_round_trip(
            self.cluster, self.engine, stack, ok
        )
        report["stand_ins"] = [e for e in self.standins.events if e["time"] >= round(wall, 1)]
        if spec.scheduler_profiles:
            report["scheduler_profiles"] = aks_scheduler.check_applied(
                self.cluster, self.cluster.folder / "profile-scheduler"
            ) or {
                "profiles": [],
                "accepted": False,
                "message": f"no SchedulerConfiguration {aks_scheduler.NAME} on the server",
            }
        report["egress_attempts"] = list(self.cluster.sink.attempts)
        report["ok"] = _verdict(report)
        return report

    def destroy(self, stack_dir: Path) -> dict[str, Any]:
        """Destroy the stack in ``stack_dir`` in reverse dependency order (the releases Helm has).

        The report: ``destroy`` (``makespan_seconds``, ``releases`` as in :meth:`apply`), ``jobs``
        (our Job pods run during the destroy: teardown guards), ``left_after_destroy``
        (``releases`` Helm still has) and ``ok`` (every release removed, nothing left)."""
        stack = Stack.load(stack_dir)
        since = time.monotonic()
        dsteps, dspan = self.engine.walk(stack, destroy=True)
        t1 = min((s.start for s in dsteps if s.start), default=0.0)
        left = sorted(self.engine.installed())
        return {
            "destroy": {
                "makespan_seconds": round(dspan, 1),
                "releases": [s.as_dict(t1) for s in dsteps],
            },
            "jobs": self.runner.snapshot(since),
            "left_after_destroy": {"releases": left},
            "ok": all(s.ok for s in dsteps) and not left,
        }


def _synth_env(rig: Cluster) -> dict[str, str]:
    env = rig.env()
    env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    env.setdefault("CHECKPOINT_DISABLE", "1")
    return env


def rehearse_cluster(
    spec: Any,
    stack_dir: Path,
    rig: Cluster,
    repo: ChartRepo,
    *,
    delay: float,
    crds_dir: Path | None,
    destroy: bool = True,
) -> dict[str, Any]:
    """Apply, check and (``destroy``) tear down one cluster's runtime stack on a started rig: the
    report of :meth:`Rehearsal.apply`, with (``destroy``) ``destroy`` and ``left_after_destroy``
    of :meth:`Rehearsal.destroy` and ``jobs`` counting the teardown guards too."""
    with Rehearsal(rig, repo, delay=delay, crds_dir=crds_dir) as kept:
        since = time.monotonic()
        report = kept.apply(stack_dir, spec)
        if destroy:
            gone = kept.destroy(stack_dir)
            report["destroy"] = gone["destroy"]
            report["left_after_destroy"] = gone["left_after_destroy"]
            report["jobs"] = kept.runner.snapshot(since)
    report["egress_attempts"] = list(rig.sink.attempts)
    report["ok"] = _verdict(report)
    return report


def _verdict(report: dict[str, Any]) -> bool:
    releases = report.get("apply", {}).get("releases", [])
    if not releases or not all(r["ok"] for r in releases):
        return False
    if any(
        j["exitCode"] != 0
        for j in report.get("jobs", [])
        if j["job"] and "teardown" not in j["job"]
    ):
        return False
    if any(cr["diffs"] for cr in report.get("custom_resources", [])):
        return False
    if not report.get("scheduler_profiles", {"accepted": True})["accepted"]:
        return False
    if "destroy" in report and not all(r["ok"] for r in report["destroy"]["releases"]):
        return False
    return not report.get("left_after_destroy", {}).get("releases")


def _job_said(job: dict[str, Any]) -> str:
    """What a failed Job said of itself: a teardown guard's ``STUCK`` lines (joined), else a
    gate's last ``FAILED`` line, else its last line."""
    verdict = job.get("verdict") or []
    stuck = [ln for ln in verdict if " STUCK " in ln]
    if stuck:
        return "; ".join(stuck)
    if verdict:
        return str(verdict[-1])
    return str(job["lastLines"][-1]) if job.get("lastLines") else ""


def error_lines(
    report: dict[str, Any], phases: tuple[str, ...] = ("apply", "destroy")
) -> list[str]:
    """One ``error[rig.release]`` line per release whose apply (or destroy: ``phase=destroy``)
    failed, in the report's order: the failed Job's own words (:func:`_job_said`) with Helm's
    line after them, or -- no Job of that name failed -- Helm's (or the engine's) line alone. A
    failed Job's fix names the charts served as empty stubs, if any."""
    failed_jobs = {j["job"]: j for j in report.get("jobs", []) if j["exitCode"] not in (0, None)}
    stubs = [f"{c['chart']} {c['version']}" for c in report.get("charts", []) if c["how"] == "stub"]
    stubbed = (
        f"; {len(stubs)} {'charts were empty stubs' if len(stubs) > 1 else 'chart was an empty stub'} "
        f"({', '.join(stubs)}): a gate or CRD step that "
        "reads one of them fails, so give --charts a folder holding them (docs/rehearse.md)"
        if stubs
        else ""
    )
    out = []
    for phase in phases:
        for r in report.get(phase, {}).get("releases", []):
            if r["ok"] is not False or r["message"].startswith("not started:"):
                continue
            job = failed_jobs.get(r["release"])
            said = _job_said(job) if job else ""
            said = f"{said} (Helm: {r['message']})" if said else r["message"]
            where = [("release", r["release"]), ("namespace", r["namespace"])]
            if phase == "destroy":
                where.append(("phase", "destroy"))
                fix = "read the guard's STUCK lines and the recovery it printed"
            elif job:
                fix = "read the release's job and values" + stubbed
            else:
                fix = (
                    "the server or Helm refused the release's objects: check the charts line below "
                    "(a stub or re-versioned chart lacks what the pinned one defines, e.g. a CRD) and "
                    "the release's values"
                )
            out.append(format_line("error", "rig.release", said, where=where, fix=fix))
    return out


def render_text(report: dict[str, Any]) -> str:
    """The report as lines a person reads (one block per cluster)."""
    lines = [f"cluster {report['cluster']}: {'passed' if report['ok'] else 'FAILED'}"]
    apply = report.get("apply", {})
    rel = apply.get("releases", [])
    lines.append(
        f"  apply: {sum(1 for r in rel if r['ok'])}/{len(rel)} releases deployed, makespan {apply.get('makespan_seconds')} s"
    )
    lines.extend(f"  {ln}" for ln in error_lines(report, ("apply",)))
    skipped = [r["release"] for r in rel if r["ok"] is None]
    if skipped:
        lines.append(f"  not started (a release they depend on failed): {', '.join(skipped)}")
    for j in report.get("jobs", []):
        state = "passed" if j["exitCode"] == 0 else f"exit {j['exitCode']}"
        lines.append(
            f"  job {j['namespace']}/{j['job']} as serviceaccount {j['serviceAccount']}: {state} in {j['seconds']} s"
        )
        if j["exitCode"] not in (0, None):
            lines.extend(f"    | {ln}" for ln in j["lastLines"][-3:])
    for p in report.get("placement", []):
        pools = ", ".join(f"{k} x{v}" for k, v in p["pools"].items())
        lines.append(f"  {p['kind']} {p['namespace']}/{p['name']}: {pools}")
    lines.extend(f"  {w}" for w in report.get("placement_findings", []))
    bad = [c for c in report.get("custom_resources", []) if c["diffs"]]
    lines.append(
        f"  custom resources read back: {len(report.get('custom_resources', []))}, changed by the server: {len(bad)}"
    )
    for c in bad:
        lines.append(
            f"  error[rig.custom-resource] release={c['release']} {c['kind']}/{c['name']}: {'; '.join(c['diffs'][:3])}"
        )
    profiles = report.get("scheduler_profiles")
    if profiles and profiles["accepted"]:
        lines.append(
            f"  scheduler profiles: {', '.join(profiles['profiles'])} started by the real kube-scheduler "
            f"(SchedulerConfiguration {aks_scheduler.NAME} as applied)"
        )
    elif profiles:
        lines.append(
            "  "
            + format_line(
                "error",
                "rig.scheduler-profiles",
                profiles["message"],
                where=(("resource", f"SchedulerConfiguration/{aks_scheduler.NAME}"),),
                fix="read the scheduler's reason and correct schedulerProfiles in the cluster file (docs/scheduler-profiles.md)",
            )
        )
    charts = report.get("charts", [])
    lines.append(
        "  charts: " + ", ".join(f"{c['chart']} {c['version']} ({c['how']})" for c in charts)
    )
    if "destroy" in report:
        d = report["destroy"]
        lines.append(
            f"  destroy: {sum(1 for r in d['releases'] if r['ok'])}/{len(d['releases'])} releases removed in {d['makespan_seconds']} s; left: {report['left_after_destroy']['releases'] or 'nothing'}"
        )
        lines.extend(f"  {ln}" for ln in error_lines(report, ("destroy",)))
    attempts = report.get("egress_attempts", [])
    lines.append(
        f"  API server attempts to leave loopback: {len(attempts)}, all refused by the egress sink"
        + (f" ({', '.join(sorted(set(attempts)))})" if attempts else "")
    )
    return "\n".join(lines)


def _check_folders(charts: Path | None, crds: Path | None) -> None:
    """Refuse a ``--charts``/``--crds`` that is not a folder, a ``--charts`` folder without one
    unpacked chart (``<folder>/Chart.yaml``), and one whose ``Chart.yaml`` is not YAML or names no
    version: one :class:`~gpucluster.errors.GpuclusterError` line (``rig.input``) before anything
    starts, instead of serving every chart as a stub or failing inside the chart repository."""
    for option, folder, what in (
        ("--charts", charts, "a folder of unpacked charts"),
        ("--crds", crds, "a folder of CRD manifests"),
    ):
        if folder is not None and not folder.is_dir():
            raise GpuclusterError(
                f"{folder} is not a folder",
                id="rig.input",
                key=option,
                fix=f"name {what} (docs/rehearse.md), or leave {option} out",
            )
    for chart_yaml in sorted(charts.glob("*/Chart.yaml")) if charts is not None else []:
        try:
            meta = yaml.safe_load(chart_yaml.read_text(encoding="utf-8"))
            why = "" if isinstance(meta, dict) and meta.get("version") else "names no version"
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            why = f"is not YAML: {' '.join(str(exc).split())[:200]}"
        if why:
            raise GpuclusterError(
                f"{chart_yaml} {why}",
                id="rig.input",
                key="--charts",
                fix="give each chart folder the Chart.yaml of its chart (name and version), or move "
                "that folder out of --charts",
            )
    if charts is not None and not any(charts.glob("*/Chart.yaml")):
        raise GpuclusterError(
            f"{charts} holds no unpacked chart (no <folder>/Chart.yaml in it)",
            id="rig.input",
            key="--charts",
            fix="unpack each chart into its own folder there (tar xzf CHART.tgz, or helm pull --untar), "
            "or leave --charts out to serve every chart as a stub (only for a stack whose charts "
            "own no CRDs)",
        )


def _check_stubs_suffice(clusters: list[Any]) -> None:
    """Without ``--charts`` every chart is an empty stub: refuse, before anything starts, a
    cluster whose stack installs a chart that owns CRDs (the catalog's ``crds.owns``,
    :func:`gpucluster.charts.crds.crd_owners`) -- its CRD step, custom resources and gates need
    the CRDs only the real chart carries, so the rehearsal would fail after the rig started.
    One :class:`~gpucluster.errors.GpuclusterError` line (``rig.input``, ``key=--charts``)
    naming the first such cluster and its charts."""
    from gpucluster.charts.crds import crd_owners
    from gpucluster.pipeline import build_plan

    for raw in clusters:
        plan = build_plan(raw)
        owners = sorted(set(crd_owners(plan.components).values()))
        if not owners:
            continue
        named = [f"{plan.components[c].ref.chart} {plan.components[c].ref.version}" for c in owners]
        raise GpuclusterError(
            f"without --charts every chart is an empty stub, and this cluster installs "
            f"{len(named)} chart(s) whose CRDs its CRD steps, custom resources and gates need "
            f"({', '.join(named)})",
            id="rig.input",
            cluster=plan.cluster.name,
            key="--charts",
            fix="give --charts a folder of the unpacked charts: `gpucluster images --format json` "
            "lists them, `helm pull NAME --repo REPO --version VERSION --untar --untardir DIR` "
            "fetches each (docs/rehearse.md)",
        )


def _check_no_kept_rig(folder: Path, clusters: list[Any], binaries: Path) -> None:
    """Refuse a work folder that holds a rig cluster of an earlier rehearsal (``--keep``, or one
    killed before it could stop): kwokctl would try to continue it from this run's network
    namespace, where its ports answer nothing, and wait out its deadline. One ``rig.input``
    line with the command that stops it."""
    for spec in clusters:
        workdir = folder / spec.name / "rig" / "kwok"
        name = f"rig-{spec.name}"[:40]
        if (workdir / "clusters" / name).exists():
            raise GpuclusterError(
                f"{folder} holds the rig cluster {name} of an earlier rehearsal (kept with --keep, "
                "or stopped before it could be deleted)",
                id="rig.input",
                key="--work",
                fix=f"stop it: KWOK_WORKDIR={workdir} {binaries / 'kwokctl'} --name {name} delete "
                "cluster; or name another --work folder",
            )


def check_input(
    *,
    config: Path | None,
    cluster_name: str | None,
    charts: Path | None,
    crds: Path | None,
) -> tuple[Path | None, list[Any]]:
    """Check a rehearsal's input before anything starts: the ``--charts``/``--crds`` folders,
    the cluster file (no ``config``: the one every command reads, ``GPUCLUSTER_CONFIG`` or
    ``./gpucluster.yaml``, else the built-in example), ``cluster_name`` among its clusters, and
    -- without ``charts`` -- that no chosen cluster needs a chart's CRDs
    (:func:`_check_stubs_suffice`).

    Returns:
        The cluster file (None: the built-in example) and the chosen clusters, prepared
        (``gpucluster.pipeline.prepare_cluster``), in file order.

    Raises:
        GpuclusterError: one ``rig.input`` line (or the cluster file's own error).
    """
    from gpucluster.inputs.config import EMBEDDED_SOURCE, cluster_file, load_clusters
    from gpucluster.pipeline import prepare_cluster

    # No --config: the file every command reads (GPUCLUSTER_CONFIG, ./gpucluster.yaml), so the
    # stack synthesized from the copy is the one of the clusters loaded here.
    found = cluster_file(str(config) if config else None)
    config = Path(found) if found else None
    _check_folders(charts, crds)
    loaded = load_clusters(str(config) if config else None)
    clusters = [prepare_cluster(c) for c in loaded]
    if cluster_name:
        names = [c.name for c in clusters]
        loaded = [c for c in loaded if c.name == cluster_name]
        clusters = [c for c in clusters if c.name == cluster_name]
        if not clusters:
            raise GpuclusterError(
                f"no cluster named {cluster_name!r} in the cluster file",
                id="rig.input",
                file=str(config) if config else EMBEDDED_SOURCE,
                key="--cluster",
                allowed=allowed_list(names),
                fix="name one of the file's clusters, or leave --cluster out to rehearse every one",
            )
    if charts is None:
        _check_stubs_suffice(loaded)
    return config, clusters


def run(
    *,
    config: Path | None,
    cluster_name: str | None,
    folder: Path,
    binaries: Path,
    charts: Path | None,
    crds: Path | None,
    delay: float = 3.0,
    keep: bool = False,
    mutate: Callable[[Path], None] | None = None,
) -> list[dict[str, Any]]:
    """Rehearse every cluster of ``config`` (or ``cluster_name``): the reports, in file order.
    Its input is checked first (:func:`check_input`).

    ``mutate`` (tests) is called with each runtime stack's folder after synthesis, before the
    apply: a way to break one thing on purpose."""
    config, clusters = check_input(
        config=config, cluster_name=cluster_name, charts=charts, crds=crds
    )
    _check_no_kept_rig(folder, clusters, binaries)
    reports = []
    kept: list[Cluster] = []
    try:
        for spec in clusters:
            work = folder / spec.name
            work.mkdir(parents=True, exist_ok=True)
            report: dict[str, Any] | None = None
            rig = Cluster(binaries, work / "rig", name=f"rig-{spec.name}"[:40])
            env = _synth_env(rig)
            repo = ChartRepo(work / "charts", binaries / "helm", charts, env)
            repo.start()
            try:
                copy = mirrored_config(config, work, repo.url)
                synth(copy, work / "cdktf.out", env)
                if mutate is not None:
                    mutate(work / "cdktf.out" / "stacks" / f"{spec.name}-runtime")
                rig.start()
                started = time.monotonic()
                report = rehearse_cluster(
                    spec,
                    work / "cdktf.out" / "stacks" / f"{spec.name}-runtime",
                    rig,
                    repo,
                    delay=delay,
                    crds_dir=crds,
                    destroy=not keep,
                )
                report["seconds"] = round(time.monotonic() - started, 1)
                if keep:
                    report["kubeconfig"] = str(rig.kubeconfig)
                    report["stop"] = (
                        f"KWOK_WORKDIR={rig.workdir} {binaries / 'kwokctl'} --name {rig.name} delete cluster"
                    )
                reports.append(report)
                if keep:
                    kept.append(rig)
            finally:
                # a cluster is kept only once its report says how to stop it
                if not keep or report is None:
                    rig.stop()
                    repo.stop()
                if report is not None:  # none for a cluster an error or a signal cut short
                    (work / "report.json").write_text(
                        json.dumps(report, indent=1, sort_keys=True) + "\n"
                    )
    except BaseException:  # one error line and no report: no kept rig the user was not told of
        for earlier in kept:
            earlier.stop()
        raise
    return reports


def in_private_network() -> bool:
    """Whether this process's network namespace has no interface but loopback (``/proc/net/dev``)."""
    try:
        lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    except OSError:
        return False
    names = {ln.split(":", 1)[0].strip() for ln in lines}
    return names <= {"lo"}


def isolate_argv(argv: list[str]) -> list[str] | None:
    """The command that runs ``argv`` in a new network namespace with only loopback up
    (``unshare --net``, as root; ``--map-root-user`` otherwise), or None when unshare is missing."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    script = 'ip link set lo up 2>/dev/null || true; exec "$@"'
    return [unshare, "--net", *user, "--", "sh", "-c", script, "sh", *argv]

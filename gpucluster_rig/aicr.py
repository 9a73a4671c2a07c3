"""AICR's own ``deploy.sh`` on a rig, beside gpucluster's stack from the same RecipeResult on another.

The side-by-side comparison of docs/rehearse.md:

* **theirs**: the bundle NVIDIA AI Cluster Runtime (AICR) wrote (``aicr bundle``: ``deploy.sh``
  and one folder per component) is copied and only its chart references are rewritten to the
  rig's chart repository on 127.0.0.1 (:func:`rewrite_deploy`: every ``--repo URL`` becomes the
  repository's URL; every ``oci://…`` chart reference becomes the URL of that chart's archive
  in the same repository, as Helm accepts a chart archive URL in place of a chart reference). Then
  ``bash deploy.sh`` runs with the Helm 4 CLI first on PATH (:func:`gpucluster_rig.build.helm4`),
  the rig's ``kubectl``, ``KUBECONFIG`` of the rig, on a fresh rig (:func:`run_deploy`);
* **ours**: the bundle's RecipeResult as a cluster's ``recipe`` (a one-cluster file), rehearsed on
  another fresh rig (:func:`gpucluster_rig.rehearse.run`, kept up until its readiness is read);
* the same KWOK nodes (the cluster's pools), the same chart sources
  (:class:`gpucluster_rig.charts.ChartRepo`), the same operator stand-ins and delay
  (:class:`gpucluster_rig.standins.StandIns`), and the same readiness check
  (:func:`gpu_stack_ready`).

Makespan: theirs is ``deploy.sh``'s wall time (its pre-flight checks included); ours is the
apply's (first release started to last finished). Retry sleeps of ``deploy.sh`` are summed
apart from its output (``RETRY: … retrying in Ns``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucluster_rig.build import RigError
from gpucluster_rig.charts import ChartRepo
from gpucluster_rig.cluster import Cluster
from gpucluster_rig.nodes import nodes_for
from gpucluster_rig.standins import StandIns

RECIPE = "h100-aks-ubuntu-training.recipe.yaml"
"""The RecipeResult beside the bundle our side is synthesized from."""


@dataclass(frozen=True)
class ChartRef:
    """One ``helm upgrade --install`` of ``deploy.sh``: release, chart reference, repository, version."""

    release: str
    chart: str  # a chart name (with --repo) or an oci:// reference
    repo: str  # the --repo URL, "" for an oci:// reference
    version: str

    @property
    def name(self) -> str:
        """The chart's name: the reference's last path segment for ``oci://``."""
        return self.chart.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Rewrite:
    """One URL replaced in ``deploy.sh``: its line (1-based), the URL before and after."""

    line: int
    before: str
    after: str

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "before": self.before, "after": self.after}


_INSTALL = re.compile(r"helm upgrade --install\s+(\S+)\s+(\S+)((?:\s+--?[\w-]+(?:\s+[^-\s]\S*)?)*)")


def chart_refs(deploy: str) -> list[ChartRef]:
    """Every ``helm upgrade --install RELEASE CHART [--repo URL] --version V`` of ``deploy``
    (continuation lines joined), in the script's order."""
    joined = re.sub(r"\\\n\s*", " ", deploy)
    out = []
    for m in _INSTALL.finditer(joined):
        flags = m.group(3)
        repo = re.search(r"--repo\s+(\S+)", flags)
        version = re.search(r"--version\s+(\S+)", flags)
        out.append(
            ChartRef(
                m.group(1),
                m.group(2),
                repo.group(1) if repo else "",
                version.group(1) if version else "",
            )
        )
    return out


def rewrite_deploy(deploy: str, repo_url: str) -> tuple[str, list[Rewrite]]:
    """``deploy`` with every chart repository URL pointing at ``repo_url``; the rewrites made.

    ``--repo https://…`` → ``--repo <repo_url>``; an ``oci://…/<chart>`` chart reference →
    ``<repo_url>/<chart>-<version>.tgz`` (the archive :class:`ChartRepo` serves). Nothing else of
    the text changes (tests/rig/test_aicr.py compares the two texts line by line).

    Raises:
        RigError: ``rig.aicr`` when an ``oci://`` reference has no ``--version``.
    """
    by_chart = {r.chart: r for r in chart_refs(deploy)}
    lines = deploy.split("\n")
    rewrites: list[Rewrite] = []
    for i, line in enumerate(lines):
        for url in re.findall(r"(?<=--repo )https?://\S+", line):
            lines[i] = lines[i].replace(url, repo_url, 1)
            rewrites.append(Rewrite(i + 1, url, repo_url))
        for ref in re.findall(r"oci://\S+", line):
            chart = by_chart.get(ref)
            if chart is None or not chart.version:
                raise RigError(
                    "aicr",
                    f"deploy.sh line {i + 1}: {ref} has no --version to name its archive",
                    "give the helm command a --version",
                )
            after = f"{repo_url}/{chart.name}-{chart.version}.tgz"
            lines[i] = lines[i].replace(ref, after, 1)
            rewrites.append(Rewrite(i + 1, ref, after))
    return "\n".join(lines), rewrites


def prepare_bundle(
    bundle: Path, dest: Path, repo: ChartRepo
) -> tuple[list[ChartRef], list[Rewrite]]:
    """Copy ``bundle`` to ``dest``, serve every chart ``deploy.sh`` installs from ``repo``
    (indexed), and rewrite its repository URLs to ``repo``; (the charts, the rewrites)."""
    shutil.copytree(bundle, dest)
    script = dest / "deploy.sh"
    text = script.read_text(encoding="utf-8")
    refs = chart_refs(text)
    for ref in refs:
        repo.add(ref.name, ref.version)
    repo.index()
    new, rewrites = rewrite_deploy(text, repo.url)
    script.write_text(new, encoding="utf-8")
    return refs, rewrites


def _items(cluster: Cluster, resource: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", resource, "-A", "-o", "json", check=False)
    try:
        return list(json.loads(out)["items"]) if out else []
    except (ValueError, KeyError):
        return []


def gpu_stack_ready(cluster: Cluster) -> dict[str, Any]:
    """Whether the GPU stack is up, read from the server: ``{"ready": bool, "checks": [...]}``.

    Checks: at least one ClusterPolicy, each ``status.state: ready``; where the
    ``network-operator`` Deployment runs, at least one NicClusterPolicy, each ``ready`` (without
    one the operator configures no RDMA device plugin, multus or IPAM); the DRA driver's kubelet-plugin DaemonSet exists with every desired pod ready (and at
    least one); no Deployment or DaemonSet of the GPU and network operator namespaces short of
    ready pods. ``ready`` only when every check passed (nothing seen is not ready).
    """
    checks: list[dict[str, Any]] = []
    policies = _items(cluster, "clusterpolicies.v1.nvidia.com")
    states = {p["metadata"]["name"]: (p.get("status") or {}).get("state") for p in policies}
    checks.append(
        {
            "check": "ClusterPolicy ready",
            "ok": bool(states) and all(s == "ready" for s in states.values()),
            "saw": states or "no ClusterPolicy",
        }
    )
    nics = _items(cluster, "nicclusterpolicies.v1alpha1.mellanox.com")
    network = [
        d for d in _items(cluster, "deployments") if d["metadata"]["name"] == "network-operator"
    ]
    if nics or network:
        nstates = {p["metadata"]["name"]: (p.get("status") or {}).get("state") for p in nics}
        checks.append(
            {
                "check": "NicClusterPolicy ready",
                "ok": bool(nstates) and all(s == "ready" for s in nstates.values()),
                "saw": nstates or "the network-operator runs and no NicClusterPolicy exists",
            }
        )
    daemonsets = _items(cluster, "daemonsets")
    plugin = [d for d in daemonsets if "kubelet-plugin" in d["metadata"]["name"]]
    checks.append(
        {
            "check": "DRA kubelet plugin rolled out",
            "ok": bool(plugin)
            and all(
                (d.get("status") or {}).get("desiredNumberScheduled", 0) > 0
                and (d["status"].get("numberReady") == d["status"]["desiredNumberScheduled"])
                for d in plugin
            ),
            "saw": {
                f"{d['metadata']['namespace']}/{d['metadata']['name']}": f"{(d.get('status') or {}).get('numberReady', 0)}/{(d.get('status') or {}).get('desiredNumberScheduled', 0)}"
                for d in plugin
            }
            or "no kubelet-plugin DaemonSet",
        }
    )
    short = []
    for d in _items(cluster, "deployments"):
        st = d.get("status") or {}
        if (d["spec"].get("replicas") or 0) > (st.get("readyReplicas") or 0):
            short.append(f"Deployment {d['metadata']['namespace']}/{d['metadata']['name']}")
    checks.append({"check": "every Deployment ready", "ok": not short, "saw": short or "all ready"})
    return {"ready": all(c["ok"] for c in checks), "checks": checks}


def run_deploy(
    bundle: Path,
    folder: Path,
    binaries: Path,
    helm4: Path,
    *,
    charts: Path | None,
    nodes: list[dict[str, Any]],
    delay: float,
    ippool_crd: Path | None,
    args: tuple[str, ...] = (),
    timeout: float = 3600,
) -> dict[str, Any]:
    """``deploy.sh`` of ``bundle`` on a fresh rig in ``folder``; the report (JSON-ready).

    The report: ``charts`` (how each was served), ``rewrites`` (every URL replaced),
    ``exit_code``, ``makespan_seconds`` (``deploy.sh``'s wall time), ``retry_sleep_seconds``,
    ``order`` (each ``Installing <component>`` line with its second), ``failures`` (the lines
    saying ERROR/RETRY/WARNING/Error), ``ready`` (:func:`gpu_stack_ready`), ``stand_ins``, the
    API server's ``egress_attempts``; ``log`` is the output's path.
    """
    folder.mkdir(parents=True, exist_ok=True)
    rig = Cluster(binaries, folder / "rig", name="rig-aicr")
    env = rig.env()
    repo = ChartRepo(folder / "charts", binaries / "helm", charts, env)
    repo.start()
    report: dict[str, Any] = {"side": "aicr deploy.sh", "helm": str(helm4)}
    standins: StandIns | None = None
    try:
        refs, rewrites = prepare_bundle(bundle, folder / "bundle", repo)
        report["charts"] = [repo.served[(r.name, r.version)].as_dict() for r in refs]
        report["rewrites"] = [w.as_dict() for w in rewrites]
        rig.start()
        rig.kubectl(
            "create",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}),
        )
        rig.wait_ready_nodes([n["metadata"]["name"] for n in nodes])
        standins = StandIns(rig, delay=delay, ippool_crd=ippool_crd)
        standins.start()
        run_env = dict(env)
        run_env["PATH"] = f"{helm4.parent}:{binaries}:{env.get('PATH', '/usr/bin:/bin')}"
        run_env["KUBECONFIG"] = str(rig.kubeconfig)
        for key, sub in (
            ("HELM_CACHE_HOME", "cache"),
            ("HELM_CONFIG_HOME", "config"),
            ("HELM_DATA_HOME", "data"),
        ):
            run_env[key] = str(folder / "helm4" / sub)
        log_path = folder / "deploy.log"
        stamped: list[tuple[float, str]] = []
        started = time.monotonic()
        proc = subprocess.Popen(
            ["bash", str(folder / "bundle" / "deploy.sh"), *args],
            cwd=folder / "bundle",
            env=run_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        assert proc.stdout is not None
        with log_path.open("w") as log:
            for line in proc.stdout:
                t = round(time.monotonic() - started, 1)
                stamped.append((t, line.rstrip("\n")))
                log.write(f"{t:7.1f} {line}")
        code = proc.wait()
        timer.cancel()
        report["makespan_seconds"] = round(time.monotonic() - started, 1)
        report["exit_code"] = code
        report["log"] = str(log_path)
        report["order"] = [
            {"component": m.group(1), "start": t}
            for t, ln in stamped
            if (m := re.match(r"Installing (\S+) \(", ln))
        ]
        report["retry_sleep_seconds"] = sum(
            int(m.group(1)) for _, ln in stamped if (m := re.search(r"retrying in (\d+)s", ln))
        )
        report["failures"] = [
            {"second": t, "line": ln}
            for t, ln in stamped
            if re.match(r"\s*(ERROR|RETRY|WARNING|Error|error)\b", ln)
        ]
        report["ready"] = gpu_stack_ready(rig)
        report["stand_ins"] = list(standins.events)
        report["releases"], report["helm_version"] = _helm_facts(helm4, run_env)
    finally:
        if standins is not None:
            standins.stop()
        rig.stop()
        repo.stop()
    report["egress_attempts"] = list(rig.sink.attempts)
    return report


def _helm_facts(helm4: Path, env: dict[str, str]) -> tuple[list[str], str]:
    """The releases Helm 4 lists as ``deployed`` (sorted) and its ``version --short``."""
    listed = subprocess.run(
        [str(helm4), "list", "-A", "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    try:
        releases = sorted(
            r["name"] for r in json.loads(listed.stdout or "[]") if r.get("status") == "deployed"
        )
    except (ValueError, KeyError, TypeError):
        releases = []
    version = subprocess.run(
        [str(helm4), "version", "--short"], capture_output=True, text=True, env=env, timeout=60
    ).stdout.strip()
    return releases, version


def run_ours(
    recipe: Path,
    folder: Path,
    binaries: Path,
    *,
    charts: Path | None,
    crds: Path | None,
    delay: float,
) -> dict[str, Any]:
    """gpucluster's stack from ``recipe`` (a one-cluster file naming it) rehearsed on a fresh rig,
    kept up until :func:`gpu_stack_ready` has read it; the rehearsal's report with ``ready``."""
    from gpucluster_rig import rehearse

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(recipe, folder / recipe.name)
    config = cluster_file(folder, recipe.name)
    reports = rehearse.run(
        config=config,
        cluster_name=None,
        folder=folder / "work",
        binaries=binaries,
        charts=charts,
        crds=crds,
        delay=delay,
        keep=True,
    )
    report = reports[0]
    rig = Cluster(
        binaries, folder / "work" / report["cluster"] / "rig", name=f"rig-{report['cluster']}"[:40]
    )
    rig.started = True
    try:
        report["ready"] = gpu_stack_ready(rig)
    finally:
        rig.stop()
    return report


CLUSTER = "aicr-training"
"""The one cluster's name in the file :func:`cluster_file` writes."""


def cluster_file(folder: Path, recipe_name: str) -> Path:
    """``folder/gpucluster.yaml``: one AKS cluster whose components are the RecipeResult's."""
    path = folder / "gpucluster.yaml"
    path.write_text(
        f"clusters:\n  - name: {CLUSTER}\n    recipe: {recipe_name}\n", encoding="utf-8"
    )
    return path


def nodes_of(config: Path) -> list[dict[str, Any]]:
    """The KWOK nodes of the file's first cluster (:func:`gpucluster_rig.nodes.nodes_for`)."""
    from gpucluster.inputs.config import load_clusters
    from gpucluster.pipeline import prepare_cluster

    (spec,) = [prepare_cluster(c) for c in load_clusters(str(config))][:1]
    return nodes_for(spec)


def compare(
    bundle: Path,
    folder: Path,
    binaries: Path,
    helm4: Path,
    *,
    charts: Path | None,
    crds: Path | None,
    delay: float,
    deploy_args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Both sides, one after the other (2 cores do not run two rigs fairly side by side):
    ``{"aicr": report, "gpucluster": report, "ratio": aicr/ours makespan}``."""
    recipe = bundle.parent / RECIPE
    ippool = crds / "nv-ipam.nvidia.com" / "nv-ipam.nvidia.com_ippools.yaml" if crds else None
    shutil.copyfile(recipe, _fresh(folder / "nodes") / recipe.name)
    nodes = nodes_of(cluster_file(folder / "nodes", recipe.name))
    theirs = run_deploy(
        bundle,
        folder / "aicr",
        binaries,
        helm4,
        charts=charts,
        nodes=nodes,
        delay=delay,
        ippool_crd=ippool if ippool and ippool.is_file() else None,
        args=deploy_args,
    )
    ours = run_ours(recipe, folder / "gpucluster", binaries, charts=charts, crds=crds, delay=delay)
    a, b = theirs.get("makespan_seconds"), ours.get("apply", {}).get("makespan_seconds")
    return {
        "aicr": theirs,
        "gpucluster": ours,
        "ratio": round(a / b, 2) if a and b else None,
    }


def _fresh(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder

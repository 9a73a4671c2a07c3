"""gpucluster's own Jobs run for real on the rig: gates, CRD steps and teardown guards.

KWOK makes every pod Running without running anything, and completes other Jobs' pods by itself
(:mod:`gpucluster_rig.cluster`). Our Jobs' pods (label ``app.kubernetes.io/part-of: gpucluster``)
are left to :class:`JobRunner`, which for each one:

1. asks the API server for a token of **the pod's own ServiceAccount**, bound to the pod
   (TokenRequest, ``kubectl create token --bound-object-kind Pod``);
2. runs the pod's container command on this host in a bubblewrap sandbox
   (https://github.com/containers/bubblewrap) that shows it what the container would see: its
   volumes at their mount paths -- ``emptyDir``, ``configMap``, ``secret`` and the ``projected``
   ``kube-api-access-*`` volume the ServiceAccount admission plugin added (that token, the
   ``kube-root-ca.crt`` ConfigMap's ``ca.crt``, the namespace) at
   ``/var/run/secrets/kubernetes.io/serviceaccount`` -- its ``env``, ``KUBERNETES_SERVICE_HOST``
   and ``_PORT`` naming the rig's API server on 127.0.0.1, and the rig's ``kubectl`` first on
   PATH; the host's programs and libraries are read-only inside, nothing else of it is there;
3. writes the real exit code into the pod's status (``phase`` Succeeded/Failed, the container's
   ``terminated`` state), so the Job controller -- and its ``podFailurePolicy`` -- acts on it.

Each run is recorded (:class:`Run`): pod, ServiceAccount, exit code, seconds, the last lines of
output.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpucluster_rig.build import RigError
from gpucluster_rig.cluster import OWN_JOB_LABEL, Cluster

HOST_DIRS = ("usr", "etc", "bin", "sbin", "lib", "lib64", "lib32", "libx32")
"""Host folders the sandbox shows read-only (links such as merged-usr ``/bin -> usr/bin`` as links)."""


def _root() -> list[str]:
    """bubblewrap arguments of the sandbox's root: an empty tmpfs with the host's programs and
    libraries read-only, ``/proc``, ``/dev``, a writable ``/run`` and ``/var/run`` linking to it."""
    args = ["--tmpfs", "/"]
    for name in HOST_DIRS:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), f"/{name}"]
        elif path.is_dir():
            args += ["--ro-bind", str(path), f"/{name}"]
    return [
        *args,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--dir",
        "/run",
        "--dir",
        "/var",
        "--symlink",
        "../run",
        "/var/run",
    ]


@dataclass
class Run:
    """One of our Job pods, run: ``exit_code`` None while it runs."""

    namespace: str
    pod: str
    job: str
    service_account: str
    started: float
    node: str = ""
    exit_code: int | None = None
    seconds: float = 0.0
    output: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "pod": self.pod,
            "job": self.job,
            "serviceAccount": self.service_account,
            "node": self.node,
            "exitCode": self.exit_code,
            "seconds": round(self.seconds, 1),
            "lastLines": self.output[-5:],
            "verdict": [ln for ln in self.output if "FAILED" in ln or " STUCK " in ln][-10:],
        }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class JobRunner:
    """Watches the rig for our Job pods and runs each once (see the module docstring).

    Args:
        cluster: the started rig cluster.
        poll: seconds between two looks for new pods.
    """

    def __init__(self, cluster: Cluster, poll: float = 0.5) -> None:
        if shutil.which("bwrap") is None:
            raise RigError(
                "runner",
                "the rig runs gpucluster's Job pods in a bubblewrap sandbox and `bwrap` is not on PATH",
                "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)",
            )
        self.cluster = cluster
        self.poll = poll
        self.runs: list[Run] = []
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        server = cluster.server().removeprefix("https://")
        self._host, self._port = server.rsplit(":", 1)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="job-runner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        selector = f"{OWN_JOB_LABEL[0]}={OWN_JOB_LABEL[1]}"
        while not self._stop.is_set():
            try:
                pods = json.loads(
                    self.cluster.kubectl(
                        "get", "pods", "-A", "-l", selector, "-o", "json", check=False
                    )
                    or '{"items": []}'
                )["items"]
            except (ValueError, RigError, subprocess.TimeoutExpired):
                pods = []
            for pod in pods:
                uid = pod["metadata"]["uid"]
                if uid in self._seen or pod.get("status", {}).get("phase") != "Running":
                    continue
                if pod["metadata"].get("deletionTimestamp"):
                    continue
                self._seen.add(uid)
                threading.Thread(target=self._run, args=(pod,), daemon=True).start()
            self._stop.wait(self.poll)

    def _run(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        ns, name = meta["namespace"], meta["name"]
        owner = next(
            (o["name"] for o in meta.get("ownerReferences", []) if o.get("kind") == "Job"), ""
        )
        sa = spec.get("serviceAccountName", "default")
        run = Run(ns, name, owner, sa, time.monotonic(), node=spec.get("nodeName", ""))
        with self._lock:
            self.runs.append(run)
        container = spec["containers"][0]
        work = Path(tempfile.mkdtemp(prefix=f"job-{name}-", dir=self.cluster.folder))
        try:
            code, lines = self._execute(ns, name, sa, spec, container, work)
        except Exception as exc:  # the rig's own failure, reported on the pod as exit 125
            code, lines = 125, [f"rig runner: {exc}"]
        run.exit_code, run.output, run.seconds = code, lines, time.monotonic() - run.started
        (self.cluster.folder / "jobs").mkdir(exist_ok=True)
        (self.cluster.folder / "jobs" / f"{ns}.{name}.log").write_text("\n".join(lines) + "\n")
        self._report(ns, name, container["name"], code, pod)
        shutil.rmtree(work, ignore_errors=True)  # it holds the pod's ServiceAccount token

    def _execute(
        self,
        ns: str,
        name: str,
        sa: str,
        spec: dict[str, Any],
        container: dict[str, Any],
        work: Path,
    ) -> tuple[int, list[str]]:
        token = self.cluster.kubectl(
            "create",
            "token",
            sa,
            "-n",
            ns,
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            name,
            "--duration",
            "1h",
        ).strip()
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        binds: list[str] = []
        for mount in container.get("volumeMounts", []):
            vol = volumes.get(mount["name"], {})
            src = work / "volumes" / mount["name"]
            if not src.exists():
                src.mkdir(parents=True)
                self._fill_volume(ns, vol, src, token)
            writable = "emptyDir" in vol and not mount.get("readOnly")
            target = mount["mountPath"]
            if target == "/var/run" or target.startswith("/var/run/"):
                target = target[len("/var") :]  # through the sandbox's /var/run -> ../run link
            binds += ["--bind" if writable else "--ro-bind", str(src), target]
        env = {"PATH": "/run/gpucluster-rig/bin:/usr/local/bin:/usr/bin:/bin"}
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = item["value"]
        env["KUBERNETES_SERVICE_HOST"] = self._host
        env["KUBERNETES_SERVICE_PORT"] = self._port
        cmd = [
            "bwrap",
            *_root(),
            "--ro-bind",
            str(self.cluster.binaries),
            "/run/gpucluster-rig/bin",
            *binds,
            "--unshare-pid",
            "--die-with-parent",
            "--clearenv",
        ]
        for k, v in env.items():
            cmd += ["--setenv", k, v]
        cmd += ["--", *container.get("command", []), *container.get("args", [])]
        deadline = float(spec.get("activeDeadlineSeconds") or 3600)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=deadline, cwd="/")
            out = (proc.stdout + proc.stderr).splitlines()
            return proc.returncode, out[-50:]
        except subprocess.TimeoutExpired as exc:
            out = (
                (exc.stdout or b"").decode(errors="replace")
                if isinstance(exc.stdout, bytes)
                else (exc.stdout or "")
            ).splitlines()
            return 124, [
                *out[-49:],
                f"rig runner: killed after activeDeadlineSeconds {deadline:.0f}",
            ]

    def _fill_volume(self, ns: str, vol: dict[str, Any], dest: Path, token: str) -> None:
        """Write a volume's files: ``configMap``, ``secret`` and ``projected`` (the ServiceAccount
        token from the TokenRequest, ``kube-root-ca.crt``, the namespace from the downward API:
        what the ServiceAccount admission plugin's ``kube-api-access-*`` volume holds)."""
        if "projected" in vol:
            for source in vol["projected"].get("sources", []):
                if "serviceAccountToken" in source:
                    (dest / source["serviceAccountToken"].get("path", "token")).write_text(token)
                elif "configMap" in source:
                    cm = json.loads(
                        self.cluster.kubectl(
                            "get", "configmap", source["configMap"]["name"], "-n", ns, "-o", "json"
                        )
                    )
                    data = cm.get("data") or {}
                    for item in source["configMap"].get("items") or [
                        {"key": k, "path": k} for k in data
                    ]:
                        (dest / item["path"]).write_text(data.get(item["key"], ""))
                elif "downwardAPI" in source:
                    for item in source["downwardAPI"].get("items", []):
                        if item.get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
                            (dest / item["path"]).write_text(ns)
        elif "configMap" in vol:
            name = vol["configMap"]["name"]
            obj = json.loads(self.cluster.kubectl("get", "configmap", name, "-n", ns, "-o", "json"))
            for key, value in (obj.get("data") or {}).items():
                (dest / key).write_text(value)
            for key, value in (obj.get("binaryData") or {}).items():
                (dest / key).write_bytes(base64.b64decode(value))
        elif "secret" in vol:
            name = vol["secret"]["secretName"]
            obj = json.loads(self.cluster.kubectl("get", "secret", name, "-n", ns, "-o", "json"))
            for key, value in (obj.get("data") or {}).items():
                (dest / key).write_bytes(base64.b64decode(value))

    def _report(self, ns: str, name: str, container: str, code: int, pod: dict[str, Any]) -> None:
        now = _now()
        status = {
            "status": {
                "phase": "Succeeded" if code == 0 else "Failed",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "PodCompleted",
                        "lastTransitionTime": now,
                    },
                    {
                        "type": "ContainersReady",
                        "status": "False",
                        "reason": "PodCompleted",
                        "lastTransitionTime": now,
                    },
                ],
                "containerStatuses": [
                    {
                        "name": container,
                        "image": pod["spec"]["containers"][0]["image"],
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "started": False,
                        "state": {
                            "terminated": {
                                "exitCode": code,
                                "reason": "Completed" if code == 0 else "Error",
                                "startedAt": pod.get("status", {}).get("startTime", now),
                                "finishedAt": now,
                            }
                        },
                    }
                ],
            }
        }
        self.cluster.kubectl(
            "patch",
            "pod",
            name,
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(status),
            check=False,
        )

    def snapshot(self, since: float = 0.0) -> list[dict[str, Any]]:
        """Every run started at or after ``since`` (``time.monotonic()``; default: every run so
        far), as JSON-ready dicts."""
        with self._lock:
            return [r.as_dict() for r in self.runs if r.started >= since]

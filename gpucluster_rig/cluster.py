"""A real Kubernetes control plane with simulated nodes, on loopback only: ``kwokctl --runtime binary``.

kwokctl (sigs.k8s.io/kwok) starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and the kwok controller as plain processes from the binaries :mod:`gpucluster_rig.build` made
(``kwokctl`` accepts local paths for each). What the rig sets:

* every component bound to ``127.0.0.1``; RBAC on (``kubeAuthorization``), admission on with the
  webhook admission plugins off (no webhook can answer under KWOK: its pods never run);
* the API server's ``cluster`` egress through :class:`gpucluster_rig.sink.EgressSink` (it never
  dials a Service ClusterIP or a pod IP);
* KWOK stages: nodes become Ready and keep leases; pods become Running/Ready, and pods owned by a
  Job complete -- except gpucluster's own Jobs (label ``app.kubernetes.io/part-of: gpucluster``),
  which :mod:`gpucluster_rig.runner` runs for real.

The folder given holds kwokctl's work folder (``KWOK_WORKDIR``), the egress sink and the logs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from gpucluster_rig.build import RigError
from gpucluster_rig.sink import EgressSink

OWN_JOB_LABEL = ("app.kubernetes.io/part-of", "gpucluster")
"""The label of gpucluster's Job pods (gpucluster.charts.jobchart's ``labels``): KWOK leaves them
to the rig's runner."""

_POD_COMPLETE = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": "pod-complete"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {
            "matchExpressions": [
                {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
                {
                    "key": f'.metadata.labels["{OWN_JOB_LABEL[0]}"]',
                    "operator": "NotIn",
                    "values": [OWN_JOB_LABEL[1]],
                },
            ]
        },
        "next": {
            "statusTemplate": (
                "{{ $now := Now }}\n"
                "containerStatuses:\n"
                "{{ range $index, $item := .spec.containers }}\n"
                "- image: {{ $item.image | Quote }}\n"
                "  name: {{ $item.name | Quote }}\n"
                "  ready: false\n"
                "  restartCount: 0\n"
                "  started: false\n"
                "  state:\n"
                "    terminated:\n"
                "      exitCode: 0\n"
                "      finishedAt: {{ $now | Quote }}\n"
                "      reason: Completed\n"
                "      startedAt: {{ $now | Quote }}\n"
                "{{ end }}\n"
                "phase: Succeeded\n"
            )
        },
    },
}
"""KWOK's own ``pod-complete`` stage (kustomize/stage/pod/fast) with one more expression: not our Jobs."""


class Cluster:
    """One rig cluster.

    Args:
        binaries: the folder :func:`gpucluster_rig.build.binaries` returned.
        folder: a fresh folder for kwokctl's work folder, the sink and the logs.
        name: the kwokctl cluster name (DNS-1123).

    After :meth:`start`, :attr:`kubeconfig` is an admin kubeconfig (server ``https://127.0.0.1:<port>``).
    """

    def __init__(self, binaries: Path, folder: Path, name: str = "gpucluster-rig") -> None:
        self.binaries = binaries
        self.folder = folder
        self.name = name
        self.sink = EgressSink(folder)
        self.workdir = folder / "kwok"
        self.started = False

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "clusters" / self.name / "kubeconfig.yaml"

    @property
    def logs(self) -> Path:
        return self.workdir / "clusters" / self.name / "logs"

    def env(self) -> dict[str, str]:
        """The environment of kwokctl and kubectl: ``KWOK_WORKDIR``, no proxy variables (loopback)."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
        }
        env["KWOK_WORKDIR"] = str(self.workdir)
        env["PATH"] = (
            f"{self.binaries}{os.pathsep}{env.get('PATH', '')}"  # kwokctl runs `kubectl` by name
        )
        env["NO_PROXY"] = "127.0.0.1,localhost"
        return env

    def config_documents(self) -> list[dict[str, Any]]:
        """kwokctl's ``--config`` documents: the options, the API server's flags, our stages."""
        b = self.binaries
        egress = self.folder / "egress-selector.yaml"
        return [
            {
                "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
                "kind": "KwokctlConfiguration",
                "options": {
                    "runtime": "binary",
                    "bindAddress": "127.0.0.1",
                    "kubeAuthorization": True,
                    "kubeAdmission": True,
                    "securePort": True,
                    "disableQPSLimits": True,
                    "quietPull": True,
                    "cacheDir": str(self.workdir / "cache"),
                    "kubeApiserverBinary": str(b / "kube-apiserver"),
                    "kubeControllerManagerBinary": str(b / "kube-controller-manager"),
                    "kubeSchedulerBinary": str(b / "kube-scheduler"),
                    "kubectlBinary": str(b / "kubectl"),
                    "kwokControllerBinary": str(b / "kwok"),
                    "etcdBinary": str(b / "etcd"),
                },
                "componentsPatches": [
                    {
                        "name": "kube-apiserver",
                        "extraArgs": [
                            {
                                "key": "disable-admission-plugins",
                                "value": "MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
                            },
                            {"key": "egress-selector-config-file", "value": str(egress)},
                            # a namespace with only loopback has no default route to derive it from
                            {"key": "advertise-address", "value": "127.0.0.1"},
                            {"key": "service-cluster-ip-range", "value": "10.96.0.0/16"},
                        ],
                    }
                ],
            },
            {
                "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
                "kind": "KwokConfiguration",
                # nodes on loopback; a KwokConfiguration given replaces kwok's defaults, so they
                # are written out (kwok v0.8.0 pkg/apis/config/v1alpha1 zz_generated.defaults.go)
                "options": {
                    "nodeIP": "127.0.0.1",
                    "podPlayStageParallelism": 4,
                    "nodePlayStageParallelism": 4,
                    "nodeLeaseParallelism": 4,
                    "podsOnNodeSyncParallelism": 1,
                },
            },
            *_stages(b / "stages.yaml"),
        ]

    def start(self, *, timeout: float = 180) -> None:
        """Start the sink and the cluster; :class:`RigError` ``rig.cluster`` with kwokctl's last line,
        or when kwokctl has not finished ``timeout`` + 60 seconds later."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.sink.start()
        (self.folder / "egress-selector.yaml").write_text(self.sink.config(), encoding="utf-8")
        config = self.folder / "kwokctl.yaml"
        config.write_text(
            yaml.safe_dump_all(self.config_documents(), sort_keys=False), encoding="utf-8"
        )
        cmd = [
            str(self.binaries / "kwokctl"),
            "--name",
            self.name,
            "create",
            "cluster",
            "--config",
            str(config),
            "--wait",
            f"{int(timeout)}s",
        ]
        self.started = True  # before kwokctl: stop() deletes what an interrupted create started
        with (self.folder / "kwokctl.log").open("w") as log:
            try:
                proc = subprocess.run(
                    cmd, env=self.env(), stdout=log, stderr=subprocess.STDOUT, timeout=timeout + 60
                )
            except subprocess.TimeoutExpired:
                raise RigError(
                    "cluster",
                    f"kwokctl create cluster did not finish within {timeout + 60:.0f} s",
                    f"read {self.folder / 'kwokctl.log'} and the component logs in {self.folder / 'logs'}",
                ) from None
        if proc.returncode != 0:
            last = [
                ln for ln in (self.folder / "kwokctl.log").read_text().splitlines() if ln.strip()
            ]
            raise RigError(
                "cluster",
                f"kwokctl create cluster failed: {_said(last[-1]) if last else proc.returncode}",
                f"read {self.folder / 'kwokctl.log'} and the component logs in {self.folder / 'logs'}",
            )

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> str:
        """Run the rig's kubectl as the admin; stdout. :class:`RigError` ``rig.kubectl`` on failure."""
        proc = subprocess.run(
            [
                str(self.binaries / "kubectl"),
                "--kubeconfig",
                str(self.kubeconfig),
                "--request-timeout=30s",
                *args,
            ],
            input=input,
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise RigError(
                "kubectl",
                f"kubectl {' '.join(args[:3])}: {proc.stderr.strip()[-400:]}",
                "see the message",
            )
        return proc.stdout

    def apply(self, objects: list[dict[str, Any]]) -> None:
        """Create ``objects`` (server-side apply as the admin)."""
        self.kubectl(
            "apply",
            "--server-side",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
        )

    def create_namespace(self, name: str, timeout: float = 60) -> None:
        """Create namespace ``name`` and wait until its ``default`` ServiceAccount exists.

        kube-controller-manager's ServiceAccount controller adds that account a moment after the
        namespace; until then the API server refuses a pod in it (``error looking up service
        account <name>/default``). :class:`RigError` ``rig.namespace`` after ``timeout`` seconds.
        """
        self.kubectl("create", "namespace", name)
        deadline = time.monotonic() + timeout
        while not self.kubectl(
            "get", "serviceaccount", "default", "-n", name, "--ignore-not-found", "-o", "name"
        ).strip():
            if time.monotonic() > deadline:
                raise RigError(
                    "namespace",
                    f"namespace {name} has no default ServiceAccount after {timeout:.0f} s",
                    "read kube-controller-manager's log (its serviceaccount controller)",
                )
            time.sleep(0.2)

    def server(self) -> str:
        """``https://127.0.0.1:<port>`` of the API server."""
        conf = yaml.safe_load(self.kubeconfig.read_text())
        return str(conf["clusters"][0]["cluster"]["server"])

    def ca_bytes(self) -> bytes:
        """The cluster CA certificate (PEM) from the kubeconfig (a file path or inline data)."""
        import base64

        cluster = yaml.safe_load(self.kubeconfig.read_text())["clusters"][0]["cluster"]
        if "certificate-authority-data" in cluster:
            return base64.b64decode(cluster["certificate-authority-data"])
        return Path(cluster["certificate-authority"]).read_bytes()

    def stop(self) -> None:
        """Delete the cluster (its processes end) and close the sink; safe to call twice."""
        if self.started:
            if (
                self.logs.is_dir()
            ):  # the components' logs outlive the cluster (the report points at them)
                shutil.copytree(self.logs, self.folder / "logs", dirs_exist_ok=True)
            subprocess.run(
                [str(self.binaries / "kwokctl"), "--name", self.name, "delete", "cluster"],
                env=self.env(),
                capture_output=True,
                timeout=120,
            )
            self.started = False
        self.sink.stop()

    def wait_ready_nodes(self, names: list[str], timeout: float = 60) -> None:
        """Wait until every node of ``names`` is Ready (KWOK's node stages)."""
        deadline = time.monotonic() + timeout
        while True:
            items = json.loads(self.kubectl("get", "nodes", "-o", "json"))["items"]
            ready = {
                n["metadata"]["name"]
                for n in items
                if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in n.get("status", {}).get("conditions", [])
                )
            }
            if set(names) <= ready:
                return
            if time.monotonic() > deadline:
                raise RigError(
                    "nodes",
                    f"nodes not Ready after {timeout:.0f} s: {sorted(set(names) - ready)}",
                    "read the kwok controller's log",
                )
            time.sleep(0.5)


def _said(line: str) -> str:
    """What a kwokctl log line says: a JSON record's ``msg`` and ``err`` (``Execute exit: cmd
    wait: ...``), any other line as it is."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict) or "msg" not in record:
        return line
    return ": ".join(str(record[k]) for k in ("msg", "err") if record.get(k))


def _stages(stages_file: Path) -> list[dict[str, Any]]:
    """KWOK's node and pod stages (:data:`gpucluster_rig.build.KWOK_STAGES`) with our
    ``pod-complete`` (:data:`_POD_COMPLETE`)."""
    docs = [d for d in yaml.safe_load_all(stages_file.read_text(encoding="utf-8")) if d]
    return [*docs, _POD_COMPLETE]

"""AKS's side of Configurable Scheduler Profiles, played on the rig with the real kube-scheduler.

On AKS (the upstream scheduler in the ``ManagedByCRD`` configuration mode) the API serves the
cluster-scoped ``SchedulerConfiguration`` (``aks.azure.com/v1alpha1``) and AKS's controller
overlays the ``spec.rawConfig`` of the one named ``upstream`` on its base scheduler configuration
(Microsoft Learn, "Configure advanced scheduler profiles on AKS":
https://learn.microsoft.com/azure/aks/configure-aks-scheduler). The rig does the same, small:

* :data:`CRD` serves the kind (a stand-in: the real CRD ships with AKS, not in public files; its
  ``spec`` keeps any field, ``spec.rawConfig`` is a string);
* :class:`ProfileScheduler` runs a second real ``kube-scheduler`` (the rig's build) with a
  ``rawConfig`` text kept byte for byte and the rig's own settings appended (its kubeconfig, no
  leader election, its own 127.0.0.1 port): the user's profiles. The base's ``default-scheduler``
  profile stays with kwokctl's scheduler (two processes serving one name would race);
* :func:`check_applied` reads the applied ``upstream`` back from the server and starts that
  scheduler on it: healthy means the real scheduler decoded, validated and built every profile.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from gpucluster_rig.build import RigError
from gpucluster_rig.cluster import Cluster

RESOURCE = "schedulerconfigurations.aks.azure.com"
NAME = "upstream"
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": RESOURCE},
    "spec": {
        "group": "aks.azure.com",
        "scope": "Cluster",
        "names": {
            "kind": "SchedulerConfiguration",
            "listKind": "SchedulerConfigurationList",
            "plural": "schedulerconfigurations",
            "singular": "schedulerconfiguration",
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                                "properties": {"rawConfig": {"type": "string"}},
                            }
                        },
                    }
                },
            }
        ],
    },
}
"""The stand-in CRD of AKS's ``SchedulerConfiguration`` (module docstring)."""

WAIT = 60.0
"""Seconds a started scheduler may take to report healthy (it takes about 1)."""


def config_text(raw_config: str, kubeconfig: Path) -> str:
    """``raw_config`` (a ``KubeSchedulerConfiguration`` whose last top-level key is ``profiles``)
    byte for byte, then the rig's settings: ``clientConnection.kubeconfig`` and no leader election.

    Raises:
        ValueError: ``raw_config`` is not a mapping ending with ``profiles``.
    """
    doc = yaml.safe_load(raw_config)
    if not isinstance(doc, dict) or list(doc)[-1:] != ["profiles"]:
        raise ValueError("rawConfig is not a KubeSchedulerConfiguration ending with profiles")
    text = raw_config if raw_config.endswith("\n") else raw_config + "\n"
    return (
        text + f"clientConnection:\n  kubeconfig: '{kubeconfig}'\n"
        "leaderElection:\n  leaderElect: false\n"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ProfileScheduler:
    """A second ``kube-scheduler`` on the rig, started with a configuration text.

    Args:
        binary: the rig's ``kube-scheduler``.
        folder: where its configuration and log go.
        config: the configuration text (:func:`config_text`).

    It serves ``/healthz`` on ``https://127.0.0.1:<port>`` (a free port); :meth:`stop` ends it by
    its own process id.
    """

    def __init__(self, binary: Path, folder: Path, config: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        path = folder / "scheduler.yaml"
        path.write_text(config, encoding="utf-8")
        self.log = folder / "scheduler.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [
                    str(binary),
                    f"--config={path}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={self.port}",
                    "--v=2",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={"PATH": "/usr/bin:/bin", "HOME": str(folder), "NO_PROXY": "127.0.0.1"},
            )

    def tail(self, lines: int = 3) -> str:
        """The last ``lines`` lines of its log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def wait_healthy(self, timeout: float = WAIT) -> tuple[bool, str]:
        """``(healthy, why not)``: ``/healthz`` answered ``ok``, or the process exited (its log's
        last line) or ``timeout`` seconds passed."""
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # its own self-signed serving certificate, on loopback
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                return False, f"kube-scheduler exited {self.proc.returncode}: {self.tail(1)}"
            try:
                with urllib.request.urlopen(
                    f"https://127.0.0.1:{self.port}/healthz", context=ctx, timeout=2
                ) as r:
                    if r.read() == b"ok":
                        return True, ""
            except OSError:
                pass
            if time.monotonic() > deadline:
                return False, f"kube-scheduler not healthy after {timeout:.0f} s: {self.tail(1)}"
            time.sleep(0.3)

    def stop(self) -> None:
        """End the process (SIGTERM, then SIGKILL after 20 s); safe to call twice."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def serve(rig: Cluster, timeout: float = 60) -> None:
    """Create :data:`CRD` on ``rig`` and wait until it is established (at most ``timeout``
    seconds; :class:`RigError` ``rig.kubectl`` after that).

    Polled, not ``kubectl wait --for=condition=Established``: a CRD just created carries
    ``status.conditions: null`` until the API server's naming controller runs, and kubectl's
    wait fails on that null (``.status.conditions accessor error: <nil>``) instead of waiting.
    """
    rig.apply([CRD])
    query = '{.status.conditions[?(@.type=="Established")].status}'
    deadline = time.monotonic() + timeout
    while rig.kubectl("get", f"crd/{RESOURCE}", "-o", f"jsonpath={query}").strip() != "True":
        if time.monotonic() > deadline:
            raise RigError(
                "kubectl",
                f"crd/{RESOURCE} not Established after {timeout:.0f} s",
                "see the API server's log in the rig's folder",
            )
        time.sleep(0.2)


def check_applied(rig: Cluster, folder: Path) -> dict[str, Any] | None:
    """Start a :class:`ProfileScheduler` on the applied ``SchedulerConfiguration`` ``upstream``.

    Returns:
        None when there is none, else ``{"profiles": [schedulerName, ...], "accepted": bool,
        "message": why not ("" when accepted)}``; the scheduler is stopped again.
    """
    found = rig.kubectl("get", RESOURCE, NAME, "-o", "json", check=False)
    if not found.strip():
        return None
    raw = str(json.loads(found).get("spec", {}).get("rawConfig", ""))
    try:
        text = config_text(raw, rig.kubeconfig)
        names = [str(p.get("schedulerName")) for p in yaml.safe_load(raw).get("profiles") or []]
    except (ValueError, yaml.YAMLError, AttributeError) as exc:
        return {"profiles": [], "accepted": False, "message": f"rawConfig: {exc}"}
    scheduler = ProfileScheduler(rig.binaries / "kube-scheduler", folder, text)
    try:
        ok, why = scheduler.wait_healthy()
    finally:
        scheduler.stop()
    return {"profiles": names, "accepted": ok, "message": why}

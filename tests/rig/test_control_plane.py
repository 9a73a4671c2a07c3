"""The rig's control plane: built at the pinned version, on loopback only, admitting with CEL.

Each test talks to the real kube-apiserver the rig built from k8s.io/kubernetes (module fixture
``rig``), in a network namespace that has only loopback.
"""

from __future__ import annotations

import errno
import json
import socket
import subprocess
import time
from pathlib import Path

import pytest

from gpucluster_rig import build
from gpucluster_rig.build import RigError
from gpucluster_rig.cluster import Cluster


def test_the_network_namespace_has_only_loopback() -> None:
    names = {
        ln.split(":", 1)[0].strip() for ln in Path("/proc/net/dev").read_text().splitlines()[2:]
    }
    if names != {"lo"}:
        pytest.skip("not in the rig's private network namespace (make test-rig)")
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex(("10.96.0.1", 443)) == errno.ENETUNREACH


def test_the_server_reports_the_pinned_version(rig: Cluster) -> None:
    version = json.loads(rig.kubectl("version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"] == build.pins()["kubernetes"]
    assert rig.server().startswith("https://127.0.0.1:")


def test_rbac_is_on(rig: Cluster, tmp_path: Path) -> None:
    rig.create_namespace("rbac-probe")
    rig.kubectl("create", "serviceaccount", "nobody", "-n", "rbac-probe")
    who = "system:serviceaccount:rbac-probe:nobody"
    assert (
        rig.kubectl(
            "auth", "can-i", "get", "secrets", "-n", "kube-system", f"--as={who}", check=False
        ).strip()
        == "no"
    )
    token = rig.kubectl("create", "token", "nobody", "-n", "rbac-probe").strip()
    ca = tmp_path / "ca.crt"
    ca.write_bytes(rig.ca_bytes())
    proc = subprocess.run(
        [
            str(rig.binaries / "kubectl"),
            "--kubeconfig=/dev/null",
            f"--server={rig.server()}",
            f"--certificate-authority={ca}",
            f"--token={token}",
            "get",
            "secrets",
            "-n",
            "kube-system",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert f'User "{who}" cannot list resource "secrets"' in proc.stderr


def test_an_aggregated_api_is_dialled_only_through_the_sink(rig: Cluster) -> None:
    """An APIService backed by a Service: the API server's attempt reaches the egress sink (and
    nowhere else), which refuses it; the API answers 503."""
    rig.create_namespace("egress-probe")
    rig.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "metrics", "namespace": "egress-probe"},
                "spec": {"ports": [{"port": 443, "targetPort": 6443}], "selector": {"app": "none"}},
            },
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": "v1beta1.probe.example.com"},
                "spec": {
                    "group": "probe.example.com",
                    "version": "v1beta1",
                    "service": {"name": "metrics", "namespace": "egress-probe", "port": 443},
                    "insecureSkipTLSVerify": True,
                    "groupPriorityMinimum": 100,
                    "versionPriority": 100,
                },
            },
        ]
    )
    ip = json.loads(rig.kubectl("get", "service", "metrics", "-n", "egress-probe", "-o", "json"))[
        "spec"
    ]["clusterIP"]
    deadline = time.monotonic() + 60
    while not any(a.startswith(ip) for a in rig.sink.attempts) and time.monotonic() < deadline:
        rig.kubectl("get", "--raw", "/apis/probe.example.com/v1beta1", check=False)
        time.sleep(1)
    assert any(a == f"{ip}:443" for a in rig.sink.attempts), rig.sink.attempts
    log = [json.loads(line)["target"] for line in rig.sink.log_path.read_text().splitlines()]
    assert f"{ip}:443" in log


def test_a_cel_rule_of_a_real_crd_is_enforced(rig: Cluster, shared: Path) -> None:
    """IPPool's ``perNodeExclusions`` rule (endIndex >= startIndex), from nv-ipam's real CRD."""
    rig.kubectl(
        "apply",
        "--server-side",
        "-f",
        str(shared / "crds" / "nv-ipam.nvidia.com" / "nv-ipam.nvidia.com_ippools.yaml"),
    )
    rig.kubectl(
        "wait", "--for=condition=Established", "crd/ippools.nv-ipam.nvidia.com", "--timeout=60s"
    )
    rig.create_namespace("cel-probe")

    def pool(start: int, end: int) -> dict[str, object]:
        return {
            "apiVersion": "nv-ipam.nvidia.com/v1alpha1",
            "kind": "IPPool",
            "metadata": {"name": f"pool-{start}-{end}", "namespace": "cel-probe"},
            "spec": {
                "subnet": "192.0.2.0/24",
                "perNodeBlockSize": 16,
                "gateway": "192.0.2.1",
                "perNodeExclusions": [{"startIndex": start, "endIndex": end}],
            },
        }

    rig.apply([pool(1, 2)])
    with pytest.raises(RigError, match="endIndex must be greater than or equal to startIndex"):
        rig.apply([pool(5, 2)])

"""The core of `gpucluster detect` (gpucluster.detect): providerID -> service for given prefixes, from a
NodeList or a (faked) kubectl. The built-in platforms' own prefixes through the command: test_nvke_detect.py,
test_oke_plugin.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpucluster.errors import GpuclusterError
from gpucluster.live import detect

FIXTURE = Path(__file__).parent / "data" / "nvke" / "nodes-nvke.json"
PREFIXES = {"aks": "azure://", "nvke": "nico://"}


def nodes(*pairs):
    return {
        "items": [
            {"metadata": {"name": n}, "spec": ({"providerID": p} if p else {})} for n, p in pairs
        ]
    }


def test_nvke_fixture_maps_to_nvke():
    result = detect.detect(json.loads(FIXTURE.read_text()), PREFIXES)
    assert result.service == "nvke"
    assert result.nodes == {"nvke": ["gb200-tray-01", "gb200-tray-02", "nvke-cp-0"]}
    assert result.unmatched == []


def test_unclaimed_nodes_do_not_block_detection():
    result = detect.detect(nodes(("a", "nico://x"), ("b", "")), PREFIXES)
    assert result.service == "nvke" and result.unmatched == [("b", "")]


def test_no_claimed_node_is_an_error_listing_known_prefixes():
    with pytest.raises(GpuclusterError) as exc:
        detect.detect(
            nodes(("a", "kind://docker/kind/a"), ("b", "")), PREFIXES, source="nodes.json"
        )
    text = str(exc.value)
    assert "no node has a providerID a platform plugin declares (seen: <none>, kind://)" in text
    assert "azure:// -> aks, nico:// -> nvke" in text and "file=nodes.json" in text


def test_mixed_platforms_are_an_error():
    with pytest.raises(GpuclusterError, match=r"several platforms \(aks: a; nvke: b\)"):
        detect.detect(nodes(("a", "azure:///subscriptions/x"), ("b", "nico://y")), PREFIXES)


def test_not_a_node_list():
    with pytest.raises(GpuclusterError, match="not a Kubernetes NodeList"):
        detect.detect({"kind": "Node"}, PREFIXES)


class FakeKubectl:
    def __init__(self, returncode=0, stdout="", stderr=""):
        self.calls = []
        self.result = subprocess.CompletedProcess([], returncode, stdout, stderr)

    def __call__(self, cmd, **kw):
        self.calls.append(cmd)
        return self.result


def test_kubectl_is_run_with_kubeconfig_and_context():
    fake = FakeKubectl(stdout=FIXTURE.read_text())
    doc, label = detect.load_nodes(
        kubeconfig="/tmp/kc", context="tenant", run=fake, which=lambda _: "/usr/bin/kubectl"
    )
    assert fake.calls == [
        [
            "/usr/bin/kubectl",
            "get",
            "nodes",
            "-o",
            "json",
            "--request-timeout=60s",
            "--kubeconfig=/tmp/kc",
            "--context=tenant",
        ]
    ]
    assert len(doc["items"]) == 3 and "context tenant" in label


def test_kubectl_failure_is_reported():
    fake = FakeKubectl(returncode=1, stderr='E1\nerror: context "x" does not exist\n')
    with pytest.raises(GpuclusterError) as exc:
        detect.load_nodes(context="x", run=fake, which=lambda _: "kubectl")
    assert 'context "x" does not exist' in str(exc.value)


def test_no_kubectl_and_no_file():
    with pytest.raises(GpuclusterError) as exc:
        detect.load_nodes(run=FakeKubectl(), which=lambda _: None)
    assert "kubectl is not on PATH" in str(exc.value) and "--nodes-json" in str(exc.value)

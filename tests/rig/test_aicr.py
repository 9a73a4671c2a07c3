"""AICR's own deploy.sh on the rig: its bundle copied with only the chart repository URLs
rewritten to the rig's 127.0.0.1 chart repository, run with the Helm 4 CLI (gpucluster_rig.aicr)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpucluster_rig import aicr, build

BUNDLE = ("aicr-outputs", "v0.11.1", "bundle-h100-aks-training")
REPO = "http://127.0.0.1:41234"


def _bundle(shared: Path) -> Path:
    bundle = shared.joinpath(*BUNDLE)
    if not (bundle / "deploy.sh").is_file():
        pytest.skip(f"{bundle} has no deploy.sh")
    return bundle


def test_the_rewrite_changes_only_chart_repository_urls(shared: Path) -> None:
    """Every changed line differs from AICR's only by the URLs listed, each now on loopback; no
    chart reference leaves loopback; every other line is byte-identical."""
    original = (_bundle(shared) / "deploy.sh").read_text(encoding="utf-8")
    new, rewrites = aicr.rewrite_deploy(original, REPO)
    a, b = original.split("\n"), new.split("\n")
    assert len(a) == len(b)
    changed = [i + 1 for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    assert changed == sorted({w.line for w in rewrites})
    for w in rewrites:
        assert a[w.line - 1].replace(w.before, w.after) == b[w.line - 1]
        assert w.after.startswith(REPO) and not w.before.startswith(REPO)
    # AICR v0.11.1's training bundle: 8 `--repo https://…` and 2 `oci://ghcr.io/…` references
    assert sum(w.before.startswith("https://") for w in rewrites) == 8
    assert [w.after for w in rewrites if w.before.startswith("oci://")] == [
        f"{REPO}/kai-scheduler-v0.13.0.tgz",
        f"{REPO}/nvsentinel-v1.1.0.tgz",
    ]
    assert not re.search(r"--repo https://|oci://", new)


def test_chart_refs_read_every_helm_install_of_deploy_sh(shared: Path) -> None:
    refs = aicr.chart_refs((_bundle(shared) / "deploy.sh").read_text(encoding="utf-8"))
    assert [(r.release, r.version) for r in refs] == [
        ("cert-manager", "v1.17.2"),
        ("kube-prometheus-stack", "82.8.0"),
        ("gpu-operator", "v25.10.1"),
        ("k8s-ephemeral-storage-metrics", "1.19.2"),
        ("kai-scheduler", "v0.13.0"),
        ("network-operator", "25.1.0"),
        ("nvidia-dra-driver-gpu", "25.12.0"),
        ("nvsentinel", "v1.1.0"),
        ("prometheus-adapter", "5.3.0"),
        ("skyhook-operator", "v0.14.0"),
    ]


@pytest.fixture(scope="module")
def deployed(
    rig_bin: Path, shared: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """deploy.sh with its own --no-wait --retries 0 --best-effort (so the run stays short and every
    component is tried once), on a fresh rig, with the Helm 4 CLI."""
    bundle = _bundle(shared)
    helm4 = build.helm4()
    folder = tmp_path_factory.mktemp("aicr")
    (folder / "nodes").mkdir()
    (folder / "nodes" / aicr.RECIPE).write_text((bundle.parent / aicr.RECIPE).read_text())
    nodes = aicr.nodes_of(aicr.cluster_file(folder / "nodes", aicr.RECIPE))
    return aicr.run_deploy(
        bundle,
        folder / "run",
        rig_bin,
        helm4,
        charts=shared / "charts",
        nodes=nodes,
        delay=1.0,
        ippool_crd=None,
        args=("--no-wait", "--retries", "0", "--best-effort"),
    )


def test_deploy_sh_ran_on_the_rig_with_helm_4(deployed: dict[str, Any]) -> None:
    """deploy.sh got to its end, every component was tried in AICR's order, and Helm 4 installed
    the releases whose charts it fetched from loopback (an unrewritten URL cannot be reached in
    the namespace: that release fails and is named)."""
    log = Path(deployed["log"]).read_text()
    assert "Deployment complete." in log, log[-2000:]
    assert [o["component"] for o in deployed["order"]] == [
        "cert-manager",
        "kube-prometheus-stack",
        "gpu-operator",
        "k8s-ephemeral-storage-metrics",
        "kai-scheduler",
        "network-operator",
        "nvidia-dra-driver-gpu",
        "nvsentinel",
        "prometheus-adapter",
        "skyhook-operator",
    ]
    failed = re.findall(r"WARNING: the following components failed:(.*)", log)
    # what the server and the bundle refuse (docs/rehearse.md "Side by side with AICR"): Helm 4's
    # server-side apply sends kube-prometheus-stack's `storageSpec.emptyDir: null` and the
    # Prometheus CRD's schema rejects it; the bundle as captured has no gpu-operator/manifests/
    # folder for the pre- and post-install `kubectl apply -f`
    assert [f.split() for f in failed] == [
        ["kube-prometheus-stack", "gpu-operator", "gpu-operator"]
    ], log[-3000:]
    assert "spec.storage.emptyDir in body must be of type object" in log
    assert deployed["releases"] == [
        "cert-manager",
        "gpu-operator",
        "k8s-ephemeral-storage-metrics",
        "kai-scheduler",
        "network-operator",
        "nvidia-dra-driver-gpu",
        "nvsentinel",
        "prometheus-adapter",
        "skyhook-operator",
    ]
    assert deployed["helm_version"].startswith("v4.")

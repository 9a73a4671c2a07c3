"""Day 2 on a running rig: successive revisions of one AKS cluster file applied to one rig cluster
(:class:`gpucluster_rig.day2.KeptRig`): a second apply that changes nothing, a driver and DRA
driver change judged by ``upgrade-check --kubeconfig`` and then applied, the faults
``upgrade-check`` and ``validate`` know made real on the rig and judged live and from a snapshot
alike, and the AKS surge replacement of a GPU pool through both steps.

The tests of this module run in order on one rig (each builds on the state the previous left).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster_rig.day2 import Applied, KeptRig

CLUSTER = "day2"
OLD_DRIVER, NEW_DRIVER = "580.105.08", "595.91.07"
OLD_DRA, NEW_DRA = "0.5.0", "0.5.1"
DRA_NS, DRA_DS = "nvidia-dra-driver", "nvidia-dra-driver-gpu-kubelet-plugin"
SYSTEM = {"name": "system", "vmSize": "Standard_D8ds_v5", "nodeCount": 2, "gpu": False}
GPU = {"name": "gpu", "vmSize": "Standard_ND96isr_H100_v5", "nodeCount": 2}
GPU2 = {"name": "gpu2", "vmSize": "Standard_ND96isr_H100_v5", "nodeCount": 2}


def _recipe(folder: Path, dra: str) -> str:
    """``gpucluster recipe`` of the AKS H100 training cluster with the operator installing the
    driver, the DRA driver chart pinned at ``dra``; the file's name."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpucluster.cli",
            "recipe",
            "--service",
            "aks",
            "--accelerator",
            "h100",
            "--os",
            "ubuntu",
            "--intent",
            "training",
            "--profile",
            "gpuStack=operator-managed",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    doc = yaml.safe_load(proc.stdout)
    (ref,) = [r for r in doc["componentRefs"] if r["name"] == "nvidia-dra-driver-gpu"]
    ref["version"] = dra
    name = f"recipe-dra-{dra}.yaml"
    (folder / name).write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return name


def _revision(
    folder: Path, name: str, *, driver: str, dra: str, pools: list[dict[str, Any]]
) -> Path:
    cluster: dict[str, Any] = {
        "name": CLUSTER,
        "recipe": _recipe(folder, dra),
        "kubernetesVersion": "1.34",
        "pools": pools,
        "overrides": {"set": [f"gpuoperator:driver.version={driver}"]},
    }
    path = folder / name
    path.write_text(yaml.safe_dump({"clusters": [cluster]}, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The cluster file's revisions: ``old`` (driver 580, DRA 0.5.0), ``new`` (driver 595, DRA
    0.5.1), ``surge`` (``new`` plus pool gpu2 replacing gpu: step 1), ``replaced`` (step 2)."""
    folder = tmp_path_factory.mktemp("day2-files")
    return {
        "old": _revision(folder, "old.yaml", driver=OLD_DRIVER, dra=OLD_DRA, pools=[SYSTEM, GPU]),
        "new": _revision(folder, "new.yaml", driver=NEW_DRIVER, dra=NEW_DRA, pools=[SYSTEM, GPU]),
        "surge": _revision(
            folder,
            "surge.yaml",
            driver=NEW_DRIVER,
            dra=NEW_DRA,
            pools=[SYSTEM, GPU, {**GPU2, "replaces": "gpu"}],
        ),
        "replaced": _revision(
            folder, "replaced.yaml", driver=NEW_DRIVER, dra=NEW_DRA, pools=[SYSTEM, GPU2]
        ),
    }


@pytest.fixture(scope="module")
def kept(
    rig_bin: Path, shared: Path, tmp_path_factory: pytest.TempPathFactory, files: dict[str, Path]
) -> Iterator[KeptRig]:
    rig = KeptRig(
        rig_bin,
        tmp_path_factory.mktemp("day2"),
        cluster=CLUSTER,
        charts=shared / "charts",
        crds=shared / "crds",
        delay=1.0,
    )
    try:
        rig.start()
        yield rig
    finally:
        rig.stop()


@pytest.fixture(scope="module")
def first(kept: KeptRig, files: dict[str, Path]) -> Applied:
    applied = kept.apply(files["old"])
    print(f"first apply: makespan {applied.makespan:.1f} s")
    return applied


def _failed(applied: Applied) -> list[dict[str, Any]]:
    return [s.as_dict(0) for s in applied.steps if not s.ok]


def test_the_first_apply_creates_every_release(first: Applied) -> None:
    assert _failed(first) == []
    assert set(first.actions().values()) == {"create"}
    assert first.upgraded() == set(first.stack.releases)


def test_a_second_apply_of_the_same_file_changes_nothing(
    kept: KeptRig, first: Applied, files: dict[str, Path]
) -> None:
    """As ``terraform apply`` with no change: no release upgraded (Helm revisions read from Helm
    stay), no Job runs."""
    again = kept.apply(files["old"])
    print(f"second apply, no change: makespan {again.makespan:.1f} s")
    assert _failed(again) == []
    assert set(again.actions().values()) == {"unchanged"}
    assert again.upgraded() == set()
    assert again.revisions_after == again.revisions_before
    assert again.jobs == []

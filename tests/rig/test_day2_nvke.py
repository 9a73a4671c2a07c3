"""Day 2 on an NVKE GB200 cluster kept up on the rig: the DRA driver chart 0.5.1 -> 0.5.2 and a
driver change applied to a running stack; the NVKE ``min-version`` gate on the DRA kubelet plugin
(image tag at least 0.5.1, the version that joins a shared NVLink clique) runs again and reads
the rolled-out 0.5.2 image. The NodeWright operator and its RDMA modules are left out
(``enabled=false``): the rig has no NodeWright CRD source (docs/rehearse.md)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support import recipe_file

from gpucluster_rig.day2 import Applied, KeptRig

CLUSTER = "nvke-day2"
GATE = "nvidia-dra-driver-gpu-kubelet-plugin-version"
RAILS = [
    {"name": "mlx5_0", "rootDevice": "0000:03:00.0"},
    {"name": "mlx5_1", "rootDevice": "0002:03:00.0"},
]


def _revision(folder: Path, name: str, *, dra: str, driver: str) -> Path:
    recipe = recipe_file(
        folder,
        f"recipe-{name}",
        [
            "recipe",
            "--service",
            "nvke",
            "--accelerator",
            "gb200",
            "--os",
            "ubuntu",
            "--intent",
            "training",
        ],
        {"nvidia-dra-driver-gpu": dra},
    )
    cluster = {
        "name": CLUSTER,
        "recipe": recipe,
        "kubernetesVersion": "1.34",
        "existing": {"kubeconfig": "~/.kube/config"},
        "settings": {"rails": RAILS},
        "overrides": {
            "set": [
                "nodewright:enabled=false",
                "rdma-modules:enabled=false",
                f"gpuoperator:driver.version={driver}",
            ]
        },
    }
    path = folder / name
    path.write_text(yaml.safe_dump({"clusters": [cluster]}, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def kept(
    keep_rig: Callable[[Path, str], KeptRig], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KeptRig]:
    with keep_rig(tmp_path_factory.mktemp("day2-nvke"), CLUSTER) as rig:
        yield rig


@pytest.fixture(scope="module")
def applies(kept: KeptRig, tmp_path_factory: pytest.TempPathFactory) -> tuple[Applied, Applied]:
    folder = tmp_path_factory.mktemp("day2-nvke-files")
    first = kept.apply(_revision(folder, "old.yaml", dra="0.5.1", driver="580.105.08"))
    print(f"NVKE first apply: makespan {first.makespan:.1f} s")
    assert first.failed() == [] and first.ok, first.report
    second = kept.apply(_revision(folder, "new.yaml", dra="0.5.2", driver="595.91.07"))
    print(f"NVKE DRA 0.5.2 and driver change: makespan {second.makespan:.1f} s")
    return first, second


def _gate_run(applied: Applied) -> dict[str, Any]:
    (run,) = [j for j in applied.jobs if j["job"] == GATE]
    return run


def test_the_min_version_gate_reads_the_rolled_out_dra_version(
    kept: KeptRig, applies: tuple[Applied, Applied]
) -> None:
    first, second = applies
    assert second.failed() == [] and second.ok, second.report
    before, after = _gate_run(first), _gate_run(second)
    assert before["exitCode"] == after["exitCode"] == 0, (before, after)
    assert any(":v0.5.1" in ln and "ready" in ln for ln in before["lastLines"]), before
    assert any(":v0.5.2" in ln and "ready" in ln for ln in after["lastLines"]), after
    assert {"nvidia-dra-driver-gpu", GATE, "gpu-operator"} <= second.upgraded()
    assert "network-operator" not in second.upgraded()
    ds = json.loads(
        kept.rig.kubectl(
            "get",
            "daemonset",
            "-n",
            "nvidia-dra-driver",
            "nvidia-dra-driver-gpu-kubelet-plugin",
            "-o",
            "json",
        )
    )
    images = {c["name"]: c["image"] for c in ds["spec"]["template"]["spec"]["containers"]}
    assert images["compute-domains"].endswith(":v0.5.2"), images


def test_on_nvke_controllers_keep_off_the_gpu_nodes_and_gpu_agents_run_there(
    applies: tuple[Applied, Applied],
) -> None:
    """The NVKE GB200 rehearsal's placement after each apply: every Deployment and StatefulSet
    runs on the system pool (the GPU nodes carry the GPU taint, which no controller tolerates), no
    ``rig.placement`` warning, and the DRA kubelet plugin runs on the GPU nodes only."""
    for applied in applies:
        placed = {(p["namespace"], p["kind"], p["name"]): p for p in applied.report["placement"]}
        controllers = {
            k: p["pools"] for k, p in placed.items() if k[1] in ("Deployment", "StatefulSet")
        }
        assert ("kai-scheduler", "Deployment", "kai-operator") in controllers, sorted(controllers)
        assert {k: pools for k, pools in controllers.items() if set(pools) != {"system"}} == {}
        assert applied.report["placement_findings"] == []
        dra = placed[("nvidia-dra-driver", "DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin")]
        assert set(dra["pools"]) == {"gpu"}, dra

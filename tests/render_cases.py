"""The built-in recipe x profile cases ``gpucluster lint`` must pass (tests/test_render_lint.py):
AKS 4 recipes x 2 gpuStack profiles, NVKE 2 recipes, every OKE recipe (default profile), each
plain, with ``scheduling.system`` set, and with one extra GPU-pool taint."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

AKS = {
    "h100-aks-ubuntu-training": ("training", "any"),
    "h100-aks-ubuntu-training-kubeflow": ("training", "kubeflow"),
    "h100-aks-ubuntu-inference": ("inference", "any"),
    "h100-aks-ubuntu-inference-dynamo": ("inference", "dynamo"),
}
AKS_PROFILES = ("azure-managed", "operator-managed")
NVKE = {"gb200-nvke-ubuntu-training": "any", "gb200-nvke-ubuntu-training-kubeflow": "kubeflow"}
NVKE_RAILS = [
    {"name": "mlx5_0", "rootDevice": "0000:03:00.0"},
    {"name": "mlx5_1", "rootDevice": "0002:03:00.0"},
    {"name": "mlx5_3", "rootDevice": "0010:03:00.0"},
    {"name": "mlx5_4", "rootDevice": "0012:03:00.0"},
]
OKE = {
    "gb200-oke-ubuntu-training": ("gb200", "ubuntu", "training", "any"),
    "gb200-oke-ubuntu-training-kubeflow": ("gb200", "ubuntu", "training", "kubeflow"),
    "gb200-oke-ubuntu-inference": ("gb200", "ubuntu", "inference", "any"),
    "gb200-oke-ubuntu-inference-dynamo": ("gb200", "ubuntu", "inference", "dynamo"),
    "a100-oke-ubuntu-training": ("a100", "ubuntu", "training", "any"),
    "a100-oke-ubuntu-training-kubeflow": ("a100", "ubuntu", "training", "kubeflow"),
    "gb200-oke-training": ("gb200", "ol", "training", "any"),
    "gb200-oke-inference": ("gb200", "ol", "inference", "any"),
    "a100-oke-training": ("a100", "ol", "training", "any"),
    "l40s-oke-training": ("l40s", "ol", "training", "any"),
    "l40s-oke-inference": ("l40s", "ol", "inference", "any"),
}
VARIANTS = ("plain", "system", "taint")
SYSTEM = {
    "nodeSelector": {"kubernetes.azure.com/mode": "system"},
    "tolerations": ["CriticalAddonsOnly:NoSchedule"],
}
EXTRA_TAINT = "dedicated=ml:NoSchedule"

UNAVAILABLE = (
    "nvsentinel",
    "grove",
    "dynamo-platform",
    "agentgateway",
    "agentgateway-crds",
)
"""Charts ../shared/reference/charts does not carry (SOURCES.md "Not available offline"):
``--allow-missing``."""


def stand_in_names(charts: Path) -> tuple[str, ...]:
    """The releases ``charts`` (../shared/reference/charts) serves only at another version than
    the one its SOURCES.md first table says the release pins: every ``<release> <version>`` of a
    row's "release(s) it serves" column (``nvidia-dra-driver-gpu 0.5.0 / 0.5.1``: two) whose
    version is not the ``version`` of the row's folders' ``Chart.yaml`` (``no v26.7.1 tag``: the
    folder holds v26.7.0). ``--allow-nearest`` with ``--require-charts``, sorted."""
    table = (charts / "SOURCES.md").read_text(encoding="utf-8").split("\n## ")[0]
    names: set[str] = set()
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] in ("folder", "") or set(cells[0]) <= set("-"):
            continue
        folders = [f.strip() for f in cells[0].split(",")]
        have = {
            str(yaml.safe_load((charts / f / "Chart.yaml").read_text())["version"]).removeprefix(
                "v"
            )
            for f in folders
            if (charts / f / "Chart.yaml").is_file()
        }
        for served in cells[1].split(","):
            m = re.match(r"\s*(\S+)\s+(v?\d[^ ]*(?:\s*/\s*v?\d[^ ]*)*)\s*$", served)
            if not m:
                continue
            versions = [v.strip().removeprefix("v") for v in m.group(2).split("/")]
            if have and any(v not in have for v in versions):
                names.add(m.group(1))
    return tuple(sorted(names))


def base_cases() -> list[tuple[str, str, str]]:
    """``(platform, recipe, profile)`` of every case."""
    out = [("aks", leaf, profile) for leaf in AKS for profile in AKS_PROFILES]
    out += [("nvke", leaf, "") for leaf in NVKE]
    out += [("oke", leaf, "") for leaf in OKE]
    return out


def cluster_doc(platform: str, leaf: str, profile: str, variant: str) -> dict[str, Any]:
    """The cluster-file entry of one case."""
    doc: dict[str, Any] = {"name": "lint", "kubernetesVersion": "1.34"}
    if platform == "aks":
        intent, plat = AKS[leaf]
        doc["criteria"] = {
            "service": "aks",
            "accelerator": "h100",
            "os": "ubuntu",
            "intent": intent,
        }
        if plat != "any":
            doc["criteria"]["platform"] = plat
        doc["profile"] = {"gpuStack": profile}
        if variant == "taint":
            doc["pools"] = [
                {"name": "system", "vmSize": "Standard_D8s_v5", "nodeCount": 2, "gpu": False},
                {
                    "name": "gpu",
                    "vmSize": "Standard_ND96isr_H100_v5",
                    "nodeCount": 1,
                    "gpu": True,
                    "taints": [EXTRA_TAINT],
                },
            ]
    elif platform == "nvke":
        doc["criteria"] = {
            "service": "nvke",
            "accelerator": "gb200",
            "os": "ubuntu",
            "intent": "training",
        }
        if NVKE[leaf] != "any":
            doc["criteria"]["platform"] = NVKE[leaf]
        doc["settings"] = {"rails": NVKE_RAILS}
    else:
        acc, os_, intent, plat = OKE[leaf]
        doc["criteria"] = {"service": "oke", "accelerator": acc, "os": os_, "intent": intent}
        if plat != "any":
            doc["criteria"]["platform"] = plat
    scheduling: dict[str, Any] = {}
    if variant == "system":
        scheduling["system"] = SYSTEM
    if variant == "taint" and platform != "aks":
        scheduling["accelerated"] = {"tolerations": ["nvidia.com/gpu:NoSchedule", EXTRA_TAINT]}
    if scheduling:
        doc["scheduling"] = scheduling
    return doc

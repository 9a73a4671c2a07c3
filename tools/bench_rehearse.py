"""``make bench``'s rehearsal rows: the default cluster's runtime stack applied on the rig (gpucluster_rig),
and AICR's own deploy.sh beside gpucluster's stack from the same RecipeResult.

Prints the apply makespan (the time from the first release started to the last one finished, with
Terraform's default parallelism), the destroy time and the whole rehearsal's wall time, or why it
was not measured (no Go toolchain, no ../shared/reference charts, no network namespace).

The AICR row (``python -m gpucluster_rig compare-aicr``, docs/rehearse.md "Side by side with
AICR"): deploy.sh of AICR v0.11.1's H100 AKS training bundle (chart URLs on loopback, Helm 4,
``--best-effort`` so every component is tried) on one fresh rig, gpucluster's stack from the
bundle's RecipeResult on another, the same stand-in delay; both makespans, their ratio (also
without deploy.sh's retry sleeps), and whether each ended with the GPU stack ready.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "reference"


def main() -> int:
    if shutil.which("go") is None:
        print("rehearse: not measured (no Go toolchain to build the rig)")
        return 0
    if not (SHARED / "charts").is_dir():
        print(f"rehearse: not measured ({SHARED / 'charts'} is absent)")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-rehearse-") as work:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpucluster_rig",
                "rehearse",
                "--format",
                "json",
                "--work",
                work,
                "--charts",
                str(SHARED / "charts"),
                "--crds",
                str(SHARED / "crds"),
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        print(f"rehearse: not measured ({(proc.stderr.strip().splitlines() or ['no output'])[-1]})")
        return aicr_row()
    reports = json.loads(proc.stdout)["clusters"]
    for report in reports:
        apply, destroy = report["apply"], report.get("destroy", {})
        print(
            f"rehearse {report['cluster']}: apply makespan {apply['makespan_seconds']} s "
            f"({sum(1 for r in apply['releases'] if r['ok'])}/{len(apply['releases'])} releases), "
            f"destroy {destroy.get('makespan_seconds')} s, whole rehearsal {report.get('seconds')} s, "
            f"{'passed' if report['ok'] else 'FAILED'}"
        )
    return aicr_row()


AICR_BUNDLE = SHARED / "aicr-outputs" / "v0.11.1" / "bundle-h100-aks-training"
AICR_ARGS = ("--best-effort",)
"""deploy.sh's own option: a failed component is logged and the next one installed (with its
default 5 retries), so the run reaches the end and every component is measured."""


def _ready(report: dict[str, Any]) -> str:
    ready = report.get("ready") or {}
    if ready.get("ready"):
        return "GPU stack ready"
    failed = [f"{c['check']} ({c['saw']})" for c in ready.get("checks", []) if not c["ok"]]
    return "GPU stack NOT ready: " + "; ".join(failed)


def aicr_row() -> int:
    """The AICR-vs-gpucluster row; 0 (a comparison that cannot run says why, it is not a failure)."""
    if not (AICR_BUNDLE / "deploy.sh").is_file():
        print(f"aicr vs gpucluster: not measured ({AICR_BUNDLE / 'deploy.sh'} is absent)")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-aicr-") as work:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpucluster_rig",
                "compare-aicr",
                "--bundle",
                str(AICR_BUNDLE),
                "--charts",
                str(SHARED / "charts"),
                "--crds",
                str(SHARED / "crds"),
                "--work",
                work,
                "--",
                *AICR_ARGS,
            ],
            capture_output=True,
            text=True,
            timeout=3600,
        )
    if proc.returncode != 0 or not proc.stdout.strip():
        print(
            f"aicr vs gpucluster: not measured ({(proc.stderr.strip().splitlines() or ['no output'])[-1]})"
        )
        return 0
    result = json.loads(proc.stdout)
    theirs, ours = result["aicr"], result["gpucluster"]
    span, sleeps = theirs["makespan_seconds"], theirs["retry_sleep_seconds"]
    mine = ours["apply"]["makespan_seconds"]
    print(
        f"aicr deploy.sh {' '.join(AICR_ARGS)} ({theirs['helm_version']}): makespan {span} s "
        f"(of which {sleeps} s retry sleeps), exit {theirs['exit_code']}, "
        f"{len(theirs['releases'])} releases deployed, {_ready(theirs)}"
    )
    print(
        f"gpucluster (same RecipeResult): apply makespan {mine} s, "
        f"{sum(1 for r in ours['apply']['releases'] if r['ok'])}/{len(ours['apply']['releases'])} releases, "
        f"{_ready(ours)}"
    )
    bare = round((span - sleeps) / mine, 2) if mine else None
    print(
        f"aicr/gpucluster makespan ratio {result['ratio']} (without deploy.sh's retry sleeps {bare})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

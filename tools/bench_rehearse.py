"""``make bench``'s rehearsal row: the default cluster's runtime stack applied on the rig (gpucluster_rig).

Prints the apply makespan (the time from the first release started to the last one finished, with
Terraform's default parallelism), the destroy time and the whole rehearsal's wall time, or why it
was not measured (no Go toolchain, no ../shared/reference charts, no network namespace).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

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
        return 0
    for report in json.loads(proc.stdout)["clusters"]:
        apply, destroy = report["apply"], report.get("destroy", {})
        print(
            f"rehearse {report['cluster']}: apply makespan {apply['makespan_seconds']} s "
            f"({sum(1 for r in apply['releases'] if r['ok'])}/{len(apply['releases'])} releases), "
            f"destroy {destroy.get('makespan_seconds')} s, whole rehearsal {report.get('seconds')} s, "
            f"{'passed' if report['ok'] else 'FAILED'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

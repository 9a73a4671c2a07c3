#!/usr/bin/env python3
"""`make bench`: what synthesizing the embedded default costs, step by step.

Each step runs ``--runs`` times (default 5) in a fresh process; the table shows the median
wall time and the median of the peak resident memory of the whole process tree (python +
the jsii Node.js kernel + the cdktf CLI), sampled with psutil every ``--interval`` seconds.

Every step runs in a scratch folder (with a copy of cdktf.json pointing at this project's app),
so a ``gpucluster.yaml`` in the project folder does not change what is measured.

Steps:
  plan      the domain core: load the cluster file, resolve the recipe, build the RuntimePlans
            (asserts that cdktf/jsii were not imported)
  bindings  import cdktf and the helm + azurerm provider bindings (constructs_lib.cdk)
  synth     the whole ``node_modules/.bin/cdktf synth`` into a scratch output folder
  render    ``gpucluster render`` of the default stack with Helm's engine (plan included), charts
            from ``$GPUCLUSTER_CHARTS`` or ``../shared/reference/charts``; skipped without them

Usage: ``.venv/bin/python tools/bench.py [--runs 5] [--interval 0.02] [--steps plan,bindings,synth]``
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

PLAN_CODE = """
import sys
from gpucluster.config import load_clusters
from gpucluster.pipeline import build_plans
plans = build_plans(load_clusters())
assert plans and all(p.nodes for p in plans)
leaked = sorted(m for m in sys.modules if m.split('.')[0] in ('cdktf', 'jsii', 'constructs'))
assert not leaked, f'domain core imported {leaked}'
"""

BINDINGS_CODE = """
import constructs_lib.cdk as cdk
cdk.helm()
cdk.azurerm()
assert cdk.azurerm_loaded()
"""


RENDER_CODE = """
import sys
from pathlib import Path
from gpucluster.config import load_clusters
from gpucluster.pipeline import build_plans
from gpucluster.render import ChartSources, render_plans, write_output
plans = build_plans(load_clusters())
result = render_plans(plans, ChartSources([Path(sys.argv[1])], cache_dir=Path(sys.argv[2]) / 'cache'))
write_output(result, Path(sys.argv[2]) / 'render')
result.renderer.close()
assert sum(1 for r in result.releases if r.manifests) >= len(result.releases) // 2
"""
CHARTS = Path(os.environ.get("GPUCLUSTER_CHARTS") or ROOT.parent / "shared" / "reference" / "charts")


def bench_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCLUSTER_", "CDKTF_"))}
    env.update(JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20", CHECKPOINT_DISABLE="1", CI="true")
    tfrc = env.get("TF_CLI_CONFIG_FILE") or str(Path.home() / ".terraformrc")
    if not Path(tfrc).exists():
        env["TF_CLI_CONFIG_FILE"] = "/dev/null"
    return env


def tree_rss(proc: psutil.Process) -> int:
    """Resident bytes of ``proc`` and all its descendants (0 for ones that just exited)."""
    total = 0
    try:
        members = [proc] + proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    for member in members:
        try:
            total += member.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def measure(cmd: list[str], *, cwd: Path, interval: float) -> tuple[float, int]:
    """Run ``cmd`` in ``cwd``; return (wall seconds, peak tree RSS bytes).

    stderr goes to a file (a pipe nobody reads while the step runs could fill up and block it).
    """
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        proc = psutil.Popen(cmd, cwd=cwd, env=bench_env(), stdout=subprocess.DEVNULL, stderr=errors)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_rss(proc))
            time.sleep(interval)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            errors.seek(0)
            stderr = errors.read().decode(errors="replace")
            raise SystemExit(f"bench step failed ({proc.returncode}): {' '.join(cmd)}\n{stderr}")
    return wall, peak


def workdir(scratch: Path) -> Path:
    """``<scratch>/work``: an empty folder with a cdktf.json that runs this project's main.py."""
    work = scratch / "work"
    work.mkdir(exist_ok=True)
    config = json.loads((ROOT / "cdktf.json").read_text())
    config["app"] = f"{shlex.quote(PY)} {shlex.quote(str(ROOT / 'main.py'))}"
    (work / "cdktf.json").write_text(json.dumps(config, indent=2))
    return work


def steps(scratch: Path) -> dict[str, list[str]]:
    cdktf = str(ROOT / "node_modules" / ".bin" / "cdktf")
    return {
        "plan": [PY, "-c", PLAN_CODE],
        "bindings": [PY, "-c", BINDINGS_CODE],
        "synth": [cdktf, "synth", "--output", str(scratch / "cdktf.out")],
        **({"render": [PY, "-c", RENDER_CODE, str(CHARTS), str(scratch)]} if CHARTS.is_dir() else {}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--interval", type=float, default=0.02, help="RSS sampling interval, seconds")
    parser.add_argument("--steps", default="plan,bindings,synth,render")
    args = parser.parse_args(argv)
    wanted = [s.strip() for s in args.steps.split(",") if s.strip()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpucluster-bench-") as scratch:
        table = steps(Path(scratch))
        cwd = workdir(Path(scratch))
        if "render" in wanted and "render" not in table and args.steps == parser.get_default("steps"):
            wanted.remove("render")
            print(f"render step skipped: no chart folder at {CHARTS} (set GPUCLUSTER_CHARTS)")
        unknown = [s for s in wanted if s not in table]
        if unknown:
            parser.error(f"unknown steps {unknown}; choose from {', '.join(table)}")
        for name in wanted:
            walls, peaks = [], []
            for _ in range(args.runs):
                wall, peak = measure(table[name], cwd=cwd, interval=args.interval)
                walls.append(wall)
                peaks.append(peak)
            rows.append((name, statistics.median(walls), min(walls), max(walls), statistics.median(peaks) / 2**20))
    print(f"gpucluster bench: embedded default, {args.runs} fresh processes per step, "
          f"peak RSS of the process tree sampled every {args.interval * 1000:.0f} ms")
    print(f"{'step':<10} {'median s':>9} {'min s':>7} {'max s':>7} {'peak RSS MiB':>13}")
    for name, med, lo, hi, rss in rows:
        print(f"{name:<10} {med:>9.2f} {lo:>7.2f} {hi:>7.2f} {rss:>13.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""`make bench`: what planning and synthesizing cost, step by step, for 1, 10 and 50 clusters.

Every measurement is a fresh process (``--runs`` of them, default 3); the table shows the median
wall time, min and max, the median CPU time (user + system of the process and every child it
waited for: Python, the jsii Node.js kernel, the cdktf CLI) and the median peak resident memory
of the whole process tree, sampled with psutil every ``--interval`` seconds. ``x floor`` is the
median wall time over the floor's (``import cdktf`` / ``import cdktn``). The floor is sampled
first and then once more after every other row of its distribution, so every ratio divides by
the floor of the whole run: this machine's speed drifts over the minutes a run takes (the floor
alone measured 0.53-0.90 s in different runs of one day).

The cluster files are the embedded default's AKS cluster (H100, training) repeated N times
(``c01``, ``c02``, ...); every step runs in a scratch folder, so a ``gpucluster.yaml`` in the
project folder does not change what is measured.

Steps (table :data:`STEPS`; add a step there -- a name, a one-line description and a function
returning the command for N clusters -- and it is measured and printed like the others):

  floor     ``import cdktf`` (or ``cdktn``): the least any synth costs
  plan      ``gpucluster plan --config FILE``: the pure-Python domain core as a process
            (the default distribution only: no CDK is imported)
  bindings  the framework plus the helm and azurerm binding classes the constructs use
  synth     ``python main.py``: the whole synthesis into a scratch output folder
  cli       ``cdktf synth`` (the cdktf CLI runs main.py; default distribution, 1 cluster)
  render    ``gpucluster render`` of the default stack with Helm's engine (plan included), charts
            from ``$GPUCLUSTER_CHARTS`` or ``../shared/reference/charts``; skipped without them
  fleet     ``python main.py`` on a two-group fleet of N of those clusters (1 canary, N-1 prod; hub
            with the kernel-module blocklist, auto-upgrade profile; docs/fleets.md)
  resynth   ``python main.py`` on N clusters after an edit of one of them (a GPU node count): the
            other clusters' stacks come from the per-user cache (a folder of the run, filled by one
            unmeasured synth first; the previous output is in place, as for a user)
  workers   ``python main.py`` on N clusters with nothing reused, the clusters built by the default
            number of worker processes (the CPUs, at most 8); each run follows one of ``synth``
            (one process) for the same N, printed as the ``synth-alt`` row, which the workers
            target divides by

``synth``, ``cli`` and ``fleet`` reuse nothing and build every stack in one process
(``GPUCLUSTER_SYNTH_CACHE=off GPUCLUSTER_SYNTH_WORKERS=1``), so their rows compare with earlier runs.

Distributions: ``cdktf`` (default, ``.venv``) and ``cdktn`` (``.venv-cdktn``, made by
``make cdktn``; skipped with a note when absent). ``--project DIR`` measures another checkout of
gpucluster with this environment (e.g. the commit before a change).

Usage: ``.venv/bin/python tools/bench.py [--runs 3] [--sizes 1,10,50] [--dists cdktf,cdktn]
[--steps floor,plan,bindings,synth,cli,render] [--interval 0.02] [--project DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

CLUSTER = """\
  - name: {name}
    criteria:
      service: aks
      accelerator: h100
      os: ubuntu
      intent: training
    profile:
      gpuStack: azure-managed
    kubernetesVersion: "1.34"
"""

BINDINGS_CODE = """
import gpucluster_cdk.constructs_lib.cdk as cdk
h, a = cdk.helm(), cdk.azurerm()
for name in ("HelmProvider", "HelmProviderKubernetes", "Release", "ReleaseSet"):
    getattr(h, name)
for name in ("AzurermProvider", "ResourceGroup", "KubernetesCluster", "KubernetesClusterNodePool"):
    getattr(a, name)
"""

RENDER_CODE = """
import sys
from pathlib import Path
from gpucluster.inputs.config import load_clusters
from gpucluster.pipeline import build_plans
from gpucluster.lint.render import ChartSources, render_plans, write_output
plans = build_plans(load_clusters())
result = render_plans(plans, ChartSources([Path(sys.argv[1])], cache_dir=Path(sys.argv[2]) / 'cache'))
write_output(result, Path(sys.argv[2]) / 'render')
result.renderer.close()
assert sum(1 for r in result.releases if r.manifests) >= len(result.releases) // 2
"""
CHARTS = Path(
    os.environ.get("GPUCLUSTER_CHARTS") or ROOT.parent / "shared" / "reference" / "charts"
)


def cluster_file(folder: Path, n: int) -> Path:
    """``<folder>/clusters-<n>.yaml``: the default AKS cluster ``n`` times (c01, c02, ...)."""
    path = folder / f"clusters-{n}.yaml"
    path.write_text(
        "clusters:\n" + "".join(CLUSTER.format(name=f"c{i:02d}") for i in range(1, n + 1))
    )
    return path


@dataclass(frozen=True)
class Context:
    """What a step needs to build its command: the scratch folder, python, project, distribution."""

    scratch: Path
    python: str
    project: Path
    dist: str


@dataclass(frozen=True)
class Step:
    """One benchmark step.

    Attributes:
        name / description: printed in the table and the legend.
        command: (context, clusters) -> (argv, extra environment).
        sizes: None = every ``--sizes`` value; otherwise only these cluster counts.
        dists: distributions the step runs under (None = all).
        available / unavailable: whether the step can run here, and the note printed when not.
        prepare: (context, clusters, run index) -> None, called before each run, not measured.
        min_runs: cluster count -> the least number of runs of that row (more than ``--runs`` for
            the quick rows the done-when ratios divide by, whose medians of 3 moved most).
        alternate: another step measured run for run with this one (before each of its runs, same
            cluster count), as a row of its own named ``<other>-alt``: a target dividing this
            step's row by the other step's uses those runs, taken in the same minutes.
    """

    name: str
    description: str
    command: Callable[[Context, int], tuple[list[str], dict[str, str]]]
    sizes: tuple[int, ...] | None = None
    dists: tuple[str, ...] | None = None
    available: Callable[[], bool] = lambda: True
    unavailable: str = ""
    prepare: Callable[[Context, int, int], None] | None = None
    min_runs: Mapping[int, int] = field(default_factory=dict)
    alternate: str | None = None


QUICK_RUNS = 7
"""Runs of the one-cluster floor, plan and synth rows (at least): a median of 7 fresh processes."""


def _floor(ctx: Context, n: int):
    return [ctx.python, "-c", f"import {ctx.dist}"], {}


def _plan(ctx: Context, n: int):
    return [
        ctx.python,
        "-m",
        "gpucluster.cli",
        "plan",
        "--config",
        str(cluster_file(ctx.scratch, n)),
    ], {}


def _bindings(ctx: Context, n: int):
    return [ctx.python, "-c", BINDINGS_CODE], {}


ONE_PROCESS = {"GPUCLUSTER_SYNTH_CACHE": "off", "GPUCLUSTER_SYNTH_WORKERS": "1"}
"""A synth that reuses nothing and builds every stack in its own process (the path before reuse and
workers; what the ``synth``, ``cli`` and ``fleet`` rows measure)."""


def _synth(ctx: Context, n: int):
    out = ctx.scratch / f"out-{ctx.dist}-{n}"
    return [ctx.python, str(ctx.project / "main.py")], {
        "GPUCLUSTER_CONFIG": str(cluster_file(ctx.scratch, n)),
        "CDKTF_OUTDIR": str(out),
        **ONE_PROCESS,
    }


def default_workers() -> int:
    """The worker count a synth uses by default here (the usable CPUs, at most 8)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))


def _workers(ctx: Context, n: int):
    out = ctx.scratch / f"workers-out-{ctx.dist}-{n}"
    return [ctx.python, str(ctx.project / "main.py")], {
        "GPUCLUSTER_CONFIG": str(cluster_file(ctx.scratch, n)),
        "CDKTF_OUTDIR": str(out),
        "GPUCLUSTER_SYNTH_CACHE": "off",
        "GPUCLUSTER_SYNTH_WORKERS": str(default_workers()),
    }


def resynth_file(folder: Path, n: int, edit: int) -> Path:
    """``<folder>/resynth-<n>.yaml``: :func:`cluster_file`'s clusters, c01 with explicit pools whose GPU
    node count is ``edit + 1`` (each value another plan of c01 only)."""
    text = (
        cluster_file(folder, n)
        .read_text()
        .replace(
            "- name: c01\n",
            "- name: c01\n    pools:\n      - {name: system, vmSize: Standard_D8ds_v5, nodeCount: 2, gpu: false}\n"
            f"      - {{name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: {edit + 1}}}\n",
            1,
        )
    )
    path = folder / f"resynth-{n}.yaml"
    path.write_text(text)
    return path


def _resynth_env(ctx: Context, n: int) -> dict[str, str]:
    return {
        "GPUCLUSTER_CONFIG": str(ctx.scratch / f"resynth-{n}.yaml"),
        "CDKTF_OUTDIR": str(ctx.scratch / f"resynth-out-{ctx.dist}-{n}"),
        "GPUCLUSTER_CACHE_DIR": str(ctx.scratch / f"resynth-cache-{ctx.dist}"),
    }


def _resynth_prepare(ctx: Context, n: int, run: int) -> None:
    """Before run ``run``: the first time, a whole synth (unmeasured) fills the cache and the output
    folder; then c01 is edited (another GPU node count), so the run rebuilds c01 and reuses the rest."""
    if run == 0:
        resynth_file(ctx.scratch, n, 0)
        cmd, extra = _resynth(ctx, n)
        measure(
            cmd,
            cwd=ctx.scratch,
            interval=1.0,
            env=bench_env(extra, dist=ctx.dist, project=ctx.project),
        )
    resynth_file(ctx.scratch, n, run + 1)


def _resynth(ctx: Context, n: int):
    return [ctx.python, str(ctx.project / "main.py")], _resynth_env(ctx, n)


def _cli(ctx: Context, n: int):
    work = workdir(ctx.scratch, python=ctx.python, project=ctx.project)
    cdktf = str(ROOT / "node_modules" / ".bin" / "cdktf")
    return [cdktf, "synth", "--output", str(ctx.scratch / f"cli-out-{n}")], {
        "GPUCLUSTER_CONFIG": str(cluster_file(ctx.scratch, n)),
        "_BENCH_CWD": str(work),
        **ONE_PROCESS,
    }


def fleet_file(folder: Path, n: int) -> Path:
    """``<folder>/fleet-<n>.yaml``: :func:`cluster_file`'s clusters as a two-group fleet (c01 canary, the rest prod)."""
    text = cluster_file(folder, n).read_text()
    for i in range(1, n + 1):
        group = "canary" if i == 1 else "prod"
        text = text.replace(
            f"- name: c{i:02d}\n", f"- name: c{i:02d}\n    fleet: {{group: {group}}}\n", 1
        )
    groups = "    - {name: canary, afterStageWaitSeconds: 600}\n" + (
        "    - {name: prod}\n" if n > 1 else ""
    )
    path = folder / f"fleet-{n}.yaml"
    path.write_text(
        "fleet:\n  name: bench\n  hub: {dnsPrefix: bench-hub}\n  autoUpgrade: {channel: Stable}\n"
        "  placements: [{component: kernel-module-blocklist}]\n  groups:\n" + groups + text
    )
    return path


def _fleet(ctx: Context, n: int):
    out = ctx.scratch / f"fleet-out-{ctx.dist}-{n}"
    return [ctx.python, str(ctx.project / "main.py")], {
        "GPUCLUSTER_CONFIG": str(fleet_file(ctx.scratch, n)),
        "CDKTF_OUTDIR": str(out),
        **ONE_PROCESS,
    }


def _render(ctx: Context, n: int):
    return [ctx.python, "-c", RENDER_CODE, str(CHARTS), str(ctx.scratch)], {}


STEPS: dict[str, Step] = {
    "floor": Step(
        "floor",
        "import cdktf / cdktn: the least any synth costs",
        _floor,
        sizes=(1,),
        min_runs={1: QUICK_RUNS},
    ),
    "plan": Step(
        "plan",
        "gpucluster plan --config FILE (domain core, no CDK)",
        _plan,
        dists=("cdktf",),
        min_runs={1: QUICK_RUNS},
    ),
    "bindings": Step(
        "bindings", "framework + helm + azurerm binding classes used", _bindings, sizes=(1,)
    ),
    "synth": Step("synth", "python main.py: the whole synthesis", _synth, min_runs={1: QUICK_RUNS}),
    "cli": Step("cli", "cdktf synth (the CLI runs main.py)", _cli, sizes=(1,), dists=("cdktf",)),
    "render": Step(
        "render",
        "gpucluster render of the default stack (Helm's engine)",
        _render,
        sizes=(1,),
        dists=("cdktf",),
        available=lambda: CHARTS.is_dir(),
        unavailable=f"no chart folder at {CHARTS} (set GPUCLUSTER_CHARTS)",
    ),
    "fleet": Step(
        "fleet",
        "python main.py on a two-group fleet (fleet, barrier, hub stacks)",
        _fleet,
        dists=("cdktf",),
    ),
    "resynth": Step(
        "resynth",
        "python main.py after editing one cluster (the others' stacks reused from the cache)",
        _resynth,
        sizes=(10, 50),
        dists=("cdktf",),
        prepare=_resynth_prepare,
    ),
    "workers": Step(
        "workers",
        f"python main.py, nothing reused, clusters built by {default_workers()} worker processes",
        _workers,
        sizes=(10, 50),
        dists=("cdktf",),
        alternate="synth",
    ),
}
"""The steps, in the order they are printed."""

VENVS = {"cdktf": ROOT / ".venv", "cdktn": ROOT / ".venv-cdktn"}


def bench_env(
    extra: dict[str, str] | None = None, *, dist: str = "cdktf", project: Path = ROOT
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCLUSTER_", "CDKTF_"))}
    env.update(
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20", CHECKPOINT_DISABLE="1", CI="true"
    )
    if dist != "cdktf":
        env["GPUCLUSTER_CDK"] = dist
    if project != ROOT:
        env["PYTHONPATH"] = os.pathsep.join([str(project), str(project / "plugins")])
    tfrc = env.get("TF_CLI_CONFIG_FILE") or str(Path.home() / ".terraformrc")
    if not Path(tfrc).exists():
        env["TF_CLI_CONFIG_FILE"] = "/dev/null"
    env.update(extra or {})
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(
    cmd: list[str], *, cwd: Path, interval: float, env: dict[str, str] | None = None
) -> tuple[float, int, float]:
    """Run ``cmd`` in ``cwd``; return (wall seconds, peak tree RSS bytes, CPU seconds).

    CPU is user + system time of the process and of every descendant that was waited for
    (``RUSAGE_CHILDREN`` before and after). stderr goes to a file (a pipe nobody reads while the
    step runs could fill up and block it).

    The file system's dirty data is written first (``os.sync``, not measured): every synth writes
    thousands of files, and the kernel's writeback of one run's files would otherwise land in the
    time of the next (on this machine's ext4, system time of the same synth varied 1.4-4.9 s
    without it, 1.5-2.6 s with it).

    Raises:
        SystemExit: the command failed; names it and shows its stderr.
    """
    env = dict(env if env is not None else bench_env())
    cwd = Path(env.pop("_BENCH_CWD", cwd))
    with tempfile.TemporaryFile() as errors:
        os.sync()
        cpu0 = _children_cpu()
        start = time.perf_counter()
        proc = psutil.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_rss(proc))
            time.sleep(interval)
        wall = time.perf_counter() - start
        cpu = _children_cpu() - cpu0
        if proc.returncode != 0:
            errors.seek(0)
            stderr = errors.read().decode(errors="replace")
            raise SystemExit(f"bench step failed ({proc.returncode}): {' '.join(cmd)}\n{stderr}")
    return wall, peak, cpu


def workdir(scratch: Path, *, python: str = PY, project: Path = ROOT) -> Path:
    """``<scratch>/work``: an empty folder with a cdktf.json that runs ``project``'s main.py."""
    work = scratch / "work"
    work.mkdir(exist_ok=True)
    config = json.loads((ROOT / "cdktf.json").read_text())
    config["app"] = f"{shlex.quote(python)} {shlex.quote(str(project / 'main.py'))}"
    (work / "cdktf.json").write_text(json.dumps(config, indent=2))
    return work


@dataclass
class Row:
    dist: str
    step: str
    clusters: int
    walls: list[float]
    peaks: list[int]
    cpus: list[float]

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)


def machine() -> str:
    cpus = os.cpu_count() or 0
    mem = psutil.virtual_memory().total / 2**30
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.machine()}, {cpus} CPUs, {mem:.0f} GiB, Python {platform.python_version()}, "
        f"load average {load:.1f} at start; project bytecode compiled first"
    )


def print_table(rows: list[Row], runs: int, interval: float) -> None:
    floors = {r.dist: r.wall for r in rows if r.step == "floor"}
    print(
        f"gpucluster bench: default AKS cluster x N, {runs} fresh processes per row ({QUICK_RUNS} for the "
        f"one-cluster floor, plan and synth rows, and one more floor after every other row: the runs "
        f"column), peak RSS of the process tree "
        f"sampled every {interval * 1000:.0f} ms; {machine()}"
    )
    print(
        f"{'dist':<6} {'step':<9} {'clusters':>8} {'runs':>4} {'median s':>9} {'min s':>7} {'max s':>7} {'cpu s':>7} "
        f"{'peak MiB':>9} {'x floor':>8}"
    )
    for r in rows:
        ratio = f"{r.wall / floors[r.dist]:.2f}" if r.dist in floors and r.step != "floor" else "-"
        print(
            f"{r.dist:<6} {r.step:<9} {r.clusters:>8} {len(r.walls):>4} {r.wall:>9.2f} {min(r.walls):>7.2f} {max(r.walls):>7.2f} "
            f"{statistics.median(r.cpus):>7.2f} {statistics.median(r.peaks) / 2**20:>9.0f} {ratio:>8}"
        )
    per = []
    for dist, step in dict.fromkeys((r.dist, r.step) for r in rows):
        sized = sorted(
            (r for r in rows if (r.dist, r.step) == (dist, step)), key=lambda r: r.clusters
        )
        if len(sized) >= 2 and sized[-1].clusters > sized[0].clusters:
            lo, hi = sized[0], sized[-1]
            extra = hi.clusters - lo.clusters
            wall = (hi.wall - lo.wall) / extra
            cpu = (statistics.median(hi.cpus) - statistics.median(lo.cpus)) / extra
            per.append(f"{dist} {step}: {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms cpu")
    if per:
        print("per extra cluster (" + ", ".join(per) + ")")
    for line in targets(rows):
        print(line)


TARGETS = (
    ("plan, 1 cluster, s", ("plan", 1), None, 0.2),
    ("synth, 1 cluster / floor", ("synth", 1), ("floor", 1), 2.0),
    ("resynth, 50 clusters / synth, 1 cluster", ("resynth", 50), ("synth", 1), 2.0),
    ("workers, 50 clusters / synth, 50 clusters", ("workers", 50), ("synth", 50), 0.65),
)
"""The performance targets the table is read against (cdktf rows): name, row, row divided by
(None: seconds; a ``<step>-alt`` row of the same count, measured run for run with the row, is used
when there is one: :attr:`Step.alternate`), and the most it may be."""


def targets(rows: list[Row], dist: str = "cdktf") -> list[str]:
    """One line per :data:`TARGETS` entry whose rows were measured: the value, the bound, met or not."""
    walls = {(r.step, r.clusters): r.wall for r in rows if r.dist == dist}
    lines = []
    for name, row, over, bound in TARGETS:
        if over is not None and (f"{over[0]}-alt", over[1]) in walls:
            over = (f"{over[0]}-alt", over[1])  # measured run for run with the row
        if row not in walls or (over is not None and over not in walls):
            continue
        value = walls[row] / walls[over] if over is not None else walls[row]
        lines.append(
            f"target {name}: {value:.2f} (at most {bound}) {'met' if value <= bound else 'MISSED'}"
        )
    return lines


BYTECODE_DIRS = ("gpucluster", "plugins", "gpucluster_cdk", "main.py")


def compile_project(project: Path) -> None:
    """Compile the checkout's Python sources to bytecode (``__pycache__``, git-ignored) before measuring.

    An installed package has its bytecode (pip compiles on install); an editable checkout run with
    ``PYTHONDONTWRITEBYTECODE=1`` (set on this machine) would otherwise recompile every module in
    every measured process (~0.15-0.2 s of a plan). Stale files are harmless: Python checks each
    source's mtime and size.
    """
    targets = [str(project / name) for name in BYTECODE_DIRS if (project / name).exists()]
    subprocess.run([PY, "-m", "compileall", "-q", *targets], check=False, stdout=subprocess.DEVNULL)


def _sample(step: Step, ctx: Context, n: int, run: int, row: Row, *, interval: float) -> None:
    """One measured run of ``step`` for ``n`` clusters (its ``prepare`` first), added to ``row``."""
    if step.prepare is not None:
        step.prepare(ctx, n, run)
    cmd, extra = step.command(ctx, n)
    wall, peak, cpu = measure(
        cmd,
        cwd=ctx.scratch,
        interval=interval,
        env=bench_env(extra, dist=ctx.dist, project=ctx.project),
    )
    row.walls.append(wall)
    row.peaks.append(peak)
    row.cpus.append(cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--interval", type=float, default=0.02, help="RSS sampling interval, seconds"
    )
    parser.add_argument("--sizes", default="1,10,50", help="cluster counts, comma-separated")
    parser.add_argument("--dists", default="cdktf,cdktn")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument(
        "--project",
        type=Path,
        default=ROOT,
        help="gpucluster checkout to measure (default: this one)",
    )
    args = parser.parse_args(argv)
    wanted = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in STEPS]
    if unknown:
        parser.error(f"unknown steps {unknown}; choose from {', '.join(STEPS)}")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    project = args.project.resolve()
    compile_project(project)
    rows: list[Row] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpucluster-bench-") as scratch_name:
        scratch = Path(scratch_name)
        for dist in [d.strip() for d in args.dists.split(",") if d.strip()]:
            python = (
                PY
                if dist == "cdktf"
                else str(VENVS.get(dist, Path("/nonexistent")) / "bin" / "python")
            )
            if not Path(python).exists():
                notes.append(f"{dist}: skipped ({python} is missing; `make cdktn` creates it)")
                continue
            ctx = Context(scratch=scratch, python=python, project=project, dist=dist)
            floor_row: Row | None = None
            for name in wanted:
                step = STEPS[name]
                if step.dists is not None and dist not in step.dists:
                    continue
                if not step.available():
                    notes.append(f"{name} step skipped: {step.unavailable}")
                    continue
                for n in [s for s in sizes if step.sizes is None or s in step.sizes]:
                    row = Row(dist, name, n, [], [], [])
                    other = Row(dist, f"{step.alternate}-alt", n, [], [], [])
                    for run in range(max(args.runs, step.min_runs.get(n, 0))):
                        if step.alternate is not None:
                            _sample(
                                STEPS[step.alternate], ctx, n, run, other, interval=args.interval
                            )
                        _sample(step, ctx, n, run, row, interval=args.interval)
                    rows.append(row)
                    if step.alternate is not None:
                        rows.append(other)
                    if name == "floor":
                        floor_row = row
                    elif floor_row is not None:  # the floor of the same minutes as this row
                        _sample(
                            STEPS["floor"],
                            ctx,
                            1,
                            len(floor_row.walls),
                            floor_row,
                            interval=args.interval,
                        )
    print_table(rows, args.runs, args.interval)
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())

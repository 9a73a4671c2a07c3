"""Clusters built by worker processes: the same bytes as one process, and stop signals end them.

Every run is ``python main.py`` (workers are forked before cdktf is imported, which a test process
that already synthesized cannot do). A plugin records the process id of every
``gpucluster_cluster_stack`` call, so each case shows the clusters were built by several workers.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _support import main_env, tree
from test_synth_signals import assert_stopped_stderr

ROOT = Path(__file__).resolve().parents[1]
FLEET_EXAMPLE = ROOT / "examples" / "fleet-canary-prod.yaml"

PIDS_PLUGIN = """
import os
import shutil
from gpucluster.sdk import hookimpl

@hookimpl(tryfirst=True)
def gpucluster_cluster_stack(scope, cluster, recipe):
    with open(os.environ["PIDS_FILE"], "a") as f:
        f.write(f"{os.getpid()} {cluster.name}\\n")
    if os.environ.get("SLOW_CLUSTER") == cluster.name:
        import time
        time.sleep(300)
    return None  # the AKS plugin builds the cluster
"""

MULTI = (
    """\
clusters:
"""
    + "".join(
        f"""  - name: m{i}
    criteria: {{service: aks, accelerator: h100, os: ubuntu, intent: {"training" if i % 2 else "inference"}}}
"""
        for i in range(1, 6)
    )
    + """  - name: lab
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    existing: {kubeconfig: /etc/kube/lab}
    scheduling: {accelerated: {tolerations: ["nvidia.com/gpu:NoSchedule"]}}
"""
)


def start(tmp_path: Path, config: Path, out: Path, workers: str, **extra: str) -> subprocess.Popen:
    plugins = tmp_path / "plugins"
    plugins.mkdir(exist_ok=True)
    (plugins / "gpucluster_test_pids.py").write_text(PIDS_PLUGIN)
    env = main_env(
        outdir=out,
        config=config,
        GPUCLUSTER_PLUGINS="gpucluster_test_pids",
        PYTHONPATH=str(plugins),
        GPUCLUSTER_SYNTH_WORKERS=workers,
        GPUCLUSTER_SYNTH_CACHE="off",
        PIDS_FILE=str(tmp_path / f"pids-{out.parent.name}"),
        **extra,
    )
    return subprocess.Popen(
        [sys.executable, str(ROOT / "main.py")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def builders(tmp_path: Path, out: Path) -> dict[str, str]:
    """cluster -> process id that built its cluster stack."""
    lines = (tmp_path / f"pids-{out.parent.name}").read_text().splitlines()
    return {name: pid for pid, name in (line.split() for line in lines)}


@pytest.mark.parametrize("which", ["fleet", "multi"])
def test_workers_write_the_bytes_of_one_process(tmp_path, which):
    config = FLEET_EXAMPLE if which == "fleet" else tmp_path / "multi.yaml"
    if which == "multi":
        config.write_text(MULTI)
    outs = {}
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}" / "cdktf.out"
        proc = start(tmp_path, config, out, workers)
        _, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, stderr
        pids = set(builders(tmp_path, out).values())
        if workers == "1":
            assert pids == {str(proc.pid)}
        else:
            assert len(pids) == 2 and str(proc.pid) not in pids  # two workers built the clusters
        outs[workers] = tree(out)
    assert outs["1"] == outs["2"]
    assert not list(tmp_path.glob("w2/.cdktf.out.*"))


@pytest.mark.parametrize("signum, to_group", [(signal.SIGTERM, False), (signal.SIGINT, True)])
def test_a_stop_signal_ends_the_workers(tmp_path, signum, to_group):
    """The parent alone (a kill of main.py) or the whole group (Ctrl-C) stopped while a worker is
    inside a cluster stack: the previous output stays, the workers are gone, nothing is left behind."""
    config = tmp_path / "multi.yaml"
    config.write_text(MULTI)
    out = tmp_path / "run" / "cdktf.out"
    (out / "stacks" / "old-runtime").mkdir(parents=True)
    (out / "stacks" / "old-runtime" / "cdk.tf.json").write_text('{"old": true}')
    before = tree(out)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = start(tmp_path, config, out, "2", SLOW_CLUSTER="m5", TMPDIR=str(tmp))
    pids_file = tmp_path / "pids-run"
    try:
        deadline = time.monotonic() + 300
        while not (pids_file.exists() and "m5" in pids_file.read_text()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the slow cluster was never built"
            time.sleep(0.05)
        workers = {int(pid) for pid in builders(tmp_path, out).values()}
        if to_group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signum, stderr
    assert_stopped_stderr(stderr, signum, None)
    assert tree(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["cdktf.out"]
    for pid in workers:
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"worker {pid} outlived main.py")
    deadline = time.monotonic() + 30
    while (
        sorted(tmp.iterdir()) and time.monotonic() < deadline
    ):  # a worker's jsii kernel ends when its pipe closes
        time.sleep(0.1)
    assert sorted(p.name for p in tmp.iterdir()) == []


def test_bad_worker_count_is_one_error_line(tmp_path):
    out = tmp_path / "cdktf.out"
    env = main_env(outdir=out, config=None, GPUCLUSTER_SYNTH_WORKERS="many")
    result = subprocess.run(
        [sys.executable, str(ROOT / "main.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error[")]
    assert len(errors) == 1 and errors[0].startswith(
        "error[config] key=GPUCLUSTER_SYNTH_WORKERS:"
    ), result.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "name, value",
    [
        ("GPUCLUSTER_SYNTH_WORKERS", "\u0662"),
        ("GPUCLUSTER_SYNTH_WORKERS", "+2"),
        ("GPUCLUSTER_SYNTH_WORKERS", "1_0"),
        ("GPUCLUSTER_SYNTH_WORKERS", "99999999999999999999"),
        ("GPUCLUSTER_SYNTH_WORKERS", "0"),
        ("GPUCLUSTER_SYNTH_CACHE", "of"),
        ("GPUCLUSTER_SYNTH_CACHE", "disabled"),
        ("GPUCLUSTER_SYNTH_CACHE", "off\n"),
    ],
)
def test_a_bad_variable_is_one_config_line_and_nothing_written(tmp_path, name, value):
    """The variables follow the flags' rules (``--workers``: 1 to 999 in decimal digits, as the
    flag; the cache switch: on/off, 1/0, yes/no, true/false): anything else is one error[config]
    line naming it, exit 2, nothing written (was: a sign, an underscore, a non-ASCII digit or 20
    digits were taken as a count, and a misspelt cache switch kept the cache on)."""
    config = tmp_path / "gpucluster.yaml"
    config.write_text(
        "clusters:\n  - name: lab\n    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}\n"
        "    existing: {kubeconfig: /etc/kube/lab}\n"
        '    scheduling: {accelerated: {tolerations: ["nvidia.com/gpu:NoSchedule"]}}\n'
    )
    out = tmp_path / "out"
    env = main_env(
        outdir=out, config=config, GPUCLUSTER_CACHE_DIR=str(tmp_path / "cache"), **{name: value}
    )
    proc = subprocess.run(
        [sys.executable, str(ROOT / "main.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if not x.startswith(("warning[", "info["))]
    assert line.startswith(f"error[config] key={name}: ") and " fix: " in line
    assert not out.exists() and not (tmp_path / "cache" / "synth-cluster").exists()


def test_the_queue_gives_each_chunk_once_smaller_towards_the_end():
    from gpucluster_cdk.stacks import workers

    sizes = [n for _, n in workers.queue_chunks(50, 2)]
    assert sizes == [13, 10, 7, 5, 4, 3, 2, 2, 1, 1, 1, 1]
    for count, n in ((1, 2), (7, 3), (1000, 8)):
        chunks = workers.queue_chunks(count, n)
        assert [a for a, _ in chunks] == [sum(k for _, k in chunks[:i]) for i in range(len(chunks))]
        assert sum(k for _, k in chunks) == count and chunks[-1][1] == 1

    fd, chunks = workers._queue([["c3", "c1", "c5"], ["c9", "c0"]])
    try:
        assert [chunks[i] for i in workers._pulled(fd)] == [["c3", "c1"], ["c5"], ["c9"], ["c0"]]
        assert list(workers._pulled(fd)) == []  # empty: every worker stops
    finally:
        os.close(fd)
    many = [[f"w{w}-{i}" for i in range(3)] for w in range(8000)]  # 22,000+ chunks > 64 KiB
    with pytest.raises(OSError):
        workers._queue(many)


NO_FORK_PLUGIN = """
import errno, os
_fork, calls = os.fork, [0]

def fork():  # the system refuses the N-th fork of the app (a process limit: EAGAIN)
    calls[0] += 1
    if calls[0] >= int(os.environ["FAIL_FORK"]):
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
    return _fork()

os.fork = fork
"""

EXISTING = "clusters:\n" + "".join(
    f"""  - name: e{i}
    criteria: {{service: aks, accelerator: h100, os: ubuntu, intent: training}}
    existing: {{kubeconfig: /etc/kube/e{i}KC}}
    scheduling: {{accelerated: {{tolerations: ["nvidia.com/gpu:NoSchedule"]}}}}
"""
    for i in range(6)
)


def test_a_refused_fork_leaves_the_work_to_the_app(tmp_path):
    """The system refuses a fork (the process limit of a container): of the helper that writes the
    reused stacks (no workers; or after two were forked), or of the second worker. The app does
    that work itself: the bytes of one process, exit 0, nothing left behind."""
    config = tmp_path / "gpucluster.yaml"
    config.write_text(EXISTING.replace("KC", ""))
    warm = tmp_path / "warm"
    for where in ("out", "cache"):
        (warm / where).mkdir(parents=True)
    first = main_env(
        outdir=warm / "out" / "cdktf.out",
        config=config,
        GPUCLUSTER_CACHE_DIR=str(warm / "cache"),
        GPUCLUSTER_SYNTH_WORKERS="1",
    )
    subprocess.run([sys.executable, str(ROOT / "main.py")], cwd=tmp_path, env=first, check=True)
    config.write_text(
        EXISTING.replace("e0KC", "e0-v2")
        .replace("e1KC", "e1-v2")
        .replace("e2KC", "e2-v2")
        .replace("e3KC", "e3-v2")
        .replace("KC", "")
    )
    full = main_env(
        outdir=tmp_path / "full" / "cdktf.out", config=config, GPUCLUSTER_SYNTH_CACHE="off"
    )
    subprocess.run([sys.executable, str(ROOT / "main.py")], cwd=tmp_path, env=full, check=True)
    expected = tree(tmp_path / "full" / "cdktf.out")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "gpucluster_test_nofork.py").write_text(NO_FORK_PLUGIN)
    for workers, fail in (("1", 1), ("2", 2), ("2", 3)):  # the helper, a worker, the helper
        case = tmp_path / f"w{workers}-f{fail}"
        shutil.copytree(warm, case)  # 4 clusters to build (2 workers), 2 reused (the helper)
        (case / "tmp").mkdir()
        env = main_env(
            outdir=case / "out" / "cdktf.out",
            config=config,
            GPUCLUSTER_CACHE_DIR=str(case / "cache"),
            GPUCLUSTER_SYNTH_WORKERS=workers,
            GPUCLUSTER_PLUGINS="gpucluster_test_nofork",
            PYTHONPATH=str(plugins),
            FAIL_FORK=str(fail),
            TMPDIR=str(case / "tmp"),
        )
        result = subprocess.run(
            [sys.executable, str(ROOT / "main.py")],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, (workers, fail, result.stderr)
        assert tree(case / "out" / "cdktf.out") == expected, (workers, fail)
        assert sorted(p.name for p in (case / "out").iterdir()) == ["cdktf.out"]
        deadline = time.monotonic() + 30  # a worker ended at its start: its kernel, if any, too
        while sorted((case / "tmp").iterdir()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sorted(p.name for p in (case / "tmp").iterdir()) == []


IGNORING_SIGCHLD = (
    "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)
"""Start a program with SIGCHLD ignored, as a supervisor that ignores it leaves its children (the
disposition is kept across exec): the kernel then reaps children itself, so waitpid finds none."""


def test_a_process_started_with_sigchld_ignored_builds_in_process(tmp_path):
    """Workers and the helper cannot be waited for when SIGCHLD is ignored (was: error[output] ...
    No child processes (errno ECHILD), exit 2, for a first synth with workers and for a re-synth):
    the app builds and writes everything itself, the bytes of one process."""
    config = tmp_path / "gpucluster.yaml"
    config.write_text(EXISTING.replace("KC", ""))
    out = tmp_path / "run" / "cdktf.out"
    env = main_env(
        outdir=out,
        config=config,
        GPUCLUSTER_CACHE_DIR=str(tmp_path / "cache"),
        GPUCLUSTER_SYNTH_WORKERS="2",
    )
    for changed in ((), ("e0", "e1", "e2", "e3")):  # 6 clusters built; then 4 built, 2 reused
        text = EXISTING
        for name in changed:
            text = text.replace(f"{name}KC", f"{name}-v2")
        config.write_text(text.replace("KC", ""))
        result = subprocess.run(
            [sys.executable, "-c", IGNORING_SIGCHLD, str(ROOT / "main.py")],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr
        full = tmp_path / f"full-{len(changed)}" / "cdktf.out"
        subprocess.run(
            [sys.executable, str(ROOT / "main.py")],
            cwd=tmp_path,
            env=main_env(outdir=full, config=config, GPUCLUSTER_SYNTH_CACHE="off"),
            check=True,
        )
        assert tree(out) == tree(full)
        assert sorted(p.name for p in out.parent.iterdir()) == ["cdktf.out"]

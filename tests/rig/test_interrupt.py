"""`gpucluster rehearse` stopped in the middle of its apply (Ctrl-C, or a CI runner's SIGTERM)
leaves no rig process behind: the control plane kwokctl started (etcd, kube-apiserver, ...) and
every Helm it ran are gone when the command has exited, with one ``error[rig.interrupted]`` line
and exit 130.

The rehearsal is held in its apply on purpose: the stand-ins report ready only after 600 s, so
the ClusterPolicy gate's Helm waits; the signal comes once a Helm of the apply is running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _ours(folder: Path) -> dict[int, str]:
    """pid -> command line of every process whose command line names ``folder``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(folder) in cmdline:
            found[int(entry.name)] = cmdline
    return found


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """The rehearsal's work folder; whatever a failed test leaves running there is killed."""
    folder = tmp_path / "work"
    yield folder
    for pid in _ours(folder):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _start(rig_bin: Path, shared: Path, work: Path, cwd: Path) -> subprocess.Popen[str]:
    """`gpucluster rehearse` of the built-in example (its own session, as a terminal starts it)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpucluster.cli",
            "rehearse",
            "--no-isolate",
            "--binaries",
            str(rig_bin),
            "--charts",
            str(shared / "charts"),
            "--crds",
            str(shared / "crds"),
            "--delay",
            "600",
            "--work",
            str(work),
        ],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # A shell without job control starts background commands with SIGINT ignored, and a
        # process keeps that: give the command the default a terminal's foreground job has.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for_helm(proc: subprocess.Popen[str], work: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        running = _ours(work).values()
        if any(" upgrade " in c and "helm" in c for c in running):
            return
        time.sleep(0.5)
    raise AssertionError(f"no helm of the apply started within {timeout} s")


def _stopped(proc: subprocess.Popen[str], work: Path) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    deadline = time.monotonic() + 5  # a process that is exiting leaves /proc a moment later
    while _ours(work) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ours(work) == {}, "left running:\n" + "\n".join(_ours(work).values())
    return proc.returncode, err


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_an_interrupted_rehearsal_leaves_nothing_running(
    rig_bin: Path, shared: Path, work: Path, tmp_path: Path, how: str
) -> None:
    proc = _start(rig_bin, shared, work, tmp_path)
    _wait_for_helm(proc, work)
    if how == "ctrl-c":  # the terminal signals the whole foreground process group
        os.killpg(proc.pid, signal.SIGINT)
    else:  # a CI runner's timeout signals the command it started
        proc.send_signal(signal.SIGTERM)
    code, err = _stopped(proc, work)
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("info[")]
    assert code == 130, err
    assert len(lines) == 1 and lines[0].startswith("error[rig.interrupted]"), err
    assert "Traceback" not in err
    assert not (work / "gpu-training" / "report.json").exists()

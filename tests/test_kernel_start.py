"""gpucluster_cdk/kernel_start.py: the jsii kernel's process started while the plans are made, and
taken by jsii's own start only when jsii asks for exactly that process; the output is the same
bytes whether it was taken, refused or never started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import tree as tree_bytes

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    """``python -c code`` with this environment plus ``env`` (Node 20's jsii banner silenced)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", **env},
    )


WRAPPER = """
import json, os, sys
sys.path[:0] = [{root!r}, {plugins!r}]
from gpucluster_cdk import app, kernel_start
mode = sys.argv[1]
seen, procs = [], []
take, prestart = kernel_start.take, kernel_start.prestart
def recording_take(args, kwargs):
    got = take(args, kwargs)
    seen.append(got is not None)
    return got
def recording_prestart():
    started = prestart()
    procs.extend((s.proc, s.folder) for s in kernel_start._started)
    return started
kernel_start.take = recording_take
kernel_start.prestart = (lambda: False) if mode == "off" else recording_prestart
if mode == "changed":  # the environment changes after the prestart, before the kernel starts
    import gpucluster.pipeline as pipeline
    build = pipeline.build_plans
    def changing(*a, **k):
        os.environ["GPUCLUSTER_TEST_CHANGED"] = "1"
        return build(*a, **k)
    pipeline.build_plans = changing
code = app.main([])
print(json.dumps({{
    "code": code,
    "taken": seen,
    "prestarted": len(procs),
    "ended": [p.poll() is not None for p, _ in procs],
    "folders_left": [f for _, f in procs if os.path.exists(f)],
}}))
"""


def _run(tmp_path: Path, mode: str, out: Path, **env: str) -> dict:
    script = tmp_path / "wrapper.py"
    script.write_text(WRAPPER.format(root=str(ROOT), plugins=str(ROOT / "plugins")))
    result = subprocess.run(
        [sys.executable, str(script), mode],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("GPUCLUSTER_", "CDKTF_"))},
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
            "CHECKPOINT_DISABLE": "1",
            "CDKTF_OUTDIR": str(out),
            "GPUCLUSTER_SYNTH_WORKERS": "1",
            "GPUCLUSTER_CACHE_DIR": str(tmp_path / "cache"),
            **env,
        },
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_the_prestarted_kernel_is_taken_and_the_output_is_the_same(tmp_path):
    """A one-cluster synth: jsii takes the prestarted process (once), and the output is byte for
    byte that of a run without it; a refused one (the environment changed in between) is ended
    and jsii's own kernel writes the same bytes again."""
    on = _run(tmp_path, "on", tmp_path / "on", GPUCLUSTER_SYNTH_CACHE="off")
    off = _run(tmp_path, "off", tmp_path / "off", GPUCLUSTER_SYNTH_CACHE="off")
    changed = _run(tmp_path, "changed", tmp_path / "changed", GPUCLUSTER_SYNTH_CACHE="off")
    assert (on["code"], on["prestarted"], on["taken"]) == (0, 1, [True])
    assert (off["code"], off["prestarted"], off["taken"]) == (0, 0, [False])
    assert (changed["code"], changed["prestarted"], changed["taken"]) == (0, 1, [False])
    assert changed["ended"] == [True] and changed["folders_left"] == []
    reference = tree_bytes(tmp_path / "off")
    assert tree_bytes(tmp_path / "on") == reference
    assert tree_bytes(tmp_path / "changed") == reference


def test_a_prestarted_kernel_no_one_takes_is_ended(tmp_path):
    """Every cluster reused: no kernel is needed, and the prestarted process is ended and its
    runtime folder removed before the synth returns."""
    first = _run(tmp_path, "on", tmp_path / "out")
    again = _run(tmp_path, "on", tmp_path / "out")
    assert first["taken"] == [True]
    assert (again["code"], again["prestarted"], again["taken"]) == (0, 1, [])
    assert again["ended"] == [True] and again["folders_left"] == []


FORK = """
import json, os, sys
sys.path.insert(0, {root!r})
from gpucluster_cdk import kernel_start
assert kernel_start.prestart()
started = kernel_start._started[0]
pid = os.fork()
if pid == 0:  # a worker: closes its copies, signals nothing, cannot take it
    taken = kernel_start.take([*started.command, "x"], {{}})
    kernel_start.discard()
    os._exit(0 if taken is None and not kernel_start._started and started.proc.stdin.closed else 1)
_, status = os.waitpid(pid, 0)
alive = started.proc.poll() is None
kernel_start.discard()
print(json.dumps({{"child": os.waitstatus_to_exitcode(status), "alive_after_child": alive,
                  "ended": started.proc.poll() is not None, "folder": os.path.exists(started.folder)}}))
"""


def test_a_forked_child_leaves_the_parents_kernel_alone(tmp_path):
    result = _python(FORK.format(root=str(ROOT)))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "child": 0,
        "alive_after_child": True,
        "ended": True,
        "folder": False,
    }


@pytest.mark.parametrize(
    "env",
    [{"NODE_OPTIONS": "--bogus-option"}, {"JSII_RUNTIME": "/nonexistent/jsii-runtime.js"}],
    ids=["NODE_OPTIONS", "JSII_RUNTIME"],
)
def test_not_started_where_jsii_would_start_otherwise(env):
    """A user's NODE_OPTIONS (checked by running Node.js first) or JSII_RUNTIME: jsii starts the
    kernel itself, as before."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from gpucluster_cdk import kernel_start\n"
        "print(kernel_start.prestart(), kernel_start._started)"
    )
    result = _python(code, **env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "[]"]


SIGNAL_IN_DISCARD = """
import os, signal, sys
sys.path.insert(0, {root!r})
from gpucluster_cdk import kernel_start
signal.signal(signal.SIGTERM, signal.SIG_DFL)  # Python's defaults: `gpucluster synth` after main
signal.signal(signal.SIGINT, signal.default_int_handler)
assert kernel_start.prestart()
started = kernel_start._started[0]
print(started.proc.pid, flush=True)
terminate = started.proc.terminate
def terminate_then_signal():  # the stop signal arrives while the unused kernel is being ended
    terminate()
    os.kill(os.getpid(), {signum})
started.proc.terminate = terminate_then_signal
kernel_start.discard()
"""


@pytest.mark.parametrize("signum", [2, 15], ids=["SIGINT", "SIGTERM"])
def test_a_stop_signal_while_the_unused_kernel_is_ended_leaks_nothing(tmp_path, signum):
    """A stop signal during :func:`kernel_start.discard` (the end of ``gpucluster synth``'s
    ``main`` after every cluster was reused, where Python's own SIGINT and SIGTERM actions apply):
    the process still ends, and neither the runtime folder nor the kernel's process is left."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    result = _python(SIGNAL_IN_DISCARD.format(root=str(ROOT), signum=signum), TMPDIR=str(tmp))
    assert result.returncode != 0, result.stderr  # the signal ended it
    pid = int(result.stdout.split()[0])
    assert sorted(p.name for p in tmp.iterdir()) == []  # no gpucluster-jsii-runtime-* folder
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        cmdline = b""
    assert str(tmp).encode() not in cmdline  # the kernel's process ended with the run


CLI_SIGNAL_IN_DISCARD = """
import os, signal, sys
sys.path[:0] = [{root!r}, {plugins!r}]
from gpucluster import cli
from gpucluster_cdk import kernel_start
prestart = kernel_start.prestart
def prestart_then_signal_when_ended():
    started = prestart()
    if started and sys.argv[1] == "signal":
        proc = kernel_start._started[0].proc
        terminate = proc.terminate
        def terminate_then_signal():  # every cluster reused: the unused kernel is ended, and a SIGTERM comes
            terminate()
            os.kill(os.getpid(), signal.SIGTERM)
        proc.terminate = terminate_then_signal
    return started
kernel_start.prestart = prestart_then_signal_when_ended
sys.exit(cli.main(["synth"]))
"""


def test_gpucluster_synth_stopped_while_the_unused_kernel_is_ended_prints_the_one_line(tmp_path):
    """``gpucluster synth`` (in-process) whose every cluster is reused, a SIGTERM while the
    prestarted kernel is ended: the one line, exit 128 + 15, the output of the run before kept,
    nothing left in TMPDIR (as for a signal at any other moment of the synth)."""
    from _support import main_env

    from tests.test_synth_signals import assert_stopped_stderr

    script = tmp_path / "synth.py"
    script.write_text(CLI_SIGNAL_IN_DISCARD.format(root=str(ROOT), plugins=str(ROOT / "plugins")))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "cdktf.out"
    env = main_env(
        outdir=out,
        GPUCLUSTER_SYNTH_WORKERS="1",
        TMPDIR=str(tmp),
        GPUCLUSTER_CACHE_DIR=str(tmp_path / "cache"),
    )

    def synth(mode: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(script), mode],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    first = synth("plain")
    assert first.returncode == 0, first.stderr
    before = tree_bytes(out)
    stopped = synth("signal")
    assert stopped.returncode == 128 + 15, stopped.stderr
    assert_stopped_stderr(stopped.stderr, 15, None)
    assert tree_bytes(out) == before
    assert sorted(p.name for p in tmp.iterdir()) == []


SHIM = """#!{python}
import os, subprocess, sys
with open(os.environ["SHIM_MASK_FILE"], "w") as out:
    out.write(next(line for line in open("/proc/self/status") if line.startswith("SigBlk:")))
sys.exit(subprocess.call(["node", *sys.argv[1:]]))
"""


def test_a_node_shim_starts_with_the_stop_signals_deliverable(tmp_path):
    """``node`` (``JSII_NODE`` or PATH) may be a version manager's shim that runs Node.js as its
    child instead of replacing itself (Volta's does): it keeps the signal mask it was started
    with. The prestarted one gets this process's mask, as jsii's own start would give it (not the
    stop signals blocked while :func:`prestart` records it), so the SIGTERM of
    :func:`kernel_start.discard` ends it at once rather than a SIGKILL after the wait."""
    shim = tmp_path / "node-shim"
    shim.write_text(SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    mask_file = tmp_path / "mask"
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from gpucluster_cdk import kernel_start\n"
        "assert kernel_start.prestart()\n"
        "proc = kernel_start._started[0].proc\n"
        "import os, time\n"
        f"while not os.path.exists({str(mask_file)!r}) and proc.poll() is None:\n"
        "    time.sleep(0.01)  # until the shim runs\n"
        "kernel_start.discard()\n"
        "print(proc.returncode)"
    )
    result = _python(code, JSII_NODE=str(shim), SHIM_MASK_FILE=str(mask_file))
    assert result.returncode == 0, result.stderr
    blocked = int(mask_file.read_text().split()[1], 16)
    stop = [s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if blocked & (1 << (s - 1))]
    assert stop == []
    assert int(result.stdout) == -signal.SIGTERM


HELD = """
import os, signal, sys
sys.path.insert(0, {root!r})
from gpucluster_cdk import kernel_start
seen = []
signal.signal(signal.SIGTERM, lambda signum, frame: seen.append((signum, len(kernel_start._started))))
files = kernel_start._runtime_files
def files_then_signal(folder):  # the signal comes while the process is being started
    os.kill(os.getpid(), signal.SIGTERM)
    return files(folder)
kernel_start._runtime_files = files_then_signal
started = kernel_start.prestart()
print(started, seen, signal.getsignal(signal.SIGTERM).__name__)
kernel_start.discard()
"""


def test_a_stop_signal_during_the_prestart_is_handled_once_it_is_recorded():
    """A stop signal while :func:`prestart` starts the process is handled (by the handler of
    before, once) right after the process is recorded, so a handler that stops the run finds it
    there for :func:`kernel_start.discard`."""
    result = _python(HELD.format(root=str(ROOT)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split(maxsplit=1) == ["True", "[(15, 1)] <lambda>\n"]


GONE_CWD = """
import os, sys, tempfile
sys.path.insert(0, {root!r})
from gpucluster_cdk import kernel_start
gone = tempfile.mkdtemp()
os.chdir(gone)
os.rmdir(gone)  # the working directory was removed (by another program)
started = kernel_start.prestart()
children = []
for entry in os.listdir("/proc"):
    try:
        with open(f"/proc/{{entry}}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        continue
    if int(fields[1]) == os.getpid():
        children.append(entry)
print(started, children)
"""


def test_no_process_is_left_unrecorded_when_the_directory_is_gone():
    """A working directory removed before the synth: no prestart (jsii starts the kernel, or the
    run reports the directory), and no process of one left running until this process exits."""
    result = _python(GONE_CWD.format(root=str(ROOT)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "[]"]


def test_many_synths_in_one_process_register_one_exit_hook():
    """An in-process caller running synth after synth (each one prestarts, every cluster
    reused): the exit hook that ends an unused kernel is registered once, not once per synth."""
    code = (
        f"import atexit, sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from gpucluster_cdk import kernel_start\n"
        "before = atexit._ncallbacks()\n"
        "for _ in range(3):\n"
        "    assert kernel_start.prestart()\n"
        "    kernel_start.discard()\n"
        "print(atexit._ncallbacks() - before)"
    )
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1"]


def test_a_node_options_the_cdktf_cli_sets_gets_the_prestart_and_node_runs_once_for_it(tmp_path):
    """``cdktf synth`` runs the app with ``NODE_OPTIONS=--max-old-space-size=4096``: it is checked
    by running Node.js once (the prestart's check; the framework's import asks again and runs
    nothing), the prestarted kernel is taken, and the output is the same bytes."""
    calls = tmp_path / "node-calls"
    node = tmp_path / "node"
    node.write_text(f'#!/bin/sh\necho "$*" >> {str(calls)!r}\nexec {shutil.which("node")!r} "$@"\n')
    node.chmod(0o755)
    env = {"GPUCLUSTER_SYNTH_CACHE": "off", "NODE_OPTIONS": "--max-old-space-size=4096"}
    on = _run(tmp_path, "on", tmp_path / "on", JSII_NODE=str(node), **env)
    assert _run(tmp_path, "off", tmp_path / "off", **env)["taken"] == [False]
    assert (on["code"], on["prestarted"], on["taken"]) == (0, 1, [True])
    checks = [line for line in calls.read_text().splitlines() if line == "-e "]
    assert len(checks) == 1, calls.read_text()
    assert tree_bytes(tmp_path / "on") == tree_bytes(tmp_path / "off")

"""The exit hooks a synth process runs itself (gpucluster_cdk.exit_hooks): on the checked CPython
versions through atexit's undocumented calls, on any other interpreter the plain path, with the
same output, no traceback, no folder or kernel process left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from _support import main_env, tree

from gpucluster_cdk import exit_hooks

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "examples" / "fleet-canary-prod.yaml"

RUN = (
    "import sys\n"
    "import gpucluster_cdk.exit_hooks as hooks\n"
    "if sys.argv[1] == 'plain':\n"
    "    hooks.CHECKED_PYTHONS = ()\n"
    "    assert not hooks.private_atexit()\n"
    "from gpucluster_cdk import app\n"
    "app.install_stop_handlers()\n"
    "app.run_script()\n"
)


def test_the_private_calls_are_used_only_on_a_checked_cpython(monkeypatch):
    assert exit_hooks.private_atexit() is (
        sys.implementation.name == "cpython" and sys.version_info[:2] in exit_hooks.CHECKED_PYTHONS
    )
    monkeypatch.setattr(exit_hooks, "CHECKED_PYTHONS", ())
    assert exit_hooks.private_atexit() is False
    assert exit_hooks.run_now() is False and exit_hooks.drop_inherited() is False


def test_hooks_run_once_on_either_path(tmp_path):
    """A hook registered by the process runs exactly once, whether run_now ran it (checked
    CPython) or the interpreter did (plain path)."""
    log = tmp_path / "log"
    code = (
        "import atexit, sys\n"
        "import gpucluster_cdk.exit_hooks as hooks\n"
        "if sys.argv[1] == 'plain':\n"
        "    hooks.CHECKED_PYTHONS = ()\n"
        f"atexit.register(lambda: open({str(log)!r}, 'a').write('ran\\n'))\n"
        "if not hooks.run_now():\n"
        "    raise SystemExit(0)\n"
        "import os; os._exit(0)\n"
    )
    for mode in ("checked", "plain"):
        log.write_text("")
        subprocess.run([sys.executable, "-c", code, mode], check=True, cwd=ROOT, timeout=60)
        assert log.read_text() == "ran\n", mode


def _kernels_with(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in env:
            found.append(int(proc.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_the_plain_path_writes_the_same_stacks_and_leaves_nothing(tmp_path):
    outputs = {}
    for mode in ("checked", "plain"):
        folder = tmp_path / mode
        tmp = tmp_path / f"tmp-{mode}"
        folder.mkdir()
        tmp.mkdir()
        marker = f"GPUCLUSTER_EXIT_HOOKS_TEST={uuid.uuid4().hex}"
        name, _, value = marker.partition("=")
        env = main_env(
            outdir=folder / "cdktf.out",
            config=FLEET,
            GPUCLUSTER_SYNTH_CACHE="off",
            GPUCLUSTER_SYNTH_WORKERS="2",
            TMPDIR=str(tmp),
            PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'plugins'}",
            **{name: value},
        )
        done = subprocess.run(
            [sys.executable, "-c", RUN, mode],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        deadline = time.monotonic() + 30
        while _kernels_with(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _kernels_with(marker) == [], mode
        assert list(tmp.iterdir()) == [], mode
        outputs[mode] = tree(folder / "cdktf.out")
    assert outputs["plain"] == outputs["checked"] and len(outputs["checked"]) > 4

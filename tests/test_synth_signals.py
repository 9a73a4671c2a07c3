"""main.py stopped by a signal half-way through synthesis: previous output kept, nothing leaks.

A plugin loaded through GPUCLUSTER_PLUGINS builds the cluster stack of the embedded default
(tryfirst, so the AKS plugin and its azurerm binding never run), tells the test it is inside
the synthesis, and waits. The test then sends the signal. By then the staged output folder,
the chart staging folder and jsii's runtime folder exist; all of them must be gone afterwards
(TMPDIR is a folder of the test, so anything left in it is a leak).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PLUGIN = '''
import os, time
from pathlib import Path
from gpucluster.sdk import ClusterConnection, hookimpl

@hookimpl(tryfirst=True)
def gpucluster_cluster_stack(scope, cluster, recipe):
    Path(os.environ["SIGNAL_TEST_MARKER"]).write_text("inside synth")
    time.sleep(300)
    return ClusterConnection(kubeconfig_path="~/.kube/config")
'''


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "signum, to_group",
    [
        (signal.SIGTERM, False),
        (signal.SIGHUP, False),
        (signal.SIGINT, False),
        (signal.SIGINT, True),  # Ctrl-C: the jsii Node.js kernel gets it too
        (signal.SIGTERM, True),  # a CI job timeout stopping the process group
    ],
)
def test_signal_during_synth_keeps_previous_output_and_leaks_nothing(tmp_path, signum, to_group):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "gpucluster_test_slow.py").write_text(PLUGIN)
    out = tmp_path / "work" / "cdktf.out"
    (out / "stacks" / "old-runtime").mkdir(parents=True)
    (out / "stacks" / "old-runtime" / "cdk.tf.json").write_text('{"old": true}')
    (out / "manifest.json").write_text('{"stacks": {}}')
    before = tree(out)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    marker = tmp_path / "marker"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCLUSTER_", "CDKTF_"))}
    env.update(
        GPUCLUSTER_PLUGINS="gpucluster_test_slow",
        PYTHONPATH=str(tmp_path / "plugins"),
        SIGNAL_TEST_MARKER=str(marker),
        CDKTF_OUTDIR=str(out),
        TMPDIR=str(tmp),
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
    )
    proc = subprocess.Popen([sys.executable, "main.py"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():  # wait until the plugin runs inside the synthesis
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the plugin was never called"
            time.sleep(0.05)
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
    assert "Traceback" not in stderr
    assert f"interrupted by {signal.Signals(signum).name}" in stderr
    assert tree(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["cdktf.out"]  # no staged .cdktf.out.* folder
    assert sorted(p.name for p in tmp.iterdir()) == []  # no chart staging or jsii folders left

"""The CLI exits quietly when its output pipe closes early (``gpucluster plan | head -1``,
``gpucluster graph --format dot | dot`` without Graphviz): no BrokenPipeError traceback, exit 1
(Python's documented recipe: output was cut short; input errors keep exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPUCLUSTER = Path(sys.executable).parent / "gpucluster"


def without_default_notice(stderr: str) -> str:
    """stderr without the info line announcing the embedded default cluster (config.embedded_default_notice)."""
    return "".join(
        line
        for line in stderr.splitlines(keepends=True)
        if not line.startswith("info[input.default] ")
    )


def run_into_closed_pipe(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run the installed ``gpucluster`` with stdout on a pipe whose reader is already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write now fails with EPIPE, deterministically
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLUSTER_")}
    try:
        return subprocess.run(
            [str(GPUCLUSTER), *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args", [["plan"], ["graph", "--format", "dot"], ["plugins"], ["recipe", "--service", "aks"]]
)
def test_closed_output_pipe_exits_1_without_traceback(args, tmp_path):
    result = run_into_closed_pipe(args, tmp_path)
    assert result.returncode == 1
    assert (
        without_default_notice(result.stderr) == ""
    )  # no traceback, no "Exception ignored ... BrokenPipeError" at shutdown


def test_input_errors_still_exit_2_on_a_closed_pipe(tmp_path):
    (tmp_path / "gpucluster.yaml").write_text(
        "clusters:\n  - name: Bad_Name\n    criteria: {service: aks}\n"
    )
    result = run_into_closed_pipe(["plan"], tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("error[input] ")


def test_head_of_plan_in_a_shell_pipeline(tmp_path):
    shell = f'set -o pipefail; {GPUCLUSTER} plan | head -1; echo "status=${{PIPESTATUS[0]}}" >&2'
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLUSTER_")}
    result = subprocess.run(
        ["bash", "-c", shell], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert (
        result.stdout.startswith("cluster gpu-training: recipe ") and result.stdout.count("\n") == 1
    )
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr
    assert without_default_notice(result.stderr).strip() in (
        "status=0",
        "status=1",
    )  # 0 when head read everything before exiting

"""tools/bench.py (`make bench`): runs, measures the embedded default, reports step failures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import bench  # noqa: E402


def test_plan_step_prints_a_row():
    result = subprocess.run([sys.executable, "tools/bench.py", "--runs", "1", "--steps", "plan"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    header, columns, row = result.stdout.strip().splitlines()
    assert header.startswith("gpucluster bench: embedded default, 1 fresh processes per step")
    assert columns.split() == ["step", "median", "s", "min", "s", "max", "s", "peak", "RSS", "MiB"]
    name, *numbers = row.split()
    assert name == "plan" and len(numbers) == 4 and all(float(n) > 0 for n in numbers)


def test_steps_run_in_a_scratch_folder_not_the_project(tmp_path):
    # a gpucluster.yaml in the project folder must not change what `make bench` measures
    work = bench.workdir(tmp_path)
    assert work != ROOT and sorted(p.name for p in work.iterdir()) == ["cdktf.json"]
    config = json.loads((work / "cdktf.json").read_text())
    assert config["app"] == f"{sys.executable} {ROOT / 'main.py'}"
    assert {k: v for k, v in config.items() if k != "app"} == {
        k: v for k, v in json.loads((ROOT / "cdktf.json").read_text()).items() if k != "app"}


def test_failing_step_names_the_command_and_its_stderr(tmp_path):
    code = "import sys; sys.stderr.write('x' * 200000 + 'END'); sys.exit(3)"  # more than a pipe buffer
    try:
        bench.measure([sys.executable, "-c", code], cwd=tmp_path, interval=0.01)
    except SystemExit as stop:
        text = str(stop)
    else:
        raise AssertionError("a failing step must stop the benchmark")
    assert text.startswith(f"bench step failed (3): {sys.executable} -c ") and text.endswith("xEND")

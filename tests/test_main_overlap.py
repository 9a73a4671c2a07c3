"""main.py imports the CDK framework in a thread while it builds the plans
(``_FrameworkImport``): a plan that fails still ends with its one error line and exit 2, nothing
else printed and nothing written, and a framework import error is reported once, by the main
thread, after the plans built."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PLAN_FAILS = """\
clusters:
  - name: c1
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    profile: {gpuStack: azure-managed}
    kubernetesVersion: "1.34"
    overrides:
      set: ['dynamo-platform:x=1']
"""


def run_main(tmp_path: Path, text: str, **env: str) -> subprocess.CompletedProcess:
    config = tmp_path / "gpucluster.yaml"
    config.write_text(text)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCLUSTER_", "CDKTF_"))}
    full_env.update(JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20", CHECKPOINT_DISABLE="1",
                    GPUCLUSTER_CONFIG=str(config), **env)
    return subprocess.run([sys.executable, str(ROOT / "main.py")], cwd=tmp_path, env=full_env, capture_output=True,
                          text=True, timeout=300)


def test_plan_error_while_the_framework_imports_is_one_line_exit_2(tmp_path):
    for _ in range(2):  # the thread is at a different point of its import each time
        result = run_main(tmp_path, PLAN_FAILS)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error[") and "'dynamo-platform' is not part of" in lines[0], lines
        assert result.stdout == ""
        assert not (tmp_path / "cdktf.out").exists()


def test_framework_import_error_is_reported_by_the_main_thread_once(tmp_path):
    result = run_main(tmp_path, PLAN_FAILS.replace("    overrides:\n      set: ['dynamo-platform:x=1']\n", ""),
                      GPUCLUSTER_CDK="no-such-cdk")
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error[")]
    assert len(errors) == 1 and "GPUCLUSTER_CDK" in errors[0], result.stderr
    assert "Traceback" not in result.stderr and "Exception in thread" not in result.stderr

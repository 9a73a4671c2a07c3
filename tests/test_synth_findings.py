"""Findings under the real `cdktf synth` (CLI 0.21): the CLI shows the app's stdout as is and
prefixes every stderr line with a red ``[ERROR] default -``; so a successful synth prints its
warnings/info findings on stdout, and errors stay on stderr. Marked ``synth``."""

from __future__ import annotations

import re

import pytest
from test_synth_e2e import run_cdktf_synth

pytestmark = pytest.mark.synth

OPT_OUT = """clusters:
  - name: optout
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    overrides:
      set: [networkoperator:enabled=false, gpuoperator:driver.rdma.useHostMofed=false, nodewrightcustomizations:enabled=false]
"""


def test_successful_synth_shows_findings_without_the_error_prefix(tmp_path):
    config = tmp_path / "gpucluster.yaml"
    config.write_text(OPT_OUT)
    result = run_cdktf_synth(tmp_path / "cdktf.out", GPUCLUSTER_CONFIG=str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    findings = [line for line in text.splitlines() if "[DEPENDENCY-PRUNED]" in line]
    assert findings and all(
        line.startswith("info[DEPENDENCY-PRUNED] cluster=optout ") for line in findings
    ), findings
    assert "[ERROR]" not in text
    assert "Generated Terraform code for the stacks: optout-cluster, optout-runtime" in text

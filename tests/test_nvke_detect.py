"""`gpucluster detect` names NVKE from its nodes' providerIDs (the plugin's ``nico://``), through the
test kit's CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucluster.sdk.testing import registered

FIXTURE = Path(__file__).parent / "data" / "nvke" / "nodes-nvke.json"


@pytest.fixture
def kit():
    with registered() as kit:
        yield kit


def test_the_prefix_comes_from_the_plugin(kit):
    assert kit.platforms()["nvke"].provider_id_prefix == "nico://"


def test_cli_detect_text_and_json(kit):
    result = kit.cli("detect", "--nodes-json", str(FIXTURE), "--context", "tenant")
    assert result.code == 0, result.err
    result.stdout.fnmatch_lines(
        [
            "service: nvke",
            "  nvke: 3 node(s): gb200-tray-01, gb200-tray-02, nvke-cp-0",
            "",
            "cluster file snippet:",
            "  criteria:",
            "    service: nvke",
            "  existing:",
            "    context: tenant",
        ],
        consecutive=True,
    )
    result = kit.cli("detect", "--nodes-json", str(FIXTURE), "--format", "json")
    assert result.code == 0
    assert json.loads(result.out) == {
        "service": "nvke",
        "nodes": {"nvke": ["gb200-tray-01", "gb200-tray-02", "nvke-cp-0"]},
        "unmatched": [],
    }


def test_cli_detect_bad_file_exits_2(kit, tmp_path):
    bad = tmp_path / "nodes.json"
    bad.write_text("{not json")
    result = kit.cli("detect", "--nodes-json", str(bad))
    assert result.code == 2 and result.out == ""
    result.stderr.fnmatch_lines(
        ["error[[]*] file=* key=--nodes-json: *the nodes file is not JSON*"]
    )
    assert len(result.stderr.lines) == 1

"""``gpucluster plan|graph --set``: scalar overrides from the command line."""

from __future__ import annotations

import io
import json

from gpucluster.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_plan_set_rdma_opt_out_removes_releases(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no gpucluster.yaml here: the embedded default cluster
    code, out, err = run(
        "plan",
        "--format",
        "json",
        "--set",
        "networkoperator:enabled=false",
        "--set",
        "gpuoperator:driver.rdma.useHostMofed=false",
        "--set",
        "nodewrightcustomizations:enabled=false",
    )
    assert code == 0, err
    ids = {n["id"] for n in json.loads(out)[0]["nodes"]}
    assert (
        "gpu-operator" in ids
        and "network-operator" not in ids
        and "nodewright-customizations" not in ids
    )
    assert "info[DEPENDENCY-PRUNED]" in err


def test_plan_set_policy_error_exits_2(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = run("plan", "--set", "gpuoperator:devicePlugin.enabled=false")
    assert code == 2 and out == ""
    assert "error[GPU-ADVERTISER]" in err and "no whole-GPU advertiser" in err


def test_graph_set_malformed_names_the_flag(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, _, err = run("graph", "--set", "gpuoperator:driver.enabled")
    assert code == 2
    assert (
        "error[input] file=--set key=--set[0]: 'gpuoperator:driver.enabled' has no '=value'" in err
    )


def test_plan_set_deprecation_warning_names_the_flag(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(
        "plan",
        "--set",
        "dradriver:resources.gpus.enabled=true",
        "--set",
        "dradriver:gpuResourcesEnabledOverride=true",
        "--set",
        "gpuoperator:devicePlugin.enabled=false",
    )
    assert code == 0, err
    assert (
        err.count("warning[POLICY-KEY-OVERRIDE]") == 3
        and "--set[2] overrides the allocation-policy key 'devicePlugin.enabled'" in err
    )

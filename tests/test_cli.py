"""The gpucluster CLI: recipe, plan, graph, and error handling (exit 2, no traceback)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _support import AKS_TRAINING_RECIPE

from gpucluster import cli


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_recipe_prints_recipe_result():
    code, out, err = run(
        [
            *AKS_TRAINING_RECIPE,
        ]
    )
    assert code == 0, err
    doc = yaml.safe_load(out)
    assert doc["kind"] == "RecipeResult"
    assert doc["metadata"]["appliedOverlays"][-1] == "h100-aks-ubuntu-training"
    assert doc["metadata"]["selectedProfile"]["value"] == "azure-managed"
    refs = {r["name"]: r for r in doc["componentRefs"]}
    assert refs["gpu-operator"]["values"]["driver"]["enabled"] is False
    assert "kubeflow-trainer" not in refs


def test_recipe_platform_and_profile():
    code, out, _ = run(
        [
            *AKS_TRAINING_RECIPE,
            "--platform",
            "kubeflow",
            "--profile",
            "gpuStack=operator-managed",
        ]
    )
    assert code == 0
    doc = yaml.safe_load(out)
    refs = {r["name"]: r for r in doc["componentRefs"]}
    assert "kubeflow-trainer" in refs
    assert refs["gpu-operator"]["values"]["toolkit"]["enabled"] is True
    assert refs["nvidia-dra-driver-gpu"]["values"]["nvidiaDriverRoot"] == "/run/nvidia/driver"


def test_recipe_output_is_byte_identical():
    argv = [
        "recipe",
        "--service",
        "aks",
        "--accelerator",
        "h100",
        "--os",
        "ubuntu",
        "--intent",
        "inference",
        "--platform",
        "dynamo",
    ]
    assert run(argv)[1] == run(argv)[1]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["recipe", "--service", "gke"], "error[input] key=--service: unknown service 'gke'"),
        (
            [
                *AKS_TRAINING_RECIPE,
                "--profile",
                "gpuStack=x",
            ],
            "unknown value 'x' for profile 'gpuStack'",
        ),
        (
            [
                "recipe",
                "--service",
                "aks",
                "--accelerator",
                "h100",
                "--intent",
                "training",
                "--platform",
                "dynamo",
            ],
            "no recipe covers platform 'dynamo'",
        ),
        (
            ["recipe", "--service", "aks", "--profile", "gpuStack=a", "--profile", "gpuStack=b"],
            "profile 'gpuStack' is given twice with different values",
        ),
    ],
)
def test_errors_exit_2_without_traceback(argv, message, monkeypatch):
    monkeypatch.delenv("GPUCLUSTER_DEBUG", raising=False)
    code, out, err = run(argv)
    assert code == 2 and out == ""
    assert message in err
    assert "Traceback" not in err


def test_debug_shows_traceback(monkeypatch):
    monkeypatch.setenv("GPUCLUSTER_DEBUG", "1")
    code, _, err = run(["recipe", "--service", "gke"])
    assert code == 2
    assert "Traceback (most recent call last)" in err and "unknown service 'gke'" in err


def test_bad_profile_syntax_is_a_usage_error():
    code, out, err = run(["recipe", "--service", "aks", "--profile", "gpuStack"])
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith("error[usage]: argument --profile: ") and line.endswith(
        " fix: run 'gpucluster recipe --help' for the arguments it takes"
    ), line


def test_plan_default_cluster(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    code, out, err = run(["plan"])
    assert code == 0, err
    lines = out.splitlines()
    assert (
        lines[0]
        == f"cluster gpu-training: recipe h100-aks-ubuntu-training profile gpuStack=azure-managed, {len(lines) - 2} releases"
    )
    assert lines[1].split() == ["NODE", "KIND", "DEPENDS", "ON"]
    rows = {line.split()[0]: line.split(None, 2) for line in lines[2:]}
    assert rows["cert-manager"][1:] == ["chart", "-"]
    assert rows["gpu-operator"][1] == "chart"
    assert "nfd" in rows["gpu-operator"][2] and "cert-manager" in rows["gpu-operator"][2]


def test_plan_json(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    code, out, _ = run(["plan", "--format", "json"])
    assert code == 0
    (doc,) = json.loads(out)
    assert doc["cluster"] == "gpu-training" and doc["profile"] == {"gpuStack": "azure-managed"}
    nodes = {n["id"]: n for n in doc["nodes"]}
    assert nodes["kube-prometheus-stack"]["dependsOn"] == ["prometheus-operator-crds"]
    for n in doc["nodes"]:
        assert all(d in nodes for d in n["dependsOn"])


def test_plan_config_error_names_file(tmp_path):
    bad = tmp_path / "g.yaml"
    bad.write_text("clusters:\n  - name: c\n    criteria: {service: aks}\n    pool: []\n")
    code, out, err = run(["plan", "--config", str(bad)])
    assert code == 2 and out == ""
    assert f"file={bad} cluster=c key=clusters[0].pool: unknown key 'pool'" in err


def test_graph_dot(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    code, out, _ = run(["graph", "--format", "dot"])
    assert code == 0
    assert out.startswith("digraph gpucluster {")
    assert '"gpu-training/prometheus-operator-crds" -> "gpu-training/kube-prometheus-stack";' in out
    assert '"gpu-training/cert-manager" [label="cert-manager", shape=box];' in out
    assert out.rstrip().endswith("}")


def test_console_script_entry_point(tmp_path):
    exe = Path(sys.executable).parent / "gpucluster"
    proc = subprocess.run(
        [str(exe), "recipe", "--service", "nope"], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 2
    assert "unknown service 'nope'" in proc.stderr and "Traceback" not in proc.stderr


def _help_texts(parser) -> dict[str, str]:
    """The top-level ``--help`` and each subcommand's ``--help`` of ``parser``."""
    (subparsers,) = parser._subparsers._group_actions
    return {
        "": parser.format_help(),
        **{name: p.format_help() for name, p in subparsers.choices.items()},
    }


@pytest.mark.parametrize("command", list(cli._COMMANDS))
def test_a_parser_built_for_one_command_reads_as_the_whole_one(command):
    """main() builds only the given command's arguments: its --help, the top-level --help and the
    usage line of a mistyped command are those of the parser with every command."""
    whole, one = _help_texts(cli.build_parser()), _help_texts(cli.build_parser(command))
    assert one[""] == whole[""] and one[command] == whole[command]
    assert "--" in whole[command]  # the whole parser has every command's options
    assert cli._command_in(["--", command, "--help"]) == command
    assert cli._command_in(["-h"]) is None and cli._command_in(["plna"]) is None


@pytest.mark.parametrize(
    "argv, needle, command",
    [
        (["plna"], "argument COMMAND: invalid choice: 'plna'", ""),
        (["plan", "--bogus"], "unrecognized arguments: --bogus", " plan"),
        ([], "the following arguments are required: COMMAND", ""),
        (
            ["upgrade-check", "--from", "a"],
            "the following arguments are required: --to",
            " upgrade-check",
        ),
        (["render", "--out"], "argument --out: expected one argument", " render"),
    ],
)
def test_a_usage_error_is_one_error_usage_line_with_a_fix(capsys, argv, needle, command):
    """Was argparse's two lines (usage, then 'gpucluster: error: ...') without a fix:."""
    code = cli.main(argv)
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith(f"error[usage]: {needle}") and " (usage: gpucluster" in line, line
    assert line.endswith(f" fix: run 'gpucluster{command} --help' for the arguments it takes"), line


def test_help_still_prints_and_exits_0(capsys):
    assert cli.main(["plan", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: gpucluster plan ")

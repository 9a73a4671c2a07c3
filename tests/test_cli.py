"""The gpucluster CLI: recipe, plan, graph, and error handling (exit 2, no traceback)."""

from __future__ import annotations

import io
import json
import re
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
    header = lines.index(next(line for line in lines if line.split()[:2] == ["NODE", "KIND"]))
    assert (
        lines[0]
        == f"cluster gpu-training: recipe h100-aks-ubuntu-training profile gpuStack=azure-managed, {len(lines) - header - 1} releases"
    )
    assert lines[1:header] == [
        "  stacks      gpu-training-cluster, gpu-training-runtime",
        "  platform    aks, region eastus, Kubernetes 1.34",
        "  pools       system Standard_D8ds_v5 x 2; gpu Standard_ND96isr_H100_v5 x 1 (8 GPUs each)",
        "  GPUs        8 h100",
        "  gpuStack    azure-managed",
    ]
    assert lines[header].split() == ["NODE", "KIND", "VERSION", "DEPENDS", "ON"]
    rows = {line.split()[0]: line.split(None, 3) for line in lines[header + 1 :]}
    assert rows["cert-manager"][1:] == ["chart", "v1.20.2", "-"]
    assert rows["gpu-operator"][1] == "chart"
    assert "nfd" in rows["gpu-operator"][3] and "cert-manager" in rows["gpu-operator"][3]
    assert rows["gpu-operator-manifests"][2] == "-"  # gpucluster's own chart: no upstream version


def test_a_new_pool_a_region_and_a_chart_version_show_in_plan(tmp_path):
    """An edit of the cluster file that changes no release still changes plan's output: the
    header names the region, each pool's VM size and count and the GPUs."""
    base = (
        "clusters:\n  - name: c\n    criteria: {service: aks, accelerator: h100, os: ubuntu, "
        "intent: training}\n    region: westeurope\n    pools:\n"
        "      - {name: system, vmSize: Standard_D8ds_v5, nodeCount: 2, gpu: false}\n"
        "      - {name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: 2}\n"
    )
    edited = base.replace("westeurope", "swedencentral") + (
        "      - {name: gpu2, vmSize: Standard_ND96isr_H100_v5, nodeCount: 1}\n"
    )
    outputs = []
    for i, text in enumerate((base, edited)):
        path = tmp_path / f"c{i}.yaml"
        path.write_text(text)
        code, out, err = run(["plan", "--config", str(path)])
        assert code == 0, err
        outputs.append(out.splitlines())
    before, after = outputs
    changed = [(a, b) for a, b in zip(before, after, strict=False) if a != b]
    assert changed[:3] == [
        (
            "  platform    aks, region westeurope, Kubernetes 1.34",
            "  platform    aks, region swedencentral, Kubernetes 1.34",
        ),
        (
            "  pools       system Standard_D8ds_v5 x 2; gpu Standard_ND96isr_H100_v5 x 2 (8 GPUs each)",
            "  pools       system Standard_D8ds_v5 x 2; gpu Standard_ND96isr_H100_v5 x 2 (8 GPUs each); "
            "gpu2 Standard_ND96isr_H100_v5 x 1 (8 GPUs each)",
        ),
        ("  GPUs        16 h100", "  GPUs        24 h100"),
    ]


def test_plan_json(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    code, out, _ = run(["plan", "--format", "json"])
    assert code == 0
    (doc,) = json.loads(out)
    assert doc["cluster"] == "gpu-training" and doc["profile"] == {"gpuStack": "azure-managed"}
    nodes = {n["id"]: n for n in doc["nodes"]}
    assert nodes["kube-prometheus-stack"]["dependsOn"] == ["prometheus-operator-crds"]
    assert (
        nodes["cert-manager"]["version"] == "v1.20.2"
        and "version" not in nodes["gpu-operator-manifests"]
    )
    assert doc["stacks"] == ["gpu-training-cluster", "gpu-training-runtime"]
    assert (doc["region"], doc["kubernetesVersion"], doc["gpus"], doc["gpuStack"]) == (
        "eastus",
        "1.34",
        8,
        "azure-managed",
    )
    assert doc["pools"][1] == {
        "name": "gpu",
        "vmSize": "Standard_ND96isr_H100_v5",
        "count": 1,
        "gpu": True,
        "gpusPerNode": 8,
    }
    assert isinstance(doc["findings"], list)
    for n in doc["nodes"]:
        assert all(d in nodes for d in n["dependsOn"])


@pytest.mark.parametrize("config", ["EXISTING_AKS", "NVKE_EXISTING"])
def test_plan_names_the_stacks_synth_writes(config, tmp_path):
    import _support

    from gpucluster.inputs.config import load_config
    from gpucluster.pipeline import build_plans
    from gpucluster_cdk.stacks.names import stack_names

    path = tmp_path / "c.yaml"
    text = getattr(_support, config)
    path.write_text(text if text.startswith("clusters:") else "clusters:\n" + text)
    code, out, err = run(["plan", "--config", str(path), "--format", "json"])
    assert code == 0, err
    plans = build_plans(load_config(str(path))[0])
    assert [d["stacks"] for d in json.loads(out)] == [stack_names(p) for p in plans]


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
    near = "did you mean 'plan'? " if argv == ["plna"] else ""
    assert line.endswith(
        f" fix: {near}run 'gpucluster{command} --help' for the arguments it takes"
    ), line


def test_help_still_prints_and_exits_0(capsys):
    assert cli.main(["plan", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: gpucluster plan ")


def _subparsers(parser):
    import argparse

    return [
        (name, sub)
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    ]


@pytest.mark.parametrize("command", list(cli._COMMANDS))
def test_every_help_page_has_a_description_examples_that_parse_and_help_for_each_option(command):
    import shlex

    pages = [
        (command, sub) for name, sub in _subparsers(cli.build_parser(command)) if name == command
    ]
    pages += [(f"{command} {name}", sub) for name, sub in _subparsers(pages[0][1])]
    for words, page in pages:
        assert page.description and page.epilog and page.epilog.startswith("examples:\n"), words
        assert [a.dest for a in page._actions if a.help is None] == [], words
        examples = [
            part.strip()
            for line in page.epilog.splitlines()[1:]
            for part in re.split(r"&&|\||>", line)
            if part.strip().startswith("gpucluster ")
        ]
        assert examples, words
        for example in examples:
            argv = shlex.split(example)[1:]
            cli.build_parser(argv[0]).parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "near"),
    [(["pln"], "plan"), (["charts", "pul"], "pull"), (["plan", "--format", "jsn"], "json")],
)
def test_a_mistyped_command_or_choice_gets_a_did_you_mean(argv, near):
    code, out, err = run(argv)
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith("error[usage]: ") and f" fix: did you mean '{near}'? run " in line

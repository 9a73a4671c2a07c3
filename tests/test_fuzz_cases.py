"""The hostile inputs of issue 13, one test each (the fuzz suite found or covers them at random)."""

from __future__ import annotations

import io

import pytest

from gpucluster.cli import main as cli_main
from gpucluster.errors import Problem, one_line

AKS = "{service: aks, accelerator: h100, os: ubuntu, intent: training}"
TOLERATION = '    scheduling:\n      accelerated: {tolerations: ["nvidia.com/gpu:NoSchedule"]}\n'


def plan(tmp_path, text: str, *args: str) -> tuple[int, str, str]:
    (tmp_path / "gpucluster.yaml").write_bytes(text.encode("utf-8", "surrogatepass"))
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(
        ["plan", "--config", str(tmp_path / "gpucluster.yaml"), *args], stdout=out, stderr=err
    )
    return code, out.getvalue(), err.getvalue()


def test_a_newline_in_a_name_cannot_forge_a_second_error_line():
    rendered = Problem(
        message="invalid cluster name 'a\nerror[forged] key=x: all good fix: none'", cluster="a\nb"
    ).render()
    assert "\n" not in rendered and rendered.startswith("error[input] ")
    assert "\\nerror[forged]" in rendered


def test_terminal_escape_sequences_are_escaped():
    assert one_line("\x1b]0;title\x07\x1b[2J\u202e") == "\\x1b]0;title\\x07\\x1b[2J\\u202e"


def test_a_200_kb_value_is_cut_with_an_ellipsis(tmp_path):
    code, _, err = plan(tmp_path, f"clusters:\n  - name: {'a' * 200_000}\n    criteria: {AKS}\n")
    assert code == 2
    [line] = err.splitlines()
    assert len(line) < 2000 and "characters cut)…" in line and " fix: " in line


def test_pyyaml_control_character_error_is_one_line_with_a_fix(tmp_path):
    code, _, err = plan(tmp_path, f"clusters:\n  - name: lab\x07\n    criteria: {AKS}\n")
    assert code == 2
    [line] = err.splitlines()
    assert (
        line.startswith("error[input] ")
        and "'\\x07'" in line
        and "fix: remove the control character" in line
    )


def test_a_1000_key_set_path_is_refused_in_one_line(tmp_path):
    code, _, err = plan(
        tmp_path,
        f"clusters:\n  - name: lab\n    criteria: {AKS}\n",
        "--set",
        "gpuoperator:" + ".".join(["k"] * 1000) + "=1",
    )
    assert code == 2
    [line] = err.splitlines()
    assert "the values path has 1000 keys; at most 64 are allowed" in line and " fix: " in line


@pytest.mark.parametrize(
    "kubeconfig, message",
    [
        ("kube.yaml", "is a relative path"),
        ("./kube.yaml", "is a relative path"),
        ("/etc/kube\x1b[2J", "control characters"),
        (" /etc/kube", "surrounding whitespace"),
    ],
)
def test_existing_kubeconfig_is_checked_by_the_core_on_aks(tmp_path, kubeconfig, message):
    quoted = kubeconfig.replace("\x1b", "\\e")
    code, _, err = plan(
        tmp_path,
        f'clusters:\n  - name: lab\n    criteria: {AKS}\n    existing: {{kubeconfig: "{quoted}"}}\n'
        + TOLERATION,
    )
    assert code == 2
    [line] = err.splitlines()
    assert "key=clusters[0].existing.kubeconfig" in line and message in line and "\x1b" not in line


def test_region_with_existing_is_refused(tmp_path):
    code, _, err = plan(
        tmp_path,
        f"clusters:\n  - name: lab\n    criteria: {AKS}\n    region: westus3\n"
        "    existing: {kubeconfig: /etc/kube/config}\n" + TOLERATION,
    )
    assert code == 2 and "key=clusters[0].region" in err and "has no effect with 'existing'" in err


def test_existing_with_a_cloud_backend_warns_that_a_remote_run_cannot_read_the_kubeconfig(tmp_path):
    code, _, err = plan(
        tmp_path,
        "backend: {type: cloud, organization: acme, workspacePrefix: gpu-}\n"
        f"clusters:\n  - name: lab\n    criteria: {AKS}\n    existing: {{kubeconfig: /etc/kube/config}}\n"
        + TOLERATION,
    )
    assert code == 0, err
    [line] = [line for line in err.splitlines() if "EXISTING-REMOTE-KUBECONFIG" in line]
    assert (
        line.startswith("warning[EXISTING-REMOTE-KUBECONFIG] ")
        and "remote run" in line
        and " fix: " in line
    )


def test_a_bad_name_override_is_blamed_on_the_users_key(tmp_path):
    code, _, err = plan(
        tmp_path,
        f"clusters:\n  - name: lab\n    criteria: {AKS}\n"
        "    overrides:\n      set: ['nvidia-dra-driver-gpu:nameOverride=Bad_Name!']\n",
    )
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith("error[HELM-NAME-OVERRIDE] file=") and "key=nameOverride" in line
    assert "plugin 'aks'" not in line


def test_the_embedded_default_is_announced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["plan"], stdout=out, stderr=err) == 0
    [line] = [line for line in err.getvalue().splitlines() if line.startswith("info[")]
    assert line.startswith(
        f"info[input.default] file=<embedded default>: no cluster file in {tmp_path} (GPUCLUSTER_CONFIG "
        "is not set and there is no gpucluster.yaml); using the built-in example cluster gpu-training"
    )
    assert line.endswith(
        " fix: `gpucluster init` creates a project with its own gpucluster.yaml in this folder; or point "
        "GPUCLUSTER_CONFIG at your cluster file (docs/cluster-file.md)"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["graph"],
        ["render", "--out", "rendered"],
        ["lint"],
        ["images"],
        ["charts", "pull", "--cache", "a-file"],  # refused before anything is fetched
    ],
)
def test_every_command_reading_the_cluster_file_announces_the_embedded_default(
    tmp_path, monkeypatch, argv
):
    """Not only plan and synth: graph, render, lint, images and charts pull used the built-in
    example in silence. One ``info[input.default]`` line, the first of stderr."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    monkeypatch.delenv("GPUCLUSTER_EMBEDDED_DEFAULT", raising=False)
    monkeypatch.setenv("GPUCLUSTER_CHARTS", str(tmp_path / "no-charts"))
    monkeypatch.setenv("GPUCLUSTER_CHART_CACHE", str(tmp_path / "no-cache"))
    (tmp_path / "a-file").write_text("x")
    out, err = io.StringIO(), io.StringIO()
    cli_main(argv, stdout=out, stderr=err)
    lines = err.getvalue().splitlines()
    assert lines and lines[0].startswith("info[input.default] file=<embedded default>: "), lines
    assert sum(line.startswith("info[input.default]") for line in lines) == 1, lines


def test_the_embedded_default_is_quiet_where_it_is_intended(tmp_path, monkeypatch):
    """GPUCLUSTER_EMBEDDED_DEFAULT=1 (this repository's make synth) drops the notice, nothing else."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    runs = {}
    for value in ("1", None):
        if value is None:
            monkeypatch.delenv("GPUCLUSTER_EMBEDDED_DEFAULT", raising=False)
        else:
            monkeypatch.setenv("GPUCLUSTER_EMBEDDED_DEFAULT", value)
        out, err = io.StringIO(), io.StringIO()
        assert cli_main(["plan"], stdout=out, stderr=err) == 0
        runs[value] = out.getvalue(), err.getvalue()
    assert "info[input.default]" not in runs["1"][1] and "info[input.default]" in runs[None][1]
    assert runs["1"][0] == runs[None][0]


def test_no_announcement_with_a_cluster_file(tmp_path):
    code, _, err = plan(tmp_path, f"clusters:\n  - name: lab\n    criteria: {AKS}\n")
    assert code == 0 and "info[input.default]" not in err

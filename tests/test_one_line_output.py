"""Every line gpucluster prints is one line, and every way a command can fail is one line: what
comes from an input file or a cluster (a RecipeResult's metadata.appliedOverlays, node names and
providerIDs, lint findings' keys) is printed escaped by the one escaping (gpucluster.errors); a
full or closed standard output, ~unknownuser paths, /dev/zero as --nodes-json, a bad JSII_NODE or
CDKTF_CONTEXT_JSON are one error line with exit 2 (they were tracebacks or error[internal] exit 70);
Ctrl-C during a command exits 130 quietly."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import _support
import pytest
import yaml
from _support import AKS_TRAINING_RECIPE, EXISTING_AKS

from gpucluster.cli import main as cli_main
from gpucluster.lint.render import LintFinding

ROOT = Path(__file__).resolve().parents[1]
RAW = re.compile(
    r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
FORGED = "base\nerror[forged] key=x: forged fix: none\x1b[31m\u202e"
LINE = re.compile(r"(error|warning|info)\[[A-Za-z0-9._-]+\]( [a-z]+=\S+)*: .* fix: \S.*")


def cli(argv, **kw):
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_recipe_results_overlay_names_are_printed_escaped(tmp_path):
    code, text, _ = cli(
        [
            *AKS_TRAINING_RECIPE,
        ]
    )
    doc = yaml.safe_load(text)
    doc["metadata"]["appliedOverlays"] = [FORGED]
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    (tmp_path / "c.yaml").write_text("clusters:\n  - name: r\n    recipe: r.yaml\n")
    code, out, err = cli(["plan", "--config", str(tmp_path / "c.yaml")])
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith(
        r"cluster r: recipe base\nerror[forged] key=x: forged fix: none\x1b[31m\u202e profile "
    ), first
    assert not RAW.search(out) and not any(line.startswith("error[") for line in out.splitlines())


def test_node_names_and_provider_ids_from_the_cluster_are_printed_escaped(tmp_path):
    nodes = {
        "items": [
            {"metadata": {"name": "n1" + FORGED}, "spec": {"providerID": "azure:///x"}},
            {"metadata": {"name": "\udc80lone"}, "spec": {"providerID": "azure:///y"}},
            {"metadata": {"name": "n3"}, "spec": {"providerID": "other://\x1b]0;title\x07"}},
        ]
    }
    (tmp_path / "nodes.json").write_text(json.dumps(nodes))
    code, out, err = cli(["detect", "--nodes-json", str(tmp_path / "nodes.json")])
    assert code == 0, err
    assert not RAW.search(out), out
    assert (
        r"n1base\nerror[forged]" in out
        and r"\udc80lone" in out
        and r"other://\x1b]0;title\x07" in out
    )
    assert not any(line.startswith("error[") for line in out.splitlines())
    code, out, _ = cli(["detect", "--nodes-json", str(tmp_path / "nodes.json"), "--format", "json"])
    assert code == 0 and out.isascii() and json.loads(out)["nodes"]["aks"][0] == "n1" + FORGED


def test_a_lint_finding_is_one_line_whatever_its_parts():
    finding = LintFinding(
        id="lint.dead-value",
        severity="error",
        message="values path '" + FORGED + "' is dead",
        fix="remove\nit",
        cluster="c",
        component="gpu-operator",
        release="r",
        key=FORGED,
    )
    line = finding.render()
    assert "\n" not in line and not RAW.search(line) and LINE.fullmatch(line), line


def run_cli(*args: str, stdin=None, **popen) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLUSTER_")}
    return subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", *args],
        capture_output="stdout" not in popen,
        text=True,
        timeout=300,
        env=env,
        **popen,
    )


def test_a_full_standard_output_is_one_error_line(tmp_path):
    with open("/dev/full", "w") as full:
        result = run_cli(
            "plan", "--config", str(_exist(tmp_path)), stdout=full, stderr=subprocess.PIPE
        )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(
        "error[output] key=stdout: writing the output failed: No space left on device (errno ENOSPC)"
    ), line


def test_a_closed_standard_output_is_one_error_line(tmp_path):
    result = subprocess.run(
        [
            "sh",
            "-c",
            'exec "$@" >&-',
            "sh",
            sys.executable,
            "-m",
            "gpucluster.cli",
            "plan",
            "--config",
            str(_exist(tmp_path)),
        ],
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("error[output] key=stdout: standard output is closed"), line


def _exist(tmp_path: Path) -> Path:
    (tmp_path / "gpucluster.yaml").write_text(EXISTING_AKS)
    return tmp_path / "gpucluster.yaml"


SLOW_PLUGIN = """
import os, time
from pathlib import Path
from gpucluster.sdk import hookimpl

@hookimpl
def gpucluster_prepare_cluster(cluster):
    Path(os.environ["SLOW_MARKER"]).write_text("inside")
    time.sleep(300)
"""


def _foreground(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """``argv`` started with Ctrl-C's disposition as a terminal's foreground job has it: a job
    started with `&` by a non-interactive shell (a CI script) inherits SIGINT ignored, and Python
    then keeps it ignored."""
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def test_ctrl_c_during_plan_exits_130_quietly(tmp_path):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "gpucluster_test_slow_plan.py").write_text(SLOW_PLUGIN)
    marker = tmp_path / "marker"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLUSTER_")}
    env.update(
        GPUCLUSTER_PLUGINS="gpucluster_test_slow_plan",
        PYTHONPATH=str(tmp_path / "plugins"),
        SLOW_MARKER=str(marker),
        GPUCLUSTER_CACHE_DIR="off",
    )
    proc = _foreground(
        [sys.executable, "-m", "gpucluster.cli", "plan", "--config", str(_exist(tmp_path))], env
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert out == "" and err == "", err


def test_a_second_ctrl_c_during_cleanup_is_ignored():
    """The first Ctrl-C unwinds (KeyboardInterrupt, recorded as SIGINT); from then on SIGINT,
    SIGTERM and SIGHUP are ignored until the command's cleanup is over and its handlers are put
    back (a second Ctrl-C 10 ms later cut a render's cleanup short and left its temporary
    folder). An ignored SIGINT is left ignored."""
    from gpucluster import cli

    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in stops}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    stopped: list[int] = []
    saved = cli._unwind_on_stop_signals("render", stopped)
    try:
        assert set(saved) == set(stops)
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        assert stopped == [signal.SIGINT]
        assert {s: signal.getsignal(s) for s in stops} == dict.fromkeys(stops, signal.SIG_IGN)
        signal.raise_signal(signal.SIGINT)  # ignored: no second KeyboardInterrupt
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert signal.SIGINT not in cli._unwind_on_stop_signals("render", [])
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@pytest.mark.parametrize("command", ["render", "lint", "images"])
def test_ctrl_c_while_rendering_leaves_no_temporary_folder(tmp_path, reference_charts, command):
    """Ctrl-C once the render's temporary folder exists (the releases are being rendered from the
    reference charts): exit 130, and the folder is gone (it was left behind: the renderer was
    closed only by the caller, which never got it)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLUSTER_")}
    env.update(TMPDIR=str(tmp), GPUCLUSTER_CACHE_DIR="off")
    argv = [sys.executable, "-m", "gpucluster.cli", command, "--config", str(_exist(tmp_path))]
    argv += ["--charts", str(reference_charts)]
    argv += ["--out", str(tmp_path / "rendered")] if command == "render" else []
    proc = _foreground(argv, env)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if list(tmp.glob("gpucluster-render-*")):
                break
            time.sleep(0.005)
        assert list(tmp.glob("gpucluster-render-*")), proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert sorted(p.name for p in tmp.iterdir()) == [], err


@pytest.mark.parametrize(
    "argv, starts",
    [
        (
            ["detect", "--nodes-json", "/dev/zero"],
            "error[input] file=/dev/zero key=--nodes-json: the nodes file is larger than",
        ),
        (
            ["detect", "--nodes-json", "~nosuchuser9/nodes.json"],
            "error[input] file=~nosuchuser9/nodes.json key=--nodes-json: ",
        ),
        (
            ["detect", "--kubeconfig", "~nosuchuser9/config"],
            "error[input] file=~nosuchuser9/config key=--kubeconfig: ",
        ),
        (["plan", "--config", "x" * 300 + ".yaml"], "error[input] file="),
    ],
)
def test_odd_paths_are_one_error_line(argv, starts):
    code, out, err = cli(argv)
    assert code == 2 and out == "", err
    [line] = err.splitlines()
    assert line.startswith(starts) and " fix: " in line, line


def test_a_values_file_under_an_unknown_users_home_is_one_error_line(tmp_path):
    (tmp_path / "c.yaml").write_text(
        EXISTING_AKS + "    overrides:\n      values:\n"
        "        - {component: gpu-operator, file: '~nosuchuser9/v.yaml'}\n"
    )
    code, _, err = cli(["plan", "--config", str(tmp_path / "c.yaml")])
    assert code == 2, err
    [line] = err.splitlines()
    assert (
        "key=clusters[0].overrides.values[0].file: the values file path '~nosuchuser9/v.yaml' names the home folder"
        in line
    )


@pytest.mark.parametrize(
    "name, value, said",
    [
        (
            "JSII_NODE",
            "/nonexistent/node",
            "error[input] key=JSII_NODE: JSII_NODE='/nonexistent/node' names no program",
        ),
        (
            "CDKTF_CONTEXT_JSON",
            "{bad",
            "error[input] key=CDKTF_CONTEXT_JSON: CDKTF_CONTEXT_JSON is not JSON (",
        ),
        (
            "CDKTF_CONTEXT_JSON",
            "[1]",
            "error[input] key=CDKTF_CONTEXT_JSON: CDKTF_CONTEXT_JSON is a JSON list, not an object",
        ),
        (
            "SYNTH_HCL_OUTPUT",
            "true",
            "error[input] key=SYNTH_HCL_OUTPUT: SYNTH_HCL_OUTPUT=true asks cdktf for HCL",
        ),
        (
            "SYNTH_HCL_OUTPUT",
            "1",
            "error[input] key=SYNTH_HCL_OUTPUT: SYNTH_HCL_OUTPUT=1 asks cdktf for HCL",
        ),
    ],
)
def test_a_bad_cdk_environment_is_one_input_error_not_exit_70(tmp_path, name, value, said):
    _exist(tmp_path)
    result = _support.run_main(cwd=tmp_path, outdir=tmp_path / "cdktf.out", **{name: value})
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(said) and " fix: " in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpucluster.yaml"]

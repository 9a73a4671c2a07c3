"""``gpucluster synth`` whose jsii kernel cannot start, or whose working folder is gone: one
``error[input]`` line naming the variable or folder, exit 2, nothing written.

Each case runs the installed ``gpucluster synth`` as a subprocess in a project made by
``gpucluster init``, with the environment of the case (a ``JSII_NODE`` that is not Node.js, a
``JSII_RUNTIME`` that is not a jsii kernel, a ``node`` first on PATH that prints something else
than its version, a working folder removed before the synth starts).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster import init as init_mod
from gpucluster.outfolder import MARKER, MARKER_TEXT

BIN = Path(sys.executable).parent


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPUCLUSTER_", "CDKTF_", "JSII_", "NODE_OPTIONS"))
        or k == "GPUCLUSTER_CDK"
    }
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        CHECKPOINT_DISABLE="1",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        GPUCLUSTER_CACHE_DIR=str(tmp_path / "cache"),
    )
    env.update(extra)
    return env


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "proj"
    init_mod.init_project(root, init_mod.InitOptions(service="aks"))
    return root


def synth(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "gpucluster"), "synth", "--no-cache", "--out", "out"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_one_line(result: subprocess.CompletedProcess, start: str, project: Path) -> str:
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(start), result.stderr
    assert "fix: " in result.stderr and "internal" not in result.stderr
    assert not (project / "out").exists()
    return result.stderr


def test_a_jsii_node_that_is_not_node_is_one_line(project, tmp_path):
    err = assert_one_line(
        synth(project, env_for(tmp_path, JSII_NODE="/bin/false")),
        "error[input] key=JSII_NODE: JSII_NODE='/bin/false' is not Node.js",
        project,
    )
    assert "exited with code 1" in err


def test_a_jsii_runtime_that_is_no_script_is_one_line(project, tmp_path):
    err = assert_one_line(
        synth(project, env_for(tmp_path, JSII_RUNTIME="/bin/true")),
        "error[input] key=JSII_RUNTIME: JSII_RUNTIME='/bin/true' is not a JavaScript file",
        project,
    )
    assert "SyntaxError" in err


def test_a_jsii_runtime_that_gives_no_handshake_is_one_line(project, tmp_path):
    script = tmp_path / "runtime.js"
    script.write_text('process.stdout.write("ready\\n");\n')
    assert_one_line(
        synth(project, env_for(tmp_path, JSII_RUNTIME=str(script))),
        f"error[input] key=JSII_RUNTIME: JSII_RUNTIME='{script}' did not start a jsii kernel",
        project,
    )


def test_a_node_on_path_that_prints_garbage_is_one_line(project, tmp_path):
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "node").write_text("#!/bin/sh\necho garbage\n")
    (fake / "node").chmod(0o755)
    env = env_for(tmp_path)
    env["PATH"] = f"{fake}{os.pathsep}{env['PATH']}"
    err = assert_one_line(
        synth(project, env),
        f"error[input] key=PATH: the node on PATH ({fake / 'node'}) is not Node.js",
        project,
    )
    assert "printed 'garbage'" in err


def test_a_deleted_working_folder_is_one_line(project, tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    result = subprocess.run(
        [
            "sh",
            "-c",
            'cd "$1" && rmdir "$1" && exec "$2" synth --config "$3" --out "$4"',
            "sh",
            str(gone),
            str(BIN / "gpucluster"),
            str(project / "gpucluster.yaml"),
            str(project / "out"),
        ],
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert_one_line(
        result, f"error[input] key=cwd: the working folder '{gone}' cannot be used", project
    )
    assert not gone.exists()


def test_no_node_on_path_is_one_line_and_the_previous_output_stays(project, tmp_path):
    """Without Node.js on PATH the jsii runtime cannot start ``node``; synth said
    ``error[output] key=--out: writing .../out failed: No such file or directory`` instead."""
    empty = tmp_path / "empty"
    empty.mkdir()
    previous = project / "out" / "manifest.json"
    previous.parent.mkdir()
    previous.write_text("previous\n")
    (previous.parent / MARKER).write_text(MARKER_TEXT)  # an earlier synth's output
    result = synth(project, env_for(tmp_path, PATH=f"{BIN}{os.pathsep}{empty}"))
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("error[input] key=PATH: Node.js (20+) was not found on PATH"), line
    fix = line.split(" fix: ", 1)[1]
    assert "install Node.js 20+" in fix and "JSII_NODE" in fix, line
    assert sorted(p.name for p in previous.parent.iterdir()) == [
        ".gpucluster-output",
        "manifest.json",
    ]
    assert previous.read_text() == "previous\n"

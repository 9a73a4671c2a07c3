"""Progress of the slow commands on a terminal: ``lint`` (and ``render``) show which release
Helm's engine is rendering as ``[i/n] rendering <cluster>/<release>`` on stderr, rewritten in
place and erased before anything else is written; on a pipe nothing of it appears.
(``charts pull``: tests/test_chart_pull.py.)"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpucluster import cli

pytest.importorskip("helm_python", reason="needs the render extra (helm-python-sdk)")


def on_a_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, bytes, str]:
    """``gpucluster ARGV`` with stderr on a pseudo-terminal: (exit code, stdout, what the
    terminal received)."""
    import pty

    master, slave = pty.openpty()
    received = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end (EIO)
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "gpucluster"), *argv],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        cwd=cwd,
        timeout=900,
    )
    os.close(slave)
    reader.join(timeout=30)
    os.close(master)
    return proc.returncode, proc.stdout, received.decode()


def test_lint_shows_each_release_it_renders_on_a_terminal(reference_charts, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLUSTER_")}
    env.update(HOME=str(tmp_path), COLUMNS="200", GPUCLUSTER_EMBEDDED_DEFAULT="1")
    argv = ["lint", "--charts", str(reference_charts), "--cache", str(tmp_path / "none")]
    code, stdout, text = on_a_terminal(argv, tmp_path, env)
    plan = io.StringIO()
    assert cli.main(["plan", "--format", "json"], stdout=plan, stderr=io.StringIO()) == 0
    import json

    (doc,) = json.loads(plan.getvalue())
    n = len(doc["nodes"])
    parts = text.split("\r\x1b[K")
    shown = [part for part in parts if part.startswith("[")]
    assert shown == [
        f"[{i}/{n}] rendering gpu-training/{node['id']}"
        for i, node in enumerate(_render_order(doc["nodes"]), 1)
    ]
    assert not parts[-1].startswith("[")  # erased before the findings and at the end
    assert b"\x1b" not in stdout and b"error(s)" in stdout, stdout


def _render_order(nodes: list[dict]) -> list[dict]:
    """Plan order with each release's dependencies first (render_plans' walk)."""
    by_id = {n["id"]: n for n in nodes}
    done: list[dict] = []

    def visit(node: dict) -> None:
        if node in done:
            return
        for dep in node["dependsOn"]:
            visit(by_id[dep])
        done.append(node)

    for node in nodes:
        visit(node)
    return done


def test_lint_on_a_pipe_writes_no_progress(reference_charts, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    monkeypatch.delenv("GPUCLUSTER_CHARTS", raising=False)
    out, err = io.StringIO(), io.StringIO()
    cli.main(
        ["lint", "--charts", str(reference_charts), "--cache", str(tmp_path / "none")],
        stdout=out,
        stderr=err,
    )
    assert "error(s)" in out.getvalue()
    assert "rendering" not in err.getvalue() and "\x1b" not in err.getvalue()

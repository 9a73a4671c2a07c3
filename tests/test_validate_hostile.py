"""Hostile API servers and kubeconfigs for ``gpucluster snapshot`` / ``validate --kubeconfig``:
each bad peer (tests/validate_server.py HostileApi, on 127.0.0.1) gives ONE
``error[validate.cluster]`` line and exit 2 within ``--timeout`` (a server that never answers,
one that accepts and sleeps, a trickle, a cut body, malformed JSON shapes, HTML, a huge body,
401/403/500, an exec credential plugin that sleeps); a kubeconfig that is not YAML gives one
``error[input]`` line; no line quotes a credential; ``--out`` is written whole or not at all.

The CLI runs as a subprocess with a small ``--timeout`` and a generous outer limit: the deadline
is tested by the line it ends in, never by the time it took."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from validate_server import HostileApi

ROOT = Path(__file__).resolve().parents[1]
OUTER_LIMIT = 180
"""Seconds the outer subprocess may take: far above ``--timeout`` (a hang fails the test)."""
SECRET = "s3cr3t-VALUE-never-printed"


def gpucluster(*args: str, cwd: Path) -> tuple[int, str, str]:
    env = {**os.environ, "GPUCLUSTER_DEBUG": "0"}
    env.pop("KUBECONFIG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", *args],
        capture_output=True,
        text=True,
        timeout=OUTER_LIMIT,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode, proc.stdout, proc.stderr


def one_error_line(code: int, out: str, err: str, kind: str = "validate.cluster") -> str:
    assert code == 2, (code, err)
    assert out == "", out
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith(f"error[{kind}] ") and " fix: " in err, err
    assert "Traceback" not in err and SECRET not in err, err
    return err


SERVERS = {
    "never-accepts": ({"mode": "silent"}, "deadline"),
    "accepts-and-sleeps": ({"mode": "sleep"}, "deadline"),
    "trickles": ({"mode": "trickle"}, "deadline"),
    "cut-mid-body": ({"mode": "cut"}, "was cut"),
    "items-is-a-number": ({"mode": "body", "body": b'{"items": 5}'}, "not a Kubernetes list"),
    "metadata-is-a-string": (
        {"mode": "body", "body": b'{"items": [{"metadata": "x"}], "metadata": {"name": "x"}}'},
        "not a Kubernetes list",
    ),
    "a-list-not-an-object": ({"mode": "body", "body": b"[1, 2]"}, "not a JSON object"),
    "html": (
        {"mode": "body", "body": b"<html><body>login</body></html>", "content_type": "text/html"},
        "not JSON",
    ),
    "huge-body": ({"mode": "huge"}, "larger than"),
    "401": ({"mode": "status", "status": 401}, "refused"),
    "403": ({"mode": "status", "status": 403}, "ClusterRole"),
    "500": ({"mode": "status", "status": 500}, "with 500"),
}


@pytest.mark.parametrize("case", sorted(SERVERS))
def test_a_hostile_server_is_one_line_within_the_deadline(tmp_path, case):
    kwargs, said = SERVERS[case]
    server = HostileApi(**kwargs)
    try:
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        out_file = tmp_path / "snap.json"
        code, out, err = gpucluster(
            "snapshot",
            "--kubeconfig",
            str(kubeconfig),
            "--timeout",
            "3s",
            "--out",
            str(out_file),
            cwd=tmp_path,
        )
    finally:
        server.close()
    line = one_error_line(code, out, err)
    assert said in line, line
    if said == "deadline":
        assert "--timeout" in line and "within the 3 s deadline" in line, line
    assert not out_file.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["kubeconfig"]


def test_validate_has_the_same_deadline(tmp_path):
    server = HostileApi("trickle")
    try:
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        code, out, err = gpucluster(
            "validate", "--kubeconfig", str(kubeconfig), "--timeout", "2s", cwd=tmp_path
        )
    finally:
        server.close()
    assert "deadline" in one_error_line(code, out, err)


def test_a_sleeping_exec_plugin_is_stopped_at_the_deadline(tmp_path):
    pid_file = tmp_path / "plugin.pid"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    )
    server = HostileApi("status", status=500)
    try:
        exec_user = {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": sys.executable,
                "args": [str(plugin)],
                "interactiveMode": "Never",
            }
        }
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig", user=exec_user)
        code, out, err = gpucluster(
            "validate", "--kubeconfig", str(kubeconfig), "--timeout", "3s", cwd=tmp_path
        )
    finally:
        server.close()
    line = one_error_line(code, out, err)
    assert "deadline" in line and "credential plugin" in line, line
    pid = int(pid_file.read_text())
    status = Path(f"/proc/{pid}/status")
    state = status.read_text().split("State:")[1].split()[0] if status.exists() else "gone"
    assert state in ("gone", "Z"), f"the plugin still runs ({state})"
    if state == "Z":  # an orphan waiting for its reaper is no longer running
        return


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\xff\xfe binary",
        b"!!python/object/apply:os.system ['echo pwned']\n",
        b"- clusters\n- users\n",
        b"apiVersion: v1\nkind: Config\nclusters: [\n",
    ],
    ids=["binary", "python-tag", "a-list", "broken-yaml"],
)
def test_a_kubeconfig_that_is_not_yaml_is_one_input_line(tmp_path, content):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(content)
    code, out, err = gpucluster("snapshot", "--kubeconfig", str(kubeconfig), cwd=tmp_path)
    line = one_error_line(code, out, err, kind="input")
    assert line.startswith(f"error[input] file={kubeconfig}: is not a kubeconfig"), line
    assert "pwned" not in line


def test_a_token_file_is_never_quoted(tmp_path):
    token_file = tmp_path / "passwd"
    token_file.write_text(f"root:x:0:0:{SECRET}:/root:/bin/bash\ndaemon:x:1:1::/:/bin/false\n")
    server = HostileApi("status", status=500)
    try:
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig", user={"tokenFile": str(token_file)})
        code, out, err = gpucluster("snapshot", "--kubeconfig", str(kubeconfig), cwd=tmp_path)
    finally:
        server.close()
    line = one_error_line(code, out, err, kind="validate.input")
    assert "root:" not in line and "not a valid token" in line, line


def test_a_token_over_plain_http_is_warned_once_and_never_printed(tmp_path):
    server = HostileApi("body", body=json.dumps({"items": 5}).encode())
    try:
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig", user={"token": SECRET})
        code, out, err = gpucluster(
            "validate", "--kubeconfig", str(kubeconfig), "--timeout", "5s", cwd=tmp_path
        )
    finally:
        server.close()
    warning, error = err.splitlines()
    assert warning.startswith("warning[validate.cluster] ") and "plain http://" in warning
    assert server.url in warning
    one_error_line(code, out, error + "\n")

"""Run a gate Job's shell script against fake ``kubectl``, ``date`` and ``sleep`` commands.

The fakes live in a temporary directory put first on PATH:

* ``kubectl`` answers from a queue of ``(stdout, stderr, exit code)`` responses (the last one
  repeats once the queue is empty) and records its argv;
* ``date +%s`` returns a fake clock that advances by ``clock_step`` seconds per call, so
  timeouts are reached without waiting;
* ``sleep`` records its argument and returns at once.

Nothing here measures time; a script's behaviour is judged by its exit code, log lines and the
commands it ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_KUBECTL = """#!{python}
import json, os, sys
d = os.environ["GATE_STUB_DIR"]
with open(os.path.join(d, "calls.jsonl"), "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
qpath = os.path.join(d, "queue.json")
with open(qpath) as f:
    queue = json.load(f)
out, err, rc = queue[0]
if len(queue) > 1:
    queue.pop(0)
    with open(qpath, "w") as f:
        json.dump(queue, f)
sys.stdout.write(out)
sys.stderr.write(err)
sys.exit(rc)
"""

_DATE = """#!/bin/sh
d="$GATE_STUB_DIR"
t=$(cat "$d/clock")
echo $((t + $GATE_CLOCK_STEP)) > "$d/clock"
echo "$t"
"""

_SLEEP = """#!/bin/sh
echo "$1" >> "$GATE_STUB_DIR/sleeps"
"""


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    calls: list[list[str]]
    sleeps: list[str]

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.strip()]


def run_script(
    script: str,
    responses: list[tuple[str, str, int]],
    tmp: Path,
    *,
    shell: str = "sh",
    clock_step: int = 1,
) -> Run:
    """Run ``script`` with ``shell -c`` and the fakes; returns what happened."""
    stub = tmp / "stub"
    stub.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("kubectl", _KUBECTL.format(python=sys.executable)),
        ("date", _DATE),
        ("sleep", _SLEEP),
    ):
        path = stub / name
        path.write_text(text)
        path.chmod(0o755)
    (stub / "queue.json").write_text(json.dumps([list(r) for r in responses]))
    (stub / "clock").write_text("1000000\n")
    env = {
        "PATH": f"{stub}:/usr/bin:/bin",
        "GATE_STUB_DIR": str(stub),
        "GATE_CLOCK_STEP": str(clock_step),
        "TMPDIR": str(tmp),
        "HOME": str(tmp),
        "LC_ALL": "C",
    }
    proc = subprocess.run(
        [shell, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    calls_file = stub / "calls.jsonl"
    calls = (
        [json.loads(line) for line in calls_file.read_text().splitlines()]
        if calls_file.exists()
        else []
    )
    sleeps_file = stub / "sleeps"
    sleeps = sleeps_file.read_text().split() if sleeps_file.exists() else []
    return Run(proc.returncode, proc.stdout, proc.stderr, calls, sleeps)


SHELLS = [
    s
    for s in ("dash", "bash")
    if any(os.access(os.path.join(p, s), os.X_OK) for p in ("/bin", "/usr/bin"))
]
"""POSIX shells to run the scripts under (the kubectl image's /bin/sh is dash)."""

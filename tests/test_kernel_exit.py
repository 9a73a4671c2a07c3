"""The jsii kernel's end, through public Python only (gpucluster_cdk/constructs_lib/cdk.py):

* a kernel that ended before the process (a signal to the process group) makes jsii's exit hook
  raise ``BrokenPipeError``; :func:`cdk.quiet_ended_kernel_exit` drops exactly that report from
  :data:`sys.unraisablehook` and passes every other one on;
* after a stop signal, what other threads (jsii's kernel output reader) write to
  ``sys.stdout`` / ``sys.stderr`` is dropped (:class:`cdk.MutableStream`); the main thread's own
  lines still go out.

Each check runs in a fresh interpreter that starts a real kernel, under the distribution
``GPUCLUSTER_CDK`` selects (default cdktf).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KILL_KERNEL = f"""
import signal, sys
sys.path.insert(0, {str(ROOT)!r})
import psutil
from gpucluster_cdk.constructs_lib import cdk
if sys.argv[1] == "default-hook":
    sys.unraisablehook = sys.__unraisablehook__
(kernel,) = [p for p in psutil.Process().children() if "node" in p.name()]
kernel.send_signal(signal.SIGKILL)
kernel.wait(60)

class Other:
    def __del__(self):
        raise ValueError("an unrelated failure in __del__")

Other()
print("done")
"""


def run(code: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(
        os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20", CHECKPOINT_DISABLE="1"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_an_ended_kernel_leaves_no_exit_hook_traceback_and_other_reports_pass():
    quiet = run(KILL_KERNEL, "ours")
    assert quiet.returncode == 0 and quiet.stdout == "done\n", quiet.stderr
    assert "BrokenPipeError" not in quiet.stderr and "atexit" not in quiet.stderr, quiet.stderr
    # The previous hook still gets every other report (here: Python's own, which prints it).
    assert (
        "Exception ignored in" in quiet.stderr and "an unrelated failure in __del__" in quiet.stderr
    )
    # Without the hook the same run prints jsii's exit hook failing on the ended kernel.
    loud = run(KILL_KERNEL, "default-hook")
    assert loud.returncode == 0 and loud.stdout == "done\n", loud.stderr
    assert "Exception ignored in atexit callback" in loud.stderr
    assert "BrokenPipeError" in loud.stderr and "jsii/_kernel/providers/process.py" in loud.stderr


def _report(name: str, filename: str, exc: BaseException):
    """What :data:`sys.unraisablehook` gets for ``exc`` raised in a function ``name`` of ``filename``."""
    import types

    namespace: dict = {}
    exec(compile(f"def {name}(exc):\n    raise exc\n", filename, "exec"), namespace)
    try:
        namespace[name](exc)
    except BaseException as caught:  # noqa: BLE001
        return types.SimpleNamespace(
            exc_type=type(caught),
            exc_value=caught,
            exc_traceback=caught.__traceback__.tb_next,  # from the function on, as atexit's
            err_msg="Exception ignored in atexit callback",
            object=None,
        )
    raise AssertionError("not raised")


def test_only_the_ended_kernel_reports_of_jsii_are_dropped():
    code = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
sys.path.insert(0, {str(Path(__file__).parent)!r})
from gpucluster_cdk.constructs_lib import cdk
from test_kernel_exit import _report
jsii = "/site-packages/jsii/_kernel/providers/process.py"
cases = {{
    "stop-pipe": ("stop", jsii, BrokenPipeError(32, "Broken pipe")),
    "del-never-started": ("__del__", jsii, AttributeError("'_NodeProcess' object has no attribute '_process'")),
    "stop-other": ("stop", jsii, ValueError("something else")),
    "del-other-attr": ("__del__", jsii, AttributeError("'x' has no attribute 'y'")),
    "send-pipe": ("send", jsii, BrokenPipeError(32, "Broken pipe")),
    "elsewhere-pipe": ("stop", "/site-packages/other/process.py", BrokenPipeError(32, "Broken pipe")),
}}
hook = sys.unraisablehook
cdk.quiet_ended_kernel_exit()  # idempotent: the hook is not wrapped twice
assert sys.unraisablehook is hook
for key, (name, filename, exc) in cases.items():
    report = _report(name, filename, exc)
    print(json.dumps([key, cdk._ended_kernel_report(report)]))
"""
    result = run(code)
    assert result.returncode == 0, result.stderr
    dropped = dict(json.loads(line) for line in result.stdout.splitlines())
    assert dropped == {
        "stop-pipe": True,
        "del-never-started": True,
        "stop-other": False,
        "del-other-attr": False,
        "send-pipe": False,
        "elsewhere-pipe": False,
    }


STREAMS = f"""
import sys, threading
sys.path.insert(0, {str(ROOT)!r})
from gpucluster_cdk.constructs_lib import cdk

def kernel_reader(tag):
    # the two ways jsii's stderr reader writes: a raw line, and the kernel's console output
    print(repr(b"raw line " + tag.encode()), file=sys.stderr)
    sys.stderr.buffer.write(b"console stderr " + tag.encode() + b"\\n")
    sys.stdout.buffer.write(b"console stdout " + tag.encode() + b"\\n")
    sys.stderr.writelines(["lines " + tag + "\\n"])
    sys.stderr.flush(); sys.stdout.flush()

def in_thread(tag):
    t = threading.Thread(target=kernel_reader, args=(tag,))
    t.start(); t.join()

in_thread("before")
cdk.mute_kernel_output()  # what main.py's stop-signal handlers call
in_thread("after")
print("main thread after", file=sys.stderr)
sys.stdout.buffer.write(b"main stdout after\\n")
print(type(sys.stderr).__name__, sys.stderr.fileno(), sys.stderr.encoding == sys.stderr.wrapped.encoding, type(sys.stdout.wrapped).__name__)
"""


def test_after_a_stop_only_the_main_thread_writes_to_the_standard_streams():
    result = run(STREAMS)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "b'raw line before'",
        "console stderr before",
        "lines before",
        "main thread after",
    ]
    assert result.stdout.splitlines() == [
        "console stdout before",
        "main stdout after",
        "MutableStream 2 True TextIOWrapper",
    ]

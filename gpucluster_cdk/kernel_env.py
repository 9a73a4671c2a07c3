"""Checks of the environment the jsii Node.js kernel starts in (no cdktf import).

:mod:`gpucluster_cdk.constructs_lib.cdk` runs them before it starts the kernel; the synthesis path
runs them too when every stack is reused and no kernel starts
(:func:`gpucluster_cdk.stacks.synthesis.synth`), so a bad setting is the same one error line
whether or not this run needed the kernel.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence


def gpucluster_error(*args: object, **kwargs: object) -> Exception:
    """A :class:`gpucluster.errors.GpuclusterError` (imported only when one is raised)."""
    from gpucluster.errors import GpuclusterError

    return GpuclusterError(*args, **kwargs)  # type: ignore[arg-type]


KERNEL_DEFAULTS: Mapping[str, str] = {
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    "CHECKPOINT_DISABLE": "1",
}
"""Set with ``setdefault`` before the kernel starts (:mod:`gpucluster_cdk.constructs_lib.cdk` at
import): jsii prints no end-of-life banner for Node 20, cdktf sends no telemetry
(``CHECKPOINT_DISABLE``)."""


LAZY_JS_PRELOAD = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "constructs_lib", "lazy_bindings.cjs"
)
"""Node.js preload the kernel starts with (see :func:`lazy_js_settings`)."""


def lazy_js_settings(
    packages: Sequence[str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The variables the jsii kernel starts with so that it preloads :data:`LAZY_JS_PRELOAD`:
    ``NODE_OPTIONS`` (``environ``'s own, then ``--require "<preload>"``) and
    ``GPUCLUSTER_LAZY_JS_PACKAGES`` (``packages``, comma-separated, each ``<npm name>@<version>``:
    the preload rewrites a package's ``lib/index.js`` only when the ``package.json`` beside it
    has exactly that version); ``{}`` with ``GPUCLUSTER_LAZY_JS=0`` or no ``packages``.

    Why: a prebuilt binding's ``lib/index.js`` requires every resource module (azurerm: ~1,500,
    185 MB of JavaScript, ~2 s of the kernel's ``load``, measured with ``JSII_DEBUG_TIMING=1``);
    the preload turns each ``exports.<name> = require(...)`` line into a getter, so the kernel
    compiles only the modules whose types it is asked for. The classes, their runtime type information and so the synthesized JSON
    are the same (the determinism tests compare the output).
    """
    environ = os.environ if environ is None else environ
    if environ.get("GPUCLUSTER_LAZY_JS", "1") == "0" or not packages:
        return {}
    quoted = '"' + LAZY_JS_PRELOAD.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return {
        "NODE_OPTIONS": " ".join(filter(None, [environ.get("NODE_OPTIONS"), "--require", quoted])),
        "GPUCLUSTER_LAZY_JS_PACKAGES": ",".join(packages),
    }


_ACCEPTED: list[dict[str, str]] = []
"""Environments whose ``NODE_OPTIONS`` Node.js accepted in this process (:func:`check_node_options`
runs Node.js once per environment: the framework's import and a synth whose stacks are all
reused ask about the same one)."""


def check_node_options(environ: Mapping[str, str] | None = None) -> None:
    """Refuse a ``NODE_OPTIONS`` that Node.js itself refuses, before the jsii kernel starts.

    Node.js exits at once on an option it does not allow there (``node: --bogus is not allowed in
    NODE_OPTIONS``, exit 9) or a preload it cannot load; jsii would then print the raw lines and fail
    its handshake with an unexpected error. Runs ``node -e ""`` (``JSII_NODE``, default ``node``, as
    jsii does) with the environment only when ``NODE_OPTIONS`` is set and not blank, so a usual run
    pays nothing, and once per environment (an accepted one is remembered). A ``node`` that cannot
    be run at all is left to jsii.

    Raises:
        GpuclusterError: ``key=NODE_OPTIONS``, Node.js's own message.
    """
    environ = os.environ if environ is None else environ
    value = environ.get("NODE_OPTIONS", "")
    if not value.strip():
        return
    env = dict(environ)
    if env in _ACCEPTED:
        return
    import subprocess

    try:
        result = subprocess.run(
            [environ.get("JSII_NODE", "node"), "-e", ""],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return
    if result.returncode == 0:
        del _ACCEPTED[:-3]  # the last few environments are enough
        _ACCEPTED.append(env)
        return
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    said = next(
        (
            line
            for line in lines
            if line.startswith("node: ") or re.match(r"[A-Za-z]*Error\b", line)
        ),
        lines[-1] if lines else f"node exited with code {result.returncode}",
    )
    raise gpucluster_error(
        f"Node.js (which runs the jsii kernel) refuses NODE_OPTIONS={value!r}: {said}",
        key="NODE_OPTIONS",
        fix="unset NODE_OPTIONS, or keep in it only options Node.js allows there (the Node.js CLI documentation, "
        "NODE_OPTIONS, lists them)",
    )


def check_cdk_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse, before the jsii kernel starts, the environment variables whose bad values
    otherwise end in an unexpected error: a ``JSII_NODE`` that names no program, or -- without
    ``JSII_NODE`` -- no ``node`` on ``PATH`` (jsii's ``FileNotFoundError``), a ``SYNTH_HCL_OUTPUT`` of ``true``/``1`` (cdktf then writes
    ``cdk.tf``, HCL, where the injection check and the reuse cache read ``cdk.tf.json``: an
    ``error[output] ... No such file``) and a ``CDKTF_CONTEXT_JSON`` that is not a JSON object
    (cdktf's ``App`` parses it with ``JSON.parse``: a ``RuntimeError`` from the kernel). The cdktf
    CLI sets ``CDKTF_CONTEXT_JSON`` itself (``cdktf.json``'s ``context``).

    A ``JSII_RUNTIME`` (the kernel script jsii runs with Node.js instead of its embedded one) must be
    a file Node.js can parse as JavaScript (:func:`_check_jsii_runtime`, only when it is set).

    Raises:
        GpuclusterError: ``key=JSII_NODE``, ``key=PATH``, ``key=JSII_RUNTIME``,
            ``key=SYNTH_HCL_OUTPUT`` or ``key=CDKTF_CONTEXT_JSON``.
    """
    import shutil

    environ = os.environ if environ is None else environ
    node = environ.get("JSII_NODE")
    if node is not None:
        if not node.strip() or shutil.which(node, path=environ.get("PATH")) is None:
            raise gpucluster_error(
                f"JSII_NODE={node!r} names no program that can be run",
                key="JSII_NODE",
                allowed="the path or name of a Node.js executable (Node 20+)",
                fix="unset JSII_NODE to use node from PATH, or point it at a Node.js executable",
            )
    elif shutil.which("node", path=environ.get("PATH")) is None:
        # jsii starts ``node`` from PATH (jsii's _kernel/providers/process.py): without one its
        # FileNotFoundError surfaced as a failed write of the output folder
        raise gpucluster_error(
            "Node.js (20+) was not found on PATH: the cdktf bindings run in a jsii kernel that "
            "needs the node program",
            key="PATH",
            allowed="a PATH holding Node.js 20+ (node), or JSII_NODE naming it",
            fix="install Node.js 20+ (https://nodejs.org/) and put it on PATH, or set JSII_NODE "
            "to a Node.js executable",
        )
    runtime = environ.get("JSII_RUNTIME")
    if runtime is not None:
        _check_jsii_runtime(runtime, environ)
    hcl = environ.get("SYNTH_HCL_OUTPUT")
    if hcl in ("true", "1"):  # cdktf 0.21 lib/terraform-stack.js: === "true" || === "1"
        raise gpucluster_error(
            f"SYNTH_HCL_OUTPUT={hcl} asks cdktf for HCL (cdk.tf) instead of JSON (cdk.tf.json); "
            "gpucluster writes, checks and reuses cdk.tf.json only",
            key="SYNTH_HCL_OUTPUT",
            allowed="unset, or any value but true and 1",
            fix="unset SYNTH_HCL_OUTPUT (`cdktf synth` without --hcl); Terraform reads cdk.tf.json "
            "as it is",
        )
    context = environ.get("CDKTF_CONTEXT_JSON")
    if context is not None:
        import json

        try:
            parsed = json.loads(context)
        except (ValueError, RecursionError) as exc:
            parsed = exc
        if not isinstance(parsed, dict):
            reason = (
                f"not JSON ({parsed})"
                if isinstance(parsed, Exception)
                else f"a JSON {type(parsed).__name__}, not an object"
            )
            raise gpucluster_error(
                f"CDKTF_CONTEXT_JSON is {reason}",
                key="CDKTF_CONTEXT_JSON",
                allowed='a JSON object, e.g. {"excludeStackIdFromLogicalIds": "true"}',
                fix="unset CDKTF_CONTEXT_JSON (the cdktf CLI sets it from cdktf.json's context), or "
                "make it a JSON object",
            )


_RUNTIME_FIX = "unset JSII_RUNTIME (jsii then runs its own embedded kernel), or point it at a jsii runtime script"


def _check_jsii_runtime(runtime: str, environ: Mapping[str, str]) -> None:
    """Refuse a ``JSII_RUNTIME`` that is not a file or that Node.js cannot parse (``node --check``,
    which parses without running: a program such as ``/bin/true`` is a ``SyntaxError``). jsii runs
    ``<JSII_NODE or node> --max-old-space-size=4069 <JSII_RUNTIME>`` (jsii's
    ``_kernel/providers/process.py``), so such a value otherwise fails jsii's handshake with a
    ``JSONDecodeError``. A ``node`` that cannot be run is left to :func:`kernel_start_error`.

    Raises:
        GpuclusterError: ``key=JSII_RUNTIME``.
    """
    import subprocess

    if not os.path.isfile(runtime):
        raise gpucluster_error(
            f"JSII_RUNTIME={runtime!r} is not a file",
            key="JSII_RUNTIME",
            allowed="the path of a jsii kernel script (JavaScript)",
            fix=_RUNTIME_FIX,
        )
    try:
        result = subprocess.run(
            [environ.get("JSII_NODE", "node"), "--check", runtime],
            env=dict(environ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        said = next((line for line in lines if re.match(r"[A-Za-z]*Error\b", line)), None)
        raise gpucluster_error(
            f"JSII_RUNTIME={runtime!r} is not a JavaScript file Node.js can run"
            + (f": {said}" if said else f" (node --check exited with code {result.returncode})"),
            key="JSII_RUNTIME",
            allowed="the path of a jsii kernel script (JavaScript)",
            fix=_RUNTIME_FIX,
        )


_NODE_VERSION = re.compile(r"v\d+\.\d+\.\d+")


def kernel_start_error(
    err: BaseException, environ: Mapping[str, str] | None = None
) -> Exception | None:
    """The one input error line for a jsii kernel that failed to start, or None.

    ``err`` is what the framework's import raised; it is a failed start when it was raised in
    jsii's handshake with the kernel (``jsii/_kernel/providers/process.py``: the kernel's first
    line was not its ``{"hello": ...}`` JSON, a ``JSONDecodeError``, or named another runtime, an
    ``AssertionError``). Then the program that ran the kernel is asked ``--version`` (Node.js
    prints ``v20.1.0``): a program that fails or prints anything else is named -- ``JSII_NODE``
    when set, else the ``node`` found on ``PATH``; when it is Node.js, a set ``JSII_RUNTIME`` is
    named. Runs nothing unless the kernel failed, so a usual synth pays nothing.

    Returns:
        A :class:`gpucluster.errors.GpuclusterError` (``key=JSII_NODE``, ``key=PATH`` or
        ``key=JSII_RUNTIME``) to report, or None when the failure is not one of those (a bug).
    """
    import shutil
    import subprocess

    environ = os.environ if environ is None else environ
    frames = []
    tb = err.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    if not any(
        code.co_name == "handshake"
        and code.co_filename.replace(os.sep, "/").endswith("jsii/_kernel/providers/process.py")
        for code in frames
    ):
        return None
    node = environ.get("JSII_NODE")
    program = (
        node if node is not None else (shutil.which("node", path=environ.get("PATH")) or "node")
    )
    try:
        result = subprocess.run(
            [program, "--version"],
            env=dict(environ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=60,
        )
        said = (result.stdout.strip().splitlines() or [""])[0][:80]
        is_node = result.returncode == 0 and bool(_NODE_VERSION.fullmatch(said))
        how = f"exited with code {result.returncode}" if result.returncode else f"printed {said!r}"
    except (OSError, subprocess.SubprocessError) as exc:
        is_node, how = False, f"could not be run ({type(exc).__name__})"
    if not is_node:
        if node is not None:
            return gpucluster_error(
                f"JSII_NODE={node!r} is not Node.js: the jsii kernel did not start, and "
                f"`{node} --version` {how}",
                key="JSII_NODE",
                allowed="the path or name of a Node.js executable (Node 20+)",
                fix="unset JSII_NODE to use node from PATH, or point it at a Node.js executable",
            )
        return gpucluster_error(
            f"the node on PATH ({program}) is not Node.js: the jsii kernel did not start, and "
            f"`{program} --version` {how}",
            key="PATH",
            allowed="a PATH whose first node is Node.js 20+",
            fix="put Node.js first on PATH, or set JSII_NODE to a Node.js executable",
        )
    runtime = environ.get("JSII_RUNTIME")
    if runtime is not None:
        return gpucluster_error(
            f"JSII_RUNTIME={runtime!r} did not start a jsii kernel (no handshake from it)",
            key="JSII_RUNTIME",
            allowed="the path of a jsii kernel script (JavaScript)",
            fix=_RUNTIME_FIX,
        )
    return None


def check_all(environ: Mapping[str, str] | None = None) -> None:
    """:func:`check_cdk_environment` then :func:`check_node_options` (the order the kernel's start uses).

    Raises:
        GpuclusterError: as those.
    """
    check_cdk_environment(environ)
    check_node_options(environ)

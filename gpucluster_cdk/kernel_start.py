"""Start the jsii Node.js kernel while the plans are made (no jsii or cdktf import here).

jsii starts its kernel (``node --max-old-space-size=4069 bin/jsii-runtime.js``, which starts the
kernel's own Node.js process) when the first assembly is loaded, at ``import cdktf``, and then
waits for the kernel's hello line: about 0.25 s on a 2-core machine during which Python does
nothing. :func:`prestart` starts that same process at the start of a synth
(:func:`gpucluster_cdk.app.main`), with the arguments and the environment jsii would give it, so
the kernel's start overlaps the cluster file's reading, the plans, the cache keys and the Python
imports. When jsii then starts its kernel,
:func:`gpucluster_cdk.constructs_lib.cdk.adopt_prestarted_kernel` hands it this process
(:func:`take`) if jsii asks for exactly the command and environment it was started with; else
(something changed the environment, another directory) it is ended and jsii starts its own. The
kernel is the same program with the same arguments and environment either way, so the output is
the same bytes (tests/test_kernel_start.py compares).

A process no one takes (every cluster reused, the clusters built by worker processes, bad
input) is ended by :func:`discard` (SIGTERM: jsii's runtime passes it to its child) when the synth
ends or, at the latest, when this process exits. A forked worker or helper closes its copies of
the pipes (:func:`forget`) and starts a kernel of its own if it needs one.

Not started when jsii is imported already (a kernel may run), outside POSIX, with ``JSII_RUNTIME``
set, or when the environment would make the kernel's start fail
(:func:`gpucluster_cdk.kernel_env.check_cdk_environment`, and a ``NODE_OPTIONS`` Node.js refuses:
:func:`gpucluster_cdk.kernel_env.check_node_options` runs Node.js once for it, and the framework's
import asks again without running it): those runs start the kernel as jsii does, with the same
errors as before. Under ``cdktf synth`` (the CLI runs the app with
``NODE_OPTIONS=--max-old-space-size=4096`` when it is unset, ``@cdktf/cli-core``
``src/lib/synth-stack.js``) that check is the one cost before the process starts.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

NODE_FLAGS = ("--max-old-space-size=4069",)
"""The Node.js flags jsii (1.x ``_NodeProcess.start``) starts its runtime with."""

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Started:
    """A prestarted process: its ``Popen``, command (Node.js and flags), environment, directory,
    the pid of the process that started it and its runtime folder. (A plain class: this module is
    imported before the process starts, and :mod:`dataclasses` would delay that.)"""

    __slots__ = ("proc", "command", "env", "cwd", "pid", "folder")

    def __init__(
        self,
        proc: subprocess.Popen,
        command: tuple[str, ...],
        env: dict[str, str],
        cwd: str,
        pid: int,
        folder: str,
    ):
        self.proc, self.command, self.env = proc, command, env
        self.cwd, self.pid, self.folder = cwd, pid, folder


_started: list[_Started] = []
"""The prestarted kernel (at most one), until it is taken, discarded or forgotten."""

_exit_hook: list[int] = []
"""Non-empty once :func:`discard` is registered as an exit hook (in the process named)."""


def kernel_environment(environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The environment jsii's kernel would start with in this process, given ``environ``
    (default ``os.environ``): ``environ``, the :data:`gpucluster_cdk.kernel_env.KERNEL_DEFAULTS` it
    lacks, :func:`gpucluster_cdk.kernel_env.lazy_js_settings` of the chosen distribution's
    bindings, and ``JSII_AGENT`` (jsii's ``Python/<version>``). None when the distribution setting
    is bad (that error is reported where the framework is imported)."""
    from gpucluster_cdk.distributions import chosen
    from gpucluster_cdk.kernel_env import lazy_js_settings, with_kernel_defaults

    env = with_kernel_defaults(os.environ if environ is None else environ)
    try:
        packages = chosen(env).binding_js_packages
    except Exception:  # noqa: BLE001 - a bad GPUCLUSTER_CDK (reported where the framework is imported)
        return None
    env.update(lazy_js_settings(packages, env))
    env["JSII_AGENT"] = f"Python/{platform.python_version()}"
    return env


def _runtime_files(folder: str) -> str | None:
    """Copy jsii's embedded runtime (``jsii/_embedded/jsii``, its ``EMBEDDED_FILES`` table) into
    ``folder`` as jsii lays it out; the entry point's path, or None without an installed jsii."""
    spec = importlib.util.find_spec("jsii")
    if spec is None or not spec.submodule_search_locations:
        return None
    embedded = os.path.join(spec.submodule_search_locations[0], "_embedded", "jsii")
    table_spec = importlib.util.spec_from_file_location(
        "_gpucluster_jsii_embedded", os.path.join(embedded, "__init__.py")
    )
    if table_spec is None or table_spec.loader is None:
        return None
    table = importlib.util.module_from_spec(table_spec)
    table_spec.loader.exec_module(table)  # a dict and a name; not jsii's package
    for resource, relative in table.EMBEDDED_FILES.items():
        target = os.path.join(folder, relative.replace("/", os.sep))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(embedded, resource), target)
    return os.path.join(folder, table.EMBEDDED_FILES[table.ENTRYPOINT].replace("/", os.sep))


def _startable(environ: Mapping[str, str]) -> bool:
    from gpucluster_cdk.kernel_env import check_cdk_environment, check_node_options

    if _started or "jsii" in sys.modules or os.name != "posix":
        return False
    if environ.get("JSII_RUNTIME") is not None:
        return False
    try:
        check_cdk_environment(environ)
        check_node_options(
            environ
        )  # a NODE_OPTIONS (the cdktf CLI sets one): Node.js must accept it
    except Exception:  # noqa: BLE001 - the kernel's start would fail: jsii reports it, as before
        return False
    return True


def prestart() -> bool:
    """Start the kernel's process now, as jsii would (see the module docstring); True if started.

    A stop signal from the start of the process until it is recorded (it would leave it running
    unrecorded) is held (:func:`_stop_signals_held`) and handled right after. Never raises: a
    failure to start leaves the start to jsii; so does a thread other than the main one (only it
    can hold the signals).
    """
    from gpucluster_cdk.kernel_env import with_kernel_defaults

    base = with_kernel_defaults(os.environ)  # as the framework's import checks it
    if not _startable(base):
        return False
    env = kernel_environment(base)
    if env is None:
        return False
    node = env.get("JSII_NODE", "node")
    try:
        cwd = os.getcwd()  # before the start: it fails in a removed directory (jsii's start then)
    except OSError:
        return False
    folder = None
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(_stop_signals_held())
        except ValueError:  # not the main thread, or a handler Python cannot put back
            return False
        try:
            folder = tempfile.mkdtemp(prefix="gpucluster-jsii-runtime-")
            entry = _runtime_files(folder)
            if entry is None:
                shutil.rmtree(folder, ignore_errors=True)
                return False
            command = (node, *NODE_FLAGS)
            proc = subprocess.Popen(
                [*command, entry],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
            _started.append(_Started(proc, command, env, cwd, os.getpid(), folder))
            if os.getpid() not in _exit_hook:  # once per process: an in-process caller runs many
                atexit.register(discard)
                _exit_hook.append(os.getpid())
            return True
        except Exception:  # noqa: BLE001 - OSError, a broken jsii install: jsii starts its kernel itself
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            return False


@contextlib.contextmanager
def _stop_signals_held() -> Iterator[None]:
    """While inside, a stop signal is only recorded; on leaving, the handlers before are put back
    and each signal recorded is sent to this process again, so it is handled then as it would
    have been (Python's handler, a raising one, ``SIG_DFL`` ending the process).

    Not :func:`signal.pthread_sigmask`: a process started inside would inherit the blocked mask
    through ``exec``, and a ``node`` that is a version manager's shim running Node.js as its child
    (Volta's; Node.js itself resets its mask) could then not be stopped by SIGTERM. The handlers
    are swapped with the signals blocked (a signal in between would find a handler half-swapped);
    nothing is started then.

    Raises:
        ValueError: not in the main thread, or a handler not set from Python (``signal.signal``
            could not put it back); nothing is changed then.
    """
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        held.append(signum)

    previous = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
    if any(handler is None for handler in previous.values()):
        raise ValueError("a stop signal's handler was not set from Python")
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        for signum in _STOP_SIGNALS:
            signal.signal(signum, hold)
    except ValueError:
        for signum, handler in previous.items():
            with contextlib.suppress(ValueError):
                signal.signal(signum, handler)
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    try:
        yield
    finally:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for number in dict.fromkeys(held):
            signal.raise_signal(number)


def take(args: Sequence[str], kwargs: Mapping[str, Any]) -> tuple[subprocess.Popen, str] | None:
    """The prestarted process and its runtime folder (the caller removes the folder when the
    kernel stops), if ``subprocess.Popen(args, **kwargs)`` is the start jsii asks for: the same
    Node.js and flags (``args`` but the runtime path, which is a copy of the same files), the same
    environment, pipes for the three streams, and this process in the directory it was started
    in, with the process still running. Otherwise None, and the prestarted process is ended."""
    if not _started:
        return None
    started = _started[0]
    wanted = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    same = (
        started.pid == os.getpid()
        and tuple(args[: len(started.command)]) == started.command
        and len(args) == len(started.command) + 1
        and {k: v for k, v in kwargs.items() if k != "env"} == wanted
        and kwargs.get("env") == started.env
        and started.proc.poll() is None
    )
    with contextlib.suppress(OSError):
        same = same and os.getcwd() == started.cwd
    if not same:
        discard()
        return None
    _started.clear()
    return started.proc, started.folder


def discard() -> None:
    """End the prestarted process no one took (SIGTERM, at most 2 s, then SIGKILL), close its
    pipes and remove its runtime folder; in a forked child, only :func:`forget`. Idempotent.

    The stop signals are blocked meanwhile, as in :func:`prestart` (``gpucluster synth`` runs it
    where Python's own actions apply: a SIGTERM would end the process at once, a SIGINT raise
    ``KeyboardInterrupt``, and either leave the folder or the process behind); one that came
    meanwhile is handled right after. An exception raised inside all the same (a handler run for
    another thread's signal) still lets the clean-up finish.
    """
    if not _started:
        return
    started = _started[0]
    if started.pid != os.getpid():
        forget()
        return
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        _started.clear()
        _end(started)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _end(started: _Started) -> None:
    proc = started.proc
    try:
        with contextlib.suppress(OSError):
            proc.terminate()
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                proc.kill()
            with contextlib.suppress(subprocess.SubprocessError):
                proc.wait(timeout=2)
    finally:
        _close_pipes(proc)
        shutil.rmtree(started.folder, ignore_errors=True)


def forget() -> None:
    """In a forked worker or helper: close this process's copies of the prestarted kernel's pipes
    and forget it (it is the parent's); nothing is signalled or removed. Idempotent."""
    if _started:
        _close_pipes(_started.pop().proc)


def _close_pipes(proc: subprocess.Popen) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()

"""gpucluster's cdktf app: cluster file -> RuntimePlans -> stacks -> ``cdktf.out``.

Run by ``cdktf synth`` (the ``app`` of a project's ``cdktf.json``: ``python -m gpucluster_cdk``;
this repository's own ``cdktf.json`` runs its ``main.py``, which does the same) or directly.

1. Load the clusters (``GPUCLUSTER_CONFIG``, ``./gpucluster.yaml`` or the embedded default) and
   build every plan with the pure-Python pipeline *before* cdktf is imported.
2. Bad input (:class:`~gpucluster.errors.GpuclusterError`): print the problems to stderr, exit 2,
   write nothing. Warnings and info (plan findings) go to stderr, or to stdout under the cdktf CLI
   (which shows stdout as is but marks every stderr line ``[ERROR]``).
3. Synthesize into a sibling folder of the output folder (``CDKTF_OUTDIR``, default
   ``cdktf.out``) and swap it in atomically: a failed synth leaves the previous output as it was.
   A folder that is not an earlier output nor empty is refused first (``error[outdir]``, exit 2:
   :mod:`gpucluster.outfolder`).
4. SIGINT, SIGTERM and SIGHUP stop the run like an error: the staged folders are removed, the
   previous output is kept, one line goes to stderr and the exit code is 128 + the signal number.
   Run as a script (:func:`run_script`), every temporary file of the process (chart staging, the jsii runtime and the
   jsii Node.js kernel's folder) lives in one private folder, removed at exit even when a signal
   to the process group killed the kernel first.

   No traceback at any moment: the handlers are installed by the script's first statements
   (:func:`install_stop_handlers`, before any gpucluster import); the first signal stops the run, later ones are only recorded
   (cleanup is never cut short); the report of the jsii kernel's exit hook failing on a kernel the
   signal already ended (it wrote to a closed pipe, ``BrokenPipeError``) is dropped from
   ``sys.unraisablehook`` (``gpucluster_cdk.constructs_lib.cdk.quiet_ended_kernel_exit``); from the first
   signal on, what the kernel writes (its ``Error on jsii API channel ... ECONNRESET`` when the
   signal ended its child) is dropped (``gpucluster_cdk.constructs_lib.cdk.mute_kernel_output``: other
   threads' writes to the standard streams), so stderr holds only the one line after whatever
   was printed before the signal; a signal during the shutdown
   after a successful run still exits 128 + the signal number with the one line.
5. A ``NODE_OPTIONS`` that Node.js refuses is one ``error[input] key=NODE_OPTIONS`` line, exit 2,
   nothing written (``gpucluster_cdk.constructs_lib.cdk.check_node_options``, before the jsii kernel starts).
6. Any other unexpected exception prints one ``error[internal]`` line (the traceback only with
   ``GPUCLUSTER_DEBUG=1``) and exits 70 (``EX_SOFTWARE``).
"""

from __future__ import annotations

import signal
import sys

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []
"""Stop signals received by this process, in order (see :func:`_on_stop_signal`)."""


class _Stopped(BaseException):
    """Raised in the main thread by the first stop signal, so that every ``with`` block cleans up."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_armed: list[bool] = []
"""Non-empty once :func:`_script` runs inside its ``try``: only then may a signal raise."""


def _mute_kernel_output() -> None:
    """After a stop signal only this process's own line goes to stderr: silence the jsii kernel's
    output reader (``gpucluster_cdk.constructs_lib.cdk.mute_kernel_output``; nothing to do before it is imported,
    the kernel starts only after). Called first by every stop-signal handler."""
    mute = getattr(sys.modules.get("gpucluster_cdk.constructs_lib.cdk"), "mute_kernel_output", None)
    if mute is not None:
        mute()


def _would_be_ignored(frame) -> bool:
    """True when an exception raised in ``frame`` would not propagate but be printed as "Exception
    ignored in ..." with a traceback: ``frame`` or a frame it was called from (``f_back``) is a
    weak-reference callback of the import system (CPython's ``_get_module_lock.<locals>.cb``, run
    when a module lock is collected) or a ``__del__``."""
    while frame is not None:
        code = getattr(frame, "f_code", None)
        if code is not None and (
            code.co_name == "__del__"
            or (code.co_name == "cb" and code.co_filename.startswith("<frozen importlib"))
        ):
            return True
        frame = getattr(frame, "f_back", None)
    return False


DEFER_SECONDS = 0.005
"""How long a stop signal that arrived inside a callback waits before it is handled again (s)."""
_deferred: list[int] = []
_alarm_before: list = []  # the SIGALRM handler _handle_later replaced, put back by _on_deferred


def _raise_stop(signum: int, frame, received: list[int]) -> None:
    """Raise :class:`_Stopped` for the first stop signal -- unless ``frame`` would swallow it
    (:func:`_would_be_ignored`): then it is forgotten and handled again once
    :data:`DEFER_SECONDS` have passed (:func:`_handle_later`), outside that callback."""
    if len(received) != 1:
        return
    if _would_be_ignored(frame):
        received.clear()
        _handle_later(signum)
        return
    raise _Stopped(signum)


def _handle_later(signum: int) -> None:
    """Hand ``signum`` to its handler again after :data:`DEFER_SECONDS`, from SIGALRM of a
    one-shot ``ITIMER_REAL`` timer. Sending it again with ``os.kill`` would not do: a signal sent
    to this process is handled at the next instruction, still inside the callback."""
    _deferred.append(signum)
    if signal.getsignal(signal.SIGALRM) is not _on_deferred:
        _alarm_before[:] = [signal.signal(signal.SIGALRM, _on_deferred)]
    signal.setitimer(signal.ITIMER_REAL, DEFER_SECONDS)


def _on_deferred(_alarm: int, frame) -> None:
    """SIGALRM of :func:`_handle_later`: run the deferred signal's current handler where this
    process is now (it defers again if still inside a callback); a default disposition is
    carried out (``signal.raise_signal``), an ignored one dropped. The SIGALRM handler that was
    there before is put back first."""
    signal.signal(signal.SIGALRM, _alarm_before.pop() if _alarm_before else signal.SIG_DFL)
    pending = list(_deferred)
    _deferred.clear()  # a handler still inside a callback defers again: to a later alarm
    for signum in pending:
        handler = signal.getsignal(signum)
        if callable(handler):
            handler(signum, frame)
        elif handler == signal.SIG_DFL:
            signal.raise_signal(signum)


def _on_stop_signal(signum, frame):
    """Record ``signum``; raise :class:`_Stopped` for the first one only (cleanup runs to its end),
    and only once the script is inside its ``try`` (before that, module-level imports are running
    and :func:`_script` stops as soon as it starts)."""
    _mute_kernel_output()
    _received.append(signum)
    if _armed:
        _raise_stop(signum, frame, _received)


def install_stop_handlers() -> None:
    """The script's first statement (``python -m gpucluster_cdk``, ``main.py``): from now on a
    stop signal never prints a traceback. This module imports only the standard library at
    module level, so nothing of gpucluster runs before it."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_stop_signal)


import atexit  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TextIO  # noqa: E402

DEFAULT_OUTDIR = "cdktf.out"
EXIT_INTERNAL = 70
"""Exit code of an unexpected internal error (``EX_SOFTWARE``, sysexits.h)."""


@contextlib.contextmanager
def _stop_signals_raise(received: list[int]) -> Iterator[None]:
    """Turn :data:`STOP_SIGNALS` into :class:`_Stopped` (recorded in ``received``) while inside.

    Python's default for SIGTERM/SIGHUP ends the process at once, leaving the staged output
    folder and the temporary chart and jsii folders behind. A signal recorded before (the
    script's own handler) stops the run at once.
    """
    if received:
        raise _Stopped(received[0])

    def stop(signum, frame):
        _mute_kernel_output()
        received.append(signum)
        _raise_stop(signum, frame, received)

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stack_dirs(outdir: Path) -> set[str]:
    stacks = outdir / "stacks"
    return {p.name for p in stacks.iterdir() if p.is_dir()} if stacks.is_dir() else set()


def main(
    argv: list[str] | None = None,
    received: list[int] | None = None,
    *,
    config: str | None = None,
    outdir: str | os.PathLike | None = None,
    progress: TextIO | None = None,
    written: list[str] | None = None,
    cache: bool | None = None,
    workers: int | None = None,
) -> int:
    """Run the app (see the module docstring); returns the exit code.

    Args:
        received: list the stop signals are recorded in (the script passes its own, so signals
            before and after ``main`` count); default a fresh one.
        config: the cluster file (``gpucluster synth --config``); None: ``GPUCLUSTER_CONFIG``,
            ``./gpucluster.yaml``, the embedded default.
        outdir: the output folder (``gpucluster synth --out``); None: ``CDKTF_OUTDIR``, else
            ``cdktf.out``.
        progress: where one line per cluster goes while its stacks are built, for a cluster
            file of more than one cluster (``gpucluster synth``: stderr); None: no such lines.
        written: receives the names of the stacks written.
        cache, workers: as :func:`gpucluster_cdk.stacks.synth` (None: its defaults).
    """
    received = [] if received is None else received
    try:
        with _stop_signals_raise(received):
            return _run(
                config=config,
                outdir=outdir,
                progress=progress,
                written=written,
                cache=cache,
                workers=workers,
            )
    except _Stopped as stopped:
        return _interrupted(stopped.signum)
    except Exception as err:
        if (
            received
        ):  # the signal also reached the jsii kernel (process group) and broke a call first
            return _interrupted(received[0])
        from gpucluster.errors import EXIT_INVALID_INPUT, GpuclusterError
        from gpucluster_cdk.kernel_env import kernel_start_error

        failed = kernel_start_error(err)  # a JSII_NODE, node or JSII_RUNTIME that is no kernel
        if isinstance(failed, GpuclusterError):
            print(failed.render(), file=sys.stderr)
            return EXIT_INVALID_INPUT
        return _internal_error(err)


def _internal_error(err: BaseException) -> int:
    """One ``error[internal]`` line for an unexpected exception (traceback with GPUCLUSTER_DEBUG=1)."""
    from gpucluster.errors import Problem

    if os.environ.get("GPUCLUSTER_DEBUG") == "1":
        traceback.print_exception(err, file=sys.stderr)
    problem = Problem(
        message=f"unexpected {type(err).__name__}: {err}",
        id="internal",
        fix="this is a gpucluster bug: rerun with GPUCLUSTER_DEBUG=1 and report the traceback with the "
        "cluster file",
    )
    print(problem.render(), file=sys.stderr)
    return EXIT_INTERNAL


def _interrupted(signum: int) -> int:
    print(
        f"gpucluster: interrupted by {signal.Signals(signum).name}; the output folder holds the previous or the "
        "new output, never a mix",
        file=sys.stderr,
    )
    return 128 + signum


def _run(
    *,
    config: str | None = None,
    outdir: str | os.PathLike | None = None,
    progress: TextIO | None = None,
    written: list[str] | None = None,
    cache: bool | None = None,
    workers: int | None = None,
) -> int:
    from gpucluster.errors import EXIT_INVALID_INPUT, GpuclusterError, Problem
    from gpucluster.inputs.config import embedded_default_notice, load_config
    from gpucluster.pipeline import build_plans

    findings_out = sys.stdout if _under_cdktf_cli() else sys.stderr
    try:
        _check_working_folder()
        notice = embedded_default_notice(config)
        if notice:
            print(notice, file=findings_out)
            findings_out.flush()
        clusters, fleet = load_config(config)
        plans = build_plans(clusters)
    except GpuclusterError as err:
        print(err.render(), file=sys.stderr)
        return EXIT_INVALID_INPUT
    for plan in plans:
        for finding in plan.findings:
            print(finding.render(), file=findings_out)
    findings_out.flush()

    key = "--out" if outdir else "CDKTF_OUTDIR"
    outdir = Path(outdir or os.environ.get("CDKTF_OUTDIR") or DEFAULT_OUTDIR)
    try:  # a folder that is not ours is refused before cdktf is even imported (stacks.synth checks again)
        from gpucluster.outfolder import check_replaceable, synth_elsewhere

        check_replaceable(outdir, kind="synth", key=key, fix_elsewhere=synth_elsewhere(key))
    except GpuclusterError as err:
        print(err.render(), file=sys.stderr)
        return EXIT_INVALID_INPUT
    try:
        previous = _stack_dirs(outdir)
    except (OSError, ValueError):
        previous = set()  # stacks.synth reports the folder's problem as error[output]
    warnings: list[Problem] = []
    try:
        from gpucluster_cdk import (
            stacks,
        )  # cdktf (or cdktn: GPUCLUSTER_CDK) is imported only when a stack is built here

        reused: list[str] = []
        names = stacks.synth(
            plans,
            outdir,
            fleet=fleet,
            warnings=warnings,
            cache=cache,
            workers=workers,
            reused=reused,
            outdir_key=key,
            progress=_progress_printer(progress, reused)
            if progress is not None and len(plans) > 1
            else None,
        )
    except GpuclusterError as err:
        print(err.render(), file=sys.stderr)
        return EXIT_INVALID_INPUT
    for warning in warnings:
        print(warning.render("warning"), file=findings_out)
    if os.environ.get("CDKTF_CONTINUE_SYNTH_ON_ERROR_ANNOTATIONS") is not None:
        # Under the cdktf CLI: it deletes stacks/<name> folders that existed before the run and
        # are not in the new manifest, with a plain rmSync that fails on a missing folder. Our
        # swap already dropped them; leave empty placeholders for the CLI to delete.
        for name in sorted(previous - set(names)):
            (outdir / "stacks" / name).mkdir(parents=True, exist_ok=True)
    if written is not None:
        written.extend(names)
    return 0


def _check_working_folder() -> None:
    """:func:`gpucluster.errors.check_working_folder` of the synth (the cluster file, the output
    folder and the kernel's paths are found from the working folder)."""
    from gpucluster.errors import check_working_folder

    check_working_folder("synth")


def _progress_printer(stream: TextIO, reused: list[str]):
    """The ``progress`` callback of :func:`gpucluster_cdk.stacks.synth`: one line per cluster,
    ``built`` or ``reused`` (its name is in ``reused``, which synth fills before it reports it)."""

    def report(index: int, total: int, cluster: str, stacks: list[str]) -> None:
        how = "reused" if cluster in reused else "built"
        print(
            f"gpucluster: cluster {index}/{total} {cluster}: stacks {', '.join(stacks)} {how}",
            file=stream,
            flush=True,
        )

    return report


def synth_command(
    *,
    config: str | None,
    outdir: str | None,
    out: TextIO,
    err: TextIO,
    cache: bool | None = None,
    workers: int | None = None,
) -> int:
    """``gpucluster synth``: the app in this process (:func:`main`, the code path ``cdktf synth``
    runs), a progress line per cluster on ``err`` for a multi-cluster file (``built`` or
    ``reused``), then one line on ``out`` naming the stacks written; returns the exit code (0, 2
    bad input, 70 internal, 128 + n after stop signal n).

    Args:
        cache: False builds every cluster (``--no-cache``); None: the default of
            :func:`gpucluster_cdk.stacks.synth` (on unless ``GPUCLUSTER_SYNTH_CACHE=off`` or
            ``GPUCLUSTER_CACHE_DIR=off``).
        workers: most worker processes (``--workers``); None: ``GPUCLUSTER_SYNTH_WORKERS``, else
            the CPUs, at most 8.
    """
    names: list[str] = []
    code = main(
        [], config=config, outdir=outdir, progress=err, written=names, cache=cache, workers=workers
    )
    if code == 0:
        target = Path(outdir or os.environ.get("CDKTF_OUTDIR") or DEFAULT_OUTDIR)
        print(
            f"synthesized {len(names)} stack{'' if len(names) == 1 else 's'} into {target}: {', '.join(names)}",
            file=out,
            flush=True,
        )
    return code


def _under_cdktf_cli() -> bool:
    """True when the cdktf CLI runs the app (it sets ``CDKTF_CONTEXT_JSON``).

    cdktf-cli 0.21 prints the app's stdout as it comes, but logs every stderr chunk as an error
    (``[ERROR] default - ...``) and repeats the whole stderr in its failure report. Warning and info
    findings of a successful synth therefore go to stdout there; errors stay on stderr.
    """
    return "CDKTF_CONTEXT_JSON" in os.environ


def _record_only(signum, frame):
    """Stop-signal handler for the shutdown: record, never raise (atexit hooks run to the end)."""
    _mute_kernel_output()
    _received.append(signum)


def _exit_after_late_signal(code: int) -> None:
    """Last atexit hook: a stop signal during the shutdown of a successful run still ends the
    process with 128 + its number and the one line (after every other hook cleaned up)."""
    if _received and code == 0:
        _interrupted(_received[0])
        with contextlib.suppress(BaseException):
            sys.stderr.flush()
        os._exit(128 + _received[0])


def _private_tmpdir() -> None:
    """Point ``TMPDIR`` (Python and the jsii Node.js kernel) at a fresh folder removed at exit.

    Registered before jsii starts its kernel, so (atexit runs last-in first-out) the folder is
    removed after jsii stopped the kernel. The stop signals are blocked from the folder's creation
    to the hook's registration (a signal in between would leave the folder behind); one that came
    meanwhile is handled right after.
    """
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        private = tempfile.mkdtemp(prefix="gpucluster-synth-")
        atexit.register(shutil.rmtree, private, True)
        os.environ["TMPDIR"] = tempfile.tempdir = private
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _script() -> int:
    """The script's run: the exit code; never raises (see the module docstring, 4 to 6)."""
    code = 0
    final: list[int] = []
    atexit.register(
        lambda: _exit_after_late_signal(final[0] if final else 1)
    )  # registered first: runs last
    try:
        _armed.append(True)
        if _received:  # a signal while the module was being imported
            raise _Stopped(_received[0])
        _private_tmpdir()
        code = main(sys.argv[1:], received=_received)
    except _Stopped as stopped:
        code = _interrupted(stopped.signum)
    except BaseException as err:  # noqa: BLE001 - SystemExit/KeyboardInterrupt from a plugin included
        if isinstance(err, SystemExit) and isinstance(err.code, int):
            code = err.code
        else:
            code = _interrupted(_received[0]) if _received else _internal_error(err)
    if _received and code == 0:
        code = _interrupted(_received[0])
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    for signum in STOP_SIGNALS:
        signal.signal(signum, _record_only)
    final.append(code)
    _received.clear()  # from here on: signals during the shutdown (see _exit_after_late_signal)
    return code


def run_script() -> None:
    """Run the app as the process's script and end the process (never returns); call
    :func:`install_stop_handlers` first.

    Exits without the interpreter's finalization: it restores the default signal actions, so a
    SIGTERM in its last milliseconds would end the process with -15 instead of the one line.
    The exit hooks (jsii kernel stop, private TMPDIR removal, _exit_after_late_signal) run here.
    """
    from gpucluster_cdk import exit_hooks  # standard library only, imported before the run

    exit_code = 1
    try:
        exit_code = _script()
    finally:
        for signum in STOP_SIGNALS:
            signal.signal(signum, _record_only)
        try:
            ran = exit_hooks.run_now()
        except BaseException:  # noqa: BLE001
            ran = True
        if not ran:  # another interpreter: the plain path, the interpreter runs the exit hooks
            raise SystemExit(exit_code)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(exit_code)


if __name__ == "__main__":  # python -m gpucluster_cdk.app
    install_stop_handlers()
    run_script()

#!/usr/bin/env python3
"""gpucluster cdktf app: cluster file -> RuntimePlans -> stacks -> ``cdktf.out``.

Run by ``cdktf synth`` (``cdktf.json``: ``.venv/bin/python main.py``) or directly.

1. Load the clusters (``GPUCLUSTER_CONFIG``, ``./gpucluster.yaml`` or the embedded default) and
   build every plan with the pure-Python pipeline *before* cdktf is imported.
2. Bad input (:class:`~gpucluster.errors.GpuclusterError`): print the problems to stderr, exit 2,
   write nothing. Warnings and info (plan findings) go to stderr, or to stdout under the cdktf CLI
   (which shows stdout as is but marks every stderr line ``[ERROR]``).
3. Synthesize into a sibling folder of the output folder (``CDKTF_OUTDIR``, default
   ``cdktf.out``) and swap it in atomically: a failed synth leaves the previous output as it was.
4. SIGINT, SIGTERM and SIGHUP stop the run like an error: the staged folders are removed, the
   previous output is kept, one line goes to stderr and the exit code is 128 + the signal number.
   Run as a script, every temporary file of the process (chart staging, the jsii runtime and the
   jsii Node.js kernel's folder) lives in one private folder, removed at exit even when a signal
   to the process group killed the kernel first.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from gpucluster.errors import EXIT_INVALID_INPUT, GpuclusterError

DEFAULT_OUTDIR = "cdktf.out"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Stopped(BaseException):
    """Raised in the main thread by a stop signal, so that every ``with`` block cleans up."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stop_signals_raise(received: list[int]) -> Iterator[None]:
    """Turn :data:`STOP_SIGNALS` into :class:`_Stopped` (recorded in ``received``) while inside.

    Python's default for SIGTERM/SIGHUP ends the process at once, leaving the staged output
    folder and the temporary chart and jsii folders behind.
    """

    def stop(signum, frame):
        received.append(signum)
        raise _Stopped(signum)

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stack_dirs(outdir: Path) -> set[str]:
    stacks = outdir / "stacks"
    return {p.name for p in stacks.iterdir() if p.is_dir()} if stacks.is_dir() else set()


def main(argv: list[str] | None = None) -> int:
    received: list[int] = []
    try:
        with _stop_signals_raise(received):
            return _run()
    except _Stopped as stopped:
        return _interrupted(stopped.signum)
    except Exception:
        if received:  # the signal also reached the jsii kernel (process group) and broke a call first
            return _interrupted(received[0])
        raise


def _interrupted(signum: int) -> int:
    print(f"gpucluster: interrupted by {signal.Signals(signum).name}; the output folder holds the previous or the "
          "new output, never a mix",
          file=sys.stderr)
    return 128 + signum


def _run() -> int:
    from gpucluster.config import load_config
    from gpucluster.pipeline import build_plans

    try:
        clusters, fleet = load_config()
        plans = build_plans(clusters)
    except GpuclusterError as err:
        print(err.render(), file=sys.stderr)
        return EXIT_INVALID_INPUT
    findings_out = sys.stdout if _under_cdktf_cli() else sys.stderr
    for plan in plans:
        for finding in plan.findings:
            print(finding.render(), file=findings_out)
    findings_out.flush()

    outdir = Path(os.environ.get("CDKTF_OUTDIR") or DEFAULT_OUTDIR)
    previous = _stack_dirs(outdir)
    try:
        import stacks  # imports cdktf (or cdktn: GPUCLUSTER_CDK) and, for cluster stacks, azurerm only now

        written = stacks.synth(plans, outdir, fleet=fleet)
    except GpuclusterError as err:
        print(err.render(), file=sys.stderr)
        return EXIT_INVALID_INPUT
    if os.environ.get("CDKTF_CONTINUE_SYNTH_ON_ERROR_ANNOTATIONS") is not None:
        # Under the cdktf CLI: it deletes stacks/<name> folders that existed before the run and
        # are not in the new manifest, with a plain rmSync that fails on a missing folder. Our
        # swap already dropped them; leave empty placeholders for the CLI to delete.
        for name in sorted(previous - set(written)):
            (outdir / "stacks" / name).mkdir(parents=True, exist_ok=True)
    return 0


def _under_cdktf_cli() -> bool:
    """True when the cdktf CLI runs the app (it sets ``CDKTF_CONTEXT_JSON``).

    cdktf-cli 0.21 prints the app's stdout as it comes, but logs every stderr chunk as an error
    (``[ERROR] default - ...``) and repeats the whole stderr in its failure report. Warning and info
    findings of a successful synth therefore go to stdout there; errors stay on stderr.
    """
    return "CDKTF_CONTEXT_JSON" in os.environ


def _private_tmpdir() -> None:
    """Point ``TMPDIR`` (Python and the jsii Node.js kernel) at a fresh folder removed at exit.

    Registered before jsii starts its kernel, so (atexit runs last-in first-out) the folder is
    removed after jsii stopped the kernel.
    """
    private = tempfile.mkdtemp(prefix="gpucluster-synth-")
    os.environ["TMPDIR"] = tempfile.tempdir = private
    atexit.register(shutil.rmtree, private, True)


if __name__ == "__main__":
    _private_tmpdir()
    sys.exit(main(sys.argv[1:]))

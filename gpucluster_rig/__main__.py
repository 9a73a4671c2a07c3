"""``python -m gpucluster_rig`` (and ``gpucluster rehearse``, which runs it): build the rig, rehearse.

    python -m gpucluster_rig build
    python -m gpucluster_rig build-helm4
    python -m gpucluster_rig compare-aicr [--bundle DIR] [--charts DIR] [--crds DIR] [--delay S]
                                          [--work DIR] [--binaries DIR] [--no-isolate] [-- DEPLOY_ARGS]
    python -m gpucluster_rig rehearse [--config FILE] [--cluster NAME] [--keep] [--binaries DIR]
                                      [--charts DIR] [--crds DIR] [--delay S] [--format text|json]
                                      [--work DIR] [--no-isolate]

Exit codes: 0 every cluster rehearsed and passed; 1 a rehearsal failed (the report says where);
2 bad input or a rig that cannot start (one ``error[…]`` line).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

from gpucluster.cli import EXIT_INTERNAL, EXIT_INTERRUPTED, stand_in_delay
from gpucluster.errors import format_line
from gpucluster_rig import build, rehearse


class _Parser(argparse.ArgumentParser):
    """Errors are one ``error[usage]`` line, exit 2, as gpucluster's own commands print them."""

    def error(self, message: str) -> NoReturn:
        print(
            format_line(
                "error",
                "usage",
                f"{message} (usage: {' '.join(self.format_usage().split()[1:])})",
                fix=f"run '{self.prog} --help' for the arguments it takes",
            ),
            file=sys.stderr,
        )
        raise SystemExit(2)


def _delay(text: str) -> float:
    return float(stand_in_delay(text))


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m gpucluster_rig",
        description=(
            "Apply a cluster file's runtime stacks to a simulated cluster shaped like its pools (a real "
            "Kubernetes control plane built from source, KWOK nodes, on loopback only), run every gate as its "
            "own ServiceAccount, destroy, and report. docs/rehearse.md."
        ),
    )
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "build", help="build (or find in the cache) the rig's programs and print their folder"
    )
    sub.add_parser(
        "build-helm4",
        help="build (or find in the cache) the Helm 4 CLI that runs AICR's deploy.sh; print its path",
    )
    c = sub.add_parser(
        "compare-aicr",
        help="AICR's deploy.sh (its bundle, chart URLs on loopback, Helm 4) and gpucluster's stack from "
        "the bundle's RecipeResult, each on a fresh rig; prints JSON",
    )
    c.add_argument("--bundle", type=Path, required=True, help="the AICR bundle folder (deploy.sh)")
    c.add_argument("--binaries", type=Path, help="the rig's programs folder (no build)")
    c.add_argument("--charts", type=Path, help="a folder of unpacked charts to serve")
    c.add_argument("--crds", type=Path, help="a folder of operator CRDs (the IPPool CRD)")
    c.add_argument(
        "--delay", type=_delay, default=3.0, help="stand-ins' delay in seconds (default 3)"
    )
    c.add_argument("--work", type=Path, help="work folder (default: a new temporary folder, kept)")
    c.add_argument(
        "--no-isolate", action="store_true", help="do not run in a private network namespace"
    )
    c.add_argument("deploy_args", nargs="*", help="arguments passed to deploy.sh (after --)")
    r = sub.add_parser("rehearse", help="rehearse the runtime stacks")
    r.add_argument(
        "--config",
        type=Path,
        help="cluster file (default: ./gpucluster.yaml, else the built-in example)",
    )
    r.add_argument("--cluster", help="rehearse only this cluster")
    r.add_argument(
        "--keep",
        action="store_true",
        help="leave the cluster up (no destroy); print its kubeconfig and how to stop it",
    )
    r.add_argument(
        "--binaries",
        type=Path,
        help=f"a folder with {', '.join(build.PROGRAMS)} and stages.yaml (no build)",
    )
    r.add_argument(
        "--charts",
        type=Path,
        help="a folder of unpacked charts to serve; required when a chart of the stack owns CRDs, as in every default stack (without it every chart is an empty stub)",
    )
    r.add_argument(
        "--crds", type=Path, help="a folder of operator CRDs the stand-ins create (the IPPool CRD)"
    )
    r.add_argument(
        "--delay",
        type=_delay,
        default=3.0,
        help="seconds before a stand-in reports ready (default 3)",
    )
    r.add_argument("--format", choices=("text", "json"), default="text")
    r.add_argument(
        "--work",
        type=Path,
        help="work folder (default: a new temporary folder, removed after a rehearsal that passed unless --keep)",
    )
    r.add_argument(
        "--no-isolate", action="store_true", help="do not run in a private network namespace"
    )
    return p


_NO_ISOLATE_FIX = (
    "run it where `unshare --net` works (as root with CAP_SYS_ADMIN, or where unprivileged user "
    "namespaces are allowed), or pass --no-isolate (then nothing keeps the rig's API server on "
    "loopback)"
)


def _check_isolation(wrapped: list[str] | None) -> None:
    """Refuse to go on when the private network namespace cannot be made: unshare missing, or
    ``unshare --net -- true`` refused (a container without CAP_SYS_ADMIN, user namespaces off).
    One ``error[rig.isolate]`` line (:class:`~gpucluster_rig.build.RigError`) instead of
    unshare's own line and exit 1, or a rehearsal on the host's network."""
    import subprocess

    if wrapped is None:
        raise build.RigError(
            "isolate",
            "unshare (util-linux) is not on PATH: the rehearsal cannot run in a private network "
            "namespace with only loopback",
            "install util-linux (apt-get install util-linux), or pass --no-isolate (then nothing "
            "keeps the rig's API server on loopback)",
        )
    probe = subprocess.run(
        [*wrapped[: wrapped.index("--") + 1], "true"], capture_output=True, text=True, timeout=60
    )
    if probe.returncode != 0:
        said = [ln for ln in probe.stderr.splitlines() if ln.strip()]
        raise build.RigError(
            "isolate",
            "cannot make the rehearsal's private network namespace: "
            + (said[-1] if said else f"unshare exited {probe.returncode}"),
            _NO_ISOLATE_FIX,
        )


def _check_work(work: Path | None) -> None:
    """Refuse a ``--work`` folder that cannot be created or written (below a file, no write
    permission): one ``error[rig.input] key=--work`` line before anything starts."""
    from gpucluster.errors import GpuclusterError
    from gpucluster.outfolder import unwritable_reason

    why = unwritable_reason(work) if work is not None else ""
    if why:
        raise GpuclusterError(
            f"the work folder {work} cannot be created or written: {why}",
            id="rig.input",
            key="--work",
            fix="name a folder you can write (created when missing), or leave --work out for a temporary one",
        )


def _check_bundle(bundle: Path) -> None:
    """Refuse a ``compare-aicr --bundle`` that is not an AICR bundle folder (its ``deploy.sh``,
    the RecipeResult beside the folder): one ``error[rig.input] key=--bundle`` line before the
    rig's programs are built or found."""
    from gpucluster.errors import GpuclusterError
    from gpucluster_rig.aicr import RECIPE

    missing = [p for p in (bundle / "deploy.sh", bundle.parent / RECIPE) if not p.is_file()]
    if missing:
        raise GpuclusterError(
            f"{bundle} is not an AICR bundle folder: {', '.join(str(p) for p in missing)} "
            f"{'is' if len(missing) == 1 else 'are'} missing",
            id="rig.input",
            key="--bundle",
            fix=f"name the bundle folder aicr bundle wrote (deploy.sh inside, {RECIPE} beside it)",
        )


def _drop(work: Path | None, args: argparse.Namespace) -> None:
    """Remove the temporary work folder of a rehearsal that could not start (nothing half-written)."""
    if work is not None and args.work is None:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Run ``python -m gpucluster_rig`` with ``argv`` (default ``sys.argv[1:]``); its exit code
    (0, 1 a rehearsal that failed, 2 bad input or a rig error, 130 interrupted, 70 internal).

    Called in-process (tests do), it leaves the process as it found it: the SIGINT/SIGTERM
    handlers it installs while the rig runs are put back, and it never sets the environment.
    Outside a private network namespace and without ``--no-isolate``, ``rehearse`` and
    ``compare-aicr`` replace the calling process (``os.execv``) with themselves under
    ``unshare --net``: in-process callers pass ``--no-isolate`` or run it in such a namespace."""
    saved: dict[int, Any] = {}
    del _SIGNALLED[:]
    try:
        return _main(argv, saved)
    finally:
        for signum, handler in saved.items():
            if handler is not None:  # None: a handler not installed from Python, left as it is
                signal.signal(signum, handler)


def _main(argv: list[str] | None, saved: dict[int, Any]) -> int:
    """:func:`main`; the handlers :func:`_stop_on_signals` replaced go into ``saved``."""
    args = _parser().parse_args(argv)
    work: Path | None = None
    try:
        if args.command == "build":
            print(build.binaries(log=lambda line: print(line, file=sys.stderr)))
            return 0
        if args.command == "build-helm4":
            print(build.helm4(log=lambda line: print(line, file=sys.stderr)))
            return 0
        if not args.no_isolate and not rehearse.in_private_network():
            wrapped = rehearse.isolate_argv(
                [
                    sys.executable,
                    "-m",
                    "gpucluster_rig",
                    *(argv if argv is not None else sys.argv[1:]),
                ]
            )
            _check_isolation(wrapped)
            assert wrapped is not None
            os.execv(wrapped[0], wrapped)
        if args.command == "rehearse":  # bad input is refused before the rig is built
            rehearse.check_input(
                config=args.config, cluster_name=args.cluster, charts=args.charts, crds=args.crds
            )
        else:
            _check_bundle(args.bundle)
        _check_work(args.work)
        saved.update(_stop_on_signals())
        binaries = build.binaries(args.binaries, log=lambda line: print(line, file=sys.stderr))
        if args.command == "compare-aicr":
            from gpucluster_rig import aicr

            helm4 = build.helm4(log=lambda line: print(line, file=sys.stderr))
            work = args.work or Path(tempfile.mkdtemp(prefix="gpucluster-aicr-"))
            result = aicr.compare(
                args.bundle,
                work,
                binaries,
                helm4,
                charts=args.charts,
                crds=args.crds,
                delay=args.delay,
                deploy_args=tuple(args.deploy_args),
            )
            result["work"] = str(work)
            print(json.dumps(result, indent=1, sort_keys=True))
            return 0
        work = args.work or Path(tempfile.mkdtemp(prefix="gpucluster-rehearse-"))
        reports = rehearse.run(
            config=args.config,
            cluster_name=args.cluster,
            folder=work,
            binaries=binaries,
            charts=args.charts,
            crds=args.crds,
            delay=args.delay,
            keep=args.keep,
        )
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the rig is stopped by now (finally blocks)
        _drop(work, args)
        logs = f"; its folder {work} keeps the logs" if work is not None and work.exists() else ""
        print(
            build.RigError(
                "interrupted",
                f"stopped by {_SIGNALLED[0] if _SIGNALLED else 'SIGINT'} before the rehearsal ended: "
                f"the rig's processes were stopped{logs}",
                "run gpucluster rehearse again",
            ).line,
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except build.RigError as err:
        _drop(work, args)
        print(err.line, file=sys.stderr)
        return 2
    except Exception as err:  # a gpucluster input error carries its own line
        from gpucluster.errors import GpuclusterError

        if isinstance(err, GpuclusterError):
            _drop(work, args)
            print(err.render(), file=sys.stderr)
            return 2
        return _internal(err, work)
    passed = bool(reports) and all(r["ok"] for r in reports)
    kept: str | None = str(work)
    if args.work is None and not args.keep and passed:  # a failed rehearsal keeps its logs
        shutil.rmtree(work, ignore_errors=True)
        kept = None
    if args.format == "json":
        print(json.dumps({"clusters": reports, "work": kept}, indent=1, sort_keys=True))
    else:
        for report in reports:
            print(rehearse.render_text(report))
            if args.keep:
                print(f"  kubeconfig: {report['kubeconfig']}\n  stop: {report['stop']}")
        if kept and not passed:
            print(f"  logs and reports kept in {kept}")
    return 0 if passed else 1


_SIGNALLED: list[str] = []


def _interrupted(signum: int, frame: object) -> None:
    """The first SIGINT/SIGTERM: ignore further ones (the rig is being stopped: a second Ctrl-C
    must not cut that short) and unwind with :class:`KeyboardInterrupt`, so every ``finally``
    stops what it started."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _SIGNALLED.append(signal.Signals(signum).name)
    raise KeyboardInterrupt


def _stop_on_signals() -> dict[int, Any]:
    """SIGINT and SIGTERM (a CI runner's timeout) unwind as Ctrl-C does (:func:`_interrupted`);
    kwokctl starts the control plane in sessions of its own, so without this a SIGTERM left it
    running. Returns the handlers it replaced (:func:`main` puts them back)."""
    return {s: signal.signal(s, _interrupted) for s in (signal.SIGINT, signal.SIGTERM)}


def _internal(err: Exception, work: Path | None) -> int:
    """One ``error[rig.internal]`` line for an unexpected exception, naming the folder that keeps
    the logs (the traceback too with ``GPUCLUSTER_DEBUG=1``); returns :data:`gpucluster.cli.EXIT_INTERNAL`."""
    if os.environ.get("GPUCLUSTER_DEBUG") == "1":
        import traceback

        traceback.print_exception(err, file=sys.stderr)
    kept = f"; logs and reports kept in {work}" if work is not None and work.exists() else ""
    print(
        f"error[rig.internal]: unexpected {type(err).__name__}: {err}{kept} fix: this is a gpucluster "
        "bug: rerun with GPUCLUSTER_DEBUG=1 and report the traceback with the command, its cluster file "
        "and the kept folder",
        file=sys.stderr,
    )
    return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())

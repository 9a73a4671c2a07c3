"""The ``gpucluster snapshot`` and ``gpucluster validate`` commands (argument handling and output).

``gpucluster.cli`` builds the arguments and calls :func:`snapshot_command` / :func:`validate_command`;
every input error is a :class:`~gpucluster.errors.GpuclusterError` (one line, exit 2).
"""

from __future__ import annotations

import argparse
import os
import stat as stat_mod
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from gpucluster.errors import GpuclusterError, Problem

__all__ = ["snapshot_command", "validate_command", "upgrade_check_live_command", "plan_for"]


def plan_for(config: str | None, clusters: list[str]):
    """The plan of the one cluster ``--cluster`` names in ``config`` (as ``gpucluster plan`` reads it)."""
    from gpucluster.inputs.config import load_config
    from gpucluster.live.validate import select_plan
    from gpucluster.pipeline import build_plans

    loaded, _fleet = load_config(config)
    if clusters:
        wanted = [c for c in loaded if c.name in clusters]
        loaded = wanted or loaded  # an unknown name is refused by select_plan with the known names
    return select_plan(build_plans(loaded), clusters)


SYSTEM_FOLDERS = ("/dev", "/proc", "/sys")
"""Folders an output never creates or replaces a file in (a device or pipe there is written
through, :func:`_check_target`)."""


@dataclass(frozen=True)
class Target:
    """Where an output goes: ``path`` as given; ``write_to`` the file that receives the bytes;
    ``through``: written straight through (a pipe or character device) instead of a temporary
    file renamed over ``write_to``."""

    path: str
    write_to: Path
    through: bool


def _refuse(path: str, key: str, message: str, fix: str) -> GpuclusterError:
    return GpuclusterError(
        f"cannot write '{path}': {message}", key=key, fix=fix, id="validate.input"
    )


def _in_system_folder(path: str) -> bool:
    absolute = os.path.abspath(path)
    return any(absolute == d or absolute.startswith(d + os.sep) for d in SYSTEM_FOLDERS)


def _link_chain(path: str) -> list[str]:
    """``path`` and every link it leads through (absolute, at most 40 hops as the kernel's
    MAXSYMLINKS)."""
    chain = [os.path.abspath(path)]
    for _ in range(40):
        here = chain[-1]
        if not os.path.islink(here):
            break
        chain.append(os.path.abspath(os.path.join(os.path.dirname(here), os.readlink(here))))
    return chain


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.realpath(a) == os.path.realpath(b)


def _check_target(path: str, *, key: str, inputs: Sequence[tuple[str, str | None]] = ()) -> Target:
    """Where ``path`` (an output flag's value) is written:

    * an existing pipe or character device (``/dev/stdout`` piped on, ``/dev/null``; through links
      too): straight through, nothing renamed;
    * a link to a regular or new file: that file, through a temporary file renamed over it (the
      link stays a link);
    * else a regular or new file, the same way.

    Raises:
        GpuclusterError: (``error[validate.input]`` naming ``key``) the path is one of ``inputs``
            (``(flag, path)`` pairs: the same file as given, through a link or a hard link); it
            exists and is neither a regular file, a pipe nor a character device; it would create
            or replace a file in /dev, /proc or /sys (also through a link: ``/dev/stdout``
            redirected to a file is refused, give the file); its folder does not exist; its name
            is too long or its links loop.
    """
    fix = "name a regular file in an existing folder, or a pipe or character device"
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except (OSError, ValueError) as exc:
        raise _refuse(path, key, getattr(exc, "strerror", None) or str(exc), fix) from None
    for flag, other in inputs:
        if other and _same_file(path, other):
            raise _refuse(
                path,
                key,
                f"it is the input {flag} of this run, which would be overwritten",
                f"write {key} to another file",
            )
    if info is not None and (stat_mod.S_ISFIFO(info.st_mode) or stat_mod.S_ISCHR(info.st_mode)):
        return Target(path, Path(path), True)
    if info is not None and not stat_mod.S_ISREG(info.st_mode):
        raise _refuse(
            path, key, "it exists and is not a regular file, a pipe or a character device", fix
        )
    chain = _link_chain(path)
    real = Path(os.path.realpath(path))
    if any(_in_system_folder(p) for p in [*chain, str(real)]):
        raise _refuse(
            path,
            key,
            "a file in /dev, /proc or /sys is never created or replaced (only a pipe or character "
            "device there is written)",
            "name the regular file itself (for /dev/stdout redirected to a file: that file)",
        )
    if not real.parent.is_dir():
        raise _refuse(
            path, key, f"folder '{real.parent}' does not exist", "create the folder first"
        )
    return Target(path, real, False)


def _write_atomic(
    path: str, text: str, *, key: str, inputs: Sequence[tuple[str, str | None]] = ()
) -> None:
    """Write ``text`` (UTF-8) to ``path`` as :func:`_check_target` says: straight through to a
    pipe or character device, else through a temporary file in the target's folder renamed over
    it (never half-written; a link stays a link).

    Raises:
        GpuclusterError: see :func:`_check_target`; the write itself fails (permissions, a full
            disk, a name too long): one ``error[validate.input]`` line naming ``key``.
    """
    target = _check_target(path, key=key, inputs=inputs)
    data = text.encode("utf-8")
    tmp: str | None = None
    try:
        if target.through:
            flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
            with os.fdopen(os.open(target.write_to, flags), "wb") as fh:
                fh.write(data)
            return
        fd, tmp = tempfile.mkstemp(prefix=".gpucluster-", dir=target.write_to.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target.write_to)
        tmp = None
    except OSError as exc:
        raise _refuse(
            path,
            key,
            exc.strerror or type(exc).__name__,
            "name a file this user may write, in a folder with room for it",
        ) from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _timeout(args: argparse.Namespace) -> int:
    """``--timeout`` in seconds (a duration as ``--wait`` takes it)."""
    from gpucluster.live.validate import parse_duration

    return parse_duration(
        args.timeout,
        key="--timeout",
        fix="give the total time one reading of the cluster may take (default 60s)",
    )


def _warn_once(err: TextIO):
    """A ``warn`` for :func:`~gpucluster.live.snapshot.read_live` writing each distinct line once
    to ``err`` (``--wait`` reads the cluster again and again)."""
    seen: set[str] = set()

    def warn(line: str) -> None:
        if line not in seen:
            seen.add(line)
            err.write(line + "\n")
            err.flush()

    return warn


def snapshot_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    import dataclasses

    from gpucluster.live.checks import read_plan
    from gpucluster.live.snapshot import (
        EVERY_NAMESPACE_KINDS,
        dump_snapshot,
        read_live,
        snapshot_document,
    )

    timeout = _timeout(args)
    inputs = [("--config", args.config), ("--kubeconfig", args.kubeconfig)]
    if args.out:
        _check_target(args.out, key="--out", inputs=inputs)  # before the cluster is read
    plan = plan_for(args.config, args.cluster)
    what = dataclasses.replace(read_plan(plan), cluster_wide=EVERY_NAMESPACE_KINDS)
    snap = read_live(args.kubeconfig, args.context, what, timeout=timeout, warn=_warn_once(err))
    text = dump_snapshot(
        snapshot_document(
            snap.items, every_namespace=snap.every_namespace, cluster=plan.cluster.name
        )
    )
    if args.out:
        _write_atomic(args.out, text, key="--out", inputs=inputs)
    else:
        out.write(text)


def validate_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from gpucluster.live import validate as validate_mod
    from gpucluster.live.checks import read_plan
    from gpucluster.live.snapshot import load_snapshot_file, read_live

    if (args.snapshot is None) == (args.kubeconfig is None):
        raise GpuclusterError(
            "give exactly one of --kubeconfig (a live cluster) and --snapshot (a snapshot file)",
            key="--snapshot" if args.snapshot else "--kubeconfig",
            fix="validate a live cluster with --kubeconfig F [--context C], or a file with --snapshot FILE",
            id="validate.input",
        )
    if args.snapshot is not None and (args.wait or args.context):
        raise GpuclusterError(
            "--wait and --context need a live cluster (--kubeconfig); a snapshot does not change",
            key="--wait" if args.wait else "--context",
            fix="drop it, or validate the live cluster",
            id="validate.input",
        )
    wait = validate_mod.parse_duration(args.wait) if args.wait else None
    timeout = _timeout(args)
    inputs = [
        ("--snapshot", args.snapshot),
        ("--config", args.config),
        ("--kubeconfig", args.kubeconfig),
    ]
    outputs = {"--junit": inputs, "--attestation": [*inputs, ("--junit", args.junit)]}
    for key, path in (("--junit", args.junit), ("--attestation", args.attestation)):
        if path:
            _check_target(path, key=key, inputs=outputs[key])  # before the cluster is read
    plan = plan_for(args.config, args.cluster)
    if args.snapshot is not None:
        snapshot = load_snapshot_file(args.snapshot)
        if snapshot.planned_cluster and snapshot.planned_cluster != plan.cluster.name:
            err.write(
                Problem(
                    message=f"the snapshot was read for cluster '{snapshot.planned_cluster}' "
                    f"(gpucluster snapshot), and is validated against the plan of cluster "
                    f"'{plan.cluster.name}': a check may fail or pass for the wrong cluster",
                    file=args.snapshot,
                    cluster=plan.cluster.name,
                    key="metadata.plannedCluster",
                    id="validate.cluster-name",
                    fix=f"validate it with --cluster {snapshot.planned_cluster} (and the --config "
                    "that names it); if the cluster was renamed, ignore this warning",
                ).render("warning")
                + "\n"
            )
        report = validate_mod.validate(plan, snapshot)
    else:
        what = read_plan(plan)
        warn = _warn_once(err)

        def read():
            return read_live(args.kubeconfig, args.context, what, timeout=timeout, warn=warn)

        report = (
            validate_mod.validate_until(plan, read, wait_seconds=wait)
            if wait
            else validate_mod.validate(plan, read())
        )
    if args.junit:
        _write_atomic(
            args.junit, validate_mod.render_junit(report), key="--junit", inputs=outputs["--junit"]
        )
    if args.attestation:
        _write_atomic(
            args.attestation,
            validate_mod.attestation(report, snapshot_file=args.snapshot),
            key="--attestation",
            inputs=outputs["--attestation"],
        )
    render = {
        "json": validate_mod.render_json,
        "ctrf": validate_mod.render_ctrf,
    }.get(args.format, validate_mod.render_text)
    out.write(render(report))
    return report.exit_code


def upgrade_check_live_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``upgrade-check --from OLD --to NEW (--snapshot FILE | --kubeconfig F [--context C])``:
    the file comparison judged on the cluster's state (:func:`gpucluster.live.upgrade_live.assess`).
    The live state is read with :func:`gpucluster.live.snapshot.read_live`, as ``validate``
    reads it, from the namespaces of both sides' plans plus every namespace's Pods and
    ResourceClaims, within one ``--timeout`` deadline (:func:`_timeout`, as ``validate``; its
    warnings on ``err``). Returns the exit code of the verdict, as the file check does
    (:data:`gpucluster.lint.upgrade_check.EXIT_CODES`: 0 safe, 3 manual, 4 unknown).

    Raises:
        GpuclusterError: not exactly one of ``--snapshot`` / ``--kubeconfig``, ``--context``
            without ``--kubeconfig``, bad input on either side, an unreadable snapshot or cluster.
    """
    from gpucluster.lint import upgrade_check
    from gpucluster.live import evidence, upgrade_live
    from gpucluster.live.checks import read_plan
    from gpucluster.live.snapshot import (
        EVERY_NAMESPACE_KINDS,
        ReadPlan,
        load_snapshot_file,
        read_live,
    )

    if (args.snapshot is None) == (args.kubeconfig is None):
        raise GpuclusterError(
            "give exactly one of --kubeconfig (a live cluster) and --snapshot (a snapshot file)",
            key="--snapshot" if args.snapshot else "--kubeconfig",
            fix="judge the change on a live cluster with --kubeconfig F [--context C], or on a file with --snapshot FILE",
            id="validate.input",
        )
    timeout = _timeout(args)
    inputs = [
        ("--snapshot", args.snapshot),
        ("--from", args.old),
        ("--to", args.new),
        ("--kubeconfig", args.kubeconfig),
    ]
    if args.attestation:
        _check_target(args.attestation, key="--attestation", inputs=inputs)
    if args.format == "ctrf":
        evidence.now()  # a bad SOURCE_DATE_EPOCH is refused before the cluster is read
    if args.snapshot is not None and args.context:
        raise GpuclusterError(
            "--context needs a live cluster (--kubeconfig)",
            key="--context",
            fix="drop it, or give --kubeconfig instead of --snapshot",
            id="validate.input",
        )
    if args.snapshot is not None:
        snap = load_snapshot_file(
            args.snapshot
        )  # bad input is refused before the files are resolved
    report, old, new = upgrade_check.run_sides(args.old, args.new)
    if len(old.plans) != 1 or len(new.plans) != 1:
        raise GpuclusterError(
            "a cluster's state judges one cluster, and the files hold several",
            key="--snapshot" if args.snapshot else "--kubeconfig",
            allowed=", ".join(sorted({p.cluster.name for p in old.plans + new.plans})),
            fix="compare files of one cluster each",
            id="validate.input",
        )
    if args.kubeconfig is not None:
        reads = [read_plan(old.plans[0]), read_plan(new.plans[0])]
        what = ReadPlan(
            namespaces=tuple(sorted({ns for r in reads for ns in r.namespaces})),
            custom=tuple(sorted({k for r in reads for k in r.custom})),
            cluster_wide=EVERY_NAMESPACE_KINDS,
        )
        snap = read_live(args.kubeconfig, args.context, what, timeout=timeout, warn=_warn_once(err))
    live = upgrade_live.assess(report, old.plans[0], new.plans[0], snap)
    if args.attestation:
        _write_atomic(
            args.attestation,
            upgrade_live.attestation(live, old.plans[0], new.plans[0], snapshot_file=args.snapshot),
            key="--attestation",
            inputs=inputs,
        )
    if args.format == "ctrf":
        out.write(upgrade_live.render_ctrf(live, time=evidence.now()))
    elif args.format == "json":
        out.write(upgrade_live.render_json(live))
    else:
        out.write(upgrade_live.render_text(live))
    return live.exit_code

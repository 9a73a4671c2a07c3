"""The ``gpucluster snapshot`` and ``gpucluster validate`` commands (argument handling and output).

``gpucluster.cli`` builds the arguments and calls :func:`snapshot_command` / :func:`validate_command`;
every input error is a :class:`~gpucluster.errors.GpuclusterError` (one line, exit 2).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import TextIO

from gpucluster.errors import GpuclusterError, Problem

__all__ = ["snapshot_command", "validate_command", "upgrade_check_live_command", "plan_for"]


def plan_for(config: str | None, clusters: list[str]):
    """The plan of the one cluster ``--cluster`` names in ``config`` (as ``gpucluster plan`` reads it)."""
    from gpucluster.inputs.config import load_config
    from gpucluster.pipeline import build_plans
    from gpucluster.verify.validate import select_plan

    loaded, _fleet = load_config(config)
    if clusters:
        wanted = [c for c in loaded if c.name in clusters]
        loaded = wanted or loaded  # an unknown name is refused by select_plan with the known names
    return select_plan(build_plans(loaded), clusters)


def _check_target(path: str, *, key: str) -> Path:
    """``path`` as a file to write: not an existing non-file, in an existing folder.

    Raises:
        GpuclusterError: either is not so (``error[validate.input]`` naming ``key``).
    """
    target = Path(path)
    if target.exists() and not target.is_file():
        raise GpuclusterError(
            f"'{path}' exists and is not a regular file",
            key=key,
            fix="name a file to write",
            id="validate.input",
        )
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise GpuclusterError(
            f"folder '{folder}' does not exist",
            key=key,
            fix="create the folder first",
            id="validate.input",
        )
    return target


def _write_atomic(path: str, text: str, *, key: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder (never half-written).

    Raises:
        GpuclusterError: see :func:`_check_target`.
    """
    target = _check_target(path, key=key)
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _timeout(args: argparse.Namespace) -> int:
    """``--timeout`` in seconds (a duration as ``--wait`` takes it)."""
    from gpucluster.verify.validate import parse_duration

    return parse_duration(
        args.timeout,
        key="--timeout",
        fix="give the total time one reading of the cluster may take (default 60s)",
    )


def _warn_once(err: TextIO):
    """A ``warn`` for :func:`~gpucluster.verify.snapshot.read_live` writing each distinct line once
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

    from gpucluster.verify.checks import read_plan
    from gpucluster.verify.snapshot import (
        EVERY_NAMESPACE_KINDS,
        dump_snapshot,
        read_live,
        snapshot_document,
    )

    timeout = _timeout(args)
    plan = plan_for(args.config, args.cluster)
    what = dataclasses.replace(read_plan(plan), cluster_wide=EVERY_NAMESPACE_KINDS)
    snap = read_live(args.kubeconfig, args.context, what, timeout=timeout, warn=_warn_once(err))
    text = dump_snapshot(
        snapshot_document(
            snap.items, every_namespace=snap.every_namespace, cluster=plan.cluster.name
        )
    )
    if args.out:
        _write_atomic(args.out, text, key="--out")
    else:
        out.write(text)


def validate_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from gpucluster.verify import validate as validate_mod
    from gpucluster.verify.checks import read_plan
    from gpucluster.verify.snapshot import load_snapshot_file, read_live

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
    for key, path in (("--junit", args.junit), ("--attestation", args.attestation)):
        if path:
            _check_target(path, key=key)  # refuse bad paths before the cluster is read
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
        _write_atomic(args.junit, validate_mod.render_junit(report), key="--junit")
    if args.attestation:
        _write_atomic(
            args.attestation,
            validate_mod.attestation(report, snapshot_file=args.snapshot),
            key="--attestation",
        )
    render = {
        "json": validate_mod.render_json,
        "ctrf": validate_mod.render_ctrf,
    }.get(args.format, validate_mod.render_text)
    out.write(render(report))
    return report.exit_code


def upgrade_check_live_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``upgrade-check --from OLD --to NEW (--snapshot FILE | --kubeconfig F [--context C])``:
    the file comparison judged on the cluster's state (:func:`gpucluster.verify.upgrade_live.assess`).
    The live state is read with :func:`gpucluster.verify.snapshot.read_live`, as ``validate``
    reads it, from the namespaces of both sides' plans plus every namespace's Pods and
    ResourceClaims, within one ``--timeout`` deadline (:func:`_timeout`, as ``validate``; its
    warnings on ``err``). Returns the exit code of the verdict, as the file check does
    (:data:`gpucluster.verify.upgrade_check.EXIT_CODES`: 0 safe, 3 manual, 4 unknown).

    Raises:
        GpuclusterError: not exactly one of ``--snapshot`` / ``--kubeconfig``, ``--context``
            without ``--kubeconfig``, bad input on either side, an unreadable snapshot or cluster.
    """
    from gpucluster.verify import evidence, upgrade_check, upgrade_live
    from gpucluster.verify.checks import read_plan
    from gpucluster.verify.snapshot import (
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
    if args.attestation:
        _check_target(args.attestation, key="--attestation")
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
        )
    if args.format == "ctrf":
        out.write(upgrade_live.render_ctrf(live, time=evidence.now()))
    elif args.format == "json":
        out.write(upgrade_live.render_json(live))
    else:
        out.write(upgrade_live.render_text(live))
    return live.exit_code

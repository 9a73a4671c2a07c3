"""Assemble the cdktf App from RuntimePlans and synthesize it atomically."""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from gpucluster_cdk.constructs_lib.cdk import App, validation_errors
from gpucluster_cdk.constructs_lib.helm import STAGING_CONTEXT_KEY
from gpucluster_cdk.constructs_lib.tfstring import unexpected_controls, unexpected_templates
from gpucluster.errors import GpuclusterError, Problem
from gpucluster.model import RuntimePlan
from gpucluster.plugins import platform_for
from gpucluster_cdk.stacks.cluster import ClusterStack
from gpucluster_cdk.stacks.common import cluster_stack_name, runtime_stack_name
from gpucluster_cdk.stacks.outdir import output_error, staged_outdir
from gpucluster_cdk.stacks.runtime import RuntimeStack

if TYPE_CHECKING:
    from gpucluster.fleet import FleetSpec


def provisions_cluster(plan: RuntimePlan) -> bool:
    """True when gpucluster creates the cluster (platform ``provisions_cluster`` and no ``existing``)."""
    platform = platform_for(plan.cluster.criteria.service, file=plan.cluster.source)
    return bool(platform.provisions_cluster) and plan.cluster.existing is None


Progress = Callable[[int, int, str, Sequence[str]], None]
"""``progress(i, n, cluster, stacks)``: cluster ``i`` of ``n`` (from 1) has its stacks built."""


def build_app(plans: Sequence[RuntimePlan], outdir: str | os.PathLike, *, staging_dir: str | os.PathLike,
              fleet: "FleetSpec | None" = None, progress: Progress | None = None) -> App:
    """An App with ``<name>-cluster`` (if provisioned) and ``<name>-runtime`` per plan, plus the
    fleet's stacks when ``fleet`` is given (:func:`gpucluster_cdk.stacks.fleet.add_fleet`: ``<fleet>-fleet``,
    ``<fleet>-after-<group>`` barriers ordering the runtime stacks by update group, ``<fleet>-hub``).

    Args:
        outdir: where ``app.synth()`` writes (an absolute, empty folder).
        staging_dir: folder for local charts until synth copies them into the stacks.
        fleet: the cluster file's validated ``fleet:`` section, or None.
        progress: called once per cluster after its stacks are built (:data:`Progress`).
    """
    app = App(outdir=str(outdir), context={STAGING_CONTEXT_KEY: str(Path(staging_dir).absolute())})
    cluster_stacks: dict[str, ClusterStack] = {}
    runtime_stacks: dict[str, RuntimeStack] = {}
    for index, plan in enumerate(plans, start=1):
        cluster = plan.cluster
        connection = None
        names = []
        if provisions_cluster(plan):
            stack = ClusterStack(app, cluster_stack_name(cluster.name), cluster=cluster, recipe=plan.recipe)
            cluster_stacks[cluster.name] = stack
            connection = stack.connection
            names.append(stack.node.id)
        runtime_stacks[cluster.name] = RuntimeStack(
            app, runtime_stack_name(cluster.name), plan=plan, connection=connection, existing=cluster.existing
        )
        names.append(runtime_stack_name(cluster.name))
        if progress is not None:
            progress(index, len(plans), cluster.name, names)
    if fleet is not None:
        from gpucluster_cdk.stacks.fleet import add_fleet

        add_fleet(app, fleet, plans, cluster_stacks=cluster_stacks, runtime_stacks=runtime_stacks)
    return app


def synth(plans: Sequence[RuntimePlan], outdir: str | os.PathLike = "cdktf.out", *, fleet: "FleetSpec | None" = None,
          warnings: list[Problem] | None = None, progress: Progress | None = None) -> list[str]:
    """Synthesize ``plans`` into ``outdir``, replacing it atomically.

    Everything is built in a fresh sibling folder; ``outdir`` is swapped only after the whole
    App synthesized. Any exception (construct validation error, plugin error) leaves a
    previous ``outdir`` byte-identical. When a release's values hold a literal credential
    (:func:`gpucluster.values.credential_paths`, the ``VALUES-CREDENTIAL`` warning), the output's
    folders are written 0700 and its files 0600.

    Args:
        warnings: receives ``warning[output]`` problems (previous output not removable; see
            :func:`gpucluster_cdk.stacks.outdir.staged_outdir`).
        progress: see :func:`build_app`.

    Returns:
        the stack names written, sorted.

    Raises:
        GpuclusterError: bad input found while building the stacks, or construct validation
            errors (one ``error[construct]`` problem per ``[construct path] message``, naming the
            cluster and, in runtime stacks, the component).
    """
    from gpucluster.values import credential_paths

    private = any(credential_paths(node.values) for plan in plans for node in plan.nodes)  # VALUES-CREDENTIAL
    with tempfile.TemporaryDirectory(prefix="gpucluster-charts-") as staging, \
            staged_outdir(outdir, warnings=warnings, private=private) as staged:
        app = build_app(plans, staged, staging_dir=staging, fleet=fleet, progress=progress)
        try:
            app.synth()
        except RuntimeError as err:
            messages = validation_errors(err)
            if messages is None:
                written_error = _file_system_error(err)
                if written_error is not None:
                    raise output_error(written_error, Path(outdir).absolute(), "writing") from None
                raise
            raise GpuclusterError(problems=[_construct_problem(m, plans) for m in messages]) from None
        written = sorted(p.name for p in (staged / "stacks").iterdir())
        check_no_injection(staged, written, plans)
        return written


def check_no_injection(outdir: Path, stack_names: Sequence[str], plans: Sequence[RuntimePlan]) -> None:
    """Refuse output in which Terraform would evaluate a template sequence gpucluster did not write.

    Every literal string reaches Terraform through :func:`gpucluster_cdk.constructs_lib.tfstring.literal`; this is
    the check that none was missed (a new construct argument, a plugin's own construct).

    Nor may any string but a ``helm_release``'s ``values`` documents hold a control character
    (:func:`constructs_lib.tfstring.unexpected_controls`: a newline in a name, a location, a
    ``set`` name).

    Raises:
        GpuclusterError: ``error[injection]`` per stack with an unescaped ``${``/``%{`` sequence
            or a control character (path inside ``cdk.tf.json`` and the sequence or string,
            cut), before the output is swapped in.
    """
    problems: list[Problem] = []
    for name in stack_names:
        document = json.loads((outdir / "stacks" / name / "cdk.tf.json").read_text(encoding="utf-8"))
        found = unexpected_templates(document)
        cluster = next((p.cluster.name for p in plans if name in (runtime_stack_name(p.cluster.name),
                                                                    cluster_stack_name(p.cluster.name))), None)
        controls = unexpected_controls(document)
        if controls:
            path, text = controls[0]
            problems.append(Problem(
                message=f"stack {name}: {len(controls)} string(s) would reach Terraform with a control character, "
                        f"first at {path}: {text}",
                cluster=cluster, id="injection",
                fix="remove the newline or control character from the value in the cluster file; that it was not "
                    "refused earlier is a gpucluster or plugin bug (a field without its check)"))
        if found:
            path, seq = found[0]
            problems.append(Problem(
                message=f"stack {name}: {len(found)} Terraform template sequence(s) would be evaluated at plan time, "
                        f"first at {path}: {seq!r}",
                cluster=cluster, id="injection",
                fix="a construct passed a string without gpucluster_cdk.constructs_lib.tfstring.literal(); escape it there "
                    "(this is a gpucluster or plugin bug, not your input)"))
    if problems:
        raise GpuclusterError(problems=problems)


_NODE_ERRNO = re.compile(r"\b(ENOSPC|EDQUOT|EACCES|EPERM|EROFS|EMFILE|ENFILE|EIO)\b")


def _file_system_error(err: BaseException) -> OSError | None:
    """The file system error behind a jsii ``RuntimeError`` of ``App.synth`` (Node.js writes the
    output: ``ENOSPC: no space left on device, write``), as an ``OSError``; None for other errors."""
    match = _NODE_ERRNO.search(str(err).split("\n", 1)[0])
    if match is None:
        return None
    code = getattr(errno, match.group(1))
    return OSError(code, os.strerror(code))


def _construct_problem(message: str, plans: Sequence[RuntimePlan]) -> Problem:
    """``[<stack>/<construct>/...] text`` -> a Problem naming the cluster (and the component)."""
    path = message[1 : message.find("]")].split("/")
    for plan in plans:
        if path[0] == runtime_stack_name(plan.cluster.name):
            node = next((n for n in plan.nodes if len(path) > 1 and n.id == path[1]), None)
            return Problem(message=message, cluster=plan.cluster.name, component=node and node.component, id="construct",
                           fix=_CONSTRUCT_FIX)
        if path[0] == cluster_stack_name(plan.cluster.name):
            return Problem(message=message, cluster=plan.cluster.name, id="construct", fix=_CONSTRUCT_FIX)
    return Problem(message=message, id="construct", fix=_CONSTRUCT_FIX)


_CONSTRUCT_FIX = ("change the value the message names in the cluster file (or its overrides); `gpucluster plan` "
                  "shows the resolved releases")

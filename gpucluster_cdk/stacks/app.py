"""Assemble the cdktf App from RuntimePlans and synthesize it into a folder (the cdktf side of
:func:`gpucluster_cdk.stacks.synthesis.synth`, which makes the output folder whole and atomic)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucluster.errors import GpuclusterError, Problem
from gpucluster.model import RuntimePlan
from gpucluster_cdk.constructs_lib.cdk import (
    App,
    TerraformResource,
    TerraformStack,
    validation_errors,
)
from gpucluster_cdk.constructs_lib.helm import STAGING_CONTEXT_KEY
from gpucluster_cdk.stacks.cluster import ClusterStack
from gpucluster_cdk.stacks.common import cluster_stack_name, runtime_stack_name, use_backend
from gpucluster_cdk.stacks.injection import check_no_injection
from gpucluster_cdk.stacks.names import provisions_cluster
from gpucluster_cdk.stacks.outdir import output_error
from gpucluster_cdk.stacks.runtime import RuntimeStack

if TYPE_CHECKING:
    from gpucluster.inputs.fleet import FleetSpec


def build_app(
    plans: Sequence[RuntimePlan],
    outdir: str | os.PathLike,
    *,
    staging_dir: str | os.PathLike,
    fleet: FleetSpec | None = None,
    real: Collection[str] | None = None,
    exports: Mapping[str, Mapping[str, Any]] | None = None,
) -> App:
    """An App with ``<name>-cluster`` (if provisioned) and ``<name>-runtime`` per plan, plus the
    fleet's stacks when ``fleet`` is given (:func:`gpucluster_cdk.stacks.fleet.add_fleet`: ``<fleet>-fleet``,
    ``<fleet>-after-<group>`` barriers ordering the runtime stacks by update group, ``<fleet>-hub``).

    Args:
        outdir: where ``app.synth()`` writes (an absolute, empty folder).
        staging_dir: folder for local charts until synth copies them into the stacks.
        fleet: the cluster file's validated ``fleet:`` section, or None.
        real: names of the clusters whose stacks are built (None: every cluster). A fleet member
            not in it gets stand-ins (:func:`stand_in_stacks`) whose output is not used; other
            clusters are left out (no stack references them).
        exports: cluster name -> what the stand-ins need of its reused stacks
            (:func:`gpucluster_cdk.stacks.fleet.member_exports`); absent: placeholders.
    """
    app = App(outdir=str(outdir), context={STAGING_CONTEXT_KEY: str(Path(staging_dir).absolute())})
    cluster_stacks: dict[str, ClusterStack] = {}
    runtime_stacks: dict[str, RuntimeStack] = {}
    members = fleet.members if fleet is not None else {}
    for plan in plans:
        cluster = plan.cluster
        if real is not None and cluster.name not in real:
            if cluster.name in members:
                stand_in_cluster, runtime_stacks[cluster.name] = stand_in_stacks(
                    app, plan, (exports or {}).get(cluster.name)
                )
                if stand_in_cluster is not None:
                    cluster_stacks[cluster.name] = stand_in_cluster
            continue
        connection = None
        if provisions_cluster(plan):
            stack = ClusterStack(
                app, cluster_stack_name(cluster.name), cluster=cluster, recipe=plan.recipe
            )
            cluster_stacks[cluster.name] = stack
            connection = stack.connection
        runtime_stacks[cluster.name] = RuntimeStack(
            app,
            runtime_stack_name(cluster.name),
            plan=plan,
            connection=connection,
            existing=cluster.existing,
        )
    if fleet is not None:
        from gpucluster_cdk.stacks.fleet import add_fleet

        app.gpucluster_fleet_stacks = sorted(
            add_fleet(
                app, fleet, plans, cluster_stacks=cluster_stacks, runtime_stacks=runtime_stacks
            )
        )
    else:
        app.gpucluster_fleet_stacks = []
    app.gpucluster_cluster_stacks = cluster_stacks
    return app


def stand_in_stacks(
    app: App, plan: RuntimePlan, exports: Mapping[str, Any] | None
) -> tuple[TerraformStack | None, TerraformStack]:
    """Stand-ins for a fleet member whose stacks are not built in this App: stacks of the same names
    and backends holding only what the fleet's stacks reference -- the AKS cluster resource (same type
    and logical id, from ``exports``) and, added by ``add_fleet`` as for a real stack, the runtime's
    ``terraform_data.rollout`` -- so every cross-stack reference of the fleet stacks resolves to the
    same expression, remote state and dependency as with the real stacks. Their own output is thrown away.
    """
    cluster = plan.cluster
    stand_in_cluster = None
    if provisions_cluster(plan):
        stand_in_cluster = TerraformStack(app, cluster_stack_name(cluster.name))
        use_backend(stand_in_cluster, cluster)
        resource_type, logical_id = (exports or {}).get("aks_cluster") or (
            "azurerm_kubernetes_cluster",
            "stand_in",
        )
        resource = TerraformResource(
            stand_in_cluster, "stand-in", terraform_resource_type=resource_type
        )
        resource.override_logical_id(logical_id)
        stand_in_cluster.stand_in_cluster_id = resource.get_string_attribute("id")
    runtime = TerraformStack(app, runtime_stack_name(cluster.name))
    use_backend(runtime, cluster)
    runtime.releases = {}
    return stand_in_cluster, runtime


def synth_app(
    plans: Sequence[RuntimePlan],
    folder: Path,
    *,
    final: Path,
    fleet: FleetSpec | None = None,
    real: Collection[str] | None = None,
    exports: Mapping[str, Mapping[str, Any]] | None = None,
    staging: Path | None = None,
) -> dict[str, Any]:
    """Build (:func:`build_app`) and synthesize an App into ``folder`` (``manifest.json`` and
    ``stacks/``), then check the stacks it built for real (:func:`check_no_injection`).

    Args:
        final: the output folder the user named (for ``error[output]`` messages).
        staging: the folder local charts are staged in (kept; Apps built one after another in a
            process may share it: a chart is staged once per distinct files); None: a temporary
            folder of this App.

    Returns:
        ``{"stacks": names of the real clusters' and the fleet's stacks, "exports": cluster name ->
        :func:`gpucluster_cdk.stacks.fleet.member_exports` of each real fleet member}``.

    Raises:
        GpuclusterError: as :func:`gpucluster_cdk.stacks.synthesis.synth`.
    """
    with contextlib.ExitStack() as stack:
        if staging is None:
            staging = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="gpucluster-charts-"))
            )
        app = build_app(plans, folder, staging_dir=staging, fleet=fleet, real=real, exports=exports)
        exported = {}
        if fleet is not None:
            from gpucluster_cdk.stacks.fleet import member_exports

            exported = {
                name: member_exports(stack)
                for name, stack in app.gpucluster_cluster_stacks.items()
                if (real is None or name in real) and name in fleet.members
            }
        try:
            app.synth()
        except RuntimeError as err:
            messages = validation_errors(err)
            if messages is None:
                written_error = _file_system_error(err)
                if written_error is not None:
                    raise output_error(written_error, final, "writing") from None
                raise
            raise GpuclusterError(
                problems=[_construct_problem(m, plans) for m in messages]
            ) from None
    names = []
    for plan in plans:
        if real is None or plan.cluster.name in real:
            if provisions_cluster(plan):
                names.append(cluster_stack_name(plan.cluster.name))
            names.append(runtime_stack_name(plan.cluster.name))
    names += app.gpucluster_fleet_stacks
    check_no_injection(folder, names, plans)
    return {"stacks": names, "exports": exported}


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
            return Problem(
                message=message,
                cluster=plan.cluster.name,
                component=node.component if node else None,
                id="construct",
                fix=_CONSTRUCT_FIX,
            )
        if path[0] == cluster_stack_name(plan.cluster.name):
            return Problem(
                message=message, cluster=plan.cluster.name, id="construct", fix=_CONSTRUCT_FIX
            )
    return Problem(message=message, id="construct", fix=_CONSTRUCT_FIX)


_CONSTRUCT_FIX = (
    "change the value the message names in the cluster file (or its overrides); `gpucluster plan` "
    "shows the resolved releases"
)

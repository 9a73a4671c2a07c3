"""Hook specifications of the gpucluster plugin SDK (one section per hook: docs/plugins.md).

Implement them with :data:`gpucluster.sdk.hookimpl` in a module registered under the
``gpucluster`` entry-point group::

    [project.entry-points.gpucluster]
    myplatform = "gpucluster_myplatform"

Built-in platforms (AKS, NVKE, OKE) are registered the same way. Every hook receives only
plain data from :mod:`gpucluster.sdk` types, except :func:`gpucluster_cluster_stack`, which
receives a construct scope. Hooks with a ``cluster`` argument are service-scoped: a plugin
that declares platforms is called only for clusters of its own services (the plugin manager
filters on ``cluster.criteria.service``), a plugin declaring none for every cluster. An
exception raised by a hook is reported with the plugin's name and stops synthesis with exit
code 2; a :class:`~gpucluster.sdk.GpuclusterError` is reported as raised.

Error keys: the ``key`` of a :class:`~gpucluster.sdk.GpuclusterError` raised by a hook with a
``cluster`` argument, and of a returned :class:`~gpucluster.sdk.Finding`, is relative to the
cluster document (``pools[1].gpu``, ``settings.rails[0].subnet``, ``kubernetesVersion``). The
core makes it absolute where it receives the error or finding (``clusters[3].pools[1].gpu``,
:func:`gpucluster.model.absolute_key`), in plan and synth alike; never write ``clusters[i].``
yourself. A values path of a finding's ``component`` and a path inside another file named by
``file=`` are printed as given (docs/plugins.md, Error keys).

Read-only arguments: the arguments :data:`READ_ONLY_ARGS` lists -- every argument of every hook
except ``gpucluster_prepare_cluster``'s ``cluster`` (a deep copy to modify and return) and
``gpucluster_cluster_stack``'s ``scope`` (the stack to add resources to) -- are copies of the
core's objects. A hook reads them and returns what it adds (a values patch, findings, manifests,
gates, a connection); an implementation that changes one (sets an attribute, adds, removes or
replaces an item at any depth) is an error naming the plugin, the hook and the argument, checked
after each implementation returns.

Call order between plugins: implementations marked ``@hookimpl(tryfirst=True)`` run first,
``@hookimpl(trylast=True)`` last, otherwise the later-registered plugin first
(``GPUCLUSTER_PLUGINS`` modules register after entry points). *firstresult* hooks stop at the
first non-None result; the others collect every non-None result. Hook wrappers are refused.

Order within one cluster's plan (:func:`gpucluster.pipeline.build_plan`):
``gpucluster_platforms`` -> ``gpucluster_prepare_cluster`` -> ``gpucluster_catalog_dirs`` ->
(recipe, overrides, scheduling) -> ``gpucluster_adjust_values`` (per component) ->
``gpucluster_policy_checks`` -> ``gpucluster_manifests`` -> ``gpucluster_gates`` -> (graph);
at synth only: ``gpucluster_cluster_stack``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # annotations only: this module imports nothing from gpucluster at run time
    from gpucluster.model import (
        ClusterConnection,
        ClusterSpec,
        Component,
        Finding,
        GateSpec,
        Manifest,
        Platform,
        Recipe,
    )

HOOK_ORDER = (
    "gpucluster_platforms",
    "gpucluster_prepare_cluster",
    "gpucluster_catalog_dirs",
    "gpucluster_adjust_values",
    "gpucluster_policy_checks",
    "gpucluster_manifests",
    "gpucluster_gates",
    "gpucluster_cluster_stack",
)
"""The hooks in the order one cluster meets them (the specs below are defined in this order)."""

READ_ONLY_ARGS: dict[str, tuple[str, ...]] = {
    "gpucluster_adjust_values": ("cluster", "recipe", "component"),
    "gpucluster_policy_checks": ("cluster", "recipe", "components"),
    "gpucluster_manifests": ("cluster", "recipe", "components"),
    "gpucluster_gates": ("cluster", "recipe", "components"),
    "gpucluster_cluster_stack": ("cluster", "recipe"),
}
"""Hook -> the arguments its implementations receive as copies and must not change, in signature
order (:func:`gpucluster.plugins.call_hook_attributed` copies and checks them)."""

hookspec = pluggy.HookspecMarker("gpucluster")


@hookspec
def gpucluster_platforms() -> list[Platform] | None:
    """Declare the platforms this plugin serves.

    Called whenever the declared services are needed (each cluster's preparation, criteria
    validation, ``gpucluster detect``/``plugins``, the stacks); keep it cheap and pure.

    firstresult: no (the lists of all plugins are combined).

    Returns:
        list[Platform] | None: one entry per ``service`` value.

    Errors:
        two plugins declaring the same service is an error naming both; a non-Platform or an
        exception is an error naming the plugin.
    """


@hookspec(firstresult=True)
def gpucluster_prepare_cluster(cluster: ClusterSpec) -> ClusterSpec | None:
    """Fill platform defaults into a :class:`ClusterSpec` and validate platform settings.

    Called once per cluster, after the cluster file is validated and the service is known,
    before the recipe is resolved; ``profile`` names/values and top-level ``settings`` keys are
    already checked against ``Platform.profiles``/``Platform.settings``. Use it for default
    pools, region, ``existing`` kubeconfig, and the values of ``cluster.settings``.

    firstresult: yes (the first non-None result wins; later implementations are not called).

    Args:
        cluster (ClusterSpec): parsed input (a deep copy; modify and return it).

    Returns:
        ClusterSpec | None: the prepared spec; everything after this hook sees it.

    Raises:
        GpuclusterError: for invalid platform inputs (name the file, cluster and key; key is
            relative to the cluster document: ``pools[0].vmSize``, the core prints
            ``clusters[<i>].pools[0].vmSize``). Returning anything but a ClusterSpec is an error
            naming the plugin.
    """


@hookspec
def gpucluster_catalog_dirs() -> list[Path] | None:
    """Contribute catalog data (recipes as data; adding a component needs no code).

    Called each time the catalog is loaded; the merged catalog is cached per directory list.

    firstresult: no (directories are appended after the core catalog in call order).

    Returns:
        list[pathlib.Path] | None: existing directories laid out like ``gpucluster/catalog``:
        ``registry.yaml`` (component entries), ``overlays/*.yaml``, ``mixins/*.yaml``,
        ``components/<name>/values*.yaml`` and ``components/<name>/manifests/*.yaml.j2``.
        Overlay, mixin and component names must be unique across all directories; relative
        file references are looked up core first.

    Errors:
        a non-list, a non-path or a missing directory is an error naming the plugin.
    """


@hookspec
def gpucluster_adjust_values(
    cluster: ClusterSpec, recipe: Recipe, component: Component
) -> dict[str, Any] | None:
    """Adjust one component's values after overrides and node scheduling are applied.

    Called once per enabled component, in recipe order, before the policy checks.

    firstresult: no (every plugin's patch is applied, in call order).

    Args:
        cluster (ClusterSpec), recipe (Recipe), component (Component): read-only (copies; changing
        one is an error naming the plugin: return the change as a patch).

    Returns:
        dict | None: a patch deep-merged into the component's values (objects merge, lists
        and scalars replace, ``None`` deletes). Patches apply in hook call order; every
        implementation sees the values before any patch of this component. A non-dict is an
        error naming the plugin and component.
    """


@hookspec
def gpucluster_policy_checks(
    cluster: ClusterSpec, recipe: Recipe, components: Mapping[str, Component]
) -> list[Finding] | None:
    """Check the final effective values; fail closed on known-broken combinations.

    Called once per cluster after the core checks, before anything is rendered.

    firstresult: no (findings of all checks are de-duplicated and sorted, errors first).

    Args:
        cluster (ClusterSpec), recipe (Recipe), components (Mapping[str, Component]): read-only
        (copies; changing one is an error naming the plugin).

    Returns:
        list[Finding] | None: any ``error`` finding stops synthesis before anything is written
        (exit 2); ``warning``/``info`` findings are printed and kept in the plan. ``key``: a
        values path of ``component``, or a cluster-file key relative to the cluster document
        (``kubernetesVersion``, ``settings.numVfs``), which the core makes absolute.
    """


@hookspec
def gpucluster_manifests(
    cluster: ClusterSpec, recipe: Recipe, components: Mapping[str, Component]
) -> list[Manifest] | None:
    """Render extra Kubernetes objects (beyond the catalog's manifest templates).

    Called once per cluster after the policy checks passed, after the catalog templates.

    firstresult: no.

    Args:
        cluster (ClusterSpec), recipe (Recipe), components (Mapping[str, Component]): read-only
        (copies; changing one is an error naming the plugin). ``components``: the enabled
        components with their final values.

    Returns:
        list[Manifest] | None: manifests of components that are not enabled are dropped;
        objects are checked (apiVersion, kind, metadata.name, no install/upgrade Helm hooks).
    """


@hookspec
def gpucluster_gates(
    cluster: ClusterSpec, recipe: Recipe, components: Mapping[str, Component]
) -> list[GateSpec] | None:
    """Declare readiness gates for the enabled components (docs/gates.md).

    Called once per cluster, after the manifests.

    firstresult: no (gate names must be unique across plugins).

    Args:
        cluster (ClusterSpec), recipe (Recipe), components (Mapping[str, Component]): read-only
        (copies; changing one is an error naming the plugin).

    Returns:
        list[GateSpec] | None: gates whose ``component`` is disabled are dropped; invalid
        gates are errors naming the plugin, gate and field.
    """


@hookspec(firstresult=True)
def gpucluster_cluster_stack(
    scope: Any, cluster: ClusterSpec, recipe: Recipe
) -> ClusterConnection | None:
    """Create the cluster resources inside the ``<name>-cluster`` stack.

    Called at synth only, for platforms with ``provisions_cluster=True`` and clusters without
    ``existing:``. This is the one hook that touches cdktf: import cdktf, provider bindings or
    ``gpucluster_cdk.constructs_lib`` *inside* the implementation so loading the plugin stays free of cdktf.

    firstresult: yes.

    Args:
        scope (constructs.Construct): the cluster stack, to add the cluster's resources to.
        cluster (ClusterSpec), recipe (Recipe): read-only (copies; changing one is an error
        naming the plugin).

    Returns:
        ClusterConnection | None: Terraform tokens of the cluster's endpoint and credentials,
        which the runtime stack consumes as cross-stack references, or a kubeconfig path.

    Raises:
        GpuclusterError: invalid input found while building (key relative to the cluster
            document, made absolute by the core as in :func:`gpucluster_prepare_cluster`).
    """

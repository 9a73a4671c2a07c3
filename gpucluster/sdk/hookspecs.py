"""Hook specifications of the gpucluster plugin SDK.

Implement them with :data:`gpucluster.sdk.hookimpl` in a module registered under the
``gpucluster`` entry-point group::

    [project.entry-points.gpucluster]
    myplatform = "gpucluster_myplatform"

Built-in platforms (AKS, NVKE, OKE) are registered the same way. Every hook receives only
plain data from :mod:`gpucluster.sdk` types, except :func:`gpucluster_cluster_stack`, which
receives a construct scope. Hooks that are not about your platform must return ``None``
(check ``cluster.criteria.service``). An exception raised by a hook is reported with the
plugin's name and stops synthesis with exit code 2.
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("gpucluster")


@hookspec
def gpucluster_platforms():
    """Declare the platforms this plugin serves.

    Returns:
        list[Platform]: one entry per ``service`` value. Two plugins declaring the same
        service is an error naming both.
    """


@hookspec
def gpucluster_catalog_dirs():
    """Contribute catalog data (recipes as data; adding a component needs no code).

    Returns:
        list[pathlib.Path]: directories laid out like ``gpucluster/catalog``: ``registry.yaml``
        (component entries), ``overlays/*.yaml``, ``mixins/*.yaml``,
        ``components/<name>/values*.yaml`` and ``components/<name>/manifests/*.yaml.j2``.
        Overlay and component names must be unique across all plugins.
    """


@hookspec(firstresult=True)
def gpucluster_prepare_cluster(cluster):
    """Fill platform defaults into a :class:`ClusterSpec` and validate platform settings.

    Called once per cluster whose ``criteria.service`` the plugin serves (return ``None``
    for others). Use it for default pools, region and platform inputs in ``cluster.settings``.

    Args:
        cluster (ClusterSpec): parsed input (mutable copy).

    Returns:
        ClusterSpec | None: the prepared spec. firstresult: the first non-None wins.

    Raises:
        GpuclusterError: for invalid platform inputs (name the file and key).
    """


@hookspec
def gpucluster_adjust_values(cluster, recipe, component):
    """Adjust one component's values after overrides and node scheduling are applied.

    Args:
        cluster (ClusterSpec), recipe (Recipe), component (Component): read-only.

    Returns:
        dict | None: a patch deep-merged into ``component.values`` (objects merge, lists
        and scalars replace, ``None`` deletes). Patches apply in hook call order.
    """


@hookspec
def gpucluster_manifests(cluster, recipe, components):
    """Render extra Kubernetes objects (beyond the catalog's manifest templates).

    Args:
        cluster (ClusterSpec), recipe (Recipe), components (dict[str, Component]).

    Returns:
        list[Manifest] | None.
    """


@hookspec
def gpucluster_gates(cluster, recipe, components):
    """Declare readiness gates for the enabled components.

    Args:
        cluster (ClusterSpec), recipe (Recipe), components (dict[str, Component]).

    Returns:
        list[GateSpec] | None: gates whose ``component`` is disabled are dropped.
    """


@hookspec
def gpucluster_policy_checks(cluster, recipe, components):
    """Check the final effective values; fail closed on known-broken combinations.

    Args:
        cluster (ClusterSpec), recipe (Recipe), components (dict[str, Component]).

    Returns:
        list[Finding] | None: any ``error`` finding stops synthesis before anything is written.
    """


@hookspec(firstresult=True)
def gpucluster_cluster_stack(scope, cluster, recipe):
    """Create the cluster resources inside the ``<name>-cluster`` stack.

    Only called for platforms with ``provisions_cluster=True``. This is the one hook that
    touches cdktf: import ``constructs_lib`` *inside* the implementation so the domain core
    stays free of cdktf.

    Args:
        scope (constructs.Construct): the cluster stack.
        cluster (ClusterSpec), recipe (Recipe).

    Returns:
        ClusterConnection | None: Terraform tokens of the cluster's endpoint and credentials,
        which the runtime stack consumes as cross-stack references. firstresult.
    """

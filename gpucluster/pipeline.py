"""The pure-Python pipeline: ClusterSpec -> RuntimePlan (no cdktf import).

``build_plans`` is what ``main.py`` and the CLI call. It resolves every cluster fully (recipe,
values, overrides, scheduling, plugin adjustments, policy, manifests, gates, graph) before
anything is written; any error-severity finding or invalid input raises
:class:`~gpucluster.errors.GpuclusterError` carrying all problems.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from gpucluster.charts import crds as crds_mod
from gpucluster.charts import gates as gates_mod
from gpucluster.charts import graph
from gpucluster.charts import manifests as manifests_mod
from gpucluster.charts import mirrors as mirrors_mod
from gpucluster.charts import teardown as teardown_mod
from gpucluster.errors import GpuclusterError, PluginError, Problem, allowed_list
from gpucluster.inputs import backends as backends_mod
from gpucluster.model import (
    CORE_SETTING_KEYS,
    VALIDATE_SETTING,
    ClusterSpec,
    Component,
    Finding,
    GateSpec,
    LocalChart,
    PlanNode,
    Platform,
    Recipe,
    RuntimePlan,
    absolute_key,
    absolute_keys,
)
from gpucluster.plugins import call_hook_attributed, get_plugin_manager, platform_for
from gpucluster.recipes import catalog as catalog_mod
from gpucluster.recipes import chart_versions as chart_versions_mod
from gpucluster.recipes import driver_upgrade as driver_upgrade_mod
from gpucluster.recipes import layering
from gpucluster.recipes import overrides as overrides_mod
from gpucluster.recipes import policy as policy_mod
from gpucluster.recipes import recipe as recipe_mod
from gpucluster.recipes import scheduling as scheduling_mod
from gpucluster.values import deep_merge

if TYPE_CHECKING:  # annotations only
    from gpucluster.recipes.recipe_result import FileIntent


def check_declared_inputs(cluster: ClusterSpec, platform: Platform) -> None:
    """Refuse profiles and settings the platform does not declare (``Platform.profiles``/``settings``).

    Runs before the platform's ``gpucluster_prepare_cluster`` hook, so plugins may rely on
    ``cluster.profile`` holding only declared names and values, and on ``cluster.settings``
    holding only the platform's keys and :data:`gpucluster.sdk.CORE_SETTING_KEYS`.

    Raises:
        GpuclusterError: naming the cluster file, cluster and ``clusters[<i>].profile.<name>`` (with
            the allowed names or values and the default) or ``clusters[<i>].settings.<key>`` (with
            the allowed keys).
    """
    where = {"file": cluster.source, "cluster": cluster.name}
    accepted = (*platform.settings, *CORE_SETTING_KEYS)
    for name in sorted(cluster.settings or {}, key=str):
        if name not in accepted:
            raise GpuclusterError(
                f"unknown setting '{name}' for service {platform.service}",
                key=absolute_key(cluster, f"settings.{name}"),
                allowed=", ".join(accepted),
                fix="remove it or fix its spelling (platform settings: the platform's page in docs/)",
                **where,
            )
    for name, value in sorted(cluster.profile.items()):
        if name not in platform.profiles:
            raise GpuclusterError(
                f"unknown profile '{name}' for service {platform.service}",
                key=absolute_key(cluster, f"profile.{name}"),
                allowed=allowed_list(platform.profiles)
                or "none (this platform declares no profile)",
                fix="remove it"
                + (f", or set {', '.join(sorted(platform.profiles))}" if platform.profiles else ""),
                **where,
            )
        default, allowed = platform.profiles[name]
        if value not in allowed:
            raise GpuclusterError(
                f"unknown value '{value}' for profile {name}",
                key=absolute_key(cluster, f"profile.{name}"),
                allowed=", ".join(allowed),
                fix=f"use one of the allowed values (default: {default}; profiles: docs/recipes.md)",
                **where,
            )


def prepare_cluster(cluster: ClusterSpec) -> ClusterSpec:
    """Apply the platform plugin's defaults/validation (``gpucluster_prepare_cluster``).

    The prepared spec keeps the cluster's place in the file (``index``, ``backend_key``) even when
    the plugin built a new one.

    Raises:
        GpuclusterError: unknown service (``clusters[<i>].criteria.service``, or the RecipeResult
            file's ``criteria.service`` for a cluster given by ``recipe:``); the plugin's own
            errors, keys made absolute (:func:`gpucluster.plugins.call_hook_attributed`).
        PluginError: the plugin returned something other than a ClusterSpec (names the plugin).
    """
    file = recipe_mod.criteria_source(cluster)  # the RecipeResult for a cluster given by recipe:
    try:
        platform = platform_for(cluster.criteria.service, file=file)
    except GpuclusterError as err:
        problems = [dataclasses.replace(p, cluster=p.cluster or cluster.name) for p in err.problems]
        raise GpuclusterError(problems=absolute_keys(cluster, problems)) from None
    check_declared_inputs(cluster, platform)
    results = call_hook_attributed("gpucluster_prepare_cluster", cluster=copy.deepcopy(cluster))
    if not results:
        return cluster
    plugin, prepared = results[0]
    if not isinstance(prepared, ClusterSpec):
        raise PluginError(
            f"plugin '{plugin}' returned {type(prepared).__name__} from gpucluster_prepare_cluster",
            file=cluster.source,
            cluster=cluster.name,
            allowed="a gpucluster.sdk.ClusterSpec, or None for clusters of other services",
        )
    prepared.index, prepared.backend_key = cluster.index, cluster.backend_key
    prepared.chart_mirrors = (
        cluster.chart_mirrors
    )  # where charts are fetched from is the cluster file's choice only
    prepared.image_mirror = cluster.image_mirror  # and so is where images come from
    return prepared


def locate_finding(
    cluster: ClusterSpec, recipe, resolved: overrides_mod.ResolvedOverrides, f: Finding
) -> tuple[str, str]:
    """``(file, key)`` an error finding is reported at: the finding's own file (RecipeResult
    findings), else the user override that wrote the key, else -- for a recipe read from a
    RecipeResult file whose ``componentRefs[i].overrides`` set the key -- that file and
    ``componentRefs[i].overrides.<key>``, else the cluster file."""
    from gpucluster.values import leaf_paths

    if f.file:
        return f.file, f.key
    source = resolved.source_of(f.component, f.key)
    if source:
        return source, f.key
    if recipe.file and f.component in recipe.ref_keys and f.key:
        ref = recipe.component(f.component)
        if any(overrides_mod.paths_intersect(p, f.key) for p, _ in leaf_paths(ref.overrides)):
            return recipe.file, f"{recipe.ref_keys[f.component]}.overrides.{f.key}"
    return cluster.source, f.key


def recipe_for_cluster(cluster: ClusterSpec, catalog: catalog_mod.Catalog) -> Recipe:
    """Resolve ``cluster.criteria`` (or load ``cluster.recipe_file``) into a :class:`Recipe`.

    Args:
        cluster: validated input; ``cluster.profile`` picks profile values (AKS ``gpuStack``:
            ``azure-managed`` default, ``operator-managed``).
        catalog: from :func:`gpucluster.recipes.catalog.load_catalog`.

    Raises:
        GpuclusterError: see :func:`gpucluster.recipes.recipe.resolve` and :func:`gpucluster.recipes.recipe_result.recipe_from_file`;
            problems name the cluster file and cluster, keys in the cluster file absolute
            (``clusters[<i>].criteria.os``).
    """
    if cluster.recipe_file:
        from gpucluster.recipes import recipe_result

        return recipe_result.recipe_from_file(
            cluster.recipe_file,
            catalog,
            cluster=cluster,
            display=recipe_mod.recipe_display(cluster),
        )
    try:
        return recipe_mod.resolve(
            cluster.criteria,
            catalog,
            profile=cluster.profile,
            file=cluster.source,
            cluster=cluster.name,
        )
    except GpuclusterError as err:
        err.problems = absolute_keys(cluster, err.problems)
        err.args = (err.render(),)
        raise


_RESOLVED: dict[tuple, tuple] = {}
"""Per-process memo of :func:`resolved_components` for criteria-resolved recipes."""


def resolved_components(
    cluster: ClusterSpec, catalog: catalog_mod.Catalog
) -> tuple[Recipe, dict[str, Component]]:
    """:func:`recipe_for_cluster` and :func:`gpucluster.recipes.layering.effective_components` of ``cluster``.

    A recipe resolved from criteria is a pure function of (catalog, loaded plugins, criteria,
    profile): it is resolved once per process and every cluster gets its own deep copy (a fleet of
    clusters with one criteria set resolves once; no cluster can change another's recipe or values).
    The memo keeps a :mod:`pickle` of the result (dataclasses and plain values: made and read in C,
    several times faster than :func:`copy.deepcopy`, and a one-cluster plan pays only the dump).
    The cluster file and name appear only in errors, which are raised afresh for each cluster (a
    failed resolution is not memoized). A recipe read from a RecipeResult file is read every time.

    Raises:
        GpuclusterError: see :func:`recipe_for_cluster`.
    """
    if cluster.recipe_file:
        recipe = recipe_for_cluster(cluster, catalog)
        return recipe, layering.effective_components(recipe, catalog)
    pm = get_plugin_manager()
    key = (
        id(catalog),
        id(pm),
        tuple(sorted(id(p) for p in pm.get_plugins())),
        cluster.criteria,
        tuple(sorted(cluster.profile.items())),
    )
    try:
        hit = _RESOLVED.get(key)
    except TypeError:  # an unhashable criteria or profile value: resolve (and refuse) it as it is
        recipe = recipe_for_cluster(cluster, catalog)
        return recipe, layering.effective_components(recipe, catalog)
    if hit is not None and hit[0] is catalog and hit[1] is pm:
        return pickle.loads(hit[2])
    recipe = recipe_for_cluster(cluster, catalog)
    components = layering.effective_components(recipe, catalog)
    try:
        snapshot = pickle.dumps((recipe, components), pickle.HIGHEST_PROTOCOL)
    except (
        pickle.PicklingError,
        TypeError,
        AttributeError,
    ):  # e.g. a plugin's value holding a lambda
        return recipe, components
    if len(_RESOLVED) >= 64:
        _RESOLVED.clear()
    _RESOLVED[key] = (catalog, pm, snapshot)
    return recipe, components


def surge_pairs(cluster: ClusterSpec) -> list[tuple[str, str]]:
    """``(new pool, pool it replaces)`` for every pool with ``replaces`` (docs/cluster-file.md
    "Replacing a GPU pool"), sorted: what :func:`gpucluster.charts.graph.build_nodes` folds into
    every gate's hash."""
    return sorted((p.name, p.replaces) for p in cluster.pools if p.replaces is not None)


def _recipe_file_intent(cluster: ClusterSpec) -> tuple[ClusterSpec, FileIntent | None]:
    """``(cluster, intent)``: what the cluster's RecipeResult file (``recipe_file``) asks for.

    The file's values choose the profile when the cluster does not (before the platform reads
    it): its ``selection`` is merged over the cluster's ``profile``. ``(cluster, None)`` without
    a recipe file.

    Raises:
        GpuclusterError: see :func:`gpucluster.recipes.recipe_result.file_intent`.
    """
    if not cluster.recipe_file:
        return cluster, None
    from gpucluster.recipes import recipe_result

    intent = recipe_result.file_intent(
        cluster.recipe_file,
        catalog_mod.load_catalog(),
        cluster=cluster,
        display=recipe_mod.recipe_display(cluster),
    )
    if intent.selection:
        cluster = dataclasses.replace(cluster, profile={**cluster.profile, **intent.selection})
    return cluster, intent


def _ordered_nodes(
    cluster: ClusterSpec,
    recipe: Recipe,
    components: dict[str, Component],
    catalog,
    manifest_charts: dict[tuple[str, str], LocalChart],
    gate_charts: list[tuple[GateSpec, LocalChart, dict[str, Any]]],
    gate_specs: list[GateSpec],
    objects: dict[tuple[str, str, str, str], str],
) -> list[PlanNode]:
    """The plan's nodes, in order: releases, manifest charts, gates and CRD steps (the graph),
    then the scheduler-profile plan node, teardown nodes, the validation node, chart mirrors.

    Raises:
        GpuclusterError: a gate waits for an object nothing renders, a custom resource is
            applied before its CRD, or a name or mirror check of the graph fails.
    """
    crd_steps = crds_mod.crd_steps(cluster, components, catalog)
    surge = surge_pairs(cluster)
    nodes = graph.build_nodes(
        cluster.name, recipe, components, manifest_charts, gate_charts, crd_steps, surge
    )
    gates_mod.check_gate_objects(
        cluster, gate_specs, components, objects, recipe=recipe
    )  # after the graph's name checks
    owners = crds_mod.crd_owners(components, catalog)
    crds_mod.check_custom_resource_order(cluster.name, nodes, owners)
    if (
        cluster.scheduler_profiles
    ):  # AKS configurable scheduler profiles (docs/scheduler-profiles.md)
        from gpucluster.inputs.scheduler_profiles import order_training_runtime, plan_node

        nodes = [
            plan_node(cluster, taken={n.id for n in nodes}),
            *order_training_runtime(cluster, nodes),
        ]
    nodes = nodes + teardown_mod.teardown_nodes(cluster, components, nodes, owners, gate_specs)
    if (cluster.settings or {}).get(VALIDATE_SETTING) is not None:
        from gpucluster.live import (
            gate as validation_gate,
        )  # only for clusters that set settings.validate

        if validation_gate.validation_enabled(cluster):
            nodes = nodes + [validation_gate.validation_node(cluster, recipe, components, nodes)]
    nodes = mirrors_mod.apply_mirrors(
        nodes, cluster.chart_mirrors, cluster=cluster.name, file=cluster.source
    )
    from gpucluster.charts.imagemirror import apply_hook_values

    return apply_hook_values(nodes, cluster.image_mirror)


def build_plan(cluster: ClusterSpec, *, strict: bool = True) -> RuntimePlan:
    """Resolve one cluster into a :class:`RuntimePlan`.

    ``strict=False`` (``gpucluster upgrade-check``, which must judge a running configuration that
    today's policy refuses) keeps error-severity findings in ``plan.findings`` instead of raising.

    Raises:
        GpuclusterError: invalid input, unresolvable recipe, or error-severity findings
            (all error findings of the cluster, one Problem each).
    """
    pm = get_plugin_manager()
    cluster, intent = _recipe_file_intent(cluster)
    cluster = prepare_cluster(cluster)
    catalog = catalog_mod.load_catalog()
    recipe, components = resolved_components(cluster, catalog)
    if intent is not None:
        recipe = with_findings(recipe, intent.findings)
    # the cluster file's driverUpgradePolicy (or its defaults); user overrides still win
    components = driver_upgrade_mod.apply_driver_upgrade_policy(cluster, components)
    components = overrides_mod.apply_overrides(cluster, recipe, components, catalog)
    resolved = overrides_mod.resolved_overrides(
        cluster, catalog
    )  # once; conditional values, scheduling, policy, error mapping
    components, conditional = layering.resolve_conditional_values(
        components, catalog, cluster=cluster.name, user_set=resolved.source_of
    )
    recipe = with_findings(recipe, conditional)
    components = scheduling_mod.apply_scheduling(
        cluster, recipe, components, catalog, resolved=resolved
    )
    components = adjusted_values(cluster, recipe, components, pm=pm)
    findings: list[Finding] = policy_mod.evaluate(
        cluster, recipe, components, catalog, resolved=resolved
    )
    findings += absolute_keys(cluster, driver_upgrade_mod.unused_findings(cluster, components))
    findings += backends_mod.placeholder_findings(cluster)
    findings += absolute_keys(
        cluster, driver_upgrade_mod.override_findings(cluster, components, resolved)
    )
    if intent is not None:
        from gpucluster.recipes import recipe_result

        findings += recipe_result.intent_changes(
            intent, components, catalog, cluster.name, recipe.file or ""
        )
    errors = [f for f in findings if f.severity == "error"]
    if errors and strict:
        _raise_error_findings(cluster, recipe, resolved, errors)
    # values for the chart version each release installs (after policy, which reads the catalog's keys)
    components, versioned = chart_versions_mod.apply_chart_versions(
        cluster,
        recipe,
        components,
        catalog,
        locate=lambda comp, path: locate_finding(
            cluster,
            recipe,
            resolved,
            Finding("VERSION-VALUES", "error", cluster.name, comp, path, "", ""),
        ),
    )
    findings += versioned
    components = gates_mod.apply_driver_identity(
        cluster, components
    )  # DRA kubelet plugin re-rolls with the driver
    objects: dict[tuple[str, str, str, str], str] = {}
    manifest_charts = manifests_mod.render_manifest_charts(
        cluster, recipe, components, catalog, objects=objects
    )
    gate_specs = gates_mod.collect_gates(cluster, recipe, components)
    components, supplied = _supply_gate_objects(cluster, recipe, components, gate_specs, objects)
    if (
        supplied
    ):  # a platform's manifest renders what a gate waits for: render the manifests again with it
        findings += supplied
        objects.clear()
        manifest_charts = manifests_mod.render_manifest_charts(
            cluster, recipe, components, catalog, objects=objects
        )
    gate_charts = [
        (spec, *gates_mod.render_gate_chart(cluster, spec, components)) for spec in gate_specs
    ]
    nodes = _ordered_nodes(
        cluster, recipe, components, catalog, manifest_charts, gate_charts, gate_specs, objects
    )
    return RuntimePlan(
        cluster=cluster,
        recipe=recipe,
        components=components,
        nodes=nodes,
        gates=gate_specs,
        findings=[f for f in findings if strict is False or f.severity != "error"],
    )


def _raise_error_findings(
    cluster: ClusterSpec,
    recipe: Recipe,
    resolved: overrides_mod.ResolvedOverrides,
    errors: Sequence[Finding],
) -> NoReturn:
    """Raise one GpuclusterError with a located Problem per error finding, in order."""
    problems = []
    for f in errors:
        file, key = locate_finding(cluster, recipe, resolved, f)
        problems.append(
            Problem(
                id=f.id,
                message=f.message,
                file=file,
                cluster=f.cluster,
                component=f.component,
                key=key,
                fix=f.fix,
            )
        )
    raise GpuclusterError(problems=problems)


def with_findings(recipe: Recipe, findings: Sequence[Finding]) -> Recipe:
    """``recipe`` with ``findings`` appended to ``recipe.findings`` (a new Recipe; ``recipe`` is left as it is)."""
    return (
        dataclasses.replace(recipe, findings=[*recipe.findings, *findings]) if findings else recipe
    )


def adjusted_values(
    cluster: ClusterSpec, recipe: Recipe, components: Mapping[str, Component], *, pm=None
) -> dict[str, Component]:
    """The components with every plugin's ``gpucluster_adjust_values`` patch deep-merged into
    their values, in hook call order (:func:`gpucluster.values.deep_merge`); ``components`` is
    left as it is.

    Returns:
        a new ``{name: Component}`` in the same order (a component no plugin patches is the
        input's own object).

    Raises:
        PluginError: a plugin returned something other than a mapping or None (names the plugin
            and the component), or changed its read-only arguments
            (:func:`gpucluster.plugins.call_hook_attributed`).
    """
    out: dict[str, Component] = {}
    for name, comp in components.items():
        values = comp.values
        for plugin, patch in call_hook_attributed(
            "gpucluster_adjust_values", pm=pm, cluster=cluster, recipe=recipe, component=comp
        ):
            if not isinstance(patch, Mapping):
                raise PluginError(
                    f"plugin '{plugin}' returned {type(patch).__name__} from gpucluster_adjust_values",
                    cluster=cluster.name,
                    component=name,
                    allowed="a dict patch (deep-merged into the component's values) or None",
                )
            values = deep_merge(values, patch)
        out[name] = comp if values is comp.values else dataclasses.replace(comp, values=values)
    return out


def _supply_gate_objects(
    cluster: ClusterSpec, recipe: Recipe, components: Mapping[str, Component], gates, objects
) -> tuple[dict[str, Component], list[Finding]]:
    """The components with each gate's ``supplied_by`` manifest added to its component's
    manifests when no release renders the object the gate waits for
    (:func:`gpucluster.charts.gates.gate_object_providers`), and an info ``GATE-OBJECT-SUPPLIED`` per
    manifest added, naming the RecipeResult key; ``components`` is left as it is."""
    components = dict(components)
    out = []
    for spec in gates:
        comp = components.get(spec.component)
        if (
            not spec.supplied_by
            or comp is None
            or gates_mod.gate_object_providers(spec, components, objects)
        ):
            continue
        if spec.supplied_by in comp.ref.manifest_files:
            continue
        ref = dataclasses.replace(
            comp.ref, manifest_files=[*comp.ref.manifest_files, spec.supplied_by]
        )
        components[spec.component] = dataclasses.replace(comp, ref=ref)
        key = (
            f"{recipe.ref_keys[spec.component]}.manifestFiles"
            if recipe.file and spec.component in recipe.ref_keys
            else "manifestFiles"
        )
        out.append(
            Finding(
                "GATE-OBJECT-SUPPLIED",
                "info",
                cluster.name,
                spec.component,
                key,
                f"no release of this stack creates the {spec.kind_name} gate {spec.name} waits for; the platform's "
                f"{spec.supplied_by} is installed with {spec.component} (the catalog recipe for these criteria has it)",
                f"none needed; list {spec.supplied_by.removesuffix('.j2')} in {spec.component}'s manifestFiles to make it explicit",
                file=recipe.file or "",
            )
        )
    return components, out


def build_plans(clusters: Sequence[ClusterSpec]) -> list[RuntimePlan]:
    """Build every cluster's plan; collect the problems of all clusters before raising."""
    plans: list[RuntimePlan] = []
    problems: list[Problem] = []
    for cluster in clusters:
        try:
            plans.append(build_plan(cluster))
        except GpuclusterError as err:
            problems.extend(err.problems)
    if problems:
        raise GpuclusterError(problems=problems)
    return plans

"""Values layering: the recipe-level values of each component, written once.

The rule (:func:`layer_values`; later wins, objects merge, lists and scalars replace, explicit
nulls kept so Helm drops the chart's default): the component's values files in order (its base
``components/<name>/values.yaml``, then the recipe's ``valuesFile``) <- the recipe's
``overrides`` (overlays and mixins, or a RecipeResult's componentRef) <- the chosen profile's
values for the component. :func:`effective_components` applies it to every enabled component of
a resolved recipe, and :func:`resolve_conditional_values` then applies the registry's
``conditionalValues``; reading a RecipeResult (:mod:`gpucluster.recipes.recipe_result`) uses the
same rule to compare a file's hydrated ``values`` with what its files and overrides give.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gpucluster.model import Component, ComponentRef, Finding, Recipe
from gpucluster.recipes.catalog import Catalog
from gpucluster.values import deep_merge


def layer_values(
    values_files: Iterable[str],
    overrides: Mapping[str, Any] | None,
    profile_values: Mapping[str, Any] | None,
    catalog: Catalog,
) -> dict[str, Any]:
    """The recipe-level values of one component: ``values_files`` in order (catalog-relative paths,
    read with ``catalog.load_values``) <- ``overrides`` <- ``profile_values`` (None or empty: no
    layer). Later wins; objects merge, lists and scalars replace, explicit nulls are kept so Helm
    drops the chart's default (:func:`gpucluster.values.deep_merge` with ``keep_nulls=True``).

    Returns:
        a new dict; the inputs are not changed.

    Raises:
        GpuclusterError: a values file the catalog cannot read (``Catalog.load_values``).
    """
    values: dict[str, Any] = {}
    for rel in values_files:
        values = deep_merge(values, catalog.load_values(rel), keep_nulls=True)
    values = deep_merge(values, overrides, keep_nulls=True)
    return deep_merge(values, profile_values, keep_nulls=True)


def component_values(ref: ComponentRef, recipe: Recipe, catalog: Catalog) -> dict[str, Any]:
    """Recipe-level values of one component of ``recipe``: :func:`layer_values` of its
    ``values_files``, its ``overrides`` (overlays and mixins) and the chosen profile's values."""
    return layer_values(
        ref.values_files, ref.overrides, recipe.profile_owned.get(ref.name), catalog
    )


def effective_components(recipe: Recipe, catalog: Catalog) -> dict[str, Component]:
    """Layer values of every enabled component (see :func:`component_values`).

    Returns:
        ``{name: Component}`` in recipe order; components whose recipe overrides set
        ``enabled: false`` are left out. Each Component holds a copy of its ComponentRef, whose
        ``dependency_refs`` no longer name components the recipe disables (AICR's bundler prunes
        those edges; policy reports them as ``DEPENDENCY-PRUNED``) -- except for manifest-only
        components, whose custom resources need the operator they depend on (the graph refuses
        those edges, naming both).
    """
    disabled = {ref.name for ref in recipe.component_refs if not ref.enabled}
    out: dict[str, Component] = {}
    for ref in recipe.component_refs:
        if not ref.enabled:
            continue
        own = copy.deepcopy(ref)
        if ref.type != "Manifest":
            own.dependency_refs = [d for d in ref.dependency_refs if d not in disabled]
        out[ref.name] = Component(ref=own, values=component_values(ref, recipe, catalog))
    out, found = resolve_conditional_values(out, catalog)
    _add_findings(recipe, found)
    return out


def _add_findings(recipe: Recipe, findings: Iterable[Finding]) -> None:
    for f in findings:
        if f not in recipe.findings:
            recipe.findings.append(f)


def _depends_on(components: Mapping[str, Component], start: str, target: str) -> bool:
    """Whether ``start`` reaches ``target`` through dependencyRefs (transitively)."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        node = stack.pop()
        if node == target:
            return True
        if node in seen or node not in components:
            continue
        seen.add(node)
        stack.extend(components[node].ref.dependency_refs)
    return False


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def resolve_conditional_values(
    components: Mapping[str, Component],
    catalog: Catalog,
    *,
    cluster: str = "",
    user_set: Callable[[str, str], str | None] | None = None,
) -> tuple[dict[str, Component], list[Finding]]:
    """The components with the registry's ``conditionalValues`` applied (see
    :class:`gpucluster.recipes.catalog.ConditionalValue`): the enabled component set is the truth.
    ``components`` is left as it is.

    For each conditional value whose current value at ``path`` is the one that assumes a
    provider:

    * no provider among ``components``: the value becomes ``otherwise`` (the chart keeps its
      bundled subchart/CRDs; info ``CONDITIONAL-VALUE``) -- unless ``user_set(component, path)``
      names a user override that set it, which is kept and reported as a warning;
    * a provider present but the component not ordered after any present provider: a
      dependencyRef on the first present provider is added (info ``ORDER-ADDED``); if that
      provider itself depends on the component, error ``CONDITIONAL-VALUE``.

    Idempotent (a resolved value no longer matches). Runs in :func:`effective_components`
    (recipe-level component set) and again in the pipeline after user overrides (final set).

    Args:
        components: enabled components by name.
        catalog: registry with the conditional values.
        cluster: cluster name for the findings.
        user_set: ``(component, path) -> source`` of a user override that set the path, or None.

    Returns:
        ``(components, findings)``: a new ``{name: Component}`` in the order of ``components``
        (a component given a new value or ``dependencyRef`` is a new Component, the others the
        input's objects), and the findings, in component then path order.
    """
    from gpucluster.values import deep_copy, get_path, set_path

    findings: list[Finding] = []
    components = dict(components)
    for name in sorted(components):
        comp = components[name]
        entry = catalog.components.get(name)
        for cv in entry.conditional_values if entry is not None else ():
            if not _same(get_path(comp.values, cv.path, _NOT_SET), cv.value):
                continue
            present = [p for p in cv.providers if p in components and p != name]
            shown = f"{cv.path}: {_scalar(cv.value)}"
            if not present:
                source = user_set(name, cv.path) if user_set is not None else None
                if source:
                    findings.append(
                        Finding(
                            "CONDITIONAL-VALUE",
                            "warning",
                            cluster,
                            name,
                            cv.path,
                            f"{source} sets {shown}, which assumes {' or '.join(cv.providers)} provides {cv.why or 'it'}; "
                            "none of them is installed by this cluster's recipe",
                            f"add {cv.providers[0]} to the recipe, or remove the override so the chart keeps its bundled "
                            f"one ({cv.path}: {_scalar(cv.otherwise)})",
                        )
                    )
                    continue
                values = deep_copy(comp.values)
                set_path(values, cv.path, cv.otherwise)
                comp = components[name] = dataclasses.replace(comp, values=values)
                findings.append(
                    Finding(
                        "CONDITIONAL-VALUE",
                        "info",
                        cluster,
                        name,
                        cv.path,
                        f"{shown} assumes {' or '.join(cv.providers)} provides {cv.why or 'it'}, and the recipe installs "
                        f"none of them, so '{name}' keeps the chart's own ({cv.path}: {_scalar(cv.otherwise)})",
                        f"none needed; add {cv.providers[0]} to the recipe to use a separate release instead",
                    )
                )
                continue
            if any(_depends_on(components, name, p) for p in present):
                continue
            provider = present[0]
            if _depends_on(components, provider, name):
                findings.append(
                    Finding(
                        "CONDITIONAL-VALUE",
                        "error",
                        cluster,
                        name,
                        cv.path,
                        f"{shown} needs '{provider}' ({cv.why or 'its provider'}) installed first, but '{provider}' "
                        f"depends on '{name}'",
                        f"remove the dependencyRef of '{provider}' on '{name}', or set {cv.path}: {_scalar(cv.otherwise)}",
                    )
                )
                continue
            ref = dataclasses.replace(
                comp.ref, dependency_refs=sorted(set(comp.ref.dependency_refs) | {provider})
            )
            comp = components[name] = dataclasses.replace(comp, ref=ref)
            findings.append(
                Finding(
                    "ORDER-ADDED",
                    "info",
                    cluster,
                    name,
                    "dependencyRefs",
                    f"{shown} assumes '{provider}' provides {cv.why or 'it'} at install time; '{name}' now installs "
                    f"after '{provider}' (the recipe had no such edge)",
                    f"none needed; add '{provider}' to the dependencyRefs of '{name}' in the recipe to make it explicit",
                )
            )
    return components, findings


_NOT_SET = object()


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)

"""Recipe resolution: criteria -> overlays -> mixins -> profile -> ordered ComponentRefs.

Semantics follow NVIDIA AI Cluster Runtime (AICR) ``pkg/recipe`` (metadata_store.go,
metadata.go, criteria.go, profile.go); see docs/recipes.md for the full description:

1. **Criteria match** (asymmetric, AICR ``Criteria.Matches``): an overlay field that is
   ``any`` or absent matches every query value; a query field that is ``any`` matches only
   overlays that leave the field ``any``. Overlays without ``criteria`` (``base`` and pure
   intermediates) never match by themselves.
2. **Maximal leaves**: every matching overlay that is an ancestor (via ``spec.base``) of
   another matching overlay is dropped; the rest are ordered least specific first (number of
   non-``any`` criteria fields), ties by name.
3. **Chains**: the merge starts from ``base``; each leaf's chain is merged from its root
   down, an overlay already merged is skipped. ``appliedOverlays`` records the merge order.
4. **Field merge** of same-named componentRefs: non-empty scalars of the later overlay win
   (``type``, ``source``, ``chart``, ``version``, ``namespace``, ``valuesFile`` -- so a later
   ``valuesFile`` *replaces* an earlier one, as in AICR), ``overrides`` deep-merge (explicit
   ``null`` kept, so Helm drops the chart default), ``dependencyRefs``/``manifestFiles``/
   ``preManifestFiles`` are unions without duplicates. Constraints: later same-named replace.
5. **Mixins** named by any merged overlay accumulate (order kept, no duplicates) and are
   applied after all chains; a mixin constraint whose name is already present is an error.
6. **Profile**: at most one declaration among the merged overlays (AKS: ``gpuStack``);
   the chosen value (``cluster.profile`` or the declared default) adds its constraints and
   its component values, which layer last (see :func:`gpucluster.recipes.layering.layer_values`), and may declare
   ``advertiser: external`` (``Recipe.advertiser``: a platform add-on advertises the GPUs).
7. **Coverage**: every criteria field the query states (not ``any``) must be honoured by at
   least one merged overlay, else no recipe exists for it (AICR coverage post-condition).
8. **Registry defaults** fill ``source``/``chart``/``version``/``namespace``/``type``; the
   component order is topological by ``dependencyRefs``, ties by name.

The domain core never imports cdktf.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import GpuclusterError, Problem, allowed_list
from gpucluster.model import (
    ANY,
    CRITERIA_FIELDS,
    ClusterSpec,
    ComponentRef,
    Constraint,
    Criteria,
    Recipe,
)
from gpucluster.recipes.catalog import Catalog
from gpucluster.recipes.overlays import (
    BASE_OVERLAY,
    COMPONENT_TYPES,
    Overlay,
    OverlayIndex,
    overlay_index,
)
from gpucluster.values import deep_merge

# --------------------------------------------------------------------------- internal data


@dataclass
class _Ref:
    """A componentRef while overlays are merged (AICR field names in comments)."""

    name: str
    type: str = ""
    source: str = ""
    chart: str = ""
    version: str = ""
    namespace: str = ""
    values_file: str = ""  # valuesFile: a later overlay's file replaces an earlier one
    overrides: dict[str, Any] = field(default_factory=dict)
    manifest_files: list[str] = field(default_factory=list)
    pre_manifest_files: list[str] = field(default_factory=list)
    dependency_refs: list[str] = field(default_factory=list)
    chart_versions: str = ""  # chartVersions: clauses of every overlay joined (all must hold)
    declared_in: str = ""

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], declared_in: str) -> _Ref:
        return cls(
            name=raw["name"],
            type=raw.get("type", ""),
            source=raw.get("source", ""),
            chart=raw.get("chart", ""),
            version=str(raw.get("version", "")),
            namespace=raw.get("namespace", ""),
            values_file=raw.get("valuesFile", ""),
            overrides=copy.deepcopy(dict(raw.get("overrides") or {})),
            manifest_files=list(raw.get("manifestFiles") or []),
            pre_manifest_files=list(raw.get("preManifestFiles") or []),
            dependency_refs=list(raw.get("dependencyRefs") or []),
            chart_versions=str(raw.get("chartVersions") or ""),
            declared_in=declared_in,
        )

    def merge(self, other: _Ref) -> None:
        """Merge ``other`` (a later overlay's entry) into this one (AICR ``mergeComponentRef``)."""
        for attr in ("type", "source", "chart", "version", "namespace", "values_file"):
            value = getattr(other, attr)
            if value:
                setattr(self, attr, value)
        if other.overrides:
            self.overrides = deep_merge(self.overrides, other.overrides, keep_nulls=True)
        self.manifest_files = _union(self.manifest_files, other.manifest_files)
        self.pre_manifest_files = _union(self.pre_manifest_files, other.pre_manifest_files)
        self.dependency_refs = _union(self.dependency_refs, other.dependency_refs)
        if other.chart_versions:
            self.chart_versions = " ".join(
                c for c in (self.chart_versions, other.chart_versions) if c
            )


def _union(a: Iterable[str], b: Iterable[str]) -> list[str]:
    out = list(a)
    for item in b:
        if item not in out:
            out.append(item)
    return out


# --------------------------------------------------------------------------- criteria


def criteria_matches(overlay_criteria: Mapping[str, str], query: Criteria) -> bool:
    """AICR asymmetric match (``Criteria.Matches``).

    An overlay field that is ``any``/absent is a wildcard; a query field that is ``any``
    only matches overlays that leave it ``any``; otherwise values must be equal.
    """
    for f in CRITERIA_FIELDS:
        have = overlay_criteria.get(f, ANY) or ANY
        want = getattr(query, f) or ANY
        if have == ANY:
            continue
        if want == ANY or have != want:
            return False
    return True


def specificity(overlay_criteria: Mapping[str, str]) -> int:
    """Number of criteria fields that are not ``any`` (AICR ``Criteria.Specificity``)."""
    return sum(1 for f in CRITERIA_FIELDS if (overlay_criteria.get(f, ANY) or ANY) != ANY)


def allowed_criteria(catalog: Catalog) -> dict[str, list[str]]:
    """Allowed values per criteria field: ``any`` + what platform plugins declare + catalog overlays.

    Returns:
        ``{"service": [...], "accelerator": [...], "os": [...], "intent": [...], "platform": [...]}``,
        each sorted.
    """
    from gpucluster.plugins import platforms

    allowed: dict[str, set[str]] = {f: {ANY} for f in CRITERIA_FIELDS}
    for service, plat in platforms().items():
        allowed["service"].add(service)
        allowed["accelerator"].update(plat.accelerators)
        allowed["os"].update(plat.oses)
        allowed["intent"].update(plat.intents)
        allowed["platform"].update(plat.platforms)
    for ov in overlay_index(catalog).overlays.values():
        for f, v in (ov.criteria or {}).items():
            allowed[f].add(v)
    return {f: sorted(v) for f, v in allowed.items()}


_PLATFORM_FIELDS = {
    "accelerator": "accelerators",
    "os": "oses",
    "intent": "intents",
    "platform": "platforms",
}
"""Criteria field -> the :class:`~gpucluster.sdk.Platform` attribute declaring its values."""


def validate_criteria(
    criteria: Criteria, catalog: Catalog, *, file: str | None = None, cluster: str | None = None
) -> None:
    """Reject criteria values no platform plugin or overlay knows, and values the service's
    platform does not declare.

    A platform's ``accelerators``/``oses``/``intents``/``platforms`` list the values it has recipes
    for (an empty list declares nothing and restricts nothing). A value outside them would only
    match another platform's wildcard overlay (``gb200-any``, ``h100-any``) and yield an
    unqualified mix, so it is refused, for the CLI's ``recipe`` as for cluster files.

    Raises:
        GpuclusterError: one problem per unknown or undeclared field value, listing the allowed values.
    """
    from gpucluster.plugins import platforms

    allowed = allowed_criteria(catalog)
    declared = platforms().get(criteria.service)
    problems = []
    for f in CRITERIA_FIELDS:
        value = getattr(criteria, f)
        if value not in allowed[f]:
            problems.append(
                Problem(
                    message=f"unknown {f} '{value}'",
                    file=file,
                    cluster=cluster,
                    key=f"criteria.{f}",
                    allowed=", ".join(allowed[f]),
                    fix=f"use one of the allowed {f} values",
                )
            )
            continue
        values = (
            tuple(getattr(declared, _PLATFORM_FIELDS[f], ()) or ())
            if f in _PLATFORM_FIELDS and declared
            else ()
        )
        if value != ANY and values and value not in values:
            problems.append(
                Problem(
                    message=f"service '{criteria.service}' has no recipes for {f} '{value}'",
                    file=file,
                    cluster=cluster,
                    key=f"criteria.{f}",
                    allowed=", ".join(sorted({ANY, *values})),
                    fix=f"use one of the {f} values the {criteria.service} platform declares, or another service",
                )
            )
    if problems:
        raise GpuclusterError(problems=problems)


# --------------------------------------------------------------------------- resolution


@dataclass
class _Where:
    file: str | None
    cluster: str | None


def _chain(index: OverlayIndex, name: str) -> list[Overlay]:
    """Overlays from the root (excluding base) down to ``name`` (cycles are rejected by overlay_index)."""
    chain: list[Overlay] = []
    current: str | None = name
    while current and current != BASE_OVERLAY:
        ov = index.overlays[current]
        chain.append(ov)
        current = ov.base
    return list(reversed(chain))


def select_overlays(index_or_catalog: Catalog | OverlayIndex, criteria: Criteria) -> list[str]:
    """Leaf overlays a query selects, least specific first (before chain expansion)."""
    index = (
        index_or_catalog
        if isinstance(index_or_catalog, OverlayIndex)
        else overlay_index(index_or_catalog)
    )
    matches = [
        ov
        for ov in index.overlays.values()
        if ov.name != BASE_OVERLAY
        and ov.criteria is not None
        and criteria_matches(ov.criteria, criteria)
    ]
    ancestors: set[str] = set()
    for ov in matches:
        base = ov.base
        visited: set[str] = set()
        while base and base != BASE_OVERLAY and base not in visited:
            visited.add(base)
            ancestors.add(base)
            base = index.overlays[base].base if base in index.overlays else None
    leaves = [ov for ov in matches if ov.name not in ancestors]
    leaves.sort(key=lambda ov: (specificity(ov.criteria or {}), ov.name))
    return [ov.name for ov in leaves]


def resolve(
    criteria: Criteria,
    catalog: Catalog,
    *,
    profile: Mapping[str, str] | None = None,
    file: str | None = None,
    cluster: str | None = None,
) -> Recipe:
    """Resolve criteria into a :class:`Recipe` (no cluster needed; used by the CLI and tests).

    Args:
        criteria: the query (``any`` = unspecified).
        catalog: the loaded catalog.
        profile: profile choices ``{name: value}``; missing names take the declared default.
        file / cluster: where the query came from, for error messages.

    Raises:
        GpuclusterError: unknown criteria value; no recipe covers a stated criteria field;
            unknown profile name or value; unknown component; dangling dependencyRef or a
            dependency cycle (names the component and ``dependencyRefs``).
    """
    where = _Where(file, cluster)
    index = overlay_index(catalog)
    validate_criteria(criteria, catalog, file=file, cluster=cluster)

    merged: dict[str, _Ref] = {}
    constraints: list[Constraint] = []
    applied: list[str] = []
    mixin_names: list[str] = []

    def merge_overlay(ov: Overlay) -> None:
        applied.append(ov.name)
        for c in ov.constraints:
            _put_constraint(constraints, c)
        for raw in ov.refs:
            ref = _Ref.from_raw(raw, ov.file)
            if ref.name in merged:
                merged[ref.name].merge(ref)
            else:
                merged[ref.name] = ref
        for m in ov.mixins:
            if m not in mixin_names:
                mixin_names.append(m)

    merge_overlay(index.overlays[BASE_OVERLAY])
    for leaf in select_overlays(index, criteria):
        for ov in _chain(index, leaf):
            if ov.name not in applied:
                merge_overlay(ov)

    for m in mixin_names:
        mixin = index.mixins[m]
        for c in mixin.constraints:
            if any(existing.name == c.name for existing in constraints):
                raise GpuclusterError(
                    f"mixin '{m}' constraint '{c.name}' conflicts with a constraint of the overlays or another mixin",
                    file=mixin.file,
                    key="spec.constraints",
                    fix="remove the duplicate constraint from the mixin or the overlay",
                )
            constraints.append(c)
        for raw in mixin.refs:
            ref = _Ref.from_raw(raw, mixin.file)
            if ref.name in merged:
                merged[ref.name].merge(ref)
            else:
                merged[ref.name] = ref

    _check_coverage(index, criteria, applied, where)

    chosen, owned = _apply_profile(index, applied, profile or {}, merged, constraints, where)
    refs = _finalize(merged, catalog, where)
    return Recipe(
        criteria=criteria,
        applied_overlays=applied,
        constraints=constraints,
        component_refs=refs,
        profile=chosen,
        profile_owned=owned,
        advertiser=_profile_advertiser(index, applied, chosen),
    )


def _profile_advertiser(
    index: OverlayIndex, applied: list[str], chosen: tuple[str, str] | None
) -> str | None:
    """The chosen profile value's ``advertiser`` (``external``), or None."""
    if chosen is None:
        return None
    decl = [index.overlays[n].profile for n in applied if index.overlays[n].profile is not None][
        -1
    ] or {}
    return (decl["values"].get(chosen[1]) or {}).get("advertiser")


def owned_component_fix(recipe: Recipe, catalog: Catalog | None, component: str, how: str) -> str:
    """The ``fix:`` of a profile-owned component left out (``--set C:enabled=false``, a file's
    ``enabled: false`` or a RecipeResult without it): ``how`` (what undoes it), then the profile
    value that installs without it when there is one; else that every value of the profile sets
    keys of it, so none installs without it (no fix in a circle).

    Args:
        recipe: the recipe (``recipe.profile`` set; ``recipe.profile_owned`` the chosen value's).
        catalog: for the profile's other values (:func:`profile_values_owned`); None: unknown.
        component: the component left out.
        how: the first step, e.g. ``remove the override``.
    """
    assert recipe.profile is not None
    pname = recipe.profile[0]
    table = profile_values_owned(recipe, catalog) if catalog is not None else {}
    without = [v for v, owned in table.items() if component not in owned]
    if without:
        return (
            f"{how}; or choose profile: {{{pname}: {without[0]}}} in the cluster file, a value "
            f"that does not set keys of '{component}'"
        )
    from gpucluster.values import leaf_paths

    paths = sorted(p for p, _ in leaf_paths(recipe.profile_owned.get(component) or {}))
    values = ", ".join(table) if table else recipe.profile[1]
    return (
        f"{how}: every {pname} value ({values}) sets keys of '{component}'"
        + (f" ({', '.join(paths)})" if paths else "")
        + f", so no {pname} value installs the stack without it"
    )


def profile_values_owned(recipe: Recipe, catalog: Catalog) -> dict[str, dict[str, dict[str, Any]]]:
    """Every value of the recipe's profile -> component -> the nested values that value sets.

    Read from the profile declaration of the recipe's applied overlays (the catalog), e.g.
    ``{"azure-managed": {"gpu-operator": {"driver": {"enabled": False}, ...}, ...},
    "operator-managed": {...}}``; policy names the value that owns what a user override asked for.

    Returns:
        an empty dict when the recipe has no profile, or when its overlays (a RecipeResult file
        from elsewhere) are not in the catalog or declare another profile.
    """
    if recipe.profile is None:
        return {}
    try:
        index = overlay_index(catalog)
    except GpuclusterError:
        return {}
    decls = [
        index.overlays[n].profile
        for n in recipe.applied_overlays
        if n in index.overlays and index.overlays[n].profile is not None
    ]
    if not decls or decls[-1].get("name") != recipe.profile[0]:
        return {}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for value, fragment in sorted((decls[-1].get("values") or {}).items()):
        owned: dict[str, dict[str, Any]] = {}
        for ref in (fragment or {}).get("componentRefs") or []:
            owned[ref["name"]] = deep_merge(
                owned.get(ref["name"], {}), ref.get("overrides") or {}, keep_nulls=True
            )
        out[value] = owned
    return out


def _put_constraint(constraints: list[Constraint], c: Constraint) -> None:
    for i, existing in enumerate(constraints):
        if existing.name == c.name:
            constraints[i] = Constraint(c.name, c.value)
            return
    constraints.append(Constraint(c.name, c.value))


def _check_coverage(
    index: OverlayIndex, criteria: Criteria, applied: list[str], where: _Where
) -> None:
    problems = []
    for f in CRITERIA_FIELDS:
        want = getattr(criteria, f)
        if want == ANY:
            continue
        if any((index.overlays[n].criteria or {}).get(f) == want for n in applied):
            continue
        leaves = sorted(
            ov.name
            for ov in index.overlays.values()
            if ov.criteria
            and ov.criteria.get("service") == criteria.service
            and all(ov.criteria.get(k, ANY) != ANY for k in ("accelerator", "os", "intent"))
        )
        problems.append(
            Problem(
                message=(
                    f"no recipe covers {f} '{want}' together with the other criteria "
                    f"({', '.join(f'{k}={v}' for k, v in criteria.as_dict().items())})"
                ),
                file=where.file,
                cluster=where.cluster,
                key=f"criteria.{f}",
                allowed=f"recipes for service '{criteria.service}': {', '.join(leaves) or 'none'}",
                fix="choose criteria of one of the listed recipes, or add an overlay for this combination",
            )
        )
    if problems:
        raise GpuclusterError(problems=problems)


def _apply_profile(
    index: OverlayIndex,
    applied: list[str],
    selection: Mapping[str, str],
    merged: dict[str, _Ref],
    constraints: list[Constraint],
    where: _Where,
) -> tuple[tuple[str, str] | None, dict[str, dict[str, Any]]]:
    declarations = [index.overlays[n] for n in applied if index.overlays[n].profile is not None]
    names = sorted({ov.profile["name"] for ov in declarations})  # type: ignore[index]
    if len(names) > 1:
        raise GpuclusterError(
            f"recipe overlays declare more than one profile: {', '.join(names)}",
            file=declarations[-1].file,
            key="spec.profile",
            fix="declare at most one profile on a shared ancestor overlay",
        )
    for name in sorted(selection):
        if name not in names:
            raise GpuclusterError(
                f"unknown profile '{name}' for this recipe",
                file=where.file,
                cluster=where.cluster,
                key=f"profile.{name}",
                allowed=", ".join(names) if names else "none (this recipe declares no profile)",
                fix="remove the profile or use a profile the recipe declares",
            )
    if not declarations:
        return None, {}
    decl = declarations[-1].profile or {}
    pname = decl["name"]
    value = selection.get(pname, decl["default"])
    if value not in decl["values"]:
        raise GpuclusterError(
            f"unknown value '{value}' for profile '{pname}'",
            file=where.file,
            cluster=where.cluster,
            key=f"profile.{pname}",
            allowed=allowed_list(decl["values"]),
            fix=f"use one of the allowed values (default: {decl['default']})",
        )
    fragment = decl["values"][value]
    for c in fragment.get("constraints") or []:
        _put_constraint(constraints, Constraint(c["name"], c["value"]))
    owned: dict[str, dict[str, Any]] = {}
    for ref in fragment.get("componentRefs") or []:
        if ref["name"] not in merged:
            raise GpuclusterError(
                f"profile '{pname}' value '{value}' sets values of '{ref['name']}', which is not in the recipe",
                file=declarations[-1].file,
                component=ref["name"],
                key=f"spec.profile.values.{value}.componentRefs",
            )
        owned[ref["name"]] = deep_merge(
            owned.get(ref["name"], {}), ref["overrides"], keep_nulls=True
        )
    return (pname, value), dict(sorted(owned.items()))


def _finalize(merged: dict[str, _Ref], catalog: Catalog, where: _Where) -> list[ComponentRef]:
    problems = []
    refs: dict[str, ComponentRef] = {}
    for name in sorted(merged):
        raw = merged[name]
        entry = catalog.components.get(name)
        if entry is None:
            problems.append(
                Problem(
                    message=f"component '{name}' is not in the registry",
                    file=raw.declared_in,
                    component=name,
                    key="componentRefs",
                    allowed=allowed_list(catalog.components),
                    fix="add it to a registry.yaml or fix the name",
                )
            )
            continue
        ctype = raw.type or entry.type or "Helm"
        if ctype not in COMPONENT_TYPES:
            problems.append(
                Problem(
                    message=f"component '{name}' has unsupported type '{ctype}'",
                    file=raw.declared_in,
                    component=name,
                    key="type",
                    allowed=", ".join(COMPONENT_TYPES),
                )
            )
            continue
        overrides = copy.deepcopy(raw.overrides)
        enabled = True
        if isinstance(overrides.get("enabled"), bool):
            enabled = overrides.pop("enabled")
        refs[name] = ComponentRef(
            name=name,
            type=ctype,  # type: ignore[arg-type]
            source=raw.source or (entry.repository if ctype == "Helm" else ""),
            chart=raw.chart or (entry.chart if ctype == "Helm" else ""),
            version=raw.version or entry.version,
            namespace=raw.namespace or entry.namespace,
            values_files=values_files_for(name, raw.values_file, catalog),
            overrides=overrides,
            pre_manifest_files=list(raw.pre_manifest_files),
            manifest_files=list(raw.manifest_files),
            dependency_refs=sorted(set(raw.dependency_refs)),
            enabled=enabled,
            chart_versions=raw.chart_versions,
        )
        if ctype == "Helm" and not (refs[name].source and refs[name].chart and refs[name].version):
            problems.append(
                Problem(
                    message=f"Helm component '{name}' needs a chart repository, chart name and pinned version",
                    file=raw.declared_in,
                    component=name,
                    key="helm",
                    fix="set helm.repository/chart/version in registry.yaml or source/chart/version in the overlay",
                )
            )
    if problems:
        raise GpuclusterError(problems=problems)
    return order_components(list(refs.values()), file=where.file, cluster=where.cluster)


def values_files_for(name: str, values_file: str, catalog: Catalog) -> list[str]:
    """Values files of a component, layered in order (AICR ``GetValuesForComponent``).

    ``components/<name>/values.yaml`` first when it exists and the recipe's ``valuesFile`` is
    another file, then the recipe's ``valuesFile``. No ``valuesFile``: no files (overrides only).
    """
    if not values_file:
        return []
    base = f"components/{name}/values.yaml"
    if values_file != base and catalog_has(catalog, base):
        return [base, values_file]
    return [values_file]


def catalog_has(catalog: Catalog, relpath: str) -> bool:
    """Whether a catalog folder holds the file ``relpath``; False too for a path the system
    cannot look up (a name over 255 bytes, ``ENAMETOOLONG``; a NUL byte), as a RecipeResult may
    write any text there."""
    for folder in catalog.dirs:
        try:
            if (folder / relpath).is_file():
                return True
        except (OSError, ValueError):
            return False
    return False


def order_components(
    refs: list[ComponentRef], *, file: str | None = None, cluster: str | None = None
) -> list[ComponentRef]:
    """Topological order by ``dependency_refs``, ties by name (Kahn's algorithm).

    Raises:
        GpuclusterError: a dependencyRef names a component not in the list, or a cycle.
    """
    by_name = {r.name: r for r in refs}
    for r in sorted(refs, key=lambda r: r.name):
        for dep in r.dependency_refs:
            if dep not in by_name:
                raise GpuclusterError(
                    f"'{r.name}' depends on '{dep}', which is not in the recipe",
                    file=file,
                    cluster=cluster,
                    component=r.name,
                    key="dependencyRefs",
                    allowed=allowed_list(by_name),
                    fix=f"add '{dep}' to the recipe or remove the dependencyRef",
                )
    indegree = {n: len(set(r.dependency_refs)) for n, r in by_name.items()}
    dependents: dict[str, list[str]] = {n: [] for n in by_name}
    for r in refs:
        for dep in set(r.dependency_refs):
            dependents[dep].append(r.name)
    ready = [n for n, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    out: list[ComponentRef] = []
    while ready:
        n = heapq.heappop(ready)
        out.append(by_name[n])
        for m in dependents[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                heapq.heappush(ready, m)
    if len(out) != len(refs):
        stuck = sorted(n for n, d in indegree.items() if d > 0)
        cycle = _find_cycle(by_name, stuck)
        raise GpuclusterError(
            f"dependency cycle: {' -> '.join(cycle)}",
            file=file,
            cluster=cluster,
            component=cycle[0],
            key="dependencyRefs",
            fix="remove one of the dependencyRefs in the cycle",
        )
    return out


def _find_cycle(by_name: Mapping[str, ComponentRef], stuck: list[str]) -> list[str]:
    path: list[str] = []
    node = stuck[0]
    while node not in path:
        path.append(node)
        node = sorted(d for d in by_name[node].dependency_refs if d in stuck)[0]
    return path[path.index(node) :] + [node]


# --------------------------------------------------------------------------- public entry points


def criteria_source(cluster: ClusterSpec) -> str:
    """The file that holds ``cluster``'s criteria, as errors name it: the RecipeResult
    (:func:`recipe_display`) for a cluster given by ``recipe:``, else the cluster file
    (``cluster.source``). An error about the criteria names this file, and
    :func:`gpucluster.model.absolute_key` leaves a key in a RecipeResult as it is."""
    return recipe_display(cluster) if cluster.recipe_file else cluster.source


def recipe_display(cluster: ClusterSpec) -> str:
    """The RecipeResult path as errors name it: next to the cluster file as the user named that
    (``recipes/x.yaml`` for ``gpucluster.yaml``), like values files; absolute otherwise."""
    recipe = Path(cluster.recipe_file or "")
    source = Path(cluster.source)
    try:
        return str(source.parent / recipe.relative_to(source.resolve().parent))
    except (ValueError, OSError):
        return str(recipe)

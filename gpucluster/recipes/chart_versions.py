"""Values per chart version: which chart versions gpucluster has values for, and the values it
writes for the version that is installed.

The facts are catalog data (docs/recipes.md, "Values per chart version"):

* the registry's ``chartVersions`` of a component (:class:`gpucluster.recipes.catalog.ChartVersionValues`):
  the version ranges its values were rendered against with real Helm (``checked``), and how the
  values written for the registry's pin are rewritten for each other range (``rename``, ``drop``,
  ``unsupported``, ``defaults``, ``operands``);
* an overlay componentRef's ``chartVersions`` (a range): the recipe's own values for the component
  (a platform's values file, its manifests) are written for versions in that range only
  (``ComponentRef.chart_versions``).

A version is **covered** when one registry entry's range holds it (for that chart name) and the
recipe's range does; the values written for it are the catalog's, rewritten by that entry
(:func:`values_for_version`). A component without ``chartVersions`` was never checked against a
chart (:func:`judge_pin` says ``unverified``). Everything else is **uncovered**: the RecipeResult
reader refuses the pin, or installs the catalog's version when the cluster says
``versionSkew: upgrade`` (:mod:`gpucluster.recipes.recipe_result`). Pure Python, no cdktf.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpucluster.errors import GpuclusterError, Problem
from gpucluster.model import ClusterSpec, Component, Finding, Recipe
from gpucluster.recipes.catalog import (
    Catalog,
    ChartVersionValues,
    RegistryEntry,
    describe,
    range_entry,
)
from gpucluster.values import get_path, set_path, split_path
from gpucluster.versions import version_in_range

COVERED = "covered"
UNCOVERED = "uncovered"
UNVERIFIED = "unverified"

_MISSING = object()


@dataclass(frozen=True)
class PinJudgement:
    """What :func:`judge_pin` says about one ``(chart, version)`` of a component.

    Attributes:
        verdict: :data:`COVERED`, :data:`UNCOVERED` or :data:`UNVERIFIED`.
        entry: the registry entry's range that covers it (COVERED only).
        why: for UNCOVERED, which range refused it (registry or recipe), one phrase.
    """

    verdict: str
    entry: ChartVersionValues | None = None
    why: str = ""


def judge_pin(
    entry: RegistryEntry, chart: str, version: str, recipe_range: str = ""
) -> PinJudgement:
    """Whether gpucluster has coherent values for ``chart`` at ``version`` (module docstring).

    Args:
        entry: the component's registry entry.
        chart / version: the pin (chart name without a repo prefix).
        recipe_range: ``ComponentRef.chart_versions`` of the recipe for the same criteria ('' = any).
    """
    if not entry.chart_versions:
        return PinJudgement(UNVERIFIED)
    cv = range_entry(entry, chart, version)
    if cv is None:
        return PinJudgement(
            UNCOVERED,
            why=f"gpucluster's values for '{entry.name}' are written and checked for {describe(entry)}",
        )
    if recipe_range and not version_in_range(version, recipe_range):
        return PinJudgement(
            UNCOVERED,
            why=f"the recipe's own values for '{entry.name}' (its platform values files and "
            f"manifests) are written for {recipe_range}",
        )
    return PinJudgement(COVERED, cv)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else repr(value) if isinstance(value, str) else str(value)


def _compact(value: Any) -> str:
    """``value`` as one line of flow YAML (keys sorted): ``[{effect: NoSchedule, key: nvidia.com/gpu}]``."""
    if isinstance(value, (list, dict)):
        import yaml  # only for a change message: a warm plan imports no YAML parser

        return yaml.safe_dump(value, default_flow_style=True, sort_keys=True, width=1 << 30).strip()
    return _scalar(value)


def _pop(values: dict[str, Any], path: str) -> Any:
    """Remove the value at ``path`` (and parents it leaves empty); :data:`_MISSING` when absent."""
    parts = split_path(path)
    stack = [values]
    for part in parts[:-1]:
        node = stack[-1].get(part) if isinstance(stack[-1], dict) else None
        if not isinstance(node, dict):
            return _MISSING
        stack.append(node)
    if not isinstance(stack[-1], dict) or parts[-1] not in stack[-1]:
        return _MISSING
    value = stack[-1].pop(parts[-1])
    for depth in range(len(parts) - 1, 0, -1):
        if stack[depth] == {}:
            del stack[depth - 1][parts[depth - 1]]
    return value


def values_for_version(
    cv: ChartVersionValues,
    values: Mapping[str, Any],
    written: Mapping[str, Any] | None = None,
    *,
    catalog_chart: str = "",
) -> tuple[dict[str, Any], list[str], list[tuple[str, str]]]:
    """The values written for a version of ``cv``'s range.

    Args:
        cv: the range entry.
        values: the component's final values (written for the registry's pinned chart).
        written: gpucluster's own values of the component (its catalog ``values.yaml``): an
            ``operands`` path holding the value written there is set to the range's operand
            version; another value there (the file's, the user's) is kept. None: no operand is
            replaced.
        catalog_chart: the chart the values were written for, as the change phrases name it
            (``gpu-operator v26.7.1``, the registry's ``helm`` chart and version); empty: "the
            catalog's chart".

    Returns:
        ``(values, changes, refusals)``: a rewritten copy; one phrase per change made
        (``admission.gpuFractionRuntimeClassName -> admission.gpuPodRuntimeClassName``); and
        ``(path, why)`` per value the version cannot take (a ``drop`` path holding another value,
        an ``unsupported`` path that is set, a ``rename`` whose target is set to another value).
        A ``defaults`` path the values leave unset gets the catalog chart's default (one change
        phrase each); a set one is left as it is.
    """
    out = copy.deepcopy(dict(values))
    written_for = f"the catalog's chart {catalog_chart}" if catalog_chart else "the catalog's chart"
    changes: list[str] = []
    refusals: list[tuple[str, str]] = []
    for src, dst in cv.rename:
        value = _pop(out, src)
        if value is _MISSING:
            continue
        have = get_path(out, dst, _MISSING)
        if have is not _MISSING and have != value:
            refusals.append(
                (
                    dst,
                    f"{dst} is {_scalar(have)} and {src} is {_scalar(value)}, which that version reads as the same key",
                )
            )
            continue
        set_path(out, dst, value)
        changes.append(f"{src} -> {dst}")
    for path, value in cv.drop:
        have = get_path(out, path, _MISSING)
        if have is _MISSING:
            continue
        if type(have) is type(value) and have == value:
            _pop(out, path)
            changes.append(
                f"{path}: {_scalar(value)} dropped (that version has no such key and behaves so)"
            )
        else:
            refusals.append(
                (
                    path,
                    f"{path} is {_scalar(have)}, but that version has no such key (it behaves as {_scalar(value)})",
                )
            )
    for path in cv.unsupported:
        if get_path(out, path, _MISSING) is not _MISSING:
            refusals.append((path, f"{path} is set, but that version has no such key"))
    for path, value in cv.defaults:
        if get_path(out, path, _MISSING) is _MISSING:
            set_path(out, path, copy.deepcopy(value))
            changes.append(
                f"{path}: {_compact(value)} written (a default of {written_for} that this version's chart lacks)"
            )
    for path, version in cv.operands:
        have = get_path(out, path, _MISSING)
        if written is None or have is _MISSING or have == version:
            continue
        if have == get_path(written, path, _MISSING):
            set_path(out, path, version)
            changes.append(
                f"{path}: {_scalar(have)} -> {_scalar(version)} (the operand version that chart installs; "
                f"{_scalar(have)} is what {written_for} installs)"
            )
    return out, changes, refusals


def _own_values(catalog: Catalog, name: str) -> dict[str, Any]:
    """gpucluster's catalog ``components/<name>/values.yaml`` of ``name`` (``{}`` when it has none)."""
    try:
        return catalog.load_values(f"components/{name}/values.yaml")
    except GpuclusterError:
        return {}


def apply_chart_versions(
    cluster: ClusterSpec,
    recipe: Recipe,
    components: Mapping[str, Component],
    catalog: Catalog,
    *,
    locate: Any = None,
) -> tuple[dict[str, Component], list[Finding]]:
    """Every installed component's final values rewritten for the chart version it installs
    (:func:`values_for_version`); runs after every other values layer and policy. ``components``
    is left as it is.

    Returns:
        ``(components, findings)``: a new ``{name: Component}`` in the same order (a component
        whose values need no change is the input's own object), and one info finding
        ``VALUES-FOR-VERSION`` per component whose values changed.

    Raises:
        GpuclusterError: a value the installed version cannot take (one problem each, naming the
            component, the values path and the version; ``locate(component, path)`` gives the
            ``(file, key)`` that set it when the caller can tell).
    """
    findings: list[Finding] = []
    problems: list[Problem] = []
    out = dict(components)
    for name, comp in components.items():
        entry = catalog.components.get(name)
        if entry is None or comp.ref.type != "Helm" or not entry.chart_versions:
            continue
        cv = range_entry(entry, comp.ref.chart, comp.ref.version)
        if cv is None:
            continue  # uncovered pins were refused (or upgraded) where they were read
        values, changes, refusals = values_for_version(
            cv,
            comp.values,
            _own_values(catalog, name) if cv.operands else None,
            catalog_chart=f"{entry.chart} {entry.version}".strip(),
        )
        for path, why in refusals:
            file, key = locate(name, path) if locate is not None else (None, None)
            problems.append(
                Problem(
                    id="VERSION-VALUES",
                    message=f"{comp.ref.chart} {comp.ref.version} cannot take the values gpucluster writes for '{name}': {why}",
                    file=file or cluster.source,
                    cluster=cluster.name,
                    component=name,
                    key=key or path,
                    fix=f"install a version of {describe(entry)}, or remove the value",
                )
            )
        if changes and not refusals:
            out[name] = dataclasses.replace(comp, values=values)
            at = (
                f"{recipe.ref_keys[name]}.version"
                if recipe.file and name in recipe.ref_keys
                else ""
            )
            findings.append(
                Finding(
                    "VALUES-FOR-VERSION",
                    "info",
                    cluster.name,
                    name,
                    at,
                    f"values written for {comp.ref.chart} {comp.ref.version} (range {cv.versions}, checked against "
                    f"{', '.join(cv.checked)}): {'; '.join(changes)}",
                    "none needed",
                    file=recipe.file or "",
                )
            )
    if problems:
        raise GpuclusterError(problems=problems)
    return out, findings

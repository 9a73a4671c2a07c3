"""Overrides no key of the chart reads, found without rendering (``gpucluster plan``).

A user override (``--set``, the cluster file's ``overrides.set``/``values``/``variables``) of a
values path that the pinned chart version neither declares nor names is accepted by Helm and
does nothing: ``gpuoperator:x=5``, a typo such as ``drivr.version``. :func:`unread_override_findings`
gives one ``warning[values.unread]`` finding per such path, with the nearest real key as the fix.

What the chart reads is what ``gpucluster lint``'s ``lint.dead-value`` check starts from
(:mod:`gpucluster.lint.lint`): the chart's own default values (``values.yaml``, its
subcharts' under their alias, coalesced as Helm does), the properties its ``values.schema.json``
declares, and the values paths its templates name literally (:func:`gpucluster.lint.lint.template_references`).
A path is read when it, or a key above it, is declared or named, or when it runs into a
free-form default (``nodeSelector: {}``). lint then confirms by rendering; plan does not render,
so it counts a named key above the path as reading it (``toYaml .Values.x`` passes ``x.y`` on).

The chart is looked for where ``render`` and ``lint`` look without network: the offline chart
folders (``$GPUCLUSTER_CHARTS``) and the chart cache ``gpucluster charts pull`` fills
(:func:`gpucluster.charts.chartcache.default_cache_dir`): the pinned version, else an offline chart
of the same major and minor version (named in the message). A chart found
in neither gives one ``info[values.unchecked]`` note per component instead, naming the command
that makes the check possible.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpucluster.model import Finding, RuntimePlan
from gpucluster.values import deep_merge, split_path

SCHEMA_LIMIT = 8 << 20
"""Largest ``values.schema.json`` read (8 MiB)."""


VALUES_CAP = 5 * 1024 * 1024
"""Largest chart ``values.yaml`` read (bytes): Helm's own limit on one file of a chart
(``loader.MaxDecompressedFileSize``, :data:`gpucluster.charts.pull.UNPACKED_FILE_CAP`)."""
VALUES_EVENTS = VALUES_CAP // 8
"""Most YAML nodes of a chart ``values.yaml`` (:func:`gpucluster.yamlsafe.load_untrusted`)."""


def _load_values(folder: Path) -> dict[str, Any]:
    """``folder/values.yaml``, ``{}`` when absent, read by :func:`gpucluster.yamlsafe.load_untrusted`:
    a chart can come from any mirror or folder, and aliases (``*name``) could make a small file a
    tree of billions of keys for the walk of its keys, so they are refused (no chart of
    ../shared/reference/charts uses one), as are files over :data:`VALUES_CAP`.

    Raises:
        ValueError: it cannot be read, is refused or is not a mapping (the chart is then not
            checked); the message says why.
    """
    from gpucluster.yamlsafe import UntrustedYamlError, load_untrusted

    path = folder / "values.yaml"
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as fh:
            raw = fh.read(VALUES_CAP + 1)
        if len(raw) > VALUES_CAP:
            raise ValueError(f"{path.name} is larger than {VALUES_CAP} bytes")
        data = load_untrusted(raw, max_events=VALUES_EVENTS)
    except (OSError, UntrustedYamlError) as err:
        raise ValueError(f"{path.name}: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} is not a mapping")
    return data


def chart_defaults(chart_dir: Path) -> dict[str, Any]:
    """The chart's default values with its bundled subcharts' (``charts/<name>/values.yaml``) under
    their alias (``Chart.yaml`` ``dependencies``), the parent's values winning, as Helm coalesces them."""
    from gpucluster.lint.render import read_chart_dir

    values = _load_values(chart_dir)
    meta = read_chart_dir(chart_dir)
    aliases = {
        str(d["name"]): str(d.get("alias") or d["name"])
        for d in (meta.dependencies if meta else ())
    }
    sub = chart_dir / "charts"
    if sub.is_dir():
        for child in sorted(sub.iterdir()):
            found = read_chart_dir(child) if child.is_dir() else None
            if found is None:
                continue
            alias = aliases.get(found.name, found.name)
            own = values.get(alias)
            values[alias] = deep_merge(_load_values(child), own if isinstance(own, dict) else {})
    return values


def schema_paths(chart_dir: Path) -> set[tuple[str, ...]]:
    """Every values path the chart's ``values.schema.json`` declares (nested ``properties``)."""
    path = chart_dir / "values.schema.json"
    try:
        if not path.is_file() or path.stat().st_size > SCHEMA_LIMIT:
            return set()
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return set()
    out: set[tuple[str, ...]] = set()

    def walk(node: Any, prefix: tuple[str, ...], depth: int) -> None:
        if not isinstance(node, Mapping) or depth > 32:
            return
        props = node.get("properties")
        if isinstance(props, Mapping):
            for key, sub in props.items():
                out.add((*prefix, str(key)))
                walk(sub, (*prefix, str(key)), depth + 1)

    walk(schema, (), 0)
    return out


class ChartKeys:
    """What one chart version reads (see the module docstring), from its unpacked folder.

    Raises:
        ValueError: the chart's or a subchart's ``values.yaml`` cannot be read.
    """

    def __init__(self, chart_dir: Path):
        from gpucluster.lint.lint import _leaves, template_references

        self.defaults = chart_defaults(chart_dir)
        self.schema = schema_paths(chart_dir)
        self.refs = template_references(chart_dir)
        self._known = sorted(
            {".".join(p) for p, _ in _leaves(self.defaults)}
            | {".".join(p) for p in self.schema}
            | {".".join((*scope, *r)) for scope, refs in self.refs.items() for r in refs}
        )

    def reads(self, path: tuple[str, ...]) -> bool:
        """True when ``path`` or a key above it is declared or named (module docstring)."""
        from gpucluster.lint.lint import _declared, _referenced

        if _declared(self.defaults, path):
            return True
        return any(
            path[:n] in self.schema or _referenced(path[:n], self.refs)
            for n in range(1, len(path) + 1)
        )

    def nearest(self, dotted: str) -> str | None:
        """The declared or named key closest to ``dotted`` (difflib), or None."""
        close = difflib.get_close_matches(dotted, self._known, n=1, cutoff=0.5)
        return close[0] if close else None


def _user_paths(plan: RuntimePlan, catalog) -> dict[str, list[tuple[str, str]]]:
    """Per canonical component: ``(dotted path, source)`` of every user override, in input order
    (the component toggle ``enabled`` left out: gpucluster reads it)."""
    from gpucluster.recipes.overrides import override_paths, resolved_overrides

    out: dict[str, list[tuple[str, str]]] = {}
    for component, override in resolved_overrides(plan.cluster, catalog):
        for path in override_paths(override):
            if path != "enabled" and (path, override.source) not in out.get(component, []):
                out.setdefault(component, []).append((path, override.source or ""))
    return out


def offline_chart_folders(env: Mapping[str, str] | None = None) -> list[Path]:
    """The folders of ``$GPUCLUSTER_CHARTS`` (split at ``os.pathsep``) that exist: what ``render``
    and ``lint`` read without ``--charts`` (a missing one is their error, not plan's)."""
    import os

    from gpucluster.lint.render import CHARTS_ENV

    env = os.environ if env is None else env
    return [
        Path(p) for p in (env.get(CHARTS_ENV) or "").split(os.pathsep) if p and Path(p).is_dir()
    ]


def _same_minor(a: str, b: str) -> bool:
    """True when versions ``a`` and ``b`` share major and minor (``v26.7.0``, ``26.7.1``): a chart
    of another minor may have other keys, so it does not stand in for the pinned one here."""
    from gpucluster.lint.render import normalize_version

    return normalize_version(a).split(".")[:2] == normalize_version(b).split(".")[:2]


def unread_override_findings(
    plans: Iterable[RuntimePlan], chart_folders: Iterable[Path] = ()
) -> list[Finding]:
    """``warning[values.unread]`` for each user override path no key of its chart version reads,
    ``info[values.unchecked]`` once per component whose chart is not at hand (module docstring).

    Args:
        plans: the clusters' plans (their ``cluster.overrides`` are the user's).
        chart_folders: offline chart folders (``$GPUCLUSTER_CHARTS``), looked in before the cache.
    """
    from gpucluster.lint.render import ChartSources
    from gpucluster.recipes.catalog import load_catalog

    catalog = load_catalog()
    sources = ChartSources(list(chart_folders), pull=False)
    keys: dict[Path, ChartKeys | str] = {}  # a str: why its values cannot be read
    findings: list[Finding] = []
    for plan in plans:
        user = _user_paths(plan, catalog)
        for component, paths in user.items():
            node = next(
                (n for n in plan.nodes if n.component == component and n.kind == "chart"), None
            )
            if node is None or not node.chart:
                continue
            chart = f"chart {node.chart} {node.version}"
            found = sources.locate(node.repository, node.chart, node.version).chart
            how = sources.locate(node.repository, node.chart, node.version).how
            if found is not None and how not in ("exact", "cached"):
                if _same_minor(found.version, node.version):
                    chart = f"chart {node.chart} {found.version} (standing in for {node.version})"
                else:
                    found = None
            if found is None:
                findings.append(
                    Finding(
                        id="values.unchecked",
                        severity="info",
                        cluster=plan.cluster.name,
                        component=component,
                        key=paths[0][0],
                        message=f"the overrides of {component} are not checked against {chart}: "
                        "it is neither in the chart cache nor in $GPUCLUSTER_CHARTS",
                        fix="run gpucluster charts pull, then plan again (or gpucluster lint, which "
                        "renders the chart)",
                    )
                )
                continue
            folder = found.path
            if folder not in keys:
                try:
                    keys[folder] = ChartKeys(folder)
                except ValueError as err:  # defaults that cannot be read: nothing is known
                    keys[folder] = str(err).splitlines()[0][:300]
            known = keys[folder]
            if isinstance(known, str):
                findings.append(
                    Finding(
                        id="values.unchecked",
                        severity="info",
                        cluster=plan.cluster.name,
                        component=component,
                        key=paths[0][0],
                        message=f"the overrides of {component} are not checked against {chart} "
                        f"({folder}): its default values cannot be read: {known}",
                        fix="use the chart as its repository publishes it (gpucluster charts pull "
                        "--refresh), or correct the chart folder",
                    )
                )
                continue
            for dotted, source in paths:
                if known.reads(tuple(split_path(dotted))):
                    continue
                close = known.nearest(dotted)
                findings.append(
                    Finding(
                        id="values.unread",
                        severity="warning",
                        cluster=plan.cluster.name,
                        component=component,
                        key=dotted,
                        message=f"override '{dotted}' ({source or 'cluster file'}) is read by no values key "
                        f"of {chart}: neither its values.yaml (subcharts included) nor its "
                        "values.schema.json declares it, and no template names it; Helm accepts it and "
                        "it does nothing",
                        fix=(
                            f"write the key the chart reads ({close}), or remove the override"
                            if close
                            else "remove the override, or write a key the chart's values.yaml declares"
                        ),
                    )
                )
    return findings

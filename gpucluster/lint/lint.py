"""``gpucluster lint``: checks on the objects Helm renders for every release (:mod:`gpucluster.lint.render`).

Checks (finding ids; ``error`` findings make ``gpucluster lint`` exit 2):

* ``lint.schema`` -- every object against the Kubernetes 1.34 schemas (kubernetes-validate,
  strict) or, for custom resources, against its CRD: the CRDs the stack's charts carry
  (``crds/`` and rendered ``CustomResourceDefinition`` objects) and the extra CRD folders given
  (``--crds``), as the API server stores it (:func:`gpucluster.lint.lint_schema.api_server_view`: nulls
  of non-nullable fields pruned, schema defaults filled). ``lint.schema-unknown`` (warning): no
  schema for the kind.
* ``lint.schema-null`` (warning) -- one per field of a custom resource set to ``null`` whose CRD
  schema is not ``nullable: true`` and has no ``default``
  (:class:`gpucluster.lint.lint_schema.NullField`): server-side apply (``kubectl apply
  --server-side``, Helm 4) refuses the object (``... in body must be of type object``), a create
  drops the null (no effect). It names the object, the field path and the fix (remove the key;
  ``{}`` / ``[]`` for an object / a list).
* ``lint.cel`` -- every custom resource that passes its CRD's schema against the CRD's CEL
  validation rules (``x-kubernetes-validations``, :mod:`gpucluster.lint.lint_cel`), evaluated
  as on create: a rule that evaluates to false is an ``error`` with the rule's message; a rule
  lint cannot evaluate (a transition rule, a Kubernetes CEL library function) is an ``info``
  finding whose message begins ``not checked:``.
* ``lint.dead-value`` -- a values path gpucluster passes to an upstream chart (catalog, profile,
  scheduling injection, plugin patches: ``error``; a user override: ``warning`` naming the closest
  existing key) that the chart, subcharts included, neither declares in its default values nor
  reads: removing it leaves every rendered template byte-identical. Generated charts (manifests,
  gates) are not checked: their ``contentHash``/``gatedHash`` values are unread on purpose (a
  change of them upgrades the release).
* ``lint.placement-gpu`` -- every per-node agent (DaemonSet, and the operator resources that
  become DaemonSets: ClusterPolicy, NicClusterPolicy, Skyhook) tolerates every taint of the
  cluster's GPU nodes (GPU pool taints; for clusters without pools, the keyed
  ``scheduling.accelerated.tolerations``, else the platform's ``Platform.gpu_taints``: OKE and
  NVKE GPU nodes are tainted ``nvidia.com/gpu:NoSchedule``) and does not select labels GPU nodes
  lack.
* ``lint.placement-pinned`` -- no per-node agent is pinned to the system nodes
  (``scheduling.system.nodeSelector``).
* ``lint.placement-system`` -- with ``scheduling.system`` set, every Deployment, StatefulSet,
  ReplicaSet, Job and CronJob (and Prometheus/Alertmanager resources, which become
  StatefulSets) selects the system nodes and tolerates the system tolerations.
* ``lint.runtimeclass`` -- every RuntimeClass an object names (``runtimeClassName`` in pod specs,
  ``*RuntimeClassName`` settings operators read, such as KAI's admission configuration) is a
  RuntimeClass of the stack or the one the GPU Operator creates (ClusterPolicy
  ``spec.operator.runtimeClass``, CRD default ``nvidia``).
* ``lint.nfd-rule-unmatchable`` -- every feature a NodeFeatureRule matches (``pci.device``, ...)
  is published by the NFD worker: a feature the worker config's ``core.noPublishFeatures`` hides
  never reaches the NodeFeature objects, so the rule can never match.
* ``lint.image-unpinned`` -- every container image has a tag other than ``latest`` or a digest.
* ``lint.public-registry`` -- with ``images.mirror``, no rendered object names an image outside
  the mirror (after the rewrite of :mod:`gpucluster.charts.imagemirror`).
* ``lint.credential`` -- no password, token or secret as a literal string in the values.
* ``lint.service-ref`` -- every in-cluster Service a container reaches by URL (an ``http(s)://``
  URL in its ``args``, ``command`` or ``env`` values whose host is a bare Service name, or
  ``<name>.<namespace>.svc[.cluster.local]``) is a Service some release of the stack renders:
  prometheus-adapter's ``--prometheus-url=http://kube-prometheus-prometheus:9090/`` with
  kube-prometheus-stack turned off reaches nothing.

A check whose answer depends on a release that was not rendered (its chart could not be had: a
RuntimeClass or a CRD another chart may provide) is not decided: an ``info`` finding with the
check's id whose message begins ``not decided:`` and names those releases
(:attr:`LintFinding.undecided`), never an error asking to change a setting that may be right.
``gpucluster lint`` lists them after the releases not checked. When no upstream chart of the
stacks could be rendered, nothing the charts install was checked: the command exits
:data:`EXIT_NOTHING_CHECKED` (unless an error was found: 2).
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpucluster.charts.imagemirror import POD_TEMPLATE_PATHS, is_test_hook  # noqa: E402,F401  (one place for lint and images)
from gpucluster.lint.render import (
    LintFinding,
    RenderedRelease,
    RenderResult,
    iter_objects,
    sort_findings,
)
from gpucluster.model import RuntimePlan, Toleration
from gpucluster.values import credential_paths

SYSTEM_KINDS = ("Deployment", "StatefulSet", "ReplicaSet", "Job", "CronJob")
"""Workloads that must land on system nodes when ``scheduling.system`` is set."""

AGENT_RESOURCES = {
    # (group, kind): (tolerations path, node selector path or None)
    ("nvidia.com", "ClusterPolicy"): (("spec", "daemonsets", "tolerations"), None),
    ("mellanox.com", "NicClusterPolicy"): (("spec", "tolerations"), None),
    ("skyhook.nvidia.com", "Skyhook"): (
        ("spec", "additionalTolerations"),
        ("spec", "nodeSelectors", "matchLabels"),
    ),
}
"""Operator resources whose operator runs DaemonSets on the nodes they select (CRD field names:
ClusterPolicy ``spec.daemonsets.tolerations``; NicClusterPolicy ``spec.tolerations``; Skyhook
``spec.additionalTolerations``, ``spec.nodeSelectors``)."""

EXIT_NOTHING_CHECKED = 4
"""Exit status of ``gpucluster lint`` when no upstream chart could be rendered and no error was
found: nothing the charts install was checked, so the lint neither passed nor failed (as
``upgrade-check``'s 4, unknown)."""

SCHEDULED_RESOURCES = {
    ("monitoring.coreos.com", "Prometheus"): (("spec", "tolerations"), ("spec", "nodeSelector")),
    ("monitoring.coreos.com", "Alertmanager"): (("spec", "tolerations"), ("spec", "nodeSelector")),
}
"""Resources the Prometheus Operator turns into StatefulSets (system-node workloads)."""


# --------------------------------------------------------------------------- helpers


def _get(doc: Any, path: Sequence[str]) -> Any:
    for part in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(part)
    return doc


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else ``{}`` (a field of the wrong type, which
    ``lint.schema`` reports, is not read by the other checks)."""
    return value if isinstance(value, Mapping) else {}


def _dotted(parts: Sequence[str]) -> str:
    return ".".join(str(p).replace(".", "\\.") for p in parts)


def _obj_key(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{doc.get('kind')}/{meta.get('name', '?')}"


def _group(doc: Mapping[str, Any]) -> str:
    api = str(doc.get("apiVersion", ""))
    return api.rpartition("/")[0]


def _is_test_hook(doc: Mapping[str, Any]) -> bool:
    """Helm test hooks (``helm.sh/hook: test``): helm_release never runs them."""
    return is_test_hook(doc)


def tolerates(tolerations: Any, key: str, value: str, effect: str) -> bool:
    """True when one of ``tolerations`` (Kubernetes list) tolerates the taint ``key=value:effect``."""
    for t in tolerations if isinstance(tolerations, list) else []:
        if not isinstance(t, Mapping):
            continue
        op = t.get("operator") or "Equal"
        t_effect = t.get("effect") or ""
        if t_effect and t_effect != effect:
            continue
        if not t.get("key"):
            if op == "Exists":
                return True
            continue
        if t.get("key") != key:
            continue
        if op == "Exists" or str(t.get("value") or "") == value:
            return True
    return False


@dataclass
class Placement:
    """Node facts of one cluster used by the placement checks.

    Attributes:
        gpu_taints: ``(key, value, effect)`` the GPU nodes carry (NoSchedule/NoExecute only).
        gpu_labels: labels every GPU node carries (GPU pool labels).
        system_selector / system_tolerations: ``scheduling.system`` (empty: not set).
    """

    gpu_taints: list[tuple[str, str, str]] = field(default_factory=list)
    gpu_labels: dict[str, str] = field(default_factory=dict)
    system_selector: dict[str, str] = field(default_factory=dict)
    system_tolerations: list[Toleration] = field(default_factory=list)


def platform_gpu_taints(service: str) -> list[tuple[str, str, str]]:
    """``(key, value, effect)`` of the GPU-node taints the platform serving ``service`` declares
    (:attr:`gpucluster.model.Platform.gpu_taints`); empty for an unknown service or none declared."""
    from gpucluster.plugins import platforms
    from gpucluster.recipes.scheduling import parse_taint

    platform = platforms().get(service)
    out: list[tuple[str, str, str]] = []
    for spec in platform.gpu_taints if platform is not None else ():
        t = parse_taint(spec)
        if t.effect != "PreferNoSchedule" and (t.key, t.value, t.effect) not in out:
            out.append((t.key, t.value, t.effect))
    return out


def placement_of(plan: RuntimePlan) -> Placement:
    """The :class:`Placement` facts of a plan's cluster: the GPU pools' taints, else the keyed
    ``scheduling.accelerated.tolerations``, else the platform's GPU-node taints
    (:func:`platform_gpu_taints`)."""
    from gpucluster.recipes.scheduling import gpu_pool_node_selector

    cluster = plan.cluster
    taints: list[tuple[str, str, str]] = []
    pools = [p for p in cluster.pools if p.gpu]
    if pools:
        for pool in pools:
            for t in pool.taints:
                if t.effect != "PreferNoSchedule" and (t.key, t.value, t.effect) not in taints:
                    taints.append((t.key, t.value, t.effect))
    else:
        for tol in cluster.scheduling.accelerated_tolerations:
            if tol.key and tol.effect in ("NoSchedule", "NoExecute"):
                entry = (tol.key, tol.value or "", tol.effect)
                if entry not in taints:
                    taints.append(entry)
        if not taints:
            taints = platform_gpu_taints(cluster.criteria.service)
    labels = gpu_pool_node_selector(cluster) or dict(cluster.scheduling.accelerated_node_selector)
    return Placement(
        gpu_taints=taints,
        gpu_labels=labels,
        system_selector=dict(cluster.scheduling.system_node_selector),
        system_tolerations=list(cluster.scheduling.system_tolerations),
    )


def _required_affinity_labels(pod: Mapping[str, Any]) -> list[dict[str, set[str]]]:
    """Required node-affinity terms as ``[{label: allowed values}]`` (``In`` expressions only)."""
    terms = (
        _get(
            pod,
            (
                "affinity",
                "nodeAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
                "nodeSelectorTerms",
            ),
        )
        or []
    )
    out = []
    for term in terms if isinstance(terms, list) else []:
        wanted: dict[str, set[str]] = {}
        exprs = _mapping(term).get("matchExpressions")
        for expr in exprs if isinstance(exprs, list) else []:
            if isinstance(expr, Mapping) and expr.get("operator") == "In":
                wanted[str(expr.get("key"))] = {str(v) for v in expr.get("values") or []}
        out.append(wanted)
    return out


# --------------------------------------------------------------------------- checks


@dataclass
class _Ctx:
    plan: RuntimePlan
    releases: list[RenderedRelease]
    placement: Placement
    findings: list[LintFinding] = field(default_factory=list)
    unrendered: tuple[str, ...] = ()
    """Releases of the cluster not rendered, whole or in part (:func:`unrendered_releases`)."""

    def add(
        self,
        release: RenderedRelease | None,
        id: str,
        severity: str,
        message: str,
        fix: str,
        key: str = "",
        component: str = "",
    ) -> None:
        self.findings.append(
            LintFinding(
                id,
                severity,
                message,
                fix=fix,
                cluster=self.plan.cluster.name,
                component=component or (release.node.component if release else ""),
                release=release.name if release else "",
                key=key,
            )
        )

    def add_or_undecided(
        self,
        release: RenderedRelease | None,
        id: str,
        severity: str,
        message: str,
        fix: str,
        key: str = "",
        *,
        undecided: str,
    ) -> None:
        """:meth:`add`, or -- when a release of the cluster was not rendered and may hold what
        was missed -- a finding of the same id that says it is not decided (``info``,
        :attr:`LintFinding.undecided`), its message ``undecided``: what was looked for."""
        if not self.unrendered:
            self.add(release, id, severity, message, fix, key)
            return
        self.findings.append(
            LintFinding(
                id,
                "info",
                f"not decided: {undecided}; a release not rendered may provide it: "
                + ", ".join(self.unrendered),
                fix="make their charts available (gpucluster charts pull, a mirror or a --charts folder) "
                "and run lint again",
                cluster=self.plan.cluster.name,
                component=release.node.component if release else "",
                release=release.name if release else "",
                key=key,
                undecided=self.unrendered,
            )
        )


def unrendered_releases(releases: Iterable[RenderedRelease]) -> tuple[str, ...]:
    """``<release>`` of every chart release without a chart, ``<release> subcharts a, b`` of one
    rendered without some of its subcharts (:func:`gpucluster.lint.render.unverified`), in
    release order."""
    out = []
    for release in releases:
        if release.node.kind == "chart" and release.chart is None:
            out.append(release.name)
        elif release.missing_subcharts:
            out.append(f"{release.name} subcharts {', '.join(release.missing_subcharts)}")
    return tuple(out)


def nothing_checked(result: RenderResult) -> bool:
    """True when the plans have upstream chart releases and not one of them was rendered: only
    gpucluster's generated charts (manifests, gates) could be checked."""
    charts = [r for r in result.releases if r.node.kind == "chart"]
    return bool(charts) and all(r.chart is None for r in charts)


def crd_index(
    releases: Iterable[RenderedRelease], extra_crds: Iterable[tuple[Mapping[str, Any], str]] = ()
) -> Any:
    """The :class:`gpucluster.lint.lint_schema.CrdIndex` lint validates custom resources
    against: the CRDs of each release's chart ``crds/`` folders and its rendered
    ``CustomResourceDefinition`` objects, in release order, then ``extra_crds`` (``--crds``);
    the first definition of a ``(group, version, kind)`` wins."""
    from gpucluster.lint.lint_schema import CrdIndex

    index = CrdIndex()
    for release in releases:
        chart = release.chart.name if release.chart is not None else release.name
        index.add_all((doc, f"chart {chart} crds/{name}") for name, doc in release.crds)
        index.add_all((doc, f"release {release.name} {path}") for path, doc in release.objects)
    index.add_all(extra_crds)
    return index


def check_schemas(
    ctx: _Ctx, extra_crds: Iterable[tuple[Mapping[str, Any], str]], memo: dict | None = None
) -> None:
    """``lint.schema``: built-in kinds against Kubernetes 1.34, custom resources against CRDs.

    ``memo`` (object id -> (object, schema source, errors)) skips objects already validated
    against the same schema source: the renderer shares parsed objects between releases whose
    templates rendered identically (the objects are read-only)."""
    from gpucluster.lint.lint_schema import (
        K8S_VERSION,
        builtin_validator,
        check_custom_resource,
        errors_of,
    )

    index = crd_index(ctx.releases, extra_crds)
    for release, path, doc in iter_objects(ctx.releases):
        api, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
        group, _, version = api.rpartition("/")
        key = (group, version, kind)
        raw_schema = None
        if key in index:
            validator, against = index.validator(key), f"CRD ({index.source(key)})"
            raw_schema = index.raw_schema(key)
        else:
            validator, against = builtin_validator(api, kind), f"Kubernetes {K8S_VERSION[:4]}"
        if validator is None:
            ctx.add_or_undecided(
                release,
                "lint.schema-unknown",
                "warning",
                f"{_obj_key(doc)} ({api}, {path}): no schema for this kind",
                "add the CRD folder with --crds",
                key=_obj_key(doc),
                undecided=f"{_obj_key(doc)} ({api}, {path}): no CRD of the rendered releases or --crds defines this kind",
            )
            continue
        seen = memo.get(id(doc)) if memo is not None else None
        if seen is not None and seen[0] is doc and seen[1] == against:
            errors, nulls, failed, not_checked = seen[2]
        else:
            if raw_schema is not None:
                checked = check_custom_resource(
                    doc, raw_schema, validator, status_subresource=index.status_subresource(key)
                )
                errors, nulls = checked.errors, checked.nulls
                failed, not_checked = checked.failed, checked.not_checked
            else:
                # built-in kinds' strict schemas already accept the nulls Helm renders
                # (metadata.creationTimestamp: null), which the API server's decoder reads as unset
                errors, nulls, failed, not_checked = errors_of(validator, doc), [], [], []
            if memo is not None:
                memo[id(doc)] = (doc, against, (errors, nulls, failed, not_checked))
        for outcome in failed:
            ctx.add(
                release,
                "lint.cel",
                "error",
                f"{_obj_key(doc)} ({path}) fails a validation rule of its CRD ({index.source(key)}) at "
                f"{outcome.path or '(root)'}: {outcome.message} (rule: {outcome.rule})",
                "fix the value that renders this field (catalog values, overrides or manifest template)",
                key=f"{_obj_key(doc)}.{outcome.path}" if outcome.path else _obj_key(doc),
            )
        for outcome in not_checked:
            ctx.add(
                release,
                "lint.cel",
                "info",
                f"not checked: {_obj_key(doc)} ({path}) rule at {outcome.path or '(root)'}: "
                f"{outcome.rule}: {outcome.message}",
                "the API server evaluates it when the object is applied",
                key=f"{_obj_key(doc)}.{outcome.path}" if outcome.path else _obj_key(doc),
            )
        for null in nulls:
            _add_null_field(ctx, release, path, doc, against, null)
        if errors:
            ctx.add(
                release,
                "lint.schema",
                "error",
                f"{_obj_key(doc)} ({path}) fails the {against} schema: " + "; ".join(errors),
                "fix the value that renders this field (catalog values, overrides or manifest template)",
                key=_obj_key(doc),
            )


def _leaves(values: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(values, Mapping) and values:
        for k in sorted(values, key=str):
            yield from _leaves(values[k], (*prefix, str(k)))
    elif prefix:
        yield prefix, values


def _declared(defaults: Any, path: Sequence[str]) -> bool:
    """True when ``path`` exists in the chart defaults, or runs into a free-form default
    (an empty map or null, e.g. ``nodeSelector: {}``)."""
    node = defaults
    for part in path:
        if node is None or (isinstance(node, Mapping) and not node):
            return True
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def _without(values: Mapping[str, Any], paths: Iterable[Sequence[str]]) -> dict[str, Any]:
    out = copy.deepcopy(dict(values))
    for path in paths:
        node: Any = out
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return out


def _differs(a: Mapping[str, str], b: Mapping[str, str], noisy: set[str]) -> bool:
    keys = (set(a) | set(b)) - noisy
    return any(a.get(k) != b.get(k) for k in keys)


_VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_INDEX_REF = re.compile(r"index\s+\$?\.Values((?:\s+\"[^\"]+\")+)")


def template_references(chart_dir: Any) -> dict[tuple[str, ...], set[tuple[str, ...]]]:
    """Values paths the chart's templates name literally, per scope: ``()`` for the chart's own
    templates, ``(alias,)`` for each subchart in ``charts/`` (``.Values.a.b`` and
    ``index .Values "a" "b"`` forms; ``global`` paths are valid in every scope)."""
    import os
    from pathlib import Path

    from gpucluster.lint.render import read_chart_dir

    root = Path(chart_dir)
    scopes: dict[tuple[str, ...], Path] = {(): root}
    meta = read_chart_dir(root)
    aliases = {
        str(d["name"]): str(d.get("alias") or d["name"])
        for d in (meta.dependencies if meta else ())
    }
    sub = root / "charts"
    if sub.is_dir():
        for child in sorted(sub.iterdir()):
            found = read_chart_dir(child) if child.is_dir() else None
            if found is not None:
                scopes[(aliases.get(found.name, found.name),)] = child
    out: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
    for scope, folder in scopes.items():
        refs: set[tuple[str, ...]] = set()
        for dirpath, _dirnames, filenames in os.walk(folder / "templates", followlinks=True):
            for name in filenames:
                try:
                    text = (Path(dirpath) / name).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                refs |= {
                    tuple(m.group(1).lstrip(".").split(".")) for m in _VALUES_REF.finditer(text)
                }
                refs |= {
                    tuple(re.findall(r'"([^"]+)"', m.group(1))) for m in _INDEX_REF.finditer(text)
                }
        out[scope] = refs
    return out


def _referenced(
    path: tuple[str, ...], refs: Mapping[tuple[str, ...], set[tuple[str, ...]]]
) -> bool:
    if path in refs.get((), set()):
        return True
    if path[0] == "global":
        return any(path in r for r in refs.values())
    return len(path) > 1 and path[1:] in refs.get((path[0],), set())


def dead_paths(release: RenderedRelease) -> list[tuple[str, ...]]:
    """Values paths of ``release`` that the chart neither declares nor reads (see module docstring).

    Candidates are leaves of the values Helm receives that are absent from the chart's coalesced
    defaults and that no template names literally (:func:`template_references`); a candidate is
    dead when rendering without it gives the same templates (templates that differ between two
    renders with the same values -- random certificates, passwords -- are left out of the
    comparison), so values a template passes on wholesale (``toYaml .Values.x``) count as read.
    """
    skip = set(release.missing_subcharts)
    candidates = [
        p
        for p, _ in _leaves(release.values)
        if p[0] not in skip and not _declared(release.defaults, p)
    ]
    if candidates:
        refs = template_references(release.chart)
        candidates = [p for p in candidates if not _referenced(p, refs)]
    if not candidates:
        return []
    base = release.manifests
    without_all = release.render_with(_without(release.values, candidates))
    noisy: set[str] = set()
    if _differs(base, without_all, noisy):
        again = release.render_with(release.values, fresh=True)
        noisy = {k for k in set(base) | set(again) if base.get(k) != again.get(k)}
    if not _differs(base, without_all, noisy):
        return candidates
    dead = []
    for path in candidates:
        if not _differs(base, release.render_with(_without(release.values, [path])), noisy):
            dead.append(path)
    return dead


def _declared_paths(defaults: Any) -> list[str]:
    return [_dotted(p) for p, _ in _leaves(defaults)]


def check_dead_values(ctx: _Ctx) -> None:
    """``lint.dead-value`` (see module docstring)."""
    from gpucluster.recipes import overrides as overrides_mod
    from gpucluster.recipes.catalog import load_catalog

    catalog = load_catalog()
    for release in ctx.releases:
        if (
            release.node.kind != "chart"
            or release.chart is None
            or not release.manifests
            and not release.objects
        ):
            continue
        dead = dead_paths(release)
        if not dead:
            continue
        declared = None
        entry = catalog.components.get(release.node.component)
        sched = entry.scheduling if entry is not None else None
        sched_paths = set()
        if sched is not None:
            for attr in (
                "system_node_selector",
                "system_tolerations",
                "accelerated_node_selector",
                "accelerated_tolerations",
                "accelerated_taint_str",
                "node_count",
            ):
                sched_paths |= set(getattr(sched, attr, ()) or ())
        for path in dead:
            dotted = _dotted(path)
            chart = f"chart {release.node.chart} {release.node.version}"
            user = overrides_mod.source_of(
                ctx.plan.cluster, catalog, release.node.component, dotted
            )
            if user:
                declared = declared if declared is not None else _declared_paths(release.defaults)
                close = difflib.get_close_matches(dotted, declared, n=1, cutoff=0.5)
                hint = f" (closest existing key: {close[0]})" if close else ""
                ctx.add(
                    release,
                    "lint.dead-value",
                    "warning",
                    f"override '{dotted}' ({user}) is neither in the defaults of {chart} (subcharts included) nor read by "
                    f"its templates: it has no effect{hint}",
                    f"write the key the chart reads{' (' + close[0] + ')' if close else ''}, or remove the override",
                    key=dotted,
                )
                continue
            origin = next(
                (p for p in sched_paths if dotted == p or dotted.startswith(p + ".")), None
            )
            where = (
                f"the registry's nodeScheduling path {origin}"
                if origin
                else "the catalog/profile/plugin values"
            )
            ctx.add(
                release,
                "lint.dead-value",
                "error",
                f"values path '{dotted}' (from {where}) is neither in the defaults of {chart} (subcharts included) nor "
                "read by its templates: it has no effect",
                "move the value to the key the chart reads, or remove it (docs/catalog-sources.md)",
                key=dotted,
            )


_EMPTY_OF_TYPE = {"object": "{}", "array": "[]"}
"""The empty value that keeps a field of that schema type present (``lint.schema-null`` fix)."""


def _add_null_field(
    ctx: _Ctx, release: RenderedRelease, path: str, doc: Mapping[str, Any], against: str, null: Any
) -> None:
    """``lint.schema-null`` for one :class:`gpucluster.lint.lint_schema.NullField` of ``doc``."""
    of_type = f"of type {null.type}" if null.type else "of its schema's type"
    empty = _EMPTY_OF_TYPE.get(null.type)
    ctx.add(
        release,
        "lint.schema-null",
        "warning",
        f"{_obj_key(doc)} ({path}) sets {null.path} to null, which the {against} schema does not make "
        f'nullable: server-side apply (Helm 4, kubectl apply --server-side) refuses the object ({null.path}: Invalid value: "null": '
        f"{null.path} in body must be {of_type}); a create or client-side apply drops the null, so it has no effect",
        f"remove the key from the values or template that renders it (a values null meant to delete a chart default reaches "
        f"the object when the chart copies the whole block){f', or set it to {empty}' if empty else ''}",
        key=f"{_obj_key(doc)}.{null.path}",
    )


def _pod_spec(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    path = POD_TEMPLATE_PATHS.get(str(doc.get("kind")))
    spec = _get(doc, path) if path else None
    return spec if isinstance(spec, Mapping) else None


def _selector_conflicts(selector: Mapping[str, Any], labels: Mapping[str, str]) -> list[str]:
    return [
        f"{k}={v}"
        for k, v in sorted((selector or {}).items())
        if k in labels and str(labels[k]) != str(v)
    ]


def _check_agent_placement(
    ctx: _Ctx, release: RenderedRelease, path: str, name: str, agent: tuple[Any, Any, Any]
) -> None:
    """``lint.placement-gpu`` / ``lint.placement-pinned`` for one per-node agent."""
    pl = ctx.placement
    system = pl.system_selector
    tolerations, selector, affinity = agent
    missing = [
        f"{k}={v}:{e}" if v else f"{k}:{e}"
        for k, v, e in pl.gpu_taints
        if not tolerates(tolerations, k, v, e)
    ]
    if missing:
        ctx.add(
            release,
            "lint.placement-gpu",
            "error",
            f"{name} ({path}) runs a per-node agent but does not tolerate the GPU node taint(s) {', '.join(missing)}: "
            "it never runs on GPU nodes",
            "add the GPU taints to the tolerations at the values path the chart reads (registry nodeScheduling."
            "accelerated.tolerationPaths or the manifest template)",
            key=name,
        )
    conflicts = _selector_conflicts(selector, pl.gpu_labels)
    if conflicts:
        ctx.add(
            release,
            "lint.placement-gpu",
            "error",
            f"{name} ({path}) selects {', '.join(conflicts)}, which GPU nodes do not carry: it never runs on them",
            "remove the selector or select a label GPU nodes carry",
            key=name,
        )
    if system:
        pinned = [
            f"{k}={v}"
            for k, v in sorted(system.items())
            if str(selector.get(k)) == str(v) and pl.gpu_labels.get(k) != v
        ]
        pinned += [
            f"{k} in {sorted(vals)}"
            for term in affinity
            for k, vals in sorted(term.items())
            if k in system and str(system[k]) in vals and pl.gpu_labels.get(k) not in vals
        ]
        if pinned:
            ctx.add(
                release,
                "lint.placement-pinned",
                "error",
                f"{name} ({path}) is a per-node agent pinned to the system nodes ({', '.join(pinned)}): GPU nodes "
                "lose it",
                "remove this values path from the registry's nodeScheduling.system.nodeSelectorPaths",
                key=name,
            )


def _check_system_placement(
    ctx: _Ctx,
    release: RenderedRelease,
    path: str,
    doc: Mapping[str, Any],
    name: str,
    placed: tuple[Any, Any, Any],
) -> None:
    """``lint.placement-system`` / ``lint.placement-system-hook`` for one system workload."""
    pl = ctx.placement
    system = pl.system_selector
    selector, tolerations, affinity = placed
    unmet = [
        f"{k}={v}"
        for k, v in sorted(system.items())
        if str(selector.get(k)) != str(v)
        and not (affinity and all(str(v) in term.get(k, ()) for term in affinity))
    ]
    untolerated = [
        f"{t.key}:{t.effect}" if t.effect else str(t.key)
        for t in pl.system_tolerations
        if t.key and not tolerates(tolerations, t.key, t.value or "", t.effect or "NoSchedule")
    ]
    if unmet or untolerated:
        what = []
        if unmet:
            what.append(f"does not select the system nodes ({', '.join(unmet)})")
        if untolerated:
            what.append(f"does not tolerate the system taints ({', '.join(untolerated)})")
        hook = str(((doc.get("metadata") or {}).get("annotations") or {}).get("helm.sh/hook", ""))
        if (
            hook
            and release.node.kind == "chart"
            and not pod_selector_from_values(
                release,
                doc,
                fields=(("nodeSelector",) if unmet else ())
                + (("tolerations",) if untolerated else ()),
            )
        ):
            ctx.add(
                release,
                "lint.placement-system-hook",
                "warning",
                f"{name} ({path}) is a Helm {hook} hook of the upstream chart whose placement no value sets "
                f"(it {' and '.join(what)}): it runs wherever its hard-coded tolerations allow",
                "nothing to change in gpucluster's values; keep a node it tolerates schedulable, or ask upstream for a "
                "values knob",
                key=name,
            )
            return
        ctx.add(
            release,
            "lint.placement-system",
            "error",
            f"{name} ({path}) {' and '.join(what)}, although scheduling.system is set",
            "add the values path that places this workload to the registry's nodeScheduling.system paths (or the "
            "manifest/gate template)",
            key=name,
        )


def check_placement(ctx: _Ctx) -> None:
    """``lint.placement-gpu`` / ``lint.placement-pinned`` / ``lint.placement-system`` (module docstring)."""
    pl = ctx.placement
    system = pl.system_selector
    for release, path, doc in iter_objects(ctx.releases):
        if not isinstance(doc, Mapping) or _is_test_hook(doc):
            continue
        kind = str(doc.get("kind"))
        gk = (_group(doc), kind)
        name = _obj_key(doc)
        agent = None
        if kind == "DaemonSet":
            pod = _pod_spec(doc) or {}
            agent = (
                pod.get("tolerations"),
                _mapping(pod.get("nodeSelector")),
                _required_affinity_labels(pod),
            )
        elif gk in AGENT_RESOURCES:
            tol_path, sel_path = AGENT_RESOURCES[gk]
            agent = (_get(doc, tol_path), _mapping(_get(doc, sel_path) if sel_path else None), [])
        if agent is not None:
            _check_agent_placement(ctx, release, path, name, agent)
            continue
        if not (system or pl.system_tolerations):
            continue
        if kind in SYSTEM_KINDS:
            pod = _pod_spec(doc) or {}
            selector, tolerations, affinity = (
                pod.get("nodeSelector") or {},
                pod.get("tolerations"),
                _required_affinity_labels(pod),
            )
        elif gk in SCHEDULED_RESOURCES:
            scheduled_tol, scheduled_sel = SCHEDULED_RESOURCES[gk]
            selector, tolerations, affinity = (
                _get(doc, scheduled_sel) or {},
                _get(doc, scheduled_tol),
                [],
            )
        else:
            continue
        _check_system_placement(ctx, release, path, doc, name, (selector, tolerations, affinity))


def pod_selector_from_values(
    release: RenderedRelease,
    doc: Mapping[str, Any],
    fields: Sequence[str] = ("nodeSelector", "tolerations"),
) -> bool:
    """True when values can place the pod of ``doc`` (a hook Job): rendering the release with a
    probe node selector and toleration at every values path named ``nodeSelector``/``tolerations``
    puts the probe into each of the pod spec's ``fields`` (an upgrade hook whose chart reads
    ``operator.tolerations`` but no node selector -- gpu-operator before v26.7 -- cannot be
    pinned to the system nodes by any value)."""
    probe_sel = {"gpucluster.io/probe": "x"}
    probe_tol = [{"key": "gpucluster.io/probe", "operator": "Exists"}]

    def probe(values: Any) -> Any:
        if isinstance(values, Mapping):
            return {
                k: (
                    probe_sel
                    if k == "nodeSelector"
                    else probe_tol
                    if k == "tolerations"
                    else probe(v)
                )
                for k, v in values.items()
            }
        return values

    try:
        from gpucluster.values import deep_merge

        rendered = release.render_with(
            probe(deep_merge(release.defaults, release.values, keep_nulls=True))
        )
    except Exception:  # noqa: BLE001 - a chart that refuses the probe: treat as placeable (keep the error)
        return True
    template = next((p for p, d in release.objects if d is doc), None)
    if template is None or template not in rendered:
        return True
    from gpucluster.lint.render import load_documents

    name = (doc.get("metadata") or {}).get("name")
    try:
        probed = [
            d
            for d in load_documents(rendered[template])
            if isinstance(d, Mapping)
            and d.get("kind") == doc.get("kind")
            and (d.get("metadata") or {}).get("name") == name
        ]
    except Exception:  # noqa: BLE001 - the probe render is not YAML: judge by the text
        return "gpucluster.io/probe" in rendered[template]
    pod = _pod_spec(probed[0]) if probed else None
    if pod is None:
        return True
    return all("gpucluster.io/probe" in repr(pod.get(f)) for f in fields)


def _walk(doc: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str, Any]]:
    if isinstance(doc, Mapping):
        for k, v in doc.items():
            yield path, str(k), v
            yield from _walk(v, (*path, str(k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _walk(v, (*path, str(i)))


def _walk_with_config(doc: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], str, Any]]:
    """:func:`_walk`, plus the YAML documents a ConfigMap carries in ``data`` (operator input
    configuration applied by hook Jobs, e.g. KAI's kai-config)."""
    yield from _walk(doc)
    if doc.get("kind") == "ConfigMap":
        from gpucluster.lint.render import load_documents

        for name, text in sorted((doc.get("data") or {}).items()):
            if not isinstance(text, str) or ":" not in text:
                continue
            try:
                docs = load_documents(text)
            except Exception:  # noqa: BLE001 - data that is not YAML names no RuntimeClass
                continue
            for sub in docs:
                if isinstance(sub, (Mapping, list)):
                    yield from _walk(sub, ("data", str(name)))


def check_runtime_classes(ctx: _Ctx) -> None:
    """``lint.runtimeclass`` (module docstring)."""
    provided: dict[str, str] = {}
    for release, _path, doc in iter_objects(ctx.releases):
        if doc.get("kind") == "RuntimeClass":
            provided.setdefault(
                str((doc.get("metadata") or {}).get("name")),
                f"RuntimeClass of release {release.name}",
            )
        if doc.get("kind") == "ClusterPolicy" and _group(doc) == "nvidia.com":
            rc = _get(doc, ("spec", "operator", "runtimeClass")) or "nvidia"
            provided.setdefault(
                str(rc),
                f"created by the GPU Operator (ClusterPolicy {_get(doc, ('metadata', 'name'))} spec.operator.runtimeClass)",
            )
    for release, path, doc in iter_objects(ctx.releases):
        if doc.get("kind") in ("RuntimeClass", "CustomResourceDefinition"):
            continue
        for where, key, value in _walk_with_config(doc):
            if (
                not (key == "runtimeClassName" or key.endswith("RuntimeClassName"))
                or not isinstance(value, str)
                or not value
            ):
                continue
            if value not in provided:
                field_path = ".".join((*where, key))
                ctx.add_or_undecided(
                    release,
                    "lint.runtimeclass",
                    "error",
                    f"{_obj_key(doc)} ({path}) names RuntimeClass '{value}' at {field_path}, but the stack provides "
                    f"{', '.join(sorted(provided)) or 'none'}: pods using it are rejected at admission",
                    f"set it to {' or '.join(sorted(provided)) or 'the RuntimeClass the GPU profile provides'} (per gpuStack "
                    "profile, where the profile sets operator.runtimeClass)",
                    key=field_path,
                    undecided=f"{_obj_key(doc)} ({path}) names RuntimeClass '{value}' at {field_path}, which no "
                    f"rendered release provides (rendered: {', '.join(sorted(provided)) or 'none'})",
                )


def _rule_features(doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(rule name, feature)`` of every matchFeatures entry of a NodeFeatureRule (``matchAny`` too)."""
    for rule in _get(doc, ("spec", "rules")) or []:
        if not isinstance(rule, Mapping):
            continue
        blocks = [rule.get("matchFeatures") or []] + [
            (a or {}).get("matchFeatures") or [] for a in rule.get("matchAny") or []
        ]
        for block in blocks:
            for m in block if isinstance(block, list) else []:
                if isinstance(m, Mapping) and m.get("feature"):
                    yield str(rule.get("name", "")), str(m["feature"])


def check_nfd_rules(ctx: _Ctx) -> None:
    """``lint.nfd-rule-unmatchable`` (module docstring)."""
    import fnmatch

    from gpucluster.lint.render import load_documents

    hidden: list[tuple[RenderedRelease, str, str]] = []
    for release, _path, doc in iter_objects(ctx.releases):
        if doc.get("kind") != "ConfigMap":
            continue
        for name, text in sorted((doc.get("data") or {}).items()):
            if not str(name).endswith("nfd-worker.conf") or not isinstance(text, str):
                continue
            try:
                confs = load_documents(text)
            except Exception:  # noqa: BLE001 - not YAML: the worker refuses it, schema checks do not see it
                continue
            for conf in confs:
                for pattern in _get(conf, ("core", "noPublishFeatures")) or []:
                    hidden.append((release, _obj_key(doc), str(pattern)))
    if not hidden:
        return
    for release, _path, doc in iter_objects(ctx.releases):
        if doc.get("kind") != "NodeFeatureRule":
            continue
        for rule, feature in _rule_features(doc):
            for owner, conf, pattern in hidden:
                if fnmatch.fnmatchcase(feature, pattern):
                    ctx.add(
                        release,
                        "lint.nfd-rule-unmatchable",
                        "error",
                        f"{_obj_key(doc)} rule '{rule}' matches feature {feature}, which the NFD worker never publishes "
                        f"(core.noPublishFeatures '{pattern}' in {conf} of release {owner.name}): the rule can never match",
                        f"remove '{pattern}' from nfd worker.config.core.noPublishFeatures",
                        key=f"{_obj_key(doc)}.{rule}",
                    )
                    break


_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def image_pinned(image: str) -> bool:
    """True for ``repo:tag`` (tag not ``latest``) or ``repo@sha256:<64 hex>``."""
    if _DIGEST.search(image):
        return True
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return False
    tag = last.rsplit(":", 1)[1]
    return bool(tag) and tag != "latest"


def check_images(ctx: _Ctx) -> None:
    """``lint.image-unpinned`` (module docstring)."""
    for release, path, doc in iter_objects(ctx.releases):
        pod = _pod_spec(doc)
        if pod is None:
            continue
        for group in ("initContainers", "containers", "ephemeralContainers"):
            for c in pod.get(group) or []:
                image = str((c or {}).get("image") or "")
                if not image_pinned(image):
                    ctx.add(
                        release,
                        "lint.image-unpinned",
                        "error",
                        f"{_obj_key(doc)} ({path}) container {c.get('name')} runs image '{image}' without a tag or digest",
                        "pin the image tag (or digest) in the values",
                        key=f"{_obj_key(doc)}.{group}.{c.get('name')}",
                    )


def check_image_mirror(ctx: _Ctx) -> None:
    """``lint.public-registry``: with ``images.mirror``, every image the rendered objects name
    (:func:`gpucluster.lint.images.inventory`'s sources: pod templates, operator defaults,
    custom resources' operands) is under the mirror; one error per image that is not (it could
    not be rewritten), naming where it is."""
    from gpucluster.charts.imagemirror import under
    from gpucluster.lint.images import _Collector

    mirror = getattr(ctx.plan.cluster, "image_mirror", None)
    if not mirror:
        return
    collector = _Collector(ctx.plan, ())
    for release in ctx.releases:
        collector.release(release)
    by_name = {r.name: r for r in ctx.releases}
    for reference, image in sorted(collector.images.items()):
        if under(reference, mirror):
            continue
        for where in sorted(image.where):
            release_name, _, place = where.partition(": ")
            ctx.add(
                by_name[release_name],
                "lint.public-registry",
                "error",
                f"{place} names image '{reference}' outside images.mirror {mirror}: it could not be rewritten",
                "name the image through a field gpucluster rewrites (docs/air-gap.md), or copy it and set "
                "the chart's image value with overrides",
                key=place,
            )


def check_credentials(ctx: _Ctx) -> None:
    """``lint.credential`` (module docstring): a literal credential in a release's values."""
    for release in ctx.releases:
        for path in credential_paths(release.node.values):
            ctx.add(
                release,
                "lint.credential",
                "error",
                f"values path '{_dotted(path)}' holds a literal credential: it lands in the Terraform state and plan output",
                "remove it and let the chart generate the secret, or reference an existing Secret",
                key=_dotted(path),
            )


_SERVICE_URL = re.compile(
    r"https?://([a-z0-9]([-a-z0-9]*[a-z0-9])?)"
    r"(?:\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(?:\.cluster\.local)?)?(?=[:/\s\"']|$)"
)
"""An ``http(s)://`` URL whose host is a bare Service name (group 1) or
``<name>.<namespace>.svc[.cluster.local]`` (groups 1 and 3); other hosts are not the stack's."""


def _container_strings(doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(field path, text)`` of every ``args``/``command`` item and ``env[].value`` of every
    container and init container anywhere in ``doc`` (pod specs and pod templates)."""

    def walk(node: Any, where: tuple[str, ...]) -> Iterator[tuple[str, str]]:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in ("containers", "initContainers") and isinstance(value, list):
                    for i, c in enumerate(value):
                        if not isinstance(c, Mapping):
                            continue
                        at = ".".join((*where, f"{key}[{i}]"))
                        for field in ("args", "command"):
                            for j, text in enumerate(c.get(field) or []):
                                if isinstance(text, str):
                                    yield f"{at}.{field}[{j}]", text
                        for j, env in enumerate(c.get("env") or []):
                            if isinstance(env, Mapping) and isinstance(env.get("value"), str):
                                yield f"{at}.env[{j}].value", env["value"]
                else:
                    yield from walk(value, (*where, str(key)))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                yield from walk(item, (*where[:-1], f"{where[-1]}[{i}]") if where else (f"[{i}]",))

    yield from walk(doc, ())


def check_service_refs(ctx: _Ctx) -> None:
    """``lint.service-ref`` (module docstring)."""
    services: set[tuple[str, str]] = set()
    for release, _path, doc in iter_objects(ctx.releases):
        if doc.get("kind") == "Service" and str(doc.get("apiVersion", "")) == "v1":
            meta = doc.get("metadata") or {}
            services.add(
                (str(meta.get("namespace") or release.node.namespace), str(meta.get("name")))
            )
    for release, path, doc in iter_objects(ctx.releases):
        namespace = str((doc.get("metadata") or {}).get("namespace") or release.node.namespace)
        for field_path, text in _container_strings(doc):
            for m in _SERVICE_URL.finditer(text):
                name, ns = m.group(1), m.group(3) or namespace
                if name == "localhost" or (ns, name) in services:
                    continue
                ctx.add_or_undecided(
                    release,
                    "lint.service-ref",
                    "error",
                    f"{_obj_key(doc)} ({path}) reaches {m.group(0)} at {field_path}, but no release of the "
                    f"stack renders Service {ns}/{name}: nothing answers there",
                    "install what provides the Service (e.g. keep kube-prometheus-stack), or point the "
                    "component's URL value at a Service that exists",
                    key=field_path,
                    undecided=f"{_obj_key(doc)} ({path}) reaches Service {ns}/{name} at {field_path}, "
                    "which no rendered release creates",
                )


def lint_result(
    result: RenderResult, *, extra_crds: Iterable[tuple[Mapping[str, Any], str]] = ()
) -> list[LintFinding]:
    """Every lint finding of the rendered stacks (render findings included), sorted."""
    extra = list(extra_crds)
    findings = list(result.findings)
    renderer = getattr(result, "renderer", None)
    memo = getattr(renderer, "schema_memo", None) if renderer is not None else None
    for plan in result.plans:
        releases = [r for r in result.releases if r.cluster == plan.cluster.name]
        ctx = _Ctx(
            plan=plan,
            releases=releases,
            placement=placement_of(plan),
            unrendered=unrendered_releases(releases),
        )
        check_schemas(ctx, extra, memo)
        check_dead_values(ctx)
        check_placement(ctx)
        check_runtime_classes(ctx)
        check_nfd_rules(ctx)
        check_images(ctx)
        check_image_mirror(ctx)
        check_credentials(ctx)
        check_service_refs(ctx)
        findings += ctx.findings
    return sort_findings(findings)


def load_crd_folders(folders: Iterable[Any]) -> list[tuple[Mapping[str, Any], str]]:
    """``(CRD object, source)`` of every ``*.yaml``/``*.yml`` file below each folder (``--crds``)."""
    from pathlib import Path

    from gpucluster.lint.render import load_documents

    out = []
    for folder in folders:
        root = Path(folder)
        for file in sorted([*root.rglob("*.yaml"), *root.rglob("*.yml")]):
            try:
                docs = load_documents(file.read_text(encoding="utf-8"))
            except Exception:  # noqa: BLE001 - a non-YAML file in a CRD folder is not a CRD
                continue
            out += [
                (d, f"{root.name}/{file.relative_to(root)}") for d in docs if isinstance(d, Mapping)
            ]
    return out

"""Node scheduling inputs: parse the cluster file's ``scheduling`` block and inject node
selectors, tolerations, the workload-gate taint and the node count into each component's
values at the paths its registry entry lists (AICR ``nodeScheduling``).

Cluster file syntax (see docs/overrides.md)::

    scheduling:
      accelerated:
        nodeSelector: {nvidia.com/gpu.present: "true"}
        tolerations:
          - nvidia.com/gpu:NoSchedule                  # key:Effect        -> operator Exists
          - dedicated=gpu:NoSchedule                   # key=value:Effect  -> operator Equal
          - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      system:
        nodeSelector: {kubernetes.azure.com/mode: system}
        tolerations: [CriticalAddonsOnly:NoSchedule]
      workloadGateTaint: nodewright.nvidia.com/runtime-required=true:NoSchedule
      nodeCount: 2

Injection (AICR bundler semantics):

* node selectors replace the value at each path;
* tolerations replace the value at each path, except: when the recipe's own inline overrides
  put an empty list at the path, the path opts out (nothing injected); when the recipe's inline
  overrides or the user's overrides put a non-empty list there, the injected tolerations are
  appended (entries already present are not repeated);
* a path listed both as system and accelerated is a per-node agent's (a DaemonSet that runs on
  GPU nodes too, e.g. NFD's ``worker.tolerations``): the system tolerations are appended to the
  value there, so the GPU-node toleration the catalog or chart default holds is kept; the
  accelerated tolerations, when there are any, replace it (they are applied last, as in AICR);
* the workload-gate taint is written as the string ``key=value:Effect``; the node count as an int.

Defaults when an input is not given: the accelerated tolerations are derived from the GPU pools'
taints (``key``, operator ``Exists``, the taint's effect; never a wildcard), the accelerated node
selector from the labels all GPU pools share (AKS: ``nvidia.com/gpu.present: "true"``), and the
node count is the sum of the GPU pools' node counts. Platforms without pools inject nothing by
default.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from gpucluster.errors import GpuclusterError, Problem
from gpucluster.model import ClusterSpec, Component, NodeScheduling, Recipe, Taint, Toleration
from gpucluster.recipes.overrides import ResolvedOverrides, resolved_overrides
from gpucluster.values import deep_copy, get_path, leaf_paths, set_path, split_path

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
"""Taint effects Kubernetes accepts."""

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
LABEL_KEY = re.compile(rf"^(({_DNS_SUBDOMAIN})/)?{_NAME}$")
"""Kubernetes qualified name (optional DNS-subdomain prefix ``/`` name of at most 63 characters)."""
LABEL_VALUE = re.compile(rf"^({_NAME})?$")
"""Kubernetes label value (empty, or at most 63 characters)."""

_SECTIONS = ("accelerated", "system", "workloadGateTaint", "nodeCount")
_POOL_SECTION_KEYS = ("nodeSelector", "tolerations")
_TOLERATION_KEYS = ("key", "operator", "value", "effect")
TOLERATION_FORMAT = (
    "'key:Effect', 'key=value:Effect' or {key, operator: Exists|Equal, value, effect}"
)


# --------------------------------------------------------------------------- parsing


def check_label_key(key: Any, what: str) -> str:
    """``key`` if it is a Kubernetes label/taint key (``[prefix/]name``). Raises ValueError."""
    if not isinstance(key, str) or not LABEL_KEY.fullmatch(key) or len(key) > 253 + 1 + 63:
        raise ValueError(f"{what} {key!r} is not a valid Kubernetes label/taint key")
    prefix, _, _ = key.rpartition("/")
    if len(prefix) > 253:
        raise ValueError(f"{what} {key!r} has a prefix longer than 253 characters")
    return key


def check_label_value(value: Any, what: str) -> str:
    """``value`` if it is a Kubernetes label value (string, <= 63 chars). Raises ValueError."""
    if not isinstance(value, str):
        raise ValueError(
            f"{what} {value!r} is a {type(value).__name__}; label values are strings (quote it)"
        )
    if not LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} is not a valid Kubernetes label value (<= 63 of [A-Za-z0-9._-], alphanumeric ends)"
        )
    return value


def _check_effect(effect: Any) -> str:
    if effect not in EFFECTS:
        raise ValueError(f"effect {effect!r} is not one of {', '.join(EFFECTS)}")
    return effect


def parse_toleration(spec: Any) -> Toleration:
    """Parse a toleration in AICR flag syntax or the Kubernetes structured form.

    * ``key:Effect`` -> ``{key, operator: Exists, effect}``
    * ``key=value:Effect`` -> ``{key, operator: Equal, value, effect}``
    * a mapping with ``key``, ``operator`` (``Exists``/``Equal``; default ``Equal`` when a
      ``value`` is given, else ``Exists``), ``value``, ``effect`` (optional = all effects).
      ``{operator: Exists}`` without a key is the wildcard (tolerates every taint).

    Raises:
        ValueError: malformed spec, invalid key/value/effect, or an inconsistent operator.
    """
    key: Any  # the input's, checked below
    value: Any
    effect: Any
    operator: Any
    if isinstance(spec, str):
        body, colon, effect = spec.rpartition(":")
        if not colon or not body:
            raise ValueError(
                f"toleration '{spec}' has no ':Effect' (the string form needs an effect)"
            )
        _check_effect(effect)
        key, eq, value = body.partition("=")
        check_label_key(key, "toleration key")
        if eq:
            check_label_value(value, "toleration value")
            return Toleration(key=key, operator="Equal", value=value, effect=effect)
        return Toleration(key=key, operator="Exists", effect=effect)
    if isinstance(spec, Mapping):
        unknown = sorted(str(k) for k in spec if k not in _TOLERATION_KEYS)
        if unknown:
            raise ValueError(
                f"unknown toleration field(s) {', '.join(unknown)} (allowed: {', '.join(_TOLERATION_KEYS)})"
            )
        key = spec.get("key")
        value = spec.get("value")
        effect = spec.get("effect")
        operator = spec.get("operator") or ("Equal" if value is not None else "Exists")
        if operator not in ("Exists", "Equal"):
            raise ValueError(f"toleration operator {operator!r} is not Exists or Equal")
        if key in ("", None):
            key = None
            if operator != "Exists":
                raise ValueError("a toleration without a key must use operator Exists")
        else:
            check_label_key(key, "toleration key")
        if operator == "Exists" and value not in (None, ""):
            raise ValueError("a toleration with operator Exists cannot have a value")
        if operator == "Equal":
            value = check_label_value("" if value is None else value, "toleration value")
        else:
            value = None
        if effect not in (None, ""):
            _check_effect(effect)
        else:
            effect = None
        return Toleration(key=key, operator=operator, value=value, effect=effect)
    raise ValueError(f"a toleration must be a string or a mapping, not a {type(spec).__name__}")


def parse_taint(spec: Any) -> Taint:
    """Parse ``key=value:Effect`` (or ``key:Effect``, empty value) or ``{key, value, effect}``.

    Raises:
        ValueError: malformed or invalid key/value/effect.
    """
    key: Any  # the input's, checked below
    value: Any
    effect: Any
    if isinstance(spec, str):
        body, colon, effect = spec.rpartition(":")
        if not colon or not body:
            raise ValueError(f"taint '{spec}' is not key=value:Effect")
        key, _, value = body.partition("=")
    elif isinstance(spec, Mapping):
        unknown = sorted(str(k) for k in spec if k not in ("key", "value", "effect"))
        if unknown:
            raise ValueError(
                f"unknown taint field(s) {', '.join(unknown)} (allowed: key, value, effect)"
            )
        key, value, effect = spec.get("key"), spec.get("value", ""), spec.get("effect")
    else:
        raise ValueError(
            f"a taint must be a 'key=value:Effect' string or a mapping, not a {type(spec).__name__}"
        )
    check_label_key(key, "taint key")
    check_label_value(value, "taint value")
    _check_effect(effect)
    return Taint(key=key, value=value, effect=effect)


def parse_scheduling(
    raw: Any, *, file: str, cluster: str, base: str = "scheduling"
) -> NodeScheduling:
    """Parse one cluster's ``scheduling`` subtree (None -> empty inputs).

    ``base`` is the subtree's key in the file, prefixed to keys in messages (the config loader
    passes ``clusters[i].scheduling``).

    Raises:
        GpuclusterError: every malformed entry, naming file, cluster and key.
    """
    if raw is None:
        return NodeScheduling()
    if not isinstance(raw, Mapping):
        raise GpuclusterError(
            f"scheduling must be a mapping, not a {type(raw).__name__}",
            file=file,
            cluster=cluster,
            key=base,
            allowed=", ".join(_SECTIONS),
            fix="write e.g. scheduling: {accelerated: {tolerations: ['nvidia.com/gpu:NoSchedule']}} (docs/overrides.md)",
        )
    problems: list[Problem] = []

    def bad(key: str, message: str, **kw) -> None:
        problems.append(Problem(message, file=file, cluster=cluster, key=key, **kw))

    tol_fix = "write e.g. tolerations: ['nvidia.com/gpu:NoSchedule', 'dedicated=ml:NoExecute']"
    for k in sorted(str(k) for k in raw if k not in _SECTIONS):
        bad(
            f"{base}.{k}",
            f"unknown scheduling key '{k}'",
            allowed=", ".join(_SECTIONS),
            fix="remove or rename the key",
        )
    out = NodeScheduling()
    for section in ("accelerated", "system"):
        sub = raw.get(section)
        if sub is None:
            continue
        where = f"{base}.{section}"
        if not isinstance(sub, Mapping):
            bad(
                where,
                f"{where} must be a mapping, not a {type(sub).__name__}",
                allowed=", ".join(_POOL_SECTION_KEYS),
                fix=f"write {section}: {{nodeSelector: {{label: value}}, tolerations: [...]}}",
            )
            continue
        _parse_pool_section(sub, section, where, out, bad, tol_fix)
    if raw.get("workloadGateTaint") is not None:
        try:
            out.workload_gate_taint = parse_taint(raw["workloadGateTaint"])
        except ValueError as exc:
            bad(
                f"{base}.workloadGateTaint",
                str(exc),
                allowed="key=value:Effect",
                fix="write e.g. workloadGateTaint: nodewright.nvidia.com/runtime-required=true:NoSchedule",
            )
    if "nodeCount" in raw and raw["nodeCount"] is not None:
        n = raw["nodeCount"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            bad(
                f"{base}.nodeCount",
                f"nodeCount must be a positive integer, not {n!r}",
                fix="write the number of GPU nodes without quotes (e.g. nodeCount: 2), or remove it for the GPU pools' sum",
            )
        else:
            out.node_count = n
    if problems:
        raise GpuclusterError(problems=problems)
    return out


def _parse_pool_section(
    sub: Mapping,
    section: str,
    where: str,
    out: NodeScheduling,
    bad: Callable[..., None],
    tol_fix: str,
) -> None:
    """Parse one pool section's keys, nodeSelector and tolerations into ``out``, reporting to ``bad``."""
    for k in sorted(str(k) for k in sub if k not in _POOL_SECTION_KEYS):
        bad(
            f"{where}.{k}",
            f"unknown key '{k}'",
            allowed=", ".join(_POOL_SECTION_KEYS),
            fix="remove or rename the key",
        )
    selector = sub.get("nodeSelector")
    if selector is not None:
        if not isinstance(selector, Mapping):
            bad(
                f"{where}.nodeSelector",
                f"nodeSelector must be a mapping of label: value, not a {type(selector).__name__}",
                fix='write e.g. nodeSelector: {nvidia.com/gpu.present: "true"}',
            )
        else:
            parsed: dict[str, str] = {}
            for k, v in selector.items():
                try:
                    parsed[check_label_key(k, "label key")] = check_label_value(v, "label value")
                except ValueError as exc:
                    bad(
                        f"{where}.nodeSelector.{k}",
                        str(exc),
                        fix='use a Kubernetes label key and a quoted string value, e.g. nvidia.com/gpu.present: "true"',
                    )
            setattr(out, f"{section}_node_selector", dict(sorted(parsed.items())))
    tolerations = sub.get("tolerations")
    if tolerations is not None:
        if not isinstance(tolerations, list):
            bad(
                f"{where}.tolerations",
                f"tolerations must be a list, not a {type(tolerations).__name__}",
                allowed=TOLERATION_FORMAT,
                fix=tol_fix,
            )
        else:
            parsed_tols: list[Toleration] = []
            for i, spec in enumerate(tolerations):
                try:
                    t = parse_toleration(spec)
                except ValueError as exc:
                    bad(
                        f"{where}.tolerations[{i}]",
                        str(exc),
                        allowed=TOLERATION_FORMAT,
                        fix=tol_fix,
                    )
                    continue
                if t not in parsed_tols:
                    parsed_tols.append(t)
            setattr(out, f"{section}_tolerations", parsed_tols)


def taint_string(taint: Taint) -> str:
    """``key=value:Effect``, or ``key:Effect`` when the value is empty (AICR taint string form)."""
    return (
        f"{taint.key}={taint.value}:{taint.effect}"
        if taint.value
        else f"{taint.key}:{taint.effect}"
    )


# --------------------------------------------------------------------------- defaults


def gpu_pool_tolerations(cluster: ClusterSpec) -> list[Toleration]:
    """Tolerations matching every GPU pool taint: ``{key, operator: Exists, effect}``.

    In pool order, without duplicates. Empty when no GPU pool is tainted (never a wildcard).
    """
    out: list[Toleration] = []
    for pool in cluster.pools:
        if not pool.gpu:
            continue
        for taint in pool.taints:
            t = Toleration(key=taint.key, operator="Exists", effect=taint.effect)
            if t not in out:
                out.append(t)
    return out


def gpu_pool_node_selector(cluster: ClusterSpec) -> dict[str, str]:
    """The labels every GPU pool of the cluster carries with the same value, sorted by key.

    The default accelerated node selector: it matches every GPU node the cluster file creates
    and no CPU node that lacks one of the labels. On AKS every GPU pool carries
    ``nvidia.com/gpu.present: "true"`` (added by the AKS plugin), so the default is that label.
    Empty without GPU pools (existing clusters, platforms without pools) or without a common label.
    """
    gpu_pools = [p for p in cluster.pools if p.gpu]
    if not gpu_pools:
        return {}
    common = dict(gpu_pools[0].labels)
    for pool in gpu_pools[1:]:
        common = {k: v for k, v in common.items() if pool.labels.get(k) == v}
    return dict(sorted(common.items()))


def effective_inputs(cluster: ClusterSpec) -> NodeScheduling:
    """The scheduling inputs after defaults (see module docstring)."""
    s = cluster.scheduling
    gpu_pools = [p for p in cluster.pools if p.gpu]
    node_count = s.node_count
    if node_count is None and gpu_pools:
        node_count = sum(p.node_count for p in gpu_pools)
    return NodeScheduling(
        accelerated_node_selector=dict(s.accelerated_node_selector)
        or gpu_pool_node_selector(cluster),
        accelerated_tolerations=list(s.accelerated_tolerations) or gpu_pool_tolerations(cluster),
        system_node_selector=dict(s.system_node_selector),
        system_tolerations=list(s.system_tolerations),
        workload_gate_taint=s.workload_gate_taint,
        node_count=node_count,
    )


# --------------------------------------------------------------------------- injection


def _user_list_paths(resolved: ResolvedOverrides) -> dict[str, dict[str, Any]]:
    """component -> {path: value} of lists/empties the user's overrides wrote (for append mode)."""

    out: dict[str, dict[str, Any]] = {}
    for name, o in resolved:
        if o.kind == "values":
            for path, value in leaf_paths(o.value or {}):
                out.setdefault(name, {})[path] = value
        elif o.kind == "set":
            out.setdefault(name, {})[o.path] = o.value
    return out


def _put(
    values: dict[str, Any], path: str, value: Any, *, cluster: ClusterSpec, component: str
) -> None:
    try:
        set_path(values, path, value)
    except TypeError as exc:
        raise GpuclusterError(
            f"cannot inject node scheduling at '{path}': {exc}",
            file=cluster.source,
            cluster=cluster.name,
            component=component,
            key=path,
            fix=f"do not override '{split_path(path)[0]}' with a scalar; node scheduling writes below it",
        ) from None


def apply_scheduling(
    cluster: ClusterSpec,
    recipe: Recipe,
    components: Mapping[str, Component],
    catalog,
    *,
    resolved: ResolvedOverrides | None = None,
) -> dict[str, Component]:
    """The components with the node scheduling inputs injected (see module docstring);
    ``components`` is left as it is.

    ``resolved``: the cluster's overrides as the pipeline resolved them once (default: resolved
    here from ``cluster.overrides``).

    Returns:
        a new ``{name: Component}`` in the order of ``components``; a component whose values
        receive nothing is the input's own (unchanged) object.

    Raises:
        GpuclusterError: a registry path runs through a non-mapping value.
    """
    inputs = effective_inputs(cluster)
    if resolved is None:
        resolved = resolved_overrides(cluster, catalog)
    user_lists = _user_list_paths(resolved) if resolved else {}
    out: dict[str, Component] = {}
    for name, comp in components.items():
        entry = catalog.components.get(name)
        if entry is None:
            out[name] = comp
            continue
        values = _Injection(cluster, comp, user_lists.get(name, {})).run(entry.scheduling, inputs)
        out[name] = comp if values is comp.values else dataclasses.replace(comp, values=values)
    return out


class _Injection:
    """One component's injection: which paths it skips or appends to, and its new values (a
    copy of the component's, made at the first write)."""

    def __init__(self, cluster: ClusterSpec, comp: Component, user: Mapping[str, Any]):
        self.cluster, self.comp, self.user = cluster, comp, user
        self.values = comp.values

    def mode(self, path: str) -> str:
        """``skip`` (bound to an install-time variable, or the recipe's own empty value),
        ``append`` (a non-empty list of the recipe or the user) or ``replace``."""
        if path in self.comp.terraform_variables:
            return "skip"  # bound to an install-time variable
        sentinel = object()
        mine = get_path(self.comp.ref.overrides or {}, path, sentinel)
        if mine is not sentinel:
            if mine in (None, [], {}):
                return "skip"
            return "append"
        theirs = self.user.get(path, sentinel)
        if theirs is not sentinel and isinstance(theirs, list) and theirs:
            return "append"
        return "replace"

    def put(self, path: str, value: Any) -> None:
        if self.values is self.comp.values:
            self.values = deep_copy(self.comp.values)
        _put(self.values, path, value, cluster=self.cluster, component=self.comp.name)

    def tolerations_at(
        self, path_list, tolerations: list[Toleration], keep: frozenset[str] = frozenset()
    ) -> None:
        """Write ``tolerations`` at each path of ``path_list`` (:meth:`mode`); at a path in
        ``keep`` (a GPU-node agent's) they are appended to the value there instead of replacing it."""
        if not tolerations:
            return
        rendered = [t.as_dict() for t in tolerations]
        for path in path_list:
            m = self.mode(path)
            if m == "skip":
                continue
            if m == "replace" and path in keep:
                m = "append"
            if m == "append":
                existing = get_path(self.values, path)
                merged = list(existing) if isinstance(existing, list) else []
                merged.extend(t for t in rendered if t not in merged)
                self.put(path, merged)
            else:
                self.put(path, rendered)

    def selector_at(self, path_list, selector: dict[str, str]) -> None:
        if not selector:
            return
        for path in path_list:
            if self.mode(path) != "skip":
                self.put(path, dict(selector))

    def run(self, paths, inputs: NodeScheduling) -> dict[str, Any]:
        """The values with every input written at the registry's ``paths``; the component's
        own values object when nothing was written."""
        self.selector_at(paths.system_node_selector, inputs.system_node_selector)
        self.tolerations_at(
            paths.system_tolerations,
            inputs.system_tolerations,
            keep=frozenset(paths.accelerated_tolerations),
        )
        self.selector_at(paths.accelerated_node_selector, inputs.accelerated_node_selector)
        self.tolerations_at(paths.accelerated_tolerations, inputs.accelerated_tolerations)
        if inputs.workload_gate_taint is not None:
            for path in paths.accelerated_taint_str:
                if path not in self.comp.terraform_variables:
                    self.put(path, taint_string(inputs.workload_gate_taint))
        if inputs.node_count is not None:
            for path in paths.node_count:
                if path not in self.comp.terraform_variables:
                    self.put(path, int(inputs.node_count))
        return self.values

"""Upgrade transition rules (``upgrades.yaml`` in every catalog directory): their format, loading
and the version-change judgement -- a leaf that :mod:`gpucluster.lint.upgrade_check` (the report) and
:mod:`gpucluster.recipes.recipe_result` (``versionSkew: upgrade``, which shows the change the same way)
both use, without importing the pipeline. Pure Python, no cdktf."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpucluster.errors import GpuclusterError
from gpucluster.versions import version_in_range

VERDICTS = ("safe", "unknown", "manual")
"""Verdicts, least to most severe."""


def worst(verdicts: Iterable[str]) -> str:
    """The most severe verdict (``manual`` > ``unknown`` > ``safe``); ``safe`` for none."""
    return max(verdicts, key=VERDICTS.index, default="safe")


RULES_FILE = "upgrades.yaml"
MATCHES = (
    "componentVersion",
    "valueChange",
    "profileChange",
    "kubernetesMinor",
    "crdOwnerChange",
    "componentRemoved",
    "gpuPoolChange",
    "gpuPoolRemoved",
    "gpuPoolAdded",
    "gpuPoolResize",
    "gpuPoolUpgrade",
    "systemPoolChange",
    "cpuPoolChange",
    "regionChange",
    "clusterRename",
    "backendChange",
    "driverRoll",
)

_STR = {"type": "string", "minLength": 1}
RULES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["kind", "apiVersion", "rules"],
    "properties": {
        "kind": {"const": "UpgradeRules"},
        "apiVersion": {"const": "gpucluster/v1alpha1"},
        "rules": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "match", "verdict", "why", "source"],
                "properties": {
                    "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9.-]*\\Z"},
                    "match": {"enum": list(MATCHES)},
                    "component": _STR,
                    "service": _STR,
                    "from": {},
                    "to": {},
                    "path": _STR,
                    "profile": _STR,
                    "maxMinorStep": {"type": "integer", "minimum": 1},
                    "ownsCrds": {"type": "boolean"},
                    "verdict": {"enum": list(VERDICTS)},
                    "why": _STR,
                    "action": _STR,
                    "source": _STR,
                },
            },
        },
    },
}
"""JSON Schema of an ``upgrades.yaml`` (docs/upgrading.md, "Transition rules").

``match`` and the fields it reads:

* ``componentVersion``: ``component``, ``from``/``to`` version ranges (``">=0.5.0 <0.5.1"``, ``"*"``);
* ``valueChange``: ``component``, ``path`` (dotted), optional ``from``/``to`` values (absent = any);
* ``profileChange``: ``profile`` (``gpuStack``), optional ``from``/``to`` values;
* ``kubernetesMinor``: ``maxMinorStep`` (a larger step, or a downgrade, matches);
* ``crdOwnerChange``: any CRD whose owner differs between the sides;
* ``componentRemoved``: optional ``component``, optional ``ownsCrds``;
* ``gpuPoolChange``: a GPU pool whose ``vmSize`` or ``gpuDriver`` changed (the pool is replaced);
* ``gpuPoolRemoved``: a GPU pool OLD has and NEW does not (the pool is destroyed; step 2 of a
  surge change when a NEW pool had ``replaces`` naming it in OLD);
* ``gpuPoolAdded``: a GPU pool NEW has and OLD does not (new GPU capacity);
* ``gpuPoolResize``: a GPU pool whose ``nodeCount`` changed (capacity added, or nodes removed
  with what runs on them);
* ``gpuPoolUpgrade``: a GPU pool kept as it is while ``kubernetesVersion`` changes (the pool's
  Kubernetes version follows the cluster's: every node is drained and re-imaged);
* ``systemPoolChange``: a non-GPU pool (the system pool first) whose ``vmSize`` changed, or the
  system pool's name;
* ``cpuPoolChange``: a non-GPU pool other than the system pool added or removed;
* ``regionChange``: the cluster's resolved ``region`` changed;
* ``clusterRename``: the cluster's ``name`` changed (its stacks and state files are named after it);
* ``backendChange``: the Terraform ``backend`` of the cluster's stacks changed;
* ``driverRoll``: a ``gpu-operator`` change that replaces the driver pods on every GPU node
  (:func:`driver_roll`: a chart version change, or a value :func:`replaces_driver_pods`), with
  the operator installing the driver on either side, that no ``valueChange`` rule on a driver
  path already judged.

Every rule may name a ``service`` (the cluster's ``criteria.service``) it is limited to."""


# --------------------------------------------------------------------------- the driver pods

GPU_OPERATOR = "gpu-operator"
DRIVER_POD_PATHS = ("driver.", "gdrcopy.", "cdi.")
"""gpu-operator values paths whose change replaces the driver DaemonSet's pods (or, for
``cdi.*``, the container toolkit and device plugin next to them) on every GPU node: the chart's
``templates/clusterpolicy.yaml`` renders ``.Values.driver.*`` (repository, image, version,
imagePullPolicy, manager, licensingConfig, rdma, kernelModuleType, usePrecompiled, env, ...) into
the ClusterPolicy's ``spec.driver``, ``.Values.gdrcopy`` into a container of the driver pods and
``.Values.cdi`` into ``spec.cdi``; the operator re-renders the DaemonSets from that spec. The one
table both ``upgrade-check`` modes read (:func:`replaces_driver_pods`)."""
DRIVER_ONLY_PATHS = ("driver.", "gdrcopy.")
"""The paths of :data:`DRIVER_POD_PATHS` that act only through the driver the operator installs:
with ``driver.enabled`` false they change nothing (``cdi.*`` still rolls the toolkit and device
plugin)."""
NOT_DRIVER_POD_PATHS = ("driver.upgradePolicy.",)
"""Read by the upgrade controller, not part of the driver pods (GPU Operator docs, "GPU Driver
Upgrades")."""


def replaces_driver_pods(path: str) -> bool:
    """Does a change of gpu-operator value ``path`` (dotted) replace the driver pods
    (:data:`DRIVER_POD_PATHS`, less :data:`NOT_DRIVER_POD_PATHS`)?"""
    return path.startswith(DRIVER_POD_PATHS) and not path.startswith(NOT_DRIVER_POD_PATHS)


def operator_manages_driver(values: Any) -> bool:
    """Does the GPU Operator install the driver with these gpu-operator ``values``
    (``driver.enabled``, chart default true; AKS ``gpuStack: azure-managed`` sets it false: the
    node image brings the driver)?"""
    if not isinstance(values, dict):
        return False
    driver = values.get("driver")
    return not (isinstance(driver, dict) and driver.get("enabled", True) is False)


def driver_roll(kind: str, paths: Sequence[str], old_values: Any, new_values: Any) -> list[str]:
    """What makes a gpu-operator change (``kind`` ``version`` or ``values``, the changed
    ``paths``) replace the driver pods on every GPU node: ``["chart version"]`` and/or the paths
    that :func:`replaces_driver_pods`; ``[]`` when nothing does, or when the operator installs the
    driver on neither side (:func:`operator_manages_driver`: the change cannot reload anything)."""
    if not (operator_manages_driver(old_values) or operator_manages_driver(new_values)):
        return []
    out = ["chart version"] if kind == "version" else []
    return out + [p for p in paths if replaces_driver_pods(p)]


# --------------------------------------------------------------------------- versions


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    """One transition rule (see :data:`RULES_SCHEMA`); ``file`` is where it was read."""

    id: str
    match: str
    verdict: str
    why: str
    source: str
    action: str = ""
    component: str | None = None
    service: str | None = None
    from_: Any = None
    to: Any = None
    path: str | None = None
    profile: str | None = None
    max_minor_step: int = 1
    owns_crds: bool | None = None
    has_from: bool = False
    has_to: bool = False
    file: str = ""


def load_rules(dirs: Sequence[Path] | None = None) -> list[Rule]:
    """Every ``upgrades.yaml`` of the catalog directories (core first, then plugins), in order.

    Raises:
        GpuclusterError: a file is not valid YAML, violates :data:`RULES_SCHEMA`, or two rules
            share an id (naming both files).
    """
    import jsonschema

    if dirs is None:
        from gpucluster.recipes.catalog import catalog_dirs

        dirs = catalog_dirs()
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    for d in dirs:
        path = Path(d) / RULES_FILE
        if not path.is_file():
            continue
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise GpuclusterError(
                f"invalid YAML: {exc}", file=str(path), fix="fix the YAML syntax"
            ) from None
        try:
            jsonschema.validate(data, RULES_SCHEMA)
        except jsonschema.ValidationError as exc:
            raise GpuclusterError(
                f"invalid upgrade rules: {exc.message}",
                file=str(path),
                key=".".join(str(p) for p in exc.absolute_path) or None,
                fix="fix the rule (format: docs/upgrading.md, Transition rules)",
            ) from None
        for raw in data["rules"]:
            if raw["id"] in seen:
                raise GpuclusterError(
                    f"upgrade rule '{raw['id']}' is defined twice: {seen[raw['id']]} and {path}",
                    file=str(path),
                    key=f"rules.{raw['id']}",
                    fix="rename one of them",
                )
            seen[raw["id"]] = str(path)
            rules.append(
                Rule(
                    id=raw["id"],
                    match=raw["match"],
                    verdict=raw["verdict"],
                    why=raw["why"],
                    source=raw["source"],
                    action=raw.get("action", ""),
                    component=raw.get("component"),
                    service=raw.get("service"),
                    from_=raw.get("from"),
                    to=raw.get("to"),
                    path=raw.get("path"),
                    profile=raw.get("profile"),
                    max_minor_step=raw.get("maxMinorStep", 1),
                    owns_crds=raw.get("ownsCrds"),
                    has_from="from" in raw,
                    has_to="to" in raw,
                    file=str(path),
                )
            )
    return rules


def version_rules(name: str, old: str, new: str, rules: Sequence[Rule], service: str) -> list[Rule]:
    """The ``componentVersion`` rules that cover ``name`` ``old`` -> ``new`` on ``service``."""
    return [
        r
        for r in rules
        if (r.service is None or r.service == service)
        and r.match == "componentVersion"
        and r.component == name
        and version_in_range(old, r.from_)
        and version_in_range(new, r.to)
    ]


UNKNOWN_VERSION_ACTION = (
    "read the upstream release notes for every version in between; test the upgrade off production"
)


def version_change_text(
    name: str, old: str, new: str, service: str, rules: Sequence[Rule] | None = None
) -> str:
    """A chart version change on one line, as ``upgrade-check`` shows it:
    ``kai-scheduler: version v0.12.0 -> v0.16.9 [unknown] (default-version-unknown: no transition
    record covers ...; do: ...)`` (``rules``: default :func:`load_rules`)."""
    matched = version_rules(name, old, new, load_rules() if rules is None else rules, service)
    if matched:
        verdict = worst(r.verdict for r in matched)
        why = "; ".join(
            f"{r.id}: {r.why} ({old} -> {new})" + (f"; do: {r.action}" if r.action else "")
            for r in matched
        )
    else:
        verdict = "unknown"
        why = f"default-version-unknown: no transition record covers {name} {old} -> {new}; do: {UNKNOWN_VERSION_ACTION}"
    return f"{name}: version {old} -> {new} [{verdict}] ({why})"

"""``gpucluster upgrade-check --from OLD --to NEW``: what an edit does to running GPUs, before
``terraform plan`` touches the cluster.

Both sides are resolved fully (recipe, values, overrides, policy, gates: :func:`gpucluster.pipeline.build_plan`)
and compared per cluster and component:

* **version** changes of a chart, **values** changes (the dotted leaf paths that differ), components
  **added** / **removed**, cluster-level changes (Kubernetes version, profiles, GPU pools);
* **CRD** changes: the CRDs each component owns on each side (catalog ``crds``, one owner per
  CRD, :func:`gpucluster.charts.crds.crd_owners`), owner changes, and how the owner's CRDs reach the
  new version (the generated CRD step or the chart's own hook);
* a **verdict** per change: ``safe``, ``manual`` (with why and what to do) or ``unknown`` (no
  transition record covers it: read the upstream notes). A component's verdict is the worst of its
  changes; a cluster's the worst of its components; the run's the worst of all.

Transition rules are DATA: ``upgrades.yaml`` in every catalog directory (the core's and the
plugins', so a platform's rules live in its plugin), kind ``UpgradeRules``
(:data:`RULES_SCHEMA`). A version change no rule covers is ``unknown``, as in AICR's
``aicr upgrade-check`` (coverage, not optimism); a values change no rule covers is ``safe`` (a
``helm upgrade`` of the release; its readiness gates re-run).

Inputs (:func:`load_side`): a cluster file, an AICR/gpucluster RecipeResult, or a git revision of
the same file -- ``REV`` (the other side's path at ``REV``) or ``REV:path`` -- read with
``git archive`` so the files it references (values files, recipe files) come from the same
revision.

Exit codes (:data:`EXIT_CODES`): 0 every change safe (or nothing changed), 3 at least one change is
``manual``, 4 no ``manual`` change but at least one ``unknown``, 2 invalid input (one
``error[...]`` line, nothing printed on stdout). Pure Python: no cdktf.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import GpuclusterError
from gpucluster.model import Finding, RuntimePlan
from gpucluster.recipes.upgrade_rules import (  # noqa: F401  (the rules live in a leaf; re-exported here)
    DRIVER_ONLY_PATHS,
    GPU_OPERATOR,
    MATCHES,
    RULES_FILE,
    RULES_SCHEMA,
    UNKNOWN_VERSION_ACTION,
    VERDICTS,
    Rule,
    driver_roll,
    load_rules,
    replaces_driver_pods,
    version_change_text,
    version_rules,
    worst,
)
from gpucluster.values import leaf_paths
from gpucluster.versions import parse_version, version_in_range  # noqa: F401  (re-exported; moved to a leaf)

EXIT_SAFE = 0
EXIT_MANUAL = 3
EXIT_UNKNOWN = 4
EXIT_CODES = {"safe": EXIT_SAFE, "manual": EXIT_MANUAL, "unknown": EXIT_UNKNOWN}
"""Exit code per overall verdict (2 = invalid input, :data:`gpucluster.errors.EXIT_INVALID_INPUT`)."""


# --------------------------------------------------------------------------- report types


@dataclass
class Reason:
    """Why a change got its verdict: the rule (or ``default-…``) and what to do."""

    rule: str
    verdict: str
    why: str
    action: str = ""
    source: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "rule": self.rule,
            "verdict": self.verdict,
            "why": self.why,
            "action": self.action,
            "source": self.source,
        }


@dataclass
class Change:
    """One component (or ``cluster`` for cluster-level changes) of one cluster.

    Attributes:
        kind: ``version``, ``values``, ``added``, ``removed`` or ``cluster``.
        old_version / new_version: chart versions ('' for manifest-only components or absent sides).
        values: dotted leaf paths whose value differs (sorted).
        crds: ``{"owned": [...], "added": [...], "removed": [...], "ownerChanges": [...], "step": text}``.
        verdict: the worst verdict of ``reasons``.
    """

    component: str
    kind: str
    old_version: str = ""
    new_version: str = ""
    values: list[str] = field(default_factory=list)
    crds: dict[str, Any] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    reasons: list[Reason] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return worst(r.verdict for r in self.reasons)

    def as_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "change": self.kind,
            "from": self.old_version,
            "to": self.new_version,
            "values": list(self.values),
            "crds": self.crds,
            "details": list(self.details),
            "verdict": self.verdict,
            "reasons": [r.as_dict() for r in self.reasons],
        }


@dataclass
class ClusterReport:
    cluster: str
    service: str
    changes: list[Change]

    @property
    def verdict(self) -> str:
        return worst(c.verdict for c in self.changes)


@dataclass
class Report:
    """The whole comparison; :attr:`exit_code` is what a CI job gates on (:data:`EXIT_CODES`)."""

    old: str
    new: str
    clusters: list[ClusterReport]

    @property
    def verdict(self) -> str:
        return worst(c.verdict for c in self.clusters)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.old,
            "to": self.new,
            "verdict": self.verdict,
            "exitCode": self.exit_code,
            "clusters": [
                {
                    "cluster": c.cluster,
                    "service": c.service,
                    "verdict": c.verdict,
                    "changes": [ch.as_dict() for ch in c.changes],
                }
                for c in self.clusters
            ],
        }


# --------------------------------------------------------------------------- comparison


def _values_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    a, b = dict(leaf_paths(old)), dict(leaf_paths(new))
    return sorted(p for p in set(a) | set(b) if a.get(p, _MISSING) != b.get(p, _MISSING))


_MISSING = object()


def _get(values: Mapping[str, Any], path: str) -> Any:
    from gpucluster.values import get_path

    return get_path(values, path, _MISSING)


def _value_matches(rule_value: Any, has: bool, actual: Any) -> bool:
    return not has or (actual is not _MISSING and actual == rule_value)


def _service_ok(rule: Rule, service: str) -> bool:
    return rule.service is None or rule.service == service


def _reason(rule: Rule, why: str | None = None) -> Reason:
    return Reason(
        rule=rule.id,
        verdict=rule.verdict,
        why=why or rule.why,
        action=rule.action,
        source=rule.source,
    )


def _minor(version: str) -> tuple[int, int] | None:
    v = parse_version(version)
    return (v[0], v[1]) if v else None


def _profile(plan: RuntimePlan) -> dict[str, str]:
    """The effective profile choices: the cluster file's, else the recipe's chosen value (the default)."""
    chosen = dict([plan.recipe.profile]) if plan.recipe.profile else {}
    return {**chosen, **plan.cluster.profile}


def _cluster_change(
    old: RuntimePlan, new: RuntimePlan, rules: Sequence[Rule], service: str
) -> Change | None:
    """The cluster-level change (Kubernetes version, profile, GPU pools), or None."""
    # ---- cluster level
    cluster_change = Change(component="cluster", kind="cluster")
    ov, nv = old.cluster.kubernetes_version, new.cluster.kubernetes_version
    if ov != nv:
        cluster_change.details.append(f"kubernetesVersion {ov} -> {nv}")
        om, nm = _minor(ov), _minor(nv)
        for rule in rules:
            if rule.match != "kubernetesMinor" or not _service_ok(rule, service):
                continue
            if (
                om
                and nm
                and (
                    nm < om
                    or (nm[0] == om[0] and nm[1] - om[1] > rule.max_minor_step)
                    or nm[0] != om[0]
                )
            ):
                cluster_change.reasons.append(_reason(rule, f"{rule.why} ({ov} -> {nv})"))
        if not cluster_change.reasons and new.cluster.existing is not None:
            cluster_change.reasons.append(
                Reason(
                    "existing-cluster-kubernetes-minor",  # not default-*: the text output shows its action
                    "safe",
                    f"Kubernetes {ov} -> {nv} is one minor step; the cluster exists, so the file "
                    "states its version: gpucluster upgrades neither the control plane nor its "
                    "nodes (the runtime stack's changes that follow the version are listed apart)",
                    action="upgrade the cluster with its platform's own tools, one minor at a "
                    "time, before applying the runtime stack",
                    source="AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md): one minor at a time",
                )
            )
        elif not cluster_change.reasons:
            cluster_change.reasons.append(
                Reason(
                    "default-kubernetes-minor",
                    "safe",
                    f"Kubernetes {ov} -> {nv} is one minor step; the control plane upgrades first, then each pool (surge)",
                    source="AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md): one minor at a time",
                )
            )
    old_profile, new_profile = _profile(old), _profile(new)
    for name in sorted(set(old_profile) | set(new_profile)):
        a, b = old_profile.get(name), new_profile.get(name)
        if a == b:
            continue
        cluster_change.details.append(f"profile.{name} {a} -> {b}")
        matched = [
            r
            for r in rules
            if r.match == "profileChange"
            and r.profile == name
            and _service_ok(r, service)
            and (not r.has_from or r.from_ == a)
            and (not r.has_to or r.to == b)
        ]
        cluster_change.reasons += [
            _reason(r, f"{r.why} ({name}: {a} -> {b})") for r in matched
        ] or [
            Reason(
                "default-profile-change",
                "unknown",
                f"profile {name} changes {a} -> {b}; no rule assesses it",
            )
        ]
    from gpucluster.inputs.scheduler_profiles import SOURCE_DOCS, profile_changes

    for detail, verdict, why, action in profile_changes(old.cluster, new.cluster):
        cluster_change.details.append(detail)
        cluster_change.reasons.append(
            Reason("scheduler-profile-change", verdict, why, action=action, source=SOURCE_DOCS)
        )
    old_pools = {p.name: p for p in old.cluster.pools if p.gpu}
    for pool in new.cluster.pools:
        before = old_pools.get(pool.name)
        if not pool.gpu or before is None:
            continue
        diffs = [
            f"{k} {getattr(before, a)} -> {getattr(pool, a)}"
            for k, a in (("vmSize", "vm_size"), ("gpuDriver", "gpu_driver"))
            if getattr(before, a) != getattr(pool, a)
        ]
        if diffs:
            cluster_change.details.append(f"GPU pool {pool.name}: {', '.join(diffs)}")
            for rule in rules:
                if rule.match == "gpuPoolChange" and _service_ok(rule, service):
                    cluster_change.reasons.append(
                        _reason(rule, f"{rule.why} (pool {pool.name}: {', '.join(diffs)})")
                    )
    _removed_gpu_pools(old, new, rules, service, cluster_change)
    _replacing_changes(old, new, rules, service, cluster_change)
    if cluster_change.details:
        if not cluster_change.reasons:
            cluster_change.reasons.append(
                Reason("default-cluster-change", "unknown", "; ".join(cluster_change.details))
            )
        return cluster_change
    return None


def removed_gpu_pools(old: RuntimePlan, new: RuntimePlan) -> dict[str, str]:
    """GPU pools OLD has and NEW does not: pool name -> what happens to it (``removed``, or
    ``removed: step 2 of replacing it with <pool>`` when an OLD pool had ``replaces`` naming it,
    docs/cluster-file.md "Replacing a GPU pool")."""
    kept = {p.name for p in new.cluster.pools}
    by_successor = {p.replaces: p.name for p in old.cluster.pools if p.replaces is not None}
    return {
        p.name: (
            f"removed: step 2 of replacing it with {by_successor[p.name]}"
            if p.name in by_successor
            else "removed"
        )
        for p in old.cluster.pools
        if p.gpu and p.name not in kept
    }


def _removed_gpu_pools(
    old: RuntimePlan, new: RuntimePlan, rules: Sequence[Rule], service: str, change: Change
) -> None:
    """Append to ``change`` a detail and the matching ``gpuPoolRemoved`` reasons per removed GPU pool."""
    for name, what in removed_gpu_pools(old, new).items():
        change.details.append(f"GPU pool {name} {what}")
        for rule in rules:
            if rule.match == "gpuPoolRemoved" and _service_ok(rule, service):
                change.reasons.append(_reason(rule, f"{rule.why} (pool {name} {what})"))


def _backend_text(backend: Mapping[str, Any] | None) -> str:
    """A backend as the report names it: its type, and where the state lives (never a credential:
    only the keys that locate the state)."""
    if not backend:
        return "local"
    where = [
        f"{k}={backend[k]}"
        for k in (
            "organization",
            "workspacePrefix",
            "hostname",
            "project",
            "storageAccountName",
            "containerName",
            "keyPrefix",
        )
        if backend.get(k) not in (None, "")
    ]
    return str(backend.get("type", "local")) + (f" ({', '.join(where)})" if where else "")


def replacing_changes(old: RuntimePlan, new: RuntimePlan) -> list[tuple[str, str]]:
    """The changes of one cluster that replace, orphan or add infrastructure rather than update
    it in place: ``(match, detail)`` pairs, ``match`` a :data:`MATCHES` kind (``clusterRename``,
    ``regionChange``, ``backendChange``, ``systemPoolChange``, ``cpuPoolChange``,
    ``gpuPoolAdded``, ``gpuPoolResize``, ``gpuPoolUpgrade``), ``detail`` one line
    (``region eastus -> westus3``).

    * the name: stacks are ``<name>-cluster`` / ``<name>-runtime`` with state named after them,
      so a rename creates a second cluster and leaves the first without a stack;
    * the resolved ``region`` (AKS: the resource group's and the cluster's ``location``, both
      ForceNew in azurerm);
    * the ``backend``: the stacks' state moves (``terraform init -migrate-state``), or a new
      empty state creates everything again;
    * non-GPU pools (the first is AKS's system pool, rotated through
      ``temporary_name_for_rotation`` when its ``vm_size`` changes; another CPU pool is replaced),
      and other CPU pools added or removed (``cpuPoolChange``);
    * GPU pools added, or whose ``nodeCount`` changed;
    * GPU pools kept (same ``vmSize`` and ``gpuDriver``: a replaced pool is ``gpuPoolChange``)
      when ``kubernetesVersion`` changes: a pool gpucluster provisions follows the cluster's
      version (AKS: its ``orchestrator_version``), and the platform upgrades it node by node,
      draining and re-imaging each node. A cluster whose pools gpucluster does not provision (an
      existing cluster: no ``pools``) has none."""
    out: list[tuple[str, str]] = []
    a, b = old.cluster, new.cluster
    if a.name != b.name:
        out.append(("clusterRename", f"name {a.name} -> {b.name}"))
    if a.region != b.region:
        out.append(("regionChange", f"region {a.region} -> {b.region}"))
    if (a.backend or None) != (b.backend or None):
        out.append(
            ("backendChange", f"backend {_backend_text(a.backend)} -> {_backend_text(b.backend)}")
        )
    old_cpu = [p for p in a.pools if not p.gpu]
    new_cpu = [p for p in b.pools if not p.gpu]
    if old_cpu and new_cpu and old_cpu[0].name != new_cpu[0].name:
        out.append(("systemPoolChange", f"system pool {old_cpu[0].name} -> {new_cpu[0].name}"))
    by_name = {p.name: p for p in old_cpu}
    new_names = {p.name for p in new_cpu}
    for pool in old_cpu[1:]:
        if pool.name not in new_names and (not new_cpu or pool.name != new_cpu[0].name):
            out.append(("cpuPoolChange", f"CPU pool {pool.name} removed"))
    for pool in new_cpu[1:]:
        if pool.name not in by_name and (not old_cpu or pool.name != old_cpu[0].name):
            out.append(
                (
                    "cpuPoolChange",
                    f"CPU pool {pool.name} added ({pool.node_count} x {pool.vm_size})",
                )
            )
    for pool in new_cpu:
        before = by_name.get(pool.name)
        if before is not None and before.vm_size != pool.vm_size:
            out.append(
                (
                    "systemPoolChange",
                    f"pool {pool.name}: vmSize {before.vm_size} -> {pool.vm_size}",
                )
            )
    old_gpu = {p.name: p for p in a.pools if p.gpu}
    for pool in b.pools:
        if not pool.gpu:
            continue
        before = old_gpu.get(pool.name)
        if before is None:
            step = f", step 1 of replacing {pool.replaces}" if pool.replaces else ""
            out.append(
                (
                    "gpuPoolAdded",
                    f"GPU pool {pool.name} added ({pool.node_count} x {pool.vm_size}{step})",
                )
            )
        elif before.node_count != pool.node_count:
            out.append(
                (
                    "gpuPoolResize",
                    f"GPU pool {pool.name}: nodeCount {before.node_count} -> {pool.node_count}",
                )
            )
    if a.kubernetes_version != b.kubernetes_version:
        for pool in b.pools:
            before = old_gpu.get(pool.name)
            if (
                pool.gpu
                and before is not None
                and (before.vm_size, before.gpu_driver) == (pool.vm_size, pool.gpu_driver)
            ):
                out.append(
                    (
                        "gpuPoolUpgrade",
                        f"GPU pool {pool.name}: Kubernetes {a.kubernetes_version} -> "
                        f"{b.kubernetes_version} (orchestrator_version), each of its "
                        f"{pool.node_count} node(s) drained and re-imaged",
                    )
                )
    return out


def _replacing_changes(
    old: RuntimePlan, new: RuntimePlan, rules: Sequence[Rule], service: str, change: Change
) -> None:
    """Append :func:`replacing_changes` to ``change``: a detail each, and the reasons of the rules
    of its match kind (none: the cluster change falls back to ``unknown``, never ``safe``)."""
    for match, detail in replacing_changes(old, new):
        change.details.append(detail)
        matched = [r for r in rules if r.match == match and _service_ok(r, service)]
        change.reasons += [_reason(r, f"{r.why} ({detail})") for r in matched] or [
            Reason(
                "default-cluster-change",
                "unknown",
                f"{detail}: no rule assesses it on {service}",
                action="read `terraform plan` for replaced (-/+) or destroyed resources before the apply",
            )
        ]


def _policy_change(old: RuntimePlan, new: RuntimePlan) -> Change | None:
    """The policy change (what today's policy refuses on either side), or None."""
    # ---- policy: what today's policy refuses on either side
    policy = Change(component="policy", kind="policy")
    for f in new.findings:
        if f.severity == "error":
            policy.details.append(f"{f.id} {f.component} {f.key}")
            policy.reasons.append(
                Reason(
                    f"policy-{f.id}",
                    "manual",
                    f"NEW is refused by policy: {f.message}",
                    action=f.fix,
                    source="gpucluster policy (synth refuses it)",
                )
            )

    def same(
        f: Finding, plan: RuntimePlan
    ) -> tuple[str, str, str]:  # a moved cluster keeps its findings
        return f.id, f.component, f.key.removeprefix(f"clusters[{plan.cluster.index}].")

    for f in old.findings:
        if f.severity == "error" and same(f, old) not in {same(g, new) for g in new.findings}:
            policy.details.append(f"OLD violates {f.id} ({f.component} {f.key}); NEW fixes it")
    if policy.details:
        if not policy.reasons:
            policy.reasons.append(
                Reason("default-policy-fixed", "safe", "NEW resolves policy errors of OLD")
            )
        return policy
    return None


def _component_change(
    name: str,
    a: Any,
    b: Any,
    rules: Sequence[Rule],
    service: str,
    owners: tuple[Any, Any, dict[str, Any]],
) -> Change | None:
    """The change of component ``name`` (``a`` in OLD, ``b`` in NEW), or None if unchanged."""
    from gpucluster.charts.crds import owned_crds

    old_owners, new_owners, owner_moves = owners
    if a is not None and b is not None:
        values = _values_diff(a.values, b.values)
        ov, nv = a.ref.version, b.ref.version
        if (
            ov == nv
            and not values
            and a.terraform_variables == b.terraform_variables
            and not any(name in move for move in owner_moves.values())
        ):
            return None
        change = Change(
            component=name,
            kind="version" if ov != nv else "values",
            old_version=ov,
            new_version=nv,
            values=values,
        )
    elif b is not None:
        change = Change(component=name, kind="added", new_version=b.ref.version)
    else:
        change = Change(component=name, kind="removed", old_version=a.ref.version)
    old_crds = owned_crds(name, old_owners) if a is not None else []
    new_crds = owned_crds(name, new_owners) if b is not None else []
    if old_crds or new_crds:
        change.crds = {
            "owned": new_crds or old_crds,
            "added": sorted(set(new_crds) - set(old_crds)),
            "removed": sorted(set(old_crds) - set(new_crds)),
            "ownerChanges": [
                {"crd": crd, "from": f, "to": t}
                for crd, (f, t) in owner_moves.items()
                if name in (f, t)
            ],
        }
        if change.kind == "version" and new_crds:
            from gpucluster.charts.crds import crd_upgrade_path

            change.crds["step"] = crd_upgrade_path(b, change.old_version, change.new_version)
    _judge(change, a, b, rules, service, owner_moves)
    return change


def compare_plans(
    old: RuntimePlan, new: RuntimePlan, rules: Sequence[Rule], *, crd_owners_fn=None
) -> ClusterReport:
    """Compare one cluster's two plans (see the module docstring)."""
    from gpucluster.charts.crds import crd_owners

    owners_fn = crd_owners_fn or crd_owners
    service = new.cluster.criteria.service
    changes: list[Change] = []
    old_owners, new_owners = owners_fn(old.components), owners_fn(new.components)

    # ---- cluster level
    cluster_change = _cluster_change(old, new, rules, service)
    if cluster_change is not None:
        changes.append(cluster_change)

    # ---- policy: what today's policy refuses on either side
    policy = _policy_change(old, new)
    if policy is not None:
        changes.append(policy)

    # ---- CRD owner changes (stack-wide)
    owner_moves = {
        crd: (old_owners.get(crd), new_owners.get(crd))
        for crd in sorted(set(old_owners) | set(new_owners))
        if old_owners.get(crd)
        and new_owners.get(crd)
        and old_owners.get(crd) != new_owners.get(crd)
    }

    # ---- components
    names = [r.name for r in new.recipe.component_refs if r.name in new.components]
    names += [
        n
        for n in (r.name for r in old.recipe.component_refs)
        if n in old.components and n not in names
    ]
    for name in names:
        change = _component_change(
            name,
            old.components.get(name),
            new.components.get(name),
            rules,
            service,
            (old_owners, new_owners, owner_moves),
        )
        if change is not None:
            changes.append(change)
    return ClusterReport(cluster=new.cluster.name, service=service, changes=changes)


def _version_reasons(
    name: str, old: str, new: str, rules: Sequence[Rule], service: str
) -> list[Reason]:
    """The reasons of a chart version change of ``name`` (``componentVersion`` rules, else unknown)."""
    matched = version_rules(name, old, new, rules, service)
    return [_reason(r, f"{r.why} ({old} -> {new})") for r in matched] or [
        Reason(
            "default-version-unknown",
            "unknown",
            f"no transition record covers {name} {old} -> {new}",
            action=UNKNOWN_VERSION_ACTION,
        )
    ]


def _judge(
    change: Change,
    a,
    b,
    rules: Sequence[Rule],
    service: str,
    owner_moves: Mapping[str, tuple[str, str]],
) -> None:
    name = change.component
    applicable = [
        r for r in rules if _service_ok(r, service) and (r.component is None or r.component == name)
    ]
    if change.kind == "version":
        change.reasons += _version_reasons(
            name, change.old_version, change.new_version, rules, service
        )
    roll: list[str] = []
    driver_paths = [p for p in change.values if p.startswith(DRIVER_ONLY_PATHS)]
    if name == GPU_OPERATOR and change.kind in ("version", "values"):
        roll = driver_roll(change.kind, change.values, a.values, b.values)
    if change.kind in ("version", "values"):
        for rule in applicable:
            if rule.match != "valueChange" or rule.component != name or not rule.path:
                continue
            if name == GPU_OPERATOR and rule.path.startswith(DRIVER_ONLY_PATHS) and not roll:
                continue  # the operator installs no driver here: nothing reloads
            before, after = _get(a.values, rule.path), _get(b.values, rule.path)
            if before == after:
                continue
            if _value_matches(rule.from_, rule.has_from, before) and _value_matches(
                rule.to, rule.has_to, after
            ):
                shown = lambda v: "<unset>" if v is _MISSING else json.dumps(v)  # noqa: E731
                change.reasons.append(
                    _reason(rule, f"{rule.why} ({rule.path}: {shown(before)} -> {shown(after)})")
                )
        if roll and not any(
            r.rule == rule.id
            for r in change.reasons
            for rule in applicable
            if rule.match == "valueChange" and rule.path and replaces_driver_pods(rule.path)
        ):
            what = ", ".join(
                f"{change.old_version} -> {change.new_version}" if x == "chart version" else x
                for x in roll
            )
            change.reasons += [
                _reason(r, f"{r.why} ({what})") for r in applicable if r.match == "driverRoll"
            ] or [
                Reason(
                    "default-driver-roll",
                    "unknown",
                    f"the driver pods are replaced on every GPU node ({what}); no rule assesses it",
                )
            ]
        if name == GPU_OPERATOR and driver_paths and not roll:
            change.reasons.append(
                Reason(
                    "default-driver-not-managed",
                    "safe",
                    f"{', '.join(driver_paths)}: no effect, the GPU Operator does not install the "
                    "driver here (driver.enabled false: the node image brings it), so no driver pod "
                    "is replaced",
                    action="to change the driver, let the operator install it (profile gpuStack: "
                    "operator-managed) or change the node image",
                )
            )
        if change.kind == "values" and not change.reasons:
            change.reasons.append(
                Reason(
                    "default-values-safe",
                    "safe",
                    "values change only: a helm upgrade of the release; its readiness gates re-run and dependents wait",
                )
            )
    if change.kind == "added":
        change.reasons.append(
            Reason("default-added", "safe", f"{name} is installed (its CRDs are created first)")
        )
    if change.kind == "removed":
        owns = bool(change.crds.get("owned"))
        matched = [
            r
            for r in applicable
            if r.match == "componentRemoved" and (r.owns_crds is None or r.owns_crds == owns)
        ]
        change.reasons += [_reason(r) for r in matched] or [
            Reason(
                "default-removed",
                "safe",
                f"{name} is uninstalled (terraform destroys its releases, dependents first)",
            )
        ]
    moves = [(crd, f, t) for crd, (f, t) in owner_moves.items() if name == t]
    if moves:
        for rule in (r for r in rules if r.match == "crdOwnerChange" and _service_ok(r, service)):
            text = ", ".join(f"{crd}: {f} -> {t}" for crd, f, t in moves)
            change.reasons.append(_reason(rule, f"{rule.why} ({text})"))
    if not change.reasons:
        change.reasons.append(Reason("default-safe", "safe", "no known hazard"))


def compare(
    old_plans: Sequence[RuntimePlan],
    new_plans: Sequence[RuntimePlan],
    rules: Sequence[Rule],
    *,
    old_label: str = "",
    new_label: str = "",
) -> Report:
    """Compare every cluster (matched by name; one cluster on each side is compared whatever its
    names). A cluster on one side only is reported as added or removed, both manual
    (:func:`_cluster_added`)."""
    old_by, new_by = {p.cluster.name: p for p in old_plans}, {p.cluster.name: p for p in new_plans}
    if len(old_by) == 1 and len(new_by) == 1:
        pairs = [(next(iter(old_by.values())), next(iter(new_by.values())))]
    else:
        pairs = [(old_by.get(n), new_by.get(n)) for n in sorted(set(old_by) | set(new_by))]
    reports: list[ClusterReport] = []
    for a, b in pairs:
        if a is not None and b is not None:
            reports.append(compare_plans(a, b, rules))
        elif b is not None:
            reports.append(
                ClusterReport(
                    b.cluster.name,
                    b.cluster.criteria.service,
                    [
                        Change(
                            "cluster",
                            "added",
                            reasons=[_cluster_added(b)],
                        )
                    ],
                )
            )
        else:
            reports.append(
                ClusterReport(
                    a.cluster.name,
                    a.cluster.criteria.service,
                    [
                        Change(
                            "cluster",
                            "removed",
                            reasons=[
                                Reason(
                                    "default-cluster-removed",
                                    "manual",
                                    "the cluster leaves the file: its stacks are no longer synthesized",
                                    action="run terraform destroy on its runtime stack (then cluster stack) before removing it from the file "
                                    "(docs/upgrading.md, Teardown)",
                                )
                            ],
                        )
                    ],
                )
            )
    return Report(old=old_label, new=new_label, clusters=reports)


def _cluster_added(plan: RuntimePlan) -> Reason:
    """A cluster only in NEW: ``manual``, never ``safe``. Where gpucluster provisions it, its
    pools (GPU pools among them) are created and billed from the apply on, as an added GPU pool
    is (``aks-gpu-pool-added``); on an existing cluster the runtime stack installs the GPU stack
    onto nodes whose running work no file shows."""
    pools = plan.cluster.pools
    if pools:
        listed = ", ".join(f"{p.name} x{p.node_count} {p.vm_size}" for p in pools)
        return Reason(
            "default-cluster-added",
            "manual",
            f"a new cluster: its cluster stack creates it with its pools ({listed}), "
            "provisioned and billed from the apply on",
            action="confirm the quota for these VM sizes in the region and the cost with whoever "
            "owns the budget before the apply",
        )
    return Reason(
        "default-cluster-added",
        "manual",
        "a new cluster entry for an existing cluster: the runtime stack installs the GPU stack "
        "onto nodes whose running work no file shows",
        action="confirm that the kubeconfig reaches the cluster meant and that no other GPU "
        "Operator, driver or device plugin runs there (`gpucluster detect`, kubectl get pods -A) "
        "before the apply",
    )


# --------------------------------------------------------------------------- inputs


@dataclass
class Side:
    """One resolved input: its label (as given), the file read and the cluster plans."""

    label: str
    path: Path
    plans: list[RuntimePlan]


def _git(args: Sequence[str], cwd: Path, label: str, *, binary: bool = False):
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GpuclusterError(
            f"cannot run git for '{label}': {exc}",
            key="--from/--to",
            fix="install git, or pass two files instead of a git revision",
        ) from None
    if proc.returncode != 0:
        text = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GpuclusterError(
            f"git {' '.join(args[:2])} failed for '{label}': {text[-1] if text else 'no output'}",
            key="--from/--to",
            fix="give an existing file, or REV / REV:path of a file tracked in git",
        )
    return proc.stdout if binary else proc.stdout.decode("utf-8", "replace")


def _commit(rev: str, top: Path, label: str) -> str:
    """The commit id ``rev`` names in the repository at ``top``: ``git rev-parse --verify --quiet
    --end-of-options <rev>^{commit}``, so a revision can never be read as an option of git (such
    as ``--output=FILE``, which ``git archive`` would write) -- only the hexadecimal id it gives is
    passed on.

    Raises:
        GpuclusterError: ``rev`` names no commit.
    """
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
            cwd=top,
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GpuclusterError(
            f"cannot run git for '{label}': {exc}",
            key="--from/--to",
            fix="install git, or pass two files instead of a git revision",
        ) from None
    commit = proc.stdout.decode("ascii", "replace").strip()
    if proc.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
        raise GpuclusterError(
            f"'{rev}' is not a commit of the git repository {top}",
            key="--from/--to",
            allowed="a cluster file, a RecipeResult, REV:path, or REV with a file on the other side",
            fix="name an existing revision (git log --oneline), e.g. HEAD~1 or main:gpucluster.yaml",
        )
    return commit


def _from_git(label: str, rev: str, path: Path, workdir: Path) -> Path:
    """Extract the folder of ``path`` at ``rev`` into ``workdir``; returns the file's copy."""
    absolute = path if path.is_absolute() else Path.cwd() / path
    folder = absolute.parent
    if not folder.is_dir():
        raise GpuclusterError(
            f"folder '{folder}' of '{label}' does not exist",
            key="--from/--to",
            fix="give the path of the file inside a git work tree",
        )
    top = Path(_git(["rev-parse", "--show-toplevel"], folder, label).strip()).resolve()
    try:
        rel = folder.resolve().relative_to(top) / absolute.name
    except ValueError:
        raise GpuclusterError(
            f"'{label}' is outside the git work tree {top}",
            key="--from/--to",
            fix="give a file inside the repository",
        ) from None
    commit = _commit(rev, top, label)
    data = _git(
        [
            "archive",
            "--format=tar",
            commit,
            "--",
            str(rel.parent) if str(rel.parent) != "." else ".",
        ],
        top,
        label,
        binary=True,
    )
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if (
                member.issym()
                or member.islnk()
                or member.name.startswith("/")
                or ".." in Path(member.name).parts
            ):
                continue
            tar.extract(member, workdir, filter="data")
    copy = workdir / rel
    if not copy.is_file():
        raise GpuclusterError(
            f"'{rel}' does not exist at git revision '{rev}'",
            key="--from/--to",
            fix="check the revision and the path (git show REV:path)",
        )
    return copy


def _plans_from_file(path: Path, label: str) -> list[RuntimePlan]:
    from gpucluster import yamlsafe
    from gpucluster.errors import Problem
    from gpucluster.inputs.config import parse_clusters
    from gpucluster.pipeline import build_plan
    from gpucluster.recipes import recipe_result

    data = yamlsafe.load_yaml_file(path, display=label)
    wrapped = isinstance(data, dict) and data.get("kind") == recipe_result.KIND
    if wrapped:
        data = {"clusters": [{"name": "recipe", "recipe": path.name}]}
    plans: list[RuntimePlan] = []
    problems: list[Problem] = []
    for cluster in parse_clusters(data, source=label, root=path.resolve().parent):
        if wrapped:  # a RecipeResult, not a cluster file: its keys are its own (no clusters[0].)
            cluster.index = cluster.backend_key = None
        try:
            plans.append(build_plan(cluster, strict=False))  # policy errors are judged, not fatal
        except GpuclusterError as err:
            problems.extend(err.problems)
    if problems:
        raise GpuclusterError(problems=problems)
    return plans


def load_side(arg: str, other: str | None, workdir: Path, *, key: str = "--from") -> Side:
    """Resolve ``--from`` / ``--to``: an existing file, ``REV:path``, or ``REV`` (the other
    side's file at ``REV``).

    Raises:
        GpuclusterError: neither a file nor a git revision of one; unreadable or invalid input
            (the cluster file / RecipeResult errors of :mod:`gpucluster.inputs.config`).
    """
    path = Path(arg)
    if path.is_file():
        return Side(arg, path, _plans_from_file(path, arg))
    rev, sep, rest = arg.partition(":")
    if not sep and ("/" in arg or arg.endswith((".yaml", ".yml", ".json"))):
        raise GpuclusterError(
            f"file '{arg}' does not exist",
            file=arg,
            key=key,
            allowed="a cluster file, a RecipeResult, REV:path, or REV with a file on the other side",
            fix="check the path, or name a git revision (e.g. HEAD~1 or main:gpucluster.yaml)",
        )
    target = (
        Path(rest) if sep and rest else (Path(other) if other and Path(other).is_file() else None)
    )
    if not rev or target is None:
        raise GpuclusterError(
            f"'{arg}' is not a file, and no file is known to read at that git revision",
            key=key,
            allowed="a cluster file, a RecipeResult, REV:path, or REV with a file on the other side",
            fix="e.g. --from HEAD~1 --to gpucluster.yaml, or --from main:gpucluster.yaml --to gpucluster.yaml",
        )
    copy = _from_git(arg, rev, target, workdir)
    return Side(arg, copy, _plans_from_file(copy, f"{rev}:{target}"))


def run(old: str, new: str) -> Report:
    """Load both sides and compare them (:func:`compare` with :func:`load_rules`)."""
    return run_sides(old, new)[0]


def run_sides(old: str, new: str) -> tuple[Report, Side, Side]:
    """:func:`run`, also returning both resolved sides (their plans: what
    :mod:`gpucluster.live.upgrade_live` judges on a snapshot)."""
    rules = load_rules()
    workdir = Path(tempfile.mkdtemp(prefix="gpucluster-upgrade-check-"))
    try:
        a = load_side(old, new, workdir / "from", key="--from")
        b = load_side(new, old, workdir / "to", key="--to")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return compare(a.plans, b.plans, rules, old_label=old, new_label=new), a, b


# --------------------------------------------------------------------------- output


def render_text(report: Report) -> str:
    """Human-readable report; ends with the overall verdict and its exit code. Every line passes
    :func:`gpucluster.errors.escaped` (what comes from the compared files stays on its line)."""
    lines = [f"upgrade-check {report.old} -> {report.new}"]
    for c in report.clusters:
        lines.append(f"cluster {c.cluster} ({c.service}): {c.verdict}")
        if not c.changes:
            lines.append("  no change")
        for ch in c.changes:
            head = f"  {ch.component}: {ch.kind}"
            if ch.kind == "version":
                head += f" {ch.old_version} -> {ch.new_version}"
            head += f"  [{ch.verdict}]"
            lines.append(head)
            for d in ch.details:
                lines.append(f"    {d}")
            if ch.values:
                shown = ", ".join(ch.values[:8]) + (
                    f", ... ({len(ch.values)} paths)" if len(ch.values) > 8 else ""
                )
                lines.append(f"    values: {shown}")
            if ch.crds:
                lines.append(f"    CRDs owned: {', '.join(ch.crds['owned'])}")
                for key in ("added", "removed"):
                    if ch.crds.get(key):
                        lines.append(f"    CRDs {key}: {', '.join(ch.crds[key])}")
                for move in ch.crds.get("ownerChanges", []):
                    lines.append(f"    CRD owner: {move['crd']} {move['from']} -> {move['to']}")
                if ch.crds.get("step"):
                    lines.append(f"    CRD upgrade: {ch.crds['step']}")
            for r in ch.reasons:
                if r.verdict == "safe" and r.rule.startswith("default-"):
                    continue
                lines.append(f"    {r.verdict} [{r.rule}]: {r.why}")
                if r.action:
                    lines.append(f"      do: {r.action}")
                if r.source:
                    lines.append(f"      source: {r.source}")
    lines.append(f"verdict: {report.verdict} (exit {report.exit_code})")
    from gpucluster.errors import (
        escaped,
    )  # each line one line: labels, values paths and names come from the files

    return "\n".join(escaped(line) for line in lines) + "\n"


def render_json(report: Report) -> str:
    return json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n"

"""The GPU Operator's driver upgrade policy: the cluster file's ``driverUpgradePolicy``, checked,
and the ``driver.upgradePolicy`` values of the ``gpu-operator`` release written from it.

Cluster file (docs/cluster-file.md, "driverUpgradePolicy")::

    driverUpgradePolicy:
      autoUpgrade: true              # false: the operator upgrades no node by itself
      maxParallelUpgrades: 1         # 0 = no limit
      maxUnavailable: "25%"          # integer >= 1 or "1%".."100%"
      waitForCompletion: {timeoutSeconds: 0, podSelector: ""}
      podDeletion: {force: false, timeoutSeconds: 300, deleteEmptyDir: false}
      drain: {enable: true, force: false, podSelector: "", timeoutSeconds: 300, deleteEmptyDir: false}

Every cluster gets the policy (:class:`gpucluster.model.DriverUpgradePolicy`'s defaults where the
file does not write it), replacing the catalog's ``driver.upgradePolicy`` as a whole; a user
override of ``driver.upgradePolicy.*`` (``overrides``, docs/overrides.md) is applied after it and
wins. The key names are the ClusterPolicy CRD's ``spec.driver.upgradePolicy`` (``podDeletion``);
the chart reads ``driver.upgradePolicy.gpuPodDeletion`` for it. The chart's
``templates/clusterpolicy.yaml`` and ``values.yaml`` read the same keys at every version in
../shared/reference/charts (v25.10.1, v26.3.3, v26.7.0; tests/test_driver_upgrade.py renders each).

Two chart behaviours the checks follow: ``maxUnavailable`` is rendered through
``| default "25%"``, so an integer 0 would silently become 25% (refused); ``podSelector`` is
rendered unquoted, so only equality-based selectors (``key=value``, ``key==value``,
``key!=value``, comma-separated) are accepted: they always render as a YAML string.

Where the operator does not install the driver (``driver.enabled`` false: AKS ``gpuDriver:
Install``, the driver comes with the node image) the policy changes nothing; a written
``driverUpgradePolicy`` is then a warning ``DRIVER-UPGRADE-POLICY-UNUSED`` (:func:`unused_findings`).
Pure Python, no cdktf.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpucluster.fields import Fields, Where
from gpucluster.model import ClusterSpec, Component, DriverUpgradePolicy, Finding
from gpucluster.recipes.scheduling import check_label_key, check_label_value
from gpucluster.values import deep_merge

COMPONENT = "gpu-operator"
VALUES_PATH = "driver.upgradePolicy"
KEY = "driverUpgradePolicy"
DOCS = "docs/cluster-file.md (driverUpgradePolicy)"
SOURCE = (
    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-driver-upgrades.html"
)
"""The GPU Operator docs page "GPU Driver Upgrades" that describes every field."""

TOP_KEYS = (
    "autoUpgrade",
    "maxParallelUpgrades",
    "maxUnavailable",
    "waitForCompletion",
    "podDeletion",
    "drain",
)
WAIT_KEYS = ("timeoutSeconds", "podSelector")
POD_DELETION_KEYS = ("force", "timeoutSeconds", "deleteEmptyDir")
DRAIN_KEYS = ("enable", "force", "podSelector", "timeoutSeconds", "deleteEmptyDir")

INT_MAX = 2**31 - 1
"""Largest count or timeout accepted (the operator reads them as Go ``int``; the CRD: integer >= 0)."""

_PERCENT = re.compile(r"^(100|[1-9][0-9]?)%$")
_TERM = re.compile(r"^([^=!]+)(==|=|!=)(.*)$")
SELECTOR_FORM = "an equality-based label selector: key=value, key==value or key!=value terms separated by ',' ('' = none)"


def _selector(where: Where, value: Any, key: str) -> str:
    text = where.check_str(value, key, empty_ok=True)
    if text == "":
        return text
    for term in text.split(","):
        match = _TERM.fullmatch(term.strip())
        try:
            if match is None:
                raise ValueError(f"term {term!r} has no =, == or !=")
            check_label_key(match.group(1).strip(), "label key")
            check_label_value(match.group(3).strip(), "label value")
        except ValueError as exc:
            raise where.error(
                key,
                f"'{key}' is {text!r}, not a selector the GPU Operator chart can take: {exc}",
                allowed=SELECTOR_FORM,
                fix="write e.g. podSelector: app=trainer (set-based selectors and a bare key are not supported)",
            ) from None
    return ",".join(t.strip() for t in text.split(","))


def _max_unavailable(where: Where, value: Any, key: str) -> int | str:
    allowed = 'an integer 1 to 2147483647 or a percentage "1%" to "100%"'
    if isinstance(value, int) and not isinstance(value, bool):
        if 1 <= value <= INT_MAX:
            return value
    elif isinstance(value, str) and _PERCENT.fullmatch(value):
        return value
    raise where.error(
        key,
        f"'{key}' is {value!r}"
        + (
            ', which the chart renders as its default 25% (maxUnavailable | default "25%")'
            if value == 0
            else ""
        ),
        allowed=allowed,
        fix='write a node count such as 1, or a quoted percentage of the GPU nodes such as "25%"',
    )


def parse_driver_upgrade_policy(
    raw: Any, *, file: str, cluster: str, base: str
) -> DriverUpgradePolicy | None:
    """The cluster file's ``driverUpgradePolicy`` (module docstring); keys not written keep the
    :class:`~gpucluster.model.DriverUpgradePolicy` defaults.

    Args:
        raw: the YAML value (None: not written).
        file / cluster: where, for errors.
        base: the key path of the setting (``clusters[0].driverUpgradePolicy``).

    Returns:
        the policy, or None when ``raw`` is None.

    Raises:
        GpuclusterError: one line naming the key (``clusters[0].driverUpgradePolicy.drain.force``)
            with the allowed values: unknown keys, wrong types, counts or timeouts out of range,
            a ``maxUnavailable`` that is not a count >= 1 or a percentage, a selector the chart
            cannot render.
    """
    if raw is None:
        return None
    where = Where(file=file, cluster=cluster, docs=DOCS)
    top = where.fields(raw, base)
    top.check_keys(TOP_KEYS)
    d = DriverUpgradePolicy()

    def count(f: Fields, name: str, default: int) -> int:
        return int(f.get_int(name, default, minimum=0, maximum=INT_MAX))

    def flag(f: Fields, name: str, default: bool) -> bool:
        return bool(f.get_bool(name, default))

    def sub(name: str, keys: tuple[str, ...]) -> Fields:
        f = top.get_fields(name, empty=True)
        f.check_keys(keys)
        return f

    wait, deletion, drain = (
        sub("waitForCompletion", WAIT_KEYS),
        sub("podDeletion", POD_DELETION_KEYS),
        sub("drain", DRAIN_KEYS),
    )
    max_unavailable = d.max_unavailable
    if top.get("maxUnavailable") is not None:
        max_unavailable = _max_unavailable(
            where, top["maxUnavailable"], top.key_of("maxUnavailable")
        )

    def selector(f: Fields, default: str) -> str:
        if f.get("podSelector") is None:
            return default
        return _selector(where, f["podSelector"], f.key_of("podSelector"))

    return DriverUpgradePolicy(
        auto_upgrade=flag(top, "autoUpgrade", d.auto_upgrade),
        max_parallel_upgrades=count(top, "maxParallelUpgrades", d.max_parallel_upgrades),
        max_unavailable=max_unavailable,
        wait_timeout_seconds=count(wait, "timeoutSeconds", d.wait_timeout_seconds),
        wait_pod_selector=selector(wait, d.wait_pod_selector),
        pod_deletion_force=flag(deletion, "force", d.pod_deletion_force),
        pod_deletion_timeout_seconds=count(
            deletion, "timeoutSeconds", d.pod_deletion_timeout_seconds
        ),
        pod_deletion_delete_empty_dir=flag(
            deletion, "deleteEmptyDir", d.pod_deletion_delete_empty_dir
        ),
        drain_enable=flag(drain, "enable", d.drain_enable),
        drain_force=flag(drain, "force", d.drain_force),
        drain_pod_selector=selector(drain, d.drain_pod_selector),
        drain_timeout_seconds=count(drain, "timeoutSeconds", d.drain_timeout_seconds),
        drain_delete_empty_dir=flag(drain, "deleteEmptyDir", d.drain_delete_empty_dir),
    )


def policy_of(cluster: ClusterSpec) -> DriverUpgradePolicy:
    """The policy a cluster installs: its ``driverUpgradePolicy``, or the defaults."""
    return cluster.driver_upgrade_policy or DriverUpgradePolicy()


def chart_values(policy: DriverUpgradePolicy) -> dict[str, Any]:
    """The gpu-operator chart's ``driver.upgradePolicy`` mapping for ``policy`` (every key the
    chart's ``templates/clusterpolicy.yaml`` reads, v25.10.1 to v26.7.0; ``podDeletion`` is the
    chart's ``gpuPodDeletion``)."""
    return {
        "autoUpgrade": policy.auto_upgrade,
        "maxParallelUpgrades": policy.max_parallel_upgrades,
        "maxUnavailable": policy.max_unavailable,
        "waitForCompletion": {
            "timeoutSeconds": policy.wait_timeout_seconds,
            "podSelector": policy.wait_pod_selector,
        },
        "gpuPodDeletion": {
            "force": policy.pod_deletion_force,
            "timeoutSeconds": policy.pod_deletion_timeout_seconds,
            "deleteEmptyDir": policy.pod_deletion_delete_empty_dir,
        },
        "drain": {
            "enable": policy.drain_enable,
            "force": policy.drain_force,
            "podSelector": policy.drain_pod_selector,
            "timeoutSeconds": policy.drain_timeout_seconds,
            "deleteEmptyDir": policy.drain_delete_empty_dir,
        },
    }


def cluster_policy_spec(policy: DriverUpgradePolicy) -> dict[str, Any]:
    """What the chart renders into the ClusterPolicy's ``spec.driver.upgradePolicy`` for
    ``policy`` (CRD field names; an empty ``podSelector`` is left out, as the template does)."""
    values = chart_values(policy)
    spec = {k: v for k, v in values.items() if k != "gpuPodDeletion"}
    spec["podDeletion"] = values["gpuPodDeletion"]
    for part in ("waitForCompletion", "drain"):
        spec[part] = {k: v for k, v in spec[part].items() if not (k == "podSelector" and v == "")}
    return spec


def apply_driver_upgrade_policy(
    cluster: ClusterSpec, components: Mapping[str, Component]
) -> dict[str, Component]:
    """The components with ``gpu-operator``'s ``driver.upgradePolicy`` replaced by
    :func:`chart_values` of :func:`policy_of` ``cluster``; ``components`` is left as it is (a
    cluster without gpu-operator: the same components)."""
    out = dict(components)
    comp = out.get(COMPONENT)
    if comp is None:
        return out
    values = dict(comp.values)
    driver = dict(values.get("driver") or {})
    driver.pop("upgradePolicy", None)
    values["driver"] = deep_merge(driver, {"upgradePolicy": chart_values(policy_of(cluster))})
    out[COMPONENT] = dataclasses.replace(comp, values=values)
    return out


def unused_findings(cluster: ClusterSpec, components: Mapping[str, Component]) -> list[Finding]:
    """A warning ``DRIVER-UPGRADE-POLICY-UNUSED`` when the cluster file writes
    ``driverUpgradePolicy`` and the GPU Operator installs no driver (no gpu-operator release, or
    its final values have ``driver.enabled: false``): the setting then changes nothing."""
    if cluster.driver_upgrade_policy is None:
        return []
    comp = components.get(COMPONENT)
    driver = (comp.values.get("driver") or {}) if comp is not None else {}
    if comp is not None and driver.get("enabled", True) is not False:
        return []
    why = (
        "this cluster installs no gpu-operator"
        if comp is None
        else "the GPU Operator does not install the GPU driver here (gpu-operator values "
        "driver.enabled: false; the driver comes with the node image, as with AKS gpuDriver: Install)"
    )
    return [
        Finding(
            "DRIVER-UPGRADE-POLICY-UNUSED",
            "warning",
            cluster.name,
            COMPONENT,
            KEY,
            f"driverUpgradePolicy changes nothing: {why}; a driver change is then a node image "
            "change of the node pool (on AKS, changing gpu_driver replaces the pool)",
            "remove driverUpgradePolicy, or let the operator install the driver "
            "(AKS: profile gpuStack: operator-managed, pools' gpuDriver: None)",
        )
    ]


NOT_UNUSED_PATHS = ("driver.enabled", "driver.rdma.useHostMofed")
"""Driver paths never warned as unused: ``driver.enabled`` decides it, and the AKS policy
``AKS-HOST-MOFED`` asks for ``driver.rdma.useHostMofed=false`` when network-operator is off."""


def override_findings(
    cluster: ClusterSpec, components: Mapping[str, Component], resolved: Iterable[Any]
) -> list[Finding]:
    """What the user's gpu-operator overrides (``resolved``: ``(canonical component, Override)``
    pairs, :class:`gpucluster.recipes.overrides.ResolvedOverrides`) write into the driver that
    the cluster file's own keys would have checked:

    * a warning ``DRIVER-OVERRIDE-UNUSED`` per override of ``driver.*`` or ``gdrcopy.*`` (not
      :data:`NOT_UNUSED_PATHS`) while the final values have ``driver.enabled: false`` (AKS
      ``gpuStack: azure-managed``: the node image brings the driver), which then changes nothing;
    * an error ``DRIVER-UPGRADE-POLICY-VALUE`` when an override writes ``driver.upgradePolicy``
      and the final ``driver.upgradePolicy`` fails the checks of ``driverUpgradePolicy``
      (:func:`parse_driver_upgrade_policy`: ``maxUnavailable`` 0, -1 or ``150%``, a negative
      count, a selector the chart cannot render; keys the chart does not read are left to
      ``lint``'s dead-value warning); ``key`` is the values path, so
      the error names the override's file.
    """
    from gpucluster.errors import GpuclusterError
    from gpucluster.values import leaf_paths

    comp = components.get(COMPONENT)
    if comp is None:
        return []
    written: list[tuple[Any, list[str]]] = []
    for name, override in resolved:
        if name != COMPONENT:
            continue
        if override.kind == "values":
            value = override.value if isinstance(override.value, Mapping) else {}
            written.append((override, [p for p, _ in leaf_paths(value)]))
        else:
            written.append((override, [override.path]))
    driver = comp.values.get("driver")
    driver = driver if isinstance(driver, Mapping) else {}
    out: list[Finding] = []
    if driver.get("enabled", True) is False:
        for override, paths in written:
            shown = [
                p
                for p in paths
                if p.startswith(("driver.", "gdrcopy.")) and p not in NOT_UNUSED_PATHS
            ]
            if shown:
                out.append(
                    Finding(
                        "DRIVER-OVERRIDE-UNUSED",
                        "warning",
                        cluster.name,
                        COMPONENT,
                        override.key,
                        f"{', '.join(shown)} has no effect: the GPU Operator does not install the GPU "
                        "driver here (gpu-operator values driver.enabled: false; "
                        + (
                            f"with gpuStack {cluster.profile['gpuStack']} "
                            if cluster.profile.get("gpuStack")
                            else ""
                        )
                        + "the node image brings the driver), so no driver is changed or reloaded",
                        "use profile gpuStack: operator-managed"
                        + (
                            " (the pools' gpuDriver: None)"
                            if cluster.criteria.service == "aks"
                            else ""
                        )
                        + " for the operator to install this driver, or drop the override",
                    )
                )
    if not any(p.startswith(VALUES_PATH) for _, paths in written for p in paths):
        return out
    raw = driver.get("upgradePolicy")
    if isinstance(raw, Mapping):  # the keys the chart reads (a misspelled one: lint.dead-value)
        raw = {("podDeletion" if k == "gpuPodDeletion" else k): v for k, v in raw.items()}
        subs = {
            "waitForCompletion": WAIT_KEYS,
            "podDeletion": POD_DELETION_KEYS,
            "drain": DRAIN_KEYS,
        }
        raw = {
            k: (
                {s: x for s, x in v.items() if s in subs[k]}
                if k in subs and isinstance(v, Mapping)
                else v
            )
            for k, v in raw.items()
            if k in TOP_KEYS
        }
    try:
        parse_driver_upgrade_policy(
            raw, file=cluster.source, cluster=cluster.name, base=VALUES_PATH
        )
    except GpuclusterError as err:
        for problem in err.problems:
            key = (problem.key or VALUES_PATH).replace(".podDeletion", ".gpuPodDeletion")
            out.append(
                Finding(
                    "DRIVER-UPGRADE-POLICY-VALUE",
                    "error",
                    cluster.name,
                    COMPONENT,
                    key,
                    f"{problem.message}"
                    + (f", allowed: {problem.allowed}" if problem.allowed else "")
                    + " (the checks of driverUpgradePolicy apply to an override of "
                    "driver.upgradePolicy too)",
                    problem.fix or "write the policy in driverUpgradePolicy (docs/cluster-file.md)",
                )
            )
    return out

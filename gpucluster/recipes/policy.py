"""Policy checks on the final effective values of a cluster (fail closed before writing).

:func:`evaluate` runs the platform-neutral checks below and every plugin's
``gpucluster_policy_checks`` hook (AKS-only checks live in ``plugins/gpucluster_aks/policy.py``),
and returns all findings sorted (errors first). ``gpucluster.pipeline`` turns error findings
into a :class:`~gpucluster.errors.GpuclusterError` (exit 2, nothing written); warnings and info
are carried on the RuntimePlan and printed.

Core check ids (docs/policies.md has one section each):

==========================  ========  ===================================================
``GPU-ADVERTISER``          error     exactly one whole-GPU advertiser (device plugin, DRA or platform add-on)
``GPU-TOGGLE-TYPE``         error     policy toggles must be booleans; sections not null
``GPU-DRIVER-ROOT``         error     driver roots absolute; DRA root == operator install dir
``GPU-DRIVER-STALE-RECIPE`` error     driver.enabled=false with DRA root /run/nvidia/driver
``PROFILE-OWNED``           error     a profile-owned key overridden with a different value
``SCHED-GPU-TAINT``         error     accelerated tolerations must tolerate the GPU pool taints
``NVSENTINEL-RUNTIMECLASS`` error     nvsentinel metadata-collector RuntimeClass == operator's
``POLICY-KEY-OVERRIDE``     warning   allocation-policy key changed by a direct override
``DEPENDENCY-PRUNED``       info      dependency edge dropped because a component is disabled
==========================  ========  ===================================================

Facts come from AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md): allocation policy,
driver ownership modes, override tuple; and AICR's bundle validations (CheckDriverOwnershipCoherence rules, registry.yaml).
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Callable, Mapping
from typing import Any

from gpucluster.model import ClusterSpec, Component, Finding, Recipe, Toleration, absolute_keys
from gpucluster.plugins import call_list_hook
from gpucluster.policy_keys import (
    ALLOCATION_POLICY_KEYS,
    DRA_DRIVER,
    GPU_OPERATOR,
)  # noqa: F401  (re-exported)
from gpucluster.recipes.overrides import (
    ENABLED_KEY,
    ResolvedOverrides,
    override_paths,
    paths_intersect,
    pruned_edges,
    resolved_overrides,
)
from gpucluster.values import leaf_paths, split_path

OPERATOR_CONTAINER_DRIVER_ROOT = "/run/nvidia/driver"
"""Where the GPU Operator's driver container installs the driver; the gpu-operator chart's
``hostPaths.driverInstallDir`` default (AICR gpu-operator values.yaml)."""

DRA_CHART_DEFAULT_ROOT = "/"
"""dra-driver-nvidia-gpu chart default ``nvidiaDriverRoot`` (host-installed driver)."""

CHART_DEFAULTS: dict[str, dict[str, Any]] = {
    GPU_OPERATOR: {
        "devicePlugin.enabled": True,
        "driver.enabled": True,
        "toolkit.enabled": True,
        "driver.rdma.enabled": False,
        "driver.rdma.useHostMofed": False,
    },
    DRA_DRIVER: {
        "resources.gpus.enabled": True,
        "gpuResourcesEnabledOverride": False,
        "resources.computeDomains.enabled": True,
    },
    "nodewright-customizations": {
        "tuningEnabled": True,
        "autoTaintNewNodes": True,
    },
}
"""Chart defaults of the toggles the checks read, used when a key is absent from the values
(gpu-operator v26.7 and dra-driver-nvidia-gpu 0.5 chart values; nodewright-customizations: the
``tuning`` Skyhook template, which reads any value but ``false`` as on, so ``no``/``off``/``0``
would render the rebooting ``nvidia-tuned`` package)."""

_ABSENT = object()


# --------------------------------------------------------------------------- helpers


def lookup(values: Mapping[str, Any], path: str) -> tuple[Any, str | None]:
    """Value at ``path``: ``(value, None)``, ``(_ABSENT, None)`` or ``(_ABSENT, problem)``.

    A problem is reported when a parent section is explicitly null or not a mapping (Helm drops
    a null section together with the chart defaults below it).
    """
    node: Any = values
    parts = split_path(path)
    for i, part in enumerate(parts):
        if part not in node:
            return _ABSENT, None
        node = node[part]
        if i < len(parts) - 1:
            section = ".".join(parts[: i + 1])
            if node is None:
                return _ABSENT, (
                    f"'{section}' is explicitly null: Helm drops a null section together with the chart defaults "
                    f"below it, so '{path}' cannot be verified and the chart's templates fail"
                )
            if not isinstance(node, Mapping):
                return (
                    _ABSENT,
                    f"'{section}' is a {type(node).__name__}, not a mapping, so '{path}' cannot be read",
                )
    return node, None


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f"the string '{value}'"
    return f"{_yaml(value)} ({type(value).__name__})"


def _yaml(value: Any) -> str:
    """A value as written in YAML (``false``, ``'nvidia'``, ``null``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"'{value}'"
    return repr(value)


def _clean_root(value: str) -> str:
    """Normalized absolute path (``//a/b/`` -> ``/a/b``); trailing-slash spellings compare equal."""
    return posixpath.normpath(re.sub(r"/+", "/", value)) if value else value


def tolerates(
    toleration: Toleration | Mapping[str, Any], key: str, value: str, effect: str
) -> bool:
    """Kubernetes toleration matching: does ``toleration`` tolerate taint ``key=value:effect``?"""
    t = toleration.as_dict() if isinstance(toleration, Toleration) else dict(toleration)
    t_effect = t.get("effect") or ""
    if t_effect and t_effect != effect:
        return False
    t_key = t.get("key") or ""
    operator = t.get("operator") or "Equal"
    if not t_key:
        return operator == "Exists"
    if t_key != key:
        return False
    if operator == "Exists":
        return True
    return (t.get("value") or "") == (value or "")


class _Checks:
    """Collects findings of one cluster."""

    def __init__(
        self,
        cluster: ClusterSpec,
        recipe: Recipe,
        components: Mapping[str, Component],
        catalog,
        resolved: ResolvedOverrides | None = None,
    ):
        self.cluster = cluster
        self.resolved = (
            resolved
            if resolved is not None
            else (
                resolved_overrides(cluster, catalog) if catalog is not None else ResolvedOverrides()
            )
        )
        self.recipe = recipe
        self.components = components
        self.catalog = catalog
        self.findings: list[Finding] = []
        self.refs = {ref.name: ref for ref in recipe.component_refs}
        self.bad_toggles: set[tuple[str, str]] = set()

    def add(self, id: str, severity: str, component: str, key: str, message: str, fix: str) -> None:
        self.findings.append(Finding(id, severity, self.cluster.name, component, key, message, fix))  # type: ignore[arg-type]

    def values(self, component: str) -> Mapping[str, Any] | None:
        comp = self.components.get(component)
        return comp.values if comp is not None else None

    def toggle(self, component: str, path: str) -> bool | None:
        """Effective boolean (chart default when absent); None when not verifiable (reported)."""
        values = self.values(component)
        if values is None:
            return None
        value, problem = lookup(values, path)
        if problem is not None:
            self._bad(component, path, problem)
            return None
        if value is _ABSENT:
            return CHART_DEFAULTS.get(component, {}).get(path)
        if not isinstance(value, bool):
            self._bad(
                component,
                path,
                f"'{path}' is {_show(value)}, not a boolean: Helm templates treat any non-empty string as true, "
                "so the chart could do the opposite of what the value says",
            )
            return None
        return value

    def _bad(self, component: str, path: str, message: str) -> None:
        if (component, path) in self.bad_toggles:
            return
        self.bad_toggles.add((component, path))
        self.add(
            "GPU-TOGGLE-TYPE",
            "error",
            component,
            path,
            message,
            f"write a YAML boolean without quotes (e.g. overrides.set: ['{component}:{path}=false']) and do not null its parent sections",
        )


# --------------------------------------------------------------------------- core checks


def check_toggle_types(c: _Checks) -> None:
    """GPU-TOGGLE-TYPE: every toggle the GPU policies read is a boolean (or absent)."""
    for component, defaults in CHART_DEFAULTS.items():
        for path in defaults:
            c.toggle(component, path)


def check_advertiser(c: _Checks) -> None:
    """GPU-ADVERTISER: exactly one whole-GPU advertiser per node.

    Device-plugin policy: gpu-operator ``devicePlugin.enabled=true`` and the DRA driver's
    ``resources.gpus.enabled=false`` + ``gpuResourcesEnabledOverride=false``. DRA-only policy:
    all three flipped together. A disabled gpu-operator advertises nothing through the device
    plugin; a disabled DRA driver advertises nothing through DRA.

    External policy: when the selected profile value declares ``advertiser: external``
    (``Recipe.advertiser``, e.g. OKE ``gpuStack=oci-managed``: the NvidiaGpuPlugin add-on), the
    platform advertises whole GPUs and the recipe's device plugin and DRA GPU advertisement must
    both be off.
    """
    if GPU_OPERATOR not in c.refs and DRA_DRIVER not in c.refs:
        return
    dp = c.toggle(GPU_OPERATOR, "devicePlugin.enabled") if GPU_OPERATOR in c.components else False
    if DRA_DRIVER in c.components:
        gpus = c.toggle(DRA_DRIVER, "resources.gpus.enabled")
        waiver = c.toggle(DRA_DRIVER, "gpuResourcesEnabledOverride")
    else:
        gpus = waiver = False
    if dp is None or gpus is None or waiver is None:
        return  # reported as GPU-TOGGLE-TYPE
    dra_only_fix = (
        "pick one policy and set all three keys together in a recipe overlay: device plugin (default) = "
        "gpuoperator:devicePlugin.enabled=true, dradriver:resources.gpus.enabled=false, "
        "dradriver:gpuResourcesEnabledOverride=false; DRA-only = the three values flipped"
    )
    if gpus != waiver:
        if gpus:
            msg = (
                "partial flip: the DRA driver's resources.gpus.enabled=true without gpuResourcesEnabledOverride=true "
                "(the chart refuses to advertise GPUs through DRA without the waiver)"
            )
            key = "gpuResourcesEnabledOverride"
        else:
            msg = (
                "partial flip: gpuResourcesEnabledOverride=true while resources.gpus.enabled=false is an inert waiver; "
                "the allocation policy is ambiguous"
            )
            key = "resources.gpus.enabled"
        c.add("GPU-ADVERTISER", "error", DRA_DRIVER, key, msg, dra_only_fix)
        return
    external = getattr(c.recipe, "advertiser", None) == "external"
    if external:
        profile = "=".join(c.recipe.profile) if c.recipe.profile else "the selected profile"
        for on, component, key, what in (
            (dp, GPU_OPERATOR, "devicePlugin.enabled", "gpu-operator devicePlugin.enabled=true"),
            (
                gpus,
                DRA_DRIVER,
                "resources.gpus.enabled",
                "the DRA driver's resources.gpus.enabled=true",
            ),
        ):
            if on:
                c.add(
                    "GPU-ADVERTISER",
                    "error",
                    component,
                    key,
                    f"dual advertisement: {profile} declares that a platform add-on outside the recipe advertises whole "
                    f"GPUs, and {what} advertises them too; the two ledgers can double-allocate the same physical GPU",
                    f"keep {key}=false under {profile}, or select the profile value in which the recipe owns the "
                    "advertiser (and remove the platform add-on)",
                )
        return
    if dp and gpus:
        c.add(
            "GPU-ADVERTISER",
            "error",
            DRA_DRIVER,
            "resources.gpus.enabled",
            "dual advertisement: the device plugin (gpu-operator devicePlugin.enabled=true) and the DRA driver "
            "(resources.gpus.enabled=true) both advertise whole GPUs; their independent ledgers can double-allocate "
            "the same physical GPU",
            dra_only_fix,
        )
    elif not dp and not gpus:
        why = []
        if GPU_OPERATOR not in c.components:
            why.append("gpu-operator is disabled")
        else:
            why.append("gpu-operator devicePlugin.enabled=false")
        if DRA_DRIVER not in c.components:
            why.append(f"{DRA_DRIVER} is disabled")
        else:
            why.append("the DRA driver's resources.gpus.enabled=false")
        c.add(
            "GPU-ADVERTISER",
            "error",
            GPU_OPERATOR if GPU_OPERATOR in c.refs else DRA_DRIVER,
            "devicePlugin.enabled",
            f"no whole-GPU advertiser: {' and '.join(why)}, so GPU nodes advertise no GPUs to the scheduler",
            dra_only_fix,
        )


def check_driver_roots(c: _Checks) -> None:
    """GPU-DRIVER-ROOT and GPU-DRIVER-STALE-RECIPE: driver roots and ownership lockstep.

    * gpu-operator ``hostPaths.driverInstallDir`` must be a non-empty absolute path other than
      ``/`` (runc refuses a bind-mount over the container root; NVIDIA/aicr#1106);
    * the DRA driver's ``nvidiaDriverRoot`` must be a non-empty absolute path string;
    * with ``driver.enabled=true`` (operator-managed) it must equal ``driverInstallDir``, or CDI
      spec generation fails and DRA-allocated pods stall in ContainerCreating;
    * with ``driver.enabled=false`` it must not be ``/run/nvidia/driver``: nothing populates that
      path, the signature of a recipe generated before the preinstalled-driver default flip.
    """
    install_dir, driver_enabled = (
        _operator_driver_root(c) if GPU_OPERATOR in c.components else (None, None)
    )
    if DRA_DRIVER not in c.components:
        return
    valid, root = _dra_driver_root(c)
    if not valid or driver_enabled is None or install_dir is None:
        return  # an invalid DRA root (reported), the operator disabled, or its values already reported
    _check_roots_lockstep(c, driver_enabled, install_dir, root)


def _operator_driver_root(c: _Checks) -> tuple[str | None, bool | None]:
    """``(driverInstallDir, driver.enabled)`` of gpu-operator; ``driverInstallDir`` None when it
    is not a usable absolute directory (reported as GPU-DRIVER-ROOT here)."""
    install_dir: str | None = None
    values = c.values(GPU_OPERATOR) or {}
    raw, problem = lookup(values, "hostPaths.driverInstallDir")
    fix_dir = f"set gpuoperator:hostPaths.driverInstallDir={OPERATOR_CONTAINER_DRIVER_ROOT} (the chart default) or another absolute directory"
    if problem is not None:
        c.add(
            "GPU-DRIVER-ROOT", "error", GPU_OPERATOR, "hostPaths.driverInstallDir", problem, fix_dir
        )
    elif raw is _ABSENT:
        install_dir = OPERATOR_CONTAINER_DRIVER_ROOT
    else:
        why = _install_dir_problem(raw)
        if why is not None:
            c.add(
                "GPU-DRIVER-ROOT", "error", GPU_OPERATOR, "hostPaths.driverInstallDir", why, fix_dir
            )
        else:
            install_dir = _clean_root(raw)
    return install_dir, c.toggle(GPU_OPERATOR, "driver.enabled")


def _install_dir_problem(raw: Any) -> str | None:
    """Why a set ``hostPaths.driverInstallDir`` cannot be the operator's driver root, or None."""
    if not isinstance(raw, str) or not raw:
        return f"hostPaths.driverInstallDir is {_show(raw) if raw != '' else 'empty'}; the ClusterPolicy needs an absolute directory"
    if not raw.startswith("/"):
        return f"hostPaths.driverInstallDir '{raw}' is a relative path; host-path mounts need absolute paths"
    if ".." in raw.split("/"):
        return (
            f"hostPaths.driverInstallDir '{raw}' contains a '..' segment; Kubernetes refuses hostPath volumes whose "
            "path contains '..', so the operator's driver and validator pods are never created"
        )
    if _clean_root(raw) == "/":
        return (
            "hostPaths.driverInstallDir is '/': the operator-validator bind-mounts it as a container's root and "
            "runc refuses a mount destination of '/', so nvidia-operator-validator crash-loops"
        )
    return None


def _dra_driver_root(c: _Checks) -> tuple[bool, str | None]:
    """``(valid, nvidiaDriverRoot)`` of the DRA driver (root None when not set); an invalid root
    is reported as GPU-DRIVER-ROOT here."""
    values = c.values(DRA_DRIVER) or {}
    raw = values.get("nvidiaDriverRoot", _ABSENT)
    if raw is _ABSENT:
        return True, None
    if isinstance(raw, str) and raw != "" and raw.startswith("/") and ".." not in raw.split("/"):
        return True, _clean_root(raw)
    if raw == "":
        what = "empty"
    elif not isinstance(raw, str):
        what = _show(raw)
    elif raw.startswith("/"):
        what = f"'{raw}', with a '..' segment (Kubernetes refuses hostPath volumes whose path contains '..')"
    else:
        what = f"the relative path '{raw}'"
    fix_root = (
        f"set dradriver:nvidiaDriverRoot to the driver owner's root: '/' for a host/platform-installed driver, "
        f"the gpu-operator hostPaths.driverInstallDir ({OPERATOR_CONTAINER_DRIVER_ROOT}) when the operator installs it"
    )
    c.add(
        "GPU-DRIVER-ROOT",
        "error",
        DRA_DRIVER,
        "nvidiaDriverRoot",
        f"nvidiaDriverRoot is {what}; the DRA kubelet plugin mounts it from the host and needs an absolute path "
        "without '..'",
        fix_root,
    )
    return False, None


def _check_roots_lockstep(
    c: _Checks, driver_enabled: bool, install_dir: str, root: str | None
) -> None:
    """The DRA driver's root follows the driver owner: the operator's ``driverInstallDir`` when
    it installs the driver, never the operator's root when it does not."""
    if driver_enabled:
        effective = root if root is not None else DRA_CHART_DEFAULT_ROOT
        if effective != install_dir:
            declared = (
                f"nvidiaDriverRoot={effective}"
                if root is not None
                else f"nvidiaDriverRoot is not set (chart default {DRA_CHART_DEFAULT_ROOT})"
            )
            c.add(
                "GPU-DRIVER-ROOT",
                "error",
                DRA_DRIVER,
                "nvidiaDriverRoot",
                f"the GPU Operator installs the driver (driver.enabled=true) to hostPaths.driverInstallDir={install_dir}, but "
                f"{declared}: CDI spec generation fails and DRA-allocated pods stall in ContainerCreating",
                f"set dradriver:nvidiaDriverRoot={install_dir} (both roots move in lockstep)",
            )
    elif root == OPERATOR_CONTAINER_DRIVER_ROOT:
        c.add(
            "GPU-DRIVER-STALE-RECIPE",
            "error",
            DRA_DRIVER,
            "nvidiaDriverRoot",
            f"driver.enabled=false (the platform's preinstalled driver) but the DRA driver still reads "
            f"nvidiaDriverRoot={OPERATOR_CONTAINER_DRIVER_ROOT}, which nothing populates when the operator does not "
            "install the driver; this is the signature of a stale recipe generated before the preinstalled-driver "
            "default flip",
            "regenerate the recipe (or drop the stale RecipeResult override) so nvidiaDriverRoot is '/', or switch to the "
            "operator-managed profile as a whole (driver.enabled=true, toolkit.enabled=true, operator.runtimeClass=nvidia, "
            f"nvidiaDriverRoot={OPERATOR_CONTAINER_DRIVER_ROOT})",
        )


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _owning_values(
    c: _Checks, component: str, path: str, actual: Any
) -> tuple[list[str], dict[str, Any]]:
    """Profile values (other than the chosen one) that set ``component``'s ``path`` to ``actual``,
    and what each value sets there (``{value: setting}``; empty when the catalog does not know
    the recipe's profile declaration)."""
    if c.catalog is None:
        return [], {}
    from gpucluster.recipes.recipe import profile_values_owned

    chosen = c.recipe.profile[1] if c.recipe.profile else None
    settings: dict[str, Any] = {}
    for value, owned in profile_values_owned(c.recipe, c.catalog).items():
        if value == chosen:
            continue
        setting, _ = lookup(owned.get(component) or {}, path)
        if setting is not _ABSENT:
            settings[value] = setting
    return [v for v, s in settings.items() if _same(s, actual)], settings


def _profile_fix(c: _Checks, component: str, path: str, actual: Any) -> str:
    """PROFILE-OWNED fix: the profile value that owns what the override asked for, if any."""
    pname, pvalue = c.recipe.profile  # type: ignore[misc]
    generic = (
        f"do not override profile-owned keys; choose the other {pname} profile value in the cluster file "
        f"(profile: {{{pname}: <value>}}) so every key it owns changes together"
    )
    if actual is _ABSENT:
        return generic
    matches, settings = _owning_values(c, component, path, actual)
    if matches:
        return (
            f"remove the override and choose profile: {{{pname}: {matches[0]}}} in the cluster file: that {pname} value "
            f"sets {path} to {_yaml(actual)} and changes every key it owns together"
        )
    if settings:
        others = "; ".join(f"'{v}' sets {_yaml(s)}" for v, s in settings.items())
        return (
            f"remove the override: no {pname} profile value sets {path} to {_yaml(actual)} (the chosen '{pvalue}' sets "
            f"{_yaml(lookup(c.recipe.profile_owned.get(component) or {}, path)[0])}; {others})"
        )
    return generic


def check_profile_owned(c: _Checks) -> None:
    """PROFILE-OWNED: keys the chosen profile sets keep the profile's value; owned components stay enabled.

    The fix names the profile value that sets what the override asked for (``driver.enabled=true``
    under AKS ``azure-managed`` -> ``profile: {gpuStack: operator-managed}``), or says that no value
    does (:func:`gpucluster.recipes.recipe.profile_values_owned`).
    """
    if c.recipe.profile is None:
        return
    pname, pvalue = c.recipe.profile
    for component in sorted(c.recipe.profile_owned):
        owned = c.recipe.profile_owned[component] or {}
        ref = c.refs.get(component)
        if ref is None or not ref.enabled:
            continue
        fix = (
            f"do not override profile-owned keys; choose the other {pname} profile value in the cluster file "
            f"(profile: {{{pname}: <value>}}) so every key it owns changes together"
        )
        if component not in c.components:
            from gpucluster.recipes.recipe import owned_component_fix

            c.add(
                "PROFILE-OWNED",
                "error",
                component,
                "enabled",
                f"'{component}' is owned by the {pname} profile '{pvalue}' and cannot be disabled",
                owned_component_fix(c.recipe, c.catalog, component, "remove the override"),
            )
            continue
        values = c.components[component].values
        for path, expected in leaf_paths(owned):
            actual, _ = lookup(values, path)
            if actual is _ABSENT:
                c.add(
                    "PROFILE-OWNED",
                    "error",
                    component,
                    path,
                    f"'{path}' is owned by the {pname} profile '{pvalue}' (value {_yaml(expected)}) but was removed",
                    fix,
                )
            elif not _same(actual, expected):
                c.add(
                    "PROFILE-OWNED",
                    "error",
                    component,
                    path,
                    f"'{path}' is owned by the {pname} profile '{pvalue}', which sets {_yaml(expected)}, but the effective "
                    f"value is {_yaml(actual)}",
                    _profile_fix(c, component, path, actual),
                )


PROFILE_DERIVED: dict[str, frozenset[tuple[str, str]]] = {
    "GPU-DRIVER-ROOT": frozenset(
        {(GPU_OPERATOR, "driver.enabled"), (DRA_DRIVER, "nvidiaDriverRoot")}
    ),
    "GPU-DRIVER-STALE-RECIPE": frozenset(
        {(GPU_OPERATOR, "driver.enabled"), (DRA_DRIVER, "nvidiaDriverRoot")}
    ),
    "NVSENTINEL-RUNTIMECLASS": frozenset(
        {
            (GPU_OPERATOR, "operator.runtimeClass"),
            ("nvsentinel", "metadata-collector.runtimeClassName"),
        }
    ),
}
"""Core findings that follow from a profile-owned key: finding id -> the ``(component, key)`` pairs
it relates. A finding of that id on one of those keys is not reported when PROFILE-OWNED already
reports one of them (e.g. ``driver.enabled=true`` under AKS ``azure-managed`` also breaks the
DRA root lockstep; the fix is the profile PROFILE-OWNED names, not ``nvidiaDriverRoot``). The
configuration stays refused by PROFILE-OWNED."""


def drop_profile_derived(findings: list[Finding]) -> list[Finding]:
    """``findings`` without the :data:`PROFILE_DERIVED` findings PROFILE-OWNED errors already explain."""
    owned = {
        (f.cluster, f.component, f.key)
        for f in findings
        if f.id == "PROFILE-OWNED" and f.severity == "error"
    }
    if not owned:
        return findings
    out = []
    for f in findings:
        related = PROFILE_DERIVED.get(f.id)
        if (
            related
            and (f.component, f.key) in related
            and any((f.cluster, *k) in owned for k in related)
        ):
            continue
        out.append(f)
    return out


def check_gpu_taints(c: _Checks) -> None:
    """SCHED-GPU-TAINT: user-given accelerated tolerations must tolerate every GPU pool taint."""
    tolerations = c.cluster.scheduling.accelerated_tolerations
    if not tolerations:
        return  # derived from the pools, matching by construction
    for pool in c.cluster.pools:
        if not pool.gpu:
            continue
        for taint in pool.taints:
            if not any(tolerates(t, taint.key, taint.value, taint.effect) for t in tolerations):
                c.add(
                    "SCHED-GPU-TAINT",
                    "error",
                    "-",
                    "scheduling.accelerated.tolerations",
                    f"GPU pool '{pool.name}' is tainted {taint} but no accelerated toleration tolerates it, so GPU "
                    "operands (device plugin, DRA kubelet plugin, nodewright packages) never schedule on GPU nodes",
                    f"add '{taint.key}:{taint.effect}' to scheduling.accelerated.tolerations (or remove the list to "
                    "derive it from the GPU pool taints)",
                )


NVSENTINEL = "nvsentinel"
DEFAULT_RUNTIME_CLASS = "nvidia"
"""Chart default of gpu-operator ``operator.runtimeClass`` and of nvsentinel
``metadata-collector.runtimeClassName``."""


def check_nvsentinel_runtime_class(c: _Checks) -> None:
    """NVSENTINEL-RUNTIMECLASS: metadata-collector requests the RuntimeClass the GPU Operator creates.

    The GPU Operator names its RuntimeClass after ``operator.runtimeClass``; nvsentinel's
    metadata-collector requests ``metadata-collector.runtimeClassName``. When they differ the API
    server rejects every metadata-collector pod at admission (AICR
    CheckNVSentinelRuntimeClassCoherence; an unset side is the shared chart default ``nvidia``).
    """
    if GPU_OPERATOR not in c.components or NVSENTINEL not in c.components:
        return
    operator_rc, p1 = lookup(c.components[GPU_OPERATOR].values, "operator.runtimeClass")
    collector_rc, p2 = lookup(
        c.components[NVSENTINEL].values, "metadata-collector.runtimeClassName"
    )
    if p1 or p2:
        return
    operator_rc = DEFAULT_RUNTIME_CLASS if operator_rc is _ABSENT else operator_rc
    collector_rc = DEFAULT_RUNTIME_CLASS if collector_rc is _ABSENT else collector_rc
    if operator_rc != collector_rc:
        c.add(
            "NVSENTINEL-RUNTIMECLASS",
            "error",
            NVSENTINEL,
            "metadata-collector.runtimeClassName",
            f"nvsentinel's metadata-collector requests RuntimeClass {_yaml(collector_rc)} but the GPU Operator creates "
            f"{_yaml(operator_rc)} (operator.runtimeClass): the API server rejects every metadata-collector pod at admission",
            f"set nvsentinel:metadata-collector.runtimeClassName={operator_rc} (profiles such as AKS gpuStack set both together)",
        )


def check_policy_key_overrides(c: _Checks) -> None:
    """POLICY-KEY-OVERRIDE (warning): allocation-policy keys changed by direct overrides."""

    if c.catalog is None:
        return
    for name, o in c.resolved:
        keys = ALLOCATION_POLICY_KEYS.get(name, ())
        if not keys:
            continue
        where = f"{o.key}" if o.key else "an override"
        if o.kind == "set" and o.path == ENABLED_KEY:
            if o.value is False:
                c.add(
                    "POLICY-KEY-OVERRIDE",
                    "warning",
                    name,
                    ENABLED_KEY,
                    f"{where} disables '{name}', which changes the whole-GPU allocation policy like its "
                    f"{', '.join(keys)} key(s); bundle-time changes of the allocation policy are deprecated and "
                    "surface as recipe/cluster drift when validated",
                    "configure the allocation policy in a recipe overlay (componentRefs overrides) or a RecipeResult file",
                )
            continue
        if o.kind == "variable":
            continue  # refused by apply_overrides
        touched = sorted({k for p in override_paths(o) for k in keys if paths_intersect(p, k)})
        for k in touched:
            c.add(
                "POLICY-KEY-OVERRIDE",
                "warning",
                name,
                k,
                f"{where} overrides the allocation-policy key '{k}' directly; this still works but is deprecated: the "
                "allocation policy is resolved from the recipe and verified against the cluster, so a bundle-time "
                "change surfaces as recipe/cluster drift",
                "configure the allocation policy in a recipe overlay (componentRefs overrides) or a RecipeResult file",
            )


def check_pruned_edges(c: _Checks) -> None:
    """DEPENDENCY-PRUNED (info): recipe edges dropped because the dependency is disabled."""

    for name, dep in pruned_edges(c.recipe, c.components):
        c.add(
            "DEPENDENCY-PRUNED",
            "info",
            name,
            "dependencyRefs",
            f"'{name}' no longer waits for '{dep}', which is disabled",
            f"none needed if '{dep}' is meant to be absent; enable it again to restore the ordering",
        )


SERVICE_USERS: tuple[tuple[str, str, str, str], ...] = (
    ("prometheus-adapter", "prometheus.url", "kube-prometheus-prometheus", "kube-prometheus-stack"),
    (
        "dynamo-platform",
        "dynamo-operator.dynamo.metrics.prometheusEndpoint",
        "kube-prometheus-prometheus",
        "kube-prometheus-stack",
    ),
)
"""``(component, values path, Service, provider)``: a component whose values name, by URL, a
Service that only ``provider`` creates (kube-prometheus-stack with the catalog's
``fullnameOverride: kube-prometheus`` makes the Prometheus Service ``kube-prometheus-prometheus``;
prometheus-adapter's ``prometheus.url`` and dynamo-platform's metrics endpoint read it)."""


def check_service_providers(c: _Checks) -> None:
    """SERVICE-UNSERVED (error): a component's URL names a Service (:data:`SERVICE_USERS`) whose
    provider is not installed (``kube-prometheus-stack:enabled=false``, or a RecipeResult
    without it): nothing would answer there (prometheus-adapter's custom-metrics API stays
    empty, so GPU autoscaling gets no metrics). A URL the user pointed elsewhere is accepted."""
    from urllib.parse import urlsplit

    for component, path, service, provider in SERVICE_USERS:
        comp = c.components.get(component)
        if comp is None or provider in c.components:
            continue
        url, _ = lookup(comp.values, path)
        if not isinstance(url, str):
            continue
        try:
            host = (urlsplit(url).hostname or "").split(".")[0]
        except ValueError:
            continue
        if host != service:
            continue
        c.add(
            "SERVICE-UNSERVED",
            "error",
            component,
            path,
            f"{path} is {url}, the Service {service} that {provider} creates, but {provider} is "
            f"not installed: nothing answers there ({component} gets no data)",
            f"point {component}:{path} at the Prometheus you run (overrides set: "
            f"{component}:{path}=http://...), or keep {provider}, or disable {component} too",
        )


def check_name_overrides(c: _Checks) -> None:
    """HELM-NAME-OVERRIDE (error): a component's ``nameOverride``/``fullnameOverride`` that cannot
    name Kubernetes objects.

    Charts build object names (and ``app.kubernetes.io/name`` labels) from these values, cut to
    63 characters (Helm's ``_helpers.tpl`` convention); they must be DNS-1123 labels. Checked
    here, before readiness gates derive workload names from them, so the error names the user's
    key (the override that set it), not the plugin whose gate would have used it.
    """
    import re as _re

    pattern = _re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    for name in sorted(c.components):
        values = c.values(name) or {}
        for key in ("nameOverride", "fullnameOverride"):
            if key not in values or values[key] in (None, ""):
                continue
            value = values[key]
            if not isinstance(value, str) or not pattern.fullmatch(value[:63].rstrip("-")):
                c.add(
                    "HELM-NAME-OVERRIDE",
                    "error",
                    name,
                    key,
                    f"{key} {value!r} of {name} cannot name Kubernetes objects: the chart builds object names and "
                    "labels from it",
                    f"use lowercase letters, digits and '-', starting and ending with a letter or digit (e.g. {name}), "
                    f"or remove the {key} override",
                )


def check_existing_remote_run(c: _Checks) -> None:
    """EXISTING-REMOTE-KUBECONFIG (warning): ``existing`` with ``backend: cloud``.

    The runtime stack reaches an existing cluster through the kubeconfig file named by its
    ``kubeconfig_path`` variable. In an HCP Terraform / Terraform Cloud workspace with the default
    remote execution mode, ``terraform plan`` runs on HCP Terraform's workers, which cannot read
    a file on your machine (HCP Terraform docs, "Remote operations").
    """
    backend = c.cluster.backend
    if c.cluster.existing is None or not backend or backend.get("type") != "cloud":
        return
    c.add(
        "EXISTING-REMOTE-KUBECONFIG",
        "warning",
        "-",
        "existing.kubeconfig",
        f"the runtime stack reads the kubeconfig {c.cluster.existing.kubeconfig_path or '~/.kube/config'} of the machine "
        "that runs terraform; a remote run in HCP Terraform cannot read a local file",
        "set the workspace's execution mode to local (or run an agent that has the file), or set the kubeconfig_path "
        "variable in the workspace to a file that exists there",
    )


def check_gate_image_digest(c: _Checks) -> None:
    """GATE-IMAGE-DIGEST (warning): ``settings.gateImage`` pinned by tag only.

    A tag can be pushed again; only a digest names one image (OCI distribution spec). The gate
    Jobs run with the cluster's API credentials, so their image is part of the supply chain.
    Moving tags such as ``:latest`` are refused outright (:func:`gpucluster.charts.jobchart.gate_image`).
    """
    from gpucluster.model import GATE_IMAGE_SETTING

    image = (c.cluster.settings or {}).get(GATE_IMAGE_SETTING)
    if isinstance(image, str) and "@sha256:" not in image:
        c.add(
            "GATE-IMAGE-DIGEST",
            "warning",
            "-",
            f"settings.{GATE_IMAGE_SETTING}",
            f"the gate Jobs' image {image} is pinned by tag only; a re-pushed tag changes what runs with the gates' "
            "API credentials",
            f"append the digest: {image}@sha256:<digest> (`crane digest {image}` prints it)",
        )


def check_literal_credentials(c: _Checks) -> None:
    """VALUES-CREDENTIAL (warning): a values key that names a credential holds a literal string
    (:func:`gpucluster.values.credential_paths`: ``adminPassword: hunter2``).

    Terraform keeps every ``helm_release`` argument in its plan and state, and the value is written
    into ``cdk.tf.json``; gpucluster then writes the output folder 0700 and its files 0600
    (docs/cluster-file.md, "Secrets"). A Terraform variable (``overrides.variables``) keeps the
    value out of the files; Terraform still stores it in the state.
    """
    from gpucluster.values import credential_paths

    for name in sorted(c.components):
        for path in credential_paths(c.components[name].values):
            dotted = ".".join(p.replace(".", "\\.") for p in path)
            c.add(
                "VALUES-CREDENTIAL",
                "warning",
                name,
                dotted,
                f"values path '{dotted}' holds a literal credential: it is written into cdk.tf.json and the Terraform "
                "state (gpucluster writes the output folder 0700, its files 0600)",
                f'bind it to a Terraform variable instead (overrides.variables: {{"{name}:{dotted}": <variable>}}), '
                "or let the chart read an existing Secret",
            )


CORE_CHECKS: tuple[Callable[[_Checks], None], ...] = (
    check_toggle_types,
    check_advertiser,
    check_driver_roots,
    check_profile_owned,
    check_gpu_taints,
    check_nvsentinel_runtime_class,
    check_policy_key_overrides,
    check_pruned_edges,
    check_service_providers,
    check_existing_remote_run,
    check_gate_image_digest,
    check_name_overrides,
    check_literal_credentials,
)


_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def evaluate(
    cluster: ClusterSpec,
    recipe: Recipe,
    components: Mapping[str, Component],
    catalog,
    *,
    resolved: ResolvedOverrides | None = None,
) -> list[Finding]:
    """Run the core checks and every ``gpucluster_policy_checks`` hook on the final values.

    Args:
        cluster, recipe: the resolved inputs.
        components: enabled components by name with final effective values.
        catalog: the loaded catalog (registry ``policyKeys``, aliases).

    Returns:
        list[Finding], deterministic: errors, then warnings, then info; then id, component, key.
        A key naming a place in the cluster document (``kubernetesVersion``, ``settings.numVfs``)
        is made absolute (:func:`gpucluster.model.absolute_key`); values paths stay as they are.

    Raises:
        PluginError: a plugin hook returned something that is not a list of Finding.
    """
    checks = _Checks(cluster, recipe, components, catalog, resolved)
    for check in CORE_CHECKS:
        check(checks)
    findings = drop_profile_derived(list(checks.findings))
    # what reading/resolving the recipe noticed (RecipeResult renames, VERSION-SKEW, conditional values)
    findings.extend(
        dataclasses.replace(f, cluster=f.cluster or cluster.name) for f in recipe.findings
    )
    findings.extend(
        finding
        for _, finding in call_list_hook(
            "gpucluster_policy_checks",
            Finding,
            what="gpucluster.sdk.Finding",
            cluster=cluster,
            recipe=recipe,
            components=components,
        )
    )
    findings = absolute_keys(cluster, findings)  # plugins' and core checks' cluster-document keys
    unique = {
        (f.id, f.severity, f.cluster, f.component, f.key, f.message, f.fix): f for f in findings
    }
    return sorted(
        unique.values(),
        key=lambda f: (_SEVERITY_ORDER.get(f.severity, 3), f.id, f.component, f.key, f.message),
    )

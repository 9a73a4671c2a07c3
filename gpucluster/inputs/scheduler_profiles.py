"""AKS Configurable Scheduler Profiles: the cluster file's ``schedulerProfiles``, checked, and the
``SchedulerConfiguration`` the runtime stack installs from it.

Cluster file (docs/scheduler-profiles.md)::

    schedulerProfiles:
      - schedulerName: gpu-binpacking-scheduler
        preset: gpu-binpacking            # or cpu-binpacking
        trainingRuntime: true             # the Kubeflow torch-distributed runtime uses it
      - schedulerName: my-scheduler       # or the upstream profile's own plugins / pluginConfig
        plugins:
          multiPoint:
            disabled: [{name: PodTopologySpread}]
        pluginConfig:
          - name: NodeResourcesFit
            args:
              scoringStrategy:
                type: MostAllocated
                resources: [{name: nvidia.com/gpu, weight: 8}, {name: cpu, weight: 1}]

AKS (Kubernetes 1.33 and later, with the cluster's upstream scheduler in the ``ManagedByCRD``
configuration mode) reads one cluster-scoped custom resource ``SchedulerConfiguration``
(``aks.azure.com/v1alpha1``, name ``upstream``) whose ``spec.rawConfig`` is a
``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``); its controller overlays it on
the base scheduler configuration, and a pod picks a profile by ``spec.schedulerName``. Sources:
:data:`SOURCE_POST` (the two presets, their plugin args exactly), :data:`SOURCE_DOCS`.

The checks follow kube-scheduler v1.34's own (``pkg/scheduler/apis/config/validation``, the
framework's plugin construction), a little stricter where the scheduler would silently default or
ignore: plugin names are the in-tree plugins (:data:`PLUGINS`); only the ``multiPoint`` and ``score``
extension points are written; ``PrioritySort`` / ``DefaultBinder`` cannot be disabled (a profile
needs one queue-sort and one bind plugin) and ``*`` only under ``score``; scoring strategies
``LeastAllocated`` / ``MostAllocated`` / ``RequestedToCapacityRatio``; resource weights 1..100;
shape points utilization 0..100 strictly increasing, score 0..10; ``NodeResourcesBalancedAllocation``
weights exactly 1. tests/test_scheduler_profiles_real.py gives the real kube-scheduler what this
module renders (docs/scheduler-profiles.md, "Tested against the real scheduler").

Pure Python, no cdktf.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from gpucluster.errors import GpuclusterError, did_you_mean
from gpucluster.fields import Fields, Where
from gpucluster.model import ClusterSpec, PlanNode, SchedulerProfile, absolute_key

KEY = "schedulerProfiles"
DOCS = "docs/scheduler-profiles.md"
SOURCE_POST = "https://blog.aks.azure.com/2026/04/06/aks-config-scheduler-profiles-preview"
"""Microsoft's AKS engineering blog post "AKS Configurable Scheduler Profiles (preview)": the GPU
and CPU bin-packing profiles (:data:`PRESETS`) and the overlay on the base configuration."""
SOURCE_DOCS = "https://learn.microsoft.com/azure/aks/configure-aks-scheduler"
"""Microsoft Learn "Configure advanced scheduler profiles on AKS (preview)": Kubernetes 1.33 or
later, the ``--enable-upstream-kubescheduler-user-configuration`` cluster setting, no profile
``aks-system``."""

CR_API_VERSION = "aks.azure.com/v1alpha1"
CR_KIND = "SchedulerConfiguration"
CR_NAME = "upstream"
CONFIG_API_VERSION = "kubescheduler.config.k8s.io/v1"
CONFIG_KIND = "KubeSchedulerConfiguration"
NODE_ID = "scheduler-profiles"
"""The release (PlanNode id and component) that installs the ``SchedulerConfiguration``."""
NODE_NAMESPACE = "kube-system"
"""Its Helm release namespace (the object itself is cluster-scoped)."""

SERVICE = "aks"
MIN_KUBERNETES = (1, 33)
DEFAULT_SCHEDULER = "default-scheduler"
RESERVED_NAMES = {
    DEFAULT_SCHEDULER: "the name of the base profile AKS overlays onto",
    "aks-system": "the AKS-managed scheduler profile of AKS add-ons (refused by AKS)",
    "kai-scheduler": "the name pods use for the KAI scheduler (a separate scheduler with its own packing)",
}

PLUGINS = (
    "DefaultBinder",
    "DefaultPreemption",
    "DynamicResources",
    "ImageLocality",
    "InterPodAffinity",
    "NodeAffinity",
    "NodeName",
    "NodePorts",
    "NodeResourcesBalancedAllocation",
    "NodeResourcesFit",
    "NodeUnschedulable",
    "NodeVolumeLimits",
    "PodTopologySpread",
    "PrioritySort",
    "SchedulingGates",
    "TaintToleration",
    "VolumeBinding",
    "VolumeRestrictions",
    "VolumeZone",
)
"""kube-scheduler v1.34's in-tree plugins (``pkg/scheduler/framework/plugins/names``)."""
SCORE_PLUGINS = (
    "ImageLocality",
    "InterPodAffinity",
    "NodeAffinity",
    "NodeResourcesBalancedAllocation",
    "NodeResourcesFit",
    "PodTopologySpread",
    "TaintToleration",
    "VolumeBinding",
)
"""The in-tree plugins that implement the score extension point (v1.34)."""
REQUIRED_PLUGINS = ("PrioritySort", "DefaultBinder")
"""Cannot be disabled: a profile needs exactly one queue-sort and at least one bind plugin."""
EXTENSION_POINTS = ("multiPoint", "score")
STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
ARGS_PLUGINS = ("NodeResourcesFit", "NodeResourcesBalancedAllocation")
"""Plugins whose ``pluginConfig`` args gpucluster checks (and so accepts)."""
WEIGHT_RANGE = (1, 100)
UTILIZATION_RANGE = (0, 100)
SHAPE_SCORE_RANGE = (0, 10)

PROFILE_KEYS = ("schedulerName", "preset", "plugins", "pluginConfig", "trainingRuntime")
TRAINER = "kubeflow-trainer"
"""The component whose ``torch-distributed`` ClusterTrainingRuntime a ``trainingRuntime: true``
profile is named in (its post-manifests release then installs after ``scheduler-profiles``)."""
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RESOURCE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def _args(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": CONFIG_API_VERSION, "kind": kind, **body}


PRESETS: dict[str, dict[str, Any]] = {
    "gpu-binpacking": {
        "plugins": {
            "multiPoint": {
                "enabled": [
                    {"name": "NodeResourcesFit"},
                    {"name": "NodeResourcesBalancedAllocation"},
                ],
                "disabled": [{"name": "PodTopologySpread"}],
            }
        },
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": _args(
                    "NodeResourcesFitArgs",
                    {
                        "scoringStrategy": {
                            "type": "MostAllocated",
                            "resources": [
                                {"name": "nvidia.com/gpu", "weight": 8},
                                {"name": "cpu", "weight": 1},
                            ],
                        }
                    },
                ),
            },
            {
                "name": "NodeResourcesBalancedAllocation",
                "args": _args(
                    "NodeResourcesBalancedAllocationArgs",
                    {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]},
                ),
            },
        ],
    },
    "cpu-binpacking": {
        "plugins": {
            "multiPoint": {
                "enabled": [{"name": "NodeResourcesFit"}],
                "disabled": [{"name": "PodTopologySpread"}],
            }
        },
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": _args(
                    "NodeResourcesFitArgs",
                    {
                        "scoringStrategy": {
                            "type": "RequestedToCapacityRatio",
                            "resources": [
                                {"name": "cpu", "weight": 8},
                                {"name": "memory", "weight": 1},
                            ],
                            "requestedToCapacityRatio": {
                                "shape": [
                                    {"utilization": 0, "score": 0},
                                    {"utilization": 30, "score": 8},
                                    {"utilization": 50, "score": 10},
                                    {"utilization": 85, "score": 10},
                                    {"utilization": 90, "score": 3},
                                    {"utilization": 100, "score": 0},
                                ]
                            },
                        }
                    },
                ),
            }
        ],
    },
}
"""The two profiles of :data:`SOURCE_POST`, exactly: ``gpu-binpacking`` (``NodeResourcesFit``
``MostAllocated`` on ``nvidia.com/gpu`` weight 8 and cpu 1, ``NodeResourcesBalancedAllocation``
on cpu and memory, ``PodTopologySpread`` disabled) and ``cpu-binpacking``
(``RequestedToCapacityRatio`` on cpu 8 / memory 1 with a curve favouring 50-85 % utilization,
``PodTopologySpread`` disabled). Without ``schedulerName`` (the cluster file gives it)."""


# --------------------------------------------------------------------------- parsing


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def parse_scheduler_profiles(
    raw: Any,
    *,
    file: str,
    cluster: str,
    base: str,
    service: str,
    kubernetes_version: str,
    platform_min: str = "",
) -> tuple[SchedulerProfile, ...]:
    """The cluster file's ``schedulerProfiles`` (module docstring), checked.

    Args:
        raw: the YAML value (None: not written).
        file / cluster: where, for errors.
        base: the key path (``clusters[0].schedulerProfiles``).
        service: the cluster's ``criteria.service`` (only ``aks`` may have profiles).
        kubernetes_version: the cluster's ``MAJOR.MINOR`` (1.33 or later).
        platform_min: the platform's own floor (``Platform.min_kubernetes``, ``"1.34"`` on AKS;
            default none): a version too old for profiles is told to move to the higher of the two,
            so the fix does not lead to the platform's version error.

    Returns:
        the profiles in file order (empty when ``raw`` is None).

    Raises:
        GpuclusterError: one line naming the key: another platform, Kubernetes older than 1.33,
            a reserved or repeated ``schedulerName``, an unknown preset, plugin, extension point or
            scoring strategy, a weight or shape point outside the range the scheduler accepts.
    """
    if raw is None:
        return ()
    where = Where(file=file, cluster=cluster, docs=DOCS)
    if service != SERVICE:
        raise where.error(
            base,
            f"schedulerProfiles is AKS-only: it configures the AKS-managed kube-scheduler through AKS's "
            f"SchedulerConfiguration resource, which a '{service}' cluster does not have",
            allowed="criteria.service: aks",
            fix="remove schedulerProfiles; on other platforms run a second scheduler or use KAI "
            "(docs/scheduler-profiles.md)",
        )
    if _minor(kubernetes_version) < MIN_KUBERNETES:
        floor = ".".join(map(str, MIN_KUBERNETES))
        target = ".".join(map(str, max(MIN_KUBERNETES, _minor(platform_min or floor))))
        raise where.error(
            base,
            f"AKS configurable scheduler profiles need Kubernetes {floor} or later, the cluster has {kubernetes_version}",
            allowed=f'kubernetesVersion "{floor}" or later',
            fix=f'set kubernetesVersion: "{target}" or later'
            + (f" (the platform's own floor is {platform_min})" if target != floor else "")
            + ", or remove schedulerProfiles",
        )
    listed = where.check_list(
        raw,
        base,
        fix="list the profiles: '- {schedulerName: gpu-binpacking-scheduler, preset: gpu-binpacking}'",
    )
    out: list[SchedulerProfile] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(listed):
        profile = _profile(where, item, f"{base}[{i}]")
        if profile.scheduler_name in seen:
            raise where.error(
                f"{base}[{i}].schedulerName",
                f"schedulerName '{profile.scheduler_name}' is used twice ({base}[{seen[profile.scheduler_name]}] and {base}[{i}])",
                fix="give every profile its own schedulerName",
            )
        seen[profile.scheduler_name] = i
        if profile.training_runtime and any(p.training_runtime for p in out):
            first = next(p.scheduler_name for p in out if p.training_runtime)
            raise where.error(
                f"{base}[{i}].trainingRuntime",
                f"trainingRuntime is set on two profiles ({first} and {profile.scheduler_name}); the training runtime "
                "names one scheduler",
                fix="keep trainingRuntime: true on one profile",
            )
        out.append(profile)
    return tuple(out)


def _profile(where: Where, raw: Any, key: str) -> SchedulerProfile:
    f = where.fields(raw, key)
    f.check_keys(PROFILE_KEYS)
    name = f.require_str(
        "schedulerName", missing_fix="set schedulerName, the name pods select the profile with"
    )
    if not _NAME.fullmatch(name) or len(name) > 63:
        raise f.error(
            "schedulerName",
            f"schedulerName {name!r} is not a DNS-1123 label",
            allowed="lowercase letters, digits and '-', alphanumeric ends, at most 63 characters",
            fix="write e.g. schedulerName: gpu-binpacking-scheduler",
        )
    if name in RESERVED_NAMES:
        raise f.error(
            "schedulerName",
            f"schedulerName '{name}' is reserved: {RESERVED_NAMES[name]}",
            allowed="any other DNS-1123 label",
            fix="pick another name, e.g. gpu-binpacking-scheduler",
        )
    preset = f.get_str("preset")
    custom = [k for k in ("plugins", "pluginConfig") if f.get(k) is not None]
    if preset is not None:
        if custom:
            raise f.error(
                custom[0],
                f"a profile takes either 'preset' or '{custom[0]}', not both",
                fix="remove 'preset' to write the profile yourself, or remove plugins/pluginConfig",
            )
        f.get_choice("preset", tuple(PRESETS), what="preset")
        body = copy.deepcopy(PRESETS[preset])
    elif custom:
        body = {}
        plugins = _plugins(f.get_fields("plugins"))
        if plugins:
            body["plugins"] = plugins
        config = _plugin_config(where, f.get("pluginConfig"), f.key_of("pluginConfig"))
        if config:
            body["pluginConfig"] = config
    else:
        raise f.error(
            "preset",
            f"profile '{name}' has neither 'preset' nor 'plugins'/'pluginConfig'",
            allowed=", ".join(PRESETS),
            fix="add preset: gpu-binpacking (or cpu-binpacking), or the upstream profile's plugins/pluginConfig",
        )
    training = f.get_bool(
        "trainingRuntime",
        False,
        fix="write trainingRuntime: true to have the Kubeflow training runtime use this profile",
    )
    return SchedulerProfile(
        scheduler_name=name,
        preset=preset,
        profile={"schedulerName": name, **body},
        training_runtime=training,
    )


def _plugin_name(f: Fields, value: Any, key: str, allowed: Sequence[str], what: str) -> str:
    name = f.where.check_str(value, key)
    if name not in allowed:
        raise f.where.error(
            key,
            f"unknown {what} {name!r}",
            allowed=", ".join(allowed),
            fix=f"{did_you_mean(name, allowed)}use a kube-scheduler in-tree plugin name ({DOCS})",
        )
    return name


def _plugins(f: Fields | None) -> dict[str, Any]:
    if f is None:
        return {}
    f.check_keys(
        EXTENSION_POINTS,
        fix="gpucluster writes the multiPoint and score extension points only; multiPoint enables or disables "
        f"a plugin everywhere it extends ({DOCS})",
    )
    out: dict[str, Any] = {}
    for point in EXTENSION_POINTS:
        pf = f.get_fields(point)
        if pf is None:
            continue
        pf.check_keys(("enabled", "disabled"))
        allowed = PLUGINS if point == "multiPoint" else SCORE_PLUGINS
        what = "plugin" if point == "multiPoint" else "score plugin"
        entry: dict[str, Any] = {}
        enabled_names: dict[str, str] = {}
        for j, item in enumerate(pf.get_list("enabled", [], empty_ok=True)):
            ik = f"{pf.key_of('enabled')}[{j}]"
            it = pf.where.fields(item, ik)
            it.check_keys(("name", "weight"))
            name = _plugin_name(it, it.get("name"), it.key_of("name"), allowed, what)
            if name in enabled_names:
                raise it.error(
                    "name",
                    f"plugin {name} is enabled twice under {pf.key} ({enabled_names[name]} and {ik})",
                    fix="list each plugin once",
                )
            enabled_names[name] = ik
            plugin: dict[str, Any] = {"name": name}
            if it.get("weight") is not None:
                if name not in SCORE_PLUGINS:
                    raise it.error(
                        "weight",
                        f"{name} does not score nodes, so a weight has no effect",
                        allowed="a weight for " + ", ".join(SCORE_PLUGINS),
                        fix="remove weight",
                    )
                lo, hi = WEIGHT_RANGE
                plugin["weight"] = it.get_int("weight", minimum=lo, maximum=hi)
            entry.setdefault("enabled", []).append(plugin)
        for j, item in enumerate(pf.get_list("disabled", [], empty_ok=True)):
            ik = f"{pf.key_of('disabled')}[{j}]"
            it = pf.where.fields(item, ik)
            it.check_keys(("name",))
            star = ("*",) if point == "score" else ()
            name = _plugin_name(it, it.get("name"), it.key_of("name"), (*allowed, *star), what)
            if name in REQUIRED_PLUGINS:
                raise it.error(
                    "name",
                    f"{name} cannot be disabled: every profile needs one queue-sort plugin (PrioritySort) and a bind "
                    "plugin (DefaultBinder)",
                    fix=f"remove {name} from {pf.key_of('disabled')}",
                )
            if name in enabled_names:
                raise it.error(
                    "name",
                    f"plugin {name} is both enabled ({enabled_names[name]}) and disabled under {pf.key}",
                    fix="keep one of the two",
                )
            entry.setdefault("disabled", []).append({"name": name})
        if entry:
            out[point] = entry
    return out


def _api_fields(af: Fields, kind: str) -> None:
    for field_name, expected in (("apiVersion", CONFIG_API_VERSION), ("kind", kind)):
        value = af.get(field_name)
        if value is not None and value != expected:
            raise af.error(
                field_name,
                f"{af.key_of(field_name)} is {value!r}",
                allowed=expected,
                fix=f"write {field_name}: {expected} (or leave it out: gpucluster writes it)",
            )


def _resource_name(af: Fields, value: Any, key: str) -> str:
    name = af.where.check_str(value, key)
    if not _RESOURCE.fullmatch(name) or len(name) > 253:
        raise af.where.error(
            key,
            f"{name!r} is not a Kubernetes resource name",
            allowed="a resource name such as cpu, memory, nvidia.com/gpu",
            fix="write the resource name as nodes advertise it, e.g. nvidia.com/gpu",
        )
    return name


def _resources(af: Fields, name: str, *, balanced: bool) -> list[dict[str, Any]] | None:
    listed = af.get_list(name)
    if listed is None:
        return None
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for j, item in enumerate(listed):
        rk = f"{af.key_of(name)}[{j}]"
        rf = af.where.fields(item, rk)
        rf.check_keys(("name", "weight"))
        rname = _resource_name(rf, rf.get("name"), rf.key_of("name"))
        if rname in seen:
            raise rf.error(
                "name", f"resource {rname} is listed twice", fix="list each resource once"
            )
        seen.add(rname)
        entry: dict[str, Any] = {"name": rname}
        if rf.get("weight") is not None:
            if balanced:
                weight = rf.get_int("weight")
                if weight != 1:
                    raise rf.error(
                        "weight",
                        f"NodeResourcesBalancedAllocation weighs every resource equally: weight must be 1, not {weight}",
                        allowed="1",
                        fix="write weight: 1 or leave it out",
                    )
            else:
                lo, hi = WEIGHT_RANGE
                weight = rf.get_int("weight", minimum=lo, maximum=hi)
            entry["weight"] = weight
        out.append(entry)
    return out


def _shape(af: Fields) -> list[dict[str, Any]]:
    listed = af.require_list(
        "shape",
        missing_fix="give shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]",
    )
    out: list[dict[str, Any]] = []
    for j, item in enumerate(listed):
        pf = af.where.fields(item, f"{af.key_of('shape')}[{j}]")
        pf.check_keys(("utilization", "score"))
        utilization = pf.require_int(
            "utilization", minimum=UTILIZATION_RANGE[0], maximum=UTILIZATION_RANGE[1]
        )
        score = pf.require_int("score", minimum=SHAPE_SCORE_RANGE[0], maximum=SHAPE_SCORE_RANGE[1])
        if out and utilization <= out[-1]["utilization"]:
            raise pf.error(
                "utilization",
                f"shape utilization must increase from point to point: {out[-1]['utilization']} then {utilization}",
                fix="sort the points by utilization, each utilization once",
            )
        out.append({"utilization": utilization, "score": score})
    return out


def _fit_args(af: Fields) -> dict[str, Any]:
    af.check_keys(("apiVersion", "kind", "scoringStrategy"))
    _api_fields(af, "NodeResourcesFitArgs")
    body: dict[str, Any] = {}
    sf = af.get_fields("scoringStrategy")
    if sf is not None:
        sf.check_keys(("type", "resources", "requestedToCapacityRatio"))
        kind = sf.require_str(
            "type", missing_fix="set type: MostAllocated (or " + ", ".join(STRATEGIES) + ")"
        )
        sf.get_choice("type", STRATEGIES, what="scoring strategy")
        strategy: dict[str, Any] = {"type": kind}
        resources = _resources(sf, "resources", balanced=False)
        if resources is not None:
            strategy["resources"] = resources
        rf = sf.get_fields("requestedToCapacityRatio")
        if kind == "RequestedToCapacityRatio":
            if rf is None:
                raise sf.error(
                    "requestedToCapacityRatio",
                    "scoring strategy RequestedToCapacityRatio needs requestedToCapacityRatio.shape",
                    fix="add requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}",
                )
            rf.check_keys(("shape",))
            strategy["requestedToCapacityRatio"] = {"shape": _shape(rf)}
        elif rf is not None:
            raise sf.error(
                "requestedToCapacityRatio",
                f"requestedToCapacityRatio is read by the RequestedToCapacityRatio strategy only, not {kind}",
                fix="remove it, or set type: RequestedToCapacityRatio",
            )
        body["scoringStrategy"] = strategy
    return _args("NodeResourcesFitArgs", body)


def _balanced_args(af: Fields) -> dict[str, Any]:
    af.check_keys(("apiVersion", "kind", "resources"))
    _api_fields(af, "NodeResourcesBalancedAllocationArgs")
    body: dict[str, Any] = {}
    resources = _resources(af, "resources", balanced=True)
    if resources is not None:
        body["resources"] = resources
    return _args("NodeResourcesBalancedAllocationArgs", body)


def _plugin_config(where: Where, raw: Any, key: str) -> list[dict[str, Any]]:
    if raw is None:
        return []
    listed = where.check_list(
        raw, key, fix="list plugin args: '- {name: NodeResourcesFit, args: {...}}'"
    )
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for j, item in enumerate(listed):
        cf = where.fields(item, f"{key}[{j}]")
        cf.check_keys(("name", "args"))
        name = cf.require_str("name")
        if name not in ARGS_PLUGINS:
            raise cf.error(
                "name",
                f"gpucluster checks the args of {', '.join(ARGS_PLUGINS)} only, not {name!r}",
                allowed=", ".join(ARGS_PLUGINS),
                fix=f"{did_you_mean(name, ARGS_PLUGINS)}remove the entry ({DOCS})",
            )
        if name in seen:
            raise cf.error(
                "name", f"{name} has two pluginConfig entries", fix="merge them into one"
            )
        seen.add(name)
        af = cf.require_fields("args")
        args = _fit_args(af) if name == "NodeResourcesFit" else _balanced_args(af)
        out.append({"name": name, "args": args})
    return out


# --------------------------------------------------------------------------- rendering


def scheduler_configuration(profiles: Sequence[SchedulerProfile]) -> dict[str, Any]:
    """The ``KubeSchedulerConfiguration`` (v1) of ``profiles``: ``{apiVersion, kind, profiles}``,
    what ``spec.rawConfig`` holds (AKS overlays it on its base configuration)."""
    return {
        "apiVersion": CONFIG_API_VERSION,
        "kind": CONFIG_KIND,
        "profiles": [copy.deepcopy(p.profile) for p in profiles],
    }


def raw_config(profiles: Sequence[SchedulerProfile]) -> str:
    """:func:`scheduler_configuration` as the YAML text of ``spec.rawConfig`` (keys in order,
    deterministic). Written by the manifest dumper (:func:`gpucluster.charts.manifests.dump_documents`),
    which quotes every string another YAML parser could read as a non-string: kube-scheduler's
    YAML 1.1 reader takes an unquoted ``schedulerName: n`` or ``y`` for a boolean and refuses the
    configuration (found by the real-scheduler test)."""
    from gpucluster.charts.manifests import dump_documents

    return dump_documents([scheduler_configuration(profiles)]).removeprefix("---\n")


def scheduler_configuration_object(profiles: Sequence[SchedulerProfile]) -> dict[str, Any]:
    """The cluster-scoped AKS ``SchedulerConfiguration`` ``upstream`` holding :func:`raw_config`."""
    return {
        "apiVersion": CR_API_VERSION,
        "kind": CR_KIND,
        "metadata": {"name": CR_NAME},
        "spec": {"rawConfig": raw_config(profiles)},
    }


def plan_node(cluster: ClusterSpec, *, taken: set[str] | frozenset[str] = frozenset()) -> PlanNode:
    """The ``scheduler-profiles`` release (kind ``manifests``): a local chart with the
    ``SchedulerConfiguration`` of ``cluster.scheduler_profiles`` (not empty).

    It depends on nothing: AKS itself serves the resource (no release installs its CRD or
    controller), so it installs at the start of an apply, before any workload that names one of
    the profiles' ``schedulerName`` s.

    Raises:
        GpuclusterError: ``taken`` (the plan's other release ids) already has :data:`NODE_ID`.
    """
    if NODE_ID in taken:
        raise GpuclusterError(
            f"two releases are both named '{NODE_ID}'",
            cluster=cluster.name,
            key=KEY,
            fix=f"rename the component '{NODE_ID}': gpucluster installs the scheduler profiles under that name",
        )
    from gpucluster.charts.manifests import dump_documents, make_chart

    chart = make_chart(
        NODE_ID,
        "gpucluster: AKS configurable scheduler profiles (docs/scheduler-profiles.md)",
        [
            (
                "scheduler-configuration",
                dump_documents([scheduler_configuration_object(cluster.scheduler_profiles)]),
            )
        ],
    )
    return PlanNode(
        id=NODE_ID,
        kind="manifests",
        component=NODE_ID,
        namespace=NODE_NAMESPACE,
        local_chart=chart,
        values={"contentHash": chart.content_hash},
    )


def training_scheduler(cluster: ClusterSpec) -> str | None:
    """The ``schedulerName`` of the profile with ``trainingRuntime: true``, or None."""
    return next((p.scheduler_name for p in cluster.scheduler_profiles if p.training_runtime), None)


def order_training_runtime(cluster: ClusterSpec, nodes: Sequence[PlanNode]) -> list[PlanNode]:
    """``nodes`` with the Kubeflow Trainer's post-manifests release (the ClusterTrainingRuntime
    that names the profile) depending on :data:`NODE_ID` when a profile sets ``trainingRuntime``.

    Raises:
        GpuclusterError: ``trainingRuntime`` on a cluster whose recipe installs no Kubeflow
            Trainer runtime (no ``kubeflow-trainer-manifests`` release).
    """
    name = training_scheduler(cluster)
    if name is None:
        return list(nodes)
    target = f"{TRAINER}-manifests"
    if not any(n.id == target for n in nodes):
        index = next(i for i, p in enumerate(cluster.scheduler_profiles) if p.training_runtime)
        raise GpuclusterError(
            f"profile {name} sets trainingRuntime, but the cluster's recipe installs no Kubeflow training runtime",
            file=cluster.source,
            cluster=cluster.name,
            key=absolute_key(cluster, f"{KEY}[{index}].trainingRuntime"),
            fix="choose a Kubeflow recipe (criteria.platform: kubeflow), or remove trainingRuntime",
        )
    import dataclasses

    return [
        dataclasses.replace(n, depends_on=sorted({*n.depends_on, NODE_ID})) if n.id == target else n
        for n in nodes
    ]


# --------------------------------------------------------------------------- upgrade-check


def profile_changes(old: ClusterSpec, new: ClusterSpec) -> list[tuple[str, str, str, str]]:
    """What an edit of ``schedulerProfiles`` does: ``(detail, verdict, why, action)`` per added,
    changed or removed profile, for ``upgrade-check``.

    A profile only decides where pods are placed when they are scheduled: running pods never
    move, so adding or changing one is ``safe``. Removing one is ``manual``: pods created later
    that still name its ``schedulerName`` stay Pending (no scheduler serves that name).
    """
    before = {p.scheduler_name: p for p in old.scheduler_profiles}
    after = {p.scheduler_name: p for p in new.scheduler_profiles}
    out: list[tuple[str, str, str, str]] = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a is not None and b is not None and a.profile == b.profile:
            if a.training_runtime != b.training_runtime:
                out.append(
                    (
                        f"schedulerProfiles {name} trainingRuntime {str(a.training_runtime).lower()} -> "
                        f"{str(b.training_runtime).lower()}",
                        "safe",
                        f"the Kubeflow training runtime {'names' if b.training_runtime else 'no longer names'} "
                        f"scheduler {name}: TrainJobs started from now on are placed "
                        f"{'by it' if b.training_runtime else 'by default-scheduler'}; running ones stay",
                        "",
                    )
                )
            continue
        if a is None:
            out.append(
                (
                    f"schedulerProfiles {name} added",
                    "safe",
                    f"scheduler profile {name} is new: only pods that name schedulerName {name} use it; running pods "
                    "stay where they are",
                    "",
                )
            )
        elif b is None:
            out.append(
                (
                    f"schedulerProfiles {name} removed",
                    "manual",
                    f"scheduler profile {name} is removed: running pods stay, but pods created later that name "
                    f"schedulerName {name} stay Pending",
                    f"move the workloads that name schedulerName {name} to another scheduler before applying",
                )
            )
        else:
            out.append(
                (
                    f"schedulerProfiles {name} changed",
                    "safe",
                    f"scheduler profile {name} changes where pods scheduled from now on go; running pods are not "
                    "moved (no rescheduling, no eviction)",
                    "",
                )
            )
    return out

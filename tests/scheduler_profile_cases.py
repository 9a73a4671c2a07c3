"""Hypothesis strategies for the cluster file's ``schedulerProfiles`` entries (docs/scheduler-profiles.md).

* :func:`valid_profiles` -- written-out profiles gpucluster accepts: ``multiPoint`` / ``score``
  plugins enabled and disabled (weights on scoring plugins), ``NodeResourcesFit`` args with every
  scoring strategy (a ``RequestedToCapacityRatio`` shape of increasing points),
  ``NodeResourcesBalancedAllocation`` args; ``apiVersion`` / ``kind`` of the args written or not.
* :func:`broken_profiles` -- a valid profile with one mutation gpucluster refuses, as
  ``(profile, what, scheduler_refuses)``: ``scheduler_refuses`` is True when the mutation breaks a
  rule of kube-scheduler itself (unknown plugin, a required plugin disabled, a non-scoring plugin
  under ``score``, an unknown strategy, a resource weight outside (0, 100], a shape point outside
  its range or out of order, ``RequestedToCapacityRatio`` without a shape, a
  ``NodeResourcesBalancedAllocation`` weight other than 1, an unknown args field, a name used
  twice), False for gpucluster's own stricter rules (reserved names, ``default-scheduler``,
  plugin weights above 100, other extension points, other plugins' args).
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

from gpucluster.inputs import scheduler_profiles as sp

RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "ephemeral-storage", "example.com/fpga")
NON_SCORE_PLUGINS = tuple(p for p in sp.PLUGINS if p not in sp.SCORE_PLUGINS)
OPTIONAL_PLUGINS = tuple(p for p in sp.PLUGINS if p not in sp.REQUIRED_PLUGINS)

names = st.from_regex(r"\A[a-z][a-z0-9]{0,8}(-[a-z0-9]{1,8}){0,2}\Z").filter(
    lambda n: n not in sp.RESERVED_NAMES
)


def _unique(elements, *, max_size: int):
    return st.lists(st.sampled_from(elements), unique=True, max_size=max_size)


@st.composite
def _enabled(draw, allowed, *, max_size: int) -> list[dict[str, Any]]:
    out = []
    for name in draw(_unique(allowed, max_size=max_size)):
        item: dict[str, Any] = {"name": name}
        if name in sp.SCORE_PLUGINS and draw(st.booleans()):
            item["weight"] = draw(st.integers(1, 100))
        out.append(item)
    return out


@st.composite
def _plugins(draw) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        enabled = draw(_enabled(sp.PLUGINS, max_size=4))
        taken = {e["name"] for e in enabled}
        disabled = draw(_unique([p for p in OPTIONAL_PLUGINS if p not in taken], max_size=3))
        point: dict[str, Any] = {}
        if enabled:
            point["enabled"] = enabled
        if disabled:
            point["disabled"] = [{"name": n} for n in disabled]
        out["multiPoint"] = point
    if draw(st.booleans()):
        enabled = draw(_enabled(sp.SCORE_PLUGINS, max_size=3))
        for item in enabled:  # under score every plugin scores: a weight is usual
            if draw(st.booleans()):
                item["weight"] = draw(st.integers(1, 100))
        taken = {e["name"] for e in enabled}
        disabled = draw(
            _unique([p for p in (*sp.SCORE_PLUGINS, "*") if p not in taken], max_size=2)
        )
        point = {}
        if enabled:
            point["enabled"] = enabled
        if disabled:
            point["disabled"] = [{"name": n} for n in disabled]
        out["score"] = point
    return out


@st.composite
def _resources(draw, *, balanced: bool) -> list[dict[str, Any]]:
    out = []
    for name in draw(_unique(RESOURCES, max_size=4)):
        item: dict[str, Any] = {"name": name}
        if draw(st.booleans()):
            item["weight"] = 1 if balanced else draw(st.integers(1, 100))
        out.append(item)
    return out


@st.composite
def _shape(draw) -> list[dict[str, Any]]:
    utilizations = sorted(draw(st.sets(st.integers(0, 100), min_size=1, max_size=6)))
    return [{"utilization": u, "score": draw(st.integers(0, 10))} for u in utilizations]


@st.composite
def _fit_args(draw) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if draw(st.booleans()):
        args["apiVersion"] = sp.CONFIG_API_VERSION
        args["kind"] = "NodeResourcesFitArgs"
    if draw(st.integers(0, 4)):
        kind = draw(st.sampled_from(sp.STRATEGIES))
        strategy: dict[str, Any] = {"type": kind}
        resources = draw(_resources(balanced=False))
        if resources:
            strategy["resources"] = resources
        if kind == "RequestedToCapacityRatio":
            strategy["requestedToCapacityRatio"] = {"shape": draw(_shape())}
        args["scoringStrategy"] = strategy
    return args


@st.composite
def _balanced_args(draw) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if draw(st.booleans()):
        args["apiVersion"] = sp.CONFIG_API_VERSION
        args["kind"] = "NodeResourcesBalancedAllocationArgs"
    resources = draw(_resources(balanced=True))
    if resources:
        args["resources"] = resources
    return args


@st.composite
def valid_profile(draw, name: str | None = None) -> dict[str, Any]:
    """One written-out profile gpucluster accepts (``schedulerName`` drawn unless given)."""
    profile: dict[str, Any] = {"schedulerName": name or draw(names)}
    plugins = draw(_plugins())
    if plugins or draw(st.booleans()):
        profile["plugins"] = plugins
    config = []
    for plugin, args in (
        ("NodeResourcesFit", _fit_args()),
        ("NodeResourcesBalancedAllocation", _balanced_args()),
    ):
        if draw(st.booleans()):
            config.append({"name": plugin, "args": draw(args)})
    if config or "plugins" not in profile:
        if not config:
            config.append({"name": "NodeResourcesFit", "args": draw(_fit_args())})
        profile["pluginConfig"] = draw(st.permutations(config))
    return profile


@st.composite
def valid_profiles(draw, *, max_size: int = 4) -> list[dict[str, Any]]:
    """Several profiles with distinct names, a preset now and then."""
    chosen = draw(st.lists(names, min_size=1, max_size=max_size, unique=True))
    out = []
    for name in chosen:
        if draw(st.integers(0, 3)) == 0:
            out.append({"schedulerName": name, "preset": draw(st.sampled_from(sorted(sp.PRESETS)))})
        else:
            out.append(draw(valid_profile(name)))
    return out


def _fit(profile: dict[str, Any]) -> dict[str, Any]:
    """The profile's NodeResourcesFit args (added when missing), the plugin left enabled.

    kube-scheduler checks these args when it builds the plugin (its config validation looks them
    up under another name), so for a profile that disables NodeResourcesFit it never reads them
    and accepts anything there; gpucluster checks them either way.
    """
    point = (profile.get("plugins") or {}).get("multiPoint") or {}
    if "disabled" in point:
        point["disabled"] = [d for d in point["disabled"] if d["name"] != "NodeResourcesFit"]
    config = profile.setdefault("pluginConfig", [])
    for item in config:
        if item["name"] == "NodeResourcesFit":
            return item["args"]
    config.append({"name": "NodeResourcesFit", "args": {}})
    return config[-1]["args"]


def _balanced(profile: dict[str, Any]) -> dict[str, Any]:
    config = profile.setdefault("pluginConfig", [])
    for item in config:
        if item["name"] == "NodeResourcesBalancedAllocation":
            return item["args"]
    config.append({"name": "NodeResourcesBalancedAllocation", "args": {}})
    return config[-1]["args"]


MUTATIONS = (
    "unknown-plugin",
    "required-disabled",
    "all-disabled",
    "score-non-scoring",
    "unknown-strategy",
    "resource-weight",
    "shape-range",
    "shape-order",
    "ratio-without-shape",
    "balanced-weight",
    "unknown-args-field",
    "name-twice",
    "default-scheduler",
    "reserved-name",
    "plugin-weight",
    "other-extension-point",
    "other-plugin-args",
)
"""The mutations of :func:`broken_profiles`."""


@st.composite
def broken_profiles(draw, mutation: str | None = None) -> tuple[list[dict[str, Any]], str, bool]:
    """``(profiles, what, scheduler_refuses)``: a valid profile with one mutation of
    :data:`MUTATIONS` (``mutation``, or drawn) (module docstring)."""
    profile = copy.deepcopy(draw(valid_profile()))
    profiles = [profile]
    what = mutation or draw(st.sampled_from(MUTATIONS))
    plugins = profile.setdefault("plugins", {})
    refuses = True
    if what == "unknown-plugin":
        point = plugins.setdefault("multiPoint", {})
        point.setdefault("enabled", []).append(
            {
                "name": draw(
                    st.sampled_from(
                        ["NodeResourceFit", "Coscheduling", "AzureDiskLimits", "nodeaffinity"]
                    )
                )
            }
        )
    elif what == "required-disabled":
        point = plugins.setdefault("multiPoint", {})
        name = draw(st.sampled_from(sp.REQUIRED_PLUGINS))
        point["enabled"] = [e for e in point.get("enabled", []) if e["name"] != name]
        point.setdefault("disabled", []).append({"name": name})
    elif what == "all-disabled":
        plugins["multiPoint"] = {"disabled": [{"name": "*"}]}
    elif what == "score-non-scoring":
        point = plugins.setdefault("score", {})
        name = draw(st.sampled_from(NON_SCORE_PLUGINS))
        point.setdefault("enabled", []).append({"name": name})
    elif what == "unknown-strategy":
        _fit(profile)["scoringStrategy"] = {
            "type": draw(
                st.sampled_from(["Packed", "mostAllocated", "BalancedAllocation", "Binpack"])
            )
        }
    elif what == "resource-weight":
        weight = draw(st.one_of(st.integers(101, 10_000), st.integers(-1000, -1)))
        _fit(profile)["scoringStrategy"] = {
            "type": "MostAllocated",
            "resources": [{"name": draw(st.sampled_from(RESOURCES)), "weight": weight}],
        }
    elif what in ("shape-range", "shape-order"):
        shape = draw(_shape())
        if what == "shape-range":  # the order stays increasing: only a range is wrong
            case = draw(st.sampled_from(["high-utilization", "low-utilization", "score"]))
            if case == "high-utilization":
                shape.append({"utilization": draw(st.integers(101, 1000)), "score": 0})
            elif case == "low-utilization":
                shape.insert(0, {"utilization": draw(st.integers(-1000, -1)), "score": 0})
            else:
                index = draw(st.integers(0, len(shape) - 1))
                shape[index]["score"] = draw(
                    st.one_of(st.integers(11, 1000), st.integers(-1000, -1))
                )
        else:
            shape = shape + [
                {"utilization": shape[-1]["utilization"] - draw(st.integers(0, 5)), "score": 1}
            ]
        _fit(profile)["scoringStrategy"] = {
            "type": "RequestedToCapacityRatio",
            "requestedToCapacityRatio": {"shape": shape},
        }
    elif what == "ratio-without-shape":
        _fit(profile)["scoringStrategy"] = {"type": "RequestedToCapacityRatio"}
    elif what == "balanced-weight":
        weight = draw(st.one_of(st.integers(2, 100), st.integers(-100, -1)))
        _balanced(profile)["resources"] = [
            {"name": draw(st.sampled_from(RESOURCES)), "weight": weight}
        ]
    elif what == "unknown-args-field":
        args = _fit(profile)
        if "scoringStrategy" in args and draw(st.booleans()):
            args["scoringStrategy"][draw(st.sampled_from(["shape", "weights", "Type"]))] = 1
        else:
            args[draw(st.sampled_from(["ignoredResource", "scoringstrategy", "extra"]))] = [1]
    elif what == "name-twice":
        profiles.append({"schedulerName": profile["schedulerName"], "preset": "gpu-binpacking"})
    elif (
        what == "default-scheduler"
    ):  # replaces the base profile in the overlay: the scheduler accepts it
        profile["schedulerName"] = sp.DEFAULT_SCHEDULER
        refuses = False
    elif what == "reserved-name":
        profile["schedulerName"] = draw(
            st.sampled_from(sorted(set(sp.RESERVED_NAMES) - {sp.DEFAULT_SCHEDULER}))
        )
        refuses = False
    elif what == "plugin-weight":
        point = plugins.setdefault("score", {})
        point["disabled"] = [d for d in point.get("disabled", []) if d["name"] != "ImageLocality"]
        point["enabled"] = [e for e in point.get("enabled", []) if e["name"] != "ImageLocality"]
        point["enabled"].append({"name": "ImageLocality", "weight": draw(st.integers(101, 10_000))})
        refuses = False
    elif what == "other-extension-point":
        plugins[draw(st.sampled_from(["filter", "preScore", "postFilter"]))] = {}
        refuses = False
    elif what == "other-plugin-args":
        profile.setdefault("pluginConfig", []).append(
            {"name": draw(st.sampled_from(["InterPodAffinity", "DefaultPreemption"])), "args": {}}
        )
        refuses = False
    return profiles, what, refuses

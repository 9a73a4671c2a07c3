"""Cluster file input: ``gpucluster.yaml`` -> validated :class:`~gpucluster.model.ClusterSpec` s.

Where the input comes from (first that applies):

1. the ``path`` argument (CLI ``--config``);
2. the ``GPUCLUSTER_CONFIG`` environment variable (a path; it must exist);
3. ``gpucluster.yaml`` in the working folder;
4. the embedded default (``gpucluster/default_cluster.yaml``): one H100 AKS Ubuntu training
   cluster ``gpu-training`` (gpuStack ``azure-managed``, Kubernetes 1.34, AKS default pools:
   system + one ``Standard_ND96isr_H100_v5`` GPU node).

The format is documented in docs/cluster-file.md. Every error is a
:class:`~gpucluster.errors.GpuclusterError` naming the file, the cluster and the key.
Parsing is strict (:mod:`gpucluster.yamlsafe`): duplicate keys, YAML aliases, non-string keys,
timestamps and non-UTF-8 files are rejected.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucluster import yamlsafe
from gpucluster.errors import GpuclusterError
from gpucluster.fields import Where
from gpucluster.model import (
    ANY,
    CLUSTER_KEYS,
    CRITERIA_FIELDS,
    ClusterSpec,
    Criteria,
    ExistingCluster,
    NodePool,
    Taint,
)
from gpucluster.recipes.driver_upgrade import parse_driver_upgrade_policy
from gpucluster.recipes.overrides import parse_overrides
from gpucluster.recipes.scheduling import (
    EFFECTS,
    check_label_key,
    check_label_value,
    parse_scheduling,
    parse_taint,
)

if TYPE_CHECKING:
    from gpucluster.inputs.fleet import FleetSpec

ENV_CONFIG = "GPUCLUSTER_CONFIG"
DEFAULT_FILE_NAME = "gpucluster.yaml"
EMBEDDED_DEFAULT = Path(__file__).parent.parent / "default_cluster.yaml"
EMBEDDED_SOURCE = "<embedded default>"

TOP_KEYS = ("clusters", "backend", "charts", "images", "fleet")
VERSION_SKEW_LEVELS = ("warning", "error", "upgrade")
"""What a cluster does with a RecipeResult's chart pins other than the catalog's (cluster key
``versionSkew``): ``warning`` (default: pins gpucluster has values for are installed with them,
other pins refused), ``error`` (every such pin refused), ``upgrade`` (a pin gpucluster has no
values for is replaced by the catalog's version, the change printed); docs/recipes.md."""

POOL_KEYS = (
    "name",
    "vmSize",
    "nodeCount",
    "gpu",
    "labels",
    "taints",
    "gpuDriver",
    "managedGpu",
    "replaces",
)
EXISTING_KEYS = ("kubeconfig", "context")

CLUSTER_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
CLUSTER_NAME_MAX = 40
"""Cluster names are DNS-1123 labels of at most 40 characters (stack names append
``-cluster``/``-runtime``; Azure resource names derived from it stay within limits)."""

CRITERIA_VALUE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
K8S_MINOR = re.compile(r"^[1-9][0-9]*\.(0|[1-9][0-9]*)$")
PROFILE_IDENT = re.compile(r"^[A-Za-z0-9._-]+$")
VM_SIZE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
"""Machine sizes/shapes of every platform: Azure ``Standard_ND96isr_H100_v5``, OCI ``BM.GPU.H100.8``."""


ENV_DEFAULT_INTENDED = "GPUCLUSTER_EMBEDDED_DEFAULT"
"""``GPUCLUSTER_EMBEDDED_DEFAULT=1``: using the embedded default is intended, so no
:func:`embedded_default_notice` (this repository's ``make synth`` sets it; it changes nothing else)."""


def embedded_default_notice(
    path: str | None = None, env: Mapping[str, str] = os.environ
) -> str | None:
    """The info line printed by the cdktf app, ``gpucluster synth`` and ``gpucluster plan`` when no
    cluster file is found and :func:`load_clusters` falls back to the embedded default, else None.

    One line naming the folder gpucluster looked in (the working folder: ``GPUCLUSTER_CONFIG``
    unset, no ``gpucluster.yaml`` there), what the built-in example creates and ``gpucluster
    init``, so a run in the wrong folder or a ``gpucluster.yml`` typo does not silently plan an
    H100 node in the AKS default region. None also with :data:`ENV_DEFAULT_INTENDED` set to ``1``.
    """
    if (
        path is not None
        or env.get(ENV_CONFIG)
        or Path(DEFAULT_FILE_NAME).is_file()
        or env.get(ENV_DEFAULT_INTENDED) == "1"
    ):
        return None
    from gpucluster.errors import Problem
    from gpucluster.plugins import platforms

    aks = platforms().get("aks")
    where = f" in {aks.default_region}" if aks is not None and aks.default_region else ""
    folder = Path.cwd()
    return Problem(
        message=f"no cluster file in {folder} ({ENV_CONFIG} is not set and there is no {DEFAULT_FILE_NAME}); using the "
        f"built-in example cluster gpu-training (AKS, one H100 GPU node{where})",
        file=EMBEDDED_SOURCE,
        id="input.default",
        fix=f"`gpucluster init` creates a project with its own {DEFAULT_FILE_NAME} in this folder; or point {ENV_CONFIG} at "
        "your cluster file (docs/cluster-file.md)",
    ).render("info")


def load_clusters(
    path: str | None = None, env: Mapping[str, str] = os.environ
) -> list[ClusterSpec]:
    """Load and validate the cluster file.

    Args:
        path: cluster file path; ``None`` picks ``GPUCLUSTER_CONFIG``, then ``./gpucluster.yaml``,
            then the embedded default.
        env: environment to read ``GPUCLUSTER_CONFIG`` from.

    Returns:
        one ClusterSpec per ``clusters`` entry, in file order (``source`` set to the file as
        named, or ``<embedded default>``).

    Raises:
        GpuclusterError: unreadable/invalid YAML, unknown or mistyped keys, invalid names,
            duplicate cluster names, missing or escaping recipe files, ``fleet:`` problems.
    """
    return load_config(path, env)[0]


def _missing(path: str) -> bool:
    """Whether ``path`` certainly does not exist (an unstattable path is left to yamlsafe's line)."""
    try:
        return not Path(path).exists()
    except (OSError, ValueError):
        return False


def cluster_file(path: str | None = None, env: Mapping[str, str] = os.environ) -> str | None:
    """The cluster file :func:`load_clusters` reads: ``path`` when given, else
    ``GPUCLUSTER_CONFIG``, else ``gpucluster.yaml`` in the working folder when it is a file;
    None for the embedded default.

    Raises:
        GpuclusterError: ``GPUCLUSTER_CONFIG`` names a file that does not exist.
    """
    if path is not None:
        return path
    path = env.get(ENV_CONFIG) or None
    if path is not None and _missing(path):
        raise GpuclusterError(
            f"{ENV_CONFIG} names a cluster file that does not exist",
            file=path,
            key=ENV_CONFIG,
            fix=f"check the path, or unset {ENV_CONFIG} to use ./{DEFAULT_FILE_NAME} (docs/cluster-file.md)",
        )
    if path is None and Path(DEFAULT_FILE_NAME).is_file():
        path = DEFAULT_FILE_NAME
    return path


def load_config(
    path: str | None = None, env: Mapping[str, str] = os.environ
) -> tuple[list[ClusterSpec], FleetSpec | None]:
    """Like :func:`load_clusters`, plus the validated ``fleet:`` section (None without one).

    Raises:
        GpuclusterError: as :func:`load_clusters`, and every ``fleet:`` problem
            (:func:`gpucluster.inputs.fleet.parse_fleet`, :func:`gpucluster.inputs.fleet.check_members`).
    """
    path = cluster_file(path, env)
    if path is None:
        data = yamlsafe.load_yaml_file(EMBEDDED_DEFAULT, display=EMBEDDED_SOURCE)
        return parse_config(data, source=EMBEDDED_SOURCE, root=Path.cwd())
    file = Path(path)
    data = yamlsafe.load_yaml_file(file, display=path)
    root = yamlsafe.resolve_user_path(
        path, Path.cwd(), file=path, key=ENV_CONFIG, what="cluster file"
    ).parent
    return parse_config(data, source=path, root=root)


def parse_clusters(data: Any, *, source: str, root: Path) -> list[ClusterSpec]:
    """Validate parsed cluster-file data (see :func:`load_clusters`).

    Args:
        data: the parsed YAML document.
        source: the file name used in errors and ``ClusterSpec.source``.
        root: the project folder: recipe paths are relative to it and must stay inside it.
    """
    return parse_config(data, source=source, root=root)[0]


def parse_config(
    data: Any, *, source: str, root: Path
) -> tuple[list[ClusterSpec], FleetSpec | None]:
    """Validate parsed cluster-file data: the clusters and the optional ``fleet:`` section."""
    clusters = _parse_clusters(data, source=source, root=root)
    if data.get("fleet") is None:
        for i, raw in enumerate(data["clusters"]):
            if isinstance(raw, dict) and raw.get("fleet") is not None:
                raise GpuclusterError(
                    "the cluster names a fleet group, but the file has no top-level 'fleet:' section",
                    file=source,
                    cluster=clusters[i].name,
                    key=f"clusters[{i}].fleet",
                    fix="add fleet: {name: ..., groups: [...]} at the top level (docs/fleets.md), or remove the cluster's fleet key",
                    id="fleet",
                )
        return clusters, None
    from gpucluster.inputs import fleet as fleet_mod
    from gpucluster.plugins import platform_for

    fleet = fleet_mod.parse_fleet(data["fleet"], file=source)
    if fleet.hub is not None:  # the hub's kubeconfig and context follow existing.kubeconfig's rules
        check_existing(
            ExistingCluster(kubeconfig_path=fleet.hub.kubeconfig_path, context=fleet.hub.context),
            file=source,
            cluster=None,
            key="fleet.hub",
        )
    for i, raw in enumerate(data["clusters"]):
        if raw.get("fleet") is not None:
            fleet.members[clusters[i].name] = fleet_mod.parse_member(
                raw["fleet"], file=source, cluster=clusters[i].name, key=f"clusters[{i}].fleet"
            )
    fleet_mod.check_members(
        fleet, clusters, min_kubernetes=platform_for("aks", file=source).min_kubernetes
    )
    fleet_mod.check_cloud_fan_in(fleet, clusters)
    for cluster in clusters:  # one HCP Terraform project per fleet unless the backend names one
        if (
            cluster.backend is not None
            and cluster.backend.get("type") == "cloud"
            and cluster.backend.get("project") is None
        ):
            from gpucluster.inputs.backends import PROJECT_NAME, PROJECT_NAME_MAX

            if PROJECT_NAME.fullmatch(fleet.name) and len(fleet.name) <= PROJECT_NAME_MAX:
                cluster.backend = {**cluster.backend, "project": fleet.name}
    return clusters, fleet


def _parse_clusters(data: Any, *, source: str, root: Path) -> list[ClusterSpec]:
    if data is None:
        raise GpuclusterError(
            "the cluster file is empty",
            file=source,
            fix="add a 'clusters:' list (see docs/cluster-file.md)",
        )
    Where(source).fields(
        data, fix="start the file with 'clusters:' (see docs/cluster-file.md)"
    ).check_keys(TOP_KEYS)
    if "clusters" not in data:
        raise GpuclusterError(
            "missing key 'clusters'", file=source, key="clusters", fix="add a 'clusters:' list"
        )
    raw_clusters = Where(source).check_list(
        data["clusters"], "clusters", fix="give at least one cluster as a list item ('- name: ...')"
    )
    from gpucluster.charts import mirrors
    from gpucluster.inputs import backends

    default_backend = None
    if data.get("backend") is not None:
        default_backend = backends.parse_backend(
            data["backend"], file=source, cluster=None, key="backend"
        )
    default_mirrors = None
    if data.get("charts") is not None:
        default_mirrors = mirrors.parse_charts(
            data["charts"], file=source, cluster=None, key="charts"
        )
    from gpucluster.charts import imagemirror

    default_image_mirror = None
    if data.get("images") is not None:
        default_image_mirror = imagemirror.parse_images(
            data["images"], file=source, cluster=None, key="images"
        )
    clusters: list[ClusterSpec] = []
    seen: dict[str, int] = {}
    backend_keys: list[str] = []
    for i, raw in enumerate(raw_clusters):
        spec = _cluster(raw, i, source, root)
        backend_key = "backend"
        if isinstance(raw, dict) and raw.get("backend") is not None:
            backend_key = f"clusters[{i}].backend"
            spec.backend = backends.parse_backend(
                raw["backend"], file=source, cluster=spec.name, key=backend_key
            )
        else:
            spec.backend = default_backend
        spec.backend_key = backend_key
        if isinstance(raw, dict) and raw.get("charts") is not None:
            spec.chart_mirrors = mirrors.parse_charts(
                raw["charts"], file=source, cluster=spec.name, key=f"clusters[{i}].charts"
            )
        else:
            spec.chart_mirrors = default_mirrors
        if isinstance(raw, dict) and raw.get("images") is not None:
            spec.image_mirror = imagemirror.parse_images(
                raw["images"], file=source, cluster=spec.name, key=f"clusters[{i}].images"
            )
        else:
            spec.image_mirror = default_image_mirror
        backends.check_workspaces(
            spec.backend,
            cluster=spec.name,
            file=source,
            key=backends.prefix_key(backend_key, spec.backend),
        )
        backend_keys.append(backends.prefix_key(backend_key, spec.backend))
        if spec.name in seen:
            raise GpuclusterError(
                f"cluster name '{spec.name}' is used twice (clusters[{seen[spec.name]}] and clusters[{i}])",
                file=source,
                cluster=spec.name,
                key=f"clusters[{i}].name",
                fix="give every cluster a unique name",
            )
        seen[spec.name] = i
        clusters.append(spec)
    backends.check_unique_workspaces(
        ((c.name, c.backend, k) for c, k in zip(clusters, backend_keys, strict=True)), file=source
    )
    return clusters


# --------------------------------------------------------------------------- helpers


def suggest_cluster_name(name: str) -> str:
    """A valid cluster name close to ``name`` (lowercase, other characters as '-', at most
    :data:`CLUSTER_NAME_MAX` characters), or ``gpu-training`` when nothing is left."""
    text = (
        re.sub(r"[^a-z0-9]+", "-", name.lower())
        .lstrip("-0123456789")[:CLUSTER_NAME_MAX]
        .rstrip("-")
    )
    return text if CLUSTER_NAME.fullmatch(text) else "gpu-training"


def _platform_min(service: str, source: str) -> str:
    """The platform plugin's ``min_kubernetes`` for ``service`` (``"1.34"`` on AKS)."""
    from gpucluster.plugins import platform_for

    return platform_for(service, file=source).min_kubernetes


def _cluster(raw: Any, i: int, source: str, root: Path) -> ClusterSpec:
    """One ``clusters[i]`` entry, validated step by step (each step raises the one-line
    :class:`GpuclusterError` naming ``clusters[i].<key>``)."""
    base = f"clusters[{i}]"
    Where(source).fields(raw, base)
    name = _cluster_name(raw, base, source)
    Where(source, name).fields(raw, base).check_keys(CLUSTER_KEYS)
    w = {"file": source, "cluster": name}
    criteria, recipe_file = _cluster_criteria(raw, base, root, w)
    profile = _profile(raw, base, w)
    region = _region(raw, base, w)
    k8s = _kubernetes_version(raw, base, w)
    existing = _existing(raw, base, w, region)
    pools = _pools(raw, base, w, existing)
    version_skew = _version_skew(raw, base, w)
    settings: dict[str, Any] = {}
    if raw.get("settings") is not None:
        settings = dict(Where(source, name).fields(raw["settings"], f"{base}.settings"))
    overrides = parse_overrides(
        raw.get("overrides"), file=source, cluster=name, root=root, base=f"{base}.overrides"
    )
    scheduling = parse_scheduling(
        raw.get("scheduling"), file=source, cluster=name, base=f"{base}.scheduling"
    )
    driver_upgrade_policy = parse_driver_upgrade_policy(
        raw.get("driverUpgradePolicy"),
        file=source,
        cluster=name,
        base=f"{base}.driverUpgradePolicy",
    )
    from gpucluster.inputs.scheduler_profiles import parse_scheduler_profiles

    scheduler_profiles = parse_scheduler_profiles(
        raw.get("schedulerProfiles"),
        file=source,
        cluster=name,
        base=f"{base}.schedulerProfiles",
        service=criteria.service,
        kubernetes_version=k8s,
        platform_min=_platform_min(criteria.service, source)
        if raw.get("schedulerProfiles") is not None
        else "",
    )

    return ClusterSpec(
        name=name,
        criteria=criteria,
        profile=profile,
        region=region,
        kubernetes_version=k8s,
        pools=pools,
        existing=existing,
        overrides=overrides,
        scheduling=scheduling,
        recipe_file=recipe_file,
        version_skew=version_skew,
        settings=settings,
        source=source,
        index=i,
        driver_upgrade_policy=driver_upgrade_policy,
        scheduler_profiles=scheduler_profiles,
    )


def _cluster_name(raw: dict, base: str, source: str) -> str:
    """``name``: present, a string, a valid cluster name."""
    name_raw = raw.get("name")
    if name_raw is None:
        raise GpuclusterError(
            "missing key 'name'", file=source, key=f"{base}.name", fix="give the cluster a name"
        )
    name = Where(source).check_str(name_raw, f"{base}.name")
    if not CLUSTER_NAME.fullmatch(name) or len(name) > CLUSTER_NAME_MAX:
        raise GpuclusterError(
            f"invalid cluster name '{name}'",
            file=source,
            cluster=name,
            key=f"{base}.name",
            allowed=f"lowercase letters, digits and '-', starting with a letter, ending alphanumeric, at most {CLUSTER_NAME_MAX} characters",
            fix=f"rename it, e.g. name: {suggest_cluster_name(name)}",
        )
    return name


def _cluster_criteria(raw: dict, base: str, root: Path, w: dict) -> tuple[Criteria, str | None]:
    """``criteria`` or ``recipe`` (a RecipeResult carries its own criteria): ``(criteria, recipe file)``."""
    name = w["cluster"]
    recipe_file: str | None = None
    if "criteria" in raw and "recipe" in raw:
        raise GpuclusterError(
            "give either 'criteria' or 'recipe', not both",
            key=f"{base}.recipe",
            fix="a recipe file carries its own criteria; remove 'criteria'",
            **w,
        )
    if "recipe" in raw:
        recipe_file = _recipe_path(raw["recipe"], root, f"{base}.recipe", w)
        from gpucluster.recipes import recipe_result

        criteria = recipe_result.read_criteria(recipe_file, display=raw["recipe"], cluster=name)
    elif "criteria" in raw:
        criteria = _criteria(raw["criteria"], f"{base}.criteria", w)
    else:
        raise GpuclusterError(
            "missing key 'criteria' (or 'recipe')",
            key=f"{base}.criteria",
            fix="add criteria, e.g. {service: aks, accelerator: h100, os: ubuntu, intent: training}",
            **w,
        )

    return criteria, recipe_file


def _profile(raw: dict, base: str, w: dict) -> dict[str, str]:
    """``profile``: name -> value, both ``[A-Za-z0-9._-]+``."""
    source, name = w["file"], w["cluster"]
    profile: dict[str, str] = {}
    if raw.get("profile") is not None:
        pr = Where(source, name).fields(raw["profile"], f"{base}.profile")
        for pname, pvalue in pr.items():
            if not PROFILE_IDENT.fullmatch(pname):
                raise GpuclusterError(
                    f"invalid profile name '{pname}'",
                    key=f"{base}.profile",
                    allowed="[A-Za-z0-9._-]+",
                    fix="use the profile name the recipe declares, e.g. gpuStack (docs/recipes.md)",
                    **w,
                )
            pvalue = pr.where.check_str(pvalue, pr.key_of(pname))
            if not PROFILE_IDENT.fullmatch(pvalue):
                raise GpuclusterError(
                    f"invalid profile value '{pvalue}'",
                    key=f"{base}.profile.{pname}",
                    allowed="[A-Za-z0-9._-]+",
                    fix="use a value the recipe declares, e.g. gpuStack: operator-managed (docs/recipes.md)",
                    **w,
                )
            profile[pname] = pvalue

    return profile


def _region(raw: dict, base: str, w: dict) -> str | None:
    """``region``: a lowercase programmatic region name, or None."""
    source, name = w["file"], w["cluster"]
    region = None
    if raw.get("region") is not None:
        region = Where(source, name).check_str(raw["region"], f"{base}.region")
        if not re.fullmatch(r"^[a-z0-9-]+$", region):
            raise GpuclusterError(
                f"invalid region '{region}'",
                key=f"{base}.region",
                allowed="lowercase region names such as eastus",
                fix="write the region's programmatic name: lowercase, no spaces or '_' (e.g. eastus, westus3)",
                **w,
            )

    return region


def _kubernetes_version(raw: dict, base: str, w: dict) -> str:
    """``kubernetesVersion``: a quoted ``MAJOR.MINOR`` (default ``1.34``)."""
    source, name = w["file"], w["cluster"]
    k8s = "1.34"
    if raw.get("kubernetesVersion") is not None:
        kv = raw["kubernetesVersion"]
        if isinstance(kv, float):
            raise GpuclusterError(
                f"kubernetesVersion {kv!r} is a number; YAML reads 1.30 as 1.3",
                key=f"{base}.kubernetesVersion",
                fix='quote it: kubernetesVersion: "1.34"',
                **w,
            )
        k8s = Where(source, name).check_str(kv, f"{base}.kubernetesVersion")
        if not K8S_MINOR.fullmatch(k8s):
            raise GpuclusterError(
                f"kubernetesVersion '{k8s}' is not MAJOR.MINOR",
                key=f"{base}.kubernetesVersion",
                allowed='MAJOR.MINOR without leading zeros, e.g. "1.34"',
                fix='write the minor version quoted, e.g. kubernetesVersion: "1.34"',
                **w,
            )

    return k8s


def _existing(raw: dict, base: str, w: dict, region: str | None) -> ExistingCluster | None:
    """``existing``: the kubeconfig (and context) of a cluster gpucluster does not create; no ``region`` with it."""
    source, name = w["file"], w["cluster"]
    existing = None
    if raw.get("existing") is not None:
        ex = Where(source, name).fields(raw["existing"], f"{base}.existing")
        ex.check_keys(EXISTING_KEYS)
        existing = ExistingCluster(context=ex.get_str("context"))
        existing.kubeconfig_path = ex.get_str("kubeconfig", existing.kubeconfig_path)
        check_existing(existing, file=source, cluster=name, key=f"{base}.existing")
        if region is not None:
            raise GpuclusterError(
                f"region '{region}' has no effect with 'existing': gpucluster does not create the cluster and reaches it "
                "through the kubeconfig",
                key=f"{base}.region",
                fix="remove 'region' (or remove 'existing' to have gpucluster create the cluster in that region)",
                **w,
            )

    return existing


def _pools(raw: dict, base: str, w: dict, existing: ExistingCluster | None) -> list[NodePool]:
    """``pools``: a non-empty list of node pools (not with ``existing``); [] for the platform's defaults."""
    pools: list[NodePool] = []
    if raw.get("pools") is not None:
        if existing is not None:
            raise GpuclusterError(
                "'pools' cannot be combined with 'existing' (gpucluster does not create node pools in an existing cluster)",
                key=f"{base}.pools",
                fix="remove 'pools' (the existing cluster keeps its own node pools), or remove 'existing' to have gpucluster "
                "create the cluster",
                **w,
            )
        listed = Where(**w).check_list(
            raw["pools"],
            f"{base}.pools",
            fix="list the pools ('- {name: gpu, vmSize: Standard_ND96isr_H100_v5}'), or remove "
            "'pools' for the platform's default pools",
        )
        pools = [_pool(p, f"{base}.pools[{j}]", w) for j, p in enumerate(listed)]

    return pools


def _version_skew(raw: dict, base: str, w: dict) -> str:
    """``versionSkew``: ``warning`` (default), ``error`` or ``upgrade``, with ``recipe`` only."""
    version_skew = raw.get("versionSkew", "warning")
    if "versionSkew" in raw and (version_skew not in VERSION_SKEW_LEVELS or "recipe" not in raw):
        raise GpuclusterError(
            f"versionSkew is {version_skew!r}"
            + ("" if "recipe" in raw else " on a cluster without 'recipe'"),
            key=f"{base}.versionSkew",
            allowed=", ".join(VERSION_SKEW_LEVELS) + " (with 'recipe' only)",
            fix="versionSkew: error makes a RecipeResult's chart pins that differ from gpucluster's catalog fail synth, "
            "upgrade installs the catalog's version for pins gpucluster has no values for; remove it or write "
            "warning/error/upgrade",
            **w,
        )
    return version_skew


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
KUBECONFIG_FORMS = "an absolute path or one starting with ~/"


def check_existing(
    existing: ExistingCluster, *, file: str | None, cluster: str | None, key: str = "existing"
) -> None:
    """Refuse an ``existing:`` the runtime stack could not use, for every platform.

    * ``kubeconfig``: non-empty, absolute or ``~/``-relative (:data:`KUBECONFIG_FORMS`): the value
      is the default of the runtime stack's ``kubeconfig_path`` variable, which Terraform's Helm
      provider resolves against the stack's folder (``cdktf.out/stacks/<name>-runtime``), not
      against the cluster file; no surrounding whitespace or control characters.
    * ``context``: when given, non-empty, without surrounding whitespace or control characters.

    Args:
        key: the key path of the ``existing`` mapping (``clusters[0].existing``), or ``fleet.hub``
            (the fleet hub's kubeconfig and context follow the same rules).

    Raises:
        GpuclusterError: ``<key>.kubeconfig`` or ``<key>.context``.
    """
    where = {"file": file, "cluster": cluster}
    shown = (
        "existing" if key.endswith("existing") else key
    )  # the name the file uses (fleet.hub for the hub)
    path = existing.kubeconfig_path
    kkey = f"{key}.kubeconfig"
    if path is not None:
        if not isinstance(path, str) or not path.strip():
            raise GpuclusterError(
                f"{shown}.kubeconfig is empty",
                key=kkey,
                fix="give the kubeconfig path, e.g. ~/.kube/config",
                **where,
            )
        if path != path.strip() or _CONTROL.search(path):
            raise GpuclusterError(
                f"{shown}.kubeconfig {path!r} has surrounding whitespace or control characters",
                key=kkey,
                fix="write the path without leading/trailing spaces or line breaks",
                **where,
            )
        if not (path.startswith("/") or path == "~" or path.startswith("~/")):
            raise GpuclusterError(
                f"{shown}.kubeconfig '{path}' is a relative path: Terraform's Helm provider would resolve it against "
                "the runtime stack's folder (cdktf.out/stacks/<name>-runtime), not against the cluster file",
                key=kkey,
                allowed=KUBECONFIG_FORMS,
                fix="write the full path, e.g. ~/.kube/config",
                **where,
            )
    context = existing.context
    if context is not None and (
        not isinstance(context, str)
        or not context.strip()
        or context != context.strip()
        or _CONTROL.search(context)
    ):
        raise GpuclusterError(
            f"{shown}.context {context!r} is empty or has surrounding whitespace or control characters",
            key=f"{key}.context",
            fix="give the context name exactly as `kubectl config get-contexts` lists it, or drop the key to use the current context",
            **where,
        )


def _criteria(raw: Any, key: str, w: dict) -> Criteria:
    data = Where(**w).fields(raw, key)
    data.check_keys(CRITERIA_FIELDS)
    if "service" not in data:
        raise GpuclusterError(
            "missing key 'service'", key=f"{key}.service", fix="set service, e.g. aks", **w
        )
    values: dict[str, str] = {}
    for f in CRITERIA_FIELDS:
        if data.get(f) is None:
            values[f] = ANY
            continue
        v = data.require_str(f)
        if not CRITERIA_VALUE.fullmatch(v):
            raise GpuclusterError(
                f"invalid {f} '{v}'",
                key=f"{key}.{f}",
                allowed="lowercase letters, digits and '-'",
                fix=f"write it in lowercase, e.g. {f}: {re.sub(r'[^a-z0-9-]+', '-', v.lower()).strip('-') or 'any'}",
                **w,
            )
        values[f] = v
    return Criteria(**values)


def _recipe_path(raw: Any, root: Path, key: str, w: dict) -> str:
    rel = Where(**w).check_str(raw, key)
    resolved = yamlsafe.resolve_user_path(
        rel, root, file=w["file"], cluster=w["cluster"], key=key, what="recipe file"
    )
    try:
        resolved.relative_to(root.resolve())
    except ValueError:
        raise GpuclusterError(
            f"recipe file '{rel}' is outside the project folder {root}",
            key=key,
            fix="copy the RecipeResult into the project folder and give a relative path",
            **w,
        ) from None
    try:
        is_file = resolved.is_file()
    except OSError as exc:
        raise GpuclusterError(
            f"recipe file '{rel}' cannot be read: {exc.strerror}",
            key=key,
            fix="check the path (relative to the cluster file)",
            **w,
        ) from None
    if not is_file:
        raise GpuclusterError(
            f"recipe file '{rel}' does not exist or is not a regular file",
            key=key,
            fix="check the path (relative to the cluster file)",
            **w,
        )
    return str(resolved)


def _pool(raw: Any, key: str, w: dict) -> NodePool:
    where = Where(**w)
    data = where.fields(raw, key)
    data.check_keys(POOL_KEYS)
    for required in ("name", "vmSize"):
        if required not in data:
            raise GpuclusterError(
                f"missing key '{required}'",
                key=f"{key}.{required}",
                fix=f"add {required}"
                + (
                    ", e.g. vmSize: Standard_ND96isr_H100_v5 (H100) or Standard_D8ds_v5 (system)"
                    if required == "vmSize"
                    else ""
                ),
                **w,
            )
    name = where.check_str(data["name"], f"{key}.name")
    vm = where.check_str(data["vmSize"], f"{key}.vmSize")
    if not VM_SIZE.fullmatch(vm):
        raise GpuclusterError(
            f"invalid vmSize '{vm}'",
            key=f"{key}.vmSize",
            allowed="a machine size name: letters, digits, '.', '_' and '-', at most 80 characters",
            fix="write the size's name, e.g. vmSize: Standard_ND96isr_H100_v5 (AKS) or BM.GPU.H100.8 (OKE)",
            **w,
        )
    count = where.check_int(
        data.get("nodeCount", 1),
        f"{key}.nodeCount",
        fix="write a whole number without quotes, e.g. nodeCount: 2",
    )
    gpu = where.check_bool(
        data.get("gpu", True), f"{key}.gpu", fix="write gpu: true or gpu: false, without quotes"
    )
    managed = where.check_bool(
        data.get("managedGpu", False),
        f"{key}.managedGpu",
        fix="remove managedGpu (AKS-managed GPU pools are refused by policy)",
    )
    labels: dict[str, str] = {}
    if data.get("labels") is not None:
        lab = where.fields(data["labels"], f"{key}.labels")
        for lk, lv in lab.items():
            try:
                labels[check_label_key(lk, "label key")] = check_label_value(lv, "label value")
            except ValueError as exc:
                raise GpuclusterError(
                    str(exc),
                    key=f"{key}.labels.{lk}",
                    allowed="Kubernetes label keys ([prefix/]name, name <= 63 of [A-Za-z0-9._-]) and string values",
                    fix='write e.g. labels: {example.com/team: research}; quote values that YAML reads as other types ("true", "2")',
                    **w,
                ) from None
    taints: list[Taint] = []
    if data.get("taints") is not None:
        listed = where.check_list(
            data["taints"],
            f"{key}.taints",
            empty_ok=True,
            fix="write taints: ['key=value:Effect', ...]",
        )
        for j, t in enumerate(listed):
            text = where.check_str(t, f"{key}.taints[{j}]")
            try:
                taints.append(parse_taint(text))
            except ValueError as exc:
                raise GpuclusterError(
                    f"invalid taint '{text}': {exc}",
                    key=f"{key}.taints[{j}]",
                    allowed=f"key[=value]:Effect with a Kubernetes label key and value, Effect one of {', '.join(EFFECTS)}",
                    fix="write e.g. nvidia.com/gpu=present:NoSchedule or dedicated:NoExecute",
                    **w,
                ) from None
    gpu_driver = None
    if data.get("gpuDriver") is not None:
        gpu_driver = where.check_str(data["gpuDriver"], f"{key}.gpuDriver")
    replaces = None
    if "replaces" in data:
        replaces = where.check_str(data["replaces"], f"{key}.replaces")
    return NodePool(
        name=name,
        vm_size=vm,
        node_count=count,
        gpu=gpu,
        gpu_set="gpu" in data,
        labels=labels,
        taints=taints,
        gpu_driver=gpu_driver,
        managed_gpu=managed,
        replaces=replaces,
    )

"""Plain-data types that flow through gpucluster (no cdktf, no I/O).

Data flow (each step adds one kind of knowledge)::

    cluster file | embedded default | AICR RecipeResult
      -> ClusterSpec        (gpucluster.inputs.config)     validated input
      -> Recipe             (gpucluster.recipes.recipe)     catalog resolution
      -> Component values   (gpucluster.pipeline)   overrides, node scheduling, plugin adjustments
      -> Finding list       (gpucluster.recipes.policy)     fail closed before anything is written
      -> RuntimePlan        (gpucluster.pipeline)   PlanNodes: charts, manifest charts, gates, edges
      -> constructs/stacks  (gpucluster_cdk.constructs_lib, stacks) the only place that imports cdktf

All mappings of Helm values are plain ``dict``/``list``/scalars as YAML would load them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from gpucluster.errors import Problem

# --------------------------------------------------------------------------- criteria

Service = str  # "aks", "nvke", "oke", ... (platform plugins declare the ones they serve)

CRITERIA_FIELDS = ("service", "accelerator", "os", "intent", "platform")
ANY = "any"


GATE_IMAGE_SETTING = "gateImage"
"""Cluster-file key ``settings.gateImage``: the kubectl image of every gate Job (docs/gates.md)."""

VALIDATE_SETTING = "validate"
"""Cluster-file key ``settings.validate``: ``true`` adds the in-cluster validation gate, the runtime
stack's last release (:mod:`gpucluster.live.gate`, docs/validate.md)."""

CORE_SETTING_KEYS: tuple[str, ...] = (GATE_IMAGE_SETTING, VALIDATE_SETTING)
"""Cluster-file ``settings`` keys the core reads for every platform; accepted on every platform
besides ``Platform.settings``. Re-exported as :data:`gpucluster.sdk.CORE_SETTING_KEYS`."""


@dataclass(frozen=True)
class Criteria:
    """What a recipe is selected by (AICR criteria).

    ``"any"`` (the default of each) is a wildcard on an overlay and "unspecified" on a query.

    Attributes:
        service: the platform, ``aks|nvke|oke|...`` (a :class:`Platform`'s ``service``).
        accelerator: the GPU, ``h100|gb200|...``.
        os: the node OS, ``ubuntu|...``.
        intent: ``training|inference``.
        platform: the ML platform on top, ``any|kubeflow|dynamo|...``.
    """

    service: str = ANY
    accelerator: str = ANY
    os: str = ANY
    intent: str = ANY
    platform: str = ANY

    def as_dict(self) -> dict[str, str]:
        return {f: getattr(self, f) for f in CRITERIA_FIELDS}


# --------------------------------------------------------------------------- recipe


@dataclass
class ComponentRef:
    """One component of a recipe as resolved from overlays/mixins/profile.

    Field names follow AICR's RecipeResult ``componentRefs`` entries.

    Attributes:
        name: catalog component name (``gpu-operator``).
        type: ``"Helm"`` (a chart) or ``"Manifest"`` (manifest-only, rendered into a local chart).
        source: chart repository URL, ``https://…`` or ``oci://…`` ('' for manifest-only).
        chart: chart name inside the repository (no repo prefix).
        version: pinned chart version exactly as the registry gives it (``v26.7.1``, ``0.19.0``).
        namespace: target namespace.
        values_files: catalog-relative values files, layered in order.
        overrides: inline values deep-merged over the values files (recipe overrides).
        pre_manifest_files / manifest_files: catalog-relative manifest templates installed
            before / after the chart.
        dependency_refs: names of components that must be ready first (set semantics, sorted).
        enabled: ``False`` when a recipe or override disabled the component.
        chart_versions: the chart-version range the recipe's own values for the component are
            written for (overlay ``chartVersions``, clauses of every overlay joined; '' = any):
            :func:`gpucluster.recipes.chart_versions.judge_pin`.
    """

    name: str
    type: Literal["Helm", "Manifest"] = "Helm"
    source: str = ""
    chart: str = ""
    version: str = ""
    namespace: str = ""
    values_files: list[str] = field(default_factory=list)
    overrides: dict[str, Any] = field(default_factory=dict)
    pre_manifest_files: list[str] = field(default_factory=list)
    manifest_files: list[str] = field(default_factory=list)
    dependency_refs: list[str] = field(default_factory=list)
    enabled: bool = True
    chart_versions: str = ""


@dataclass
class Constraint:
    """A recipe constraint, e.g. ``K8s.server.version >= 1.34``.

    Attributes:
        name: what is constrained, an AICR measurement path (``K8s.server.version``).
        value: the condition, an operator and a value (``>= 1.34``).
    """

    name: str
    value: str


@dataclass
class Recipe:
    """A resolved recipe (AICR RecipeResult shape).

    Attributes:
        criteria: the query it was resolved for.
        applied_overlays: overlay names, least specific first.
        constraints: merged constraints (later overlays replace same-named ones).
        component_refs: in deterministic (topological, then name) order.
        profile: ``(profile name, chosen value)``, e.g. ``("gpuStack", "azure-managed")``, or None.
        profile_owned: component -> the nested values the chosen profile sets, e.g.
            ``{"gpu-operator": {"driver": {"enabled": False}}}`` (policy-owned keys; their leaf
            paths are AICR's ``selectedProfile.ownedPaths``).
        advertiser: ``"external"`` when the chosen profile value declares that something outside
            the recipe (a platform add-on, e.g. OKE's NvidiaGpuPlugin device plugin) advertises
            whole GPUs, so the recipe's own device plugin and DRA GPU advertisement must both be
            off (AICR profile ``advertiser: external``); None otherwise.
        findings: what reading or resolving the recipe noticed without failing (renamed
            components of a RecipeResult file, version skew, conditional values resolved, ...);
            the pipeline reports them with the policy findings.
        file: the RecipeResult file the recipe was read from ('' when resolved from criteria).
        ref_keys: component -> its entry in that file (``componentRefs[3]``), for messages.
    """

    criteria: Criteria
    applied_overlays: list[str]
    constraints: list[Constraint]
    component_refs: list[ComponentRef]
    profile: tuple[str, str] | None = None
    profile_owned: dict[str, dict[str, Any]] = field(default_factory=dict)
    advertiser: str | None = None
    findings: list[Finding] = field(default_factory=list)
    file: str = ""
    ref_keys: dict[str, str] = field(default_factory=dict)

    def component(self, name: str) -> ComponentRef:
        for ref in self.component_refs:
            if ref.name == name:
                return ref
        raise KeyError(name)


# --------------------------------------------------------------------------- cluster input


@dataclass
class Taint:
    """A Kubernetes node taint (``key=value:Effect``; ``str()`` writes that form).

    Attributes:
        key: the taint key, a label key (``nvidia.com/gpu``).
        value: the taint value, a label value ("" for ``key=:Effect``).
        effect: ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``.
    """

    key: str
    value: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


@dataclass
class NodePool:
    """A node pool gpucluster provisions (platforms that provision clusters only).

    Attributes:
        name: pool name (AKS: lowercase alphanumeric, <= 12 chars).
        vm_size: e.g. ``Standard_ND96isr_H100_v5`` (8x H100, AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md)).
        node_count: nodes (>= 1 unless autoscaling bounds given).
        gpu: True for GPU pools (tainted, labelled, ``gpu_driver`` set from the profile).
        labels / taints: extra labels/taints; GPU pools get ``nvidia.com/gpu=present:NoSchedule``.
        gpu_driver: AKS ``gpu_driver`` (``Install`` | ``None``); derived from the gpuStack profile
            when not given.
        managed_gpu: AKS-managed GPU pool (``gpuProfile.nvidia.managementMode: Managed``); always refused.
        gpu_set: True when the cluster file wrote ``gpu:`` (platforms that derive GPU-ness from
            the VM size, like AKS, refuse an explicit ``gpu`` that contradicts it).
        node_selector: labels the platform gives every node of this pool and no other pool's
            (AKS: ``kubernetes.azure.com/agentpool: <name>``), set by the platform plugin; empty
            when unknown. ``gpucluster validate`` finds the pool's nodes by it.
        gpus_per_node: GPUs one node of the pool has (the VM size's GPU count, from the platform's
            data), set by the platform plugin for GPU pools; None when unknown.
        replaces: the name of the GPU pool this pool replaces in a surge (blue/green) change
            (cluster file ``replaces:``, docs/cluster-file.md "Replacing a GPU pool"); None
            otherwise. Only platforms that provision pools accept it (AKS).
    """

    name: str
    vm_size: str
    node_count: int = 1
    gpu: bool = True
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    gpu_driver: str | None = None
    managed_gpu: bool = False
    gpu_set: bool = False
    node_selector: dict[str, str] = field(default_factory=dict)
    gpus_per_node: int | None = None
    replaces: str | None = None


@dataclass
class Toleration:
    """A Kubernetes pod toleration (``as_dict()`` is the pod spec form).

    Attributes:
        key: the taint key tolerated; None (with ``Exists``) tolerates every taint.
        operator: ``Exists`` (any value) or ``Equal`` (``value`` only).
        value: the taint value for ``Equal``; None for ``Exists``.
        effect: the effect tolerated; None tolerates every effect.
    """

    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Exists"
    value: str | None = None
    effect: str | None = None

    def as_dict(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.key is not None:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value is not None:
            out["value"] = self.value
        if self.effect is not None:
            out["effect"] = self.effect
        return out

    @property
    def is_wildcard(self) -> bool:
        return self.key in (None, "") and self.operator == "Exists"


@dataclass
class NodeScheduling:
    """Node scheduling inputs injected into component values (AICR ``--*-node-*`` flags).

    See :mod:`gpucluster.recipes.scheduling` and docs/overrides.md. Empty inputs inject nothing
    (except platform-derived defaults, e.g. the accelerated toleration derived from GPU
    pool taints).

    Attributes:
        accelerated_node_selector: labels GPU components' pods select (AICR
            ``--accelerated-node-selector``), written into the registry's accelerated
            ``nodeSelectorPaths``.
        accelerated_tolerations: tolerations of GPU components' pods (AICR
            ``--accelerated-node-toleration``), written into the accelerated ``tolerationPaths``.
        system_node_selector: labels the other components' pods select (AICR
            ``--system-node-selector``), written into the system ``nodeSelectorPaths``.
        system_tolerations: tolerations of the other components' pods (AICR
            ``--system-node-toleration``), written into the system ``tolerationPaths``.
        workload_gate_taint: taint rendered as ``key=value:Effect`` into the registry's
            ``taintStrPaths`` (AICR ``--workload-gate``); None leaves the chart default.
        node_count: estimated accelerated node count for ``nodeCountPaths`` (AICR
            ``--nodes``); None derives it from the GPU pools' node counts.
    """

    accelerated_node_selector: dict[str, str] = field(default_factory=dict)
    accelerated_tolerations: list[Toleration] = field(default_factory=list)
    system_node_selector: dict[str, str] = field(default_factory=dict)
    system_tolerations: list[Toleration] = field(default_factory=list)
    workload_gate_taint: Taint | None = None
    node_count: int | None = None


@dataclass
class Override:
    """One user override with provenance, applied in order.

    kind ``set``: ``path`` and scalar ``value``; kind ``values``: structured ``value`` (a dict)
    deep-merged at the component root (objects merge, lists/scalars replace, None deletes);
    kind ``variable``: value at ``path`` bound to a Terraform variable named ``value``.

    Attributes:
        component: component name or alias exactly as the user wrote it (resolved against
            the catalog by :func:`gpucluster.recipes.overrides.apply_overrides`).
        kind: ``set``, ``values`` or ``variable`` (above).
        path: dotted values path (``driver.enabled``) of ``set`` and ``variable``; "" for ``values``.
        value: the scalar (``set``), the mapping (``values``) or the Terraform variable name
            (``variable``).
        source: the file the override came from (cluster file or values file), or ``--set``.
        key: where inside that input, e.g. ``overrides.set[3]`` (used in error messages).
    """

    component: str
    kind: Literal["set", "values", "variable"]
    path: str = ""
    value: Any = None
    source: str = ""
    key: str = ""


@dataclass
class ExistingCluster:
    """How the runtime stack reaches a cluster gpucluster does not create.

    Attributes:
        kubeconfig_path: the kubeconfig file (absolute or ``~/``), default ``~/.kube/config``.
        context: the kubeconfig context; None uses its current context.
    """

    kubeconfig_path: str = "~/.kube/config"
    context: str | None = None


@dataclass(frozen=True)
class ChartMirrors:
    """Where a cluster's charts are fetched from instead of their upstream repositories
    (cluster-file key ``charts``, :mod:`gpucluster.charts.mirrors`).

    Attributes:
        default: ``charts.mirror``: the repository every chart comes from unless ``by_upstream``
            names its upstream (``oci://myacr.azurecr.io/helm``), or None.
        by_upstream: ``charts.mirrors``: ``(upstream URL, mirror URL)`` pairs, sorted; URLs
            without a trailing ``/``.
        key: where it was set, ``charts`` or ``clusters[<i>].charts`` (for errors).
    """

    default: str | None = None
    by_upstream: tuple[tuple[str, str], ...] = ()
    key: str = field(default="charts", compare=False)


@dataclass(frozen=True)
class SchedulerProfile:
    """One scheduler profile of the cluster file's ``schedulerProfiles`` (AKS only;
    :mod:`gpucluster.inputs.scheduler_profiles`).

    Attributes:
        scheduler_name: the ``schedulerName`` pods pick the profile with.
        preset: ``gpu-binpacking`` / ``cpu-binpacking``, or None for a profile written out.
        profile: the upstream ``KubeSchedulerProfile`` (``kubescheduler.config.k8s.io/v1``) as
            rendered into the ``SchedulerConfiguration``'s ``rawConfig``: ``schedulerName``,
            ``plugins``, ``pluginConfig`` (plain data).
        training_runtime: the Kubeflow Trainer's ``torch-distributed`` ClusterTrainingRuntime
            names this profile's ``schedulerName`` (cluster file ``trainingRuntime: true``; at
            most one profile).
    """

    scheduler_name: str
    preset: str | None
    profile: dict[str, Any]
    training_runtime: bool = False


@dataclass(frozen=True)
class DriverUpgradePolicy:
    """The GPU Operator's driver upgrade policy of a cluster (cluster file ``driverUpgradePolicy``,
    docs/cluster-file.md): what the operator's upgrade controller does on each GPU node when the
    driver it installs changes. Plain data; the ClusterPolicy's ``spec.driver.upgradePolicy``
    (chart values ``driver.upgradePolicy.*``) is written from it by
    :func:`gpucluster.recipes.driver_upgrade.chart_values`.

    The defaults strand no job: one node at a time, GPU pods no controller recreates are not
    deleted (``podDeletion.force`` false), the node is drained with a timeout instead of
    forever, emptyDir data is not deleted. Field meanings are the GPU Operator's ("GPU Driver
    Upgrades",
    https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-driver-upgrades.html;
    chart ``deployments/gpu-operator/values.yaml`` ``driver.upgradePolicy``, v25.10.1 to v26.7.0).

    Attributes:
        auto_upgrade: the upgrade controller upgrades nodes (``autoUpgrade``); false: every other
            field is ignored and each node's driver pod must be deleted by hand.
        max_parallel_upgrades: nodes upgraded at once; 0 means no limit (every node at once).
        max_unavailable: nodes that may be unavailable during the upgrade: an integer >= 1 or a
            percentage string ``"1%"`` .. ``"100%"`` of the GPU nodes, rounded up.
        wait_timeout_seconds: ``waitForCompletion.timeoutSeconds``: how long to wait for the pods
            ``wait_pod_selector`` selects to finish before deleting GPU pods; 0 = forever.
        wait_pod_selector: ``waitForCompletion.podSelector``, an equality-based label selector
            (``app=trainer,team!=ops``); ``""`` = do not wait.
        pod_deletion_force: ``podDeletion.force``: also delete GPU pods no controller recreates.
        pod_deletion_timeout_seconds: ``podDeletion.timeoutSeconds`` (0 = forever).
        pod_deletion_delete_empty_dir: ``podDeletion.deleteEmptyDir``: also delete GPU pods with
            emptyDir volumes (their data is lost).
        drain_enable: ``drain.enable``: drain the node before the driver reload.
        drain_force: ``drain.force``: also evict pods no controller recreates.
        drain_pod_selector: ``drain.podSelector``: only the pods it selects are drained (``""`` = all).
        drain_timeout_seconds: ``drain.timeoutSeconds`` (0 = forever).
        drain_delete_empty_dir: ``drain.deleteEmptyDir``.
    """

    auto_upgrade: bool = True
    max_parallel_upgrades: int = 1
    max_unavailable: int | str = "25%"
    wait_timeout_seconds: int = 0
    wait_pod_selector: str = ""
    pod_deletion_force: bool = False
    pod_deletion_timeout_seconds: int = 300
    pod_deletion_delete_empty_dir: bool = False
    drain_enable: bool = True
    drain_force: bool = False
    drain_pod_selector: str = ""
    drain_timeout_seconds: int = 300
    drain_delete_empty_dir: bool = False


@dataclass
class ClusterSpec:
    """One validated cluster description.

    Attributes:
        name: DNS-1123 label, unique in the file; stacks are ``<name>-cluster`` / ``<name>-runtime``.
        criteria: recipe query. ``criteria.service`` picks the platform plugin.
        profile: profile choices, e.g. ``{"gpuStack": "azure-managed"}`` (AKS default).
        region: cloud region (AKS location), platform default when omitted.
        kubernetes_version: ``"1.34"`` (minor, string).
        pools: node pools to provision (empty for platforms where the cluster exists).
        existing: set when the runtime stack targets an existing cluster via kubeconfig.
        overrides: user overrides in the order given.
        scheduling: node scheduling inputs.
        recipe_file: path of an AICR RecipeResult to use instead of resolving criteria.
        version_skew: what ``recipe_file``'s chart pins other than the catalog's do: ``warning``
            (default), ``error`` or ``upgrade`` (:data:`gpucluster.inputs.config.VERSION_SKEW_LEVELS`).
        settings: platform-specific inputs (e.g. NVKE rails), validated by the plugin.
        source: the file this spec came from (``<embedded default>`` otherwise).
        backend: Terraform backend of the cluster's stacks: ``None`` = local state files
            (default), or the normalized ``cloud`` mapping ``{"type": "cloud", "organization",
            "workspacePrefix", "hostname", "project"}`` or ``azurerm`` mapping ``{"type":
            "azurerm", "storageAccountName", "containerName", "keyPrefix", "useAzureadAuth", ...}``
            (:mod:`gpucluster.inputs.backends`).
        index: the cluster's position in the file's ``clusters`` list (set by the loader; None
            for a spec built in code). The core makes error keys absolute with it
            (:func:`absolute_key`: ``pools[1].gpu`` -> ``clusters[3].pools[1].gpu``); plugins
            raise keys relative to the cluster document and never need it.
        backend_key: where ``backend`` was set: ``"backend"`` (the file-wide default) or
            ``"clusters[<index>].backend"``; None for a spec built in code.
        chart_mirrors: where the cluster's charts are fetched from (:class:`ChartMirrors`); None:
            their upstream repositories.
        image_mirror: the cluster file's ``images.mirror`` (``myacr.azurecr.io/mirror``): every
            image reference of the rendered releases is rewritten to it
            (:mod:`gpucluster.charts.imagemirror`); None: images come from their own registries.
        driver_upgrade_policy: the cluster file's ``driverUpgradePolicy``; None when not written
            (the defaults of :class:`DriverUpgradePolicy` apply:
            :func:`gpucluster.recipes.driver_upgrade.policy_of`).
        scheduler_profiles: the cluster file's ``schedulerProfiles`` (AKS), in file order; empty
            when not written (no ``SchedulerConfiguration`` is rendered).
    """

    name: str
    criteria: Criteria
    profile: dict[str, str] = field(default_factory=dict)
    region: str | None = None
    kubernetes_version: str = "1.34"
    pools: list[NodePool] = field(default_factory=list)
    existing: ExistingCluster | None = None
    overrides: list[Override] = field(default_factory=list)
    scheduling: NodeScheduling = field(default_factory=NodeScheduling)
    recipe_file: str | None = None
    version_skew: str = "warning"
    settings: dict[str, Any] = field(default_factory=dict)
    source: str = "<embedded default>"
    backend: dict[str, Any] | None = None
    index: int | None = field(default=None, compare=False, repr=False)
    backend_key: str | None = field(default=None, compare=False, repr=False)
    chart_mirrors: ChartMirrors | None = None
    image_mirror: str | None = None
    driver_upgrade_policy: DriverUpgradePolicy | None = None
    scheduler_profiles: tuple[SchedulerProfile, ...] = ()


CLUSTER_KEYS = (
    "name",
    "criteria",
    "recipe",
    "versionSkew",
    "profile",
    "region",
    "kubernetesVersion",
    "pools",
    "existing",
    "overrides",
    "scheduling",
    "settings",
    "driverUpgradePolicy",
    "schedulerProfiles",
    "backend",
    "charts",
    "images",
    "fleet",
)
"""The keys of one ``clusters[i]`` entry of the cluster file (docs/cluster-file.md), in the order
``allowed:`` lists them. A key whose first segment is one of them names a place in the cluster
document (:func:`absolute_key`); no catalog component's values start with one (a test checks)."""

_KEY_ROOT = re.compile(r"[^.\[]*")

_Located = TypeVar("_Located", bound="Problem | Finding")


def absolute_key(cluster: ClusterSpec, key: str | None, *, file: str | None = None) -> str | None:
    """``key`` as the cluster file spells it: ``clusters[<cluster.index>].<key>``.

    The one place error keys are made absolute. A key is relative to the cluster document -- what
    plugins raise and return (``pools[1].gpu``, ``settings.rails[0].subnet``, ``kubernetesVersion``)
    and what the core's post-parse checks name -- when its first segment is one of
    :data:`CLUSTER_KEYS` and it is about the cluster's own file (``file`` is None, empty or
    ``cluster.source``). Any other key is returned as it is: an absolute one (``clusters[0]...``,
    ``fleet.groups``), a values path of a component (``driver.enabled``), a path in another file
    (a RecipeResult's ``componentRefs[3].version``, a catalog overlay's ``spec.base``), an
    environment variable (``NODE_OPTIONS``) or a flag (``--set[0]``). Unchanged too when the
    spec's index is unknown (None: built in code, not read from a file).
    """
    if not key or cluster.index is None or file not in (None, "", cluster.source):
        return key
    root = _KEY_ROOT.match(key)  # always matches (possibly empty)
    if root is None or root.group() not in CLUSTER_KEYS:
        return key
    return f"clusters[{cluster.index}].{key}"


def absolute_keys(cluster: ClusterSpec, located: Sequence[_Located]) -> list[_Located]:
    """:func:`absolute_key` applied to every :class:`~gpucluster.errors.Problem` or
    :class:`Finding` of ``located`` (copies; a problem without a file that gets an absolute key
    names ``cluster.source``)."""
    out = []
    for item in located:
        file = getattr(item, "file", None)
        key = absolute_key(cluster, getattr(item, "key", None), file=file)
        if key is not None and key != item.key:
            if file or isinstance(item, Finding):
                item = dataclasses.replace(item, key=key)
            else:
                item = dataclasses.replace(item, key=key, file=cluster.source)
        out.append(item)
    return out


# --------------------------------------------------------------------------- effective components


@dataclass(frozen=True)
class VariableHash:
    """A Helm value Terraform computes at plan time: ``sha256(jsonencode([base, var.v1, ...]))``.

    Used where a hash must follow install-time Terraform variables (a gate's ``gatedHash``, the DRA
    kubelet plugin's driver-identity annotation): the synthesized ``set`` entry holds the
    expression, so ``terraform plan -var v1=...`` shows the value -- and the release -- changing.
    :func:`gpucluster.hashing.evaluate_variable_hash` computes the same value in Python for the
    variables' defaults (what the values document carries).

    Attributes:
        base: sha256 hex of everything synth knows (the static part).
        variables: ``(Terraform variable name, default or None)`` pairs, sorted by name.
    """

    base: str
    variables: tuple[tuple[str, Any], ...] = ()


@dataclass
class Component:
    """A component with its final effective values (after overrides, scheduling, plugins).

    Attributes:
        ref: the recipe's reference (chart, version, namespace, dependencies).
        values: the Helm values installed.
        terraform_variables: dotted values path -> name of the Terraform variable bound there
            (``variable`` overrides).
        variable_hashes: dotted values path -> :class:`VariableHash` for values Terraform
            computes from variables of this or another component (the DRA driver-identity
            annotation).
    """

    ref: ComponentRef
    values: dict[str, Any]
    terraform_variables: dict[str, str] = field(
        default_factory=dict
    )  # dotted path -> tf variable name
    variable_hashes: dict[str, VariableHash] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.ref.name


# --------------------------------------------------------------------------- policy


Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Finding:
    """One policy finding on the final effective values.

    Attributes:
        id: stable id, e.g. ``GPU-ADVERTISER``.
        severity: ``error`` stops synthesis (exit 2); ``warning``/``info`` print only.
        cluster / component / key: where (key is a dotted values path or cluster-file key).
        message: what is wrong and why it breaks GPUs.
        fix: what to change.
        file: the input file the finding is about when it is not the cluster file (a
            RecipeResult file; ``key`` is then a path inside it, ``componentRefs[3].version``).
    """

    id: str
    severity: Severity
    cluster: str
    component: str
    key: str
    message: str
    fix: str
    file: str = ""

    def render(self) -> str:
        """One line: ``severity[id] file=… cluster=… component=… key=…: message fix: …`` (only the
        location parts the finding has), made by :func:`gpucluster.errors.format_line`."""
        from gpucluster.errors import FINDING_TEXT_LIMIT, format_line

        return format_line(
            self.severity,
            self.id,
            self.message,
            message_limit=FINDING_TEXT_LIMIT,
            where=(
                ("file", self.file),
                ("cluster", self.cluster),
                ("component", self.component),
                ("key", self.key),
            ),
            fix=self.fix,
        )


# --------------------------------------------------------------------------- gates


GateKind = Literal["resource-condition", "crd-established", "rollout", "min-version"]


@dataclass
class GateSpec:
    """A readiness gate as data (declared by plugins through the SDK, hook ``gpucluster_gates``).

    A gate is installed as a Helm release of a generated chart (ServiceAccount, least-privilege
    RBAC, and a Job that polls the condition with ``kubectl get``); releases that need
    ``component`` ready depend on the gate instead. See docs/gates.md.

    Attributes:
        name: unique per cluster, DNS-1123 label of at most 53 characters (it is also the Helm
            release name): ``gpu-operator-clusterpolicy-ready``.
        component: the gated component (its content hash re-runs the gate on change).
        kind:
          * ``resource-condition``: the object ``name_of_object`` of ``api_version``/``resource``
            (``kind_name``), or, when ``name_of_object`` is None, *every* object of that type
            (at least one must exist), has ``jsonpath`` equal to ``value`` (e.g. ClusterPolicy
            ``{.status.state}`` == ``ready``). ``namespace`` None means the type is
            cluster-scoped.
          * ``crd-established``: CRD ``name_of_object`` (``ippools.nv-ipam.nvidia.com``) is
            created within ``create_timeout_seconds``, then Established within
            ``timeout_seconds``. Source: AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup).
          * ``rollout``: DaemonSet/Deployment ``kind_name``/``name_of_object`` in ``namespace``
            rolled out: observed generation current, every desired pod updated and available,
            and at least ``min_ready`` pods desired (guards a vacuous pass on zero nodes).
          * ``min-version``: the rollout above, and the image tag of container ``container``
            in the workload's pod template is at least version ``value`` (``0.5.1``; a leading
            ``v`` is ignored, a pre-release sorts before its release).
        api_version: ``group/version`` (``nvidia.com/v1``) or ``v1`` (resource-condition).
        resource: plural resource name used for RBAC and ``kubectl get`` (``clusterpolicies``).
        kind_name: Kind, for messages (``ClusterPolicy``); ``DaemonSet``/``Deployment`` for
            rollout and min-version.
        name_of_object: the object waited for (``cluster-policy``); None: every object of the type
            (resource-condition only).
        namespace: the object's namespace; None for a cluster-scoped type.
        jsonpath: resource-condition: the ``kubectl get -o jsonpath`` expression read
            (``{.status.state}``).
        value: resource-condition: the value ``jsonpath`` must equal (``ready``); min-version: the
            lowest image version (``0.5.1``).
        container: min-version: the container whose image tag is compared.
        timeout_seconds: wait budget of the condition in seconds; None = the kind's default
            (:data:`gpucluster.charts.gates.DEFAULT_TIMEOUTS`).
        create_timeout_seconds: crd-established only: budget for the CRD to appear (seconds).
        min_ready: rollout/min-version: minimum desired pods (default 1; 0 accepts none).
        poll_seconds: seconds between checks (default 10).
        description: one line for logs and docs (defaults to a generated description).
        after: extra component names or gate names the gate must run after (beyond ``component``).
        before: components that must wait for this gate (default: dependents of ``component``).
        supplied_by: a catalog manifest template (``components/<c>/manifests/x.yaml.j2``) that
            renders the object a ``resource-condition`` gate waits for; when no release of the stack
            renders one (a RecipeResult that lists no such manifest), the core adds it to
            ``component``'s manifests (info ``GATE-OBJECT-SUPPLIED``). '' = the platform supplies
            none: such a stack is refused (``GATE-NO-OBJECT``, :func:`gpucluster.charts.gates.check_gate_objects`).
    """

    name: str
    component: str
    kind: GateKind
    api_version: str = ""
    resource: str = ""  # plural resource for RBAC, e.g. "clusterpolicies"
    kind_name: str = ""  # Kind, e.g. "ClusterPolicy"
    name_of_object: str | None = None
    namespace: str | None = None
    jsonpath: str = ""
    value: str = ""
    container: str = ""
    timeout_seconds: int | None = None
    create_timeout_seconds: int = 600
    after: list[str] = field(default_factory=list)
    before: list[str] | None = None
    min_ready: int = 1
    poll_seconds: int = 10
    description: str = ""
    supplied_by: str = ""


# --------------------------------------------------------------------------- runtime plan


@dataclass
class LocalChart:
    """A generated Helm chart (manifest chart or gate chart), fully rendered, as files.

    Attributes:
        name: the chart's name (``Chart.yaml`` ``name``).
        version: the chart's version (``Chart.yaml`` ``version``).
        files: chart-relative path (``Chart.yaml``, ``templates/000-foo.yaml``) -> text.
        content_hash: the sha256 of the sorted files; it is fed into release values so
            ``helm_release`` changes when content changes.
    """

    name: str
    version: str
    files: dict[str, str]
    content_hash: str


NodeKind = Literal["chart", "crds", "pre-manifests", "manifests", "gate", "teardown"]


@dataclass(frozen=True)
class CrdSource:
    """Where a CRD step (kind ``crds``) reads its CRDs at plan time: the owner's chart at its pinned
    version, rendered by Terraform's ``helm_template`` data source with ``include_crds``.

    Attributes:
        repository / chart / version: the owner component's chart (as its ``chart`` node).
        values: the owner's effective values (subchart conditions decide which subchart CRDs ship).
        kube_version: ``"1.34.0"``, the cluster's Kubernetes version (charts' ``kubeVersion`` checks).
        names: the CRDs the owner owns here (sorted; the step fails when one is missing).
    """

    repository: str
    chart: str
    version: str
    values: Mapping[str, Any]
    kube_version: str
    names: tuple[str, ...]


@dataclass
class PlanNode:
    """One ``helm_release`` of the runtime stack.

    Attributes:
        id: unique, DNS-1123 (``gpu-operator``, ``gpu-operator-manifests``, ``gate-…``); also the
            release name and the construct id.
        kind: what the release installs.
        component: the catalog component it belongs to.
        namespace: release namespace (created by the release).
        repository / chart / version: remote chart (kind ``chart``).
        local_chart: generated chart (other kinds).
        values: release values, rendered by the constructs layer as ONE deterministic YAML doc.
        depends_on: ids of nodes that must be applied first (sorted, no duplicates).
        wait_for_jobs: set for gates.
        timeout_seconds: Helm operation timeout.
        terraform_variables: dotted values path -> Terraform variable name (install-time values).
        variable_hashes: dotted values path -> :class:`VariableHash` (a ``set`` entry Terraform
            computes from variables; the values document holds its value at the defaults).
        crd_source: kind ``crds`` only: the chart whose CRDs Terraform feeds into the step.
    """

    id: str
    kind: NodeKind
    component: str
    namespace: str
    repository: str = ""
    chart: str = ""
    version: str = ""
    local_chart: LocalChart | None = None
    values: dict[str, Any] = field(default_factory=dict)
    depends_on: list[str] = field(default_factory=list)
    wait_for_jobs: bool = False
    timeout_seconds: int = 900
    terraform_variables: dict[str, str] = field(default_factory=dict)
    variable_hashes: dict[str, VariableHash] = field(default_factory=dict)
    crd_source: CrdSource | None = None


@dataclass
class RuntimePlan:
    """Everything the runtime stack of one cluster installs, as plain data.

    Attributes:
        cluster: the prepared cluster.
        recipe: the resolved recipe.
        components: component name -> :class:`Component` (effective values).
        nodes: the releases to install, in deterministic order; their ``depends_on`` edges form a
            DAG (``node(id)`` finds one).
        gates: the readiness gates of the plan (each also a node).
        findings: the warnings and info that did not stop synthesis.
    """

    cluster: ClusterSpec
    recipe: Recipe
    components: dict[str, Component]
    nodes: list[PlanNode]
    gates: list[GateSpec] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def node(self, node_id: str) -> PlanNode:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def edges(self) -> list[tuple[str, str]]:
        """``(node, dependency)`` pairs, sorted."""
        return sorted((n.id, d) for n in self.nodes for d in n.depends_on)


@dataclass(frozen=True)
class Platform:
    """A platform (AICR ``service``) a plugin serves.

    Attributes:
        service: criteria value, e.g. ``"aks"``.
        display_name: human name, e.g. ``"Azure Kubernetes Service"``; without the cluster kind
            (``gpucluster plugins`` adds ``(provisions clusters)`` / ``(existing clusters)``).
        accelerators / oses / intents / platforms: criteria values recipes exist for
            (``intents``: ``training``/``inference``; ``platforms``: ``any``, ``kubeflow``, ``dynamo``…).
        provisions_cluster: True when gpucluster creates the cluster (``<name>-cluster`` stack);
            False when the cluster exists and only the runtime stack is produced.
        min_kubernetes: lowest Kubernetes minor accepted (``"1.34"``: DRA GA, AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md)).
        provider_id_prefix: node ``spec.providerID`` scheme identifying the platform
            (``"azure://"``, ``"nico://"``), used by ``gpucluster detect``.
        profiles: profile name -> (default value, allowed values); the core refuses other
            names and values before ``gpucluster_prepare_cluster`` runs.
        settings: the platform's own top-level ``settings`` keys; the core refuses any other key
            (besides :data:`gpucluster.sdk.CORE_SETTING_KEYS`) before ``gpucluster_prepare_cluster``
            runs. Nested keys and values are the plugin's to check.
        gpu_taints: taints (``key=value:Effect`` or ``key:Effect``) the platform's GPU nodes carry
            when the cluster file declares no GPU pools and no keyed
            ``scheduling.accelerated.tolerations``; ``gpucluster lint`` checks every per-node
            agent tolerates them (``lint.placement-gpu``). Default ``()``: nothing known.
        default_region: the region (cloud location) a cluster of this platform gets when its
            entry names none, written by the plugin's ``gpucluster_prepare_cluster``; for AKS
            also the default location of an Azure Kubernetes Fleet Manager fleet of its
            clusters (``fleet.location``). Default None: the platform has no region to default.
    """

    service: str
    display_name: str
    accelerators: tuple[str, ...] = ()
    oses: tuple[str, ...] = ()
    intents: tuple[str, ...] = ("training", "inference")
    platforms: tuple[str, ...] = ("any",)
    provisions_cluster: bool = False
    min_kubernetes: str = "1.34"
    provider_id_prefix: str | None = None
    profiles: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    settings: tuple[str, ...] = ()
    gpu_taints: tuple[str, ...] = ()
    default_region: str | None = None


@dataclass
class Manifest:
    """Kubernetes objects a plugin renders for a component.

    Attributes:
        component: the component the objects belong to (a manifest-only component may be
            declared in the catalog with ``type: Manifest``).
        phase: ``"pre"`` installs before the component's chart, ``"post"`` after it (custom
            resources whose CRD the chart installs must be ``post``).
        name: file stem inside the generated chart (``nic-cluster-policy``).
        documents: fully rendered objects (plain dicts), no templating left.
    """

    component: str
    phase: Literal["pre", "post"]
    name: str
    documents: list[dict[str, Any]]


# --------------------------------------------------------------------------- cluster connection
# What ``gpucluster_cluster_stack`` returns: how the runtime stack reaches a cluster. Used by the
# stacks and constructs only, never by the core's pipeline.


@dataclass(frozen=True)
class ExecAuth:
    """A Kubernetes client-go credential plugin (kubeconfig ``users[].user.exec``).

    The Helm/Kubernetes providers run ``command args...`` with ``env`` added and read an
    ``ExecCredential`` (``client.authentication.k8s.io/<api_version>``) from its stdout, on the
    machine that runs ``terraform`` (a laptop, a CI runner, a Terraform Cloud agent). Nothing is
    stored in state. Example (AKS with Entra ID: kubelogin, https://github.com/Azure/kubelogin)::

        ExecAuth(command="kubelogin",
                 args=("get-token", "--login", "azurecli", "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630"))

    Attributes:
        command: executable name or path (looked up on ``PATH``).
        args: its arguments, in order.
        env: extra environment variables (name -> value), sorted when rendered.
        api_version: ``client.authentication.k8s.io/v1beta1`` (default) or ``.../v1``.
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    api_version: str = "client.authentication.k8s.io/v1beta1"


@dataclass
class ClusterConnection:
    """How the runtime stack's Helm/Kubernetes providers reach a cluster.

    Exactly one way:

    * ``kubeconfig_path`` (+ optional ``context``): existing clusters;
    * ``host`` + ``cluster_ca_certificate`` + one credential: ``exec`` (an :class:`ExecAuth`,
      e.g. kubelogin for Entra ID: nothing secret crosses stacks), ``token`` (a bearer token
      expression, e.g. from a data source of the runtime stack), or ``client_certificate`` +
      ``client_key`` (PEM; admin-equivalent on most platforms, avoid across stacks).

    ``host``/``cluster_ca_certificate``/``token``/certificates are Terraform expressions (tokens)
    or strings, typically cross-stack references to the cluster stack's outputs. Values are
    opaque to the core; :meth:`auth` names the credential shape.

    Attributes:
        kubeconfig_path: a kubeconfig file (existing clusters).
        context: its context; None uses the current one.
        host: the API server URL.
        client_certificate: PEM client certificate (with ``client_key``).
        client_key: PEM client key (with ``client_certificate``).
        cluster_ca_certificate: PEM CA bundle of the API server.
        token: a bearer token.
        exec: an exec credential plugin (:class:`ExecAuth`).
    """

    kubeconfig_path: str | None = None
    context: str | None = None
    host: Any = None
    client_certificate: Any = None
    client_key: Any = None
    cluster_ca_certificate: Any = None
    token: Any = None
    exec: ExecAuth | None = None

    def auth(self) -> Literal["kubeconfig", "exec", "token", "client_certificate", "none"]:
        """The credential shape: ``kubeconfig``, ``exec``, ``token``, ``client_certificate`` or ``none``.

        Raises:
            ValueError: more than one credential, an ``exec`` that is not an :class:`ExecAuth`, or
                a certificate without its key (the message names the fields).
        """
        given = [
            name
            for name, value in (
                ("kubeconfig", self.kubeconfig_path),
                ("exec", self.exec),
                ("token", self.token),
                ("client_certificate", self.client_certificate),
            )
            if value is not None and value != ""
        ]
        if len(given) > 1:
            raise ValueError(
                f"ClusterConnection has more than one credential ({', '.join(given)}); give exactly one"
            )
        if self.exec is not None and not isinstance(self.exec, ExecAuth):
            raise ValueError(
                f"ClusterConnection.exec must be an ExecAuth, not {type(self.exec).__name__}"
            )
        if (self.client_certificate is None) != (self.client_key is None):
            raise ValueError("ClusterConnection.client_certificate and client_key go together")
        return given[0] if given else "none"  # type: ignore[return-value]


def scalar_type(value: Any) -> str | None:
    """Terraform variable type of a values leaf or a variable default: ``bool`` / ``number`` /
    ``string``; None for a list or map (those cannot be bound to a variable).

    The one rule for both sides: the core's ``helm_release.set`` entry type
    (:func:`gpucluster.values.set_entries`) and the constructs' variable type
    (``gpucluster_cdk.constructs_lib.helm``), which imports only plain types from here.
    """
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return None

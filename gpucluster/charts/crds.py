"""CRD ownership across a stack and how each owner's CRDs reach a new chart version.

Helm installs a chart's ``crds/`` on first install only and never upgrades or deletes them
(hashicorp/terraform-provider-helm#976, AICR#2843): bumping an operator whose CRDs live only in
``crds/`` leaves the old schema, new fields are pruned and the operator fails. The catalog
registry says which CRDs each component owns (``crds``, :class:`gpucluster.recipes.catalog.CrdSpec`); the
load refuses a CRD two components own (:func:`gpucluster.recipes.catalog.check_crd_ownership`).

``computedomains.resource.nvidia.com`` / ``computedomaincliques.resource.nvidia.com``: shipped by
both gpu-operator >= v26.7.0 (``crds/``) and the DRA driver chart; the copies disagree
(``spec.numNodes`` required vs optional, AICR#2546/#2715). Owner: ``nvidia-dra-driver-gpu`` -- its
controller and kubelet plugin are what serve ComputeDomains, so the schema must be the one of the
DRA driver version installed; gpu-operator's own CRD hook (``operator.upgradeCRD``) does not
touch them, so nothing flips them back. gpu-operator lists them under ``alsoShips`` and becomes
their owner only in a stack without the DRA driver (its copy is then the only one).
See docs/upgrading.md, "CRD ownership".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpucluster.charts.jobchart import HookJob, gate_image, render_job_chart, sentinel
from gpucluster.model import Component, LocalChart


def _catalog():
    from gpucluster.recipes.catalog import load_catalog

    return load_catalog()


def _ships_at(version: str, since: str | None) -> bool:
    from gpucluster.versions import version_in_range

    return since is None or version_in_range(version, f">={since}")


def crd_owners(components: Mapping[str, Component], catalog: Any = None) -> dict[str, str]:
    """CRD name -> owning enabled component, for one stack.

    An enabled component owns what its registry entry lists in ``crds.owns`` and
    ``crds.createsAtRuntime``; a CRD that no enabled component owns goes to the first enabled
    component (by name) whose chart ships it (``crds.alsoShips``, from ``since`` on).
    Components without a registry entry (plugin-generated ones) own nothing.
    """
    catalog = catalog or _catalog()
    owners: dict[str, str] = {}
    for name in sorted(components):
        entry = catalog.components.get(name)
        if entry is None:
            continue
        for crd in (*entry.crds.owns, *entry.crds.creates_at_runtime):
            owners[crd] = name
    for name in sorted(components):
        entry = catalog.components.get(name)
        if entry is None:
            continue
        for crd, since in entry.crds.also_ships:
            if crd not in owners and _ships_at(components[name].ref.version, since):
                owners[crd] = name
    return dict(sorted(owners.items()))


def owned_crds(component: str, owners: Mapping[str, str]) -> list[str]:
    """The CRDs ``component`` owns in ``owners`` (sorted)."""
    return sorted(crd for crd, owner in owners.items() if owner == component)


def upgrade_mode(component: str, catalog: Any = None) -> str:
    """The registry's ``crds.upgrade`` of ``component`` (``templates`` when it declares none)."""
    entry = (catalog or _catalog()).components.get(component)
    return entry.crds.upgrade if entry is not None else "templates"


def crd_upgrade_path(component: Component, old_version: str, new_version: str) -> str:
    """One line: how the owner's CRDs of ``new_version`` reach the cluster before the operator."""
    mode = upgrade_mode(component.name)
    if mode == "chart":
        return f"the {component.ref.chart} chart's own pre-upgrade hook applies its CRDs of {new_version}"
    if mode == "templates":
        return f"the CRDs are templates of the {component.ref.chart} chart: helm upgrade updates them to {new_version}"
    return (
        f"gpucluster's CRD step ({component.name}-crds) applies the crds/ of {component.ref.chart} {new_version} "
        "server-side and waits for Established before the operator upgrades"
    )


# --------------------------------------------------------------------------- the CRD step

CRD_STEP_SUFFIX = "-crds"
"""Release id of a component's CRD step: ``<component>-crds``."""

CRD_STEP_VALUE_KEYS = ("image", "crdsGz", "crdsHash", "chartVersion")
"""The only release values the CRD step chart's templates read (``{{ .Values.<key> | quote }}``):
``crdsGz`` / ``crdsHash`` are computed by Terraform from the chart's CRDs at plan time."""

CRD_ESTABLISHED_TIMEOUT = 120
"""Seconds the step waits for each CRD to be Established after applying it (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup):
2 min, ``kubectl wait --for=condition=Established``)."""

CRD_STEP_DEADLINE = 600
"""``activeDeadlineSeconds`` of the step's Job (apply + every CRD's Established wait + image pull)."""

FIELD_MANAGER = "gpucluster-crds"

MAX_CRDS_GZ_BYTES = 700_000
"""Largest base64 gzip CRD bundle the step accepts (Terraform precondition). Helm keeps the release
-- values and manifest, so the bundle twice -- in one Secret of at most 1 MiB; kubeflow-trainer's
CRDs with its jobset subchart (3.2 MB of YAML) are ~420 kB here, the largest in the catalog."""


def crd_step_components(
    components: Mapping[str, Component], catalog: Any = None
) -> dict[str, list[str]]:
    """``component -> owned CRD names`` for every enabled Helm component whose CRDs only its
    ``crds/`` carries (registry ``crds.upgrade: gpucluster``) and that owns at least one CRD here."""
    catalog = catalog or _catalog()
    owners = crd_owners(components, catalog)
    out: dict[str, list[str]] = {}
    for name in sorted(components):
        entry = catalog.components.get(name)
        if (
            entry is None
            or entry.crds.upgrade != "gpucluster"
            or components[name].ref.type != "Helm"
        ):
            continue
        names = [
            crd for crd in owned_crds(name, owners) if crd not in entry.crds.creates_at_runtime
        ]
        if names:
            out[name] = names
    return out


def crd_step_script(
    component: str, names: list[str], *, timeout: int = CRD_ESTABLISHED_TIMEOUT, poll: int = 5
) -> str:
    """POSIX shell of the step's Job: unpack the bundle, ``kubectl apply --server-side
    --force-conflicts`` it, then wait for every owned CRD to be Established.

    Exit 1 (the Job fails at once, naming the CRD) when the apply fails, when an owned CRD is not
    in the bundle, or when a CRD is not Established within ``timeout`` seconds.
    """
    import shlex

    crds = " ".join(shlex.quote(n) for n in names)
    return f"""\
set -u
step={shlex.quote(component + CRD_STEP_SUFFIX)}
log() {{ echo "crds $step: $*"; }}
now() {{ date +%s; }}
bundle="${{CRDS_DIR:-/crds}}/crds.yaml.gz"; work="${{TMPDIR:-/tmp}}/crds.yaml"
if ! gunzip -c "$bundle" > "$work"; then
  log "FAILED: the CRD bundle (ConfigMap key crds.yaml.gz) is not gzip data"; exit 1
fi
for crd in {crds}; do
  if ! grep -q "name: $crd\\$" "$work"; then
    log "FAILED: CRD $crd is not in the CRDs of chart version $CHART_VERSION (the registry says {component} owns it)"; exit 1
  fi
done
log "applying the CRDs of chart version $CHART_VERSION server-side (field manager {FIELD_MANAGER})"
if ! timeout 120 kubectl apply --server-side --force-conflicts --field-manager={FIELD_MANAGER} -f "$work"; then
  log "FAILED: kubectl apply --server-side was refused (see the line above)"; exit 1
fi
for crd in {crds}; do
  limit=$(( $(now) + {timeout} )); state=''
  while :; do
    state=$(timeout 30 kubectl get crd "$crd" -o 'jsonpath={{.status.conditions[?(@.type=="Established")].status}}' 2>/dev/null || true)
    [ "$state" = True ] && break
    if [ "$(now)" -ge "$limit" ]; then
      log "FAILED: CRD $crd is not Established within {timeout}s (Established=${{state:-<unset>}})"; exit 1
    fi
    sleep {poll}
  done
  log "Established: $crd"
done
log "ready: {len(names)} CRD(s) of chart version $CHART_VERSION applied and Established"
exit 0
"""


def render_crd_step_chart(cluster: Any, component: Component, names: list[str]) -> LocalChart:
    """The ``<component>-crds`` chart: ServiceAccount, ClusterRole(+Binding), the bundle ConfigMap
    and a ``post-install,post-upgrade`` hook Job (docs/upgrading.md, "The CRD step").

    RBAC: ``create`` on CustomResourceDefinitions (Kubernetes cannot restrict create by name) and
    ``get``/``patch`` on exactly ``names``. The bundle (``crdsGz``, base64 gzip) and its hash come
    from Terraform (:mod:`gpucluster_cdk.constructs_lib.helm`: ``helm_template`` of the component's chart at its
    pinned version with ``include_crds``), so a chart version bump changes the step, re-runs the
    Job, and the operator's release -- which depends on the step -- upgrades only afterwards.
    """
    step = component.name + CRD_STEP_SUFFIX
    group = "apiextensions.k8s.io"
    job = HookJob(
        name=step,
        namespace=component.ref.namespace,
        app="gpucluster-crds",
        rbac_name=f"gpucluster-crds-{component.name}",
        rules=[
            {"apiGroups": [group], "resources": ["customresourcedefinitions"], "verbs": ["create"]},
            {
                "apiGroups": [group],
                "resources": ["customresourcedefinitions"],
                "resourceNames": list(names),
                "verbs": ["get", "patch"],
            },
        ],
        container="apply",
        script=crd_step_script(component.name, list(names)),
        image=sentinel("image"),
        hook="post-install,post-upgrade",
        backoff_limit=2,
        active_deadline_seconds=CRD_STEP_DEADLINE,
        env=[{"name": "CHART_VERSION", "value": sentinel("chartVersion")}],
        limits={"cpu": "500m", "memory": "256Mi"},
        tmp_size="64Mi",
        mounts=[{"name": "crds", "mountPath": "/crds", "readOnly": True}],
        volumes=[{"name": "crds", "configMap": {"name": step}}],
        annotations={"gpucluster/crds-hash": sentinel("crdsHash")},
        pod_annotations={"gpucluster/crds-hash": sentinel("crdsHash")},
    )
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": step, "namespace": job.namespace, "labels": job.labels},
        "binaryData": {"crds.yaml.gz": sentinel("crdsGz")},
    }
    values = {
        "image": gate_image(cluster),
        "crdsGz": "",
        "crdsHash": "",
        "chartVersion": component.ref.version,
    }
    return render_job_chart(
        cluster,
        job,
        description=f"gpucluster CRD step: applies the CRDs of {component.ref.chart} server-side "
        "before it upgrades",
        before_job=[("configmap", [configmap])],
        values=values,
        app_version=component.ref.version,
    )


def crd_steps(
    cluster: Any, components: Mapping[str, Component], catalog: Any = None
) -> dict[str, tuple[LocalChart, Any]]:
    """``component -> (chart, CrdSource)`` of every CRD step the stack needs (:func:`crd_step_components`)."""
    from gpucluster.model import CrdSource

    out = {}
    for name, names in crd_step_components(components, catalog).items():
        comp = components[name]
        source = CrdSource(
            repository=comp.ref.source,
            chart=comp.ref.chart,
            version=comp.ref.version,
            values=comp.values,
            kube_version=f"{cluster.kubernetes_version}.0",
            names=tuple(names),
        )
        out[name] = (render_crd_step_chart(cluster, comp, names), source)
    return out


def grouped_objects(chart: LocalChart) -> Iterator[dict[str, Any]]:
    """The objects of ``chart``'s templates whose ``apiVersion`` names an API group
    (``group/version``: custom resources and the like; core ``v1`` objects are skipped), in file order.
    Each text is parsed once per process (:func:`gpucluster.charts.manifests.chart_documents`): the objects
    are shared, read them only."""
    from gpucluster.charts.manifests import chart_documents

    for path, text in sorted(chart.files.items()):
        if not path.startswith("templates/"):
            continue
        for doc in chart_documents(text):
            if isinstance(doc, dict) and "/" in str(doc.get("apiVersion", "")):
                yield doc


def check_custom_resource_order(cluster_name: str, nodes: list, owners: Mapping[str, str]) -> None:
    """Refuse a custom resource that could apply before its CRD is Established.

    For every object in a manifest chart (``pre-manifests`` / ``manifests`` release) whose API
    group has a CRD owned in this stack, the owner's CRDs must be in place first: the owner is the
    release's own component (post-manifests, or pre-manifests after the component's CRD step) or a
    component the release depends on, directly or through gates. Helm waits for the CRDs of a
    chart's ``crds/`` to be Established on install; the CRD step waits for them explicitly; an
    operator-created CRD is waited for by a ``crd-established`` gate (NVKE ``IPPool``).

    Raises:
        GpuclusterError: naming the release, the object's kind and name, the CRD owner and the fix.
    """
    from gpucluster.errors import GpuclusterError

    by_group: dict[str, set[str]] = {}
    for crd, owner in owners.items():
        by_group.setdefault(crd.split(".", 1)[1], set()).add(owner)
    by_id = {n.id: n for n in nodes}

    def ancestors(node_id: str) -> set[str]:
        seen: set[str] = set()
        todo = [node_id]
        while todo:
            for dep in by_id[todo.pop()].depends_on:
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return seen

    for node in nodes:
        if node.kind not in ("pre-manifests", "manifests") or node.local_chart is None:
            continue
        before = ancestors(node.id)
        components_before = {by_id[i].component for i in before}
        own_step = f"{node.component}{CRD_STEP_SUFFIX}" in before
        for doc in grouped_objects(node.local_chart):
            group = str(doc["apiVersion"]).split("/", 1)[0]
            for owner in sorted(by_group.get(group, ())):
                ok = owner in components_before or (
                    owner == node.component and (node.kind == "manifests" or own_step)
                )
                if not ok:
                    raise GpuclusterError(
                        f"release '{node.id}' applies {doc.get('kind')} '{(doc.get('metadata') or {}).get('name')}' "
                        f"({group}) but does not wait for '{owner}', which owns its CRD: it could apply before the "
                        "CRD is Established",
                        cluster=cluster_name,
                        component=node.component,
                        key="dependencyRefs",
                        fix=f"add '{owner}' to the dependencyRefs of '{node.component}' (or install the object as a "
                        "post manifest of its owner)",
                    )

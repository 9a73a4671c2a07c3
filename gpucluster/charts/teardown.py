"""Teardown guards: ``terraform destroy`` removes custom resources while their operators still run,
waits for their finalizers with a bounded timeout, and never strands a node cordoned by a
NodeMaintenance.

Terraform destroys in reverse dependency order, so a release that depends on another is destroyed
first. For every component whose releases apply custom resources (objects of an API group whose
CRD a component of the stack owns, :func:`gpucluster.charts.crds.crd_owners`) -- and for the owner of
``nodemaintenances.maintenance.nvidia.com`` -- the graph gets ``<component>-teardown``: a release
that depends on the component's last release (so it is destroyed before it, while the operator
and the CRs' owners are still installed) and holds only ServiceAccount/RBAC and a Helm
``pre-delete`` hook Job. On ``terraform destroy`` the Job

1. asks the API server to delete each custom resource (``kubectl delete --wait=false``), so each
   operator processes its finalizers (NicClusterPolicy: OFED/device-plugin DaemonSets removed;
   Skyhook: packages' finalizer; NodeMaintenance: node uncordoned);
2. polls until every one of them is gone and -- for the NodeMaintenance owner -- until no
   NodeMaintenance is left anywhere in the cluster;
3. when that does not happen within :data:`TEARDOWN_TIMEOUT` seconds, prints one ``STUCK`` line per
   object naming its kind, name, namespace, finalizers and node (``spec.nodeName``) and the manual
   recovery (docs/upgrading.md, "Teardown"), and exits 1: the uninstall fails, ``terraform destroy``
   stops with the operator still installed, and running it again keeps waiting.

The component's own releases then uninstall objects that are already gone (Helm ignores
NotFound). Nothing runs on install or upgrade.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from gpucluster.charts.crds import grouped_objects
from gpucluster.charts.jobchart import HookJob, gate_image, render_job_chart
from gpucluster.model import ClusterSpec, Component, PlanNode

TEARDOWN_SUFFIX = "-teardown"
TEARDOWN_TIMEOUT = 600
"""Seconds a teardown guard waits for the custom resources' finalizers (10 min: an OFED driver
container unloading its modules, one NodeMaintenance drain at a time on NVKE)."""

TEARDOWN_HELM_MARGIN = 120
"""Extra Helm timeout on top of the wait, so the Job's own STUCK lines are what fails the destroy."""

NODE_MAINTENANCE_CRD = "nodemaintenances.maintenance.nvidia.com"
NODE_MAINTENANCE_RESOURCE = "nodemaintenances.v1alpha1.maintenance.nvidia.com"


def _plural_of(kind: str, group: str, owned: Sequence[str]) -> str | None:
    """The plural (``nicclusterpolicies``) of ``kind`` among the CRD names of ``group``."""
    low = kind.lower()
    candidates = {low + "s", low + "es", (low[:-1] + "ies") if low.endswith("y") else None}
    for crd in owned:
        plural, _, g = crd.partition(".")
        if g == group and plural in candidates:
            return plural
    return None


def custom_resources(node: PlanNode, owners: Mapping[str, str]) -> list[dict[str, str]]:
    """The custom resources a manifest release applies: ``{kind, group, version, plural, name,
    namespace}`` per object whose group has a CRD owned in the stack (sorted)."""
    out: list[dict[str, str]] = []
    if node.local_chart is None:
        return out
    for doc in grouped_objects(node.local_chart):
        annotations = (doc.get("metadata") or {}).get("annotations") or {}
        if "helm.sh/hook" in annotations:
            continue  # hook objects are not release resources
        group, version = str(doc["apiVersion"]).split("/", 1)
        plural = _plural_of(str(doc.get("kind", "")), group, list(owners))
        if plural is None:
            continue
        meta = doc.get("metadata") or {}
        out.append(
            {
                "kind": str(doc["kind"]),
                "group": group,
                "version": version,
                "plural": plural,
                "name": str(meta.get("name", "")),
                "namespace": str(meta.get("namespace") or ""),
            }
        )
    return sorted(out, key=lambda o: (o["group"], o["kind"], o["namespace"], o["name"]))


RECOVERY = """\
recovery (docs/upgrading.md, "Teardown"): the operators that own these finalizers are still installed.
  kubectl describe <kind> <name> [-n <namespace>]      # why it is stuck: status, events, the operator's log
  fix the cause (an unreachable node, a drain blocked by a PodDisruptionBudget) and run terraform destroy again.
  Only if the operator cannot finish:
  kubectl patch <kind>.<group> <name> [-n <namespace>] --type=merge -p '{"metadata":{"finalizers":null}}'
  kubectl uncordon <node>                               # a node a NodeMaintenance left cordoned"""


def teardown_script(
    guard: str,
    objects: Sequence[Mapping[str, str]],
    *,
    node_maintenance: bool,
    timeout: int = TEARDOWN_TIMEOUT,
    poll: int = 10,
) -> str:
    """POSIX shell of a guard's pre-delete Job (see the module docstring). ``kubectl`` errors other
    than NotFound are retried until the deadline."""
    rows = "\n".join(
        f"{o['kind']}.{o['version']}.{o['group']}|{o['namespace']}|{o['name']}" for o in objects
    )
    recovery = "\n".join(f"log {shlex.quote(line)}" for line in RECOVERY.splitlines())
    nm = "1" if node_maintenance else ""
    return f"""\
set -u
guard={shlex.quote(guard)}
log() {{ echo "teardown $guard: $*"; }}
now() {{ date +%s; }}
objects={shlex.quote(rows)}
check_nm={nm}
log "deleting {len(objects)} custom resource(s) while their operators still run"
while IFS='|' read -r res ns name; do
  [ -n "$res" ] || continue
  if [ -n "$ns" ]; then
    timeout 30 kubectl delete "$res" "$name" -n "$ns" --wait=false --ignore-not-found >/dev/null 2>&1 || log "delete of $res $name not accepted yet (retrying)"
  else
    timeout 30 kubectl delete "$res" "$name" --wait=false --ignore-not-found >/dev/null 2>&1 || log "delete of $res $name not accepted yet (retrying)"
  fi
done <<EOF
$objects
EOF
stuck_now() {{
  stuck=''
  while IFS='|' read -r res ns name; do
    [ -n "$res" ] || continue
    if [ -n "$ns" ]; then
      out=$(timeout 30 kubectl get "$res" "$name" -n "$ns" --ignore-not-found -o 'jsonpath={{.kind}}|{{.metadata.namespace}}|{{.metadata.name}}|{{.metadata.finalizers}}|{{.spec.nodeName}}' 2>/dev/null) || out="$res|$ns|$name|<API error>|"
    else
      out=$(timeout 30 kubectl get "$res" "$name" --ignore-not-found -o 'jsonpath={{.kind}}|{{.metadata.namespace}}|{{.metadata.name}}|{{.metadata.finalizers}}|{{.spec.nodeName}}' 2>/dev/null) || out="$res||$name|<API error>|"
    fi
    [ -n "$out" ] && stuck="$stuck$out
"
  done <<EOF
$objects
EOF
  if [ -n "$check_nm" ]; then
    if out=$(timeout 30 kubectl get {NODE_MAINTENANCE_RESOURCE} -A -o "jsonpath={{range .items[*]}}NodeMaintenance|{{.metadata.namespace}}|{{.metadata.name}}|{{.metadata.finalizers}}|{{.spec.nodeName}}{{\\"\\\\n\\"}}{{end}}" 2>"${{TMPDIR:-/tmp}}/nm.err"); then
      stuck="$stuck$out"
    elif ! grep -q "doesn't have a resource type" "${{TMPDIR:-/tmp}}/nm.err" 2>/dev/null; then
      stuck="${{stuck}}NodeMaintenance|||<API error>|
"
    fi
  fi
  stuck=$(printf '%s' "$stuck" | grep -v '^$' || true)
}}
limit=$(( $(now) + {timeout} ))
while :; do
  stuck_now
  if [ -z "$stuck" ]; then
    log "done: every custom resource is gone{" and no NodeMaintenance is left" if node_maintenance else ""}"
    exit 0
  fi
  if [ "$(now)" -ge "$limit" ]; then
    log "FAILED: still present after {timeout}s:"
    while IFS='|' read -r kind ns name finalizers node; do
      log "STUCK $kind ${{ns:+$ns/}}$name finalizers=${{finalizers:-[]}} node=${{node:--}}"
    done <<EOF
$stuck
EOF
{recovery}
    exit 1
  fi
  sleep {poll}
done
"""


def _rbac_rules(
    objects: Sequence[Mapping[str, str]], node_maintenance: bool
) -> list[dict[str, Any]]:
    rules: dict[tuple[str, str], set[str]] = {}
    for o in objects:
        rules.setdefault((o["group"], o["plural"]), set()).add(o["name"])
    out: list[dict[str, Any]] = [
        {
            "apiGroups": [group],
            "resources": [plural],
            "resourceNames": sorted(names),
            "verbs": ["delete", "get"],
        }
        for (group, plural), names in sorted(rules.items())
    ]
    if node_maintenance:
        out.append(
            {
                "apiGroups": ["maintenance.nvidia.com"],
                "resources": ["nodemaintenances"],
                "verbs": ["list"],
            }
        )
    return out


def render_teardown_chart(
    cluster: ClusterSpec,
    component: Component,
    objects: Sequence[Mapping[str, str]],
    *,
    node_maintenance: bool,
) -> Any:
    """The ``<component>-teardown`` chart: ServiceAccount, ClusterRole(+Binding) with ``get``/``delete``
    on exactly the named objects (and ``list`` on NodeMaintenances), and the ``pre-delete`` Job."""
    guard = component.name + TEARDOWN_SUFFIX
    job = HookJob(
        name=guard,
        namespace=component.ref.namespace,
        app="gpucluster-teardown",
        rbac_name=f"gpucluster-teardown-{component.name}",
        rules=_rbac_rules(objects, node_maintenance),
        container="teardown",
        script=teardown_script(guard, objects, node_maintenance=node_maintenance),
        image=gate_image(cluster),
        hook="pre-delete",
        backoff_limit=0,
        active_deadline_seconds=TEARDOWN_TIMEOUT + 60,
        fail_fast=False,
    )
    return render_job_chart(
        cluster,
        job,
        description=f"gpucluster teardown guard of {component.name}: deletes its custom "
        "resources and waits for their finalizers before terraform destroy uninstalls it",
    )


def gate_objects(
    gates: Sequence[Any], owners: Mapping[str, str]
) -> dict[str, list[dict[str, str]]]:
    """Custom resources a component's *chart* creates, known from its readiness gates: a
    ``resource-condition`` gate on one named object of a CRD its own component owns (ClusterPolicy
    ``cluster-policy`` of gpu-operator). ``component -> objects``."""
    out: dict[str, list[dict[str, str]]] = {}
    for g in gates:
        if g.kind != "resource-condition" or not g.name_of_object or "/" not in g.api_version:
            continue
        group, version = g.api_version.split("/", 1)
        if owners.get(f"{g.resource}.{group}") != g.component:
            continue
        out.setdefault(g.component, []).append(
            {
                "kind": g.kind_name,
                "group": group,
                "version": version,
                "plural": g.resource,
                "name": g.name_of_object,
                "namespace": g.namespace or "",
            }
        )
    return out


def teardown_nodes(
    cluster: ClusterSpec,
    components: Mapping[str, Component],
    nodes: Sequence[PlanNode],
    owners: Mapping[str, str],
    gates: Sequence[Any] = (),
) -> list[PlanNode]:
    """The guard releases for ``nodes`` (see the module docstring), sorted by id.

    A guard depends on every release of its component that applies custom resources, on the
    component's chart when the chart itself creates one (:func:`gate_objects`) or when the
    component owns NodeMaintenances, so it is destroyed before them.
    """
    from_gates = gate_objects(gates, owners)
    by_component: dict[str, list[PlanNode]] = {}
    for node in nodes:
        by_component.setdefault(node.component, []).append(node)
    nm_owner = owners.get(NODE_MAINTENANCE_CRD)
    out: list[PlanNode] = []
    for name in sorted(by_component):
        releases = by_component[name]
        chart_objects = from_gates.get(name, [])
        objects = [
            o
            for n in releases
            if n.kind in ("pre-manifests", "manifests")
            for o in custom_resources(n, owners)
        ]
        objects = sorted(
            [*objects, *chart_objects],
            key=lambda o: (o["group"], o["kind"], o["namespace"], o["name"]),
        )
        node_maintenance = name == nm_owner
        if not objects and not node_maintenance:
            continue
        holders = sorted(
            {
                n.id
                for n in releases
                if n.kind in ("pre-manifests", "manifests") and custom_resources(n, owners)
            }
            | (
                {n.id for n in releases if n.kind == "chart"}
                if node_maintenance or chart_objects
                else set()
            )
        )
        chart = render_teardown_chart(
            cluster, components[name], objects, node_maintenance=node_maintenance
        )
        out.append(
            PlanNode(
                id=name + TEARDOWN_SUFFIX,
                kind="teardown",
                component=name,
                namespace=components[name].ref.namespace,
                local_chart=chart,
                values={"contentHash": chart.content_hash},
                depends_on=holders,
                timeout_seconds=TEARDOWN_TIMEOUT + TEARDOWN_HELM_MARGIN,
            )
        )
    return out

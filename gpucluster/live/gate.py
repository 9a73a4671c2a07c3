"""The in-cluster validation gate (cluster setting ``settings.validate: true``).

A final release of the runtime stack, ``gpucluster-validation``: a Job chart built by
:mod:`gpucluster.charts.jobchart` like the readiness gates (the pinned kubectl image or
``settings.gateImage``, non-root pod on the system nodes, the Job's NetworkPolicy, least-privilege
RBAC: get/list of exactly what it reads), installed after every other release with
``wait_for_jobs``, so ``apply`` ends only when the cluster validates. In a fleet, the runtime
stack's rollout marker depends on every release, this one included: the next update group waits
for the previous group's validation, not only its gates (docs/fleets.md).

What runs in the cluster, and why: the gate image is the pinned upstream kubectl image (a POSIX
shell, kubectl, coreutils; no Python, no jq), and pulling an image with gpucluster inside from a
registry gpucluster does not publish could not be pinned honestly. So the plan-derived checks
that read fields are rendered here, at synth, into kubectl JSONPath and shell, from the same
plan facts :mod:`gpucluster.live.checks` uses (:func:`gpucluster.live.nodes.gpu_node_groups`,
:func:`gpucluster.live.checks.advertiser`, the profile's RuntimeClass, the pinned driver, the
manifest charts' custom resources, the rails' IPPools):

* ``gpu-nodes``: each GPU node group has its node count of Ready nodes (at least one);
* ``gpu-advertiser``: every GPU node advertises through the plan's advertiser only (allocatable
  ``nvidia.com/gpu`` or devices in ResourceSlices of driver ``gpu.nvidia.com``, never both);
* ``gpu-count``: every GPU node advertises at least the GPUs of its VM size (or its
  ``nvidia.com/gpu.count`` label);
* ``runtime-class``: the profile's RuntimeClass exists with the handler of the same name;
* ``driver-version``: GPU nodes run the pinned driver (when the GPU Operator installs it);
* ``manifest-object`` / ``rail-ippool``: the manifest charts' custom resources and every rail's
  IPPool exist.

AICR's Chainsaw health checks (JMESPath) and the placement check are not rendered to shell: they
run in ``gpucluster validate`` (CLI, CI), which covers every check. The readiness gates already
hold ``apply`` on their own conditions.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

from gpucluster.charts.jobchart import HookJob, gate_image, render_job_chart
from gpucluster.fields import Where
from gpucluster.live.checks import (
    DEVICE_PLUGIN_RESOURCE,
    DRA_GPU_DRIVER,
    DRIVER_VERSION_LABEL,
    advertiser,
)
from gpucluster.live.nodes import GPU_COUNT_LABEL, gpu_node_groups
from gpucluster.model import (
    VALIDATE_SETTING,
    ClusterSpec,
    Component,
    PlanNode,
    Recipe,
    absolute_key,
)

__all__ = [
    "VALIDATION_NODE",
    "validation_enabled",
    "validation_node",
    "validation_script",
    "validation_rules",
]

VALIDATION_NODE = "gpucluster-validation"
"""Release, Job and ServiceAccount name of the validation gate."""
TIMEOUT_SECONDS = 900
"""15 min: every readiness gate has passed before it runs; the rest converges in minutes."""
POLL_SECONDS = 10


def validation_enabled(cluster: ClusterSpec) -> bool:
    """``settings.validate`` of the cluster (default false).

    Raises:
        GpuclusterError: ``clusters[<i>].settings.validate`` is not a YAML boolean.
    """
    return Where(cluster.source, cluster.name).check_bool(
        (cluster.settings or {}).get(VALIDATE_SETTING, False),
        absolute_key(cluster, f"settings.{VALIDATE_SETTING}") or f"settings.{VALIDATE_SETTING}",
        fix="write validate: true to add the validation gate (docs/validate.md), or remove the key",
    )


def _q(text: object) -> str:
    return shlex.quote(str(text))


def _jp_key(key: str) -> str:
    """A kubectl JSONPath member name with its dots escaped (``nvidia\\.com/gpu``)."""
    return key.replace(".", "\\.")


def _manifest_targets(
    nodes: Sequence[PlanNode], components: dict[str, Component]
) -> list[tuple[str, str, str | None, str]]:
    """``(check, resource.group, namespace or None, name)`` of every custom resource of the manifest
    charts and every rail network's IPPool (``SriovIBNetwork`` ipam ``poolName``)."""
    from gpucluster.lint.render import load_documents

    crd_plurals = {
        "NicClusterPolicy": ("nicclusterpolicies", False),
        "Skyhook": ("skyhooks", False),
        "NodeWright": ("nodewrights", False),
        "IPPool": ("ippools", True),
        "SriovNetworkNodePolicy": ("sriovnetworknodepolicies", True),
        "SriovIBNetwork": ("sriovibnetworks", True),
        "NodeFeatureRule": ("nodefeaturerules", False),
    }
    out: list[tuple[str, str, str | None, str]] = []
    for node in nodes:
        if node.kind not in ("manifests", "pre-manifests") or node.local_chart is None:
            continue
        default_ns = (
            components[node.component].ref.namespace
            if node.component in components
            else node.namespace
        )
        for path, text in sorted(node.local_chart.files.items()):
            if not path.startswith("templates/"):
                continue
            for doc in load_documents(text):
                if not isinstance(doc, dict) or doc.get("kind") not in crd_plurals:
                    continue
                meta = doc.get("metadata") or {}
                if (meta.get("annotations") or {}).get("helm.sh/hook"):
                    continue
                plural, namespaced = crd_plurals[doc["kind"]]
                group = str(doc["apiVersion"]).split("/")[0]
                ns = (meta.get("namespace") or default_ns) if namespaced else None
                out.append(("manifest-object", f"{plural}.{group}", ns, str(meta.get("name"))))
                if doc["kind"] == "SriovIBNetwork":
                    try:
                        pool = json.loads(str((doc.get("spec") or {}).get("ipam") or "{}")).get(
                            "poolName"
                        )
                    except ValueError:
                        pool = None
                    if pool:
                        out.append(("rail-ippool", "ippools.nv-ipam.nvidia.com", ns, str(pool)))
    return sorted(set(out))


_PRELUDE = r"""set -u
log() { echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) gpucluster-validation: $*"; }
fail() { failed="$*"; return 1; }
nodes_of() {
  # name|Ready|allocatable nvidia.com/gpu|gpu.count label|driver version label, one node per line
  kubectl get nodes -l "$1" -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"|"}{.status.allocatable.DP_KEY}{"|"}{.metadata.labels.COUNT_KEY}{"|"}{.metadata.labels.DRIVER_KEY}{"\n"}{end}'
}
dra_devices() {
  # devices of driver DRA_DRIVER on node $1 (ResourceSlices)
  n=0
  while IFS='|' read -r driver node devices; do
    if [ "$driver" = "DRA_DRIVER" ] && [ "$node" = "$1" ]; then
      for d in $devices; do n=$((n + 1)); done
    fi
  done <<EOF
$slices
EOF
  echo "$n"
}
check_group() {
  # $1 group, $2 selector, $3 expected nodes ('' = at least one), $4 GPUs per node ('' = the gpu.count label),
  # $5 advertiser (device-plugin | external-device-plugin | dra), $6 pinned driver version ('' = none)
  if ! out=$(nodes_of "$2" 2>&1); then fail "gpu-nodes $1: kubectl get nodes failed: $out"; return 1; fi
  ready=0
  while IFS='|' read -r name isready dp count driver; do
    [ -n "$name" ] || continue
    [ "$isready" = True ] && ready=$((ready + 1))
    dp=${dp:-0}; dra=$(dra_devices "$name")
    if [ "$dp" != 0 ] && [ "$dra" != 0 ]; then
      fail "gpu-advertiser v1/Node/$name status.allocatable.DP_NAME: advertises through the device plugin ($dp) and DRA ($dra devices)"; return 1
    fi
    if [ "$5" = dra ]; then have=$dra; other=$dp; else have=$dp; other=$dra; fi
    if [ "$other" != 0 ]; then fail "gpu-advertiser v1/Node/$name: advertises through the wrong advertiser (the plan's: $5)"; return 1; fi
    want=${4:-$count}; want=${want:-1}
    if [ "$have" -lt "$want" ] 2>/dev/null || [ "$have" = 0 ]; then
      fail "gpu-count v1/Node/$name status.allocatable.DP_NAME: advertises $have GPU(s), expected $want"; return 1
    fi
    if [ -n "$6" ] && [ "$driver" != "$6" ]; then
      if [ -z "$driver" ]; then runs="has no DRIVER_LABEL label (no driver the GPU Operator manages has started there)"; else runs="runs driver '${driver}'"; fi
      fail "driver-version v1/Node/$name metadata.labels.DRIVER_LABEL: $runs, the plan pins $6"; return 1
    fi
  done <<EOF
$out
EOF
  if [ -n "$3" ] && [ "$ready" -ne "$3" ]; then fail "gpu-nodes $1: $ready Ready node(s), the plan has $3"; return 1; fi
  if [ "$ready" -lt 1 ]; then fail "gpu-nodes $1: no Ready GPU node"; return 1; fi
  return 0
}
check_runtime_class() {
  if ! h=$(kubectl get runtimeclasses.node.k8s.io "$1" -o jsonpath='{.handler}' 2>&1); then
    fail "runtime-class node.k8s.io/v1/RuntimeClass/$1 metadata.name: does not exist ($h)"; return 1
  fi
  [ "$h" = "$1" ] || { fail "runtime-class node.k8s.io/v1/RuntimeClass/$1 handler: is '$h', not '$1'"; return 1; }
}
check_object() {
  # $1 check, $2 resource.group, $3 namespace ('' = cluster-scoped), $4 name
  if [ -n "$3" ]; then ns="-n $3"; else ns=""; fi
  # shellcheck disable=SC2086
  if ! o=$(kubectl get "$2" $ns "$4" -o name 2>&1); then fail "$1 $2 ${3:+$3/}$4 metadata.name: does not exist ($o)"; return 1; fi
}
"""


def validation_script(
    cluster: ClusterSpec,
    recipe: Recipe,
    components: dict[str, Component],
    nodes: Sequence[PlanNode],
) -> str:
    """The POSIX shell the validation Job runs (module docstring): every check, every
    :data:`POLL_SECONDS` s, until all pass (exit 0) or :data:`TIMEOUT_SECONDS` (exit 1, the last
    failing check named with its object and field)."""
    from gpucluster.model import RuntimePlan

    plan = RuntimePlan(cluster=cluster, recipe=recipe, components=components, nodes=list(nodes))
    adv = advertiser(plan)
    lines = [
        _PRELUDE.replace("DP_NAME", DEVICE_PLUGIN_RESOURCE)
        .replace("DP_KEY", _jp_key(DEVICE_PLUGIN_RESOURCE))
        .replace("COUNT_KEY", _jp_key(GPU_COUNT_LABEL))
        .replace("DRIVER_KEY", _jp_key(DRIVER_VERSION_LABEL))
        .replace("DRIVER_LABEL", DRIVER_VERSION_LABEL)
        .replace("DRA_DRIVER", DRA_GPU_DRIVER)
    ]
    checks: list[str] = []
    if adv is not None:
        gpu = components.get("gpu-operator")
        pinned = ""
        if (
            gpu is not None
            and (gpu.values.get("driver") or {}).get("enabled") is True
            and (gpu.values.get("driver") or {}).get("version")
        ):
            pinned = str(gpu.values["driver"]["version"])
        for group in gpu_node_groups(cluster):
            selector = ",".join(
                [f"{k}={v}" for k, v in sorted(group.selector.items())]
                + [f"!{k}" for k in group.exclude]
            )
            checks.append(
                f"check_group {_q(group.name)} {_q(selector)} {_q(group.node_count if group.node_count is not None else '')} "
                f"{_q(group.gpus_per_node if group.gpus_per_node is not None else '')} {_q(adv)} {_q(pinned)}"
            )
    gpu = components.get("gpu-operator")
    if gpu is not None:
        checks.append(
            f"check_runtime_class {_q(str(((gpu.values.get('operator') or {}).get('runtimeClass')) or 'nvidia'))}"
        )
    for check, resource, ns, name in _manifest_targets(nodes, components):
        checks.append(f"check_object {_q(check)} {_q(resource)} {_q(ns or '')} {_q(name)}")
    lines.append(
        "check_all() {\n  failed=''\n  slices=$(kubectl get resourceslices.resource.k8s.io -o jsonpath="
        '\'{range .items[*]}{.spec.driver}{"|"}{.spec.nodeName}{"|"}{.spec.devices[*].name}{"\\n"}{end}\' 2>/dev/null || true)\n'
        + "".join(f"  {c} || return 1\n" for c in checks)
        + "  return 0\n}\n"
    )
    lines.append(f"""deadline=$(( $(date +%s) + {TIMEOUT_SECONDS} ))
log "checking {len(checks)} plan-derived check(s) for up to {TIMEOUT_SECONDS}s"
while true; do
  if check_all; then log "PASSED: {len(checks)} check(s)"; exit 0; fi
  if [ "$(date +%s)" -ge "$deadline" ]; then log "FAILED: $failed"; exit 1; fi
  log "waiting: $failed"
  sleep {POLL_SECONDS}
done
""")
    return "".join(lines)


def validation_rules(
    nodes: Sequence[PlanNode], components: dict[str, Component]
) -> list[dict[str, Any]]:
    """RBAC of the validation Job: get/list of nodes, RuntimeClasses, ResourceSlices and the
    manifest charts' custom resources it reads; nothing else."""
    groups: dict[str, set[str]] = {
        "": {"nodes"},
        "node.k8s.io": {"runtimeclasses"},
        "resource.k8s.io": {"resourceslices"},
    }
    for _check, resource, _ns, _name in _manifest_targets(nodes, components):
        plural, _, group = resource.partition(".")
        groups.setdefault(group, set()).add(plural)
    return [
        {"apiGroups": [g], "resources": sorted(r), "verbs": ["get", "list"]}
        for g, r in sorted(groups.items())
    ]


def validation_node(
    cluster: ClusterSpec,
    recipe: Recipe,
    components: dict[str, Component],
    nodes: Sequence[PlanNode],
) -> PlanNode:
    """The ``gpucluster-validation`` release: after every other release (teardown guards aside),
    ``wait_for_jobs``; its chart from :func:`gpucluster.charts.jobchart.render_job_chart`."""
    gpu = components.get("gpu-operator")
    namespace = (
        gpu.ref.namespace if gpu is not None else next(iter(components.values())).ref.namespace
    )
    script = validation_script(cluster, recipe, components, nodes)
    job = HookJob(
        name=VALIDATION_NODE,
        namespace=namespace,
        app="gpucluster-validation",
        rbac_name=VALIDATION_NODE,
        rules=validation_rules(nodes, components),
        container="validate",
        script=script,
        image=gate_image(cluster),
        hook="post-install,post-upgrade",
        active_deadline_seconds=TIMEOUT_SECONDS + 120,
        backoff_limit=0,
    )
    chart = render_job_chart(
        cluster,
        job,
        description="gpucluster: validate the cluster against its plan (docs/validate.md)",
    )
    after = sorted(n.id for n in nodes if n.kind != "teardown")
    from gpucluster.hashing import fingerprint

    return PlanNode(
        id=VALIDATION_NODE,
        kind="gate",
        component=VALIDATION_NODE,
        namespace=namespace,
        local_chart=chart,
        values={
            "planned": fingerprint(
                {
                    n.id: [
                        n.kind,
                        n.version,
                        n.local_chart.content_hash if n.local_chart else "",
                        json.dumps(n.values, sort_keys=True, default=str),
                    ]
                    for n in nodes
                }
            )
        },
        depends_on=after,
        wait_for_jobs=True,
        timeout_seconds=TIMEOUT_SECONDS + 180,
    )

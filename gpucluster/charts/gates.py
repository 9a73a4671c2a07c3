"""Readiness gates: GateSpecs from plugins -> small generated Helm charts whose Job waits.

Helm's ``--wait`` only says pods started. The GPU stack is ready when operator-owned custom
resources say so (ClusterPolicy, NicClusterPolicy), when CRDs an operator creates at run time
exist (nv-ipam ``IPPool``), and when DaemonSets rolled out. A gate turns one such condition
into a ``helm_release`` that Terraform waits on:

* ``ServiceAccount`` ``<gate>`` in the gated component's namespace;
* a ``ClusterRole`` (cluster-scoped reads) or a ``Role`` in the target namespace (namespaced
  reads) named ``gpucluster-gate-<gate>``, granting exactly the verb the script uses on exactly
  the resource it reads (``get`` with ``resourceNames`` for one object, ``list`` for "every
  object"), and its binding to the ServiceAccount;
* a ``Job`` ``<gate>`` (Helm hook ``post-install,post-upgrade``, delete policy
  ``before-hook-creation,hook-succeeded``) running a POSIX shell loop around
  ``kubectl get -o jsonpath`` in a pinned kubectl image. Helm waits for hook Jobs, so the
  release -- and ``terraform apply`` -- completes only when the condition holds, and fails
  with the Job's log line when it does not. Every ``helm upgrade`` of the gate release re-runs
  the hook; the graph puts the gated component's content hash (``gatedHash``) into the release
  values and the Job's annotations, so any change to the gated component's chart, version,
  values or manifests upgrades the gate release and re-runs the wait.

The Job's templates contain exactly two Helm expressions, ``{{ .Values.image | quote }}`` and
``{{ .Values.gatedHash | quote }}`` (:data:`HELM_VALUE_KEYS`); everything else is rendered here.
See docs/gates.md.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpucluster.charts.jobchart import (
    HookJob,
    gate_image,
    job_network_policy,
    job_objects,
    render_job_chart,
    sentinel,
)
from gpucluster.errors import GpuclusterError, PluginError, allowed_list
from gpucluster.hashing import evaluate_variable_hash, fingerprint
from gpucluster.model import ClusterSpec, Component, GateSpec, LocalChart, Recipe, VariableHash
from gpucluster.values import get_path, has_path

GATE_KINDS = ("resource-condition", "crd-established", "rollout", "min-version")
DEFAULT_TIMEOUTS = {
    "resource-condition": 600,
    "crd-established": 120,
    "rollout": 600,
    "min-version": 600,
}
"""Seconds per kind when ``GateSpec.timeout_seconds`` is None: the one place gate wait defaults
are decided (``GateSpec.create_timeout_seconds``, 600, is a crd-established gate's create budget;
docs/gates.md's table is checked against both). CRD: AICR's NVKE GB200 Setup guide
(docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup), 2 min Established after a 10 min create
budget."""

JOB_START_MARGIN_SECONDS = 60
"""``activeDeadlineSeconds`` = wait budget + this (scheduling and image pull). The release's Helm
timeout (graph) adds a larger margin, so the Job fails -- with its log line -- before Helm gives up."""

GATE_CHART_VERSION = "1.0.0"
WORKLOAD_KINDS = {"DaemonSet": "daemonsets", "Deployment": "deployments"}
HELM_VALUE_KEYS = ("image", "gatedHash")
"""The only release values the gate chart's templates read (``{{ .Values.<key> | quote }}``)."""

GATED_HASH_ANNOTATION = "gpucluster/gated-hash"
CORE_GATE_OWNER = "gpucluster (core default)"
"""Owner named in errors about gates the core adds itself (the default ClusterPolicy gate)."""
MAX_GATE_NAME = 53  # Helm release name limit
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")
_API_VERSION = re.compile(r"^(?:[a-z0-9]([a-z0-9.-]*[a-z0-9])?/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?$")
_JSONPATH = re.compile(r"^\{\.[^{}\n]+\}$")
_VERSION = re.compile(r"^v?[0-9]+(\.[0-9]+){0,2}(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


# --------------------------------------------------------------------------- collect + validate


def effective_timeout(spec: GateSpec) -> int:
    """The condition's wait budget in seconds (``timeout_seconds`` or the kind default)."""
    return spec.timeout_seconds if spec.timeout_seconds is not None else DEFAULT_TIMEOUTS[spec.kind]


def gate_budget_seconds(spec: GateSpec) -> int:
    """Total seconds the gate's script may wait (crd-established: create + Established budgets)."""
    return effective_timeout(spec) + (
        spec.create_timeout_seconds if spec.kind == "crd-established" else 0
    )


def _gate_error(
    plugin: str,
    spec: GateSpec,
    cluster: ClusterSpec,
    field_name: str,
    message: str,
    allowed: str | None = None,
    fix: str | None = None,
) -> PluginError:
    return PluginError(
        f"plugin '{plugin}', gate '{spec.name}': {message}",
        file=cluster.source,
        cluster=cluster.name,
        component=spec.component,
        key=f"gates.{spec.name}.{field_name}",
        allowed=allowed,
        fix=fix or f"fix the GateSpec returned by plugin '{plugin}' from gpucluster_gates",
    )


def validate_gate(spec: GateSpec, *, plugin: str, cluster: ClusterSpec) -> GateSpec:
    """Validate one declared gate and fill kind defaults.

    Returns:
        a copy with ``timeout_seconds`` resolved, ``api_version``/``resource``/``kind_name``
        filled for crd-established, rollout and min-version, and ``description`` generated when
        empty.

    Raises:
        PluginError: (a GpuclusterError) naming the plugin, gate, cluster and field, e.g. an
            unknown kind, a name that is not a DNS-1123 label of <= 53 characters, a jsonpath that
            is not one ``{.path}`` expression, a missing object name or namespace.
    """
    err = lambda f, m, allowed=None: _gate_error(plugin, spec, cluster, f, m, allowed)  # noqa: E731
    if spec.kind not in GATE_KINDS:
        raise err("kind", f"unknown gate kind '{spec.kind}'", allowed_list(GATE_KINDS))
    if (
        not isinstance(spec.name, str)
        or not _DNS_LABEL.fullmatch(spec.name)
        or len(spec.name) > MAX_GATE_NAME
    ):
        raise err(
            "name",
            f"gate name '{spec.name}' is not a DNS-1123 label of at most {MAX_GATE_NAME} characters",
            "lowercase letters, digits and '-'",
        )
    if not spec.component:
        raise err("component", "no gated component")
    timeout = effective_timeout(spec)
    if not isinstance(timeout, int) or timeout < 1:
        raise err("timeout_seconds", f"timeout {timeout!r} is not a positive number of seconds")
    if not isinstance(spec.poll_seconds, int) or spec.poll_seconds < 1:
        raise err(
            "poll_seconds",
            f"poll interval {spec.poll_seconds!r} is not a positive number of seconds",
        )
    if spec.kind == "crd-established" and (
        not isinstance(spec.create_timeout_seconds, int) or spec.create_timeout_seconds < 1
    ):
        raise err(
            "create_timeout_seconds",
            f"create timeout {spec.create_timeout_seconds!r} is not positive",
        )
    if spec.namespace is not None and not _DNS_LABEL.fullmatch(spec.namespace):
        raise err("namespace", f"namespace '{spec.namespace}' is not a DNS-1123 label")
    for field_name in ("name_of_object", "container", "value", "description"):
        text = getattr(spec, field_name) or ""
        if "\n" in text or "{{" in text:
            raise err(field_name, f"{field_name} must be one line without '{{{{'")
    out = dataclasses.replace(
        spec,
        timeout_seconds=timeout,
        after=list(spec.after),
        before=list(spec.before) if spec.before is not None else None,
    )

    if spec.kind == "resource-condition":
        _check_resource_condition(spec, err)
    elif spec.kind == "crd-established":
        if (
            not spec.name_of_object
            or "." not in spec.name_of_object
            or not _DNS_SUBDOMAIN.fullmatch(spec.name_of_object)
        ):
            raise err(
                "name_of_object",
                f"CRD name '{spec.name_of_object}' is not '<plural>.<group>'",
                "ippools.nv-ipam.nvidia.com",
            )
        out = dataclasses.replace(
            out,
            api_version="apiextensions.k8s.io/v1",
            resource="customresourcedefinitions",
            kind_name="CustomResourceDefinition",
            namespace=None,
        )
    else:  # rollout, min-version
        if spec.kind_name not in WORKLOAD_KINDS:
            raise err(
                "kind_name",
                f"workload kind '{spec.kind_name}' is not supported",
                allowed_list(WORKLOAD_KINDS),
            )
        if not spec.name_of_object or not _DNS_SUBDOMAIN.fullmatch(spec.name_of_object):
            raise err(
                "name_of_object", f"workload name '{spec.name_of_object}' is missing or invalid"
            )
        if not spec.namespace:
            raise err("namespace", "the workload's namespace is required")
        if not isinstance(spec.min_ready, int) or spec.min_ready < 0:
            raise err("min_ready", f"min_ready {spec.min_ready!r} is not a non-negative integer")
        out = dataclasses.replace(
            out, api_version="apps/v1", resource=WORKLOAD_KINDS[spec.kind_name]
        )
        if spec.kind == "min-version":
            if not spec.container or not _DNS_LABEL.fullmatch(spec.container):
                raise err("container", f"container name '{spec.container}' is missing or invalid")
            if not _VERSION.fullmatch(spec.value or ""):
                raise err(
                    "value",
                    f"minimum version '{spec.value}' is not a version like 0.5.1",
                    "MAJOR[.MINOR[.PATCH]][-pre]",
                )
    if not out.description:
        out = dataclasses.replace(out, description=describe(out))
    return out


def _check_resource_condition(spec: GateSpec, err: Callable[..., PluginError]) -> None:
    """Raise ``err`` for the first invalid field of a resource-condition gate."""
    if not _API_VERSION.fullmatch(spec.api_version or ""):
        raise err("api_version", f"api_version '{spec.api_version}' is not 'group/version' or 'v1'")
    if not _DNS_LABEL.fullmatch(spec.resource or ""):
        raise err(
            "resource",
            f"resource '{spec.resource}' is not a plural resource name (clusterpolicies)",
        )
    if not spec.kind_name:
        raise err("kind_name", "kind_name (e.g. ClusterPolicy) is required")
    if not _JSONPATH.fullmatch(spec.jsonpath or ""):
        raise err(
            "jsonpath",
            f"jsonpath '{spec.jsonpath}' is not one '{{.path}}' expression",
            "{.status.state}",
        )
    if spec.value == "":
        raise err("value", "the expected value is empty")
    if spec.name_of_object is not None and not _DNS_SUBDOMAIN.fullmatch(spec.name_of_object):
        raise err(
            "name_of_object", f"object name '{spec.name_of_object}' is not a DNS-1123 subdomain"
        )


def describe(spec: GateSpec) -> str:
    """One line saying what the gate waits for (used in logs, Chart.yaml and docs)."""
    if spec.kind == "resource-condition":
        target = (
            f"{spec.kind_name} {spec.name_of_object}"
            if spec.name_of_object
            else f"every {spec.kind_name}"
        )
        where = f" in {spec.namespace}" if spec.namespace else ""
        return f"{target}{where} has {spec.jsonpath} = {spec.value}"
    if spec.kind == "crd-established":
        return f"CRD {spec.name_of_object} is created and Established"
    text = f"{spec.kind_name} {spec.namespace}/{spec.name_of_object} is rolled out (at least {spec.min_ready} pod(s))"
    if spec.kind == "min-version":
        text += f" with container {spec.container} at version >= {spec.value}"
    return text


def collect_gates(
    cluster: ClusterSpec, recipe: Recipe, components: Mapping[str, Component]
) -> list[GateSpec]:
    """The validated gates plugins declare (hook ``gpucluster_gates``) for enabled components.

    Gates whose ``component`` is disabled or not in the recipe are dropped. For every enabled
    component the registry lists CRDs under ``waitEstablished`` for (agentgateway-crds: the Gateway
    API ``gateways`` CRD its manifests install and its own ``agentgatewayparameters``), the core
    adds a ``crd-established`` gate ``<component>-<plural>-established``: releases that depend on
    the component -- and so the custom resources of those CRDs -- install once they are Established.
    When ``gpu-operator``
    is enabled and no plugin declares a gate on ClusterPolicy, the core adds
    :func:`gpucluster.sdk.clusterpolicy_ready` (:data:`~gpucluster.sdk.gates.CLUSTERPOLICY_DEFAULT_TIMEOUT`),
    so on every platform ``terraform apply`` waits until the GPU Operator reports the GPU stack
    ready and gpu-operator's dependents wait for it too.

    Returns:
        validated copies (:func:`validate_gate`), sorted by name.

    Raises:
        PluginError: a plugin returns something that is not a GateSpec, a gate is invalid, or
            two gates share a name (naming both plugins).
    """
    owners: dict[str, str] = {}
    gates: list[GateSpec] = []
    from gpucluster.plugins import call_list_hook

    for plugin, spec in call_list_hook(
        "gpucluster_gates",
        GateSpec,
        what="gpucluster.sdk.GateSpec",
        cluster=cluster,
        recipe=recipe,
        components=components,
    ):
        if spec.component not in components:
            continue
        checked = validate_gate(spec, plugin=plugin, cluster=cluster)
        if checked.name in owners:
            raise _gate_error(
                plugin,
                spec,
                cluster,
                "name",
                f"gate name '{spec.name}' is already declared by plugin '{owners[checked.name]}'",
                fix="gate names must be unique per cluster; rename one of them",
            )
        owners[checked.name] = plugin
        gates.append(checked)
    from gpucluster.recipes.catalog import load_catalog

    registry = load_catalog().components
    for name in sorted(components):
        entry = registry.get(name)
        for crd in entry.wait_established if entry is not None else ():
            spec = GateSpec(
                name=f"{name}-{crd.split('.')[0]}-established",
                component=name,
                kind="crd-established",
                name_of_object=crd,
                description=f"CRD {crd} is Established (custom resources of it install next; registry waitEstablished)",
            )
            if spec.name in owners:
                raise _gate_error(
                    owners[spec.name],
                    spec,
                    cluster,
                    "name",
                    f"gate name '{spec.name}' is reserved for the registry's waitEstablished gate",
                    fix="rename the plugin's gate",
                )
            gates.append(validate_gate(spec, plugin=CORE_GATE_OWNER, cluster=cluster))
    if "gpu-operator" in components and not any(g.resource == "clusterpolicies" for g in gates):
        from gpucluster.charts.gate_helpers import (
            clusterpolicy_ready,
        )

        spec = clusterpolicy_ready()  # its default budget, CLUSTERPOLICY_DEFAULT_TIMEOUT
        if spec.name in owners:
            raise _gate_error(
                owners[spec.name],
                spec,
                cluster,
                "name",
                f"gate name '{spec.name}' is reserved for the ClusterPolicy gate but plugin '{owners[spec.name]}' uses it "
                "for another condition",
                fix="rename that gate, or make it the ClusterPolicy gate (gpucluster.sdk.clusterpolicy_ready)",
            )
        gates.append(validate_gate(spec, plugin=CORE_GATE_OWNER, cluster=cluster))
    return sorted(gates, key=lambda g: g.name)


# --------------------------------------------------------------------------- wait scripts

_PRELUDE = """\
set -u
gate={gate}
poll={poll}
seen='nothing yet'
errf="${{TMPDIR:-/tmp}}/gate-$gate.err"
log() {{ echo "gate $gate: $*"; }}
now() {{ date +%s; }}
# wait_until SECONDS: run check until it succeeds (0) or SECONDS have passed (1)
wait_until() {{
  limit=$(( $(now) + $1 ))
  while :; do
    if check; then return 0; fi
    if [ "$(now)" -ge "$limit" ]; then return 1; fi
    sleep "$poll"
  done
}}
# get ARGS...: run kubectl get, bounded by coreutils timeout (kubectl's --request-timeout would make
# it ignore the pod's in-cluster configuration and dial localhost:8080: kubernetes/kubernetes#93474);
# stdout in $out; on failure the last stderr line in $err. A refusal of the gate's own identity
# (Forbidden, Unauthorized) ends the gate at once: waiting cannot help
get() {{
  if out=$(timeout 30 kubectl get "$@" 2>"$errf"); then return 0; else rc=$?; fi
  err=$(tail -n 1 "$errf" 2>/dev/null); [ -n "$err" ] || err='no output'
  [ "$rc" -ne 124 ] || err='kubectl get gave no answer within 30s'
  case "$err" in
    *'(Forbidden)'*|*'(Unauthorized)'*)
      log "FAILED: the API server refused the gate's ServiceAccount: $err"
      exit 1 ;;
  esac
  return 1
}}
"""

_NUMBERS = """\
num() { case "$1" in ''|*[!0-9]*) echo 0 ;; *) echo "$1" ;; esac; }
"""

_VERSION_GE = """\
# version_ge HAVE WANT: 0 when HAVE >= WANT (semver core; a leading v is ignored, a pre-release
# sorts before its release; pre-releases of one core compare as text), 1 when lower,
# 2 when HAVE is not a version
version_ge() {
  h=${1#v}; w=${2#v}
  h=${h%%+*}; w=${w%%+*}
  hp=''; case "$h" in *-*) hp=${h#*-}; h=${h%%-*} ;; esac
  wp=''; case "$w" in *-*) wp=${w#*-}; w=${w%%-*} ;; esac
  [ -n "$h" ] && [ -n "$w" ] || return 2
  old_ifs=$IFS; IFS=.
  set -- $h; h1=${1:-0}; h2=${2:-0}; h3=${3:-0}
  set -- $w; w1=${1:-0}; w2=${2:-0}; w3=${3:-0}
  IFS=$old_ifs
  for n in "$h1" "$h2" "$h3"; do case "$n" in ''|*[!0-9]*) return 2 ;; esac; done
  for n in "$w1" "$w2" "$w3"; do case "$n" in ''|*[!0-9]*) return 2 ;; esac; done
  if [ "$h1" -ne "$w1" ]; then [ "$h1" -gt "$w1" ]; return $?; fi
  if [ "$h2" -ne "$w2" ]; then [ "$h2" -gt "$w2" ]; return $?; fi
  if [ "$h3" -ne "$w3" ]; then [ "$h3" -gt "$w3" ]; return $?; fi
  [ -z "$hp" ] && return 0
  [ -z "$wp" ] && return 1
  [ "$hp" = "$wp" ] && return 0
  first=$(printf '%s\\n%s\\n' "$hp" "$wp" | LC_ALL=C sort | head -n 1)
  [ "$first" = "$wp" ]
}
"""


def _resource_arg(spec: GateSpec) -> str:
    """``resource.version.group`` (``clusterpolicies.v1.nvidia.com``), or the plural for core v1."""
    if "/" in spec.api_version:
        group, version = spec.api_version.split("/", 1)
        return f"{spec.resource}.{version}.{group}"
    return spec.resource


def _get_args(spec: GateSpec, jsonpath: str, name: str | None) -> str:
    """Shell-quoted arguments of ``kubectl get`` (after ``timeout 30 kubectl get``)."""
    parts = [_resource_arg(spec)]
    if name:
        parts.append(name)
    if spec.namespace:
        parts += ["-n", spec.namespace]
    parts += ["-o", "jsonpath=" + jsonpath]
    return " ".join(shlex.quote(p) for p in parts)


def _wait_and_report(timeout: int) -> str:
    """The end of a single-budget gate script: wait up to ``timeout`` s for ``check``, then log
    ``ready`` and exit 0, or ``FAILED`` with the last observation and exit 1."""
    return f"""\
log "waiting up to {timeout}s for $what"
if wait_until {timeout}; then
  log "ready: $what (saw: $seen)"
  exit 0
fi
log "FAILED: $what was not reached within {timeout}s; last seen: $seen"
exit 1
"""


def _resource_condition_script(spec: GateSpec, timeout: int) -> str:
    """``resource-condition``: the named object (or every object of the type, at least one) has
    ``jsonpath`` equal to ``value``."""
    row = "{.metadata.name}=" + spec.jsonpath + '{"\\n"}'
    jsonpath = row if spec.name_of_object else "{range .items[*]}" + row + "{end}"
    return (
        f"want={shlex.quote(spec.value)}\n"
        + f"""\
check() {{
  if ! get {_get_args(spec, jsonpath, spec.name_of_object)}; then
    seen="kubectl get failed: $err"
    return 1
  fi
  total=0; bad=0; pairs=''
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    total=$((total + 1))
    name=${{line%%=*}}; got=${{line#*=}}
    [ "$got" = "$want" ] || bad=$((bad + 1))
    pairs="$pairs $name=${{got:-<unset>}}"
  done <<EOF
$out
EOF
  if [ "$total" -eq 0 ]; then seen='no object exists yet'; return 1; fi
  seen="${{pairs# }}"
  [ "$bad" -eq 0 ]
}}
"""
        + _wait_and_report(timeout)
    )


def _crd_established_script(spec: GateSpec, timeout: int) -> str:
    """``crd-established``: the CRD is created within ``create_timeout_seconds``, then
    Established within ``timeout``."""
    create = spec.create_timeout_seconds
    jsonpath = '{.status.conditions[?(@.type=="Established")].status}'
    return f"""\
phase=created
check() {{
  if ! get {_get_args(spec, jsonpath, spec.name_of_object)}; then
    seen="not created yet: $err"
    return 1
  fi
  if [ "$phase" = created ]; then seen='created'; return 0; fi
  seen="Established=${{out:-<unset>}}"
  [ "$out" = True ]
}}
log "waiting up to {create}s for CRD {spec.name_of_object} to be created, then up to {timeout}s for it to be Established"
if ! wait_until {create}; then
  log "FAILED: CRD {spec.name_of_object} was not created within {create}s; last seen: $seen"
  exit 1
fi
phase=established
if ! wait_until {timeout}; then
  log "FAILED: CRD {spec.name_of_object} was created but not Established within {timeout}s; last seen: $seen"
  exit 1
fi
log "ready: $what (saw: $seen)"
exit 0
"""


_ROLLOUT_FIELDS = {
    "DaemonSet": "{.metadata.generation}|{.status.observedGeneration}|{.status.desiredNumberScheduled}|{.status.updatedNumberScheduled}|{.status.numberAvailable}|{.status.currentNumberScheduled}",
    "Deployment": "{.metadata.generation}|{.status.observedGeneration}|{.spec.replicas}|{.status.updatedReplicas}|{.status.availableReplicas}|{.status.replicas}",
}
"""What a rollout gate reads of each workload kind: generation, observed generation, desired,
updated, available and current pods (``|``-separated, in that order)."""


def _min_version_check(spec: GateSpec) -> tuple[str, str]:
    """``(shell before check(), lines inside check())`` of a ``min-version`` gate: the image tag
    of container ``spec.container`` is at least ``spec.value``."""
    setup = f"minimum={shlex.quote(spec.value)}\n" + _VERSION_GE
    inside = f"""\
  ref=${{image%%@*}}; last=${{ref##*/}}
  case "$last" in *:*) tag=${{last##*:}} ;; *) tag='' ;; esac
  if [ -z "$image" ]; then seen="$seen; no container {spec.container} in the pod template"; return 1; fi
  version_ge "$tag" "$minimum"; rc=$?
  if [ "$rc" -eq 2 ]; then seen="$seen; image $image has no version tag"; return 1; fi
  seen="$seen; image $image"
  [ "$rc" -eq 0 ] || return 1
"""
    return setup, inside


def _rollout_script(spec: GateSpec, timeout: int) -> str:
    """``rollout`` and ``min-version``: the workload rolled out (observed generation current,
    every desired pod updated, available and current, at least ``min_ready`` desired), and for
    ``min-version`` its container image at least the version."""
    fields = _ROLLOUT_FIELDS["DaemonSet" if spec.kind_name == "DaemonSet" else "Deployment"]
    setup, version_check = "", ""
    if spec.kind == "min-version":
        fields += '|{.spec.template.spec.containers[?(@.name=="' + spec.container + '")].image}'
        setup, version_check = _min_version_check(spec)
    return (
        setup
        + _NUMBERS
        + f"min_ready={spec.min_ready}\n"
        + f"""\
check() {{
  if ! get {_get_args(spec, fields, spec.name_of_object)}; then
    seen="kubectl get failed: $err"
    return 1
  fi
  IFS='|' read -r gen observed desired updated available current image <<EOF
$out
EOF
  gen=$(num "$gen"); observed=$(num "$observed"); desired=$(num "$desired")
  updated=$(num "$updated"); available=$(num "$available"); current=$(num "$current")
  seen="generation $gen (observed $observed), desired $desired, updated $updated, available $available, current $current"
  [ "$observed" -ge "$gen" ] || return 1
  [ "$desired" -ge "$min_ready" ] || return 1
  [ "$updated" -eq "$desired" ] && [ "$available" -eq "$desired" ] && [ "$current" -eq "$desired" ] || return 1
{version_check}  return 0
}}
"""
        + _wait_and_report(timeout)
    )


_SCRIPTS = {
    "resource-condition": _resource_condition_script,
    "crd-established": _crd_established_script,
    "rollout": _rollout_script,
    "min-version": _rollout_script,
}
"""Gate kind -> the function writing its ``check`` and wait (after the common prelude)."""


def gate_script(spec: GateSpec) -> str:
    """The POSIX ``sh`` script the gate Job runs (``spec`` validated by :func:`validate_gate`).

    Contract: prints ``gate <name>: waiting up to <n>s for <what>`` first; then either
    ``gate <name>: ready: <what> (saw: ...)`` and exits 0, or
    ``gate <name>: FAILED: ... last seen: <observation>`` and exits 1 (the Job's
    podFailurePolicy fails the Job at once on exit code 1). ``kubectl`` errors (API not
    reachable, object not found yet) are retried every ``poll_seconds`` until the deadline.
    Time comes from ``date +%s``; waits use ``sleep``. The common prelude (``log``, ``get``,
    ``wait_until``) is followed by the kind's own part (:data:`_SCRIPTS`).
    """
    what = spec.description or describe(spec)
    script = (
        _PRELUDE.format(gate=shlex.quote(spec.name), poll=spec.poll_seconds)
        + f"what={shlex.quote(what)}\n"
        + _SCRIPTS[spec.kind](spec, effective_timeout(spec))
    )
    if "{{" in script:  # validate_gate keeps user text free of '{{'
        raise AssertionError("gate script contains '{{'")
    return script


# --------------------------------------------------------------------------- RBAC


def rbac_rules(spec: GateSpec) -> tuple[str | None, list[dict[str, Any]]]:
    """``(namespace or None for cluster-wide, PolicyRules)`` the gate's script needs.

    Exactly one rule: the API group and resource the script reads, verb ``get`` with
    ``resourceNames`` when it reads one named object, else verb ``list``.
    """
    group = spec.api_version.split("/", 1)[0] if "/" in spec.api_version else ""
    rule: dict[str, Any] = {"apiGroups": [group], "resources": [spec.resource]}
    if spec.name_of_object:
        rule["resourceNames"] = [spec.name_of_object]
        rule["verbs"] = ["get"]
    else:
        rule["verbs"] = ["list"]
    return spec.namespace, [rule]


# --------------------------------------------------------------------------- chart


def gate_job(spec: GateSpec, namespace: str) -> HookJob:
    """The gate's :class:`~gpucluster.charts.jobchart.HookJob`: a ``post-install,post-upgrade`` hook that
    runs :func:`gate_script` with the RBAC of :func:`rbac_rules`; its image and gated-hash
    annotations are the release values ``image`` and ``gatedHash``."""
    rbac_ns, rules = rbac_rules(spec)
    return HookJob(
        name=spec.name,
        namespace=namespace,
        app="gpucluster-gate",
        rbac_name=f"gpucluster-gate-{spec.name}",
        rules=rules,
        rbac_namespace=rbac_ns,
        container="wait",
        script=gate_script(spec),
        image=sentinel("image"),
        hook="post-install,post-upgrade",
        backoff_limit=2,
        active_deadline_seconds=gate_budget_seconds(spec) + JOB_START_MARGIN_SECONDS,
        annotations={
            "gpucluster/gated-component": spec.component,
            GATED_HASH_ANNOTATION: sentinel("gatedHash"),
        },
        pod_annotations={GATED_HASH_ANNOTATION: sentinel("gatedHash")},
    )


def gate_objects(cluster: ClusterSpec, spec: GateSpec, namespace: str) -> list[dict[str, Any]]:
    """The gate chart's objects: ServiceAccount, (Cluster)Role, (Cluster)RoleBinding, Job
    (:func:`gpucluster.charts.jobchart.job_objects` of :func:`gate_job`).

    The Job's image and gated-hash annotations hold sentinels that :func:`render_gate_chart`
    turns into ``{{ .Values.image | quote }}`` / ``{{ .Values.gatedHash | quote }}``.
    """
    return job_objects(cluster, gate_job(spec, namespace))


def gate_network_policy(spec: GateSpec, namespace: str) -> dict[str, Any]:
    """The NetworkPolicy of the gate's own pods (:func:`gpucluster.charts.jobchart.job_network_policy`:
    no ingress, egress only to TCP 443/6443, the API server)."""
    return job_network_policy(gate_job(spec, namespace))


def render_gate_chart(
    cluster: ClusterSpec, spec: GateSpec, components: Mapping[str, Component]
) -> tuple[LocalChart, dict[str, Any]]:
    """The gate's chart and its release values.

    Args:
        cluster: for the system node selector/tolerations and ``settings.gateImage``.
        spec: a gate from :func:`collect_gates` (validated; validated again here if not).
        components: enabled components (the gated component's namespace hosts the Job).

    Returns:
        ``(chart, values)``; chart files ``Chart.yaml``, ``values.yaml`` (defaults: ``image``,
        ``gatedHash: ''``), ``templates/000-serviceaccount.yaml``, ``001-rbac.yaml``,
        ``002-job.yaml``, ``003-networkpolicy.yaml`` (:func:`gate_network_policy`); values ``{"image": <kubectl image>}`` (the graph adds ``gatedHash``
        and ``contentHash``).

    Raises:
        GpuclusterError: the gated component is not enabled, or the spec is invalid.
    """
    if spec.component not in components:
        raise GpuclusterError(
            f"gate '{spec.name}' gates '{spec.component}', which is not enabled",
            cluster=cluster.name,
            component=spec.component,
        )
    spec = (
        validate_gate(spec, plugin="<unknown>", cluster=cluster)
        if spec.timeout_seconds is None or not spec.description
        else spec
    )
    namespace = components[spec.component].ref.namespace
    image = gate_image(cluster)
    chart = render_job_chart(
        cluster,
        gate_job(spec, namespace),
        description=f"gpucluster readiness gate: waits until {spec.description}",
        values={"image": image, "gatedHash": ""},
        version=GATE_CHART_VERSION,
    )
    return chart, {"image": image}


_HELM_EXPR = re.compile(r"\{\{ \.Values\.([A-Za-z]+) \| quote \}\}")


def render_release(chart: LocalChart, values: Mapping[str, Any]) -> dict[str, str]:
    """What Helm renders from a gate chart with ``values`` (for tests and previews).

    Substitutes the chart's only template expressions (``{{ .Values.<key> | quote }}``) with the
    quoted value from ``values``, else from the chart's ``values.yaml``.

    Returns:
        ``{template path: rendered text}``.

    Raises:
        ValueError: a template holds another ``{{`` expression, or a key has no value.
    """
    import yaml

    defaults = yaml.safe_load(chart.files.get("values.yaml", "")) or {}
    merged = {**defaults, **dict(values)}
    out = {}
    for path, text in chart.files.items():
        if not path.startswith("templates/"):
            continue

        def sub(match: re.Match) -> str:
            key = match.group(1)
            if key not in merged:
                raise ValueError(f"{path}: no value for .Values.{key}")
            return json.dumps(str(merged[key]))

        rendered = _HELM_EXPR.sub(sub, text)
        if "{{" in rendered:
            raise ValueError(f"{path}: unsupported Helm template expression left")
        out[path] = rendered
    return out


# --------------------------------------------------------------------------- DRA kubelet plugin re-roll

DRA_COMPONENT = "nvidia-dra-driver-gpu"
DRIVER_IDENTITY_ANNOTATION = "gpucluster/driver-identity"
"""Pod-template annotation of the DRA kubelet plugin DaemonSet: a hash of the GPU driver's identity."""

DRIVER_IDENTITY_PATH = "kubeletPlugin.podAnnotations." + DRIVER_IDENTITY_ANNOTATION
"""Values path of the annotation. The DRA chart (kubernetes-sigs/dra-driver-nvidia-gpu,
``templates/kubeletplugin.yaml``) renders ``kubeletPlugin.podAnnotations`` into the kubelet plugin
DaemonSet's ``spec.template.metadata.annotations``; a changed pod template makes the DaemonSet
controller replace every plugin pod (``updateStrategy`` RollingUpdate, ``maxUnavailable: 100%``
in the chart's values). Checked by rendering the real chart (tests/test_dra_reroll.py)."""

DRIVER_IDENTITY_KEYS = ("repository", "image", "version", "usePrecompiled", "kernelModuleType")
"""gpu-operator ``driver.*`` values that make up an operator-managed driver's identity (the driver
container image and the kernel module flavour it builds; chart values.yaml ``driver:``)."""


def driver_identity(
    cluster: ClusterSpec, components: Mapping[str, Component]
) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...]]:
    """What identifies the GPU driver the DRA kubelet plugin talks to (NVML), and the Terraform
    variables that can change it.

    * ``gpu-operator`` enabled with ``driver.enabled`` not false (operator-managed driver):
      ``{"owner": "gpu-operator", "driver": {<DRIVER_IDENTITY_KEYS present in the values>}}``,
      plus the chart version when ``driver.version`` is not set (the chart's default driver then
      follows the chart). Variables: those bound to those ``driver.*`` paths.
    * otherwise the host owns the driver (AKS ``gpu_driver = Install``, OKE images, preinstalled
      drivers): ``{"owner": "host", "service", "kubernetes", "gpuPools": [{vmSize,
      gpuDriver}]}`` -- on AKS the driver ships in the node image, and the node image follows the
      pool's Kubernetes version, VM size and ``gpu_driver`` (a node-image upgrade outside
      Terraform reimages the node, which restarts its plugin pod with it). ``gpuPools`` holds
      each distinct shape once, sorted, never a pool's name or node count: a pool added with a
      shape the cluster has already (its nodes start their own plugin pods) changes nothing on
      the nodes that run.

    Returns:
        ``(identity, ((variable, default), ...))``.

    Source: AICR PRs #965/#973/#980 (the plugin keeps a stale NVML handle until it restarts;
    AICR's deploy.sh restarts it after a driver change).
    """
    gpu = components.get("gpu-operator")
    if gpu is not None and get_path(gpu.values, "driver.enabled", True) is not False:
        driver = {
            k: get_path(gpu.values, f"driver.{k}")
            for k in DRIVER_IDENTITY_KEYS
            if has_path(gpu.values, f"driver.{k}")
        }
        identity: dict[str, Any] = {"owner": "gpu-operator", "driver": driver}
        if "version" not in driver and not any(
            p == "driver.version" for p in gpu.terraform_variables
        ):
            identity["chartVersion"] = gpu.ref.version
        variables = tuple(
            sorted(
                (var, get_path(gpu.values, path))
                for path, var in gpu.terraform_variables.items()
                if path in {f"driver.{k}" for k in DRIVER_IDENTITY_KEYS}
            )
        )
        return identity, variables
    shapes = sorted(
        {(p.vm_size, p.gpu_driver) for p in cluster.pools if p.gpu}, key=lambda s: (s[0], str(s[1]))
    )
    pools = [{"vmSize": vm_size, "gpuDriver": gpu_driver} for vm_size, gpu_driver in shapes]
    return {
        "owner": "host",
        "service": cluster.criteria.service,
        "kubernetes": cluster.kubernetes_version,
        "gpuPools": pools,
    }, ()


def apply_driver_identity(
    cluster: ClusterSpec, components: Mapping[str, Component]
) -> dict[str, Component]:
    """The components with the DRA kubelet plugin's pod template annotated with the driver
    identity; ``components`` is left as it is (a new ``{name: Component}``, in the same order,
    whose ``nvidia-dra-driver-gpu`` is a new Component; the others are the input's objects).

    Sets ``kubeletPlugin.podAnnotations["gpucluster/driver-identity"]`` of
    ``nvidia-dra-driver-gpu`` to a hash of :func:`driver_identity`, so the plugin pods are
    replaced exactly when the driver changes (version, image, module type; or the node image
    inputs where the host owns the driver) and never otherwise. When Terraform variables feed
    the identity (``variables: {"gpuoperator:driver.version": gpu_driver_version}``), the value is a
    :class:`~gpucluster.model.VariableHash` Terraform computes at plan time (the values hold its
    value at the defaults). Without the DRA driver: the components as they are (a new dict).
    """
    dra = components.get(DRA_COMPONENT)
    if dra is None:
        return dict(components)
    identity, variables = driver_identity(cluster, components)
    vh = VariableHash(base=fingerprint(identity), variables=variables)
    annotations = dict(get_path(dra.values, "kubeletPlugin.podAnnotations") or {})
    annotations[DRIVER_IDENTITY_ANNOTATION] = evaluate_variable_hash(vh) if variables else vh.base
    plugin = dict(dra.values.get("kubeletPlugin") or {})
    plugin["podAnnotations"] = dict(sorted(annotations.items()))
    hashes = {**dra.variable_hashes, DRIVER_IDENTITY_PATH: vh} if variables else dra.variable_hashes
    return {
        **components,
        DRA_COMPONENT: dataclasses.replace(
            dra, values={**dra.values, "kubeletPlugin": plugin}, variable_hashes=hashes
        ),
    }


def gate_object_providers(
    spec: GateSpec,
    components: Mapping[str, Component],
    objects: Mapping[tuple[str, str, str, str], str],
) -> list[str]:
    """Which releases render the object ``spec`` waits for: ``<component> chart`` (registry
    ``renders``; for ``crd-established``: a component owning or shipping the CRD, registry
    ``crds``; ``<component> operator`` for a CRD its operator creates while reconciling, registry
    ``crds.createsAtRuntime``) or ``<component> manifests`` (a rendered manifest object, ``objects`` from
    :func:`gpucluster.charts.manifests.render_manifest_charts`). Rollout and min-version gates wait for
    a workload of the gated component -- its chart's (the SDK helpers name it from its values) or
    one its operator creates from a custom resource (NVKE's multus): ``<component> chart``, not
    checked at plan time."""
    from gpucluster.recipes.catalog import load_catalog

    registry = load_catalog().components
    if spec.kind in ("rollout", "min-version"):
        return [f"{spec.component} chart"]
    if spec.kind == "crd-established":
        crd = spec.name_of_object or ""
        out = [
            f"{n} chart"
            for n in sorted(components)
            if n in registry
            and crd
            in (
                *registry[n].crds.owns,
                *(s for s, _ in registry[n].crds.also_ships),
                *(
                    name
                    for _a, kind, name in registry[n].renders
                    if kind == "CustomResourceDefinition"
                ),
            )
        ]
        out += [
            f"{n} operator"
            for n in sorted(components)
            if n in registry and crd in registry[n].crds.creates_at_runtime
        ]
        return out + sorted(
            {
                f"{c} manifests"
                for (g, k, _ns, name), c in objects.items()
                if k == "CustomResourceDefinition" and name == crd
            }
        )
    group = spec.api_version.split("/")[0] if "/" in spec.api_version else ""
    out = [
        f"{n} chart"
        for n in sorted(components)
        if n in registry
        and any(
            api.split("/")[0] == group
            and kind == spec.kind_name
            and (spec.name_of_object in (None, name))
            for api, kind, name in registry[n].renders
        )
    ]
    return out + sorted(
        {
            f"{c} manifests"
            for (g, k, ns, name), c in objects.items()
            if g == group
            and k == spec.kind_name
            and spec.name_of_object in (None, name)
            and (spec.namespace is None or spec.namespace == ns)
        }
    )


def check_gate_objects(
    cluster: ClusterSpec,
    gates: Sequence[GateSpec],
    components: Mapping[str, Component],
    objects: Mapping[tuple[str, str, str, str], str],
    *,
    recipe: Recipe | None = None,
) -> None:
    """Refuse a stack in which a gate waits for an object no release renders
    (:func:`gate_object_providers`): ``terraform apply`` would wait out the gate's timeout and
    nothing after it would install.

    Raises:
        GpuclusterError: one problem ``GATE-NO-OBJECT`` per such gate, naming the gate, the object,
            the component and -- for a recipe read from a RecipeResult -- its ``componentRefs[i]``.
    """
    from gpucluster.errors import Problem

    problems = []
    for spec in gates:
        if gate_object_providers(spec, components, objects):
            continue
        what = (
            f"CRD {spec.name_of_object}"
            if spec.kind == "crd-established"
            else f"{spec.kind_name} {spec.name_of_object}"
            if spec.name_of_object
            else f"every {spec.kind_name} ({spec.api_version})"
        )
        file = recipe.file if recipe is not None and recipe.file else cluster.source
        key = recipe.ref_keys.get(spec.component, "") if recipe is not None and recipe.file else ""
        problems.append(
            Problem(
                id="GATE-NO-OBJECT",
                message=f"gate {spec.name} waits for {what}, which no release of this stack renders: terraform apply would "
                f"wait {spec.timeout_seconds} s and fail, and nothing after {spec.component} would install",
                file=file,
                cluster=cluster.name,
                component=spec.component,
                key=(f"{key}.manifestFiles" if key else "manifestFiles"),
                fix=f"add the manifest that creates it to {spec.component}'s manifestFiles (the catalog recipe for these criteria "
                "has one: gpucluster recipe ...), or remove the component",
            )
        )
    if problems:
        raise GpuclusterError(problems=problems)

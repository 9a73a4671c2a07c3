"""The one builder of gpucluster's own Job charts: readiness gates (:mod:`gpucluster.charts.gates`), CRD
steps (:mod:`gpucluster.charts.crds`) and teardown guards (:mod:`gpucluster.charts.teardown`).

Each is a local Helm chart holding a ServiceAccount, a (Cluster)Role and its binding, and one
Helm hook Job that runs a POSIX shell script with ``kubectl``. What they share is decided here,
once:

* the kubectl image: :data:`DEFAULT_KUBECTL_IMAGE` pinned by digest, or ``settings.gateImage``
  validated by :func:`gate_image` (no moving tags);
* the pod: non-root (:data:`RUN_AS_USER`), ``RuntimeDefault`` seccomp, read-only root file system,
  no capabilities, a size-limited ``/tmp`` emptyDir, no Service links, on the system nodes
  (``scheduling.system`` node selector and keyed tolerations, :func:`system_tolerations`);
* the Job: ``backoffLimit``, ``activeDeadlineSeconds``, a day's ``ttlSecondsAfterFinished``, and
  (optionally) the ``podFailurePolicy`` that fails the Job at once on the script's exit 1 and
  ignores disruptions;
* the NetworkPolicy of the Job's pods (:func:`job_network_policy`: no ingress, egress only to the
  API server ports :data:`API_SERVER_PORTS`), which every Job chart carries (gate, CRD step and
  teardown guard alike; each Job only talks to the API server);
* Helm values: a value the templates read is written as a sentinel (:func:`sentinel`) and
  replaced by ``{{ .Values.<key> | quote }}`` when the chart is rendered (:func:`render_job_chart`).

Key order of every object is part of the rendered output (``dump_documents`` keeps it), so the
charts are byte-identical to the ones each module built by hand before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpucluster.charts.imagemirror import mirror_reference
from gpucluster.charts.manifests import MANIFEST_CHART_VERSION, dump_documents, make_chart
from gpucluster.errors import GpuclusterError
from gpucluster.model import GATE_IMAGE_SETTING, ClusterSpec, LocalChart, absolute_key

DEFAULT_KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.34.1@sha256:59bafa07ff3a6d4b417e7633ddb9d79a9606ca98bf64bac080b3e65748669250"
"""Upstream Kubernetes kubectl image (kubernetes/kubernetes ``build/server-image/kubectl``:
debian-base with ``/bin/sh``, bash, coreutils, grep, sed; entrypoint ``/bin/kubectl``, which
the Job's ``command`` replaces). v1.34.1 matches the AKS 1.34 minimum (kubectl skew +-1) and is
>= 1.31. Pinned by digest; the tag and digest pair is pinned identically by several public
projects. Override per cluster with ``settings.gateImage`` (e.g. an ACR mirror)."""

RUN_AS_USER = 65532
"""UID and GID of every gpucluster Job's pod (the distroless ``nonroot`` user)."""

MOVING_TAGS = frozenset(
    {"latest", "stable", "edge", "main", "master", "nightly", "dev", "release", "current"}
)
"""Image tags that name a different image over time; refused for ``settings.gateImage``."""

API_SERVER_PORTS = (443, 6443)
"""TCP ports a gate Job may reach: the Kubernetes API server behind the ``kubernetes`` Service
(AKS and most managed clusters serve it on 443, kubeadm/OKE/kind on 6443). NetworkPolicy is
evaluated after the Service's DNAT, so the policy names the endpoint's port, not the Service's."""

JOB_TTL_SECONDS = 86400
"""``ttlSecondsAfterFinished`` of every gpucluster Job (a day to read its log)."""

_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
_SENTINEL_PREFIX = "__gpucluster_helm_value_"


def image_tag(image: str) -> str | None:
    """The tag of an image reference (``repo:tag`` or ``repo:tag@sha256:...``), or None."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def gate_image(cluster: ClusterSpec) -> str:
    """The kubectl image of the cluster's gpucluster Jobs: ``settings.gateImage`` or the default,
    at the cluster's ``images.mirror`` when one is set (:func:`gpucluster.charts.imagemirror.mirror_reference`):
    the Jobs are Helm hooks, which Helm 3's post-renderer never sees, so the chart names the
    mirror itself.

    The default is pinned by digest. A user image must carry a version tag or a digest; a moving
    tag (:data:`MOVING_TAGS`, e.g. ``:latest``) is refused, and a tag without a digest gets the
    policy warning ``GATE-IMAGE-DIGEST`` (:func:`gpucluster.recipes.policy.check_gate_image_digest`).

    Raises:
        GpuclusterError: ``clusters[<i>].settings.gateImage`` is not an image reference with a tag
            or digest, or uses a moving tag.
    """
    image = _chosen_image(cluster)
    mirror = getattr(cluster, "image_mirror", None)
    return (mirror_reference(image, mirror) or image) if mirror else image


def _chosen_image(cluster: ClusterSpec) -> str:
    image = (cluster.settings or {}).get(GATE_IMAGE_SETTING)
    if image is None:
        return DEFAULT_KUBECTL_IMAGE
    last = str(image).rsplit("/", 1)[-1]
    moving = image_tag(image) if isinstance(image, str) else None
    if moving is not None and moving.lower() in MOVING_TAGS and "@" not in image:
        raise GpuclusterError(
            f"settings.{GATE_IMAGE_SETTING} '{image}' uses the moving tag ':{moving}': every run may pull another kubectl",
            file=cluster.source,
            cluster=cluster.name,
            key=absolute_key(cluster, f"settings.{GATE_IMAGE_SETTING}"),
            allowed="registry/repository:version@sha256:digest (digest recommended) or registry/repository:version",
            fix=f"pin a version and its digest, e.g. {DEFAULT_KUBECTL_IMAGE} or your mirror of it "
            "(`crane digest <image>` or `docker buildx imagetools inspect <image>` prints the digest)",
        )
    if (
        not isinstance(image, str)
        or not _IMAGE.fullmatch(image)
        or ("@" not in image and ":" not in last)
    ):
        raise GpuclusterError(
            f"settings.{GATE_IMAGE_SETTING} '{image}' is not a pinned image reference",
            file=cluster.source,
            cluster=cluster.name,
            key=absolute_key(cluster, f"settings.{GATE_IMAGE_SETTING}"),
            allowed="registry/repository:tag or registry/repository@sha256:digest of an image with kubectl >= 1.31 and /bin/sh",
            fix=f"e.g. myregistry.azurecr.io/kubectl:v1.34.1 (a mirror of {DEFAULT_KUBECTL_IMAGE.split('@')[0]})",
        )
    return image


def system_tolerations(cluster: ClusterSpec) -> list[dict[str, str]]:
    """The system tolerations, keyed ones only (a wildcard toleration is never used for Jobs)."""
    return [t.as_dict() for t in cluster.scheduling.system_tolerations if not t.is_wildcard]


def sentinel(key: str) -> str:
    """A placeholder for the release value ``key`` in an object; :func:`render_job_chart` writes
    it as ``{{ .Values.<key> | quote }}``."""
    return f"{_SENTINEL_PREFIX}{key}__"


def helm_expr(key: str) -> str:
    """The Go template expression that reads release value ``key`` as a quoted string."""
    return "{{ .Values." + key + " | quote }}"


@dataclass(frozen=True)
class HookJob:
    """One gpucluster Job and what it needs: the shape of a gate, CRD step or teardown Job.

    Attributes:
        name: the release, ServiceAccount and Job name (``app.kubernetes.io/instance``).
        namespace: where the ServiceAccount and Job live.
        app: ``app.kubernetes.io/name`` (``gpucluster-gate``, ``gpucluster-crds``, ``gpucluster-teardown``).
        rbac_name: name of the (Cluster)Role and its binding.
        rules: the Role's rules.
        container: the container's name (the ``podFailurePolicy`` names it).
        script: the POSIX shell the container runs (``/bin/sh -c``).
        image: the image reference, or :func:`sentinel` ``("image")`` when a release value sets it.
        hook: ``helm.sh/hook`` of the Job (``post-install,post-upgrade``, ``pre-delete``).
        active_deadline_seconds: the Job's ``activeDeadlineSeconds``.
        backoff_limit: the Job's ``backoffLimit``.
        rbac_namespace: a namespaced Role/RoleBinding there; None (default) a ClusterRole/Binding.
        env: container environment after ``HOME=/tmp``.
        limits: container resource limits (requests are ``10m`` CPU, ``64Mi`` memory).
        tmp_size: ``sizeLimit`` of the ``/tmp`` emptyDir.
        mounts / volumes: more volume mounts and volumes after ``/tmp``.
        annotations: Job annotations after the three ``helm.sh/hook*`` ones.
        pod_annotations: pod template annotations (None: none).
        fail_fast: the ``podFailurePolicy``: exit 1 of the container fails the Job at once and
            pod disruptions do not count against ``backoffLimit``.
    """

    name: str
    namespace: str
    app: str
    rbac_name: str
    rules: Sequence[Mapping[str, Any]]
    container: str
    script: str
    image: str
    hook: str
    active_deadline_seconds: int
    backoff_limit: int
    rbac_namespace: str | None = None
    env: Sequence[Mapping[str, str]] = ()
    limits: Mapping[str, str] = field(default_factory=lambda: {"cpu": "200m", "memory": "128Mi"})
    tmp_size: str = "16Mi"
    mounts: Sequence[Mapping[str, Any]] = ()
    volumes: Sequence[Mapping[str, Any]] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    pod_annotations: Mapping[str, str] | None = None
    fail_fast: bool = True

    @property
    def labels(self) -> dict[str, str]:
        """The labels of every object of the chart."""
        return {
            "app.kubernetes.io/name": self.app,
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/part-of": "gpucluster",
        }


def job_objects(cluster: ClusterSpec, job: HookJob) -> list[dict[str, Any]]:
    """``[ServiceAccount, (Cluster)Role, (Cluster)RoleBinding, Job]`` of ``job`` (see the module
    docstring); the pod runs on the cluster's system nodes."""
    labels = job.labels
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": job.name, "namespace": job.namespace, "labels": dict(labels)},
        "automountServiceAccountToken": True,
    }
    subject = {"kind": "ServiceAccount", "name": job.name, "namespace": job.namespace}
    role_kind = "ClusterRole" if job.rbac_namespace is None else "Role"
    rbac_meta: dict[str, Any] = {"name": job.rbac_name}
    if job.rbac_namespace is not None:
        rbac_meta["namespace"] = job.rbac_namespace
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": role_kind,
        "metadata": {**rbac_meta, "labels": dict(labels)},
        "rules": [dict(r) for r in job.rules],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": role_kind + "Binding",
        "metadata": {**rbac_meta, "labels": dict(labels)},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": job.rbac_name,
        },
        "subjects": [subject],
    }
    pod: dict[str, Any] = {
        "serviceAccountName": job.name,
        "automountServiceAccountToken": True,
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if cluster.scheduling.system_node_selector:
        pod["nodeSelector"] = dict(cluster.scheduling.system_node_selector)
    tolerations = system_tolerations(cluster)
    if tolerations:
        pod["tolerations"] = tolerations
    pod["containers"] = [
        {
            "name": job.container,
            "image": job.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/sh", "-c", job.script],
            "env": [{"name": "HOME", "value": "/tmp"}, *(dict(e) for e in job.env)],
            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": dict(job.limits)},
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "runAsNonRoot": True,
                "capabilities": {"drop": ["ALL"]},
            },
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *(dict(m) for m in job.mounts)],
        }
    ]
    pod["volumes"] = [
        {"name": "tmp", "emptyDir": {"sizeLimit": job.tmp_size}},
        *(dict(v) for v in job.volumes),
    ]
    spec: dict[str, Any] = {
        "backoffLimit": job.backoff_limit,
        "activeDeadlineSeconds": job.active_deadline_seconds,
        "ttlSecondsAfterFinished": JOB_TTL_SECONDS,
    }
    if job.fail_fast:
        spec["podFailurePolicy"] = {
            "rules": [
                {
                    "action": "FailJob",
                    "onExitCodes": {
                        "containerName": job.container,
                        "operator": "In",
                        "values": [1],
                    },
                },
                {
                    "action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                },
            ]
        }
    template_meta: dict[str, Any] = {"labels": dict(labels)}
    if job.pod_annotations is not None:
        template_meta["annotations"] = dict(job.pod_annotations)
    spec["template"] = {"metadata": template_meta, "spec": pod}
    job_doc = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": dict(labels),
            "annotations": {
                "helm.sh/hook": job.hook,
                "helm.sh/hook-weight": "0",
                "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
                **job.annotations,
            },
        },
        "spec": spec,
    }
    return [sa, role, binding, job_doc]


def job_network_policy(job: HookJob) -> dict[str, Any]:
    """A default-deny-style NetworkPolicy for the Job's own pods (Kubernetes ``networking.k8s.io/v1``).

    Selects only the Job's pods (``app.kubernetes.io/name: <app>``, ``app.kubernetes.io/instance:
    <name>``): no ingress at all, egress only to TCP :data:`API_SERVER_PORTS` (``kubectl get``
    against the API server; in-cluster kubectl uses ``KUBERNETES_SERVICE_HOST``, an IP, so no
    DNS). It does not select other pods of the namespace: a gate runs in the gated component's
    namespace, and a namespace-wide deny would cut the operator off. Enforced where the cluster
    runs a NetworkPolicy engine (Azure CNI with Cilium/Calico, OKE with Calico, ...); elsewhere it
    is inert.
    """
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": job.rbac_name, "namespace": job.namespace, "labels": job.labels},
        "spec": {
            "podSelector": {
                "matchLabels": {
                    "app.kubernetes.io/name": job.app,
                    "app.kubernetes.io/instance": job.name,
                }
            },
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [{"ports": [{"protocol": "TCP", "port": port} for port in API_SERVER_PORTS]}],
        },
    }


def render_job_chart(
    cluster: ClusterSpec,
    job: HookJob,
    *,
    description: str,
    before_job: Sequence[tuple[str, Sequence[Mapping[str, Any]]]] = (),
    values: Mapping[str, Any] | None = None,
    version: str = MANIFEST_CHART_VERSION,
    app_version: str = "",
) -> LocalChart:
    """The chart of ``job``: templates ``serviceaccount``, ``rbac``, ``before_job`` (``(stem,
    objects)``, e.g. the CRD step's ConfigMap), ``job`` and ``networkpolicy``
    (:func:`job_network_policy`). The NetworkPolicy is a plain template, so it exists before the
    Job runs for every hook the Job charts use: ``post-install,post-upgrade`` (gates, CRD steps;
    Helm runs post hooks after it has created the release's resources) and ``pre-delete`` (teardown
    guards; the release's resources still exist).

    Args:
        cluster: for the system node selector and tolerations.
        job: the Job (its ``image`` a literal, or ``sentinel("image")`` read from ``values``).
        description: one line for ``Chart.yaml``.
        before_job: more templates installed before the Job.
        values: the chart's ``values.yaml`` defaults; every key's :func:`sentinel` in the objects
            becomes ``{{ .Values.<key> | quote }}``. None: no ``values.yaml``.
        version / app_version: ``Chart.yaml`` fields (:func:`gpucluster.charts.manifests.make_chart`).
    """
    keys = tuple(values or ())

    def dump(objects: Sequence[Mapping[str, Any]]) -> str:
        text = dump_documents(objects)
        for key in keys:
            text = text.replace(sentinel(key), helm_expr(key))
        return text

    sa, role, binding, job_doc = job_objects(cluster, job)
    templates = [
        ("serviceaccount", dump([sa])),
        ("rbac", dump([role, binding])),
        *((stem, dump(objects)) for stem, objects in before_job),
        ("job", dump([job_doc])),
        ("networkpolicy", dump([job_network_policy(job)])),
    ]
    extra = (
        None if values is None else {"values.yaml": dump_documents([dict(values)])[len("---\n") :]}
    )
    return make_chart(
        job.name,
        description,
        templates,
        version=version,
        app_version=app_version,
        extra_files=extra,
    )

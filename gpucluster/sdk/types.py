"""Public types of the gpucluster plugin SDK (re-exported by :mod:`gpucluster.sdk`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gpucluster.model import (  # noqa: F401  (re-exported)
    ClusterSpec,
    Component,
    ComponentRef,
    Criteria,
    Finding,
    GateSpec,
    NodePool,
    Recipe,
    RuntimePlan,
    Taint,
    Toleration,
)


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
        min_kubernetes: lowest Kubernetes minor accepted (``"1.34"``: DRA GA, seed aks-gpu-setup).
        provider_id_prefix: node ``spec.providerID`` scheme identifying the platform
            (``"azure://"``, ``"nico://"``), used by ``gpucluster detect``.
        profiles: profile name -> (default value, allowed values); the core refuses other
            names and values before ``gpucluster_prepare_cluster`` runs.
        settings: the platform's own top-level ``settings`` keys; the core refuses any other key
            (besides :data:`gpucluster.sdk.CORE_SETTING_KEYS`) before ``gpucluster_prepare_cluster``
            runs. Nested keys and values are the plugin's to check.
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


@dataclass
class ClusterConnection:
    """How the runtime stack's Helm/Kubernetes providers reach a cluster.

    Either ``kubeconfig_path`` (+ optional ``context``) for existing clusters, or the
    Terraform expressions (tokens) of host, client certificate/key and CA certificate coming
    from the cluster stack's outputs (cross-stack references). Values are opaque to the core.
    """

    kubeconfig_path: str | None = None
    context: str | None = None
    host: Any = None
    client_certificate: Any = None
    client_key: Any = None
    cluster_ca_certificate: Any = None

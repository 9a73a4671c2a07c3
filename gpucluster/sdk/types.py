"""How the runtime stack reaches a cluster: what ``gpucluster_cluster_stack`` returns.

Re-exported by :mod:`gpucluster.sdk`. Every other public type (what hooks receive and return:
``ClusterSpec``, ``Recipe``, ``Component``, ``Platform``, ``Manifest``, ``GateSpec``, ``Finding``,
...) lives in :mod:`gpucluster.model`, the core's one home for plain data; the core imports
nothing from :mod:`gpucluster.sdk`, which only re-exports. (``ClusterConnection`` is used by the
stacks only, never by the core.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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

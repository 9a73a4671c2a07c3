"""How the runtime stack reaches a cluster: what ``gpucluster_cluster_stack`` returns
(:class:`ClusterConnection`, with an :class:`ExecAuth` credential plugin or a token).

Re-exported by :mod:`gpucluster.sdk`. Every other public type (what hooks receive and return:
``ClusterSpec``, ``Recipe``, ``Component``, ``Platform``, ``Manifest``, ``GateSpec``, ``Finding``,
...) lives in :mod:`gpucluster.model`, the core's one home for plain data; the core imports
nothing from :mod:`gpucluster.sdk`, which only re-exports. (``ClusterConnection`` is used by the
stacks only, never by the core.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping


@dataclass(frozen=True)
class ExecAuth:
    """A Kubernetes client-go credential plugin (kubeconfig ``users[].user.exec``).

    The Helm/Kubernetes providers run ``command args...`` with ``env`` added and read an
    ``ExecCredential`` (``client.authentication.k8s.io/<api_version>``) from its stdout, on the
    machine that runs ``terraform`` (a laptop, a CI runner, a Terraform Cloud agent). Nothing is
    stored in state. Example (AKS with Entra ID, seed ``aks-blog-posts``: kubelogin)::

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
        given = [name for name, value in (("kubeconfig", self.kubeconfig_path), ("exec", self.exec),
                                         ("token", self.token), ("client_certificate", self.client_certificate))
                 if value is not None and value != ""]
        if len(given) > 1:
            raise ValueError(f"ClusterConnection has more than one credential ({', '.join(given)}); give exactly one")
        if self.exec is not None and not isinstance(self.exec, ExecAuth):
            raise ValueError(f"ClusterConnection.exec must be an ExecAuth, not {type(self.exec).__name__}")
        if (self.client_certificate is None) != (self.client_key is None):
            raise ValueError("ClusterConnection.client_certificate and client_key go together")
        return given[0] if given else "none"  # type: ignore[return-value]

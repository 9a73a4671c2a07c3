"""Platform detection from a reachable cluster: node ``spec.providerID`` -> ``criteria.service``.

Every platform plugin may declare :attr:`gpucluster.sdk.Platform.provider_id_prefix` (NVKE:
``nico://``, AKS: ``azure://``). ``gpucluster detect`` lists the cluster's nodes (``kubectl get
nodes -o json`` with the given kubeconfig/context, or a saved ``NodeList`` JSON file) and maps
each node's ``providerID`` to the service whose prefix it starts with, as ``aicr snapshot`` maps
``nico://`` to ``service: nvke`` (AICR's NVKE GB200 Setup guide (docs.nvidia.com/aicr/integrator-guide/nvke-gb-200-setup)).

:func:`detect` is pure; :func:`load_nodes` is the only function doing I/O.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import GpuclusterError

KUBECTL_TIMEOUT_SECONDS = 60


@dataclass
class Detection:
    """What the nodes say about the platform.

    Attributes:
        service: the one service every identified node maps to, or None.
        nodes: service -> node names carrying its providerID prefix (sorted).
        unmatched: ``(node, providerID)`` of nodes no plugin claims (``''`` when the node has
            no providerID, e.g. a kind/bare kubeadm node).
    """

    service: str | None
    nodes: dict[str, list[str]] = field(default_factory=dict)
    unmatched: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "nodes": {k: list(v) for k, v in sorted(self.nodes.items())},
            "unmatched": [{"node": n, "providerID": p} for n, p in self.unmatched],
        }


def node_provider_ids(node_list: Any, *, source: str = "<nodes>") -> list[tuple[str, str]]:
    """``(metadata.name, spec.providerID)`` of every node in a ``NodeList`` (or a bare list), sorted.

    Raises:
        GpuclusterError: not a NodeList-shaped document.
    """
    items = node_list.get("items") if isinstance(node_list, Mapping) else node_list
    if not isinstance(items, list):
        raise GpuclusterError(
            "not a Kubernetes NodeList (expected an object with 'items', as `kubectl get nodes -o json` prints)",
            file=source,
            fix="save the output of `kubectl get nodes -o json`",
        )
    out = []
    for i, node in enumerate(items):
        if not isinstance(node, Mapping):
            raise GpuclusterError(
                f"items[{i}] is not a Node object",
                file=source,
                key=f"items[{i}]",
                fix="save the output of `kubectl get nodes -o json` unedited",
            )
        metadata, spec = node.get("metadata") or {}, node.get("spec") or {}
        if not isinstance(metadata, Mapping) or not isinstance(spec, Mapping):
            raise GpuclusterError(
                f"items[{i}] has a metadata or spec that is not an object",
                file=source,
                key=f"items[{i}]",
                fix="save the output of `kubectl get nodes -o json` unedited",
            )
        name = str(metadata.get("name") or f"items[{i}]")
        pid = spec.get("providerID") or ""
        out.append((name, str(pid)))
    return sorted(out)


def detect(node_list: Any, prefixes: Mapping[str, str], *, source: str = "<nodes>") -> Detection:
    """Map providerIDs to services.

    Args:
        node_list: a NodeList document (``{"items": [...]}``) or a list of Node objects.
        prefixes: service -> providerID prefix, e.g. ``{"aks": "azure://", "nvke": "nico://"}``
            (from the plugins' :class:`~gpucluster.sdk.Platform` declarations).

    Returns:
        Detection; ``service`` is set when all identified nodes agree (unclaimed nodes, e.g.
        without a providerID, do not prevent it).

    Raises:
        GpuclusterError: no node is claimed by any plugin, or nodes map to several services.
    """
    ordered = sorted(
        ((s, p) for s, p in prefixes.items() if p), key=lambda sp: (-len(sp[1]), sp[0])
    )
    result = Detection(service=None)
    for name, pid in node_provider_ids(node_list, source=source):
        service = next((s for s, p in ordered if pid.startswith(p)), None)
        if service is None:
            result.unmatched.append((name, pid))
        else:
            result.nodes.setdefault(service, []).append(name)
    known = ", ".join(f"{p} -> {s}" for s, p in sorted(prefixes.items()) if p)
    if not result.nodes:
        seen = sorted(
            {
                pid.split("://")[0] + "://" if "://" in pid else (pid or "<none>")
                for _, pid in result.unmatched
            }
        )
        raise GpuclusterError(
            f"no node has a providerID a platform plugin declares (seen: {', '.join(seen) or 'no nodes'})",
            file=source,
            allowed=known,
            fix="set criteria.service in the cluster file yourself, or install the plugin for this platform",
        )
    if len(result.nodes) > 1:
        parts = "; ".join(f"{s}: {', '.join(n)}" for s, n in sorted(result.nodes.items()))
        raise GpuclusterError(
            f"nodes belong to several platforms ({parts})",
            file=source,
            fix="point --kubeconfig/--context at one cluster",
        )
    result.service = next(iter(result.nodes))
    return result


Runner = Callable[..., subprocess.CompletedProcess]

MAX_NODES_JSON_BYTES = 256 << 20
"""Largest ``--nodes-json`` read (256 MiB: a NodeList of thousands of nodes is tens of MiB)."""


def load_nodes(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    nodes_json: str | None = None,
    run: Runner = subprocess.run,
    which: Callable[[str], str | None] = shutil.which,
) -> tuple[Any, str]:
    """The cluster's NodeList and a label for error messages.

    ``nodes_json`` (a file written by ``kubectl get nodes -o json``) wins; otherwise ``kubectl
    get nodes -o json`` runs with ``--kubeconfig``/``--context`` when given.

    Raises:
        GpuclusterError: unreadable/invalid JSON file, no kubectl on PATH, or kubectl failing
            (its last stderr line is included).
    """
    if nodes_json:
        try:
            path = Path(nodes_json).expanduser()
        except RuntimeError:  # ~user of a user this system does not know
            raise GpuclusterError(
                "the nodes file names the home folder of an unknown user",
                file=nodes_json,
                key="--nodes-json",
                fix="write the path without ~user, or as an absolute path",
            ) from None
        try:
            with path.open(
                "rb"
            ) as f:  # a pipe (/dev/stdin) is fine; what is read is bounded (/dev/zero)
                data = f.read(MAX_NODES_JSON_BYTES + 1)
        except OSError as exc:
            raise GpuclusterError(
                f"cannot read the nodes file: {exc.strerror or exc}",
                file=nodes_json,
                key="--nodes-json",
                fix="check the path and permissions of --nodes-json",
            ) from None
        except ValueError:  # a NUL byte in the name
            raise GpuclusterError(
                "the nodes file name holds a NUL byte",
                file=nodes_json,
                key="--nodes-json",
                fix="check the path of --nodes-json",
            ) from None
        if len(data) > MAX_NODES_JSON_BYTES:
            raise GpuclusterError(
                f"the nodes file is larger than {MAX_NODES_JSON_BYTES >> 20} MiB",
                file=nodes_json,
                key="--nodes-json",
                fix="save `kubectl get nodes -o json` output, not another file",
            )
        try:
            return _parse_json(data), nodes_json
        except ValueError as exc:
            raise GpuclusterError(
                f"the nodes file is not JSON: {exc}",
                file=nodes_json,
                key="--nodes-json",
                fix="save `kubectl get nodes -o json` output",
            ) from None
    kubectl = which("kubectl")
    if kubectl is None:
        raise GpuclusterError(
            "kubectl is not on PATH, so the cluster's nodes cannot be listed",
            key="--nodes-json",
            fix="install kubectl, or pass --nodes-json FILE saved from `kubectl get nodes -o json`",
        )
    cmd = [kubectl, "get", "nodes", "-o", "json", f"--request-timeout={KUBECTL_TIMEOUT_SECONDS}s"]
    if kubeconfig:
        try:
            expanded = Path(kubeconfig).expanduser()
        except RuntimeError:  # ~user of a user this system does not know
            raise GpuclusterError(
                "the kubeconfig path names the home folder of an unknown user",
                file=kubeconfig,
                key="--kubeconfig",
                fix="write the path without ~user, or as an absolute path",
            ) from None
        cmd.append(f"--kubeconfig={expanded}")  # one argument each: a value is never an option
    if context:
        cmd.append(f"--context={context}")
    label = (
        f"kubectl ({kubeconfig or 'default kubeconfig'}{', context ' + context if context else ''})"
    )
    try:
        proc = run(
            cmd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=KUBECTL_TIMEOUT_SECONDS + 15,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GpuclusterError(
            f"running kubectl failed: {exc}",
            file=label,
            fix="check the kubeconfig and that the cluster is reachable",
        ) from exc
    if proc.returncode != 0:
        last = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise GpuclusterError(
            f"`kubectl get nodes` failed: {last[0]}",
            file=label,
            fix="check --kubeconfig/--context and that the cluster is reachable",
        )
    try:
        return _parse_json(proc.stdout), label
    except ValueError as exc:
        raise GpuclusterError(
            f"kubectl printed no JSON: {exc}",
            file=label,
            fix="run `kubectl get nodes -o json` yourself to see what it prints",
        ) from exc


def _parse_json(data: str | bytes) -> Any:
    """``json.loads`` whose every failure is a ValueError (bad UTF-8, too deep nesting included)."""
    try:
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        return json.loads(data)
    except RecursionError:
        raise ValueError("nesting is too deep") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (invalid byte at offset {exc.start})") from None


def render_text(result: Detection, *, kubeconfig: str | None, context: str | None) -> str:
    """Human summary plus the cluster-file snippet to start from."""
    from gpucluster.errors import (
        escaped,
    )  # node names and providerIDs come from the cluster: one line each

    lines = [f"service: {escaped(result.service)}"]
    for service, names in sorted(result.nodes.items()):
        lines.append(f"  {escaped(service)}: {len(names)} node(s): {escaped(', '.join(names))}")
    if result.unmatched:
        lines.append(
            f"  unclaimed: {escaped(', '.join(n + (f' ({p})' if p else ' (no providerID)') for n, p in result.unmatched))}"
        )
    lines += ["", "cluster file snippet:", "  criteria:", f"    service: {escaped(result.service)}"]
    if kubeconfig or context:
        lines.append("  existing:")
        if kubeconfig:
            lines.append(f"    kubeconfig: {escaped(kubeconfig)}")
        if context:
            lines.append(f"    context: {escaped(context)}")
    return "\n".join(lines) + "\n"


def provider_prefixes(platforms: Mapping[str, Any]) -> dict[str, str]:
    """service -> provider_id_prefix for platforms that declare one."""
    return {
        s: p.provider_id_prefix
        for s, p in sorted(platforms.items())
        if getattr(p, "provider_id_prefix", None)
    }


def run_detect(
    *,
    kubeconfig: str | None,
    context: str | None,
    nodes_json: str | None,
    platforms: Mapping[str, Any],
    run: Runner = subprocess.run,
    which: Callable[[str], str | None] = shutil.which,
) -> Detection:
    """:func:`load_nodes` then :func:`detect` against the plugins' declared prefixes."""
    doc, label = load_nodes(
        kubeconfig=kubeconfig, context=context, nodes_json=nodes_json, run=run, which=which
    )
    return detect(doc, provider_prefixes(platforms), source=label)


__all__: Sequence[str] = (
    "Detection",
    "detect",
    "load_nodes",
    "node_provider_ids",
    "provider_prefixes",
    "render_text",
    "run_detect",
)

"""Chart repository mirrors (cluster-file key ``charts``): where every chart is pulled from, pure Python.

Many GPU clusters sit behind egress rules that allow one registry (an Azure Container Registry,
a Harbor or Artifactory instance) and not the charts' upstream repositories. The cluster file
names that registry once, and both the synthesized ``helm_release.repository`` (and the CRD
step's ``helm_template``) and ``gpucluster charts pull`` / ``render --pull`` use it::

    charts:
      mirror: oci://myacr.azurecr.io/helm          # every chart: oci://myacr.azurecr.io/helm/<chart>
      mirrors:                                     # per upstream repository (exact URL), before `mirror`
        https://helm.ngc.nvidia.com/nvidia: https://artifactory.example.com/helm-nvidia

Given at the top level (the default of every cluster), per cluster (replacing the default as a
whole, as ``backend`` does), or both. The mirror holds the same charts at the same versions under
the same chart names: an OCI mirror as ``<mirror>/<chart>:<version>`` (what ``helm push
<chart>-<version>.tgz oci://myacr.azurecr.io/helm`` makes), an HTTP mirror as a chart
repository whose ``index.yaml`` lists them (Helm documentation, "The Chart Repository Guide",
https://helm.sh/docs/topics/chart_repository/, and "Use OCI-based registries",
https://helm.sh/docs/topics/registries/).

The mirror changes only where a chart is fetched from: a gate's ``gatedHash`` (what the component
installs) and ``gpucluster upgrade-check`` still see the upstream repository, so moving to a
mirror re-runs no gate. No credentials are accepted in a URL: Terraform's helm provider and
``charts pull`` read registry logins from Helm's registry configuration (``helm registry login``,
``az acr login``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from gpucluster.errors import GpuclusterError
from gpucluster.fields import Where
from gpucluster.model import ChartMirrors, PlanNode

KEYS = ("mirror", "mirrors")
URL = r"(https?|oci)://[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?(/[A-Za-z0-9._~-]+)*/?"
"""A repository URL: ``https://``, ``http://`` or ``oci://``, a host with an optional port and a
path of plain segments (no user info, query or fragment), matched whole."""
_DOCS = "see docs/cluster-file.md (charts)"


def normalize(url: str) -> str:
    """``url`` without a trailing ``/`` (how repositories are compared and written)."""
    return url.rstrip("/")


def _url(value: Any, *, file: str, cluster: str | None, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise GpuclusterError(
            f"'{key}' must be a repository URL string",
            file=file,
            cluster=cluster,
            key=key,
            allowed="https://HOST/PATH, http://HOST/PATH or oci://HOST/PATH",
            fix="quote the URL",
        )
    if "@" in value.split("://", 1)[-1].split("/", 1)[0]:
        raise GpuclusterError(
            f"'{key}': credentials do not belong in the cluster file",
            file=file,
            cluster=cluster,
            key=key,
            fix="remove the user name and password from the URL; log in with `helm registry login HOST` (or `az acr login "
            "--name REGISTRY`) on the machine that runs Terraform and `gpucluster charts pull`",
        )
    port = re.match(r"[a-z]+://[^/:]+:([0-9]+)", value)  # a socket's port is 1 to 65535
    bad_port = (
        f": port {int(port[1])} is not 1 to 65535" if port and not 0 < int(port[1]) < 65536 else ""
    )
    if not re.fullmatch(URL, value) or bad_port:
        raise GpuclusterError(
            f"invalid repository URL {value!r}{bad_port}",
            file=file,
            cluster=cluster,
            key=key,
            allowed="https://HOST[:PORT]/PATH, http://... or oci://..., without user, query or fragment",
            fix="write the mirror's URL as `helm repo add` or `helm push` takes it, e.g. "
            "oci://myacr.azurecr.io/helm",
        )
    return normalize(value)


def parse_charts(raw: Any, *, file: str, cluster: str | None, key: str) -> ChartMirrors | None:
    """Validate one ``charts`` mapping of the cluster file.

    Args:
        raw: the parsed YAML value, ``{mirror: URL, mirrors: {UPSTREAM: URL, ...}}`` (both optional).
        file / cluster / key: for errors (``key`` is ``charts`` or ``clusters[<i>].charts``).

    Returns:
        the :class:`~gpucluster.model.ChartMirrors` (URLs without a trailing ``/``, ``mirrors``
        sorted by upstream), or None when it sets neither key.

    Raises:
        GpuclusterError: not a mapping, unknown keys, a URL that is not ``https://``, ``http://``
            or ``oci://`` with a host, a port 1 to 65535 and plain path segments, a URL with user info (credentials),
            an upstream given twice (``https://x/`` and ``https://x``) or mapped to itself.
    """
    w: dict[str, Any] = {"file": file, "cluster": cluster}
    fields = Where(file, cluster).fields(
        raw, key, allowed="mirror: URL, mirrors: {UPSTREAM: URL}", fix=_DOCS
    )
    fields.check_keys(KEYS, context=f"in '{key}'", fix=_DOCS)
    default = None if raw.get("mirror") is None else _url(raw["mirror"], key=f"{key}.mirror", **w)
    by_upstream: dict[str, str] = {}
    table = fields.get_fields(
        "mirrors", fix=f"map each upstream repository URL to its mirror URL; {_DOCS}"
    )
    if table is not None:
        for upstream_raw, mirror_raw in table.items():
            upstream = _url(upstream_raw, key=f"{key}.mirrors", **w)
            where = f"{key}.mirrors[{upstream_raw}]"
            mirror = _url(mirror_raw, key=where, **w)
            if upstream in by_upstream:
                raise GpuclusterError(
                    f"upstream repository {upstream!r} is given twice in '{key}.mirrors'",
                    key=where,
                    fix="keep one entry per upstream repository",
                    **w,
                )
            if mirror == upstream:
                raise GpuclusterError(
                    f"'{where}' mirrors a repository to itself",
                    key=where,
                    fix="remove the entry (the upstream is used when no mirror matches)",
                    **w,
                )
            by_upstream[upstream] = mirror
    if default is None and not by_upstream:
        return None
    return ChartMirrors(default=default, by_upstream=tuple(sorted(by_upstream.items())), key=key)


def mirrored(repository: str, mirrors: ChartMirrors | None) -> str:
    """Where a chart of ``repository`` is fetched from: its ``mirrors`` entry, else ``mirror``,
    else ``repository`` itself (an empty repository, a local chart, stays empty)."""
    if mirrors is None or not repository:
        return repository
    upstream = normalize(repository)
    for key, target in mirrors.by_upstream:
        if key == upstream:
            return target
    return mirrors.default or repository


def apply_mirrors(
    nodes: Sequence[PlanNode], mirrors: ChartMirrors | None, *, cluster: str, file: str
) -> list[PlanNode]:
    """``nodes`` with every remote chart (``kind == "chart"``) and CRD step source fetched through
    ``mirrors`` (:func:`mirrored`): a new list, a node whose source changes replaced by a new
    PlanNode; ``nodes`` are left as they are.

    Raises:
        GpuclusterError: two charts of the same name from different upstream repositories would
            come from one mirror (a mirror holds one chart per name), naming both upstreams.
    """
    if mirrors is None:
        return list(nodes)
    seen: dict[tuple[str, str], str] = {}

    def through(repository: str, chart: str) -> str:
        target = mirrored(repository, mirrors)
        if target != repository:
            upstream = seen.setdefault((target, chart), normalize(repository))
            if upstream != normalize(repository):
                raise GpuclusterError(
                    f"chart '{chart}' of {upstream} and of {normalize(repository)} would both come from mirror {target}",
                    file=file,
                    cluster=cluster,
                    key=f"{mirrors.key}.mirrors",
                    fix="give one of the upstream repositories its own entry in charts.mirrors",
                )
        return target

    out = []
    for node in nodes:
        changes: dict[str, Any] = {}
        if node.kind == "chart" and node.repository:
            changes["repository"] = through(node.repository, node.chart)
        if node.crd_source is not None and node.crd_source.repository:
            changes["crd_source"] = dataclasses.replace(
                node.crd_source,
                repository=through(node.crd_source.repository, node.crd_source.chart),
            )
        out.append(dataclasses.replace(node, **changes) if changes else node)
    return out

"""``gpucluster charts pull``: every chart the runtime stacks pin, fetched into the chart cache.

Pure Python (no cdktf). The charts are exactly the ``helm_release`` s Terraform installs
(:class:`~gpucluster.model.PlanNode` of kind ``chart``: repository, chart, version, with the
cluster file's mirror applied, :mod:`gpucluster.charts.mirrors`); each is pulled once, with Helm's own
client (PyPI ``helm-python-sdk``, ``helm_python.pull``: an HTTP chart repository through its
``index.yaml``, or an OCI registry), into :mod:`gpucluster.charts.chartcache`. ``render`` and ``lint``
then read it from there, offline.

OCI registries are reached over HTTPS, except on a loopback address (``localhost``,
``127.0.0.0/8``, ``::1``), where plain HTTP is used -- the registries Docker treats as insecure
by default (Docker Engine API, ``RegistryServiceConfig.InsecureRegistryCIDRs``: "By default, local
registries (::1/128 and 127.0.0.0/8) are configured as insecure",
https://docs.docker.com/reference/api/engine/version/v1.57/schemas/RegistryServiceConfig/).
Registry logins come from Helm's registry configuration (``helm registry login``, ``az acr
login``); none is read from the cluster file.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from gpucluster.charts import chartcache
from gpucluster.charts.helmsdk import helm
from gpucluster.model import RuntimePlan

PULL_FIX = (
    "make the repository reachable from here, or name a mirror that holds the chart (charts.mirror or "
    "charts.mirrors in the cluster file, docs/cluster-file.md); render and lint also read a chart unpacked into a "
    "--charts folder"
)
"""The ``fix:`` of a chart ``charts pull`` cannot have."""


@dataclass(frozen=True)
class PinnedChart:
    """One chart a runtime stack installs, as Terraform fetches it.

    Attributes:
        repository: where it is fetched from (the mirror, when the cluster file names one).
        chart / version: the chart name and pinned version.
        users: ``(cluster, release)`` of every release that installs it, in plan order.
    """

    repository: str
    chart: str
    version: str
    users: tuple[tuple[str, str], ...]


def pinned_charts(plans: Sequence[RuntimePlan]) -> list[PinnedChart]:
    """Every distinct ``(repository, chart, version)`` of the plans' ``chart`` releases, in order of
    first use (plan order, then release order)."""
    found: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for plan in plans:
        for node in plan.nodes:
            if node.kind == "chart" and node.repository:
                found.setdefault((node.repository, node.chart, node.version), []).append(
                    (plan.cluster.name, node.id)
                )
    return [
        PinnedChart(repo, chart, version, tuple(users))
        for (repo, chart, version), users in found.items()
    ]


def is_loopback(repository: str) -> bool:
    """Whether the host of ``repository`` is ``localhost`` or a loopback IP address."""
    host = urlsplit(repository).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def fetch_chart(repository: str, chart: str, version: str, folder: Path) -> None:
    """Pull ``chart`` at ``version`` from ``repository`` and unpack it into ``folder/<chart>/``.

    ``oci://host/path`` pulls ``oci://host/path/<chart>:<version>``; ``https://`` / ``http://``
    reads the repository's ``index.yaml`` (``helm pull --repo``).

    Raises:
        GpuclusterError: the ``render`` extra (helm-python-sdk) is not installed.
        helm_python.HelmError: the repository or the chart version cannot be had.
    """
    hp = helm()
    if repository.startswith("oci://"):
        hp.pull(
            f"{repository.rstrip('/')}/{chart}",
            version=version,
            untar=True,
            untar_dir=folder,
            destination=folder,
            plain_http=is_loopback(repository),
        )
    else:
        hp.pull(
            chart,
            repo_url=repository,
            version=version,
            untar=True,
            untar_dir=folder,
            destination=folder,
        )


@dataclass(frozen=True)
class PullResult:
    """What happened to one :class:`PinnedChart`: ``how`` is ``cached`` (already there), ``pulled``
    or ``failed``; ``path`` the cached chart folder (None when failed); ``reason`` why it failed."""

    pinned: PinnedChart
    how: str
    path: Path | None = None
    reason: str = ""


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or its type name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def pull_one(
    pinned: PinnedChart | tuple[str, str, str], cache_dir: Path, *, refresh: bool = False
) -> PullResult:
    """Make sure one chart is in the cache (:func:`pull_all` for each).

    Args:
        pinned: the chart, or ``(repository, chart, version)``.
        refresh: pull again even when a trusted entry is there.

    Never raises for a chart that cannot be had: the result says why (``how == "failed"``).
    """
    if not isinstance(pinned, PinnedChart):
        pinned = PinnedChart(*pinned, users=())
    repo, chart, version = pinned.repository, pinned.chart, pinned.version
    if not refresh:
        found = chartcache.lookup(cache_dir, repo, chart, version)
        if found is not None:
            return PullResult(pinned, "cached", found)
    try:
        path = chartcache.store(
            cache_dir,
            repo,
            chart,
            version,
            lambda folder: fetch_chart(repo, chart, version, folder),
        )
    except Exception as exc:  # HelmError, ChartCacheError: reported with the chart, never raised
        from gpucluster.errors import GpuclusterError

        if isinstance(exc, GpuclusterError):
            raise
        return PullResult(pinned, "failed", reason=first_line(exc))
    return PullResult(pinned, "pulled", path)


def pull_all(
    plans: Sequence[RuntimePlan], cache_dir: Path, *, refresh: bool = False
) -> list[PullResult]:
    """:func:`pull_one` for every :func:`pinned_charts` of ``plans``, in that order."""
    return [pull_one(p, cache_dir, refresh=refresh) for p in pinned_charts(plans)]

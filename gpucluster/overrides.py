"""User overrides (placeholder until the overrides work lands; see docs/ARCHITECTURE.md)."""

from __future__ import annotations

from gpucluster.errors import GpuclusterError


def apply_overrides(cluster, recipe, components, catalog) -> None:
    """Apply ``cluster.overrides`` to ``components`` in place (AICR --set semantics)."""
    if cluster.overrides:
        raise GpuclusterError("overrides are not supported yet", cluster=cluster.name, key="overrides")


def parse_overrides(raw, *, file: str, cluster: str):
    """Parse the cluster file's ``overrides`` subtree into a list of Override (in order).

    Raises:
        GpuclusterError: malformed entries (names file, cluster and key).
    """
    if raw:
        raise GpuclusterError("overrides are not supported yet", file=file, cluster=cluster, key="overrides")
    return []

"""Node scheduling injection (placeholder until the scheduling work lands)."""

from __future__ import annotations


def apply_scheduling(cluster, recipe, components, catalog) -> None:
    """Inject node selectors/tolerations into the registry's value paths, in place."""
    return None


def parse_scheduling(raw, *, file: str, cluster: str):
    """Parse the cluster file's ``scheduling`` subtree into a NodeScheduling."""
    from gpucluster.model import NodeScheduling
    from gpucluster.errors import GpuclusterError
    if raw:
        raise GpuclusterError("scheduling inputs are not supported yet", file=file, cluster=cluster, key="scheduling")
    return NodeScheduling()

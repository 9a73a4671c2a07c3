"""Node scheduling injection (placeholder until the scheduling work lands)."""

from __future__ import annotations


def apply_scheduling(cluster, recipe, components, catalog) -> None:
    """Inject node selectors/tolerations into the registry's value paths, in place."""
    return None

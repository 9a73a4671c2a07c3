"""Manifest charts (placeholder until the manifests work lands)."""

from __future__ import annotations


def render_manifest_charts(cluster, recipe, components, catalog):
    """Return ``{(component, "pre"|"post"): LocalChart}`` of fully rendered manifests."""
    return {}

"""Recipe resolution (placeholder until the resolution work lands)."""

from __future__ import annotations


def recipe_for_cluster(cluster, catalog):
    """Resolve ``cluster.criteria`` (or load ``cluster.recipe_file``) into a Recipe."""
    raise NotImplementedError


def effective_components(recipe, catalog):
    """Layer values: registry defaults <- values files <- recipe overrides <- profile."""
    raise NotImplementedError

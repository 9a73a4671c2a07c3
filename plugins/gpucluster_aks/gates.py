"""AKS plugin: gates hooks (see package docstring)."""

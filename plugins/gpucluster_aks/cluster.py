"""AKS plugin: cluster hooks (see package docstring)."""

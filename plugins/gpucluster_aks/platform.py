"""AKS plugin: platform hooks (see package docstring)."""

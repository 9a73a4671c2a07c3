"""AKS plugin: policy hooks (see package docstring)."""

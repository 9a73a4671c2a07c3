"""Built-in gpucluster platform plugin: oke (filled in by its issue)."""

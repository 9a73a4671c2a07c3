"""Built-in gpucluster platform plugin: nvke (filled in by its issue)."""

"""Built-in gpucluster platform plugin: aks (filled in by its issue)."""

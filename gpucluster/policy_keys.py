"""Which Helm values policy owns (a leaf: imported by :mod:`gpucluster.recipes.overrides` and
:mod:`gpucluster.recipes.policy`, which used to import each other for it)."""

from __future__ import annotations

from gpucluster.model import Recipe
from gpucluster.values import leaf_paths

GPU_OPERATOR = "gpu-operator"
DRA_DRIVER = "nvidia-dra-driver-gpu"

ALLOCATION_POLICY_KEYS: dict[str, tuple[str, ...]] = {
    GPU_OPERATOR: ("devicePlugin.enabled",),
    DRA_DRIVER: ("resources.gpus.enabled", "gpuResourcesEnabledOverride"),
}
"""The whole-GPU allocation policy keys (AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md), NVIDIA/aicr#1327). Changing them with a
direct override is deprecated (warning ``POLICY-KEY-OVERRIDE``); binding them to Terraform
variables is refused. Registry ``policyKeys`` add further policy-owned keys."""


def policy_owned_paths(component: str, recipe: Recipe, catalog) -> dict[str, str]:
    """Dotted paths of ``component`` that policy owns -> why (for error messages).

    Union of :data:`ALLOCATION_POLICY_KEYS`, the registry's ``policyKeys`` and the leaf paths
    the chosen profile sets (``recipe.profile_owned``).
    """
    owned: dict[str, str] = {}
    for p in ALLOCATION_POLICY_KEYS.get(component, ()):
        owned[p] = "a whole-GPU allocation-policy key"
    entry = catalog.components.get(component) if catalog is not None else None
    for p in getattr(entry, "policy_keys", ()) or ():
        owned.setdefault(p, "a policy key of the catalog registry (policyKeys)")
    if recipe.profile is not None:
        pname, pvalue = recipe.profile
        for p, _ in leaf_paths(recipe.profile_owned.get(component, {}) or {}):
            owned.setdefault(p, f"owned by the {pname} profile '{pvalue}'")
    return owned

"""CRD ownership across a stack and how each owner's CRDs reach a new chart version.

Helm installs a chart's ``crds/`` on first install only and never upgrades or deletes them
(hashicorp/terraform-provider-helm#976, AICR#2843): bumping an operator whose CRDs live only in
``crds/`` leaves the old schema, new fields are pruned and the operator fails. The catalog
registry says which CRDs each component owns (``crds``, :class:`gpucluster.catalog.CrdSpec`); the
load refuses a CRD two components own (:func:`gpucluster.catalog.check_crd_ownership`).

``computedomains.resource.nvidia.com`` / ``computedomaincliques.resource.nvidia.com``: shipped by
both gpu-operator >= v26.7.0 (``crds/``) and the DRA driver chart; the copies disagree
(``spec.numNodes`` required vs optional, AICR#2546/#2715). Owner: ``nvidia-dra-driver-gpu`` -- its
controller and kubelet plugin are what serve ComputeDomains, so the schema must be the one of the
DRA driver version installed; gpu-operator's own CRD hook (``operator.upgradeCRD``) does not
touch them, so nothing flips them back. gpu-operator lists them under ``alsoShips`` and becomes
their owner only in a stack without the DRA driver (its copy is then the only one).
See docs/upgrading.md, "CRD ownership".
"""

from __future__ import annotations

from typing import Any, Mapping

from gpucluster.model import Component


def _catalog():
    from gpucluster.catalog import load_catalog

    return load_catalog()


def _ships_at(version: str, since: str | None) -> bool:
    from gpucluster.upgrade_check import version_in_range

    return since is None or version_in_range(version, f">={since}")


def crd_owners(components: Mapping[str, Component], catalog: Any = None) -> dict[str, str]:
    """CRD name -> owning enabled component, for one stack.

    An enabled component owns what its registry entry lists in ``crds.owns`` and
    ``crds.createsAtRuntime``; a CRD that no enabled component owns goes to the first enabled
    component (by name) whose chart ships it (``crds.alsoShips``, from ``since`` on).
    Components without a registry entry (plugin-generated ones) own nothing.
    """
    catalog = catalog or _catalog()
    owners: dict[str, str] = {}
    for name in sorted(components):
        entry = catalog.components.get(name)
        if entry is None:
            continue
        for crd in (*entry.crds.owns, *entry.crds.creates_at_runtime):
            owners[crd] = name
    for name in sorted(components):
        entry = catalog.components.get(name)
        if entry is None:
            continue
        for crd, since in entry.crds.also_ships:
            if crd not in owners and _ships_at(components[name].ref.version, since):
                owners[crd] = name
    return dict(sorted(owners.items()))


def owned_crds(component: str, owners: Mapping[str, str]) -> list[str]:
    """The CRDs ``component`` owns in ``owners`` (sorted)."""
    return sorted(crd for crd, owner in owners.items() if owner == component)


def upgrade_mode(component: str, catalog: Any = None) -> str:
    """The registry's ``crds.upgrade`` of ``component`` (``templates`` when it declares none)."""
    entry = (catalog or _catalog()).components.get(component)
    return entry.crds.upgrade if entry is not None else "templates"


def crd_upgrade_path(component: Component, old_version: str, new_version: str) -> str:
    """One line: how the owner's CRDs of ``new_version`` reach the cluster before the operator."""
    mode = upgrade_mode(component.name)
    if mode == "chart":
        return f"the {component.ref.chart} chart's own pre-upgrade hook applies its CRDs of {new_version}"
    if mode == "templates":
        return f"the CRDs are templates of the {component.ref.chart} chart: helm upgrade updates them to {new_version}"
    return (f"gpucluster's CRD step ({component.name}-crds) applies the crds/ of {component.ref.chart} {new_version} "
            "server-side and waits for Established before the operator upgrades")

"""The stages of ``pipeline.build_plan`` pass data forward: each returns what it made.

Overrides, node scheduling, the plugins' values adjustments, the values for each chart version,
the DRA driver identity and the gate objects a platform supplies each take the components of the
stage before and return new ones, leaving their input exactly as it was (its pickle unchanged);
a plan is the same whatever the stages' inputs were used for afterwards.
"""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from gpucluster import pipeline
from gpucluster.errors import GpuclusterError
from gpucluster.sdk.testing import registered
from gpucluster.values import without_paths

RICH = {
    "name": "rich",
    "criteria": {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
    "profile": {"gpuStack": "operator-managed"},
    "overrides": {
        "set": [
            "gpuoperator:dcgmExporter.serviceMonitor.interval=60s",
            "networkoperator:enabled=false",
        ],
        "values": [{"component": "gpu-operator", "values": {"dcgmExporter": {"enabled": True}}}],
        "variables": {"gpuoperator:driver.version": "gpu_driver_version"},
    },
    "scheduling": {
        "system": {
            "nodeSelector": {"kubernetes.azure.com/mode": "system"},
            "tolerations": ["CriticalAddonsOnly:NoSchedule"],
        },
        "workloadGateTaint": "nodewright.nvidia.com/runtime-required=true:NoSchedule",
        "nodeCount": 2,
    },
}


@pytest.fixture(scope="module")
def stages():
    """The inputs of every stage of one plan, and the plan."""
    from gpucluster.recipes import catalog as catalog_mod
    from gpucluster.recipes import overrides as overrides_mod

    with registered() as kit:
        cluster = pipeline.prepare_cluster(kit.cluster(RICH))
        catalog = catalog_mod.load_catalog()
        recipe, components = pipeline.resolved_components(cluster, catalog)
        resolved = overrides_mod.resolved_overrides(cluster, catalog)
        yield kit, cluster, catalog, recipe, components, resolved, kit.plan(RICH)


def _unchanged(stage, *inputs):
    before = pickle.dumps(inputs)
    out = stage()
    assert pickle.dumps(inputs) == before, "the stage changed its input"
    return out


def test_overrides_return_new_components(stages):
    from gpucluster.recipes.overrides import apply_overrides

    _, cluster, catalog, recipe, components, _, _ = stages
    out = _unchanged(
        lambda: apply_overrides(cluster, recipe, components, catalog), recipe, components
    )
    assert "network-operator" in components and "network-operator" not in out
    assert out["gpu-operator"].values["dcgmExporter"]["serviceMonitor"]["interval"] == "60s"
    assert out["gpu-operator"].terraform_variables == {"driver.version": "gpu_driver_version"}
    assert components["gpu-operator"].terraform_variables == {}


def test_scheduling_returns_new_components(stages):
    from gpucluster.recipes.overrides import apply_overrides
    from gpucluster.recipes.scheduling import apply_scheduling

    _, cluster, catalog, recipe, components, resolved, _ = stages
    overridden = apply_overrides(cluster, recipe, components, catalog)
    out = _unchanged(
        lambda: apply_scheduling(cluster, recipe, overridden, catalog, resolved=resolved),
        recipe,
        overridden,
    )
    assert out != overridden
    changed = [n for n in out if out[n].values != overridden[n].values]
    assert changed and all(out[n] is overridden[n] for n in out if n not in changed)


def test_adjusted_values_return_new_components(stages):
    from gpucluster.sdk import hookimpl

    kit, cluster, catalog, recipe, components, _, _ = stages

    class _Patch:
        @hookimpl
        def gpucluster_adjust_values(self, cluster, recipe, component):
            return {"patched": True} if component.name == "cert-manager" else None

    kit.register(_Patch(), name="patching_plugin")
    try:
        out = _unchanged(
            lambda: pipeline.adjusted_values(cluster, recipe, components), recipe, components
        )
    finally:
        kit.unregister(name="patching_plugin")
    assert (
        out["cert-manager"].values["patched"] is True
        and "patched" not in components["cert-manager"].values
    )


def test_chart_version_values_and_driver_identity_return_new_components(stages):
    from gpucluster.charts import gates
    from gpucluster.recipes import chart_versions

    _, cluster, catalog, recipe, components, _, plan = stages
    final = plan.components
    out, _ = _unchanged(
        lambda: chart_versions.apply_chart_versions(cluster, recipe, final, catalog), final
    )
    assert out.keys() == final.keys()
    dra = final["nvidia-dra-driver-gpu"]
    bare = {
        **final,
        dra.name: dataclasses.replace(
            dra,
            values=without_paths(dra.values, ["kubeletPlugin.podAnnotations"]),
            variable_hashes={},
        ),
    }
    out = _unchanged(lambda: gates.apply_driver_identity(cluster, bare), bare)
    assert (
        out[dra.name].values == dra.values
        and out[dra.name].variable_hashes == dra.variable_hashes != {}
    )
    assert (
        "podAnnotations" not in bare[dra.name].values["kubeletPlugin"]
        and bare[dra.name].variable_hashes == {}
    )


def test_a_plan_is_the_same_twice_and_leaves_the_memoized_recipe_alone(stages):
    kit, *_, plan = stages
    assert pickle.dumps(kit.plan(RICH)) == pickle.dumps(plan)


def test_a_failing_stage_leaves_its_input_alone(stages):
    from gpucluster.recipes.overrides import apply_overrides, parse_overrides

    _, cluster, catalog, recipe, components, _, _ = stages
    bad = dataclasses.replace(
        cluster,
        overrides=parse_overrides(
            {"set": ["gpuoperator:driver.enabled=false", "gpuoperator:driver.enabled.x=1"]},
            file="c.yaml",
            cluster="rich",
        ),
    )
    before = pickle.dumps(components)
    with pytest.raises(GpuclusterError):
        apply_overrides(bad, recipe, components, catalog)
    assert pickle.dumps(components) == before

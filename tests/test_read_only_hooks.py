"""Hook arguments the hookspecs call read-only are copies, and changing one is an error naming the plugin.

``gpucluster.hookspecs.READ_ONLY_ARGS`` lists them; the plugin manager hands each implementation
copies and checks after every call that it left them as they were
(:func:`gpucluster.plugins.call_hook_attributed`). A plugin that changes one fails with one
``error[input]`` line naming the plugin, the hook and the argument (exit 2, no traceback); the
hookspecs and docs/plugins.md say which arguments are read-only.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import yaml

from gpucluster import hookspecs
from gpucluster.errors import PluginError
from gpucluster.plugins import call_hook
from gpucluster.sdk import hookimpl
from gpucluster.sdk.testing import registered

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "plugins.md"
PLUGIN = "mutating_plugin"
CLUSTER = {
    "name": "c1",
    "criteria": {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
}


class _AdjustComponent:
    @hookimpl
    def gpucluster_adjust_values(self, cluster, recipe, component):
        if component.name == "gpu-operator":
            component.values["driver"] = {"enabled": False}


class _AdjustCluster:
    @hookimpl
    def gpucluster_adjust_values(self, cluster, recipe, component):
        cluster.region = "elsewhere"


class _AdjustRecipe:
    @hookimpl
    def gpucluster_adjust_values(self, cluster, recipe, component):
        recipe.component_refs[0].version = "0.0.1"


class _PolicyNested:
    @hookimpl
    def gpucluster_policy_checks(self, cluster, recipe, components):
        components["gpu-operator"].values["driver"]["enabled"] = "changed"
        return []


class _PolicyDrop:
    @hookimpl
    def gpucluster_policy_checks(self, cluster, recipe, components):
        components.pop("cert-manager")


class _ManifestsRecipe:
    @hookimpl
    def gpucluster_manifests(self, cluster, recipe, components):
        recipe.findings.clear()
        recipe.findings.append(None)


class _GatesRef:
    @hookimpl
    def gpucluster_gates(self, cluster, recipe, components):
        components["gpu-operator"].ref.version = "v0.0.1"


class _GatesCluster:
    @hookimpl
    def gpucluster_gates(self, cluster, recipe, components):
        cluster.settings["extra"] = 1


CASES = {
    "adjust_values-component": (
        _AdjustComponent,
        "gpucluster_adjust_values",
        "component",
        "gpu-operator",
    ),
    "adjust_values-cluster": (_AdjustCluster, "gpucluster_adjust_values", "cluster", None),
    "adjust_values-recipe": (_AdjustRecipe, "gpucluster_adjust_values", "recipe", None),
    "policy_checks-nested-value": (
        _PolicyNested,
        "gpucluster_policy_checks",
        "components",
        "gpu-operator",
    ),
    "policy_checks-removed-component": (
        _PolicyDrop,
        "gpucluster_policy_checks",
        "components",
        "cert-manager",
    ),
    "manifests-recipe": (_ManifestsRecipe, "gpucluster_manifests", "recipe", None),
    "gates-component-ref": (_GatesRef, "gpucluster_gates", "components", "gpu-operator"),
    "gates-cluster": (_GatesCluster, "gpucluster_gates", "cluster", None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hook_that_changes_a_read_only_argument_fails_naming_the_plugin(case, tmp_path):
    plugin, hook, argument, component = CASES[case]
    path = tmp_path / "gpucluster.yaml"
    path.write_text(yaml.safe_dump({"clusters": [CLUSTER]}), encoding="utf-8")
    with registered() as kit:
        kit.register(plugin(), name=PLUGIN)
        with pytest.raises(PluginError) as exc:
            kit.plan(CLUSTER)
        result = kit.cli("plan", "--config", str(path))
    (problem,) = exc.value.problems
    assert problem.message.startswith(
        f"plugin '{PLUGIN}' changed its read-only argument '{argument}' in hook {hook}"
    )
    assert (problem.cluster, problem.component) == ("c1", component)
    assert result.code == 2 and result.out == "" and "Traceback" not in result.err
    (line,) = result.err.strip().splitlines()
    assert (
        line.startswith("error[input] ")
        and f"plugin '{PLUGIN}' changed its read-only argument '{argument}'" in line
    )
    assert " fix: " in line


def test_a_cluster_stack_hook_that_changes_the_cluster_fails_naming_the_plugin():
    class _Stack:
        @hookimpl(tryfirst=True)
        def gpucluster_cluster_stack(self, scope, cluster, recipe):
            cluster.pools.clear()

    with registered() as kit:
        kit.register(_Stack(), name=PLUGIN)
        plan = kit.plan(CLUSTER)
        with pytest.raises(
            PluginError,
            match=f"plugin '{PLUGIN}' changed its read-only argument 'cluster' in hook gpucluster_cluster_stack",
        ):
            call_hook(
                "gpucluster_cluster_stack", scope=None, cluster=plan.cluster, recipe=plan.recipe
            )
        assert plan.cluster.pools  # the caller's objects are untouched


def test_hooks_receive_copies_and_the_plan_keeps_the_core_objects():
    seen = {}

    class _Reader:
        @hookimpl
        def gpucluster_gates(self, cluster, recipe, components):
            seen.update(cluster=cluster, recipe=recipe, components=components)

        @hookimpl
        def gpucluster_adjust_values(self, cluster, recipe, component):
            return {"reader": {"saw": component.name}} if component.name == "cert-manager" else None

    with registered() as kit:
        kit.register(_Reader(), name="reading_plugin")
        plan = kit.plan(CLUSTER)
    assert seen["cluster"] == plan.cluster and seen["cluster"] is not plan.cluster
    assert seen["recipe"] == plan.recipe and seen["recipe"] is not plan.recipe
    assert seen["components"] == plan.components and seen["components"] is not plan.components
    assert plan.components["cert-manager"].values["reader"] == {
        "saw": "cert-manager"
    }  # returned patches still apply


def _spec_args(hook: str) -> list[str]:
    return list(inspect.signature(getattr(hookspecs, hook)).parameters)


def test_every_hook_argument_is_read_only_except_the_two_that_are_not():
    every = {(hook, arg) for hook in hookspecs.HOOK_ORDER for arg in _spec_args(hook)}
    read_only = {(hook, arg) for hook, args in hookspecs.READ_ONLY_ARGS.items() for arg in args}
    assert read_only <= every
    assert every - read_only == {
        ("gpucluster_prepare_cluster", "cluster"),
        ("gpucluster_cluster_stack", "scope"),
    }


def test_hookspecs_and_docs_say_which_arguments_are_read_only():
    text = DOCS.read_text(encoding="utf-8")
    for hook in hookspecs.HOOK_ORDER:
        args = hookspecs.READ_ONLY_ARGS.get(hook, ())
        doc = inspect.getdoc(getattr(hookspecs, hook))
        section = re.search(rf"^### `{hook}\(.*?\)`\n(.*?)(?=^### |^## )", text, re.S | re.M).group(
            1
        )
        arguments = re.search(r"^\*\*Arguments:\*\*(.*?)(?=\n\n)", section, re.S | re.M)
        if not args:
            assert "read-only" not in doc.lower(), hook
            continue
        assert arguments, f"docs/plugins.md: {hook} has no **Arguments:** paragraph"
        said = re.search(r"^    (.*?): read-only\b", doc, re.M)
        assert said, f"hookspec {hook}: no 'ARGS: read-only' line"
        assert re.findall(r"\b(\w+) \(", said.group(1)) == list(args), hook
        assert "Read-only" in arguments.group(1), hook
        for arg in args:
            assert f"`{arg}`" in arguments.group(1), (hook, arg)


def test_the_docs_table_of_read_only_arguments_is_the_hookspecs_one():
    from gpucluster.sdk import hookspecs as sdk_hookspecs

    text = DOCS.read_text(encoding="utf-8")
    section = re.search(r"^### Read-only arguments\n(.*?)(?=^#)", text, re.S | re.M).group(1)
    rows = re.findall(r"^\| `(gpucluster_\w+)` \| (.*?) \|$", section, re.M)
    assert {
        hook: tuple(re.findall(r"`(\w+)`", args)) for hook, args in rows
    } == sdk_hookspecs.READ_ONLY_ARGS

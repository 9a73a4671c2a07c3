"""The cluster file's ``driverUpgradePolicy`` (gpucluster.recipes.driver_upgrade).

* Parsing: the safe defaults, every key read, and one error line naming the key with the
  allowed values for each invalid setting (also through ``gpucluster plan``: exit 2, one line).
* The values reach the gpu-operator release (replacing the catalog's ``driver.upgradePolicy``;
  a user override still wins), and a written policy where the operator installs no driver
  (AKS ``gpuStack: azure-managed`` = ``gpuDriver: Install``) is a warning finding.
* With ../shared: at every gpu-operator chart version of ../shared/reference/charts the release is
  rendered with real Helm through a RecipeResult pinning that version; the ClusterPolicy's
  ``spec.driver.upgradePolicy`` carries the policy, lint finds no unread key (``lint.dead-value``)
  and no schema error, and the ClusterPolicy validates against that chart's CRD and the one of
  ../shared/reference/crds.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from render_cases import UNAVAILABLE

from gpucluster import pipeline
from gpucluster.cli import main
from gpucluster.errors import GpuclusterError
from gpucluster.inputs.config import parse_clusters
from gpucluster.lint import lint
from gpucluster.lint.lint_schema import CrdIndex, api_server_view, errors_of
from gpucluster.lint.render import ChartSources, Renderer, render_plans, scan_folders
from gpucluster.model import DriverUpgradePolicy
from gpucluster.recipes import driver_upgrade, recipe_result_writer
from gpucluster.recipes.catalog import load_catalog

CRITERIA = {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"}

POLICY = {
    "autoUpgrade": True,
    "maxParallelUpgrades": 2,
    "maxUnavailable": 3,
    "waitForCompletion": {"timeoutSeconds": 600, "podSelector": "app=trainer"},
    "podDeletion": {"force": False, "timeoutSeconds": 120, "deleteEmptyDir": True},
    "drain": {
        "enable": True,
        "force": False,
        "podSelector": "team!=ops,tier==batch",
        "timeoutSeconds": 900,
        "deleteEmptyDir": True,
    },
}
"""Every key, none at its default (so a key the chart ignored would show as the chart's default)."""

SPEC = {
    "autoUpgrade": True,
    "maxParallelUpgrades": 2,
    "maxUnavailable": 3,
    "waitForCompletion": {"timeoutSeconds": 600, "podSelector": "app=trainer"},
    "podDeletion": {"force": False, "timeoutSeconds": 120, "deleteEmptyDir": True},
    "drain": {
        "enable": True,
        "force": False,
        "podSelector": "team!=ops,tier==batch",
        "timeoutSeconds": 900,
        "deleteEmptyDir": True,
    },
}
"""The ClusterPolicy ``spec.driver.upgradePolicy`` POLICY must render to (CRD field names)."""


def _doc(policy=None, *, stack: str = "operator-managed", **extra) -> dict:
    doc = {"name": "c", "criteria": dict(CRITERIA), "profile": {"gpuStack": stack}, **extra}
    if policy is not None:
        doc["driverUpgradePolicy"] = policy
    return doc


def _spec(doc: dict, tmp_path: Path | None = None):
    root = tmp_path or Path(".")
    (spec,) = parse_clusters({"clusters": [doc]}, source=str(root / "gpucluster.yaml"), root=root)
    return spec


# --------------------------------------------------------------------------- parsing


def test_defaults_strand_no_job():
    """Not written: None on the spec, and the defaults policy_of gives: one node at a time, drain
    on with a timeout, nothing forced, no emptyDir data deleted."""
    spec = _spec(_doc())
    assert spec.driver_upgrade_policy is None
    p = driver_upgrade.policy_of(spec)
    assert (p.auto_upgrade, p.max_parallel_upgrades, p.drain_enable, p.drain_timeout_seconds) == (
        True,
        1,
        True,
        300,
    )
    assert not (p.drain_force or p.pod_deletion_force)
    assert not (p.drain_delete_empty_dir or p.pod_deletion_delete_empty_dir)
    assert _spec(_doc({})).driver_upgrade_policy == DriverUpgradePolicy()


def test_every_key_is_read():
    p = _spec(_doc(POLICY)).driver_upgrade_policy
    assert driver_upgrade.cluster_policy_spec(p) == SPEC
    assert _spec(_doc({"maxUnavailable": "100%"})).driver_upgrade_policy.max_unavailable == "100%"


BAD = [
    ({"maxParalelUpgrades": 2}, "driverUpgradePolicy.maxParalelUpgrades", "autoUpgrade"),
    ({"autoUpgrade": "yes"}, "driverUpgradePolicy.autoUpgrade", None),
    ({"maxParallelUpgrades": -1}, "driverUpgradePolicy.maxParallelUpgrades", "an integer 0 to"),
    ({"maxUnavailable": 0}, "driverUpgradePolicy.maxUnavailable", '"1%" to "100%"'),
    ({"maxUnavailable": "0%"}, "driverUpgradePolicy.maxUnavailable", '"1%" to "100%"'),
    ({"maxUnavailable": "150%"}, "driverUpgradePolicy.maxUnavailable", '"1%" to "100%"'),
    ({"maxUnavailable": True}, "driverUpgradePolicy.maxUnavailable", '"1%" to "100%"'),
    ({"drain": {"enabled": True}}, "driverUpgradePolicy.drain.enabled", "enable, force"),
    ({"drain": {"timeoutSeconds": "5m"}}, "driverUpgradePolicy.drain.timeoutSeconds", None),
    ({"drain": {"podSelector": "!app"}}, "driverUpgradePolicy.drain.podSelector", "key=value"),
    (
        {"waitForCompletion": {"podSelector": "app in (a,b)"}},
        "driverUpgradePolicy.waitForCompletion.podSelector",
        "key=value",
    ),
    ({"podDeletion": {"force": 1}}, "driverUpgradePolicy.podDeletion.force", None),
    ({"podDeletion": []}, "driverUpgradePolicy.podDeletion", None),
    ("safe", "driverUpgradePolicy", None),
]


@pytest.mark.parametrize("policy,key,allowed", BAD, ids=[b[1] + str(i) for i, b in enumerate(BAD)])
def test_invalid_settings_are_one_line_naming_the_key(policy, key, allowed):
    with pytest.raises(GpuclusterError) as exc:
        _spec(_doc(policy))
    (problem,) = exc.value.problems
    line = problem.render()
    assert "\n" not in line and f" key=clusters[0].{key}:" in line and " fix: " in line, line
    if allowed is not None:
        assert "(allowed: " in line and allowed in line, line


def test_plan_refuses_an_invalid_policy_with_one_line(tmp_path, capsys):
    cfg = tmp_path / "gpucluster.yaml"
    cfg.write_text(yaml.safe_dump({"clusters": [_doc({"maxUnavailable": 0})]}))
    assert main(["plan", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error[input]"), err
    assert "key=clusters[0].driverUpgradePolicy.maxUnavailable" in err[0]
    assert 'default "25%"' in err[0]


# --------------------------------------------------------------------------- values and findings


def test_the_policy_replaces_the_catalogs_and_an_override_still_wins(tmp_path):
    plan = pipeline.build_plan(_spec(_doc(POLICY)))
    values = plan.components["gpu-operator"].values["driver"]
    assert values["enabled"] is True
    assert values["upgradePolicy"] == driver_upgrade.chart_values(
        _spec(_doc(POLICY)).driver_upgrade_policy
    )
    # the catalog's maxParallelUpgrades: 5 is replaced by the default 1 when nothing is written
    default = pipeline.build_plan(_spec(_doc()))
    assert (
        default.components["gpu-operator"].values["driver"]["upgradePolicy"]["maxParallelUpgrades"]
        == 1
    )
    assert not [f for f in default.findings if f.id == "DRIVER-UPGRADE-POLICY-UNUSED"]
    over = _doc(
        POLICY, overrides={"set": ["gpuoperator:driver.upgradePolicy.maxParallelUpgrades=4"]}
    )
    try:
        plan = pipeline.build_plan(_spec(over, tmp_path))
    except (
        GpuclusterError
    ) as err:  # the overrides syntax is docs/overrides.md's; show it if it moved
        pytest.fail("\n".join(p.render() for p in err.problems))
    assert (
        plan.components["gpu-operator"].values["driver"]["upgradePolicy"]["maxParallelUpgrades"]
        == 4
    )


def test_a_policy_where_the_operator_installs_no_driver_is_a_warning():
    """AKS azure-managed (pools' gpuDriver: Install): the driver comes with the node image."""
    plan = pipeline.build_plan(_spec(_doc(POLICY, stack="azure-managed")))
    assert plan.components["gpu-operator"].values["driver"]["enabled"] is False
    (finding,) = [f for f in plan.findings if f.id == "DRIVER-UPGRADE-POLICY-UNUSED"]
    line = finding.render()
    assert line.startswith("warning[DRIVER-UPGRADE-POLICY-UNUSED]")
    assert "key=clusters[0].driverUpgradePolicy:" in line and "changes nothing" in line
    assert "gpu_driver" in line and "fix: " in line
    # not written: the defaults are installed quietly (they do nothing either, and nobody asked)
    plan = pipeline.build_plan(_spec(_doc(stack="azure-managed")))
    assert not [f for f in plan.findings if f.id == "DRIVER-UPGRADE-POLICY-UNUSED"]


# --------------------------------------------------------------------------- real charts


def _gpu_operator_charts(reference_charts: Path):
    return sorted(
        (c for c in scan_folders([reference_charts]) if c.name == "gpu-operator"),
        key=lambda c: c.version,
    )


def test_reference_folder_holds_the_gpu_operator_versions(reference_charts):
    versions = [c.version for c in _gpu_operator_charts(reference_charts)]
    assert {"v25.10.1", "v26.3.3", "v26.7.0"} <= set(versions), versions


def _pinned_plan(tmp_path: Path, version: str):
    """A cluster with POLICY whose RecipeResult pins gpu-operator at ``version``."""
    spec = _spec(_doc(POLICY), tmp_path)
    r, _ = pipeline.resolved_components(pipeline.prepare_cluster(spec), load_catalog())
    rdoc = recipe_result_writer.to_document(r)
    for ref in rdoc["componentRefs"]:
        if ref["name"] == "gpu-operator":
            ref["version"] = version
    (tmp_path / "recipe.yaml").write_text(recipe_result_writer.dump_yaml(rdoc))
    doc = {k: v for k, v in _doc(POLICY).items() if k != "criteria"}
    doc["recipe"] = "recipe.yaml"
    plan = pipeline.build_plan(_spec(doc, tmp_path))
    assert plan.components["gpu-operator"].ref.version == version
    nodes = [n for n in plan.nodes if n.component == "gpu-operator" and n.kind == "chart"]
    return dataclasses.replace(plan, nodes=nodes)


def test_policy_renders_into_the_cluster_policy_at_every_reference_version(
    reference_charts, shared_dir, tmp_path
):
    charts = _gpu_operator_charts(reference_charts)
    sources = ChartSources([reference_charts], cache_dir=Path("/nonexistent-gpucluster-cache"))
    shared_crds = lint.load_crd_folders([shared_dir / "reference" / "crds"])
    checked = []
    with Renderer(sources, allow_missing=UNAVAILABLE) as renderer:
        for chart in charts:
            folder = tmp_path / chart.version
            folder.mkdir()
            plan = _pinned_plan(folder, chart.version)
            result = render_plans([plan], sources, renderer=renderer)
            (release,) = [r for r in result.releases if r.node.component == "gpu-operator"]
            assert release.chart is not None and chart.version in str(
                yaml.safe_load((release.chart / "Chart.yaml").read_text())["version"]
            )
            (policy,) = [d for _, d in release.objects if d.get("kind") == "ClusterPolicy"]
            assert policy["spec"]["driver"]["upgradePolicy"] == SPEC, chart.version
            findings = lint.lint_result(result, extra_crds=shared_crds)
            unread = [f.render() for f in findings if f.id == "lint.dead-value"]
            assert not unread, "\n".join(unread)
            errors = [f.render() for f in findings if f.severity == "error"]
            assert not errors, "\n".join(errors)
            # the chart's own CRD, and ../shared/reference/crds's ClusterPolicy CRD
            for crds in (
                [(doc, "chart") for _, doc in release.crds],
                [
                    (d, s)
                    for d, s in shared_crds
                    if d.get("spec", {}).get("names", {}).get("kind") == "ClusterPolicy"
                ],
            ):
                index = CrdIndex()
                index.add_all(crds)
                key = ("nvidia.com", "v1", "ClusterPolicy")
                assert key in index, chart.version
                view, _, _ = api_server_view(policy, index.raw_schema(key))
                assert not errors_of(index.validator(key), view), chart.version
            checked.append(chart.version)
    assert len(checked) == len(charts) >= 3

"""Values per chart version (gpucluster.recipes.chart_versions; registry and overlay ``chartVersions``).

* Every component, at every chart version ../shared/reference/charts holds, rendered with real Helm
  with the values gpucluster writes for it -- through the real path: a RecipeResult of every
  built-in recipe x profile pinning that version -- and linted: no key the chart does not read, no
  schema error, no placement finding (plain, with ``scheduling.system`` and with an extra GPU
  taint); or, where the recipe's values are written for other versions, refused with one line.
* Every version of the reference folder is covered by some ``chartVersions`` entry's ``checked``
  list, and every ``checked`` version is in the reference folder (nothing claimed unrendered).
* Without ../shared: the rewrite rules, the refusal line, ``versionSkew: upgrade``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from render_cases import UNAVAILABLE, VARIANTS, base_cases, cluster_doc

from gpucluster import pipeline
from gpucluster.errors import GpuclusterError
from gpucluster.inputs.config import parse_clusters
from gpucluster.lint import lint
from gpucluster.lint.render import ChartSources, Renderer, render_plans, scan_folders
from gpucluster.model import Criteria
from gpucluster.recipes import chart_versions, recipe_result_writer
from gpucluster.recipes import recipe as recipe_mod
from gpucluster.recipes.catalog import ChartVersionValues, load_catalog
from gpucluster.values import get_path
from gpucluster.versions import version_in_range

# --------------------------------------------------------------------------- rules (no ../shared)


def test_rename_moves_the_value_to_the_key_that_version_reads():
    cv = ChartVersionValues(
        versions=">=0.13.0 <0.15.0",
        checked=("v0.13.0",),
        rename=(("admission.gpuFractionRuntimeClassName", "admission.gpuPodRuntimeClassName"),),
    )
    values, changes, refusals = chart_versions.values_for_version(
        cv, {"admission": {"gpuFractionRuntimeClassName": "x"}, "a": 1}
    )
    assert (
        values == {"admission": {"gpuPodRuntimeClassName": "x"}, "a": 1}
        and changes
        and not refusals
    )
    _, _, refusals = chart_versions.values_for_version(
        cv, {"admission": {"gpuFractionRuntimeClassName": "x", "gpuPodRuntimeClassName": "y"}}
    )
    assert [p for p, _ in refusals] == ["admission.gpuPodRuntimeClassName"]


def test_drop_only_the_value_the_version_behaves_as_and_refuse_any_other():
    cv = ChartVersionValues(
        versions=">=25.10.0 <25.11.0",
        checked=("v25.10.1",),
        drop=(("kataSandboxDevicePlugin.enabled", False),),
        unsupported=("x.y",),
    )
    values, changes, refusals = chart_versions.values_for_version(
        cv, {"kataSandboxDevicePlugin": {"enabled": False}, "b": 2}
    )
    assert values == {"b": 2} and len(changes) == 1 and not refusals
    _, _, refusals = chart_versions.values_for_version(
        cv, {"kataSandboxDevicePlugin": {"enabled": True}, "x": {"y": 1}}
    )
    assert sorted(p for p, _ in refusals) == ["kataSandboxDevicePlugin.enabled", "x.y"]


def test_defaults_fill_only_a_path_the_values_leave_unset():
    """The DRA driver chart 25.12.0 defaults kubeletPlugin.tolerations to [] where 0.5.0 tolerates
    nvidia.com/gpu: a 25.12.0 pin gets 0.5.0's default unless the values set the path."""
    gpu = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    cv = ChartVersionValues(
        versions=">=25.12.0 <25.13.0",
        checked=("25.12.0",),
        defaults=(("kubeletPlugin.tolerations", gpu),),
    )
    values, changes, refusals = chart_versions.values_for_version(
        cv, {"kubeletPlugin": {"priorityClassName": ""}}
    )
    assert values == {"kubeletPlugin": {"priorityClassName": "", "tolerations": gpu}}
    assert not refusals and changes == [
        "kubeletPlugin.tolerations: [{effect: NoSchedule, key: nvidia.com/gpu, operator: Exists}]"
        " written (a default of the catalog's chart that this version's chart lacks)"
    ]
    values["kubeletPlugin"]["tolerations"].clear()  # a copy: the registry's default is not shared
    assert cv.defaults[0][1] == gpu
    mine = [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    for kept in ([], mine):
        values, changes, _ = chart_versions.values_for_version(
            cv, {"kubeletPlugin": {"tolerations": kept}}
        )
        assert values == {"kubeletPlugin": {"tolerations": kept}} and changes == []


def test_dra_driver_25_12_pin_on_oke_gets_the_gpu_toleration_and_a_finding(tmp_path):
    """OKE declares no pools, so nothing writes the kubelet plugin's tolerations: the 25.12.0
    chart's [] would keep it off nvidia.com/gpu-tainted GPU nodes."""
    doc = cluster_doc("oke", "gb200-oke-ubuntu-training", "", "plain")
    plan = pipeline.build_plan(
        _recipe_case(tmp_path, doc, {"nvidia-dra-driver-gpu": ("nvidia-dra-driver-gpu", "25.12.0")})
    )
    dra = plan.components["nvidia-dra-driver-gpu"]
    assert dra.ref.version == "25.12.0"
    assert dra.values["kubeletPlugin"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    (finding,) = [
        f
        for f in plan.findings
        if f.id == "VALUES-FOR-VERSION" and f.component == "nvidia-dra-driver-gpu"
    ]
    assert "kubeletPlugin.tolerations" in finding.message


def test_operands_replace_only_the_value_gpucluster_writes():
    cv = ChartVersionValues(
        versions=">=25.10.0 <25.11.0",
        checked=("v25.10.1",),
        operands=(("driver.version", "580.105.08"),),
    )
    own = {"driver": {"version": "595.91.07"}}
    values, changes, refusals = chart_versions.values_for_version(
        cv, {"driver": {"version": "595.91.07", "enabled": True}}, own
    )
    assert values == {"driver": {"version": "580.105.08", "enabled": True}} and not refusals
    assert changes == [
        "driver.version: '595.91.07' -> '580.105.08' (the operand version that chart installs;"
        " '595.91.07' is what the catalog's chart installs)"
    ]
    _, changes, _ = chart_versions.values_for_version(
        cv, {"driver": {"version": "595.91.07"}}, own, catalog_chart="gpu-operator v26.7.1"
    )
    assert changes[0].endswith(
        "'595.91.07' is what the catalog's chart gpu-operator v26.7.1 installs)"
    )
    for kept in ({"driver": {"version": "570.1"}}, {"driver": {"enabled": True}}):
        values, changes, _ = chart_versions.values_for_version(cv, kept, own)
        assert values == kept and changes == []


OPERAND_PATHS = {"gpu-operator": ("driver.version",)}
"""Values paths of gpucluster's catalog values that name an operand version (the image the operator
deploys): for every checked chart version, what gpucluster writes there must be that chart's default."""


def test_operand_versions_are_the_installed_charts_defaults(reference_charts):
    """gpu-operator v25.10.1 installs driver 580.105.08 by default, v26.3.3 580.126.20, v26.7.0
    595.91.07 (each chart's values.yaml): the driver version gpucluster writes for each is that one."""
    catalog = load_catalog()
    sources = ChartSources([reference_charts], cache_dir=Path("/nonexistent-gpucluster-cache"))
    seen, wrong = [], []
    for name, paths in OPERAND_PATHS.items():
        entry = catalog.components[name]
        own = catalog.load_values(f"components/{name}/values.yaml")
        for cv in entry.chart_versions:
            values, _, _ = chart_versions.values_for_version(cv, own, own)
            for version in cv.checked:
                found = sources.locate(entry.repository, entry.chart, version)
                assert found.chart is not None, (name, version)
                chart = yaml.safe_load((found.chart.path / "values.yaml").read_text())
                for path in paths:
                    want = str(get_path(chart, path))
                    seen.append(f"{name} {version} {path}={want}")
                    if str(get_path(values, path)) != want:
                        wrong.append(f"{name} {version} {path}: {get_path(values, path)} != {want}")
    assert not wrong, wrong
    assert "gpu-operator v25.10.1 driver.version=580.105.08" in seen


def test_every_registry_pin_is_covered_and_checked_versions_are_named():
    catalog = load_catalog()
    for entry in catalog.components.values():
        if entry.chart_versions and entry.type == "Helm":
            assert (
                chart_versions.judge_pin(entry, entry.chart, entry.version).verdict
                == chart_versions.COVERED
            ), entry.name
            for cv in entry.chart_versions:
                assert cv.checked, entry.name


def _aks_recipe_file(
    tmp_path: Path, pins: dict[str, str], profile: str = "azure-managed", skew: str | None = None
) -> Path:
    """A RecipeResult gpucluster writes for the AKS training recipe, with chart versions replaced."""
    catalog = load_catalog()
    r = recipe_mod.resolve(
        Criteria(service="aks", accelerator="h100", os="ubuntu", intent="training"),
        catalog,
        profile={"gpuStack": profile},
    )
    doc = recipe_result_writer.to_document(r)
    for ref in doc["componentRefs"]:
        if ref["name"] in pins:
            ref["version"] = pins[ref["name"]]
    (tmp_path / "recipe.yaml").write_text(recipe_result_writer.dump_yaml(doc))
    cluster = {"name": "c", "recipe": "recipe.yaml"}
    if skew:
        cluster["versionSkew"] = skew
    (tmp_path / "gpucluster.yaml").write_text(yaml.safe_dump({"clusters": [cluster]}))
    return tmp_path / "gpucluster.yaml"


def _plan(path: Path):
    from gpucluster.inputs.config import load_clusters

    (spec,) = load_clusters(str(path), env={})
    return pipeline.build_plan(spec)


def test_kai_v0141_pin_gets_the_key_that_version_reads_and_a_finding(tmp_path):
    plan = _plan(_aks_recipe_file(tmp_path, {"kai-scheduler": "v0.14.1"}))
    kai = plan.components["kai-scheduler"]
    assert kai.ref.version == "v0.14.1"
    assert kai.values["admission"] == {"gpuPodRuntimeClassName": "nvidia-container-runtime"}
    (f,) = [f for f in plan.findings if f.id == "VALUES-FOR-VERSION"]
    assert (
        f.severity == "info"
        and "admission.gpuFractionRuntimeClassName -> admission.gpuPodRuntimeClassName" in f.message
    )
    assert f.file.endswith("recipe.yaml") and f.key.endswith(".version")
    skew = [f for f in plan.findings if f.id == "VERSION-SKEW" and f.component == "kai-scheduler"]
    assert skew and skew[0].severity == "info"


def test_a_version_without_values_is_refused_with_one_line(tmp_path, capsys):
    from gpucluster.cli import main

    path = _aks_recipe_file(tmp_path, {"kai-scheduler": "v0.12.0"})
    assert main(["plan", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith("error[") and "recipe.yaml" in line and "component=kai-scheduler" in line
    assert "kai-scheduler v0.12.0" in line and "versionSkew: upgrade" in line and " fix: " in line


def test_version_skew_upgrade_installs_the_catalog_version_and_shows_the_change(tmp_path):
    plan = _plan(_aks_recipe_file(tmp_path, {"kai-scheduler": "v0.12.0"}, skew="upgrade"))
    assert plan.components["kai-scheduler"].ref.version == "v0.16.9"
    (f,) = [f for f in plan.findings if f.id == "VERSION-UPGRADED"]
    assert (
        f.severity == "warning"
        and "kai-scheduler: version v0.12.0 -> v0.16.9 [unknown]" in f.message
        and "an upgrade (the file's pin is older than the catalog's)" in f.message
    )
    assert not [f for f in plan.findings if f.id == "VERSION-DOWNGRADED"]
    node = plan.node("kai-scheduler")
    assert node.version == "v0.16.9"


@pytest.mark.parametrize("pin", ["v0.99.0", "1.0.0-rc.1", "V1.0.0"])
def test_version_skew_upgrade_names_a_pin_newer_than_the_catalog_a_downgrade(tmp_path, pin):
    plan = _plan(_aks_recipe_file(tmp_path, {"kai-scheduler": pin}, skew="upgrade"))
    assert plan.components["kai-scheduler"].ref.version == "v0.16.9"
    assert not [f for f in plan.findings if f.id == "VERSION-UPGRADED"]
    (f,) = [f for f in plan.findings if f.id == "VERSION-DOWNGRADED"]
    assert f.severity == "warning" and f.component == "kai-scheduler"
    assert "a downgrade (the file's pin is newer than the catalog's)" in f.message
    assert f"kai-scheduler: version {pin} -> v0.16.9" in f.message
    assert "make the downgrade explicit" in f.fix and "rolled back to v0.16.9" in f.fix


@pytest.mark.parametrize(
    ("pin", "direction"),
    [
        ("v0.12.0", "an upgrade (the file's pin is older"),
        ("0.12.0", "an upgrade (the file's pin is older"),
        ("v0.99.0", "a downgrade (the file's pin is newer"),
    ],
)
def test_the_uncovered_refusal_says_which_way_versionskew_upgrade_goes(
    tmp_path, capsys, pin, direction
):
    from gpucluster.cli import main

    assert main(["plan", "--config", str(_aks_recipe_file(tmp_path, {"kai-scheduler": pin}))]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "VERSION-UNCOVERED" in line or "error[" in line
    assert (
        f"set versionSkew: upgrade on the cluster to install v0.16.9 instead ({direction}" in line
    )


@pytest.mark.parametrize("pin", ["84.5.0", "84.4.1", "83.0.0", "82.9.0"])
def test_the_next_kube_prometheus_stack_minors_are_installed_with_the_values(tmp_path, pin):
    """One range from the oldest to the newest rendered version, to the end of its major."""
    plan = _plan(_aks_recipe_file(tmp_path, {"kube-prometheus-stack": pin}))
    assert plan.components["kube-prometheus-stack"].ref.version == pin
    (skew,) = [
        f
        for f in plan.findings
        if f.id == "VERSION-SKEW" and f.component == "kube-prometheus-stack"
    ]
    assert skew.severity == "info" and "range >=82.8.0 <85.0.0" in skew.message


def test_the_refusal_of_a_pin_past_the_range_says_how_to_proceed(tmp_path, capsys):
    from gpucluster.cli import main

    path = _aks_recipe_file(tmp_path, {"kube-prometheus-stack": "85.0.0"})
    assert main(["plan", "--config", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error[VERSION-UNCOVERED]") and "component=kube-prometheus-stack" in line
    m = re.search(r"key=(componentRefs\[\d+\]\.version):", line)
    assert m and f"fix: set {m.group(1)} to a version in >=82.8.0 <85.0.0" in line
    assert "set versionSkew: upgrade on the cluster to install" in line
    assert "versionSkew: warning (the default) and error refuse this pin" in line
    assert "chartVersions range for it" in line


def test_version_skew_error_refuses_a_covered_pin_too(tmp_path):
    with pytest.raises(GpuclusterError) as exc:
        _plan(_aks_recipe_file(tmp_path, {"kai-scheduler": "v0.14.1"}, skew="error"))
    assert any(p.id == "VERSION-SKEW" or "v0.14.1" in p.message for p in exc.value.problems)


# --------------------------------------------------------------------------- every version, real charts


def _reference_versions(reference_charts: Path) -> dict[str, list[tuple[str, str]]]:
    """component -> ``(chart, version)`` of every ``checked`` version the reference folder holds."""
    catalog = load_catalog()
    sources = ChartSources([reference_charts], cache_dir=Path("/nonexistent-gpucluster-cache"))
    out: dict[str, list[tuple[str, str]]] = {}
    for entry in catalog.components.values():
        for cv in entry.chart_versions:
            for chart in cv.charts or (entry.chart,):
                for version in cv.checked:
                    found = sources.locate(entry.repository, chart, version)
                    if found.chart is not None:
                        out.setdefault(entry.name, []).append((chart, version))
    return out


def test_every_reference_chart_version_is_checked(reference_charts):
    """Each chart folder of a component with chartVersions is some entry's checked version (so
    the render test below renders it), and no checked version is missing from the folder."""
    catalog = load_catalog()
    sources = ChartSources([reference_charts], cache_dir=Path("/nonexistent-gpucluster-cache"))
    located: dict[Path, str] = {}
    missing = []
    for entry in catalog.components.values():
        for cv in entry.chart_versions:
            for chart in cv.charts or (entry.chart,):
                for version in cv.checked:
                    found = sources.locate(entry.repository, chart, version)
                    if found.chart is None or found.how not in (
                        "exact",
                        "folder",
                        "app-version",
                        "nearest",
                    ):
                        missing.append(f"{entry.name} {chart} {version}")
                    else:
                        located[found.chart.path] = entry.name
    assert not missing, missing
    charts = {
        cv_chart
        for e in catalog.components.values()
        for cv in e.chart_versions
        for cv_chart in (cv.charts or (e.chart,))
    }
    unrendered = [
        c.path.name
        for c in scan_folders([reference_charts])
        if c.name in charts and c.path not in located
    ]
    assert not unrendered, f"reference charts no chartVersions entry checks: {unrendered}"


SCHEDULING_CASES = {
    ("aks", "h100-aks-ubuntu-training", "azure-managed"),
    ("aks", "h100-aks-ubuntu-inference-dynamo", "operator-managed"),
    ("nvke", "gb200-nvke-ubuntu-training-kubeflow", ""),
    ("oke", "gb200-oke-ubuntu-training", ""),
    ("oke", "l40s-oke-inference", ""),
}
"""The recipes rendered with ``scheduling.system`` and with an extra GPU taint too: together they hold
every component (every built-in recipe is rendered plain)."""

CANNOT_TAKE = {("grove", "v0.1.0-alpha.8", "system")}
"""Versions refused for the values of a variant: grove v0.1.0-alpha.8 reads no nodeSelector, so
``scheduling.system`` cannot place its operator (registry ``unsupported``)."""

CASES = [
    (p, leaf, prof, v)
    for p, leaf, prof in base_cases()
    for v in VARIANTS
    if v == "plain" or (p, leaf, prof) in SCHEDULING_CASES
]


@pytest.fixture(scope="module")
def versioned(reference_charts, shared_dir):
    sources = ChartSources([reference_charts], cache_dir=Path("/nonexistent-gpucluster-cache"))
    crds = lint.load_crd_folders([shared_dir / "reference" / "crds"])
    with Renderer(sources, allow_missing=UNAVAILABLE) as renderer:
        yield sources, renderer, crds, _reference_versions(reference_charts)


def _recipe_case(tmp_path: Path, doc: dict, pins: dict[str, tuple[str, str]]):
    """The cluster ``doc`` given as the RecipeResult gpucluster writes for its recipe, with the
    chart and version of each component in ``pins`` replaced."""
    (spec,) = parse_clusters(
        {"clusters": [doc]}, source=str(tmp_path / "gpucluster.yaml"), root=tmp_path
    )
    r, _ = pipeline.resolved_components(pipeline.prepare_cluster(spec), load_catalog())
    rdoc = recipe_result_writer.to_document(r)
    for ref in rdoc["componentRefs"]:
        if ref["name"] in pins:
            ref["chart"], ref["version"] = pins[ref["name"]]
    (tmp_path / "recipe.yaml").write_text(recipe_result_writer.dump_yaml(rdoc))
    cluster = {k: v for k, v in doc.items() if k != "criteria"}
    cluster["recipe"] = "recipe.yaml"
    (spec,) = parse_clusters(
        {"clusters": [cluster]}, source=str(tmp_path / "gpucluster.yaml"), root=tmp_path
    )
    return spec


def _version_sets(
    versions: dict[str, list[tuple[str, str]]], plan
) -> list[dict[str, tuple[str, str]]]:
    """Pins of the components of ``plan``: set k pins every component at its k-th reference version
    other than the one the recipe installs (components with fewer keep the recipe's)."""
    others = {
        c: [
            (ch, v)
            for ch, v in pins
            if (ch, v) != (plan.components[c].ref.chart, plan.components[c].ref.version)
            and v.removeprefix("v") != plan.components[c].ref.version.removeprefix("v")
        ]
        for c, pins in versions.items()
        if c in plan.components
    }
    depth = max((len(v) for v in others.values()), default=0)
    return [{c: v[k] for c, v in others.items() if k < len(v)} for k in range(depth)]


@pytest.mark.parametrize(
    "platform,leaf,profile,variant",
    CASES,
    ids=[f"{c[1]}-{c[2] or 'default'}-{c[3]}" for c in CASES],
)
def test_every_component_at_every_reference_version_renders_and_lints_clean(
    versioned, tmp_path, platform, leaf, profile, variant
):
    """Each version set is one RecipeResult (as a user hands over a file of an older AICR: every
    component at another version); a pin the recipe's values are not written for must be refused
    with one line naming the component and version, and is then put back to the recipe's."""
    sources, renderer, crds, versions = versioned
    doc = cluster_doc(platform, leaf, profile, variant)
    (base,) = parse_clusters({"clusters": [doc]}, source="x.yaml", root=tmp_path)
    base_plan = pipeline.build_plan(base)
    failures, refused, rendered = [], [], []
    for k, pins in enumerate(_version_sets(versions, base_plan)):
        pins = dict(pins)
        while True:
            folder = tmp_path / f"set{k}-{len(refused)}"
            folder.mkdir()
            try:
                plan = pipeline.build_plan(_recipe_case(folder, doc, pins))
                break
            except GpuclusterError as err:
                lines = [p.render() for p in err.problems]
                # one line per refused pin, naming the component and the version; other lines only
                # about a refused component (a platform policy on the same pin, NVKE-DRA-VERSION)
                hits = {
                    c
                    for line in lines
                    for c, (_, v) in pins.items()
                    if line.startswith(("error[VERSION-UNCOVERED]", "error[VERSION-VALUES]"))
                    and f"component={c} " in line
                    and f" {v} " in line
                }
                assert hits and all(
                    any(f"component={c} " in line for c in hits) for line in lines
                ), "\n".join(lines)
                refused += [f"{c} {pins.pop(c)[1]}" for c in sorted(hits)]
        for c, (chart, version) in pins.items():
            assert (plan.components[c].ref.chart, plan.components[c].ref.version) == (
                chart,
                version,
            )
        rendered += [f"{c} {v}" for c, (_, v) in pins.items()]
        result = render_plans([plan], sources, renderer=renderer)
        failures += [
            f.render() for f in lint.lint_result(result, extra_crds=crds) if f.severity == "error"
        ]
    assert not failures, "\n".join(failures)
    assert rendered, "no component rendered at another version"
    expected = sorted(
        f"{c} {v}"
        for k, pins in enumerate(_version_sets(versions, base_plan))
        for c, (_, v) in pins.items()
        if not version_in_range(v, base_plan.components[c].ref.chart_versions)
    )
    expected += [
        f"{c} {v}"
        for (c, v, var) in CANNOT_TAKE
        if var == variant
        and any(p.get(c, ("", ""))[1] == v for p in _version_sets(versions, base_plan))
    ]
    assert sorted(refused) == sorted(
        expected
    )  # exactly where the recipe says its values are for other versions

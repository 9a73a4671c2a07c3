"""The file's intent wins, visibly (gpucluster.recipes.recipe_result.file_intent, advertiser_changes).

A RecipeResult whose values say who owns the GPU driver selects the matching profile (or is
refused naming the conflict); a profile or advertiser change relative to the file is a finding
naming the file's key and the new value. The real AICR v0.11.1 files (their values files, as
AICR v0.11.1 wrote them: registry ``formerValues``) were written for the GPU Operator owning the
driver and for DRA advertising whole GPUs too. With ../shared, the AICR files and a hand-written
AKS file pinning KAI v0.14.1 render and lint clean: every RuntimeClass they name exists.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import yaml
from render_cases import UNAVAILABLE

from gpucluster import pipeline
from gpucluster.inputs.config import load_clusters
from gpucluster.lint import lint
from gpucluster.lint.render import ChartSources, Renderer, render_plans
from gpucluster.model import Criteria
from gpucluster.recipes import recipe as recipe_mod
from gpucluster.recipes import recipe_result_writer
from gpucluster.recipes.catalog import load_catalog
from gpucluster.values import get_path, leaf_paths

AICR = Path(__file__).parent / "data" / "aicr" / "v0.11.1"
TRAINING = AICR / "h100-aks-ubuntu-training.recipe.yaml"


def _project(tmp_path: Path, files: dict[str, Path | str], profile: str | None = None) -> list:
    lines = ["clusters:"]
    for name, src in files.items():
        dst = tmp_path / f"{name}.recipe.yaml"
        if isinstance(src, Path):
            shutil.copyfile(src, dst)
        else:
            dst.write_text(src)
        lines += [f"  - name: {name}", f"    recipe: {dst.name}"]
        if profile:
            lines += [f"    profile: {{gpuStack: {profile}}}"]
    (tmp_path / "gpucluster.yaml").write_text("\n".join(lines) + "\n")
    return load_clusters(str(tmp_path / "gpucluster.yaml"), env={})


def test_the_v0111_file_selects_the_operator_managed_profile_and_says_so(tmp_path):
    (spec,) = _project(tmp_path, {"training": TRAINING})
    plan = pipeline.build_plan(spec)
    assert plan.recipe.profile == ("gpuStack", "operator-managed")
    assert {p.gpu_driver for p in plan.cluster.pools if p.gpu} == {
        "None"
    }  # the pools follow the file's driver owner
    (f,) = [f for f in plan.findings if f.id == "PROFILE-FROM-FILE"]
    assert (
        f.severity == "info"
        and "gpuStack=operator-managed" in f.message
        and "driver.enabled: true" in f.message
    )
    gpu = plan.components["gpu-operator"].values
    assert gpu["driver"]["enabled"] is True and gpu["operator"]["runtimeClass"] == "nvidia"
    # KAI v0.13.0 (the file's pin) gets the runtime class under the key it reads, and it is the profile's
    assert plan.components["kai-scheduler"].values["admission"] == {
        "gpuPodRuntimeClassName": "nvidia"
    }
    (adv,) = [f for f in plan.findings if f.id == "ADVERTISER-CHANGED"]
    assert adv.severity == "warning" and adv.component == "nvidia-dra-driver-gpu"
    assert (
        adv.key == "componentRefs[6].valuesFile" and "resources.gpus.enabled: false" in adv.message
    )


BUNDLE = AICR / "bundle-h100-aks-training"


def _bundle_values(component: str) -> dict:
    """The values ``aicr bundle`` v0.11.1 wrote for ``component`` (the real file, unchanged)."""
    return yaml.safe_load((BUNDLE / component / "values.yaml").read_text())


def test_former_values_are_what_the_real_v0111_bundle_says():
    catalog = load_catalog()
    for comp in ("gpu-operator", "nvidia-dra-driver-gpu"):
        bundle = _bundle_values(comp)
        (former,) = [
            f
            for f in catalog.components[comp].former_values
            if "aicr.nvidia.com/v1alpha1" in f.api_versions
        ]
        stated = [*leaf_paths(former.values), *((p, v) for p, v, _ in former.replaced)]
        assert stated
        for path, value in stated:
            assert get_path(bundle, path, None) == value, (comp, path)


def test_the_v0111_toolkit_value_gpucluster_replaces_is_one_warning_naming_both_values(tmp_path):
    (spec,) = _project(tmp_path, {"training": TRAINING})
    plan = pipeline.build_plan(spec)
    assert _bundle_values("gpu-operator")["toolkit"]["enabled"] is False
    assert plan.components["gpu-operator"].values["toolkit"]["enabled"] is True
    (f,) = [f for f in plan.findings if f.id == "FILE-VALUE-CHANGED"]
    assert f.severity == "warning" and f.component == "gpu-operator"
    assert f.file.endswith("training.recipe.yaml") and f.key == "componentRefs[1].valuesFile"
    assert "where the file sets toolkit.enabled: false" in f.message
    assert "gpucluster installs toolkit.enabled: true" in f.message
    assert "NVIDIA/aicr#1757" in f.message and "profile.gpuStack: azure-managed" in f.fix


def test_a_cluster_that_keeps_the_node_images_toolkit_gets_no_toolkit_warning(tmp_path):
    (spec,) = _project(tmp_path, {"training": TRAINING}, profile="azure-managed")
    plan = pipeline.build_plan(spec)
    assert plan.components["gpu-operator"].values["toolkit"]["enabled"] is False
    assert not [f for f in plan.findings if f.id == "FILE-VALUE-CHANGED"]


def test_no_profile_owned_value_of_the_real_bundle_changes_without_a_finding(tmp_path):
    """Every path the gpuStack profile owns that the real v0.11.1 bundle sets is installed as the
    bundle has it, or a warning names the component and the path."""
    (spec,) = _project(tmp_path, {"training": TRAINING})
    plan = pipeline.build_plan(spec)
    ours = recipe_mod.resolve(plan.recipe.criteria, load_catalog(), profile=dict(spec.profile))
    table = recipe_mod.profile_values_owned(ours, load_catalog())
    checked = 0
    for comp in ("gpu-operator", "nvidia-dra-driver-gpu"):
        bundle = _bundle_values(comp)
        paths = {p for value in table.values() for p, _ in leaf_paths(value.get(comp, {}))}
        for path in sorted(paths):
            have = get_path(bundle, path, None)
            if have is None:
                continue
            checked += 1
            if get_path(plan.components[comp].values, path, None) != have:
                assert [
                    f
                    for f in plan.findings
                    if f.severity == "warning" and f.component == comp and path in f.message
                ], (comp, path)
    assert checked >= 3  # driver.enabled, toolkit.enabled, nvidiaDriverRoot


def test_a_cluster_profile_against_the_file_is_a_finding_with_the_file_key_and_new_value(tmp_path):
    (spec,) = _project(tmp_path, {"training": TRAINING}, profile="azure-managed")
    plan = pipeline.build_plan(spec)
    assert plan.recipe.profile == ("gpuStack", "azure-managed")
    (f,) = [f for f in plan.findings if f.id == "PROFILE-CHANGED"]
    assert f.severity == "warning" and f.file.endswith("training.recipe.yaml")
    assert f.key == "componentRefs[1].valuesFile" and "driver.enabled: false" in f.message


def _written(profile: str, edit=None) -> str:
    catalog = load_catalog()
    r = recipe_mod.resolve(
        Criteria(service="aks", accelerator="h100", os="ubuntu", intent="training"),
        catalog,
        profile={"gpuStack": profile},
    )
    doc = recipe_result_writer.to_document(r)
    del doc["metadata"]["selectedProfile"]
    for ref in doc["componentRefs"]:
        if edit:
            edit(ref)
    return recipe_result_writer.dump_yaml(doc)


def test_overrides_that_say_who_owns_the_driver_select_the_profile(tmp_path):
    (spec,) = _project(tmp_path, {"c": _written("operator-managed")})
    plan = pipeline.build_plan(spec)
    assert plan.recipe.profile == ("gpuStack", "operator-managed")
    (f,) = [f for f in plan.findings if f.id == "PROFILE-FROM-FILE"]
    assert "componentRefs[" in f.message


def test_values_that_agree_with_no_profile_are_refused_with_one_line(tmp_path, capsys):
    from gpucluster.cli import main

    def host_root(ref):
        if ref["name"] == "nvidia-dra-driver-gpu":
            ref["overrides"]["nvidiaDriverRoot"] = (
                "/"  # the host's driver root, with the operator's driver
            )

    _project(tmp_path, {"c": _written("operator-managed", host_root)})
    assert main(["plan", "--config", str(tmp_path / "gpucluster.yaml")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert (
        line.startswith("error[PROFILE-CONFLICT]")
        and "c.recipe.yaml" in line
        and "nvidiaDriverRoot" in line
    )
    assert ".overrides." in line and " fix: " in line


# --------------------------------------------------------------------------- real charts


def _kai_v0141_file() -> str:
    """An AKS RecipeResult as an AICR of the KAI v0.14 era would pin it (no profile, operator-owned
    driver stated in its overrides)."""

    def edit(ref):
        if ref["name"] == "kai-scheduler":
            ref["version"] = "v0.14.1"

    return _written("operator-managed", edit)


def test_real_files_render_with_every_runtime_class_they_name(
    reference_charts, shared_dir, tmp_path
):
    specs = _project(
        tmp_path,
        {
            **{p.name.split(".")[0]: p for p in sorted(AICR.glob("*.recipe.yaml"))},
            "kai-v0141": _kai_v0141_file(),
        },
    )
    plans = pipeline.build_plans(specs)
    sources = ChartSources([reference_charts], cache_dir=Path("/nonexistent-gpucluster-cache"))
    crds = lint.load_crd_folders([shared_dir / "reference" / "crds"])
    allowed = set(UNAVAILABLE) | {"nvsentinel", "dynamo-platform"}
    with Renderer(sources, allow_missing=allowed) as renderer:
        result = render_plans(plans, sources, renderer=renderer)
        findings = lint.lint_result(result, extra_crds=crds)
    errors = [f.render() for f in findings if f.severity == "error"]
    assert not errors, "\n".join(errors)
    assert plans[-1].components["kai-scheduler"].values["admission"] == {
        "gpuPodRuntimeClassName": "nvidia"
    }
    for plan in plans:
        assert plan.recipe.profile == ("gpuStack", "operator-managed")


def test_a_recipe_clusters_findings_are_one_line_per_kind_unless_all_are_asked(
    tmp_path, capsys, monkeypatch
):
    from gpucluster.cli import main

    _project(tmp_path, {"training": TRAINING})
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--config", "gpucluster.yaml"]) == 0
    summary = capsys.readouterr().err.strip().splitlines()
    assert main(["plan", "--config", "gpucluster.yaml", "--findings", "all"]) == 0
    every = capsys.readouterr().err.strip().splitlines()
    kinds = {line.split("]")[0] for line in every}
    assert len(summary) == len(kinds) < len(every)
    skew = [line for line in summary if line.startswith("info[VERSION-SKEW]")]
    assert len(skew) == 1 and " findings (" in skew[0] and "; first: component=" in skew[0]
    assert "all 6: add --findings all to the command" in skew[0] and " fix: " in skew[0]
    assert all(
        re.match(r"^(error|warning|info)\[[A-Z0-9.-]+\] .* fix: ", line) for line in summary
    ), summary


# --------------------------------------------------------------------------- a stale profile-owned override


def _selected_file(tmp_path: Path, strip_others: bool) -> Path:
    """gpucluster's AKS training RecipeResult for gpuStack=azure-managed (``metadata.selectedProfile``
    kept) with a stale DRA ``nvidiaDriverRoot: /run/nvidia/driver`` override (the operator-managed
    value); ``strip_others``: the other components' profile-owned overrides removed."""
    catalog = load_catalog()
    r = recipe_mod.resolve(
        Criteria(service="aks", accelerator="h100", os="ubuntu", intent="training"),
        catalog,
        profile={"gpuStack": "azure-managed"},
    )
    doc = recipe_result_writer.to_document(r)
    owned = doc["metadata"]["selectedProfile"]["ownedPaths"]
    for ref in doc["componentRefs"]:
        ref.pop("values", None)
        if strip_others and ref["name"] in owned:
            for p in owned[ref["name"]]:
                parent = ref.get("overrides") or {}
                *head, last = p.split(".")
                for k in head:
                    parent = parent.get(k) or {}
                parent.pop(last, None)
        if ref["name"] == "nvidia-dra-driver-gpu":
            ref.setdefault("overrides", {})["nvidiaDriverRoot"] = "/run/nvidia/driver"
    (tmp_path / "recipe.yaml").write_text(recipe_result_writer.dump_yaml(doc))
    (tmp_path / "gpucluster.yaml").write_text("clusters:\n  - name: c\n    recipe: recipe.yaml\n")
    return tmp_path / "gpucluster.yaml"


def _plan_errors(config: Path, capsys) -> tuple[int, list[str]]:
    from gpucluster.cli import main

    code = main(["plan", "--config", str(config)])
    return code, [
        line for line in capsys.readouterr().err.splitlines() if line.startswith("error[")
    ]


def test_a_stale_override_no_profile_value_fits_is_told_to_go_and_removing_it_plans(
    tmp_path, capsys
):
    config = _selected_file(tmp_path, strip_others=False)
    code, (line,) = _plan_errors(config, capsys)
    assert code == 2 and "select the matching profile" not in line
    m = re.search(r"fix: remove (componentRefs\[(\d+)\]\.overrides\.nvidiaDriverRoot) \(", line)
    assert m, line
    assert "gpuStack=operator-managed sets it but disagrees with 6 other override(s)" in line
    assert "(allowed: azure-managed: '/', operator-managed: '/run/nvidia/driver')" in line
    recipe = tmp_path / "recipe.yaml"
    doc = yaml.safe_load(recipe.read_text())  # follow the fix
    del doc["componentRefs"][int(m.group(2))]["overrides"]["nvidiaDriverRoot"]
    recipe.write_text(yaml.safe_dump(doc))
    assert _plan_errors(config, capsys) == (0, [])


def test_a_stale_override_another_profile_value_fits_is_told_to_select_it_and_that_plans(
    tmp_path, capsys
):
    config = _selected_file(tmp_path, strip_others=True)
    code, (line,) = _plan_errors(config, capsys)
    assert code == 2
    assert (
        "fix: select gpuStack=operator-managed, which sets nvidiaDriverRoot: '/run/nvidia/driver'"
        in line
    )
    assert "metadata.selectedProfile.value: operator-managed" in line
    recipe = tmp_path / "recipe.yaml"
    doc = yaml.safe_load(recipe.read_text())  # follow the fix
    doc["metadata"]["selectedProfile"]["value"] = "operator-managed"
    recipe.write_text(yaml.safe_dump(doc))
    assert _plan_errors(config, capsys) == (0, [])


def test_a_file_that_selects_operator_managed_itself_gets_pools_that_follow_it(tmp_path):
    catalog = load_catalog()
    r = recipe_mod.resolve(
        Criteria(service="aks", accelerator="h100", os="ubuntu", intent="training"),
        catalog,
        profile={"gpuStack": "operator-managed"},
    )
    (spec,) = _project(
        tmp_path, {"c": recipe_result_writer.dump_yaml(recipe_result_writer.to_document(r))}
    )
    plan = pipeline.build_plan(spec)  # was: error[AKS-GPU-DRIVER], the default pools kept Install
    assert plan.recipe.profile == ("gpuStack", "operator-managed")
    assert {p.gpu_driver for p in plan.cluster.pools if p.gpu} == {"None"}
    assert not [f for f in plan.findings if f.id.startswith("PROFILE-")]


def test_every_value_the_real_v0111_files_state_is_installed_or_named(tmp_path):
    """Each value a real AICR v0.11.1 file states (its overrides, and its valuesFile as that
    release wrote it: registry formerValues and their replaced values) is installed as the file
    has it, or a warning naming the component and the path says what is installed instead."""
    from gpucluster.recipes import recipe_result

    files = {p.name.split(".")[0]: p for p in sorted(AICR.glob("*.recipe.yaml"))}
    assert len(files) == 3
    for spec in _project(tmp_path, files):
        plan = pipeline.build_plan(spec)
        intent = recipe_result.file_intent(spec.recipe_file, load_catalog(), cluster=spec)
        stated = [
            (comp, path, value)
            for comp, (_k, vals, _w) in intent.stated.items()
            for path, value in leaf_paths(vals)
        ] + [
            (comp, path, value)
            for comp, (_k, entries) in intent.replaced.items()
            for path, value, _why, _where in entries
        ]
        assert any(path == "toolkit.enabled" for _c, path, _v in stated)
        for comp, path, value in stated:
            if get_path(plan.components[comp].values, path, None) == value:
                continue
            assert [
                f
                for f in plan.findings
                if f.severity == "warning" and f.component == comp and path in f.message
            ], (spec.name, comp, path)


def test_the_printed_toolkit_warning_keeps_the_installed_value_and_the_reason(tmp_path):
    """The line the user reads (one line, its message cut to the cap in the middle) still holds
    the file's value, the value installed and the public source of why; so does the
    PROFILE-FROM-FILE line, its selection."""
    (spec,) = _project(tmp_path, {"training": TRAINING})
    plan = pipeline.build_plan(spec)
    (f,) = [f for f in plan.findings if f.id == "FILE-VALUE-CHANGED"]
    line = f.render()
    for part in (
        "toolkit.enabled: false",
        "gpucluster installs toolkit.enabled: true",
        "NVIDIA/aicr#1757",
    ):
        assert part in line, line
    for f in plan.findings:
        if f.id == "PROFILE-FROM-FILE":
            assert f.message.split(":")[0] in f.render()


def test_plan_json_carries_every_finding_whole(tmp_path):
    """``plan --format json``: each cluster's findings, every field, the message not cut."""
    import io
    import json

    from gpucluster import cli

    (spec,) = _project(tmp_path, {"training": TRAINING})
    plan = pipeline.build_plan(spec)
    out, err = io.StringIO(), io.StringIO()
    config = str(tmp_path / "gpucluster.yaml")
    assert cli.main(["plan", "--config", config, "--format", "json"], stdout=out, stderr=err) == 0
    (doc,) = json.loads(out.getvalue())
    expected = [
        {
            "id": f.id,
            "severity": f.severity,
            "file": f.file,
            "cluster": f.cluster,
            "component": f.component,
            "key": f.key,
            "message": f.message,
            "fix": f.fix,
        }
        for f in plan.findings
    ]
    assert doc["findings"] == expected and any(len(f["message"]) > 480 for f in doc["findings"])


def test_an_edit_of_the_criteria_alone_says_the_files_components_win(tmp_path):
    """The real v0.11.1 training file with only criteria.intent edited to inference: the same
    components are installed, and a warning says so and how to get the inference recipe."""
    edited = TRAINING.read_text().replace("intent: training", "intent: inference", 1)
    assert edited != TRAINING.read_text()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (before,) = _project(tmp_path / "a", {"training": TRAINING})
    (after,) = _project(tmp_path / "b", {"training": edited})
    plan_before, plan_after = pipeline.build_plan(before), pipeline.build_plan(after)
    assert [n.id for n in plan_after.nodes] == [n.id for n in plan_before.nodes]
    assert not [f for f in plan_before.findings if f.id == "RECIPE-CRITERIA-UNUSED"]
    (f,) = [f for f in plan_after.findings if f.id == "RECIPE-CRITERIA-UNUSED"]
    assert (f.severity, f.key) == ("warning", "criteria") and f.file.endswith(
        "training.recipe.yaml"
    )
    assert "select the recipe h100-aks-ubuntu-inference" in f.message
    assert "resolved for h100-aks-ubuntu-training" in f.message and "components win" in f.message
    assert (
        "gpucluster recipe --service aks --accelerator h100 --os ubuntu --intent inference" in f.fix
    )

"""Problems a new user reported after following the README (messages, fixes, CLI behaviour)."""

from __future__ import annotations

import pytest

from gpucluster.errors import GpuclusterError
from gpucluster.model import ClusterSpec, Criteria, ExistingCluster
from gpucluster.pipeline import build_plan
from gpucluster.recipes.scheduling import parse_scheduling


def spec(**kw) -> ClusterSpec:
    kw.setdefault("criteria", Criteria("aks", "h100", "ubuntu", "training"))
    return ClusterSpec(name="c1", source="g.yaml", **kw)


def refusal(cluster: ClusterSpec) -> GpuclusterError:
    with pytest.raises(GpuclusterError) as exc:
        build_plan(cluster)
    return exc.value


# --------------------------------------------------------------------------- AKS-WILDCARD-TOLERATION fix text


def test_wildcard_toleration_fix_for_an_existing_cluster_names_the_gpu_nodes_taint():
    err = refusal(spec(existing=ExistingCluster(kubeconfig_path="k")))
    (p,) = [p for p in err.problems if p.id == "AKS-WILDCARD-TOLERATION"]
    assert (
        "derived from the GPU pools" not in p.fix
    )  # an existing cluster has no pools to derive from
    assert "keyed toleration matching the taint of the GPU nodes" in p.fix
    assert "scheduling.accelerated.tolerations: ['nvidia.com/gpu:NoSchedule']" in p.fix


def test_wildcard_toleration_fix_with_pools_points_at_the_pool_default():
    wildcard = parse_scheduling(
        {"accelerated": {"tolerations": [{"operator": "Exists"}]}}, file="g.yaml", cluster="c1"
    )
    err = refusal(spec(scheduling=wildcard))
    (p,) = [p for p in err.problems if p.id == "AKS-WILDCARD-TOLERATION"]
    assert (
        "remove scheduling.accelerated.tolerations to use the default derived from the GPU pool taints"
        in p.fix
    )
    assert "'nvidia.com/gpu:NoSchedule'" in p.fix


# --------------------------------------------------------------------------- flipping a profile-owned key


def run_cli(args, tmp_path, monkeypatch):
    import io

    from gpucluster import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    out, err = io.StringIO(), io.StringIO()
    rc = cli.main(args, stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error[")]


def test_set_driver_enabled_gets_one_coherent_answer_naming_the_profile(tmp_path, monkeypatch):
    rc, out, err = run_cli(
        ["plan", "--set", "gpuoperator:driver.enabled=true"], tmp_path, monkeypatch
    )
    assert rc == 2 and out == ""
    (line,) = error_lines(err)  # no GPU-DRIVER-ROOT / AKS-GPU-DRIVER telling a different story
    assert line.startswith(
        "error[PROFILE-OWNED] file=--set cluster=gpu-training component=gpu-operator key=driver.enabled:"
    )
    assert (
        "fix: remove the override and choose profile: {gpuStack: operator-managed} in the cluster file"
        in line
    )
    assert "azure-managed mode" not in line and "nvidiaDriverRoot=" not in line


def test_every_flipped_key_names_the_same_profile(tmp_path, monkeypatch):
    sets = [
        "gpuoperator:driver.enabled=true",
        "gpuoperator:toolkit.enabled=true",
        "dradriver:nvidiaDriverRoot=/run/nvidia/driver",
    ]
    rc, _, err = run_cli(["plan", *(a for s in sets for a in ("--set", s))], tmp_path, monkeypatch)
    lines = error_lines(err)
    assert rc == 2 and len(lines) == 3
    assert all(line.startswith("error[PROFILE-OWNED] file=--set ") for line in lines)
    assert all("choose profile: {gpuStack: operator-managed}" in line for line in lines)


def test_flip_back_from_operator_managed_names_azure_managed(tmp_path, monkeypatch):
    (tmp_path / "gpucluster.yaml").write_text(
        "clusters:\n  - name: c1\n    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}\n"
        "    profile: {gpuStack: operator-managed}\n    overrides:\n      set: [gpuoperator:driver.enabled=false]\n"
    )
    rc, _, err = run_cli(["plan"], tmp_path, monkeypatch)
    (line,) = error_lines(
        err
    )  # GPU-DRIVER-STALE-RECIPE and AKS-GPU-DRIVER follow from the same flip
    assert rc == 2
    assert line.startswith(
        "error[PROFILE-OWNED] file=gpucluster.yaml cluster=c1 component=gpu-operator key=driver.enabled:"
    )
    assert "choose profile: {gpuStack: azure-managed}" in line


def test_a_value_no_profile_sets_is_told_to_go(tmp_path, monkeypatch):
    rc, _, err = run_cli(
        ["plan", "--set", "gpuoperator:operator.runtimeClass=custom"], tmp_path, monkeypatch
    )
    (line,) = error_lines(err)  # NVSENTINEL-RUNTIMECLASS and AKS-GPU-DRIVER follow from it
    assert rc == 2 and line.startswith("error[PROFILE-OWNED] file=--set ")
    assert (
        "fix: remove the override: no gpuStack profile value sets operator.runtimeClass to 'custom'"
        in line
    )
    assert "'operator-managed' sets 'nvidia'" in line


def test_independent_findings_stay(tmp_path, monkeypatch):
    # an install dir of '/' is wrong whatever the profile: still reported next to PROFILE-OWNED
    rc, _, err = run_cli(
        [
            "plan",
            "--set",
            "gpuoperator:driver.enabled=true",
            "--set",
            "gpuoperator:hostPaths.driverInstallDir=/",
        ],
        tmp_path,
        monkeypatch,
    )
    ids = sorted(line.split("]")[0] + "]" for line in error_lines(err))
    assert rc == 2 and ids == ["error[GPU-DRIVER-ROOT]", "error[PROFILE-OWNED]"]
    (root,) = [line for line in error_lines(err) if "GPU-DRIVER-ROOT" in line]
    assert "file=--set" in root and "key=hostPaths.driverInstallDir" in root


def test_cluster_file_override_errors_name_the_cluster_file(tmp_path, monkeypatch):
    (tmp_path / "gpucluster.yaml").write_text(
        "clusters:\n  - name: c1\n    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}\n"
        "    overrides:\n      set: [gpuoperator:toolkit.enabled=true]\n"
    )
    rc, _, err = run_cli(["plan"], tmp_path, monkeypatch)
    (line,) = error_lines(err)
    assert rc == 2 and line.startswith("error[PROFILE-OWNED] file=gpucluster.yaml cluster=c1 ")
    assert "choose profile: {gpuStack: operator-managed}" in line


def test_docs_show_the_real_answer(tmp_path, monkeypatch):
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "policies.md").read_text()
    (shown,) = [
        line.strip()
        for line in doc.splitlines()
        if line.startswith("    error[PROFILE-OWNED] file=--set")
    ]
    _, _, err = run_cli(["plan", "--set", "gpuoperator:driver.enabled=true"], tmp_path, monkeypatch)
    assert error_lines(err) == [shown]


# --------------------------------------------------------------------------- wording


def test_criteria_fix_has_no_article_error():
    from gpucluster.recipes.catalog import load_catalog
    from gpucluster.recipes.recipe import validate_criteria

    for field, value in (("accelerator", "gb200"), ("os", "ol")):  # known, but not on AKS
        crit = Criteria(
            **{
                "service": "aks",
                "accelerator": "h100",
                "os": "ubuntu",
                "intent": "training",
                field: value,
            }
        )
        with pytest.raises(GpuclusterError) as exc:
            validate_criteria(crit, load_catalog(), file="g.yaml", cluster="c1")
        text = exc.value.render()
        assert f"fix: use one of the {field} values the aks platform declares" in text, text
        assert " a accelerator" not in text and " a os " not in text


def test_ownership_message_for_a_cluster_without_pools_is_grammatical(tmp_path):
    from policy_helpers import base_values, make_cluster, make_components, make_recipe

    from gpucluster_aks.policy import gpucluster_policy_checks

    recipe = make_recipe()
    recipe.profile_owned = {}  # a profile that does not own the key: AKS-GPU-DRIVER reports it
    values = base_values()
    values["gpu-operator"]["driver"] = {"enabled": True}
    findings = gpucluster_policy_checks(
        cluster=make_cluster(pools=[]), recipe=recipe, components=make_components(recipe, values)
    )
    (f,) = [f for f in findings if f.id == "AKS-GPU-DRIVER"]
    assert "but this cluster uses the azure-managed driver ownership mode" in f.message


# --------------------------------------------------------------------------- empty location fields


def test_a_finding_about_the_whole_file_prints_no_empty_fields():
    """An AICR RecipeResult read past fields printed ``cluster=train component= key=:``; like
    :meth:`Problem.render`, a finding names only the parts of its location it has."""
    from gpucluster.model import Finding

    whole = Finding(
        "RECIPE-FIELDS-UNUSED",
        "info",
        "train",
        "",
        "",
        "read past: validation",
        "none needed",
        file="r.yaml",
    )
    assert (
        whole.render()
        == "info[RECIPE-FIELDS-UNUSED] file=r.yaml cluster=train: read past: validation fix: none needed"
    )
    full = Finding("X", "error", "c", "gpu-operator", "driver.enabled", "m", "f")
    assert full.render() == "error[X] cluster=c component=gpu-operator key=driver.enabled: m fix: f"

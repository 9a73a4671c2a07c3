"""``gpucluster upgrade-check --from OLD --to NEW`` (issue 11, item 5): the verdict of every known
transition, the inputs (cluster files, RecipeResults, git revisions), text/JSON output and the exit
codes a CI job gates on."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from gpucluster import cli
from gpucluster.errors import GpuclusterError
from gpucluster.lint import upgrade_check
from gpucluster.recipes import recipe_result_writer

AKS = {"service": "aks", "accelerator": "h100", "intent": "training"}
RAILS = [
    {"name": "mlx5_0", "rootDevice": "0000:03:00.0"},
    {"name": "mlx5_1", "rootDevice": "0002:03:00.0"},
    {"name": "mlx5_3", "rootDevice": "0010:03:00.0"},
    {"name": "mlx5_4", "rootDevice": "0012:03:00.0"},
]


def write(path: Path, doc) -> str:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def aks_file(path: Path, **extra) -> str:
    cluster = {"name": "lab", "criteria": AKS, "kubernetesVersion": "1.34", **extra}
    return write(path, {"clusters": [cluster]})


def run(tmp_path: Path, old: str, new: str, *, fmt: str = "json"):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(
        ["upgrade-check", "--from", old, "--to", new, "--format", fmt], stdout=out, stderr=err
    )
    return (
        code,
        (json.loads(out.getvalue()) if fmt == "json" and out.getvalue() else out.getvalue()),
        err.getvalue(),
    )


def change(report: dict, component: str, cluster: str | None = None) -> dict:
    (c,) = [c for c in report["clusters"] if cluster is None or c["cluster"] == cluster]
    (ch,) = [ch for ch in c["changes"] if ch["component"] == component]
    return ch


def rules_of(ch: dict) -> set[str]:
    return {r["rule"] for r in ch["reasons"]}


# --------------------------------------------------------------------------- the transitions


def test_dra_050_to_051_on_nvke_is_manual(tmp_path):
    doc = recipe_result_writer.to_document(_nvke_recipe(tmp_path))
    new = write(tmp_path / "new.recipe.yaml", doc)
    for ref in doc["componentRefs"]:
        if ref["name"] == "nvidia-dra-driver-gpu":
            assert ref["version"] == "0.5.1"
            ref["version"] = "0.5.0"
    old = write(tmp_path / "old.recipe.yaml", doc)
    files = []
    for label, recipe in (("a", old), ("b", new)):
        files.append(
            write(
                tmp_path / f"{label}.yaml",
                {
                    "clusters": [
                        {
                            "name": "nvke-a",
                            "recipe": Path(recipe).name,
                            "kubernetesVersion": "1.34",
                            "settings": {"rails": RAILS},
                        }
                    ]
                },
            )
        )
    code, report, _ = run(tmp_path, *files)
    dra = change(report, "nvidia-dra-driver-gpu")
    assert (dra["change"], dra["from"], dra["to"], dra["verdict"]) == (
        "version",
        "0.5.0",
        "0.5.1",
        "manual",
    )
    assert "nvke-dra-0.5.0-to-0.5.1" in rules_of(dra)
    assert dra["crds"]["owned"] == [
        "computedomaincliques.resource.nvidia.com",
        "computedomains.resource.nvidia.com",
    ]
    assert "nvidia-dra-driver-gpu-crds" in dra["crds"]["step"]
    assert code == upgrade_check.EXIT_MANUAL == 3
    # and back down: the version gate would refuse it
    code, report, _ = run(tmp_path, files[1], files[0])
    assert "nvke-dra-below-0.5.1" in rules_of(change(report, "nvidia-dra-driver-gpu")) and code == 3


def _nvke_recipe(tmp_path):
    from test_nvke_pipeline import build

    return build(tmp_path).recipe


def test_gpustack_flip_recreates_gpu_pools(tmp_path):
    old = aks_file(tmp_path / "a.yaml")
    new = aks_file(tmp_path / "b.yaml", profile={"gpuStack": "operator-managed"})
    code, report, _ = run(tmp_path, old, new)
    cluster = change(report, "cluster")
    assert cluster["verdict"] == "manual" and code == 3
    assert {"aks-gpustack-flip-recreates-gpu-pools", "aks-gpu-pool-replaced"} <= rules_of(cluster)
    assert "profile.gpuStack azure-managed -> operator-managed" in cluster["details"]
    assert "GPU pool gpu: gpuDriver Install -> None" in cluster["details"]


def test_turning_nodewright_tuning_off_is_not_a_revert(tmp_path):
    old = aks_file(
        tmp_path / "a.yaml", overrides={"set": ["nodewrightcustomizations:tuningEnabled=true"]}
    )
    new = aks_file(tmp_path / "b.yaml")
    code, report, _ = run(tmp_path, old, new)
    ch = change(report, "nodewright-customizations")
    assert ch["verdict"] == "manual" and "nodewright-tuning-not-reverted" in rules_of(ch)
    assert "tuningEnabled" in ch["values"]
    assert code == 3
    # turning it on is a plain values change
    code, report, _ = run(tmp_path, new, old)
    assert change(report, "nodewright-customizations")["verdict"] == "safe" and code == 0


@pytest.mark.parametrize(
    "new_version, verdict", [("1.36", "manual"), ("1.33", "manual"), ("1.35", "manual")]
)
def test_kubernetes_minors_cannot_be_skipped(tmp_path, new_version, verdict):
    from gpucluster import pipeline
    from gpucluster.inputs.config import parse_clusters

    def plan(version):
        (spec,) = parse_clusters(
            {"clusters": [{"name": "lab", "criteria": AKS, "kubernetesVersion": "1.34"}]},
            source="c.yaml",
            root=tmp_path,
        )
        p = pipeline.build_plan(spec)
        p.cluster.kubernetes_version = (
            version  # policy refuses < 1.34 at synth; the comparison must still judge it
        )
        return p

    report = upgrade_check.compare([plan("1.34")], [plan(new_version)], upgrade_check.load_rules())
    (cluster,) = [c for c in report.clusters[0].changes if c.component == "cluster"]
    assert cluster.verdict == verdict
    skip = new_version != "1.35"
    assert ("kubernetes-minor-skip" in {r.rule for r in cluster.reasons}) is skip
    # the default AKS pools: every node of the GPU pool is drained and re-imaged (never safe)
    assert "aks-gpu-pool-upgraded" in {r.rule for r in cluster.reasons}
    assert cluster.details[0] == f"kubernetesVersion 1.34 -> {new_version}"
    if not skip:
        reason = cluster.reasons[0]
        assert reason.as_dict() == {
            "rule": "default-kubernetes-minor",
            "verdict": "safe",
            "why": "Kubernetes 1.34 -> 1.35 is one minor step; the control plane upgrades first, "
            "then each pool (surge)",
            "action": "",
            "source": "AICR's AKS GPU Setup guide (NVIDIA/aicr docs/integrator/aks-gpu-setup.md): "
            "one minor at a time",
        }


def test_a_kubernetes_minor_upgrade_drains_every_gpu_node(tmp_path):
    """kubernetesVersion 1.34 -> 1.35 on AKS changes every pool's orchestrator_version: AKS
    upgrades a GPU pool by draining and re-imaging each of its nodes, so the change is manual and
    names the pool (it was 'safe', exit 0)."""
    pools = [SYSTEM, dict(GPU, nodeCount=2), dict(GPU, name="gpub")]
    old = aks_file(tmp_path / "a.yaml", pools=pools)
    new = write(
        tmp_path / "b.yaml",
        {
            "clusters": [
                {"name": "lab", "criteria": AKS, "kubernetesVersion": "1.35", "pools": pools}
            ]
        },
    )
    code, report, _ = run(tmp_path, old, new)
    ch = change(report, "cluster")
    assert ch["verdict"] == "manual" and code == 3, ch
    for name, count in (("gpu", 2), ("gpub", 1)):
        detail = (
            f"GPU pool {name}: Kubernetes 1.34 -> 1.35 (orchestrator_version), "
            f"each of its {count} node(s) drained and re-imaged"
        )
        assert detail in ch["details"], ch["details"]
    [reason] = [r for r in ch["reasons"] if r["rule"] == "aks-gpu-pool-upgraded"][:1]
    assert reason["verdict"] == "manual"
    assert "maxUnavailable" in reason["why"] and "poolUpgrade" in reason["action"]
    assert "maintenance window" in reason["action"]
    code, text, _ = run(tmp_path, old, new, fmt="text")
    assert "cluster lab (aks): manual" in text and "verdict: manual (exit 3)" in text, text
    # the system pool is upgraded too, but the verdict is about GPU nodes: no GPU detail for it
    assert not any("GPU pool system" in d for d in ch["details"])


def test_a_kubernetes_minor_upgrade_of_an_existing_aks_cluster_names_no_pool(tmp_path):
    """The default AKS pools (system + gpu) give one GPU pool upgrade; a cluster whose pools
    gpucluster does not manage (an existing cluster: no pools) gives none."""
    from gpucluster import pipeline
    from gpucluster.inputs.config import parse_clusters
    from gpucluster.lint.upgrade_check import replacing_changes

    (spec,) = parse_clusters(
        {"clusters": [{"name": "lab", "criteria": AKS, "kubernetesVersion": "1.34"}]},
        source="c.yaml",
        root=tmp_path,
    )
    a = pipeline.build_plan(spec)
    (spec,) = parse_clusters(
        {"clusters": [{"name": "lab", "criteria": AKS, "kubernetesVersion": "1.35"}]},
        source="c.yaml",
        root=tmp_path,
    )
    b = pipeline.build_plan(spec)
    assert [m for m, _ in replacing_changes(a, b)] == ["gpuPoolUpgrade"]
    a.cluster.pools, b.cluster.pools = [], []
    assert replacing_changes(a, b) == []


def test_a_gpu_pool_of_an_existing_shape_restarts_no_dra_plugin(tmp_path):
    """Adding a second GPU pool of the same VM size: the pool is reported (manual, new capacity)
    and the DRA driver does not change (its kubelet plugin pods were all restarted)."""
    old = aks_file(tmp_path / "a.yaml", pools=[SYSTEM, GPU])
    new = aks_file(tmp_path / "b.yaml", pools=[SYSTEM, GPU, dict(GPU, name="gpub")])
    code, report, _ = run(tmp_path, old, new)
    components = {ch["component"] for ch in report["clusters"][0]["changes"]}
    assert "nvidia-dra-driver-gpu" not in components and "cluster" in components, report
    assert "aks-gpu-pool-added" in rules_of(change(report, "cluster")) and code == 3


def test_a_dra_plugin_re_roll_is_named_not_a_plain_values_change(tmp_path):
    """The driver identity changes with the Kubernetes version where the node image brings the
    driver: the DRA change names the re-roll of the kubelet plugin on every GPU node (what
    docs/upgrading.md says it does), not 'values change only'."""
    profile = {"gpuStack": "azure-managed"}
    old = aks_file(tmp_path / "a.yaml", profile=profile)
    new = write(
        tmp_path / "b.yaml",
        {
            "clusters": [
                {"name": "lab", "criteria": AKS, "kubernetesVersion": "1.35", "profile": profile}
            ]
        },
    )
    code, report, _ = run(tmp_path, old, new)
    dra = change(report, "nvidia-dra-driver-gpu")
    assert dra["values"] == ["kubeletPlugin.podAnnotations.gpucluster/driver-identity"], dra
    assert rules_of(dra) == {"dra-kubelet-plugin-reroll"}, dra
    [reason] = dra["reasons"]
    assert "every GPU node" in reason["why"] and "new ResourceClaims" in reason["why"]
    assert reason["source"].startswith("Kubernetes docs")
    code, text, _ = run(tmp_path, old, new, fmt="text")
    assert "[dra-kubelet-plugin-reroll]" in text, text


def test_a_kubernetes_minor_of_an_existing_cluster_says_gpucluster_upgrades_nothing(tmp_path):
    """An existing cluster (gpucluster provisions none of it): the file states its version, so the
    reason says gpucluster upgrades neither the control plane nor the nodes (it said 'the control
    plane upgrades first, then each pool')."""
    extra = {
        "existing": {"kubeconfig": "~/.kube/config"},
        "scheduling": {"accelerated": {"tolerations": ["nvidia.com/gpu:NoSchedule"]}},
    }
    old = aks_file(tmp_path / "a.yaml", **extra)
    new = write(
        tmp_path / "b.yaml",
        {"clusters": [{"name": "lab", "criteria": AKS, "kubernetesVersion": "1.35", **extra}]},
    )
    code, report, _ = run(tmp_path, old, new)
    ch = change(report, "cluster")
    [reason] = ch["reasons"]
    assert reason["rule"] == "existing-cluster-kubernetes-minor" and reason["verdict"] == "safe"
    assert "gpucluster upgrades neither the control plane nor its nodes" in reason["why"], reason
    assert "one minor at a time" in reason["action"]
    code, text, _ = run(tmp_path, old, new, fmt="text")  # the action is what to do: shown as text
    assert "safe [existing-cluster-kubernetes-minor]: " in text, text
    assert "do: upgrade the cluster with its platform's own tools" in text, text


def test_a_crd_owner_change_is_manual(tmp_path):
    old = aks_file(tmp_path / "a.yaml")
    new = aks_file(tmp_path / "b.yaml", overrides={"set": ["dradriver:enabled=false"]})
    code, report, _ = run(tmp_path, old, new)
    gpu = change(report, "gpu-operator")
    assert gpu["verdict"] == "manual" and "crd-owner-change" in rules_of(gpu)
    assert {
        "crd": "computedomains.resource.nvidia.com",
        "from": "nvidia-dra-driver-gpu",
        "to": "gpu-operator",
    } in gpu["crds"]["ownerChanges"]
    dra = change(report, "nvidia-dra-driver-gpu")
    assert dra["change"] == "removed" and "component-with-crds-removed" in rules_of(dra)
    assert code == 3


def test_an_uncovered_version_bump_is_unknown_and_names_the_crd_step(tmp_path):
    from gpucluster import pipeline
    from gpucluster.inputs import config

    plan = pipeline.build_plan(config.load_clusters()[0])
    doc = recipe_result_writer.to_document(plan.recipe)
    new = write(tmp_path / "new.yaml", doc)
    for ref in doc["componentRefs"]:
        if ref["name"] == "nfd":
            ref["version"] = "0.18.3"
    old = write(tmp_path / "old.yaml", doc)
    code, report, _ = run(tmp_path, old, new)
    nfd = change(report, "nfd")
    assert (nfd["change"], nfd["from"], nfd["to"], nfd["verdict"]) == (
        "version",
        "0.18.3",
        "0.19.0",
        "unknown",
    )
    assert rules_of(nfd) == {"default-version-unknown"}
    assert "nfd-crds" in nfd["crds"]["step"] and "server-side" in nfd["crds"]["step"]
    assert code == upgrade_check.EXIT_UNKNOWN == 4


def test_gpu_operator_patch_with_a_record_is_safe(tmp_path):
    from gpucluster import pipeline
    from gpucluster.inputs import config

    doc = recipe_result_writer.to_document(pipeline.build_plan(config.load_clusters()[0]).recipe)
    new = write(tmp_path / "new.yaml", doc)
    for ref in doc["componentRefs"]:
        if ref["name"] == "gpu-operator":
            ref["version"] = "v26.7.0"
    old = write(tmp_path / "old.yaml", doc)
    code, report, _ = run(tmp_path, old, new)
    gpu = change(report, "gpu-operator")
    assert gpu["verdict"] == "safe" and "gpu-operator-26.7.0-to-26.7.1" in rules_of(gpu)
    assert "pre-upgrade hook" in gpu["crds"]["step"]
    assert code == 0


# --------------------------------------------------------------------------- inputs and output


def test_git_revision_of_the_same_file(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    f = repo / "gpucluster.yaml"
    aks_file(f)
    git("add", "gpucluster.yaml")
    git("commit", "-qm", "one")
    aks_file(f, profile={"gpuStack": "operator-managed"})
    code, report, err = run(tmp_path, "HEAD", str(f))
    assert err == "" and code == 3, err
    assert "aks-gpustack-flip-recreates-gpu-pools" in rules_of(change(report, "cluster"))
    monkeypatch.chdir(repo)  # REV:path is relative to the working directory, like git show
    code2, report2, err2 = run(tmp_path, "HEAD:gpucluster.yaml", "gpucluster.yaml")
    assert err2 == "" and code2 == 3
    assert change(report2, "cluster")["reasons"] == change(report, "cluster")["reasons"]
    code3, _, err3 = run(tmp_path, "nosuchrev", "gpucluster.yaml")
    assert code3 == 2 and err3.startswith("error[input]") and "nosuchrev" in err3


@pytest.mark.parametrize(
    "rev",
    [
        "--output={victim}",
        "--remote=/nonexistent",
        "--exec=touch {victim}.ran",
        "-o{victim}",
        "--end-of-options",
    ],
)
def test_a_revision_is_never_an_option_of_git(tmp_path, monkeypatch, rev):
    """--from=--output=FILE:gpucluster.yaml made `git archive` truncate FILE (and --remote ran
    git-upload-archive): a revision is resolved by `git rev-parse --verify --end-of-options` and
    only the commit id reaches git archive."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    f = repo / "gpucluster.yaml"
    aks_file(f)
    git("add", "gpucluster.yaml")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "one")
    victim = tmp_path / "important.txt"
    victim.write_text("important\n")
    monkeypatch.chdir(repo)
    rev = rev.format(victim=victim)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(
        ["upgrade-check", f"--from={rev}:gpucluster.yaml", "--to", "gpucluster.yaml"],
        stdout=out,
        stderr=err,
    )
    out, err = out.getvalue(), err.getvalue()
    assert code == 2 and out == "", err
    [line] = err.splitlines()
    assert line.startswith(
        f"error[input] key=--from/--to: '{rev}' is not a commit of the git repository "
    ), line
    assert " fix: name an existing revision" in line
    assert victim.read_text() == "important\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["important.txt", "repo"]


def test_text_output_and_no_change(tmp_path):
    a = aks_file(tmp_path / "a.yaml")
    code, text, err = run(tmp_path, a, a, fmt="text")
    assert code == 0 and err == ""
    assert text.splitlines()[-1] == "verdict: safe (exit 0)" and "no change" in text
    b = aks_file(tmp_path / "b.yaml", profile={"gpuStack": "operator-managed"})
    code, text, _ = run(tmp_path, a, b, fmt="text")
    assert (
        "manual [aks-gpustack-flip-recreates-gpu-pools]" in text
        and "do: drain GPU workloads" in text
    )
    assert text.splitlines()[-1] == "verdict: manual (exit 3)"


def test_a_cluster_moved_in_the_file_keeps_its_policy_errors(tmp_path):
    """Finding keys are absolute (clusters[<i>].kubernetesVersion): a cluster that moved from
    clusters[1] to clusters[0] with the same policy error is not a cluster whose NEW fixes it."""
    lab = {"name": "lab", "criteria": AKS, "kubernetesVersion": "1.31"}
    old = write(
        tmp_path / "old.yaml",
        {"clusters": [{"name": "other", "criteria": dict(AKS)}, dict(lab, criteria=dict(AKS))]},
    )
    new = write(tmp_path / "new.yaml", {"clusters": [lab]})
    code, report, err = run(tmp_path, old, new)
    ch = change(report, "policy", cluster="lab")
    assert ch["details"] == ["AKS-K8S-VERSION - clusters[0].kubernetesVersion"], ch
    assert not any("NEW fixes it" in d for d in ch["details"])


def test_bad_input_is_one_error_line_and_exit_2(tmp_path):
    a = aks_file(tmp_path / "a.yaml")
    code, out, err = run(tmp_path, str(tmp_path / "missing.yaml"), a, fmt="text")
    assert code == 2 and out == ""
    missing = tmp_path / "missing.yaml"
    assert err == (
        f"error[input] file={missing} key=--from: file '{missing}' does not exist (allowed: a "
        "cluster file, a RecipeResult, REV:path, or REV with a file on the other side) fix: check "
        "the path, or name a git revision (e.g. HEAD~1 or main:gpucluster.yaml)\n"
    )
    bad = write(
        tmp_path / "bad.yaml", {"clusters": [{"name": "lab", "criteria": {"service": "nope"}}]}
    )
    code, out, err = run(tmp_path, bad, a, fmt="text")
    assert code == 2 and out == "" and err.startswith("error[") and "Traceback" not in err


def test_rules_are_data_and_validated(tmp_path):
    rules = upgrade_check.load_rules()
    ids = {r.id for r in rules}
    assert {
        "kubernetes-minor-skip",
        "nodewright-tuning-not-reverted",
        "crd-owner-change",
        "aks-gpustack-flip-recreates-gpu-pools",
        "nvke-dra-0.5.0-to-0.5.1",
    } <= ids
    assert next(r for r in rules if r.id == "nvke-dra-0.5.0-to-0.5.1").file.endswith(
        "gpucluster_nvke/catalog/upgrades.yaml"
    )
    d1, d2 = tmp_path / "one", tmp_path / "two"
    d1.mkdir()
    d2.mkdir()
    rule = {"id": "x", "match": "kubernetesMinor", "verdict": "manual", "why": "w", "source": "s"}
    write(
        d1 / "upgrades.yaml",
        {"kind": "UpgradeRules", "apiVersion": "gpucluster/v1alpha1", "rules": [rule]},
    )
    write(
        d2 / "upgrades.yaml",
        {"kind": "UpgradeRules", "apiVersion": "gpucluster/v1alpha1", "rules": [rule]},
    )
    with pytest.raises(GpuclusterError, match="defined twice"):
        upgrade_check.load_rules([d1, d2])
    write(
        d2 / "upgrades.yaml",
        {
            "kind": "UpgradeRules",
            "apiVersion": "gpucluster/v1alpha1",
            "rules": [{**rule, "id": "y", "verdict": "maybe"}],
        },
    )
    with pytest.raises(GpuclusterError, match="invalid upgrade rules"):
        upgrade_check.load_rules([d2])


@pytest.mark.parametrize(
    "version, spec, ok",
    [
        ("0.5.0", "<0.5.1", True),
        ("0.5.1", "<0.5.1", False),
        ("v26.7.0", ">=26.7.0 <26.7.1", True),
        ("26.7.1", "=26.7.1", True),
        ("0.5.1-rc.1", ">=0.5.1", False),
        ("x", ">=1", False),
        ("1.0.0", "*", True),
    ],
)
def test_version_ranges(version, spec, ok):
    assert upgrade_check.version_in_range(version, spec) is ok


@pytest.mark.parametrize(
    "path, value, rule",
    [
        ("cdi.enabled", "false", "gpu-operator-cdi-rolls-every-gpu-node"),
        ("cdi.enabled", "true", "gpu-operator-cdi-rolls-every-gpu-node"),  # both directions
        ("gdrcopy.enabled", "true", "gpu-operator-gdrcopy-reloads-every-node"),
        ("gdrcopy.enabled", "false", "gpu-operator-gdrcopy-reloads-every-node"),
        ("driver.rdma.enabled", "true", "gpu-operator-rdma-reloads-every-node"),
        ("driver.kernelModuleType", "proprietary", "gpu-operator-kernel-modules-reload-every-node"),
        ("driver.usePrecompiled", "true", "gpu-operator-precompiled-reloads-every-node"),
    ],
)
def test_gpu_operator_settings_that_roll_every_gpu_node_are_not_safe(tmp_path, path, value, rule):
    """A values-only gpu-operator change that re-renders a DaemonSet on every GPU node (the
    ClusterPolicy's cdi / gdrcopy / driver settings the real chart passes on) is manual, exit 3
    (it was 'safe': default-values-safe)."""
    profile = {"gpuStack": "operator-managed"}  # the operator installs the driver
    old = aks_file(
        tmp_path / "a.yaml", profile=profile, overrides={"set": [f"gpuoperator:{path}={value}"]}
    )
    for other in ("true", "false") if value in ("true", "false") else ("open",):
        new = aks_file(
            tmp_path / "b.yaml",
            profile=profile,
            overrides={"set": [f"gpuoperator:{path}={other}"]},
        )
        if other != value:
            break
    code, report, _ = run(tmp_path, old, new)
    ch = change(report, "gpu-operator")
    assert ch["verdict"] == "manual" and rule in rules_of(ch), ch
    assert "default-values-safe" not in rules_of(ch)
    assert code == 3


def test_the_rolling_gpu_operator_paths_are_read_by_the_real_chart(reference_charts):
    """Every valueChange rule of gpu-operator names a values path the real chart's ClusterPolicy
    template reads (a rule on a path the chart ignores would warn about nothing)."""
    template = (reference_charts / "gpu-operator" / "templates" / "clusterpolicy.yaml").read_text(
        encoding="utf-8"
    )
    rules = [
        r
        for r in upgrade_check.load_rules()
        if r.match == "valueChange" and r.component == "gpu-operator"
    ]
    assert len(rules) >= 6
    for r in rules:
        assert (
            f".Values.{r.path}" in template or f".Values.{r.path.rsplit('.', 1)[0]}" in template
        ), r.id


# --------------------------------------------------------------------------- changes that replace or orphan

SYSTEM = {"name": "system", "vmSize": "Standard_D8ds_v5", "nodeCount": 2}
GPU = {"name": "gpu", "vmSize": "Standard_ND96isr_H100_v5", "nodeCount": 1}


@pytest.mark.parametrize(
    "old_extra, new_extra, rule, detail",
    [
        (
            {},
            {"region": "westus3"},
            "aks-region-replaces-cluster",
            "region eastus -> westus3",
        ),
        (
            {"pools": [SYSTEM, GPU]},
            {"pools": [dict(SYSTEM, vmSize="Standard_D16ds_v5"), GPU]},
            "aks-system-pool-rotated",
            "pool system: vmSize Standard_D8ds_v5 -> Standard_D16ds_v5",
        ),
        (
            {},
            {
                "backend": {
                    "type": "azurerm",
                    "storageAccountName": "st01",
                    "containerName": "tfstate",
                }
            },
            "backend-change-moves-state",
            "backend local -> azurerm (storageAccountName=st01, containerName=tfstate)",
        ),
        (
            {"pools": [SYSTEM, dict(SYSTEM, name="cpu"), GPU]},
            {"pools": [SYSTEM, GPU]},
            "aks-cpu-pool-added-or-removed",
            "CPU pool cpu removed",
        ),
        (
            {"pools": [SYSTEM, GPU]},
            {"pools": [SYSTEM, dict(SYSTEM, name="cpu"), GPU]},
            "aks-cpu-pool-added-or-removed",
            "CPU pool cpu added (2 x Standard_D8ds_v5)",
        ),
        (
            {"pools": [SYSTEM, GPU]},
            {"pools": [SYSTEM, GPU, dict(GPU, name="gpu2")]},
            "aks-gpu-pool-added",
            "GPU pool gpu2 added (1 x Standard_ND96isr_H100_v5)",
        ),
        (
            {"pools": [SYSTEM, GPU]},
            {"pools": [SYSTEM, dict(GPU, nodeCount=4)]},
            "aks-gpu-pool-resized",
            "GPU pool gpu: nodeCount 1 -> 4",
        ),
        (
            {"pools": [SYSTEM, dict(GPU, nodeCount=4)]},
            {"pools": [SYSTEM, GPU]},
            "aks-gpu-pool-resized",
            "GPU pool gpu: nodeCount 4 -> 1",
        ),
    ],
)
def test_a_change_that_replaces_or_orphans_is_never_safe(
    tmp_path, old_extra, new_extra, rule, detail
):
    """Region (the resource group's and the cluster's location: ForceNew), the system pool's VM
    size (rotated through temporary_name_for_rotation), the backend (state moves), a GPU pool
    added or resized (capacity, or nodes removed with their jobs): each is named with its rule,
    manual, exit 3 (each was 'no change', exit 0)."""
    old = aks_file(tmp_path / "a.yaml", **old_extra)
    new = aks_file(tmp_path / "b.yaml", **new_extra)
    code, report, _ = run(tmp_path, old, new)
    ch = change(report, "cluster")
    assert detail in ch["details"], ch
    assert rule in rules_of(ch) and ch["verdict"] == "manual" and code == 3, ch


def test_the_default_region_written_out_is_no_change(tmp_path):
    """Region is compared as the platform resolves it: omitted (AKS default eastus) and
    ``region: eastus`` are the same cluster."""
    code, report, _ = run(
        tmp_path, aks_file(tmp_path / "a.yaml"), aks_file(tmp_path / "b.yaml", region="eastus")
    )
    assert code == 0 and report["clusters"][0]["changes"] == []


def test_a_renamed_cluster_is_a_second_cluster_and_an_orphan(tmp_path):
    """Stack names and state files follow the cluster name: a rename synthesizes new stacks
    (Terraform creates a second cluster) and leaves the old ones unmanaged -- manual, exit 3."""
    old = aks_file(tmp_path / "a.yaml")
    new = write(
        tmp_path / "b.yaml",
        {"clusters": [{"name": "lab2", "criteria": AKS, "kubernetesVersion": "1.34"}]},
    )
    code, report, _ = run(tmp_path, old, new)
    ch = change(report, "cluster")
    assert "name lab -> lab2" in ch["details"]
    assert "cluster-renamed" in rules_of(ch) and code == 3
    code, text, _ = run(tmp_path, old, new, fmt="text")
    assert "manual [cluster-renamed]" in text and text.endswith("verdict: manual (exit 3)\n")


# --------------------------------------------------------------------------- one driver rule table

OPERATOR_MANAGED = {"gpuStack": "operator-managed"}


@pytest.mark.parametrize(
    "path, before, after",
    [
        ("driver.repository", "nvcr.io/nvidia", "registry.example.com/nvidia"),
        ("driver.image", "driver", "driver-custom"),
        ("driver.imagePullPolicy", "IfNotPresent", "Always"),
        ("driver.manager.version", "v0.8.0", "v0.9.0"),
        ("driver.licensingConfig.nlsEnabled", "true", "false"),
    ],
)
def test_every_driver_path_that_replaces_the_driver_pods_is_manual(tmp_path, path, before, after):
    """Each driver.* value the chart renders into the ClusterPolicy's driver spec replaces the
    driver pods on every GPU node (the live check counts it as a re-install): manual, exit 3,
    from one rule table (it was default-values-safe, exit 0)."""
    from gpucluster.recipes.upgrade_rules import replaces_driver_pods

    assert replaces_driver_pods(path)
    old, new = (
        aks_file(
            tmp_path / f"{label}.yaml",
            profile=OPERATOR_MANAGED,
            overrides={"set": [f"gpuoperator:{path}={value}"]},
        )
        for label, value in (("a", before), ("b", after))
    )
    code, report, _ = run(tmp_path, old, new)
    ch = change(report, "gpu-operator")
    assert ch["verdict"] == "manual" and code == 3, ch
    assert "gpu-operator-driver-pods-replaced" in rules_of(ch)
    assert "default-values-safe" not in rules_of(ch)


def test_the_upgrade_policy_alone_replaces_no_driver_pod(tmp_path):
    old, new = (
        aks_file(
            tmp_path / f"{label}.yaml",
            profile=OPERATOR_MANAGED,
            driverUpgradePolicy={"maxParallelUpgrades": n},
        )
        for label, n in (("a", 1), ("b", 2))
    )
    code, report, _ = run(tmp_path, old, new)
    ch = change(report, "gpu-operator")
    assert ch["verdict"] == "safe" and code == 0, ch


def test_an_operator_version_change_with_its_driver_replaces_the_driver_pods(tmp_path):
    """A chart version change re-renders the driver DaemonSet (new operand images): with the
    operator managing the driver it is manual even when a rule marks the chart step safe."""
    from gpucluster import pipeline
    from gpucluster.inputs import config

    (cluster,) = config.parse_clusters(
        {"clusters": [{"name": "lab", "criteria": AKS, "profile": OPERATOR_MANAGED}]},
        source="x",
        root=tmp_path,
    )
    doc = recipe_result_writer.to_document(pipeline.build_plan(cluster).recipe)
    files = []
    for label, version in (("a", "v26.7.0"), ("b", None)):
        recipe = json.loads(json.dumps(doc))
        for ref in recipe["componentRefs"]:
            if ref["name"] == "gpu-operator" and version:
                ref["version"] = version
        write(tmp_path / f"{label}.recipe.yaml", recipe)
        files.append(
            write(
                tmp_path / f"{label}.yaml",
                {"clusters": [{"name": "lab", "recipe": f"{label}.recipe.yaml"}]},
            )
        )
    code, report, _ = run(tmp_path, *files)
    gpu = change(report, "gpu-operator")
    assert "gpu-operator-26.7.0-to-26.7.1" in rules_of(gpu)
    assert "gpu-operator-driver-pods-replaced" in rules_of(gpu)
    assert gpu["verdict"] == "manual" and code == 3


def test_a_driver_override_under_azure_managed_reports_no_reload(tmp_path):
    """gpuStack azure-managed: the node image owns the driver (driver.enabled false), so a
    driver.version override does nothing. plan warns DRIVER-OVERRIDE-UNUSED; upgrade-check names
    no reload (it claimed 'the operator rebuilds and reloads the GPU driver on every GPU node')."""
    old = aks_file(tmp_path / "a.yaml")
    new = aks_file(
        tmp_path / "b.yaml", overrides={"set": ["gpuoperator:driver.version=580.105.08"]}
    )
    code, report, _ = run(tmp_path, old, new)
    ch = change(report, "gpu-operator")
    assert "gpu-driver-change-reloads-every-node" not in rules_of(ch), ch
    assert "default-driver-not-managed" in rules_of(ch)
    assert not any("reloads" in r["why"] for r in ch["reasons"])
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["plan", "--config", new], stdout=out, stderr=err) == 0
    (line,) = [
        x for x in (out.getvalue() + err.getvalue()).splitlines() if "DRIVER-OVERRIDE-UNUSED" in x
    ]
    assert line.startswith("warning[DRIVER-OVERRIDE-UNUSED]") and "operator-managed" in line, line
    assert "key=clusters[0].overrides.set[0]" in line, line


@pytest.mark.parametrize("value", ["0", "-1", "150%", "lots"])
def test_a_driver_upgrade_policy_set_through_overrides_is_checked(tmp_path, value):
    """driver.upgradePolicy.maxUnavailable through --set / overrides gets the checks of the
    driverUpgradePolicy key: plan refuses it (one error line naming the override), and
    upgrade-check reports NEW refused by policy (manual)."""
    new = aks_file(
        tmp_path / "b.yaml",
        profile=OPERATOR_MANAGED,
        overrides={"set": [f"gpuoperator:driver.upgradePolicy.maxUnavailable={value}"]},
    )
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["plan", "--config", new], stdout=out, stderr=err) == 2
    lines = [x for x in err.getvalue().splitlines() if x.startswith("error[")]
    assert len(lines) == 1 and "DRIVER-UPGRADE-POLICY" in lines[0], err.getvalue()
    assert f"file={new} " in lines[0] and "key=driver.upgradePolicy.maxUnavailable:" in lines[0]
    assert "allowed: an integer 1 to" in lines[0]
    old = aks_file(tmp_path / "a.yaml", profile=OPERATOR_MANAGED)
    code, report, _ = run(tmp_path, old, new)
    assert change(report, "policy")["verdict"] == "manual" and code == 3


def test_the_driver_paths_of_the_rule_table_are_read_by_the_real_chart(reference_charts):
    """The driver values the rule table counts as replacing the driver pods are rendered into
    the ClusterPolicy by the real chart's template."""
    template = (reference_charts / "gpu-operator" / "templates" / "clusterpolicy.yaml").read_text(
        encoding="utf-8"
    )
    for path in (
        "driver.repository",
        "driver.image",
        "driver.imagePullPolicy",
        "driver.manager.version",
        "driver.licensingConfig",
        "gdrcopy",
        "cdi.enabled",
    ):
        assert f".Values.{path}" in template, path


def test_git_inputs_that_name_nothing_are_one_error_line(tmp_path, monkeypatch):
    """A path missing at the revision, and a revision outside any git work tree: one error line
    each, git's own last line of stderr quoted, exit 2, nothing on stdout."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    aks_file(repo / "gpucluster.yaml")
    git("add", "gpucluster.yaml")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "one")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.chdir(repo)
    code, out, err = run(tmp_path, "HEAD:other.yaml", "gpucluster.yaml", fmt="text")
    assert (code, out) == (2, "")
    assert err == (
        "error[input] key=--from/--to: 'other.yaml' does not exist at git revision 'HEAD' "
        "fix: check the revision and the path (git show REV:path)\n"
    )
    plain = tmp_path / "plain"
    plain.mkdir()
    aks_file(plain / "gpucluster.yaml")
    monkeypatch.chdir(plain)
    code, out, err = run(tmp_path, "HEAD", "gpucluster.yaml", fmt="text")
    assert (code, out) == (2, "")
    assert err.startswith(
        "error[input] key=--from/--to: git rev-parse --show-toplevel failed for 'HEAD': fatal: "
        "not a git repository"
    ), err
    assert (
        err.endswith(" fix: give an existing file, or REV / REV:path of a file tracked in git\n")
        and err.count("\n") == 1
    ), err


def test_text_output_of_a_version_change(tmp_path):
    """The text report of a chart version change: the versions on the change's line, the CRD step
    and the unknown verdict's reason and what to do."""
    from gpucluster import pipeline
    from gpucluster.inputs import config

    doc = recipe_result_writer.to_document(pipeline.build_plan(config.load_clusters()[0]).recipe)
    new = write(tmp_path / "new.yaml", doc)
    for ref in doc["componentRefs"]:
        if ref["name"] == "nfd":
            ref["version"] = "0.18.3"
    old = write(tmp_path / "old.yaml", doc)
    code, text, err = run(tmp_path, old, new, fmt="text")
    _, report, _ = run(tmp_path, old, new)
    nfd = change(report, "nfd")
    lines = text.splitlines()
    assert (code, err) == (4, "") and lines[0] == f"upgrade-check {old} -> {new}"
    at = lines.index("  nfd: version 0.18.3 -> 0.19.0  [unknown]")
    assert lines[at + 1] == f"    CRDs owned: {', '.join(nfd['crds']['owned'])}"
    assert lines[at + 2] == f"    CRD upgrade: {nfd['crds']['step']}"
    assert lines[at + 3] == (
        "    unknown [default-version-unknown]: no transition record covers nfd 0.18.3 -> 0.19.0"
    )
    assert lines[at + 4] == f"      do: {upgrade_check.UNKNOWN_VERSION_ACTION}"
    assert lines[-1] == "verdict: unknown (exit 4)"


def test_clusters_added_and_removed(tmp_path):
    """Several clusters are matched by name: one only in NEW is a new cluster (manual: its GPU
    pools are provisioned and billed, as an added GPU pool is; docs/upgrading.md: `safe` never
    comes with an added cluster), one only in OLD leaves the file (manual, destroy its stacks
    first); one on each side is compared whatever its name."""

    def cluster(name: str) -> dict:  # no shared objects: yaml.safe_dump would write aliases
        return {"name": name, "criteria": dict(AKS), "kubernetesVersion": "1.34"}

    lab = cluster("lab")
    old = write(tmp_path / "old.yaml", {"clusters": [cluster("lab"), cluster("gone")]})
    new = write(tmp_path / "new.yaml", {"clusters": [cluster("lab"), cluster("fresh")]})
    code, report, err = run(tmp_path, old, new)
    assert (code, err) == (3, "")
    assert [(c["cluster"], c["verdict"]) for c in report["clusters"]] == [
        ("fresh", "manual"),
        ("gone", "manual"),
        ("lab", "safe"),
    ]
    assert {c["service"] for c in report["clusters"]} == {"aks"}
    added, removed = change(report, "cluster", "fresh"), change(report, "cluster", "gone")
    assert (added["change"], removed["change"]) == ("added", "removed")
    [reason] = added["reasons"]
    assert (reason["rule"], reason["verdict"]) == ("default-cluster-added", "manual")
    assert reason["why"].startswith("a new cluster: its cluster stack creates it with its pools")
    assert "gpu x1 Standard_ND96isr_H100_v5" in reason["why"], reason["why"]
    assert "quota" in reason["action"]
    [reason] = removed["reasons"]
    assert (reason["rule"], reason["verdict"]) == ("default-cluster-removed", "manual")
    assert reason["why"] == "the cluster leaves the file: its stacks are no longer synthesized"
    assert reason["action"].startswith("run terraform destroy on its runtime stack")
    renamed = write(tmp_path / "renamed.yaml", {"clusters": [cluster("lab2")]})
    one = write(tmp_path / "one.yaml", {"clusters": [lab]})
    code, report, _ = run(tmp_path, one, renamed)
    assert [c["cluster"] for c in report["clusters"]] == ["lab2"]
    assert code == 3 and "cluster-renamed" in rules_of(change(report, "cluster"))


def test_enabling_the_dra_driver_adds_it_and_takes_its_crds_over(tmp_path):
    """The reverse of the owner change above: the DRA driver is added (safe by itself) and takes
    the ComputeDomain CRDs over from gpu-operator (manual); gpu-operator's change lists them as
    removed from what it owns."""
    old = aks_file(tmp_path / "a.yaml", overrides={"set": ["dradriver:enabled=false"]})
    code, report, err = run(tmp_path, old, aks_file(tmp_path / "b.yaml"))
    assert (code, err) == (3, "")
    crds = ["computedomaincliques.resource.nvidia.com", "computedomains.resource.nvidia.com"]
    moves = [{"crd": c, "from": "gpu-operator", "to": "nvidia-dra-driver-gpu"} for c in crds]
    dra = change(report, "nvidia-dra-driver-gpu")
    assert (dra["change"], dra["from"], dra["verdict"]) == ("added", "", "manual")
    assert dra["crds"] == {"owned": crds, "added": crds, "removed": [], "ownerChanges": moves}
    assert [(r["rule"], r["verdict"]) for r in dra["reasons"]] == [
        ("default-added", "safe"),
        ("crd-owner-change", "manual"),
    ]
    assert dra["reasons"][0]["why"] == (
        "nvidia-dra-driver-gpu is installed (its CRDs are created first)"
    )
    assert dra["reasons"][1]["why"].endswith(
        f"({crds[0]}: gpu-operator -> nvidia-dra-driver-gpu, "
        f"{crds[1]}: gpu-operator -> nvidia-dra-driver-gpu)"
    )
    _, back, _ = run(tmp_path, aks_file(tmp_path / "b.yaml"), old)
    assert dra["to"] == change(back, "nvidia-dra-driver-gpu")["from"] != ""
    code, text, _ = run(tmp_path, old, aks_file(tmp_path / "b.yaml"), fmt="text")
    assert f"    CRDs added: {', '.join(crds)}" in text.splitlines()
    assert f"    CRDs removed: {', '.join(crds)}" in text.splitlines()
    gpu = change(report, "gpu-operator")
    assert (gpu["change"], gpu["values"], gpu["verdict"]) == ("values", [], "safe")
    assert gpu["crds"]["removed"] == crds and gpu["crds"]["ownerChanges"] == moves

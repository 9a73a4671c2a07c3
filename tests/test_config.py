"""Cluster file loading: sources, the embedded default, and every error path."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.errors import GpuclusterError
from gpucluster.inputs import config
from gpucluster.model import Criteria

DATA = Path(__file__).parent / "data" / "recipes"

GOOD = """\
clusters:
  - name: train-a
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training, platform: kubeflow}
    profile: {gpuStack: operator-managed}
    region: westus3
    kubernetesVersion: "1.35"
    pools:
      - {name: sys, vmSize: Standard_D8s_v5, nodeCount: 3, gpu: false, labels: {tier: system}}
      - name: gpu
        vmSize: Standard_ND96isr_H100_v5
        nodeCount: 2
        taints: ["nvidia.com/gpu=present:NoSchedule", "dedicated:NoExecute"]
        gpuDriver: None
    settings: {note: kept}
  - name: infer-b
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: inference}
    existing: {kubeconfig: ~/kube.yaml, context: prod}
"""


def write(tmp_path: Path, text: str, name: str = "gpucluster.yaml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def load_error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(GpuclusterError) as exc:
        config.load_clusters(path, env={})
    rendered = exc.value.render()
    assert f"file={path}" in rendered
    return rendered


def test_full_file(tmp_path):
    path = write(tmp_path, GOOD)
    a, b = config.load_clusters(path, env={})
    assert a.name == "train-a" and a.source == path
    assert a.criteria == Criteria("aks", "h100", "ubuntu", "training", "kubeflow")
    assert a.profile == {"gpuStack": "operator-managed"}
    assert (a.region, a.kubernetes_version) == ("westus3", "1.35")
    assert [(p.name, p.vm_size, p.node_count, p.gpu) for p in a.pools] == [
        ("sys", "Standard_D8s_v5", 3, False),
        ("gpu", "Standard_ND96isr_H100_v5", 2, True),
    ]
    assert a.pools[0].labels == {"tier": "system"}
    assert [str(t) for t in a.pools[1].taints] == [
        "nvidia.com/gpu=present:NoSchedule",
        "dedicated=:NoExecute",
    ]
    assert a.pools[1].gpu_driver == "None"
    assert a.settings == {"note": "kept"}
    assert b.criteria.platform == "any" and b.pools == []
    assert (b.existing.kubeconfig_path, b.existing.context) == ("~/kube.yaml", "prod")
    assert b.kubernetes_version == "1.34"


def test_embedded_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (cluster,) = config.load_clusters(env={})
    assert cluster.name == "gpu-training" and cluster.source == "<embedded default>"
    assert cluster.criteria == Criteria("aks", "h100", "ubuntu", "training", "any")
    assert cluster.profile == {"gpuStack": "azure-managed"} and cluster.kubernetes_version == "1.34"
    assert cluster.pools == [] and cluster.recipe_file is None


def test_working_folder_file_then_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, GOOD)
    assert [c.name for c in config.load_clusters(env={})] == ["train-a", "infer-b"]
    other = write(tmp_path, GOOD.replace("train-a", "from-env"), "other.yaml")
    assert config.load_clusters(env={"GPUCLUSTER_CONFIG": other})[0].name == "from-env"
    assert (
        config.load_clusters("gpucluster.yaml", env={"GPUCLUSTER_CONFIG": other})[0].name
        == "train-a"
    )


def test_env_pointing_to_missing_file(tmp_path):
    with pytest.raises(
        GpuclusterError, match="GPUCLUSTER_CONFIG names a cluster file that does not exist"
    ):
        config.load_clusters(env={"GPUCLUSTER_CONFIG": str(tmp_path / "nope.yaml")})


def test_recipe_file_reference(tmp_path):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.yaml").write_text(
        (DATA / "aicr-h100-aks-ubuntu-training.yaml").read_text()
    )
    path = write(tmp_path, "clusters:\n  - name: from-recipe\n    recipe: recipes/r.yaml\n")
    (c,) = config.load_clusters(path, env={})
    assert c.recipe_file == str((tmp_path / "recipes" / "r.yaml").resolve())
    assert c.criteria == Criteria("aks", "h100", "ubuntu", "training", "any")


def test_overrides_and_scheduling_are_delegated(tmp_path, monkeypatch):
    seen = {}

    def fake_overrides(raw, *, file, cluster, root=None, base="overrides"):
        seen["overrides"] = (raw, file, cluster, root, base)
        return []

    def fake_scheduling(raw, *, file, cluster, base="scheduling"):
        seen["scheduling"] = (raw, file, cluster, base)
        from gpucluster.model import NodeScheduling

        return NodeScheduling()

    monkeypatch.setattr("gpucluster.inputs.config.parse_overrides", fake_overrides)
    monkeypatch.setattr("gpucluster.inputs.config.parse_scheduling", fake_scheduling)
    path = write(
        tmp_path,
        "clusters:\n  - name: c1\n    criteria: {service: aks}\n    overrides: {set: [x]}\n    scheduling: {accelerated: {}}\n",
    )
    config.load_clusters(path, env={})
    assert seen["overrides"] == (
        {"set": ["x"]},
        path,
        "c1",
        tmp_path.resolve(),
        "clusters[0].overrides",
    )
    assert seen["scheduling"] == ({"accelerated": {}}, path, "c1", "clusters[0].scheduling")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("clusters: [\n", "invalid YAML: line"),
        ("- a\n- b\n", "the file must be a mapping, not a list"),
        ("", "the cluster file is empty"),
        (
            "cluster: []\n",
            "unknown key 'cluster' (allowed: clusters, backend, charts, images, fleet)",
        ),
        ("{}\n", "missing key 'clusters'"),
        ("clusters: {}\n", "'clusters' must be a non-empty list, not a mapping"),
        ("clusters: []\n", "'clusters' must be a non-empty list, not an empty list"),
        ("clusters: [3]\n", "'clusters[0]' must be a mapping, not an integer"),
        ("clusters:\n  - criteria: {service: aks}\n", "key=clusters[0].name: missing key 'name'"),
        (
            "clusters:\n  - name: Bad_Name\n    criteria: {service: aks}\n",
            "invalid cluster name 'Bad_Name'",
        ),
        (
            "clusters:\n  - name: " + "a" * 41 + "\n    criteria: {service: aks}\n",
            "at most 40 characters",
        ),
        (
            "clusters:\n  - name: 7\n    criteria: {service: aks}\n",
            "'clusters[0].name' must be a non-empty string, not an integer",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    nodepools: []\n",
            "key=clusters[0].nodepools: unknown key 'nodepools' (allowed: name, criteria, recipe, versionSkew, profile, region, kubernetesVersion, pools, existing, overrides, scheduling, settings, driverUpgradePolicy, schedulerProfiles, backend, charts, images, fleet)",
        ),
        ("clusters:\n  - name: c\n", "missing key 'criteria' (or 'recipe')"),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    recipe: r.yaml\n",
            "give either 'criteria' or 'recipe', not both",
        ),
        (
            "clusters:\n  - name: c\n    criteria: aks\n",
            "'clusters[0].criteria' must be a mapping, not a string",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks, gpu: h100}\n",
            "unknown key 'gpu' (allowed: service, accelerator, os, intent, platform)",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {accelerator: h100}\n",
            "key=clusters[0].criteria.service: missing key 'service'",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks, intent: [training]}\n",
            "'clusters[0].criteria.intent' must be a non-empty string, not a list",
        ),
        ("clusters:\n  - name: c\n    criteria: {service: AKS}\n", "invalid service 'AKS'"),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    profile: [gpuStack]\n",
            "'clusters[0].profile' must be a mapping",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    profile: {gpuStack: 'a b'}\n",
            "invalid profile value 'a b'",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    region: East US\n",
            "invalid region 'East US'",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    kubernetesVersion: 1.30\n",
            "kubernetesVersion 1.3 is a number; YAML reads 1.30 as 1.3",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    kubernetesVersion: v1.34.2\n",
            "kubernetesVersion 'v1.34.2' is not MAJOR.MINOR",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    existing: {path: x}\n",
            "unknown key 'path' (allowed: kubeconfig, context)",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    existing: {}\n    pools: [{name: a, vmSize: x}]\n",
            "'pools' cannot be combined with 'existing'",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    pools: {}\n",
            "'clusters[0].pools' must be a non-empty list, not a mapping",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    pools: [{name: a}]\n",
            "key=clusters[0].pools[0].vmSize: missing key 'vmSize'",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    pools: [{name: a, vmSize: x, nodeCount: '2'}]\n",
            "nodeCount' must be an integer, not a string",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    pools: [{name: a, vmSize: x, gpu: 'yes'}]\n",
            "gpu' must be true or false, not a string",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    pools: [{name: a, vmSize: x, taints: ['gpu']}]\n",
            "invalid taint 'gpu'",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    pools: [{name: a, vmSize: x, labels: {a: 1}}]\n",
            "label value 1 is a int; label values are strings (quote it)",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    pools: [{name: a, vmSize: x, size: 3}]\n",
            "unknown key 'size'",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    settings: [1]\n",
            "'clusters[0].settings' must be a mapping",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n  - name: c\n    criteria: {service: aks}\n",
            "cluster name 'c' is used twice (clusters[0] and clusters[1])",
        ),
        (
            "clusters:\n  - name: c\n    name: d\n    criteria: {service: aks}\n",
            "duplicate key 'name'",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    recipe: missing.yaml\n",
            "give either",
        ),
    ],
)
def test_errors(tmp_path, text, expected):
    assert expected in load_error(tmp_path, text)


def test_non_utf8(tmp_path):
    p = tmp_path / "g.yaml"
    p.write_bytes(b"clusters:\n  - name: caf\xe9\n")
    with pytest.raises(GpuclusterError, match="is not UTF-8 text"):
        config.load_clusters(str(p), env={})


def test_recipe_missing(tmp_path):
    rendered = load_error(tmp_path, "clusters:\n  - name: c\n    recipe: missing.yaml\n")
    assert "cluster=c key=clusters[0].recipe: recipe file 'missing.yaml' does not exist" in rendered


def test_recipe_outside_project(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "outside.yaml").write_text(
        (
            Path(__file__).parent
            / "data"
            / "aicr"
            / "v0.11.1"
            / "h100-aks-ubuntu-training.recipe.yaml"
        ).read_text()
    )
    path = write(tmp_path / "proj", "clusters:\n  - name: c\n    recipe: ../outside.yaml\n")
    with pytest.raises(GpuclusterError) as exc:
        config.load_clusters(path, env={})
    assert "recipe file '../outside.yaml' is outside the project folder" in exc.value.render()


def test_recipe_of_wrong_kind(tmp_path):
    (tmp_path / "r.yaml").write_text("kind: Snapshot\napiVersion: aicr.run/v1beta2\n")
    path = write(tmp_path, "clusters:\n  - name: c\n    recipe: r.yaml\n")
    with pytest.raises(GpuclusterError) as exc:
        config.load_clusters(path, env={})
    assert (
        "file=r.yaml cluster=c key=kind: kind is 'Snapshot', not RecipeResult" in exc.value.render()
    )


@pytest.mark.parametrize(
    "text, fix",
    [
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    regoin: westus3\n",
            "did you mean 'region'?",
        ),
        (
            "clusters:\n  - name: c\n    criteria: {service: aks}\n    pools: [{name: a, vmSize: x, nodCount: 2}]\n",
            "did you mean 'nodeCount'?",
        ),
        ("clsters: []\n", "did you mean 'clusters'?"),
    ],
)
def test_unknown_key_fix_names_the_closest(tmp_path, text, fix):
    path = tmp_path / "gpucluster.yaml"
    path.write_text(text)
    with pytest.raises(GpuclusterError) as exc:
        config.load_clusters(str(path), env={})
    (problem,) = exc.value.problems
    assert problem.fix.startswith(fix) and "docs/cluster-file.md" in problem.fix


def test_unknown_key_without_a_near_miss_has_the_plain_fix(tmp_path):
    path = tmp_path / "gpucluster.yaml"
    path.write_text("clusters:\n  - name: c\n    criteria: {service: aks}\n    zzzzzz: 1\n")
    with pytest.raises(GpuclusterError) as exc:
        config.load_clusters(str(path), env={})
    assert exc.value.problems[0].fix == "remove or rename the key (see docs/cluster-file.md)"


def test_a_missing_gpucluster_config_file_names_the_variable(tmp_path, monkeypatch):
    """A stale GPUCLUSTER_CONFIG in the shell made `gpucluster plan` say only 'file not found';
    the line names the variable, and how to fall back to ./gpucluster.yaml."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpucluster.yaml").write_text(
        "clusters:\n  - name: c\n    criteria: {service: aks}\n"
    )
    with pytest.raises(GpuclusterError) as exc:
        config.load_clusters(env={"GPUCLUSTER_CONFIG": str(tmp_path / "old.yaml")})
    (problem,) = exc.value.problems
    assert problem.key == "GPUCLUSTER_CONFIG" and problem.file == str(tmp_path / "old.yaml")
    assert "unset GPUCLUSTER_CONFIG" in problem.fix
    with pytest.raises(GpuclusterError) as exc:  # --config: no variable to blame
        config.load_clusters(str(tmp_path / "old.yaml"), env={})
    assert exc.value.problems[0].key in (None, "")

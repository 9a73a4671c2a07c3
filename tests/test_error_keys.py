"""Every error key that names a place in the cluster file is absolute (docs/cluster-file.md, Errors).

Plugins raise and return keys relative to the cluster document (``pools[1].gpu``); the core makes
them absolute in one place (:func:`gpucluster.model.absolute_key`) where it receives a plugin's
error or finding, and its own post-parse checks use the same function. A table of cluster files
whose SECOND cluster holds one mistake (so ``clusters[1].`` cannot be a default) runs through
``gpucluster plan`` and ``python main.py`` (the cdktf app): both print the same line, with the
absolute key. Errors found only while the stacks are built (synth) are checked through main.py.
"""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest
from _support import AKS_TRAINING_RECIPE, run_main

from gpucluster import cli, yamlsafe
from gpucluster.errors import Problem
from gpucluster.model import (
    CLUSTER_KEYS,
    ClusterSpec,
    Criteria,
    Finding,
    absolute_key,
    absolute_keys,
)
from gpucluster.recipes.catalog import catalog_dirs

AKS = "{service: aks, accelerator: h100, os: ubuntu, intent: training}"
NVKE = "{service: nvke, accelerator: gb200, os: ubuntu, intent: training}"
OKE = "{service: oke, accelerator: gb200, os: ubuntu, intent: training}"
FIRST = f"  - name: c00\n    criteria: {AKS}\n"


def second(criteria: str, body: str = "") -> str:
    return f"clusters:\n{FIRST}  - name: c01\n    criteria: {criteria}\n    kubernetesVersion: '1.34'\n{body}"


RAIL = "      rails: [{name: mlx5_0, rootDevice: '0000:03:00.0'}]\n"

# name -> (cluster file, error id, component or None, key printed)
CASES = {
    # raised by a platform plugin (gpucluster_prepare_cluster), relative there
    "plugin-aks-pool-gpu": (
        second(
            AKS,
            "    pools:\n      - {name: system, vmSize: Standard_D8ds_v5, nodeCount: 2}\n"
            "      - {name: gpu, vmSize: Standard_D4s_v5, nodeCount: 1, gpu: true}\n",
        ),
        "input",
        None,
        "clusters[1].pools[1].gpu",
    ),
    "plugin-aks-setting": (
        second(AKS, "    settings: {maxPods: 5}\n"),
        "input",
        None,
        "clusters[1].settings.maxPods",
    ),
    "plugin-oke-pools": (
        second(OKE, "    pools: [{name: gpu, vmSize: BM.GPU.GB200.4, nodeCount: 2}]\n"),
        "input",
        None,
        "clusters[1].pools",
    ),
    "plugin-nvke-rail": (
        second(NVKE, "    settings:\n      rails: [{name: mlx5_0}]\n"),
        "input.nvke-settings",
        None,
        "clusters[1].settings.rails[0].rootDevice",
    ),
    # returned by a platform plugin as a Finding (gpucluster_policy_checks), with and without component
    "plugin-finding-aks": (
        second(AKS).replace("'1.34'", "'1.31'"),
        "AKS-K8S-VERSION",
        "-",
        "clusters[1].kubernetesVersion",
    ),
    "plugin-finding-nvke": (
        second(NVKE, "    settings:\n" + RAIL + "      numVfs: 9\n      firmwareNumVfs: 8\n"),
        "NVKE-SRIOV-NUMVFS",
        "sriov-ib-networks",
        "clusters[1].settings.numVfs",
    ),
    # the core's post-parse checks
    "core-unknown-setting": (
        second(AKS, "    settings: {bogus: 1}\n"),
        "input",
        None,
        "clusters[1].settings.bogus",
    ),
    "core-profile-value": (
        second(AKS, "    profile: {gpuStack: managed}\n"),
        "input",
        None,
        "clusters[1].profile.gpuStack",
    ),
    "core-criteria": (
        second("{service: aks, accelerator: a100, os: ubuntu, intent: training}"),
        "input",
        None,
        "clusters[1].criteria.accelerator",
    ),
    "core-unknown-service": (
        second("{service: gke}"),
        "input",
        None,
        "clusters[1].criteria.service",
    ),
    "core-gate-image": (
        second(AKS, "    settings: {gateImage: 'registry.k8s.io/kubectl:latest'}\n"),
        "input",
        None,
        "clusters[1].settings.gateImage",
    ),
    # absolute already when the file is read: not prefixed twice
    "parse-pool-count": (
        second(AKS, "    pools: [{name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: two}]\n"),
        "input",
        None,
        "clusters[1].pools[0].nodeCount",
    ),
    "override-component": (
        second(AKS, "    overrides: {set: ['nosuch:a=b']}\n"),
        "input",
        None,
        "clusters[1].overrides.set[0]",
    ),
    "scheduling-key": (
        second(AKS, "    scheduling: {gpuTolerations: [x]}\n"),
        "input",
        None,
        "clusters[1].scheduling.gpuTolerations",
    ),
    "fleet-group": (
        second(AKS)
        .replace(
            "clusters:\n",
            "fleet: {name: f, location: eastus, groups: [{name: a}, {name: b}]}\nclusters:\n",
            1,
        )
        .replace("name: c00\n", "name: c00\n    fleet: {group: a}\n")
        + "    fleet: {group: a}\n",
        "fleet",
        None,
        "fleet.groups",
    ),
    # not a place in the cluster file: a component's values path stays as it is
    "values-path": (
        second(AKS, "    overrides: {set: ['gpuoperator:driver.enabled=true']}\n"),
        "PROFILE-OWNED",
        "gpu-operator",
        "driver.enabled",
    ),
}

LINE = re.compile(
    r"^error\[(?P<id>[^\]]+)\] file=(?P<file>\S+)(?: cluster=(?P<cluster>\S+))?"
    r"(?: component=(?P<component>\S+))? key=(?P<key>\S+): "
)


def _synth(config: Path, outdir: Path, **extra: str) -> subprocess.CompletedProcess:
    return run_main(cwd=config.parent, outdir=outdir, config=config, **extra)


def _error_line(text: str, error_id: str) -> str:
    lines = [line for line in text.splitlines() if line.startswith(f"error[{error_id}]")]
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize("name", list(CASES))
def test_plan_and_synth_print_the_same_absolute_key(tmp_path, monkeypatch, name):
    document, error_id, component, key = CASES[name]
    config = tmp_path / "gpucluster.yaml"
    config.write_text(document)
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["plan", "--config", str(config)], stdout=out, stderr=err) == 2
    plan_line = _error_line(err.getvalue(), error_id)
    match = LINE.match(plan_line)
    assert match, plan_line
    assert (match["file"], match["component"], match["key"]) == (str(config), component, key), (
        plan_line
    )
    assert match["cluster"] == (None if key.startswith("fleet.") else "c01"), plan_line
    synth = _synth(config, tmp_path / "cdktf.out")
    assert synth.returncode == 2, synth.stderr
    assert _error_line(synth.stderr, error_id) == plan_line
    assert not (tmp_path / "cdktf.out").exists()


STACK_PLUGIN = """
from gpucluster.sdk import GpuclusterError, hookimpl

@hookimpl(tryfirst=True)
def gpucluster_cluster_stack(scope, cluster, recipe):
    if cluster.name == "c01":
        raise GpuclusterError("this pool cannot be built here", file=cluster.source, cluster=cluster.name,
                              key="pools[0].vmSize", fix="use another size")
"""


def test_a_plugin_error_at_synth_gets_the_absolute_key(tmp_path):
    """gpucluster_cluster_stack runs only while the stacks are built: the same core path
    (gpucluster.plugins) makes its relative key absolute."""
    (tmp_path / "keys_stack_plugin.py").write_text(STACK_PLUGIN)
    config = tmp_path / "gpucluster.yaml"
    config.write_text(second(AKS))
    result = _synth(
        config,
        tmp_path / "cdktf.out",
        GPUCLUSTER_PLUGINS="keys_stack_plugin",
        PYTHONPATH=str(tmp_path),
    )
    assert result.returncode == 2, result.stderr
    assert _error_line(result.stderr, "input") == (
        f"error[input] file={config} cluster=c01 key=clusters[1].pools[0].vmSize: this pool cannot be built here "
        "fix: use another size"
    )
    assert not (tmp_path / "cdktf.out").exists()


def test_a_cloud_backend_without_terraform_names_where_the_backend_is_set(tmp_path):
    """The core's synth-time check (gpucluster_cdk/stacks/common.py) names the cluster's own backend key."""
    config = tmp_path / "gpucluster.yaml"
    config.write_text(
        second(
            AKS,
            "    existing: {kubeconfig: /etc/kube/config}\n"
            "    scheduling: {accelerated: {tolerations: ['nvidia.com/gpu:NoSchedule']}}\n"
            "    backend: {type: cloud, organization: org, workspacePrefix: gpu-}\n",
        )
    )
    result = _synth(
        config, tmp_path / "cdktf.out", TERRAFORM_BINARY_NAME="no-such-terraform-binary"
    )
    assert result.returncode == 2, result.stderr
    line = _error_line(result.stderr, "input")
    assert line.startswith(
        f"error[input] file={config} cluster=c01 key=clusters[1].backend.type: backend type 'cloud'"
    ), line


# --------------------------------------------------------------------------- the rule itself


def _spec(index: int | None) -> ClusterSpec:
    return ClusterSpec(name="c", criteria=Criteria(service="aks"), source="f.yaml", index=index)


@pytest.mark.parametrize(
    "key, file, expected",
    [
        ("pools[1].gpu", None, "clusters[4].pools[1].gpu"),
        ("settings.rails[0].subnet", "f.yaml", "clusters[4].settings.rails[0].subnet"),
        ("kubernetesVersion", "", "clusters[4].kubernetesVersion"),
        ("clusters[4].pools[1].gpu", None, "clusters[4].pools[1].gpu"),  # never twice
        ("driver.enabled", None, "driver.enabled"),  # a values path
        (
            "componentRefs[3].version",
            "recipe.yaml",
            "componentRefs[3].version",
        ),  # another file's key
        ("criteria.service", "recipe.yaml", "criteria.service"),  # a RecipeResult's own criteria
        ("NODE_OPTIONS", None, "NODE_OPTIONS"),
        ("--set[0]", "--set", "--set[0]"),
        ("gates.x.name", "f.yaml", "gates.x.name"),  # a plugin's GateSpec field, not in the file
        (None, None, None),
    ],
)
def test_absolute_key(key, file, expected):
    assert absolute_key(_spec(4), key, file=file) == expected


def test_absolute_key_without_an_index_is_unchanged_and_problems_get_the_file():
    assert absolute_key(_spec(None), "pools[0].name") == "pools[0].name"
    [problem, finding] = absolute_keys(
        _spec(2), [Problem("m", key="pools"), Finding("X", "error", "c", "-", "region", "m", "f")]
    )
    assert (problem.file, problem.key) == ("f.yaml", "clusters[2].pools")
    assert (finding.file, finding.key) == (
        "",
        "clusters[2].region",
    )  # a finding's "" already means the cluster file


def test_no_catalog_component_values_start_with_a_cluster_key():
    """The rule tells a cluster-document key from a values path by its first segment: that is
    only unambiguous while no component's values have a top-level key named like a cluster key."""
    clashes = []
    for folder in catalog_dirs():
        for path in sorted(folder.glob("components/*/values*.yaml")):
            data = yamlsafe.load_yaml_file(path, display=str(path)) or {}
            clashes += [f"{path.relative_to(folder)}: {k}" for k in data if k in CLUSTER_KEYS]
    assert clashes == []
    assert len(list(catalog_dirs()[0].glob("components/*/values*.yaml"))) > 10


def test_an_unknown_service_of_a_recipe_file_names_that_file_and_its_own_key(tmp_path):
    """A cluster given by ``recipe:`` has no ``criteria`` in the cluster file: its service is the
    RecipeResult's ``criteria.service``, so the error names that file and key (as the recipe's
    other criteria errors do), never a ``clusters[1].criteria.service`` the cluster file lacks."""
    out = io.StringIO()
    assert (
        cli.main(
            [
                *AKS_TRAINING_RECIPE,
            ],
            stdout=out,
        )
        == 0
    )
    (tmp_path / "recipe.yaml").write_text(
        out.getvalue().replace("\n  service: aks\n", "\n  service: gke\n", 1)
    )
    config = tmp_path / "gpucluster.yaml"
    config.write_text(f"clusters:\n{FIRST}  - name: c01\n    recipe: recipe.yaml\n")
    err = io.StringIO()
    assert cli.main(["plan", "--config", str(config)], stdout=io.StringIO(), stderr=err) == 2
    line = _error_line(err.getvalue(), "input")
    assert line.startswith(
        f"error[input] file={tmp_path / 'recipe.yaml'} cluster=c01 key=criteria.service: "
        "unknown service 'gke'"
    ), line

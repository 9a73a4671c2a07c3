"""README: every input error prints ``error[<id>] file=… cluster=… …: message (allowed: …) fix: …``.

A table of bad cluster files (one mistake each) runs through load_clusters + build_plans; every
rendered error line must carry a ``fix:``, and errors about one cluster must name it.
"""

from __future__ import annotations

import io
import re

import pytest

from gpucluster.errors import GpuclusterError
from gpucluster.inputs.config import load_clusters
from gpucluster.pipeline import build_plans

NVKE = "clusters:\n  - name: c1\n    criteria: {service: nvke, accelerator: gb200, os: ubuntu, intent: training}\n    existing: {}\n"
OKE = "clusters:\n  - name: c1\n    criteria: {service: oke, accelerator: gb200, os: ubuntu, intent: training}\n"
RECIPE = "clusters:\n  - name: c1\n    recipe: r.yaml\n"
HEAD = "clusters:\n  - name: c1\n    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}\n"

BAD = {
    # YAML and document shape
    "yaml-syntax": "clusters:\n  - name: [c1\n",
    "yaml-tab": "clusters:\n\t- name: c1\n",
    "yaml-duplicate-key": "clusters: []\nclusters: []\n",
    "yaml-alias": "x: &a {}\nclusters: *a\n",
    "empty-file": "",
    "list-document": "- a\n",
    "two-documents": "clusters: []\n---\nclusters: []\n",
    "unknown-top-key": "clusterz: []\n",
    "clusters-not-list": "clusters: 3\n",
    "cluster-not-mapping": "clusters: [c1]\n",
    # cluster keys
    "bad-name": "clusters:\n  - name: Bad_Name\n    criteria: {service: aks}\n",
    "long-name": "clusters:\n  - name: " + "a" * 41 + "\n    criteria: {service: aks}\n",
    "name-not-string": "clusters:\n  - name: 3\n    criteria: {service: aks}\n",
    "missing-name": "clusters:\n  - criteria: {service: aks}\n",
    "unknown-cluster-key": HEAD + "    regoin: eastus\n",
    "duplicate-name": HEAD + "  - name: c1\n    criteria: {service: aks}\n",
    "criteria-and-recipe": HEAD + "    recipe: r.yaml\n",
    "missing-criteria": "clusters:\n  - name: c1\n",
    "criteria-not-mapping": "clusters:\n  - name: c1\n    criteria: aks\n",
    "criteria-unknown-key": "clusters:\n  - name: c1\n    criteria: {service: aks, gpu: h100}\n",
    "criteria-missing-service": "clusters:\n  - name: c1\n    criteria: {accelerator: h100}\n",
    "criteria-bad-value": "clusters:\n  - name: c1\n    criteria: {service: aks, os: Ubuntu}\n",
    "unknown-service": "clusters:\n  - name: c1\n    criteria: {service: eks}\n",
    "unknown-accelerator": "clusters:\n  - name: c1\n    criteria: {service: aks, accelerator: h200}\n",
    "missing-recipe-file": "clusters:\n  - name: c1\n    recipe: nothere.yaml\n",
    "profile-not-mapping": HEAD + "    profile: operator-managed\n",
    "profile-bad-name": HEAD + "    profile: {'a b': x}\n",
    "profile-bad-value": HEAD + "    profile: {gpuStack: 'a b'}\n",
    "profile-unknown-value": HEAD + "    profile: {gpuStack: managed}\n",
    "region-bad": HEAD + "    region: East_US\n",
    "region-not-string": HEAD + "    region: 3\n",
    "k8s-number": HEAD + "    kubernetesVersion: 1.34\n",
    "k8s-bad": HEAD + "    kubernetesVersion: 'v1'\n",
    "k8s-old": HEAD + "    kubernetesVersion: '1.33'\n",
    "existing-not-mapping": HEAD + "    existing: yes\n",
    "existing-unknown-key": HEAD + "    existing: {kubeconf: x}\n",
    "settings-not-mapping": HEAD + "    settings: [1]\n",
    "settings-unknown": HEAD + "    settings: {foo: 1}\n",
    # pools
    "pools-and-existing": HEAD + "    existing: {}\n    pools: [{name: a, vmSize: b}]\n",
    "pools-empty": HEAD + "    pools: []\n",
    "pools-not-list": HEAD + "    pools: {name: a}\n",
    "pool-not-mapping": HEAD + "    pools: [a]\n",
    "pool-unknown-key": HEAD + "    pools: [{name: a, vmSize: b, count: 2}]\n",
    "pool-missing-vmsize": HEAD + "    pools: [{name: a}]\n",
    "pool-nodecount-string": HEAD
    + "    pools: [{name: s, vmSize: x, gpu: false, nodeCount: '2'}, {name: g, vmSize: y}]\n",
    "pool-gpu-string": HEAD + "    pools: [{name: s, vmSize: x, gpu: 'no'}]\n",
    "pool-managed-string": HEAD + "    pools: [{name: s, vmSize: x, managedGpu: 'no'}]\n",
    "pool-labels-not-mapping": HEAD + "    pools: [{name: s, vmSize: x, labels: [a]}]\n",
    "pool-label-bad": HEAD + "    pools: [{name: s, vmSize: x, labels: {'a b': c}}]\n",
    "pool-taints-not-list": HEAD + "    pools: [{name: s, vmSize: x, taints: 'a:NoSchedule'}]\n",
    "pool-taint-bad": HEAD + "    pools: [{name: s, vmSize: x, taints: ['a']}]\n",
    "pool-name-aks": HEAD
    + "    pools: [{name: System_1, vmSize: x, gpu: false}, {name: g, vmSize: y}]\n",
    "pool-all-gpu": HEAD + "    pools: [{name: g, vmSize: y}]\n",
    "pool-count-zero": HEAD
    + "    pools: [{name: s, vmSize: x, gpu: false, nodeCount: 0}, {name: g, vmSize: y}]\n",
    "pool-gpudriver": HEAD
    + "    pools: [{name: s, vmSize: x, gpu: false}, {name: g, vmSize: y, gpuDriver: Managed}]\n",
    # overrides
    "overrides-not-mapping": HEAD + "    overrides: [a]\n",
    "overrides-unknown-key": HEAD + "    overrides: {sett: ['gpuoperator:x=1']}\n",
    "set-not-list": HEAD + "    overrides: {set: 'gpuoperator:x=1'}\n",
    "set-no-equals": HEAD + "    overrides: {set: ['gpuoperator:x']}\n",
    "set-no-colon": HEAD + "    overrides: {set: ['gpuoperator=x']}\n",
    "set-bad-path": HEAD + "    overrides: {set: ['gpuoperator:a..b=1']}\n",
    "set-not-string": HEAD + "    overrides: {set: [3]}\n",
    "set-unknown-component": HEAD + "    overrides: {set: ['gpuoprator:x=1']}\n",
    "set-conflict": HEAD
    + "    overrides: {set: ['gpuoperator:dcgm=off', 'gpuoperator:dcgm.enabled=true']}\n",
    "values-bad-entry": HEAD + "    overrides: {values: [{component: nvsentinel}]}\n",
    "values-missing-file": HEAD
    + "    overrides: {values: [{component: nvsentinel, file: nothere.yaml}]}\n",
    "variables-bad-name": HEAD
    + "    overrides: {variables: {'gpuoperator:driver.version': '1x'}}\n",
    "enable-string": HEAD + "    overrides: {set: ['gpuoperator:enabled=no']}\n",
    # scheduling
    "scheduling-not-mapping": HEAD + "    scheduling: [a]\n",
    "scheduling-unknown": HEAD + "    scheduling: {gpu: {}}\n",
    "scheduling-section-unknown": HEAD + "    scheduling: {system: {selector: {}}}\n",
    "scheduling-tolerations-not-list": HEAD
    + "    scheduling: {accelerated: {tolerations: 'a:NoSchedule'}}\n",
    "scheduling-toleration-bad": HEAD + "    scheduling: {accelerated: {tolerations: ['a']}}\n",
    "scheduling-selector-bool": HEAD + "    scheduling: {system: {nodeSelector: {pool: true}}}\n",
    "scheduling-selector-list": HEAD + "    scheduling: {system: {nodeSelector: [a]}}\n",
    "scheduling-nodecount": HEAD + "    scheduling: {nodeCount: 0}\n",
    "scheduling-gate-taint": HEAD + "    scheduling: {workloadGateTaint: 'x=y'}\n",
    # backend
    "backend-bad-type": HEAD + "    backend: {type: s3}\n",
    "backend-missing-org": HEAD + "    backend: {type: cloud, workspacePrefix: x}\n",
    # platform settings (NVKE, OKE)
    "nvke-settings-cidr": NVKE + "    settings: {podNetwork: 300.1.1.1/16}\n",
    "nvke-settings-rail": NVKE + "    settings: {rails: [{name: mlx5_0, rootDevice: 'zz'}]}\n",
    "nvke-settings-numvfs": NVKE + "    settings: {numVfs: 'x'}\n",
    "nvke-settings-unknown": NVKE + "    settings: {bogus: 1}\n",
    "nvke-pools": NVKE + "    pools: [{name: a, vmSize: b}]\n",
    "oke-relative-kubeconfig": OKE + "    existing: {kubeconfig: rel/x}\n",
    "oke-region": OKE + "    region: x\n",
    "oke-addon": OKE + "    settings: {nvidiaGpuPluginAddon: maybe}\n",
    # RecipeResult files (recipe: r.yaml, contents after the '|')
    "recipe-kind": RECIPE + "|kind: Foo\n",
    "recipe-api": RECIPE + "|kind: RecipeResult\napiVersion: x/v1\n",
    "recipe-unknown-key": RECIPE + "|kind: RecipeResult\napiVersion: aicr.run/v1beta2\nfoo: 1\n",
    "recipe-no-criteria": RECIPE + "|kind: RecipeResult\napiVersion: aicr.run/v1beta2\n",
    "recipe-no-service": RECIPE
    + "|kind: RecipeResult\napiVersion: aicr.run/v1beta2\ncriteria: {accelerator: h100}\n",
    "recipe-no-refs": RECIPE
    + "|kind: RecipeResult\napiVersion: aicr.run/v1beta2\ncriteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}\n",
    "recipe-bad-metadata": RECIPE
    + "|kind: RecipeResult\napiVersion: aicr.run/v1beta2\ncriteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}\nmetadata: [1]\n",
    # policy
    "policy-wildcard": HEAD
    + "    scheduling: {accelerated: {tolerations: [{operator: Exists}]}}\n",
    "policy-profile-owned": HEAD + "    overrides: {set: ['gpuoperator:driver.enabled=true']}\n",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_every_error_line_has_a_fix(name, tmp_path, monkeypatch):
    cluster_file, _, recipe_file = BAD[name].partition("|")
    path = tmp_path / "gpucluster.yaml"
    path.write_text(cluster_file)
    (tmp_path / "r.yaml").write_text(recipe_file or "kind: RecipeResult\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GpuclusterError) as exc:
        build_plans(load_clusters("gpucluster.yaml", env={}))
    lines = exc.value.render().splitlines()
    assert lines
    names_a_cluster = re.search(r"^ +- name: [A-Za-z]", BAD[name], re.M) is not None
    for line in lines:
        assert line.startswith("error[") and " fix: " in line, line
        assert re.match(r"error\[[A-Za-z0-9.-]+\] file=(gpucluster|r)\.yaml[ :]", line), line
        if names_a_cluster:
            assert " cluster=" in line, line


@pytest.mark.parametrize(
    "entry",
    [
        "gpuoperator:x",
        "gpuoperator=x",
        "gpuoperator:a..b=1",
        "gpuoprator:x=1",
        "gpuoperator:enabled=no",
    ],
)
def test_cli_set_errors_have_a_fix_and_name_set(entry, tmp_path, monkeypatch):
    from gpucluster import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    err = io.StringIO()
    assert cli.main(["plan", "--set", entry], stdout=io.StringIO(), stderr=err) == 2
    lines = [
        line for line in err.getvalue().splitlines() if not line.startswith("info[input.default]")
    ]
    assert lines
    for line in lines:
        assert (
            line.startswith("error[")
            and " fix: " in line
            and "file=--set" in line
            and "key=--set[0]" in line
        ), line

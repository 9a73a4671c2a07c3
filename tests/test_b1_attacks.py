"""Regression tests for defects found by an adversarial review (bad input and policy holes).

Each test drives the public entry points (cluster file -> ``load_clusters`` -> ``build_plans``,
RecipeResult files, the CLI) with one hostile input and asserts the exact refusal: exit code 2 /
GpuclusterError naming file, cluster, component and key.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import yaml

from gpucluster import recipe, recipe_result
from gpucluster.catalog import load_catalog
from gpucluster.cli import main as cli_main
from gpucluster.config import load_clusters
from gpucluster.errors import GpuclusterError
from gpucluster.model import Criteria
from gpucluster.pipeline import build_plans

AKS_CRITERIA = "{service: aks, accelerator: h100, os: ubuntu, intent: training}"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def aks_recipe_doc(catalog):
    r = recipe.resolve(Criteria(service="aks", accelerator="h100", os="ubuntu", intent="training"), catalog)
    return recipe_result.to_document(r, recipe.effective_components(r, catalog))


def _ref(doc, name):
    return next(r for r in doc["componentRefs"] if r["name"] == name)


def _write_recipe_cluster(tmp_path: Path, doc) -> Path:
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    cfg = tmp_path / "gpucluster.yaml"
    cfg.write_text("clusters:\n  - name: lab\n    recipe: recipe.yaml\n")
    return cfg


def _problems(cfg: Path):
    with pytest.raises(GpuclusterError) as exc:
        build_plans(load_clusters(str(cfg)))
    return exc.value.problems


# --------------------------------------------------------------------------- RecipeResult files


@pytest.mark.parametrize("value", ["false", "no", 0])
def test_recipe_result_enabled_must_be_boolean(tmp_path, aks_recipe_doc, value):
    """A non-boolean ``overrides.enabled`` used to install the component and pass the string to its chart."""
    doc = copy.deepcopy(aks_recipe_doc)
    _ref(doc, "network-operator").setdefault("overrides", {})["enabled"] = value
    [p] = _problems(_write_recipe_cluster(tmp_path, doc))
    assert p.component == "network-operator"
    assert p.key.endswith(".overrides.enabled") and p.key.startswith("componentRefs[")
    assert p.file.endswith("recipe.yaml") and p.cluster == "lab"
    assert "true or false" in p.allowed


@pytest.mark.parametrize(
    "field,value",
    [
        ("valuesFile", "../../../../../../../../etc/hostname"),
        ("valuesFile", "/etc/hostname"),
        ("manifestFiles", "ESCAPE"),
        ("preManifestFiles", "ABSOLUTE"),
    ],
)
def test_recipe_result_catalog_paths_cannot_escape(tmp_path, aks_recipe_doc, field, value):
    """``..``/absolute catalog references used to fail later with a message naming nothing."""
    outside = tmp_path / "evil.yaml.j2"
    outside.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: evil, namespace: default}\n")
    core = Path(recipe.__file__).parent / "catalog"
    if value == "ESCAPE":
        value = [os.path.relpath(tmp_path / "evil.yaml", core)]
    elif value == "ABSOLUTE":
        value = [str(tmp_path / "evil.yaml")]
    doc = copy.deepcopy(aks_recipe_doc)
    _ref(doc, "gpu-operator")[field] = value
    [p] = _problems(_write_recipe_cluster(tmp_path, doc))
    assert p.component == "gpu-operator" and p.cluster == "lab" and p.file.endswith("recipe.yaml")
    assert p.key.startswith("componentRefs[") and field in p.key


@pytest.mark.parametrize(
    "field,value",
    [
        ("source", "http://charts.example.com/nvidia"),
        ("source", "file:///etc"),
        ("namespace", "Bad_NS"),
        ("namespace", "a" * 64),
        ("chart", "gpu operator"),
        ("version", "latest; rm -rf /"),
    ],
)
def test_recipe_result_chart_facts_are_validated(tmp_path, aks_recipe_doc, field, value):
    """Chart facts of a RecipeResult get the registry's rules (https/oci, DNS-1123 namespace, ...)."""
    doc = copy.deepcopy(aks_recipe_doc)
    _ref(doc, "gpu-operator")[field] = value
    [p] = _problems(_write_recipe_cluster(tmp_path, doc))
    assert p.component == "gpu-operator" and p.key.endswith(f".{field}")
    assert p.allowed


def test_recipe_result_profile_message_uses_yaml_spelling(tmp_path, aks_recipe_doc):
    doc = copy.deepcopy(aks_recipe_doc)
    doc["metadata"]["selectedProfile"]["value"] = "operator-managed"
    problems = _problems(_write_recipe_cluster(tmp_path, doc))
    assert "driver.enabled=false" in problems[0].message and "owns it as true" in problems[0].message


# --------------------------------------------------------------------------- Terraform variables


def _cluster_file(tmp_path: Path, body: str, criteria: str = AKS_CRITERIA) -> Path:
    cfg = tmp_path / "gpucluster.yaml"
    cfg.write_text(f"clusters:\n  - name: lab\n    criteria: {criteria}\n" + body)
    return cfg


def test_one_terraform_variable_cannot_bind_two_values(tmp_path):
    """The runtime stack declares each variable once (first default wins), so a second binding
    silently fed gpu-operator's driver version into the DRA driver's image tag."""
    cfg = _cluster_file(
        tmp_path,
        "    overrides:\n      variables:\n        'gpuoperator:driver.version': v\n        'dradriver:image.tag': v\n",
    )
    [p] = _problems(cfg)
    assert p.cluster == "lab" and p.file == str(cfg)
    assert p.key == "clusters[0].overrides.variables.gpuoperator:driver.version"
    assert "'v'" in p.message and "nvidia-dra-driver-gpu" in p.message and "image.tag" in p.message


@pytest.mark.parametrize("name", ["kubeconfig_path", "kube_context"])
def test_runtime_stack_variable_names_are_reserved(tmp_path, name):
    cfg = _cluster_file(tmp_path, f"    overrides:\n      variables:\n        'gpuoperator:driver.version': {name}\n")
    with pytest.raises(GpuclusterError) as exc:
        load_clusters(str(cfg))
    [p] = exc.value.problems
    assert p.key == "clusters[0].overrides.variables.gpuoperator:driver.version"
    assert name in p.message and "runtime stack" in p.message

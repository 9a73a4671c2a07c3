"""Real AICR RecipeResults as a user hands them over: synthesized unchanged into stacks that install.

Inputs (tests/data/aicr, copied from ../shared/reference/aicr-outputs; Apache-2.0, see NOTICE):
the ``aicr recipe`` output of AICR v0.11.1 for the H100 AKS Ubuntu training, inference and
inference-dynamo recipes (apiVersion ``aicr.nvidia.com/v1alpha1``) and the training bundle's
``deploy.sh``; and tests/data/recipes/aicr-v1alpha3-h100-aks-ubuntu-inference.yaml, an
``aicr.run/v1alpha3`` file in the format AICR documents (sorted keys, selectedProfile,
per-component health checks).

What "installs" means here, checked on the plan (and the synthesized Terraform JSON):

* exit 0 with the file unchanged; renames, retired manifests and version skew are findings;
* every value that assumes another release (registry ``conditionalValues``) has that release in
  the stack, ordered before it -- or the chart keeps its bundled subchart/CRDs;
* every ``dependencyRefs`` edge of the file, and every install order of AICR's ``deploy.sh``
  that the file's edges imply, holds in the release DAG; the only pair of ``deploy.sh``'s linear
  order the DAG reverses is the one platform knowledge reverses on purpose (AKS: gpu-operator
  after the NicClusterPolicy gate, AICR#2499).
"""

from __future__ import annotations

import copy
import json
import pickle
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml
from _support import ancestors

from gpucluster.errors import GpuclusterError
from gpucluster.inputs.config import load_clusters
from gpucluster.model import Component
from gpucluster.pipeline import build_plan, build_plans
from gpucluster.recipes import layering, recipe_result
from gpucluster.recipes import recipe as recipe_mod
from gpucluster.recipes.catalog import load_catalog
from gpucluster.values import get_path

DATA = Path(__file__).parent / "data"
V0111 = DATA / "aicr" / "v0.11.1"
FILES = {
    "training": V0111 / "h100-aks-ubuntu-training.recipe.yaml",
    "inference": V0111 / "h100-aks-ubuntu-inference.recipe.yaml",
    "inference-dynamo": V0111 / "h100-aks-ubuntu-inference-dynamo.recipe.yaml",
}
V1ALPHA3 = DATA / "recipes" / "aicr-v1alpha3-h100-aks-ubuntu-inference.yaml"
DEPLOY_SH = V0111 / "bundle-h100-aks-training" / "deploy.sh"

RENAMES = {
    "training": {"skyhook-operator": "nodewright-operator"},
    "inference": {
        "skyhook-operator": "nodewright-operator",
        "kgateway": "agentgateway",
        "kgateway-crds": "agentgateway-crds",
    },
    "inference-dynamo": {
        "skyhook-operator": "nodewright-operator",
        "kgateway": "agentgateway",
        "kgateway-crds": "agentgateway-crds",
        "dynamo-crds": "grove",
    },
}
SKEWED = {
    "cert-manager",
    "gpu-operator",
    "kai-scheduler",
    "kube-prometheus-stack",
    "network-operator",
    "nvidia-dra-driver-gpu",
    "nvsentinel",
}
AKS_REVERSED = {("gpu-operator", "network-operator")}
"""deploy.sh installs gpu-operator before network-operator; on AKS gpucluster installs it after the
NicClusterPolicy gate, whether or not the recipe has the edge (the OFED / GPU driver race, AICR#2499)."""


def project(tmp_path: Path, names: list[str]) -> Path:
    """A project folder with the real files copied byte for byte and one cluster per file."""
    lines = ["clusters:"]
    for name in names:
        src = FILES[name] if name in FILES else V1ALPHA3
        dst = tmp_path / "recipes" / src.name
        dst.parent.mkdir(exist_ok=True)
        shutil.copyfile(src, dst)
        assert dst.read_bytes() == src.read_bytes()
        lines += [f"  - name: {name.replace('.', '-')}", f"    recipe: recipes/{src.name}"]
    (tmp_path / "gpucluster.yaml").write_text("\n".join(lines) + "\n")
    return tmp_path / "gpucluster.yaml"


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    path = project(tmp_path_factory.mktemp("aicr"), list(FILES))
    return {p.cluster.name: p for p in build_plans(load_clusters(str(path), env={}))}


def first_node(plan, component: str) -> str:
    """The first release of a component (its pre-manifests, else its chart, else its manifests)."""
    return next(n.id for n in plan.nodes if n.component == component and n.kind != "gate")


def ready_nodes(plan, component: str) -> set[str]:
    return {n.id for n in plan.nodes if n.component == component}


def installs_after(plan, later: str, earlier: str) -> bool:
    """Every release of ``later`` waits for every install release of ``earlier``.

    Gates and teardown guards are not install steps: a teardown guard is applied after its
    component (so that Terraform destroys it first) and nothing waits for it.
    """
    before = {
        n.id for n in plan.nodes if n.component == earlier and n.kind not in ("gate", "teardown")
    }
    return all(before <= ancestors(plan, n.id) for n in plan.nodes if n.component == later)


def file_refs(name: str) -> list[dict]:
    return yaml.safe_load(FILES[name].read_text())["componentRefs"]


def mapped(name: str, component: str) -> str:
    return RENAMES[name].get(component, component)


# --------------------------------------------------------------------------- the real files, unchanged


@pytest.mark.parametrize("name", sorted(FILES))
def test_real_file_synthesizes_unchanged(plans, name):
    plan = plans[name]
    assert not [f for f in plan.findings if f.severity == "error"]
    assert set(plan.components) == {mapped(name, r["name"]) for r in file_refs(name)}
    renamed = {f.key: f for f in plan.findings if f.id == "RECIPE-RENAMED"}
    assert {f.component for f in renamed.values()} == set(RENAMES[name].values())
    for f in renamed.values():
        assert f.file.endswith(f"recipes/{FILES[name].name}") and re.fullmatch(
            r"componentRefs\[\d+\]\.name", f.key
        )
    assert {f.component for f in plan.findings if f.id == "VERSION-SKEW"} == SKEWED | (
        {"dynamo-platform"} if name == "inference-dynamo" else set()
    )
    assert [f.key for f in plan.findings if f.id == "RECIPE-MANIFEST-RETIRED"] == [
        f"componentRefs[{[r['name'] for r in file_refs(name)].index('gpu-operator')}].manifestFiles[0]"
    ]


def test_operator_driver_version_is_the_installed_charts(plans, shared_dir):
    """AICR v0.11.1 files pin gpu-operator v25.10.1 with the operator installing the driver; AICR's
    bundle (and that chart's default) say driver 580.105.08, not v26.7's 595.91.07."""
    bundle = shared_dir / "reference" / "aicr-outputs" / "v0.11.1" / "bundle-h100-aks-training"
    want = yaml.safe_load((bundle / "gpu-operator" / "values.yaml").read_text())["driver"]
    for name in FILES:
        gpu = plans[name].components["gpu-operator"]
        assert gpu.ref.version == "v25.10.1" and get_path(gpu.values, "driver.enabled") is True
        assert get_path(gpu.values, "driver.version") == want["version"] == "580.105.08", name


NETWORK_OPERATOR_25_1 = {
    "ofedDriver": ("nvcr.io/nvidia/mellanox", "doca-driver", "25.01-0.6.0.0-0"),
    "rdmaSharedDevicePlugin": ("ghcr.io/mellanox", "k8s-rdma-shared-dev-plugin", "v1.5.2"),
    "docaTelemetryService": ("nvcr.io/nvidia/doca", "doca_telemetry", "1.16.5-doca2.6.0-host"),
}
"""The operand images of the Network Operator v25.1.0 release (Mellanox/network-operator,
hack/release.yaml at tag v25.1.0: Mofed, RdmaSharedDevicePlugin, docaTelemetryService)."""


def test_the_nicclusterpolicy_images_are_those_of_the_pinned_network_operator(plans, shared_dir):
    """AICR v0.11.1 files pin network-operator 25.1.0: the NicClusterPolicy gpucluster supplies on
    AKS carries that release's operand images, not 26.4.1's, and chart 25.1.0's CRD accepts it."""
    from gpucluster.lint.lint_schema import openapi_to_jsonschema

    crd = yaml.safe_load(
        (
            shared_dir
            / "reference"
            / "charts"
            / "network-operator-25.1.0"
            / "crds"
            / "mellanox.com_nicclusterpolicies.yaml"
        ).read_text()
    )
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    schema = openapi_to_jsonschema(served["schema"]["openAPIV3Schema"])
    schema["properties"].setdefault("metadata", {"type": "object"})
    for name in FILES:
        plan = plans[name]
        assert plan.components["network-operator"].ref.version == "25.1.0"
        (node,) = [n for n in plan.nodes if n.id == "network-operator-manifests"]
        docs = [
            d
            for path, text in sorted(node.local_chart.files.items())
            if path.startswith("templates/")
            for d in yaml.safe_load_all(text)
            if d and d.get("kind") == "NicClusterPolicy"
        ]
        (doc,) = docs
        spec = doc["spec"]
        assert {
            key: (spec[key]["repository"], spec[key]["image"], spec[key]["version"])
            for key in NETWORK_OPERATOR_25_1
        } == NETWORK_OPERATOR_25_1, name
        errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
        assert errors == [], name


def test_real_files_cli_exit_0(tmp_path, capsys, monkeypatch):
    from gpucluster.cli import main

    project(tmp_path, list(FILES))
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--config", "gpucluster.yaml", "--findings", "all"]) == 0
    err = capsys.readouterr().err
    assert (
        "info[VERSION-SKEW] file=recipes/h100-aks-ubuntu-training.recipe.yaml cluster=training component=gpu-operator key=componentRefs[1].version"
        in err
    )
    assert (
        "warning[VERSION-SKEW] file=recipes/h100-aks-ubuntu-training.recipe.yaml cluster=training component=nvsentinel"
        in err
    )
    assert (
        "info[RECIPE-RENAMED] file=recipes/h100-aks-ubuntu-inference-dynamo.recipe.yaml cluster=inference-dynamo component=grove key=componentRefs[1].name: 'dynamo-crds' is now 'grove'"
        in err
    )
    assert "error[" not in err


def test_real_files_synthesize_terraform(plans, tmp_path):
    from gpucluster_cdk import stacks

    out = tmp_path / "cdktf.out"
    names = stacks.synth(list(plans.values()), out)
    assert names == sorted(f"{n}-{kind}" for n in plans for kind in ("cluster", "runtime"))
    for name, plan in plans.items():
        tf = json.loads((out / "stacks" / f"{name}-runtime" / "cdk.tf.json").read_text())
        releases = tf["resource"]["helm_release"]
        assert {r["name"] for r in releases.values()} == {n.id for n in plan.nodes}


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_assumed_provider_is_installed_first(plans, name):
    plan = plans[name]
    catalog = load_catalog()
    checked = 0
    for comp_name, comp in plan.components.items():
        for cv in catalog.components[comp_name].conditional_values:
            have = get_path(comp.values, cv.path)
            present = [p for p in cv.providers if p in plan.components]
            if have == cv.value and type(have) is type(cv.value):
                assert present, (
                    f"{comp_name} {cv.path}={have} but none of {cv.providers} is installed"
                )
                assert any(installs_after(plan, comp_name, p) for p in present), (
                    f"{comp_name} installs before its {cv.path} provider"
                )
            else:
                assert have == cv.otherwise and not present[:0]
            checked += 1
    assert (
        checked >= 3
    )  # gpu-operator and network-operator nfd.enabled, kube-prometheus-stack crds.enabled
    # the v0.11.1 files have neither nfd nor prometheus-operator-crds: the charts keep their bundled ones
    assert plan.components["kube-prometheus-stack"].values["crds"]["enabled"] is True
    assert plan.components["network-operator"].values["nfd"]["enabled"] is True
    assert (
        plan.components["gpu-operator"].values["nfd"]["enabled"] is False
    )  # network-operator's NFD serves it
    assert installs_after(plan, "gpu-operator", "network-operator")


@pytest.mark.parametrize("name", sorted(FILES))
def test_file_dependency_refs_hold_in_the_dag(plans, name):
    plan = plans[name]
    for ref in file_refs(name):
        for dep in ref.get("dependencyRefs") or []:
            a, b = mapped(name, ref["name"]), mapped(name, dep)
            if a == b:
                continue
            assert installs_after(plan, a, b), f"{a} must install after {b} (file dependencyRefs)"


def deploy_order(text: str) -> list[str]:
    """Release names in the order AICR's deploy.sh installs them (``helm upgrade --install <name>``)."""
    return re.findall(r"^\s*helm upgrade --install (\S+) ", text, flags=re.M)


def test_deploy_sh_order_holds_in_the_dag(plans):
    order = deploy_order(DEPLOY_SH.read_text())
    assert order == [
        "cert-manager",
        "kube-prometheus-stack",
        "gpu-operator",
        "k8s-ephemeral-storage-metrics",
        "kai-scheduler",
        "network-operator",
        "nvidia-dra-driver-gpu",
        "nvsentinel",
        "prometheus-adapter",
        "skyhook-operator",
    ]
    plan = plans["training"]
    # deploy.sh applies gpu-operator's manifests after its chart; the DRA kubelet plugin is restarted
    # and awaited after the DRA chart: here the rollout gate
    assert "nvidia-dra-driver-gpu" in ancestors(
        plan, "nvidia-dra-driver-gpu-kubelet-plugin-rollout"
    )
    reversed_pairs = set()
    for i, earlier in enumerate(order):
        for later in order[i + 1 :]:
            a, b = mapped("training", later), mapped("training", earlier)
            if installs_after(plan, b, a):
                reversed_pairs.add((b, a))
    # the reversal and what follows from it: releases deploy.sh installs between gpu-operator and
    # network-operator that need gpu-operator (kai-scheduler) now come after network-operator too
    assert AKS_REVERSED <= reversed_pairs
    for later, earlier in reversed_pairs - AKS_REVERSED:
        assert earlier == "network-operator" and installs_after(plan, later, "gpu-operator"), (
            later,
            earlier,
        )
    # and the reversal is the platform's gate, not an accident: gpu-operator waits for the NicClusterPolicy
    assert "network-operator-nicclusterpolicy-ready" in ancestors(plan, "gpu-operator")


def test_aks_gate_orders_gpu_operator_without_the_recipe_edge(tmp_path):
    # with an nfd release nothing else orders gpu-operator after network-operator: the AKS
    # NicClusterPolicy gate does (its `before`), as the OKE plugin's does
    path = project(tmp_path, ["training"])
    recipe_file = tmp_path / "recipes" / FILES["training"].name
    doc = yaml.safe_load(recipe_file.read_text())
    doc["componentRefs"].append(
        {"name": "nfd", "type": "Helm", "valuesFile": "components/nfd/values.yaml"}
    )
    gpu = next(r for r in doc["componentRefs"] if r["name"] == "gpu-operator")
    gpu["dependencyRefs"].append("nfd")
    assert "network-operator" not in gpu["dependencyRefs"]
    recipe_file.write_text(yaml.safe_dump(doc))
    [plan] = build_plans(load_clusters(str(path), env={}))
    assert "network-operator" not in plan.components["gpu-operator"].ref.dependency_refs
    assert {f.component for f in plan.findings if f.id == "ORDER-ADDED"} == {
        "network-operator"
    }  # NodeFeatureRules need nfd
    assert "network-operator-nicclusterpolicy-ready" in plan.node("gpu-operator").depends_on
    assert "network-operator-nicclusterpolicy-ready" in ancestors(
        plan, "gpu-operator-clusterpolicy-ready"
    )


# --------------------------------------------------------------------------- v1alpha3


def test_v1alpha3_documented_format_is_accepted(tmp_path):
    doc = yaml.safe_load(V1ALPHA3.read_text())
    assert doc["apiVersion"] == "aicr.run/v1alpha3" and list(doc) == sorted(doc)
    assert doc["metadata"]["selectedProfile"]["name"] == "gpuStack"
    assert sum("healthCheckAsserts" in r for r in doc["componentRefs"]) >= 10
    [plan] = build_plans(load_clusters(str(project(tmp_path, ["v1alpha3"])), env={}))
    assert [f.id for f in plan.findings] == ["RECIPE-FIELDS-UNUSED"]
    [info] = plan.findings
    assert (
        info.severity == "info"
        and "componentRefs[*].healthCheckAsserts (12 components)" in info.message
    )
    assert {"agentgateway-crds-manifests", "agentgateway-manifests"} <= {n.id for n in plan.nodes}
    # CRDs before CRs, Established: CRD manifests -> established gates -> agentgateway chart -> Gateway
    up = ancestors(plan, "agentgateway-manifests")
    assert {
        "agentgateway-crds",
        "agentgateway-crds-manifests",
        "agentgateway-crds-gateways-established",
        "agentgateway-crds-agentgatewayparameters-established",
        "agentgateway",
    } <= up
    gate = next(g for g in plan.gates if g.name == "agentgateway-crds-gateways-established")
    assert (gate.kind, gate.name_of_object) == (
        "crd-established",
        "gateways.gateway.networking.k8s.io",
    )
    assert plan.recipe.profile == ("gpuStack", "azure-managed")


def test_later_additive_fields_are_one_info_line(tmp_path):
    doc = yaml.safe_load(V1ALPHA3.read_text())
    doc["apiVersion"] = "aicr.run/v1beta1"
    doc["provenance"] = {"digest": "sha256:0"}
    doc["componentRefs"][0]["sbom"] = "x"
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    r = recipe_result.recipe_from_file(str(tmp_path / "r.yaml"), load_catalog(), display="r.yaml")
    [unknown] = [f for f in r.findings if f.id == "RECIPE-FIELDS-UNKNOWN"]
    assert unknown.severity == "info" and "provenance, componentRefs[0].sbom" in unknown.message


# --------------------------------------------------------------------------- renames (registry formerNames)


def _with_ref(base: str, ref: dict, index: int | None = None) -> dict:
    doc = yaml.safe_load(FILES[base].read_text())
    doc["componentRefs"].append(ref)
    return doc


RENAME_CASES = {
    "skyhook-operator": ("training", None),
    "kgateway": ("inference", None),
    "kgateway-crds": ("inference", None),
    "dynamo-crds": ("inference-dynamo", None),
    "skyhook-customizations": (
        "training",
        {
            "name": "skyhook-customizations",
            "type": "Helm",
            "source": "",
            "valuesFile": "components/skyhook-customizations/values.yaml",
            "manifestFiles": ["components/skyhook-customizations/manifests/tuning.yaml"],
            "dependencyRefs": ["skyhook-operator"],
        },
    ),
}


def test_rename_cases_cover_the_registry():
    assert set(RENAME_CASES) == set(recipe_result.former_names(load_catalog()))


@pytest.mark.parametrize("old", sorted(RENAME_CASES))
def test_rename(tmp_path, old):
    catalog = load_catalog()
    new, note = recipe_result.former_names(catalog)[old]
    base, extra = RENAME_CASES[old]
    doc = yaml.safe_load(FILES[base].read_text())
    if extra is not None:
        extra = dict(extra)
        if not any((d / extra["valuesFile"].replace(old, new)).is_file() for d in catalog.dirs):
            del extra["valuesFile"]
        doc["componentRefs"].append(extra)
    index = [r["name"] for r in doc["componentRefs"]].index(old)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    r = recipe_result.recipe_from_file(str(tmp_path / "r.yaml"), catalog, display="r.yaml")
    [finding] = [f for f in r.findings if f.id == "RECIPE-RENAMED" and f.component == new]
    assert (finding.severity, finding.file, finding.key) == (
        "info",
        "r.yaml",
        f"componentRefs[{index}].name",
    )
    assert f"'{old}' is now '{new}'" in finding.message and note in finding.message
    ref = r.component(new)
    entry = catalog.components[new]
    ours = {c.name: c for c in recipe_mod.resolve(r.criteria, catalog).component_refs}
    want = ours.get(new)
    assert (ref.chart, ref.version) == (
        (want.chart, want.version) if want else (entry.chart, entry.version)
    )  # the chart the values are written for
    assert old not in {d for c in r.component_refs for d in c.dependency_refs}
    for f in ref.values_files + ref.manifest_files:
        assert f"components/{new}/" in f
    if old == "skyhook-customizations":
        assert ref.manifest_files == [
            "components/nodewright-customizations/manifests/tuning.yaml.j2"
        ]
        assert ref.dependency_refs == ["nodewright-operator"] and ref.type == "Manifest"
    if old == "dynamo-crds":
        assert "grove" in r.component("dynamo-platform").dependency_refs


def test_old_and_new_name_together_is_listed_twice(tmp_path):
    doc = yaml.safe_load(FILES["training"].read_text())
    doc["componentRefs"].append({"name": "nodewright-operator", "type": "Helm"})
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(GpuclusterError) as exc:
        recipe_result.recipe_from_file(str(tmp_path / "r.yaml"), load_catalog(), display="r.yaml")
    assert (
        "component 'nodewright-operator' is listed twice (componentRefs[9] and componentRefs[10])"
        in exc.value.render()
    )


# --------------------------------------------------------------------------- conditional values (registry conditionalValues)


def _components(criteria_intent: str, platform: str = "any") -> dict[str, Component]:
    from gpucluster.model import Criteria

    catalog = load_catalog()
    r = recipe_mod.resolve(
        Criteria(
            service="aks",
            accelerator="h100",
            os="ubuntu",
            intent=criteria_intent,
            platform=platform,
        ),
        catalog,
    )
    return layering.effective_components(r, catalog)


CONDITIONAL_CASES = {
    ("gpu-operator", "nfd.enabled"): ("training", "any"),
    ("network-operator", "nfd.enabled"): ("training", "any"),
    ("kube-prometheus-stack", "crds.enabled"): ("training", "any"),
    ("dynamo-platform", "global.grove.install"): ("inference", "dynamo"),
    ("dynamo-platform", "global.kai-scheduler.install"): ("inference", "dynamo"),
}


def test_conditional_cases_cover_the_registry():
    catalog = load_catalog()
    assert set(CONDITIONAL_CASES) == {
        (e.name, c.path) for e in catalog.components.values() for c in e.conditional_values
    }


@pytest.mark.parametrize("component, path", sorted(CONDITIONAL_CASES))
def test_conditional_value(component, path):
    catalog = load_catalog()
    [cv] = [c for c in catalog.components[component].conditional_values if c.path == path]
    comps = _components(*CONDITIONAL_CASES[(component, path)])
    # our own recipe: a provider is installed and ordered first, the catalog value holds
    assert get_path(comps[component].values, path) == cv.value
    assert any(p in comps and p in comps[component].ref.dependency_refs for p in cv.providers)
    before = pickle.dumps(comps)
    assert layering.resolve_conditional_values(comps, catalog) == (comps, [])
    assert pickle.dumps(comps) == before  # the input is left as it is
    # a provider present but not ordered first: the edge is added
    provider = next(p for p in cv.providers if p in comps)
    lone = copy.deepcopy(comps)
    for c in lone.values():
        c.ref.dependency_refs = [
            d for d in c.ref.dependency_refs if d not in cv.providers or c.name != component
        ]
    lone, found = layering.resolve_conditional_values(lone, catalog, cluster="c")
    assert [(f.id, f.component) for f in found] == [("ORDER-ADDED", component)]
    assert provider in lone[component].ref.dependency_refs
    # no provider: the chart keeps its bundled one
    gone = {n: c for n, c in copy.deepcopy(comps).items() if n not in cv.providers}
    for c in gone.values():
        c.ref.dependency_refs = [d for d in c.ref.dependency_refs if d in gone]
    gone, found = layering.resolve_conditional_values(gone, catalog, cluster="c")
    assert get_path(gone[component].values, path) == cv.otherwise
    assert ("CONDITIONAL-VALUE", "info", component, path) in {
        (f.id, f.severity, f.component, f.key) for f in found
    }
    # ... unless a user override set it: kept, with a warning
    kept = {n: c for n, c in copy.deepcopy(comps).items() if n not in cv.providers}
    kept, found = layering.resolve_conditional_values(
        kept,
        catalog,
        cluster="c",
        user_set=lambda c, p: "g.yaml" if (c, p) == (component, path) else None,
    )
    assert get_path(kept[component].values, path) == cv.value
    assert ("CONDITIONAL-VALUE", "warning", component, path) in {
        (f.id, f.severity, f.component, f.key) for f in found
    }


def test_disabling_the_provider_by_override_restores_the_bundled_one(tmp_path):
    (tmp_path / "gpucluster.yaml").write_text(
        "clusters:\n  - name: c1\n    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}\n"
        "    overrides:\n      set: ['prometheusoperatorcrds:enabled=false']\n"
    )
    [cluster] = load_clusters(str(tmp_path / "gpucluster.yaml"), env={})
    plan = build_plan(cluster)
    assert plan.components["kube-prometheus-stack"].values["crds"]["enabled"] is True
    assert ("CONDITIONAL-VALUE", "kube-prometheus-stack") in {
        (f.id, f.component) for f in plan.findings
    }


def test_version_skew_error_option_fails_synth(tmp_path):
    path = project(tmp_path, ["training"])
    path.write_text(path.read_text() + "    versionSkew: error\n")
    with pytest.raises(GpuclusterError) as exc:
        build_plans(load_clusters(str(path), env={}))
    problems = [p for p in exc.value.problems if p.id == "VERSION-SKEW"]
    assert {p.component for p in problems} == SKEWED
    assert all(p.file.endswith("recipes/h100-aks-ubuntu-training.recipe.yaml") for p in problems)


def test_file_override_error_names_the_file_and_its_path(tmp_path):
    path = project(tmp_path, ["training"])
    recipe_file = tmp_path / "recipes" / FILES["training"].name
    doc = yaml.safe_load(recipe_file.read_text())
    doc["componentRefs"][1]["overrides"]["devicePlugin"] = {"enabled": False}
    recipe_file.write_text(yaml.safe_dump(doc))
    with pytest.raises(GpuclusterError) as exc:
        build_plans(load_clusters(str(path), env={}))
    [p] = [p for p in exc.value.problems if p.id == "GPU-ADVERTISER"]
    assert (
        p.file.endswith("recipes/h100-aks-ubuntu-training.recipe.yaml")
        and p.key == "componentRefs[1].overrides.devicePlugin.enabled"
    )

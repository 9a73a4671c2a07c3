"""RecipeResult documents: writing, round trip, and AICR-written input."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpucluster.errors import GpuclusterError
from gpucluster.model import ClusterSpec, Criteria
from gpucluster.recipes import layering, recipe, recipe_result, recipe_result_writer
from gpucluster.recipes.catalog import load_catalog

DATA = Path(__file__).parent / "data" / "recipes"
AICR_TRAINING = DATA / "aicr-h100-aks-ubuntu-training.yaml"
AICR_V0111 = Path(__file__).parent / "data" / "aicr" / "v0.11.1"
AICR_LEGACY = AICR_V0111 / "h100-aks-ubuntu-training.recipe.yaml"
"""The real ``aicr recipe`` output of AICR v0.11.1 (apiVersion aicr.nvidia.com/v1alpha1; see
tests/data/aicr/README.md). componentRefs: 0 cert-manager, 1 gpu-operator, 2
k8s-ephemeral-storage-metrics, 3 kai-scheduler, 4 kube-prometheus-stack, 5 network-operator,
6 nvidia-dra-driver-gpu, 7 nvsentinel, 8 prometheus-adapter, 9 skyhook-operator."""


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def aks(intent, platform="any"):
    return Criteria(
        service="aks", accelerator="h100", os="ubuntu", intent=intent, platform=platform
    )


def test_document_fields(catalog):
    r = recipe.resolve(aks("training"), catalog)
    comps = layering.effective_components(r, catalog)
    doc = recipe_result_writer.to_document(r, comps)
    assert list(doc) == [
        "kind",
        "apiVersion",
        "metadata",
        "criteria",
        "constraints",
        "componentRefs",
        "deploymentOrder",
    ]
    assert doc["kind"] == "RecipeResult" and doc["apiVersion"] == "aicr.run/v1beta2"
    assert doc["metadata"]["appliedOverlays"][-1] == "h100-aks-ubuntu-training"
    assert doc["metadata"]["selectedProfile"]["ownedPaths"]["nvidia-dra-driver-gpu"] == [
        "enabled",
        "nvidiaDriverRoot",
    ]
    assert doc["criteria"] == {
        "service": "aks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
        "platform": "any",
    }
    gpu = next(c for c in doc["componentRefs"] if c["name"] == "gpu-operator")
    assert {k: gpu[k] for k in ("namespace", "chart", "source", "version", "valuesFile")} == {
        "namespace": "gpu-operator",
        "chart": "gpu-operator",
        "source": "https://helm.ngc.nvidia.com/nvidia",
        "version": "v26.7.1",
        "valuesFile": "components/gpu-operator/values-aks-training.yaml",
    }
    assert gpu["overrides"]["driver"] == {
        "enabled": False
    }  # profile values folded in, as AICR writes them
    assert gpu["values"]["devicePlugin"]["enabled"] is True
    assert gpu["dependencyRefs"] == [
        "cert-manager",
        "kube-prometheus-stack",
        "network-operator",
        "nfd",
        "nodewright-customizations",
    ]
    assert doc["deploymentOrder"] == [c["name"] for c in doc["componentRefs"]]
    nwc = next(c for c in doc["componentRefs"] if c["name"] == "nodewright-customizations")
    assert nwc["type"] == "Manifest" and "chart" not in nwc and "source" not in nwc


def test_yaml_is_deterministic(catalog):
    texts = set()
    for _ in range(2):
        r = recipe.resolve(aks("inference", "dynamo"), catalog)
        texts.add(
            recipe_result_writer.dump_yaml(
                recipe_result_writer.to_document(r, layering.effective_components(r, catalog))
            )
        )
    assert len(texts) == 1


@pytest.mark.parametrize(
    "intent, platform, profile",
    [
        ("training", "any", "azure-managed"),
        ("training", "kubeflow", "operator-managed"),
        ("inference", "dynamo", "operator-managed"),
    ],
)
def test_round_trip(tmp_path, catalog, intent, platform, profile):
    r = recipe.resolve(aks(intent, platform), catalog, profile={"gpuStack": profile})
    comps = layering.effective_components(r, catalog)
    text = recipe_result_writer.dump_yaml(recipe_result_writer.to_document(r, comps))
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    r2 = recipe_result.recipe_from_file(str(path), catalog)
    comps2 = layering.effective_components(r2, catalog)
    assert list(comps2) == list(comps)
    assert {n: c.values for n, c in comps2.items()} == {n: c.values for n, c in comps.items()}
    assert r2.profile == r.profile and r2.profile_owned == r.profile_owned
    assert [vars(c) for c in r2.constraints] == [vars(c) for c in r.constraints]
    assert recipe_result_writer.dump_yaml(recipe_result_writer.to_document(r2, comps2)) == text


def test_edited_values_are_taken_as_complete_values(tmp_path, catalog):
    r = recipe.resolve(aks("training"), catalog)
    doc = recipe_result_writer.to_document(r, layering.effective_components(r, catalog))
    cert = next(c for c in doc["componentRefs"] if c["name"] == "cert-manager")
    cert["values"] = {"crds": {"enabled": True}, "replicaCount": 2}
    path = tmp_path / "r.yaml"
    path.write_text(recipe_result_writer.dump_yaml(doc))
    r2 = recipe_result.recipe_from_file(str(path), catalog)
    assert r2.component("cert-manager").values_files == []
    assert layering.effective_components(r2, catalog)["cert-manager"].values == {
        "crds": {"enabled": True},
        "replicaCount": 2,
    }


def test_aicr_written_recipe_maps_onto_catalog(catalog):
    r = recipe_result.recipe_from_file(str(AICR_TRAINING), catalog)
    ours = recipe.resolve(aks("training"), catalog)
    assert [c.name for c in r.component_refs] == [c.name for c in ours.component_refs]
    nwc = r.component("nodewright-customizations")
    assert (nwc.type, nwc.source, nwc.chart) == ("Manifest", "", "")
    assert nwc.manifest_files == ["components/nodewright-customizations/manifests/tuning.yaml.j2"]
    assert (
        r.component("network-operator").manifest_files[1]
        == "components/network-operator/manifests/nic-cluster-policy-aks.yaml.j2"
    )
    assert r.component("gpu-operator").values_files == [
        "components/gpu-operator/values.yaml",
        "components/gpu-operator/values-aks-training.yaml",
    ]
    comps = layering.effective_components(r, catalog)
    ours_comps = layering.effective_components(ours, catalog)
    # AICR's file still passes storageSpec.emptyDir: null, which gpucluster's catalog dropped: it renders as
    # null into the Prometheus CR, which its CRD does not allow (gpucluster lint, docs/catalog-sources.md).
    storage = comps["kube-prometheus-stack"].values["prometheus"]["prometheusSpec"]["storageSpec"]
    assert storage.pop("emptyDir") is None
    assert {n: c.values for n, c in comps.items()} == {n: c.values for n, c in ours_comps.items()}
    assert r.applied_overlays == ours.applied_overlays
    assert r.profile == ("gpuStack", "azure-managed")


def test_legacy_api_version_with_pin_prefix_and_overrides(tmp_path, catalog):
    doc = ref_change("gpu-operator", chart="nvidia/gpu-operator")
    path = write(tmp_path, yaml.safe_dump(doc))
    r = recipe_result.recipe_from_file(path, catalog, display="v0111.yaml")
    gpu = r.component("gpu-operator")
    assert (gpu.chart, gpu.version, gpu.namespace) == (
        "gpu-operator",
        "v25.10.1",
        "gpu-operator",
    )  # prefix dropped, pin kept
    dra = r.component("nvidia-dra-driver-gpu")
    assert (dra.source, dra.chart, dra.version) == (
        "https://helm.ngc.nvidia.com/nvidia",
        "nvidia-dra-driver-gpu",
        "25.12.0",
    )
    comps = layering.effective_components(r, catalog)
    assert comps["gpu-operator"].values["gdrcopy"] == {"enabled": True}  # the file's overrides
    assert (
        comps["gpu-operator"].values["driver"]["enabled"] is False
    )  # default profile (azure-managed) applied
    assert comps["nvidia-dra-driver-gpu"].values["controller"]["affinity"] == {"nodeAffinity": None}
    ours = recipe.resolve(aks("training"), catalog)
    assert "gpu-operator" in r.profile_owned and set(r.profile_owned) == set(ours.profile_owned) & {
        c.name for c in r.component_refs
    }
    assert r.applied_overlays[-1] == "h100-aks-ubuntu-training"


def test_version_skew_names_component_pin_and_catalog_version(catalog):
    r = recipe_result.recipe_from_file(str(AICR_LEGACY), catalog, display="train.yaml")
    skew = {f.component: f for f in r.findings if f.id == "VERSION-SKEW"}
    assert (
        set(skew)
        == {
            "cert-manager",
            "gpu-operator",
            "kai-scheduler",
            "kube-prometheus-stack",
            "network-operator",
            "nvidia-dra-driver-gpu",
            "nvsentinel",
        }
    )  # k8s-ephemeral-storage-metrics 1.19.2 and prometheus-adapter 5.3.0 match; skyhook-operator is renamed
    gpu = skew["gpu-operator"]
    # gpucluster has values for v25.10 (registry chartVersions): the pin is installed with them
    assert (gpu.severity, gpu.file, gpu.key) == ("info", "train.yaml", "componentRefs[1].version")
    assert (
        "pins gpu-operator v25.10.1" in gpu.message
        and "not the catalog's gpu-operator v26.7.1" in gpu.message
    )
    assert "range >=25.10.0 <25.11.0, checked against v25.10.1" in gpu.message
    # never rendered with a real chart: still a warning
    assert (
        skew["nvsentinel"].severity == "warning"
        and "never rendered with a real chart" in skew["nvsentinel"].message
    )
    dra = skew["nvidia-dra-driver-gpu"].message
    assert "nvidia-dra-driver-gpu 25.12.0 (https://helm.ngc.nvidia.com/nvidia)" in dra
    assert (
        "not the catalog's dra-driver-nvidia-gpu 0.5.0 (oci://registry.k8s.io/dra-driver-nvidia/charts)"
        in dra
    )
    assert (
        "83.7.0" in skew["kube-prometheus-stack"].message
    )  # the AKS overlay's pin, not the registry's 84.4.0


def test_version_skew_error_option(catalog):
    cluster = ClusterSpec(
        name="c",
        criteria=aks("training"),
        source="g.yaml",
        recipe_file=str(AICR_LEGACY),
        version_skew="error",
    )
    r = recipe_result.recipe_from_file(
        str(AICR_LEGACY), catalog, cluster=cluster, display="train.yaml"
    )
    assert {f.severity for f in r.findings if f.id == "VERSION-SKEW"} == {"error"}


def test_matching_pin_with_v_prefix_is_no_skew(tmp_path, catalog):
    doc = ref_change("gpu-operator", version="26.7.1")
    r = recipe_result.recipe_from_file(write(tmp_path, yaml.safe_dump(doc)), catalog)
    assert "gpu-operator" not in {f.component for f in r.findings if f.id == "VERSION-SKEW"}


def test_every_problem_of_a_file_in_one_run(tmp_path, catalog):
    doc = yaml.safe_load(AICR_LEGACY.read_text())
    doc["componentRefs"][0]["valuesFile"] = "components/cert-manager/values-nope.yaml"
    doc["componentRefs"][1]["manifestFiles"] = ["components/gpu-operator/manifests/nope.yaml"]
    doc["componentRefs"][3]["type"] = "Kustomize"
    doc["componentRefs"][6]["dependencyRefs"] = ["nfd"]
    doc["componentRefs"][7]["overides"] = {}
    with pytest.raises(GpuclusterError) as exc:
        recipe_result.recipe_from_file(
            write(tmp_path, yaml.safe_dump(doc)), catalog, display="bad.yaml"
        )
    keys = [p.key for p in exc.value.problems]
    assert keys == [
        "componentRefs[0].valuesFile",
        "componentRefs[1].manifestFiles[0]",
        "componentRefs[3].type",
        "componentRefs[7].overides",
        "componentRefs[6].dependencyRefs[0]",
    ]
    assert all(p.file == "bad.yaml" for p in exc.value.problems)


def test_baked_driver_root_contradicting_cluster_profile_is_refused(tmp_path, catalog):
    # seed aks-gpu-setup: a recipe baked for the Azure-managed driver keeps nvidiaDriverRoot "/";
    # bundling it for operator-managed pools would point the DRA kubelet plugin at the wrong root
    doc = ref_change("nvidia-dra-driver-gpu", overrides={"nvidiaDriverRoot": "/"})
    path = write(tmp_path, yaml.safe_dump(doc))
    cluster = ClusterSpec(
        name="c",
        criteria=aks("training"),
        profile={"gpuStack": "operator-managed"},
        source="g.yaml",
    )
    with pytest.raises(GpuclusterError) as exc:
        recipe_result.recipe_from_file(path, catalog, cluster=cluster, display="legacy.yaml")
    assert exc.value.problems[0].key == "componentRefs[6].overrides.nvidiaDriverRoot"
    assert "profile gpuStack=operator-managed owns it as '/run/nvidia/driver'" in exc.value.render()


def test_cluster_profile_applies_when_file_has_none(tmp_path, catalog):
    cluster = ClusterSpec(
        name="c",
        criteria=aks("training"),
        profile={"gpuStack": "operator-managed"},
        source="g.yaml",
    )
    r = recipe_result.recipe_from_file(str(AICR_LEGACY), catalog, cluster=cluster)
    assert r.profile == ("gpuStack", "operator-managed")
    comps = layering.effective_components(r, catalog)
    assert comps["nvidia-dra-driver-gpu"].values["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert comps["gpu-operator"].values["driver"]["enabled"] is True


def write(tmp_path, text):
    p = tmp_path / "r.yaml"
    p.write_text(text)
    return str(p)


def legacy_with(**changes):
    doc = yaml.safe_load(AICR_LEGACY.read_text())
    for key, value in changes.items():
        doc[key] = value
    return doc


def ref_change(component, **changes):
    doc = yaml.safe_load(AICR_LEGACY.read_text())
    for ref in doc["componentRefs"]:
        if ref["name"] == component:
            ref.update(changes)
    return doc


@pytest.mark.parametrize(
    "doc, message",
    [
        (legacy_with(kind="RecipeMetadata"), "kind is 'RecipeMetadata', not RecipeResult"),
        (legacy_with(apiVersion="v1"), "unsupported apiVersion 'v1'"),
        (legacy_with(criteria=None), "missing or invalid 'criteria' mapping"),
        (legacy_with(criteria={"accelerator": "h100"}), "criteria.service is missing"),
        (legacy_with(criteria={"service": "aks", "gpu": "h100"}), "unknown criteria field 'gpu'"),
        (
            legacy_with(componentRef=[]),
            "unknown key 'componentRef' (did you mean 'componentRefs'?)",
        ),
        (
            legacy_with(configuration={"slurm": {"accounting": {"mode": "disabled"}}}),
            "'configuration' (typed desired state",
        ),
        (legacy_with(componentRefs=[]), "'componentRefs' must be a non-empty list"),
        (
            ref_change("gpu-operator", name="gpu-operator-ocp"),
            "component 'gpu-operator-ocp' is not in gpucluster's registry",
        ),
        (ref_change("gpu-operator", type="Kustomize"), "unsupported component type 'Kustomize'"),
        (ref_change("gpu-operator", tag="v1"), "'tag' is not supported: Kustomize"),
        (ref_change("gpu-operator", patches=["p.yaml"]), "'patches' is not supported"),
        (ref_change("gpu-operator", cleanup=True), "'cleanup: true'"),
        (
            ref_change("gpu-operator", valuesFile="components/gpu-operator/values-eks.yaml"),
            "values file 'components/gpu-operator/values-eks.yaml' is not in gpucluster's catalog",
        ),
        (
            ref_change(
                "gpu-operator",
                manifestFiles=["components/gpu-operator/manifests/dra-rollout-hook.yaml"],
            ),
            "no manifest template for 'components/gpu-operator/manifests/dra-rollout-hook.yaml'",
        ),
        (
            ref_change("gpu-operator", dependencyRefs=["nfd"]),
            "'gpu-operator' depends on 'nfd', which is not in the recipe",
        ),
        (
            ref_change("gpu-operator", overrides={"driver": {"enabled": True}}),
            "overrides set driver.enabled=true, but profile gpuStack=azure-managed owns it",
        ),
        (
            ref_change("gpu-operator", version=" v1"),
            "'version' must be a string without surrounding spaces",
        ),
        (
            ref_change("gpu-operator", overides={"driver": {"enabled": True}}),
            "unknown key 'overides' (did you mean 'overrides'?)",
        ),
        (
            ref_change("gpu-operator", overrides={"enabled": False}),
            "'gpu-operator' is owned by the gpuStack profile 'azure-managed' and cannot be disabled",
        ),
        (
            ref_change("nvidia-dra-driver-gpu", overrides={"install": False}),
            "'nvidia-dra-driver-gpu' is owned by the gpuStack profile 'azure-managed' and cannot be disabled",
        ),
    ],
)
def test_rejected_input(tmp_path, catalog, doc, message):
    path = write(tmp_path, yaml.safe_dump(doc))
    with pytest.raises(GpuclusterError) as exc:
        recipe_result.recipe_from_file(path, catalog, display="recipe.yaml")
    assert message in exc.value.render()
    assert "file=recipe.yaml" in exc.value.render()


def test_values_file_error_lists_catalog_files(tmp_path, catalog):
    path = write(
        tmp_path,
        yaml.safe_dump(
            ref_change("gpu-operator", valuesFile="components/gpu-operator/values-eks.yaml")
        ),
    )
    with pytest.raises(GpuclusterError) as exc:
        recipe_result.recipe_from_file(path, catalog)
    assert "components/gpu-operator/values-aks-training.yaml" in exc.value.problems[0].allowed
    assert exc.value.problems[0].component == "gpu-operator"
    assert exc.value.problems[0].key == "componentRefs[1].valuesFile"


def test_selected_profile_conflicting_with_cluster(tmp_path, catalog):
    cluster = ClusterSpec(
        name="c1",
        criteria=aks("training"),
        profile={"gpuStack": "operator-managed"},
        source="g.yaml",
    )
    with pytest.raises(GpuclusterError) as exc:
        recipe_result.recipe_from_file(str(AICR_TRAINING), catalog, cluster=cluster)
    text = exc.value.render()
    assert "file=g.yaml cluster=c1 key=profile.gpuStack" in text
    assert "resolved for gpuStack=azure-managed" in text


def test_read_criteria(tmp_path):
    assert recipe_result.read_criteria(str(AICR_TRAINING)) == aks("training")


def test_cluster_file_with_aicr_recipe_builds_plan(tmp_path):
    from gpucluster.inputs.config import load_clusters
    from gpucluster.pipeline import build_plan

    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "train.yaml").write_text(AICR_TRAINING.read_text())
    (tmp_path / "gpucluster.yaml").write_text(
        "clusters:\n  - name: from-aicr\n    recipe: recipes/train.yaml\n"
    )
    (cluster,) = load_clusters(str(tmp_path / "gpucluster.yaml"), env={})
    plan = build_plan(cluster)
    assert plan.recipe.applied_overlays[-1] == "h100-aks-ubuntu-training"
    ids = [n.id for n in plan.nodes]
    assert {
        "gpu-operator",
        "nvidia-dra-driver-gpu",
        "network-operator-manifests",
        "nodewright-customizations-manifests",
    } <= set(ids)
    gpu = plan.node("gpu-operator")
    assert (gpu.repository, gpu.chart, gpu.version) == (
        "https://helm.ngc.nvidia.com/nvidia",
        "gpu-operator",
        "v26.7.1",
    )
    assert gpu.values["driver"]["enabled"] is False
    assert plan.cluster.pools[1].gpu_driver == "Install"


@pytest.mark.parametrize(
    "component", ["gpu-operator", "skyhook-operator"]
)  # a current name; a former AICR name
def test_a_component_depending_on_itself_is_refused(shared_dir, tmp_path, component):
    """A real AICR v0.11.1 RecipeResult whose component lists itself in dependencyRefs: one
    ``error[...] ... fix:`` line, exit 2, nothing written (it was silently dropped, while
    docs/recipes.md says cycles are errors)."""
    import os
    import subprocess
    import sys

    real = (
        shared_dir
        / "reference"
        / "aicr-outputs"
        / "v0.11.1"
        / "h100-aks-ubuntu-training.recipe.yaml"
    )
    doc = yaml.safe_load(real.read_text(encoding="utf-8"))
    (ref,) = [r for r in doc["componentRefs"] if r["name"] == component]
    ref.setdefault("dependencyRefs", []).append(component)
    (tmp_path / "self.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    (tmp_path / "gpucluster.yaml").write_text(
        "clusters:\n  - name: selfdep\n    recipe: self.yaml\n", encoding="utf-8"
    )
    out = tmp_path / "out"
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, str(root / "main.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "GPUCLUSTER_CONFIG": str(tmp_path / "gpucluster.yaml"),
            "CDKTF_OUTDIR": str(out),
        },
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error[")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = lines
    renamed = "nodewright-operator" if component == "skyhook-operator" else component
    assert (
        f"file={tmp_path / 'self.yaml'} " in line
        and f"component={renamed}" in line
        and "key=componentRefs[" in line
    ), line
    assert (
        f"'{renamed}' depends on itself" in line
        and f"fix: remove '{component}' from the dependencyRefs" in line
    ), line
    assert not out.exists()


def test_a_component_depending_on_its_own_former_name_is_refused(shared_dir, tmp_path):
    """The entry written with its current name (``nodewright-operator``) listing its former AICR name
    (``skyhook-operator``) in dependencyRefs is a self-dependency too: refused with the one line (it was
    renamed to the entry's own name and then silently dropped)."""
    from gpucluster import pipeline
    from gpucluster.errors import GpuclusterError
    from gpucluster.inputs.config import load_clusters

    real = (
        shared_dir
        / "reference"
        / "aicr-outputs"
        / "v0.11.1"
        / "h100-aks-ubuntu-training.recipe.yaml"
    )
    doc = yaml.safe_load(real.read_text(encoding="utf-8"))
    for ref in doc["componentRefs"]:
        ref["dependencyRefs"] = [
            "nodewright-operator" if d == "skyhook-operator" else d
            for d in ref.get("dependencyRefs") or []
        ]
    (ref,) = [r for r in doc["componentRefs"] if r["name"] == "skyhook-operator"]
    ref["name"] = "nodewright-operator"
    (tmp_path / "self.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    (tmp_path / "gpucluster.yaml").write_text(
        "clusters:\n  - name: selfdep\n    recipe: self.yaml\n", encoding="utf-8"
    )
    (cluster,) = load_clusters(str(tmp_path / "gpucluster.yaml"), env={})
    pipeline.build_plan(cluster)  # the renamed entry itself is accepted

    ref["dependencyRefs"] = [*ref.get("dependencyRefs", []), "skyhook-operator"]
    (tmp_path / "self.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    (cluster,) = load_clusters(str(tmp_path / "gpucluster.yaml"), env={})
    with pytest.raises(GpuclusterError) as err:
        pipeline.build_plan(cluster)
    (line,) = err.value.render().splitlines()
    assert (
        "component=nodewright-operator" in line
        and "'nodewright-operator' depends on itself" in line
    ), line
    assert (
        "fix: remove 'skyhook-operator' from the dependencyRefs of 'nodewright-operator'" in line
    ), line

"""Every readiness gate waits for something that will exist (gpucluster.charts.gates.check_gate_objects).

* Real Helm (../shared/reference/charts): for every built-in recipe x profile and the three real
  AICR v0.11.1 files, each gate's object is rendered by a release of the stack, and that release
  is one the plan names as its provider (registry ``renders``/``crds``, manifest objects).
* Without ../shared: a gate whose object no release renders is refused with one line; the AKS
  platform supplies its NicClusterPolicy manifest to a RecipeResult that lists none.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from render_cases import UNAVAILABLE, base_cases, cluster_doc

from gpucluster import pipeline
from gpucluster.charts import gates as gates_mod
from gpucluster.inputs.config import load_clusters, parse_clusters
from gpucluster.lint.render import ChartSources, Renderer, render_plans
from gpucluster.recipes import recipe_result_writer

AICR = Path(__file__).parent / "data" / "aicr" / "v0.11.1"


def _recipe_project(tmp_path: Path, doc: dict, edit) -> Path:
    """A project whose one cluster is given by the RecipeResult of ``doc``'s recipe, edited by ``edit``."""
    (spec,) = parse_clusters(
        {"clusters": [doc]}, source=str(tmp_path / "gpucluster.yaml"), root=tmp_path
    )
    from gpucluster.recipes.catalog import load_catalog

    r, _ = pipeline.resolved_components(pipeline.prepare_cluster(spec), load_catalog())
    rdoc = recipe_result_writer.to_document(r)
    for ref in rdoc["componentRefs"]:
        edit(ref)
    (tmp_path / "recipe.yaml").write_text(recipe_result_writer.dump_yaml(rdoc))
    cluster = {k: v for k, v in doc.items() if k != "criteria"}
    cluster["recipe"] = "recipe.yaml"
    (tmp_path / "gpucluster.yaml").write_text(yaml.safe_dump({"clusters": [cluster]}))
    return tmp_path / "gpucluster.yaml"


def _drop_network_manifests(ref: dict) -> None:
    if ref["name"] == "network-operator":
        ref.pop("manifestFiles", None)


def test_a_gate_whose_object_no_release_renders_is_refused_with_one_line(tmp_path, capsys):
    """OKE GB200: the NicClusterPolicy comes only from the recipe's manifest; OKE supplies none."""
    from gpucluster.cli import main

    path = _recipe_project(
        tmp_path,
        cluster_doc("oke", "gb200-oke-ubuntu-training", "", "plain"),
        _drop_network_manifests,
    )
    assert main(["plan", "--config", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error[GATE-NO-OBJECT]") and "component=network-operator" in line
    assert (
        "network-operator-nicclusterpolicy-ready waits for every NicClusterPolicy" in line
        and " fix: " in line
    )
    assert "recipe.yaml" in line and ".manifestFiles" in line


def test_the_aks_platform_supplies_its_nicclusterpolicy(tmp_path):
    path = _recipe_project(
        tmp_path,
        cluster_doc("aks", "h100-aks-ubuntu-training", "azure-managed", "plain"),
        _drop_network_manifests,
    )
    (spec,) = load_clusters(str(path), env={})
    plan = pipeline.build_plan(spec)
    (f,) = [f for f in plan.findings if f.id == "GATE-OBJECT-SUPPLIED"]
    assert (
        f.severity == "info"
        and f.component == "network-operator"
        and f.key.endswith(".manifestFiles")
    )
    chart = plan.node("network-operator-manifests").local_chart
    assert any("kind: NicClusterPolicy" in text for text in chart.files.values())


def test_real_aicr_v0111_files_get_the_nicclusterpolicy_their_gate_waits_for(tmp_path):
    lines = ["clusters:"]
    for src in sorted(AICR.glob("*.recipe.yaml")):
        (tmp_path / src.name).write_bytes(src.read_bytes())
        lines += [f"  - name: {src.name.split('.')[0]}", f"    recipe: {src.name}"]
    (tmp_path / "gpucluster.yaml").write_text("\n".join(lines) + "\n")
    plans = pipeline.build_plans(load_clusters(str(tmp_path / "gpucluster.yaml"), env={}))
    for plan in plans:
        assert [f.component for f in plan.findings if f.id == "GATE-OBJECT-SUPPLIED"] == [
            "network-operator"
        ]


# --------------------------------------------------------------------------- real charts


def _stacks(tmp_path: Path):
    out = []
    for platform, leaf, profile in base_cases():
        (spec,) = parse_clusters(
            {"clusters": [cluster_doc(platform, leaf, profile, "plain")]},
            source="x.yaml",
            root=tmp_path,
        )
        out.append(pipeline.build_plan(spec))
    lines = ["clusters:"]
    for src in sorted(AICR.glob("*.recipe.yaml")):
        shutil.copyfile(src, tmp_path / src.name)
        lines += [f"  - name: aicr-{src.name.split('.')[0]}", f"    recipe: {src.name}"]
    (tmp_path / "gpucluster.yaml").write_text("\n".join(lines) + "\n")
    out += pipeline.build_plans(load_clusters(str(tmp_path / "gpucluster.yaml"), env={}))
    return out


OPERATOR_WORKLOADS = {"network-operator-multus-rollout"}
"""Rollout gates on a workload an operator creates from a custom resource, not a chart: NVKE's
multus DaemonSet, which network-operator renders from the NicClusterPolicy's secondaryNetwork
(the gate runs after the NicClusterPolicy gate, whose object the test does check)."""


def _matches(spec, doc) -> bool:
    api = str(doc.get("apiVersion", ""))
    meta = doc.get("metadata") or {}
    if spec.kind == "crd-established":
        return (
            doc.get("kind") == "CustomResourceDefinition"
            and meta.get("name") == spec.name_of_object
        )
    group = spec.api_version.split("/")[0] if "/" in spec.api_version else ""
    return (
        (api.split("/")[0] if "/" in api else "") == group
        and doc.get("kind") == spec.kind_name
        and spec.name_of_object in (None, meta.get("name"))
        and (spec.namespace is None or meta.get("namespace", spec.namespace) == spec.namespace)
    )


def test_every_gate_object_is_rendered_by_a_release_the_plan_names(reference_charts, tmp_path):
    sources = ChartSources([reference_charts], cache_dir=Path("/nonexistent-gpucluster-cache"))
    checked = 0
    with Renderer(sources, allow_missing=UNAVAILABLE) as renderer:
        for plan in _stacks(tmp_path):
            result = render_plans([plan], sources, renderer=renderer)
            for spec in plan.gates:
                objects = {}
                for release in result.releases:
                    docs = [o for _, o in release.objects] + [o for _, o in release.crds]
                    for doc in docs:
                        if _matches(spec, doc):
                            where = (
                                "manifests"
                                if release.node.kind in ("manifests", "pre-manifests")
                                else "chart"
                            )
                            objects.setdefault(f"{release.node.component} {where}", release.name)
                providers = gates_mod.gate_object_providers(spec, plan.components, {})
                if not objects and any(p.endswith(" operator") for p in providers):
                    continue  # a CRD the operator creates while it reconciles (registry createsAtRuntime: nv-ipam)
                if not objects and spec.name in OPERATOR_WORKLOADS:
                    continue
                assert objects, (
                    f"{plan.cluster.name}: gate {spec.name} waits for an object no release renders"
                )
                # the plan's providers (registry data, or manifests) are among the releases that render it
                named = [p for p in objects if p in providers or p.endswith(" manifests")]
                assert named, (
                    f"{plan.cluster.name}: gate {spec.name}: rendered by {sorted(objects)}, plan names {providers}"
                )
                checked += 1
    assert checked > 50


def test_a_gate_object_missing_from_a_cluster_file_is_keyed_on_manifest_files():
    """A cluster file (no RecipeResult): the refusal names the cluster file and the key
    ``manifestFiles`` (a RecipeResult's would be ``componentRefs[i].manifestFiles``)."""
    from gpucluster.errors import GpuclusterError
    from gpucluster.model import ClusterSpec, Component, ComponentRef, Criteria, GateSpec

    cluster = ClusterSpec(name="lab", criteria=Criteria(service="aks"), source="lab.yaml")
    spec = gates_mod.validate_gate(
        GateSpec(
            name="nfd-widget-ready",
            component="nfd",
            kind="resource-condition",
            api_version="example.com/v1",
            resource="widgets",
            kind_name="Widget",
            name_of_object="w",
            jsonpath="{.status.state}",
            value="ready",
        ),
        plugin="tests",
        cluster=cluster,
    )
    components = {"nfd": Component(ref=ComponentRef(name="nfd", namespace="nfd"), values={})}
    try:
        gates_mod.check_gate_objects(cluster, [spec], components, {})
    except GpuclusterError as err:
        (line,) = err.render().splitlines()
    else:
        raise AssertionError("no GATE-NO-OBJECT")
    assert line.startswith(
        "error[GATE-NO-OBJECT] file=lab.yaml cluster=lab component=nfd key=manifestFiles: gate "
        "nfd-widget-ready waits for Widget w, which no release of this stack renders"
    ), line

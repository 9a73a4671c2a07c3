"""Every object gpucluster renders for the AKS recipes validates against its schema.

Plans come from the real pipeline (catalog, overrides, scheduling, plugins) for the four AKS
H100 Ubuntu recipes and both gpuStack profiles. Objects of manifest charts are read from the
chart templates; objects of gate charts are rendered with the release values the graph gives
them (gates.render_release). Built-in kinds: Kubernetes 1.34 strict schemas; custom resources:
the pinned operators' CRDs in tests/data/crds (see tests/k8s_schema.py and SOURCES.md there).
"""

from __future__ import annotations

import copy
import dataclasses

import jsonschema
import kubernetes_validate
import pytest
import yaml
from k8s_schema import K8S_VERSION, crd_index, schema_at, schema_set_dir, validate_object

from gpucluster import pipeline
from gpucluster.charts import gates
from gpucluster.inputs import config
from gpucluster.model import Criteria

RECIPES = {
    "h100-aks-ubuntu-training": ("training", "any"),
    "h100-aks-ubuntu-training-kubeflow": ("training", "kubeflow"),
    "h100-aks-ubuntu-inference": ("inference", "any"),
    "h100-aks-ubuntu-inference-dynamo": ("inference", "dynamo"),
}
PROFILES = ("azure-managed", "operator-managed")
INFERENCE_CRDS = {
    "gateway.networking.k8s.io": (
        "gatewayclasses",
        "gateways",
        "grpcroutes",
        "httproutes",
        "referencegrants",
    ),
    "inference.networking.x-k8s.io": (
        "inferencemodelrewrites",
        "inferenceobjectives",
        "inferencepoolimports",
        "inferencepools",
    ),
    "inference.networking.k8s.io": ("inferencepools",),
}
"""The Gateway API v1.2.1 standard and Inference Extension v1.5.0 CRDs (AICR agentgateway-crds manifests)."""
INFERENCE_GATES = {
    "agentgateway-crds-gateways-established",
    "agentgateway-crds-agentgatewayparameters-established",
}
"""Registry waitEstablished of agentgateway-crds: the inference gateway's CRs install once their CRDs are Established."""
CASES = [(r, p) for r in RECIPES for p in PROFILES]


def build(recipe: str, profile: str):
    base = config.load_clusters()[0]
    intent, platform = RECIPES[recipe]
    cluster = dataclasses.replace(
        base,
        criteria=Criteria(
            service="aks", accelerator="h100", os="ubuntu", intent=intent, platform=platform
        ),
        profile={"gpuStack": profile},
    )
    plan = pipeline.build_plan(cluster)
    assert plan.recipe.applied_overlays[-1] == recipe
    return plan


@pytest.fixture(scope="module")
def plans():
    return {case: build(*case) for case in CASES}


_RENDERED: dict[int, tuple[object, list[tuple[str, str, dict]]]] = {}
"""id(plan) -> (plan, its rendered objects): each plan rendered and parsed once per test process
(the plan is kept referenced, so its id is never reused while cached)."""


def rendered_objects(plan) -> list[tuple[str, str, dict]]:
    """``(release id, template path, object)`` for every local chart of the plan.

    Rendered and parsed once per plan (the tests of a recipe share one module-scoped plan); the
    objects are shared, so a test that changes one deep-copies it first (see :func:`_object`).
    """
    cached = _RENDERED.get(id(plan))
    if cached is None or cached[0] is not plan:
        cached = _RENDERED[id(plan)] = (plan, _render_objects(plan))
    return list(cached[1])


def _render_objects(plan) -> list[tuple[str, str, dict]]:
    out = []
    for node in plan.nodes:
        if node.local_chart is None:
            continue
        if node.kind in (
            "gate",
            "crds",
        ):  # both read only {{ .Values.<key> | quote }} (values.yaml defaults)
            texts = gates.render_release(node.local_chart, node.values)
        else:
            texts = {p: t for p, t in node.local_chart.files.items() if p.startswith("templates/")}
        for path, text in sorted(texts.items()):
            assert "{{" not in text, f"{node.id}/{path} still holds Helm template syntax"
            for doc in yaml.safe_load_all(text):
                if doc is not None:
                    out.append((node.id, path, doc))
    return out


def validate_training_runtime(doc: dict) -> None:
    """ClusterTrainingRuntime has no saved CRD (tests/data/crds/SOURCES.md): check its shape and
    validate its Job template against the Kubernetes 1.34 batch/v1 Job schema."""
    assert doc["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert "namespace" not in doc["metadata"]  # cluster-scoped
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
    spec = doc["spec"]
    assert set(spec) == {"mlPolicy", "template"}
    assert spec["mlPolicy"] == {
        "numNodes": 1,
        "torch": {},
    }  # no numProcPerNode (removed in trainer 2.2)
    jobs = spec["template"]["spec"]["replicatedJobs"]
    assert [j["name"] for j in jobs] == ["node"]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "node", **jobs[0]["template"]["metadata"]},
        "spec": jobs[0]["template"]["spec"],
    }
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)


def test_kubernetes_validate_has_the_1_34_strict_schemas():
    directory = schema_set_dir()
    assert directory.is_dir(), directory
    assert (directory / "daemonset-apps-v1.json").is_file()
    assert (directory / "job-batch-v1.json").is_file()
    assert (
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x"}},
            K8S_VERSION,
            strict=True,
        )
        == "1.34"
    )


@pytest.mark.parametrize("recipe, profile", CASES)
def test_every_rendered_object_validates(plans, recipe, profile):
    objects = rendered_objects(plans[(recipe, profile)])
    assert objects
    used = {}
    for release, _path, doc in objects:
        if doc["kind"] == "ClusterTrainingRuntime":
            validate_training_runtime(doc)
            used[(release, doc["kind"])] = "shape + batch/v1 Job template"
        else:
            used[(release, doc["kind"])] = validate_object(doc)
    assert (
        used[("network-operator-manifests", "NicClusterPolicy")]
        == "crd mellanox.com/mellanox.com_nicclusterpolicies.yaml"
    )
    assert (
        used[("network-operator-manifests", "NodeFeatureRule")]
        == "crd nfd.k8s-sigs.io/nfd-api-crds.yaml"
    )
    assert (
        used[("nodewright-customizations-manifests", "Skyhook")]
        == "crd skyhook.nvidia.com/skyhook.nvidia.com_skyhooks.yaml"
    )
    assert used[("gpu-operator-clusterpolicy-ready", "Job")] == "kubernetes 1.34"
    if "-inference" in recipe:
        assert used[("agentgateway-manifests", "Gateway")] == "crd catalog gateway-api-crds.yaml.j2"
        assert (
            used[("agentgateway-manifests", "AgentgatewayParameters")]
            == "crd agentgateway.dev/agentgateway.dev_agentgatewayparameters.yaml"
        )
        assert (
            used[("agentgateway-crds-manifests", "CustomResourceDefinition")] == "kubernetes 1.34"
        )


@pytest.mark.parametrize("recipe, profile", CASES)
def test_rendered_objects_per_recipe_and_profile(plans, recipe, profile):
    found = {
        (release, doc["kind"], doc["metadata"]["name"])
        for release, _, doc in rendered_objects(plans[(recipe, profile)])
    }
    manifests = {k for k in found if k[0].endswith("-manifests") or k[0].endswith("-pre")}
    expected = {
        ("network-operator-manifests", "NodeFeatureRule", "nfd-network-rule"),
        ("network-operator-manifests", "NicClusterPolicy", "nic-cluster-policy"),
        ("network-operator-manifests", "DaemonSet", "nvidia-peermem-reloader"),
        ("nodewright-customizations-manifests", "Skyhook", "tuning"),
    }
    if (
        profile == "azure-managed"
    ):  # toolkit.enabled=false: the hardening DaemonSet (AICR AKS GPU Setup guide)
        expected.add(("gpu-operator-manifests", "DaemonSet", "nvidia-toolkit-hardening"))
    if recipe.endswith("-kubeflow"):
        expected.add(("kubeflow-trainer-manifests", "ClusterTrainingRuntime", "torch-distributed"))
    if (
        "-inference" in recipe
    ):  # the inference gateway and its CRD manifests (AICR platform-inference mixin)
        expected |= {
            ("agentgateway-manifests", "AgentgatewayParameters", "system-proxy"),
            ("agentgateway-manifests", "Gateway", "inference-gateway"),
        }
        expected |= {
            ("agentgateway-crds-manifests", "CustomResourceDefinition", f"{plural}.{group}")
            for group, plurals in INFERENCE_CRDS.items()
            for plural in plurals
        }
    assert manifests == expected
    gate_jobs = {k[0] for k in found if k[1] == "Job" and not k[0].endswith(("-crds", "-teardown"))}
    assert gate_jobs == {
        "gpu-operator-clusterpolicy-ready",
        "network-operator-nicclusterpolicy-ready",
        "nvidia-dra-driver-gpu-kubelet-plugin-rollout",
    } | (INFERENCE_GATES if "-inference" in recipe else set())
    teardown_jobs = {
        k[0] for k in found if k[1] == "Job" and k[0].endswith("-teardown")
    }  # docs/upgrading.md, Teardown
    assert {
        "gpu-operator-teardown",
        "network-operator-teardown",
        "nodewright-customizations-teardown",
    } <= teardown_jobs
    crd_steps = {
        k[0] for k in found if k[1] == "Job" and k[0].endswith("-crds")
    }  # docs/upgrading.md, The CRD step
    assert crd_steps == {"nfd-crds", "nvidia-dra-driver-gpu-crds"} | (
        {"kubeflow-trainer-crds"} if recipe.endswith("-kubeflow") else set()
    )


@pytest.mark.parametrize("recipe, profile", CASES)
def test_skyhook_has_tuning_off_and_keyed_tolerations(plans, recipe, profile):
    [skyhook] = [
        doc for _, _, doc in rendered_objects(plans[(recipe, profile)]) if doc["kind"] == "Skyhook"
    ]
    packages = skyhook["spec"]["packages"]
    assert list(packages) == [
        "nvidia-setup-kernel",
        "nvidia-setup-full",
    ]  # tuningEnabled: false on AKS
    assert packages["nvidia-setup-full"]["dependsOn"] == {"nvidia-setup-kernel": "0.7.0"}
    assert packages["nvidia-setup-kernel"]["configMap"] == {"service": "aks", "accelerator": "h100"}
    tolerations = skyhook["spec"]["additionalTolerations"]
    assert tolerations and all(t.get("key") for t in tolerations)  # never the wildcard on AKS


def checked_gate_conditions(plans) -> set[str]:
    """The names of the resource-condition gates of ``plans`` (``{name: RuntimePlan}``), each
    asserted to read a status field its CRD has (plural, JSONPath, value among the field's enum)."""
    crds = crd_index()
    checked = set()
    for plan in plans.values():
        for spec in plan.gates:
            if spec.kind != "resource-condition":
                continue
            group, version = spec.api_version.split("/")
            entry = crds[(group, version, spec.kind_name)]
            assert entry["plural"] == spec.resource
            node = schema_at(entry["raw"], spec.jsonpath)
            assert node is not None, (
                f"{spec.name}: {spec.jsonpath} is not in the {spec.kind_name} CRD"
            )
            assert spec.value in node.get("enum", []), (
                f"{spec.name}: '{spec.value}' is not a value of {spec.jsonpath}"
            )
            checked.add(spec.name)
    return checked


def test_gate_conditions_name_real_crd_status_fields(plans):
    assert checked_gate_conditions(plans) == {
        "gpu-operator-clusterpolicy-ready",
        "network-operator-nicclusterpolicy-ready",
    }


# --------------------------------------------------------------------------- the validators can fail


def _object(plans, kind):
    for _, _, doc in rendered_objects(plans[("h100-aks-ubuntu-training", "azure-managed")]):
        if doc["kind"] == kind:
            return copy.deepcopy(doc)
    raise KeyError(kind)


def test_crd_validation_refuses_unknown_and_mistyped_fields(plans):
    doc = _object(plans, "NicClusterPolicy")
    doc["spec"]["ofedDriver"]["forcePrecompield"] = False
    with pytest.raises(AssertionError, match="forcePrecompield"):
        validate_object(doc)
    doc = _object(plans, "NicClusterPolicy")
    doc["spec"]["ofedDriver"]["upgradePolicy"]["maxParallelUpgrades"] = "one"
    with pytest.raises(AssertionError, match="maxParallelUpgrades"):
        validate_object(doc)
    doc = _object(plans, "Skyhook")
    doc["metadata"]["namespace"] = "nodewright"
    with pytest.raises(AssertionError, match="cluster-scoped"):
        validate_object(doc)


def test_kubernetes_validation_is_strict(plans):
    doc = _object(plans, "DaemonSet")
    doc["spec"]["template"]["spec"]["tolerations"][0]["opertor"] = "Exists"
    with pytest.raises(AssertionError, match="opertor"):
        validate_object(doc)
    doc = _object(plans, "Job")
    del doc["metadata"]["namespace"]
    with pytest.raises(AssertionError, match="must set metadata.namespace"):
        validate_object(doc)
    with pytest.raises(AssertionError, match="no schema"):
        validate_object(
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
        )


def test_openapi_conversion_keeps_preserve_unknown_fields_open():
    from k8s_schema import openapi_to_jsonschema

    schema = openapi_to_jsonschema(
        {
            "type": "object",
            "properties": {
                "open": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "x-kubernetes-preserve-unknown-fields": True,
                },
                "closed": {"type": "object", "properties": {"a": {"type": "string"}}},
                "port": {"x-kubernetes-int-or-string": True},
                "maybe": {"type": "string", "nullable": True},
            },
        }
    )
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"open": {"b": 1}, "port": 80, "maybe": None})
    assert validator.is_valid({"port": "http"})
    assert not validator.is_valid({"closed": {"b": 1}})
    assert not validator.is_valid({"port": 1.5})


GATE_KINDS = {
    "resource-condition-namespaced": dict(
        kind="resource-condition",
        api_version="nv-ipam.nvidia.com/v1alpha1",
        resource="ippools",
        kind_name="IPPool",
        namespace="nvidia-network-operator",
        jsonpath="{.status.allocations[0].nodeName}",
        value="n1",
    ),
    "crd-established": dict(kind="crd-established", name_of_object="ippools.nv-ipam.nvidia.com"),
    "rollout-deployment": dict(
        kind="rollout",
        kind_name="Deployment",
        name_of_object="nv-ipam-controller",
        namespace="nvidia-network-operator",
    ),
    "min-version": dict(
        kind="min-version",
        kind_name="DaemonSet",
        name_of_object="nvidia-dra-driver-gpu-kubelet-plugin",
        namespace="nvidia-dra-driver",
        container="compute-domains",
        value="0.5.1",
    ),
}


@pytest.mark.parametrize("label", sorted(GATE_KINDS))
def test_gate_charts_of_every_kind_validate(label):
    from gpucluster.model import (
        ClusterSpec,
        Component,
        ComponentRef,
        GateSpec,
        NodeScheduling,
        Toleration,
    )

    cluster = ClusterSpec(
        name="lab",
        criteria=Criteria(service="aks"),
        source="tests",
        scheduling=NodeScheduling(
            system_node_selector={"kubernetes.azure.com/mode": "system"},
            system_tolerations=[Toleration(key="CriticalAddonsOnly")],
        ),
    )
    spec = GateSpec(name=f"gate-{label}", component="c", **GATE_KINDS[label])
    comps = {
        "c": Component(ref=ComponentRef(name="c", namespace="nvidia-network-operator"), values={})
    }
    chart, values = gates.render_gate_chart(cluster, spec, comps)
    rendered = gates.render_release(chart, {**values, "gatedHash": "0" * 64})
    kinds = []
    for path, text in sorted(rendered.items()):
        for doc in yaml.safe_load_all(text):
            assert validate_object(doc) == "kubernetes 1.34", path
            kinds.append(doc["kind"])
    role = "Role" if GATE_KINDS[label].get("namespace") else "ClusterRole"
    assert kinds == ["ServiceAccount", role, role + "Binding", "Job", "NetworkPolicy"]

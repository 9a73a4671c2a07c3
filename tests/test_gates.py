"""Readiness gates: collection and validation, the generated charts (RBAC, Job), re-runs on
change, and the release graph of the default cluster."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import yaml

from gpucluster import pipeline
from gpucluster.charts import gates, graph, jobchart
from gpucluster.errors import GpuclusterError, PluginError
from gpucluster.inputs import config
from gpucluster.model import (
    ClusterSpec,
    Component,
    ComponentRef,
    Criteria,
    GateSpec,
    NodeScheduling,
    Recipe,
    Toleration,
)
from gpucluster.sdk import hookimpl
from gpucluster.sdk.testing import registered

ROOT = gates.__file__.rsplit("/gpucluster/", 1)[0]


@pytest.fixture(scope="module")
def plan():
    return pipeline.build_plan(config.load_clusters()[0])


def lab(**kw) -> ClusterSpec:
    return ClusterSpec(name="lab", criteria=Criteria(service="aks"), source="tests/lab.yaml", **kw)


def components(*names_ns):
    return {n: Component(ref=ComponentRef(name=n, namespace=ns), values={}) for n, ns in names_ns}


def objects(chart, values=None):
    rendered = gates.render_release(chart, values or {})
    return {path: [d for d in yaml.safe_load_all(text) if d] for path, text in rendered.items()}


CP = dict(
    name="gpu-operator-clusterpolicy-ready",
    component="gpu-operator",
    kind="resource-condition",
    api_version="nvidia.com/v1",
    resource="clusterpolicies",
    kind_name="ClusterPolicy",
    name_of_object="cluster-policy",
    jsonpath="{.status.state}",
    value="ready",
)


# --------------------------------------------------------------------------- the AKS gates in the default plan


def test_default_plan_gates(plan):
    by_name = {g.name: g for g in plan.gates}
    assert sorted(by_name) == [
        "gpu-operator-clusterpolicy-ready",
        "network-operator-nicclusterpolicy-ready",
        "nvidia-dra-driver-gpu-kubelet-plugin-rollout",
    ]
    cp = by_name["gpu-operator-clusterpolicy-ready"]
    assert (
        cp.kind,
        cp.api_version,
        cp.resource,
        cp.name_of_object,
        cp.jsonpath,
        cp.value,
        cp.timeout_seconds,
    ) == (
        "resource-condition",
        "nvidia.com/v1",
        "clusterpolicies",
        "cluster-policy",
        "{.status.state}",
        "ready",
        1800,
    )
    ncp = by_name["network-operator-nicclusterpolicy-ready"]
    assert (ncp.kind, ncp.resource, ncp.name_of_object, ncp.value, ncp.timeout_seconds) == (
        "resource-condition",
        "nicclusterpolicies",
        None,
        "ready",
        2400,
    )
    dra = by_name["nvidia-dra-driver-gpu-kubelet-plugin-rollout"]
    assert (dra.kind, dra.kind_name, dra.namespace, dra.name_of_object, dra.min_ready) == (
        "rollout",
        "DaemonSet",
        "nvidia-dra-driver",
        "nvidia-dra-driver-gpu-kubelet-plugin",
        1,
    )


def test_default_plan_edges(plan):
    deps = {n.id: set(n.depends_on) for n in plan.nodes}
    kinds = {n.id: n.kind for n in plan.nodes}
    # manifests after their chart; custom resources after the chart installing their CRD
    assert "network-operator" in deps["network-operator-manifests"]
    assert "gpu-operator" in deps["gpu-operator-manifests"]
    assert (
        "nodewright-operator" in deps["nodewright-customizations-manifests"]
    )  # Skyhook CRD from nodewright
    # gates after what they gate
    assert deps["network-operator-nicclusterpolicy-ready"] == {"network-operator-manifests"}
    assert deps["gpu-operator-clusterpolicy-ready"] == {"gpu-operator-manifests"}
    assert deps["nvidia-dra-driver-gpu-kubelet-plugin-rollout"] == {"nvidia-dra-driver-gpu"}
    # RDMA ready before gpu-operator; ClusterPolicy ready before everything that needs GPUs
    assert "network-operator-nicclusterpolicy-ready" in deps["gpu-operator"]
    assert "network-operator-manifests" not in deps["gpu-operator"]
    for dependent in ("nvidia-dra-driver-gpu", "kai-scheduler", "nvsentinel"):
        assert "gpu-operator-clusterpolicy-ready" in deps[dependent]
        assert (
            "gpu-operator" not in deps[dependent]
            and "gpu-operator-manifests" not in deps[dependent]
        )
    for node in plan.nodes:
        assert node.wait_for_jobs is (node.kind in ("gate", "crds"))  # both wait for their hook Job
        if node.kind == "gate":
            assert node.local_chart is not None and set(node.values) == {
                "image",
                "gatedHash",
                "contentHash",
            }
    assert {i for i, k in kinds.items() if k == "manifests"} == {
        "network-operator-manifests",
        "gpu-operator-manifests",
        "nodewright-customizations-manifests",
    }


def test_destroy_order_keeps_controllers_alive_until_their_resources_are_gone(plan):
    layers = graph.topological_layers(plan.nodes)
    destroy = [node for layer in reversed(layers) for node in layer]
    for manifests_release, controller in [
        ("network-operator-manifests", "network-operator"),
        ("gpu-operator-manifests", "gpu-operator"),
        ("nodewright-customizations-manifests", "nodewright-operator"),
    ]:
        assert destroy.index(manifests_release) < destroy.index(controller)
    assert destroy.index("gpu-operator") < destroy.index("network-operator-manifests")


def test_gate_timeouts_outlast_the_job(plan):
    gate_nodes = [node for node in plan.nodes if node.kind == "gate"]
    assert sorted(n.id for n in gate_nodes) == sorted(g.name for g in plan.gates) != []
    for node in gate_nodes:
        spec = next(g for g in plan.gates if g.name == node.id)
        [job] = objects(node.local_chart, node.values)["templates/002-job.yaml"]
        deadline = job["spec"]["activeDeadlineSeconds"]
        assert deadline > gates.gate_budget_seconds(spec), "time to schedule and pull the image"
        assert deadline == gates.gate_budget_seconds(spec) + gates.JOB_START_MARGIN_SECONDS
        assert (
            node.timeout_seconds
            == gates.gate_budget_seconds(spec) + graph.GATE_TIMEOUT_MARGIN_SECONDS
            > deadline
        )


def test_disabled_components_drop_their_gates(plan):
    comps = {k: v for k, v in plan.components.items() if k != "network-operator"}
    names = [g.name for g in gates.collect_gates(plan.cluster, plan.recipe, comps)]
    assert names == [
        "gpu-operator-clusterpolicy-ready",
        "nvidia-dra-driver-gpu-kubelet-plugin-rollout",
    ]


def test_no_gpu_nodes_means_no_minimum_kubelet_plugin_pods(plan):
    cluster = dataclasses.replace(plan.cluster, pools=[p for p in plan.cluster.pools if not p.gpu])
    [dra] = [
        g for g in gates.collect_gates(cluster, plan.recipe, plan.components) if g.kind == "rollout"
    ]
    assert dra.min_ready == 0


# --------------------------------------------------------------------------- least-privilege RBAC


def rbac(plan, gate):
    node = next(n for n in plan.nodes if n.id == gate)
    return objects(node.local_chart, node.values)["templates/001-rbac.yaml"]


def test_clusterpolicy_gate_may_get_exactly_the_clusterpolicy(plan):
    role, binding = rbac(plan, "gpu-operator-clusterpolicy-ready")
    assert (
        role["kind"] == "ClusterRole"
        and role["metadata"]["name"] == "gpucluster-gate-gpu-operator-clusterpolicy-ready"
    )
    assert role["rules"] == [
        {
            "apiGroups": ["nvidia.com"],
            "resources": ["clusterpolicies"],
            "resourceNames": ["cluster-policy"],
            "verbs": ["get"],
        }
    ]
    assert binding["kind"] == "ClusterRoleBinding"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "gpucluster-gate-gpu-operator-clusterpolicy-ready",
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "gpu-operator-clusterpolicy-ready",
            "namespace": "gpu-operator",
        }
    ]


def test_nicclusterpolicy_gate_may_list_only_nicclusterpolicies(plan):
    role, _ = rbac(plan, "network-operator-nicclusterpolicy-ready")
    assert role["kind"] == "ClusterRole"
    assert role["rules"] == [
        {"apiGroups": ["mellanox.com"], "resources": ["nicclusterpolicies"], "verbs": ["list"]}
    ]


def test_rollout_gate_may_get_one_daemonset_in_its_namespace(plan):
    role, binding = rbac(plan, "nvidia-dra-driver-gpu-kubelet-plugin-rollout")
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "nvidia-dra-driver"
    assert role["rules"] == [
        {
            "apiGroups": ["apps"],
            "resources": ["daemonsets"],
            "resourceNames": ["nvidia-dra-driver-gpu-kubelet-plugin"],
            "verbs": ["get"],
        }
    ]
    assert (
        binding["kind"] == "RoleBinding" and binding["metadata"]["namespace"] == "nvidia-dra-driver"
    )


def test_crd_gate_may_get_exactly_the_crd():
    spec = gates.validate_gate(
        GateSpec(
            name="ippool-crd",
            component="network-operator",
            kind="crd-established",
            name_of_object="ippools.nv-ipam.nvidia.com",
        ),
        plugin="t",
        cluster=lab(),
    )
    assert (spec.timeout_seconds, spec.create_timeout_seconds) == (
        120,
        600,
    )  # seed: 2 min Established, 10 min created
    assert gates.rbac_rules(spec) == (
        None,
        [
            {
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "resourceNames": ["ippools.nv-ipam.nvidia.com"],
                "verbs": ["get"],
            }
        ],
    )


# --------------------------------------------------------------------------- the Job


def job_of(chart, values=None):
    [job] = objects(chart, values)["templates/002-job.yaml"]
    return job


def test_job_shape():
    chart, values = gates.render_gate_chart(
        lab(),
        gates.validate_gate(GateSpec(**CP), plugin="t", cluster=lab()),
        components(("gpu-operator", "gpu-operator")),
    )
    assert values == {"image": jobchart.DEFAULT_KUBECTL_IMAGE}
    assert sorted(chart.files) == [
        "Chart.yaml",
        "templates/000-serviceaccount.yaml",
        "templates/001-rbac.yaml",
        "templates/002-job.yaml",
        "templates/003-networkpolicy.yaml",
        "values.yaml",
    ]
    job = job_of(chart, {"gatedHash": "h1"})
    assert job["metadata"]["namespace"] == "gpu-operator"
    assert job["metadata"]["annotations"] == {
        "helm.sh/hook": "post-install,post-upgrade",
        "helm.sh/hook-weight": "0",
        "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
        "gpucluster/gated-component": "gpu-operator",
        "gpucluster/gated-hash": "h1",
    }
    spec = job["spec"]
    assert spec["backoffLimit"] == 2 and spec["activeDeadlineSeconds"] == 600 + 60
    assert spec["podFailurePolicy"]["rules"][0] == {
        "action": "FailJob",
        "onExitCodes": {"containerName": "wait", "operator": "In", "values": [1]},
    }
    pod = spec["template"]["spec"]
    assert spec["template"]["metadata"]["annotations"] == {"gpucluster/gated-hash": "h1"}
    assert (
        pod["serviceAccountName"] == "gpu-operator-clusterpolicy-ready"
        and pod["restartPolicy"] == "Never"
    )
    assert (
        pod["securityContext"]["runAsNonRoot"] is True
        and pod["securityContext"]["runAsUser"] == 65532
    )
    [c] = pod["containers"]
    assert c["image"] == jobchart.DEFAULT_KUBECTL_IMAGE
    assert c["command"][:2] == ["/bin/sh", "-c"] and c["command"][2] == gates.gate_script(
        gates.validate_gate(GateSpec(**CP), plugin="t", cluster=lab())
    )
    assert c["resources"] == {
        "requests": {"cpu": "10m", "memory": "64Mi"},
        "limits": {"cpu": "200m", "memory": "128Mi"},
    }
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert c["env"] == [
        {"name": "HOME", "value": "/tmp"}
    ]  # no secrets: no valueFrom, no secret volumes
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}]
    assert "nodeSelector" not in pod and "tolerations" not in pod


def test_job_runs_on_system_nodes_with_keyed_tolerations_only():
    cluster = lab(
        scheduling=NodeScheduling(
            system_node_selector={"kubernetes.azure.com/mode": "system"},
            system_tolerations=[
                Toleration(key="CriticalAddonsOnly", operator="Exists"),
                Toleration(operator="Exists"),
            ],
        )
    )
    chart, _ = gates.render_gate_chart(
        cluster, GateSpec(**CP), components(("gpu-operator", "gpu-operator"))
    )
    pod = job_of(chart)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.azure.com/mode": "system"}
    assert pod["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]


def test_gate_image_override_and_its_validation():
    cluster = lab(settings={"gateImage": "myacr.azurecr.io/kubectl:v1.34.1"})
    chart, values = gates.render_gate_chart(
        cluster, GateSpec(**CP), components(("gpu-operator", "gpu-operator"))
    )
    assert values == {"image": "myacr.azurecr.io/kubectl:v1.34.1"}
    assert yaml.safe_load(chart.files["values.yaml"])["image"] == "myacr.azurecr.io/kubectl:v1.34.1"
    assert (
        job_of(chart, values)["spec"]["template"]["spec"]["containers"][0]["image"]
        == "myacr.azurecr.io/kubectl:v1.34.1"
    )
    for bad in ("myacr.azurecr.io/kubectl", "kubectl latest", ""):
        with pytest.raises(GpuclusterError, match="key=settings.gateImage"):
            gates.gate_image(lab(settings={"gateImage": bad}))


def test_only_two_helm_expressions_in_the_chart():
    chart, _ = gates.render_gate_chart(
        lab(), GateSpec(**CP), components(("gpu-operator", "gpu-operator"))
    )
    exprs = [line.strip() for t in chart.files.values() for line in t.splitlines() if "{{" in line]
    assert sorted(exprs) == ["gpucluster/gated-hash: {{ .Values.gatedHash | quote }}"] * 2 + [
        "image: {{ .Values.image | quote }}"
    ]
    broken = dataclasses.replace(
        chart, files={**chart.files, "templates/003-x.yaml": "a: {{ .Release.Name }}\n"}
    )
    with pytest.raises(ValueError, match="unsupported Helm template expression"):
        gates.render_release(broken, {})


# --------------------------------------------------------------------------- re-run on change


def test_a_values_change_of_the_gated_component_changes_its_gate(plan):
    def nodes_for(values_patch):
        comps = copy.deepcopy(plan.components)
        comps["gpu-operator"].values = {**comps["gpu-operator"].values, **values_patch}
        specs = gates.collect_gates(plan.cluster, plan.recipe, comps)
        triples = [(s, *gates.render_gate_chart(plan.cluster, s, comps)) for s in specs]
        from gpucluster.charts import manifests
        from gpucluster.recipes.catalog import load_catalog

        charts = manifests.render_manifest_charts(plan.cluster, plan.recipe, comps, load_catalog())
        return {
            n.id: n
            for n in graph.build_nodes(plan.cluster.name, plan.recipe, comps, charts, triples)
        }

    before = nodes_for({})
    after = nodes_for({"dcgmExporter": {"enabled": False}})
    gate_before, gate_after = (
        before["gpu-operator-clusterpolicy-ready"],
        after["gpu-operator-clusterpolicy-ready"],
    )
    assert gate_before.values["gatedHash"] != gate_after.values["gatedHash"]
    assert (
        gate_before.values["contentHash"] == gate_after.values["contentHash"]
    )  # same chart, new values -> helm upgrade
    job_before = job_of(gate_before.local_chart, gate_before.values)
    job_after = job_of(gate_after.local_chart, gate_after.values)
    assert (
        job_before["metadata"]["annotations"]["gpucluster/gated-hash"]
        == gate_before.values["gatedHash"]
    )
    assert (
        job_after["metadata"]["annotations"]["gpucluster/gated-hash"]
        == gate_after.values["gatedHash"]
    )
    assert job_before != job_after
    # other components' gates are untouched
    for other in (
        "network-operator-nicclusterpolicy-ready",
        "nvidia-dra-driver-gpu-kubelet-plugin-rollout",
    ):
        assert before[other].values == after[other].values
    # identical input -> identical gate release
    assert nodes_for({})["gpu-operator-clusterpolicy-ready"].values == gate_before.values


def test_manifest_content_change_changes_the_gate(plan):
    comps = plan.components
    charts = {
        k: v
        for k, v in [
            ((n.component, "post"), n.local_chart) for n in plan.nodes if n.kind == "manifests"
        ]
    }
    h1 = graph.component_fingerprint(comps["network-operator"], charts)
    changed = dict(charts)
    c = charts[("network-operator", "post")]
    changed[("network-operator", "post")] = dataclasses.replace(c, content_hash="0" * 64)
    assert graph.component_fingerprint(comps["network-operator"], changed) != h1


# --------------------------------------------------------------------------- self-contained charts


def test_charts_are_self_contained_and_deterministic(plan):
    again = pipeline.build_plan(config.load_clusters()[0])
    for node, node2 in zip(plan.nodes, again.nodes, strict=True):
        assert node.id == node2.id and node.values == node2.values
        if node.local_chart is None:
            continue
        assert node.local_chart.files == node2.local_chart.files
        for path, text in node.local_chart.files.items():
            assert not path.startswith("/") and ".." not in path.split("/")
            assert ROOT not in text and "/work/" not in text
        assert node.local_chart.name == node.id


# --------------------------------------------------------------------------- plugin declarations


class _GatePlugin:
    def __init__(self, result):
        self.result = result

    @hookimpl
    def gpucluster_gates(self, cluster, recipe, components):
        return self.result


@pytest.fixture
def plugin_gates():
    def install(*results):
        with registered(entry_points=False) as kit:
            for i, result in enumerate(results):
                kit.register(_GatePlugin(result), name=f"plug{i}")
            recipe = Recipe(
                criteria=Criteria(service="aks"),
                applied_overlays=[],
                constraints=[],
                component_refs=[],
            )
            return gates.collect_gates(
                lab(), recipe, components(("gpu-operator", "gpu-operator"), ("nfd", "nfd"))
            )

    return install


def test_collect_drops_gates_of_absent_components_and_sorts(plugin_gates):
    # the dropped gate comes first, of the first plugin: the gates after it are still collected
    got = plugin_gates(
        [
            GateSpec(**{**CP, "name": "x", "component": "network-operator"}),
            GateSpec(**{**CP, "name": "b-gate"}),
        ],
        [GateSpec(**{**CP, "name": "a-gate"})],
    )
    assert [g.name for g in got] == ["a-gate", "b-gate"]
    assert got[0].description == "ClusterPolicy cluster-policy has {.status.state} = ready"


def test_duplicate_gate_names_name_both_plugins(plugin_gates):
    with pytest.raises(PluginError) as err:
        plugin_gates([GateSpec(**CP)], [GateSpec(**CP)])
    text = str(err.value)
    assert (
        "gate 'gpu-operator-clusterpolicy-ready'" in text and "already declared by plugin" in text
    )
    assert "plug0" in text and "plug1" in text


@pytest.mark.parametrize(
    "change, key, message",
    [
        ({"kind": "eventually"}, "kind", "unknown gate kind 'eventually'"),
        ({"name": "Gate_1"}, "name", "is not a DNS-1123 label"),
        ({"name": "g" * 54}, "name", "at most 53 characters"),
        ({"jsonpath": ".status.state"}, "jsonpath", "is not one '{.path}' expression"),
        ({"jsonpath": "{.a}{.b}"}, "jsonpath", "is not one '{.path}' expression"),
        ({"value": ""}, "value", "expected value is empty"),
        ({"api_version": "nvidia.com"}, "api_version", "is not 'group/version'"),
        ({"timeout_seconds": 0}, "timeout_seconds", "not a positive number"),
        ({"kind": "rollout", "kind_name": "StatefulSet"}, "kind_name", "is not supported"),
        (
            {"kind": "rollout", "kind_name": "DaemonSet", "namespace": None},
            "namespace",
            "namespace is required",
        ),
        (
            {
                "kind": "min-version",
                "kind_name": "DaemonSet",
                "namespace": "x",
                "container": "c",
                "value": "latest",
            },
            "value",
            "is not a version",
        ),
        (
            {"kind": "crd-established", "name_of_object": "ippools"},
            "name_of_object",
            "is not '<plural>.<group>'",
        ),
        ({"value": "{{ x }}"}, "value", "without '{{'"),
    ],
)
def test_invalid_gates_name_plugin_gate_and_field(plugin_gates, change, key, message):
    with pytest.raises(PluginError) as err:
        plugin_gates([GateSpec(**{**CP, **change})])
    text = str(err.value)
    assert "plugin 'plug0'" in text and message in text
    assert (
        f"key=gates.{change.get('name', CP['name'])}.{key}" in text
        and "component=gpu-operator" in text
    )


_ROLLOUT = dict(kind="rollout", kind_name="DaemonSet", namespace="x", name_of_object="a")


@pytest.mark.parametrize(
    "change, key, text",
    [
        (
            {"kind": "eventually"},
            "kind",
            "unknown gate kind 'eventually' (allowed: crd-established, min-version, "
            "resource-condition, rollout)",
        ),
        (
            {"name": "Gate_1"},
            "name",
            "gate name 'Gate_1' is not a DNS-1123 label of at most 53 characters (allowed: "
            "lowercase letters, digits and '-')",
        ),
        (
            {"timeout_seconds": "10"},
            "timeout_seconds",
            "timeout '10' is not a positive number of seconds",
        ),
        (
            {"poll_seconds": None},
            "poll_seconds",
            "poll interval None is not a positive number of seconds",
        ),
        (
            {"poll_seconds": 0},
            "poll_seconds",
            "poll interval 0 is not a positive number of seconds",
        ),
        (
            {"kind": "crd-established", "name_of_object": "a.b", "create_timeout_seconds": None},
            "create_timeout_seconds",
            "create timeout None is not positive",
        ),
        (
            {"kind": "crd-established", "name_of_object": "a.b", "create_timeout_seconds": 0},
            "create_timeout_seconds",
            "create timeout 0 is not positive",
        ),
        (
            {"kind": "crd-established", "name_of_object": "Bad.Name"},
            "name_of_object",
            "CRD name 'Bad.Name' is not '<plural>.<group>' (allowed: ippools.nv-ipam.nvidia.com)",
        ),
        ({"namespace": "Bad_NS"}, "namespace", "namespace 'Bad_NS' is not a DNS-1123 label"),
        (
            {"name_of_object": "a\nb"},
            "name_of_object",
            "name_of_object must be one line without '{{'",
        ),
        ({"description": "{{ x }}"}, "description", "description must be one line without '{{'"),
        ({"container": "a\nb"}, "container", "container must be one line without '{{'"),
        (
            {**_ROLLOUT, "kind_name": "StatefulSet"},
            "kind_name",
            "workload kind 'StatefulSet' is not supported (allowed: DaemonSet, Deployment)",
        ),
        (
            {**_ROLLOUT, "name_of_object": None},
            "name_of_object",
            "workload name 'None' is missing or invalid",
        ),
        ({**_ROLLOUT, "namespace": None}, "namespace", "the workload's namespace is required"),
        (
            {**_ROLLOUT, "min_ready": "1"},
            "min_ready",
            "min_ready '1' is not a non-negative integer",
        ),
        ({**_ROLLOUT, "min_ready": -1}, "min_ready", "min_ready -1 is not a non-negative integer"),
        (
            {**_ROLLOUT, "kind": "min-version", "container": None, "value": "1.0"},
            "container",
            "container name 'None' is missing or invalid",
        ),
        (
            {**_ROLLOUT, "kind": "min-version", "container": "c", "value": "latest"},
            "value",
            "minimum version 'latest' is not a version like 0.5.1 (allowed: MAJOR[.MINOR[.PATCH]][-pre])",
        ),
        (
            {"api_version": "nvidia.com"},
            "api_version",
            "api_version 'nvidia.com' is not 'group/version' or 'v1'",
        ),
        (
            {"api_version": "nvidia.com/v1gamma1"},
            "api_version",
            "api_version 'nvidia.com/v1gamma1' is not 'group/version' or 'v1'",
        ),
        (
            {"api_version": "Nvidia.com/v1"},
            "api_version",
            "api_version 'Nvidia.com/v1' is not 'group/version' or 'v1'",
        ),
        (
            {"resource": "ClusterPolicies"},
            "resource",
            "resource 'ClusterPolicies' is not a plural resource name (clusterpolicies)",
        ),
        ({"kind_name": ""}, "kind_name", "kind_name (e.g. ClusterPolicy) is required"),
        (
            {"jsonpath": "{.a}{.b}"},
            "jsonpath",
            "jsonpath '{.a}{.b}' is not one '{.path}' expression (allowed: {.status.state})",
        ),
        ({"value": ""}, "value", "the expected value is empty"),
        (
            {"name_of_object": "cluster_policy"},
            "name_of_object",
            "object name 'cluster_policy' is not a DNS-1123 subdomain",
        ),
    ],
)
def test_an_invalid_gate_is_one_whole_error_line(plugin_gates, change, key, text):
    """Every refusal of a plugin's gate, wrong types included, is the one error line naming the
    cluster file, the gate's field, what is allowed and the fix (a crash would be error[internal])."""
    with pytest.raises(PluginError) as err:
        plugin_gates([GateSpec(**{**CP, **change})])
    name = change.get("name", CP["name"])
    assert err.value.render() == (
        f"error[input] file=tests/lab.yaml cluster=lab component=gpu-operator key=gates.{name}.{key}: "
        f"plugin 'plug0', gate '{name}': {text} fix: fix the GateSpec returned by plugin 'plug0' "
        "from gpucluster_gates"
    )


def test_non_gatespec_results_name_the_plugin(plugin_gates):
    with pytest.raises(PluginError, match="plugin 'plug0' returned dict from gpucluster_gates"):
        plugin_gates([{"name": "x"}])
    with pytest.raises(PluginError, match="plugin 'plug0' returned str from gpucluster_gates"):
        plugin_gates("gate")


def test_network_policy_selects_only_the_gate_pods_and_lets_them_reach_the_api_server():
    chart, values = gates.render_gate_chart(
        lab(),
        gates.validate_gate(GateSpec(**CP), plugin="t", cluster=lab()),
        components(("gpu-operator", "gpu-operator")),
    )
    [policy] = objects(chart, values)["templates/003-networkpolicy.yaml"]
    job = job_of(chart, values)
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()  # the gate's pods are selected ...
    assert (
        "app.kubernetes.io/instance" in selector
    )  # ... and only this gate's (not the operator's pods)
    assert policy["metadata"]["namespace"] == job["metadata"]["namespace"]
    assert (
        policy["spec"]["policyTypes"] == ["Ingress", "Egress"] and policy["spec"]["ingress"] == []
    )
    assert policy["spec"]["egress"] == [
        {"ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}
    ]


@pytest.mark.parametrize(
    "image",
    ["myacr.azurecr.io/kubectl:latest", "myacr.azurecr.io/kubectl:stable", "kubectl:LATEST"],
)
def test_moving_gate_image_tags_are_refused(image):
    with pytest.raises(GpuclusterError, match="moving tag") as info:
        gates.gate_image(lab(settings={"gateImage": image}))
    assert "fix: pin a version and its digest" in info.value.render()


def test_a_digest_pins_even_a_moving_tag():
    image = "myacr.azurecr.io/kubectl:latest@sha256:" + "a" * 64
    assert gates.gate_image(lab(settings={"gateImage": image})) == image


def test_gate_crd_step_and_teardown_charts_come_from_the_one_job_builder():
    """gates, crds and teardown describe their Job (HookJob) and leave the pod, security, image and
    NetworkPolicy to gpucluster.charts.jobchart: none of them writes a Job, pod or ServiceAccount itself."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "gpucluster"
    for module in ("charts/gates.py", "charts/crds.py", "charts/teardown.py"):
        tree = ast.parse((root / module).read_text(encoding="utf-8"))
        kinds = {
            node.values[i].value
            for node in ast.walk(tree)
            if isinstance(node, ast.Dict)
            for i, key in enumerate(node.keys)
            if isinstance(key, ast.Constant)
            and key.value == "kind"
            and isinstance(node.values[i], ast.Constant)
        }
        assert not kinds & {"Job", "ServiceAccount", "ClusterRole", "Role", "NetworkPolicy"}, module
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert "HookJob" in names and "render_job_chart" in names, module


def _collect_with(components_: dict, *results):
    with registered(entry_points=False) as kit:
        for i, result in enumerate(results):
            kit.register(_GatePlugin(result), name=f"plug{i}")
        recipe = Recipe(
            criteria=Criteria(service="aks"), applied_overlays=[], constraints=[], component_refs=[]
        )
        return gates.collect_gates(lab(), recipe, components_)


def test_the_core_gates_names_are_reserved(plugin_gates):
    """A plugin gate named like a gate the core adds (the registry's waitEstablished gates, the
    default ClusterPolicy gate for another condition) is one error line naming the plugin."""
    crds = components(("agentgateway-crds", "agentgateway-system"))
    got = [g.name for g in _collect_with(crds)]
    assert got == [
        "agentgateway-crds-agentgatewayparameters-established",
        "agentgateway-crds-gateways-established",
    ]
    taken = GateSpec(
        name="agentgateway-crds-gateways-established",
        component="agentgateway-crds",
        kind="crd-established",
        name_of_object="gateways.gateway.networking.k8s.io",
    )
    with pytest.raises(PluginError) as err:
        _collect_with(crds, [taken])
    assert err.value.render() == (
        "error[input] file=tests/lab.yaml cluster=lab component=agentgateway-crds "
        "key=gates.agentgateway-crds-gateways-established.name: plugin 'plug0', gate "
        "'agentgateway-crds-gateways-established': gate name 'agentgateway-crds-gateways-established' "
        "is reserved for the registry's waitEstablished gate fix: rename the plugin's gate"
    )
    other = GateSpec(
        **{
            **CP,
            "kind": "rollout",
            "kind_name": "DaemonSet",
            "namespace": "gpu-operator",
            "name_of_object": "nvidia-device-plugin-daemonset",
        }
    )
    with pytest.raises(PluginError) as err:
        plugin_gates([other])
    assert err.value.render() == (
        "error[input] file=tests/lab.yaml cluster=lab component=gpu-operator "
        "key=gates.gpu-operator-clusterpolicy-ready.name: plugin 'plug0', gate "
        "'gpu-operator-clusterpolicy-ready': gate name 'gpu-operator-clusterpolicy-ready' is reserved "
        "for the ClusterPolicy gate but plugin 'plug0' uses it for another condition fix: rename that "
        "gate, or make it the ClusterPolicy gate (gpucluster.sdk.clusterpolicy_ready)"
    )
    # without a plugin's ClusterPolicy gate the core adds its own; with one, only the plugin's
    assert [g.name for g in plugin_gates()] == ["gpu-operator-clusterpolicy-ready"]
    assert [(g.name, g.value) for g in plugin_gates([GateSpec(**{**CP, "name": "mine"})])] == [
        ("mine", "ready")
    ]

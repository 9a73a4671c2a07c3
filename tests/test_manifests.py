"""Manifest charts: catalog templates and plugin manifests rendered into local Helm charts."""

from __future__ import annotations

import contextlib

import pytest
import yaml

from gpucluster.charts import manifests
from gpucluster.errors import GpuclusterError, PluginError
from gpucluster.model import (
    ClusterSpec,
    Component,
    ComponentRef,
    Criteria,
    NodeScheduling,
    Recipe,
    Toleration,
)
from gpucluster.recipes.catalog import CORE_CATALOG_DIR, Catalog
from gpucluster.sdk import Manifest, hookimpl
from gpucluster.sdk.testing import registered
from gpucluster_aks.platform import CATALOG_DIR as AKS_CATALOG_DIR

CATALOG = Catalog(dirs=[CORE_CATALOG_DIR, AKS_CATALOG_DIR], components={}, overlays={}, mixins={})
HARDENING = "components/gpu-operator/manifests/nvidia-toolkit-hardening-aks.yaml.j2"
NETWORK = [
    "components/network-operator/manifests/nfd-network-rule.yaml.j2",
    "components/network-operator/manifests/nic-cluster-policy-aks.yaml.j2",
    "components/network-operator/manifests/nvidia-peermem-reloader.yaml.j2",
]
TUNING = "components/nodewright-customizations/manifests/tuning.yaml.j2"
TRAINER = "components/kubeflow-trainer/manifests/torch-distributed-cluster-training-runtime.yaml.j2"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def cluster(**scheduling) -> ClusterSpec:
    return ClusterSpec(
        name="lab",
        criteria=Criteria(service="aks", accelerator="h100", os="ubuntu", intent="training"),
        scheduling=NodeScheduling(**scheduling),
        source="tests/lab.yaml",
    )


def comp(name, namespace, files, values, *, type_="Helm", pre=(), version="1.2.3"):
    return Component(
        ref=ComponentRef(
            name=name,
            type=type_,
            namespace=namespace,
            chart=name if type_ == "Helm" else "",
            version=version if type_ == "Helm" else "",
            manifest_files=list(files),
            pre_manifest_files=list(pre),
        ),
        values=values,
    )


def stack(*, toolkit=False, tuning=False, nodewright_values=None, **extra):
    nw = {
        "service": "aks",
        "accelerator": "h100",
        "intent": "multiNodeTraining",
        "tuningEnabled": tuning,
        "acceleratedTolerations": [GPU_TOLERATION],
    }
    nw.update(nodewright_values or {})
    comps = {
        "network-operator": comp(
            "network-operator", "nvidia-network-operator", NETWORK, {}, version="26.4.1"
        ),
        "nodewright-customizations": comp(
            "nodewright-customizations",
            "nodewright",
            [TUNING],
            {k: v for k, v in nw.items() if v is not None},
            type_="Manifest",
        ),
        "gpu-operator": comp(
            "gpu-operator", "gpu-operator", [HARDENING], {"toolkit": {"enabled": toolkit}}
        ),
    }
    comps.update(extra)
    return comps


def render(components, cl=None):
    cl = cl or cluster()
    recipe = Recipe(
        criteria=cl.criteria,
        applied_overlays=["test"],
        constraints=[],
        component_refs=[c.ref for c in components.values()],
    )
    return manifests.render_manifest_charts(cl, recipe, components, CATALOG)


def objects(chart):
    return [
        d
        for path, text in sorted(chart.files.items())
        if path.startswith("templates/")
        for d in yaml.safe_load_all(text)
        if d
    ]


def test_charts_per_component_and_phase():
    charts = render(stack())
    assert sorted(charts) == [
        ("gpu-operator", "post"),
        ("network-operator", "post"),
        ("nodewright-customizations", "post"),
    ]
    net = charts[("network-operator", "post")]
    assert net.name == "network-operator-manifests"
    assert sorted(net.files) == [
        "Chart.yaml",
        "templates/000-nfd-network-rule.yaml",
        "templates/001-nic-cluster-policy-aks.yaml",
        "templates/002-nvidia-peermem-reloader.yaml",
    ]
    meta = yaml.safe_load(net.files["Chart.yaml"])
    assert meta == {
        "apiVersion": "v2",
        "name": "network-operator-manifests",
        "type": "application",
        "version": "1.0.0",
        "appVersion": "26.4.1",
        "description": "gpucluster post-manifests of network-operator (installed after its chart)",
    }
    assert [(d["kind"], d["metadata"]["name"]) for d in objects(net)] == [
        ("NodeFeatureRule", "nfd-network-rule"),
        ("NicClusterPolicy", "nic-cluster-policy"),
        ("DaemonSet", "nvidia-peermem-reloader"),
    ]
    assert net.content_hash == manifests.content_hash(net.files)


def test_pre_manifests_get_their_own_chart():
    comps = {
        "gpu-operator": comp(
            "gpu-operator", "gpu-operator", [], {"toolkit": {"enabled": False}}, pre=[HARDENING]
        )
    }
    charts = render(comps)
    assert list(charts) == [("gpu-operator", "pre")]
    assert charts[("gpu-operator", "pre")].name == "gpu-operator-pre"


@pytest.mark.parametrize(
    "enabled, rendered",
    [(False, True), ("false", True), (True, False), ("true", False), (None, False)],
)
def test_toolkit_hardening_only_when_toolkit_is_explicitly_off(enabled, rendered):
    comps = stack()
    comps["gpu-operator"].values = {} if enabled is None else {"toolkit": {"enabled": enabled}}
    charts = render(comps)
    assert (
        ("gpu-operator", "post") in charts
    ) is rendered  # a template rendering to nothing adds no file
    if rendered:
        [ds] = objects(charts[("gpu-operator", "post")])
        assert ds["metadata"] == {
            "name": "nvidia-toolkit-hardening",
            "namespace": "gpu-operator",
            "labels": {
                "app.kubernetes.io/name": "nvidia-toolkit-hardening",
                "app.kubernetes.io/part-of": "gpucluster",
            },
        }
        container = ds["spec"]["template"]["spec"]["containers"][0]
        assert (
            "--set accept-nvidia-visible-devices-envvar-when-unprivileged=false"
            in container["command"][2]
        )
        assert (
            "--set accept-nvidia-visible-devices-as-volume-mounts=true" in container["command"][2]
        )
        assert container["readinessProbe"]["exec"]["command"] == ["test", "-f", "/tmp/hardened"]


def test_peermem_reloader_targets_infiniband_nodes_in_the_component_namespace():
    net = objects(render(stack())[("network-operator", "post")])
    ds = net[2]
    assert ds["metadata"]["namespace"] == "nvidia-network-operator"
    terms = ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "feature.node.kubernetes.io/pci-15b3.present", "operator": "In", "values": ["true"]}
    ]
    assert (
        "readinessProbe" not in ds["spec"]["template"]["spec"]["containers"][0]
    )  # Ready at once (AICR AKS GPU Setup guide)
    rule = net[0]["spec"]["rules"][0]
    assert rule["labels"] == {"feature.node.kubernetes.io/pci-15b3.present": "true"}
    assert rule["matchFeatures"][0]["matchExpressions"]["device"]["value"] == ["101c", "101e"]


def test_skyhook_tuning_off_chains_setup_full_off_the_kernel_package():
    [sky] = objects(render(stack())[("nodewright-customizations", "post")])
    assert sky["apiVersion"] == "skyhook.nvidia.com/v1alpha1" and sky["kind"] == "Skyhook"
    assert "namespace" not in sky["metadata"]  # cluster-scoped
    assert list(sky["spec"]["packages"]) == ["nvidia-setup-kernel", "nvidia-setup-full"]
    assert sky["spec"]["packages"]["nvidia-setup-full"]["dependsOn"] == {
        "nvidia-setup-kernel": "0.7.0"
    }
    assert sky["spec"]["additionalTolerations"] == [GPU_TOLERATION]
    assert sky["spec"]["autoTaintNewNodes"] is True
    assert "nodeSelectors" not in sky["spec"] and "podNonInterruptLabels" not in sky["spec"]


def test_skyhook_tuning_on_adds_nvidia_tuned():
    values = {
        "acceleratedNodeSelector": {"nvidia.com/gpu.present": "true"},
        "workloadSelector": {"app": "train"},
        "autoTaintNewNodes": "false",
    }
    [sky] = objects(
        render(stack(tuning=True, nodewright_values=values))[("nodewright-customizations", "post")]
    )
    packages = sky["spec"]["packages"]
    assert list(packages) == ["nvidia-setup-kernel", "nvidia-tuned", "nvidia-setup-full"]
    assert packages["nvidia-tuned"]["configMap"] == {
        "intent": "multiNodeTraining",
        "accelerator": "h100",
        "service": "aks",
    }
    assert packages["nvidia-tuned"]["dependsOn"] == {"nvidia-setup-kernel": "0.7.0"}
    assert packages["nvidia-setup-full"]["dependsOn"] == {"nvidia-tuned": "0.10.0"}
    assert sky["spec"]["nodeSelectors"] == {"matchLabels": {"nvidia.com/gpu.present": "true"}}
    assert sky["spec"]["podNonInterruptLabels"] == {"matchLabels": {"app": "train"}}
    assert sky["spec"]["autoTaintNewNodes"] is False


def test_skyhook_falls_back_to_cluster_tolerations_and_fails_without_any():
    comps = stack(nodewright_values={"acceleratedTolerations": None})
    cl = cluster(
        accelerated_tolerations=[
            Toleration(key="sku", operator="Equal", value="gpu", effect="NoSchedule")
        ]
    )
    [sky] = objects(render(comps, cl)[("nodewright-customizations", "post")])
    assert sky["spec"]["additionalTolerations"] == [
        {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    ]
    with pytest.raises(GpuclusterError) as err:
        render(stack(nodewright_values={"acceleratedTolerations": None}))
    text = str(err.value)
    assert (
        f"file={TUNING}" in text
        and "component=nodewright-customizations" in text
        and "cluster=lab" in text
    )
    assert "needs accelerated tolerations" in text


def test_undefined_values_name_the_template():
    with pytest.raises(GpuclusterError) as err:
        render(stack(nodewright_values={"accelerator": None}))
    text = str(err.value)
    assert "undefined value" in text and "'accelerator'" in text and f"file={TUNING}" in text


@pytest.mark.parametrize(
    ("version", "rdma"),
    [
        ("26.4.1", "network-operator-v26.4.1"),
        ("v26.4.0", "network-operator-v26.4.1"),
        ("25.1.0", "v1.5.2"),
    ],
)
def test_the_aks_nicclusterpolicy_follows_the_network_operator_version(version, rdma):
    net = comp("network-operator", "nvidia-network-operator", NETWORK, {}, version=version)
    docs = objects(render({"network-operator": net})[("network-operator", "post")])
    (policy,) = [d for d in docs if d["kind"] == "NicClusterPolicy"]
    assert policy["spec"]["rdmaSharedDevicePlugin"]["version"] == rdma


def test_the_aks_nicclusterpolicy_of_an_unknown_network_operator_is_refused_with_a_fix():
    net = comp("network-operator", "nvidia-network-operator", NETWORK, {}, version="25.10.0")
    with pytest.raises(GpuclusterError) as err:
        render({"network-operator": net})
    text = str(err.value)
    assert "known for network-operator 26.4 and 25.1, not 25.10.0" in text
    assert "pin network-operator 26.4.1" in text and "\n" not in text.strip()


def test_training_runtime_carries_accelerated_scheduling():
    trainer = comp(
        "kubeflow-trainer",
        "kubeflow",
        [TRAINER],
        {"acceleratedNodeSelector": {"pool": "gpu"}, "acceleratedTolerations": [GPU_TOLERATION]},
    )
    [ctr] = objects(render({"kubeflow-trainer": trainer})[("kubeflow-trainer", "post")])
    pod = ctr["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]
    assert pod["nodeSelector"] == {"pool": "gpu"} and pod["tolerations"] == [GPU_TOLERATION]
    assert pod["containers"][0]["image"].startswith(
        "pytorch/pytorch:2.11.0-cuda12.8-cudnn9-runtime@sha256:"
    )
    bare = comp("kubeflow-trainer", "kubeflow", [TRAINER], {})
    [ctr] = objects(render({"kubeflow-trainer": bare})[("kubeflow-trainer", "post")])
    pod = ctr["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]
    assert "nodeSelector" not in pod and "tolerations" not in pod


def test_output_is_deterministic_and_content_addressed():
    a, b = render(stack()), render(stack())
    assert {k: (c.files, c.content_hash) for k, c in a.items()} == {
        k: (c.files, c.content_hash) for k, c in b.items()
    }
    changed = render(stack(nodewright_values={"intent": "inference", "tuningEnabled": True}))
    assert (
        changed[("nodewright-customizations", "post")].content_hash
        != a[("nodewright-customizations", "post")].content_hash
    )
    assert (
        changed[("network-operator", "post")].content_hash
        == a[("network-operator", "post")].content_hash
    )


def test_no_helm_template_syntax_and_no_absolute_paths():
    for chart in render(
        stack(nodewright_values={"workloadSelector": {"note": "{{ not a template }}"}})
    ).values():
        for path, text in chart.files.items():
            assert not path.startswith("/") and ".." not in path.split("/")
            assert "{{" not in text
            assert str(CORE_CATALOG_DIR.parent.parent) not in text


def test_dump_escapes_braces_and_quotes_number_like_strings():
    text = manifests.dump_documents(
        [
            {
                "a": "x {{ .Values.y }} z",
                "b": "101e",
                "c": "0.7.0",
                "d": "yes",
                "e": 3,
                "f": "line1\nline2\n",
                "g": "plain",
            }
        ]
    )
    assert "{{" not in text
    assert yaml.safe_load(text) == {
        "a": "x {{ .Values.y }} z",
        "b": "101e",
        "c": "0.7.0",
        "d": "yes",
        "e": 3,
        "f": "line1\nline2\n",
        "g": "plain",
    }
    assert "b: '101e'" in text and "c: '0.7.0'" in text and "e: 3" in text and "g: plain" in text
    assert "f: |\n  line1\n  line2\n" in text


def test_template_syntax_and_yaml_errors_name_the_file():
    with pytest.raises(GpuclusterError, match=r"file=x\.yaml\.j2.*syntax error on line 1"):
        manifests.render_template("{% if %}", {}, source="x.yaml.j2", cluster="lab", component="c")
    with pytest.raises(GpuclusterError, match=r"did not render to valid YAML"):
        manifests.render_template("a: [", {}, source="x.yaml.j2", cluster="lab", component="c")
    with pytest.raises(GpuclusterError, match=r"has no metadata.name"):
        manifests.render_template(
            "apiVersion: v1\nkind: ConfigMap\n",
            {},
            source="x.yaml.j2",
            cluster="lab",
            component="c",
        )


# --------------------------------------------------------------------------- plugin manifests


class _Plugin:
    def __init__(self, result):
        self.result = result

    @hookimpl
    def gpucluster_manifests(self, cluster, recipe, components):
        return self.result


@pytest.fixture
def plugin_manager():
    with contextlib.ExitStack() as stack:

        def install(result, name="testplug"):
            kit = stack.enter_context(registered(entry_points=False))
            kit.register(_Plugin(result), name=name)
            return kit.pm

        yield install


def cm(name, ns="gpu-operator", annotations=None):
    meta = {"name": name, "namespace": ns}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def test_plugin_manifests_join_the_component_charts(plugin_manager):
    plugin_manager(
        [
            Manifest(
                component="gpu-operator",
                phase="pre",
                name="kernel-module-params",
                documents=[cm("kernel-module-params")],
            ),
            Manifest(component="gpu-operator", phase="post", name="extra", documents=[cm("extra")]),
            Manifest(
                component="not-in-recipe", phase="post", name="dropped", documents=[cm("dropped")]
            ),
        ]
    )
    charts = render(stack())
    assert sorted(charts[("gpu-operator", "pre")].files) == [
        "Chart.yaml",
        "templates/000-kernel-module-params.yaml",
    ]
    assert sorted(charts[("gpu-operator", "post")].files) == [
        "Chart.yaml",
        "templates/000-nvidia-toolkit-hardening-aks.yaml",
        "templates/001-extra.yaml",
    ]
    assert all("dropped" not in t for c in charts.values() for t in c.files.values())


def test_plugin_install_hooks_are_refused_delete_hooks_allowed(plugin_manager):
    plugin_manager(
        [
            Manifest(
                component="gpu-operator",
                phase="post",
                name="wait",
                documents=[cm("wait", annotations={"helm.sh/hook": "post-delete"})],
            )
        ]
    )
    assert ("gpu-operator", "post") in render(stack())
    plugin_manager(
        [
            Manifest(
                component="gpu-operator",
                phase="post",
                name="late",
                documents=[cm("late", annotations={"helm.sh/hook": "post-install,post-upgrade"})],
            )
        ]
    )
    with pytest.raises(GpuclusterError) as err:
        render(stack())
    assert "file=plugin testplug" in str(
        err.value
    ) and "is a Helm 'post-install,post-upgrade' hook" in str(err.value)


@pytest.mark.parametrize(
    "result, message",
    [
        ({"not": "a list"}, "plugin 'testplug' returned dict from gpucluster_manifests"),
        ([{"apiVersion": "v1"}], "plugin 'testplug' returned dict from gpucluster_manifests"),
        (
            [Manifest(component="gpu-operator", phase="during", name="x", documents=[])],
            "has phase 'during'",
        ),
        (
            [Manifest(component="gpu-operator", phase="post", name="Bad_Name", documents=[])],
            "is not a DNS-1123 label",
        ),
    ],
)
def test_invalid_plugin_manifests_name_the_plugin(plugin_manager, result, message):
    plugin_manager(result)
    with pytest.raises(PluginError, match=message):
        render(stack())


def test_an_object_rendered_twice_is_refused(plugin_manager):
    plugin_manager(
        [
            Manifest(
                component="network-operator",
                phase="post",
                name="ncp",
                documents=[
                    {
                        "apiVersion": "mellanox.com/v1alpha1",
                        "kind": "NicClusterPolicy",
                        "metadata": {"name": "nic-cluster-policy"},
                        "spec": {},
                    }
                ],
            )
        ]
    )
    with pytest.raises(
        GpuclusterError, match="NicClusterPolicy 'nic-cluster-policy' is rendered twice"
    ):
        render(stack())

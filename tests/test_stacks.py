"""Stacks assembled from hand-built RuntimePlans: names, release graph, providers, backends."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from plan_factory import make_plan

from gpucluster.errors import GpuclusterError
from gpucluster.model import ExistingCluster, NodeScheduling, Toleration
from gpucluster.sdk import Platform, hookimpl
from gpucluster.sdk.testing import registered
from gpucluster_cdk import stacks

ROOT = Path(__file__).resolve().parents[1]


def load(outdir: Path, stack: str) -> dict:
    return json.loads((outdir / "stacks" / stack / "cdk.tf.json").read_text())


@pytest.fixture(scope="module")
def plans():
    return [
        make_plan("lab"),
        make_plan(
            "edge", existing=ExistingCluster(kubeconfig_path="~/.kube/edge", context="edge-admin")
        ),
    ]


@pytest.fixture(scope="module")
def outdir(plans, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "cdktf.out"
    assert stacks.synth(plans, out) == ["edge-runtime", "lab-cluster", "lab-runtime"]
    return out


def test_stack_per_cluster_and_runtime_depends_on_cluster_stack(outdir):
    manifest = json.loads((outdir / "manifest.json").read_text())
    assert sorted(manifest["stacks"]) == ["edge-runtime", "lab-cluster", "lab-runtime"]
    assert manifest["stacks"]["lab-runtime"]["dependencies"] == ["lab-cluster"]
    assert manifest["stacks"]["edge-runtime"]["dependencies"] == []


def test_one_release_per_plan_node_with_plan_edges(outdir, plans):
    for plan, stack in ((plans[0], "lab-runtime"), (plans[1], "edge-runtime")):
        releases = load(outdir, stack)["resource"]["helm_release"]
        assert sorted(releases) == sorted(n.id for n in plan.nodes)
        for node in plan.nodes:
            rel = releases[node.id]
            assert sorted(rel.get("depends_on", [])) == [
                f"helm_release.{d}" for d in node.depends_on
            ]
            assert rel["name"] == node.id and rel["namespace"] == node.namespace
            assert rel["wait_for_jobs"] is node.wait_for_jobs
            assert rel["timeout"] == node.timeout_seconds
            if node.kind == "chart":
                assert (rel["repository"], rel["chart"], rel["version"]) == (
                    node.repository,
                    node.chart,
                    node.version,
                )
            else:
                shipped = outdir / "stacks" / stack / rel["chart"]
                assert (shipped / "Chart.yaml").read_text() == node.local_chart.files["Chart.yaml"]


def test_runtime_helm_provider_uses_cluster_stack_outputs(outdir):
    runtime = load(outdir, "lab-runtime")
    (remote,) = runtime["data"]["terraform_remote_state"].values()
    assert remote["backend"] == "local"
    assert remote["config"]["path"] == "../../../terraform.lab-cluster.tfstate"
    (provider,) = runtime["provider"]["helm"]
    kube = provider["kubernetes"]
    assert kube["host"].startswith(
        "${data.terraform_remote_state.cross-stack-reference-input-lab-cluster.outputs."
    )
    assert kube["cluster_ca_certificate"].startswith(
        "${base64decode(data.terraform_remote_state.cross-stack-reference-input-lab-cluster"
    )
    # Entra ID, no local accounts: kubelogin runs on the Terraform machine; no credential crosses stacks
    assert kube["exec"] == {
        "api_version": "client.authentication.k8s.io/v1beta1",
        "command": "kubelogin",
        "args": [
            "get-token",
            "--login",
            "azurecli",
            "--server-id",
            "6dae42f8-4368-4678-94ff-3960e28e3630",
        ],
    }
    assert not {"client_certificate", "client_key", "token"} & set(kube)
    cluster = load(outdir, "lab-cluster")
    cross = {k: v for k, v in cluster["output"].items() if k.startswith("cross-stack-output-")}
    assert sorted(k.rsplit("0", 1)[1] for k in cross) == ["cluster_ca_certificate", "host"]
    assert all(".kube_config[0]." in v["value"] for v in cross.values())
    assert not any(
        word in json.dumps(cluster["output"])
        for word in ("client_key", "client_certificate", "kube_admin_config", "password")
    )
    referenced = {
        v.split(".outputs.", 1)[1].rstrip("})")
        for v in (kube["host"], kube["cluster_ca_certificate"])
    }
    assert referenced == set(cross)


def test_existing_cluster_runtime_uses_kubeconfig_variables(outdir):
    runtime = load(outdir, "edge-runtime")
    assert not (outdir / "stacks" / "edge-cluster").exists()
    assert runtime["variable"]["kubeconfig_path"]["default"] == "~/.kube/edge"
    assert runtime["variable"]["kube_context"]["default"] == "edge-admin"
    (provider,) = runtime["provider"]["helm"]
    assert provider["kubernetes"] == {
        "config_path": "${var.kubeconfig_path}",
        "config_context": '${var.kube_context == "" ? null : var.kube_context}',
    }
    assert "data" not in runtime


def test_every_stack_has_a_relative_local_backend(outdir):
    for stack in ("lab-cluster", "lab-runtime", "edge-runtime"):
        assert load(outdir, stack)["terraform"]["backend"] == {
            "local": {"path": f"../../../terraform.{stack}.tfstate"}
        }


def test_cluster_stack_built_by_aks_plugin(outdir):
    cluster = load(outdir, "lab-cluster")
    (pool,) = cluster["resource"]["azurerm_kubernetes_cluster_node_pool"].values()
    assert pool["gpu_driver"] == "Install" and pool["vm_size"] == "Standard_ND96isr_H100_v5"
    (aks,) = cluster["resource"]["azurerm_kubernetes_cluster"].values()
    assert aks["name"] == "lab" and aks["default_node_pool"]["name"] == "system"
    assert "helm_release" not in cluster.get("resource", {})


def test_aks_cluster_props_mapping():
    from gpucluster_aks.cluster import cluster_props

    plan = make_plan("lab", gpu_stack="operator-managed")
    plan.cluster.scheduling = NodeScheduling(
        accelerated_node_selector={
            "nodepool-role": "gpu",
            "kubernetes.azure.com/accelerator": "nvidia",
        },
        accelerated_tolerations=[Toleration(key="nvidia.com/gpu", effect="NoSchedule")],
        system_node_selector={"nodepool-role": "system"},
    )
    props = cluster_props(plan.cluster)
    assert props.location == "eastus" and props.resource_group_name == "lab-rg"
    assert props.system_pool.name == "system" and props.system_pool.labels == {
        "nodepool-role": "system"
    }
    assert props.system_pool.temporary_name_for_rotation == "systemtmp"
    (gpu,) = props.pools
    assert gpu.gpu_driver == "None"
    assert gpu.labels == {
        "nodepool-role": "gpu"
    }  # AKS-reserved kubernetes.azure.com/ label left to AKS
    assert gpu.taints == ("nvidia.com/gpu=present:NoSchedule",)


@pytest.fixture
def fake_platform():
    """Register a throw-away platform plugin ``fakecloud`` (provisions clusters) for one test."""
    with registered() as kit:

        def register(cluster_stack=None):
            plugin = types.ModuleType("gpucluster_test_fakecloud")

            @hookimpl
            def gpucluster_platforms():
                return [Platform(service="fakecloud", display_name="Fake", provisions_cluster=True)]

            plugin.gpucluster_platforms = gpucluster_platforms
            if cluster_stack is not None:
                plugin.gpucluster_cluster_stack = hookimpl(cluster_stack)
            kit.register(plugin)

        yield register


def test_platform_that_provisions_without_cluster_hook_is_an_input_error(tmp_path, fake_platform):
    fake_platform()
    with pytest.raises(GpuclusterError) as info:
        stacks.build_app(
            [make_plan("fake", service="fakecloud")],
            tmp_path / "out",
            staging_dir=tmp_path / "staging",
        )
    text = info.value.render()
    assert "cluster=fake" in text and "no plugin built the cluster stack" in text
    assert "file=tests/plan_factory.py" in text


def test_provisioning_platform_without_cluster_hook_names_the_recipe_file_of_a_recipe_cluster(
    tmp_path, fake_platform
):
    """A cluster given by ``recipe:`` has no ``criteria`` in the cluster file: the error names the
    RecipeResult and its own key, not ``clusters[<i>].criteria.service`` of the cluster file."""
    fake_platform()
    plan = make_plan("fake", service="fakecloud")
    plan.cluster = dataclasses.replace(plan.cluster, index=1, recipe_file=str(tmp_path / "rr.yaml"))
    with pytest.raises(GpuclusterError) as info:
        stacks.build_app([plan], tmp_path / "out", staging_dir=tmp_path / "staging")
    text = info.value.render()
    assert "no plugin built the cluster stack" in text
    assert "rr.yaml" in text and "key=criteria.service" in text and "clusters[1]" not in text


def test_provisioning_platform_without_cluster_hook_names_the_absolute_key(tmp_path, fake_platform):
    fake_platform()
    plan = make_plan("fake", service="fakecloud")
    plan.cluster = dataclasses.replace(plan.cluster, index=2)
    with pytest.raises(GpuclusterError) as info:
        stacks.build_app([plan], tmp_path / "out", staging_dir=tmp_path / "staging")
    assert "key=clusters[2].criteria.service" in info.value.render()


def test_cluster_hook_returning_no_connection_is_an_input_error(tmp_path, fake_platform):
    def gpucluster_cluster_stack(scope, cluster, recipe):
        return {"host": "https://example"} if cluster.criteria.service == "fakecloud" else None

    fake_platform(gpucluster_cluster_stack)
    with pytest.raises(GpuclusterError, match="returned dict without a host or kubeconfig_path"):
        stacks.build_app(
            [make_plan("fake", service="fakecloud")],
            tmp_path / "out",
            staging_dir=tmp_path / "staging",
        )


def test_cluster_hook_with_kubeconfig_connection_feeds_runtime_variables(tmp_path, fake_platform):
    from gpucluster.sdk import ClusterConnection

    def gpucluster_cluster_stack(scope, cluster, recipe):
        if cluster.criteria.service != "fakecloud":
            return None
        return ClusterConnection(kubeconfig_path="~/.kube/fake", context="fake-admin")

    fake_platform(gpucluster_cluster_stack)
    out = tmp_path / "cdktf.out"
    assert stacks.synth([make_plan("fake", service="fakecloud")], out) == [
        "fake-cluster",
        "fake-runtime",
    ]
    runtime = load(out, "fake-runtime")
    assert runtime["variable"]["kubeconfig_path"]["default"] == "~/.kube/fake"
    assert runtime["variable"]["kube_context"]["default"] == "fake-admin"


def test_failed_synth_keeps_previous_output(tmp_path, plans):
    out = tmp_path / "cdktf.out"
    stacks.synth(plans[1:], out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = make_plan("bad")
    bad.nodes[0].version = "^1.0"  # unpinned: the HelmComponent validation fails at synth
    with pytest.raises(GpuclusterError) as info:
        stacks.synth([bad], out)
    assert info.value.render() == (
        "error[construct] cluster=bad component=cert-manager: [bad-runtime/cert-manager] chart version '^1.0' of "
        "release 'cert-manager' must be one exact version (e.g. v26.7.1 or 0.19.0), not a range or empty"
        " fix: change the value the message names in the cluster file (or its overrides); `gpucluster plan` shows "
        "the resolved releases"
    )
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdktf.out"]


def test_runtime_only_app_does_not_import_azurerm(tmp_path):
    code = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "from plan_factory import make_plan\n"
        "from gpucluster.model import ExistingCluster\n"
        "from gpucluster_cdk import stacks\n"
        f"stacks.synth([make_plan('edge', existing=ExistingCluster())], {str(tmp_path / 'out')!r})\n"
        "print(sorted(m for m in sys.modules if '_provider_' in m))\n"
    )
    env = dict(
        os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20", GPUCLUSTER_SYNTH_CACHE="off"
    )  # built here
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    loaded = result.stdout.strip().splitlines()[-1]
    assert "_provider_helm" in loaded and "azurerm" not in loaded
    assert (tmp_path / "out" / "stacks" / "edge-runtime" / "cdk.tf.json").is_file()


def test_main_prints_findings_and_writes_output(tmp_path, monkeypatch, capsys, plans):
    import main
    from gpucluster import pipeline
    from gpucluster.inputs import config
    from gpucluster.model import Finding

    plan = make_plan("warned", existing=ExistingCluster())
    plan.findings = [
        Finding(
            id="GPU-TEST",
            severity="warning",
            cluster="warned",
            component="gpu-operator",
            key="driver.version",
            message="example warning",
            fix="none needed",
        )
    ]
    monkeypatch.setattr(config, "load_clusters", lambda *a, **k: [plan.cluster])
    monkeypatch.setattr(pipeline, "build_plans", lambda clusters: [plan])
    monkeypatch.setenv("CDKTF_OUTDIR", str(tmp_path / "cdktf.out"))
    monkeypatch.delenv("CDKTF_CONTINUE_SYNTH_ON_ERROR_ANNOTATIONS", raising=False)
    assert main.main([]) == 0
    err = capsys.readouterr().err
    assert (
        "warning[GPU-TEST] cluster=warned component=gpu-operator key=driver.version: example warning"
        in err
    )
    assert (tmp_path / "cdktf.out" / "stacks" / "warned-runtime" / "cdk.tf.json").is_file()


def _prepared_props(cluster):
    """The AKS plugin's prepare (where every AKS input error is raised), then the props mapping."""
    from gpucluster_aks.cluster import cluster_props
    from gpucluster_aks.platform import gpucluster_prepare_cluster

    return cluster_props(gpucluster_prepare_cluster(cluster))


def test_aks_system_pool_taints_other_than_critical_addons_are_an_input_error():
    from gpucluster.model import Taint

    plan = make_plan("lab")
    plan.cluster.pools[0].taints = [Taint("CriticalAddonsOnly", "true", "NoSchedule")]
    plan.cluster.scheduling = NodeScheduling(
        system_tolerations=[Toleration(key="CriticalAddonsOnly", operator="Exists")]
    )
    system = _prepared_props(plan.cluster).system_pool
    assert system.only_critical_addons and system.taints == ()
    plan.cluster.pools[0].taints.append(Taint("dedicated", "infra", "NoSchedule"))
    with pytest.raises(GpuclusterError) as info:
        _prepared_props(plan.cluster)
    assert info.value.render() == (
        "error[input] file=tests/plan_factory.py cluster=lab key=pools[0].taints: the AKS system pool 'system' "
        "cannot carry taint dedicated=infra:NoSchedule: azurerm 4.x sets only CriticalAddonsOnly=true:NoSchedule "
        "on the default node pool (only_critical_addons_enabled) "
        "(allowed: CriticalAddonsOnly=true:NoSchedule) "
        "fix: remove the taint, or put the workloads that need it on a separate pool with gpu: false"
    )


def test_main_reports_construct_validation_errors_in_one_line_each_and_exits_2(
    tmp_path, monkeypatch, capsys
):
    import main
    from gpucluster import pipeline
    from gpucluster.inputs import config

    plan = make_plan("bad", existing=ExistingCluster())
    plan.nodes[0].version = "^1.0"
    plan.nodes[1].namespace = "Not A Namespace"
    monkeypatch.setattr(config, "load_clusters", lambda *a, **k: [plan.cluster])
    monkeypatch.setattr(pipeline, "build_plans", lambda clusters: [plan])
    out = tmp_path / "cdktf.out"
    monkeypatch.setenv("CDKTF_OUTDIR", str(out))
    monkeypatch.delenv("CDKTF_CONTINUE_SYNTH_ON_ERROR_ANNOTATIONS", raising=False)
    assert main.main([]) == 2
    err = [
        line
        for line in capsys.readouterr().err.splitlines()
        if not line.startswith("info[input.default]")
    ]
    fix = (
        " fix: change the value the message names in the cluster file (or its overrides); `gpucluster plan` shows "
        "the resolved releases"
    )
    assert err == [
        "error[construct] cluster=bad component=cert-manager: [bad-runtime/cert-manager] chart version '^1.0' of "
        "release 'cert-manager' must be one exact version (e.g. v26.7.1 or 0.19.0), not a range or empty"
        + fix,
        "error[construct] cluster=bad component=gpu-operator: [bad-runtime/gpu-operator] namespace 'Not A Namespace' "
        "of release 'gpu-operator' must be a DNS-1123 label" + fix,
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written, no staged folder


@pytest.mark.parametrize(
    "key", ["kubernetes.azure.com/scalesetpriority", "node-role.kubernetes.io/gpu", "k8s.io/team"]
)
def test_aks_pool_labels_in_reserved_namespaces_are_an_input_error_not_dropped(key):
    plan = make_plan("lab")
    plan.cluster.pools[1].labels = {"team": "ml", key: "x"}
    with pytest.raises(GpuclusterError) as info:
        _prepared_props(plan.cluster)
    assert info.value.render() == (
        f"error[input] file=tests/plan_factory.py cluster=lab key=pools[1].labels.{key}: label '{key}' of pool 'gpu' is "
        "in a namespace AKS reserves for the labels it sets itself (kubernetes.azure.com/, kubernetes.io/, k8s.io/); "
        "AKS refuses it as a node label fix: use a label of your own (e.g. example.com/role); to select on labels AKS "
        "sets (kubernetes.azure.com/agentpool, kubernetes.azure.com/accelerator), use scheduling node selectors"
    )


def test_aks_critical_addons_system_taint_needs_a_system_toleration_or_another_cpu_pool():
    # With the only CPU pool tainted CriticalAddonsOnly and GPU pools tainted nvidia.com/gpu,
    # operators and readiness gates without that toleration would stay Pending until Helm times out.
    from gpucluster.model import NodePool, Taint

    plan = make_plan("lab")
    plan.cluster.pools[0].taints = [Taint("CriticalAddonsOnly", "true", "NoSchedule")]
    with pytest.raises(GpuclusterError) as info:
        _prepared_props(plan.cluster)
    assert info.value.render() == (
        "error[input] file=tests/plan_factory.py cluster=lab key=pools[0].taints: the system pool 'system' is tainted "
        "CriticalAddonsOnly=true:NoSchedule, no other pool without taints runs non-GPU pods, and no "
        "scheduling.system.tolerations tolerates the taint: operators and readiness gates would stay Pending "
        "fix: add 'CriticalAddonsOnly:NoSchedule' to scheduling.system.tolerations, or add a pool with gpu: false "
        "and no taints"
    )
    plan.cluster.scheduling = NodeScheduling(
        system_tolerations=[Toleration(key="CriticalAddonsOnly", effect="NoSchedule")]
    )
    assert _prepared_props(plan.cluster).system_pool.only_critical_addons
    plan.cluster.scheduling = NodeScheduling()
    plan.cluster.pools.append(
        NodePool(name="cpu", vm_size="Standard_D16s_v5", node_count=2, gpu=False)
    )
    assert _prepared_props(plan.cluster).system_pool.only_critical_addons

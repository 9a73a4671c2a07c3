"""AksGpuCluster: renders exactly what its props say; props-level validation; upgrade check.

The AKS decisions (defaults, GPU taint, gpu_driver per gpuStack, pool rules) are the plugin's and
are tested in test_aks_platform.py / test_aks_plan_synth_agree.py; the props here are test data.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from gpucluster_cdk.constructs_lib import (
    AksGpuCluster,
    AksGpuClusterProps,
    NodePoolProps,
    validate_props,
)
from gpucluster_cdk.constructs_lib.aks import upgrade_skip_condition
from gpucluster_cdk.constructs_lib.cdk import AZURERM_PROVIDER_VERSION, TerraformStack
from gpucluster_cdk.constructs_lib.cdk import Testing as CdkTesting

SYSTEM = NodePoolProps(
    name="system", vm_size="Standard_D8s_v5", node_count=2, temporary_name_for_rotation="systemtmp"
)
GPU = NodePoolProps(
    name="gpu",
    vm_size="Standard_ND96isr_H100_v5",
    gpu_driver="Install",
    taints=("nvidia.com/gpu=present:NoSchedule",),
    labels={"nvidia.com/gpu.present": "true"},
)


def props(**kwargs) -> AksGpuClusterProps:
    base = dict(
        name="h100",
        location="westus3",
        kubernetes_version="1.34",
        resource_group_name="h100-rg",
        system_pool=SYSTEM,
        pools=(GPU,),
    )
    return AksGpuClusterProps(**{**base, **kwargs})


def synth(p: AksGpuClusterProps) -> dict:
    stack = TerraformStack(CdkTesting.app(), "stack")
    AksGpuCluster(stack, "aks", p)
    return json.loads(CdkTesting.synth(stack, True))


def only(doc: dict, rtype: str) -> dict:
    (value,) = doc["resource"][rtype].values()
    return value


@pytest.fixture(scope="module")
def default_doc() -> dict:
    return synth(props())


def test_cluster_renders_its_props(default_doc):
    rg = only(default_doc, "azurerm_resource_group")
    assert rg == {"location": "westus3", "name": "h100-rg"}
    aks = only(default_doc, "azurerm_kubernetes_cluster")
    assert aks["kubernetes_version"] == "1.34"
    assert aks["oidc_issuer_enabled"] is True and aks["workload_identity_enabled"] is True
    assert aks["identity"] == {"type": "SystemAssigned"}
    assert aks["dns_prefix"] == "h100"
    assert aks["default_node_pool"] == {
        "name": "system",
        "node_count": 2,
        "orchestrator_version": "1.34",
        "os_sku": "Ubuntu",
        "vm_size": "Standard_D8s_v5",
        "temporary_name_for_rotation": "systemtmp",
    }
    assert default_doc["provider"]["azurerm"] == [{"features": [{}]}]
    assert default_doc["terraform"]["required_providers"] == {
        "azurerm": {"source": "azurerm", "version": AZURERM_PROVIDER_VERSION}
    }


def test_user_pool_is_rendered_as_given(default_doc):
    pool = only(default_doc, "azurerm_kubernetes_cluster_node_pool")
    assert pool["name"] == "gpu" and pool["mode"] == "User"
    assert pool["vm_size"] == "Standard_ND96isr_H100_v5" and pool["node_count"] == 1
    assert pool["gpu_driver"] == "Install"
    assert pool["node_taints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert pool["node_labels"] == {"nvidia.com/gpu.present": "true"}
    assert pool["orchestrator_version"] == "1.34"
    assert pool["kubernetes_cluster_id"].startswith("${azurerm_kubernetes_cluster.")
    assert not any("gpu_profile" in k or "managed" in k for k in pool)


def test_construct_adds_nothing_of_its_own():
    # no GPU taint, label or gpu_driver appears unless the props carry it (the plugin decides)
    doc = synth(
        props(
            pools=(
                NodePoolProps(
                    name="gpua",
                    vm_size="Standard_ND96isr_H100_v5",
                    gpu_driver="None",
                    taints=("example.com/dedicated=ml:NoExecute",),
                ),
                NodePoolProps(name="cpu", vm_size="Standard_D16s_v5", node_count=3),
            )
        )
    )
    pools = {p["name"]: p for p in doc["resource"]["azurerm_kubernetes_cluster_node_pool"].values()}
    assert pools["gpua"]["gpu_driver"] == "None"
    assert pools["gpua"]["node_taints"] == ["example.com/dedicated=ml:NoExecute"]
    assert "node_labels" not in pools["gpua"]
    assert "gpu_driver" not in pools["cpu"] and "node_taints" not in pools["cpu"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(kubernetes_version="latest"), "must look like 1.34"),
        (dict(location=""), "location must be an Azure region"),
        (dict(resource_group_name=""), "resource_group_name must be set"),
        (
            dict(pools=(NodePoolProps(name="gpu", vm_size="x", node_count=0),)),
            "node_count must be >= 1",
        ),
        (dict(pools=(NodePoolProps(name="gpu", vm_size=""),)), "vm_size is required"),
        (
            dict(pools=(NodePoolProps(name="gpu", vm_size="x", gpu_driver="Managed"),)),
            "gpu_driver 'Managed' is not one of",
        ),
        (dict(pools=(NodePoolProps(name="system", vm_size="x"),)), "duplicate pool name"),
        (
            dict(pools=(NodePoolProps(name="gpu", vm_size="x", taints=("bad taint",)),)),
            "taint 'bad taint'",
        ),
        (
            dict(pools=(NodePoolProps(name="gpu", vm_size="x", only_critical_addons=True),)),
            "system pool only",
        ),
        (
            dict(system_pool=NodePoolProps(name="system", vm_size="x", gpu_driver="Install")),
            "cannot be a GPU pool",
        ),
    ],
)
def test_validation_errors_carry_construct_path(kwargs, message):
    with pytest.raises(Exception) as info:
        synth(props(**kwargs))
    assert "[stack/aks]" in str(info.value)
    assert message in str(info.value)


def test_upgrade_skip_postcondition_is_on_the_cluster(default_doc):
    aks = only(default_doc, "azurerm_kubernetes_cluster")
    (post,) = aks["lifecycle"]["postcondition"]
    assert (post["condition"], post["error_message"]) == upgrade_skip_condition("1.34")
    assert "self.current_kubernetes_version" in post["condition"]


@pytest.mark.parametrize(
    "configured, live, ok",
    [
        ("1.34", "1.33.5", True),  # one minor step: allowed
        ("1.34", "1.34.1", True),  # no version change
        ("1.34", "1.32.9", False),  # would skip 1.33
        ("1.34", "1.35.0", False),  # downgrade
        ("1.35.2", "1.34.4", True),
        ("1.35", "1.3.4", False),
    ],
)
def test_upgrade_skip_condition_semantics(configured, live, ok):
    condition, message = upgrade_skip_condition(configured)
    # ${can(regex("<re>", self.current_kubernetes_version))}: evaluate the same RE2-compatible regex
    pattern = re.fullmatch(
        r'\$\{can\(regex\("(.+)", self\.current_kubernetes_version\)\)\}', condition
    ).group(1)
    assert bool(re.search(pattern, live)) is ok
    assert configured in message and "one minor version" in message


@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform CLI not installed")
@pytest.mark.parametrize("live, plan_ok", [("1.33.5", True), ("1.34.0", True), ("1.32.9", False)])
def test_upgrade_skip_postcondition_fails_terraform_plan_when_live_version_is_known(
    default_doc, tmp_path, live, plan_ok
):
    """Real Terraform, built-in terraform_data (no provider download): the synthesized
    postcondition, with ``self.current_kubernetes_version`` -> ``self.input``, fails the plan
    as soon as the value is known, and is deferred when it is unknown (cluster create)."""
    (post,) = only(default_doc, "azurerm_kubernetes_cluster")["lifecycle"]["postcondition"]
    swap = lambda s: s.replace("self.current_kubernetes_version", "self.input")  # noqa: E731
    lifecycle = {
        "postcondition": [
            {"condition": swap(post["condition"]), "error_message": swap(post["error_message"])}
        ]
    }
    config = {
        "variable": {"live": {"type": "string"}},
        "resource": {
            "terraform_data": {
                "known": {"input": "${var.live}", "lifecycle": lifecycle},
                "source": {"input": "${var.live}"},
                "unknown": {"input": "${terraform_data.source.output}", "lifecycle": lifecycle},
            }
        },
    }
    (tmp_path / "main.tf.json").write_text(json.dumps(config))
    env = dict(
        os.environ, TF_CLI_CONFIG_FILE="/dev/null", CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1"
    )

    def tf(*args):
        return subprocess.run(
            ["terraform", *args, "-input=false", "-no-color"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert tf("init").returncode == 0
    plan = tf("plan", f"-var=live={live}")
    assert (plan.returncode == 0) is plan_ok, plan.stdout + plan.stderr
    if not plan_ok:
        assert "terraform_data.known" in plan.stderr and "terraform_data.unknown" not in plan.stderr
        assert f"the cluster runs {live} and the configuration asks for 1.34" in " ".join(
            plan.stderr.split()
        )


def pools_by_name(doc: dict) -> dict:
    return {p["name"]: p for p in doc["resource"]["azurerm_kubernetes_cluster_node_pool"].values()}


def test_two_taints_with_the_same_key_and_effect_are_refused():
    with pytest.raises(Exception) as info:
        synth(
            props(
                pools=(
                    NodePoolProps(
                        name="cpu",
                        vm_size="Standard_D4s_v5",
                        taints=("team=a:NoSchedule", "team=b:NoSchedule"),
                    ),
                    GPU,
                )
            )
        )
    assert "[stack/aks]" in str(info.value)
    assert (
        "pools[0] 'cpu': taints team=a:NoSchedule and team=b:NoSchedule have the same key and effect"
        in str(info.value)
    )


def test_only_critical_addons_renders_the_flag():
    # azurerm 4.x has no default_node_pool.node_taints; this flag is the one taint it can set.
    doc = synth(
        props(
            system_pool=NodePoolProps(
                name="system", vm_size="Standard_D8s_v5", only_critical_addons=True
            )
        )
    )
    assert (
        only(doc, "azurerm_kubernetes_cluster")["default_node_pool"]["only_critical_addons_enabled"]
        is True
    )


def test_system_pool_taints_are_refused_not_dropped():
    errors = validate_props(
        props(
            system_pool=NodePoolProps(
                name="system", vm_size="x", taints=("dedicated=infra:NoSchedule",)
            )
        )
    )
    assert errors and "taints cannot be set on the AKS default (system) pool" in errors[0]


def test_pool_named_like_the_rotation_pool_is_refused():
    with pytest.raises(Exception) as info:
        synth(props(pools=(NodePoolProps(name="systemtmp", vm_size="x"),)))
    assert (
        "pools[0] 'systemtmp': the name is the system pool's temporary_name_for_rotation; rename the pool"
        in str(info.value)
    )


def test_a_node_pool_is_its_own_construct_at_the_path_the_cluster_gave_it(default_doc):
    from gpucluster_cdk.constructs_lib import AksNodePool

    ((logical_id, pool),) = default_doc["resource"]["azurerm_kubernetes_cluster_node_pool"].items()
    stack = TerraformStack(CdkTesting.app(), "stack")
    cluster = AksGpuCluster(stack, "aks", props(pools=()))
    alone = AksNodePool(
        cluster, "pool-gpu", GPU, cluster_id=cluster.cluster.id, kubernetes_version="1.34", tags={}
    )
    doc = json.loads(CdkTesting.synth(stack, True))
    assert doc["resource"]["azurerm_kubernetes_cluster_node_pool"] == {logical_id: pool}
    assert (
        alone.props is GPU and alone.resource.node.path == "stack/aks/pool-gpu"
    )  # no construct level of its own

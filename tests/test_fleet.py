"""Fleets (issue 15): the ``fleet:`` section, its refusals, the stage order and the synthesized stacks.

The stack tests synthesize in process (hand-built plans, tests/plan_factory.py) a two-group fleet:
canary (1 cluster) then prod (3 clusters), with a hub, update runs, an auto-upgrade profile and the
kernel-module blocklist placement, and assert on the Terraform JSON and cdktf's manifest.
The hub's custom resources are validated against the Fleet CRDs (placement.kubernetes-fleet.io v1)
when ``../shared/reference/crds/placement.kubernetes-fleet.io/`` holds them (skipped otherwise).
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from gpucluster.cli import main as cli_main
from gpucluster.errors import GpuclusterError
from gpucluster.inputs import fleet as fleet_mod
from gpucluster.inputs.config import load_config, parse_config

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "fleet-canary-prod.yaml"
AKS = {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"}


def doc(**fleet_changes) -> dict:
    data = {
        "fleet": {
            "name": "gpu-fleet",
            "hub": {"dnsPrefix": "gpu-fleet-hub"},
            "groups": [
                {"name": "canary", "afterStageWaitSeconds": 3600, "approval": True},
                {"name": "prod"},
            ],
            "updateRuns": [
                {"name": "node-images", "upgrade": "NodeImageOnly"},
                {"name": "k8s-1-35", "upgrade": "Full", "kubernetesVersion": "1.35"},
            ],
            "autoUpgrade": {"channel": "Stable", "nodeImageSelection": "Latest"},
            "placements": [
                {
                    "component": "kernel-module-blocklist",
                    "modules": ["algif_aead", "esp4", "esp6", "rxrpc"],
                }
            ],
        },
        "clusters": [
            {"name": "canary-1", "criteria": dict(AKS), "fleet": {"group": "canary"}},
            {
                "name": "prod-1",
                "criteria": dict(AKS),
                "fleet": {"group": "prod", "labels": {"region": "westus3"}},
            },
            {"name": "prod-2", "criteria": dict(AKS), "fleet": {"group": "prod"}},
            {"name": "prod-3", "criteria": dict(AKS), "fleet": {"group": "prod"}},
        ],
    }
    data["fleet"].update(fleet_changes)
    return data


def parse(data: dict):
    return parse_config(data, source="fleet.yaml", root=ROOT)


def refusal(data: dict) -> str:
    with pytest.raises(GpuclusterError) as info:
        parse(data)
    text = info.value.render()
    assert len(text.splitlines()) == 1, text
    assert text.startswith("error[fleet] file=fleet.yaml "), text
    assert " fix: " in text, text
    return text


# --------------------------------------------------------------------------- the fleet: section


def test_two_group_fleet_parses_in_order():
    clusters, fleet = parse(doc())
    assert [g.name for g in fleet.groups] == ["canary", "prod"]
    assert fleet.groups[0].after_stage_wait_seconds == 3600 and fleet.groups[0].approval
    assert [(g.name, names) for g, names in fleet_mod.stages(fleet)] == [
        ("canary", ["canary-1"]),
        ("prod", ["prod-1", "prod-2", "prod-3"]),
    ]
    assert fleet.member_labels("prod-1") == {"region": "westus3", "upgroup": "prod"}
    assert fleet.hub.dns_prefix == "gpu-fleet-hub"
    assert [(r.name, r.upgrade, r.kubernetes_version) for r in fleet.update_runs] == [
        ("node-images", "NodeImageOnly", None),
        ("k8s-1-35", "Full", "1.35"),
    ]


def test_without_fleet_section_nothing_changes():
    data = doc()
    del data["fleet"]
    for c in data["clusters"]:
        del c["fleet"]
    clusters, fleet = parse(data)
    assert fleet is None and len(clusters) == 4


def test_refuses_a_cluster_in_no_group():
    data = doc()
    del data["clusters"][2]["fleet"]
    text = refusal(data)
    assert (
        "cluster=prod-2 key=clusters[2].fleet.group: cluster 'prod-2' is in no update group" in text
    )
    assert "(allowed: canary, prod)" in text


def test_refuses_an_unknown_group():
    data = doc()
    data["clusters"][1]["fleet"]["group"] = "staging"
    text = refusal(data)
    assert (
        "cluster=prod-1 key=clusters[1].fleet.group: cluster 'prod-1' names unknown update group 'staging'"
        in text
    )


def test_refuses_a_non_aks_member():
    data = doc()
    data["clusters"][3]["criteria"] = {
        "service": "oke",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
    }
    text = refusal(data)
    assert (
        "cluster=prod-3 key=clusters[3].criteria.service" in text and "not an AKS cluster" in text
    )


def test_refuses_a_kubernetes_minor_skip_in_an_update_run():
    data = doc(updateRuns=[{"name": "k8s-1-36", "upgrade": "Full", "kubernetesVersion": "1.36.1"}])
    text = refusal(data)
    assert "key=fleet.updateRuns[0].kubernetesVersion" in text
    assert "from Kubernetes 1.34 to 1.36.1, skipping minor versions" in text
    assert "(allowed: 1.34 or 1.35 for this cluster)" in text


def test_minor_skip_is_judged_per_cluster():
    data = doc(
        updateRuns=[
            {"name": "k8s-1-36", "upgrade": "ControlPlaneOnly", "kubernetesVersion": "1.36"}
        ]
    )
    for c in data["clusters"]:
        c["kubernetesVersion"] = "1.35"
    parse(data)  # every member on 1.35: one minor up is fine
    data["clusters"][0]["kubernetesVersion"] = "1.34"
    assert "cluster=canary-1 " in refusal(data)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"updateRuns": [{"name": "old", "upgrade": "Full", "kubernetesVersion": "1.33"}]},
            "below the AKS floor 1.34",
        ),
        (
            {
                "updateRuns": [
                    {"name": "n", "upgrade": "NodeImageOnly", "kubernetesVersion": "1.35"}
                ]
            },
            "takes no kubernetesVersion",
        ),
        (
            {"updateRuns": [{"name": "n", "upgrade": "Full"}]},
            "a Full update run needs kubernetesVersion",
        ),
        (
            {"updateRuns": [{"name": "n", "upgrade": "Full", "kubernetesVersion": 1.35}]},
            "is a number",
        ),
        ({"updateRuns": [{"name": "n", "upgrade": "Patch"}]}, "unknown upgrade type 'Patch'"),
        (
            {"groups": [{"name": "canary"}, {"name": "prod", "approval": True}]},
            "is set on the last group 'prod'",
        ),
        (
            {"groups": [{"name": "canary"}, {"name": "prod-eu"}]},
            "invalid update group name 'prod-eu'",
        ),
        ({"groups": [{"name": "canary"}, {"name": "canary"}]}, "declared twice"),
        ({"groups": []}, "must be a non-empty list, not an empty list"),
        (
            {"groups": [{"name": "canary"}, {"name": "prod"}, {"name": "late"}]},
            "update group 'late' has no cluster",
        ),
        (
            {"groups": [{"name": "canary", "afterStageWaitSeconds": "1h"}, {"name": "prod"}]},
            "whole number of seconds",
        ),
        (
            {"placements": [{"component": "kernel-module-blocklist", "image": "busybox:1.36"}]},
            "is not pinned by digest",
        ),
        (
            {"placements": [{"component": "kernel-module-blocklist", "modules": ["esp4", "esp4"]}]},
            "listed twice",
        ),
        (
            {"placements": [{"component": "kernel-module-blocklist", "modules": ["esp4; reboot"]}]},
            "invalid kernel module name",
        ),
        ({"placements": [{"component": "sshd"}]}, "unknown placement component 'sshd'"),
        ({"hub": None}, "placements need a hub cluster"),
        ({"autoUpgrade": {"channel": "Fast"}}, "unknown auto-upgrade channel 'Fast'"),
        ({"existing": "/subscriptions/x/fleets/y"}, "is not a Fleet Manager resource ID"),
        ({"name": "GPU_Fleet"}, "invalid fleet name 'GPU_Fleet'"),
        ({"color": "blue"}, "unknown key 'color'"),
    ],
)
def test_refusals_name_the_key_and_a_fix(change, expected):
    assert expected in refusal(doc(**change))


def test_refuses_an_existing_cluster_member_and_a_stray_fleet_key():
    data = doc()
    data["clusters"][1]["existing"] = {"kubeconfig": "~/.kube/config"}
    assert "key=clusters[1].existing" in refusal(data)
    data = doc()
    del data["fleet"]
    assert (
        "key=clusters[0].fleet: the cluster names a fleet group, but the file has no top-level 'fleet:'"
        in refusal(data)
    )


def test_cloud_group_larger_than_the_run_trigger_fan_in_is_refused():
    data = doc(groups=[{"name": "canary"}, {"name": "prod"}], placements=[])
    data["backend"] = {"type": "cloud", "organization": "acme", "workspacePrefix": "gpu-"}
    data["clusters"][0:1] = [
        {"name": f"canary-{i}", "criteria": dict(AKS), "fleet": {"group": "canary"}}
        for i in range(21)
    ]
    text = refusal(data)
    assert "update group 'canary' has 21 clusters" in text and "allows 20" in text


# --------------------------------------------------------------------------- rollout data


def test_example_file_plan_shows_the_stage_order():
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["plan", "--config", str(EXAMPLE)], stdout=out, stderr=err) == 0
    text = out.getvalue()
    lines = text.splitlines()
    assert (
        lines[0]
        == "fleet gpu-fleet: 2 update groups, 4 members, stacks gpu-fleet-fleet, gpu-fleet-hub"
    )
    assert lines[2].startswith(
        "  1  canary  canary-eastus-runtime  wait 3600s; approval (approve_canary = "
    )
    assert lines[2].endswith("barrier gpu-fleet-after-canary")
    assert (
        lines[3]
        == "  2  prod  prod-eastus-runtime, prod-westus3-runtime, prod-swedencentral-runtime  -"
    )
    assert (
        "start: az fleet updaterun start --resource-group gpu-fleet-rg --fleet-name gpu-fleet --name k8s-1-35"
        in text
    )
    out = io.StringIO()
    assert (
        cli_main(["plan", "--config", str(EXAMPLE), "--format", "json"], stdout=out, stderr=err)
        == 0
    )
    by_cluster = {entry["cluster"]: entry["fleet"] for entry in json.loads(out.getvalue())}
    assert (
        by_cluster["canary-eastus"]["stage"] == 1
        and by_cluster["canary-eastus"]["waitsFor"] is None
    )
    assert {v["waitsFor"] for k, v in by_cluster.items() if k != "canary-eastus"} == {
        "gpu-fleet-after-canary"
    }


def test_rollout_digest_follows_the_release_set():
    from plan_factory import make_plan

    a, b = make_plan("a"), make_plan("b")
    assert fleet_mod.rollout_digest(a) == fleet_mod.rollout_digest(
        b
    )  # same releases, any cluster name
    b.nodes[1].values = {**b.nodes[1].values, "driver": {"enabled": True}}
    assert fleet_mod.rollout_digest(a) != fleet_mod.rollout_digest(b)
    assert fleet_mod.group_digest([("x", "1"), ("y", "2")]) == fleet_mod.group_digest(
        [("y", "2"), ("x", "1")]
    )


def test_terraform_cloud_topology_workspaces_and_run_triggers():
    data = doc()
    data["backend"] = {"type": "cloud", "organization": "acme", "workspacePrefix": "gpu-"}
    clusters, fleet = parse(data)
    assert {c.backend["project"] for c in clusters} == {"gpu-fleet"}  # one project per fleet
    topo = fleet_mod.tfc_topology(fleet, clusters, provisioned={c.name: True for c in clusters})
    assert topo["project"] == "gpu-fleet" and topo["organization"] == "acme"
    assert (
        "gpu-gpu-fleet-fleet" in topo["workspaces"]
        and "gpu-gpu-fleet-after-canary" in topo["workspaces"]
    )
    assert len(topo["workspaces"]) == len(set(topo["workspaces"])) == 4 * 2 + 3
    triggers = {t["workspace"]: t["sources"] for t in topo["runTriggers"]}
    assert triggers["gpu-gpu-fleet-after-canary"] == ["gpu-canary-1-runtime"]
    for n in ("prod-1", "prod-2", "prod-3"):
        assert triggers[f"gpu-{n}-runtime"] == [f"gpu-{n}-cluster", "gpu-gpu-fleet-after-canary"]
    assert triggers["gpu-gpu-fleet-hub"] == ["gpu-gpu-fleet-fleet"]
    assert all(len(s) <= fleet_mod.MAX_RUN_TRIGGER_SOURCES for s in triggers.values())
    consumers = {c["workspace"]: c["consumers"] for c in topo["remoteStateConsumers"]}
    assert consumers["gpu-gpu-fleet-after-canary"] == [
        "gpu-prod-1-runtime",
        "gpu-prod-2-runtime",
        "gpu-prod-3-runtime",
    ]
    assert consumers["gpu-canary-1-runtime"] == ["gpu-gpu-fleet-after-canary"]


# --------------------------------------------------------------------------- hub objects


def _fleet_crd_schemas(shared_dir: Path) -> dict:
    from k8s_schema import openapi_to_jsonschema

    folder = shared_dir / "reference" / "crds" / "placement.kubernetes-fleet.io"
    files = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if not files:
        pytest.skip(
            f"no Fleet CRDs in {folder} (Azure/fleet config/crd/bases/placement.kubernetes-fleet.io_"
            "{clusterresourceplacements,clusterstagedupdatestrategies,clusterstagedupdateruns}.yaml)"
        )
    index = {}
    for path in files:
        for crd in yaml.safe_load_all(path.read_text()):
            if crd and crd.get("kind") == "CustomResourceDefinition":
                for v in crd["spec"]["versions"]:
                    root = openapi_to_jsonschema(v["schema"]["openAPIV3Schema"])
                    root.setdefault("properties", {}).setdefault("metadata", {"type": "object"})
                    index[(crd["spec"]["group"], v["name"], crd["spec"]["names"]["kind"])] = root
    return index


def hub_objects():
    _, fleet = parse(doc())
    return fleet, [
        *fleet_mod.placement_objects(fleet, fleet.placements[0]),
        fleet_mod.staged_strategy(fleet),
    ]


def test_hub_objects_follow_the_groups():
    fleet, objects = hub_objects()
    kinds = [o["kind"] for o in objects]
    assert kinds == [
        "Namespace",
        "DaemonSet",
        "ClusterResourcePlacement",
        "ClusterStagedUpdateRun",
        "ClusterStagedUpdateStrategy",
    ]
    ds = objects[1]["spec"]["template"]["spec"]
    container = ds["containers"][0]
    assert container["securityContext"] == {"privileged": True} and ds["hostPID"] is True
    assert "@sha256:" in container["image"]
    assert container["resources"] == {
        "requests": {"cpu": "10m", "memory": "16Mi"},
        "limits": {"memory": "32Mi"},
    }
    assert 'MODULES="algif_aead esp4 esp6 rxrpc"' in container["command"][2]
    assert "install %s /bin/false\\nblacklist %s\\n" in container["command"][2]
    crp = objects[2]
    assert crp["apiVersion"] == "placement.kubernetes-fleet.io/v1"
    assert crp["spec"]["strategy"] == {"type": "External"}
    assert crp["spec"]["resourceSelectors"] == [
        {"group": "", "version": "v1", "kind": "Namespace", "name": "kernel-module-blocklist"}
    ]
    run = objects[3]
    assert run["spec"] == {
        "placementName": "kernel-module-blocklist",
        "stagedRolloutStrategyName": "gpu-fleet-stages",
        "state": "Run",
    }
    assert objects[4]["spec"]["stages"] == [
        {
            "name": "canary",
            "labelSelector": {"matchLabels": {"upgroup": "canary"}},
            "afterStageTasks": [{"type": "TimedWait", "waitTime": "3600s"}, {"type": "Approval"}],
        },
        {"name": "prod", "labelSelector": {"matchLabels": {"upgroup": "prod"}}},
    ]
    other = copy.deepcopy(fleet.placements[0])
    other = fleet_mod.PlacementSpec(component=other.component, name=other.name, modules=("rxrpc",))
    assert (
        fleet_mod.placement_objects(fleet, other)[3]["metadata"]["name"] != run["metadata"]["name"]
    )  # new content, new run


def test_hub_builtin_objects_validate_against_kubernetes_1_34():
    from k8s_schema import validate_object

    _, objects = hub_objects()
    assert [validate_object(o) for o in objects[:2]] == ["kubernetes 1.34", "kubernetes 1.34"]


def test_hub_custom_resources_validate_against_the_fleet_crds(shared_dir):
    index = _fleet_crd_schemas(shared_dir)
    _, objects = hub_objects()
    for obj in objects[2:]:
        group, _, version = obj["apiVersion"].rpartition("/")
        schema = index[(group, version, obj["kind"])]
        errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(obj)]
        assert not errors, (obj["kind"], errors)
    bad = copy.deepcopy(objects[4])
    bad["spec"]["stages"][0]["name"] = "prod-eu"  # why group names have no '-'
    assert list(
        jsonschema.Draft202012Validator(
            index[("placement.kubernetes-fleet.io", "v1", "ClusterStagedUpdateStrategy")]
        ).iter_errors(bad)
    )


# --------------------------------------------------------------------------- synthesized stacks


CANARY, PROD = "canary-eastus", ("prod-eastus", "prod-westus3", "prod-swedencentral")


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    """The example file (canary 1 cluster, prod 3) through the real pipeline and stacks.synth."""
    from gpucluster.pipeline import build_plans
    from gpucluster_cdk import stacks

    clusters, fleet = load_config(str(EXAMPLE))
    plans = build_plans(clusters)
    out = tmp_path_factory.mktemp("fleet") / "cdktf.out"
    names = stacks.synth(plans, out, fleet=fleet)
    return out, names, fleet, plans


def load(out: Path, stack: str) -> dict:
    return json.loads((out / "stacks" / stack / "cdk.tf.json").read_text())


def test_fleet_stacks_are_synthesized(synthesized):
    _, names, _, _ = synthesized
    assert (
        "gpu-fleet-fleet" in names
        and "gpu-fleet-hub" in names
        and "gpu-fleet-after-canary" in names
    )
    assert "gpu-fleet-after-prod" not in names  # nothing follows the last group
    assert len(names) == 4 * 2 + 3


def test_fleet_stack_holds_manager_members_strategy_runs_and_auto_upgrade(synthesized):
    out, _, _, _ = synthesized
    tf = load(out, "gpu-fleet-fleet")
    res = tf["resource"]
    (manager,) = res["azurerm_kubernetes_fleet_manager"].values()
    assert manager["name"] == "gpu-fleet" and manager["hub_profile"] == {
        "dns_prefix": "gpu-fleet-hub"
    }
    members = {m["name"]: m for m in res["azurerm_kubernetes_fleet_member"].values()}
    assert {n: m["group"] for n, m in members.items()} == {
        CANARY: "canary",
        **{p: "prod" for p in PROD},
    }
    for name, member in members.items():  # the AKS id comes from the cluster stack's outputs
        assert member["kubernetes_cluster_id"].startswith(
            f"${{data.terraform_remote_state.cross-stack-reference-input-{name}-cluster.outputs."
        )
    (strategy,) = res["azurerm_kubernetes_fleet_update_strategy"].values()
    assert strategy["name"] == "gpu-fleet-stages"
    assert strategy["stage"] == [
        {"name": "canary", "group": [{"name": "canary"}], "after_stage_wait_in_seconds": 3600},
        {"name": "prod", "group": [{"name": "prod"}]},
    ]
    runs = {r["name"]: r for r in res["azurerm_kubernetes_fleet_update_run"].values()}
    assert runs["k8s-1-35"]["managed_cluster_update"] == {
        "upgrade": {"type": "Full", "kubernetes_version": "1.35"},
        "node_image_selection": {"type": "Latest"},
    }
    assert runs["node-images"]["managed_cluster_update"]["upgrade"] == {"type": "NodeImageOnly"}
    assert all(
        r["fleet_update_strategy_id"].startswith("${azurerm_kubernetes_fleet_update_strategy.")
        for r in runs.values()
    )
    (auto,) = res["azapi_resource"].values()
    assert auto["type"] == "Microsoft.ContainerService/fleets/autoUpgradeProfiles@2025-03-01"
    assert auto["body"]["properties"]["channel"] == "Stable"
    assert auto["body"]["properties"]["updateStrategyId"].startswith(
        "${azurerm_kubernetes_fleet_update_strategy."
    )
    assert tf["terraform"]["required_providers"]["azapi"] == {
        "source": "Azure/azapi",
        "version": "~> 2.0",
    }
    from gpucluster_cdk.constructs_lib.cdk import AZURERM_PROVIDER_VERSION

    assert tf["terraform"]["required_providers"]["azurerm"]["version"] == AZURERM_PROVIDER_VERSION


def test_runtime_stacks_roll_out_canary_then_prod(synthesized):
    out, _, _, plans = synthesized
    manifest = json.loads((out / "manifest.json").read_text())["stacks"]
    assert manifest["gpu-fleet-after-canary"]["dependencies"] == [f"{CANARY}-runtime"]
    for n in PROD:
        assert "gpu-fleet-after-canary" in manifest[f"{n}-runtime"]["dependencies"]
    assert "gpu-fleet-after-canary" not in manifest[f"{CANARY}-runtime"]["dependencies"]
    assert manifest["gpu-fleet-hub"]["dependencies"] == ["gpu-fleet-fleet"]
    canary = load(out, f"{CANARY}-runtime")["resource"]["terraform_data"]
    assert canary["rollout"]["input"] == {"digest": fleet_mod.rollout_digest(plans[0])}
    assert set(canary["rollout"]["depends_on"]) == {f"helm_release.{n.id}" for n in plans[0].nodes}
    assert "promotion_gate" not in canary
    barrier = load(out, "gpu-fleet-after-canary")
    (pre,) = barrier["resource"]["terraform_data"]["promotion"]["lifecycle"]["precondition"]
    assert f"cross-stack-reference-input-{CANARY}-runtime" in pre["condition"]
    assert (
        fleet_mod.rollout_digest(plans[0]) in pre["condition"]
        and "var.approve_canary ==" in pre["condition"]
    )
    assert barrier["variable"]["approve_canary"]["default"] == ""
    gdigest = barrier["resource"]["terraform_data"]["promotion"]["input"]["digest"]
    for n in PROD:
        gate = load(out, f"{n}-runtime")["resource"]["terraform_data"]["promotion_gate"]
        (cond,) = gate["lifecycle"]["precondition"]
        assert (
            "cross-stack-reference-input-gpu-fleet-after-canary" in cond["condition"]
            and gdigest in cond["condition"]
        )


def test_hub_stack_places_the_blocklist_through_helm(synthesized):
    out, _, _, _ = synthesized
    tf = load(out, "gpu-fleet-hub")
    releases = tf["resource"]["helm_release"]
    assert set(releases) == {
        "gpu-fleet-stages",
        "kernel-module-blocklist",
        "kernel-module-blocklist-run",
    }
    assert releases["kernel-module-blocklist-run"]["depends_on"] == [
        "helm_release.kernel-module-blocklist"
    ]
    assert tf["variable"]["kubeconfig_path"]["default"] == "~/.kube/config"
    chart = out / "stacks" / "gpu-fleet-hub" / releases["kernel-module-blocklist"]["chart"]
    docs = [
        d
        for f in sorted((chart / "templates").glob("*.yaml"))
        for d in yaml.safe_load_all(f.read_text())
    ]
    assert [d["kind"] for d in docs] == ["Namespace", "DaemonSet", "ClusterResourcePlacement"]
    run_chart = out / "stacks" / "gpu-fleet-hub" / releases["kernel-module-blocklist-run"]["chart"]
    (run,) = [
        d
        for f in (run_chart / "templates").glob("*.yaml")
        for d in yaml.safe_load_all(f.read_text())
    ]
    assert run["kind"] == "ClusterStagedUpdateRun" and run["spec"]["state"] == "Run"


def test_example_file_loads():
    clusters, fleet = load_config(str(EXAMPLE))
    assert [len(names) for _, names in fleet_mod.stages(fleet)] == [1, 3]


def _fake_state(outputs: dict) -> str:
    """A Terraform v4 state file holding only ``outputs`` (what terraform_remote_state reads)."""
    return json.dumps(
        {
            "version": 4,
            "terraform_version": "1.11.4",
            "serial": 1,
            "lineage": "00000000-0000-0000-0000-000000000000",
            "outputs": {
                k: {"value": v, "type": ["object", {"digest": "string"}], "sensitive": True}
                for k, v in outputs.items()
            },
            "resources": [],
            "check_results": None,
        }
    )


@pytest.mark.skipif(
    __import__("shutil").which("terraform") is None, reason="terraform CLI not installed"
)
def test_barrier_holds_until_canary_applied_and_approved_real_terraform(synthesized, tmp_path):
    """``terraform plan``/``apply`` (1.11, no provider download: terraform_data and terraform_remote_state
    are built in) of the synthesized barrier stack against a canary runtime state file: shut while
    the canary reports another digest or no approval is given, open with both; its promotion output
    carries the group digest the prod gates compare."""
    import os
    import shutil
    import subprocess

    out, _, _, plans = synthesized
    root = tmp_path / "work"
    shutil.copytree(
        out / "stacks" / "gpu-fleet-after-canary",
        root / "cdktf.out" / "stacks" / "gpu-fleet-after-canary",
    )
    stack = root / "cdktf.out" / "stacks" / "gpu-fleet-after-canary"
    doc_ = json.loads((stack / "cdk.tf.json").read_text())
    gdigest = doc_["resource"]["terraform_data"]["promotion"]["input"]["digest"]
    env = {
        **os.environ,
        "TF_CLI_CONFIG_FILE": "/dev/null",
        "CHECKPOINT_DISABLE": "1",
        "TF_IN_AUTOMATION": "1",
    }

    def tf(*args):
        return subprocess.run(
            ["terraform", *args, "-no-color"], cwd=stack, env=env, capture_output=True, text=True
        )

    def canary_reports(digest: str) -> None:
        (root / f"terraform.{CANARY}-runtime.tfstate").write_text(
            _fake_state({"cross-stack-output-terraform_datarolloutoutput": {"digest": digest}})
        )

    assert tf("init", "-input=false").returncode == 0
    canary_reports("0" * 64)  # an older rollout
    shut = tf("plan", "-input=false", f"-var=approve_canary={gdigest[:16]}")
    assert shut.returncode != 0 and "has not finished this rollout" in " ".join(shut.stderr.split())
    canary_reports(fleet_mod.rollout_digest(plans[0]))
    unapproved = tf("plan", "-input=false")
    assert unapproved.returncode != 0 and f'approve_canary = "{gdigest[:16]}"' in " ".join(
        unapproved.stderr.split()
    )
    applied = tf("apply", "-auto-approve", "-input=false", f"-var=approve_canary={gdigest[:16]}")
    assert applied.returncode == 0, applied.stderr
    state = json.loads((root / "terraform.gpu-fleet-after-canary.tfstate").read_text())
    assert state["outputs"]["cross-stack-output-terraform_datapromotionoutput"]["value"] == {
        "digest": gdigest
    }


def test_a_fleet_without_location_lives_in_the_aks_default_region():
    from gpucluster.inputs.fleet import parse_fleet
    from gpucluster_aks import platform as aks

    fleet = parse_fleet({"name": "f", "groups": [{"name": "a"}]}, file="gpucluster.yaml")
    assert fleet.location == aks.DEFAULT_REGION == aks.AKS_PLATFORM.default_region
    assert (
        parse_fleet(
            {"name": "f", "location": "westus3", "groups": [{"name": "a"}]}, file="gpucluster.yaml"
        ).location
        == "westus3"
    )

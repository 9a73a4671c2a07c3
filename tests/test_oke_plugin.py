"""The OKE plugin as a third party would write it: SDK-only imports, registration, platform
declaration, cluster preparation (existing cluster, refusals), detection by providerID."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from _support import imports as _imports

import gpucluster_oke
from gpucluster.sdk import ClusterSpec, Criteria, ExistingCluster, GpuclusterError, NodePool
from gpucluster.sdk.testing import registered
from gpucluster_oke.platform import OKE_PLATFORM, prepare, recipe_leaves

PLUGIN_DIR = Path(gpucluster_oke.__file__).parent
ALLOWED_THIRD_PARTY = {"yaml"}


def _bad_imports(files: list[Path]) -> list[str]:
    bad = []
    for path in files:
        for line, module in sorted(_imports(path)):
            top = module.split(".")[0]
            ok = (
                module == "gpucluster.sdk"
                or top == "gpucluster_oke"
                or top in sys.stdlib_module_names
                or top in ALLOWED_THIRD_PARTY
            ) and top != "importlib"
            if not ok:
                bad.append(f"{path.name}:{line}: {module}")
    return bad


def test_plugin_imports_only_the_sdk_stdlib_and_yaml():
    files = sorted(PLUGIN_DIR.rglob("*.py"))
    assert {p.name for p in files} == {"__init__.py", "platform.py", "policy.py", "gates.py"}
    assert _bad_imports(files) == []


def test_the_import_check_sees_core_relative_and_dynamic_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from gpucluster.values import deep_merge\nimport gpucluster.recipes.recipe\nfrom . import x\n"
        "import gpucluster_cdk.constructs_lib\n__import__('os')\nimport importlib\nfrom gpucluster.sdk import hookimpl\nimport json\n"
    )
    assert _bad_imports([probe]) == [
        "probe.py:1: gpucluster.values",
        "probe.py:2: gpucluster.recipes.recipe",
        "probe.py:3: .",
        "probe.py:4: gpucluster_cdk.constructs_lib",
        "probe.py:5: __import__()",
        "probe.py:6: importlib",
    ]


def test_registered_through_the_entry_point_group():
    with registered() as kit:
        pm, platforms = kit.pm, kit.platforms()
    assert pm.get_plugin("oke") is gpucluster_oke
    hooks = {
        impl.function.__name__
        for caller in pm.hook.__dict__.values()
        if hasattr(caller, "get_hookimpls")
        for impl in caller.get_hookimpls()
        if impl.plugin is gpucluster_oke
    }
    assert hooks == {
        "gpucluster_platforms",
        "gpucluster_catalog_dirs",
        "gpucluster_prepare_cluster",
        "gpucluster_gates",
        "gpucluster_policy_checks",
    }
    assert platforms["oke"] is OKE_PLATFORM


def test_platform_declaration():
    assert OKE_PLATFORM.service == "oke"
    assert OKE_PLATFORM.provisions_cluster is False
    assert OKE_PLATFORM.provider_id_prefix == "ocid1."
    assert OKE_PLATFORM.profiles == {
        "gpuStack": ("oci-managed", ("oci-managed", "operator-managed"))
    }
    assert recipe_leaves() == (
        ("a100", "ol", "training", "any"),
        ("a100", "ubuntu", "training", "any"),
        ("a100", "ubuntu", "training", "kubeflow"),
        ("gb200", "ol", "inference", "any"),
        ("gb200", "ol", "training", "any"),
        ("gb200", "ubuntu", "inference", "any"),
        ("gb200", "ubuntu", "inference", "dynamo"),
        ("gb200", "ubuntu", "training", "any"),
        ("gb200", "ubuntu", "training", "kubeflow"),
        ("l40s", "ol", "inference", "any"),
        ("l40s", "ol", "training", "any"),
    )


# --------------------------------------------------------------------------- prepare


def cluster(**kw) -> ClusterSpec:
    base = dict(
        name="oke-a",
        criteria=Criteria(service="oke", accelerator="gb200", os="ubuntu", intent="training"),
        source="clusters.yaml",
    )
    base.update(kw)
    return ClusterSpec(**base)


def refusal(**kw) -> str:
    with pytest.raises(GpuclusterError) as exc:
        prepare(cluster(**kw))
    text = str(exc.value)
    assert "file=clusters.yaml cluster=oke-a" in text
    return text


def test_prepare_defaults_the_existing_kubeconfig_and_does_not_mutate_input():
    given = cluster()
    out = prepare(given)
    assert (out.existing.kubeconfig_path, out.existing.context) == ("~/.kube/config", None)
    assert given.existing is None
    assert out is not given and out.pools == [] and out.region is None


@pytest.mark.parametrize("path", ["~/.kube/oke.yaml", "/etc/kubernetes/admin.conf", "~"])
def test_prepare_accepts_absolute_and_home_kubeconfigs(path):
    out = prepare(cluster(existing=ExistingCluster(kubeconfig_path=path, context="ctx-1")))
    assert (out.existing.kubeconfig_path, out.existing.context) == (path, "ctx-1")


@pytest.mark.parametrize(
    "path, message",
    [
        ("kube/oke.yaml", "'kube/oke.yaml' is a relative path"),
        ("./oke.yaml", "'./oke.yaml' is a relative path"),
        ("~oracle/.kube/config", "'~oracle/.kube/config' is a relative path"),
        ("", "existing.kubeconfig is empty"),
        ("   ", "existing.kubeconfig is empty"),
        (" ~/.kube/config", "has surrounding whitespace or control characters"),
        ("/tmp/a\nb", "has surrounding whitespace or control characters"),
    ],
)
def test_prepare_refuses_bad_kubeconfig_paths(path, message):
    text = refusal(existing=ExistingCluster(kubeconfig_path=path))
    assert "key=existing.kubeconfig" in text and message in text


@pytest.mark.parametrize("context", ["", "  ", "oke\tprod", " oke"])
def test_prepare_refuses_bad_contexts(context):
    text = refusal(existing=ExistingCluster(context=context))
    assert (
        "key=existing.context" in text
        and "is empty or has surrounding whitespace or control characters" in text
    )


def test_prepare_refuses_pools_and_region():
    text = refusal(pools=[NodePool(name="gpu", vm_size="BM.GPU.GB200.4", node_count=4)])
    assert "key=pools" in text and "does not create node pools" in text and "(1 given: gpu)" in text
    text = refusal(region="us-ashburn-1")
    assert "key=region" in text and "region 'us-ashburn-1' has no effect on an OKE cluster" in text


@pytest.mark.parametrize(
    "profile, key, message",
    [
        (
            {"gpuStack": "azure-managed"},
            "profile.gpuStack",
            "unknown value 'azure-managed' for profile gpuStack",
        ),
        ({"driverMode": "x"}, "profile.driverMode", "unknown profile 'driverMode' for service oke"),
    ],
)
def test_prepare_refuses_unknown_profiles(profile, key, message):
    # profile names/values are checked by the core against Platform.profiles, before the hook
    with registered() as kit, pytest.raises(GpuclusterError) as exc:
        kit.prepare(cluster(profile=profile))
    text = str(exc.value)
    assert "file=clusters.yaml cluster=oke-a" in text
    assert f"key={key}" in text and message in text


def test_prepare_settings():
    assert prepare(cluster(settings={"nvidiaGpuPluginAddon": "absent"})).settings == {
        "nvidiaGpuPluginAddon": "absent"
    }
    # setting names are checked by the core against Platform.settings, before the hook
    with registered() as kit, pytest.raises(GpuclusterError) as exc:
        kit.prepare(cluster(settings={"rails": []}))
    text = str(exc.value)
    assert (
        "file=clusters.yaml cluster=oke-a key=settings.rails: unknown setting 'rails' for service oke"
        in text
    )
    assert "(allowed: nvidiaGpuPluginAddon, imageDriverParams, gateImage, validate)" in text
    text = refusal(settings={"nvidiaGpuPluginAddon": "UPDATING"})
    assert "key=settings.nvidiaGpuPluginAddon" in text and "allowed: installed, absent" in text


@pytest.mark.parametrize(
    "criteria, key, message",
    [
        (
            dict(accelerator="h100"),
            "criteria.accelerator",
            "OKE recipes exist for accelerator a100, gb200, l40s only, not 'h100'",
        ),
        (dict(os="rhel"), "criteria.os", "OKE recipes exist for os ol, ubuntu only, not 'rhel'"),
        (
            dict(accelerator="a100", os="ol", intent="inference"),
            "criteria",
            "there is no OKE recipe for accelerator a100, os ol, intent inference",
        ),
        (
            dict(accelerator="l40s", os="ubuntu", intent="training"),
            "criteria",
            "there is no OKE recipe for accelerator l40s, os ubuntu, intent training",
        ),
    ],
)
def test_prepare_refuses_criteria_without_an_oke_recipe(criteria, key, message):
    crit = dataclasses.replace(
        Criteria(service="oke", accelerator="gb200", os="ubuntu", intent="training"), **criteria
    )
    text = refusal(criteria=crit)
    assert f"key={key}:" in text and message in text
    if key == "criteria":
        assert "gb200/ubuntu/training/kubeflow" in text and "l40s/ol/inference" in text


def test_cluster_file_errors_name_the_file_and_key(tmp_path):
    doc = {
        "clusters": [
            {
                "name": "oke-a",
                "criteria": {
                    "service": "oke",
                    "accelerator": "gb200",
                    "os": "ubuntu",
                    "intent": "training",
                },
                "existing": {"kubeconfig": "oke.kubeconfig"},
            }
        ]
    }
    with (
        registered() as kit,
        pytest.raises(GpuclusterError) as exc,
    ):  # the core refuses it for every platform, while parsing
        kit.clusters(doc, source="gpucluster.yaml", root=tmp_path)
    assert str(exc.value).startswith(
        "error[input] file=gpucluster.yaml cluster=oke-a key=clusters[0].existing.kubeconfig:"
    )


# --------------------------------------------------------------------------- detect


def node(name: str, provider_id: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"providerID": provider_id} if provider_id else {}}


def detect(tmp_path: Path, nodes: dict):
    """``gpucluster detect --nodes-json`` of ``nodes``, as JSON (code 0) or the error line (code 2)."""
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(nodes))
    with registered() as kit:
        result = kit.cli("detect", "--nodes-json", str(path), "--format", "json")
    return json.loads(result.out) if result.code == 0 else result


def test_the_platforms_declare_distinct_provider_prefixes():
    with registered() as kit:
        prefixes = {
            s: p.provider_id_prefix for s, p in kit.platforms().items() if p.provider_id_prefix
        }
    assert prefixes == {"aks": "azure://", "nvke": "nico://", "oke": "ocid1."}


def test_detect_maps_instance_ocids_to_oke(tmp_path):
    nodes = {
        "items": [
            node("10.0.10.12", "ocid1.instance.oc1.iad.anuwcljt5example1"),
            node("10.0.10.13", "ocid1.instance.oc1.iad.anuwcljt5example2"),
            node("virtual-node-1", ""),
        ]
    }
    found = detect(tmp_path, nodes)
    assert found["service"] == "oke"
    assert found["nodes"] == {"oke": ["10.0.10.12", "10.0.10.13"]}
    assert found["unmatched"] == [{"node": "virtual-node-1", "providerID": ""}]


def test_detect_refuses_mixed_platforms(tmp_path):
    nodes = {
        "items": [node("a", "ocid1.instance.oc1.phx.x"), node("b", "azure:///subscriptions/s/vm/b")]
    }
    result = detect(tmp_path, nodes)
    assert result.code == 2 and result.out == ""
    result.stderr.fnmatch_lines(["error[[]*: nodes belong to several platforms (aks: b; oke: a)*"])

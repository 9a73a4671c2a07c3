"""Hostile input is refused: bad input and policy holes, one test per attack.

Each test drives the public entry points (cluster file -> ``load_clusters`` -> ``build_plans``,
RecipeResult files, the CLI) with one hostile input and asserts the exact refusal: exit code 2 /
GpuclusterError naming file, cluster, component and key.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import yaml

from gpucluster.cli import main as cli_main
from gpucluster.errors import GpuclusterError
from gpucluster.inputs.config import load_clusters
from gpucluster.model import Criteria
from gpucluster.pipeline import build_plans
from gpucluster.recipes import layering, recipe, recipe_result_writer
from gpucluster.recipes.catalog import load_catalog

AKS_CRITERIA = "{service: aks, accelerator: h100, os: ubuntu, intent: training}"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def aks_recipe_doc(catalog):
    r = recipe.resolve(
        Criteria(service="aks", accelerator="h100", os="ubuntu", intent="training"), catalog
    )
    return recipe_result_writer.to_document(r, layering.effective_components(r, catalog))


def _ref(doc, name):
    return next(r for r in doc["componentRefs"] if r["name"] == name)


def _write_recipe_cluster(tmp_path: Path, doc) -> Path:
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    cfg = tmp_path / "gpucluster.yaml"
    cfg.write_text("clusters:\n  - name: lab\n    recipe: recipe.yaml\n")
    return cfg


def _problems(cfg: Path):
    with pytest.raises(GpuclusterError) as exc:
        build_plans(load_clusters(str(cfg)))
    return exc.value.problems


# --------------------------------------------------------------------------- RecipeResult files


@pytest.mark.parametrize("value", ["false", "no", 0])
def test_recipe_result_enabled_must_be_boolean(tmp_path, aks_recipe_doc, value):
    """A non-boolean ``overrides.enabled`` used to install the component and pass the string to its chart."""
    doc = copy.deepcopy(aks_recipe_doc)
    _ref(doc, "network-operator").setdefault("overrides", {})["enabled"] = value
    [p] = _problems(_write_recipe_cluster(tmp_path, doc))
    assert p.component == "network-operator"
    assert p.key.endswith(".overrides.enabled") and p.key.startswith("componentRefs[")
    assert p.file.endswith("recipe.yaml") and p.cluster == "lab"
    assert "true or false" in p.allowed


@pytest.mark.parametrize(
    "field,value",
    [
        ("valuesFile", "../../../../../../../../etc/hostname"),
        ("valuesFile", "/etc/hostname"),
        ("manifestFiles", "ESCAPE"),
        ("preManifestFiles", "ABSOLUTE"),
    ],
)
def test_recipe_result_catalog_paths_cannot_escape(tmp_path, aks_recipe_doc, field, value):
    """``..``/absolute catalog references used to fail later with a message naming nothing."""
    outside = tmp_path / "evil.yaml.j2"
    outside.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: evil, namespace: default}\n"
    )
    core = Path(recipe.__file__).parent / "catalog"
    if value == "ESCAPE":
        value = [os.path.relpath(tmp_path / "evil.yaml", core)]
    elif value == "ABSOLUTE":
        value = [str(tmp_path / "evil.yaml")]
    doc = copy.deepcopy(aks_recipe_doc)
    _ref(doc, "gpu-operator")[field] = value
    [p] = _problems(_write_recipe_cluster(tmp_path, doc))
    assert p.component == "gpu-operator" and p.cluster == "lab" and p.file.endswith("recipe.yaml")
    assert p.key.startswith("componentRefs[") and field in p.key


@pytest.mark.parametrize("refs", [-1, "gpu-operator", {"name": "gpu-operator"}])
def test_recipe_result_component_refs_must_be_a_list(tmp_path, aks_recipe_doc, refs):
    """``componentRefs: -1`` was a TypeError (error[internal]) in the reading of the file's intent."""
    doc = copy.deepcopy(aks_recipe_doc)
    doc["componentRefs"] = refs
    [p] = _problems(_write_recipe_cluster(tmp_path, doc))
    assert p.key == "componentRefs" and "must be a non-empty list" in p.message


@pytest.mark.parametrize(
    "field, value",
    [
        ("valuesFile", "a" * 3000),
        ("valuesFile", "components/" + "b" * 256 + "/values.yaml"),
        ("manifestFiles", ["c" * 3000]),
        ("valuesFile", "components/gpu-operator/\x00.yaml"),
    ],
)
def test_recipe_result_paths_the_system_cannot_look_up_are_one_line(
    tmp_path, aks_recipe_doc, field, value, capsys
):
    """A catalog path with a name over 255 bytes was ``OSError [Errno 36]`` with the install path
    printed (error[internal]); now one error line naming the key, without the install path."""
    doc = copy.deepcopy(aks_recipe_doc)
    _ref(doc, "gpu-operator")[field] = value
    cfg = _write_recipe_cluster(tmp_path, doc)
    [p] = _problems(cfg)
    assert p.component == "gpu-operator" and field in p.key and p.key.startswith("componentRefs[")
    assert cli_main(["plan", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    [line] = err.splitlines()
    assert line.startswith("error[input] ") and f".{field}" in line, line
    assert str(Path(load_catalog.__code__.co_filename).parent) not in line


@pytest.mark.parametrize(
    "field,value",
    [
        ("source", "http://charts.example.com/nvidia"),
        ("source", "file:///etc"),
        ("namespace", "Bad_NS"),
        ("namespace", "a" * 64),
        ("chart", "gpu operator"),
        ("version", "latest; rm -rf /"),
    ],
)
def test_recipe_result_chart_facts_are_validated(tmp_path, aks_recipe_doc, field, value):
    """Chart facts of a RecipeResult get the registry's rules (https/oci, DNS-1123 namespace, ...)."""
    doc = copy.deepcopy(aks_recipe_doc)
    _ref(doc, "gpu-operator")[field] = value
    [p] = _problems(_write_recipe_cluster(tmp_path, doc))
    assert p.component == "gpu-operator" and p.key.endswith(f".{field}")
    assert p.allowed


def test_recipe_result_profile_message_uses_yaml_spelling(tmp_path, aks_recipe_doc):
    doc = copy.deepcopy(aks_recipe_doc)
    doc["metadata"]["selectedProfile"]["value"] = "operator-managed"
    problems = _problems(_write_recipe_cluster(tmp_path, doc))
    assert (
        "driver.enabled=false" in problems[0].message and "owns it as true" in problems[0].message
    )


# --------------------------------------------------------------------------- Terraform variables


def _cluster_file(tmp_path: Path, body: str, criteria: str = AKS_CRITERIA) -> Path:
    cfg = tmp_path / "gpucluster.yaml"
    cfg.write_text(f"clusters:\n  - name: lab\n    criteria: {criteria}\n" + body)
    return cfg


def test_one_terraform_variable_cannot_bind_two_values(tmp_path):
    """The runtime stack declares each variable once (first default wins), so a second binding
    silently fed gpu-operator's driver version into the DRA driver's image tag."""
    cfg = _cluster_file(
        tmp_path,
        "    overrides:\n      variables:\n        'gpuoperator:driver.version': v\n        'dradriver:image.tag': v\n",
    )
    [p] = _problems(cfg)
    assert p.cluster == "lab" and p.file == str(cfg)
    assert p.key == "clusters[0].overrides.variables.gpuoperator:driver.version"
    assert "'v'" in p.message and "nvidia-dra-driver-gpu" in p.message and "image.tag" in p.message


@pytest.mark.parametrize("name", ["kubeconfig_path", "kube_context"])
def test_runtime_stack_variable_names_are_reserved(tmp_path, name):
    cfg = _cluster_file(
        tmp_path,
        f"    overrides:\n      variables:\n        'gpuoperator:driver.version': {name}\n",
    )
    with pytest.raises(GpuclusterError) as exc:
        load_clusters(str(cfg))
    [p] = exc.value.problems
    assert p.key == "clusters[0].overrides.variables.gpuoperator:driver.version"
    assert name in p.message and "runtime stack" in p.message


# --------------------------------------------------------------------------- NVKE

NVKE_CRITERIA = "{service: nvke, accelerator: gb200, os: ubuntu, intent: training}"
NVKE_RAILS = (
    "    settings:\n"
    "      rails: [{name: mlx5_0, rootDevice: '0000:03:00.0'}, {name: mlx5_1, rootDevice: '0002:03:00.0'}]\n"
)


@pytest.mark.parametrize("tag", ["0.5.1-rc1", "v0.5.1-rc.2", "0.5.1-alpha"])
def test_nvke_refuses_dra_prerelease_of_the_minimum(tmp_path, tag):
    """0.5.1-rc1 sorts before 0.5.1: policy passed it while the min-version gate waits forever."""
    cfg = _cluster_file(
        tmp_path,
        NVKE_RAILS + f"    overrides: {{set: ['dradriver:image.tag={tag}']}}\n",
        NVKE_CRITERIA,
    )
    [p] = _problems(cfg)
    assert (p.id, p.component, p.key) == ("NVKE-DRA-VERSION", "nvidia-dra-driver-gpu", "image.tag")
    assert tag in p.message


@pytest.mark.parametrize("tag", ["0.5.1", "v0.5.1", "0.5.1+build.7", "0.5.2-rc1", "0.6.0"])
def test_nvke_accepts_dra_at_or_above_the_minimum(tmp_path, tag):
    cfg = _cluster_file(
        tmp_path,
        NVKE_RAILS + f"    overrides: {{set: ['dradriver:image.tag={tag}']}}\n",
        NVKE_CRITERIA,
    )
    [plan] = build_plans(load_clusters(str(cfg)))
    assert plan.components["nvidia-dra-driver-gpu"].values["image"]["tag"] == tag


def test_nvke_numvfs_boundary(tmp_path):
    ok = _cluster_file(
        tmp_path, NVKE_RAILS + "      numVfs: 8\n      firmwareNumVfs: 8\n", NVKE_CRITERIA
    )
    build_plans(load_clusters(str(ok)))
    bad = _cluster_file(
        tmp_path, NVKE_RAILS + "      numVfs: 9\n      firmwareNumVfs: 8\n", NVKE_CRITERIA
    )
    [p] = _problems(bad)
    assert (p.id, p.key) == ("NVKE-SRIOV-NUMVFS", "clusters[0].settings.numVfs")


@pytest.mark.parametrize(
    "subnet,block", [("10.255.0.0/32", 16), ("10.255.0.0/30", 16), ("10.255.0.0/28", 16)]
)
def test_nvke_rail_subnet_must_hold_a_node_block(tmp_path, subnet, block):
    """A rail IPPool smaller than one node's block (plus network and gateway) gives no node an address."""
    body = (
        "    settings:\n"
        f"      perNodeBlockSize: {block}\n"
        f"      rails: [{{name: mlx5_0, rootDevice: '0000:03:00.0', subnet: '{subnet}'}}]\n"
    )
    with pytest.raises(GpuclusterError) as exc:
        build_plans(load_clusters(str(_cluster_file(tmp_path, body, NVKE_CRITERIA))))
    [p] = exc.value.problems
    assert p.key == "clusters[0].settings.rails[0].subnet" and p.cluster == "lab"
    assert subnet in p.message and "perNodeBlockSize" in p.message


def test_nvke_rail_subnet_exactly_large_enough(tmp_path):
    body = "    settings:\n      perNodeBlockSize: 14\n      rails: [{name: mlx5_0, rootDevice: '0000:03:00.0', subnet: '10.255.0.0/28'}]\n"
    [plan] = build_plans(load_clusters(str(_cluster_file(tmp_path, body, NVKE_CRITERIA))))
    text = "".join(plan.node("sriov-ib-networks-manifests").local_chart.files.values())
    assert "subnet: 10.255.0.0/28" in text and "perNodeBlockSize: 14" in text


def test_nvke_accepts_the_core_gate_image_setting(tmp_path):
    """settings.gateImage is a core setting (every platform's gate Jobs); NVKE refused it as unknown."""
    cfg = _cluster_file(
        tmp_path,
        NVKE_RAILS + "      gateImage: myregistry.example.com/kubectl:v1.34.1\n",
        NVKE_CRITERIA,
    )
    [plan] = build_plans(load_clusters(str(cfg)))
    gates = [n for n in plan.nodes if n.kind == "gate"]
    assert gates and all(
        n.values["image"] == "myregistry.example.com/kubectl:v1.34.1" for n in gates
    )


def test_nvke_cluster_level_findings_use_component_dash(tmp_path):
    cfg = _cluster_file(tmp_path, NVKE_RAILS + "    kubernetesVersion: '1.33'\n", NVKE_CRITERIA)
    [p] = _problems(cfg)
    assert (p.id, p.component, p.key) == ("NVKE-K8S-VERSION", "-", "clusters[0].kubernetesVersion")


def test_nvke_per_node_block_size_minimum_is_two(tmp_path):
    """nv-ipam refuses perNodeBlockSize below 2."""
    cfg = _cluster_file(tmp_path, NVKE_RAILS + "      perNodeBlockSize: 1\n", NVKE_CRITERIA)
    with pytest.raises(GpuclusterError) as exc:
        load_clusters_and_build(cfg)
    [p] = exc.value.problems
    assert p.key == "clusters[0].settings.perNodeBlockSize" and "at least 2" in p.message


def load_clusters_and_build(cfg: Path):
    return build_plans(load_clusters(str(cfg)))


# --------------------------------------------------------------------------- cluster file


def _config_problem(tmp_path: Path, body: str, criteria: str = AKS_CRITERIA):
    cfg = _cluster_file(tmp_path, body, criteria)
    with pytest.raises(GpuclusterError) as exc:
        load_clusters(str(cfg))
    [p] = exc.value.problems
    assert p.file == str(cfg) and p.cluster == "lab"
    return p


@pytest.mark.parametrize("version", ["01.34", "1.034", "0.34"])
def test_kubernetes_version_without_leading_zeros(tmp_path, version):
    p = _config_problem(tmp_path, f"    kubernetesVersion: '{version}'\n")
    assert p.key == "clusters[0].kubernetesVersion" and version in p.message


POOLS = "    pools:\n      - {name: system, vmSize: Standard_D8s_v5, gpu: false}\n      - {name: gpu, vmSize: Standard_ND96isr_H100_v5, %s}\n"


@pytest.mark.parametrize(
    "pool,key",
    [
        ("taints: ['ä/b=c:NoSchedule']", "clusters[0].pools[1].taints[0]"),
        ("taints: ['nvidia.com/gpu=pre sent:NoSchedule']", "clusters[0].pools[1].taints[0]"),
        ("taints: ['-bad=x:NoExecute']", "clusters[0].pools[1].taints[0]"),
        ("labels: {'bad key!': x}", "clusters[0].pools[1].labels.bad key!"),
        ("labels: {team: 'two words'}", "clusters[0].pools[1].labels.team"),
        ("nodeCount: true", "clusters[0].pools[1].nodeCount"),
    ],
)
def test_pool_taints_and_labels_are_kubernetes_valid(tmp_path, pool, key):
    """Pool taints/labels reach AKS and the derived tolerations verbatim; invalid ones failed only at apply."""
    p = _config_problem(tmp_path, POOLS % pool)
    assert p.key == key


def test_pool_taint_key_only_form_still_parses(tmp_path):
    cfg = _cluster_file(
        tmp_path, POOLS % "taints: ['dedicated:NoSchedule', 'nvidia.com/gpu=present:NoSchedule']"
    )
    [c] = load_clusters(str(cfg))
    assert [str(t) for t in c.pools[1].taints] == [
        "dedicated=:NoSchedule",
        "nvidia.com/gpu=present:NoSchedule",
    ]


def test_empty_string_message(tmp_path):
    p = _config_problem(tmp_path, "    region: ''\n")
    assert p.message == "'clusters[0].region' must be a non-empty string, not an empty string"


# --------------------------------------------------------------------------- AKS settings, detect


def test_aks_refuses_unknown_settings(tmp_path):
    """A misspelt setting (gateImages) was silently ignored on AKS."""
    cfg = _cluster_file(tmp_path, "    settings: {gateImages: myacr.azurecr.io/kubectl:v1.34.1}\n")
    [p] = _problems(cfg)
    assert (p.cluster, p.key) == (
        "lab",
        "clusters[0].settings.gateImages",
    ) and "gateImage" in p.allowed


def test_aks_accepts_gate_image_setting(tmp_path):
    cfg = _cluster_file(tmp_path, "    settings: {gateImage: myacr.azurecr.io/kubectl:v1.34.1}\n")
    [plan] = build_plans(load_clusters(str(cfg)))
    assert {n.values["image"] for n in plan.nodes if n.kind == "gate"} == {
        "myacr.azurecr.io/kubectl:v1.34.1"
    }


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe{}",
        b"[" * 100000 + b"]" * 100000,
        b'{"items": [{"metadata": [1], "spec": {"providerID": "nico://a"}}]}',
        b'{"items": [{"metadata": {"name": "a"}, "spec": "nico://a"}]}',
    ],
)
def test_detect_bad_nodes_file_exits_2_without_traceback(tmp_path, capsys, content):
    f = tmp_path / "nodes.json"
    f.write_bytes(content)
    assert cli_main(["detect", "--nodes-json", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error[input] file=") and "Traceback" not in err and str(f) in err


# --------------------------------------------------------------------------- policy gaps


def test_profile_owned_value_must_keep_its_type(tmp_path):
    """1 == True in Python; a profile-owned boolean overridden with the integer 1 is a different value."""
    cfg = _cluster_file(
        tmp_path, "    overrides: {set: ['nvsentinel:labeler.assumeDriverInstalled=1']}\n"
    )
    problems = _problems(cfg)
    assert [(p.id, p.component, p.key) for p in problems] == [
        ("PROFILE-OWNED", "nvsentinel", "labeler.assumeDriverInstalled")
    ]


@pytest.mark.parametrize(
    "sets,component,key",
    [
        (
            [
                "gpuoperator:hostPaths.driverInstallDir=/run/nvidia/driver/../x",
                "dradriver:nvidiaDriverRoot=/run/nvidia/x",
            ],
            "gpu-operator",
            "hostPaths.driverInstallDir",
        ),
        (
            ["dradriver:nvidiaDriverRoot=/run/nvidia/../nvidia/driver"],
            "nvidia-dra-driver-gpu",
            "nvidiaDriverRoot",
        ),
    ],
)
def test_driver_roots_with_dotdot_are_refused(tmp_path, sets, component, key):
    """Kubernetes refuses hostPath volumes whose path contains '..'; normalizing hid that.
    (NVKE: the operator owns the driver and no profile owns the roots.)"""
    cfg = _cluster_file(tmp_path, NVKE_RAILS + f"    overrides: {{set: {sets!r}}}\n", NVKE_CRITERIA)
    problems = [p for p in _problems(cfg) if p.id == "GPU-DRIVER-ROOT"]
    assert [(p.component, p.key) for p in problems] == [(component, key)]
    assert "'..'" in problems[0].message


def test_nvke_ofed_driver_below_operator_section_is_refused(tmp_path):
    body = (
        NVKE_RAILS
        + "    overrides: {values: [{component: networkoperator, values: {operator: {extra: {ofedDriver: {deploy: true}}}}}]}\n"
    )
    [p] = _problems(_cluster_file(tmp_path, body, NVKE_CRITERIA))
    assert (p.id, p.key) == ("NVKE-OFED-DRIVER", "operator.extra.ofedDriver")


def test_nvke_operator_ofed_driver_init_container_settings_pass(tmp_path):
    body = (
        NVKE_RAILS
        + "    overrides: {values: [{component: networkoperator, values: {operator: {ofedDriver: {initContainer: {enable: false}}}}}]}\n"
    )
    [plan] = build_plans(load_clusters(str(_cluster_file(tmp_path, body, NVKE_CRITERIA))))
    assert plan.components["network-operator"].values["operator"]["ofedDriver"] == {
        "initContainer": {"enable": False}
    }


# --------------------------------------------------------------------------- plugin failures name the cluster


@pytest.mark.parametrize(
    "hook", ["gpucluster_gates", "gpucluster_manifests", "gpucluster_policy_checks"]
)
def test_plugin_failure_in_a_cluster_hook_names_plugin_and_cluster(tmp_path, monkeypatch, hook):
    import sys
    import types

    from gpucluster import plugins
    from gpucluster.sdk import hookimpl

    mod = types.ModuleType("b1_failing_plugin")

    def broken(cluster, recipe, components):
        raise RuntimeError("boom")

    setattr(mod, hook, hookimpl(broken))
    monkeypatch.setitem(sys.modules, "b1_failing_plugin", mod)
    monkeypatch.setenv("GPUCLUSTER_PLUGINS", "b1_failing_plugin")
    plugins.get_plugin_manager(reload=True)
    try:
        cfg = _cluster_file(tmp_path, "")
        [p] = _problems(cfg)
    finally:
        monkeypatch.delenv("GPUCLUSTER_PLUGINS")
        plugins.get_plugin_manager(reload=True)
    assert p.cluster == "lab"
    assert p.message == f"plugin 'b1_failing_plugin' failed in hook {hook}: RuntimeError: boom"


# --------------------------------------------------------------------------- criteria a platform does not declare


@pytest.mark.parametrize(
    "argv,key,value",
    [
        (["--service", "aks", "--accelerator", "gb200"], "criteria.accelerator", "gb200"),
        (["--service", "aks", "--accelerator", "a100"], "criteria.accelerator", "a100"),
        (["--service", "nvke", "--accelerator", "h100"], "criteria.accelerator", "h100"),
        (["--service", "nvke", "--intent", "inference"], "criteria.intent", "inference"),
        (["--service", "aks", "--os", "ol"], "criteria.os", "ol"),
    ],
)
def test_recipe_refuses_criteria_the_platform_does_not_declare(capsys, argv, key, value):
    """A wildcard overlay of another platform (gb200-any, a100-any, h100-any) used to be mixed in
    and printed as a recipe for a platform that has none for that accelerator/OS."""
    assert cli_main(["recipe", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"key={key}:" in err and f"'{value}'" in err and "(allowed: " in err


def test_cluster_file_refuses_aks_with_an_accelerator_aks_does_not_declare(tmp_path):
    [p] = _problems(_cluster_file(tmp_path, "", "{service: aks, accelerator: a100}"))
    assert (p.cluster, p.key) == ("lab", "clusters[0].criteria.accelerator") and "h100" in p.allowed


@pytest.mark.parametrize("value", ["no", "off", "0", "'False'", "disabled"])
def test_nodewright_tuning_toggle_must_be_boolean(tmp_path, value):
    """The Skyhook template reads tuningEnabled with not_false: 'no', 'off' or 0 rendered nvidia-tuned
    (a rebooting tuning profile the AKS recipes turn off) while the user meant to turn it off."""
    cfg = _cluster_file(
        tmp_path, f'    overrides: {{set: ["nodewrightcustomizations:tuningEnabled={value}"]}}\n'
    )
    [p] = _problems(cfg)
    assert (p.id, p.component, p.key) == (
        "GPU-TOGGLE-TYPE",
        "nodewright-customizations",
        "tuningEnabled",
    )


def test_nodewright_toggles_as_booleans_pass(tmp_path):
    cfg = _cluster_file(
        tmp_path,
        "    overrides: {set: ['nodewrightcustomizations:tuningEnabled=true', 'nodewrightcustomizations:autoTaintNewNodes=false']}\n",
    )
    [plan] = build_plans(load_clusters(str(cfg)))
    text = "".join(plan.node("nodewright-customizations-manifests").local_chart.files.values())
    assert "nvidia-tuned:" in text and "autoTaintNewNodes: false" in text


# --------------------------------------------------------------------------- AKS host MOFED with the network operator


def test_aks_operator_managed_host_mofed_breaks_peermem(tmp_path):
    """Seed: with the network operator's containerized DOCA OFED, useHostMofed=true makes the
    operator's driver container build nvidia-peermem against the wrong ib_core (modprobe fails):
    GPUDirect RDMA is lost. It passed silently."""
    cfg = _cluster_file(
        tmp_path,
        "    profile: {gpuStack: operator-managed}\n    overrides: {set: ['gpuoperator:driver.rdma.useHostMofed=true']}\n",
    )
    [p] = _problems(cfg)
    assert (p.id, p.component, p.key) == (
        "AKS-HOST-MOFED",
        "gpu-operator",
        "driver.rdma.useHostMofed",
    )
    assert "nvidia-peermem" in p.message and "useHostMofed=false" in p.fix


def test_aks_azure_managed_host_mofed_is_a_warning(tmp_path):
    """Inert while AKS owns the driver, but revives the bug on a switch to operator-managed."""
    cfg = _cluster_file(
        tmp_path, "    overrides: {set: ['gpuoperator:driver.rdma.useHostMofed=true']}\n"
    )
    [plan] = build_plans(load_clusters(str(cfg)))
    assert [(f.id, f.severity) for f in plan.findings] == [("AKS-HOST-MOFED", "warning")]


@pytest.mark.parametrize("alias", ["rdmamodules", "rdma-modules", "RdmaModules"])
def test_nvke_rdma_modules_enabled_twice_with_different_values(tmp_path, alias):
    """settings.rdmaModules.enabled=false plus an override enabling it: the override silently won."""
    body = (
        "    settings:\n      rails: [{name: mlx5_0, rootDevice: '0000:03:00.0'}]\n      rdmaModules: {enabled: false}\n"
        f"    overrides: {{set: ['{alias}:enabled=true']}}\n"
    )
    [p] = _problems(_cluster_file(tmp_path, body, NVKE_CRITERIA))
    assert (p.cluster, p.key) == (
        "lab",
        "clusters[0].settings.rdmaModules.enabled",
    ) and "clusters[0].overrides.set[0]" in p.message


def test_nvke_rdma_modules_disabled_both_ways_agrees(tmp_path):
    body = (
        "    settings:\n      rails: [{name: mlx5_0, rootDevice: '0000:03:00.0'}]\n      rdmaModules: {enabled: false}\n"
        "    overrides: {set: ['RdmaModules:enabled=false']}\n"
    )
    [plan] = build_plans(load_clusters(str(_cluster_file(tmp_path, body, NVKE_CRITERIA))))
    assert "rdma-modules" not in plan.components


def test_nvke_toolkit_env_value_must_be_a_string(tmp_path):
    """A YAML boolean in an env list passed the check but is not a Kubernetes EnvVar value (string):
    the API server rejects the ClusterPolicy."""
    body = NVKE_RAILS + (
        "    overrides:\n      values:\n        - component: gpuoperator\n          values:\n            toolkit:\n"
        "              env:\n                - {name: RUNTIME_CONFIG_SOURCE, value: file}\n"
        "                - {name: ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED, value: false}\n"
    )
    [p] = _problems(_cluster_file(tmp_path, body, NVKE_CRITERIA))
    assert (p.id, p.key) == (
        "NVKE-GPU-STACK",
        "toolkit.env.ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED",
    )


def test_unknown_service_names_the_cluster(tmp_path):
    [p] = _problems(_cluster_file(tmp_path, "", "{service: gke}"))
    assert (p.file, p.cluster, p.key) == (
        str(tmp_path / "gpucluster.yaml"),
        "lab",
        "clusters[0].criteria.service",
    )
    assert p.allowed == "aks, nvke, oke"


def test_terraform_variable_on_a_manifest_only_component_is_refused(tmp_path):
    """Manifest-only components are rendered at synth: the binding was recorded and then dropped."""
    cfg = _cluster_file(
        tmp_path, "    overrides: {variables: {'nodewrightcustomizations:tuningEnabled': tune}}\n"
    )
    [p] = _problems(cfg)
    assert (p.component, p.key) == (
        "nodewright-customizations",
        "clusters[0].overrides.variables.nodewrightcustomizations:tuningEnabled",
    )
    assert "manifest-only" in p.message


@pytest.mark.parametrize(
    "image", ["not an image; rm -rf /", "alpine/kubectl", "docker.io/alpine/kubectl:"]
)
def test_nvke_teardown_image_must_be_a_pinned_reference(tmp_path, image):
    """The teardown Job runs on terraform destroy; an unpullable image would hold the destroy until timeout."""
    body = NVKE_RAILS + f"      teardown: {{image: '{image}'}}\n"
    with pytest.raises(GpuclusterError) as exc:
        load_clusters_and_build(_cluster_file(tmp_path, body, NVKE_CRITERIA))
    [p] = exc.value.problems
    assert p.key == "clusters[0].settings.teardown.image" and "tag or digest" in p.allowed


# --------------------------------------------------------------------------- components a recipe disables


def test_recipe_result_rdma_opt_out_prunes_edges(tmp_path, aks_recipe_doc):
    """The seed's RDMA opt-out written into a RecipeResult (componentRef overrides.enabled: false)
    was refused by the graph ('gpu-operator depends on network-operator ... disable gpu-operator
    as well'), although edges to disabled components are pruned as AICR's bundler does."""
    doc = copy.deepcopy(aks_recipe_doc)
    for name in ("network-operator", "nodewright-customizations"):
        _ref(doc, name).setdefault("overrides", {})["enabled"] = False
        _ref(doc, name).pop("values", None)
    gpu = _ref(doc, "gpu-operator")
    gpu["overrides"].setdefault("driver", {}).setdefault("rdma", {})["useHostMofed"] = False
    gpu.pop("values", None)
    [plan] = build_plans(load_clusters(str(_write_recipe_cluster(tmp_path, doc))))
    assert (
        "network-operator" not in plan.components
        and "nodewright-customizations" not in plan.components
    )
    gpu_node = plan.node("gpu-operator")
    assert not {
        "network-operator-nicclusterpolicy-ready",
        "nodewright-customizations-manifests",
    } & set(gpu_node.depends_on)
    pruned = sorted((f.component, f.message) for f in plan.findings if f.id == "DEPENDENCY-PRUNED")
    assert [c for c, _ in pruned] == ["gpu-operator", "gpu-operator"]
    assert all(
        not any(d in ("network-operator", "nodewright-customizations") for d in n.depends_on)
        for n in plan.nodes
    )


def test_recipe_result_disabling_the_operator_of_a_manifest_only_component_is_refused(
    tmp_path, aks_recipe_doc
):
    doc = copy.deepcopy(aks_recipe_doc)
    _ref(doc, "nodewright-operator").setdefault("overrides", {})["enabled"] = False
    [p] = _problems(_write_recipe_cluster(tmp_path, doc))
    assert (p.component, p.key) == ("nodewright-customizations", "dependencyRefs")
    assert "nodewright-operator" in p.message


def test_yaml_merge_keys_are_refused_in_the_cluster_file(tmp_path):
    cfg = tmp_path / "gpucluster.yaml"
    cfg.write_text("clusters:\n  - <<: {name: lab}\n    criteria: {service: aks}\n")
    with pytest.raises(GpuclusterError) as exc:
        load_clusters(str(cfg))
    assert "merge keys (<<) are not allowed" in exc.value.problems[0].message


def test_gate_named_like_a_release_is_refused(tmp_path, monkeypatch):
    """Helm release names are per namespace, Terraform resource ids per stack: two releases with
    one id must never reach synthesis."""
    import sys
    import types

    from gpucluster import plugins
    from gpucluster.sdk import GateSpec, hookimpl

    mod = types.ModuleType("b1_clashing_gate")

    @hookimpl
    def gpucluster_gates(cluster, recipe, components):
        return [
            GateSpec(
                name="nfd",
                component="gpu-operator",
                kind="crd-established",
                name_of_object="x.example.com",
            )
        ]

    mod.gpucluster_gates = gpucluster_gates
    monkeypatch.setitem(sys.modules, "b1_clashing_gate", mod)
    monkeypatch.setenv("GPUCLUSTER_PLUGINS", "b1_clashing_gate")
    plugins.get_plugin_manager(reload=True)
    try:
        [p] = _problems(_cluster_file(tmp_path, ""))
    finally:
        monkeypatch.delenv("GPUCLUSTER_PLUGINS")
        plugins.get_plugin_manager(reload=True)
    assert p.cluster == "lab" and p.message == "two releases are both named 'nfd'"


def test_recipe_result_edited_overrides_with_stale_values_are_refused(tmp_path, aks_recipe_doc):
    """The seed's DRA-only overlay written into a gpucluster RecipeResult's overrides was silently
    dropped: the stale hydrated 'values' of the same componentRef won, so the cluster kept the
    device-plugin policy."""
    doc = copy.deepcopy(aks_recipe_doc)
    dra = _ref(doc, "nvidia-dra-driver-gpu")
    dra["overrides"]["gpuResourcesEnabledOverride"] = True
    dra["overrides"].setdefault("resources", {}).setdefault("gpus", {})["enabled"] = True
    _ref(doc, "gpu-operator")["overrides"].setdefault("devicePlugin", {})["enabled"] = False
    problems = _problems(_write_recipe_cluster(tmp_path, doc))  # every edited componentRef at once
    assert {p.component for p in problems} == {"gpu-operator", "nvidia-dra-driver-gpu"}
    for p in problems:
        assert p.key.startswith("componentRefs[") and p.key.endswith("].values")
        assert "remove 'values'" in p.fix and p.file.endswith("recipe.yaml")


def test_recipe_result_dra_only_overlay_applies_without_values(tmp_path, aks_recipe_doc):
    doc = copy.deepcopy(aks_recipe_doc)
    dra = _ref(doc, "nvidia-dra-driver-gpu")
    dra["overrides"]["gpuResourcesEnabledOverride"] = True
    dra["overrides"].setdefault("resources", {}).setdefault("gpus", {})["enabled"] = True
    _ref(doc, "gpu-operator")["overrides"].setdefault("devicePlugin", {})["enabled"] = False
    for ref in doc["componentRefs"]:
        ref.pop("values", None)
    [plan] = build_plans(load_clusters(str(_write_recipe_cluster(tmp_path, doc))))
    assert plan.components["gpu-operator"].values["devicePlugin"]["enabled"] is False
    dra_values = plan.components["nvidia-dra-driver-gpu"].values
    assert (
        dra_values["gpuResourcesEnabledOverride"] is True
        and dra_values["resources"]["gpus"]["enabled"] is True
    )
    assert not [
        f for f in plan.findings if f.id == "POLICY-KEY-OVERRIDE"
    ]  # recipe-level, not a deployment override


def test_size_limit_holds_for_files_that_report_size_zero(tmp_path, monkeypatch):
    """/proc-style files report st_size 0; the limit must hold on what is actually read."""
    from gpucluster import yamlsafe

    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * 2000 + "\n")
    monkeypatch.setattr(yamlsafe, "MAX_INPUT_BYTES", 1000)
    real_stat = Path.stat

    def fake_stat(self, *args, **kwargs):
        st = real_stat(self, *args, **kwargs)
        if self == big:
            import os as _os

            return _os.stat_result(
                (st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, 0, 0, 0, 0)
            )
        return st

    monkeypatch.setattr(Path, "stat", fake_stat)
    with pytest.raises(GpuclusterError) as exc:
        yamlsafe.load_yaml_file(big, max_bytes=yamlsafe.MAX_INPUT_BYTES)
    assert "the limit is 1000 bytes" in exc.value.problems[0].message


# --------------------------------------------------------------------------- the working folder


@pytest.mark.parametrize(
    "argv",
    [
        ["plan"],
        ["graph"],
        ["validate", "--snapshot", "snapshot.json"],
        ["charts", "pull"],
        ["lint"],
        ["render"],
        ["snapshot"],
        ["upgrade-check", "--from", "old.yaml", "--to", "new.yaml"],
        ["images"],
        [
            "images",
            "--config",
            str(Path(__file__).parents[1] / "gpucluster" / "default_cluster.yaml"),
        ],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_a_deleted_working_folder_is_one_line(tmp_path, argv):
    """The shell's folder removed before the command starts: one ``error[input] key=cwd`` line
    naming it, exit 2 (was ``error[internal]`` FileNotFoundError, exit 70)."""
    import subprocess
    import sys

    gone = tmp_path / "gone"
    gone.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLUSTER_")}
    proc = subprocess.run(
        ["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(gone)]
        + [str(Path(sys.executable).parent / "gpucluster"), *argv],
        env={**env, "PWD": str(gone)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    command = "charts pull" if argv[0] == "charts" else argv[0]
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr == (
        f"error[input] key=cwd: the working folder '{gone}' cannot be used: No such file or "
        "directory (it was removed or made unreadable after the shell entered it) fix: cd into an "
        f"existing folder, then run gpucluster {command} again\n"
    )

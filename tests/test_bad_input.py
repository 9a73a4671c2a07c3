"""Bad input through the real entry points (load_clusters + build_plans, main.py, the CLI).

Every case must end in a GpuclusterError whose rendering names the file and the key (or the
line), and never in another exception type.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from gpucluster.errors import GpuclusterError
from gpucluster.inputs.config import load_clusters
from gpucluster.pipeline import build_plans

REPO = Path(__file__).resolve().parents[1]
CRITERIA = "criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}"


def cluster_file(tmp_path: Path, body: str, *, name: str = "gpucluster.yaml") -> Path:
    f = tmp_path / name
    f.write_text(
        "clusters:\n  - name: c1\n    "
        + CRITERIA
        + "\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
    )
    return f


def fails(path: Path | str) -> str:
    """Load + plan; return the rendered error (asserts it is a GpuclusterError)."""
    with pytest.raises(GpuclusterError) as exc:
        build_plans(load_clusters(str(path)))
    return exc.value.render()


def ok(path: Path):
    return build_plans(load_clusters(str(path)))


# --------------------------------------------------------------------------- cluster file


def test_malformed_yaml_names_file_and_line(tmp_path):
    f = tmp_path / "gpucluster.yaml"
    f.write_text("clusters:\n  - name: c1\n    criteria: {service: aks\n")
    text = fails(f)
    assert f"file={f}" in text and "invalid YAML: line" in text


def test_empty_cluster_file(tmp_path):
    f = tmp_path / "gpucluster.yaml"
    f.write_text("")
    assert "the cluster file is empty" in fails(f)


def test_huge_cluster_file(tmp_path):
    f = tmp_path / "gpucluster.yaml"
    f.write_text("# " + "x" * (1024 * 1024 + 10) + "\nclusters: []\n")
    text = fails(f)
    assert f"file={f}" in text and "the limit is 1048576 bytes" in text


def test_non_utf8_cluster_file(tmp_path):
    f = tmp_path / "gpucluster.yaml"
    f.write_bytes(b"clusters:\n  - name: c\xe9\n")
    text = fails(f)
    assert "is not UTF-8" in text and "0xe9" in text


def test_duplicate_keys_in_cluster_file(tmp_path):
    f = cluster_file(tmp_path, "overrides:\n  set: []\noverrides:\n  set: []\n")
    text = fails(f)
    assert "duplicate key 'overrides'" in text and f"file={f}" in text


@pytest.mark.parametrize(
    "body,needles",
    [
        (
            "overrides: [gpuoperator:driver.enabled=true]\n",
            ["overrides must be a mapping, not a list", "key=clusters[0].overrides"],
        ),
        (
            "overrides:\n  sets: []\n",
            ["unknown overrides key 'sets'", "key=clusters[0].overrides.sets"],
        ),
        ("overrides:\n  set: gpuoperator:x=1\n", ["overrides.set must be a list of strings"]),
        (
            "overrides:\n  set:\n    - gpuoperator: x\n",
            ["a set entry must be a string, not a dict", "key=clusters[0].overrides.set[0]"],
        ),
        (
            "overrides:\n  set: [gpuoperator:driver/enabled=true]\n",
            ["path segment 'driver/enabled'", "key=clusters[0].overrides.set[0]"],
        ),
        (
            "scheduling:\n  accelerated:\n    tolerations: nvidia.com/gpu:NoSchedule\n",
            ["tolerations must be a list", "key=clusters[0].scheduling.accelerated.tolerations"],
        ),
        (
            "scheduling:\n  accelerated:\n    tolerations: [nvidia.com/gpu]\n",
            ["has no ':Effect'", "key=clusters[0].scheduling.accelerated.tolerations[0]"],
        ),
        (
            "scheduling:\n  system:\n    nodeSelector: {pool: 1}\n",
            ["label values are strings", "key=clusters[0].scheduling.system.nodeSelector.pool"],
        ),
        (
            "overrides:\n  variables: {'gpuoperator:driver.version': 'count'}\n",
            ["reserved by Terraform"],
        ),
    ],
)
def test_wrong_types_and_shapes(tmp_path, body, needles):
    f = cluster_file(tmp_path, body)
    text = fails(f)
    assert f"file={f}" in text and "cluster=c1" in text
    for n in needles:
        assert n in text


@pytest.mark.parametrize(
    "entry,needle",
    [
        ("gpuoperater:driver.enabled=true", "unknown component or alias 'gpuoperater'"),
        ("k8s-nim-operator:x=1", "unknown component or alias 'k8s-nim-operator'"),
        ("dynamo-platform:x=1", "'dynamo-platform' is not part of the resolved recipe"),
    ],
)
def test_unknown_components_and_aliases(tmp_path, entry, needle):
    text = fails(cluster_file(tmp_path, f"overrides:\n  set: ['{entry}']\n"))
    assert needle in text and "key=clusters[0].overrides.set[0]" in text and "allowed:" in text


def test_conflicting_overrides(tmp_path):
    text = fails(
        cluster_file(
            tmp_path,
            """
            overrides:
              set:
                - networkoperator:enabled=false
                - networkoperator:operator.repository=x
                - gpuoperator:dcgm=off
                - gpuoperator:dcgm.enabled=true
            """,
        )
    )
    assert text.count("conflicting overrides") == 2
    assert "key=clusters[0].overrides.set[1]" in text and "key=clusters[0].overrides.set[3]" in text


def test_several_clusters_report_all_problems(tmp_path):
    f = tmp_path / "gpucluster.yaml"
    f.write_text(
        "clusters:\n"
        f"  - name: a\n    {CRITERIA}\n    overrides: {{set: ['nosuch:x=1']}}\n"
        f"  - name: b\n    {CRITERIA}\n    overrides: {{set: ['dradriver:resources.gpus.enabled=true']}}\n"
    )
    text = fails(f)
    assert "cluster=a" in text and "cluster=b" in text and "error[GPU-ADVERTISER]" in text


# --------------------------------------------------------------------------- override values files


def values_ref(tmp_path: Path, content: bytes | str, *, ref: str = "values/gpu.yaml") -> Path:
    target = tmp_path / ref
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        target.write_text(content)
    else:
        target.write_bytes(content)
    return cluster_file(
        tmp_path, f"overrides:\n  values:\n    - {{component: gpuoperator, file: {ref}}}\n"
    )


def test_values_file_is_applied(tmp_path):
    [plan] = ok(values_ref(tmp_path, "dcgm:\n  enabled: false\n"))
    assert plan.components["gpu-operator"].values["dcgm"]["enabled"] is False


@pytest.mark.parametrize(
    "content,needle",
    [
        ("dcgm: {enabled: false\n", "invalid YAML: line"),
        ("dcgm: 1\ndcgm: 2\n", "duplicate key 'dcgm'"),
        ("", "not an empty document"),
        ("- a\n- b\n", "not a list"),
        ("x: &a 1\ny: *a\n", "aliases"),
        ("1: x\n", "not a string"),
        ("when: 2026-01-01\n", "YAML date"),
        (b"dcgm:\n  enabled: \xff\n", "is not UTF-8"),
        ("enabled: false\n", "'enabled' cannot be given as a structured value"),
    ],
)
def test_bad_values_files(tmp_path, content, needle):
    text = fails(values_ref(tmp_path, content))
    assert needle in text
    assert "values/gpu.yaml" in text


def test_huge_values_file(tmp_path):
    text = fails(values_ref(tmp_path, "a: '" + "x" * (1024 * 1024) + "'\n"))
    assert "the limit is 1048576 bytes" in text and "values/gpu.yaml" in text


def test_missing_values_file(tmp_path):
    f = cluster_file(
        tmp_path, "overrides:\n  values:\n    - {component: gpuoperator, file: nope.yaml}\n"
    )
    assert "file not found" in fails(f)


def test_values_file_escaping_project_folder(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "up.yaml").write_text("a: 1\n")
    f = cluster_file(
        project, "overrides:\n  values:\n    - {component: gpuoperator, file: ../up.yaml}\n"
    )
    text = fails(f)
    assert (
        "resolves outside the project folder" in text
        and "key=clusters[0].overrides.values[0].file" in text
    )


def test_values_file_that_is_a_directory(tmp_path):
    (tmp_path / "values").mkdir()
    f = cluster_file(
        tmp_path, "overrides:\n  values:\n    - {component: gpuoperator, file: values}\n"
    )
    assert "is not a regular file" in fails(f)


# --------------------------------------------------------------------------- RecipeResult files


def recipe_doc(tmp_path) -> dict:
    """A RecipeResult written by gpucluster for the default AKS training cluster."""
    from gpucluster.pipeline import prepare_cluster, recipe_for_cluster
    from gpucluster.recipes import recipe_result_writer
    from gpucluster.recipes.catalog import load_catalog

    f = cluster_file(tmp_path, "", name="seed.yaml")
    cluster = prepare_cluster(load_clusters(str(f))[0])
    return recipe_result_writer.to_document(recipe_for_cluster(cluster, load_catalog()))


def recipe_cluster(tmp_path, content: bytes | str) -> Path:
    r = tmp_path / "recipe.yaml"
    if isinstance(content, str):
        r.write_text(content)
    else:
        r.write_bytes(content)
    f = tmp_path / "gpucluster.yaml"
    f.write_text("clusters:\n  - name: c1\n    recipe: recipe.yaml\n")
    return f


def test_recipe_result_roundtrip_is_accepted(tmp_path):
    doc = recipe_doc(tmp_path)
    [plan] = ok(recipe_cluster(tmp_path, yaml.safe_dump(doc)))
    assert plan.findings == []


@pytest.mark.parametrize(
    "content,needle",
    [
        ("kind: RecipeResult\napiVersion: [\n", "invalid YAML"),
        ("", "recipe.yaml"),
        (b"kind: RecipeResult\x00\xfe\n", "recipe.yaml"),
        ("kind: Recipe\napiVersion: aicr.run/v1beta2\n", "recipe.yaml"),
    ],
)
def test_bad_recipe_result_files(tmp_path, content, needle):
    text = fails(recipe_cluster(tmp_path, content))
    assert needle in text and "recipe.yaml" in text


def test_recipe_result_unknown_component(tmp_path):
    doc = recipe_doc(tmp_path)
    doc["componentRefs"].append({"name": "nosuch-operator", "type": "Helm"})
    text = fails(recipe_cluster(tmp_path, yaml.safe_dump(doc)))
    assert "nosuch-operator" in text and "recipe.yaml" in text


def test_stale_pre_flip_recipe_result_rejected(tmp_path):
    """An AKS RecipeResult generated before the driver-only default flip: no selected profile,
    the DRA root still baked at the operator container path. The RecipeResult reader applies the
    default gpuStack profile and refuses the contradicting profile-owned value."""
    doc = recipe_doc(tmp_path)
    del doc["metadata"]["selectedProfile"]
    for ref in doc["componentRefs"]:
        if ref["name"] == "nvidia-dra-driver-gpu":
            ref["overrides"]["nvidiaDriverRoot"] = "/run/nvidia/driver"
        if ref["name"] == "gpu-operator":
            ref["overrides"] = {}
    text = fails(recipe_cluster(tmp_path, yaml.safe_dump(doc)))
    assert (
        "recipe.yaml" in text
        and "component=nvidia-dra-driver-gpu" in text
        and "nvidiaDriverRoot" in text
    )


def test_stale_driver_root_override_rejected_naming_the_profile(tmp_path):
    text = fails(
        cluster_file(
            tmp_path, "overrides:\n  set: [dradriver:nvidiaDriverRoot=/run/nvidia/driver]\n"
        )
    )
    # the user's override flips a profile-owned key: PROFILE-OWNED names the profile value that sets it,
    # and the stale-recipe diagnosis of the same key (which would contradict it) is not repeated
    assert "error[PROFILE-OWNED]" in text and "key=nvidiaDriverRoot" in text
    assert "choose profile: {gpuStack: operator-managed}" in text
    assert "error[GPU-DRIVER-STALE-RECIPE]" not in text


def test_recipe_result_dual_advertiser_rejected(tmp_path):
    doc = recipe_doc(tmp_path)
    for ref in doc["componentRefs"]:
        if ref["name"] == "nvidia-dra-driver-gpu":
            ref["overrides"]["resources"] = {"gpus": {"enabled": True}}
            ref["overrides"]["gpuResourcesEnabledOverride"] = True
    text = fails(recipe_cluster(tmp_path, yaml.safe_dump(doc)))
    assert "error[GPU-ADVERTISER]" in text and "dual advertisement" in text


# --------------------------------------------------------------------------- processes


def run(args: list[str], cwd: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        CHECKPOINT_DISABLE="1",
        **env_extra,
    )
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_main_exits_2_without_traceback_and_writes_nothing(tmp_path):
    f = cluster_file(tmp_path, "overrides:\n  set: [gpuoperator:devicePlugin.enabled=false]\n")
    out = tmp_path / "out"
    proc = run(
        [sys.executable, str(REPO / "main.py")],
        tmp_path,
        {"GPUCLUSTER_CONFIG": str(f), "CDKTF_OUTDIR": str(out)},
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "error[GPU-ADVERTISER]" in proc.stderr and "cluster=c1" in proc.stderr
    assert not out.exists()


def test_main_bad_values_file_exits_2(tmp_path):
    f = values_ref(tmp_path, b"\xff\xfe")
    proc = run(
        [sys.executable, str(REPO / "main.py")],
        tmp_path,
        {"GPUCLUSTER_CONFIG": str(f), "CDKTF_OUTDIR": str(tmp_path / "out")},
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "is not UTF-8" in proc.stderr


def test_cli_plan_exits_2_without_traceback(tmp_path):
    f = cluster_file(
        tmp_path, "scheduling:\n  accelerated:\n    tolerations: [{operator: Exists}]\n"
    )
    proc = run([sys.executable, "-m", "gpucluster.cli", "plan", "--config", str(f)], tmp_path, {})
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "error[AKS-WILDCARD-TOLERATION]" in proc.stderr

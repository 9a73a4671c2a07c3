"""``gpucluster validate --snapshot``: the healthy default passes (exit 0); each fault fails (exit 1)
naming the check, the object and the field; the JSON evidence and the JUnit XML are valid against
the schemas shipped in the package (JSON Schema; the JUnit XSD with PyPI xmlschema)."""

from __future__ import annotations

import copy
import io
import json

import jsonschema
import pytest
import xmlschema
from validate_support import (
    HEALTHY_DEFAULT,
    NVKE,
    find,
    items_of,
    mutate,
    nvke_healthy,
    write_snapshot,
)

from gpucluster.cli import main
from gpucluster.live import validate as validate_mod

GPU_NODE = "aks-gpu-12345678-vmss000000"


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["validate", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def table_rows(out: str) -> list[tuple[str, str, str, str, str]]:
    """``(RESULT, CHECK, COMPONENT, object, field)`` of every check in validate's text table (a
    row, then its ``object ...`` / ``field ...`` lines; ``-`` when it names none)."""
    rows: list[list[str]] = []
    for line in out.splitlines()[2:-1]:
        words = line.split()
        if line[2:3] != " ":
            rows.append([*words[:3], "-", "-"])
        elif words[0] in ("object", "field"):
            for label, value in zip(words[::2], words[1::2], strict=True):
                rows[-1][3 if label == "object" else 4] = value
    return [tuple(r) for r in rows]


def healthy() -> list[dict]:
    return items_of(HEALTHY_DEFAULT.read_text(encoding="utf-8"))


def _failing(doc: dict) -> list[dict]:
    return [c for c in doc["checks"] if c["verdict"] == "fail"]


def test_healthy_default_passes(tmp_path):
    junit = tmp_path / "junit.xml"
    code, out, err = run("--snapshot", str(HEALTHY_DEFAULT), "--junit", str(junit))
    assert (code, err) == (0, "") and "PASSED" in out
    code, out, _ = run("--snapshot", str(HEALTHY_DEFAULT), "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, validate_mod.report_schema())
    assert (
        doc["result"] == "pass"
        and doc["summary"]["fail"] == 0
        and doc["summary"]["checks"] == len(doc["checks"])
    )
    assert doc["cluster"]["identity"]["kubeSystemUid"] and len(doc["plan"]["fingerprint"]) == 64
    assert {c["check"] for c in doc["checks"]} >= {
        "aicr-health",
        "gate",
        "gpu-advertiser",
        "gpu-count",
        "runtime-class",
        "placement",
    }
    skipped = [c for c in doc["checks"] if c["verdict"] == "skip"]
    assert [c["id"] for c in skipped] == [
        "aicr-health/nodewright-operator"
    ] and "skyhook" in skipped[0]["reason"]
    xmlschema.XMLSchema(validate_mod.junit_schema_text()).validate(str(junit))


def _set_state(state):
    return lambda o: o["status"].__setitem__("state", state)


def _both_advertisers(items):
    out = copy.deepcopy(items)
    node = find(out, "Node", GPU_NODE)[0]
    from validate_support import tool

    out += tool.gpu_resource_slices([node])
    return out


def _fewer_gpus(o):
    o["status"]["allocatable"]["nvidia.com/gpu"] = "4"


def _dra_zero(o):
    o["status"].update(
        desiredNumberScheduled=0,
        currentNumberScheduled=0,
        numberReady=0,
        numberAvailable=0,
        updatedNumberScheduled=0,
    )


FAULTS = {
    "clusterpolicy-not-ready": (
        lambda items: mutate(items, "ClusterPolicy", "cluster-policy", _set_state("notReady")),
        "gate",
        "nvidia.com/v1/ClusterPolicy/cluster-policy",
        "status.state",
    ),
    "both-advertisers": (
        _both_advertisers,
        "gpu-advertiser",
        f"v1/Node/{GPU_NODE}",
        "status.allocatable.nvidia.com/gpu",
    ),
    "fewer-gpus": (
        lambda items: mutate(items, "Node", GPU_NODE, _fewer_gpus),
        "gpu-count",
        f"v1/Node/{GPU_NODE}",
        "status.allocatable.nvidia.com/gpu",
    ),
    "runtimeclass-missing": (
        lambda items: [o for o in items if o["kind"] != "RuntimeClass"],
        "runtime-class",
        "node.k8s.io/v1/RuntimeClass/nvidia-container-runtime",
        "metadata.name",
    ),
    "dra-kubelet-plugin-zero": (
        lambda items: mutate(items, "DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin", _dra_zero),
        "gate",
        "apps/v1/DaemonSet/nvidia-dra-driver/nvidia-dra-driver-gpu-kubelet-plugin",
        "status.desiredNumberScheduled",
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_fails_naming_check_object_and_field(tmp_path, fault):
    make, check, obj, fld = FAULTS[fault]
    path = write_snapshot(tmp_path / f"{fault}.json", make(healthy()))
    code, out, err = run("--snapshot", str(path))
    assert code == 1 and err == "" and "FAILED" in out
    rows = table_rows(out)
    assert any(r[:2] == ("FAIL", check) and r[3:] == (obj, fld) for r in rows), rows
    assert max(len(line) for line in out.splitlines()[1:]) <= 120  # the first names the file
    code, out, _ = run(
        "--snapshot", str(path), "--format", "json", "--junit", str(tmp_path / "j.xml")
    )
    doc = json.loads(out)
    jsonschema.validate(doc, validate_mod.report_schema())
    assert code == 1 and doc["result"] == "fail"
    assert any(
        c["check"] == check and c["object"] == obj and c["field"] == fld for c in _failing(doc)
    ), _failing(doc)
    xmlschema.XMLSchema(validate_mod.junit_schema_text()).validate(str(tmp_path / "j.xml"))
    assert 'type="fail"' in (tmp_path / "j.xml").read_text()


def test_nvke_rail_without_its_ippool(tmp_path, reference_charts):
    config = tmp_path / "gpucluster.yaml"
    config.write_text(NVKE)
    items = items_of(nvke_healthy(str(reference_charts)))
    good = write_snapshot(tmp_path / "nvke.json", items)
    code, out, _ = run("--config", str(config), "--snapshot", str(good))
    assert code == 0, out
    assert out.count("rail-ippool ") == 4 and out.count("rail-resource ") == 4
    broken = [
        o
        for o in items
        if not (o["kind"] == "IPPool" and o["metadata"]["name"] == "nv-ipam-pool-rail-2")
    ]
    path = write_snapshot(tmp_path / "no-ippool.json", broken)
    code, out, _ = run("--config", str(config), "--snapshot", str(path), "--format", "json")
    doc = json.loads(out)
    assert code == 1
    fails = {(c["check"], c["object"], c["field"]) for c in _failing(doc)}
    assert (
        "rail-ippool",
        "nv-ipam.nvidia.com/v1alpha1/IPPool/nvidia-network-operator/nv-ipam-pool-rail-2",
        "metadata.name",
    ) in fails
    # the control-plane node carries GPU labels without a GPU: not counted as a GPU node
    assert "nvke-cp-0" not in json.dumps(
        [c["observed"] for c in doc["checks"] if c["check"] == "gpu-count"]
    )


def test_hostile_strings_from_the_cluster_are_escaped(tmp_path):
    evil = "x\x1b[2J\u202e\nerror[fake] forged"
    items = mutate(healthy(), "ClusterPolicy", "cluster-policy", _set_state(evil))
    path = write_snapshot(tmp_path / "evil.json", items)
    code, out, _ = run("--snapshot", str(path), "--junit", str(tmp_path / "j.xml"))
    assert code == 1
    for text in (out, (tmp_path / "j.xml").read_text()):
        assert "\x1b" not in text and "\u202e" not in text and "\nerror[fake]" not in text
    xmlschema.XMLSchema(validate_mod.junit_schema_text()).validate(str(tmp_path / "j.xml"))


@pytest.mark.parametrize(
    "args, key",
    [
        ([], "--kubeconfig"),
        (["--snapshot", "s.json", "--kubeconfig", "k"], "--snapshot"),
        (["--snapshot", "s.json", "--wait", "10m"], "--wait"),
        (["--kubeconfig", "k", "--wait", "forever"], "--wait"),
        (["--kubeconfig", "k", "--wait", "0s"], "--wait"),
        (["--snapshot", "missing.json"], None),
        (["--snapshot", str(HEALTHY_DEFAULT), "--cluster", "nope"], "--cluster"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, monkeypatch, args, key):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(*args)
    assert code == 2 and out == "", (out, err)
    assert err.count("\n") == 1 and err.startswith("error[") and " fix: " in err
    if key:
        assert f"key={key}" in err


def test_every_check_of_the_built_in_plans_has_a_known_name(tmp_path):
    from validate_support import DYNAMO, KUBEFLOW, OPERATOR_MANAGED, plan_of

    from gpucluster.live.checks import derive_checks

    names = validate_mod.report_schema()["$defs"]["check"]["properties"]["check"]["enum"]
    for text in (None, KUBEFLOW, DYNAMO, OPERATOR_MANAGED, NVKE):
        checks = derive_checks(plan_of(text, tmp_path))
        assert checks and {c.name for c in checks} <= set(names)
        assert len({c.id for c in checks}) == len(checks)


def test_a_gpu_node_without_the_driver_label_is_named_so_not_driver_none(
    tmp_path, reference_charts
):
    """operator-managed (the GPU Operator installs the driver): a GPU node the driver has not
    labeled yet fails driver-version saying the label is missing, not ``driver None``."""
    from validate_support import OPERATOR_MANAGED, healthy_document

    config = tmp_path / "gpucluster.yaml"
    config.write_text(OPERATOR_MANAGED)
    items = items_of(healthy_document(OPERATOR_MANAGED, str(reference_charts)))
    gpu_nodes = [
        n
        for n in find(items, "Node")
        if "nvidia.com/cuda.driver-version.full" in n["metadata"]["labels"]
    ]
    assert gpu_nodes
    for node in gpu_nodes:
        del node["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"]
    path = write_snapshot(tmp_path / "unlabeled.json", items)
    code, out, _ = run("--config", str(config), "--snapshot", str(path), "--format", "json")
    [failed] = [c for c in _failing(json.loads(out)) if c["check"] == "driver-version"]
    assert code == 1 and "None" not in failed["reason"]
    assert "has no nvidia.com/cuda.driver-version.full label" in failed["reason"], failed


def test_the_table_fits_120_columns_with_every_object_and_field(tmp_path):
    code, out, err = run("--snapshot", str(HEALTHY_DEFAULT))
    assert (code, err) == (0, "")
    # the header names the snapshot's path, as long as the folder it sits in; the table fits 120
    header, *table = out.splitlines()
    assert header.startswith("cluster gpu-training: ") and str(HEALTHY_DEFAULT) in header
    assert table and max(len(line) for line in table) <= 120
    code, doc_text, _ = run("--snapshot", str(HEALTHY_DEFAULT), "--format", "json")
    expected = [
        (
            c["verdict"].upper(),
            c["check"],
            c["component"] or "-",
            c["object"] or "-",
            c["field"] or "-",
        )
        for c in json.loads(doc_text)["checks"]
    ]
    assert table_rows(out) == expected


def test_a_snapshot_read_for_another_cluster_is_remarked(tmp_path):
    """gpucluster snapshot records the cluster it read for; validating it against another
    cluster's plan is one warning line (the run goes on); the same name, or a kubectl List
    without the record, none."""
    from gpucluster.live.snapshot import dump_snapshot

    doc = json.loads(HEALTHY_DEFAULT.read_text(encoding="utf-8"))
    assert doc["metadata"]["plannedCluster"] == "gpu-training"  # tools/validate_snapshot.py
    doc["metadata"]["plannedCluster"] = "aks-training"
    other = tmp_path / "other.json"
    other.write_text(dump_snapshot(doc))
    code, out, err = run("--snapshot", str(other))
    [line] = err.splitlines()
    assert code == 0 and "PASSED" in out
    assert (
        line.startswith(
            f"warning[validate.cluster-name] file={other} cluster=gpu-training key=metadata.plannedCluster: "
            "the snapshot was read for cluster 'aks-training'"
        )
        and "fix: validate it with --cluster aks-training" in line
    )
    del doc["metadata"]["plannedCluster"]
    other.write_text(dump_snapshot(doc))
    assert run("--snapshot", str(other))[2] == ""
    assert run("--snapshot", str(HEALTHY_DEFAULT))[2] == ""

"""Snapshot files (gpucluster.live.snapshot): what is read, bounded, and refused with one line."""

from __future__ import annotations

import json
import os

import pytest
from validate_support import HEALTHY_DEFAULT

from gpucluster.errors import GpuclusterError
from gpucluster.live.snapshot import load_snapshot_file, snapshot_document

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"}}}


def _refused(path, **kw) -> str:
    with pytest.raises(GpuclusterError) as info:
        load_snapshot_file(path, **kw)
    (problem,) = info.value.problems
    line = problem.render()
    assert "\n" not in line and line.startswith("error[validate.snapshot]")
    return line


def test_reads_the_healthy_example():
    snap = load_snapshot_file(HEALTHY_DEFAULT)
    assert snap.identity()["kubeSystemUid"] and snap.identity()["providers"] == ["azure"]
    assert (
        snap.scope("nvidia.com/v1", "ClusterPolicy") == "Cluster"
    )  # served by the CRD in the snapshot
    assert snap.scope("nvidia.com/v2", "ClusterPolicy") is None
    assert snap.scope("apps/v1", "DaemonSet") == "Namespaced"


@pytest.mark.parametrize(
    "content, key",
    [
        ({"apiVersion": "v1", "kind": "NodeList", "items": []}, "kind"),
        ({"apiVersion": "v1", "kind": "List"}, "items"),
        (
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [{"kind": "Node", "metadata": {"name": "a"}}],
            },
            "items[0].apiVersion",
        ),
        (
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {}}],
            },
            "items[0].metadata.name",
        ),
        ({"apiVersion": "v1", "kind": "List", "items": [NODE, NODE]}, "items[1]"),
        (
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [{**NODE, "metadata": {"name": "x", "labels": {"a": 1}}}],
            },
            "items[0].metadata.labels",
        ),
    ],
)
def test_refuses_what_is_not_a_list_of_objects(tmp_path, content, key):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(content))
    assert f"key={key}:" in _refused(path)


def test_bounded_regular_utf8_files_only(tmp_path):
    assert "not found" in _refused(tmp_path / "missing.json")
    assert "not a regular file" in _refused(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "not a regular file" in _refused(fifo)  # never opened: a FIFO would block the read
    big = tmp_path / "big.json"
    big.write_text(json.dumps(snapshot_document([NODE])))
    assert "larger than 10 bytes" in _refused(big, max_bytes=10)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe{}")
    assert "not UTF-8" in _refused(binary)
    hostile = tmp_path / "hostile.json"
    evil = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n\x1b[31m\n\u202eerror[x]"}}
    hostile.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [evil, evil]}))
    line = _refused(hostile)  # the duplicate's name is printed, escaped
    assert "twice" in line and "\x1b" not in line and "\u202e" not in line and "\\x1b" in line


def test_yaml_as_kubectl_writes_it(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: Node\n    metadata: {name: n1}\n"
    )
    assert load_snapshot_file(path).get("v1", "Node", None, "n1")["metadata"]["name"] == "n1"


def test_document_is_sorted_and_strips_crd_schemas():
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "a.b", "managedFields": [{}]},
        "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {}}}]},
    }
    doc = snapshot_document([NODE, crd])
    assert [o["kind"] for o in doc["items"]] == ["CustomResourceDefinition", "Node"]
    assert (
        "schema" not in doc["items"][0]["spec"]["versions"][0]
        and "managedFields" not in doc["items"][0]["metadata"]
    )


def test_aks_pools_carry_their_node_selector_and_gpu_count():
    from validate_support import plan_of

    from gpucluster_aks.platform import vm_sizes

    sizes = vm_sizes()
    for size in sizes["accelerators"]["h100"]:
        assert isinstance(sizes["gpus_per_vm"][size], int) and sizes["gpus_per_vm"][size] >= 1
    pools = {p.name: p for p in plan_of(None).cluster.pools}
    assert pools["gpu"].gpus_per_node == 8 and pools["gpu"].node_selector == {
        "kubernetes.azure.com/agentpool": "gpu"
    }
    assert pools["system"].gpus_per_node is None

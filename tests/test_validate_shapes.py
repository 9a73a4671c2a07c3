"""Snapshot objects of any shape (gpucluster.live.shapes): a field not shaped as its kind says
(a Node whose ``status.nodeInfo`` is a string, a ``spec`` that is a list, labels that are a list,
...) is one ``error[validate.snapshot]`` line naming the item and field, or -- for the fields of a
custom resource, which only generic comparisons read -- a check's verdict; never a crash.

A Hypothesis property replaces one field of examples/validate/healthy-default.json by a value of
another JSON type: validate (every output format, JUnit and the attestation) and upgrade-check
read it to the end or refuse it with one line. The same property runs through the command line
for each output format (exit 0, 1 or 2, no traceback, no ``error[internal]``)."""

from __future__ import annotations

import copy
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st
from validate_server import HostileApi
from validate_support import HEALTHY_DEFAULT, items_of

from gpucluster.cli import main
from gpucluster.errors import GpuclusterError
from gpucluster.lint import upgrade_check
from gpucluster.live import upgrade_live
from gpucluster.live import validate as validate_mod
from gpucluster.live.checks import derive_checks, run_checks
from gpucluster.live.cli import plan_for
from gpucluster.live.shapes import MODELS, shape_problem
from gpucluster.live.snapshot import BUILTIN_KINDS, load_snapshot_file

LONG = os.environ.get("GPUCLUSTER_FUZZ") == "long"
EXAMPLES = int(os.environ.get("GPUCLUSTER_FUZZ_SNAPSHOT_EXAMPLES", "600" if LONG else "60"))
"""Library-level examples (~0.1 s each); the command-line property runs a tenth of them."""
ITEMS = items_of(HEALTHY_DEFAULT.read_text(encoding="utf-8"))
KINDS = sorted({(o["apiVersion"], o["kind"]) for o in ITEMS})
TIME = "2026-01-01T00:00:00Z"
PROFILE = {"gpuStack": "operator-managed"}
CLUSTER = {
    "name": "lab",
    "criteria": {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
    "kubernetesVersion": "1.34",
    "profile": PROFILE,
}


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path below ``value`` (keys and list indexes), parents before children."""
    out = [path] if path else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "list", dict: "object", type(None): "null"}[type(value)]


SCALARS = st.one_of(
    st.text(max_size=8),
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _write(path: Path, items: list[dict[str, Any]]) -> Path:
    """``items`` as a snapshot file, in this order, as they are (no normalisation)."""
    path.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8"
    )
    return path


def _value_at(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


@st.composite
def mutated_items(draw) -> tuple[list[dict[str, Any]], str]:
    """The healthy snapshot's items with one field (of an object of any kind, at any depth) replaced
    by a value of another JSON type; and the field, for the failure message. Kinds are drawn
    alike (53 CRDs do not crowd out the 3 Nodes), and a field holding an object or a list three
    times in four (what readers walk into)."""
    api_version, kind = draw(st.sampled_from(KINDS))
    same = [i for i, o in enumerate(ITEMS) if (o["apiVersion"], o["kind"]) == (api_version, kind)]
    index = draw(st.sampled_from(same))
    paths = _paths(ITEMS[index])
    nested = [p for p in paths if isinstance(_value_at(ITEMS[index], p), (dict, list))]
    path = draw(st.sampled_from(nested if nested and draw(st.integers(0, 3)) else paths))
    old = _value_at(ITEMS[index], path)
    return _replaced(index, path, draw(VALUES.filter(lambda v: _json_type(v) != _json_type(old))))


def _replaced(index: int, path: tuple[Any, ...], value: Any) -> tuple[list[dict[str, Any]], str]:
    """The healthy items with the field ``path`` of item ``index`` set to ``value``; its name."""
    items = list(ITEMS)
    obj = items[index] = copy.deepcopy(ITEMS[index])
    _value_at(obj, path[:-1])[path[-1]] = value
    return Case((items, f"{obj['kind']} items[{index}] {'.'.join(map(str, path))}: {value!r}"))


class Case(tuple):
    """``(items, field)``, shown as the field in a falsifying example (not the whole snapshot)."""

    def __repr__(self) -> str:
        return f"Case({self[1]!r})"


def _first(kind: str) -> int:
    return next(i for i, o in enumerate(ITEMS) if o["kind"] == kind)


class Sides(tuple):
    """The fixture's values, shown as their name in a falsifying example (not the whole plans)."""

    def __repr__(self) -> str:
        return "sides"


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """``(plan, checks, upgrade report, old plan, new plan)``: the default plan that
    healthy-default.json shows, and a driver version change of an operator-managed cluster."""
    folder = tmp_path_factory.mktemp("sides")
    old, new = folder / "old.yaml", folder / "new.yaml"
    old.write_text(yaml.safe_dump({"clusters": [CLUSTER]}))
    new.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {**CLUSTER, "overrides": {"set": ["gpuoperator:driver.version=580.105.08"]}}
                ]
            }
        )
    )
    plan = plan_for(None, [])
    report, old_side, new_side = upgrade_check.run_sides(str(old), str(new))
    return Sides(
        (
            plan,
            derive_checks(plan),
            report,
            old_side.plans[0],
            new_side.plans[0],
            str(old),
            str(new),
        )
    )


def _read_to_the_end(path: Path, sides) -> None:
    """What validate and upgrade-check --snapshot do with ``path`` after their arguments: load,
    check, render every format (GpuclusterError is their one-line refusal)."""
    plan, checks, report, old, new, _, _ = sides
    snap = load_snapshot_file(path)
    result = validate_mod.Report(
        plan=plan, snapshot=snap, results=tuple(run_checks(checks, snap)), time=TIME
    )
    for render in (
        validate_mod.render_text,
        validate_mod.render_json,
        validate_mod.render_ctrf,
        validate_mod.render_junit,
    ):
        render(result)
    validate_mod.attestation(result, snapshot_file=str(path))
    live = upgrade_live.assess(report, old, new, snap)
    upgrade_live.render_text(live)
    upgrade_live.render_json(live)
    upgrade_live.render_ctrf(live, time=TIME)
    upgrade_live.attestation(live, old, new, snapshot_file=str(path))


@settings(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@seed(3209)
@given(mutated_items())
def test_a_field_of_any_type_is_read_or_refused_in_one_line(tmp_path_factory, sides, case):
    items, field = case
    path = _write(tmp_path_factory.mktemp("snap") / "snap.json", items)
    try:
        _read_to_the_end(path, sides)
    except GpuclusterError as err:
        (problem,) = err.problems
        assert problem.id == "validate.snapshot" and problem.key.startswith("items["), (
            field,
            problem,
        )
        assert "\n" not in problem.render(), field


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(args), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def _contract(code: int, out: str, err: str, field: str, codes=(0, 1, 2)) -> None:
    assert code in codes, (field, code, err)
    assert "Traceback" not in err and "error[internal]" not in err, (field, err)
    if code == 2:
        assert out == "" and err.count("\n") == 1, (field, err)
        assert err.startswith("error[validate.snapshot] "), (field, err)


@settings(
    max_examples=max(EXAMPLES // 10, 4),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@seed(3210)
@given(mutated_items(), st.sampled_from(["text", "json", "ctrf"]))
@example(_replaced(_first("Node"), ("status", "nodeInfo"), "x"), "json")
@example(_replaced(_first("Pod"), ("spec",), "x"), "text")
@example(_replaced(_first("CustomResourceDefinition"), ("spec", "versions"), 5), "ctrf")
def test_every_output_format_keeps_the_contract(tmp_path_factory, sides, case, fmt):
    items, field = case
    folder = tmp_path_factory.mktemp("cli")
    path = _write(folder / "snap.json", items)
    _contract(
        *cli(
            "validate", "--snapshot", str(path), "--format", fmt, "--junit", str(folder / "j.xml")
        ),
        field,
    )
    old, new = sides[5], sides[6]
    _contract(
        *cli("upgrade-check", "--from", old, "--to", new, "--snapshot", str(path), "--format", fmt),
        field,
        codes=(0, 2, 3, 4),  # upgrade-check's exit codes: safe, invalid input, manual, unknown
    )


def _node(items: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in items if o["kind"] == "Node")


CASES = {
    "nodeInfo-a-string": (
        lambda n: n["status"].__setitem__("nodeInfo", "x"),
        "status.nodeInfo",
        "is a string, not an object (NodeStatus.nodeInfo: NodeSystemInfo)",
    ),
    "spec-a-list": (
        lambda n: n.__setitem__("spec", [1]),
        "spec",
        "is a list, not an object (Node.spec: NodeSpec)",
    ),
    "labels-a-list": (
        lambda n: n["metadata"].__setitem__("labels", ["a"]),
        "metadata.labels",
        "metadata.labels is not a map of strings",
    ),
    "a-taint-null": (
        lambda n: n["spec"].__setitem__("taints", [None]),
        "spec.taints[0]",
        "is null, not an object",
    ),
    "condition-status-a-boolean": (
        lambda n: n["status"]["conditions"][0].__setitem__("status", True),
        "status.conditions[0].status",
        "is a boolean, not a string (NodeCondition.status)",
    ),
    "allocatable-a-list": (
        lambda n: n["status"]["allocatable"].__setitem__("nvidia.com/gpu", [8]),
        "status.allocatable['nvidia.com/gpu']",
        "is a list, not a string or a number",
    ),
}


@pytest.mark.parametrize("fmt", ["text", "json", "ctrf"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_node_field_of_the_wrong_type_is_one_line(tmp_path, case, fmt):
    change, key, said = CASES[case]
    items = copy.deepcopy(ITEMS)
    node = _node(items)
    change(node)
    _write(tmp_path / "s.json", items)
    index = items.index(node)
    code, out, err = cli("validate", "--snapshot", str(tmp_path / "s.json"), "--format", fmt)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and err.startswith(
        f"error[validate.snapshot] file={tmp_path / 's.json'} key=items[{index}].{key}: "
    ), err
    assert said in err and " fix: " in err, err


def test_every_builtin_kind_has_the_client_model_of_its_kind():
    from kubernetes.client import models

    assert set(MODELS) == set(BUILTIN_KINDS)
    for (api_version, kind), name in MODELS.items():
        model = getattr(models, name)
        assert set(model.openapi_types) >= {"api_version", "kind", "metadata"}, name
        assert name.endswith(kind), (api_version, kind, name)


def test_a_custom_resource_has_its_metadata_checked_and_any_spec():
    policy = copy.deepcopy(next(o for o in ITEMS if o["kind"] == "ClusterPolicy"))
    policy["spec"] = "anything"
    assert shape_problem(policy) is None
    policy["metadata"]["ownerReferences"] = "x"
    assert shape_problem(policy) == (
        "metadata.ownerReferences",
        "is a string, not a list (ObjectMeta.ownerReferences)",
    )


def test_a_deeply_nested_value_is_walked_without_recursion():
    crd = copy.deepcopy(next(o for o in ITEMS if o["kind"] == "CustomResourceDefinition"))
    props: dict[str, Any] = {"type": 5}
    for _ in range(5000):
        props = {"type": "object", "properties": {"a": props}}
    crd["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": props}
    path, what = shape_problem(crd)
    assert (
        path.endswith(".properties.a.type")
        and what == "is an integer, not a string (JSONSchemaProps.type)"
    )


def test_null_reads_as_absent_and_a_quantity_may_be_a_number():
    node = copy.deepcopy(_node(ITEMS))
    node["status"]["allocatable"]["cpu"] = 8
    node["status"]["nodeInfo"] = None
    node["spec"] = None
    assert shape_problem(node) is None


def test_an_api_server_answer_of_the_wrong_shape_is_one_cluster_line(tmp_path):
    body = {"metadata": {}, "items": [{"metadata": {"name": "x"}, "spec": "x"}]}
    server = HostileApi("body", body=json.dumps(body).encode())
    try:
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        code, out, err = cli("snapshot", "--kubeconfig", str(kubeconfig), "--timeout", "20s")
    finally:
        server.close()
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert err.startswith("error[validate.cluster] ") and " fix: " in err, err
    assert (
        "the answer to GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions is not shaped as a "
        "CustomResourceDefinition: items[0].spec is a string, not an object" in err
    ), err

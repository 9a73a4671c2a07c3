"""The Chainsaw assert/error evaluator (gpucluster.live.chainsaw): assertion-tree semantics as
Chainsaw and kyverno-json define them, features it refuses as unsupported, and every AICR health
check run unchanged on a healthy and a faulty snapshot of its component."""

from __future__ import annotations

import copy

import pytest
from validate_support import (
    DYNAMO,
    ROOT,
    find,
    healthy_document,
    items_of,
    nvke_healthy,
    snapshot_of,
)

from gpucluster.live import chainsaw
from gpucluster.live.chainsaw import Operation, parse_tests, run_operation, run_test

CHECKS = ROOT / "gpucluster" / "live" / "aicr_checks"

DEPLOY = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "op", "namespace": "ns", "labels": {"app": "op", "tier": "x"}},
    "spec": {
        "replicas": 2,
        "template": {
            "spec": {
                "containers": [
                    {"name": "a", "securityContext": {"runAsNonRoot": True}},
                    {"name": "b", "securityContext": {}},
                ]
            }
        },
    },
    "status": {
        "availableReplicas": 2,
        "readyReplicas": 2,
        "conditions": [{"type": "Available", "status": "True"}],
    },
}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "things.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Thing", "plural": "things"},
        "versions": [{"name": "v1", "served": True, "storage": True}],
    },
}


def _op(tree, op="assert"):
    return run_operation(
        Operation(step="s", index=0, op=op, resource=tree), snapshot_of([DEPLOY, CRD])
    )


def _tree(status=None, **meta):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "op", "namespace": "ns", **meta},
        **({"status": status} if status is not None else {}),
    }


@pytest.mark.parametrize(
    "status, verdict",
    [
        ({"availableReplicas": 2}, "pass"),  # subset: other fields are ignored
        ({"availableReplicas": 2.0}, "pass"),  # numbers compare by value across types
        ({"availableReplicas": 3}, "fail"),
        ({"(availableReplicas > `0`)": True}, "pass"),
        ({"(availableReplicas > `5`)": True}, "fail"),
        ({"(missing > `0`)": True}, "fail"),  # null > 0 is null, not true
        ({"missing": 1}, "fail"),  # field not found
        ({"(conditions[?type == 'Available'])": [{"status": "True"}]}, "pass"),
        (
            {"(conditions[?type == 'Progressing'])": [{"status": "True"}]},
            "fail",
        ),  # [] has another length
        ({"conditions": [{"status": "True"}, {"status": "True"}]}, "fail"),  # lists: exact length
        ({"(readyReplicas == availableReplicas)": True}, "pass"),
        ({"availableReplicas": "2"}, "fail"),  # string vs number: engine error, fails
        ({"conditions": {}}, "pass"),  # an empty map only requires a non-null value
        ({"conditions": {"type": "Available"}}, "fail"),  # a key of a list: engine error, fails
    ],
)
def test_assertion_tree(status, verdict):
    assert _op(_tree(status)).verdict == verdict


def test_foreach_empty_map_and_escape():
    spec = {"template": {"spec": {"~.(containers)": {"securityContext": {}}}}}
    assert (
        _op({**_tree(), "spec": spec}).verdict == "pass"
    )  # every element has a (possibly empty) map
    spec = {"template": {"spec": {"~.(containers)": {"securityContext": {"runAsNonRoot": True}}}}}
    result = _op({**_tree(), "spec": spec})
    assert result.verdict == "fail" and result.field.endswith("[1].securityContext.runAsNonRoot")
    assert _op({**_tree(), "spec": {"\\replicas\\": 2}}).verdict == "pass"


def test_lookup_by_labels_and_not_found():
    assert (
        _op(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"namespace": "ns", "labels": {"app": "op"}},
            }
        ).verdict
        == "pass"
    )
    result = _op(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"namespace": "ns", "labels": {"app": "other"}},
        }
    )
    assert (result.verdict, result.reason) == ("fail", "no actual resource found")
    result = _op(_tree() | {"metadata": {"name": "gone", "namespace": "ns"}})
    assert (result.verdict, result.reason) == ("fail", "actual resource not found")
    assert (
        _op(
            {
                "apiVersion": "example.com/v1",
                "kind": "Thing",
                "metadata": {"name": "t", "namespace": "ns"},
            }
        ).reason
        == "actual resource not found"
    )
    served = _op(
        {
            "apiVersion": "example.com/v2",
            "kind": "Thing",
            "metadata": {"name": "t", "namespace": "ns"},
        }
    )
    assert served.verdict == "fail" and "does not serve" in served.reason


def test_error_operation():
    assert _op(_tree({"availableReplicas": 0}), "error").verdict == "pass"  # exists, does not match
    assert (
        _op(_tree() | {"metadata": {"name": "gone", "namespace": "ns"}}, "error").verdict == "pass"
    )  # absent
    result = _op(_tree({"availableReplicas": 2}), "error")
    assert (result.verdict, result.reason, result.object) == (
        "fail",
        "resource matches expectation",
        "apps/v1/Deployment/ns/op",
    )


@pytest.mark.parametrize(
    "tree, why",
    [
        ({"status": {"(availableReplicas + `1`)": 3}}, "outside the specification"),
        ({"status": {"($x)": 1}}, "bindings"),
        ({"status": {"(availableReplicas)->n": {"($n)": 2}}}, "binding"),
        ({"status": {"(cel;object.x)": 1}}, "compiler 'cel'"),
        ({"status": {"(availableReplicas == `2`)": True}}, "type-strict"),
        ({"status": {"(to_boolean(availableReplicas))": True}}, "function"),
    ],
)
def test_unsupported_expressions_never_pass(tree, why):
    result = _op({**_tree(), **tree})
    assert result.verdict == "unsupported" and why in result.reason, result


def test_unsupported_lookups_and_operations():
    templated = _op(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "($name)", "namespace": "ns"},
        }
    )
    assert templated.verdict == "unsupported"
    no_ns = _op({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op"}})
    assert no_ns.verdict == "unsupported" and "ephemeral" in no_ns.reason
    text = """apiVersion: chainsaw.kyverno.io/v1alpha1
kind: Test
metadata: {name: t}
spec:
  steps:
    - try:
        - script: {content: "exit 0"}
        - assert: {file: x.yaml}
      catch: []
"""
    (test,) = parse_tests(text, file="t.yaml")
    result = run_test(test, snapshot_of([DEPLOY]))
    assert result.verdict == "unsupported" and "catch" in result.problem
    assert [o.verdict for o in result.operations] == ["unsupported", "unsupported"]
    (empty,) = parse_tests(
        "apiVersion: chainsaw.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: e}\nspec: {steps: []}\n",
        file="e",
    )
    assert run_test(empty, snapshot_of([])).verdict == "unsupported"  # checks nothing: never a pass


def test_shipped_checks_are_aicrs_files_unchanged(shared_dir):
    reference = shared_dir / "reference" / "aicr" / "recipes" / "checks"
    shipped = sorted(p.parent.name for p in CHECKS.glob("*/health-check.yaml"))
    assert shipped == sorted(p.parent.name for p in reference.glob("*/health-check.yaml"))
    for name in shipped:
        assert (CHECKS / name / "health-check.yaml").read_bytes() == (
            reference / name / "health-check.yaml"
        ).read_bytes(), name


def test_every_shipped_check_uses_only_honoured_features():
    for path in sorted(CHECKS.glob("*/health-check.yaml")):
        for test in parse_tests(path.read_text(encoding="utf-8"), file=str(path)):
            assert not test.problem, (path, test.problem)
            for op in test.operations:
                chainsaw.compile_tree(op.resource)  # raises Unsupported on anything not honoured


# ---------------------------------------------------------------- every AICR check on real shapes


@pytest.fixture(scope="module")
def healthy(reference_charts):
    """Healthy snapshots of the plans that, together, install every component with an AICR check:
    the default AKS plan, NVKE training-kubeflow (kubeflow-trainer) and AKS inference-dynamo."""
    charts = str(reference_charts)
    return {
        "default": items_of(healthy_document(None, charts)),
        "dynamo": items_of(healthy_document(DYNAMO, charts)),
        "nvke": items_of(nvke_healthy(charts)),
    }


def _check(component):
    (test,) = parse_tests(
        (CHECKS / component / "health-check.yaml").read_text(encoding="utf-8"), file=component
    )
    return test


def _in_aicr_namespace(items, component):
    """The nodewright-operator check reads namespace ``skyhook`` (AICR); gpucluster installs it in
    ``nodewright`` (the plan). Its passing snapshot is the same cluster with the operator there."""
    if component != "nodewright-operator":
        return items
    out = copy.deepcopy(items)
    for o in out:
        if o["metadata"].get("namespace") == "nodewright":
            o["metadata"]["namespace"] = "skyhook"
    return out


def _first_assert(test):
    return next(op for op in test.operations if op.op == "assert")


def _remove_target(items, op):
    meta = op.resource.get("metadata") or {}
    keep = []
    for o in items:
        m = o["metadata"]
        hit = (
            o["apiVersion"] == op.resource["apiVersion"]
            and o["kind"] == op.resource["kind"]
            and (not meta.get("name") or m["name"] == meta["name"])
            and (not meta.get("namespace") or m.get("namespace") == meta["namespace"])
            and all(
                (m.get("labels") or {}).get(k) == v for k, v in (meta.get("labels") or {}).items()
            )
        )
        if not hit:
            keep.append(o)
    assert len(keep) < len(items), f"nothing to remove for {op.resource}"
    return keep


@pytest.mark.parametrize(
    "component", sorted(p.parent.name for p in CHECKS.glob("*/health-check.yaml"))
)
def test_aicr_check_passes_healthy_and_fails_faulty(healthy, component):
    test = _check(component)
    plan = {"kubeflow-trainer": "nvke", "grove": "dynamo", "dynamo-platform": "dynamo"}.get(
        component, "default"
    )
    items = _in_aicr_namespace(healthy[plan], component)
    result = run_test(test, snapshot_of(items))
    assert result.verdict == "pass", [o for o in result.operations if o.verdict != "pass"]
    # fault 1: the object the first assert reads is gone
    op = _first_assert(test)
    broken = run_test(test, snapshot_of(_remove_target(items, op)))
    assert broken.verdict == "fail"
    assert broken.deciding.step == op.step and broken.deciding.reason in (
        "actual resource not found",
        "no actual resource found",
    )
    # fault 2: a pod of the component's namespace is stuck (every check with pod error operations)
    pod_ops = [o for o in test.operations if o.op == "error" and o.resource["kind"] == "Pod"]
    if pod_ops:
        ns = pod_ops[0].resource["metadata"]["namespace"]
        labels = pod_ops[0].resource["metadata"].get("labels") or {}
        stuck = copy.deepcopy(items)
        pods = [
            o
            for o in stuck
            if o["kind"] == "Pod"
            and o["metadata"].get("namespace") == ns
            and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())
        ]
        if (
            not pods
        ):  # no healthy pod carries the check's labels: a new pod of the stack that crashes
            pods = [
                copy.deepcopy(
                    next(
                        o
                        for o in stuck
                        if o["kind"] == "Pod" and o["metadata"].get("namespace") == ns
                    )
                )
            ]
            pods[0]["metadata"]["name"] += "-new"
            pods[0]["metadata"]["labels"] = dict(labels)
            stuck.append(pods[0])
        pod = pods[0]
        pod["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
        crashed = run_test(test, snapshot_of(stuck))
        assert crashed.verdict == "fail" and crashed.deciding.object.endswith(
            f"/Pod/{ns}/{pod['metadata']['name']}"
        )
        assert "containerStatuses" in crashed.deciding.field


def test_nodewright_operator_check_fails_in_gpuclusters_namespace(healthy):
    result = run_test(_check("nodewright-operator"), snapshot_of(healthy["default"]))
    assert (
        result.verdict == "fail"
        and "skyhook/skyhook-operator-controller-manager" in result.deciding.lookup
    )


def test_healthy_default_runs_its_components_checks():
    from validate_support import HEALTHY_DEFAULT

    from gpucluster.live.snapshot import load_snapshot_file

    snap = load_snapshot_file(HEALTHY_DEFAULT)
    verdicts = {
        c: run_test(_check(c), snap).verdict
        for c in sorted(p.parent.name for p in CHECKS.glob("*/health-check.yaml"))
    }
    assert {c for c, v in verdicts.items() if v == "pass"} == {
        "cert-manager",
        "gpu-operator",
        "kai-scheduler",
        "kube-prometheus-stack",
        "network-operator",
        "nfd",
        "nodewright-customizations",
        "nvidia-dra-driver-gpu",
        "nvsentinel",
        "prometheus-adapter",
        "prometheus-operator-crds",
    }
    assert find(snap.items, "ClusterPolicy")[0]["status"]["state"] == "ready"

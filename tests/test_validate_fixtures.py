"""The healthy snapshots the validate tests use are real shapes: every object validates against
the Kubernetes 1.34 schemas (kubernetes-validate) or its CRD (tests/data/crds, the reference
CRDs, the CRDs the rendered charts ship), and examples/validate/healthy-default.json is exactly
what tools/validate_snapshot.py makes from the default plan."""

from __future__ import annotations

import functools

import jsonschema
import pytest
import yaml
from k8s_schema import crd_index, openapi_to_jsonschema, validate_object
from validate_support import (
    DYNAMO,
    HEALTHY_DEFAULT,
    NVKE,
    OPERATOR_MANAGED,
    healthy_document,
    items_of,
    nvke_healthy,
    rendered,
)


def test_healthy_default_is_what_the_tool_makes(reference_charts):
    assert healthy_document(None, str(reference_charts)) == HEALTHY_DEFAULT.read_text(
        encoding="utf-8"
    ), "examples/validate/healthy-default.json is stale: run python tools/validate_snapshot.py"


@functools.lru_cache(maxsize=1)
def _chart_crds(charts: str) -> dict[tuple[str, str, str], dict]:
    """Schemas of the CRDs the rendered charts and the reference folder carry (full, not stripped)."""
    from pathlib import Path

    index: dict[tuple[str, str, str], dict] = {}
    docs = [
        crd for text in (None, DYNAMO, OPERATOR_MANAGED, NVKE) for crd in rendered(text, charts)[1]
    ]
    for path in sorted((Path(charts).parent / "crds").rglob("*.yaml")):
        docs += [
            d
            for d in yaml.load_all(
                path.read_text(encoding="utf-8"),
                Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader),
            )
            if isinstance(d, dict)
        ]
    for doc in docs:
        if doc.get("kind") != "CustomResourceDefinition":
            continue
        for version in doc["spec"]["versions"]:
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if schema:
                root = openapi_to_jsonschema(schema)
                root.setdefault("properties", {}).update(
                    {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                    }
                )
                index.setdefault(
                    (doc["spec"]["group"], version["name"], doc["spec"]["names"]["kind"]), root
                )
    return index


@pytest.mark.parametrize(
    "text",
    [None, DYNAMO, OPERATOR_MANAGED, NVKE],
    ids=["default", "dynamo", "operator-managed", "nvke"],
)
def test_healthy_snapshot_objects_validate(reference_charts, text):
    charts = str(reference_charts)
    items = items_of(nvke_healthy(charts) if text == NVKE else healthy_document(text, charts))
    known = crd_index()
    extra = _chart_crds(str(reference_charts))
    kinds = set()
    for obj in items:
        group, _, version = obj["apiVersion"].rpartition("/")
        key = (group, version, obj["kind"])
        kinds.add(obj["kind"])
        if group and "." in group and key not in known and not group.endswith("k8s.io"):
            assert key in extra, f"no CRD schema for {key}"
            errors = list(jsonschema.Draft202012Validator(extra[key]).iter_errors(obj))
            assert not errors, (key, obj["metadata"]["name"], [e.message for e in errors[:3]])
        else:
            validate_object(obj)
    assert {
        "Node",
        "Pod",
        "Deployment",
        "DaemonSet",
        "CustomResourceDefinition",
        "Namespace",
        "RuntimeClass",
    } <= kinds

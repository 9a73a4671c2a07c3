"""Values only a component's manifest templates read (registry ``manifestValues``) stay out of its
chart's values: the chart never reads them (``gpucluster lint`` would call them dead), the
manifests still get them, overrides still reach them, and a Terraform variable cannot bind them.
The real agentgateway chart's reading of the values is checked by tests/test_render_lint.py."""

from __future__ import annotations

import pytest
import yaml

from gpucluster import pipeline
from gpucluster.errors import GpuclusterError
from gpucluster.inputs.config import parse_clusters
from gpucluster.recipes.catalog import load_catalog
from gpucluster.values import without_paths

RFC1918 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]


def inference_plan(tmp_path, **overrides):
    doc = {
        "name": "serve",
        "criteria": {
            "service": "aks",
            "accelerator": "h100",
            "os": "ubuntu",
            "intent": "inference",
        },
    }
    if overrides:
        doc["overrides"] = overrides
    (spec,) = parse_clusters({"clusters": [doc]}, source="c.yaml", root=tmp_path)
    return pipeline.build_plan(spec)


def gateway_ranges(plan) -> list[str]:
    (node,) = [n for n in plan.nodes if n.id == "agentgateway-manifests"]
    docs = [
        d
        for path, text in node.local_chart.files.items()
        if path.startswith("templates/")
        for d in yaml.safe_load_all(text)
        if d
    ]
    (params,) = [d for d in docs if d["kind"] == "AgentgatewayParameters"]
    return params["spec"]["service"]["spec"]["loadBalancerSourceRanges"]


def chart_values(plan, release: str) -> dict:
    (node,) = [n for n in plan.nodes if n.id == release]
    return node.values


def test_registry_declares_the_agentgateway_source_ranges_manifest_only():
    assert load_catalog().components["agentgateway"].manifest_values == ("allowedSourceRanges",)


def test_manifest_values_reach_the_manifest_not_the_chart(tmp_path):
    plan = inference_plan(tmp_path)
    assert "allowedSourceRanges" not in chart_values(plan, "agentgateway")
    assert chart_values(plan, "agentgateway")["inferenceExtension"] == {"enabled": True}
    assert gateway_ranges(plan) == RFC1918


def test_an_override_of_a_manifest_value_reaches_the_manifest(tmp_path):
    plan = inference_plan(
        tmp_path,
        values=[{"component": "agentgateway", "values": {"allowedSourceRanges": ["10.1.0.0/16"]}}],
    )
    assert gateway_ranges(plan) == ["10.1.0.0/16"]
    assert "allowedSourceRanges" not in chart_values(plan, "agentgateway")


def test_agentgateway_crds_chart_gets_no_values(tmp_path):
    assert chart_values(inference_plan(tmp_path), "agentgateway-crds") == {}


def test_a_terraform_variable_cannot_bind_a_manifest_value(tmp_path):
    with pytest.raises(GpuclusterError) as exc:
        inference_plan(tmp_path, variables={"agentgateway:allowedSourceRanges": "ranges"})
    text = "\n".join(p.render() for p in exc.value.problems)
    assert "read only by 'agentgateway''s manifest templates" in text
    assert "key=clusters[0].overrides.variables.agentgateway:allowedSourceRanges" in text


@pytest.mark.parametrize(
    "values,paths,expected",
    [
        ({"a": 1, "b": {"c": 2, "d": 3}}, ["b.c"], {"a": 1, "b": {"d": 3}}),
        ({"a": 1, "b": {"c": 2}}, ["b.c"], {"a": 1}),
        ({"a": {"b": {"c": 1}}, "x": 0}, ["a.b.c"], {"x": 0}),
        ({"a": 1}, ["missing.path", "a.b"], {"a": 1}),
        ({"a": [1], "b": 2}, ["a"], {"b": 2}),
    ],
)
def test_without_paths(values, paths, expected):
    before = repr(values)
    assert without_paths(values, paths) == expected
    assert repr(values) == before

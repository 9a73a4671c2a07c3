"""registry.yaml validation (gpucluster.recipes.catalog.validate_registry)."""

from __future__ import annotations

import pytest
import yaml

from gpucluster.errors import GpuclusterError
from gpucluster.recipes.catalog import load_catalog


def entry(**kw):
    e = {
        "name": "x",
        "helm": {
            "repository": "https://charts.example",
            "chart": "x",
            "version": "1.0.0",
            "namespace": "x",
        },
    }
    e.update(kw)
    return e


@pytest.mark.parametrize(
    "components, key, message",
    [
        (
            [
                entry(
                    helm={
                        "repository": "https://c.example",
                        "chart": "nvidia/x",
                        "version": "1",
                        "namespace": "x",
                    }
                )
            ],
            "components.0.helm.chart",
            "does not match",
        ),
        (
            [
                entry(
                    helm={
                        "repository": "https://c.example",
                        "chart": "x",
                        "version": 1.0,
                        "namespace": "x",
                    }
                )
            ],
            "components.0.helm.version",
            "is not of type 'string'",
        ),
        (
            [
                entry(
                    helm={"repository": "ghcr.io/x", "chart": "x", "version": "1", "namespace": "x"}
                )
            ],
            "components.0.helm.repository",
            "does not match",
        ),
        (
            [entry(valueOverrideKeys=["x"])],
            "components.0",
            "Additional properties are not allowed ('valueOverrideKeys' was unexpected)",
        ),
        ([entry(type="Kustomize")], "components.0.type", "is not one of ['Helm', 'Manifest']"),
        (
            [entry(nodeScheduling={"accelerated": {"tolerations": ["a"]}})],
            "components.0.nodeScheduling.accelerated",
            "'tolerations' was unexpected",
        ),
        ([entry(name="Bad_Name")], "components.0.name", "does not match"),
    ],
)
def test_invalid_registry(tmp_path, components, key, message):
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump({"components": components}))
    with pytest.raises(GpuclusterError) as exc:
        load_catalog((tmp_path,))
    problem = exc.value.problems[0]
    assert problem.file == str(tmp_path / "registry.yaml")
    assert problem.key == key
    assert message in problem.message


def test_valid_minimal_registry(tmp_path):
    (tmp_path / "registry.yaml").write_text(
        yaml.safe_dump(
            {
                "kind": "ComponentRegistry",
                "apiVersion": "gpucluster/v1alpha1",
                "components": [entry()],
            }
        )
    )
    cat = load_catalog((tmp_path,))
    assert cat.components["x"].chart == "x"

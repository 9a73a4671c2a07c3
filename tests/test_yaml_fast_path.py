"""Where libyaml (PyYAML's C loader) may and may not replace the pure-Python parser.

User input (cluster files, values files, RecipeResults: gpucluster.yamlsafe) and rendered
manifests stay on the pure-Python parser: libyaml accepts documents PyYAML refuses, so the C
loader would silently change what is accepted. The catalog (files this project and its plugins
ship, checked by the tests) is parsed by libyaml and must give exactly ``yaml.safe_load``'s data.
"""

from __future__ import annotations

import pytest
import yaml

from gpucluster import yamlsafe
from gpucluster.errors import GpuclusterError
from gpucluster.recipes.catalog import _load_yaml, catalog_dirs


@pytest.mark.parametrize("text", ["a\t", "|#"])
def test_libyaml_accepts_what_the_strict_loader_refuses(text):
    # found by a property test comparing both; the reason user input keeps the pure-Python parser
    list(yaml.load_all(text, Loader=yaml.CSafeLoader))
    with pytest.raises(GpuclusterError):
        yamlsafe.load_yaml_text(text, file="values.yaml")


def test_catalog_files_load_as_with_safe_load():
    files = [p for d in catalog_dirs() for p in sorted(d.rglob("*.yaml"))]
    assert len(files) > 40
    for path in files:
        reference = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert repr(_load_yaml(path)) == repr(reference), path

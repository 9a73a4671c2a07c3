"""The typed readers of YAML input (gpucluster.fields, exported as gpucluster.sdk.Where/Fields):
their one-line errors, the null rule, the example on docs/plugins.md ("Reading settings"), and
that the modules reading the cluster file, backends, fleets, RecipeResults and the built-in
plugins' settings name no YAML type themselves."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gpucluster.sdk import ClusterSpec, Criteria, Fields, GpuclusterError, Where, type_name

ROOT = Path(__file__).resolve().parent.parent
W = Where("g.yaml", "c1")


def line(fn, *args, **kwargs) -> str:
    with pytest.raises(GpuclusterError) as err:
        fn(*args, **kwargs)
    (problem,) = err.value.problems
    return problem.render()


def test_each_type_is_one_line_naming_file_cluster_and_key():
    f = W.fields(
        {"s": 1, "b": "yes", "i": True, "l": {}, "m": [], "e": "", "c": "x", "n": 5}, "clusters[0]"
    )
    assert line(f.get_str, "s") == (
        "error[input] file=g.yaml cluster=c1 key=clusters[0].s: 'clusters[0].s' must be a "
        "non-empty string, not an integer fix: quote the value"
    )
    assert line(f.get_str, "e").endswith(
        "'clusters[0].e' must be a non-empty string, not an empty string fix: quote the value"
    )
    assert f.get_str("e", empty_ok=True) == ""
    assert line(f.get_bool, "b").endswith(
        "'clusters[0].b' must be true or false, not a string fix: write true or false without quotes"
    )
    assert line(f.get_int, "i").endswith(
        "'clusters[0].i' must be an integer, not a boolean fix: write a whole number without quotes"
    )
    assert line(f.get_list, "l").endswith(
        "'clusters[0].l' must be a non-empty list, not a mapping fix: write a YAML list: "
        "'- item' lines or [a, b] (see docs/cluster-file.md)"
    )
    assert line(f.get_fields, "m").endswith(
        "'clusters[0].m' must be a mapping, not a list fix: write it as indented "
        "'key: value' lines or {key: value} (see docs/cluster-file.md)"
    )
    assert line(f.get_choice, "c", ("a", "b")) == (
        "error[input] file=g.yaml cluster=c1 key=clusters[0].c: unknown c 'x' "
        "(allowed: a, b) fix: use one of the allowed values (see docs/cluster-file.md)"
    )
    assert line(f.get_int, "n", minimum=6).endswith(
        "'clusters[0].n' must be at least 6, not 5 (allowed: an integer >= 6) "
        "fix: write a whole number >= 6"
    )
    assert line(f.get_int, "n", minimum=1, maximum=4, fix="use 1..4").endswith(
        "must be at most 4, not 5 (allowed: an integer 1 to 4) fix: use 1..4"
    )
    assert line(f.require_str, "missing") == (
        "error[input] file=g.yaml cluster=c1 key=clusters[0].missing: missing key "
        "'clusters[0].missing' fix: set missing (see docs/cluster-file.md)"
    )
    assert line(W.fields, [1]) == (
        "error[input] file=g.yaml cluster=c1: the file must be a mapping, not a list fix: write "
        "it as indented 'key: value' lines or {key: value} (see docs/cluster-file.md)"
    )


def test_unknown_keys_are_one_line_at_the_first_with_a_near_miss():
    f = Where("g.yaml", id="fleet", docs="docs/fleets.md").fields(
        {"nmae": 1, "zz": 2, "name": 3}, "fleet"
    )
    assert line(f.check_keys, ("name", "groups"), context="in a fleet") == (
        "error[fleet] file=g.yaml key=fleet.nmae: unknown keys 'nmae', 'zz' in a fleet (allowed: name, groups) "
        "fix: did you mean 'name'? remove or rename the key (see docs/fleets.md)"
    )
    f.check_keys(("name", "nmae", "zz"))


def test_missing_and_null_give_the_default_unless_null_is_refused():
    f = W.fields({"a": None}, "settings")
    assert (
        f.get_int("a", 3),
        f.get_int("b", 4),
        f.get_fields("a"),
        len(f.get_fields("a", empty=True)),
    ) == (3, 4, None, 0)
    assert f.get_fields("a", empty=True).key == "settings.a"
    strict = Where("g.yaml", "c1", null_is_missing=False).fields({"a": None}, "settings")
    assert line(strict.get_int, "a", 3).endswith(
        "'settings.a' must be an integer, not null fix: write a whole number without quotes"
    )
    assert strict.get_int("b", 4) == 4


def test_fields_is_a_read_only_mapping_of_the_raw_values():
    f = W.fields({"a": 1, "b": [2]}, "k")
    assert dict(f) == {"a": 1, "b": [2]} and "a" in f and f["b"] == [2] and f.get("z") is None
    assert f.key_of("a") == "k.a" and W.fields({}).key_of("a") == "a"
    with pytest.raises(TypeError):
        f["a"] = 2  # type: ignore[index]
    assert isinstance(W.fields({}), Fields)


def test_type_names_are_the_yaml_ones():
    assert [type_name(v) for v in (None, {}, [], "", True, 1, 1.5)] == [
        "null",
        "a mapping",
        "a list",
        "a string",
        "a boolean",
        "an integer",
        "a number",
    ]


def test_the_example_on_the_sdk_page_runs_and_prints_what_it_says():
    from gpucluster.model import (
        absolute_keys,
    )  # how the core makes a plugin's keys absolute (docs/plugins.md)

    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    section = text.split("### Reading settings", 1)[1].split("\n### ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    (said,) = re.findall(r"^`(error\[input\] .*)`$", section, re.M)
    namespace: dict = {}
    exec(compile(block, "docs/plugins.md", "exec"), namespace)
    cluster = ClusterSpec(
        name="c1",
        source="gpucluster.yaml",
        index=0,
        criteria=Criteria("aks", "h100", "ubuntu", "training"),
        settings={"rdma": {"vfs": "8"}},
    )
    with pytest.raises(GpuclusterError) as err:
        namespace["parse_rdma"](cluster)
    (problem,) = absolute_keys(cluster, err.value.problems)
    assert problem.render() == said
    cluster.settings = {"rdma": {"vfs": 3}}
    with pytest.raises(GpuclusterError, match=r"key=settings\.rdma\.vfs: 3 virtual functions"):
        namespace["parse_rdma"](cluster)
    cluster.settings = {}
    assert namespace["parse_rdma"](cluster) == 8


READERS = [
    "gpucluster/inputs/config.py",
    "gpucluster/inputs/backends.py",
    "gpucluster/inputs/fleet.py",
    "gpucluster/recipes/recipe_result.py",
    "plugins/gpucluster_aks/settings.py",
    "plugins/gpucluster_nvke/settings.py",
]
TYPE_WORDS = re.compile(
    r"must be (?:a non-empty string|a string|true or false|an integer|a mapping|a non-empty list|a list)\b"
    r"(?!(?: of| or| with))"
)


@pytest.mark.parametrize("path", READERS)
def test_the_input_readers_leave_typing_to_the_one_helper(path):
    """No wrong-type message of their own, no type-name table of their own: the YAML types are
    checked and named by gpucluster.fields (a message saying more, 'a list of CIDR ranges', is theirs)."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    own = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and TYPE_WORDS.search(node.value)
    ]
    own += [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "_type_name"
    ]
    assert own == [], f"{path} lines {own}"

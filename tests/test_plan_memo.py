"""What the per-process memos of the plan pipeline may not do: share state between clusters or
change a byte of what is written.

``gpucluster.pipeline.resolved_components`` resolves a criteria set once per process and hands
every cluster a deep copy; ``gpucluster.charts.manifests`` dumps a plain document once per process and
parses a rendered text once. A plan built after another cluster's plan was mutated must be the
plan built from scratch, and a memoized dump -- by libyaml's emitter where it writes the same
text -- must be exactly the pure-Python ``yaml.dump``'s.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucluster import pipeline
from gpucluster.charts import manifests
from gpucluster.inputs.config import load_clusters

CLUSTERS = """\
clusters:
""" + "".join(
    f"""\
  - name: {name}
    criteria: {{service: aks, accelerator: h100, os: ubuntu, intent: training}}
    profile: {{gpuStack: azure-managed}}
    kubernetesVersion: "1.34"
"""
    for name in ("one", "two", "three")
)


def _clear_memos() -> None:
    pipeline._RESOLVED.clear()
    manifests._DUMPED.clear()
    manifests._PARSED.clear()


def _mutate(plan) -> None:
    """Change every mutable part of ``plan`` the memos could have shared."""
    for comp in plan.components.values():
        comp.values["mutated"] = {"by": plan.cluster.name}
        comp.values.pop("driver", None)
        comp.ref.dependency_refs.append("nowhere")
        comp.ref.overrides["mutated"] = True
    plan.recipe.component_refs[0].version = "0.0.0-mutated"
    plan.recipe.component_refs[0].overrides["mutated"] = True
    plan.recipe.applied_overlays.append("mutated")
    plan.recipe.constraints.clear()
    plan.recipe.findings.clear()
    for owned in plan.recipe.profile_owned.values():
        owned["mutated"] = True
    for node in plan.nodes:
        if isinstance(node.values, dict):
            node.values["mutated-node"] = True


def test_a_mutated_plan_does_not_leak_into_other_clusters(tmp_path):
    path = tmp_path / "gpucluster.yaml"
    path.write_text(CLUSTERS)
    one, two, three = load_clusters(str(path), env={})

    _clear_memos()
    fresh_two = pipeline.build_plan(copy.deepcopy(two))  # from scratch: nothing memoized
    fresh_three = pipeline.build_plan(copy.deepcopy(three))

    _clear_memos()
    first = pipeline.build_plan(copy.deepcopy(one))
    assert pipeline._RESOLVED, "the criteria set was not memoized"
    _mutate(first)
    second = pipeline.build_plan(copy.deepcopy(two))
    assert second == fresh_two
    _mutate(second)
    assert pipeline.build_plan(copy.deepcopy(three)) == fresh_three
    assert first.components["gpu-operator"].values["mutated"] == {"by": "one"}


def test_components_of_one_plan_share_no_container_with_another():
    one = pipeline.build_plan(load_clusters(None, env={})[0])
    two = pipeline.build_plan(load_clusters(None, env={})[0])

    def containers(obj, out):
        if isinstance(obj, (dict, list)):
            out.add(id(obj))
            for item in obj.values() if isinstance(obj, dict) else obj:
                containers(item, out)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                containers(getattr(obj, f.name), out)
        return out

    ids_one = containers(one.components, set()) | containers(one.recipe, set())
    ids_two = containers(two.components, set()) | containers(two.recipe, set())
    assert not ids_one & ids_two


def _reference(doc) -> str:
    return manifests._yaml_dump(doc, manifests._DOCUMENT_OPTIONS).replace("{{", "{\\x7b")


def test_memoized_dump_tells_apart_what_yaml_writes_differently():
    manifests._DUMPED.clear()
    docs = [
        {"v": True},
        {"v": 1},
        {"v": 1.0},
        {"v": "1"},
        {"v": None},
        {"v": "true"},
        {"v": [1]},
        {"v": {"1": 1}},
        {"v": -0.0},
        {"v": 0.0},
        {"a": 1, "b": 2},
        {"b": 2, "a": 1},
        {1: "a"},
        {True: "a"},
        {None: "a"},
        ["1"],
    ]
    texts = [manifests.dump_documents([d]) for d in docs]
    assert texts == [_reference(d) for d in docs]
    assert len(set(texts)) == len(texts)
    # the same values again come from the memo and are still exactly yaml.dump's
    assert [manifests.dump_documents([copy.deepcopy(d)]) for d in docs] == texts


def test_a_shared_object_is_written_as_yaml_writes_it():
    manifests._DUMPED.clear()
    labels = {"app": "x"}
    shared = {"a": labels, "b": labels}  # PyYAML writes an anchor and an alias
    separate = {"a": {"app": "x"}, "b": {"app": "x"}}
    assert manifests.dump_documents([separate]) == _reference(separate)
    assert manifests.dump_documents([shared]) == _reference(shared)
    assert "*id001" in manifests.dump_documents([shared])
    assert "*id001" not in manifests.dump_documents([separate])


def test_rendered_documents_are_the_callers_own():
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ name }}\ndata:\n  k: v\n"
    where = {"source": "t.yaml.j2", "cluster": "c", "component": "x"}
    first = manifests.render_template(text, {"name": "cm"}, **where)
    first[0]["data"]["k"] = "mutated"
    first[0]["metadata"]["labels"] = {"mutated": "yes"}
    again = manifests.render_template(text, {"name": "cm"}, **where)
    assert again == [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}}
    ]


# --------------------------------------------------------------------------- libyaml's emitter


def _texts(pieces: list[str], max_size: int) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(pieces), max_size=max_size).map("".join)


ASCII = [chr(c) for c in range(32, 127)] + ["\n", "\n", " ", " "]
TEXT = _texts(ASCII + ["\t", "\r", "\x85", "\u2028", "\xa0", "é", "\U0001f600", "\x7f", "{{"], 30)
ASCII_TEXT = _texts(ASCII + ["{{", ": ", "- ", "#", "\n  ", "  \n"], 40)


def _documents(
    text: st.SearchStrategy[str], keys: st.SearchStrategy[str]
) -> st.SearchStrategy[dict]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), text)
    return st.dictionaries(
        keys,
        st.recursive(
            scalars,
            lambda inner: st.one_of(
                st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)
            ),
            max_leaves=25,
        ),
        max_size=5,
    )


LONG_KEYS = st.builds(lambda s, n: (s or "k") * n, ASCII_TEXT, st.integers(1, 12))
DOCS = st.one_of(
    _documents(ASCII_TEXT, ASCII_TEXT.filter(lambda k: k and "\n" not in k)),  # mostly libyaml's
    _documents(st.one_of(TEXT, ASCII_TEXT), st.one_of(TEXT, ASCII_TEXT, LONG_KEYS)),
)


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(DOCS)
def test_dump_is_pure_python_pyyamls_for_any_plain_document(doc):
    # libyaml's emitter writes some strings differently (non-ASCII, |+ blocks, empty and long
    # keys); dump_documents must pick it only where the text is the same
    manifests._DUMPED.clear()
    assert manifests.dump_documents([doc]) == _reference(doc)


def test_the_libyaml_emitter_is_used_for_the_stacks_documents(monkeypatch):
    # the gate, CRD-step and teardown Jobs take the fast path, so it is not dead code (the per-user
    # cache off: the emitter is chosen only when a document is dumped, not read from the cache)
    monkeypatch.setenv("GPUCLUSTER_CACHE_DIR", "off")
    manifests._DUMPED.clear()
    seen = []
    plain_key = manifests._plain_key

    def spy(doc):
        key, libyaml = plain_key(doc)
        seen.append((doc.get("kind") if isinstance(doc, dict) else None, libyaml))
        return key, libyaml

    monkeypatch.setattr(manifests, "_plain_key", spy)
    pipeline.build_plan(load_clusters(None, env={})[0])
    assert ("Job", True) in seen and ("ClusterRole", True) in seen


@pytest.mark.parametrize(
    "doc",
    [
        {"": 1},
        {"k" * 125: 1},
        {"a\nb": 1},
        {"k": "a\n\n"},
        {"k": "\n"},
        {"k": "\U0001f600"},
        {"k": "a\x85b"},
        {"k": "\t"},
    ],
)
def test_documents_libyaml_writes_otherwise_take_the_pure_python_emitter(doc):
    assert not manifests._plain_key(doc)[1]
    manifests._DUMPED.clear()
    assert manifests.dump_documents([doc]) == _reference(doc)


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(st.lists(DOCS, min_size=1, max_size=3))
def test_what_libyaml_wrote_libyaml_parses_as_pyyaml_does(docs):
    # chart_documents parses dump_documents output of libyaml-written documents with libyaml
    manifests._DUMPED.clear()
    text = manifests.dump_documents(docs)
    manifests._PARSED.clear()
    assert repr(manifests.chart_documents(text)) == repr(tuple(yaml.safe_load_all(text)))
    assert (text in manifests._LIBYAML_TEXTS) == all(manifests._plain_key(d)[1] for d in docs)


def test_static_catalog_templates_parse_alike_with_libyaml_and_pyyaml():
    from gpucluster.recipes.catalog import catalog_dirs

    templates = [p for d in catalog_dirs() for p in sorted(d.rglob("*.j2"))]
    static = [p for p in templates if manifests.is_static(p.read_text(encoding="utf-8"))]
    assert static, "no static template in the catalog"
    for path in static:
        text = path.read_text(encoding="utf-8")
        assert repr(list(yaml.load_all(text, Loader=yaml.CSafeLoader))) == repr(
            list(yaml.safe_load_all(text))
        ), path

"""Lint agrees with the API server on custom resources: the same objects go to the rig's real
kube-apiserver (create, ``dryRun=All``, ``fieldValidation=Strict`` as ``kubectl --validate=strict``)
and to ``gpucluster lint`` (:func:`gpucluster.lint.lint.lint_result`, its ``lint.schema`` and
``lint.cel`` errors); every object the server rejects, lint rejects, and lint rejects nothing the
server admits.

The objects: every custom resource the stacks of ``gpucluster init --service aks|nvke|oke``
(training and inference) render with the real charts (``../shared/reference/charts``), a minimal
object of every CRD of those charts that declares CEL rules, and mutations of them generated from
the CRDs (deterministic, no randomness):

* schema mutations: each enum field set to a value outside the enum, each required field removed,
  each typed leaf given a value of another type, each bounded number pushed past its bound, each
  patterned string given a value outside the pattern;
* rule mutations: at every schema node that declares ``x-kubernetes-validations``, the node's
  fields the rules read (``self.<field>``) set, alone and in pairs, to values drawn from the
  field's schema and from the string literals of the rules, so both sides of each rule are sent.

The CRDs are the ones lint validates against (:func:`gpucluster.lint.lint.crd_index` over the
rendered releases), installed on the rig first.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import _support
import pytest
import yaml
from render_cases import stand_in_names

from gpucluster_rig.build import RigError
from gpucluster_rig.cluster import Cluster

SERVICES = (("aks", "training"), ("aks", "inference"), ("nvke", "training"))
SERVICES += (("oke", "training"), ("oke", "inference"))
UNAVAILABLE = ("nvsentinel", "grove", "dynamo-platform", "agentgateway", "agentgateway-crds")
"""Charts ../shared/reference/charts does not carry (tests/render_cases.py)."""

NAMESPACE = "lint-diff"
WORKERS = 4
"""Requests in flight to the API server (each verdict is independent: dry runs store nothing)."""
MAX_PER_RULE = 24
"""Rule mutations per rule-carrying node and base object (the first ones, in generation order)."""
SCHEMA_PER_KIND = 24
RULES_PER_KIND = 60
"""Mutations kept per kind (evenly spread over all generated, :func:`_spread`): the gateway CRDs
carry hundreds of rules each, and the test must stay within a minute or two."""


def _spread(items: list[Any], cap: int) -> list[Any]:
    """At most ``cap`` of ``items``, evenly spaced, first and last included (deterministic)."""
    if len(items) <= cap:
        return items
    step = (len(items) - 1) / (cap - 1)
    return [items[round(i * step)] for i in range(cap)]


# --------------------------------------------------------------------------- the objects


def _render(shared: Path, folder: Path) -> list[Any]:
    """The rendered releases of every ``gpucluster init`` scaffold in :data:`SERVICES`."""
    from gpucluster import pipeline
    from gpucluster.init import InitOptions, render_project
    from gpucluster.inputs.config import parse_clusters
    from gpucluster.lint.render import ChartSources, Renderer, render_plans

    sources = ChartSources([shared / "charts"], cache_dir=folder / "no-cache")
    releases: list[Any] = []
    nearest = stand_in_names(shared / "charts")
    with Renderer(
        sources, allow_missing=UNAVAILABLE, require_charts=True, allow_nearest=nearest
    ) as renderer:
        for service, intent in SERVICES:
            files = render_project(InitOptions(service=service, intent=intent), "diff")
            specs = parse_clusters(
                yaml.safe_load(files["gpucluster.yaml"]), source="gpucluster.yaml", root=folder
            )
            result = render_plans(
                [pipeline.build_plan(s) for s in specs], sources, renderer=renderer
            )
            releases += result.releases
    return releases


def _key(doc: Mapping[str, Any]) -> tuple[str, str, str]:
    group, _, version = str(doc.get("apiVersion", "")).rpartition("/")
    return group, version, str(doc.get("kind", ""))


def _schema_value(schema: Any, literals: list[str], depth: int = 0) -> Any:
    """A small value of ``schema`` (its required fields filled; ``"x"`` or the first enum value)."""
    if not isinstance(schema, Mapping) or depth > 6:
        return "x"
    if "default" in schema:
        return copy.deepcopy(schema["default"])
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        return 1
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {
            name: _schema_value(props.get(name), literals, depth + 1)
            for name in schema.get("required") or []
        }
    if kind == "array":
        n = int(schema.get("minItems") or 0)
        return [_schema_value(schema.get("items"), literals, depth + 1) for _ in range(n)]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    if kind == "string":
        return "x" * max(1, int(schema.get("minLength") or 1))
    return {}


def _candidates(schema: Any, literals: list[str]) -> list[Any]:
    """Values to try for one field a rule reads: both booleans, small and boundary integers, the
    enum values, the rules' string literals, an empty and a minimal object, lists of 0-2 items."""
    if not isinstance(schema, Mapping):
        return ["x", 1]
    kind = schema.get("type")
    if schema.get("enum"):
        return list(schema["enum"])[:4]
    if kind == "boolean":
        return [True, False]
    if kind == "integer" or schema.get("x-kubernetes-int-or-string"):
        return [0, 1, 5]
    if kind == "number":
        return [0, 1.5]
    if kind == "string":
        return [*literals[:4], "x"]
    if kind == "object" or "properties" in schema:
        return [
            _schema_value(schema, literals),
            {"x": "x"} if schema.get("additionalProperties") else {},
        ]
    if kind == "array":
        items = schema.get("items") if isinstance(schema.get("items"), Mapping) else {}
        props = items.get("properties") or {}
        name = next((n for n, p in props.items() if (p or {}).get("type") == "string"), None)
        if name is not None:  # items told apart by a string field: the rules' literals there
            made = [
                {**_schema_value(items, literals), name: v}
                for v in _candidates(props[name], literals)
            ]
        else:
            made = [_schema_value(items, literals)]
        return [[], made[:1], made[:2], [made[-1], made[0]], [made[0], made[0]]]
    return [{}]


_FIELD = re.compile(r"\bself\.([A-Za-z_][A-Za-z0-9_]*)")
_LITERAL = re.compile(r"'([^'\\]*)'")


def _nodes(
    value: Any, schema: Any, path: tuple[Any, ...] = ()
) -> Iterator[tuple[tuple[Any, ...], Any, Mapping[str, Any]]]:
    """``(path, value, schema)`` of every present value (path items: keys and list indexes)."""
    if not isinstance(schema, Mapping) or value is None:
        return
    yield path, value, schema
    if isinstance(value, Mapping):
        props = schema.get("properties") or {}
        for k, v in value.items():
            sub = props.get(k) if k in props else schema.get("additionalProperties")
            yield from _nodes(v, sub, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, schema.get("items"), (*path, i))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for part in path[:-1]:
        node = node[part]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


_DELETE = object()


def schema_mutations(doc: Mapping[str, Any], schema: Any) -> Iterator[tuple[str, Any]]:
    """``(what, object)`` of the schema mutations of ``doc`` (module docstring)."""
    wrong = {
        "integer": "x",
        "number": "x",
        "boolean": "yes",
        "string": 12345,
        "object": "x",
        "array": "x",
    }
    for path, value, node in _nodes(doc, schema):
        where = ".".join(map(str, path))
        if not path or path[0] in ("apiVersion", "kind", "metadata"):
            continue
        if node.get("enum"):
            yield f"{where}: outside the enum", _set(doc, path, "not-in-enum")
        if isinstance(value, Mapping):
            for name in node.get("required") or []:
                if name in value:
                    yield f"{where}.{name}: removed (required)", _set(doc, (*path, name), _DELETE)
        kind = node.get("type")
        if (
            kind in wrong
            and not node.get("x-kubernetes-int-or-string")
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            yield (
                f"{where}: a {type(wrong[kind]).__name__} for {kind}",
                _set(doc, path, wrong[kind]),
            )
        if "maximum" in node:
            yield f"{where}: above maximum", _set(doc, path, int(node["maximum"]) + 1)
        if "minimum" in node:
            yield f"{where}: below minimum", _set(doc, path, int(node["minimum"]) - 1)
        if "pattern" in node and isinstance(value, str):
            yield f"{where}: outside the pattern", _set(doc, path, "Not A Match!")


def _ensure(
    doc: Any, schema: Any, path: tuple[str, ...]
) -> tuple[Any, tuple[Any, ...], Any] | None:
    """``doc`` with the value at schema ``path`` present (made from the schema; a list item where
    the path runs through ``items``), its object path and its schema node; None when it cannot."""
    out = copy.deepcopy(doc)
    node, sch, where = out, schema, ()
    for part in path:
        if part == "[]":
            items = sch.get("items")
            if not isinstance(node, list):
                return None
            if not node:
                node.append(_schema_value(items, []))
            node, sch, where = node[0], items, (*where, 0)
            continue
        sub = (sch.get("properties") or {}).get(part)
        if not isinstance(node, dict) or not isinstance(sub, Mapping):
            return None
        if part not in node or node[part] is None:
            node[part] = _schema_value(sub, []) if sub.get("type") != "array" else []
        node, sch, where = node[part], sub, (*where, part)
    return out, where, sch


def _rule_nodes(
    schema: Any, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Mapping[str, Any]]]:
    if not isinstance(schema, Mapping):
        return
    if schema.get("x-kubernetes-validations"):
        yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _rule_nodes(sub, (*path, name))
    if isinstance(schema.get("items"), Mapping):
        yield from _rule_nodes(schema["items"], (*path, "[]"))


def rule_mutations(doc: Mapping[str, Any], schema: Any) -> Iterator[tuple[str, Any]]:
    """``(what, object)`` of the rule mutations of ``doc`` (module docstring)."""
    for spath, node in _rule_nodes(schema):
        if not spath:
            continue  # root rules read metadata.name: the name is each case's own
        made = _ensure(doc, schema, spath)
        if made is None:
            continue
        base, where, _ = made
        rules = [str(r.get("rule", "")) for r in node["x-kubernetes-validations"]]
        literals = sorted({lit for r in rules for lit in _LITERAL.findall(r)})
        props = node.get("properties") or {}
        fields = sorted({f for r in rules for f in _FIELD.findall(r) if f in props})
        count = 0
        label = ".".join(spath)
        if node.get("type") == "array":
            for value in _candidates(node, literals):
                yield f"{label} = {json.dumps(value)[:60]}", _set(base, where, value)
            continue
        choices: list[list[tuple[str, Any]]] = [
            [(f, v) for v in [_DELETE, *_candidates(props[f], literals)]] for f in fields
        ]
        for combo in itertools.chain(
            itertools.product(*choices[:2]) if len(choices) >= 2 else iter(()),
            *([c] for c in itertools.product(*choices[:1])),
            *(itertools.product(a, b) for a, b in itertools.combinations(choices, 2)),
        ):
            if count >= MAX_PER_RULE:
                break
            value = copy.deepcopy(base)
            target = value
            for part in where:
                target = target[part]
            for name, v in combo:
                if v is _DELETE:
                    target.pop(name, None)
                else:
                    target[name] = copy.deepcopy(v)
            count += 1
            yield (
                f"{label}: "
                + ", ".join(
                    f"{n}={'(unset)' if v is _DELETE else json.dumps(v)[:30]}" for n, v in combo
                ),
                value,
            )


def build_cases(releases: list[Any]) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    """The CRD index lint uses and ``(what, object)`` of every case, each object's name unique."""
    from gpucluster.lint.lint import crd_index, iter_objects
    from gpucluster.lint.lint_cel import has_rules

    index = crd_index(releases)
    bases: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for release, path, doc in iter_objects(releases):
        if doc.get("kind") == "CustomResourceDefinition" or _key(doc) not in index:
            continue
        text = json.dumps({k: v for k, v in doc.items() if k != "metadata"}, sort_keys=True)
        if text not in seen:
            seen.add(text)
            bases.append((f"{_key(doc)[2]} of {release.name} {path}", doc))
    for key in index.keys():
        schema = index.raw_schema(key)
        if has_rules(schema) and not any(_key(d) == key for _, d in bases):
            doc = {"apiVersion": f"{key[0]}/{key[1]}", "kind": key[2], "metadata": {"name": "x"}}
            spec = (schema.get("properties") or {}).get("spec")
            if isinstance(spec, Mapping):
                doc["spec"] = _schema_value(spec, [])
            bases.append((f"minimal {key[2]}", doc))
    cases: list[tuple[str, dict[str, Any]]] = [(what, doc) for what, doc in bases]
    for mutations, cap in ((schema_mutations, SCHEMA_PER_KIND), (rule_mutations, RULES_PER_KIND)):
        per_kind: dict[tuple[str, str, str], list[tuple[str, dict[str, Any]]]] = {}
        for what, doc in bases:
            per_kind.setdefault(_key(doc), []).extend(
                (f"{what}: {m}", d) for m, d in mutations(doc, index.raw_schema(_key(doc)))
            )
        for made in per_kind.values():
            cases += _spread(made, cap)
    out = []
    for i, (what, doc) in enumerate(cases):
        doc = copy.deepcopy(doc)
        meta = doc.setdefault("metadata", {})
        for k in ("namespace", "labels", "annotations", "generateName"):
            meta.pop(k, None)
        meta["name"] = f"case-{i:04d}"
        out.append((what, doc))
    return index, out


# --------------------------------------------------------------------------- the two judges


def server_verdicts(
    rig: Cluster, index: Any, cases: list[tuple[str, dict[str, Any]]]
) -> list[tuple[bool, str]]:
    """``(rejected, message)`` of each case from the rig's API server (create, dry run, strict)."""
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(rig.kubeconfig))

    def judge(doc: dict[str, Any]) -> tuple[bool, str]:
        crd = index.crd(_key(doc))["spec"]
        group, version, _ = _key(doc)
        ns = f"/namespaces/{NAMESPACE}" if crd.get("scope") == "Namespaced" else ""
        method, url, headers, body, _post = api.param_serialize(
            "POST",
            f"/apis/{group}/{version}{ns}/{crd['names']['plural']}",
            query_params=[("dryRun", "All"), ("fieldValidation", "Strict")],
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=doc,
            auth_settings=["BearerToken"],
        )
        response = api.call_api(method, url, header_params=headers, body=body)
        response.read()
        if response.status in (200, 201):
            return False, ""
        assert response.status in (400, 422), (response.status, response.data[:500])
        return True, str(json.loads(response.data).get("message", ""))

    with ThreadPoolExecutor(WORKERS) as pool:
        out = list(pool.map(judge, [doc for _, doc in cases]))
    api.close()
    return out


def lint_verdicts(
    releases: list[Any], cases: list[tuple[str, dict[str, Any]]]
) -> list[tuple[bool, str, set[str]]]:
    """``(rejected, message, finding ids)`` of each case from ``gpucluster lint`` (``lint.schema`` and
    ``lint.cel`` errors), every case an object of one release beside the stacks' CRDs."""
    from gpucluster.lint import lint
    from gpucluster.lint.render import RenderedRelease, RenderResult
    from gpucluster.model import ClusterSpec, Criteria, PlanNode, Recipe, RuntimePlan

    cluster = ClusterSpec(
        name="diff",
        criteria=Criteria(service="aks", accelerator="h100", os="ubuntu", intent="training"),
    )
    recipe = Recipe(
        criteria=cluster.criteria, applied_overlays=["base"], constraints=[], component_refs=[]
    )
    plan = RuntimePlan(cluster=cluster, recipe=recipe, components={}, nodes=[])
    crds = [(f"{r.name}/crds/{name}", doc) for r in releases for name, doc in r.crds] + [
        (path, doc)
        for r in releases
        for path, doc in r.objects
        if doc.get("kind") == "CustomResourceDefinition"
    ]
    node = PlanNode(id="cases", kind="manifests", component="cases", namespace=NAMESPACE, values={})
    objects = crds + [(f"cases/{doc['metadata']['name']}.yaml", doc) for _, doc in cases]
    result = RenderResult(
        releases=[RenderedRelease("diff", node, None, objects=objects)], findings=[], plans=[plan]
    )
    by_object: dict[str, list[tuple[str, str]]] = {}
    for f in lint.lint_result(result):
        if f.severity == "error" and f.id in ("lint.schema", "lint.cel"):
            by_object.setdefault(f.key.split(".")[0], []).append((f.id, f.message))
    out = []
    for _, doc in cases:
        found = by_object.get(f"{doc['kind']}/{doc['metadata']['name']}", [])
        out.append((bool(found), "; ".join(m for _, m in found), {i for i, _ in found}))
    return out


# --------------------------------------------------------------------------- the test


@pytest.fixture(scope="module")
def corpus(shared: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    started = time.monotonic()
    releases = _render(shared, tmp_path_factory.mktemp("lint-diff"))
    index, cases = build_cases(releases)
    return releases, index, cases, time.monotonic() - started


def test_lint_rejects_exactly_what_the_api_server_rejects(rig: Cluster, corpus, capsys) -> None:
    started = time.monotonic()
    releases, index, cases, made = corpus
    crds: dict[str, Mapping[str, Any]] = {}
    for key in sorted({_key(doc) for _, doc in cases}):
        crd = index.crd(key)
        crds.setdefault(crd["metadata"]["name"], crd)
    _install(rig, crds)
    installed = time.monotonic()
    server = server_verdicts(rig, index, cases)
    judged = time.monotonic()
    linted = lint_verdicts(releases, cases)
    disagreements = [
        f"{what}: server {'rejects' if s[0] else 'admits'} ({s[1][:300]}), lint {'rejects' if v[0] else 'admits'} ({v[1][:300]})"
        for (what, _), s, v in zip(cases, server, linted, strict=True)
        if s[0] != v[0]
    ]
    rejected = sum(s[0] for s in server)
    by_rule = sum(1 for s in server if s[0] and _is_rule_message(s[1], index))
    cel_only = sum(1 for v in linted if v[2] == {"lint.cel"})
    with capsys.disabled():
        print(
            f"\nlint vs API server: {len(cases)} cases ({rejected} rejected by the server, {by_rule} by a CEL rule; "
            f"{cel_only} rejected by lint's CEL check alone), "
            f"{len(disagreements)} disagreements; {made:.0f}s to render and generate, "
            f"{installed - started:.0f}s to install the CRDs, {judged - installed:.0f}s for the server's "
            f"verdicts, {time.monotonic() - judged:.0f}s for lint's"
        )
        for line in disagreements[:40]:
            print("  " + line)
    assert not disagreements
    assert by_rule >= 10, "the mutations must make CEL rules reject objects"
    assert cel_only >= 10, "objects only a CEL rule rejects: without lint.cel lint admits them"
    assert rejected < len(cases)


def _install(rig: Cluster, crds: Mapping[str, Mapping[str, Any]]) -> None:
    """Create the CRDs of ``crds`` (name -> CRD) the rig lacks and :data:`NAMESPACE`, once per rig
    (the module's tests share it), and wait until every one is Established."""
    have = set(rig.kubectl("get", "crd", "-o", "name").split())
    prefix = "customresourcedefinition.apiextensions.k8s.io/"
    missing = [c for name, c in crds.items() if f"{prefix}{name}" not in have]
    if missing:
        rig.kubectl(
            "create",
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "List",
                    "items": [{k: v for k, v in c.items() if k != "status"} for c in missing],
                }
            ),
            timeout=300,
        )
    _wait_established(rig, set(crds))
    if not rig.kubectl("get", "namespace", NAMESPACE, "--ignore-not-found", "-o", "name").strip():
        rig.create_namespace(NAMESPACE)


def _wait_established(rig: Cluster, names: set[str], timeout: float = 120) -> None:
    """Wait until every CRD in ``names`` is Established (``kubectl wait`` errors on a CRD whose
    status the server has not written yet)."""
    deadline = time.monotonic() + timeout
    while True:
        listed = json.loads(rig.kubectl("get", "crd", "-o", "json"))["items"]
        ready = {
            c["metadata"]["name"]
            for c in listed
            if any(
                cond.get("type") == "Established" and cond.get("status") == "True"
                for cond in (c.get("status") or {}).get("conditions") or []
            )
        }
        if names <= ready:
            return
        assert time.monotonic() < deadline, f"CRDs not Established: {sorted(names - ready)}"
        time.sleep(1)


def _is_rule_message(message: str, index: Any) -> bool:
    """True when the server's message quotes a CEL rule's message of one of the CRDs."""
    texts = set()
    for key in index.keys():
        stack = [index.raw_schema(key)]
        while stack:
            node = stack.pop()
            if isinstance(node, Mapping):
                for r in node.get("x-kubernetes-validations") or []:
                    texts.add(str(r.get("message") or f"failed rule: {r.get('rule')}"))
                stack += list(node.values())
            elif isinstance(node, list):
                stack += node
    return any(t in message for t in texts)


# --------------------------------------------------------------------------- nulls: server-side apply

NULLS_PER_KIND = 16
"""Null cases kept per kind of the stacks (evenly spread over all generated, :func:`_spread`)."""

PROBE_CRD: dict[str, Any] = _support.crd(
    "Probe",
    {
        "type": "object",
        "properties": {
            **{
                f"{t}{n}": {
                    "type": t,
                    **({"nullable": True} if n else {}),
                    **({"items": {"type": "string"}} if t == "array" else {}),
                }
                for t in ("object", "array", "string", "integer", "boolean")
                for n in ("", "Nullable")
            },
            "defaulted": {"type": "string", "default": "d"},
            "labels": {
                "type": "object",
                "additionalProperties": {"type": "string"},
            },
            "free": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            },
        },
    },
    group="lint-diff.example.com",
    scope="Namespaced",
)
"""A CRD of the test's own with a field of each type, nullable and not, one with a ``default``,
a map and a preserve-unknown-fields object: the kinds of field the stacks' CRDs lack (only the
Skyhook CRD declares ``nullable`` fields, both integers)."""


def null_cases(releases: list[Any], index: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(what, object)``: the first custom resource of each kind the stacks render, as rendered
    and with each of its fields set to null and each field its schema declares that the object lacks added as null
    (:data:`NULLS_PER_KIND` per kind), one undeclared field added as null; AICR's Prometheus
    ``storage.emptyDir: null`` beside a ``volumeClaimTemplate``; every field of a
    :data:`PROBE_CRD` object set to null, alone."""
    from gpucluster.lint.lint import iter_objects

    firsts: dict[tuple[str, str, str], tuple[str, dict[str, Any]]] = {}
    for release, path, doc in iter_objects(releases):
        if doc.get("kind") != "CustomResourceDefinition" and _key(doc) in index:
            firsts.setdefault(_key(doc), (f"{doc['kind']} of {release.name} {path}", doc))
    cases: list[tuple[str, dict[str, Any]]] = []
    for key, (what, doc) in sorted(firsts.items()):
        schema = index.raw_schema(key)
        made: list[tuple[str, dict[str, Any]]] = []
        for path, value, node in _nodes(doc, schema):
            if path and path[0] in ("apiVersion", "kind", "metadata", "status"):
                continue
            if path and isinstance(path[-1], str):
                made.append((f"{'.'.join(map(str, path))} = null", _set(doc, path, None)))
            if isinstance(value, Mapping):
                for name in sorted(node.get("properties") or {}):
                    if name not in value and (path or name == "spec"):
                        where = ".".join(map(str, (*path, name)))
                        made.append((f"{where} (absent) = null", _set(doc, (*path, name), None)))
        cases.append((f"{what}: as rendered", doc))
        cases += [(f"{what}: {m}", d) for m, d in _spread(made, NULLS_PER_KIND)]
        if isinstance(doc.get("spec"), Mapping):
            cases.append((f"{what}: spec.notAField = null", _set(doc, ("spec", "notAField"), None)))
        if key[2] == "Prometheus":
            doc = copy.deepcopy(doc)
            doc["spec"]["storage"] = {"emptyDir": None, "volumeClaimTemplate": {"spec": {}}}
            cases.append(
                (f"{what}: AICR's storage.emptyDir null beside a volumeClaimTemplate", doc)
            )
        if key[2] == "Skyhook":
            for name in ("count", "percent"):
                base = copy.deepcopy(doc)
                base["spec"]["interruptionBudget"] = {name: None}
                cases.append((f"{what}: spec.interruptionBudget.{name} (nullable) = null", base))
    spec = PROBE_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    probe = {"apiVersion": "lint-diff.example.com/v1", "kind": "Probe", "metadata": {}}
    for name in spec["properties"]:
        cases.append((f"Probe: spec.{name} = null", {**probe, "spec": {name: None}}))
    cases.append(("Probe: spec.labels.a = null", {**probe, "spec": {"labels": {"a": None}}}))
    cases.append(("Probe: spec.free.a = null", {**probe, "spec": {"free": {"a": None}}}))
    out = []
    for i, (what, doc) in enumerate(cases):
        doc = copy.deepcopy(doc)
        meta = doc.setdefault("metadata", {})
        for k in ("namespace", "labels", "annotations", "generateName"):
            meta.pop(k, None)
        meta["name"] = f"null-{i:04d}"
        out.append((what, doc))
    return out


def _judge(
    rig: Cluster, crd_of: Any, cases: list[tuple[str, dict[str, Any]]], apply: bool
) -> list[tuple[bool, str]]:
    """``(rejected, message)`` of each case: a dry-run create (POST) or a dry-run server-side
    apply (PATCH ``application/apply-patch+yaml``, field manager ``lint-diff``, as ``kubectl apply
    --server-side --dry-run=server`` sends it), both ``fieldValidation=Strict``; ``crd_of``: an
    object -> its CRD's ``spec``."""
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(rig.kubeconfig))

    def judge(doc: dict[str, Any]) -> tuple[bool, str]:
        crd = crd_of(doc)
        group, version, _ = _key(doc)
        ns = f"/namespaces/{NAMESPACE}" if crd.get("scope") == "Namespaced" else ""
        url = f"/apis/{group}/{version}{ns}/{crd['names']['plural']}"
        query = [("dryRun", "All"), ("fieldValidation", "Strict")]
        if apply:
            url, method = f"{url}/{doc['metadata']['name']}", "PATCH"
            query.append(("fieldManager", "lint-diff"))
            content = "application/apply-patch+yaml"
        else:
            method, content = "POST", "application/json"
        method, url, headers, body, _post = api.param_serialize(
            method,
            url,
            query_params=query,
            header_params={"Content-Type": content, "Accept": "application/json"},
            body=json.dumps(doc) if apply else doc,  # a str is sent as it is, a dict as JSON
            auth_settings=["BearerToken"],
        )
        response = api.call_api(method, url, header_params=headers, body=body)
        response.read()
        if response.status in (200, 201):
            return False, ""
        message = str(json.loads(response.data).get("message", ""))
        # an apply patch naming an undeclared field: 500 "failed to create typed patch object"
        typed = response.status == 500 and "failed to create typed patch object" in message
        assert response.status in (400, 422) or typed, (response.status, response.data[:500])
        return True, message

    with ThreadPoolExecutor(WORKERS) as pool:
        out = list(pool.map(judge, [doc for _, doc in cases]))
    api.close()
    return out


def _lint_nulls(releases: list[Any], cases: list[tuple[str, dict[str, Any]]]):
    """``(errors, null paths)`` of each case from ``gpucluster lint``: its ``lint.schema`` /
    ``lint.cel`` errors and the field paths of its ``lint.schema-null`` warnings."""
    from gpucluster.lint import lint
    from gpucluster.lint.render import RenderedRelease, RenderResult
    from gpucluster.model import ClusterSpec, Criteria, PlanNode, Recipe, RuntimePlan

    cluster = ClusterSpec(
        name="diff",
        criteria=Criteria(service="aks", accelerator="h100", os="ubuntu", intent="training"),
    )
    recipe = Recipe(
        criteria=cluster.criteria, applied_overlays=["base"], constraints=[], component_refs=[]
    )
    plan = RuntimePlan(cluster=cluster, recipe=recipe, components={}, nodes=[])
    crds = [(f"{r.name}/crds/{name}", doc) for r in releases for name, doc in r.crds]
    crds += [
        (path, doc)
        for r in releases
        for path, doc in r.objects
        if doc.get("kind") == "CustomResourceDefinition"
    ]
    crds.append(("probe/crd.yaml", PROBE_CRD))
    node = PlanNode(id="cases", kind="manifests", component="cases", namespace=NAMESPACE, values={})
    objects = crds + [(f"cases/{doc['metadata']['name']}.yaml", doc) for _, doc in cases]
    result = RenderResult(
        releases=[RenderedRelease("diff", node, None, objects=objects)], findings=[], plans=[plan]
    )
    errors: dict[str, list[str]] = {}
    nulls: dict[str, list[str]] = {}
    for f in lint.lint_result(result):
        name, _, field = f.key.partition(".")
        if f.severity == "error" and f.id in ("lint.schema", "lint.cel"):
            errors.setdefault(name, []).append(f.message)
        elif f.id == "lint.schema-null":
            nulls.setdefault(name, []).append(field)
    return [
        (
            errors.get(f"{d['kind']}/{d['metadata']['name']}", []),
            nulls.get(f"{d['kind']}/{d['metadata']['name']}", []),
        )
        for _, d in cases
    ]


def test_lint_warns_of_a_null_exactly_where_server_side_apply_refuses_it(
    rig: Cluster, corpus, capsys
) -> None:
    """Objects with a null in one field (module :func:`null_cases`) go to the rig's API server by
    server-side apply and by create, and to ``gpucluster lint``: server-side apply refuses an
    object exactly when lint has a ``lint.schema-null`` warning or an error for it, each warning
    names the field the server's message names, and create refuses only what lint errors on (it
    prunes the null). AICR's ``storage.emptyDir: null`` is one of them, also sent by ``kubectl
    apply --server-side`` itself."""
    started = time.monotonic()
    releases, index, _cases, _made = corpus
    cases = null_cases(releases, index)
    crds: dict[str, Mapping[str, Any]] = {PROBE_CRD["metadata"]["name"]: PROBE_CRD}
    for key in sorted({_key(doc) for _, doc in cases if doc["kind"] != "Probe"}):
        crd = index.crd(key)
        crds.setdefault(crd["metadata"]["name"], crd)
    _install(rig, crds)

    def crd_of(doc: Mapping[str, Any]) -> Mapping[str, Any]:
        return (
            crds[PROBE_CRD["metadata"]["name"]]["spec"]
            if doc["kind"] == "Probe"
            else index.crd(_key(doc))["spec"]
        )

    installed = time.monotonic()
    applied = _judge(rig, crd_of, cases, apply=True)
    created = _judge(rig, crd_of, cases, apply=False)
    judged = time.monotonic()
    linted = _lint_nulls(releases, cases)
    disagreements = []
    for (what, _), a, c, (errors, nulls) in zip(cases, applied, created, linted, strict=True):
        if a[0] != bool(errors or nulls) or c[0] != bool(errors):
            disagreements.append(
                f"{what}: apply {'refuses' if a[0] else 'admits'} ({a[1][:200]}), create "
                f"{'refuses' if c[0] else 'admits'} ({c[1][:200]}), lint errors {errors[:1]} nulls {nulls}"
            )
        for field in nulls:
            if not errors and f'{field}: Invalid value: "null"' not in a[1]:
                disagreements.append(f"{what}: lint names {field}, the server says {a[1][:200]}")
    (prometheus,) = [doc for what, doc in cases if "AICR's storage.emptyDir" in what]
    with pytest.raises(RigError, match=r'spec\.storage\.emptyDir: Invalid value: "null"'):
        rig.kubectl(
            *("apply", "--server-side", "--dry-run=server", "-n", NAMESPACE, "-f", "-"),
            input=json.dumps(prometheus),
        )
    rig.kubectl(
        "create", "--dry-run=server", "-n", NAMESPACE, "-f", "-", input=json.dumps(prometheus)
    )
    refused = sum(a[0] for a in applied)
    warned = sum(1 for _, n in linted if n)
    outcomes: dict[str, int] = {}
    for a, c in zip(applied, created, strict=True):
        verdict = (
            f"apply {'refuses' if a[0] else 'admits'}, create {'refuses' if c[0] else 'admits'}"
        )
        outcomes[verdict] = outcomes.get(verdict, 0) + 1
    with capsys.disabled():
        print(
            f"\nnulls, lint vs API server: {len(cases)} cases ({refused} refused by server-side apply, "
            f"{sum(c[0] for c in created)} by create; lint: {warned} with lint.schema-null, "
            f"{sum(1 for e, _ in linted if e)} with an error), {len(disagreements)} disagreements; "
            f"{installed - started:.0f}s to install the CRDs, {judged - installed:.0f}s for the server's "
            f"verdicts, {time.monotonic() - judged:.0f}s for lint's"
        )
        print("  " + "; ".join(f"{v}: {n}" for v, n in sorted(outcomes.items())))
        for line in disagreements[:40]:
            print("  " + line)
    assert not disagreements
    assert warned >= 20 and outcomes.get("apply refuses, create admits", 0) >= 20
    assert outcomes.get("apply admits, create admits", 0) >= 20

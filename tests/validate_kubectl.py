"""A stand-in ``kubectl get`` that answers from a snapshot file, for the validation gate's script.

Supports what the script uses: ``kubectl get RESOURCE [NAME] [-n NS] [-l SELECTOR] -o name|jsonpath=T``
with RESOURCE ``nodes`` or ``<plural>.<group>`` (plurals from the snapshot's CRDs and the built-in
kinds), label selectors ``k=v`` and ``!k``, and kubectl JSONPath templates made of literals,
``{"text"}``, ``{range .items[*]}...{end}`` and paths with ``\\.``-escaped member names,
``[*]`` and ``[?(@.f=="v")]`` filters (kubectl docs "JSONPath Support"). A missing field prints
nothing; a missing named object exits 1 with kubectl's NotFound message. Records its argv.
"""

from __future__ import annotations

import json
import os
import re
import sys

BUILTIN = {
    "nodes": ("v1", "Node", False),
    "runtimeclasses.node.k8s.io": ("node.k8s.io/v1", "RuntimeClass", False),
    "resourceslices.resource.k8s.io": ("resource.k8s.io/v1", "ResourceSlice", False),
}


def resources(items):
    out = dict(BUILTIN)
    for crd in items:
        if crd["kind"] == "CustomResourceDefinition":
            s = crd["spec"]
            version = next(v["name"] for v in s["versions"] if v.get("storage", True))
            out[f"{s['names']['plural']}.{s['group']}"] = (
                f"{s['group']}/{version}",
                s["names"]["kind"],
                s["scope"] == "Namespaced",
            )
    return out


def split_path(path: str) -> list[str]:
    """``.a.b\\.c[*][?(@.t=="R")].d`` -> ``["a", "b.c", "[*]", '[?(@.t=="R")]', "d"]``."""
    parts, cur, i = [], "", 0
    while i < len(path):
        ch = path[i]
        if ch == "\\" and i + 1 < len(path):
            cur += path[i + 1]
            i += 2
            continue
        if ch == ".":
            if cur:
                parts.append(cur)
            cur = ""
        elif ch == "[":
            if cur:
                parts.append(cur)
            j = path.index("]", i)
            parts.append(path[i : j + 1])
            cur, i = "", j
        else:
            cur += ch
        i += 1
    if cur:
        parts.append(cur)
    return parts


def evaluate(obj, path: str) -> list:
    values = [obj]
    for part in split_path(path):
        nxt = []
        for v in values:
            if part == "[*]":
                nxt += (
                    list(v)
                    if isinstance(v, list)
                    else list(v.values())
                    if isinstance(v, dict)
                    else []
                )
            elif part.startswith("[?("):
                m = re.match(r'\[\?\(@\.(\w+)=="([^"]*)"\)\]', part)
                nxt += [
                    x
                    for x in (v if isinstance(v, list) else [])
                    if isinstance(x, dict) and str(x.get(m.group(1))) == m.group(2)
                ]
            elif isinstance(v, dict) and part in v:
                nxt.append(v[part])
        values = nxt
    return values


def text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def render(template: str, obj) -> str:
    tokens = re.findall(r"\{[^{}]*\}|[^{}]+", template)

    def run(i, current, until_end):
        buf = []
        while i < len(tokens):
            tok = tokens[i]
            if not tok.startswith("{"):
                buf.append(tok)
            else:
                inner = tok[1:-1].strip()
                if inner == "end":
                    return i, "".join(buf)
                if inner.startswith("range "):
                    items = evaluate(current, inner[6:])
                    start = i + 1
                    end = start
                    for item in items:
                        end, piece = run(start, item, True)
                        buf.append(piece)
                    if not items:
                        end, _ = run(start, {}, True)
                    i = end
                elif inner.startswith('"'):
                    buf.append(json.loads(inner))
                else:
                    buf.append(" ".join(text(v) for v in evaluate(current, inner)))
            i += 1
        return i, "".join(buf)

    return run(0, obj, False)[1]


def main(argv):
    with open(os.path.join(os.environ["VALIDATE_STUB_DIR"], "calls.jsonl"), "a") as f:
        f.write(json.dumps(argv) + "\n")
    items = json.load(open(os.environ["VALIDATE_SNAPSHOT"]))["items"]
    assert argv[0] == "get", argv
    args, namespace, selector, output = [], None, "", "name"
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-n":
            namespace, i = argv[i + 1], i + 2
            continue
        if a == "-l":
            selector, i = argv[i + 1], i + 2
            continue
        if a == "-o":
            output, i = argv[i + 1], i + 2
            continue
        args.append(a)
        i += 1
    res = resources(items)
    if args[0] not in res:
        sys.stderr.write(f'error: the server doesn\'t have a resource type "{args[0]}"\n')
        return 1
    api_version, kind, namespaced = res[args[0]]
    found = [
        o
        for o in items
        if o["apiVersion"] == api_version
        and o["kind"] == kind
        and (not namespaced or namespace is None or o["metadata"].get("namespace") == namespace)
    ]
    for term in [t for t in selector.split(",") if t]:
        labels = lambda o: o["metadata"].get("labels") or {}  # noqa: E731
        if term.startswith("!"):
            found = [o for o in found if term[1:] not in labels(o)]
        else:
            k, _, v = term.partition("=")
            found = [o for o in found if labels(o).get(k) == v]
    if len(args) > 1:
        found = [o for o in found if o["metadata"]["name"] == args[1]]
        if not found:
            sys.stderr.write(f'Error from server (NotFound): {args[0]} "{args[1]}" not found\n')
            return 1
        target = found[0]
    else:
        target = {"items": found}
    if output == "name":
        for o in found:
            sys.stdout.write(f"{args[0]}/{o['metadata']['name']}\n")
        return 0
    sys.stdout.write(render(output[len("jsonpath=") :], target))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Helm-values primitives: deep merge and dotted key paths (plain dict/list/scalars).

Merge semantics (AICR, Helm): objects deep-merge, lists and scalars replace, ``None`` deletes
the key. Inputs are never mutated; results share no containers with inputs.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gpucluster.model import scalar_type

PATH_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
"""Allowed override path segment (AICR ``--set`` rule)."""

_MISSING = object()


def deep_merge(
    base: Mapping[str, Any], patch: Mapping[str, Any] | None, *, keep_nulls: bool = False
) -> dict[str, Any]:
    """Return ``base`` with ``patch`` merged in (objects merge, lists/scalars replace, None deletes).

    With ``keep_nulls=True`` a ``None`` in ``patch`` is kept as an explicit null instead of
    deleting the key: Helm then removes the chart's own default at that key (recipe values
    such as ``controller.affinity.nodeAffinity: null`` need this to reach Helm).
    """
    out = copy.deepcopy(dict(base))
    if not patch:
        return out
    for key, value in patch.items():
        if value is None:
            if keep_nulls:
                out[key] = None
            else:
                out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value, keep_nulls=keep_nulls)
        elif isinstance(value, Mapping):
            out[key] = copy.deepcopy(dict(value)) if keep_nulls else _strip_nones(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def deep_copy(values: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of plain ``values`` (a dict): made with :mod:`pickle` (several times faster
    than :func:`copy.deepcopy` on YAML-shaped data), or :func:`copy.deepcopy` for a value pickle
    cannot hold."""
    import pickle

    try:
        return pickle.loads(pickle.dumps(dict(values), pickle.HIGHEST_PROTOCOL))
    except (pickle.PicklingError, TypeError, AttributeError):
        return copy.deepcopy(dict(values))


def _strip_nones(value: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: (_strip_nones(v) if isinstance(v, Mapping) else copy.deepcopy(v))
        for k, v in value.items()
        if v is not None
    }


def split_path(path: str) -> list[str]:
    """``"driver.rdma.enabled"`` -> ``["driver", "rdma", "enabled"]``.

    Keys containing dots can be escaped with a backslash (``nodeSelector.kubernetes\\.io/os``).
    """
    parts: list[str] = []
    buf = ""
    i = 0
    while i < len(path):
        ch = path[i]
        if ch == "\\" and i + 1 < len(path) and path[i + 1] == ".":
            buf += "."
            i += 2
            continue
        if ch == ".":
            parts.append(buf)
            buf = ""
        else:
            buf += ch
        i += 1
    parts.append(buf)
    return parts


def get_path(values: Mapping[str, Any], path: str | list[str], default: Any = None) -> Any:
    """Value at a dotted path, or ``default`` when any segment is missing or not an object."""
    node: Any = values
    for part in split_path(path) if isinstance(path, str) else path:
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def has_path(values: Mapping[str, Any], path: str | list[str]) -> bool:
    return get_path(values, path, _MISSING) is not _MISSING


def set_path(values: dict[str, Any], path: str | list[str], value: Any) -> None:
    """Set ``value`` at a dotted path in place, creating objects; ``None`` deletes the key.

    Raises:
        TypeError: an intermediate segment holds a non-object (a scalar on a parent).
    """
    parts = split_path(path) if isinstance(path, str) else list(path)
    node = values
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if nxt is None:
            if value is None:
                return
            nxt = node[part] = {}
        elif not isinstance(nxt, dict):
            raise TypeError(
                f"'{'.'.join(parts[: i + 1])}' holds a {type(nxt).__name__}, not an object"
            )
        node = nxt
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = copy.deepcopy(value)


def without_paths(values: Mapping[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """A deep copy of ``values`` without the dotted ``paths`` (absent paths are ignored); an
    object left empty by a removal is removed too, so no empty parent reaches a chart."""
    out = copy.deepcopy(dict(values))
    for path in paths:
        parts = split_path(path)
        chain: list[dict[str, Any]] = [out]
        for part in parts[:-1]:
            nxt = chain[-1].get(part)
            if not isinstance(nxt, dict):
                break
            chain.append(nxt)
        else:
            chain[-1].pop(parts[-1], None)
            for parent, key, child in zip(
                reversed(chain[:-1]), reversed(parts[:-1]), reversed(chain[1:]), strict=True
            ):
                if child:
                    break
                parent.pop(key, None)
    return out


def leaf_paths(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield ``(dotted path, value)`` for every non-object leaf (lists are leaves)."""
    for key in sorted(values):
        value = values[key]
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            yield from leaf_paths(value, path)
        else:
            yield path, value


# --------------------------------------------------------------------------- what Terraform passes to Helm
#
# One place for the serialization both the constructs layer (``helm_release.values`` / ``set``)
# and ``gpucluster render`` use, so what is rendered is what ``terraform apply`` installs.


CREDENTIAL_KEY = re.compile(
    r"(password|passwd|secret|token|apikey|api_key|accesskey|privatekey)$", re.IGNORECASE
)
"""A values key that names a credential (``adminPassword``, ``apiToken``, ``clientSecret``)."""
NOT_A_CREDENTIAL = re.compile(
    r"(^existing.*|name|ref|(?<!private)(?<!access)(?<!api)(?<!api_)key|file|path|enabled|mount|dir|annotations|labels)$",
    re.IGNORECASE,
)
"""Keys that name a Secret or a key in one (``existingSecret``, ``passwordKey``, ``secretName``), not a
credential; ``privateKey``, ``accessKey`` and ``apiKey`` are credentials."""


def credential_paths(values: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The paths (key tuples, sorted) of ``values`` whose key looks like a credential
    (:data:`CREDENTIAL_KEY`, not :data:`NOT_A_CREDENTIAL`) and whose value is a non-empty string:
    a literal secret, which Terraform keeps in its plan, its state and ``cdk.tf.json``. Used by the
    core policy check ``VALUES-CREDENTIAL``, the synthesis (private output modes) and
    ``gpucluster lint`` (``lint.credential``)."""
    found: list[tuple[str, ...]] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((), values)]
    while stack:
        prefix, value = stack.pop()
        if isinstance(value, Mapping):
            stack.extend(((*prefix, str(k)), v) for k, v in value.items())
        elif (
            prefix
            and isinstance(value, str)
            and value
            and CREDENTIAL_KEY.search(prefix[-1])
            and not NOT_A_CREDENTIAL.search(prefix[-1])
        ):
            found.append(prefix)
    return sorted(found)


def values_yaml(values: Mapping[str, Any]) -> str:
    """Helm values as ONE deterministic YAML document (sorted keys, block style, UTF-8).

    This is the text Helm receives from ``helm_release.values[0]`` once Terraform has resolved
    the escapes ``gpucluster_cdk.constructs_lib.helm.values_document`` adds.
    """
    import yaml

    return yaml.safe_dump(
        dict(values), sort_keys=True, default_flow_style=False, allow_unicode=True, width=4096
    )


def set_entries(
    values: Mapping[str, Any], terraform_variables: Mapping[str, str]
) -> list[tuple[str, str, Any, str]]:
    """The ``helm_release.set`` entries of a release, sorted by values path.

    Each Terraform-variable-bound values path (``terraform_variables``: dotted path -> variable
    name) becomes one entry ``(path, variable name, default, set type)``: ``default`` is the value
    at that path (None when the values hold none: the variable is then required at plan time);
    ``set type`` is ``"string"`` for a string (or absent) default -- Helm parses it like
    ``--set-string`` -- and ``"auto"`` for a bool/number -- Helm parses it like ``--set``.
    """
    out: list[tuple[str, str, Any, str]] = []
    for path, var_name in sorted(terraform_variables.items()):
        default = get_path(values, path) if has_path(values, path) else None
        var_type = scalar_type(default) if default is not None else "string"
        out.append((path, var_name, default, "string" if var_type == "string" else "auto"))
    return out

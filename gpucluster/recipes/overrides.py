"""User overrides: the cluster file's ``overrides`` block (AICR ``--set``, ``--set-json``,
``--set-file`` and ``--dynamic`` for gpucluster).

Cluster file syntax (see docs/overrides.md)::

    overrides:
      set:                                   # scalar overrides, applied first, in order
        - gpuoperator:driver.rdma.useHostMofed=false
        - networkoperator:enabled=false      # removes the component
      values:                                # structured overrides, applied after every `set`
        - component: nvsentinel
          values: {global: {auditLogging: {enabled: true}}}
        - component: gpu-operator
          file: values/gpu-operator.yaml     # relative to the cluster file, inside its folder
      variables:                             # install-time values bound to Terraform variables
        "gpuoperator:driver.version": gpu_driver_version

Semantics (AICR's, with the deviations documented in docs/overrides.md):

* a component is named by its catalog name or an alias (``registry.yaml`` ``aliases``),
  case-insensitively; it must be enabled in the resolved recipe;
* ``set`` values are typed like AICR's ``--set``: ``true``/``false`` -> boolean, a decimal
  integer -> int, ``null`` -> delete the key, a quoted ``'…'``/``"…"`` -> that exact string,
  anything else -> string. The string ``"false"`` therefore stays a string, and policy
  rejects it where a boolean toggle is expected;
* the last ``set`` of a path wins; a ``set`` of a path together with a ``set`` below it
  (``driver=x`` and ``driver.enabled=true``) is rejected;
* ``values`` deep-merge: objects merge, lists and scalars replace, ``null`` deletes;
* ``<component>:enabled=false`` removes the component; ``enabled`` is accepted only as a
  scalar ``set`` and only as a boolean; enabling a component the recipe disabled is rejected;
* ``variables`` record ``Component.terraform_variables`` (dotted path -> Terraform variable);
  binding ``enabled`` or a policy-owned key (see :func:`gpucluster.policy_keys.policy_owned_paths`)
  is rejected, because policy must see the value at synth time.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpucluster.errors import GpuclusterError, Problem, allowed_list, did_you_mean
from gpucluster.model import ClusterSpec, Component, Override, Recipe
from gpucluster.policy_keys import policy_owned_paths
from gpucluster.values import PATH_SEGMENT, deep_merge, get_path, leaf_paths, set_path, split_path
from gpucluster.yamlsafe import INT_MAX, INT_MIN, OutOfRange, check_plain, load_yaml_file

ENABLED_KEY = "enabled"
"""The component toggle (AICR ``config.ComponentEnabledKey``)."""

OVERRIDE_SECTIONS = ("set", "values", "variables")

_COMPONENT_TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_INT = re.compile(r"^-?(0|[1-9][0-9]*)$")

TF_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
"""Terraform variable name rule (letters, digits, ``_`` and ``-``; not starting with a digit)."""

TF_RESERVED_VARIABLE_NAMES = frozenset(
    {"source", "version", "providers", "count", "for_each", "lifecycle", "depends_on", "locals"}
)
"""Names Terraform reserves for module/meta arguments; a variable may not use them."""

RUNTIME_STACK_VARIABLE_NAMES = ("kubeconfig_path", "kube_context")
"""Variables the runtime stack declares itself for existing clusters (gpucluster_cdk/stacks/runtime.py); a
value bound to one of them would silently share it (the stack declares a variable once)."""


# --------------------------------------------------------------------------- parsing


def parse_scalar(text: str) -> Any:
    """Type one ``set`` value.

    ``true``/``false`` -> bool (exactly these spellings, as AICR's ``ConvertMapValue``);
    ``null`` -> None (delete the key, as Helm's ``--set``); ``-?(0|[1-9][0-9]*)`` -> int when it fits in
    64 bits, else :class:`gpucluster.yamlsafe.OutOfRange` (what the strict YAML loader gives for
    such a literal; :func:`parse_set` refuses it, as a values file's);
    ``'…'`` or ``"…"`` -> the exact string between the quotes; anything else -> the string
    as written. Decimals (``1.10``) stay strings: version-like values would lose digits as
    floats (AICR converts them; write a float through ``values`` when a chart needs one).
    """
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text == "true":
        return True
    if text == "false":
        return False
    if text == "null":
        return None
    if _INT.fullmatch(text):
        if len(text) <= 20:  # at most 19 digits and a sign: int() never sees a huge text
            value = int(text)
            if INT_MIN <= value <= INT_MAX:
                return value
        return OutOfRange(text)
    return text


MAX_VALUES_DEPTH = 64
"""Most keys in one values path (``--set``, ``set:``, ``variables``): the same limit as values
files (:data:`gpucluster.yamlsafe.MAX_DEPTH`); deeper paths would exhaust Python's recursion limit
in merging and fingerprinting (a 1,000-key path did, in ``hashing.fingerprint``)."""


def check_values_path(path: str) -> list[str]:
    """Split and validate a dotted values path (``driver.rdma.enabled``).

    Every segment must match :data:`gpucluster.values.PATH_SEGMENT`
    (``[A-Za-z0-9][A-Za-z0-9._-]*``); a dot inside a key is written ``\\.``.

    Raises:
        ValueError: with a message naming the offending segment.
    """
    if path == "":
        raise ValueError("the values path is empty")
    parts = split_path(path)
    if len(parts) > MAX_VALUES_DEPTH:
        raise ValueError(
            f"the values path has {len(parts)} keys; at most {MAX_VALUES_DEPTH} are allowed "
            "(Helm values nest a few levels)"
        )
    for part in parts:
        if not PATH_SEGMENT.fullmatch(part):
            shown = part if part else "(empty)"
            raise ValueError(
                f"path segment '{shown}' of '{path}' is not allowed: segments start with a letter or digit "
                "and contain only letters, digits, '.', '_' and '-' (escape a dot inside a key as '\\.')"
            )
    return parts


def split_component_path(text: str) -> tuple[str, str]:
    """``"gpuoperator:driver.enabled"`` -> ``("gpuoperator", "driver.enabled")`` (validated).

    Raises:
        ValueError: no ``:``, an empty or malformed component token, or an invalid path.
    """
    component, sep, path = text.partition(":")
    component = component.strip()
    if not sep:
        raise ValueError(f"'{text}' has no ':' between component and values path")
    if not component or not _COMPONENT_TOKEN.fullmatch(component):
        raise ValueError(f"'{component}' is not a component name or alias")
    check_values_path(path)
    return component, path


def parse_set(text: Any, *, source: str, key: str) -> Override:
    """Parse one ``component:path=value`` string into an :class:`Override` of kind ``set``.

    Raises:
        GpuclusterError: not a string, missing ``:`` or ``=``, bad path segment, an unquoted
            integer outside 64 bits (Helm's ``--set`` would keep it as a string; a number was
            meant, and no chart reads one that size: quote it for the string).
    """
    fmt = "component:path=value, e.g. gpuoperator:driver.rdma.useHostMofed=false"
    if not isinstance(text, str):
        raise GpuclusterError(
            f"a set entry must be a string, not a {type(text).__name__}",
            file=source,
            key=key,
            allowed=fmt,
            fix="quote the entry as one string",
        )
    lhs, eq, raw_value = text.partition("=")
    if not eq:
        raise GpuclusterError(
            f"'{text}' has no '=value'",
            file=source,
            key=key,
            allowed=fmt,
            fix=f"write '{text}=<value>'",
        )
    try:
        component, path = split_component_path(lhs)
    except ValueError as exc:
        raise GpuclusterError(
            str(exc),
            file=source,
            key=key,
            allowed=fmt,
            fix="name the component (catalog name or alias, `gpucluster recipe` lists them), a ':', the dotted values "
            "path, '=' and the value",
        ) from None
    value = parse_scalar(raw_value)
    check_plain(value, file=source, key=key)  # an integer outside 64 bits: one error, as in YAML
    return Override(
        component=component,
        kind="set",
        path=path,
        value=value,
        source=source,
        key=key,
    )


def _project_root(file: str, root: str | Path | None) -> Path | None:
    if root is not None:
        return Path(root).resolve()
    if file.startswith("<") or file == "--set":
        return None
    return Path(file).resolve().parent


def parse_overrides(
    raw: Any, *, file: str, cluster: str, root: str | Path | None = None, base: str = "overrides"
) -> list[Override]:
    """Parse one cluster's ``overrides`` subtree into Overrides in application order.

    Order: every ``set`` (as written), then every ``values`` entry (as written), then
    ``variables`` (sorted by ``component:path``).

    Args:
        raw: the subtree as loaded from YAML (None when absent).
        file: the cluster file (for messages; values files are resolved relative to it).
        cluster: the cluster name (for messages).
        root: project folder values files must stay inside (default: the cluster file's folder).
        base: key of the subtree in the file, prefixed to every key in messages and
            ``Override.key`` (the config loader passes ``clusters[i].overrides``).

    Raises:
        GpuclusterError: malformed entries, unreadable/invalid values files, files escaping the
            project folder — naming file, cluster and key.
    """
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise GpuclusterError(
            f"overrides must be a mapping, not a {type(raw).__name__}",
            file=file,
            cluster=cluster,
            key=base,
            allowed="keys " + ", ".join(OVERRIDE_SECTIONS),
            fix="write e.g. overrides: {set: ['gpuoperator:driver.rdma.useHostMofed=false']}",
        )
    run = _OverridesParse(file=file, cluster=cluster, base=base)
    for k in sorted(str(k) for k in raw if k not in OVERRIDE_SECTIONS):
        run.problem(
            f"unknown overrides key '{k}'",
            k,
            allowed=", ".join(OVERRIDE_SECTIONS),
            fix="rename it to set, values or variables (docs/overrides.md)",
        )
    run.sets(raw.get("set"))
    run.values(raw.get("values"), root)
    run.variables(raw.get("variables"))
    if run.problems:
        raise GpuclusterError(problems=run.problems)
    return run.result


class _OverridesParse:
    """One :func:`parse_overrides` call: a method per section, every problem collected."""

    def __init__(self, *, file: str, cluster: str, base: str):
        self.file, self.cluster, self.base = file, cluster, base
        self.problems: list[Problem] = []
        self.result: list[Override] = []

    def problem(self, message: str, key: str, **kw: Any) -> None:
        """A problem at ``<base>.<key>``."""
        self.problems.append(
            Problem(message, file=self.file, cluster=self.cluster, key=f"{self.base}.{key}", **kw)
        )

    def attempt(self, fn, *args, fix: str, **kwargs) -> None:
        """Add ``fn(...)``'s Override, or its problems (with ``fix`` where they have none)."""
        try:
            made = fn(*args, **kwargs)
        except GpuclusterError as err:
            for p in err.problems:
                self.problems.append(
                    dataclasses.replace(p, cluster=p.cluster or self.cluster, fix=p.fix or fix)
                )
            return
        if made is not None:
            self.result.append(made)

    def sets(self, sets: Any) -> None:
        """``set``: ``component:path=value`` strings, as written."""
        if sets is None:
            return
        if not isinstance(sets, list):
            self.problem(
                f"overrides.set must be a list of strings, not a {type(sets).__name__}",
                "set",
                fix="write set: ['component:path=value', ...]",
            )
            return
        for i, entry in enumerate(sets):
            self.attempt(
                parse_set,
                entry,
                source=self.file,
                key=f"{self.base}.set[{i}]",
                fix="write 'component:path=value'",
            )

    def values(self, values: Any, root: str | Path | None) -> None:
        """``values``: structured values or a values file per entry, as written (values files
        stay inside ``root``, default the cluster file's folder)."""
        if values is None:
            return
        if not isinstance(values, list):
            self.problem(
                f"overrides.values must be a list, not a {type(values).__name__}",
                "values",
                fix="write values: [{component: gpuoperator, values: {...}}, {component: x, file: path.yaml}]",
            )
            return
        project = _project_root(self.file, root)
        for i, entry in enumerate(values):
            self.attempt(
                _parse_values_entry,
                entry,
                file=self.file,
                cluster=self.cluster,
                key=f"{self.base}.values[{i}]",
                root=project,
                fix="write {component: <name>, values: {...}} or {component: <name>, file: <path.yaml>} (docs/overrides.md)",
            )

    def variables(self, variables: Any) -> None:
        """``variables``: ``component:path`` -> Terraform variable name, sorted by target."""
        if variables is None:
            return
        if not isinstance(variables, Mapping):
            self.problem(
                f"overrides.variables must be a mapping, not a {type(variables).__name__}",
                "variables",
                fix="write variables: {'component:path': terraform_variable_name}",
            )
            return
        for target in sorted(variables, key=str):
            self.attempt(
                _parse_variable,
                target,
                variables[target],
                file=self.file,
                key=f"{self.base}.variables.{target}",
                fix="write 'component:path': variable_name, e.g. 'gpuoperator:driver.version': gpu_driver_version",
            )


def _parse_values_entry(
    entry: Any, *, file: str, cluster: str, key: str, root: Path | None
) -> Override:
    shape = "{component: <name>, values: {...}} or {component: <name>, file: <path.yaml>}"
    if not isinstance(entry, Mapping):
        raise GpuclusterError(
            f"a values entry must be a mapping, not a {type(entry).__name__}",
            file=file,
            key=key,
            allowed=shape,
        )
    unknown = sorted(str(k) for k in entry if k not in ("component", "values", "file"))
    if unknown:
        raise GpuclusterError(
            f"unknown key(s) {', '.join(repr(k) for k in unknown)} in a values entry",
            file=file,
            key=key,
            allowed="component, values, file",
        )
    component = entry.get("component")
    if not isinstance(component, str) or not _COMPONENT_TOKEN.fullmatch(component.strip()):
        raise GpuclusterError(
            f"component must be a component name or alias, not {component!r}",
            file=file,
            key=f"{key}.component",
            allowed=shape,
        )
    has_values, has_file = "values" in entry, "file" in entry
    if has_values == has_file:
        raise GpuclusterError(
            "give exactly one of 'values' and 'file'", file=file, key=key, allowed=shape
        )
    if has_values:
        data = entry["values"]
        where = f"{key}.values"
        data_file = file
    else:
        data_file, data = _load_values_file(
            entry["file"], file=file, cluster=cluster, key=f"{key}.file", root=root
        )
        where = ""
    if not isinstance(data, Mapping):
        raise GpuclusterError(
            f"structured values must be a mapping of Helm values, not {'an empty document' if data is None else 'a ' + type(data).__name__}",
            file=data_file,
            key=where or None,
            fix="write the chart's values as a YAML mapping",
        )
    if ENABLED_KEY in data:
        raise GpuclusterError(
            "'enabled' cannot be given as a structured value (it toggles the component, not a chart value)",
            file=data_file,
            key=f"{where}.enabled" if where else "enabled",
            fix=f"use a scalar set instead: overrides.set: ['{component.strip()}:enabled=false']",
        )
    return Override(
        component=component.strip(), kind="values", value=dict(data), source=file, key=key
    )


def _load_values_file(
    ref: Any, *, file: str, cluster: str, key: str, root: Path | None
) -> tuple[str, Any]:
    if not isinstance(ref, str) or not ref.strip():
        raise GpuclusterError(
            f"file must be a relative path string, not {ref!r}", file=file, key=key
        )
    if root is None:
        raise GpuclusterError(
            "values files can only be referenced from a cluster file",
            file=file,
            key=key,
            fix="inline the values instead",
        )
    rel = Path(ref)
    if rel.is_absolute():
        raise GpuclusterError(
            f"'{ref}' is an absolute path; values files are referenced relative to the cluster file",
            file=file,
            key=key,
            fix="use a path relative to the cluster file, inside the project folder",
        )
    from gpucluster.yamlsafe import resolve_user_path

    base = resolve_user_path(
        file, Path.cwd(), file=file, key=key, cluster=cluster, what="cluster file"
    ).parent
    target = resolve_user_path(ref, base, file=file, key=key, cluster=cluster, what="values file")
    if not target.is_relative_to(root):
        raise GpuclusterError(
            f"'{ref}' resolves outside the project folder {root}",
            file=file,
            key=key,
            fix="copy the values file into the project folder and reference it from there",
        )
    if not os.path.lexists(target):
        raise GpuclusterError(
            f"values file not found: '{ref}'",
            file=file,
            key=key,
            fix="check the path: it is relative to the cluster file's folder",
        )
    display = str(Path(file).parent / rel) if not Path(file).is_absolute() else str(target)
    return display, load_yaml_file(target, display=display, cluster=cluster)


def _parse_variable(target: Any, name: Any, *, file: str, key: str) -> Override:
    if not isinstance(target, str):
        raise GpuclusterError(
            f"variables key {target!r} must be a 'component:path' string", file=file, key=key
        )
    try:
        component, path = split_component_path(target)
    except ValueError as exc:
        raise GpuclusterError(
            str(exc), file=file, key=key, allowed="'component:path': terraform_variable_name"
        ) from None
    if not isinstance(name, str) or not TF_VARIABLE_NAME.fullmatch(name):
        raise GpuclusterError(
            f"{name!r} is not a Terraform variable name",
            file=file,
            key=key,
            allowed="letters, digits, '_' and '-', not starting with a digit",
        )
    if name in TF_RESERVED_VARIABLE_NAMES:
        raise GpuclusterError(
            f"'{name}' is reserved by Terraform and cannot name a variable",
            file=file,
            key=key,
            fix="choose another variable name",
        )
    if name in RUNTIME_STACK_VARIABLE_NAMES:
        raise GpuclusterError(
            f"'{name}' is a variable the runtime stack declares itself (the existing cluster's kubeconfig); "
            "binding a Helm value to it would set that value from the kubeconfig setting",
            file=file,
            key=key,
            allowed=f"any other Terraform variable name (reserved: {', '.join(RUNTIME_STACK_VARIABLE_NAMES)})",
            fix="choose another variable name",
        )
    return Override(
        component=component, kind="variable", path=path, value=name, source=file, key=key
    )


# --------------------------------------------------------------------------- applying


def paths_intersect(a: str, b: str) -> bool:
    """True when dotted paths ``a`` and ``b`` are equal or one lies below the other."""
    pa, pb = split_path(a), split_path(b)
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


def override_paths(override: Override) -> list[str]:
    """The dotted value paths an override writes (leaf paths for structured values)."""
    if override.kind == "values":
        return [p for p, _ in leaf_paths(override.value or {})]
    return [override.path]


def resolve_component(override: Override, catalog) -> str:
    """Canonical component name of an override.

    Raises:
        GpuclusterError: unknown name/alias (lists the known ones).
    """
    try:
        return catalog.resolve_name(override.component)
    except KeyError:
        names = sorted({n for e in catalog.components.values() for n in (e.name, *e.aliases)})
        raise GpuclusterError(
            f"unknown component or alias '{override.component}'",
            file=override.source or None,
            key=override.key or None,
            allowed=allowed_list(names),
            fix=f"{did_you_mean(override.component, names)}use a component name or alias from the catalog registry",
        ) from None


@dataclasses.dataclass(frozen=True)
class ResolvedOverrides:
    """The user's overrides of one cluster with canonical component names, resolved once.

    The pipeline resolves them once (:func:`resolved_overrides`) and passes the value on to node
    scheduling (append mode of user-written lists), the policy checks (``POLICY-KEY-OVERRIDE``)
    and the mapping of error findings to the input file (:meth:`source_of`). Iterating yields
    ``(canonical component, Override)`` in input order; overrides naming no catalog component
    are left out (:func:`apply_overrides` reports them).
    """

    entries: tuple[tuple[str, Override], ...] = ()

    def __iter__(self):
        return iter(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def source_of(self, component: str, path: str) -> str | None:
        """The input (``Override.source``: cluster file, values file or ``--set``) of the last user
        override of ``component`` that writes ``path``, a key above it or a key below it; None when
        no override touches it (the value comes from the recipe). Names the file of a policy error."""
        source = None
        for name, o in self.entries:
            if (
                name == component
                and o.source
                and any(paths_intersect(p, path) for p in override_paths(o))
            ):
                source = o.source
        return source


def resolved_overrides(cluster: ClusterSpec, catalog) -> ResolvedOverrides:
    """Resolve ``cluster.overrides`` once: canonical component names (catalog aliases), unknown
    names skipped (``apply_overrides`` reports them)."""
    out: list[tuple[str, Override]] = []
    for o in cluster.overrides:
        try:
            out.append((catalog.resolve_name(o.component), o))
        except KeyError:
            continue
    return ResolvedOverrides(tuple(out))


def source_of(cluster: ClusterSpec, catalog, component: str, path: str) -> str | None:
    """:meth:`ResolvedOverrides.source_of` of the cluster's overrides (resolved here)."""
    return resolved_overrides(cluster, catalog).source_of(component, path)


def apply_overrides(
    cluster: ClusterSpec, recipe: Recipe, components: Mapping[str, Component], catalog
) -> dict[str, Component]:
    """The components with ``cluster.overrides`` applied (all-or-nothing); ``components`` is
    left as it is.

    Returns:
        a new ``{name: Component}`` in the order of ``components``: set/values give a component
        new ``values``; ``enabled=false`` leaves the component out and drops the dependency edges
        other components declare on it (as AICR's bundler prunes edges to disabled components)
        -- except the edges of manifest-only components, whose manifests are custom resources of
        the operator they depend on; variables fill ``terraform_variables``. A component no
        override touches is the input's own (unchanged) object.

    Raises:
        GpuclusterError: every problem found (unknown or disabled components, non-boolean or
            structured ``enabled``, parent/child conflicts, overrides on a component that is
            also disabled, paths below a scalar, variables on policy-owned keys, broken
            dependency edges), one Problem each, naming file, cluster, component and key.
    """
    if not cluster.overrides:
        return dict(components)
    run = _OverrideRun(cluster, recipe, components, catalog)
    run.resolve_components()
    run.check_enabled_toggles()
    run.check_conflicts()
    run.apply_values()
    run.bind_variables()
    run.check_dependency_edges()
    if run.problems:
        raise GpuclusterError(problems=run.problems)
    return run.result()


class _OverrideRun:
    """One :func:`apply_overrides` call: its steps, in order, collecting every problem."""

    def __init__(
        self, cluster: ClusterSpec, recipe: Recipe, components: Mapping[str, Component], catalog
    ):
        self.cluster, self.recipe, self.components, self.catalog = (
            cluster,
            recipe,
            components,
            catalog,
        )
        self.problems: list[Problem] = []
        self.refs = {ref.name: ref for ref in recipe.component_refs}
        self.resolved: list[tuple[str, Override]] = []
        self.disabled: dict[str, Override] = {}
        self.work: dict[str, dict[str, Any]] = {}
        self.variables: dict[str, dict[str, str]] = {}

    def problem(self, o: Override, message: str, *, component: str | None = None, **kw) -> None:
        self.problems.append(
            Problem(
                message,
                file=o.source or self.cluster.source,
                cluster=self.cluster.name,
                component=component,
                key=o.key or None,
                **kw,
            )
        )

    def values_of(self, name: str) -> dict[str, Any]:
        """The working copy of ``name``'s values (:meth:`result` gives it to the new component)."""
        if name not in self.work:
            self.work[name] = deep_merge(self.components[name].values, None)
        return self.work[name]

    def resolve_components(self) -> None:
        """Canonical names; refuse components not in the recipe or disabled by it."""
        for o in self.cluster.overrides:
            try:
                name = resolve_component(o, self.catalog)
            except GpuclusterError as err:
                for p in err.problems:
                    self.problems.append(
                        dataclasses.replace(
                            p, cluster=self.cluster.name, file=p.file or self.cluster.source
                        )
                    )
                continue
            shown = f"'{name}'" if name == o.component else f"'{name}' (alias '{o.component}')"
            if name not in self.refs:
                self.problem(
                    o,
                    f"component {shown} is not part of the resolved recipe",
                    component=name,
                    allowed=allowed_list(self.components),
                    fix="override only components of this recipe (see `gpucluster recipe`), or pick criteria whose recipe includes it",
                )
                continue
            if not self.refs[name].enabled or name not in self.components:
                if o.kind == "set" and o.path == ENABLED_KEY and o.value is True:
                    self.problem(
                        o,
                        f"the recipe disables component {shown}; enabling a component the recipe disabled is not supported",
                        component=name,
                        fix="use a recipe (overlay or RecipeResult file) that enables it",
                    )
                else:
                    self.problem(
                        o,
                        f"component {shown} is disabled by the recipe, so this override would have no effect",
                        component=name,
                        fix="remove the override",
                    )
                continue
            self.resolved.append((name, o))

    def check_enabled_toggles(self) -> None:
        """``enabled`` toggles: scalar set only, booleans only, last one wins; no variable, no path below."""
        enabled_state: dict[str, Override] = {}
        for name, o in self.resolved:
            if o.kind == "set" and o.path == ENABLED_KEY:
                if not isinstance(o.value, bool):
                    self.problem(
                        o,
                        f"enabled must be true or false, not {o.value!r}",
                        component=name,
                        allowed="true, false",
                        fix=f"write {o.component}:enabled=false to remove the component",
                    )
                    continue
                enabled_state[name] = o
            elif o.kind == "variable" and split_path(o.path)[0] == ENABLED_KEY:
                self.problem(
                    o,
                    "enabled cannot be bound to a Terraform variable: whether a component is installed must be known at synth time",
                    component=name,
                    fix="use a scalar set: enabled=false",
                )
            elif o.kind == "set" and split_path(o.path)[0] == ENABLED_KEY:
                self.problem(
                    o,
                    f"'{o.path}' is below the component toggle 'enabled'",
                    component=name,
                    fix="set enabled=true|false only",
                )
        self.disabled = {n: o for n, o in enabled_state.items() if o.value is False}

    def check_conflicts(self) -> None:
        """Overrides on a component that is also disabled; parent/child set paths."""
        for name, o in self.resolved:
            if name in self.disabled and not (o.kind == "set" and o.path == ENABLED_KEY):
                self.problem(
                    o,
                    f"conflicting overrides: {self.disabled[name].key or '--set'} disables '{name}', but this override also changes it",
                    component=name,
                    fix="remove one of them (a disabled component installs nothing)",
                )
        sets_by_component: dict[str, list[Override]] = {}
        for name, o in self.resolved:
            if o.kind == "set" and o.path != ENABLED_KEY and name not in self.disabled:
                sets_by_component.setdefault(name, []).append(o)
        for name, items in sets_by_component.items():
            for i, a in enumerate(items):
                for b in items[i + 1 :]:
                    pa, pb = split_path(a.path), split_path(b.path)
                    if pa != pb and paths_intersect(a.path, b.path):
                        parent, child = (a, b) if len(pa) < len(pb) else (b, a)
                        self.problem(
                            child,
                            f"conflicting overrides: {parent.key} sets '{parent.path}' and this entry sets '{child.path}' below it",
                            component=name,
                            fix="set either the parent value or the values below it, not both",
                        )

    def apply_values(self) -> None:
        """``set`` and ``values`` overrides, on working copies (committed only when everything is valid)."""
        for name, o in self.resolved:
            if name in self.disabled or o.kind != "set" or split_path(o.path)[0] == ENABLED_KEY:
                continue
            try:
                set_path(self.values_of(name), o.path, o.value)
            except TypeError as exc:
                self.problem(
                    o,
                    f"cannot set '{o.path}': {exc} in the effective values of '{name}'",
                    component=name,
                    fix="set the parent value instead, or check the path against the chart's values",
                )
        for name, o in self.resolved:
            if name in self.disabled or o.kind != "values":
                continue
            self.work[name] = deep_merge(self.values_of(name), o.value)

    def bind_variables(self) -> None:
        """``variable`` overrides: a scalar leaf, not policy-owned, not also set, one path per variable name."""
        bound_by_name: dict[
            str, tuple[str, Override]
        ] = {}  # variable -> (component, first binding)
        set_paths: dict[str, dict[str, Override]] = {}
        for name, o in self.resolved:
            if o.kind in ("set", "values"):
                for p in override_paths(o):
                    set_paths.setdefault(name, {})[p] = o
        for name, o in self.resolved:
            if (
                name in self.disabled
                or o.kind != "variable"
                or split_path(o.path)[0] == ENABLED_KEY
            ):
                continue
            if _is_manifest_only(self.components[name].ref, self.catalog):
                self.problem(
                    o,
                    f"'{name}' is a manifest-only component: its values are rendered into manifests at synth time, so a "
                    "Terraform variable could never reach them",
                    component=name,
                    fix="set the value statically (overrides.set or overrides.values)",
                )
                continue
            entry = self.catalog.components.get(name)
            manifest_path = next(
                (p for p in (entry.manifest_values if entry else ()) if paths_intersect(o.path, p)),
                None,
            )
            if manifest_path is not None:
                self.problem(
                    o,
                    f"'{o.path}' cannot be bound to a Terraform variable: '{manifest_path}' is read only by "
                    f"'{name}''s manifest templates, which are rendered at synth time (registry manifestValues)",
                    component=name,
                    fix="set the value statically (overrides.set or overrides.values)",
                )
                continue
            owned = policy_owned_paths(name, self.recipe, self.catalog)
            hit = next(((p, why) for p, why in owned.items() if paths_intersect(o.path, p)), None)
            if hit is not None:
                self.problem(
                    o,
                    f"'{o.path}' cannot be bound to a Terraform variable: it touches '{hit[0]}', which is {hit[1]}; "
                    "policy must see its value at synth time",
                    component=name,
                    fix="bake the value statically (recipe overlay, profile or a scalar set), or bind a different key",
                )
                continue
            clash = next(
                (s for p, s in set_paths.get(name, {}).items() if paths_intersect(o.path, p)), None
            )
            if clash is not None:
                self.problem(
                    o,
                    f"conflicting overrides: '{o.path}' is bound to a Terraform variable and also changed by {clash.key}",
                    component=name,
                    fix="either bind it to a variable or set it statically",
                )
                continue
            current = get_path(self.values_of(name), o.path)
            if isinstance(current, (dict, list)):
                self.problem(
                    o,
                    f"'{o.path}' holds a {'mapping' if isinstance(current, dict) else 'list'}; a Terraform variable binds one scalar value",
                    component=name,
                    fix="bind a scalar leaf below it",
                )
                continue
            previous = self.variables.setdefault(name, {}).get(o.path)
            if previous is not None and previous != o.value:
                self.problem(
                    o,
                    f"'{o.path}' is bound to two variables ({previous}, {o.value})",
                    component=name,
                    fix="bind it once",
                )
                continue
            first = bound_by_name.get(o.value)
            if first is not None and (first[0], first[1].path) != (name, o.path):
                self.problem(
                    o,
                    f"Terraform variable '{o.value}' is already bound to {first[0]} '{first[1].path}' ({first[1].key}); "
                    "the runtime stack declares one variable per name, so both Helm values would take the first one's "
                    "default and value",
                    component=name,
                    fix="give each bound values path its own variable name",
                )
                continue
            bound_by_name.setdefault(o.value, (name, o))
            self.variables[name][o.path] = o.value

    def check_dependency_edges(self) -> None:
        """Manifest-only components whose dependency an override disables."""
        edge_problems: list[Problem] = []
        for name in self.components:
            if name in self.disabled:
                continue
            ref = self.components[name].ref
            for dep in ref.dependency_refs:
                if dep in self.disabled and _is_manifest_only(ref, self.catalog):
                    o = self.disabled[dep]
                    edge_problems.append(
                        Problem(
                            f"'{name}' depends on '{dep}' (dependencyRefs), and {o.key or 'an override'} disables '{dep}': "
                            f"'{name}' renders custom resources that need '{dep}' installed",
                            file=o.source or self.cluster.source,
                            cluster=self.cluster.name,
                            component=name,
                            key=o.key or None,
                            fix=f"keep '{dep}' enabled, or also disable '{name}' ({name}:enabled=false)",
                        )
                    )
        self.problems.extend(edge_problems)

    def result(self) -> dict[str, Component]:
        """The new components: values and variable bindings written, disabled components and
        the edges to them dropped (unchanged components are the input's objects)."""
        out: dict[str, Component] = {}
        for name, comp in self.components.items():
            if name in self.disabled:
                continue
            changes: dict[str, Any] = {}
            if name in self.work:
                changes["values"] = self.work[name]
            if name in self.variables:
                changes["terraform_variables"] = dict(
                    sorted({**comp.terraform_variables, **self.variables[name]}.items())
                )
            kept = [d for d in comp.ref.dependency_refs if d not in self.disabled]
            if kept != comp.ref.dependency_refs:
                changes["ref"] = dataclasses.replace(comp.ref, dependency_refs=kept)
            out[name] = dataclasses.replace(comp, **changes) if changes else comp
        return out


def _is_manifest_only(ref, catalog) -> bool:
    entry = catalog.components.get(ref.name)
    kind = entry.type if entry is not None else ref.type
    return kind == "Manifest" or ref.type == "Manifest"


def pruned_edges(recipe: Recipe, components: Mapping[str, Component]) -> list[tuple[str, str]]:
    """``(component, dependency)`` recipe edges dropped because the dependency is disabled."""
    out: list[tuple[str, str]] = []
    for ref in recipe.component_refs:
        if ref.name in components:
            out.extend((ref.name, d) for d in ref.dependency_refs if d not in components)
    return sorted(out)

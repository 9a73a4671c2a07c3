"""The overlay index: the catalog's overlay and mixin documents, validated and indexed once.

An overlay (``overlays/<name>.yaml``, kind ``RecipeOverlay``) names its ``base``, its
``criteria``, the ``mixins`` it pulls in, ``constraints``, at most one ``profile`` and its
``componentRefs``; a mixin (``mixins/<name>.yaml``, kind ``RecipeMixin``) adds constraints and
componentRefs by name. :func:`overlay_index` checks every document against
:data:`OVERLAY_SCHEMA` / :data:`MIXIN_SCHEMA` (AICR's recipe metadata format, ``pkg/recipe``
metadata.go, with gpucluster's ``profile`` and ``chartVersions``), then the references between
them (a ``base`` or mixin that exists, no inheritance cycle, a profile whose default is one of its
values), and caches the :class:`OverlayIndex` on the catalog. Resolution
(:mod:`gpucluster.recipes.recipe`) reads only the index. docs/recipes.md describes the format.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucluster import schemas
from gpucluster.errors import GpuclusterError, allowed_list
from gpucluster.model import CRITERIA_FIELDS, Constraint
from gpucluster.recipes.catalog import Catalog

if TYPE_CHECKING:
    import jsonschema


BASE_OVERLAY = "base"


CATALOG_API_VERSION = "gpucluster/v1alpha1"


COMPONENT_TYPES = ("Helm", "Manifest")


ADVERTISERS = ("external",)
"""Values of a profile value's ``advertiser`` (AICR): ``external`` = a platform add-on outside the
recipe advertises whole GPUs (``Recipe.advertiser``; see :func:`gpucluster.recipes.policy.check_advertiser`)."""


_IDENT = re.compile(r"^[A-Za-z0-9._-]+\Z")


_CONSTRAINT = {
    "type": "object",
    "required": ["name", "value"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "value": {"type": "string", "minLength": 1},
    },
}


_STR_LIST = {"type": "array", "items": {"type": "string", "minLength": 1}}


_COMPONENT_REF = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "type": {"enum": list(COMPONENT_TYPES)},
        "source": {"type": "string"},
        "chart": {"type": "string"},
        "version": {"type": "string"},
        "namespace": {"type": "string"},
        "valuesFile": {"type": "string"},
        "overrides": {"type": "object"},
        "manifestFiles": _STR_LIST,
        "preManifestFiles": _STR_LIST,
        "dependencyRefs": _STR_LIST,
        "chartVersions": {"type": "string", "minLength": 1},
    },
}


_CRITERIA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {f: {"type": "string", "minLength": 1} for f in CRITERIA_FIELDS},
}


_PROFILE = {
    "type": "object",
    "required": ["name", "default", "values"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": _IDENT.pattern},
        "description": {"type": "string"},
        "default": {"type": "string", "pattern": _IDENT.pattern},
        "values": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": _IDENT.pattern},
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "constraints": {"type": "array", "items": _CONSTRAINT},
                    "advertiser": {"enum": list(ADVERTISERS)},
                    "componentRefs": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name", "overrides"],
                            "additionalProperties": False,
                            "properties": {
                                "name": {"type": "string"},
                                "overrides": {"type": "object", "minProperties": 1},
                            },
                        },
                    },
                },
            },
        },
    },
}


OVERLAY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "apiVersion", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "kind": {"const": "RecipeOverlay"},
        "apiVersion": {"const": CATALOG_API_VERSION},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?\\Z"}
            },
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "base": {"type": "string", "minLength": 1},
                "criteria": _CRITERIA,
                "mixins": _STR_LIST,
                "constraints": {"type": "array", "items": _CONSTRAINT},
                "profile": _PROFILE,
                "componentRefs": {"type": "array", "items": _COMPONENT_REF},
            },
        },
    },
}
"""JSON Schema of an overlay document (``overlays/<name>.yaml``)."""


MIXIN_SCHEMA = {
    "type": "object",
    "required": ["kind", "apiVersion", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "kind": {"const": "RecipeMixin"},
        "apiVersion": {"const": CATALOG_API_VERSION},
        "metadata": OVERLAY_SCHEMA["properties"]["metadata"],
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "constraints": {"type": "array", "items": _CONSTRAINT},
                "componentRefs": {"type": "array", "items": _COMPONENT_REF},
            },
        },
    },
}
"""JSON Schema of a mixin document (``mixins/<name>.yaml``)."""


@dataclass
class Overlay:
    """One overlay document: ``name`` and ``file`` (as errors name it), ``spec.base`` (None:
    none), ``spec.criteria`` (None: never matches by itself), mixin names, constraints, the
    ``spec.profile`` declaration (None: none) and the raw ``componentRefs`` mappings."""

    name: str
    file: str
    base: str | None
    criteria: dict[str, str] | None
    mixins: list[str]
    constraints: list[Constraint]
    profile: dict[str, Any] | None
    refs: list[dict[str, Any]]


@dataclass
class Mixin:
    """One mixin document: ``name``, ``file``, its constraints and raw ``componentRefs``."""

    name: str
    file: str
    constraints: list[Constraint]
    refs: list[dict[str, Any]]


@dataclass
class OverlayIndex:
    """Every overlay and mixin of a catalog by name (see :func:`overlay_index`)."""

    overlays: dict[str, Overlay]
    mixins: dict[str, Mixin]


def _schema_error(exc: jsonschema.ValidationError, file: str, what: str) -> GpuclusterError:
    key = ".".join(str(p) for p in exc.absolute_path) or None
    return GpuclusterError(
        f"invalid {what}: {exc.message}",
        file=file,
        key=key,
        fix=f"make the {what} match the catalog format described in docs/recipes.md",
    )


def _check_schema(doc: Any, schema: dict[str, Any], file: str, what: str) -> None:
    """Validate one catalog document (jsonschema is imported only here, when a check runs).

    Raises:
        GpuclusterError: see :func:`_schema_error`.
    """
    import jsonschema

    try:
        schemas.validate(doc, schema)
    except jsonschema.ValidationError as exc:
        raise _schema_error(exc, file, what) from None


def overlay_index(catalog: Catalog) -> OverlayIndex:
    """Validate and index the catalog's overlays and mixins (cached on the catalog object).

    Raises:
        GpuclusterError: a document that does not match :data:`OVERLAY_SCHEMA` /
            :data:`MIXIN_SCHEMA` (names the file and key); no ``base`` overlay, or one with
            criteria or a base; an unknown ``spec.base`` or mixin; an inheritance cycle; a
            profile default that is not one of its values, or two values differing only by case.
    """
    cached = getattr(catalog, "_gpucluster_recipe_index", None)
    if cached is not None:
        return cached
    overlays: dict[str, Overlay] = {}
    for name, doc in sorted(catalog.overlays.items()):
        file = str(catalog.overlay_files.get(name, f"overlays/{name}.yaml"))
        if not catalog.schema_checked_already(catalog.overlay_files.get(name)):
            _check_schema(doc, OVERLAY_SCHEMA, file, "overlay")
        spec = doc.get("spec") or {}
        overlays[name] = Overlay(
            name=name,
            file=file,
            base=spec.get("base"),
            criteria=dict(spec["criteria"]) if "criteria" in spec else None,
            mixins=list(spec.get("mixins") or []),
            constraints=[Constraint(c["name"], c["value"]) for c in spec.get("constraints") or []],
            profile=copy.deepcopy(spec.get("profile")),
            refs=list(spec.get("componentRefs") or []),
        )
    mixins: dict[str, Mixin] = {}
    for name, doc in sorted(catalog.mixins.items()):
        file = str(catalog.mixin_files.get(name, f"mixins/{name}.yaml"))
        if not catalog.schema_checked_already(catalog.mixin_files.get(name)):
            _check_schema(doc, MIXIN_SCHEMA, file, "mixin")
        spec = doc.get("spec") or {}
        mixins[name] = Mixin(
            name=name,
            file=file,
            constraints=[Constraint(c["name"], c["value"]) for c in spec.get("constraints") or []],
            refs=list(spec.get("componentRefs") or []),
        )
    catalog.record_schema_checked()  # every shipped file passed: markers for the next process
    if BASE_OVERLAY not in overlays:
        raise GpuclusterError(
            "the catalog has no 'base' overlay",
            allowed=", ".join(str(d) for d in catalog.dirs),
            fix="add overlays/base.yaml to the core catalog",
        )
    if overlays[BASE_OVERLAY].criteria is not None or overlays[BASE_OVERLAY].base:
        raise GpuclusterError(
            "the 'base' overlay must have neither criteria nor a base",
            file=overlays[BASE_OVERLAY].file,
            key="spec",
        )
    for ov in overlays.values():
        if ov.base and ov.base not in overlays:
            raise GpuclusterError(
                f"overlay '{ov.name}' has base '{ov.base}', which is not an overlay",
                file=ov.file,
                key="spec.base",
                allowed=allowed_list(overlays),
            )
        for m in ov.mixins:
            if m not in mixins:
                raise GpuclusterError(
                    f"overlay '{ov.name}' names mixin '{m}', which does not exist",
                    file=ov.file,
                    key="spec.mixins",
                    allowed=allowed_list(mixins),
                )
        if ov.profile is not None:
            _check_profile(ov)
    for ov in overlays.values():
        path = [ov.name]
        current = ov.base
        while current and current != BASE_OVERLAY:
            if current in path:
                raise GpuclusterError(
                    f"overlay inheritance cycle: {' -> '.join(path[path.index(current) :] + [current])}",
                    file=overlays[current].file,
                    key="spec.base",
                    fix="remove one spec.base in the cycle",
                )
            path.append(current)
            current = overlays[current].base
    index = OverlayIndex(overlays=overlays, mixins=mixins)
    setattr(catalog, "_gpucluster_recipe_index", index)  # noqa: B010 -- a memo Catalog does not declare
    return index


def _check_profile(ov: Overlay) -> None:
    profile = ov.profile or {}
    values = profile["values"]
    if profile["default"] not in values:
        raise GpuclusterError(
            f"profile '{profile['name']}' default '{profile['default']}' is not one of its values",
            file=ov.file,
            key="spec.profile.default",
            allowed=allowed_list(values),
        )
    lowered: dict[str, str] = {}
    for vname in values:
        if vname.lower() in lowered:
            raise GpuclusterError(
                f"profile '{profile['name']}' values '{lowered[vname.lower()]}' and '{vname}' differ only by case",
                file=ov.file,
                key="spec.profile.values",
            )
        lowered[vname.lower()] = vname

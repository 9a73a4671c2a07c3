"""Manifest charts: a component's pre- and post-manifests rendered at synth into local Helm charts.

Sources, per enabled component, in this order:

1. the catalog templates the recipe names (``ComponentRef.pre_manifest_files`` /
   ``ComponentRef.manifest_files``): Jinja2 (``StrictUndefined``) files read with
   :meth:`gpucluster.recipes.catalog.Catalog.template_text`, rendered with the context of
   :func:`template_context`;
2. objects plugins return from the hook ``gpucluster_manifests`` (:class:`gpucluster.sdk.Manifest`).

Every rendered file is parsed as YAML (empty documents dropped; a template that renders to
nothing is skipped), each object is checked (``apiVersion``, ``kind``, ``metadata.name``, no
Helm hook annotations) and written back out by :func:`dump_documents` as plain YAML that
contains no ``{{`` (Helm renders a local chart's templates with Go templates; a value
containing ``{{`` is written as a double-quoted scalar with the brace escaped as ``\\x7b``).

One chart per ``(component, phase)``::

    Chart.yaml
    templates/000-<stem>.yaml      # catalog template stem (``nic-cluster-policy-aks``) or Manifest.name
    templates/001-<stem>.yaml

``pre`` charts install before the component's chart, ``post`` charts after it (custom resources
whose CRD the chart installs go in ``post``; see :mod:`gpucluster.charts.graph`). The objects are
ordinary release resources, not Helm hooks, so ``helm uninstall`` (``terraform destroy``)
removes them -- before the chart that runs their controller (docs/manifests.md).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import marshal
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from gpucluster import diskcache
from gpucluster.charts.imagemirror import is_hook, rewrite_object
from gpucluster.errors import GpuclusterError, PluginError
from gpucluster.model import ClusterSpec, Component, LocalChart, Manifest, Recipe

if TYPE_CHECKING:
    import jinja2
    import yaml

PHASES = ("pre", "post")
TEMPLATE_SUFFIX = ".yaml.j2"
CHART_API_VERSION = "v2"
MANIFEST_CHART_VERSION = "1.0.0"
"""Version of every generated manifest chart. ``helm_release`` does not track a local chart's
content, so the graph feeds :attr:`LocalChart.content_hash` into the release values instead."""

HOOK_ANNOTATION_PREFIX = "helm.sh/hook"
DELETE_HOOKS = ("pre-delete", "post-delete")
"""The only Helm hooks a manifest may be: waits that run on ``helm uninstall`` (``terraform
destroy``), e.g. until an operator has finished tearing down before its chart is removed."""

_STEM = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_NUMERIC_LOOKING = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|0x[0-9a-fA-F_]+|0o[0-7_]+|0b[01_]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
    r"|~|null|Null|NULL|true|True|TRUE|false|False|FALSE"
    r"|y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF|[0-9]+:[0-9]+(?::[0-9]+)*"
    r"|[0-9][0-9a-fA-F._+-]*)$"
)
"""Strings another YAML parser (YAML 1.1 or 1.2, Go or Python) could read as a non-string, and
number-like strings (``101e``, ``0.7.0``), quoted for human readers."""


# --------------------------------------------------------------------------- YAML output
# PyYAML is imported where YAML is written or parsed, not at module level: a plan whose dumps and
# parses all come from the per-user cache does not import it.


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "{{" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    if _NUMERIC_LOOKING.match(value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


@functools.cache
def _dumpers() -> tuple[type[yaml.SafeDumper], type[yaml.SafeDumper]]:
    """``(pure-Python dumper, libyaml dumper)``: SafeDumper writing Helm-safe, human-readable YAML
    (see :func:`dump_documents`), and the same representer with libyaml's emitter (PyYAML's C
    extension; the pure-Python emitter when PyYAML was built without it)."""
    import yaml

    class _ManifestDumper(yaml.SafeDumper):
        pass

    class _LibyamlManifestDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
        pass

    for dumper in (_ManifestDumper, _LibyamlManifestDumper):
        dumper.add_representer(str, _represent_str)
    return _ManifestDumper, _LibyamlManifestDumper


def _yaml_dump(doc: Any, options: Mapping[str, Any], *, libyaml: bool = False) -> str:
    """``yaml.dump(doc, **options)`` with this module's dumper (libyaml's emitter when ``libyaml``)."""
    import yaml

    return yaml.dump(doc, Dumper=_dumpers()[libyaml], **options)


class _NotPlain(Exception):
    pass


_LIBYAML_TEXT = re.compile(r"[\x20-\x7e\n]*\Z")
"""Strings libyaml's emitter writes exactly as PyYAML's pure-Python emitter does (found by a
differential fuzz of both, tests/test_plan_memo.py): printable ASCII and newlines -- except a
text ending in two newlines, or a lone newline (a ``|+`` block, after which libyaml adds a
``...`` document end), and, for mapping keys, the empty key, a newline or more than
:data:`_LIBYAML_KEY_MAX` characters (PyYAML writes those as ``? key`` complex keys, libyaml as
simple keys, and their simple-key length limits differ by a few characters)."""
_LIBYAML_KEY_MAX = 100


def _libyaml_safe(text: str) -> bool:
    return _LIBYAML_TEXT.match(text) is not None and not text.endswith("\n\n") and text != "\n"


def _plain_key(value: Any) -> tuple[Any, bool]:
    """``(plain_key(value), whether libyaml writes value exactly as PyYAML)``; ``(None, False)``
    for a value that is not plain data."""
    seen: set[int] = set()
    safe = True

    def key(v: Any) -> Any:
        nonlocal safe
        t = type(v)
        if t is str:
            if safe and not _libyaml_safe(v):
                safe = False
            return v
        if v is None:
            return v
        if t is dict:
            if id(v) in seen:
                raise _NotPlain
            seen.add(id(v))
            out: list[Any] = ["d"]
            for k, item in v.items():
                if type(k) is not str:
                    raise _NotPlain
                if safe and (not k or len(k) > _LIBYAML_KEY_MAX or "\n" in k):
                    safe = False
                out.append(key(k))
                out.append(key(item))
            return tuple(out)
        if t is list:
            if id(v) in seen:
                raise _NotPlain
            seen.add(id(v))
            return ("l", *[key(item) for item in v])
        if t is bool:
            return ("b", v)
        if t is int:
            return ("i", v)
        if t is float:
            return ("f", repr(v))
        raise _NotPlain

    try:
        return key(value), safe and type(value) is dict
    except (_NotPlain, RecursionError):
        return None, False


def plain_key(value: Any) -> Any:
    """A hashable key equal for two values exactly when the YAML dumper writes them alike, or None.

    Covers plain data only -- ``dict`` with ``str`` keys, ``list``, ``str``, ``int``, ``bool``,
    ``float``, ``None`` (exact types, insertion order kept) -- in which no list or dict object
    occurs twice (PyYAML writes a repeated object as an ``&id``/``*id`` alias, so output depends on
    object identity, not only on value). Anything else is None: not memoizable.
    """
    return _plain_key(value)[0]


_DOCUMENT_OPTIONS = dict(
    sort_keys=False,
    default_flow_style=False,
    allow_unicode=True,
    width=1 << 30,
    explicit_start=True,
)
_CHART_YAML_OPTIONS = dict(sort_keys=False, default_flow_style=False, width=1 << 30)
"""``Chart.yaml`` and the templates' ``toyaml`` filter."""
_MEMO_LIMIT = 4096
"""Entries each per-process memo table of this module keeps (emptied when full: bounded memory
in long processes such as the test suite)."""
_DUMPED: dict[Any, tuple[str, bool]] = {}
_LIBYAML_TEXTS: dict[str, None] = {}
"""Texts libyaml parses exactly as PyYAML's pure-Python parser does (:func:`chart_documents`):
:func:`dump_documents` output of documents written by libyaml's emitter, and static catalog
templates (catalog files are parsed by libyaml everywhere, tests/test_yaml_fast_path.py)."""


def _dump_one(doc: Any, options: dict[str, Any]) -> tuple[str, bool]:
    """``(_yaml_dump(doc, options), whether libyaml's emitter wrote it)`` (``options``: one of
    this module's option tables); the text is exactly the pure-Python emitter's.

    A document of plain data (:func:`gpucluster.diskcache.is_plain`: exact types, no part occurring
    twice, so its :mod:`marshal` bytes are equal for two documents exactly when the dumper writes
    them alike) is dumped once per process -- a fleet of clusters dumps the same gate Jobs, RBAC
    and teardown scripts once -- and, when all its strings are :data:`_LIBYAML_TEXT`, by libyaml's
    emitter (five times faster; same text)."""
    if not diskcache.is_plain(doc):
        return _yaml_dump(doc, options), False
    data = marshal.dumps(doc, 2)
    key = (_OPTION_NAMES[id(options)], data)
    hit = _DUMPED.get(key)
    if hit is None:
        hit = _dump_plain(doc, options, data)
        if len(_DUMPED) >= _MEMO_LIMIT:
            _DUMPED.clear()
        _DUMPED[key] = hit
    return hit


DUMP_CACHE_KIND = "yaml-dump"
""":mod:`gpucluster.diskcache` kind of dumped plain documents (:func:`_dump_plain`)."""
_OPTION_NAMES = {id(_DOCUMENT_OPTIONS): "document", id(_CHART_YAML_OPTIONS): "chart"}


def _dump_plain(doc: Any, options: dict[str, Any], data: bytes) -> tuple[str, bool]:
    """:func:`_dump_one` of a plain document whose :mod:`marshal` bytes are ``data``, kept in the
    per-user cache keyed by them, the option table and :func:`_render_identity` (this module's
    source, the PyYAML install). Whether libyaml's emitter may write it (:func:`_plain_key`) is
    decided only when it is dumped, and kept with the text."""
    identity = _render_identity()
    key = (
        None
        if identity is None
        else diskcache.digest([identity, "dump", _OPTION_NAMES[id(options)], data])
    )
    if key is not None:
        cached = diskcache.get_plain(DUMP_CACHE_KIND, key)
        if (
            type(cached) is list
            and len(cached) == 2
            and type(cached[0]) is str
            and type(cached[1]) is bool
        ):
            return cached[0], cached[1]
    libyaml = _plain_key(doc)[1]
    text = _yaml_dump(doc, options, libyaml=libyaml)
    if key is not None:
        diskcache.put_plain(DUMP_CACHE_KIND, key, [text, libyaml])
    return text, libyaml


def _dump_memoized(doc: Any, options: dict[str, Any]) -> str:
    """``_yaml_dump(doc, options)``, exactly (see :func:`_dump_one`)."""
    return _dump_one(doc, options)[0]


def _libyaml_parses(text: str) -> None:
    if len(_LIBYAML_TEXTS) >= _MEMO_LIMIT:
        _LIBYAML_TEXTS.clear()
    _LIBYAML_TEXTS[text] = None


def dump_documents(documents: Iterable[Mapping[str, Any]]) -> str:
    """Deterministic multi-document YAML of ``documents`` that Helm passes through unchanged.

    Keys keep their order; multi-line strings are literal blocks; strings another YAML parser
    could read as numbers/booleans/null are single-quoted; strings containing ``{{`` are
    double-quoted with every ``{{`` written as ``{\\x7b`` (same value, no Go template
    delimiter in the file). Each document starts with ``---``. A document of plain data is
    dumped once per process (:func:`plain_key`); the text is the same either way.

    Returns:
        text ending in a newline ('' for no documents).
    """
    parts = []
    libyaml = True
    for doc in documents:
        text, by_libyaml = _dump_one(doc, _DOCUMENT_OPTIONS)
        parts.append(text.replace("{{", "{\\x7b"))
        libyaml = libyaml and by_libyaml
    out = "".join(parts)
    if "{{" in out:  # pragma: no cover - guarded by the representer above
        raise AssertionError("rendered manifest still contains '{{'")
    if libyaml and out:
        _libyaml_parses(out)
    return out


def content_hash(files: Mapping[str, str]) -> str:
    """sha256 hex over ``files`` sorted by path (``path NUL text NUL`` each)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode("utf-8") + b"\0" + files[path].encode("utf-8") + b"\0")
    return digest.hexdigest()


def make_chart(
    name: str,
    description: str,
    templates: list[tuple[str, str]],
    *,
    version: str = MANIFEST_CHART_VERSION,
    app_version: str = "",
    extra_files: Mapping[str, str] | None = None,
) -> LocalChart:
    """A :class:`LocalChart` with ``Chart.yaml`` and ``templates/NNN-<stem>.yaml`` files.

    Args:
        name: chart name (DNS-1123, also the release id).
        description: one line for ``Chart.yaml``.
        templates: ``(stem, text)`` in install order; numbered ``000``, ``001``, ...
        version: chart SemVer.
        app_version: informational (the component's chart version), omitted when ''.
        extra_files: more chart-relative files (``values.yaml``).
    """
    meta: dict[str, Any] = {
        "apiVersion": CHART_API_VERSION,
        "name": name,
        "description": description,
        "type": "application",
        "version": version,
    }
    if app_version:
        meta["appVersion"] = app_version
    files = {"Chart.yaml": _dump_memoized(meta, _CHART_YAML_OPTIONS)}
    for index, (stem, text) in enumerate(templates):
        files[f"templates/{index:03d}-{stem}.yaml"] = text
    files.update(extra_files or {})
    return LocalChart(
        name=name,
        version=version,
        files=dict(sorted(files.items())),
        content_hash=content_hash(files),
    )


# --------------------------------------------------------------------------- template context


def _scheduling_dict(cluster: ClusterSpec) -> dict[str, Any]:
    """The scheduling inputs after their defaults (:func:`gpucluster.recipes.scheduling.effective_inputs`:
    accelerated tolerations/selector derived from the GPU pools when not given), so a template
    follows every GPU pool taint the way the registry's injected values do."""
    from gpucluster.recipes.scheduling import effective_inputs

    s = effective_inputs(cluster)
    return {
        "acceleratedNodeSelector": dict(s.accelerated_node_selector),
        "acceleratedTolerations": [t.as_dict() for t in s.accelerated_tolerations],
        "systemNodeSelector": dict(s.system_node_selector),
        "systemTolerations": [t.as_dict() for t in s.system_tolerations],
    }


def template_context(
    cluster: ClusterSpec, recipe: Recipe, component: Component, phase: str
) -> dict[str, Any]:
    """The names a manifest template sees (documented in docs/manifests.md).

    Returns:
        ``values``: the component's effective Helm values (after overrides, node scheduling
        and plugin adjustments; a manifest-only component's values are its overrides).
        ``namespace``: the component namespace (also the release namespace).
        ``component``: ``{name, type, namespace, repository, chart, version}``.
        ``release``: ``{name, namespace, phase}`` of the manifest release
        (``<component>-pre`` / ``<component>-manifests``).
        ``cluster``: ``{name, service, criteria{service, accelerator, os, intent, platform},
        profile{...}, kubernetesVersion, scheduling{acceleratedNodeSelector,
        acceleratedTolerations, systemNodeSelector, systemTolerations},
        schedulerProfiles[{schedulerName, trainingRuntime}]}`` (tolerations as Kubernetes
        toleration dicts; the AKS scheduler profiles, docs/scheduler-profiles.md).
        ``recipe``: ``{overlays, profile{name, value} | None}``.
    Filters: ``toyaml`` (block YAML, no trailing newline), ``nindent(n)`` (newline + indent,
    Helm's ``nindent``), ``tojson`` (one-line JSON, which is YAML; keys sorted). Globals: ``fail(message)`` stops synthesis with
    an error naming the template; ``is_false(x)`` (``False`` or ``"false"``), ``not_false(x)``.
    """
    ref = component.ref
    return {
        "values": component.values,
        "namespace": ref.namespace,
        "component": {
            "name": ref.name,
            "type": ref.type,
            "namespace": ref.namespace,
            "repository": ref.source,
            "chart": ref.chart,
            "version": ref.version,
        },
        "release": {
            "name": release_name(ref.name, phase),
            "namespace": ref.namespace,
            "phase": phase,
        },
        "cluster": {
            "name": cluster.name,
            "service": cluster.criteria.service,
            "criteria": cluster.criteria.as_dict(),
            "profile": dict(cluster.profile),
            "kubernetesVersion": cluster.kubernetes_version,
            "scheduling": _scheduling_dict(cluster),
            "schedulerProfiles": [
                {"schedulerName": p.scheduler_name, "trainingRuntime": p.training_runtime}
                for p in cluster.scheduler_profiles
            ],
        },
        "recipe": {
            "overlays": list(recipe.applied_overlays),
            "profile": {"name": recipe.profile[0], "value": recipe.profile[1]}
            if recipe.profile
            else None,
        },
    }


def release_name(component: str, phase: str) -> str:
    """``<component>-pre`` or ``<component>-manifests`` (the graph's node ids)."""
    return f"{component}-pre" if phase == "pre" else f"{component}-manifests"


class _TemplateFail(Exception):
    pass


def _fail(message: str) -> None:
    raise _TemplateFail(message)


def _defined(value: Any) -> Any:
    import jinja2

    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()  # raises jinja2.UndefinedError naming the value
    return value


def _to_json(value: Any) -> str:
    return json.dumps(_defined(value), sort_keys=True, ensure_ascii=False)


def _to_yaml(value: Any) -> str:
    _defined(value)
    return _dump_memoized(value, _CHART_YAML_OPTIONS).rstrip("\n")


def _nindent(text: str, width: int) -> str:
    pad = " " * width
    return "\n" + "\n".join(pad + line if line else line for line in str(text).split("\n"))


def _is_false(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.strip().lower() == "false")


def _environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["toyaml"] = _to_yaml
    env.filters["tojson"] = _to_json
    env.filters["nindent"] = _nindent
    env.globals["fail"] = _fail
    env.globals["is_false"] = _is_false
    env.globals["not_false"] = lambda value: not _is_false(value)
    return env


_ENV: jinja2.Environment | None = None
"""The templates' environment (:func:`_environment`), made when the first template is compiled:
jinja2 is imported only by a plan that renders a template (not one whose renderings are cached)."""
_COMPILED: dict[str, jinja2.Template] = {}


def _template(text: str) -> jinja2.Template:
    """``_ENV.from_string(text)``, compiled once per process and template text."""
    global _ENV
    compiled = _COMPILED.get(text)
    if compiled is None:
        if _ENV is None:
            _ENV = _environment()
        compiled = _COMPILED[text] = _ENV.from_string(text)
    return compiled


_PARSED: dict[str, tuple[Any, ...]] = {}
PARSE_CACHE_KIND = "chart-parse"
""":mod:`gpucluster.diskcache` kind of parsed chart texts (:func:`chart_documents`)."""


def chart_documents(text: str) -> tuple[Any, ...]:
    """``yaml.safe_load_all(text)`` as a tuple, parsed once per process and text: treat the result
    as read-only (it is shared). PyYAML's pure-Python parser -- the text carries user values, and
    libyaml accepts some input PyYAML refuses (tests/test_yaml_fast_path.py) -- except for a text
    of :data:`_LIBYAML_TEXTS`, which libyaml parses to the same documents (tests/test_plan_memo.py).
    Documents of plain data (:func:`gpucluster.diskcache.is_plain`) are kept in the per-user cache
    keyed by the text, the parser chosen and :func:`_render_identity` (the next plan of the same
    cluster reads them instead of importing PyYAML).

    Raises:
        yaml.YAMLError: ``text`` is not valid YAML (not memoized: raised on every call).
    """
    docs = _PARSED.get(text)
    if docs is None:
        by_libyaml = text in _LIBYAML_TEXTS
        identity = _render_identity()
        key = (
            None
            if identity is None
            else diskcache.digest([identity, "parse", str(by_libyaml), text])
        )
        cached = diskcache.MISS if key is None else diskcache.get_plain(PARSE_CACHE_KIND, key)
        if type(cached) is list:
            docs = tuple(cached)
        else:
            docs = _parse_chart_text(text, by_libyaml)
            if key is not None:
                diskcache.put_plain(PARSE_CACHE_KIND, key, list(docs))
        if len(_PARSED) >= _MEMO_LIMIT:
            _PARSED.clear()
        _PARSED[text] = docs
    return docs


def _parse_chart_text(text: str, by_libyaml: bool) -> tuple[Any, ...]:
    """:func:`chart_documents` without the caches: libyaml's parser when ``by_libyaml`` and PyYAML
    has it, else the pure-Python one."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", None) if by_libyaml else None
    return tuple(
        yaml.load_all(text, Loader=loader) if loader is not None else yaml.safe_load_all(text)
    )


def _load_documents(rendered: str) -> list[Any]:
    """The documents of a rendered template (:func:`chart_documents`), as the caller's own copy."""
    return copy.deepcopy(list(chart_documents(rendered)))


def render_template(
    text: str, context: Mapping[str, Any], *, source: str, cluster: str, component: str
) -> list[dict[str, Any]]:
    """Render one Jinja2 manifest template and parse it into objects.

    Returns:
        the non-empty YAML documents, each checked by :func:`check_object` ([] when the
        template renders to nothing).

    Raises:
        GpuclusterError: template syntax error, undefined name (StrictUndefined), ``fail()``,
            invalid YAML or an invalid object; names the template file, cluster and component.
    """
    import jinja2

    where = {"file": source, "cluster": cluster, "component": component}
    try:
        rendered = _template(text).render(**context)
    except _TemplateFail as exc:
        raise GpuclusterError(str(exc), **where) from None
    except jinja2.UndefinedError as exc:
        raise GpuclusterError(
            f"manifest template uses an undefined value: {exc.message}",
            fix="set the value in the component's values, or guard it in the template with .get()",
            **where,
        ) from None
    except jinja2.TemplateSyntaxError as exc:
        raise GpuclusterError(
            f"manifest template syntax error on line {exc.lineno}: {exc.message}", **where
        ) from None
    import yaml

    try:
        docs = [d for d in _load_documents(rendered) if d is not None]
    except yaml.YAMLError as exc:
        raise GpuclusterError(
            f"manifest template did not render to valid YAML: {exc}", **where
        ) from None
    for index, doc in enumerate(docs):
        check_object(doc, where=where, index=index)
    return docs


RENDER_CACHE_KIND = "manifest-render"
""":mod:`gpucluster.diskcache` kind of the shipped templates' renderings (:func:`render_shipped_template`)."""


@functools.lru_cache(maxsize=1)
def _render_identity() -> str | None:
    """Digest of what a rendering depends on besides the template text and its context: this
    module's source (environment options, filters, globals, the YAML written by ``toyaml``), the
    jinja2, MarkupSafe and PyYAML installs (:func:`gpucluster.diskcache.module_identity`) and the
    gpucluster and Python versions; once per process. None when the source cannot be read
    (nothing is cached)."""
    return diskcache.code_identity("manifest-render 1", __file__, ["jinja2", "markupsafe", "yaml"])


def render_shipped_template(
    text: str, context: Mapping[str, Any], *, source: str, cluster: str, component: str
) -> list[dict[str, Any]]:
    """:func:`render_template` of a template of the shipped catalog, its result kept in the per-user
    cache (:mod:`gpucluster.diskcache`) keyed by the template text, the context and
    :func:`_render_identity`: the next process (a plan of the same cluster) reads the objects
    instead of importing jinja2, rendering and parsing the YAML.

    Used only for gpucluster's own templates, which are deterministic (same text and context, same
    output: the determinism tests). Only a context of plain data (exact ``dict``, ``list``, ``str``,
    ``int``, ``float``, ``bool``, ``None``, ... -- what :mod:`marshal` writes) is a key; a rendering
    is kept only when it left the context unchanged and its objects are plain data without shared
    parts (:func:`plain_key`), so a cached result is exactly the rendered one. Errors are never
    kept: a failing template fails the same way every time. The objects read from the cache are
    checked by :func:`check_object` like rendered ones.

    Returns / raises: as :func:`render_template`.
    """
    identity = _render_identity()
    try:
        before = marshal.dumps(dict(context), 2) if identity is not None else None
    except ValueError:  # not plain data: not a key
        before = None
    key = (
        diskcache.digest([identity, text, before])
        if before is not None and identity is not None
        else None
    )
    if key is not None:
        docs = diskcache.get_plain(RENDER_CACHE_KIND, key)
        if type(docs) is list and all(type(d) is dict for d in docs):
            where = {"file": source, "cluster": cluster, "component": component}
            for index, doc in enumerate(docs):
                check_object(doc, where=where, index=index)
            return docs
    docs = render_template(text, context, source=source, cluster=cluster, component=component)
    if key is not None and _plain_key(docs)[0] is not None:
        try:
            unchanged = marshal.dumps(dict(context), 2) == before
        except ValueError:
            unchanged = False
        if unchanged:
            diskcache.put_plain(RENDER_CACHE_KIND, key, docs)
    return docs


def _shipped(catalog: Any, relpath: str) -> bool:
    """Whether ``relpath`` resolves to a file of the shipped catalog (:func:`gpucluster.recipes.catalog.shipped_catalog_dirs`);
    decided once per catalog object and path (kept on the catalog, like its recipe index)."""
    from gpucluster.recipes.catalog import shipped_catalog_dirs

    known = getattr(catalog, "_gpucluster_shipped_files", None)
    if not isinstance(known, dict):
        known = {}
        try:
            catalog._gpucluster_shipped_files = known
        except AttributeError:
            pass
    hit = known.get(relpath)
    if hit is None:
        try:
            path = catalog.find_file(relpath)
            hit = any(path.is_relative_to(d) for d in shipped_catalog_dirs())
        except (AttributeError, GpuclusterError, OSError):
            hit = False
        known[relpath] = hit
    return hit


_TEMPLATE_MARKERS = ("{{", "{%", "{#")


def is_static(text: str) -> bool:
    """A template without Jinja2 syntax (a vendored file such as the Gateway API CRDs): it is
    written into the chart as it is -- comments and license headers kept, and no ``{{`` a Go
    template could read -- once its objects pass :func:`check_object`."""
    return not any(m in text for m in _TEMPLATE_MARKERS)


@functools.lru_cache(maxsize=16)
def _parse_static(text: str) -> tuple[Any, ...] | str:
    """Documents of a static template (libyaml when available), or the parse error text."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return tuple(d for d in yaml.load_all(text, Loader=loader) if d is not None)
    except yaml.YAMLError as exc:
        return str(exc)


def _static_documents(text: str, where: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Parse and check a static template (cached per text: vendored CRD bundles are large).

    Raises:
        GpuclusterError: invalid YAML or an invalid object, naming ``where``.
    """
    docs = _parse_static(text)
    if isinstance(docs, str):
        raise GpuclusterError(f"manifest template is not valid YAML: {docs}", **where)
    for index, doc in enumerate(docs):
        check_object(doc, where=where, index=index)
    return list(docs)


def check_object(doc: Any, *, where: Mapping[str, Any], index: int = 0) -> None:
    """Check one rendered Kubernetes object.

    Requires a mapping with string ``apiVersion`` and ``kind`` and ``metadata.name``. Refuses
    Helm hooks other than :data:`DELETE_HOOKS`: install/upgrade hook resources are not part of
    the release (``terraform destroy`` would leave them behind) and install ordering is the
    release graph's job.

    Raises:
        GpuclusterError: naming ``where`` (file/cluster/component) and the document index.
    """
    label = f"document {index}"
    if not isinstance(doc, dict):
        raise GpuclusterError(
            f"{label} is a {type(doc).__name__}, not a Kubernetes object", **where
        )
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str) or not doc.get(key):
            raise GpuclusterError(f"{label} has no {key}", key=key, **where)
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise GpuclusterError(
            f"{label} ({doc['kind']}) has no metadata.name", key="metadata.name", **where
        )
    annotations = meta.get("annotations") or {}
    hook = annotations.get(HOOK_ANNOTATION_PREFIX)
    if hook is not None:
        events = {e.strip() for e in str(hook).split(",") if e.strip()}
        refused = sorted(events - set(DELETE_HOOKS))
        if refused or not events:
            raise GpuclusterError(
                f"{doc['kind']} {meta['name']} is a Helm '{hook}' hook",
                key="metadata.annotations.helm.sh/hook",
                allowed=", ".join(DELETE_HOOKS) + " (teardown waits)",
                fix="drop the hook annotation: install order comes from the release graph (pre/post manifests, gates), "
                "and install/upgrade hook resources are not removed by helm uninstall",
                **where,
            )


def object_key(doc: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """``(api group, kind, namespace, name)`` identifying an object (namespace '' if unset)."""
    api_version = doc["apiVersion"]
    group = api_version.split("/")[0] if "/" in api_version else ""
    meta = doc["metadata"]
    return group, doc["kind"], meta.get("namespace") or "", meta["name"]


# --------------------------------------------------------------------------- plugin manifests


def _plugin_manifests(
    cluster: ClusterSpec, recipe: Recipe, components: Mapping[str, Component]
) -> list[tuple[str, Any]]:
    """``(plugin name, Manifest)`` from hook ``gpucluster_manifests``, in hook call order."""
    from gpucluster.plugins import call_list_hook

    out: list[tuple[str, Any]] = []
    for plugin, item in call_list_hook(
        "gpucluster_manifests",
        Manifest,
        what="gpucluster.sdk.Manifest",
        cluster=cluster,
        recipe=recipe,
        components=components,
    ):
        if item.phase not in PHASES:
            raise PluginError(
                f"plugin '{plugin}': manifest '{item.name}' has phase '{item.phase}'",
                cluster=cluster.name,
                component=item.component,
                allowed=", ".join(PHASES),
            )
        if not _STEM.fullmatch(item.name or ""):
            raise PluginError(
                f"plugin '{plugin}': manifest name '{item.name}' is not a DNS-1123 label",
                cluster=cluster.name,
                component=item.component,
                allowed="lowercase letters, digits and '-'",
            )
        out.append((plugin, item))
    return out


# --------------------------------------------------------------------------- main entry


def _stem_of(relpath: str) -> str:
    base = relpath.rsplit("/", 1)[-1]
    for suffix in (TEMPLATE_SUFFIX, ".yaml", ".yml", ".j2"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def render_manifest_charts(
    cluster: ClusterSpec,
    recipe: Recipe,
    components: Mapping[str, Component],
    catalog,
    objects: dict[tuple[str, str, str, str], str] | None = None,
) -> dict[tuple[str, str], LocalChart]:
    """Render every enabled component's pre- and post-manifests into local charts.

    Args:
        cluster: the prepared cluster (name, criteria, profile, scheduling).
        recipe: the resolved recipe (component order).
        components: enabled components by name, with final effective values.
        catalog: a :class:`gpucluster.recipes.catalog.Catalog` (``template_text(relpath)``).
        objects: filled, when given, with ``(group, kind, namespace, name) -> component`` of every
            rendered object (what :func:`gpucluster.charts.gates.check_gate_objects` looks up).

    Returns:
        ``{(component, "pre"|"post"): LocalChart}``; a phase whose templates all render to
        nothing has no chart. Charts are named ``<component>-pre`` / ``<component>-manifests``.

    Raises:
        GpuclusterError: a template fails (see :func:`render_template`), a plugin returns
            invalid manifests, or two rendered objects have the same group/kind/namespace/name.
    """
    by_component: dict[tuple[str, str], list[tuple[str, str]]] = {}
    seen: dict[tuple[str, str, str, str], str] = {}
    mirror = getattr(cluster, "image_mirror", None)

    def add(
        component: str,
        phase: str,
        stem: str,
        docs: list[dict[str, Any]],
        source: str,
        text: str | None = None,
    ) -> None:
        for doc in docs:
            key = object_key(doc)
            if key in seen:
                raise GpuclusterError(
                    f"{key[1]} '{key[3]}' is rendered twice: by {seen[key]} and by {source}",
                    cluster=cluster.name,
                    component=component,
                    fix="keep one of them (Helm refuses two releases owning one object)",
                )
            seen[key] = source
            if objects is not None:
                objects[key] = component
        if mirror and any(is_hook(d) for d in docs):
            # Helm 3's post-renderer never sees hooks: a hook names the mirror itself
            docs = [copy.deepcopy(d) for d in docs]
            for d in docs:
                if is_hook(d):
                    rewrite_object(d, mirror)
            text = None
        if docs:
            by_component.setdefault((component, phase), []).append(
                (stem, text if text is not None else dump_documents(docs))
            )

    for ref in recipe.component_refs:
        comp = components.get(ref.name)
        if comp is None:
            continue
        for phase, files in (
            ("pre", comp.ref.pre_manifest_files),
            ("post", comp.ref.manifest_files),
        ):
            context = template_context(cluster, recipe, comp, phase)
            for relpath in files:
                text = catalog.template_text(relpath)
                if is_static(text):
                    where = {"file": relpath, "cluster": cluster.name, "component": ref.name}
                    docs = _static_documents(text, where)
                    text = text if text.endswith("\n") else text + "\n"
                    _libyaml_parses(text)  # a catalog file, read by libyaml like every catalog file
                    add(ref.name, phase, _stem_of(relpath), docs, relpath, text=text)
                    continue
                render = render_shipped_template if _shipped(catalog, relpath) else render_template
                docs = render(
                    text, context, source=relpath, cluster=cluster.name, component=ref.name
                )
                add(ref.name, phase, _stem_of(relpath), docs, relpath)

    for plugin, manifest in _plugin_manifests(cluster, recipe, components):
        if manifest.component not in components:
            continue  # component disabled or not in this recipe
        where = {
            "file": f"plugin {plugin}",
            "cluster": cluster.name,
            "component": manifest.component,
        }
        for index, doc in enumerate(manifest.documents):
            check_object(doc, where=where, index=index)
        add(
            manifest.component,
            manifest.phase,
            manifest.name,
            list(manifest.documents),
            f"plugin {plugin} manifest '{manifest.name}'",
        )

    return _local_charts(cluster, recipe, components, by_component)


def _local_charts(
    cluster: ClusterSpec,
    recipe: Recipe,
    components: Mapping[str, Component],
    by_component: dict[tuple[str, str], list[tuple[str, str]]],
) -> dict[tuple[str, str], LocalChart]:
    """One local chart per ``(component, phase)`` of ``by_component`` (its ``(stem, text)``
    templates), in recipe order; two templates of one chart with the same stem are refused."""
    charts: dict[tuple[str, str], LocalChart] = {}
    order = {ref.name: i for i, ref in enumerate(recipe.component_refs)}
    for (component, phase), templates in sorted(
        by_component.items(), key=lambda kv: (order.get(kv[0][0], 0), kv[0][0], kv[0][1])
    ):
        stems = [s for s, _ in templates]
        dup = sorted({s for s in stems if stems.count(s) > 1})
        if dup:
            raise GpuclusterError(
                f"two {phase}-manifests of '{component}' share the file stem '{dup[0]}'",
                cluster=cluster.name,
                component=component,
                fix="rename the template or the plugin Manifest",
            )
        ref = components[component].ref
        name = release_name(component, phase)
        what = "before" if phase == "pre" else "after"
        charts[(component, phase)] = make_chart(
            name,
            f"gpucluster {phase}-manifests of {component} (installed {what} its chart)",
            templates,
            app_version=ref.version,
        )
    return charts

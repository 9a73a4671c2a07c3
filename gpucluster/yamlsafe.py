"""Strict YAML loading for user input (values files referenced by cluster files).

Plain ``yaml.safe_load`` silently accepts several things that are always mistakes in
hand-written Helm values: a key given twice (the last one wins without a word), YAML
aliases (``*name``, which can expand to huge documents), non-string mapping keys
(``1: x`` / ``true: x``, which Helm cannot address) and YAML timestamps (``2026-07-01``
becomes a date object, not the string the chart expects). :func:`load_yaml_text` rejects
all of them with a :class:`~gpucluster.errors.GpuclusterError` naming the file, the line
and the key path.

A text that parsed is kept, as its data, in the per-user cache (:mod:`gpucluster.diskcache`, kind
:data:`PARSE_CACHE_KIND`) keyed by the text, this module's source and the PyYAML install, so a
repeated ``gpucluster plan`` of the same cluster file neither imports PyYAML nor parses it again.
Errors are never kept.

YAML that comes from elsewhere -- a chart repository's ``index.yaml``, a chart's ``values.yaml``
-- is read by :func:`load_untrusted` instead: one pass over libyaml's events, no aliases, a bound
on the nodes built and a deadline check as it goes.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucluster import diskcache
from gpucluster.errors import GpuclusterError

if TYPE_CHECKING:
    import yaml

MAX_INPUT_BYTES = 1024 * 1024
"""Largest user YAML file read (1 MiB). Helm values files are kilobytes; anything bigger is
almost certainly the wrong file (a binary, a log, a chart archive)."""


@functools.cache
def _strict_loader() -> type[yaml.SafeLoader]:
    """The SafeLoader subclass that refuses aliases, duplicate keys and non-string keys (made on
    first use, so a process whose parses all come from the cache does not import PyYAML)."""
    import yaml

    class _StrictLoader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    "YAML aliases (*name) are not allowed in gpucluster input; write the value out",
                    event.start_mark,
                )
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):
            if not isinstance(node, yaml.MappingNode):
                return super().construct_mapping(node, deep=deep)
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        "YAML merge keys (<<) are not allowed in gpucluster input",
                        key_node.start_mark,
                    )
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"mapping key {key!r} is a {type(key).__name__}, not a string; quote it",
                        key_node.start_mark,
                    )
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key '{key}' (first given on line {seen[key].line + 1})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark
            return super().construct_mapping(node, deep=deep)

        def construct_yaml_int(self, node):
            text = self.construct_scalar(node)
            digits = str(text).replace("_", "").lstrip("+-")
            if (
                len(digits) > _INT_TEXT_LIMIT
            ):  # before int(): Python refuses > 4300 decimal digits with a ValueError
                return OutOfRange(str(text))
            value = super().construct_yaml_int(node)
            return value if INT_MIN <= value <= INT_MAX else OutOfRange(str(text))

    _StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)
    return _StrictLoader


INT_MIN, INT_MAX = -(2**63), 2**63 - 1
"""The integers user YAML may hold: 64-bit signed, what Helm (Go ``int64``, sigs.k8s.io/yaml) and
Kubernetes read. Outside it, whatever the base (``0x``/``0o``/``0b``, sexagesimal, decimal), the
value is one error naming its key (:func:`check_plain`), never a traceback."""
_INT_TEXT_LIMIT = 80
"""Longest integer literal converted at all (characters without sign and ``_``): 2**63 needs 19
decimal digits, 64 binary ones; longer texts are out of range without being converted."""


class OutOfRange:
    """An integer literal outside :data:`INT_MIN`..:data:`INT_MAX` (its text as written); what the
    strict loader gives for it, refused by :func:`check_plain` with the key path."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def shown(self) -> str:
        """The literal for a message: up to 24 characters, longer ones cut with their length."""
        return (
            self.text
            if len(self.text) <= 24
            else f"{self.text[:12]}…{self.text[-6:]} ({len(self.text)} characters)"
        )


def _mark_text(exc: yaml.YAMLError) -> str:
    import yaml

    if isinstance(exc, yaml.reader.ReaderError):
        char = chr(exc.character) if isinstance(exc.character, int) else str(exc.character)
        return (
            f"character {char!r} (U+{ord(char[:1] or ' '):04X}) at position {exc.position} is not allowed in YAML "
            f"({exc.reason or 'special characters are not allowed'})"
        )
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"line {mark.line + 1} column {mark.column + 1}: {problem}"
    return str(problem)


def _fix_for(exc: yaml.YAMLError) -> str:
    """How to fix a YAML error of :func:`load_yaml_text` (one of the strict loader's refusals, or
    a syntax error)."""
    import yaml

    if isinstance(exc, yaml.reader.ReaderError):
        code = (
            exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or " ")
        )
        return (
            "remove the control character, or write it escaped inside a double-quoted string "
            f'("\\x{code:02x}")'
            if code < 0x100
            else f'("\\u{code:04x}")'
        )
    problem = str(getattr(exc, "problem", None) or exc)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    if "aliases" in problem:
        return "write the value out where the alias (*name) is used and drop the anchor (&name)"
    if "merge keys" in problem:
        return "write the merged keys out instead of '<<'"
    if problem.startswith("duplicate key"):
        return "keep one of the two keys (merge their contents)"
    if "not a string" in problem:
        return "quote the key"
    if "'\\t'" in problem or "\t" in problem:
        return f"indent with spaces, not tabs{where}"
    return (
        f"correct the YAML{where}: indent with spaces, close every quote and bracket, and put a space after "
        "each 'key:'"
    )


NAME_MAX_BYTES = 255
"""Longest file name component (bytes) Linux file systems accept (``NAME_MAX``)."""
PATH_MAX_BYTES = 4095
"""Longest path (bytes) the kernel accepts (``PATH_MAX`` - 1)."""


def resolve_user_path(
    text: str, base: Path, *, file: str, key: str, cluster: str | None = None, what: str = "file"
) -> Path:
    """``base / text`` resolved, for a path the user wrote (``recipe:``, ``overrides.values[].file``).

    Refused with one line each, before any file system call can raise: a NUL byte, a name
    component longer than :data:`NAME_MAX_BYTES` or a path longer than :data:`PATH_MAX_BYTES`
    bytes, and a symbolic link loop (``RuntimeError``/``ELOOP`` from ``Path.resolve``).

    Raises:
        GpuclusterError: naming ``file``, ``cluster`` and ``key``.
    """
    where = {"file": file, "cluster": cluster, "key": key}
    if "\x00" in text:
        raise GpuclusterError(
            f"the {what} path {text!r} holds a NUL byte",
            fix="remove the NUL byte from the path",
            **where,
        )
    encoded = os.fsencode(text)
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > NAME_MAX_BYTES or len(encoded) > PATH_MAX_BYTES:
        raise GpuclusterError(
            f"the {what} path is too long ({len(encoded)} bytes, longest name {longest} bytes)",
            allowed=f"names of at most {NAME_MAX_BYTES} bytes, paths of at most {PATH_MAX_BYTES} bytes",
            fix="use a shorter path",
            **where,
        )
    try:
        path = Path(text).expanduser() if text.startswith("~") else Path(text)
    except RuntimeError:  # ~nouser/...: "Could not determine home directory"
        raise GpuclusterError(
            f"the {what} path {text!r} names the home folder of a user this system does not know",
            fix="write the path without ~user (relative to the cluster file, or absolute)",
            **where,
        ) from None
    try:
        return (path if path.is_absolute() else base / path).resolve()
    except (RuntimeError, OSError) as exc:  # "Symlink loop from ...", ELOOP
        reason = getattr(exc, "strerror", None) or "a symbolic link loop"
        raise GpuclusterError(
            f"the {what} path {text!r} cannot be resolved: {reason}",
            fix="point it at a regular file (check the symbolic links on the way)",
            **where,
        ) from None


MAX_DEPTH = 64
"""Deepest nesting of mappings and lists accepted in user YAML (Helm values nest a few levels;
much deeper documents would exhaust Python's recursion limit in merging and hashing)."""


def check_plain(
    data: Any, *, file: str, key: str = "", cluster: str | None = None, _depth: int = 0
) -> None:
    """Ensure ``data`` is plain YAML data Helm understands.

    Allowed: mappings with string keys, lists, strings, 64-bit ints (:data:`INT_MIN`..:data:`INT_MAX`;
    an :class:`OutOfRange` literal is refused), finite floats, booleans, null, nested at most
    :data:`MAX_DEPTH` levels.

    Raises:
        GpuclusterError: naming ``file`` and the dotted key path of the first offending value.
    """
    if _depth > MAX_DEPTH and isinstance(data, (dict, list)):
        raise GpuclusterError(
            f"values nest deeper than {MAX_DEPTH} levels",
            file=file,
            cluster=cluster,
            key=(key[:200] or None),
            fix="flatten the document (Helm values nest a few levels)",
        )
    if isinstance(data, dict):
        for k, v in data.items():
            if not isinstance(k, str):
                raise GpuclusterError(
                    f"mapping key {k!r} is a {type(k).__name__}, not a string",
                    file=file,
                    cluster=cluster,
                    key=key or None,
                    fix="quote the key",
                )
            check_plain(
                v, file=file, key=f"{key}.{k}" if key else k, cluster=cluster, _depth=_depth + 1
            )
    elif isinstance(data, list):
        for i, v in enumerate(data):
            check_plain(v, file=file, key=f"{key}[{i}]", cluster=cluster, _depth=_depth + 1)
    elif isinstance(data, bool) or data is None or isinstance(data, str):
        return
    elif isinstance(data, OutOfRange) or (isinstance(data, int) and not INT_MIN <= data <= INT_MAX):
        shown = data.shown() if isinstance(data, OutOfRange) else f"of {data.bit_length()} bits"
        raise GpuclusterError(
            f"integer {shown} is outside the 64-bit range Helm and Kubernetes read",
            file=file,
            cluster=cluster,
            key=key or None,
            allowed=f"integers from {INT_MIN} to {INT_MAX}",
            fix="use a number in that range, or quote it if it is meant as text",
        )
    elif isinstance(data, int):
        return
    elif isinstance(data, float):
        if not math.isfinite(data):
            raise GpuclusterError(
                f"value {data!r} is not a finite number",
                file=file,
                cluster=cluster,
                key=key or None,
                fix="quote it or use a number",
            )
    else:
        raise GpuclusterError(
            f"value {data!r} is a YAML {type(data).__name__}, which Helm values cannot hold",
            file=file,
            cluster=cluster,
            key=key or None,
            allowed="mappings, lists, strings, numbers, booleans, null",
            fix="quote it to make it a string",
        )


PARSE_CACHE_KIND = "yaml-strict"
""":mod:`gpucluster.diskcache` kind of strictly parsed user YAML (:func:`load_yaml_text`)."""


@functools.lru_cache(maxsize=1)
def _parse_identity() -> str | None:
    """Digest of what a strict parse depends on besides the text: this module's source, the
    PyYAML install (:func:`gpucluster.diskcache.module_identity`) and the Python version; None when
    the source cannot be read (nothing is cached)."""
    return diskcache.code_identity("yaml-strict 1", __file__, ["yaml"])


def load_yaml_text(text: str, *, file: str, cluster: str | None = None) -> Any:
    """Parse one YAML document strictly (see module docstring); a text that parsed before is
    read from the per-user cache (:data:`PARSE_CACHE_KIND`) and checked by :func:`check_plain` again.

    Raises:
        GpuclusterError: syntax errors (with line and column), several documents, aliases,
            duplicate or non-string keys, and non-plain values.
    """
    identity = _parse_identity()
    key = None if identity is None else diskcache.digest([identity, text])
    if key is not None:
        cached = diskcache.get_plain(PARSE_CACHE_KIND, key)
        if cached is not diskcache.MISS:
            check_plain(cached, file=file, cluster=cluster)
            return cached
    data = _parse_text(text, file=file, cluster=cluster)
    if key is not None:
        diskcache.put_plain(PARSE_CACHE_KIND, key, data)
    return data


def _parse_text(text: str, *, file: str, cluster: str | None) -> Any:
    """:func:`load_yaml_text` without the cache."""
    import yaml

    try:
        docs = list(yaml.load_all(text, Loader=_strict_loader()))
    except yaml.YAMLError as exc:
        raise GpuclusterError(
            f"invalid YAML: {_mark_text(exc)}", file=file, cluster=cluster, fix=_fix_for(exc)
        ) from None
    except RecursionError:
        raise GpuclusterError(
            "YAML nesting is too deep",
            file=file,
            cluster=cluster,
            fix="flatten the document (Helm values nest a few levels)",
        ) from None
    if len(docs) > 1:
        raise GpuclusterError(
            f"holds {len(docs)} YAML documents; exactly one is allowed",
            file=file,
            cluster=cluster,
            fix="remove the '---' separators",
        )
    data = docs[0] if docs else None
    check_plain(data, file=file, cluster=cluster)
    return data


def load_yaml_file(
    path: Path,
    *,
    display: str | None = None,
    cluster: str | None = None,
    max_bytes: int = MAX_INPUT_BYTES,
) -> Any:
    """Read and strictly parse a user YAML file.

    Args:
        path: the file.
        display: how to name the file in errors (defaults to ``str(path)``).
        max_bytes: size limit (default :data:`MAX_INPUT_BYTES`).

    Raises:
        GpuclusterError: missing/unreadable file, too large, not UTF-8, or invalid YAML.
    """
    name = display or str(path)
    try:
        info = path.stat()
        size = info.st_size
    except FileNotFoundError:
        raise GpuclusterError(
            "file not found", file=name, cluster=cluster, fix="check the path"
        ) from None
    except ValueError:  # "embedded null byte"
        raise GpuclusterError(
            "the file name holds a NUL byte", file=name, cluster=cluster, fix="remove the NUL byte"
        ) from None
    except OSError as exc:
        raise GpuclusterError(
            f"cannot read file: {exc.strerror}",
            file=name,
            cluster=cluster,
            fix="check the file's permissions and path",
        ) from None
    import stat as stat_mod

    if not stat_mod.S_ISREG(info.st_mode):
        raise GpuclusterError(
            "is not a regular file", file=name, cluster=cluster, fix="point to a YAML file"
        )
    if size > max_bytes:
        raise GpuclusterError(
            f"file is {size} bytes; the limit is {max_bytes} bytes",
            file=name,
            cluster=cluster,
            fix="check that this is the intended values file",
        )
    try:
        with path.open("rb") as fh:
            raw = fh.read(
                max_bytes + 1
            )  # st_size can be 0 for /proc-style files: limit what is read
    except OSError as exc:
        raise GpuclusterError(
            f"cannot read file: {exc.strerror}",
            file=name,
            cluster=cluster,
            fix="check the file's permissions and path",
        ) from None
    if len(raw) > max_bytes:
        raise GpuclusterError(
            f"file is larger than {max_bytes} bytes; the limit is {max_bytes} bytes",
            file=name,
            cluster=cluster,
            fix="check that this is the intended values file",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GpuclusterError(
            f"is not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            file=name,
            cluster=cluster,
            fix="save the file as UTF-8",
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return load_yaml_text(text, file=name, cluster=cluster)


# --------------------------------------------------------------------------- YAML from a peer

CHECK_EVERY = 4096
"""Parser events between two calls of :func:`load_untrusted`'s ``check`` (a deadline)."""


class UntrustedYamlError(ValueError):
    """What :func:`load_untrusted` refuses: a syntax error, an alias, a merge key, a tag, a
    collection as a mapping key, more than one document, more events than allowed (first line: what
    and where)."""


def load_untrusted(
    data: bytes | str,
    *,
    max_events: int,
    check: Callable[[], object] | None = None,
) -> Any:
    """One YAML document that came from elsewhere (a chart repository's ``index.yaml``, a chart's
    ``values.yaml``), built from the parser's events in one pass, in time and memory in
    proportion to its length.

    The events come from libyaml (PyYAML's C parser, ``yaml.CSafeLoader``) when PyYAML was built
    with it, else from PyYAML's own parser; scalars are resolved and converted as
    ``yaml.safe_load`` does (``tag:yaml.org,2002`` types: str, int, float, bool, null,
    timestamp, binary). Nothing can make the result larger than the text: an alias (``*name``),
    which could repeat a node without end (an "alias bomb"), is refused, as are merge keys
    (``<<``), explicit tags other than the YAML core types, collections as mapping keys and more
    than one document. A key given twice keeps its last value, as ``yaml.safe_load``.

    Args:
        data: the document (bytes: UTF-8/16 as YAML reads them).
        max_events: most parser events read (one per scalar, collection start and end): a
            bound on the objects built whatever the text.
        check: called every :data:`CHECK_EVERY` events (a deadline check that raises).

    Raises:
        UntrustedYamlError: see the class; ``check``'s own exceptions pass through.
    """
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_class(data)
    try:
        return _build(loader, yaml, max_events, check)
    except yaml.YAMLError as exc:
        raise UntrustedYamlError(_mark_text(exc)) from None
    finally:
        loader.dispose()


_CORE_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}"
    for t in ("str", "int", "float", "bool", "null", "timestamp", "binary", "map", "seq")
)


def _refuse(what: str, event: Any) -> UntrustedYamlError:
    mark = getattr(event, "start_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return UntrustedYamlError(f"{what}{where}")


def _build(loader: Any, yaml: Any, max_events: int, check: Callable[[], object] | None) -> Any:
    """:func:`load_untrusted`'s loop: a stack of open collections, each value added to the top
    one (a mapping alternates key and value)."""
    from yaml.nodes import ScalarNode

    constructors = loader.yaml_constructors
    str_tag = "tag:yaml.org,2002:str"
    no_key = object()
    stack: list[list[Any]] = []  # [container, pending key (mappings)]
    root: Any = None
    documents = count = 0
    scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
    mapping_start, sequence_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
    collection_end = (yaml.MappingEndEvent, yaml.SequenceEndEvent)

    def add(value: Any, event: Any) -> None:
        nonlocal root
        if not stack:
            root = value
            return
        top = stack[-1]
        container = top[0]
        if type(container) is list:
            container.append(value)
        elif top[1] is no_key:
            if isinstance(value, (dict, list)):
                raise _refuse("a collection as a mapping key is not accepted", event)
            top[1] = value
        else:
            container[top[1]] = value
            top[1] = no_key

    while True:
        event = loader.get_event()
        if event is None:
            break
        count += 1
        if count > max_events:
            raise _refuse(f"more than {max_events} YAML nodes", event)
        if check is not None and count % CHECK_EVERY == 0:
            check()
        kind = type(event)
        if kind is scalar_event:
            tag = event.tag
            if tag is None or tag == "!":
                if event.implicit[0]:
                    tag = loader.resolve(ScalarNode, event.value, (True, False))
                else:
                    tag = str_tag
            if tag == str_tag:
                value = event.value
            elif tag in _CORE_TAGS:
                value = constructors[tag](loader, ScalarNode(tag, event.value))
            elif tag == "tag:yaml.org,2002:merge":
                raise _refuse("merge keys (<<) are not accepted", event)
            else:
                raise _refuse(f"the tag {tag[:80]} is not accepted", event)
            add(value, event)
        elif kind is mapping_start or kind is sequence_start:
            if event.tag not in (None, "!") and event.tag not in _CORE_TAGS:
                raise _refuse(f"the tag {event.tag[:80]} is not accepted", event)
            stack.append([{} if kind is mapping_start else [], no_key])
        elif kind in collection_end:
            add(stack.pop()[0], event)
        elif kind is alias_event:
            raise _refuse("aliases (*name) are not accepted", event)
        elif kind is yaml.DocumentStartEvent:
            documents += 1
            if documents > 1:
                raise _refuse("more than one YAML document", event)
    return root

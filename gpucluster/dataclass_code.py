"""Compiled dataclass methods, kept in the per-user cache (``gpucluster plan`` speed).

On CPython 3.11 :mod:`dataclasses` writes the source of every generated method (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ...) and compiles it with ``exec`` when
the class is defined: for the ~45 dataclasses a plan imports (:mod:`gpucluster.model`, the
catalog, the recipes, the platforms' settings) that parse-and-compile was the largest single cost
of a warm ``gpucluster plan`` (about 180 M of 564 M instructions, docs/synth.md "What is left").

:func:`install` (called by ``gpucluster/__init__.py``) wraps ``dataclasses._create_fn``: the
source text is made exactly as the standard library makes it, and the code object compiled
from that text is taken from one cache entry (kind ``dataclass-code``, keyed by ``sys.version``,
the bytecode magic number and this module's bytes) when it holds one for that exact text, else compiled as before and added to the entry when the process exits. The
functions made are the same: the same text compiled by the same interpreter (the key holds
``sys.version`` and the bytecode magic number), run with the same globals and closure values.

Safety: the entry is read under :mod:`gpucluster.diskcache`'s rules (owner-only folders and file,
sha256-checked, bounded size) -- the trust Python's own ``__pycache__`` gives bytecode; its
decode must be a ``dict`` of ``str`` to code objects, and any failure is a miss. Nothing is
installed on another Python version or when ``_create_fn``'s signature is not the one this
module knows (the standard library changed it in 3.13), nor with ``GPUCLUSTER_CACHE_DIR=off``.
"""

from __future__ import annotations

import atexit
import marshal
import sys
import types

KIND = "dataclass-code"
"""The cache kind of the one entry (:mod:`gpucluster.diskcache`)."""

MAX_ENTRIES = 4096
"""At most this many method texts are kept (a process adding more stores none of them)."""

_SIGNATURE = ("name", "args", "body", "globals", "locals", "return_type")

_compiled_here: dict[str, types.CodeType] = {}
"""The method texts this process compiled (not found in the entry); stored at exit."""


def compiled_here() -> int:
    """How many generated methods this process compiled itself (0 on a warm run; tests, bench)."""
    return len(_compiled_here)


def _key() -> str:
    from importlib._bootstrap_external import (
        MAGIC_NUMBER,
    )  # the bytecode format (importlib.util's own)

    from gpucluster.diskcache import digest

    try:  # this module's own bytes: a change of how it compiles is another key
        with open(__file__, "rb") as f:
            source = f.read()
    except OSError:
        source = b"unreadable"
    return digest(
        [f"{KIND} 1", sys.version, MAGIC_NUMBER, sys.implementation.cache_tag or "", source]
    )


def _load(key: str) -> dict[str, types.CodeType]:
    from gpucluster import diskcache

    payload = diskcache.get(KIND, key)
    if payload is None:
        return {}
    try:
        table = marshal.loads(payload)
    except Exception:  # noqa: BLE001 - any failure of the decode is a miss
        return {}
    if type(table) is not dict or not all(
        type(k) is str and type(v) is types.CodeType for k, v in table.items()
    ):
        return {}
    return table


def install() -> bool:
    """Wrap ``dataclasses._create_fn`` with the compiled-code cache (see the module docstring).

    Returns:
        True when installed (CPython 3.11, the known signature, a usable cache folder); False
        otherwise, leaving :mod:`dataclasses` as it was. Calling it again changes nothing.
    """
    import dataclasses

    original = dataclasses._create_fn  # type: ignore[attr-defined]
    if getattr(original, "_gpucluster_cached", False):
        return True
    code = getattr(original, "__code__", None)
    if (
        sys.implementation.name != "cpython"
        or sys.version_info[:2] != (3, 11)
        or code is None
        or code.co_varnames[: code.co_argcount + code.co_kwonlyargcount] != _SIGNATURE
    ):
        return False
    from gpucluster import diskcache

    if diskcache.cache_dir() is None:
        return False
    key = _key()
    table = _load(key)
    added = _compiled_here
    missing = dataclasses.MISSING
    module_globals = vars(dataclasses)

    def _create_fn(name, args, body, *, globals=None, locals=None, return_type=missing):
        # The text exactly as dataclasses._create_fn (CPython 3.11) writes it.
        if locals is None:
            locals = {}
        return_annotation = ""
        if return_type is not missing:
            locals["_return_type"] = return_type
            return_annotation = "->_return_type"
        args = ",".join(args)
        body = "\n".join(f"  {b}" for b in body)
        txt = f" def {name}({args}){return_annotation}:\n{body}"
        local_vars = ", ".join(locals.keys())
        txt = f"def __create_fn__({local_vars}):\n{txt}\n return {name}"
        compiled = table.get(txt)
        if compiled is None:
            compiled = added[txt] = compile(
                txt, "<string>", "exec", dont_inherit=True
            )  # no __future__ flags of this module
            if len(added) == 1:
                atexit.register(_store)
        ns: dict[str, object] = {}
        exec(
            compiled, module_globals if globals is None else globals, ns
        )  # None: as exec inside dataclasses
        return ns["__create_fn__"](**locals)

    def _store() -> None:
        merged = {**table, **added}
        if len(merged) <= MAX_ENTRIES:
            diskcache.put(KIND, key, marshal.dumps(merged))

    _create_fn._gpucluster_cached = True  # type: ignore[attr-defined]
    _create_fn._gpucluster_wraps = original  # type: ignore[attr-defined]
    dataclasses._create_fn = _create_fn  # type: ignore[attr-defined]
    return True

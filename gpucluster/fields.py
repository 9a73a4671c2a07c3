"""Typed reading of YAML input: one mapping's fields, each checked, each error one located line.

Every reader of a cluster file, a backend, a fleet, a plugin's ``settings`` or a RecipeResult
reads its values through :class:`Fields` (a mapping and where it is) or :class:`Where` (a single
value and where it is). A wrong type is one :class:`gpucluster.errors.GpuclusterError` whose line
names the file, the cluster and the whole key path, in one wording for the whole project::

    error[input] file=gpucluster.yaml cluster=c1 key=clusters[0].pools[1].nodeCount:
        'clusters[0].pools[1].nodeCount' must be an integer, not a string fix: write a whole number without quotes

(one line). The readers follow pulumi's Python SDK ``Config`` (``get_int`` / ``require_int``,
``pulumi/config.py`` in pulumi/pulumi ``sdk/python/lib/pulumi``): ``get_*`` returns the default
for a missing key, ``require_*`` refuses it; here a key written with no value (YAML ``null``)
counts as missing, as everywhere in the cluster file (``Where(null_is_missing=False)``: refused). Re-exported by :mod:`gpucluster.sdk`.

A leaf: imports only :mod:`gpucluster.errors`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from gpucluster.errors import GpuclusterError, did_you_mean

__all__ = ["Fields", "Where", "type_name"]

_MISSING = object()

_TYPE_NAMES = {
    dict: "a mapping",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
}


def type_name(value: Any) -> str:
    """How an error names the YAML type of ``value``: ``null``, ``a mapping``, ``a list``,
    ``a string``, ``a boolean``, ``an integer``, ``a number``; another Python type by its class name."""
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class Where:
    """Where input values come from, and the typed checks of one value there.

    Attributes:
        file: the input file as the user named it (``gpucluster.yaml``), or ``None``.
        cluster: the cluster name, or ``None``.
        component: the catalog component the values belong to (a RecipeResult's componentRef), or ``None``.
        id: the error id (``input``; a plugin's own, e.g. ``input.nvke-settings``).
        docs: the page the default fixes point to (``docs/cluster-file.md``).
        null_is_missing: a field written with no value (YAML ``null``) counts as missing (the
            cluster file's rule, default); ``False``: it is a value of the wrong type.

    Each check takes the value and its whole key path (``clusters[0].pools[1].nodeCount``; in a
    plugin, relative to the cluster document: ``settings.numVfs``, which the core prints absolute)
    and returns the value, or raises :class:`GpuclusterError` (one problem, ``fix`` given or the
    type's default).
    """

    file: str | None = None
    cluster: str | None = None
    component: str | None = None
    id: str = "input"
    docs: str = "docs/cluster-file.md"
    null_is_missing: bool = True

    def error(
        self, key: str | None, message: str, *, allowed: str | None = None, fix: str | None = None
    ) -> GpuclusterError:
        """A :class:`GpuclusterError` at ``key`` here (``raise where.error(...)``)."""
        return GpuclusterError(
            message,
            file=self.file,
            cluster=self.cluster,
            component=self.component,
            key=key or None,
            allowed=allowed,
            fix=fix,
            id=self.id,
        )

    def fields(
        self, value: Any, key: str = "", *, allowed: str | None = None, fix: str | None = None
    ) -> Fields:
        """``value`` as :class:`Fields` at ``key`` (``""``: the document itself); ``allowed``: what
        the error's ``(allowed: ...)`` shows.

        Raises:
            GpuclusterError: not a mapping: ``'<key>' must be a mapping, not <type>`` (the
                document: ``the file must be a mapping, ...``).
        """
        if not isinstance(value, dict):
            raise self.error(
                key,
                f"{repr(key) if key else 'the file'} must be a mapping, not {type_name(value)}",
                allowed=allowed,
                fix=fix
                or f"write it as indented 'key: value' lines or {{key: value}} (see {self.docs})",
            )
        return Fields(value, key=key, where=self)

    def check_str(
        self, value: Any, key: str, *, empty_ok: bool = False, fix: str | None = None
    ) -> str:
        """``value`` if it is a string (non-empty unless ``empty_ok``).

        Raises:
            GpuclusterError: ``'<key>' must be a non-empty string, not <type | an empty string>``.
        """
        if not isinstance(value, str) or (not value and not empty_ok):
            what = "an empty string" if value == "" else type_name(value)
            raise self.error(
                key,
                f"'{key}' must be a {'' if empty_ok else 'non-empty '}string, not {what}",
                fix=fix or "quote the value",
            )
        return value

    def check_bool(self, value: Any, key: str, *, fix: str | None = None) -> bool:
        """``value`` if it is ``true`` or ``false``.

        Raises:
            GpuclusterError: ``'<key>' must be true or false, not <type>``.
        """
        if not isinstance(value, bool):
            raise self.error(
                key,
                f"'{key}' must be true or false, not {type_name(value)}",
                fix=fix or "write true or false without quotes",
            )
        return value

    def check_int(
        self,
        value: Any,
        key: str,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
        fix: str | None = None,
    ) -> int:
        """``value`` if it is an integer (not a boolean) within ``minimum``..``maximum`` (inclusive, when given).

        Raises:
            GpuclusterError: ``'<key>' must be an integer, not <type>``, or ``... must be at
                least/at most N, not V`` (allowed: the range).
        """
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(
                key,
                f"'{key}' must be an integer, not {type_name(value)}",
                fix=fix or "write a whole number without quotes",
            )
        span = (
            f"{minimum} to {maximum}"
            if minimum is not None and maximum is not None
            else f">= {minimum}"
            if minimum is not None
            else f"<= {maximum}"
        )
        if minimum is not None and value < minimum:
            raise self.error(
                key,
                f"'{key}' must be at least {minimum}, not {value}",
                allowed=f"an integer {span}",
                fix=fix or f"write a whole number {span}",
            )
        if maximum is not None and value > maximum:
            raise self.error(
                key,
                f"'{key}' must be at most {maximum}, not {value}",
                allowed=f"an integer {span}",
                fix=fix or f"write a whole number {span}",
            )
        return value

    def check_list(
        self, value: Any, key: str, *, empty_ok: bool = False, fix: str | None = None
    ) -> list:
        """``value`` if it is a list (non-empty unless ``empty_ok``).

        Raises:
            GpuclusterError: ``'<key>' must be a non-empty list, not <type | an empty list>``.
        """
        if not isinstance(value, list) or (not value and not empty_ok):
            what = "an empty list" if value == [] else type_name(value)
            raise self.error(
                key,
                f"'{key}' must be a {'' if empty_ok else 'non-empty '}list, not {what}",
                fix=fix or f"write a YAML list: '- item' lines or [a, b] (see {self.docs})",
            )
        return value

    def check_choice(
        self,
        value: Any,
        key: str,
        allowed: Sequence[Any],
        *,
        what: str = "value",
        fix: str | None = None,
    ) -> Any:
        """``value`` if it is one of ``allowed``.

        Raises:
            GpuclusterError: ``unknown <what> <value>`` (allowed: the choices).
        """
        if isinstance(value, (dict, list)) or value not in allowed:
            raise self.error(
                key,
                f"unknown {what} {value!r}",
                allowed=", ".join(str(a) for a in allowed),
                fix=fix or f"use one of the allowed values (see {self.docs})",
            )
        return value


class Fields(Mapping[str, Any]):
    """One mapping of YAML input and where it is: typed readers by field name.

    A read-only :class:`~collections.abc.Mapping` of the raw values (``"name" in fields``,
    ``fields["name"]``); the readers check a value's type, ``get_*`` returning ``default`` when
    the field is missing or ``null``, ``require_*`` refusing that (a ``null`` is a wrong type instead with
    ``Where(null_is_missing=False)``). Made by
    :meth:`Where.fields` (which checks that the value is a mapping)::

        where = Where(file="gpucluster.yaml", cluster="c1")
        pool = where.fields(raw, "clusters[0].pools[1]")
        pool.check_keys(("name", "vmSize", "nodeCount"))
        count = pool.get_int("nodeCount", 1, minimum=0)

    Attributes:
        key: the key path of the mapping (``clusters[0].pools[1]``; ``""`` for the document).
        where: file, cluster, error id and docs page (:class:`Where`).
    """

    def __init__(self, data: Mapping[str, Any], *, key: str = "", where: Where = Where()) -> None:
        self._data = data
        self.key = key
        self.where = where

    def __getitem__(self, name: str) -> Any:
        return self._data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Fields({self.key or '<document>'}: {dict(self._data)!r})"

    def key_of(self, name: object) -> str:
        """The whole key path of field ``name`` (``clusters[0].pools[1].nodeCount``)."""
        return f"{self.key}.{name}" if self.key else str(name)

    def error(
        self, name: str | None, message: str, *, allowed: str | None = None, fix: str | None = None
    ) -> GpuclusterError:
        """A :class:`GpuclusterError` at field ``name`` (``None``: the mapping itself)."""
        return self.where.error(
            self.key_of(name) if name is not None else self.key, message, allowed=allowed, fix=fix
        )

    def _value(self, name: str, required: bool, fix: str | None) -> Any:
        value = self._data.get(name, _MISSING)
        if value is _MISSING or (value is None and self.where.null_is_missing):
            if required:
                raise self.error(
                    name,
                    f"missing key '{self.key_of(name)}'",
                    fix=fix or f"set {name} (see {self.where.docs})",
                )
            return _MISSING
        return value

    def check_keys(
        self, allowed: Sequence[str], *, context: str = "", fix: str | None = None
    ) -> None:
        """Refuse a field not in ``allowed``.

        Args:
            allowed: the known field names, in the order the error lists them.
            context: words after the message (``for backend type 'cloud'``).
            fix: the fix; default ``did you mean 'X'? remove or rename the key (see <docs>)``.

        Raises:
            GpuclusterError: ``unknown key 'a'`` / ``unknown keys 'a', 'b'`` at the first one
                (sorted), allowed: ``allowed``.
        """
        unknown = sorted(str(k) for k in self._data if k not in allowed)
        if unknown:
            raise self.error(
                unknown[0],
                f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(repr(u) for u in unknown)}"
                + (f" {context}" if context else ""),
                allowed=", ".join(allowed),
                fix=fix
                or f"{did_you_mean(unknown[0], allowed)}remove or rename the key (see {self.where.docs})",
            )

    def get_str(
        self, name: str, default: Any = None, *, empty_ok: bool = False, fix: str | None = None
    ) -> Any:
        """Field ``name`` as a string (:meth:`Where.check_str`), ``default`` when missing or null."""
        value = self._value(name, False, fix)
        return (
            default
            if value is _MISSING
            else self.where.check_str(value, self.key_of(name), empty_ok=empty_ok, fix=fix)
        )

    def require_str(
        self,
        name: str,
        *,
        empty_ok: bool = False,
        fix: str | None = None,
        missing_fix: str | None = None,
    ) -> str:
        """Field ``name`` as a string; missing or null: ``missing key '<key>'`` (fix ``missing_fix``)."""
        return self.where.check_str(
            self._value(name, True, missing_fix), self.key_of(name), empty_ok=empty_ok, fix=fix
        )

    def get_bool(self, name: str, default: Any = None, *, fix: str | None = None) -> Any:
        """Field ``name`` as ``true``/``false`` (:meth:`Where.check_bool`), ``default`` when missing or null."""
        value = self._value(name, False, fix)
        return (
            default
            if value is _MISSING
            else self.where.check_bool(value, self.key_of(name), fix=fix)
        )

    def require_bool(
        self, name: str, *, fix: str | None = None, missing_fix: str | None = None
    ) -> bool:
        """Field ``name`` as ``true``/``false``; missing or null refused."""
        return self.where.check_bool(
            self._value(name, True, missing_fix), self.key_of(name), fix=fix
        )

    def get_int(
        self,
        name: str,
        default: Any = None,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
        fix: str | None = None,
    ) -> Any:
        """Field ``name`` as an integer in range (:meth:`Where.check_int`), ``default`` when missing or null."""
        value = self._value(name, False, fix)
        if value is _MISSING:
            return default
        return self.where.check_int(
            value, self.key_of(name), minimum=minimum, maximum=maximum, fix=fix
        )

    def require_int(
        self,
        name: str,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
        fix: str | None = None,
        missing_fix: str | None = None,
    ) -> int:
        """Field ``name`` as an integer in range; missing or null refused."""
        return self.where.check_int(
            self._value(name, True, missing_fix),
            self.key_of(name),
            minimum=minimum,
            maximum=maximum,
            fix=fix,
        )

    def get_list(
        self, name: str, default: Any = None, *, empty_ok: bool = False, fix: str | None = None
    ) -> Any:
        """Field ``name`` as a list (:meth:`Where.check_list`), ``default`` when missing or null."""
        value = self._value(name, False, fix)
        return (
            default
            if value is _MISSING
            else self.where.check_list(value, self.key_of(name), empty_ok=empty_ok, fix=fix)
        )

    def require_list(
        self,
        name: str,
        *,
        empty_ok: bool = False,
        fix: str | None = None,
        missing_fix: str | None = None,
    ) -> list:
        """Field ``name`` as a list; missing or null refused."""
        return self.where.check_list(
            self._value(name, True, missing_fix), self.key_of(name), empty_ok=empty_ok, fix=fix
        )

    def get_choice(
        self,
        name: str,
        allowed: Sequence[Any],
        default: Any = None,
        *,
        what: str | None = None,
        fix: str | None = None,
    ) -> Any:
        """Field ``name`` if one of ``allowed`` (:meth:`Where.check_choice`), ``default`` when missing or null."""
        value = self._value(name, False, fix)
        if value is _MISSING:
            return default
        return self.where.check_choice(
            value, self.key_of(name), allowed, what=what or name, fix=fix
        )

    @overload
    def get_fields(self, name: str, *, empty: Literal[True], fix: str | None = None) -> Fields: ...

    @overload
    def get_fields(
        self, name: str, *, empty: bool = False, fix: str | None = None
    ) -> Fields | None: ...

    def get_fields(
        self, name: str, *, empty: bool = False, fix: str | None = None
    ) -> Fields | None:
        """Field ``name`` as :class:`Fields` (:meth:`Where.fields`); when missing or null ``None``,
        or with ``empty`` an empty :class:`Fields` at that key (its readers return their defaults)."""
        value = self._value(name, False, fix)
        if value is _MISSING:
            return Fields({}, key=self.key_of(name), where=self.where) if empty else None
        return self.where.fields(value, self.key_of(name), fix=fix)

    def require_fields(
        self, name: str, *, fix: str | None = None, missing_fix: str | None = None
    ) -> Fields:
        """Field ``name`` as :class:`Fields`; missing or null refused."""
        return self.where.fields(self._value(name, True, missing_fix), self.key_of(name), fix=fix)

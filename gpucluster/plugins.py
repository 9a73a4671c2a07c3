"""Plugin manager: loads built-in and third-party plugins through one entry-point group.

Built-ins (``gpucluster_aks``, ``gpucluster_nvke``, ``gpucluster_oke``) are declared under the
``gpucluster`` entry-point group in ``pyproject.toml`` exactly as a third party declares its
own, and are loaded by ``load_setuptools_entrypoints("gpucluster")``.

``GPUCLUSTER_PLUGINS`` (comma-separated module names) loads extra plugin modules without
installing them (handy for tests and local development). ``GPUCLUSTER_DISABLE_PLUGINS``
(comma-separated plugin names) blocks plugins by name.
"""

from __future__ import annotations

import copy
import importlib
import os
import pickle
from collections.abc import Mapping, Sequence
from typing import Any

import pluggy

from gpucluster import hookspecs
from gpucluster.errors import GpuclusterError, PluginError, allowed_list
from gpucluster.model import ClusterSpec, Platform, absolute_keys

ENTRY_POINT_GROUP = "gpucluster"

_PM: pluggy.PluginManager | None = None


def get_plugin_manager(*, reload: bool = False) -> pluggy.PluginManager:
    """Return the process-wide plugin manager, loading plugins on first use.

    Raises:
        PluginError: a plugin module failed to import (names the plugin).
    """
    global _PM
    if _PM is not None and not reload:
        return _PM
    _PM = new_plugin_manager()
    return _PM


def swap_plugin_manager(pm: pluggy.PluginManager | None) -> pluggy.PluginManager | None:
    """Make ``pm`` the process-wide manager (``None``: load afresh on next use); return the previous one.

    For :func:`gpucluster.sdk.testing.registered`, which restores the previous manager afterwards.
    """
    global _PM
    previous, _PM = _PM, pm
    return previous


def load_entry_points(pm: pluggy.PluginManager, group: str) -> int:
    """``pm.load_setuptools_entrypoints(group)``: every ``group`` entry point not registered or
    blocked already, in ``importlib.metadata``'s order, with pluggy's distribution records.

    Returns:
        the number of plugins registered.

    Raises:
        whatever importing or registering a plugin raises (the caller names the group).
    """
    return pm.load_setuptools_entrypoints(group)


def _names(value: str) -> list[str]:
    return [s.strip() for s in value.split(",") if s.strip()]


def new_plugin_manager(
    *, entry_points: bool = True, disable: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> pluggy.PluginManager:
    """A plugin manager with the hookspecs, the installed plugins and ``GPUCLUSTER_PLUGINS`` modules.

    Args:
        entry_points: load the distributions' ``gpucluster`` entry points (built-ins included).
        disable: plugin names to block, besides ``GPUCLUSTER_DISABLE_PLUGINS`` of ``env``.
        env: where ``GPUCLUSTER_PLUGINS``/``GPUCLUSTER_DISABLE_PLUGINS`` are read (default
            ``os.environ``; ``{}`` ignores them).

    Raises:
        PluginError: a plugin distribution or module fails to load, or a hook implementation is
            invalid (names the plugin).
    """
    env = os.environ if env is None else env
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    for name in [*_names(env.get("GPUCLUSTER_DISABLE_PLUGINS", "")), *disable]:
        pm.set_blocked(name)
    if entry_points:
        try:
            load_entry_points(pm, ENTRY_POINT_GROUP)
        except Exception as exc:  # a broken third-party distribution must be named
            raise PluginError(
                f"loading plugins of entry-point group '{ENTRY_POINT_GROUP}' failed: {type(exc).__name__}: {exc}",
                fix="uninstall or fix the failing plugin distribution (see the traceback with GPUCLUSTER_DEBUG=1)",
            ) from exc
    for modname in _names(env.get("GPUCLUSTER_PLUGINS", "")):
        if pm.get_plugin(modname) is not None or pm.is_blocked(modname):
            continue
        try:
            module = importlib.import_module(modname)
        except Exception as exc:
            raise PluginError(
                f"plugin module '{modname}' from GPUCLUSTER_PLUGINS failed to import: {type(exc).__name__}: {exc}",
                key="GPUCLUSTER_PLUGINS",
                fix="fix the module or remove it from GPUCLUSTER_PLUGINS",
            ) from exc
        register_plugin(
            pm, module, name=modname, origin="from GPUCLUSTER_PLUGINS ", key="GPUCLUSTER_PLUGINS"
        )
    check_hookimpls(pm)
    return pm


def register_plugin(
    pm: pluggy.PluginManager,
    plugin: object,
    *,
    name: str | None = None,
    origin: str = "",
    key: str | None = None,
) -> None:
    """Register ``plugin`` unless it is registered already (e.g. through its entry point).

    Raises:
        PluginError: a hook implementation's signature does not match its hookspec.
    """
    if pm.is_registered(plugin):
        return
    name = name or getattr(plugin, "__name__", None)
    try:
        pm.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:
        raise PluginError(
            f"plugin '{name}' {origin}is invalid: {_one_line(exc)}",
            key=key,
            fix="match the hook signatures of gpucluster.sdk.hookspecs (docs/plugins.md)",
        ) from exc


def _one_line(exc: Exception) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def check_hookimpls(pm: pluggy.PluginManager) -> None:
    """Refuse unknown hook names (typos) and hook wrappers, naming the plugin.

    Raises:
        PluginError: a ``gpucluster_*`` function with ``@hookimpl`` that no hookspec declares,
            or an implementation marked ``hookwrapper``/``wrapper`` (gpucluster calls each
            implementation itself, so wrappers would never wrap anything).
    """
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(
            f"plugin '{pm.get_name(exc.plugin) or exc.plugin}' is invalid: {_one_line(exc)}",
            allowed=", ".join(sorted(n for n in dir(hookspecs) if n.startswith("gpucluster_"))),
            fix="rename the hook implementation to one of the allowed hooks (docs/plugins.md)",
        ) from exc
    for caller in pm.hook.__dict__.values():
        if not isinstance(caller, pluggy.HookCaller):
            continue
        for impl in caller.get_hookimpls():
            if impl.hookwrapper or getattr(impl, "wrapper", False):
                raise PluginError(
                    f"plugin '{impl.plugin_name}' implements {caller.name} as a hook wrapper, which gpucluster does not support",
                    fix="drop hookwrapper/wrapper from @hookimpl; use tryfirst/trylast to order implementations",
                )


SERVICE_SCOPED_ARG = "cluster"
"""Hooks with this argument are service-scoped (see :func:`call_hook_attributed`)."""


def _plugin_platforms(pm: pluggy.PluginManager) -> list[tuple[str, object, Platform]]:
    """``(plugin name, plugin object, Platform)`` of every plugin's ``gpucluster_platforms``, in call order.

    Raises:
        PluginError: a plugin raises, returns a non-list or a non-Platform (names the plugin).
    """
    return [
        (impl.plugin_name, impl.plugin, platform)
        for impl, platform in _list_items(
            pm, "gpucluster_platforms", Platform, "gpucluster.sdk.Platform", {}
        )
    ]


def _services_of_plugins(pm: pluggy.PluginManager) -> dict[int, frozenset[str]]:
    """``id(plugin) -> services it declares`` (plugins declaring none are absent).

    Cached on the manager per set of registered plugins (``gpucluster_platforms`` must be pure).
    """
    key = tuple(sorted(id(p) for p in pm.get_plugins()))
    cached = getattr(pm, "_gpucluster_services", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    services: dict[int, set[str]] = {}
    for _, plugin, platform in _plugin_platforms(pm):
        services.setdefault(id(plugin), set()).add(platform.service)
    frozen = {k: frozenset(v) for k, v in services.items()}
    pm._gpucluster_services = (key, frozen)  # type: ignore[attr-defined]
    return frozen


def _scoped_impls(pm: pluggy.PluginManager, hook_name: str, kwargs: dict[str, Any]) -> list[Any]:
    """The implementations of ``hook_name`` to call, in call order (tryfirst, later-registered, trylast).

    For a service-scoped hook (one with a ``cluster`` argument), a plugin that declares platforms
    is called only for clusters of its own services; a plugin that declares none (a policy pack,
    an organisation's rules) is called for every cluster.
    """
    impls = list(reversed(getattr(pm.hook, hook_name).get_hookimpls()))
    cluster = kwargs.get(SERVICE_SCOPED_ARG)
    criteria = getattr(cluster, "criteria", None)
    if criteria is None:
        return impls
    services = _services_of_plugins(pm)
    return [
        impl
        for impl in impls
        if criteria.service in services.get(id(impl.plugin), (criteria.service,))
    ]


_COPY_ERRORS = (pickle.PicklingError, TypeError, AttributeError)
"""What pickling a value no pickle can hold raises (a plugin's value holding a lambda, say)."""


def _copied(value: Any) -> tuple[Any, bytes | None]:
    """``(copy, pickle of the original or None)``: a deep copy made with :mod:`pickle` (hook
    arguments are dataclasses and plain values; several times faster than
    :func:`copy.deepcopy`), or with :func:`copy.deepcopy` for a value pickle cannot hold."""
    try:
        blob = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
        return pickle.loads(blob), blob
    except _COPY_ERRORS:
        return copy.deepcopy(value), None


_SHARED_COPIES: dict[int, tuple[Any, Any, bytes | None]] = {}
"""``id(original) -> (original, copy, pickle)`` of recent read-only copies (at most 64; cleared
when full): one plan hands the same cluster, recipe and components to several hook calls."""


def _shared_copy(value: Any) -> tuple[Any, bytes | None]:
    """:func:`_copied` of ``value``, or the copy an earlier hook call got when that copy still
    equals ``value`` (every implementation's copies are checked after it returns, so a copy
    that was handed out and still equals its original is as good as a new one)."""
    hit = _SHARED_COPIES.get(id(value))
    if hit is not None and hit[0] is value and hit[1] == value:
        return hit[1], hit[2]
    copied, blob = _copied(value)
    if len(_SHARED_COPIES) >= 64:
        _SHARED_COPIES.clear()
    _SHARED_COPIES[id(value)] = (value, copied, blob)
    return copied, blob


def _differs(copied: Any, original: Any, blob: bytes | None) -> bool:
    """Whether ``copied`` (from :func:`_copied`) was changed: it no longer equals ``original``
    (``==``, deep for dataclasses, dicts and lists) and pickles to other bytes than a fresh copy
    of ``blob`` (so a NaN, unequal to itself, is no change; loading interns attribute names, so
    the original's own bytes are no measure)."""
    if copied == original:
        return False
    if blob is None:
        return True
    try:
        return pickle.dumps(copied, pickle.HIGHEST_PROTOCOL) != pickle.dumps(
            pickle.loads(blob), pickle.HIGHEST_PROTOCOL
        )
    except _COPY_ERRORS:  # the plugin put something unpicklable in it
        return True


class _ReadOnlyChange(Exception):
    """A plugin called a changing method of a :class:`_ReadOnlyMapping` (``argument``, ``key``)."""

    def __init__(self, argument: str, key: Any = None):
        super().__init__(argument, key)
        self.argument, self.key = argument, key


class _ReadOnlyMapping(Mapping):
    """A hook's read-only mapping argument (``components``): the original's keys, and a copy of
    each value made the first time it is read (:func:`_copied`), so a hook that reads two
    components copies two. Adding, replacing or removing a key raises :class:`_ReadOnlyChange`;
    :meth:`changed_key` finds a value copy that was changed."""

    def __init__(self, argument: str, originals: Mapping[Any, Any]):
        self._argument = argument
        self._originals = originals
        self._copies: dict[Any, tuple[Any, bytes | None]] = {}

    def __getitem__(self, key: Any) -> Any:
        hit = self._copies.get(key)
        if hit is None:
            hit = self._copies[key] = _shared_copy(self._originals[key])
        return hit[0]

    def __iter__(self):
        return iter(self._originals)

    def __len__(self) -> int:
        return len(self._originals)

    def __contains__(self, key: object) -> bool:
        return key in self._originals

    def __repr__(self) -> str:
        return f"<read-only {self._argument}: {', '.join(map(str, self._originals))}>"

    def __reduce__(self):  # copy.deepcopy / pickle of the argument: a plain dict of copies
        return dict, (dict(self.items()),)

    def _refuse(self, key: Any = None, *args: Any, **kwargs: Any):
        raise _ReadOnlyChange(self._argument, key)

    __setitem__ = __delitem__ = pop = popitem = clear = update = setdefault = _refuse

    def changed_key(self) -> Any:
        """The first key (in the original's order) whose value copy was changed, else None."""
        for key, (copied, blob) in self._copies.items():
            if _differs(copied, self._originals[key], blob):
                return key
        return None


class _ReadOnlyCopies:
    """A hook call's read-only arguments (:data:`gpucluster.hookspecs.READ_ONLY_ARGS`) as the
    implementations receive them, and the check that an implementation left them as they were.

    A mapping (``components``) becomes a :class:`_ReadOnlyMapping`; any other argument a deep
    copy (:func:`_copied`). One set serves every implementation of one hook call: each is
    checked right after it returns, so the next one sees unchanged copies.
    """

    def __init__(self, hook_name: str, kwargs: dict[str, Any]):
        self.hook_name = hook_name
        self.kwargs = dict(kwargs)
        self.snapshots: dict[str, tuple[Any, bytes | None]] = {}
        for name in hookspecs.READ_ONLY_ARGS.get(hook_name, ()):
            if name not in kwargs:
                continue
            value = kwargs[name]
            if isinstance(value, Mapping):
                self.kwargs[name] = _ReadOnlyMapping(name, value)
                continue
            self.kwargs[name], blob = _shared_copy(value)
            self.snapshots[name] = (value, blob)

    def error(self, plugin_name: str, argument: str, component: Any = None) -> PluginError:
        """The one error of ``plugin_name`` having changed ``argument`` (names the cluster and,
        for ``component``/``components``, the component)."""
        cluster = self.snapshots.get(
            SERVICE_SCOPED_ARG, (self.kwargs.get(SERVICE_SCOPED_ARG), None)
        )[0]
        return PluginError(
            f"plugin '{plugin_name}' changed its read-only argument '{argument}' in hook {self.hook_name}",
            cluster=getattr(cluster, "name", None),
            component=str(component) if component is not None else None,
            fix="leave the hook's arguments as they are and return the change instead (docs/plugins.md, "
            "Read-only arguments)",
        )

    def check(self, plugin_name: str) -> None:
        """Raise if ``plugin_name``'s implementation changed a read-only argument.

        Raises:
            PluginError: naming the plugin, the hook, the argument, the cluster and (for a
                ``component`` or ``components`` argument) the component it changed.
        """
        for name, value in self.kwargs.items():
            if isinstance(value, _ReadOnlyMapping):
                key = value.changed_key()
                if key is not None:
                    raise self.error(plugin_name, name, key)
            elif name in self.snapshots:
                original, blob = self.snapshots[name]
                if _differs(value, original, blob):
                    raise self.error(
                        plugin_name,
                        name,
                        getattr(original, "name", None) if name == "component" else None,
                    )


def _call(
    pm: pluggy.PluginManager, hook_name: str, firstresult: bool, kwargs: dict[str, Any]
) -> list[tuple[Any, Any]]:
    """``[(hookimpl, result), ...]`` of the scoped implementations, None results skipped.

    The read-only arguments (:data:`gpucluster.hookspecs.READ_ONLY_ARGS`) reach the
    implementations as copies (:class:`_ReadOnlyCopies`), made only when an implementation is
    called; the caller's objects are never handed to a plugin.
    """
    results: list[tuple[Any, Any]] = []
    impls = _scoped_impls(pm, hook_name, kwargs)
    guard = (
        _ReadOnlyCopies(hook_name, kwargs)
        if impls and hook_name in hookspecs.READ_ONLY_ARGS
        else None
    )
    call_kwargs = guard.kwargs if guard is not None else kwargs
    for impl in impls:
        args = {name: call_kwargs[name] for name in impl.argnames}
        try:
            result = impl.function(**args)
        except _ReadOnlyChange as change:
            assert guard is not None
            raise guard.error(impl.plugin_name, change.argument, change.key) from None
        except GpuclusterError as err:
            cluster = kwargs.get(SERVICE_SCOPED_ARG)
            if isinstance(
                cluster, ClusterSpec
            ):  # the plugin's keys are relative to the cluster document
                err.problems = absolute_keys(cluster, err.problems)
                err.args = (err.render(),)
            raise
        except Exception as exc:
            raise PluginError(
                f"plugin '{impl.plugin_name}' failed in hook {hook_name}: {type(exc).__name__}: {exc}",
                cluster=getattr(kwargs.get(SERVICE_SCOPED_ARG), "name", None),
                fix=f"fix or disable the plugin (GPUCLUSTER_DISABLE_PLUGINS={impl.plugin_name})",
            ) from exc
        if guard is not None:
            guard.check(impl.plugin_name)
        if result is None:
            continue
        results.append((impl, result))
        if firstresult:
            break
    return results


def call_hook_attributed(
    hook_name: str,
    *,
    pm: pluggy.PluginManager | None = None,
    firstresult: bool | None = None,
    **kwargs: Any,
) -> list[tuple[str, Any]]:
    """Call a hook and keep who returned what: ``[(plugin name, result), ...]``.

    Implementations run in pluggy's order (tryfirst first, trylast last, otherwise the
    later-registered first); ``None`` results are skipped. ``firstresult`` (default: the
    hookspec's) stops after the first non-None result. Service-scoped hooks (those with a
    ``cluster`` argument) reach a plugin that declares platforms only for clusters of its own
    services, and a plugin that declares none for every cluster.

    Raises:
        GpuclusterError: re-raised from a plugin (it is already a user-facing problem), its keys
            made absolute for a service-scoped hook (:func:`gpucluster.model.absolute_key`:
            the plugin's ``pools[1].gpu`` is the file's ``clusters[<i>].pools[1].gpu``).
        PluginError: any other exception, with the plugin name and hook name.
    """
    pm = pm or get_plugin_manager()
    caller = getattr(pm.hook, hook_name)
    if firstresult is None:
        firstresult = bool(caller.spec and caller.spec.opts.get("firstresult"))
    return [
        (impl.plugin_name, result) for impl, result in _call(pm, hook_name, firstresult, kwargs)
    ]


def call_hook(
    hook_name: str,
    *,
    pm: pluggy.PluginManager | None = None,
    firstresult: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Call a hook, naming the plugin when one raises (see :func:`call_hook_attributed`).

    Returns:
        list of non-None results, or for firstresult hooks the first non-None result (or None).

    Raises:
        GpuclusterError: re-raised from a plugin, keys made absolute (see :func:`call_hook_attributed`).
        PluginError: any other exception, with the plugin name and hook name.
    """
    pm = pm or get_plugin_manager()
    caller = getattr(pm.hook, hook_name)
    if firstresult is None:
        firstresult = bool(caller.spec and caller.spec.opts.get("firstresult"))
    results = [
        result
        for _, result in call_hook_attributed(hook_name, pm=pm, firstresult=firstresult, **kwargs)
    ]
    if firstresult:
        return results[0] if results else None
    return results


def _list_items(
    pm: pluggy.PluginManager, hook_name: str, item_type: Any, what: str, kwargs: dict[str, Any]
) -> list[tuple[Any, Any]]:
    out: list[tuple[Any, Any]] = []
    cluster = getattr(kwargs.get(SERVICE_SCOPED_ARG), "name", None)
    for impl, batch in _call(pm, hook_name, False, kwargs):
        if not isinstance(batch, (list, tuple)):
            raise PluginError(
                f"plugin '{impl.plugin_name}' returned {type(batch).__name__} from {hook_name}",
                cluster=cluster,
                allowed=f"a list of {what}, or None",
            )
        for item in batch:
            if not isinstance(item, item_type):
                raise PluginError(
                    f"plugin '{impl.plugin_name}' returned {type(item).__name__} from {hook_name}",
                    cluster=cluster,
                    allowed=f"{what} instances",
                )
            out.append((impl, item))
    return out


def call_list_hook(
    hook_name: str,
    item_type: type | tuple[type, ...],
    *,
    what: str,
    pm: pluggy.PluginManager | None = None,
    **kwargs: Any,
) -> list[tuple[str, Any]]:
    """Call a hook returning lists and type-check every item: ``[(plugin name, item), ...]``.

    The items of all implementations, flattened, in hook call order (see
    :func:`call_hook_attributed`, including the service scoping); ``None`` results are skipped.

    Args:
        hook_name: a hook whose implementations return ``list[item_type] | None``.
        item_type: the class (or classes) every item must be an instance of.
        what: the items as the user reads them in errors (``"gpucluster.sdk.GateSpec"``).

    Raises:
        PluginError: a result is not a list/tuple, or an item is not an ``item_type`` (names the
            plugin, the hook and what was returned); or a plugin raised (see :func:`call_hook_attributed`).
        GpuclusterError: re-raised from a plugin as-is.
    """
    pm = pm or get_plugin_manager()
    return [
        (impl.plugin_name, item)
        for impl, item in _list_items(pm, hook_name, item_type, what, kwargs)
    ]


def platforms(pm: pluggy.PluginManager | None = None) -> dict[str, Platform]:
    """All declared platforms by service.

    Raises:
        PluginError: two plugins declare the same service, or a plugin returns a non-Platform.
    """
    pm = pm or get_plugin_manager()
    owners: dict[str, str] = {}
    found: dict[str, Platform] = {}
    for plugin_name, _, platform in _plugin_platforms(pm):
        if platform.service in owners:
            raise PluginError(
                f"service '{platform.service}' is declared by both plugin '{owners[platform.service]}' "
                f"and plugin '{plugin_name}'",
                fix="disable one of them with GPUCLUSTER_DISABLE_PLUGINS",
            )
        owners[platform.service] = plugin_name
        found[platform.service] = platform
    return dict(sorted(found.items()))


def platform_for(
    service: str, *, file: str | None = None, key: str = "criteria.service"
) -> Platform:
    """The :class:`Platform` serving ``service``.

    Raises:
        GpuclusterError: no plugin serves it (lists the services that are served).
    """
    known = platforms()
    if service not in known:
        raise GpuclusterError(
            f"unknown service '{service}'",
            file=file,
            key=key,
            allowed=allowed_list(known),
            fix="use one of the allowed services or install the plugin that provides it",
        )
    return known[service]


def plugin_inventory(pm: pluggy.PluginManager | None = None) -> dict[str, Any]:
    """What is loaded, for ``gpucluster plugins`` (llm's ``llm plugins``).

    Returns:
        ``{"plugins": [...], "blocked": [names]}``, both sorted by name. Each plugin is
        ``{"name", "module", "source", "distribution", "hooks", "tryfirst", "trylast",
        "platforms"}``: ``source`` is ``entry-point`` (an installed distribution's ``gpucluster``
        entry point, built-ins included), ``GPUCLUSTER_PLUGINS`` or ``registered``;
        ``distribution`` is ``{"name", "version"}`` or None; ``hooks`` the names of the hooks
        it implements, ``tryfirst``/``trylast`` those marked so, sorted; ``platforms`` are ``{"service", "displayName",
        "provisionsCluster"}`` from the plugin's own ``gpucluster_platforms``. Duplicate services
        are not checked here (see :func:`platforms`).

    Raises:
        PluginError: a plugin's ``gpucluster_platforms`` raises or returns a non-Platform.
    """
    pm = pm or get_plugin_manager()
    dists = {id(plugin): dist for plugin, dist in pm.list_plugin_distinfo()}
    env_names = {
        s.strip() for s in os.environ.get("GPUCLUSTER_PLUGINS", "").split(",") if s.strip()
    }
    plugins_out = []
    blocked = []
    declared_all = _plugin_platforms(pm)
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda item: item[0]):
        if plugin is None:
            blocked.append(name)
            continue
        dist = dists.get(id(plugin))
        source = (
            "entry-point"
            if dist is not None
            else "GPUCLUSTER_PLUGINS"
            if name in env_names
            else "registered"
        )
        hooks: list[str] = []
        order: dict[str, list[str]] = {"tryfirst": [], "trylast": []}
        declared = [p for _, owner, p in declared_all if owner is plugin]
        for caller in sorted(pm.get_hookcallers(plugin) or [], key=lambda c: c.name):
            for impl in caller.get_hookimpls():
                if impl.plugin is not plugin:
                    continue
                hooks.append(caller.name)
                for flag in order:
                    if getattr(impl, flag):
                        order[flag].append(caller.name)
        plugins_out.append(
            {
                "name": name,
                "module": getattr(plugin, "__name__", type(plugin).__name__),
                "source": source,
                "distribution": {"name": dist.project_name, "version": dist.version}
                if dist is not None
                else None,
                "hooks": hooks,
                **order,
                "platforms": [
                    {
                        "service": p.service,
                        "displayName": p.display_name,
                        "provisionsCluster": p.provisions_cluster,
                    }
                    for p in sorted(declared, key=lambda p: p.service)
                ],
            }
        )
    return {"plugins": plugins_out, "blocked": blocked}

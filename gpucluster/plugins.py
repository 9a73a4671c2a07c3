"""Plugin manager: loads built-in and third-party plugins through one entry-point group.

Built-ins (``gpucluster_aks``, ``gpucluster_nvke``, ``gpucluster_oke``) are declared under the
``gpucluster`` entry-point group in ``pyproject.toml`` exactly as a third party declares its
own, and are loaded by ``load_setuptools_entrypoints("gpucluster")``.

``GPUCLUSTER_PLUGINS`` (comma-separated module names) loads extra plugin modules without
installing them (handy for tests and local development). ``GPUCLUSTER_DISABLE_PLUGINS``
(comma-separated plugin names) blocks plugins by name.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable

import pluggy

from gpucluster.errors import GpuclusterError, PluginError, allowed_list
from gpucluster.sdk import hookspecs
from gpucluster.sdk.types import Platform

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
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    for name in filter(None, (s.strip() for s in os.environ.get("GPUCLUSTER_DISABLE_PLUGINS", "").split(","))):
        pm.set_blocked(name)
    try:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    except Exception as exc:  # a broken third-party distribution must be named
        raise PluginError(
            f"loading plugins of entry-point group '{ENTRY_POINT_GROUP}' failed: {type(exc).__name__}: {exc}",
            fix="uninstall or fix the failing plugin distribution (see the traceback with GPUCLUSTER_DEBUG=1)",
        ) from exc
    for modname in filter(None, (s.strip() for s in os.environ.get("GPUCLUSTER_PLUGINS", "").split(","))):
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
        if pm.is_registered(module):
            continue  # already loaded through its distribution's entry point
        try:
            pm.register(module, name=modname)
        except pluggy.PluginValidationError as exc:
            raise PluginError(
                f"plugin '{modname}' from GPUCLUSTER_PLUGINS is invalid: {_one_line(exc)}",
                key="GPUCLUSTER_PLUGINS",
                fix="match the hook signatures of gpucluster.sdk.hookspecs (docs/plugins.md)",
            ) from exc
    _check_hookimpls(pm)
    _PM = pm
    return pm


def _one_line(exc: Exception) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def _check_hookimpls(pm: pluggy.PluginManager) -> None:
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


def call_hook_attributed(
    hook_name: str, *, pm: pluggy.PluginManager | None = None, firstresult: bool | None = None, **kwargs: Any
) -> list[tuple[str, Any]]:
    """Call a hook and keep who returned what: ``[(plugin name, result), ...]``.

    Implementations run in pluggy's order (tryfirst first, trylast last, otherwise the
    later-registered first); ``None`` results are skipped. ``firstresult`` (default: the
    hookspec's) stops after the first non-None result.

    Raises:
        GpuclusterError: re-raised from a plugin as-is (it is already a user-facing problem).
        PluginError: any other exception, with the plugin name and hook name.
    """
    pm = pm or get_plugin_manager()
    caller = getattr(pm.hook, hook_name)
    if firstresult is None:
        firstresult = bool(caller.spec and caller.spec.opts.get("firstresult"))
    results: list[tuple[str, Any]] = []
    for impl in reversed(caller.get_hookimpls()):
        args = {name: kwargs[name] for name in impl.argnames}
        try:
            result = impl.function(**args)
        except GpuclusterError:
            raise
        except Exception as exc:
            raise PluginError(
                f"plugin '{impl.plugin_name}' failed in hook {hook_name}: {type(exc).__name__}: {exc}",
                cluster=getattr(kwargs.get("cluster"), "name", None),
                fix=f"fix or disable the plugin (GPUCLUSTER_DISABLE_PLUGINS={impl.plugin_name})",
            ) from exc
        if result is None:
            continue
        results.append((impl.plugin_name, result))
        if firstresult:
            break
    return results


def call_hook(hook_name: str, *, pm: pluggy.PluginManager | None = None, firstresult: bool | None = None, **kwargs: Any) -> Any:
    """Call a hook, naming the plugin when one raises (see :func:`call_hook_attributed`).

    Returns:
        list of non-None results, or for firstresult hooks the first non-None result (or None).

    Raises:
        GpuclusterError: re-raised from a plugin as-is (it is already a user-facing problem).
        PluginError: any other exception, with the plugin name and hook name.
    """
    pm = pm or get_plugin_manager()
    caller = getattr(pm.hook, hook_name)
    if firstresult is None:
        firstresult = bool(caller.spec and caller.spec.opts.get("firstresult"))
    results = [result for _, result in call_hook_attributed(hook_name, pm=pm, firstresult=firstresult, **kwargs)]
    if firstresult:
        return results[0] if results else None
    return results


def platforms(pm: pluggy.PluginManager | None = None) -> dict[str, Platform]:
    """All declared platforms by service.

    Raises:
        PluginError: two plugins declare the same service, or a plugin returns a non-Platform.
    """
    pm = pm or get_plugin_manager()
    owners: dict[str, str] = {}
    found: dict[str, Platform] = {}
    caller = pm.hook.gpucluster_platforms
    for impl in reversed(caller.get_hookimpls()):
        try:
            declared = impl.function() or []
        except Exception as exc:
            raise PluginError(f"plugin '{impl.plugin_name}' failed in hook gpucluster_platforms: {exc}") from exc
        for platform in declared:
            if not isinstance(platform, Platform):
                raise PluginError(
                    f"plugin '{impl.plugin_name}' returned {type(platform).__name__} from gpucluster_platforms",
                    allowed="gpucluster.sdk.Platform instances",
                )
            if platform.service in owners:
                raise PluginError(
                    f"service '{platform.service}' is declared by both plugin '{owners[platform.service]}' "
                    f"and plugin '{impl.plugin_name}'",
                    fix="disable one of them with GPUCLUSTER_DISABLE_PLUGINS",
                )
            owners[platform.service] = impl.plugin_name
            found[platform.service] = platform
    return dict(sorted(found.items()))


def platform_for(service: str, *, file: str | None = None, key: str = "criteria.service") -> Platform:
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
    env_names = {s.strip() for s in os.environ.get("GPUCLUSTER_PLUGINS", "").split(",") if s.strip()}
    plugins_out = []
    blocked = []
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda item: item[0]):
        if plugin is None:
            blocked.append(name)
            continue
        dist = dists.get(id(plugin))
        source = "entry-point" if dist is not None else "GPUCLUSTER_PLUGINS" if name in env_names else "registered"
        hooks: list[str] = []
        order: dict[str, list[str]] = {"tryfirst": [], "trylast": []}
        declared: list[Platform] = []
        for caller in sorted(pm.get_hookcallers(plugin) or [], key=lambda c: c.name):
            for impl in caller.get_hookimpls():
                if impl.plugin is not plugin:
                    continue
                hooks.append(caller.name)
                for flag in order:
                    if getattr(impl, flag):
                        order[flag].append(caller.name)
                if caller.name == "gpucluster_platforms":
                    try:
                        result = impl.function() or []
                    except Exception as exc:
                        raise PluginError(
                            f"plugin '{name}' failed in hook gpucluster_platforms: {type(exc).__name__}: {exc}",
                            fix=f"fix or disable the plugin (GPUCLUSTER_DISABLE_PLUGINS={name})",
                        ) from exc
                    for platform in result:
                        if not isinstance(platform, Platform):
                            raise PluginError(
                                f"plugin '{name}' returned {type(platform).__name__} from gpucluster_platforms",
                                allowed="gpucluster.sdk.Platform instances",
                            )
                        declared.append(platform)
        plugins_out.append(
            {
                "name": name,
                "module": getattr(plugin, "__name__", type(plugin).__name__),
                "source": source,
                "distribution": {"name": dist.project_name, "version": dist.version} if dist is not None else None,
                "hooks": hooks,
                **order,
                "platforms": [
                    {"service": p.service, "displayName": p.display_name, "provisionsCluster": p.provisions_cluster}
                    for p in sorted(declared, key=lambda p: p.service)
                ],
            }
        )
    return {"plugins": plugins_out, "blocked": blocked}
